"""The elements of a spatial multibody model: rigid bodies, joints and applied forces.

Small frozen dataclasses. Joint geometry (points, axes, normals) is given in
**world coordinates at the reference pose** -- every :class:`Body` carries a
reference pose (centroid position and orientation), approximate if need be --
and :mod:`gaussopt.multibody.spatial.assembly` turns it into body-frame vectors
and the kernel's primitives (point coincidence, perpendicular vectors, vector
perpendicular to a point-to-point line, distance, driven angle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.multibody.planar.elements import GROUND
from gaussopt.multibody.planar.elements import _ref_name as _planar_ref_name

__all__ = ["GROUND", "Armature", "Body", "Joint", "Spherical", "Revolute", "Prismatic", "Cylindrical",
           "Universal", "Fixed", "Planar", "PointOnLine", "PointOnPlane", "Distance",
           "DrivenAngle", "Force", "Torque", "Spring", "RotationalDamper", "BodyRef",
           "Vector3", "quaternion", "rotation_matrix"]

BodyRef = Union["Body", str, None]
Vector3 = Union[Sequence[float], np.ndarray]


def _vec3(x, label: str) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ModelError(f"`{label}` must be 3 finite numbers, found {x!r}.")
    return a


def _unit3(x, label: str) -> np.ndarray:
    a = _vec3(x, label)
    nrm = float(np.linalg.norm(a))
    if nrm == 0.0:
        raise ModelError(f"`{label}` must be a nonzero vector, found {x!r}.")
    return a / nrm


def quaternion(rotation) -> np.ndarray:
    """Unit quaternion ``(w, x, y, z)`` (Euler parameters ``e0..e3``, ``e0 >= 0``) of a
    rotation matrix, or a quaternion normalized.

    Parameters
    ----------
    rotation : array_like, shape (3, 3) or (4,)

    Returns
    -------
    ndarray, shape (4,)
    """
    R = np.asarray(rotation, dtype=float)
    if R.shape == (4,):
        nrm = float(np.linalg.norm(R))
        if not np.isfinite(nrm) or nrm == 0.0:
            raise ModelError(f"a quaternion must be 4 finite numbers, not all zero; found {rotation!r}.")
        return R / nrm
    if R.shape != (3, 3) or not np.all(np.isfinite(R)):
        raise ModelError(f"an orientation must be a quaternion (w, x, y, z) or a 3x3 rotation "
                         f"matrix, found shape {R.shape}.")
    if float(np.abs(R @ R.T - np.eye(3)).max()) > 1e-8 or np.linalg.det(R) <= 0:
        raise ModelError("an orientation matrix must be a rotation (orthonormal, det +1) to "
                         f"1e-8; found R R^T - I up to {float(np.abs(R @ R.T - np.eye(3)).max()):.3g}, "
                         f"det {np.linalg.det(R):.6g}.")
    # Shepperd's method: the largest of the four squares first (no cancellation)
    tr = np.trace(R)
    k = int(np.argmax([tr, R[0, 0], R[1, 1], R[2, 2]]))
    if k == 0:
        w = 0.5 * np.sqrt(1.0 + tr)
        e = np.array([w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w),
                      (R[1, 0] - R[0, 1]) / (4 * w)])
    else:
        i = k - 1
        j, l = (i + 1) % 3, (i + 2) % 3
        x = 0.5 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[l, l])
        e = np.zeros(4)
        e[0] = (R[l, j] - R[j, l]) / (4 * x)
        e[1 + i] = x
        e[1 + j] = (R[j, i] + R[i, j]) / (4 * x)
        e[1 + l] = (R[l, i] + R[i, l]) / (4 * x)
    e = e / np.linalg.norm(e)
    return -e if e[0] < 0 else e


def rotation_matrix(e) -> np.ndarray:
    """Rotation matrix ``A(p) = E(p) G(p)^T`` of Euler parameters ``(e0, e1, e2, e3)``;
    shape (3, 3), or (N, 3, 3) for an array of shape (N, 4). For a unit ``p`` it is the
    rotation from the body frame to the world."""
    e = np.asarray(e, dtype=float)
    e0, e1, e2, e3 = e[..., 0], e[..., 1], e[..., 2], e[..., 3]
    d = e0 * e0 - e1 * e1 - e2 * e2 - e3 * e3
    R = np.empty(e.shape[:-1] + (3, 3))
    R[..., 0, 0] = d + 2 * e1 * e1
    R[..., 1, 1] = d + 2 * e2 * e2
    R[..., 2, 2] = d + 2 * e3 * e3
    R[..., 0, 1] = 2 * (e1 * e2 - e0 * e3)
    R[..., 1, 0] = 2 * (e1 * e2 + e0 * e3)
    R[..., 0, 2] = 2 * (e1 * e3 + e0 * e2)
    R[..., 2, 0] = 2 * (e1 * e3 - e0 * e2)
    R[..., 1, 2] = 2 * (e2 * e3 - e0 * e1)
    R[..., 2, 1] = 2 * (e2 * e3 + e0 * e1)
    return R


# =========================================================================== bodies
@dataclass(frozen=True, eq=False)
class Body:
    """A rigid body in space, its frame at the centroid.

    Its coordinates are the world position of the centroid and the Euler
    parameters (unit quaternion) of its frame: ``"<name>.x"``, ``".y"``, ``".z"``,
    ``".e0"``, ``".e1"``, ``".e2"``, ``".e3"``. The mass matrix of the body,
    ``diag(m I3, 4 G^T J G)``, is singular (rank 6 of 7) by nature; the
    normalization ``p^T p = 1`` is one of the model's equations.

    Parameters
    ----------
    name : str
        Unique name.
    mass : float
        Mass ``m >= 0`` [kg] (0 gives a zero block of ``M``: accepted when joints fix the body).
    inertia : array_like, shape (3,) or (3, 3)
        Principal moments, or the symmetric positive semi-definite inertia tensor,
        about the centroid in the body frame [kg m^2].
    position : array_like, shape (3,)
        Centroid in the reference pose (world) [m].
    orientation : array_like, shape (4,) or (3, 3), optional
        Body frame in the reference pose: quaternion ``(w, x, y, z)`` or rotation
        matrix (columns: the body axes in the world). Default: the world axes.
    """

    name: str
    mass: float
    inertia: object
    position: object = (0.0, 0.0, 0.0)
    orientation: object = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "." in self.name:
            raise ModelError(f"a Body needs a nonempty name without '.', found {self.name!r}.")
        m = float(self.mass)
        if not np.isfinite(m) or m < 0:
            raise ModelError(f"Body {self.name!r}: `mass` must be finite and >= 0, found {self.mass!r}.")
        J = np.asarray(self.inertia, dtype=float)
        if J.shape == (3,):
            J = np.diag(J)
        if J.shape != (3, 3) or not np.all(np.isfinite(J)):
            raise ModelError(f"Body {self.name!r}: `inertia` must be 3 principal moments or a "
                             f"3x3 tensor, found shape {J.shape}.")
        if float(np.abs(J - J.T).max()) > 1e-12 * max(float(np.abs(J).max()), 1e-300):
            raise ModelError(f"Body {self.name!r}: `inertia` must be symmetric.")
        w = np.linalg.eigvalsh(J)
        if w[0] < -1e-12 * max(float(w[-1]), 1e-300):
            raise ModelError(f"Body {self.name!r}: `inertia` must be positive semi-definite, "
                             f"its smallest principal moment is {w[0]:.6g}.")
        if w[0] + w[1] < w[2] * (1 - 1e-9) - 1e-300:
            raise ModelError(f"Body {self.name!r}: the principal moments {w} violate the triangle "
                             "inequality (no rigid mass distribution has them).")
        object.__setattr__(self, "mass", m)
        object.__setattr__(self, "_J", J)
        object.__setattr__(self, "_r", _vec3(self.position, f"{self.name}.position"))
        e = np.array([1.0, 0.0, 0.0, 0.0]) if self.orientation is None else quaternion(self.orientation)
        object.__setattr__(self, "_p", e)

    @property
    def inertia_tensor(self) -> np.ndarray:
        """The inertia tensor about the centroid, body frame, shape (3, 3)."""
        return self._J.copy()

    @property
    def reference_quaternion(self) -> np.ndarray:
        return self._p.copy()

    @property
    def reference_position(self) -> np.ndarray:
        return self._r.copy()

    @classmethod
    def uniform_rod(cls, name: str, mass: float, start: Vector3, end: Vector3) -> "Body":
        """A uniform slender rod from ``start`` to ``end`` (world, reference pose): centroid
        at the midpoint, body x-axis along the rod, ``J = diag(0, m l^2 / 12, m l^2 / 12)``
        (no inertia about its own axis: its spin is fixed by the joints or left out by
        the minimum-norm step)."""
        a, b = _vec3(start, "start"), _vec3(end, "end")
        L = float(np.linalg.norm(b - a))
        if L == 0.0:
            raise ModelError(f"Body.uniform_rod {name!r}: `start` and `end` coincide.")
        x = (b - a) / L
        R = _frame_from_axis(x)
        I = float(mass) * L * L / 12.0
        return cls(name, float(mass), (0.0, I, I), position=(a + b) / 2, orientation=R)


def _frame_from_axis(x: np.ndarray) -> np.ndarray:
    """A rotation matrix whose first column is the unit vector ``x``."""
    k = int(np.argmin(np.abs(x)))
    t = np.zeros(3)
    t[k] = 1.0
    y = np.cross(x, t)
    y /= np.linalg.norm(y)
    return np.column_stack([x, y, np.cross(x, y)])


def _perpendicular_pair(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors ``f, g`` with ``(f, g, u)`` right-handed orthonormal."""
    R = _frame_from_axis(u)
    return R[:, 1], R[:, 2]


