"""Multibody models from MJCF and URDF files, read by MuJoCo's own parser.

:func:`load` compiles the file (or XML string) with ``mujoco.MjModel`` (``pip
install "gaussopt[mjcf]"``; MuJoCo reads URDF too) and maps the compiled model onto
one of two kinds of model:

* ``coordinates="joint"`` (the default): a :class:`gaussopt.multibody.tree.Model` in joint
  coordinates, ``q`` = MuJoCo's ``qpos``. Every MuJoCo body with joints is a link placed by
  ``body_pos``/``body_quat`` in its parent link, moved by its joints in order (``jnt_pos``,
  ``jnt_axis``, ``qpos0``); a joint-less body is merged into the link that carries it
  (mass, centroid and inertia combined; into the world when nothing moves it); every
  joint keeps ``dof_damping``, ``dof_armature``, ``jnt_stiffness`` about ``qpos_spring``
  (balls and free joints too) and ``actuatorfrcrange``; ``body_gravcomp`` scales the link's
  weight; ``connect`` and ``weld`` equalities close loops as 3 and 6 constraint rows,
  ``joint`` and ``tendon`` equalities couple two joints or two fixed tendons in one row;
  fixed tendons keep their stiffness (dead band ``springlength``), damping, armature and
  ``actuatorfrcrange``; actuators with a fixed or affine gain and no or an affine bias
  (``motor``, ``position``, ``velocity``, ``damper``, such ``general`` ones; with
  ``filter``, ``filterexact`` or ``integrator`` activation dynamics, whose activations are
  the velocities of coordinates appended after the joints'; MuJoCo's muscles) on hinges,
  slides, ball and free joints, fixed tendons, sites (with or without a reference site) and
  slider-cranks keep their gear, ``ctrlrange`` and ``forcerange``, their controls the
  model's parameters (:class:`gaussopt.multibody.tree.Model`: ``controlled``, the
  ``Stepper``'s inputs); keyframes become ``model.keyframes``; limited hinges and slides
  ``model.joint_ranges``, limited fixed tendons ``model.tendon_ranges`` and colliding
  geoms ``model.contact_pairs`` (world planes against spheres, capsules, cylinders and
  boxes, spheres and capsules against spheres, capsules and boxes, by
  MuJoCo's filter and ``<pair>`` elements: :func:`_tree_contacts`), both opt-in as hard
  contacts (``with_limits``, ``with_contacts``); a mocap body that a ``connect`` or ``weld`` names becomes a
  :class:`~gaussopt.multibody.tree.Mocap` (held at rest in ``model.system``; moved along a
  prescribed motion by ``model.moved``: its closures become rheonomic rows), other mocap
  bodies stay part of the world at their reference pose. The tree itself needs no equations:
  a humanoid of nv 27 is ~28 coordinates and one row instead of 175 and 148. A free joint
  must belong to a body that only the world carries (MuJoCo's usual case).
* ``coordinates="maximal"``: :mod:`gaussopt.multibody.spatial` bodies (seven coordinates
  each) and the joints as equations, mapped as the table below says.

:func:`state_from_mujoco` maps a MuJoCo state ``(qpos, qvel)`` to the model's ``(q, v)``
(for the joint kind: ``q = qpos`` with unit quaternions, ``v = qvel`` but for Euler
parameters, whose rates carry MuJoCo's body-frame angular velocity, ``p' = W(p)^T w / 4``),
and :func:`joint_accelerations` maps the model's accelerations back to MuJoCo's ``qacc``
(its joint coordinates; for the joint kind the identity but for ``w' = W(p) (p'' -
2 (p . p') p' / |p|^2)``).

The rest of this docstring describes the maximal mapping (the joint kind's differs only
in how joints, damping, armature and stiffness are kept: as they are).

What maps, and how
------------------
======================  ====================================================================
MuJoCo                  gaussopt
======================  ====================================================================
body                    :class:`~.spatial.Body`: ``body_mass``, the principal moments
                        ``body_inertia``; its frame is MuJoCo's inertial frame (centroid
                        ``xipos``, principal axes ``ximat``); the reference pose is the pose
                        at ``qpos0`` (``mj_kinematics``).
hinge                   :class:`~.spatial.Revolute` at ``xanchor`` about ``xaxis`` (at ``qpos0``).
slide                   :class:`~.spatial.Prismatic` along ``xaxis``.
ball                    :class:`~.spatial.Spherical` at ``xanchor``.
free                    no joint: the body's 6 degrees of freedom.
no joint                :class:`~.spatial.Fixed` to the parent when the parent moves; a body
                        welded (through any chain of joint-less bodies) to the world is
                        part of the ground.
multi-joint body        MuJoCo composes the joints in order; the loader inserts a massless
                        body after each joint but the last (named ``<body>_<joint>``), so
                        joint ``k`` joins the frames before and after it. MuJoCo's joint
                        space mass matrix is regular exactly when the joints' motions are
                        independent, and exactly then the massless bodies are fixed by
                        their joints (``rank [M; Phi_q] = n``): the two models agree.
massless body           MuJoCo rejects moving bodies with mass or inertia below mjMINVAL,
                        so a massless body in a compiled model is welded to its parent:
                        it is merged into the parent (it is a frame of it), and joints of
                        its children attach to the parent. A URDF's moving links that
                        MuJoCo rejects (massless links between the joints of a composite
                        hip, point masses) load in joint coordinates with the file's
                        inertias: MuJoCo compiles the kinematics with a placeholder that
                        the loader takes out again (:func:`_placeholders`).
gravity                 ``opt.gravity`` (zero when the gravity flag is disabled);
                        ``body_gravcomp`` as a constant :class:`~.spatial.Force`
                        ``-gravcomp m g`` at the centroid.
joint damping           hinge: :class:`~.spatial.RotationalDamper` (compiled); ball: three of them
                        about orthonormal axes (their sum is ``-c w_rel``); free: three about
                        the world axes and a callable :class:`~.spatial.Force` ``-c v`` at the
                        body origin; slide: callable forces ``-/+ c s' u`` on the two bodies.
                        Exactly MuJoCo's ``qfrc_damper = -damping qvel``.
joint armature          MuJoCo adds it to the joint-space mass matrix, the kinetic energy
                        ``a (u . (w_j - w_i))^2 / 2``. A hinge or ball joint whose parent
                        is the ground adds a disk ``a (I + u u^T) / 2`` (hinge, ``u`` in
                        the body frame: the child turns about ``u`` only, so its energy is
                        ``a (u . w)^2 / 2``) or ``a I`` (ball) to the child's inertia
                        tensor; a hinge between moving bodies becomes an
                        :class:`~.spatial.Armature` (that energy exactly; it couples the two
                        bodies' blocks of ``M``, so the model takes the dense step).
                        Armature of a ball joint between moving bodies (its axes are not
                        fixed in the parent) or of a slide joint is listed unmapped.
equality ``connect``    :class:`~.spatial.Spherical` at the anchor (bodies or sites; the two anchor
                        points must coincide at ``qpos0``, as the compiler makes them).
equality ``weld``       :class:`~.spatial.Fixed` in the ``qpos0`` relative pose (a ``relpose`` that
                        differs from it cannot be expressed and is listed unmapped).
======================  ====================================================================

URDF goes through MuJoCo's importer: links attached by ``fixed`` joints are fused into
their parents (MuJoCo's URDF default, same dynamics), a root link fixed to the world
becomes part of the ground, ``revolute``/``continuous`` joints are hinges, ``prismatic``
slides, ``floating`` free joints; ``<limit>`` becomes a joint range (listed unmapped).
MuJoCo checks each link's inertia before it fuses welded links, and rejects tensors with
a zero, negative or rounding-level principal moment or that break the triangle
inequality; robot files use such tensors on dummy roots and sensor frames welded to the
real body. The loader adds each such inertia to the heaviest acceptable link welded to it
(through any chain of ``fixed`` joints), as MuJoCo's fusion and Pinocchio would: the same
rigid body, the file's dynamics (:func:`_merge_welded_inertias`; the loader's warning
names the links). A link that moves on its own joint with such a tensor stays refused.
A URDF has no way to say that its root link moves freely (a legged robot, a humanoid, a
quadrotor): MuJoCo then welds the root to the world, and a file of a single link has
nothing left that moves. ``load(..., floating=True)`` gives every body that the world
carries without a joint a free joint before MuJoCo compiles the file (through
``mujoco.MjSpec``): the floating base of Pinocchio's ``JointModelFreeFlyer``, with MuJoCo's
free-joint coordinates (``qpos`` = position and unit quaternion ``w, x, y, z`` of the
link frame, ``qvel`` = its origin's velocity in the world frame and its angular velocity
in the link frame).

Everything else is listed, with counts, in one :class:`UnmappedFeatureWarning` (the joint
kind maps more, as said above -- spatial tendons through sites and around spheres and
cylinders too, their springs, dampers and actuators as forces at the sites and the tangent
points (:class:`~gaussopt.multibody.tree.SpatialTendon`,
:class:`~gaussopt.multibody.tree.TendonWrap`), their ``tendon`` equalities as exact rows,
their limits as opt-in hard stops -- and lists only the rest: spatial tendons with
pulleys, the equalities, limits and armature of tendons that wrap geoms, actuators with
other activation dynamics (``actearly``, activation limits that can bind, dcmotor, pid),
other gains and biases or other transmissions, and friction loss;
the ``damping`` and ``armature`` of actuators are added, times ``gear^2``, to
their joint's or tendon's, as MuJoCo does). The maximal kind lists:
tendons, actuators, contacts (geoms that can collide, explicit pairs), joint limits,
joint stiffness (springs about ``springref``), friction loss, armature of ball joints
between moving bodies and of slide joints, equality constraints of type ``joint``, ``tendon``, ``distance`` and
``flex``, inactive equalities, welds with a foreign ``relpose``, the soft-constraint
parameters (``solref``/``solimp``) of the mapped equalities, fluid forces, flexes,
plugins, mocap bodies (kept fixed at their reference pose), sensors, keyframes.
The integrator, time step and solver options are run settings, not model
features: pass gaussopt's own to :func:`gaussopt.simulate`.

Closed loops: MuJoCo's soft answer against gaussopt's exact one
----------------------------------------------------------------
MuJoCo closes an equality constraint softly: its constraint solver finds the
acceleration minimizing ``(a - a0)^T M (a - a0) + (J a - a_ref)^T R^-1 (J a - a_ref)``,
with the reference acceleration ``a_ref = -b (J v) - k r`` of a spring-damper on
the violation ``r`` (``solref``: time constant 0.02 s, damping ratio 1 by default)
and the regularizer ``R = (1 - d)/d diag(J M^-1 J^T)`` set by the impedance ``d``
(``solimp``: 0.9 at zero violation, up to 0.95). For one row at a consistent state
(``r = 0``, ``J v = 0``) this gives ``J a = (1 - d) J a0``: the constraint keeps only
90 % of the acceleration it should remove, the loop opens until the spring force
``k r`` balances the rest, and the violation settles at about ``(1 - d) |J a0| tc^2``
(``tc`` the time constant; with ``|J a0| ~ g`` that is ~ 4e-4 m), oscillating with
the motion. gaussopt solves Gauss's principle with the loop's equations as exact
rows: ``J a = gamma`` at every step, redundant rows included (the planar four-bar
closed by a ``connect`` has rank 2 of its 3 rows): MuJoCo's answer is the regularized
minimizer and gaussopt's is its limit ``R -> 0``. Measured on
tests/data/four_bar_connect.xml (tests/test_mjcf.py): at rest in the ``qpos0`` pose the
accelerations differ by 4.7 % (2-norm) with the default ``solimp`` (``d = 0.9``), 0.44 %
at ``d = 0.99``, 0.044 % at 0.999 (linear in ``1 - d``); over 2 s from rest MuJoCo's
loop opens by 6.3e-4 m (RK4 at dt 1e-4, so that only the softness counts; 1.6e-3 m
with its default Euler at dt 2e-3), gaussopt's stays closed to 2.5e-16 m (default
settings: the projection holds ``Phi = 0`` to rounding), and after 2 s the crank
angles differ by 0.22 rad (MuJoCo 1.876, gaussopt 1.6575265). Stiffened to its limit
(``solimp`` 0.9999, ``solref`` 1 ms, dt 20 us) MuJoCo reaches 1.6575265 rad, 4e-8 from
gaussopt's: the difference is the softness, not the model.

References
----------
E. Todorov, T. Erez, Y. Tassa, "MuJoCo: A physics engine for model-based control",
IROS 2012; the MuJoCo documentation, "Computation" (soft constraints, ``solref``,
``solimp``) and "XML Reference" (MJCF, URDF).

Examples
--------
>>> from gaussopt.multibody.io.mjcf import load        # doctest: +SKIP
>>> model = load("robot.xml")                               # doctest: +SKIP
>>> q0, v0 = model.initial_state()                          # doctest: +SKIP
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.multibody.spatial.elements import (GROUND, Armature, Body, Fixed, Force, Prismatic,
                                                 Revolute, RotationalDamper, Spherical)
from gaussopt.multibody.spatial.mechanism import Model

__all__ = ["load", "state_from_mujoco", "joint_accelerations", "UnmappedFeatureWarning",
           "InertiaRepairWarning"]

_INSTALL = 'pip install "gaussopt[mjcf]"'


class UnmappedFeatureWarning(UserWarning):
    """Features of a MuJoCo model that :func:`load` cannot map onto a gaussopt model
    and leaves out.

    Attributes
    ----------
    features : dict
        ``{feature: count}``, one entry per feature left out.
    """

    def __init__(self, message: str, features: Optional[dict] = None):
        super().__init__(message)
        self.features = dict(features or {})


def _mujoco():
    try:
        import mujoco
    except ImportError as e:                                     # pragma: no cover
        raise ImportError("gaussopt.multibody.load reads MJCF and URDF through MuJoCo's parser, "
                          f"which is not installed; install the extra: {_INSTALL}") from e
    return mujoco


# ----------------------------------------------------------------------------- quaternions
def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a0, a1, a2, a3 = a
    b0, b1, b2, b3 = b
    return np.array([a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
                     a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
                     a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1,
                     a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0])


def _qrot(e: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion ``(w, x, y, z)``."""
    e0, e1, e2, e3 = e
    return np.array([
        [e0 * e0 + e1 * e1 - e2 * e2 - e3 * e3, 2 * (e1 * e2 - e0 * e3), 2 * (e1 * e3 + e0 * e2)],
        [2 * (e1 * e2 + e0 * e3), e0 * e0 - e1 * e1 + e2 * e2 - e3 * e3, 2 * (e2 * e3 - e0 * e1)],
        [2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1), e0 * e0 - e1 * e1 - e2 * e2 + e3 * e3]])


def _axis_quat(u: np.ndarray, angle: float) -> np.ndarray:
    u = np.asarray(u, dtype=float) / np.linalg.norm(u)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * u])


def _Emat(e: np.ndarray) -> np.ndarray:
    """``E(p)`` (3x4): world angular velocity ``w = 2 E(p) p'``."""
    e0, e1, e2, e3 = e
    return np.array([[-e1, e0, -e3, e2], [-e2, e3, e0, -e1], [-e3, -e2, e1, e0]])


