"""Forward kinematics of a tree in plain numpy (any dtype) and the contacts of its geometry.

Spheres (capsules' end spheres, boxes' corners) and cylinders' rims against a world plane
-- a robot's feet, a ball, a box on the ground, a wheel -- and pairs of spheres, capsules
and boxes are evaluated by one compiled function (:func:`gaussopt.multibody.tree.
tree_compiled.contact_points`): gaps, Jacobians, slip velocities and their matrix from the
kernel's twists, the convective terms (``gamma`` of the gap, the slip velocity's rate at zero
acceleration) from its bias accelerations (a rim's lowest point moves along the rim, a
sphere pair's normal and tangents turn: their terms are written out in the kernel). On the
tippe top (1.2 s at the default tolerances) that halved the run's CPU time (7.6 -> 3.1 s);
on the leaning disk of ``benchmarks/contact.py`` (a cylinder rolling 1 s) it cut the run
from 0.46 to 0.10 s: these terms had been the largest share of each evaluation.

Why a second forward kinematics beside the compiled one
(:func:`gaussopt.multibody.tree.tree_compiled.kinematics`): for a plane carried by a moving
link (a hand-built pair) the convective terms are exact by one complex step along ``v``,
which evaluates the kinematics at complex ``q`` (the compiled kernel takes real arrays
only); and the tests compare the compiled function with this path (every pair, built
with ``compiled=False``). (At real ``q`` the contacts use the compiled kernel: the gaps,
their Jacobians from the coordinates' twists and the slip velocities ``T(q) v``, each kept
for the last state, since the run's complex-step Jacobian in ``v`` and the closed points'
rows ask for them several times at one state.) :class:`TreeKinematics` walks the links in
Python with the kernel's conventions, read from the same parameter array (hinge: Rodrigues
about the joint axis; slide: along it; ball and free: MuJoCo's quaternion ``(w, x, y, z)``
divided by ``|p|^2``, so that a non-unit ``p`` still gives a rotation, and ``omega = R W
p'`` with ``W = 2 G(p) / |p|^2``). Written once, with numpy operations that carry a
complex part (no ``abs``, no ``norm``), its derivative along ``v`` is the velocity the
kernel computes.

:class:`ContactPair` describes one pair of colliding geoms of a loaded MJCF model
(:func:`gaussopt.multibody.load`), :class:`PairGroup` evaluates the gaps and spatial slip
velocities of pairs of one friction coefficient (one :class:`~gaussopt.Contact`):

* a world ``plane`` (point ``p0``, unit normal ``n`` = the plane frame's z axis, tangents
  its x and y axes) against spheres of moving links: gap ``n . (c - p0) - r``; a capsule
  is its two end spheres, a box its 8 corners (``r = 0``). The slip velocity is the
  velocity of the link's material point at the contact point ``c - r n`` projected on the
  two tangents.
* a world ``plane`` against a ``cylinder`` (radius ``r``, axis ``a``): each of its two rim
  circles (centres ``c``) touches at its lowest point ``P = c - r w``, ``w`` the unit
  vector along ``n - (n . a) a`` (the rim's direction of steepest descent): gap ``n . (P -
  p0) = n . (c - p0) - r |n - (n . a) a|``. As ``P`` slides along the rim when the
  cylinder rolls, the gap's gradient is that of the material point at ``P`` (the rim's
  lowest point is a minimum over the rim: its motion along the rim changes the gap to
  second order only, which the convective term, a complex step of the whole expression,
  carries). A cylinder on its flat face (``a`` within :data:`FACE_TOL` of ``n``) has no
  lowest rim point: its gap is still exact; touching the plane so, it touches along a
  face: the derivatives then raise :class:`~gaussopt.ModelError` naming it (a run ends
  there with ``success=False``). With ``rim_points = K``
  (:meth:`ContactPair.with_rim_points`, ``Model.with_contacts(rim_points=K)``) each rim is
  K material points at equal angles instead, touching as a box's corners do: the cylinder
  is then a regular K-gon prism inscribed in it, which stands on its face.
* ``sphere``-``sphere``: gap ``|c2 - c1| - r1 - r2``; the slip velocity is the relative
  velocity of the two links' material points at ``c2 - r2 u`` (``u`` the unit vector from
  ``c1`` to ``c2``) on two tangents orthogonal to ``u``.
* ``sphere``-``capsule`` (a head against an arm, a ball in a cup of capsules): the same,
  with ``c2`` the point of the capsule's axis segment closest to the sphere's centre (the
  capsule is the set of points within ``r2`` of its segment). As the sphere moves along
  the capsule, ``c2`` slides along the axis; the gap's rate is still the normal part of
  the two material points' relative velocity (the axis is orthogonal to ``u`` wherever
  ``c2`` is inside it), and the convective terms carry ``c2``'s motion (the kernel's
  formulas, :func:`~gaussopt.multibody.tree.tree_compiled.contact_points`; the numpy path
  by its complex step, which differentiates the closest point too). Where ``c2`` reaches
  an end of the axis the gap stays continuously differentiable (the end's hemisphere
  meets the cylinder tangentially); ``gamma`` jumps there, as a rim's does.
* ``capsule``-``capsule`` (a forearm against a thigh, a cheetah's head against its
  thigh): the same at the closest points of the two axis segments (Ericson's clamped
  solution), both of which slide along their axes. Two parallel capsules (their axes
  within :data:`FACE_TOL` rad) touch along a line, where the closest points are not one
  pair: their gap is still exact, and touching so the derivatives raise
  :class:`~gaussopt.ModelError` naming them (a run ends there with ``success=False``), as
  a cylinder's face does.
* ``sphere``-``box`` (a ball on a table, a fingertip on a block): the same, with ``c2``
  the point of the box closest to the sphere's centre (the centre in the box's frame,
  clamped to its half sizes): on a face it slides with the sphere, on an edge along the
  edge, at a corner it is the corner. The gap is continuously differentiable (the
  distance to a convex set); ``gamma`` jumps where the closest point moves onto an edge
  or a corner. A centre inside the box (a penetration deeper than the radius) takes its
  nearest face.
* ``capsule``-``box`` (a finger against a block, a rod on a table): 14 points, the
  capsule's two end spheres against the box (``sphere``-``box``) and the capsule against
  each of the box's 12 edges (``capsule``-``capsule`` with an edge as a capsule of radius
  0): :meth:`ContactPair.parts`, whose docstring shows that the least of the 14 gaps is
  the capsule's distance to the box. Which of them touch is the contact state (a capsule
  lying on a face: its ends; a rod across a face: the edges it crosses); where the load
  passes from an end sphere to an edge (the end rolling over the edge), the edge's gap
  has a double zero and is closed where it dips below the closing watch's margin.
* ``sphere``-``cylinder`` (a ball against a puck, a foot against a wheel): as two
  spheres, with ``c2`` the solid cylinder's point closest to the sphere's centre (in the
  cylinder's frame: on the side at the centre's height, on a flat face under it, or on a
  rim; a centre inside takes the nearer of the side and the face, and a negative gap).
  The convective terms carry ``c2``'s motion through the distance's Hessian (``up up^T /
  rho`` on the side, 0 on a face, ``(I - n n^T - (r / rho) up up^T) / d`` on a rim, ``up``
  the circumferential direction, ``rho`` the distance from the axis).
* ``capsule``-``cylinder``: one point, at the point of the capsule's axis nearest the
  cylinder (the signed distance to a convex set is convex along the axis; the kernel finds
  its least value by Newton's method on its slope inside a shrinking bracket, and the
  point's rate along the axis from the differentiated stationarity, ``s' = -phi_st /
  phi_ss``; at an end of the axis it is the end sphere's). Convexity also makes one point
  enough: where the distance is least at two points of the axis it is least between them,
  a line contact -- a capsule parallel to the cylinder's axis beside its side, or lying
  parallel to a flat face -- where the derivatives raise :class:`~gaussopt.ModelError`
  naming both (a run ends there with ``success=False``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

import gaussopt.multibody.tree.tree_compiled as kernel

__all__ = ["TreeKinematics", "ContactPair", "PairGroup", "PAIR_KINDS", "check_rim_points"]

#: the geom pairs mapped onto contacts (first geom, second geom)
PAIR_KINDS = ("plane-sphere", "plane-capsule", "plane-cylinder", "plane-box", "sphere-sphere",
              "sphere-capsule", "capsule-capsule", "sphere-box", "capsule-box",
              "sphere-cylinder", "capsule-cylinder")
#: the pairs of a sphere or capsule with a solid cylinder
_CYLINDER_PAIRS = ("sphere-cylinder", "capsule-cylinder")
#: the kinds evaluated as one point (at the closest points of the two geoms)
_ONE_POINT = ("sphere-capsule", "capsule-capsule", "sphere-cylinder", "capsule-cylinder")

#: a cylinder whose axis is within this angle (rad) of a plane's normal lies on its flat
#: face: the lowest point of a rim is then not one point (a face contact, not mapped)
FACE_TOL = kernel.PP_FLAT
#: a cylinder whose axis is within this angle (rad) of a plane's normal is near its gap's
#: kink (at zero angle the rim's lowest point is every point of the rim: the gap has no
#: derivative there, :meth:`PairGroup.nonsmooth_at`); 25 times the largest rotation of a
#: derivative check's finite-difference step (``1e-6 (1 + |q_j|)``, a few 1e-6 rad)
KINK_TOL = 1e-4


def _part_rows(part) -> int:
    """The contact points of one of a pair's parts (:meth:`ContactPair.parts`)."""
    return 1 if part.kind in _ONE_POINT else len(part.points2)


