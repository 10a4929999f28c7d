"""A fixed-step run (``rk4``, ``euler``) that leaves its constraints or its energy ends
with ``success=False`` and a message naming the step size (``STEP_TOO_LARGE``).

The run is checked against an independent implementation: classical RK4 written out
here, on the pendulum's exact acceleration field off the rod (the Gauss step of a point
mass on ``q.q = l^2``: ``a = g - q (q.g + v.v) / (q.q)``), with the bounds of
:mod:`gaussopt.core.settings` computed from their definitions. The engine must stop at
the first step where the hand-made run leaves a bound, keep every state before it, and
those states must be the hand-made ones to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.settings import FIXED_STEP_ENERGY, FIXED_STEP_RESIDUAL

M, L, G = 2.0, 1.5, 9.81
TH0 = np.radians(60.0)
Q0 = np.array([L * np.sin(TH0), -L * np.cos(TH0)])
V0 = np.zeros(2)
GV = np.array([0.0, -G])
EPS = np.finfo(float).eps


def pendulum(force=None, energy=True):
    return go.System(("x", "y"), mass=M * np.eye(2),
                     force=force if force is not None else [0.0, -M * G],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - L**2]), name="rod")],
                     energy=(lambda t, q, v: 0.5 * M * (v @ v) + M * G * q[1]) if energy else None,
                     name="pendulum")


def field(y):
    q, v = y[:2], y[2:]
    return np.concatenate([v, GV - q * (q @ GV + v @ v) / (q @ q)])


def hand_run(dt, t_end, method="rk4", y0=None):
    """The states of a fixed-step run without stabilization, and the first step that
    leaves a bound: ``(ts, ys, (t_bad, kind) or None)``."""
    y = np.concatenate([Q0, V0]) if y0 is None else y0
    energy = lambda y: 0.5 * M * (y[2:] @ y[2:]) + M * G * y[1]
    length = 1.0 + np.abs(Q0).max()
    e0 = energy(y)
    escale = max(abs(e0), 0.5 * M * (V0 @ V0), M * G * length)
    tmax = 0.5 * M * (V0 @ V0)
    ref = 2 * np.linalg.norm(Q0)              # the row's gradient 2 q at the accepted states
    ts, ys = [0.0], [y]
    for k in range(1, int(round(t_end / dt)) + 1):
        if method == "rk4":
            k1 = field(y)
            k2 = field(y + dt / 2 * k1)
            k3 = field(y + dt / 2 * k2)
            k4 = field(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        else:
            y = y + dt * field(y)
        t = k * dt
        d = abs(y[:2] @ y[:2] - L**2) / ref
        if d > FIXED_STEP_RESIDUAL * length:
            return np.array(ts), np.array(ys), (t, "rod")
        if abs(energy(y) - e0) > FIXED_STEP_ENERGY * max(escale, tmax):
            return np.array(ts), np.array(ys), (t, "energy")
        tmax = max(tmax, 0.5 * M * (y[2:] @ y[2:]))
        ref = max(ref, 2 * np.linalg.norm(y[:2]))
        ts.append(t)
        ys.append(y)
    return np.array(ts), np.array(ys), None


@pytest.mark.parametrize("method,dt", [("rk4", 10.0), ("rk4", 1.0), ("rk4", 0.5), ("rk4", 0.3),
                                       ("euler", 1.0), ("euler", 0.3), ("euler", 0.1)])
def test_run_stops_where_an_independent_run_leaves_the_bounds(method, dt):
    ts, ys, bad = hand_run(dt, 10.0, method)
    assert bad is not None                    # (each of these diverges within 10 s)
    tr = go.simulate(pendulum(), (0.0, 10.0), Q0, V0, method=method, dt=dt,
                     stabilization=None, monitor_rank=False)
    assert not tr.success and tr.status == -1
    msg = tr.message
    assert f"dt={dt:g}" in msg and "too large for the motion" in msg, msg
    assert f"to t={bad[0]:.9g}" in msg, msg
    assert ("position constraint 'rod" in msg) if bad[1] == "rod" else ("energy drifted" in msg)
    assert "bound" in msg and "singular" not in msg
    # the partial trajectory: every state before the step that left the bounds
    np.testing.assert_allclose(tr.t, ts, rtol=0, atol=1e-12 * ts[-1] if ts[-1] else 0)
    assert_same_states(tr, ts, ys, dt, method)


def assert_same_states(tr, ts, ys, dt, method):
    """The engine's Gauss step and the formula above differ by rounding: the engine's
    automatic gamma is a 4th-order difference at step 1e-3 of exact (complex-step) first
    derivatives, (g0 - 8 g1 + 8 g2 - g3) / (12e-3), whose rounding is 18 eps / 12e-3 =
    1.5e3 eps of their size, so each step adds up to ~2e3 eps (1 + |y|); the map carries
    an error made earlier along with the amplification ``amp`` it gives a perturbation
    of the initial state (measured here with one of 1e-8, linear at that size) -- a run
    near divergence amplifies rounding by 1e2-1e3."""
    p = 1e-8
    _, yp, _ = hand_run(dt, ts[-1] + dt / 2, method, np.concatenate([Q0, V0]) + p)
    k = min(len(yp), len(ys))
    amp = max(1.0, float(np.abs(yp[:k] - ys[:k]).max()) / p)
    tol = 2e3 * EPS * (1.0 + np.abs(ys).max()) * amp * len(ts)
    np.testing.assert_allclose(tr.q, ys[:, :2], rtol=0, atol=tol)
    np.testing.assert_allclose(tr.v, ys[:, 2:], rtol=0, atol=tol)


def test_the_issue_cases_with_projection():
    """The issue's runs (the default Projection): dt = 10 ended with success=True and a
    residual of 1e12; dt = 1 stopped at t = 7 naming a singular position."""
    for dt in (10.0, 1.0):
        tr = go.simulate(pendulum(), (0.0, 10.0), Q0, V0, method="rk4", dt=dt)
        assert not tr.success and "too large for the motion" in tr.message, tr.message
        assert "singular" not in tr.message
        assert tr.t[-1] < dt and np.all(np.isfinite(tr.q))
        # what is kept is on the rod (the projection's target, rounding of q.q)
        assert np.all(np.abs(np.einsum("ij,ij->i", tr.q, tr.q) - L**2) < 1e-13)


@pytest.mark.parametrize("method,dt,stab", [("rk4", 0.1, None), ("rk4", 0.1, go.Projection()),
                                            ("rk4", 0.02, go.Baumgarte(10.0, 10.0)),
                                            ("euler", 0.02, None),
                                            ("euler", 0.02, go.Baumgarte(10.0, 10.0))])
def test_convergent_fixed_step_runs_are_not_stopped(method, dt, stab):
    t_end = 4.0
    tr = go.simulate(pendulum(), (0.0, t_end), Q0, V0, method=method, dt=dt,
                     stabilization=stab, monitor_rank=False)
    assert tr.success and tr.t[-1] == t_end, tr.message
    if stab is None:
        # the same states as the independent run (which stays inside the bounds too)
        ts, ys, bad = hand_run(dt, t_end, method)
        assert bad is None
        assert_same_states(tr, ts, ys, dt, method)


def test_a_driven_motion_whose_energy_grows_is_not_stopped():
    # a bead on a vertical rod (x = 0) lifted by a constant force 2 m g: its energy
    # E = m v^2 / 2 + m g y grows by the work 2 m g h (not conserved: driven), twice its
    # kinetic energy m g h. Exact: y = g t^2 / 2, so over 3 s it rises 44 m, 44 times the
    # configuration's size; rk4 integrates the polynomial motion exactly (to rounding)
    bead = go.System(("x", "y"), mass=M * np.eye(2), force=[0.0, 2 * M * G - M * G],
                     constraints=[go.Holonomic(lambda t, q: np.array([q[0]]), name="rod")],
                     energy=lambda t, q, v: 0.5 * M * (v @ v) + M * G * q[1])
    t_end = 3.0
    tr = go.simulate(bead, (0.0, t_end), [0.0, 0.0], [0.0, 0.0], method="rk4", dt=0.01)
    assert tr.success and tr.t[-1] == t_end, tr.message
    # (rk4 is exact on a quadratic; the rounding of 300 steps of sums of size 44)
    assert abs(tr.q[-1, 1] - 0.5 * G * t_end**2) < 300 * 8 * EPS * 0.5 * G * t_end**2


def test_without_energy_the_constraints_still_stop_it():
    tr = go.simulate(pendulum(energy=False), (0.0, 10.0), Q0, V0, method="rk4", dt=1.0,
                     stabilization=None)
    assert not tr.success and "position constraint 'rod" in tr.message, tr.message


def test_a_stage_that_fails_off_the_constraints_names_the_step():
    """A model that raises at a state far off the rod (|q| > 3 l): the stage of the too
    large step fails there, and the message names the step size first."""

    def force(t, q, v):
        if q @ q > 9 * L**2:
            raise ValueError("outside the model's range")
        return np.array([0.0, -M * G])

    ts, ys, bad = hand_run(1.0, 10.0)
    tr = go.simulate(pendulum(force=force), (0.0, 10.0), Q0, V0, method="rk4", dt=1.0,
                     stabilization=None)
    assert not tr.success
    assert "too large for the motion" in tr.message and "a stage of the step" in tr.message
    assert "raised ValueError" in tr.message and "outside the model's range" in tr.message
    assert tr.t[-1] == 0.0


def test_adaptive_runs_are_not_checked():
    tr = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, method="RK45", rtol=1e-3, atol=1e-3)
    assert tr.success


def test_cli_run_exits_nonzero_naming_the_step(capsys):
    from gaussopt.study.cli import main

    assert main(["run", "pendulum", "--method", "rk4", "--dt", "10"]) != 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "dt=10" in text and "too large for the motion" in text, text
