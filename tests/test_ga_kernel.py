"""Tests of gaussopt.gauss.solvers.ga.pygad_ga.ga_minimize (pygad GA minimizer).

Accuracy bound used below
-------------------------
The GA only compares objective values.  For ``f(x) = 0.5 x'Hx - g'x`` the
computed values carry a rounding error of a few ``eps * S``, with
``S = 0.5 |x*|'|H||x*| + |g|'|x*|`` the magnitude of the summed terms, and
``f(x) - f* = 0.5 e'He`` (``e = x - x*``).  Once ``0.5 e'He`` is below that
rounding level no comparison can tell ``x`` from ``x*``, and before it is,
improvements are detectable so the mutation radius does not collapse: the
search stops with ``0.5 e'He = O(eps * S)`` (measured: at most 2.8 eps*S over
160 runs with k <= 6; typical 0.01-0.5).  The level: ga_minimize counts an
improvement smaller than ``_NOISE_ULPS = 4`` ulps of ``|f| <= S`` as noise (and
shrinks the radius), and the two values compared round by ~2 eps S each
(``ENERGY_LEVEL = (4 + 2 * 2) eps S = 8 eps S``). We assert

* ``0.5 e'He <= ENERGY_LEVEL``  (energy-norm error at the rounding level), hence
* ``|e|_inf <= |e|_2 <= sqrt(2 ENERGY_LEVEL / lambda_min) + tol (1 + |x*|_inf)``
  ``= 4 sqrt(eps S / lambda_min) + ...`` (the extra ``tol`` term being the
  radius-collapse tolerance), and
* ``f* - r <= value <= f* + ENERGY_LEVEL + r``, ``r = (k^2 + k + 2) eps S``
  the worst-case (first-order) rounding of one evaluation (k^2 + k products
  summed) and of f* itself.

The expected x error is thus ~1e-9 to 1e-8 relative even though tol=1e-10:
positions cannot be resolved better than sqrt(eps) from values.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gaussopt.core.exceptions import SolverError
from gaussopt.gauss.solvers.ga.pygad_ga import _NOISE_ULPS, GAOutcome, ga_minimize

EPS = np.finfo(float).eps
TOL = 1e-10


def energy_level(S: float) -> float:
    """0.5 e'He the search settles at: the noise threshold (_NOISE_ULPS ulps of |f| <= S)
    plus the rounding of the two values compared (~2 eps S each)."""
    return (_NOISE_ULPS + 2 * 2) * EPS * S


def evaluation_rounding(k: int, S: float) -> float:
    """Worst-case first-order rounding of one evaluation of 0.5 x'Hx - g'x (k^2 + k products
    summed, a subtraction): (k^2 + k + 2) eps S."""
    return (k * k + k + 2) * EPS * S


def make_quadratic(k: int, seed: int):
    """Random SPD quadratic 0.5 x'Hx - g'x with optimum x* (|x*| ~ 3) and a
    warm start at distance exactly 1 from it."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(k, k))
    H = 2.5 * (A @ A.T / k + 0.5 * np.eye(k))
    H = 0.5 * (H + H.T)
    x_star = rng.uniform(-3.0, 3.0, size=k)
    g = H @ x_star
    f_star = float(-0.5 * g @ x_star)
    d = rng.normal(size=k)
    x0 = x_star + d / np.linalg.norm(d)

    def objective(X):
        return 0.5 * np.einsum("ij,jk,ik->i", X, H, X) - X @ g

    return objective, H, g, x_star, f_star, x0


def check_accuracy(out: GAOutcome, H, g, x_star, f_star, tol=TOL):
    e = out.x - x_star
    S = 0.5 * np.abs(x_star) @ np.abs(H) @ np.abs(x_star) + np.abs(g) @ np.abs(x_star)
    lam_min = np.linalg.eigvalsh(H)[0]
    energy = 0.5 * e @ H @ e
    assert energy <= energy_level(S), (energy / (EPS * S), out)
    bound = np.sqrt(2 * energy_level(S) / lam_min) + tol * (1 + np.abs(x_star).max())
    assert np.abs(e).max() <= bound, (np.abs(e).max(), bound, out)
    # it can never beat the true minimum (up to the rounding of the evaluation and of f*)
    r = evaluation_rounding(x_star.size, S)
    assert out.value >= f_star - r
    assert out.value - f_star <= energy_level(S) + r


