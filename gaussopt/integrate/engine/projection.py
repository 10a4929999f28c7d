"""The projection of a state onto the constraints (:class:`gaussopt.Projection`):
mass-metric Gauss--Newton on positions, then velocities."""

from __future__ import annotations

import math

import numpy as np

import gaussopt.gauss.dense_step as K
import gaussopt.gauss.dense_algebra as LA
import gaussopt.gauss.band_step as SP
from gaussopt.core.compiled import jit, unit
from gaussopt.gauss.model_step import (call_dyn, call_pos, call_sp_dyn, call_sp_pos,
                                       call_sp_rows, call_vel)
from gaussopt.core.records import *  # noqa: F401,F403 - the indices and codes of the records


#: the large functions are units (:mod:`gaussopt.core.compiled`: compiled once, called
#: through a pointer), the small ones ordinary compiled functions (``_nrt=True``
#: explicitly: a function without the option inherits its caller's)
_jit = jit(cache=True, _nrt=True)


def _unit(signature: str, lazy: bool = False):
    return unit(signature, lazy=lazy, _nrt=True)


_EPS = float(np.finfo(float).eps)




# --------------------------------------------------------------------------- projection
@_unit("f8m(f8m, f8m)")
def _metric(M, Jm):
    """``M + w Jn^T Jn`` (``Jn`` the normalized rows of ``Jm``, ``w = trace(M)/n``): the
    mass metric, augmented so that it stays positive definite for a singular ``M``."""
    n = M.shape[0]
    k = Jm.shape[0]
    nr = np.empty(k)
    LA.row_norms(Jm, nr)
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


@_unit("Tuple((f8v, b1))(f8m, b1, f8m, f8v, f8, f8)")
def _correction(W, diag_only, J, res, rank_tol, floor):
    """Minimum-W-norm least-squares ``dx`` for ``J dx = -res`` (rows normalized):
    ``W`` a positive diagonal mass matrix (a column scaling) or the metric of
    :func:`_metric` (Cholesky); the correction of :class:`gaussopt.Projection`."""
    k, n = J.shape
    nr = np.empty(k)
    LA.row_norms(J, nr)
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
        if not LA.cholesky(W, L) > 0.0:
            return np.zeros(n), False
        for j in range(n):
            for i in range(k):
                X[j, i] = Jn[i, j]
        LA.forward_solve(L, X)
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
    dmin = LA.cholesky(KK, LK) if k > 0 else np.inf
    if k > 0 and dmin > 1e-8 * kmax:
        y = np.empty((k, 1))
        for i in range(k):
            y[i, 0] = rn[i]
        LA.forward_solve(LK, y)
        yy = y[:, 0].copy()
        LA.backward_solve_t(LK, yy)
        for j in range(n):
            acc = 0.0
            for i in range(k):
                acc += X[j, i] * yy[i]
            z[j] = acc
    elif k > 0:
        # near-singular or redundant rows: truncated SVD of X^T
        U, s, V = LA.svd_econ(np.ascontiguousarray(X.T))
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
    LA.backward_solve_t(L, z)
    return z, True


@jit(cache=True, _nrt=True, python=True)     # (Python calls it too)
def _distances(res, J):
    k = res.shape[0]
    nr = np.empty(k)
    LA.row_norms(J, nr)
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
def _mass(fns, md, buf, t, q, v):
    """The projection's dense metric at ``(t, q, v)``: ``(status, M, diag_only)``
    (``diag_only``: ``M`` positive diagonal)."""
    n = md.dims[D_N]
    st = call_dyn(fns, md, buf, t, q, v)
    # (a view: nothing else writes M during a projection; a copy of a large M, a fresh
    # allocation per projection, cost more than the projection itself)
    M = buf.M.reshape(n, n)
    diag_only = True
    for i in range(n):
        if not M[i, i] > 0.0:
            diag_only = False
        for j in range(n):
            if i != j and M[i, j] != 0.0:
                diag_only = False
    return st, M, diag_only


