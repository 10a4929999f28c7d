"""Mocap bodies in motion (issue 31: "mocap bodies follow a prescribed motion ... as
rheonomic constraints"), on the joint-coordinate kind, against references that share no
code with the kernel's rows:

* a body hanging by a ball-and-socket (``connect``) from a mocap body swung sideways,
  ``x(t) = A sin(w t)``: its rotation about the pivot obeys the reduced equation ``I_p th''
  = -m g d sin th - m d x'' cos th`` (``I_p`` the inertia about the pivot), integrated here by
  scipy at ``rtol = 1e-13``; built by hand and loaded from MJCF;
* a body welded to a mocap body that translates and turns about a fixed axis: its pose,
  velocity and acceleration are the mocap frame's, written out here (``a = x'' + al x r + w
  x (w x r)`` and ``e'' = (al e + w e') / 2`` in quaternion products), both for one step and
  along a run;
* the rows' ``Phi_t`` and ``gamma`` against finite differences (:meth:`System.check`);
* the errors: unknown names, parts without their derivatives, values of the wrong shape, a
  mocap body carrying a jointed link.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.multibody import tree
from rolling_disk_reference import _quat_mul as _qmul, _rotmat as _rot
from test_step_properties import solver_tolerance, step_error_bound

M_, D_, G_ = 1.3, 0.4, 9.81
IC = np.diag([0.02, 0.03, 0.01])
AMP, OMEGA = 0.1, 3.0
T_END = 2.0

SWING = tree.MocapMotion(
    position=lambda t: [AMP * np.sin(OMEGA * t), 0.0, 1.0],
    velocity=lambda t: [AMP * OMEGA * np.cos(OMEGA * t), 0.0, 0.0],
    acceleration=lambda t: [-AMP * OMEGA ** 2 * np.sin(OMEGA * t), 0.0, 0.0])

CARRIED = """
<mujoco model="carried">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="hand" mocap="true" pos="0 0 1">
      <geom type="sphere" size="0.02" contype="0" conaffinity="0"/>
    </body>
    <body name="bob" pos="0 0 0.6">
      <freejoint name="f"/>
      <inertial pos="0 0 0" mass="1.3" diaginertia="0.02 0.03 0.01"/>
    </body>
  </worldbody>
  <equality><connect body1="bob" body2="hand" anchor="0 0 0.4"/></equality>
