"""Closed-form step: Udwadia--Kalaba / Udwadia--Phohomsiri fundamental equation."""

from __future__ import annotations

import numpy as np

from ..linalg import solve_gauss
from .base import StepSolver

__all__ = ["ClosedForm"]


class ClosedForm(StepSolver):
    """Closed-form solution of the Gauss step.

    ``a = a_u + Ma^{-1/2} (A Ma^{-1/2})^+ (b - A a_u)`` with the augmented mass
    matrix ``Ma = M + w A^T A`` (rows normalized), which is positive definite
    whenever the motion is determined, so singular ``M`` and redundant
    constraints need no special case. Implemented with a Cholesky factor and
    one small SVD (LAPACK), no explicit inverse (:func:`gaussopt.linalg.solve_gauss`).

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

    def _row_ref(self, A):
        if self.row_ref is None:
            self.row_ref = np.zeros(A.shape[0])   # running maximum, updated by solve_gauss
        return self.row_ref

    def _solve(self, t, q, v, M, F, A, b):
        sol = solve_gauss(M, F, A, b, rank_tol=self.rank_tol, w=self._w(M),
                          row_ref=self._row_ref(A), coords=self.coords)
        return sol.a, sol.lam, {"rank": sol.rank, "sigma_min": float(sol.sigma[-1]) if sol.sigma.size else 1.0,
                                "dropped_rows": sol.dropped.tolist()}

    def acceleration(self, t, q, v):
        M, F, A, b = self._prepare(t, q, v)
        if self.objective == "paper":
            F, _ = self._objective_force(M, F)
        return solve_gauss(M, F, A, b, rank_tol=self.rank_tol, w=self._w(M),
                           row_ref=self._row_ref(A), coords=self.coords,
                           want_multipliers=False).a
