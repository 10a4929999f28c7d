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
