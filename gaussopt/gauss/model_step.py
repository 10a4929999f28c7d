"""The step as the engine takes it: the model's functions called through their
pointers, Baumgarte's correction, and :func:`evaluate_step` (the O(n) path of
:mod:`gaussopt.gauss.band_step` where the model has one, else the dense kernel)."""

from __future__ import annotations

import math

import numpy as np

import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
from gaussopt.core.views import as_matrix, wfull, wivec, wmat, wvec
import gaussopt.gauss.dense_algebra as LA
import gaussopt.gauss.band_step as SP
from gaussopt.core.compiled import jit, unit
from gaussopt.core.model_interface import (R_BEF, R_BES, R_CLOSED, R_DMIN, R_SIG, _function_at,
                                           data_ptr, recursive_parts, recursive_rows)
from gaussopt.core.records import *  # noqa: F401,F403 - the indices and codes of the records
from gaussopt.core.records import ModelData


#: the large functions are units (:mod:`gaussopt.core.compiled`: compiled once, called
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
    """The flat buffer ``x`` as an ``(r, c)`` matrix (a view: :func:`gaussopt.gauss.dense_step.as_matrix`;
    C-contiguous like the arrays Python passes, so the kernel is compiled once for both)."""
    return as_matrix(x[:r * c], r, c)


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
    """The sparse model's ``d`` (diagonal or blocks of M) and ``F`` into ``md.band.w``."""
    _put(buf.q, q)
    _put(buf.v, v)
    w = md.band.w
    return _function_at(md.band.addrs[0])(t, data_ptr(buf.q), data_ptr(buf.v),
                                         data_ptr(md.band.p), data_ptr(w.d), data_ptr(w.F))


@_unit("i8(md, buf, f8, f8v)", lazy=True)
def call_sp_pos(md, buf, t, q):
    """The sparse model's ``pos``: ``phi`` and ``Phi_t`` into ``buf``, the position
    Jacobian (in the rows' pattern) into ``md.band.w.data``."""
    _put(buf.q, q)
    return _function_at(md.band.addrs[2])(t, data_ptr(buf.q), data_ptr(md.band.p),
                                         data_ptr(buf.phi), data_ptr(md.band.w.data),
                                         data_ptr(buf.phit))


@_unit("i8(md, buf, f8, f8v, f8v)", lazy=True)
def call_sp_rows(md, buf, t, q, v):
    """The sparse model's rows (``data`` in the pattern) and ``b`` into ``md.band.w``."""
    _put(buf.q, q)
    _put(buf.v, v)
    w = md.band.w
    return _function_at(md.band.addrs[1])(t, data_ptr(buf.q), data_ptr(buf.v),
                                         data_ptr(md.band.p), data_ptr(w.data), data_ptr(w.b))


# --------------------------------------------------------------------------- the step
@_unit("i8(md, buf, f8, f8v, f8v)", lazy=True)
def call_tree(md, buf, t, q, v):
    """The recursive step of a tree (``md.band.mode == MODE_TREE``) at ``(t, q, v)``: its
    output into ``md.band.w.d`` (:class:`~gaussopt.core.model_interface.RecursiveModel`),
    its status returned."""
    _put(buf.q, q)
    _put(buf.v, v)
    return _function_at(md.band.addrs[0])(t, data_ptr(buf.q), data_ptr(buf.v),
                                         data_ptr(md.band.p), data_ptr(md.band.w.d),
                                         data_ptr(md.band.w.d))


