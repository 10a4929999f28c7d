"""Tests of gaussopt.solvers.qp_kernel (DPP cvxpy kernel of the Gauss QP)."""

from __future__ import annotations

import numpy as np
import pytest

from gaussopt.exceptions import SolverError
from gaussopt.solvers.qp_kernel import QPKernel, QPOutcome, available_solvers


# ----------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------
def kkt_solution(M, F, A, b):
    """Exact solution of min 0.5 a'Ma - F'a s.t. A a = b via numpy lstsq.

    Solves [[M, A^T], [A, 0]] [a; -lam] = [F; b], i.e. M a = F + A^T lam.
    For redundant A the multipliers are the minimum-norm ones (a is unique).
    """
    n, m = M.shape[0], A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    z = np.linalg.lstsq(K, np.concatenate([F, b]), rcond=None)[0]
    return z[:n], -z[n:]


def rel_err(x, y):
    return np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-300)


def random_spd(rng, n, scale):
    X = rng.standard_normal((n, n))
    return scale * (X @ X.T + 0.5 * n * np.eye(n))


def random_psd_singular(rng, n, k, scale):
    """Rank n-k PSD matrix."""
    X = rng.standard_normal((n, n - k))
    return scale * (X @ X.T)


def assert_kkt(M, F, A, b, out, a_ex, *, rtol_a=1e-8, tol_feas=1e-9, tol_stat=1e-8):
    assert isinstance(out, QPOutcome)
    assert out.status == "optimal"
    assert rel_err(out.a, a_ex) < rtol_a
    # A a = b in the row-normalised sense
    rn = np.linalg.norm(A, axis=1)
    assert np.max(np.abs(A @ out.a - b) / rn) < tol_feas * max(1.0, np.linalg.norm(out.a))
    # stationarity M a = F + A^T lam, relative to the size of the terms
    r = M @ out.a - F - A.T @ out.lam
    scale = np.linalg.norm(M @ out.a) + np.linalg.norm(F) + np.linalg.norm(A.T @ out.lam)
    assert np.linalg.norm(r) < tol_stat * scale


# ----------------------------------------------------------------------
# DPP / construction
# ----------------------------------------------------------------------
@pytest.mark.parametrize("n,m,p", [(1, 0, 0), (3, 2, 0), (5, 0, 2), (6, 3, 4), (4, 4, 1)])
def test_problem_is_dpp(n, m, p):
    k = QPKernel(n, m, p)
    assert k.problem.is_dpp()
    assert k.solver == "CLARABEL"
    assert len(k.problem.constraints) == (m > 0) + (p > 0)


def test_bad_solver_name():
    with pytest.raises(ValueError, match=r"solver='NOPE'.*installed choices"):
        QPKernel(3, 1, solver="NOPE")
    # LP-only backends are not offered
    with pytest.raises(ValueError, match="solver"):
        QPKernel(3, 1, solver="SCIPY")


def test_bad_dimensions():
    with pytest.raises(ValueError, match="n must be >= 1"):
        QPKernel(0, 1)
    with pytest.raises(ValueError, match="m must be >= 0"):
        QPKernel(3, -1)


def test_solver_name_case_insensitive():
    assert QPKernel(2, 1, solver="clarabel").solver == "CLARABEL"


@pytest.mark.parametrize(
    "bad, match",
    [
        ("M", r"M has shape \(3, 2\), expected \(3, 3\)"),
        ("F", r"F has shape \(4,\), expected \(3,\)"),
        ("A", r"A has shape \(1, 3\), expected \(2, 3\)"),
        ("b", r"b has shape \(3,\), expected \(2,\)"),
    ],
)
def test_shape_mismatch(bad, match):
    k = QPKernel(3, 2)
    data = dict(M=2.0 * np.eye(3), F=np.ones(3), A=np.ones((2, 3)), b=np.ones(2))
    wrong = dict(M=np.ones((3, 2)), F=np.ones(4), A=np.ones((1, 3)), b=np.ones(3))
    data[bad] = wrong[bad]
    with pytest.raises(ValueError, match=match):
        k.solve(**data)