def _cross(a, b):
    """``a x b`` of (..., 3) arrays of any dtype, broadcast (numpy's ``cross`` costs ~20
    times more on such small arrays)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    x = a1 * b2 - a2 * b1
    out = np.empty(x.shape + (3,), dtype=x.dtype)
    out[..., 0] = x
    out[..., 1] = a2 * b0 - a0 * b2
    out[..., 2] = a0 * b1 - a1 * b0
    return out


def _face_error(name: str):
    """The error of a cylinder ``name`` touching a plane with its flat face."""
    from gaussopt.core.exceptions import ModelError
    return ModelError(f"cylinder {name!r} touches the plane with its flat face (its axis "
                      f"within {FACE_TOL:g} rad of the plane's normal): a face contact, where "
                      "the lowest point of a rim is not one point. To stand it on its face, "
                      "give its rims points: `model.with_contacts(rim_points=8)` (a regular "
                      "octagonal prism inscribed in the cylinder; its rolling on a rim is then "
                      "the octagon's).")


def _line_error(name1: str, name2: str, kind: str = "capsules"):
    """The error of two parallel capsules ``name1``, ``name2`` touching (``kind``
    ``"edge"``: capsule ``name1`` along an edge of box ``name2``; ``"cylinder"``: capsule
    ``name1`` along the side or over a flat face of cylinder ``name2``)."""
    from gaussopt.core.exceptions import ModelError
    what = {"edge": f"capsule {name1!r} and an edge of box {name2!r} touch parallel",
            "cylinder": f"capsule {name1!r} touches cylinder {name2!r} parallel to its axis "
                        "along its side or parallel to a flat face over it",
            }.get(kind, f"capsules {name1!r} and {name2!r} touch with parallel axes")
    return ModelError(f"{what} (within "
                      f"{FACE_TOL:g} rad): a line contact, where their closest points are not "
                      "one pair and the gap has no derivative. Not mapped: leave the pair out "
                      "of `model.contact_pairs`, or exclude it in the MJCF (`<exclude>`).")


def check_rim_points(value, name: str, zero: bool = False) -> None:
    """ModelError unless ``value`` is an integer >= 3 (the points of each cylinder rim;
    ``zero``: or 0, the rims' lowest points), naming the argument ``name``."""
    from gaussopt.core.exceptions import ModelError
    if zero and isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and value == 0:
        return
    if not (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            and value >= 3):
        raise ModelError(f"`{name}` must be {'0 or ' if zero else ''}an integer >= 3 (the "
                         f"points of each cylinder rim), found {value!r}.")


class TreeKinematics:
    """The links' poses and twists at ``(q, v)`` of any dtype, from a tree model's packed
    parameters (the compiled kernel's conventions, module docstring).

    Parameters
    ----------
    p : ndarray
        The model's parameter array (:func:`gaussopt.multibody.tree.tree_compiled.pack`);
        read once into per-link tables.
    """

    def __init__(self, p: np.ndarray) -> None:
        p = np.asarray(p, dtype=float)
        self.p = p.copy()
        self.n = int(p[kernel.H_N])
        nb, ob, oj = int(p[kernel.H_NB]), int(p[kernel.H_OB]), int(p[kernel.H_OJ])
        self.nb = nb
        self.links = []
        for b in range(nb):
            rec = ob + kernel.W_B * b
            joints = []
            j0, nj = int(p[rec + kernel.B_J0]), int(p[rec + kernel.B_NJ])
            for jj in range(j0, j0 + nj):
                jr = oj + kernel.W_J * jj
                joints.append((int(p[jr + kernel.J_TYPE]), int(p[jr + kernel.J_Q]),
                               p[jr + kernel.J_POS:jr + kernel.J_POS + 3].copy(),
                               p[jr + kernel.J_AXIS:jr + kernel.J_AXIS + 3].copy(),
                               float(p[jr + kernel.J_REF])))
            self.links.append((int(p[rec + kernel.B_PAR]),
                               p[rec + kernel.B_POS:rec + kernel.B_POS + 3].copy(),
                               p[rec + kernel.B_ROT:rec + kernel.B_ROT + 9].reshape(3, 3).copy(),
                               joints))

    def moving(self) -> np.ndarray:
        """``mask[k, j]``: whether coordinate ``j`` moves link ``k`` (its joints and its
        ancestors'), shape (nb, n)."""
        mask = np.zeros((self.nb, self.n), dtype=bool)
        for b, (par, _, _, joints) in enumerate(self.links):
            if par >= 0:
                mask[b] = mask[par]
            for typ, a, _, _, _ in joints:
                mask[b, a:a + (1 if typ in (kernel.SLIDE, kernel.HINGE) else 4)] = True
        return mask

    def compiled(self, q):
        """``(R, X, S)`` at real ``q`` by the compiled kernel (rotations, origins and the
        world twist of every coordinate, shape (n, 6): angular, then the velocity of the
        material point at the world origin)."""
        nb, n = self.nb, self.n
        R, X = np.empty((nb, 3, 3)), np.empty((nb, 3))
        S, V = np.empty((n, 6)), np.empty((nb, 6))
        kernel.kinematics(self.p, np.ascontiguousarray(q, dtype=float), np.zeros(n), R, X, S, V)
        return R, X, S

    def __call__(self, q, v=None):
        """``(R, X, W, U)``: rotations (nb, 3, 3), origins (nb, 3), angular velocities
        (nb, 3) and the velocities (nb, 3) of the material points at the world origin (the
        kernel's twist ``V = (W, U)``); ``W``, ``U`` are None when ``v`` is None. The dtype
        is that of ``q`` and ``v`` together (complex for a complex step)."""
        q = np.asarray(q)
        dt = np.result_type(q, float) if v is None else np.result_type(q, v, float)
        nb = self.nb
        R = np.empty((nb, 3, 3), dtype=dt)
        X = np.empty((nb, 3), dtype=dt)
        W = U = None
        if v is not None:
            v = np.asarray(v)
            W = np.empty((nb, 3), dtype=dt)
            U = np.empty((nb, 3), dtype=dt)
        for b, (par, pos, rot, joints) in enumerate(self.links):
            if par < 0:
                Rc, xc = rot.astype(dt), pos.astype(dt)
                w = np.zeros(3, dtype=dt)
                u = np.zeros(3, dtype=dt)
            else:
                Rc, xc = R[par] @ rot, X[par] + R[par] @ pos
                if v is not None:
                    w, u = W[par].copy(), U[par].copy()
            for typ, a, jpos, jaxis, ref in joints:
                P = xc + Rc @ jpos
                aw = Rc @ jaxis
                if typ == kernel.SLIDE:
                    xc = xc + aw * (q[a] - ref)
                    if v is not None:
                        u = u + aw * v[a]
                    continue
                if typ == kernel.HINGE:
                    th = q[a] - ref
                    c, s = np.cos(th), np.sin(th)
                    K = np.array([[0.0, -jaxis[2], jaxis[1]], [jaxis[2], 0.0, -jaxis[0]],
                                  [-jaxis[1], jaxis[0], 0.0]])
                    Rq = np.eye(3) + s * K + (1.0 - c) * (K @ K)
                    Rc = Rc @ Rq
                    if v is not None:
                        wj = aw * v[a]
                else:
                    e0, e1, e2, e3 = q[a], q[a + 1], q[a + 2], q[a + 3]
                    r2 = 1.0 / (e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3)
                    Rq = r2 * np.array([
                        [e0 * e0 + e1 * e1 - e2 * e2 - e3 * e3, 2 * (e1 * e2 - e0 * e3),
                         2 * (e1 * e3 + e0 * e2)],
                        [2 * (e1 * e2 + e0 * e3), e0 * e0 - e1 * e1 + e2 * e2 - e3 * e3,
                         2 * (e2 * e3 - e0 * e1)],
                        [2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1),
                         e0 * e0 - e1 * e1 - e2 * e2 + e3 * e3]])
                    Rc = Rc @ Rq
                    if v is not None:
                        G = 2.0 * r2 * np.array([[-e1, e0, e3, -e2], [-e2, -e3, e0, e1],
                                                 [-e3, e2, -e1, e0]])
                        wj = Rc @ (G @ v[a:a + 4])
                xc = P - Rc @ jpos
                if v is not None:
                    w = w + wj
                    u = u + _cross(P, wj)
            R[b], X[b] = Rc, xc
            if v is not None:
                W[b], U[b] = w, u
        return R, X, W, U


