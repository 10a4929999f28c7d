"""The smooth run: a run of the compiled engine over a span without impacts.

:func:`smooth_run` is :func:`gaussopt.simulate` for a system without contacts, and one
phase of a contact run (:func:`phases`): it builds the step solver and the model's
functions, checks the initial state, loads the compiled code the run calls (before the
clock starts), drives the engine (:mod:`gaussopt.integrate.engine_run`), and turns its
records into the :class:`~gaussopt.Trajectory` (:mod:`gaussopt.integrate.output_assembly`),
keeping what was computed when the run fails or is interrupted.
"""

from __future__ import annotations

import gc
import time
import warnings
from typing import Callable, Optional

import numpy as np

import gaussopt.core.compiled as C
import gaussopt.integrate.engine as E
from gaussopt.core.exceptions import ModelError, RankChangeWarning
from gaussopt.core.model_interface import quiet_compile
from gaussopt.core.result import Trajectory
from gaussopt.core.status import HOOK_FAILED, OUT_OF_MEMORY, TERMINATED
from gaussopt.gauss.solve_step import make_solver
from gaussopt.integrate.dense_output import DenseSolution, EventTracker
from gaussopt.integrate.engine_run import Run, StepHook, advance, advance_scipy, run_units
from gaussopt.integrate.guards import InterruptGuard, MemoryBudget
from gaussopt.integrate.options import ENGINE_METHODS, RunOptions
from gaussopt.integrate.output_assembly import (failure, least_squares_records, origin,
                                                postprocess, rank_events)
from gaussopt.integrate.stabilization import Baumgarte, Projection
from gaussopt.integrate.validation import check_consistent
from gaussopt.model.model_functions import model_functions
from gaussopt.model.system import System

__all__ = ["smooth_run", "phases"]


