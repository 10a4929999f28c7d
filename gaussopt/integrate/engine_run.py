"""One run of the compiled engine (:mod:`gaussopt.integrate.engine`) for :func:`gaussopt.simulate`:
its records (:class:`Run`), the Butcher tableaus from scipy's coefficients, the compiled
units it calls, and the drivers that advance it -- in chunks inside the engine
(:func:`advance`) or step by step under an implicit :mod:`scipy.integrate` method
(:func:`advance_scipy`) -- with what follows an accepted step in Python
(:class:`StepHook`: dense output, events, ``progress``) and the memory budget of its
buffers (:class:`~gaussopt.integrate.guards.MemoryBudget`).
"""

from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np

import gaussopt.core.records as R
import gaussopt.integrate.engine as E
import gaussopt.gauss.model_step as MS
import gaussopt.gauss.dense_step as K
import gaussopt.gauss.dense_algebra as LA
import gaussopt.gauss.workspace as WS
import gaussopt.gauss.band_step as SP
from gaussopt.integrate.dense_output import (DenseSolution, Dop853Step, EventTracker, HermiteStep,
                                             LazyStep, QuinticScreen, RungeKuttaStep, ScipyStep)
from gaussopt.core.exceptions import ModelError, SolverError
from gaussopt.core.status import CALLBACK, HOOK_FAILED, OUT_OF_MEMORY, TERMINATED  # noqa: F401
from gaussopt.core.status import message as status_message
from gaussopt.integrate.guards import MemoryBudget
from gaussopt.core.model_interface import quiet_compile
from gaussopt.gauss.solvers import StepSolver
from gaussopt.integrate.options import ENGINE_METHODS, RunOptions, engine_options
from gaussopt.integrate.scipy_methods import IVP_METHODS, tableau
from gaussopt.integrate.stabilization import Baumgarte, Projection

__all__ = ["Run", "StepHook", "packed_tableau", "run_units", "advance", "advance_scipy"]


_PACKED_TABLEAUS: dict = {}


def packed_tableau(method: str):
    """:func:`tableau` packed for the engine (:func:`gaussopt.integrate.engine.pack`), once per
    method (the engine only reads it)."""
    got = _PACKED_TABLEAUS.get(method)
    if got is None:
        got = _PACKED_TABLEAUS[method] = E.pack(tableau(method))
    return got




