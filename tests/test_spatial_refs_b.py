"""Spatial references (issue 23): the IFToMM A04 Bricard mechanism and a delta robot,
each against an independent reduced-coordinate model written with numpy/scipy only
(``problems/bricard.py``: joint angles and twists; ``problems/delta_robot.py``: the arm
angles with closed-form forward kinematics)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gaussopt as go
from gaussopt_problems import bricard, delta_robot

# ----------------------------------------------------------------------------- Bricard


@pytest.fixture(scope="module")
def bricard_problem():
    return bricard.build()


def _bricard_state(ref, t):
    """Consistent ``q, v`` of the five rods and the reference's ``a`` at time ``t``."""
    th, u = ref.states([t])
    th1, _ = ref._sol.sol(t)
    du = ref.acceleration(th1, u[0])
    ref.close(th1, th[0])
    return ref.body_coordinates(th[0], u[0], du)


def _p2_error(pb, traj):
    out, ref = pb.outputs(traj.q, traj.v), pb.reference(traj.t)
    return max(float(np.abs(out[k] - ref[k]).max()) for k in ("P2_x", "P2_y", "P2_z"))


def test_bricard_rank_report(bricard_problem):
    """5 moving rods, 6 revolutes: Gruebler-Kutzbach 6 * 5 - 6 * 5 = 0, true mobility 1,
    one redundant equation (the joint screws span 5 dimensions, not 6)."""
    mdl = bricard_problem.model
    rr = mdl.rank_report(bricard_problem.q0)
    assert (mdl.n, mdl.m) == (35, 35)               # 5 x 7 coordinates; 5 norms + 6 x 5
    assert rr.gruebler == 0 and rr.rank == 34 and rr.dof == 1
    assert len(rr.redundant) == 1 and rr.redundant[0].startswith("Revolute(")
    assert re.search(r"Gruebler count 0\).*rank 34.*1 DOF", str(rr))
    # the reference's own count: the 6 x 6 matrix of joint twists has rank 5
    ref = bricard.JointAngleReference()
    S = ref.twists(np.zeros(6))[2]
    sv = np.linalg.svd(S, compute_uv=False)
    assert sv[4] > 0.5 and sv[5] < 1e-14           # measured 0.835 and 5.9e-17


def test_bricard_steps_equal_the_joint_angle_reference():
    """At consistent states of the reference's motion, gaussopt's accelerations equal
    the joint-angle model's (its Kane equation, its closed-form derivative of the
    loop's twists), both exact up to rounding: ~|a| eps cond, cond = 1 / the least
    singular value of the dependent twists (>= 0.37) -> ~1e-14; bound 1e-11."""
    pb = bricard.build()
    ref = bricard.reference_solution(2.0)
    for t in np.linspace(0.0, 2.0, 9):
        q, v, a = _bricard_state(ref, t)
        assert np.abs(pb.model.phi(t, q)).max() < 1e-14
        step = go.solve_step(pb.system, t, q, v)
        assert np.abs(step.a - a).max() < 1e-11       # measured <= 5e-14


def test_bricard_reference_conserves_energy():
    """The reference is exact up to its integration: energy to 1e-10 J over 2 s
    (measured 9e-12 J over 10 s at rtol = atol = 1e-13), and a run at 1e-12 stays
    within 1e-10 m of it (measured 6e-12 over 10 s)."""
    t = np.linspace(0.0, 2.0, 41)
    r = bricard.reference(t, t_end=2.0)
    assert np.ptp(r["energy"]) < 1e-10
    ref12 = bricard.JointAngleReference()
    ref12.solve(2.0, rtol=1e-12, atol=1e-12)
    th, _ = ref12.states(t)
    P2 = np.array([ref12.point(x, 2) for x in th])
    assert np.abs(P2 - np.column_stack([r["P2_x"], r["P2_y"], r["P2_z"]])).max() < 1e-10


def test_bricard_one_second_at_rtol_1e12():
    """1 s (a fifth of a swing) at rtol = atol = 1e-12: DOP853's global error is a few
    rtol per unit time on coordinates of size 1 (measured 1.1e-12 over 10 s); the
    reference's ~1e-12. Bound 1e-9."""
    pb = bricard.build(t_end=1.0)
    traj = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, rtol=1e-12, atol=1e-12)
    assert traj.success, traj.message
    assert _p2_error(pb, traj) < 1e-9


