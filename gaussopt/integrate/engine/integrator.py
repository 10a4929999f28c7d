"""The integrator: the right-hand side, the explicit Runge--Kutta steps with scipy's
step-size control and dense output, what follows an accepted step, and the entry
points Python calls (they take the model's function addresses and the packed records)."""

from __future__ import annotations

import math

import numpy as np

import gaussopt.gauss.dense_step as K
import gaussopt.gauss.band_step as SP
from gaussopt.core.compiled import jit, unit
from gaussopt.core.model_interface import functions
from gaussopt.integrate.engine.interpolation import dense_eval
from gaussopt.integrate.engine.rank_monitor import accept_rows, monitor_start, monitor_update
from gaussopt.integrate.engine.projection import project, vanished_floor
from gaussopt.gauss.model_step import (_put, axpy, call_dyn, call_energy, call_pos, call_sp_pos,
                                       evaluate_step, uses_sparse)
from gaussopt.core.records import *  # noqa: F401,F403 - the indices and codes of the records


#: the large functions are units (:mod:`gaussopt.core.compiled`: compiled once, called
#: through a pointer), the small ones ordinary compiled functions (``_nrt=True``
#: explicitly: a function without the option inherits its caller's)
_jit = jit(cache=True, _nrt=True)


def _unit(signature: str, lazy: bool = False, python: bool = False):
    return unit(signature, lazy=lazy, python=python, _nrt=True)


_EPS = float(np.finfo(float).eps)




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
            _put(st.fail_y[:n], q)
            _put(st.fail_y[n:], v)
            return MODEL_FAILED if ps == MODEL_FAILED else K.NONFINITE
    status, r, mL, k, rho, allow, be, flags = evaluate_step(
        fns, accel, md, buf, opt, st.ref, st.sref, t, q, v, a, False, st.wk)
    if status != 0:
        st.sc[S_FAIL_T] = t
        _put(st.fail_y[:n], q)
        _put(st.fail_y[n:], v)
        return status
    if uses_sparse(flags):
        st.ic[C_NBAND] += 1
    if rho > math.sqrt(opt.f[F_RANKTOL]) and rho > st.sc[S_LSQ_SIZE]:
        st.sc[S_LSQ_SIZE] = rho
        st.sc[S_LSQ_T] = t
        row = st.lsq_y[st.ic[C_NLSQ] % st.lsq_y.shape[0]]
        _put(row[:n], q)
        _put(row[n:], v)
    for i in range(n):
        out[i] = v[i]
        out[n + i] = a[i]
    return 0




@_unit("i8(fns, fn, md, buf, opt, tab, st, i8, f8v, f8v)", lazy=True)
def prepare_dense(fns, accel, md, buf, opt, tab, st, method, y1, f1):
    """Coefficients of the step's interpolant (DOP853 needs three more stages); ``y1``,
    ``f1``: the step's end before its projection and the derivative there."""
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
            dy = y1[j] - st.y_old[j]
            F[0, j] = dy
            F[1, j] = h * Kx[0, j] - dy
            F[2, j] = 2 * dy - h * (f1[j] + Kx[0, j])
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




# --------------------------------------------------------------------------- integration
@_jit
def _rms_scaled(x, y, c, scale):
    """The root mean square of ``(x - c y) / scale`` (``c`` 0 or 1: ``x / scale`` or
    ``(x - y) / scale``, as scipy's ``select_initial_step`` computes them)."""
    acc = 0.0
    for i in range(x.shape[0]):
        z = ((x[i] - y[i]) if c != 0.0 else x[i]) / scale[i]
        acc += z * z
    return math.sqrt(acc / x.shape[0])


@_unit("Tuple((i8, f8))(fns, fn, md, buf, opt, st, i8)")
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
    d0 = _rms_scaled(st.y, st.y, 0.0, scale)
    d1 = _rms_scaled(st.f, st.f, 0.0, scale)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    h0 = min(h0, length)
    y1 = axpy(st.y, h0, st.f)
    f1 = np.empty(N)
    s_ = rhs(fns, accel, md, buf, opt, st, t0 + h0, y1, f1)
    if s_ != 0:
        return s_, 0.0
    d2 = _rms_scaled(f1, st.f, 1.0, scale) / h0
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
    if opt.i[I_GUARD] != 0:
        return _guard_scales(fns, md, buf, opt, st)
    return 0


