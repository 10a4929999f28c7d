"""Compiled kernel of one Gauss step: the rank decision, the solves, the verification.

Every step solver of gaussopt goes through the functions of this module
(compiled with numba, ``cache=True``: compiled once per machine), so there is
one implementation of the step's mathematics:

1. **Rank decision** (:func:`reduce_rows`), made once per step and shared by
   every solver:

   * each row ``A_i`` has the norm ``nu_i`` (computed without underflow or
     overflow, so a row ``(1e-200, 1e-200)`` is a row like any other). A row
     has *vanished* (a singular position) when ``nu_i <= rank_tol * ref_i``,
     ``ref_i`` its reference scale: the largest norm it has shown at an
     *accepted* state of the run, or the user's ``row_scale``; a fresh step
     without a reference drops exactly-zero rows only;
   * the live rows are normalized, ``An = A / nu``, ``bn = b / nu``, and
     decomposed ``An = U S V^T`` (Householder QR, then one-sided Jacobi on
     the small triangular factor: accurate also for the small singular
     values). The normalized rows have ``s_1`` in ``[1, sqrt(m)]``; a
     direction with ``s_k <= rank_tol`` is redundant and dropped;
   * the step is then solved with the ``r`` kept, orthonormal rows
     ``V_r^T a = beta``, ``beta = S_r^-1 U_r^T bn`` (well conditioned
     whatever the conditioning of ``A``); the part of ``bn`` outside
     ``span(U_r)`` is the inconsistency of the constraints;
   * the motion is determinate when the reduced Hessian ``N^T M N / w``
     (``N`` an orthonormal basis of the null space of the kept rows, from the
     same decomposition; ``w = trace(M)/n``) is positive definite; the
     decision is a Cholesky pivot below ``rank_tol**2`` (the matrix has its
     eigenvalues in ``[0, n]``).

2. **Solves** on the reduced rows: the closed form (:func:`closed_form`, the
   Udwadia--Kalaba / Udwadia--Phohomsiri solution in null-space form
   ``a = V_r beta + N z``, which needs no inverse of ``M`` and satisfies the
   kept rows by construction) and the KKT system of Lagrange's equations of
   the first kind (:func:`kkt_lu`, LU with partial pivoting).

   For few rows (``3 m <= n``, :func:`range_space_pays`: a tree in joint coordinates,
   whose only rows are one normalization row per quaternion and its loop closures) the
   closed form is computed in **range-space form** instead (:func:`range_space`): the
   augmented mass matrix ``Mt = M / w + V_r V_r^T`` (positive definite exactly when the
   reduced Hessian is: the same determinacy, without a basis ``N``) by Cholesky, then
   the ``r x r`` Delassus matrix ``V_r^T Mt^-1 V_r`` (eigenvalues in ``[1/(n+1), 1]``) for
   the multipliers of the kept rows. Its cost is ``~n^3/6 + n^2 r`` against
   ``~n^2 d + n d^2 / 2 + d^3 / 6 + 4 r n d`` (``d = n - r``) for ``N``, ``N^T M N`` and
   its factor. The rank decision is the
   same (the SVD's ``V_r``; the null-space columns of ``V`` are then not even formed),
   and it answers only when it can decide as the null-space path would: every live row
   kept (``r = mL``: a redundant or folded direction goes to the null-space path, which
   also restrains folds) and ``Mt``'s smallest Cholesky pivot at least ``rank_tol``. A
   pivot is an upper bound of the smallest eigenvalue, and ``lambda_min(N^T M N / w) >=
   lambda_min(Mt)``; the null-space test asks ``rank_tol**2`` of the reduced Hessian's
   pivots, so the margin ``1 / rank_tol`` (``1e8``) between the two thresholds covers
   the factor by which a pivot of ``Mt`` can exceed its smallest eigenvalue (the squared
   condition number of the unit triangular factor; a mass matrix is far from that).
   Anything else falls back to the null-space path, which decides as before (an
   indeterminate motion, a vanished row kept, a rank drop of loop closures).

3. **Verification** (:func:`verify`, :func:`check`): the result must satisfy
   the optimality conditions of the Gauss problem to the accuracy of its
   data. The backward errors of feasibility,
   ``|U_r^T (An a - bn)| / (s_1 |a| + |bn|)``, and of stationarity,
   ``|(I - V_r V_r^T)(M a - F)| / (|M|_F |a| + |F|)`` (``M a - F`` in the
   span of the kept rows, i.e. ``N^T (M a - F) = 0`` for a basis ``N`` of
   the null space of the live rows), must not exceed ``c eps`` with
   ``c = 16 (n + m + 1)`` for the direct solves (:func:`direct_tolerance`), whichever
   path solved (the projector ``I - V_r V_r^T`` needs only the kept directions ``V_r``,
   which both paths have: it is the KKT condition ``M a - F = A^T lam`` for some
   ``lam``, with the multipliers eliminated, ``min_lam |M a - F - A_r^T lam| =
   |(I - V_r V_r^T)(M a - F)|``; the range-space path's own residual
   ``|M a - F - w V_r mu|`` with its multipliers ``mu`` is at least as large, and would
   test ``mu`` as well as ``a``: the projected form tests ``a`` alone, as for every
   solver, and the multipliers are computed afterwards from ``a``, :func:`multipliers`).
   The bounds:
   evaluating the residuals themselves errs by at most ``(n + 1) eps`` times
   the same sums, and a backward-stable solve adds a modest multiple of it.
   A result that passes is the exact solution of data perturbed at the level
   of a few ulps, so its forward error is at most the condition number times
   ``c eps``. An iterative solver (the QP) is held to its own tolerance.

The functions work in a preallocated workspace (:func:`make_work`, one per
problem size and thread; its layout is :mod:`gaussopt.gauss.workspace`): nothing is
allocated on the hot path, and the results are views into the workspace, valid until
its next use. The small dense algebra they share with the rest of the compiled code
(norms, Cholesky, the SVD) is :mod:`gaussopt.gauss.dense_algebra`.
:func:`gauss_step` chains them (with the fallback of the KKT solve onto the
closed form and the vanished-row retry) and returns a status code instead of
raising, so that the integrator can call it from compiled code.
"""

