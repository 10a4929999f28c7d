"""Time integration: :func:`simulate`.

The state ``y = (q, v)`` obeys ``q' = v``, ``v' = a(t, q, v)`` where ``a`` is
the solution of one Gauss step. The run is done by the compiled engine
(:mod:`gaussopt.engine`): the explicit methods (``"euler"``, ``"rk4"``,
``"RK23"``, ``"RK45"``, ``"DOP853"``) step inside it; the implicit
:func:`scipy.integrate.solve_ivp` methods (``"Radau"``, ``"BDF"``,
``"LSODA"``) take their steps in scipy and hand every accepted step to the
engine. Either way the stabilizing projection, the rank monitor, the outputs
and the bookkeeping exist once, and a run that fails or is interrupted
returns what it computed. :func:`drive_ivp` steps a scipy solver for the
quasi-velocity equations (:mod:`gaussopt.quasi`).
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import compiled as C
from . import engine as E
from . import kernel as K
from . import sparse as SP
from .contact.driver import simulate_contacts
from .dense import DenseSolution, Dop853Step, EventTracker, HermiteStep, RungeKuttaStep, ScipyStep
from .exceptions import GaussoptError, ModelError, RankChangeWarning, SolverError
from .model import model_functions, quiet_compile
from .result import RankEvent, Trajectory
from .solvers import StepSolver
from .stabilization import Baumgarte, Projection
from .step import as_state, make_solver
from .system import System

__all__ = ["simulate", "Baumgarte", "Projection", "FIXED_STEP_METHODS", "IVP_METHODS",
           "drive_ivp", "DEFAULT_STABILIZATION"]

_EPS = float(np.finfo(float).eps)
class _ScipyMethods(Mapping):
    """solve_ivp's method classes by name; :mod:`scipy.integrate` (a third of a second)
    is imported when a class is first asked for, not when gaussopt is."""

    NAMES = ("RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA")

    def __getitem__(self, name):
        if name not in self.NAMES:
            raise KeyError(name)
        from scipy import integrate

        return getattr(integrate, name)

    def __iter__(self):
        return iter(self.NAMES)

    def __len__(self):
        return len(self.NAMES)


IVP_METHODS = _ScipyMethods()
_RK_METHODS = ("RK23", "RK45", "DOP853", "rk4", "euler")

#: the stabilization :func:`simulate` uses unless told otherwise: projecting the
#: state onto the constraints keeps singular positions on the physical branch
#: and lets redundant linkages pass their folded configurations
DEFAULT_STABILIZATION = Projection()


FIXED_STEP_METHODS = ("rk4", "euler")
#: methods integrated inside the compiled engine (:mod:`gaussopt.engine`)
ENGINE_METHODS = ("euler", "rk4", "RK23", "RK45", "DOP853")
_ALL_METHODS = (*FIXED_STEP_METHODS, *_ScipyMethods.NAMES)


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
            if method in _RK_METHODS:
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
        Tolerances of the adaptive methods.
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
    monitor_rank : bool, default True
        Track the rank of the constraint rows and record singular positions
        (``Trajectory.rank_events``).
    max_steps : int
        Stop (``success=False``) after this many steps.
    progress : callable, optional
        Called as ``progress(t)`` after every accepted step (e.g. a progress bar).
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
    dense_output : bool, default False
        Keep every step's interpolant: ``traj.sol(t) -> (q, v)`` anywhere in the
        computed span (see :class:`gaussopt.dense.DenseSolution`).
    contact_options : dict, optional
        For a system with :class:`~gaussopt.Contact` constraints (an event-driven
        run of smooth phases joined by impacts, closings and lift-offs; see
        :mod:`gaussopt.contact`): ``max_impacts`` and ``zeno_height`` of
        :func:`gaussopt.contact.simulate_contacts`.

    Returns
    -------
    Trajectory
        On any failure during the run -- a step that cannot be solved, an
        exception raised by the model's own functions, ``KeyboardInterrupt`` --
        the part computed so far, with ``success=False``, the reason in
        ``message`` and the exception in ``exception``. Steps where the
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
      O(n) path of a large multibody model answered (:mod:`gaussopt.sparse`);
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
        return simulate_contacts(system, t_span, q0, v0, phase=simulate, t_eval=t_eval,
                                 progress=progress, **(contact_options or {}), **kwargs)
    if contact_options is not None:
        raise ModelError("`contact_options` applies to systems with Contact constraints; "
                         f"{system.name!r} has none.")
    n = system.n if isinstance(system, System) else 0
    with _single_thread_blas(n):
        return _simulate(**kwargs)


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


def _validate(system, t_span, q0, v0, method, solver, dt, rtol, atol, t_eval, stabilization,
              dense_output):
    """Check the arguments of :func:`simulate`; return the normalized ones."""
    if not isinstance(system, System):
        raise ModelError(f"`system` must be a gaussopt.System, found {type(system).__name__}.")
    n = system.n
    try:
        t0, t1 = (float(x) for x in t_span)
    except (TypeError, ValueError) as e:
        raise ModelError(f"`t_span` must be a pair (t0, t_end), found {t_span!r}.") from e
    if not (np.isfinite(t0) and np.isfinite(t1) and t1 > t0):
        raise ModelError(f"`t_span` must be finite with t_end > t0, found ({t0}, {t1}).")
    q = as_state(q0, n, "q0")
    v = as_state(v0, n, "v0")
    auto_dt = False
    if method is None:
        ga = (isinstance(solver, str) and solver == "ga") or getattr(solver, "name", None) == "ga"
        method = "rk4" if ga else "DOP853"
        auto_dt = ga and dt is None                 # the step is chosen at t0 (see simulate)
    if method not in _ALL_METHODS:
        raise ModelError(f"`method` must be one of {list(FIXED_STEP_METHODS) + list(IVP_METHODS)}, "
                         f"found {method!r}.")
    if method in FIXED_STEP_METHODS and not auto_dt:
        if dt is None or not (np.isfinite(dt) and dt > 0):
            raise ModelError(f"`dt` must be a positive step for method={method!r}, found {dt!r}.")
    elif dt is not None and not (np.isfinite(dt) and dt > 0):
        raise ModelError(f"`dt` must be positive (used as first step), found {dt!r}.")
    for label, val in (("rtol", rtol), ("atol", atol)):
        if not (np.isfinite(val) and val > 0):
            raise ModelError(f"`{label}` must be positive, found {val!r}.")
    if stabilization is not None and not isinstance(stabilization, (Baumgarte, Projection)):
        raise ModelError("`stabilization` must be None, gaussopt.Baumgarte(...) or "
                         f"gaussopt.Projection(...), found {stabilization!r}.")
    if t_eval is not None:
        t_eval = np.asarray(t_eval, dtype=float).ravel()
        if t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < t0 or t_eval[-1] > t1 \
                or not np.all(np.isfinite(t_eval)):
            raise ModelError(f"`t_eval` must be increasing and within t_span [{t0}, {t1}].")
    if not isinstance(dense_output, (bool, np.bool_)):
        raise ModelError(f"`dense_output` must be True or False, found {dense_output!r}.")
    return t0, t1, q, v, method, t_eval, auto_dt


_TABLEAUS: dict = {}


def _tableau(method: str) -> "E.Tableau":
    """The Butcher tableau of an explicit method, from scipy's own coefficients: read
    once per scipy version from :mod:`scipy.integrate` and kept in gaussopt's cache
    (importing scipy.integrate costs a third of a second per process)."""
    tab = _TABLEAUS.get(method)
    if tab is not None:
        return tab
    import scipy

    from .compiled import cache_dir

    path = cache_dir() / f"tableau-{method}-scipy{scipy.__version__}.npz"
    try:
        with np.load(path) as z:
            tab = E.Tableau(*(np.ascontiguousarray(z[k]) for k in E.Tableau._fields))
    except (OSError, KeyError, ValueError):
        tab = _scipy_tableau(method)
        try:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
            np.savez(tmp, **tab._asdict())
            os.replace(tmp, path)
        except OSError:
            pass
    _TABLEAUS[method] = tab
    return tab


def _scipy_tableau(method: str) -> "E.Tableau":
    """:func:`_tableau` from scipy's coefficients."""
    z1, z2 = np.zeros(1), np.zeros((1, 1))
    if method in ("RK23", "RK45"):
        c = IVP_METHODS[method]
        A = np.zeros((c.n_stages, c.n_stages))
        A[:, :c.A.shape[1]] = c.A
        return E.Tableau(A, c.B.astype(float), c.C.astype(float), c.E.astype(float), z1, z1,
                         c.P.astype(float), z2, z1, z2)
    if method == "DOP853":
        from scipy.integrate._ivp import dop853_coefficients as d

        ns = d.N_STAGES
        return E.Tableau(d.A[:ns, :ns].copy(), d.B.copy(), d.C[:ns].copy(), z1, d.E3.copy(),
                         d.E5.copy(), z2, d.A[ns + 1:].copy(), d.C[ns + 1:].copy(), d.D.copy())
    return E.Tableau(z2, z1, z1, z1, z1, z1, z2, z2, z1, z2)


