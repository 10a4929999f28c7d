"""Point contacts in space with Coulomb's circular cone, against independent references.

* A homogeneous sphere launched sliding on a horizontal plane (Euler parameters with
  their normalization, ``M = diag(m, m, m, 4 I, 4 I, 4 I, 4 I)``: for an isotropic body
  ``2 I |e'|^2`` is its rotational energy on the constraint): without spin it slides
  with deceleration ``mu g`` and rolls after ``2 v0 / (7 mu g)`` at ``5/7 v0`` (closed
  form), along any direction of the plane; with spin, the sliding phase is the ODE of
  the sphere written here (Newton-Euler with ``-mu m g u/|u|`` at the lowest point,
  integrated by scipy at 1e-13), then it rolls on at constant velocity.
* A cube (isotropic inertia) on four frictional corners: on an incline it rests when
  ``mu > tan beta`` (the forces balance gravity, each inside its circular cone) and
  slides down the fall line with ``a = g (sin beta - mu cos beta)`` otherwise (closed
  form); on a level floor, pushed at its centre by a force ``k t`` at an angle phi, it
  sticks until ``k t = mu m g`` and then slides along phi with ``s = k (t - ts)^3 /
  (6 m)`` (closed form: the friction of the four corners sums to ``-mu m g`` along the
  slip, and no corner lifts while ``mu < 1``).
* The event-time contact problem of one particle (stick or slide with the slip along
  the excess force) and the arguments' checks.

Tolerances: each motion is a polynomial or a smooth flow integrated at rtol = atol =
1e-12 over a few hundred steps: the state errs by the admitted local errors summed
(~1e-10 here), an event time by that over its event function's rate (>= ~1), below
1e-9 (events, relative) and 1e-8 (states). The quaternion's normalization is a
constraint of every phase (its residual stays at rounding). Forces of a certified
contact problem err by rounding (1e4 eps of the force scale) except where Clarabel
decides an indeterminate distribution (its gap tolerance ``_SOCP_TOL = 1e-11`` of the
force scale): 1e-9 of ``m g`` covers both.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.gauss.contact_cone import SLIDE, solve_contact_cone
from gaussopt.gauss.contact_problem import STICK

G0 = 9.81
TOL = dict(rtol=1e-12, atol=1e-12)


def E(e):
    """``omega = 2 E(e) e'``: the world angular velocity from Euler parameters' rates."""
    e0, e1, e2, e3 = e
    return np.array([[-e1, e0, -e3, e2], [-e2, e3, e0, -e1], [-e3, -e2, e1, e0]])


def R(e):
    e0, e1, e2, e3 = e
    return np.array([[1 - 2 * (e2 * e2 + e3 * e3), 2 * (e1 * e2 - e0 * e3), 2 * (e1 * e3 + e0 * e2)],
                     [2 * (e1 * e2 + e0 * e3), 1 - 2 * (e1 * e1 + e3 * e3), 2 * (e2 * e3 - e0 * e1)],
                     [2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1), 1 - 2 * (e1 * e1 + e2 * e2)]])


def rigid(m, inertia, contact, force):
    """A body with isotropic inertia in coordinates (x, y, z, e0..e3)."""
    unit = go.Holonomic(lambda t, q: np.array([q[3:7] @ q[3:7] - 1.0]), rheonomic=False,
                        name="unit")
    return go.System(("x", "y", "z", "e0", "e1", "e2", "e3"),
                     mass=np.diag([m, m, m] + [4 * inertia] * 4), force=force,
                     constraints=[unit, contact])


def launch(r, v, w):
    """(q0, v0) of a body at height r, orientation identity, velocity v, spin w."""
    q0 = np.array([0.0, 0.0, r, 1.0, 0.0, 0.0, 0.0])
    return q0, np.concatenate([v, 0.5 * E(q0[3:7]).T @ np.asarray(w, dtype=float)])


def omega(q, v):
    return 2 * E(q[3:7]) @ v[3:7]


# --------------------------------------------------------------------------- the sphere
M_S, R_S, MU_S = 2.0, 0.1, 0.3
I_S = 0.4 * M_S * R_S ** 2


def sphere():
    def slip_velocity(t, q, v):
        w = 2 * E(q[3:7]) @ v[3:7]
        return np.array([[v[0] - R_S * w[1], v[1] + R_S * w[0]]])

    floor = go.Contact(lambda t, q: np.array([q[2] - R_S]), slip_velocity=slip_velocity,
                       friction=MU_S, rheonomic=False, name="floor")
    return rigid(M_S, I_S, floor, [0.0, 0.0, -M_S * G0, 0.0, 0.0, 0.0, 0.0])


def sliding_sphere_ode(v0, w0, t_end):
    """The sliding phase written independently: r'' = -mu g u/|u|, I w' = rho x f with
    rho = (0, 0, -r), f = (-mu m g u/|u|, m g); ends where the slip u vanishes."""
    def rhs(t, y):
        vx, vy, wx, wy, wz = y[2:]
        u = np.array([vx - R_S * wy, vy + R_S * wx])
        f = -MU_S * M_S * G0 * u / np.linalg.norm(u)
        return [vx, vy, f[0] / M_S, f[1] / M_S, R_S * f[1] / I_S, -R_S * f[0] / I_S, 0.0]

    def stop(t, y):
        return np.hypot(y[2] - R_S * y[5], y[3] + R_S * y[4]) - 1e-9
    stop.terminal = True
    return solve_ivp(rhs, (0, t_end), [0.0, 0.0, *v0, *w0], method="DOP853", rtol=1e-13,
                     atol=1e-14, events=stop, dense_output=True)


@pytest.mark.parametrize("angle", [0.0, 0.6])
def test_sphere_launched_sliding_rolls_at_five_sevenths(angle):
    v0 = 2.0
    d = np.array([math.cos(angle), math.sin(angle), 0.0])
    q0, u0 = launch(R_S, v0 * d, [0.0, 0.0, 0.0])
    tr = go.simulate(sphere(), (0.0, 0.5), q0, u0, **TOL)
    assert tr.success, tr.message
    labels = [x[2] for x in tr.meta["contact_transitions"]]
    assert labels == ["close slide", "stick"]
    t_roll = 2 * v0 / (7 * MU_S * G0)
    assert tr.meta["contact_transitions"][1][0] == pytest.approx(t_roll, rel=1e-9, abs=0)
    # after it: rolling at 5/7 v0 along d, spin 5/7 v0 / r about z x d, forever
    q1, v1 = tr.q[-1], tr.v[-1]
    np.testing.assert_allclose(v1[:3], 5 / 7 * v0 * d, atol=1e-8)
    np.testing.assert_allclose(omega(q1, v1), 5 / 7 * v0 / R_S * np.cross([0, 0, 1], d),
                               atol=1e-8 / R_S)
    # position: v0 t - mu g t^2 / 2 while sliding, then 5/7 v0 (t - t_roll)
    s = v0 * t_roll - 0.5 * MU_S * G0 * t_roll ** 2 + 5 / 7 * v0 * (0.5 - t_roll)
    np.testing.assert_allclose(q1[:3], [s * d[0], s * d[1], R_S], atol=1e-8)
    assert abs(q1[3:7] @ q1[3:7] - 1) < 1e-12
    # the friction force while sliding: mu m g against the slip, then 0 while rolling
    sliding = tr.t < t_roll * (1 - 1e-6)
    np.testing.assert_allclose(tr.contact_forces[:, 0], M_S * G0, rtol=1e-9)
    np.testing.assert_allclose(tr.friction_forces[sliding, 0],
                               np.tile(-MU_S * M_S * G0 * d[:2], (sliding.sum(), 1)),
                               atol=1e-9 * M_S * G0)
    # (the sample at the event ends the sliding phase: rolling from just after it)
    np.testing.assert_allclose(tr.friction_forces[tr.t > t_roll * (1 + 1e-6), 0], 0.0,
                               atol=1e-9 * M_S * G0)


def test_sphere_with_spin_follows_the_sliding_ode():
    """Sidespin and topspin: the centre's path curves (the slip keeps its direction for
    a homogeneous sphere, the velocity turns), then the sphere rolls on; the vertical
    spin is untouched (no drilling friction at a point)."""
    v0, w0 = np.array([2.0, 0.5]), np.array([15.0, -4.0, 7.0])
    ref = sliding_sphere_ode(v0, w0, 2.0)
    assert ref.status == 1
    t_roll = float(ref.t_events[0][0])
    q0, u0 = launch(R_S, [*v0, 0.0], w0)
    tr = go.simulate(sphere(), (0.0, 1.0), q0, u0, **TOL)
    assert tr.success, tr.message
    trans = tr.meta["contact_transitions"]
    assert [x[2] for x in trans] == ["close slide", "stick"]
    # the reference stops 1e-9 (slip speed) early: over a slip deceleration 7/2 mu g
    # that is 1e-10 s
    assert trans[1][0] == pytest.approx(t_roll, rel=1e-9, abs=0)
    y = ref.y[:, -1]
    x1, v1 = y[:2] + y[2:4] * (1.0 - t_roll), y[2:4]
    np.testing.assert_allclose(tr.q[-1][:2], x1, atol=1e-8)
    np.testing.assert_allclose(tr.v[-1][:2], v1, atol=1e-8)
    np.testing.assert_allclose(omega(tr.q[-1], tr.v[-1]), y[4:], atol=1e-8 / R_S)
    # mid-slide: the reference's dense output
    mid = np.flatnonzero(tr.t < 0.5 * t_roll)[-1]
    np.testing.assert_allclose(tr.q[mid][:2], ref.sol(tr.t[mid])[:2], atol=1e-8)


# --------------------------------------------------------------------------- the cube
M_C, B_C = 3.0, 0.1
J_C = 2 / 3 * M_C * B_C ** 2
CORNERS = np.array([[sx * B_C, sy * B_C, -B_C] for sx in (1, -1) for sy in (1, -1)])


def cube(mu, beta=0.0, push=None):
    """A cube on its four bottom corners on the floor z = 0; gravity tilted by beta about y
    (an incline whose fall line is +x); ``push = (k, phi)``: a horizontal force k t at
    angle phi through the centre."""
    def gap(t, q):
        return q[2] + (R(q[3:7]) @ CORNERS.T)[2]

    def slip_velocity(t, q, v):
        w = 2 * E(q[3:7]) @ v[3:7]
        return (v[:3] + np.cross(w, (R(q[3:7]) @ CORNERS.T).T))[:, :2]

    corners = go.Contact(gap, slip_velocity=slip_velocity, friction=mu, rheonomic=False,
                         name="corners")
    grav = [M_C * G0 * math.sin(beta), 0.0, -M_C * G0 * math.cos(beta), 0, 0, 0, 0]
    if push is None:
        force = grav
    else:
        k, phi = push

        def force(t, q, v):
            return np.array([k * t * math.cos(phi), k * t * math.sin(phi), -M_C * G0,
                             0.0, 0.0, 0.0, 0.0])
    return rigid(M_C, J_C, corners, force)


def assert_in_cones(tr, mu, rel=1e-9):
    scale = rel * M_C * G0
    assert np.all(tr.contact_forces >= -scale)
    assert np.all(np.hypot(tr.friction_forces[..., 0], tr.friction_forces[..., 1])
                  <= mu * tr.contact_forces + scale)


@pytest.mark.parametrize("above", [True, False])
def test_cube_on_incline_rests_or_slides(above):
    beta = 0.3
    mu = math.tan(beta) + (0.05 if above else -0.05)
    q0, u0 = launch(B_C, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    tr = go.simulate(cube(mu, beta), (0.0, 0.5), q0, u0, **TOL)
    assert tr.success, tr.message
    assert_in_cones(tr, mu)
    a = 0.0 if above else G0 * (math.sin(beta) - mu * math.cos(beta))
    np.testing.assert_allclose(tr.q[:, 0], 0.5 * a * tr.t ** 2, atol=1e-8)
    np.testing.assert_allclose(tr.q[:, 1:3], np.tile([0.0, B_C], (len(tr), 1)), atol=1e-8)
    np.testing.assert_allclose(tr.v[:, 0], a * tr.t, atol=1e-8)
    # the forces balance gravity's normal and (resting) tangential parts
    np.testing.assert_allclose(tr.contact_forces.sum(axis=1), M_C * G0 * math.cos(beta),
                               rtol=1e-9)
    fx = tr.friction_forces[..., 0].sum(axis=1)
    want = -M_C * G0 * math.sin(beta) if above else -mu * M_C * G0 * math.cos(beta)
    np.testing.assert_allclose(fx, want, atol=1e-9 * M_C * G0)
    labels = {x[2] for x in tr.meta["contact_transitions"]}
    assert labels <= ({"close stick"} if above else {"close slide"})


@pytest.mark.parametrize("phi", [0.0, 0.7])
def test_cube_pushed_at_an_angle_slides_along_the_push(phi):
    """Sticks, then all four corners slide along the push (the friction of each is ``-mu
    N_i d``: the yaw moment of such forces vanishes for every admissible distribution of
    the normal forces, so the motion is pure translation). The slide grows from rest
    (slip ``~ (t - ts)^2``) with each corner's friction along ``d``: the run's steps are
    those of a cubic (it crawled at 2e-11 s steps while the friction followed ``u/|u|``
    of a slip at rounding level, and corners slid tilted by 2e-5 from the onset): a few
    dozen steps bound it. Each corner's friction along ``-d`` within the cones' bound
    (1e-9 m g: rounding and Clarabel's distribution of the normal forces)."""
    mu, k = 0.4, 20.0
    q0, u0 = launch(B_C, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    tr = go.simulate(cube(mu, push=(k, phi)), (0.0, 0.7), q0, u0, **TOL)
    assert tr.success, tr.message
    assert_in_cones(tr, mu)
    ts = mu * M_C * G0 / k
    onset = [x for x in tr.meta["contact_transitions"] if x[2] == "slide"]
    assert len(onset) == 4 and {x[0] for x in onset} == {onset[0][0]}
    assert onset[0][0] == pytest.approx(ts, rel=1e-9, abs=0)
    assert tr.stats["phases"] == 2 and tr.stats["steps"] <= 50
    d = np.array([math.cos(phi), math.sin(phi)])
    s = k * np.clip(tr.t - ts, 0, None) ** 3 / (6 * M_C)
    np.testing.assert_allclose(tr.q[:, :2], s[:, None] * d, atol=1e-8)
    np.testing.assert_allclose(tr.q[:, 2], B_C, atol=1e-8)
    sliding = tr.t > onset[0][0]
    want = -mu * tr.contact_forces[sliding][..., None] * d
    np.testing.assert_allclose(tr.friction_forces[sliding], want, atol=1e-9 * M_C * G0)


# --------------------------------------------------------------------------- the puck
def test_puck_pushed_by_a_turning_force_follows_the_sliding_ode():
    """A point mass on the floor pushed by ``m A (cos wt, sin wt)`` with ``A > mu g``
    slides from rest along ``x`` (friction locked along it while the slip stays along it)
    and, its slip turning with the push, continues with ``-mu m g u/|u|`` after the
    lock's event: two phases. Reference: ``v' = A (cos wt, sin wt) - mu g v/|v|``
    integrated by scipy at 1e-13 from ``v = 1e-15 x`` (the slip grows like ``t``, so its
    steps grow geometrically from there). Bound: the locked force leaves the slip across
    ``x`` uncorrected up to ``2 vel_tol`` (~4e-9 m/s) for ~3e-5 s, damped at the rate
    ``mu g / |u|`` after it: the positions err by far less than that times the run's
    0.5 s, the velocities by the damped remainder; 1e-8 covers both and the integrators'
    own 1e-10."""
    m, mu, A, w = 1.5, 0.3, 6.0, 2.0
    puck = go.Contact(lambda t, q: q[2:3], slip_velocity=lambda t, q, v: v[None, :2],
                      friction=mu, rheonomic=False, name="puck")
    sysm = go.System(("x", "y", "z"), mass=np.eye(3) * m, constraints=[puck],
                     force=lambda t, q, v: np.array([m * A * math.cos(w * t),
                                                     m * A * math.sin(w * t), -m * G0]))
    tr = go.simulate(sysm, (0.0, 0.5), np.zeros(3), np.zeros(3), **TOL)
    assert tr.success, tr.message
    assert tr.stats["phases"] == 2
    assert_in_cones(tr, mu, rel=1e-9 * M_C / m)

    def rhs(t, y):
        vx, vy = y[2:]
        sp = math.hypot(vx, vy)
        return [vx, vy, A * math.cos(w * t) - mu * G0 * vx / sp,
                A * math.sin(w * t) - mu * G0 * vy / sp]
    ref = solve_ivp(rhs, (0.0, 0.5), [0.0, 0.0, 1e-15, 0.0], method="DOP853", rtol=1e-13,
                    atol=1e-16, dense_output=True)
    y = ref.sol(tr.t)
    np.testing.assert_allclose(tr.q[:, :2], y[:2].T, atol=1e-8)
    np.testing.assert_allclose(tr.v[:, :2], y[2:].T, atol=1e-8)
    np.testing.assert_allclose(tr.q[:, 2], 0.0, atol=1e-12)


def test_a_slide_that_slows_without_stopping_is_integrated_as_the_stiff_system_it_is():
    """A puck sliding along ``e`` pushed along ``e`` by ``m mu g (1 - eps0 exp(-t/tau))``,
    just inside its cone: its slip slows from ``1000 vel_tol`` towards ``0.1 vel_tol`` and
    never stops. ``-mu N u/|u|`` damps the slip across ``e`` at the rate ``mu g / |u|``
    (1.5e7 /s at 2e-7 m/s): an explicit method's steps shrink with the slip (before:
    20,000 DOP853 steps reached t = 0.068 s of 0.2 and left the slip 6e-9 m/s off, the
    chatter of its direction lowering the mean friction). Below ``100 vel_tol`` the run
    integrates the phase by Radau ("stiff" event, ``meta["contact_implicit"]``).

    Reference (exact): the slip stays along ``e`` with speed ``s(t) = u0 - eps0 mu g tau
    (1 - exp(-t/tau))``, its integral the position. Bounds: the switch is at ``s = 100
    vel_tol`` with the run's ``vel_tol = 1e3 (atol + rtol (1 + max|v|))`` (``max|v|`` is
    2e-4 here: 1e-3 relative covers it); the velocity's error accumulates from the
    integrators' local errors ``atol + rtol |v|`` (2e-10) over a stable, decaying motion
    (measured 2.8e-10): 1e-9; the positions' by at most that times the 0.2 s."""
    m, mu, th = 1.5, 0.3, 0.4
    rtol = atol = 1e-10
    vt = 1e3 * (atol + rtol)
    u0, u_inf, tau = 1000 * vt, 0.1 * vt, 0.01
    eps0 = (u0 - u_inf) / (mu * G0 * tau)
    e = np.array([math.cos(th), math.sin(th)])

    def force(t, q, v):
        push = m * mu * G0 * (1 - eps0 * math.exp(-t / tau))
        return np.array([push * e[0], push * e[1], -m * G0])
    puck = go.Contact(lambda t, q: q[2:3], slip_velocity=lambda t, q, v: v[None, :2],
                      friction=mu, rheonomic=False, name="puck")
    sysm = go.System(("x", "y", "z"), mass=np.eye(3) * m, constraints=[puck], force=force)
    tr = go.simulate(sysm, (0.0, 0.2), np.zeros(3), np.array([*(u0 * e), 0.0]), rtol=rtol,
                     atol=atol, max_steps=20_000)
    assert tr.success, tr.message
    assert tr.stats["steps"] < 2_000
    assert [w for _, _, w in tr.meta["contact_transitions"]] == ["close slide"]
    (t_s, t_e), = tr.meta["contact_implicit"]
    assert t_s == pytest.approx(-tau * math.log(1 - (u0 - 100 * vt) / (u0 - u_inf)), rel=1e-3)
    assert t_e == 0.2
    t = tr.t
    s = u0 - eps0 * mu * G0 * tau * (1 - np.exp(-t / tau))
    x = u0 * t - eps0 * mu * G0 * tau * (t - tau * (1 - np.exp(-t / tau)))
    np.testing.assert_allclose(tr.v[:, :2], s[:, None] * e, rtol=0, atol=1e-9)
    np.testing.assert_allclose(tr.q[:, :2], x[:, None] * e, rtol=0, atol=0.2 * 1e-9)
    np.testing.assert_allclose(tr.q[:, 2], 0.0, atol=1e-12)
    assert_in_cones(tr, mu, rel=1e-9 * M_C / m)


@pytest.mark.parametrize("slow", [False, True])
def test_a_slide_that_friction_stops_is_not_stiff_and_stays_explicit(slow):
    """A puck launched sliding, no push: its slip decelerates at ``mu g`` to its stop at
    ``t_s = v0 / (mu g)``, after ``x_s = v0^2 / (2 mu g)``. The friction damps the slip
    across its direction at ``mu g / |u|``, unbounded at the stop, but the slip changes by
    its own size in ``|u| / (mu g)``: the stiffness ratio ``mu N w / |a_par|`` is 1, and
    the explicit method's accuracy asks for as many steps as its stability. The run stays
    explicit, also where the slide starts slow (``v0 = 150 vel_tol``, ``vel_tol = 1e3
    (atol + rtol (1 + v0))``): before, a slide that started below ``200 vel_tol`` or was
    seen below ``100 vel_tol`` was integrated by Radau (on MuJoCo's humanoid, the short
    slides of its rocking feet to their stops: 229 s of a 492 s run).

    Reference (exact): the motion is a parabola in time. Bounds: the stop is found where
    the slip is within its floor ``10 (atol + rtol v0)`` of zero (the slip watch's,
    ``_slip_floor_event``), i.e. within that over ``mu g`` in time, plus the module's
    1e-9 relative; the positions within 1e-8 of ``x_s`` (the module's)."""
    m, mu, th = 1.5, 0.3, 0.4
    v0 = 150 * 1e3 * (TOL["atol"] + TOL["rtol"] * 1.0) if slow else 0.7
    e = np.array([math.cos(th), math.sin(th)])
    puck = go.Contact(lambda t, q: q[2:3], slip_velocity=lambda t, q, v: v[None, :2],
                      friction=mu, rheonomic=False, name="puck")
    sysm = go.System(("x", "y", "z"), mass=np.eye(3) * m, constraints=[puck],
                     force=[0.0, 0.0, -m * G0])
    t_s = v0 / (mu * G0)
    tr = go.simulate(sysm, (0.0, 2 * t_s), np.zeros(3), np.array([*(v0 * e), 0.0]), **TOL)
    assert tr.success, tr.message
    assert tr.meta["contact_implicit"] == []
    assert [w for _, _, w in tr.meta["contact_transitions"]] == ["close slide", "stick"]
    floor = 10 * (TOL["atol"] + TOL["rtol"] * v0)
    assert abs(tr.meta["contact_transitions"][1][0] - t_s) <= floor / (mu * G0) + 1e-9 * t_s
    t = np.minimum(tr.t, t_s)
    x = v0 * t - 0.5 * mu * G0 * t ** 2
    np.testing.assert_allclose(tr.q[:, :2], x[:, None] * e, rtol=0,
                               atol=1e-8 * v0 ** 2 / (2 * mu * G0))
    np.testing.assert_allclose(tr.q[:, 2], 0.0, atol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_newtons_jacobian_on_slide_directions_is_the_derivative_of_the_solve(k):
    """Newton on the slide directions of points starting to slide uses the exact
    derivative of their slips across their directions with respect to the directions'
    angles (one KKT solve with a column per slider). Checked against central differences
    of the combination's own solve at random directions, forces and contact points (a
    body of 6 velocities on k points, all sliding: the rows independent; k = 4: the
    corners of a face, dependent rows, whose sliding friction leaves the motion to the
    forces without self-stress, ``selected_kkt``). Bound: the
    differences' truncation, h^2 / 6 times the third derivative (1.7e-11 at h = 1e-5 for
    derivatives of order one), plus the solves' rounding over h (1e-15 relative times
    the KKT system's condition, below 1e2 here, over 1e-5: 1e-8): 1e-7 of the largest
    entry."""
    from gaussopt.gauss.contact_cone import _Combo, _direction_jacobian, _slip_parts, _unit
    from test_contact_lcp import _spatial_body

    rng = np.random.default_rng(k)
    face = k == 4
    pts = (np.array([[x, y, -0.1] for x in (-0.1, 0.1) for y in (-0.15, 0.15)]) if face else
           np.column_stack([rng.uniform(-0.2, 0.2, (k, 2)), np.full(k, -0.1)]))
    M, F, A, b, G, h, T, _ = _spatial_body(pts, 0.0, push=rng.standard_normal(2),
                                           turn=rng.standard_normal())
    s = 0.1 * rng.standard_normal((k, 2))
    mu = np.full(k, 0.4)
    mode = np.full(k, SLIDE)
    sliders = list(range(k))
    th = rng.uniform(0, 2 * np.pi, k)

    def solve(angles):
        dirs = np.array([_unit(a) for a in angles])
        c = _Combo(M, F, A, b, G, h, T, s, mu, mode, dirs, select=face, basis=False)
        return c, dirs, _slip_parts(c.got[0], T, s, dirs, sliders)

    c, dirs, (_, along) = solve(th)
    assert c.selected_solve == face
    jac = _direction_jacobian(M, A, T, mu, c, dirs, sliders, along)
    fd = np.zeros((k, k))
    step = 1e-5
    for j in range(k):
        up, down = th.copy(), th.copy()
        up[j] += step
        down[j] -= step
        fd[:, j] = (np.array(solve(up)[2][0]) - np.array(solve(down)[2][0])) / (2 * step)
    assert np.abs(jac).max() > 0.1
    np.testing.assert_allclose(jac, fd, rtol=0, atol=1e-7 * np.abs(jac).max())


# --------------------------------------------------------------------------- the problem
def particle_problem(f, mu):
    M = np.eye(3)
    return dict(M=M, F=np.array(f), A=np.zeros((0, 3)), b=np.zeros(0),
                G=np.array([[0.0, 0.0, 1.0]]), h=np.zeros(1),
                T=np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]), s=np.zeros((1, 2)),
                mu=np.array([mu]))


@pytest.mark.parametrize("f", [(1.0, 2.0), (-5.0, 3.0), (0.3, -4.8)])
def test_particle_sticks_inside_the_circle_and_slides_along_the_excess_force(f):
    """A unit mass on z = 0 under (fx, fy, -g): sticks with t = -f while |f| <= mu g,
    else slides with a = f - mu g f/|f| (closed form; rounding 1e4 eps)."""
    mu = 0.5
    sol = solve_contact_cone(**particle_problem([*f, -G0], mu))
    f = np.array(f)
    if np.linalg.norm(f) <= mu * G0:
        assert sol.mode[0] == STICK
        np.testing.assert_allclose(sol.tau[0], -f, atol=1e-12)
        np.testing.assert_allclose(sol.x, 0.0, atol=1e-12)
    else:
        assert sol.mode[0] == SLIDE
        e = f / np.linalg.norm(f)
        np.testing.assert_allclose(sol.direction[0], e, atol=1e-12)
        np.testing.assert_allclose(sol.x[:2], f - mu * G0 * e, atol=1e-12)
        np.testing.assert_allclose(sol.tau[0], -mu * G0 * e, atol=1e-12)
    assert sol.nu[0] == pytest.approx(G0, rel=1e-12)


def test_contact_arguments_checked():
    with pytest.raises(go.ModelError, match="not both"):
        go.Contact(lambda t, q: q[:1], slip=lambda t, q: q[1:2],
                   slip_velocity=lambda t, q, v: v[None, :2], friction=0.3)
    with pytest.raises(go.ModelError, match="slip_velocity"):
        go.Contact(lambda t, q: q[:1], slip_velocity="v", friction=0.3)
    with pytest.raises(go.ModelError, match="shapes"):
        solve_contact_cone(**{**particle_problem([0.0, 0.0, -G0], 0.5),
                              "s": np.zeros(2)})
    bad = go.Contact(lambda t, q: np.array([q[2] - R_S]), friction=0.3,
                     slip_velocity=lambda t, q, v: v[:3][None, :], name="bad")
    with pytest.raises(go.ModelError, match="expected shape"):
        go.simulate(rigid(M_S, I_S, bad, [0, 0, -M_S * G0, 0, 0, 0, 0]), (0, 0.1),
                    *launch(R_S, [1.0, 0.0, 0.0], [0, 0, 0]), **TOL)


def test_spatial_run_saves_loads_and_balances_its_energy(tmp_path):
    """A sliding sphere's run (friction forces of shape (N, 1, 2)) is saved and loaded
    with its forces, and its energy balance charges the lost kinetic energy to friction:
    sliding to rolling loses ``m v0^2 / 2 - 7/10 m (5/7 v0)^2 = m v0^2 / 7`` (closed form).
    Bound: the friction work is a quadrature on the samples (Simpson's rule; its error
    estimate ``friction_error``, the trapezoid's error, is larger) plus the run's errors
    (~1e-10 of the energy): the drift within 10 friction_error + 1e-8 m v0^2."""
    from gaussopt.study.energy_balance import energy_balance

    v0 = 2.0
    q0, u0 = launch(R_S, v0 * np.array([math.cos(0.6), math.sin(0.6), 0.0]), [0.0, 0.0, 0.0])
    base = sphere()
    # the same system with its energy (on the unit quaternion the rotational energy of an
    # isotropic body is 2 I |e'|^2)
    sysm = go.System(base.coordinates, mass=base.mass(0.0, q0), force=base.force(0.0, q0, u0),
                     constraints=list(base.constraints),
                     energy=lambda t, q, v: (0.5 * M_S * v[:3] @ v[:3] + 2 * I_S * v[3:] @ v[3:]
                                             + M_S * G0 * q[2]))
    tr = go.simulate(sysm, (0.0, 0.5), q0, u0, t_eval=np.linspace(0.0, 0.5, 401), **TOL)
    assert tr.success and tr.friction_forces.shape == (len(tr.t), 1, 2)
    back = go.load(tr.save(tmp_path / "sphere"))
    np.testing.assert_array_equal(back.friction_forces, tr.friction_forces)
    bal = energy_balance(tr, sysm)
    loss = M_S * v0 ** 2 / 7
    assert bal.friction_source == "model"
    assert abs(bal.friction_loss[-1] - loss) <= 10 * bal.friction_error + 1e-8 * M_S * v0 ** 2
    assert np.abs(bal.drift).max() <= 10 * bal.friction_error + 1e-8 * M_S * v0 ** 2


def test_slip_velocity_jacobian_given_is_used_and_checked():
    """``Contact(slip_velocity_jacobian=...)``: the sphere's slip velocity ``u = T(q) v``
    with ``T`` written by hand (``u_x = v_x - r w_y``, ``u_y = v_y + r w_x``, ``w = 2 E(e)
    e'``) gives the same roll as the complex step (the run's answers agree to the run's
    tolerance; both are the closed form's within 1e-9 relative); a wrong matrix (twice
    ``T``) is caught by the system's check, naming the contact; a non-callable or one
    without ``slip_velocity`` is refused by name."""
    def slip_velocity(t, q, v):
        w = 2 * E(q[3:7]) @ v[3:7]
        return np.array([[v[0] - R_S * w[1], v[1] + R_S * w[0]]])

    def T(t, q, v, scale=1.0):
        Eq = 2 * E(q[3:7])
        J = np.zeros((1, 2, 7))
        J[0, 0, 0], J[0, 1, 1] = 1.0, 1.0
        J[0, 0, 3:7] = -R_S * Eq[1]
        J[0, 1, 3:7] = R_S * Eq[0]
        return scale * J

    def system(jac):
        floor = go.Contact(lambda t, q: np.array([q[2] - R_S]), slip_velocity=slip_velocity,
                           slip_velocity_jacobian=jac, friction=MU_S, rheonomic=False,
                           name="floor")
        return rigid(M_S, I_S, floor, [0.0, 0.0, -M_S * G0, 0.0, 0.0, 0.0, 0.0])

    q0, v0 = launch(R_S, [2.0, 0.0, 0.0], [0, 0, 0])
    tr = go.simulate(system(T), (0.0, 0.3), q0, v0, **TOL)
    assert tr.success, tr.message
    t_roll = [x[0] for x in tr.meta["contact_transitions"] if x[2] == "stick"][0]
    assert t_roll == pytest.approx(2 * 2.0 / (7 * MU_S * G0), rel=1e-9, abs=0)
    with pytest.raises(go.ModelError, match="floor"):
        go.simulate(system(lambda t, q, v: T(t, q, v, 2.0)), (0.0, 0.3), q0, v0, **TOL)
    with pytest.raises(go.ModelError, match="slip_velocity_jacobian"):
        go.Contact(lambda t, q: q[:1], slip_velocity=slip_velocity,
                   slip_velocity_jacobian="T", friction=0.3)
    with pytest.raises(go.ModelError, match="slip_velocity_jacobian"):
        go.Contact(lambda t, q: q[:1], slip_velocity_jacobian=T, friction=0.0)


def test_slip_velocity_gamma_given_is_used_and_checked():
    """``Contact(slip_velocity_gamma=...)``: the sphere's slip velocity ``u = T(q) v`` (as
    above) has the convective term ``-(T_q v) v = 2 r (E(e') e')`` components, which vanish
    (``E(x) x = 0``): given as zeros with the hand-written ``T``, the run needs no complex
    step and rolls at the closed form's time (1e-9 relative, as above); a wrong term (ones)
    is caught by the system's check, naming the contact; a non-callable or one without
    ``slip_velocity`` is refused by name."""
    def slip_velocity(t, q, v):
        w = 2 * E(q[3:7]) @ v[3:7]
        return np.array([[v[0] - R_S * w[1], v[1] + R_S * w[0]]])

    def T(t, q, v):
        Eq = 2 * E(q[3:7])
        J = np.zeros((1, 2, 7))
        J[0, 0, 0], J[0, 1, 1] = 1.0, 1.0
        J[0, 0, 3:7] = -R_S * Eq[1]
        J[0, 1, 3:7] = R_S * Eq[0]
        return J

    calls = []

    def gamma(t, q, v, value=0.0):
        calls.append(t)
        return np.full((1, 2), value)

    def system(gam):
        floor = go.Contact(lambda t, q: np.array([q[2] - R_S]), slip_velocity=slip_velocity,
                           slip_velocity_jacobian=T, slip_velocity_gamma=gam, friction=MU_S,
                           rheonomic=False, name="floor")
        return rigid(M_S, I_S, floor, [0.0, 0.0, -M_S * G0, 0.0, 0.0, 0.0, 0.0])

    q0, v0 = launch(R_S, [2.0, 0.0, 0.0], [0, 0, 0])
    tr = go.simulate(system(gamma), (0.0, 0.3), q0, v0, **TOL)
    assert tr.success, tr.message
    assert calls                                          # (the given term was used)
    t_roll = [x[0] for x in tr.meta["contact_transitions"] if x[2] == "stick"][0]
    assert t_roll == pytest.approx(2 * 2.0 / (7 * MU_S * G0), rel=1e-9, abs=0)
    with pytest.raises(go.ModelError, match="floor"):
        system(lambda t, q, v: gamma(t, q, v, 1.0)).check(0.0, q0, v0)
    with pytest.raises(go.ModelError, match="slip_velocity_gamma"):
        go.Contact(lambda t, q: q[:1], slip_velocity=slip_velocity,
                   slip_velocity_gamma="c", friction=0.3)
    with pytest.raises(go.ModelError, match="slip_velocity_gamma"):
        go.Contact(lambda t, q: q[:1], slip_velocity_gamma=gamma, friction=0.0)


def test_impact_of_an_edge_whose_newton_root_points_the_wrong_way():
    """The velocity-level problem of a box's edge landing (``tests/data/edge_impact_cone.json``,
    its floats written exactly: two corners of a tilted box, restitution 0.3, mu = 1, from
    the MJCF drop of ``tests/box_drop_reference.py``). Both corners sticking is inconsistent (their Newton
    rebounds differ along the rigid edge), so one corner slides, by about 2e-8 m/s. The
    direction's Newton iteration (``d x u = 0``) first converged to the root with the slip
    against its friction, and the combination was given up without trying its other
    starts: "no set of active contact points satisfies the contact conditions". The
    answer is checked here against the conditions themselves: momentum balance ``M x - F =
    A^T lam + G^T N + sum T_i^T t_i`` (rounding of the terms, 1e-12 of ``|F|``), ``N >=
    0``, Newton's law ``G x - h >= 0`` with complementarity, every friction force in its
    cone, a sticking corner's slip zero and a sliding corner's friction against its slip
    (its direction to 1e-6: the slip is 2e-8 m/s, resolved to rounding ~1e-16 / 2e-8)."""
    from gaussopt.gauss.contact_cone import solve_contact_cone

    d = json.loads((Path(__file__).parent / "data" / "edge_impact_cone.json").read_text())
    M, F, A, b, G, h, T, s, mu = (np.array(d[x], dtype=float)
                                  for x in ("M", "F", "A", "b", "G", "h", "T", "s", "mu"))
    sol = solve_contact_cone(M, F, A, b, G, h, T, s, mu=mu,
                             prefer=np.array(d["prefer"], dtype=int))
    x, N, t_, lam = sol.x, sol.nu, sol.tau, sol.lam
    scale = np.abs(F).max()
    resid = M @ x - F - A.T @ lam - G.T @ N - np.einsum("kjn,kj->n", T, t_)
    assert np.abs(resid).max() <= 1e-12 * scale
    assert np.abs(A @ x - b).max() <= 1e-12 * scale
    assert np.all(N > 0)
    gap = G @ x - h
    assert np.all(gap >= -1e-12) and np.abs(N * gap).max() <= 1e-12 * scale
    u = np.einsum("kjn,n->kj", T, x) - s
    for i in range(2):
        assert np.hypot(*t_[i]) <= mu[i] * N[i] * (1 + 1e-12)
        speed = np.hypot(*u[i])
        if speed > 1e-12:
            np.testing.assert_allclose(t_[i], -mu[i] * N[i] * u[i] / speed, rtol=0,
                                       atol=1e-6 * mu[i] * N[i])
    assert sum(np.hypot(*u[i]) > 1e-12 for i in range(2)) == 1   # one corner slides


def test_impact_of_a_face_landing_nearly_flat_with_rows_dependent_to_rounding(monkeypatch):
    """The velocity-level problem of a box's face landing nearly flat and turning
    (``tests/data/flat_landing_impact_cone.json``, floats written exactly: four corners,
    restitution 0.7, mu = 0.2, from a fuzzed MJCF drop). Two corners approach and rebound
    by Newton's law, the other two touch without approaching (``h = 0``): the four
    normal rows are dependent (the corners of a face), the right-hand sides are not, and
    three corners sticking makes rows dependent to the rank decision (the face tilted by
    ~1e-7) whose right-hand sides disagree by ~1e-8 m/s. The exact problem then has no
    certified answer (raised); with ``rhs_tol`` = 1e-8 m/s, below the driver's velocity
    tolerance ``1e3 (atol + rtol (1 + |v|))`` (2e-6 m/s at the defaults, what it already
    treats as rest), the right-hand sides are moved onto the rows' range and the answer is
    certified. Checked against the conditions themselves: momentum balance to the rounding
    of its terms (1e-12 of ``|F|``), ``N >= 0``, Newton's law with complementarity and
    every friction force in its cone exactly, the sticking corners' slips and the closed
    corners' rebounds within the 1e-8 moved.

    (That is with the polygon's LCP at its first compliance alone, and no finer polygon.
    Its retries at other compliances, ``_LCP_RETRIES``, read a state that certifies for the
    exact problem: the three corners sliding at slips below 2e-8 m/s, the same motion
    within what was moved: checked too.)"""
    import gaussopt.gauss.contact_cone as ccone
    from gaussopt.gauss.contact_cone import solve_contact_cone
    from gaussopt.gauss.contact_problem import ContactSolveError

    d = json.loads((Path(__file__).parent / "data" / "flat_landing_impact_cone.json")
                   .read_text())
    M, F, A, b, G, h, T, s, mu = (np.array(d[x], dtype=float)
                                  for x in ("M", "F", "A", "b", "G", "h", "T", "s", "mu"))
    kw = dict(mu=mu, prefer=np.array(d["prefer"], dtype=int))
    moved = 1e-8
    exact = solve_contact_cone(M, F, A, b, G, h, T, s, **kw)
    u = np.einsum("kjn,n->kj", T, exact.x) - s
    # (its slips: the moved problem's sticking corners' slips, 1e-8 at most, plus what
    # separates the two motions below; measured 1.7e-8)
    assert exact.active.sum() == 3 and np.hypot(u[:, 0], u[:, 1])[exact.active].max() < 2 * moved
    monkeypatch.setattr(ccone, "_LCP_RETRIES", ccone._LCP_RETRIES[:1])
    monkeypatch.setattr(ccone, "_POLYGON_REFINED", ())
    with pytest.raises(ContactSolveError, match="no set of active contact points"):
        solve_contact_cone(M, F, A, b, G, h, T, s, **kw)
    sol = solve_contact_cone(M, F, A, b, G, h, T, s, rhs_tol=moved, **kw)
    # the same motion: the two answers differ by what was moved (velocities, m/s), carried
    # to x by the impact problem's KKT solve, whose rows are the corners' unit-scaled
    # velocities (an O(1) gain here; measured 6.1e-9): 10x the moved 1e-8 as the bound
    assert np.abs(sol.x - exact.x).max() <= 10 * moved
    x, N, t_, lam = sol.x, sol.nu, sol.tau, sol.lam
    scale = np.abs(F).max()
    resid = M @ x - F - A.T @ lam - G.T @ N - np.einsum("kjn,kj->n", T, t_)
    assert np.abs(resid).max() <= 1e-12 * scale
    assert np.abs(A @ x - b).max() <= 1e-12 * scale
    assert np.all(N >= 0) and sol.active.sum() == 3
    gap = G @ x - h
    assert np.all(gap >= -moved)
    assert np.all(np.abs(gap[sol.active]) <= moved)       # closed: rebound as Newton asks
    assert np.all(gap[~sol.active] > 1e3 * moved)          # the open corner leaves
    u = np.einsum("kjn,n->kj", T, x) - s
    for i in np.flatnonzero(sol.active):
        assert np.hypot(*t_[i]) <= mu[i] * N[i]             # inside its cone
        assert np.hypot(*u[i]) <= 2 * moved                 # sticking, to what was moved


def _sliding_box_problem(c, mu, angles_deg):
    """A box (half sides 0.1, 0.15, ``c``, mass 1) flat on a floor in twist coordinates
    ``(v, w)`` at the identity, its four bottom corners sliding along the given
    directions: ``M, F, G, T, dirs``."""
    a, b, m = 0.1, 0.15, 1.0
    M = np.diag([m, m, m, m / 3 * (b * b + c * c), m / 3 * (a * a + c * c),
                 m / 3 * (a * a + b * b)])
    corners = np.array([[sx * a, sy * b, -c] for sx in (1, -1) for sy in (1, -1)])
    ez, ex, ey = np.eye(3)[2], np.eye(3)[0], np.eye(3)[1]
    G = np.array([np.r_[ez, np.cross(r, ez)] for r in corners])
    T = np.array([[np.r_[ex, np.cross(r, ex)], np.r_[ey, np.cross(r, ey)]] for r in corners])
    F = np.array([0.0, 0.0, -m * 9.81, 0.0, 0.0, 0.0])
    th = np.radians(angles_deg)
    return M, F, G, T, np.column_stack([np.cos(th), np.sin(th)])


def test_sliding_corners_whose_stiff_distribution_pulls_take_the_nearest_admissible_one():
    """Four corners of a tall box sliding in different directions (a box turning while
    it slides), mu = 1.07: the rigid model's admissible normal forces are an interval of
    the one combination that does no work on the normal motion (``N = N_p + s n``, all
    ``N >= 0``), its ends the two states with three corners carrying the box, each with
    its own motion. The distribution of equally stiff corners (no self-stress:
    ``N`` orthogonal to ``null(G^T)``) pulls on one corner here, so the state taken is the
    end of the interval nearest to it. Reference: the interval and its ends solved here
    from the Delassus system of the four corners at the fixed directions (numpy, no
    gaussopt); forces and accelerations to 1e-10 of their scales (rounding of 6 x 6
    solves)."""
    from gaussopt.gauss.contact_cone import solve_contact_cone

    M, F, G, T, dirs = _sliding_box_problem(0.14, 1.07, [140.0, 64.0, 116.0, 180.0])
    mu = np.full(4, 1.07)
    W = np.array([G[i] - mu[i] * dirs[i] @ T[i] for i in range(4)])
    Mi = np.linalg.inv(M)
    D = G @ Mi @ W.T                                  # gap acceleration per normal force
    Np = np.linalg.lstsq(D, -G @ Mi @ F, rcond=None)[0]
    n = np.linalg.svd(D)[2][-1]                       # the family's direction
    S = np.linalg.svd(G)[0][:, -1]                    # null(G^T): the self-stress
    s_star = -(S @ Np) / (S @ n)
    assert np.count_nonzero(Np + s_star * n < 0) == 1  # the stiff distribution pulls
    lo = max(-Np[i] / n[i] for i in range(4) if n[i] > 1e-12)
    hi = min(-Np[i] / n[i] for i in range(4) if n[i] < -1e-12)
    assert lo < hi                                    # an interval of admissible forces
    s_exp = lo if abs(lo - s_star) < abs(hi - s_star) else hi
    N_exp = Np + s_exp * n
    x_exp = Mi @ (F + W.T @ N_exp)
    other = Np + (hi if s_exp == lo else lo) * n
    assert np.abs(Mi @ W.T @ (other - N_exp)).max() > 0.1   # the two ends move differently
    sol = solve_contact_cone(M, F, np.zeros((0, 6)), np.zeros(0), G, np.zeros(4), T,
                             np.zeros((4, 2)), mu=mu, slide=dirs)
    # (rounding: M's condition number is 1e2, and the Delassus matrix's one null
    # direction, the self-stress, is set by the interval's end, not solved for; its other
    # three directions are well conditioned: ~1e2 * 1e-16 relative, far below 1e-10)
    np.testing.assert_allclose(sol.nu, N_exp, atol=1e-10 * 9.81)
    np.testing.assert_allclose(sol.x, x_exp, atol=1e-10 * np.abs(x_exp).max())
    assert np.count_nonzero(sol.active) == 3


def test_several_certified_motions_continue_the_previous_state_where_it_is_admissible():
    """A box on four corners, three sliding (directions given) and one at rest
    (``tests/data/three_sliding_one_resting_cone.json``, floats written exactly, from a
    fuzzed MJCF drop): two states with different motions satisfy every condition, the
    resting corner sticking with all four loaded (the previous state), or starting to
    slide while another corner lifts. Rigid Coulomb friction admits both; without
    ``persist`` the problem raises by name, with it (the contact run's events) the state
    that continues the previous one is taken. Checked against the conditions themselves:
    momentum balance to the rounding of its terms (1e-12 of ``|F|``), ``N >= 0``, every
    closed corner's gap acceleration zero and every friction force in its circular cone,
    the sliding corners' friction ``-mu N d`` along their given directions, the sticking
    corner's slip acceleration zero (rounding, 1e-12 of the accelerations' scale)."""
    from gaussopt.gauss.contact_cone import solve_contact_cone
    from gaussopt.gauss.contact_problem import STICK, ContactSolveError

    d = json.loads((Path(__file__).parent / "data" / "three_sliding_one_resting_cone.json")
                   .read_text())
    M, F, A, b, G, h, T, s, mu, slide = (np.array(d[x], dtype=float) for x in
                                         ("M", "F", "A", "b", "G", "h", "T", "s", "mu",
                                          "slide"))
    prefer = np.array(d["prefer"], dtype=int)
    with pytest.raises(ContactSolveError, match="admits more than one motion"):
        solve_contact_cone(M, F, A, b, G, h, T, s, mu=mu, slide=slide, prefer=prefer)
    sol = solve_contact_cone(M, F, A, b, G, h, T, s, mu=mu, slide=slide, prefer=prefer,
                             persist=True)
    x, N, t_, lam = sol.x, sol.nu, sol.tau, sol.lam
    assert sol.active.all()                                  # all four loaded
    resting = np.flatnonzero(~np.any(slide != 0, axis=1))
    assert [int(sol.mode[i]) for i in resting] == [STICK]    # the resting corner sticks
    scale = np.abs(F).max() + np.abs(M @ x).max()
    resid = M @ x - F - A.T @ lam - G.T @ N - np.einsum("kjn,kj->n", T, t_)
    assert np.abs(resid).max() <= 1e-12 * scale
    assert np.all(N >= 0) and np.abs(G @ x - h).max() <= 1e-12 * (1 + np.abs(x).max())
    u = np.einsum("kjn,n->kj", T, x) - s
    for i in range(4):
        assert np.hypot(*t_[i]) <= mu[i] * N[i] * (1 + 1e-12)
        if i in resting:
            assert np.abs(u[i]).max() <= 1e-12 * (1 + np.abs(x).max())
        else:
            np.testing.assert_allclose(t_[i], -mu[i] * N[i] * slide[i], rtol=0,
                                       atol=1e-12 * mu[i] * N[i])


def _recorded(name: str) -> tuple:
    """A contact problem recorded from a run (``data/<name>.json``): its arrays and the
    solver's keywords."""
    d = json.loads((Path(__file__).parent / "data" / f"{name}.json").read_text())
    arrays = tuple(np.array(d[x], dtype=float)
                   for x in ("M", "F", "A", "b", "G", "h", "T", "s", "mu"))
    kw = dict(mu=arrays[-1], prefer=np.array(d["prefer"], dtype=int), labels=d["labels"])
    if "slide" in d:
        kw["slide"] = np.array(d["slide"], dtype=float)
    if "weld" in d:
        kw["weld"] = np.array(d["weld"], dtype=bool)
    return arrays[:-1], kw, d


def _check_cone_solution(sol, M, F, A, b, G, h, T, s, mu, moved=0.0, slide=None):
    """The spatial contact problem's conditions on ``sol`` (at an impact: ``x`` the velocities
    after it, ``h`` Newton's targets): the balance ``M x - F = A^T lam + G^T N + T^T tau``
    to the rounding of its terms (1e-12 of ``|F|``), the bilateral rows, ``N >= 0`` with
    ``G x >= h`` and complementarity, every tangential force in its circular cone, a
    sliding point's exactly ``-mu N`` along its slip (or along ``slide``, its given
    direction), a sticking one's slip zero (rounding: 1e-12 of ``x`` and ``N``); the
    gaps' and slips' conditions within ``moved``, how far the solver may have moved their
    right-hand sides (``rhs_tol``). Returns the modes."""
    from gaussopt.gauss.contact_problem import OPEN

    x, N, tau, lam, mode = sol.x, sol.nu, sol.tau, sol.lam, sol.mode
    scale = np.abs(F).max()
    resid = M @ x - F - A.T @ lam - G.T @ N - np.einsum("kjn,kj->n", T, tau)
    assert np.abs(resid).max() <= 1e-12 * scale
    assert np.abs(A @ x - b).max() <= 1e-12 * scale
    gap = G @ x - h
    tol_v = 1e-12 * np.abs(x).max() + moved
    tol_p = 1e-12 * np.abs(N).max()
    assert np.all(N >= 0) and np.all(gap >= -tol_v)
    assert np.all((N <= tol_p) | (np.abs(gap) <= tol_v))            # complementarity
    u = np.einsum("kjn,n->kj", T, x) - s
    size = np.hypot(u[:, 0], u[:, 1])
    assert np.all(np.hypot(tau[:, 0], tau[:, 1]) <= mu * N + tol_p)
    for i in range(len(N)):
        given = slide is not None and np.any(slide[i] != 0)
        if mode[i] == OPEN:
            assert N[i] == 0 and np.all(tau[i] == 0) and gap[i] > -tol_v
        elif given:
            np.testing.assert_allclose(tau[i], -mu[i] * N[i] * slide[i], rtol=0, atol=tol_p)
        elif mode[i] == STICK:
            assert size[i] <= math.sqrt(2) * tol_v
        else:                                                          # sliding
            assert size[i] > 1e3 * (tol_v - moved)
            # (the slip is known to tol_v, its direction to tol_v / |u| on either side)
            np.testing.assert_allclose(tau[i], -mu[i] * N[i] * u[i] / size[i], rtol=0,
                                       atol=tol_p + 2 * mu[i] * N[i] * tol_v / size[i])
    return mode


def test_an_impact_of_nine_points_of_a_humanoid_is_certified_with_a_finer_polygon(monkeypatch):
    """dm_control's humanoid lying down (MJCF with its contacts, ``model.with_contacts()``
    from its initial state at the default tolerances): at t = 1.0595 s its hands land
    while its head, seat, thighs and upper arms touch the floor, an impact of 9 points
    with ``mu = 1`` and ``e = 0`` (the problem as the run posed it, recorded in
    ``data/humanoid_impact_cone.json``). No state read from the octagon's LCP certified at
    any compliance and 3^9 combinations are too many to try: the run ended there. The
    16-gon's reading certifies. Checked against the conditions themselves: momentum
    balance to the rounding of its terms (1e-12 of ``|F|`` ~ 6; measured 6e-15), the
    bilateral row, ``N >= 0`` with Newton's law ``G v+ >= h`` and complementarity, every
    tangential impulse in its circular cone, a sliding point's exactly ``-mu N u / |u|``
    along its slip after the impact (to the direction's rounding), a sticking one's slip
    zero (rounding: 1e-12 of the velocities ~3 and impulses ~1e-2). Exact (no
    ``rhs_tol``): the octagon alone reads no certified state."""
    import gaussopt.gauss.contact_cone as ccone
    from gaussopt.gauss.contact_cone import solve_contact_cone
    from gaussopt.gauss.contact_problem import OPEN, STICK, ContactSolveError

    d = json.loads((Path(__file__).parent / "data" / "humanoid_impact_cone.json").read_text())
    M, F, A, b, G, h, T, s, mu = (np.array(d[x], dtype=float)
                                  for x in ("M", "F", "A", "b", "G", "h", "T", "s", "mu"))
    kw = dict(mu=mu, prefer=np.array(d["prefer"], dtype=int), labels=d["labels"])
    with monkeypatch.context() as mp:
        mp.setattr(ccone, "_POLYGON_REFINED", ())
        with pytest.raises(ContactSolveError, match="Lemke's algorithm on the polyhedral"):
            solve_contact_cone(M, F, A, b, G, h, T, s, **kw)
    sol = solve_contact_cone(M, F, A, b, G, h, T, s, **kw)
    mode = _check_cone_solution(sol, M, F, A, b, G, h, T, s, mu)
    # the hands (closing) stick, the upper arms lift, the rest slides: what was read
    assert [d["labels"][i].split("/")[1][:-1] for i in np.flatnonzero(mode == STICK)] == [
        "right_hand", "left_hand"]
    # As the run poses it, its right-hand sides may move by the velocity tolerance
    # (``rhs_tol``, up to 1e-5 m/s): the octagon's reading certifies so, checked within
    # what was moved. Its seat's two points are open, approaching at 9.6e-7 m/s (at rest
    # for the run), where the exact answer slides them: the gap rates of the two answers
    # differ by that (less than ``rhs_tol``), the hands stick in both.
    tol = np.array(d["rhs_tol"])
    with monkeypatch.context() as mp:
        mp.setattr(ccone, "_POLYGON_REFINED", ())
        moved = solve_contact_cone(M, F, A, b, G, h, T, s, rhs_tol=tol, **kw)
    mode_m = _check_cone_solution(moved, M, F, A, b, G, h, T, s, mu, moved=float(tol.max()))
    np.testing.assert_array_equal(mode_m == STICK, mode == STICK)
    assert np.abs(G @ (moved.x - sol.x)).max() <= tol.max()



def test_a_quick_attempt_reads_the_octagon_only_and_says_so():
    """``quick=True`` (how the contact run tries an accumulation's end, a shortcut): the
    recorded humanoid impact above, whose octagon reads no certified state, raises a
    ContactSolveError that says so (the full search certifies the 16-gon's reading);
    with its right-hand sides movable (``rhs_tol``) the octagon's moved reading
    certifies, and the quick answer is the full search's, to the bit (the same reading
    of the same LCP)."""
    from gaussopt.gauss.contact_problem import ContactSolveError

    d = json.loads((Path(__file__).parent / "data" / "humanoid_impact_cone.json").read_text())
    M, F, A, b, G, h, T, s, mu = (np.array(d[x], dtype=float)
                                  for x in ("M", "F", "A", "b", "G", "h", "T", "s", "mu"))
    kw = dict(mu=mu, prefer=np.array(d["prefer"], dtype=int), labels=d["labels"])
    with pytest.raises(ContactSolveError, match="quick attempt"):
        solve_contact_cone(M, F, A, b, G, h, T, s, quick=True, **kw)
    full = solve_contact_cone(M, F, A, b, G, h, T, s, **kw)
    _check_cone_solution(full, M, F, A, b, G, h, T, s, mu)
    tol = np.array(d["rhs_tol"])
    quick = solve_contact_cone(M, F, A, b, G, h, T, s, rhs_tol=tol, quick=True, **kw)
    np.testing.assert_array_equal(
        quick.x, solve_contact_cone(M, F, A, b, G, h, T, s, rhs_tol=tol, **kw).x)
    _check_cone_solution(quick, M, F, A, b, G, h, T, s, mu, moved=float(tol.max()))

def test_the_cone_margin_of_a_humanoid_on_nine_points_is_solved_where_clarabel_stalls():
    """The largest margin of the indeterminate forces of dm_control's humanoid lying on 9
    sticking points (its phase at t = 1.1311 s; 34 forces, 8 free: ``data/
    humanoid_margin_socp.json``). Clarabel's defaults end the program with
    ``NumericalError`` after 3 iterations, which read as "no distribution inside the
    cones" and ended the run; its settings are changed in turn (``_SOCP_RETRIES``) and the
    program solves. Against the same program written in the free coordinates ``y`` and
    solved by SCS (another algorithm, a first-order splitting method, at eps 1e-10 of the
    force scale ~75: its error below 1e-8): the margins agree, and the distribution
    returned lies on ``z0 + Z y`` (rounding: 1e-12 of the scale) with its own margin equal
    to the one reported (Clarabel's tolerance, ``_SOCP_TOL`` = 1e-11 of the scale)."""
    cp = pytest.importorskip("cvxpy")
    from gaussopt.gauss.contact_cone import best_distribution, cone_slack

    d = json.loads((Path(__file__).parent / "data" / "humanoid_margin_socp.json").read_text())
    z0, Z = np.array(d["z0"]), np.array(d["Z"])
    points = [(n, tuple(t) if t is not None else None, mu, w) for n, t, mu, w in d["points"]]
    scale = np.abs(z0).max()
    val, z = best_distribution(z0, Z, points)
    assert val > 0                                   # the group holds
    assert np.abs(z - z0 - Z @ (Z.T @ (z - z0))).max() <= 1e-12 * scale
    assert abs(cone_slack(z, points) - val) <= 10 * 1e-11 * scale
    y, s = cp.Variable(Z.shape[1]), cp.Variable()
    zz = z0 + Z @ y
    cons = []
    for n_i, t_i, mu, weld in points:
        if not weld:
            cons.append(zz[n_i] >= s)
        if t_i is not None:
            cons.append(cp.SOC(mu * zz[n_i] - s, cp.hstack([zz[j] for j in t_i])))
    prob = cp.Problem(cp.Maximize(s), cons)
    prob.solve(solver="SCS", eps_abs=1e-10, eps_rel=1e-10, max_iters=200000)
    assert prob.status == "optimal"
    assert abs(float(s.value) - val) <= 1e-8 * scale


def test_a_humanoid_lying_on_nine_points_is_certified_with_its_rows_made_consistent():
    """MuJoCo's humanoid (``model/humanoid/humanoid.xml`` with its contacts, from its
    initial state at the default tolerances) lies on nine points at t = 0.9964 s: head
    sliding, seat, thighs, upper arms and hands at rest within the run's velocity tolerance
    (slips up to 8e-6 m/s, not zero). Its sticking rows are dependent and their
    acceleration-level right-hand sides disagree by 4e-9 m/s^2 (``sum c_k' J_k v``: the
    rows turn along the motion while their velocity residuals are not zero), so no
    combination with them closed is consistent, and the run ended there. The run now
    lets them move by ``rate * vel_tol`` (``contact_run._rhs_tolerance``: the rows'
    largest relative rate along the motion, 2.8e-3 /s at the thighs, times the largest
    velocity tolerance, 1.27e-5 m/s: 3.5e-8 m/s^2, recorded with the problem in
    ``data/humanoid_lying_cone.json``). Refused exactly; with the tolerance the polygon's
    reading certifies (head sliding on, every other point sticking), checked against the
    conditions with the right-hand sides moved by at most the tolerance."""
    from gaussopt.gauss.contact_problem import ContactSolveError

    (M, F, A, b, G, h, T, s), kw, d = _recorded("humanoid_lying_cone")
    with pytest.raises(ContactSolveError, match="Lemke's algorithm on the polyhedral"):
        solve_contact_cone(M, F, A, b, G, h, T, s, **kw)
    sol = solve_contact_cone(M, F, A, b, G, h, T, s, rhs_tol=lambda: d["rhs_tol"], **kw)
    mode = _check_cone_solution(sol, M, F, A, b, G, h, T, s, kw["mu"], moved=d["rhs_tol"],
                                slide=kw["slide"])
    assert list(mode) == [1] + [STICK] * 8


def test_a_humanoid_on_eleven_points_solves_each_combination_once_per_start():
    """MuJoCo's humanoid (``model/humanoid/humanoid.xml`` with its contacts, from its
    initial state at the default tolerances) touching the floor at eleven points during
    its 2 s run: a decision of the contact state (``data/humanoid_landing_cone.json``, the
    arguments as the run passed them). The octagon's readings certify none of the
    combinations they leave open; the 16-gon's own reading does. This one decision took
    10 s: the octagon's readings at the other compliances, exact and moved, asked for the
    same combinations again (168 solves of 66 combinations), their slide directions
    started from hints that differed by rounding, and every reading's 32 open
    combinations came before the next reading's own states. Checked: the state against
    the contact conditions (the right-hand sides moved by at most ``rhs_tol``), and that
    no combination is solved twice from the same start (hints within ``_HINT_SAME``,
    1e-2 rad; the 16-gon's differ from the octagon's by 0.2 rad)."""
    import gaussopt.gauss.contact_cone as ccone

    (M, F, A, b, G, h, T, s), kw, d = _recorded("humanoid_landing_cone")
    tol = np.array(d["rhs_tol"])
    solved = []
    inner = ccone._solve_mode_from

    def recorded(*args):
        mode, hint, tol_ = args[9], args[13], args[14]
        solved.append((np.asarray(mode).tobytes(), tol_ is None,
                       ccone._hint_angles(mode, hint)))
        return inner(*args)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ccone, "_solve_mode_from", recorded)
        sol = solve_contact_cone(M, F, A, b, G, h, T, s, rhs_tol=tol, persist=True, **kw)
    mode = _check_cone_solution(sol, M, F, A, b, G, h, T, s, kw["mu"], moved=tol.max(),
                                slide=kw["slide"])
    assert [d["labels"][i].split("/")[1][:-1] for i in np.flatnonzero(mode == SLIDE)] == [
        "thigh_right.1", "upper_arm_right.1", "hand_right", "upper_arm_left.1"]
    for j, (key, exact, start) in enumerate(solved):
        for key2, exact2, start2 in solved[:j]:
            assert not (key == key2 and exact == exact2 and (
                (start is None and start2 is None) or (
                    start is not None and start2 is not None and np.abs(
                        (start - start2 + np.pi) % (2 * np.pi) - np.pi).max() <= 1e-2)))