from __future__ import annotations

import math

import numpy as np

from gaussopt.core.compiled import ensure, jit, unit
from gaussopt.core.settings import FOLD_TOL, SYMMETRY_RTOL
from gaussopt.core.status import (CLOSED_FORM, INCONSISTENT, INCONSISTENT_VANISHED,  # noqa: F401
                                  INDETERMINATE, LAGRANGE, NONFINITE, NONSYMMETRIC, OK,
                                  UNVERIFIED)

from gaussopt.core.views import wfull, wivec, wmat, wvec
from gaussopt.gauss.dense_algebra import (LAPACK_MIN, _svd_lapack, all_finite1, all_finite2,
                                          backward_solve_t, cholesky, forward_solve1, frobenius,
                                          norm2, row_norms, svd_complete, svd_into, tree_ltl,
                                          tree_solve_l, tree_solve_lt)
from gaussopt.gauss.workspace import *  # noqa: F401,F403 - the fields F_*, I_* and Work
from gaussopt.gauss.workspace import Work, make_work_compiled, set_mass_tree, svd_views

__all__ = ["make_work", "reduce_rows", "decide", "determinacy", "closed_form", "range_space",
           "range_space_pays", "RANGE_FLAG", "kkt_lu", "verify", "check",
           "multipliers", "gauss_step", "direct_tolerance", "inconsistency_allowance", "asymmetric",
           "smallest_live_sigma", "FOLD_TOL", "SYMMETRY_RTOL"]

_EPS = float(np.finfo(float).eps)
_TINY = float(np.finfo(float).tiny)


# (the solve methods of :func:`gauss_step`, CLOSED_FORM and LAGRANGE, and its status codes
# are in the one table of codes, :mod:`gaussopt.core.status`)

# (FOLD_TOL and SYMMETRY_RTOL: the one table of solver settings, gaussopt.core.settings)

#: bit of :func:`gauss_step`'s ``flags``: the step was solved on the range-space path
#: (:func:`range_space`; the bits 1 and 2 are :func:`gauss_step`'s, 4 the O(n) path's,
#: :data:`gaussopt.gauss.band_step.SPARSE_FLAG`)
RANGE_FLAG = 8


#: The kernel's functions compile without numba's reference counting (``_nrt=False``):
#: they take arrays, allocate none (numba refuses to compile an allocation without it)
#: and return scalars or nothing (results go into the workspace; callers take views).
#: With reference counting, every view of the workspace costs an atomic increment
#: and decrement: about a fifth of a run's time went there. numba refuses to compile
#: a leaf that returns an array it made; ``tests/test_refcounts.py`` checks that no
#: leaf returns an argument either, and that runs free every block they allocate.
#: (The engine's functions read numba structures, which need reference counting.)
#:
#: How they are compiled (:mod:`gaussopt.core.compiled`): the large functions that several
#: others call (:func:`svd_into`, the parts of the step, :func:`gauss_step`; the QP's
#: compiled step calls the same parts) are *units*, compiled once and called through a
#: pointer; the small ones are ordinary compiled functions, linked into their callers.
def _unit(signature: str, lazy: bool = False, python: bool = False):
    return unit(signature, lazy=lazy, python=python, nogil=True, _nrt=False)


_leaf = jit(cache=True, nogil=True, _nrt=False)


#: helpers that return views of the workspace are inlined (a function without reference
#: counting may not return an array to its caller)
_inline = jit(cache=True, nogil=True, _nrt=False, inline="always")


#: (``_nrt=True`` explicitly where a function allocates or returns arrays: a function
#: without the option inherits its caller's)
_jit = jit(cache=True, nogil=True, _nrt=True)


def make_work(n: int, m: int, mass_tree=None) -> Work:
    """A workspace for ``n`` coordinates and ``m`` rows (see :data:`Work`); loads the
    LAPACK path of :func:`svd_into` (compiled only for models that reach
    :data:`LAPACK_MIN`) when the sizes call for it. ``mass_tree``: the parents of the
    coordinates when ``M`` has the sparsity of a tree (``System.mass_tree``; the
    range-space step then works on the tree, :func:`range_space`), else None."""
    if min(n, m) >= LAPACK_MIN:
        ensure(_svd_lapack)
    w = make_work_compiled(n, m)
    if mass_tree is not None:
        set_mass_tree(w, mass_tree)
    return w


