"""Folded configurations of a redundant linkage: releases near a fold, starts at one.

The double parallelogram (:mod:`gaussopt_problems.double_parallelogram`) with unequal
cranks: at a folded configuration (``th = k pi``) its joint rows lose a direction
and the "shaky" mode (coupler turning about its middle, outer cranks turning
opposite ways) is free to first order, blocked only at second order. The Gauss
step restrains the dropped direction by the derivative of its row along the
motion (:func:`gaussopt.gauss.model_step.fold_rows`); the initial velocity at a fold
comes from the joints' second-order conditions
(:meth:`gaussopt.multibody.Model.velocities`).

References: the reduced one-DOF equation of the problem module (all cranks at the
same angle ``th``, the coupler translating; inertia ``(sum m_k / 3 + m_p) l^2``,
potential ``g l (sum m_k / 2 + m_p) sin th``), checked here against the energy of
the body-coordinate model along its own solution (a first integral computed from
the bodies, not from the reduced equation's coefficients). Tolerances:
``test_trajectory.integration_bound`` with the growth of the reduced flow
(``flow_growth``) and the reference's own error.
"""

from __future__ import annotations

import numpy as np
import pytest

import gaussopt as go
import gaussopt.multibody as mb
from test_trajectory import EPS, flow_growth, integration_bound

from gaussopt_problems import double_parallelogram as dp

#: the issue's failing case: released 3e-5 rad from the fold th = 0, unequal cranks
ISSUE_MASSES = [5.0, 0.2, 1.0]


def _growth(th0, w0, m_crank, t):
    """flow_growth of the reduced (th, th') equation with these crank masses."""
    return flow_growth(lambda y, ts: dp.reference(ts, th0=y[0], w0=y[1], m_crank=m_crank),
                       [th0, w0], t)


def _check_run(prob, th0, w0, m_crank, solver="closed_form", samples=151):
    """Run ``prob`` with its settings, on an output grid; th against the reference within
    the run's integration bound (dense output, the reduced flow's growth, the reference's
    error at 1e-13). Returns the error and the bound."""
    t_end = prob.t_span[1]
    tr = prob.simulate(solver=solver, t_eval=np.linspace(0.0, t_end, samples))
    assert tr.success, tr.message
    err = float(np.abs(prob.outputs(tr.q, tr.v)["th"] - prob.reference(tr.t)["th"]).max())
    bound = integration_bound(tr, _growth(th0, w0, m_crank, tr.t), dense=True, ref_tol=1e-13)
    return tr, err, bound


def test_reference_is_the_body_model_energy():
    """The reduced equation's inertia and potential against the body-coordinate model's
    energy on the parallelogram branch (unequal cranks): E(th, th') of the bodies equals
    1/2 I th'^2 + V(th) of the reduced equation, to the rounding of the sums (16 eps of
    their terms)."""
    mc, mp, l_ = np.array([2.3, 0.4, 1.1]), 1.7, 0.8
    model = dp.model(m_crank=mc, m_coupler=mp, l=l_)
    inertia = (mc.sum() / 3.0 + mp) * l_ * l_
    for th, w in ((0.4, -1.3), (-2.0, 0.7), (np.pi, 2.1)):
        q = dp.configuration(th, l=l_)
        v = model.velocities(q, {"crank1.phi": w})
        e0 = model.energy(0.0, q, np.zeros(12))            # the potential alone
        ek = model.energy(0.0, q, v) - e0
        pot = dp.G * l_ * (0.5 * mc.sum() + mp) * np.sin(th)
        assert ek == pytest.approx(0.5 * inertia * w * w, abs=16 * EPS * (1 + inertia * w * w))
        assert e0 == pytest.approx(pot, abs=16 * EPS * dp.G * (mc.sum() + mp) * (1 + l_))


