"""The O(n) step of large multibody models (:mod:`gaussopt.gauss.band_step`) against independent
references: the dense kernel on the same data, the reduced one-coordinate equation of the
N-four-bar, a complex-step Jacobian of the joint equations; and its refusals (a rank
drop, redundant rows, a singular mass matrix), after which the dense kernel answers."""

from __future__ import annotations

import numpy as np
import pytest

import gaussopt as go
import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
import gaussopt.multibody as mb
import gaussopt.integrate.engine as E
import gaussopt.gauss.band_step as SP
from gaussopt.core.model_interface import quiet_compile
from gaussopt.model.model_functions import model_functions
from gaussopt.gauss.solvers.base import BATCH_PER_THREAD
from gaussopt_problems import n_four_bar

RANK_TOL = 1e-8


def _dense(system, t, q, v, sig_ref=0.0):
    """The dense kernel's step on numpy copies of the model's data (no compiled model
    call, no routing): ``(status, a, lam, r, s)``."""
    M, F, A, b = (np.ascontiguousarray(x, dtype=float) for x in system.evaluate(t, q, v))
    n, m = A.shape[1], A.shape[0]
    w = K.make_work(n, m)
    status, fa, r, mL, k, rho, allow, be, dmin, flags = K.gauss_step(
        M, F, A, b, np.zeros(m), sig_ref, RANK_TOL, K.CLOSED_FORM, True, False, w)
    return status, WS.field(w, fa)[:n].copy(), WS.view(w, "lam", m).copy(), r, WS.view(w, "s", k).copy()


def _sparse_alone(system, q, v):
    """The status of the O(n) path alone at ``(0, q, v)`` (no dense fallback)."""
    system.check(0.0, q, v)                    # counts the rows
    mf = model_functions(system)
    md = E.model_data(mf, system)
    assert md.band.mode != SP.MODE_NONE
    buf = E.buffers(mf)
    return E.sparse_step_at(E.pack(md), E.pack(buf), np.zeros(mf.m), 0.0, RANK_TOL, 0.0, q, v,
                            True)


def _kkt_condition(system, t, q, v):
    """2-norm condition number of the scaled KKT matrix ``[[M/w, An^T], [An, 0]]``."""
    M, F, A, b = system.evaluate(t, q, v)
    An = A / np.linalg.norm(A, axis=1)[:, None]
    H = M / (np.trace(M) / M.shape[0])
    m = A.shape[0]
    Kkt = np.block([[H, An.T], [An, np.zeros((m, m))]])
    return np.linalg.cond(Kkt)


def _near_manifold(pb, rng, N):
    """A state near the parallelogram branch: random crank angle away from the collinear
    positions, coordinates perturbed by 1e-3 (off the manifold, as trial stages are), a
    random velocity (the step is defined for any v)."""
    th = rng.uniform(0.3, np.pi - 0.3) * rng.choice([-1.0, 1.0])
    q = n_four_bar.configuration(th, N=N) + 1e-3 * rng.standard_normal(pb.system.n)
    v = rng.standard_normal(pb.system.n)
    return q, v


@pytest.mark.parametrize("N", [5, 20])
def test_sparse_equals_dense_at_random_states(N):
    pb = n_four_bar.build(N=N)
    system = pb.system
    rng = np.random.default_rng(8 + N)
    for _ in range(6):
        q, v = _near_manifold(pb, rng, N)
        r = go.solve_step(system, 0.0, q, v)
        assert r.info["sparse"] and r.info["rank"] == system.m
        status, a, lam, rank, s = _dense(system, 0.0, q, v)
        assert status == K.OK and rank == system.m
        # Both answers are verified to backward error <= tol = direct_tolerance(n, m) in
        # the scaled KKT system; each is then the exact solution of data perturbed by
        # tol relative, so its forward error is at most cond(K) * tol relative to the
        # size of the solution [a; mu] (first order; the factor 4 covers the 2-norm of
        # the perturbation of K, O(1) entries, and the two errors adding up).
        tol = K.direct_tolerance(system.n, system.m)
        bound = 4.0 * _kkt_condition(system, 0.0, q, v) * tol
        scale_a = np.linalg.norm(a) + np.linalg.norm(r.constraint_force) / np.diag(system.mass(0, q)).min()
        assert np.linalg.norm(r.a - a) <= bound * scale_a
        # multipliers: the same convention M a = F + A^T lam; the same bound in the
        # multipliers' own scale (mu = lam nu / w; rows of norm >= 1 here)
        scale_l = np.linalg.norm(lam) + np.linalg.norm(a) * np.trace(system.mass(0, q))
        assert np.linalg.norm(r.multipliers - lam) <= bound * scale_l
        # the certification never claims more than the dense SVD finds: sigma_min of the
        # normalized rows above the certified bound MARGIN * rank_tol
        assert s[-1] >= SP.MARGIN * RANK_TOL
        # sigma_min is an estimate from above, within sqrt(max h / min h) (module docstring)
        Md = np.diag(system.mass(0, q))
        assert s[-1] * (1 - 1e-9) <= r.info["sigma_min"] <= s[-1] * np.sqrt(Md.max() / Md.min())


