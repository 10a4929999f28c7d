"""The tippe top (problems/tippe_top.py, Leine and Glocker's parameters) against the
Newton-Euler equations of the sliding and of the rolling top written here, without gaussopt.

The top is a rigid body (mass ``m``, centroid ``x``, rotation ``R`` from Euler parameters,
body angular velocity ``w``, inertia ``J = diag(A, A, C)`` about the centroid) touching the
floor at the lowest point of its sphere, ``rho = R (0, 0, a) - r e_z`` from the centroid:

* sliding: the contact force is ``N (e_z - mu u/|u|)`` with ``u`` the contact point's
  velocity ``v + R w x rho`` (horizontal); ``m x'' = f - m g e_z``, ``J w' + w x J w =
  R^T (rho x f)``; ``N`` from the sphere's centre staying at height ``r`` (its second
  derivative, linear in ``N``). It ends where ``u`` vanishes (``|u|`` falls to 1e-11 m/s:
  1.3e-11 s early at the slip's deceleration of 0.8 m/s^2).
* rolling: the contact point's velocity stays zero, ``v + R w x rho = 0``; its derivative
  ``x'' + (R w') x rho + (R w) x ((R w) x R (0, 0, a)) = 0`` (``rho' = (R w) x R (0, 0,
  a)``: the contact point moves over the sphere) gives the three components of the contact
  force (one linear solve); the force must stay inside the cone, ``|f_t| <= mu f_n``.

scipy's DOP853 integrates both at rtol = 1e-13. gaussopt runs at rtol = atol = 1e-12:
about 650 steps, so the state errs by the local errors summed (~1e-9 of the spin rate's
scale, ~1e-12 m in the positions); the stop is located to rounding in a step of the slip
(``u . d`` crossing zero at 0.8 m/s^2: 1e-12 s from a slip error of 1e-12 m/s), so the
event time agrees within 1e-9 relative and the states within 1e-8 (their scale: 1e-8 m,
1e-8 m/s, 1e-8 rad/s times the spin rate's ~100 for the angular velocity).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.study.registry import get_problem

P = get_problem("tippe_top").PARAMETERS
m, r, a, A, C, mu, g = (P[k] for k in ("m", "r", "a", "A", "C", "mu", "g"))
J = np.diag([A, A, C])
J_INV = np.linalg.inv(J)
EZ = np.array([0.0, 0.0, 1.0])
THETA0, SPIN, T_END = 0.1, 180.0, 1.2


def rot(e):
    e0, e1, e2, e3 = e / np.linalg.norm(e)
    return np.array([[1 - 2 * (e2 * e2 + e3 * e3), 2 * (e1 * e2 - e0 * e3), 2 * (e1 * e3 + e0 * e2)],
                     [2 * (e1 * e2 + e0 * e3), 1 - 2 * (e1 * e1 + e3 * e3), 2 * (e2 * e3 - e0 * e1)],
                     [2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1), 1 - 2 * (e1 * e1 + e2 * e2)]])


def e_rate(e, w_body):
    """``e' = 1/2 e (x) (0, w)`` for the body angular velocity ``w``."""
    e0, e1, e2, e3 = e
    w1, w2, w3 = w_body
    return 0.5 * np.array([-e1 * w1 - e2 * w2 - e3 * w3, e0 * w1 + e2 * w3 - e3 * w2,
                           e0 * w2 + e3 * w1 - e1 * w3, e0 * w3 + e1 * w2 - e2 * w1])


def geometry(y):
    """``(R, omega_world, s, rho, u)``: s = R (0, 0, a) (centroid to the sphere's centre)."""
    v, e, w = y[3:6], y[6:10], y[10:13]
    R = rot(e)
    s = R @ np.array([0.0, 0.0, a])
    rho = s - r * EZ
    om = R @ w
    return R, om, s, rho, v + np.cross(om, rho)


def motion(R, w, f):
    """``(x'', w')`` under the contact force ``f`` at rho and gravity."""
    return f / m - g * EZ, J_INV @ (R.T @ f - np.cross(w, J @ w))