# --------------------------------------------------------------------------- fixed steps
@_unit("i8(fns, md, buf, opt, st)", lazy=True)
def _guard_scales(fns, md, buf, opt, st):
    """(A lazy unit, as :func:`_guard`: only fixed-step runs use it.) The scales of a
    fixed-step run's checks at its initial state
    (:data:`gaussopt.core.settings.FIXED_STEP_RESIDUAL`, ``FIXED_STEP_ENERGY``): the
    configuration's size ``1 + max|q0|`` and, with an energy, ``E0`` and the energy
    scale ``max(|E0|, T0, |F0| (1 + max|q0|))``."""
    n = md.dims[D_N]
    t = st.sc[S_T]
    q = st.y[:n].copy()
    v = st.y[n:].copy()
    size = 0.0
    for i in range(n):
        size = max(size, abs(q[i]))
    length = 1.0 + size
    st.sc[S_LSCALE] = length
    st.sc[S_E0] = 0.0
    st.sc[S_ESCALE] = 0.0
    if (opt.i[I_GUARD] & GUARD_ENERGY) == 0 or md.dims[D_ENERGY] == 0:
        return 0
    if call_energy(fns, md, buf, t, q, v) != 0:
        return MODEL_FAILED
    e0 = buf.e[0]
    if call_dyn(fns, md, buf, t, q, v) != 0:
        return MODEL_FAILED
    kinetic = _kinetic(md, buf, v)
    force = 0.0
    for i in range(n):
        force += buf.F[i] * buf.F[i]
    st.sc[S_E0] = e0
    st.sc[S_TMAX] = kinetic
    scale = max(abs(e0), kinetic, math.sqrt(force) * length)
    st.sc[S_ESCALE] = scale if np.isfinite(scale) else 0.0
    return 0


@_jit
def _kinetic(md, buf, v):
    """``|v^T M v| / 2`` with the ``M`` of the model's last ``dyn``."""
    n = md.dims[D_N]
    M = buf.M.reshape(n, n)
    acc2 = 0.0
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += M[i, j] * v[j]
        acc2 += v[i] * acc
    return 0.5 * abs(acc2)


@_unit("i8(fns, md, buf, opt, st, f8, f8v)", lazy=True)
def _guard(fns, md, buf, opt, st, t, y):
    """The checks of a fixed-step run on the state ``y`` a step produced (before any
    projection): its distance from each position constraint, ``|Phi_k| / ref_k``, within
    ``F_GUARD_RES (1 + max|q0|)``, and its energy drift within ``F_GUARD_E`` times the
    energy scale (:func:`_guard_scales`), or the largest kinetic energy of the accepted
    states before it where that is larger (the reasons in :mod:`gaussopt.core.settings`).
    Returns 0, or :data:`STEP_TOO_LARGE` with the check, the size found and its bound
    recorded (``C_GUARD``, ``C_GUARD_ROW``, ``S_GUARD_SIZE``, ``S_GUARD_BOUND``); a value
    that is not a number is left to the step that meets it (the model's own failure)."""
    n = md.dims[D_N]
    mh = md.dims[D_MH]
    checks = opt.i[I_GUARD]
    q = y[:n].copy()
    if (checks & GUARD_RESIDUAL) != 0 and mh > 0:
        if md.band.mode == SP.MODE_PROJECT and md.band.addrs[2] != 0:
            s_ = call_sp_pos(md, buf, t, q)
        else:
            s_ = call_pos(fns, md, buf, t, q)
        if s_ != 0:
            return MODEL_FAILED
        bound = opt.f[F_GUARD_RES] * st.sc[S_LSCALE]
        for k in range(mh):
            r = st.ref[md.hol_rows[k]]
            d = abs(buf.phi[k]) / (r if r > 0.0 else 1.0)
            if d > bound:
                st.ic[C_GUARD] = GUARD_RESIDUAL
                st.ic[C_GUARD_ROW] = md.hol_rows[k]
                st.sc[S_GUARD_SIZE] = d
                st.sc[S_GUARD_BOUND] = bound
                return STEP_TOO_LARGE
    if (checks & GUARD_ENERGY) != 0 and md.dims[D_ENERGY] != 0 and st.sc[S_ESCALE] > 0.0:
        v = y[n:].copy()
        if call_energy(fns, md, buf, t, q, v) != 0:
            return MODEL_FAILED
        drift = abs(buf.e[0] - st.sc[S_E0])
        bound = opt.f[F_GUARD_E] * max(st.sc[S_ESCALE], st.sc[S_TMAX])
        if drift > bound:
            st.ic[C_GUARD] = GUARD_ENERGY
            st.sc[S_GUARD_SIZE] = drift
            st.sc[S_GUARD_BOUND] = bound
            return STEP_TOO_LARGE
        if call_dyn(fns, md, buf, t, q, v) != 0:
            return MODEL_FAILED
        kinetic = _kinetic(md, buf, v)
        if kinetic > st.sc[S_TMAX]:
            st.sc[S_TMAX] = kinetic
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
def _retry_stage(status):
    """A stage failure a smaller step may avoid: the step solver's decisions on the rows
    (indeterminate, inconsistent, unverified). Not a model that raised or returned
    non-finite values, nor an asymmetric M: those are the model's, and the run ends at
    the last step whose stages it could evaluate."""
    return (status == K.INDETERMINATE or status == K.INCONSISTENT or status == K.UNVERIFIED
            or status == K.INCONSISTENT_VANISHED)


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


