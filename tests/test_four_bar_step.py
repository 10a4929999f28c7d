"""Paper 001's singular-mass four-bar at its initial state: every solver agrees.

Independent reference: on the parallelogram branch th2 = th1, th3 = pi - th1 the
reduced equation is (5/3) m l^2 th1'' = psi - 2 m g l cos th1 + (5/3) m l^2 *
0 (no velocity terms at rest), so th1'' = th2'' = -th3'' = (psi - 2 m g l cos th1)
/ (5/3 m l^2).
"""

import warnings

import numpy as np
import pytest

import gaussopt as go
from problems import four_bar

M_, L_, G_, PSI = 12.0, 2.0, 9.8, 450.0
Q0 = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])


def reduced_accel(th, psi=PSI):
    return (psi - 2 * M_ * G_ * L_ * np.cos(th)) / (5.0 / 3.0 * M_ * L_**2)


@pytest.mark.parametrize("solver", ["closed_form", "lagrange", "qp", "ga"])
@pytest.mark.parametrize("objective", ["exact", "paper"])
def test_all_solvers_agree_at_initial_state(solver, objective):
    sysm = four_bar.system()
    with warnings.catch_warnings():
        warnings.simplefilter("error", go.ObjectiveMismatchWarning)
        r = go.solve_step(sysm, 0.0, Q0, np.zeros(3), solver=solver, objective=objective)
    a1 = reduced_accel(np.pi / 3)
    expected = np.array([a1, a1, -a1])
    tol = 1e-9 if solver != "ga" else r.info["tolerance"]
    assert np.abs(r.a - expected).max() <= tol * (1 + np.abs(expected).max()), r.a
    if solver == "ga":
        assert np.abs(r.a - expected).max() <= 1e-6 * np.abs(expected).max()
    assert r.info.get("objective_mismatch", 0.0) == 0.0


def test_paper_and_exact_objectives_differ_on_a_variant():
    # A force on th3 (which has no mass) and a constraint th3 = th1 + c instead of
    # th1 + th3 = pi: th3's force now acts on the crank through the constraint. The
    # exact objective (Lagrange-I) keeps it; the paper's M^+ objective drops it.
    m, l, g, psi, f3 = M_, L_, G_, PSI, 37.0
    M = np.diag([4 * m * l**2 / 3, m * l**2 / 3, 0.0])

    def force(t, q, v):
        return np.array([psi - 1.5 * m * g * l * np.cos(q[0]), -0.5 * m * g * l * np.cos(q[1]), f3])

    def phi(t, q):
        return np.array([l * np.sin(q[0]) - l * np.sin(q[1]), q[2] - q[0] - np.pi / 3])

    sysm = go.System(("th1", "th2", "th3"), mass=M, force=force, constraints=[go.Holonomic(phi)])
    q = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])
    exact = go.solve_step(sysm, 0.0, q, np.zeros(3), objective="exact")
    with pytest.warns(go.ObjectiveMismatchWarning, match="different accelerations"):
        paper = go.solve_step(sysm, 0.0, q, np.zeros(3), objective="paper")
    # reduced equations (th2 = th1, th3 = th1 + c): virtual work of f3 along th1
    a_exact = (psi + f3 - 2 * m * g * l * np.cos(q[0])) / (5 / 3 * m * l**2)
    a_paper = (psi - 2 * m * g * l * np.cos(q[0])) / (5 / 3 * m * l**2)
    assert exact.a == pytest.approx([a_exact] * 3, rel=1e-12)
    assert paper.a == pytest.approx([a_paper] * 3, rel=1e-12)
    assert paper.info["objective_mismatch"] == pytest.approx(
        np.linalg.norm(exact.a - paper.a), rel=1e-9)
    # every solver gives the same exact answer
    for solver in ("lagrange", "qp"):
        r = go.solve_step(sysm, 0.0, q, np.zeros(3), solver=solver)
        assert r.a == pytest.approx(exact.a, rel=1e-8)


def test_singular_position_row_vanishes_but_constraint_force_is_finite():
    # exactly at th1 = th2 = pi/2 the first row [l cos th1, -l cos th2, 0] is zero
    # (a row's reference scale is the largest norm it has shown at an accepted state:
    # the integrator registers every accepted state with `accept`, as here)
    sysm = four_bar.system()
    sysm.check(0.0, Q0, np.zeros(3))
    solver = go.make_solver(sysm)
    solver.accept(sysm.rows(0.0, Q0, np.zeros(3))[0])
    q = np.array([np.pi / 2, np.pi / 2, np.pi / 2])
    w = 3.0
    r = solver.solve(0.0, q, np.array([w, w, -w]))
    assert r.info["dropped_rows"] == [0]
    # a fresh step without any reference drops exactly-zero rows only
    assert go.solve_step(four_bar.system(), 0.0, q, np.array([w, w, -w])).info["dropped_rows"] == []
    # a solver given the rows' scales decides the same without history
    r2 = go.solve_step(four_bar.system(), 0.0, q, np.array([w, w, -w]), row_scale=[2 * L_, 1.0])
    assert r2.info["dropped_rows"] == [0]
    assert r2.a == pytest.approx(r.a, abs=1e-12)
    assert np.all(np.isfinite(r.constraint_force))
    # near it the multiplier of that row grows like 1/cos th1 while M a - F stays bounded
    lams, forces = [], []
    for eps in (1e-2, 1e-4, 1e-6):
        th = np.pi / 2 - eps
        rr = go.solve_step(sysm, 0.0, np.array([th, th, np.pi - th]), np.array([w, w, -w]),
                           solver="lagrange")
        lams.append(abs(rr.multipliers[0]))
        forces.append(np.abs(rr.constraint_force).max())
        assert rr.a[0] == pytest.approx(reduced_accel(th), rel=1e-6)
    assert lams[2] > 1e3 * lams[0]
    assert max(forces) < 2 * min(forces)


def test_four_bar_run_stays_on_branch_and_reports_passages():
    # 1.3 s contains two crossings of cos th1 = 0 (t = 0.580, 1.228)
    pb = four_bar.build(t_end=1.3)
    tr = pb.simulate("closed_form")
    assert tr.success, tr.message
    ref = pb.reference(tr.t)["th1"]
    assert np.abs(tr["th1"] - ref).max() < 1e-8
    assert np.abs(tr["th2"] - tr["th1"]).max() < 1e-10
    passages = [e for e in tr.rank_events if e.kind == "passage"]
    assert [round(e.t, 4) for e in passages] == [0.5802, 1.2279]
    assert all(e.rows == ["holonomic[0]"] for e in passages)
