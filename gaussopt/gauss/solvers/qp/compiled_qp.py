"""Compiled pieces of the QP step: two calls around the backend's solve.

:class:`~gaussopt.gauss.solvers.QP` with the Clarabel backend spends one step in
three calls: :func:`prepare` (checks, the shared rank decision
:func:`gaussopt.gauss.dense_step.decide`, the reduced QP's data scaled as
:class:`~gaussopt.gauss.solvers.qp.clarabel_qp.ClarabelQP` passes them to Clarabel),
Clarabel's update and solve (:meth:`ClarabelQP.solve_values`), and
:func:`finish` (the answer mapped back, its verification
:func:`gaussopt.gauss.dense_step.check` with the inequality rows' feasibility and
complementarity, the multipliers, ``M a - F``, the Gauss value, the residual).
The arithmetic is that of the Python path in :mod:`gaussopt.gauss.solvers.qp.qp_solver`
(which stays the path of every case these calls hand back: :data:`DEFER`).
A model with compiled functions (:mod:`gaussopt.core.model_interface`) is evaluated inside
:func:`prepare_model`, without Python between the model and Clarabel.

Everything lives in one float and one integer buffer per problem size
(:func:`layout`). With a compiled model the buffers and the model's arrays are
held in a :class:`QPContext`, built once: :func:`prepare_at` and
:func:`finish_at` unbox it and a few arrays (each array argument costs
~0.1 us, so the nineteen of :func:`prepare_model` cost 2 us of a 14 us step).
"""

from __future__ import annotations

import math

import numpy as np
from numba.core import types
from numba.experimental import structref

import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
from gaussopt.core.views import wfull, wivec, wmat, wvec
import gaussopt.gauss.dense_algebra as LA
from gaussopt.core.compiled import declare_types, jit, unit
from gaussopt.gauss.compiled_step import NULL_FORCE_RTOL, entry_point, null_force
from gaussopt.core.model_interface import data_ptr, functions
from gaussopt.gauss.solvers.qp.clarabel_qp import _scale_kernel

__all__ = ["layout", "entry_point", "prepare", "prepare_model", "finish", "QPContext",
           "make_context", "prepare_at", "finish_at", "DEFER", "R_GAUSS", "R_BE", "R_RHO", "R_ALLOW",
           "R_RESID", "R_DROPPED", "R_K", "R_KEPT", "N_RES", "H_WGT", "H_ML", "H_R", "H_K", "H_CNORM",
           "H_FLAGS", "H_SA", "H_S", "H_DMIN", "H_STATUS", "N_HEAD", "O_RANKTOL", "O_CHECKSYM",
           "O_SCALING", "O_COST", "O_VERIFY", "N_OPTS"]

#: How the step is compiled (:mod:`gaussopt.core.compiled`): :func:`prepare`, :func:`finish`
#: and the two entry points of a compiled model are units; the rest is inlined.
_jit = jit(cache=True, nogil=True)


def _unit(signature: str):
    return unit(signature, python=True, nogil=True)

#: a case the compiled calls leave to the Python path (which raises the specific error,
#: takes the robust path, or runs the objective-mismatch check)
DEFER = 1

# header of the float buffer: what prepare found, for finish and for Python
H_WGT, H_ML, H_R, H_K, H_CNORM, H_FLAGS, H_SA, H_S, H_DMIN, H_STATUS = range(10)
N_HEAD = 10

# the step's scalar results, at the head of the results block (offset ``oo``):
# the Gauss value, the backward error, the inconsistency and its allowance
# (:func:`gaussopt.gauss.dense_step.check`), ``max |A a - b|``, the number of vanished rows,
# the number of singular values, whether vanished rows were kept
R_GAUSS, R_BE, R_RHO, R_ALLOW, R_RESID, R_DROPPED, R_K, R_KEPT = range(8)
N_RES = 8

# options: rank_tol, check symmetry, Clarabel's primary scaling code, cost scaling, verify_tol
O_RANKTOL, O_CHECKSYM, O_SCALING, O_COST, O_VERIFY = range(5)
N_OPTS = 5


@_jit
def _copy(dst, src):
    for i in range(src.shape[0]):
        dst[i] = src[i]


@_jit
def _fill(dst, x):
    for i in range(dst.shape[0]):
        dst[i] = x


