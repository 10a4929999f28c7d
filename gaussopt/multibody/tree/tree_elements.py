"""The elements of a tree model in joint coordinates: links, the joints that move them, and
the closures (``connect``, ``weld``) that close loops.

A tree is described as MuJoCo describes it (and :func:`gaussopt.multibody.load` reads it
from a compiled MuJoCo model): every :class:`Link` has a frame placed in its parent's frame
by a fixed offset, then moved by its joints, in order (:class:`TreeJoint`: hinge, slide,
ball, free); a link without joints is welded to its parent. Everything is given in the
frames of the links, so the elements need no pose of the whole mechanism.

Beside the joints: :class:`FixedTendon` (a length ``L = sum c_k q_k`` over hinges and
slides, with a spring, a damper and an armature of its own), :class:`SpatialTendon` (a
string through points of the links, around the spheres and cylinders of its
:class:`TendonWrap` s, with a spring and a damper), :class:`Actuator` (a force
along a joint or a tendon set by a control ``ctrl``, MuJoCo's ``motor``, ``position``,
``velocity`` and ``general`` actuators without activation dynamics), and the closures
:class:`JointEquality` and :class:`TendonEquality` (a polynomial coupling of two joints or
two tendons, one row each). They are passed with the model's ``forces`` (tendons,
actuators) and ``joints`` (closures).

A :class:`Mocap` body (MuJoCo's mocap body, passed with the ``links``) has no joints and
no dynamics of its own: it is where the user holds or moves a closure's side. In the
model's system it stays at its reference pose; ``model.moved({name: MocapMotion(...)})``
makes it follow a prescribed motion, and the closures that name it become rheonomic rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

__all__ = ["Link", "TreeJoint", "Connect", "Weld", "FixedTendon", "SpatialTendon", "TendonWrap",
           "Actuator", "Muscle",
           "JointEquality", "TendonEquality", "Mocap", "MocapMotion", "JOINT_KINDS", "WORLD"]

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
class Mocap:
    """A body whose motion the user prescribes (MuJoCo's mocap body): no joints, no
    coordinates, no mass that acts on the tree; a :class:`Connect` or a :class:`Weld` may
    name it as a side (``link_1`` or ``link_2``), its point in the mocap body's frame.

    In the model's :attr:`~gaussopt.multibody.tree.Model.system` it is held at rest at
    ``position`` and ``orientation`` (world frame); :meth:`~gaussopt.multibody.tree.Model.
    moved` gives a system in which it follows a :class:`MocapMotion`: the closures that
    name it become rheonomic rows (their ``Phi_t`` and ``gamma`` from its velocity and
    acceleration), exact where MuJoCo's weld to a mocap body is a soft spring.

    Parameters
    ----------
    name : str
    position : array_like, shape (3,)
        The body's origin in the world frame at rest.
    orientation : array_like, shape (4,)
        Unit quaternion ``(w, x, y, z)`` of its frame in the world frame at rest.
    """

    name: str
    position: tuple = (0.0, 0.0, 0.0)
    orientation: tuple = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class MocapMotion:
    """The prescribed motion of a :class:`Mocap` body, in the world frame: its origin
    ``position(t)`` (3,) with ``velocity(t)`` and ``acceleration(t)``, and its frame's
    ``orientation(t)`` (a quaternion ``(w, x, y, z)``, 4) with ``angular_velocity(t)`` and
    ``angular_acceleration(t)`` (world frame, 3 each). A part left out (``position`` or
    ``orientation`` None) stays at the body's rest value; a part given needs both its
    derivatives, exactly (as :class:`~gaussopt.multibody.spatial.DrivenAngle`'s rates):
    they enter the rows' ``Phi_t`` and ``gamma``, and :meth:`gaussopt.System.check` compares
    them with finite differences of the positions.

    Parameters
    ----------
    position, velocity, acceleration : callable, optional
        ``f(t) -> array_like (3,)``.
    orientation : callable, optional
        ``f(t) -> array_like (4,)``, normalized where evaluated.
    angular_velocity, angular_acceleration : callable, optional
        ``f(t) -> array_like (3,)``.
    """

    position: Optional[Callable] = None
    velocity: Optional[Callable] = None
    acceleration: Optional[Callable] = None
    orientation: Optional[Callable] = None
    angular_velocity: Optional[Callable] = None
    angular_acceleration: Optional[Callable] = None


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
    stiffness : float
        A spring of MuJoCo's (``stiffness``, about ``qpos_spring``): hinge and slide
        ``-stiffness (q - spring_reference)``; ball a torque ``-stiffness r`` in the link's
        frame, ``r`` the rotation vector of ``spring_reference^-1 p``; free both (its
        position and its rotation).
    spring_reference : float or array_like
        One number (hinge, slide), Euler parameters (ball, 4), position and Euler
        parameters (free, 7; default: the link's offset pose).
    actuator_force_range : (float, float) or None
        MuJoCo's ``actuatorfrcrange`` (hinge, slide): the sum of the actuator forces on the
        joint is clamped to it.
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
    spring_reference: object = None
    actuator_force_range: Optional[tuple] = None


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


@dataclass(frozen=True)
class FixedTendon:
    """A fixed tendon of MuJoCo's: the length ``L(q) = sum coef_k q_k`` over hinges and
    slides (``terms``: pairs ``(joint name, coef)``), with a spring that pulls it into the
    dead band ``spring_length`` (``-stiffness (L - upper)`` above it, ``-stiffness (L -
    lower)`` below), a damper ``-damping L'`` and an armature (kinetic energy ``armature
    L'^2 / 2``); the generalized force of a tendon force ``f`` is ``f dL/dq = f coef``.
    Actuators and :class:`TendonEquality` act along it by its name.

    Parameters
    ----------
    name : str
    terms : sequence of (str, float)
    stiffness, damping, armature : float, >= 0
    spring_length : float or (float, float)
        One length, or the dead band ``(lower, upper)``.
    actuator_force_range : (float, float) or None
        The sum of the forces of the actuators on this tendon is scaled into it.
    """

    name: str
    terms: tuple
    stiffness: float = 0.0
    damping: float = 0.0
    spring_length: object = 0.0
    armature: float = 0.0
    actuator_force_range: Optional[tuple] = None


@dataclass(frozen=True)
class SpatialTendon:
    """A spatial tendon of MuJoCo's through sites only: a string whose length ``L(q)`` is the
    sum of the straight segments between consecutive points of ``path`` (each fixed in a
    link, or in the world), with a spring that pulls it into the dead band
    ``spring_length`` (as :class:`FixedTendon`'s) and a damper ``-damping L'``. Its tension
    ``f`` pulls the two ends of every segment towards each other; the generalized force is
    ``f dL/dq`` (exactly: the forces are applied at the points, no Jacobian is formed).
    :class:`Actuator` s act along it by its name (their tension ``gear f`` joins the
    spring's and the damper's), and a :class:`TendonEquality` couples its length with
    another's (an exact row, from the sites' motion). Its ``armature`` adds the kinetic
    energy ``armature L'^2 / 2`` (MuJoCo's: ``armature (dL/dq)^T (dL/dq)`` in ``M`` and its
    velocity terms). Between two points the string may wrap a sphere or a cylinder
    (:class:`TendonWrap`, MuJoCo's wrapping geoms): where it touches the geom it follows
    the shortest path on it, exactly as MuJoCo's ``mju_wrap``.

    Parameters
    ----------
    name : str
    path : sequence of (link, point) or TendonWrap
        At least two points: the link's name (or a :class:`Link`; None or ``"world"`` for
        the world) and the point (3,) in its frame; a :class:`TendonWrap` between two
        points (a tendon that wraps has no armature and no :class:`TendonEquality`: their
        terms need the curvature of the string on the geom, not modelled).
    stiffness, damping, armature : float, >= 0
    spring_length : float or (float, float)
        One length, or the dead band ``(lower, upper)``.
    actuator_force_range : (float, float) or None
        The sum of the forces of the actuators on this tendon is scaled into it.
    """

    name: str
    path: tuple
    stiffness: float = 0.0
    damping: float = 0.0
    spring_length: object = 0.0
    armature: float = 0.0
    actuator_force_range: Optional[tuple] = None


@dataclass(frozen=True)
class TendonWrap:
    """A sphere or an infinite cylinder fixed in a link that a :class:`SpatialTendon`'s
    string wraps around between the two points of its path next to it (MuJoCo's
    ``<spatial>`` tendon through a ``<geom>``). Where the straight segment between those
    points misses the geom the string is straight; where it would cut through it, the
    string leaves the first point along a tangent, follows the geom (a great circle of the
    sphere, a helix of the cylinder: the shortest way) and leaves it along a tangent to the
    second point. The two ways around are decided as MuJoCo does: the side of ``side``
    where it is given, else the shorter.

    Parameters
    ----------
    link : str, Link, None or "world"
        The link that carries the geom.
    shape : {"sphere", "cylinder"}
    radius : float, > 0
    position : (3,)
        The geom's centre in the link's frame.
    rotation : (3, 3)
        The geom's axes (columns) in the link's frame; a cylinder's axis is the third.
    side : (3,) or None
        A point in the link's frame on the side where the string passes (MuJoCo's
        ``sidesite``), outside the geom (MuJoCo's inside wrapping, an iterative solve that
        stops at 1e-6, is not modelled).
    """

    link: object
    shape: str
    radius: float
    position: tuple = (0.0, 0.0, 0.0)
    rotation: tuple = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    side: Optional[tuple] = None


@dataclass(frozen=True)
class Actuator:
    """A force along a joint (hinge, slide), a :class:`FixedTendon` or a
    :class:`SpatialTendon`, set by a control
    ``u``: MuJoCo's actuators with a fixed or affine gain and an affine bias, ``f = gain u +
    bias[0] + bias[1] l + bias[2] l'`` with the actuator's length ``l = gear L`` (``L`` the
    joint's coordinate or the tendon's length), applied as ``gear f`` along ``L``; an affine
    gain is ``gain[0] + gain[1] l + gain[2] l'``. A ``motor`` is ``gain = 1``, a ``position``
    servo ``gain = kp, bias = (0, -kp, -kv)``, a ``velocity`` servo ``gain = kv, bias = (0,
    0, -kv)``, a ``damper`` ``gain = (0, 0, -kv)``.

    With activation dynamics the force takes the activation ``act`` in place of ``u``, and
    the control drives ``act``: ``act' = (u - act) / time_constant`` (``"filter"``,
    MuJoCo's ``filter`` and ``filterexact``) or ``act' = u`` (``"integrator"``). ``act`` is
    a state of the model: the velocity of a coordinate ``"<name>.act"`` appended after the
    joints' (it moves no link; its own coordinate is ``act``'s integral), so a run's initial
    state ``v0`` holds the initial activation and its accelerations hold ``act'``.

    Parameters
    ----------
    name : str
    joint, tendon : str
        Exactly one (or ``site``, or ``crank``): the joint or the tendon it acts along. On a ball joint
        the actuator's unit force is the torque ``gear`` (3) in the joint's frame, its length
        ``gear . r`` (``r`` the joint's rotation vector) and its rate ``gear . w``; on a
        free joint ``gear`` (6) is the force along the world axes and the torque in the
        body's frame, its length zero (MuJoCo's joint transmissions).
    gear : float (3 floats on a ball joint, 6 on a free joint or a site)
    gain : float or (float, float, float)
        A fixed gain, or an affine one's (constant, length, velocity) coefficients.
    bias : (float, float, float)
    ctrl_range, force_range : (float, float) or None
        When given, the control is clamped to ``ctrl_range`` and the force to
        ``force_range`` (MuJoCo's ``ctrllimited``, ``forcelimited``).
    ctrl : float
        The control's value in the model's parameters (the model's :attr:`system`; a
        :class:`~gaussopt.Stepper` changes it per step, ``model.controlled`` sets it).
    dynamics : {None, "filter", "integrator"}
        The activation dynamics (None: the force follows the control at once).
    time_constant : float or None
        ``tau > 0`` of a ``"filter"``.
    muscle : Muscle or None
        A muscle: its force and activation dynamics replace ``gain``, ``bias`` and
        ``dynamics`` (its activation is a coordinate ``"<name>.act"`` as a filter's).
    in_parent : bool
        On a ball or free joint: the gear's torque is given in the joint's parent frame
        (MuJoCo's ``jointinparent``), not in the joint's own.
    site : (link, position) or (link, position, rotation), optional
        Instead of ``joint`` or ``tendon``: a site of a link (MuJoCo's site transmission
        without a reference site), its position in the link's frame and its rotation (the
        site's axes as columns, default the link's). ``gear`` is then 6 numbers, the force
        and the torque the actuator's unit force exerts at the site, in the site's frame;
        its length is zero and its rate the gear along the site's velocity and the link's
        angular velocity.
    reference : (link, position) or (link, position, rotation), optional
        With ``site``: a reference site (MuJoCo's ``refsite``; ``link`` None for the
        world). The length is the site's position from the reference site along the
        reference's axes times ``gear[:3]`` plus the rotation vector of the site's axes in
        the reference's times ``gear[3:]``; the actuator's unit force is MuJoCo's moment:
        the force ``Rr gear[:3]`` at the site and its opposite at the reference site, the
        torque ``Rr gear[3:]`` on the site's link and its opposite on the reference's
        (``Rr`` the reference's axes), none on the joints that move both links together.
    crank, slider : (link, position) and (link, position) or (link, position, rotation)
        Instead of ``joint``, ``tendon`` or ``site``: a slider-crank (MuJoCo's
        ``slidercrank`` transmission; ``link`` None for the world): the crank site, and the
        slider site whose third axis is the slider's (rotation: the site's axes as columns
        in its link's frame). With ``rod`` the connecting rod's length, the actuator's
        length is ``gear (a . d - sqrt((a . d)^2 + rod^2 - d . d))`` (``d`` from the slider
        site to the crank site, ``a`` the axis; where the square root's argument is not
        positive, MuJoCo's ``gear a . d``) and its unit force ``gear`` times the length's
        gradient.
    rod : float, optional
        The connecting rod's length of a slider-crank, positive.
    """

    name: str
    joint: Optional[str] = None
    tendon: Optional[str] = None
    gear: Union[float, tuple] = 1.0
    gain: Union[float, tuple] = 1.0
    bias: tuple = (0.0, 0.0, 0.0)
    ctrl_range: Optional[tuple] = None
    force_range: Optional[tuple] = None
    ctrl: float = 0.0
    dynamics: Optional[str] = None
    time_constant: Optional[float] = None
    muscle: Optional[Muscle] = None
    site: Optional[tuple] = None
    in_parent: bool = False
    reference: Optional[tuple] = None
    crank: Optional[tuple] = None
    slider: Optional[tuple] = None
    rod: Optional[float] = None


@dataclass(frozen=True)
class Muscle:
    """MuJoCo's muscle (``<muscle>``: gain, bias and activation dynamics of the muscle
    kind), for :class:`Actuator`'s ``muscle``. The force along the actuator's line is ``-F
    (FL(L) FV(V) act + FP(L))`` (``mju_muscleGain``, ``mju_muscleBias``): ``L`` the
    actuator's length normalized so that ``range`` maps onto ``length_range``, ``V`` its
    rate over ``L0 vmax`` (``L0`` the optimal length, ``length_range`` over ``range``),
    ``FL`` the force-length curve (half quadratics from ``lmin`` through 1 to ``lmax``),
    ``FV`` the force-velocity curve (up to ``fvmax``), ``FP`` the passive curve (``fpmax``
    at ``(1 + lmax) / 2``, linear beyond). The activation ``act`` follows ``act' = (u - act)
    / tau`` with ``tau = tau_act (0.5 + 1.5 act)`` while ``u > act`` and ``tau_deact / (0.5 +
    1.5 act)`` else (``u`` and ``act`` clamped to [0, 1] there; a quintic blend between the
    two over ``smoothing``): ``mju_muscleDynamics``.

    Parameters
    ----------
    length_range : (float, float)
        The actuator lengths of the operating range (MuJoCo's ``lengthrange``, which its
        compiler computes).
    force : float
        ``F > 0``, the peak active force (MuJoCo's ``force``, or ``scale / acc0`` where
        that is negative).
    range, lmin, lmax, vmax, fpmax, fvmax
        MuJoCo's muscle parameters (its defaults).
    time_constants : (float, float)
        ``(tau_act, tau_deact)``.
    smoothing : float
        MuJoCo's ``tausmooth`` (0: the time constant switches where ``u = act``).
    """

    length_range: tuple
    force: float
    range: tuple = (0.75, 1.05)
    lmin: float = 0.5
    lmax: float = 1.6
    vmax: float = 1.5
    fpmax: float = 1.3
    fvmax: float = 1.2
    time_constants: tuple = (0.01, 0.04)
    smoothing: float = 0.0


@dataclass(frozen=True)
class JointEquality:
    """MuJoCo's ``joint`` equality, one row: ``x_1 = c0 + c1 x_2 + c2 x_2^2 + c3 x_2^3 + c4
    x_2^4`` with ``x_i = q_i - reference_i`` the joints' displacements from their references
    (``qpos0``); without ``joint_2``, ``x_1 = c0``. Hinges and slides.

    Parameters
    ----------
    joint_1 : str
    joint_2 : str or None
    polycoef : sequence of 5 floats
        ``(c0, c1, c2, c3, c4)``.
    name : str, optional
    """

    joint_1: str
    joint_2: Optional[str] = None
    polycoef: tuple = (0.0, 1.0, 0.0, 0.0, 0.0)
    name: Optional[str] = None


@dataclass(frozen=True)
class TendonEquality:
    """MuJoCo's ``tendon`` equality, one row: as :class:`JointEquality` with ``x_i = L_i -
    L_i(q_reference)`` the tendons' lengths (fixed or spatial) from their lengths at the
    reference (MuJoCo's ``tendon_length0``)."""

    tendon_1: str
    tendon_2: Optional[str] = None
    polycoef: tuple = (0.0, 1.0, 0.0, 0.0, 0.0)
    name: Optional[str] = None
