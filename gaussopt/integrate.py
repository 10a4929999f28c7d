"""Time integration: :func:`simulate`.

The state ``y = (q, v)`` obeys ``q' = v``, ``v' = a(t, q, v)`` where ``a`` is
the solution of one Gauss step. Every method -- the fixed-step ``"rk4"`` and
``"euler"`` as well as the :func:`scipy.integrate.solve_ivp` methods -- is an
:class:`scipy.integrate.OdeSolver` driven one accepted step at a time by one
driver (:func:`drive_ivp`), so that the stabilizing projection, the rank
monitor (:mod:`gaussopt.monitor`), the output and the bookkeeping are written
once, and a run that fails or is interrupted still returns what it computed.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
from scipy import integrate as sci
from scipy.integrate import DenseOutput, OdeSolver

from . import kernel as K
from .exceptions import GaussoptError, ModelError
from .monitor import RankMonitor
from .result import Trajectory
from .solvers import StepSolver
from .stabilization import Baumgarte, Projection
from .step import as_state, make_solver
from .system import System

__all__ = ["simulate", "Baumgarte", "Projection", "FIXED_STEP_METHODS", "IVP_METHODS",
           "drive_ivp", "DEFAULT_STABILIZATION"]

_EPS = float(np.finfo(float).eps)
IVP_METHODS = {"RK23": sci.RK23, "RK45": sci.RK45, "DOP853": sci.DOP853,
               "Radau": sci.Radau, "BDF": sci.BDF, "LSODA": sci.LSODA}
_RK_METHODS = ("RK23", "RK45", "DOP853", "rk4", "euler")

#: the stabilization :func:`simulate` uses unless told otherwise: projecting the
#: state onto the constraints keeps singular positions on the physical branch
#: and lets redundant linkages pass their folded configurations
DEFAULT_STABILIZATION = Projection()


# --------------------------------------------------------------------------- fixed-step methods
class _HermiteOutput(DenseOutput):
    """Cubic Hermite interpolant of ``y`` from ``y`` and ``y'`` at both ends."""

    def __init__(self, t0, t1, y0, f0, y1, f1):
        super().__init__(t0, t1)
        self.h = t1 - t0
        self.y0, self.f0, self.y1, self.f1 = y0, f0, y1, f1

    def _call_impl(self, t):
        s = (np.asarray(t) - self.t_old) / self.h
        h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
        h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
        h = self.h
        if np.ndim(s) == 0:
            return h00 * self.y0 + h10 * h * self.f0 + h01 * self.y1 + h11 * h * self.f1
        return (np.outer(self.y0, h00) + np.outer(self.f0, h10 * h) + np.outer(self.y1, h01)
                + np.outer(self.f1, h11 * h))


class _FixedStep(OdeSolver):
    """Classical Runge--Kutta of order 4 (``"rk4"``) or explicit Euler (``"euler"``)
    with the step ``dt``, as an :class:`~scipy.integrate.OdeSolver` (so that one
    driver serves every method). Step ``k`` ends exactly at ``t0 + k dt`` (no
    accumulated rounding); the last one is shortened to end at ``t_bound``.
    Dense output: the cubic Hermite interpolant of the step."""

    def __init__(self, fun, t0, y0, t_bound, dt, method="rk4", vectorized=False, **_):
        super().__init__(fun, t0, y0, t_bound, vectorized)
        self.dt = float(dt)
        self.method = method
        self.t0_ = float(t0)
        self.k = 0
        self.f = self.fun(self.t, self.y)
        self._prev = None

    def _step_impl(self):
        t, y, f, h0 = self.t, self.y, self.f, self.dt
        t_new = self.t0_ + (self.k + 1) * h0
        if t_new >= self.t_bound - 1e-9 * h0:
            t_new = self.t_bound
        h = t_new - t
        if self.method == "euler":
            y_new = y + h * f
        else:
            k2 = self.fun(t + h / 2, y + h / 2 * f)
            k3 = self.fun(t + h / 2, y + h / 2 * k2)
            k4 = self.fun(t + h, y + h * k3)
            y_new = y + h / 6 * (f + 2 * k2 + 2 * k3 + k4)
        f_new = self.fun(t_new, y_new)
        self._prev = (t, y, f)
        self.t, self.y, self.f = t_new, y_new, f_new
        self.k += 1
        return True, None

    def _dense_output_impl(self):
        t0, y0, f0 = self._prev
        return _HermiteOutput(t0, self.t, y0, f0, self.y, self.f)


