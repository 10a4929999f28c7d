"""Gauss step by a genetic algorithm (pygad), as in paper 001."""

from __future__ import annotations

import warnings

import numpy as np

from .. import kernel as K
from ..exceptions import ConvergenceWarning, ModelError
from ..linalg import decide, raise_for_status
from .base import StepSolver

__all__ = ["Genetic"]

MODES = ("nullspace", "penalty")


class Genetic(StepSolver):
    """Minimize the Gauss function with a genetic algorithm (pygad).

    Parameters
    ----------
    system : System
    mode : {"nullspace", "penalty"}, default "nullspace"
        ``"nullspace"``: the genes are the coordinates ``z`` of
        ``a = a_p + N z`` (``a_p`` the minimum-norm solution of ``A a = b``,
        ``N`` an orthonormal basis of ``null(A)``), so the constraints hold
        exactly and only ``n - rank(A)`` genes are searched.
        ``"penalty"``: the genes are the full ``a`` and ``penalty/2 * |An a - bn|^2``
        (rows normalized, scaled by the mass scale) is added, as paper 001 does.
    seed : int, default 0
        Seed of the first step; step ``k`` uses ``seed + k`` so a run is reproducible.
    tol : float, default 1e-10
        Relative size of the final search box (stopping criterion).
    max_generations : int, default 400
    sol_per_pop : int, default 20
    penalty : float, default 1e6
        Penalty weight in ``"penalty"`` mode.
    radius : float, optional
        Initial half-width of the search box around the warm start. Default:
        adapted from the change of the accelerations over the last step.
    **kwargs
        ``objective``, ``rank_tol``, ``row_scale`` as for every step solver.

    Notes
    -----
    The warm start is the previous step's accelerations projected onto the
    current constraint set. ``info`` reports ``generations``, ``evaluations``,
    ``gauss`` (achieved), ``gauss_opt`` (the optimum, from the closed form: the
    lower bound no feasible ``a`` can beat), ``gap`` and ``error_bound``
    (``sqrt(2 gap / lambda_min(N^T M N))``, a bound on ``|a - a*|`` valid
    because the objective is quadratic), ``error`` (``|a - a*|`` measured) and
    ``tolerance``, the GA's own accuracy claim (final search radius times
    ``sqrt(genes)``), which needs no knowledge of the optimum. The gap is
    evaluated as ``0.5 d^T M d + (M a* - F)^T d`` (``d = a - a*``), free of the
    cancellation in ``G(a) - G(a*)``.

    References
    ----------
    Yang Liusong, Yao Wenli, "Study on singular problem of the generalized mass
    matrix based on Gauss principle of least constraints", International
    Journal of Mechanics Research 6 (2017) 56-62.
    """

    name = "ga"

    def __init__(self, system, *, mode: str = "nullspace", seed: int = 0, tol: float = 1e-10,
                 max_generations: int = 400, sol_per_pop: int = 20, penalty: float = 1e6,
                 radius: float | None = None, **kwargs) -> None:
        super().__init__(system, **kwargs)
        if mode not in MODES:
            raise ModelError(f"`mode` must be one of {MODES}, found {mode!r}.")
        if radius is not None and not (np.isfinite(radius) and radius > 0):
            raise ModelError(f"`radius` must be a positive number, found {radius!r}.")
        self.mode = mode
        self.seed = int(seed)
        self.tol = float(tol)
        self.max_generations = int(max_generations)
        self.sol_per_pop = int(sol_per_pop)
        self.penalty = float(penalty)
        self.radius = radius
        self.reset()

    def reset(self) -> None:
        self._a_prev = None
        self._da_prev = None
        self._calls = 0
        self._nonconv_warned = False
        self.generations: list[int] = []
        self.gaps: list[float] = []

    def run_stats(self) -> dict:
        g = np.asarray(self.generations, dtype=float)
        gp = np.asarray(self.gaps, dtype=float)
        out = {"ga_generations_mean": float(g.mean()) if g.size else 0.0,
               "ga_generations_max": int(g.max()) if g.size else 0,
               "ga_gap_max": float(gp.max()) if gp.size else 0.0}
        self.reset()
        return out

    def _initial_radius(self, a0, M, F, w):
        if self.radius is not None:
            return self.radius
        if self._da_prev is not None:
            return max(10.0 * self._da_prev, 1e-3 * (1.0 + float(np.abs(a0).max())))
        # first step: the scale of accelerations the forces can produce
        return 2.0 * (float(np.abs(F).max(initial=0.0)) / w + float(np.abs(a0).max(initial=0.0)) + 1.0)

    def _step(self, t, q, v, M, F, A, b, want_lam):
        if self._check_symmetry and K.asymmetric(M):
            raise_for_status(K.NONSYMMETRIC, M=M, F=F, A=A, b=b, live=np.ones(A.shape[0], bool),
                             rank=0)
        if not (np.all(np.isfinite(M)) and np.all(np.isfinite(F)) and np.all(np.isfinite(A))
                and np.all(np.isfinite(b))):
            raise_for_status(K.NONFINITE, M=M, F=F, A=A, b=b, live=np.ones(A.shape[0], bool),
                             rank=0)
        ref = self._reference(A.shape[0])
        dec = decide(M, A, b, rank_tol=self.rank_tol, ref=ref, sig_ref=self.sigma_ref)
        if not dec.determinate:
            raise_for_status(K.INDETERMINATE, M=M, F=F, A=A, b=b, live=dec.live, rank=dec.r,
                             coords=self.coords)
        w = self._w(M)
        a_star = dec.closed_form(M, F)
        r = dec.r
        g_opt = float(0.5 * a_star @ M @ a_star - a_star @ F)
        seed = self.seed + self._calls
        self._calls += 1
        a_prev = self._a_prev
        if self.mode == "nullspace":
            a_p, N = dec.null_space()
            k = N.shape[1]
            if k == 0:
                a = a_p
                out = None
            else:
                z0 = N.T @ (a_prev - a_p) if a_prev is not None else np.zeros(k)
                H = N.T @ M @ N                   # Hessian in z
                g0 = H @ z0 + N.T @ (M @ a_p - F)  # gradient at the warm start

                def objective(Z):
                    # G(a_p + N z) - G(a_p + N z0), evaluated as an increment from the
                    # warm start: the rounding error then scales with the distance to
                    # the optimum, not with |G| (the GA compares values only)
                    D = Z - z0
                    return D @ g0 + 0.5 * np.einsum("ij,jk,ik->i", D, H, D)

                radius = self._initial_radius(N @ z0 + a_p, M, F, w)
                from .ga_kernel import ga_minimize  # pygad imported on first use

                out = ga_minimize(objective, z0, radius, seed=seed, tol=self.tol,
                                  max_generations=self.max_generations,
                                  sol_per_pop=self.sol_per_pop)
                a = a_p + N @ out.x
                D = out.x - z0
                out.scale = float(abs(D @ g0) + abs(0.5 * D @ H @ D)) + 1e-300
            lam_min = float(np.linalg.eigvalsh(N.T @ M @ N)[0]) if N.shape[1] else np.inf
        else:
            An, bn = dec.An, dec.bn
            pen = self.penalty * w

            x0 = a_prev if a_prev is not None else np.zeros(self._n)
            Hp = M + pen * (An.T @ An)                      # Hessian of the penalized objective
            g0 = Hp @ x0 - F - pen * (An.T @ bn)            # its gradient at the warm start

            def objective(X):
                D = X - x0                                  # increment form (see above)
                return D @ g0 + 0.5 * np.einsum("ij,jk,ik->i", D, Hp, D)
            radius = self._initial_radius(x0, M, F, w)
            from .ga_kernel import ga_minimize

            out = ga_minimize(objective, x0, radius, seed=seed, tol=self.tol,
                              max_generations=self.max_generations, sol_per_pop=self.sol_per_pop)
            a = out.x
            D = a - x0
            out.scale = float(abs(D @ g0) + abs(0.5 * D @ Hp @ D)) + 1e-300
            lam_min = float(np.linalg.eigvalsh(M + pen * An.T @ An)[0])
        g = float(0.5 * a @ M @ a - a @ F)
        # G(a) - G(a*) without cancellation, d = a - a*: 0.5 d^T M d + (M a* - F)^T d; the
        # second term is lam^T A d, exactly 0 in null-space mode (A d = 0 there), so it
        # is left out rather than evaluated as rounding noise
        d = a - a_star
        gap = float(0.5 * d @ M @ d)
        if self.mode == "penalty":
            gap += float((M @ a_star - F) @ d)
        err = float(np.sqrt(d @ d))
        if self.mode == "nullspace" and lam_min > 0:
            bound = float(np.sqrt(2 * max(gap, 0.0) / lam_min) * (1 + 1e-12) + 1e-15 * (1 + np.abs(a_star).max()))
        else:
            bound = float(np.sqrt(2 * max(gap, 0.0) / lam_min)) if lam_min > 0 else np.inf
        if out is not None and not out.converged and not self._nonconv_warned:
            self._nonconv_warned = True
            warnings.warn(f"the GA stopped after {out.generations} generations without reaching "
                          f"tol={self.tol:g} (first at t={t}); info['tolerance'] states the accuracy "
                          "reached. Raise max_generations or loosen tol.", ConvergenceWarning,
                          stacklevel=4)
        tolerance = 0.0
        if out is not None:
            # the GA's own accuracy claim: its final search radius, but never below the
            # resolution of a search that compares values only (0.5 e^T H e ~ eps * S,
            # S the size of the summed terms), plus, in penalty mode, the constraint
            # violation the penalty leaves
            e_round = np.sqrt(2 * np.finfo(float).eps * max(out.scale, 1e-300) / lam_min) \
                if lam_min > 0 else np.inf
            tolerance = float(np.hypot(out.radius * np.sqrt(out.x.size), 4 * e_round))
            if self.mode == "penalty":
                tolerance += float(np.sqrt(np.sum((An @ a - bn) ** 2)))
        if a_prev is not None:
            self._da_prev = float(np.abs(a - a_prev).max())
        self._a_prev = a.copy()
        gens = out.generations if out is not None else 0
        self.generations.append(gens)
        self.gaps.append(gap)
        st, rho, allow, be = K.check(M, F, A, b, ref if ref is not None else np.zeros(A.shape[0]),
                                     self.rank_tol, dec.nu, dec.live, dec.An, dec.bn, dec.s, dec.Ur,
                                     dec.Vr, dec.c_norm, a_star)
        if st != K.OK:
            raise_for_status(st, M=M, F=F, A=A, b=b, live=dec.live, rank=dec.r, rho=rho,
                             allow=allow, coords=self.coords, solver=self.name)
        lam = (K.multipliers(M, F, a, A, dec.nu, dec.live, dec.Ur, dec.Vr, dec.s)
               if want_lam else np.zeros(A.shape[0]))
        info = {"mode": self.mode, "generations": gens,
                "evaluations": out.evaluations if out is not None else 0,
                "converged": out.converged if out is not None else True,
                "gauss": g, "gauss_opt": g_opt, "gap": gap, "error_bound": bound, "error": err,
                "tolerance": tolerance,
                "genes": int(out.x.size) if out is not None else 0, "rank": r,
                "sigma": dec.s, "sigma_min": float(dec.s[r - 1]) if r else 1.0,
                "dropped_rows": np.flatnonzero(~dec.live).tolist(),
                "inconsistency": float(rho), "least_squares": bool(rho > np.sqrt(self.rank_tol)),
                "constraint_residual": float(np.abs(A @ a - b).max(initial=0.0))}
        return a, lam, info