@pytest.mark.parametrize("th", [np.pi / 2, 1.0, -2.2])
def test_reduced_equation_of_the_parallelogram_branch(th):
    """th'' of the reduced one-coordinate equation (problems/n_four_bar.py docstring): every
    crank turns with th'', the couplers translate (phi'' = 0)."""
    N, m, l, g = 20, 1.3, 0.7, 9.81
    mdl = n_four_bar.model(N=N, m=m, l=l, g=g)
    q = n_four_bar.configuration(th, N=N, l=l)
    v = mdl.velocities(q, {"crank0.phi": 0.8})
    r = go.solve_step(mdl.system, 0.0, q, v)
    assert r.info["sparse"]
    th_dd = -g * l * ((N + 1) / 2 + N) * m * np.cos(th) / (((N + 1) / 3 + N) * m * l * l)
    cranks = [mdl.index(f"crank{k}.phi") for k in range(N + 1)]
    couplers = [mdl.index(f"coupler{k}.phi") for k in range(1, N + 1)]
    # error: cond(K) (~1e3 at N = 20) times the backward error (~1e-15), in the scale
    # of |a| ~ |th''| l + th'^2 l ~ 10
    scale = 10.0
    assert np.max(np.abs(r.a[cranks] - th_dd)) <= 1e-11 * scale
    assert np.max(np.abs(r.a[couplers])) <= 1e-11 * scale


def _without_sparse(builder, *args, **kwargs):
    system = builder(*args, **kwargs).system
    system.sparse = None
    return system


def test_collinear_position_falls_back():
    """At th = 0 the rank drops by N: the certification fails, the dense kernel decides."""
    N = 10
    pb = n_four_bar.build(N=N)
    for th in (0.0, 1e-7, np.pi):
        q = n_four_bar.configuration(th, N=N)
        v = pb.model.velocities(n_four_bar.configuration(0.3, N=N), {"crank0.phi": -1.0})
        with quiet_compile():
            status = _sparse_alone(pb.system, q, v)
        assert status == SP.REFUSED_UNCERTIFIED
        r = go.solve_step(pb.system, 0.0, q, v)
        assert not r.info["sparse"]
        ref = go.solve_step(_without_sparse(n_four_bar.build, N=N), 0.0, q, v)
        np.testing.assert_array_equal(r.a, ref.a)
        assert r.info["rank"] == ref.info["rank"]
        if th in (0.0, np.pi):
            assert r.info["rank"] == pb.model.m - N
        status, a, lam, rank, s = _dense(pb.system, 0.0, q, v)
        assert status == 0 and rank == r.info["rank"]
        # the engine adds the fold rows to the kernel's decision (gaussopt.gauss.model_step.
        # fold_rows): the two differ only in the directions the kernel dropped, so both
        # satisfy the kept rows, A a = b, to the verified steps' accuracy (16 (n + m + 1)
        # eps of |A| |a| + |b|, the direct solves' backward error)
        M, F, A, b = pb.system.evaluate(0.0, q, v)
        tol = 16 * (A.shape[0] + A.shape[1] + 1) * np.finfo(float).eps
        for x in (a, r.a):
            assert np.all(np.abs(A @ x - b) <= tol * (np.abs(A) @ np.abs(x) + np.abs(b)) * 10)


def _redundant_model(N):
    """The N-four-bar with a second coupler between cranks 0 and 1: one redundant row at
    every parallelogram configuration (Gruebler 0, mobility 1)."""
    return n_four_bar.model(N=N, redundant=True)


