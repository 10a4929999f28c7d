"""Cartesian pendulum against its exact period (complete elliptic integral).

m = 2 kg, l = 1.5 m (not 1, so a missing factor of m or l shows), released at
rest 60 degrees from the downward vertical. The period is
T = 4 sqrt(l/g) K(k^2), k = sin(theta0/2). The simulated period is measured as
twice the time of the first zero of the x-velocity (the pendulum reaches the
opposite extreme), located by Brent's method on the integrator's dense output.

Tolerances are derived from error estimates (test_trajectory.integration_bound,
test_step_properties.step_error_bound, the projection's target), written beside
each assertion.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq
from scipy.special import ellipk

import gaussopt as go
from test_step_properties import (direct_tolerance, force_error_bound, multiplier_error_bound,
                                  step_error_bound)
from test_trajectory import EPS, flow_growth, integration_bound

M_, L_, G_ = 2.0, 1.5, 9.81
TH0 = np.radians(60.0)
T_EXACT = 4 * np.sqrt(L_ / G_) * ellipk(np.sin(TH0 / 2) ** 2)
Q0 = np.array([L_ * np.sin(TH0), -L_ * np.cos(TH0)])


def pendulum(auto: bool = True) -> go.System:
    phi = lambda t, q: np.array([q @ q - L_**2])  # noqa: E731
    if auto:
        con = go.Holonomic(phi)
    else:
        con = go.Holonomic(phi, lambda t, q: 2 * q[None, :], lambda t, q, v: np.array([-2 * v @ v]),
                           rheonomic=False)
    return go.System(("x", "y"), mass=M_ * np.eye(2), force=[0.0, -M_ * G_], constraints=[con],
                     energy=lambda t, q, v: 0.5 * M_ * v @ v + M_ * G_ * q[1])


def angle_reference(y0, t):
    """(theta, theta') of theta'' = -(g/l) sin theta from ``y0`` at ``t`` (DOP853, 1e-13)."""
    return solve_ivp(lambda _, s: [s[1], -(G_ / L_) * np.sin(s[0])], (0.0, float(t[-1])), y0,
                     method="DOP853", rtol=1e-13, atol=1e-13, t_eval=t).y


def rod_residual_bounds(tr: go.Trajectory) -> tuple[float, float]:
    """Bounds on |Phi| = |q.q - l^2| and |Phi_q v| = |2 q.v| after the projection.

    The projection (``Projection()``) stops at a row-normalized residual
    ``|Phi| / |Phi_q| <= 1e-15 (1 + max|q_i|)`` (and ``|Phi_q v| / |Phi_q| <= 1e-15 (1 +
    max|v_i|)``), ``|Phi_q| = 2 |q|``; evaluating ``q.q - l^2`` rounds to at most 3 eps
    times the terms summed (``|q|^2 + l^2``), ``2 q.v`` to 2 eps times ``2 |q| |v|``."""
    qn, vn = np.linalg.norm(tr.q, axis=1), np.linalg.norm(tr.v, axis=1)
    qmax, vmax = np.abs(tr.q).max(), np.abs(tr.v).max()
    pos = (2 * qn * 1e-15 * (1 + qmax) + 3 * EPS * (qn**2 + L_**2)).max()
    vel = (2 * qn * 1e-15 * (1 + vmax) + 2 * EPS * 2 * qn * vn).max()
    return float(pos), float(vel)


def measured_period(traj: go.Trajectory) -> float:
    vx = traj.v[:, 0]
    i = np.flatnonzero((vx[:-1] < 0) & (vx[1:] >= 0))[0]
    # cubic Hermite in v (with a) between the bracketing samples: O(h^4) accurate
    t0, t1 = traj.t[i], traj.t[i + 1]
    h = t1 - t0
    v0, v1, a0, a1 = vx[i], vx[i + 1], traj.a[i, 0], traj.a[i + 1, 0]

    def v(t):
        s = (t - t0) / h
        return ((2 * s**3 - 3 * s**2 + 1) * v0 + (s**3 - 2 * s**2 + s) * h * a0
                + (-2 * s**3 + 3 * s**2) * v1 + (s**3 - s**2) * h * a1)

    return 2 * brentq(v, t0, t1, xtol=1e-15)


@pytest.mark.parametrize("auto", [True, False])
def test_period_matches_elliptic_integral(auto):
    # samples every 1e-3 s: the Hermite root is accurate to ~h^4 |d^4 v/dt^4| / 384
    t_eval = np.linspace(0, 1.6, 1601)
    tr = go.simulate(pendulum(auto), (0.0, 1.6), Q0, [0.0, 0.0], rtol=1e-12, atol=1e-12,
                     t_eval=t_eval)
    assert tr.success, tr.message
    T = measured_period(tr)
    # Error estimate: the root of v_x moves by |dv_x| / |a_x|, dv_x the state error there
    # (integration_bound with the dense output and the exact flow's growth over [0, 1.6],
    # ~2.5, from the angle equation), plus the Hermite error h^4/384 max|d^4 v_x/dt^4|
    # (the fourth derivative estimated by fourth differences of the samples, 2x for the
    # estimate) and brentq's xtol 1e-15; T is twice the root.
    glob = integration_bound(tr, flow_growth(angle_reference, [TH0, 0.0], t_eval), dense=True)
    i = np.flatnonzero((tr.v[:-1, 0] < 0) & (tr.v[1:, 0] >= 0))[0]
    ax = min(abs(tr.a[i, 0]), abs(tr.a[i + 1, 0]))
    h = t_eval[1] - t_eval[0]
    hermite = 2 * h**4 / 384 * np.abs(np.diff(tr.v[:, 0], 4)).max() / h**4
    assert abs(T - T_EXACT) < 2 * ((glob + hermite) / ax + 1e-15), (T, T_EXACT, glob)
    # energy is conserved by the exact motion: E is a first integral, so its error is a
    # sum of local errors weighted by |grad E|_1 = m (|v_x| + |v_y| + g), never amplified
    gradE = M_ * (np.abs(tr.v).sum(axis=1).max() + G_)
    assert np.abs(tr.energy_drift).max() < gradE * integration_bound(tr, dense=True)


def test_projection_keeps_position_residual_below_1e12():
    tr = go.simulate(pendulum(False), (0.0, 10.0), Q0, [0.0, 0.0], rtol=1e-9, atol=1e-9,
                     stabilization=go.Projection())
    assert tr.success, tr.message
    pos, vel = rod_residual_bounds(tr)                  # ~1e-14, below the name's 1e-12
    assert tr.position_residual.max() < pos
    assert tr.velocity_residual.max() < vel
    # without it the rod drifts by the integration error (rtol = 1e-9: ~1e-8), far above
    # the projection's rounding-level bound
    free = go.simulate(pendulum(False), (0.0, 10.0), Q0, [0.0, 0.0], rtol=1e-9, atol=1e-9,
                       stabilization=None)
    assert free.position_residual.max() > 10 * pos
    # the default stabilization is the projection
    default = go.simulate(pendulum(False), (0.0, 10.0), Q0, [0.0, 0.0], rtol=1e-9, atol=1e-9)
    assert default.position_residual.max() < rod_residual_bounds(default)[0]


def test_rod_force_balances_gravity_and_centripetal():
    # at the bottom with speed u: tension m g + m u^2 / l upward
    u = 1.7
    q, v = np.array([0.0, -L_]), np.array([u, 0.0])
    sysm = pendulum(False)
    r = go.solve_step(sysm, 0.0, q, v)
    # the step is verified to backward error 16 (n + m + 1) eps: step_error_bound gives
    # |a - a*| (~1e-13); the expected values themselves round to 2 eps relative
    M, F = sysm.mass(0.0, q), sysm.force(0.0, q, v)
    A, b = sysm.rows(0.0, q, v)
    da = step_error_bound(M, F, A, b, r.a, direct_tolerance(2, 1))
    Qc = M_ * G_ + M_ * u**2 / L_
    assert r.a == pytest.approx([0.0, u**2 / L_], abs=da + 2 * EPS * u**2 / L_)
    dQc = force_error_bound(M, F, r.a, da)
    assert r.constraint_force == pytest.approx([0.0, Qc], abs=dQc + 4 * EPS * Qc)
    # multiplier convention M a = F + A^T lam, A = 2 q^T
    dlam = multiplier_error_bound(A, r.constraint_force, dQc, direct_tolerance(2, 1))
    assert r.multipliers[0] * 2 * (-L_) == pytest.approx(Qc, abs=2 * L_ * dlam + 4 * EPS * Qc)