class _RK4(_FixedStep):
    def __init__(self, fun, t0, y0, t_bound, dt, **kw):
        super().__init__(fun, t0, y0, t_bound, dt, method="rk4", **kw)


class _Euler(_FixedStep):
    def __init__(self, fun, t0, y0, t_bound, dt, **kw):
        super().__init__(fun, t0, y0, t_bound, dt, method="euler", **kw)


FIXED_STEP_METHODS = {"rk4": _RK4, "euler": _Euler}
_ALL_METHODS = {**FIXED_STEP_METHODS, **IVP_METHODS}


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
        0 at the end of the span, 1 on ``max_steps`` or a failed step.
    message : str
    """
    cls = _ALL_METHODS[method]

    def start(tt, yy, h=None):
        kw = dict(options)
        if h:
            kw["first_step"] = min(h, t1 - tt) if t1 > tt else h
        return cls(rhs, tt, yy, t1, **kw)

    ode = start(t0, y0)
    while ode.status == "running":
        if counter["steps"] >= max_steps:
            return 1, f"Stopped after max_steps={max_steps} steps."
        t_prev = ode.t
        msg = ode.step()
        if ode.status == "failed":
            return 1, f"{method} failed at t={ode.t}: {msg}"
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
             max_steps: int = 10_000_000, progress: Optional[Callable[[float], Any]] = None
             ) -> Trajectory:
    """Simulate a constrained system from ``(q0, v0)`` over ``t_span``.

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
        ``"LSODA"``). Default ``"DOP853"``, or ``"rk4"`` for ``solver="ga"``.
    dt : float, optional
        Step of the fixed-step methods (required for them); first step of the others.
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

    Returns
    -------
    Trajectory
        On any failure during the run -- a step that cannot be solved, an
        exception raised by the model's own functions, ``KeyboardInterrupt`` --
        the part computed so far, with ``success=False``, the reason in
        ``message`` and the exception in ``exception``. Steps where the
        constraints were inconsistent to the size rounding explains near a
        singular configuration (the least-squares step was taken) are listed in
        ``least_squares_steps``.

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
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a declared dependency
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _validate(system, t_span, q0, v0, method, solver, dt, rtol, atol, t_eval, stabilization):
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
    if method is None:
        method = "rk4" if solver == "ga" or getattr(solver, "name", None) == "ga" else "DOP853"
    if method not in _ALL_METHODS:
        raise ModelError(f"`method` must be one of {list(FIXED_STEP_METHODS) + list(IVP_METHODS)}, "
                         f"found {method!r}.")
    if method in FIXED_STEP_METHODS:
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
    return t0, t1, q, v, method, t_eval


class _Output:
    """The output samples: every accepted step, or the times ``t_eval``."""

    def __init__(self, t_eval, t0, y0, project):
        self.t_eval = t_eval
        self.project = project
        self.i = 0
        self.ts: list[float] = []
        self.ys: list[np.ndarray] = []
        if t_eval is None or t_eval[0] == t0:
            self.ts, self.ys = [t0], [y0.copy()]
            self.i = 1 if t_eval is not None else 0

    def emit(self, t_b, interp, y_end):
        """Record the outputs in the step ``(t_a, t_b]``."""
        if self.t_eval is None:
            self.ts.append(t_b)
            self.ys.append(y_end.copy())
            return
        te = self.t_eval
        while self.i < te.size and te[self.i] <= t_b:
            t = te[self.i]
            self.ts.append(float(t))
            self.ys.append(y_end.copy() if t == t_b else self.project(t, interp(t)))
            self.i += 1


