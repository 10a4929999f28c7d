"""A stepping interface for control loops: :class:`Stepper`, built once, stepped many times.

A controller running at 1 kHz needs the state after one step, a new input, the next
step. :func:`~gaussopt.simulate` is a whole run: it checks its arguments, builds the
step solver, the model's compiled functions and the engine's records, and assembles a
Trajectory -- milliseconds of set-up around microseconds of stepping when the span is
one step. A :class:`Stepper` does the set-up once (in its constructor and
:meth:`Stepper.reset`) and :meth:`Stepper.step` is one call into the compiled engine
(:func:`gaussopt.integrate.engine.step_inputs`), which takes the step exactly as a run
of :func:`~gaussopt.simulate` with the same fixed-step method takes it: the same
integrator, stabilization, per-step verification and rank monitor
(:mod:`gaussopt.integrate.engine`), on the same records
(:class:`gaussopt.integrate.engine_run.Run`). MuJoCo's ``mj_step`` is the model of the
interface: the state is read from the stepper's attributes and advanced in place.

The control input is the mechanism the model interface already has: every model
function reads the model's parameter array ``p``
(:mod:`gaussopt.core.model_interface`). A front end that generates the functions names
its entries (:class:`~gaussopt.core.model_interface.ParameterSlots`: a symbolic model's
parameters and specified inputs); the stepper's ``inputs`` names those it may change,
and ``step(ctrl)`` writes ``ctrl`` into its own copy of ``p`` before the step.
"""

from __future__ import annotations

import numbers
from typing import Optional, Sequence, Union

import numpy as np

import gaussopt.core.compiled as C
import gaussopt.integrate.engine as E
from gaussopt.core.checks import as_state, found
from gaussopt.core.exceptions import ModelError, StepFailedError, UnsupportedConstraintError
from gaussopt.core.model_interface import quiet_compile
from gaussopt.core.status import message as status_message
from gaussopt.gauss.compiled_step import entry_point
from gaussopt.gauss.solvers import StepSolver
from gaussopt.gauss.solve_step import make_solver
from gaussopt.integrate.engine_run import Run, run_units
from gaussopt.integrate.ivp import DEFAULT_STABILIZATION
from gaussopt.integrate.options import FIXED_STEP_METHODS, run_options
from gaussopt.integrate.output_assembly import failure, rank_events
from gaussopt.integrate.stabilization import Baumgarte, Projection
from gaussopt.integrate.validation import check_consistent
from gaussopt.model.model_functions import model_functions
from gaussopt.model.system import System

__all__ = ["Stepper"]

#: a stepper never ends by count (the engine's ``max_steps``)
_NO_END = 1 << 62
#: the output times of a stepper's run: none (the engine emits a sample at each output
#: time; the stepper's state is read from the engine's own)
_NO_OUTPUT = np.array([np.inf])
_F64 = np.dtype(np.float64)


