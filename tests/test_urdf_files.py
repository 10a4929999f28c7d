"""URDF files load as robot packages ship them: meshes are no reason to fail.

Robot URDFs reference their visual and collision meshes as ``package://`` paths (and
``.dae`` files) that MuJoCo's reader cannot open, although the dynamics never use them.
The loader reads a URDF without its visual geometry and its mesh collision geometry,
says so in its report of unmapped features, repairs an inertia MuJoCo rejects with
MuJoCo's own ``balanceinertia`` (with a warning naming the body) where that repair
applies, and names the link otherwise. The reference for the dynamics is Pinocchio's
``aba`` on the same file (its own URDF parser, meshes never opened).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

import gaussopt as go                                                      # noqa: E402
from gaussopt.core.exceptions import ModelError                           # noqa: E402
from gaussopt.multibody.io.mjcf import (InertiaRepairWarning, UnmappedFeatureWarning,  # noqa: E402
                                        joint_accelerations, state_from_mujoco)


def link(name: str, mass: float, inertia=(0.02, 0.02, 0.01), com=(0.0, 0.0, 0.15),
         mesh: bool = True) -> str:
    ixx, iyy, izz = inertia
    geometry = ("""<geometry><mesh filename="package://no_such_package/meshes/{0}.dae"/></geometry>"""
                if mesh else """<geometry><box size="0.05 0.05 0.3"/></geometry>""").format(name)
    return f"""
  <link name="{name}">
    <inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/><mass value="{mass}"/>
      <inertia ixx="{ixx}" ixy="0.001" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/></inertial>
    <visual>{geometry}</visual>
    <collision>{geometry}</collision>
  </link>"""


def joint(name: str, parent: str, child: str, axis: str, z: float = 0.3) -> str:
    return f"""
  <joint name="{name}" type="revolute">
    <parent link="{parent}"/><child link="{child}"/>
    <origin xyz="0 0.02 {z}" rpy="0.1 0 0.2"/><axis xyz="{axis}"/>
    <limit lower="-3" upper="3" effort="10" velocity="5"/>
  </joint>"""


def arm(links=None) -> str:
    """A 4-link arm on a fixed base, every link with mesh visual and collision geometry
    in a package that does not exist."""
    links = links or [link(f"l{i}", 1.0 + 0.3 * i) for i in range(1, 5)]
    axes = ["0 0 1", "0 1 0", "1 0 0", "0 1 0"]
    parents = ["base"] + [f"l{i}" for i in range(1, 4)]
    joints = [joint(f"j{i}", parents[i - 1], f"l{i}", axes[i - 1]) for i in range(1, 5)]
    return ('<robot name="arm">' + link("base", 5.0) + "".join(links)
            + """<link name="world"/><joint name="fix" type="fixed"><parent link="world"/>
            <child link="base"/></joint>""" + "".join(joints) + "</robot>")


def test_a_urdf_with_unreadable_meshes_loads_and_says_what_it_left_out(tmp_path):
    path = tmp_path / "arm.urdf"
    path.write_text(arm())
    with pytest.raises(ValueError, match="no_such_package|Error opening file"):
        mujoco.MjModel.from_xml_path(str(path))          # (what MuJoCo alone does)
    with pytest.warns(UnmappedFeatureWarning) as rec:
        model = go.multibody.load(path)
    said = str(rec[0].message)
    assert "URDF geometry not read" in said and "5 <visual> and 5 mesh <collision>" in said
    assert len(model.body_names) == 4


def test_the_loaded_urdf_gives_pinocchios_accelerations(tmp_path):
    pin = pytest.importorskip("pinocchio")
    path = tmp_path / "arm.urdf"
    path.write_text(arm())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnmappedFeatureWarning)
        model = go.multibody.load(path)
    mj = mujoco.MjModel.from_xml_string(arm().replace("<visual>", "<!--").replace(
        "</visual>", "-->").replace("<collision>", "<!--").replace("</collision>", "-->"))
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    sysm = model.system
    rng = np.random.default_rng(4)
    for _ in range(5):
        qpos, qvel = rng.uniform(-1.5, 1.5, 4), rng.uniform(-2, 2, 4)
        q, v = state_from_mujoco(model, mj, qpos, qvel)
        a = go.solve_step(sysm, 0.0, q, v).a
        got = joint_accelerations(model, mj, q, v, a)
        ref = pin.aba(pm, pd, qpos, qvel, np.zeros(4))
        # both are backward stable: rounding of M's entries (condition number ~1e3 here)
        assert np.linalg.norm(got - ref) <= 1e-10 * np.linalg.norm(ref)


def test_an_inertia_outside_the_triangle_inequality_is_repaired_with_a_warning(tmp_path):
    bad = link("l2", 1.3, inertia=(0.01, 0.01, 0.05))      # izz > ixx + iyy
    links = [link("l1", 1.0), bad, link("l3", 1.6), link("l4", 1.9)]
    path = tmp_path / "arm.urdf"
    path.write_text(arm(links))
    with pytest.warns(InertiaRepairWarning, match="'l2'"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", UnmappedFeatureWarning)
        model = go.multibody.load(path)
    assert len(model.body_names) == 4


def test_an_inertia_no_repair_accepts_names_the_link_and_its_eigenvalues(tmp_path):
    text = arm().replace('<inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.02" iyz="0" izz="0.01"/>'
                         '</inertial>\n    <visual><geometry><mesh filename="package://no_such_'
                         'package/meshes/l3.dae"/>',
                         '<inertia ixx="0.02" ixy="0.05" ixz="0" iyy="0.02" iyz="0" izz="0.01"/>'
                         '</inertial>\n    <visual><geometry><mesh filename="package://no_such_'
                         'package/meshes/l3.dae"/>')
    assert text != arm()
    path = tmp_path / "arm.urdf"
    path.write_text(text)
    with pytest.raises(ModelError, match=r"'l3'.*eigenvalues \[-0\.03"):
        go.multibody.load(path)


def test_a_urdf_where_nothing_moves_is_refused_by_name(tmp_path):
    path = tmp_path / "statue.urdf"
    path.write_text('<robot name="statue">' + link("base", 1.0) + "</robot>")
    with pytest.raises(ModelError, match="no body of this model moves"):
        go.multibody.load(path)


# ----------------------------------------------------------------------------- links MuJoCo rejects
def _massless(name: str) -> str:
    return f'<link name="{name}"/>'


def _point(name: str, mass: float, com=(0.0, 0.05, 0.2)) -> str:
    """A point mass: its tensor at rounding level with a negative moment (-5e-20), as
    iCub's files have them."""
    return f"""
  <link name="{name}">
    <inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/><mass value="{mass}"/>
      <inertia ixx="-5e-20" ixy="0" ixz="0" iyy="-5e-20" iyz="0" izz="0"/></inertial>
  </link>"""