@pytest.mark.parametrize("k", [1, 2, 3, 6])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_convex_quadratic_reaches_optimum(k, seed):
    objective, H, g, x_star, f_star, x0 = make_quadratic(k, 10 * k + seed)
    out = ga_minimize(objective, x0, 1.0, seed=seed, tol=TOL)
    assert isinstance(out, GAOutcome)
    assert out.x.shape == (k,)
    assert out.converged
    assert 1 <= out.generations < 400
    assert out.evaluations >= 20 + out.generations  # whole population + offspring
    # stopped by the radius test: final half-width within the tolerance band
    assert out.radius <= TOL * (1 + np.abs(out.x).max())
    check_accuracy(out, H, g, x_star, f_star)
    # the reported value is the objective at x, as evaluated inside a batch:
    # re-evaluating x alone rounds differently (BLAS paths depend on the
    # batch shape), and the GA keeps the luckiest rounding, so compare at
    # the rounding level only.
    S = 0.5 * np.abs(x_star) @ np.abs(H) @ np.abs(x_star) + np.abs(g) @ np.abs(x_star)
    assert abs(out.value - objective(out.x[None, :])[0]) <= 2 * evaluation_rounding(k, S)


def test_per_gene_radius_and_loose_tol():
    objective, H, g, x_star, f_star, x0 = make_quadratic(3, 99)
    out = ga_minimize(objective, x0, np.array([1.0, 0.5, 2.0]), seed=3, tol=1e-6)
    assert out.converged
    # stopped by the radius test at h_j <= tol (1 + |x_j|) (tol = 1e-6, far above the
    # rounding level). A generation of 20 offspring in a box of half-width h around a best
    # point at distance D >> h from x* improves with probability ~1 - 2^-20 (half of the
    # box is downhill), so the box shrinks (0.4x per failed generation) only once the
    # region of improvement, an ellipsoid of axes ~D sqrt(cond H), is within the box: at the
    # stop D <= sqrt(cond H) h_prev <= sqrt(cond H) tol (1 + |x|) / 0.4; plus the
    # rounding-level error of check_accuracy
    S = 0.5 * np.abs(x_star) @ np.abs(H) @ np.abs(x_star) + np.abs(g) @ np.abs(x_star)
    ev = np.linalg.eigvalsh(H)
    lam_min = ev[0]
    band = (np.sqrt(ev[-1] / ev[0]) * 1e-6 * (1 + np.abs(out.x)) / 0.4
            + np.sqrt(2 * energy_level(S) / lam_min))
    assert np.all(np.abs(out.x - x_star) <= band)
    assert out.value >= f_star - evaluation_rounding(3, S)


def test_same_seed_identical_different_seed_same_answer():
    objective, H, g, x_star, f_star, x0 = make_quadratic(3, 7)
    a = ga_minimize(objective, x0, 1.0, seed=11)
    b = ga_minimize(objective, x0, 1.0, seed=11)
    np.testing.assert_array_equal(a.x, b.x)
    assert (a.value, a.generations, a.evaluations, a.radius) == (
        b.value, b.generations, b.evaluations, b.radius)
    c = ga_minimize(objective, x0, 1.0, seed=12)
    # a different path ...
    assert not np.array_equal(a.x, c.x) or a.generations != c.generations
    # ... to the same answer within the tolerance band
    check_accuracy(c, H, g, x_star, f_star)
    S = 0.5 * np.abs(x_star) @ np.abs(H) @ np.abs(x_star) + np.abs(g) @ np.abs(x_star)
    lam_min = np.linalg.eigvalsh(H)[0]
    # both within check_accuracy's bound of x*
    single = np.sqrt(2 * energy_level(S) / lam_min) + TOL * (1 + np.abs(x_star).max())
    assert np.abs(a.x - c.x).max() <= 2 * single


def test_objective_gets_whole_population_including_x0():
    objective, H, g, x_star, f_star, x0 = make_quadratic(2, 5)
    shapes = []
    first = []

    def spy(X):
        shapes.append(X.shape)
        if not first:
            first.append(X.copy())
        return objective(X)

    out = ga_minimize(spy, x0, 1.0, seed=0, sol_per_pop=12)
    assert shapes[0] == (12, 2)
    assert all(1 <= m <= 12 and kk == 2 for m, kk in shapes)
    assert len(shapes) == out.generations + 1  # one batch call per generation
    assert any(np.array_equal(row, x0) for row in first[0])
    assert sum(m for m, _ in shapes) == out.evaluations


def test_never_worse_than_warm_start():
    objective, H, g, x_star, f_star, x0 = make_quadratic(3, 8)
    out = ga_minimize(objective, x0, 1e-3, seed=0, max_generations=1)
    assert out.generations == 1
    assert not out.converged
    assert out.value <= objective(x0[None, :])[0]


