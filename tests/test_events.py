"""Events and dense output of ``simulate`` (solve_ivp's conventions), and the GA's default step.

The Cartesian pendulum of ``problems/pendulum.py`` (m = 2 kg, l = 1.5 m, released at rest
60 degrees from the vertical) crosses ``x = 0`` at the odd quarter periods, ``T`` known
exactly from the complete elliptic integral: ``T = 4 sqrt(l/g) K(sin^2(theta0/2))``.
References: that period, the angle equation ``theta'' = -(g/l) sin theta`` integrated at
1e-13 (``test_pendulum.angle_reference``), and scipy's own initial-step selection.
Tolerances come from the run's error control (``test_trajectory.integration_bound``).
"""

import numpy as np
import pytest
from scipy.integrate._ivp.common import select_initial_step

import gaussopt as go
from gaussopt_problems.pendulum import build
from test_pendulum import G_, L_, M_, T_EXACT, TH0, angle_reference
from test_trajectory import EPS, flow_growth, integration_bound

#: speed at the bottom (x = 0), where the x = 0 events are: |x'| = sqrt(2 g l (1 - cos th0))
SPEED = float(np.sqrt(2 * G_ * L_ * (1 - np.cos(TH0))))


@pytest.fixture(scope="module")
def pb():
    return build(m=M_, l=L_, g=G_, th0_deg=np.degrees(TH0))


def x_zero(t, q, v):
    return q[0]


def event(f, terminal=None, direction=None):
    """A fresh event function with solve_ivp's attributes."""
    def g(t, q, v):
        return f(t, q, v)
    g.__name__ = f.__name__
    if terminal is not None:
        g.terminal = terminal
    if direction is not None:
        g.direction = direction
    return g


def reference_xy(t):
    """(x, y, x', y') of the exact motion (the angle equation at 1e-13), shape (4, N)."""
    th, om = angle_reference([TH0, 0.0], np.atleast_1d(t))
    return np.array([L_ * np.sin(th), -L_ * np.cos(th), L_ * om * np.cos(th), L_ * om * np.sin(th)])


def rod_bounds(q, v):
    """Bounds on |q.q - l^2| and |q.v| of projected states: the projection stops at a
    row-normalized residual 1e-15 (1 + max|q_i|) (Projection().tol), |Phi_q| = 2|q|, and
    evaluating q.q - l^2 rounds to 3 eps (|q|^2 + l^2), q.v to 2 eps |q||v|."""
    qn, vn = np.linalg.norm(q, axis=-1), np.linalg.norm(v, axis=-1)
    pos = 2 * qn * 1e-15 * (1 + np.abs(q).max()) + 3 * EPS * (qn**2 + L_**2)
    vel = qn * 1e-15 * (1 + np.abs(v).max()) + 2 * EPS * qn * vn
    return pos, vel


# --------------------------------------------------------------------------- events
def test_x_crossings_give_exact_quarter_periods(pb):
    tr = go.simulate(pb.system, (0.0, 1.1 * T_EXACT), pb.q0, pb.v0, rtol=1e-12, atol=1e-12,
                     events=x_zero)
    assert tr.success and tr.status == 0, tr.message
    te = tr.t_events[0]
    assert te.shape == (2,) and tr.q_events[0].shape == (2, 2) and tr.v_events[0].shape == (2, 2)
    exact = np.array([0.25, 0.75]) * T_EXACT
    # Error estimate: the zero of x moves by |dx| / |x'|, dx the error of the projected dense
    # solution there: integration_bound (sum of the accepted steps' local errors, carried by
    # the exact flow's growth from the angle equation, + one local error of the interpolant;
    # the projection does not move a point farther from the manifold's exact point), plus
    # brentq's 4 eps (1 + |t|).
    bound = integration_bound(tr, flow_growth(angle_reference, [TH0, 0.0], tr.t), dense=True)
    tol = bound / SPEED + 4 * EPS * (1 + exact)
    assert np.all(np.abs(te - exact) < tol), (te - exact, tol)
    # issue 10's acceptance: the quarter periods to 1e-9 at rtol 1e-12 (the a priori bound
    # above is of that size, ~1e-9, as it adds every step's worst local error)
    assert np.all(np.abs(te - exact) < 1e-9), te - exact
    # the event states: on the rod, at x = 0 to |x'| times brentq's bracket (4 eps (1+t))
    # plus the rounding of the projection (bound of x from rod_bounds: 1e-15 (1 + |q|))
    q, v = tr.q_events[0], tr.v_events[0]
    pos, vel = rod_bounds(q, v)
    assert np.all(np.abs((q * q).sum(1) - L_**2) <= pos)
    assert np.all(np.abs((q * v).sum(1)) <= vel)
    assert np.all(np.abs(q[:, 0]) <= SPEED * 8 * EPS * (1 + te) + 1e-15 * (1 + L_))
    # x' alternates: leftwards at T/4, rightwards at 3T/4, at the speed at the bottom
    # (energy error of the run ~ its integration bound times |grad E| / (m |v|))
    assert v[0, 0] < 0 < v[1, 0]
    assert np.abs(np.abs(v[:, 0]) - SPEED).max() < bound * (1 + G_ / SPEED)


