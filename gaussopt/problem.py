"""A benchmark problem: a system, its initial state, recommended settings and a reference."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from .system import System

__all__ = ["Problem", "ga_settings"]


def ga_settings(t_end: float, horizon: float = 0.2, dt: float = 1e-3) -> dict:
    """Per-solver settings for the GA row of a comparison.

    The GA costs milliseconds per step (100-1000 times the closed form), so it
    runs the first ``horizon`` seconds only, with the paper's fixed-step
    integration (``rk4`` at ``dt``).
    """
    return {"method": "rk4", "dt": dt, "t_span": (0.0, min(float(t_end), horizon))}


@dataclass
class Problem:
    """A ready-to-run problem (see the modules in ``problems/``).

    Attributes
    ----------
    name : str
    system : System
    q0, v0 : ndarray, shape (n,)
    t_span : (float, float)
    description : str
        One paragraph with the source (paper, equation numbers).
    settings : dict
        Recommended keyword arguments of :func:`gaussopt.simulate`
        (``method``, ``rtol``, ``atol``, ``dt``, ``stabilization``, ...).
    outputs : callable
        ``outputs(q, v) -> dict`` of the physical quantities the paper plots,
        evaluated on arrays of shape (N, n).
    reference : callable, optional
        ``reference(t) -> dict`` of independent values of some of those
        outputs at the times ``t`` (analytic or a reduced ODE integrated at
        tight tolerance).
    params : dict
        The parameters the problem was built with.
    solver_settings : dict
        Per-solver overrides of ``settings``, by solver name. A key may also be
        an alias that names its solver, e.g. ``{"lagrange_baumgarte": {"solver":
        "lagrange", "stabilization": Baumgarte(10, 10)}}`` (the classical
        Lagrange-I + Baumgarte method as a row of a comparison), or give a
        ``"runner"``: ``runner(t_span=..., rtol=..., atol=..., t_eval=...,
        method=...) -> Trajectory`` for another formulation (quasi-velocities,
        Routh's equations) compared on the same footing.
    solvers : tuple of str
        The rows of :func:`gaussopt.compare.compare` for this problem.
    draw : callable, optional
        ``draw(ax, q)`` draws the mechanism at configuration ``q`` on a matplotlib Axes.
    model : object, optional
        The object the system was built from, when there is one (a
        :class:`gaussopt.multibody.Model`, a :class:`gaussopt.symbolic.SymbolicModel`).
    units : dict
        Units by name, for figures and tables: of the coordinates, the outputs and
        the parameters (e.g. ``{"th1": "rad", "y1": "m", "psi": "N m"}``), and
        ``"energy"`` (of ``system.energy``), ``"length"`` (of the drawings) and
        ``"constraints"`` (the units of the rows of ``Phi``, e.g. ``("m", "rad")``),
        from which the units of residuals, multipliers and ``M a - F`` follow
        (see :mod:`gaussopt.plotting`). Empty: units not stated.
    """

    name: str
    system: System
    q0: np.ndarray
    v0: np.ndarray
    t_span: tuple
    description: str = ""
    settings: dict = field(default_factory=dict)
    outputs: Callable[[np.ndarray, np.ndarray], dict] = lambda q, v: {}
    reference: Optional[Callable[[np.ndarray], dict]] = None
    params: dict = field(default_factory=dict)
    solver_settings: dict = field(default_factory=dict)
    solvers: tuple = ("closed_form", "lagrange", "qp", "ga")
    draw: Optional[Callable] = None
    model: Any = None
    units: dict = field(default_factory=dict)

    def simulate(self, solver: str = "closed_form", **overrides: Any):
        """Run :func:`gaussopt.simulate` with the recommended settings, updated by
        ``overrides`` (``solver_settings[solver]`` apply first)."""
        from .integrate import simulate

        kw = dict(self.settings)
        kw.update(self.solver_settings.get(solver, {}))
        kw.update(overrides)
        t_span = kw.pop("t_span", self.t_span)
        solver = kw.pop("solver", solver)
        runner = kw.pop("runner", None)
        if kw.get("t_eval") is not None:           # keep the output grid inside the span
            te = np.asarray(kw["t_eval"], dtype=float)
            kw["t_eval"] = te[(te >= t_span[0]) & (te <= t_span[1] + 1e-12 * abs(t_span[1]))]
            kw["t_eval"][-1:] = np.minimum(kw["t_eval"][-1:], t_span[1])
        if runner is not None:
            # another formulation (quasi-velocities, Routh's equations, ...) as a row
            keep = ("rtol", "atol", "t_eval", "method")
            return runner(t_span=tuple(t_span), **{k: v for k, v in kw.items() if k in keep})
        return simulate(self.system, t_span, self.q0, self.v0, solver=solver, **kw)