# ----------------------------------------------------------------------------- the mapping
@dataclass
class _Frame:
    """A gaussopt body made from MuJoCo body ``mj``: its ``stage``-th joint frame (a
    massless body inserted after joint ``stage`` of a multi-joint body), or the body
    itself (``stage = -1``, frame at the centroid, principal axes)."""

    name: str
    mj: int
    stage: int
    mass: float
    inertia: np.ndarray
    position: np.ndarray
    quat: np.ndarray


@dataclass
class _Jnt:
    """A MuJoCo joint between gaussopt bodies ``i`` (parent side; None: ground) and ``j``."""

    jid: int
    kind: int
    i: Optional[str]
    j: Optional[str]
    anchor: np.ndarray        # world, qpos0
    axis: np.ndarray          # world, qpos0
    dof: int
    mj: int                   # its MuJoCo body


@dataclass
class _Mapping:
    frames: list = field(default_factory=list)
    joints: list = field(default_factory=list)          # sp joints
    forces: list = field(default_factory=list)
    mjoints: list = field(default_factory=list)         # _Jnt, one per MuJoCo joint
    gravity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    unmapped: dict = field(default_factory=dict)
    owner: list = field(default_factory=list)           # gaussopt body (name/None) per MuJoCo body
    name: str = "mjcf"


def _flag(mj, m, name: str) -> bool:
    """True when the disable flag ``name`` is set."""
    return bool(m.opt.disableflags & int(getattr(mj.mjtDisableBit, name)))


def _names(mj, m, objtype, count: int, prefix: str) -> list[str]:
    out = []
    for k in range(count):
        nm = mj.mj_id2name(m, objtype, k)
        out.append(nm if nm else f"{prefix}{k}")
    return out


def _clean(name: str, taken: set) -> str:
    """A valid, unique gaussopt body name."""
    base = name.replace(".", "_") or "body"
    if base == GROUND:
        base = "ground_"
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


def _count(d: dict, key: str, n: int = 1) -> None:
    if n:
        d[key] = d.get(key, 0) + n


def _map(mj, m, name: Optional[str] = None) -> _Mapping:
    """Map the compiled MuJoCo model ``m`` (see the module docstring)."""
    out = _Mapping()
    un = out.unmapped
    d = mj.MjData(m)
    d.qpos[:] = m.qpos0
    mj.mj_kinematics(m, d)
    JF, JB, JH, JS = (int(mj.mjtJoint.mjJNT_FREE), int(mj.mjtJoint.mjJNT_BALL),
                      int(mj.mjtJoint.mjJNT_HINGE), int(mj.mjtJoint.mjJNT_SLIDE))
    bnames = _names(mj, m, mj.mjtObj.mjOBJ_BODY, m.nbody, "body")
    jnames = _names(mj, m, mj.mjtObj.mjOBJ_JOINT, m.njnt, "joint")
    taken: set = set()
    owner: list = [None] * m.nbody        # the gaussopt body carrying MuJoCo body b (None: ground)
    moving = [False] * m.nbody
    g = np.zeros(3) if _flag(mj, m, "mjDSBL_GRAVITY") else np.array(m.opt.gravity, dtype=float)
    out.gravity = g
    damp_on = not _flag(mj, m, "mjDSBL_DAMPER")
    inertia_add: dict = {}            # gaussopt body -> armature inertia (its frame)
    frame_of: dict = {}
    index: dict = {}

    for b in range(1, m.nbody):
        par = int(m.body_parentid[b])
        nj, ja = int(m.body_jntnum[b]), int(m.body_jntadr[b])
        mass = float(m.body_mass[b])
        if m.body_mocapid[b] >= 0:
            _count(un, "mocap bodies (held fixed at their reference pose)")
            owner[b] = None
            continue
        if nj == 0:
            if not moving[par]:
                owner[b] = None                        # welded to the world: ground
                continue
            if mass == 0.0 and not np.any(m.body_inertia[b]):
                owner[b] = owner[par]                  # a massless frame of its parent
                moving[b] = True
                continue
        moving[b] = True
        R = _qrot(np.array(d.xquat[b]))
        xiq = _qmul(np.array(d.xquat[b]), np.array(m.body_iquat[b]))
        real = _Frame(_clean(bnames[b], taken), b, -1, mass, np.diag(np.array(m.body_inertia[b])),
                      np.array(d.xipos[b]), xiq / np.linalg.norm(xiq))
        if nj == 0:
            out.frames.append(real)
            frame_of[real.name] = real
            index[real.name] = len(out.frames) - 1
            owner[b] = real.name
            out.joints.append(Fixed(owner[par], real.name, point=np.array(d.xpos[b])))
            continue
        if int(m.jnt_type[ja]) == JF:
            out.frames.append(real)
            frame_of[real.name] = real
            owner[b] = real.name
            out.mjoints.append(_Jnt(ja, JF, None, real.name, np.array(d.xpos[b]), np.zeros(3),
                                    int(m.jnt_dofadr[ja]), b))
            index[real.name] = len(out.frames) - 1
            dof = int(m.jnt_dofadr[ja])
            dmp = np.array(m.dof_damping[dof:dof + 6]) if damp_on else np.zeros(6)
            if np.any(dmp[:3]):
                out.forces.append(Force(real.name, _FreeDamper(index[real.name], dmp[:3], real,
                                                               np.array(d.xpos[b])),
                                        point=np.array(d.xpos[b])))
            for k in range(3):
                # -c_k (w . x_k) x_k about the body axes x_k (from the body to the ground)
                if dmp[3 + k]:
                    out.forces.append(RotationalDamper(real.name, None, R[:, k], float(dmp[3 + k])))
            if np.any(m.dof_armature[dof:dof + 6]):
                _count(un, "joint armature on free joints")
            continue
        prev = owner[par]
        for t in range(nj):
            jid = ja + t
            kind = int(m.jnt_type[jid])
            if t < nj - 1:
                fr = _Frame(_clean(f"{bnames[b]}_{jnames[jid]}", taken), b, t, 0.0,
                            np.zeros((3, 3)), np.array(d.xpos[b]), np.array(d.xquat[b]))
            else:
                fr = real
            out.frames.append(fr)
            frame_of[fr.name] = fr
            index[fr.name] = len(out.frames) - 1
            anchor, axis = np.array(d.xanchor[jid]), np.array(d.xaxis[jid])
            if kind == JH:
                out.joints.append(Revolute(prev, fr.name, point=anchor, axis=axis))
            elif kind == JS:
                out.joints.append(Prismatic(prev, fr.name, point=anchor, axis=axis))
            elif kind == JB:
                out.joints.append(Spherical(prev, fr.name, point=anchor))
            else:
                raise ModelError(f"MuJoCo joint {jnames[jid]!r} of body {bnames[b]!r}: a free "
                                 "joint must be the body's only joint (MuJoCo's rule too).")
            dof = int(m.jnt_dofadr[jid])
            out.mjoints.append(_Jnt(jid, kind, prev, fr.name, anchor, axis, dof, b))
            ndof = 3 if kind == JB else 1
            c = np.array(m.dof_damping[dof:dof + ndof]) if damp_on else np.zeros(ndof)
            if kind == JH and c[0]:
                out.forces.append(RotationalDamper(prev, fr.name, axis, float(c[0])))
            elif kind == JB and np.any(c):
                # -c_k (w_rel . x_k) x_k about the axes x_k of the body frame (MuJoCo's ball
                # velocities are in it): dampers carried by the child, reaction on the parent
                for k in range(3):
                    if c[k]:
                        out.forces.append(RotationalDamper(fr.name, prev, R[:, k], float(c[k])))
            elif kind == JS and c[0]:
                dm = _SlideDamper(float(c[0]), axis, anchor, index[fr.name], fr,
                                  None if prev is None else (index[prev], frame_of[prev]))
                out.forces.append(Force(fr.name, dm, point=anchor))
                if prev is not None:
                    out.forces.append(Force(prev, _Negated(dm), point=anchor))
            ground_parent = prev is None
            arm = np.array(m.dof_armature[dof:dof + ndof])
            if np.any(arm):
                if ground_parent and kind in (JH, JB):
                    Rf = _qrot(fr.quat)
                    if kind == JH:
                        # a disk about u, a (u u^T + (I - u u^T) / 2): its energy is
                        # a (u . w)^2 / 2 because the child turns about u only, and it is a
                        # physical inertia (a u u^T alone breaks the triangle inequality)
                        u = Rf.T @ axis
                        add = 0.5 * arm[0] * (np.eye(3) + np.outer(u, u))
                    else:
                        # a_k (w . x_k)^2 / 2 about the axes x_k of MuJoCo's body frame R
                        C = R.T @ Rf
                        add = C.T @ np.diag(arm) @ C
                    inertia_add[fr.name] = inertia_add.get(fr.name, 0.0) + add
                elif kind == JH:
                    # between moving bodies: a (u . (w_j - w_i))^2 / 2, exactly
                    out.forces.append(Armature(prev, fr.name, axis, float(arm[0])))
                else:
                    _count(un, "joint armature (on a ball joint between moving bodies, or on a "
                               "slide joint)")
            prev = fr.name
        owner[b] = real.name

    for fr in out.frames:
        if fr.name in inertia_add:
            fr.inertia = fr.inertia + inertia_add[fr.name]

    # gravity compensation: a constant force at the centroid
    for b in range(1, m.nbody):
        gc = float(m.body_gravcomp[b])
        fr = next((f for f in out.frames if f.mj == b and f.stage == -1), None)
        if gc and fr is not None and fr.mass > 0 and np.any(g):
            out.forces.append(Force(fr.name, -gc * fr.mass * g, point=fr.position))
    if np.any(m.jnt_actgravcomp):
        _count(un, "gravity compensation routed through actuators (actuatorgravcomp)",
               int(np.count_nonzero(m.jnt_actgravcomp)))

    _equalities(mj, m, d, out, owner)
    _unmapped(mj, m, un)
    out.owner = owner
    out.name = name if name is not None else _model_name(m)
    return out


def _model_name(m) -> str:
    raw = bytes(m.names)
    nm = raw[:raw.index(b"\0")].decode() if b"\0" in raw else ""
    return nm or "mjcf"


def _equality_specs(mj, m, d, owner: list, un: dict, couplings: Optional[list] = None,
                    fixed_tendons: frozenset = frozenset()):
    """The mapped equality constraints of ``m``: ``(connect, b1, b2, p1, p2)`` per active
    ``connect`` or ``weld`` that holds at ``qpos0`` (``p1``, ``p2`` its anchors, world, at
    ``qpos0``; a weld's anchor is body 2's origin), between different gaussopt bodies
    (``owner``); with a list ``couplings`` (the joint kind), ``(joint, id1, id2, polycoef,
    e)`` of every active ``joint`` equality and of every ``tendon`` equality of the
    ``fixed_tendons`` (``id2 = -1``: none) is appended to it; everything else is counted
    into ``un``. Used by both kinds."""
    if m.neq == 0:
        return []
    if _flag(mj, m, "mjDSBL_EQUALITY") or _flag(mj, m, "mjDSBL_CONSTRAINT"):
        return []                               # MuJoCo ignores them too
    EC, EW = int(mj.mjtEq.mjEQ_CONNECT), int(mj.mjtEq.mjEQ_WELD)
    EJ, ET = int(mj.mjtEq.mjEQ_JOINT), int(mj.mjtEq.mjEQ_TENDON)
    ncoupled = 0
    site = int(mj.mjtObj.mjOBJ_SITE)
    other = {int(getattr(mj.mjtEq, k)): k[5:].lower() for k in dir(mj.mjtEq)
             if k.startswith("mjEQ_")}
    out = []
    for e in range(m.neq):
        typ = int(m.eq_type[e])
        if not m.eq_active0[e]:
            _count(un, "inactive equality constraints (active=false at start)")
            continue
        if couplings is not None and typ in (EJ, ET):
            ids = (int(m.eq_obj1id[e]), int(m.eq_obj2id[e]))
            if typ == ET and not all(i < 0 or i in fixed_tendons for i in ids):
                _count(un, "tendon equality constraints of unmapped spatial tendons or of "
                           "tendons that wrap geoms")
                continue
            couplings.append((typ == EJ, ids[0], ids[1], np.array(m.eq_data[e, :5]), e))
            ncoupled += 1
            continue
        if typ not in (EC, EW):
            _count(un, f"equality constraints of type {other.get(typ, typ)!r}")
            continue
        o1, o2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        if int(m.eq_objtype[e]) == site:
            b1, b2 = int(m.site_bodyid[o1]), int(m.site_bodyid[o2])
            p1, p2 = np.array(d.site_xpos[o1]), np.array(d.site_xpos[o2])
            R1, R2 = (np.array(d.site_xmat[o]).reshape(3, 3) for o in (o1, o2))
        else:
            b1, b2 = o1, o2
            dat = np.array(m.eq_data[e])
            R1, R2 = (np.array(d.xmat[b]).reshape(3, 3) for b in (b1, b2))
            if typ == EC:
                p1 = d.xpos[b1] + R1 @ dat[0:3]
                p2 = d.xpos[b2] + R2 @ dat[3:6]
            else:
                # relpose: body2's pose in body1's frame; compare with the qpos0 one
                rp = R1.T @ (d.xpos[b2] - d.xpos[b1])
                rq = _qmul(np.array(d.xquat[b1]) * [1, -1, -1, -1], np.array(d.xquat[b2]))
                q_dat = dat[6:10]
                scale = 1.0 + float(np.linalg.norm(rp))
                if np.any(q_dat) and (np.linalg.norm(rp - dat[3:6]) > 1e-9 * scale or
                                      1.0 - abs(float(rq @ q_dat)) / np.linalg.norm(q_dat) > 1e-12):
                    _count(un, "weld constraints whose relpose differs from the qpos0 pose")
                    continue
                p1 = p2 = np.array(d.xpos[b2])
        bi, bj = owner[b1] if b1 else None, owner[b2] if b2 else None
        scale = 1.0 + float(np.linalg.norm(p1))
        if np.linalg.norm(p1 - p2) > 1e-9 * scale or (typ == EW and int(m.eq_objtype[e]) == site
                                                      and np.abs(R1 - R2).max() > 1e-9):
            _count(un, f"{other[typ]} constraints not satisfied at qpos0")
            continue
        if bi == bj:
            continue                             # both sides on one rigid body (or the ground)
        out.append((typ == EC, b1, b2, np.array(p1), np.array(p2)))
    if out or ncoupled:
        _count(un, "soft-constraint parameters (solref/solimp) of the mapped equality "
                   "constraints: gaussopt holds them exactly", len(out) + ncoupled)
    return out


def _equalities(mj, m, d, out: _Mapping, owner: list) -> None:
    for connect, b1, b2, p1, p2 in _equality_specs(mj, m, d, owner, out.unmapped):
        bi, bj = owner[b1] if b1 else None, owner[b2] if b2 else None
        if connect:
            out.joints.append(Spherical(bj, bi, point=p1))
        else:
            out.joints.append(Fixed(bj, bi, point=p1))


def _nact(m) -> int:
    """MuJoCo's number of actuators (``nactuator``; before MuJoCo 4, whose actuators may
    take several controls and give several outputs, ``nu``, one control each)."""
    return int(getattr(m, "nactuator", m.nu))


def _ctrl(m, i: int) -> int:
    """Actuator ``i``'s (first) control: its index in ``ctrl``, ``ctrlrange``,
    ``ctrllimited`` and ``key_ctrl`` (MuJoCo 4's ``actuator_ctrladr``; ``i`` before)."""
    return int(m.actuator_ctrladr[i]) if hasattr(m, "actuator_ctrladr") else i


