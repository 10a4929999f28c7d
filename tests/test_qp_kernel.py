"""Tests of gaussopt.gauss.solvers.qp.cvxpy_qp (DPP cvxpy kernel of the Gauss QP).

Tolerances are derived from the backends' tolerances. Clarabel runs at
``tol_feas = tol_gap_rel = 1e-12``: its result is the exact solution of a problem
perturbed by about ``QP_ACCURACY = 1e-12`` relative (tests/reference_step.py),
so ``a`` is within test_step_properties.step_error_bound at that backward
error of the exact solution (the 50-digit ``reference_step.reference_solution``); its
residual tests bound the row-normalized primal residual by ``1e-12 max(1, |b|,
|a|)`` and the dual residual by ``1e-12 max(1, |F|, |M a|, |A^T lam|)`` (in the
kernel's scaled units, ``1`` = ``trace(M)/n``); the multipliers inherit the dual
residual and ``|M| |da|`` through ``1 / sigma_min(A)``. The other backends at
their documented accuracies (module docstring of qp_kernel).
"""

from __future__ import annotations

import numpy as np
import pytest

from gaussopt.core.exceptions import SolverError
from gaussopt.gauss.solvers.qp.cvxpy_qp import QPKernel, QPOutcome, available_solvers
from reference_step import QP_ACCURACY, bound_constant, reference_solution
from test_step_properties import step_error_bound

EPS = float(np.finfo(float).eps)

#: documented accuracies of the other backends (gaussopt/solvers/qp_kernel.py): OSQP's
#: ADMM iterate ~1e-7 (polishing usually reaches ~1e-12), SCS "typically 1e-5 .. 1e-7",
#: HiGHS "~1e-6 with default options"
BACKEND_ACCURACY = {"CLARABEL": QP_ACCURACY, "OSQP": 1e-7, "SCS": 1e-5, "HIGHS": 1e-6}


class Bounds:
    """Error bounds of a QP result for min 0.5 a'Ma - F'a s.t. A a = b (active rows included)."""

    def __init__(self, M, F, A, b, acc=QP_ACCURACY):
        n = F.size
        A = np.zeros((0, n)) if A is None else np.asarray(A, dtype=float).reshape(-1, n)
        b = np.zeros(0) if b is None else np.asarray(b, dtype=float)
        self.M, self.F, self.A, self.b, self.acc = M, F, A, b, acc
        ref = reference_solution(M, F, A, b)
        self.a = np.asarray(ref.a, dtype=float)                  # exact to 50 digits
        # forward error of a: the backend's backward error, plus the rounding of the
        # kernel's own scaling (C eps), through step_error_bound
        self.da = step_error_bound(M, F, A, b, self.a, acc + bound_constant(n, A.shape[0]) * EPS)
        # the exact multipliers from the exact a (rounding: C eps |M a - F| / sigma_min)
        self.Qc = M @ self.a - F
        self.smin = float(np.linalg.svd(A, compute_uv=False).min()) if A.shape[0] else np.inf
        self.lam = np.linalg.lstsq(A.T, self.Qc, rcond=None)[0] if A.shape[0] else np.zeros(0)

    def stationarity(self, out_a, out_lam):
        """The dual residual test, 2-norm: sqrt(n) acc max(trace(M)/n, |F|, |M a|, |A^T lam|)
        plus the rounding of the residual ((n + m + 1) eps of its terms)."""
        n = self.F.size
        AT = self.A.T @ out_lam if self.A.shape[0] else np.zeros(n)
        terms = max(np.trace(self.M) / n, np.abs(self.F).max(), np.abs(self.M @ out_a).max(),
                    np.abs(AT).max())
        return (np.sqrt(n) * self.acc * terms
                + (n + self.A.shape[0] + 1) * EPS * (np.linalg.norm(self.M @ out_a)
                                                      + np.linalg.norm(self.F) + np.linalg.norm(AT)))

    def lam_error(self, out_a, out_lam):
        """|lam - lam*|: A^T (lam - lam*) = (dual residual) - M (a - a*) - (lam*'s rounding)."""
        return ((self.stationarity(out_a, out_lam) + np.linalg.norm(self.M, 2) * self.da
                 + bound_constant(*self.A.shape[::-1]) * EPS * np.linalg.norm(self.Qc)) / self.smin)


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


def random_spd(rng, n, scale):
    X = rng.standard_normal((n, n))
    return scale * (X @ X.T + 0.5 * n * np.eye(n))


def random_psd_singular(rng, n, k, scale):
    """Rank n-k PSD matrix."""
    X = rng.standard_normal((n, n - k))
    return scale * (X @ X.T)