def test_direction_and_terminal(pb):
    t_end = 2.1 * T_EXACT
    up = event(x_zero, direction=1.0)              # x from negative to positive: 3T/4, 7T/4
    down = event(x_zero, direction=-1.0)           # 1T/4, 5T/4
    vx_zero = event(lambda t, q, v: v[0])          # turning points: 0, T/2, T, 3T/2, 2T
    vx_zero.__name__ = "vx_zero"
    tr = go.simulate(pb.system, (0.0, t_end), pb.q0, pb.v0, rtol=1e-10, atol=1e-10,
                     events=[up, down, vx_zero])
    assert tr.status == 0, tr.message
    # the same error estimate as above at this tolerance, for x (speed at the bottom)
    # and for v_x (at the turning points |v_x'| = |a_x| = g sin th0 cos th0)
    bound = integration_bound(tr, flow_growth(angle_reference, [TH0, 0.0], tr.t), dense=True)
    tol_x = bound / SPEED + 4 * EPS * (1 + t_end)
    tol_v = bound / (G_ * np.sin(TH0) * np.cos(TH0)) + 4 * EPS * (1 + t_end)
    np.testing.assert_allclose(tr.t_events[0], np.array([0.75, 1.75]) * T_EXACT, rtol=0,
                               atol=tol_x)
    np.testing.assert_allclose(tr.t_events[1], np.array([0.25, 1.25]) * T_EXACT, rtol=0,
                               atol=tol_x)
    # v_x = 0 at the release too: a zero at t0 counts as soon as the function leaves it
    # (solve_ivp's rule, (g <= 0 <= g_new) or (g >= 0 >= g_new))
    np.testing.assert_allclose(tr.t_events[2], np.array([0.0, 0.5, 1.0, 1.5, 2.0]) * T_EXACT,
                               rtol=0, atol=tol_v)

    # terminal: the run ends at 3T/4, successfully, status 1 as solve_ivp; the events
    # before it are kept, the outputs end at the event with its state
    stop = event(x_zero, terminal=True, direction=1.0)
    tr2 = go.simulate(pb.system, (0.0, t_end), pb.q0, pb.v0, rtol=1e-10, atol=1e-10,
                      events=[stop, vx_zero], dense_output=True)
    assert tr2.success and tr2.status == 1
    assert "termination event" in tr2.message and "events[0] (x_zero)" in tr2.message
    assert tr2.t_events[0] == pytest.approx([0.75 * T_EXACT], abs=tol_x)
    assert tr2.t_events[1] == pytest.approx([0.0, 0.5 * T_EXACT], abs=tol_v)
    assert tr2.t[-1] == tr2.t_events[0][0] and np.array_equal(tr2.q[-1], tr2.q_events[0][0])
    assert np.all(np.diff(tr2.t) > 0) and tr2.sol.t_max == tr2.t[-1]
    with pytest.raises(go.ModelError, match="within the computed span"):
        tr2.sol(tr2.t[-1] + 1e-3)

    # terminal = 2: the second zero (either direction) stops it, at 3T/4 too
    twice = event(x_zero, terminal=2)
    t_eval = np.linspace(0.0, t_end, 50)
    tr3 = go.simulate(pb.system, (0.0, t_end), pb.q0, pb.v0, rtol=1e-10, atol=1e-10,
                      events=twice, t_eval=t_eval)
    assert tr3.status == 1
    assert tr3.t_events[0] == pytest.approx(np.array([0.25, 0.75]) * T_EXACT, abs=tol_x)
    # with t_eval, the requested times up to the event (solve_ivp's rule)
    np.testing.assert_array_equal(tr3.t, t_eval[t_eval <= tr3.t_events[0][-1]])

def test_event_values_start_from_the_projected_start(pb):
    """A start off the rod by ``delta = 1e-9`` of its length (inside the consistency
    tolerance, so not refused): every interpolated state of the run is projected onto
    the rod, so its radius is ``l`` from the first step on. The event "the radius falls
    through ``l (1 + delta/2)``" is positive at the start as given and negative on every
    state the run computes: no crossing of the motion, no event. Before, the event's
    value at the start was taken from the start as given, and its jump to the projected
    interior ended the run at once (an event at 7.5e-16 s)."""
    delta = 1e-9
    q0 = pb.q0 * (1 + delta)

    def radius(t, q, v):
        return float(np.hypot(q[0], q[1])) - L_ * (1 + delta / 2)
    through = event(radius, terminal=True, direction=-1.0)
    tr = go.simulate(pb.system, (0.0, 0.5 * T_EXACT), q0, pb.v0, rtol=1e-10, atol=1e-10,
                     events=[through])
    assert tr.status == 0, tr.message
    assert tr.t_events[0].size == 0
    # (the run's states are on the rod to rounding: the event's value stays -l delta/2)
    np.testing.assert_allclose(np.hypot(tr.q[1:, 0], tr.q[1:, 1]), L_, rtol=1e-13)