class _Run:
    """One run of the compiled engine: its data, its state, and what becomes the Trajectory."""

    def __init__(self, system, step_solver, mf, method, stabilization, opts, t0, t1, y0,
                 t_eval, monitor_rank, dense=False):
        n, m = system.n, mf.m
        self.system, self.solver, self.mf, self.method = system, step_solver, mf, method
        self._args = None
        self.n, self.m = n, m
        self.buf = E.buffers(mf)
        self.md = E.model_data(mf, system)
        oi = np.zeros(10, dtype=np.int64)
        of = np.zeros(11)
        engine_method = method if method in ENGINE_METHODS else "rk4"   # Hermite output
        self.engine_method = engine_method
        # every step's interpolant, from the step as integrated (before its end is projected)
        oi[E.I_DENSE] = int(bool(dense))
        oi[E.I_METHOD] = E.METHOD_CODES[engine_method]
        python_solver = step_solver._method is None or step_solver.objective == "paper"
        oi[E.I_SOLVER] = 2 if python_solver else step_solver._method
        if isinstance(stabilization, Projection):
            oi[E.I_STAB] = E.STAB_PROJECTION
            oi[E.I_PVEL] = int(stabilization.velocity)
            oi[E.I_PRHS] = int(stabilization.rhs)
            oi[E.I_PITER] = int(stabilization.max_iter)
            of[E.F_PTOL] = stabilization.tol
        elif isinstance(stabilization, Baumgarte):
            oi[E.I_STAB] = E.STAB_BAUMGARTE
            of[E.F_ALPHA], of[E.F_BETA] = stabilization.alpha, stabilization.beta
            of[E.F_GAMMA] = stabilization.alpha if stabilization.gamma is None else stabilization.gamma
        oi[E.I_MONITOR] = int(bool(monitor_rank) and m > 0)
        oi[E.I_MAXSTEPS] = opts["max_steps"]
        oi[E.I_CHECKSYM] = int(system.constant_mass is None)
        of[E.F_RANKTOL] = step_solver.rank_tol
        of[E.F_RTOL], of[E.F_ATOL] = opts["rtol"], opts["atol"]
        of[E.F_DT] = opts["dt"] or 0.0
        of[E.F_FIRST] = opts["dt"] or 0.0
        of[E.F_T1] = t1
        of[E.F_MAXSTEP] = np.inf
        self.opt = E.Options(oi, of)
        self.tab = _tableau(engine_method)
        N = 2 * n
        stages = {"RK23": 4, "RK45": 7, "DOP853": 16}.get(engine_method, 1)
        dense_rows = {"RK23": 3, "RK45": 4, "DOP853": 7}.get(engine_method, 1)
        cap_out = t_eval.size if t_eval is not None else 1024
        sc = np.zeros(E.N_SC)
        sc[E.S_T] = sc[E.S_T0] = t0
        sc[E.S_NEAR] = 0.0          # project the stages until the first accepted state says
        sc[E.S_NEAR_T] = np.nan     # no accepted state yet (see E.passage_ahead)
        sc[E.S_NEAR_TPREV] = np.nan
        ic = np.zeros(E.N_IC, dtype=np.int64)
        ref = step_solver.row_ref if step_solver.row_ref is not None else np.zeros(m)
        self.st = E.State(
            sc, ic, y0.copy(), np.zeros(N), np.zeros(N), np.zeros(N), np.zeros((stages, N)),
            ref, step_solver._sref, np.zeros(m), np.zeros(n), np.zeros((64, 2)),
            np.zeros((64, 4), dtype=np.int64), np.zeros((64, m), dtype=np.bool_),
            np.zeros((256, 2)), np.zeros((256, N)),
            t_eval if t_eval is not None else np.zeros(0), np.zeros(cap_out),
            np.zeros((cap_out, N)), np.zeros((dense_rows, N)), np.zeros(N),
            K.make_work(n, m), K.make_work(n, m), np.zeros((E.N_SCR, N)))
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
        """The interpolant of the last accepted step of the engine (:mod:`gaussopt.dense`)."""
        st = self.st
        t_old, h = float(st.sc[E.S_TOLD]), float(st.sc[E.S_HPREV])
        code = E.METHOD_CODES[self.engine_method]
        if code == E.METHOD_CODES["DOP853"]:
            return Dop853Step(t_old, h, st.y_old.copy(), st.dense.copy())
        if code in (E.METHOD_CODES["RK23"], E.METHOD_CODES["RK45"]):
            return RungeKuttaStep(t_old, h, st.y_old.copy(), st.dense.copy())
        return HermiteStep(t_old, h, st.y_old.copy(), st.f_old.copy(), st.y.copy(), st.f.copy())

    def vanished(self) -> float:
        """The projection's floor for vanished directions (:func:`gaussopt.engine.vanished_floor`)."""
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
        """The lazy units of the O(n) path, when the model takes it (:func:`_run_units`)."""
        if self.md.band.mode == SP.MODE_NONE:
            return []
        units = [SP.sparse_step, SP.smallest_pair, SP.sigma_estimate, SP.bilinear, E.band_force,
                 E.call_sp_dyn, E.call_sp_rows, E.monitor._row_norms_band]
        return units + ([SP.correction] if self.md.band.mode == SP.MODE_PROJECT else [])

    def args(self):
        """The arguments of the engine's entry points: the function addresses and the
        records packed (:func:`gaussopt.engine.pack`; the same arrays as ``md``, ``buf``,
        ``opt``, ``tab`` and ``st``)."""
        if self._args is None:
            self._args = (self.mf.addrs, E.pack(self.md), E.pack(self.buf), E.pack(self.opt),
                          E.pack(self.tab), E.pack(self.st))
        return self._args

    def grow(self):
        """Double the buffers that filled up (outputs, events)."""
        st = self.st
        fields = st._asdict()
        if st.t_eval.shape[0] == 0 and st.ic[E.C_NOUT] >= st.out_t.shape[0]:
            k = st.out_t.shape[0]
            fields["out_t"] = np.concatenate([st.out_t, np.zeros(k)])
            fields["out_y"] = np.concatenate([st.out_y, np.zeros_like(st.out_y)])
        if st.ic[E.C_NEV] + 4 >= st.ev_f.shape[0]:
            fields["ev_f"] = np.concatenate([st.ev_f, np.zeros_like(st.ev_f)])
            fields["ev_i"] = np.concatenate([st.ev_i, np.zeros_like(st.ev_i)])
            fields["ev_rows"] = np.concatenate([st.ev_rows, np.zeros_like(st.ev_rows)])
        self.st = E.State(**fields)
        self._args = None


