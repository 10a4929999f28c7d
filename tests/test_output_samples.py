"""The output samples of a run with ``t_eval`` (the README's pendulum): the sampled
states against the exact motion at those times, and every diagnostic recomputed at a
sample (accelerations, constraint force, multiplier, residuals, energy) against its
closed form evaluated independently on the sampled state."""

from __future__ import annotations

import numpy as np

import gaussopt as go
import gaussopt.integrate.sample_interpolation as SI
from test_trajectory import (EPS, EXACT_ERR, G_P, L_P, M_P, Q0, V0, exact_state,
                             integration_bound, pendulum, pendulum_growth, rod_bounds)


def test_samples_against_exact_motion_and_closed_forms():
    t_eval = np.linspace(0.0, 3.0, 3001)
    tr = go.simulate(pendulum(), (0.0, 3.0), Q0, V0, rtol=1e-10, atol=1e-10, t_eval=t_eval)
    assert tr.success, tr.message
    np.testing.assert_array_equal(tr.t, t_eval)
    # the states: the run's error bound (dense output, the exact flow's growth) plus the
    # exact solution's own error
    bound = integration_bound(tr, pendulum_growth(t_eval), dense=True) + EXACT_ERR
    err = np.abs(np.hstack([tr.q, tr.v]) - exact_state(t_eval)).max()
    assert err < bound, (err, bound)
    # the diagnostics at each sample, from the sampled (q, v) by the closed forms of a point
    # mass on the rod q.q = l^2: a = g + lam' q with lam' = -(v.v + q.g) / (q.q), the
    # constraint force M a - F = m lam' q, the residuals q.q - l^2 and 2 q.v, the energy
    q, v = tr.q, tr.v
    g = np.array([0.0, -G_P])
    qq, vv, qg = (q * q).sum(1), (v * v).sum(1), q @ g
    lam = -(vv + qg) / qq
    a = g + lam[:, None] * q
    # the engine's b is the automatic gamma -2 v.v, a 4th-order difference at step 1e-3 of
    # exact complex-step derivatives: its rounding is 18 eps / 12e-3 = 1.5e3 eps of
    # |v|^2 |q|-sized terms; divided by |A| = 2|q| and with the step's own rounding (a few
    # eps of |a|): 2e3 eps (|v|^2 + |g| |q|) / |q| per component
    tol_a = 2e3 * EPS * (vv + G_P * np.sqrt(qq)) / np.sqrt(qq)
    assert np.all(np.abs(tr.a - a).max(axis=1) <= tol_a)
    assert np.all(np.abs(tr.constraint_force - M_P * (a - g)).max(axis=1) <= M_P * (tol_a + 4 * EPS * G_P))
    # the residuals and the energy: the model's own formulas on the same state at an output
    # recomputed exactly (to the rounding of their few operations, 4 eps of their terms);
    # this run has ~60 outputs per step, most interpolated from 10 recomputed ones
    # (gaussopt.integrate.sample_interpolation): those values times the nodes' Lebesgue
    # constant (below 4), and the state's distance from its projection, within
    # STATE_TOL (1 + max|y|) (checked), times the formula's gradient (2 |q| for the
    # residual, m (|v|_1 + g) for the energy)
    assert tr.stats["samples_interpolated"] > 0
    lebesgue = 4.0
    off_q = SI.STATE_TOL * (1 + np.abs(q).max(axis=1))
    off_v = SI.STATE_TOL * (1 + np.abs(v).max(axis=1))
    np.testing.assert_array_less(np.abs(tr.position_residual - np.abs(qq - L_P**2)),
                                 (1 + lebesgue) * 4 * EPS * 2 * L_P**2 + 2 * np.sqrt(qq) * off_q)
    # 2 q.v: the projection's target on the velocities plus rounding (rod_bounds), times
    # the Lebesgue constant at an interpolated output
    assert np.all(tr.velocity_residual <= lebesgue * rod_bounds(tr)[1].max())
    energy = 0.5 * M_P * vv + M_P * G_P * q[:, 1]
    terms = 0.5 * M_P * vv.max() + M_P * G_P * L_P
    grad = M_P * (np.abs(v).sum(axis=1) + G_P)
    np.testing.assert_array_less(np.abs(tr.energy - energy),
                                 (1 + lebesgue) * 4 * EPS * terms + grad * (off_q + off_v))
    assert np.all(tr.rank == 1)