# --------------------------------------------------------------------------- the rank decision
@_unit("Tuple((i8, i8, i8, f8))(f8m, f8v, f8v, f8, f8, b1, w)", python=True)
def reduce_rows(A, b, ref, sig_ref, rank_tol, keep_vanished, w):
    """The shared rank decision of one step (module docstring, item 1).

    Parameters
    ----------
    A : ndarray, shape (m, n)
    b : ndarray, shape (m,)
    ref : ndarray, shape (m,)
        Reference scale of every row (``<= 0`` entries: the row's own norm).
    sig_ref : float
        Reference size of the smallest singular value of the normalized rows
        (the largest it has been at accepted states of the run; ``<= 0``: none).
        A direction whose singular value falls below ``FOLD_TOL * sig_ref``
        has vanished (a singular configuration) and is dropped like a
        redundant one.
    rank_tol : float
    keep_vanished : bool
        Keep rows that vanished relative to ``ref`` (drop exactly zero rows only).
    w : Work

    Returns
    -------
    mL, r, k, c_norm : the number of live rows, the rank, ``min(mL, n)``, and the
    norm of the part of ``bn`` outside ``span(U_r)`` (the inconsistency). In ``w``:
    ``nu`` (m,) row norms, ``live`` (m,), ``An`` (mL, n), ``bn`` (mL,), ``s`` (k,),
    ``U`` (mL, k), ``V`` (n, n) (``V_r = V[:, :r]``, ``N = V[:, r:]``; the columns from ``k``
    on only after :func:`gaussopt.gauss.dense_algebra.svd_complete`, which the null-space
    path calls: the range-space path needs none of them), ``beta`` (r,).
    """
    m, n = A.shape
    nu = wvec(w, F_nu, m)
    row_norms(A, nu)
    live = wivec(w, I_live, m)
    mL = 0
    for i in range(m):
        rf = ref[i] if ref[i] > 0.0 else nu[i]
        live[i] = nu[i] > 0.0 and (keep_vanished or nu[i] > rank_tol * rf)
        if live[i]:
            mL += 1
    An = wmat(w, F_An, mL, n)
    bn = wvec(w, F_bn, mL)
    j = 0
    for i in range(m):
        if live[i]:
            inv = 1.0 / nu[i]
            for c in range(n):
                An[j, c] = A[i, c] * inv
            bn[j] = b[i] * inv
            j += 1
    svd_into(An, w, F_U, F_s, F_V)
    U, s, _ = svd_views(w, F_U, F_s, F_V, mL, n)
    k = s.shape[0]
    thr = max(rank_tol, FOLD_TOL * sig_ref)
    r = 0
    for kk in range(k):
        if s[kk] > thr:
            r += 1
    beta = wvec(w, F_beta, r)
    proj = wvec(w, F_proj, mL)
    for i in range(mL):
        proj[i] = 0.0
    for kk in range(r):
        acc = 0.0
        for i in range(mL):
            acc += U[i, kk] * bn[i]
        beta[kk] = acc / s[kk]
        for i in range(mL):
            proj[i] += U[i, kk] * acc
    for i in range(mL):
        proj[i] = bn[i] - proj[i]
    return mL, r, k, norm2(proj)


# --------------------------------------------------------------------------- solves
@_unit("none(f8m, f8v, f8, i8, i8, w)", python=True)
def closed_form(M, F, wgt, mL, r, w):
    """The closed-form solution in null-space form, on the reduced rows, into ``w``'s ``a``
    (``view(w, "a", n)``).

    ``a = a_p + N z`` with ``a_p = V_r beta`` (the minimum-norm solution of the
    kept rows) and ``(N^T M N) z = N^T (F - M a_p)``, with the Cholesky factor of
    ``N^T M N / wgt`` in ``w``'s ``LH`` (from :func:`decide`). This is the
    Udwadia--Kalaba / Udwadia--Phohomsiri solution (``M`` only needs to be
    positive definite on ``null(A)``, no inverse of ``M``): the same ``a``
    as ``a_u + M^{-1/2} (A M^{-1/2})^+ (b - A a_u)``, computed so that the
    constraints hold exactly by construction and ``F`` enters only in the
    free directions, whatever the sizes of ``F`` and ``a``.
    """
    n = M.shape[0]
    d = n - r
    V = wmat(w, F_V, n, n)
    beta = wfull(w, F_beta)
    a = wfull(w, F_a)
    for i in range(n):
        acc = 0.0
        for kk in range(r):
            acc += V[i, kk] * beta[kk]
        a[i] = acc
    if d == 0:
        return
    g = wfull(w, F_g)
    for i in range(n):                              # (F - M a_p) / w
        acc = F[i]
        for j in range(n):
            acc -= M[i, j] * a[j]
        g[i] = acc / wgt
    z = wvec(w, F_z, d)
    for kk in range(d):
        acc = 0.0
        for i in range(n):
            acc += V[i, r + kk] * g[i]
        z[kk] = acc
    LH = wmat(w, F_LH, d, d)
    forward_solve1(LH, z)
    backward_solve_t(LH, z)
    for i in range(n):
        acc = a[i]
        for kk in range(d):
            acc += V[i, r + kk] * z[kk]
        a[i] = acc


@_leaf
def range_space_pays(n, m):
    """Whether :func:`gauss_step` tries the range-space path (:func:`range_space`) first for
    ``n`` coordinates and ``m`` rows: ``3 m <= n`` (a rule of the problem's size, the same
    at every step).

    The null-space path costs ``~n^2 d + n d^2 / 2 + d^3 / 6`` for ``N^T M N`` and its
    factor (``d = n - r``), plus ``~4 r n d`` for the basis ``N`` itself; the range-space
    path ``~n^3 / 6 + n^2 r`` (the factor of ``M / w + V_r V_r^T``, its solves with the
    ``r`` kept rows), whatever ``r``. Measured (compiled loops, the solves alone, random
    dense problems): the range space is ahead up to ``r ~ n / 3`` (``n`` 8 to 48; at
    ``n = 4``, ``r = 1`` they cost the same), 4x ahead for the humanoid-like tree
    (``n`` 34, ``r`` 5) and the ant-like tree (``n`` 15, ``r`` 1), and behind from
    ``r ~ n / 2`` on (2-30x at ``r >= 3 n / 4``, the maximal coordinates of linkages)."""
    return 3 * m <= n