def _hinge(name, parent, child, axis, xyz="0 0 0", damping=0.0) -> str:
    dyn = f'<dynamics damping="{damping}"/>' if damping else ""
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin xyz="{xyz}" rpy="0.1 0 0.2"/><axis xyz="{axis}"/>'
            f'<limit lower="-3" upper="3" effort="10" velocity="5"/>{dyn}</joint>')


def composite_hip() -> str:
    """A hip of three hinges whose first two links are massless (human.urdf's
    ``*_virtual`` links), a thigh, a point-mass shank on a damped knee, a foot."""
    links = (link("base", 5.0, mesh=False) + _massless("hip_z") + _massless("hip_x")
             + link("thigh", 3.0, mesh=False) + _point("shank", 1.2)
             + link("foot", 0.6, inertia=(0.01, 0.012, 0.008), mesh=False))
    joints = (_hinge("jz", "base", "hip_z", "0 0 1", "0 0.1 -0.1")
              + _hinge("jx", "hip_z", "hip_x", "1 0 0")
              + _hinge("jy", "hip_x", "thigh", "0 1 0", damping=0.3)
              + _hinge("knee", "thigh", "shank", "0 1 0", "0 0 -0.4", damping=0.5)
              + _hinge("ankle", "shank", "foot", "1 0 0", "0 0 -0.4"))
    return ('<robot name="hip">' + links + '<link name="world"/><joint name="fix" type="fixed">'
            '<parent link="world"/><child link="base"/></joint>' + joints + "</robot>")


