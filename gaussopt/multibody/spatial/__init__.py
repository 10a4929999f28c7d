"""Spatial multibody systems: rigid bodies in Euler parameters -> :class:`~gaussopt.System`.

Every rigid body has seven coordinates, the world position of its centroid and
the Euler parameters (a unit quaternion ``(e0, e1, e2, e3)``) of its frame. Its
mass matrix ``diag(m I3, 4 G^T J G)`` is **singular** by nature -- the rotational
block has rank 3, since ``G p = 0`` -- and classical codes patch it (a modified
mass matrix, or three rotation coordinates with their singularities). Gauss's
principle needs no patch: the step minimizes ``(a - M^+ F)^T M (a - M^+ F)`` over
the accelerations allowed by the joints, and the normalization ``p^T p = 1`` is
one of the equations, which gives the stacked ``[M; Phi_q]`` full column rank.

Joints are written once, from five primitives on body vectors (point coincidence,
two perpendicular vectors, a vector perpendicular to a point-to-point line,
distance, driven angle), with exact Jacobians and convective terms, and evaluated
by one compiled kernel (:mod:`~gaussopt.multibody.spatial.compiled_model`, compiled the
first time a spatial model is used). Loops close wherever a joint is put; the
:meth:`Model.rank_report` says which equations are redundant and compares the
Gruebler--Kutzbach count with the true mobility.

Joint geometry is given in world coordinates at the bodies' **reference pose**
(each :class:`Body` carries one, approximate if need be; :meth:`Model.assemble`
closes the joints from it).

References
----------
P. E. Nikravesh, *Computer-Aided Analysis of Mechanical Systems*, Prentice Hall
(1988), ch. 6-7 and 11 (Euler parameters, spatial joints, equations of motion).
E. J. Haug, *Computer-Aided Kinematics and Dynamics of Mechanical Systems*, Allyn
and Bacon (1989), ch. 9-11.

Examples
--------
A spherical pendulum: a uniform rod of 1 kg and 1 m hanging from a ball joint,
released horizontally along x:

>>> import numpy as np, gaussopt as go
>>> from gaussopt.multibody import spatial as sp
>>> rod = sp.Body.uniform_rod("rod", 1.0, start=(0, 0, 0), end=(1, 0, 0))
>>> model = sp.Model([rod], [sp.Spherical(None, rod, point=(0, 0, 0))],
...                  gravity=(0, 0, -9.81))
>>> q0, v0 = model.initial_state()
>>> step = go.solve_step(model.system, 0.0, q0, v0)
>>> alpha = model.angular_acceleration(rod, q0, v0, step.a)
>>> round(float(alpha[1]), 9)          # 3 g / (2 l) about +y
14.715
"""

from __future__ import annotations

from gaussopt.multibody.common.analysis import RankReport
from gaussopt.multibody.spatial.elements import (GROUND, Armature, Body, Cylindrical, Distance,
                                                 DrivenAngle, Fixed, Force, Joint, Planar,
                                                 PointOnLine, PointOnPlane, Prismatic, Revolute,
                                                 RotationalDamper, Spherical, Spring, Torque,
                                                 Universal, quaternion, rotation_matrix)
from gaussopt.multibody.spatial.mechanism import JointReaction, Model

__all__ = ["Body", "Spherical", "Revolute", "Prismatic", "Cylindrical", "Universal", "Fixed",
           "Planar", "PointOnLine", "PointOnPlane", "Distance", "DrivenAngle", "Force",
           "Torque", "Spring", "RotationalDamper", "Armature", "Model", "RankReport", "JointReaction",
           "Joint", "GROUND", "quaternion", "rotation_matrix"]