@_unit("i8(fns, fn, md, buf, opt, tab, st)")
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
        stage_fail = 0
        while True:
            if h_abs < min_step:
                # (a step solver that kept failing at the stages: its own status, and the
                # state where it failed, recorded by rhs)
                return stage_fail if stage_fail != 0 else STEP_TOO_SMALL
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
                if not _retry_stage(s_):
                    return s_
                # The step solver refused a stage of this trial step (an indeterminate or
                # inconsistent step, an unverified result): the trial step is rejected like
                # one whose error is too large, and halved. The stages of a
                # large step lie off the constraint manifold (DOP853's by up to ~1e-3 of
                # the lengths at rtol 1e-9), where an exact redundancy of the rows turns
                # into a nearly dependent row and the answer there is meaningless; a
                # refusal that persists as the step shrinks to the rounding of t (the
                # motion at the state itself) ends the run with the solver's own status.
                stage_fail = s_
                h_rej = h_abs
                h_abs *= 0.5
                rejected = True
                st.ic[C_NREJ] += 1
                continue
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
def _emit(st, t, y, k):
    """Output ``y`` at ``t``; ``k`` the step of an output left unprojected (else -1:
    :data:`gaussopt.core.records.OUT_MANY_SAMPLES`)."""
    i = st.ic[C_NOUT]
    st.out_t[i] = t
    _put(st.out_y[i], y)
    st.out_k[i] = k
    st.ic[C_NOUT] = i + 1