@_unit("f8(f8m, f8v, f8, i8, f8, w)", lazy=True)
def range_space(M, F, wgt, r, thr, w):
    """The Gauss step in range-space form on the ``r`` kept rows, into ``w``'s ``a``: the
    augmented mass matrix ``Mt = M / wgt + V_r V_r^T`` by Cholesky, then the Delassus
    matrix of the kept rows (module docstring, item 2).

    Each kept direction ``v_k`` is added with its own mass scale, ``Mt = M / wgt + V_r
    diag(d) V_r^T`` with ``d_k = sum_i v_ik^2 M_ii / wgt`` (1 where that is zero: a direction
    of massless coordinates), and the right-hand side with ``V_r diag(d) beta``: the
    argument below holds for any ``d > 0``. Adding the directions with weight 1 instead
    mixes a scale of ``wgt`` (the mean of ``M``'s diagonal) into the block of a light body:
    a 0.2 g body's normalization row beside 10 kg links made its block's Cholesky err
    by ``eps`` of 1 against entries of 1e-8, its angular accelerations by 2.6e-7 relative
    (tests/test_tree.py); with its own scale the block keeps its relative accuracy.

    On the feasible set ``V_r^T a = beta`` the added term ``1/2 |V_r^T a - beta|^2``
    is zero, so the Gauss function ``1/2 a^T M a - a^T F`` and
    ``1/2 a^T (M + wgt V_r V_r^T) a - a^T (F + wgt V_r beta)`` differ by a constant there
    and have the same minimizer (the augmented-Lagrangian / Udwadia--Phohomsiri
    treatment of a singular ``M``). ``Mt`` is positive definite exactly when ``M`` is on
    ``null(V_r^T)`` (for ``x = N y + V_r c``: ``x^T Mt x = y^T N^T M N y / wgt + |c|^2``
    when ``M`` is positive semidefinite), so it needs no basis ``N``: ``Mt = L L^T``
    (``n^3 / 6``), ``X = L^-1 V_r``, the Delassus matrix ``D = X^T X = V_r^T Mt^-1 V_r``
    (``r x r``; for ``d = 1`` its eigenvalues lie in ``[1 / (1 + |M / wgt|), 1]``: ``D = G (I + G)^-1``
    with ``G = V_r^T (M / wgt)^-1 V_r`` for a regular ``M``, well conditioned whatever
    ``M``), then ``z = L^-1 (F / wgt + V_r beta)``, ``D mu = beta - X^T z`` and
    ``a = L^-T (z + X mu)``: ``V_r^T a = X^T z + D mu = beta`` and
    ``M a - F = wgt V_r mu`` (``wgt mu`` the multipliers of the kept rows, in ``w``'s
    ``mu``).

    Returns the smallest Cholesky pivot of ``Mt`` (``-1`` when one is not positive); the
    solve is done only when it is at least ``thr``. ``Mt`` has its eigenvalues in
    ``[0, n + 1]``; its factor is in ``w``'s ``LH`` (``Mt`` itself in ``H``, ``X^T`` in
    ``MN``, ``D`` and its factor in ``D`` and ``LD``).
    """
    n = M.shape[0]
    if wivec(w, I_tree, 1)[0] != 0:
        dmin = _range_space_tree(M, F, wgt, r, thr, w)
        if dmin >= thr:
            return dmin
    V = wmat(w, F_V, n, n)
    Mt = wmat(w, F_H, n, n)
    L = wmat(w, F_LH, n, n)
    dk = wvec(w, F_lam, r)                           # the kept directions' own mass scales
    for kk in range(r):
        acc = 0.0
        for i in range(n):
            acc += V[i, kk] * V[i, kk] * M[i, i]
        acc /= wgt
        dk[kk] = acc if acc > 0.0 and acc < 1.0e300 else 1.0
    for i in range(n):                               # (the lower triangle: all cholesky reads)
        for j in range(i + 1):
            acc = M[i, j] / wgt
            for kk in range(r):
                acc += V[i, kk] * dk[kk] * V[j, kk]
            Mt[i, j] = acc
    dmin = cholesky(Mt, L)
    if not dmin >= thr:
        return dmin
    X = wmat(w, F_MN, r, n)                          # row kk: L^-1 V[:, kk]
    for kk in range(r):
        for i in range(n):
            acc = V[i, kk]
            for j in range(i):
                acc -= L[i, j] * X[kk, j]
            X[kk, i] = acc / L[i, i]
    beta = wfull(w, F_beta)
    z = wfull(w, F_g)
    for i in range(n):
        acc = F[i] / wgt
        for kk in range(r):
            acc += V[i, kk] * dk[kk] * beta[kk]
        z[i] = acc
    forward_solve1(L, z)
    if not _kept_rows(X, z, r, w):
        return -1.0                                  # (D >= 1 / (n + 1) whenever Mt is definite)
    a = wfull(w, F_a)
    backward_solve_t(L, a)
    return dmin


@_leaf
def _kept_rows(X, z, r, w):
    """The kept rows' part of a range-space solve (:func:`range_space`), shared by its two
    factorizations: with ``X`` (r, n) the kept directions and ``z`` the right-hand side,
    each after the first triangular solve with the factor of ``Mt``, the Delassus matrix
    ``D = X X^T`` (``r x r``, into ``w``'s ``D``, its factor into ``LD``), the multipliers
    ``mu = D^-1 (beta - X z)`` (``mu``) and ``z + X^T mu`` into ``w``'s ``a`` (the caller
    applies the second triangular solve). False when ``D`` is not positive definite."""
    n = z.shape[0]
    D = wmat(w, F_D, r, r)
    for p in range(r):
        for q in range(p + 1):
            acc = 0.0
            for i in range(n):
                acc += X[p, i] * X[q, i]
            D[p, q] = acc
            D[q, p] = acc
    LD = wmat(w, F_LD, r, r)
    if r > 0 and not cholesky(D, LD) > 0.0:
        return False
    beta = wfull(w, F_beta)
    mu = wvec(w, F_mu, r)
    for kk in range(r):
        acc = beta[kk]
        for i in range(n):
            acc -= X[kk, i] * z[i]
        mu[kk] = acc
    forward_solve1(LD, mu)
    backward_solve_t(LD, mu)
    a = wfull(w, F_a)
    for i in range(n):
        acc = z[i]
        for kk in range(r):
            acc += X[kk, i] * mu[kk]
        a[i] = acc
    return True


@_leaf
def _chain_row(a, par):
    """Whether the nonzero entries of the row ``a`` lie on one path of the tree ``par``
    towards a root (each nonzero column an ancestor of the next): then ``a a^T`` has the
    sparsity of a mass matrix of that tree."""
    prev = -1
    for c in range(a.shape[0]):
        if a[c] != 0.0:
            if prev >= 0:
                j = par[c]
                while j > prev:
                    j = par[j]
                if j != prev:
                    return False
            prev = c
    return True