def test_issue_case_released_near_a_fold():
    """The issue's case: released 3e-5 rad above the fold th = 0 with cranks 5, 0.2, 1 kg;
    it swings to th = -pi - 3e-5, 3e-5 past the other fold, and back. It used to end with
    success=True 3.14 rad off (the cranks stuck at -pi from t = 1.07 s); now within the
    integration bound of the reference (measured 2.6e-10)."""
    prob = dp.build(th0=3e-5, m_crank=ISSUE_MASSES, t_end=3.0)
    tr, err, bound = _check_run(prob, 3e-5, 0.0, ISSUE_MASSES)
    assert err < bound, (err, bound)
    # all three cranks at one angle (on the branch), at the sampled times
    q = tr.q
    assert np.abs(q[:, 5] - q[:, 2]).max() < bound and np.abs(q[:, 8] - q[:, 2]).max() < bound


@pytest.mark.parametrize("th0", [0.0, np.pi, 1e-9])
def test_start_at_a_fold(th0):
    """Released at rest at (or 1e-9 from) a folded configuration: the prescribed crank
    rate (zero) and the joints' second-order conditions fix the velocity (zero: the
    shaky mode at rest would violate them); the run follows the reference (it used to
    raise ModelError: rank 11 < n = 12)."""
    prob = dp.build(th0=th0, m_crank=ISSUE_MASSES, t_end=1.5)
    assert np.array_equal(prob.v0, np.zeros(12))
    tr, err, bound = _check_run(prob, th0, 0.0, ISSUE_MASSES)
    assert err < bound, (err, bound)


@pytest.mark.parametrize("th, w", [(0.0, 1.5), (np.pi, -2.0), (1e-9, 0.7)])
def test_velocities_at_a_fold_are_the_branch_tangent(th, w):
    """At a fold the crank rate and the joint rows leave the shaky direction free to first
    order; the second-order conditions give the parallelogram velocity w dq/dth (all
    cranks at rate w, the coupler translating), to the rounding of the rows (64 eps |w|:
    the quadratic's coefficients are differences of O(|w|^2) terms)."""
    model = dp.model(m_crank=ISSUE_MASSES)
    q = dp.configuration(th)
    c, s = np.cos(th), np.sin(th)
    tangent = np.array([-0.5 * s, 0.5 * c, 1.0] * 3 + [-s, c, 0.0])
    v = model.velocities(q, {"crank1.phi": w})
    assert np.abs(v - w * tangent).max() < 64 * EPS * abs(w)


def test_velocities_at_a_fold_of_a_single_parallelogram_are_ambiguous():
    """Two cranks only: at the fold both the parallelogram and the anti-parallelogram
    branch pass with the prescribed crank rate; no second-order condition tells them
    apart, so the velocity is refused with the reason."""
    cranks = [mb.Body.uniform_rod(f"crank{k + 1}", 1.0, 1.0) for k in range(2)]
    coupler = mb.Body.uniform_rod("coupler", 2.0, 2.0)
    joints = []
    for k, c in enumerate(cranks):
        joints += [mb.Revolute(None, (2.0 * k, 0.0), c, (-0.5, 0.0)),
                   mb.Revolute(c, (0.5, 0.0), coupler, (2.0 * k - 1.0, 0.0))]
    model = mb.Model(cranks + [coupler], joints, gravity=(0.0, -dp.G))
    q = np.array([0.5, 0.0, 0.0, 2.5, 0.0, 0.0, 2.0, 0.0, 0.0])      # folded: all on the x-axis
    assert np.abs(model.phi(0.0, q)).max() == 0.0
    with pytest.raises(go.ModelError, match=r"rank 8 < n = 9.*2 of the branches through it take these values"):
        model.velocities(q, {"crank1.phi": 1.0})
    # prescribing the second crank's rate too selects one (the anti-parallelogram here)
    v = model.velocities(q, {"crank1.phi": 1.0, "crank2.phi": -1.0})
    assert v[5] == pytest.approx(-1.0, abs=16 * EPS)


