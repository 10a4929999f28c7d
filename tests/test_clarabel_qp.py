"""Tests of gaussopt.gauss.solvers.qp.clarabel_qp (Clarabel built once, updated in place)."""

from __future__ import annotations

import threading
import tracemalloc

import clarabel
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from gaussopt.gauss.solvers.qp.clarabel_qp import (DEFAULT_SETTINGS, STATUS_NAMES, ClarabelQP,
                                                   QPSolution)

EPS = np.finfo(float).eps
TOL = DEFAULT_SETTINGS["tol_feas"]  # 1e-13


# ----------------------------------------------------------------------
# references
# ----------------------------------------------------------------------
def kkt(P, F, R, r):
    """Direct (numpy) solve of min 0.5 a'Pa - F'a s.t. R a = r.

    [[P, R^T], [R, 0]] [a; -lam] = [F; r], i.e. P a = F + R^T lam.
    Returns a, lam and the 2-norm condition number of the KKT matrix.
    """
    n, k = P.shape[0], R.shape[0]
    K = np.block([[P, R.T], [R, np.zeros((k, k))]])
    z = np.linalg.solve(K, np.concatenate([F, r]))
    return z[:n], -z[n:], np.linalg.cond(K)


def rel(x, y):
    return np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-300)


def equality_bound(cond, iterations=0):
    """Bound on the relative error of an equality-constrained solve.

    Most equality-only problems end after the initial KKT solve (0
    interior-point iterations), whose iterative refinement is run to
    stagnation (``iterative_refinement_reltol = abstol = 1e-16``): the result
    is backward stable, backward error a small multiple of eps on the (scaled)
    KKT system, so the forward error is <= cond(K) * c * eps.  c = 50 covers
    the growth with n <= 30 (measured: error / cond(K) <= 1e-15 on 4000 random
    problems, c ~ 5); 1e-13 absorbs the rounding of the reference solve
    itself.  If the refinement could not converge (regularization 1e-8 not
    small against the smallest singular value of the scaled KKT matrix, i.e.
    cond(K) >~ 1e7) the interior-point iterations run and stop at the
    tolerance tol = 1e-13 on the residuals: then the bound is cond(K) * 10 tol.
    """
    return 1e-13 + (50 * EPS if iterations == 0 else 10 * TOL) * cond


def inequality_bound(cond):
    """Bound on the relative error with inequality rows.

    The interior-point method stops when the relative residuals and the gap
    are below tol = 1e-13 (DEFAULT_SETTINGS): the iterate solves a problem
    perturbed at the level tol, so the forward error is <= cond(K_active) *
    tol (measured: error / cond <= 2e-14, i.e. a factor 5 below), plus
    1e-12 for the complementarity slack of the active rows (an inactive
    multiplier / active slack of size ~tol/1 moves the solution by ~tol * |K^-1|).
    """
    return 1e-12 + 10 * TOL * cond