def test_massless_and_point_mass_links_load_as_the_file_has_them(tmp_path):
    """MuJoCo rejects the massless links of a composite hip and the point-mass shank; the
    joint coordinates need no inertia per link: the loader compiles MuJoCo's kinematics
    with a placeholder, keeps the file's inertias (as Pinocchio does), says so, and the
    accelerations equal ``pinocchio.aba`` with the joints' damping as its torque, at 20
    random states (bound: both backward stable, 10 nv cond(M) eps |a| each)."""
    pin = pytest.importorskip("pinocchio")
    path = tmp_path / "hip.urdf"
    path.write_text(composite_hip())
    with pytest.raises(ValueError, match="mjMINVAL|positive eigenvalues"):
        mujoco.MjModel.from_xml_path(str(path))          # (what MuJoCo alone does)
    with pytest.warns(UnmappedFeatureWarning) as rec:
        model = go.multibody.load(path)
    said = " ".join(str(r.message) for r in rec)
    assert "massless: 'hip_z', 'hip_x'" in said and "point mass" in said and "'shank'" in said
    pm = pin.buildModelFromUrdf(str(path))
    order = [pm.joints[pm.getJointId(nm)].idx_v for nm in model.coordinates]
    assert max(pm.damping[i] for i in order) == 0.5     # (the knee's: read by both)
    check_against_aba(pin, model, pm, np.random.default_rng(7), 20, 1.5, 2.0)


def check_against_aba(pin, model, pm, rng, states: int, qmax: float, vmax: float) -> None:
    """gaussopt's accelerations equal ``pinocchio.aba``'s (the joints' damping as its
    torque: Pinocchio's ``aba`` leaves URDF damping out) at random states of a model of
    1-dof joints (a continuous joint: Pinocchio's ``(cos q, sin q)``), within ``2 * 10 n
    cond(M) eps |a|`` (both backward stable)."""
    pd = pm.createData()
    joints = [pm.joints[pm.getJointId(nm)] for nm in model.coordinates]
    order = [jm.idx_v for jm in joints]
    for _ in range(states):
        q, v = rng.uniform(-qmax, qmax, model.n), rng.uniform(-vmax, vmax, model.n)
        a = go.solve_step(model.system, 0.0, q, v).a
        qp, vp = np.empty(pm.nq), np.empty(pm.nv)
        vp[order] = v
        for jm, x in zip(joints, q):
            qp[jm.idx_q:jm.idx_q + jm.nq] = x if jm.nq == 1 else (np.cos(x), np.sin(x))
        ref = pin.aba(pm, pd, qp, vp, -pm.damping * vp)[order]
        M = model.system.mass(0.0, q)
        bound = 2 * 10 * model.n * np.linalg.cond(M) * np.finfo(float).eps * np.linalg.norm(ref)
        assert np.linalg.norm(a - ref) <= bound


def test_a_massless_leaf_on_a_joint_is_an_indeterminate_motion(tmp_path):
    """A massless link at the end of a hinge (romeo.urdf's fingers): the model loads, and
    the step names the joint whose motion moves no inertia."""
    text = composite_hip().replace(
        "</robot>", _massless("finger") + _hinge("jf", "foot", "finger", "0 0 1") + "</robot>")
    path = tmp_path / "finger.urdf"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnmappedFeatureWarning)
        model = go.multibody.load(path)
    with pytest.raises(go.IndeterminateMotionError, match="jf"):
        go.solve_step(model.system, 0.0, np.full(model.n, 0.2), np.zeros(model.n))


