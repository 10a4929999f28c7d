"""Gauss step by a genetic algorithm (pygad), as in paper 001."""

from __future__ import annotations

import warnings

import numpy as np

import gaussopt.gauss.dense_step as K
from gaussopt.core.exceptions import ConvergenceWarning, ModelError
from gaussopt.gauss.solution import decide, raise_for_status
from gaussopt.gauss.solvers.base import StepSolver

__all__ = ["Genetic"]

MODES = ("nullspace", "penalty")


EPS = float(np.finfo(float).eps)


def _distance(a, M, F, Vr, beta, N, lam_H, U_H):
    """``|a - a*|`` from the residuals of ``a``, and ``c = Vr^T a - beta``
    (:func:`_accuracy`)."""
    c = Vr.T @ a - beta
    if N.shape[1] == 0:
        return float(np.sqrt(c @ c)), c
    if not lam_H[0] > 0:
        return np.inf, c
    g = N.T @ (M @ a - F) - N.T @ (M @ (Vr @ c))
    y = U_H @ ((U_H.T @ g) / lam_H)
    return float(np.sqrt(c @ c + y @ y)), c


def _accuracy(a, M, F, Vr, beta, N, lam_H, U_H):
    """An upper bound on ``|a - a*|`` computed from the residuals of ``a`` alone (``a*``
    unknown), and the constraint violation ``c = Vr^T a - beta``.

    Derivation. The rank decision keeps the orthonormal row directions ``Vr`` (n, r): the
    constraint set is ``{Vr^T a = beta}``, and ``N`` (n, k) is an orthonormal basis of
    their null space (``[Vr N]`` orthogonal). The optimum ``a*`` (the closed form's target)
    is characterized by ``Vr^T a* = beta`` and ``N^T (M a* - F) = 0``. Write any ``a`` as
    ``a - a* = Vr c + N y``. Then

    * ``c = Vr^T a - beta`` (the constraint violation in orthonormal coordinates), and
    * ``N^T (M a - F) = N^T M (a - a*) = N^T M Vr c + H y`` with ``H = N^T M N``
      (positive definite: the motion is determinate), so
      ``y = H^-1 (N^T (M a - F) - N^T M Vr c)``,

    hence ``|a - a*|^2 = |c|^2 + |y|^2`` *exactly* (for a quadratic ``G`` this is the
    length of the Newton step from ``a``, which lands on ``a*``). It is a statement about
    the point ``a`` whatever produced it: it covers a search stopped anywhere (generation
    cap, stall, a radius collapsed at the rounding level of the objective's values) and,
    in penalty mode, the bias of the penalized minimizer ``a_pen`` (infeasible, ``c ~
    |lam| / pen``, and not stationary on the constraint set) -- no separate term for
    either is needed, nor could a bound built from the search radius be trusted: the
    radius says nothing of the distance to ``a*`` when the search crawls along an
    ill-conditioned valley (the penalty Hessian has condition ~ pen / lambda(M)).

    Rounding. ``c`` and ``g = N^T (M a - F)`` are computed with absolute errors of at
    most ``~(n + 2) eps (sqrt(n) |a| + |beta|)`` and ``~(n + 2) eps sqrt(k) (|M|_F (|a| +
    |c|) + |F|)`` (first-order bounds for sums of ``n`` products; ``|N^T x| <= |x|``); the
    second is amplified by ``|H^-1| = 1 / lambda_min(H)`` into ``y``, and the solve with
    ``H`` (through its eigendecomposition) adds a relative error ``~ k cond(H) eps``.
    Returned, with a factor 4 of safety on the first-order terms::

        (1 + 4 k cond(H) eps) sqrt(|c|^2 + |y|^2)
          + 4 (n + 2) eps [sqrt(n) |a| + |beta|
                           + sqrt(k) (|M|_F (|a| + |c|) + |F|) / lambda_min(H)]

    It bounds the distance to the exact optimum over the decision's rows ``(Vr, beta)``,
    the problem every solver solves; the rounding of the decision itself (``~ eps /
    sigma_min``, relative) is shared with them.
    """
    n, k = a.shape[0], N.shape[1]
    dist, c = _distance(a, M, F, Vr, beta, N, lam_H, U_H)
    if not np.isfinite(dist):
        return np.inf, c
    na, nc = float(np.sqrt(a @ a)), float(np.sqrt(c @ c))
    margin = float(np.sqrt(n)) * na + float(np.sqrt(beta @ beta))
    cond = 1.0
    if k:
        cond = float(lam_H[-1] / lam_H[0])
        margin += np.sqrt(k) * (float(np.linalg.norm(M)) * (na + nc)
                                + float(np.sqrt(F @ F))) / float(lam_H[0])
    return float((1 + 4 * k * cond * EPS) * dist + 4 * (n + 2) * EPS * margin), c


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
    tol : float, default 1e-8
        Relative accuracy asked for: the search box shrinks to ``tol (1 + |x_j|)``
        per gene ``x_j`` (the stopping criterion), and a
        :class:`~gaussopt.core.exceptions.ConvergenceWarning` is issued (once per solver
        and run) when the accuracy achieved, ``info["tolerance"]``, is worse than
        ``tol (1 + |a|)`` (``info["requested"]``). A search that compares values only
        resolves ``a`` to about ``sqrt(eps)`` relative (:mod:`.pygad_ga`), so a ``tol``
        much below ``1e-8`` is usually not reached (1e-10 was reached at only ~10 % of
        random four-bar and pendulum states); in ``"penalty"`` mode the penalty's bias
        (``info["penalty_bias"]``, ~ ``|lam| / penalty``) is a floor too.
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
    current constraint set. ``a*`` below is the optimum (the closed form's result
    with the same rank decision), ``N`` an orthonormal basis of the null space of
    the kept rows and ``V_r`` of their row space (``V_r^T a = beta`` on the
    constraint set). ``info`` reports, besides the shared rank decision:

    * ``generations``, ``evaluations``, ``genes``, ``converged`` (the search stopped
      by its own radius/stall test rather than at ``max_generations``; it says
      nothing of the accuracy: see ``tolerance``);
    * ``gauss`` (``G(a)``) and ``gauss_opt`` (``G(a*)``, the lower bound no feasible
      ``a`` can beat), and ``gap``, ``G(a) - G(a*)``, evaluated as
      ``0.5 d^T M d + (M a* - F)^T d`` (``d = a - a*``, free of the cancellation in
      the difference); in ``"penalty"`` mode ``a`` is not feasible and the gap can
      be negative;
    * ``error``, ``|a - a*|`` measured against the closed form;
    * ``error_bound``, a bound on ``|a - a*|`` from the closed form's optimum:
      ``|c| + sqrt(2 gap_f / lambda_min(N^T M N))``, with ``c = V_r^T a - beta``
      (the constraint violation; 0 up to rounding in ``"nullspace"`` mode) and
      ``gap_f`` the gap of the feasible point ``a - V_r c`` (valid because the
      objective is quadratic);
    * ``tolerance``, the accuracy achieved: an upper bound on ``|a - a*|``
      computed from the residuals of ``a`` alone, without ``a*`` (the Newton
      step from ``a``, ``|a - a*|^2 = |c|^2 + |(N^T M N)^-1 N^T (M (a - V_r c) -
      F)|^2``, plus its rounding; derivation in ``_accuracy``). It holds however
      the search ended (converged, stalled, or cut at ``max_generations``) and in
      ``"penalty"`` mode includes the penalty's bias;
    * ``requested``, ``tol (1 + |a|)``: a ``ConvergenceWarning`` is issued when
      ``tolerance > requested``, once per solver and run (:meth:`reset`, called by
      :meth:`run_stats` at the end of every ``simulate`` run, re-arms it);
    * ``penalty_bias``, ``|a_pen - a*|`` with ``a_pen`` the exact minimizer of the
      penalized objective (``"penalty"`` mode; 0 in ``"nullspace"`` mode): the
      accuracy the penalty allows at best, ``O(|lam| / penalty)``.

    References
    ----------
    Yang Liusong, Yao Wenli, "Study on singular problem of the generalized mass
    matrix based on Gauss principle of least constraints", International
    Journal of Mechanics Research 6 (2017) 56-62.
    """

    name = "ga"

    def __init__(self, system, *, mode: str = "nullspace", seed: int = 0, tol: float = 1e-8,
                 max_generations: int = 400, sol_per_pop: int = 20, penalty: float = 1e6,
                 radius: float | None = None, **kwargs) -> None:
        super().__init__(system, **kwargs)
        if mode not in MODES:
            raise ModelError(f"`mode` must be one of {MODES}, found {mode!r}.")
        if not (isinstance(tol, (int, float, np.floating)) and np.isfinite(tol) and tol > 0):
            raise ModelError(f"`tol` must be a positive number, found {tol!r}.")
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
        self._accuracy_warned = False
        self.generations: list[int] = []
        self.gaps: list[float] = []

    def compiled_units(self) -> list:
        """:meth:`StepSolver.compiled_units`: the rank decision of every step."""
        return [K.decide]

    def run_stats(self) -> dict:
        g = np.asarray(self.generations, dtype=float)
        gp = np.asarray(self.gaps, dtype=float)
        out = {"ga_generations_mean": float(g.mean()) if g.size else 0.0,
               "ga_generations_max": int(g.max()) if g.size else 0,
               "ga_gap_max": float(gp.max()) if gp.size else 0.0}
        self.reset()
        return out

    def _accuracy_message(self, t, tolerance, requested, out, bias, search) -> str:
        msg = (f"the GA step at t={t} reached |a - a*| <= {tolerance:.3g} (info['tolerance']), "
               f"worse than the requested tol={self.tol:g} (|a - a*| <= {requested:.3g}, "
               "tol (1 + |a|)); warned once per solver and run. ")
        stop = ("stopped at max_generations" if out is not None and not out.converged
                else "stopped by its radius/stall test")
        if self.mode == "penalty":
            return msg + (f"The penalty moves the minimizer by {bias:.3g} (~ |lam| / penalty, "
                          f"penalty={self.penalty:g}; info['penalty_bias']) and the search {stop} "
                          f"{search:.3g} from that minimizer (the penalized objective has "
                          "condition ~ penalty): use mode='nullspace'.")
        if out is not None and not out.converged:
            return msg + f"The search {stop}={self.max_generations}: raise it."
        return msg + ("A search that compares values only resolves a to about sqrt(eps) "
                      "relative (gaussopt.gauss.solvers.ga.pygad_ga): loosen `tol`.")

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
        Vr, beta = dec.Vr, dec.beta
        a_p, N = dec.null_space()
        k = N.shape[1]
        H = N.T @ M @ N                               # Hessian of G on the constraint set
        lam_H, U_H = np.linalg.eigh(H)
        lam_N = float(lam_H[0]) if k else np.inf
        out = None
        bias = search = 0.0
        if self.mode == "nullspace":
            if k == 0:
                a = a_p
            else:
                z0 = N.T @ (a_prev - a_p) if a_prev is not None else np.zeros(k)
                g0 = H @ z0 + N.T @ (M @ a_p - F)  # gradient at the warm start

                def objective(Z):
                    # G(a_p + N z) - G(a_p + N z0), evaluated as an increment from the
                    # warm start: the rounding error then scales with the distance to
                    # the optimum, not with |G| (the GA compares values only)
                    D = Z - z0
                    return D @ g0 + 0.5 * np.einsum("ij,jk,ik->i", D, H, D)

                radius = self._initial_radius(N @ z0 + a_p, M, F, w)
                from gaussopt.gauss.solvers.ga.pygad_ga import ga_minimize  # pygad imported on first use

                out = ga_minimize(objective, z0, radius, seed=seed, tol=self.tol,
                                  max_generations=self.max_generations,
                                  sol_per_pop=self.sol_per_pop)
                a = a_p + N @ out.x
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
            from gaussopt.gauss.solvers.ga.pygad_ga import ga_minimize

            out = ga_minimize(objective, x0, radius, seed=seed, tol=self.tol,
                              max_generations=self.max_generations, sol_per_pop=self.sol_per_pop)
            a = out.x
            # the penalty's own bias |a_pen - a*| (a_pen the exact minimizer of the penalized
            # objective, one Newton step from a), for the report and the warning only: the
            # tolerance below measures a against a* directly, bias included
            step = np.linalg.solve(Hp, g0 + Hp @ (a - x0))
            search = float(np.sqrt(step @ step))
            a_pen = a - step
            bias = _distance(a_pen, M, F, Vr, beta, N, lam_H, U_H)[0]
        # the accuracy achieved, from the residuals of a (no knowledge of a*): _accuracy
        tolerance, c = _accuracy(a, M, F, Vr, beta, N, lam_H, U_H)
        requested = self.tol * (1.0 + float(np.sqrt(a @ a)))
        g = float(0.5 * a @ M @ a - a @ F)
        # G(a) - G(a*) without cancellation, d = a - a*: 0.5 d^T M d + (M a* - F)^T d; the
        # second term is lam^T A d, exactly 0 in null-space mode (A d = 0 there), so it
        # is left out rather than evaluated as rounding noise
        d = a - a_star
        gap = float(0.5 * d @ M @ d)
        if self.mode == "penalty":
            gap += float((M @ a_star - F) @ d)   # < 0 possible: a is not feasible
        err = float(np.sqrt(d @ d))
        # error_bound against the closed form: a_f = a - Vr c is feasible (Vr^T a_f = beta), so
        # d_f = a_f - a* lies in null(A) and G(a_f) - G(a*) = 0.5 d_f^T M d_f >= lam_N |d_f|^2 / 2;
        # |a - a*| <= |c| + |d_f|. (sqrt(2 gap / lam) of the infeasible a itself is no bound:
        # at the penalty minimizer gap = -0.5 d^T M d - pen |An d|^2 < 0.)
        d_f = d - Vr @ c
        gap_f = float(0.5 * d_f @ M @ d_f)
        bound = (float(np.sqrt(c @ c) + np.sqrt(2 * max(gap_f, 0.0) / lam_N) * (1 + 1e-12)
                       + 1e-15 * (1 + np.abs(a_star).max(initial=0.0))) if lam_N > 0 else np.inf)
        if a_prev is not None:
            self._da_prev = float(np.abs(a - a_prev).max())
        self._a_prev = a.copy()
        gens = out.generations if out is not None else 0
        self.generations.append(gens)
        self.gaps.append(gap)
        st, rho, allow, be = dec.check(M, F, A, b, ref, self.rank_tol, a_star)
        if st != K.OK:
            raise_for_status(st, M=M, F=F, A=A, b=b, live=dec.live, rank=dec.r, rho=rho,
                             allow=allow, coords=self.coords, solver=self.name)
        if tolerance > requested and not self._accuracy_warned:
            self._accuracy_warned = True
            warnings.warn(self._accuracy_message(t, tolerance, requested, out, bias, search),
                          ConvergenceWarning, stacklevel=4)
        lam = dec.multipliers(M, F, a, A) if want_lam else np.zeros(A.shape[0])
        info = {"mode": self.mode, "generations": gens,
                "evaluations": out.evaluations if out is not None else 0,
                "converged": out.converged if out is not None else True,
                "gauss": g, "gauss_opt": g_opt, "gap": gap, "error_bound": bound, "error": err,
                "tolerance": tolerance, "requested": requested, "penalty_bias": bias,
                "genes": int(out.x.size) if out is not None else 0, "rank": r,
                "sigma": dec.s, "sigma_min": float(dec.s[r - 1]) if r else 1.0,
                "dropped_rows": np.flatnonzero(~dec.live).tolist(),
                "inconsistency": float(rho), "least_squares": bool(rho > np.sqrt(self.rank_tol)),
                "constraint_residual": float(np.abs(A @ a - b).max(initial=0.0))}
        return a, lam, info