def _simulate(system, t_span, q0, v0, *, solver, method, dt, rtol, atol, t_eval, stabilization,
              solver_options, project_initial, consistency_tol, monitor_rank, max_steps,
              progress, events, dense_output) -> Trajectory:
    """:func:`simulate` without the BLAS thread limit (arguments as documented there)."""
    t0, t1, q, v, method, t_eval, auto_dt = _validate(system, t_span, q0, v0, method, solver, dt,
                                                      rtol, atol, t_eval, stabilization,
                                                      dense_output)
    n = system.n
    system.check(t0, q, v)
    step_solver = make_solver(system, solver, **(solver_options or {}))
    # what the run calls is compiled (or loaded from the cache) first, in one batch (two
    # processes share the compilation: gaussopt.compiled.ensure), before the clock starts:
    # the run's wall time never includes compilation or cache loading
    spent0 = C.spent()
    C.ensure(*_run_units(step_solver, method, stabilization, auto_dt,
                         bool(dense_output) or events is not None, t_eval is not None,
                         monitor_rank and bool(system.m)))
    rank_tol = step_solver.rank_tol
    step_solver.b_correction = (stabilization.correction(system)
                                if isinstance(stabilization, Baumgarte) else None)
    projector = stabilization if isinstance(stabilization, Projection) else None
    if not (system.holonomic or system.nonholonomic):
        projector = None                          # nothing to project onto
        if isinstance(stabilization, Projection):
            stabilization = None

    problems = _check_consistent(system, t0, q, v, consistency_tol)
    if problems:
        if not project_initial:
            raise ModelError("The initial state is inconsistent with the constraints: "
                             + "; ".join(problems) + ". Pass project_initial=True to project it "
                             "onto the constraints, or correct q0/v0.")
        q, v, _ = (projector or Projection()).project(system, t0, q, v, rank_tol)
        left = _check_consistent(system, t0, q, v, consistency_tol)
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
    mf = model_functions(system, step_solver.acceleration if python_solver else None)
    record = bool(dense_output) or tracker is not None
    run = _Run(system, step_solver, mf, method, stabilization,
               {"max_steps": max_steps, "rtol": rtol, "atol": atol, "dt": dt}, t0, t1,
               np.concatenate([q, v]), t_eval, monitor_rank, dense=record)
    sol = (DenseSolution(n, t0, np.concatenate([q, v]), run.projector(), keep=bool(dense_output))
           if record else None)
    on_step = _StepHook(run, sol, tracker, progress) if (record or progress is not None) else None
    status, message, exception = 0, "The integration reached the end of t_span.", None
    C.ensure(*run.band_units())
    run.args()
    compiling0 = C.spent()
    compile_time = compiling0 - spent0
    wall0 = time.perf_counter()
    code = E.FINISHED
    chunk = 16
    try:
        with quiet_compile():
            code = E.start(*run.args())
            if code == 0 and auto_dt:
                args = run.args()
                code, h = E.initial_step_at(*args[:4], args[5], 4)
                run.opt.f[E.F_DT] = dt = float(h)
            if code == 0:
                if method in ENGINE_METHODS:
                    code = _advance(run, on_step, chunk)
                else:
                    code = _advance_scipy(run, method, rtol, atol, dt, t1, on_step)
    except KeyboardInterrupt as e:
        status, message, exception = -1, f"Interrupted (KeyboardInterrupt) at t={run.st.sc[E.S_T]}.", e
        code = None
    if code == _HOOK_FAILED:
        status, exception = -1, on_step.error
        message = (f"The event function {tracker.label(on_step.event)} raised "
                   f"{type(exception).__name__} at t≈{on_step.t}: {exception}{_origin(exception)}"
                   if on_step.event is not None else
                   f"Following the step to t={on_step.t} failed: {type(exception).__name__}: "
                   f"{exception}{_origin(exception)}")
    elif code == _TERMINATED:
        i = tracker.terminated_by
        status = 1
        message = (f"A termination event occurred: {tracker.label(i)} at t={tracker.t_terminal} "
                   f"(occurrence {len(tracker.t_events[i])}).")
    elif code is not None and code != E.FINISHED:
        status = -1
        message, exception = _failure(run, code, method)
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
        traj = _postprocess(system, step_solver, run, ts, ys)
    traj.rank_events = _events(run)
    traj.least_squares_steps = _least_squares_records(run)
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


