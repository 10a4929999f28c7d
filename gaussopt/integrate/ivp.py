"""Time integration: :func:`simulate`, the front door of every run.

The state ``y = (q, v)`` obeys ``q' = v``, ``v' = a(t, q, v)`` where ``a`` is
the solution of one Gauss step. The run is done by the compiled engine
(:mod:`gaussopt.integrate.engine`): the explicit methods (``"euler"``, ``"rk4"``,
``"RK23"``, ``"RK45"``, ``"DOP853"``) step inside it; the implicit
:func:`scipy.integrate.solve_ivp` methods (``"Radau"``, ``"BDF"``,
``"LSODA"``) take their steps in scipy and hand every accepted step to the
engine. Either way the stabilizing projection, the rank monitor, the outputs
and the bookkeeping exist once, and a run that fails or is interrupted
returns what it computed.

One module per role, as scipy's ``_ivp``: :mod:`gaussopt.integrate.options` checks the
arguments once into a frozen :class:`~gaussopt.integrate.options.RunOptions` (with the
checks of :mod:`gaussopt.integrate.validation`), :mod:`gaussopt.integrate.smooth_run`
runs a system without contacts (and each phase of a contact run) through
:mod:`gaussopt.integrate.engine_run`, which drives the compiled engine;
:mod:`gaussopt.integrate.contact_run` joins smooth phases by impacts, closings and
lift-offs; :mod:`gaussopt.integrate.guards` bounds a run's memory and defers a second
Ctrl-C; :mod:`gaussopt.integrate.output_assembly` turns the engine's records into the
Trajectory. This module composes them.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from gaussopt.core.result import Trajectory
from gaussopt.gauss.solvers import StepSolver
from gaussopt.integrate.contact_run import simulate_contacts
from gaussopt.integrate.guards import DEFAULT_MAX_MEMORY, InterruptGuard
from gaussopt.integrate.options import run_options
from gaussopt.integrate.smooth_run import phases, smooth_run
from gaussopt.integrate.stabilization import Baumgarte, Projection
from gaussopt.model.system import System

__all__ = ["simulate", "DEFAULT_STABILIZATION"]

#: the stabilization :func:`simulate` uses unless told otherwise: projecting the
#: state onto the constraints keeps singular positions on the physical branch
#: and lets redundant linkages pass their folded configurations
DEFAULT_STABILIZATION = Projection()


def simulate(system: System, t_span: Sequence[float], q0, v0, *,
             solver: Union[str, StepSolver] = "closed_form", method: Optional[str] = None,
             dt: Optional[float] = None, first_step: Optional[float] = None,
             max_step: float = np.inf, rtol: float = 1e-9, atol: float = 1e-9,
             t_eval: Optional[Sequence[float]] = None,
             stabilization: Union[None, Baumgarte, Projection] = DEFAULT_STABILIZATION,
             solver_options: Optional[dict] = None, project_initial: bool = False,
             consistency_tol: float = 1e-8, monitor_rank: bool = True,
             max_steps: int = 10_000_000, progress: Optional[Callable[[float], Any]] = None,
             events: Union[None, Callable, Sequence[Callable]] = None, dense_output: bool = False,
             max_memory: float = DEFAULT_MAX_MEMORY,
             contact_options: Optional[dict] = None) -> Trajectory:
    """Simulate a constrained system from ``(q0, v0)`` over ``t_span``.

    The interface follows :func:`scipy.integrate.solve_ivp` (``t_span``,
    ``method``, ``rtol``/``atol``, ``t_eval``, ``events``, ``dense_output``);
    the differences are listed under Notes.

    Parameters
    ----------
    system : System
    t_span : (float, float)
        Start and end time, ``t_end >= t0`` (``t_end == t0``: the initial state alone, as
        solve_ivp). gaussopt integrates forward in time only; a decreasing span raises a
        ModelError that says why and what to do instead.
    q0, v0 : array_like, shape (n,)
        Initial state; must satisfy the position and velocity constraints to
        ``consistency_tol`` (a row-normalized distance) unless
        ``project_initial=True``.
    solver : {"closed_form", "lagrange", "qp", "ga"} or StepSolver
        How each step's accelerations are found.
    method : str, optional
        ``"rk4"``/``"euler"`` (fixed step ``dt``) or a :func:`scipy.integrate.solve_ivp`
        method (``"RK23"``, ``"RK45"``, ``"DOP853"``, ``"Radau"``, ``"BDF"``,
        ``"LSODA"``). Default ``"DOP853"``, or ``"rk4"`` for ``solver="ga"`` (the
        GA's accelerations carry its tolerance as noise, which an error-controlled
        method would take for truncation error).
    dt : float, optional
        Step of the fixed-step methods (required for them); for the others, the first
        step (as ``first_step``).
        With ``solver="ga"`` and no ``method``, ``dt`` defaults to the step that
        scipy's adaptive methods start an order-4 method with (Hairer, Norsett &
        Wanner, *Solving ODEs I*, II.4: from the initial state's derivative and its
        rate of change, the step whose local error is about ``rtol``/``atol``), so
        it follows the system's time scale at ``t0``; it is kept in
        ``traj.meta["dt"]``. It is an estimate at ``t0`` only: pass ``dt`` for a run
        whose time scale changes (a mechanism that speeds up).
    first_step : float, optional
        First step of an adaptive method (solve_ivp's ``first_step``); default: chosen
        from the initial state (Hairer, Norsett & Wanner's estimate, as scipy). Not with
        the fixed-step methods (ModelError).
    max_step : float, default inf
        Largest step of an adaptive method (solve_ivp's ``max_step``). Not with the
        fixed-step methods.
    rtol, atol : float
        Tolerances of the adaptive methods (and of the automatic ``dt`` of the GA). An
        ``rtol`` below ``100 eps`` (2.2e-14) is raised to it with a
        :class:`~gaussopt.ToleranceWarning`, as :func:`scipy.integrate.solve_ivp` does:
        smaller ones ask for less error than rounding makes in one step.
    t_eval : array_like, optional
        Output times (within ``t_span``, increasing). Default: every accepted step.
    stabilization : Projection, Baumgarte or None, default Projection()
        The default projects the state onto the constraints after every step
        (and evaluates the right-hand side on them), which keeps singular
        positions on the physical branch and carries redundant linkages
        through their folded configurations. ``None``: no stabilization.
    solver_options : dict, optional
        Options of the step solver (``objective``, ``rank_tol``, ``backend``, ...).
    project_initial : bool, default False
        Project an inconsistent initial state onto the constraints instead of raising;
        with contacts, a ``q0`` that penetrates them is first moved to the nearest state
        (in the mass metric) where none does.
    consistency_tol : float, default 1e-8
        Positive: how far (a row-normalized distance, relative to ``1 + max|q|``) the
        initial state may be off the constraints.
    monitor_rank : bool, default True
        Track the rank of the constraint rows and record singular positions
        (``Trajectory.rank_events``).
    max_steps : int, default 10_000_000
        Stop (``success=False``) after this many steps (a positive integer).
    progress : callable, optional
        Called as ``progress(t)`` after every accepted step (e.g. a progress bar). An
        exception it raises stops the run (``success=False``, the exception in
        ``message`` and ``exception``); the part computed is returned.
    events : callable or sequence of callables, optional
        Event functions ``f(t, q, v) -> float`` whose zeros are located along the
        run, with solve_ivp's optional attributes: ``terminal`` (bool, or a
        positive int ``k``: the run stops at the ``k``-th zero) and ``direction``
        (``> 0``: only zeros where ``f`` increases; ``< 0``: decreases; ``0``
        both). A zero is detected as a sign change of ``f`` between the ends of an
        accepted step (two zeros within one step are missed, as in solve_ivp, unless
        ``f.interp_points = k``: the sign is also checked at ``k`` interior points,
        refined where they do not resolve ``f`` near zero; ``f.interp_screen = True``
        skips them in the steps where a parabola through the ends and the middle keeps
        clear of zero; ``f.rebase = g``, ``g(t, q, v)`` called after every accepted
        step, chooses the next member of a family of functions, such as a vector's
        component along its own direction at the step's start; ``f.shared = s`` with
        ``f.from_shared = h``: many functions reading one quantity ``s(t, q, v)`` (the
        same object) evaluate it once per state, each taking ``h(t, s(t, q, v))``:
        :class:`~gaussopt.integrate.dense_output.EventTracker`) and
        located by Brent's method to ``4 eps`` on the projected dense solution
        (see ``dense_output``), so the event's time is as accurate as the run's
        states; its state is that solution at that time, on the constraints.
        Each function is called at the initial state to check that it returns a
        finite float. A run with events advances one step at a time through
        Python (tens of microseconds per step); runs without them are unaffected.
        Not with :class:`~gaussopt.Contact` constraints yet (ModelError).
    dense_output : bool, default False
        Keep every step's interpolant: ``traj.sol(t) -> (q, v)`` anywhere in the
        computed span (see :class:`gaussopt.integrate.dense_output.DenseSolution`; with contacts, the
        phases' in turn: :class:`gaussopt.ContactDenseSolution`).
    max_memory : float, default 2**30 (1 GiB)
        Bytes the run's stored data may take: the output samples (one per accepted
        step without ``t_eval``), the rank events, the dense output's steps, counted
        with the Trajectory built from them (:class:`gaussopt.integrate.guards.MemoryBudget`). A
        run that would outgrow it stops there with ``success=False`` and a message
        naming ``max_memory``, keeping what it computed, instead of taking the
        machine's memory (a crank turning millions of times records two rank events
        per turn). ``inf``: no limit. (A run with contacts applies it to each phase.)
    contact_options : dict, optional
        For a system with :class:`~gaussopt.Contact` constraints (an event-driven
        run of smooth phases joined by impacts, closings and lift-offs; see
        :mod:`gaussopt.integrate.contact_run`): ``max_impacts`` and ``zeno_height``
        (:class:`gaussopt.integrate.options.ContactOptions`); an unknown key, or a value
        out of range, is a ModelError.

    Returns
    -------
    Trajectory
        On any failure during the run -- a step that cannot be solved, an
        exception raised by the model's own functions, ``KeyboardInterrupt`` --
        the part computed so far, with ``success=False``, the reason in
        ``message`` and the exception in ``exception`` (a second Ctrl-C while that
        part is assembled is deferred, not raised: it only cuts the recomputation of
        the samples short, which then stay NaN; while the engine runs, Ctrl-C stops it
        at the next chunk, within about 20 ms). Steps where the
        constraints were inconsistent to the size rounding explains near a
        singular configuration (the least-squares step was taken) are listed in
        ``least_squares_steps``. ``status`` is solve_ivp's: ``0`` the end of
        ``t_span`` was reached, ``1`` a terminal event stopped the run (a success;
        ``message`` names the event), ``-1`` a failure. With ``events``,
        ``t_events``, ``q_events``, ``v_events`` hold per event the times (shape
        ``(k,)``) and states (shape ``(k, n)``) of its zeros (those found before a
        failure too); with ``dense_output``, ``sol`` is the dense solution.

    Notes
    -----
    Differences from the ``OdeResult`` of :func:`scipy.integrate.solve_ivp`:

    * the state is split into ``q`` and ``v``, and it is time-major: ``q`` has
      shape ``(N, n)`` (solve_ivp's ``y`` is ``(2n, N)``); ``traj.sol(t)``
      returns ``(q, v)`` with the same layout (shape ``(n,)`` for a float ``t``,
      ``(N, n)`` for an array), and ``q_events[i]``/``v_events[i]`` replace
      ``y_events[i]``;
    * the counts are in ``stats``: ``stats["rhs_evaluations"]`` for ``nfev``,
      ``stats["steps"]`` for the accepted steps (no ``njev``/``nlu``),
      ``stats["rejected_steps"]`` for the steps error control rejected (engine methods);
      ``stats["sparse_steps"]`` counts the right-hand sides whose Gauss step the
      O(n) path of a large multibody model answered (:mod:`gaussopt.gauss.band_step`);
    * ``a``, ``constraint_force``, ``multipliers``, the residuals and the energy
      are recomputed at the output times; ``rank_events`` lists the singular
      positions crossed;
    * ``sol`` is ``None`` unless ``dense_output=True`` and is not saved by
      :meth:`Trajectory.save`; on a run stopped by a terminal event, ``t`` and
      ``sol`` end at the event (with ``t_eval``: the requested times up to it);
    * ``t_span`` must not decrease (no backward integration), and an event
      function takes ``(t, q, v)``, not ``(t, y)``.

    Examples
    --------
    >>> import numpy as np, gaussopt as go
    >>> pend = go.System(("x", "y"), mass=np.eye(2), force=[0.0, -9.81],
    ...     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
    >>> tr = go.simulate(pend, (0.0, 1.0), [1.0, 0.0], [0.0, 0.0])
    >>> bool(tr.success), float(tr.position_residual.max()) < 1e-12
    (True, True)
    """
    t0, t1, q, v, opts = run_options(
        system, t_span, q0, v0, solver=solver, method=method, dt=dt, first_step=first_step,
        max_step=max_step, rtol=rtol, atol=atol, t_eval=t_eval, stabilization=stabilization,
        solver_options=solver_options, project_initial=project_initial,
        consistency_tol=consistency_tol, monitor_rank=monitor_rank, max_steps=max_steps,
        progress=progress, events=events, dense_output=dense_output, max_memory=max_memory,
        contact_options=contact_options)
    if system.contacts:
        # the event-driven run: smooth phases joined by impacts, closings and lift-offs,
        # under one interrupt guard (a Ctrl-C between two phases, or while the phases are
        # joined, is kept like one during a phase)
        with InterruptGuard() as guard, _single_thread_blas(system.n):
            return simulate_contacts(system, t0, t1, q, v, opts, phase=phases(guard),
                                     guard=guard)
    # (the guard outside the BLAS limit: a Ctrl-C while the limit is lifted is deferred too)
    with InterruptGuard() as guard, _single_thread_blas(system.n):
        return smooth_run(system, t0, t1, q, v, opts, guard=guard)


def _single_thread_blas(n: int):
    """Limit BLAS to one thread while integrating small systems.

    OpenBLAS's threaded level-3 kernels (``trsm`` inside LAPACK ``trtrs``/``potrs``)
    synchronize threads even for 3x3 matrices; on a busy machine that costs up to
    milliseconds per call, 100x the arithmetic (measured on the four-bar: 0.8 ms
    vs 8 us per ``trtrs``). ``threadpoolctl`` is the standard tool for this.
    """
    if n > 300:
        return contextlib.nullcontext()
    global _BLAS_CONTROLLER
    if _BLAS_CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - a declared dependency
            return contextlib.nullcontext()
        # found once: scanning the loaded libraries costs ~1.7 ms (a third of a short run)
        _BLAS_CONTROLLER = ThreadpoolController()
    return _BLAS_CONTROLLER.limit(limits=1, user_api="blas")


#: the BLAS libraries of this process (threadpoolctl), found at the first run
_BLAS_CONTROLLER = None
