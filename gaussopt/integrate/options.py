"""The options of a run of :func:`gaussopt.simulate`, validated once, in one frozen object.

:func:`~gaussopt.simulate` checks its arguments here, before anything runs
(:func:`run_options`), and hands one :class:`RunOptions` down: to the smooth run, to
every phase of a contact run (a phase changes a few fields with :meth:`RunOptions.but`)
and, packed by :func:`engine_options`, to the compiled engine. Each check raises a
:class:`~gaussopt.ModelError` naming the argument, what was expected and what was found
(the role of scipy's ``_ivp/common.py``).
"""

from __future__ import annotations

import dataclasses
import numbers
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

import gaussopt.core.records as R
from gaussopt.core.checks import as_state, check_count, check_real, found
from gaussopt.core.exceptions import ModelError
from gaussopt.core.settings import FIXED_STEP_ENERGY, FIXED_STEP_RESIDUAL
from gaussopt.core.status import METHOD_CODES, STAB_BAUMGARTE, STAB_NONE, STAB_PROJECTION
from gaussopt.integrate.guards import DEFAULT_MAX_MEMORY
from gaussopt.integrate.stabilization import Baumgarte, Projection
from gaussopt.integrate.validation import validate_t_span, validate_tol
from gaussopt.model.system import System

__all__ = ["RunOptions", "ContactOptions", "run_options", "engine_options",
           "FIXED_STEP_METHODS", "ENGINE_METHODS", "SCIPY_METHODS", "ALL_METHODS"]

#: the fixed-step methods (step ``dt``)
FIXED_STEP_METHODS = ("rk4", "euler")
#: methods integrated inside the compiled engine (:mod:`gaussopt.integrate.engine`)
ENGINE_METHODS = ("euler", "rk4", "RK23", "RK45", "DOP853")
#: scipy's ``solve_ivp`` methods
SCIPY_METHODS = ("RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA")
ALL_METHODS = (*FIXED_STEP_METHODS, *SCIPY_METHODS)