def test_inequality_shape_mismatch_and_missing():
    k = QPKernel(2, 0, 1)
    with pytest.raises(ValueError, match="G and h are required"):
        k.solve(np.eye(2), np.ones(2), None, None)
    with pytest.raises(ValueError, match=r"G has shape \(2, 2\), expected \(1, 2\)"):
        k.solve(np.eye(2), np.ones(2), None, None, np.eye(2), np.zeros(1))


def test_nonfinite_input():
    k = QPKernel(2, 1)
    with pytest.raises(ValueError, match="NaN or inf"):
        k.solve(np.eye(2), np.array([np.nan, 1.0]), np.ones((1, 2)), np.ones(1))


# ----------------------------------------------------------------------
# accuracy against the KKT solution
# ----------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mscale", [37.5, 2.3e-4, 4.1e5])
def test_spd_full_rank(seed, mscale):
    rng = np.random.default_rng(seed)
    n, m = 7, 3
    M = random_spd(rng, n, mscale)
    F = 12.5 * rng.standard_normal(n)
    A = 3.3 * rng.standard_normal((m, n))
    b = -4.2 * rng.standard_normal(m)
    a_ex, lam_ex = kkt_solution(M, F, A, b)
    out = QPKernel(n, m).solve(M, F, A, b)
    assert_kkt(M, F, A, b, out, a_ex)
    # full-rank A: multipliers are unique -> sign convention M a = F + A^T lam
    assert rel_err(out.lam, lam_ex) < 1e-7
    assert out.mu.shape == (0,)
    assert out.solver == "CLARABEL" and out.solve_time > 0


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_psd_singular_redundant(seed):
    rng = np.random.default_rng(seed)
    n, k, m = 8, 3, 4
    M = random_psd_singular(rng, n, k, 6.7)
    assert np.linalg.matrix_rank(M) == n - k
    F = 2.9 * rng.standard_normal(n)
    A = 1.7 * rng.standard_normal((m, n))
    b = 0.8 * rng.standard_normal(m)
    # redundant but consistent row: 3.7 * row 0
    A = np.vstack([A, 3.7 * A[0]])
    b = np.concatenate([b, 3.7 * b[:1]])
    # uniqueness: [M; A] has full column rank
    assert np.linalg.matrix_rank(np.vstack([M, A])) == n
    a_ex, _ = kkt_solution(M, F, A, b)
    out = QPKernel(n, m + 1).solve(M, F, A, b)
    assert_kkt(M, F, A, b, out, a_ex)


def test_psd_singular_full_rank_multipliers():
    rng = np.random.default_rng(11)
    n, k, m = 6, 2, 3
    M = random_psd_singular(rng, n, k, 0.45)
    F = 9.81 * rng.standard_normal(n)
    A = rng.standard_normal((m, n))
    b = 2.2 * rng.standard_normal(m)
    a_ex, lam_ex = kkt_solution(M, F, A, b)
    out = QPKernel(n, m).solve(M, F, A, b)
    assert_kkt(M, F, A, b, out, a_ex)
    assert rel_err(out.lam, lam_ex) < 1e-7


def test_zero_row_is_dropped():
    rng = np.random.default_rng(7)
    n = 4
    M = random_spd(rng, n, 3.1)
    F = rng.standard_normal(n)
    A = np.vstack([rng.standard_normal((2, n)), np.zeros((1, n))])
    b = np.array([0.3, -1.4, 0.0])
    a_ex, lam_ex = kkt_solution(M, F, A[:2], b[:2])
    out = QPKernel(n, 3).solve(M, F, A, b)
    assert rel_err(out.a, a_ex) < 1e-8
    assert out.lam[2] == 0.0
    assert rel_err(out.lam[:2], lam_ex) < 1e-7


def test_unconstrained_m0():
    rng = np.random.default_rng(8)
    n = 5
    M = random_spd(rng, n, 2.6)
    F = rng.standard_normal(n)
    k = QPKernel(n, 0)
    for A, b in [(None, None), (np.zeros((0, n)), np.zeros(0))]:
        out = k.solve(M, F, A, b)
        assert rel_err(out.a, np.linalg.solve(M, F)) < 1e-9
        assert out.lam.shape == (0,) and out.mu.shape == (0,)