@_leaf
def _range_space_tree(M, F, wgt, r, thr, w):
    """:func:`range_space` for a mass matrix with the sparsity of a tree (the workspace's
    :data:`I_tree`: a tree in joint coordinates), at the cost of the tree rather than of
    ``n^3``.

    The same derivation with another augmentation: ``Mt = M / wgt + sum_i d_i an_i an_i^T``
    over the live normalized rows ``an_i`` whose nonzeros lie on one path of the tree
    (:func:`_chain_row`: a ball joint's normalization row, a coupling of a joint with its
    ancestor), ``d_i`` the row's own mass scale; the right-hand side gains ``sum d_i an_i
    bn_i``. On the feasible set every row is constant (``An a = U_r S_r beta`` there), so
    the added terms change the Gauss function by a constant, and ``Mt`` keeps the tree's
    sparsity: Featherstone's ``Mt = L^T L`` (:func:`gaussopt.gauss.dense_algebra.tree_ltl`,
    no fill-in), then the Delassus matrix of the kept directions ``D = X^T X`` with ``X =
    L^-T V_r``, ``z = L^-T rhs``, ``D mu = beta - X^T z``, ``a = L^-1 (z + X mu)``. Rows
    off a path (a loop closure between branches) enter through ``D`` only; if ``Mt`` is
    then not safely definite (``M`` singular in a direction only such a row restrains),
    the dense form decides. Returns the smallest pivot of ``Mt`` (-1 when one is not
    positive); the solve is done only when it is at least ``thr``."""
    n = M.shape[0]
    par = wivec(w, I_tree, 2 * n + 1)[1:n + 1]
    run = wivec(w, I_tree, 2 * n + 1)[n + 1:]
    An = wmat(w, F_An, r, n)                         # (every live row is kept: mL = r)
    bn = wvec(w, F_bn, r)
    L = wmat(w, F_LH, n, n)
    inv = 1.0 / wgt
    for i in range(n):                               # M / wgt on the tree's pattern
        Li = L[i]
        Mi = M[i]
        j = i
        while j >= 0:
            s = run[j]
            for c in range(j + 1 - s):
                Li[np.uint64(s + c)] = Mi[np.uint64(s + c)] * inv
            j = par[s]
    z = wfull(w, F_g)
    for i in range(n):
        z[i] = F[i] / wgt
    for kk in range(r):                              # the rows on a path, own mass scales
        row = An[kk]
        if not _chain_row(row, par):
            continue
        d = 0.0
        for i in range(n):
            d += row[i] * row[i] * M[i, i]
        d /= wgt
        if not (d > 0.0 and d < 1.0e300):
            d = 1.0
        for i in range(n):
            if row[i] != 0.0:
                z[i] += d * row[i] * bn[kk]
                di = d * row[i]
                j = i
                while j != -1:
                    if row[j] != 0.0:
                        L[i, j] += di * row[j]
                    j = par[j]
    dmin = tree_ltl(L, par, run)
    if not dmin >= thr:
        return dmin
    V = wmat(w, F_V, n, n)
    X = wmat(w, F_MN, r, n)                          # row kk: L^-T V[:, kk]
    for kk in range(r):
        x = X[kk]
        for i in range(n):
            x[i] = V[i, kk]
        tree_solve_lt(L, par, run, x)
    tree_solve_lt(L, par, run, z)
    if not _kept_rows(X, z, r, w):
        return -1.0
    a = wfull(w, F_a)
    tree_solve_l(L, par, run, a)
    return dmin


@unit("b1(f8m, f8v, f8, i8, w)", lazy=True, nogil=True, _nrt=False)
def kkt_lu(M, F, wgt, r, w):
    """Lagrange's equations of the first kind on the reduced rows: the KKT system
    ``[[M/w, V_r], [V_r^T, 0]] [a; mu] = [F/w; beta]`` by LU with partial
    pivoting. Writes ``a`` into ``w``'s ``a2``; returns False on a zero pivot."""
    n = M.shape[0]
    N = n + r
    K = wmat(w, F_Kk, N, N)
    x = wvec(w, F_xk, N)
    V = wmat(w, F_V, n, n)
    for i in range(N):
        for j in range(N):
            K[i, j] = 0.0
    for i in range(n):
        for j in range(n):
            K[i, j] = M[i, j] / wgt
        for kk in range(r):
            K[i, n + kk] = V[i, kk]
            K[n + kk, i] = V[i, kk]
        x[i] = F[i] / wgt
    for kk in range(r):
        x[n + kk] = wfull(w, F_beta)[kk]
    for j in range(N):
        p = j
        big = abs(K[j, j])
        for i in range(j + 1, N):
            if abs(K[i, j]) > big:
                big = abs(K[i, j])
                p = i
        if big == 0.0:
            return False
        if p != j:
            for c in range(N):
                tmp = K[j, c]
                K[j, c] = K[p, c]
                K[p, c] = tmp
            tmp = x[j]
            x[j] = x[p]
            x[p] = tmp
        piv = K[j, j]
        for i in range(j + 1, N):
            f = K[i, j] / piv
            if f != 0.0:
                for c in range(j + 1, N):
                    K[i, c] -= f * K[j, c]
                x[i] -= f * x[j]
    for i in range(N - 1, -1, -1):
        s = x[i]
        for c in range(i + 1, N):
            s -= K[i, c] * x[c]
        x[i] = s / K[i, i]
    for i in range(n):
        wfull(w, F_a2)[i] = x[i]
    return True


