"""Tests of gaussopt.multibody.io.mjcf (models from MJCF and URDF) against MuJoCo
and Pinocchio.

* Open chains (tests/data/double_pendulum.xml, double_pendulum_free.xml, arm6.xml,
  mixed_joints.xml): at random MuJoCo states, gaussopt's step mapped to joint
  accelerations equals ``mj_forward``'s ``qacc`` (MuJoCo's qacc of a chain without
  constraints is ``M^-1 (tau - c)`` by an LDL factorization: exact up to roundoff).
  The error bound per state is gaussopt's verified step error (test_step_properties.
  step_error_bound, through the linear map to joint accelerations) plus MuJoCo's
  ``nv cond(M) eps |qacc|``; the issue's target (1e-10 relative) is checked beside it.
  Measured worst relative errors (2-norm): double pendulum 2.1e-15, free base 3.1e-14,
  arm 5.7e-14, mixed joints (ball, slide, multi-joint body, damping, armature, gravcomp)
  9.1e-15.
* URDF (tests/data/arm6.urdf, the same arm): through :func:`load` against
  ``pinocchio.aba`` on ``pinocchio.buildModelFromUrdf`` at 100 random states: worst
  relative error 7.2e-14 (target 1e-12: both are direct solvers, gaussopt's verified
  step on n = 42, m = 36 with cond ~1e2-1e3, Pinocchio's recursion on a 6x6 M).
* A closed loop (tests/data/four_bar_connect.xml, a four-bar closed by ``connect``):
  MuJoCo's soft answer is the minimizer of ``(a - a0)^T M (a - a0) + (J a -
  a_ref)^T R^-1 (J a - a_ref)`` (checked from its own ``efc_R``, ``efc_aref``);
  gaussopt's exact answer is its limit ``R -> 0``. At rest in the ``qpos0`` pose the two
  differ by 4.7 % (solimp d = 0.9, the default), 0.44 % at 0.99, 0.044 % at 0.999 (2-norm,
  linear in ``1 - d``); over 2 s from rest MuJoCo's loop opens by 6.3e-4 m (RK4, dt 1e-4,
  estimate (1 - d) |J a0| tc^2 = 4.8e-4 m; 1.6e-3 m with Euler at the default dt 2e-3),
  gaussopt's (default settings) by 2.5e-16 m. The crank angle after 2 s: MuJoCo 1.876 rad
  (RK4), gaussopt 1.6575265 rad; MuJoCo at solimp 0.9999 (its stiffest), solref 1 ms,
  dt 20 us: 1.6575265 rad (4e-8 from gaussopt's).
* The unmapped-features warning names each feature (tests/data/unmapped.xml).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from test_step_properties import solver_tolerance, step_error_bound
from test_trajectory import EPS

mj = pytest.importorskip("mujoco")
import gaussopt.multibody.io.mjcf as mjcf  # noqa: E402

DATA = Path(__file__).parent / "data"


def load_maximal(source, **kwargs):
    """The spatial (maximal-coordinate) model of ``source``: this file tests that kind
    (tests/test_tree.py the joint-coordinate kind, :func:`load`'s default)."""
    return mjcf.load(source, coordinates="maximal", **kwargs)
OPEN_CHAINS = ["double_pendulum.xml", "double_pendulum_free.xml", "arm6.xml",
               "mixed_joints.xml", "double_pendulum_armature.xml"]


def random_state(m, rng):
    """A random MuJoCo state: hinge angles in (-pi, pi), slides in (-0.3, 0.3) m, unit
    quaternions of balls and free joints, free positions ~ N(0, 1) m, rates in (-2, 2)."""
    qpos = np.array(m.qpos0)
    for j in range(m.njnt):
        a, t = int(m.jnt_qposadr[j]), int(m.jnt_type[j])
        if t == mj.mjtJoint.mjJNT_HINGE:
            qpos[a] = rng.uniform(-np.pi, np.pi)
        elif t == mj.mjtJoint.mjJNT_SLIDE:
            qpos[a] = rng.uniform(-0.3, 0.3)
        elif t == mj.mjtJoint.mjJNT_BALL:
            x = rng.normal(size=4)
            qpos[a:a + 4] = x / np.linalg.norm(x)
        else:
            x = rng.normal(size=4)
            qpos[a:a + 3] = rng.normal(size=3)
            qpos[a + 3:a + 7] = x / np.linalg.norm(x)
    return qpos, rng.uniform(-2.0, 2.0, m.nv)


def acceleration_map(model, m, q, v, a):
    """(qacc of a, the matrix L of the map a -> qacc, linear for fixed q, v: L[:, k] is the
    difference of the images of a + e_k and a, exact up to rounding)."""
    base = mjcf.joint_accelerations(model, m, q, v, a)
    L = np.empty((base.size, a.size))
    for k in range(a.size):
        e = a.copy()
        e[k] += 1.0
        L[:, k] = mjcf.joint_accelerations(model, m, q, v, e) - base
    return base, L


def gauss_bound(model, q, v, step) -> float:
    """Bound on |a - a*| of a verified closed-form step (test_step_properties)."""
    sysm = model.system
    M, F = sysm.mass(0.0, q), sysm.force(0.0, q, v)
    A, b = sysm.rows(0.0, q, v)
    return step_error_bound(M, F, A, b, step.a, solver_tolerance("closed_form", *A.shape[::-1]))


def joint_mass(m, d) -> np.ndarray:
    M = np.zeros((m.nv, m.nv))
    mj.mj_fullM(m, d, M)
    return M


# ----------------------------------------------------------------------------- open chains
@pytest.mark.parametrize("fname", OPEN_CHAINS)
def test_open_chain_matches_mujoco_qacc(fname):
    """Joint accelerations from gaussopt's step equal MuJoCo's qacc at 20 random states."""
    path = DATA / fname
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # these models map completely
        model = load_maximal(path)
    m = mj.MjModel.from_xml_path(str(path))
    d = mj.MjData(m)
    rng = np.random.default_rng(20261128)
    worst = 0.0
    for _ in range(20):
        qpos, qvel = random_state(m, rng)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mj.mj_forward(m, d)
        q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
        # the mapped state satisfies the model's equations (rounding of the kinematics)
        assert np.abs(model.phi(0.0, q)).max() < 100 * EPS * (1 + np.abs(q).max())
        step = go.solve_step(model.system, 0.0, q, v)
        qacc, L = acceleration_map(model, m, q, v, step.a)
        err = np.linalg.norm(qacc - d.qacc)
        # gaussopt's verified step error through the map, plus MuJoCo's LDL solve
        # (backward stable: nv cond(M) eps relative); the factor 10 covers the rounding
        # of the bias forces (RNE) and of the map itself
        Mj = joint_mass(m, d)
        bound = (np.linalg.norm(L, 2) * gauss_bound(model, q, v, step)
                 + 10 * m.nv * np.linalg.cond(Mj) * EPS * np.linalg.norm(d.qacc))
        assert err <= bound, (fname, err, bound)
        rel = err / np.linalg.norm(d.qacc)
        assert rel <= 1e-10                          # the target
        worst = max(worst, rel)
    print(f"{fname}: worst relative error {worst:.2e}")


def test_free_joint_quaternion_and_velocities():
    """The free base's state maps to the body's centroid and inertial frame: the Euler
    parameters are MuJoCo's xquat times body_iquat, the angular velocity of ``p'`` is
    MuJoCo's (body-frame qvel rotated to the world) and the base's q does not depend on
    the sign of MuJoCo's quaternion."""
    path = DATA / "double_pendulum_free.xml"
    model = load_maximal(path)
    m = mj.MjModel.from_xml_path(str(path))
    d = mj.MjData(m)
    rng = np.random.default_rng(5)
    for _ in range(5):
        qpos, qvel = random_state(m, rng)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mj.mj_kinematics(m, d)
        q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
        R_mj = d.xmat[1].reshape(3, 3) @ mjcf._qrot(m.body_iquat[1])
        assert np.allclose(model.rotation("base", q), R_mj, atol=1e-14)
        assert np.allclose(q[:3], d.xipos[1], atol=1e-14)
        w = model.angular_velocity("base", q, v)
        assert np.allclose(w, d.xmat[1].reshape(3, 3) @ qvel[3:6], atol=1e-14)
        qpos2 = qpos.copy()
        qpos2[3:7] *= -1.0
        q2, v2 = mjcf.state_from_mujoco(model, m, qpos2, qvel)
        assert np.array_equal(q2, q) and np.allclose(v2, v, atol=1e-15)


def test_multi_joint_body_inserts_massless_frames():
    """mixed_joints.xml: the body 'two' with a hinge then a slide gets a massless body
    after the hinge; the massless welded 'frame' is merged into its parent; the welded
    massive 'weight' is Fixed to 'arm'; the grounded hinge's armature is in 'arm's inertia."""
    model = load_maximal(DATA / "mixed_joints.xml")
    names = list(model.body_names)
    assert "two_hA" in names and "frame" not in names and "weight" in names
    k = names.index("two_hA")
    assert model.bodies[k].mass == 0.0
    assert any(lbl.startswith("Fixed(arm,weight)") for lbl in model.joint_labels)
    m = mj.MjModel.from_xml_path(str(DATA / "mixed_joints.xml"))
    arm = model.bodies[names.index("arm")]
    J0 = np.diag(m.body_inertia[1])
    d = mj.MjData(m)
    mj.mj_kinematics(m, d)
    R = d.ximat[1].reshape(3, 3)
    u = R.T @ d.xaxis[0]
    assert np.allclose(arm.inertia_tensor, J0 + 0.025 * (np.eye(3) + np.outer(u, u)), atol=1e-15)


def test_disabled_gravity_and_damping_follow_mujoco():
    """mixed_joints.xml with MuJoCo's gravity and damper flags disabled: the loader drops
    gravity, gravity compensation and the dampers as MuJoCo does (qacc agrees as above)."""
    text = (DATA / "mixed_joints.xml").read_text().replace(
        '<flag contact="disable"/>', '<flag contact="disable" gravity="disable" damper="disable"/>')
    model = load_maximal(text)
    m = mj.MjModel.from_xml_string(text)
    assert np.array_equal(model.gravity, np.zeros(3))
    d = mj.MjData(m)
    rng = np.random.default_rng(4)
    for _ in range(3):
        qpos, qvel = random_state(m, rng)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mj.mj_forward(m, d)
        q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
        step = go.solve_step(model.system, 0.0, q, v)
        qacc, L = acceleration_map(model, m, q, v, step.a)
        bound = (np.linalg.norm(L, 2) * gauss_bound(model, q, v, step)
                 + 10 * m.nv * np.linalg.cond(joint_mass(m, d)) * EPS * np.linalg.norm(d.qacc))
        assert np.linalg.norm(qacc - d.qacc) <= bound


def test_loaded_model_pickles_with_its_dampers():
    """The damping callables are module-level classes: a loaded model pickles, and the
    copy's step (slide and free-joint dampers in Python) is the original's."""
    import pickle

    path = DATA / "mixed_joints.xml"
    model = load_maximal(path)
    copy = pickle.loads(pickle.dumps(model))
    m = mj.MjModel.from_xml_path(str(path))
    qpos, qvel = random_state(m, np.random.default_rng(9))
    q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
    a = go.solve_step(model.system, 0.0, q, v).a
    b = go.solve_step(copy.system, 0.0, q, v).a
    assert np.array_equal(a, b)


# ----------------------------------------------------------------------------- closed loop
def test_loop_mujoco_soft_against_exact():
    """four_bar_connect.xml: MuJoCo's qacc is the regularized Gauss minimizer with its
    own R, gaussopt's is the R -> 0 limit; their difference is linear in 1 - d (solimp);
    over 2 s MuJoCo's loop opens by ~(1 - d) |J a0| tc^2, gaussopt's stays closed."""
    path = DATA / "four_bar_connect.xml"
    with pytest.warns(mjcf.UnmappedFeatureWarning, match="solref/solimp"):
        model = load_maximal(path)
    rep = model.rank_report()
    assert rep.dof == 1 and model.gruebler == 0           # redundant: the connect's y row
    m = mj.MjModel.from_xml_path(str(path))
    m.opt.tolerance = 1e-15                               # MuJoCo's solver to convergence
    m.opt.iterations = 200
    d = mj.MjData(m)
    mj.mj_forward(m, d)                                   # qpos0, at rest: r = 0, J v = 0
    q, v = mjcf.state_from_mujoco(model, m, d.qpos, d.qvel)
    a_go = mjcf.joint_accelerations(model, m, q, v, go.solve_step(model.system, 0.0, q, v).a)

    M = joint_mass(m, d)
    J = d.efc_J.reshape(d.nefc, m.nv)
    a0 = np.array(d.qacc_smooth)

    def soft(R):
        """argmin (a - a0)^T M (a - a0) + (J a - aref)^T R^-1 (J a - aref), in its dual
        form a0 + M^-1 J^T f, (J M^-1 J^T + R) f = aref - J a0 (well conditioned as
        R -> 0: the connect's y row is zero, and so is the right side along it)."""
        MiJt = np.linalg.solve(M, J.T)
        return a0 + MiJt @ np.linalg.solve(J @ MiJt + np.diag(R), d.efc_aref - J @ a0)

    R = np.array(d.efc_R)
    scale = np.linalg.norm(a_go)
    # MuJoCo = the regularized minimizer (its Newton solver run to convergence; the
    # normal matrix M + J^T R^-1 J has cond ~ 1/(1-d) * cond(M) ~ 1e4: 1e4 eps ~ 1e-12)
    assert np.linalg.norm(d.qacc - soft(R)) <= 1e-9 * scale
    # gaussopt = its R -> 0 limit (the soft minimizer moves by O(R), 1e-9 R -> 1e-9 scale)
    assert np.linalg.norm(soft(1e-9 * R) - a_go) <= 1e-7 * scale
    # the difference is linear in 1 - d: d = 0.9, 0.99, 0.999
    diffs = []
    for dmin in (0.9, 0.99, 0.999):
        m.eq_solimp[0, :2] = dmin, max(dmin, 0.95)
        mj.mj_forward(m, d)
        diffs.append(np.linalg.norm(d.qacc - a_go) / scale / (1.0 - dmin))
    print("relative difference / (1 - d):", diffs)
    # |J a| = (1 - d) |J a0| for one row (module docstring of mjcf): the relative
    # difference is c (1 - d) with c = O(1) (measured 0.47, 0.44, 0.44); its change
    # between d's is the second-order term, ~ (1 - d) relative (measured 6 %, 0.6 %)
    assert 0.1 < diffs[0] < 1.0
    assert abs(diffs[1] / diffs[0] - 1.0) < 3 * (1 - 0.9)
    assert abs(diffs[2] / diffs[1] - 1.0) < 3 * (1 - 0.99)

    # a 2 s run from rest: loop gap |C_coupler - C_rocker|
    m = mj.MjModel.from_xml_path(str(path))
    m.opt.integrator = mj.mjtIntegrator.mjINT_RK4
    m.opt.timestep = 1e-4                                 # soft model's own gap, not Euler's
    d = mj.MjData(m)
    mj.mj_forward(m, d)
    Jv = d.efc_J.reshape(d.nefc, m.nv)
    ja0 = np.linalg.norm(Jv @ d.qacc_smooth)

    def gap(d):
        p1 = d.xpos[2] + d.xmat[2].reshape(3, 3) @ m.eq_data[0, 0:3]
        p2 = d.xpos[3] + d.xmat[3].reshape(3, 3) @ m.eq_data[0, 3:6]
        return np.linalg.norm(p1 - p2)

    g_mj = 0.0
    for _ in range(20000):
        mj.mj_step(m, d)
        g_mj = max(g_mj, gap(d))
    est = (1 - 0.9) * ja0 * 0.02 ** 2                     # (1 - d) |J a0| tc^2
    print(f"MuJoCo gap {g_mj:.3g} m, estimate {est:.3g} m")
    assert 0.25 * est < g_mj < 4 * est
    tr = go.simulate(model.system, (0.0, 2.0), q, v)
    assert tr.success
    C = np.array([0.55, 0.0, 0.35])
    gaps = np.linalg.norm(model.point("coupler", model.world_point("coupler", C), tr.q)
                          - model.point("rocker", model.world_point("rocker", C), tr.q), axis=1)
    print(f"gaussopt gap {gaps.max():.3g} m")
    # simulate's default Projection (tol 1e-15) Gauss-Newton-corrects the positions onto
    # Phi = 0 until the correction stagnates at a few ulps of |q| (~1 m): 1e-12 m leaves
    # three decades for the anchors' evaluation
    assert gaps.max() < 1e-12

    # the motion: MuJoCo's crank angle after 2 s tends to gaussopt's as its constraint
    # stiffens (d -> 0.9999, the most MuJoCo allows; time constant 1 ms, RK4 at 20 us)
    def crank(qq):
        R = model.rotation("crank", qq) @ model.rotation("crank", model.q_reference).T
        return np.arctan2(R[0, 2], R[0, 0])            # rotation about +y, as MuJoCo's hA

    th_soft = d.qpos[0]                                  # d = 0.9 (default), after 2 s
    m.eq_solimp[0, :2] = 0.9999, 0.9999
    m.eq_solref[0, 0] = 1e-3
    m.opt.timestep = 2e-5
    mj.mj_resetData(m, d)
    mj.mj_step(m, d, nstep=100000)
    th_go = crank(tr.q[-1])
    print(f"crank angle at 2 s: MuJoCo d=0.9 {th_soft:.9f}, d=0.9999 {d.qpos[0]:.9f}, "
          f"gaussopt {th_go:.9f}")
    # the default softness moves the crank by |th_soft - th_go| (measured 0.22 rad); at
    # 1 - d = 1e-4 a difference linear in 1 - d is 1e-3 of it (measured 4e-8 rad)
    assert abs(d.qpos[0] - th_go) < 1e-3 * abs(th_soft - th_go)


# ----------------------------------------------------------------------------- warnings
def test_unmapped_features_named_in_one_warning():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        model = load_maximal(DATA / "unmapped.xml")
    ws = [w for w in rec if issubclass(w.category, mjcf.UnmappedFeatureWarning)]
    assert len(ws) == 1
    msg = str(ws[0].message)
    feats = ws[0].message.features
    expected = {"tendons": 1, "actuators": 1, "contacts: geoms that can collide": 5,
                "contacts: explicit contact pairs": 1, "joint limits": 1,
                "joint stiffness (springs about springref)": 1, "joint friction loss": 1,
                "joint armature (on a ball joint between moving bodies, or on a slide joint)": 1,
                "equality constraints of type 'joint'": 1,
                "inactive equality constraints (active=false at start)": 1,
                "weld constraints whose relpose differs from the qpos0 pose": 1,
                "fluid forces (density/viscosity)": 1, "sensors": 1, "keyframes": 1,
                "mocap bodies (held fixed at their reference pose)": 1}
    assert feats == expected
    for k, n in expected.items():
        assert f"{k}: {n}" in msg
    assert list(model.body_names) == ["a", "b", "c", "e"]


def test_errors():
    with pytest.raises(ModelError, match="no file"):
        load_maximal(DATA / "missing.xml")
    with pytest.raises(ModelError, match="could not compile"):
        load_maximal("<mujoco><worldbody><body><joint type='nonsense'/></body></worldbody></mujoco>")
    with pytest.raises(ModelError, match="`source` must be"):
        load_maximal(3.5)
    model = load_maximal(DATA / "double_pendulum.xml")
    with pytest.raises(ModelError, match="`model` must be the model loaded"):
        mjcf.state_from_mujoco(model, str(DATA / "arm6.xml"), np.zeros(6), np.zeros(6))
    with pytest.raises(ModelError, match="`qpos` and `qvel` must have shapes"):
        mjcf.state_from_mujoco(model, str(DATA / "double_pendulum.xml"), np.zeros(3), np.zeros(2))


def test_xml_string_and_mjmodel_sources():
    text = (DATA / "double_pendulum.xml").read_text()
    a = load_maximal(text, name="dp")
    b = load_maximal(mj.MjModel.from_xml_string(text))
    assert a.name == "dp" and b.name == "double_pendulum"
    import gaussopt.multibody as multibody
    assert multibody.load is mjcf.load                   # gaussopt.multibody.load
    assert np.array_equal(a.q_reference, b.q_reference)


# ----------------------------------------------------------------------------- URDF
def test_urdf_arm_matches_pinocchio_aba():
    """arm6.urdf through load (MuJoCo's URDF parser) against pinocchio.aba on
    pinocchio.buildModelFromUrdf, 100 random states (angles in (-pi, pi), rates in
    (-2, 2) rad/s, no torque: gravity and velocity terms)."""
    pin = pytest.importorskip("pinocchio")
    path = DATA / "arm6.urdf"
    with pytest.warns(mjcf.UnmappedFeatureWarning, match="joint limits: 6"):
        model = load_maximal(path)
    m = mj.MjModel.from_xml_path(str(path))
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    jn = [mj.mj_id2name(m, mj.mjtObj.mjOBJ_JOINT, k) for k in range(m.njnt)]
    order = [jn.index(pm.names[k]) for k in range(1, pm.njoints)]   # Pinocchio joint -> MuJoCo
    assert pm.nq == pm.nv == m.nv == 6
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(100):
        qp = rng.uniform(-np.pi, np.pi, 6)
        vp = rng.uniform(-2.0, 2.0, 6)
        ref = pin.aba(pm, pd, qp, vp, np.zeros(6))
        qpos, qvel = np.empty(6), np.empty(6)
        qpos[order], qvel[order] = qp, vp
        q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
        step = go.solve_step(model.system, 0.0, q, v)
        qacc, L = acceleration_map(model, m, q, v, step.a)
        ours = qacc[order]
        err = np.linalg.norm(ours - ref)
        # gaussopt's verified step error through the map, plus aba's (backward stable
        # recursion: ~ nv cond(M) eps relative, M from crba)
        Mp = pin.crba(pm, pd, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        bound = (np.linalg.norm(L, 2) * gauss_bound(model, q, v, step)
                 + 10 * pm.nv * np.linalg.cond(Mp) * EPS * np.linalg.norm(ref))
        assert err <= bound
        rel = err / np.linalg.norm(ref)
        worst = max(worst, rel)
    print(f"arm6.urdf vs pinocchio.aba: worst relative error {worst:.2e}")
    assert worst <= 1e-12                                 # the target


def test_urdf_and_mjcf_arm_are_one_model():
    """arm6.xml and arm6.urdf load to the same bodies (masses, inertias, reference poses)."""
    a = load_maximal(DATA / "arm6.xml")
    with pytest.warns(mjcf.UnmappedFeatureWarning):
        b = load_maximal(DATA / "arm6.urdf")
    assert list(a.body_names) == list(b.body_names)
    assert np.allclose(a.q_reference, b.q_reference, atol=1e-14)
    for x, y in zip(a.bodies, b.bodies):
        assert x.mass == y.mass
        assert np.allclose(x.inertia_tensor, y.inertia_tensor, atol=1e-15)