def _run_units(solver: StepSolver, method: str, stabilization, auto_dt: bool,
               dense: bool, samples: bool, monitor: bool) -> list:
    """The compiled functions (:mod:`gaussopt.compiled`) a run calls: the engine's entry
    points for its method and options, the lazy paths its options take (the step's
    interpolant for dense output, events and output samples; the search of singular
    positions of the rank monitor; Baumgarte's correction) and the step solver's own
    (:meth:`StepSolver.compiled_units`). (A lazy path it did not foresee is compiled
    when the run first takes it; that time is not the run's either.)"""
    from .model import NOOP

    # (and what builds the run's records from Python, and the model's compiled functions)
    units = [E.start, E.records._pack_model_data, E.records._pack_buffers,
             E.records._pack_options, E.records._pack_tableau, E.records._pack_state,
             SP._band, SP._band_mode, K._make_work, K.smallest_live_sigma, NOOP,
             *getattr(solver.system.compiled, "functions", ())]
    if dense or samples:
        units.append(E.prepare_dense)
    if monitor:
        units.append(E.monitor._passage)
    units += [E.advance] if method in ENGINE_METHODS else [E.rhs_at, E.after_step]
    if auto_dt:
        units.append(E.initial_step_at)
    if solver._method is not None and solver.objective != "paper":
        units.append(E.sample_all)            # (a solver in Python samples in Python)
    if isinstance(stabilization, Projection) and dense:
        units.append(E.project_at)            # (the dense solution's projection)
    if isinstance(stabilization, Baumgarte):
        units.append(E.baumgarte)
    return units + list(solver.compiled_units())


