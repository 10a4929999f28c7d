"""A ball rolling on a turntable (issue 32's problem list): a classic check of rolling in
space, with a circular Coulomb cone and a surface that moves.

A homogeneous sphere (mass m, radius r, inertia 2/5 m r^2) rolls without slipping on a
horizontal table turning at the rate Omega about the vertical axis through the origin.
Newton-Euler with the friction force f at the contact point and the no-slip condition
``v + w x (-r e_z) = Omega e_z x p`` give ``v' = (2/7) Omega e_z x v``: the velocity of the
centre turns at the constant rate ``w = 2 Omega / 7`` and the centre runs on a circle,
``v(t) = Rot(w t) v0`` and ``p(t) = p0 - J (v(t) - v0) / w`` (``J`` the quarter turn), with
the friction force ``f = m v'`` and the spin about the vertical constant. Written here in
closed form, independently of gaussopt.

The sphere is the hand-written body of tests/test_contact_cone.py (Euler parameters with
their normalization); the slip velocity is the lowest point's velocity minus the table's
surface velocity there. Tolerances: a smooth flow integrated at rtol = atol = 1e-12 over
a few hundred steps errs by the admitted local errors summed (~1e-10); 1e-8 on states
(as tests/test_contact_cone.py), forces of the phase's verified step to 1e-9 m g.
"""

from __future__ import annotations

import math

import numpy as np

import gaussopt as go
from test_contact_cone import E, G0, I_S, M_S, R_S, TOL, launch, omega, rigid

OMEGA = 2.0                      # the table's rate [rad/s]
MU = 0.3


def ball_on_turntable():
    def slip_velocity(t, q, v):
        w = 2 * E(q[3:7]) @ v[3:7]
        # the lowest point's velocity (v + w x (0, 0, -r)) minus the table's, Omega e_z x p
        return np.array([[v[0] - R_S * w[1] + OMEGA * q[1],
                          v[1] + R_S * w[0] - OMEGA * q[0]]])

    table = go.Contact(lambda t, q: np.array([q[2] - R_S]), slip_velocity=slip_velocity,
                       friction=MU, rheonomic=False, name="table")
    return rigid(M_S, I_S, table, [0.0, 0.0, -M_S * G0, 0.0, 0.0, 0.0, 0.0])


def test_ball_on_a_turntable_circles_at_two_sevenths_of_its_rate():
    p0, v0, wz = np.array([0.3, 0.0]), np.array([0.0, 0.2]), 1.5
    # rolling without slip at t = 0: v0 + w x (0, 0, -r) = Omega e_z x p0
    w0 = [(OMEGA * p0[0] - v0[1]) / R_S, (v0[0] + OMEGA * p0[1]) / R_S, wz]
    q0, u0 = launch(R_S, [*v0, 0.0], w0)
    q0[:2] = p0
    t_end = 2.0
    tr = go.simulate(ball_on_turntable(), (0.0, t_end), q0, u0, **TOL,
                     t_eval=np.linspace(0.0, t_end, 81))
    assert tr.success, tr.message
    assert {x[2] for x in tr.meta["contact_transitions"]} == {"close stick"}
    w = 2 * OMEGA / 7
    J = np.array([[0.0, -1.0], [1.0, 0.0]])
    c, s = np.cos(w * tr.t), np.sin(w * tr.t)
    v_ref = np.stack([c * v0[0] - s * v0[1], s * v0[0] + c * v0[1]], axis=1)
    p_ref = p0 - (v_ref - v0) @ J.T / w
    np.testing.assert_allclose(tr.q[:, :2], p_ref, rtol=0, atol=1e-8)
    np.testing.assert_allclose(tr.v[:, :2], v_ref, rtol=0, atol=1e-8)
    np.testing.assert_allclose(tr.q[:, 2], R_S, rtol=0, atol=1e-8)
    # the spin about the vertical is constant (the friction's moment is horizontal)
    wz_run = np.array([omega(q, v)[2] for q, v in zip(tr.q, tr.v)])
    np.testing.assert_allclose(wz_run, wz, rtol=0, atol=1e-8)
    # the forces: N = m g, the friction f = m v' = m w J v, inside the cone
    np.testing.assert_allclose(tr.contact_forces[:, 0], M_S * G0, rtol=1e-9)
    f_ref = M_S * w * v_ref @ J.T
    np.testing.assert_allclose(tr.friction_forces[:, 0, :], f_ref, rtol=0,
                               atol=1e-9 * M_S * G0)
    assert np.all(np.hypot(*tr.friction_forces[:, 0, :].T) <= MU * tr.contact_forces[:, 0])
    # a sanity check of the reference itself: the centre's circle has the radius |v0| / w
    centre = p0 + J @ v0 / w
    np.testing.assert_allclose(np.hypot(*(p_ref - centre).T), np.linalg.norm(v0) / w,
                               rtol=1e-12)
    assert math.isclose(np.linalg.norm(v_ref[-1]), np.linalg.norm(v0), rel_tol=1e-12)