@_unit("i8(fns, fn, md, buf, opt, tab, st)")
def _after_step(fns, accel, md, buf, opt, tab, st):
    """Projection of the accepted state, outputs, references, rank monitor, least-squares
    record; a projected state restarts the derivative (first-same-as-last)."""
    n = md.dims[D_N]
    method = opt.i[I_METHOD]
    t_prev = st.sc[S_TOLD]
    t = st.sc[S_T]
    if opt.i[I_GUARD] != 0:
        # a fixed step, without error control: the state as the step produced it must
        # still be a state of the system (else the run ends, before it is output)
        s_ = _guard(fns, md, buf, opt, st, t, st.y)
        if s_ != 0:
            st.sc[S_FAIL_T] = t
            _put(st.fail_y, st.y)
            return s_
    if opt.i[I_DENSE] != DENSE_NONE:
        # (the end before its projection, and its derivative: the interpolant's, now or
        # when it is asked for, dense_at, and the events' screen)
        _put(st.scr[R_YRAW], st.y)
        _put(st.scr[R_FRAW], st.f)
        if opt.i[I_DENSE] == DENSE_EAGER:
            s_ = prepare_dense(fns, accel, md, buf, opt, tab, st, method, st.y, st.f)
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
        _emit(st, t, y_new, -1)
    else:
        # a step with many output times inside it leaves them unprojected, marked with
        # the step (its outputs are projected and sampled at a few of them, the rest
        # interpolated: gaussopt.integrate.sample_interpolation)
        inside = 0
        j = st.ic[C_IEVAL]
        while j < st.t_eval.shape[0] and st.t_eval[j] < t:
            inside += 1
            j += 1
        mark = st.ic[C_STEPS] if inside >= OUT_MANY_SAMPLES else -1
        while st.ic[C_IEVAL] < st.t_eval.shape[0] and st.t_eval[st.ic[C_IEVAL]] <= t:
            te = st.t_eval[st.ic[C_IEVAL]]
            if te == t:
                _emit(st, te, y_new, -1)
            else:
                s_ = prepare_dense(fns, accel, md, buf, opt, tab, st, method, st.y, st.f)
                if s_ != 0:
                    return s_
                ye = st.scr[R_OUT]
                dense_eval(method, st, tab, te, ye)
                if opt.i[I_STAB] == STAB_PROJECTION and mark < 0:
                    _put(qv, ye)
                    ps, its = project(fns, md, buf, opt, te, qv[:n], qv[n:],
                                      vanished_floor(st))
                    if ps != 0:
                        st.sc[S_FAIL_T] = te
                        _put(st.fail_y, ye)
                        return MODEL_FAILED if ps == MODEL_FAILED else K.NONFINITE
                    _put(ye, qv)
                _emit(st, te, ye, mark)
            st.ic[C_IEVAL] += 1
    s_ = accept_rows(fns, md, buf, opt, st, t, y_new[:n], y_new[n:])     # (reads them)
    if s_ != 0:
        return s_
    if opt.i[I_MONITOR] != 0:
        s_ = monitor_update(fns, accel, md, buf, opt, tab, st, method, t_prev, t, y_new)
        if s_ != 0:
            return s_
    _record_least_squares(st)
    if changed:
        _put(st.y, y_new)
        f = st.scr[R_F]
        s_ = rhs(fns, accel, md, buf, opt, st, t, y_new, f)
        if s_ != 0:
            return s_
        _put(st.f, f)
    return 0


@_jit
def _record_least_squares(st):
    """The largest least-squares size of the step's evaluations into the run's record."""
    if st.sc[S_LSQ_SIZE] > 0.0:
        i = st.ic[C_NLSQ]
        if i < st.lsq_f.shape[0]:
            st.lsq_f[i, 0] = st.sc[S_LSQ_T]
            st.lsq_f[i, 1] = st.sc[S_LSQ_SIZE]
            st.ic[C_NLSQ] = i + 1
        st.sc[S_LSQ_SIZE] = 0.0


#: status of :func:`advance` when a buffer (outputs, events) must grow before going on



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





# --------------------------------------------------------------------------- entry points
# Python passes the model functions as addresses (``ModelFunctions.addrs``): numba
# types and unboxes first-class function objects slowly (~80 us per call).
@_unit("i8(i8v, md, buf, opt, tab, st)", python=True)
def start(addrs, md, buf, opt, tab, st):
    """The first RHS and step size of a run (status as :func:`advance`)."""
    fns, accel = functions(addrs)
    return _start(fns, accel, md, buf, opt, tab, st)


@_unit("i8(i8v, md, buf, opt, tab, st, i8)", python=True)
def advance(addrs, md, buf, opt, tab, st, chunk):
    """Advance the run by at most ``chunk`` accepted steps (status code)."""
    fns, accel = functions(addrs)
    return _advance(fns, accel, md, buf, opt, tab, st, chunk)


