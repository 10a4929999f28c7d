"""Unilateral contact (gaussopt.integrate.contact_run) against independent references.

* the bouncing ball (problems/bouncing_ball.py): impact times, rebound speeds,
  accumulation time and resting force, all analytic;
* the rocking block (problems/rocking_block.py): Housner's ratio of angular
  velocities at every impact (closed form) and the impact times of the corner
  pendulums integrated by scipy;
* a particle sliding off a frictionless sphere: the lift-off angle
  cos(th*) = (2 + v0^2 / (g R)) / 3 (energy and the normal force), the
  lift-off time from the pendulum equation, the ballistic flight after it;
* the contact LCP (lcp.solve_contact) against cvxpy's QP on random problems,
  and its optimality conditions;
* every documented error, and a run that cannot continue (an impact with no
  admissible post-impact velocity) ending with success=False and its partial run.

Measured (DOP853, rtol = atol = 1e-12): ball impact times 1.2e-14 relative,
accumulation time 2.3e-14, resting force m g exact; block ratios within 5.4e-15
of Housner's, impact times 3.2e-11 over 12 impacts; sphere lift-off time 5.3e-13.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt import ContactSolveError, solve_contact
from gaussopt.core.exceptions import ModelError, UnsupportedConstraintError
from gaussopt_problems import bouncing_ball, rocking_block
from test_trajectory import EPS, integration_bound


# --------------------------------------------------------------------------- bouncing ball
@pytest.fixture(scope="module")
def ball():
    p = bouncing_ball.build()
    return p, p.simulate()


def test_ball_impacts_at_the_analytic_times_and_speeds(ball):
    p, tr = ball
    P = p.params
    assert tr.success and tr.t[-1] == p.t_span[1]
    # the flights are quadratic polynomials, which DOP853 (order 8) integrates exactly: what
    # is left is rounding, ~eps |t| per step over a few steps per flight, and Brent's 4 eps
    # in t, divided by the impact speed (>= 1e-2 m/s before the accumulation): 1e-12
    # relative covers it with the target 1e-9 far above
    ti = np.array([im.t for im in tr.impacts])
    exact = bouncing_ball.impact_times(ti.size, P["h"], P["r"], P["e"], P["g"])
    assert np.abs(ti - exact).max() < 1e-12 * exact.max()               # measured 1.2e-14
    # Newton's law at every impact before the accumulation: gap'+ = -e gap'- (the impact
    # is solved exactly by the verified Gauss step: 16 (n + m + 1) eps of the speed)
    for im in tr.impacts[:-1]:
        assert im.gap_rate_after[0] == pytest.approx(-P["e"] * im.gap_rate_before[0],
                                                     rel=64 * EPS)
        assert im.impulses[0] > 0
    # frictionless: the horizontal velocity never changes
    assert np.abs(tr.v[:, 0] - P["vx"]).max() < 64 * EPS * P["vx"]


def test_ball_accumulation_and_rest(ball):
    p, tr = ball
    P = p.params
    last = tr.impacts[-1]
    assert last.accumulation and not any(im.accumulation for im in tr.impacts[:-1])
    t_inf = bouncing_ball.accumulation_time(P["h"], P["r"], P["e"], P["g"])
    # the extrapolated series of the remaining flights is exact under constant gravity:
    # rounding of the last impact time (above) only
    assert abs(last.t_accumulation - t_inf) < 1e-12 * t_inf             # measured 2.3e-14
    # the rest state: on the floor, normal force m g (the multiplier of a verified step,
    # 16 (n + m + 1) eps of m g)
    rest = tr.t > last.t
    assert np.abs(tr.q[rest, 1] - P["r"]).max() < 64 * EPS
    assert np.abs(tr.contact_forces[rest, 0] - P["m"] * P["g"]).max() < 64 * EPS * P["m"] * P["g"]
    # in flight the force is zero
    before = tr.t < tr.impacts[0].t
    assert np.all(tr.contact_forces[before] == 0)
    assert tr.meta["contact_transitions"][-1][2] == "close"


def test_ball_motion_matches_the_piecewise_analytic_one(ball):
    p, tr = ball
    ref = p.reference(tr.t)
    out = p.outputs(tr.q, tr.v)
    # position: rounding as above, times the speed (< 5 m/s) over a few steps; the two
    # samples at an impact share the pre-impact reference, so velocities are compared off
    # the impacts
    assert np.abs(out["y"] - ref["y"]).max() < 1e-12                    # measured 1.4e-14
    at = np.isin(tr.t, [im.t for im in tr.impacts])
    assert np.abs(out["vy"] - ref["vy"])[~at].max() < 1e-11             # measured 2.0e-13
    # kinetic energy at each impact: (vx^2 + e^2 vy^2) / (vx^2 + vy^2) of before
    P = p.params
    for im in tr.impacts[:-1]:
        vy = -im.gap_rate_before[0]
        want = (P["vx"] ** 2 + (P["e"] * vy) ** 2) / (P["vx"] ** 2 + vy ** 2)
        assert im.kinetic_after / im.kinetic_before == pytest.approx(want, rel=1e-13)


def test_ball_with_t_eval_samples_only_there(ball):
    p, _ = ball
    te = np.linspace(0.0, 3.0, 61)
    tr = p.simulate(t_eval=te)
    assert tr.success and np.array_equal(tr.t, te)
    ref = p.reference(te)
    # sampled on the flights' interpolants (DOP853's dense output is exact on a quadratic):
    # rounding only, as the step outputs above (measured 1.4e-14)
    assert np.abs(p.outputs(tr.q, tr.v)["y"] - ref["y"]).max() < 1e-12
    assert len(tr.impacts) == len(ball[1].impacts)


# --------------------------------------------------------------------------- rocking block
@pytest.fixture(scope="module")
def block():
    p = rocking_block.build()
    return p, p.simulate()


def test_block_impacts_give_housners_ratio(block):
    p, tr = block
    P = p.params
    ratio = rocking_block.housner_ratio(P["b"], P["h"])
    assert tr.success
    rocking = [im for im in tr.impacts if not im.accumulation]
    assert len(rocking) > 20
    for im in rocking:
        i = np.flatnonzero(tr.t == im.t)
        w_before, w_after = tr.v[i[0], 2], tr.v[i[-1], 2]
        # one verified Gauss step at the velocity level: 16 (n + m + 1) eps relative
        assert w_after / w_before == pytest.approx(ratio, abs=1e-13)     # measured 5.4e-15
        # the struck corner sticks (no slip after the impact), the other lifts off
        assert len(im.points) == 1
        assert im.impulses.max() > 0 and im.impulses.min() == 0


def test_block_impact_times_follow_the_corner_pendulums(block):
    p, tr = block
    P = p.params
    count = 12
    ti = np.array([im.t for im in tr.impacts[:count]])
    ref_t, ref_w = rocking_block.reference_impacts(count, P["b"], P["h"], P["g"],
                                                   P["tilt"] * math.atan2(P["b"], P["h"]))
    # an impact time moves by (error of th) / |w| at the impact; the error of th is below
    # the run's integration_bound (local errors summed, growth 1 on a pendulum that loses
    # energy at every impact) plus the reference's at 1e-13
    bound = integration_bound(tr, ref_tol=1e-13) / np.abs(ref_w).min()
    assert np.abs(ti - ref_t).max() < bound                             # measured 3.2e-11
    assert bound < 1e-6


def test_block_comes_to_rest_on_both_corners(block):
    p, tr = block
    P = p.params
    last = tr.impacts[-1]
    assert last.accumulation and math.isfinite(last.t_accumulation)
    end = tr.t > last.t
    assert np.abs(tr.v[end]).max() < 64 * EPS
    # at rest on both corners: m g / 2 each (the symmetric split of the minimum-norm
    # multipliers is the unique one here: two independent normal rows)
    half = P["m"] * P["g"] / 2
    assert np.abs(tr.contact_forces[end] - half).max() < 64 * EPS * half


# --------------------------------------------------------------------------- lift-off
def sphere(m=0.5, R=1.2, g=9.81):
    cap = go.Contact(lambda t, q: np.array([np.sqrt(q @ q) - R]), rheonomic=False, name="sphere")
    return go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -m * g], constraints=[cap],
                     energy=lambda t, q, v: 0.5 * m * v @ v + m * g * q[1], name="sphere")


def test_particle_leaves_the_sphere_at_the_analytic_angle():
    m, R, g, v0 = 0.5, 1.2, 9.81, 0.7
    tr = go.simulate(sphere(m, R, g), (0.0, 2.0), [0.0, R], [v0, 0.0], rtol=1e-12, atol=1e-12)
    assert tr.success
    opens = [(t, pt) for t, pt, what in tr.meta["contact_transitions"] if what == "open"]
    assert len(opens) == 1
    t_off = opens[0][0]
    cos_star = (2 + v0 * v0 / (g * R)) / 3
    # reference: th'' = (g / R) sin th from the top, to the angle where N = 0
    ev = lambda t, y: np.cos(y[0]) - cos_star                    # noqa: E731
    ev.terminal, ev.direction = True, -1
    sol = solve_ivp(lambda t, y: [y[1], g / R * np.sin(y[0])], (0.0, 5.0), [0.0, v0 / R],
                    events=ev, method="DOP853", rtol=1e-13, atol=1e-14)
    t_ref, (th_s, w_s) = sol.t_events[0][0], sol.y_events[0][0]
    # the force N = m (g cos th - R th'^2) crosses 0 at dN/dt = -3 m g th' sin th; a state
    # error d moves N by m (g + 2 R th') d: the time by that over |dN/dt|
    d = integration_bound(tr, ref_tol=1e-13)
    bound = (g + 2 * R * w_s) * d / (3 * g * w_s * math.sin(th_s))
    assert abs(t_off - t_ref) < bound                                    # measured 5.3e-13
    i = np.flatnonzero(tr.t == t_off)[0]
    assert tr.q[i, 1] / R == pytest.approx(cos_star, abs=R * bound * w_s + d)
    # N vanishes at the located lift-off up to its slope m (g + 2 R th') times the state
    # error d and the time error (both ~1e-12 here: d and bound above): far below 1e-9 m g
    assert abs(tr.contact_forces[i, 0]) < 1e-9 * m * g
    # after the lift-off: free flight from the lift-off state (a parabola)
    after = tr.t > t_off
    s = tr.t[after] - t_off
    x0 = np.array([R * math.sin(th_s), R * math.cos(th_s)])
    u0 = R * w_s * np.array([math.cos(th_s), -math.sin(th_s)])
    ref = x0 + np.outer(s, u0) + np.outer(0.5 * s * s, [0.0, -g])
    # the lift-off state errs by d plus the speed times the time error; a free flight
    # carries a state error with growth 1 + s (s <= 2 s): a factor 3, rounded up to 10
    assert np.abs(tr.q[after] - ref).max() < 10 * (d + np.abs(u0).max() * bound)
    assert np.all(tr.contact_forces[after] == 0)
    assert np.all(tr.contact_forces[tr.t < t_off] > 0)


# --------------------------------------------------------------------------- the LCP
@pytest.mark.parametrize("seed", range(12))
def test_solve_contact_matches_a_qp_and_its_conditions(seed):
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(seed)
    n, m, k = 5, 1, 4
    L = rng.standard_normal((n, n))
    M = L @ L.T + 0.5 * np.eye(n)
    F = rng.standard_normal(n)
    A, b = rng.standard_normal((m, n)), rng.standard_normal(m)
    G, h = rng.standard_normal((k, n)), rng.standard_normal(k)
    sol = solve_contact(M, F, A, b, G, h)
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, M) - F @ x), [A @ x == b, G @ x >= h])
    prob.solve()
    # Clarabel's interior point stops at ~1e-8 relative; the QP is strictly convex (M > 0)
    assert np.abs(sol.x - x.value).max() < 1e-6 * (1 + np.abs(x.value).max())
    # optimality conditions of our answer, to rounding (the verified step's 16 (n + m + k) eps)
    tol = 1e-11 * (1 + np.abs(M @ sol.x).max() + np.abs(F).max())
    assert np.all(sol.nu >= -tol) and np.all(sol.slack >= -tol)
    assert np.abs(sol.nu * sol.slack).max() < tol * (1 + np.abs(sol.slack).max())
    r = M @ sol.x - F - A.T @ sol.lam - G.T @ sol.nu
    assert np.abs(r).max() < tol


def test_solve_contact_reports_an_infeasible_problem():
    # x >= 1 and x <= -1 (as -x >= 1): no admissible x
    with pytest.raises(ContactSolveError, match="no set of active contact points") as info:
        solve_contact(np.eye(1), np.zeros(1), np.zeros((0, 1)), np.zeros(0),
                      np.array([[1.0], [-1.0]]), np.array([1.0, 1.0]), labels=["up", "down"])
    assert info.value.points == ["up", "down"]


# --------------------------------------------------------------------------- errors
def test_contact_arguments_are_checked():
    gap = lambda t, q: q[1:2]                                       # noqa: E731
    with pytest.raises(ModelError, match=r"`restitution` must lie in \[0, 1\]"):
        go.Contact(gap, restitution=1.5)
    with pytest.raises(ModelError, match="`friction` must be None, a number >= 0"):
        go.Contact(gap, friction=-1.0)
    with pytest.raises(ModelError, match="needs `slip`"):
        go.Contact(gap, friction=float("inf"))
    with pytest.raises(ModelError, match="without `slip`"):
        go.Contact(gap, slip_jacobian=lambda t, q: np.ones((1, 2)))
    assert go.Contact(gap, slip=lambda t, q: q[:1], friction=0.4).friction == 0.4
    with pytest.raises(ModelError, match="`gap` must be a callable"):
        go.Contact(3.0)


def test_contact_runs_refuse_what_they_cannot_do():
    ball = bouncing_ball.build().system
    with pytest.raises(ModelError, match="penetrates"):
        go.simulate(ball, (0.0, 1.0), [0.0, 0.05], [0.0, 0.0])
    with pytest.raises(ModelError, match="`events` is not supported with contacts"):
        go.simulate(ball, (0.0, 1.0), [0.0, 1.0], [0.0, 0.0], events=lambda t, q, v: q[1])
    with pytest.raises(UnsupportedConstraintError, match="does not decide the state"):
        go.solve_step(ball, 0.0, [0.0, 1.0], [0.0, 0.0])
    plain = go.System(("x",), mass=[1.0])
    with pytest.raises(ModelError, match="`contact_options` applies"):
        go.simulate(plain, (0.0, 1.0), [0.0], [0.0], contact_options={"max_impacts": 3})


def test_an_impact_without_admissible_velocity_ends_the_run_and_keeps_it():
    # the point is driven into the floor by a bilateral rheonomic constraint: at the
    # contact no post-impact velocity satisfies both
    m = 1.0
    drive = go.Holonomic(lambda t, q: np.array([q[1] - (1.0 - t)]), name="drive")
    floor = go.Contact(lambda t, q: np.array([q[1]]), name="floor")
    s = go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -9.81], constraints=[drive, floor])
    tr = go.simulate(s, (0.0, 2.0), [0.0, 1.0], [0.0, -1.0], rtol=1e-10, atol=1e-10)
    assert not tr.success
    assert "contact problem failed" in tr.message and "floor[0]" in tr.message
    # the closing is located where y = 0 on the drive's exact line y = 1 - t: the run's
    # error (rtol = atol = 1e-10 over ~20 steps: integration_bound) is below 1e-9
    assert tr.t[-1] == pytest.approx(1.0, abs=1e-9) and len(tr) > 2


def test_max_impacts_stops_the_run():
    p = bouncing_ball.build()
    tr = p.simulate(contact_options={"max_impacts": 3})
    assert not tr.success and "max_impacts=3" in tr.message
    assert len(tr.impacts) == 3


# (the bouncing-ball example of docs/contacts.md, formerly the README's, and its printed
# analytic values are checked by tests/test_docs.py::check_contacts)


# --------------------------------------------------------------------------- Coulomb friction
@pytest.fixture(scope="module")
def sliding():
    from gaussopt_problems import sliding_block

    p = sliding_block.build()
    return p, p.simulate(), sliding_block.reference_phases(p.t_span[1], **p.params)


def test_sliding_block_switches_at_the_closed_form_times(sliding):
    p, tr, phases = sliding
    assert tr.success
    got = [(t, what) for t, _, what in tr.meta["contact_transitions"]]
    assert got[0] == (0.0, "close stick")
    want = [(ts, "stick" if d == 0 else f"slide {'+' if d > 0 else '-'}") for ts, _, d, _, _
            in phases[1:]]
    assert [w for _, w in got[1:]] == [w for _, w in want]
    # a switch moves with the state's error over the rate of its event function: the slip
    # rate's |s''| = mu' at a stick, the cone's |P1 w cos(w t)| at a slide onset (both
    # > 1 here); the state is exact but for rounding (each phase's motion is a polynomial
    # plus the push's sines, integrated at 1e-12) -> integration_bound
    bound = integration_bound(tr) / 1.0
    err = max(abs(a - b) for (a, _), (b, _) in zip(got[1:], want))
    assert err < bound                                                  # measured 5.9e-14
    assert bound < 1e-8


def test_each_transition_carries_its_state(sliding):
    # the state at a stick or a slide onset, from the closed-form phases: the position
    # along the plane s0 and its rate u0 where the phase starts (the integration bound,
    # as for the switching times above)
    p, tr, phases = sliding
    states = np.asarray(tr.meta["contact_transition_states"])
    assert states.shape == (len(tr.meta["contact_transitions"]), 4)
    beta = p.params["beta"]
    bound = integration_bound(tr)
    for (t, _, _), y, (ts, _, _, s0, u0) in zip(tr.meta["contact_transitions"][1:], states[1:],
                                              phases[1:]):
        s = y[0] * np.cos(beta) + y[1] * np.sin(beta)
        u = y[2] * np.cos(beta) + y[3] * np.sin(beta)
        assert abs(s - s0) < bound and abs(u - u0) < bound
    # and the first: the initial state
    assert np.array_equal(states[0], np.concatenate([tr.q[0], tr.v[0]]))


def test_sliding_block_motion_and_forces(sliding):
    p, tr, _ = sliding
    P = p.params
    ref = p.reference(tr.t)
    out = p.outputs(tr.q, tr.v)
    bound = integration_bound(tr)
    assert np.abs(out["s"] - ref["s"]).max() < bound                    # measured 7.7e-13
    assert np.abs(out["u"] - ref["u"]).max() < bound                    # measured 3.3e-13
    N = P["m"] * P["g"] * math.cos(P["beta"])
    # the normal force is m g cos(beta) throughout (the push is along the plane); the
    # friction force: while sliding -mu N sign(u), while sticking -P1 sin(w t) (it holds
    # the push), inside the cone (rounding of a verified step: 64 eps of the forces)
    tol = 64 * EPS * (N + P["P1"])
    assert np.abs(tr.contact_forces[:, 0] - N).max() < tol
    sliding_ = np.abs(ref["u"]) > 1e-6
    T = tr.friction_forces[:, 0]
    assert np.abs(T[sliding_] + P["mu"] * N * np.sign(ref["u"][sliding_])).max() < tol
    stick = np.abs(out["u"]) == 0.0
    assert stick.any()
    push = P["P1"] * np.sin(P["w"] * tr.t[stick])
    assert np.abs(T[stick] + push).max() < tol
    # the cone holds to the rounding of the verified step (64 eps of the forces, as above,
    # is ~1e-12 of mu N here)
    assert np.all(np.abs(T) <= P["mu"] * N * (1 + 1e-12))


def _rod(mu, theta=0.5, m=1.2, l=0.8, g=9.81):
    def gap(t, q):
        return np.array([q[1] - l * np.sin(q[2])])

    def slip(t, q):
        return np.array([q[0] - l * np.cos(q[2])])

    floor = go.Contact(gap, slip=slip, friction=mu, name="end")
    s = go.System(("x", "y", "th"), mass=np.diag([m, m, m * l * l / 3]),
                  force=[0.0, -m * g, 0.0], constraints=[floor])
    return s, np.array([0.0, l * np.sin(theta), theta])


def test_painleve_paradox_is_refused_by_name():
    # a rod sliding on its lower end: the normal acceleration per unit normal force is
    # (1 + 3 cos^2 th - 3 mu cos th sin th) / m, negative for th = 0.5 and mu = 4 when the
    # end slides towards -x
    s, q0 = _rod(4.0)
    with pytest.raises(ContactSolveError, match="Painleve's paradox at end\\[0\\]"):
        go.simulate(s, (0.0, 1.0), q0, [-1.0, 0.0, 0.0])
    # with mu = 1 the same start slides and is determined
    s, q0 = _rod(1.0)
    tr = go.simulate(s, (0.0, 0.05), q0, [-1.0, 0.0, 0.0])
    assert tr.success and tr.meta["contact_transitions"][0][2] == "close slide -"


# --------------------------------------------------------------------------- paper 002, lifting off
@pytest.mark.slow
@pytest.mark.parametrize("case", ["case4", "case5"])
def test_ellipse_lifts_off_flies_lands_and_slides_like_the_event_driven_reference(case):
    from gaussopt_problems import ellipse_rolling as er

    p = er.build(case, contact=True, friction=0.5, t_end=6.0)
    tr = p.simulate()
    assert tr.success
    P = p.params
    kw = {k: P[k] for k in ("a", "b", "m", "g", "J", "fx", "fy", "tau", "theta0", "omega0",
                            "xc0")}
    ref = er.contact_reference(np.linspace(0.0, 6.0, 7), with_events=True, mu=0.5, **kw)
    got = [(t, what) for t, _, what in tr.meta["contact_transitions"][1:]]
    names = {"open": "lift-off", "close stick": "landing", "close slide +": "landing",
             "close slide -": "landing"}
    assert [names.get(w, w) for _, w in got] == [w for _, w in ref["events"]]
    assert any(w == "lift-off" for _, w in ref["events"])
    assert any(w == "landing" for _, w in ref["events"])
    # the run's global error (integration_bound: the local errors it admits, summed, plus
    # the reference's at 1e-13) carried through the events: each event time moves by the
    # state error over its event function's rate (>= ~0.1 here), and a landing maps state
    # errors with factors of order one; 1e-8 is the target, 40x above what is
    # measured (5e-10)
    bound = integration_bound(tr, ref_tol=1e-13)
    err_t = max(abs(a - b) for (a, _), (b, _) in zip(got, ref["events"]))
    assert err_t < max(10 * bound, 1e-8)                                  # measured 3e-11
    out = p.outputs(tr.q, tr.v)
    r = p.reference(tr.t)
    at = np.isin(tr.t, [t for t, _ in got])
    for key in ("xc", "yc", "theta", "omega"):
        assert np.nanmax(np.abs(out[key] - r[key])[~at]) < 1e-8          # measured 5e-10


def test_ellipse_with_infinite_friction_stops_where_it_would_lift_off():
    # with no slip the friction force does not vanish with N: at N = 0 neither the open
    # nor the closed contact continues the motion; the run ends there and keeps it
    from gaussopt_problems import ellipse_rolling as er

    p = er.build("case5", contact=True, friction=float("inf"), t_end=4.0)
    tr = p.simulate()
    assert not tr.success and "friction=inf" in tr.message and "ground[0]" in tr.message
    t_lift = er.liftoff_time(er.build("case5", t_end=4.0))
    # both lift-off times are zeros of N located on runs at rtol 1e-11 (integration_bound
    # of each, ~1e-9 in the state, over |dN/dt| of order 10): 1e-8
    assert abs(tr.t[-1] - t_lift) < 1e-8 and len(tr) > 10


def test_phases_do_not_differentiate_again_what_the_run_checked(monkeypatch):
    # a contact run checks the model's constraints and the contacts' functions where it
    # starts (their derivatives against differences); a phase's rows are those functions,
    # so the checks of the phase systems evaluate them but do not differentiate them again
    # (that cost a third of the run of the rolling ellipse's single closed phase); the
    # phase's rows of a one-point contact are the contact's own functions
    from gaussopt.model.constraints import Holonomic, Nonholonomic
    from gaussopt_problems import ellipse_rolling as er

    checked = []
    for cls in (Holonomic, Nonholonomic):
        orig = cls.check_derivatives

        def spy(self, *args, _orig=orig, **kwargs):
            checked.append(self)
            return _orig(self, *args, **kwargs)
        monkeypatch.setattr(cls, "check_derivatives", spy)
    p = er.build("case4", contact=True, friction=float("inf"), t_end=2.5)
    tr = p.simulate()
    assert tr.success and tr.stats["phases"] == 1
    c = next(c for c in p.system.constraints if c.kind == "contact")
    own = {id(x) for x in (c.normal, c.tangent, c.cone)}
    assert checked and all(id(x) in own for x in checked), [x.name for x in checked]
    # a wrong Jacobian of a contact is still reported where the run starts
    exact = Holonomic(c.normal.phi)          # (its Jacobian: the complex step of phi)
    monkeypatch.setattr(c.normal, "_jac", lambda t, q: 2.0 * exact.jacobian(t, q))
    with pytest.raises(ModelError, match="Phi_q"):
        p.simulate()


def test_contact_run_saves_and_loads(tmp_path, ball):
    _, tr = ball
    back = go.load(tr.save(tmp_path / "ball"))
    assert np.array_equal(back.t, tr.t) and np.array_equal(back.v, tr.v)
    assert np.array_equal(back.contact_forces, tr.contact_forces)
    assert np.array_equal(back.friction_forces, tr.friction_forces)
    assert len(back.impacts) == len(tr.impacts)
    for a, b in zip(back.impacts, tr.impacts):
        assert a.t == b.t and a.points == b.points and a.accumulation == b.accumulation
        assert np.array_equal(a.impulses, b.impulses)
    # a repeated time is an impact's before and after; anywhere else the file is refused
    t = tr.t.copy()
    i = int(np.flatnonzero(np.diff(t) > 0)[0])
    t[i + 1] = t[i]
    bad = go.Trajectory(**{**{k: getattr(tr, k) for k in (
        "q", "v", "a", "constraint_force", "multipliers", "position_residual",
        "velocity_residual", "acceleration_residual", "energy", "rank", "sigma_min",
        "coordinates")}, "t": t})
    with pytest.raises(go.TrajectoryFileError, match="a time repeats only at a recorded impact"):
        go.load(bad.save(tmp_path / "bad"))


def test_a_lift_off_is_found_while_the_state_rests_under_a_force_that_changes_in_time():
    """A particle resting on the floor, pulled up by ``1.01 m g sin(w t)`` (period 0.05 s):
    its normal force ``m g (1 - 1.01 sin w t)`` first vanishes at ``t* = arcsin(1 / 1.01) /
    w`` and is negative for only 2.2 ms. Until then the state does not move, so error
    control lets the steps grow tenfold each time: the step holding t* is 0.1 s long (two
    periods: its ends and middle see the same force) and its ten even interior points all
    miss the dip. The scan refines where its points do not resolve the force near zero (a
    step whose size error control did not limit also gets no screen). Before: no lift-off
    at all."""
    m, g, w = 0.5, 9.81, 2 * math.pi / 0.05
    floor = go.Contact(lambda t, q: np.array([q[1]]), rheonomic=False, name="floor")
    pull = go.System(("x", "y"), mass=m * np.eye(2),
                     force=lambda t, q, v: np.array([0.0, -m * g + 1.01 * m * g * np.sin(w * t)]),
                     constraints=[floor], name="pulled")
    tr = go.simulate(pull, (0.0, 0.2), [0.0, 0.0], [0.0, 0.0], rtol=1e-12, atol=1e-12)
    assert tr.success, tr.message
    opens = [t for t, _, what in tr.meta["contact_transitions"] if what == "open"]
    closes = [t for t, _, what in tr.meta["contact_transitions"] if what == "close"]
    t_star = math.asin(1 / 1.01) / w
    # one lift-off per period, each at t* + k T: the force's slope there, 1.01 m g w cos(w
    # t*) = 43 N/s, and a state at rest to rounding: Brent's root to 4 eps (1 + t), plus the
    # force's rounding (~eps m g) over that slope: 1e-12 leaves a margin of 1e3. (At the
    # fourth, the pull cancels the weight to 1e-15 N: the closed phase that the rounding
    # picks at the event lasts the force's rounding over its slope, and the point then
    # opens: 2e-15 s later.)
    assert len(opens) == 4
    assert np.abs(np.array(opens) - (t_star + 0.05 * np.arange(4))).max() < 1e-12, opens
    # the flight after the first: y'' = g (1.01 sin w t - 1) from rest, to y = 0
    fly = solve_ivp(lambda t, y: [y[1], g * (1.01 * np.sin(w * t) - 1)], (t_star, t_star + 0.01),
                    [0.0, 0.0], method="DOP853", rtol=1e-13, atol=1e-18, dense_output=True)
    ts = np.linspace(t_star + 1e-4, t_star + 0.01, 20001)
    ys = fly.sol(ts)[0]
    j = np.flatnonzero((ys[:-1] > 0) & (ys[1:] <= 0))[0]
    from scipy.optimize import brentq
    t_land = brentq(lambda t: fly.sol(t)[0], ts[j], ts[j + 1], xtol=1e-15)
    # the landing: a flight 2.8e-7 m high, landing at 5.8e-4 m/s; the run's height error at
    # atol = 1e-12 per step over a few hundred steps (a motion that does not amplify it),
    # ~5e-12 m, over that rate: 1e-8 s (measured 4.5e-13 s)
    assert abs(closes[1] - t_land) < 1e-8, (closes[1], t_land)