def assert_kkt(M, F, A, b, out, bounds: Bounds):
    assert isinstance(out, QPOutcome)
    assert out.status == "optimal"
    assert np.linalg.norm(out.a - bounds.a) <= bounds.da
    # A a = b in the row-normalised sense: Clarabel's primal residual test,
    # acc max(1, |bn|, |a|) (infinity norms), plus the rounding of the residual (n eps)
    rn = np.linalg.norm(A, axis=1)
    bn = b / rn
    feas = (bounds.acc * max(1.0, np.abs(bn).max(), np.abs(out.a).max())
            + A.shape[1] * EPS * (np.abs(out.a).sum() + np.abs(bn).max()))
    assert np.max(np.abs(A @ out.a - b) / rn) <= feas
    # stationarity M a = F + A^T lam: Clarabel's dual residual test
    r = M @ out.a - F - A.T @ out.lam
    assert np.linalg.norm(r) <= bounds.stationarity(out.a, out.lam)


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
    bd = Bounds(M, F, A, b)
    out = QPKernel(n, m).solve(M, F, A, b)
    assert_kkt(M, F, A, b, out, bd)
    # full-rank A: multipliers are unique -> sign convention M a = F + A^T lam
    assert np.linalg.norm(out.lam - bd.lam) <= bd.lam_error(out.a, out.lam)
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
    out = QPKernel(n, m + 1).solve(M, F, A, b)
    assert_kkt(M, F, A, b, out, Bounds(M, F, A, b))


def test_psd_singular_full_rank_multipliers():
    rng = np.random.default_rng(11)
    n, k, m = 6, 2, 3
    M = random_psd_singular(rng, n, k, 0.45)
    F = 9.81 * rng.standard_normal(n)
    A = rng.standard_normal((m, n))
    b = 2.2 * rng.standard_normal(m)
    bd = Bounds(M, F, A, b)
    out = QPKernel(n, m).solve(M, F, A, b)
    assert_kkt(M, F, A, b, out, bd)
    assert np.linalg.norm(out.lam - bd.lam) <= bd.lam_error(out.a, out.lam)


def test_zero_row_is_dropped():
    rng = np.random.default_rng(7)
    n = 4
    M = random_spd(rng, n, 3.1)
    F = rng.standard_normal(n)
    A = np.vstack([rng.standard_normal((2, n)), np.zeros((1, n))])
    b = np.array([0.3, -1.4, 0.0])
    bd = Bounds(M, F, A[:2], b[:2])
    out = QPKernel(n, 3).solve(M, F, A, b)
    assert np.linalg.norm(out.a - bd.a) <= bd.da
    assert out.lam[2] == 0.0
    assert np.linalg.norm(out.lam[:2] - bd.lam) <= bd.lam_error(out.a, out.lam[:2])


def test_unconstrained_m0():
    rng = np.random.default_rng(8)
    n = 5
    M = random_spd(rng, n, 2.6)
    F = rng.standard_normal(n)
    k = QPKernel(n, 0)
    bd = Bounds(M, F, None, None)
    for A, b in [(None, None), (np.zeros((0, n)), np.zeros(0))]:
        out = k.solve(M, F, A, b)
        assert np.linalg.norm(out.a - bd.a) <= bd.da
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
    bd = Bounds(M, F, A, b)
    # the QP's error plus the hand formulas' rounding (8 eps of their terms)
    rnd = 8 * EPS * (np.abs(F).max() / mass + T / mass)
    assert np.linalg.norm(out.a - a_hand) <= bd.da + rnd
    # M a = F + A^T lam  ->  A^T lam = -T x / L  ->  lam = -T / L
    assert out.lam[0] == pytest.approx(-T / L, abs=bd.lam_error(out.a, out.lam) + rnd * mass / L)


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
    # the active floor as an equality row: Bounds of that problem; mu is its multiplier
    bd = Bounds(M, F, G, h)
    np.testing.assert_allclose(out.a, [fx / mass, 0.0], rtol=0, atol=bd.da + 2 * EPS * fx / mass)
    assert out.mu[0] > 0
    assert out.mu[0] == pytest.approx(mass * g, abs=bd.lam_error(out.a, out.mu) + 2 * EPS * mass * g)
    np.testing.assert_allclose(M @ out.a, F + G.T @ out.mu, rtol=0,
                               atol=bd.stationarity(out.a, out.mu))


def test_floor_contact_scaled_row():
    """Same floor written as 5.5 a_y >= 0: mu is in the caller's row units."""
    mass, g = 3.2, 9.81
    M = mass * np.eye(2)
    F = np.array([0.0, -mass * g])
    G = np.array([[0.0, 5.5]])
    out = QPKernel(2, 0, 1).solve(M, F, None, None, G, np.zeros(1))
    bd = Bounds(M, F, G, np.zeros(1))
    assert out.mu[0] == pytest.approx(mass * g / 5.5, abs=bd.lam_error(out.a, out.mu)
                                      + 4 * EPS * mass * g / 5.5)


