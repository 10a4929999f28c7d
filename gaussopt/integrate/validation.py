"""Validation of the arguments of :func:`gaussopt.simulate` (the role of scipy's
``_ivp/common.py``): each check raises a :class:`~gaussopt.core.exceptions.ModelError` that
names the argument, what was expected, what was found and the fix, before anything runs.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from gaussopt.core.exceptions import ModelError, ToleranceWarning
from gaussopt.integrate.stabilization import Baumgarte, Projection
from gaussopt.core.checks import as_state, check_count, check_real
from gaussopt.core.checks import found as _found
from gaussopt.model.system import System

__all__ = ["EPS", "MIN_RTOL", "check_real", "check_count", "validate_tol", "validate_simulate",
           "check_consistent"]

EPS = float(np.finfo(float).eps)
#: smallest relative tolerance a run uses: scipy's ``solve_ivp`` raises smaller ones to
#: ``100 eps`` (:func:`scipy.integrate._ivp.common.validate_tol`); below it the step-size
#: control asks for an error the rounding of one step already exceeds and shrinks the
#: step towards zero
MIN_RTOL = 100 * EPS









def _step(dt: Any, what: str) -> float:
    """``dt`` as a positive finite float, else ModelError ``what, found ...``."""
    if isinstance(dt, (bool, np.bool_)) or not isinstance(dt, numbers.Real):
        raise ModelError(f"{what}, found {_found(dt)}.")
    if not (np.isfinite(float(dt)) and float(dt) > 0):
        raise ModelError(f"{what}, found {float(dt)!r}.")
    return float(dt)


def validate_t_span(t_span: Any) -> tuple[float, float]:
    """``(t0, t_end)`` as floats: a finite pair with ``t_end > t0`` (no backward runs)."""
    try:
        t0, t1 = (float(x) for x in t_span)
    except (TypeError, ValueError) as e:
        raise ModelError(f"`t_span` must be a pair (t0, t_end), found {t_span!r}.") from e
    if not (np.isfinite(t0) and np.isfinite(t1) and t1 > t0):
        raise ModelError(f"`t_span` must be finite with t_end > t0, found ({t0}, {t1}).")
    return t0, t1


def validate_tol(rtol: Any, atol: Any, stacklevel: int = 2) -> tuple[float, float]:
    """The tolerances of a run, as scipy's ``validate_tol``: real and positive, and
    ``rtol`` below ``100 eps`` raised to it with a :class:`ToleranceWarning`.

    ``atol`` is absolute (it carries the units of the state), so it is not raised; but
    with ``rtol`` at ``100 eps`` an ``atol`` far below the rounding of the state only
    weighs components that are zero, which is harmless.

    Parameters
    ----------
    rtol, atol : float
    stacklevel : int
        Of the warning, counted from the caller of this function.

    Returns
    -------
    (rtol, atol) : (float, float)
    """
    hint = "pass a number such as 1e-9"
    r = check_real(rtol, "rtol", hint=hint)
    a = check_real(atol, "atol", hint=hint)
    if r < MIN_RTOL:
        warnings.warn(f"`rtol` = {r:.3g} is below what double precision can deliver; "
                      f"it is raised to 100 * eps = {MIN_RTOL:.3g} (as scipy's solve_ivp does).",
                      ToleranceWarning, stacklevel=stacklevel + 1)
        r = MIN_RTOL
    return r, a


def validate_simulate(system, t_span, q0, v0, method, solver, dt, rtol, atol, t_eval,
                      stabilization, dense_output, consistency_tol, max_steps, max_memory,
                      progress, methods: tuple, fixed_step: tuple) -> dict:
    """Check the arguments of :func:`gaussopt.simulate`; return the normalized ones as
    a dict (``t0``, ``t1``, ``q``, ``v``, ``method``, ``t_eval``, ``auto_dt``, ``dt``,
    ``rtol``, ``atol``, ``consistency_tol``, ``max_steps``, ``max_memory``)."""
    if not isinstance(system, System):
        raise ModelError(f"`system` must be a gaussopt.System, found {type(system).__name__}.")
    n = system.n
    t0, t1 = validate_t_span(t_span)
    q = as_state(q0, n, "q0")
    v = as_state(v0, n, "v0")
    auto_dt = False
    if method is None:
        ga = (isinstance(solver, str) and solver == "ga") or getattr(solver, "name", None) == "ga"
        method = "rk4" if ga else "DOP853"
        auto_dt = ga and dt is None                 # the step is chosen at t0 (see simulate)
    if not isinstance(method, str) or method not in methods:
        raise ModelError(f"`method` must be one of {list(methods)}, found {method!r}.")
    if method in fixed_step and not auto_dt:
        dt = _step(dt, f"`dt` must be a positive step for method={method!r}")
    elif dt is not None:
        dt = _step(dt, "`dt` must be positive (used as first step)")
    rtol, atol = validate_tol(rtol, atol, stacklevel=4)   # (the caller of simulate)
    if stabilization is not None and not isinstance(stabilization, (Baumgarte, Projection)):
        raise ModelError("`stabilization` must be None, gaussopt.Baumgarte(...) or "
                         f"gaussopt.Projection(...), found {stabilization!r}.")
    if t_eval is not None:
        try:
            t_eval = np.asarray(t_eval, dtype=float).ravel()
        except (TypeError, ValueError) as e:
            raise ModelError(f"`t_eval` must be an array of increasing times within t_span "
                             f"[{t0}, {t1}], found {_found(t_eval)}.") from e
        if t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < t0 or t_eval[-1] > t1 \
                or not np.all(np.isfinite(t_eval)):
            raise ModelError(f"`t_eval` must be increasing and within t_span [{t0}, {t1}].")
    if not isinstance(dense_output, (bool, np.bool_)):
        raise ModelError(f"`dense_output` must be True or False, found {dense_output!r}.")
    consistency_tol = check_real(consistency_tol, "consistency_tol",
                                 hint="a distance the initial state may be off the constraints, "
                                      "e.g. 1e-8")
    max_steps = check_count(max_steps, "max_steps")
    max_memory = check_real(max_memory, "max_memory", allow_inf=True,
                            hint="a number of bytes, e.g. 2e9 (inf: no limit)")
    if progress is not None and not callable(progress):
        raise ModelError(f"`progress` must be None or a callable progress(t), found "
                         f"{_found(progress)}.")
    return {"t0": t0, "t1": t1, "q": q, "v": v, "method": method, "t_eval": t_eval,
            "auto_dt": auto_dt, "dt": dt, "rtol": rtol, "atol": atol,
            "consistency_tol": consistency_tol, "max_steps": max_steps, "max_memory": max_memory}


def check_consistent(system: System, t: float, q: np.ndarray, v: np.ndarray,
                     tol: float) -> list[str]:
    """Row-normalized position/velocity residuals above ``tol`` (a distance); NaN is a problem."""
    out = []
    if system.holonomic:
        phi = system.position_residual(t, q)
        J = system.position_jacobian(t, q)
        nr = np.sqrt((J * J).sum(axis=1))
        d = np.abs(phi) / np.where(nr > 0, nr, 1.0)
        if not np.all(np.isfinite(d)):
            out.append(f"the position constraints are not finite at the initial state (phi = {phi})")
        elif d.max() > tol * (1 + np.abs(q).max()):
            out.append(f"position constraints violated: |Phi_i|/|grad Phi_i| up to {d.max():.3g}")
    if system.holonomic or system.nonholonomic:
        r = system.velocity_residual(t, q, v)
        J = system.velocity_rows(t, q, v)
        nr = np.sqrt((J * J).sum(axis=1))
        d = np.abs(r) / np.where(nr > 0, nr, 1.0)
        if not np.all(np.isfinite(d)):
            out.append(f"the velocity constraints are not finite at the initial state (residual {r})")
        elif d.max(initial=0.0) > tol * (1 + np.abs(v).max()):
            out.append(f"velocity constraints violated: normalized residual up to {d.max():.3g}")
    return out
