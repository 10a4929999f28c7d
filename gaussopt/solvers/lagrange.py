"""Lagrange's equations of the first kind, solved through the KKT system."""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from ..exceptions import InconsistentConstraintsError
from ..linalg import _indeterminate, inconsistency_residual, min_norm_multipliers
from .base import StepSolver

__all__ = ["Lagrange"]


class Lagrange(StepSolver):
    """Lagrange's equations of the first kind, ``M a = F + A^T lam``, ``A a = b``.

    The classical multiplier formulation: the KKT matrix
    ``[[M, A^T], [A, 0]]`` is factorized by LU (LAPACK ``gesv``) when the
    constraint rows are independent. When they are redundant (numerical rank
    below the row count, decided on the row-normalized ``A`` with ``rank_tol``)
    or ``M`` is singular, the row-normalized and mass-scaled KKT system is solved
    in the least-squares sense (``gelsd``, minimum norm), which gives the
    minimum-norm multipliers. At singular positions the multipliers of the
    vanishing rows grow without bound while ``M a - F`` stays finite: this
    solver reports them as they are.

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

    def _solve(self, t, q, v, M, F, A, b):
        n, m = self._n, A.shape[0]
        w = self._w(M)
        if m == 0:
            L, info = lapack.dpotrf(M / w, lower=1, clean=1)
            if info != 0 or np.min(np.diag(L)) < self.rank_tol:
                raise _indeterminate(M, np.zeros((0, n)), w, self.coords)
            a, _ = lapack.dpotrs(L, F / w, lower=1)
            return a, np.zeros(0), {"rank": 0, "kkt": "cholesky"}
        norms = np.sqrt((A * A).sum(axis=1))
        inv = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
        An = A * inv[:, None]
        bn = b * inv
        # determinacy: rank([M; A]) = n  <=>  M/w + An^T An positive definite
        L, info = lapack.dpotrf(M / w + An.T @ An, lower=1, clean=1)
        if info != 0 or np.min(np.diag(L)) < self.rank_tol:
            raise _indeterminate(M, An, w, self.coords)
        s = lapack.dgesdd(An, compute_uv=0)[1]      # singular values only (LAPACK, no wrapper cost)
        r = int(np.count_nonzero(s > self.rank_tol * max(float(s[0]), 1e-300)))
        if r == m:
            K = np.zeros((n + m, n + m))
            K[:n, :n] = M
            K[:n, n:] = A.T
            K[n:, :n] = A
            rhs = np.concatenate([F, b])
            _, _, x, info = lapack.dgesv(K, rhs)
            if info == 0 and np.all(np.isfinite(x)):
                return x[:n], -x[n:], {"rank": r, "kkt": "lu"}
        # redundant rows (or LU failure): scaled least squares, minimum norm
        K = np.zeros((n + m, n + m))
        K[:n, :n] = M / w
        K[:n, n:] = An.T
        K[n:, :n] = An
        rhs = np.concatenate([F / w, bn])
        x, res, rank, sv = np.linalg.lstsq(K, rhs, rcond=self.rank_tol)
        a = x[:n]
        resid = float(np.abs(An @ a - bn).max())
        if resid > np.sqrt(self.rank_tol) * (1.0 + float(np.abs(bn).max())):
            res = inconsistency_residual(A, b)
            raise InconsistentConstraintsError(
                f"The constraint rows are inconsistent: A a = b has no solution (row-normalized "
                f"least-squares residual {res:.3g}; numerical rank {r} of {m} rows).",
                residual=res)
        lam = min_norm_multipliers(A, M @ a - F, r)
        return a, lam, {"rank": r, "kkt": "lstsq"}
