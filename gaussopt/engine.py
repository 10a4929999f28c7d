"""The compiled engine of :func:`~gaussopt.simulate` (numba, compiled once per machine).

One driver for every explicit method and every model: the integrator
(``rk4``, ``euler``, ``RK23``, ``RK45``, ``DOP853`` with their embedded error
estimates and dense outputs, the step-size control of
:mod:`scipy.integrate`), the Gauss step (:func:`gaussopt.kernel.gauss_step`),
the stabilization (projection onto the constraints, or Baumgarte's
correction), the rank monitor that locates passages through singular
positions (the section "rank monitor" below explains the method), the output
samples and their diagnostics are all compiled. The model is called through function
pointers (:mod:`gaussopt.model`): compiled models run entirely in machine
code; a Python model or a step solver that runs in Python (QP, GA) is called
back. A run advances in chunks of bounded wall time, so that a
``KeyboardInterrupt`` is seen between chunks and the part computed so far
is returned.

The data passed around:

``fns``      the model's five functions (dyn, rows, pos, vel, energy)
``accel``    the step solver's callback (QP, GA) or :data:`~gaussopt.model.NOOP`
``md``       :class:`ModelData`: parameters, sizes, row layout
``buf``      :class:`Buffers`: the flat arrays the model functions read and write
``opt``      :class:`Options`: integer and float settings
``st``       :class:`State`: everything that changes along a run

Python builds these as named tuples and passes them to compiled code packed
(:func:`pack`): as numba structures, each one pointer. A compiled function
that takes a named tuple of arrays increments and decrements the reference
count of every array in it on entry and exit whenever it allocates (numba's
reference-count pruning gives up there), about fifty atomic operations per
right-hand side of a run; a structure costs one.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numba as nb
import numpy as np
from numba.core import types
from numba.experimental import structref

from . import kernel as K
from . import sparse as SP
from .model import _function_at, data_ptr, functions

__all__ = ["ModelData", "Buffers", "Options", "State", "Tableau", "pack", "evaluate_step", "project",
           "METHOD_CODES", "SOLVER_CODES"]

#: (``_nrt=True`` explicitly: the kernel's functions compile without reference counting,
#: :data:`gaussopt.kernel._leaf`, and a function without the option inherits its
#: caller's. The engine's functions read numba structures, which need it.)
_jit = nb.njit(cache=True, nogil=False, _nrt=True)
_EPS = float(np.finfo(float).eps)

#: ``band``: the O(n) path of :mod:`gaussopt.sparse` (a :class:`gaussopt.sparse.Band`,
#: ``mode`` ``MODE_NONE`` without one): :func:`model_data`
ModelData = namedtuple("ModelData", ["p", "dims", "hol_rows", "vel_rows", "vel_is_hol",
                                     "band"])
Buffers = namedtuple("Buffers", ["q", "v", "M", "F", "A", "b", "phi", "J", "phit", "r", "Jv",
                                 "e", "a"])
# i: integer settings (see the I_* indices); f: float settings (F_*)
Options = namedtuple("Options", ["i", "f"])

# dims
D_N, D_M, D_MH, D_MV, D_ENERGY, D_CONSTM = range(6)
# integer options
# (I_DENSE: prepare every accepted step's interpolant before the step's end is projected,
# for dense output and events)
(I_METHOD, I_SOLVER, I_STAB, I_PVEL, I_PRHS, I_PITER, I_MONITOR, I_MAXSTEPS, I_CHECKSYM,
 I_DENSE) = range(10)
# float options
(F_RANKTOL, F_RTOL, F_ATOL, F_DT, F_PTOL, F_ALPHA, F_BETA, F_GAMMA, F_T1, F_FIRST,
 F_MAXSTEP) = range(11)

METHOD_CODES = {"euler": 0, "rk4": 1, "RK23": 2, "RK45": 3, "DOP853": 4}
SOLVER_CODES = {"closed_form": K.CLOSED_FORM, "lagrange": K.LAGRANGE, "callback": 2}
STAB_NONE, STAB_PROJECTION, STAB_BAUMGARTE = 0, 1, 2

# statuses of the engine (beyond the kernel's, which are 0..6)
MODEL_FAILED = 10          # a model function returned nonzero
STEP_TOO_SMALL = 11        # the step size collapsed
MAX_STEPS = 12
CHUNK_DONE = 13            # the wall-time budget of a chunk is used up
FINISHED = 14


def model_data(mf, system, sparse: bool = True) -> ModelData:
    """The :class:`ModelData` of a system's compiled functions ``mf``
    (:class:`~gaussopt.model.ModelFunctions`); with ``sparse``, its O(n) path if it
    has one (:func:`gaussopt.sparse.make_band`; work arrays of its own)."""
    band = SP.make_band(system, mf, SP.MIN_N if sparse else 1 << 62)
    return ModelData(mf.p, mf.dims(), mf.hol_rows, mf.vel_rows, mf.vel_is_hol, band)


def buffers(mf) -> Buffers:
    """The :class:`Buffers` of a model's compiled functions ``mf`` (its very arrays)."""
    return Buffers(*(mf.buffers[k] for k in Buffers._fields))


# --------------------------------------------------------------------------- model calls
# (element loops and data pointers: a slice assignment or ``.ctypes`` costs reference
# counting of the arrays involved, see the module docstring)
@_jit
def _put(dst, src):
    for i in range(src.shape[0]):
        dst[i] = src[i]


@nb.njit(cache=True, inline="always")
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


@_jit
def call_sp_dyn(md, buf, t, q, v):
    """The sparse model's ``d`` (diagonal of M) and ``F`` into ``md.band.w``."""
    _put(buf.q, q)
    _put(buf.v, v)
    w = md.band.w
    return _function_at(md.band.addrs[0])(t, data_ptr(buf.q), data_ptr(buf.v),
                                         data_ptr(md.band.p), data_ptr(w.d), data_ptr(w.F))


@_jit
def call_sp_rows(md, buf, t, q, v):
    """The sparse model's rows (``data`` in the pattern) and ``b`` into ``md.band.w``."""
    _put(buf.q, q)
    _put(buf.v, v)
    w = md.band.w
    return _function_at(md.band.addrs[1])(t, data_ptr(buf.q), data_ptr(buf.v),
                                         data_ptr(md.band.p), data_ptr(w.data), data_ptr(w.b))


# --------------------------------------------------------------------------- the step
@_jit
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


@_jit
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


@_jit
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


# --------------------------------------------------------------------------- projection
@_jit
def _metric(M, Jm):
    """``M + w Jn^T Jn`` (``Jn`` the normalized rows of ``Jm``, ``w = trace(M)/n``): the
    mass metric, augmented so that it stays positive definite for a singular ``M``."""
    n = M.shape[0]
    k = Jm.shape[0]
    nr = np.empty(k)
    K.row_norms(Jm, nr)
    tr = 0.0
    for i in range(n):
        tr += M[i, i]
    w = tr / n if tr > 0.0 else 1.0
    W = M.copy()
    for r in range(k):
        s = nr[r] if nr[r] > 0.0 else 1.0
        c = w / (s * s)
        for i in range(n):
            for j in range(n):
                W[i, j] += c * Jm[r, i] * Jm[r, j]
    return W