class Run:
    """One run of the compiled engine: its data, its state, and what becomes the Trajectory."""

    def __init__(self, system, step_solver, mf, opts: RunOptions, t0: float, t1: float,
                 y0: np.ndarray, model_records=None):
        n, m = system.n, mf.m
        method = opts.method
        self.system, self.solver, self.mf, self.method = system, step_solver, mf, method
        self._args = None
        self.n, self.m = n, m
        if model_records is not None:
            # (the records of ``mf`` from an earlier run of it: :meth:`model_records`)
            self.md, self.buf, self._packed_model = model_records
        else:
            self.buf = E.buffers(mf)
            self.md = E.model_data(mf, system)
            self._packed_model = None
        engine_method = method if method in ENGINE_METHODS else "rk4"   # Hermite output
        self.engine_method = engine_method
        dense = opts.records
        # (with ``dense``, every step's interpolant is kept, from the step as integrated,
        # before its end is projected)
        self.opt = engine_options(opts, step_solver.compiled_method, step_solver.rank_tol, m,
                                  system.constant_mass is None, t1, engine_method,
                                  energy_check=system.has_energy)
        t_eval = None if opts.t_eval is None else np.array(opts.t_eval)   # (writable: packed)
        self.tab = tableau(engine_method)
        N = 2 * n
        stages = {"RK23": 4, "RK45": 7, "DOP853": 16}.get(engine_method, 1)
        dense_rows = {"RK23": 3, "RK45": 4, "DOP853": 7}.get(engine_method, 1)
        self.budget = MemoryBudget(opts.max_memory, n, m, dense_rows if dense else 3)
        self.out_of_memory = False
        self.guard = None           # the run's InterruptGuard (gaussopt.integrate.guards), if any
        cap_out = t_eval.size if t_eval is not None else 1024
        sc = np.zeros(E.N_SC)
        sc[E.S_T] = sc[E.S_T0] = t0
        sc[E.S_NEAR] = 0.0          # project the stages until the first accepted state says
        sc[E.S_NEAR_T] = np.nan     # no accepted state yet (see E.passage_ahead)
        sc[E.S_NEAR_TPREV] = np.nan
        ic = np.zeros(E.N_IC, dtype=np.int64)
        ref, sref = step_solver.engine_references()
        tree = getattr(system, "mass_tree", None)      # (M's sparsity: K.range_space)
        self.st = E.State(
            sc, ic, y0.copy(), np.zeros(N), np.zeros(N), np.zeros(N), np.zeros((stages, N)),
            ref, sref, np.zeros(m), np.zeros(n), np.zeros((64, 2)),
            np.zeros((64, 4), dtype=np.int64), np.zeros((64, m), dtype=np.bool_),
            np.zeros((256, 2)), np.zeros((256, N)),
            t_eval if t_eval is not None else np.zeros(0), np.zeros(cap_out),
            np.zeros((cap_out, N)), np.full(cap_out, -1, dtype=np.int64),
            np.zeros((dense_rows, N)), np.zeros(N),
            K.make_work(n, m, tree), K.make_work(n, m, tree), np.zeros((E.N_SCR, N)))
        if t_eval is not None and t_eval[0] == t0:
            self.st.out_t[0] = t0
            self.st.out_y[0] = y0
            ic[E.C_NOUT] = 1
            ic[E.C_IEVAL] = 1
        elif t_eval is None:
            self.st.out_t[0] = t0
            self.st.out_y[0] = y0
            ic[E.C_NOUT] = 1

    def interpolant(self):
        """The interpolant of the last accepted step of the engine (:mod:`gaussopt.integrate.dense_output`);
        a :class:`~gaussopt.integrate.dense_output.LazyStep` where the engine has not built it
        (``I_DENSE = DENSE_LAZY``: events alone)."""
        st = self.st
        t_old, h = float(st.sc[E.S_TOLD]), float(st.sc[E.S_HPREV])
        code = E.METHOD_CODES[self.engine_method]
        if code in (E.METHOD_CODES["DOP853"], E.METHOD_CODES["RK23"], E.METHOD_CODES["RK45"]):
            kind = Dop853Step if code == E.METHOD_CODES["DOP853"] else RungeKuttaStep
            y_old = st.y_old.copy()
            if st.ic[E.C_DENSE] == 0:
                step = int(st.ic[E.C_STEPS])
                return LazyStep(lambda: kind(t_old, h, y_old, self._dense(step)))
            return kind(t_old, h, y_old, st.dense.copy())
        return HermiteStep(t_old, h, st.y_old.copy(), st.f_old.copy(), st.y.copy(), st.f.copy())

    def _dense(self, step: int) -> np.ndarray:
        """The coefficients of the interpolant of the accepted step ``step``, built now
        (:func:`gaussopt.integrate.engine.integrator.dense_at`): only while it is the engine's
        last step, else RuntimeError (a bug: the interpolant of an earlier step)."""
        st = self.st
        if step != int(st.ic[E.C_STEPS]):
            raise RuntimeError("internal: the interpolant of an earlier step was asked for "
                               "after the engine moved on")
        status = E.dense_at(*self.args())
        if status != 0:
            raise ModelError(
                f"the interpolant of the step [{float(st.sc[E.S_TOLD])}, {float(st.sc[E.S_T])}] "
                f"could not be built: the model failed at one of its interior points "
                f"({status_message(status)}).")
        return st.dense.copy()

    def screen(self):
        """What the events' screens evaluate in the last accepted step (``interp_screen``,
        :class:`~gaussopt.integrate.dense_output.EventTracker`): for DOP853 the quintic
        Hermite interpolant of the step's ends before projection
        (:class:`~gaussopt.integrate.dense_output.QuinticScreen`; it needs none of the three
        stages DOP853's own interpolant adds), else None (the step's interpolant)."""
        if E.METHOD_CODES[self.engine_method] != E.METHOD_CODES["DOP853"]:
            return None
        st = self.st
        return QuinticScreen(float(st.sc[E.S_TOLD]), float(st.sc[E.S_HPREV]), st.y_old.copy(),
                             st.f_old.copy(), st.scr[E.R_YRAW].copy(), st.scr[E.R_FRAW].copy())

    def resolved(self) -> bool:
        """Whether error control limited the last accepted step (an adaptive method whose
        next step grows by less than its largest factor, 10): the step then resolves the
        motion, which the screens of the events rely on (:class:`~gaussopt.integrate.
        dense_output.EventTracker`'s ``interp_screen``). A step of a fixed-step method, or
        one whose error estimate was negligible (a state at rest under a force that changes
        in time: its steps grow tenfold), is not."""
        if self.engine_method not in ("RK23", "RK45", "DOP853"):
            return False
        st = self.st
        return float(st.sc[E.S_HABS]) < 9.99 * float(st.sc[E.S_HPREV])

    def vanished(self) -> float:
        """The projection's floor for vanished directions (:func:`gaussopt.integrate.engine.vanished_floor`)."""
        return float(K.FOLD_TOL * self.st.sref[0])

    def projector(self):
        """``project(t, y, floor) -> y`` onto the constraints as the run projects, or None
        when the run does not project."""
        if int(self.opt.i[E.I_STAB]) != E.STAB_PROJECTION:
            return None
        n, mf, opt = self.n, self.mf, self.opt

        def project(t: float, y: np.ndarray, floor: float) -> np.ndarray:
            q, v = y[:n].copy(), y[n:].copy()
            mf.error = None
            with quiet_compile():
                addrs, md, buf, opt_, _, _ = self.args()
                ps, _ = E.project_at(addrs, md, buf, opt_, float(t), q, v, float(floor))
            if ps != 0:
                if mf.error is not None:
                    raise mf.error
                raise SolverError(f"projecting the interpolated state at t={t} onto the "
                                  f"constraints failed: a constraint is not finite there (q = {q}).")
            return np.concatenate([q, v])

        return project

    def band_units(self) -> list:
        """The lazy units of the O(n) path, when the model takes it (:func:`run_units`)."""
        if self.md.band.mode == SP.MODE_NONE:
            return []
        if self.md.band.mode == SP.MODE_TREE:
            return _tree_units(self.system.recursive)
        # (the band's entry points and the lazy units they call, which their closure
        # leaves out)
        units = [MS._band_step, SP.sparse_step, MS.path_sigma, SP.band_sigma, SP.sigma_estimate,
                 SP.band_smallest_pair, SP.smallest_pair, SP.band_bilinear, SP.bilinear,
                 SP.band_scaled_form, SP.band_row_norms, SP.band_set_aside, MS.band_force,
                 MS.call_sp_dyn, MS.call_sp_rows]
        return units + ([SP.band_correction, SP.correction, SP.band_distances,
                         SP.band_rows_times, MS.call_sp_pos]
                        if self.md.band.mode == SP.MODE_PROJECT else [])

    def args(self):
        """The arguments of the engine's entry points: the function addresses and the
        records packed (:func:`gaussopt.integrate.engine.pack`; the same arrays as ``md``, ``buf``,
        ``opt``, ``tab`` and ``st``)."""
        if self._args is None:
            if self._packed_model is None:
                self._packed_model = (E.pack(self.md), E.pack(self.buf))
            self._args = (self.mf.addrs, *self._packed_model, E.pack(self.opt),
                          packed_tableau(self.engine_method), E.pack(self.st))
        return self._args

    def model_records(self) -> Optional[tuple]:
        """``(md, buf, (md, buf) packed)``: what a later run of the same model functions
        ``mf`` may take as ``model_records`` instead of building and packing them again
        (the model's data and buffers do not change between runs; each run writes the
        buffers before it reads them). None for a model on the O(n) path
        (:mod:`gaussopt.gauss.band_step`), whose work arrays are one set per run."""
        if self.md.band.mode != SP.MODE_NONE:
            return None
        if self._packed_model is None:
            self._packed_model = (E.pack(self.md), E.pack(self.buf))
        return self.md, self.buf, self._packed_model

    def stored(self) -> tuple[int, int]:
        """``(samples, events)``: the capacities of the output and event buffers."""
        return int(self.st.out_t.shape[0]), int(self.st.ev_f.shape[0])

    def grow(self, dense_steps: int = 0) -> bool:
        """Double the buffers that filled up (outputs, events), or grow them as far as
        ``max_memory`` allows (:class:`~gaussopt.integrate.guards.MemoryBudget`, with
        ``dense_steps`` steps of dense output held beside them); False, with nothing
        changed, when it allows no more (the run must stop)."""
        st, budget = self.st, self.budget
        fields = st._asdict()
        n_out, n_ev = self.stored()
        dense_bytes = budget.bytes(0, 0, dense_steps)
        grew = False
        if st.t_eval.shape[0] == 0 and st.ic[E.C_NOUT] >= n_out:
            k = budget.grown(n_out, 2 * n_out, budget.sample,
                             budget.bytes(0, n_ev) + dense_bytes)
            if k <= n_out:
                self.out_of_memory = True
                return False
            fields["out_t"] = np.concatenate([st.out_t, np.zeros(k - n_out)])
            fields["out_y"] = np.concatenate([st.out_y, np.zeros((k - n_out, st.out_y.shape[1]))])
            fields["out_k"] = np.concatenate([st.out_k, np.full(k - n_out, -1, dtype=np.int64)])
            n_out, grew = k, True
        if st.ic[E.C_NEV] + 4 >= n_ev:
            k = budget.grown(n_ev, 2 * n_ev, budget.event, budget.bytes(n_out, 0) + dense_bytes)
            if k <= n_ev + 4:
                self.out_of_memory = True
                return False
            fields["ev_f"] = np.concatenate([st.ev_f, np.zeros((k - n_ev, st.ev_f.shape[1]))])
            fields["ev_i"] = np.concatenate([st.ev_i, np.zeros((k - n_ev, st.ev_i.shape[1]),
                                                               dtype=st.ev_i.dtype)])
            fields["ev_rows"] = np.concatenate([st.ev_rows, np.zeros((k - n_ev, st.ev_rows.shape[1]),
                                                                     dtype=st.ev_rows.dtype)])
            grew = True
        if grew:
            self.st = E.State(**fields)
            self._args = None
        return True

    def memory_message(self, dense_steps: int = 0) -> str:
        """The message of a run stopped by ``max_memory``."""
        st = self.st
        return self.budget.message(float(st.sc[E.S_T]), int(st.ic[E.C_NOUT]), int(st.ic[E.C_NEV]),
                                   dense_steps, int(self.opt.i[E.I_MAXSTEPS]))