def _bool(value: Any, label: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ModelError(f"`{label}` must be True or False, found {found(value)}.")
    return bool(value)


def _callable_or_none(value: Any, label: str, what: str):
    if value is not None and not callable(value):
        raise ModelError(f"`{label}` must be None or {what}, found {found(value)}.")
    return value


#: the impact laws of a contact run (:class:`ContactOptions`)
IMPACT_LAWS = ("newton", "sequential")


@dataclasses.dataclass(frozen=True)
class ContactOptions:
    """Options of the event-driven run of a system with :class:`~gaussopt.Contact`
    constraints (``simulate(..., contact_options={...})``).

    Attributes
    ----------
    max_impacts : int, default 100000
        Stop (``success=False``) after this many impacts.
    zeno_height : float or None, default None
        A rebound whose apex ``gap'^2 / (2 |gap''|)`` is below this height closes the
        contact (the end of an accumulation of impacts). None: ``100 (atol + rtol
        max|q0|)``, a hundred times the integrator's position tolerance, below what the
        run resolves. Must be positive.
    impact_law : {"newton", "sequential"}, default "newton"
        How an impact of several touching points is resolved.
        ``"newton"``: the generalized Newton law at every point at once (one velocity-level
        contact problem; a Newton's cradle of three touching balls with ``e = 1`` gives
        ``(-1/3, 2/3, 2/3) v0``, the answer of rigid bodies without a propagation time).
        ``"sequential"``: binary impacts one point at a time, the most negative gap rate
        first, each by Newton's and Coulomb's laws at that point alone, until no touching
        point approaches (the cradle gives ``(0, 0, v0)``, as real steel balls do: the
        wave passes through the chain one contact at a time). The end of an accumulation
        of impacts is resolved at once whatever the law.
    """

    max_impacts: int = 100_000
    zeno_height: Optional[float] = None
    impact_law: str = "newton"

    @classmethod
    def from_mapping(cls, options: Optional[Mapping]) -> "ContactOptions":
        """The options of ``contact_options`` (a mapping of the attributes' names), checked."""
        if options is None:
            return cls()
        if isinstance(options, ContactOptions):
            return options
        if not isinstance(options, Mapping):
            raise ModelError(f"`contact_options` must be a dict of {sorted(cls._names())}, found "
                             f"{found(options)}.")
        unknown = sorted(set(options) - cls._names())
        if unknown:
            import difflib

            hints = [difflib.get_close_matches(str(k), cls._names(), n=1) for k in unknown]
            said = ", ".join(f"{k!r}" + (f" (did you mean {h[0]!r}?)" if h else "")
                             for k, h in zip(unknown, hints))
            raise ModelError(f"`contact_options` has no option {said}; the options are "
                             f"{sorted(cls._names())}.")
        max_impacts = options.get("max_impacts", cls.max_impacts)
        max_impacts = check_count(max_impacts, "contact_options['max_impacts']", minimum=0)
        zeno = options.get("zeno_height", None)
        if zeno is not None:
            zeno = check_real(zeno, "contact_options['zeno_height']",
                              hint="a height in the units of the gaps, e.g. 1e-6 (None: "
                                   "100 times the position tolerance)")
        law = options.get("impact_law", cls.impact_law)
        if law not in IMPACT_LAWS:
            raise ModelError(f"`contact_options['impact_law']` must be one of "
                             f"{list(IMPACT_LAWS)}, found {found(law)}.")
        return cls(max_impacts=max_impacts, zeno_height=zeno, impact_law=law)

    @classmethod
    def _names(cls) -> set:
        return {f.name for f in dataclasses.fields(cls)}


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The options of one run of :func:`gaussopt.simulate`, validated (:func:`run_options`).

    Every attribute is the argument of :func:`gaussopt.simulate` of the same name, checked
    and normalized: ``method`` resolved (never None), ``first_step`` holding the first
    step of an adaptive method (``dt`` given to one is its first step), ``t_eval`` a
    float array, ``events`` a tuple, ``contact`` the :class:`ContactOptions` of a system
    with contacts (None otherwise). Frozen: a contact run's phases change a few fields
    with :meth:`but`, never the user's object.
    """

    solver: Any = "closed_form"
    solver_options: Mapping = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    method: str = "DOP853"
    dt: Optional[float] = None
    auto_dt: bool = False
    first_step: Optional[float] = None
    max_step: float = np.inf
    rtol: float = 1e-9
    atol: float = 1e-9
    t_eval: Optional[np.ndarray] = None
    stabilization: Any = None
    project_initial: bool = False
    consistency_tol: float = 1e-8
    monitor_rank: bool = True
    max_steps: int = 10_000_000
    progress: Optional[Callable] = None
    events: Optional[tuple] = None
    dense_output: bool = False
    max_memory: float = DEFAULT_MAX_MEMORY
    contact: Optional[ContactOptions] = None

    def but(self, **changes) -> "RunOptions":
        """A copy with ``changes`` (what a contact run's phase changes: its events, output
        times, ...)."""
        return dataclasses.replace(self, **changes)

    @property
    def fixed_step(self) -> bool:
        """The method steps by ``dt`` (``"rk4"``, ``"euler"``)."""
        return self.method in FIXED_STEP_METHODS

    @property
    def records(self) -> bool:
        """The run keeps every step's interpolant (dense output or events)."""
        return bool(self.dense_output) or self.events is not None






def _step(value: Any, label: str, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ModelError(f"`{label}` must be {what}, found {found(value)}.")
    x = float(value)
    if not (np.isfinite(x) and x > 0):
        raise ModelError(f"`{label}` must be {what}, found {x!r}.")
    return x


def run_options(system: System, t_span, q0, v0, *, solver, method, dt, first_step, max_step,
                rtol, atol, t_eval, stabilization, solver_options, project_initial,
                consistency_tol, monitor_rank, max_steps, progress, events, dense_output,
                max_memory, contact_options, stacklevel: int = 3):
    """Check every argument of :func:`gaussopt.simulate` (documented there) before anything
    runs; return ``(t0, t1, q0, v0, options)`` with the state as float arrays and the
    options as one :class:`RunOptions`. ``stacklevel`` of the tolerance warning counts
    from the caller of this function."""
    if not isinstance(system, System):
        raise ModelError(f"`system` must be a gaussopt.System, found {type(system).__name__}.")
    n = system.n
    t0, t1 = validate_t_span(t_span)
    q = as_state(q0, n, "q0")
    v = as_state(v0, n, "v0")
    ga = (isinstance(solver, str) and solver == "ga") or getattr(solver, "name", None) == "ga"
    auto_dt = False
    if method is None:
        method = "rk4" if ga else "DOP853"
        auto_dt = ga and dt is None               # the step is chosen at t0 (see simulate)
    if not isinstance(method, str) or method not in ALL_METHODS:
        raise ModelError(f"`method` must be one of {list(ALL_METHODS)}, found {found(method)}.")
    fixed = method in FIXED_STEP_METHODS
    if fixed:
        if not auto_dt:
            dt = _step(dt, "dt", f"a positive step for method={method!r}")
        for label, value, unset in (("first_step", first_step, None), ("max_step", max_step, np.inf)):
            if value is not unset and not (label == "max_step" and value == np.inf):
                raise ModelError(f"`{label}` applies to the adaptive methods; method={method!r} "
                                 f"steps by `dt`, found {label}={found(value)}.")
    else:
        if dt is not None:
            dt = _step(dt, "dt", "positive (used as first step)")
        if first_step is not None:
            first_step = _step(first_step, "first_step", "a positive first step (or None)")
            if dt is not None and dt != first_step:
                raise ModelError(f"`dt` and `first_step` both give the first step of method="
                                 f"{method!r} and differ ({dt} and {first_step}): pass one.")
        first_step = first_step if first_step is not None else dt
        if first_step is not None and t1 > t0:
            first_step = min(first_step, t1 - t0)
    if isinstance(max_step, (bool, np.bool_)) or not isinstance(max_step, numbers.Real) \
            or not float(max_step) > 0 or np.isnan(float(max_step)):
        raise ModelError(f"`max_step` must be positive (inf: no bound), found {found(max_step)}.")
    max_step = float(max_step)
    rtol, atol = validate_tol(rtol, atol, stacklevel=stacklevel + 1)
    if stabilization is not None and not isinstance(stabilization, (Baumgarte, Projection)):
        raise ModelError("`stabilization` must be None, gaussopt.Baumgarte(...) or "
                         f"gaussopt.Projection(...), found {found(stabilization)}.")
    if t_eval is not None:
        try:
            t_eval = np.array(t_eval, dtype=float).ravel()
        except (TypeError, ValueError) as e:
            raise ModelError(f"`t_eval` must be an array of increasing times within t_span "
                             f"[{t0}, {t1}], found {found(t_eval)}.") from e
        if t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < t0 \
                or t_eval[-1] > t1 or not np.all(np.isfinite(t_eval)):
            raise ModelError(f"`t_eval` must be increasing and within t_span [{t0}, {t1}].")
        t_eval.setflags(write=False)
    if solver_options is None:
        solver_options = {}
    if not isinstance(solver_options, Mapping):
        raise ModelError(f"`solver_options` must be a dict of the step solver's options, found "
                         f"{found(solver_options)}.")
    if events is not None:
        # (the same checks as the events' tracker, which calls each at the initial state)
        if callable(events):
            events = (events,)
        elif isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
            raise ModelError("`events` must be a callable f(t, q, v) -> float or a sequence of "
                             f"them, found {type(events).__name__}.")
        events = tuple(events)
        for i, f in enumerate(events):
            if not callable(f):
                raise ModelError(f"`events[{i}]` must be a callable f(t, q, v) -> float, found "
                                 f"{type(f).__name__}.")
    contact = None
    if system.contacts:
        contact = ContactOptions.from_mapping(contact_options)
        if events is not None:
            raise ModelError(f"`events` is not supported with contacts yet, found {found(events)}: "
                             "run without it (with dense_output=True, traj.sol(t) gives the state "
                             "anywhere along the run, to locate the zeros afterwards).")
        if not isinstance(solver, (str, type)):
            raise ModelError("`solver` must be a solver name or class for a system with contacts "
                             "(each phase makes its own), found an instance of "
                             f"{type(solver).__name__}.")
    elif contact_options is not None:
        raise ModelError("`contact_options` applies to systems with Contact constraints; "
                         f"{system.name!r} has none.")
    opts = RunOptions(
        solver=solver, solver_options=MappingProxyType(dict(solver_options)), method=method,
        dt=dt, auto_dt=auto_dt, first_step=None if fixed else first_step, max_step=max_step,
        rtol=rtol, atol=atol, t_eval=t_eval, stabilization=stabilization,
        project_initial=_bool(project_initial, "project_initial"),
        consistency_tol=check_real(consistency_tol, "consistency_tol",
                                   hint="a distance the initial state may be off the "
                                        "constraints, e.g. 1e-8"),
        monitor_rank=_bool(monitor_rank, "monitor_rank"),
        max_steps=check_count(max_steps, "max_steps"),
        progress=_callable_or_none(progress, "progress", "a callable progress(t)"),
        events=events, dense_output=_bool(dense_output, "dense_output"),
        max_memory=check_real(max_memory, "max_memory", allow_inf=True,
                              hint="a number of bytes, e.g. 2e9 (inf: no limit)"),
        contact=contact)
    return t0, t1, q, v, opts


def engine_options(opts: RunOptions, solver_code: int, rank_tol: float, m: int,
                   check_symmetry: bool, t1: float, engine_method: str,
                   energy_check: bool = False):
    """The options as the compiled engine reads them: :class:`gaussopt.core.records.Options`
    (an integer and a float array indexed by the ``I_*`` and ``F_*`` of
    :mod:`gaussopt.core.records`). The one place where a :class:`RunOptions` becomes
    numbers.

    Parameters
    ----------
    opts : RunOptions
    solver_code : int
        How the engine solves a step (:data:`gaussopt.core.status.SOLVER_CODES`: the
        step solver's ``compiled_method``).
    rank_tol : float
        The step solver's.
    m : int
        Equality rows of the model (no rows: no rank monitor).
    check_symmetry : bool
        Check ``M``'s symmetry at every step (a mass matrix that is not constant).
    t1 : float
        The end of the span.
    engine_method : str
        The method the engine runs (``"rk4"`` for the Hermite output of scipy's implicit
        methods).
    energy_check : bool
        A fixed-step run checks the drift of the model's energy (the model defines one);
        see :data:`gaussopt.core.settings.FIXED_STEP_ENERGY`.
    """
    oi = np.zeros(R.N_OI, dtype=np.int64)
    of = np.zeros(R.N_OF)
    # (events alone: each step's interpolant is built when they ask for it, in the steps
    # where they need interior states; dense output keeps every step's)
    oi[R.I_DENSE] = (R.DENSE_EAGER if opts.dense_output else
                     R.DENSE_LAZY if opts.events is not None else R.DENSE_NONE)
    oi[R.I_METHOD] = METHOD_CODES[engine_method]
    oi[R.I_SOLVER] = solver_code
    stab = opts.stabilization
    if isinstance(stab, Projection):
        oi[R.I_STAB] = STAB_PROJECTION
        oi[R.I_PVEL] = int(stab.velocity)
        oi[R.I_PRHS] = int(stab.rhs)
        oi[R.I_PITER] = int(stab.max_iter)
        of[R.F_PTOL] = stab.tol
    elif isinstance(stab, Baumgarte):
        oi[R.I_STAB] = STAB_BAUMGARTE
        of[R.F_ALPHA], of[R.F_BETA] = stab.alpha, stab.beta
        of[R.F_GAMMA] = stab.alpha if stab.gamma is None else stab.gamma
    else:
        oi[R.I_STAB] = STAB_NONE
    oi[R.I_MONITOR] = int(bool(opts.monitor_rank) and m > 0)
    oi[R.I_MAXSTEPS] = opts.max_steps
    oi[R.I_CHECKSYM] = int(check_symmetry)
    of[R.F_RANKTOL] = rank_tol
    of[R.F_RTOL], of[R.F_ATOL] = opts.rtol, opts.atol
    of[R.F_DT] = opts.dt or 0.0
    of[R.F_FIRST] = opts.first_step or 0.0
    of[R.F_T1] = t1
    of[R.F_MAXSTEP] = opts.max_step
    if opts.fixed_step:
        # (no error control: the run checks its constraints and energy against the
        # problem's scales after every step, gaussopt.core.settings)
        oi[R.I_GUARD] = R.GUARD_RESIDUAL | (R.GUARD_ENERGY if energy_check else 0)
        of[R.F_GUARD_RES] = FIXED_STEP_RESIDUAL
        of[R.F_GUARD_E] = FIXED_STEP_ENERGY
    return R.Options(oi, of)