@_unit("UniTuple(i8, 2)(fns, md, buf, opt, f8, f8v, f8v, f8)")
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
    holonomic_only = mv == mh
    # the mass metric at the state as given, evaluated when a first correction is due (a
    # state already on the constraints, as most output samples are, needs no M)
    have_M = False
    M = np.empty((0, 0))
    diag_only = True
    # the O(n) correction of the band (every row holonomic, in the order of the position
    # constraints): its mass from the sparse model, evaluated once like the dense one
    on_band = md.band.mode == SP.MODE_PROJECT and holonomic_only
    have_band_M = False
    dx = np.empty(n if on_band else 0)
    # with the sparse model's ``pos`` the residuals and the Jacobian come in the rows'
    # pattern (``md.band.w.data``): O(n) while the band answers; the dense J only where
    # the dense correction must take over (the band through its entry points alone:
    # :mod:`gaussopt.gauss.band_step`)
    sp_pos = on_band and md.band.addrs[2] != 0
    band = md.band
    have_J = False
    if mh > 0:
        for _ in range(max_iter):
            if sp_pos:
                st = call_sp_pos(md, buf, t, q)
                if st != 0:
                    return MODEL_FAILED, its
                dist = SP.band_distances(band, buf.phi)
            else:
                st = call_pos(fns, md, buf, t, q)
                if st != 0:
                    return MODEL_FAILED, its
                dist = _distances(buf.phi, buf.J.reshape(mh, n))
            if not np.isfinite(dist):
                return -1, its
            have_J = True
            if dist <= tol * (1.0 + LA.absmax_vec(q)):
                break
            floor = max(vanished, 100.0 * dist / (1.0 + LA.absmax_vec(q)))
            done = False
            if on_band:
                if not have_band_M:
                    if call_sp_dyn(md, buf, t, q, v) != 0:
                        return MODEL_FAILED, its
                    have_band_M = True
                if not sp_pos and call_sp_rows(md, buf, t, q, v) != 0:
                    return MODEL_FAILED, its
                done = SP.band_correction(band, buf.phi, dx)
            if done:
                dq = dx
            else:
                if sp_pos:                  # the dense J (phi is the same)
                    st = call_pos(fns, md, buf, t, q)
                    if st != 0:
                        return MODEL_FAILED, its
                J = buf.J.reshape(mh, n)
                if not have_M:
                    st, M, diag_only = _mass(fns, md, buf, t, q, v)
                    if st != 0:
                        return MODEL_FAILED, its
                    have_M = True
                if diag_only:
                    W = M
                elif holonomic_only:
                    W = _metric(M, J)
                else:
                    st = call_vel(fns, md, buf, t, q, v)
                    if st != 0:
                        return MODEL_FAILED, its
                    W = _metric(M, buf.Jv.reshape(mv, n))
                dq, ok = _correction(W, diag_only, J.copy(), buf.phi.copy(), rank_tol, floor)
                if not ok:
                    return -1, its
            for i in range(n):
                q[i] += dq[i]
            have_J = False
            its += 1
            if LA.absmax_vec(dq) <= 4 * _EPS * (1.0 + LA.absmax_vec(q)):
                break
    if opt.i[I_PVEL] == 0 or mv == 0:
        return 0, its
    if holonomic_only:
        if not have_J:
            st = call_sp_pos(md, buf, t, q) if sp_pos else call_pos(fns, md, buf, t, q)
            if st != 0:
                return MODEL_FAILED, its
        # r = Phi_q v + Phi_t, with the Jacobian at the final q (in the pattern, or dense)
        r = buf.phit.copy()
        Jv_ = np.empty(mh)
        if sp_pos:
            SP.band_rows_times(band, v, Jv_)
        else:
            LA.matvec(buf.J.reshape(mh, n), v, Jv_)
        for k in range(mh):
            r[k] += Jv_[k]
        dense_J = not sp_pos
        rows_on_band = False
        for _ in range(max_iter):
            d = (SP.band_distances(band, r) if not dense_J
                 else _distances(r, buf.J.reshape(mh, n)))
            if not np.isfinite(d):
                return -1, its
            if d <= tol * (1.0 + LA.absmax_vec(v)):
                break
            done = False
            if on_band:
                if not have_band_M:
                    if call_sp_dyn(md, buf, t, q, v) != 0:
                        return MODEL_FAILED, its
                    have_band_M = True
                # the rows in the pattern: from ``pos`` already, else evaluated once
                if not sp_pos and not rows_on_band:
                    if call_sp_rows(md, buf, t, q, v) != 0:
                        return MODEL_FAILED, its
                    rows_on_band = True
                done = SP.band_correction(band, r, dx)
            if done:
                dv = dx
                if not dense_J:
                    SP.band_rows_times(band, dv, Jv_)
                else:
                    LA.matvec(buf.J.reshape(mh, n), dv, Jv_)
            else:
                if not dense_J:             # the dense J from here on
                    st = call_pos(fns, md, buf, t, q)
                    if st != 0:
                        return MODEL_FAILED, its
                    dense_J = True
                J = buf.J.reshape(mh, n)    # (a view: nothing writes J in this loop)
                if not have_M:
                    st, M, diag_only = _mass(fns, md, buf, t, q, v)
                    if st != 0:
                        return MODEL_FAILED, its
                    have_M = True
                dv, ok = _correction(M if diag_only else _metric(M, J), diag_only, J, r,
                                     rank_tol, vanished)
                if not ok:
                    return -1, its
                LA.matvec(J, dv, Jv_)
            for i in range(n):
                v[i] += dv[i]
            for k in range(mh):
                r[k] += Jv_[k]
            its += 1
            if LA.absmax_vec(dv) <= 4 * _EPS * (1.0 + LA.absmax_vec(v)):
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
        if d <= tol * (1.0 + LA.absmax_vec(v)):
            break
        if not have_M:
            st, M, diag_only = _mass(fns, md, buf, t, q, v)
            if st != 0:
                return MODEL_FAILED, its
            have_M = True
        dv, ok = _correction(M if diag_only else _metric(M, Jv), diag_only, Jv, r, rank_tol,
                             vanished)
        if not ok:
            return -1, its
        for i in range(n):
            v[i] += dv[i]
        its += 1
        if LA.absmax_vec(dv) <= 4 * _EPS * (1.0 + LA.absmax_vec(v)):
            break
    return 0, its


@_jit
def vanished_floor(st):
    return K.FOLD_TOL * st.sref[0]
