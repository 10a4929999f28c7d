"""Extended-precision reference for one Gauss step, error bound, and random case families.

One Gauss step solves::

    minimize 0.5 a^T M a - F^T a   subject to   A a = b

with ``M`` symmetric positive *semi*-definite. This module is the test oracle
of ``tests/test_step_fuzz.py`` and ``benchmarks/fuzz_step.py``; its reference
computation does not use any of gaussopt's code (gaussopt is imported only by
the harness functions :func:`build_system` and :func:`evaluate`).

Rank decision (the documented one, ``rank_tol = 1e-8``)
-------------------------------------------------------
1. Every row of ``A`` is divided by its Euclidean norm (``An``, ``bn``); rows
   that are exactly zero are dropped (their ``b`` must be 0).
2. SVD ``An = U S V^T``. A direction with singular value ``s_k <= rank_tol``
   is redundant and dropped; ``r`` directions are kept. (The normalized rows
   have ``s_1`` in ``[1, sqrt(m)]``, so the tolerance is absolute.)
3. The kept constraints are ``V_r^T a = S_r^{-1} U_r^T bn``; the part of ``bn``
   on the dropped left directions is the inconsistency.
4. ``a = a_p + N z`` with ``a_p = V_r S_r^{-1} U_r^T bn``, ``N = V[:, r:]``
   and ``(N^T M N) z = N^T (F - M a_p)``; unique iff ``N^T M N`` is positive
   definite.

:func:`reference_solution` carries this out with mpmath at 50 digits on the
exact float64 input values (``mpf(float)`` is exact).

Error bound
-----------
A backward-stable double-precision solver returns the exact solution of a
problem whose scaled data are perturbed normwise by ``eps_b = c * u``
(``u = 2**-52``; ``c`` a modest function of ``n + m``)::

    |dAn| <= eps_b s_1,  |dbn| <= eps_b |bn|,  |dM| <= eps_b |M|,  |dF| <= eps_b |F|

(2-norms; ``s_1 = |An|``). The rank decision is unchanged by such a
perturbation because no singular value lies within a factor 3 of
``rank_tol`` (checked for every case). To first order:

* the kept right singular subspace (and with it ``N``) turns by an angle
  ``theta <= eps_b s_1 / s_r`` (Wedin; the gap to the dropped singular values
  is at least ``s_r - rank_tol/3 ~ s_r``);
* the particular solution ``a_p = An_r^+ bn`` changes by
  ``|da_p| <= eps_b (|bn| + 2 s_1 |a_p| + s_1 |res| / s_r) / s_r``
  (perturbation of the truncated pseudo-inverse; ``res`` is the dropped,
  inconsistent part of ``bn``);
* with ``H = N^T M N``, ``lam = lambda_min(H)``, ``mu = |M| / lam`` and the
  constraint force ``Qc = M a - F`` (which lies in ``range(V_r)``), the
  variation of ``H z = N^T (F - M a_p)`` is
  ``H dz = dN^T (F - M a) + N^T (dF - dM a - M da_p - M dN z)``, so
  ``|dz| <= (theta |Qc| + eps_b |F| + eps_b |M| |a| + |M| |da_p| + |M| theta |z|) / lam``;
* ``da = da_p + dN z + N dz`` and ``|z| <= |a|`` (``a_p`` is orthogonal to ``N z``).

Collecting terms, ``|da| / |a| <= eps_b * kappa`` with::

    kappa = (1 + mu) (|bn| + 3 s_1 |a| + s_1 |res| / s_r) / (s_r |a|)
            + mu + (|F| + s_1 |Qc| / s_r) / (lam |a|)

where the terms with ``mu`` and ``lam`` are absent when ``r = n`` (no null
space: ``a`` does not depend on ``M`` or ``F``) and the first term is absent
when ``r = 0`` (no kept rows). This is :attr:`Reference.kappa`. It is never
smaller than the first-order sensitivity (``tests/test_step_fuzz.py`` checks
this with random perturbations in extended precision) and, unlike a KKT
condition number times ``|x| / |a|``, does not charge a fully constrained
system (``r = n``) for the size of ``F``.

For comparison :attr:`Reference.kappa_kkt` is the simpler estimate
``cond_2(K) |x| / |a| / min(s_r, 1)`` with the reduced, scaled KKT matrix
``K = [[M/w, V_r], [V_r^T, 0]]`` (``w = trace(M)/n``), ``x = (a, V_r^T Qc / w)``:
a normwise perturbation of ``K x = (F/w, S_r^{-1} U_r^T bn)`` moves ``x`` by
``cond(K) eps_b |x|``, and the reduction of the right-hand side divides the
error of ``bn`` by ``s_r``. It is an upper bound too, but much looser when
``|Qc| >> |M a|``.

The constant: :func:`bound_constant` ``C = 10 (n + m)``. A backward-stable
solve of this problem chains about five stages (row normalization, an
orthogonal factorization or SVD of the ``m x n`` rows, forming the reduced
matrix, a Cholesky or LU factorization of order at most ``n + m``, triangular
solves and the back transformation), each with a normwise backward error of
the classical form ``gamma_k = k u / (1 - k u)`` with ``k <= n + m`` (up to a
factor 2 for the Householder/Givens constants). Their sum is below
``10 (n + m) u``. The constant is derived, not fitted: no measured error was
used to choose it.

Case families
-------------
See :data:`FAMILIES` and :func:`make_case`. Every case is deterministic in
``(family, seed, attempt)`` (``numpy.random.default_rng``); :func:`generate`
returns the first attempt that passes :func:`validate` (determinate with a
margin, consistent, no singular value within a factor 3 of ``rank_tol``,
and a bound ``C eps kappa`` small enough to be a meaningful test).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Optional

import mpmath
import numpy as np

__all__ = [
    "RANK_TOL", "DPS", "EPS", "QP_ACCURACY", "FAMILIES", "SOLVERS",
    "StepCase", "Reference", "Evaluation", "InvalidCase",
    "reference_solution", "nullspace_solve", "bound_constant", "error_bound",
    "condition", "relative_error", "make_case", "generate", "family_cases", "validate",
    "build_system", "evaluate",
]

#: Documented rank tolerance on the singular values of the row-normalized ``A``.
RANK_TOL = 1e-8
#: Decimal digits of the reference computation.
DPS = 50
#: Unit roundoff of float64 as numpy reports it (``2**-52``).
EPS = float(np.finfo(float).eps)
#: Accuracy the QP solver is run at (Clarabel's ``tol_gap_rel = tol_feas = 1e-12``):
#: an interior-point result is the exact solution of a problem perturbed by about
#: this much, relative, so its error bound is ``QP_ACCURACY * kappa``.
QP_ACCURACY = 1e-12
#: No singular value of the normalized rows may lie in
#: ``[RANK_TOL / RANK_MARGIN, RANK_TOL * RANK_MARGIN]``.
RANK_MARGIN = 3.0
#: A case is determinate when ``lambda_min(N^T M N) > DETERMINACY_MARGIN * |M|_2``
#: (checked in extended precision).
DETERMINACY_MARGIN = 1e-12
#: A case is consistent when the dropped part of ``bn`` is below this, relative to ``|bn|``.
CONSISTENCY_TOL = 1e-7
#: Random cases whose bound ``C eps kappa`` exceeds this are rejected (they test nothing).
MAX_BOUND = 1e-4

#: The step solvers the families are run against.
SOLVERS = ("closed_form", "lagrange", "qp")

#: Family name -> one-line description.
FAMILIES = {
    "spd_full": "SPD M (eigenvalues over 1..6 decades), 0..n independent rows",
    "psd_full": "singular PSD M = D B B^T D (exact, rank n-k), k..n independent rows",
    "spd_redundant": "SPD M, independent rows plus exact duplicates / 2^j multiples / negations",
    "psd_redundant": "singular PSD M, independent rows plus exactly redundant rows",
    "near_redundant": "two rows with normalized singular value in [1e-7, 1e-3] (kept) "
                      "or [1e-13, 1e-9] (dropped, consistent b)",
    "small_accel": "0..2 rows, F and b scaled (by 2^j) to |a| in [1e-12, 1e-6]",
    "large_accel": "0..2 rows, F and b scaled (by 2^j) to |a| in [1e6, 1e9]",
    "issue": "the four literal cases of the issue",
}
_FAMILY_ID = {name: i for i, name in enumerate(FAMILIES)}


# =============================================================================== data
@dataclass(frozen=True, eq=False)
class StepCase:
    """One Gauss step with constant data.

    Attributes
    ----------
    M : ndarray, shape (n, n)
    F : ndarray, shape (n,)
    A : ndarray, shape (m, n)
    b : ndarray, shape (m,)
    family : str
    seed, attempt : int
        ``make_case(family, seed, attempt)`` rebuilds the case.
    note : str
        What the generator intended (e.g. ``"below"`` for a dropped direction).
    """

    M: np.ndarray
    F: np.ndarray
    A: np.ndarray
    b: np.ndarray
    family: str
    seed: int
    attempt: int = 0
    note: str = ""

    @property
    def n(self) -> int:
        return self.F.size

    @property
    def m(self) -> int:
        return self.A.shape[0]

    @property
    def call(self) -> str:
        """The expression that rebuilds this case."""
        return f"make_case({self.family!r}, {self.seed}, {self.attempt})"

    def __repr__(self) -> str:
        extra = f", {self.note}" if self.note else ""
        return f"{self.call}  # n={self.n}, m={self.m}{extra}"

    def data_repr(self) -> str:
        """The literal data (17 significant digits, reproduces the floats exactly)."""
        fmt = {"float_kind": lambda x: repr(float(x))}
        return "M={}, F={}, A={}, b={}".format(
            *(np.array2string(x, separator=", ", formatter=fmt, max_line_width=10**6)
              for x in (self.M, self.F, self.A, self.b)))


@dataclass(frozen=True, eq=False)
class Reference:
    """The extended-precision solution of one step and its condition estimates.

    Attributes
    ----------
    a : ndarray, shape (n,)
        The solution rounded to float64.
    a_mp : mpmath.matrix
        The solution at :data:`DPS` digits.
    rank : int
        Number of kept singular directions ``r``.
    sigma : ndarray
        All singular values of the row-normalized nonzero rows, descending.
    zero_rows : tuple of int
        Rows of ``A`` that are exactly zero (dropped).
    inconsistency : float
        ``|res| / |bn|``, ``res`` the part of ``bn`` on the dropped left singular
        directions (0 when nothing is dropped or ``bn = 0``).
    determinate : bool
        ``N^T M N - DETERMINACY_MARGIN |M|_2 I`` has a Cholesky factor at
        :data:`DPS` digits.
    lam_min, lam_max : float
        Extreme eigenvalues of ``H = N^T M N`` (``nan`` when ``r = n``).
    norm_M : float
        ``|M|_2``.
    mu : float
        ``|M|_2 / lam_min`` (0 when ``r = n``).
    norm_a, norm_F, norm_bn, norm_res, norm_Qc : float
        2-norms of ``a``, ``F``, ``bn``, ``res`` and ``Qc = M a - F``.
    kappa : float
        The condition estimate of the module docstring.
    kappa_kkt : float
        ``cond_2(K) |x| / |a| / min(s_r, 1)`` (module docstring).
    cond_K, cond_H : float
        ``cond_2`` of the reduced scaled KKT matrix and of ``H``.
    """

    a: np.ndarray
    a_mp: object
    rank: int
    sigma: np.ndarray
    zero_rows: tuple
    inconsistency: float
    determinate: bool
    lam_min: float
    lam_max: float
    norm_M: float
    mu: float
    norm_a: float
    norm_F: float
    norm_bn: float
    norm_res: float
    norm_Qc: float
    kappa: float
    kappa_kkt: float
    cond_K: float
    cond_H: float

    @property
    def s_r(self) -> float:
        """Smallest kept singular value (``nan`` when ``r = 0``)."""
        return float(self.sigma[self.rank - 1]) if self.rank else math.nan

    @property
    def determinacy_margin(self) -> float:
        """``lambda_min(H) / |M|_2`` (``inf`` when ``r = n``)."""
        if self.rank == self.a.size:
            return math.inf
        return self.lam_min / self.norm_M if self.norm_M > 0 else math.inf

    def summary(self) -> str:
        return (f"r={self.rank}, |a|={self.norm_a:.3g}, s_r={self.s_r:.3g}, "
                f"kappa={self.kappa:.3g}, kappa_kkt={self.kappa_kkt:.3g}, "
                f"cond_H={self.cond_H:.3g}")


class InvalidCase(ValueError):
    """A generated case is not a valid test case (indeterminate, inconsistent, ...)."""


# =============================================================================== reference
def _mp_matrix(x: np.ndarray, rows: int, cols: int):
    """Exact conversion of a float64 array (``mpf(float)`` is exact)."""
    out = mpmath.matrix(rows, cols)
    flat = np.asarray(x, dtype=float).reshape(rows, cols)
    for i in range(rows):
        for j in range(cols):
            out[i, j] = mpmath.mpf(float(flat[i, j]))
    return out


def _mp_norm(v) -> object:
    return mpmath.sqrt(mpmath.fsum(x * x for x in v))


def reference_solution(M, F, A, b, *, rank_tol: float = RANK_TOL, dps: int = DPS) -> Reference:
    """Solve one Gauss step at ``dps`` digits with the documented rank decision.

    Parameters
    ----------
    M : array_like, shape (n, n)
        Symmetric positive semi-definite mass matrix (float64 values, used exactly).
    F : array_like, shape (n,)
    A : array_like, shape (m, n)
        Constraint rows (``m`` may be 0).
    b : array_like, shape (m,)
    rank_tol : float, default :data:`RANK_TOL`
        Singular values of the row-normalized ``A`` at or below it are dropped.
    dps : int, default :data:`DPS`
        Decimal digits of the computation.

    Returns
    -------
    Reference

    Raises
    ------
    InvalidCase
        A zero row has a nonzero right-hand side, or the reduced matrix
        ``N^T M N`` is not positive definite (the motion is not determined).

    Notes
    -----
    ``determinate`` is False (and no exception raised) when ``N^T M N`` is
    positive definite but with a margin below :data:`DETERMINACY_MARGIN`.

    Examples
    --------
    >>> ref = reference_solution(np.diag([1.0, 1e-9, 0.0]), [1.0, 1.0, 1.0],
    ...                          [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], [0.0, 0.0])
    >>> ref.a, ref.rank
    (array([1.e+00, 1.e+09, 0.e+00]), 1)
    """
    M = np.asarray(M, dtype=float)
    F = np.asarray(F, dtype=float).reshape(-1)
    n = F.size
    A = np.asarray(A, dtype=float).reshape(-1, n)
    b = np.asarray(b, dtype=float).reshape(-1)
    m = A.shape[0]
    with mpmath.workdps(dps):
        Mm = _mp_matrix(M, n, n)
        Fm = _mp_matrix(F, n, 1)
        # 1. row normalization; exactly zero rows are dropped
        zero_rows = tuple(i for i in range(m) if not np.any(A[i]))
        for i in zero_rows:
            if b[i] != 0.0:
                raise InvalidCase(f"row {i} of A is zero but b[{i}] = {b[i]!r}")
        keep = [i for i in range(m) if i not in zero_rows]
        mk = len(keep)
        An = mpmath.matrix(mk, n) if mk else None
        bn = mpmath.matrix(mk, 1) if mk else None
        for k, i in enumerate(keep):
            row = [mpmath.mpf(float(x)) for x in A[i]]
            nrm = _mp_norm(row)
            for j in range(n):
                An[k, j] = row[j] / nrm
            bn[k] = mpmath.mpf(float(b[i])) / nrm
        # 2. SVD and rank decision
        if mk:
            U, S, Vt = mpmath.svd_r(An, full_matrices=True, compute_uv=True)
            order = sorted(range(len(S)), key=lambda k: -S[k])
            sv = [S[k] for k in order]
            r = sum(1 for s in sv if s > rank_tol)
            Ur = [[U[i, order[k]] for k in range(r)] for i in range(mk)]          # mk x r
            kept_rows = [order[k] for k in range(r)]
            dropped = [k for k in range(n) if k not in kept_rows]
            Vr = mpmath.matrix(n, r)
            N = mpmath.matrix(n, n - r) if r < n else None
            for j in range(n):
                for k in range(r):
                    Vr[j, k] = Vt[kept_rows[k], j]
                for k, row_k in enumerate(dropped):
                    N[j, k] = Vt[row_k, j]
            # 3. reduced right-hand side c = S_r^{-1} U_r^T bn and the dropped part of bn
            proj = [mpmath.fsum(Ur[i][k] * bn[i] for i in range(mk)) for k in range(r)]
            c = [proj[k] / sv[k] for k in range(r)]
            res = [bn[i] - mpmath.fsum(Ur[i][k] * proj[k] for k in range(r)) for i in range(mk)]
            norm_res = _mp_norm(res)
            norm_bn = _mp_norm(bn)
            a_p = mpmath.matrix(n, 1)
            for j in range(n):
                a_p[j] = mpmath.fsum(Vr[j, k] * c[k] for k in range(r))
        else:
            sv, r, Vr = [], 0, None
            N = mpmath.eye(n)
            norm_res = norm_bn = mpmath.mpf(0)
            a_p = mpmath.matrix(n, 1)
        # 4. null-space part: (N^T M N) z = N^T (F - M a_p)
        norm_M = float(np.linalg.eigvalsh(M)[-1]) if n else 0.0
        if r < n:
            H = N.T * Mm * N
            H = (H + H.T) / 2
            try:
                z = mpmath.cholesky_solve(H, N.T * (Fm - Mm * a_p))
            except (ValueError, ZeroDivisionError) as e:
                raise InvalidCase(f"N^T M N is not positive definite ({e})") from None
            a_mp = a_p + N * z
            tau = DETERMINACY_MARGIN * norm_M
            try:
                mpmath.cholesky(H - tau * mpmath.eye(n - r))
                determinate = True
            except (ValueError, ZeroDivisionError):
                determinate = False
            ev = np.linalg.eigvalsh(np.array(H.tolist(), dtype=float))
            lam_min, lam_max = float(ev[0]), float(ev[-1])
        else:
            a_mp = a_p
            determinate = True
            lam_min = lam_max = math.nan
        Qc_mp = Mm * a_mp - Fm
        norm_a = float(_mp_norm(a_mp))
        norm_Qc = float(_mp_norm(Qc_mp))
        a = np.array([float(x) for x in a_mp])
        Qc = np.array([float(x) for x in Qc_mp])
        Vr_f = (np.array(Vr.tolist(), dtype=float).reshape(n, r) if r else np.zeros((n, 0)))
    sigma = np.array([float(s) for s in sv])
    norm_F = float(np.linalg.norm(F))
    norm_bn, norm_res = float(norm_bn), float(norm_res)
    inconsistency = norm_res / norm_bn if norm_bn > 0 else 0.0
    kappa, kappa_kkt, cond_K, mu = _condition(
        n=n, r=r, sigma=sigma, M=M, Vr=Vr_f, Qc=Qc, norm_M=norm_M, lam_min=lam_min,
        norm_a=norm_a, norm_F=norm_F, norm_bn=norm_bn, norm_res=norm_res, norm_Qc=norm_Qc)
    cond_H = lam_max / lam_min if r < n and lam_min > 0 else (math.inf if r < n else 1.0)
    return Reference(a=a, a_mp=a_mp, rank=r, sigma=sigma, zero_rows=zero_rows,
                     inconsistency=inconsistency, determinate=determinate, lam_min=lam_min,
                     lam_max=lam_max, norm_M=norm_M, mu=mu, norm_a=norm_a, norm_F=norm_F,
                     norm_bn=norm_bn, norm_res=norm_res, norm_Qc=norm_Qc, kappa=kappa,
                     kappa_kkt=kappa_kkt, cond_K=cond_K, cond_H=cond_H)


def _condition(*, n, r, sigma, M, Vr, Qc, norm_M, lam_min, norm_a, norm_F, norm_bn,
               norm_res, norm_Qc) -> tuple[float, float, float, float]:
    """``(kappa, kappa_kkt, cond_K, mu)`` as defined in the module docstring."""
    if norm_a == 0.0:
        return math.inf, math.inf, math.inf, math.inf
    s1 = float(sigma[0]) if sigma.size else 0.0
    sr = float(sigma[r - 1]) if r else math.inf
    kappa = 0.0
    mu = 0.0
    if r < n:
        mu = norm_M / lam_min if lam_min > 0 else math.inf
        kappa += mu + (norm_F + (s1 * norm_Qc / sr if r else 0.0)) / (lam_min * norm_a)
    if r:
        kappa += (1.0 + mu) * (norm_bn + 3.0 * s1 * norm_a + s1 * norm_res / sr) / (sr * norm_a)
    kappa = max(kappa, 1.0)
    # the simpler KKT estimate
    w = float(np.trace(M)) / n
    w = w if w > 0 else 1.0
    K = np.zeros((n + r, n + r))
    K[:n, :n] = M / w
    K[:n, n:] = Vr
    K[n:, :n] = Vr.T
    cond_K = float(np.linalg.cond(K)) if n + r else 1.0
    lam_s = Vr.T @ Qc / w
    x_norm = math.hypot(norm_a, float(np.linalg.norm(lam_s)))
    kappa_kkt = cond_K * x_norm / norm_a / (min(sr, 1.0) if r else 1.0)
    return kappa, kappa_kkt, cond_K, mu


def nullspace_solve(M, F, A, b, *, rank_tol: float = RANK_TOL) -> tuple[np.ndarray, int]:
    """Float64 null-space method following the documented rank decision.

    A plain, backward-stable double-precision implementation (SVD of the
    normalized rows, Cholesky of ``N^T M N``). It is the baseline showing that
    the bound ``C eps kappa`` is attainable in double precision, and gives the
    generators a cheap estimate of ``a``.

    Returns
    -------
    a : ndarray, shape (n,)
    r : int
    """
    M = np.asarray(M, dtype=float)
    F = np.asarray(F, dtype=float)
    n = F.size
    A = np.asarray(A, dtype=float).reshape(-1, n)
    b = np.asarray(b, dtype=float)
    norms = np.sqrt(np.sum(A * A, axis=1))
    keep = norms > 0
    An = A[keep] / norms[keep, None]
    bn = b[keep] / norms[keep]
    if An.shape[0]:
        U, s, Vt = np.linalg.svd(An, full_matrices=True)
        r = int(np.count_nonzero(s > rank_tol))
        a_p = Vt[:r].T @ ((U[:, :r].T @ bn) / s[:r])
        N = Vt[r:].T
    else:
        r, a_p, N = 0, np.zeros(n), np.eye(n)
    if r == n:
        return a_p, r
    H = N.T @ M @ N
    L = np.linalg.cholesky(0.5 * (H + H.T))
    y = np.linalg.solve(L, N.T @ (F - M @ a_p))
    z = np.linalg.solve(L.T, y)
    return a_p + N @ z, r


# =============================================================================== bound
def bound_constant(n: int, m: int) -> float:
    """``C = 10 (n + m)`` (derivation in the module docstring)."""
    return 10.0 * (n + m)


def condition(ref: Reference, kind: str = "refined") -> float:
    """``ref.kappa`` (``kind="refined"``, the default) or ``ref.kappa_kkt`` (``"kkt"``)."""
    if kind == "refined":
        return ref.kappa
    if kind == "kkt":
        return ref.kappa_kkt
    raise ValueError(f"kind must be 'refined' or 'kkt', not {kind!r}")


def error_bound(case: StepCase, ref: Reference, solver: str, kind: str = "refined") -> float:
    """Largest acceptable relative error of ``solver`` on ``case``.

    ``C eps kappa`` for a direct solver; for ``"qp"`` at least
    ``QP_ACCURACY * kappa`` (the interior-point tolerance acts as a backward
    error of that relative size). ``kind`` selects the condition estimate
    (:func:`condition`).
    """
    kappa = condition(ref, kind)
    bound = bound_constant(case.n, case.m) * EPS * kappa
    if solver == "qp":
        bound = max(bound, QP_ACCURACY * kappa)
    return bound


def relative_error(a, ref: Reference) -> float:
    """``|a - a_ref| / |a_ref|``, the difference taken in extended precision."""
    with mpmath.workdps(DPS):
        d = [mpmath.mpf(float(x)) - y for x, y in zip(np.asarray(a, dtype=float), ref.a_mp)]
        return float(_mp_norm(d)) / ref.norm_a


# =============================================================================== families
def _log_uniform(rng, lo: float, hi: float, size=None):
    return 10.0 ** rng.uniform(math.log10(lo), math.log10(hi), size)


def _orthogonal(rng, n: int) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.sign(np.diag(R))


def _spd_mass(rng, n: int) -> np.ndarray:
    """``scale * Q diag(ev) Q^T``, eigenvalues spread over 1..6 decades, exactly symmetric."""
    decades = rng.uniform(1.0, 6.0)
    ev = 10.0 ** rng.uniform(-decades / 2, decades / 2, n)
    ev[0], ev[-1] = 10.0 ** (-decades / 2), 10.0 ** (decades / 2)  # the spread is realized
    Q = _orthogonal(rng, n)
    M = _log_uniform(rng, 1e-6, 1e6) * (Q * ev) @ Q.T
    return 0.5 * (M + M.T)


def _psd_mass(rng, n: int, k: int) -> np.ndarray:
    """Exactly singular PSD ``M = 2^e D B B^T D`` of rank ``n - k``.

    ``B`` is an ``n x (n-k)`` integer matrix (``|B_ij| <= 40``) and ``D`` a
    diagonal of powers of two, so every product and sum is exact in float64:
    ``M`` is exactly symmetric, positive semi-definite and of rank ``n - k``.
    """
    while True:
        B = rng.integers(-40, 41, size=(n, n - k)).astype(float)
        if np.linalg.matrix_rank(B) == n - k:
            break
    spread = int(rng.integers(0, 6))               # D^2 spans up to 2^20 ~ 1e6
    D = 2.0 ** rng.integers(-spread, spread + 1, size=n)
    G = B @ B.T                                     # exact: integers below 2^53
    scale = 2.0 ** int(rng.integers(-20, 21))       # ~1e-6 .. 1e6, exact
    return scale * (D[:, None] * G * D[None, :])


def _mass(rng, n: int, k: int) -> np.ndarray:
    return _spd_mass(rng, n) if k == 0 else _psd_mass(rng, n, k)


def _rows(rng, m: int, n: int) -> np.ndarray:
    """``m`` random rows, each scaled by a factor in ``[1e-6, 1e6]``."""
    G = rng.standard_normal((m, n))
    return G * _log_uniform(rng, 1e-6, 1e6, m)[:, None]


def _force_and_rhs(rng, A: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    F = _log_uniform(rng, 1e-6, 1e6) * rng.standard_normal(n)
    a_true = _log_uniform(rng, 1e-6, 1e6) * rng.standard_normal(n)
    return F, A @ a_true


def _add_redundant(rng, A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """Append 1..3 exact copies of rows: duplicates, ``2^j`` multiples, negations;
    shuffle. Exact in float64, so ``b`` stays exactly consistent."""
    m0 = A.shape[0]
    extra_A, extra_b, kinds = [], [], []
    for _ in range(int(rng.integers(1, 4))):
        i = int(rng.integers(0, m0))
        kind = ("duplicate", "pow2", "negated", "neg_pow2")[int(rng.integers(0, 4))]
        f = 1.0
        if kind in ("pow2", "neg_pow2"):
            f = 2.0 ** int(rng.choice([j for j in range(-30, 31) if j]))
        if kind.startswith("neg"):
            f = -f
        extra_A.append(f * A[i])
        extra_b.append(f * b[i])
        kinds.append(kind)
    A2 = np.vstack([A, np.array(extra_A)])
    b2 = np.concatenate([b, np.array(extra_b)])
    perm = rng.permutation(A2.shape[0])
    return A2[perm], b2[perm], "+".join(kinds)


def _rescale(rng, M, F, A, b, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Scale ``F, b`` by a power of two (exact) so that ``|a|`` lands in ``[lo, hi]``."""
    a, _ = nullspace_solve(M, F, A, b)
    target = _log_uniform(rng, lo, hi)
    f = 2.0 ** round(math.log2(target / np.linalg.norm(a)))
    return f * F, f * b, target


