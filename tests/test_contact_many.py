"""Planar contact with several frictional points at once, against independent references.

Each case was a failure of the point-by-point stick/slip decision (reproduced before
the one contact problem for all points, gaussopt.gauss.contact_problem, replaced it):

* a box on an incline, mu just above / below tan(beta): at rest (the static balance),
  or sliding with a = g (sin beta - mu cos beta) (closed form);
* a box launched sliding on two corners until it stops: stop time v0 / (mu g),
  distance v0^2 / (2 mu g) (closed form), then at rest with zero friction;
* a ladder on a rough floor and wall: at rest above the limiting angle
  tan(th*) = (1 - mu1 mu2) / (2 mu1), slipping below it, and launched slipping:
  Newton-Euler's 1-DOF equation of the ladder (written here, solved for th'' and
  both normal forces, integrated by scipy at 1e-13) until the top leaves the wall;
* a box pushed by a growing horizontal force at a height: sliding first when
  mu (h + z) < b (at P = mu m g, then x'' = (P - mu m g) / m in closed form), tipping
  first otherwise (at P = m g b / (h + z), then the pendulum about the front corner,
  integrated by scipy), with the back corner's forces zero and every friction force
  in its cone;
* a ball bouncing and sliding on a rough floor: Coulomb impulses at every impact,
  the accumulation impact included: v_x = v0 - mu (v_y + g t) throughout (momentum);
* degenerate but valid states: points touching without load, an impact at t_end.

Tolerances: every motion here is a polynomial or a smooth 1-DOF flow integrated at
rtol = atol = 1e-12 over a few hundred steps: the state errs by integration_bound
(the admitted local errors summed, ~1e-10 here), an event time by that over its
event function's rate (>= ~1 here), below the issue's 1e-9 (events, relative) and
1e-8 (states). Forces of a verified step err by rounding: 1e-10 of m g covers
1e4 eps (n + m) with margin.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
from test_trajectory import integration_bound

G0 = 9.81
TOL = dict(rtol=1e-12, atol=1e-12)


def box(mu, beta=0.0, b=0.2, h=0.1, m=2.0, push=None, e=0.0):
    """A box (half width b, half height h, centre (x, y), angle th) on the line y = 0 with
    two bottom corners in contact; gravity tilted by beta (an incline along x). ``push``
    = (k, z): a horizontal force k t at height z above the centre."""
    def gap(t, q):
        x, y, th = q
        return np.array([y - b * np.sin(th) - h * np.cos(th), y + b * np.sin(th) - h * np.cos(th)])

    def slip(t, q):
        x, y, th = q
        return np.array([x - b * np.cos(th) + h * np.sin(th), x + b * np.cos(th) + h * np.sin(th)])

    corners = go.Contact(gap, slip=slip, friction=mu, restitution=e, rheonomic=False,
                         name="corners")
    inertia = m * (b * b + h * h) / 3
    if push is None:
        force = [-m * G0 * math.sin(beta), -m * G0 * math.cos(beta), 0.0]
    else:
        k, z = push

        def force(t, q, v):
            return np.array([k * t, -m * G0, -k * t * z * np.cos(q[2])])
    return go.System(("x", "y", "th"), mass=np.diag([m, m, inertia]), force=force,
                     constraints=[corners], name="box")


def assert_in_cones(tr, mu, rel=1e-10):
    """Every reported friction force inside its cone, every normal force >= 0 (rounding:
    ``rel`` of the largest force)."""
    scale = rel * np.abs(tr.contact_forces).max()
    assert np.all(tr.contact_forces >= -scale)
    assert np.all(np.abs(tr.friction_forces) <= mu * tr.contact_forces + scale)


# --------------------------------------------------------------------------- the incline
@pytest.mark.parametrize("above", [True, False])
def test_box_on_an_incline_holds_or_slides(above):
    beta, m, b, h = 0.3, 2.0, 0.2, 0.1
    mu = math.tan(beta) * (1.01 if above else 0.99)
    tr = go.simulate(box(mu, beta), (0.0, 0.5), [0.0, h, 0.0], [0.0, 0.0, 0.0], **TOL)
    assert tr.success, tr.message
    start = [w for t, _, w in tr.meta["contact_transitions"] if t == 0.0]
    N = tr.contact_forces
    if above:
        assert start == ["close stick", "close stick"]
        assert np.abs(tr.q - [0.0, h, 0.0]).max() < 1e-12 and np.abs(tr.v).max() < 1e-12
        # statics: the friction holds gravity along the plane, the normal forces its
        # component across it and the moment b (N2 - N1) + h (T1 + T2) = 0
        T = tr.friction_forces
        assert np.abs(T.sum(axis=1) - m * G0 * math.sin(beta)).max() < 1e-10 * m * G0
        assert np.abs(N.sum(axis=1) - m * G0 * math.cos(beta)).max() < 1e-10 * m * G0
        assert np.abs(b * (N[:, 1] - N[:, 0]) + h * T.sum(axis=1)).max() < 1e-10 * m * G0
        # the split of T1 + T2 is indeterminate: reported as such, inside both cones
        assert tr.meta["contact_indeterminate"]
        assert tr.meta["contact_indeterminate"][0][2] == ["corners[0]", "corners[1]"]
    else:
        assert start == ["close slide -", "close slide -"]
        acc = -G0 * (math.sin(beta) - mu * math.cos(beta))
        bound = integration_bound(tr)
        assert np.abs(tr.q[:, 0] - 0.5 * acc * tr.t ** 2).max() < bound
        assert np.abs(tr.v[:, 0] - acc * tr.t).max() < bound
        assert np.abs(tr.q[:, 1:] - [h, 0.0]).max() < bound
        # sliding: T = +mu N at both corners; moment b (N2 - N1) + h mu (N1 + N2) = 0
        assert np.abs(tr.friction_forces - mu * N).max() < 1e-10 * m * G0
        assert np.abs(b * (N[:, 1] - N[:, 0]) + h * mu * N.sum(axis=1)).max() < 1e-10 * m * G0
        assert not tr.meta["contact_indeterminate"]
    assert_in_cones(tr, mu)


# --------------------------------------------------------------------------- sliding to a stop
@pytest.mark.parametrize("tolerances", ["tight", "default"])
def test_box_slides_on_two_corners_until_it_stops(tolerances):
    mu, v0, h, m = 0.3, 1.5, 0.1, 2.0
    kw = TOL if tolerances == "tight" else {}
    tr = go.simulate(box(mu), (0.0, 1.0), [0.0, h, 0.0], [v0, 0.0, 0.0], **kw)
    assert tr.success, tr.message
    t_stop = v0 / (mu * G0)
    got = tr.meta["contact_transitions"]
    assert [w for _, _, w in got] == ["close slide +", "close slide +", "stick", "stick"]
    stops = [t for t, _, w in got if w == "stick"]
    rest = tr.t > stops[0]
    if tolerances == "tight":
        # the stop is the zero of the slip rate v0 - mu g t (rate mu g ~ 3): the state's
        # error over it
        bound = integration_bound(tr)
        assert abs(stops[0] - t_stop) < bound / (mu * G0) + 4 * np.finfo(float).eps
        assert abs(stops[0] - t_stop) < 1e-9 * t_stop
        assert np.abs(tr.q[rest, 0] - v0 ** 2 / (2 * mu * G0)).max() < 1e-8
        slide = ~rest
        assert np.abs(tr.v[slide, 0] - (v0 - mu * G0 * tr.t[slide])).max() < bound
        assert np.abs(tr.v[rest]).max() < bound
    # at rest on a flat floor: the least-norm admissible friction is zero, the normal
    # forces m g / 2 each
    assert np.abs(tr.friction_forces[rest]).max() < 1e-10 * m * G0
    assert np.abs(tr.contact_forces[rest] - m * G0 / 2).max() < 1e-10 * m * G0
    assert_in_cones(tr, mu)


@pytest.mark.parametrize("params", [{}, {"beta": 0.25}, {"beta": 0.35},
                                    {"beta": 0.35, "v0": 0.0}, {"beta": 0.25, "v0": 0.0}],
                         ids=["flat", "incline-holds", "incline-slides-back",
                              "incline-from-rest-slides", "incline-from-rest-holds"])
def test_sliding_box_problem_matches_its_closed_form_and_shifts_its_load(params):
    """The registered problem (problems/sliding_box.py, mu = 0.3) against its closed form,
    on a flat floor and on slopes with tan(beta) = 0.255 (holds after the stop) and 0.365
    (slides back down): x and u within the run's global error bound; the stop within that
    bound over the slip rate's slope (and 1e-9 relative); the corners' normal forces
    (N -+ h T / b) / 2 from the moment balance, T the friction's sum (-mu N up, +mu N down,
    m g sin(beta) at rest). The forces are the multipliers of a direct solve (backward
    error ~1e-15 of m g): 1e-10 m g. Friction in the cones throughout."""
    from gaussopt_problems import sliding_box

    pb = sliding_box.build(**params)
    P = pb.params
    tr = pb.simulate()
    assert tr.success, tr.message
    ref = sliding_box.reference(tr.t, **P)
    bound = integration_bound(tr)
    assert np.abs(tr.q[:, 0] - ref["x"]).max() < bound
    assert np.abs(tr.v[:, 0] - ref["u"]).max() < bound
    sb, cb = math.sin(P["beta"]), math.cos(P["beta"])
    rate = P["g"] * (sb + P["mu"] * cb)                   # the slip rate's slope up the slope
    t_stop = P["v0"] / rate
    if P["v0"] > 0:
        stop = [t for t, _, w in tr.meta["contact_transitions"] if "slide +" not in w][0]
        assert abs(stop - t_stop) < bound / rate + 4 * np.finfo(float).eps
        assert abs(stop - t_stop) < 1e-9 * t_stop
    mg = P["m"] * P["g"]
    away = np.abs(tr.t - t_stop) > 1e-6          # (the sample at the stop holds either side's)
    N = tr.contact_forces[away]
    assert np.abs(N[:, 0] - ref["N_left"][away]).max() < 1e-10 * mg
    assert np.abs(N[:, 1] - ref["N_right"][away]).max() < 1e-10 * mg
    shift = np.abs(ref["N_right"] - ref["N_left"]).max()
    assert shift > 0.05 * mg                                     # (the shift is not small)
    assert_in_cones(tr, P["mu"])


def test_sliding_box_problem_refuses_a_box_that_tips():
    from gaussopt_problems import sliding_box

    with pytest.raises(go.ModelError, match="tips over"):
        sliding_box.build(mu=3.0)
    with pytest.raises(go.ModelError, match="tips over"):
        sliding_box.build(beta=1.2)
    with pytest.raises(go.ModelError, match="`v0`"):
        sliding_box.build(v0=-1.0)


# --------------------------------------------------------------------------- the ladder
def ladder(mu1, mu2, L=2.0, m=10.0):
    """A uniform ladder (centre (x, y), angle th from the floor) against the wall x = 0:
    ends[0] on the floor (friction mu1), ends[1] on the wall (friction mu2)."""
    def gap(t, q):
        x, y, th = q
        return np.array([y - L / 2 * np.sin(th), x - L / 2 * np.cos(th)])

    def slip(t, q):
        x, y, th = q
        return np.array([x + L / 2 * np.cos(th), y + L / 2 * np.sin(th)])

    # two contacts: the two ends carry their own friction coefficients
    floor = go.Contact(lambda t, q: gap(t, q)[:1], slip=lambda t, q: slip(t, q)[:1],
                       friction=mu1, rheonomic=False, name="floor")
    wall = go.Contact(lambda t, q: gap(t, q)[1:], slip=lambda t, q: slip(t, q)[1:],
                      friction=mu2, rheonomic=False, name="wall")
    s = go.System(("x", "y", "th"), mass=np.diag([m, m, m * L * L / 12]),
                  force=[0.0, -m * G0, 0.0], constraints=[floor, wall], name="ladder")
    return s


def ladder_state(th, w, L=2.0):
    q = np.array([L / 2 * math.cos(th), L / 2 * math.sin(th), th])
    v = np.array([-L / 2 * math.sin(th) * w, L / 2 * math.cos(th) * w, w])
    return q, v


def ladder_slipping(th, w, mu1, mu2, L=2.0, m=10.0):
    """Newton-Euler of the ladder slipping at both ends (bottom away from the wall, top
    down): th'' and the normal forces N1 (floor) and N2 (wall)."""
    s, c, I = math.sin(th), math.cos(th), m * L * L / 12
    # unknowns (th'', N1, N2); friction F1 = -mu1 N1 (along x), F2 = +mu2 N2 (along y)
    # m x'' = N2 + F1,  x'' = -L/2 (s th'' + c w^2)
    # m y'' = N1 + F2 - m g,  y'' = L/2 (c th'' - s w^2)
    # I th'' = Q_th, the virtual work of the end forces (th turns the ladder clockwise):
    # Q_th = -L/2 (s F1 + c N1) + L/2 (s N2 + c F2)
    K = np.array([[m * L / 2 * s, -mu1, 1.0],
                  [-m * L / 2 * c, 1.0, mu2],
                  [I, L / 2 * (c - mu1 * s), -L / 2 * (s + mu2 * c)]])
    r = np.array([-m * L / 2 * c * w * w, m * G0 - m * L / 2 * s * w * w, 0.0])
    return np.linalg.solve(K, r)


@pytest.mark.parametrize("above", [True, False])
def test_ladder_at_rest_holds_above_the_limiting_angle_and_slips_below(above):
    mu1, mu2, m, L = 0.4, 0.3, 10.0, 2.0
    th_lim = math.atan((1 - mu1 * mu2) / (2 * mu1))
    th0 = th_lim + (0.02 if above else -0.02)
    q0, v0 = ladder_state(th0, 0.0)
    tr = go.simulate(ladder(mu1, mu2), (0.0, 0.2), q0, v0, **TOL)
    assert tr.success, tr.message
    start = [(p, w) for t, p, w in tr.meta["contact_transitions"] if t == 0.0]
    if above:
        assert start == [("floor[0]", "close stick"), ("wall[0]", "close stick")]
        assert np.abs(tr.q - q0).max() < 1e-12 and np.abs(tr.v).max() < 1e-12
        # statics with indeterminate forces: the reported distribution balances the
        # ladder (forces and the moment about the foot) inside both cones
        N1, N2 = tr.contact_forces[:, 0], tr.contact_forces[:, 1]
        F1, F2 = tr.friction_forces[:, 0], tr.friction_forces[:, 1]
        tol = 1e-10 * m * G0
        assert np.abs(N2 + F1).max() < tol and np.abs(N1 + F2 - m * G0).max() < tol
        s, c = math.sin(th0), math.cos(th0)
        # about the foot: the wall's force at (-L c, L s), gravity at (-L c / 2, L s / 2)
        assert np.abs(-L * c * F2 - L * s * N2 + m * G0 * L / 2 * c).max() < tol * L
        assert tr.meta["contact_indeterminate"]
        assert np.abs(F1).max() <= mu1 * N1.min() * (1 + 1e-10)
        assert np.abs(F2).max() <= mu2 * N2.min() * (1 + 1e-10)
    else:
        assert start == [("floor[0]", "close slide +"), ("wall[0]", "close slide -")]
        # while both ends slip: th'' and both normal forces at each sample's own state
        # (a verified step against a 3x3 solve: rounding, 1e-9 relative with margin)
        both = np.all(tr.contact_forces > 0, axis=1)
        assert both.sum() >= 3
        for i in np.flatnonzero(both):
            ref = ladder_slipping(tr.q[i, 2], tr.v[i, 2], mu1, mu2)
            assert tr.a[i, 2] == pytest.approx(ref[0], rel=1e-9)
            assert tr.contact_forces[i] == pytest.approx(ref[1:], rel=1e-9)
            assert tr.friction_forces[i] == pytest.approx([-mu1 * ref[1], mu2 * ref[2]],
                                                          rel=1e-9)


def test_ladder_launched_slipping_follows_newton_euler_until_the_top_leaves_the_wall():
    mu1, mu2 = 0.3, 0.2
    th0, w0 = 1.1, -0.8
    q0, v0 = ladder_state(th0, w0)
    tr = go.simulate(ladder(mu1, mu2), (0.0, 1.5), q0, v0, **TOL)
    assert tr.success, tr.message
    got = tr.meta["contact_transitions"]
    assert [(p, w) for _, p, w in got[:2]] == [("floor[0]", "close slide +"),
                                                ("wall[0]", "close slide -")]
    leaves = [t for t, p, w in got if p == "wall[0]" and w == "open"]
    assert leaves

    def rhs(t, y):
        return [y[1], ladder_slipping(y[0], y[1], mu1, mu2)[0]]

    def top_leaves(t, y):
        return ladder_slipping(y[0], y[1], mu1, mu2)[2]
    top_leaves.terminal, top_leaves.direction = True, -1
    ref = solve_ivp(rhs, (0.0, 1.5), [th0, w0], method="DOP853", rtol=1e-13, atol=1e-13,
                    events=top_leaves, dense_output=True)
    t_ref = ref.t_events[0][0]
    # the event time: state error (integration_bound, with the reference's) over the rate
    # of N2 (~ m g per second here)
    bound = integration_bound(tr, ref_tol=1e-13)
    assert abs(leaves[0] - t_ref) < 1e-9 * t_ref
    before = tr.t < leaves[0]
    th_ref = ref.sol(tr.t[before])
    assert np.abs(tr.q[before, 2] - th_ref[0]).max() < max(bound, 1e-10)
    assert np.abs(tr.v[before, 2] - th_ref[1]).max() < max(bound, 1e-10)
    assert bound < 1e-8
    assert_in_cones(tr, np.array([mu1, mu2]))


# --------------------------------------------------------------------------- the pushed box
def test_pushed_box_slides_first_when_mu_h_is_below_b():
    mu, k, z, m, b, h = 0.3, 10.0, 0.05, 2.0, 0.2, 0.1
    assert mu * (h + z) < b
    t_end = 1.0
    tr = go.simulate(box(mu, push=(k, z)), (0.0, t_end), [0.0, h, 0.0], [0.0, 0.0, 0.0], **TOL)
    assert tr.success, tr.message
    t_s = mu * m * G0 / k
    slides = [(t, w) for t, _, w in tr.meta["contact_transitions"] if t > 0]
    assert [w for _, w in slides] == ["slide +", "slide +"]
    assert abs(slides[0][0] - t_s) < 1e-9 * t_s and abs(slides[1][0] - t_s) < 1e-9 * t_s
    after = tr.t > t_s
    s = tr.t[after] - t_s
    bound = integration_bound(tr)
    assert np.abs(tr.q[after, 0] - k * s ** 3 / (6 * m)).max() < max(bound, 1e-10)
    assert np.abs(tr.q[:, 1:] - [h, 0.0]).max() < max(bound, 1e-10)
    assert_in_cones(tr, mu)


def test_pushed_box_tips_first_about_its_front_corner():
    mu, k, z, m, b, h = 0.8, 10.0, 0.3, 2.0, 0.2, 0.1
    assert mu * (h + z) > b
    t_tip = m * G0 * b / ((h + z) * k)
    t_end = t_tip + 0.3
    tr = go.simulate(box(mu, push=(k, z)), (0.0, t_end), [0.0, h, 0.0], [0.0, 0.0, 0.0], **TOL)
    assert tr.success, tr.message
    later = [(t, p, w) for t, p, w in tr.meta["contact_transitions"] if t > 0]
    assert later[0][1:] == ("corners[0]", "open")
    assert abs(later[0][0] - t_tip) < 1e-9 * t_tip
    # the pendulum about the front corner: I_p th'' = m g (b c + h s) + P (b s - (h + z) c)
    Ip = m * (b * b + h * h) / 3 + m * (b * b + h * h)

    def rhs(t, y):
        s, c = math.sin(y[0]), math.cos(y[0])
        return [y[1], (m * G0 * (b * c + h * s) + k * t * (b * s - (h + z) * c)) / Ip]

    ref = solve_ivp(rhs, (t_tip, t_end), [0.0, 0.0], method="DOP853", rtol=1e-13, atol=1e-14,
                    dense_output=True)
    after = tr.t > later[0][0]
    bound = integration_bound(tr, ref_tol=1e-13)
    th = ref.sol(tr.t[after])
    assert np.abs(tr.q[after, 2] - th[0]).max() < max(bound, 1e-9)
    assert th[0][-1] < -1e-3                       # it did tip
    # the back corner's forces vanish after the tip; before, every force is admissible
    assert np.all(tr.contact_forces[after, 0] == 0) and np.all(tr.friction_forces[after, 0] == 0)
    assert_in_cones(tr, mu)


# --------------------------------------------------------------------------- Coulomb impacts
def test_bouncing_sliding_ball_keeps_coulombs_law_through_the_accumulation():
    m, r, mu, e, vx0, hgt = 0.5, 0.1, 0.05, 0.8, 3.0, 1.0
    floor = go.Contact(lambda t, q: np.array([q[1] - r]), slip=lambda t, q: q[:1].copy(),
                       friction=mu, restitution=e, rheonomic=False, name="floor")
    s = go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -m * G0], constraints=[floor])
    t_end = 5.0
    tr = go.simulate(s, (0.0, t_end), [0.0, hgt], [vx0, 0.0], **TOL)
    assert tr.success, tr.message
    assert tr.impacts[-1].accumulation
    # vertical momentum: the normal impulses so far are m (v_y + g t); each pushes v_x
    # back by mu times it (the ball slides forward throughout): v_x = v0 - mu (v_y + g t)
    want = vx0 - mu * (tr.v[:, 1] + G0 * tr.t)
    assert np.all(want > 0)
    assert np.abs(tr.v[:, 0] - want).max() < 1e-10
    for im in tr.impacts:
        assert im.tangential_impulses[0] == pytest.approx(-mu * im.impulses[0], rel=1e-12)


# --------------------------------------------------------------------------- degenerate states
def test_points_touching_without_load_are_a_state():
    # two balls on a line touching at rest, no force between them
    d = 0.3
    touch = go.Contact(lambda t, q: np.array([q[1] - q[0] - d]), rheonomic=False, name="touch")
    s = go.System(("x1", "x2"), mass=np.eye(2), constraints=[touch])
    tr = go.simulate(s, (0.0, 1.0), [0.0, d], [0.0, 0.0], **TOL)
    assert tr.success, tr.message
    assert np.abs(tr.q - [0.0, d]).max() == 0 and np.abs(tr.contact_forces).max() == 0
    # a ball on a floor without gravity, then pushed into it at t = 0.5
    floor = go.Contact(lambda t, q: np.array([q[1]]), rheonomic=False, name="floor")
    s = go.System(("x", "y"), mass=np.eye(2), constraints=[floor],
                  force=lambda t, q, v: np.array([0.0, -1.0 if t > 0.5 else 0.0]))
    tr = go.simulate(s, (0.0, 1.0), [0.0, 0.0], [0.2, 0.0], **TOL)
    assert tr.success, tr.message
    # an open point resting on its surface is watched at gap + 1e-3 gap_tol (gap_tol =
    # 1e3 (atol + rtol (1 + max|q0|))): the push that starts at t = 0.5 closes it when
    # y = -(t - 0.5)^2 / 2 reaches that, and it rests there with the force 1
    offset = 1e-3 * 1e3 * (1e-12 + 1e-12 * 1.2)
    assert np.abs(tr.q[:, 1]).max() <= offset * (1 + 1e-9)
    (t_close, _, what), = tr.meta["contact_transitions"]
    assert what == "close" and 0.5 < t_close <= 0.5 + math.sqrt(2 * offset) * (1 + 1e-6)
    assert np.abs(tr.contact_forces[tr.t > t_close] - 1.0).max() < 1e-10
    assert np.all(tr.contact_forces[tr.t < t_close] == 0)


def test_an_impact_at_t_end_ends_the_run():
    r, hgt = 0.1, 1.0
    floor = go.Contact(lambda t, q: np.array([q[1] - r]), restitution=0.5, rheonomic=False,
                       name="floor")
    s = go.System(("x", "y"), mass=np.eye(2), force=[0.0, -G0], constraints=[floor])
    t_hit = math.sqrt(2 * (hgt - r) / G0)
    for t_end in (t_hit, np.nextafter(t_hit, 0.0), np.nextafter(t_hit, 1.0)):
        tr = go.simulate(s, (0.0, t_end), [0.0, hgt], [0.0, 0.0], **TOL)
        assert tr.success, tr.message
        assert tr.t[-1] == t_end
    # a wall that reaches the point exactly at t_end (gap = x + 0.05 - t, exact in floating
    # point): the impact there is resolved and recorded, the run ends with its state after
    wall = go.Contact(lambda t, q: np.array([q[0] + 0.05 - t]), restitution=0.5, name="wall")
    s = go.System(("x",), mass=np.eye(1), constraints=[wall])
    tr = go.simulate(s, (0.0, 0.05), [0.0], [0.0], **TOL)
    assert tr.success, tr.message
    assert [im.t for im in tr.impacts] == [0.05] and tr.t[-1] == 0.05
    # Newton: the gap rate -1 becomes +0.5, so the point leaves at 1.5
    assert tr.v[-1, 0] == pytest.approx(1.5, rel=1e-14)


# --------------------------------------------------------------------------- the problem itself
@pytest.mark.parametrize("seed", range(8))
def test_frictional_contact_problem_satisfies_its_conditions(seed):
    """Random planar problems with friction: the answer's own optimality conditions
    (Newton-Euler balance, normal complementarity, Coulomb's law per mode), checked
    from the returned x and forces, not from the code's internal checks."""
    from gaussopt.gauss.contact_problem import OPEN, SLIDE_NEG, SLIDE_POS, STICK
    rng = np.random.default_rng(seed)
    n, k = 4, 3
    L = rng.standard_normal((n, n))
    M = L @ L.T + np.eye(n)
    F = rng.standard_normal(n)
    A, b = np.zeros((0, n)), np.zeros(0)
    G, h = rng.standard_normal((k, n)), rng.standard_normal(k)
    T, s = rng.standard_normal((k, n)), rng.standard_normal(k)
    mu = np.array([0.3, 0.6, np.inf])
    try:
        sol = go.solve_contact(M, F, A, b, G, h, T, s, mu=mu)
    except go.ContactSolveError as e:
        # a nonsymmetric LCP may have no solution or several motions: then it says so
        assert "no set of active" in str(e) or "indeterminate" in str(e)
        return
    x, N, tau = sol.x, sol.nu, sol.tau
    scale = 1.0 + np.abs(M @ x).max() + np.abs(F).max()
    tol = 1e-10 * scale
    assert np.abs(M @ x - F - G.T @ N - T.T @ tau).max() < tol
    g, u = G @ x - h, T @ x - s
    assert np.all(N >= -tol) and np.all(g >= -tol) and np.abs(N * g).max() < tol * scale
    for i in range(k):
        if sol.mode[i] == OPEN:
            assert N[i] == 0 and tau[i] == 0
        elif sol.mode[i] == STICK or mu[i] == np.inf:
            assert abs(u[i]) < tol and abs(tau[i]) <= mu[i] * N[i] + tol
        elif sol.mode[i] in (SLIDE_POS, SLIDE_NEG):
            d = 1 if sol.mode[i] == SLIDE_POS else -1
            assert d * u[i] >= -tol and tau[i] == pytest.approx(-d * mu[i] * N[i], abs=tol)


@pytest.mark.parametrize("seed", range(6))
def test_max_margin_and_admissible_agree_with_linear_programming(seed):
    from scipy.optimize import linprog
    from gaussopt.gauss.contact_problem import admissible, max_margin
    rng = np.random.default_rng(seed)
    p, r = 6, 1 + seed % 2
    a, b = rng.standard_normal((p, r)), rng.standard_normal(p) + 1.0
    # max s s.t. s <= b_j + a_j y  <=>  min -s s.t. s - a_j y <= b_j (HiGHS: 1e-9 with margin)
    lp = linprog(np.r_[np.zeros(r), -1.0], A_ub=np.hstack([-a, np.ones((p, 1))]), b_ub=b,
                 bounds=[(None, None)] * (r + 1), method="highs")
    got = max_margin(b, a)
    if lp.status == 3:
        assert got == math.inf
    else:
        assert got == pytest.approx(-lp.fun, abs=1e-7)
    # the nearest point of {y : C y <= d} to y0, against the QP's optimality by brute force:
    # feasible, and no feasible random point nearer
    C, d = rng.standard_normal((p, r)), rng.random(p)
    y0 = 3 * rng.standard_normal(r)
    y = admissible(y0, C, d, np.full(p, 1e-12))
    assert y is not None and np.all(C @ y <= d + 1e-12)      # 0 is feasible: not empty
    trial = 3 * rng.standard_normal((20000, r))
    ok = np.all(trial @ C.T <= d, axis=1)
    assert np.linalg.norm(y - y0) <= np.linalg.norm(trial[ok] - y0, axis=1).min() + 1e-12


def test_tilted_rod_lands_on_its_second_end_after_the_first_impact():
    """A rod (two end points, frictionless, e = 0.5) dropped tilted: it lands on its lower
    end, and the impulse spins it so that the other end falls. That end's landing must be
    found (an open point's gap event at a phase start where the point is away from its
    surface and approaching: its gap, not gap / (t - t_start), which started negative
    there and hid the crossing: the rod went through the floor with success=True).
    References written here: the first impact in closed form (free fall, then Newton's law
    at one point of a rigid body: P = -(1 + e) v_n / (1/m + r_x^2 / I)), the second as the
    root of the free flight's gap (brentq, to 1e-14)."""
    from scipy.optimize import brentq
    m, b, h, e, th0, y0 = 2.0, 0.5, 0.05, 0.5, 0.05, 0.3
    inertia = m * (b * b + h * h) / 3
    xs = np.array([-b, b])

    def gaps(q):
        return q[1] + xs * np.sin(q[2]) - h * np.cos(q[2])

    ends = go.Contact(lambda t, q: gaps(q), restitution=e, rheonomic=False, name="ends")
    rod = go.System(("x", "y", "th"), mass=np.diag([m, m, inertia]),
                    force=[0.0, -m * G0, 0.0], constraints=[ends])
    tr = go.simulate(rod, (0.0, 0.4), [0.0, y0, th0], [0.0, 0.0, 0.0], **TOL)
    assert tr.success, tr.message
    g = np.array([gaps(q) for q in tr.q])
    assert g.min() > -1e-9                          # never through the floor
    # the first impact: the lower end (x = -b) after a free fall of gaps(q0)[0]
    t1 = math.sqrt(2 * gaps([0.0, y0, th0])[0] / G0)
    assert tr.impacts[0].points == ["ends[0]"] and abs(tr.impacts[0].t - t1) < 1e-9 * t1
    rx = -b * math.cos(th0) + h * math.sin(th0)     # the end's lever arm (x of r)
    vn = -G0 * t1
    P = -(1 + e) * vn / (1 / m + rx * rx / inertia)
    vy, w = vn + P / m, rx * P / inertia
    y1 = y0 - 0.5 * G0 * t1 ** 2

    def far_gap(t):                                 # the free flight after the impact
        s = t - t1
        return gaps([0.0, y1 + vy * s - 0.5 * G0 * s * s, th0 + w * s])[1]

    t2 = brentq(far_gap, t1 + 1e-9, 0.4, xtol=1e-14)
    assert tr.impacts[1].points == ["ends[1]"]
    assert abs(tr.impacts[1].t - t2) < 1e-9 * t2


def test_the_gap_watches_of_many_open_points_evaluate_the_gaps_once_per_state():
    """A particle on a spring in x (k = 400) falling above 60 levels of one contact, all
    open for 0.3 s: every open point has its own closing watch, and the watches were
    evaluated one by one, each evaluating every gap (60 per state: 817 evaluations of the
    gap function in this run, and dm_control's manipulator with 160 points spent 100 s on
    0.1 s of free fall). Now the gaps are evaluated once per state: at most a few per
    accepted step beyond the derivative check at the start (finite differences at two
    states, ~35 evaluations)."""
    calls = [0]
    levels = -0.01 * np.arange(60)

    def gap(t, q):
        calls[0] += 1
        return q[1] - levels

    floor = go.Contact(gap, lambda t, q: np.column_stack([np.zeros(60), np.ones(60)]),
                       lambda t, q, v: np.zeros(60), rheonomic=False, name="levels")
    system = go.System(("x", "y"), mass=np.eye(2), constraints=[floor],
                       force=lambda t, q, v: np.array([-400.0 * q[0], -9.81]))
    run = go.simulate(system, (0.0, 0.3), np.array([0.0, 1.0]), np.array([1.0, 0.0]))
    assert run.success and len(run.t) > 10
    assert calls[0] < 3 * len(run.t) + 50


def test_a_point_leaving_its_surface_is_not_landed_by_the_projection_of_the_phase_start():
    """The closing watch of a point that starts a phase touching and leaving at ``rate0``
    (``contact_run._gap_event``): the phase's first steps project the state onto the
    closed points' rows, which may put the leaving point below its surface by the
    projection's accuracy (dm_control's humanoid with ten points closed: a foot leaving
    at 2.9e-4 m/s put 4.7e-10 m below the floor). Its watch ``gap / (t - t_start)`` then
    changed sign at once, the contact problem let the foot leave again, and 26 phases of
    zero length ended the run. Now a dip of at most ``offset`` (the run's 1e-3 gap
    tolerance) at the watch's first state after the start is taken as the projection's:
    on a gap history written here (the dip at the start, a flight, a landing at ``t =
    1``) the watch stays positive through the dip and changes sign where the gap reaches
    twice the dip (within 1e-9 m of the surface: the landing's time within 1e-9 / 2.9e-4
    of 1). A ball leaving at its rebound (no dip) is watched exactly as before: its gap
    over the time since the start."""
    from types import SimpleNamespace

    from gaussopt.integrate.contact_run import _gap_event

    rate0, offset, dip = 2.9e-4, 4e-9, -4.7e-10

    def gap_at(t):                      # the dip, then a parabola through zero at t = 1
        return dip * math.exp(-t / 1e-6) + rate0 * t * (1.0 - t)

    P = SimpleNamespace(gaps=lambda t, q: np.array([gap_at(t)]), labels=["foot"],
                        gap_source=None, unsigned=np.zeros(1, dtype=bool))
    watch = _gap_event(P, 0, 0.0, rate0, offset)
    assert watch(0.0, None, None) == rate0
    ts = np.concatenate([np.geomspace(1e-12, 1e-5, 30), np.linspace(1e-4, 0.999, 50)])
    assert all(watch(t, None, None) > 0 for t in ts)
    late = 2 * abs(dip) / rate0                  # where the gap reaches twice the dip
    assert watch(1.0 + 1.01 * late, None, None) < 0 < watch(1.0 + 0.99 * late, None, None)
    # without the offset (the watch before): the dip is a landing at the start
    bare = _gap_event(P, 0, 0.0, rate0, 0.0)
    assert bare(1e-9, None, None) < 0
    # no dip (a rebound): the gap over the time since the start, landing at 1 exactly
    P.gaps = lambda t, q: np.array([rate0 * t * (1.0 - t)])
    ball = _gap_event(P, 0, 0.0, rate0, offset)
    assert ball(0.5, None, None) == rate0 * 0.5 * 0.5 / 0.5
    assert ball(1.0 + 1e-12, None, None) < 0 < ball(1.0 - 1e-12, None, None)
