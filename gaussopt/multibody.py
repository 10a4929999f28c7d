"""Planar multibody systems in body (Cartesian) coordinates -> :class:`~gaussopt.System`.

Every rigid body ``k`` has the coordinates ``q_k = (x_k, y_k, phi_k)``: the
world position of its centroid and the angle of its body frame (origin at
the centroid) from the world x-axis, counter-clockwise. The mass matrix is
``M = blockdiag(m_k, m_k, J_k)`` (``J_k`` about the centroid) and, because the
body frames sit at the centroids, there are no velocity-dependent inertia
terms: ``F = Q`` (text 003, eqs. (1-1)-(1-10)). Joints are holonomic
constraints ``Phi(t, q) = 0`` between two bodies (or a body and the ground,
written ``None``); all of them are evaluated by one vectorized kernel with
exact, hand-derived Jacobians ``Phi_q`` and convective terms ``gamma``.

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

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence, Union

import numpy as np

from .constraints import Holonomic
from .exceptions import ModelError
from .integrate import Projection
from .linalg import DEFAULT_RANK_TOL, min_norm_multipliers, null_space_split
from .result import StepResult
from .system import System

__all__ = ["Body", "Revolute", "Prismatic", "Fixed", "DrivenAngle", "PointOnLine",
           "PointForce", "Torque", "Spring", "Damper", "Model", "Mechanism",
           "RankReport", "JointReaction", "LeastSquaresProjection", "GROUND"]

#: name under which the ground appears in labels and reactions
GROUND = "ground"

BodyRef = Union["Body", str, None]
Vector2 = Union[Sequence[float], np.ndarray]


# =========================================================================== bodies
@dataclass(frozen=True)
class Body:
    """A rigid body in the plane, its frame at the centroid.

    Parameters
    ----------
    name : str
        Unique name; the coordinates are ``"<name>.x"``, ``"<name>.y"``, ``"<name>.phi"``.
    mass : float
        Mass ``m > 0`` [kg].
    inertia : float
        Moment of inertia ``J >= 0`` about the centroid [kg m^2] (``0`` gives a
        singular mass matrix, which gaussopt accepts when constraints fix the angle).
    """

    name: str
    mass: float
    inertia: float

    @classmethod
    def uniform_rod(cls, name: str, mass: float, length: float) -> "Body":
        """A uniform slender rod: ``J = m l^2 / 12``; its ends are at ``(-l/2, 0)`` and ``(l/2, 0)``."""
        return cls(name, float(mass), float(mass) * float(length) ** 2 / 12.0)


def _ref_name(b: BodyRef) -> Optional[str]:
    if b is None:
        return None
    if isinstance(b, Body):
        return b.name
    if isinstance(b, str):
        return None if b == GROUND else b
    raise ModelError(f"a body reference must be a Body, a body name or None (ground), found {b!r}.")


# =========================================================================== joints
class Joint:
    """Base class of the joints. Subclasses list their equations with
    :meth:`_equations` as primitives (``"point"``, ``"angle"``, ``"line"``)."""

    kind = "Joint"
    name: Optional[str] = None

    def _bodies(self) -> tuple[Optional[str], Optional[str]]:
        raise NotImplementedError

    def _equations(self) -> list[tuple]:
        raise NotImplementedError

    def label(self) -> str:
        """``"Kind(body_i,body_j)"`` or the joint's own name."""
        if self.name:
            return self.name
        bi, bj = self._bodies()
        return f"{self.kind}({bi or GROUND},{bj or GROUND})"


@dataclass(frozen=True)
class Revolute(Joint):
    """Pin joint: point ``point_i`` of ``body_i`` coincides with ``point_j`` of ``body_j``.

    Two rows, ``[x]`` and ``[y]``: ``r_i + R_i s_i - r_j - R_j s_j = 0``. Either body
    may be ``None`` (ground; its "point" is then a world point).
    """

    body_i: BodyRef
    point_i: Vector2
    body_j: BodyRef
    point_j: Vector2
    name: Optional[str] = None
    kind = "Revolute"

    def _bodies(self):
        return _ref_name(self.body_i), _ref_name(self.body_j)

    def _equations(self):
        bi, bj = self._bodies()
        return [("point", bi, self.point_i, bj, self.point_j)]


@dataclass(frozen=True)
class Fixed(Joint):
    """Weld: the points coincide and the relative angle ``phi_j - phi_i = angle`` is fixed.

    Three rows, ``[x]``, ``[y]``, ``[phi]``.
    """

    body_i: BodyRef
    body_j: BodyRef
    point_i: Vector2 = (0.0, 0.0)
    point_j: Vector2 = (0.0, 0.0)
    angle: float = 0.0
    name: Optional[str] = None
    kind = "Fixed"

    def _bodies(self):
        return _ref_name(self.body_i), _ref_name(self.body_j)

    def _equations(self):
        bi, bj = self._bodies()
        return [("point", bi, self.point_i, bj, self.point_j),
                ("angle", bi, bj, float(self.angle), None)]


@dataclass(frozen=True)
class Prismatic(Joint):
    """Slider: ``point_j`` of ``body_j`` moves along the line through ``point_i``
    of ``body_i`` with direction ``axis_i`` (body ``i`` frame), and the relative
    angle ``phi_j - phi_i = angle`` is locked.

    Two rows: ``[n]`` (``n . d = 0``, ``n`` the unit normal ``perp(axis_i)``
    rotated with body ``i``, ``d = P_j - P_i``) and ``[phi]``.
    """

    body_i: BodyRef
    point_i: Vector2
    axis_i: Vector2
    body_j: BodyRef
    point_j: Vector2
    angle: float = 0.0
    name: Optional[str] = None
    kind = "Prismatic"

    def _bodies(self):
        return _ref_name(self.body_i), _ref_name(self.body_j)

    def _equations(self):
        bi, bj = self._bodies()
        return [("line", bi, self.point_i, self.axis_i, bj, self.point_j),
                ("angle", bi, bj, float(self.angle), None)]