@pytest.mark.parametrize("method", ["rk4", "Radau"])
def test_events_on_other_paths(pb, method):
    # rk4 (fixed step in the engine, cubic Hermite interpolant) and Radau (scipy's steps,
    # scipy's interpolant): the events are where the run's own solution crosses x = 0
    # (the state there is on x = 0 and on the rod), near the exact quarter period
    dt = 4e-3 if method == "rk4" else None
    tol = 1e-9 if method == "rk4" else 1e-7
    kw = dict(method=method, dt=dt, rtol=tol, atol=tol)
    tr = go.simulate(pb.system, (0.0, 0.3 * T_EXACT), pb.q0, pb.v0, events=x_zero,
                     dense_output=True, **kw)
    assert tr.status == 0, tr.message
    te, q, v = tr.t_events[0], tr.q_events[0], tr.v_events[0]
    assert te.shape == (1,)
    pos, vel = rod_bounds(q, v)
    assert np.all(np.abs((q * q).sum(1) - L_**2) <= pos)
    assert np.all(np.abs((q * v).sum(1)) <= vel)
    assert np.all(np.abs(q[:, 0]) <= SPEED * 8 * EPS * (1 + te) + 1e-15 * (1 + L_))
    assert isinstance(tr.sol, go.DenseSolution)
    qs, vs = tr.sol(te)                              # the event state is sol at its time
    np.testing.assert_array_equal(qs, q)
    np.testing.assert_array_equal(vs, v)
    if method == "rk4":
        # rk4's global error ~ C dt^4: halving dt cuts it 16-fold, so the error of the
        # dt run is (e(dt) - e(dt/2)) * 16/15 (Richardson); 2x for the estimate. The
        # Hermite interpolant adds its own h^4/384 max|y''''| (~1e-13 here, inside it).
        half = go.simulate(pb.system, (0.0, 0.3 * T_EXACT), pb.q0, pb.v0, events=x_zero,
                           **{**kw, "dt": dt / 2})
        est = np.abs(te - half.t_events[0]) * 16 / 15
        exact = np.array([0.25]) * T_EXACT
        assert np.all(np.abs(te - exact) < 2 * est + 4 * EPS * (1 + exact)), (te - exact, est)
    else:
        # Radau's error control keeps each step's local error below ~ the tolerance per
        # component, as the explicit methods (integration_bound with its step count)
        bound = integration_bound(tr, flow_growth(angle_reference, [TH0, 0.0], tr.t),
                                  dense=True)
        exact = np.array([0.25]) * T_EXACT
        assert np.all(np.abs(te - exact) < bound / SPEED + 4 * EPS * (1 + exact))


# --------------------------------------------------------------------------- dense output
def test_dense_output_on_manifold_and_exact_at_steps(pb):
    t_end = 1.3 * T_EXACT
    tr = go.simulate(pb.system, (0.0, t_end), pb.q0, pb.v0, rtol=1e-11, atol=1e-11,
                     dense_output=True)
    assert tr.success and tr.sol is not None and tr.t_events is None
    # exact at the steps (t_eval=None: the outputs are the steps)
    q, v = tr.sol(tr.t)
    np.testing.assert_array_equal(q, tr.q)
    np.testing.assert_array_equal(v, tr.v)
    # between the steps (midpoints) against the exact motion: the run's integration
    # bound (with the interpolant's own local error: dense=True)
    mid = 0.5 * (tr.t[1:] + tr.t[:-1])
    q, v = tr.sol(mid)
    assert q.shape == (mid.size, 2) and v.shape == (mid.size, 2)
    ref = reference_xy(mid)
    bound = integration_bound(tr, flow_growth(angle_reference, [TH0, 0.0], mid), dense=True,
                              ref_tol=1e-13)
    assert np.abs(q - ref[:2].T).max() < bound
    assert np.abs(v - ref[2:].T).max() < bound
    # on the rod to the projection's tolerance, as the run's own states
    pos, vel = rod_bounds(q, v)
    assert np.all(np.abs((q * q).sum(1) - L_**2) <= pos)
    assert np.all(np.abs((q * v).sum(1)) <= vel)
    # a float gives shape (n,), the same values as in an array
    qs, vs = tr.sol(float(mid[3]))
    assert qs.shape == (2,) and vs.shape == (2,)
    np.testing.assert_array_equal(qs, q[3])
    # without the projection the interpolant is off the rod by the integration error
    free = go.simulate(pb.system, (0.0, t_end), pb.q0, pb.v0, rtol=1e-11, atol=1e-11,
                       stabilization=None, dense_output=True)
    qf, _ = free.sol(mid)
    assert np.abs((qf * qf).sum(1) - L_**2).max() > 10 * pos.max()
    with pytest.raises(go.ModelError, match=r"`t` must lie within the computed span"):
        tr.sol(-0.1)
    assert go.simulate(pb.system, (0.0, 0.1), pb.q0, pb.v0).sol is None