def test_pendulum_tension():
    """Point mass on a rigid rod (planar pendulum at rest position offset)."""
    mass, g, L = 2.5, 9.81, 1.3
    th = 0.4
    x = np.array([L * np.sin(th), -L * np.cos(th)])
    v = np.array([0.7 * np.cos(th), 0.7 * np.sin(th)])  # tangential velocity
    M = mass * np.eye(2)
    F = np.array([0.0, -mass * g])
    # d^2/dt^2 |x|^2 = 0  ->  x . a = -|v|^2
    A = x[None, :]
    b = np.array([-v @ v])
    out = QPKernel(2, 1).solve(M, F, A, b)
    # hand solution: rod force along x; tension T = m (|v|^2/L + g cos th)
    T = mass * (v @ v / L + g * np.cos(th))
    a_hand = F / mass - T / mass * x / L
    assert rel_err(out.a, a_hand) < 1e-9
    # M a = F + A^T lam  ->  A^T lam = -T x / L  ->  lam = -T / L
    assert out.lam[0] == pytest.approx(-T / L, rel=1e-8)


# ----------------------------------------------------------------------
# inequalities
# ----------------------------------------------------------------------
def test_floor_contact_active():
    """2-D point mass under gravity on a floor a_y >= 0: contact force m g."""
    mass, g, fx = 3.2, 9.81, 1.7
    M = mass * np.eye(2)
    F = np.array([fx, -mass * g])
    G = np.array([[0.0, 1.0]])
    h = np.array([0.0])
    out = QPKernel(2, 0, 1).solve(M, F, None, None, G, h)
    assert out.status == "optimal"
    np.testing.assert_allclose(out.a, [fx / mass, 0.0], rtol=1e-9, atol=1e-9)
    assert out.mu[0] > 0
    assert out.mu[0] == pytest.approx(mass * g, rel=1e-8)
    np.testing.assert_allclose(M @ out.a, F + G.T @ out.mu, atol=1e-8)


def test_floor_contact_scaled_row():
    """Same floor written as 5.5 a_y >= 0: mu is in the caller's row units."""
    mass, g = 3.2, 9.81
    M = mass * np.eye(2)
    F = np.array([0.0, -mass * g])
    G = np.array([[0.0, 5.5]])
    out = QPKernel(2, 0, 1).solve(M, F, None, None, G, np.zeros(1))
    assert out.mu[0] == pytest.approx(mass * g / 5.5, rel=1e-8)


def test_floor_lift_off():
    """Upward pull larger than the weight: the contact opens, mu ~ 0."""
    mass, g, pull = 3.2, 9.81, 45.0
    M = mass * np.eye(2)
    F = np.array([-0.6, pull - mass * g])
    G = np.array([[0.0, 1.0]])
    h = np.array([0.0])
    out = QPKernel(2, 0, 1).solve(M, F, None, None, G, h)
    np.testing.assert_allclose(out.a, F / mass, rtol=1e-9)
    assert out.a[1] > 0
    assert abs(out.mu[0]) < 1e-8 * mass * g
    assert out.mu[0] >= 0


@pytest.mark.parametrize("seed", [21, 22])
def test_random_with_active_inequality(seed):
    rng = np.random.default_rng(seed)
    n, m = 6, 2
    M = random_spd(rng, n, 14.0)
    F = 3.0 * rng.standard_normal(n)
    A = rng.standard_normal((m, n))
    b = rng.standard_normal(m)
    a0, _ = kkt_solution(M, F, A, b)
    g1 = rng.standard_normal(n)
    g2 = rng.standard_normal(n)
    # row 1 violated by a0 (becomes active), row 2 strictly satisfied (inactive)
    G = np.vstack([g1, g2])
    h = np.array([g1 @ a0 + 2.0, g2 @ a0 - 5.0])
    a_ex, lam_ex = kkt_solution(M, F, np.vstack([A, g1]), np.concatenate([b, h[:1]]))
    assert lam_ex[-1] > 0  # really active with a positive multiplier
    out = QPKernel(n, m, 2).solve(M, F, A, b, G, h)
    assert out.status == "optimal"
    assert rel_err(out.a, a_ex) < 1e-8
    assert rel_err(out.lam, lam_ex[:m]) < 1e-7
    assert out.mu[0] == pytest.approx(lam_ex[-1], rel=1e-7)
    assert abs(out.mu[1]) < 1e-8 * abs(lam_ex[-1])
    r = M @ out.a - F - A.T @ out.lam - G.T @ out.mu
    assert np.linalg.norm(r) < 1e-8 * (np.linalg.norm(F) + np.linalg.norm(M @ out.a))