def _issue_case(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    if i == 0:
        return (np.diag([1.0, 1e-9, 0.0]), np.array([1.0, 1.0, 1.0]),
                np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), np.zeros(2),
                "issue (i): duplicate rows, M = diag(1, 1e-9, 0), a = (1, 1e9, 0)")
    if i == 1:
        A = np.array([[1e-6, 0.0], [1000.000998, 6.78e-5]])
        a_true = np.array([0.75, -1.25])
        return (1e4 * np.eye(2), np.array([3e4, -1e4]), A, A @ a_true,
                "issue (ii): M = 1e4 I, rows (1e-6, 0), (1000.000998, 6.78e-5), s_2 ~ 4.8e-8")
    if i == 2:
        return (np.diag([1.0, 2.0]), np.array([1e-8, 1e-8]), np.zeros((0, 2)), np.zeros(0),
                "issue (iii): M = diag(1, 2), F = (1e-8, 1e-8), no rows")
    if i == 3:
        # two near-parallel rows in n = 3: normalized singular value ~2.6e-7
        r1 = np.array([0.3, -1.2, 2.0])
        p = np.array([2.0, 0.5, 0.0])             # p . r1 = 0
        u, p = r1 / np.linalg.norm(r1), p / np.linalg.norm(p)
        phi = 2.0 * math.asin(2.6e-7 / math.sqrt(2.0))
        r2 = 40.0 * (math.cos(phi) * u + math.sin(phi) * p)
        A = np.vstack([r1, r2])
        a_true = np.array([0.7, -0.4, 1.1])
        return (np.diag([2.0, 3.0, 5.0]), np.array([1.0, -2.0, 0.5]), A, A @ a_true,
                "issue (iv): two near-parallel rows, n = 3, s_2 ~ 2.6e-7")
    raise ValueError(f"the issue family has 4 cases (0..3), not {i}")


