"""The spatial :class:`~gaussopt.multibody.spatial.Armature` (a rotor's inertia about a
hinge between two moving bodies: kinetic energy ``a (u . (w_j - w_i))^2 / 2``) against an
independent reference: a double pendulum of two rods on parallel hinges about ``y``,
whose Lagrange equations in the absolute angles ``phi1, phi2`` are written out below
(the rods move in the x-z plane). MuJoCo's ``qacc`` with joint ``armature`` is compared
in ``tests/test_mjcf.py`` (``double_pendulum_armature.xml``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
import gaussopt.multibody.spatial as sp

m, L, r, g, ARM = 1.2, 0.8, 0.02, 9.81, 0.07
I = m * L * L / 12 + m * r * r / 4          # about the hinge axis y (solid cylinder)
A_, B_, C_ = I + 1.25 * m * L * L, I + 0.25 * m * L * L, 0.5 * m * L * L


def reduced(phi, dphi, a=ARM):
    """``phi''`` of the reference. With ``d = phi2 - phi1``:
    ``T = A phi1'^2/2 + B phi2'^2/2 + C cos(d) phi1' phi2' + a (phi2' - phi1')^2/2``
    (``A = I + 5 m L^2/4``, ``B = I + m L^2/4``, ``C = m L^2/2``), ``V = -m g L (3/2 sin
    phi1 + 1/2 sin phi2)`` (``z = -x sin phi`` for a rotation by ``phi`` about ``y``):
    ``[[A + a, C cos d - a], [C cos d - a, B + a]] phi'' = [C sin(d) phi2'^2 + 3/2 m g L
    cos phi1, -C sin(d) phi1'^2 + 1/2 m g L cos phi2]``."""
    d = phi[1] - phi[0]
    M = np.array([[A_ + a, C_ * np.cos(d) - a], [C_ * np.cos(d) - a, B_ + a]])
    rhs = np.array([C_ * np.sin(d) * dphi[1] ** 2 + 1.5 * m * g * L * np.cos(phi[0]),
                    -C_ * np.sin(d) * dphi[0] ** 2 + 0.5 * m * g * L * np.cos(phi[1])])
    return np.linalg.solve(M, rhs)


def model(a=ARM):
    rods = [sp.Body(f"rod{k}", m, (0.5 * m * r * r, I, I), position=((k + 0.5) * L, 0, 0))
            for k in range(2)]
    joints = [sp.Revolute(None, "rod0", (0, 0, 0), (0, 1, 0)),
              sp.Revolute("rod0", "rod1", (L, 0, 0), (0, 1, 0))]
    return sp.Model(rods, joints, forces=[sp.Armature("rod0", "rod1", (0, 1, 0), a)],
                    gravity=(0, 0, -g), name="armature_pendulum")


def state(phi, dphi):
    """Body coordinates of the absolute angles (rotations about ``y``)."""
    q, v = np.zeros(14), np.zeros(14)
    t1 = np.array([np.cos(phi[0]), 0.0, -np.sin(phi[0])])
    dt1 = dphi[0] * np.array([-np.sin(phi[0]), 0.0, -np.cos(phi[0])])
    for k in range(2):
        t = np.array([np.cos(phi[k]), 0.0, -np.sin(phi[k])])
        dt = dphi[k] * np.array([-np.sin(phi[k]), 0.0, -np.cos(phi[k])])
        q[7 * k:7 * k + 3] = (L * t1 if k else 0.0) + 0.5 * L * t
        v[7 * k:7 * k + 3] = (L * dt1 if k else 0.0) + 0.5 * L * dt
        h = 0.5 * phi[k]
        q[7 * k + 3:7 * k + 7] = [np.cos(h), 0.0, np.sin(h), 0.0]
        v[7 * k + 3:7 * k + 7] = 0.5 * dphi[k] * np.array([-np.sin(h), 0.0, np.cos(h), 0.0])
    return q, v


def test_step_equals_the_reduced_equations():
    """At 10 random states the angular accelerations about ``y`` equal the reference's
    ``phi''``. Both are direct solves of well-conditioned systems (gaussopt's verified to
    backward error ~1e-14, cond of the scaled KKT system ~1e2): 1e-11 relative. The
    armature matters: without it the accelerations differ by ~1e-2 relative."""
    mdl = model()
    rng = np.random.default_rng(12)
    for _ in range(10):
        phi, dphi = rng.uniform(-np.pi, np.pi, 2), rng.uniform(-3, 3, 2)
        q, v = state(phi, dphi)
        assert np.max(np.abs(mdl.phi(0.0, q))) < 1e-14
        step = go.solve_step(mdl.system, 0.0, q, v)
        got = np.array([mdl.angular_acceleration(f"rod{k}", q, v, step.a)[1] for k in range(2)])
        ref = reduced(phi, dphi)
        assert np.max(np.abs(got - ref)) <= 1e-11 * np.max(np.abs(ref))
        assert np.max(np.abs(reduced(phi, dphi, 0.0) - ref)) > 1e-3 * np.max(np.abs(ref))


def test_run_against_the_reduced_equations_and_energy():
    """2 s at rtol = atol = 1e-12 against the reference integrated by DOP853 at 1e-13:
    the angles agree to 1e3 rtol (the bound on the global error of the tolerance sweep,
    test_trust.py), 1e-9 rad (measured ~1e-12); the energy (with the armature's ``a theta'^2 / 2``) is conserved to the
    projection's and the integrator's errors, 1e-9 relative."""
    mdl = model()
    phi0, dphi0 = np.array([0.3, -0.4]), np.array([0.0, 1.5])
    q0, v0 = state(phi0, dphi0)
    tr = go.simulate(mdl.system, (0.0, 2.0), q0, v0, rtol=1e-12, atol=1e-12)
    assert tr.success, tr.message
    sol = solve_ivp(lambda t, y: np.r_[y[2:], reduced(y[:2], y[2:])], (0.0, 2.0),
                    np.r_[phi0, dphi0], method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True)
    ref = sol.sol(tr.t)[:2]
    # phi from the bodies' rotations about y: R[0, 0] = cos phi, R[2, 0] = -sin phi
    got = np.array([[np.arctan2(-R[2, 0], R[0, 0]) for R in mdl.rotation(f"rod{k}", tr.q)]
                    for k in range(2)])
    err = np.abs(np.angle(np.exp(1j * (got - ref))))
    assert err.max() <= 1e-9
    E = np.array([mdl.energy(0.0, q, v) for q, v in zip(tr.q, tr.v)])
    assert np.max(np.abs(E - E[0])) <= 1e-9 * np.max(np.abs(E))


def test_armature_takes_the_dense_step_and_checks_its_input():
    """An armature couples two bodies' blocks of M: no O(n) path (its mass is not block
    diagonal); bad values are named."""
    assert model().system.sparse is None
    with pytest.raises(go.ModelError, match=r"forces\[0\]: `inertia` must be finite and >= 0"):
        model(a=-1.0)
