"""The tippe top (problems/tippe_top.py, Leine and Glocker's parameters) against the
Newton-Euler equations of the sliding and of the rolling top (tests/tippe_top_reference.py,
written without gaussopt).

gaussopt runs at rtol = atol = 1e-12: about 650 steps, so the state errs by the local errors
summed (~1e-9 of the spin rate's scale, ~1e-12 m in the positions); the stop is located to
rounding in a step of the slip (``u . d`` crossing zero at 0.8 m/s^2: 1e-12 s from a slip
error of 1e-12 m/s), so the event time agrees within 1e-9 relative and the states within
1e-8 (their scale: 1e-8 m, 1e-8 m/s, 1e-8 rad/s times the spin rate's ~100 for the angular
velocity).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gaussopt as go
from gaussopt.study.registry import get_problem
from tippe_top_reference import (PARAMETERS, SPIN, T_END, THETA0, g, m, mu, reference, rolling,
                                 rot, sliding, state_of)


def test_the_problem_has_leine_and_glockers_parameters():
    assert get_problem("tippe_top").PARAMETERS == PARAMETERS


def assert_state(y, y_ref, what):
    # positions and velocities of the centroid [m, m/s], Euler parameters, body angular
    # velocity [rad/s] at ~100x the others' scale
    np.testing.assert_allclose(y[:6], y_ref[:6], rtol=0, atol=1e-8, err_msg=what)
    np.testing.assert_allclose(y[6:10], y_ref[6:10], rtol=0, atol=1e-8, err_msg=what)
    np.testing.assert_allclose(y[10:13], y_ref[10:13], rtol=0, atol=1e-6, err_msg=what)


@pytest.fixture(scope="module")
def ref():
    return reference()


# (about 25 s of run and 10 s of reference on two shared cores: with the slow tests)
@pytest.fixture(scope="module")
def run():
    pb = get_problem("tippe_top").build(theta0=THETA0, spin=SPIN, t_end=T_END)
    tr = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, rtol=1e-12, atol=1e-12)
    return pb, tr


@pytest.mark.slow
def test_tippe_top_slides_tips_and_rolls_as_its_newton_euler_equations(run, ref):
    pb, tr = run
    assert tr.success, tr.message
    ts, s1, s2 = ref
    trans = tr.meta["contact_transitions"]
    # the sphere closes sliding and sticks (rolls) where its slip stops; the stem stays open
    assert [(p, lab) for _, p, lab in trans] == [("contacts[floor/sphere]", "close slide"),
                                                 ("contacts[floor/sphere]", "stick")]
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


@pytest.mark.slow
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


@pytest.mark.slow
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
