"""The rank monitor: the step solver's references from accepted states, the nearness
to a singular position, and singular positions located as sign changes (the comment
above :func:`_scaled_rows` explains the method)."""

from __future__ import annotations


import numpy as np

import gaussopt.gauss.dense_step as K
import gaussopt.gauss.dense_algebra as LA
import gaussopt.gauss.band_step as SP
from gaussopt.core.compiled import jit, unit
from gaussopt.integrate.engine.interpolation import dense_eval
from gaussopt.gauss.model_step import _put, axpy, call_rows, call_sp_rows
from gaussopt.core.records import *  # noqa: F401,F403 - the indices and codes of the records


#: the large functions are units (:mod:`gaussopt.core.compiled`: compiled once, called
#: through a pointer), the small ones ordinary compiled functions (``_nrt=True``
#: explicitly: a function without the option inherits its caller's)
_jit = jit(cache=True, _nrt=True)


def _unit(signature: str, lazy: bool = False):
    return unit(signature, lazy=lazy, _nrt=True)


_EPS = float(np.finfo(float).eps)




@_unit("i8(fns, md, buf, opt, st, f8, f8v, f8v)")
def accept_rows(fns, md, buf, opt, st, t, q, v):
    """The step solver's references from an accepted state (row norms, smallest
    singular value of the normalized rows) and the nearness to a singular position
    (``S_NEAR``, its rate). On the band of the O(n) path while the smallest singular
    values are live (:func:`gaussopt.gauss.band_step.smallest_pair`), else by the dense SVD."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    if m == 0:
        return 0
    rank_tol = opt.f[F_RANKTOL]
    near = opt.i[I_STAB] == STAB_PROJECTION and opt.i[I_PRHS] != 0
    band = SP.on_band(md.band.mode)
    nu = np.empty(m)
    if band:
        if call_sp_rows(md, buf, t, q, v) != 0:
            return MODEL_FAILED
        band = SP.band_row_norms(md.band, nu)
    if band:
        for i in range(m):
            if nu[i] > st.ref[i]:
                st.ref[i] = nu[i]
        u = st.mu.copy()
        wv = np.empty(n)
        sl = SP.band_smallest_pair(md.band, nu, u, wv)
        band = sl > rank_tol
        if band and sl > st.sref[0]:
            st.sref[0] = sl
    A = np.empty((0, 0))
    if not band:
        s_ = call_rows(fns, md, buf, t, q, v)
        if s_ != 0:
            return MODEL_FAILED
        A = buf.A.reshape(m, n).copy()
        LA.row_norms(A, nu)
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
        sk = SP.band_smallest_pair(md.band, st.ref, u, wv)
        if sk > rank_tol:
            st.sc[S_NEAR] = sk
            if dt > 0.0:
                q2 = axpy(q, dt, st.f[:n])
                v2 = axpy(v, dt, st.f[n:])
                if call_sp_rows(md, buf, t + dt, q2, v2) != 0:
                    return MODEL_FAILED
                g = SP.band_scaled_form(md.band, st.ref, u, wv)
                st.sc[S_NEAR_RATE] = (g - sk) / dt
            return 0
        if call_rows(fns, md, buf, t, q, v) != 0:
            return MODEL_FAILED
        A = buf.A.reshape(m, n).copy()
    for i in range(m):
        r = st.ref[i] if st.ref[i] > 0.0 else 1.0
        for j in range(n):
            A[i, j] /= r
    U, s, V = LA.svd(A, st.wm)
    k = _count(s, rank_tol) - 1
    sk = s[k] if k >= 0 else 0.0
    st.sc[S_NEAR] = sk
    if k >= 0:
        # its rate along the motion, to first order in a short move along y' (the
        # derivative of a simple singular value is u^T A' w)
        u = U[:, k].copy()
        w = V[:, k].copy()
        if dt > 0.0:
            q2 = axpy(q, dt, st.f[:n])
            v2 = axpy(v, dt, st.f[n:])
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


@_unit("Tuple((i8, f8m))(fns, md, buf, st, f8, f8v, f8v)")
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


@_unit("i8(fns, md, buf, opt, st, f8, f8v, f8v)")
def monitor_start(fns, md, buf, opt, st, t, q, v):
    """The regular rank ``r0`` and the first singular pair."""
    m = md.dims[D_M]
    if m == 0:
        return 0
    s_, A = _scaled_rows(fns, md, buf, st, t, q, v)
    if s_ != 0:
        return MODEL_FAILED
    U, s, V = LA.svd(A, st.wm)
    r0 = _count(s, opt.f[F_RANKTOL])
    st.ic[C_R0] = r0
    st.ic[C_RANK] = r0
    k = min(r0, s.shape[0]) - 1
    if k >= 0:
        for i in range(st.mu.shape[0]):
            st.mu[i] = U[i, k]
        for i in range(st.mv.shape[0]):
            st.mv[i] = V[i, k]
        st.sc[S_MSIG] = s[k]
    else:
        st.sc[S_MSIG] = -1.0
    return 0


@_unit("none(st, i8, f8, f8, i8, i8, i8, f8v)")
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


@_unit("b1(fns, fn, md, buf, opt, tab, st, i8, f8, f8, f8v, f8v, f8, f8, f8, f8, f8v)", lazy=True)
def _passage(fns, accel, md, buf, opt, tab, st, method, ta, tb, u0, w0, s_a, s_b, t_lo,
             t_hi, y_end):
    """Locate the zero of the smallest live singular value in or near ``[ta, tb]``
    (:mod:`gaussopt.integrate.engine.rank_monitor`): the root of ``g`` with the pair at
    ``ta``, then Newton iterations re-centred on the pair at the iterate, kept inside the
    step."""
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
        U, sv, V = LA.svd(A, st.wm)
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


@_unit("i8(fns, fn, md, buf, opt, tab, st, i8, f8, f8, f8v)")
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
    band = SP.on_band(md.band.mode) and k == m - 1
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
            s_k = SP.band_smallest_pair(md.band, st.ref, u1, w1)
            on_band = s_k > rank_tol
            if on_band:
                g1 = SP.band_bilinear(md.band, u0, w0)
                r_end = m
        if not on_band:
            s_, A = _scaled_rows(fns, md, buf, st, tt, y[:n], y[n:])
            if s_ != 0:
                return MODEL_FAILED
            U, s, V = LA.svd(A, st.wm)
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
    _put(st.mu, u0)
    _put(st.mv, w0)
    st.sc[S_MSIG] = s0
    # rank at the end: a change that comes back at the next accepted step is an instant
    r = r_end
    last = st.ic[C_RANK]
    if r != last and on_band:
        # a change of rank is reported with the rows involved: from the dense SVD
        s_, A = _scaled_rows(fns, md, buf, st, t, y_end[:n], y_end[n:])
        if s_ != 0:
            return MODEL_FAILED
        U, s, V = LA.svd(A, st.wm)
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
                for j in range(st.ev_f.shape[1]):
                    st.ev_f[i, j] = st.ev_f[i + 1, j]
                for j in range(st.ev_i.shape[1]):
                    st.ev_i[i, j] = st.ev_i[i + 1, j]
                for j in range(st.ev_rows.shape[1]):
                    st.ev_rows[i, j] = st.ev_rows[i + 1, j]
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