def _out(m, i: int) -> int:
    """Actuator ``i``'s (first) output: its index in ``actuator_gear``, ``lengthrange``,
    ``acc0`` and the data's ``actuator_length`` (MuJoCo 4's ``actuator_outadr``; ``i``
    before)."""
    return int(m.actuator_outadr[i]) if hasattr(m, "actuator_outadr") else i


def _unmapped(mj, m, un: dict, tree: bool = False) -> None:
    """Count the features the mapping leaves out (``tree``: of the joint-coordinate kind,
    which maps the stiffness of hinges and slides)."""
    if not tree:                                 # (the joint kind counts its own)
        _count(un, "tendons", int(m.ntendon))
        if not _flag(mj, m, "mjDSBL_ACTUATION"):
            _count(un, "actuators", _nact(m))
    constraint = not _flag(mj, m, "mjDSBL_CONSTRAINT")
    if constraint and not _flag(mj, m, "mjDSBL_CONTACT") and not tree:
        coll = int(np.count_nonzero((m.geom_contype != 0) | (m.geom_conaffinity != 0)))
        _count(un, "contacts: geoms that can collide", coll)
        _count(un, "contacts: explicit contact pairs", int(m.npair))
    if constraint and not _flag(mj, m, "mjDSBL_LIMIT"):
        if tree:
            scalar = np.isin(np.asarray(m.jnt_type), (int(mj.mjtJoint.mjJNT_HINGE),
                                                      int(mj.mjtJoint.mjJNT_SLIDE)))
            lim = np.asarray(m.jnt_limited) != 0
            _count(un, "joint limits of hinges and slides (hard stops, not in model.system: "
                       "model.with_limits() adds them)", int(np.count_nonzero(lim & scalar)))
            _count(un, "joint limits of ball joints", int(np.count_nonzero(lim & ~scalar)))
        else:
            _count(un, "joint limits", int(np.count_nonzero(m.jnt_limited)))
    if not _flag(mj, m, "mjDSBL_SPRING"):
        if not tree:
            _count(un, "joint stiffness (springs about springref)",
                   int(np.count_nonzero(m.jnt_stiffness)))
        if hasattr(m, "jnt_stiffnesspoly"):
            _count(un, "nonlinear joint stiffness (stiffnesspoly)",
                   int(np.count_nonzero(np.any(np.asarray(m.jnt_stiffnesspoly) != 0, axis=-1))))
    if not _flag(mj, m, "mjDSBL_DAMPER") and hasattr(m, "dof_dampingpoly"):
        _count(un, "nonlinear joint damping (dampingpoly)",
               int(np.count_nonzero(np.any(np.asarray(m.dof_dampingpoly) != 0, axis=-1))))
    if constraint and not _flag(mj, m, "mjDSBL_FRICTIONLOSS"):
        _count(un, "joint friction loss", int(np.count_nonzero(m.dof_frictionloss)))
    if m.opt.density or m.opt.viscosity:
        _count(un, "fluid forces (density/viscosity)")
    _count(un, "flexes (deformable bodies)", int(m.nflex))
    _count(un, "plugins", int(m.nplugin))
    _count(un, "sensors", int(m.nsensor))
    if not tree:
        _count(un, "keyframes", int(m.nkey))


# ----------------------------------------------------------------------------- joint coordinates
@dataclass
class _TreeMapping:
    """What the joint-coordinate kind is built from: links, joints, closures."""

    links: list = field(default_factory=list)
    joints: list = field(default_factory=list)
    forces: list = field(default_factory=list)          # fixed tendons, actuators
    gravity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    unmapped: dict = field(default_factory=dict)
    name: str = "mjcf"
    merged: int = 0
    actuators: list = field(default_factory=list)       # MuJoCo ids of the mapped actuators
    ranges: dict = field(default_factory=dict)          # joint -> (lower, upper): hard stops
    tendon_ranges: dict = field(default_factory=dict)   # fixed tendon -> (lower, upper)
    contact_pairs: list = field(default_factory=list)   # ContactPair of the colliding geoms
    #: mocap name -> the parts that stay at its reference pose when it moves
    mocap_fixed: dict = field(default_factory=dict)


def _compose(pa, Ra, pb, Rb):
    """The pose ``b`` given in the frame of pose ``a``, in the frame ``a`` is given in."""
    return pa + Ra @ pb, Ra @ Rb


def _tree_map(mj, m, name: Optional[str] = None, exact_links: Optional[dict] = None) -> _TreeMapping:
    """Map the compiled MuJoCo model ``m`` onto :mod:`gaussopt.multibody.tree` elements: a
    link per body with joints (its offset the pose of the body in its parent link's frame),
    joint-less bodies merged into the link that carries them (mass, centroid and inertia
    combined) or into the world, every joint with MuJoCo's ``qpos0``, damping, armature and
    (hinge, slide) stiffness about ``qpos_spring``; ``connect`` and ``weld`` equalities as
    closures; fixed tendons, actuators on hinges, slides and fixed tendons
    (:func:`_tree_actuators`), ``joint`` and ``tendon`` equalities. ``exact_links``: the
    bodies that carry a placeholder inertia (:func:`_placeholders`) and their file's
    inertias."""
    from gaussopt.multibody.tree import (Connect, JointEquality, Link, Mocap, TendonEquality,
                                         TreeJoint, Weld)

    out = _TreeMapping()
    un = out.unmapped
    d = mj.MjData(m)
    d.qpos[:] = m.qpos0
    mj.mj_kinematics(m, d)
    JF, JB = int(mj.mjtJoint.mjJNT_FREE), int(mj.mjtJoint.mjJNT_BALL)
    kinds = {int(mj.mjtJoint.mjJNT_FREE): "free", int(mj.mjtJoint.mjJNT_BALL): "ball",
             int(mj.mjtJoint.mjJNT_SLIDE): "slide", int(mj.mjtJoint.mjJNT_HINGE): "hinge"}
    bnames = _names(mj, m, mj.mjtObj.mjOBJ_BODY, m.nbody, "body")
    jnames = _names(mj, m, mj.mjtObj.mjOBJ_JOINT, m.njnt, "joint")
    jtaken: set = set()
    out.gravity = np.zeros(3) if _flag(mj, m, "mjDSBL_GRAVITY") else np.array(m.opt.gravity, float)
    damp_on = not _flag(mj, m, "mjDSBL_DAMPER")
    spring_on = not _flag(mj, m, "mjDSBL_SPRING")
    limits_on = not _flag(mj, m, "mjDSBL_CONSTRAINT") and not _flag(mj, m, "mjDSBL_LIMIT")
    act_on = not _flag(mj, m, "mjDSBL_ACTUATION")
    jname_of: dict = {}                      # MuJoCo joint id -> the tree joint's name
    taken: set = {"world", GROUND}
    owner: list = [None] * m.nbody          # the link carrying MuJoCo body b (None: the world)
    rel: list = [(np.zeros(3), np.eye(3))] * m.nbody     # body b's frame in its owner's
    mass: dict = {}                          # link -> [m, m c, sum of (I + m c c^T-ish)]
    gc: dict = {}
    link_body: dict = {}
    #: MuJoCo body -> the mocap body it is part of (the mocap body itself and the joint-less
    #: bodies under it); mocap body -> what stays at its reference pose when it moves
    mocap_of: dict = {}
    mocap_fixed: dict = {}
    for b in range(1, m.nbody):
        par = int(m.body_parentid[b])
        nj, ja = int(m.body_jntnum[b]), int(m.body_jntadr[b])
        off = _compose(*rel[par], np.array(m.body_pos[b], float), _qrot(np.array(m.body_quat[b])))
        if m.body_mocapid[b] >= 0:
            nj = 0
            off = (np.array(d.xpos[b]), np.array(d.xmat[b]).reshape(3, 3))
            owner[b], rel[b] = None, off
            mocap_of[b] = b
            mocap_fixed[b] = []
            continue
        if par in mocap_of:
            if nj == 0:
                mocap_of[b] = mocap_of[par]
            else:
                mocap_fixed[mocap_of[par]].append(f"link {bnames[b]!r}")
        Rc = _qrot(np.array(m.body_iquat[b]))
        body_m = float(m.body_mass[b])
        body_c = np.array(m.body_ipos[b], float)
        body_I = Rc @ np.diag(np.array(m.body_inertia[b], float)) @ Rc.T
        if nj == 0:
            owner[b], rel[b] = owner[par], off
            if owner[par] is None:
                continue                           # welded to the world
            out.merged += 1
            pb, Rb = off                           # merge the body into its owner
            key = owner[par]
            c = pb + Rb @ body_c
            acc = mass[key]
            acc[0] += body_m
            acc[1] = acc[1] + body_m * c
            acc[2] = acc[2] + Rb @ body_I @ Rb.T + body_m * (c @ c * np.eye(3) - np.outer(c, c))
            if float(m.body_gravcomp[b]) != gc[key]:
                _count(un, "gravity compensation of bodies merged into a link with another "
                           "gravcomp")
            continue
        nm = _clean(bnames[b], taken)
        owner[b], rel[b] = nm, (np.zeros(3), np.eye(3))
        link_body[nm] = b
        mass[nm] = [body_m, body_m * body_c,
                    body_I + body_m * (body_c @ body_c * np.eye(3) - np.outer(body_c, body_c))]
        if exact_links and bnames[b] in exact_links:
            # the placeholder out (at the origin: mass and moments _PLACEHOLDER), the
            # file's inertia in (MuJoCo's body frame of a URDF link is the link's frame)
            fm, fc, fJ = exact_links[bnames[b]]
            acc = mass[nm]
            acc[0] = acc[0] - _PLACEHOLDER + fm
            acc[1] = acc[1] + fm * fc
            acc[2] = (acc[2] - _PLACEHOLDER * np.eye(3) + fJ
                      + fm * (fc @ fc * np.eye(3) - np.outer(fc, fc)))
            if abs(acc[0]) <= 16 * np.finfo(float).eps * _PLACEHOLDER:
                acc[0] = 0.0
        gc[nm] = float(m.body_gravcomp[b])
        parent = owner[par]
        pos, R = off
        for t in range(nj):
            jid = ja + t
            kind = kinds[int(m.jnt_type[jid])]
            if kind == "free" and (parent is not None or nj != 1):
                raise ModelError(f"MuJoCo joint {jnames[jid]!r} of body {bnames[b]!r}: a free "
                                 "joint of a body that moves with another one has no joint "
                                 "coordinates here; load the model with coordinates='maximal'.")
            dof, qa = int(m.jnt_dofadr[jid]), int(m.jnt_qposadr[jid])
            nd = {"free": 6, "ball": 3}.get(kind, 1)
            nq = {"free": 7, "ball": 4}.get(kind, 1)
            damp = np.array(m.dof_damping[dof:dof + nd]) if damp_on else np.zeros(nd)
            stiff = float(m.jnt_stiffness[jid]) if spring_on else 0.0
            sref = np.array(m.qpos_spring[qa:qa + nq], dtype=float)
            scalar = kind in ("hinge", "slide")
            afr = (tuple(np.array(m.jnt_actfrcrange[jid], dtype=float))
                   if scalar and m.jnt_actfrclimited[jid] and act_on else None)
            jname_of[jid] = _clean(jnames[jid], jtaken)
            if scalar and m.jnt_limited[jid] and limits_on:
                out.ranges[jname_of[jid]] = tuple(float(x) for x in m.jnt_range[jid])
            out.joints.append(TreeJoint(
                jname_of[jid], kind, nm, position=tuple(np.array(m.jnt_pos[jid])),
                axis=tuple(np.array(m.jnt_axis[jid])), reference=float(m.qpos0[qa]),
                damping=tuple(damp), armature=tuple(np.array(m.dof_armature[dof:dof + nd])),
                stiffness=stiff, spring_reference=float(sref[0]) if scalar else tuple(sref),
                actuator_force_range=afr))
        out.links.append([nm, parent, pos, R])
    # the links with their merged masses (centroid and inertia about it, in the link frame)
    links = []
    for nm, parent, pos, R in out.links:
        mt, h, J = mass[nm]
        c = h / mt if mt > 0 else np.zeros(3)
        Jc = J - mt * (c @ c * np.eye(3) - np.outer(c, c))
        from gaussopt.multibody.tree.tree_assembly import quat_matrix_to_quat
        links.append(Link(nm, parent, position=tuple(pos), orientation=tuple(quat_matrix_to_quat(R)),
                          mass=mt, com=tuple(c), inertia=tuple(map(tuple, 0.5 * (Jc + Jc.T))),
                          gravity_scale=1.0 - gc[nm]))
    out.links = links
    if np.any(m.jnt_actgravcomp):
        _count(un, "gravity compensation routed through actuators (actuatorgravcomp)",
               int(np.count_nonzero(m.jnt_actgravcomp)))
    fixed = _tree_tendons(mj, m, out, jname_of, spring_on, damp_on, act_on)
    spatial, wrapping = _tree_spatial_tendons(mj, m, d, out, owner, link_body, mocap_of,
                                              spring_on, damp_on, act_on)
    _offtree_armature(m, {**fixed, **spatial}, un)

    def site_of(sid: int, world: bool = False):
        """(link, position, rotation) of MuJoCo site ``sid`` in the frame of the link that
        carries it, at ``qpos0``; on the world (a site fixed in it) ``(None, position,
        rotation)`` in the world's where ``world``, else None; None on a mocap body."""
        b = int(m.site_bodyid[sid])
        o = owner[b] if b else None
        if world and o is None and b not in mocap_of and int(m.body_weldid[b]) == 0:
            return (None, tuple(float(x) for x in d.site_xpos[sid]),
                    tuple(map(tuple, np.array(d.site_xmat[sid]).reshape(3, 3))))
        if o is None or b in mocap_of:
            return None
        lb = link_body[o]
        Ro, xo = np.array(d.xmat[lb]).reshape(3, 3), np.array(d.xpos[lb], dtype=float)
        Rs = np.array(d.site_xmat[sid]).reshape(3, 3)
        return (o, tuple(Ro.T @ (np.array(d.site_xpos[sid]) - xo)),
                tuple(map(tuple, Ro.T @ Rs)))

    _tree_actuators(mj, m, out, jname_of, fixed, act_on, spatial, site_of)
    # closures: the anchors in the frames of the links that carry them (world: world)
    couplings: list = []
    tendons = {**fixed, **spatial}
    specs = _equality_specs(mj, m, d, owner, un, couplings,
                            frozenset(t for t in tendons if t not in wrapping))
    for joint, i1, i2, poly, e in couplings:
        label = mj.mj_id2name(m, mj.mjtObj.mjOBJ_EQUALITY, e) or None
        if joint:
            out.joints.append(JointEquality(jname_of[i1], jname_of[i2] if i2 >= 0 else None,
                                            tuple(poly), name=label))
        else:
            out.joints.append(TendonEquality(tendons[i1], tendons[i2] if i2 >= 0 else None,
                                             tuple(poly), name=label))
    mocaps: dict = {}                         # mocap body -> its Mocap's name
    for connect, b1, b2, p1, p2 in specs:
        ends = []
        for b, P in ((b1, p1), (b2, p2)):
            o = owner[b] if b else None
            if o is None and b in mocap_of:
                mb = mocap_of[b]
                if mb not in mocaps:
                    mocaps[mb] = _clean(bnames[mb], taken)
                Rm = np.array(d.xmat[mb]).reshape(3, 3)
                ends.append((mocaps[mb], Rm.T @ (P - d.xpos[mb]), Rm))
            elif o is None:
                ends.append((None, P, np.eye(3)))
            else:
                lb = link_body[o]
                Ro = np.array(d.xmat[lb]).reshape(3, 3)
                ends.append((o, Ro.T @ (P - d.xpos[lb]), Ro))
        (l1, s1, R1), (l2, s2, R2) = ends
        if connect:
            out.joints.append(Connect(l1, tuple(s1), l2, tuple(s2)))
        else:
            out.joints.append(Weld(l1, tuple(s1), l2, tuple(s2),
                                   rotation=tuple(map(tuple, R1.T @ R2))))
    if not _flag(mj, m, "mjDSBL_CONSTRAINT") and not _flag(mj, m, "mjDSBL_CONTACT"):
        _tree_contacts(mj, m, d, out, owner, link_body)
    gnames = _names(mj, m, mj.mjtObj.mjOBJ_GEOM, m.ngeom, "geom")
    for b in mocap_fixed:
        if b not in mocaps:
            _count(un, "mocap bodies (held fixed at their reference pose: no equality names "
                       "them)")
    for mb, nm in mocaps.items():
        out.links.append(Mocap(nm, position=tuple(float(x) for x in d.xpos[mb]),
                               orientation=tuple(float(x) for x in d.xquat[mb])))
        geoms = {gnames[g] for g in range(m.ngeom) if int(m.geom_bodyid[g]) in mocap_of
                 and mocap_of[int(m.geom_bodyid[g])] == mb}
        hit = sorted({g for pr in out.contact_pairs for g in (pr.geom1, pr.geom2)} & geoms)
        out.mocap_fixed[nm] = tuple(mocap_fixed[mb] + [f"contact geom {g!r}" for g in hit])
    _unmapped(mj, m, un, tree=True)
    out.name = name if name is not None else _model_name(m)
    return out


