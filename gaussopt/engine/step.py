"""The step as the engine takes it: the model's functions called through their
pointers, Baumgarte's correction, and :func:`evaluate_step` (the O(n) path of
:mod:`gaussopt.sparse` where the model has one, else the dense kernel)."""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .. import kernel as K
from .. import sparse as SP
from ..compiled import jit, unit
from ..model import _function_at, data_ptr
from .records import *  # noqa: F401,F403 - the indices and codes of the records


#: the large functions are units (:mod:`gaussopt.compiled`: compiled once, called
#: through a pointer), the small ones ordinary compiled functions (``_nrt=True``
#: explicitly: a function without the option inherits its caller's)
_jit = jit(cache=True, _nrt=True)


def _unit(signature: str, lazy: bool = False):
    return unit(signature, lazy=lazy, _nrt=True)


_EPS = float(np.finfo(float).eps)




# --------------------------------------------------------------------------- model calls
# (element loops and data pointers: a slice assignment or ``.ctypes`` costs reference
# counting of the arrays involved, see the module docstring)
@_jit
def axpy(x, a, y):
    """``x + a y``, a new array (a loop: numba compiles an array expression into much
    more code)."""
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = x[i] + a * y[i]
    return out


@_jit
def _put(dst, src):
    for i in range(src.shape[0]):
        dst[i] = src[i]


@_jit
def _matrix(x, r, c):
    """The flat buffer ``x`` as an ``(r, c)`` matrix (a view: :func:`gaussopt.kernel.as_matrix`;
    C-contiguous like the arrays Python passes, so the kernel is compiled once for both)."""
    return K.as_matrix(x[:r * c], r, c)


@_jit
def call_dyn(fns, md, buf, t, q, v):
    _put(buf.q, q)
    _put(buf.v, v)
    return fns[0](t, data_ptr(buf.q), data_ptr(buf.v), data_ptr(md.p), data_ptr(buf.M),
                  data_ptr(buf.F))


@_jit
def call_rows(fns, md, buf, t, q, v):
    _put(buf.q, q)
    _put(buf.v, v)
    return fns[1](t, data_ptr(buf.q), data_ptr(buf.v), data_ptr(md.p), data_ptr(buf.A),
                  data_ptr(buf.b))


@_jit
def call_pos(fns, md, buf, t, q):
    _put(buf.q, q)
    return fns[2](t, data_ptr(buf.q), data_ptr(md.p), data_ptr(buf.phi), data_ptr(buf.J),
                  data_ptr(buf.phit))


@_jit
def call_vel(fns, md, buf, t, q, v):
    _put(buf.q, q)
    _put(buf.v, v)
    return fns[3](t, data_ptr(buf.q), data_ptr(buf.v), data_ptr(md.p), data_ptr(buf.r),
                  data_ptr(buf.Jv))


@_jit
def call_energy(fns, md, buf, t, q, v):
    _put(buf.q, q)
    _put(buf.v, v)
    return fns[4](t, data_ptr(buf.q), data_ptr(buf.v), data_ptr(md.p), data_ptr(buf.e),
                  data_ptr(buf.e))


@_jit
def call_accel(accel, md, buf, t, q, v):
    _put(buf.q, q)
    _put(buf.v, v)
    return accel(t, data_ptr(buf.q), data_ptr(buf.v), data_ptr(md.p), data_ptr(buf.a),
                 data_ptr(buf.a))


@_unit("i8(md, buf, f8, f8v, f8v)", lazy=True)
def call_sp_dyn(md, buf, t, q, v):
    """The sparse model's ``d`` (diagonal of M) and ``F`` into ``md.band.w``."""
    _put(buf.q, q)
    _put(buf.v, v)
    w = md.band.w
    return _function_at(md.band.addrs[0])(t, data_ptr(buf.q), data_ptr(buf.v),
                                         data_ptr(md.band.p), data_ptr(w.d), data_ptr(w.F))


@_unit("i8(md, buf, f8, f8v, f8v)", lazy=True)
def call_sp_rows(md, buf, t, q, v):
    """The sparse model's rows (``data`` in the pattern) and ``b`` into ``md.band.w``."""
    _put(buf.q, q)
    _put(buf.v, v)
    w = md.band.w
    return _function_at(md.band.addrs[1])(t, data_ptr(buf.q), data_ptr(buf.v),
                                         data_ptr(md.band.p), data_ptr(w.data), data_ptr(w.b))