def _layout(n, m, p):
    """Offsets in the float buffer (``Pv qv Av bv`` the unscaled values on Clarabel's
    dense pattern, ``Po qo Ao bo`` the scaled ones, ``d rinv`` the scaling, ``gn``
    the inequality rows' norms, then the step's results -- the scalars ``R_*``,
    ``a mu Qc lam sigma``, one block that Python copies once -- and ``Feff``) and the
    integer buffer (the patterns' rows and columns), for ``n`` coordinates, ``m``
    equality rows and ``p`` inequality rows (at most ``min(m, n) + p`` rows reach
    the QP). The offsets of the results block come last: ``oo olam osig``."""
    R = min(m, n) + p
    nP = n * (n + 1) // 2
    oPv = N_HEAD
    oqv = oPv + nP
    oAv = oqv + n
    obv = oAv + R * n
    oPo = obv + R
    oqo = oPo + nP
    oAo = oqo + n
    obo = oAo + R * n
    od = obo + R
    orinv = od + n
    ogn = orinv + R
    oo = ogn + p
    oa = oo + N_RES
    omu = oa + n
    oQc = omu + p
    olam = oQc + n
    osig = olam + m
    oFe = osig + min(m, n)
    nf = oFe + n
    oPr = 0
    oPc = nP
    oAr = 2 * nP
    oAc = 2 * nP + R * n
    ni = 2 * nP + 2 * R * n
    return (oPv, oqv, oAv, obv, oPo, oqo, oAo, obo, od, orinv, ogn, oa, omu, oQc, oFe, nf,
            oPr, oPc, oAr, oAc, ni, oo, olam, osig)


_clayout = _jit(_layout)


def layout(n: int, m: int, p: int) -> tuple:
    """:func:`_layout` from Python (see there)."""
    return _layout(n, m, p)


@_jit
def _finite(M, F, A, b, G, h):
    return (LA.all_finite2(M) and LA.all_finite1(F) and LA.all_finite2(A) and LA.all_finite1(b)
            and LA.all_finite2(G) and LA.all_finite1(h))