def _ref_name(b: BodyRef) -> Optional[str]:
    return _planar_ref_name(b, Body)


# =========================================================================== joints
@dataclass(frozen=True, eq=False)
class Joint:
    """Base of the joints: two bodies (``None``: the ground).

    :meth:`_equations` lists the joint's primitives, each a tuple ``(kind, labels,
    data)`` with world vectors at the reference pose (turned into body-frame vectors
    by the assembly): ``("point", [x, y, z], P)``; ``("dot1", [l], (a on i, b on j))``;
    ``("dot2", [l], (a on i, P))`` (``a . (P_j - P_i) = 0`` with the joint point
    ``P`` on both bodies); ``("dist", [l], (P_i, P_j, L))``; ``("driven", [l],
    (u, angle...))``.
    """

    body_i: BodyRef
    body_j: BodyRef

    def _equations(self) -> list:
        raise NotImplementedError

    #: point the joint's reaction moment is taken about (world, reference pose); None: centroid of j
    def _anchor(self) -> Optional[np.ndarray]:
        return None

    #: axes of the joint's frame (world, reference pose), rows
    def _frame(self) -> np.ndarray:
        return np.eye(3)


def _axis_frame(u: np.ndarray) -> np.ndarray:
    f, g = _perpendicular_pair(u)
    return np.vstack([f, g, u])


