"""Time integration: :func:`simulate`.

The state ``y = (q, v)`` obeys ``q' = v``, ``v' = a(t, q, v)`` where ``a`` is
the solution of one Gauss step. The run is done by the compiled engine
(:mod:`gaussopt.integrate.engine`): the explicit methods (``"euler"``, ``"rk4"``,
``"RK23"``, ``"RK45"``, ``"DOP853"``) step inside it; the implicit
:func:`scipy.integrate.solve_ivp` methods (``"Radau"``, ``"BDF"``,
``"LSODA"``) take their steps in scipy and hand every accepted step to the
engine. Either way the stabilizing projection, the rank monitor, the outputs
and the bookkeeping exist once, and a run that fails or is interrupted
returns what it computed. :func:`drive_ivp` steps a scipy solver for the
quasi-velocity equations (:mod:`gaussopt.quasi`).

One module per role, as scipy's ``_ivp``: :mod:`gaussopt.integrate.validation` checks the
arguments, :mod:`gaussopt.integrate.engine_run` holds a run's records and advances the engine,
:mod:`gaussopt.integrate.guards` bounds a run's memory and defers a second Ctrl-C,
:mod:`gaussopt.integrate.output_assembly` turns the engine's records into the Trajectory; this module
composes them (:func:`simulate`) and steps scipy's solvers for :mod:`gaussopt.quasi`
(:func:`drive_ivp`).
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import time
import warnings
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

import gaussopt.core.compiled as C
import gaussopt.integrate.engine as E
from gaussopt.integrate.output_assembly import (failure, least_squares_records, origin, postprocess,
                                                rank_events)
from gaussopt.integrate.contact_run import simulate_contacts
from gaussopt.integrate.dense_output import DenseSolution, EventTracker
from gaussopt.core.exceptions import ModelError, RankChangeWarning
from gaussopt.integrate.guards import DEFAULT_MAX_MEMORY, InterruptGuard, MemoryBudget
from gaussopt.core.model_interface import quiet_compile
from gaussopt.model.model_functions import model_functions
from gaussopt.core.result import Trajectory
from gaussopt.integrate.engine_run import (ALL_METHODS, ENGINE_METHODS, FIXED_STEP_METHODS,
                                           HOOK_FAILED, IVP_METHODS, OUT_OF_MEMORY, RK_METHODS,
                                           TERMINATED, Run, StepHook, advance, advance_scipy,
                                           run_units)
from gaussopt.integrate.engine_run import tableau as _tableau  # noqa: F401 - (the tests read the tableaus here)
from gaussopt.gauss.solvers import StepSolver
from gaussopt.integrate.stabilization import Baumgarte, Projection
from gaussopt.gauss.solve_step import make_solver
from gaussopt.model.system import System
from gaussopt.integrate.validation import check_consistent, validate_simulate

__all__ = ["simulate", "Baumgarte", "Projection", "FIXED_STEP_METHODS", "IVP_METHODS",
           "drive_ivp", "DEFAULT_STABILIZATION"]

#: the stabilization :func:`simulate` uses unless told otherwise: projecting the
#: state onto the constraints keeps singular positions on the physical branch
#: and lets redundant linkages pass their folded configurations
DEFAULT_STABILIZATION = Projection()


def drive_ivp(method: str, rhs: Callable, t0: float, y0: np.ndarray, t1: float, options: dict,
              max_steps: int, after_step: Callable, counter: dict) -> tuple[int, str]:
    """Step an :class:`~scipy.integrate.OdeSolver` one accepted step at a time.

    ``method`` is a key of :data:`IVP_METHODS` or of :data:`FIXED_STEP_METHODS`
    (these need ``options["dt"]``). ``after_step(ode, t_prev, dense) -> (y_new,
    changed)`` is called after every accepted step (``dense`` the step's
    interpolant): the caller records its outputs and may replace the state (a
    projection, a change of chart). A changed state restarts the method: in
    place for the explicit Runge--Kutta methods (their first-same-as-last
    derivative re-evaluated), with a new solver object started at the last step
    size for the others. ``counter["steps"]`` counts accepted steps (kept if an
    exception escapes).

    Returns
    -------
    status : int
        0 at the end of the span, -1 on ``max_steps`` or a failed step (solve_ivp's codes).
    message : str
    """
    cls = IVP_METHODS[method] if method in IVP_METHODS else None

    def start(tt, yy, h=None):
        kw = dict(options)
        if h:
            kw["first_step"] = min(h, t1 - tt) if t1 > tt else h
        return cls(rhs, tt, yy, t1, **kw)

    ode = start(t0, y0)
    while ode.status == "running":
        if counter["steps"] >= max_steps:
            return -1, f"Stopped after max_steps={max_steps} steps."
        t_prev = ode.t
        msg = ode.step()
        if ode.status == "failed":
            return -1, f"{method} failed at t={ode.t}: {msg}"
        counter["steps"] += 1
        y_new, changed = after_step(ode, t_prev, ode.dense_output())
        if changed and ode.status == "running":
            if method in RK_METHODS:
                ode.y = y_new.copy()
                ode.f = ode.fun(ode.t, ode.y)
            else:
                ode = start(ode.t, y_new, ode.step_size)
    return 0, "The integration reached the end of t_span."


# --------------------------------------------------------------------------- simulate
def simulate(system: System, t_span: Sequence[float], q0, v0, *,
             solver: Union[str, StepSolver] = "closed_form", method: Optional[str] = None,
             dt: Optional[float] = None, rtol: float = 1e-9, atol: float = 1e-9,
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
        Start and end time, ``t_end > t0``.
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
        Step of the fixed-step methods (required for them); first step of the others.
        With ``solver="ga"`` and no ``method``, ``dt`` defaults to the step that
        scipy's adaptive methods start an order-4 method with (Hairer, Norsett &
        Wanner, *Solving ODEs I*, II.4: from the initial state's derivative and its
        rate of change, the step whose local error is about ``rtol``/``atol``), so
        it follows the system's time scale at ``t0``; it is kept in
        ``traj.meta["dt"]``. It is an estimate at ``t0`` only: pass ``dt`` for a run
        whose time scale changes (a mechanism that speeds up).
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
        Project an inconsistent initial state onto the constraints instead of raising.
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
        accepted step (two zeros within one step are missed, as in solve_ivp) and
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
        :mod:`gaussopt.integrate.contact_run`): ``max_impacts`` and ``zeno_height`` of
        :func:`gaussopt.integrate.contact_run.simulate_contacts`.

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
    * ``t_span`` must be increasing (no backward integration), and an event
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
    kwargs = dict(locals())
    kwargs.pop("contact_options")
    if isinstance(system, System) and system.contacts:
        # the event-driven run: smooth phases (this function, on systems without contacts)
        # joined by impacts, closings and lift-offs
        for key in ("system", "t_span", "q0", "v0", "t_eval", "progress"):
            kwargs.pop(key)
        with _single_thread_blas(system.n):
            return simulate_contacts(system, t_span, q0, v0, phase=_phases(), t_eval=t_eval,
                                     progress=progress, **(contact_options or {}), **kwargs)
    if contact_options is not None:
        raise ModelError("`contact_options` applies to systems with Contact constraints; "
                         f"{system.name!r} has none.")
    n = system.n if isinstance(system, System) else 0
    # (the guard outside the BLAS limit: a Ctrl-C while the limit is lifted is deferred too)
    with InterruptGuard() as guard, _single_thread_blas(n):
        return _simulate(**kwargs, guard=guard)


def _phases() -> Callable[..., Trajectory]:
    """The smooth phases of one contact run: ``phase(system, t_span, q0, v0, **options)``,
    :func:`simulate`'s run of a system without contacts (options as there, defaults for
    those left out), with what does not change from one phase of a system to the next
    built at its first phase and kept for the others (:class:`_Shared`): the system's
    check, the step solver, the model's functions and their packed records. A contact
    run restarts the integration at every impact, closing and lift-off; building these
    again each time cost as much as the phase itself. (The caller limits BLAS to one
    thread for the whole contact run.)"""
    shared: dict = {}

    def phase(system, t_span, q0, v0, **options) -> Trajectory:
        kwargs = {**_PHASE_DEFAULTS, **options}
        with InterruptGuard() as guard:
            return _simulate(system, t_span, q0, v0, **kwargs, guard=guard, shared=shared)

    return phase


class _Shared:
    """What the phases of one system in a contact run share (:func:`_phases`): the
    system (kept alive: the key is its id), its step solver and model functions (None
    for a solver that runs in Python, made afresh each phase as in separate runs: the
    GA's generator is seeded per run), the model's records
    (:meth:`gaussopt.integrate.engine_run.Run.model_records`) and the options of the run whose compiled
    units (:func:`gaussopt.integrate.engine_run.run_units`) are loaded."""

    __slots__ = ("system", "solver", "mf", "records", "units")

    def __init__(self, system, solver, mf):
        self.system, self.solver, self.mf, self.records = system, solver, mf, None
        self.units = None           # the options whose compiled units are loaded


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

#: :func:`simulate`'s defaults of the options a contact run's phase may leave out
_PHASE_DEFAULTS = {k: p.default for k, p in inspect.signature(simulate).parameters.items()
                   if p.default is not inspect.Parameter.empty and k != "contact_options"}




def _simulate(system, t_span, q0, v0, *, solver, method, dt, rtol, atol, t_eval, stabilization,
              solver_options, project_initial, consistency_tol, monitor_rank, max_steps,
              progress, events, dense_output, max_memory, guard=None,
              shared: Optional[dict] = None) -> Trajectory:
    """:func:`simulate` without the BLAS thread limit and the interrupt guard (arguments
    as documented there; ``guard`` the :class:`~gaussopt.integrate.guards.InterruptGuard`;
    ``shared`` what the phases of a contact run share, :func:`_phases`)."""
    a = validate_simulate(system, t_span, q0, v0, method, solver, dt, rtol, atol, t_eval,
                          stabilization, dense_output, consistency_tol, max_steps, max_memory,
                          progress, ALL_METHODS, FIXED_STEP_METHODS)
    t0, t1, q, v, method, t_eval, auto_dt = (a[k] for k in ("t0", "t1", "q", "v", "method",
                                                            "t_eval", "auto_dt"))
    dt, rtol, atol, max_steps = a["dt"], a["rtol"], a["atol"], a["max_steps"]
    consistency_tol, max_memory = a["consistency_tol"], a["max_memory"]
    n = system.n
    if t_eval is not None:
        need = MemoryBudget(max_memory, n, system.m or 0).bytes(t_eval.size, 0)
        if need > max_memory:
            raise ModelError(f"`t_eval` has {t_eval.size} times: their samples would take about "
                             f"{need / 1e6:.0f} MB, more than max_memory={max_memory:.4g} bytes. "
                             "Pass fewer output times or a larger `max_memory`.")
    reuse = shared.get(id(system)) if shared is not None else None
    if reuse is None:
        system.check(t0, q, v)
    if reuse is not None and reuse.solver is not None:
        step_solver = reuse.solver
    else:
        step_solver = make_solver(system, solver, **(solver_options or {}))
    # what the run calls is compiled (or loaded from the cache) first, in one batch (two
    # processes share the compilation: gaussopt.core.compiled.ensure), before the clock starts:
    # the run's wall time never includes compilation or cache loading
    spent0 = C.spent()
    record = bool(dense_output) or events is not None
    monitor = monitor_rank and bool(system.m)
    units = (method, type(stabilization), auto_dt, record, t_eval is not None, monitor)
    if reuse is None or reuse.units != units:         # (a later phase: loaded already)
        C.ensure(*run_units(step_solver, method, stabilization, auto_dt, record,
                             t_eval is not None, monitor))
    rank_tol = step_solver.rank_tol
    step_solver.b_correction = (stabilization.correction(system)
                                if isinstance(stabilization, Baumgarte) else None)
    projector = stabilization if isinstance(stabilization, Projection) else None
    if not (system.holonomic or system.nonholonomic):
        projector = None                          # nothing to project onto
        if isinstance(stabilization, Projection):
            stabilization = None

    problems = check_consistent(system, t0, q, v, consistency_tol)
    if problems:
        if not project_initial:
            raise ModelError("The initial state is inconsistent with the constraints: "
                             + "; ".join(problems) + ". Pass project_initial=True to project it "
                             "onto the constraints, or correct q0/v0.")
        q, v, _ = (projector or Projection()).project(system, t0, q, v, rank_tol)
        left = check_consistent(system, t0, q, v, consistency_tol)
        if left:
            raise ModelError("Projecting the initial state failed: " + "; ".join(left))
    tracker = EventTracker(events, t0, q, v) if events is not None else None

    m = system.m or 0
    step_solver.reset_reference()
    if m:
        step_solver.accept(system.rows(t0, q, v)[0])
    if step_solver.row_ref is None:
        step_solver.row_ref = np.zeros(m)
    step_solver.least_squares_steps.clear()
    # the QP and the GA (and the paper objective) run in Python: the engine calls them back
    python_solver = step_solver._method is None or step_solver.objective == "paper"
    if reuse is not None and reuse.mf is not None:
        mf = reuse.mf
        mf.error = None
    else:
        mf = model_functions(system, step_solver.acceleration if python_solver else None)
    if shared is not None and reuse is None:
        keep = not python_solver
        reuse = shared[id(system)] = _Shared(system, step_solver if keep else None,
                                             mf if keep else None)
        reuse.units = units if keep else None
    record = bool(dense_output) or tracker is not None
    run = Run(system, step_solver, mf, method, stabilization,
               {"max_steps": max_steps, "rtol": rtol, "atol": atol, "dt": dt}, t0, t1,
               np.concatenate([q, v]), t_eval, monitor_rank, dense=record,
               max_memory=max_memory,
               model_records=reuse.records if reuse is not None and reuse.mf is mf else None)
    if reuse is not None and reuse.mf is mf and reuse.records is None:
        reuse.records = run.model_records()
    sol = (DenseSolution(n, t0, np.concatenate([q, v]), run.projector(), keep=bool(dense_output))
           if record else None)
    on_step = (StepHook(run, sol, tracker, progress, keep=bool(dense_output))
               if (record or progress is not None) else None)
    status, message, exception = 0, "The integration reached the end of t_span.", None
    C.ensure(*run.band_units())
    run.args()
    compiling0 = C.spent()
    compile_time = compiling0 - spent0
    # the cyclic garbage collector waits for the end of the engine's run: a collection of
    # the (import-heavy) heap takes milliseconds and would land in whichever run it fell
    # into (the engine's own loop allocates nothing; the model's callbacks free their
    # objects by reference counting)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    wall0 = time.perf_counter()
    code = E.FINISHED
    chunk = 16
    run.guard = guard
    try:
        if guard is not None:
            guard.running()
        with quiet_compile():
            code = E.start(*run.args())
            if code == 0 and auto_dt:
                args = run.args()
                code, h = E.initial_step_at(*args[:4], args[5], 4)
                run.opt.f[E.F_DT] = dt = float(h)
            if code == 0:
                if method in ENGINE_METHODS:
                    code = advance(run, on_step, chunk)
                else:
                    code = advance_scipy(run, method, rtol, atol, dt, t1, on_step)
    except KeyboardInterrupt as e:
        status, message, exception = -1, f"Interrupted (KeyboardInterrupt) at t={run.st.sc[E.S_T]}.", e
        code = None
    finally:
        if gc_was_enabled:
            gc.enable()
    if guard is not None:
        guard.finishing()            # from here on a Ctrl-C is deferred: the result is kept
        if guard.requested and code is not None and code not in (E.FINISHED, TERMINATED):
            # (recorded during the last chunk, which ended the run on its own)
            status, code = -1, None
            message = f"Interrupted (KeyboardInterrupt) at t={run.st.sc[E.S_T]}."
            exception = KeyboardInterrupt()
    if code == HOOK_FAILED:
        status, exception = -1, on_step.error
        if on_step.event is not None:
            message = (f"The event function {tracker.label(on_step.event)} raised "
                       f"{type(exception).__name__} at t≈{on_step.t}: {exception}"
                       f"{origin(exception)}")
        elif on_step.in_progress:
            message = (f"The `progress` callback raised {type(exception).__name__} at "
                       f"t={on_step.t}: {exception}{origin(exception)}; the run stopped there "
                       "(what was computed is kept).")
        else:
            message = (f"Following the step to t={on_step.t} failed: {type(exception).__name__}: "
                       f"{exception}{origin(exception)}")
    elif code == OUT_OF_MEMORY:
        status = -1
        message = run.memory_message(on_step.dense_steps if on_step is not None else 0)
    elif code == TERMINATED:
        i = tracker.terminated_by
        status = 1
        message = (f"A termination event occurred: {tracker.label(i)} at t={tracker.t_terminal} "
                   f"(occurrence {len(tracker.t_events[i])}).")
    elif code is not None and code != E.FINISHED:
        status = -1
        message, exception = failure(run, code, method)
    # (compilation inside the run -- a lazy path taken, a step solver in Python compiling
    # its calls -- is not the run's time)
    integration = time.perf_counter() - wall0 - (C.spent() - compiling0)
    st = run.st
    nout = int(st.ic[E.C_NOUT])
    ts, ys = st.out_t[:nout].copy(), st.out_y[:nout].copy()
    if status == 1:                               # end the outputs at the terminal event
        te = tracker.t_terminal
        keep = ts <= te if t_eval is not None else ts < te
        ts, ys = ts[keep], ys[keep]
        if t_eval is None:
            ts, ys = np.append(ts, te), np.vstack([ys, tracker.y_terminal])
        if sol is not None:
            sol.end_at(te, tracker.y_terminal)
    with quiet_compile():
        traj = postprocess(system, step_solver, run, ts, ys, guard)
    traj.rank_events = rank_events(run)
    traj.least_squares_steps = least_squares_records(run)
    if status == 1:
        traj.rank_events = [e for e in traj.rank_events if e.t <= tracker.t_terminal]
        traj.least_squares_steps = [r for r in traj.least_squares_steps
                                    if r["t"] <= tracker.t_terminal]
    if tracker is not None:
        traj.t_events, traj.q_events, traj.v_events = tracker.arrays()
    passages = [e.t for e in traj.rank_events if e.kind == "passage"]
    if passages and isinstance(stabilization, Projection) and not stabilization.rhs:
        warnings.warn(
            f"The run crossed {len(passages)} singular position(s) (the first at t = "
            f"{passages[0]:.9g}) without projecting the integrator's stages "
            "(Projection(rhs=False)): near them the acceleration off the constraints grows "
            "like 1/sigma_min of the rows, so the stages may have jumped to another branch "
            "or lost accuracy (and a passage may be reported more than once or missed). "
            "Check the result against a run with Projection() (rhs=True, the default).",
            RankChangeWarning, stacklevel=3)
    traj.sol = sol if dense_output else None
    traj.status = status
    if status >= 0 and traj.meta.get("postprocess_error"):
        traj.status, message = -1, traj.meta["postprocess_error"]
        exception = traj.meta.get("postprocess_exception")
    traj.meta.pop("postprocess_exception", None)
    if status < 0 and traj.meta.get("postprocess_error") and \
            traj.meta["postprocess_error"] not in message:
        message += f" Then: {traj.meta['postprocess_error']}"
    if guard is not None and guard.deferred:
        traj.meta["deferred_interrupts"] = guard.deferred
    traj.message = message
    traj.exception = exception
    steps = int(st.ic[E.C_STEPS])
    compiling = C.spent() - compiling0
    wall = time.perf_counter() - wall0 - compiling
    traj.stats.update({"steps": steps, "rhs_evaluations": int(st.ic[E.C_NFEV]),
                       "wall_time": wall, "integration_time": integration,
                       "time_per_step": integration / steps if steps else float("nan"),
                       "compile_time": compile_time + compiling,
                       "projections": int(st.ic[E.C_NPROJ]),
                       "monitor_evaluations": int(st.ic[E.C_NMON]),
                       "passage_searches": int(st.ic[E.C_NSEARCH]),
                       "sparse_steps": int(st.ic[E.C_NBAND]),
                       "rejected_steps": int(st.ic[E.C_NREJ]),
                       "model": "compiled" if mf.compiled else "python",
                       **step_solver.run_stats()})
    traj.meta.update({"solver": step_solver.name, "method": method, "dt": dt, "rtol": rtol,
                      "atol": atol, "stabilization": repr(stabilization),
                      "objective": step_solver.objective, "system": system.name,
                      "t_span": [t0, t1]})
    if auto_dt:
        traj.meta["dt_source"] = "automatic (initial-step estimate at t0, order 4)"
    return traj