@_unit("UniTuple(i8, 2)(f8m, f8v, f8m, f8v, f8m, f8v, f8v, f8v, f8v, f8v, i8v, f8v, i8v, f8m)")
def prepare(M, F, A, b, G, h, ref, sref, opt, wf, wi, fb, ib, Pn):
    """Checks, the rank decision and the scaled data of the reduced QP.

    Parameters
    ----------
    M (n, n), F (n,), A (m, n), b (m,), G (p, n), h (p,) : the step's data
    ref : (m,) reference row scales (zeros: none)
    sref : (1,) reference of the smallest singular value
    opt : (N_OPTS,) options (``O_*``)
    wf, wi : the kernel workspace's buffers (:data:`gaussopt.gauss.dense_step.Work`)
    fb, ib : the float and integer buffers (:func:`layout`)
    Pn : (n, n) the projector ``M M^+`` of a constant singular ``M`` (else (0, 0)):
        a force with a part in ``null(M)`` is left to the Python path

    Returns
    -------
    (code, r) : 0, or :data:`DEFER` (non-finite or asymmetric data, an indeterminate
    motion without inequality rows, a force in ``null(M)``); the rank ``r``.

    Writes the header (``H_*``), the unscaled values of the QP passed to Clarabel
    (``P = M / w`` upper triangle by columns, ``q = -F / (w s_a)``, the rows
    ``[V_r^T; -G/|G|]`` by columns, ``[beta / s_a; -h / (|G| s_a)]``), the same
    scaled with Clarabel's primary scaling (:func:`~gaussopt.gauss.solvers.qp.clarabel_qp._scale_kernel`)
    and the patterns.
    """
    n = M.shape[0]
    m = A.shape[0]
    p = G.shape[0]
    (oPv, oqv, oAv, obv, oPo, oqo, oAo, obo, od, orinv, ogn, oa, omu, oQc, oFe, nf,
     oPr, oPc, oAr, oAc, ni, oo, olam, osig) = _clayout(n, m, p)
    if opt[O_CHECKSYM] != 0.0 and K.asymmetric(M):
        return DEFER, 0
    if not _finite(M, F, A, b, G, h):
        return DEFER, 0
    if null_force(Pn, F, n) > NULL_FORCE_RTOL:     # the force has a part in null(M)
        return DEFER, 0
    w = WS.Work(wf, wi)
    status, wgt, mL, r, k, c_norm, dmin, flags = K.decide(M, A, b, ref, sref[0], opt[O_RANKTOL], w)
    if status != K.OK and p == 0:
        return DEFER, r
    # inequality rows normalized; the acceleration scale s_a
    gn = fb[ogn:ogn + p]
    hmax = 0.0
    for i in range(p):
        acc = 0.0
        for j in range(n):
            acc += G[i, j] * G[i, j]
        g = math.sqrt(acc)
        gn[i] = g if g > 0.0 else 1.0
        hmax = max(hmax, abs(h[i] / gn[i]))
    nF = 0.0
    for i in range(n):
        nF += F[i] * F[i]
    beta = wvec(w, WS.F_beta, r)
    nb2 = 0.0
    for i in range(r):
        nb2 += beta[i] * beta[i]
    sa = max(math.sqrt(nF) / wgt, math.sqrt(nb2), hmax)
    sa = sa if sa > 0.0 and np.isfinite(sa) else 1.0
    # Clarabel's data on the dense pattern (columns of the upper triangle of P; columns
    # of the rows [V_r^T; -Gs]), unscaled
    rr = r + p
    nP = n * (n + 1) // 2
    Pv = fb[oPv:oPv + nP]
    Prow = ib[oPr:oPr + nP]
    Pcol = ib[oPc:oPc + nP]
    kk = 0
    for j in range(n):
        for i in range(j + 1):
            Pv[kk] = M[i, j] / wgt
            Prow[kk] = i
            Pcol[kk] = j
            kk += 1
    qv = fb[oqv:oqv + n]
    ws = wgt * sa
    for j in range(n):
        qv[j] = -(F[j] / ws)
    V = wmat(w, WS.F_V, n, n)
    Av = fb[oAv:oAv + rr * n]
    Arow = ib[oAr:oAr + rr * n]
    Acol = ib[oAc:oAc + rr * n]
    kk = 0
    for j in range(n):
        for i in range(r):
            Av[kk] = V[j, i]
            Arow[kk] = i
            Acol[kk] = j
            kk += 1
        for i in range(p):
            Av[kk] = -(G[i, j] / gn[i])
            Arow[kk] = r + i
            Acol[kk] = j
            kk += 1
    bv = fb[obv:obv + rr]
    for i in range(r):
        bv[i] = beta[i] / sa
    for i in range(p):
        bv[r + i] = -((h[i] / gn[i]) / sa)
    # scaled as ClarabelQP's primary attempt scales them
    Po = fb[oPo:oPo + nP]
    qo = fb[oqo:oqo + n]
    Ao = fb[oAo:oAo + rr * n]
    bo = fb[obo:obo + rr]
    d = fb[od:od + n]
    rinv = fb[orinv:orinv + rr]
    code = int(opt[O_SCALING])
    if code == 2:                              # "none"
        _copy(Po, Pv)
        _copy(qo, qv)
        _copy(Ao, Av)
        _copy(bo, bv)
        _fill(d, 1.0)
        _fill(rinv, 1.0)
        s = 1.0
    else:
        s = _scale_kernel(Pv, qv, Av, bv, Prow, Pcol, Arow, Acol, code, opt[O_COST] != 0.0,
                          Po, qo, Ao, bo, d, rinv)
        if code == 1:
            _fill(d, 1.0)
    fb[H_WGT] = wgt
    fb[H_ML] = mL
    fb[H_R] = r
    fb[H_K] = k
    fb[H_CNORM] = c_norm
    fb[H_FLAGS] = flags
    fb[H_SA] = sa
    fb[H_S] = s
    fb[H_DMIN] = dmin
    fb[H_STATUS] = status
    return 0, r


@_jit
def prepare_model(addrs, par, t, q, v, M, F, A, b, G, h, ref, sref, opt, wf, wi, fb, ib, Pn):
    """:func:`prepare` after evaluating a compiled model (:mod:`gaussopt.core.model_interface`: the
    functions at ``addrs`` with the parameters ``par``) into ``M``, ``F``, ``A``,
    ``b``; :data:`DEFER` for a non-finite ``q``/``v`` or a failed model call."""
    n = q.shape[0]
    for i in range(n):
        if not (np.isfinite(q[i]) and np.isfinite(v[i])):
            return DEFER, 0
    fns, accel = functions(addrs)
    # (data pointers, not .ctypes: see gaussopt.integrate.engine on reference counting)
    if fns[0](t, data_ptr(q), data_ptr(v), data_ptr(par), data_ptr(M), data_ptr(F)) != 0:
        return DEFER, 0
    if A.shape[0] > 0 and fns[1](t, data_ptr(q), data_ptr(v), data_ptr(par), data_ptr(A),
                                 data_ptr(b)) != 0:
        return DEFER, 0
    return prepare(M, F, A, b, G, h, ref, sref, opt, wf, wi, fb, ib, Pn)


