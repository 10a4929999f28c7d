"""Small dense linear algebra of compiled code: norms, Cholesky, triangular solves, SVD.

Written as loops (numba compiles a slice assignment with broadcasting and overlap checks
at every use) and without allocation (the SVD writes into the step's workspace,
:mod:`gaussopt.gauss.workspace`), these are the pieces the dense Gauss step
(:mod:`gaussopt.gauss.dense_step`), the O(n) step (:mod:`gaussopt.gauss.band_step`), the
projection and the rank monitor of the engine share: each is written once, here.

Norms never underflow or overflow (:func:`norm2`: a row ``(1e-200, 1e-200)`` has the norm
``1.41e-200``, not 0). The SVD (:func:`svd_into`) is Householder QR followed by one-sided
Jacobi on the small triangular factor (accurate also for the small singular values), or
LAPACK's ``gesdd`` from :data:`LAPACK_MIN` singular values on.
"""

from __future__ import annotations

import math

import numpy as np

from gaussopt.core.compiled import jit, unit
from gaussopt.core.views import wivec, wmat, wvec
from gaussopt.gauss.workspace import (F_Q, F_R, F_U, F_V, F_W, F_X, F_Y, F_Vk, F_hv, F_norms, F_s,
                                      F_tau, I_flag, I_order, make_work_compiled, svd_views)

__all__ = ["norm2", "row_norms", "absmax", "frobenius", "cholesky", "forward_solve",
           "forward_solve1", "backward_solve_t", "tree_ltl", "tree_solve_lt", "tree_solve_l",
           "householder_qr", "jacobi_sweeps", "matvec",
           "svd", "svd_into", "svd_complete", "svd_econ", "all_finite1", "all_finite2", "absmax_vec", "LAPACK_MIN"]

_EPS = float(np.finfo(float).eps)

def _unit(signature: str, lazy: bool = False, python: bool = False):
    return unit(signature, lazy=lazy, python=python, nogil=True, _nrt=False)


_leaf = jit(cache=True, nogil=True, _nrt=False)
#: helpers that return views of the workspace are inlined (a function without reference
#: counting may not return an array to its caller)
_inline = jit(cache=True, nogil=True, _nrt=False, inline="always")
#: (``_nrt=True`` explicitly where a function allocates or returns arrays: a function
#: without the option inherits its caller's)
_jit = jit(cache=True, nogil=True, _nrt=True)


# --------------------------------------------------------------------------- small dense algebra
#: a sum of squares strictly between these is its norm's square to the same relative
#: accuracy as the scaled sum (:func:`norm2`): below ``_SUMSQ_HI`` no square overflowed;
#: above ``_SUMSQ_LO`` the squares that fell below the normal range (each off by at
#: most 2^-1074 ~ 4.9e-324) change it by at most n 4.9e-324 / 1e-290, far below eps
_SUMSQ_LO = 1e-290


_SUMSQ_HI = 1e290


@_leaf
def norm2(x):
    """Euclidean norm without underflow or overflow: the plain sum of squares where it
    is safe (:data:`_SUMSQ_LO` < sum < :data:`_SUMSQ_HI`), else scaled by the largest
    entry. Inlined where it is called: ``norm2(A[i])`` then makes no row view that
    lives across a call (a view passed to a call costs reference counting)."""
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i] * x[i]
    if _SUMSQ_LO < acc < _SUMSQ_HI:
        return math.sqrt(acc)
    scale = 0.0
    for i in range(x.shape[0]):
        ax = abs(x[i])
        if ax > scale:
            scale = ax
    if scale == 0.0 or not np.isfinite(scale):
        return scale
    acc = 0.0
    for i in range(x.shape[0]):
        y = x[i] / scale
        acc += y * y
    return scale * math.sqrt(acc)


@jit(cache=True, nogil=True, _nrt=False, python=True)   # (Python calls it too)
def row_norms(A, out):
    """Euclidean norm of every row of ``A`` into ``out`` (no underflow: a row
    ``(1e-200, 1e-200)`` has the norm ``1.41e-200``, not 0)."""
    for i in range(A.shape[0]):
        out[i] = norm2(A[i])


@_leaf
def absmax(M):
    """Largest ``|M[i, j]|`` of a matrix (0 for an empty one; NaN entries are skipped)."""
    big = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            ax = abs(M[i, j])
            if ax > big:
                big = ax
    return big