#: MuJoCo's geom types (``mjtGeom``) by number
_GEOM_TYPES = {0: "plane", 1: "hfield", 2: "sphere", 3: "capsule", 4: "ellipsoid",
               5: "cylinder", 6: "box", 7: "mesh", 8: "sdf"}
#: the geom types the contacts map
_MAPPED_GEOMS = ("plane", "sphere", "capsule", "cylinder", "box")


def _few(names, k: int = 6) -> str:
    names = list(names)
    return ", ".join(names[:k]) + (f", ... ({len(names)} in all)" if len(names) > k else "")


def _tree_contacts(mj, m, d, out: _TreeMapping, owner: list, link_body: dict) -> None:
    """The colliding geom pairs of the joint kind (:class:`~gaussopt.multibody.tree.
    tree_geometry.ContactPair`): MuJoCo's filter (``contype``/``conaffinity``: a pair
    collides if ``(c1 & a2) | (c2 & a1)``; never two geoms of one body or of bodies welded
    together, nor of a body and its parent unless ``filterparent`` is disabled, nor of
    bodies named by an ``<exclude>``, nor two geoms of the world) and the explicit
    ``<pair>`` elements (their friction and ``condim``; a pair found by both is the explicit
    one, as MuJoCo merges them). Friction is MuJoCo's mix: the higher ``priority`` geom's,
    else the larger sliding coefficient of the two; ``condim`` likewise (the larger).
    Mapped: world planes against spheres, capsules (two end spheres), cylinders (the
    lowest points of their two rims; ``with_contacts(rim_points=K)``: K points on each
    rim) and boxes (8 corners); spheres against spheres, capsules and boxes, capsules
    against capsules (one point, at the closest points of the centres, axis segments or
    box), capsules against boxes (14 points: the capsule's end spheres against the box, the
    capsule against the box's 12 edges, :meth:`~gaussopt.multibody.tree.tree_geometry.
    ContactPair.parts`), spheres and capsules against solid cylinders (one point: a
    capsule's at its axis's point nearest the cylinder); ``condim`` 1 (frictionless) and 3 (sliding friction). Everything else is counted
    in ``out.unmapped``."""
    from gaussopt.multibody.tree.tree_geometry import PAIR_KINDS, ContactPair

    un = out.unmapped
    gnames = _names(mj, m, mj.mjtObj.mjOBJ_GEOM, m.ngeom, "geom")
    gtype = [_GEOM_TYPES.get(int(x), str(int(x))) for x in m.geom_type]
    body = np.asarray(m.geom_bodyid)
    weld = np.asarray(m.body_weldid)
    wparent = weld[np.asarray(m.body_parentid)[weld]]
    filterparent = not _flag(mj, m, "mjDSBL_FILTERPARENT")
    excluded = set(int(x) for x in np.asarray(m.exclude_signature).reshape(-1))
    ct, ca = np.asarray(m.geom_contype), np.asarray(m.geom_conaffinity)

    def frame(g):
        """The geom's pose in the frame of the link carrying it (world: world)."""
        o = owner[int(body[g])]
        P, Rg = np.array(d.geom_xpos[g], float), np.array(d.geom_xmat[g], float).reshape(3, 3)
        if o is None:
            return None, P, Rg
        lb = link_body[o]
        Ro = np.array(d.xmat[lb], float).reshape(3, 3)
        return o, Ro.T @ (P - d.xpos[lb]), Ro.T @ Rg

    def ends(g, o, F):
        """The two ends of geom ``g``'s axis (a capsule's segment, a cylinder's rim
        centres; its frame's +z end first) at its centre ``o`` and rotation ``F``."""
        half = float(m.geom_size[g][1])
        return np.array([o + F[:, 2] * half, o - F[:, 2] * half])

    candidates: dict = {}                       # (g1, g2) -> (friction, condim, source)
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            if not ((ct[g1] & ca[g2]) or (ct[g2] & ca[g1])):
                continue
            b1, b2 = int(body[g1]), int(body[g2])
            w1, w2 = int(weld[b1]), int(weld[b2])
            if w1 == w2 or (owner[b1] is None and owner[b2] is None):
                continue
            if filterparent and w1 != 0 and w2 != 0 and (w1 == wparent[w2] or w2 == wparent[w1]):
                continue
            if ((min(b1, b2) << 16) + max(b1, b2)) in excluded:
                continue
            p1, p2 = int(m.geom_priority[g1]), int(m.geom_priority[g2])
            if p1 != p2:
                g = g1 if p1 > p2 else g2
                mu, dim = float(m.geom_friction[g][0]), int(m.geom_condim[g])
            else:
                mu = max(float(m.geom_friction[g1][0]), float(m.geom_friction[g2][0]))
                dim = max(int(m.geom_condim[g1]), int(m.geom_condim[g2]))
            candidates[(g1, g2)] = (mu, dim, "filter")
    for k in range(m.npair):
        g1, g2 = sorted((int(m.pair_geom1[k]), int(m.pair_geom2[k])))
        candidates[(g1, g2)] = (float(m.pair_friction[k][0]), int(m.pair_dim[k]), "pair")
    bad_types: dict = {}
    mapped_geoms: set = set()
    for (g1, g2), (mu, dim, src) in candidates.items():
        t1, t2 = gtype[g1], gtype[g2]
        odd = [g for g, t in ((g1, t1), (g2, t2)) if t not in _MAPPED_GEOMS]
        if odd:
            for g in odd:
                bad_types.setdefault(gtype[g], set()).add(gnames[g])
            continue
        if _MAPPED_GEOMS.index(t1) > _MAPPED_GEOMS.index(t2):
            g1, g2, t1, t2 = g2, g1, t2, t1
        kind = f"{t1}-{t2}"
        if kind not in PAIR_KINDS:
            _count(un, f"contacts: {kind} pairs (not mapped)")
            continue
        if dim not in (1, 3):
            _count(un, "contacts: pairs with torsional or rolling friction (condim 4, 6; not "
                       "mapped)")
            continue
        (l1, o1, F1), (l2, o2, F2) = frame(g1), frame(g2)
        if t1 == "plane" and l1 is not None:
            _count(un, "contacts: planes on moving links (not mapped)")
            continue
        if l1 is None and l2 is None:
            continue                                  # two geoms of the world
        size = np.array(m.geom_size[g2], float)
        axis, box2 = (), ()
        if t2 == "sphere":
            pts, r2 = o2[None, :], size[0]
        elif t2 in ("capsule", "cylinder"):         # (end spheres; a cylinder's rim centres)
            pts, r2 = ends(g2, o2, F2), size[0]
            if t2 == "cylinder":
                axis = tuple(float(x) for x in F2[:, 2])
        elif t1 in ("sphere", "capsule"):             # (a box: its centre, frame, sizes)
            pts, r2 = o2[None, :], 0.0
            box2 = tuple(tuple(float(x) for x in r) for r in (size, F2[:, 0], F2[:, 1]))
        else:
            sg = np.array([[sx, sy, sz] for sx in (1, -1) for sy in (1, -1) for sz in (1, -1)])
            pts, r2 = o2 + (sg * size) @ F2.T, 0.0
        r1 = 0.0 if t1 == "plane" else float(m.geom_size[g1][0])
        seg1 = (tuple(tuple(float(x) for x in e) for e in ends(g1, o1, F1))
                if t1 == "capsule" else ())
        out.contact_pairs.append(ContactPair(
            gnames[g1], gnames[g2], kind, mu if dim == 3 else 0.0, l1, l2,
            tuple(float(x) for x in o1), tuple(tuple(float(x) for x in r) for r in F1),
            tuple(tuple(float(x) for x in r) for r in pts), r1, float(r2), src, axis,
            segment1=seg1, box2=box2))
        mapped_geoms.update((gnames[g1], gnames[g2]))
    for t, names in bad_types.items():
        _count(un, f"contacts: {t} geoms (not mapped: {_few(sorted(names))})", len(names))
    if out.contact_pairs:
        _count(un, "contacts: geom pairs mapped, opt-in (not in model.system: "
                   "model.with_contacts() adds them as hard contacts, restitution 0 by default; "
                   f"geoms {_few(sorted(mapped_geoms))})", len(out.contact_pairs))


def _offtree_armature(m, mapped: dict, un: dict) -> None:
    """Count the mapped tendons with an armature whose degrees of freedom lie on different
    branches of the tree (two of them, neither an ancestor of the other): their armature's
    kinetic energy ``a L'^2 / 2`` couples those degrees of freedom, and gaussopt keeps the
    whole ``a J^T J`` in ``M`` (the exact dynamics), where MuJoCo adds its entries only
    where its sparse ``M`` has room (within each branch: ``mj_tendonArmature``), so the
    accelerations differ from MuJoCo's by the dropped coupling (its own test,
    ``core_smooth/ten_armature_offtree.xml``, checks that truncation)."""
    if not hasattr(m, "ten_J_rownnz"):
        return
    parent = [int(x) for x in m.dof_parentid]

    def chain(i: int) -> set:
        out = set()
        while i >= 0:
            out.add(i)
            i = parent[i]
        return out

    count = 0
    for t in mapped:
        if not float(m.tendon_armature[t]):
            continue
        adr, nnz = int(m.ten_J_rowadr[t]), int(m.ten_J_rownnz[t])
        dofs = [int(x) for x in m.ten_J_colind[adr:adr + nnz]]
        up = {i: chain(i) for i in dofs}
        if any(j not in up[i] and i not in up[j] for i in dofs for j in dofs):
            count += 1
    if count:
        _count(un, "tendon armature coupling branches of the tree: kept whole here (the "
                   "exact a J^T J); MuJoCo keeps only its entries within each branch, so the "
                   "accelerations differ from MuJoCo's", count)


def _tree_tendons(mj, m, out: _TreeMapping, jname_of: dict, spring_on: bool, damp_on: bool,
                  act_on: bool) -> dict:
    """The fixed tendons of ``m`` as :class:`~gaussopt.multibody.tree.FixedTendon` into
    ``out.forces`` (stiffness about ``tendon_lengthspring``, damping, armature, the actuator
    force range) and their ranges into ``out.tendon_ranges`` (hard stops, opt-in:
    ``model.with_limits()``); returns MuJoCo tendon id -> name of the mapped ones. Spatial
    tendons through sites and around geoms are left to :func:`_tree_spatial_tendons`; those
    with pulleys, friction loss and nonlinear springs and dampers are counted unmapped."""
    from gaussopt.multibody.tree import FixedTendon

    un = out.unmapped
    JOINT = int(mj.mjtWrap.mjWRAP_JOINT)
    tnames = _names(mj, m, mj.mjtObj.mjOBJ_TENDON, m.ntendon, "tendon")
    taken: set = set()
    fixed: dict = {}
    spatial = {int(mj.mjtWrap.mjWRAP_SITE), int(mj.mjtWrap.mjWRAP_SPHERE),
               int(mj.mjtWrap.mjWRAP_CYLINDER)}
    for i in range(m.ntendon):
        adr, num = int(m.tendon_adr[i]), int(m.tendon_num[i])
        types = {int(m.wrap_type[w]) for w in range(adr, adr + num)}
        if types <= spatial:
            continue                    # (_tree_spatial_tendons)
        if types != {JOINT}:
            _count(un, "spatial tendons with pulleys")
            continue
        terms = tuple((jname_of[int(m.wrap_objid[w])], float(m.wrap_prm[w]))
                      for w in range(adr, adr + num))
        limited = _tendon_extras(mj, m, i, un, "fixed", spring_on, damp_on)
        fixed[i] = _clean(tnames[i], taken)
        if limited:
            out.tendon_ranges[fixed[i]] = tuple(float(x) for x in m.tendon_range[i])
        out.forces.append(FixedTendon(fixed[i], terms,
                                      **_tendon_params(m, i, spring_on, damp_on, act_on)))
    return fixed


def _tendon_params(m, i: int, spring_on: bool, damp_on: bool, act_on: bool) -> dict:
    """Tendon ``i``'s spring (its dead band), damper, armature and actuator force range, as
    :class:`~gaussopt.multibody.tree.FixedTendon` and ``SpatialTendon`` take them."""
    return dict(stiffness=float(m.tendon_stiffness[i]) if spring_on else 0.0,
                damping=float(m.tendon_damping[i]) if damp_on else 0.0,
                spring_length=tuple(np.array(m.tendon_lengthspring[i], dtype=float)),
                armature=float(m.tendon_armature[i]),
                actuator_force_range=(tuple(np.array(m.tendon_actfrcrange[i], dtype=float))
                                      if m.tendon_actfrclimited[i] and act_on else None))


def _tendon_extras(mj, m, i: int, un: dict, kind: str, spring_on: bool, damp_on: bool) -> bool:
    """Count tendon ``i``'s features that the tree kind lists (its range as an opt-in hard
    stop, friction loss, nonlinear springs and dampers); whether its range acts."""
    constraint = not _flag(mj, m, "mjDSBL_CONSTRAINT")
    limited = bool(constraint and not _flag(mj, m, "mjDSBL_LIMIT") and m.tendon_limited[i])
    if limited:
        _count(un, f"limits of {kind} tendons (hard stops, not in model.system: "
                   "model.with_limits() adds them)")
    if constraint and not _flag(mj, m, "mjDSBL_FRICTIONLOSS") and m.tendon_frictionloss[i]:
        _count(un, "tendon friction loss")
    if (spring_on and np.any(m.tendon_stiffnesspoly[i])) or (
            damp_on and np.any(m.tendon_dampingpoly[i])):
        _count(un, "nonlinear tendon stiffness or damping (stiffnesspoly/dampingpoly)")
    return limited