def smooth_run(system: System, t0: float, t1: float, q: np.ndarray, v: np.ndarray,
               opts: RunOptions, guard: Optional[InterruptGuard] = None,
               shared: Optional[dict] = None) -> Trajectory:
    """A run of a system without contacts from ``(q, v)`` over ``[t0, t1]``, as
    :func:`gaussopt.simulate` documents it; ``opts`` its checked options
    (:func:`gaussopt.integrate.options.run_options`), ``guard`` the
    :class:`~gaussopt.integrate.guards.InterruptGuard`, ``shared`` what the phases of a
    contact run share (:func:`phases`). (The caller limits BLAS to one thread.)"""
    dt = opts.dt
    t_eval = opts.t_eval
    n = system.n
    max_memory = opts.max_memory
    if t_eval is not None:
        need = MemoryBudget(max_memory, n, system.m or 0).bytes(t_eval.size, 0)
        if need > max_memory:
            raise ModelError(f"`t_eval` has {t_eval.size} times: their samples would take about "
                             f"{need / 1e6:.0f} MB, more than max_memory={max_memory:.4g} bytes. "
                             "Pass fewer output times or a larger `max_memory`.")
    reuse = shared.get(id(system)) if shared is not None else None
    if reuse is None and (shared is None or system._row_counts is None):
        # (a contact run's phase system is checked where the phase starts, by the first
        # solve of its forces at this same state: gaussopt.integrate.contact_run)
        system.check(t0, q, v)
    if reuse is not None and reuse.solver is not None:
        step_solver = reuse.solver
    else:
        step_solver = make_solver(system, opts.solver, **opts.solver_options)
    # what the run calls is compiled (or loaded from the cache) first, in one batch (two
    # processes share the compilation: gaussopt.core.compiled.ensure), before the clock starts:
    # the run's wall time never includes compilation or cache loading
    spent0 = C.spent()
    method, stabilization = opts.method, opts.stabilization
    if isinstance(stabilization, Projection) and not (system.holonomic or system.nonholonomic):
        opts = opts.but(stabilization=None)       # nothing to project onto
        stabilization = None
    record = opts.records
    monitor = opts.monitor_rank and bool(system.m)
    units = (method, type(stabilization), opts.auto_dt, record, t_eval is not None, monitor)
    if reuse is None or reuse.units != units:         # (a later phase: loaded already)
        C.ensure(*run_units(step_solver, method, stabilization, opts.auto_dt, record,
                             t_eval is not None, monitor))
    rank_tol = step_solver.rank_tol
    projector = stabilization if isinstance(stabilization, Projection) else None

    problems = check_consistent(system, t0, q, v, opts.consistency_tol)
    if problems:
        if not opts.project_initial:
            raise ModelError("The initial state is inconsistent with the constraints: "
                             + "; ".join(problems) + ". Pass project_initial=True to project it "
                             "onto the constraints, or correct q0/v0.")
        q, v, _ = (projector or Projection()).project(system, t0, q, v, rank_tol)
        left = check_consistent(system, t0, q, v, opts.consistency_tol)
        if left:
            raise ModelError("Projecting the initial state failed: " + "; ".join(left))
    tracker = EventTracker(list(opts.events), t0, q, v) if opts.events is not None else None

    step_solver.begin_run(t0, q, v, stabilization.correction(system)
                          if isinstance(stabilization, Baumgarte) else None)
    # the QP and the GA (and the paper objective) run in Python: the engine calls them back
    python_solver = step_solver.runs_in_python
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
    run = Run(system, step_solver, mf, opts, t0, t1, np.concatenate([q, v]),
              model_records=reuse.records if reuse is not None and reuse.mf is mf else None)
    if reuse is not None and reuse.mf is mf and reuse.records is None:
        reuse.records = run.model_records()
    progress = opts.progress
    project = run.projector()
    if tracker is not None and project is not None:
        # the events' values at the start: the start as the dense output continues it
        # (projected, as every interpolated state is: EventTracker.start_at)
        tracker.start_at(t0, project(t0, np.concatenate([q, v]), 0.0))
    sol = (DenseSolution(n, t0, np.concatenate([q, v]), project, keep=opts.dense_output)
           if record else None)
    on_step = (StepHook(run, sol, tracker, progress, keep=opts.dense_output)
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
            # (an empty span, t1 == t0, as solve_ivp: the initial state is the run)
            code = E.start(*run.args()) if t1 > t0 else E.FINISHED
            if code == 0 and opts.auto_dt:
                args = run.args()
                code, h = E.initial_step_at(*args[:4], args[5], 4)
                run.opt.f[E.F_DT] = dt = float(h)
            if code == 0:
                if method in ENGINE_METHODS:
                    code = advance(run, on_step, chunk)
                else:
                    code = advance_scipy(run, opts, t1, on_step)
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
    ts, ys, ks = st.out_t[:nout].copy(), st.out_y[:nout].copy(), st.out_k[:nout].copy()
    if code == HOOK_FAILED and on_step.t_checked is not None:
        # an event function failed in the last step: its outputs are dropped (the step may
        # have crossed a terminal event the run could not see)
        keep = ts <= on_step.t_checked
        ts, ys, ks = ts[keep], ys[keep], ks[keep]
        if sol is not None:
            sol.end_at(on_step.t_checked, np.concatenate(sol(on_step.t_checked)))
    if status == 1:                               # end the outputs at the terminal event
        te = tracker.t_terminal
        keep = ts <= te if t_eval is not None else ts < te
        ts, ys, ks = ts[keep], ys[keep], ks[keep]
        if t_eval is None:
            ts, ys = np.append(ts, te), np.vstack([ys, tracker.y_terminal])
            ks = np.append(ks, -1)
        if sol is not None:
            sol.end_at(te, tracker.y_terminal)
    with quiet_compile():
        traj = postprocess(system, step_solver, run, ts, ys, guard, marks=ks)
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
    traj.sol = sol if opts.dense_output else None
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
    traj.meta.update({"solver": step_solver.name, "method": method,
                      "dt": dt if opts.fixed_step else opts.first_step, "rtol": opts.rtol,
                      "atol": opts.atol, "max_step": opts.max_step,
                      "stabilization": repr(stabilization),
                      "objective": step_solver.objective, "system": system.name,
                      "t_span": [t0, t1]})
    if opts.auto_dt:
        traj.meta["dt_source"] = "automatic (initial-step estimate at t0, order 4)"
    return traj


def phases(guard: Optional[InterruptGuard] = None) -> Callable[..., Trajectory]:
    """The smooth phases of one contact run: ``phase(system, t_span, q0, v0, **options)``,
    :func:`simulate`'s run of a system without contacts (options as there, defaults for
    those left out), with what does not change from one phase of a system to the next
    built at its first phase and kept for the others (:class:`_Shared`): the system's
    check, the step solver, the model's functions and their packed records. A contact
    run restarts the integration at every impact, closing and lift-off; building these
    again each time cost as much as the phase itself. (The caller limits BLAS to one
    thread for the whole contact run.) ``guard``: the contact run's
    :class:`~gaussopt.integrate.guards.InterruptGuard`, shared by all its phases (without
    one, each phase has its own)."""
    shared: dict = {}

    def phase(system: System, t0: float, t1: float, q: np.ndarray, v: np.ndarray,
              opts: RunOptions) -> Trajectory:
        if guard is not None:
            return smooth_run(system, t0, t1, q, v, opts, guard=guard, shared=shared)
        with InterruptGuard() as own:
            return smooth_run(system, t0, t1, q, v, opts, guard=own, shared=shared)

    return phase


class _Shared:
    """What the phases of one system in a contact run share (:func:`phases`): the
    system (kept alive: the key is its id), its step solver and model functions (None
    for a solver that runs in Python, made afresh each phase as in separate runs: the
    GA's generator is seeded per run), the model's records
    (:meth:`gaussopt.integrate.engine_run.Run.model_records`) and the options of the run whose compiled
    units (:func:`gaussopt.integrate.engine_run.run_units`) are loaded."""

    __slots__ = ("system", "solver", "mf", "records", "units")

    def __init__(self, system, solver, mf):
        self.system, self.solver, self.mf, self.records = system, solver, mf, None
        self.units = None           # the options whose compiled units are loaded