def make_case(family: str, seed: int, attempt: int = 0) -> StepCase:
    """Build case ``seed`` of ``family`` (deterministic in ``(family, seed, attempt)``).

    Parameters
    ----------
    family : str
        A key of :data:`FAMILIES`.
    seed : int
        Case number (``0..3`` for ``"issue"``).
    attempt : int
        Retry counter used by :func:`generate` when a draw is rejected.

    Returns
    -------
    StepCase
        Not yet validated; see :func:`generate`.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {list(FAMILIES)}")
    if family == "issue":
        M, F, A, b, note = _issue_case(seed)
        return StepCase(M, F, A, b, family, seed, attempt, note)
    rng = np.random.default_rng([_FAMILY_ID[family], seed, attempt])
    n = int(rng.integers(2, 9))
    note = ""
    if family in ("spd_full", "psd_full", "spd_redundant", "psd_redundant"):
        k = 0 if family.startswith("spd") else int(rng.integers(1, n))
        lo = max(k, 1 if family.endswith("redundant") else 0)
        m0 = int(rng.integers(lo, n + 1))
        M = _mass(rng, n, k)
        A = _rows(rng, m0, n)
        F, b = _force_and_rhs(rng, A, n)
        note = f"k={k}" if k else ""
        if family.endswith("redundant"):
            A, b, kinds = _add_redundant(rng, A, b)
            note = ", ".join(x for x in (note, kinds) if x)
    elif family == "near_redundant":
        band = "above" if rng.random() < 0.5 else "below"
        s = _log_uniform(rng, *((1e-7, 1e-3) if band == "above" else (1e-13, 1e-9)))
        m0 = int(rng.integers(1, n))                 # m0 + 1 <= n rows
        k = 0 if rng.random() < 0.5 else int(rng.integers(1, m0 + 1))
        M = _mass(rng, n, k)
        G = rng.standard_normal((m0, n))
        i = int(rng.integers(0, m0))
        u = G[i] / np.linalg.norm(G[i])
        p = rng.standard_normal(n)
        p -= (p @ u) * u
        p /= np.linalg.norm(p)
        phi = 2.0 * math.asin(s / math.sqrt(2.0))   # sigma_min([u; u']) = sqrt(2) sin(phi/2)
        twin = math.cos(phi) * u + math.sin(phi) * p
        A = np.vstack([G, twin]) * _log_uniform(rng, 1e-6, 1e6, m0 + 1)[:, None]
        A = A[rng.permutation(m0 + 1)]
        F, b = _force_and_rhs(rng, A, n)
        note = f"{band}, target s={s:.2g}" + (f", k={k}" if k else "")
    else:                                            # small_accel / large_accel
        m0 = int(rng.integers(0, min(2, n) + 1))
        k = 0 if (m0 == 0 or rng.random() < 0.5) else int(rng.integers(1, m0 + 1))
        M = _mass(rng, n, k)
        A = _rows(rng, m0, n)
        F, b = _force_and_rhs(rng, A, n)
        lo, hi = (1e-12, 1e-6) if family == "small_accel" else (1e6, 1e9)
        F, b, target = _rescale(rng, M, F, A, b, lo, hi)
        note = f"target |a|={target:.2g}" + (f", k={k}" if k else "")
    return StepCase(M, F, A.reshape(-1, n), b, family, seed, attempt, note)


def validate(case: StepCase, ref: Reference, *, max_bound: Optional[float] = MAX_BOUND) -> None:
    """Raise :class:`InvalidCase` unless ``case`` is a sound test case.

    Checks: determinate with margin (``lambda_min(N^T M N) > 1e-12 |M|_2``, in
    extended precision), consistent (``inconsistency <= CONSISTENCY_TOL``), no
    singular value within a factor :data:`RANK_MARGIN` of :data:`RANK_TOL`,
    ``a != 0``, the family's intent (``near_redundant``: the smallest singular
    value in the intended band; ``*_redundant``: rank below the row count;
    ``small_accel``/``large_accel``: ``|a|`` in range) and, unless ``max_bound``
    is None, ``C eps kappa <= max_bound``.
    """
    why = []
    if not ref.determinate:
        why.append(f"not determinate with margin (lambda_min/|M| = {ref.determinacy_margin:.3g})")
    if ref.inconsistency > CONSISTENCY_TOL:
        why.append(f"inconsistent ({ref.inconsistency:.3g})")
    near = ref.sigma[(ref.sigma > RANK_TOL / RANK_MARGIN) & (ref.sigma < RANK_TOL * RANK_MARGIN)]
    if near.size:
        why.append(f"singular value {near[0]:.3g} within a factor {RANK_MARGIN} of rank_tol")
    if not (ref.norm_a > 0 and np.all(np.isfinite(ref.a))):
        why.append(f"|a| = {ref.norm_a}")
    fam = case.family
    if fam == "near_redundant":
        s = float(ref.sigma[-1]) if ref.sigma.size == case.m else 0.0
        want = (1e-7, 1e-3) if case.note.startswith("above") else (1e-13, 1e-9)
        if not want[0] <= s <= want[1]:
            why.append(f"smallest singular value {s:.3g} outside {want}")
    if fam.endswith("redundant") and fam != "near_redundant" and not ref.rank < case.m:
        why.append("no redundant row")
    if fam in ("spd_full", "psd_full") and ref.rank != case.m:
        why.append(f"rows not independent (rank {ref.rank} < {case.m})")
    if fam == "small_accel" and not 1e-12 / 2 <= ref.norm_a <= 2e-6:
        why.append(f"|a| = {ref.norm_a:.3g} not small")
    if fam == "large_accel" and not 1e6 / 2 <= ref.norm_a <= 2e9:
        why.append(f"|a| = {ref.norm_a:.3g} not large")
    if max_bound is not None:
        bound = bound_constant(case.n, case.m) * EPS * ref.kappa
        if not bound <= max_bound:
            why.append(f"bound C eps kappa = {bound:.3g} > {max_bound:g} (tests nothing)")
    if why:
        raise InvalidCase(f"{case!r}: " + "; ".join(why))


def generate(family: str, seed: int, *, max_attempts: int = 50) -> tuple[StepCase, Reference]:
    """The first valid attempt of case ``seed`` of ``family``, with its reference.

    The literal ``"issue"`` cases are validated without the ``MAX_BOUND`` filter
    (they are kept whatever their condition).
    """
    last = None
    for attempt in range(max_attempts if family != "issue" else 1):
        case = make_case(family, seed, attempt)
        try:
            ref = reference_solution(case.M, case.F, case.A, case.b)
            validate(case, ref, max_bound=None if family == "issue" else MAX_BOUND)
        except InvalidCase as e:
            last = e
            continue
        return case, ref
    raise InvalidCase(f"no valid case for {family!r} seed {seed}: {last}")


def family_cases(family: str, count: int, start: int = 0) -> list[tuple[StepCase, Reference]]:
    """Cases ``start .. start+count-1`` of ``family`` (at most the 4 literal ``"issue"`` cases)."""
    if family == "issue":
        seeds = range(min(start, 4), min(start + count, 4))
    else:
        seeds = range(start, start + count)
    return [generate(family, s) for s in seeds]


# =============================================================================== harness
@dataclass
class Evaluation:
    """One solver on one case.

    ``err`` is the relative error (``nan`` if the solver raised), ``ratio``
    is ``err / (eps kappa)`` (``kappa`` of the chosen kind), ``bound`` the acceptable error
    (:func:`error_bound`), ``rank`` the solver's ``info["rank"]`` (None if
    missing), ``exception`` the exception raised (None if it returned).
    """

    case: StepCase
    ref: Reference
    solver: str
    err: float = math.nan
    ratio: float = math.nan
    bound: float = math.nan
    rank: Optional[int] = None
    exception: Optional[BaseException] = None
    warnings: list = field(default_factory=list)

    @property
    def above(self) -> bool:
        """The solver returned, and its error exceeds the bound (or is not finite)."""
        return self.exception is None and not self.err <= self.bound

    @property
    def rank_ok(self) -> bool:
        return self.exception is not None or self.rank == self.ref.rank

    def describe(self) -> str:
        if self.exception is not None:
            what = f"raised {type(self.exception).__name__}: {str(self.exception)[:160]}"
        else:
            what = (f"err={self.err:.3g} (bound {self.bound:.3g}, err/(eps kappa)="
                    f"{self.ratio:.3g}), rank={self.rank}")
        return f"{self.case!r} [{self.ref.summary()}]: {what}"


def build_system(case: StepCase):
    """A fresh ``gaussopt.System`` with the case's constant data."""
    import gaussopt as go

    coords = tuple(f"q{i}" for i in range(case.n))
    cons = [go.AccelerationConstraint(case.A, case.b, name="rows")] if case.m else []
    return go.System(coords, mass=case.M, force=case.F, constraints=cons, name=case.call)