@_leaf
def absmax_vec(x):
    """Largest ``|x[i]|`` of a vector (0 for an empty one; NaN entries are skipped)."""
    big = 0.0
    for i in range(x.shape[0]):
        ax = abs(x[i])
        if ax > big:
            big = ax
    return big


@_leaf
def frobenius(M):
    """Frobenius norm of ``M`` without underflow or overflow (as :func:`norm2`)."""
    acc = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            acc += M[i, j] * M[i, j]
    if _SUMSQ_LO < acc < _SUMSQ_HI:
        return math.sqrt(acc)
    scale = absmax(M)
    if scale == 0.0:
        return 0.0
    acc = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            y = M[i, j] / scale
            acc += y * y
    return scale * math.sqrt(acc)


@_leaf
def cholesky(S, L):
    """Cholesky factor ``L`` (lower) of the symmetric ``S``; returns the smallest
    pivot ``L_kk**2`` (``-1.0`` if a pivot is not positive: ``S`` is not
    positive definite to working precision)."""
    n = S.shape[0]
    dmin = np.inf
    for j in range(n):
        d = S[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > 0.0:
            return -1.0
        if d < dmin:
            dmin = d
        ljj = math.sqrt(d)
        L[j, j] = ljj
        for i in range(j + 1, n):
            s = S[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / ljj
        for i in range(j):
            L[i, j] = 0.0
    return dmin


@_leaf
def forward_solve(L, B):
    """Solve ``L X = B`` in place (``L`` lower triangular, ``B`` (n, k))."""
    n, k = B.shape
    for c in range(k):
        for i in range(n):
            s = B[i, c]
            for j in range(i):
                s -= L[i, j] * B[j, c]
            B[i, c] = s / L[i, i]


@_leaf
def forward_solve1(L, x):
    """Solve ``L y = x`` in place for a vector."""
    n = x.shape[0]
    for i in range(n):
        s = x[i]
        for j in range(i):
            s -= L[i, j] * x[j]
        x[i] = s / L[i, i]


@_leaf
def backward_solve_t(L, x):
    """Solve ``L^T x = y`` in place for a vector."""
    n = x.shape[0]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= L[j, i] * x[j]
        x[i] = s / L[i, i]


@_leaf
def tree_ltl(L, par, run):
    """Featherstone's ``L^T L`` factorization of a symmetric matrix with the sparsity of
    the tree ``par`` (each index's parent, parents numbered first, -1 a root: ``S[i, j]``
    nonzero only for ``j`` an ancestor of ``i`` or the reverse), in place: ``L``'s lower
    triangle holds ``S`` on the pattern (its diagonal and every ``L[i, j]`` with ``j`` an
    ancestor of ``i``; nothing else is read or written) and receives the lower triangular
    ``L`` with ``S = L^T L``, of the same pattern: eliminating from the leaves towards the
    roots fills nothing in. Cost ``sum_k depth(k)^2 / 2`` against ``n^3 / 6`` for a dense
    Cholesky. ``run[i]``: the first index of the chain of consecutive indices that ends
    at ``i`` (``par[x] = x - 1`` along it): the path to a root is walked run by run, each
    a contiguous loop (an update of a row by a multiple of another, which the compiler
    vectorizes). Returns the smallest pivot (``-1.0`` if one is not positive), like
    :func:`cholesky`: a pivot is a diagonal entry of a Schur complement, in any order of
    elimination an upper bound of the smallest eigenvalue.

    R. Featherstone, "Efficient factorization of the joint-space inertia matrix for
    branched kinematic trees", Int. J. Robotics Research 24 (2005) 487-500; *Rigid Body
    Dynamics Algorithms* (2008), sec. 6.5."""
    n = L.shape[0]
    dmin = np.inf
    for k in range(n - 1, -1, -1):
        d = L[k, k]
        if not d > 0.0:
            return -1.0
        if d < dmin:
            dmin = d
        lkk = math.sqrt(d)
        L[k, k] = lkk
        inv = 1.0 / lkk
        Lk = L[k]
        i = par[k]
        while i >= 0:
            s = run[i]
            for x in range(i + 1 - s):
                Lk[np.uint64(s + x)] *= inv        # (unsigned: no negative-index check)
            i = par[s]
        i = par[k]
        while i >= 0:
            lki = Lk[i]
            Li = L[i]
            j = i
            while j >= 0:
                s = run[j]
                for x in range(j + 1 - s):
                    Li[np.uint64(s + x)] -= lki * Lk[np.uint64(s + x)]
                j = par[s]
            i = par[i]
    return dmin


@_leaf
def tree_solve_lt(L, par, run, x):
    """Solve ``L^T y = x`` in place for the factor of :func:`tree_ltl` (from the leaves
    to the roots; ``sum depth`` operations, none for a zero entry: the solution is zero
    outside the ancestors of ``x``'s nonzeros)."""
    n = L.shape[0]
    for i in range(n - 1, -1, -1):
        if x[i] == 0.0:
            continue
        xi = x[i] / L[i, i]
        x[i] = xi
        Li = L[i]
        j = par[i]
        while j >= 0:
            s = run[j]
            for c in range(j + 1 - s):
                x[np.uint64(s + c)] -= Li[np.uint64(s + c)] * xi
            j = par[s]


@_leaf
def tree_solve_l(L, par, run, x):
    """Solve ``L y = x`` in place for the factor of :func:`tree_ltl` (from the roots to
    the leaves)."""
    n = L.shape[0]
    for i in range(n):
        acc = x[i]
        Li = L[i]
        j = par[i]
        while j >= 0:
            s = run[j]
            for c in range(j + 1 - s):
                acc -= Li[np.uint64(s + c)] * x[np.uint64(s + c)]
            j = par[s]
        x[i] = acc / Li[i]


@_leaf
def householder_qr(X, full, Q, R, V, tau):
    """QR of a tall ``X`` (p, k), p >= k, destroyed: ``Q`` (p, p if ``full`` else k)
    and ``R`` (k, k) are written; ``V`` (p, k) and ``tau`` (k) are scratch."""
    p, k = X.shape
    for i in range(p):
        for j in range(k):
            V[i, j] = 0.0
    for j in range(k):
        nrm = 0.0
        for i in range(j, p):
            nrm += X[i, j] * X[i, j]
        if _SUMSQ_LO < nrm < _SUMSQ_HI:
            nrm = math.sqrt(nrm)
        else:                                  # (as norm2: scaled where it must be)
            scale = 0.0
            for i in range(j, p):
                ax = abs(X[i, j])
                if ax > scale:
                    scale = ax
            if scale == 0.0:
                tau[j] = 0.0
                continue
            nrm = 0.0
            for i in range(j, p):
                y = X[i, j] / scale
                nrm += y * y
            nrm = scale * math.sqrt(nrm)
        alpha = -nrm if X[j, j] >= 0.0 else nrm
        for i in range(j, p):
            V[i, j] = X[i, j]
        V[j, j] -= alpha
        vv = 0.0
        for i in range(j, p):
            vv += V[i, j] * V[i, j]
        if vv == 0.0:
            tau[j] = 0.0
            continue
        tau[j] = 2.0 / vv
        for c in range(j, k):
            s = 0.0
            for i in range(j, p):
                s += V[i, j] * X[i, c]
            s *= tau[j]
            for i in range(j, p):
                X[i, c] -= s * V[i, j]
    for i in range(k):
        for c in range(k):
            R[i, c] = X[i, c] if c >= i else 0.0
    kq = Q.shape[1]
    for i in range(p):
        for c in range(kq):
            Q[i, c] = 1.0 if i == c else 0.0
    for j in range(k - 1, -1, -1):
        if tau[j] == 0.0:
            continue
        for c in range(kq):
            s = 0.0
            for i in range(j, p):
                s += V[i, j] * Q[i, c]
            s *= tau[j]
            for i in range(j, p):
                Q[i, c] -= s * V[i, j]


@_leaf
def jacobi_sweeps(Y, W):
    """One-sided (Hestenes) Jacobi on a square ``Y`` (k, k), in place: ``Y <- Y W``
    with orthogonal columns; ``W`` (k, k) receives the rotations."""
    k = Y.shape[0]
    for i in range(k):
        for j in range(k):
            W[i, j] = 1.0 if i == j else 0.0
    tol = _EPS * max(k, 1)
    for sweep in range(60):
        rotated = False
        for p in range(k - 1):
            for q in range(p + 1, k):
                alpha = 0.0
                beta = 0.0
                gamma = 0.0
                for i in range(k):
                    yp = Y[i, p]
                    yq = Y[i, q]
                    alpha += yp * yp
                    beta += yq * yq
                    gamma += yp * yq
                if gamma == 0.0 or abs(gamma) <= tol * math.sqrt(alpha * beta):
                    continue
                rotated = True
                zeta = (beta - alpha) / (2.0 * gamma)
                t = (1.0 if zeta >= 0.0 else -1.0) / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
                c = 1.0 / math.sqrt(1.0 + t * t)
                s = c * t
                for i in range(k):
                    yp = Y[i, p]
                    yq = Y[i, q]
                    Y[i, p] = c * yp - s * yq
                    Y[i, q] = s * yp + c * yq
                    wp = W[i, p]
                    wq = W[i, q]
                    W[i, p] = c * wp - s * wq
                    W[i, q] = s * wp + c * wq
        if not rotated:
            break


@_jit
def matvec(J, x, out):
    """``out = J x`` (a loop: no temporary)."""
    for k in range(J.shape[0]):
        acc = 0.0
        for c in range(J.shape[1]):
            acc += J[k, c] * x[c]
        out[k] = acc


@_jit
def svd(X, w):
    """:func:`svd_into` the fields ``U``, ``s``, ``V`` of ``w`` (with the whole ``V``:
    :func:`svd_complete`); returns views ``U`` (m, k), ``s`` (k,), ``V`` (n, n) of them."""
    svd_into(X, w, F_U, F_s, F_V)
    svd_complete(w, F_V, X.shape[0], X.shape[1])
    return svd_views(w, F_U, F_s, F_V, X.shape[0], X.shape[1])


#: from this many singular values on, :func:`svd_into` calls LAPACK (``gesdd``):
#: the one-sided Jacobi sweeps cost ~k^3 each (1.6 s per step of the N = 80
#: N-four-bar, k = 482; LAPACK 0.05 s). Measured on normalized dense rows (the
#: spatial models' Jacobians): Jacobi and gesdd cost the same at k = 9, gesdd is
#: 1.4x faster at k = 15, 3.3x at k = 35 (Bricard: 376 against 116 us). Jacobi's
#: extra accuracy (the smallest singular values relative to themselves) is not
#: needed by the rank decisions, whose thresholds (``rank_tol``, the fold floor
#: ``64 (n + m) eps s_1``) lie far above gesdd's absolute error ``~k eps s_1``
LAPACK_MIN = 16


#: :func:`svd_into` scales a matrix whose largest entry lies outside these (by a power
#: of two) before the Jacobi sweeps, whose sums of squares would overflow or underflow
_SVD_LO = 2.0 ** -200


_SVD_HI = 2.0 ** 200


@unit("none(f8m, f8m, f8v, f8m)", lazy=True, nogil=True, _nrt=True)
def _svd_lapack(X, U, s, V):
    """:func:`svd_into` from :data:`LAPACK_MIN` singular values on: LAPACK's
    divide-and-conquer SVD (``gesdd``; the Jacobi sweeps cost ~k^3 each). It
    allocates, so it keeps reference counting (``_nrt=True`` explicitly:
    a function without the option inherits its caller's)."""
    m, n = X.shape
    k = min(m, n)
    Ul, sl, Vtl = np.linalg.svd(np.ascontiguousarray(X))
    for jj in range(k):
        s[jj] = sl[jj]
        for i in range(m):
            U[i, jj] = Ul[i, jj] if sl[jj] > 0.0 else 0.0
    for i in range(n):
        for j in range(n):
            V[i, j] = Vtl[j, i]


@_unit("none(f8m, w, i8, i8, i8)", python=True)
def svd_into(X, w, fU, fs, fV):
    """SVD ``X = U diag(s) V[:, :k]^T`` of a small dense ``X`` (m, n) in the workspace
    ``w`` (sized for at least ``(n, m)``): writes ``U`` (m, k), ``s`` (k,)
    descending and the right singular vectors ``V[:, :k]`` of the orthogonal ``V`` (n, n)
    (its other columns an orthonormal basis of the rest of ``R^n``, see below) into the fields ``fU``, ``fs``, ``fV`` (views: :func:`svd_views`;
    :func:`svd` returns them). Householder QR of ``X`` or ``X^T`` (whichever is tall), then
    one-sided Jacobi on the ``k x k`` triangular factor, ``k = min(m, n)``
    (LAPACK's ``gesdd`` from :data:`LAPACK_MIN` singular values on).
    Columns of ``U`` for exactly zero singular values are zero.

    The columns ``V[:, k:]`` (the null space of ``X``) of a wide ``X`` (``m < n``) factored
    by the Jacobi path are left to :func:`svd_complete`, which writes them from the
    Householder reflectors this call leaves in the workspace: few rows (``k`` of them)
    then cost ``~k^2 n`` for their singular vectors, and a caller that needs no null-space
    basis (the range-space step, :func:`gaussopt.gauss.dense_step.range_space`) does not
    pay ``~4 k n^2`` for one. :func:`svd` returns the whole ``V``."""
    m, n = X.shape
    k = min(m, n)
    U = wmat(w, fU, m, k)
    s = wvec(w, fs, k)
    V = wmat(w, fV, n, n)
    flag = wivec(w, I_flag, 1)
    flag[0] = 0
    if k == 0:
        for i in range(n):
            for j in range(n):
                V[i, j] = 1.0 if i == j else 0.0
        return
    if m <= n and _disjoint_rows(X, wvec(w, F_norms, k)):
        _svd_disjoint(X, wvec(w, F_norms, k), U, s, V, wivec(w, I_order, k))
        flag[0] = 1                             # (no reflectors: svd_complete makes them)
        return
    _svd_jacobi(X, w, fU, fs, fV)


@_unit("none(f8m, w, i8, i8, i8)", lazy=True)
def _svd_jacobi(X, w, fU, fs, fV):
    """:func:`svd_into` of rows that are not disjoint: Householder QR of the tall one of
    ``X``, ``X^T``, then one-sided Jacobi on the triangular factor (LAPACK from
    :data:`LAPACK_MIN` singular values on). A lazy unit: a run whose rows stay disjoint (a
    single row, a tree's normalization rows) never compiles it."""
    m, n = X.shape
    k = min(m, n)
    U = wmat(w, fU, m, k)
    s = wvec(w, fs, k)
    V = wmat(w, fV, n, n)
    if k >= LAPACK_MIN:
        _svd_lapack(X, U, s, V)
        return
    # Jacobi's sums of squares and their products overflow for entries beyond ~1e76 and
    # underflow below ~1e-150 (then it returns wrong singular values, silently): the
    # matrix is scaled by a power of two (exact) into [0.5, 1) outside [2^-200, 2^200]
    amax = absmax(X)
    e = 0                 # (ldexp, not a factor: 2^-e overflows for subnormal entries)
    if np.isfinite(amax) and amax > 0.0 and not (_SVD_LO <= amax <= _SVD_HI):
        e = math.frexp(amax)[1]
    R = wmat(w, F_R, k, k)
    Y = wmat(w, F_Y, k, k)
    W = wmat(w, F_W, k, k)
    tau = wvec(w, F_tau, k)
    # X^T = Q1 R (m <= n) or X = Q1 R, by one Householder QR of the tall one (one call
    # site: each is compiled into this function once)
    tall = m <= n
    p = n if tall else m
    Z = wmat(w, F_X, p, k)
    for i in range(p):
        for j in range(k):
            x = X[j, i] if tall else X[i, j]
            Z[i, j] = x if e == 0 else math.ldexp(x, -e)
    Q = wmat(w, F_Q, p, k)                  # (the rest of a wide X's Q: svd_complete)
    householder_qr(Z, False, Q, R, wmat(w, F_hv, p, k), tau)
    for i in range(k):
        for j in range(k):
            Y[i, j] = R[j, i] if tall else R[i, j]                  # R^T W = Y, or R W = Y
    jacobi_sweeps(Y, W)
    Vk = wmat(w, F_Vk, n, k)
    if tall:                                                       # X = Uc S (Q1 W)^T
        for i in range(n):
            for j in range(k):
                acc = 0.0
                for l in range(k):
                    acc += Q[i, l] * W[l, j]
                Vk[i, j] = acc
    else:
        for i in range(n):
            for j in range(k):
                Vk[i, j] = W[i, j]
    norms = wvec(w, F_norms, k)
    for j in range(k):
        norms[j] = norm2(Y[:, j])
    order = wivec(w, I_order, k)
    _descending(norms, order)
    for jj in range(k):
        j = order[jj]
        sj = norms[j]
        s[jj] = sj if e == 0 else math.ldexp(sj, e)
        for i in range(n):
            V[i, jj] = Vk[i, j]
        if m <= n:
            for i in range(m):
                U[i, jj] = Y[i, j] / sj if sj > 0.0 else 0.0
        else:
            for i in range(m):
                acc = 0.0
                for l in range(k):
                    acc += Q[i, l] * Y[l, j]
                U[i, jj] = acc / sj if sj > 0.0 else 0.0


@_leaf
def _descending(norms, order):
    """``order`` (k,) the indices of ``norms`` (k,) by descending value (insertion sort,
    stable: k is small)."""
    k = order.shape[0]
    for j in range(k):
        order[j] = j
    for j in range(1, k):
        x = order[j]
        i = j - 1
        while i >= 0 and norms[order[i]] < norms[x]:
            order[i + 1] = order[i]
            i -= 1
        order[i + 1] = x


@_leaf
def _disjoint_rows(X, norms):
    """Whether the rows of ``X`` (m, n) have pairwise disjoint supports (no column with two
    nonzero entries) and finite, positive norms (into ``norms``): then they are orthogonal
    and their SVD is written down (:func:`_svd_disjoint`). The rows of a tree in joint
    coordinates are of this kind (one normalization row per ball joint, on its own four
    Euler parameters), as is any single row."""
    m, n = X.shape
    for i in range(m):
        norms[i] = norm2(X[i])
        if not (norms[i] > 0.0 and norms[i] < np.inf):
            return False
    if m == 1:
        return True
    for c in range(n):
        seen = False
        for i in range(m):
            if X[i, c] != 0.0:
                if seen:
                    return False
                seen = True
    return True


@_leaf
def _svd_disjoint(X, norms, U, s, V, order):
    """The SVD of rows with disjoint supports (:func:`_disjoint_rows`, their ``norms``):
    the singular values are the norms (descending), ``U`` the permutation that sorts them,
    ``V[:, jj]`` the row of the ``jj``-th value over its norm (exact up to the rounding of
    the norms: the rows are exactly orthogonal). ``V[:, k:]`` is left to
    :func:`svd_complete`, as the Jacobi path leaves it for a wide matrix."""
    m, n = X.shape
    _descending(norms, order)
    for jj in range(m):
        r = order[jj]
        sj = norms[r]
        s[jj] = sj
        for i in range(m):
            U[i, jj] = 1.0 if i == r else 0.0
        for c in range(n):
            V[c, jj] = X[r, c] / sj


@_unit("none(w, i8, i8, i8)", python=True)
def svd_complete(w, fV, m, n):
    """The columns ``V[:, k:]`` that :func:`svd_into` of an (m, n) matrix left unwritten
    (a wide matrix, ``m < n``, on the Jacobi path: the Householder QR of its transpose):
    the Householder reflectors of that call, still in the workspace, applied to the
    identity's columns ``k .. n - 1``. ``Q``'s columns are independent of each other, so
    these are the bits a full ``Q`` would have had. Call it before anything else uses the
    workspace's QR scratch (the next :func:`svd_into`); nothing to do for the other shapes
    (their ``V`` is always whole)."""
    k = min(m, n)
    flag = wivec(w, I_flag, 1)
    if k == 0 or m > n or (k >= LAPACK_MIN and flag[0] == 0):
        return
    V = wmat(w, fV, n, n)
    hv = wmat(w, F_hv, n, k)
    tau = wvec(w, F_tau, k)
    if flag[0] != 0:
        # the rows had disjoint supports (:func:`_svd_disjoint`): the reflectors of a
        # Householder QR of the orthonormal V[:, :k], whose later columns complete it
        Z = wmat(w, F_X, n, k)
        for i in range(n):
            for j in range(k):
                Z[i, j] = V[i, j]
        householder_qr(Z, False, wmat(w, F_Q, n, k), wmat(w, F_R, k, k), hv, tau)
        flag[0] = 0
    for c in range(k, n):
        for i in range(n):
            V[i, c] = 1.0 if i == c else 0.0
        for j in range(k - 1, -1, -1):
            if tau[j] == 0.0:
                continue
            s = 0.0
            for i in range(j, n):
                s += hv[i, j] * V[i, c]
            s *= tau[j]
            for i in range(j, n):
                V[i, c] -= s * hv[i, j]


@jit(cache=True, nogil=True, _nrt=True, python=True)     # (Python calls it too)
def svd_econ(X):
    """:func:`svd` with a workspace of its own: returns copies ``U`` (m, k), ``s``,
    ``V`` (n, n)."""
    m, n = X.shape
    w = make_work_compiled(n, m)
    U, s, V = svd(X, w)
    return U.copy(), s.copy(), V.copy()


@_leaf
def all_finite1(x):
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


@_leaf
def all_finite2(X):
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            if not np.isfinite(X[i, j]):
                return False
    return True