def _massless_couplers(N):
    """The N-four-bar with couplers of zero inertia: M singular, the motion determinate
    (each coupler's angle is fixed by its two pins)."""
    l = 1.0
    cranks = [mb.Body.uniform_rod(f"crank{k}", 1.0, l) for k in range(N + 1)]
    couplers = [mb.Body(f"coupler{k}", 1.0, 0.0) for k in range(1, N + 1)]
    joints = [mb.Revolute(None, (k * l, 0.0), c, (-l / 2, 0.0)) for k, c in enumerate(cranks)]
    for k, cp in enumerate(couplers, start=1):
        joints.append(mb.Revolute(cranks[k - 1], (l / 2, 0.0), cp, (-l / 2, 0.0)))
        joints.append(mb.Revolute(cranks[k], (l / 2, 0.0), cp, (l / 2, 0.0)))
    return mb.Model(cranks + couplers, joints, gravity=(0.0, -9.81))


@pytest.mark.parametrize("build, refusal", [(_redundant_model, SP.REFUSED_UNCERTIFIED),
                                            (_massless_couplers, SP.REFUSED_MASS)])
def test_redundant_rows_and_singular_mass_fall_back(build, refusal):
    N = 10
    mdl = build(N)
    system = mdl.system
    assert system.n >= SP.MIN_N
    th = 0.9
    q = mdl.assemble({"crank0.phi": th}, q_guess=_guess(mdl, th, N))
    v = mdl.velocities(q, {"crank0.phi": 0.5})
    with quiet_compile():
        status = _sparse_alone(system, q, v)
    assert status == refusal
    r = go.solve_step(system, 0.0, q, v)
    assert not r.info["sparse"]
    status, a, lam, rank, s = _dense(system, 0.0, q, v)
    np.testing.assert_array_equal(r.a, a)
    np.testing.assert_array_equal(r.multipliers, lam)
    if build is _redundant_model:
        assert r.info["rank"] == system.m - 1


def test_redundant_row_set_aside_answers_with_minimum_norm_multipliers():
    """After the dense kernel's first step on the overconstrained N-four-bar (one redundant
    row), the band sets that row aside and answers ``solve_step`` (rank m - 1), with the
    dense kernel's minimum-norm multipliers (the redundant rows share the force: the
    component along the rows' left null vector removed). Against the dense kernel on the
    same data, at states along the branch: both are backward stable, so they differ by
    at most cond(KKT) times their verification tolerance of the solution's size (the KKT
    system of the m - 1 independent rows; cond ~1e3 here), 1e-10 relative is a margin of
    ~1e2 over that (measured ~6e-15)."""
    N = 10
    mdl = _redundant_model(N)
    system = mdl.system
    for th in (0.9, 2.0, -1.2):
        q = mdl.assemble({"crank0.phi": th}, q_guess=_guess(mdl, th, N))
        v = mdl.velocities(q, {"crank0.phi": 0.7})
        go.solve_step(system, 0.0, q, v)                      # (the dense kernel's step)
        r = go.solve_step(system, 0.0, q, v)
        assert r.info["sparse"] and r.info["rank"] == system.m - 1
        status, a, lam, rank, s = _dense(system, 0.0, q, v)
        assert status == K.OK and rank == system.m - 1
        assert np.max(np.abs(r.a - a)) <= 1e-10 * np.max(np.abs(a))
        assert np.max(np.abs(r.multipliers - lam)) <= 1e-10 * np.max(np.abs(lam))


def _guess(mdl, th, N):
    """The parallelogram configuration at ``th`` (the extra coupler on top of coupler1)."""
    q = np.zeros(mdl.n)
    q[:3 * (2 * N + 1)] = n_four_bar.configuration(th, N=N)
    if mdl.n > 3 * (2 * N + 1):
        q[3 * (2 * N + 1):] = q[3 * (N + 1):3 * (N + 2)]
    return q


def test_sparse_rows_match_complex_step_jacobian():
    """The pattern and the values of the sparse rows against a complex-step derivative of
    the joint equations Phi (an independent implementation of the geometry)."""
    N = 4
    mdl = n_four_bar.model(N=N)
    rng = np.random.default_rng(3)
    q = rng.standard_normal(mdl.n)
    v = rng.standard_normal(mdl.n)
    sm = mdl.system.sparse
    data = np.empty(sm.indptr[-1])
    b = np.empty(mdl.m)
    import gaussopt.multibody.planar.compiled_model as MK

    MK.sparse_rows(sm.p, q, v, np.zeros(0), data, b, True)
    A = np.zeros((mdl.m, mdl.n))
    for i in range(mdl.m):
        for k in range(sm.indptr[i], sm.indptr[i + 1]):
            A[i, sm.indices[k]] = data[k]
    h = 1e-30
    J = np.column_stack([mdl.phi(0.0, q + 1j * h * e).imag / h for e in np.eye(mdl.n)])
    # complex step: exact to rounding (no subtractive cancellation)
    np.testing.assert_allclose(A, J, rtol=0, atol=1e-14)
    A_dense, b_dense = mdl.rows(0.0, q, v)
    np.testing.assert_array_equal(A, A_dense)
    np.testing.assert_array_equal(b, b_dense)