def _tree_units(rec) -> list:
    """The compiled functions of a tree's recursive step (``MODE_TREE``; ``rec`` its
    :class:`~gaussopt.core.model_interface.RecursiveModel`)."""
    return [MS._tree_step, MS.call_tree, MS.path_sigma, MS.band_force, *rec.fns]


def run_units(solver: StepSolver, method: str, stabilization, auto_dt: bool,
               dense: bool, samples: bool, monitor: bool) -> list:
    """The compiled functions (:mod:`gaussopt.core.compiled`) a run calls: the engine's entry
    points for its method and options, the lazy paths its options take (the step's
    interpolant for dense output, events and output samples; the search of singular
    positions of the rank monitor; Baumgarte's correction) and the step solver's own
    (:meth:`StepSolver.compiled_units`). (A lazy path it did not foresee is compiled
    when the run first takes it; that time is not the run's either.)"""
    from gaussopt.core.model_interface import NOOP

    # (and what builds the run's records from Python, and the model's compiled functions)
    units = [E.start, R._pack_model_data, R._pack_buffers,
             R._pack_options, R._pack_tableau, R._pack_state,
             SP._band, SP._band_mode, WS.make_work_compiled, K.smallest_live_sigma, NOOP,
             *getattr(solver.system.compiled, "functions", ())]
    if dense or samples:
        units.append(E.prepare_dense)
    if dense:
        units.append(E.dense_at)             # (events: the interpolant after the step)
    # (the search of a singular position, RM._passage, and the SVD of rows that are not
    # disjoint, LA._svd_jacobi, are lazy: compiled in the background while a first run
    # runs, compiled.BACKGROUND; the latter is needed from the first step on for two rows)
    if (solver.system.m or 0) >= 2:
        units.append(LA._svd_jacobi)
    rec = SP.tree_step(solver.system)
    if rec is not None:                       # (a long tree's recursive step, MODE_TREE)
        units += _tree_units(rec)
    units += [E.advance] if method in ENGINE_METHODS else [E.rhs_at, E.after_step]
    if auto_dt:
        units.append(E.initial_step_at)
    if not solver.runs_in_python:
        units.append(E.sample_all)            # (a solver in Python samples in Python)
    if isinstance(stabilization, Projection) and (dense or samples):
        units.append(E.project_at)            # (the dense solution's and the samples')
    if isinstance(stabilization, Baumgarte):
        units.append(E.baumgarte)
    return units + list(solver.compiled_units())