#: statuses of the Python side of a run (beyond the engine's)
_TERMINATED = 100          # a terminal event stopped the run
_HOOK_FAILED = 101         # an event function (or the dense output behind it) raised


class _StepHook:
    """What follows every accepted step in Python: the step's interpolant and projected end
    go to the dense solution, the events are located on it, ``progress(t)`` is called.

    Returns True to stop the run (a terminal event, or an exception kept in ``error``)."""

    def __init__(self, run: _Run, sol: Optional[DenseSolution],
                 tracker: Optional[EventTracker], progress):
        self.run, self.sol, self.tracker, self.progress = run, sol, tracker, progress
        self.error: Optional[BaseException] = None
        self.event: Optional[int] = None
        self.t = float(run.st.sc[E.S_T])

    def __call__(self, dense=None) -> bool:
        st = self.run.st
        t_new = float(st.sc[E.S_T])
        self.t = t_new
        if self.sol is not None:
            try:
                t_old = self.sol.t_max
                interp = ScipyStep(dense) if dense is not None else self.run.interpolant()
                self.sol.append(t_new, st.y.copy(), interp, self.run.vanished())
                if self.tracker is not None and self.tracker.after_step(
                        t_old, t_new, self.sol._y[-1], self.sol.in_last_step):
                    return True
            except Exception as e:  # noqa: BLE001 - the run stops and reports it
                self.error = e
                self.event = self.tracker.failed if self.tracker is not None else None
                return True
        if self.progress is not None:
            self.progress(t_new)
        return False

    def stop_code(self) -> int:
        return _HOOK_FAILED if self.error is not None else _TERMINATED


