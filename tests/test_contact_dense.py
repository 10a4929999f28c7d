"""The dense output of a contact run (``dense_output=True``: ``traj.sol``, the phases'
dense solutions in turn) against the bouncing ball's piecewise analytic motion, and
user ``events`` refused by name.

Measured (DOP853, rtol = atol = 1e-12): sol(t) within 1.4e-14 of y(t), 2.2e-13 of
y'(t) and 1.1e-15 of x(t) at 2001 times over 3 s.
"""

from __future__ import annotations

import numpy as np
import pytest

import gaussopt as go
from gaussopt import ContactDenseSolution
from gaussopt.core.exceptions import ModelError
from gaussopt_problems import bouncing_ball
from test_trajectory import EPS


@pytest.fixture(scope="module")
def ball():
    p = bouncing_ball.build()
    return p, p.simulate(dense_output=True)


def test_ball_dense_output_follows_the_analytic_flights(ball):
    p, tr = ball
    assert tr.success and isinstance(tr.sol, ContactDenseSolution)
    assert tr.sol.t_min == 0.0 and tr.sol.t_max == p.t_span[1]
    assert len(tr.sol.phases) == tr.stats["phases"]
    t = np.linspace(*p.t_span, 2001)
    q, v = tr.sol(t)
    ref = p.reference(t)
    # the flights are quadratics, which DOP853 and its order-7 interpolant reproduce
    # exactly: rounding only, as the step outputs of test_contact (1e-12 there, measured
    # 1.4e-14); off the impacts (at one, the reference is the state before it)
    off = ~np.isin(t, [im.t for im in tr.impacts])
    assert np.abs(q[:, 1] - ref["y"]).max() < 1e-12
    assert np.abs(v[off, 1] - ref["vy"][off]).max() < 1e-11
    # frictionless: x = vx t exactly up to rounding of the products
    assert np.abs(q[:, 0] - ref["x"]).max() < 64 * EPS * p.t_span[1] * p.params["vx"]


def test_ball_dense_output_is_the_samples_at_the_steps_and_after_an_impact(ball):
    p, tr = ball
    # at the accepted steps the stored states, exactly; at an impact time (two samples,
    # before and after) the state after it: the dense solution is continuous from the right
    t_imp = np.array([im.t for im in tr.impacts])
    steps = ~np.isin(tr.t, t_imp)
    q, v = tr.sol(tr.t[steps])
    assert np.array_equal(q, tr.q[steps]) and np.array_equal(v, tr.v[steps])
    im = tr.impacts[0]
    qi, vi = tr.sol(im.t)
    after = np.flatnonzero(tr.t == im.t)[-1]
    assert qi.shape == (2,) and np.array_equal(vi, tr.v[after])
    assert vi[1] == pytest.approx(-p.params["e"] * im.gap_rate_before[0], rel=64 * EPS)


def test_contact_dense_output_refuses_times_outside_the_run(ball):
    _, tr = ball
    with pytest.raises(ModelError, match="within the computed span"):
        tr.sol(3.5)
    with pytest.raises(ModelError, match="1-D array"):
        tr.sol(np.zeros((2, 2)))


def test_contact_runs_refuse_user_events_even_empty():
    ball = bouncing_ball.build().system
    with pytest.raises(ModelError, match="`events` is not supported with contacts yet, found"):
        go.simulate(ball, (0.0, 1.0), [0.0, 1.0], [0.0, 0.0], events=[])
    tr = go.simulate(ball, (0.0, 0.1), [0.0, 1.0], [0.0, 0.0], dense_output=False)
    assert tr.sol is None