@dataclass(frozen=True)
class PointOnLine(Joint):
    """A body point stays on a line fixed in the ground.

    One row ``[n]``: ``n . (r + R s - line_point) = 0``, ``n`` the unit normal of
    ``line_direction``. (Rotation and sliding are free: a roller support.)
    """

    body: BodyRef
    point: Vector2
    line_point: Vector2
    line_direction: Vector2
    name: Optional[str] = None
    kind = "PointOnLine"

    def _bodies(self):
        return None, _ref_name(self.body)

    def _equations(self):
        return [("line", None, self.line_point, self.line_direction, _ref_name(self.body), self.point)]


@dataclass(frozen=True)
class DrivenAngle(Joint):
    """Rheonomic drive: ``phi_body - phi_ref = angle(t)``.

    Parameters
    ----------
    body : Body or str
    angle : callable or float
        ``angle(t) -> float`` [rad], or a constant (the angle is locked).
    rate, acceleration : callable, optional
        ``angle'(t)`` and ``angle''(t)``; required (exact) when ``angle`` is
        callable. For the complex-step cross-check write ``angle`` with numpy ufuncs.
    reference : Body, str or None
        Body the angle is measured from (default ground).
    name : str, optional

    One row ``[phi]``; ``Phi_t = -angle'(t)``, ``gamma = angle''(t)``.
    """

    body: BodyRef
    angle: Union[Callable[[float], float], float]
    rate: Optional[Callable[[float], float]] = None
    acceleration: Optional[Callable[[float], float]] = None
    reference: BodyRef = None
    name: Optional[str] = None
    kind = "DrivenAngle"

    def _bodies(self):
        return _ref_name(self.reference), _ref_name(self.body)

    def _equations(self):
        bi, bj = self._bodies()
        if callable(self.angle):
            return [("angle", bi, bj, 0.0, (self.angle, self.rate, self.acceleration))]
        return [("angle", bi, bj, float(self.angle), None)]


# =========================================================================== forces
@dataclass(frozen=True)
class PointForce:
    """A force applied at a body point, world frame.

    Parameters
    ----------
    body : Body or str
    force : array_like, shape (2,), or callable
        Constant world-frame force [N], or ``force(t, q, v) -> ndarray, shape (2,)``.
    point : array_like, shape (2,)
        Point of application in the body frame (default the centroid).
    """

    body: BodyRef
    force: Union[Vector2, Callable]
    point: Vector2 = (0.0, 0.0)


@dataclass(frozen=True)
class Torque:
    """A torque [N m] on a body, constant or ``torque(t, q, v) -> float``."""

    body: BodyRef
    torque: Union[float, Callable]


@dataclass(frozen=True)
class Spring:
    """Linear spring between two body points (either body may be ``None`` = ground).

    Tension ``k (L - rest_length)`` along the line of the points, ``L = |P_j - P_i|``.
    """

    body_i: BodyRef
    point_i: Vector2
    body_j: BodyRef
    point_j: Vector2
    stiffness: float
    rest_length: float


@dataclass(frozen=True)
class Damper:
    """Linear damper between two body points: tension ``c L'`` along their line."""

    body_i: BodyRef
    point_i: Vector2
    body_j: BodyRef
    point_j: Vector2
    damping: float


# =========================================================================== reports
@dataclass
class RankReport:
    """Counts and the numerical rank of the joint equations at one state.

    Attributes
    ----------
    coordinates : int
        ``n = 3 * bodies``.
    equations : int
        ``m``, number of joint equations.
    gruebler : int
        Gruebler's count ``3 * bodies - equations``.
    rank : int
        Numerical rank of ``Phi_q`` (rows normalized, singular values relative
        to the largest below ``rank_tol`` dropped: :func:`gaussopt.linalg.null_space_split`).
    dof : int
        ``n - rank``: the instantaneous degrees of freedom.
    redundant : list of str
        ``m - rank`` row labels that can be removed without changing the rank:
        going through the (normalized) rows in order, a row is redundant when its
        distance to the span of the rows kept before it is below ``rank_tol``
        (if that count disagrees with ``rank``, the ``m - rank`` rows of smallest
        distance). Which rows are called redundant is a choice; ``involved``
        lists every row of the dependent groups.
    involved : list of str
        Every row with a component above ``1e-6`` in the (unit) left null space
        of the normalized ``Phi_q``: the rows whose multipliers are not unique.
    singular_values : ndarray, shape (min(m, n),)
        Singular values of the row-normalized Jacobian, descending.
    rank_tol : float
    redundant_rows, involved_rows : ndarray of int
        Row indices of ``redundant`` and ``involved``.
    """

    coordinates: int
    equations: int
    gruebler: int
    rank: int
    dof: int
    redundant: list
    involved: list
    singular_values: np.ndarray
    rank_tol: float
    redundant_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    involved_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    def __str__(self) -> str:
        return (f"{self.coordinates} coordinates, {self.equations} joint equations (Gruebler "
                f"count {self.gruebler}); rank {self.rank} (rank_tol {self.rank_tol:g}), "
                f"{self.dof} DOF; redundant rows: {self.redundant or 'none'}")


@dataclass
class JointReaction:
    """Constraint force and moment a joint exerts on its two bodies (world frame).

    Attributes
    ----------
    joint : str
        Joint label, e.g. ``"Revolute(crank1,coupler)"``.
    body_i, body_j : str
        Body names (``"ground"`` for the ground).
    point : ndarray, shape (2,)
        World point the moments are taken about: the joint point ``P_j`` of body
        ``j`` (for :class:`DrivenAngle`, body ``j``'s centroid).
    force_i, force_j : ndarray, shape (2,)
        Force on body ``i`` / ``j`` [N]; ``force_i = -force_j``.
    moment_i, moment_j : float
        Moment on body ``i`` / ``j`` about ``point`` [N m]; ``moment_i = -moment_j``
        (zero for an ideal revolute joint).
    multipliers : ndarray, shape (k,)
        The joint's multipliers ``lam`` (``M a = F + Phi_q^T lam``).
    unique : bool
        ``False`` when the joint's rows belong to a redundant group: then only
        the sum over the group is determined and this is the *minimum-norm*
        choice of the multipliers, not a physical fact.
    """

    joint: str
    body_i: str
    body_j: str
    point: np.ndarray
    force_i: np.ndarray
    moment_i: float
    force_j: np.ndarray
    moment_j: float
    multipliers: np.ndarray
    unique: bool = True

    def __str__(self) -> str:
        tag = "" if self.unique else "  [redundant: minimum-norm choice, not unique]"
        return (f"{self.joint}: on {self.body_j} F = ({self.force_j[0]:.6g}, {self.force_j[1]:.6g}) N, "
                f"M = {self.moment_j:.6g} N m about ({self.point[0]:.4g}, {self.point[1]:.4g}){tag}")