@jit(cache=True, nogil=True, python=True)     # (Python calls it too)
def _norm(x):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i] * x[i]
    return math.sqrt(acc)


@_unit("i8(f8m, f8v, f8m, f8v, f8m, f8v, f8v, f8v, f8v, f8v, f8v, i8v, f8v, b1)")
def finish(M, F, A, b, G, h, ref, xs, zs, opt, wf, wi, fb, want_lam):
    """The QP's answer back in the caller's units, verified; the step's diagnostics.

    ``xs``, ``zs`` are Clarabel's primal and dual solution of the scaled problem
    whose scaling (``d``, ``rinv``, ``s``) is in the buffer: ``a = s_a d xs``,
    ``mu_i = w s_a max(zs_i rinv_i / s, 0) / |G_i|``.

    Returns
    -------
    code : 0, or :data:`DEFER` (a non-finite answer, a backward error above
    ``verify_tol`` or a kernel status other than OK: the Python path takes it from
    there).

    Writes the results block of the buffer (:func:`layout`, offset ``oo``): the
    scalars ``R_*`` (the Gauss value ``0.5 a^T M a - a^T F``, the backward error,
    the inconsistency and its allowance (:func:`gaussopt.gauss.dense_step.check`), ``max |A a
    - b|``, the number of vanished rows, the number of singular values, whether
    vanished rows were kept: :func:`gaussopt.gauss.dense_step.decide`'s flag), ``a``, ``mu``,
    ``M a - F``, with ``want_lam`` the multipliers (:func:`gaussopt.gauss.dense_step.multipliers`),
    and the singular values; and ``F + G^T mu`` after the block.
    """
    n = M.shape[0]
    m = A.shape[0]
    p = G.shape[0]
    (oPv, oqv, oAv, obv, oPo, oqo, oAo, obo, od, orinv, ogn, oa, omu, oQc, oFe, nf,
     oPr, oPc, oAr, oAc, ni, oo, olam, osig) = _clayout(n, m, p)
    res = fb[oo:oo + N_RES]
    wgt = fb[H_WGT]
    mL = int(fb[H_ML])
    r = int(fb[H_R])
    k = int(fb[H_K])
    c_norm = fb[H_CNORM]
    sa = fb[H_SA]
    s = fb[H_S]
    d = fb[od:od + n]
    rinv = fb[orinv:orinv + r + p]
    gn = fb[ogn:ogn + p]
    a = fb[oa:oa + n]
    mu = fb[omu:omu + p]
    Fe = fb[oFe:oFe + n]
    for i in range(n):
        if not np.isfinite(xs[i]):
            return DEFER
        a[i] = sa * (xs[i] * d[i])
    inv_s = 1.0 / s
    ws = wgt * sa
    for i in range(p):
        z = (zs[r + i] * inv_s) * rinv[r + i]
        mu[i] = (ws * max(z, 0.0)) / gn[i]
    for j in range(n):
        acc = 0.0
        for i in range(p):
            acc += G[i, j] * mu[i]
        Fe[j] = F[j] + acc
    w = WS.Work(wf, wi)
    if int(fb[H_STATUS]) == K.OK:
        # polish: with the inequality forces G^T mu fixed, the equality part is the
        # closed form of the rank decision made in prepare (exact to rounding; an
        # interior-point answer is accurate only to its stopping tolerances, which an
        # integrator at rtol 1e-12 sees as noise). The checks below verify the result.
        K.closed_form(M, Fe, wgt, mL, r, w)
        ac = wfull(w, WS.F_a)
        for i in range(n):
            a[i] = ac[i]
    status, rho, allow, be = K.check(M, Fe, A, b, ref, opt[O_RANKTOL], mL, r, k, c_norm, a, w)
    Qc = fb[oQc:oQc + n]
    g1 = 0.0
    g2 = 0.0
    nMa = 0.0
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += M[i, j] * a[j]
        Qc[i] = acc - F[i]
        g1 += (0.5 * a[i]) * acc
        g2 += a[i] * F[i]
        nMa += acc * acc
    gauss = g1 - g2
    if p > 0:
        # inequality rows, dimensionless: slack relative to |G_i| |a| + |h_i|, force share
        # mu_i |G_i| relative to |M a| + |F|; violation and complementarity
        na = _norm(a)
        den_f = math.sqrt(nMa) + _norm(F) + 1e-300
        for i in range(p):
            acc = 0.0
            g2 = 0.0
            for j in range(n):
                acc += G[i, j] * a[j]
                g2 += G[i, j] * G[i, j]
            g = math.sqrt(g2)
            sn = (acc - h[i]) / max(g * na + abs(h[i]), 1e-300)
            fn = mu[i] * g / den_f
            be = max(be, max(-sn, 0.0), abs(fn * sn))
    if not be <= opt[O_VERIFY] or status != K.OK:
        return DEFER
    if want_lam:
        K.multipliers(M, Fe, a, A, mL, r, k, w)
        lam = wvec(w, WS.F_lam, m)
        for i in range(m):
            fb[olam + i] = lam[i]
    sig = wvec(w, WS.F_s, k)
    for i in range(k):
        fb[osig + i] = sig[i]
    resid = 0.0
    for i in range(m):
        acc = -b[i]
        for j in range(n):
            acc += A[i, j] * a[j]
        resid = max(resid, abs(acc))
    live = wivec(w, WS.I_live, m)
    dropped = 0
    for i in range(m):
        if not live[i]:
            dropped += 1
    res[R_GAUSS] = gauss
    res[R_BE] = be
    res[R_RHO] = rho
    res[R_ALLOW] = allow
    res[R_RESID] = resid
    res[R_DROPPED] = dropped
    res[R_K] = k
    res[R_KEPT] = 1.0 if (int(fb[H_FLAGS]) & 2) != 0 else 0.0
    return 0


