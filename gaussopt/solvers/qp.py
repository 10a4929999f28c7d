"""Gauss step as a quadratic program: Clarabel called directly, or any cvxpy backend."""

from __future__ import annotations

import numpy as np

from .. import kernel as K
from ..exceptions import InconsistentConstraintsError, ModelError, SolverError
from ..linalg import decide, inconsistency_residual, raise_for_status, solve_gauss
from .base import StepSolver

__all__ = ["QP", "BACKENDS"]

#: backends of the QP solver besides the names of installed cvxpy solvers
BACKENDS = ("clarabel", "cvxpy")


class _ClarabelBackend:
    """Clarabel built once for the sizes of the reduced problem, updated in place."""

    def __init__(self, n: int, m: int, p: int, options: dict | None) -> None:
        from .clarabel_qp import ClarabelQP

        self.qp = ClarabelQP(n, m, p, settings=options)
        self.name = "clarabel"

    def solve(self, P, F, Aeq, beq, G, h):
        out = self.qp.solve(P, -F, Aeq, beq, G, h)
        return out.x, out.z, out.status, out.iterations, out.solve_time


class _CvxpyBackend:
    """cvxpy's DPP-compiled problem (:class:`~gaussopt.solvers.qp_kernel.QPKernel`)."""

    def __init__(self, n: int, m: int, p: int, solver: str | None, options: dict | None) -> None:
        from .qp_kernel import QPKernel  # cvxpy is imported on first use (1 s)

        self.kernel = QPKernel(n, m, p, solver=solver, solver_options=options)
        self.name = f"cvxpy/{self.kernel.solver}"

    def solve(self, P, F, Aeq, beq, G, h):
        out = self.kernel.solve(P, F, Aeq, beq, G if G.shape[0] else None, h if G.shape[0] else None)
        return out.a, out.mu, out.status, -1, out.solve_time


