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

3. **Verification** (:func:`verify`, :func:`check`): the result must satisfy
   the optimality conditions of the Gauss problem to the accuracy of its
   data. The backward errors of feasibility,
   ``|U_r^T (An a - bn)| / (s_1 |a| + |bn|)``, and of stationarity,
   ``|(I - V_r V_r^T)(M a - F)| / (|M|_F |a| + |F|)`` (``M a - F`` in the
   span of the kept rows, i.e. ``N^T (M a - F) = 0`` for a basis ``N`` of
   the null space of the live rows), must not exceed ``c eps`` with
   ``c = 16 (n + m + 1)`` for the direct solves (:func:`direct_tolerance`):
   evaluating the residuals themselves errs by at most ``(n + 1) eps`` times
   the same sums, and a backward-stable solve adds a modest multiple of it.
   A result that passes is the exact solution of data perturbed at the level
   of a few ulps, so its forward error is at most the condition number times
   ``c eps``. An iterative solver (the QP) is held to its own tolerance.

The functions take and return plain arrays; :func:`gauss_step` chains them
(with the fallback of the KKT solve onto the closed form and the
vanished-row retry) and returns a status code instead of raising, so that the
integrator can call it from compiled code.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

__all__ = ["row_norms", "svd_econ", "reduce_rows", "decide", "closed_form", "kkt_lu", "verify",
           "check", "multipliers", "gauss_step", "cholesky", "direct_tolerance",
           "inconsistency_allowance", "asymmetric", "smallest_live_sigma", "STATUS", "CLOSED_FORM", "LAGRANGE"]

_EPS = float(np.finfo(float).eps)
_TINY = float(np.finfo(float).tiny)

#: solve methods of :func:`gauss_step`
CLOSED_FORM = 0
LAGRANGE = 1

#: status codes returned by :func:`gauss_step`
OK = 0
INDETERMINATE = 1
INCONSISTENT = 2
NONFINITE = 3
UNVERIFIED = 4
INCONSISTENT_VANISHED = 5
NONSYMMETRIC = 6
STATUS = {OK: "ok", INDETERMINATE: "indeterminate", INCONSISTENT: "inconsistent",
          NONFINITE: "non-finite data", UNVERIFIED: "verification failed",
          INCONSISTENT_VANISHED: "vanished row inconsistent", NONSYMMETRIC: "asymmetric mass"}

#: A direction of the normalized rows whose singular value falls below ``FOLD_TOL``
#: times its reference (the largest smallest-singular-value seen at accepted states
#: of the run) is dropped as vanished. At a folded configuration of a redundant
#: linkage the acceleration-level equations amplify an error of the state along
#: the "shaky" mode roughly like ``(sigma_far / sigma_near)`` between the regular
#: and the nearest sampled configuration: with ``1e-5`` the amplification stays
#: below ``1e5`` (rounding grows to ~1e-11), where keeping every direction above
#: ``rank_tol = 1e-8`` lets it reach ``1e8`` and an integrator at ``rtol = 1e-12``
#: collapses its step there. Rows that are nearly dependent from the start of a
#: run (a small reference) are decided by ``rank_tol`` as before.
FOLD_TOL = 1e-5

#: relative asymmetry of ``M`` above which it is rejected (``max |M - M^T| / max |M|``)
SYMMETRY_RTOL = 1e-12

_jit = nb.njit(cache=True, nogil=True)


# --------------------------------------------------------------------------- small dense algebra
@_jit
def _norm2(x):
    """Euclidean norm without underflow or overflow (scaled by the largest entry)."""
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


@_jit
def row_norms(A, out):
    """Euclidean norm of every row of ``A`` into ``out`` (no underflow: a row
    ``(1e-200, 1e-200)`` has the norm ``1.41e-200``, not 0)."""
    for i in range(A.shape[0]):
        out[i] = _norm2(A[i])


@_jit
def _frobenius(M):
    scale = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            ax = abs(M[i, j])
            if ax > scale:
                scale = ax
    if scale == 0.0:
        return 0.0
    acc = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            y = M[i, j] / scale
            acc += y * y
    return scale * math.sqrt(acc)


@_jit
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


