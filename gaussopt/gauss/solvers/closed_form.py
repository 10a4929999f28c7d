"""Closed-form step: Udwadia--Kalaba / Udwadia--Phohomsiri fundamental equation."""

from __future__ import annotations

import gaussopt.gauss.dense_step as K
from gaussopt.gauss.solvers.base import StepSolver

__all__ = ["ClosedForm"]


class ClosedForm(StepSolver):
    """Closed-form solution of the Gauss step.

    The Udwadia--Kalaba fundamental equation
    ``a = a_u + M^{-1/2} (A M^{-1/2})^+ (b - A a_u)`` (Udwadia--Phohomsiri's
    form for singular ``M``), evaluated in null-space form on the kept,
    orthonormal constraint directions ``V_r^T a = beta`` of the shared rank
    decision: ``a = V_r beta + N z`` with ``(N^T M N) z = N^T (F - M V_r beta)``.
    ``M`` needs to be positive definite only on the null space of the
    constraints, so singular ``M`` and redundant constraints need no special
    case, and the constraints hold by construction however large the forces
    are. Implemented in the compiled kernel with a Cholesky factor, no
    explicit inverse (:func:`gaussopt.gauss.dense_step.closed_form`); the result is
    verified against the optimality conditions. This is also the robust path
    every other solver falls back on.

    References
    ----------
    F. E. Udwadia, R. E. Kalaba, "A new perspective on constrained motion",
    Proc. R. Soc. Lond. A 439 (1992) 407-410.
    F. E. Udwadia, P. Phohomsiri, "Explicit equations of motion for constrained
    mechanical systems with singular mass matrices and applications to
    multi-body dynamics", Proc. R. Soc. A 462 (2006) 2097-2117.

    Examples
    --------
    >>> import numpy as np, gaussopt as go
    >>> pend = go.System(("x", "y"), mass=np.eye(2), force=[0.0, -9.81],
    ...                  constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
    >>> go.solve_step(pend, 0.0, [1.0, 0.0], [0.0, 0.0]).a.round(12)
    array([ 0.  , -9.81])
    """

    name = "closed_form"
    _method = K.CLOSED_FORM