def test_save_load_keeps_events(pb, tmp_path):
    tr = go.simulate(pb.system, (0.0, 0.8 * T_EXACT), pb.q0, pb.v0,
                     events=[x_zero, event(lambda t, q, v: q[1] + 10.0)], dense_output=True)
    back = go.load(tr.save(tmp_path / "ev"))
    assert back.sol is None and back.status == tr.status == 0 and back.success
    assert len(back.t_events) == 2 and back.t_events[1].shape == (0,)
    assert back.q_events[1].shape == (0, 2)
    for a, b in zip(back.t_events + back.q_events + back.v_events,
                    tr.t_events + tr.q_events + tr.v_events):
        np.testing.assert_array_equal(a, b)
    plain = go.load(go.simulate(pb.system, (0.0, 0.1), pb.q0, pb.v0).save(tmp_path / "p"))
    assert plain.t_events is None


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("events, match", [
    (42, r"`events` must be a callable f\(t, q, v\) -> float or a sequence of them, found int"),
    ([], r"`events` must hold at least one callable"),
    ([x_zero, "q[0]"], r"`events\[1\]` must be a callable f\(t, q, v\) -> float, found str"),
    (lambda t, q, v: q, r"`events\[0\]` must return a finite float, found array"),
    (lambda t, q, v: np.nan, r"`events\[0\]` must return a finite float, found nan"),
    (lambda t, q: q[0], r"`events\[0\]` raised TypeError at the initial state"),
    (event(x_zero, terminal="yes"), r"`events\[0\].terminal` must be a bool or a positive int, "
                                    r"found 'yes'"),
    (event(x_zero, terminal=-2), r"`events\[0\].terminal` must be a bool or a positive int"),
    (event(x_zero, direction="up"), r"`events\[0\].direction` must be a finite real number"),
])
def test_bad_events_are_rejected(pb, events, match):
    with pytest.raises(go.ModelError, match=match):
        go.simulate(pb.system, (0.0, 0.1), pb.q0, pb.v0, events=events)


def test_dense_output_must_be_bool(pb):
    with pytest.raises(go.ModelError, match=r"`dense_output` must be True or False, found 'yes'"):
        go.simulate(pb.system, (0.0, 0.1), pb.q0, pb.v0, dense_output="yes")


def test_failing_event_keeps_the_events_found(pb):
    def fragile(t, q, v):
        if t > 0.4 * T_EXACT:
            raise RuntimeError("sensor offline")
        return q[0]

    tr = go.simulate(pb.system, (0.0, T_EXACT), pb.q0, pb.v0, events=[x_zero, fragile])
    assert not tr.success and tr.status == -1 and isinstance(tr.exception, RuntimeError)
    assert "events[1] (fragile) raised RuntimeError" in tr.message and "sensor offline" in tr.message
    # the zero at T/4 was found (by both) before the failure; the run's outputs end at the
    # last step whose events were checked (the failed step may hide a terminal event)
    assert tr.t_events[0].size == 1 and tr.t_events[1].size == 1
    assert tr.t_events[0][0] == pytest.approx(0.25 * T_EXACT, abs=1e-6)
    assert 0.25 * T_EXACT < tr.t[-1] < 0.4 * T_EXACT
    failed_at = float(tr.message.split("t≈")[1].split(":")[0])
    assert failed_at > 0.4 * T_EXACT