@_jit
def _correction(W, diag_only, J, res, rank_tol, floor):
    """Minimum-W-norm least-squares ``dx`` for ``J dx = -res`` (rows normalized):
    ``W`` a positive diagonal mass matrix (a column scaling) or the metric of
    :func:`_metric` (Cholesky); the correction of :class:`gaussopt.Projection`."""
    k, n = J.shape
    nr = np.empty(k)
    K.row_norms(J, nr)
    Jn = np.empty((k, n))
    rn = np.empty(k)
    for i in range(k):
        s = nr[i] if nr[i] > 0.0 else 1.0
        for j in range(n):
            Jn[i, j] = J[i, j] / s
        rn[i] = -res[i] / s
    X = np.empty((n, k))                       # W^-1/2 Jn^T (diagonal) or L^-1 Jn^T
    L = np.zeros((n, n))
    if diag_only:
        for j in range(n):
            sj = 1.0 / math.sqrt(W[j, j])
            for i in range(k):
                X[j, i] = Jn[i, j] * sj
    else:
        if not K.cholesky(W, L) > 0.0:
            return np.zeros(n), False
        for j in range(n):
            for i in range(k):
                X[j, i] = Jn[i, j]
        K._forward(L, X)
    KK = np.empty((k, k))
    kmax = 0.0
    for p in range(k):
        for q in range(p, k):
            acc = 0.0
            for j in range(n):
                acc += X[j, p] * X[j, q]
            KK[p, q] = acc
            KK[q, p] = acc
        if KK[p, p] > kmax:
            kmax = KK[p, p]
    LK = np.zeros((k, k))
    z = np.zeros(n)
    dmin = K.cholesky(KK, LK) if k > 0 else np.inf
    if k > 0 and dmin > 1e-8 * kmax:
        y = np.empty((k, 1))
        for i in range(k):
            y[i, 0] = rn[i]
        K._forward(LK, y)
        yy = y[:, 0].copy()
        K._backward_t(LK, yy)
        for j in range(n):
            acc = 0.0
            for i in range(k):
                acc += X[j, i] * yy[i]
            z[j] = acc
    elif k > 0:
        # near-singular or redundant rows: truncated SVD of X^T
        U, s, V = K.svd_econ(np.ascontiguousarray(X.T))
        thr = max(rank_tol, floor)
        kk = 0
        if s.shape[0] > 0 and s[0] > 0.0:
            for i in range(s.shape[0]):
                if s[i] > thr * s[0]:
                    kk += 1
        for c in range(kk):
            acc = 0.0
            for i in range(k):
                acc += U[i, c] * rn[i]
            coef = acc / s[c]
            for j in range(n):
                z[j] += V[j, c] * coef
    if diag_only:
        for j in range(n):
            z[j] /= math.sqrt(W[j, j])
        return z, True
    K._backward_t(L, z)
    return z, True


@_jit
def _distances(res, J):
    k = res.shape[0]
    nr = np.empty(k)
    K.row_norms(J, nr)
    dmax = 0.0
    for i in range(k):
        s = nr[i] if nr[i] > 0.0 else 1.0
        d = abs(res[i]) / s
        if not np.isfinite(d):
            return np.inf
        if d > dmax:
            dmax = d
    return dmax


@_jit
def _absmax(x):
    m = 0.0
    for i in range(x.shape[0]):
        if abs(x[i]) > m:
            m = abs(x[i])
    return m


@_jit
def project(fns, md, buf, opt, t, q, v, vanished):
    """Project ``(q, v)`` onto the constraints in place (:class:`gaussopt.Projection`).

    Gauss--Newton with the least-squares corrections of :func:`_correction`
    (positions: truncation floor ``100 dist`` relative, the off-manifold distance;
    directions below ``vanished`` are left alone). Returns ``(status, its)``;
    status 0, :data:`MODEL_FAILED`, or ``-1`` when a residual is not finite
    (the constraint is undefined there).
    """
    n = md.dims[D_N]
    mh = md.dims[D_MH]
    mv = md.dims[D_MV]
    tol = opt.f[F_PTOL]
    max_iter = opt.i[I_PITER]
    rank_tol = opt.f[F_RANKTOL]
    its = 0
    if mh == 0 and mv == 0:
        return 0, 0
    st = call_dyn(fns, md, buf, t, q, v)
    if st != 0:
        return MODEL_FAILED, its
    M = buf.M.reshape(n, n).copy()
    diag_only = True
    for i in range(n):
        if not M[i, i] > 0.0:
            diag_only = False
        for j in range(n):
            if i != j and M[i, j] != 0.0:
                diag_only = False
    holonomic_only = mv == mh
    # the O(n) correction (every row holonomic, M diagonal): the band of the step
    on_band = md.band.mode == SP.MODE_PROJECT and diag_only and holonomic_only
    nb_ = n if on_band else 0                  # (a dense model allocates nothing here)
    hdiag = np.empty(nb_)
    for i in range(nb_):
        hdiag[i] = M[i, i]
    dx = np.empty(nb_)
    have_J = False
    if mh > 0:
        for _ in range(max_iter):
            st = call_pos(fns, md, buf, t, q)
            if st != 0:
                return MODEL_FAILED, its
            J = buf.J.reshape(mh, n)
            dist = _distances(buf.phi, J)
            if not np.isfinite(dist):
                return -1, its
            have_J = True
            if dist <= tol * (1.0 + _absmax(q)):
                break
            if holonomic_only:
                Jm = J.copy()
            else:
                st = call_vel(fns, md, buf, t, q, v)
                if st != 0:
                    return MODEL_FAILED, its
                Jm = buf.Jv.reshape(mv, n).copy()
            floor = max(vanished, 100.0 * dist / (1.0 + _absmax(q)))
            done = False
            if on_band:
                if call_sp_rows(md, buf, t, q, v) != 0:
                    return MODEL_FAILED, its
                done = SP.correction(md.band.sp, md.band.w, hdiag, buf.phi, dx)
            if done:
                dq = dx
            else:
                W = M if diag_only else _metric(M, Jm)
                dq, ok = _correction(W, diag_only, J.copy(), buf.phi.copy(), rank_tol, floor)
                if not ok:
                    return -1, its
            for i in range(n):
                q[i] += dq[i]
            have_J = False
            its += 1
            if _absmax(dq) <= 4 * _EPS * (1.0 + _absmax(q)):
                break
    if opt.i[I_PVEL] == 0 or mv == 0:
        return 0, its
    if holonomic_only:
        if not have_J:
            st = call_pos(fns, md, buf, t, q)
            if st != 0:
                return MODEL_FAILED, its
        J = buf.J.reshape(mh, n).copy()
        r = buf.phit.copy()
        for k in range(mh):
            acc = r[k]
            for j in range(n):
                acc += J[k, j] * v[j]
            r[k] = acc
        rows_on_band = False
        for _ in range(max_iter):
            d = _distances(r, J)
            if not np.isfinite(d):
                return -1, its
            if d <= tol * (1.0 + _absmax(v)):
                break
            done = False
            if on_band:
                if not rows_on_band:
                    if call_sp_rows(md, buf, t, q, v) != 0:
                        return MODEL_FAILED, its
                    rows_on_band = True
                done = SP.correction(md.band.sp, md.band.w, hdiag, r, dx)
            if done:
                dv = dx
            else:
                dv, ok = _correction(M if diag_only else _metric(M, J), diag_only, J, r,
                                     rank_tol, vanished)
                if not ok:
                    return -1, its
            for i in range(n):
                v[i] += dv[i]
            for k in range(mh):
                acc = 0.0
                for j in range(n):
                    acc += J[k, j] * dv[j]
                r[k] += acc
            its += 1
            if _absmax(dv) <= 4 * _EPS * (1.0 + _absmax(v)):
                break
        return 0, its
    for _ in range(max_iter):
        st = call_vel(fns, md, buf, t, q, v)
        if st != 0:
            return MODEL_FAILED, its
        Jv = buf.Jv.reshape(mv, n).copy()
        r = buf.r.copy()
        d = _distances(r, Jv)
        if not np.isfinite(d):
            return -1, its
        if d <= tol * (1.0 + _absmax(v)):
            break
        dv, ok = _correction(M if diag_only else _metric(M, Jv), diag_only, Jv, r, rank_tol,
                             vanished)
        if not ok:
            return -1, its
        for i in range(n):
            v[i] += dv[i]
        its += 1
        if _absmax(dv) <= 4 * _EPS * (1.0 + _absmax(v)):
            break
    return 0, its


# --------------------------------------------------------------------------- state of a run
Tableau = namedtuple("Tableau", ["A", "B", "C", "E", "E3", "E5", "P", "A_extra", "C_extra", "D"])
State = namedtuple("State", [
    "sc",        # float scalars (S_*)
    "ic",        # int scalars (C_*)
    "y", "f", "y_old", "f_old", "K",     # integrator
    "ref", "sref",                        # the step solver's accepted-state references
    "mu", "mv",                           # the monitor's singular pair (u, v); S_MSIG its value
    "ev_f", "ev_i", "ev_rows",            # events: (t, sigma), (kind, before, min, after), rows
    "lsq_f", "lsq_y",                     # least-squares steps: (t, size), state there
    "t_eval", "out_t", "out_y",           # outputs
    "dense", "fail_y",                    # dense-output coefficients; state of a failure
    "wk", "wm",                           # kernel workspaces: the step's, the monitor's
    "scr",                                # scratch (N_SCR, 2n): rows R_*
])
#: rows of the scratch ``scr``: the right-hand side's state (q | v) and its a; a stage's
#: state; the step's new state, derivative and error scale; rk4's k2, k3, k4; the
#: accepted state as projected, a copy for the projection, an output sample, a derivative
(R_QV, R_A, R_STAGE, R_YNEW, R_FNEW, R_SCALE, R_K2, R_K3, R_K4, R_ACC, R_PROJ, R_OUT,
 R_F) = range(13)
