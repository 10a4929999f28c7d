"""The spatial :class:`Model`: rigid bodies in Euler parameters, joints and forces as a
:class:`~gaussopt.System`, with its rank report, reactions and consistent states."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from gaussopt.gauss.solution import DEFAULT_RANK_TOL
from gaussopt.core.result import StepResult
from gaussopt.core.checks import as_state
import gaussopt.multibody.common.analysis as analysis
import gaussopt.multibody.common.states as states
from gaussopt.multibody.common.analysis import RankReport
from gaussopt.multibody.common.base_model import BaseModel
import gaussopt.multibody.spatial.compiled_model as kernel
from gaussopt.multibody.spatial.assembly import assemble_model
from gaussopt.multibody.spatial.elements import (GROUND, Body, BodyRef, Joint, _ref_name,
                                                 rotation_matrix)

__all__ = ["Model", "JointReaction"]


@dataclass
class JointReaction:
    """Force and torque a joint exerts on its body ``j`` (and minus them on ``i``).

    Attributes
    ----------
    joint : str
        Joint label, e.g. ``"Revolute(link1,link2)"``.
    body_i, body_j : str
        Body names (``"ground"`` for the ground).
    point : ndarray, shape (3,)
        World point the torque is taken about: the joint's anchor on ``j`` (the
        centroid of ``j`` for joints without one).
    force, torque : ndarray, shape (3,)
        On body ``j``, world frame [N], [N m].
    frame : ndarray, shape (3, 3)
        The joint frame's axes (rows, world): for an axis joint ``(f, g, axis)``,
        carried by body ``i``.
    force_local, torque_local : ndarray, shape (3,)
        ``frame @ force``, ``frame @ torque``: the reaction in the joint's frame (for a
        revolute joint ``torque_local[2]`` is the torque about the axis, zero unless
        the joint is driven).
    multipliers : ndarray
        The joint's multipliers.
    unique : bool
        False when the joint's rows belong to a redundant group: the split among
        the group is the minimum-norm choice, only the total is physical.
    """

    joint: str
    body_i: str
    body_j: str
    point: np.ndarray
    force: np.ndarray
    torque: np.ndarray
    frame: np.ndarray
    force_local: np.ndarray
    torque_local: np.ndarray
    multipliers: np.ndarray
    unique: bool = True

    def __str__(self) -> str:
        tag = "" if self.unique else "  [redundant: minimum-norm choice, not unique]"
        f, n = self.force_local, self.torque_local
        return (f"{self.joint}: on {self.body_j}, joint frame: F = ({f[0]:.6g}, {f[1]:.6g}, "
                f"{f[2]:.6g}) N, T = ({n[0]:.6g}, {n[1]:.6g}, {n[2]:.6g}) N m{tag}")


class Model(BaseModel):
    """Spatial rigid bodies, joints and forces, assembled into a :class:`~gaussopt.System`.

    Parameters
    ----------
    bodies : sequence of Body
        Body ``k`` owns ``q[7k:7k+7] = (x, y, z, e0, e1, e2, e3)``.
    joints : sequence of Joint
        :class:`Spherical`, :class:`Revolute`, :class:`Prismatic`,
        :class:`Cylindrical`, :class:`Universal`, :class:`Fixed`, :class:`Planar`,
        :class:`PointOnLine`, :class:`PointOnPlane`, :class:`Distance`,
        :class:`DrivenAngle`; loops close wherever a joint is put (no tree needed).
    forces : sequence
        :class:`Force`, :class:`Torque`, :class:`Spring`, :class:`RotationalDamper`,
        :class:`Armature`.
    gravity : array_like, shape (3,)
        e.g. ``(0, 0, -9.81)`` [m/s^2].
    name : str

    Attributes
    ----------
    system : System
        The assembled system (built once): ``M(q)`` singular by nature (each body's
        rotational block ``4 G^T J G`` has rank 3), ``F(t, q, v)`` with the quadratic
        velocity terms, one :class:`~gaussopt.Holonomic` block ``"joints"`` (one
        normalization row per body first, then the joints) with exact ``Phi_q`` and
        ``gamma``, the mechanical energy; compiled unless a force or drive is a
        Python callable.
    n, m : int
    coordinates, labels, joint_labels : list of str
    q_reference : ndarray
        ``q`` of the bodies' reference poses.
    conservative : bool
    """

    # (the assembled system, documented with this class: its Attributes link here)
    system = BaseModel.system

    kernel = kernel
    assemble_model = staticmethod(assemble_model)
    ref_name = staticmethod(_ref_name)

    def __init__(self, bodies: Sequence[Body], joints: Sequence[Joint] = (), forces: Sequence = (),
                 gravity=(0.0, 0.0, 0.0), name: str = "spatial") -> None:
        super().__init__(bodies, joints, forces, gravity, name)

    @property
    def q_reference(self) -> np.ndarray:
        return self._asm.q_reference.copy()

    def world_point(self, body: BodyRef, point) -> np.ndarray:
        """Body-frame coordinates of a world point given at the reference pose."""
        sl = self.body_slice(body)
        r, e = self._asm.q_reference[sl][:3], self._asm.q_reference[sl][3:]
        return rotation_matrix(e).T @ (np.asarray(point, dtype=float) - r)

    def rotation(self, body: BodyRef, q) -> np.ndarray:
        """Rotation matrix of ``body`` (body frame -> world), (3, 3) or (N, 3, 3)."""
        return rotation_matrix(np.asarray(q, dtype=float)[..., self.body_slice(body)][..., 3:])

    def point(self, body: BodyRef, s, q) -> np.ndarray:
        """World position of the body-frame point ``s``; (3,) or (N, 3)."""
        Q = np.asarray(q, dtype=float)[..., self.body_slice(body)]
        return Q[..., :3] + rotation_matrix(Q[..., 3:]) @ np.asarray(s, dtype=float)

    def angular_velocity(self, body: BodyRef, q, v) -> np.ndarray:
        """World angular velocity ``w = 2 E(p) p'``; (3,) or (N, 3)."""
        sl = self.body_slice(body)
        return 2.0 * _E(np.asarray(q, dtype=float)[..., sl][..., 3:],
                        np.asarray(v, dtype=float)[..., sl][..., 3:])

    def angular_acceleration(self, body: BodyRef, q, v, a) -> np.ndarray:
        """World angular acceleration ``w' = 2 E(p) p''`` (as ``E(p') p' = 0``)."""
        return self.angular_velocity(body, q, a)

    def point_velocity(self, body: BodyRef, s, q, v) -> np.ndarray:
        """World velocity of the body-frame point ``s``: ``r' + w x (A s)``."""
        sl = self.body_slice(body)
        Q, V = np.asarray(q, dtype=float)[..., sl], np.asarray(v, dtype=float)[..., sl]
        w = self.angular_velocity(body, q, v)
        return V[..., :3] + np.cross(w, rotation_matrix(Q[..., 3:]) @ np.asarray(s, dtype=float))

    # ------------------------------------------------------------------ kernel
    def mass(self, t: float, q) -> np.ndarray:
        """``M(q) = blockdiag(m I3, 4 G^T J G)``, shape (n, n), singular."""
        M = np.empty((self.n, self.n))
        kernel.mass(self._p, np.ascontiguousarray(q, dtype=float), M)
        return M

    def force(self, t: float, q, v) -> np.ndarray:
        """Applied and quadratic-velocity generalized force, shape (n,)."""
        q = np.ascontiguousarray(q, dtype=float)
        v = np.ascontiguousarray(v, dtype=float)
        F = np.empty(self.n)
        kernel.force(self._p, q, v, self._asm.external(t, q, v), F)
        return F

    def _mass_and_force(self) -> tuple:
        """``M(q)`` and ``F(t, q, v)``, callables."""
        return self.mass, self.force

    # ------------------------------------------------------------------ analysis
    def rank_report(self, q=None, t: float = 0.0, rank_tol: float = DEFAULT_RANK_TOL) -> RankReport:
        """Gruebler-Kutzbach's mobility, the rank of ``Phi_q`` at ``q`` (default the
        reference pose), the true mobility ``n - rank`` and the redundant rows.

        ``equations`` counts the normalization rows too (``gruebler = 6 nb - joint
        equations = n - m`` all the same); they are never redundant.
        """
        q = self._asm.q_reference if q is None else q
        return analysis.rank_report(self._asm, q, t, rank_tol)

    def reactions(self, t: float, q, step: Union[StepResult, np.ndarray],
                  rank_tol: float = DEFAULT_RANK_TOL) -> list[JointReaction]:
        """Force and torque of every joint on its body ``j``, world and joint frame.

        Parameters
        ----------
        t : float
        q : array_like, shape (n,)
        step : StepResult or ndarray, shape (m,)
            A step's result (its constraint force ``M a - F`` split into the
            minimum-norm multipliers) or the multipliers themselves.
        rank_tol : float

        Returns
        -------
        list of JointReaction, one per joint
        """
        asm = self._asm
        q = as_state(q, self.n, "q")
        A = asm.jacobian(t, q)
        lam = analysis._multipliers(asm, A, step, rank_tol)
        rep = analysis.rank_report(asm, q, t, rank_tol)
        involved = set(int(k) for k in rep.involved_rows)
        out = []
        for jlabel, rows, (i, j, s_i, s_j, frame_i) in zip(asm.joint_labels, asm.joint_rows,
                                                            asm.joint_ends):
            Q = A[rows].T @ lam[rows]           # generalized force of the joint, shape (n,)
            on, sign, s = (j, 1.0, s_j) if j != asm.ground else (i, -1.0, s_i)
            sl = slice(7 * on, 7 * on + 7)
            r, e = q[sl][:3], q[sl][3:]
            f = Q[sl][:3]
            n_c = 0.5 * _Emat(e) @ Q[sl][3:]      # torque about the centroid (Q_p = 2 E^T n + c p)
            Rb = rotation_matrix(e)
            P = r + Rb @ s if s is not None else r.copy()
            n_P = n_c - np.cross(P - r, f)
            f, n_P = sign * f, sign * n_P
            Ri = rotation_matrix(q[7 * i + 3:7 * i + 7]) if i != asm.ground else np.eye(3)
            frame = frame_i @ Ri.T              # rows: the joint axes in the world
            out.append(JointReaction(
                joint=jlabel, body_i=GROUND if i == asm.ground else asm.body_names[i],
                body_j=GROUND if j == asm.ground else asm.body_names[j], point=P, force=f,
                torque=n_P, frame=frame, force_local=frame @ f, torque_local=frame @ n_P,
                multipliers=lam[rows].copy(), unique=not (set(int(k) for k in rows) & involved)))
        return out

    # ------------------------------------------------------------------ states
    def assemble(self, q_guess=None, fixed: Optional[Mapping[str, float]] = None, t: float = 0.0,
                 tol: float = 1e-13, max_iter: int = 50) -> np.ndarray:
        """Positions with ``Phi(t, q) = 0`` (joints closed, Euler parameters unit) near
        ``q_guess`` (default the reference pose), some coordinates prescribed
        (``fixed``): Gauss--Newton, minimum-norm corrections."""
        q0 = self._asm.q_reference if q_guess is None else q_guess
        return states.assemble(self._asm, fixed, q0, t, tol, max_iter)

    def velocities(self, q, prescribed: Optional[Mapping[str, float]] = None, t: float = 0.0,
                   rank_tol: float = DEFAULT_RANK_TOL) -> np.ndarray:
        """Velocities with ``Phi_q v + Phi_t = 0`` and the ``prescribed`` components:
        coordinate rates (``"<body>.x"``) or world angular velocities (``"<body>.wx"``,
        ``".wy"``, ``".wz"``). Raises ModelError when they do not determine ``v``.
        ``prescribed=None`` means at rest (when the joints allow it: no driven angle
        moving at ``t``)."""
        if prescribed is None:
            q = as_state(q, self.n, "q")
            if not np.any(self._asm.phi_t(t, q)):
                return np.zeros(self.n)
        return states.velocities(self._asm, q, prescribed, t, rank_tol)

    def initial_state(self, fixed: Optional[Mapping[str, float]] = None,
                      prescribed_velocities: Optional[Mapping[str, float]] = None,
                      q_guess=None, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``(q0, v0)``: :meth:`assemble`, then :meth:`velocities`."""
        q0 = self.assemble(q_guess, fixed, t)
        return q0, self.velocities(q0, prescribed_velocities, t)

    def __repr__(self) -> str:
        return (f"spatial.Model({self.name!r}, bodies={list(self.body_names)}, "
                f"joints={len(self.joints)}, n={self.n}, m={self.m})")


def _Emat(e: np.ndarray) -> np.ndarray:
    e0, e1, e2, e3 = e
    return np.array([[-e1, e0, -e3, e2], [-e2, e3, e0, -e1], [-e3, -e2, e1, e0]])


def _E(e: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``E(e) x`` for arrays of Euler parameters ``e`` and 4-vectors ``x``, (..., 3)."""
    e0, e1, e2, e3 = (e[..., k] for k in range(4))
    x0, x1, x2, x3 = (x[..., k] for k in range(4))
    return np.stack([-e1 * x0 + e0 * x1 - e3 * x2 + e2 * x3,
                     -e2 * x0 + e3 * x1 + e0 * x2 - e1 * x3,
                     -e3 * x0 - e2 * x1 + e1 * x2 + e0 * x3], axis=-1)