@dataclass(frozen=True)
class ContactPair:
    """One pair of colliding geoms of a loaded model (:attr:`gaussopt.multibody.tree.Model.
    contact_pairs`).

    Attributes
    ----------
    geom1, geom2 : str
        The geoms' names (MuJoCo's, or ``"geom<id>"``); ``geom1`` the plane of a plane pair.
    kind : str
        One of :data:`PAIR_KINDS`.
    friction : float
        Coulomb's coefficient (0: frictionless, MuJoCo's ``condim`` 1).
    link1, link2 : str or None
        The links carrying the geoms (None: the world).
    origin1 : tuple
        The plane's point or the first sphere's centre, in ``link1``'s frame (world: world).
    frame1 : tuple of tuples
        The plane's rotation (its z axis the normal) in ``link1``'s frame.
    points2 : tuple of tuples
        The contact spheres' centres (box: corners) of ``geom2`` in ``link2``'s frame, (k, 3);
        of a ``sphere-capsule`` or ``capsule-capsule`` pair, the two ends of the second
        capsule's axis segment (one contact point, at the closest points); of a
        ``sphere-cylinder`` or ``capsule-cylinder`` pair, the cylinder's two rims' centres
        (``radius2`` its radius, ``axis2`` its axis); of a
        ``sphere-box`` or ``capsule-box`` pair, the box's centre (:attr:`box2`: its sizes
        and axes).
    radius1, radius2 : float
        The radii (plane, box corner: 0; a cylinder's: its rims').
    source : str
        ``"filter"`` (``contype``/``conaffinity``) or ``"pair"`` (an explicit ``<pair>``).
    axis2 : tuple
        A cylinder's unit axis in ``link2``'s frame (``points2`` its two rims' centres);
        empty for the other kinds.
    segment1 : tuple
        The two ends of the first geom's axis segment in ``link1``'s frame (a
        ``capsule-capsule`` or ``capsule-box`` pair); empty for the other kinds.
    box2 : tuple
        A ``sphere-box`` or ``capsule-box`` pair's box: its half sizes, x axis and y axis in
        ``link2``'s frame (``points2``: its centre); empty for the other kinds.
    rim_points : int
        A cylinder's rims as ``rim_points`` material points each (:meth:`with_rim_points`;
        ``points2`` those points, ``radius2`` 0); 0: each rim touches at its lowest point.
    """

    geom1: str
    geom2: str
    kind: str
    friction: float
    link1: Optional[str]
    link2: Optional[str]
    origin1: tuple
    frame1: tuple
    points2: tuple
    radius1: float
    radius2: float
    source: str = "filter"
    axis2: tuple = ()
    rim_points: int = 0
    segment1: tuple = ()
    box2: tuple = ()

    @property
    def rows(self) -> int:
        """The contact points (gap rows) of the pair (a capsule against a sphere or a
        capsule: one, at their closest points; a capsule against a box: 14,
        :meth:`parts`)."""
        return sum(_part_rows(p) for p in self.parts())

    def parts(self) -> tuple:
        """The pair as pairs of the kinds evaluated point by point: itself, except a
        ``capsule-box`` pair, which is 14: its capsule's two end spheres against the box
        (``sphere-box``, the +z end first), then the capsule against each of the box's 12
        edges as a capsule of radius 0 (``capsule-capsule``: the edges along the box's x,
        then y, then z axis, the other two coordinates' signs running ``++, +-, -+, --``).

        (A ``capsule-cylinder`` pair is one point, at the point of the capsule's axis
        nearest the cylinder: the signed distance of a point of the axis to the solid
        cylinder is convex along the axis, so where it is least at two points it is least
        between them too -- the capsule then touches along a line, a line contact
        (:func:`_line_error`). Every other contact is one point's.)

        Why these 14 are exact: the distance from a point ``p(s)`` of the capsule's axis to
        the box is convex in ``s``; where the box's point closest to it lies inside a face,
        that distance is the face plane's, affine in ``s``, so its least value over the
        axis is at an end of the axis or where the closest point leaves the face, onto an
        edge (or a corner, an edge's end). So the least of the 14 distances is the
        capsule's distance to the box, and each of them is a distance between a point of
        the capsule's axis and a point of the box, never less than it: while the capsule
        is outside the box, every gap is >= 0 exactly where the capsule does not
        penetrate, and the points touching are the pair's contact points (a rod lying
        across a box's top face: the two edges it crosses; a capsule lying on it: its two
        ends; tipped over an edge: that edge). MuJoCo's own capsule-box collision is a
        search for the same closest points; written as these pairs, each gap keeps the
        closed-form derivatives of its kind."""
        if self.kind != "capsule-box":
            return (self,)
        half, ax, ay = (np.array(x, dtype=float) for x in self.box2)
        axes = (ax, ay, np.cross(ax, ay))
        c = np.array(self.points2[0], dtype=float)
        out = [dataclasses.replace(self, kind="sphere-box", origin1=e, segment1=())
               for e in self.segment1]
        for j in range(3):
            k, l = (i for i in range(3) if i != j)
            for sk, sl in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                mid = c + sk * half[k] * axes[k] + sl * half[l] * axes[l]
                ends = (mid + half[j] * axes[j], mid - half[j] * axes[j])
                out.append(dataclasses.replace(
                    self, kind="capsule-capsule", box2=(), radius2=0.0,
                    points2=tuple(tuple(float(x) for x in e) for e in ends)))
        return tuple(out)

    def with_rim_points(self, count: int) -> "ContactPair":
        """This plane-cylinder pair with each rim as ``count`` material points at equal
        angles (``count`` >= 3; the first on the rim's radius closest to the link frame's
        first axis orthogonal to the cylinder's), the first rim's then the second's:
        the cylinder touches the plane as a regular ``count``-gon prism inscribed in it.

        Why: a cylinder standing on a flat face touches along the face, where its rims have
        no lowest point (:data:`FACE_TOL`); as points of a polygon it stands, slides, spins
        and tips as that prism does: it tips when its centre of pressure leaves the polygon
        (within ``r cos(pi / count)`` of the axis, not ``r``), and rolling on a rim is a
        polygon's, with an impact at every corner."""
        from gaussopt.core.exceptions import ModelError
        if self.kind != "plane-cylinder" or self.rim_points:
            raise ModelError(f"`with_rim_points`: pair ({self.geom1!r}, {self.geom2!r}) must be "
                             "a plane-cylinder pair touching at its rims' lowest points, found "
                             f"a {self.kind} pair" + (f" with {self.rim_points} rim points"
                                                       if self.rim_points else "") + ".")
        check_rim_points(count, "count")
        a = np.array(self.axis2, dtype=float)
        e = np.zeros(3)
        e[int(np.argmin(np.abs(a)))] = 1.0
        u = e - (e @ a) * a
        u /= np.linalg.norm(u)
        w = np.cross(a, u)
        phi = 2.0 * np.pi * np.arange(count) / count
        ring = self.radius2 * (np.cos(phi)[:, None] * u + np.sin(phi)[:, None] * w)
        pts = np.concatenate([np.array(c, dtype=float) + ring for c in self.points2])
        return dataclasses.replace(self, points2=tuple(tuple(float(x) for x in p) for p in pts),
                                   radius2=0.0, rim_points=int(count))


