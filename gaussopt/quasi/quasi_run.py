"""Integration of the quasi-velocity equations: the driver, events, dense output, output samples.

:func:`simulate` is :meth:`QuasiVelocities.simulate
<gaussopt.quasi.QuasiVelocities.simulate>`. The state is ``y = (q, w)``; each
accepted step of the :class:`~scipy.integrate.OdeSolver` is followed by, in
this order and in the chart the step was computed in: the optional position
projection, the output samples (states recomputed into ``v = D w + w0`` and
``a``), the events (located on the step's interpolant mapped to ``(q, v)``),
the dense output, and only then the re-anchoring of the automatic basis and
the step-size cap of the next step.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from gaussopt.integrate.dense_output import DenseSolution, EventTracker
from gaussopt.core.exceptions import GaussoptError, ModelError
from gaussopt.integrate.scipy_methods import IVP_METHODS, drive_ivp
from gaussopt.integrate.stabilization import Projection
from gaussopt.gauss.solution import min_norm_multipliers
from gaussopt.core.result import Trajectory
from gaussopt.core.checks import as_state
from gaussopt.integrate.validation import validate_t_span, validate_tol

__all__ = ["simulate", "QUASI_METHODS"]

QUASI_METHODS = IVP_METHODS      # the solve_ivp methods, driven by integrate.drive_ivp


class _ChartStep:
    """The interpolant of one accepted step as ``(q, v)``: ``t``, shape (k,) -> shape (k, 2n).

    ``dense`` interpolates ``(q, w)``; ``v = D w + w0`` is evaluated in the chart
    the step was computed in (``anchor``, None for a user basis), so the map is
    the same whenever it is called, after later re-anchorings too.
    """

    __slots__ = ("qv", "dense", "anchor")

    def __init__(self, qv: Any, dense, anchor: Optional[np.ndarray]):
        self.qv, self.dense, self.anchor = qv, dense, anchor

    def state(self, t: float, y: np.ndarray) -> np.ndarray:
        """``(q, v)`` of the state ``y = (q, w)`` at ``t``, shape (2n,)."""
        n = self.qv.n
        q = y[:n]
        fr = self.qv._frame(float(t), q, self.anchor)
        return np.concatenate([q, fr.D @ y[n:] + fr.w0])

    def __call__(self, t: np.ndarray) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        ys = np.asarray(self.dense(t)).reshape(-1, t.size).T
        return np.array([self.state(ti, yi) for ti, yi in zip(t, ys)]).reshape(t.size, -1)


def simulate(qv: Any, t_span: Sequence[float], q0, v0=None, *, w=None,
             method: str = "DOP853", rtol: float = 1e-9, atol: float = 1e-9,
             t_eval: Optional[Sequence[float]] = None, first_step: Optional[float] = None,
             max_step: float = np.inf, project_positions: bool = False,
             consistency_tol: float = 1e-8, max_steps: int = 10_000_000,
             progress: Optional[Callable[[float], Any]] = None,
             events: Union[None, Callable, Sequence[Callable]] = None,
             dense_output: bool = False) -> Trajectory:
    """Integrate the reduced equations of ``qv``; see :meth:`QuasiVelocities.simulate
    <gaussopt.quasi.QuasiVelocities.simulate>` for the arguments and the result."""
    system, n = qv.system, qv.n
    t0, t1 = validate_t_span(t_span)
    if method not in QUASI_METHODS:
        raise ModelError(f"`method` must be one of {list(QUASI_METHODS)}, found {method!r}.")
    rtol, atol = validate_tol(rtol, atol, stacklevel=3)
    if (v0 is None) == (w is None):
        raise ModelError("give exactly one of `v0` (generalized velocities, shape (n,)) and `w` "
                         "(quasi-velocities, shape (k,)).")
    if not isinstance(dense_output, (bool, np.bool_)):
        raise ModelError(f"`dense_output` must be True or False, found {dense_output!r}.")
    if t_eval is not None:
        t_eval = np.asarray(t_eval, dtype=float).ravel()
        if t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < t0 \
                or t_eval[-1] > t1 or not np.all(np.isfinite(t_eval)):
            raise ModelError(f"`t_eval` must be increasing and within t_span [{t0}, {t1}].")
    q = as_state(q0, n, "q0")
    system.check(t0, q, as_state(v0, n, "v0") if v0 is not None else np.zeros(n))
    if system.holonomic:
        phi = system.position_residual(t0, q)
        J = system.position_jacobian(t0, q)
        d = np.abs(phi) / np.maximum(np.sqrt((J * J).sum(axis=1)), 1e-300)
        if d.max() > consistency_tol * (1.0 + np.abs(q).max()):
            raise ModelError(f"`q0` violates the holonomic constraints: |Phi_i|/|grad Phi_i| up to "
                             f"{d.max():.3g} (consistency_tol={consistency_tol}). Project q0 first.")
    if not qv._prepared:
        qv._prepare(t0, q, as_state(v0, n, "v0") if v0 is not None else np.zeros(n))
    qv.r = qv.k = None
    qv._ref_norms = None
    if qv.automatic:
        qv.anchor = None
        qv.set_anchor(t0, q)
    fr = qv._frame(t0, q)
    if v0 is not None:
        v = as_state(v0, n, "v0")
        wv = qv._w_of(fr, v)
        vv = fr.D @ wv + fr.w0
        if fr.r:
            res = np.abs(fr.B @ v + fr.c) / fr.norms
            if res.max() > consistency_tol * (1.0 + np.abs(v).max()):
                raise ModelError(f"`v0` violates the velocity constraints: normalized residual up "
                                 f"to {res.max():.3g} (consistency_tol={consistency_tol}). Correct "
                                 f"v0 or give quasi-velocities w= (v0 admissible is e.g. {vv}).")
    else:
        wv = np.asarray(w, dtype=float).reshape(-1)
        if wv.shape != (qv.k,) or not np.all(np.isfinite(wv)):
            raise ModelError(f"`w` must be {qv.k} finite quasi-velocities, found {w!r}.")
        vv = fr.D @ wv + fr.w0
    projector = Projection(velocity=False) if (project_positions and system.holonomic) else None
    tracker = EventTracker(events, t0, q, vv) if events is not None else None
    sol = DenseSolution(n, t0, np.concatenate([q, vv]), None) if dense_output else None

    y = np.concatenate([q, wv])
    qv._nfev = 0
    out_t: list[float] = []
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    switches: list[float] = []
    status, message, exception = 0, "The integration reached the end of t_span.", None
    steps = n_proj = 0
    ev = t_eval
    ev_i = 0
    hook = {"event_failed": False, "progress_failed": False, "t": t0}

    def record(tt, yy):
        vq, _, aq, _ = qv._evaluate(tt, yy[:n], yy[n:])
        out_t.append(tt)
        out.append((yy[:n].copy(), vq, aq, yy[n:].copy()))

    wall0 = time.perf_counter()
    t = t0
    try:
        if ev is None or ev[0] == t0:
            record(t0, y)
            ev_i = 1 if ev is not None else 0
        kw: dict[str, Any] = {"rtol": rtol, "atol": atol, "max_step": max_step}
        if first_step is not None:
            kw["first_step"] = first_step

        def after_step(ode, t_prev, dense):
            nonlocal t, y, ev_i, n_proj
            hook["t"] = ode.t
            y_new = ode.y.copy()
            changed = False
            if projector is not None:
                qn, wn = y_new[:n], y_new[n:]
                frn = qv._frame(ode.t, qn)
                vn = frn.D @ wn + frn.w0
                qp, _, its = projector.project(system, ode.t, qn, vn, qv.rank_tol)
                if its:
                    n_proj += 1
                    frp = qv._frame(ode.t, qp)
                    y_new = np.concatenate([qp, qv._w_of(frp, vn)])
                    changed = True
            # everything of this step in the chart it was computed in
            step = _ChartStep(qv, dense, qv.anchor.copy() if qv.automatic else None)
            t_stop = ode.t
            if tracker is not None:
                end = step.state(ode.t, y_new)

                def state(tt):
                    return end.copy() if tt == ode.t else step(np.array([tt]))[0]

                hook["event_failed"] = True
                hit = tracker.after_step(t_prev, ode.t, end, state)
                hook["event_failed"] = False
                if hit:
                    t_stop = tracker.t_terminal
                    ode.status = "finished"             # ends drive_ivp's loop
            if ev is None:
                if t_stop == ode.t:
                    record(ode.t, y_new)
            else:
                while ev_i < ev.size and ev[ev_i] <= t_stop:
                    te = ev[ev_i]
                    record(te, y_new if te == ode.t else dense(te))
                    ev_i += 1
            if sol is not None:
                sol.append(ode.t, step.state(ode.t, y_new), step)
                if t_stop != ode.t:
                    sol.end_at(t_stop, tracker.y_terminal)
            if t_stop != ode.t:
                if ev is None:                         # the run's last sample: the event's state
                    ye = dense(t_stop)
                    record(t_stop, ye)
                t, y = t_stop, y_new
                return y_new, False
            if qv.automatic and qv.k and ode.status == "running":
                fr_end = qv._frame(ode.t, y_new[:n])
                if np.sqrt(fr_end.s[0]) < qv.chart_tol:
                    qv.anchor = fr_end.D.copy()
                    switches.append(float(ode.t))
                    changed = True
                if fr_end.r:
                    # keep the next step's turn of null(B) below ~0.5 rad, so that the
                    # chart (valid up to 90 degrees) cannot break inside a step
                    v_end = fr_end.D @ y_new[n:] + fr_end.w0
                    R = qv._rate(ode.t, y_new[:n], v_end, fr_end.D) / fr_end.norms[:, None]
                    turn = float(np.linalg.norm(
                        fr_end.Vr @ ((fr_end.Ur.T @ R) / fr_end.sr[:, None]), 2))
                    ode.max_step = min(max_step, 0.5 / turn) if turn > 0 else max_step
            t, y = ode.t, y_new
            if progress is not None:
                hook["progress_failed"] = True
                progress(t)
                hook["progress_failed"] = False
            return y_new, changed

        counter = {"steps": 0}
        try:
            status, message = drive_ivp(method, qv.rhs, t0, y, t1, kw, max_steps,
                                        after_step, counter)
        finally:
            steps = counter["steps"]
        if tracker is not None and tracker.terminated_by is not None:
            i = tracker.terminated_by
            status = 1
            message = (f"A termination event occurred: {tracker.label(i)} at "
                       f"t={tracker.t_terminal} (occurrence {len(tracker.t_events[i])}).")
    except KeyboardInterrupt as e:
        status, message, exception = -1, f"Interrupted (KeyboardInterrupt) at t={t}.", e
    except Exception as e:
        if tracker is not None and hook["event_failed"] and tracker.failed is not None:
            status, exception = -1, e
            message = (f"The event function {tracker.label(tracker.failed)} raised "
                       f"{type(e).__name__} at t≈{hook['t']}: {e}")
        elif hook["progress_failed"]:
            status, exception = -1, e
            message = f"The progress callback raised {type(e).__name__} at t={t}: {e}"
        elif isinstance(e, (GaussoptError, np.linalg.LinAlgError, FloatingPointError,
                            ValueError)):
            status, message, exception = -1, (f"The quasi-velocity equations failed at "
                                              f"t≈{t}: {type(e).__name__}: {e}"), e
        else:
            raise
    wall = time.perf_counter() - wall0
    traj = sample(qv, np.asarray(out_t), out)
    traj.status, traj.message = status, message
    traj.exception = exception
    if tracker is not None:
        traj.t_events, traj.q_events, traj.v_events = tracker.arrays()
    traj.sol = sol
    traj.stats.update({"steps": steps, "rhs_evaluations": qv._nfev, "wall_time": wall,
                       "time_per_step": wall / steps if steps else float("nan"),
                       "chart_switches": len(switches), "projections": n_proj})
    traj.meta.update({"solver": "quasi_velocities", "method": method, "rtol": rtol, "atol": atol,
                      "basis": "automatic" if qv.automatic else "user",
                      "chart_switches": switches, "system": system.name, "t_span": [t0, t1],
                      "project_positions": bool(project_positions)})
    return traj


def sample(qv: Any, t: np.ndarray, out: list) -> Trajectory:
    """The :class:`~gaussopt.Trajectory` of the recorded samples: residuals, forces and
    multipliers recomputed at each one."""
    system, n = qv.system, qv.n
    N = t.size
    k = qv.k or 0
    q = np.array([o[0] for o in out]).reshape(N, n)
    v = np.array([o[1] for o in out]).reshape(N, n)
    a = np.array([o[2] for o in out]).reshape(N, n)
    w = np.array([o[3] for o in out]).reshape(N, k)
    m = sum(np.size(con.gamma(t[0], q[0], v[0])) for con in qv._cons) if N else 0
    Qc = np.full((N, n), np.nan)
    lam = np.full((N, m), np.nan)
    pres, vres, ares = np.zeros(N), np.zeros(N), np.zeros(N)
    rank = np.full(N, qv.r if qv.r is not None else -1, dtype=int)
    smin = np.full(N, np.nan)
    energy = np.full(N, np.nan) if system.has_energy else None
    for i in range(N):
        ti, qi, vi, ai = float(t[i]), q[i], v[i], a[i]
        pres[i] = float(np.linalg.norm(system.position_residual(ti, qi)))
        vres[i] = float(np.linalg.norm(system.velocity_residual(ti, qi, vi)))
        if energy is not None:
            energy[i] = system.energy(ti, qi, vi)
        Qc[i] = system.mass(ti, qi) @ ai - system.force(ti, qi, vi)
        if m:
            B, _ = qv._rows(ti, qi)
            ares[i] = float(np.linalg.norm(B @ ai - qv._gamma(ti, qi, vi)))
            lam[i] = min_norm_multipliers(B, Qc[i], qv.rank_tol)
            nr = np.sqrt((B * B).sum(axis=1))
            sv = np.linalg.svd(B / nr[:, None], compute_uv=False)
            smin[i] = float(sv[(qv.r or 1) - 1]) if qv.r else np.nan
    return Trajectory(t=t, q=q, v=v, a=a, constraint_force=Qc, multipliers=lam,
                      position_residual=pres, velocity_residual=vres, acceleration_residual=ares,
                      energy=energy, rank=rank, sigma_min=smin, coordinates=system.coordinates,
                      meta={"w": w})