def random_problem(rng, n, m, p, kind):
    """Random QP with a known active set; reference from the direct KKT solve."""
    if kind == "spd":
        X = rng.standard_normal((n, n))
        P = X @ X.T + 0.5 * n * np.eye(n)
    else:  # singular PSD, positive definite on null(A)
        k = max(1, min(m, n // 3))
        X = rng.standard_normal((n, n - k))
        P = X @ X.T
    A = rng.standard_normal((m, n))
    G = rng.standard_normal((p, n))
    nact = int(rng.integers(0, min(p, n - m) + 1)) if p else 0
    act = np.zeros(p, bool)
    act[rng.choice(p, nact, replace=False)] = True
    xs = rng.standard_normal(n)
    scale = np.linalg.norm(P) / np.sqrt(n)
    ys = rng.standard_normal(m) * scale
    mus = np.where(act, rng.uniform(0.5, 2.0, p) * scale, 0.0)
    b = A @ xs
    h = G @ xs - np.where(act, 0.0, rng.uniform(0.5, 2.0, p) * np.linalg.norm(G, axis=1))
    F = P @ xs - A.T @ ys - G.T @ mus
    R = np.vstack([A, G[act]])
    a, lam, cond = kkt(P, F, R, np.concatenate([b, h[act]]))
    z = np.zeros(p)
    z[act] = lam[m:]
    return dict(P=P, F=F, A=A, b=b, G=G, h=h, a=a, y=lam[:m], z=z, cond=cond, act=act)


def four_bar(th1=np.pi / 3, th2=np.pi / 3, b=(0.3, -0.2)):
    P = np.diag([4 * 12 * 4 / 3, 12 * 4 / 3, 0.0])
    A = np.array([[2 * np.cos(th1), -2 * np.cos(th2), 0.0], [1.0, 0.0, 1.0]])
    F = np.array([450 - 1.5 * 12 * 9.8 * 2 * np.cos(th1), -0.5 * 12 * 9.8 * 2 * np.cos(th2), 0.0])
    return P, F, A, np.asarray(b, dtype=float)


def chain(rng, n):
    """Diagonal P, m = n/2 rows with 3 nonzeros each (sparse)."""
    m = n // 2
    P = sp.diags(rng.uniform(1.0, 10.0, n)).tocsc()
    i = np.arange(m)
    rows = np.repeat(i, 3)
    cols = np.stack([2 * i, 2 * i + 1, (2 * i + 2) % n], 1).ravel()
    A = sp.csr_matrix((rng.standard_normal(3 * m), (rows, cols)), shape=(m, n))
    b = A @ rng.standard_normal(n)
    F = 5.0 * rng.standard_normal(n)
    return P, F, A, b


def sparse_kkt(P, F, A, b):
    n = P.shape[0]
    K = sp.bmat([[P, A.T], [A, None]], format="csc")
    z = spla.spsolve(K, np.concatenate([F, b]))
    return z[:n], -z[n:]


# ----------------------------------------------------------------------
# basic behaviour
# ----------------------------------------------------------------------
def test_four_bar_matches_direct_kkt():
    P, F, A, b = four_bar()
    qp = ClarabelQP(3, 2)
    out = qp.solve(P, -F, A, b)
    assert isinstance(out, QPSolution)
    assert out.status == "optimal" and out.ok and out.attempts == 1
    a, lam, cond = kkt(P, F, A, b)
    assert rel(out.x, a) <= equality_bound(cond)
    assert rel(out.y, lam) <= equality_bound(cond)
    # sign convention P a = F + Aeq^T y
    assert np.allclose(P @ out.x, F + A.T @ out.y, rtol=0, atol=1e-10 * np.abs(F).max())
    assert out.z.shape == (0,)
    assert set(out.residuals) >= {"primal", "dual", "gap"}
    assert out.solve_time > 0


@pytest.mark.parametrize("scaling", ["jacobi", "rows", "none"])
def test_scalings_agree(scaling):
    P, F, A, b = four_bar(0.4, 1.1)
    a, lam, cond = kkt(P, F, A, b)
    out = ClarabelQP(3, 2, scaling=scaling).solve(P, -F, A, b)
    assert out.status == "optimal"
    assert rel(out.x, a) <= equality_bound(cond)


def test_unconstrained_and_sparse_input():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((5, 5))
    P = X @ X.T + np.eye(5)
    F = rng.standard_normal(5)
    out = ClarabelQP(5, 0).solve(sp.csc_matrix(P), -F)
    assert out.status == "optimal"
    assert rel(out.x, np.linalg.solve(P, F)) < 1e-13
    assert out.y.shape == (0,) and out.z.shape == (0,)


def test_status_names_cover_clarabel():
    names = [s for s in dir(clarabel.SolverStatus) if not s.startswith("_")]
    assert set(names) <= set(STATUS_NAMES)
    assert STATUS_NAMES["Solved"] == "optimal"
    assert STATUS_NAMES["AlmostSolved"] == "almost_optimal"


# ----------------------------------------------------------------------
# accuracy against the direct KKT solve
# ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["spd", "psd"])
def test_random_equality_problems_accuracy(kind):
    rng = np.random.default_rng(11 if kind == "spd" else 12)
    worst = 0.0
    for _ in range(120):
        n = int(rng.integers(3, 31))
        m = int(rng.integers(1, n)) if kind == "spd" else int(rng.integers(max(1, n // 3), n))
        d = random_problem(rng, n, m, 0, kind)
        out = ClarabelQP(n, m).solve(d["P"], -d["F"], d["A"], d["b"])
        assert out.status == "optimal", (n, m, out.status)
        err = rel(out.x, d["a"])
        bound = equality_bound(d["cond"], out.iterations)
        assert err <= bound, (n, m, err, d["cond"])
        lam_err = np.linalg.norm(out.y - d["y"]) / max(np.linalg.norm(d["y"]), 1.0)
        assert lam_err <= bound, (n, m, lam_err, d["cond"])
        if d["cond"] < 1e3:
            worst = max(worst, err)
    # well-conditioned problems: ~1e-12 relative or better
    assert worst <= 1e-12


@pytest.mark.parametrize("kind", ["spd", "psd"])
def test_random_inequality_problems_accuracy(kind):
    rng = np.random.default_rng(21 if kind == "spd" else 22)
    for _ in range(80):
        n = int(rng.integers(3, 31))
        m = int(rng.integers(0, n)) if kind == "spd" else int(rng.integers(max(1, n // 3), n))
        p = int(rng.integers(1, n // 2 + 2))
        d = random_problem(rng, n, m, p, kind)
        out = ClarabelQP(n, m, p).solve(d["P"], -d["F"], d["A"], d["b"], d["G"], d["h"])
        assert out.status == "optimal", (n, m, p, out.status)
        bound = inequality_bound(d["cond"])
        assert rel(out.x, d["a"]) <= bound
        lam = np.concatenate([out.y, out.z])
        lam_ref = np.concatenate([d["y"], d["z"]])
        assert np.linalg.norm(lam - lam_ref) / max(np.linalg.norm(lam_ref), 1.0) <= bound
        # KKT check: z >= 0, G a >= h, complementarity, stationarity
        gn = np.linalg.norm(d["G"], axis=1)
        zs = np.abs(d["z"]).max() if d["act"].any() else 1.0
        assert out.z.min() >= -1e-9 * zs
        slack = (d["G"] @ out.x - d["h"]) / gn
        assert slack.min() >= -1e-9 * max(1.0, np.linalg.norm(out.x))
        assert np.abs(out.z * gn * slack).max() <= 1e-8 * zs * max(1.0, np.linalg.norm(out.x))
        r = d["P"] @ out.x - d["F"] - d["A"].T @ out.y - d["G"].T @ out.z
        assert np.linalg.norm(r) <= 1e-9 * (np.linalg.norm(d["P"]) * np.linalg.norm(out.x)
                                            + np.linalg.norm(d["F"]))


# ----------------------------------------------------------------------
# in-place updates and rebuilds
# ----------------------------------------------------------------------
def test_in_place_updates_no_rebuild_over_100_solves():
    qp = ClarabelQP(3, 2)
    for k in range(100):
        # th2 passes through pi/2: A[0, 1] = -2 cos(th2) is exactly 0 there
        th2 = np.pi / 2 if k == 50 else np.pi / 3 + 0.01 * k
        P, F, A, b = four_bar(np.pi / 3 - 0.005 * k, th2, (0.1 * np.sin(k), 0.0))
        if k == 50:
            A[0, 1] = 0.0
        out = qp.solve(P, -F, A, b)
        a, lam, cond = kkt(P, F, A, b)
        assert out.status == "optimal"
        assert rel(out.x, a) <= equality_bound(cond)
        assert out.rebuilt == (k == 0)
    assert qp.builds == 1 and qp.rebuilds == 0
    assert qp.updates == 99
    assert qp.is_data_update_allowed()


def test_update_gives_the_same_numbers_as_a_fresh_build():
    rng = np.random.default_rng(5)
    d1 = random_problem(rng, 8, 3, 2, "spd")
    d2 = random_problem(rng, 8, 3, 2, "psd")
    qp = ClarabelQP(8, 3, 2)
    qp.solve(d1["P"], -d1["F"], d1["A"], d1["b"], d1["G"], d1["h"])
    r_upd = qp.solve(d2["P"], -d2["F"], d2["A"], d2["b"], d2["G"], d2["h"])
    r_new = ClarabelQP(8, 3, 2).solve(d2["P"], -d2["F"], d2["A"], d2["b"], d2["G"], d2["h"])
    assert qp.builds == 1
    # own per-solve scaling, Clarabel's equilibration off: history-independent
    np.testing.assert_array_equal(r_upd.x, r_new.x)
    np.testing.assert_array_equal(r_upd.z, r_new.z)


def test_solve_values_in_place_and_into_out_give_the_numbers_of_a_fresh_build():
    # the fast entry of the QP step: values on the built dense patterns, the solver
    # updated in place (the matrix values as a list subclass, clarabel_qp._Values), the
    # solution written into the caller's arrays; the numbers of a solver built on them
    rng = np.random.default_rng(11)
    n, m, p = 5, 2, 1
    qp = ClarabelQP(n, m, p, P_pattern=np.ones((n, n)), A_pattern=np.ones((m + p, n)))
    xs, zs = np.empty(n), np.empty(m + p)
    for k in range(3):
        d = random_problem(rng, n, m, p, "spd")
        Pv = np.concatenate([d["P"][: j + 1, j] for j in range(n)])   # upper, by columns
        Av = np.vstack([d["A"], -d["G"]]).T.ravel()                    # by columns
        qv, bv = -d["F"], np.concatenate([d["b"], -d["h"]])
        first = qp._scale(Pv, qv, Av, bv, "jacobi")
        out = qp.solve_values(Pv, qv, Av, bv, first, (xs, zs))
        assert out[0] is xs and out[1] is zs and out[5] == "Solved"
        new = qp.solve_values(Pv, qv, Av, bv, first)
        np.testing.assert_array_equal(new[0], xs)
        np.testing.assert_array_equal(new[1], zs)
        fresh = ClarabelQP(n, m, p, P_pattern=np.ones((n, n)), A_pattern=np.ones((m + p, n)))
        ref = fresh.solve_values(Pv, qv, Av, bv, first)
        np.testing.assert_array_equal(ref[0], xs)
        np.testing.assert_array_equal(ref[1], zs)
    assert qp.builds == 1 and qp.updates == 6
    # zs None: the dual solution is not asked for
    assert qp.solve_values(Pv, qv, Av, bv, first, (xs, None))[1] is None


def test_unchanged_P_is_not_sent_again_and_changes_are_seen():
    # the fast entry leaves P out of the update when its (scaled) values are those the
    # solver already holds (a constant mass matrix); a changed P must reach the solver:
    # the problems 1, 1, 2, 1 give every time the numbers of a solver built on them
    rng = np.random.default_rng(5)
    n, m, p = 4, 2, 1
    pat = dict(P_pattern=np.ones((n, n)), A_pattern=np.ones((m + p, n)))
    qp = ClarabelQP(n, m, p, **pat)
    d1, d2 = (random_problem(rng, n, m, p, "spd") for _ in range(2))
    sent = []
    for d in (d1, d1, d2, d1):
        P = d["P"]
        Pv = np.concatenate([P[: j + 1, j] for j in range(n)])
        Av = np.vstack([d["A"], -d["G"]]).T.ravel()
        qv, bv = -d["F"], np.concatenate([d["b"], -d["h"]])
        first = qp._scale(Pv, qv, Av, bv, "jacobi")
        before = qp._P_last
        got = qp.solve_values(Pv, qv, Av, bv, first)
        sent.append(before is None or not np.array_equal(before, first[0]))
        ref = ClarabelQP(n, m, p, **pat).solve_values(Pv, qv, Av, bv, first)
        assert got[5] == "Solved"
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])
    assert sent == [True, False, True, True]


def test_entry_point_falls_back_to_the_dispatcher():
    import gaussopt.gauss.solvers.qp.compiled_qp as QS

    args = (np.zeros(3, dtype=np.int32),)          # a type never compiled
    assert QS.entry_point(QS._norm, args) is QS._norm
    x = np.array([3.0, 4.0])
    assert QS._norm(x) == 5.0
    f = QS.entry_point(QS._norm, (x,))
    assert f(x) == 5.0


def test_sparse_subset_pattern_stays_in_place_and_change_rebuilds():
    rng = np.random.default_rng(8)
    n, m = 6, 2
    Pd = np.diag(rng.uniform(1, 2, n))
    Pd[0, 1] = Pd[1, 0] = 0.3
    A = np.zeros((m, n))
    A[0, :3] = rng.standard_normal(3)
    A[1, 3:] = rng.standard_normal(3)
    b = rng.standard_normal(m)
    F = rng.standard_normal(n)
    qp = ClarabelQP(n, m)
    qp.solve(sp.csc_matrix(Pd), -F, sp.csr_matrix(A), b)
    assert qp.builds == 1
    # the coupling entry vanishes: scipy drops it, pattern is a subset -> in place
    P2 = Pd.copy()
    P2[0, 1] = P2[1, 0] = 0.0
    out = qp.solve(sp.csc_matrix(P2), -F, sp.csr_matrix(A), b)
    assert qp.builds == 1 and not out.rebuilt
    assert rel(out.x, kkt(P2, F, A, b)[0]) < 1e-12
    # a new coupling entry (2, 3): rebuild, on the union of the patterns
    P3 = Pd.copy()
    P3[2, 3] = P3[3, 2] = 0.2
    out = qp.solve(sp.csc_matrix(P3), -F, sp.csr_matrix(A), b)
    assert qp.builds == 2 and qp.rebuilds == 1 and out.rebuilt
    assert rel(out.x, kkt(P3, F, A, b)[0]) < 1e-12
    # back to the first pattern: a subset of the union -> in place
    qp.solve(sp.csc_matrix(Pd), -F, sp.csr_matrix(A), b)
    assert qp.builds == 2
    # a row pattern change rebuilds too
    A2 = A.copy()
    A2[0, 5] = 1.0
    out = qp.solve(sp.csc_matrix(Pd), -F, sp.csr_matrix(A2), b)
    assert qp.builds == 3 and out.rebuilt
    assert rel(out.x, kkt(Pd, F, A2, b)[0]) < 1e-12
    # reset: the next solve builds on its own pattern
    qp.reset()
    assert not qp.built
    out = qp.solve(sp.csc_matrix(Pd), -F, sp.csr_matrix(A), b)
    assert qp.builds == 4 and out.rebuilt and qp._Ppat.nnz == n + 1


def test_patterns_in_constructor_build_once():
    n, m, p = 4, 1, 1
    P_pat = sp.diags(np.ones(n)).tocsc()
    A_pat = (np.array([[1, 1, 0, 0]]), np.array([[0, 0, 0, 1]]))
    qp = ClarabelQP(n, m, p, P_pattern=P_pat, A_pattern=A_pat)
    assert qp.built and qp.builds == 1 and qp.is_data_update_allowed()
    rng = np.random.default_rng(2)
    for _ in range(5):
        M = np.diag(rng.uniform(1, 3, n))
        F = rng.standard_normal(n)
        Aeq = np.array([[rng.uniform(0.5, 1), rng.uniform(0.5, 1), 0, 0]])
        out = qp.solve(sp.csc_matrix(M), -F, sp.csr_matrix(Aeq), [0.0],
                       sp.csr_matrix(np.array([[0, 0, 0, 1.0]])), [-1e3])
        assert out.status == "optimal" and out.z[0] < 1e-9
        assert rel(out.x, kkt(M, F, Aeq, np.zeros(1))[0]) < 1e-11
        # dense input of the same structure: gathered into the pattern, in place
        out2 = qp.solve(M, -F, Aeq, [0.0], np.array([[0, 0, 0, 1.0]]), [-1e3])
        assert rel(out2.x, out.x) < 1e-12
    assert qp.builds == 1


def test_explicit_zero_of_dense_input_keeps_pattern():
    P, F, A, b = four_bar(np.pi / 2, np.pi / 2)  # A[0] = (0, 0, 0) up to rounding
    A[0] = [0.0, 0.0, 0.0]
    b = np.array([0.0, -0.2])
    qp = ClarabelQP(3, 2)
    out = qp.solve(P, -F, A, b)  # zero row with zero rhs: consistent
    assert out.status == "optimal"
    P, F, A, b = four_bar()
    out = qp.solve(P, -F, A, b)
    assert qp.builds == 1 and out.status == "optimal"
    assert rel(out.x, kkt(P, F, A, b)[0]) < 1e-12


# ----------------------------------------------------------------------
# inequality rows: point mass on a floor
# ----------------------------------------------------------------------
@pytest.mark.parametrize("Fy,active", [(-50.0, True), (80.0, False), (0.0, True)])
def test_point_mass_on_floor(Fy, active):
    """m = 2 kg at rest on the floor y = 0: acceleration-level contact a_y >= 0."""
    mass, g = 2.0, 9.81
    M = mass * np.eye(2)
    F = np.array([3.0, Fy - mass * g])  # applied force + gravity
    G = np.array([[0.0, 1.0]])
    h = np.array([0.0])
    qp = ClarabelQP(2, 0, 1)
    out = qp.solve(M, -F, None, None, G, h)
    assert out.status == "optimal"
    assert out.z[0] >= 0.0
    gap = (G @ out.x - h)[0]
    assert gap >= -1e-12
    assert abs(out.z[0] * gap) <= 1e-10 * mass * g
    np.testing.assert_allclose(M @ out.x, F + G.T @ out.z, rtol=0, atol=1e-10 * mass * g)
    assert out.x[0] == pytest.approx(3.0 / mass, rel=1e-12)
    if active and Fy < 0:
        assert abs(out.x[1]) <= 1e-12 * g
        assert out.z[0] == pytest.approx(mass * g - Fy, rel=1e-11)
    elif active:  # Fy = 0: gravity alone, contact carries the weight
        assert out.z[0] == pytest.approx(mass * g, rel=1e-11)
    else:  # pushed up harder than gravity: lifts off, no contact force
        assert out.x[1] == pytest.approx((Fy - mass * g) / mass, rel=1e-11)
        assert out.z[0] <= 1e-11 * mass * g


def test_floor_with_equalities_and_sparse_rows():
    """Two masses joined by a rod of fixed length (equality) and a floor under each."""
    M = sp.diags([1.0, 1.0, 2.0, 2.0]).tocsc()
    F = np.array([0.0, -9.81, 1.0, -2 * 9.81])
    Aeq = sp.csr_matrix(np.array([[1.0, 0.0, -1.0, 0.0]]))  # x1 - x2 accelerations equal
    G = sp.csr_matrix(np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]))
    qp = ClarabelQP(4, 1, 2)
    out = qp.solve(M, -F, Aeq, [0.0], G, [0.0, 0.0])
    assert out.status == "optimal"
    assert np.all(out.z >= 0)
    np.testing.assert_allclose(out.z, [9.81, 2 * 9.81], rtol=1e-11)
    np.testing.assert_allclose(out.x, [1 / 3, 0, 1 / 3, 0], atol=1e-12)


# ----------------------------------------------------------------------
# failures are statuses, not exceptions
# ----------------------------------------------------------------------
def test_infeasible_equalities_status():
    P = np.diag([2.0, 1.0, 1.0])
    A = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    b = np.array([1.0, 2.0])
    out = ClarabelQP(3, 2).solve(P, np.ones(3), A, b)
    assert out.status == "primal_infeasible"
    assert out.attempts == 1


def test_infeasible_inequalities_and_unbounded_status():
    out = ClarabelQP(1, 0, 2).solve(np.eye(1), np.zeros(1), G=[[1.0], [-1.0]], h=[1.0, 0.0])
    assert out.status == "primal_infeasible"
    # P singular on null(A) and a force along it: unbounded
    out = ClarabelQP(2, 1).solve(np.diag([1.0, 0.0]), [0.0, -1.0], [[1.0, 0.0]], [0.0])
    assert out.status == "dual_infeasible"


def test_iteration_limit_and_fallback():
    rng = np.random.default_rng(4)
    d = random_problem(rng, 6, 2, 3, "spd")
    args = (d["P"], -d["F"], d["A"], d["b"], d["G"], d["h"])
    out = ClarabelQP(6, 2, 3, settings={"max_iter": 1}, fallback=False).solve(*args)
    assert out.status == "max_iterations" and out.attempts == 1
    qp = ClarabelQP(6, 2, 3, settings={"max_iter": 1})
    out = qp.solve(*args)
    assert out.status == "max_iterations" and out.attempts == 3 and qp.fallbacks == 1
    assert qp.builds == 1
    # the settings are restored after the fallback
    assert qp.solve(*args).attempts == 3


def test_value_errors():
    qp = ClarabelQP(3, 2)
    P, F, A, b = four_bar()
    with pytest.raises(ValueError, match="P has shape"):
        qp.solve(np.eye(2), -F, A, b)
    with pytest.raises(ValueError, match="q has shape"):
        qp.solve(P, -F[:2], A, b)
    with pytest.raises(ValueError, match="Aeq has shape"):
        qp.solve(P, -F, A[:1], b)
    with pytest.raises(ValueError, match="NaN or inf"):
        qp.solve(P, -F, A, np.array([np.nan, 0.0]))
    Pinf = P.copy()
    Pinf[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        qp.solve(sp.csc_matrix(Pinf), -F, A, b)
    with pytest.raises(ValueError, match="required"):
        qp.solve(P, -F, None, None)
    with pytest.raises(ValueError, match="G and h are required"):
        ClarabelQP(3, 0, 1).solve(P, -F)
    with pytest.raises(ValueError, match="not a real numeric"):
        qp.solve(P, ["a", "b", "c"], A, b)
    with pytest.raises(ValueError, match="n must be >= 1"):
        ClarabelQP(0, 1)
    with pytest.raises(ValueError, match="unknown Clarabel setting"):
        ClarabelQP(3, 1, settings={"no_such_setting": 1})
    with pytest.raises(ValueError, match="scaling"):
        ClarabelQP(3, 1, scaling="ruiz")


def test_forced_settings():
    s = clarabel.DefaultSettings()
    s.presolve_enable = True
    qp = ClarabelQP(3, 2, settings=s)
    assert qp.settings.presolve_enable is False
    assert qp.settings.chordal_decomposition_enable is False
    assert qp.settings.input_sparse_dropzeros is False


# ----------------------------------------------------------------------
# large sparse problem
# ----------------------------------------------------------------------
def test_sparse_n2000_in_place_and_memory():
    rng = np.random.default_rng(0)
    n = 2000
    qp = ClarabelQP(n, n // 2)
    for k in range(4):
        P, F, A, b = chain(rng, n)
        if k == 3:
            tracemalloc.start()
        out = qp.solve(P, -F, A, b)
        if k == 3:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            # O(nnz) Python-side work: a dense n x n float array would be 32 MB
            assert peak < 4e6, peak
        a, lam = sparse_kkt(P, F, A, b)
        assert out.status == "optimal"
        assert rel(out.x, a) < 1e-12
        assert rel(out.y, lam) < 1e-12
    assert qp.builds == 1 and qp.updates == 3
    # Clarabel's KKT system and factor are O(nnz) too
    info = qp._solver.get_info().linsolver
    nnz = n + 3 * (n // 2)
    assert info.nnzA <= 2 * (nnz + n + n // 2)
    assert info.nnzL <= 4 * nnz


# ----------------------------------------------------------------------
# threads
# ----------------------------------------------------------------------
def test_threads_share_one_solver():
    n, m, p = 7, 3, 2
    qp = ClarabelQP(n, m, p)
    nthreads, per_thread = 8, 40
    barrier = threading.Barrier(nthreads)
    errors: list = []

    def work(seed):
        rng = np.random.default_rng(seed)
        problems = [random_problem(rng, n, m, p, "spd" if k % 2 else "psd") for k in range(per_thread)]
        barrier.wait()
        for d in problems:
            out = qp.solve(d["P"], -d["F"], d["A"], d["b"], d["G"], d["h"])
            if out.status != "optimal":
                errors.append(("status", seed, out.status))
            elif rel(out.x, d["a"]) > inequality_bound(d["cond"]):
                errors.append(("x", seed, rel(out.x, d["a"]), d["cond"]))
            elif np.linalg.norm(np.concatenate([out.y - d["y"], out.z - d["z"]])) > (
                    inequality_bound(d["cond"])
                    * max(np.linalg.norm(np.concatenate([d["y"], d["z"]])), 1.0)):
                errors.append(("multipliers", seed))

    threads = [threading.Thread(target=work, args=(100 + i,)) for i in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    assert qp.builds == 1
    assert qp.updates == nthreads * per_thread - 1