class PairGroup:
    """The gaps, their Jacobian and ``gamma``, and the slip velocities of contact pairs (one
    :class:`~gaussopt.Contact`): one forward kinematics per evaluation for all of them
    (picklable: no closures).

    Parameters
    ----------
    kin : TreeKinematics
    pairs : sequence of ContactPair
    index : mapping
        Link name -> the link's index in ``kin``.
    compiled : bool, default True
        Evaluate the pairs of spheres, boxes and cylinders against world planes and the
        pairs of spheres and capsules with each other, boxes and cylinders by the compiled
        kernel (:func:`~gaussopt.multibody.tree.
        tree_compiled.contact_points`: the convective terms from the kernel's bias
        accelerations). ``False``: every pair by the numpy path (the complex steps; what
        the tests compare the kernel with).
    """

    def __init__(self, kin: TreeKinematics, pairs, index, compiled: bool = True) -> None:
        self.kin = kin
        self.pairs = tuple(pairs)
        # the pairs as the kinds evaluated point by point (a capsule-box pair: 14,
        # :meth:`ContactPair.parts`), in the pairs' row order
        self._parts = tuple(p for pr in self.pairs for p in pr.parts())
        self._geo = []
        for pr in self._parts:
            self._geo.append((-1 if pr.link1 is None else int(index[pr.link1]),
                              -1 if pr.link2 is None else int(index[pr.link2]),
                              np.array(pr.origin1, dtype=float).reshape(1, 3),
                              np.array(pr.frame1, dtype=float),
                              np.array(pr.points2, dtype=float).reshape(-1, 3),
                              float(pr.radius1),
                              0.0 if pr.kind in _CYLINDER_PAIRS else float(pr.radius2),
                              pr.kind.startswith("plane"),
                              np.array(pr.axis2, dtype=float)
                              if pr.kind == "plane-cylinder" and not pr.rim_points else None,
                              pr.geom2, pr.kind in ("sphere-capsule", "capsule-capsule"),
                              np.array(pr.segment1, dtype=float).reshape(2, 3)
                              if pr.segment1 else None, pr.geom1,
                              np.array(pr.box2, dtype=float).reshape(3, 3)
                              if pr.box2 else None, self._cylinder(pr)))
        self.k = sum(pr.rows for pr in self.pairs)
        # a world plane's normal and tangents, one row per contact point (constant)
        self._world_plane = [
            (np.repeat(g[3][None, :, 2], len(g[4]), axis=0),
             np.repeat(g[3][:, :2].T[None], len(g[4]), axis=0)) if g[7] and g[0] < 0 else None
            for g in self._geo]
        self._mask = kin.moving().astype(float)
        self._last = None
        self._cplx = None                  # the numpy kinematics at the last complex step
        self._T = self._J = self._gam = None          # kept for the last (q, v)
        # the points against a world plane (spheres, capsules' end spheres, boxes' corners,
        # cylinders' rims) and the pairs of spheres and capsules: evaluated together by the
        # compiled kernel (module docstring); planes carried by moving links by numpy
        fast = [compiled and (g[0] < 0 or not g[7]) for g in self._geo]
        self._slow_pairs = [j for j, f in enumerate(fast) if not f]
        rows = np.cumsum([0] + [_part_rows(pr) for pr in self._parts])
        self._fast_rows = np.concatenate(
            [np.arange(rows[j], rows[j + 1]) for j, f in enumerate(fast) if f] or
            [np.zeros(0, dtype=int)])
        self._slow_rows = np.setdiff1d(np.arange(self.k), self._fast_rows)
        geo, rims, lines = [], [], []
        for j, g in enumerate(self._geo):
            if fast[j] and g[14] is not None:          # a sphere or a capsule and a cylinder
                rec = np.zeros(kernel.W_PP)
                rec[kernel.PP_LINK], rec[kernel.PP_R] = g[1], g[14][2]
                rec[kernel.PP_S:kernel.PP_S + 3] = g[14][0]
                rec[kernel.SS_LINK1], rec[kernel.SS_R1] = g[0], g[5]
                ends = g[2][0], g[2][0]
                if g[11] is not None:
                    ends = g[11][0], g[11][1]
                rec[kernel.SS_C1:kernel.SS_C1 + 3], rec[kernel.SS_B1:kernel.SS_B1 + 3] = ends
                rec[kernel.CY_H] = g[14][3]
                rec[kernel.CY_A:kernel.CY_A + 3] = g[14][1]
                rec[kernel.PP_KIND] = 3.0
                geo.append(rec)
                rims.append(None)
                if g[11] is not None:
                    lines.append((len(geo) - 1, g[12], g[9], g[5] + g[14][2], "cylinder"))
            elif fast[j] and g[13] is not None:          # a sphere and a box
                rec = np.zeros(kernel.W_PP)
                rec[kernel.PP_LINK], rec[kernel.PP_R] = g[1], 0.0
                rec[kernel.PP_S:kernel.PP_S + 3] = g[4][0]
                rec[kernel.SS_LINK1], rec[kernel.SS_R1] = g[0], g[5]
                rec[kernel.SS_C1:kernel.SS_C1 + 3] = g[2][0]
                rec[kernel.SB_H:kernel.SB_H + 3] = g[13][0]
                rec[kernel.SB_X:kernel.SB_X + 3] = g[13][1]
                rec[kernel.SB_Y:kernel.SB_Y + 3] = g[13][2]
                rec[kernel.PP_KIND] = 2.0
                geo.append(rec)
                rims.append(None)
            elif fast[j] and not g[7]:   # spheres or capsules (a sphere: a segment of length 0)
                rec = np.zeros(kernel.W_PP)
                rec[kernel.PP_LINK], rec[kernel.PP_R] = g[1], g[6]
                rec[kernel.PP_S:kernel.PP_S + 3] = g[4][0]
                rec[kernel.SS_B:kernel.SS_B + 3] = g[4][-1]
                rec[kernel.SS_LINK1], rec[kernel.SS_R1] = g[0], g[5]
                rec[kernel.SS_C1:kernel.SS_C1 + 3] = g[2][0] if g[11] is None else g[11][0]
                rec[kernel.SS_B1:kernel.SS_B1 + 3] = g[2][0] if g[11] is None else g[11][1]
                rec[kernel.PP_KIND] = 1.0
                geo.append(rec)
                rims.append(None)
                if g[11] is not None:
                    lines.append((len(geo) - 1, g[12], g[9], g[5] + g[6],
                                  "edge" if g[6] == 0.0 else "capsules"))
            elif fast[j]:
                F1 = g[3]
                axis = np.zeros(3) if g[8] is None else g[8]
                for sp in g[4]:
                    geo.append(np.concatenate([[g[1]], sp, [g[6]], F1[:, 2], g[2][0],
                                               F1[:, 0], F1[:, 1], axis, [0.0]]))
                    rims.append(g[9] if g[8] is not None else None)
        self._pp = (np.array(geo, dtype=float).reshape(-1, kernel.W_PP) if geo
                    else np.zeros((0, kernel.W_PP)))
        # the kernel's rims: their geoms' names (None: a sphere's point) and radii
        self._pp_rims = [(i, nm, self._pp[i, kernel.PP_R]) for i, nm in enumerate(rims)
                         if nm is not None]
        # the kernel's pairs of capsules and of a capsule and a cylinder: (record, geom
        # names, the radii's sum, "capsules", "edge" (the second a box's edge) or
        # "cylinder": :func:`_line_error`)
        self._pp_lines = lines
        # (the records of both as arrays, checked per evaluation by numpy: a capsule-box
        # pair has 12 edges, a model dozens of such pairs)
        self._rim_at = np.array([i for i, _, _ in self._pp_rims], dtype=int)
        self._rim_r = np.array([r for _, _, r in self._pp_rims], dtype=float)
        self._line_at = np.array([x[0] for x in lines], dtype=int)
        self._line_r = np.array([x[3] for x in lines], dtype=float)
        self._plan_all = self._flat_plan()
        self._pp_out = None                # the kernel's outputs for the last (q, v)
        self._pp_gaps = None               # its gaps alone at the last q
        self._subsets: dict = {}           # rows -> PairSubset (:meth:`subset`)
        #: the kernel's record of each of the group's rows that it evaluates
        self._record = {int(r): i for i, r in enumerate(self._fast_rows)}

    @staticmethod
    def _cylinder(pr: ContactPair):
        """A sphere's or capsule's cylinder (``pr.points2`` its two rims' centres):
        ``(centre, unit axis, radius, half height)`` in its link's frame; None for the
        other kinds."""
        if pr.kind not in _CYLINDER_PAIRS:
            return None
        ends = np.array(pr.points2, dtype=float).reshape(2, 3)
        return (0.5 * (ends[0] + ends[1]), np.array(pr.axis2, dtype=float),
                float(pr.radius2), 0.5 * float(np.linalg.norm(ends[0] - ends[1])))

    @property
    def has_kinks(self) -> bool:
        """Whether the group holds cylinders against planes or pairs of capsules (the pairs
        whose gap has a kink: :meth:`nonsmooth_at`)."""
        return any(g[8] is not None or g[11] is not None for g in self._geo)

    @property
    def unsigned_rows(self) -> tuple:
        """The rows whose gap is an unsigned distance (the pairs of spheres and capsules:
        positive again past a passage; :attr:`gaussopt.Contact.unsigned`)."""
        rows = np.cumsum([0] + [_part_rows(pr) for pr in self._parts])
        return tuple(int(r) for j, g in enumerate(self._geo) if not g[7]
                     for r in range(rows[j], rows[j + 1]))

    def nonsmooth_at(self, t, q) -> bool:
        """Whether a cylinder's axis is within :data:`KINK_TOL` of its plane's normal at
        ``q``, or two capsules' axes within it of each other: a rim's gap has no
        derivative at zero angle (its lowest point is then every point of the rim; tilted by
        ``d``, the gap falls by ``r |sin d|`` whichever way), nor has the distance of two
        parallel axes side by side (turned by ``d`` either way, an end comes closer by
        ``l |sin d| / 2``: a humanoid's shins, upright at its reference pose), so a
        finite-difference check next to it cannot judge the Jacobian
        (:attr:`gaussopt.Contact.nonsmooth_at`)."""
        q = np.asarray(q)
        if q.dtype.kind != "f" or not self.has_kinks:
            return False
        R, X = self._real(q)[:2]
        for j, g in enumerate(self._geo):
            if g[8] is not None:
                _, n, _, _ = self._normals(R, X, g, j)
                if float(np.min(self._rim(R, g, n)[2])) <= KINK_TOL:
                    return True
            elif g[11] is not None and g[14] is not None:
                # (a capsule parallel to a cylinder's axis beside its side, or to a face
                # over it: turned either way, an end comes closer)
                e1 = np.diff(self._place(R, X, g[0], g[11]), axis=0)[0]
                B, a = self._cyl_frame(R, X, g)
                x = self._nearest(R, X, g)[0][0]
                region = self._cyl_close(B, a, g[14][2], g[14][3], x)[0]
                ea = float(e1 @ a)
                if (region == 1 and abs(ea) <= KINK_TOL * np.linalg.norm(e1)) or (
                        region == 0 and np.linalg.norm(np.cross(e1, a)) <= KINK_TOL *
                        np.linalg.norm(e1)):
                    return True
            elif g[11] is not None:
                e1 = np.diff(self._place(R, X, g[0], g[11]), axis=0)[0]
                e2 = np.diff(self._place(R, X, g[1], g[4]), axis=0)[0]
                if np.linalg.norm(np.cross(e1, e2)) <= KINK_TOL * np.linalg.norm(e1) * \
                        np.linalg.norm(e2):
                    return True
        return False

    @staticmethod
    def _place(R, X, k, s):
        """World points ``s`` (..., 3) of link ``k`` (-1: the world)."""
        return s if k < 0 else X[k] + s @ R[k].T

    def _normals(self, R, X, g, j=None):
        """``(c1, n, t, c2)``: the first geom's centre or plane point, unit normals (k, 3)
        from geom 1 to geom 2, tangents (k, 2, 3) and the second geom's centres (k, 3)
        (``j``: the index of ``g`` in the group, whose world plane's are kept)."""
        k1, k2, o1, F1, s2, r1, r2, plane = g[:8]
        if j is not None and self._world_plane[j] is not None:
            return o1, self._world_plane[j][0], self._world_plane[j][1], self._place(R, X, k2,
                                                                                      s2)
        if plane:
            c1, c2 = self._place(R, X, k1, o1), self._place(R, X, k2, s2)
            F = F1 if k1 < 0 else R[k1] @ F1
            n = np.broadcast_to(F[:, 2], c2.shape)
            t = np.broadcast_to(F[:, :2].T, (c2.shape[0], 2, 3))
            return c1, n, t, c2
        c1, c2, sg = self._nearest(R, X, g)
        d = c2 - c1
        n = sg * d / np.sqrt(np.sum(d * d, axis=1))[:, None]
        # tangents orthogonal to n, built from the kernel's reference directions (chosen
        # on the real part: the same basis for a complex step; SS_REF0's docstring)
        e = np.where((np.abs(np.real(n) @ np.array(kernel.SS_REF0))
                      <= kernel.SS_REF_COS)[:, None],
                     np.array(kernel.SS_REF0), np.array(kernel.SS_REF1))
        t1 = _cross(n, e)
        t1 = t1 / np.sqrt(np.sum(t1 * t1, axis=1))[:, None]
        t2 = _cross(n, t1)
        return c1, n, np.stack([t1, t2], axis=1), c2

    @classmethod
    def _nearest(cls, R, X, g):
        """``(c1, c2, sg)``: the centres (1, 3) of a pair of spheres, or the closest points
        of a sphere and a box (:meth:`_box_point`), or of the axis segments of a sphere and
        a capsule or two capsules (``sg`` 1; Ericson's clamped
        solution, :func:`~gaussopt.multibody.tree.tree_compiled._closest`, its branches
        taken on the real parts: any dtype, a complex step differentiates the parameters
        inside their segments and holds them at an end). Parallel capsules: the parameter
        of the first is 0, as the kernel's."""
        c1 = cls._place(R, X, g[0], g[2] if g[11] is None else g[11])
        if g[14] is not None:
            return cls._cyl_point(R, X, g, c1)
        c2 = cls._place(R, X, g[1], g[4])
        if g[13] is not None:
            return cls._box_point(R, g, c1, c2)
        if not g[10]:
            return c1, c2, 1.0
        e1, e2 = c1[-1] - c1[0], c2[-1] - c2[0]
        r = c1[0] - c2[0]
        a, b, c = np.sum(e1 * e1), np.sum(e1 * e2), np.sum(e1 * r)
        e, f = np.sum(e2 * e2), np.sum(e2 * r)

        def clamp(x):
            return 0.0 if np.real(x) <= 0.0 else (1.0 if np.real(x) >= 1.0 else x)

        if np.real(a) <= 0.0:
            s, t = 0.0, clamp(f / e)
        else:
            den = a * e - b * b
            s = 0.0 if np.real(den) <= (kernel.PP_FLAT ** 2 * np.real(a * e)) else \
                clamp((b * f - c * e) / den)
            t = (b * s + f) / e
            if np.real(t) < 0.0:
                t, s = 0.0, clamp(-c / a)
            elif np.real(t) > 1.0:
                t, s = 1.0, clamp((b - c) / a)
        return c1[:1] + s * e1, c2[:1] + t * e2, 1.0

    @staticmethod
    def _box_point(R, g, c1, B):
        """``(c1, c2, sg)`` of a sphere (centre ``c1``) and a box (centre ``B``): ``c2`` the
        box's point closest to ``c1`` (its coordinates in the box's frame clamped to the
        half sizes, on the real parts: any dtype), or where ``c1`` is inside the box its
        nearest face's point, ``sg`` -1 (the gap ``-|c2 - c1| - r``), else 1."""
        half, ax, ay = g[13]
        axes = np.array([ax, ay, np.cross(ax, ay)])
        if g[1] >= 0:
            axes = axes @ R[g[1]].T
        loc = axes @ (c1[0] - B[0])
        lr = np.real(loc)
        free = np.abs(lr) < half
        s = [loc[j] if free[j] else (half[j] if lr[j] >= 0 else -half[j]) for j in range(3)]
        sg = 1.0
        if free.all():
            j = int(np.argmin(half - np.abs(lr)))
            s[j] = half[j] if lr[j] >= 0 else -half[j]
            sg = -1.0
        return c1, B[0] + sum(s[j] * axes[j] for j in range(3))[None, :], sg

    @classmethod
    def _cyl_frame(cls, R, X, g):
        """A cylinder's centre and unit axis in the world (any dtype)."""
        centre, axis = g[14][0], g[14][1]
        B = cls._place(R, X, g[1], centre[None, :])[0]
        return B, (axis if g[1] < 0 else R[g[1]] @ axis)

    @staticmethod
    def _cyl_close(B, a, rc, hc, x):
        """``(region, c, n, d)``: the solid cylinder's (centre ``B``, unit axis ``a``,
        radius ``rc``, half height ``hc``) point ``c`` closest to ``x`` (3,), the unit
        normal ``n`` from ``x`` towards it, the signed distance ``d`` (inside: the nearer of
        the side and a flat face, negative); ``region`` 0 the side, 1 a flat face, 2 a rim.
        Any dtype; the region from the real parts."""
        r = x - B
        z = r @ a
        v = r - z * a
        rho = np.sqrt(v @ v)
        if np.real(rho) > 0.0:
            ur = v / rho
        else:
            e = np.zeros(3)
            e[int(np.argmin(np.abs(np.real(a))))] = 1.0
            ur = _cross(a, e)
            ur = ur / np.sqrt(ur @ ur)
        sg = 1.0 if np.real(z) >= 0.0 else -1.0
        az = sg * z
        if np.real(az) < hc and np.real(rho) < rc:
            region = 1 if np.real(hc - az) <= np.real(rc - rho) else 0
        elif np.real(az) < hc:
            region = 0
        elif np.real(rho) <= rc:
            region = 1
        else:
            region = 2
        if region == 0:
            return 0, B + z * a + rc * ur, -ur, rho - rc
        if region == 1:
            return 1, B + sg * hc * a + v, -sg * a, az - hc
        c = B + sg * hc * a + rc * ur
        m = c - x
        d = np.sqrt(m @ m)
        return 2, c, m / d, d

    @classmethod
    def _cyl_point(cls, R, X, g, C):
        """``(x, c, sg)`` of a sphere (centre ``C`` (1, 3)) or a capsule (axis ends ``C`` (2,
        3)) and a solid cylinder: ``x`` the point of the segment closest to the cylinder,
        ``c`` the cylinder's point closest to ``x`` (1, 3 each), ``sg`` -1 where ``x`` is
        inside. The signed distance to a convex set is convex along the segment, so its
        slope ``-n . e`` increases: the end where it does not change sign, else its root,
        by bisection on the real parts (independent of the kernel's Newton iteration); at a
        complex argument (a complex step) one Newton step adds the parameter's derivative,
        with the slope's own derivative in ``s`` by a complex step in ``s`` at the real
        state."""
        B, a = cls._cyl_frame(R, X, g)
        rc, hc = g[14][2], g[14][3]
        C0, e = C[0], C[-1] - C[0]
        Br, ar, Cr, er = (np.real(x) for x in (B, a, C0, e))

        def slope(s, B, a, C0, e):
            return -(cls._cyl_close(B, a, rc, hc, C0 + s * e)[2] @ e)

        s = 0.0
        if float(er @ er) > 0.0 and slope(0.0, Br, ar, Cr, er) < 0.0:
            if slope(1.0, Br, ar, Cr, er) <= 0.0:
                s = 1.0
            else:
                lo, hi = 0.0, 1.0
                while True:
                    mid = 0.5 * (lo + hi)
                    if not lo < mid < hi:
                        break
                    if slope(mid, Br, ar, Cr, er) < 0.0:
                        lo = mid
                    else:
                        hi = mid
                s = lo
                if np.iscomplexobj(C) or np.iscomplexobj(B):
                    h = 1e-30
                    fs = np.imag(slope(s + 1j * h, Br, ar, Cr, er)) / h
                    if fs > 0.0:
                        s = s - slope(s, B, a, C0, e) / fs
        x = C[-1] if (isinstance(s, float) and s == 1.0) else C0 + s * e
        _, c, _, d = cls._cyl_close(B, a, rc, hc, x)
        return x[None, :], c[None, :], (-1.0 if np.real(d) < 0.0 else 1.0)

    @staticmethod
    def _rim(R, g, n):
        """A cylinder's axis in the world ``a`` (k, 3) and ``u = n - (n . a) a`` with its
        norm ``s`` (any dtype): the rims' lowest points are ``c - r u / s``."""
        a = np.broadcast_to(R[g[1]] @ g[8], n.shape)
        u = n - np.sum(n * a, axis=1)[:, None] * a
        return a, u, np.sqrt(np.sum(u * u, axis=1))

    @classmethod
    def _points(cls, R, g, n, c2, c1=None):
        """The contact points (k, 3): a sphere's ``c2 - r n``; a cylinder rim's lowest point
        ``c2 - r u / |u|`` (module docstring; any dtype). A rim parallel to the plane (the
        cylinder on its flat face, ``|u| <= FACE_TOL``) has no lowest point: away from the
        plane (gap above ``r / 100``) any rim point serves (the row is open: its derivatives
        do not enter a step), touching it is a face contact, refused by name."""
        if g[8] is None:
            return c2 - g[6] * n
        a, u, s = cls._rim(R, g, n)
        flat = np.real(s) <= FACE_TOL
        if np.any(flat):
            near = np.real(np.sum(n * (c2 - c1), axis=1))[flat] <= 1.01 * g[6] if c1 is not None \
                else np.ones(int(flat.sum()), dtype=bool)
            if np.any(near):
                raise _face_error(g[9])
            e = np.zeros(a.shape)
            e[np.arange(len(a)), np.argmin(np.abs(np.real(a)), axis=1)] = 1.0
            w = _cross(a, e)
            u = np.where(flat[:, None], w, u)
            s = np.sqrt(np.sum(u * u, axis=1))
        return c2 - g[6] * u / s[:, None]

    def _real(self, q):
        """The compiled ``(R, X, S)`` at real ``q``, kept for the last ``q`` (a complex-step
        Jacobian in ``v`` evaluates the slip velocity n times at one ``q``)."""
        key = q.tobytes()
        if self._last is None or self._last[0] != key:
            self._last = (key, self.kin.compiled(q))
        return self._last[1]

    def _complex(self, q, v):
        """The numpy kinematics at a complex ``q`` (a complex step), kept for the last
        ``(q, v)``: the gaps' ``gamma`` and the slip velocities' convective terms take
        the same step (``q + i h v``, h = 1e-30) at every state of a run."""
        key = (q.tobytes(), v.tobytes())
        if self._cplx is None or self._cplx[0] != key:
            self._cplx = (key, self.kin(q, v))
        return self._cplx[1]

    def _jac(self, S, k, P):
        """``J (m, 3, n)``: the velocity of link ``k``'s material points ``P`` (m, 3) is ``J
        v`` (the world's: 0)."""
        if k < 0:
            return 0.0
        Jp = S[None, :, 3:] + _cross(S[None, :, :3], P[:, None, :])          # (m, n, 3)
        return np.transpose(Jp * self._mask[k][None, :, None], (0, 2, 1))

    @property
    def point_names(self) -> tuple:
        """One name per contact point: ``"<geom1>/<geom2>"``, with ``".<i>"`` where the pair
        has several points in ``points2``'s order (the loader's: a capsule's and a
        cylinder's end on its +z axis first; a box's corners with the signs of ``(x, y,
        z)`` running ``+++, ++-, +-+, ...``, z fastest)."""
        out = []
        for pr in self.pairs:
            base = f"{pr.geom1}/{pr.geom2}"
            out += [base] if pr.rows == 1 else [f"{base}.{i}" for i in range(pr.rows)]
        return tuple(out)

    def _kernel_gaps(self, q) -> np.ndarray:
        """The kernel's gaps at real ``q`` (a copy): those of its last full evaluation at
        ``q``, else :func:`~gaussopt.multibody.tree.tree_compiled.contact_gaps` alone (the
        watches read the gaps of every point at every step and its interior points; the
        rows, ``gamma`` and slips only a phase's closed points need). Both give the same
        values (the same operations)."""
        qk = q.tobytes()
        last = self._pp_out
        if last is not None and last[0] == qk:
            return last[2][0].copy()
        if self._pp_gaps is None or self._pp_gaps[0] != qk:
            gap = np.empty(len(self._pp))
            kernel.contact_gaps(self.kin.p, np.ascontiguousarray(q, dtype=float), self._pp,
                                gap)
            self._pp_gaps = (qk, gap)
        return self._pp_gaps[1].copy()

    def _flat_plan(self, recs=None) -> tuple:
        """For :meth:`_flat`: the kernel's rims and pairs of capsules among its records
        ``recs`` (default all), as ``(at, where)`` each: their places in the group's lists
        and in the outputs for ``recs``."""
        plan = []
        for at in (self._rim_at, self._line_at):
            if recs is None:
                plan.append((np.arange(len(at)), at))
            else:
                where = {int(r): j for j, r in enumerate(recs)}
                pos = np.array([j for j, r in enumerate(at) if int(r) in where], dtype=int)
                plan.append((pos, np.array([where[int(at[j])] for j in pos], dtype=int)))
        return tuple(plan)

    def _flat(self, gap, tilt, plan=None):
        """The error of the first rim lying flat on its plane (as :meth:`_points`: its
        centre within 1.01 r of the plane) or the first two parallel capsules touching
        (within 1 % of their radii: a line contact) among the kernel's records of ``plan``
        (:meth:`_flat_plan`; default all; ``gap``, ``tilt`` the kernel's outputs for
        them), or None."""
        (rp, rw), (lp, lw) = plan if plan is not None else self._plan_all
        if len(rp):
            ti, gi, r = tilt[rw], gap[rw], self._rim_r[rp]
            hit = np.flatnonzero((ti <= FACE_TOL) & (gi + r * ti <= 1.01 * r))
            if len(hit):
                return _face_error(self._pp_rims[rp[hit[0]]][1])
        if len(lp):
            hit = np.flatnonzero((tilt[lw] == 0.0) & (gap[lw] <= 0.01 * self._line_r[lp]))
            if len(hit):
                x = self._pp_lines[lp[hit[0]]]
                return _line_error(x[1], x[2], x[4])
        return None

    def subset(self, rows) -> "Optional[PairSubset]":
        """The group's rows ``rows`` (a closed point's gap and slip rows) as a
        :class:`PairSubset`, evaluated by the kernel on their records alone, or None where
        one is not a kernel row (a plane on a moving link: the whole group's functions
        then serve)."""
        key = tuple(int(r) for r in np.asarray(rows).reshape(-1))
        if key not in self._subsets:
            # (one per set of rows: a sticking point's gap and no-slip rows read the same
            # evaluation of its records)
            self._subsets[key] = (PairSubset(self, np.array([self._record[r] for r in key],
                                                            dtype=int))
                                  if all(r in self._record for r in key) else None)
        return self._subsets[key]

    def _contact_points(self, q, v=None, derivatives: bool = True):
        """The compiled kernel's ``(gap, G, gam, T, u, ugam)`` for its pairs' points at
        real ``(q, v)`` (:func:`~gaussopt.multibody.tree.tree_compiled.contact_points`),
        kept for the last state; ``v=None``: the position quantities at ``q`` (any ``v``
        evaluated there serves). ``derivatives``: the caller reads more than the gaps, so a
        rim lying flat on its plane is refused (:func:`_face_error`; its gap is exact, its
        derivatives are not defined)."""
        qk = q.tobytes()
        last = self._pp_out
        if last is None or last[0] != qk or (v is not None and last[1] != v.tobytes()):
            if v is None:
                v = np.zeros(self.kin.n)
            m, n = len(self._pp), self.kin.n
            out = (np.empty(m), np.empty((m, n)), np.empty(m), np.empty((2 * m, n)),
                   np.empty(2 * m), np.empty(2 * m), np.empty(m))
            kernel.contact_points(self.kin.p, np.ascontiguousarray(q, dtype=float),
                                  np.ascontiguousarray(v, dtype=float), self._pp, *out)
            last = self._pp_out = (qk, v.tobytes(), out[:6], self._flat(out[0], out[6]))
        if derivatives and last[3] is not None:
            raise last[3]
        return last[2]

    def _pairs(self, real: bool):
        """The pairs the numpy path evaluates: at real arguments the others than the
        kernel's, at complex ones (a complex step) every pair."""
        return self._slow_pairs if real else range(len(self._geo))

    def _join(self, fast, slow, shape=()):
        """The rows of the kernel's pairs (``fast``, or None when it has none) and of the
        others (``slow``: a list of per-pair arrays, or one array of the others' rows) in
        the group's row order."""
        if not len(self._slow_rows):
            return fast
        parts = np.concatenate(slow, axis=0) if isinstance(slow, list) else slow
        if not len(self._fast_rows):
            return parts
        out = np.empty((self.k,) + shape, dtype=np.result_type(fast, parts))
        out[self._fast_rows] = fast
        out[self._slow_rows] = parts
        return out

    def gap(self, t, q):
        """The signed distances, shape (k,) (any dtype of ``q``: complex by the numpy
        kinematics, real by the compiled one)."""
        q = np.asarray(q)
        real = q.dtype.kind == "f"
        fast = self._kernel_gaps(q) if real and len(self._fast_rows) else None
        which = self._pairs(real)
        if not which:
            return fast
        R, X = self._real(q)[:2] if real else self.kin(q)[:2]
        out = []
        for j in which:
            g = self._geo[j]
            if not g[7]:           # |c2 - c1| - r1 - r2 (no tangents needed)
                c1, c2, sg = self._nearest(R, X, g)
                d = c2 - c1
                out.append(sg * np.sqrt(np.sum(d * d, axis=1)) - g[5] - g[6])
                continue
            c1, n, _, c2 = self._normals(R, X, g, j)
            if g[8] is not None:                        # n . (c - p0) - r |u|: exact also flat
                out.append(np.sum(n * (c2 - c1), axis=1) - g[6] * self._rim(R, g, n)[2])
            else:
                out.append(np.sum(n * (c2 - c1), axis=1) - g[6])
        return self._join(fast, out) if real else np.concatenate(out)

    def jacobian(self, t, q):
        """``gap_q``, shape (k, n): ``n . (J2(c2) - J1(c1))`` with the normal ``n`` (the
        plane's, or the unit vector between the centres), from the compiled twists (kept
        for the last ``q``: a closed point's bilateral row asks for its row of it)."""
        q = np.asarray(q, dtype=float)
        key = q.tobytes()
        if self._J is None or self._J[0] != key:
            fast = self._contact_points(q)[1] if len(self._fast_rows) else None
            out = []
            which = self._pairs(True)
            if which:
                R, X, S = self._real(q)
            for j in which:
                g = self._geo[j]
                c1, n, _, c2 = self._normals(R, X, g, j)
                if g[8] is not None:                     # (the material point at P)
                    c2 = self._points(R, g, n, c2, c1)
                # (a plane carried by a link turns its normal with it: the rate of ``n .
                # (c2 - c1)`` is ``n`` times the velocity of c2 relative to the plane's
                # material point at c2, not at c1)
                J = self._jac(S, g[1], c2) - self._jac(S, g[0], c2 if g[7] else c1)
                out.append(np.einsum("ki,kin->kn", n, J))
            self._J = (key, self._join(fast, out, (self.kin.n,)))
        return self._J[1].copy()

    def _gap_rate(self, q, v, which):
        """``gap_q v`` of the pairs ``which`` at ``(q, v)`` of any dtype (the numpy
        kinematics)."""
        R, X, W, U = self._complex(np.asarray(q), np.asarray(v))
        out = []
        for j in which:
            g = self._geo[j]
            c1, n, _, c2 = self._normals(R, X, g, j)
            if g[8] is not None:
                c2 = self._points(R, g, n, c2, c1)
            rel = (U[g[1]] + _cross(W[g[1]], c2)) if g[1] >= 0 else 0.0
            if g[0] >= 0:                                # (as in :meth:`jacobian`)
                rel = rel - (U[g[0]] + _cross(W[g[0]], c2 if g[7] else c1))
            out.append(np.sum(n * rel, axis=1) * np.ones(len(c2)))
        return np.concatenate(out)

    def gamma(self, t, q, v):
        """``gamma = -(gap_q v)_q v``, shape (k,): the kernel's (world-plane pairs: from the
        bias accelerations), the others' by the complex step of :meth:`_gap_rate` along
        ``v`` (one evaluation, exact to rounding)."""
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        key = q.tobytes() + v.tobytes()
        if self._gam is None or self._gam[0] != key:
            fast = self._contact_points(q, v)[2] if len(self._fast_rows) else None
            which = self._pairs(True)
            slow = None
            if which:
                h = 1e-30
                slow = -np.imag(self._gap_rate(q + 1j * h * v, v, which)) / h
            self._gam = (key, self._join(fast, slow))
        return self._gam[1].copy()

    def slip_velocity(self, t, q, v):
        """The tangential velocity of each contact point, shape (k, 2): geom 2's material
        point at the contact point relative to geom 1's, on the pair's two tangents (real
        ``q``: the compiled twists times ``v`` of any dtype; complex ``q``: the numpy
        kinematics)."""
        q = np.asarray(q)
        v = np.asarray(v)
        if q.dtype.kind == "f":
            return self._slip_matrix(q) @ v
        return self._slip_numpy(q, v, range(len(self._geo)))

    def _slip_numpy(self, q, v, which):
        """The slip velocities of the pairs ``which`` by the numpy kinematics (any dtype)."""
        R, X, W, U = self._complex(q, v)
        out = []
        for j in which:
            g = self._geo[j]
            k1, k2 = g[0], g[1]
            c1, n, tang, c2 = self._normals(R, X, g, j)
            P = self._points(R, g, n, c2, c1)
            rel = (U[k2] + _cross(W[k2], P)) if k2 >= 0 else np.zeros_like(P)
            if k1 >= 0:
                rel = rel - (U[k1] + _cross(W[k1], P))
            out.append(np.einsum("kij,kj->ki", tang, rel))
        return np.concatenate(out, axis=0)

    def slip_velocity_jacobian(self, t, q, v):
        """``T (k, 2, n)``: the slip velocities' derivative in ``v`` (they are ``T(q) v``), from
        the compiled twists (:class:`~gaussopt.Contact`'s ``slip_velocity_jacobian``: no
        complex step over ``v``)."""
        return self._slip_matrix(np.asarray(q, dtype=float)).copy()

    def slip_velocity_gamma(self, t, q, v):
        """The slip velocities' convective terms ``ugam`` (k, 2) with ``u' = T a - ugam``
        (:class:`~gaussopt.Contact`'s ``slip_velocity_gamma``): the kernel's for its pairs,
        the others' (planes on moving links) by one complex step of the numpy path along
        ``v``."""
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        fast = (self._contact_points(q, v)[5].reshape(-1, 2).copy() if len(self._fast_rows)
                else None)
        which = self._pairs(True)
        slow = None
        if which:
            h = 1e-30
            slow = -np.imag(self._slip_numpy(q + 1j * h * v, v, which)) / h
        return self._join(fast, slow, (2,))

    def _slip_matrix(self, q):
        """``T (k, 2, n)`` with the slip velocities ``T v`` at real ``q`` (kept for the last
        ``q``: the complex-step Jacobian in ``v`` evaluates them n times at one ``q``)."""
        key = q.tobytes()
        if self._T is None or self._T[0] != key:
            n = self.kin.n
            fast = (self._contact_points(q)[3].reshape(-1, 2, n) if len(self._fast_rows)
                    else None)
            out = []
            which = self._pairs(True)
            if which:
                R, X, S = self._real(q)
            for j in which:
                g = self._geo[j]
                c1, n_, tang, c2 = self._normals(R, X, g, j)
                P = self._points(R, g, n_, c2, c1)
                out.append(np.einsum("kij,kjn->kin", tang,
                                     self._jac(S, g[1], P) - self._jac(S, g[0], P)))
            self._T = (key, self._join(fast, out, (2, n)))
        return self._T[1]