def _advance(run: _Run, on_step, chunk: int) -> int:
    """Advance the engine in chunks of about 20 ms (a KeyboardInterrupt is raised
    between chunks), or one step at a time when ``on_step`` is to be called after
    every accepted step (it returns True to stop the run); grow full buffers."""
    while True:
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
            run.grow()
            continue
        if code != E.CHUNK_DONE:
            return code


def _advance_scipy(run: _Run, method, rtol, atol, dt, t1, on_step) -> int:
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

    kw: dict[str, Any] = {"rtol": rtol, "atol": atol}
    if dt:
        kw["first_step"] = dt
    cls = IVP_METHODS[method]
    ode = cls(fun, float(st.sc[E.S_T]), st.y.copy(), t1, **kw)
    try:
        while ode.status == "running":
            if st.ic[E.C_STEPS] >= opt.i[E.I_MAXSTEPS]:
                return E.MAX_STEPS
            if (st.t_eval.shape[0] == 0 and st.ic[E.C_NOUT] >= st.out_t.shape[0]) \
                    or st.ic[E.C_NEV] + 4 >= st.ev_f.shape[0]:
                run.grow()
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


def _failure(run: _Run, code: int, method: str) -> tuple[str, Optional[BaseException]]:
    """The message and exception of a run that stopped with engine status ``code``."""
    st, mf, n = run.st, run.mf, run.n
    t = float(st.sc[E.S_T])
    if code == E.MAX_STEPS:
        return f"Stopped after max_steps={int(run.opt.i[E.I_MAXSTEPS])} steps.", None
    if code == E.STEP_TOO_SMALL:
        return getattr(run, "fail_message", f"{method} failed at t={t}: Required step size is "
                       "less than spacing between numbers."), None
    tf = float(st.sc[E.S_FAIL_T])
    if code == E.MODEL_FAILED and mf.error is not None:
        e = mf.error
        if isinstance(e, KeyboardInterrupt):
            return f"Interrupted (KeyboardInterrupt) at t={t}.", e
        if isinstance(e, GaussoptError):
            return f"The step solver failed at t≈{tf}: {type(e).__name__}: {e}", e
        return f"The model's code raised {type(e).__name__} at t≈{tf}: {e}{_origin(e)}", e
    # a kernel status (or a projection that met an undefined constraint): reproduce the
    # exception at the failing state with the Python step solver
    qf, vf = st.fail_y[:n].copy(), st.fail_y[n:].copy()
    try:
        if code == K.NONFINITE:
            for c in run.system.holonomic:
                phi = c.residual(tf, qf)
                if not np.all(np.isfinite(phi)):
                    raise ModelError(f"the position constraint {c.name!r} returned NaN or inf at "
                                     f"t={tf} (q = {qf}): the constraint is undefined there.")
        run.solver.solve(tf, qf, vf)
    except Exception as e:  # noqa: BLE001 - this is the failure being reported
        if isinstance(e, GaussoptError):
            return f"The step solver failed at t≈{tf}: {type(e).__name__}: {e}", e
        return f"The model's code raised {type(e).__name__} at t≈{tf}: {e}{_origin(e)}", e
    e = SolverError(f"the step failed at t≈{tf} with status {K.STATUS.get(code, code)!r}.")
    return f"The step solver failed at t≈{tf}: SolverError: {e}", e


def _events(run: _Run) -> list[RankEvent]:
    st = run.st
    labels = run.system.row_labels() if run.m else []
    kinds = {E.EV_PASSAGE: "passage", E.EV_DROP: "drop", E.EV_RISE: "rise"}
    nev = int(st.ic[E.C_NEV])
    # as Python lists at once (a run through a crank's revolutions has hundreds)
    ev_f, ev_i, ev_rows = st.ev_f[:nev].tolist(), st.ev_i[:nev].tolist(), st.ev_rows[:nev].tolist()
    return [RankEvent(t=f[0], kind=kinds[i[0]], rank_before=i[1], rank_min=i[2], rank_after=i[3],
                      rows=[labels[j] for j, on in enumerate(r) if on], sigma_min=f[1])
            for f, i, r in zip(ev_f, ev_i, ev_rows)]


