"""Planar multibody systems in body (Cartesian) coordinates -> :class:`~gaussopt.System`.

(Spatial bodies in Euler parameters and spatial joints are in
:mod:`gaussopt.multibody.spatial`; rigid-body trees in joint coordinates, their loops closed
by constraint rows, in :mod:`gaussopt.multibody.tree`; :func:`load` reads MJCF and URDF
files into a tree in joint coordinates -- ``q`` is MuJoCo's ``qpos``, the tree needs no
equations, only its ball/free joints' normalizations and the loop closures are rows --
or, with ``coordinates="maximal"``, into spatial bodies.)

Every rigid body ``k`` has the coordinates ``q_k = (x_k, y_k, phi_k)``: the
world position of its centroid and the angle of its body frame (origin at
the centroid) from the world x-axis, counter-clockwise. The mass matrix is
``M = blockdiag(m_k, m_k, J_k)`` (``J_k`` about the centroid) and, because the
body frames sit at the centroids, there are no velocity-dependent inertia
terms: ``F = Q`` (text 003, eqs. (1-1)-(1-10)). Joints are holonomic
constraints ``Phi(t, q) = 0`` between two bodies (or a body and the ground,
written ``None``); all of them are evaluated by one compiled (numba) kernel
with exact, hand-derived Jacobians ``Phi_q`` and convective terms ``gamma``.

Notation: ``R(phi)`` the rotation by ``phi``, ``perp(x) = (-x_y, x_x)`` (so
``dR/dphi s = perp(R s)``), ``cross(a, b) = a_x b_y - a_y b_x``,
``w = phi'``. A body point ``s`` (body frame, from the centroid) is at
``P = r + R s`` in the world and moves with ``P' = r' + w perp(R s)``; ``d'``
below is ``P_j' - P_i'``.

=====================  =====  ==========================================================================
joint                  rows   ``Phi``                                    (``gamma`` with ``Phi_q a = gamma``)
=====================  =====  ==========================================================================
point coincidence      2      ``r_i + R_i s_i - r_j - R_j s_j``          ``R_i s_i w_i^2 - R_j s_j w_j^2``
angle                  1      ``phi_j - phi_i - c(t)``                   ``c''(t)``
point on line          1      ``n . d``, ``n = R_i n_i``,                ``-(n.(w_i^2 R_i s_i - w_j^2 R_j s_j)``
                              ``d = r_j + R_j s_j - r_i - R_i s_i``      ``+ 2 w_i perp(n).d' - w_i^2 n.d)``
=====================  =====  ==========================================================================

with ``Phi_q`` rows: point coincidence ``[I, perp(R_i s_i) | -I, -perp(R_j s_j)]``;
angle ``[0, 0, -1 | 0, 0, 1]``; point on line ``[-n, cross(n, d) - cross(R_i s_i, n) |
n, cross(R_j s_j, n)]`` (body ``i`` columns | body ``j`` columns). The joints
are combinations of these: :class:`Revolute` (point coincidence, rows
``[x]``, ``[y]``), :class:`Fixed` (point coincidence and angle, ``[x]``,
``[y]``, ``[phi]``), :class:`Prismatic` (point on line and angle, ``[n]``,
``[phi]``), :class:`PointOnLine` (``[n]``, the line fixed in the ground) and
:class:`DrivenAngle` (``[phi]``, rheonomic).

The :class:`Model` also reports Gruebler's count, the numerical rank of the
constraint Jacobian and the redundant rows (:meth:`Model.rank_report`), the
joint reactions from a step's multipliers (:meth:`Model.reactions`) and
assembles consistent initial states (:meth:`Model.initial_state`).
:class:`LeastSquaresProjection` is the stabilization for redundant joints
passing singular (folded) positions.

The same kernel runs inside the compiled engine of :func:`gaussopt.simulate`
(``model.system.compiled``): a model without Python callables is integrated
without a single Python call. The package is split by role:
:mod:`~gaussopt.multibody.planar.elements` (bodies, joints, forces),
:mod:`~gaussopt.multibody.planar.assembly` (elements -> the kernel's tables; the
:class:`~gaussopt.multibody.planar.assembly.Assembly` is the one home of the model's
data and of its kinematics, ``Phi``, ``Phi_q``, ``gamma``, which the model,
the analysis and the states read: none of them imports another's module but
the model),
:mod:`~gaussopt.multibody.planar.compiled_model` (the numba functions; the compiled model
functions made from them by :mod:`~gaussopt.multibody.common.cfuncs`, one set of
templates for the planar and the spatial kind), :mod:`~gaussopt.multibody.common.analysis`
(rank report, reactions), :mod:`~gaussopt.multibody.common.states` (consistent initial
states) and :mod:`~gaussopt.multibody.planar.mechanism` (the :class:`Model`, on
:class:`~gaussopt.multibody.common.base_model.BaseModel`, which the spatial model shares).

References
----------
P. E. Nikravesh, *Computer-Aided Analysis of Mechanical Systems*, Prentice
Hall (1988), ch. 6-7 (body coordinates, joint constraints, reactions).

Examples
--------
A pendulum (uniform rod 2 kg, 1.5 m) pinned to the ground at its end:

>>> import numpy as np, gaussopt as go
>>> from gaussopt import multibody as mb
>>> rod = mb.Body.uniform_rod("rod", mass=2.0, length=1.5)
>>> model = mb.Model([rod], [mb.Revolute(None, (0.0, 0.0), rod, (-0.75, 0.0))],
...                  gravity=(0.0, -9.81))
>>> q0, v0 = model.initial_state({"rod.phi": 0.0}, {"rod.phi": 0.0})
>>> q0.round(12)
array([0.75, 0.  , 0.  ])
>>> step = go.solve_step(model.system, 0.0, q0, v0)
>>> round(float(step.a[2]), 9)        # -3 g / (2 l), released horizontally
-9.81
>>> model.reactions(0.0, q0, step)[0].force_j.round(9)   # pin force on the rod
array([0.   , 4.905])
"""

from __future__ import annotations

from gaussopt.multibody.common.analysis import JointReaction, RankReport
from gaussopt.multibody.planar.elements import (GROUND, Body, BodyRef, Damper, DrivenAngle, Fixed,
                                                Joint, PointForce, PointOnLine, Prismatic, Revolute,
                                                Spring, Torque, Vector2)
from gaussopt.multibody.planar.mechanism import LeastSquaresProjection, Mechanism, Model

__all__ = ["Body", "Revolute", "Prismatic", "Fixed", "DrivenAngle", "PointOnLine",
           "PointForce", "Torque", "Spring", "Damper", "Model", "Mechanism",
           "RankReport", "JointReaction", "LeastSquaresProjection", "GROUND", "spatial", "tree",
           "load"]


def __getattr__(name):
    # the spatial package (and its file loader) are imported on first use
    if name in ("spatial", "tree"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    if name == "load":
        from gaussopt.multibody.io.mjcf import load
        return load
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