def test_warm_start_at_optimum_sum_of_squares():
    # f >= 0 exactly in floating point and f(x*) == 0: nothing can beat x*.
    c = np.array([0.7, 2.3, 1.9])
    a = np.array([1.25, -0.5, 3.0])

    def objective(X):
        return ((X - a) ** 2) @ c

    out = ga_minimize(objective, a.copy(), 0.8, seed=4)
    assert out.value == 0.0
    np.testing.assert_array_equal(out.x, a)
    assert out.converged


@pytest.mark.parametrize("k", [1, 3])
def test_warm_start_at_optimum_quadratic(k):
    objective, H, g, x_star, f_star, x0 = make_quadratic(k, 40 + k)
    f_x_star = objective(x_star[None, :])[0]
    out = ga_minimize(objective, x_star.copy(), 1.0, seed=1)
    assert out.value <= f_x_star  # never worse than the warm start
    S = 0.5 * np.abs(x_star) @ np.abs(H) @ np.abs(x_star) + np.abs(g) @ np.abs(x_star)
    r = evaluation_rounding(k, S)
    assert out.value == pytest.approx(f_star, abs=energy_level(S) + r)
    check_accuracy(out, H, g, x_star, f_star)


def test_nan_values_are_rejected_not_fatal():
    def objective(X):
        x = X[:, 0]
        return np.where(x < 0.0, np.nan, (x - 0.3) ** 2)

    out = ga_minimize(objective, np.array([1.0]), 1.0, seed=0)
    # (x - 0.3)^2 = x^2 - 0.6 x + 0.09: S = 0.36 at the optimum, lambda = 2 (check_accuracy)
    assert abs(out.x[0] - 0.3) <= np.sqrt(2 * energy_level(0.36) / 2.0) + TOL * 1.3
    assert np.isfinite(out.value)


def test_no_output_and_warning_filters_untouched(capsys):
    filters_before = list(warnings.filters)
    objective, H, g, x_star, f_star, x0 = make_quadratic(1, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ga_minimize(objective, x0, 1.0, seed=0)
        with pytest.raises(SolverError):
            ga_minimize(objective, x0, 1.0, parent_selection_type="nonsense")
    assert caught == []
    assert list(warnings.filters) == filters_before
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_pygad_error_is_wrapped_and_chained():
    objective, *_ , x0 = make_quadratic(2, 3)
    with pytest.raises(SolverError, match="pygad") as info:
        ga_minimize(objective, x0, 1.0, crossover_type="no-such-crossover")
    assert info.value.__cause__ is not None


def test_objective_errors_propagate():
    def boom(X):
        raise KeyError("model lookup failed")

    with pytest.raises(KeyError, match="model lookup failed"):
        ga_minimize(boom, np.zeros(2), 1.0)
    with pytest.raises(ValueError, match="objective must return shape"):
        ga_minimize(lambda X: np.zeros(X.shape[0] + 1), np.zeros(2), 1.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(x0=np.zeros(0)), r"x0 must have k >= 1 genes, found k = 0"),
        (dict(x0=np.zeros((2, 2))), r"x0 must be 1-D .* found shape \(2, 2\)"),
        (dict(x0=np.array([0.0, np.nan])), r"x0 must be finite"),
        (dict(radius=0.0), r"radius must be > 0 and finite, found 0.0"),
        (dict(radius=-1.0), r"radius must be > 0 and finite"),
        (dict(radius=np.inf), r"radius must be > 0 and finite"),
        (dict(radius=np.array([1.0, 0.0])), r"radius must be > 0 and finite"),
        (dict(radius=np.ones(3)), r"radius must be a scalar or of shape \(2,\), found shape \(3,\)"),
        (dict(tol=0.0), r"tol must be a positive finite number, found 0.0"),
        (dict(tol=-1e-3), r"tol must be a positive finite number"),
        (dict(tol=np.nan), r"tol must be a positive finite number"),
        (dict(max_generations=0), r"max_generations must be an integer >= 1, found 0"),
        (dict(sol_per_pop=1), r"sol_per_pop must be an integer >= 2, found 1"),
        (dict(num_parents_mating=30), r"num_parents_mating must be <= sol_per_pop = 20, found 30"),
        (dict(stall_generations=0), r"stall_generations must be an integer >= 1"),
        (dict(seed=-1), r"seed must be an integer >= 0"),
        (dict(seed=1.5), r"seed must be an integer"),
        (dict(objective=3), r"objective must be callable"),
        (dict(random_seed=3), r"pygad_overrides may not set \['random_seed'\]"),
        (dict(on_generation=print), r"may not set \['on_generation'\]"),
        (dict(keep_elitism=0), r"keep_elitism must be an integer >= 1, found 0"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = dict(objective=lambda X: (X * X).sum(axis=1), x0=np.zeros(2), radius=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ga_minimize(args.pop("objective"), args.pop("x0"), args.pop("radius"), **args)
