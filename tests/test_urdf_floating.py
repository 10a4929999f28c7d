"""Floating-base URDFs (``gaussopt.multibody.load(..., floating=True)``) against Pinocchio's
free flyer, MuJoCo, and the laws of a free rigid body.

A URDF cannot say that its root link moves freely, so MuJoCo welds it to the world; a
legged robot or a quadrotor needs ``floating=True``, which gives the root a free joint.

* tests/data/floating_legs.urdf (a dummy root with a placeholder inertia welded to the
  trunk, an IMU whose tensor breaks the triangle inequality on a massless frame welded to
  the trunk: both rejected by MuJoCo alone, merged into the trunk by the loader; two
  two-joint legs and a skew rotor) at 50 random states against ``pinocchio.aba`` on
  ``buildModelFromUrdf(path, JointModelFreeFlyer())``. Pinocchio's free flyer has
  ``q = (p, x, y, z, w)`` and ``v = (R^T p', w_body)``, whose time derivative is its
  ``a``: ``d/dt (R^T p') = R^T p'' - w x R^T p'``, so MuJoCo's ``qacc`` of the free joint is
  ``(R (a_lin + w x v_lin), a_ang)``. Bound per state: gaussopt's verified step error
  through the map to ``qacc`` plus ``10 nv cond(M) eps |a|`` for Pinocchio (as
  tests/test_tree.py); the target 1e-12 relative beside it.
* tests/data/arm6.urdf given a floating base against ``mj_forward`` of a MuJoCo model given
  the free joint here, with ``mujoco.MjSpec`` (tests/test_tree.py's bound).
* tests/data/rigid_body.urdf (one link, no joint: an asymmetric top whose centroid is off
  the link origin), thrown spinning for 2 s: its centroid follows the parabola
  ``c0 + c0' t + g t^2 / 2`` exactly, its angular momentum about the centroid (world
  frame) and its rotational energy stay constant. The run's local errors at
  rtol = atol = 1e-12 sum to ~1e-10 over its steps; 1e-9 (relative to the motion's
  size) covers them.
* Refusals: a compiled ``MjModel`` (no new joints can be added), a model whose bodies on
  the world all have joints, a ``floating`` that is not a bool; without ``floating`` the
  one-link file has nothing that moves.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from test_trajectory import EPS

mj = pytest.importorskip("mujoco")
import gaussopt.multibody.io.mjcf as mjcf  # noqa: E402
from test_mjcf import acceleration_map, random_state  # noqa: E402
from test_tree import check_against_mujoco, gauss_bound  # noqa: E402

DATA = Path(__file__).parent / "data"
LEGS = DATA / "floating_legs.urdf"
BODY = DATA / "rigid_body.urdf"


def load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mjcf.UnmappedFeatureWarning)    # joint limits
        return mjcf.load(path, **kw)


def mujoco_floating(path, drop=()) -> "mj.MjModel":
    """MuJoCo's model of the URDF with a free joint on the root, built here; the links
    ``drop`` lose their ``<inertial>`` (a model for the state's layout only)."""
    import xml.etree.ElementTree as ET

    root_el = ET.fromstring(path.read_text())
    for link in root_el.iter("link"):
        if link.get("name") in drop:
            link.remove(link.find("inertial"))
    spec = mj.MjSpec.from_string(ET.tostring(root_el, encoding="unicode"))
    root = spec.worldbody.first_body()
    root.add_freejoint()
    return spec.compile()


def quat_matrix(w, x, y, z):
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def test_floating_legs_match_pinocchio_free_flyer():
    pin = pytest.importorskip("pinocchio")
    with pytest.warns(mjcf.UnmappedFeatureWarning,
                      match=r"'base' into 'trunk'; 'imu' into 'trunk'"):
        model = mjcf.load(LEGS, floating=True)
    with pytest.raises(ValueError, match="inertia"):     # MuJoCo alone rejects the file
        mj.MjModel.from_xml_string(LEGS.read_text())
    m = mujoco_floating(LEGS, drop=("base", "imu"))     # (the layout of qpos and qvel)
    assert (model.n, model.m) == (m.nq, 1) == (12, 1)   # 7 + 5 hinges; the quaternion's row
    assert "free joint added to 'base'" in model.description
    pm = pin.buildModelFromUrdf(str(LEGS), pin.JointModelFreeFlyer())
    pd = pm.createData()
    jn = [mj.mj_id2name(m, mj.mjtObj.mjOBJ_JOINT, k) for k in range(m.njnt)]
    # MuJoCo's hinge addresses in Pinocchio's joint order (joint 1 is the free flyer)
    hinge = [int(m.jnt_qposadr[jn.index(pm.names[k])]) for k in range(2, pm.njoints)]
    dof = [int(m.jnt_dofadr[jn.index(pm.names[k])]) for k in range(2, pm.njoints)]
    rng = np.random.default_rng(11)
    worst = 0.0
    for _ in range(50):
        qpos, qvel = random_state(m, rng)
        q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
        step = go.solve_step(model.system, 0.0, q, v)
        qacc, L = acceleration_map(model, m, q, v, step.a)
        # Pinocchio's state: (p, x y z w, hinges), (R^T p', w_body, hinge rates)
        w_, x_, y_, z_ = qpos[3:7]
        R = quat_matrix(w_, x_, y_, z_)
        qp = np.concatenate([qpos[:3], [x_, y_, z_, w_], qpos[hinge]])
        vlin, wb = R.T @ qvel[:3], qvel[3:6]
        vp = np.concatenate([vlin, wb, qvel[dof]])
        ap = pin.aba(pm, pd, qp, vp, np.zeros(pm.nv))
        ref = np.empty(m.nv)
        ref[:3] = R @ (ap[:3] + np.cross(wb, vlin))
        ref[3:6] = ap[3:6]
        ref[dof] = ap[6:]
        Mp = pin.crba(pm, pd, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        err = np.linalg.norm(qacc - ref)
        bound = (np.linalg.norm(L, 2) * gauss_bound(model, q, v, step)
                 + 10 * pm.nv * np.linalg.cond(Mp) * EPS * np.linalg.norm(ref))
        assert err <= bound
        worst = max(worst, err / np.linalg.norm(ref))
    print(f"floating_legs.urdf vs pinocchio.aba (free flyer): worst relative error {worst:.2e}")
    assert worst <= 1e-12


def test_floating_arm_matches_mujoco():
    model = load(DATA / "arm6.urdf", floating=True)
    m = mujoco_floating(DATA / "arm6.urdf")
    m.opt.disableflags |= mj.mjtDisableBit.mjDSBL_CONTACT
    worst = check_against_mujoco(model, m, 20, np.random.default_rng(5))
    assert worst <= 1e-10


def test_thrown_rigid_body_keeps_its_momenta():
    model = load(BODY, floating=True)
    m = mujoco_floating(BODY)
    assert (model.n, model.m) == (7, 1)
    mass = float(m.body_mass[1])
    c_link = np.array(m.body_ipos[1])                   # the centroid in the link frame
    Rp = quat_matrix(*m.body_iquat[1])                  # principal axes in the link frame
    Ib = Rp @ np.diag(m.body_inertia[1]) @ Rp.T         # centroidal inertia, link frame
    g = np.array(m.opt.gravity)
    qpos = np.array([0.1, -0.2, 1.0, *(np.array([0.9, 0.2, -0.3, 0.25]) /
                                       np.linalg.norm([0.9, 0.2, -0.3, 0.25]))])
    qvel = np.array([1.0, 0.5, 4.0, 3.0, -7.0, 11.0])    # thrown up, spinning on all axes
    q0, v0 = mjcf.state_from_mujoco(model, m, qpos, qvel)
    tr = go.simulate(model.system, (0.0, 2.0), q0, v0, rtol=1e-12, atol=1e-12,
                     t_eval=np.linspace(0.0, 2.0, 41))
    assert tr.success, tr.message

    def centroid_state(q, v):
        qv = mjcf.joint_accelerations(model, m, q, v, v)    # (p', w_body) = qvel
        R = quat_matrix(*q[3:7] / np.linalg.norm(q[3:7]))
        c = q[:3] + R @ c_link
        cd = qv[:3] + R @ np.cross(qv[3:6], c_link)
        L = R @ (Ib @ qv[3:6])                              # angular momentum, world frame
        return c, cd, L, 0.5 * qv[3:6] @ Ib @ qv[3:6]

    c0, cd0, L0, E0 = centroid_state(q0, v0)
    scale = 1.0 + np.abs(c0).max() + np.abs(cd0).max() * 2.0
    for t, q, v in zip(tr.t, tr.q, tr.v):
        c, cd, L, E = centroid_state(q, v)
        np.testing.assert_allclose(c, c0 + cd0 * t + 0.5 * g * t * t, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(cd, cd0 + g * t, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(L, L0, rtol=0, atol=1e-9 * np.linalg.norm(L0))
        assert abs(E - E0) <= 1e-9 * E0


def test_floating_refusals():
    with pytest.raises(ModelError, match="nothing to simulate"):
        load(BODY)
    with pytest.raises(ModelError, match=r"`floating=True` needs the model's file"):
        load(mujoco_floating(BODY), floating=True)
    with pytest.raises(ModelError, match="already has a joint"):
        load(DATA / "double_pendulum.xml", floating=True)
    with pytest.raises(ModelError, match="`floating` must be True or False, found 'yes'"):
        load(LEGS, floating="yes")
