"""The spatial multibody core (gaussopt.multibody.spatial): kinematics of Euler
parameters, every joint's equations against their geometric meaning, exact
Jacobians and convective terms against differences, the mass matrix against the
kinetic energy of a cloud of particles, and bad input.

The mechanisms with independent dynamic references (free body, heavy top, RSSR,
Bricard, delta robot, MJCF/URDF models against MuJoCo and Pinocchio) have their own
test modules."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.exceptions import ModelError
import gaussopt.multibody.spatial as sp

RNG = np.random.default_rng(20261128)


def _rq(rng=RNG):
    e = rng.normal(size=4)
    return e / np.linalg.norm(e)


def _axis_angle(u, th):
    u = np.asarray(u, float) / np.linalg.norm(u)
    return np.r_[np.cos(th / 2), np.sin(th / 2) * u]


def _qmul(a, b):
    a0, av, b0, bv = a[0], a[1:], b[0], b[1:]
    return np.r_[a0 * b0 - av @ bv, a0 * bv + b0 * av + np.cross(av, bv)]


def _rodrigues(u, th):
    u = np.asarray(u, float) / np.linalg.norm(u)
    K = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return np.eye(3) + np.sin(th) * K + (1 - np.cos(th)) * K @ K


def test_rotation_matrix_and_quaternion_agree_with_rodrigues():
    # independent: Rodrigues' formula; both sides exact to rounding (|entries| <= 1): 1e-14
    for _ in range(20):
        u, th = RNG.normal(size=3), RNG.uniform(-np.pi, np.pi)
        R = _rodrigues(u, th)
        assert np.abs(sp.rotation_matrix(_axis_angle(u, th)) - R).max() < 1e-14
        e = sp.quaternion(R)
        assert np.abs(sp.rotation_matrix(e) - R).max() < 1e-14


def _model_all_joints():
    b1 = sp.Body("a", 2.0, [[0.3, 0.01, 0.02], [0.01, 0.4, 0.03], [0.02, 0.03, 0.5]],
                 position=(0.1, 0.2, 0.3), orientation=_rq())
    b2 = sp.Body("b", 1.5, (0.1, 0.2, 0.25), position=(0.5, -0.2, 0.1), orientation=_rq())
    b3 = sp.Body("c", 1.0, (0.1, 0.1, 0.15), position=(0.9, 0.3, -0.2), orientation=_rq())
    joints = [sp.Revolute(None, b1, (0, 0, 0.3), (0, 0.3, 1)), sp.Spherical(b1, b2, (0.3, 0, 0.2)),
              sp.Universal(b2, b3, (0.7, 0, 0), (1, 0, 0), (0, 1, 0)),
              sp.Cylindrical(None, b3, (0.9, 0.3, -0.2), (1, 1, 0)),
              sp.Prismatic(b1, b3, (0, 0, 0), (0, 0, 1)), sp.Planar(b2, b3, (0, 0, 0), (0, 1, 1)),
              sp.PointOnLine(None, b2, (0, 0, 1), (1, 0, 0)),
              sp.PointOnPlane(b1, b2, (0, 1, 0), (0, 0, 1)), sp.Distance(b1, b3, (0, 0, 0), (1, 1, 1)),
              sp.Fixed(b2, b3), sp.DrivenAngle(b1, b2, (0, 0, 1), 0.3)]
    forces = [sp.Spring(b1, b2, (0, 0, 0), (1, 0, 0), 10.0, 0.5, 0.3),
              sp.Force(b2, (1, 2, 3), point=(0.5, 0.5, 0.5)),
              sp.Torque(b1, (0.1, 0.2, 0.3), reaction=b3), sp.RotationalDamper(b1, b2, (0, 0, 1), 0.7)]
    return sp.Model([b1, b2, b3], joints, forces, gravity=(0, 0, -9.81))


def test_jacobian_and_gamma_of_every_joint_equal_differences_of_phi():
    model = _model_all_joints()
    q = np.concatenate([np.r_[RNG.normal(size=3), _rq()] for _ in range(3)])
    v = RNG.normal(size=model.n)
    A, g = model.rows(0.0, q, v)
    # central differences, h = 1e-6: truncation h^2 |phi'''| / 6 ~ 1e-12 and rounding
    # eps |phi| / h ~ 1e-10 for |phi| ~ 1: bound 1e-8 relative to max |A|
    h = 1e-6
    Afd = np.array([(model.phi(0, q + h * e) - model.phi(0, q - h * e)) / (2 * h)
                    for e in np.eye(model.n)]).T
    assert np.abs(A - Afd).max() < 1e-8 * np.abs(A).max()
    # d^2/ds^2 phi(q + s v) = -gamma (a = 0): second difference, h = 1e-4: truncation
    # h^2 |phi''''| / 12 ~ 1e-8 |v|^4, rounding 4 eps |phi| / h^2 ~ 1e-7: 1e-5 of max |gamma|
    h = 1e-4
    d2 = (model.phi(0, q + h * v) - 2 * model.phi(0, q) + model.phi(0, q - h * v)) / h ** 2
    assert np.abs(-g - d2).max() < 1e-5 * np.abs(g).max()


def test_joint_equations_vanish_on_their_motions_and_not_off_them():
    # independent of the kernel: bodies moved by rigid motions that a joint allows
    body = sp.Body("b", 1.0, (1, 1, 1), position=(1.0, 0.5, 0.2), orientation=_rq())
    P, u = np.array([0.3, 0.2, 0.1]), np.array([0.2, -0.4, 1.0]) / np.linalg.norm([0.2, -0.4, 1.0])
    r0, e0 = body.reference_position, body.reference_quaternion

    def moved(rot_axis, th, shift):
        # rotate about the line through P along rot_axis by th, then translate by shift
        R = _rodrigues(rot_axis, th)
        return np.r_[P + R @ (r0 - P) + shift, _qmul(_axis_angle(rot_axis, th), e0)]

    w = np.cross(u, [1.0, 0, 0])
    w /= np.linalg.norm(w)
    cases = [  # joint, an allowed motion, a forbidden one
        (sp.Spherical(None, body, P), moved(RNG.normal(size=3), 0.7, 0), moved(u, 0, 0.01 * u)),
        (sp.Revolute(None, body, P, u), moved(u, 1.1, 0), moved(w, 0.01, 0)),
        (sp.Cylindrical(None, body, P, u), moved(u, 1.1, 0.3 * u), moved(u, 0, 0.01 * w)),
        (sp.Prismatic(None, body, P, u), moved(u, 0, 0.4 * u), moved(u, 0.01, 0)),
        (sp.Planar(None, body, P, u), moved(u, 0.8, 0.5 * w), moved(u, 0, 0.01 * u)),
        (sp.PointOnLine(None, body, P, u), moved(RNG.normal(size=3), 0.9, 0.3 * u), moved(u, 0, 0.01 * w)),
        (sp.PointOnPlane(None, body, P, u), moved(RNG.normal(size=3), 0.9, 0.3 * w), moved(u, 0, 0.01 * u)),
        (sp.Fixed(None, body), moved(u, 0, 0), moved(u, 0.01, 0)),
        (sp.Universal(None, body, P, w, np.cross(u, w)), moved(w, 0.5, 0), moved(u, 0.01, 0)),
    ]
    # allowed motions: Phi sums products of O(1) unit vectors and lengths, so it is zero
    # to a few eps (~1e-15): bound 1e-14; forbidden ones move it by ~0.01 * O(1): > 1e-5
    for joint, ok, bad in cases:
        model = sp.Model([body], [joint])
        assert np.abs(model.phi(0, ok)).max() < 1e-14, type(joint).__name__
        assert np.abs(model.phi(0, bad)).max() > 1e-5, type(joint).__name__
    # the distance keeps |P_j - P_i| = L: rotate about the ground point
    Q = np.array([0.0, 0.0, 0.0])
    model = sp.Model([body], [sp.Distance(None, body, Q, P)])
    R = _rodrigues([1, 2, 3], 0.8)
    q = np.r_[R @ r0, _qmul(_axis_angle([1, 2, 3], 0.8), e0)]
    assert abs(model.phi(0, q)[1]) < 1e-14


def test_driven_angle_equals_the_relative_rotation():
    a = sp.Body("a", 1.0, (1, 2, 3), orientation=_rq())
    b = sp.Body("b", 1.0, (1, 2, 3), position=(0, 0, 1), orientation=_rq())
    u = np.array([1.0, 2.0, 2.0]) / 3.0
    # Phi = sin(theta - c): zero to a few eps of its O(1) terms (bound 1e-15 absolute at
    # theta = c, where the terms cancel exactly up to rounding of cos/sin: ~2 eps); off by
    # 0.1 it is sin(0.1) to the same rounding, 1e-12 relative
    for th in (0.3, -2.0, 3.0):
        model = sp.Model([a, b], [sp.DrivenAngle(a, b, u, th)])
        qb = _qmul(_axis_angle(u, th), b.reference_quaternion)
        q = np.r_[0, 0, 0, a.reference_quaternion, 0, 0, 1, qb]
        assert abs(model.phi(0, q)[-1]) < 1e-15
        qb = _qmul(_axis_angle(u, th + 0.1), b.reference_quaternion)
        q[10:] = qb
        assert model.phi(0, q)[-1] == pytest.approx(np.sin(0.1), rel=1e-12)


def test_mass_matrix_is_the_kinetic_energy_of_a_particle_cloud():
    # independent: eight particles with the body's mass, centroid and inertia tensor;
    # their velocities from differences of the rotation matrix along the motion
    rng = np.random.default_rng(7)
    X = rng.normal(size=(8, 3))
    X -= X.mean(axis=0)
    mk = np.full(8, 0.25)
    J = sum(m_ * ((x @ x) * np.eye(3) - np.outer(x, x)) for m_, x in zip(mk, X))
    body = sp.Body("b", mk.sum(), J)
    model = sp.Model([body], [])
    for _ in range(5):
        q = np.r_[rng.normal(size=3), _rq(rng)]
        v = rng.normal(size=7)
        v[3:] -= (v[3:] @ q[3:]) * q[3:]      # tangent to the unit sphere
        h = 1e-6
        qp, qm = q + h * v, q - h * v
        Rd = (sp.rotation_matrix(qp[3:] / np.linalg.norm(qp[3:]))
              - sp.rotation_matrix(qm[3:] / np.linalg.norm(qm[3:]))) / (2 * h)
        T = 0.5 * sum(m_ * np.sum((v[:3] + Rd @ x) ** 2) for m_, x in zip(mk, X))
        # difference truncation ~ h^2 ~ 1e-12, rounding eps / h ~ 1e-10: 1e-8 relative
        assert 0.5 * v @ model.mass(0, q) @ v == pytest.approx(T, rel=1e-8)
        assert model.energy(0, q, v) == pytest.approx(T, rel=1e-8)
        w = np.linalg.eigvalsh(model.mass(0, q))
        assert abs(w[0]) < 1e-14 * w[-1] and w[1] > 1e-3 * w[-1]    # rank 6 of 7


def test_spherical_pendulum_step_and_pin_reaction():
    # analytic: a uniform rod (1 kg, 1 m) released horizontally from a ball joint at its
    # end: alpha = 3 g / (2 l), pin force m g - m alpha l / 2 = m g / 4 upward
    rod = sp.Body.uniform_rod("rod", 1.0, start=(0, 0, 0), end=(1, 0, 0))
    model = sp.Model([rod], [sp.Revolute(None, rod, (0, 0, 0), (0, 1, 0))], gravity=(0, 0, -9.81))
    q0, v0 = model.initial_state()
    step = go.solve_step(model.system, 0.0, q0, v0)
    alpha = model.angular_acceleration(rod, q0, v0, step.a)
    # a verified direct step: backward error ~16 (n + m) eps on O(10) data, i.e. ~1e-13
    # absolute for accelerations and forces of size ~10: bound 1e-12
    assert alpha == pytest.approx([0.0, 1.5 * 9.81, 0.0], abs=1e-12)
    (r,) = model.reactions(0.0, q0, step)
    assert r.force == pytest.approx([0, 0, 9.81 / 4], abs=1e-12)
    assert r.torque_local[2] == pytest.approx(0.0, abs=1e-12)       # a hinge has no torque about its axis
    rep = model.rank_report(q0)
    assert (rep.gruebler, rep.rank, rep.dof, rep.redundant) == (1, 6, 1, [])


def test_redundant_hinges_are_reported():
    # a door on two coaxial hinges: 6 - 10 = -4 by Gruebler-Kutzbach, 1 in truth
    door = sp.Body("door", 20.0, (2.0, 1.5, 0.6), position=(0.4, 0, 1.0))
    joints = [sp.Revolute(None, door, (0, 0, 0.2), (0, 0, 1)), sp.Revolute(None, door, (0, 0, 1.8), (0, 0, 1))]
    model = sp.Model([door], joints, gravity=(0, 0, -9.81))
    rep = model.rank_report()
    assert (rep.gruebler, rep.dof, len(rep.redundant)) == (-4, 1, 5)
    q0, v0 = model.initial_state(prescribed_velocities={"door.wz": 1.0})
    assert model.angular_velocity(door, q0, v0) == pytest.approx([0, 0, 1.0], abs=1e-14)
    res = go.simulate(model.system, (0, 1.0), q0, v0, rtol=1e-10, atol=1e-10)
    assert res.success
    # a door turning about a vertical axis with gravity along it: w stays 1 (exact);
    # the integration error is ~ rtol
    W = model.angular_velocity(door, res.q, res.v)
    assert np.abs(W - [0, 0, 1.0]).max() < 1e-8
    reacts = model.reactions(0.0, q0, go.solve_step(model.system, 0.0, q0, v0))
    assert not reacts[0].unique and not reacts[1].unique
    # the total of a redundant group is unique: the step's constraint force, to the step's
    # backward error ~16 (n + m) eps on O(200) N data (~1e-12): bound 1e-10
    total = reacts[0].force + reacts[1].force
    # the two hinges carry the weight and the centripetal force m w^2 r together
    assert total == pytest.approx([-20.0 * 0.4, 0, 20.0 * 9.81], abs=1e-10)


def test_pickled_model_steps_the_same():
    model = _model_all_joints()
    q = np.concatenate([np.r_[RNG.normal(size=3), _rq()] for _ in range(3)])
    v = RNG.normal(size=model.n)
    sysm = pickle.loads(pickle.dumps(model.system))
    assert np.array_equal(sysm.mass(0.0, q), model.mass(0.0, q))
    assert np.array_equal(sysm.force(0.0, q, v), model.force(0.0, q, v))
    assert np.array_equal(go.solve_step(sysm, 0.0, q, v, check=False).a if False else
                          sysm.constraints[0].rows(0.0, q, v)[0], model.rows(0.0, q, v)[0])


def test_bad_input_is_named():
    with pytest.raises(ModelError, match="mass"):
        sp.Body("a", -1.0, (1, 1, 1))
    with pytest.raises(ModelError, match="triangle"):
        sp.Body("a", 1.0, (1, 1, 3))
    with pytest.raises(ModelError, match="rotation"):
        sp.Body("a", 1.0, (1, 1, 1), orientation=np.diag([1.0, 1.0, -1.0]))
    a = sp.Body("a", 1.0, (1, 1, 1))
    with pytest.raises(ModelError, match=r"joints\[0\].body_j names body 'zz'"):
        sp.Model([a], [sp.Spherical(a, "zz", (0, 0, 0))])
    with pytest.raises(ModelError, match="nonzero"):
        sp.Model([a], [sp.Revolute(None, a, (0, 0, 0), (0, 0, 0))])
    with pytest.raises(ModelError, match="perpendicular"):
        sp.Model([a], [sp.Universal(None, a, (0, 0, 0), (1, 0, 0), (1, 1, 0))])
    with pytest.raises(ModelError, match="unique"):
        sp.Model([a, sp.Body("a", 1.0, (1, 1, 1))])
    with pytest.raises(ModelError, match="unknown velocity component 'a.vq'"):
        sp.Model([a]).velocities(np.r_[0, 0, 0, 1.0, 0, 0, 0], {"a.vq": 1.0})
    with pytest.raises(ModelError, match="gravity"):
        sp.Model([a], gravity=(0, -9.81))


# (the door example of docs/spatial.md, formerly the README's, and its energy integral are
# checked by tests/test_docs.py::check_spatial)