@_jit
def _forward(L, B):
    """Solve ``L X = B`` in place (``L`` lower triangular, ``B`` (n, k))."""
    n, k = B.shape
    for c in range(k):
        for i in range(n):
            s = B[i, c]
            for j in range(i):
                s -= L[i, j] * B[j, c]
            B[i, c] = s / L[i, i]


@_jit
def _backward_t(L, x):
    """Solve ``L^T x = y`` in place for a vector."""
    n = x.shape[0]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= L[j, i] * x[j]
        x[i] = s / L[i, i]


@_jit
def _householder_qr(X, full):
    """QR of a tall ``X`` (p, k), p >= k: returns ``Q`` (p, p if ``full`` else k) and
    ``R`` (k, k)."""
    p, k = X.shape
    R = X.copy()
    V = np.zeros((p, k))
    tau = np.zeros(k)
    for j in range(k):
        # Householder vector for column j below the diagonal
        scale = 0.0
        for i in range(j, p):
            ax = abs(R[i, j])
            if ax > scale:
                scale = ax
        if scale == 0.0:
            tau[j] = 0.0
            continue
        nrm = 0.0
        for i in range(j, p):
            y = R[i, j] / scale
            nrm += y * y
        nrm = scale * math.sqrt(nrm)
        alpha = -nrm if R[j, j] >= 0.0 else nrm
        for i in range(j, p):
            V[i, j] = R[i, j]
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
                s += V[i, j] * R[i, c]
            s *= tau[j]
            for i in range(j, p):
                R[i, c] -= s * V[i, j]
    Rk = np.zeros((k, k))
    for i in range(k):
        for c in range(i, k):
            Rk[i, c] = R[i, c]
    # accumulate Q = H_0 H_1 ... H_{k-1} [I_kq; 0]
    kq = p if full else k
    Q = np.zeros((p, kq))
    for i in range(kq):
        Q[i, i] = 1.0
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
    return Q, Rk


@_jit
def _jacobi(C):
    """One-sided (Hestenes) Jacobi on a square ``C`` (k, k): ``C W = Y`` with
    orthogonal columns; returns ``Y`` (overwrites a copy), ``W``."""
    k = C.shape[0]
    Y = C.copy()
    W = np.eye(k)
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
    return Y, W


@_jit
def svd_econ(X):
    """SVD ``X = U diag(s) V[:, :k]^T`` of a small dense ``X`` (m, n), ``k = min(m, n)``.

    Householder QR of ``X`` or ``X^T`` (whichever is tall), then one-sided
    Jacobi on the ``k x k`` triangular factor. Returns ``U`` (m, k), ``s``
    (k,) descending and the *full* orthogonal ``V`` (n, n): its first ``k``
    columns are the right singular vectors, the others an orthonormal basis
    of the rest of ``R^n`` (the null space of ``X`` when it has full row
    rank). Columns of ``U`` for exactly zero singular values are zero (they
    are never used: only directions kept by the rank decision are).
    """
    m, n = X.shape
    k = min(m, n)
    U = np.zeros((m, k))
    s = np.zeros(k)
    V = np.zeros((n, n))
    if k == 0:
        for i in range(n):
            V[i, i] = 1.0
        return U, s, V
    if m <= n:
        Q, R = _householder_qr(X.T.copy(), True)    # X^T = Q1 R, X = R^T Q1^T
        Y, W = _jacobi(R.T.copy())                  # R^T W = Y
        Vk = np.zeros((n, k))                       # X = Uc S (Q1 W)^T
        for i in range(n):
            for j in range(k):
                acc = 0.0
                for l in range(k):
                    acc += Q[i, l] * W[l, j]
                Vk[i, j] = acc
            for j in range(k, n):
                V[i, j] = Q[i, j]                   # complement: the rest of Q
    else:
        Q, R = _householder_qr(X.copy(), False)     # X = Q1 R
        Y, W = _jacobi(R)                           # R W = Y
        Vk = W
    norms = np.empty(k)
    for j in range(k):
        norms[j] = _norm2(Y[:, j])
    order = np.empty(k, dtype=np.int64)         # descending (insertion sort: k is small)
    for j in range(k):
        order[j] = j
    for j in range(1, k):
        x = order[j]
        i = j - 1
        while i >= 0 and norms[order[i]] < norms[x]:
            order[i + 1] = order[i]
            i -= 1
        order[i + 1] = x
    for jj in range(k):
        j = order[jj]
        sj = norms[j]
        s[jj] = sj
        for i in range(n):
            V[i, jj] = Vk[i, j]
        if sj > 0.0:
            if m <= n:
                for i in range(m):
                    U[i, jj] = Y[i, j] / sj
            else:
                for i in range(m):
                    acc = 0.0
                    for l in range(k):
                        acc += Q[i, l] * Y[l, j]
                    U[i, jj] = acc / sj
    return U, s, V


