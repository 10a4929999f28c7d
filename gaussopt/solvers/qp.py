"""Gauss step as a quadratic program solved with cvxpy (DPP, built once)."""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from ..exceptions import InconsistentConstraintsError, ModelError, SolverError
from ..linalg import _indeterminate, inconsistency_residual
from .base import StepSolver

__all__ = ["QP"]


class QP(StepSolver):
    """The Gauss step as a convex QP, ``min 0.5 |L^T a|^2 - F^T a`` s.t. ``A a = b``, ``G a >= h``.

    The cvxpy problem is built once, on the first step (when the number of rows
    is known), with ``Parameter`` objects for ``L^T`` (``M = L L^T`` from an
    eigen-decomposition), ``F``, ``A``, ``b``, ``G``, ``h``; it is DPP
    (``solver.kernel.problem.is_dpp()``), so cvxpy's canonicalization is paid
    once and every later step only updates parameter values. This is the only
    solver that accepts :class:`~gaussopt.Inequality` rows (unilateral
    constraints, e.g. a contact that can lift off).

    Parameters
    ----------
    system : System
    backend : str, optional
        cvxpy solver name (default ``"CLARABEL"`` with tight tolerances;
        ``"OSQP"``, ``"SCS"`` and others that are installed).
    backend_options : dict, optional
        Passed to ``problem.solve``.
    **kwargs
        ``objective``, ``rank_tol``, ``row_scale`` as for every step solver.

    Notes
    -----
    ``info`` holds the backend ``status``, its name and the solve time. A
    status other than optimal raises :class:`~gaussopt.exceptions.SolverError`
    (infeasible equality rows raise
    :class:`~gaussopt.exceptions.InconsistentConstraintsError`).
    """

    name = "qp"
    supports_inequalities = True

    def __init__(self, system, *, backend: str | None = None, backend_options: dict | None = None,
                 **kwargs) -> None:
        super().__init__(system, **kwargs)
        if backend is not None:
            from .qp_kernel import available_solvers

            choices = available_solvers()
            if not isinstance(backend, str) or backend.upper() not in choices:
                raise ModelError(f"`backend` must be one of the installed cvxpy solvers "
                                 f"{choices}, found {backend!r}.")
        if backend_options is not None and not isinstance(backend_options, dict):
            raise ModelError(f"`backend_options` must be a dict, found {type(backend_options).__name__}.")
        self.backend = backend
        self.backend_options = backend_options
        self.kernel = None
        self.statuses: dict[str, int] = {}

    def _build(self, m: int, p: int):
        from .qp_kernel import QPKernel  # cvxpy is imported on first use (1 s)

        k = self.kernel
        if k is None or k.m != m or k.p != p:
            # rows can change count only if a user's constraint does; rebuild then
            self.kernel = k = QPKernel(self._n, m, p, solver=self.backend,
                                       solver_options=self.backend_options)
        return k

    def _solve(self, t, q, v, M, F, A, b):
        n, m = self._n, A.shape[0]
        G, h = self.system.inequality_rows(t, q, v)
        kernel = self._build(m, G.shape[0])
        # determinacy check (cheap): rank([M; A]) = n
        w = self._w(M)
        if m:
            norms = np.sqrt((A * A).sum(axis=1))
            An = A / np.where(norms > 0, norms, 1.0)[:, None]
        else:
            An = np.zeros((0, n))
        L, info = lapack.dpotrf(M / w + An.T @ An, lower=1, clean=1)
        if info != 0 or np.min(np.diag(L)) < self.rank_tol:
            if not G.shape[0]:
                raise _indeterminate(M, An, w, self.coords)
        try:
            out = kernel.solve(M, F, A, b, G if G.shape[0] else None, h if G.shape[0] else None)
        except SolverError as e:
            msg = str(e).lower()
            if "infeasible" in msg:
                res = inconsistency_residual(A, b)
                raise InconsistentConstraintsError(
                    f"The QP is infeasible at t={t}: the constraint rows are inconsistent "
                    f"(row-normalized least-squares residual {res:.3g}; {e}).",
                    residual=res) from e
            raise
        self.statuses[out.status] = self.statuses.get(out.status, 0) + 1
        info = {"status": out.status, "backend": out.solver, "solve_time": out.solve_time,
                "inequality_multipliers": out.mu}
        return out.a, out.lam, info