def sliding(y):
    """``(N, x'', w', u)`` of the sliding top."""
    R, om, s, rho, u = geometry(y)
    w = y[10:13]
    d = np.array([u[0], u[1], 0.0]) / math.hypot(u[0], u[1])
    f1 = EZ - mu * d
    a0, w0 = motion(R, w, np.zeros(3))
    w0 = J_INV @ (-np.cross(w, J @ w))
    aN, wN = f1 / m, J_INV @ (R.T @ np.cross(rho, f1))
    # the sphere's centre x + s stays at height r: (x + s)_z'' = 0, linear in N
    c0 = a0[2] + np.cross(R @ w0, s)[2] + np.cross(om, np.cross(om, s))[2]
    cN = aN[2] + np.cross(R @ wN, s)[2]
    N = -c0 / cN
    return N, a0 + N * aN, w0 + N * wN, u


def rolling(y):
    """``(f, x'', w')`` of the rolling top (f the contact force)."""
    R, om, s, rho, _ = geometry(y)
    w = y[10:13]

    def slip_rate(f):
        acc = f / m - g * EZ
        wd = J_INV @ (R.T @ np.cross(rho, f) - np.cross(w, J @ w))
        return acc + np.cross(R @ wd, rho) + np.cross(om, np.cross(om, s))
    b = slip_rate(np.zeros(3))
    K = np.column_stack([slip_rate(col) - b for col in np.eye(3)])
    f = np.linalg.solve(K, -b)
    acc = f / m - g * EZ
    return f, acc, J_INV @ (R.T @ np.cross(rho, f) - np.cross(w, J @ w))


def rhs_sliding(t, y):
    _, acc, wd, _ = sliding(y)
    return np.concatenate([y[3:6], acc, e_rate(y[6:10], y[10:13]), wd])


def rhs_rolling(t, y):
    _, acc, wd = rolling(y)
    return np.concatenate([y[3:6], acc, e_rate(y[6:10], y[10:13]), wd])


@pytest.fixture(scope="module")
def ref():
    """``(t_stop, sliding solution, rolling solution)``."""
    e0 = np.array([math.cos(THETA0 / 2), 0.0, math.sin(THETA0 / 2), 0.0])
    y0 = np.concatenate([[0.0, 0.0, r - a * math.cos(THETA0)], np.zeros(3), e0,
                         rot(e0).T @ np.array([0.0, 0.0, SPIN])])

    def stop(t, y):
        u = geometry(y)[4]
        return math.hypot(u[0], u[1]) - 1e-11
    stop.terminal, stop.direction = True, -1

    def cone(t, y):
        f = rolling(y)[0]
        return mu * f[2] - math.hypot(f[0], f[1])
    cone.terminal, cone.direction = True, -1
    kw = dict(method="DOP853", rtol=1e-13, atol=1e-15, dense_output=True)
    s1 = solve_ivp(rhs_sliding, (0.0, T_END), y0, events=stop, **kw)
    assert s1.status == 1
    ts = float(s1.t_events[0][0])
    s2 = solve_ivp(rhs_rolling, (ts, T_END), s1.y_events[0][0], events=cone, **kw)
    assert s2.status == 0                  # rolls on: the friction stays inside its cone
    return ts, s1, s2


def state_of(q, v):
    """The reference's state ``(x, v, e, w_body)`` of gaussopt's ``(q, v)`` (the free joint:
    position, Euler parameters and their rates)."""
    e, de = q[3:7], v[3:7]
    e0, e1, e2, e3 = e / np.linalg.norm(e)
    d0, d1, d2, d3 = de / np.linalg.norm(e)
    w_body = 2 * np.array([e0 * d1 - e1 * d0 - e2 * d3 + e3 * d2,
                           e0 * d2 - e2 * d0 - e3 * d1 + e1 * d3,
                           e0 * d3 - e3 * d0 - e1 * d2 + e2 * d1])
    return np.concatenate([q[:3], v[:3], e, w_body])


def assert_state(y, y_ref, what):
    # positions and velocities of the centroid [m, m/s], Euler parameters, body angular
    # velocity [rad/s] at ~100x the others' scale
    np.testing.assert_allclose(y[:6], y_ref[:6], rtol=0, atol=1e-8, err_msg=what)
    np.testing.assert_allclose(y[6:10], y_ref[6:10], rtol=0, atol=1e-8, err_msg=what)
    np.testing.assert_allclose(y[10:13], y_ref[10:13], rtol=0, atol=1e-6, err_msg=what)