# (the statuses of the Python side of a run, TERMINATED, HOOK_FAILED and OUT_OF_MEMORY, are
# in :mod:`gaussopt.core.status`)


class StepHook:
    """What follows every accepted step in Python: the step's interpolant and projected end
    go to the dense solution, the events are located on it, ``progress(t)`` is called.

    Returns True to stop the run (a terminal event, or an exception kept in ``error``)."""

    def __init__(self, run: Run, sol: Optional[DenseSolution],
                 tracker: Optional[EventTracker], progress, keep: bool = False):
        self.run, self.sol, self.tracker, self.progress = run, sol, tracker, progress
        self.keep = keep                  # the dense solution keeps every step
        self.error: Optional[BaseException] = None
        self.event: Optional[int] = None
        self.in_progress = False          # the error is the progress callback's
        self.out_of_memory = False
        self.dense_steps = 0              # steps the dense solution keeps
        self.t = float(run.st.sc[E.S_T])
        self.t_checked: Optional[float] = None    # the end of the last step events checked

    def __call__(self, dense=None) -> bool:
        st = self.run.st
        t_new = float(st.sc[E.S_T])
        self.t = t_new
        if self.sol is not None:
            if self.keep:
                n_out, n_ev = self.run.stored()
                if not self.run.budget.fits(n_out, n_ev, self.dense_steps + 1):
                    self.out_of_memory = True
                    return True
                self.dense_steps += 1
            try:
                t_old = self.sol.t_max
                interp = ScipyStep(dense) if dense is not None else self.run.interpolant()
                self.sol.append(t_new, st.y.copy(), interp, self.run.vanished())
                raw = None
                if self.tracker is not None and dense is None and self.run.resolved():
                    # (what the events' screens evaluate: DOP853's quintic screen, else the
                    # step's interpolant before projection)
                    raw = self.run.screen() or self.sol.raw_in_last_step
                if self.tracker is not None and self.tracker.after_step(
                        t_old, t_new, self.sol._y[-1], self.sol.in_last_step, raw):
                    return True
            except Exception as e:  # noqa: BLE001 - the run stops and reports it
                self.error = e
                self.event = self.tracker.failed if self.tracker is not None else None
                if self.event is not None:
                    # the events could not be checked in this step: the run keeps what
                    # precedes it (a terminal event may lie inside the step)
                    self.t_checked = t_old
                return True
        if self.progress is not None:
            try:
                self.progress(t_new)
            except Exception as e:  # noqa: BLE001 - the run stops and reports it
                self.error, self.in_progress = e, True
                return True
        return False

    def stop_code(self) -> int:
        if self.out_of_memory:
            return OUT_OF_MEMORY
        return HOOK_FAILED if self.error is not None else TERMINATED