# --------------------------------------------------------------------------- verification
@_unit("UniTuple(f8, 2)(f8m, f8v, f8v, i8, i8, i8, w)", python=True)
def verify(M, F, a, mL, r, k, w):
    """Backward errors of ``a`` in the optimality conditions (module docstring, item 3).

    Returns ``(be_f, be_s)``: ``|U_r^T (An a - bn)| / (s_1 |a| + |bn|)``
    (feasibility of the kept directions: the relative perturbation of the
    normalized rows and right-hand side that ``a`` satisfies exactly) and
    ``|(I - V_r V_r^T)(M a - F)| / (|M|_F |a| + |F|)`` (stationarity: ``M a - F``
    in the span of the kept rows).
    """
    n = M.shape[0]
    V = wmat(w, F_V, n, n)
    U = wmat(w, F_U, mL, k)
    An = wmat(w, F_An, mL, n)
    bn = wvec(w, F_bn, mL)
    na = norm2(a)
    g = wfull(w, F_g)
    for i in range(n):
        acc = -F[i]
        for j in range(n):
            acc += M[i, j] * a[j]
        g[i] = acc
    p = wfull(w, F_pp)
    for i in range(n):
        p[i] = g[i]
    for kk in range(r):
        d = 0.0
        for i in range(n):
            d += V[i, kk] * g[i]
        for i in range(n):
            p[i] -= d * V[i, kk]
    den = frobenius(M) * na + norm2(F)
    ps = norm2(p)
    be_s = ps / den if den > 0.0 else (0.0 if ps == 0.0 else np.inf)
    e = wvec(w, F_e, mL)
    for i in range(mL):
        acc = -bn[i]
        for j in range(n):
            acc += An[i, j] * a[j]
        e[i] = acc
    f = wvec(w, F_fk, r)
    for kk in range(r):
        acc = 0.0
        for i in range(mL):
            acc += U[i, kk] * e[i]
        f[kk] = acc
    s1 = wfull(w, F_s)[0] if k > 0 else 1.0
    den = s1 * na + norm2(bn)
    pf = norm2(f)
    be_f = pf / den if den > 0.0 else (0.0 if pf == 0.0 else np.inf)
    return be_f, be_s


@_unit("none(f8m, f8v, f8v, f8m, i8, i8, i8, w)", python=True)
def multipliers(M, F, a, A, mL, r, k, w):
    """Minimum-norm multipliers ``lam`` with ``A^T lam = M a - F`` (0 on vanished rows),
    into ``w``'s ``lam``.

    Independent live rows (``r`` equal to their number): the unique
    ``lam_n = U_r S_r^-1 V_r^T (M a - F)``, ``lam_i = lam_n,i / nu_i``. Redundant
    rows: ``min |lam|`` over the live rows of ``A`` itself (not the normalized
    ones), ``lam = (A_live^T)^+ (M a - F)`` truncated to the rank ``r`` of the
    shared decision: the redundant rows share the force.
    """
    n = M.shape[0]
    m = A.shape[0]
    g = wfull(w, F_g)
    for i in range(n):
        acc = -F[i]
        for j in range(n):
            acc += M[i, j] * a[j]
        g[i] = acc
    lam = wvec(w, F_lam, m)
    for i in range(m):
        lam[i] = 0.0
    live = wivec(w, I_live, m)
    nu = wfull(w, F_nu)
    coef = wfull(w, F_coef)
    if r == mL:
        V = wmat(w, F_V, n, n)
        U = wmat(w, F_U, mL, k)
        for kk in range(r):
            acc = 0.0
            for i in range(n):
                acc += V[i, kk] * g[i]
            coef[kk] = acc / wfull(w, F_s)[kk]
        j = 0
        for i in range(m):
            if live[i]:
                acc = 0.0
                for kk in range(r):
                    acc += U[j, kk] * coef[kk]
                lam[i] = acc / nu[i]
                j += 1
        return
    # redundant live rows: an SVD of A_live itself, into other fields of the workspace
    Al = wmat(w, F_Al, mL, n)
    j = 0
    for i in range(m):
        if live[i]:
            for c in range(n):
                Al[j, c] = A[i, c]
            j += 1
    svd_into(Al, w, F_U2, F_s2, F_V2)               # (V2's first rr columns only)
    U2, s2, V2 = svd_views(w, F_U2, F_s2, F_V2, mL, n)
    rr = min(r, s2.shape[0])
    for kk in range(rr):
        acc = 0.0
        for i in range(n):
            acc += V2[i, kk] * g[i]
        coef[kk] = acc / s2[kk] if s2[kk] > 0.0 else 0.0
    j = 0
    for i in range(m):
        if live[i]:
            acc = 0.0
            for kk in range(rr):
                acc += U2[j, kk] * coef[kk]
            lam[i] = acc
            j += 1


@_unit("f8(f8m, f8, w)", python=True)
def smallest_live_sigma(A, rank_tol, w):
    """The smallest singular value above ``rank_tol`` of the normalized nonzero rows
    of ``A`` (``inf`` without any): what :func:`reduce_rows`'s ``sig_ref`` follows."""
    m = A.shape[0]
    z = wvec(w, F_e, m)             # a zero right-hand side and references
    for i in range(m):
        z[i] = 0.0
    mL, r, k, c_norm = reduce_rows(A, z, z, 0.0, rank_tol, True, w)
    return wfull(w, F_s)[r - 1] if r > 0 else np.inf


@_leaf
def asymmetric(M):
    """``max |M - M^T| > SYMMETRY_RTOL * max |M|`` (each solver would read another triangle)."""
    n = M.shape[0]
    big = 0.0
    asym = 0.0
    for i in range(n):
        for j in range(n):
            x = abs(M[i, j])
            if x > big:
                big = x
            if j > i:
                d = abs(M[i, j] - M[j, i])
                if d > asym:
                    asym = d
    return asym > SYMMETRY_RTOL * big


@_leaf
def inconsistency_allowance(s, rank_tol, n, m):
    """Largest relative inconsistency of ``A a = b`` that rounding explains.

    At a regular configuration ``sqrt(rank_tol)``. Near a singular one, where a
    singular value ``s`` of the normalized rows approaches zero (above the
    rounding floor), a state perturbed by rounding (``~eps`` relative) moves the
    consistency defect of ``bn`` by ``~eps / s**2`` (the rows' directions turn
    at the rate ``1/s``, and so does the defect's direction); the allowance is
    ``1e3 (n + m) eps / s_min**2`` with ``s_min`` the smallest singular value
    above the floor ``64 (n + m) eps s_1``: a margin of ``1e3`` over that
    estimate. Exactly redundant directions (below the floor) do not raise it.
    """
    base = math.sqrt(rank_tol)
    if s.shape[0] == 0:
        return base
    floor = 64.0 * (n + m) * _EPS * s[0]
    smin = np.inf
    for k in range(s.shape[0]):
        if s[k] > floor and s[k] < smin:
            smin = s[k]
    if not np.isfinite(smin):
        return base
    return max(base, 1e3 * (n + m) * _EPS / (smin * smin))