class QP(StepSolver):
    """The Gauss step as a convex QP, ``min 0.5 a^T M a - F^T a`` s.t. ``A a = b``, ``G a >= h``.

    The QP is posed on the shared rank decision: the equality rows are the
    kept orthonormal directions ``V_r^T a = beta`` (so redundant and nearly
    dependent rows never reach the QP solver), ``M`` is divided by
    ``w = trace(M)/n`` and ``F``, ``beta``, ``h`` by an acceleration scale
    ``s_a = max(|F|/w, |beta|, |h|)``, so that the backend's tolerances are
    relative to the answer. This is the only solver that accepts
    :class:`~gaussopt.Inequality` rows (unilateral constraints, e.g. a contact
    that can lift off).

    Every result is verified: the backward error of the optimality conditions
    (with the inequality forces ``G^T mu`` as applied forces, ``mu >= 0``,
    ``G a >= h``, complementarity) must not exceed ``verify_tol``; a result
    that fails is re-solved on the robust path -- the closed form, or with
    inequality rows the closed form on the equality rows plus the QP's active
    set, accepted only if its multipliers are ``>= 0`` and the inactive rows
    hold -- and ``info["fallback"]`` says so.

    Parameters
    ----------
    system : System
    backend : str, default "clarabel"
        ``"clarabel"``: Clarabel called directly, built once per system (sparse
        data, updated in place every step). ``"cvxpy"``: the problem built once
        as a cvxpy DPP problem (``cvxpy_solver`` chooses its backend, default
        Clarabel); the name of an installed cvxpy solver (``"OSQP"``,
        ``"SCS"``, ...) means ``"cvxpy"`` with that solver.
    backend_options : dict, optional
        Settings of the backend (Clarabel settings, or options of ``problem.solve``).
    verify_tol : float, default 1e-12
        Largest accepted backward error (relative) of the QP's result.
    **kwargs
        ``objective``, ``rank_tol``, ``row_scale`` as for every step solver.

    Notes
    -----
    ``info`` holds the backend's ``status``, ``backend``, ``iterations``,
    ``solve_time``, ``inequality_multipliers`` (``mu >= 0`` with
    ``M a = F + A^T lam + G^T mu``) and the verification. Safe to call from
    several threads on one system (the backend is locked per solve).
    """

    name = "qp"
    supports_inequalities = True

    def __init__(self, system, *, backend: str = "clarabel", backend_options: dict | None = None,
                 verify_tol: float = 1e-12, cvxpy_solver: str | None = None, **kwargs) -> None:
        super().__init__(system, **kwargs)
        if not isinstance(backend, str):
            raise ModelError(f"`backend` must be a str, found {type(backend).__name__}.")
        kind, solver = backend.lower(), cvxpy_solver
        if kind not in BACKENDS:
            from .qp_kernel import available_solvers

            choices = available_solvers()
            if backend.upper() not in choices:
                raise ModelError(f"`backend` must be one of {list(BACKENDS)} or an installed cvxpy "
                                 f"solver {choices}, found {backend!r}.")
            kind, solver = "cvxpy", backend.upper()
        if backend_options is not None and not isinstance(backend_options, dict):
            raise ModelError(f"`backend_options` must be a dict, found {type(backend_options).__name__}.")
        if not (np.isfinite(verify_tol) and 0 < verify_tol < 1):
            raise ModelError(f"`verify_tol` must be in (0, 1), found {verify_tol!r}.")
        self.backend = kind
        self.cvxpy_solver = solver
        self.backend_options = backend_options
        self.verify_tol = float(verify_tol)
        self._backend = None
        self._shape = None
        self.statuses: dict[str, int] = {}
        self.fallbacks = 0

    def _get_backend(self, r: int, p: int):
        if self._backend is None or self._shape != (r, p):
            # the kept rank can change (singular positions): one backend per shape
            if self.backend == "clarabel":
                self._backend = _ClarabelBackend(self._n, r, p, self.backend_options)
            else:
                self._backend = _CvxpyBackend(self._n, r, p, self.cvxpy_solver,
                                              self.backend_options)
            self._shape = (r, p)
        return self._backend

    def _step(self, t, q, v, M, F, A, b, want_lam):
        G, h = self.system.inequality_rows(t, q, v)
        p = G.shape[0]
        if self._check_symmetry and K.asymmetric(M):
            raise_for_status(K.NONSYMMETRIC, M=M, F=F, A=A, b=b, live=np.ones(A.shape[0], bool),
                             rank=0)
        if not (np.all(np.isfinite(M)) and np.all(np.isfinite(F)) and np.all(np.isfinite(A))
                and np.all(np.isfinite(b)) and np.all(np.isfinite(G)) and np.all(np.isfinite(h))):
            raise_for_status(K.NONFINITE, M=M, F=F, A=A, b=b, live=np.ones(A.shape[0], bool),
                             rank=0)
        ref = self._reference(A.shape[0])
        dec = decide(M, A, b, rank_tol=self.rank_tol, ref=ref, sig_ref=self.sigma_ref)
        if not dec.determinate and not p:
            raise_for_status(K.INDETERMINATE, M=M, F=F, A=A, b=b, live=dec.live, rank=dec.r,
                             coords=self.coords)
        w = dec.w
        gn = np.sqrt(np.einsum("ij,ij->i", G, G)) if p else np.zeros(0)
        gn = np.where(gn > 0, gn, 1.0)
        Gs, hs = (G / gn[:, None], h / gn) if p else (G, h)
        sa = max(float(np.linalg.norm(F)) / w, float(np.linalg.norm(dec.beta)),
                 float(np.abs(hs).max(initial=0.0)))
        sa = sa if sa > 0 and np.isfinite(sa) else 1.0
        with self._lock:
            # a backend that fails (bad settings, an exception) raises SolverError; a result
            # that is inaccurate or not optimal is re-solved on the robust path below
            try:
                backend = self._get_backend(dec.r, p)
                x, z, status, iters, solve_time = backend.solve(
                    M / w, F / (w * sa), np.ascontiguousarray(dec.Vr.T), dec.beta / sa, Gs,
                    hs / sa)
            except SolverError:
                raise
            except Exception as e:  # noqa: BLE001 - the backend's own error, chained
                raise SolverError(f"QP backend {self.backend!r} failed: {type(e).__name__}: "
                                  f"{e}") from e
            self.statuses[status] = self.statuses.get(status, 0) + 1
        if status in ("primal_infeasible", "infeasible") and p:
            res = inconsistency_residual(np.vstack([A, G]), np.concatenate([b, h]))
            raise InconsistentConstraintsError(
                f"The QP is infeasible at t={t}: no acceleration satisfies the equality rows and "
                f"the inequality rows G a >= h together (backend status {status!r}).",
                residual=res)
        info = {"status": status, "backend": getattr(backend, "name", self.backend),
                "iterations": iters, "solve_time": solve_time, "fallback": False}
        a = mu = None
        if x is not None and np.all(np.isfinite(x)):
            a = sa * np.asarray(x, dtype=float)
            mu = (w * sa * np.maximum(np.asarray(z, dtype=float), 0.0) / gn) if p else np.zeros(0)
            be = self._verify(M, F, A, b, G, h, ref, dec, a, mu)
            if be > self.verify_tol:
                a = None
            else:
                info["backward_error"] = be
        if a is None:
            # the robust path
            a, mu, be = self._robust(t, M, F, A, b, G, h, ref, dec, z, gn)
            info.update(fallback=True, backward_error=be)
            self.fallbacks += 1
        Feff = F + G.T @ mu if p else F
        status_k, rho, allow, be_k = K.check(M, Feff, A, b, _ref(ref, A.shape[0]), self.rank_tol,
                                             dec.nu, dec.live, dec.An, dec.bn, dec.s, dec.Ur,
                                             dec.Vr, dec.c_norm, a)
        if status_k != K.OK:
            raise_for_status(status_k, M=M, F=F, A=A, b=b, live=dec.live, rank=dec.r, rho=rho,
                             allow=allow, coords=self.coords, solver=self.name)
        lam = (K.multipliers(M, Feff, a, A, dec.nu, dec.live, dec.Ur, dec.Vr, dec.s) if want_lam
               else np.zeros(A.shape[0]))
        info.update({"rank": dec.r, "sigma": dec.s,
                     "sigma_min": float(dec.s[dec.r - 1]) if dec.r else 1.0,
                     "dropped_rows": np.flatnonzero(~dec.live).tolist(),
                     "inconsistency": float(rho), "least_squares": bool(rho > np.sqrt(self.rank_tol)),
                     "kept_vanished_rows": dec.kept_vanished, "inequality_multipliers": mu})
        return a, lam, info

    def _verify(self, M, F, A, b, G, h, ref, dec, a, mu) -> float:
        """Backward error of a QP result (equality part with the inequality forces as
        applied forces, plus the inequality rows' feasibility and complementarity)."""
        Feff = F + G.T @ mu if G.shape[0] else F
        bf, bs = K.verify(M, Feff, dec.An, dec.bn, dec.Ur, dec.Vr, dec.s, a)
        be = max(bf, bs)
        if G.shape[0]:
            # inequality rows, in dimensionless form: slack relative to |G_i| |a| + |h_i|, force
            # share mu_i |G_i| relative to |M a| + |F|; violation and complementarity
            gnorm = np.sqrt(np.einsum("ij,ij->i", G, G))
            sn = (G @ a - h) / np.maximum(gnorm * float(np.linalg.norm(a)) + np.abs(h), 1e-300)
            fn = mu * gnorm / (float(np.linalg.norm(M @ a)) + float(np.linalg.norm(F)) + 1e-300)
            be = max(be, float(np.max(np.maximum(-sn, 0.0))), float(np.max(np.abs(fn * sn))))
        return be

    def _robust(self, t, M, F, A, b, G, h, ref, dec, z, gn):
        """Closed form on the equality rows (plus the QP's active inequality rows)."""
        tol = K.direct_tolerance(self._n, A.shape[0] + G.shape[0])
        p = G.shape[0]
        if not p:
            if not dec.determinate:
                raise_for_status(K.INDETERMINATE, M=M, F=F, A=A, b=b, live=dec.live,
                                 rank=dec.r, coords=self.coords)
            a = dec.closed_form(M, F)
            bf, bs = K.verify(M, F, dec.An, dec.bn, dec.Ur, dec.Vr, dec.s, a)
            if max(bf, bs) > tol:
                raise SolverError(f"solver 'qp' at t={t}: the QP result and the closed form both "
                                  f"fail their verification (backward error {max(bf, bs):.3g}).")
            return a, np.zeros(0), max(bf, bs)
        # active set from the QP's duals (or, failing those, from the unconstrained step)
        if z is not None and np.all(np.isfinite(z)):
            zz = np.asarray(z, dtype=float)
            active = zz > 1e-8 * max(float(zz.max(initial=0.0)), 1e-300)
        else:
            active = np.zeros(p, dtype=bool)
        for _ in range(p + 1):
            Aa = np.vstack([A, G[active]])
            ba = np.concatenate([b, h[active]])
            sol = solve_gauss(M, F, Aa, ba, rank_tol=self.rank_tol, want_multipliers=True,
                              check_symmetry=False, coords=self.coords)
            mu = np.zeros(p)
            mu[active] = sol.lam[A.shape[0]:]
            slack = G @ sol.a - h
            scale = np.sqrt(np.einsum("ij,ij->i", G, G)) * float(np.linalg.norm(sol.a)) + np.abs(h)
            bad_in = active & (mu < -tol * (np.abs(mu).max(initial=0.0) + 1e-300))
            bad_out = ~active & (slack < -tol * np.maximum(scale, 1e-300))
            if not (bad_in.any() or bad_out.any()):
                return sol.a, np.maximum(mu, 0.0), sol.backward_error
            # one active-set change per round: drop the most negative multiplier, else add
            # the most violated row
            if bad_in.any():
                active[np.argmin(np.where(bad_in, mu, np.inf))] = False
            else:
                active[np.argmin(np.where(bad_out, slack / np.maximum(scale, 1e-300), np.inf))] = True
        raise SolverError(f"solver 'qp' at t={t}: the QP result failed its verification and the "
                          "active-set re-solve did not converge.")

    def run_stats(self) -> dict:
        out = {"qp_statuses": dict(self.statuses), "qp_fallbacks": self.fallbacks}
        return out


def _ref(ref, m):
    return ref if ref is not None else np.zeros(m)