N_SCR = 13
# float scalars
(S_T, S_HABS, S_HPREV, S_TOLD, S_MSIG, S_LSQ_T, S_LSQ_SIZE, S_FAIL_T, S_T0, S_NEAR, S_NEAR_T,
 S_NEAR_RATE, S_NEAR_TPREV, S_NEAR_RATE_PREV) = range(14)
N_SC = 14

#: the right-hand side is evaluated on the projected state (``Projection(rhs=True)``)
#: while the last accepted state is near a singular configuration: its rows, scaled by
#: their reference norms, have a singular value below ``NEAR_SINGULAR`` (a tenth of
#: their regular size). There the acceleration field off the constraints grows like
#: 1/sigma and the integrator's stages must not see it; elsewhere the field is smooth,
#: the projection after each accepted step suffices (the standard projection method),
#: and skipping the stages' projections changes the result only at the level of the
#: integration error.
NEAR_SINGULAR = 0.1
# int scalars
# (C_NBAND: right-hand sides whose step the O(n) path answered; C_NREJ: steps rejected
# by error control)
(C_STATUS, C_STEPS, C_NFEV, C_NPROJ, C_NOUT, C_NEV, C_NLSQ, C_RANK, C_R0, C_DENSE, C_IEVAL,
 C_PENDING, C_KSTEP, C_NMON, C_NSEARCH, C_NBAND, C_NREJ) = range(17)
N_IC = 17
EV_PASSAGE, EV_DROP, EV_RISE = 0, 1, 2


# --------------------------------------------------------------------------- packed records
# The compiled twins of ModelData, Buffers, Options, Tableau and State: numba structures
# holding the very arrays of the named tuple (no copy; Python keeps reading the tuple).
def _unliteral(self, fields):
    return tuple((name, types.unliteral(typ)) for name, typ in fields)


@structref.register
class _ModelDataType(types.StructRef):
    preprocess_fields = _unliteral


@structref.register
class _BuffersType(types.StructRef):
    preprocess_fields = _unliteral


@structref.register
class _OptionsType(types.StructRef):
    preprocess_fields = _unliteral


@structref.register
class _TableauType(types.StructRef):
    preprocess_fields = _unliteral


@structref.register
class _StateType(types.StructRef):
    preprocess_fields = _unliteral


class PackedModelData(structref.StructRefProxy):
    """:class:`ModelData` as passed to compiled code (:func:`pack`)."""


class PackedBuffers(structref.StructRefProxy):
    """:class:`Buffers` as passed to compiled code (:func:`pack`)."""


class PackedOptions(structref.StructRefProxy):
    """:class:`Options` as passed to compiled code (:func:`pack`)."""


class PackedTableau(structref.StructRefProxy):
    """:class:`Tableau` as passed to compiled code (:func:`pack`)."""


class PackedState(structref.StructRefProxy):
    """:class:`State` as passed to compiled code (:func:`pack`)."""


structref.define_proxy(PackedModelData, _ModelDataType, list(ModelData._fields))
structref.define_proxy(PackedBuffers, _BuffersType, list(Buffers._fields))
structref.define_proxy(PackedOptions, _OptionsType, list(Options._fields))
structref.define_proxy(PackedTableau, _TableauType, list(Tableau._fields))
structref.define_proxy(PackedState, _StateType, list(State._fields))


@nb.njit(cache=True)
def _pack_model_data(p, dims, hol_rows, vel_rows, vel_is_hol, band):
    return PackedModelData(p, dims, hol_rows, vel_rows, vel_is_hol, band)


@nb.njit(cache=True)
def _pack_buffers(q, v, M, F, A, b, phi, J, phit, r, Jv, e, a):
    return PackedBuffers(q, v, M, F, A, b, phi, J, phit, r, Jv, e, a)


@nb.njit(cache=True)
def _pack_options(i, f):
    return PackedOptions(i, f)


@nb.njit(cache=True)
def _pack_tableau(A, B, C, E, E3, E5, P, A_extra, C_extra, D):
    return PackedTableau(A, B, C, E, E3, E5, P, A_extra, C_extra, D)


@nb.njit(cache=True)
def _pack_state(sc, ic, y, f, y_old, f_old, K_, ref, sref, mu, mv, ev_f, ev_i, ev_rows, lsq_f,
                lsq_y, t_eval, out_t, out_y, dense, fail_y, wk, wm, scr):
    return PackedState(sc, ic, y, f, y_old, f_old, K_, ref, sref, mu, mv, ev_f, ev_i, ev_rows,
                       lsq_f, lsq_y, t_eval, out_t, out_y, dense, fail_y, wk, wm, scr)


_PACKERS = {ModelData: _pack_model_data, Buffers: _pack_buffers, Options: _pack_options,
            Tableau: _pack_tableau, State: _pack_state}


def pack(record):
    """The compiled twin of a :class:`ModelData`, :class:`Buffers`, :class:`Options`,
    :class:`Tableau` or :class:`State`: a numba structure holding the same arrays
    (writes on either side are seen on the other). Every compiled entry point of the
    engine takes packed records."""
    return _PACKERS[type(record)](*record)


@_jit
def vanished_floor(st):
    return K.FOLD_TOL * st.sref[0]


@_jit
def rhs(fns, accel, md, buf, opt, st, t, y, out):
    """``y' = (v, a(t, q, v))``, on the projected state if the projection asks for it;
    tracks the largest inconsistency (least-squares step) of the current step."""
    n = md.dims[D_N]
    st.ic[C_NFEV] += 1
    scr = st.scr
    q = scr[0, :n]                      # (y may be a row of scr, never row 0 or 1)
    v = scr[0, n:]
    a = scr[1, :n]
    for i in range(n):
        q[i] = y[i]
        v[i] = y[n + i]
    if opt.i[I_STAB] == STAB_PROJECTION and opt.i[I_PRHS] != 0 and st.sc[S_NEAR] < NEAR_SINGULAR:
        ps, its = project(fns, md, buf, opt, t, q, v, vanished_floor(st))
        if ps != 0:
            st.sc[S_FAIL_T] = t
            st.fail_y[:n] = q
            st.fail_y[n:] = v
            return MODEL_FAILED if ps == MODEL_FAILED else K.NONFINITE
    status, r, mL, k, rho, allow, be, flags = evaluate_step(
        fns, accel, md, buf, opt, st.ref, st.sref, t, q, v, a, False, st.wk)
    if status != 0:
        st.sc[S_FAIL_T] = t
        st.fail_y[:n] = q
        st.fail_y[n:] = v
        return status
    if uses_sparse(flags):
        st.ic[C_NBAND] += 1
    if rho > math.sqrt(opt.f[F_RANKTOL]) and rho > st.sc[S_LSQ_SIZE]:
        st.sc[S_LSQ_SIZE] = rho
        st.sc[S_LSQ_T] = t
        st.lsq_y[st.ic[C_NLSQ] % st.lsq_y.shape[0], :n] = q
        st.lsq_y[st.ic[C_NLSQ] % st.lsq_y.shape[0], n:] = v
    for i in range(n):
        out[i] = v[i]
        out[n + i] = a[i]
    return 0


@_jit
def _row_norms_band(md, nu):
    """Norms of the sparse rows in ``md.band.w.data``; False if one is zero or not finite."""
    st = md.band.sp
    w = md.band.w
    for i in range(st.dims[1]):
        x = SP._norm2(w.data[st.indptr[i]:st.indptr[i + 1]])
        if not (x > 0.0 and np.isfinite(x)):
            return False
        nu[i] = x
    return True


