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

The functions work in a preallocated workspace (:func:`make_work`, one per
problem size and thread): nothing is allocated on the hot path, and the
results are views into the workspace, valid until its next use.
:func:`gauss_step` chains them (with the fallback of the KKT solve onto the
closed form and the vanished-row retry) and returns a status code instead of
raising, so that the integrator can call it from compiled code.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numba as nb
import numpy as np
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.np.arrayobj import make_array, populate_array

from gaussopt.core.compiled import declare_types, ensure, jit, unit
from gaussopt.core.status import (CLOSED_FORM, INCONSISTENT, INCONSISTENT_VANISHED,  # noqa: F401
                                  INDETERMINATE, LAGRANGE, NONFINITE, NONSYMMETRIC, OK,
                                  UNVERIFIED)

__all__ = ["Work", "make_work", "view", "svd_into", "row_norms", "svd", "svd_econ", "reduce_rows", "decide",
           "closed_form", "kkt_lu", "verify", "check", "multipliers", "gauss_step", "cholesky",
           "direct_tolerance", "inconsistency_allowance", "asymmetric", "smallest_live_sigma",
           "CLOSED_FORM", "LAGRANGE"]

_EPS = float(np.finfo(float).eps)
_TINY = float(np.finfo(float).tiny)

# (the solve methods of :func:`gauss_step`, CLOSED_FORM and LAGRANGE, and its status codes
# are in the one table of codes, :mod:`gaussopt.core.status`)

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
def _unit(signature: str):
    return unit(signature, nogil=True, _nrt=False)


_leaf = jit(cache=True, nogil=True, _nrt=False)
#: helpers that return views of the workspace are inlined (a function without reference
#: counting may not return an array to its caller)
_inline = jit(cache=True, nogil=True, _nrt=False, inline="always")
#: (``_nrt=True`` explicitly where a function allocates or returns arrays: a function
#: without the option inherits its caller's)
_jit = jit(cache=True, nogil=True, _nrt=True)


# --------------------------------------------------------------------------- workspace
#: The workspace of one problem size ``(n, m)``: ``Work(f, i)``, one float buffer
#: ``f`` holding every float array of the kernel and one integer buffer ``i`` whose
#: first entries are the offsets of the fields (``f[i[F]:i[F + 1]]`` is the float
#: field ``F``; the integer fields follow the offsets). Two arrays instead of one per
#: field: numba passes a tuple of arrays by value into every call, and a tuple of
#: 37 arrays cost ~0.25 us per call of :func:`svd`. Matrices are stored flat,
#: row-major, and viewed with their live sizes (:func:`_mat`).
Work = namedtuple("Work", ["f", "i"])


@declare_types
def _types():
    return {"w": nb.types.NamedTuple([nb.types.float64[::1], nb.types.int64[::1]], Work)}

# float fields (k = min(m, n), p = max(m, n)) and their sizes
F_nu = 0
F_An = 1
F_bn = 2
F_X = 3
F_Q = 4
F_R = 5
F_hv = 6
F_tau = 7
F_Y = 8
F_W = 9
F_Vk = 10
F_norms = 11
F_U = 12
F_s = 13
F_V = 14
F_beta = 15
F_proj = 16
F_MN = 17
F_H = 18
F_LH = 19
F_a = 20
F_a2 = 21
F_g = 22
F_z = 23
F_pp = 24
F_e = 25
F_fk = 26
F_Kk = 27
F_xk = 28
F_lam = 29
F_coef = 30
F_U2 = 31
F_s2 = 32
F_V2 = 33
F_Al = 34
F_bb = 35            # (m) the rows' right-hand side with Baumgarte's terms (engine)
_NF = 36
# integer fields
I_live = 37
I_order = 38
_NI = 2