@_leaf
def mass_weight(M):
    """``trace(M) / n`` (1 for a zero trace): the scale of the reduced Hessian and of the
    range-space path's augmented mass matrix."""
    n = M.shape[0]
    tr = 0.0
    for i in range(n):
        tr += M[i, i]
    return tr / n if tr > 0.0 else 1.0


@_unit("Tuple((i8, f8, i8, i8, i8, f8, f8, i8))(f8m, f8m, f8v, f8v, f8, f8, w)", python=True)
def decide(M, A, b, ref, sig_ref, rank_tol, w):
    """The rank decision of one step, shared by every solver (module docstring, item 1).

    Returns ``(status, wgt, mL, r, k, c_norm, dmin, flags)``: status :data:`OK` or
    :data:`INDETERMINATE`; ``wgt = trace(M)/n``; the outputs of
    :func:`reduce_rows`; ``dmin`` the smallest Cholesky pivot of the reduced Hessian
    ``N^T M N / wgt`` (the motion is determinate iff ``dmin >= rank_tol**2``;
    ``N^T M N / wgt`` has its eigenvalues in ``[0, n]``), its factor in ``w``'s ``LH``;
    ``flags`` bit 2: rows that vanished relative to their reference were kept
    because without them the motion was indeterminate (a fresh solve keeps them).
    """
    wgt = mass_weight(M)
    mL, r, k, c_norm = reduce_rows(A, b, ref, sig_ref, rank_tol, False, w)
    status, mL, r, k, c_norm, dmin, flags = determinacy(M, A, b, ref, sig_ref, rank_tol, wgt,
                                                        mL, r, k, c_norm, w)
    return status, wgt, mL, r, k, c_norm, dmin, flags


@_unit("Tuple((i8, i8, i8, i8, f8, f8, i8))(f8m, f8m, f8v, f8v, f8, f8, f8, i8, i8, i8, f8, w)")
def determinacy(M, A, b, ref, sig_ref, rank_tol, wgt, mL, r, k, c_norm, w):
    """:func:`decide` after its first :func:`reduce_rows` (whose outputs ``mL, r, k,
    c_norm`` it takes): the null-space basis (:func:`gaussopt.gauss.dense_algebra.svd_complete`),
    the reduced Hessian and its Cholesky test, and the retry with the vanished rows kept.
    Returns ``(status, mL, r, k, c_norm, dmin, flags)`` (:func:`decide`'s, without
    ``wgt``). :func:`gauss_step` calls it when the range-space path does not answer."""
    n = M.shape[0]
    m = A.shape[0]
    flags = 0
    keep = False
    while True:
        svd_complete(w, F_V, mL, n)
        d = n - r
        V = wmat(w, F_V, n, n)
        MN = wmat(w, F_MN, n, d)
        for i in range(n):
            for kk in range(d):
                acc = 0.0
                for j in range(n):
                    acc += M[i, j] * V[j, r + kk]
                MN[i, kk] = acc / wgt
        H = wmat(w, F_H, d, d)
        for p in range(d):
            for q in range(p, d):
                acc = 0.0
                for i in range(n):
                    acc += V[i, r + p] * MN[i, q]
                H[p, q] = acc
                H[q, p] = acc
        LH = wmat(w, F_LH, d, d)
        dmin = cholesky(H, LH) if d > 0 else np.inf
        if dmin >= rank_tol * rank_tol:
            return OK, mL, r, k, c_norm, dmin, flags
        vanished_nonzero = False
        for i in range(m):
            if not wivec(w, I_live, m)[i] and wfull(w, F_nu)[i] > 0.0:
                vanished_nonzero = True
        if keep or not vanished_nonzero:
            return INDETERMINATE, mL, r, k, c_norm, dmin, flags
        keep = True
        flags |= 2
        mL, r, k, c_norm = reduce_rows(A, b, ref, sig_ref, rank_tol, keep, w)


@_unit("Tuple((i8, f8, f8, f8))(f8m, f8v, f8m, f8v, f8v, f8, i8, i8, i8, f8, f8v, w)", python=True)
def check(M, F, A, b, ref, rank_tol, mL, r, k, c_norm, a, w):
    """Everything a result ``a`` must satisfy, after any solver.

    Returns ``(status, rho, allow, be)``: :data:`OK`, :data:`INCONSISTENT`
    (the relative inconsistency ``rho = |bn - U_r U_r^T bn| / (|bn| + |a| + f)``, with
    ``f = 1e4 eps |F| / max|M|`` the rounding floor of the accelerations the forces
    produce)
    exceeds what rounding explains, ``allow``) or
    :data:`INCONSISTENT_VANISHED` (a vanished row has a right-hand side that
    does not vanish); ``be`` the backward error of ``a`` (:func:`verify`).
    """
    n = M.shape[0]
    m = A.shape[0]
    be_f, be_s = verify(M, F, a, mL, r, k, w)
    be = max(be_f, be_s)
    na = norm2(a)
    nbn = norm2(wvec(w, F_bn, mL))
    # the accelerations the forces produce (|F| over the largest mass) set the rounding
    # floor of a contradiction: rows that hold a body at rest have a ~ 0 and right-hand
    # sides of pure rounding noise (two identical rows of sticking contacts), whose
    # difference is no inconsistency
    mmax = 0.0
    for i in range(n):
        for j in range(n):
            if abs(M[i, j]) > mmax:
                mmax = abs(M[i, j])
    floor = 1e4 * _EPS * norm2(F) / mmax if mmax > 0.0 else 0.0
    den = nbn + na + floor
    rho = c_norm / den if den > 0.0 else 0.0
    allow = inconsistency_allowance(wvec(w, F_s, k), rank_tol, n, mL)
    if rho > allow:
        return INCONSISTENT, rho, allow, be
    root = math.sqrt(rank_tol)
    for i in range(m):
        if not wivec(w, I_live, m)[i]:
            acc = -b[i]
            for j in range(n):
                acc += A[i, j] * a[j]
            rf = ref[i] if ref[i] > wfull(w, F_nu)[i] else wfull(w, F_nu)[i]
            if abs(acc) > root * (rf * na + abs(b[i])) + _TINY:
                return INCONSISTENT_VANISHED, rho, allow, be
    return OK, rho, allow, be


