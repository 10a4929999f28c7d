"""The elements of a planar multibody model: bodies, joints and applied forces.

Small frozen dataclasses. A joint lists its equations as primitives
(:meth:`Joint._equations`: ``"point"`` coincidence, ``"angle"``, point on
``"line"``), which :mod:`gaussopt.multibody.planar.assembly` turns into the kernel's
tables; forces are read there too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import numpy as np

from gaussopt.core.exceptions import ModelError

__all__ = ["GROUND", "Body", "Joint", "Revolute", "Fixed", "Prismatic", "PointOnLine",
           "DrivenAngle", "PointForce", "Torque", "Spring", "Damper", "BodyRef", "Vector2"]

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


def _ref_name(b, body_type: type = Body) -> Optional[str]:
    """The name of a body reference (a ``body_type``, its name, or None / ``"ground"``:
    the ground, None); shared by the planar and the spatial elements."""
    if b is None:
        return None
    if isinstance(b, body_type):
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