def _simulate(system, t_span, q0, v0, *, solver, method, dt, rtol, atol, t_eval, stabilization,
              solver_options, project_initial, consistency_tol, monitor_rank, max_steps,
              progress) -> Trajectory:
    """:func:`simulate` without the BLAS thread limit (arguments as documented there)."""
    t0, t1, q, v, method, t_eval = _validate(system, t_span, q0, v0, method, solver, dt, rtol,
                                             atol, t_eval, stabilization)
    n = system.n
    system.check(t0, q, v)
    step_solver = make_solver(system, solver, **(solver_options or {}))
    rank_tol = step_solver.rank_tol
    step_solver.b_correction = (stabilization.correction(system)
                                if isinstance(stabilization, Baumgarte) else None)
    projector = stabilization if isinstance(stabilization, Projection) else None
    if not (system.holonomic or system.nonholonomic):
        projector = None                          # nothing to project onto

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

    m = system.m or 0
    if m:
        step_solver.reset_reference()
        step_solver.accept(system.rows(t0, q, v)[0])
    monitor = (RankMonitor(system, system.row_labels(), rank_tol, lambda: step_solver.row_ref)
               if monitor_rank and m else None)
    nfev = [0]
    accel = step_solver.acceleration
    project_rhs = projector is not None and projector.rhs
    step_solver.least_squares_steps.clear()

    def rhs(t, y):
        nfev[0] += 1
        out = np.empty(2 * n)
        qq, vv = y[:n], y[n:]
        if project_rhs:
            qq, vv, _ = projector.project(system, t, qq, vv, rank_tol, vanished())
        out[:n] = vv
        out[n:] = accel(t, qq, vv)
        return out

    def vanished():
        return K.FOLD_TOL * step_solver.sigma_ref

    def project_pair(t, pair):
        qe, ve = pair
        if projector is not None:
            qe, ve, _ = projector.project(system, t, qe, ve, rank_tol, vanished())
        return np.concatenate([qe, ve])

    y = np.concatenate([q, v])
    out = _Output(t_eval, t0, y, project_pair)
    status, message, exception = 0, "The integration reached the end of t_span.", None
    wall0 = time.perf_counter()
    n_proj = 0
    t = t0
    counter = {"steps": 0}
    kw: dict[str, Any] = ({"dt": dt} if method in FIXED_STEP_METHODS
                          else {"rtol": rtol, "atol": atol, **({"first_step": dt} if dt else {})})

    def after_step(ode, t_prev, dense):
        nonlocal t, n_proj

        def interp(tt, dense=dense):
            yy = dense(tt)
            return yy[:n], yy[n:]

        y_new, changed = ode.y.copy(), False
        if projector is not None:
            qp, vp, its = projector.project(system, ode.t, y_new[:n], y_new[n:], rank_tol,
                                            vanished())
            if its:
                y_new, changed = np.concatenate([qp, vp]), True
                n_proj += 1
        out.emit(ode.t, interp, y_new)
        if m:
            step_solver.accept(system.rows(ode.t, y_new[:n], y_new[n:])[0])
        if monitor is not None:
            monitor.update(t_prev, ode.t, y_new[:n], y_new[n:], interp)
        t = ode.t
        if progress is not None:
            progress(t)
        return y_new, changed

    try:
        if monitor is not None:
            monitor.start(t0, q, v)
        status, message = drive_ivp(method, rhs, t0, y, t1, kw, max_steps, after_step, counter)
    except KeyboardInterrupt as e:
        status, message, exception = 1, f"Interrupted (KeyboardInterrupt) at t={t}.", e
    except Exception as e:  # noqa: BLE001 - any fault of the model's code ends the run, not the data
        status = 1
        if isinstance(e, GaussoptError):
            message = f"The step solver failed at t≈{t}: {type(e).__name__}: {e}"
        else:
            message = (f"The model's code raised {type(e).__name__} at t≈{t}: {e}{_origin(e)}")
        exception = e
    steps = counter["steps"]
    wall = time.perf_counter() - wall0

    run_stats = step_solver.run_stats()
    ts = np.asarray(out.ts)
    traj = _postprocess(system, step_solver, ts, np.asarray(out.ys).reshape(-1, 2 * n))
    traj.rank_events = monitor.finish() if monitor is not None else []
    traj.least_squares_steps = _least_squares_records(step_solver, system)
    traj.status = status
    if status == 0 and traj.meta.get("postprocess_error"):
        traj.status, message = 1, traj.meta["postprocess_error"]
        exception = traj.meta.pop("postprocess_exception", None)
    traj.meta.pop("postprocess_exception", None)
    traj.message = message
    traj.exception = exception
    traj.stats.update({"steps": steps, "rhs_evaluations": nfev[0], "wall_time": wall,
                       "time_per_step": wall / steps if steps else float("nan"),
                       "projections": n_proj, **run_stats})
    traj.meta.update({"solver": step_solver.name, "method": method, "dt": dt, "rtol": rtol,
                      "atol": atol, "stabilization": repr(stabilization),
                      "objective": step_solver.objective, "system": system.name,
                      "t_span": [t0, t1]})
    return traj


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


