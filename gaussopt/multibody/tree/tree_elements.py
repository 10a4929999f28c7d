"""The elements of a tree model in joint coordinates: links, the joints that move them, and
the closures (``connect``, ``weld``) that close loops.

A tree is described as MuJoCo describes it (and :func:`gaussopt.multibody.load` reads it
from a compiled MuJoCo model): every :class:`Link` has a frame placed in its parent's frame
by a fixed offset, then moved by its joints, in order (:class:`TreeJoint`: hinge, slide,
ball, free); a link without joints is welded to its parent. Everything is given in the
frames of the links, so the elements need no pose of the whole mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["Link", "TreeJoint", "Connect", "Weld", "JOINT_KINDS", "WORLD"]

#: the joint kinds and their numbers of coordinates
JOINT_KINDS = {"hinge": 1, "slide": 1, "ball": 4, "free": 7}
#: the name of the world (a link's parent, a closure's side)
WORLD = "world"


@dataclass(frozen=True)
class Link:
    """A rigid body of the tree.

    Parameters
    ----------
    name : str
    parent : str or None
        The parent link's name (None or ``"world"``: the world); parents come first in
        the model's list.
    position : array_like, shape (3,)
        Origin of the link's frame in the parent's frame (before the joints move it).
    orientation : array_like, shape (4,)
        Unit quaternion ``(w, x, y, z)`` of the link's frame in the parent's frame.
    mass : float, >= 0
    com : array_like, shape (3,)
        Centroid in the link's frame.
    inertia : array_like, shape (3, 3)
        Inertia tensor about the centroid, in the link's frame.
    gravity_scale : float
        The share of the weight that acts (``1 - gravcomp`` of MuJoCo).
    """

    name: str
    parent: Optional[str] = None
    position: tuple = (0.0, 0.0, 0.0)
    orientation: tuple = (1.0, 0.0, 0.0, 0.0)
    mass: float = 0.0
    com: tuple = (0.0, 0.0, 0.0)
    inertia: tuple = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    gravity_scale: float = 1.0


@dataclass(frozen=True)
class TreeJoint:
    """A joint moving ``link`` relative to the frame before it (its parent's frame and the
    link's offset, then the link's earlier joints), with MuJoCo's conventions.

    Parameters
    ----------
    name : str
    kind : {"hinge", "slide", "ball", "free"}
        One coordinate (angle or displacement from ``reference``), four (Euler parameters
        ``(w, x, y, z)``), or seven (world position of the link's origin and Euler
        parameters; only as the only joint of a link whose parent is the world).
    link : str
    position : array_like, shape (3,)
        Anchor (hinge, ball) in the link's frame.
    axis : array_like, shape (3,)
        Unit axis (hinge, slide) in the link's frame.
    reference : float
        The coordinate's value at which the joint is in its offset pose (MuJoCo's ``qpos0``).
    damping, armature : float or array_like
        Per degree of freedom (1 hinge/slide, 3 ball, 6 free: translations then rotations):
        the passive force ``-damping u`` and the rotor inertia ``armature`` on ``u``
        (``u`` the joint rate; for a ball its angular velocity in the link's frame).
    stiffness, spring_reference : float
        A spring ``-stiffness (q - spring_reference)`` (hinge and slide).
    """

    name: str
    kind: str
    link: str
    position: tuple = (0.0, 0.0, 0.0)
    axis: tuple = (0.0, 0.0, 1.0)
    reference: float = 0.0
    damping: object = 0.0
    armature: object = 0.0
    stiffness: float = 0.0
    spring_reference: float = 0.0


@dataclass(frozen=True)
class Connect:
    """A loop closed by a ball-and-socket: ``point_1`` of ``link_1`` coincides with
    ``point_2`` of ``link_2`` (points in the links' frames; a link None or ``"world"`` is
    the world, its point in world coordinates). Three rows."""

    link_1: Optional[str]
    point_1: tuple
    link_2: Optional[str]
    point_2: tuple
    name: Optional[str] = None


@dataclass(frozen=True)
class Weld:
    """A loop closed rigidly: ``point_1`` of ``link_1`` coincides with ``point_2`` of
    ``link_2``, and ``link_2``'s frame has the orientation ``rotation`` (3 x 3) in
    ``link_1``'s frame. Six rows: the points, then three perpendicularities
    ``(R_1 R e_k) . (R_2 e_(k+1)) = 0``."""

    link_1: Optional[str]
    point_1: tuple
    link_2: Optional[str]
    point_2: tuple
    rotation: tuple = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    name: Optional[str] = None
