"""The checks of a run's arguments and initial state (the role of scipy's
``_ivp/common.py``): each raises a :class:`~gaussopt.ModelError` that names the argument,
what was expected, what was found and the fix, before anything runs. The options object
they feed is :mod:`gaussopt.integrate.options`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from gaussopt.core.checks import check_real, found
from gaussopt.core.exceptions import ModelError, ToleranceWarning
from gaussopt.model.system import System

__all__ = ["EPS", "MIN_RTOL", "validate_t_span", "validate_tol", "check_consistent"]

EPS = float(np.finfo(float).eps)
#: smallest relative tolerance a run uses: scipy's ``solve_ivp`` raises smaller ones to
#: ``100 eps`` (:func:`scipy.integrate._ivp.common.validate_tol`); below it the step-size
#: control asks for an error the rounding of one step already exceeds and shrinks the
#: step towards zero
MIN_RTOL = 100 * EPS


def validate_t_span(t_span: Any) -> tuple[float, float]:
    """``(t0, t_end)`` as floats: a finite pair with ``t_end >= t0``.

    gaussopt integrates forward in time only: the compiled engine's step-size control,
    the rank monitor's passage search, the events' directions and the contact run's
    impacts all assume that time increases. ``t_end == t0`` is allowed (as in
    :func:`scipy.integrate.solve_ivp`): the run returns the initial state.
    """
    try:
        t0, t1 = (float(x) for x in t_span)
    except (TypeError, ValueError) as e:
        raise ModelError(f"`t_span` must be a pair (t0, t_end), found {found(t_span)}.") from e
    if not (np.isfinite(t0) and np.isfinite(t1)):
        raise ModelError(f"`t_span` must be finite, found ({t0}, {t1}).")
    if t1 < t0:
        raise ModelError(
            f"`t_span` must have t_end >= t0, found ({t0}, {t1}): gaussopt integrates forward "
            "in time only (its step control, rank monitor, events and impacts assume that t "
            "increases). For a system whose forces do not depend on v and whose constraints "
            "do not depend on t, the motion backward from (q0, v0) is the motion forward from "
            "(q0, -v0) with the velocities negated.")
    return t0, t1

def validate_tol(rtol: Any, atol: Any, stacklevel: int = 2) -> tuple[float, float]:
    """The tolerances of a run, as scipy's ``validate_tol``: real and positive, and
    ``rtol`` below ``100 eps`` raised to it with a :class:`~gaussopt.ToleranceWarning`.

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