</mujoco>"""


def _built() -> tree.Model:
    links = [tree.Link("bob", None, position=(0, 0, 1 - D_), mass=M_, inertia=IC),
             tree.Mocap("hand", position=(0, 0, 1))]
    joints = [tree.TreeJoint("f", "free", "bob"),
              tree.Connect("bob", (0, 0, D_), "hand", (0, 0, 0))]
    return tree.Model(links, joints, gravity=(0, 0, -G_))


def _loaded() -> tree.Model:
    pytest.importorskip("mujoco")
    from gaussopt.multibody import load
    import gaussopt.multibody.io.mjcf as mjcf
    with pytest.warns(mjcf.UnmappedFeatureWarning, match="solref"):
        return load(CARRIED)


def _swing_reference() -> float:
    """The angle th(T_END) of the reduced equation (the body's centroid at ``pivot + d (sin
    th, 0, -cos th)``), from rest with the pivot moving at ``A w``."""
    Ip = IC[1, 1] + M_ * D_ ** 2

    def f(t, y):
        xdd = -AMP * OMEGA ** 2 * np.sin(OMEGA * t)
        return [y[1], (-M_ * G_ * D_ * np.sin(y[0]) - M_ * D_ * xdd * np.cos(y[0])) / Ip]

    sol = solve_ivp(f, (0.0, T_END), [0.0, 0.0], method="DOP853", rtol=1e-13, atol=1e-13)
    return float(sol.y[0, -1])


@pytest.mark.parametrize("make", [_built, _loaded], ids=["built", "mjcf"])
def test_a_body_hanging_from_a_swung_mocap_body_follows_the_reduced_equation(make):
    model = make()
    assert model.mocap_names == ("hand",)
    assert (model.n, model.m) == (7, 4)
    sysm = model.moved({"hand": SWING})
    q0 = model.q_reference.copy()
    v0 = np.zeros(model.n)
    v0[0] = AMP * OMEGA                  # the body moves with the pivot at t = 0 (th' = 0)
    sysm.check(0.3, q0, v0)              # Phi_t, Phi_q, gamma against finite differences
    tr = go.simulate(sysm, (0.0, T_END), q0, v0, rtol=1e-11, atol=1e-11)
    assert tr.success, tr.message
    th = _swing_reference()
    centre = [AMP * np.sin(OMEGA * T_END) + D_ * np.sin(th), 0.0, 1.0 - D_ * np.cos(th)]
    # rtol = atol = 1e-11 per step over ~1.5 periods of a motion that amplifies errors
    # little: a global error of 1e3 times the local tolerance bounds it (the reference's own
    # error, at 1e-13, is 100 times smaller)
    np.testing.assert_allclose(tr.q[-1, :3], centre, rtol=0, atol=1e-8)
    e = tr.q[-1, 3:]
    # the body turns about y by -th (it hangs along -z; th measured towards +x)
    assert abs(2 * np.arctan2(e[2], e[0]) + th) < 1e-8
    assert np.abs(tr.position_residual).max() < 1e-9


AXIS = np.array([1.0, 2.0, 2.0]) / 3.0
S_OFF = np.array([0.2, 0.1, -0.3])                 # the plate's origin in the mocap frame
E_REL = np.array([np.cos(0.3), 0.0, np.sin(0.3), 0.0])   # the plate's frame in the mocap's


def _x(t):
    return np.array([0.3 * np.sin(2 * t), 0.1 * t * t, 1 + 0.05 * np.cos(3 * t)])


def _xd(t):
    return np.array([0.6 * np.cos(2 * t), 0.2 * t, -0.15 * np.sin(3 * t)])


def _xdd(t):
    return np.array([-1.2 * np.sin(2 * t), 0.2, -0.45 * np.cos(3 * t)])


def _phi(t):
    return 0.7 * np.sin(1.3 * t) + 0.4 * t, 0.91 * np.cos(1.3 * t) + 0.4, -1.183 * np.sin(1.3 * t)


def _e(t):
    f = _phi(t)[0]
    return np.concatenate([[np.cos(f / 2)], AXIS * np.sin(f / 2)])


TURN = tree.MocapMotion(position=_x, velocity=_xd, acceleration=_xdd, orientation=_e,
                        angular_velocity=lambda t: _phi(t)[1] * AXIS,
                        angular_acceleration=lambda t: _phi(t)[2] * AXIS)


def _plate_state(t):
    """The plate's q, v, a when welded to the turning mocap body, written out."""
    f, fd, fdd = _phi(t)
    w, al = fd * AXIS, fdd * AXIS
    r = _rot(_e(t)) @ S_OFF
    x = _x(t) + r
    xd = _xd(t) + np.cross(w, r)
    xdd = _xdd(t) + np.cross(al, r) + np.cross(w, np.cross(w, r))
    e = _qmul(_e(t), E_REL)
    ed = 0.5 * _qmul(np.concatenate([[0.0], w]), e)
    edd = 0.5 * (_qmul(np.concatenate([[0.0], al]), e) + _qmul(np.concatenate([[0.0], w]), ed))
    return np.concatenate([x, e]), np.concatenate([xd, ed]), np.concatenate([xdd, edd])


def _welded():
    q0 = _plate_state(0.0)[0]
    links = [tree.Mocap("hand", position=tuple(_x(0.0)), orientation=tuple(_e(0.0))),
             tree.Link("plate", None, position=tuple(q0[:3]), orientation=tuple(q0[3:]),
                       mass=2.0, com=(0.05, 0.0, 0.02), inertia=np.diag([0.03, 0.05, 0.04]))]
    joints = [tree.TreeJoint("f", "free", "plate"),
              tree.Weld("hand", tuple(S_OFF), "plate", (0, 0, 0), rotation=_rot(E_REL))]
    return tree.Model(links, joints, gravity=(0, 0, -G_))