@unit("w(i8, i8)", nogil=True, _nrt=True)
def _make_work(n, m):
    """A workspace for ``n`` coordinates and ``m`` rows (see :data:`Work`)."""
    k = min(m, n)
    p = max(m, n, 1)
    m1 = max(m, 1)
    k1 = max(k, 1)
    sizes = (m1, m1 * n, m1, p * k1, p * p, k1 * k1, p * k1, k1, k1 * k1, k1 * k1, n * k1, k1, m1 * k1, k1, n * n, k1, m1, n * n, n * n, n * n, n, n, n, n, n, m1, k1, (n + k) * (n + k), n + k, m1, k1, m1 * k1, k1, n * n, m1 * n, m1)
    head = _NF + 1 + _NI + 1
    iw = np.zeros(head + m1 + k1, dtype=np.int64)
    off = 0
    for j in range(_NF):
        iw[j] = off
        off += sizes[j]
    iw[_NF] = off
    iw[I_live] = head
    iw[I_order] = head + m1
    iw[I_order + 1] = head + m1 + k1
    return Work(np.zeros(off), iw)


def make_work(n: int, m: int) -> Work:
    """A workspace for ``n`` coordinates and ``m`` rows (see :data:`Work`); loads the
    LAPACK path of :func:`svd_into` (compiled only for models that reach
    :data:`LAPACK_MIN`) when the sizes call for it."""
    if min(n, m) >= LAPACK_MIN:
        ensure(_svd_lapack)
    return _make_work(n, m)


# The views of the workspace are intrinsics: a few instructions each where they are used
# (an inlined function costs numba a copy of its code at every call site, and a function
# without reference counting may not return an array from a call).
def _work_arrays(context, builder, wty, wv):
    """The float and integer buffers of the workspace value ``wv`` (numba arrays)."""
    f = make_array(wty.types[0])(context, builder, builder.extract_value(wv, 0))
    i = make_array(wty.types[1])(context, builder, builder.extract_value(wv, 1))
    return f, i


def _offset(context, builder, iarr, fld, fty, plus=0):
    """``w.i[fld + plus]`` (an intp)."""
    intp = context.get_value_type(nb.types.intp)
    k = context.cast(builder, fld, fty, nb.types.intp)
    if plus:
        k = builder.add(k, intp(plus))
    return builder.load(builder.gep(iarr.data, [k]))