@pytest.mark.slow
def test_an_impact_of_thirteen_points_is_certified_one_mode_from_the_polygons_reading():
    """dm_control's humanoid (``suite/humanoid.xml`` with its contacts, from its initial
    state at the default tolerances) lands on its feet at t = 1.3191 s beside eleven other
    touching points: an impact of 13 points (``data/humanoid_feet_impact_cone.json``,
    3^13 combinations). No reading of the octagon's, 16-gon's or 32-gon's LCP certified,
    exactly or with the closed points' right-hand sides moved by the run's velocity
    tolerance (the seat's second point is read lifting; with the circular cones, exactly,
    it must slide), and the run ended there. The combinations one point's mode away from
    the readings were tried, best first: the one with that point sliding certified. Since
    an open point's row may move
    as far as a closed one's (``rhs_tol``), the octagon's reading itself certifies: the
    seat's second point open, approaching at 8.2e-8 m/s, within the 1e-5 m/s moved
    (checked against the conditions within what was moved). Posed exactly (no
    ``rhs_tol``), no reading certifies and the one-mode neighbour with that point sliding
    does, exactly (checked against the conditions without a move)."""
    import gaussopt.gauss.contact_cone as ccone

    (M, F, A, b, G, h, T, s), kw, d = _recorded("humanoid_feet_impact_cone")
    tol = np.array(d["rhs_tol"])
    sol = solve_contact_cone(M, F, A, b, G, h, T, s, rhs_tol=tol, **kw)
    mode = _check_cone_solution(sol, M, F, A, b, G, h, T, s, kw["mu"], moved=tol.max())
    assert [d["labels"][i].split("/")[1][:-1] for i in np.flatnonzero(mode == SLIDE)] == [
        "head", "butt.0", "right_thigh.1", "right_right_foot.0", "left_thigh.1",
        "left_left_foot.0", "right_hand", "left_hand"]
    found = []
    first = ccone._first_certified

    def recorded(*args, **kwargs):
        got = first(*args, **kwargs)
        found.append(got is not None)
        return got
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ccone, "_first_certified", recorded)
        exact = solve_contact_cone(M, F, A, b, G, h, T, s, **kw)
    # (the readings' calls fail; the neighbours', the last call, certifies)
    assert found[-1] and not any(found[:-1])
    mode = _check_cone_solution(exact, M, F, A, b, G, h, T, s, kw["mu"])
    assert [d["labels"][i].split("/")[1][:-1] for i in np.flatnonzero(mode == SLIDE)] == [
        "head", "butt.0", "butt.1", "right_thigh.1", "right_right_foot.0", "left_thigh.1",
        "left_left_foot.0", "right_hand", "left_hand"]