@_jit
def accept_rows(fns, md, buf, opt, st, t, q, v):
    """The step solver's references from an accepted state (row norms, smallest
    singular value of the normalized rows) and the nearness to a singular position
    (``S_NEAR``, its rate). On the band of the O(n) path while the smallest singular
    values are live (:func:`gaussopt.sparse.smallest_pair`), else by the dense SVD."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    if m == 0:
        return 0
    rank_tol = opt.f[F_RANKTOL]
    near = opt.i[I_STAB] == STAB_PROJECTION and opt.i[I_PRHS] != 0
    band = md.band.mode != SP.MODE_NONE
    nu = np.empty(m)
    if band:
        if call_sp_rows(md, buf, t, q, v) != 0:
            return MODEL_FAILED
        band = _row_norms_band(md, nu)
    if band:
        for i in range(m):
            if nu[i] > st.ref[i]:
                st.ref[i] = nu[i]
        u = st.mu.copy()
        wv = np.empty(n)
        sl = SP.smallest_pair(md.band.sp, md.band.w, nu, u, wv)
        band = sl > rank_tol
        if band and sl > st.sref[0]:
            st.sref[0] = sl
    A = np.empty((0, 0))
    if not band:
        s_ = call_rows(fns, md, buf, t, q, v)
        if s_ != 0:
            return MODEL_FAILED
        A = buf.A.reshape(m, n).copy()
        K.row_norms(A, nu)
        for i in range(m):
            if nu[i] > st.ref[i]:
                st.ref[i] = nu[i]
        sl = K.smallest_live_sigma(A, rank_tol, st.wk)
        if np.isfinite(sl) and sl > st.sref[0]:
            st.sref[0] = sl
    if not near:
        return 0
    # nearness to a singular configuration: the smallest singular value of the rows
    # scaled by their references (a vanishing row counts as well as dependent ones)
    st.sc[S_NEAR_TPREV] = st.sc[S_NEAR_T]
    st.sc[S_NEAR_RATE_PREV] = st.sc[S_NEAR_RATE]
    st.sc[S_NEAR_T] = t
    st.sc[S_NEAR_RATE] = 0.0
    dt = 1e-6 * st.sc[S_HPREV]
    if band:
        u = st.mu.copy()
        wv = np.empty(n)
        sk = SP.smallest_pair(md.band.sp, md.band.w, st.ref, u, wv)
        if sk > rank_tol:
            st.sc[S_NEAR] = sk
            if dt > 0.0:
                q2 = q + dt * st.f[:n]
                v2 = v + dt * st.f[n:]
                if call_sp_rows(md, buf, t + dt, q2, v2) != 0:
                    return MODEL_FAILED
                sp = md.band.sp
                data = md.band.w.data
                g = 0.0
                for i in range(m):
                    r = st.ref[i] if st.ref[i] > 0.0 else 1.0
                    acc = 0.0
                    for k in range(sp.indptr[i], sp.indptr[i + 1]):
                        acc += data[k] * wv[sp.indices[k]]
                    g += u[i] * acc / r
                st.sc[S_NEAR_RATE] = (g - sk) / dt
            return 0
        if call_rows(fns, md, buf, t, q, v) != 0:
            return MODEL_FAILED
        A = buf.A.reshape(m, n).copy()
    for i in range(m):
        r = st.ref[i] if st.ref[i] > 0.0 else 1.0
        for j in range(n):
            A[i, j] /= r
    U, s, V = K.svd(A, st.wm)
    k = _count(s, rank_tol) - 1
    sk = s[k] if k >= 0 else 0.0
    st.sc[S_NEAR] = sk
    if k >= 0:
        # its rate along the motion, to first order in a short move along y' (the
        # derivative of a simple singular value is u^T A' w)
        u = U[:, k].copy()
        w = V[:, k].copy()
        if dt > 0.0:
            q2 = q + dt * st.f[:n]
            v2 = v + dt * st.f[n:]
            if call_rows(fns, md, buf, t + dt, q2, v2) != 0:
                return MODEL_FAILED
            A2 = buf.A.reshape(m, n)
            g = 0.0
            for i in range(m):
                r = st.ref[i] if st.ref[i] > 0.0 else 1.0
                acc = 0.0
                for j in range(n):
                    acc += A2[i, j] * w[j]
                g += u[i] * acc / r
            st.sc[S_NEAR_RATE] = (g - sk) / dt
    return 0


# --------------------------------------------------------------------------- dense output
@_jit
def dense_eval(method, st, tab, t, out):
    """The step's interpolant at ``t`` (state before the projection of the step's end),
    into ``out``."""
    N = st.y.shape[0]
    t_old = st.sc[S_TOLD]
    h = st.sc[S_HPREV]
    x = (t - t_old) / h
    if method == 4:                                     # DOP853: nested form
        F = st.dense
        P = F.shape[0]
        for j in range(N):
            acc = 0.0
            for i in range(P - 1, -1, -1):
                acc += F[i, j]
                if (P - 1 - i) % 2 == 0:
                    acc *= x
                else:
                    acc *= 1.0 - x
            out[j] = st.y_old[j] + acc
        return
    if method == 2 or method == 3:                      # RK23 / RK45: Q = K^T P
        Q = st.dense                                    # (order + 1, N)
        for j in range(N):
            acc = 0.0
            p = 1.0
            for i in range(Q.shape[0]):
                p *= x
                acc += Q[i, j] * p
            out[j] = st.y_old[j] + h * acc
        return
    # rk4 / euler (and the monitor's samples, method -1): cubic Hermite from (y, y') at
    # both ends of the step as integrated (before the end's projection)
    h00 = 2 * x**3 - 3 * x**2 + 1
    h10 = x**3 - 2 * x**2 + x
    h01 = -2 * x**3 + 3 * x**2
    h11 = x**3 - x**2
    for j in range(N):
        out[j] = (h00 * st.y_old[j] + h10 * h * st.f_old[j] + h01 * st.y[j]
                  + h11 * h * st.f[j])


@_jit
def prepare_dense(fns, accel, md, buf, opt, tab, st, method):
    """Coefficients of the step's interpolant (DOP853 needs three more stages)."""
    if st.ic[C_DENSE] != 0:
        return 0
    N = st.y.shape[0]
    h = st.sc[S_HPREV]
    t_old = st.sc[S_TOLD]
    if method == 4:
        Kx = st.K
        ns = tab.B.shape[0]
        yy = st.scr[2]
        for s_ in range(tab.C_extra.shape[0]):
            row = ns + 1 + s_
            for j in range(N):
                acc = 0.0
                for k in range(row):
                    acc += Kx[k, j] * tab.A_extra[s_, k]
                yy[j] = st.y_old[j] + acc * h
            stt = rhs(fns, accel, md, buf, opt, st, t_old + tab.C_extra[s_] * h, yy, Kx[row])
            if stt != 0:
                return stt
        F = st.dense
        for j in range(N):
            dy = st.y[j] - st.y_old[j]
            F[0, j] = dy
            F[1, j] = h * Kx[0, j] - dy
            F[2, j] = 2 * dy - h * (st.f[j] + Kx[0, j])
        for i in range(tab.D.shape[0]):
            for j in range(N):
                acc = 0.0
                for k in range(Kx.shape[0]):
                    acc += tab.D[i, k] * Kx[k, j]
                F[3 + i, j] = h * acc
    elif method == 2 or method == 3:
        Q = st.dense
        nk = tab.P.shape[0]
        for i in range(tab.P.shape[1]):
            for j in range(N):
                acc = 0.0
                for k in range(nk):
                    acc += st.K[k, j] * tab.P[k, i]
                Q[i, j] = acc
    st.ic[C_DENSE] = 1
    return 0


# --------------------------------------------------------------------------- rank monitor
# Rank monitoring along a run: singular positions located as sign changes.
#
# At a *singular position* the constraint rows lose rank for an instant: on
# paper 001's four-bar the row ``[l cos th1, -l cos th2, 0]`` vanishes at
# ``th1 = pi/2 + k pi``; on a linkage rows become dependent at a folded
# configuration. A threshold on a singular value cannot locate such a passage
# reliably -- the smallest singular value the integrator happens to sample
# depends on the step sizes and the rounding of the machine. Along a smooth
# path ``A(t)`` the singular values can instead be continued *analytically*:
# with the singular pair ``(u, v)`` of the ``k``-th singular value at the
# start of a step, ``g(t) = u^T A(t) v`` is a smooth function that equals
# ``+s_k`` at the start and changes sign where the analytic singular value
# passes through zero. A passage is therefore a sign change of the
# continued singular value on the step's dense output -- seen as a singular
# pair that turns over between two samples, or as a sign change of ``g`` --
# and its time is the root of ``g``, re-centred on the singular pair at each
# iterate (Newton) until it no longer moves. A sign change that
# belongs to a rotating pair rather than a vanishing singular value is told
# apart by the size of the singular value at the root (a true passage has it at
# the level of the root's accuracy, orders of magnitude below its size at the
# ends of the bracket).
#
# The rows are divided by their accepted-state reference norms (the step solver's
# ``ref``), so that a row that vanishes shows up as a small singular value like rows
# that become dependent. Events: "passage" (the rank dips at one instant), "drop" and
# "rise" (the rank at accepted states changes and stays changed for more than one step).