@structref.register
class _QPContextType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class QPContext(structref.StructRefProxy):
    """What :func:`prepare_at` and :func:`finish_at` take besides the state, built once
    per problem size (:func:`make_context`): the compiled model's function addresses,
    parameters and output arrays ``M F A b``, the running reference of the smallest
    singular value, the options, the kernel workspace, the float and integer buffers,
    the projector ``M M^+`` of a constant singular ``M`` and its empty stand-in, and
    Clarabel's solution arrays ``xs``, ``zs``. The same arrays as Python holds, no
    copies; Python never reads through it."""


structref.define_proxy(QPContext, _QPContextType,
                       ["addrs", "par", "M", "F", "A", "b", "sref", "opt", "wf", "wi", "fb",
                        "ib", "P", "noP", "xs", "zs"])


@declare_types
def _types() -> dict:
    """``qpctx``: the numba type of a :class:`QPContext` (for the units' signatures)."""
    f8v, f8m, i8v = types.float64[::1], types.float64[:, ::1], types.int64[::1]
    return {"qpctx": _QPContextType([
        ("addrs", i8v), ("par", f8v), ("M", f8m), ("F", f8v), ("A", f8m), ("b", f8v),
        ("sref", f8v), ("opt", f8v), ("wf", f8v), ("wi", i8v), ("fb", f8v), ("ib", i8v),
        ("P", f8m), ("noP", f8m), ("xs", f8v), ("zs", f8v)])}


@unit("qpctx(i8v, f8v, f8m, f8v, f8m, f8v, f8v, f8v, f8v, i8v, f8v, i8v, f8m, f8m, f8v, f8v)", python=True)
def make_context(addrs, par, M, F, A, b, sref, opt, wf, wi, fb, ib, P, noP, xs, zs):
    """A :class:`QPContext` (compiled: no compilation per process)."""
    return QPContext(addrs, par, M, F, A, b, sref, opt, wf, wi, fb, ib, P, noP, xs, zs)


@_unit("UniTuple(i8, 2)(qpctx, f8m, f8v, f8v, f8, f8v, f8v, b1)")
def prepare_at(ctx, G, h, ref, t, q, v, full):
    """:func:`prepare_model` on the context's arrays (``full``: with the projector
    ``ctx.P``, which a full result checks against)."""
    return prepare_model(ctx.addrs, ctx.par, t, q, v, ctx.M, ctx.F, ctx.A, ctx.b, G, h, ref,
                         ctx.sref, ctx.opt, ctx.wf, ctx.wi, ctx.fb, ctx.ib,
                         ctx.P if full else ctx.noP)


@_unit("i8(qpctx, f8m, f8v, f8v, b1)")
def finish_at(ctx, G, h, ref, full):
    """:func:`finish` on the context's arrays (``full``: with the multipliers)."""
    return finish(ctx.M, ctx.F, ctx.A, ctx.b, G, h, ref, ctx.xs, ctx.zs, ctx.opt, ctx.wf,
                  ctx.wi, ctx.fb, full)