def _robots():
    """The robots folder of example-robot-data (the test is skipped where not installed)."""
    import importlib.metadata as md
    from pathlib import Path
    try:
        return Path(md.distribution("example-robot-data").locate_file(
            "cmeel.prefix/share/example-robot-data/robots"))
    except md.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed")


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnmappedFeatureWarning)
        return go.multibody.load(path)


@pytest.mark.parametrize("rel, seed", [("human_description/robots/human.urdf", 2),
                                       ("icub_description/robots/icub.urdf", 2),
                                       ("ur_description/urdf/ur5_robot.urdf", 5),
                                       ("ur_description/urdf/ur10_robot.urdf", 5),
                                       ("kinova_description/robots/kinova.urdf", 5),
                                       ("xarm_description/urdf/xarm7.urdf", 5),
                                       ("z1_description/urdf/z1.urdf", 5)])
def test_packaged_robot_files_give_pinocchios_accelerations(rel, seed):
    """example-robot-data's robots as shipped, where installed: ``pinocchio.aba`` with the
    joints' damping as its torque at 10 random states, within the bound of
    :func:`test_massless_and_point_mass_links_load_as_the_file_has_them`.

    * the human (19 massless links of composite joints) and iCub (point masses,
      rounding-level negative moments): links MuJoCo rejects as given;
    * the arms (meshes, massless end frames welded to the last link, continuous joints).
      The UR arms' massless ``ee_link`` carries a 1 cm collision box: MuJoCo's default
      inferred 1 g from it, which the file does not have (2.9e-5 of the accelerations, 2e7
      times this bound); the loader reads URDF inertias as Pinocchio does
      (``inertiafromgeom="false"``)."""
    pin = pytest.importorskip("pinocchio")
    path = _robots() / rel
    model = _load(path)
    check_against_aba(pin, model, pin.buildModelFromUrdf(str(path)),
                      np.random.default_rng(seed), 10, 1.0, 1.0)


def test_the_panda_with_its_mimic_finger_gives_pinocchios_accelerations():
    """example-robot-data's Panda: its second finger mimics the first (a URDF ``<mimic>``:
    MuJoCo's ``joint`` equality, one exact row here). Pinocchio's ``aba`` refuses mimic
    joints; its mimic model (``mimic=True``: 8 degrees of freedom) gives ``M`` (``crba``)
    and the bias (``rnea`` at zero acceleration), with both fingers' damping on the shared
    one. At 10 random states with the fingers together, gaussopt's 9 accelerations are those
    8 and the mimicking finger's equal to the first's, within ``2 * 10 n cond(M) eps |a|``
    (a dense solve and the step, both backward stable)."""
    pin = pytest.importorskip("pinocchio")
    root = _robots()
    path = root / "panda_description/urdf/panda.urdf"
    model = _load(path)
    assert model.coordinates[-2:] == ("panda_finger_joint1", "panda_finger_joint2")
    assert (model.n, model.m) == (9, 1)
    pm = pin.buildModelFromUrdf(str(path), mimic=True)
    assert (pm.nq, pm.nv) == (8, 8)
    pd = pm.createData()
    rng = np.random.default_rng(8)
    for _ in range(10):
        q, v = rng.uniform(-1, 1, 9), rng.uniform(-1, 1, 9)
        q[8], v[8] = q[7], v[7] = rng.uniform(0.0, 0.04), rng.uniform(-0.1, 0.1)
        a = go.solve_step(model.system, 0.0, q, v).a
        M = pin.crba(pm, pd, q[:8])
        M = np.triu(M) + np.triu(M, 1).T
        tau = -pm.damping * v[:8]
        tau[7] *= 2                                    # (the mimicking finger's damper too)
        ref = np.linalg.solve(M, tau - pin.rnea(pm, pd, q[:8], v[:8], np.zeros(8)))
        bound = 2 * 10 * 9 * np.linalg.cond(M) * np.finfo(float).eps * np.linalg.norm(ref)
        assert np.linalg.norm(a[:8] - ref) <= bound
        assert abs(a[8] - a[7]) <= bound