@_unit("i8(i8v, md, buf, opt, tab, st, i8, i8v, f8v)", python=True)
def step_inputs(addrs, md, buf, opt, tab, st, nstep, slots, u):
    """Set the model's inputs, then take ``nstep`` steps: the entry point of
    :class:`gaussopt.integrate.stepper.Stepper` (a run without an end or outputs).

    ``u[i]`` goes to the model's parameter ``md.p[slots[i]]``; when one of them changes,
    the derivative at the current state (``st.f``, the first stage of the next step)
    is computed again with the new values, so that the step integrates the inputs held
    over it (a zero-order hold). Each step is :func:`step` and :func:`_after_step`, as
    :func:`_advance` takes them; a step that fails leaves the state at the last good
    step: :func:`step` changes it only when it succeeds, and a failure in what follows
    (the projection of the new state, the monitor) restores the state before it.
    Returns :data:`BAD_INPUT` (nothing done) when an input is not finite,
    :data:`BUFFER_FULL` before a step when the rank events' buffer must grow, the status
    of a failure, else :data:`CHUNK_DONE`.
    """
    fns, accel = functions(addrs)
    k = u.shape[0]
    for i in range(k):
        if not np.isfinite(u[i]):
            return BAD_INPUT
    changed = False
    for i in range(k):
        if md.p[slots[i]] != u[i]:
            changed = True
    if changed:
        old = np.empty(k)
        for i in range(k):
            old[i] = md.p[slots[i]]
            md.p[slots[i]] = u[i]
        s_ = rhs(fns, accel, md, buf, opt, st, st.sc[S_T], st.y, st.f)
        if s_ != 0:
            for i in range(k):
                md.p[slots[i]] = old[i]        # (st.f is the old inputs' still)
            return s_
    for _ in range(nstep):
        if st.ic[C_NEV] + 4 >= st.ev_f.shape[0]:
            return BUFFER_FULL
        s_ = step(fns, accel, md, buf, opt, tab, st)
        if s_ != 0:
            return s_
        st.ic[C_STEPS] += 1
        s_ = _after_step(fns, accel, md, buf, opt, tab, st)
        if s_ != 0:
            _put(st.y, st.y_old)
            _put(st.f, st.f_old)
            st.sc[S_T] = st.sc[S_TOLD]
            st.ic[C_KSTEP] -= 1
            st.ic[C_STEPS] -= 1
            return s_
    return CHUNK_DONE


@_unit("i8(i8v, md, buf, opt, tab, st)", python=True)
def after_step(addrs, md, buf, opt, tab, st):
    """What follows an accepted step that another integrator took (status code)."""
    fns, accel = functions(addrs)
    return _after_step(fns, accel, md, buf, opt, tab, st)


@_unit("i8(i8v, md, buf, opt, tab, st)", python=True, lazy=True)
def dense_at(addrs, md, buf, opt, tab, st):
    """The last accepted step's interpolant (:func:`prepare_dense`), after the step, from
    its end before projection (``I_DENSE = DENSE_LAZY``: Python asks for it only in the steps
    whose events need interior states); the stages it adds count as the step's
    evaluations. Status code (0, or the failure of one of the model's evaluations)."""
    fns, accel = functions(addrs)
    st.sc[S_LSQ_SIZE] = 0.0
    s_ = prepare_dense(fns, accel, md, buf, opt, tab, st, opt.i[I_METHOD], st.scr[R_YRAW],
                       st.scr[R_FRAW])
    _record_least_squares(st)
    return s_


@_unit("i8(i8v, md, buf, opt, st, f8, f8v, f8v)", python=True)
def rhs_at(addrs, md, buf, opt, st, t, y, out):
    """:func:`rhs` for an integrator outside the engine."""
    fns, accel = functions(addrs)
    return rhs(fns, accel, md, buf, opt, st, t, y, out)


@_unit("Tuple((i8, f8))(i8v, md, buf, opt, st, i8)", python=True)
def initial_step_at(addrs, md, buf, opt, st, order):
    """:func:`initial_step` from Python: ``(status, h)`` at the run's current state."""
    fns, accel = functions(addrs)
    return initial_step(fns, accel, md, buf, opt, st, order)


@_unit("UniTuple(i8, 2)(i8v, md, buf, opt, f8, f8v, f8v, f8)", python=True)
def project_at(addrs, md, buf, opt, t, q, v, vanished):
    """:func:`project` from Python."""
    fns, accel = functions(addrs)
    return project(fns, md, buf, opt, t, q, v, vanished)
