"""Time integration: :func:`simulate`, stabilization objects, rank monitoring.

The state ``y = (q, v)`` obeys ``q' = v``, ``v' = a(t, q, v)`` where ``a`` is
the solution of one Gauss step. Fixed-step methods (``"rk4"``, ``"euler"``)
and every :func:`scipy.integrate.solve_ivp` method are driven step by step
here, so that a stabilizing projection can follow every accepted step, the
constraint rank can be monitored, and a failing or interrupted run still
returns what it computed.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
from scipy import integrate as sci
from scipy.linalg import lapack
from scipy.optimize import minimize_scalar

from .exceptions import GaussoptError, ModelError
from .linalg import DEFAULT_RANK_TOL, mass_scale

_EPS = float(np.finfo(float).eps)
from .result import RankEvent, Trajectory
from .solvers import StepSolver
from .step import as_state, make_solver
from .system import System

__all__ = ["simulate", "Baumgarte", "Projection", "FIXED_STEP_METHODS", "IVP_METHODS"]

FIXED_STEP_METHODS = ("rk4", "euler")
IVP_METHODS = {"RK23": sci.RK23, "RK45": sci.RK45, "DOP853": sci.DOP853,
               "Radau": sci.Radau, "BDF": sci.BDF, "LSODA": sci.LSODA}
_RK_METHODS = ("RK23", "RK45", "DOP853")


# --------------------------------------------------------------------------- stabilization
@dataclass(frozen=True)
class Baumgarte:
    """Baumgarte stabilization (paper 002).

    Holonomic rows become ``Phi'' + alpha Phi' + beta Phi = 0`` and
    nonholonomic rows ``f' + gamma f = 0``: the acceleration rows keep ``A``
    and change ``b`` to ``b - alpha Phi' - beta Phi`` (holonomic) and
    ``b - gamma f`` (nonholonomic).

    Parameters
    ----------
    alpha, beta : float
        Holonomic gains (``alpha = 2 zeta omega``, ``beta = omega^2`` for a
        critically damped choice). Paper 002 uses ``alpha = beta = 10``.
    gamma : float, optional
        Nonholonomic gain; default ``alpha``.
    """

    alpha: float = 10.0
    beta: float = 10.0
    gamma: Optional[float] = None

    def __post_init__(self):
        for k in ("alpha", "beta", "gamma"):
            val = getattr(self, k)
            if val is not None and not (np.isfinite(val) and val >= 0):
                raise ModelError(f"Baumgarte `{k}` must be a finite number >= 0, found {val!r}.")

    def correction(self, system: System) -> Callable:
        """Build the hook ``(t, q, v, A) -> db`` for this system (once)."""
        alpha, beta = float(self.alpha), float(self.beta)
        gam = float(self.alpha if self.gamma is None else self.gamma)
        counts = system._row_counts
        hol, nh = [], []
        start = 0
        for c, k in zip(system.equalities, counts):
            idx = np.arange(start, start + k)
            if c.level == "position":
                hol.append((c, idx))
            elif c.level == "velocity":
                nh.append((c, idx))
            start += k
        m = start

        def db(t, q, v, A):
            out = np.zeros(m)
            for c, idx in hol:
                vel = A[idx] @ v
                if c.rheonomic or c._phi_t is not None:
                    vel = vel + c.phi_t(t, q)
                out[idx] = -alpha * vel - beta * c.residual(t, q)
            for c, idx in nh:
                out[idx] = -gam * c.velocity_residual(t, q, v)
            return out

        return db


@dataclass(frozen=True)
class Projection:
    """Project the state back onto the constraints after every accepted step.

    Positions: Gauss--Newton iterations ``q <- q + dq`` with the minimum-norm
    least-squares correction of ``Phi_q dq = -Phi`` in the metric ``W = M``
    (a column scaling when ``M`` is a positive diagonal, as in body
    coordinates) or ``W = M + w J^T J`` (``J`` the row-normalized
    velocity-level Jacobian, ``w = trace(M)/n``: the mass metric, augmented so
    that it stays positive definite for singular ``M``). Velocities: the same
    correction for ``J v + c = 0`` (iterated for nonlinear nonholonomic
    constraints).

    The corrections are least-squares and never raise on redundant rows: off
    the manifold by ``dist``, rows that are redundant on it have singular
    values ``~dist``, so directions below ``100 dist`` (relative) are dropped
    for the positions; the residual being corrected is in the range of ``J``
    only up to roundoff. The target sits at roundoff (iterations also stop when
    the correction stagnates at a few ulps): near a singular position a
    residual test ``|J v| <= tol`` would admit a velocity error ``tol/sigma``
    along the near-null direction.

    Parameters
    ----------
    tol : float, default 1e-15
        Target of the row-normalized residuals (``|Phi_i| / |grad Phi_i|``, a
        distance in the units of ``q``), relative to ``1 + |q|``.
    max_iter : int, default 10
    velocity : bool, default True
        Also project the velocities.
    rhs : bool, default True
        Also evaluate the right-hand side at the projected state (the
        *projected vector field* ``y' = f(P(y))``), so that the integrator's
        trial stages never see the off-constraint part of the acceleration
        field. Near singular positions that part is unbounded (it grows like
        ``1/sigma_min`` of the constraint rows, e.g. ``1/cos th1`` on paper
        001's four-bar) and without this an adaptive integrator's stages blow
        up there or jump to another branch of the constraint set. Costs one to
        two Gauss--Newton iterations per evaluation; ``rhs=False`` projects
        only after accepted steps.
    """

    tol: float = 1e-15
    max_iter: int = 10
    velocity: bool = True
    rhs: bool = True

    def __post_init__(self):
        if not (np.isfinite(self.tol) and self.tol > 0):
            raise ModelError(f"Projection `tol` must be positive, found {self.tol!r}.")
        if int(self.max_iter) < 1:
            raise ModelError(f"Projection `max_iter` must be >= 1, found {self.max_iter!r}.")

    @staticmethod
    def _correction(W: Optional[np.ndarray], J: np.ndarray, r: np.ndarray, rank_tol: float,
                    diag: Optional[np.ndarray] = None, floor: float = 0.0) -> np.ndarray:
        """Minimum-W-norm least-squares ``dx`` for ``J dx = -r`` (rows normalized).

        With ``diag`` (a positive diagonal mass, ``W = diag(diag)``) the metric
        factor is a column scaling; otherwise ``W`` is factorized (Cholesky).
        On a consistent system ``M`` and ``M + w J^T J`` give the same ``dx``.
        """
        nr = np.sqrt(np.einsum("ij,ij->i", J, J))
        nr = np.where(nr > 0, nr, 1.0)
        rn = -r / nr
        if diag is not None:
            L = None
            X = (J / nr[:, None] * (1.0 / np.sqrt(diag))).T       # W^-1/2 Jn^T, shape (n, m)
        else:
            L, info = lapack.dpotrf(W, lower=1, clean=1)
            if info != 0:
                raise ModelError(f"the projection metric M + w J^T J is not positive definite "
                                 f"(Cholesky info={info}).")
            X, _ = lapack.dtrtrs(L, (J / nr[:, None]).T, lower=1)  # L^-1 Jn^T
        K = X.T @ X
        LK, info = lapack.dpotrf(K, lower=1, clean=1)
        if info == 0 and LK.diagonal().min() ** 2 > 1e-8 * float(K.diagonal().max()):
            y, _ = lapack.dpotrs(LK, rn, lower=1)
            z = X @ y
        else:                                              # near-singular or redundant rows
            U, s, Vt = np.linalg.svd(X.T, full_matrices=False)
            thr = max(rank_tol, floor)
            k = int(np.count_nonzero(s > thr * s[0])) if s.size and s[0] > 0 else 0
            z = Vt[:k].T @ ((U[:, :k].T @ rn) / s[:k])
        if L is None:
            return z / np.sqrt(diag)
        dx, _ = lapack.dtrtrs(L, z, lower=1, trans=1)
        return dx

    def project(self, system: System, t: float, q: np.ndarray, v: np.ndarray,
                rank_tol: float = DEFAULT_RANK_TOL) -> tuple[np.ndarray, np.ndarray, int]:
        """Return the projected ``(q, v)`` and the number of corrections applied."""
        q = np.array(q, dtype=float)
        v = np.array(v, dtype=float)
        its = 0
        M = system.mass(t, q)
        w = mass_scale(M)
        holonomic_only = not system.nonholonomic
        d = np.diagonal(M)
        diag = d if (np.all(d > 0) and np.count_nonzero(M) == np.count_nonzero(d)) else None

        def metric(J):
            if diag is not None:
                return None
            if J.shape[0] == 0:
                return M + w * np.eye(system.n)
            nr = np.sqrt(np.einsum("ij,ij->i", J, J))
            Jn = J / np.where(nr > 0, nr, 1.0)[:, None]
            return M + w * (Jn.T @ Jn)

        def distances(res, J):
            nr = np.sqrt(np.einsum("ij,ij->i", J, J))
            return np.abs(res) / np.where(nr > 0, nr, 1.0)

        def converged(dist, x):
            return float(dist.max(initial=0.0)) <= self.tol * (1.0 + float(np.abs(x).max()))

        J = None                       # position Jacobian, valid at the current q
        if system.holonomic:
            for _ in range(int(self.max_iter)):
                phi = system.position_residual(t, q)
                J = system.position_jacobian(t, q)
                dist = distances(phi, J)
                if converged(dist, q):
                    break
                Jm = J if holonomic_only else system.velocity_rows(t, q, v)
                dq = self._correction(metric(Jm), J, phi, rank_tol, diag,
                                      floor=100.0 * float(dist.max()) / (1.0 + float(np.abs(q).max())))
                q += dq
                J = None
                its += 1
                if float(np.abs(dq).max()) <= 4 * _EPS * (1.0 + float(np.abs(q).max())):
                    break                                   # stagnated at roundoff
        if not self.velocity or not (system.holonomic or system.nonholonomic):
            return q, v, its
        if holonomic_only:
            # r = Phi_q v + Phi_t, exactly as Holonomic.velocity_residual; after a
            # correction dv the residual is r + J dv (linear in v), no re-evaluation
            if J is None:
                J = system.position_jacobian(t, q)
            if any(c.rheonomic or getattr(c, "_phi_t", None) is not None for c in system.holonomic):
                r = system.velocity_residual(t, q, v)       # includes Phi_t
            else:
                r = J @ v
            for _ in range(int(self.max_iter)):
                if converged(distances(r, J), v):
                    break
                dv = self._correction(metric(J), J, r, rank_tol, diag)
                v += dv
                r = r + J @ dv
                its += 1
                if float(np.abs(dv).max()) <= 4 * _EPS * (1.0 + float(np.abs(v).max())):
                    break
            return q, v, its
        for _ in range(int(self.max_iter)):
            r = system.velocity_residual(t, q, v)
            J = system.velocity_rows(t, q, v)
            if converged(distances(r, J), v):
                break
            dv = self._correction(metric(J), J, r, rank_tol, diag)
            v += dv
            its += 1
            if float(np.abs(dv).max()) <= 4 * _EPS * (1.0 + float(np.abs(v).max())):
                break
        return q, v, its


# --------------------------------------------------------------------------- rank monitor
class RankMonitor:
    """Track the numerical rank of the constraint rows along a run.

    At every accepted step the rows ``A`` are scaled by their reference norms
    (the largest norm each row has shown so far), so a row that *vanishes* at
    a singular position shows up as a small singular value just like rows
    that become dependent. With ``r0`` the rank at the start, the ``r0``-th
    singular value ``s`` is followed; a change of the numerical rank
    (threshold ``rank_tol``) between accepted steps is a ``"drop"``/``"rise"``
    event, and a local minimum of ``s`` below ``passage_tol`` is refined on the
    dense output (bounded Brent search); if the refined minimum falls below
    ``event_tol`` it is recorded as a ``"passage"`` through a singular
    position, with its time and the rows involved.
    """

    def __init__(self, system: System, labels: Sequence[str], rank_tol: float,
                 passage_tol: float = 0.5, event_tol: float = 1e-6) -> None:
        self.system = system
        self.labels = list(labels)
        self.rank_tol = rank_tol
        self.passage_tol = passage_tol
        self.event_tol = event_tol
        self.ref: Optional[np.ndarray] = None
        self.r0: Optional[int] = None
        self.events: list[RankEvent] = []
        self._hist: list[tuple[float, float, int, Callable]] = []  # (t, s, rank, interp)
        self._last_rank: Optional[int] = None

    def _sv(self, t, q, v, update=True):
        A, _ = self.system.rows(t, q, v)
        norms = np.sqrt((A * A).sum(axis=1))
        if self.ref is None:
            self.ref = norms.copy()
        elif update:
            np.maximum(self.ref, norms, out=self.ref)
        ref = np.where(self.ref > 0, self.ref, 1.0)
        U, s, _ = np.linalg.svd(A / ref[:, None], full_matrices=False)
        return U, s

    def _live(self, s):
        r = int(np.count_nonzero(s > self.rank_tol))
        if self.r0 is None:
            self.r0 = r
        live = float(s[self.r0 - 1]) if self.r0 > 0 and s.size >= self.r0 else 1.0
        return live, r

    def rows_of(self, U):
        if self.r0 is None or self.r0 == 0 or U.shape[1] < self.r0:
            return []
        u = U[:, self.r0 - 1]
        big = np.flatnonzero(np.abs(u) > 0.3 * np.abs(u).max())
        return [self.labels[i] if i < len(self.labels) else str(i) for i in big]

    def update(self, t: float, q: np.ndarray, v: np.ndarray, interp: Optional[Callable],
               t_prev: Optional[float] = None) -> None:
        """Register an accepted step ``(t_prev, t]``; ``interp(t) -> (q, v)`` covers it.

        The step is also sampled at three interior points of the interpolant, so
        a passage is found even when the integrator steps far past it.
        """
        if self.system.m == 0:
            return
        if interp is not None and t_prev is not None:
            for f in (0.25, 0.5, 0.75):
                tt = t_prev + f * (t - t_prev)
                qq, vv = interp(tt)
                U, s = self._sv(tt, qq, vv, update=False)
                self._push(tt, U, s, interp, event=False)
        U, s = self._sv(t, q, v)
        self._push(t, U, s, interp, event=True)

    def _push(self, t, U, s, interp, event):
        live, r = self._live(s)
        h = self._hist
        if event:
            last = self._last_rank if self._last_rank is not None else r
            if r != last:
                self.events.append(RankEvent(t=float(t), kind="drop" if r < last else "rise",
                                             rank_before=last, rank_min=min(r, last),
                                             rank_after=r, rows=self.rows_of(U), sigma_min=live))
            self._last_rank = r
        h.append((t, live, r, interp))
        if len(h) >= 3:
            (t0, s0, _, _), (t1, s1, r1, i1), (t2, s2, _, i2) = h[-3:]
            if s1 < self.passage_tol and s1 <= s0 and s1 <= s2 and (s1 < s0 or s1 < s2) \
                    and i1 is not None and i2 is not None:
                self._refine(t0, t1, t2, i1, i2, r1)
            del h[:-2]

    def _refine(self, t0, t1, t2, i1, i2, r1):
        def sample(tt):
            f = i1 if tt <= t1 else i2
            return f(tt)

        def obj(tt):
            qq, vv = sample(tt)
            _, s = self._sv(tt, qq, vv, update=False)
            return self._live(s)[0]

        res = minimize_scalar(obj, bounds=(t0, t2), method="bounded",
                              options={"xatol": 1e-12 * max(1.0, abs(t2)), "maxiter": 200})
        ts = float(res.x)
        qq, vv = sample(ts)
        U, s = self._sv(ts, qq, vv, update=False)
        live, _ = self._live(s)
        if live < self.event_tol:
            for e in self.events[-3:]:
                if e.kind == "passage" and abs(e.t - ts) < 1e-7 * max(1.0, abs(ts)):
                    return
            rmin = int(np.count_nonzero(s > max(self.rank_tol, 10 * live)))
            self.events.append(RankEvent(t=ts, kind="passage", rank_before=r1, rank_min=rmin,
                                         rank_after=r1, rows=self.rows_of(U), sigma_min=live))


# --------------------------------------------------------------------------- helpers
def _hermite(t0, q0, v0, a0, t1, q1, v1, a1) -> Callable:
    """Cubic Hermite interpolant of q (from q, v) and of v (from v, a) on [t0, t1]."""
    h = t1 - t0

    def f(t):
        s = (t - t0) / h
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        q = h00 * q0 + h10 * h * v0 + h01 * q1 + h11 * h * v1
        v = h00 * v0 + h10 * h * a0 + h01 * v1 + h11 * h * a1
        return q, v

    return f


def _check_consistent(system: System, t: float, q: np.ndarray, v: np.ndarray, tol: float) -> list[str]:
    """Row-normalized position/velocity residuals above ``tol`` (a distance)."""
    out = []
    if system.holonomic:
        phi = system.position_residual(t, q)
        J = system.position_jacobian(t, q)
        nr = np.sqrt((J * J).sum(axis=1))
        d = np.abs(phi) / np.where(nr > 0, nr, 1.0)
        if d.max() > tol * (1 + np.abs(q).max()):
            out.append(f"position constraints violated: |Phi_i|/|grad Phi_i| up to {d.max():.3g}")
    if system.holonomic or system.nonholonomic:
        r = system.velocity_residual(t, q, v)
        J = system.velocity_rows(t, q, v)
        nr = np.sqrt((J * J).sum(axis=1))
        d = np.abs(r) / np.where(nr > 0, nr, 1.0)
        if d.max(initial=0.0) > tol * (1 + np.abs(v).max()):
            out.append(f"velocity constraints violated: normalized residual up to {d.max():.3g}")
    return out


def drive_ivp(method: str, rhs: Callable, t0: float, y0: np.ndarray, t1: float, options: dict,
              max_steps: int, after_step: Callable, counter: dict) -> tuple[int, str]:
    """Step a :func:`scipy.integrate.solve_ivp` method one accepted step at a time.

    ``after_step(ode, t_prev, dense) -> (y_new, changed)`` is called after every
    accepted step (``dense`` the step's interpolant): the caller records its
    outputs and may replace the state (a projection, a change of chart). A
    changed state restarts the method: in place for the explicit Runge--Kutta
    methods (their first-same-as-last derivative re-evaluated), with a new
    solver object started at the last step size for the others.
    ``counter["steps"]`` counts accepted steps (kept if an exception escapes).

    Returns
    -------
    status : int
        0 at the end of the span, 1 on ``max_steps`` or a failed step.
    message : str
    """
    cls = IVP_METHODS[method]

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
             stabilization: Union[None, Baumgarte, Projection] = None,
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
        Step of the fixed-step methods (required for them).
    rtol, atol : float
        Tolerances of the adaptive methods.
    t_eval : array_like, optional
        Output times (within ``t_span``, increasing). Default: every accepted step.
    stabilization : None, Baumgarte or Projection
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
        On a solver failure or ``KeyboardInterrupt`` the part computed so far,
        with ``success=False`` and the reason in ``message``.

    Examples
    --------
    >>> import numpy as np, gaussopt as go
    >>> pend = go.System(("x", "y"), mass=np.eye(2), force=[0.0, -9.81],
    ...     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
    >>> tr = go.simulate(pend, (0.0, 1.0), [1.0, 0.0], [0.0, 0.0])
    >>> bool(tr.success), float(tr.position_residual.max()) < 1e-8
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


def _simulate(system, t_span, q0, v0, *, solver, method, dt, rtol, atol, t_eval, stabilization,
              solver_options, project_initial, consistency_tol, monitor_rank, max_steps,
              progress) -> Trajectory:
    """:func:`simulate` without the BLAS thread limit (arguments as documented there)."""
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
    if method not in FIXED_STEP_METHODS and method not in IVP_METHODS:
        raise ModelError(f"`method` must be one of {list(FIXED_STEP_METHODS) + list(IVP_METHODS)}, "
                         f"found {method!r}.")
    fixed = method in FIXED_STEP_METHODS
    if fixed:
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

    system.check(t0, q, v)
    step_solver = make_solver(system, solver, **(solver_options or {}))
    rank_tol = step_solver.rank_tol
    step_solver.b_correction = (stabilization.correction(system)
                                if isinstance(stabilization, Baumgarte) else None)
    projector = stabilization if isinstance(stabilization, Projection) else None

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

    labels = system.row_labels()
    monitor = RankMonitor(system, labels, rank_tol) if monitor_rank and system.m else None
    nfev = [0]
    accel = step_solver.acceleration
    project_rhs = projector is not None and projector.rhs

    def rhs(t, y):
        nfev[0] += 1
        out = np.empty(2 * n)
        qq, vv = y[:n], y[n:]
        if project_rhs:
            qq, vv, _ = projector.project(system, t, qq, vv, rank_tol)
        out[:n] = vv
        out[n:] = accel(t, qq, vv)
        return out

    ts: list[float] = [t0]
    ys: list[np.ndarray] = [np.concatenate([q, v])]
    status, message = 0, "The integration reached the end of t_span."
    wall0 = time.perf_counter()
    steps = 0
    n_proj = 0
    eval_pts = t_eval
    eval_i = 0
    if eval_pts is not None:
        ts, ys = [], []
        if eval_pts[0] == t0:
            ts, ys = [t0], [np.concatenate([q, v])]
            eval_i = 1

    def emit(t_a, t_b, interp, y_end):
        """Record outputs in (t_a, t_b]."""
        nonlocal eval_i
        if eval_pts is None:
            ts.append(t_b)
            ys.append(y_end.copy())
            return
        while eval_i < eval_pts.size and eval_pts[eval_i] <= t_b:
            te = eval_pts[eval_i]
            if te == t_b:
                ye = y_end.copy()
            else:
                qe, ve = interp(te)
                if projector is not None:
                    qe, ve, _ = projector.project(system, te, qe, ve, rank_tol)
                ye = np.concatenate([qe, ve])
            ts.append(te)
            ys.append(ye)
            eval_i += 1

    def project_y(t, y):
        nonlocal n_proj
        qp, vp, its = projector.project(system, t, y[:n], y[n:], rank_tol)
        if its:
            n_proj += 1
        return np.concatenate([qp, vp]), its

    y = np.concatenate([q, v])
    t = t0
    try:
        if monitor is not None:
            monitor.update(t0, q, v, None, None)
        if fixed:
            nsteps = int(np.ceil((t1 - t0) / dt - 1e-9))
            k1 = rhs(t, y)
            for i in range(nsteps):
                if steps >= max_steps:
                    status, message = 1, f"Stopped after max_steps={max_steps} steps."
                    break
                h = min(dt, t1 - t)
                if method == "euler":
                    y_new = y + h * k1
                else:
                    k2 = rhs(t + h / 2, y + h / 2 * k1)
                    k3 = rhs(t + h / 2, y + h / 2 * k2)
                    k4 = rhs(t + h, y + h * k3)
                    y_new = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
                t_new = t0 + (i + 1) * dt if i + 1 < nsteps else t1
                if projector is not None:
                    y_new, _ = project_y(t_new, y_new)
                k1_new = rhs(t_new, y_new)
                interp = _hermite(t, y[:n], y[n:], k1[n:], t_new, y_new[:n], y_new[n:], k1_new[n:])
                emit(t, t_new, interp, y_new)
                if monitor is not None:
                    monitor.update(t_new, y_new[:n], y_new[n:], interp, t)
                t, y, k1 = t_new, y_new, k1_new
                steps += 1
                if progress is not None:
                    progress(t)
        else:
            kw: dict[str, Any] = {"rtol": rtol, "atol": atol}
            if dt is not None:
                kw["first_step"] = dt

            def after_step(ode, t_prev, dense):
                nonlocal t, y

                def interp(tt, dense=dense):
                    yy = dense(tt)
                    return yy[:n], yy[n:]

                y_new, changed = ode.y.copy(), False
                if projector is not None:
                    y_proj, its = project_y(ode.t, y_new)
                    if its:
                        y_new, changed = y_proj, True
                emit(t_prev, ode.t, interp, y_new)
                if monitor is not None:
                    monitor.update(ode.t, y_new[:n], y_new[n:], interp, t_prev)
                t, y = ode.t, y_new
                if progress is not None:
                    progress(t)
                return y_new, changed

            counter = {"steps": 0}
            try:
                status, message = drive_ivp(method, rhs, t, y, t1, kw, max_steps, after_step,
                                            counter)
            finally:
                steps = counter["steps"]
    except KeyboardInterrupt:
        status, message = 1, f"Interrupted (KeyboardInterrupt) at t={t}."
    except (GaussoptError, np.linalg.LinAlgError, FloatingPointError, ValueError) as e:
        status, message = 1, f"The step solver failed at t≈{t}: {type(e).__name__}: {e}"
    wall = time.perf_counter() - wall0

    run_stats: dict[str, Any] = {}
    if hasattr(step_solver, "statuses"):
        run_stats["qp_statuses"] = dict(step_solver.statuses)
    if hasattr(step_solver, "generations"):
        g = np.asarray(step_solver.generations, dtype=float)
        gp = np.asarray(step_solver.gaps, dtype=float)
        run_stats["ga_generations_mean"] = float(g.mean()) if g.size else 0.0
        run_stats["ga_generations_max"] = int(g.max()) if g.size else 0
        run_stats["ga_gap_max"] = float(gp.max()) if gp.size else 0.0
        step_solver.reset()

    traj = _postprocess(system, step_solver, np.asarray(ts), np.asarray(ys).reshape(-1, 2 * n))
    traj.rank_events = monitor.events if monitor is not None else []
    traj.status = status
    if status == 0 and traj.meta.get("postprocess_error"):
        traj.status, message = 1, traj.meta["postprocess_error"]
    traj.message = message
    traj.stats.update({"steps": steps, "rhs_evaluations": nfev[0], "wall_time": wall,
                       "time_per_step": wall / steps if steps else float("nan"),
                       "projections": n_proj, **run_stats})
    traj.meta.update({"solver": step_solver.name, "method": method, "dt": dt, "rtol": rtol,
                      "atol": atol, "stabilization": repr(stabilization),
                      "objective": step_solver.objective, "system": system.name,
                      "t_span": [t0, t1]})
    return traj


def _postprocess(system: System, solver: StepSolver, t: np.ndarray, y: np.ndarray) -> Trajectory:
    """Recompute accelerations, forces, multipliers and residuals at the output times."""
    n = system.n
    N = t.size
    m = system.m or 0
    q, v = y[:, :n].copy(), y[:, n:].copy()
    a = np.full((N, n), np.nan)
    Qc = np.full((N, n), np.nan)
    lam = np.full((N, m), np.nan)
    pres = np.zeros(N)
    vres = np.zeros(N)
    ares = np.full(N, np.nan)
    rank = np.full(N, -1, dtype=int)
    smin = np.full(N, np.nan)
    energy = np.full(N, np.nan) if system.has_energy else None
    keys = ("gap", "error_bound", "error", "generations", "status")
    sample_info: dict[str, list] = {}
    err = None
    for i in range(N):
        ti, qi, vi = float(t[i]), q[i], v[i]
        pres[i] = float(np.linalg.norm(system.position_residual(ti, qi)))
        vres[i] = float(np.linalg.norm(system.velocity_residual(ti, qi, vi)))
        if energy is not None:
            energy[i] = system.energy(ti, qi, vi)
        if err is not None:
            continue
        try:
            r = solver.solve(ti, qi, vi)
        except (GaussoptError, np.linalg.LinAlgError, ValueError) as e:
            err = f"Recomputing the step at output t={ti} failed: {type(e).__name__}: {e}"
            continue
        a[i], Qc[i] = r.a, r.constraint_force
        if r.multipliers.size == m:
            lam[i] = r.multipliers
        A, b = system.rows(ti, qi, vi)
        ares[i] = float(np.linalg.norm(A @ r.a - b)) if m else 0.0
        rank[i] = int(r.info.get("rank", -1))
        smin[i] = float(r.info.get("sigma_min", np.nan))
        for k in keys:
            if k in r.info:
                sample_info.setdefault(k, []).append(r.info[k])
    stats: dict[str, Any] = {}
    for k, vals in sample_info.items():
        if k == "status":
            stats["sample_status"] = {s: vals.count(s) for s in set(vals)}
        else:
            arr = np.asarray(vals, dtype=float)
            stats[f"sample_{k}_max"] = float(np.max(arr))
    meta = {"postprocess_error": err} if err else {}
    return Trajectory(t=t, q=q, v=v, a=a, constraint_force=Qc, multipliers=lam,
                      position_residual=pres, velocity_residual=vres,
                      acceleration_residual=ares, energy=energy, rank=rank, sigma_min=smin,
                      coordinates=system.coordinates, stats=stats, meta=meta)