# --------------------------------------------------------------------------- GA default step
def test_ga_default_step_is_scipys_initial_step(pb):
    # the call: the GA integrates with rk4 and needs no dt
    tr = go.simulate(pb.system, (0.0, 0.05), pb.q0, pb.v0, solver="ga")
    assert tr.success, tr.message
    assert tr.meta["method"] == "rk4" and "automatic" in tr.meta["dt_source"]
    h = tr.meta["dt"]
    # reference: scipy's select_initial_step (order 4, rtol = atol = 1e-9) on the exact
    # right-hand side of the rod, evaluated (as the engine does at t0) on the projected
    # state: q radially onto the circle (M = m I), v tangential, a = tangential gravity
    # minus the centripetal |v|^2/l
    def rhs(t, y):
        u = y[:2] / np.linalg.norm(y[:2])
        vv = y[2:] - (y[2:] @ u) * u
        F = np.array([0.0, -G_])
        return np.concatenate([vv, F - (F @ u) * u - (vv @ vv) / L_ * u])

    y0 = np.concatenate([pb.q0, pb.v0])
    f0 = rhs(0.0, y0)
    h_ref = select_initial_step(rhs, 0.0, y0, 0.05, np.inf, f0, 1, 4, 1e-9, 1e-9)
    # Error estimate: h = (0.01 / d2)^(1/5) with d2 = rms((f(y0 + h0 f0) - f0) / scale) / h0,
    # scale = atol + rtol |y0|. The GA's accelerations err by at most
    # delta = tol (1 + |a|) (tol = 1e-8, |a| <= g), which moves d2 by up to
    # rms(2 delta / scale) / h0 over the acceleration rows; h moves by 1/5 of d2's
    # relative change (2x for the estimate).
    scale = 1e-9 + 1e-9 * np.abs(y0)
    d0, d1 = np.sqrt(np.mean((y0 / scale) ** 2)), np.sqrt(np.mean((f0 / scale) ** 2))
    h0 = 0.01 * d0 / d1
    d2 = np.sqrt(np.mean(((rhs(0.0, y0 + h0 * f0) - f0) / scale) ** 2)) / h0
    delta = 1e-8 * (1 + G_)
    dd2 = np.sqrt(np.sum((2 * delta / scale[2:]) ** 2) / 4) / h0
    assert abs(h / h_ref - 1) < 2 * (dd2 / d2 / 5 + 1e-12), (h, h_ref)
    # the motion: the same rk4 run with the closed form, within the GA's acceleration
    # error integrated over the span (|dv| <= delta t, |dq| <= delta t^2 / 2)
    cf = go.simulate(pb.system, (0.0, 0.05), pb.q0, pb.v0, method="rk4", dt=h)
    np.testing.assert_array_equal(tr.t, cf.t)
    assert np.abs(tr.v - cf.v).max() < 2 * delta * 0.05
    assert np.abs(tr.q - cf.q).max() < 2 * delta * 0.05**2 / 2 + 4 * EPS * L_
    # an explicit rk4 still needs its step
    with pytest.raises(go.ModelError, match=r"`dt` must be a positive step for method='rk4'"):
        go.simulate(pb.system, (0.0, 0.05), pb.q0, pb.v0, solver="ga", method="rk4")


# --------------------------------------------------------------------------- screens
def _tracker(f):
    from gaussopt.integrate.dense_output import EventTracker
    calls = []

    def g(t, q, v):
        calls.append(t)
        return f(t)
    g.interp_points, g.interp_screen, g.direction = 10, True, -1
    return EventTracker([g], 0.0, np.zeros(1), np.zeros(1)), calls


def _state(t):
    return np.zeros(2)


def test_a_screen_skips_the_interior_points_only_where_the_parabola_clears_zero():
    # far from zero on the step: the end and the middle are evaluated, nothing else
    tr, calls = _tracker(lambda t: 2.0 + np.sin(t))
    calls.clear()
    assert not tr.after_step(0.0, 0.5, np.zeros(2), _state, _state)
    assert calls == [0.5, 0.25] and tr.screened[0] == 1
    # a pair of zeros inside the step (both ends positive): the parabola through the ends
    # and the middle dips below zero, the interior points are checked, the first zero found
    tr, calls = _tracker(lambda t: (t - 0.25) ** 2 - 0.001)
    assert not tr.after_step(0.0, 0.5, np.zeros(2), _state, _state)
    assert tr.unscreened[0] == 1 and len(tr.t_events[0]) == 1
    # (Brent's root to 4 eps of t, plus the rounding of f (~eps) over its slope there,
    # 2 sqrt(0.001) = 0.063: about 1e-14; 1e-12 leaves a margin of 100)
    assert abs(tr.t_events[0][0] - (0.25 - np.sqrt(0.001))) < 1e-12
    # positive throughout but close to zero against its curvature (minimum 0.05, the
    # parabola's curvature term 1.0): checked at the interior points, no event
    tr, calls = _tracker(lambda t: 0.05 + 4.0 * (t - 0.2) ** 2)
    calls.clear()
    assert not tr.after_step(0.0, 0.5, np.zeros(2), _state, _state)
    assert tr.unscreened[0] == 1 and len(calls) == 12 and not tr.t_events[0]
    # without the interpolant before projection (a step error control did not limit):
    # every interior point, as without the screen
    tr, calls = _tracker(lambda t: 2.0 + np.sin(t))
    calls.clear()
    assert not tr.after_step(0.0, 0.5, np.zeros(2), _state, None)
    assert len(calls) == 11 and tr.screened[0] == 0
    from gaussopt.core.exceptions import ModelError
    from gaussopt.integrate.dense_output import EventTracker

    def h(t, q, v):
        return 1.0
    h.interp_screen = "yes"
    with pytest.raises(ModelError, match=r"`events\[0\]\.interp_screen` must be a bool"):
        EventTracker([h], 0.0, np.zeros(1), np.zeros(1))