# --------------------------------------------------------------------------- the rank decision
@_jit
def reduce_rows(A, b, ref, sig_ref, rank_tol, keep_vanished):
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

    Returns
    -------
    nu : (m,) row norms; live : (m,) bool; An, bn : normalized live rows
    (mL, n), (mL,); s : singular values of ``An`` (min(mL, n),); r : rank;
    Ur (mL, r), Vr (n, r), N (n, n - r) an orthonormal basis of the null space
    of the kept directions, beta (r,); c_norm : norm of the part of ``bn``
    outside ``span(U_r)`` (the inconsistency).
    """
    m, n = A.shape
    nu = np.empty(m)
    row_norms(A, nu)
    live = np.zeros(m, dtype=np.bool_)
    mL = 0
    for i in range(m):
        rf = ref[i] if ref[i] > 0.0 else nu[i]
        if nu[i] > 0.0 and (keep_vanished or nu[i] > rank_tol * rf):
            live[i] = True
            mL += 1
    An = np.empty((mL, n))
    bn = np.empty(mL)
    j = 0
    for i in range(m):
        if live[i]:
            inv = 1.0 / nu[i]
            for c in range(n):
                An[j, c] = A[i, c] * inv
            bn[j] = b[i] * inv
            j += 1
    U, s, V = svd_econ(An)
    thr = max(rank_tol, FOLD_TOL * sig_ref)
    r = 0
    for k in range(s.shape[0]):
        if s[k] > thr:
            r += 1
    Ur = U[:, :r].copy()
    Vr = V[:, :r].copy()
    N = V[:, r:].copy()
    beta = np.empty(r)
    proj = np.zeros(mL)
    for k in range(r):
        acc = 0.0
        for i in range(mL):
            acc += Ur[i, k] * bn[i]
        beta[k] = acc / s[k]
        for i in range(mL):
            proj[i] += Ur[i, k] * acc
    resid = bn - proj
    c_norm = _norm2(resid)
    return nu, live, An, bn, s, r, Ur, Vr, N, beta, c_norm


# --------------------------------------------------------------------------- solves
@_jit
def closed_form(M, F, Vr, N, beta, LH, w):
    """The closed-form solution in null-space form, on the reduced rows.

    ``a = a_p + N z`` with ``a_p = V_r beta`` (the minimum-norm solution of the
    kept rows) and ``(N^T M N) z = N^T (F - M a_p)``, ``LH`` the Cholesky
    factor of ``N^T M N / w`` (from :func:`decide`). This is the
    Udwadia--Kalaba / Udwadia--Phohomsiri solution (``M`` only needs to be
    positive definite on ``null(A)``, no inverse of ``M``): the same ``a``
    as ``a_u + M^{-1/2} (A M^{-1/2})^+ (b - A a_u)``, computed so that the
    constraints hold exactly by construction and ``F`` enters only in the
    free directions, whatever the sizes of ``F`` and ``a``.
    """
    n = Vr.shape[0]
    r = Vr.shape[1]
    d = N.shape[1]
    a = np.zeros(n)
    for i in range(n):
        acc = 0.0
        for k in range(r):
            acc += Vr[i, k] * beta[k]
        a[i] = acc
    if d == 0:
        return a
    g = np.empty(n)                     # (F - M a_p) / w
    for i in range(n):
        acc = F[i]
        for j in range(n):
            acc -= M[i, j] * a[j]
        g[i] = acc / w
    z = np.empty((d, 1))
    for k in range(d):
        acc = 0.0
        for i in range(n):
            acc += N[i, k] * g[i]
        z[k, 0] = acc
    _forward(LH, z)
    zz = z[:, 0].copy()
    _backward_t(LH, zz)
    for i in range(n):
        acc = a[i]
        for k in range(d):
            acc += N[i, k] * zz[k]
        a[i] = acc
    return a


@_jit
def kkt_lu(M, F, Vr, beta, w):
    """Lagrange's equations of the first kind on the reduced rows: the KKT system
    ``[[M/w, V_r], [V_r^T, 0]] [a; mu] = [F/w; beta]`` by LU with partial
    pivoting. Returns ``a`` and ``ok`` (False: a zero pivot)."""
    n = M.shape[0]
    r = Vr.shape[1]
    N = n + r
    K = np.zeros((N, N))
    x = np.zeros(N)
    for i in range(n):
        for j in range(n):
            K[i, j] = M[i, j] / w
        for k in range(r):
            K[i, n + k] = Vr[i, k]
            K[n + k, i] = Vr[i, k]
        x[i] = F[i] / w
    for k in range(r):
        x[n + k] = beta[k]
    for j in range(N):
        p = j
        big = abs(K[j, j])
        for i in range(j + 1, N):
            if abs(K[i, j]) > big:
                big = abs(K[i, j])
                p = i
        if big == 0.0:
            return np.zeros(n), False
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
    return x[:n].copy(), True


# --------------------------------------------------------------------------- verification
@_jit
def verify(M, F, An, bn, Ur, Vr, s, a):
    """Backward errors of ``a`` in the optimality conditions (module docstring, item 3).

    Returns ``(be_f, be_s)``: ``|U_r^T (An a - bn)| / (s_1 |a| + |bn|)``
    (feasibility of the kept directions: the relative perturbation of the
    normalized rows and right-hand side that ``a`` satisfies exactly) and
    ``|(I - V_r V_r^T)(M a - F)| / (|M|_F |a| + |F|)`` (stationarity: ``M a - F``
    in the span of the kept rows).
    """
    n = M.shape[0]
    mL = An.shape[0]
    r = Vr.shape[1]
    na = _norm2(a)
    g = np.empty(n)
    for i in range(n):
        acc = -F[i]
        for j in range(n):
            acc += M[i, j] * a[j]
        g[i] = acc
    p = g.copy()
    for k in range(r):
        d = 0.0
        for i in range(n):
            d += Vr[i, k] * g[i]
        for i in range(n):
            p[i] -= d * Vr[i, k]
    den = _frobenius(M) * na + _norm2(F)
    ps = _norm2(p)
    be_s = ps / den if den > 0.0 else (0.0 if ps == 0.0 else np.inf)
    e = np.empty(mL)
    for i in range(mL):
        acc = -bn[i]
        for j in range(n):
            acc += An[i, j] * a[j]
        e[i] = acc
    f = np.empty(r)
    for k in range(r):
        acc = 0.0
        for i in range(mL):
            acc += Ur[i, k] * e[i]
        f[k] = acc
    s1 = s[0] if s.shape[0] > 0 else 1.0
    den = s1 * na + _norm2(bn)
    pf = _norm2(f)
    be_f = pf / den if den > 0.0 else (0.0 if pf == 0.0 else np.inf)
    return be_f, be_s


@_jit
def multipliers(M, F, a, A, nu, live, Ur, Vr, s):
    """Minimum-norm multipliers ``lam`` with ``A^T lam = M a - F`` (0 on vanished rows).

    Independent live rows (``r`` equal to their number): the unique
    ``lam_n = U_r S_r^-1 V_r^T (M a - F)``, ``lam_i = lam_n,i / nu_i``. Redundant
    rows: ``min |lam|`` over the live rows of ``A`` itself (not the normalized
    ones), ``lam = (A_live^T)^+ (M a - F)`` truncated to the rank ``r`` of the
    shared decision: the redundant rows share the force.
    """
    n = M.shape[0]
    m = nu.shape[0]
    r = Vr.shape[1]
    mL = Ur.shape[0]
    g = np.empty(n)
    for i in range(n):
        acc = -F[i]
        for j in range(n):
            acc += M[i, j] * a[j]
        g[i] = acc
    lam = np.zeros(m)
    if r == mL:
        coef = np.empty(r)
        for k in range(r):
            acc = 0.0
            for i in range(n):
                acc += Vr[i, k] * g[i]
            coef[k] = acc / s[k]
        j = 0
        for i in range(m):
            if live[i]:
                acc = 0.0
                for k in range(r):
                    acc += Ur[j, k] * coef[k]
                lam[i] = acc / nu[i]
                j += 1
        return lam
    Al = np.empty((mL, n))
    j = 0
    for i in range(m):
        if live[i]:
            for c in range(n):
                Al[j, c] = A[i, c]
            j += 1
    U, sa, V = svd_econ(Al)
    rr = min(r, sa.shape[0])
    coef = np.empty(rr)
    for k in range(rr):
        acc = 0.0
        for i in range(n):
            acc += V[i, k] * g[i]
        coef[k] = acc / sa[k] if sa[k] > 0.0 else 0.0
    j = 0
    for i in range(m):
        if live[i]:
            acc = 0.0
            for k in range(rr):
                acc += U[j, k] * coef[k]
            lam[i] = acc
            j += 1
    return lam


@_jit
def _finite1(x):
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


@_jit
def _finite2(X):
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            if not np.isfinite(X[i, j]):
                return False
    return True


@_jit
def smallest_live_sigma(A, rank_tol):
    """The smallest singular value above ``rank_tol`` of the normalized nonzero rows
    of ``A`` (``inf`` without any): what :func:`reduce_rows`'s ``sig_ref`` follows."""
    m = A.shape[0]
    z = np.zeros(m)
    nu, live, An, bn, s, r, Ur, Vr, N, beta, c_norm = reduce_rows(A, z, z, 0.0, rank_tol, True)
    return s[r - 1] if r > 0 else np.inf


