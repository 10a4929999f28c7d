"""What becomes the :class:`~gaussopt.core.result.Trajectory` of a run of
:func:`gaussopt.simulate`: the samples recomputed at the output times (accelerations,
constraint forces, multipliers, residuals, energy), the rank events and least-squares
steps read from the engine's records, and the message of a run that failed.

None of these raises: a failure while assembling is recorded in the result, and what was
computed is kept.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import numpy as np

import gaussopt.integrate.engine as E
import gaussopt.integrate.sample_interpolation as SI
import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
from gaussopt.core.exceptions import GaussoptError, ModelError, SolverError
from gaussopt.core.status import message as status_message
from gaussopt.core.result import RankEvent, Trajectory
from gaussopt.gauss.solvers import StepSolver
from gaussopt.model.system import System
from gaussopt.model.system import _check_mass as check_mass

__all__ = ["failure", "rank_events", "least_squares_records", "origin", "postprocess"]


def failure(run: "Run", code: int, method: str) -> tuple[str, Optional[BaseException]]:
    """The message and exception of a run that stopped with engine status ``code``."""
    st, mf, n = run.st, run.mf, run.n
    t = float(st.sc[E.S_T])
    if code == E.MAX_STEPS:
        return f"Stopped after max_steps={int(run.opt.i[E.I_MAXSTEPS])} steps.", None
    if code == E.STEP_TOO_SMALL:
        return getattr(run, "fail_message", f"{method} failed at t={t}: Required step size is "
                       "less than spacing between numbers.") + _small_step_cause(run, t), None
    tf = float(st.sc[E.S_FAIL_T])
    if code == E.STEP_TOO_LARGE:
        return _too_large(run, method, int(st.ic[E.C_GUARD]), float(st.sc[E.S_GUARD_SIZE]),
                          float(st.sc[E.S_GUARD_BOUND]), int(st.ic[E.C_GUARD_ROW]),
                          f"the step from t={float(st.sc[E.S_TOLD]):.9g} to t={tf:.9g}"), None
    if int(run.opt.i[E.I_GUARD]) != 0:
        # a fixed step that failed inside a step (a stage the step solver refused, a model
        # undefined there): when the state there is already off the constraints or the
        # energy, the step size is the cause and what failed there is its consequence
        msg, exc = _failure_at(run, code, tf, method)
        if isinstance(exc, KeyboardInterrupt):
            return msg, exc
        excess = _excess(run, tf, st.fail_y.copy())
        if excess is not None:
            return (_too_large(run, method, *excess, f"a stage of the step from "
                               f"t={float(st.sc[E.S_T]):.9g} at t={tf:.9g}")
                    + f" There: {msg}"), exc
        return msg, exc
    return _failure_at(run, code, tf, method)


#: accelerations this many times their size at the run's start, where an adaptive step
#: size collapsed, say that the equations of motion become singular there
_SINGULAR_GROWTH = 1e3


def _small_step_cause(run: "Run", t: float) -> str:
    """What the accelerations say about an adaptive step size that collapsed at ``t`` (a
    sentence for the run's message, or ""): grown far beyond their size at the run's
    start (:data:`_SINGULAR_GROWTH`), the forces or the mass matrix become singular there
    (a force or a moment arm without bound: a slider-crank's rod at its dead point); of
    that size, the cause is a discontinuity the integrator meets, not the motion's size.
    Not with the genetic algorithm's steps (each a search of seconds, and approximate)."""
    st, n = run.st, run.n
    if getattr(run.solver, "name", "") == "ga":
        return ""
    try:
        a1 = run.solver.solve(t, st.y[:n].copy(), st.y[n:].copy()).a
        a0 = run.solver.solve(float(st.out_t[0]), st.out_y[0, :n].copy(),
                              st.out_y[0, n:].copy()).a
    except Exception:  # noqa: BLE001 - the step solver says why elsewhere; no diagnosis here
        return ""
    if not np.all(np.isfinite(a1)):
        return (" There the accelerations are not finite: the equations of motion are "
                "singular at this state.")
    k = int(np.argmax(np.abs(a1)))
    big1, big0 = float(abs(a1[k])), float(np.abs(a0).max(initial=0.0))
    label = run.system.coordinates[k]
    if big0 == 0.0:
        return f" There the accelerations reach {big1:.3g} (largest on {label!r})."
    if big1 > _SINGULAR_GROWTH * big0:
        return (f" There the accelerations reach {big1:.3g} (largest on {label!r}), "
                f"{big1 / big0:.3g} times their largest at the start ({big0:.3g}): the "
                "forces or the mass matrix become singular there (a force or a moment arm "
                "without bound, such as a slider-crank's rod at its dead point, or a mass "
                "that vanishes), and the motion cannot be continued through it.")
    return (f" The accelerations there ({big1:.3g}, largest on {label!r}) have not grown "
            f"beyond their size at the start ({big0:.3g}): the step size collapsed at a "
            "discontinuity of the forces or of their derivatives (a switch in the model's "
            "code, such as a slider-crank's rod reaching its dead point), not at a "
            "singularity of the motion's size.")


def _too_large(run: "Run", method: str, kind: int, size: float, bound: float, row: int,
               where: str) -> str:
    """The message of a fixed-step run stopped by its checks (:data:`E.STEP_TOO_LARGE`)."""
    st = run.st
    dt = float(run.opt.f[E.F_DT])
    head = (f"The step dt={dt:g} of method={method!r} is too large for the motion: {where}, ")
    if kind == E.GUARD_RESIDUAL:
        labels = run.system.row_labels()
        label = labels[row] if 0 <= row < len(labels) else f"row {row}"
        what = (f"the state left the position constraint {label!r} by {size:.3g} "
                f"(|Phi| / |grad Phi|, in the units of q), beyond the bound {bound:.3g} = "
                f"{run.opt.f[E.F_GUARD_RES]:g} x (1 + max|q0|)")
    else:
        what = (f"the energy drifted by {size:.3g} from E0 = {st.sc[E.S_E0]:.6g}, beyond the "
                f"bound {bound:.3g} = {run.opt.f[E.F_GUARD_E]:g} x the energy's scale (the "
                "largest of |E0|, the kinetic energy T0, |F0| (1 + max|q0|) and the kinetic "
                "energy of the steps before)")
    return (head + what + ". A fixed step has no error control; take a smaller dt or an "
            "adaptive method (method='DOP853'). The trajectory ends at the last state within "
            "the bounds.")


def _excess(run: "Run", t: float, y: np.ndarray) -> Optional[tuple]:
    """The checks of a fixed-step run (:func:`gaussopt.integrate.engine.integrator._guard`)
    at ``(t, y)`` in Python: ``(kind, size, bound, row)`` of the first exceeded, or None
    (also when the model cannot be evaluated there)."""
    st, opt, n, system = run.st, run.opt, run.n, run.system
    checks = int(opt.i[E.I_GUARD])
    q, v = y[:n], y[n:]
    with np.errstate(all="ignore"):
        try:
            if checks & E.GUARD_RESIDUAL and run.mf.mh:
                phi = np.abs(system.position_residual(t, q))
                ref = st.ref[run.mf.hol_rows]
                d = phi / np.where(ref > 0.0, ref, 1.0)
                bound = float(opt.f[E.F_GUARD_RES] * st.sc[E.S_LSCALE])
                over = np.flatnonzero(d > bound)
                if over.size:
                    k = int(over[0])
                    return E.GUARD_RESIDUAL, float(d[k]), bound, int(run.mf.hol_rows[k])
            if checks & E.GUARD_ENERGY and system.has_energy and st.sc[E.S_ESCALE] > 0.0:
                drift = abs(system.energy(t, q, v) - float(st.sc[E.S_E0]))
                bound = float(opt.f[E.F_GUARD_E] * max(st.sc[E.S_ESCALE], st.sc[E.S_TMAX]))
                if drift > bound:
                    return E.GUARD_ENERGY, drift, bound, -1
        except Exception:  # noqa: BLE001 - the failure itself is reported by the caller
            return None
    return None


def _failure_at(run: "Run", code: int, tf: float, method: str
                ) -> tuple[str, Optional[BaseException]]:
    """The message and exception of a run whose step or model failed at ``tf``."""
    st, mf, n = run.st, run.mf, run.n
    t = float(st.sc[E.S_T])
    if code == E.MODEL_FAILED and mf.error is not None:
        e = mf.error
        if isinstance(e, KeyboardInterrupt):
            return f"Interrupted (KeyboardInterrupt) at t={t}.", e
        if isinstance(e, GaussoptError):
            return f"The step solver failed at t≈{tf}: {type(e).__name__}: {e}", e
        return f"The model's code raised {type(e).__name__} at t≈{tf}: {e}{origin(e)}", e
    # a kernel status (or a projection that met an undefined constraint): reproduce the
    # exception at the failing state with the Python step solver
    qf, vf = st.fail_y[:n].copy(), st.fail_y[n:].copy()
    try:
        # the mass matrix first: one that turned indefinite (or non-finite) mid-run gets
        # the message it gets at the initial state, not the kernel's status
        M = run.system.mass(tf, qf) if code != K.NONSYMMETRIC else None   # (solve says it)
        if isinstance(M, np.ndarray) and M.shape == (n, n) and M.dtype.kind == "f":
            check_mass(M, f"mass(t, q) at t≈{tf:.9g} (q = {qf})")
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
        return f"The model's code raised {type(e).__name__} at t≈{tf}: {e}{origin(e)}", e
    e = SolverError(f"the step failed at t≈{tf} with status {status_message(code)!r}.")
    return f"The step solver failed at t≈{tf}: SolverError: {e}", e


def rank_events(run: "Run") -> list[RankEvent]:
    """The engine's records of singular positions as :class:`RankEvent` objects."""
    st = run.st
    labels = run.system.row_labels() if run.m else []
    kinds = {E.EV_PASSAGE: "passage", E.EV_DROP: "drop", E.EV_RISE: "rise"}
    nev = int(st.ic[E.C_NEV])
    out: list[RankEvent] = []
    # through Python lists (a run through a crank's revolutions has hundreds), a block at a
    # time (a run with millions holds one block of temporaries, not millions)
    for a in range(0, nev, 65536):
        b = min(nev, a + 65536)
        ev_f, ev_i, ev_rows = st.ev_f[a:b].tolist(), st.ev_i[a:b].tolist(), st.ev_rows[a:b].tolist()
        out += [RankEvent(t=f[0], kind=kinds[i[0]], rank_before=i[1], rank_min=i[2],
                          rank_after=i[3], rows=[labels[j] for j, on in enumerate(r) if on],
                          sigma_min=f[1])
                for f, i, r in zip(ev_f, ev_i, ev_rows)]
    return out


def least_squares_records(run: "Run") -> list[dict]:
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


#: the directory of the package gaussopt (a traceback that ends there is gaussopt's own)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def origin(e: BaseException) -> str:
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
    if os.path.abspath(code.co_filename).startswith(_PACKAGE_DIR):
        return ""
    return f" (raised in {code.co_filename}:{last.tb_lineno}, in {code.co_name})"


def _sample_engine(system: System, solver: StepSolver, run: "Run", t: np.ndarray,
                   y: np.ndarray, proj: Optional[np.ndarray] = None) -> tuple:
    """The engine's samples (:func:`gaussopt.integrate.engine.sample_all`) at every output time:
    ``(a, Qc, lam, Fo, rank, err, exc)`` (``Fo`` the columns position, velocity and
    acceleration residual, energy, rank, sigma_min; ``err`` the first failure's message,
    ``exc`` its exception). The outputs with ``proj`` are projected onto the constraints
    first, in place in ``y``. Never raises: a failing sample stays NaN."""
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
    if proj is None or run.projector() is None:
        proj = np.zeros(N, dtype=np.bool_)
    mf.error = None
    try:
        addrs, md, buf, opt, _, _ = run.args()      # (packed)
        E.sample_all(addrs, md, buf, opt, run.st.ref, run.st.sref, t, y, a, Qc, lam, Fo,
                     status, np.ascontiguousarray(proj, dtype=np.bool_), run.vanished(),
                     WS.view(run.st.wk, "tree"))
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
            if proj[i]:
                raise SolverError("projecting the interpolated state onto the constraints "
                                  "failed: a constraint is not finite there "
                                  f"(q = {y[i, :n]}).")
            solver.solve(float(t[i]), y[i, :n].copy(), y[i, n:].copy())
            raise SolverError(f"status {status_message(status[i])!r}")
        except Exception as e:  # noqa: BLE001 - recorded, the run's data are kept
            err = f"Recomputing the step at output t={t[i]} failed: {type(e).__name__}: {e}"
            exc = e
    rank = np.where(status == 0, np.nan_to_num(Fo[:, 4], nan=-1.0), -1).astype(int)
    return a, Qc, lam, Fo, rank, err, exc


def _project_outputs(run: "Run", t: np.ndarray, y: np.ndarray, idx: np.ndarray,
                     guard: Optional[Any] = None) -> tuple[Optional[str], Any]:
    """Project the outputs ``y[idx]`` onto the constraints in place, as the run projects
    (for a step solver in Python, which recomputes its outputs in Python). Returns the
    first failure's message and exception (that output stays as interpolated)."""
    project = run.projector()
    if project is None:
        return None, None
    floor = run.vanished()
    for i in idx:
        if guard is not None and guard.stop_requested:      # a second Ctrl-C
            raise KeyboardInterrupt
        try:
            y[i] = project(float(t[i]), y[i], floor)
        except Exception as e:  # noqa: BLE001 - recorded, the run's data are kept
            return (f"Projecting the output sample at t={t[i]} failed: "
                    f"{type(e).__name__}: {e}"), e
    return None, None


def _samples_engine(system: System, solver: StepSolver, run: "Run", t: np.ndarray,
                    y: np.ndarray, marks: np.ndarray) -> tuple:
    """:func:`_sample_engine` at every output, the outputs the engine left unprojected
    (``marks >= 0``) projected first; those of a step with enough of them only at the
    step's nodes and check, the others interpolated
    (:mod:`gaussopt.integrate.sample_interpolation`): the projection's correction of the
    state and every diagnostic, checked at the check output (a step whose check fails is
    recomputed at every output). Returns :func:`_sample_engine`'s tuple and the number of
    interpolated outputs; ``y`` is updated in place."""
    n = system.n
    m = system.m or 0
    N = t.size
    raw = y.copy()
    proj = marks >= 0
    exact = np.ones(N, dtype=bool)
    steps = []
    for g in SI.groups(marks):
        p = SI.plan(t, g)
        if p is not None:
            nodes, check = p
            rest = g[~np.isin(g, nodes) & (g != check)]
            exact[rest] = False
            steps.append((g, nodes, check, rest))
    a = np.full((N, n), np.nan)
    Qc = np.full((N, n), np.nan)
    lam = np.full((N, m), np.nan)
    Fo = np.full((N, 6), np.nan)
    rank = np.full(N, -1, dtype=int)

    def recompute(idx):
        ys = y[idx]
        out = _sample_engine(system, solver, run, t[idx], ys, proj[idx])
        y[idx] = ys
        a[idx], Qc[idx], lam[idx], Fo[idx], rank[idx] = out[:5]
        return out[5], out[6]

    err, exc = recompute(np.flatnonzero(exact))
    # the diagnostics as one array: a | Qc | lam | Fo without its rank column, and the
    # column ranges checked, each against its largest size at the nodes (a, Qc, lam, the
    # energy, sigma_min; the residuals are not: rounding at projected states)
    cols = np.hstack([a, Qc, lam, Fo[:, [0, 1, 2, 3, 5]]])
    e = 2 * n + m
    families = [(lo, hi) for lo, hi in ((0, n), (n, 2 * n), (2 * n, e), (e + 3, e + 4),
                                        (e + 4, e + 5)) if hi > lo]
    redo, count = [], 0
    for g, nodes, check, rest in steps:
        if np.any(rank[nodes] < 0) or np.any(rank[nodes] != rank[check]):
            redo.append(rest)
            continue
        at = np.concatenate([[check], rest])
        state = raw[at] + SI.barycentric(t[nodes], y[nodes] - raw[nodes], t[at])
        scale = np.repeat([1.0 + np.abs(y[nodes, :n]).max(), 1.0 + np.abs(y[nodes, n:]).max()], n)
        ok = bool(np.all(np.abs(state[0] - y[check]) <= SI.STATE_TOL * scale))
        est = SI.barycentric(t[nodes], cols[nodes], t[at]) if ok else None
        with np.errstate(invalid="ignore"):
            for lo, hi in families if ok else ():
                size = np.max(np.abs(cols[nodes, lo:hi]))
                d = np.abs(est[0, lo:hi] - cols[check, lo:hi])
                same_nan = np.isnan(est[0, lo:hi]) & np.isnan(cols[check, lo:hi])
                if not np.all((d <= SI.VALUE_TOL * size) | same_nan):
                    ok = False
                    break
        if not ok:
            redo.append(rest)
            continue
        y[rest] = state[1:]
        cols[rest] = est[1:]
        # (the residuals are norms: an interpolated rounding-level value below 0 is 0)
        cols[rest, e:e + 3] = np.maximum(cols[rest, e:e + 3], 0.0)
        rank[rest] = rank[check]
        count += rest.size
    a[...], Qc[...], lam[...] = cols[:, :n], cols[:, n:2 * n], cols[:, 2 * n:e]
    Fo[:, [0, 1, 2, 3, 5]] = cols[:, e:]
    if redo:
        e2, x2 = recompute(np.concatenate(redo))
        if err is None:
            err, exc = e2, x2
    return a, Qc, lam, Fo, rank, err, exc, count


def postprocess(system: System, solver: StepSolver, run: "Run", t: np.ndarray,
                y: np.ndarray, guard: Optional[Any] = None,
                marks: Optional[np.ndarray] = None) -> Trajectory:
    """Accelerations, constraint forces, multipliers and residuals at the output times.

    The compiled step solvers are evaluated by the engine at every sample; a step solver
    that runs in Python (QP, GA) by its ``solve``. Outputs the engine left unprojected
    (``marks >= 0``: a step with many output times inside it,
    :data:`gaussopt.core.records.OUT_MANY_SAMPLES`) are projected and recomputed at a few
    nodes of their step and interpolated between them, checked
    (:mod:`gaussopt.integrate.sample_interpolation`; a step solver in Python recomputes
    every one). Never raises: a failure
    of the model's code or of a step at a sample is recorded (the first in
    ``meta["postprocess_error"]``), that quantity stays NaN there and everything else
    is still computed; a KeyboardInterrupt (or one deferred by ``guard``, an
    :class:`~gaussopt.integrate.guards.InterruptGuard`) stops the recomputation and keeps what was
    done.
    """
    y = np.array(y, dtype=float)
    marks = np.full(t.size, -1, dtype=np.int64) if marks is None else np.asarray(marks)
    n = system.n
    N = t.size
    m = system.m or 0
    stats: dict[str, Any] = {}
    err, exc = None, None
    mf = run.mf
    a = np.full((N, n), np.nan)
    Qc = np.full((N, n), np.nan)
    lam = np.full((N, m), np.nan)
    Fo = np.full((N, 6), np.nan)
    rank = np.full(N, -1, dtype=int)
    interpolated = 0
    if int(run.opt.i[E.I_SOLVER]) != 2:
        a, Qc, lam, Fo, rank, err, exc, interpolated = _samples_engine(system, solver, run, t,
                                                                       y, marks)
        q, v = y[:, :n].copy(), y[:, n:].copy()
    else:
        try:
            err, exc = _project_outputs(run, t, y, np.flatnonzero(marks >= 0), guard)
        except KeyboardInterrupt as e:
            err = "Interrupted (KeyboardInterrupt) while projecting the output samples."
            exc = e
        q, v = y[:, :n].copy(), y[:, n:].copy()
        keys = ("gap", "error_bound", "error", "generations", "status")
        sample_info: dict[str, list] = {}

        def failed(what, ti, e):
            nonlocal err, exc
            if err is None:
                err = f"{what} at output t={ti} failed: {type(e).__name__}: {e}"
                exc = e

        try:
            for i in range(N):
                if guard is not None and guard.stop_requested:     # a second Ctrl-C
                    raise KeyboardInterrupt
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
    stats["samples_interpolated"] = interpolated
    energy = Fo[:, 3].copy() if system.has_energy else None
    meta = {"postprocess_error": err, "postprocess_exception": exc} if err else {}
    return Trajectory(t=t, q=q, v=v, a=a, constraint_force=Qc, multipliers=lam,
                      position_residual=Fo[:, 0].copy(), velocity_residual=Fo[:, 1].copy(),
                      acceleration_residual=Fo[:, 2].copy(), energy=energy, rank=rank,
                      sigma_min=Fo[:, 5].copy(), coordinates=system.coordinates, stats=stats,
                      meta=meta)