def _least_squares_records(run: _Run) -> list[dict]:
    """Least-squares steps: the engine's (one per accepted step: its largest
    inconsistency) and those of a step solver that runs in Python."""
    st, solver, system = run.st, run.solver, run.system
    labels = system.row_labels() if system.m else []
    recs = []
    for i in range(min(int(st.ic[E.C_NLSQ]), st.lsq_f.shape[0])):
        t, size = float(st.lsq_f[i, 0]), float(st.lsq_f[i, 1])
        y = st.lsq_y[i]
        rows = solver.inconsistent_rows(t, y[:run.n], y[run.n:])
        recs.append({"t": t, "size": size, "rows": [labels[j] for j in rows]})
    seen = {r["t"] for r in recs}
    for t, size, rows in solver.least_squares_steps:
        if t not in seen:
            recs.append({"t": t, "size": size, "rows": [labels[j] for j in rows]})
            seen.add(t)
    solver.least_squares_steps.clear()
    return sorted(recs, key=lambda r: r["t"])


def _origin(e: BaseException) -> str:
    """`` (raised in file:line, function)`` for an exception from outside gaussopt."""
    if isinstance(e, GaussoptError):
        return ""
    tb = e.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    code = last.tb_frame.f_code
    if os.path.dirname(os.path.abspath(code.co_filename)).startswith(
            os.path.dirname(os.path.abspath(__file__))):
        return ""
    return f" (raised in {code.co_filename}:{last.tb_lineno}, in {code.co_name})"


def _sample_engine(system: System, solver: StepSolver, run: "_Run", t: np.ndarray,
                   y: np.ndarray) -> tuple:
    """The engine's samples (:func:`gaussopt.engine.sample_all`) at every output time:
    ``(a, Qc, lam, Fo, rank, err, exc)`` (``Fo`` the columns position, velocity and
    acceleration residual, energy, rank, sigma_min; ``err`` the first failure's message,
    ``exc`` its exception). Never raises: a failing sample stays NaN."""
    n = system.n
    N = t.size
    m = system.m or 0
    a = np.full((N, n), np.nan)
    Qc = np.full((N, n), np.nan)
    lam = np.full((N, m), np.nan)
    Fo = np.full((N, 6), np.nan)
    err, exc = None, None
    mf = run.mf
    status = np.zeros(N, dtype=np.int64)
    mf.error = None
    try:
        addrs, md, buf, opt, _, _ = run.args()      # (packed)
        E.sample_all(addrs, md, buf, opt, run.st.ref, run.st.sref,
                     t, np.ascontiguousarray(y), a, Qc, lam, Fo, status)
    except KeyboardInterrupt as e:
        err, exc = "Interrupted (KeyboardInterrupt) while recomputing the output samples.", e
    if mf.error is not None and err is None:
        e = mf.error
        i = int(np.flatnonzero(np.isnan(Fo[:, 3]) | (status != 0))[0]) \
            if np.any(np.isnan(Fo[:, 3]) | (status != 0)) else 0
        what = "Evaluating the energy" if isinstance(e, Exception) and \
            system.has_energy and np.isnan(Fo[i, 3]) and status[i] == 0 else "Recomputing the step"
        if isinstance(e, KeyboardInterrupt):
            err = "Interrupted (KeyboardInterrupt) while recomputing the output samples."
        else:
            err = f"{what} at output t={t[i]} failed: {type(e).__name__}: {e}"
        exc = e
    bad = np.flatnonzero(status != 0)
    if bad.size and err is None:
        i = int(bad[0])
        try:
            solver.solve(float(t[i]), y[i, :n].copy(), y[i, n:].copy())
            raise SolverError(f"status {K.STATUS.get(int(status[i]), int(status[i]))!r}")
        except Exception as e:  # noqa: BLE001 - recorded, the run's data are kept
            err = f"Recomputing the step at output t={t[i]} failed: {type(e).__name__}: {e}"
            exc = e
    rank = np.where(status == 0, np.nan_to_num(Fo[:, 4], nan=-1.0), -1).astype(int)
    return a, Qc, lam, Fo, rank, err, exc