@dataclass(frozen=True, eq=False)
class _PointAxis(Joint):
    """A joint through ``point`` along ``axis`` (world, reference pose); its frame
    ``(f, g, axis)``, its anchor the point."""

    point: object = (0.0, 0.0, 0.0)
    axis: object = (0.0, 0.0, 1.0)

    def _geometry(self):
        """``P, u, f, g``: the point, the unit axis and two unit normals to it."""
        u = _unit3(self.axis, "axis")
        return (_vec3(self.point, "point"), u) + _perpendicular_pair(u)

    def _anchor(self):
        return _vec3(self.point, "point")

    def _frame(self):
        return _axis_frame(_unit3(self.axis, "axis"))


@dataclass(frozen=True, eq=False)
class _PointNormal(Joint):
    """A joint on the plane through ``point`` with ``normal`` (world, reference pose)."""

    point: object = (0.0, 0.0, 0.0)
    normal: object = (0.0, 0.0, 1.0)

    def _anchor(self):
        return _vec3(self.point, "point")

    def _frame(self):
        return _axis_frame(_unit3(self.normal, "normal"))


@dataclass(frozen=True, eq=False)
class Spherical(Joint):
    """Ball joint at ``point`` (world, reference pose): 3 equations."""

    point: object = (0.0, 0.0, 0.0)

    def _equations(self):
        return [("point", ["x", "y", "z"], _vec3(self.point, "point"))]

    def _anchor(self):
        return _vec3(self.point, "point")


@dataclass(frozen=True, eq=False)
class Revolute(_PointAxis):
    """Hinge through ``point`` about ``axis`` (world, reference pose): 5 equations
    (the point, and the axis of ``j`` perpendicular to two directions normal to the
    axis on ``i``). Joint frame: ``(f, g, axis)``."""

    def _equations(self):
        P, u, f, g = self._geometry()
        return [("point", ["x", "y", "z"], P),
                ("dot1", ["u.f"], (f, u)), ("dot1", ["u.g"], (g, u))]