# =========================================================================== model
def _vec2(x, label: str, problems: list) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        problems.append(f"{label} must be a pair of floats, found {x!r}")
        return np.zeros(2)
    if a.shape != (2,) or not np.all(np.isfinite(a)):
        problems.append(f"{label} must be a finite pair of floats (shape (2,)), found {x!r}")
        return np.zeros(2)
    return a


def _int_array(x) -> np.ndarray:
    return np.asarray(x, dtype=np.intp)


def _float_rows(x, k: int) -> np.ndarray:
    """Stack a list of length-k vectors into shape (len(x), k) (also when empty)."""
    return np.asarray(x, dtype=float).reshape(-1, k) if len(x) else np.zeros((0, k))


class _JointConstraint(Holonomic):
    """All joint equations of a :class:`Model` as one :class:`~gaussopt.Holonomic`
    block, with the model's exact Jacobian and ``gamma`` evaluated in one pass."""

    def __init__(self, model: "Model") -> None:
        super().__init__(model.phi, jacobian=model.jacobian, gamma=model.gamma,
                         phi_t=model.phi_t if model.rheonomic else None,
                         rheonomic=model.rheonomic, name="joints")
        self._model = model

    def rows(self, t, q, v):
        return self._model.rows(t, q, v)


class _MultibodySystem(System):
    """A :class:`~gaussopt.System` whose row labels are the joints' row labels."""

    def __init__(self, *args, labels: Sequence[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._labels = list(labels)

    def row_labels(self, t: float = 0.0, q=None, v=None) -> list[str]:
        return list(self._labels)


class Model:
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
    The constraint kernel groups the equations by primitive (point coincidence,
    angle, point on line) into index arrays at construction, so one evaluation
    of :meth:`rows` is a fixed number of numpy operations whatever the number
    of bodies: the Jacobian is a preassembled template (the constant ``+-1``
    entries) into which the state-dependent entries are scattered by
    precomputed flat indices. The ground is a padding body at index
    ``len(bodies)`` with zero coordinates, so joints to the ground need no
    special case.
    """

    def __init__(self, bodies: Sequence[Body], joints: Sequence[Joint] = (),
                 forces: Sequence = (), gravity: Vector2 = (0.0, 0.0),
                 name: str = "multibody") -> None:
        problems: list[str] = []
        bodies = list(bodies)
        if not bodies:
            raise ModelError("`bodies` is empty: a model needs at least one Body.")
        names: list[str] = []
        for k, b in enumerate(bodies):
            if not isinstance(b, Body):
                problems.append(f"`bodies[{k}]` must be a Body, found {type(b).__name__}")
                continue
            if not isinstance(b.name, str) or not b.name or b.name == GROUND or "." in b.name:
                problems.append(f"`bodies[{k}]`: the name must be a non-empty str without '.', "
                                f"not {GROUND!r}; found {b.name!r}")
            if not (np.isfinite(b.mass) and b.mass > 0):
                problems.append(f"body {b.name!r}: `mass` must be > 0, found {b.mass!r}")
            if not (np.isfinite(b.inertia) and b.inertia >= 0):
                problems.append(f"body {b.name!r}: `inertia` must be >= 0, found {b.inertia!r}")
            names.append(b.name)
        dup = sorted({x for x in names if names.count(x) > 1})
        if dup:
            problems.append(f"duplicate body names {dup}")
        if problems:
            raise ModelError(f"Model {name!r} is malformed:\n  - " + "\n  - ".join(problems))
        self.name = name
        self.bodies = tuple(bodies)
        self.body_names = tuple(names)
        self._index = {nm: k for k, nm in enumerate(names)}
        nb = len(bodies)
        self.nb = nb
        self.n = n = 3 * nb
        self.ground = nb
        self.coordinates = tuple(f"{nm}.{c}" for nm in names for c in ("x", "y", "phi"))
        self._coord_index = {c: i for i, c in enumerate(self.coordinates)}
        self.gravity = _vec2(gravity, "`gravity`", problems)

        def idx(ref, label):
            try:
                nm = _ref_name(ref)
            except ModelError as e:
                problems.append(f"{label}: {e}")
                return self.ground
            if nm is None:
                return self.ground
            if nm not in self._index:
                problems.append(f"{label}: unknown body {nm!r} (bodies: {list(names)})")
                return self.ground
            if isinstance(ref, Body) and ref is not self.bodies[self._index[nm]] \
                    and ref != self.bodies[self._index[nm]]:
                problems.append(f"{label}: Body {nm!r} differs from the model's body of that name")
            return self._index[nm]

        # ---------------------------------------------------------- joints -> primitives
        self.joints = tuple(joints)
        pt_i, pt_j, pt_si, pt_sj, pt_row = [], [], [], [], []
        an_i, an_j, an_c, an_row, drivers = [], [], [], [], []
        ln_i, ln_j, ln_si, ln_sj, ln_n, ln_row = [], [], [], [], [], []
        labels: list[str] = []
        joint_labels: list[str] = []
        seen: dict[str, int] = {}
        self._joint_rows: list[np.ndarray] = []
        self._joint_ends: list[tuple[int, int, Optional[np.ndarray]]] = []
        row = 0
        for jk, jt in enumerate(self.joints):
            if not isinstance(jt, Joint):
                problems.append(f"`joints[{jk}]` must be a Revolute, Prismatic, Fixed, DrivenAngle "
                                f"or PointOnLine, found {type(jt).__name__}")
                continue
            lab = f"joints[{jk}] {jt.kind}"
            try:
                lbl = jt.label()
            except ModelError as e:
                problems.append(f"{lab}: {e}")
                continue
            seen[lbl] = seen.get(lbl, 0) + 1
            if seen[lbl] > 1:                       # same kind between the same bodies again
                lbl = f"{lbl}#{seen[lbl]}"
            joint_labels.append(lbl)
            start = row
            end_i = end_j = self.ground
            Pj = None               # body-j point the reaction moments are taken about
            for eq in jt._equations():
                kind = eq[0]
                if kind == "point":
                    _, bi, si, bj, sj = eq
                    i, j = idx(bi, lab), idx(bj, lab)
                    pt_i.append(i), pt_j.append(j)
                    pt_si.append(_vec2(si, f"{lab}: point_i", problems))
                    pt_sj.append(_vec2(sj, f"{lab}: point_j", problems))
                    pt_row.append(row)
                    labels += [f"{lbl}[x]", f"{lbl}[y]"]
                    row += 2
                    Pj = pt_sj[-1]
                elif kind == "angle":
                    _, bi, bj, c0, drv = eq
                    i, j = idx(bi, lab), idx(bj, lab)
                    if not np.isfinite(c0):
                        problems.append(f"{lab}: `angle` must be finite, found {c0!r}")
                    an_i.append(i), an_j.append(j), an_c.append(c0), an_row.append(row)
                    if drv is not None:
                        f, df, ddf = drv
                        if not (callable(df) and callable(ddf)):
                            problems.append(f"{lab}: a callable `angle` needs callable `rate` and "
                                            f"`acceleration` (its exact derivatives); found "
                                            f"rate={df!r}, acceleration={ddf!r}")
                        drivers.append((row, f, df, ddf))
                    labels.append(f"{lbl}[phi]")
                    row += 1
                else:   # line
                    _, bi, si, axis, bj, sj = eq
                    i, j = idx(bi, lab), idx(bj, lab)
                    ax = _vec2(axis, f"{lab}: axis", problems)
                    nrm = float(np.hypot(*ax))
                    if nrm == 0.0:
                        problems.append(f"{lab}: the axis/line direction must be nonzero, found {axis!r}")
                        nrm = 1.0
                    ln_i.append(i), ln_j.append(j)
                    ln_si.append(_vec2(si, f"{lab}: point_i/line_point", problems))
                    ln_sj.append(_vec2(sj, f"{lab}: point_j/point", problems))
                    ln_n.append(np.array([-ax[1], ax[0]]) / nrm)
                    ln_row.append(row)
                    labels.append(f"{lbl}[n]")
                    row += 1
                    Pj = ln_sj[-1]
                end_i, end_j = i, j
                if i == j:
                    problems.append(f"{lab} connects {'the ground' if i == self.ground else repr(names[i])} "
                                    "to itself; give two different bodies")
            self._joint_rows.append(np.arange(start, row))
            self._joint_ends.append((end_i, end_j, Pj))
        self.m = m = row
        self.labels = labels
        self.joint_labels = joint_labels
        self._drivers = drivers
        self.rheonomic = bool(drivers)

        # ---------------------------------------------------------- forces
        self._pf_const: list[tuple[int, np.ndarray, np.ndarray]] = []
        self._pf_call: list[tuple[int, np.ndarray, Callable]] = []
        self._tq_const: list[tuple[int, float]] = []
        self._tq_call: list[tuple[int, Callable]] = []
        sp = []     # (i, si, j, sj, k, L0, c)
        for fk, fo in enumerate(forces):
            lab = f"forces[{fk}] {type(fo).__name__}"
            if isinstance(fo, PointForce):
                b = idx(fo.body, lab)
                s = _vec2(fo.point, f"{lab}: point", problems)
                if b == self.ground:
                    problems.append(f"{lab}: a force on the ground has no effect; give a body")
                if callable(fo.force):
                    self._pf_call.append((b, s, fo.force))
                else:
                    self._pf_const.append((b, s, _vec2(fo.force, f"{lab}: force", problems)))
            elif isinstance(fo, Torque):
                b = idx(fo.body, lab)
                if b == self.ground:
                    problems.append(f"{lab}: a torque on the ground has no effect; give a body")
                if callable(fo.torque):
                    self._tq_call.append((b, fo.torque))
                elif not np.isfinite(fo.torque):
                    problems.append(f"{lab}: `torque` must be finite, found {fo.torque!r}")
                else:
                    self._tq_const.append((b, float(fo.torque)))
            elif isinstance(fo, (Spring, Damper)):
                i, j = idx(fo.body_i, lab), idx(fo.body_j, lab)
                si = _vec2(fo.point_i, f"{lab}: point_i", problems)
                sj = _vec2(fo.point_j, f"{lab}: point_j", problems)
                if i == j:
                    problems.append(f"{lab} connects a body to itself")
                if isinstance(fo, Spring):
                    k, L0, c = float(fo.stiffness), float(fo.rest_length), 0.0
                    if not (np.isfinite(k) and np.isfinite(L0) and L0 >= 0):
                        problems.append(f"{lab}: `stiffness` must be finite and `rest_length` >= 0, "
                                        f"found {fo.stiffness!r}, {fo.rest_length!r}")
                else:
                    k, L0, c = 0.0, 0.0, float(fo.damping)
                    if not np.isfinite(c):
                        problems.append(f"{lab}: `damping` must be finite, found {fo.damping!r}")
                sp.append((i, si, j, sj, k, L0, c))
            else:
                problems.append(f"`forces[{fk}]` must be a PointForce, Torque, Spring or Damper, "
                                f"found {type(fo).__name__}")
        if problems:
            raise ModelError(f"Model {name!r} is malformed:\n  - " + "\n  - ".join(problems))

        # ---------------------------------------------------------- index arrays
        ia, fa = _int_array, _float_rows
        self._pi, self._pj, self._prow = ia(pt_i), ia(pt_j), ia(pt_row)
        self._psi, self._psj = fa(pt_si, 2), fa(pt_sj, 2)
        self._ai, self._aj, self._arow = ia(an_i), ia(an_j), ia(an_row)
        self._ac = np.asarray(an_c, dtype=float)
        self._li, self._lj, self._lrow = ia(ln_i), ia(ln_j), ia(ln_row)
        self._lsi, self._lsj, self._ln = fa(ln_si, 2), fa(ln_sj, 2), fa(ln_n, 2)
        self._drow = ia([d[0] for d in drivers])

        # Jacobian in transposed, ground-padded layout AT (n + 3, m), C order:
        # A = AT[:n].T is an F-contiguous view, no copy.
        AT0 = np.zeros((n + 3, m))
        px, py = self._prow, self._prow + 1
        pi3, pj3 = 3 * self._pi, 3 * self._pj
        AT0[pi3, px] = 1.0
        AT0[pj3, px] = -1.0
        AT0[pi3 + 1, py] = 1.0
        AT0[pj3 + 1, py] = -1.0
        AT0[3 * self._ai + 2, self._arow] = -1.0
        AT0[3 * self._aj + 2, self._arow] = 1.0
        self._AT0 = AT0
        li3, lj3, lr = 3 * self._li, 3 * self._lj, self._lrow

        def flat(col, r):
            return col * m + r

        self._var_idx = np.concatenate([
            flat(pi3 + 2, px), flat(pj3 + 2, px), flat(pi3 + 2, py), flat(pj3 + 2, py),
            flat(li3, lr), flat(li3 + 1, lr), flat(li3 + 2, lr),
            flat(lj3, lr), flat(lj3 + 1, lr), flat(lj3 + 2, lr)]).astype(np.intp)
        # point table: every (body, body point) a primitive uses, evaluated once per call
        Kp, Kl = self._pi.size, self._li.size
        self._tb = np.concatenate([self._pi, self._pj, self._li, self._lj]).astype(np.intp)
        ts = np.concatenate([self._psi, self._psj, self._lsi, self._lsj])
        self._tsx, self._tsy = ts[:, 0].copy(), ts[:, 1].copy()
        NP = self._tb.size
        ka, kb = np.arange(Kp), Kp + np.arange(Kp)                 # table rows of i / j points
        self._la, self._lb = 2 * Kp + np.arange(Kl), 2 * Kp + Kl + np.arange(Kl)
        # point rows in [x rows, y rows] order; gathers from concat(Rx, Ry) (length 2 NP)
        self._prow_xy = np.concatenate([px, py]).astype(np.intp)
        self._ga = np.concatenate([ka, NP + ka]).astype(np.intp)
        self._gb = np.concatenate([kb, NP + kb]).astype(np.intp)
        # Jacobian entries of point rows: (-Ry_a, +Ry_b, +Rx_a, -Rx_b), cf. _var_idx order
        self._gjac = np.concatenate([NP + ka, NP + kb, ka, kb]).astype(np.intp)
        self._sjac = np.concatenate([-np.ones(Kp), np.ones(Kp), np.ones(Kp), -np.ones(Kp)])
        self._lnx, self._lny = self._ln[:, 0].copy(), self._ln[:, 1].copy()

        # forces
        mvec = np.array([b.mass for b in bodies])
        Jvec = np.array([b.inertia for b in bodies])
        self._mdiag = np.repeat(mvec, 3)
        self._mdiag[2::3] = Jvec
        self.mass_matrix = np.diag(self._mdiag)
        F0 = np.zeros(n + 3)
        F0[0:n:3] = mvec * self.gravity[0]
        F0[1:n:3] = mvec * self.gravity[1]
        for b, tq in self._tq_const:
            F0[3 * b + 2] += tq
        pfb = ia([p[0] for p in self._pf_const])
        self._pfb, self._pfs = pfb, fa([p[1] for p in self._pf_const], 2)
        self._pff = fa([p[2] for p in self._pf_const], 2)
        np.add.at(F0, 3 * pfb, self._pff[:, 0])
        np.add.at(F0, 3 * pfb + 1, self._pff[:, 1])
        # moment arms of constant forces at the centroid vanish: keep only the others
        arm = np.any(self._pfs != 0.0, axis=1)
        self._pfb_m, self._pfs_m, self._pff_m = pfb[arm], self._pfs[arm], self._pff[arm]
        self._F0 = F0
        self._sp_i = ia([s[0] for s in sp])
        self._sp_j = ia([s[2] for s in sp])
        self._sp_si, self._sp_sj = fa([s[1] for s in sp], 2), fa([s[3] for s in sp], 2)
        self._sp_k = np.asarray([s[4] for s in sp], dtype=float)
        self._sp_L0 = np.asarray([s[5] for s in sp], dtype=float)
        self._sp_c = np.asarray([s[6] for s in sp], dtype=float)
        self.conservative = not (self._pf_call or self._tq_call or np.any(self._sp_c != 0.0)
                                 or self.rheonomic)
        self._state_dependent_force = bool(self._pf_call or self._tq_call or len(sp) or arm.any())
        self._system: Optional[System] = None

    # ------------------------------------------------------------------ lookups
    def index(self, coordinate: str) -> int:
        """Index of a coordinate ``"<body>.x|y|phi"`` in ``q``."""
        try:
            return self._coord_index[coordinate]
        except KeyError:
            raise ModelError(f"unknown coordinate {coordinate!r}; coordinates are '<body>.x', "
                             f"'<body>.y', '<body>.phi' for bodies {list(self.body_names)}.") from None

    def body_slice(self, body: BodyRef) -> slice:
        """Slice of ``q`` holding ``(x, y, phi)`` of ``body``."""
        nm = _ref_name(body)
        if nm not in self._index:
            raise ModelError(f"`body` must be one of {list(self.body_names)}, found {body!r}.")
        k = self._index[nm]
        return slice(3 * k, 3 * k + 3)

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
    def _pad(self, x: np.ndarray) -> np.ndarray:
        xe = np.zeros(self.n + 3, dtype=np.result_type(x, float))
        xe[:self.n] = x
        return xe

    def _driver_values(self, t, order: int) -> np.ndarray:
        """``c(t)`` (order 0), ``c'(t)`` (1) or ``c''(t)`` (2) of the driven rows."""
        return np.array([d[1 + order](t) for d in self._drivers],
                        dtype=np.result_type(t, float) if order == 0 else float)

    def _table(self, qe: np.ndarray):
        """``cos/sin`` of the table bodies' angles and the world offsets ``R s`` of
        the point table (shapes (NP,))."""
        tb = self._tb
        P = qe[2::3]
        Ct, St = np.cos(P)[tb], np.sin(P)[tb]
        return Ct, St, Ct * self._tsx - St * self._tsy, St * self._tsx + Ct * self._tsy

    def _positions(self, qe: np.ndarray, Rx: np.ndarray, Ry: np.ndarray):
        """World positions ``r + R s`` of the point table."""
        tb = self._tb
        return qe[0::3][tb] + Rx, qe[1::3][tb] + Ry

    def phi(self, t: float, q: np.ndarray) -> np.ndarray:
        """Joint equations ``Phi(t, q)``, shape (m,). Complex-safe in ``t`` and ``q``."""
        qe = self._pad(np.asarray(q))
        out = np.zeros(self.m, dtype=np.result_type(qe, t))
        Ct, St, Rx, Ry = self._table(qe)
        Px, Py = self._positions(qe, Rx, Ry)
        if self._prow_xy.size:
            PW = np.concatenate([Px, Py])
            out[self._prow_xy] = PW[self._ga] - PW[self._gb]
        if self._ai.size:
            P = qe[2::3]
            out[self._arow] = P[self._aj] - P[self._ai] - self._ac
            if self._drivers:
                out[self._drow] -= self._driver_values(t, 0)
        if self._lrow.size:
            la, lb = self._la, self._lb
            nx = Ct[la] * self._lnx - St[la] * self._lny
            ny = St[la] * self._lnx + Ct[la] * self._lny
            out[self._lrow] = nx * (Px[lb] - Px[la]) + ny * (Py[lb] - Py[la])
        return out

    def phi_t(self, t: float, q: np.ndarray) -> np.ndarray:
        """Explicit time derivative ``Phi_t``, shape (m,): ``-c'(t)`` on driven rows."""
        out = np.zeros(self.m)
        if self._drivers:
            out[self._drow] = -self._driver_values(t, 1)
        return out

    def _rows_T(self, t: float, q: np.ndarray, v: Optional[np.ndarray]):
        """Padded transposed Jacobian ``AT`` (n + 3, m) and ``gamma`` (or None)."""
        qe = self._pad(q)
        Ct, St, Rx, Ry = self._table(qe)
        AT = self._AT0.copy()
        gam = None
        if v is not None:
            ve = self._pad(v)
            W = ve[2::3]
            Wt = W[self._tb]
            Wt2 = Wt * Wt
            gam = np.zeros(self.m)
        R2 = np.concatenate([Rx, Ry])
        vals = R2[self._gjac] * self._sjac                 # point rows (+ nothing else)
        if v is not None and self._prow_xy.size:
            RW = R2 * np.concatenate([Wt2, Wt2])
            gam[self._prow_xy] = RW[self._ga] - RW[self._gb]
        if self._lrow.size:
            la, lb = self._la, self._lb
            Px, Py = self._positions(qe, Rx, Ry)
            Ci, Si = Ct[la], St[la]
            nx = Ci * self._lnx - Si * self._lny
            ny = Si * self._lnx + Ci * self._lny
            rix, riy, rjx, rjy = Rx[la], Ry[la], Rx[lb], Ry[lb]
            dx, dy = Px[lb] - Px[la], Py[lb] - Py[la]
            cr_rin = rix * ny - riy * nx           # cross(R_i s_i, n)
            vals = np.concatenate([vals, -nx, -ny, nx * dy - ny * dx - cr_rin,   # cross(n, d) - ...
                                   nx, ny, rjx * ny - rjy * nx])                 # cross(R_j s_j, n)
            if v is not None:
                i, j = self._tb[la], self._tb[lb]
                wi, wj = Wt[la], Wt[lb]
                ddx = ve[0::3][j] - wj * rjy - ve[0::3][i] + wi * riy        # d' = P_j' - P_i'
                ddy = ve[1::3][j] + wj * rjx - ve[1::3][i] - wi * rix
                wi2, wj2 = Wt2[la], Wt2[lb]
                gam[self._lrow] = -(nx * (wi2 * rix - wj2 * rjx) + ny * (wi2 * riy - wj2 * rjy)
                                    + 2.0 * wi * (nx * ddy - ny * ddx) - wi2 * (nx * dx + ny * dy))
        if vals.size:
            AT.reshape(-1)[self._var_idx] = vals
        if v is not None and self._drivers:
            gam[self._drow] = self._driver_values(t, 2)
        return AT, gam

    def jacobian(self, t: float, q: np.ndarray) -> np.ndarray:
        """Exact ``Phi_q``, shape (m, n) (an F-contiguous array)."""
        AT, _ = self._rows_T(t, q, None)
        return AT[:self.n].T

    def gamma(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Exact ``gamma = -(Phi_q v)_q v - 2 Phi_qt v - Phi_tt``, shape (m,)."""
        return self._rows_T(t, q, v)[1]

    def rows(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Acceleration rows ``(Phi_q, gamma)``, shapes (m, n) and (m,), in one pass."""
        AT, gam = self._rows_T(t, q, v)
        return AT[:self.n].T, gam

    # ------------------------------------------------------------------ forces, energy
    def _spring_geometry(self, qe, ve=None):
        X, Y, P = qe[0::3], qe[1::3], qe[2::3]
        C, S = np.cos(P), np.sin(P)
        i, j, si, sj = self._sp_i, self._sp_j, self._sp_si, self._sp_sj
        rix = C[i] * si[:, 0] - S[i] * si[:, 1]
        riy = S[i] * si[:, 0] + C[i] * si[:, 1]
        rjx = C[j] * sj[:, 0] - S[j] * sj[:, 1]
        rjy = S[j] * sj[:, 0] + C[j] * sj[:, 1]
        dx = X[j] + rjx - X[i] - rix
        dy = Y[j] + rjy - Y[i] - riy
        L = np.hypot(dx, dy)
        Ls = np.where(L > 0, L, 1.0)
        ex, ey = np.where(L > 0, dx / Ls, 0.0), np.where(L > 0, dy / Ls, 0.0)
        Ld = None
        if ve is not None:
            VX, VY, W = ve[0::3], ve[1::3], ve[2::3]
            ddx = VX[j] - W[j] * rjy - VX[i] + W[i] * riy
            ddy = VY[j] + W[j] * rjx - VY[i] - W[i] * rix
            Ld = ex * ddx + ey * ddy
        return rix, riy, rjx, rjy, ex, ey, L, Ld

    def force(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Generalized applied force ``F = Q``, shape (n,) (no inertia terms in body coordinates)."""
        if not self._state_dependent_force:
            return self._F0[:self.n].copy()
        n3 = self.n + 3
        F = self._F0.copy()
        qe = self._pad(q)
        if self._pfb_m.size:
            P = qe[2::3][self._pfb_m]
            c, s = np.cos(P), np.sin(P)
            sx, sy = self._pfs_m[:, 0], self._pfs_m[:, 1]
            rx, ry = c * sx - s * sy, s * sx + c * sy
            F += np.bincount(3 * self._pfb_m + 2, rx * self._pff_m[:, 1] - ry * self._pff_m[:, 0],
                             minlength=n3)
        for b, s, f in self._pf_call:
            fv = np.asarray(f(t, q, v), dtype=float).reshape(-1)
            if fv.shape != (2,):
                raise ModelError(f"a PointForce callable returned shape {fv.shape}, expected (2,).")
            c, sn = np.cos(qe[3 * b + 2]), np.sin(qe[3 * b + 2])
            rx, ry = c * s[0] - sn * s[1], sn * s[0] + c * s[1]
            F[3 * b:3 * b + 3] += (fv[0], fv[1], rx * fv[1] - ry * fv[0])
        for b, f in self._tq_call:
            F[3 * b + 2] += float(f(t, q, v))
        if self._sp_i.size:
            ve = self._pad(v)
            rix, riy, rjx, rjy, ex, ey, L, Ld = self._spring_geometry(qe, ve)
            T = self._sp_k * (L - self._sp_L0) + self._sp_c * Ld    # tension
            fx, fy = T * ex, T * ey                                   # force on i (towards j)
            i3, j3 = 3 * self._sp_i, 3 * self._sp_j
            idx = np.concatenate([i3, i3 + 1, i3 + 2, j3, j3 + 1, j3 + 2])
            val = np.concatenate([fx, fy, rix * fy - riy * fx, -fx, -fy, -(rjx * fy - rjy * fx)])
            F += np.bincount(idx, val, minlength=n3)
        return F[:self.n]

    def energy(self, t: float, q: np.ndarray, v: np.ndarray) -> float:
        """Kinetic energy plus the potentials of gravity, springs and the constant
        point forces and torques [J]; conserved when :attr:`conservative`."""
        T = 0.5 * float(np.dot(self._mdiag * v, v))
        qe = self._pad(q)
        # -F0 . q covers gravity, constant torques and the centroid part of constant forces
        V = -float(np.dot(self._F0[:self.n], q))
        if self._pfb_m.size:
            P = qe[2::3][self._pfb_m]
            c, s = np.cos(P), np.sin(P)
            sx, sy = self._pfs_m[:, 0], self._pfs_m[:, 1]
            V -= float(np.sum((c * sx - s * sy) * self._pff_m[:, 0] + (s * sx + c * sy) * self._pff_m[:, 1]))
        if self._sp_i.size:
            L = self._spring_geometry(qe)[6]
            V += float(0.5 * np.sum(self._sp_k * (L - self._sp_L0) ** 2))
        return T + V

    # ------------------------------------------------------------------ system
    @property
    def system(self) -> System:
        """The assembled :class:`~gaussopt.System` (built once, then cached)."""
        if self._system is None:
            force = self.force if self._state_dependent_force else self._F0[:self.n].copy()
            cons = [_JointConstraint(self)] if self.m else []
            self._system = _MultibodySystem(self.coordinates, mass=self.mass_matrix, force=force,
                                            constraints=cons, energy=self.energy, name=self.name,
                                            labels=self.labels)
        return self._system

    # ------------------------------------------------------------------ analysis
    @property
    def gruebler(self) -> int:
        """Gruebler's count ``3 * bodies - joint equations``."""
        return self.n - self.m

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
        q = self._state(q, "q")
        A = self.jacobian(t, q)
        m, n = A.shape
        if m == 0:
            return RankReport(n, 0, n, 0, n, [], [], np.zeros(0), rank_tol)
        _, _, r = null_space_split(A, np.zeros(m), rank_tol)
        nr = np.sqrt((A * A).sum(axis=1))
        An = A / np.where(nr > 0, nr, 1.0)[:, None]
        U, s, _ = np.linalg.svd(An, full_matrices=True)          # report: full left basis
        left = U[:, r:]                                    # left null space (m - r columns)
        involved = (np.flatnonzero(np.sqrt((left * left).sum(axis=1)) > 1e-6) if m > r
                    else np.zeros(0, dtype=int))
        # greedy in row order: residual of each row off the span of the rows kept before it
        resid = np.zeros(m)
        basis = np.zeros((0, n))
        for k in range(m):
            x = An[k].copy()
            for _ in range(2):                               # Gram-Schmidt, reorthogonalized
                x -= basis.T @ (basis @ x)
            resid[k] = float(np.sqrt(x @ x))
            if nr[k] > 0 and resid[k] > rank_tol:
                basis = np.vstack([basis, x / resid[k]])
        red = np.flatnonzero((resid <= rank_tol) | (nr == 0))
        if red.size != m - r:                                # disagreement near the threshold
            red = np.sort(np.argsort(resid, kind="stable")[:m - r])
        return RankReport(coordinates=n, equations=m, gruebler=n - m, rank=r, dof=n - r,
                          redundant=[self.labels[k] for k in red],
                          involved=[self.labels[k] for k in involved],
                          singular_values=s, rank_tol=rank_tol, redundant_rows=red,
                          involved_rows=np.asarray(involved, dtype=int))

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
        q = self._state(q, "q")
        AT, _ = self._rows_T(t, q, None)
        rep = self.rank_report(q, t, rank_tol)
        if isinstance(step, StepResult):
            # the constraint force M a - F is unique; its minimum-norm multipliers are
            # computed here, whatever choice the step solver made
            Qc = np.asarray(step.constraint_force, dtype=float).reshape(-1)
            if Qc.shape != (self.n,) or not np.all(np.isfinite(Qc)):
                raise ModelError(f"`step.constraint_force` must be a finite array of shape "
                                 f"({self.n},), found shape {Qc.shape}.")
            A = AT[:self.n].T
            lam = min_norm_multipliers(A, Qc, rank_tol)
            off = float(np.abs(A.T @ lam - Qc).max(initial=0.0))
            if off > 1e-8 * (1.0 + float(np.abs(Qc).max(initial=0.0))):
                raise ModelError(f"`step.constraint_force` is not a combination of the joint rows "
                                 f"at `q` (residual {off:.3g}): was the step computed at this state "
                                 "for this model?")
        else:
            lam = np.asarray(step, dtype=float).reshape(-1)
            if lam.shape != (self.m,):
                raise ModelError(f"`step` multipliers must have shape ({self.m},), found {lam.shape}.")
            if not np.all(np.isfinite(lam)):
                raise ModelError("`step` multipliers contain NaN or inf.")
        involved = set(rep.involved_rows.tolist())
        qe = self._pad(q)
        out = []
        for jlabel, rows, (bi, bj, sj) in zip(self.joint_labels, self._joint_rows,
                                              self._joint_ends):
            Q = AT[:, rows] @ lam[rows]
            Qi, Qj = Q[3 * bi:3 * bi + 3], Q[3 * bj:3 * bj + 3]
            Gi, Gj = qe[3 * bi:3 * bi + 2], qe[3 * bj:3 * bj + 2]
            if sj is None:
                pt = Gj.copy()
            else:
                c, s = np.cos(qe[3 * bj + 2]), np.sin(qe[3 * bj + 2])
                pt = Gj + np.array([c * sj[0] - s * sj[1], s * sj[0] + c * sj[1]])
            # moment about pt = moment about the centroid - cross(pt - G, f)
            mi = Qi[2] - ((pt[0] - Gi[0]) * Qi[1] - (pt[1] - Gi[1]) * Qi[0])
            mj = Qj[2] - ((pt[0] - Gj[0]) * Qj[1] - (pt[1] - Gj[1]) * Qj[0])
            name_i = GROUND if bi == self.ground else self.body_names[bi]
            name_j = GROUND if bj == self.ground else self.body_names[bj]
            out.append(JointReaction(joint=jlabel, body_i=name_i, body_j=name_j, point=pt,
                                     force_i=Qi[:2].copy(), moment_i=float(mi),
                                     force_j=Qj[:2].copy(), moment_j=float(mj),
                                     multipliers=lam[rows].copy(),
                                     unique=not any(int(k) in involved for k in rows)))
        return out

    # ------------------------------------------------------------------ initial states
    def _state(self, x, label: str) -> np.ndarray:
        try:
            a = np.asarray(x, dtype=float)
        except (TypeError, ValueError) as e:
            raise ModelError(f"`{label}` must be an array of {self.n} floats, found {x!r}.") from e
        if a.shape != (self.n,):
            raise ModelError(f"`{label}` must have shape ({self.n},), found {a.shape}.")
        if not np.all(np.isfinite(a)):
            raise ModelError(f"`{label}` contains NaN or inf.")
        return a

    def _prescribed(self, values: Optional[Mapping[str, float]], label: str):
        values = dict(values or {})
        idx = np.array([self.index(k) for k in values], dtype=np.intp)
        val = np.array([float(x) for x in values.values()])
        if not np.all(np.isfinite(val)):
            raise ModelError(f"`{label}` values must be finite, found {values}.")
        return idx, val

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
        idx, val = self._prescribed(fixed, "fixed")
        q = np.zeros(self.n) if q_guess is None else self._state(q_guess, "q_guess").copy()
        q[idx] = val
        E = np.zeros((idx.size, self.n))
        E[np.arange(idx.size), idx] = 1.0
        res = np.inf
        for _ in range(int(max_iter)):
            ph = self.phi(t, q)
            res = float(np.abs(ph).max(initial=0.0))
            if res <= tol * (1.0 + float(np.abs(q).max())):
                return q
            K = np.vstack([self.jacobian(t, q), E])
            rhs = np.concatenate([-ph, val - q[idx]])
            q = q + np.linalg.lstsq(K, rhs, rcond=None)[0]
        raise ModelError(f"`assemble` did not converge in {max_iter} iterations (max |Phi| = "
                         f"{res:.3g}): the prescribed coordinates {dict(fixed or {})} may be "
                         "incompatible with the joints, or `q_guess` is too far away.")

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
        q = self._state(q, "q")
        idx, val = self._prescribed(prescribed, "prescribed")
        E = np.zeros((idx.size, self.n))
        E[np.arange(idx.size), idx] = 1.0
        K = np.vstack([self.jacobian(t, q), E])
        rhs = np.concatenate([-self.phi_t(t, q), val])
        _, _, r = null_space_split(K, rhs, rank_tol)
        if r < self.n:
            raise ModelError(f"`prescribed` velocities {dict(prescribed or {})} do not determine the "
                             f"motion: the joint rows and the prescribed components have rank {r} < "
                             f"n = {self.n} here; prescribe {self.n - r} more independent component(s).")
        v = np.linalg.lstsq(K, rhs, rcond=None)[0]
        err = float(np.abs(K @ v - rhs).max(initial=0.0))
        if err > 1e-9 * (1.0 + float(np.abs(rhs).max(initial=0.0)) + float(np.abs(v).max())):
            raise ModelError(f"`prescribed` velocities {dict(prescribed or {})} contradict the "
                             f"joints (residual {err:.3g}).")
        return v

    def initial_state(self, fixed: Optional[Mapping[str, float]] = None,
                      prescribed_velocities: Optional[Mapping[str, float]] = None,
                      q_guess=None, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Consistent ``(q0, v0)`` from independent coordinates and velocities.

        ``q0 = assemble(fixed, q_guess, t)``, ``v0 = velocities(q0, prescribed_velocities, t)``;
        see those methods.
        """
        q0 = self.assemble(fixed, q_guess=q_guess, t=t)
        return q0, self.velocities(q0, prescribed_velocities, t)

    def __repr__(self) -> str:
        return (f"Model({self.name!r}, bodies={list(self.body_names)}, joints={len(self.joints)}, "
                f"n={self.n}, m={self.m})")


#: alias
Mechanism = Model


# =========================================================================== stabilization
_EPS = np.finfo(float).eps


#: The least-squares projection for redundant linkages now is the library's
#: :class:`~gaussopt.Projection`; the name is kept for code written against it.
LeastSquaresProjection = Projection