def test_floor_lift_off():
    """Upward pull larger than the weight: the contact opens, mu ~ 0."""
    mass, g, pull = 3.2, 9.81, 45.0
    M = mass * np.eye(2)
    F = np.array([-0.6, pull - mass * g])
    G = np.array([[0.0, 1.0]])
    h = np.array([0.0])
    out = QPKernel(2, 0, 1).solve(M, F, None, None, G, h)
    # the floor inactive: the unconstrained problem's Bounds
    bd = Bounds(M, F, None, None)
    np.testing.assert_allclose(out.a, F / mass, rtol=0, atol=bd.da + 2 * EPS * np.abs(F).max() / mass)
    assert out.a[1] > 0
    # complementarity: Clarabel's gap test bounds mu * slack by acc times the objective's
    # scale (|F| |a| + trace(M)/n); the slack is a_y = (pull - m g) / m
    slack = out.a[1]
    assert abs(out.mu[0]) <= QP_ACCURACY * (np.linalg.norm(F) * np.linalg.norm(out.a) + mass) / slack
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
    _, lam_ex = kkt_solution(M, F, np.vstack([A, g1]), np.concatenate([b, h[:1]]))
    assert lam_ex[-1] > 0  # really active with a positive multiplier
    out = QPKernel(n, m, 2).solve(M, F, A, b, G, h)
    assert out.status == "optimal"
    # the active set as equality rows [A; g1]: Bounds of that problem
    bd = Bounds(M, F, np.vstack([A, g1]), np.concatenate([b, h[:1]]))
    assert np.linalg.norm(out.a - bd.a) <= bd.da
    lam_all = np.concatenate([out.lam, out.mu[:1]])
    dlam = bd.lam_error(out.a, lam_all)
    assert np.linalg.norm(out.lam - bd.lam[:m]) <= dlam
    assert out.mu[0] == pytest.approx(bd.lam[-1], abs=dlam)
    # the inactive row: complementarity (gap test) over its slack
    slack = (g2 @ out.a - h[1]) / np.linalg.norm(g2)
    assert abs(out.mu[1]) <= QP_ACCURACY * (np.linalg.norm(F) * np.linalg.norm(out.a)
                                            + np.trace(M) / n) / slack
    r = M @ out.a - F - A.T @ out.lam - G.T @ out.mu
    # the dual residual test of the active problem, plus the inactive row's force |g2| |mu_1|
    assert np.linalg.norm(r) <= (bd.stationarity(out.a, lam_all)
                                 + np.linalg.norm(g2) * abs(out.mu[1]))


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
    # kernel: lam = mass * 0.5 (force needed to push), mu = m g (both rows active: Bounds
    # of the equality problem; the expected values round to 2 eps)
    bd = Bounds(M, F, np.vstack([A, G]), np.array([0.5, 0.0]))
    dlam = bd.lam_error(out.a, np.concatenate([out.lam, out.mu]))
    assert out.lam[0] == pytest.approx(mass * 0.5, abs=dlam + 2 * EPS * mass)
    assert out.mu[0] == pytest.approx(mass * g, abs=dlam + 2 * EPS * mass * g)
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
@pytest.mark.parametrize("solver", ["OSQP", "SCS", "HIGHS"])
def test_other_backends(solver):
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
    # the backend's documented accuracy as its backward error: Bounds of the active problem
    bd = Bounds(M, F, np.vstack([A, G]), np.concatenate([b, h]), acc=BACKEND_ACCURACY[solver])
    k = QPKernel(n, m, 1, solver=solver)
    for _ in range(2):  # second solve goes through cvxpy's cached path
        out = k.solve(M, F, A, b, G, h)
        assert out.solver == solver
        assert out.status in ("optimal", "optimal_inaccurate")
        assert np.linalg.norm(out.a - bd.a) <= bd.da
        lam_all = np.concatenate([out.lam, out.mu])
        assert np.linalg.norm(lam_all - bd.lam) <= bd.lam_error(out.a, lam_all)


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
        bd = Bounds(M, F, A, b)
        # the error in units of its bound (QP_ACCURACY kappa, see the module docstring)
        worst = max(worst, np.linalg.norm(out.a - bd.a) / bd.da)
        times.append(out.solve_time)
        assert id(k.problem) == prob_id and k.problem is prob
    assert worst <= 1.0
    print(
        f"\nQPKernel(n=3, m=2, CLARABEL): median solve {np.median(times) * 1e3:.3f} ms "
        f"over 200 solves, worst error / bound {worst:.2e}"
    )