def _tree_spatial_tendons(mj, m, d, out: _TreeMapping, owner: list, link_body: dict,
                          mocap_of: dict, spring_on: bool, damp_on: bool, act_on: bool
                          ) -> tuple[dict, set]:
    """The spatial tendons of ``m`` through sites and around spheres and cylinders as
    :class:`~gaussopt.multibody.tree.SpatialTendon` into ``out.forces`` (the sites, the
    wrapping geoms (:class:`~gaussopt.multibody.tree.TendonWrap`) and their side sites in
    the frames of the links that carry them, from their ``qpos0`` poses; stiffness about
    ``tendon_lengthspring``, damping, armature, the actuator force range); returns
    ``(mapped, wrapping)``: MuJoCo tendon id -> name of the mapped ones (the actuators and
    equalities along them are mapped with the others), and the ids of those that wrap a
    geom. Their limits go to ``out.tendon_ranges`` (hard stops, opt-in:
    ``model.with_limits()``); their friction loss and nonlinear springs are counted
    unmapped, and so are a wrapping tendon's limits, armature and equalities (their terms
    need the string's curvature on the geom), side sites on another link than their geom's
    or inside it (MuJoCo's iterative inside wrapping) and pulleys."""
    from gaussopt.multibody.tree import SpatialTendon, TendonWrap

    un = out.unmapped
    SITE = int(mj.mjtWrap.mjWRAP_SITE)
    shapes = {int(mj.mjtWrap.mjWRAP_SPHERE): "sphere", int(mj.mjtWrap.mjWRAP_CYLINDER): "cylinder"}
    tnames = _names(mj, m, mj.mjtObj.mjOBJ_TENDON, m.ntendon, "tendon")
    taken = {f.name for f in out.forces if hasattr(f, "terms")}
    mapped: dict = {}
    wrapping: set = set()

    def frame(b):
        """(link or None, rotation, origin) of the frame that carries MuJoCo body ``b``."""
        o = owner[b] if b else None
        if o is None:
            return None, np.eye(3), np.zeros(3)
        lb = link_body[o]
        return o, np.array(d.xmat[lb]).reshape(3, 3), np.array(d.xpos[lb], dtype=float)

    for i in range(m.ntendon):
        adr, num = int(m.tendon_adr[i]), int(m.tendon_num[i])
        types = [int(m.wrap_type[w]) for w in range(adr, adr + num)]
        if any(t_ != SITE and t_ not in shapes for t_ in types):
            continue
        bodies = [int(m.site_bodyid[int(m.wrap_objid[w])]) if t_ == SITE
                  else int(m.geom_bodyid[int(m.wrap_objid[w])])
                  for w, t_ in zip(range(adr, adr + num), types)]
        if any(b in mocap_of for b in bodies):
            _count(un, "spatial tendons through sites or geoms of mocap bodies")
            continue
        path, why = [], None
        for w, t_ in zip(range(adr, adr + num), types):
            obj = int(m.wrap_objid[w])
            if t_ == SITE:
                o, Ro, xo = frame(int(m.site_bodyid[obj]))
                path.append((o, tuple(Ro.T @ (np.array(d.site_xpos[obj]) - xo))))
                continue
            o, Ro, xo = frame(int(m.geom_bodyid[obj]))
            Rg = np.array(d.geom_xmat[obj]).reshape(3, 3)
            pos = Ro.T @ (np.array(d.geom_xpos[obj]) - xo)
            radius = float(m.geom_size[obj, 0])
            side = None
            sid = int(round(float(m.wrap_prm[w])))
            if sid >= 0 and int(mj.__version__.split(".")[0]) < 4:
                # (MuJoCo 3 chose the side by a half-plane test; gaussopt follows MuJoCo 4's
                # rule, the path homotopic to the one through the side site)
                why = "spatial tendons wrapping with a side site under MuJoCo < 4 (its rule differs)"
            if sid >= 0:
                os_, _, _ = frame(int(m.site_bodyid[sid]))
                sp = Ro.T @ (np.array(d.site_xpos[sid]) - xo)
                if os_ != o:
                    why = "spatial tendons with a wrap's side site on another link than its geom"
                elif np.linalg.norm(Rg.T @ (np.array(d.site_xpos[sid]) - d.geom_xpos[obj])) \
                        < radius:
                    why = ("spatial tendons wrapping from a side site inside the geom "
                           "(MuJoCo's iterative inside wrapping)")
                side = tuple(sp)
            path.append(TendonWrap(o, shapes[t_], radius, position=tuple(pos),
                                   rotation=tuple(map(tuple, Ro.T @ Rg)), side=side))
        if why is not None:
            _count(un, why)
            continue
        wraps = any(isinstance(x, TendonWrap) for x in path)
        params = _tendon_params(m, i, spring_on, damp_on, act_on)
        if wraps:
            constraint = not _flag(mj, m, "mjDSBL_CONSTRAINT")
            if constraint and not _flag(mj, m, "mjDSBL_LIMIT") and m.tendon_limited[i]:
                _count(un, "limits of spatial tendons that wrap geoms")
            if constraint and not _flag(mj, m, "mjDSBL_FRICTIONLOSS") and \
                    m.tendon_frictionloss[i]:
                _count(un, "tendon friction loss")
            if params["armature"]:
                _count(un, "armature of spatial tendons that wrap geoms")
                params["armature"] = 0.0
            if (spring_on and np.any(m.tendon_stiffnesspoly[i])) or (
                    damp_on and np.any(m.tendon_dampingpoly[i])):
                _count(un, "nonlinear tendon stiffness or damping (stiffnesspoly/dampingpoly)")
            limited = False
            wrapping.add(i)
        else:
            limited = _tendon_extras(mj, m, i, un, "spatial", spring_on, damp_on)
        mapped[i] = _clean(tnames[i], taken)
        if limited:
            out.tendon_ranges[mapped[i]] = tuple(float(x) for x in m.tendon_range[i])
        out.forces.append(SpatialTendon(mapped[i], tuple(path), **params))
    return mapped, wrapping


def _tree_actuators(mj, m, out: _TreeMapping, jname_of: dict, fixed: dict, act_on: bool,
                    spatial: dict = {}, site_of=None) -> None:
    """The actuators of ``m`` with a fixed or affine gain, no or an affine bias and no or
    mapped activation dynamics (:func:`_activation_dynamics`; muscles), on a hinge, a slide,
    a ball or free joint, a fixed tendon, a mapped spatial tendon, a site (with or without a
    reference site; ``site_of``, the sites' frames) or a slider-crank (MuJoCo's ``motor``,
    ``position``, ``velocity``, ``damper``, ``muscle`` and such ``general`` ones) as
    :class:`~gaussopt.multibody.tree.Actuator` into ``out.forces`` (their MuJoCo ids into
    ``out.actuators``); the others are counted unmapped (also those on spatial tendons,
    sites and slider-cranks of a model whose joints limit their actuator forces:
    ``actuatorfrcrange`` clamps a joint's total, to which they contribute through the
    tree). Nothing when MuJoCo's actuation is disabled (no actuator acts)."""
    from gaussopt.multibody.tree import Actuator

    if _nact(m) == 0:
        return
    _actuator_damping_armature(mj, m, out, jname_of, fixed, spatial)
    if not act_on:
        return
    un = out.unmapped
    anames = _names(mj, m, mj.mjtObj.mjOBJ_ACTUATOR, _nact(m), "actuator")
    taken: set = set()
    TJ, TT = int(mj.mjtTrn.mjTRN_JOINT), int(mj.mjtTrn.mjTRN_TENDON)
    scalar = (int(mj.mjtJoint.mjJNT_HINGE), int(mj.mjtJoint.mjJNT_SLIDE))
    rotational = (int(mj.mjtJoint.mjJNT_BALL), int(mj.mjtJoint.mjJNT_FREE))
    clamp = not _flag(mj, m, "mjDSBL_CLAMPCTRL")
    for i in range(_nact(m)):
        trn, tid = int(m.actuator_trntype[i]), int(m.actuator_trnid[i, 0])
        dynamics = _activation_dynamics(mj, m, i, clamp, un)
        if dynamics is False:
            continue
        muscle = "muscle" in dynamics
        gaintype = int(m.actuator_gaintype[i])
        if not muscle and (gaintype not in (int(mj.mjtGain.mjGAIN_FIXED),
                                            int(mj.mjtGain.mjGAIN_AFFINE)) or int(
                m.actuator_biastype[i]) not in (int(mj.mjtBias.mjBIAS_NONE),
                                                int(mj.mjtBias.mjBIAS_AFFINE))):
            _count(un, "actuators with a gain other than fixed, affine or muscle, or a bias "
                       "other than affine or muscle")
            continue
        if int(m.actuator_plugin[i]) >= 0 or int(m.actuator_ctrlnum[i]) != 1 or int(
                m.actuator_outnum[i]) != 1 or float(m.actuator_delay[i]) != 0.0:
            _count(un, "actuators with a plugin, several inputs or outputs, or a delay")
            continue
        # the target and the gear's values it reads (1; a ball's 3; a free joint's and a
        # site's 6)
        joint = trn in (TJ, int(mj.mjtTrn.mjTRN_JOINTINPARENT))
        jtype = int(m.jnt_type[tid]) if joint else -1
        site = (site_of(tid) if trn == int(mj.mjtTrn.mjTRN_SITE) and site_of is not None
                and int(m.actuator_trnid[i, 1]) < 0 else None)
        # two sites: a slider-crank (crank, slider), a site with a reference site
        two = None
        if site_of is not None and not np.any(m.jnt_actfrclimited) and (
                trn == int(mj.mjtTrn.mjTRN_SLIDERCRANK) or (
                trn == int(mj.mjtTrn.mjTRN_SITE) and int(m.actuator_trnid[i, 1]) >= 0)):
            pair = (site_of(tid, world=True), site_of(int(m.actuator_trnid[i, 1]), world=True))
            if None not in pair and not (pair[0][0] is None and pair[1][0] is None):
                two = pair
        ngear = 1
        if joint and jtype in scalar:
            target = dict(joint=jname_of[tid])       # (jointinparent: the same on these)
        elif joint and jtype in rotational and not muscle:
            target = dict(joint=jname_of[tid], in_parent=trn != TJ)
            ngear = 3 if jtype == int(mj.mjtJoint.mjJNT_BALL) else 6
        elif trn == TT and tid in fixed:
            target = dict(tendon=fixed[tid])
        elif trn == TT and tid in spatial and not np.any(m.jnt_actfrclimited):
            target = dict(tendon=spatial[tid])
        elif site is not None and not muscle and not np.any(m.jnt_actfrclimited):
            # (a site without a reference site: a force and torque at the site)
            target, ngear = dict(site=site), 6
        elif two is not None and trn == int(mj.mjtTrn.mjTRN_SLIDERCRANK):
            target = dict(crank=two[0][:2], slider=two[1],
                          rod=float(m.actuator_cranklength[i]))
        elif two is not None and not muscle:
            target, ngear = dict(site=two[0], reference=two[1]), 6
        else:
            _count(un, "actuators on bodies (adhesion), on sites of the world or of mocap "
                       "bodies (or with a joint's actuator force range beside them) or on "
                       "unmapped spatial tendons")
            continue
        group = int(m.actuator_group[i])
        if 0 <= group <= 30 and m.opt.disableactuator & (1 << group):
            _count(un, "actuators of disabled groups (opt.disableactuator: no force in MuJoCo "
                       "either)")
            continue
        affine = int(m.actuator_biastype[i]) == int(mj.mjtBias.mjBIAS_AFFINE)
        out.forces.append(Actuator(
            _clean(anames[i], taken),
            gear=(float(m.actuator_gear[_out(m, i), 0]) if ngear == 1
                  else tuple(float(x) for x in m.actuator_gear[_out(m, i), :ngear])),
            gain=(1.0 if muscle else tuple(float(x) for x in m.actuator_gainprm[i, :3])
                  if gaintype == int(mj.mjtGain.mjGAIN_AFFINE)
                  else float(m.actuator_gainprm[i, 0])),
            bias=tuple(np.array(m.actuator_biasprm[i, :3], dtype=float)) if affine else (0.0,) * 3,
            ctrl_range=(tuple(np.array(m.actuator_ctrlrange[_ctrl(m, i)], dtype=float))
                        if m.actuator_ctrllimited[_ctrl(m, i)] and clamp else None),
            force_range=(tuple(np.array(m.actuator_forcerange[i], dtype=float))
                         if m.actuator_forcelimited[i] else None),
            **(dynamics or {}), **target))
        out.actuators.append(i)


#: MuJoCo's smallest value (``mjMINVAL``): a filter's time constant below it is replaced
_MJ_MINVAL = 1e-15


def _activation_dynamics(mj, m, i: int, clamp: bool, un: dict):
    """The :class:`~gaussopt.multibody.tree.Actuator` arguments of actuator ``i``'s activation
    dynamics: ``{}`` (none), ``{"dynamics": "filter", "time_constant": tau}`` (MuJoCo's
    ``filter`` and ``filterexact``, whose continuous dynamics are the same ``act' = (u -
    act) / tau``), ``{"dynamics": "integrator"}``, ``{"muscle": Muscle}`` (a muscle's
    gain, bias and dynamics, all three, :func:`_muscle_of`); or False, counted unmapped:
    other dynamics (dcmotor, pid, user), a filter without a time constant (MuJoCo's
    ``act' = (u - act) / 1e-15``), ``actearly`` (the force takes the activation one time
    step ahead: MuJoCo's discrete time, no continuous counterpart), several activations, and
    activation limits that can bind (``actlimited`` clamps ``act`` where the integration
    leaves the range: a filter's activation stays in the hull of its start and its
    controls, so its limits cannot bind where its clamped controls lie in them)."""
    D = mj.mjtDyn
    dyn = int(m.actuator_dyntype[i])
    kinds = (int(m.actuator_gaintype[i]) == int(mj.mjtGain.mjGAIN_MUSCLE),
             int(m.actuator_biastype[i]) == int(mj.mjtBias.mjBIAS_MUSCLE),
             dyn == int(D.mjDYN_MUSCLE))
    if any(kinds):
        if not all(kinds) or not np.array_equal(m.actuator_gainprm[i, :9],
                                                m.actuator_biasprm[i, :9]):
            _count(un, "muscle gains, biases or dynamics without the other two (or with "
                       "other parameters)")
            return False
        return _muscle_of(m, i) if _activation_kept(m, i, un, (0.0, 1.0)) else False
    if dyn == int(D.mjDYN_NONE):
        return {}
    tau = float(m.actuator_dynprm[i, 0])
    if dyn in (int(D.mjDYN_FILTER), int(D.mjDYN_FILTEREXACT)) and tau > _MJ_MINVAL:
        out = {"dynamics": "filter", "time_constant": tau}
    elif dyn == int(D.mjDYN_INTEGRATOR):
        out = {"dynamics": "integrator"}
    else:
        _count(un, "actuators with activation dynamics other than filter, filterexact, "
                   "integrator and muscle (dcmotor, pid, user), or a filter without a time "
                   "constant")
        return False
    reach = None
    if out["dynamics"] == "filter" and clamp and m.actuator_ctrllimited[_ctrl(m, i)]:
        reach = tuple(float(x) for x in m.actuator_ctrlrange[_ctrl(m, i)])
    return out if _activation_kept(m, i, un, reach) else False