@_jit
def _scaled_rows(fns, md, buf, st, t, q, v):
    n = md.dims[D_N]
    m = md.dims[D_M]
    st.ic[C_NMON] += 1
    s_ = call_rows(fns, md, buf, t, q, v)
    A = buf.A.reshape(m, n).copy()
    for i in range(m):
        r = st.ref[i] if st.ref[i] > 0.0 else 1.0
        for j in range(n):
            A[i, j] /= r
    return s_, A


@_jit
def _count(s, tol):
    c = 0
    for i in range(s.shape[0]):
        if s[i] > tol:
            c += 1
    return c


@_jit
def _g(u, A, w):
    acc = 0.0
    for i in range(A.shape[0]):
        row = 0.0
        for j in range(A.shape[1]):
            row += A[i, j] * w[j]
        acc += u[i] * row
    return acc


@_jit
def _state_at(fns, accel, md, buf, opt, tab, st, method, t, t_end, y_end):
    if t == t_end:
        return y_end.copy()
    out = np.empty(st.y.shape[0])
    dense_eval(method, st, tab, t, out)
    return out


@_jit
def monitor_start(fns, md, buf, opt, st, t, q, v):
    """The regular rank ``r0`` and the first singular pair."""
    m = md.dims[D_M]
    if m == 0:
        return 0
    s_, A = _scaled_rows(fns, md, buf, st, t, q, v)
    if s_ != 0:
        return MODEL_FAILED
    U, s, V = K.svd(A, st.wm)
    r0 = _count(s, opt.f[F_RANKTOL])
    st.ic[C_R0] = r0
    st.ic[C_RANK] = r0
    k = min(r0, s.shape[0]) - 1
    if k >= 0:
        st.mu[:] = U[:, k]
        st.mv[:] = V[:, k]
        st.sc[S_MSIG] = s[k]
    else:
        st.sc[S_MSIG] = -1.0
    return 0


@_jit
def _record_event(st, kind, t, sigma, rb, rmin, ra, u):
    i = st.ic[C_NEV]
    if i >= st.ev_f.shape[0]:
        return
    st.ev_f[i, 0] = t
    st.ev_f[i, 1] = sigma
    st.ev_i[i, 0] = kind
    st.ev_i[i, 1] = rb
    st.ev_i[i, 2] = rmin
    st.ev_i[i, 3] = ra
    big = 0.0
    for j in range(u.shape[0]):
        if abs(u[j]) > big:
            big = abs(u[j])
    for j in range(u.shape[0]):
        st.ev_rows[i, j] = abs(u[j]) > 0.3 * big
    st.ic[C_NEV] = i + 1


@_jit
def _passage(fns, accel, md, buf, opt, tab, st, method, ta, tb, u0, w0, s_a, s_b, t_lo,
             t_hi, y_end):
    """Locate the zero of the smallest live singular value in or near ``[ta, tb]``
    (:mod:`gaussopt.monitor`): the root of ``g`` with the pair at ``ta``, then Newton
    iterations re-centred on the pair at the iterate, kept inside the step."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    st.ic[C_NSEARCH] += 1
    k = min(st.ic[C_R0], min(m, n)) - 1
    xtol = 4 * _EPS * max(1.0, abs(t_hi))
    y = _state_at(fns, accel, md, buf, opt, tab, st, method, tb, t_hi, y_end)
    s_, A = _scaled_rows(fns, md, buf, st, tb, y[:n], y[n:])
    gb = _g(u0, A, w0)
    if s_a > 0.0 and gb <= 0.0:
        # bisection-safeguarded secant (Illinois) on g with the pair at ta, to a
        # bracket of 1e-7 of the interval: the root of g with a fixed pair is only
        # the start of the Newton iterations below (each doubles the digits of a
        # start this close), so converging it to rounding would be wasted
        a_, b_ = ta, tb
        fa, fb = s_a, gb
        ts = tb
        il_tol = max(1e-7 * (tb - ta), xtol)
        for _ in range(200):
            if fb == 0.0 or abs(b_ - a_) <= il_tol:
                ts = b_
                break
            c = b_ - fb * (b_ - a_) / (fb - fa)
            if not (min(a_, b_) < c < max(a_, b_)):
                c = 0.5 * (a_ + b_)
            y = _state_at(fns, accel, md, buf, opt, tab, st, method, c, t_hi, y_end)
            s_, A = _scaled_rows(fns, md, buf, st, c, y[:n], y[n:])
            fc = _g(u0, A, w0)
            if fc > 0.0:
                a_, fa = c, fc
                fb *= 0.5
            else:
                b_, fb = c, fc
                fa *= 0.5
            ts = c
    else:
        ts = 0.5 * (ta + tb)
    span = t_hi - t_lo
    # Newton on the smallest singular value with its pair re-centred at every iterate
    # (signed by continuity: g with the pair at the iterate); the slope of g by a
    # central difference, computed again only after a large move (it changes little
    # over a step this short); stop when the move reaches rounding or stagnates there
    slope = 0.0
    moved_prev = np.inf
    smin = np.inf
    s = np.zeros(0)
    uk = np.zeros(m)
    for it in range(12):
        y = _state_at(fns, accel, md, buf, opt, tab, st, method, ts, t_hi, y_end)
        s_, A = _scaled_rows(fns, md, buf, st, ts, y[:n], y[n:])
        U, sv, V = K.svd(A, st.wm)
        u = U[:, k].copy()
        w = V[:, k].copy()
        s = sv.copy()
        uk = u
        sk = sv[k]
        smin = sk
        if sk == 0.0:
            break
        if it == 0 or moved_prev > 1e-4 * span:
            d = max(1e-7 * span, 16 * xtol)
            lo = max(t_lo, ts - d)
            hi = min(t_hi, ts + d)
            ylo = _state_at(fns, accel, md, buf, opt, tab, st, method, lo, t_hi, y_end)
            s_, Alo = _scaled_rows(fns, md, buf, st, lo, ylo[:n], ylo[n:])
            yhi = _state_at(fns, accel, md, buf, opt, tab, st, method, hi, t_hi, y_end)
            s_, Ahi = _scaled_rows(fns, md, buf, st, hi, yhi[:n], yhi[n:])
            slope = (_g(u, Ahi, w) - _g(u, Alo, w)) / (hi - lo)
        if slope == 0.0 or not np.isfinite(slope):
            break
        t_new = min(t_hi, max(t_lo, ts - sk / slope))
        moved = abs(t_new - ts)
        ts = t_new
        if moved <= xtol or (moved <= 1e3 * xtol and moved > 0.5 * moved_prev):
            break
        moved_prev = moved
    # (smin, s, uk: at the last iterate, within the final move of ts)
    ends = max(s_a, s_b)
    if not smin <= 1e-3 * ends:
        return False                                 # a rotating pair, not a passage
    nev = st.ic[C_NEV]
    for e in range(max(0, nev - 3), nev):
        if st.ev_i[e, 0] == EV_PASSAGE and abs(st.ev_f[e, 0] - ts) <= max(1e-9 * span, 64 * xtol):
            return False                             # the same crossing, found twice
    tol = opt.f[F_RANKTOL]
    rmin = 0
    for i in range(s.shape[0]):
        if i != k and s[i] > tol:
            rmin += 1
    _record_event(st, EV_PASSAGE, ts, smin, st.ic[C_RANK], rmin, st.ic[C_RANK], uk)
    return True


@_jit
def monitor_update(fns, accel, md, buf, opt, tab, st, method, t_prev, t, y_end):
    """Follow the smallest live singular value through the accepted step ``(t_prev, t]``
    (samples at 1/4, 1/2, 3/4 and the end); a sign change (the pair turns over, or
    ``g`` changes sign) is refined by :func:`_passage`; then the rank at the end."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    if m == 0 or st.ic[C_R0] == 0:
        return 0
    k = min(st.ic[C_R0], min(m, n)) - 1
    prev_t = t_prev
    u0 = st.mu.copy()
    w0 = st.mv.copy()
    s0 = st.sc[S_MSIG]
    found = False
    Uend = np.zeros((m, 1))
    r_end = 0
    # on the band of the O(n) path while the rows keep full rank (the monitored value
    # is then the smallest one): inverse iteration from the pair of the last sample
    band = md.band.mode != SP.MODE_NONE and k == m - 1
    rank_tol = opt.f[F_RANKTOL]
    method = -1                     # samples from the step's cubic Hermite interpolant
    for j in range(4):
        tt = t if j == 3 else t_prev + 0.25 * (j + 1) * (t - t_prev)
        if j == 3:
            y = y_end.copy()
        else:
            y = np.empty(y_end.shape[0])
            dense_eval(method, st, tab, tt, y)
        on_band = False
        if band:
            st.ic[C_NMON] += 1
            if call_sp_rows(md, buf, tt, y[:n], y[n:]) != 0:
                return MODEL_FAILED
            u1 = u0.copy()
            w1 = np.empty(n)
            s_k = SP.smallest_pair(md.band.sp, md.band.w, st.ref, u1, w1)
            on_band = s_k > rank_tol
            if on_band:
                g1 = SP.bilinear(md.band.sp, md.band.w, u0, w0)
                r_end = m
        if not on_band:
            s_, A = _scaled_rows(fns, md, buf, st, tt, y[:n], y[n:])
            if s_ != 0:
                return MODEL_FAILED
            U, s, V = K.svd(A, st.wm)
            u1 = U[:, k].copy()
            w1 = V[:, k].copy()
            s_k = s[k]
            Uend = U.copy()
            r_end = _count(s, rank_tol)
            g1 = _g(u0, A, w0)
        if not found and s0 >= 0.0:
            du = 0.0
            dw = 0.0
            for i in range(m):
                du += u0[i] * u1[i]
            for i in range(n):
                dw += w0[i] * w1[i]
            if du * dw < 0.0 or (s0 > 0.0 and g1 <= 0.0):
                found = _passage(fns, accel, md, buf, opt, tab, st, method, prev_t, tt, u0, w0,
                                 s0, s_k, t_prev, t, y_end)
        prev_t = tt
        u0 = u1
        w0 = w1
        s0 = s_k
    st.mu[:] = u0
    st.mv[:] = w0
    st.sc[S_MSIG] = s0
    # rank at the end: a change that comes back at the next accepted step is an instant
    r = r_end
    last = st.ic[C_RANK]
    if r != last and on_band:
        # a change of rank is reported with the rows involved: from the dense SVD
        s_, A = _scaled_rows(fns, md, buf, st, t, y_end[:n], y_end[n:])
        if s_ != 0:
            return MODEL_FAILED
        U, s, V = K.svd(A, st.wm)
        Uend = U.copy()
        r = _count(s, rank_tol)
    pend = st.ic[C_PENDING]
    if pend != 0:
        st.ic[C_PENDING] = 0
        e = pend - 1
        if r == st.ev_i[e, 1]:
            # withdraw the pending event (passages found since then move up)
            nev = st.ic[C_NEV]
            for i in range(e, nev - 1):
                st.ev_f[i, :] = st.ev_f[i + 1, :]
                st.ev_i[i, :] = st.ev_i[i + 1, :]
                st.ev_rows[i, :] = st.ev_rows[i + 1, :]
            st.ic[C_NEV] = nev - 1
            st.ic[C_RANK] = r
            return 0
    if r != last:
        kk = min(r, last) - 1
        u = Uend[:, kk].copy() if kk >= 0 else np.zeros(m)
        _record_event(st, EV_DROP if r < last else EV_RISE, t, np.nan, last, min(r, last), r, u)
        st.ic[C_PENDING] = st.ic[C_NEV]
    st.ic[C_RANK] = r
    return 0