@_jit
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


@_jit
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


@_jit
def decide(M, A, b, ref, sig_ref, rank_tol):
    """The rank decision of one step, shared by every solver (module docstring, item 1).

    Returns ``(status, w, nu, live, An, bn, s, r, Ur, Vr, N, beta, c_norm, LH,
    dmin, flags)``: status :data:`OK` or :data:`INDETERMINATE`; ``w =
    trace(M)/n``; the outputs of :func:`reduce_rows`; ``LH`` the Cholesky
    factor of the reduced Hessian ``N^T M N / w`` and ``dmin`` its smallest
    pivot (the motion is determinate iff ``dmin >= rank_tol**2``;
    ``N^T M N / w`` has its eigenvalues in ``[0, n]``); ``flags`` bit 2: rows
    that vanished relative to their reference were kept because without them
    the motion was indeterminate (a fresh solve keeps them).
    """
    n = M.shape[0]
    m = A.shape[0]
    tr = 0.0
    for i in range(n):
        tr += M[i, i]
    w = tr / n if tr > 0.0 else 1.0
    flags = 0
    keep = False
    while True:
        nu, live, An, bn, s, r, Ur, Vr, N, beta, c_norm = reduce_rows(A, b, ref, sig_ref, rank_tol,
                                                                      keep)
        d = N.shape[1]
        MN = np.empty((n, d))
        for i in range(n):
            for k in range(d):
                acc = 0.0
                for j in range(n):
                    acc += M[i, j] * N[j, k]
                MN[i, k] = acc / w
        H = np.empty((d, d))
        for p in range(d):
            for q in range(p, d):
                acc = 0.0
                for i in range(n):
                    acc += N[i, p] * MN[i, q]
                H[p, q] = acc
                H[q, p] = acc
        LH = np.zeros((d, d))
        dmin = cholesky(H, LH) if d > 0 else np.inf
        if dmin >= rank_tol * rank_tol:
            return OK, w, nu, live, An, bn, s, r, Ur, Vr, N, beta, c_norm, LH, dmin, flags
        vanished_nonzero = False
        for i in range(m):
            if not live[i] and nu[i] > 0.0:
                vanished_nonzero = True
        if keep or not vanished_nonzero:
            return (INDETERMINATE, w, nu, live, An, bn, s, r, Ur, Vr, N, beta, c_norm, LH, dmin,
                    flags)
        keep = True
        flags |= 2