# about 25 s of run and 10 s of reference on two shared cores: with the slow tests
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run():
    pb = get_problem("tippe_top").build(theta0=THETA0, spin=SPIN, t_end=T_END)
    tr = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, rtol=1e-12, atol=1e-12)
    return pb, tr


def test_tippe_top_slides_tips_and_rolls_as_its_newton_euler_equations(run, ref):
    pb, tr = run
    assert tr.success, tr.message
    ts, s1, s2 = ref
    trans = tr.meta["contact_transitions"]
    # the sphere closes sliding and sticks (rolls) where its slip stops; the stem stays open
    assert [(p, lab) for _, p, lab in trans] == [("contacts[0]", "close slide"),
                                                 ("contacts[0]", "stick")]
    # the reference stops where |u| = 1e-11 m/s: 1.3e-11 s before the slip's zero
    assert trans[1][0] == pytest.approx(ts, rel=1e-9, abs=0)
    y_stop = state_of(*np.split(tr.meta["contact_transition_states"][1], 2))
    assert_state(y_stop, s1.y_events[0][0], "state where the slip stops")
    # mid-slide and the end, rolling
    mid = np.flatnonzero(tr.t < 0.5 * ts)[-1]
    assert_state(state_of(tr.q[mid], tr.v[mid]), s1.sol(tr.t[mid]), "mid-slide")
    assert tr.t[-1] == T_END
    assert_state(state_of(tr.q[-1], tr.v[-1]), s2.y[:, -1], "rolling, at the end")
    # the top has tipped from 0.1 rad to 2.37 rad; the slide turned its spin from 180 to
    # 118 rad/s about the vertical
    o = pb.outputs(tr.q, tr.v)
    R_end = rot(s2.y[6:10, -1])
    assert o["theta"][-1] == pytest.approx(math.acos(R_end[2, 2]), abs=1e-8)
    assert o["w_z"][-1] == pytest.approx((R_end @ s2.y[10:13, -1])[2], abs=1e-6)


def test_tippe_top_forces_against_the_reference(run, ref):
    """The normal force while sliding (the reference's N), Coulomb's law against the slip
    while sliding, and the rolling force inside its cone; the stem carries nothing."""
    pb, tr = run
    ts, s1, s2 = ref
    scale = 1e-8 * m * g
    N = tr.contact_forces[:, 0]
    fr = tr.friction_forces[:, 0]
    assert np.all(tr.contact_forces[:, 1] == 0.0)
    slide = np.flatnonzero((tr.t > 0) & (tr.t < ts * (1 - 1e-6)))
    for i in slide[::10]:
        Nr, _, _, u = sliding(s1.sol(tr.t[i]))
        assert N[i] == pytest.approx(Nr, abs=scale)
        d = u[:2] / math.hypot(u[0], u[1])
        np.testing.assert_allclose(fr[i], -mu * Nr * d, rtol=0, atol=scale)
    roll = np.flatnonzero(tr.t > ts * (1 + 1e-6))
    assert roll.size > 10
    for i in roll[::10]:
        f = rolling(s2.sol(tr.t[i]))[0]
        assert N[i] == pytest.approx(f[2], abs=scale)
        np.testing.assert_allclose(fr[i], f[:2], rtol=0, atol=scale)
    assert np.all(np.hypot(fr[roll, 0], fr[roll, 1]) <= mu * N[roll])


def test_rolling_tippe_top_keeps_its_energy(run):
    """Rolling without slip does no work: the energy after the stop stays constant (a
    conservation law, not the reference); sliding dissipated mu N |u| per unit time."""
    pb, tr = run
    ts = tr.meta["contact_transitions"][1][0]
    E = np.array([pb.system.energy(t, q, v) for t, q, v in zip(tr.t, tr.q, tr.v)])
    roll = tr.t > ts
    # energy ~ 1/2 C w^2 = 1.1e-2 J; the state's error 1e-9 relative
    assert np.ptp(E[roll]) <= 1e-9 * abs(E[0])
    assert E[roll][0] < E[0] * 0.9