# --------------------------------------------------------------------------- integration
@_jit
def _rms(x):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i] * x[i]
    return math.sqrt(acc / x.shape[0])


@_jit
def initial_step(fns, accel, md, buf, opt, st, order):
    """scipy's ``select_initial_step`` (Hairer, Norsett & Wanner, II.4)."""
    N = st.y.shape[0]
    t0 = st.sc[S_T]
    t1 = opt.f[F_T1]
    rtol, atol = opt.f[F_RTOL], opt.f[F_ATOL]
    length = abs(t1 - t0)
    scale = np.empty(N)
    for i in range(N):
        scale[i] = atol + abs(st.y[i]) * rtol
    d0 = _rms(st.y / scale)
    d1 = _rms(st.f / scale)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    h0 = min(h0, length)
    y1 = st.y + h0 * st.f
    f1 = np.empty(N)
    s_ = rhs(fns, accel, md, buf, opt, st, t0 + h0, y1, f1)
    if s_ != 0:
        return s_, 0.0
    d2 = _rms((f1 - st.f) / scale) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (order + 1))
    return 0, min(100 * h0, h1, length, opt.f[F_MAXSTEP])


@_jit
def _start(fns, accel, md, buf, opt, tab, st):
    """First derivative, first step size, monitor and references at the initial state."""
    n = md.dims[D_N]
    s_ = rhs(fns, accel, md, buf, opt, st, st.sc[S_T], st.y, st.f)
    if s_ != 0:
        return s_
    method = opt.i[I_METHOD]
    st.sc[S_HABS] = opt.f[F_DT]
    if method >= 2:
        if opt.f[F_FIRST] > 0.0:
            st.sc[S_HABS] = opt.f[F_FIRST]
        else:
            order = 2 if method == 2 else (4 if method == 3 else 7)
            s_, h = initial_step(fns, accel, md, buf, opt, st, order)
            if s_ != 0:
                return s_
            st.sc[S_HABS] = h
    if opt.i[I_MONITOR] != 0:
        s_ = monitor_start(fns, md, buf, opt, st, st.sc[S_T], st.y[:n].copy(), st.y[n:].copy())
        if s_ != 0:
            return s_
    return 0


@_jit
def _rk_stages(fns, accel, md, buf, opt, tab, st, t, h, ns):
    """Stages 1..ns-1 of an explicit Runge--Kutta step (stage 0 is ``st.f``) and the
    new state and its derivative (rows :data:`R_YNEW`, :data:`R_FNEW` of ``st.scr``);
    returns the status."""
    N = st.y.shape[0]
    Kx = st.K
    A = tab.A
    y = st.y
    yy = st.scr[2]
    for j in range(N):
        Kx[0, j] = st.f[j]
    for s_ in range(1, ns):
        for j in range(N):
            acc = 0.0
            for k in range(s_):
                acc += Kx[k, j] * A[s_, k]
            yy[j] = y[j] + acc * h
        stt = rhs(fns, accel, md, buf, opt, st, t + tab.C[s_] * h, yy, Kx[s_])
        if stt != 0:
            return stt
    y_new = st.scr[R_YNEW]
    f_new = st.scr[R_FNEW]
    for j in range(N):
        acc = 0.0
        for k in range(ns):
            acc += Kx[k, j] * tab.B[k]
        y_new[j] = y[j] + h * acc
    stt = rhs(fns, accel, md, buf, opt, st, t + h, y_new, f_new)
    if stt != 0:
        return stt
    _put(Kx[ns], f_new)
    return 0


@_jit
def _stage_gap(C):
    """Centre and half-width (fractions of the step) of the widest gap between the
    stage abscissae ``C`` of a Runge--Kutta step and its end ``1``."""
    ns = C.shape[0]
    best = 0.0
    centre = 0.5
    for i in range(ns + 1):
        ci = C[i] if i < ns else 1.0
        nxt = 2.0
        for j in range(ns + 1):
            cj = C[j] if j < ns else 1.0
            if cj > ci and cj < nxt:
                nxt = cj
        if nxt <= 1.0 and nxt - ci > best:
            best = nxt - ci
            centre = 0.5 * (ci + nxt)
    return centre, 0.5 * best