def _activation_kept(m, i: int, un: dict, reach) -> bool:
    """Whether actuator ``i``'s activation maps (else counted unmapped): one activation,
    no ``actearly``, and activation limits that cannot bind (``reach``: the interval its
    activation cannot leave, or None)."""
    if int(m.actuator_actnum[i]) != 1 or int(m.actuator_actearly[i]):
        _count(un, "actuators with actearly (the force takes the activation one time step "
                   "ahead: MuJoCo's discrete time) or several activations")
        return False
    if m.actuator_actlimited[i]:
        lo, hi = (float(x) for x in m.actuator_actrange[i])
        if reach is None or not (lo <= reach[0] and reach[1] <= hi):
            _count(un, "activation limits that can bind (actlimited on an integrator, or on "
                       "a filter or a muscle whose controls reach outside them)")
            return False
    return True


def _muscle_of(m, i: int) -> dict:
    """The :class:`~gaussopt.multibody.tree.Actuator` arguments of MuJoCo's muscle ``i``
    (its ``gainprm``, the ``lengthrange`` and, where its force is negative, ``scale /
    acc0``, which MuJoCo's compiler computed)."""
    from gaussopt.multibody.tree import Muscle

    prm = np.array(m.actuator_gainprm[i, :9], dtype=float)
    force = prm[2] if prm[2] >= 0 else prm[3] / max(_MJ_MINVAL,
                                                     float(m.actuator_acc0[_out(m, i)]))
    dyn = np.array(m.actuator_dynprm[i, :3], dtype=float)
    return {"muscle": Muscle(length_range=tuple(float(x) for x in
                                                m.actuator_lengthrange[_out(m, i)]),
                             force=float(force), range=(float(prm[0]), float(prm[1])),
                             lmin=float(prm[4]), lmax=float(prm[5]), vmax=float(prm[6]),
                             fpmax=float(prm[7]), fvmax=float(prm[8]),
                             time_constants=(float(dyn[0]), float(dyn[1])),
                             smoothing=float(dyn[2]))}


def _actuator_damping_armature(mj, m, out: _TreeMapping, jname_of: dict, fixed: dict,
                               spatial: dict = {}) -> None:
    """MuJoCo adds an actuator's ``damping`` and ``armature`` times ``gear^2`` to those of the
    joint or tendon it acts on (every actuator, whatever its dynamics: ``mj_actuatorDamping``,
    ``mj_actuatorArmature``; the damping when the damper is on): added to the mapped hinges,
    slides and tendons; on other targets, and nonlinear damping, counted unmapped."""
    import dataclasses

    damp_on = not _flag(mj, m, "mjDSBL_DAMPER")
    scalar = (int(mj.mjtJoint.mjJNT_HINGE), int(mj.mjtJoint.mjJNT_SLIDE))
    joint_trn = (int(mj.mjtTrn.mjTRN_JOINT), int(mj.mjtTrn.mjTRN_JOINTINPARENT))
    extra: dict = {}
    for i in range(_nact(m)):
        dmp = float(m.actuator_damping[i]) if damp_on else 0.0
        arm = float(m.actuator_armature[i])
        if damp_on and np.any(m.actuator_dampingpoly[i]):
            _count(out.unmapped, "nonlinear damping of actuators (dampingpoly)")
        if not (dmp or arm):
            continue
        trn, tid = int(m.actuator_trntype[i]), int(m.actuator_trnid[i, 0])
        g2 = float(m.actuator_gear[_out(m, i), 0]) ** 2
        if trn in joint_trn and int(m.jnt_type[tid]) in scalar:
            key = ("joint", jname_of[tid])
        elif trn == int(mj.mjtTrn.mjTRN_TENDON) and tid in fixed:
            key = ("tendon", fixed[tid])
        elif trn == int(mj.mjtTrn.mjTRN_TENDON) and tid in spatial:
            key = ("tendon", spatial[tid])
        else:
            _count(out.unmapped, "damping and armature of actuators on ball or free joints "
                                 "or unmapped spatial tendons")
            continue
        d0, a0 = extra.get(key, (0.0, 0.0))
        extra[key] = (d0 + dmp * g2, a0 + arm * g2)
    if not extra:
        return
    for k, j in enumerate(out.joints):
        if ("joint", getattr(j, "name", None)) in extra and hasattr(j, "kind"):
            dd, da = extra[("joint", j.name)]
            out.joints[k] = dataclasses.replace(j, damping=(j.damping[0] + dd,),
                                                armature=(j.armature[0] + da,))
    for k, t in enumerate(out.forces):
        if ("tendon", t.name) in extra and hasattr(t, "terms"):
            dd, da = extra[("tendon", t.name)]
            out.forces[k] = dataclasses.replace(t, damping=t.damping + dd,
                                                armature=t.armature + da)
        elif ("tendon", t.name) in extra and hasattr(t, "path"):
            dd, da = extra[("tendon", t.name)]
            out.forces[k] = dataclasses.replace(t, damping=t.damping + dd,
                                                armature=t.armature + da)


def _joint_state(m, qpos, qvel, acts=(), act=None):
    """``(q, v)`` of the joint kind from MuJoCo's ``(qpos, qvel)`` (:func:`state_from_mujoco`),
    with the activations' coordinates after them: ``acts`` = ``(coordinate, MuJoCo's
    actadr)`` of each, their velocities from ``act`` (zero where None), their own
    coordinates (the activations' integrals) zero."""
    n = m.nq + len(acts)
    q, v = np.zeros(n), np.zeros(n)
    q[:m.nq] = qpos
    for c, adr in acts:
        if act is not None:
            v[c] = act[adr]
    for j in range(m.njnt):
        typ, qa, da = int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        if typ in (0, 1):                                  # free, ball
            o = 3 if typ == 0 else 0
            if typ == 0:
                v[qa:qa + 3] = qvel[da:da + 3]
            e = q[qa + o:qa + o + 4] / np.linalg.norm(q[qa + o:qa + o + 4])
            q[qa + o:qa + o + 4] = e
            # u = W p' with p' orthogonal to p: p' = W^T u / 4 (W W^T = 4 I for a unit p)
            v[qa + o:qa + o + 4] = _wmat(e).T @ qvel[da + o:da + o + 3] / 4.0
        else:
            v[qa] = qvel[da]
    return q, v


def _build_tree(mp: _TreeMapping, m, src: str):
    from gaussopt.multibody.tree import Keyframe, Model as TreeModel

    model = TreeModel(mp.links, mp.joints, mp.forces, gravity=mp.gravity, name=mp.name)
    from gaussopt.multibody.tree import Actuator

    acts = tuple((model.activations[a.name], int(m.actuator_actadr[i]))
                 for a, i in zip((f for f in mp.forces if isinstance(f, Actuator)),
                                 mp.actuators) if a.name in model.activations)
    if model.n != m.nq + len(acts):
        raise ModelError(f"internal: the tree model of {src} has {model.n} coordinates, MuJoCo's "
                         f"qpos {m.nq} and {len(acts)} activations.")   # pragma: no cover
    #: ``(coordinate, MuJoCo's actadr)`` of every activation (state_from_mujoco)
    model.mujoco_activations = acts
    model.joint_ranges = dict(mp.ranges)
    model.tendon_ranges = dict(mp.tendon_ranges)
    model.contact_pairs = tuple(mp.contact_pairs)
    model.mocap_fixed = dict(mp.mocap_fixed)
    model.origin = (f"loaded from {src} by gaussopt.multibody.load(coordinates='joint'): "
                    f"q is MuJoCo's qpos (nq = {m.nq}, nv = {m.nv}); {m.nbody - 1} MuJoCo bodies "
                    f"-> {model.nb} links ({mp.merged} joint-less bodies merged into their "
                    f"links); coordinates='maximal' gives the spatial kind")
    mj = _mujoco()
    knames = _names(mj, m, mj.mjtObj.mjOBJ_KEY, m.nkey, "key")
    for k in range(m.nkey):
        q, v = _joint_state(m, m.key_qpos[k], m.key_qvel[k], acts, m.key_act[k])
        model.keyframes[knames[k]] = Keyframe(float(m.key_time[k]), q, v,
                                              np.array(m.key_ctrl[k][[_ctrl(m, i) for i in
                                                                      mp.actuators]],
                                                       dtype=float))
    return model


# ----------------------------------------------------------------------------- dampers
class _SlideDamper:
    """MuJoCo's slide damping ``-c s' u`` on the child, ``s' = u . (v_j(P) - v_i(P))``
    at the child's anchor ``P`` (``u`` carried by both bodies); bodies by index, set
    when the model is built (picklable: no closures)."""

    def __init__(self, c: float, axis: np.ndarray, anchor: np.ndarray, kj: int, fj: _Frame,
                 parent: Optional[tuple]) -> None:
        self.c = float(c)
        Rj = _qrot(fj.quat)
        self.j = (slice(7 * kj, 7 * kj + 7), Rj.T @ (np.asarray(anchor, float) - fj.position),
                  Rj.T @ np.asarray(axis, float))
        self.i = None if parent is None else (slice(7 * parent[0], 7 * parent[0] + 7),)

    def __call__(self, t, q, v) -> np.ndarray:
        slj, sj, uj = self.j
        Rj = _qrot(q[slj][3:])
        u = Rj @ uj
        P = q[slj][:3] + Rj @ sj
        wj = 2.0 * _Emat(q[slj][3:]) @ v[slj][3:]
        vel = v[slj][:3] + np.cross(wj, P - q[slj][:3])
        if self.i is not None:
            sli = self.i[0]
            wi = 2.0 * _Emat(q[sli][3:]) @ v[sli][3:]
            vel = vel - v[sli][:3] - np.cross(wi, P - q[sli][:3])
        return -self.c * float(u @ vel) * u


class _Negated:
    def __init__(self, f) -> None:
        self.f = f

    def __call__(self, t, q, v) -> np.ndarray:
        return -self.f(t, q, v)


class _FreeDamper:
    """MuJoCo's damping of a free joint's translation: ``-c v_o`` (world components,
    ``c`` per axis) at the body origin ``o``."""

    def __init__(self, k: int, c: np.ndarray, frame: _Frame, origin: np.ndarray) -> None:
        self.sl = slice(7 * k, 7 * k + 7)
        self.c = np.asarray(c, float)
        self.s = _qrot(frame.quat).T @ (np.asarray(origin, float) - frame.position)

    def __call__(self, t, q, v) -> np.ndarray:
        qb, vb = q[self.sl], v[self.sl]
        w = 2.0 * _Emat(qb[3:]) @ vb[3:]
        return -self.c * (vb[:3] + np.cross(w, _qrot(qb[3:]) @ self.s))


# ----------------------------------------------------------------------------- public
class InertiaRepairWarning(UserWarning):
    """A body's inertia violated the triangle inequality (or had a non-positive principal
    moment) and was repaired by MuJoCo's ``balanceinertia`` (the warning names the body and
    quotes MuJoCo's message)."""


#: what MuJoCo's URDF reader opens that the dynamics never use: the visual geometry and
#: collision meshes (``package://...`` paths MuJoCo cannot resolve, ``.dae`` it cannot read)
_URDF_DROPPED = ("visual", "collision")


def _is_urdf(text: str) -> bool:
    import xml.etree.ElementTree as ET

    try:
        return ET.fromstring(text).tag == "robot"
    except ET.ParseError:
        return False


def _strip_urdf(text: str, notes: dict) -> str:
    """The URDF without the geometry the dynamics do not use: every ``<visual>``, and every
    ``<collision>`` given by a ``<mesh>`` (their files are often ``package://`` paths that
    MuJoCo's reader cannot open). Collision primitives (box, cylinder, sphere) stay: they
    need no file. A link's mass and inertia come from its ``<inertial>``, which is kept; a
    link without one is massless in Pinocchio, and in MuJoCo with the compiler option
    ``inertiafromgeom="false"``, which the loader sets for URDFs (MuJoCo's default infers
    a mass from the collision primitives)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    dropped = {"visual": 0, "collision": 0}
    for link in root.iter("link"):
        for el in list(link):
            if el.tag == "visual" or (el.tag == "collision" and el.find("./geometry/mesh")
                                      is not None):
                link.remove(el)
                dropped[el.tag] += 1
    if dropped["visual"] or dropped["collision"]:
        notes["URDF geometry not read"] = (
            f"{dropped['visual']} <visual> and {dropped['collision']} mesh <collision> "
            "element(s) (the dynamics do not use them; their meshes are not opened)")
    return ET.tostring(root, encoding="unicode")


#: MuJoCo's smallest accepted mass and principal moment (``mjMINVAL``)
_MJ_MINVAL = 1e-15


def _rpy_matrix(rpy) -> np.ndarray:
    """URDF's fixed-axis roll, pitch, yaw: ``Rz(yaw) Ry(pitch) Rx(roll)``."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _urdf_origin(el) -> tuple[np.ndarray, np.ndarray]:
    """``(xyz, R)`` of an element's ``<origin>`` (identity when it has none)."""
    o = el.find("origin") if el is not None else None
    if o is None:
        return np.zeros(3), np.eye(3)
    xyz = np.array([float(x) for x in o.get("xyz", "0 0 0").split()])
    return xyz, _rpy_matrix([float(x) for x in o.get("rpy", "0 0 0").split()])