@_jit
def check(M, F, A, b, ref, rank_tol, nu, live, An, bn, s, Ur, Vr, c_norm, a):
    """Everything a result ``a`` must satisfy, after any solver.

    Returns ``(status, rho, allow, be)``: :data:`OK`, :data:`INCONSISTENT`
    (the relative inconsistency ``rho = |bn - U_r U_r^T bn| / (|bn| + |a|)``
    exceeds what rounding explains, ``allow``) or
    :data:`INCONSISTENT_VANISHED` (a vanished row has a right-hand side that
    does not vanish); ``be`` the backward error of ``a`` (:func:`verify`).
    """
    n = M.shape[0]
    m = A.shape[0]
    be_f, be_s = verify(M, F, An, bn, Ur, Vr, s, a)
    be = max(be_f, be_s)
    na = _norm2(a)
    nbn = _norm2(bn)
    rho = c_norm / (nbn + na) if nbn + na > 0.0 else 0.0
    allow = inconsistency_allowance(s, rank_tol, n, An.shape[0])
    if rho > allow:
        return INCONSISTENT, rho, allow, be
    root = math.sqrt(rank_tol)
    for i in range(m):
        if not live[i]:
            acc = -b[i]
            for j in range(n):
                acc += A[i, j] * a[j]
            rf = ref[i] if ref[i] > nu[i] else nu[i]
            if abs(acc) > root * (rf * na + abs(b[i])) + _TINY:
                return INCONSISTENT_VANISHED, rho, allow, be
    return OK, rho, allow, be