@_jit
def passage_ahead(st, t):
    """Time from ``t`` to the singular position ahead, extrapolated (to second order)
    from the smallest scaled singular value of the rows and its rate at the last
    accepted state (:func:`accept_rows`), the curvature from the rates at the last
    two; ``inf`` when it is not falling. (Only a prediction within the next two
    steps changes a step, :func:`place_step`.)"""
    s1 = st.sc[S_NEAR]
    t1 = st.sc[S_NEAR_T]
    rate = st.sc[S_NEAR_RATE]
    if not (np.isfinite(t1) and rate < 0.0):
        return np.inf
    # quadratic extrapolation, its curvature from the rates at the last two accepted
    # states (a singular value falls faster and faster towards a passage: |cos| of
    # an angle, say; the linear extrapolation from far overestimates the time left)
    t0 = st.sc[S_NEAR_TPREV]
    acc = 0.0
    if np.isfinite(t0) and t1 > t0:
        acc = (rate - st.sc[S_NEAR_RATE_PREV]) / (t1 - t0)
    disc = rate * rate - 2.0 * acc * s1
    tau = 2.0 * s1 / (-rate + math.sqrt(disc)) if disc >= 0.0 else s1 / -rate
    d = tau - (t - t1)
    return d if d > 0.0 else np.inf


@_jit
def place_step(h, d, centre, half):
    """The step from ``t`` when a singular position is ``d`` ahead and ``h`` is the
    step the error control proposes: the step is chosen so that the singular
    position falls in the middle of the widest gap between its stages (at ``centre``
    of it), never on a stage. Close to a singular position the field has
    rounding errors growing like a power of 1/distance (the rows there determine
    the state only to ``eps / distance``); a step whose stages come closer and
    closer to it, as error control makes them while approaching it, is
    rejected again and again (the step size collapses). Stepping over it with
    every stage at least the gap's half-width away, as an integrator does at any
    other point of a smooth solution, removes the trap.

    With ``[lo, hi] = centre -+ half / 2`` the part of the gap where the singular
    position may fall (the other half of the gap is the margin for the error of
    the prediction ``d``):

    * ``d < lo h``: the straddling step ``d / centre``;
    * ``lo h <= d <= hi h`` or ``(1 + lo) h <= d``: ``h`` (it straddles it, or
      the next one can);
    * otherwise ``d - centre h``, so that the next step of the proposed size
      straddles it at ``centre``.

    The step is never longer than proposed (a longer one would be rejected by
    error control more often than not: its error grows like ``h^(p+1)``).
    """
    lo = centre - 0.5 * half
    hi = centre + 0.5 * half
    if d < lo * h:
        return d / centre
    if d <= hi * h or d >= (1.0 + lo) * h:
        return h
    return d - centre * h


@_jit
def step(fns, accel, md, buf, opt, tab, st):
    """One accepted step (scipy's step-size control for the adaptive methods)."""
    N = st.y.shape[0]
    method = opt.i[I_METHOD]
    t = st.sc[S_T]
    t1 = opt.f[F_T1]
    st.sc[S_LSQ_SIZE] = 0.0
    y_new = st.scr[R_YNEW]
    f_new = st.scr[R_FNEW]
    if method <= 1:
        h0 = opt.f[F_DT]
        t_new = st.sc[S_T0] + (st.ic[C_KSTEP] + 1) * h0
        if t_new >= t1 - 1e-9 * h0:
            t_new = t1
        h = t_new - t
        y = st.y
        f = st.f
        if method == 0:
            for j in range(N):
                y_new[j] = y[j] + h * f[j]
        else:
            k2 = st.scr[R_K2]
            k3 = st.scr[R_K3]
            k4 = st.scr[R_K4]
            ys = st.scr[R_STAGE]
            h2 = h / 2
            for j in range(N):
                ys[j] = y[j] + h2 * f[j]
            s_ = rhs(fns, accel, md, buf, opt, st, t + h / 2, ys, k2)
            if s_ == 0:
                for j in range(N):
                    ys[j] = y[j] + h2 * k2[j]
                s_ = rhs(fns, accel, md, buf, opt, st, t + h / 2, ys, k3)
            if s_ == 0:
                for j in range(N):
                    ys[j] = y[j] + h * k3[j]
                s_ = rhs(fns, accel, md, buf, opt, st, t + h, ys, k4)
            if s_ != 0:
                return s_
            h6 = h / 6
            for j in range(N):
                y_new[j] = y[j] + h6 * (f[j] + 2 * k2[j] + 2 * k3[j] + k4[j])
        s_ = rhs(fns, accel, md, buf, opt, st, t_new, y_new, f_new)
        if s_ != 0:
            return s_
        st.ic[C_KSTEP] += 1
    else:
        ns = tab.B.shape[0]
        order = 2 if method == 2 else (4 if method == 3 else 7)
        expo = -1.0 / (order + 1)
        rtol, atol = opt.f[F_RTOL], opt.f[F_ATOL]
        min_step = 10.0 * abs(np.nextafter(t, np.inf) - t)
        h_abs = min(max(st.sc[S_HABS], min_step), opt.f[F_MAXSTEP])
        d_pass = passage_ahead(st, t)
        centre = 0.5
        half = 0.0
        if d_pass < np.inf:
            centre, half = _stage_gap(tab.C)
        rejected = False
        shortened = False
        h_prop = h_abs
        h_rej = np.inf
        while True:
            if h_abs < min_step:
                return STEP_TOO_SMALL
            if d_pass < np.inf:
                h_prop = h_abs
                hp = place_step(h_abs, d_pass, centre, half)
                if rejected and hp > 0.9 * h_rej:
                    # after a rejection the step must shrink, by as much as error control
                    # shrinks it (0.9 at least), else it repeats forever
                    hp = d_pass - centre * h_abs if d_pass > centre * h_abs else h_abs
                    if hp > 0.9 * h_rej:
                        hp = h_abs
                if hp < min_step:
                    hp = h_abs                 # the passage is at t itself: nothing to place
                h_abs = hp
                shortened = h_abs < h_prop
            t_new = t + h_abs
            if t_new > t1:
                t_new = t1
            h = t_new - t
            h_abs = abs(h)
            s_ = _rk_stages(fns, accel, md, buf, opt, tab, st, t, h, ns)
            if s_ != 0:
                return s_
            scale = st.scr[R_SCALE]
            for i in range(N):
                scale[i] = atol + max(abs(st.y[i]), abs(y_new[i])) * rtol
            if method == 4:
                e5 = 0.0
                e3 = 0.0
                for j in range(N):
                    a5 = 0.0
                    a3 = 0.0
                    for k in range(ns + 1):
                        a5 += st.K[k, j] * tab.E5[k]
                        a3 += st.K[k, j] * tab.E3[k]
                    e5 += (a5 / scale[j]) ** 2
                    e3 += (a3 / scale[j]) ** 2
                if e5 == 0.0 and e3 == 0.0:
                    err = 0.0
                else:
                    err = abs(h) * e5 / math.sqrt((e5 + 0.01 * e3) * N)
            else:
                acc2 = 0.0
                for j in range(N):
                    a_ = 0.0
                    for k in range(ns + 1):
                        a_ += st.K[k, j] * tab.E[k]
                    acc2 += (a_ * h / scale[j]) ** 2
                err = math.sqrt(acc2 / N)
            if err < 1.0:
                factor = 10.0 if err == 0.0 else min(10.0, 0.9 * err ** expo)
                if rejected:
                    factor = min(1.0, factor)
                h_abs *= factor
                if shortened:
                    # a step shortened to place a singular position says nothing
                    # against the proposed one
                    h_abs = max(h_abs, h_prop * min(1.0, factor))
                break
            h_rej = h_abs
            h_abs *= max(0.2, 0.9 * err ** expo)
            rejected = True
            st.ic[C_NREJ] += 1
        st.sc[S_HABS] = h_abs
    _put(st.y_old, st.y)
    _put(st.f_old, st.f)
    st.sc[S_TOLD] = t
    st.sc[S_HPREV] = t_new - t
    _put(st.y, y_new)
    _put(st.f, f_new)
    st.sc[S_T] = t_new
    st.ic[C_DENSE] = 0
    return 0


@_jit
def _emit(st, t, y):
    i = st.ic[C_NOUT]
    st.out_t[i] = t
    _put(st.out_y[i], y)
    st.ic[C_NOUT] = i + 1


