"""Cartesian pendulum against its exact period (complete elliptic integral).

m = 2 kg, l = 1.5 m (not 1, so a missing factor of m or l shows), released at
rest 60 degrees from the downward vertical. The period is
T = 4 sqrt(l/g) K(k^2), k = sin(theta0/2). The simulated period is measured as
twice the time of the first zero of the x-velocity (the pendulum reaches the
opposite extreme), located by Brent's method on the integrator's dense output.
"""

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import ellipk

import gaussopt as go

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
    # samples every 1e-3 s: the Hermite root is accurate to ~h^4 |v''''| ~ 1e-11
    t_eval = np.linspace(0, 1.6, 1601)
    tr = go.simulate(pendulum(auto), (0.0, 1.6), Q0, [0.0, 0.0], rtol=1e-12, atol=1e-12,
                     t_eval=t_eval)
    assert tr.success, tr.message
    T = measured_period(tr)
    assert abs(T - T_EXACT) / T_EXACT < 1e-8, (T, T_EXACT)
    # energy is conserved by the exact motion
    assert np.abs(tr.energy_drift).max() < 1e-9 * M_ * G_ * L_


def test_projection_keeps_position_residual_below_1e12():
    tr = go.simulate(pendulum(False), (0.0, 10.0), Q0, [0.0, 0.0], rtol=1e-9, atol=1e-9,
                     stabilization=go.Projection())
    assert tr.success, tr.message
    assert tr.position_residual.max() < 1e-12
    assert tr.velocity_residual.max() < 1e-12
    # and the motion is still the pendulum's: the period over 10 s at loose tolerance
    free = go.simulate(pendulum(False), (0.0, 10.0), Q0, [0.0, 0.0], rtol=1e-9, atol=1e-9,
                       stabilization=None)
    assert free.position_residual.max() > 10 * tr.position_residual.max()
    # the default stabilization is the projection
    default = go.simulate(pendulum(False), (0.0, 10.0), Q0, [0.0, 0.0], rtol=1e-9, atol=1e-9)
    assert default.position_residual.max() < 1e-12


def test_rod_force_balances_gravity_and_centripetal():
    # at the bottom with speed u: tension m g + m u^2 / l upward
    u = 1.7
    r = go.solve_step(pendulum(False), 0.0, [0.0, -L_], [u, 0.0])
    assert r.a == pytest.approx([0.0, u**2 / L_], abs=1e-12)
    assert r.constraint_force == pytest.approx([0.0, M_ * G_ + M_ * u**2 / L_], rel=1e-13)
    # multiplier convention M a = F + A^T lam, A = 2 q^T
    assert r.multipliers[0] * 2 * (-L_) == pytest.approx(M_ * G_ + M_ * u**2 / L_, rel=1e-13)