def advance(run: Run, on_step, chunk: int) -> int:
    """Advance the engine in chunks of about 20 ms (a KeyboardInterrupt is raised
    between chunks), or one step at a time when ``on_step`` is to be called after
    every accepted step (it returns True to stop the run); grow full buffers."""
    while True:
        if run.guard is not None:
            run.guard.check()         # (a Ctrl-C during the chunk: KeyboardInterrupt here)
        c0 = time.perf_counter()
        steps = int(run.st.ic[E.C_STEPS])
        code = E.advance(*run.args(), 1 if on_step is not None else chunk)
        dt = time.perf_counter() - c0
        if dt > 0:
            chunk = int(min(max(chunk * min(4.0, 0.02 / dt), 1), 100000))
        if on_step is not None and code in (E.CHUNK_DONE, E.FINISHED) \
                and run.st.ic[E.C_STEPS] > steps and on_step():
            return on_step.stop_code()
        if code == E.BUFFER_FULL:
            if not run.grow(on_step.dense_steps if on_step is not None else 0):
                return OUT_OF_MEMORY
            continue
        if code != E.CHUNK_DONE:
            return code


def advance_scipy(run: Run, opts: RunOptions, t1: float, on_step) -> int:
    """An implicit :func:`scipy.integrate.solve_ivp` method: scipy takes the steps, the
    engine evaluates the right-hand side and does everything after each step (cubic
    Hermite interpolation of the step's outputs); ``on_step`` gets scipy's interpolant."""
    st, opt = run.st, run.opt
    addrs, md, buf, packed_opt, _, _ = run.args()
    failed = [0]

    def fun(t, y):
        out = np.empty(y.shape[0])
        code = E.rhs_at(addrs, md, buf, packed_opt, run.args()[5], t,
                        np.ascontiguousarray(y, dtype=float), out)
        if code != 0:
            failed[0] = code
            raise _EngineStop(code)
        return out

    method = opts.method
    kw: dict[str, Any] = {"rtol": opts.rtol, "atol": opts.atol, "max_step": opts.max_step}
    if opts.first_step:
        kw["first_step"] = opts.first_step
    cls = IVP_METHODS[method]
    ode = cls(fun, float(st.sc[E.S_T]), st.y.copy(), t1, **kw)
    try:
        while ode.status == "running":
            if run.guard is not None:
                run.guard.check()
            if st.ic[E.C_STEPS] >= opt.i[E.I_MAXSTEPS]:
                return E.MAX_STEPS
            if (st.t_eval.shape[0] == 0 and st.ic[E.C_NOUT] >= st.out_t.shape[0]) \
                    or st.ic[E.C_NEV] + 4 >= st.ev_f.shape[0]:
                if not run.grow(on_step.dense_steps if on_step is not None else 0):
                    return OUT_OF_MEMORY
                st = run.st
            t_prev, y_prev, f_prev = ode.t, ode.y.copy(), st.f.copy()
            msg = ode.step()
            if ode.status == "failed":
                run.fail_message = f"{method} failed at t={ode.t}: {msg}"
                return E.STEP_TOO_SMALL
            st.y_old[:], st.f_old[:] = y_prev, f_prev
            st.sc[E.S_TOLD], st.sc[E.S_HPREV], st.sc[E.S_T] = t_prev, ode.t - t_prev, ode.t
            st.y[:] = ode.y
            st.f[:] = fun(ode.t, ode.y)
            st.ic[E.C_STEPS] += 1
            before = st.y.copy()
            code = E.after_step(*run.args())
            if code != 0:
                return code
            if on_step is not None and on_step(ode.dense_output() if on_step.sol is not None
                                               else None):
                return on_step.stop_code()
            if ode.status == "running" and not np.array_equal(before, st.y):
                ode = cls(fun, ode.t, st.y.copy(), t1,
                          **{**kw, "first_step": min(ode.step_size, t1 - ode.t)})
    except _EngineStop:
        return failed[0]
    return E.FINISHED


class _EngineStop(Exception):
    """A right-hand side evaluated for scipy failed (the engine's status is kept)."""