class Stepper:
    """Advance a constrained system by fixed steps, one call at a time (a control loop).

    Built once; then :meth:`step` advances the state by ``dt`` in place, as MuJoCo's
    ``mj_step`` does. Each step is the step of :func:`~gaussopt.simulate` with the same
    ``method``, ``dt``, solver and stabilization: the state after ``N`` steps is what
    ``simulate(system, (t0, t0 + N dt), q0, v0, method=method, dt=dt)`` ends with,
    to rounding; every step is verified and the rank of the constraint rows is
    monitored the same way.

    Parameters
    ----------
    system : System
        Without :class:`~gaussopt.Contact` constraints (their event-driven run is
        :func:`~gaussopt.simulate`'s).
    q0, v0 : array_like, shape (n,), optional
        Initial state; without them, call :meth:`reset` before the first step.
    dt : float
        The step, positive.
    method : {"rk4", "euler"}, default "rk4"
        Fixed-step method of the engine (:data:`gaussopt.integrate.options.FIXED_STEP_METHODS`).
    t0 : float, default 0.0
        Initial time.
    solver : {"closed_form", "lagrange", "qp", "ga"} or StepSolver, default "closed_form"
        As in :func:`~gaussopt.simulate`. The QP and the GA run in Python (called back
        by the engine at every evaluation): tens of microseconds to milliseconds a step.
    solver_options : dict, optional
        Options of the step solver (``rank_tol``, ``objective``, ...).
    stabilization : Projection, Baumgarte or None, default Projection()
        As in :func:`~gaussopt.simulate` (the default projects every step's state onto
        the constraints, which keeps singular positions on the physical branch).
    monitor_rank : bool, default True
        Locate singular positions (:attr:`rank_events`), as :func:`~gaussopt.simulate`.
    inputs : sequence of str, default ()
        Names of the model's parameters that :meth:`step` sets from ``ctrl`` (in this
        order): entries of the compiled model's parameter array that enter only the
        force (``system.parameter_slots``, given by :mod:`gaussopt.symbolic`: its
        parameters and its specified inputs given as numbers; by a
        :class:`gaussopt.multibody.tree.Model`: its actuators' controls). The stepper
        keeps its own copy of the parameters: the system itself is not changed.
    project_initial : bool, default False
        Project an inconsistent initial state (of the constructor or :meth:`reset`)
        onto the constraints instead of raising.
    consistency_tol : float, default 1e-8
        How far the initial state may be off the constraints (as in
        :func:`~gaussopt.simulate`).

    Attributes
    ----------
    t : float
        Time of the current state.
    q, v : ndarray, shape (n,)
        The current state: read-only views of the stepper's own arrays, which the next
        step overwrites (``q.copy()`` to keep one).
    a : ndarray, shape (n,)
        The accelerations at the current state (with the inputs of the last step), as
        the step solver found them (a read-only view).
    ctrl : ndarray, shape (k,)
        The current values of ``inputs`` (a copy).
    dt, method, n : float, str, int
    steps : int
        Steps taken since the last :meth:`reset`.
    rank_events : list of RankEvent
        Singular positions crossed since the last :meth:`reset` (as
        ``Trajectory.rank_events``).

    Raises
    ------
    ModelError
        A bad argument (named, with what was expected and what was found); an input
        that is not a force-only parameter of the compiled model; inputs with a solver
        that evaluates the model in Python (the QP, the GA, the paper objective, a model
        without compiled functions), where ``ctrl`` would not reach the force.
    UnsupportedConstraintError
        A system with :class:`~gaussopt.Contact` constraints.

    Notes
    -----
    **Failures.** A step that cannot be taken -- the step solver refuses it (an
    indeterminate motion, inconsistent constraints), its answer fails the verification,
    the model's code raises or returns NaN -- raises
    :class:`~gaussopt.core.exceptions.StepFailedError` (a :class:`~gaussopt.SolverError`)
    with the specific error found at the failing state chained, and leaves the state
    at the last good step: ``t``, ``q``, ``v`` and ``a`` are as before the call (the
    inputs keep the values given). An exception, not a status to poll, because a
    control loop that ignores a status would go on commanding a state that does not
    exist; one that expects failures catches this one class.

    **Inputs.** ``step(ctrl)`` holds the inputs constant over the step (a zero-order
    hold): when a value changes, the accelerations at the current state are computed
    again with it (one more evaluation of the step) before the step is taken.

    **Cost.** A step costs the compiled step (four evaluations of the Gauss step for
    ``"rk4"``, one for ``"euler"``, the projection and the rank monitor: about 11 us for
    the four-bar's ``rk4`` step) plus one to three microseconds of Python
    (``benchmarks/stepper.py`` measures both). The first stepper of a process loads the
    engine's compiled code from the cache (or compiles it once per machine).

    **Threads.** A stepper is one state: step it from one thread at a time (a stepper
    per thread for parallel rollouts).

    Examples
    --------
    A pendulum (unit mass, unit length, Cartesian coordinates) released horizontally,
    100 steps of 1 ms:

    >>> import numpy as np, gaussopt as go
    >>> pend = go.System(("x", "y"), mass=np.eye(2), force=[0.0, -9.81],
    ...     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
    >>> stepper = go.Stepper(pend, [1.0, 0.0], [0.0, 0.0], dt=1e-3)
    >>> for _ in range(100):
    ...     stepper.step()
    >>> round(stepper.t, 12), bool(abs(stepper.q @ stepper.q - 1.0) < 1e-12)
    (0.1, True)
    """

    def __init__(self, system: System, q0=None, v0=None, *, dt: float, method: str = "rk4",
                 t0: float = 0.0, solver: Union[str, StepSolver] = "closed_form",
                 solver_options: Optional[dict] = None,
                 stabilization: Union[None, Baumgarte, Projection] = DEFAULT_STABILIZATION,
                 monitor_rank: bool = True, inputs: Sequence[str] = (),
                 project_initial: bool = False, consistency_tol: float = 1e-8) -> None:
        if not isinstance(system, System):
            raise ModelError(f"`system` must be a gaussopt.System, found {found(system)}.")
        if system.contacts:
            raise UnsupportedConstraintError(
                f"a Stepper does not run Contact constraints ({[c.name for c in system.contacts]}"
                "): their impacts, closings and lift-offs are events of gaussopt.simulate's "
                "contact run.")
        if not isinstance(method, str) or method not in FIXED_STEP_METHODS:
            raise ModelError(f"`method` must be one of {list(FIXED_STEP_METHODS)} (a Stepper "
                             f"advances by the fixed step dt), found {found(method)}.")
        n = system.n
        # every option checked as simulate checks it (one RunOptions), no output times
        _, _, _, _, opts = run_options(
            system, (0.0, 0.0), np.zeros(n), np.zeros(n), solver=solver, method=method, dt=dt,
            first_step=None, max_step=np.inf, rtol=1e-9, atol=1e-9, t_eval=None,
            stabilization=stabilization, solver_options=solver_options,
            project_initial=project_initial, consistency_tol=consistency_tol,
            monitor_rank=monitor_rank, max_steps=_NO_END, progress=None, events=None,
            dense_output=False, max_memory=np.inf, contact_options=None)
        if isinstance(stabilization, Projection) and not (system.holonomic or system.nonholonomic):
            opts = opts.but(stabilization=None)        # nothing to project onto
        self._opts = opts.but(t_eval=_NO_OUTPUT)
        self.system = system
        self.n = n
        self.dt = float(opts.dt)
        self.method = method
        self._solver = make_solver(system, solver, **opts.solver_options)
        self._names = self._input_names(inputs)
        slots = system.parameter_slots
        self._slots = np.array([slots.index[x] for x in self._names], dtype=np.int64)
        self._u = np.zeros(len(self._names))          # (the values of ctrl, passed to the step)
        self._no_u = np.zeros(0)
        self._no_slots = np.zeros(0, dtype=np.int64)
        self._mf = None                   # built at the first reset (needs the row counts)
        self._records = None
        self._run: Optional[Run] = None
        if (q0 is None) != (v0 is None):
            raise ModelError("`q0` and `v0` must be given together (or neither: then call "
                             f"reset(q, v) before the first step), found q0={found(q0)}, "
                             f"v0={found(v0)}.")
        if q0 is not None:
            self.reset(q0, v0, t0)

    # ------------------------------------------------------------------ set-up
    def _input_names(self, inputs) -> tuple:
        """``inputs`` checked against the system's named parameters (:class:`ParameterSlots`)."""
        if isinstance(inputs, str) or not isinstance(inputs, Sequence) \
                or not all(isinstance(x, str) for x in inputs):
            raise ModelError(f"`inputs` must be a sequence of parameter names (str), e.g. "
                             f"('tau',), found {found(inputs)}.")
        names = tuple(inputs)
        if not names:
            return names
        if len(set(names)) != len(names):
            raise ModelError(f"`inputs` has duplicate names: {names}.")
        slots = getattr(self.system, "parameter_slots", None)
        if slots is None or self.system.compiled is None:
            what = ("its compiled functions do not name their parameters (gaussopt.symbolic's "
                    "and the actuators' controls of a gaussopt.multibody.tree model do)"
                    if self.system.compiled is not None else
                    "a System of Python functions has no parameter array: its force reads "
                    "whatever it closes over")
            raise ModelError(
                f"`inputs` names parameters of a compiled model, and System "
                f"{self.system.name!r} has none: {what}. Build the model with "
                "gaussopt.symbolic, with the input as a parameter or a specified input given "
                "as a number, e.g. SymbolicModel(...).system({'tau': 0.0, ...}), or as a "
                "tree model with actuators (inputs=model.actuator_names).")
        unknown = [x for x in names if x not in slots.index]
        if unknown:
            raise ModelError(f"`inputs` {unknown} are not parameters of the compiled model "
                             f"{self.system.name!r}; its parameters are {sorted(slots.index)}.")
        held = [x for x in names if x not in slots.force_only]
        if held:
            raise ModelError(
                f"`inputs` {held} enter the mass matrix or a constraint of "
                f"{self.system.name!r}; an input may only enter the force (a changed length "
                "would move the constraints under the state). The force-only parameters are "
                f"{sorted(slots.force_only)}.")
        if self._solver.runs_in_python:
            raise ModelError(
                f"`inputs` reach the compiled model's parameters, and solver "
                f"{self._solver.name!r} (objective {self._solver.objective!r}) evaluates the "
                "model through its Python functions, which would not see them: use "
                "solver='closed_form' or 'lagrange' with objective='exact'.")
        return names

    def _build(self) -> None:
        """The model's functions with a parameter array of this stepper's own, and the
        compiled code a step calls (loaded before the first step)."""
        solver, opts = self._solver, self._opts
        mf = model_functions(self.system, solver.acceleration if solver.runs_in_python else None)
        if self._names and not mf.compiled:
            raise ModelError(f"`inputs` need the compiled functions of {self.system.name!r}, "
                             "which numba could not compile (the model runs in Python).")
        mf.p = np.array(mf.p, dtype=float)         # (the stepper's own: ctrl writes it)
        self._mf = mf
        self._u[...] = mf.p[self._slots]
        monitor = opts.monitor_rank and bool(self.system.m)
        C.ensure(E.step_inputs, *run_units(solver, opts.method, opts.stabilization, False,
                                           False, False, monitor))

    def reset(self, q, v, t: float = 0.0) -> None:
        """Start again from ``(q, v)`` at time ``t``.

        The state is checked as :func:`~gaussopt.simulate` checks its initial state
        (finite, shape (n,), on the constraints to ``consistency_tol`` unless
        ``project_initial``), the step solver's running references and the rank
        monitor start afresh, :attr:`steps` and :attr:`rank_events` are emptied. The
        inputs keep their values.

        Parameters
        ----------
        q, v : array_like, shape (n,)
        t : float, default 0.0

        Raises
        ------
        ModelError
            A state of the wrong shape, not finite, or off the constraints.
        StepFailedError
            The accelerations at the state cannot be found (as a failed step).
        """
        system, opts, n = self.system, self._opts, self.n
        q = as_state(q, n, "q")
        v = as_state(v, n, "v")
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real) \
                or not np.isfinite(float(t)):
            raise ModelError(f"`t` must be a finite time (a float), found {found(t)}.")
        t = float(t)
        if system._row_counts is None:
            system.check(t, q, v)
        if self._mf is None:
            self._build()
        problems = check_consistent(system, t, q, v, opts.consistency_tol)
        if problems:
            if not opts.project_initial:
                raise ModelError("The initial state is inconsistent with the constraints: "
                                 + "; ".join(problems) + ". Pass project_initial=True to project "
                                 "it onto the constraints, or correct q/v.")
            stab = opts.stabilization
            q, v, _ = (stab if isinstance(stab, Projection) else Projection()).project(
                system, t, q, v, self._solver.rank_tol)
            left = check_consistent(system, t, q, v, opts.consistency_tol)
            if left:
                raise ModelError("Projecting the initial state failed: " + "; ".join(left))
        stab = opts.stabilization
        self._solver.begin_run(t, q, v, stab.correction(system)
                               if isinstance(stab, Baumgarte) else None)
        self._mf.error = None
        run = Run(system, self._solver, self._mf, opts, t, np.inf, np.concatenate([q, v]),
                  model_records=self._records)
        if self._records is None:
            self._records = run.model_records()
        C.ensure(*run.band_units())
        self._run = run
        self._bind()
        with quiet_compile():
            code = E.start(*run.args())
        if code != 0:
            self._run = None
            self._raise(run, code, t)

    def _bind(self) -> None:
        """The arguments of the compiled step (packed once per run) and its compiled
        function for their types (called without numba's typing of the arguments)."""
        run = self._run
        st = run.st
        n = self.n
        self._st = st
        self._ic, self._sc = st.ic, st.sc
        self._args = run.args()
        q, v, a = st.y[:n], st.y[n:], st.f[n:]
        for x in (q, v, a):
            x.flags.writeable = False
        self._q, self._v, self._a = q, v, a
        with quiet_compile():
            self._call = entry_point(E.step_inputs, (*self._args, 1, self._no_slots, self._no_u))

    # ------------------------------------------------------------------ stepping
    def step(self, ctrl=None, nstep: int = 1) -> None:
        """Advance the state by ``dt`` (``nstep`` times), the inputs set to ``ctrl``.

        Parameters
        ----------
        ctrl : float or array_like, shape (k,), optional
            New values of the stepper's ``inputs`` (a float for one input), held over
            the step; None keeps the current ones.
        nstep : int, default 1
            Steps to take (with the same inputs), as ``mj_step``'s ``nstep``.

        Raises
        ------
        StepFailedError
            A step failed (see the class's Notes); the state is the last good step's.
        ModelError
            ``ctrl`` of the wrong shape or not finite (nothing is done); ``reset`` not
            called yet.
        """
        if ctrl is None:
            slots, u = self._no_slots, self._no_u
        else:
            slots, u = self._slots, self._u
            k = u.shape[0]
            if k == 1 and isinstance(ctrl, (float, int)) and not isinstance(ctrl, bool):
                u[0] = ctrl
            else:
                self._set(ctrl)
        try:
            call = self._call
        except AttributeError:
            raise ModelError("the Stepper has no state yet: call reset(q, v, t) first (or "
                             "give q0 and v0 to its constructor).") from None
        before = 0
        if nstep != 1:
            if isinstance(nstep, (bool, np.bool_)) or not isinstance(nstep, numbers.Integral) \
                    or nstep < 1:
                raise ModelError(f"`nstep` must be an integer >= 1, found {found(nstep)}.")
            nstep = int(nstep)
            before = int(self._ic[E.C_STEPS])
        addrs, md, buf, opt, tab, st = self._args
        code = call(addrs, md, buf, opt, tab, st, nstep, slots, u)
        if code != E.CHUNK_DONE:
            self._settle(code, nstep, before, slots, u)

    def _set(self, ctrl) -> None:
        """``ctrl`` (not a plain float for one input) into the input buffer, checked."""
        k = self._u.shape[0]
        if k == 0:
            raise ModelError("`ctrl` was given, but the Stepper has no inputs: name them with "
                             "Stepper(..., inputs=('tau', ...)).")
        try:
            x = np.asarray(ctrl, dtype=float)
        except (TypeError, ValueError) as e:
            raise ModelError(f"`ctrl` must be {k} float(s) for the inputs {list(self._names)}, "
                             f"found {found(ctrl)}.") from e
        if x.shape != (k,) and not (k == 1 and x.shape == ()):
            raise ModelError(f"`ctrl` must have shape ({k},) for the inputs "
                             f"{list(self._names)}, found shape {x.shape}.")
        self._u[...] = x

    def _settle(self, code: int, nstep: int, before: int, slots, u) -> None:
        """After a call that did not simply succeed: grow the full buffer of rank events
        and take the steps left, or raise (the engine left the last good step)."""
        run = self._run
        while code == E.BUFFER_FULL:
            if not run.grow():                         # (max_memory is inf: never)
                break
            self._bind()
            left = nstep - (int(self._ic[E.C_STEPS]) - before)
            code = self._call(*self._args, left, slots, u) if left > 0 else E.CHUNK_DONE
        if code == E.CHUNK_DONE:
            return
        if code == E.BAD_INPUT:
            bad = [name for name, x in zip(self._names, u) if not np.isfinite(x)]
            self._u[...] = run.md.p[self._slots]       # (the values in force)
            raise ModelError(f"`ctrl` must be finite, found {u.tolist()} (inputs {bad}); "
                             "nothing was done.")
        self._raise(run, code, float(self._sc[E.S_T]))

    def _raise(self, run: Run, code: int, t: float) -> None:
        msg, exc = failure(run, code, self.method)
        err = StepFailedError(f"Stepper: the step from t={t} failed ({status_message(code)}). "
                              f"{msg} The state is the last good step's (t={t}).", t=t,
                              status=int(code), t_failed=float(run.st.sc[E.S_FAIL_T]))
        raise err from exc

    # ------------------------------------------------------------------ the state
    @property
    def t(self) -> float:
        return float(self._sc[E.S_T])

    @property
    def q(self) -> np.ndarray:
        return self._q

    @property
    def v(self) -> np.ndarray:
        return self._v

    @property
    def a(self) -> np.ndarray:
        return self._a

    @property
    def ctrl(self) -> np.ndarray:
        return self._run.md.p[self._slots].copy() if self._run is not None else self._u.copy()

    @property
    def inputs(self) -> tuple:
        """The names of the inputs ``ctrl`` sets."""
        return self._names

    @property
    def steps(self) -> int:
        return int(self._ic[E.C_STEPS]) if self._run is not None else 0

    @property
    def rank_events(self) -> list:
        return rank_events(self._run) if self._run is not None else []

    @property
    def stats(self) -> dict:
        """Counts since the last :meth:`reset`: steps, evaluations of the step
        (``rhs_evaluations``), projections, rank-monitor evaluations."""
        if self._run is None:
            return {}
        ic = self._ic
        return {"steps": int(ic[E.C_STEPS]), "rhs_evaluations": int(ic[E.C_NFEV]),
                "projections": int(ic[E.C_NPROJ]), "monitor_evaluations": int(ic[E.C_NMON]),
                "passage_searches": int(ic[E.C_NSEARCH])}

    def __repr__(self) -> str:
        state = f"t={self.t:g}" if self._run is not None else "no state (reset(q, v) first)"
        return (f"Stepper({self.system.name!r}, method={self.method!r}, dt={self.dt:g}, "
                f"inputs={list(self._names)}, {state})")
