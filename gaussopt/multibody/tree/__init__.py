"""Rigid-body trees in joint coordinates, loops closed by constraint rows -> :class:`~gaussopt.System`.

The third kind of multibody model, beside the planar and the spatial bodies: the
coordinates are the joints' own (MuJoCo's ``qpos``: an angle per hinge, a displacement per
slide, Euler parameters per ball, position and Euler parameters per free joint), so a tree
needs no joint equations at all -- ``M(q)`` is the composite-rigid-body algorithm's, ``F(q,
v)`` the recursive Newton--Euler algorithm's -- and a loop closed by a :class:`Connect` or a
:class:`Weld` adds only its 3 or 6 rows, over which the engine decides the rank (a
redundant closure stays exact). Fixed and spatial tendons, actuators driven by controls and the
polynomial couplings of joints and tendons (MuJoCo's ``joint`` and ``tendon`` equalities,
one row each) are MuJoCo's too. Every ball or free joint adds one normalization row of its
Euler parameters, whose 4 x 4 block of ``M`` is singular as the spatial bodies' are.
:func:`gaussopt.multibody.load` builds this kind from MJCF and URDF files by default
(``coordinates="maximal"`` gives the spatial kind). The functions are compiled with numba
(:mod:`~gaussopt.multibody.tree.tree_compiled`), elements in
:mod:`~gaussopt.multibody.tree.tree_elements`, their checks and numbering in
:mod:`~gaussopt.multibody.tree.tree_assembly`, the model in
:mod:`~gaussopt.multibody.tree.tree_model`.

References
----------
R. Featherstone, *Rigid Body Dynamics Algorithms*, Springer (2008), ch. 5-6.

Examples
--------
A double pendulum of two hinges about y (uniform rods of 1 kg and 1 m hanging along -z),
released at rest with the first rod horizontal: ``M = [[8/3, 5/6], [5/6, 1/3]]`` and the
gravity torques ``F = -g (2, 1/2)`` give ``a = M^-1 F``:

>>> import numpy as np, gaussopt as go
>>> from gaussopt.multibody import tree
>>> rod = dict(mass=1.0, com=(0, 0, -0.5), inertia=np.diag([1 / 12, 1 / 12, 1e-6]))
>>> links = [tree.Link("a", None, **rod), tree.Link("b", "a", position=(0, 0, -1), **rod)]
>>> joints = [tree.TreeJoint("ha", "hinge", "a", axis=(0, 1, 0)),
...           tree.TreeJoint("hb", "hinge", "b", axis=(0, 1, 0))]
>>> model = tree.Model(links, joints, gravity=(0, 0, -9.81))
>>> (model.n, model.m)
(2, 0)
>>> q0, v0 = np.array([np.pi / 2, 0.0]), np.zeros(2)
>>> step = go.solve_step(model.system, 0.0, q0, v0)
>>> step.a.round(6)
array([-12.612857,  16.817143])
"""

from __future__ import annotations

from gaussopt.multibody.tree.tree_elements import (JOINT_KINDS, WORLD, Actuator, Connect,
                                                   FixedTendon, JointEquality, Link, Mocap,
                                                   MocapMotion, Muscle, SpatialTendon,
                                                   TendonEquality, TendonWrap, TreeJoint, Weld)
from gaussopt.multibody.tree.tree_model import Keyframe, Model

__all__ = ["Link", "TreeJoint", "Connect", "Weld", "FixedTendon", "SpatialTendon", "TendonWrap",
           "Actuator", "Muscle",
           "JointEquality",
           "TendonEquality", "Mocap", "MocapMotion", "Model", "Keyframe", "JOINT_KINDS",
           "WORLD"]
