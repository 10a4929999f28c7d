"""scipy's ``solve_ivp`` methods as gaussopt uses them.

Their classes by name (:data:`IVP_METHODS`; :mod:`scipy.integrate`, a third of a second,
is imported when a class is first asked for, not when gaussopt is), the Butcher tableaus
of the explicit methods read from scipy's own coefficients (:func:`tableau`, for the
compiled engine), and stepping a scipy solver one accepted step at a time
(:func:`drive_ivp`, for the quasi-velocity run of :mod:`gaussopt.quasi`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Callable

import numpy as np

import gaussopt.core.records as R

__all__ = ["IVP_METHODS", "RK_METHODS", "tableau", "drive_ivp"]


class ScipyMethods(Mapping):
    """solve_ivp's method classes by name; :mod:`scipy.integrate` (a third of a second)
    is imported when a class is first asked for, not when gaussopt is."""

    NAMES = ("RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA")

    def __getitem__(self, name):
        if name not in self.NAMES:
            raise KeyError(name)
        from scipy import integrate

        return getattr(integrate, name)

    def __iter__(self):
        return iter(self.NAMES)

    def __len__(self):
        return len(self.NAMES)


#: scipy's solve_ivp method classes by name
IVP_METHODS = ScipyMethods()
#: the explicit Runge--Kutta methods (a changed state restarts them in place: drive_ivp)
RK_METHODS = ("RK23", "RK45", "DOP853", "rk4", "euler")


_TABLEAUS: dict = {}


def tableau(method: str) -> "R.Tableau":
    """The Butcher tableau of an explicit method, from scipy's own coefficients: read
    once per scipy version from :mod:`scipy.integrate` and kept in gaussopt's cache
    (importing scipy.integrate costs a third of a second per process)."""
    tab = _TABLEAUS.get(method)
    if tab is not None:
        return tab
    import scipy

    from gaussopt.core.compiled import cache_dir

    path = cache_dir() / f"tableau-{method}-scipy{scipy.__version__}.npz"
    try:
        with np.load(path) as z:
            tab = R.Tableau(*(np.ascontiguousarray(z[k]) for k in R.Tableau._fields))
    except (OSError, KeyError, ValueError):
        tab = _scipy_tableau(method)
        try:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
            np.savez(tmp, **tab._asdict())
            os.replace(tmp, path)
        except OSError:
            pass
    _TABLEAUS[method] = tab
    return tab

def _scipy_tableau(method: str) -> "R.Tableau":
    """:func:`tableau` from scipy's coefficients."""
    z1, z2 = np.zeros(1), np.zeros((1, 1))
    if method in ("RK23", "RK45"):
        c = IVP_METHODS[method]
        A = np.zeros((c.n_stages, c.n_stages))
        A[:, :c.A.shape[1]] = c.A
        return R.Tableau(A, c.B.astype(float), c.C.astype(float), c.E.astype(float), z1, z1,
                         c.P.astype(float), z2, z1, z2)
    if method == "DOP853":
        from scipy.integrate._ivp import dop853_coefficients as d

        ns = d.N_STAGES
        return R.Tableau(d.A[:ns, :ns].copy(), d.B.copy(), d.C[:ns].copy(), z1, d.E3.copy(),
                         d.E5.copy(), z2, d.A[ns + 1:].copy(), d.C[ns + 1:].copy(), d.D.copy())
    return R.Tableau(z2, z1, z1, z1, z1, z1, z2, z2, z1, z2)


def drive_ivp(method: str, rhs: Callable, t0: float, y0: np.ndarray, t1: float, options: dict,
              max_steps: int, after_step: Callable, counter: dict) -> tuple[int, str]:
    """Step an :class:`~scipy.integrate.OdeSolver` one accepted step at a time.

    ``method`` is a key of :data:`IVP_METHODS` or of :data:`FIXED_STEP_METHODS`
    (these need ``options["dt"]``). ``after_step(ode, t_prev, dense) -> (y_new,
    changed)`` is called after every accepted step (``dense`` the step's
    interpolant): the caller records its outputs and may replace the state (a
    projection, a change of chart). A changed state restarts the method: in
    place for the explicit Runge--Kutta methods (their first-same-as-last
    derivative re-evaluated), with a new solver object started at the last step
    size for the others. ``counter["steps"]`` counts accepted steps (kept if an
    exception escapes).

    Returns
    -------
    status : int
        0 at the end of the span, -1 on ``max_steps`` or a failed step (solve_ivp's codes).
    message : str
    """
    cls = IVP_METHODS[method] if method in IVP_METHODS else None

    def start(tt, yy, h=None):
        kw = dict(options)
        if h:
            kw["first_step"] = min(h, t1 - tt) if t1 > tt else h
        return cls(rhs, tt, yy, t1, **kw)

    ode = start(t0, y0)
    while ode.status == "running":
        if counter["steps"] >= max_steps:
            return -1, f"Stopped after max_steps={max_steps} steps."
        t_prev = ode.t
        msg = ode.step()
        if ode.status == "failed":
            return -1, f"{method} failed at t={ode.t}: {msg}"
        counter["steps"] += 1
        y_new, changed = after_step(ode, t_prev, ode.dense_output())
        if changed and ode.status == "running":
            if method in RK_METHODS:
                ode.y = y_new.copy()
                ode.f = ode.fun(ode.t, ode.y)
            else:
                ode = start(ode.t, y_new, ode.step_size)
    return 0, "The integration reached the end of t_span."
