"""The linear algebra of one Gauss step, shared by every step solver.

Problem: ``minimize 0.5 a^T M a - F^T a  subject to  A a = b`` with ``M``
symmetric positive semi-definite. Its KKT conditions are Lagrange's equations
of the first kind ``M a = F + A^T lam``, ``A a = b``.

Rank decisions (documented tolerance ``rank_tol``, default ``1e-8``)
-------------------------------------------------------------------
1. Every row of ``A`` is divided by its Euclidean norm (so the decision does
   not depend on the units of a row). A row whose norm is below
   ``rank_tol`` times its *reference scale* (the largest norm the row has
   shown to this solver, or the ``row_scale`` the user gave) has *vanished*
   (a singular position) and is dropped; its right-hand side must vanish too.
2. ``M`` is scaled by ``w = trace(M)/n`` (``1`` if ``M = 0``) and the
   augmented matrix ``Ma = M + w An^T An`` is factorized (Cholesky).
   ``rank([M; A]) = n`` exactly when ``Ma`` is positive definite; the motion
   is declared indeterminate when a Cholesky pivot falls below
   ``rank_tol**2 * w`` (``Ma/w`` has eigenvalues in ``(0, n+m]``).
3. With ``C = L^{-1} An^T`` (``L L^T = Ma``) every singular value of
   ``sqrt(w) C`` lies in ``[0, 1]``; those below ``rank_tol`` are redundant
   directions of the constraints (in the metric of ``Ma``). The numerical rank
   of the constraints is the number of singular values above it.
4. ``A a = b`` is consistent when the part of the normalized right-hand side
   outside the range of the kept directions is below ``sqrt(rank_tol)``
   relative to the right-hand side's size; otherwise
   :class:`~gaussopt.exceptions.InconsistentConstraintsError`.

The closed form (Udwadia--Kalaba with the weighted Moore--Penrose inverse, in
the augmented-mass form of Udwadia--Phohomsiri for singular ``M``) is then::

    a = a_u + Ma^{-1/2} (An Ma^{-1/2})^+ (bn - An a_u),    a_u = Ma^{-1} F

evaluated with the Cholesky factor in place of ``Ma^{1/2}``, which gives the
same ``Ma``-weighted minimum-norm correction. No inverse is formed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy.linalg import lapack

from .exceptions import (InconsistentConstraintsError, IndeterminateMotionError, ModelError,
                         SolverError)

__all__ = ["GaussSolution", "solve_gauss", "null_space_split", "min_norm_multipliers", "inconsistency_residual",
           "mass_scale", "range_projector"]

DEFAULT_RANK_TOL = 1e-8
_NO_ROWS = np.zeros(0, dtype=int)
_NO_LAM = np.zeros(0)
_FAST_PIVOT2 = 1e-8


@dataclass
class GaussSolution:
    """Everything one closed-form step produced.

    Attributes
    ----------
    a : ndarray, shape (n,)
    lam : ndarray, shape (m,)
        Multipliers with ``M a = F + A^T lam`` (minimum norm when redundant).
    rank : int
        Numerical rank of the constraint rows.
    sigma : ndarray
        Singular values of ``sqrt(w) C`` (in ``[0, 1]``), descending.
    dropped : ndarray of int
        Indices of rows that vanished (singular position).
    consistency : float
        Relative size of the inconsistent part of ``b``.
    """

    a: np.ndarray
    lam: np.ndarray
    rank: int
    sigma: np.ndarray
    dropped: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    consistency: float = 0.0
    # internals reused by callers (objective mismatch check)
    L: Optional[np.ndarray] = None
    U: Optional[np.ndarray] = None


def mass_scale(M: np.ndarray) -> float:
    """``trace(M)/n``, the scale by which constraint rows are weighted; 1 if M = 0."""
    n = M.shape[0]
    w = float(np.trace(M)) / n
    return w if w > 0.0 else 1.0


def range_projector(M: np.ndarray, rtol: float = 1e-12) -> tuple[np.ndarray, int]:
    """Orthogonal projector ``M M^+`` onto the range of a PSD matrix and its rank."""
    w, V = np.linalg.eigh(M)
    keep = w > rtol * max(float(w[-1]) if w.size else 0.0, 1e-300)
    Vr = V[:, keep]
    return Vr @ Vr.T, int(keep.sum())


def _nonfinite(M, F, A, b) -> Optional[ModelError]:
    """A ModelError naming the non-finite model data, or None (called on failure paths only)."""
    bad = [name for name, x in (("mass M", M), ("force F", F), ("constraint rows A", A),
                                ("constraint right-hand side b", b)) if not np.all(np.isfinite(x))]
    if bad:
        return ModelError("the model returned non-finite values (NaN or inf) in "
                          + ", ".join(bad) + " at this state.")
    return None


def _indeterminate(M: np.ndarray, An: np.ndarray, w: float, coords=None) -> IndeterminateMotionError:
    Ma = M / w + An.T @ An
    vals, vecs = np.linalg.eigh(Ma)
    d = vecs[:, 0]
    d = d * np.sign(d[np.argmax(np.abs(d))])
    names = coords or [f"q{i}" for i in range(M.shape[0])]
    terms = " ".join(f"{c:+.3g}*{nm}" for c, nm in zip(d, names) if abs(c) > 1e-3)
    return IndeterminateMotionError(
        "The accelerations are not unique: rank([M; A]) < n. The direction "
        f"a -> a + s*d with d = ({terms}) changes neither the Gauss function nor the "
        f"constraints (smallest eigenvalue of M/w + A^T A is {vals[0]:.3g}). Add a constraint "
        "or mass in that direction.", direction=d)


def solve_gauss(M: np.ndarray, F: np.ndarray, A: np.ndarray, b: np.ndarray, *,
                rank_tol: float = DEFAULT_RANK_TOL, w: Optional[float] = None,
                row_ref: Optional[np.ndarray] = None, coords=None,
                want_multipliers: bool = True) -> GaussSolution:
    """Closed-form Gauss step (Udwadia--Kalaba / Udwadia--Phohomsiri).

    Parameters
    ----------
    M : ndarray, shape (n, n)
        Symmetric positive semi-definite mass matrix.
    F : ndarray, shape (n,)
    A : ndarray, shape (m, n)
    b : ndarray, shape (m,)
    rank_tol : float
        Relative tolerance of every rank decision (module docstring).
    w : float, optional
        Mass scale (default ``trace(M)/n``); pass it when M is constant.
    row_ref : ndarray, shape (m,), optional
        Reference scale of each row for the vanishing-row test; updated in
        place to the running maximum of the row norms.
    coords : sequence of str, optional
        Coordinate names, used in error messages.

    Returns
    -------
    GaussSolution

    Raises
    ------
    IndeterminateMotionError
        ``rank([M; A]) < n``.
    InconsistentConstraintsError
        ``A a = b`` has no solution.
    """
    n = M.shape[0]
    m = A.shape[0]
    if w is None:
        w = mass_scale(M)
    if m == 0:
        L, info = lapack.dpotrf(M / w, lower=1, clean=1)
        if info != 0 or np.min(np.abs(np.diag(L))) < rank_tol:
            raise _nonfinite(M, F, A, b) or _indeterminate(M, np.zeros((0, n)), w, coords)
        a, _ = lapack.dpotrs(L, F / w, lower=1)
        return GaussSolution(a=a, lam=np.zeros(0), rank=0, sigma=np.zeros(0))

    norms = np.sqrt(np.add.reduce(A * A, axis=1))
    if row_ref is None:
        ref = norms
    else:
        if row_ref.shape != norms.shape:
            raise ModelError(f"`row_scale` has shape {row_ref.shape}, but there are {m} rows.")
        np.maximum(row_ref, norms, out=row_ref)     # running reference scale, in place
        ref = row_ref
    small = norms <= rank_tol * ref                 # vanished rows (zero rows included)
    if small.any():
        dropped = np.flatnonzero(small)
        norms = norms.copy()
        norms[dropped] = np.inf                     # the row becomes zero after scaling
    else:
        dropped = _NO_ROWS
    inv = 1.0 / norms
    An = A * inv[:, None]
    bn = b * inv
    Ma = M + w * (An.T @ An)
    L, info = lapack.dpotrf(Ma, lower=1, clean=1)
    if info != 0 or not L.diagonal().min() ** 2 >= rank_tol * rank_tol * w:
        raise _nonfinite(M, F, A, b) or _indeterminate(M, An, w, coords)
    rhs = np.empty((n, m + 1), order="F")
    rhs[:, 0] = F
    rhs[:, 1:] = An.T
    if not want_multipliers and m <= n:
        # Fast path for the integrators: K = An Ma^-1 An^T (m x m) by Cholesky. Taken
        # only when K is far from singular (every pivot of w K above _FAST_PIVOT**2, i.e.
        # all singular values of sqrt(w) C above ~1e-4); otherwise the SVD path below
        # makes the rank decision with the full rank_tol.
        X, info = lapack.dpotrs(L, rhs, lower=1)
        au = X[:, 0]
        Y = X[:, 1:]
        K = An @ Y
        LK, info = lapack.dpotrf(K, lower=1, clean=1)
        if info == 0 and LK.diagonal().min() ** 2 * w > _FAST_PIVOT2:
            mu, _ = lapack.dpotrs(LK, bn - An @ au, lower=1)
            a = au + Y @ mu
            if not dropped.size:
                return GaussSolution(a=a, lam=_NO_LAM, rank=m, sigma=_NO_LAM, dropped=dropped)
    X, info = lapack.dtrtrs(L, rhs, lower=1)
    y = X[:, 0]
    C = X[:, 1:]
    U, s, Vt, info = lapack.dgesdd(C, full_matrices=0)
    if info != 0:
        raise _nonfinite(M, F, A, b) or SolverError(
            f"SVD of the constraint rows failed (LAPACK info={info}).")
    sqw = math.sqrt(w)
    thr = rank_tol / sqw
    # more rows than coordinates: only n singular values, so at most rank n
    r = m if (s.size == m and s[-1] > thr) else int(np.count_nonzero(s > thr))
    res = bn - C.T @ y
    Vr = Vt[:r]
    coef = (Vr @ res) / s[:r]
    consistency = 0.0
    if r < m:
        outside = res - Vr.T @ (Vr @ res)
        scale = float(np.abs(bn).sum() + np.abs(res).sum())
        consistency = float(np.sqrt(outside @ outside)) / scale if scale > 0 else 0.0
        if consistency > np.sqrt(rank_tol):
            raise InconsistentConstraintsError(
                "The constraint rows are inconsistent: A a = b has no solution (row-normalized "
                f"least-squares residual {inconsistency_residual(A, b):.3g}; relative size of "
                f"the contradictory part {consistency:.3g} > sqrt(rank_tol) = "
                f"{np.sqrt(rank_tol):.3g}; numerical rank {r} of {m} rows). Check redundant "
                "constraints for contradictory right-hand sides or the initial state.",
                residual=inconsistency_residual(A, b))
    z = y + U[:, :r] @ coef
    a, _ = lapack.dtrtrs(L, z, lower=1, trans=1)
    if dropped.size:
        # a vanished row is consistent only if its right-hand side vanishes too
        bd = b[dropped]
        resid = np.abs(A[dropped] @ a - bd)
        allowed = np.sqrt(rank_tol) * (ref[dropped] * float(np.sqrt(a @ a)) + np.abs(bd))
        if np.any(resid > allowed + 1e-300):
            raise InconsistentConstraintsError(
                f"Constraint rows {dropped.tolist()} vanished (singular position: zero "
                f"Jacobian row) but their right-hand side is {bd.tolist()}; no acceleration "
                "satisfies them.", residual=inconsistency_residual(A, b))
    lam = np.zeros(m)
    if want_multipliers:
        # Ma a = F + An^T mu with mu = lam_n + w bn; mu = V_r coef / s_r (minimum norm)
        mu = Vr.T @ (coef / s[:r])
        if r == m:
            lam_n = mu - w * bn
            lam = lam_n * inv
        else:
            Qc = M @ a - F
            lam = min_norm_multipliers(A, Qc, r)
    return GaussSolution(a=a, lam=lam, rank=r, sigma=s * sqw, dropped=dropped,
                         consistency=consistency, L=L, U=U[:, :r])


def inconsistency_residual(A: np.ndarray, b: np.ndarray) -> float:
    """``min_a ||An a - bn||`` with rows normalized: how contradictory ``A a = b`` is."""
    norms = np.sqrt((A * A).sum(axis=1))
    keep = norms > 0
    An = A[keep] / norms[keep, None]
    bn = b[keep] / norms[keep]
    x = np.linalg.lstsq(An, bn, rcond=None)[0]
    r = float(np.linalg.norm(An @ x - bn))
    return float(np.hypot(r, np.linalg.norm(b[~keep])))


def min_norm_multipliers(A: np.ndarray, Qc: np.ndarray, rank: int) -> np.ndarray:
    """Minimum-norm ``lam`` with ``A^T lam = Qc``, truncated to ``rank``
    singular directions (the redundant rows share the force)."""
    if A.shape[0] == 0:
        return np.zeros(0)
    U, s, Vt = np.linalg.svd(A.T, full_matrices=False)
    r = min(rank, int(np.count_nonzero(s > 0)))
    return Vt[:r].T @ ((U[:, :r].T @ Qc) / s[:r])


def null_space_split(A: np.ndarray, b: np.ndarray, rank_tol: float = DEFAULT_RANK_TOL
                     ) -> tuple[np.ndarray, np.ndarray, int]:
    """Minimum-norm particular solution and orthonormal null-space basis of ``A``.

    Rows are normalized first; directions with relative singular value below
    ``rank_tol`` are treated as redundant.

    Returns
    -------
    a_p : ndarray, shape (n,)
        Minimum-norm solution of ``A a = b``.
    N : ndarray, shape (n, n - r)
        Orthonormal basis of ``null(A)``.
    r : int
        Numerical rank.
    """
    m, n = A.shape
    if m == 0:
        return np.zeros(n), np.eye(n), 0
    norms = np.sqrt((A * A).sum(axis=1))
    inv = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    An = A * inv[:, None]
    bn = b * inv
    U, s, Vt = np.linalg.svd(An, full_matrices=True)
    smax = float(s[0]) if s.size else 0.0
    r = int(np.count_nonzero(s > rank_tol * max(smax, 1e-300)))
    a_p = Vt[:r].T @ ((U[:, :r].T @ bn) / s[:r])
    return a_p, Vt[r:].T.copy(), r
