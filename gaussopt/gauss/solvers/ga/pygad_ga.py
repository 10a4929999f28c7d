"""Genetic-algorithm minimizer (pygad back end) for small smooth problems.

This module wraps :class:`pygad.GA` into a black-box, reproducible and
warm-startable minimizer, :func:`ga_minimize`, used by the genetic step
solver of gaussopt (the published method minimizes Gauss's function with a
genetic algorithm).  It is tuned for smooth objectives with few genes
(1 to about 12) that are evaluated many times, once per time step.

Algorithm
---------
* One vectorized call of the objective evaluates the whole population
  (pygad batch fitness, ``fitness = -value``; pygad does not re-evaluate
  the elite).  The best point is tracked from those calls, so
  ``GA.best_solution()`` (which re-evaluates the population) is never
  called.
* The initial population is the warm start ``x0`` plus ``sol_per_pop - 1``
  points drawn uniformly in the box ``x0 +- radius``, so the result is
  never worse than ``x0``.
* pygad's steady-state parent selection and elitism (``keep_elitism=1``),
  single-point crossover (a vectorized operator with pygad's pairing),
  and additive uniform mutation of *every* gene in ``[-h, h]`` (pygad's
  default of 10 % of the genes rounds to zero genes when there are fewer
  than 10, and its per-gene Python loop costs ~75 us per gene).  About
  20 % of the offspring are instead "directed" mutants
  ``best + t * step``, ``t ~ U(0.5, 3)``, along the last successful step
  of the best point (a pattern move: it follows the valleys of
  ill-conditioned objectives, where isotropic mutation crawls).
* ``on_generation`` adapts the mutation half-width ``h = s * radius``
  (stored in ``random_mutation_min_val/max_val``): after an improvement
  of the best value beyond rounding noise by a step ``dx``, ``s`` is
  multiplied by ``clip(max|dx / h|, 0.3, 3)``; otherwise by 0.4.  ``s``
  is clamped to ``1e3`` (a range that keeps growing eventually overflows
  in pygad).
* Stop, converged, when ``h_j <= tol * (1 + |x_j|)`` for every gene, or
  after ``stall_generations`` generations in which the best point did not
  move by more than ``tol * (1 + |x|)``; stop, not converged, after
  ``max_generations``.

Accuracy
--------
A minimizer located from comparisons of function values is resolved only
down to the rounding level of the objective: for a quadratic the search
stops at ``0.5 e'He ~ eps * S`` (``e`` the error, ``eps`` the machine
epsilon, ``S`` the magnitude of the terms summed in the objective), i.e.
``|e| ~ sqrt(eps * S / lambda_min)``, typically 1e-9 to 1e-8 relative.
``tol`` below that only makes the search collapse its radius further; the
best value is within a few ``eps * S`` of the true minimum.  The number of
generations grows with the number of genes and with the condition number
of the Hessian in the coordinates scaled by ``radius``: callers should
pass well-scaled (ideally whitened) variables.

Measured cost
-------------
Convex quadratic ``0.5 x'Hx - g'x`` with condition number <= 6, warm
start at distance 1 from the optimum, ``radius=1``, ``tol=1e-10``,
default settings; pygad 3.9.2, numpy 2, Python 3.11, shared 2-core VM;
median (range) over 20 seeds, best of 3 timings each:

* k = 1: 22 (21-24) generations, ~450 evaluations, 9-15 ms per call;
* k = 3: 56 (48-61) generations, ~1100 evaluations, 25-31 ms per call;
* k = 6: 123 (108-152) generations, ~2400 evaluations, 50-70 ms per call.

The time is pygad's per-generation Python overhead (0.4-0.6 ms per
generation with 20 individuals), not the objective.  x error: median
8e-10 (k=1), 4e-9 (k=3), 1e-8 (k=6) relative.
"""

from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gaussopt.core.exceptions import SolverError

__all__ = ["GAOutcome", "ga_minimize"]

