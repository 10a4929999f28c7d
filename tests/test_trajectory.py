"""Tests of gaussopt.simulate and gaussopt.Trajectory.

The workhorse is a Cartesian pendulum: a point of mass m = 2 kg at (x, y) on a
rod of length l = 1.5 m (``x^2 + y^2 = l^2``), gravity g = 9.81, released at
rest 60 degrees from the downward vertical.

Measured on gaussopt 0.1.0 (errors of the state (q, v) at t = 1 against the exact
motion, :func:`exact_state`):

* rk4 + Projection(): dt = 0.02, 0.01, 0.005 -> 8.1e-7, 5.1e-8, 3.2e-9,
  fitted order 4.00;
* euler + Projection(): dt = 0.02, 0.01, 0.005 -> 0.34, 0.16, 0.079,
  fitted order 1.05;
* drift of |q| - l at the end: rk4 dt = 0.05 over 10 s, 2.9e-3 without
  stabilization, 9.3e-6 with Baumgarte(10, 10); euler dt = 0.02 over 4 s,
  0.376 without, 0.085 with Baumgarte(10, 10).

Tolerances are derived, not fitted to these measurements: adaptive runs within
:func:`integration_bound` (the sum of the local errors DOP853 admits, times the
growth of errors along the exact motion, :func:`flow_growth`), against the exact
pendulum (:func:`exact_state`, Jacobi elliptic functions); fixed-step rk4 runs
within a Richardson estimate of their truncation error; residuals at the
projection's target plus the rounding of the constraint; the fixed-step
comparisons (orders, Baumgarte's drift ratios) are truncation errors, ~1e6
times the rounding, so the same on every machine.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
import sys

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import ellipj, ellipk

import gaussopt as go
from gaussopt.core.result import _ARRAYS

M_P, L_P, G_P = 2.0, 1.5, 9.81
TH0 = math.pi / 3
Q0 = np.array([L_P * math.sin(TH0), -L_P * math.cos(TH0)])
V0 = np.zeros(2)

#: unit roundoff of float64 (2**-52)
EPS = float(np.finfo(float).eps)


# --------------------------------------------------------------------------- error estimates
# Shared by the test files that compare simulated motions with references
# (``from test_trajectory import integration_bound, flow_growth``): every tolerance on a
# simulated state is derived from the run's own error control, not from a measured error.
def integration_bound(tr: go.Trajectory, growth: float = 1.0, *, dense: bool = False,
                      ref_tol: float | None = None, steps: int | None = None) -> float:
    """Bound on the global error of a state component (or of a unit combination of two)
    of an adaptive explicit Runge--Kutta run (scipy's RK45 / DOP853, as ``simulate`` uses).

    Every accepted step keeps the RMS norm of its error estimate over the ``2n`` state
    components below 1, so its local error is below ``sqrt(2n) (atol + rtol |y_i|)`` per
    component. The global error at ``t`` is the sum of the local errors, each carried to
    ``t`` by the exact flow's propagator ``Phi(t, s)``, hence below::

        growth * N_steps * 2 sqrt(2n) (atol + rtol max|y|)

    with ``growth >= max_{s <= t} ||Phi(t, s)||`` (1 on a motion that does not amplify
    errors; :func:`flow_growth` computes it from a reference) and the 2 for a unit
    combination of two components. ``dense``: outputs interpolated between steps
    (``t_eval``) add one more local error (the interpolant of the step errs by about the
    step's local error). ``ref_tol``: add the error of a DOP853 reference run at
    ``rtol = atol = ref_tol`` (the problems' references at 1e-13): the same bound with
    ``ref_tol``, over ``N_steps (rtol / ref_tol)^(1/8)`` steps (an order-8 method's step
    count grows like ``tol^(-1/8)``). ``steps``: the step count when ``tr.stats`` has
    none (solve_ivp runs: at least 12 right-hand sides per DOP853 step).
    """
    n2 = 2 * tr.q.shape[1]
    rtol, atol = tr.meta["rtol"], tr.meta["atol"]
    N = (tr.stats["steps"] if steps is None else steps) + (1 if dense else 0)
    ymax = max(float(np.abs(tr.q).max()), float(np.abs(tr.v).max()))
    bound = N * 2 * math.sqrt(n2) * (atol + rtol * ymax)
    if ref_tol is not None:
        bound += N * (rtol / ref_tol) ** 0.125 * 2 * math.sqrt(n2) * ref_tol * (1 + ymax)
    return growth * bound


def energy_gradient(system: go.System, tr: go.Trajectory) -> float:
    """``max_t |grad E|_1`` over the state ``(q, v)`` along a run, by central differences
    (steps ``1e-6 (1 + |y_i|)``; their relative error, ~1e-6 from truncation and
    ``eps |E| / step``, is covered by 1 %). An energy that is a first integral errs by at
    most this times the sum of the local errors (:func:`integration_bound`), whatever
    the growth of errors along the motion: ``E(y_k) - E(phi(y_{k-1}))`` telescopes."""
    n = tr.q.shape[1]
    worst = 0.0
    for t, q, v in zip(tr.t, tr.q, tr.v):
        y = np.concatenate([q, v])
        g = 0.0
        for i in range(2 * n):
            h = 1e-6 * (1 + abs(y[i]))
            yp, ym = y.copy(), y.copy()
            yp[i] += h
            ym[i] -= h
            g += abs(system.energy(t, yp[:n], yp[n:]) - system.energy(t, ym[:n], ym[n:])) / (2 * h)
        worst = max(worst, g)
    return 1.01 * worst


def flow_growth(reference, y0, t, rows=None, rel_step: float = 1e-6, samples: int = 150) -> float:
    """``max_{s <= t'} ||Phi(t', s)||_2`` over ``t'`` in ``t``: how much the exact flow can
    amplify an error made at ``s`` by the time ``t'`` (``Phi(t', s) = Phi(t', 0) Phi(s, 0)^-1``).

    ``reference(y0, t) -> array, shape (k + ..., len(t))`` is a reference solution
    (rtol = atol = 1e-13) as a function of its initial state ``y0``, shape (k,): its first
    ``k`` rows are the state ``y(t)``; ``rows`` selects the rows whose growth is measured
    (default the state; an output ``o(y)`` gives ``max ||do(t')/dy(s)||``).
    ``dy(t')/dy0`` by central differences with steps ``rel_step max(1, |y0_i|)``:
    truncation ``~rel_step^2``, the reference's own error ``~1e-13 / rel_step = 1e-7``,
    relative. ``samples`` times of ``t`` (evenly spread, the last included) are used.
    """
    y0 = np.asarray(y0, dtype=float)
    t = np.asarray(t, dtype=float)
    k = y0.size
    idx = np.unique(np.linspace(0, t.size - 1, min(samples, t.size)).round().astype(int))
    ts = t[idx]
    cols = []
    for i in range(k):
        h = rel_step * max(1.0, abs(y0[i]))
        e = np.zeros(k)
        e[i] = h
        cols.append((np.asarray(reference(y0 + e, ts)) - np.asarray(reference(y0 - e, ts)))
                    / (2 * h))
    D = np.stack(cols, axis=-1).transpose(1, 0, 2)          # d rows(t_j) / d y0, (N, rows, k)
    Pinv = np.linalg.inv(D[:, :k, :])                        # Phi(t_j, 0)^-1
    out = D[:, :k, :] if rows is None else D[:, rows, :]
    pair = np.einsum("iab,jbc->ijac", out, Pinv)             # d out(t_i) / d y(t_j)
    norms = np.linalg.norm(pair, ord=2, axis=(2, 3))
    return float(np.max(np.tril(norms)))


def pendulum(force=None, energy=True, name="pendulum"):
    return go.System(
        ("x", "y"), mass=M_P * np.eye(2),
        force=force if force is not None else [0.0, -M_P * G_P],
        constraints=[go.Holonomic(lambda t, q: np.array([q @ q - L_P**2]), name="rod")],
        energy=(lambda t, q, v: 0.5 * M_P * (v @ v) + M_P * G_P * q[1]) if energy else None,
        name=name)


def state(tr, i=-1):
    return np.concatenate([tr.q[i], tr.v[i]])


def exact_state(t) -> np.ndarray:
    """The pendulum's exact (q, v) at the times ``t``, shape (len(t), 4): released at rest
    at TH0, sin(theta/2) = k sn(K - omega t | k^2), theta' = -2 omega k cn(...)."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    k, om = math.sin(TH0 / 2), math.sqrt(G_P / L_P)
    sn, cn, _, _ = ellipj(ellipk(k * k) - om * t, k * k)
    th, thd = 2 * np.arcsin(k * sn), -2 * om * k * cn
    q = L_P * np.stack([np.sin(th), -np.cos(th)], axis=1)
    return np.hstack([q, L_P * thd[:, None] * np.stack([np.cos(th), np.sin(th)], axis=1)])


#: error of exact_state: Cephes' ellipj gives sn, cn to ~4e-16 absolute (3e-16 against
#: mpmath here); K - omega t, arcsin and the products add a few eps of l (1 + omega)
EXACT_ERR = 64 * EPS * L_P * (1 + math.sqrt(G_P / L_P))


def pendulum_growth(t) -> float:
    """Growth of errors along the exact pendulum motion, from the angle equation."""
    return flow_growth(lambda y, ts: solve_ivp(
        lambda _, z: [z[1], -G_P / L_P * np.sin(z[0])], (0.0, float(ts[-1])), y, t_eval=ts,
        method="DOP853", rtol=1e-13, atol=1e-13).y, [TH0, 0.0], t)


def rod_bounds(tr) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample bounds on |q.q - l^2| and |2 q.v| after a Projection(): its target
    |r| / |grad| <= 1e-15 (1 + max|x_i|) with |grad| = 2 |q|, plus the rounding of the
    residuals (3 eps of |q|^2 + l^2; the complex step along (0, v): 16 eps of 2 |q| |v|)."""
    qn, vn = np.linalg.norm(tr.q, axis=1), np.linalg.norm(tr.v, axis=1)
    pos = 2 * qn * 1e-15 * (1 + np.abs(tr.q).max(axis=1)) + 3 * EPS * (qn**2 + L_P**2)
    vel = 2 * qn * 1e-15 * (1 + np.abs(tr.v).max(axis=1)) + 16 * EPS * 2 * qn * vn
    return pos, vel


def assert_arrays_consistent(tr, n=2, m=1):
    N = len(tr.t)
    assert N == len(tr)
    assert tr.q.shape == tr.v.shape == tr.a.shape == tr.constraint_force.shape == (N, n)
    assert tr.multipliers.shape == (N, m)
    for k in ("position_residual", "velocity_residual", "acceleration_residual", "rank",
              "sigma_min"):
        assert getattr(tr, k).shape == (N,), k
    if tr.energy is not None:
        assert tr.energy.shape == (N,)
    assert np.all(np.diff(tr.t) > 0)


def assert_same_prefix(part, full):
    """Every array of ``part`` equals the first len(part) samples of ``full``."""
    k = len(part)
    assert 0 < k <= len(full)
    for name in _ARRAYS:
        a, b = getattr(part, name), getattr(full, name)
        if a is None:
            assert b is None
            continue
        assert np.array_equal(a, b[:k], equal_nan=True), name


# --------------------------------------------------------------------------- save / load
def _stats_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), k
        else:
            assert x == y, k


def assert_roundtrip(tr, back):
    for name in _ARRAYS:
        a, b = getattr(tr, name), getattr(back, name)
        if a is None:
            assert b is None, name
            continue
        assert isinstance(b, np.ndarray), name
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a, b, equal_nan=True), name
    assert back.coordinates == tr.coordinates and isinstance(back.coordinates, tuple)
    assert back.status == tr.status and back.success == tr.success
    assert back.message == tr.message
    assert back.meta == tr.meta
    _stats_equal(tr.stats, back.stats)
    assert back.rank_events == tr.rank_events
    assert all(isinstance(e, go.RankEvent) for e in back.rank_events)


@pytest.fixture(scope="module")
def passage_run():
    """A run with a rank event: the rows (1, 0) and (1, t - 0.5) are dependent at t = 0.5."""
    sysm = go.System(("x", "y"), mass=np.diag([1.3, 0.7]), force=[0.3, -1.1],
                     constraints=[go.AccelerationConstraint(
                         lambda t, q, v: np.array([[1.0, 0.0], [1.0, t - 0.5]]), np.zeros(2),
                         name="acc")],
                     energy=lambda t, q, v: 0.5 * (1.3 * v[0]**2 + 0.7 * v[1]**2), name="passage")
    tr = go.simulate(sysm, (0.0, 1.0), [0.2, -0.1], [0.0, 0.4], method="rk4", dt=0.03)
    assert tr.success
    assert [e.kind for e in tr.rank_events] == ["passage"]
    # the rows depend on t only: the root of the continued singular value is located to the
    # monitor's xtol, 4 eps max(1, |t|), by brentq and by the re-centring iteration
    assert tr.rank_events[0].t == pytest.approx(0.5, abs=8 * EPS)
    return tr


def test_save_load_roundtrip_with_events_and_nan(tmp_path, passage_run):
    tr = copy.deepcopy(passage_run)
    # NaN entries (as after a failed recomputation) must survive
    tr.a[3] = np.nan
    tr.multipliers[5, 1] = np.nan
    tr.sigma_min[0] = np.nan
    tr.stats["extra_nan"] = float("nan")
    tr.meta["note"] = "ünïcode ≈ text"
    path = tr.save(tmp_path / "run.npz")
    assert path == tmp_path / "run.npz" and path.exists()
    back = go.load(path)
    assert_roundtrip(tr, back)
    assert np.isnan(back.a[3]).all() and np.isnan(back.multipliers[5, 1])
    assert back.meta["t_span"] == [0.0, 1.0] and back.meta["dt"] == 0.03
    assert back.meta["method"] == "rk4"


def test_save_load_roundtrip_pendulum_no_energy(tmp_path):
    tr = go.simulate(pendulum(energy=False), (0.0, 0.3), Q0, V0, method="DOP853")
    assert tr.energy is None and tr.energy_drift is None
    path = tr.save(tmp_path / "pend")            # no suffix: numpy appends .npz
    assert path == tmp_path / "pend.npz" and path.exists()
    back = go.load(path)
    assert_roundtrip(tr, back)
    assert back.energy is None and back.meta["dt"] is None
    assert back["y"] is not None and np.array_equal(back["y"], tr.q[:, 1])


def test_save_load_roundtrip_interrupted(tmp_path):
    def stop(t):
        if t > 0.2:
            raise KeyboardInterrupt

    tr = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="rk4", dt=0.05, progress=stop)
    assert not tr.success
    back = go.load(tr.save(tmp_path / "partial.npz"))
    assert_roundtrip(tr, back)
    assert back.status == -1 and not back.success and "KeyboardInterrupt" in back.message


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        go.load(tmp_path / "missing.npz")
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    with pytest.raises(go.ModelError, match="not a gaussopt trajectory"):
        go.load(tmp_path / "other.npz")


# --------------------------------------------------------------------------- interrupts
T_END = 1.2   # end of the runs that are interrupted or fail at 0.5 / 0.7


@functools.lru_cache(maxsize=None)
def full_run(method, dt):
    """The uninterrupted run the partial ones are compared with (shared, read only)."""
    return go.simulate(pendulum(), (0.0, T_END), Q0, V0, method=method, dt=dt)


@pytest.mark.parametrize("method,kw", [("DOP853", {}), ("rk4", {"dt": 0.02})])
def test_keyboard_interrupt_in_progress_keeps_partial(method, kw):
    t_stop = 0.7
    seen = []

    def stop(t):
        seen.append(t)
        if t > t_stop:
            raise KeyboardInterrupt

    full = full_run(method, kw.get("dt"))
    part = go.simulate(pendulum(), (0.0, T_END), Q0, V0, method=method, progress=stop, **kw)
    assert full.success and full.t[-1] == T_END
    assert not part.success and part.status == -1
    assert "KeyboardInterrupt" in part.message
    # the step on which progress raised is kept; it is the first one past t_stop
    assert part.t[-1] == seen[-1] and part.t[-2] <= t_stop < part.t[-1] < T_END
    assert_arrays_consistent(part)
    assert np.all(np.isfinite(part.q)) and np.all(np.isfinite(part.a))
    # the computed part is the uninterrupted run's first samples, bit for bit
    assert_same_prefix(part, full)
    assert part.stats["steps"] == len(part) - 1
    assert part.meta["method"] == method


def test_keyboard_interrupt_inside_rhs_keeps_accepted_steps():
    """Interrupted mid-step (inside the force): the partial step is discarded."""
    def force(t, q, v):
        if t > 0.7:
            raise KeyboardInterrupt
        return np.array([0.0, -M_P * G_P])

    full = full_run("DOP853", None)
    part = go.simulate(pendulum(force=force), (0.0, T_END), Q0, V0, method="DOP853")
    assert not part.success and "KeyboardInterrupt" in part.message
    k = len(part)
    assert part.t[-1] <= 0.7 < full.t[k]       # stopped before the first step crossing 0.7
    assert_arrays_consistent(part)
    assert_same_prefix(part, full)


# --------------------------------------------------------------------------- failures
class ForceModelFailed(go.GaussoptError):
    """A user-defined gaussopt error raised by the force model."""


def _nan_after(t_fail):
    def force(t, q, v):
        if t > t_fail:
            return np.array([np.nan, np.nan])
        return np.array([0.0, -M_P * G_P])
    return force


def _raise_after(t_fail):
    def force(t, q, v):
        if t > t_fail:
            raise ForceModelFailed(f"force table ends at t={t_fail}")
        return np.array([0.0, -M_P * G_P])
    return force


@pytest.mark.parametrize("method,kw", [("DOP853", {}), ("rk4", {"dt": 0.02})])
@pytest.mark.parametrize("make_force", [_nan_after, _raise_after], ids=["nan", "raise"])
def test_failing_force_keeps_computed_part(method, kw, make_force):
    """simulate documents: "On a solver failure ... the part computed so far, with
    success=False and the reason in message". The last kept sample is the last
    accepted step whose stages all stayed at t <= 0.5."""
    full = full_run(method, kw.get("dt"))
    part = go.simulate(pendulum(force=make_force(0.5)), (0.0, T_END), Q0, V0, method=method, **kw)
    assert not part.success and part.status == -1
    assert part.message.startswith("The step solver failed at t")
    k = len(part)
    assert part.t[-1] <= 0.5 < full.t[k]
    if method == "rk4":
        assert part.t[-1] == pytest.approx(0.5, abs=EPS)   # 0.5 = 25 * 0.02 on the grid
    assert_arrays_consistent(part)
    for name in ("q", "v", "a", "multipliers", "position_residual", "energy"):
        assert np.all(np.isfinite(getattr(part, name))), name
    assert_same_prefix(part, full)
    if make_force is _raise_after:
        assert "ForceModelFailed" in part.message and "force table ends" in part.message


def test_nan_force_reason_in_message():
    """The reason of the failure should be in the message.

    Found (gaussopt 0.1.0): "The step solver failed at t~0.43: SolverError: SVD
    of the constraint rows failed (LAPACK info=-4)". The hot path
    ClosedForm.acceleration does not check for non-finite results (solve()
    does: "produced non-finite accelerations"), so the NaN acceleration goes
    into the next Runge-Kutta stage and the failure surfaces in LAPACK.
    """
    part = go.simulate(pendulum(force=_nan_after(0.5)), (0.0, T_END), Q0, V0, method="DOP853")
    assert not part.success
    assert re.search(r"non-finite|\bNaN\b|\bnan\b|\binf\b", part.message), part.message


# --------------------------------------------------------------------------- t_eval
def test_t_eval_dop853():
    base = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="DOP853")
    assert base.success and len(base) > 5
    # half of the outputs are accepted step times (exact copies), half lie between
    mids = 0.5 * (base.t[:-1] + base.t[1:])
    t_eval = np.unique(np.concatenate([base.t[::2], mids, [1.0]]))
    tr = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="DOP853", t_eval=t_eval)
    assert tr.success
    np.testing.assert_array_equal(tr.t, t_eval)
    assert_arrays_consistent(tr)
    on_steps = np.isin(t_eval, base.t)
    idx = np.searchsorted(base.t, t_eval[on_steps])
    np.testing.assert_array_equal(tr.q[on_steps], base.q[idx])
    np.testing.assert_array_equal(tr.v[on_steps], base.v[idx])
    # interpolated outputs agree with the exact motion at the same times: integration_bound
    # (dense output) with the exact flow's growth, and exact_state's own error
    bound = integration_bound(tr, pendulum_growth(t_eval), dense=True) + EXACT_ERR
    err = np.abs(np.hstack([tr.q, tr.v]) - exact_state(t_eval)).max()
    assert err < bound, err                         # rtol = atol = 1e-9 (measured 5.6e-9)
    np.testing.assert_allclose(state(tr), exact_state(1.0)[0], rtol=0, atol=bound)
    assert np.all(tr.position_residual <= rod_bounds(tr)[0])


def test_t_eval_rk4():
    dt = 0.01
    base = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="rk4", dt=dt)
    t_eval = np.array([0.0, 0.05, 0.123, 0.3, 0.4567, 0.5, 0.71, 0.999, 1.0])
    tr = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="rk4", dt=dt, t_eval=t_eval)
    assert tr.success
    np.testing.assert_array_equal(tr.t, t_eval)
    assert_arrays_consistent(tr)
    # grid points: the stepped state itself, up to the last bit of a Hermite end point: the
    # output time differs from k dt by an ulp (its interpolant moves by ulp(t) |y'|) and the
    # interpolated state is projected again (1e-15 (1 + |y|) of the rod's rows)
    on_grid = np.isclose(t_eval / dt, np.round(t_eval / dt), rtol=0, atol=1e-9)
    idx = np.round(t_eval[on_grid] / dt).astype(int)
    qv_max, a_max = max(np.abs(base.q).max(), np.abs(base.v).max()), np.abs(base.a).max()
    proj = 2 * 1e-15 * (1 + qv_max)
    np.testing.assert_allclose(tr.q[on_grid], base.q[idx], rtol=0, atol=EPS * qv_max + proj)
    np.testing.assert_allclose(tr.v[on_grid], base.v[idx], rtol=0,
                               atol=EPS * a_max + proj * (1 + qv_max))
    # The rk4 global error, by Richardson: e(dt) = (16/15) |y(dt) - y(dt/2)| for an order-4
    # method, at every grid time (the order is checked to 4.0 +- 0.3 below: the estimate
    # holds to a factor 2^0.3 ~ 1.2, so 2x covers it)
    half = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="rk4", dt=dt / 2)
    Y = np.hstack([base.q, base.v])
    nodes = 2 * 16 / 15 * np.abs(Y - np.hstack([half.q, half.v])[::2]).max()
    base_err = np.abs(state(base) - exact_state(1.0)[0]).max()
    assert base_err < nodes + EXACT_ERR, base_err   # measured 1.6e-7 (global rk4 error)
    # off the grid: cubic Hermite interpolation between rk4 states, O(dt^4): the states'
    # error plus dt^4 / 384 max|d4y/dt4| (the fourth derivative estimated by fourth
    # differences of the stepped states over dt^4, 2x for the estimate)
    d4 = np.abs(np.diff(Y, 4, axis=0)).max() / dt**4
    err = np.abs(np.hstack([tr.q, tr.v]) - exact_state(t_eval)).max()
    assert err < nodes + 2 * dt**4 / 384 * d4 + EXACT_ERR, err    # measured 1.6e-7


def test_t_eval_rk4_projection_projects_interpolated_outputs():
    t_eval = np.linspace(0.013, 0.987, 7)
    tr = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="rk4", dt=0.05, t_eval=t_eval,
                     stabilization=go.Projection())
    np.testing.assert_array_equal(tr.t, t_eval)
    assert tr.t[0] != 0.0                         # t0 is not an output unless asked
    pos, vel = rod_bounds(tr)                     # the projection's target + rounding
    assert np.all(tr.position_residual <= pos)
    assert np.all(tr.velocity_residual <= vel)


# --------------------------------------------------------------------------- Trajectory API
def test_getitem_energy_drift_residuals():
    tr = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="DOP853")
    np.testing.assert_array_equal(tr["x"], tr.q[:, 0])
    np.testing.assert_array_equal(tr["y"], tr.q[:, 1])
    assert tr["x"][0] == Q0[0]
    with pytest.raises(KeyError, match="no coordinate 'z'.*'x', 'y'"):
        tr["z"]
    E = 0.5 * M_P * np.sum(tr.v**2, axis=1) + M_P * G_P * tr.q[:, 1]
    # the same formula up to the order of the sum: 4 eps of its terms
    terms = 0.5 * M_P * np.sum(tr.v**2, axis=1) + M_P * G_P * np.abs(tr.q[:, 1])
    np.testing.assert_allclose(tr.energy, E, rtol=0, atol=4 * EPS * terms.max())
    drift = tr.energy_drift
    assert drift[0] == 0.0
    np.testing.assert_allclose(drift, E - E[0], rtol=0, atol=(2 * 4 + 1) * EPS * terms.max())
    # E is a first integral: the local errors weighted by |grad E|_1 = m (|v|_1 + g)
    gradE = M_P * (np.abs(tr.v).sum(axis=1).max() + G_P)
    assert np.abs(drift).max() < gradE * integration_bound(tr)
    res = tr.residuals
    assert set(res) == {"position", "velocity", "acceleration"}
    assert res["position"] is tr.position_residual
    assert res["velocity"] is tr.velocity_residual
    assert res["acceleration"] is tr.acceleration_residual
    # recomputed residuals: |q|^2 - l^2 and 2 q.v at the samples: the same quantities in
    # another order (3 eps of |q|^2 + l^2), and by the complex step along (0, v) (16 eps of
    # 2 |q| |v|)
    qn, vn = np.linalg.norm(tr.q, axis=1), np.linalg.norm(tr.v, axis=1)
    np.testing.assert_allclose(res["position"], np.abs(np.sum(tr.q**2, axis=1) - L_P**2),
                               rtol=0, atol=2 * 3 * EPS * (qn**2 + L_P**2).max())
    np.testing.assert_allclose(res["velocity"], np.abs(2 * np.sum(tr.q * tr.v, axis=1)),
                               rtol=0, atol=2 * 16 * EPS * (2 * qn * vn).max())
    # |A a - b| of the verified steps: |A| |a - a*| (step_error_bound) plus the rounding of
    # A a - b (3 eps of |A| |a| + |b|)
    from test_step_properties import direct_tolerance, step_error_bound
    sysm = pendulum()
    for t, q, v, a, r in zip(tr.t, tr.q, tr.v, tr.a, res["acceleration"]):
        A, b = sysm.rows(t, q, v)
        da = step_error_bound(sysm.mass(t, q), sysm.force(t, q, v), A, b, a, direct_tolerance(2, 1))
        assert r <= np.linalg.norm(A) * da + 3 * EPS * (np.linalg.norm(A) * np.linalg.norm(a)
                                                        + np.linalg.norm(b))
    assert len(tr) == tr.t.size and "success=True" in repr(tr)


# --------------------------------------------------------------------------- convergence order
@pytest.fixture(scope="module")
def convergence():
    y_ref = exact_state(1.0)[0]
    dts = np.array([0.02, 0.01, 0.005])
    out = {}
    for method in ("rk4", "euler"):
        errs = []
        for dt in dts:
            tr = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method=method, dt=dt,
                             stabilization=go.Projection(), monitor_rank=False)
            assert tr.success and tr.t[-1] == 1.0
            assert len(tr) == round(1.0 / dt) + 1
            assert np.all(tr.position_residual <= rod_bounds(tr)[0])
            errs.append(np.linalg.norm(state(tr) - y_ref))
        out[method] = (dts, np.array(errs))
    return out


def _order(dts, errs):
    return np.polyfit(np.log(dts), np.log(errs), 1)[0]


def test_rk4_convergence_order(convergence):
    dts, errs = convergence["rk4"]
    # measured 8.1e-7, 5.1e-8, 3.2e-9: order 4.00. The errors are truncation errors, far
    # above the exact reference's error (EXACT_ERR ~1e-13: its effect on the slope is
    # < 1e-4) and the rounding, so the fitted slope is the same on every machine; the
    # tolerance admits the next term of the error expansion over dt in [0.005, 0.02]
    assert errs[-1] > 1e4 * EXACT_ERR
    assert _order(dts, errs) == pytest.approx(4.0, abs=0.3), errs


def test_euler_convergence_order(convergence):
    dts, errs = convergence["euler"]
    # measured 0.34, 0.16, 0.079: order 1.05 (truncation errors, as above)
    assert _order(dts, errs) == pytest.approx(1.0, abs=0.2), errs


# --------------------------------------------------------------------------- Baumgarte
def _rod_drift(tr):
    return np.abs(np.linalg.norm(tr.q, axis=1) - L_P)


@pytest.mark.parametrize("method,dt,t_end,factor", [
    # fixed-step runs: the drifts are truncation errors (deterministic in dt, ~1e10 times
    # the rounding), the same on every machine; the factors are the claims (a 100-fold and
    # a 2.5-fold reduction), met with margins 3 and 1.7
    ("rk4", 0.05, 10.0, 1e-2),     # measured final drift 2.9e-3 -> 9.3e-6 (max 2.0e-5)
    ("euler", 0.02, 4.0, 0.4),     # measured final drift 0.376 -> 0.085 (max 0.100)
])
def test_baumgarte_reduces_drift(method, dt, t_end, factor):
    runs = {}
    for label, stab in (("none", None), ("baumgarte", go.Baumgarte(10.0, 10.0))):
        tr = go.simulate(pendulum(), (0.0, t_end), Q0, V0, method=method, dt=dt,
                         stabilization=stab, monitor_rank=False)
        assert tr.success and tr.t[-1] == t_end
        runs[label] = _rod_drift(tr)
    none, baum = runs["none"], runs["baumgarte"]
    assert none[-1] > (1e-3 if method == "rk4" else 0.1)     # the unstabilized run does drift
    assert baum[-1] < factor * none[-1], (baum[-1], none[-1])
    assert baum.max() < factor * none.max(), (baum.max(), none.max())


def test_baumgarte_constraint_dynamics():
    """With Baumgarte the residual obeys Phi'' + alpha Phi' + beta Phi = 0 exactly
    (it is what the acceleration rows enforce): start 1e-3 off the rod and compare
    Phi(t) = |q|^2 - l^2 with the solution of that ODE."""
    alpha, beta = 10.0, 10.0
    q0 = 1.001 * Q0
    phi0 = q0 @ q0 - L_P**2                       # Phi'(0) = 2 q0.v0 = 0
    tr = go.simulate(pendulum(), (0.0, 2.0), q0, V0, method="DOP853", rtol=1e-11, atol=1e-11,
                     stabilization=go.Baumgarte(alpha, beta), consistency_tol=1e-2,
                     t_eval=np.linspace(0.0, 2.0, 21))
    assert tr.success
    r1 = (-alpha + math.sqrt(alpha**2 - 4 * beta)) / 2
    r2 = (-alpha - math.sqrt(alpha**2 - 4 * beta)) / 2
    c1 = phi0 * r2 / (r2 - r1)
    c2 = -phi0 * r1 / (r2 - r1)
    expected = c1 * np.exp(r1 * tr.t) + c2 * np.exp(r2 * tr.t)
    phi = np.sum(tr.q**2, axis=1) - L_P**2
    # Phi'' + alpha Phi' + beta Phi = 0 holds exactly along the exact motion; the state's
    # local errors move (Phi, Phi' = 2 q.v) by |grad|_1 = 4 |q|_1 + 2 |v|_1 times them, and
    # the overdamped residual dynamics never amplify them (roots -1.13, -8.87); plus the
    # rounding of Phi (3 eps of |q|^2 + l^2) and of the expected values (4 eps |phi0|)
    grad = (4 * np.abs(tr.q).sum(axis=1) + 2 * np.abs(tr.v).sum(axis=1)).max()
    bound = (grad * integration_bound(tr, dense=True)
             + 3 * EPS * (np.sum(tr.q**2, axis=1).max() + L_P**2) + 4 * EPS * abs(phi0))
    np.testing.assert_allclose(phi, expected, rtol=0, atol=bound)   # measured 2.5e-9
    # decayed like exp(-1.13 t): the exact Phi(2) is 0.118 phi0 and phi is within `bound`
    # (~1e-9 |phi0|) of it
    assert abs(phi[-1]) < 0.15 * abs(phi0)


# --------------------------------------------------------------------------- atomic save
@pytest.fixture(scope="module")
def short_runs():
    """Two cheap pendulum runs (0.1 s and 0.2 s, rk4 dt = 0.01) with different data."""
    a = go.simulate(pendulum(), (0.0, 0.1), Q0, V0, method="rk4", dt=0.01)
    b = go.simulate(pendulum(), (0.0, 0.2), Q0, V0, method="rk4", dt=0.01)
    assert a.success and b.success and len(a) == 11 and len(b) == 21
    return a, b


@pytest.mark.parametrize("exc", [KeyboardInterrupt("interrupted while writing"),
                                 OSError(28, "No space left on device (simulated)")],
                         ids=["KeyboardInterrupt", "OSError"])
def test_save_interrupted_keeps_old_file_and_leaves_no_temp(tmp_path, monkeypatch, short_runs, exc):
    import gaussopt.core.result as result

    old, new = short_runs
    path = old.save(tmp_path / "run.npz")
    before = path.read_bytes()
    seen = []

    def partial_writer(file, *args, **kwargs):
        # the temporary file lies in the destination directory, beside the old file
        seen.extend(p.name for p in tmp_path.iterdir() if p.name != "run.npz")
        file.write(before[: len(before) // 3])           # part of a zip archive ...
        file.flush()
        raise exc                                        # ... then Ctrl-C / disk full

    monkeypatch.setattr(result.np, "savez_compressed", partial_writer)
    with pytest.raises(type(exc), match=re.escape(str(exc))):
        new.save(path)
    assert len(seen) == 1 and seen[0].endswith(".tmp"), seen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz"]   # no temporary left
    assert path.read_bytes() == before
    monkeypatch.undo()
    assert_roundtrip(old, go.load(path))
    # without an old file: nothing at all is left behind
    monkeypatch.setattr(result.np, "savez_compressed", partial_writer)
    with pytest.raises(type(exc), match=re.escape(str(exc))):
        new.save(tmp_path / "fresh.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz"]


def test_save_replaces_existing_file(tmp_path, short_runs):
    old, new = short_runs
    path = old.save(tmp_path / "run.npz")
    assert new.save(path) == path
    assert_roundtrip(new, go.load(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz"]


def test_save_suffix_and_permissions(tmp_path, short_runs):
    tr = short_runs[0]
    for given, written in (("pend", "pend.npz"), ("run.v2", "run.v2.npz"),
                           ("done.npz", "done.npz")):
        for arg in (tmp_path / given, str(tmp_path / given)):
            path = tr.save(arg)
            assert path == tmp_path / written and isinstance(path, type(tmp_path))
            assert_roundtrip(tr, go.load(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.npz", "pend.npz", "run.v2.npz"]
    if hasattr(os, "umask") and sys.platform != "win32":
        umask = os.umask(0)
        os.umask(umask)
        # the same permissions as a file written directly (not mkstemp's 0o600)
        assert (tmp_path / "pend.npz").stat().st_mode & 0o777 == 0o666 & ~umask
        # an overwritten file keeps its own permissions, as with a write in place
        os.chmod(tmp_path / "pend.npz", 0o640)
        tr.save(tmp_path / "pend")
        assert (tmp_path / "pend.npz").stat().st_mode & 0o777 == 0o640


def test_save_into_missing_directory(tmp_path, short_runs):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "no" / "x.npz"))):
        short_runs[0].save(tmp_path / "no" / "x")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- load validation
def _contents(path):
    """Header dict and arrays of a saved trajectory."""
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    return json.loads(str(arrays.pop("__header__"))), arrays


def _rewrite(src, dst, header_change=None, array_change=None, raw_header=None):
    header, arrays = _contents(src)
    if header_change:
        header_change(header)
    if array_change:
        array_change(arrays)
    hdr = raw_header if raw_header is not None else json.dumps(header)
    np.savez_compressed(dst, __header__=np.array(hdr), **arrays)


def _set(d, k, v):
    d[k] = v


def _bad_random(good, bad):
    bad.write_bytes(np.random.default_rng(1).bytes(3000))


def _bad_truncated(good, bad):
    data = good.read_bytes()
    bad.write_bytes(data[: len(data) // 2])


def _bad_truncated_tail(good, bad):            # central directory cut: still "PK..." at the start
    data = good.read_bytes()
    bad.write_bytes(data[:-30])


def _bad_npy(good, bad):
    with bad.open("wb") as fh:
        np.save(fh, np.arange(4.0))


BAD_FILES = {
    "random bytes": (_bad_random, r" is not a gaussopt trajectory file: it cannot be opened as "
                                  r"an \.npz archive"),
    "truncated": (_bad_truncated, r" is not a gaussopt trajectory file: it cannot be opened "
                                  r"as an \.npz archive \(BadZipFile"),
    "truncated tail": (_bad_truncated_tail, r" is not a gaussopt trajectory file: it cannot be "
                                            r"opened as an \.npz archive \(BadZipFile"),
    "npy file": (_bad_npy, r" is not a gaussopt trajectory file: it holds a single \.npy array"),
    "foreign npz": (lambda g, b: np.savez(b, x=np.arange(3)),
                    r" is not a gaussopt trajectory file: no `__header__` entry \(found arrays "
                    r"\['x'\]\)"),
    "broken JSON": (lambda g, b: _rewrite(g, b, raw_header='{"format": 1, "coordinates": ['),
                    r" is not a gaussopt trajectory file: `__header__` is not valid JSON"),
    "JSON list": (lambda g, b: _rewrite(g, b, raw_header="[1, 2]"),
                  r" is not a gaussopt trajectory file: `__header__` must be a JSON object, "
                  r"found list"),
    "header array": (lambda g, b: np.savez(b, __header__=np.arange(3.0), **_contents(g)[1]),
                     r" is not a gaussopt trajectory file: `__header__` must be a JSON string, "
                     r"found an array of dtype float64"),
    "q length": (lambda g, b: _rewrite(g, b, array_change=lambda a: _set(a, "q", a["q"][:-2])),
                 r": array `q` has shape \(9, 2\) but `t` has 11 samples"),
    "q string": (lambda g, b: _rewrite(g, b, array_change=lambda a: _set(a, "q",
                                                                         a["q"].astype(str))),
                 r": array `q` must be real numeric, found dtype <U"),
    "q columns": (lambda g, b: _rewrite(g, b, array_change=lambda a: _set(
                      a, "q", np.hstack([a["q"], a["q"]]))),
                  r": array `q` has shape \(11, 4\) but there are 2 coordinates \['x', 'y'\]"),
    "rank float": (lambda g, b: _rewrite(g, b, array_change=lambda a: _set(
                       a, "rank", a["rank"].astype(float))),
                   r": array `rank` must be integer, found dtype float64"),
    "multipliers 1-D": (lambda g, b: _rewrite(g, b, array_change=lambda a: _set(
                            a, "multipliers", a["multipliers"][:, 0])),
                        r": array `multipliers` must have shape \(N, m\) with N = 11, found "
                        r"\(11,\)"),
    "energy length": (lambda g, b: _rewrite(g, b, array_change=lambda a: _set(
                          a, "energy", a["energy"][:3])),
                      r": array `energy` has shape \(3,\) but `t` has 11 samples"),
    "format 99": (lambda g, b: _rewrite(g, b, header_change=lambda h: _set(h, "format", 99)),
                  r": unsupported format 99 \(this gaussopt reads format 1\)"),
    "format str": (lambda g, b: _rewrite(g, b, header_change=lambda h: _set(h, "format", "1")),
                   r": header `format` must be an int, found '1' \(str\)"),
    "no format": (lambda g, b: _rewrite(g, b, header_change=lambda h: h.pop("format")),
                  r" is not a gaussopt trajectory file: the header has no `format`"),
    "missing v": (lambda g, b: _rewrite(g, b, array_change=lambda a: a.pop("v")),
                  r": missing array\(s\) `v`"),
    "missing t": (lambda g, b: _rewrite(g, b, array_change=lambda a: a.pop("t")),
                  r": missing array\(s\) `t`"),
    "energy announced": (lambda g, b: _rewrite(g, b, array_change=lambda a: a.pop("energy")),
                         r": missing array\(s\) `energy`"),
    "coordinates": (lambda g, b: _rewrite(g, b, header_change=lambda h: _set(
                        h, "coordinates", "xy")),
                    r": header `coordinates` must be a list of str, found 'xy' \(str\)"),
    "status": (lambda g, b: _rewrite(g, b, header_change=lambda h: _set(h, "status", "ok")),
               r": header `status` must be an int, found 'ok' \(str\)"),
    "message": (lambda g, b: _rewrite(g, b, header_change=lambda h: _set(h, "message", 3)),
                r": header `message` must be a str, found 3 \(int\)"),
    "meta": (lambda g, b: _rewrite(g, b, header_change=lambda h: _set(h, "meta", [])),
             r": header `meta` must be a dict, found \[\] \(list\)"),
    "rank event": (lambda g, b: _rewrite(g, b, header_change=lambda h: _set(
                       h, "rank_events", [{"t": 0.5, "kind": "drop", "rows": "c"}])),
                   r": header `rank_events\[0\]` lacks the field\(s\) \['rank_before', "
                   r"'rank_min', 'rank_after', 'sigma_min'\]; header `rank_events\[0\]`: "
                   r"`rows` must be list of str"),
    "rank event type": (lambda g, b: _rewrite(g, b, header_change=lambda h: _set(
                            h, "rank_events", ["drop"])),
                        r": header `rank_events\[0\]` must be a dict with the fields"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_load_rejects_damaged_or_foreign_file(tmp_path, short_runs, case):
    make, problem = BAD_FILES[case]
    good = short_runs[0].save(tmp_path / "good.npz")
    bad = tmp_path / "bad.npz"
    make(good, bad)
    with pytest.raises(go.ModelError, match=re.escape(repr(str(bad))) + problem):
        go.load(bad)


def test_load_lists_every_problem(tmp_path, short_runs):
    good = short_runs[0].save(tmp_path / "good.npz")
    bad = tmp_path / "bad.npz"

    def arrays(a):
        a["q"] = a["q"][:5]
        a["v"] = a["v"].astype(str)

    _rewrite(good, bad, header_change=lambda h: _set(h, "status", None), array_change=arrays)
    with pytest.raises(go.ModelError, match=re.escape(repr(str(bad))) + ": header `status` must"
                       r" be an int, found None \(NoneType\); array `v` must be real numeric, "
                       r"found dtype <U.*; array `q` has shape \(5, 2\) but `t` has 11 samples"):
        go.load(bad)


def test_load_tolerates_unknown_header_keys_and_arrays(tmp_path, short_runs):
    tr = short_runs[0]
    good = tr.save(tmp_path / "good.npz")
    newer = tmp_path / "newer.npz"

    def header(h):
        h["exception"] = "RuntimeError: future field"
        h["lstsq_steps"] = [{"t": 0.1, "residual": 1e-3}]
        h["rank_events"] = [{"t": 0.05, "kind": "passage", "rank_before": 1, "rank_min": 0,
                             "rank_after": 1, "rows": ["rod"], "sigma_min": 0.0, "new": 1}]

    _rewrite(good, newer, header_change=header,
             array_change=lambda a: _set(a, "future_array", np.arange(3)))
    back = go.load(newer)
    assert back.rank_events == [go.RankEvent(0.05, "passage", 1, 0, 1, ["rod"], 0.0)]
    back.rank_events = tr.rank_events
    assert_roundtrip(tr, back)


def test_load_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        go.load(tmp_path / "missing.npz")
    (tmp_path / "dir.npz").mkdir()
    with pytest.raises(IsADirectoryError if sys.platform != "win32" else PermissionError,
                       match="dir.npz"):
        go.load(tmp_path / "dir.npz")