def evaluate(case: StepCase, ref: Reference, solver: str, kind: str = "refined") -> Evaluation:
    """Run ``solver`` (a gaussopt solver name, or ``"nullspace64"`` for
    :func:`nullspace_solve`) on a fresh system and compare with the reference;
    ``kind`` selects the condition estimate of the bound (:func:`condition`).

    ``ObjectiveMismatchWarning`` is ignored (a singular ``M`` with an unbalanced
    null-space force is expected and irrelevant: the exact objective is used);
    a ``RuntimeWarning`` is raised as an error, as the test configuration does
    for gaussopt. Any exception is recorded, not propagated.
    """
    ev = Evaluation(case, ref, solver, bound=error_bound(case, ref, solver, kind))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.simplefilter("error", RuntimeWarning)
            if solver == "nullspace64":
                a, ev.rank = nullspace_solve(case.M, case.F, case.A, case.b)
            else:
                import gaussopt as go

                warnings.filterwarnings("ignore", category=go.ObjectiveMismatchWarning)
                n = case.n
                step = go.solve_step(build_system(case), 0.0, np.zeros(n), np.zeros(n),
                                     solver=solver)
                a = step.a
                ev.rank = step.info.get("rank")
        ev.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    except Exception as e:  # noqa: BLE001 - every exception is recorded and judged by the caller
        ev.exception = e
        return ev
    ev.err = relative_error(a, ref)
    ev.ratio = ev.err / (EPS * condition(ref, kind))
    return ev