def test_gauss_step_from_rest_at_the_exact_fold():
    """At rest exactly folded, unequal cranks: both dropped directions are at the rounding
    floor; the branch through the fold is the direction of the null space where the
    rows' second-order forms vanish, and the step is the parallelogram acceleration
    (thdd dq/dth). Tolerance: the forms' rounding (their terms ~|b(q, x)| for unit x,
    relative 1e-6 accepted on the direction) is far below the check's 16 eps of the
    reference's terms plus the verified step's bound; 1e-12 |a| covers both."""
    model = dp.model(m_crank=[1.7, 1.0, 0.6])
    q = dp.configuration(0.0)
    t_ = np.array([0.0, 0.5, 1.0] * 3 + [0.0, 1.0, 0.0])       # d q / d th at th = 0
    M, F = model.mass_matrix, model.force(0.0, q, np.zeros(12))
    a_ref = (t_ @ F) / (t_ @ M @ t_) * t_
    step = go.solve_step(model.system, 0.0, q, np.zeros(12))
    assert step.info["rank"] == 10
    assert np.abs(step.a - a_ref).max() < 1e-12 * np.abs(a_ref).max()


def _sweep_cases():
    """Releases within 1e-7..1e-4 rad of a fold (issue masses), and random asymmetric
    crank masses (0.2..5 kg, seeded) released 1, 3, 5e-5 rad from th = 0, with both
    direct solvers."""
    cases = []
    for d in (1e-7, 1e-6, 1e-5, 1e-4):
        for th0 in (d, -d, np.pi - d):
            cases.append(("closed_form", th0, ISSUE_MASSES))
    masses = np.random.default_rng(2026).uniform(0.2, 5.0, size=(8, 3))
    for solver in ("closed_form", "lagrange"):
        for mc in masses:
            for th0 in (1e-5, 3e-5, 5e-5):
                cases.append((solver, th0, mc.tolist()))
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("solver, th0, m_crank", _sweep_cases())
def test_fold_sweep(solver, th0, m_crank):
    """3 s from rest near a fold (two turns close to the folds): every run ends, on the
    reference within its integration bound (measured worst 7.4e-7 rad; before the fold
    rows 41 of 60 such runs were off by more than 1e-6 rad, up to 0.04, with
    success=True)."""
    prob = dp.build(th0=th0, m_crank=m_crank, t_end=3.0)
    tr, err, bound = _check_run(prob, th0, 0.0, m_crank, solver=solver)
    assert err < bound, (err, bound)


def test_a_fold_at_absurd_scales_is_still_the_parallelogram_motion():
    """The stages of a trial step far off the motion reach absurd states (dm_control's
    stacker: positions 8e69, velocities 2e142, accelerations 9e283, before error control
    rejects the step); the fold's finite-difference step ``h`` multiplied two of them,
    overflowed, became 0 and the run died with ``ZeroDivisionError`` inside the compiled
    engine. At the exact fold, every body shifted by 1e25 m (the rows depend on the
    angles only) and moving along the parallelogram branch at rate ``s = 1e145``: the
    step is the branch's centripetal acceleration ``-s^2 r`` of each point at radius ``r``
    (crank centres at 0.5, the coupler at 1: closed form; gravity is 1e-290 of it), to
    rounding (1e-12)."""
    model = dp.model(m_crank=[1.7, 1.0, 0.6])
    q = dp.configuration(0.0)
    q[[0, 1, 3, 4, 6, 7, 9, 10]] += 1e25
    t_ = np.array([0.0, 0.5, 1.0] * 3 + [0.0, 1.0, 0.0])       # d q / d th at th = 0
    s = 1e145
    step = go.solve_step(model.system, 0.0, q, s * t_)
    want = np.array([-0.5, 0.0, 0.0] * 3 + [-1.0, 0.0, 0.0])
    assert step.info["rank"] == 10
    np.testing.assert_allclose(step.a / s ** 2, want, rtol=0, atol=1e-12)