class PairSubset:
    """Some rows of a :class:`PairGroup` (a phase's closed points): their Jacobian,
    ``gamma``, slip-velocity matrix and convective terms by the compiled kernel on their
    records alone, the same values as the group's rows (each record is evaluated on its
    own). Why: a phase's force watches evaluate its rows at every step and its interior
    points, and a model's group may hold hundreds of points (dm_control's manipulator,
    832) of which a few are closed."""

    def __init__(self, group: PairGroup, records: np.ndarray) -> None:
        self.group = group
        self.records = records
        self._geo = np.ascontiguousarray(group._pp[records])
        self._plan = group._flat_plan(records)
        self._out = None

    def _eval(self, q, v=None):
        """The kernel's outputs for the records at ``(q, v)`` (``v`` None: the position
        quantities, from any ``v`` evaluated at ``q``), kept for the last state."""
        q = np.asarray(q, dtype=float)
        qk = q.tobytes()
        if v is None:
            if self._out is not None and self._out[0][0] == qk:
                if self._out[2] is not None:
                    raise self._out[2]
                return self._out[1]
            v = np.zeros(self.group.kin.n)
        v = np.asarray(v, dtype=float)
        key = (qk, v.tobytes())
        if self._out is None or self._out[0] != key:
            m, n = len(self._geo), self.group.kin.n
            out = (np.empty(m), np.empty((m, n)), np.empty(m), np.empty((2 * m, n)),
                   np.empty(2 * m), np.empty(2 * m), np.empty(m))
            kernel.contact_points(self.group.kin.p, np.ascontiguousarray(q),
                                  np.ascontiguousarray(v), self._geo, *out)
            self._out = (key, out, self.group._flat(out[0], out[6], self._plan))
        if self._out[2] is not None:
            raise self._out[2]
        return self._out[1]

    def jacobian(self, t, q):
        """The rows' ``gap_q`` (k, n)."""
        return self._eval(q)[1].copy()

    def gamma(self, t, q, v):
        """The rows' ``gamma`` (k,)."""
        return self._eval(q, v)[2].copy()

    def slip_velocity_jacobian(self, t, q, v):
        """The rows' ``T`` (2 k, n): tangent after tangent of each point."""
        return self._eval(q)[3].copy()

    def slip_velocity_gamma(self, t, q, v):
        """The rows' slip convective terms (2 k,)."""
        return self._eval(q, v)[5].copy()