@_jit
def direct_tolerance(n, m):
    """Backward error a direct (LU, Cholesky, SVD) solve must reach: ``16 (n + m + 1) eps``."""
    return 16.0 * (n + m + 1) * _EPS


@_jit
def gauss_step(M, F, A, b, ref, sig_ref, rank_tol, method, want_lam, check_symmetry):
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
        Compute the multipliers.
    check_symmetry : bool
        Reject an asymmetric ``M`` (:func:`asymmetric`; skip it for a constant,
        already checked ``M``).

    Returns
    -------
    status : int (see :data:`STATUS`)
    a : (n,), lam : (m,)
    s : singular values of the live normalized rows
    r : rank; live : (m,) bool; nu : (m,) row norms
    rho, allow : relative inconsistency and its allowance (:func:`check`)
    be : backward error of ``a`` (:func:`verify`)
    dmin : smallest Cholesky pivot of the reduced Hessian
    flags : bit 1 the KKT result failed its verification and the closed form
    was used; bit 2 vanished rows kept (:func:`decide`).
    """
    n = M.shape[0]
    m = A.shape[0]
    lam = np.zeros(m)
    if not (_finite2(M) and _finite1(F) and _finite2(A) and _finite1(b)):
        return (NONFINITE, np.zeros(n), lam, np.zeros(0), 0, np.zeros(m, dtype=np.bool_),
                np.zeros(m), 0.0, 0.0, np.inf, 0.0, 0)
    if check_symmetry and asymmetric(M):
        return (NONSYMMETRIC, np.zeros(n), lam, np.zeros(0), 0, np.zeros(m, dtype=np.bool_),
                np.zeros(m), 0.0, 0.0, np.inf, 0.0, 0)
    (status, w, nu, live, An, bn, s, r, Ur, Vr, N, beta, c_norm, LH, dmin,
     flags) = decide(M, A, b, ref, sig_ref, rank_tol)
    if status != OK:
        return (status, np.zeros(n), lam, s, r, live, nu, 0.0, 0.0, np.inf, dmin, flags)
    tol = direct_tolerance(n, An.shape[0])
    a = closed_form(M, F, Vr, N, beta, LH, w)
    if method == LAGRANGE:
        a2, ok = kkt_lu(M, F, Vr, beta, w)
        bf, bs = verify(M, F, An, bn, Ur, Vr, s, a2)
        if ok and max(bf, bs) <= tol:
            a = a2
        else:
            flags |= 1
    status, rho, allow, be = check(M, F, A, b, ref, rank_tol, nu, live, An, bn, s, Ur, Vr,
                                   c_norm, a)
    if status == OK and not be <= tol:
        status = UNVERIFIED
    if status == OK and want_lam:
        lam = multipliers(M, F, a, A, nu, live, Ur, Vr, s)
    return status, a, lam, s, r, live, nu, rho, allow, be, dmin, flags