# --------------------------------------------------------------------------- the step
@_unit("i8(fns, md, buf, opt, f8, f8v, f8v, f8v)", lazy=True)
def baumgarte(fns, md, buf, opt, t, q, v, b):
    """``b -= alpha Phi' + beta Phi`` on holonomic rows, ``gamma f`` on nonholonomic."""
    n = md.dims[D_N]
    mh = md.dims[D_MH]
    mv = md.dims[D_MV]
    alpha, beta, gam = opt.f[F_ALPHA], opt.f[F_BETA], opt.f[F_GAMMA]
    if mh > 0:
        st = call_pos(fns, md, buf, t, q)
        if st != 0:
            return st
        J = buf.J.reshape(mh, n)
        for k in range(mh):
            acc = buf.phit[k]
            for j in range(n):
                acc += J[k, j] * v[j]
            b[md.hol_rows[k]] -= alpha * acc + beta * buf.phi[k]
    if mv > mh:
        st = call_vel(fns, md, buf, t, q, v)
        if st != 0:
            return st
        for k in range(mv):
            if not md.vel_is_hol[k]:
                b[md.vel_rows[k]] -= gam * buf.r[k]
    return 0



# --------------------------------------------------------------------------- folds
#: relative size (of a dropped direction's singular value ``s_1``-scaled) above which a
#: dropped direction is a *vanishing* one (a folded configuration being approached or
#: left), not an exact redundancy: the rounding floor of the normalized rows' SVD,
#: as in :func:`gaussopt.kernel.inconsistency_allowance`
_FOLD_FLOOR = 64.0
#: a fold row's singular value (rows scaled by their gradient along the motion,
#: Euclidean in the null space) below which it is not used: at the folded
#: configuration the rows do not act on the tangent of the branch at all (the second
#: order conditions of the branch), inside the window of dropped directions they act
#: on it at the relative size of the dropped singular value (``<= FOLD_TOL``) and
#: with the finite differences' error (``~1e-10``); a fold row that restrains the
#: shaky mode acts on it at order one
_FOLD_SIG = 1e-3