def _postprocess(system: System, solver: StepSolver, run: "_Run", t: np.ndarray,
                 y: np.ndarray) -> Trajectory:
    """Accelerations, constraint forces, multipliers and residuals at the output times.

    The compiled step solvers are evaluated by the engine at every sample; a step solver
    that runs in Python (QP, GA) by its ``solve``. Never raises: a failure
    of the model's code or of a step at a sample is recorded (the first in
    ``meta["postprocess_error"]``), that quantity stays NaN there and everything else
    is still computed; a KeyboardInterrupt stops the recomputation and keeps what was
    done.
    """
    n = system.n
    N = t.size
    m = system.m or 0
    q, v = y[:, :n].copy(), y[:, n:].copy()
    stats: dict[str, Any] = {}
    err, exc = None, None
    mf = run.mf
    a = np.full((N, n), np.nan)
    Qc = np.full((N, n), np.nan)
    lam = np.full((N, m), np.nan)
    Fo = np.full((N, 6), np.nan)
    rank = np.full(N, -1, dtype=int)
    if int(run.opt.i[E.I_SOLVER]) != 2:
        a, Qc, lam, Fo, rank, err, exc = _sample_engine(system, solver, run, t, y)
    else:
        keys = ("gap", "error_bound", "error", "generations", "status")
        sample_info: dict[str, list] = {}

        def failed(what, ti, e):
            nonlocal err, exc
            if err is None:
                err = f"{what} at output t={ti} failed: {type(e).__name__}: {e}"
                exc = e

        try:
            for i in range(N):
                ti, qi, vi = float(t[i]), q[i], v[i]
                try:
                    Fo[i, 0] = float(np.linalg.norm(system.position_residual(ti, qi)))
                    Fo[i, 1] = float(np.linalg.norm(system.velocity_residual(ti, qi, vi)))
                except Exception as e:  # noqa: BLE001
                    failed("Evaluating the constraint residuals", ti, e)
                if system.has_energy:
                    try:
                        Fo[i, 3] = system.energy(ti, qi, vi)
                    except Exception as e:  # noqa: BLE001
                        failed("Evaluating the energy", ti, e)
                try:
                    r = solver.solve(ti, qi, vi)
                    A, b = system.rows(ti, qi, vi)
                except Exception as e:  # noqa: BLE001
                    failed("Recomputing the step", ti, e)
                    continue
                a[i], Qc[i] = r.a, r.constraint_force
                if r.multipliers.size == m:
                    lam[i] = r.multipliers
                Fo[i, 2] = float(np.linalg.norm(A @ r.a - b)) if m else 0.0
                rank[i] = int(r.info.get("rank", -1))
                Fo[i, 5] = float(r.info.get("sigma_min", np.nan))
                for k in keys:
                    if k in r.info:
                        sample_info.setdefault(k, []).append(r.info[k])
        except KeyboardInterrupt as e:
            err = err or "Interrupted (KeyboardInterrupt) while recomputing the output samples."
            exc = exc or e
        for k, vals in sample_info.items():
            if k == "status":
                stats["sample_status"] = {s_: vals.count(s_) for s_ in set(vals)}
            else:
                stats[f"sample_{k}_max"] = float(np.max(np.asarray(vals, dtype=float)))
    energy = Fo[:, 3].copy() if system.has_energy else None
    meta = {"postprocess_error": err, "postprocess_exception": exc} if err else {}
    return Trajectory(t=t, q=q, v=v, a=a, constraint_force=Qc, multipliers=lam,
                      position_residual=Fo[:, 0].copy(), velocity_residual=Fo[:, 1].copy(),
                      acceleration_residual=Fo[:, 2].copy(), energy=energy, rank=rank,
                      sigma_min=Fo[:, 5].copy(), coordinates=system.coordinates, stats=stats,
                      meta=meta)


def _check_consistent(system: System, t: float, q: np.ndarray, v: np.ndarray, tol: float) -> list[str]:
    """Row-normalized position/velocity residuals above ``tol`` (a distance); NaN is a problem."""
    out = []
    if system.holonomic:
        phi = system.position_residual(t, q)
        J = system.position_jacobian(t, q)
        nr = np.sqrt((J * J).sum(axis=1))
        d = np.abs(phi) / np.where(nr > 0, nr, 1.0)
        if not np.all(np.isfinite(d)):
            out.append(f"the position constraints are not finite at the initial state (phi = {phi})")
        elif d.max() > tol * (1 + np.abs(q).max()):
            out.append(f"position constraints violated: |Phi_i|/|grad Phi_i| up to {d.max():.3g}")
    if system.holonomic or system.nonholonomic:
        r = system.velocity_residual(t, q, v)
        J = system.velocity_rows(t, q, v)
        nr = np.sqrt((J * J).sum(axis=1))
        d = np.abs(r) / np.where(nr > 0, nr, 1.0)
        if not np.all(np.isfinite(d)):
            out.append(f"the velocity constraints are not finite at the initial state (residual {r})")
        elif d.max(initial=0.0) > tol * (1 + np.abs(v).max()):
            out.append(f"velocity constraints violated: normalized residual up to {d.max():.3g}")
    return out
