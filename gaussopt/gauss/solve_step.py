"""``solve_step``: one Gauss step with any solver, and solver construction."""

from __future__ import annotations

import math

from typing import Any, Union

import numpy as np

from gaussopt.core.checks import as_state
from gaussopt.core.exceptions import ModelError
from gaussopt.core.result import StepResult
from gaussopt.gauss.solvers import SOLVERS, StepSolver
from gaussopt.gauss.solvers.base import NOT_TAKEN
from gaussopt.model.system import System

__all__ = ["solve_step", "solve_steps", "make_solver"]

_F64 = np.dtype(np.float64)      # native float64 (an ``is`` test)


def make_solver(system: System, solver: Union[str, type, StepSolver] = "closed_form",
                **options: Any) -> StepSolver:
    """Build a step solver from a name in ``SOLVERS``, a class, or pass an instance through."""
    if isinstance(solver, StepSolver):
        if options:
            raise ModelError("options cannot be given together with a solver instance; "
                             "pass them to the solver's constructor.")
        if solver.system is not system:
            raise ModelError("`solver` was built for another system.")
        return solver
    if isinstance(solver, str):
        try:
            cls = SOLVERS[solver]
        except KeyError:
            raise ModelError(f"`solver` must be one of {sorted(SOLVERS)} (or a StepSolver), "
                             f"found {solver!r}.") from None
    elif isinstance(solver, type) and issubclass(solver, StepSolver):
        cls = solver
    else:
        raise ModelError(f"`solver` must be a name, a StepSolver class or instance, found "
                         f"{type(solver).__name__}.")
    try:
        return cls(system, **options)
    except TypeError as e:
        raise ModelError(f"invalid option for solver {cls.name!r}: {e}") from e


def solve_step(system: System, t: float, q, v, solver: Union[str, StepSolver] = "closed_form",
               **options: Any) -> StepResult:
    """Solve one Gauss step: the accelerations at ``(t, q, v)``.

    Parameters
    ----------
    system : System
    t : float
    q, v : array_like, shape (n,)
    solver : {"closed_form", "lagrange", "qp", "ga"} or StepSolver
    **options
        Options of the solver (``objective``, ``rank_tol``, and per solver:
        ``backend`` for ``"qp"``, ``mode``/``seed``/``tol`` for ``"ga"``).

    Returns
    -------
    StepResult
        ``a``, ``constraint_force``, ``multipliers``, ``gauss``, ``info``.

    Notes
    -----
    The system is checked (:meth:`System.check`) on its first step, and the
    solver object is cached on the system per (solver, options), so repeated
    calls do not rebuild it (the QP's backend is built once); a cached solver
    forgets its warm start between calls (the GA's result depends on the
    arguments and ``seed`` only, not on earlier calls).

    Examples
    --------
    >>> import numpy as np, gaussopt as go
    >>> m, l = 2.0, 1.5
    >>> pend = go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -m * 9.81],
    ...     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - l**2]))])
    >>> r = go.solve_step(pend, 0.0, [l, 0.0], [0.0, 2.0])   # horizontal, moving up
    >>> r.a.round(9)                                          # centripetal -v^2/l along x
    array([-2.66666667, -9.81      ])
    """
    if not options:
        # the repeated call: a solver built, its system checked and its compiled step
        # taken by an earlier call (the function :meth:`StepSolver._make_direct` made then,
        # which checks the arguments' types itself; the compiled step checks that q and v
        # are finite)
        try:
            step = system._direct_steps[solver]
        except (AttributeError, KeyError, TypeError):    # not a System; not yet; unhashable
            step = None
        if step is not None:
            res = step(t, q, v)
            if res is not NOT_TAKEN:
                # (None: the compiled step's answer needs the Python path's check)
                return res if res is not None else system._solver_cache[solver].solve(t, q, v)
    if not isinstance(system, System):
        raise ModelError(f"`system` must be a gaussopt.System, found {type(system).__name__}.")
    n = system.n
    checked = (system.compiled is not None and type(q) is np.ndarray and type(v) is np.ndarray
               and q.dtype is _F64 and v.dtype is _F64 and q.shape == (n,)
               and v.shape == (n,) and q.flags.c_contiguous and v.flags.c_contiguous)
    if not checked:
        q = as_state(q, n, "q")       # (a compiled step checks finiteness itself)
        v = as_state(v, n, "v")
    if type(t) is not float:
        t = _scalar_time(t)
    if not math.isfinite(t):
        raise ModelError(f"`t` must be finite, found {t}.")
    if system._row_counts is None:
        system.check(t, q, v)
    s = _cached_solver(system, solver, options)
    if checked:
        res = s.solve_checked(t, q, v)
        if (s._direct is not None and not options and type(solver) is str
                and type(s).reset is StepSolver.reset):
            # (the next call takes it at once; a solver with a warm start to forget,
            # reset above, does not)
            system._direct_steps[solver] = s._direct
        if res is not None:
            return res
    return s.solve(t, q, v)