@pytest.mark.slow
def test_bricard_ten_seconds_at_rtol_1e12(bricard_problem):
    """The benchmark's 10 s (two swings) at rtol = atol = 1e-12. The issue's bound is 1e-7
    for P2; the error estimate: DOP853's global error ~ rtol x (number of steps ~150)
    x (phase growth ~ t / period) ~ 1e-10 at most, the reference's 1e-12 (its 1e-12
    and 1e-13 runs differ by 6e-12); measured 1.1e-12. Energy: the run's drift is
    the integrator's (measured ~1e-11 J), bound 1e-8 J."""
    pb = bricard_problem
    traj = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, rtol=1e-12, atol=1e-12)
    assert traj.success, traj.message
    err = _p2_error(pb, traj)
    assert err < 1e-7 and err < 1e-9
    E = np.array([pb.system.energy(t, q, v) for t, q, v in zip(traj.t, traj.q, traj.v)])
    assert np.ptp(E) < 1e-8
    assert abs(E[0] - bricard.reference([0.0], t_end=10.0)["energy"][0]) < 1e-12


@pytest.mark.slow
def test_bricard_ten_seconds_default_settings(bricard_problem):
    """The benchmark's 10 s with go.simulate's default settings (DOP853, rtol = atol =
    1e-9, Projection): the issue's bound 1e-7 for P2 (DOP853's global error at 1e-9 over
    ~two swings: a few 1e-9 x the phase growth, ~1e-8; measured 1.7e-10). The energy
    drifts by the integrator's error only: bound 1e-7 J (measured 1.5e-9 J of 29.43 J).
    (Before the integrator rejected steps whose stages the step solver refused, this
    run stopped at t ~ 0.9 s.)"""
    pb = bricard_problem
    traj = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0)
    assert traj.success, traj.message
    assert _p2_error(pb, traj) < 1e-7
    E = np.array([pb.system.energy(t, q, v) for t, q, v in zip(traj.t, traj.q, traj.v)])
    assert np.ptp(E) < 1e-7


@pytest.mark.slow
def test_bricard_ten_seconds_default_rtol_coarser_rank_tol(bricard_problem):
    """The default run with the step's rank_tol raised to 1e-4 (the redundant row's
    singular value is 0 on the constraints, the others >= 0.149, so 1e-4 separates them
    off the constraints too): P2 within the issue's 1e-7 (DOP853 at rtol = 1e-9 over two
    swings, ~1e-8; measured 7.3e-10)."""
    pb = bricard_problem
    traj = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, solver_options={"rank_tol": 1e-4})
    assert traj.success, traj.message
    assert _p2_error(pb, traj) < 1e-7


def _bricard_off_constraints(eps):
    """Accelerations at the reference's state at t = 0.5 s moved ``eps`` (random
    directions) off the constraints, minus the consistent state's."""
    pb = bricard.build()
    ref = bricard.reference_solution(2.0)
    q, v, a = _bricard_state(ref, 0.5)
    rng = np.random.default_rng(0)
    dq, dv = rng.standard_normal(35), rng.standard_normal(35)
    return float(np.abs(go.solve_step(pb.system, 0.5, q + eps * dq, v + eps * dv).a - a).max())


def test_bricard_step_slightly_off_the_constraints():
    """1e-7 off the constraints the step moves by O(eps x |a| / sigma_min) with
    sigma_min = 0.149 (the redundant row dropped): ~1e-6; bound 1e-4 (measured 1.7e-6)."""
    assert _bricard_off_constraints(1e-7) < 1e-4


@pytest.mark.xfail(strict=True, reason=(
    "core limitation: 1e-6 off the constraints the redundant row's singular value (3e-8) "
    "passes rank_tol, the row is kept (rank 35: A square, a = A^-1 b) and the accelerations "
    "are wrong by ~12; simulate copes by rejecting such steps"))
def test_bricard_step_off_the_constraints_drops_the_redundant_row():
    """The minimal form of the default-settings failure: 1e-6 off the constraints the
    step should still move by O(1e-5) only; bound 1e-3."""
    assert _bricard_off_constraints(1e-6) < 1e-3


def test_bricard_build_checks_its_parameters():
    with pytest.raises(go.ModelError, match=r"`L` must be a finite number > 0, found -1"):
        bricard.build(L=-1.0)
    with pytest.raises(go.ModelError, match=r"`width` must be a finite number >= 0"):
        bricard.build(width=-0.1)


def test_bricard_initial_rate_is_consistent():
    """``omega0``: the reference's initial velocities satisfy gaussopt's velocity
    constraints (A v = 0 to rounding)."""
    pb = bricard.build(omega0=0.7)
    A = pb.model.jacobian(0.0, pb.q0)
    assert np.abs(A @ pb.v0).max() < 1e-14 and np.abs(pb.v0).max() > 0.1


# ----------------------------------------------------------------------------- delta robot


