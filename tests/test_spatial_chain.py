"""The spatial chain (problems/spatial_chain.py): a large spatial open chain against its
own joint-space reference (CRBA + RNEA in numpy), against Pinocchio, through the sparse
O(n) step (N = 10, 70 coordinates) and the dense kernel (N = 3, 21 coordinates)."""

from __future__ import annotations

import numpy as np
import pytest

import gaussopt as go
from gaussopt_problems import spatial_chain as sc

L, M, R, G = 0.5, 1.0, 0.02, 9.81
EPS = np.finfo(float).eps


def _states(N: int, count: int = 20, seed: int = 0):
    """Random joint angles in (-pi, pi) and rates in (-3, 3) rad/s."""
    rng = np.random.default_rng(seed)
    return [(rng.uniform(-np.pi, np.pi, N), rng.uniform(-3.0, 3.0, N)) for _ in range(count)]


def test_forward_dynamics_matches_pinocchio_aba():
    pin = pytest.importorskip("pinocchio")
    N = 10
    model = sc.pinocchio_model(N, L, M, R, G)
    data = model.createData()
    for th, dth in _states(N, seed=1):
        ref = pin.aba(model, data, th, dth, np.zeros(N))
        ours = sc.forward_dynamics(th, dth, N, L, M, R, G)
        # two independent O(N) / O(N^3) evaluations of M^-1 (Q): each carries
        # ~cond(M) eps |theta''| with cond(M) <= 3e2 for these rods (measured 2.4e2),
        # i.e. <= 7e-14; measured 9e-15. Bound 1e-12 (the brief's) holds with margin.
        assert np.linalg.norm(ours - ref) <= 1e-12 * np.linalg.norm(ref)


@pytest.mark.parametrize("N, sparse", [(10, True), (3, False)])
def test_step_matches_joint_space_reference(N, sparse):
    problem = sc.build(N=N)
    system = problem.model.system
    assert system.n == 7 * N
    for th, dth in _states(N, seed=2):
        q, v = sc.state(th, dth, L)
        step = go.solve_step(system, 0.0, q, v)
        if sparse and not step.info["sparse"]:
            import gaussopt.gauss.band_step
            pytest.fail(f"the O(n) path did not answer at theta = {th.tolist()}: "
                        f"statuses {gaussopt.gauss.band_step.STATUS}")
        assert bool(step.info["sparse"]) is sparse     # N = 3 (21 < MIN_N = 30): dense
        acc = sc.joint_accelerations(q, v, step.a)
        ref = sc.forward_dynamics(th, dth, N, L, M, R, G)
        # both sides solve systems with cond ~ 1e2..1e3 (the chain's joint-space M, and
        # the Gauss step's verified backward error ~1e-15 times its conditioning), plus
        # the quaternion round trip (a few eps): ~1e3 eps ~ 2e-13; measured 1.5e-14
        # (N = 10) and 2.4e-15 (N = 3). Bound 1e-12.
        assert np.linalg.norm(acc - ref) <= 1e-12 * np.linalg.norm(ref)


def test_state_round_trip_and_energy():
    N = 6
    for th, dth in _states(N, count=5, seed=3):
        q, v = sc.state(th, dth, L)
        # arctan2 of rotation entries built by a few products: a few eps
        assert np.max(np.abs(sc.joint_angles(q) - th)) <= 1e-14
        # v is the time derivative of q: central differences along the motion
        # (Euler parameters chosen with e0 >= 0; these states keep e0 away from 0)
        h = 1e-6
        qp, _ = sc.state(th + h * dth, dth, L)
        qm, _ = sc.state(th - h * dth, dth, L)
        fd = (qp - qm) / (2 * h)
        # truncation h^2 |q'''| / 6 ~ 1e-12 * 27, rounding eps |q| / h ~ 1e-9: bound 1e-8
        assert np.max(np.abs(fd - v)) <= 1e-8 * max(1.0, np.max(np.abs(v)))
    problem = sc.build(N=N, theta0=th, dtheta0=dth)
    E_model = problem.model.energy(0.0, problem.q0, problem.v0)
    # same sum of 0.5 m v^2 + 0.5 w.I w + m g z, written twice: rounding only
    assert abs(E_model - sc.energy(th, dth, L, M, R, G)) <= 1e-12 * abs(E_model)