def test_dual_sign_convention_raw_cvxpy():
    """Document cvxpy's raw dual signs that the kernel converts."""
    k = QPKernel(2, 1, 1)
    mass, g = 1.9, 9.81
    M = mass * np.eye(2)
    F = np.array([0.0, -mass * g])
    A = np.array([[1.0, 0.0]])  # a_x = 0.5 (pushed sideways)
    b = np.array([0.5])
    G = np.array([[0.0, 1.0]])  # a_y >= 0
    out = k.solve(M, F, A, b, G, np.zeros(1))
    eq, ineq = k.problem.constraints
    # kernel: lam = mass * 0.5 (force needed to push), mu = m g
    assert out.lam[0] == pytest.approx(mass * 0.5, rel=1e-8)
    assert out.mu[0] == pytest.approx(mass * g, rel=1e-8)
    # cvxpy: equality dual has the opposite sign, inequality dual the same
    assert eq.dual_value[0] < 0
    assert ineq.dual_value[0] > 0


def test_infeasible_raises_solver_error():
    k = QPKernel(2, 0, 2)
    G = np.array([[0.0, 1.0], [0.0, -1.0]])  # a_y >= 1 and a_y <= -1
    h = np.array([1.0, 1.0])
    with pytest.raises(SolverError, match=r"CLARABEL.*infeasible"):
        k.solve(np.eye(2), np.zeros(2), None, None, G, h)


# ----------------------------------------------------------------------
# other backends (looser accuracy)
# ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "solver, rtol",
    [("OSQP", 1e-7), ("SCS", 1e-3), ("HIGHS", 1e-4)],
)
def test_other_backends(solver, rtol):
    if solver not in available_solvers():
        pytest.skip(f"{solver} not installed")
    rng = np.random.default_rng(31)
    n, m = 5, 2
    M = random_spd(rng, n, 4.4)
    F = rng.standard_normal(n)
    A = rng.standard_normal((m, n))
    b = rng.standard_normal(m)
    G = rng.standard_normal((1, n))
    a0, _ = kkt_solution(M, F, A, b)
    h = np.array([G[0] @ a0 + 1.0])  # active
    a_ex, lam_ex = kkt_solution(M, F, np.vstack([A, G]), np.concatenate([b, h]))
    k = QPKernel(n, m, 1, solver=solver)
    for _ in range(2):  # second solve goes through cvxpy's cached path
        out = k.solve(M, F, A, b, G, h)
        assert out.solver == solver
        assert out.status in ("optimal", "optimal_inaccurate")
        assert rel_err(out.a, a_ex) < rtol
        assert rel_err(np.concatenate([out.lam, out.mu]), lam_ex) < 100 * rtol


def test_user_options_override():
    k = QPKernel(3, 1, solver="OSQP", solver_options={"eps_abs": 1e-7})
    assert k.solver_options["eps_abs"] == 1e-7
    assert k.solver_options["polishing"] is True


# ----------------------------------------------------------------------
# re-solving: no rebuild, timing report
# ----------------------------------------------------------------------
def test_resolve_reuses_problem():
    rng = np.random.default_rng(42)
    n, m = 3, 2
    k = QPKernel(n, m)
    prob_id = id(k.problem)
    prob = k.problem
    times = []
    worst = 0.0
    for _ in range(200):
        M = random_spd(rng, n, 1.5)
        F = rng.standard_normal(n)
        A = rng.standard_normal((m, n))
        b = rng.standard_normal(m)
        out = k.solve(M, F, A, b)
        a_ex, _ = kkt_solution(M, F, A, b)
        worst = max(worst, rel_err(out.a, a_ex))
        times.append(out.solve_time)
        assert id(k.problem) == prob_id and k.problem is prob
    assert worst < 1e-8
    print(
        f"\nQPKernel(n=3, m=2, CLARABEL): median solve {np.median(times) * 1e3:.3f} ms "
        f"over 200 solves, worst rel. error vs KKT {worst:.2e}"
    )