def test_delta_rank_report_spherical_rod_ends():
    """10 bodies, 3 revolutes (5 rows) and 12 sphericals (3 rows): Gruebler-Kutzbach
    60 - 51 = 9, and the true mobility is 9 as well (the platform's 3 translations and
    the 6 rods' free spins): the ball-jointed parallelograms make no row redundant."""
    pb = delta_robot.build()
    mdl = pb.model
    rr = mdl.rank_report(pb.q0)
    assert (mdl.n, mdl.m) == (70, 61)
    assert rr.gruebler == 9 and rr.rank == 61 and rr.dof == 9 and list(rr.redundant) == []
    assert np.abs(mdl.phi(0.0, pb.q0)).max() < 1e-15


def test_delta_rank_report_universal_rod_ends():
    """Universal joints at the rods' ends (4 rows each): 60 - (15 + 48) = -3 by
    Gruebler-Kutzbach, true mobility 3 (the platform's translations), so 6 rows are
    redundant, two per parallelogram loop, all of them universal joints' rows."""
    pb = delta_robot.build(rod_ends="universal")
    rr = pb.model.rank_report(pb.q0)
    assert (pb.model.n, pb.model.m) == (70, 73)
    assert rr.gruebler == -3 and rr.rank == 67 and rr.dof == 3
    assert len(rr.redundant) == 6 and all(r.startswith("Universal(rod") for r in rr.redundant)


def test_delta_steps_equal_the_reduced_reference():
    """At consistent states of the reduced motion (rods turned without spin), the
    platform's acceleration and the arms' angular accelerations equal the reduced
    equations' (both exact up to rounding: |a| ~ 3 m/s^2, arms ~100 rad/s^2, cond of
    the loop Jacobian <= 205 -> ~1e-12; measured 3e-14 and 7e-13). Bound 1e-10."""
    pb = delta_robot.build()
    ref = delta_robot.reference_solution(2.0)
    for t in np.linspace(0.0, 2.0, 5):
        th, thd, _ = ref.states([t])
        q, v = ref.body_coordinates(th[0], thd[0])
        assert np.abs(pb.model.phi(t, q)).max() < 1e-14
        assert np.abs(pb.model.jacobian(t, q) @ v).max() < 1e-14
        step = go.solve_step(pb.system, t, q, v)
        thdd, xdd = ref.accelerations(th[0], thd[0])
        assert np.abs(step.a[63:66] - xdd).max() < 1e-10
        for i in range(3):
            alpha = pb.model.angular_acceleration(f"arm{i}", q, v, step.a)
            assert np.abs(alpha - ref.u[i] * thdd[i]).max() < 1e-10


def test_delta_short_run_default_settings():
    """0.3 s (half a swing) at go.simulate's defaults (rtol = atol = 1e-9): DOP853's
    global error ~ rtol x the platform's scale 0.34 m x a few; measured 6e-11 over 2 s.
    Bound 1e-8 m. The reference's own error: its 1e-12 and 1e-13 runs differ by 2e-14."""
    pb = delta_robot.build(t_end=0.3)
    traj = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0)
    assert traj.success, traj.message
    out, ref = pb.outputs(traj.q, traj.v), pb.reference(traj.t)
    assert max(float(np.abs(out[k] - ref[k]).max()) for k in "xyz") < 1e-8


@pytest.mark.slow
@pytest.mark.parametrize("rod_ends", delta_robot.ROD_ENDS)
@pytest.mark.parametrize("rtol, bound", [(1e-9, 1e-8), (1e-10, 1e-9)])
def test_delta_two_seconds(rod_ends, rtol, bound):
    """2 s, three swings about the hanging equilibrium. Bound: ~10 x DOP853's measured
    global error at each rtol (6.2e-11 at 1e-9, 5e-12 at 1e-10, both rod ends; the
    global error of an oscillation grows ~ rtol x steps x t / period); energy drift
    within 1e-9 J of ~0.5 J (measured 2.7e-11 J at 1e-9, 2.2e-12 J at 1e-10)."""
    pb = delta_robot.build(rod_ends=rod_ends)
    traj = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, rtol=rtol, atol=rtol)
    assert traj.success, traj.message
    out, ref = pb.outputs(traj.q, traj.v), pb.reference(traj.t)
    assert max(float(np.abs(out[k] - ref[k]).max()) for k in "xyz") < bound
    E = np.array([pb.system.energy(t, q, v) for t, q, v in zip(traj.t, traj.q, traj.v)])
    assert np.ptp(E) < 1e-9


def test_delta_reference_conserves_energy():
    """The reduced model conserves T + V to 1e-13 J over 2 s (measured 1e-15 J)."""
    ref = delta_robot.reference_solution(2.0)
    th, thd, _ = ref.states(np.linspace(0.0, 2.0, 21))
    E = [ref.energy(a, b) for a, b in zip(th, thd)]
    assert np.ptp(E) < 1e-13


def test_delta_build_checks_rod_ends():
    with pytest.raises(go.ModelError, match=r"`rod_ends` must be one of spherical, universal; "
                                            r"found 'ball'"):
        delta_robot.build(rod_ends="ball")