def _urdf_inertial(link) -> Optional[tuple[float, np.ndarray, np.ndarray]]:
    """``(mass, centroid, inertia tensor about it)`` of a link in its own frame, or None."""
    el = link.find("inertial")
    if el is None:
        return None
    mass_el, ten = el.find("mass"), el.find("inertia")
    mass = float(mass_el.get("value", "0")) if mass_el is not None else 0.0
    c = {k: float(ten.get(k, "0")) if ten is not None else 0.0
         for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    J = np.array([[c["ixx"], c["ixy"], c["ixz"]], [c["ixy"], c["iyy"], c["iyz"]],
                  [c["ixz"], c["iyz"], c["izz"]]])
    xyz, R = _urdf_origin(el)
    return mass, xyz, R @ J @ R.T


def _rejected_inertia(J: np.ndarray) -> bool:
    """Whether MuJoCo rejects the tensor: a principal moment below ``mjMINVAL``, or
    moments that break the triangle inequality ``A + B >= C`` (no rigid body has them)."""
    lam = np.linalg.eigvalsh(0.5 * (J + J.T))
    return bool(lam[0] < _MJ_MINVAL or lam[0] + lam[1] < lam[2])


def _merge_welded_inertias(text: str, notes: dict) -> str:
    """The URDF with the inertia of each link that MuJoCo would reject (a principal moment
    that is zero, negative or at rounding level) added to the link a ``fixed`` joint welds
    it to, when that makes the sum acceptable.

    Welded links are one rigid body: MuJoCo's reader fuses them anyway (and Pinocchio
    adds their inertias), but it checks each link's own tensor first. Robot files use a
    joint-less dummy root with a placeholder tensor (``base`` of the ANYmal, Go1, B1 and
    HyQ files: every entry ``1e-6``, rank 1) welded to the real trunk, or sensor links with
    rounding-level tensors; their sum with the trunk is the body MuJoCo would build, so the
    dynamics are the file's (where MuJoCo's ``balanceinertia`` would raise the moments of a
    link that breaks the triangle inequality, this keeps them). The combined mass, centroid and tensor (parallel-axis
    theorem) go to the receiving link, in its frame; the other link becomes massless."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    links = {lk.get("name"): lk for lk in root.iter("link")}
    welds: dict = {}                 # link -> [(other, xyz, R)]: the other's frame in its own
    for j in root.iter("joint"):
        if j.get("type") == "fixed" and j.find("parent") is not None \
                and j.find("child") is not None:
            xyz, R = _urdf_origin(j)
            par, ch = j.find("parent").get("link"), j.find("child").get("link")
            welds.setdefault(par, []).append((ch, xyz, R))
            welds.setdefault(ch, []).append((par, -R.T @ xyz, R.T))
    merged = []
    for name, link in links.items():
        own = _urdf_inertial(link)
        if own is None or not _rejected_inertia(own[2]):
            continue
        m1, c1, J1 = own
        # every link welded to this one (through chains of fixed joints, massless frames
        # included), with its frame in this link's frame
        pose = {name: (np.zeros(3), np.eye(3))}
        todo = [name]
        while todo:
            a = todo.pop()
            pa, Ra = pose[a]
            for b_, xyz, R in welds.get(a, []):
                if b_ not in pose:
                    pose[b_] = (pa + Ra @ xyz, Ra @ R)
                    todo.append(b_)
        best = None
        for other, (p_, R_) in pose.items():
            got = _urdf_inertial(links[other]) if other != name and other in links else None
            if got is None or _rejected_inertia(got[2]):
                continue
            m2, c2, J2 = got
            # this link's inertia in the other link's frame
            c, J = R_.T @ (c1 - p_), R_.T @ J1 @ R_
            mass = m1 + m2
            cc = (m1 * c + m2 * c2) / mass
            Jc = np.zeros((3, 3))
            for mk, ck, Jk in ((m1, c, J), (m2, c2, J2)):
                d = ck - cc
                Jc += Jk + mk * ((d @ d) * np.eye(3) - np.outer(d, d))
            if best is None or m2 > best[1]:
                best = (other, m2, mass, cc, Jc)
        if best is None or _rejected_inertia(best[4]):
            continue
        other, _, mass, cc, Jc = best
        link.remove(link.find("inertial"))
        target = links[other]
        old = target.find("inertial")
        if old is not None:
            target.remove(old)
        el = ET.SubElement(target, "inertial")
        ET.SubElement(el, "origin", xyz=" ".join(repr(float(x)) for x in cc), rpy="0 0 0")
        ET.SubElement(el, "mass", value=repr(float(mass)))
        ET.SubElement(el, "inertia", **{k: repr(float(Jc[i, j])) for k, (i, j) in (
            ("ixx", (0, 0)), ("ixy", (0, 1)), ("ixz", (0, 2)), ("iyy", (1, 1)),
            ("iyz", (1, 2)), ("izz", (2, 2)))})
        merged.append(f"{name!r} into {other!r}")
    if not merged:
        return text
    notes["URDF inertias merged across fixed joints"] = (
        f"{'; '.join(merged)} (MuJoCo rejects the first link's own tensor; welded, the two "
        "are one body, as MuJoCo fuses them: the same dynamics)")
    return ET.tostring(root, encoding="unicode")


#: the placeholder inertia of a moving URDF link that MuJoCo rejects (:func:`_placeholders`):
#: mass and principal moments (a power of two: its removal is exact), at the link's origin
_PLACEHOLDER = 2.0 ** -20


def _placeholders(text: str, notes: dict) -> tuple[str, dict]:
    """The URDF with a placeholder ``<inertial>`` (:data:`_PLACEHOLDER` at the link's origin)
    on every link that a moving joint carries and whose own inertia MuJoCo rejects (zero
    mass, zero or rounding-level moments: the massless links between the joints of a
    composite hip, a point mass), and ``{link: (mass, centroid, tensor)}`` of the file's
    values. MuJoCo needs an inertia only to accept the model; the joint coordinates do not
    (the joint-space mass matrix is ``S^T H S``: a massless link adds nothing, and its
    joint's motion is determinate when the links it carries have inertia, as Pinocchio's
    ``aba`` assumes), so :func:`_tree_map` removes the placeholder and puts the file's
    inertia back (a rounding-level negative moment, such as ``-5e-20``, as zero). A
    tensor with a negative moment beyond rounding is left to MuJoCo's refusal."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    moving = {j.find("child").get("link") for j in root.iter("joint")
              if j.get("type") not in (None, "fixed") and j.find("child") is not None}
    found: dict = {}
    for link in root.iter("link"):
        name = link.get("name")
        if name not in moving:
            continue
        own = _urdf_inertial(link)
        mass, c, J = own if own is not None else (0.0, np.zeros(3), np.zeros((3, 3)))
        J = 0.5 * (J + J.T)
        lam, U = np.linalg.eigh(J)
        rounding = _MJ_MINVAL * max(float(np.abs(lam).max()), 1.0)
        rejected = mass < _MJ_MINVAL or _rejected_inertia(J)
        # a rigid body's tensor up to rounding: no moment below zero, the triangle
        # inequality (anything else is bad data, left to MuJoCo's refusal or its repair)
        physical = mass >= 0.0 and lam[0] >= -rounding and lam[0] + lam[1] >= lam[2] - rounding
        if not (rejected and physical):
            continue
        J = (U * np.maximum(lam, 0.0)) @ U.T
        found[name] = (float(mass), np.asarray(c, float), J)
        old = link.find("inertial")
        if old is not None:
            link.remove(old)
        el = ET.SubElement(link, "inertial")
        ET.SubElement(el, "origin", xyz="0 0 0", rpy="0 0 0")
        ET.SubElement(el, "mass", value=repr(_PLACEHOLDER))
        ET.SubElement(el, "inertia", ixx=repr(_PLACEHOLDER), iyy=repr(_PLACEHOLDER),
                      izz=repr(_PLACEHOLDER), ixy="0", ixz="0", iyz="0")
    if not found:
        return text, found
    zero = [k for k, (mass, _, J) in found.items() if mass == 0.0 and not J.any()]
    point = [k for k in found if k not in zero]
    parts = []
    if zero:
        parts.append(f"massless: {', '.join(repr(k) for k in zero)}")
    if point:
        parts.append(f"without rotational inertia (a point mass, or rounding-level "
                     f"moments): {', '.join(repr(k) for k in point)}")
    notes["URDF links MuJoCo rejects, kept as the file has them"] = (
        f"{'; '.join(parts)} (MuJoCo compiled the kinematics with a placeholder inertia; "
        "the joint-coordinate model has the file's, as Pinocchio does; a joint whose motion "
        "then moves no inertia makes the step's mass matrix singular, which each step "
        "decides)")
    return ET.tostring(root, encoding="unicode"), found


def _balance_inertia(text: str, urdf: bool) -> str:
    """The XML with MuJoCo's compiler option ``balanceinertia="true"`` (URDF: in its
    ``<mujoco><compiler/></mujoco>`` extension)."""
    return _compiler_option(text, urdf, "balanceinertia", "true")


def _compiler_option(text: str, urdf: bool, key: str, value: str) -> str:
    """The XML with MuJoCo's compiler option ``key="value"`` (URDF: in its
    ``<mujoco><compiler/></mujoco>`` extension)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    holder = root
    if urdf:
        holder = root.find("mujoco")
        if holder is None:
            holder = ET.SubElement(root, "mujoco")
    comp = holder.find("compiler")
    if comp is None:
        comp = ET.SubElement(holder, "compiler")
    comp.set(key, value)
    return ET.tostring(root, encoding="unicode")


def _inertia_refusal(label: str, said: str, text: str, urdf: bool) -> str:
    """The message of an inertia MuJoCo rejects even after its balanceinertia repair:
    the body, MuJoCo's words and, for a URDF link, its tensor's eigenvalues."""
    import re
    import xml.etree.ElementTree as ET

    named = re.search(r"Element name '([^']+)'", said)
    body = named.group(1) if named else None
    detail = ""
    if urdf and body is not None:
        link = ET.fromstring(text).find(f"./link[@name='{body}']")
        el = link.find("./inertial/inertia") if link is not None else None
        if el is not None:
            try:
                c = {k: float(el.get(k, "0")) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
                J = np.array([[c["ixx"], c["ixy"], c["ixz"]], [c["ixy"], c["iyy"], c["iyz"]],
                              [c["ixz"], c["iyz"], c["izz"]]])
                detail = (f"; the <inertia> of link {body!r} has the eigenvalues "
                          f"{np.array2string(np.linalg.eigvalsh(J), precision=4)}")
            except ValueError:
                pass
    where = f"the inertia of {body!r}" if body else "an inertia"
    return (f"MuJoCo could not compile {label}: it rejects {where} ({said}){detail}. Its "
            "balanceinertia repair (which raises principal moments to satisfy the triangle "
            "inequality) does not make it acceptable: correct the body's inertial data in "
            "the file.")


def _add_free_joints(spec) -> list[str]:
    """A free joint on every body of ``spec`` (a ``mujoco.MjSpec``) that the world carries
    without a joint: the names of those bodies."""
    floated = []
    for body in spec.worldbody.bodies:
        if len(body.joints) == 0:
            body.add_freejoint()
            floated.append(body.name)
    return floated


def _compile(mj, source, notes: Optional[dict] = None, floating: bool = False,
             floated: Optional[list] = None, exact_links: Optional[dict] = None):
    """``source`` compiled by MuJoCo: a file (MJCF or URDF), an XML string or an MjModel.
    ``floating``: free joints added to the bodies the world carries without one
    (:func:`_add_free_joints`; their names appended to ``floated``).

    A URDF is read without its visual and mesh collision geometry (:func:`_strip_urdf`),
    with the inertias MuJoCo would reject on welded links merged (:func:`_merge_welded_inertias`);
    a model whose inertia MuJoCo rejects ("inertia must satisfy A + B >= C", non-positive
    moments) is compiled again with MuJoCo's own ``balanceinertia`` repair and an
    :class:`InertiaRepairWarning` naming the body. ``notes`` (a dict) receives a line
    for each of these, for the loader's report. With ``exact_links`` (a dict: the joint
    coordinates, which need no inertia per link), a URDF's moving links whose inertia
    MuJoCo rejects get a placeholder (:func:`_placeholders`), their file's values into
    ``exact_links``."""
    notes = {} if notes is None else notes
    if isinstance(source, mj.MjModel):
        if floating:
            raise ModelError("`floating=True` needs the model's file or XML (a compiled "
                             "mujoco.MjModel cannot be given new joints); found a "
                             "mujoco.MjModel as `source`.")
        return source
    path = None
    if isinstance(source, os.PathLike) or (isinstance(source, str)
                                           and not source.lstrip().startswith("<")):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ModelError(f"`source` must be an MJCF/URDF file, an XML string or a "
                             f"mujoco.MjModel; no file {path!r} exists.")
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", errors="replace")
        label = repr(path)
    elif isinstance(source, str):
        text, label = source, "the XML string given as `source`"
    else:
        raise ModelError(f"`source` must be a path, an XML string or a mujoco.MjModel, found "
                         f"{type(source).__name__}.")
    urdf = _is_urdf(text)
    if urdf:
        # (URDF: a link's mass is its <inertial>'s, none without one, as Pinocchio reads
        # it; MuJoCo's default infers one from its collision primitives: a 1 cm box gave
        # the UR5's end link 1 g that the file does not have, 2.9e-5 of its accelerations)
        text = _compiler_option(_merge_welded_inertias(_strip_urdf(text, notes), notes),
                                True, "inertiafromgeom", "false")
        if exact_links is not None:
            text, found = _placeholders(text, notes)
            exact_links.update(found)

    def compile_(xml: Optional[str]):
        if not floating:
            if xml is None:             # an MJCF file as it is: its includes and assets
                return mj.MjModel.from_xml_path(path)    # are relative to it
            return mj.MjModel.from_xml_string(xml)
        spec = mj.MjSpec.from_file(path) if xml is None else mj.MjSpec.from_string(xml)
        if len(spec.worldbody.bodies) == 0:
            raise ModelError(f"`floating=True`: {label} has no body (nothing to set free).")
        names = _add_free_joints(spec)
        if not names:
            raise ModelError(f"`floating=True`: every body that the world carries in {label} "
                             "already has a joint; there is no base to set free.")
        if floated is not None:
            floated[:] = names
        return spec.compile()

    xml = text if (urdf or path is None) else None
    try:
        return compile_(xml)
    except ModelError:
        raise
    except ValueError as e:
        first = str(e)
    if "inertia" not in first.lower():
        raise ModelError(f"MuJoCo could not compile {label}: {first}")
    # (an MJCF file is re-read as a string only for this repair; relative includes and
    # assets of such a file then fail with MuJoCo's own message)
    try:
        m = compile_(_balance_inertia(xml if xml is not None else text, urdf))
    except ValueError as e:
        raise ModelError(_inertia_refusal(label, " ".join(first.split()), text, urdf)) from e
    what = " ".join(first.split())
    notes["inertia repaired"] = f"MuJoCo's balanceinertia ({what})"
    warnings.warn(InertiaRepairWarning(
        f"gaussopt.multibody.load({label}): MuJoCo rejects an inertia of this model: {what}. "
        "It was repaired with MuJoCo's balanceinertia (the principal moments raised to "
        "satisfy the triangle inequality); the loaded model's dynamics differ from the "
        "file's there."), stacklevel=4)
    return m


def _mapping(source, name=None, floating: bool = False, floated: Optional[list] = None):
    mj = _mujoco()
    notes: dict = {}
    m = _compile(mj, source, notes, floating, floated)
    mp = _map(mj, m, name)
    mp.unmapped.update(notes)
    return mj, m, mp


def _build(mp: _Mapping) -> Model:
    bodies = [Body(f.name, f.mass, 0.5 * (f.inertia + f.inertia.T), position=f.position,
                   orientation=f.quat) for f in mp.frames]
    return Model(bodies, mp.joints, mp.forces, gravity=mp.gravity, name=mp.name)


#: the kinds :func:`load` builds
COORDINATES = ("joint", "maximal")


def load(source, *, name: Optional[str] = None, coordinates: str = "joint",
         floating: bool = False):
    """A multibody model from an MJCF or URDF model: in joint coordinates (a
    :class:`gaussopt.multibody.tree.Model`, the default) or in maximal coordinates (a spatial
    :class:`~.spatial.Model`).

    Parameters
    ----------
    source : str, path-like or mujoco.MjModel
        A file (MJCF ``.xml`` or URDF), an XML string (starting with ``<``), or a
        compiled ``mujoco.MjModel``.
    name : str, optional
        The model's name (default: the MuJoCo model's name).
    coordinates : {"joint", "maximal"}
        ``"joint"``: ``q`` is MuJoCo's ``qpos`` (:mod:`gaussopt.multibody.tree`: no equations
        for the tree, one normalization row per ball or free joint, the rows of the closing
        ``connect``/``weld`` equalities); ``"maximal"``: seven coordinates per body and the
        joints as equations (:mod:`gaussopt.multibody.spatial`, the mapping of the module
        docstring).
    floating : bool
        Give every body that the world carries without a joint a free joint (six degrees
        of freedom, MuJoCo's ``freejoint``) before compiling: the floating base of a URDF
        robot (a legged robot, a humanoid, a quadrotor), which a URDF cannot express and
        MuJoCo otherwise welds to the world. As Pinocchio's ``JointModelFreeFlyer``, in
        MuJoCo's free-joint coordinates (module docstring). Needs a file or an XML string.

    Returns
    -------
    gaussopt.multibody.tree.Model or spatial.Model
        ``"joint"``: links in MuJoCo's body order (joint-less bodies merged into the link
        that carries them), reference = ``qpos0``; its :attr:`description` says how it was
        loaded. ``"maximal"``: bodies in MuJoCo's body order (massless bodies inserted for
        multi-joint bodies, see the module docstring), reference pose = MuJoCo's ``qpos0``
        pose.

    Warns
    -----
    UnmappedFeatureWarning
        One warning listing every feature left out, with counts.

    Raises
    ------
    ImportError
        MuJoCo is not installed (``pip install "gaussopt[mjcf]"``).
    ModelError
        No such file, MuJoCo cannot compile it, ``coordinates`` is not one of
        :data:`COORDINATES`, or ``floating=True`` with a ``mujoco.MjModel`` or with no
        joint-less body on the world.
    """
    if coordinates not in COORDINATES:
        raise ModelError(f"`coordinates` must be one of {list(COORDINATES)}, found "
                         f"{coordinates!r}.")
    if not isinstance(floating, (bool, np.bool_)):
        raise ModelError(f"`floating` must be True or False, found {floating!r}.")
    if isinstance(source, os.PathLike) or (isinstance(source, str)
                                           and not source.lstrip().startswith("<")):
        src = repr(os.fspath(source))
    else:
        src = "<xml string>" if isinstance(source, str) else "<mujoco.MjModel>"
    nothing = (f"gaussopt.multibody.load({src}): no body of this model moves (it has no "
               f"joint, or every body is fixed to the world, which MuJoCo fuses into it): "
               f"there is nothing to simulate.")
    if coordinates == "joint":
        mj = _mujoco()
        notes: dict = {}
        floated: list = []
        exact: dict = {}
        m = _compile(mj, source, notes, bool(floating), floated, exact)
        mp = _tree_map(mj, m, name, exact)
        mp.unmapped.update(notes)
        if not mp.links:
            raise ModelError(nothing)
        model = _build_tree(mp, m, src)
    else:
        floated = []
        _, m, mp = _mapping(source, name, bool(floating), floated)
        if not mp.frames:
            raise ModelError(nothing)
        model = _build(mp)
    if floated and coordinates == "joint":          # (model.description says so)
        model.origin += (f"; floating=True: a free joint added to "
                         f"{', '.join(repr(b) for b in floated)}")
    if mp.unmapped:
        what = "\n".join(f"  - {k}: {v}" for k, v in mp.unmapped.items())
        warnings.warn(UnmappedFeatureWarning(
            f"gaussopt.multibody.load({src}): {len(mp.unmapped)} MuJoCo feature(s) are not "
            f"mapped and are left out of the gaussopt model:\n{what}", mp.unmapped), stacklevel=2)
    return model


def _check(model: Model, mp: _Mapping) -> None:
    names = [f.name for f in mp.frames]
    if list(model.body_names) != names:
        raise ModelError(f"`model` must be the model loaded from `mjmodel` (bodies {names}); "
                         f"found bodies {list(model.body_names)}.")


def _chain(m, d, b: int, njoint: int):
    """Pose (position, quaternion) of MuJoCo body ``b``'s frame after its first ``njoint``
    joints, as mj_kinematics composes them."""
    par = int(m.body_parentid[b])
    Rp = np.array(d.xmat[par]).reshape(3, 3)
    pos = d.xpos[par] + Rp @ m.body_pos[b]
    quat = _qmul(np.array(d.xquat[par]), np.array(m.body_quat[b]))
    ja = int(m.body_jntadr[b])
    for t in range(njoint):
        jid = ja + t
        R = _qrot(quat)
        axis = R @ m.jnt_axis[jid]
        anchor = R @ m.jnt_pos[jid] + pos
        qa = int(m.jnt_qposadr[jid])
        kind = int(m.jnt_type[jid])
        if kind == 2:                                            # slide
            pos = pos + axis * (d.qpos[qa] - m.qpos0[qa])
        elif kind in (1, 3):                                     # ball, hinge
            if kind == 1:
                ql = np.array(d.qpos[qa:qa + 4])
                ql = ql / np.linalg.norm(ql)
            else:
                ql = _axis_quat(m.jnt_axis[jid], d.qpos[qa] - m.qpos0[qa])
            quat = _qmul(quat, ql)
            pos = anchor - _qrot(quat) @ m.jnt_pos[jid]
    return pos, quat / np.linalg.norm(quat)


def _is_tree(model) -> bool:
    from gaussopt.multibody.tree import Model as TreeModel
    return isinstance(model, TreeModel)


def _tree_joints(model, mjmodel):
    """The compiled MuJoCo model and ``(type, qposadr, dofadr)`` of its joints, checked
    against the tree ``model`` (its coordinates are ``qpos``)."""
    mj = _mujoco()
    m = _compile(mj, mjmodel)
    names = _names(mj, m, mj.mjtObj.mjOBJ_JOINT, m.njnt, "joint")
    taken: set = set()
    names = [_clean(x, taken) for x in names]
    na = len(getattr(model, "mujoco_activations", ()))
    if model.n != m.nq + na or list(model.joint_names) != names:
        raise ModelError(f"`model` must be the model loaded from `mjmodel` (joints {names}, nq "
                         f"{m.nq}); found joints {list(model.joint_names)}, n {model.n}.")
    return mj, m, [(int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]))
                   for j in range(m.njnt)]


def _wmat(e: np.ndarray) -> np.ndarray:
    """``W(p) = 2 G(p) / |p|^2``: the body-frame angular velocity ``W p'`` of the rotation of
    ``p / |p|`` (the tree kernel's)."""
    e0, e1, e2, e3 = e
    G = np.array([[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]])
    return 2.0 * G / (e @ e)


def _tree_state(model, mjmodel, qpos, qvel, act=None):
    _, m, _ = _tree_joints(model, mjmodel)
    qpos = np.asarray(qpos, dtype=float)
    qvel = np.asarray(qvel, dtype=float)
    if qpos.shape != (m.nq,) or qvel.shape != (m.nv,):
        raise ModelError(f"`qpos` and `qvel` must have shapes ({m.nq},) and ({m.nv},), found "
                         f"{qpos.shape} and {qvel.shape}.")
    if act is not None:
        act = np.asarray(act, dtype=float)
        if act.shape != (m.na,):
            raise ModelError(f"`act` must have shape ({m.na},) (MuJoCo's act), found "
                             f"{act.shape}.")
    return _joint_state(m, qpos, qvel, getattr(model, "mujoco_activations", ()), act)


def _tree_accelerations(model, mjmodel, q, v, a):
    mj, m, jts = _tree_joints(model, mjmodel)
    q, v, a = (np.asarray(x, dtype=float) for x in (q, v, a))
    out = np.empty(m.nv)
    for typ, qa, da in jts:
        if typ in (0, 1):
            o = 3 if typ == 0 else 0
            if typ == 0:
                out[da:da + 3] = a[qa:qa + 3]
            e, ed, edd = (x[qa + o:qa + o + 4] for x in (q, v, a))
            # u' = W p'' + W' p' = W (p'' - 2 (p . p') / |p|^2 p')
            out[da + o:da + o + 3] = _wmat(e) @ (edd - 2.0 * (e @ ed) / (e @ e) * ed)
        else:
            out[da] = a[qa]
    return out


def state_from_mujoco(model: Model, mjmodel, qpos, qvel,
                      act=None) -> tuple[np.ndarray, np.ndarray]:
    """The model's state ``(q, v)`` of a MuJoCo state ``(qpos, qvel)`` (and ``act``).

    Joint kind (:mod:`gaussopt.multibody.tree`): ``q = qpos`` with every quaternion
    normalized, ``v = qvel`` but for the Euler parameters of ball and free joints, whose
    rates ``p' = W(p)^T w / 4`` (``W = 2 G(p)``) carry MuJoCo's body-frame angular velocity
    ``w`` with ``p . p' = 0``; after them the coordinates of the mapped actuators'
    activations, whose velocities are MuJoCo's ``act`` (zero where ``act`` is not given)
    and whose own values (the activations' integrals) start at zero. Maximal kind: runs
    MuJoCo's kinematics (``mj_kinematics``, ``mj_comPos``, ``mj_comVel``): each body's
    centroid ``xipos`` and inertial frame, its velocity from ``cvel``; the
    massless bodies of multi-joint bodies from the partial joint chains. Euler
    parameters take the sign nearer the reference pose's; ``p' = E(p)^T w / 2``.

    Parameters
    ----------
    model : gaussopt.multibody.tree.Model or spatial.Model
        Loaded by :func:`load` from ``mjmodel`` (or the same file).
    mjmodel : mujoco.MjModel, str or path-like
    qpos : array_like, shape (nq,)
    qvel : array_like, shape (nv,)
    act : array_like, shape (na,), optional
        MuJoCo's activations (joint kind; the maximal kind maps no activation dynamics).

    Returns
    -------
    q, v : ndarray, shape (model.n,)
    """
    if _is_tree(model):
        return _tree_state(model, mjmodel, qpos, qvel, act)
    mj, m, mp = _mapping(mjmodel)
    _check(model, mp)
    qpos = np.asarray(qpos, dtype=float)
    qvel = np.asarray(qvel, dtype=float)
    if qpos.shape != (m.nq,) or qvel.shape != (m.nv,):
        raise ModelError(f"`qpos` and `qvel` must have shapes ({m.nq},) and ({m.nv},), found "
                         f"{qpos.shape} and {qvel.shape}.")
    d = mj.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mj.mj_kinematics(m, d)
    mj.mj_comPos(m, d)
    mj.mj_comVel(m, d)
    qref = model.q_reference
    q, v = np.empty(model.n), np.empty(model.n)
    for k, fr in enumerate(mp.frames):
        b = fr.mj
        c = d.subtree_com[m.body_rootid[b]]
        if fr.stage < 0:
            pos = np.array(d.xipos[b])
            quat = _qmul(np.array(d.xquat[b]), np.array(m.body_iquat[b]))
            twist = np.array(d.cvel[b])
        else:
            pos, quat = _chain(m, d, b, fr.stage + 1)
            twist = np.array(d.cvel[m.body_parentid[b]])
            ja = int(m.body_jntadr[b])
            last = ja + fr.stage
            lo = int(m.jnt_dofadr[ja])
            hi = int(m.jnt_dofadr[last]) + (3 if int(m.jnt_type[last]) == 1 else 1)
            twist = twist + np.array(d.cdof[lo:hi]).T @ qvel[lo:hi]
        quat = quat / np.linalg.norm(quat)
        if quat @ qref[7 * k + 3:7 * k + 7] < 0:
            quat = -quat
        w = twist[:3]
        q[7 * k:7 * k + 3], q[7 * k + 3:7 * k + 7] = pos, quat
        v[7 * k:7 * k + 3] = twist[3:] + np.cross(w, pos - c)
        v[7 * k + 3:7 * k + 7] = 0.5 * _Emat(quat).T @ w
    return q, v


def joint_accelerations(model: Model, mjmodel, q, v, a) -> np.ndarray:
    """MuJoCo's joint accelerations ``qacc`` from the model's ``(q, v, a)``.

    Joint kind: ``a`` itself but for the Euler parameters, whose body-frame angular
    acceleration is ``W(p) (p'' - 2 (p . p') p' / |p|^2)`` (``W = 2 G(p) / |p|^2``).
    Maximal kind: with ``w``, ``alpha = 2 E(p) p''`` the world angular velocities and
    accelerations of the bodies ``i`` (parent side; zero for the ground) and ``j``
    of each joint: hinge ``u . (alpha_j - alpha_i)``; slide ``u . (a_j(P) - a_i(P)
    - 2 w_i x (v_j(P) - v_i(P)))`` at the anchor ``P`` (the acceleration of the
    coordinate measured in body ``i``); ball ``R^T (alpha_j - alpha_i - w_b x (w_j -
    w_i))`` with ``R``, ``w_b`` the MuJoCo body's frame and angular velocity (MuJoCo's
    ball velocities are in the body frame); free ``(a_o, R^T alpha)`` with ``a_o``
    the acceleration of the body origin.

    Parameters
    ----------
    model : Model
    mjmodel : mujoco.MjModel, str or path-like
    q, v, a : array_like, shape (model.n,)

    Returns
    -------
    ndarray, shape (nv,)
    """
    if _is_tree(model):
        return _tree_accelerations(model, mjmodel, q, v, a)
    mj, m, mp = _mapping(mjmodel)
    _check(model, mp)
    q, v, a = (np.asarray(x, dtype=float) for x in (q, v, a))
    qref = model.q_reference
    real = {f.mj: f for f in mp.frames if f.stage < 0}

    def kin(name):
        if name is None:
            z = np.zeros(3)
            return z, np.eye(3), z, z, z, z, np.eye(3)
        sl = model.body_slice(name)
        e, ed, edd = q[sl][3:], v[sl][3:], a[sl][3:]
        E = _Emat(e)
        return (q[sl][:3], _qrot(e), v[sl][:3], 2 * E @ ed, a[sl][:3], 2 * E @ edd,
                _qrot(qref[sl][3:]))

    def point(kn, s):
        r, R, rd, w, rdd, al, _ = kn
        x = R @ s
        return r + x, rd + np.cross(w, x), rdd + np.cross(al, x) + np.cross(w, np.cross(w, x))

    def local(name, P):
        if name is None:
            return np.asarray(P, float)
        return model.world_point(name, P)

    out = np.zeros(m.nv)
    for jn in mp.mjoints:
        Ki, Kj = kin(jn.i), kin(jn.j)
        dof = jn.dof
        if jn.kind == 3:                                              # hinge
            u = Kj[1] @ (Kj[6].T @ jn.axis)
            out[dof] = u @ (Kj[5] - Ki[5])
        elif jn.kind == 2:                                            # slide
            u = Ki[1] @ (Ki[6].T @ jn.axis)
            P, vj, aj = point(Kj, local(jn.j, jn.anchor))
            if jn.i is None:
                vi = ai = np.zeros(3)
            else:
                s_i = Ki[1].T @ (P - Ki[0])
                _, vi, ai = point(Ki, s_i)
            out[dof] = u @ (aj - ai - 2 * np.cross(Ki[3], vj - vi))
        else:
            fr = real[jn.mj]
            Kb = kin(fr.name)
            Rb = Kb[1] @ _qrot(np.array(m.body_iquat[jn.mj])).T      # MuJoCo body frame
            if jn.kind == 1:                                          # ball
                out[dof:dof + 3] = Rb.T @ (Kj[5] - Ki[5] - np.cross(Kb[3], Kj[3] - Ki[3]))
            else:                                                     # free
                _, _, ao = point(Kj, local(jn.j, jn.anchor))
                out[dof:dof + 3] = ao
                out[dof + 3:dof + 6] = Rb.T @ Kj[5]
    return out