#: After a generation that improved the best point by a step ``dx``, the
#: mutation half-width ``h`` is multiplied by
#: ``clip(_STEP_GAIN * max|dx / h|, _SUCCESS_MIN, _SUCCESS_MAX)``.
_STEP_GAIN = 1.0
_SUCCESS_MIN = 0.3
_SUCCESS_MAX = 3.0
#: Multiplier of the mutation half-width after a generation that did not.
_SHRINK = 0.4
#: Fraction of the offspring replaced by directed mutants
#: ``best + t * step``, ``t ~ U(_PATTERN_T_MIN, _PATTERN_T_MAX)``; the
#: remembered step is multiplied by ``_PATTERN_DECAY`` after a failure.
_DIRECTED_FRACTION = 0.2
_PATTERN_T_MIN = 0.5
_PATTERN_T_MAX = 3.0
_PATTERN_DECAY = 0.5
#: Largest allowed mutation half-width, relative to the initial ``radius``.
_MAX_RADIUS_FACTOR = 1.0e3
#: Improvements smaller than this many ulps of ``|f|`` count as noise.
_NOISE_ULPS = 4.0

#: Keyword arguments of pygad.GA that ga_minimize sets itself.
_RESERVED = frozenset({
    "num_generations", "num_parents_mating", "fitness_func",
    "fitness_batch_size", "initial_population", "sol_per_pop", "num_genes",
    "init_range_low", "init_range_high", "random_mutation_min_val",
    "random_mutation_max_val", "on_generation", "random_seed", "logger",
})

# A private logger (not registered with logging's manager, so no global
# state is touched): pygad logs every exception it re-raises with
# ``logger.exception`` and would otherwise install a console handler on its
# own module logger.  The NullHandler keeps logging's "last resort" stderr
# handler away.
_PYGAD_LOGGER = logging.Logger("gaussopt.gauss.solvers.ga.pygad_ga.pygad", logging.CRITICAL + 1)
_PYGAD_LOGGER.addHandler(logging.NullHandler())
_PYGAD_LOGGER.propagate = False


@dataclass
class GAOutcome:
    """Result of :func:`ga_minimize`.

    Attributes
    ----------
    x : ndarray, shape (k,)
        Best solution found (over every evaluated individual).
    value : float
        Objective at ``x``.
    generations : int
        Generations actually run.
    evaluations : int
        Objective evaluations (individuals, including the initial
        population; pygad does not re-evaluate unchanged elites/parents).
    converged : bool
        True if stopped by the tolerance (radius collapse or stall), False
        if stopped by ``max_generations``.
    radius : float
        Largest per-gene mutation half-width when stopped.
    """

    x: np.ndarray
    value: float
    generations: int
    evaluations: int
    converged: bool
    radius: float