@dataclass(frozen=True, eq=False)
class Cylindrical(_PointAxis):
    """Sliding hinge: rotation about and translation along ``axis`` through ``point``:
    4 equations."""

    def _equations(self):
        P, u, f, g = self._geometry()
        return [("dot1", ["u.f"], (f, u)), ("dot1", ["u.g"], (g, u)),
                ("dot2", ["d.f"], (f, P)), ("dot2", ["d.g"], (g, P))]


@dataclass(frozen=True, eq=False)
class Prismatic(_PointAxis):
    """Translation along ``axis`` only: 5 equations (a cylindrical joint whose
    rotation about the axis is locked)."""

    def _equations(self):
        return Cylindrical._equations(self) + [("dot1", ["g.f"], self._geometry()[2:])]


@dataclass(frozen=True, eq=False)
class Universal(Joint):
    """Cardan joint at ``point``: ``axis_i`` on body i stays perpendicular to
    ``axis_j`` on body j: 4 equations."""

    point: object = (0.0, 0.0, 0.0)
    axis_i: object = (1.0, 0.0, 0.0)
    axis_j: object = (0.0, 1.0, 0.0)

    def _equations(self):
        a, b = _unit3(self.axis_i, "axis_i"), _unit3(self.axis_j, "axis_j")
        if abs(float(a @ b)) > 1e-9:
            raise ModelError(f"Universal({_ref_name(self.body_i)}, {_ref_name(self.body_j)}): "
                             f"`axis_i` and `axis_j` must be perpendicular, found a.b = {a @ b:.3g}.")
        return [("point", ["x", "y", "z"], _vec3(self.point, "point")), ("dot1", ["a.b"], (a, b))]

    def _anchor(self):
        return _vec3(self.point, "point")

    def _frame(self):
        a, b = _unit3(self.axis_i, "axis_i"), _unit3(self.axis_j, "axis_j")
        return np.vstack([a, b, np.cross(a, b)])


@dataclass(frozen=True, eq=False)
class Fixed(Joint):
    """Weld: the two bodies keep their relative reference pose: 6 equations. ``point``
    (world) is where the reaction moment is reported (default the centroid of ``j``)."""

    point: object = None

    def _equations(self):
        P = self._anchor()
        return [("point", ["x", "y", "z"], P),
                ("dot1", ["x.y"], (np.array([1.0, 0, 0]), np.array([0, 1.0, 0]))),
                ("dot1", ["y.z"], (np.array([0, 1.0, 0]), np.array([0, 0, 1.0]))),
                ("dot1", ["z.x"], (np.array([0, 0, 1.0]), np.array([1.0, 0, 0])))]

    def _anchor(self):
        if self.point is not None:
            return _vec3(self.point, "point")
        return None


@dataclass(frozen=True, eq=False)
class Planar(_PointNormal):
    """Body j slides and turns in the plane through ``point`` with ``normal`` of body i:
    3 equations."""

    def _equations(self):
        n = _unit3(self.normal, "normal")
        f, g = _perpendicular_pair(n)
        return [("dot1", ["n.f"], (n, f)), ("dot1", ["n.g"], (n, g))] + \
            PointOnPlane._equations(self)


@dataclass(frozen=True, eq=False)
class PointOnLine(_PointAxis):
    """The point ``point`` of body j stays on the line of body i through it along
    ``axis``: 2 equations."""

    def _equations(self):
        P, u, f, g = self._geometry()
        return [("dot2", ["d.f"], (f, P)), ("dot2", ["d.g"], (g, P))]


@dataclass(frozen=True, eq=False)
class PointOnPlane(_PointNormal):
    """The point ``point`` of body j stays in the plane of body i through it with
    ``normal``: 1 equation."""

    def _equations(self):
        return [("dot2", ["d.n"], (_unit3(self.normal, "normal"), _vec3(self.point, "point")))]


