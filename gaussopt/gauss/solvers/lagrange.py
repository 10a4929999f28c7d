"""Lagrange's equations of the first kind, solved through the KKT system."""

from __future__ import annotations

import gaussopt.gauss.dense_step as K
from gaussopt.gauss.solvers.base import StepSolver

__all__ = ["Lagrange"]


class Lagrange(StepSolver):
    """Lagrange's equations of the first kind, ``M a = F + A^T lam``, ``A a = b``.

    The classical multiplier formulation: the KKT matrix
    ``[[M/w, V_r], [V_r^T, 0]]`` of the kept constraint directions of the
    shared rank decision (orthonormal rows ``V_r^T a = beta``, so redundant
    and nearly dependent rows need no least-squares solve) is factorized by LU
    with partial pivoting (:func:`gaussopt.gauss.dense_step.kkt_lu`). The multipliers of
    the original rows are the minimum-norm ones. At singular positions the
    multipliers of the vanishing rows grow without bound while ``M a - F``
    stays finite: this solver reports them as they are. A result that fails
    its verification is replaced by the closed form's (``info["fallback"]``).

    Examples
    --------
    >>> import numpy as np, gaussopt as go
    >>> pend = go.System(("x", "y"), mass=2 * np.eye(2), force=[0.0, -19.62],
    ...                  constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
    >>> r = go.solve_step(pend, 0.0, [0.0, -1.0], [0.0, 0.0], solver="lagrange")
    >>> r.multipliers.round(9)
    array([-9.81])
    """

    name = "lagrange"
    _method = K.LAGRANGE