@_jit
def _after_step(fns, accel, md, buf, opt, tab, st):
    """Projection of the accepted state, outputs, references, rank monitor, least-squares
    record; a projected state restarts the derivative (first-same-as-last)."""
    n = md.dims[D_N]
    method = opt.i[I_METHOD]
    t_prev = st.sc[S_TOLD]
    t = st.sc[S_T]
    if opt.i[I_DENSE] != 0:
        s_ = prepare_dense(fns, accel, md, buf, opt, tab, st, method)
        if s_ != 0:
            return s_
    y_new = st.scr[R_ACC]
    _put(y_new, st.y)
    qv = st.scr[R_PROJ]                 # (the projection works on a copy)
    changed = False
    if opt.i[I_STAB] == STAB_PROJECTION:
        _put(qv, y_new)
        ps, its = project(fns, md, buf, opt, t, qv[:n], qv[n:], vanished_floor(st))
        if ps != 0:
            st.sc[S_FAIL_T] = t
            _put(st.fail_y, y_new)
            return MODEL_FAILED if ps == MODEL_FAILED else K.NONFINITE
        if its > 0:
            _put(y_new, qv)
            changed = True
            st.ic[C_NPROJ] += 1
    # outputs
    if st.t_eval.shape[0] == 0:
        _emit(st, t, y_new)
    else:
        while st.ic[C_IEVAL] < st.t_eval.shape[0] and st.t_eval[st.ic[C_IEVAL]] <= t:
            te = st.t_eval[st.ic[C_IEVAL]]
            if te == t:
                _emit(st, te, y_new)
            else:
                s_ = prepare_dense(fns, accel, md, buf, opt, tab, st, method)
                if s_ != 0:
                    return s_
                ye = st.scr[R_OUT]
                dense_eval(method, st, tab, te, ye)
                if opt.i[I_STAB] == STAB_PROJECTION:
                    _put(qv, ye)
                    ps, its = project(fns, md, buf, opt, te, qv[:n], qv[n:],
                                      vanished_floor(st))
                    if ps != 0:
                        st.sc[S_FAIL_T] = te
                        _put(st.fail_y, ye)
                        return MODEL_FAILED if ps == MODEL_FAILED else K.NONFINITE
                    _put(ye, qv)
                _emit(st, te, ye)
            st.ic[C_IEVAL] += 1
    s_ = accept_rows(fns, md, buf, opt, st, t, y_new[:n], y_new[n:])     # (reads them)
    if s_ != 0:
        return s_
    if opt.i[I_MONITOR] != 0:
        s_ = monitor_update(fns, accel, md, buf, opt, tab, st, method, t_prev, t, y_new)
        if s_ != 0:
            return s_
    if st.sc[S_LSQ_SIZE] > 0.0:
        i = st.ic[C_NLSQ]
        if i < st.lsq_f.shape[0]:
            st.lsq_f[i, 0] = st.sc[S_LSQ_T]
            st.lsq_f[i, 1] = st.sc[S_LSQ_SIZE]
            st.ic[C_NLSQ] = i + 1
        st.sc[S_LSQ_SIZE] = 0.0
    if changed:
        _put(st.y, y_new)
        f = st.scr[R_F]
        s_ = rhs(fns, accel, md, buf, opt, st, t, y_new, f)
        if s_ != 0:
            return s_
        _put(st.f, f)
    return 0


#: status of :func:`advance` when a buffer (outputs, events) must grow before going on
BUFFER_FULL = 15


@_jit
def _advance(fns, accel, md, buf, opt, tab, st, chunk):
    """Integrate until the end, a failure, ``chunk`` accepted steps or a full buffer."""
    t1 = opt.f[F_T1]
    for _ in range(chunk):
        if st.sc[S_T] >= t1:
            return FINISHED
        if st.ic[C_STEPS] >= opt.i[I_MAXSTEPS]:
            return MAX_STEPS
        if st.t_eval.shape[0] == 0 and st.ic[C_NOUT] >= st.out_t.shape[0]:
            return BUFFER_FULL
        if st.ic[C_NEV] + 4 >= st.ev_f.shape[0]:
            return BUFFER_FULL
        s_ = step(fns, accel, md, buf, opt, tab, st)
        if s_ != 0:
            return s_
        st.ic[C_STEPS] += 1
        s_ = _after_step(fns, accel, md, buf, opt, tab, st)
        if s_ != 0:
            return s_
    return FINISHED if st.sc[S_T] >= t1 else CHUNK_DONE


# --------------------------------------------------------------------------- output samples
@_jit
def sample(fns, accel, md, buf, opt, ref, sref, t, q, v, out_a, out_qc, out_lam, out_f, w):
    """Diagnostics of one output sample: accelerations, constraint force, multipliers;
    ``out_f`` = (position residual, velocity residual, acceleration residual, energy,
    rank, sigma_min). Returns the kernel status (0 ok)."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    mh = md.dims[D_MH]
    mv = md.dims[D_MV]
    for i in range(6):
        out_f[i] = np.nan
    if mh > 0:
        if call_pos(fns, md, buf, t, q) == 0:
            out_f[0] = K._norm2(buf.phi)
    else:
        out_f[0] = 0.0
    if mv > 0:
        if call_vel(fns, md, buf, t, q, v) == 0:
            out_f[1] = K._norm2(buf.r)
    else:
        out_f[1] = 0.0
    if md.dims[D_ENERGY] != 0:
        if call_energy(fns, md, buf, t, q, v) == 0:
            out_f[3] = buf.e[0]
    a = np.empty(n)
    status, r, mL, k, rho, allow, be, flags = evaluate_step(
        fns, accel, md, buf, opt, ref, sref, t, q, v, a, True, w)
    if status != 0:
        return status
    lam = K._vec(w, K.F_lam, m)
    out_a[:] = a
    out_lam[:] = lam
    out_f[4] = r
    if uses_sparse(flags):
        out_f[2] = band_force(md, a, out_qc, np.empty(m))
        out_f[5] = SP.sigma_estimate(md.band.sp, md.band.w)
        return 0
    s = K._vec(w, K.F_s, k)
    M = buf.M.reshape(n, n)
    for i in range(n):
        acc = -buf.F[i]
        for j in range(n):
            acc += M[i, j] * a[j]
        out_qc[i] = acc
    if m > 0:
        A = buf.A.reshape(m, n)
        res = np.empty(m)
        for i in range(m):
            acc = -buf.b[i]
            for j in range(n):
                acc += A[i, j] * a[j]
            res[i] = acc
        out_f[2] = K._norm2(res)
        out_f[5] = s[r - 1] if r > 0 else 1.0
    else:
        out_f[2] = 0.0
        out_f[5] = 1.0
    return 0


@_jit
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


@_jit
def sample_all(addrs, md, buf, opt, ref, sref, ts, ys, A_out, Qc_out, lam_out, F_out,
               status_out):
    """:func:`sample` at every output; a failing sample keeps NaN (its status is kept)."""
    fns, accel = functions(addrs)
    n = md.dims[D_N]
    w = K.make_work(n, md.dims[D_M])
    for i in range(ts.shape[0]):
        status_out[i] = sample(fns, accel, md, buf, opt, ref, sref, ts[i], ys[i, :n].copy(),
                               ys[i, n:].copy(), A_out[i], Qc_out[i], lam_out[i], F_out[i], w)


# --------------------------------------------------------------------------- entry points
# Python passes the model functions as addresses (``ModelFunctions.addrs``): numba
# types and unboxes first-class function objects slowly (~80 us per call).
@_jit
def start(addrs, md, buf, opt, tab, st):
    """The first RHS and step size of a run (status as :func:`advance`)."""
    fns, accel = functions(addrs)
    return _start(fns, accel, md, buf, opt, tab, st)


@_jit
def advance(addrs, md, buf, opt, tab, st, chunk):
    """Advance the run by at most ``chunk`` accepted steps (status code)."""
    fns, accel = functions(addrs)
    return _advance(fns, accel, md, buf, opt, tab, st, chunk)


@_jit
def after_step(addrs, md, buf, opt, tab, st):
    """What follows an accepted step that another integrator took (status code)."""
    fns, accel = functions(addrs)
    return _after_step(fns, accel, md, buf, opt, tab, st)


@_jit
def rhs_at(addrs, md, buf, opt, st, t, y, out):
    """:func:`rhs` for an integrator outside the engine."""
    fns, accel = functions(addrs)
    return rhs(fns, accel, md, buf, opt, st, t, y, out)


@_jit
def initial_step_at(addrs, md, buf, opt, st, order):
    """:func:`initial_step` from Python: ``(status, h)`` at the run's current state."""
    fns, accel = functions(addrs)
    return initial_step(fns, accel, md, buf, opt, st, order)


@_jit
def project_at(addrs, md, buf, opt, t, q, v, vanished):
    """:func:`project` from Python."""
    fns, accel = functions(addrs)
    return project(fns, md, buf, opt, t, q, v, vanished)
