"""The :class:`Model`: bodies, joints and forces as a :class:`~gaussopt.System`.

It composes the assembly (:mod:`~gaussopt.multibody.planar.assembly`), the kernel
(:mod:`~gaussopt.multibody.planar.compiled_model`), the analysis
(:mod:`~gaussopt.multibody.common.analysis`) and the consistent states
(:mod:`~gaussopt.multibody.common.states`).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.integrate.stabilization import Projection
from gaussopt.gauss.solution import DEFAULT_RANK_TOL
from gaussopt.core.result import StepResult
import gaussopt.multibody.common.analysis as analysis
from gaussopt.multibody.common.base_model import BaseModel
import gaussopt.multibody.planar.compiled_model as kernel
import gaussopt.multibody.common.states as states
from gaussopt.multibody.common.analysis import JointReaction, RankReport
from gaussopt.multibody.planar.assembly import assemble_model
from gaussopt.multibody.planar.elements import Body, BodyRef, Joint, Vector2, _ref_name

__all__ = ["Model", "Mechanism", "LeastSquaresProjection"]

_NONE = np.zeros(0)


class Model(BaseModel):
    """Planar bodies, joints and forces, assembled into a :class:`~gaussopt.System`.

    Parameters
    ----------
    bodies : sequence of Body
        The moving bodies; body ``k`` owns coordinates ``3k, 3k+1, 3k+2``
        (``x``, ``y``, ``phi`` of its centroid).
    joints : sequence of Joint
        :class:`Revolute`, :class:`Prismatic`, :class:`Fixed`,
        :class:`DrivenAngle`, :class:`PointOnLine`.
    forces : sequence
        :class:`PointForce`, :class:`Torque`, :class:`Spring`, :class:`Damper`.
    gravity : array_like, shape (2,)
        Gravitational acceleration vector [m/s^2], e.g. ``(0, -9.81)``.
    name : str, optional

    Attributes
    ----------
    system : System
        The assembled system (built once): constant ``M``, force ``F(t, q, v)``
        (a constant array when no force depends on the state), one
        :class:`~gaussopt.Holonomic` block ``"joints"`` with the exact
        ``Phi_q`` and ``gamma``, and the mechanical energy (kinetic + gravity +
        springs + constant forces/torques; conserved when :attr:`conservative`).
        Its ``compiled`` functions run the kernel inside the compiled engine,
        unless the model has Python callables (a :class:`DrivenAngle` with a
        callable angle, a callable :class:`PointForce` or :class:`Torque`).
    coordinates : tuple of str
    labels : list of str
        One label per joint equation, ``"Revolute(crank2,coupler)[x]"``; a second
        joint of the same kind between the same bodies is ``"...#2"``.
    joint_labels : list of str
        One label per joint, the same without the row suffix.
    n, m : int
        Numbers of coordinates and joint equations.

    Notes
    -----
    The equations are grouped by primitive (point coincidence, angle, point on
    line) and packed with the forces into one parameter array at construction
    (:mod:`gaussopt.multibody.planar.compiled_model`); one compiled (numba) kernel evaluates
    them, for these methods and for the compiled engine alike, so one
    evaluation of :meth:`rows` is a single loop over the primitives. The ground
    is a padding body at index ``len(bodies)`` with zero coordinates, so joints
    to the ground need no special case.
    """

    # (the assembled system, documented with this class: its Attributes link here)
    system = BaseModel.system

    kernel = kernel
    assemble_model = staticmethod(assemble_model)
    ref_name = staticmethod(_ref_name)

    def __init__(self, bodies: Sequence[Body], joints: Sequence[Joint] = (),
                 forces: Sequence = (), gravity: Vector2 = (0.0, 0.0),
                 name: str = "multibody") -> None:
        super().__init__(bodies, joints, forces, gravity, name)
        self.mass_matrix = np.diag(self._asm.mass_diagonal)

    def point(self, body: BodyRef, point: Vector2, q: np.ndarray) -> np.ndarray:
        """World position of a body point, shape (2,) for ``q`` of shape (n,), (N, 2) for (N, n)."""
        sl = self.body_slice(body)
        s = np.asarray(point, dtype=float)
        Q = np.asarray(q)[..., sl]
        c, sn = np.cos(Q[..., 2]), np.sin(Q[..., 2])
        return np.stack([Q[..., 0] + c * s[0] - sn * s[1], Q[..., 1] + sn * s[0] + c * s[1]], axis=-1)

    def point_velocity(self, body: BodyRef, point: Vector2, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """World velocity of a body point, shapes as :meth:`point`."""
        sl = self.body_slice(body)
        s = np.asarray(point, dtype=float)
        Q, V = np.asarray(q)[..., sl], np.asarray(v)[..., sl]
        c, sn = np.cos(Q[..., 2]), np.sin(Q[..., 2])
        rx, ry = c * s[0] - sn * s[1], sn * s[0] + c * s[1]
        return np.stack([V[..., 0] - V[..., 2] * ry, V[..., 1] + V[..., 2] * rx], axis=-1)

    # ------------------------------------------------------------------ kernel
    def _external_forces(self, t, q, v) -> np.ndarray:
        """Values of the callable point forces (two each), then of the callable torques."""
        out = []
        for f in self._asm.point_forces:
            fv = np.asarray(f(t, q, v), dtype=float).reshape(-1)
            if fv.shape != (2,):
                raise ModelError(f"a PointForce callable returned shape {fv.shape}, expected (2,).")
            out += [fv[0], fv[1]]
        out += [float(f(t, q, v)) for f in self._asm.torques]
        return np.array(out, dtype=float) if out else _NONE

    # ------------------------------------------------------------------ forces, energy
    def force(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Generalized applied force ``F = Q``, shape (n,) (no inertia terms in body coordinates)."""
        F = np.empty(self.n)
        kernel.force(self._p, np.ascontiguousarray(q, dtype=float),
                     np.ascontiguousarray(v, dtype=float), self._external_forces(t, q, v), F)
        return F

    def _mass_and_force(self) -> tuple:
        """The constant ``M``, and ``F`` (a constant array when no force depends on the
        state)."""
        asm = self._asm
        return self.mass_matrix, (self.force if asm.state_dependent_force else asm.F0.copy())

    # ------------------------------------------------------------------ analysis
    def rank_report(self, q: np.ndarray, t: float = 0.0,
                    rank_tol: float = DEFAULT_RANK_TOL) -> RankReport:
        """Gruebler's count, numerical rank of ``Phi_q`` and the redundant rows at ``q``.

        Parameters
        ----------
        q : array_like, shape (n,)
        t : float
        rank_tol : float, default 1e-8
            gaussopt's relative rank tolerance (rows normalized).

        Returns
        -------
        RankReport
        """
        return analysis.rank_report(self._asm, q, t, rank_tol)

    def reactions(self, t: float, q: np.ndarray, step: Union[StepResult, np.ndarray],
                  rank_tol: float = DEFAULT_RANK_TOL) -> list[JointReaction]:
        """Force and moment of every joint on its two bodies, world frame.

        Parameters
        ----------
        t : float
        q : array_like, shape (n,)
        step : StepResult or ndarray, shape (m,)
            A step's result or multipliers ``lam`` (``M a = F + Phi_q^T lam``).
            From a StepResult the unique constraint force ``M a - F`` is taken
            and split into the *minimum-norm* multipliers (``min |lam|`` subject
            to ``Phi_q^T lam = M a - F``, rank from ``rank_tol``), whichever
            solver made the step (QP and GA multipliers are not minimum-norm);
            where the rows are independent these are the solver's multipliers.
            An array is used as given.
        rank_tol : float
            Tolerance of the redundancy decision that sets ``unique``.

        Returns
        -------
        list of JointReaction
            One per joint, in the order of ``joints``. Joints whose rows belong
            to a redundant group (:attr:`RankReport.involved`) get
            ``unique=False``: their share is the minimum-norm choice the
            solver made, only the total constraint force is physical.
        """
        return analysis.reactions(self._asm, t, q, step, rank_tol)

    # ------------------------------------------------------------------ initial states
    def assemble(self, fixed: Optional[Mapping[str, float]] = None, q_guess=None, t: float = 0.0,
                 tol: float = 1e-13, max_iter: int = 50) -> np.ndarray:
        """Positions satisfying ``Phi(t, q) = 0`` with some coordinates prescribed.

        Gauss--Newton from ``q_guess``: ``min |dq|`` subject to
        ``Phi_q dq = -Phi`` and ``dq_k = value_k - q_k`` for the prescribed
        coordinates (least squares, minimum norm).

        Parameters
        ----------
        fixed : mapping str -> float
            Prescribed coordinates, e.g. ``{"crank.phi": 0.5}``.
        q_guess : array_like, shape (n,), optional
            Starting guess (default: every body at its pin positions as given by
            ``fixed``, else zero); it selects the assembly branch.
        t : float
        tol : float
            Target ``max |Phi|`` (in the units of the rows).
        max_iter : int

        Returns
        -------
        q : ndarray, shape (n,)

        Raises
        ------
        ModelError
            No convergence (the prescribed values are incompatible with the joints).
        """
        return states.assemble(self._asm, fixed, q_guess, t, tol, max_iter)

    def velocities(self, q, prescribed: Optional[Mapping[str, float]] = None, t: float = 0.0,
                   rank_tol: float = DEFAULT_RANK_TOL) -> np.ndarray:
        """Velocities with ``Phi_q v + Phi_t = 0`` and some velocity components prescribed.

        Parameters
        ----------
        q : array_like, shape (n,)
            A consistent position (see :meth:`assemble`).
        prescribed : mapping str -> float
            e.g. ``{"crank.phi": -1.0}``.
        t : float
        rank_tol : float

        Returns
        -------
        v : ndarray, shape (n,)

        Raises
        ------
        ModelError
            The prescribed components do not determine ``v`` (too few: the
            stacked rows have rank below ``n``; e.g. at a singular position) or
            contradict the constraints.
        """
        return states.velocities(self._asm, q, prescribed, t, rank_tol)

    def initial_state(self, fixed: Optional[Mapping[str, float]] = None,
                      prescribed_velocities: Optional[Mapping[str, float]] = None,
                      q_guess=None, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Consistent ``(q0, v0)`` from independent coordinates and velocities.

        ``q0 = assemble(fixed, q_guess, t)``, ``v0 = velocities(q0, prescribed_velocities, t)``;
        see those methods.
        """
        return states.initial_state(self._asm, fixed, prescribed_velocities, q_guess, t)

    def __repr__(self) -> str:
        return (f"Model({self.name!r}, bodies={list(self.body_names)}, joints={len(self.joints)}, "
                f"n={self.n}, m={self.m})")


#: alias
Mechanism = Model

#: The least-squares projection for redundant linkages now is the library's
#: :class:`~gaussopt.Projection`; the name is kept for code written against it.
LeastSquaresProjection = Projection