@_unit("f8(md, buf, opt, f8v, f8v, f8, f8v, f8v, f8v, b1, w)", lazy=True)
def _tree_step(md, buf, opt, ref, sref, t, q, v, a, want_lam, w):
    """The recursive step of a tree, accepted where the dense kernel's range-space path
    would accept its answer: every articulated pivot at least ``rank_tol`` (relative, as
    :func:`gaussopt.gauss.dense_step.range_space`'s ``dmin``) and both backward errors
    within :func:`gaussopt.gauss.dense_step.direct_tolerance`. Returns its backward error,
    or -1 where the dense kernel must take the step.

    With rows beside the balls' normalizations (closures, couplings: the step's
    ``R_CLOSED``), the dense kernel's own rank decision is made on all the rows, as the
    step evaluated them (:func:`gaussopt.core.model_interface.recursive_rows`;
    :func:`gaussopt.gauss.dense_step.reduce_rows`: the same thresholds, the run's row
    references ``ref`` and singular value reference ``sref``), and the recursion's answer
    is taken only where it keeps every row: a redundant, vanished or folded direction is
    the dense kernel's to decide. The smallest singular value of the normalized rows is
    then the step's ``R_SIG`` (:func:`path_sigma`)."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    if call_tree(md, buf, t, q, v) != 0:
        return -1.0
    a_, _, _, lam_, _, sc = recursive_parts(md.band.w.d, n, m)
    be = max(sc[R_BEF], sc[R_BES])
    if not (sc[R_DMIN] >= opt.f[F_RANKTOL] and be <= K.direct_tolerance(n, m)):
        return -1.0
    if sc[R_CLOSED] > 0.0:
        Af, bf = recursive_rows(md.band.w.d, n, m)          # (the step's own evaluation)
        mL, r, k, _ = K.reduce_rows(_matrix(Af, m, n), bf, ref, sref[0],
                                    opt.f[F_RANKTOL], False, w)
        if mL != m or r != m:
            return -1.0
        sc[R_SIG] = wvec(w, WS.F_s, k)[k - 1]
    _put(a, a_)
    if want_lam:
        _put(wvec(w, WS.F_lam, m), lam_)
    return be


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


@_jit
def _fold_values(fns, md, buf, t, q, v, x, U, h):
    """``L_j(x) = d/dtau u_j^T (A x - b)`` along ``(q + tau v, v + tau x, t + tau)`` (central
    differences, step ``h``) for the columns ``u_j`` of ``U`` (combinations of the rows in
    their own scaling): the derivative of a dropped combination of the acceleration rows
    along the motion. The true motion keeps ``u_j^T (A a - b)`` at zero; at a folded
    configuration (``u_j^T A = 0``) its derivative is a row in ``a`` alone, and nearby
    it errs by ``s_j`` times the rate of the shaky acceleration. Returns ``(status,
    values, scales)``, the scales ``|u_j^T dA/dtau|`` (the size of the row's gradient), set
    to zero where they do not exceed the rounding of their difference (``64 (n + m) eps
    sum_i |u_ij| max |A| / h``): a dependency of the rows that holds at every state (two
    coaxial hinges) has ``u_j^T dA/dtau = 0``, and its difference is rounding noise, which
    normalized by its own size would act as an arbitrary row."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    nd = U.shape[1]
    val = np.zeros(nd)
    scl = np.zeros(nd)
    dA = np.zeros((nd, n))
    amax = 0.0
    for sgn in range(2):
        sg = 1.0 if sgn == 0 else -1.0
        st = call_rows(fns, md, buf, t + sg * h, axpy(q, sg * h, v), axpy(v, sg * h, x))
        if st != 0:
            return st, val, scl
        A = buf.A.reshape(m, n)
        for i in range(m):
            for c in range(n):
                amax = max(amax, abs(A[i, c]))
        for j in range(nd):
            acc = 0.0
            for i in range(m):
                u = U[i, j]
                if u != 0.0:
                    r_ = -buf.b[i]
                    for c in range(n):
                        r_ += A[i, c] * x[c]
                        dA[j, c] += sg * u * A[i, c]
                    acc += u * r_
            val[j] += sg * acc / (2.0 * h)
    for j in range(nd):
        scl[j] = LA.norm2(dA[j]) / (2.0 * h)
        usum = 0.0
        for i in range(m):
            usum += abs(U[i, j])
        if scl[j] <= 64.0 * (n + m) * _EPS * usum * amax / h:
            scl[j] = 0.0
    return 0, val, scl


@_jit
def _quadratic_form(fns, md, buf, t, q, v, x, U):
    """``u_j^T (b(q, x) + b(q, -x)) / 2 - u_j^T b(q, 0)`` (``= -u_j^T Phi_qq(x, x)`` on
    holonomic rows, ``v = 0``): from rest at ``q`` the motion ``q + x tau^2 / 2`` keeps
    the rows ``u_j^T Phi = 0`` only if it vanishes; and the size of its terms."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    nd = U.shape[1]
    val = np.zeros(nd)
    scl = np.zeros(nd)
    for sgn in range(3):
        sg = 1.0 if sgn == 0 else (-1.0 if sgn == 1 else 0.0)
        st = call_rows(fns, md, buf, t, q, axpy(v, sg, x))
        if st != 0:
            return st, val, scl
        for j in range(nd):
            acc = 0.0
            big = 0.0
            for i in range(m):
                acc += U[i, j] * buf.b[i]
                big += abs(U[i, j] * buf.b[i])
            val[j] += 0.5 * acc if sgn < 2 else -acc
            scl[j] += big
    return 0, val, scl


#: a fold row's singular value (rows scaled by their gradient, Euclidean in the null
#: space of the kept rows) below which it is not used: at the folded configuration the
#: rows do not act on the tangent of the branch (the branch's second-order conditions),
#: inside the window of dropped directions at the relative size of the dropped singular
#: value (``<= FOLD_TOL``) and with the finite differences' error (``~1e-10``); a fold
#: row that restrains the shaky mode acts on it at order one
_FOLD_SIG = 1e-3
#: rounding floor (times ``(n + m) eps s_1``) of the normalized rows' singular values:
#: a dropped direction above it vanishes (a fold approached), at it it is an exact
#: redundancy or exactly at a fold (as in :func:`gaussopt.gauss.dense_step.inconsistency_allowance`)
_FOLD_FLOOR = 64.0


@_unit("i8(fns, md, buf, f8, f8v, f8v, f8v, f8m, i8, i8, i8, w)", lazy=True)
def fold_rows(fns, md, buf, t, q, v, a, M, r, mL, k, w):
    """The acceleration near a folded configuration: the Gauss step with the dropped
    directions restrained (in place in ``a``). (A lazy unit: compiled the first time a run
    meets a dropped direction; most runs never do, and it is the largest part of the step.)

    Near a folded configuration of a redundant linkage the rows lose a direction
    (a singular value ``s_j`` of the normalized rows passes through zero); the step
    drops it (:func:`gaussopt.gauss.dense_step.reduce_rows`), and the "shaky" mode ``w_j`` it
    spans is then free to first order: the minimum-constraint acceleration along it
    is the exact one only by symmetry. Restrained here, per dropped direction ``j``
    (``s_j`` above the rounding floor :data:`_FOLD_FLOOR`: a fold approached,
    "vanishing"; at the floor: an exact redundancy, or exactly at a fold):

    * vanishing, moving fast for the distance (``|v|^2 >= |a| (1 + |q|) s_j``): the
      derivative of the dropped combination along the motion (:func:`_fold_values`),
      a row in ``a`` that stays well conditioned through the fold, acting on its own
      shaky mode ``w_j`` only (its action on the branch's tangent is ``O(s_j)``: kept,
      its errors would fix the tangent's acceleration kinematically). Its error is
      ``s_j`` times the rate of the shaky acceleration over the rate of ``s_j``
      along the motion, ``~(2/3) |th - th_fold| th'' kappa`` (``kappa`` the
      branch's curvature along the shaky mode), odd about the fold. The row itself
      is not used there: on a state whose residual along ``u_j`` is ``e`` (after a
      projection ``e ~ 1e-18``) it is the acceleration on the level set
      ``u_j^T Phi = e``, whose tangent turns off the branch like ``e / s_j^2``
      towards the fold (measured: the shaky velocity ``1e-18 / s_j^2``, then an
      acceleration 50 times too large at ``s_j = 6e-8``);
    * vanishing, slow (near a turning point, or at rest): the row itself,
      ``w_j^T a = u_j^T bn / s_j`` (its level-set error ``~e |v|^2 / s_j^3`` is
      small there, where the derivative row, proportional to ``|v|``, degenerates);
    * at the floor, moving, two or more there and none vanishing (exactly at a fold
      of a redundant linkage): their derivative rows on the whole null space (at the
      fold they do not act on the branch's tangent: the branch's second-order
      conditions; rows that do not act at all, :data:`_FOLD_SIG`, are left out);
      a single direction at the floor is an exact redundancy: left alone;
    * at rest exactly at a fold (a null space of dimension 2): the directions of the
      null space along which the rows' second-order forms (:func:`_quadratic_form`)
      vanish are the branches through the fold; one branch: the acceleration is
      restricted to it; several: the motion from rest is not determined there
      (:data:`gaussopt.gauss.dense_step.INDETERMINATE`).

    The step is the Gauss step with these rows added: ``a + N z`` with ``z`` of least
    ``z^T (N^T M N) z`` (the increase of the constraint) satisfying the significant
    rows (``N`` the null space of the kept rows, which the added rows leave as it is).

    Returns the status: 0, :data:`MODEL_FAILED` or :data:`gaussopt.gauss.dense_step.INDETERMINATE`.
    """
    n = md.dims[D_N]
    m = md.dims[D_M]
    d = n - r
    if d <= 0 or r >= k:
        return 0
    s = wfull(w, WS.F_s)
    Uw = wmat(w, WS.F_U, mL, k)
    V = wmat(w, WS.F_V, n, n)
    bn = wvec(w, WS.F_bn, mL)
    live = wivec(w, WS.I_live, m)
    nu = wfull(w, WS.F_nu)
    rest = True
    qs = 1.0
    an = 0.0
    vn = 0.0
    for i in range(n):
        if v[i] != 0.0:
            rest = False
        qs = max(qs, abs(q[i]))
        an = max(an, abs(a[i]))
        vn = max(vn, abs(v[i]))
    floor = _FOLD_FLOOR * (n + mL) * _EPS * (s[0] if k > 0 else 1.0)
    # nothing to restrain (the common case, a regular configuration with at most one
    # exact redundancy): decided from the singular values alone, before any work
    vanishing = False
    n_floor = 0
    for j in range(r, mL):
        if j < k and s[j] > floor:
            vanishing = True
        else:
            n_floor += 1
    if not vanishing and n_floor < 2:
        return 0
    # the row itself where the motion is slow for its distance to the fold (at rest, and
    # near a turning point: |v|^2 below |a| (1 + |q|) s_j); else the derivative rows (see
    # the docstring)
    slow = vn * vn / (an * qs + 1e-300)
    N = np.empty((n, d))
    for i in range(n):
        for c in range(d):
            N[i, c] = V[i, r + c]
    zg = np.zeros(d)                          # a's coordinates in N (a_p is orthogonal to N)
    for c in range(d):
        acc = 0.0
        for i in range(n):
            acc += N[i, c] * a[i]
        zg[c] = acc
    # the left singular vectors of the dropped directions, accurate also at the rounding
    # floor (where the columns of U are rounding noise): the orthogonal right factor of
    # An^T; with mL > n its extra columns, the rows' exact dependencies, belong to them
    An = wmat(w, WS.F_An, mL, n)
    _u2, _s2, Vl = LA.svd_econ(np.ascontiguousarray(An.T))
    sl = np.zeros(mL)
    for j in range(k):
        sl[j] = s[j]
    # rows G z = g on the increment z (scaled: unit gradients)
    G = np.zeros((mL - r + 1, d))
    g = np.zeros(mL - r + 1)
    nrow = 0
    # the dropped combinations (own row scaling) that take the derivative rows
    # with a vanishing direction (a fold approached) the ones at the floor are the exact
    # redundancies: left alone (their derivative rows, acting on the whole null space,
    # would fix the tangent's acceleration kinematically where the shaky velocity is
    # not small); at the floor only (exactly at a fold, or a regular configuration)
    # their derivative rows are used while moving
    # (exactly at a fold of a redundant linkage the fold's direction joins the exact
    # redundancies at the floor: two or more; a single one there is taken for an exact
    # redundancy at a regular configuration, whose derivative row is not used)
    at_floor = not rest and not vanishing and n_floor >= 2
    nl = 0
    for j in range(r, mL):
        if (sl[j] > floor and slow > sl[j]) or (sl[j] <= floor and at_floor):
            nl += 1
    Ul = np.zeros((m, nl))
    jl = np.zeros(nl, np.int64)
    nc = 0
    for j in range(r, mL):
        if sl[j] > floor and slow <= sl[j]:
            # the row itself: w_j^T (a + N z) = u_j^T bn / s_j, w_j = N e_(j - r)
            acc = 0.0
            for i in range(mL):
                acc += Uw[i, j] * bn[i]
            G[nrow, j - r] = 1.0
            g[nrow] = acc / sl[j] - zg[j - r]
            nrow += 1
        elif sl[j] > floor or at_floor:
            li = 0
            for i in range(m):
                if live[i]:
                    Ul[i, nc] = Vl[li, j] / nu[i]
                    li += 1
            jl[nc] = j
            nc += 1
    if nl > 0:
        # (the square root of each factor: at the stages of a trial step far off the
        # motion, which error control rejects, ``qs an`` overflowed -- 8e69 times 9e283 in
        # dm_control's stacker -- h was 0 and the differences below divided by it)
        h = 1e-5 * qs / (vn + math.sqrt(1e-5 * qs) * math.sqrt(an) + 1e-300)
        if not 0.0 < h < np.inf:
            return K.INDETERMINATE             # (refused: the trial step is halved)
        st, L0, scl = _fold_values(fns, md, buf, t, q, v, a, Ul, h)
        if st != 0:
            return MODEL_FAILED
        sx = 1.0 + an
        Gl = np.zeros((nl, d))
        for c in range(d):
            xp = a.copy()
            xm = a.copy()
            for i in range(n):
                xp[i] += sx * N[i, c]
                xm[i] -= sx * N[i, c]
            st, Lp, _s = _fold_values(fns, md, buf, t, q, v, xp, Ul, h)
            if st != 0:
                return MODEL_FAILED
            st, Lm, _s = _fold_values(fns, md, buf, t, q, v, xm, Ul, h)
            if st != 0:
                return MODEL_FAILED
            for j in range(nl):
                Gl[j, c] = (Lp[j] - Lm[j]) / (2.0 * sx)   # (exact: the rows are affine in x)
        # the significant ones (scaled by the rows' gradients); a vanishing direction's
        # row acts on its own shaky mode w_j only (its action on the rest of the null
        # space, the branch's tangent, is O(s_j): kept, a small error of it would fix
        # the tangent's acceleration kinematically where the shaky velocity is not small)
        Gs = np.zeros((nl, d))
        for j in range(nl):
            if scl[j] == 0.0:
                continue                      # an exact dependency at every state: no row
            sj = scl[j]
            for c in range(d):
                if sl[jl[j]] <= floor or c == jl[j] - r:
                    Gs[j, c] = Gl[j, c] / sj
        Ug, sg, Vg = LA.svd_econ(Gs)
        for c in range(sg.shape[0]):
            if sg[c] > _FOLD_SIG:
                acc = 0.0
                for j in range(nl):
                    sj = scl[j] if scl[j] > 0.0 else 1.0
                    acc -= Ug[j, c] * L0[j] / sj
                for i in range(d):
                    G[nrow, i] = sg[c] * Vg[i, c]
                g[nrow] = acc
                nrow += 1
                if nrow >= G.shape[0]:
                    break
    if rest and d == 2 and nrow == 0:
        # at rest exactly at a fold: the branches through it are the directions of the
        # null space where every significant second-order form vanishes
        nf = mL - r
        Uf = np.zeros((m, nf))
        for jj in range(nf):
            li = 0
            for i in range(m):
                if live[i]:
                    Uf[i, jj] = Vl[li, r + jj] / nu[i]
                    li += 1
        st, P0, S0 = _quadratic_form(fns, md, buf, t, q, v, N[:, 0].copy(), Uf)
        if st != 0:
            return MODEL_FAILED
        st, P1, S1 = _quadratic_form(fns, md, buf, t, q, v, N[:, 1].copy(), Uf)
        if st != 0:
            return MODEL_FAILED
        st, P2, S2 = _quadratic_form(fns, md, buf, t, q, v, (N[:, 0] + N[:, 1]).copy(), Uf)
        if st != 0:
            return MODEL_FAILED
        best = -1
        bsize = 0.0
        for jj in range(nf):
            sc_ = S0[jj] + S1[jj] + S2[jj] + 1e-300
            size = max(abs(P0[jj]), abs(P1[jj]), abs(P2[jj])) / sc_
            if size > 1e-8 and size > bsize:
                bsize = size
                best = jj
        if best >= 0:
            A_, C_ = P0[best], P1[best]
            B_ = 0.5 * (P2[best] - A_ - C_)
            disc = B_ * B_ - A_ * C_
            big = max(abs(A_), abs(B_), abs(C_))
            if disc >= -1e-12 * big * big:
                sq = math.sqrt(max(disc, 0.0))
                ncand = 0
                cand = np.zeros((2, 2))
                for sgn in range(2):
                    sg_ = 1.0 if sgn == 0 else -1.0
                    if abs(C_) >= abs(A_):            # C t^2 + 2 B t + A = 0, c = (1, t)
                        c0, c1 = C_, -B_ + sg_ * sq
                    else:                             # A t^2 + 2 B t + C = 0, c = (t, 1)
                        c0, c1 = -B_ + sg_ * sq, A_
                    nrm = math.sqrt(c0 * c0 + c1 * c1)
                    if nrm == 0.0:
                        continue
                    c0 /= nrm
                    c1 /= nrm
                    ok = True
                    for jj in range(nf):
                        val = (P0[jj] * c0 * c0 + (P2[jj] - P0[jj] - P1[jj]) * c0 * c1
                               + P1[jj] * c1 * c1)
                        if abs(val) > 1e-6 * (S0[jj] + S1[jj] + S2[jj]):
                            ok = False
                    if ok and not (ncand == 1 and abs(cand[0, 0] * c1 - cand[0, 1] * c0) < 1e-6):
                        cand[ncand, 0] = c0
                        cand[ncand, 1] = c1
                        ncand += 1
                if ncand > 1:
                    return K.INDETERMINATE
                if ncand == 1:
                    # the acceleration along the branch: (-c1, c0)^T (zg + z) = 0
                    G[0, 0] = -cand[0, 1]
                    G[0, 1] = cand[0, 0]
                    g[0] = -(G[0, 0] * zg[0] + G[0, 1] * zg[1])
                    nrow = 1
    if nrow == 0:
        if call_rows(fns, md, buf, t, q, v) != 0:
            return MODEL_FAILED
        return 0
    # min z^T H z subject to the rows: with H / wgt = LH LH^T, X = LH^-1 G^T,
    # z = LH^-T X (X^T X)^-1 g
    LH = wmat(w, WS.F_LH, d, d)
    X = np.zeros((d, nrow))
    for c in range(nrow):
        for i in range(d):
            X[i, c] = G[c, i]
    LA.forward_solve(LH, X)
    S = np.zeros((nrow, nrow))
    for c1 in range(nrow):
        for c2 in range(nrow):
            acc = 0.0
            for i in range(d):
                acc += X[i, c1] * X[i, c2]
            S[c1, c2] = acc
    LS = np.zeros((nrow, nrow))
    if not LA.cholesky(S, LS) > 0.0:
        return K.INDETERMINATE
    y = g[:nrow].copy()
    LA.forward_solve1(LS, y)
    LA.backward_solve_t(LS, y)
    z = np.zeros(d)
    for i in range(d):
        acc = 0.0
        for c in range(nrow):
            acc += X[i, c] * y[c]
        z[i] = acc
    LA.backward_solve_t(LH, z)
    for i in range(n):
        acc = 0.0
        for c in range(d):
            acc += N[i, c] * z[c]
        a[i] += acc
    # the rows of (t, q, v) back in the buffers (the callers read them after the step)
    if call_rows(fns, md, buf, t, q, v) != 0:
        return MODEL_FAILED
    return 0


@_unit("Tuple((i8, i8, f8))(md, buf, opt, f8v, f8v, f8, f8v, f8v, f8v, b1, w)", lazy=True)
def _band_step(md, buf, opt, ref, sref, t, q, v, a, want_lam, w):
    """The O(n) path of the band at ``(t, q, v)`` (:func:`gaussopt.gauss.band_step.sparse_step`):
    ``(status, rank, backward error)``, status 0 (answered: ``a``, and the multipliers in
    ``w`` with ``want_lam``), :data:`MODEL_FAILED`, or 1 (declined: the dense kernel
    decides). A lazy unit: a model without the path compiles none of it."""
    m = md.dims[D_M]
    if call_sp_dyn(md, buf, t, q, v) != 0 or call_sp_rows(md, buf, t, q, v) != 0:
        return MODEL_FAILED, 0, 0.0
    bw = md.band.w
    status, be, _ = SP.sparse_step(md.band.sp, bw, ref, sref[0], opt.f[F_RANKTOL], want_lam)
    if status != SP.OK:
        return 1, 0, 0.0
    _put(a, bw.a)
    if want_lam:
        _put(wvec(w, WS.F_lam, m), bw.lam)
    r_ = m
    for i in range(m):
        r_ -= bw.drop[i]
    return 0, r_, be


@_unit("Tuple((i8, i8, i8, i8, f8, f8, f8, i8))(fns, fn, md, buf, opt, f8v, f8v, f8, f8v, f8v, f8v, b1, w)")
def evaluate_step(fns, accel, md, buf, opt, ref, sref, t, q, v, a, want_lam, w):
    """The accelerations ``a`` at ``(t, q, v)`` (in place), with the kernel workspace ``w``.

    Returns ``(status, r, mL, k, rho, allow, be, flags)`` (the kernel's, see
    :func:`gaussopt.gauss.dense_step.gauss_step`; multipliers in ``w``'s ``lam``, singular
    values in its ``s``: :func:`gaussopt.gauss.dense_step.view`); status 0, a kernel status or :data:`MODEL_FAILED`.

    A model with an O(n) path (``md.band.mode``) takes it first
    (:func:`gaussopt.gauss.band_step.sparse_step`, without Baumgarte's correction): an answer
    has ``flags`` with :data:`gaussopt.gauss.band_step.SPARSE_FLAG`, rank ``m``, no singular
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
    if md.band.mode == SP.MODE_TREE and opt.i[I_STAB] != STAB_BAUMGARTE:
        be = _tree_step(md, buf, opt, ref, sref, t, q, v, a, want_lam, w)
        if be >= 0.0:
            return 0, m, m, 0, 0.0, math.sqrt(opt.f[F_RANKTOL]), be, SP.TREE_FLAG
    if SP.on_band(md.band.mode) and opt.i[I_STAB] != STAB_BAUMGARTE:
        status, r_, be = _band_step(md, buf, opt, ref, sref, t, q, v, a, want_lam, w)
        if status == MODEL_FAILED:
            return MODEL_FAILED, 0, 0, 0, 0.0, 0.0, 0.0, 0
        if status == 0:
            return 0, r_, m, 0, 0.0, math.sqrt(opt.f[F_RANKTOL]), be, SP.SPARSE_FLAG
    st = call_dyn(fns, md, buf, t, q, v)
    if st == 0 and m > 0:
        st = call_rows(fns, md, buf, t, q, v)
    if st != 0:
        return MODEL_FAILED, 0, 0, 0, 0.0, 0.0, 0.0, 0
    b = buf.b
    if opt.i[I_STAB] == STAB_BAUMGARTE and m > 0:
        b = wvec(w, WS.F_bb, m)       # (buf.b stays the constraints' own: see sample)
        _put(b, buf.b)
        st = baumgarte(fns, md, buf, opt, t, q, v, b)
        if st != 0:
            return MODEL_FAILED, 0, 0, 0, 0.0, 0.0, 0.0, 0
    (status, fa, r, mL, k, rho, allow, be, dmin,
     flags) = K.gauss_step(_matrix(buf.M, n, n), buf.F, _matrix(buf.A, m, n), b, ref, sref[0],
                           opt.f[F_RANKTOL], solver, want_lam, opt.i[I_CHECKSYM] != 0, w)
    _put(a, wfull(w, fa))
    if SP.on_band(md.band.mode) and status == 0:
        # a single exact redundancy: set its row aside for the O(n) path's next steps
        SP.band_set_aside(md.band, wmat(w, WS.F_U, mL, k), r, mL, k, m)
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
    """The O(n) path alone at ``(t, q, v)``: its status (:data:`gaussopt.gauss.band_step.STATUS`;
    0 answered, the result in ``md.band.w``), for tests of its refusals."""
    if call_sp_dyn(md, buf, t, q, v) != 0 or call_sp_rows(md, buf, t, q, v) != 0:
        return SP.BAND_MODEL_FAILED
    return SP.sparse_step(md.band.sp, md.band.w, ref, sig_ref, rank_tol, want_lam)[0]


@_jit
def uses_sparse(flags):
    """The step was answered by the O(n) path, the band's or a tree's recursive step (its
    data in ``md.band.w``, not ``buf``)."""
    return (flags & (SP.SPARSE_FLAG | SP.TREE_FLAG)) != 0


@_unit("f8(md, f8v, f8v, f8v)", lazy=True)
def band_force(md, a, out_qc, res):
    """After a step on the O(n) path: the constraint force ``M a - F`` into ``out_qc``
    and the residual ``A a - b`` into ``res`` from the sparse data (a tree's recursive
    step: from its output); returns ``|res|``."""
    sp = md.band.sp
    w = md.band.w
    if md.band.mode == SP.MODE_TREE:
        _, qc, _, _, res_, _ = recursive_parts(w.d, md.dims[D_N], md.dims[D_M])
        _put(out_qc, qc)
        _put(res, res_)
        return LA.norm2(res)
    SP.mass_times(sp, w.d, a, out_qc)
    for i in range(md.dims[D_N]):
        out_qc[i] -= w.F[i]
    for i in range(md.dims[D_M]):
        acc = -w.b[i]
        for k in range(sp.indptr[i], sp.indptr[i + 1]):
            acc += w.data[k] * a[sp.indices[k]]
        res[i] = acc
    return LA.norm2(res)


@_unit("f8(md)", lazy=True)
def path_sigma(md):
    """The smallest singular value of the normalized rows after a step on the O(n) path:
    the band's estimate, or a tree's recursive step's ``R_SIG`` (1 for the balls'
    normalizations alone, disjoint unit rows once normalized; else the dense kernel's
    own, :func:`_tree_step`)."""
    if md.band.mode == SP.MODE_TREE:
        n = md.dims[D_N]
        m = md.dims[D_M]
        return recursive_parts(md.band.w.d, n, m)[5][R_SIG]
    return SP.band_sigma(md.band)


def model_data(mf, system, sparse: bool = True) -> ModelData:
    """The :class:`ModelData` of a system's compiled functions ``mf``
    (:class:`~gaussopt.core.model_interface.ModelFunctions`); with ``sparse``, its O(n) path if it
    has one (:func:`gaussopt.gauss.band_step.make_band`; work arrays of its own)."""
    band = (SP.make_band(system, mf) if sparse else SP.make_band(system, mf, 1 << 62, 1 << 62))
    return ModelData(mf.p, mf.dims(), mf.hol_rows, mf.vel_rows, mf.vel_is_hol, band)