def test_the_quintic_screen_is_exact_on_quintics():
    # QuinticScreen interpolates q from (q, q', q'') at both ends of the step and gives v as
    # its derivative: on a polynomial of degree 5 (per coordinate) it is exact, so its
    # values anywhere in the step are the polynomial's to the rounding of its terms (the
    # basis sums ~10 terms of size <= |coefficients| h^k: 1e-13 of their size bounds it)
    from gaussopt.integrate.dense_output import QuinticScreen

    rng = np.random.default_rng(3)
    c = rng.normal(size=(6, 2))               # q_j(t) = sum_k c[k, j] t^k, two coordinates
    t0, h = 0.7, 0.4

    def q(t):
        return sum(c[k] * t**k for k in range(6))

    def v(t):
        return sum(k * c[k] * t**(k - 1) for k in range(1, 6))

    def a(t):
        return sum(k * (k - 1) * c[k] * t**(k - 2) for k in range(2, 6))

    t1 = t0 + h
    screen = QuinticScreen(t0, h, np.concatenate([q(t0), v(t0)]),
                           np.concatenate([v(t0), a(t0)]), np.concatenate([q(t1), v(t1)]),
                           np.concatenate([v(t1), a(t1)]))
    scale = np.abs(c).sum() * 10
    for t in (t0, t0 + 0.13 * h, t0 + 0.5 * h, t0 + 0.91 * h, t1):
        y = screen(t)
        assert np.abs(y[:2] - q(t)).max() < 1e-13 * scale
        assert np.abs(y[2:] - v(t)).max() < 1e-13 * scale / h


def test_events_find_the_same_zeros_with_and_without_dense_output(pb):
    # with events alone DOP853's interpolant of a step (three more evaluations of the model)
    # is built only in the steps whose events need interior states (a zero to locate); with
    # dense output, in every step. The same interpolant locates the same zeros: the event
    # times and states are identical, and the run without dense output evaluates the model
    # three times less in every step without a zero (2 zeros in 1.1 periods here)
    def watched(t, q, v):
        return q[0]
    watched.interp_points = 4

    runs = [go.simulate(pb.system, (0.0, 1.1 * T_EXACT), pb.q0, pb.v0, rtol=1e-10,
                        atol=1e-10, events=watched, dense_output=dense) for dense in (False, True)]
    lazy, eager = runs
    assert lazy.success and eager.success
    assert np.array_equal(lazy.t_events[0], eager.t_events[0]) and lazy.t_events[0].size == 2
    assert np.array_equal(lazy.q_events[0], eager.q_events[0])
    assert np.array_equal(lazy.q, eager.q) and np.array_equal(lazy.v, eager.v)
    steps = lazy.stats["steps"]
    assert eager.stats["steps"] == steps
    # (interp_points: the scan needs the interior states of every step, so both build the
    # interpolant everywhere: the same evaluations; without it only the steps with a zero)
    assert lazy.stats["rhs_evaluations"] == eager.stats["rhs_evaluations"]
    plain = [go.simulate(pb.system, (0.0, 1.1 * T_EXACT), pb.q0, pb.v0, rtol=1e-10,
                         atol=1e-10, events=x_zero, dense_output=dense) for dense in (False, True)]
    assert np.array_equal(plain[0].t_events[0], plain[1].t_events[0])
    saved = plain[1].stats["rhs_evaluations"] - plain[0].stats["rhs_evaluations"]
    assert saved == 3 * (steps - 2), (saved, steps)


# --------------------------------------------------------------------------- rebased families
def _turning_slip(t_stop=0.7, w=9.0):
    """``u(t) = (t_stop - t) (cos w t, sin w t)``: a vector that turns (w rad/s) while it
    shrinks to zero at ``t_stop``, and the watch ``u . d`` with ``d`` rebased to ``u/|u|``
    at each step's start (an event of ``t`` alone)."""
    d = np.array([1.0, 0.0])

    def u(t):
        return (t_stop - t) * np.array([np.cos(w * t), np.sin(w * t)])

    def watch(t, q, v):
        return float(u(t) @ d)

    def rebase(t, q, v):
        d[:] = u(t) / np.linalg.norm(u(t))
    watch.rebase, watch.direction, watch.terminal = rebase, -1, True
    return watch, u


