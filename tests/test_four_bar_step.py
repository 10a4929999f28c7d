"""Paper 001's singular-mass four-bar at its initial state: every solver agrees.

Independent reference: on the parallelogram branch th2 = th1, th3 = pi - th1 the
reduced equation is (5/3) m l^2 th1'' = psi - 2 m g l cos th1 + (5/3) m l^2 *
0 (no velocity terms at rest), so th1'' = th2'' = -th3'' = (psi - 2 m g l cos th1)
/ (5/3 m l^2).

Tolerances: the verified backward error of every step through
test_step_properties.step_error_bound, plus the rounding of the hand formulas.
"""

import warnings

import numpy as np
import pytest

import gaussopt as go
from gaussopt_problems import four_bar
from test_step_properties import solver_tolerance, step_error_bound
from test_trajectory import EPS, flow_growth, integration_bound

M_, L_, G_, PSI = 12.0, 2.0, 9.8, 450.0
Q0 = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])


def reduced_accel(th, psi=PSI):
    return (psi - 2 * M_ * G_ * L_ * np.cos(th)) / (5.0 / 3.0 * M_ * L_**2)


def reduced_accel_rounding(th, psi=PSI):
    """Rounding of :func:`reduced_accel`: ~4 eps of the terms summed (4 operations)."""
    return 4 * EPS * (abs(psi) + 2 * M_ * G_ * L_ * abs(np.cos(th))) / (5.0 / 3.0 * M_ * L_**2)


def step_bound(sysm, t, q, v, a, solver="closed_form", F=None, live=slice(None)):
    """|a - a*| of a step of `solver` (step_error_bound at its verified backward error)."""
    M = sysm.mass(t, q)
    F = sysm.force(t, q, v) if F is None else F
    A, b = sysm.rows(t, q, v)
    A, b = A[live], b[live]
    return step_error_bound(M, F, A, b, a, solver_tolerance(solver, M.shape[0], A.shape[0]))


@pytest.mark.parametrize("solver", ["closed_form", "lagrange", "qp", "ga"])
@pytest.mark.parametrize("objective", ["exact", "paper"])
def test_all_solvers_agree_at_initial_state(solver, objective):
    sysm = four_bar.system()
    with warnings.catch_warnings():
        warnings.simplefilter("error", go.ObjectiveMismatchWarning)
        r = go.solve_step(sysm, 0.0, Q0, np.zeros(3), solver=solver, objective=objective)
    a1 = reduced_accel(np.pi / 3)
    expected = np.array([a1, a1, -a1])
    err = np.linalg.norm(r.a - expected)
    rounding = reduced_accel_rounding(np.pi / 3) * np.sqrt(3)
    # the closed form's own error (the GA measures its gap against it)
    cf = step_bound(sysm, 0.0, Q0, np.zeros(3), go.solve_step(sysm, 0.0, Q0, np.zeros(3)).a)
    if solver != "ga":
        # verified backward error (16 (n + m + 1) eps, QP 1e-12) through step_error_bound
        assert err <= step_bound(sysm, 0.0, Q0, np.zeros(3), r.a, solver) + rounding, r.a
    else:
        # the GA's own accuracy claim (final search radius, absolute) and its documented
        # bound sqrt(2 gap / lambda_min(N^T M N)) on |a - a_closed_form|
        assert err <= r.info["tolerance"] + cf + rounding, r.a
        assert err <= r.info["error_bound"] + cf + rounding, r.a
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
    # verified steps (step_error_bound; the paper objective's force is M M^+ F) plus the
    # rounding of the hand formulas (4 eps of their terms)
    F_paper = M @ np.linalg.pinv(M) @ force(0.0, q, np.zeros(3))
    d_exact = step_bound(sysm, 0.0, q, np.zeros(3), exact.a)
    d_paper = step_bound(sysm, 0.0, q, np.zeros(3), paper.a, F=F_paper)
    rnd = 4 * EPS * (psi + f3 + 2 * m * g * l) / (5 / 3 * m * l**2)
    assert exact.a == pytest.approx([a_exact] * 3, abs=d_exact + rnd)
    assert paper.a == pytest.approx([a_paper] * 3, abs=d_paper + rnd)
    # the reported mismatch is the same difference, of solves with the same bounds
    assert paper.info["objective_mismatch"] == pytest.approx(
        np.linalg.norm(exact.a - paper.a), abs=2 * (d_exact + d_paper))
    # every solver gives the same exact answer
    for solver in ("lagrange", "qp"):
        r = go.solve_step(sysm, 0.0, q, np.zeros(3), solver=solver)
        assert r.a == pytest.approx(exact.a, abs=d_exact + step_bound(sysm, 0.0, q, np.zeros(3),
                                                                        r.a, solver))


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
    # both verified on the live row (row 1): step_error_bound of each
    d = step_bound(sysm, 0.0, q, np.array([w, w, -w]), r.a, live=[1])
    d2 = step_bound(sysm, 0.0, q, np.array([w, w, -w]), r2.a, live=[1])
    assert r2.a == pytest.approx(r.a, abs=d + d2)
    assert np.all(np.isfinite(r.constraint_force))
    # near it the multiplier of that row grows like 1/cos th1 while M a - F stays bounded
    lams, forces = [], []
    for eps in (1e-2, 1e-4, 1e-6):
        th = np.pi / 2 - eps
        rr = go.solve_step(sysm, 0.0, np.array([th, th, np.pi - th]), np.array([w, w, -w]),
                           solver="lagrange")
        lams.append(abs(rr.multipliers[0]))
        forces.append(np.abs(rr.constraint_force).max())
        # on the branch the reduced equation has no velocity terms; the normalized rows stay
        # well conditioned, so the verified step is accurate to step_error_bound
        q_ = np.array([th, th, np.pi - th])
        assert rr.a[0] == pytest.approx(reduced_accel(th), abs=step_bound(
            sysm, 0.0, q_, np.array([w, w, -w]), rr.a, "lagrange") + reduced_accel_rounding(th))
    # qualitative: lam_0 ~ 1/cos th1 grows 1e4-fold from 1e-2 to 1e-6 (factor 10 margin)
    # while M a - F changes only through cos th1 over 1e-2 rad (factor 2 margin)
    assert lams[2] > 1e3 * lams[0]
    assert max(forces) < 2 * min(forces)