def test_a_body_welded_to_a_turning_mocap_body_moves_with_its_frame():
    model = _welded()
    assert (model.n, model.m) == (7, 7)
    sysm = model.moved({"hand": TURN})
    for t in (0.37, 1.1):
        q, v, a_ref = _plate_state(t)
        sysm.check(t, q, v)
        step = go.solve_step(sysm, t, q, v)
        M, F, A, b = sysm.evaluate(t, q, v)
        tau = solver_tolerance("closed_form", model.n, model.m)
        bound = step_error_bound(M, F, A, b, step.a, tau)
        # the weld fixes every direction: a is the frame's, to the step's verified error
        # plus the rounding of the written-out reference (a few products of size |a|)
        assert np.linalg.norm(step.a - a_ref) <= bound + 64 * np.finfo(float).eps * (
            1 + np.abs(a_ref).max()), (t, step.a - a_ref, bound)
    # a velocity that is not the position's derivative is refused by the check, which
    # names the motion (the user gave no gamma)
    wrong = tree.MocapMotion(position=_x, velocity=lambda t: 2 * _xd(t), acceleration=_xdd,
                             orientation=TURN.orientation,
                             angular_velocity=TURN.angular_velocity,
                             angular_acceleration=TURN.angular_acceleration)
    q, v, _ = _plate_state(0.37)
    with pytest.raises(ModelError, match=r"gamma: disagrees.*motions of \['hand'\]"):
        model.moved({"hand": wrong}).check(0.37, q, v)
    q0, v0, _ = _plate_state(0.0)
    tr = go.simulate(sysm, (0.0, 1.5), q0, v0, rtol=1e-11, atol=1e-11)
    assert tr.success, tr.message
    q1 = _plate_state(1.5)[0]
    # the rows fix the motion completely: the run can only drift by its projection's
    # tolerance, far below the run's 1e-11 per step
    np.testing.assert_allclose(tr.q[-1], q1, rtol=0, atol=1e-9)


def test_a_mocap_body_at_rest_is_the_world_at_its_pose():
    """Held (the model's own system), the connect is the same as one to the world point."""
    model = _built()
    world = tree.Model([tree.Link("bob", None, position=(0, 0, 1 - D_), mass=M_, inertia=IC)],
                       [tree.TreeJoint("f", "free", "bob"),
                        tree.Connect("bob", (0, 0, D_), None, (0, 0, 1))],
                       gravity=(0, 0, -G_))
    rng = np.random.default_rng(3)
    q = model.q_reference.copy()
    q[3:] = q[3:] + 0.2 * rng.standard_normal(4)
    q[3:] /= np.linalg.norm(q[3:])
    v = rng.standard_normal(7)
    for f in ("phi", "jacobian", "phi_t"):
        x1 = getattr(model, f)(0.0, q)
        x2 = getattr(world, f)(0.0, q)
        np.testing.assert_array_equal(x1, x2)
    assert not np.any(model.phi_t(0.0, q))
    np.testing.assert_array_equal(model.rows(0.0, q, v)[1], world.rows(0.0, q, v)[1])


def test_moved_refuses_what_it_cannot_move():
    model = _built()
    with pytest.raises(ModelError, match="'foot'.*mocap bodies: \\['hand'\\]"):
        model.moved({"foot": SWING})
    with pytest.raises(ModelError, match="needs `velocity` and `acceleration`"):
        model.moved({"hand": tree.MocapMotion(position=lambda t: [0, 0, 1])})
    with pytest.raises(ModelError, match="must be a MocapMotion"):
        model.moved({"hand": lambda t: [0, 0, 1]})
    with pytest.raises(ModelError, match="non-empty mapping"):
        model.moved({})
    bad = tree.MocapMotion(position=lambda t: [0, 0], velocity=lambda t: [0, 0, 0],
                           acceleration=lambda t: [0, 0, 0])
    with pytest.raises(ModelError, match=r"motions\['hand'\]\.position\(t\)` must return 3"):
        model.moved({"hand": bad}).constraints[0].phi(0.0, model.q_reference)
    with pytest.raises(ModelError, match="parent is the mocap body 'hand'"):
        tree.Model([tree.Mocap("hand"), tree.Link("b", "hand", mass=1.0, inertia=IC)],
                   [tree.TreeJoint("h", "hinge", "b")])
    with pytest.raises(ModelError, match="neither moves with the tree"):
        tree.Model([tree.Mocap("hand"), tree.Link("b", None, mass=1.0, inertia=IC)],
                   [tree.TreeJoint("h", "hinge", "b"),
                    tree.Connect("hand", (0, 0, 0), None, (0, 0, 0))])


def test_the_loader_maps_mocap_bodies_named_by_equalities_and_says_what_stays():
    mj = pytest.importorskip("mujoco")  # noqa: F841
    from gaussopt.multibody import load
    with pytest.warns(Warning) as rec:
        load(CARRIED)
    assert not any("mocap" in str(w.message) for w in rec)
    xml = CARRIED.replace('<geom type="sphere" size="0.02" contype="0" conaffinity="0"/>',
                          '<geom type="sphere" size="0.02" contype="0" conaffinity="0"/>'
                          '<body name="finger" pos="0 0 0.1"><joint name="fh" type="hinge"/>'
                          '<geom size="0.01" mass="0.1"/></body>')
    model = load(xml)
    assert model.mocap_fixed == {"hand": ("link 'finger'",)}
    with pytest.raises(ModelError, match="cannot be moved: link 'finger'"):
        model.moved({"hand": SWING})