def test_a_rebased_watch_finds_the_zero_of_a_turning_vector():
    """The vector turns by 9 rad/s: watched along its first direction, ``u . d0`` would
    cross zero at ``t = pi / 18`` (a quarter turn, u far from zero); rebased at every step
    its only zero is the vector's own, at 0.7 (Brent's root to 4 eps, the watch's rounding
    ~eps over its slope 1: 1e-12 leaves a margin)."""
    from gaussopt.integrate.dense_output import EventTracker
    watch, u = _turning_slip()
    tr = EventTracker([watch], 0.0, np.zeros(1), np.zeros(1))
    t, h, hit = 0.0, 0.01, False
    while not hit:
        hit = tr.after_step(t, t + h, np.zeros(2), _state)
        t += h
    assert tr.t_events[0][0] == pytest.approx(0.7, abs=1e-12)
    # a step that ends in a terminal event chooses no new member: the watch stays the one
    # that found it (its value there zero)
    assert abs(watch(tr.t_events[0][0], None, None)) < 1e-12
    # the same watch without rebase: the quarter turn
    d0 = np.array([1.0, 0.0])

    def fixed(t, q, v):
        return float(u(t) @ d0)
    fixed.direction, fixed.terminal = -1, True
    tr = EventTracker([fixed], 0.0, np.zeros(1), np.zeros(1))
    t, hit = 0.0, False
    while not hit:
        hit = tr.after_step(t, t + h, np.zeros(2), _state)
        t += h
    assert tr.t_events[0][0] == pytest.approx(np.pi / 18, abs=1e-12)


def test_a_rebase_refreshes_the_values_of_the_functions_that_read_what_it_moved():
    """A rebase may change what other functions read (a contact phase's forces follow its
    sliding points' reference directions, which their slip watches move): every
    function's value at the step's end is evaluated again after it. Here the watch of the
    turning vector rebases its direction ``d`` at every step, and ``sign`` (no rebase of
    its own, direction -1) reads ``d . e1 + 0.5``: within a step it is constant, and it
    changes only between members. Before, its value kept from before a rebase was compared
    with the next step's end: once the direction passed 2 pi / 3 that read as a crossing
    inside a step whose two ends, evaluated again, are both negative, and Brent's method
    raised ``ValueError`` (dm_control's humanoid: its group's cone margin kept at 13.5 N,
    -8.9 N after the move, and the run was lost)."""
    from gaussopt.integrate.dense_output import EventTracker
    watch, u = _turning_slip(t_stop=5.0, w=1.0)
    d = watch.__closure__[[c for c in watch.__code__.co_freevars].index("d")].cell_contents

    def sign(t, q, v):
        return float(d[0] + 0.5)
    sign.direction = -1
    tr = EventTracker([watch, sign], 0.0, np.zeros(1), np.zeros(1))
    t, h = 0.0, 0.1
    while t < 3.0:
        tr.after_step(t, t + h, np.zeros(2), _state)
        t += h
        # the values kept for the next step are those of the members it will use
        assert tr.g[1] == sign(t, None, None)
    # the rebased direction is the vector's, which passed 2 pi / 3 at t = 2.09: ``sign``
    # changed with the members, not within a step, and no zero of it is recorded
    assert d[0] + 0.5 < 0 and tr.t_events[1] == []


def test_an_event_whose_values_change_between_evaluations_is_named():
    """An event function whose value at a state is not one function of ``(t, q, v)`` (here
    +1 at its first call, -1 after) shows a sign change that its values, evaluated again
    for Brent's method, do not have: a ModelError naming it, not scipy's ValueError."""
    from gaussopt.integrate.dense_output import EventTracker
    calls = []

    def flaky(t, q, v):
        calls.append(t)
        return 1.0 if len(calls) == 1 else -1.0
    tr = EventTracker([flaky], 0.0, np.zeros(1), np.zeros(1))
    with pytest.raises(go.ModelError, match=r"`events\[0\]` \(flaky\) changed sign between "
                                            r"t=0\.0 and t=0\.1 .* must be one function of"):
        tr.after_step(0.0, 0.1, np.zeros(2), _state)


def test_a_rebased_watch_in_a_run_and_a_bad_rebase(pb):
    watch, _ = _turning_slip()
    tr = go.simulate(pb.system, (0.0, 1.0), pb.q0, pb.v0, events=watch)
    assert tr.status == 1 and tr.t[-1] == pytest.approx(0.7, abs=1e-12)

    def g(t, q, v):
        return 1.0
    g.rebase = "yes"
    with pytest.raises(go.ModelError, match=r"`events\[0\]\.rebase` must be a callable "
                                            r"rebase\(t, q, v\), found str"):
        go.simulate(pb.system, (0.0, 0.1), pb.q0, pb.v0, events=g)