def test_four_bar_run_stays_on_branch_and_reports_passages():
    # 1.3 s contains two crossings of cos th1 = 0 (t = 0.580, 1.228)
    pb = four_bar.build(t_end=1.3)
    tr = pb.simulate("closed_form")
    assert tr.success, tr.message
    ref = pb.reference(tr.t)["th1"]
    # integration_bound with the exact flow's growth (reduced (th1, th1') equation) and
    # the reference's own error (DOP853 at 1e-13)
    growth = flow_growth(lambda y0, ts: four_bar.reference(ts, th0=y0[0], w0=y0[1]),
                         [np.pi / 3, 0.0], tr.t)
    err = np.abs(tr["th1"] - ref).max()
    assert err < integration_bound(tr, growth, ref_tol=1e-13)
    # physical branch: the projection leaves |Phi_0| / |grad Phi_0| <= 1e-15 (1 + max|q|),
    # Phi_0 = l (sin th1 - sin th2) ~ l cos th1 (th1 - th2), |grad Phi_0| ~ sqrt(2) l |cos th1|,
    # and evaluating Phi_0 rounds to 4 eps l: no control at the singular positions
    branch = (np.sqrt(2) * 1e-15 * (1 + np.abs(tr.q).max())
              + 4 * EPS / np.maximum(np.abs(np.cos(tr["th1"])), 1e-300))
    assert np.all(np.abs(tr["th2"] - tr["th1"]) <= branch)
    passages = [e for e in tr.rank_events if e.kind == "passage"]
    # true crossings 0.5801531 and 1.2278503 (reference root of cos th1): 3.1e-6 and
    # 3.4e-5 from the 4-decimal rounding boundaries, the located times are within
    # err / |th1'| (< 1e-8) of them
    assert [round(e.t, 4) for e in passages] == [0.5802, 1.2279]
    assert all(e.rows == ["holonomic[0]"] for e in passages)


def test_compiled_fast_path_takes_any_array_kind():
    """Once the compiled step has its fast entry (argument types fixed by the first
    call), states of other kinds (a list, a read-only array, a big-endian array, an
    integer array, a strided view) and a row scale of another dtype still give the
    same step: they are converted, never passed as something else."""
    system = four_bar.system()
    q = np.array([1.0, 1.0, np.pi - 1.0])
    v = np.array([2.0, 2.0, -2.0])
    ref = go.solve_step(system, 0.0, q, v).a
    go.solve_step(system, 0.0, q, v)                      # the fast entry is in use
    ro = q.copy()
    ro.setflags(write=False)
    strided = np.repeat(q, 2)[::2]
    for qq in (list(q), ro, q.astype(">f8"), strided):
        np.testing.assert_array_equal(go.solve_step(system, 0.0, qq, v).a, ref)
    qi = np.array([1, 1, 2])
    vi = np.array([0, 0, 0])
    np.testing.assert_array_equal(go.solve_step(system, 0.0, qi, vi).a,
                                  go.solve_step(system, 0.0, qi.astype(float), vi.astype(float)).a)
    scale = np.arange(1, system.m + 1)
    s = go.make_solver(system, "closed_form", row_scale=scale.astype(np.int32))
    s.solve(0.0, q, v)
    np.testing.assert_array_equal(
        s.solve(0.0, q, v).a,
        go.make_solver(system, "closed_form", row_scale=scale.astype(float)).solve(0.0, q, v).a)