def _least_squares_records(solver: StepSolver, system: System) -> list[dict]:
    """The least-squares steps the solver took, one record per distinct time."""
    labels = system.row_labels() if system.m else []
    seen: dict[float, dict] = {}
    for t, size, rows in solver.least_squares_steps:
        rec = seen.get(t)
        if rec is None or size > rec["size"]:
            seen[t] = {"t": t, "size": size, "rows": [labels[i] if i < len(labels) else str(i)
                                                      for i in rows]}
    solver.least_squares_steps.clear()
    return [seen[k] for k in sorted(seen)]


def _postprocess(system: System, solver: StepSolver, t: np.ndarray, y: np.ndarray) -> Trajectory:
    """Recompute accelerations, forces, multipliers and residuals at the output times.

    Never raises: a failure of the model's code or of a step at a sample is
    recorded (the first in ``meta["postprocess_error"]``), the quantity that
    failed stays NaN there and everything else is still computed; a
    KeyboardInterrupt stops the recomputation and keeps what was done.
    """
    n = system.n
    N = t.size
    m = system.m or 0
    q, v = y[:, :n].copy(), y[:, n:].copy()
    a = np.full((N, n), np.nan)
    Qc = np.full((N, n), np.nan)
    lam = np.full((N, m), np.nan)
    pres = np.full(N, np.nan)
    vres = np.full(N, np.nan)
    ares = np.full(N, np.nan)
    rank = np.full(N, -1, dtype=int)
    smin = np.full(N, np.nan)
    energy = np.full(N, np.nan) if system.has_energy else None
    keys = ("gap", "error_bound", "error", "generations", "status")
    sample_info: dict[str, list] = {}
    err = None
    exc = None
    def failed(what, ti, e):
        nonlocal err, exc
        if err is None:
            err = f"{what} at output t={ti} failed: {type(e).__name__}: {e}"
            exc = e

    try:
        for i in range(N):
            ti, qi, vi = float(t[i]), q[i], v[i]
            try:
                pres[i] = float(np.linalg.norm(system.position_residual(ti, qi)))
                vres[i] = float(np.linalg.norm(system.velocity_residual(ti, qi, vi)))
            except Exception as e:  # noqa: BLE001 - recorded, the run's data are kept
                failed("Evaluating the constraint residuals", ti, e)
            if energy is not None:
                try:
                    energy[i] = system.energy(ti, qi, vi)
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
            ares[i] = float(np.linalg.norm(A @ r.a - b)) if m else 0.0
            rank[i] = int(r.info.get("rank", -1))
            smin[i] = float(r.info.get("sigma_min", np.nan))
            for k in keys:
                if k in r.info:
                    sample_info.setdefault(k, []).append(r.info[k])
    except KeyboardInterrupt as e:
        err = err or "Interrupted (KeyboardInterrupt) while recomputing the output samples."
        exc = exc or e
    stats: dict[str, Any] = {}
    for k, vals in sample_info.items():
        if k == "status":
            stats["sample_status"] = {s: vals.count(s) for s in set(vals)}
        else:
            arr = np.asarray(vals, dtype=float)
            stats[f"sample_{k}_max"] = float(np.max(arr))
    meta = {"postprocess_error": err, "postprocess_exception": exc} if err else {}
    return Trajectory(t=t, q=q, v=v, a=a, constraint_force=Qc, multipliers=lam,
                      position_residual=pres, velocity_residual=vres,
                      acceleration_residual=ares, energy=energy, rank=rank, sigma_min=smin,
                      coordinates=system.coordinates, stats=stats, meta=meta)


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