class _ObjectiveFailure(Exception):
    """Carries an exception raised by (or about) the user objective through
    pygad, so that it is not mistaken for a pygad failure."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, found {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, found {value}")
    return int(value)


def _check_positive(name: str, value: Any) -> float:
    try:
        fvalue = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, found {value!r}") from None
    if not (math.isfinite(fvalue) and fvalue > 0.0):
        raise ValueError(f"{name} must be a positive finite number, found {value!r}")
    return fvalue


def ga_minimize(
    objective: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    radius: float | np.ndarray,
    *,
    seed: int = 0,
    tol: float = 1e-10,
    max_generations: int = 400,
    sol_per_pop: int = 20,
    num_parents_mating: int = 6,
    stall_generations: int = 30,
    **pygad_overrides: Any,
) -> GAOutcome:
    """Minimize a vectorized objective with pygad's genetic algorithm.

    Parameters
    ----------
    objective : callable
        ``objective(X) -> values``: ``X`` has shape ``(m, k)`` (``m`` at
        most ``sol_per_pop``; pygad skips individuals whose fitness it
        already knows) and ``values`` shape ``(m,)``, the values to
        minimize.  NaN values are treated as ``+inf``.  ``X`` must not be
        modified.
    x0 : array_like, shape (k,)
        Warm start, ``k >= 1``; it is a member of the initial population.
    radius : float or array_like, shape (k,)
        Initial half-width (per gene) of the search box around ``x0`` and
        of the mutation range; > 0 and finite.
    seed : int, optional
        Seed (0 to 2**32 - 1) of the initial population and of pygad's
        generators; the same seed gives the same result.
    tol : float, optional
        Relative tolerance on ``x``: converged when every per-gene mutation
        half-width is ``<= tol * (1 + |x_j|)`` (> 0 and finite).  Note
        that ``x`` cannot be resolved much better than
        ``sqrt(eps * S / curvature)`` from values (see the module notes),
        whatever ``tol``.
    max_generations : int, optional
        Maximum number of generations (>= 1).
    sol_per_pop : int, optional
        Population size (>= 2).
    num_parents_mating : int, optional
        Parents selected (steady-state selection) per generation, in
        ``[1, sol_per_pop]``.
    stall_generations : int, optional
        Stop (converged) after this many consecutive generations without
        a better point farther than ``tol * (1 + |x|)`` from the previous
        best (>= 1).
    **pygad_overrides
        Extra keyword arguments of :class:`pygad.GA` (e.g.
        ``crossover_type``, ``keep_elitism``, ``mutation_probability``),
        applied over the defaults (replacing the operators voids the
        tuning described in the module notes; ``keep_elitism`` must stay
        >= 1).  The arguments that this function controls (population,
        fitness, ``on_generation``, mutation range, seed, logger, ...)
        cannot be overridden.

    Returns
    -------
    GAOutcome
        Best point and value found, generations, evaluations, convergence
        flag and final radius.

    Raises
    ------
    ValueError
        Bad argument (the message names it, with expected vs found), or
        the objective returned an array of the wrong shape.
    SolverError
        pygad failed (for instance a bad ``pygad_overrides`` value); the
        pygad exception is chained.

    Notes
    -----
    Exceptions raised by ``objective`` itself propagate unchanged.
    """
    if not callable(objective):
        raise ValueError(f"objective must be callable, found {type(objective).__name__}")
    try:
        x0_arr = np.array(x0, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"x0 must be a real array of shape (k,), found {x0!r}") from None
    if x0_arr.ndim == 0:
        x0_arr = x0_arr.reshape(1)
    if x0_arr.ndim != 1:
        raise ValueError(f"x0 must be 1-D of shape (k,), found shape {x0_arr.shape}")
    k = x0_arr.size
    if k < 1:
        raise ValueError(f"x0 must have k >= 1 genes, found k = {k}")
    if not np.all(np.isfinite(x0_arr)):
        raise ValueError(f"x0 must be finite, found {x0_arr}")
    try:
        r_arr = np.array(radius, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"radius must be a positive finite scalar or shape ({k},) array, "
                         f"found {radius!r}") from None
    if r_arr.ndim == 0:
        r_arr = np.full(k, float(r_arr))
    if r_arr.shape != (k,):
        raise ValueError(f"radius must be a scalar or of shape ({k},), found shape {r_arr.shape}")
    if not np.all(np.isfinite(r_arr) & (r_arr > 0.0)):
        raise ValueError(f"radius must be > 0 and finite, found {radius!r}")
    tol = _check_positive("tol", tol)
    seed = _check_int("seed", seed, 0)
    if seed > 2**32 - 1:
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1], found {seed}")
    max_generations = _check_int("max_generations", max_generations, 1)
    sol_per_pop = _check_int("sol_per_pop", sol_per_pop, 2)
    num_parents_mating = _check_int("num_parents_mating", num_parents_mating, 1)
    if num_parents_mating > sol_per_pop:
        raise ValueError(f"num_parents_mating must be <= sol_per_pop = {sol_per_pop}, "
                         f"found {num_parents_mating}")
    stall_generations = _check_int("stall_generations", stall_generations, 1)
    if "keep_elitism" in pygad_overrides:
        _check_int("keep_elitism", pygad_overrides["keep_elitism"], 1)
    reserved = sorted(_RESERVED.intersection(pygad_overrides))
    if reserved:
        raise ValueError(f"pygad_overrides may not set {reserved}; these are controlled by "
                         "ga_minimize (use its own arguments)")

    # Mutation half-width h = scale * r_arr, clamped to [0, h_max].
    scale_max = _MAX_RADIUS_FACTOR
    with np.errstate(over="ignore"):
        if not np.all(np.isfinite(r_arr * scale_max)):
            scale_max = 1.0
    state: dict[str, Any] = {
        "best_x": x0_arr.copy(),
        "best_f": math.inf,
        "prev_f": math.inf,  # best value at the end of the previous generation
        "prev_x": None,      # best point at the end of the previous generation
        "step": None,        # last successful step of the best point
        "ref_x": None,       # best point at the last move beyond tol
        "scale": 1.0,
        "stall": 0,
        "converged": False,
    }

    def fitness(ga_instance: Any, solutions: np.ndarray, indices: Any) -> np.ndarray:
        # Exactly 3 arguments: pygad >= 2.20 passes the GA instance.
        X = np.asarray(solutions, dtype=float)
        if X.ndim == 1:  # defensive: non-batched call
            X = X.reshape(1, -1)
        try:
            values = np.asarray(objective(X), dtype=float).reshape(-1)
        except Exception as exc:  # the objective's own error
            raise _ObjectiveFailure(exc) from exc
        if values.shape != (X.shape[0],):
            raise _ObjectiveFailure(ValueError(
                f"objective must return shape ({X.shape[0]},) for X of shape {X.shape}, "
                f"found {values.size} values"))
        values = np.where(np.isnan(values), np.inf, values)
        i = int(np.argmin(values))
        if values[i] < state["best_f"]:
            state["best_f"] = float(values[i])
            state["best_x"] = X[i].copy()
        if state["prev_x"] is None:  # initial population just evaluated
            state["prev_f"], state["prev_x"] = state["best_f"], state["best_x"]
            state["ref_x"] = state["best_x"]
        return -values

    def on_generation(ga_instance: Any) -> str | None:
        best_f, best_x = state["best_f"], state["best_x"]
        prev_f, prev_x = state["prev_f"], state["prev_x"]
        band = tol * (1.0 + np.abs(best_x))
        h = state["scale"] * r_arr
        # Radius adaptation. Success = improvement beyond rounding noise.
        if math.isfinite(prev_f):
            improved = best_f < prev_f - _NOISE_ULPS * float(np.spacing(abs(prev_f)))
        else:
            improved = best_f < prev_f
        if improved:
            step = best_x - prev_x
            ratio = float(np.max(np.abs(step) / h))
            factor = min(max(_STEP_GAIN * ratio, _SUCCESS_MIN), _SUCCESS_MAX)
            state["step"] = step
        else:
            factor = _SHRINK
            if state["step"] is not None:
                state["step"] = state["step"] * _PATTERN_DECAY
        state["scale"] = min(state["scale"] * factor, scale_max)
        state["prev_f"], state["prev_x"] = best_f, best_x
        # Stall: no better point beyond the tolerance band of the last one.
        if np.any(np.abs(best_x - state["ref_x"]) > band):
            state["ref_x"] = best_x
            state["stall"] = 0
        else:
            state["stall"] += 1
        if np.all(state["scale"] * r_arr <= band) or state["stall"] >= stall_generations:
            state["converged"] = True
            return "stop"
        h = state["scale"] * r_arr
        ga_instance.random_mutation_min_val = -h
        ga_instance.random_mutation_max_val = h
        return None

    def crossover(parents: np.ndarray, offspring_size: tuple, ga_instance: Any) -> np.ndarray:
        # Vectorized form of pygad's "single_point" crossover (same pairing:
        # offspring i mates parents i % m and (i + 1) % m, genes from the
        # random point c on come from the second parent); pygad's version
        # loops in Python over the offspring.
        n, n_genes = offspring_size
        par = np.asarray(parents, dtype=float)
        m = par.shape[0]
        first = np.arange(n) % m
        second = (first + 1) % m
        point = ga_instance.numpy_random_generator.randint(0, n_genes, size=n)
        from_second = np.arange(n_genes)[None, :] >= point[:, None]
        return np.where(from_second, par[second], par[first])

    def mutation(offspring: np.ndarray, ga_instance: Any) -> np.ndarray:
        # Vectorized equivalent of pygad's additive "random" mutation of
        # every gene (pygad's own draws one gene value per Python call,
        # ~75 us each), with the range set by on_generation.  The first
        # offspring are replaced by "directed" mutants best + t * step along
        # the last successful step (a pattern move that follows valleys of
        # ill-conditioned objectives).  pygad's seeded generator is used, so
        # runs are reproducible.
        gen = ga_instance.numpy_random_generator
        low = np.asarray(ga_instance.random_mutation_min_val, dtype=float)
        high = np.asarray(ga_instance.random_mutation_max_val, dtype=float)
        out = np.array(offspring, dtype=float)
        out += low + (high - low) * gen.random_sample(out.shape)
        step = state["step"]
        n_dir = min(n_directed, out.shape[0])
        if step is not None and n_dir > 0:
            t = gen.uniform(_PATTERN_T_MIN, _PATTERN_T_MAX, size=(n_dir, 1))
            out[:n_dir] = state["best_x"] + t * step
        return out

    rng = np.random.default_rng(seed)
    population = x0_arr + r_arr * rng.uniform(-1.0, 1.0, size=(sol_per_pop, k))
    population[0] = x0_arr

    ga_kwargs: dict[str, Any] = dict(
        num_generations=max_generations,
        num_parents_mating=num_parents_mating,
        fitness_func=fitness,
        fitness_batch_size=sol_per_pop,
        initial_population=population,
        gene_type=float,
        parent_selection_type="sss",
        keep_elitism=1,
        crossover_type=crossover,
        mutation_type=mutation,
        random_mutation_min_val=list(-r_arr),
        random_mutation_max_val=list(r_arr),
        on_generation=on_generation,
        suppress_warnings=True,
        random_seed=seed,
        logger=_PYGAD_LOGGER,
    )
    ga_kwargs.update(pygad_overrides)
    if "mutation_type" in pygad_overrides and not callable(pygad_overrides["mutation_type"]) \
            and not any(key in pygad_overrides for key in
                        ("mutation_probability", "mutation_num_genes", "mutation_percent_genes")):
        # pygad's default of 10 % of the genes rounds to 0 for k < 10.
        ga_kwargs["mutation_num_genes"] = k

    n_directed = int(round(_DIRECTED_FRACTION * (sol_per_pop - 1)))
    objective_error: BaseException | None = None
    try:
        import pygad

        ga = pygad.GA(**ga_kwargs)
        ga.run()
    except _ObjectiveFailure as failure:
        objective_error = failure.error
    except Exception as exc:
        raise SolverError(f"pygad failed in ga_minimize: {type(exc).__name__}: {exc}") from exc
    if objective_error is not None:
        # Raised outside the except block: the traceback is the objective's.
        raise objective_error

    # pygad only increments generations_completed for completed generations.
    generations = int(ga.generations_completed)
    evaluations = int(getattr(ga, "num_fitness_evaluations", 0))
    h_final = float(np.max(state["scale"] * r_arr))
    return GAOutcome(
        x=np.array(state["best_x"], dtype=float),
        value=float(state["best_f"]),
        generations=generations,
        evaluations=evaluations,
        converged=bool(state["converged"]) and math.isfinite(state["best_f"]),
        radius=h_final,
    )