@dataclass(frozen=True, eq=False)
class Distance(Joint):
    """Massless rod between ``point_i`` (on i) and ``point_j`` (on j): ``|P_j - P_i| =
    length`` (default: their distance in the reference pose), written ``(|d|^2 -
    length^2) / 2 = 0``: 1 equation."""

    point_i: object = (0.0, 0.0, 0.0)
    point_j: object = (0.0, 0.0, 0.0)
    length: Optional[float] = None

    def _equations(self):
        a, b = _vec3(self.point_i, "point_i"), _vec3(self.point_j, "point_j")
        L = float(np.linalg.norm(b - a)) if self.length is None else float(self.length)
        if not np.isfinite(L) or L <= 0:
            raise ModelError(f"Distance({_ref_name(self.body_i)}, {_ref_name(self.body_j)}): "
                             f"`length` must be > 0, found {L!r}.")
        return [("dist", ["L"], (a, b, L))]

    def _anchor(self):
        return _vec3(self.point_j, "point_j")


@dataclass(frozen=True, eq=False)
class DrivenAngle(Joint):
    """Rheonomic drive: the rotation of body j relative to body i about ``axis``,
    measured from the reference pose, equals ``angle(t)``: 1 equation,
    ``sin(theta - angle(t)) = 0`` with ``cos theta = f_i^T f_j``, ``sin theta =
    g_i^T f_j`` (``f, g`` normal to the axis). Use it together with a
    :class:`Revolute` (or :class:`Cylindrical`) of the same axis.

    Parameters
    ----------
    body_i, body_j : Body, str or None
    axis : array_like, shape (3,)
        World, reference pose.
    angle : float or callable
        ``angle(t)`` [rad]; a constant locks the joint.
    rate, acceleration : callable, optional
        ``angle'(t)``, ``angle''(t)``; required (exact) when ``angle`` is callable.
    """

    axis: object = (0.0, 0.0, 1.0)
    angle: Union[float, Callable] = 0.0
    rate: Optional[Callable] = None
    acceleration: Optional[Callable] = None

    def __post_init__(self) -> None:
        if callable(self.angle):
            if not (callable(self.rate) and callable(self.acceleration)):
                raise ModelError("DrivenAngle: a callable `angle` needs callable `rate` and "
                                 "`acceleration` (its exact derivatives).")
        else:
            a = float(self.angle)
            if not np.isfinite(a):
                raise ModelError(f"DrivenAngle: `angle` must be finite, found {self.angle!r}.")

    def _equations(self):
        u = _unit3(self.axis, "axis")
        f, g = _perpendicular_pair(u)
        return [("driven", ["angle"], (f, g, self.angle, self.rate, self.acceleration))]

    def _frame(self):
        return _axis_frame(_unit3(self.axis, "axis"))


# =========================================================================== forces
@dataclass(frozen=True, eq=False)
class Force:
    """A force on ``body`` at ``point`` (world, reference pose; default the centroid):
    a constant world vector [N] or ``force(t, q, v) -> (3,)``."""

    body: BodyRef
    force: object
    point: object = None


@dataclass(frozen=True, eq=False)
class Torque:
    """A torque on ``body`` (world vector [N m], constant or ``torque(t, q, v) ->
    (3,)``), and minus it on ``reaction`` when given (a joint's actuator)."""

    body: BodyRef
    torque: object
    reaction: BodyRef = None


@dataclass(frozen=True, eq=False)
class Spring:
    """Linear spring and damper between ``point_i`` on i and ``point_j`` on j (world,
    reference pose): tension ``stiffness (L - length) + damping L'``; ``length``
    defaults to the reference distance."""

    body_i: BodyRef
    body_j: BodyRef
    point_i: object
    point_j: object
    stiffness: float = 0.0
    length: Optional[float] = None
    damping: float = 0.0


@dataclass(frozen=True, eq=False)
class RotationalDamper:
    """Viscous damper of a hinge: torque ``-damping * u^T w_rel`` about ``u`` on j
    (and minus it on i), ``u`` the ``axis`` fixed in body i (world, reference pose),
    ``w_rel = w_j - w_i``."""

    body_i: BodyRef
    body_j: BodyRef
    axis: object
    damping: float


@dataclass(frozen=True, eq=False)
class Armature:
    """A rotor's inertia about a hinge's axis (a gear motor's reflected inertia;
    MuJoCo's joint ``armature``): the kinetic energy ``inertia (u^T (w_j - w_i))^2 / 2``,
    ``u`` the ``axis`` (world, reference pose), fixed in body i and in body j -- the
    axis of a :class:`Revolute` (or :class:`Cylindrical`) between them. It couples the
    two bodies' rotational blocks of ``M``; a model with one takes the dense step."""

    body_i: BodyRef
    body_j: BodyRef
    axis: object
    inertia: float