@_leaf
def direct_tolerance(n, m):
    """Backward error a direct (LU, Cholesky, SVD) solve must reach: ``16 (n + m + 1) eps``."""
    return 16.0 * (n + m + 1) * _EPS


@_unit("Tuple((i8, i8, i8, i8, i8, f8, f8, f8, f8, i8))(f8m, f8v, f8m, f8v, f8v, f8, f8, i8, b1, b1, w)", python=True)
def gauss_step(M, F, A, b, ref, sig_ref, rank_tol, method, want_lam, check_symmetry, w):
    """One Gauss step: rank decision, solve, verification, fallback.

    Parameters
    ----------
    M : (n, n), F : (n,), A : (m, n), b : (m,)
    ref : (m,) reference row scales (``<= 0``: none)
    sig_ref : reference of the smallest singular value (``<= 0``: none; :func:`reduce_rows`)
    rank_tol : float
    method : int
        :data:`CLOSED_FORM` or :data:`LAGRANGE`.
    want_lam : bool
        Compute the multipliers (into ``w``'s ``lam``).
    check_symmetry : bool
        Reject an asymmetric ``M`` (:func:`asymmetric`; skip it for a constant,
        already checked ``M``).
    w : Work

    Returns
    -------
    status : int (see :data:`gaussopt.core.status.STEP_STATUS`)
    fa : the field of ``w`` holding ``a`` (:data:`F_a`, or :data:`F_a2` for a verified KKT
    result): ``a = w.f[w.i[fa]:w.i[fa + 1]]``, ``result(w, fa)`` from Python
    r, mL, k : rank, live rows, ``min(mL, n)`` (the workspace's ``s[:k]`` the singular values,
    ``live``, ``nu``: :func:`view`)
    rho, allow : relative inconsistency and its allowance (:func:`check`)
    be : backward error of ``a`` (:func:`verify`)
    dmin : smallest Cholesky pivot of the reduced Hessian (null-space path), or of the
    augmented mass matrix (range-space path, :func:`range_space`)
    flags : bit 1 the KKT result failed its verification and the closed form
    was used; bit 2 vanished rows kept (:func:`decide`); :data:`RANGE_FLAG` the
    range-space path answered.

    The path (module docstring, item 2): for few rows (:func:`range_space_pays`, a rule
    of the sizes) the range-space form, when every live row is kept (no redundant or
    folded direction: those need the null space, :func:`gaussopt.gauss.model_step.fold_rows`)
    and the augmented mass matrix is safely definite (a smallest pivot of at least
    ``rank_tol``); anything else goes on to the null-space path, which decides as
    :func:`decide` (same rank decision: the first :func:`reduce_rows` is shared).
    """
    n = M.shape[0]
    m = A.shape[0]
    if not (all_finite2(M) and all_finite1(F) and all_finite2(A) and all_finite1(b)):
        return NONFINITE, F_a, 0, 0, 0, 0.0, 0.0, np.inf, 0.0, 0
    if check_symmetry and asymmetric(M):
        return NONSYMMETRIC, F_a, 0, 0, 0, 0.0, 0.0, np.inf, 0.0, 0
    ranged = False
    if range_space_pays(n, m):
        wgt = mass_weight(M)
        mL, r, k, c_norm = reduce_rows(A, b, ref, sig_ref, rank_tol, False, w)
        dmin = -1.0
        if r == mL:
            dmin = range_space(M, F, wgt, r, rank_tol, w)
        if dmin >= rank_tol:
            ranged = True
            status = OK
            flags = RANGE_FLAG
        else:
            status, mL, r, k, c_norm, dmin, flags = determinacy(M, A, b, ref, sig_ref, rank_tol,
                                                                wgt, mL, r, k, c_norm, w)
    else:
        status, wgt, mL, r, k, c_norm, dmin, flags = decide(M, A, b, ref, sig_ref, rank_tol, w)
    if status != OK:
        return status, F_a, r, mL, k, 0.0, 0.0, np.inf, dmin, flags
    tol = direct_tolerance(n, mL)
    fa = F_a
    rho, allow, be = 0.0, 0.0, np.inf
    for attempt in range(2):
        if not ranged:
            closed_form(M, F, wgt, mL, r, w)
        fa = F_a
        if method == LAGRANGE:
            ok = kkt_lu(M, F, wgt, r, w)
            bf, bs = verify(M, F, wfull(w, F_a2), mL, r, k, w)
            if ok and max(bf, bs) <= tol:
                fa = F_a2
            else:
                flags |= 1
        a = wfull(w, fa)
        status, rho, allow, be = check(M, F, A, b, ref, rank_tol, mL, r, k, c_norm, a, w)
        if status == OK and not be <= tol:
            status = UNVERIFIED
        if not (ranged and status == UNVERIFIED):
            break
        # a range-space answer that fails its verification (the augmented matrix's
        # conditioning): the null-space path decides and solves, as without the range path
        ranged = False
        status, mL, r, k, c_norm, dmin, flags = determinacy(M, A, b, ref, sig_ref, rank_tol,
                                                            wgt, mL, r, k, c_norm, w)
        if status != OK:
            return status, F_a, r, mL, k, 0.0, 0.0, np.inf, dmin, flags
        tol = direct_tolerance(n, mL)
    if status == OK and want_lam:
        multipliers(M, F, a, A, mL, r, k, w)
    return status, fa, r, mL, k, rho, allow, be, dmin, flags