def _run(N: int, t_end: float, r: float = R):
    """The problem's run (its settings) against its reference: the largest joint-angle
    error [rad], the largest relative energy change, and the run's stats."""
    problem = sc.build(N=N, t_end=t_end, r=r)
    t = np.linspace(0.0, t_end, 51)
    res = go.simulate(problem.system, (0.0, t_end), problem.q0, problem.v0, t_eval=t,
                      **problem.settings)
    assert res.success, res.message
    ref = problem.reference(res.t)
    theta = sc.joint_angles(res.q)
    err = max(np.max(np.abs(theta[:, k] - ref[f"theta{k}"])) for k in range(N))
    E = np.array([problem.model.energy(0.0, q, v) for q, v in zip(res.q, res.v)])
    return err, np.max(np.abs(E - E[0])) / abs(E[0]), res.stats


def test_run_matches_reference():
    # problem settings: DOP853 at rtol = atol = 1e-10, projection. N = 5 (35 coordinates)
    # for 1 s: a global error ~ 10-100 rtol on angles of O(1) rad, the reference at
    # 1e-12; measured 1.9e-10 rad, energy drift 1.3e-10 relative. Bounds 1e-8 rad, 1e-8.
    err, drift, _ = _run(5, 1.0)
    assert err <= 1e-8
    assert drift <= 1e-8


def test_run_of_thick_rods_takes_the_sparse_path():
    # r = 0.1 (axial moment 1/4 of the transverse one): every right-hand side of the run
    # is answered by the O(n) path; same settings and estimate as above (measured
    # 3.4e-10 rad and 3.6e-11 relative energy drift over 0.5 s, 250 of 250 sparse).
    err, drift, stats = _run(6, 0.5, r=0.1)
    assert stats["sparse_steps"] == stats["rhs_evaluations"]
    assert err <= 1e-8
    assert drift <= 1e-8


def test_run_of_slender_rods_takes_the_sparse_path():
    """Slender rods (r = 0.02: axial moment 1e-2 of the transverse one) make S = An H^-1 An^T
    ill-conditioned; the band's refinement, preconditioned by the factor of S itself,
    still verifies (it failed while it was preconditioned by the certification's
    shifted factor, whose shift grows with the run's sig_ref ~0.1)."""
    _, _, stats = _run(6, 0.2)
    assert stats["sparse_steps"] >= stats["rhs_evaluations"] // 2


@pytest.mark.slow
def test_run_matches_reference_n10():
    # N = 10 (70 coordinates) for 2 s, same settings and estimate as above; measured
    # 1.7e-10 rad and 6e-11 relative energy drift (the reference alone takes ~6 s).
    err, drift, _ = _run(10, 2.0)
    assert err <= 1e-8
    assert drift <= 1e-8


def test_hard_configurations():
    # straight (the reference pose), folded back (every angle pi), alternating right
    # angles and hanging straight down at rest (joint 1 at pi/2: rods 1..9 along -z,
    # an equilibrium, theta'' = 0): none is singular for a revolute chain. Whatever path
    # answers, the joint accelerations equal the reference to ~1e3 eps |theta''|, plus,
    # at the equilibrium, the absolute rounding of the gravity terms (~1e3 eps g / L).
    N = 10
    system = sc.build(N=N).model.system
    cases = [(np.zeros(N), np.zeros(N)), (np.zeros(N), np.linspace(-2.0, 2.0, N)),
             (np.full(N, np.pi), np.ones(N)), (np.tile([0.0, np.pi / 2], N // 2), np.ones(N)),
             (np.array([0.0, np.pi / 2] + [0.0] * (N - 2)), np.zeros(N))]
    for th, dth in cases:
        q, v = sc.state(th, dth, L)
        acc = sc.joint_accelerations(q, v, go.solve_step(system, 0.0, q, v).a)
        ref = sc.forward_dynamics(th, dth, N, L, M, R, G)
        # measured <= 4.2e-14 relative; 1.4e-13 rad/s^2 absolute at the equilibrium
        assert np.linalg.norm(acc - ref) <= 1e-12 * np.linalg.norm(ref) + 1e-11


def test_bad_input():
    with pytest.raises(go.ModelError, match="`theta0`: expected 4 finite joint values"):
        sc.build(N=4, theta0=[0.1, 0.2])
    with pytest.raises(go.ModelError, match="`N`: expected an integer >= 1"):
        sc.build(N=0)
    with pytest.raises(go.ModelError, match="`L`: expected a finite value > 0"):
        sc.build(L=-1.0)