def test_running_reference_and_hot_path():
    """With the references of a run (row scales, sigma_ref) the regular step still takes
    the sparse path; the hot path (accelerations only) gives the same accelerations."""
    N = 20
    pb = n_four_bar.build(N=N)
    q, v = pb.q0, pb.v0
    pb.system.check(0.0, q, v)                 # counts the rows: the compiled step applies
    solver = go.make_solver(pb.system, "closed_form")
    A, b = pb.system.rows(0.0, q, v)
    solver.accept(A)
    assert solver.sigma_ref > 0
    r = solver.solve(0.0, q, v)
    assert r.info["sparse"]
    np.testing.assert_array_equal(solver.acceleration(0.0, q, v), r.a)
    status, a, lam, rank, s = _dense(pb.system, 0.0, q, v, sig_ref=solver.sigma_ref)
    assert np.max(np.abs(r.a - a)) <= 1e-12 * (1 + np.max(np.abs(a)))
    # the closed form and Lagrange's equations share the path (one unique answer)
    lag = go.solve_step(pb.system, 0.0, q, v, solver="lagrange")
    assert lag.info["sparse"]
    np.testing.assert_array_equal(lag.a, go.solve_step(pb.system, 0.0, q, v).a)


def test_batch_rows_are_solve_step_rows():
    """solve_steps takes the same path per state (sparse where it answers, dense at the
    collinear position): each row exactly solve_step's, multipliers too."""
    N = 10
    pb = n_four_bar.build(N=N)
    ths = [0.4, 0.0, -1.9]
    Q = np.array([n_four_bar.configuration(th, N=N) for th in ths])
    V = np.array([pb.model.velocities(n_four_bar.configuration(0.4, N=N), {"crank0.phi": 1.0})] * 3)
    acc, lam = go.solve_steps(pb.system, 0.0, Q, V, multipliers=True)
    for i in range(len(ths)):
        r = go.solve_step(pb.system, 0.0, Q[i], V[i])
        assert r.info["sparse"] == (ths[i] != 0.0)
        np.testing.assert_array_equal(acc[i], r.a)
        np.testing.assert_array_equal(lam[i], r.multipliers)