def _scalar_time(t: Any) -> float:
    """``t`` of :func:`solve_step` as a float; ModelError for an array or a non-number."""
    if isinstance(t, (bool, np.bool_, str, bytes)) or np.ndim(t) != 0:
        what = f"an array of shape {np.shape(t)}" if np.ndim(t) else repr(t)
        raise ModelError(f"`t` must be one time (a float), found {what}; for many states "
                         "at once use gaussopt.solve_steps(system, t, Q, V).")
    try:
        return float(t)
    except (TypeError, ValueError) as e:
        raise ModelError(f"`t` must be one time (a float), found {t!r}.") from e


def _cached_solver(system: System, solver, options: dict) -> StepSolver:
    """The step solver for ``(solver, options)``, cached on the system, without state
    carried over from earlier calls."""
    if isinstance(solver, StepSolver) or not isinstance(solver, (str, type)):
        return make_solver(system, solver, **options)    # (an instance, or its error)
    key = solver if not options else (
        solver if isinstance(solver, str) else id(solver), repr(sorted(options.items())))
    s = system._solver_cache.get(key)
    if s is None:
        s = make_solver(system, solver, **options)
        system._solver_cache[key] = s
    else:
        s.reset()      # no warm start from an earlier call: the result depends on the arguments only
    return s


def solve_steps(system: System, t, Q, V, solver: Union[str, StepSolver] = "closed_form", *,
                multipliers: bool = False, **options: Any):
    """Solve the Gauss step at many states at once: ``solve_step`` over the rows of ``Q``, ``V``.

    For Monte Carlo over states, training data, or a map of a quantity over
    configuration space. A model with compiled functions (from
    :mod:`gaussopt.symbolic`, :mod:`gaussopt.multibody`, the problems) with the
    ``"closed_form"`` or ``"lagrange"`` solver runs all states in one compiled loop;
    other models and solvers call the solver state by state. Either way row ``i``
    is exactly what ``solve_step(system, t[i], Q[i], V[i], solver, **options).a``
    gives: the same kernel makes the same rank decision and verification, and a
    state the compiled loop does not settle cleanly (a rank drop it must report,
    inconsistent rows, a force with a part in ``null(M)``) is handed to the same
    Python path as ``solve_step``'s.

    Parameters
    ----------
    system : System
    t : float or array_like, shape (B,)
        One time for all states, or one per state.
    Q, V : array_like, shape (B, n)
        Coordinates and velocities, one state per row.
    solver : {"closed_form", "lagrange", "qp", "ga"} or StepSolver
    multipliers : bool
        Also return the Lagrange multipliers, shape (B, m).
    **options
        Options of the solver, as for :func:`solve_step`.

    Returns
    -------
    ndarray, shape (B, n)
        The accelerations; with ``multipliers=True`` a tuple ``(accelerations,
        multipliers)``.

    Raises
    ------
    ModelError
        ``Q``/``V``/``t`` of the wrong shape or not finite.
    GaussoptError
        What :func:`solve_step` raises at a state (the message's note names the row).

    Examples
    --------
    >>> import numpy as np, gaussopt as go
    >>> m, l = 2.0, 1.5
    >>> pend = go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -m * 9.81],
    ...     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - l**2]))])
    >>> th = np.linspace(0.1, 1.0, 4)
    >>> Q = l * np.column_stack([np.sin(th), -np.cos(th)])
    >>> A = go.solve_steps(pend, 0.0, Q, np.zeros_like(Q))
    >>> np.allclose(A[:, 0], -9.81 * np.sin(th) * np.cos(th))   # released from rest
    True
    """
    if not isinstance(system, System):
        raise ModelError(f"`system` must be a gaussopt.System, found {type(system).__name__}.")
    n = system.n
    Q = _states(Q, n, "Q")
    V = _states(V, n, "V")
    if V.shape != Q.shape:
        raise ModelError(f"`Q` and `V` must have the same shape (B, {n}), found {Q.shape} and {V.shape}.")
    B = Q.shape[0]
    try:
        T = np.full(B, float(t)) if np.ndim(t) == 0 else np.broadcast_to(
            np.asarray(t, dtype=float), (B,)).copy()
    except (TypeError, ValueError):
        raise ModelError(f"`t` must be a float or an array of shape ({B},), found {t!r}.") from None
    if not np.all(np.isfinite(T)):
        raise ModelError(f"`t` contains NaN or inf: {t}.")
    if system._row_counts is None and B:
        system.check(float(T[0]), Q[0], V[0])
    s = _cached_solver(system, solver, options)
    acc, lam = s.solve_many(T, Q, V, multipliers)
    return (acc, lam) if multipliers else acc


def _states(X, n: int, label: str) -> np.ndarray:
    """Validate a batch of states: shape (B, n), finite, C-contiguous floats."""
    try:
        arr = np.ascontiguousarray(X, dtype=float)
    except (TypeError, ValueError) as e:
        raise ModelError(f"`{label}` must be an array of shape (B, {n}) of floats, found {X!r}.") from e
    if arr.ndim != 2 or arr.shape[1] != n:
        raise ModelError(f"`{label}` must have shape (B, {n}) (one state per row), found {arr.shape}.")
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.all(np.isfinite(arr), axis=1))[0]
        raise ModelError(f"`{label}` contains NaN or inf in row {bad}.")
    return arr