def _falling_watches(interp: int = 0, reads_source: bool = False, **options):
    """Runs of a particle falling from x = 1 under g = 9.81, watched crossing x = 0.5, 0.2,
    -0.1 by three plain functions and by three readers of one shared source (``interp``:
    their ``interp_points``; ``reads_source``: a shared watch evaluated alone reads the
    source, as a contact run's gap watch reads every gap): ``(runs, calls)``, the runs by
    ``shared`` and the calls of the plain functions and of the source. Both find the
    crossings at ``sqrt(2 (1 - c) / g)`` (free fall is a quadratic: DOP853 and Brent's
    method locate its roots to rounding, 1e-12 s a bound with margins of 1e3)."""
    levels = (0.5, 0.2, -0.1)
    system = go.System(("x",), mass=np.eye(1), force=[-9.81])
    calls = {"shared": 0, "plain": 0}

    def source(t, q, v):
        calls["shared"] += 1
        return q[0] - np.array(levels)

    def watch(i, shared):
        def f(t, q, v):
            if shared and reads_source:
                return float(source(t, q, v)[i])
            calls["plain"] += not shared
            return float(q[0] - levels[i])
        if shared:
            f.shared, f.from_shared = source, (lambda t, s: float(s[i]))
        if interp:
            f.interp_points = interp
        return f

    runs = {shared: go.simulate(system, (0.0, 1.0), np.array([1.0]), np.zeros(1),
                                events=[watch(i, shared) for i in range(3)], **options)
            for shared in (False, True)}
    exact = [np.sqrt(2 * (1 - c) / 9.81) for c in levels]
    for shared in (False, True):
        got = [float(t[0]) for t in runs[shared].t_events]
        np.testing.assert_allclose(got, exact, rtol=0, atol=1e-12)
    return runs, calls


def test_events_reading_one_shared_quantity_evaluate_it_once_per_state():
    """``shared``/``from_shared``: three watches of one quantity find the same crossings as
    three plain functions (:func:`_falling_watches`), and the shared source is evaluated
    once per state where the plain functions are evaluated once each (the contact run's
    gap watches: one per open point)."""
    runs, calls = _falling_watches()
    assert [list(t) for t in runs[True].t_events] == [list(t) for t in runs[False].t_events]
    # (the plain run calls each of its three functions at every state the shared run reads
    # once; Brent's iterates call one function each in both)
    assert calls["shared"] < 0.5 * calls["plain"]


def test_shared_watches_scanned_inside_steps_read_one_evaluation_per_state():
    """The same three watches with ``interp_points`` (a contact run's gap watches of
    spheres and capsules, scanned inside the steps): their interior points and screens
    read one evaluation of the shared source per state, the plain functions one each; the
    crossings are the same (and exact)."""
    runs, calls = _falling_watches(interp=6, reads_source=True, max_step=0.05)
    # (the six interior points of every step are read by the three watches, once by the
    # source: two reads fewer per point, in every step but those three where a scan stops
    # at its crossing; Brent's iterates read one function each in both runs)
    steps = runs[True].stats["steps"]
    assert steps == runs[False].stats["steps"] and steps > 3
    assert calls["plain"] - calls["shared"] >= 2 * 6 * (steps - 3)


def test_a_shared_reader_that_fails_is_named_as_its_own_evaluation_would_be():
    """The shared path reports what the plain one does: a member returning NaN (here
    the second, from the start) is named with its index and value; a source that raises
    at the initial state is named by its first member."""
    system = go.System(("x",), mass=np.eye(1), force=[-9.81])

    def source(t, q, v):
        return np.array([q[0], q[0] - 0.5])

    def members(second):
        fs = []
        for i, read in enumerate((lambda t, s: float(s[0]), second)):
            f = (lambda t, q, v, r=read: r(t, source(t, q, v)))
            f.shared, f.from_shared = source, read
            fs.append(f)
        return fs

    with pytest.raises(go.ModelError, match=r"`events\[1\]` must return a finite float, "
                                            r"found nan"):
        go.simulate(system, (0.0, 1.0), np.array([1.0]), np.zeros(1),
                    events=members(lambda t, s: float("nan")))

    def broken(t, q, v):
        raise ValueError("no gaps here")

    fs = members(lambda t, s: float(s[1]))
    for f in fs:
        f.shared = broken
    with pytest.raises(go.ModelError, match=r"`events\[0\]` raised ValueError at the initial"):
        go.simulate(system, (0.0, 1.0), np.array([1.0]), np.zeros(1), events=fs)


def test_the_parabola_screen_is_one_test_on_floats_and_arrays():
    """The screen's parabola test (``_parabola_clear``) on arrays (a step's screens of
    many events at once) gives, element by element, what it gives on floats: values of
    both signs, parabolas that dip to zero and that stay clear, an exact zero curvature
    (the vertex term's division is masked there)."""
    from gaussopt.integrate.dense_output import _parabola_clear

    rng = np.random.default_rng(7)
    g0 = rng.uniform(0.01, 2.0, 400) * rng.choice([-1.0, 1.0], 400)
    g1 = np.abs(rng.uniform(0.01, 2.0, 400)) * np.sign(g0)
    gm = np.abs(rng.uniform(-0.5, 2.0, 400)) * np.sign(g0)
    gm[:5] = 0.5 * (g0[:5] + g1[:5])                     # (a straight line: c2 = 0)
    got = _parabola_clear(g0, gm, g1, 0.5)
    want = np.array([_parabola_clear(float(a), float(m), float(b), 0.5)
                     for a, m, b in zip(g0, gm, g1)])
    assert np.array_equal(got, want)
    assert 20 < want.sum() < 380                          # (both outcomes occur: 48 clear)