@_jit
def _fold_values(fns, md, buf, t, q, v, x, U, h, rest):
    """The fold rows' values at the acceleration ``x`` (one per column of ``U``, the
    dropped directions in original row scaling), and the rows' scales.

    Moving (``rest`` False): ``L_j(x) = d/dtau u_j^T (A x - b)`` along
    ``(q + tau v, v + tau x, t + tau)`` (central differences, step ``h``): the
    derivative of the dropped combination of the acceleration rows along the motion,
    which the true motion satisfies exactly at the folded configuration (there
    ``u_j^T A = 0``; nearby up to ``s_j`` times the rate of the shaky acceleration).
    At rest (``v = 0``): ``P_j(x) = u_j^T (b(q, x) + b(q, -x)) / 2 - u_j^T b(q, 0)``,
    minus the quadratic part of ``u_j^T b`` (``u_j^T Phi_qq(x, x)``): from rest at a
    folded configuration ``q + x tau^2 / 2`` stays on the joints only if it vanishes.
    Scales: ``|u_j^T dA/dtau|`` along ``v`` (along ``x`` at rest), the size of the
    rows' gradients. Returns ``(status, values, scales)``."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    nd = U.shape[1]
    val = np.zeros(nd)
    scl = np.zeros(nd)
    dA = np.zeros((nd, n))
    # (the rows' values u_j^T (A x - b) moving, u_j^T b at rest; the rows' change along
    # the motion for the scales)
    for sgn in range(3 if rest else 2):
        sg = 1.0 if sgn == 0 else (-1.0 if sgn == 1 else 0.0)
        if rest:
            st = call_rows(fns, md, buf, t, q, axpy(v, sg, x))
        else:
            st = call_rows(fns, md, buf, t + sg * h, axpy(q, sg * h, v), axpy(v, sg * h, x))
        if st != 0:
            return st, val, scl
        A = buf.A.reshape(m, n)
        for j in range(nd):
            acc = 0.0
            for i in range(m):
                u = U[i, j]
                if u != 0.0:
                    if rest:
                        acc += u * buf.b[i]
                    else:
                        r_ = -buf.b[i]
                        for c in range(n):
                            r_ += A[i, c] * x[c]
                            dA[j, c] += sg * u * A[i, c]
                        acc += u * r_
            if rest:
                val[j] += 0.5 * acc if sgn < 2 else -acc
            else:
                val[j] += sg * acc / (2.0 * h)
    if rest:
        for sgn in range(2):
            sg = 1.0 if sgn == 0 else -1.0
            st = call_rows(fns, md, buf, t, axpy(q, sg * h, x), v)
            if st != 0:
                return st, val, scl
            A = buf.A.reshape(m, n)
            for j in range(nd):
                for i in range(m):
                    if U[i, j] != 0.0:
                        for c in range(n):
                            dA[j, c] += sg * U[i, j] * A[i, c]
    for j in range(nd):
        scl[j] = K._norm2(dA[j]) / (2.0 * h)
    return 0, val, scl


@_jit
def fold_rows(fns, md, buf, t, q, v, a, M, r, mL, k, w):
    """The acceleration at a folded configuration: the Gauss step with the dropped
    directions restrained by their higher-order rows (in place in ``a``).

    Near a folded configuration of a redundant linkage the rows lose a direction
    (a singular value of the normalized rows passes through zero); the step drops it
    (:func:`gaussopt.kernel.reduce_rows`), and then the "shaky" mode it spans is free
    to first order: the minimum-constraint acceleration along it is the exact one
    only by symmetry. The true motion keeps the dropped combination
    ``u^T (A a - b)`` at zero along the motion; its derivative is a row in ``a``
    that stays well conditioned through the fold (:func:`_fold_values`; at rest the
    second-order condition, solved by Newton). The step is the Gauss step with these
    rows added: ``a + N z`` with ``z`` of least ``z^T (N^T M N) z`` (the increase of
    the constraint) satisfying the significant fold rows (``N`` the null space of the
    kept rows, which the added rows do not change). Rows that do not act on the null
    space (the exactly redundant rows at a regular configuration, the branch's
    tangent at a fold) are left out (:data:`_FOLD_SIG`).

    Returns the status: 0 (``a`` corrected or left as it was: no dropped direction
    that vanishes), :data:`MODEL_FAILED`, or :data:`gaussopt.kernel.INDETERMINATE`
    (the fold rows contradict each other in the null space).
    """
    n = md.dims[D_N]
    m = md.dims[D_M]
    d = n - r
    if d <= 0 or r >= k:
        return 0
    s = K._full(w, K.F_s)
    rest = True
    for i in range(n):
        if v[i] != 0.0:
            rest = False
    # the dropped directions restrained: those that vanish (above the rounding floor);
    # from rest every dropped one (at rest at a folded configuration both are at it)
    floor = _FOLD_FLOOR * (n + mL) * _EPS * (s[0] if k > 0 else 1.0)
    nd = 0
    for j in range(r, k):
        if rest or s[j] > floor:
            nd += 1
    if nd == 0:
        return 0
    Uw = K._mat(w, K.F_U, mL, k)
    V = K._mat(w, K.F_V, n, n)
    live = K._ivec(w, K.I_live, m)
    nu = K._full(w, K.F_nu)
    U = np.zeros((m, nd))
    jj = 0
    for j in range(r, k):
        if rest or s[j] > floor:
            li = 0
            for i in range(m):
                if live[i]:
                    U[i, jj] = Uw[li, j] / nu[i]
                    li += 1
            jj += 1
    N = np.empty((n, d))
    for i in range(n):
        for c in range(d):
            N[i, c] = V[i, r + c]
    LH = K._mat(w, K.F_LH, d, d).copy()
    a0 = a.copy()
    z = np.zeros(d)
    qs = 1.0
    an = 0.0
    vn = 0.0
    for i in range(n):
        qs = max(qs, abs(q[i]))
        an = max(an, abs(a[i]))
        vn = max(vn, abs(v[i]))
    delta = 1e-5 * qs
    iters = 6 if rest else 1
    x = a0.copy()
    for it in range(iters):
        h = delta / (an + 1e-300) if rest else delta / (vn + math.sqrt(delta * an) + 1e-300)
        st, L0, scl = _fold_values(fns, md, buf, t, q, v, x, U, h, rest)
        if st != 0:
            return MODEL_FAILED
        # the rows' action on the null space (exact differences: the rows are affine in
        # x when moving, quadratic at rest)
        sx = 1.0 + an
        G = np.zeros((nd, d))
        for c in range(d):
            xp = x.copy()
            xm = x.copy()
            for i in range(n):
                xp[i] += sx * N[i, c]
                xm[i] -= sx * N[i, c]
            st, Lp, _s = _fold_values(fns, md, buf, t, q, v, xp, U, h, rest)
            if st != 0:
                return MODEL_FAILED
            st, Lm, _s = _fold_values(fns, md, buf, t, q, v, xm, U, h, rest)
            if st != 0:
                return MODEL_FAILED
            for j in range(nd):
                G[j, c] = (Lp[j] - Lm[j]) / (2.0 * sx)
        # linearized rows G z = G z_k - L(x_k), scaled by the rows' gradients
        Gs = np.zeros((nd, d))
        gs = np.zeros(nd)
        for j in range(nd):
            sj = scl[j] if scl[j] > 0.0 else 1.0
            acc = -L0[j]
            for c in range(d):
                acc += G[j, c] * z[c]
                Gs[j, c] = G[j, c] / sj
            gs[j] = acc / sj
        Ug, sg, Vg = K.svd_econ(Gs)
        p = 0
        for c in range(sg.shape[0]):
            if sg[c] > _FOLD_SIG:
                p += 1
        if p == 0:
            break
        # min z^T H z subject to the p significant rows: with H / wgt = LH LH^T,
        # X = LH^-1 Gp^T, z = LH^-T X (X^T X)^-1 gp
        X = np.zeros((d, p))
        gp = np.zeros(p)
        for c in range(p):
            acc = 0.0
            for j in range(nd):
                acc += Ug[j, c] * gs[j]
            gp[c] = acc
            for i in range(d):
                X[i, c] = sg[c] * Vg[i, c]
        K._forward(LH, X)
        S = np.zeros((p, p))
        for c1 in range(p):
            for c2 in range(p):
                acc = 0.0
                for i in range(d):
                    acc += X[i, c1] * X[i, c2]
                S[c1, c2] = acc
        LS = np.zeros((p, p))
        if not K.cholesky(S, LS) > 0.0:
            return K.INDETERMINATE
        K._forward1(LS, gp)
        K._backward_t(LS, gp)
        zn = np.zeros(d)
        for i in range(d):
            acc = 0.0
            for c in range(p):
                acc += X[i, c] * gp[c]
            zn[i] = acc
        K._backward_t(LH, zn)
        moved = 0.0
        for c in range(d):
            moved = max(moved, abs(zn[c] - z[c]))
            z[c] = zn[c]
        for i in range(n):
            acc = a0[i]
            for c in range(d):
                acc += N[i, c] * z[c]
            x[i] = acc
        if moved <= 1e-12 * (1.0 + an):
            break
    for i in range(n):
        a[i] = x[i]
    # the rows of (t, q, v) back in the buffers (the callers read them after the step)
    if call_rows(fns, md, buf, t, q, v) != 0:
        return MODEL_FAILED
    return 0


@_unit("Tuple((i8, i8, i8, i8, f8, f8, f8, i8))(fns, fn, md, buf, opt, f8v, f8v, f8, f8v, f8v, f8v, b1, w)")
def evaluate_step(fns, accel, md, buf, opt, ref, sref, t, q, v, a, want_lam, w):
    """The accelerations ``a`` at ``(t, q, v)`` (in place), with the kernel workspace ``w``.

    Returns ``(status, r, mL, k, rho, allow, be, flags)`` (the kernel's, see
    :func:`gaussopt.kernel.gauss_step`; multipliers in ``w``'s ``lam``, singular
    values in its ``s``: :func:`gaussopt.kernel.view`); status 0, a kernel status or :data:`MODEL_FAILED`.

    A model with an O(n) path (``md.band.mode``) takes it first
    (:func:`gaussopt.sparse.sparse_step`, without Baumgarte's correction): an answer
    has ``flags`` with :data:`gaussopt.sparse.SPARSE_FLAG`, rank ``m``, no singular
    values (``k = 0``), its data in ``md.band.w`` (not in ``buf``: :func:`uses_sparse`);
    any refusal goes to the dense kernel, which then decides as everywhere else.
    """
    n = md.dims[D_N]
    m = md.dims[D_M]
    solver = opt.i[I_SOLVER]
    if solver == 2:
        st = call_accel(accel, md, buf, t, q, v)
        if st != 0:
            return MODEL_FAILED, 0, 0, 0, 0.0, 0.0, 0.0, 0
        _put(a, buf.a)
        return 0, 0, 0, 0, 0.0, 0.0, 0.0, 0
    if md.band.mode != SP.MODE_NONE and opt.i[I_STAB] != STAB_BAUMGARTE:
        if call_sp_dyn(md, buf, t, q, v) != 0 or call_sp_rows(md, buf, t, q, v) != 0:
            return MODEL_FAILED, 0, 0, 0, 0.0, 0.0, 0.0, 0
        status, be, iters = SP.sparse_step(md.band.sp, md.band.w, ref, sref[0], opt.f[F_RANKTOL],
                                           want_lam)
        if status == SP.OK:
            _put(a, md.band.w.a)
            if want_lam:
                _put(K._vec(w, K.F_lam, m), md.band.w.lam)
            return 0, m, m, 0, 0.0, math.sqrt(opt.f[F_RANKTOL]), be, SP.SPARSE_FLAG
    st = call_dyn(fns, md, buf, t, q, v)
    if st == 0 and m > 0:
        st = call_rows(fns, md, buf, t, q, v)
    if st != 0:
        return MODEL_FAILED, 0, 0, 0, 0.0, 0.0, 0.0, 0
    b = buf.b
    if opt.i[I_STAB] == STAB_BAUMGARTE and m > 0:
        b = K._vec(w, K.F_bb, m)       # (buf.b stays the constraints' own: see sample)
        _put(b, buf.b)
        st = baumgarte(fns, md, buf, opt, t, q, v, b)
        if st != 0:
            return MODEL_FAILED, 0, 0, 0, 0.0, 0.0, 0.0, 0
    (status, fa, r, mL, k, rho, allow, be, dmin,
     flags) = K.gauss_step(_matrix(buf.M, n, n), buf.F, _matrix(buf.A, m, n), b, ref, sref[0],
                           opt.f[F_RANKTOL], solver, want_lam, opt.i[I_CHECKSYM] != 0, w)
    _put(a, K._full(w, fa))
    if status == 0 and r < k and solver != 2:
        # a dropped direction that vanishes (a folded configuration): restrained by its
        # higher-order rows (:func:`fold_rows`); the multipliers of the corrected step
        fs = fold_rows(fns, md, buf, t, q, v, a, _matrix(buf.M, n, n), r, mL, k, w)
        if fs != 0:
            return fs, r, mL, k, rho, allow, be, flags
        if want_lam:
            K.multipliers(_matrix(buf.M, n, n), buf.F, a, _matrix(buf.A, m, n), mL, r, k, w)
    return status, r, mL, k, rho, allow, be, flags


@jit(cache=True, _nrt=True)
def sparse_step_at(md, buf, ref, sig_ref, rank_tol, t, q, v, want_lam):
    """The O(n) path alone at ``(t, q, v)``: its status (:data:`gaussopt.sparse.STATUS`;
    0 answered, the result in ``md.band.w``), for tests of its refusals."""
    if call_sp_dyn(md, buf, t, q, v) != 0 or call_sp_rows(md, buf, t, q, v) != 0:
        return SP.MODEL_FAILED
    return SP.sparse_step(md.band.sp, md.band.w, ref, sig_ref, rank_tol, want_lam)[0]


@_jit
def uses_sparse(flags):
    """The step was answered by the O(n) path (its data in ``md.band.w``, not ``buf``)."""
    return (flags & SP.SPARSE_FLAG) != 0


@_unit("f8(md, f8v, f8v, f8v)", lazy=True)
def band_force(md, a, out_qc, res):
    """After a step on the O(n) path: the constraint force ``M a - F`` into ``out_qc``
    and the residual ``A a - b`` into ``res`` from the sparse data; returns ``|res|``."""
    sp = md.band.sp
    w = md.band.w
    for i in range(md.dims[D_N]):
        out_qc[i] = w.d[i] * a[i] - w.F[i]
    for i in range(md.dims[D_M]):
        acc = -w.b[i]
        for k in range(sp.indptr[i], sp.indptr[i + 1]):
            acc += w.data[k] * a[sp.indices[k]]
        res[i] = acc
    return K._norm2(res)