def test_repeated_solve_step_is_the_first_and_checks_its_arguments():
    """The repeated call (solve_step's fast path: the cached solver's compiled step called
    directly) returns what the first call returned, for every kind of argument, and bad
    arguments still get their specific errors after the solver is cached."""
    sysm = four_bar.system()
    q = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])
    v = np.array([1.3, 1.3, -1.3])
    first = go.solve_step(sysm, 0.0, q, v)
    again = go.solve_step(sysm, 0.0, q, v)
    as_list = go.solve_step(sysm, 0, list(q), list(v))
    strided = go.solve_step(sysm, 0.0, np.repeat(q, 2)[::2], np.repeat(v, 2)[::2])
    others = [go.solve_step(sysm, np.float64(0.0), q, v),
              go.solve_step(sysm, 0.0, q.astype(">f8"), v.astype(np.longdouble)),
              go.solve_step(sysm, 0.0, q.reshape(1, 3)[0], v)]
    for r in (again, as_list, strided, *others):
        assert np.array_equal(r.a, first.a)
        assert np.array_equal(r.multipliers, first.multipliers)
        assert np.array_equal(r.constraint_force, first.constraint_force)
        assert r.info["rank"] == first.info["rank"] and r.gauss == first.gauss
    assert again.a is not first.a                 # (a result of its own, not a view reused)
    with pytest.raises(go.ModelError, match="NaN"):
        go.solve_step(sysm, 0.0, np.array([np.nan, 0.0, 0.0]), v)
    with pytest.raises(go.ModelError, match="`t`"):
        go.solve_step(sysm, float("nan"), q, v)
    with pytest.raises(go.ModelError, match="shape"):
        go.solve_step(sysm, 0.0, q[:2], v[:2])
    with pytest.raises(go.ModelError, match="`system`"):
        go.solve_step("four_bar", 0.0, q, v)
    with pytest.raises(go.ModelError, match="`solver`"):
        go.solve_step(sysm, 0.0, q, v, ["closed_form"])
    with pytest.raises(go.ModelError, match="`t`"):
        go.solve_step(sysm, np.array([0.0, 1.0]), q, v)
    with pytest.raises(go.ModelError, match="shape"):
        go.solve_step(sysm, 0.0, q.reshape(3, 1), v)
    # an earlier result is not overwritten by later calls
    assert np.array_equal(first.a, again.a)
    # the hot path's repeated call (its own direct function) gives the same accelerations
    s = sysm._solver_cache["closed_form"]
    hot = [s.acceleration(0.0, q, v), s.acceleration(0.0, q, v)]
    assert s._direct_a is not None
    hot += [s.acceleration(0.0, list(q), list(v)),
            s.acceleration(0.0, np.repeat(q, 2)[::2], np.repeat(v, 2)[::2])]
    for a in hot:
        assert np.array_equal(a, first.a)
    assert hot[1] is not hot[0]
    with pytest.raises(go.ModelError, match="NaN"):
        s.acceleration(0.0, np.array([np.nan, 0.0, 0.0]), v)


def test_a_result_of_the_fast_path_is_a_step_result_in_every_respect():
    """The repeated call's result reads ``constraint_force``, ``multipliers`` and ``gauss``
    from its own copy of the step's output when first asked
    (:class:`gaussopt.core.result.DirectStepResult`): read after later calls at other
    states they are still its own; they can be assigned; it pickles and copies as the
    plain StepResult it stands for, equal to the Python path's answer (the same kernel:
    bit for bit); ``dataclasses.replace`` works on it (it raised ``TypeError`` on the
    compiled step's lazy results before)."""
    import copy
    import pickle

    sysm = four_bar.system()
    q = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])
    v = np.array([1.3, 1.3, -1.3])
    go.solve_step(sysm, 0.0, q, v)
    r = go.solve_step(sysm, 0.0, q, v)                   # (the fast path)
    ref = go.make_solver(sysm, "closed_form").solve(0.0, q, v)    # (the Python path)
    for k in range(3):                                   # later calls elsewhere
        go.solve_step(sysm, 0.1 * k, q + 0.01 * k, v)
    assert np.array_equal(r.multipliers, ref.multipliers)
    assert np.array_equal(r.constraint_force, ref.constraint_force)
    assert r.gauss == ref.gauss and isinstance(r.gauss, float)
    assert r.info["rank"] == ref.info["rank"]
    for back in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert type(back) is go.StepResult
        for f in ("a", "constraint_force", "multipliers"):
            assert np.array_equal(getattr(back, f), getattr(ref, f))
        assert back.gauss == ref.gauss
    assert repr(r).startswith("StepResult(a=array(")
    # dataclasses.replace builds the same kind of result from the fields (the lazy result
    # of the Python path's compiled step as well)
    import dataclasses
    for res in (r, go.make_solver(sysm, "closed_form").solve(0.0, q, v)):
        new = dataclasses.replace(res, gauss=2.5)
        assert new.gauss == 2.5 and np.array_equal(new.multipliers, ref.multipliers)
        assert new.info["rank"] == ref.info["rank"] and np.array_equal(new.a, ref.a)
    r.multipliers = np.zeros(2)
    r.gauss = 1.5
    assert r.multipliers.tolist() == [0.0, 0.0] and r.gauss == 1.5