def test_batch_on_threads_is_the_same():
    """A batch large enough to be split between threads (each with a context and sparse
    work arrays of its own): every row still exactly solve_step's."""
    N = 10
    pb = n_four_bar.build(N=N)
    rng = np.random.default_rng(5)
    B = 2 * BATCH_PER_THREAD + 1                # two threads where numba has two
    states = [_near_manifold(pb, rng, N) for _ in range(B)]
    Q = np.array([s[0] for s in states])
    V = np.array([s[1] for s in states])
    acc = go.solve_steps(pb.system, 0.0, Q, V)
    for i in (0, B // 2, B - 1):
        np.testing.assert_array_equal(acc[i], go.solve_step(pb.system, 0.0, Q[i], V[i]).a)


def test_projection_on_the_band_equals_the_dense_projection():
    """The projection's correction on the band (:func:`gaussopt.gauss.band_step.correction`)
    against the dense one (the same system without its sparse model), from states
    1e-4 off the constraints: both are Gauss--Newton with the unique minimum-M-norm
    correction, so they differ by the rounding of the corrections (a few ulps of
    |dq| ~ 1e-4, amplified at most by the iterations' contraction): 1e-12 of
    ``1 + |q|`` is a margin of ~1e2 over that, yet 1e8 below the perturbation."""
    N = 10
    pb = n_four_bar.build(N=N)
    dense = _without_sparse(n_four_bar.build, N=N)
    rng = np.random.default_rng(11)
    proj = go.Projection()
    for _ in range(3):
        th = rng.uniform(0.3, np.pi - 0.3)
        q = n_four_bar.configuration(th, N=N) + 1e-4 * rng.standard_normal(pb.system.n)
        v = rng.standard_normal(pb.system.n)
        q1, v1, its1 = proj.project(pb.system, 0.0, q, v, RANK_TOL)
        q2, v2, its2 = proj.project(dense, 0.0, q, v, RANK_TOL)
        assert its1 > 0
        scale = 1.0 + np.max(np.abs(q2))
        assert np.max(np.abs(q1 - q2)) <= 1e-12 * scale
        assert np.max(np.abs(v1 - v2)) <= 1e-12 * (1.0 + np.max(np.abs(v2)))
        assert np.max(np.abs(pb.system.position_residual(0.0, q1))) <= 1e-12 * scale


def test_simulate_on_the_band_against_the_reduced_reference():
    """N = 10 (63 coordinates), 3 s at rtol 1e-10 through collinear positions: the run
    takes the O(n) path (step, projection, rank monitor, nearness; ``sparse_steps``
    counts its steps) and the same run without the sparse model takes the dense
    kernel. Each against the reduced one-coordinate equation: <= 1e3 rtol = 1e-7
    (the bound of the tolerance sweep in test_trust.py: DOP853's global error over a
    few periods, and the rounding limit at the singular positions). Both report the
    same passages, at times within 1e-6 s (each is located to rounding on its own
    trajectory, and the trajectories differ by their global errors, <= 1e-7 rad at
    |th'| >= 1 rad/s, i.e. <= 1e-7 s; a margin of 10)."""
    N = 10
    runs = {}
    for name, pb in (("band", n_four_bar.build(N=N, t_end=3.0)),
                     ("dense", n_four_bar.build(N=N, t_end=3.0))):
        if name == "dense":
            pb.system.sparse = None
        kw = dict(pb.settings)
        kw.update(rtol=1e-10, atol=1e-10)
        tr = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **kw)
        assert tr.success, tr.message
        out, ref = pb.outputs(tr.q, tr.v), pb.reference(tr.t)
        err = max(np.abs(out[k] - ref[k]).max() for k in ("B0_x", "B0_y"))
        assert err <= 1e-7, (name, err)
        runs[name] = tr
    band, dense = runs["band"], runs["dense"]
    assert band.stats["sparse_steps"] >= 0.9 * band.stats["rhs_evaluations"]
    assert dense.stats["sparse_steps"] == 0
    tb = [e.t for e in band.rank_events]
    td = [e.t for e in dense.rank_events]
    assert len(tb) == len(td) >= 1
    assert np.max(np.abs(np.array(tb) - np.array(td))) <= 1e-6


@pytest.mark.parametrize("build", [_redundant_model, _massless_couplers])
def test_simulate_where_the_band_refuses_is_the_dense_run(build):
    """A redundant row (rank m - 1 everywhere) or a singular mass matrix: the run's step,
    projection and monitor must fall back to the dense kernel and SVD wherever the band
    cannot answer. A singular mass matrix: no step on the band. The redundant row: the
    dense kernel's first step finds it, the band then sets it aside (gaussopt.gauss.band_step,
    "Redundant rows") and answers most right-hand sides, except next to the collinear
    positions (where the other rows lose rank too). Against the same run without the
    sparse model, 1.2 s through two collinear positions at rtol 1e-10: the same passages
    (times within 1e-6 s, as in the test above) and final states within 2e-7 (1 + |q|)
    (each run within the sweep's 1e3 rtol of the true motion: their answers per step
    agree to the verification's backward error)."""
    N = 10
    runs = []
    for sparse in (True, False):
        mdl = build(N)
        system = mdl.system
        if not sparse:
            system.sparse = None
        q = mdl.assemble({"crank0.phi": 0.9}, q_guess=_guess(mdl, 0.9, N))
        v = mdl.velocities(q, {"crank0.phi": 0.5})
        tr = go.simulate(system, (0.0, 1.2), q, v, method="DOP853", rtol=1e-10, atol=1e-10,
                         stabilization=mb.LeastSquaresProjection())
        assert tr.success, tr.message
        if sparse and build is _redundant_model:
            assert tr.stats["sparse_steps"] >= tr.stats["rhs_evaluations"] // 2
        else:
            assert tr.stats["sparse_steps"] == 0
        runs.append(tr)
    band, dense = runs
    tb = [e.t for e in band.rank_events if e.kind == "passage"]
    td = [e.t for e in dense.rank_events if e.kind == "passage"]
    assert len(tb) == len(td) == 2
    assert np.max(np.abs(np.array(tb) - np.array(td))) <= 1e-6
    assert np.max(np.abs(band.q[-1] - dense.q[-1])) <= 2e-7 * (1 + np.max(np.abs(dense.q[-1])))