def _make_view(context, builder, retty, src, data, dims):
    """A borrowed view of ``src``'s memory at ``data``, C-contiguous, of shape ``dims``."""
    intp = context.get_value_type(nb.types.intp)
    item = intp(context.get_abi_sizeof(context.get_data_type(retty.dtype)))
    strides = []
    acc = item
    for d in reversed(dims):
        strides.insert(0, acc)
        acc = builder.mul(acc, d)
    out = make_array(retty)(context, builder)
    populate_array(out, data=data, shape=cgutils.pack_array(builder, dims, ty=intp),
                   strides=cgutils.pack_array(builder, strides, ty=intp),
                   itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
    return impl_ret_borrowed(context, builder, retty, out._getvalue())


def _is_work(w) -> bool:
    return (isinstance(w, nb.types.BaseTuple) and len(w) == 2
            and all(isinstance(t, nb.types.Array) and t.ndim == 1 and t.layout == "C"
                    for t in w.types))


@nb.extending.intrinsic
def _vec(typingctx, w, fld, n):
    """The first ``n`` entries of the float field ``fld`` of the workspace ``w`` (a view)."""
    if not _is_work(w):
        return None
    ret = w.types[0]

    def codegen(context, builder, sig, args):
        f, i = _work_arrays(context, builder, sig.args[0], args[0])
        o = _offset(context, builder, i, args[1], sig.args[1])
        nn = context.cast(builder, args[2], sig.args[2], nb.types.intp)
        return _make_view(context, builder, ret, f, builder.gep(f.data, [o]), [nn])
    return ret(w, fld, n), codegen


@nb.extending.intrinsic
def _full(typingctx, w, fld):
    """The whole float field ``fld`` (a view)."""
    if not _is_work(w):
        return None
    ret = w.types[0]

    def codegen(context, builder, sig, args):
        f, i = _work_arrays(context, builder, sig.args[0], args[0])
        o = _offset(context, builder, i, args[1], sig.args[1])
        o1 = _offset(context, builder, i, args[1], sig.args[1], plus=1)
        return _make_view(context, builder, ret, f, builder.gep(f.data, [o]),
                          [builder.sub(o1, o)])
    return ret(w, fld), codegen


@nb.extending.intrinsic
def _ivec(typingctx, w, fld, n):
    """The first ``n`` entries of the integer field ``fld`` (a view)."""
    if not _is_work(w):
        return None
    ret = w.types[1]

    def codegen(context, builder, sig, args):
        f, i = _work_arrays(context, builder, sig.args[0], args[0])
        o = _offset(context, builder, i, args[1], sig.args[1])
        nn = context.cast(builder, args[2], sig.args[2], nb.types.intp)
        return _make_view(context, builder, ret, i, builder.gep(i.data, [o]), [nn])
    return ret(w, fld, n), codegen


@nb.extending.intrinsic
def _mat(typingctx, w, fld, r, c):
    """The first ``r * c`` entries of the float field ``fld`` as a C-contiguous ``(r, c)``
    matrix (a view)."""
    if not _is_work(w):
        return None
    ret = w.types[0].copy(ndim=2, layout="C")

    def codegen(context, builder, sig, args):
        f, i = _work_arrays(context, builder, sig.args[0], args[0])
        o = _offset(context, builder, i, args[1], sig.args[1])
        rr = context.cast(builder, args[2], sig.args[2], nb.types.intp)
        cc = context.cast(builder, args[3], sig.args[3], nb.types.intp)
        return _make_view(context, builder, ret, f, builder.gep(f.data, [o]), [rr, cc])
    return ret(w, fld, r, c), codegen


@nb.extending.intrinsic
def as_matrix(typingctx, x, r, c):
    """The first ``r * c`` entries of a contiguous vector ``x`` as a C-contiguous
    ``(r, c)`` matrix: a view sharing ``x``'s data and owner (no call, unlike numba's
    ``reshape``; allowed in a function without reference counting, unlike ``as_strided``,
    which numba compiles as a function returning a new array)."""
    if not (isinstance(x, nb.types.Array) and x.ndim == 1 and x.layout == "C"):
        return None
    ret = x.copy(ndim=2, layout="C")

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        rr = context.cast(builder, args[1], sig.args[1], nb.types.intp)
        cc = context.cast(builder, args[2], sig.args[2], nb.types.intp)
        return _make_view(context, builder, ret, src, src.data, [rr, cc])
    return ret(x, r, c), codegen


@_inline
def _svd_views(w, fU, fs, fV, m, n):
    """Views ``U`` (m, k), ``s`` (k,), ``V`` (n, n) of what :func:`svd_into` wrote into
    the fields ``fU``, ``fs``, ``fV`` for an (m, n) matrix, ``k = min(m, n)``."""
    k = min(m, n)
    return _mat(w, fU, m, k), _vec(w, fs, k), _mat(w, fV, n, n)


def view(w, name, *shape):
    """A field of the workspace from Python: ``view(w, "U", m, k)`` (a view)."""
    if name in _INT_FIELDS:
        fld = _INT_FIELDS[name]
        o = int(w.i[fld])
        size = int(np.prod(shape)) if shape else int(w.i[fld + 1]) - o
        return w.i[o:o + size].reshape(shape) if shape else w.i[o:o + size]
    fld = _FLOAT_FIELDS[name]
    o = int(w.i[fld])
    size = int(np.prod(shape)) if shape else int(w.i[fld + 1]) - o
    return w.f[o:o + size].reshape(shape) if shape else w.f[o:o + size]


def field(w, fld):
    """The whole float field number ``fld`` of the workspace from Python (a view):
    ``field(w, fa)`` is the ``a`` of :func:`gauss_step`."""
    return w.f[int(w.i[fld]):int(w.i[fld + 1])]


_FLOAT_FIELDS = {"nu": F_nu, "An": F_An, "bn": F_bn, "X": F_X, "Q": F_Q, "R": F_R, "hv": F_hv, "tau": F_tau, "Y": F_Y, "W": F_W, "Vk": F_Vk, "norms": F_norms, "U": F_U, "s": F_s, "V": F_V, "beta": F_beta, "proj": F_proj, "MN": F_MN, "H": F_H, "LH": F_LH, "a": F_a, "a2": F_a2, "g": F_g, "z": F_z, "pp": F_pp, "e": F_e, "fk": F_fk, "Kk": F_Kk, "xk": F_xk, "lam": F_lam, "coef": F_coef, "U2": F_U2, "s2": F_s2, "V2": F_V2, "Al": F_Al, "bb": F_bb}
_INT_FIELDS = {"live": I_live, "order": I_order}


# --------------------------------------------------------------------------- small dense algebra
#: a sum of squares strictly between these is its norm's square to the same relative
#: accuracy as the scaled sum (:func:`_norm2`): below ``_SUMSQ_HI`` no square overflowed;
#: above ``_SUMSQ_LO`` the squares that fell below the normal range (each off by at
#: most 2^-1074 ~ 4.9e-324) change it by at most n 4.9e-324 / 1e-290, far below eps
_SUMSQ_LO = 1e-290
_SUMSQ_HI = 1e290

@_leaf
def _norm2(x):
    """Euclidean norm without underflow or overflow: the plain sum of squares where it
    is safe (:data:`_SUMSQ_LO` < sum < :data:`_SUMSQ_HI`), else scaled by the largest
    entry. Inlined where it is called: ``_norm2(A[i])`` then makes no row view that
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


@_leaf
def row_norms(A, out):
    """Euclidean norm of every row of ``A`` into ``out`` (no underflow: a row
    ``(1e-200, 1e-200)`` has the norm ``1.41e-200``, not 0)."""
    for i in range(A.shape[0]):
        out[i] = _norm2(A[i])


@_leaf
def _absmax2(M):
    """Largest ``|M[i, j]|`` of a matrix (0 for an empty one; NaN entries are skipped)."""
    big = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            ax = abs(M[i, j])
            if ax > big:
                big = ax
    return big


@_leaf
def _frobenius(M):
    """Frobenius norm of ``M`` without underflow or overflow (as :func:`_norm2`)."""
    acc = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            acc += M[i, j] * M[i, j]
    if _SUMSQ_LO < acc < _SUMSQ_HI:
        return math.sqrt(acc)
    scale = _absmax2(M)
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
def _forward(L, B):
    """Solve ``L X = B`` in place (``L`` lower triangular, ``B`` (n, k))."""
    n, k = B.shape
    for c in range(k):
        for i in range(n):
            s = B[i, c]
            for j in range(i):
                s -= L[i, j] * B[j, c]
            B[i, c] = s / L[i, i]


@_leaf
def _forward1(L, x):
    """Solve ``L y = x`` in place for a vector."""
    n = x.shape[0]
    for i in range(n):
        s = x[i]
        for j in range(i):
            s -= L[i, j] * x[j]
        x[i] = s / L[i, i]


@_leaf
def _backward_t(L, x):
    """Solve ``L^T x = y`` in place for a vector."""
    n = x.shape[0]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= L[j, i] * x[j]
        x[i] = s / L[i, i]


@_leaf
def _householder_qr(X, full, Q, R, V, tau):
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
        else:                                  # (as _norm2: scaled where it must be)
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
def _jacobi(Y, W):
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
    """:func:`svd_into` the fields ``U``, ``s``, ``V`` of ``w``; returns views ``U`` (m, k),
    ``s`` (k,), ``V`` (n, n) of them."""
    svd_into(X, w, F_U, F_s, F_V)
    return _svd_views(w, F_U, F_s, F_V, X.shape[0], X.shape[1])


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


@_unit("none(f8m, w, i8, i8, i8)")
def svd_into(X, w, fU, fs, fV):
    """SVD ``X = U diag(s) V[:, :k]^T`` of a small dense ``X`` (m, n) in the workspace
    ``w`` (sized for at least ``(n, m)``): writes ``U`` (m, k), ``s`` (k,)
    descending and the *full* orthogonal ``V`` (n, n) (its first ``k`` columns the
    right singular vectors, the others an orthonormal basis of the rest of
    ``R^n``) into the fields ``fU``, ``fs``, ``fV`` (views: :func:`_svd_views`;
    :func:`svd` returns them). Householder QR of ``X`` or ``X^T`` (whichever is tall), then
    one-sided Jacobi on the ``k x k`` triangular factor, ``k = min(m, n)``
    (LAPACK's ``gesdd`` from :data:`LAPACK_MIN` singular values on).
    Columns of ``U`` for exactly zero singular values are zero."""
    m, n = X.shape
    k = min(m, n)
    U = _mat(w, fU, m, k)
    s = _vec(w, fs, k)
    V = _mat(w, fV, n, n)
    if k == 0:
        for i in range(n):
            for j in range(n):
                V[i, j] = 1.0 if i == j else 0.0
        return
    if k >= LAPACK_MIN:
        _svd_lapack(X, U, s, V)
        return
    # Jacobi's sums of squares and their products overflow for entries beyond ~1e76 and
    # underflow below ~1e-150 (then it returns wrong singular values, silently): the
    # matrix is scaled by a power of two (exact) into [0.5, 1) outside [2^-200, 2^200]
    amax = _absmax2(X)
    e = 0                 # (ldexp, not a factor: 2^-e overflows for subnormal entries)
    if np.isfinite(amax) and amax > 0.0 and not (_SVD_LO <= amax <= _SVD_HI):
        e = math.frexp(amax)[1]
    R = _mat(w, F_R, k, k)
    Y = _mat(w, F_Y, k, k)
    W = _mat(w, F_W, k, k)
    tau = _vec(w, F_tau, k)
    # X^T = Q1 R (m <= n) or X = Q1 R, by one Householder QR of the tall one (one call
    # site: each is compiled into this function once)
    tall = m <= n
    p = n if tall else m
    Z = _mat(w, F_X, p, k)
    for i in range(p):
        for j in range(k):
            x = X[j, i] if tall else X[i, j]
            Z[i, j] = x if e == 0 else math.ldexp(x, -e)
    Q = _mat(w, F_Q, p, p if tall else k)
    _householder_qr(Z, tall, Q, R, _mat(w, F_hv, p, k), tau)
    for i in range(k):
        for j in range(k):
            Y[i, j] = R[j, i] if tall else R[i, j]                  # R^T W = Y, or R W = Y
    _jacobi(Y, W)
    Vk = _mat(w, F_Vk, n, k)
    if tall:                                                       # X = Uc S (Q1 W)^T
        for i in range(n):
            for j in range(k):
                acc = 0.0
                for l in range(k):
                    acc += Q[i, l] * W[l, j]
                Vk[i, j] = acc
            for j in range(k, n):
                V[i, j] = Q[i, j]                                  # the rest of Q
    else:
        for i in range(n):
            for j in range(k):
                Vk[i, j] = W[i, j]
    norms = _vec(w, F_norms, k)
    for j in range(k):
        norms[j] = _norm2(Y[:, j])
    order = _ivec(w, I_order, k)
    for j in range(k):
        order[j] = j
    for j in range(1, k):                       # descending (insertion sort: k is small)
        x = order[j]
        i = j - 1
        while i >= 0 and norms[order[i]] < norms[x]:
            order[i + 1] = order[i]
            i -= 1
        order[i + 1] = x
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


@_jit
def svd_econ(X):
    """:func:`svd` with a workspace of its own: returns copies ``U`` (m, k), ``s``,
    ``V`` (n, n)."""
    m, n = X.shape
    w = _make_work(n, m)
    U, s, V = svd(X, w)
    return U.copy(), s.copy(), V.copy()


# --------------------------------------------------------------------------- the rank decision
@_unit("Tuple((i8, i8, i8, f8))(f8m, f8v, f8v, f8, f8, b1, w)")
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
    ``U`` (mL, k), ``V`` (n, n) (``V_r = V[:, :r]``, ``N = V[:, r:]``), ``beta`` (r,).
    """
    m, n = A.shape
    nu = _vec(w, F_nu, m)
    row_norms(A, nu)
    live = _ivec(w, I_live, m)
    mL = 0
    for i in range(m):
        rf = ref[i] if ref[i] > 0.0 else nu[i]
        live[i] = nu[i] > 0.0 and (keep_vanished or nu[i] > rank_tol * rf)
        if live[i]:
            mL += 1
    An = _mat(w, F_An, mL, n)
    bn = _vec(w, F_bn, mL)
    j = 0
    for i in range(m):
        if live[i]:
            inv = 1.0 / nu[i]
            for c in range(n):
                An[j, c] = A[i, c] * inv
            bn[j] = b[i] * inv
            j += 1
    svd_into(An, w, F_U, F_s, F_V)
    U, s, _ = _svd_views(w, F_U, F_s, F_V, mL, n)
    k = s.shape[0]
    thr = max(rank_tol, FOLD_TOL * sig_ref)
    r = 0
    for kk in range(k):
        if s[kk] > thr:
            r += 1
    beta = _vec(w, F_beta, r)
    proj = _vec(w, F_proj, mL)
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
    return mL, r, k, _norm2(proj)


# --------------------------------------------------------------------------- solves
@_unit("none(f8m, f8v, f8, i8, i8, w)")
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
    V = _mat(w, F_V, n, n)
    beta = _full(w, F_beta)
    a = _full(w, F_a)
    for i in range(n):
        acc = 0.0
        for kk in range(r):
            acc += V[i, kk] * beta[kk]
        a[i] = acc
    if d == 0:
        return
    g = _full(w, F_g)
    for i in range(n):                              # (F - M a_p) / w
        acc = F[i]
        for j in range(n):
            acc -= M[i, j] * a[j]
        g[i] = acc / wgt
    z = _vec(w, F_z, d)
    for kk in range(d):
        acc = 0.0
        for i in range(n):
            acc += V[i, r + kk] * g[i]
        z[kk] = acc
    LH = _mat(w, F_LH, d, d)
    _forward1(LH, z)
    _backward_t(LH, z)
    for i in range(n):
        acc = a[i]
        for kk in range(d):
            acc += V[i, r + kk] * z[kk]
        a[i] = acc


@unit("b1(f8m, f8v, f8, i8, w)", lazy=True, nogil=True, _nrt=False)
def kkt_lu(M, F, wgt, r, w):
    """Lagrange's equations of the first kind on the reduced rows: the KKT system
    ``[[M/w, V_r], [V_r^T, 0]] [a; mu] = [F/w; beta]`` by LU with partial
    pivoting. Writes ``a`` into ``w``'s ``a2``; returns False on a zero pivot."""
    n = M.shape[0]
    N = n + r
    K = _mat(w, F_Kk, N, N)
    x = _vec(w, F_xk, N)
    V = _mat(w, F_V, n, n)
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
        x[n + kk] = _full(w, F_beta)[kk]
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
        _full(w, F_a2)[i] = x[i]
    return True


# --------------------------------------------------------------------------- verification
@_unit("UniTuple(f8, 2)(f8m, f8v, f8v, i8, i8, i8, w)")
def verify(M, F, a, mL, r, k, w):
    """Backward errors of ``a`` in the optimality conditions (module docstring, item 3).

    Returns ``(be_f, be_s)``: ``|U_r^T (An a - bn)| / (s_1 |a| + |bn|)``
    (feasibility of the kept directions: the relative perturbation of the
    normalized rows and right-hand side that ``a`` satisfies exactly) and
    ``|(I - V_r V_r^T)(M a - F)| / (|M|_F |a| + |F|)`` (stationarity: ``M a - F``
    in the span of the kept rows).
    """
    n = M.shape[0]
    V = _mat(w, F_V, n, n)
    U = _mat(w, F_U, mL, k)
    An = _mat(w, F_An, mL, n)
    bn = _vec(w, F_bn, mL)
    na = _norm2(a)
    g = _full(w, F_g)
    for i in range(n):
        acc = -F[i]
        for j in range(n):
            acc += M[i, j] * a[j]
        g[i] = acc
    p = _full(w, F_pp)
    for i in range(n):
        p[i] = g[i]
    for kk in range(r):
        d = 0.0
        for i in range(n):
            d += V[i, kk] * g[i]
        for i in range(n):
            p[i] -= d * V[i, kk]
    den = _frobenius(M) * na + _norm2(F)
    ps = _norm2(p)
    be_s = ps / den if den > 0.0 else (0.0 if ps == 0.0 else np.inf)
    e = _vec(w, F_e, mL)
    for i in range(mL):
        acc = -bn[i]
        for j in range(n):
            acc += An[i, j] * a[j]
        e[i] = acc
    f = _vec(w, F_fk, r)
    for kk in range(r):
        acc = 0.0
        for i in range(mL):
            acc += U[i, kk] * e[i]
        f[kk] = acc
    s1 = _full(w, F_s)[0] if k > 0 else 1.0
    den = s1 * na + _norm2(bn)
    pf = _norm2(f)
    be_f = pf / den if den > 0.0 else (0.0 if pf == 0.0 else np.inf)
    return be_f, be_s


@_unit("none(f8m, f8v, f8v, f8m, i8, i8, i8, w)")
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
    g = _full(w, F_g)
    for i in range(n):
        acc = -F[i]
        for j in range(n):
            acc += M[i, j] * a[j]
        g[i] = acc
    lam = _vec(w, F_lam, m)
    for i in range(m):
        lam[i] = 0.0
    live = _ivec(w, I_live, m)
    nu = _full(w, F_nu)
    coef = _full(w, F_coef)
    if r == mL:
        V = _mat(w, F_V, n, n)
        U = _mat(w, F_U, mL, k)
        for kk in range(r):
            acc = 0.0
            for i in range(n):
                acc += V[i, kk] * g[i]
            coef[kk] = acc / _full(w, F_s)[kk]
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
    Al = _mat(w, F_Al, mL, n)
    j = 0
    for i in range(m):
        if live[i]:
            for c in range(n):
                Al[j, c] = A[i, c]
            j += 1
    svd_into(Al, w, F_U2, F_s2, F_V2)
    U2, s2, V2 = _svd_views(w, F_U2, F_s2, F_V2, mL, n)
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


@_leaf
def _finite1(x):
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


@_leaf
def _finite2(X):
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            if not np.isfinite(X[i, j]):
                return False
    return True


@_unit("f8(f8m, f8, w)")
def smallest_live_sigma(A, rank_tol, w):
    """The smallest singular value above ``rank_tol`` of the normalized nonzero rows
    of ``A`` (``inf`` without any): what :func:`reduce_rows`'s ``sig_ref`` follows."""
    m = A.shape[0]
    z = _vec(w, F_e, m)             # a zero right-hand side and references
    for i in range(m):
        z[i] = 0.0
    mL, r, k, c_norm = reduce_rows(A, z, z, 0.0, rank_tol, True, w)
    return _full(w, F_s)[r - 1] if r > 0 else np.inf


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


@_unit("Tuple((i8, f8, i8, i8, i8, f8, f8, i8))(f8m, f8m, f8v, f8v, f8, f8, w)")
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
    n = M.shape[0]
    m = A.shape[0]
    tr = 0.0
    for i in range(n):
        tr += M[i, i]
    wgt = tr / n if tr > 0.0 else 1.0
    flags = 0
    keep = False
    while True:
        mL, r, k, c_norm = reduce_rows(A, b, ref, sig_ref, rank_tol, keep, w)
        d = n - r
        V = _mat(w, F_V, n, n)
        MN = _mat(w, F_MN, n, d)
        for i in range(n):
            for kk in range(d):
                acc = 0.0
                for j in range(n):
                    acc += M[i, j] * V[j, r + kk]
                MN[i, kk] = acc / wgt
        H = _mat(w, F_H, d, d)
        for p in range(d):
            for q in range(p, d):
                acc = 0.0
                for i in range(n):
                    acc += V[i, r + p] * MN[i, q]
                H[p, q] = acc
                H[q, p] = acc
        LH = _mat(w, F_LH, d, d)
        dmin = cholesky(H, LH) if d > 0 else np.inf
        if dmin >= rank_tol * rank_tol:
            return OK, wgt, mL, r, k, c_norm, dmin, flags
        vanished_nonzero = False
        for i in range(m):
            if not _ivec(w, I_live, m)[i] and _full(w, F_nu)[i] > 0.0:
                vanished_nonzero = True
        if keep or not vanished_nonzero:
            return INDETERMINATE, wgt, mL, r, k, c_norm, dmin, flags
        keep = True
        flags |= 2


@_unit("Tuple((i8, f8, f8, f8))(f8m, f8v, f8m, f8v, f8v, f8, i8, i8, i8, f8, f8v, w)")
def check(M, F, A, b, ref, rank_tol, mL, r, k, c_norm, a, w):
    """Everything a result ``a`` must satisfy, after any solver.

    Returns ``(status, rho, allow, be)``: :data:`OK`, :data:`INCONSISTENT`
    (the relative inconsistency ``rho = |bn - U_r U_r^T bn| / (|bn| + |a|)``
    exceeds what rounding explains, ``allow``) or
    :data:`INCONSISTENT_VANISHED` (a vanished row has a right-hand side that
    does not vanish); ``be`` the backward error of ``a`` (:func:`verify`).
    """
    n = M.shape[0]
    m = A.shape[0]
    be_f, be_s = verify(M, F, a, mL, r, k, w)
    be = max(be_f, be_s)
    na = _norm2(a)
    nbn = _norm2(_vec(w, F_bn, mL))
    rho = c_norm / (nbn + na) if nbn + na > 0.0 else 0.0
    allow = inconsistency_allowance(_vec(w, F_s, k), rank_tol, n, mL)
    if rho > allow:
        return INCONSISTENT, rho, allow, be
    root = math.sqrt(rank_tol)
    for i in range(m):
        if not _ivec(w, I_live, m)[i]:
            acc = -b[i]
            for j in range(n):
                acc += A[i, j] * a[j]
            rf = ref[i] if ref[i] > _full(w, F_nu)[i] else _full(w, F_nu)[i]
            if abs(acc) > root * (rf * na + abs(b[i])) + _TINY:
                return INCONSISTENT_VANISHED, rho, allow, be
    return OK, rho, allow, be


@_leaf
def direct_tolerance(n, m):
    """Backward error a direct (LU, Cholesky, SVD) solve must reach: ``16 (n + m + 1) eps``."""
    return 16.0 * (n + m + 1) * _EPS


@_unit("Tuple((i8, i8, i8, i8, i8, f8, f8, f8, f8, i8))(f8m, f8v, f8m, f8v, f8v, f8, f8, i8, b1, b1, w)")
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
    dmin : smallest Cholesky pivot of the reduced Hessian
    flags : bit 1 the KKT result failed its verification and the closed form
    was used; bit 2 vanished rows kept (:func:`decide`).
    """
    n = M.shape[0]
    if not (_finite2(M) and _finite1(F) and _finite2(A) and _finite1(b)):
        return NONFINITE, F_a, 0, 0, 0, 0.0, 0.0, np.inf, 0.0, 0
    if check_symmetry and asymmetric(M):
        return NONSYMMETRIC, F_a, 0, 0, 0, 0.0, 0.0, np.inf, 0.0, 0
    status, wgt, mL, r, k, c_norm, dmin, flags = decide(M, A, b, ref, sig_ref, rank_tol, w)
    if status != OK:
        return status, F_a, r, mL, k, 0.0, 0.0, np.inf, dmin, flags
    tol = direct_tolerance(n, mL)
    closed_form(M, F, wgt, mL, r, w)
    fa = F_a
    if method == LAGRANGE:
        ok = kkt_lu(M, F, wgt, r, w)
        bf, bs = verify(M, F, _full(w, F_a2), mL, r, k, w)
        if ok and max(bf, bs) <= tol:
            fa = F_a2
        else:
            flags |= 1
    a = _full(w, fa)
    status, rho, allow, be = check(M, F, A, b, ref, rank_tol, mL, r, k, c_norm, a, w)
    if status == OK and not be <= tol:
        status = UNVERIFIED
    if status == OK and want_lam:
        multipliers(M, F, a, A, mL, r, k, w)
    return status, fa, r, mL, k, rho, allow, be, dmin, flags
