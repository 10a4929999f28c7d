"""The numeric kernel of :mod:`gaussopt.multibody.tree` (numba): rigid-body trees in joint
coordinates, their loops closed by constraint rows.

Why a third kind
----------------
The spatial kind (:mod:`gaussopt.multibody.spatial`) gives every body seven coordinates
and writes every joint as equations, so a humanoid of 27 degrees of freedom becomes 175
coordinates and 148 rows, and the dense Gauss step works on all of them at every
right-hand side. Gauss's principle does not care which coordinates it is written in: in
the joints' own coordinates a tree needs no equation at all -- its mass matrix ``M(q)``
comes from the composite-rigid-body algorithm, its bias force from the recursive
Newton--Euler algorithm -- and closing loops adds only the closure rows, over which the
engine's rank decision then runs (a redundant closure keeps its exactness).

Coordinates
-----------
``q`` is MuJoCo's ``qpos``: one coordinate per hinge (angle, measured from the joint's
reference ``qpos0``) and per slide (displacement, from ``qpos0``); four per ball joint (its
Euler parameters ``p = (e0, e1, e2, e3)``, MuJoCo's ``(w, x, y, z)``); a free joint is three
slides along the world axes followed by a ball at the body's origin (seven coordinates, as
MuJoCo's). ``v = q'``: for a ball the Euler parameters' rates, whose body-frame angular
velocity is ``u = W(p) p'`` with ``W = 2 G(p) / |p|^2`` (``G`` as in the spatial kind;
exact for the rotation of ``p / |p|``, so trial states off ``|p| = 1`` stay consistent).
``M = S^T H S`` is singular along ``p`` -- the 4 x 4 block of a ball has rank 3 -- and one
normalization row ``(p . p - 1) / 2`` per ball, first among the rows, makes the stacked
``[M; Phi_q]`` regular (exactly as the spatial bodies do).

Algorithms (world frame, spatial vectors at the world origin, angular part first)
---------------------------------------------------------------------------------
(``M`` and ``F`` are computed with every body's spatial quantities moved to the origin of
its tree's root body, :func:`_at_tree_roots`: the same sums, without the rounding of
inertias taken about a distant point.)
Every coordinate ``c`` has a world twist ``S_c`` (6,) with ``v_body = sum S_c q'_c`` over the
coordinates of the body and of its ancestors: a hinge ``[a; P x a]`` (axis ``a``, anchor
``P``), a slide ``[0; a]``, a ball ``sum_k [R e_k; P x R e_k] W[k, c]`` (``R`` the frame after
the ball). The bias acceleration of a body (its acceleration at ``q'' = 0``) adds, joint by
joint, ``V_before x (S u)`` (each twist is fixed in the frame that moves with the velocity
before its joint) and, for a ball, ``S W' p' = -2 (p . p') / |p|^2 S u``. Then

* ``M``: composite inertias ``Ic_b`` (mass, first moment ``h = m c``, and ``Ibar = Ic - m [c]x
  [c]x`` about the origin) summed leaves to root; ``M[c, c'] = S_c'^T Ic_b S_c`` for ``c`` of
  body ``b`` and ``c'`` of ``b`` or an ancestor (Featherstone 2008, sec. 6.2);
* ``F = -S^T f``, ``f_b = I_b A_b + V_b x* I_b V_b - f_gravity`` summed leaves to root
  (recursive Newton--Euler, sec. 5.3), plus MuJoCo's passive forces ``-damping u`` (every
  degree of freedom), ``-stiffness (q - springref)`` (hinges and slides; a ball's ``-k r`` in
  its frame, ``r`` the rotation vector of ``p_spring^-1 p``, MuJoCo's ``mju_subQuat``) and the
  armature ``a u'`` (on the diagonal of ``H``), the lines' and the actuators' forces;
* a closure ``connect`` (3 rows, ``P_2 - P_1``) or ``weld`` (3 rows at the anchor and 3
  perpendicularities ``(R_1 a_k) . (R_2 b_k)``) from the same twists: ``Phi_q`` columns
  ``S_c.lin + S_c.ang x P`` (points) and ``S_c.ang`` (axes), ``gamma`` from the bias
  accelerations (``a_P = A.lin + A.ang x P + w x v_P``).

Lines, actuators, couplings
---------------------------
A *line* is a linear length ``L(q) = sum c_k q_k`` over hinge and slide coordinates: a fixed
tendon (its spring ``-k x`` with ``x`` the stretch outside the dead band ``[lower, upper]``,
its damper ``-b L'``, its armature ``a L'^2 / 2`` on ``M``), or a joint's own coordinate
named by an actuator or an equality. A force ``f`` along a line is the generalized force
``f c``. A *spatial tendon* is a line whose length is that of a path through sites of the
bodies (straight segments), and around the spheres and cylinders it wraps between two
sites (MuJoCo's ``mju_wrap``: :func:`_wrap`, the path's points :func:`_path_points`): its
tension (spring, damper, actuators) is applied as forces at the sites and the tangent
points, pulling every segment's ends together (the generalized force ``f dL/dq``, without
forming ``dL/dq``), and a coupling of it takes ``dL/dq`` and ``L''`` at ``q'' = 0`` from
the sites' motion (not for a wrapping tendon: its ``L''`` needs the string's curvature).
An actuator is MuJoCo's with a fixed or affine gain and an affine bias: ``f = (g0 + g1 l +
g2 l') u + b0 + b1 l + b2 l'``, ``l = gear L``, applied as ``gear f`` along its line, with
MuJoCo's clamps in MuJoCo's order (``mj_fwdActuation``): the control to its range, the
forces along a line with an ``actuatorfrcrange`` scaled into it, each force to its
``forcerange``, each joint's sum to its ``actuatorfrcrange``. The control ``u`` is a slot of
``p`` (:data:`A_CTRL` of the actuator's record): a parameter that enters the force only. An
actuator with activation dynamics (MuJoCo's ``filter`` ``act' = (u - act) / tau`` and
``integrator`` ``act' = u``) has ``act`` in place of ``u`` in its force, and ``act`` is a
state: the velocity of a coordinate of its own, appended after the joints' (a slide without
axis on the last link: it moves nothing), whose mass is ``tau`` (resp. 1, its armature) and
whose force is ``u - act`` (resp. ``u``). Its equation of motion is then ``tau act' = u -
act`` exactly, and the engine integrates it with the rest, with no state outside ``(q, v)``.
A muscle (MuJoCo's ``<muscle>``: :func:`_muscle_force`, :func:`_muscle_rate`) is an actuator
with an activation whose force and rate are MuJoCo's curves of its length and rate (mass 1,
force ``act'``).
An actuator on a site (MuJoCo's site transmission without a reference site) has no line:
its force ``f`` acts as the force ``f gF`` and the torque ``f gT`` at the site (its 6-D gear
turned into its link's frame, :func:`_site_wrench`), and its rate is ``gF . v_site + gT .
w`` (:func:`_site_rate`). One on a ball joint exerts the torque ``f g`` in the joint's frame
(``W^T g f`` on its Euler parameters), its length ``g . r`` (``r`` the rotation vector) and
its rate ``g . w`` (:func:`_ball_gear`); on a free joint the gear's force acts along the
world axes, its torque in the body's frame. A slider-crank and a site with a reference site
(MuJoCo's two-site transmissions) are lines of their sites, as a spatial tendon is: their
length and rate from the two sites' positions and frames (:func:`_crank_geometry`,
:func:`_refsite_geometry`), their force per unit tension as forces and torques on the
sites' bodies (:func:`_site_forces`).
A coupling (MuJoCo's ``joint`` and ``tendon`` equalities) is one row ``x_1 - P(x_2)`` of the
lines' displacements from their reference lengths, ``P`` a polynomial of degree 4:
``Phi_q = c_1 - P'(x_2) c_2``, ``gamma = P''(x_2) L_2'^2`` (:func:`_coupling_row`).

The model is packed into one ``float64`` array ``p`` (:func:`pack`): a header of
:data:`HEADER` slots, then per body a record of :data:`W_B` values, per joint :data:`W_J`,
per closure :data:`W_E`, per line :data:`W_L`, its terms (coordinate, coefficient), per
actuator :data:`W_A`. The functions are the interface of a kind of multibody model;
:mod:`gaussopt.multibody.common.cfuncs` makes from them the compiled model functions.

References
----------
R. Featherstone, *Rigid Body Dynamics Algorithms*, Springer (2008), ch. 2, 5-6.
E. Todorov, T. Erez, Y. Tassa, "MuJoCo: A physics engine for model-based control",
IROS 2012 (``mj_kinematics``, ``mj_crb``, ``mj_rne``: the conventions followed here).
"""

from __future__ import annotations

import math
import sys

import numpy as np

import gaussopt.gauss.dense_algebra as LA
from gaussopt.core.compiled import cfunc, jit, unit
from gaussopt.core.views import carve
from gaussopt.core.model_interface import (R_BEF, R_BES, R_CLOSED, R_DMIN, R_SCALARS,  # noqa: F401
                                           R_SIG, R_WGT,
                                           recursive_parts, recursive_rows, recursive_size)
from gaussopt.core.model_interface import SIGNATURE
from gaussopt.multibody.common.cfuncs import KindFunctions, mat, vec

__all__ = ["pack", "phi", "rows", "phi_t", "mass", "force", "mass_force", "energy", "sizes",
           "line_length", "line_state",
           "FUNCTIONS", "compiled_factory", "sparse_model", "recursive_model", "recursive_step", "mass_tree", "kinematics", "actuation",
           "contact_points", "W_PP", "PHASE_FUNCTIONS", "PH_TAG", "phase_functions"]

#: The kernel's functions allocate nothing and compile without numba's reference counting
#: (``_nrt=False``): each entry point (a unit, below) allocates one buffer per call, and
#: the functions take their arrays from it as views (:func:`_work`,
#: :func:`gaussopt.core.views.carve`). With an ``np.empty`` per temporary (about 30
#: allocations per evaluation of ``M`` and ``F``, 30 ns each) and an atomic increment
#: and decrement for every array passed between functions, a 6-link arm's evaluation
#: cost 3.0 us (``benchmarks/robots.py``, its split rows).
_jit = jit(cache=True, error_model="numpy", _nrt=False)
_inline = jit(cache=True, error_model="numpy", _nrt=False, inline="always")


def _unit(signature: str):
    """Kernel entry points called from Python and from the compiled model functions:
    compiled once, when a tree model is first used."""
    return unit(signature, lazy=True, python=True, error_model="numpy")


#: (the entry points' helpers that allocate: with reference counting, inlined)
_unit_inline = jit(cache=True, error_model="numpy", inline="always")


def _lazy(signature: str):
    """The spatial tendons' functions: units that a model without spatial tendons never
    loads (its callers reach them behind a test of the model's sites), so that every tree
    model's first use does not compile them (they were a fifth of the humanoid-like tree's
    first compilation when linked into their callers)."""
    return unit(signature, lazy=True, error_model="numpy", _nrt=False)


#: the layout tag in ``p[0]``
LAYOUT = 20261202.0
(H_TAG, H_LEN, H_NB, H_M, H_PYTHON, H_GX, H_GY, H_GZ, H_N, H_NJ, H_NE, H_NBALL,
 H_OB, H_OJ, H_OE, H_NL, H_OL, H_OT, H_NA, H_OA, H_NSP, H_NMC, H_OMC, H_OS) = range(24)
HEADER = 24
#: body record: parent (-1: the ground), first joint, joints, first coordinate, coordinates,
#: offset position (3) and rotation (9, row-major) in the parent's frame, mass, mass under
#: gravity (``(1 - gravcomp) m``), centroid (3) and inertia about it (9) in the body frame
W_B = 31
B_PAR, B_J0, B_NJ, B_Q0, B_NQ, B_POS, B_ROT, B_MASS, B_MG, B_COM, B_INER = (
    0, 1, 2, 3, 4, 5, 8, 17, 18, 19, 22)
#: joint record: type, first coordinate, anchor (3) and axis (3) in the body frame, qpos0,
#: damping (3), armature (3), stiffness, spring reference (hinge, slide), first degree of
#: freedom, the spring's reference Euler parameters (ball, 4), whether the actuator forces
#: on the joint are limited and their range (MuJoCo's ``actuatorfrcrange``; hinge, slide)
W_J = 25
J_TYPE, J_Q, J_POS, J_AXIS, J_REF, J_DAMP, J_ARM, J_K, J_SREF, J_DOF, J_SQ, J_AFL, J_AFLO, \
    J_AFHI = (0, 1, 2, 5, 8, 9, 12, 15, 16, 17, 18, 22, 23, 24)
#: closure record: type, body 1, body 2 (-1: the ground), first row, anchor in 1 (3) and in
#: 2 (3), weld axes a_k in 1 (9) and b_k in 2 (9); a coupling (``COUPLE``) has lines 1 and 2
#: (-1: none) in the body slots, its polynomial's coefficients (5) and the lines' references
W_E = 28
E_TYPE, E_B1, E_B2, E_ROW, E_S1, E_S2, E_A, E_B = 0, 1, 2, 3, 4, 7, 10, 19
E_POLY, E_REF1, E_REF2 = 4, 9, 10
#: line record (a fixed tendon ``L(q) = sum c_k q_k``, or a joint's coordinate): terms, first
#: term, stiffness, damping, spring length (lower, upper: a dead band), armature, whether the
#: actuator forces along it are limited and their range, whether it is a spatial tendon; a
#: term is (coordinate, coefficient). A spatial tendon's line (``L_SP`` = 1) has sites instead
#: of terms (``L_NT`` of them from site ``L_T0``), its length the sum of the straight segments
#: between them; its tension (spring, damper, actuators) acts as forces on the sites' bodies
#: (:func:`_tendon_geometry`, :func:`_site_forces`), its couplings' rows come from the sites'
#: motion (:func:`_line_state`), and its armature adds ``a (dL/dq)^T (dL/dq)`` to ``M``
#: (:func:`_path_armature`). A line of two sites (``L_SP`` = :data:`SP_CRANK`,
#: :data:`SP_REF`) is the length of an actuator's transmission, with no spring, damper or
#: armature: MuJoCo's slider-crank (its crank site, then its slider site, whose third axis
#: is the slider's; the rod's length ``L_ROD``) and its site transmission with a reference
#: site (the site, the reference site, then a record of the deepest body that carries both,
#: -1 none: the gear's 6 values at ``L_G``) (:func:`_crank_geometry`,
#: :func:`_refsite_geometry`)
W_L = 18
L_NT, L_T0, L_K, L_DAMP, L_LO, L_HI, L_ARM, L_AFL, L_AFLO, L_AFHI, L_SP, L_ROD = range(12)
L_G = 12
#: the kinds of line with sites (``L_SP``): a spatial tendon's path, a slider-crank, a site
#: with a reference site
SP_PATH, SP_CRANK, SP_REF = 1, 2, 3
#: site record (an element of a spatial tendon's path): body (-1: the ground), position (3)
#: in the body's frame, kind (:data:`SITE_POINT`; or a wrap around a sphere or a cylinder,
#: the geom's centre then at the position), the geom's radius, its axes in the body's frame
#: (row-major 3 x 3, ``world = R_body R x``), whether it has a side point and that point (3)
#: in the geom's frame. A wrap takes two records (:data:`WRAP_SECOND` after the first: the
#: second tangent point's slot) and is followed by a point
W_S = 19
S_BODY, S_POS, S_KIND, S_RAD, S_ROT, S_SIDE, S_SD = 0, 1, 4, 5, 6, 15, 16
SITE_POINT, WRAP_SPHERE, WRAP_CYLINDER, WRAP_SECOND = 0, 1, 2, 3
#: MuJoCo's smallest denominator (``mjMINVAL``): its wrapping's degenerate cases
_MINVAL = 1e-15
#: actuator record: line, gear, gain, bias (3: constant, length, velocity), whether the
#: control is clamped and its range, whether the force is clamped and its range, the control,
#: its activation's coordinate (-1: none) and dynamics (:data:`ACT_FILTER`,
#: :data:`ACT_INTEGRATOR`, :data:`ACT_MUSCLE`); whether it is a muscle (MuJoCo's
#: ``mju_muscleGain``/``mju_muscleBias``: :func:`_muscle_force`) and its parameters: the
#: operating range (2), the peak force, ``lmin``, ``lmax``, ``vmax``, ``fpmax``,
#: ``fvmax``, the length range (2), the activation and deactivation time constants and the
#: smoothing width (MuJoCo's ``mju_muscleDynamics``); the gain's length and velocity
#: coefficients (MuJoCo's affine gain: ``gain + g1 l + g2 l'``); an actuator on a site
#: (MuJoCo's site transmission without a reference site; its line -1): the body (-1: not
#: on a site), the site's position in the body's frame, the gear's force and torque
#: directions in the body's frame (the gear's 6 values turned by the site's rotation);
#: an actuator on a ball or free joint (MuJoCo's joint transmission of those: its line -1,
#: its gear the 6 values at ``A_SG``, force along the world axes and torque in the joint's
#: frame): the joint's first coordinate (-1: none) and whether it is free; the period of a
#: ball servo's setpoint (0: none; MuJoCo 4's rotational servos take the setpoint's
#: representative nearest the actuator's length, ``2 pi |gear|`` apart)
#: (whether the torque's gear is in the joint's parent frame: MuJoCo's jointinparent)
W_A = 45
(A_LINE, A_GEAR, A_GAIN, A_B0, A_B1, A_B2, A_CL, A_CLO, A_CHI, A_FL, A_FLO, A_FHI, A_CTRL,
 A_ACT, A_DYN, A_MUS, A_MR0, A_MR1, A_MF, A_MLMIN, A_MLMAX, A_MVMAX, A_MFPMAX, A_MFVMAX,
 A_LR0, A_LR1, A_TACT, A_TDEACT, A_TSMOOTH, A_G1, A_G2, A_SITE, A_SP, _, _, A_SG,
 _, _, _, _, _, A_JA, A_JFREE, A_WRAP, A_JPARENT) = range(45)
#: an actuator's activation dynamics (MuJoCo's ``dyntype``): none; ``act' = (u - act) /
#: tau`` (``filter``, ``filterexact``); ``act' = u`` (``integrator``); a muscle's. The
#: activation is the velocity of a coordinate of its own whose mass (the armature of a
#: joint without motion) is ``tau``, resp. 1, and whose force is ``u - act``, resp. ``u``,
#: resp. ``act'`` (mass 1)
ACT_NONE, ACT_FILTER, ACT_INTEGRATOR, ACT_MUSCLE = 0, 1, 2, 3
#: mocap record (a body moved by the user, MuJoCo's mocap body: a closure's side ``-2 - k``
#: is mocap ``k``): its world state at the evaluation's time -- origin (3), rotation (9,
#: row-major: its frame's axes in world columns), angular velocity (3), the origin's
#: velocity (3), angular acceleration (3), the origin's acceleration (3); the model's own
#: parameters hold it at rest at its reference pose, a moved system writes it per evaluation
W_MC = 24
MC_X, MC_R, MC_W, MC_V, MC_AL, MC_A = 0, 3, 12, 15, 18, 21
#: joint types (MuJoCo's numbers; a free joint is packed as three slides and a ball)
BALL, SLIDE, HINGE = 1, 2, 3
CONNECT, WELD, COUPLE = 0, 1, 2


def pack(n: int, m: int, gravity, bodies, joints, closures, lines=(), terms=(),
         actuators=(), mocaps=(), sites=()) -> np.ndarray:
    """The parameter array of a model (layout in the module docstring); ``bodies``,
    ``joints``, ``closures``, ``lines``, ``terms``, ``actuators``, ``mocaps`` and ``sites``
    arrays of shape (k, W_B), (k, W_J), (k, W_E), (k, W_L), (k, 2), (k, W_A), (k, W_MC),
    (k, W_S) (the sites last: their number is the rest of the array over ``W_S``)."""
    blocks = [np.asarray(x, dtype=float).reshape(-1, w) if np.size(x) else np.zeros((0, w))
              for x, w in ((bodies, W_B), (joints, W_J), (closures, W_E), (lines, W_L),
                           (terms, 2), (actuators, W_A), (mocaps, W_MC), (sites, W_S))]
    head = np.zeros(HEADER)
    offs = np.cumsum([HEADER] + [b.size for b in blocks])
    head[H_OB], head[H_OJ], head[H_OE], head[H_OL], head[H_OT], head[H_OA] = offs[:6]
    head[H_OMC], head[H_NMC] = offs[6], blocks[6].shape[0]
    head[H_OS] = offs[7]
    head[H_TAG], head[H_NB], head[H_M], head[H_N] = LAYOUT, blocks[0].shape[0], m, n
    head[H_NJ], head[H_NE] = blocks[1].shape[0], blocks[2].shape[0]
    head[H_NL], head[H_NA] = blocks[3].shape[0], blocks[5].shape[0]
    head[H_NBALL] = int(np.count_nonzero(blocks[1][:, J_TYPE] == BALL))
    # the closures that need the kinematics: connect, weld, and couplings of spatial tendons
    spatial_line = blocks[3][:, L_SP] != 0.0
    head[H_NSP] = sum(1 for e in blocks[2] if e[E_TYPE] != COUPLE or any(
        0 <= int(e[k]) < spatial_line.size and spatial_line[int(e[k])] for k in (E_B1, E_B2)))
    head[H_GX:H_GZ + 1] = np.asarray(gravity, dtype=float)
    p = np.concatenate([head] + [b.reshape(-1) for b in blocks])
    p[H_LEN] = p.size
    return p


# =========================================================================== small algebra
@_jit
def _cross(a, b, out):
    x = a[1] * b[2] - a[2] * b[1]
    y = a[2] * b[0] - a[0] * b[2]
    z = a[0] * b[1] - a[1] * b[0]
    out[0], out[1], out[2] = x, y, z


@_jit
def _crm_add(V, s, out, k):
    """``out[k] += V x s`` (motion cross product, angular part first)."""
    w0, w1, w2, o0, o1, o2 = V[0], V[1], V[2], V[3], V[4], V[5]
    s0, s1, s2, t0, t1, t2 = s[0], s[1], s[2], s[3], s[4], s[5]
    out[k, 0] += w1 * s2 - w2 * s1
    out[k, 1] += w2 * s0 - w0 * s2
    out[k, 2] += w0 * s1 - w1 * s0
    out[k, 3] += w1 * t2 - w2 * t1 + o1 * s2 - o2 * s1
    out[k, 4] += w2 * t0 - w0 * t2 + o2 * s0 - o0 * s2
    out[k, 5] += w0 * t1 - w1 * t0 + o0 * s1 - o1 * s0


@_jit
def _inertia_apply(C, k, s, js, out):
    """``out = I s[js]`` of the spatial inertia ``C[k] = (m, h, Ibar)`` at the origin:
    ``n = Ibar w + h x vo``, ``f = m vo - h x w``."""
    w0, w1, w2, o0, o1, o2 = s[js, 0], s[js, 1], s[js, 2], s[js, 3], s[js, 4], s[js, 5]
    m, h0, h1, h2 = C[k, 0], C[k, 1], C[k, 2], C[k, 3]
    out[0] = C[k, 4] * w0 + C[k, 5] * w1 + C[k, 6] * w2 + h1 * o2 - h2 * o1
    out[1] = C[k, 7] * w0 + C[k, 8] * w1 + C[k, 9] * w2 + h2 * o0 - h0 * o2
    out[2] = C[k, 10] * w0 + C[k, 11] * w1 + C[k, 12] * w2 + h0 * o1 - h1 * o0
    out[3] = m * o0 - (h1 * w2 - h2 * w1)
    out[4] = m * o1 - (h2 * w0 - h0 * w2)
    out[5] = m * o2 - (h0 * w1 - h1 * w0)


@_jit
def _body_inertia(p, b, R, X, C, k, Cc):
    """Body ``b``'s spatial inertia at the origin into ``C[k]`` (13 values: ``m``, ``h = m
    c`` (3), ``Ibar = Ic - m [c]x [c]x`` (9), ``Ic = R J R^T``) and its centroid ``c`` into
    ``Cc[k]``."""
    rec = int(p[H_OB]) + W_B * b
    m = p[rec + B_MASS]
    for i in range(3):
        Cc[k, i] = X[b, i] + R[b, i, 0] * p[rec + B_COM] + R[b, i, 1] * p[rec + B_COM + 1] \
            + R[b, i, 2] * p[rec + B_COM + 2]
    cc = Cc[k, 0] * Cc[k, 0] + Cc[k, 1] * Cc[k, 1] + Cc[k, 2] * Cc[k, 2]
    C[k, 0] = m
    for i in range(3):
        C[k, 1 + i] = m * Cc[k, i]
        # row i of R J
        r0 = R[b, i, 0] * p[rec + B_INER] + R[b, i, 1] * p[rec + B_INER + 3] \
            + R[b, i, 2] * p[rec + B_INER + 6]
        r1 = R[b, i, 0] * p[rec + B_INER + 1] + R[b, i, 1] * p[rec + B_INER + 4] \
            + R[b, i, 2] * p[rec + B_INER + 7]
        r2 = R[b, i, 0] * p[rec + B_INER + 2] + R[b, i, 1] * p[rec + B_INER + 5] \
            + R[b, i, 2] * p[rec + B_INER + 8]
        for j in range(3):
            C[k, 4 + 3 * i + j] = (r0 * R[b, j, 0] + r1 * R[b, j, 1] + r2 * R[b, j, 2]
                                   + m * ((cc if i == j else 0.0) - Cc[k, i] * Cc[k, j]))


# =========================================================================== kinematics
@_jit
def _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T):
    """Forward kinematics of the tree at ``(q, v)`` (MuJoCo's ``mj_kinematics``, one body
    after the other, joints in order): body rotations ``R`` (nb, 3, 3) and origins ``X``
    (nb, 3), the world twist ``S`` (n, 6) of every coordinate, the ball joints' ``W``
    (nj, 3, 4), the body velocities ``V`` and bias accelerations ``Ab`` (nb, 6), every
    joint's degree-of-freedom velocities ``U`` (nj, 3) and the balls' ``(p . p') / |p|^2``
    in ``pd`` (nj,). (The velocity terms are computed always, also where only the positions
    are used: one compiled version of the function, whose compilation is the kind's
    largest.) ``T``: scratch, :data:`_T_KIN` values."""
    nb_ = int(p[H_NB])
    ob, oj = int(p[H_OB]), int(p[H_OJ])
    Rc = carve(T, 0, (3, 3))
    Rn = carve(T, 9, (3, 3))
    Rq = carve(T, 18, (3, 3))
    xc = carve(T, 27, (3,))
    P = carve(T, 30, (3,))
    aw = carve(T, 33, (3,))
    t3 = carve(T, 36, (3,))
    Vc = carve(T, 39, (6,))
    vj = carve(T, 45, (6,))
    for b in range(nb_):
        rec = ob + W_B * b
        par = int(p[rec + B_PAR])
        if par < 0:
            for i in range(3):
                xc[i] = p[rec + B_POS + i]
                for j in range(3):
                    Rc[i, j] = p[rec + B_ROT + 3 * i + j]
            for i in range(6):
                Vc[i] = 0.0
                Ab[b, i] = 0.0
        else:
            for i in range(3):
                acc = X[par, i]
                for j in range(3):
                    acc += R[par, i, j] * p[rec + B_POS + j]
                    s = 0.0
                    for l in range(3):
                        s += R[par, i, l] * p[rec + B_ROT + 3 * l + j]
                    Rc[i, j] = s
                xc[i] = acc
            for i in range(6):
                Vc[i] = V[par, i]
                Ab[b, i] = Ab[par, i]
        j0, nj = int(p[rec + B_J0]), int(p[rec + B_NJ])
        for jj in range(j0, j0 + nj):
            jr = oj + W_J * jj
            typ, a = int(p[jr + J_TYPE]), int(p[jr + J_Q])
            for i in range(3):
                P[i] = xc[i] + Rc[i, 0] * p[jr + J_POS] + Rc[i, 1] * p[jr + J_POS + 1] \
                    + Rc[i, 2] * p[jr + J_POS + 2]
                aw[i] = Rc[i, 0] * p[jr + J_AXIS] + Rc[i, 1] * p[jr + J_AXIS + 1] \
                    + Rc[i, 2] * p[jr + J_AXIS + 2]
            if typ == SLIDE:
                d = q[a] - p[jr + J_REF]
                for i in range(3):
                    xc[i] += aw[i] * d
                    S[a, i] = 0.0
                    S[a, 3 + i] = aw[i]
                for i in range(6):
                    vj[i] = S[a, i] * v[a]
                U[jj, 0] = v[a]
            else:
                if typ == HINGE:
                    th = q[a] - p[jr + J_REF]
                    c, s = np.cos(th), np.sin(th)
                    k0, k1, k2 = p[jr + J_AXIS], p[jr + J_AXIS + 1], p[jr + J_AXIS + 2]
                    # Rodrigues: I + s [k]x + (1 - c) [k]x^2
                    oc = 1.0 - c
                    Rq[0, 0] = c + oc * k0 * k0
                    Rq[0, 1] = oc * k0 * k1 - s * k2
                    Rq[0, 2] = oc * k0 * k2 + s * k1
                    Rq[1, 0] = oc * k1 * k0 + s * k2
                    Rq[1, 1] = c + oc * k1 * k1
                    Rq[1, 2] = oc * k1 * k2 - s * k0
                    Rq[2, 0] = oc * k2 * k0 - s * k1
                    Rq[2, 1] = oc * k2 * k1 + s * k0
                    Rq[2, 2] = c + oc * k2 * k2
                else:
                    e0, e1, e2, e3 = q[a], q[a + 1], q[a + 2], q[a + 3]
                    s2 = e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3
                    r2 = 1.0 / s2
                    Rq[0, 0] = (e0 * e0 + e1 * e1 - e2 * e2 - e3 * e3) * r2
                    Rq[0, 1] = 2.0 * (e1 * e2 - e0 * e3) * r2
                    Rq[0, 2] = 2.0 * (e1 * e3 + e0 * e2) * r2
                    Rq[1, 0] = 2.0 * (e1 * e2 + e0 * e3) * r2
                    Rq[1, 1] = (e0 * e0 - e1 * e1 + e2 * e2 - e3 * e3) * r2
                    Rq[1, 2] = 2.0 * (e2 * e3 - e0 * e1) * r2
                    Rq[2, 0] = 2.0 * (e1 * e3 - e0 * e2) * r2
                    Rq[2, 1] = 2.0 * (e2 * e3 + e0 * e1) * r2
                    Rq[2, 2] = (e0 * e0 - e1 * e1 - e2 * e2 + e3 * e3) * r2
                    # W = 2 G(p) / |p|^2, body-frame angular velocity u = W p'
                    tw = 2.0 * r2
                    Wb[jj, 0, 0], Wb[jj, 0, 1], Wb[jj, 0, 2], Wb[jj, 0, 3] = (
                        -e1 * tw, e0 * tw, e3 * tw, -e2 * tw)
                    Wb[jj, 1, 0], Wb[jj, 1, 1], Wb[jj, 1, 2], Wb[jj, 1, 3] = (
                        -e2 * tw, -e3 * tw, e0 * tw, e1 * tw)
                    Wb[jj, 2, 0], Wb[jj, 2, 1], Wb[jj, 2, 2], Wb[jj, 2, 3] = (
                        -e3 * tw, e2 * tw, -e1 * tw, e0 * tw)
                for i in range(3):
                    for j in range(3):
                        Rn[i, j] = Rc[i, 0] * Rq[0, j] + Rc[i, 1] * Rq[1, j] + Rc[i, 2] * Rq[2, j]
                for i in range(3):
                    for j in range(3):
                        Rc[i, j] = Rn[i, j]
                for i in range(3):
                    xc[i] = P[i] - (Rc[i, 0] * p[jr + J_POS] + Rc[i, 1] * p[jr + J_POS + 1]
                                    + Rc[i, 2] * p[jr + J_POS + 2])
                if typ == HINGE:
                    _cross(P, aw, t3)
                    for i in range(3):
                        S[a, i] = aw[i]
                        S[a, 3 + i] = t3[i]
                    for i in range(6):
                        vj[i] = S[a, i] * v[a]
                    U[jj, 0] = v[a]
                else:
                    for c4 in range(4):
                        for i in range(6):
                            S[a + c4, i] = 0.0
                    for k in range(3):
                        for i in range(3):
                            aw[i] = Rc[i, k]
                        _cross(P, aw, t3)
                        for c4 in range(4):
                            wk = Wb[jj, k, c4]
                            for i in range(3):
                                S[a + c4, i] += aw[i] * wk
                                S[a + c4, 3 + i] += t3[i] * wk
                    pp = 0.0
                    for c4 in range(4):
                        pp += q[a + c4] * v[a + c4]
                    pd[jj] = pp * r2
                    for k in range(3):
                        U[jj, k] = (Wb[jj, k, 0] * v[a] + Wb[jj, k, 1] * v[a + 1]
                                    + Wb[jj, k, 2] * v[a + 2] + Wb[jj, k, 3] * v[a + 3])
                    for i in range(6):
                        vj[i] = (S[a, i] * v[a] + S[a + 1, i] * v[a + 1]
                                 + S[a + 2, i] * v[a + 2] + S[a + 3, i] * v[a + 3])
                    # S W' p' = -2 (p . p') / |p|^2 S u
                    for i in range(6):
                        Ab[b, i] -= 2.0 * pd[jj] * vj[i]
            _crm_add(Vc, vj, Ab, b)
            for i in range(6):
                Vc[i] += vj[i]
        for i in range(3):
            X[b, i] = xc[i]
            for j in range(3):
                R[b, i, j] = Rc[i, j]
        for i in range(6):
            V[b, i] = Vc[i]


#: scratch values of :func:`_kin`, and where :func:`_evaluate`'s own start after them
_T_KIN = 51
_T_EVAL = 64


@_jit
def _work_size(p):
    """The length of the buffer :func:`_work` carves: the kinematics (rotations,
    origins, twists, velocities, bias accelerations, the balls' ``W``, the joints'
    velocities and ``pd``), the body inertias and their centroids, and the scratch ``T``
    the functions share one after the other (at most :func:`_force_into`'s, or
    :func:`_evaluate`'s with :func:`_kin`'s)."""
    nb_, n, nj = int(p[H_NB]), int(p[H_N]), int(p[H_NJ])
    return 43 * nb_ + 6 * n + 16 * nj + _scratch_size(p)


@_jit
def _scratch_size(p):
    """The length of :func:`_work`'s scratch ``T``: :func:`_force_into`'s ``6 nb + 15 + n``
    and the actuators' count plus twice the lines' (or :func:`_evaluate`'s 143 from
    :data:`_T_EVAL`, whichever is larger), then the spatial tendons' geometry
    (:func:`_tendon_views`)."""
    return _path_offset(p) + 5 * _n_sites(p) + 36


@_jit
def _path_offset(p):
    """Where the points of one spatial tendon's path start in :func:`_work`'s scratch
    (:func:`_path_points`: after :func:`_tendon_views`' geometry): 5 values per point, then
    36 for a wrap's computation (the next site, the tangent points, the previous point and
    :func:`_wrap`'s 24)."""
    return _site_scratch(p) + 9 * _n_sites(p) + (int(p[H_N]) + 4) * int(p[H_NL])


@_jit
def _site_scratch(p):
    """Where the spatial tendons' geometry starts in :func:`_work`'s scratch ``T``
    (:func:`_tendon_geometry`: after everything else that uses it): per site 9 values, then
    per line 3."""
    return 160 + 10 * int(p[H_NB]) + int(p[H_N]) + int(p[H_NA]) + 2 * int(p[H_NL])


@_inline
def _tendon_views(p, T):
    """The spatial tendons' geometry in the scratch ``T`` (:func:`_tendon_geometry`): per
    site its position relative to its body's tree root, its force and its torque per unit
    tension (ns, 9); per line its length, rate and passive tension (nl, 3), and for a tendon with
    an armature its ``dL/dq`` and bias ``beta`` (``L'' = (dL/dq) a + beta``; nl, n + 1).
    (Inlined: it returns views, which a function compiled without reference counting may
    not hand to one compiled with it, the ``actuation`` entry point.)"""
    o, ns, nl = _site_scratch(p), _n_sites(p), int(p[H_NL])
    return (carve(T, o, (ns, 9)), carve(T, o + 9 * ns, (nl, 3)),
            carve(T, o + 9 * ns + 3 * nl, (nl, int(p[H_N]) + 1)))


@_jit
def _n_sites(p):
    """The number of sites of the spatial tendons (the last block of ``p``)."""
    return (int(p[H_LEN]) - int(p[H_OS])) // W_S


@_inline
def _work(p, w):
    """The arrays of :func:`_kin` and the body inertias, as views of ``w`` (at least
    :func:`_work_size` long): ``R, X, S, V, Ab, Wb, U, pd, C, Cc`` and the scratch ``T``
    (the balls' ``Wb``, ``U``, ``pd`` zeroed: :func:`_kin` writes only the balls')."""
    nb_, n, nj = int(p[H_NB]), int(p[H_N]), int(p[H_NJ])
    R = carve(w, 0, (nb_, 3, 3))
    o = 9 * nb_
    X = carve(w, o, (nb_, 3))
    o += 3 * nb_
    S = carve(w, o, (n, 6))
    o += 6 * n
    V = carve(w, o, (nb_, 6))
    o += 6 * nb_
    Ab = carve(w, o, (nb_, 6))
    o += 6 * nb_
    z = carve(w, o, (16 * nj,))
    for i in range(16 * nj):
        z[i] = 0.0
    Wb = carve(w, o, (nj, 3, 4))
    o += 12 * nj
    U = carve(w, o, (nj, 3))
    o += 3 * nj
    pd = carve(w, o, (nj,))
    o += nj
    C = carve(w, o, (nb_, 13))
    o += 13 * nb_
    Cc = carve(w, o, (nb_, 3))
    o += 3 * nb_
    T = carve(w, o, (_scratch_size(p),))
    return R, X, S, V, Ab, Wb, U, pd, C, Cc, T


@_unit("none(f8v, f8v, f8v, f8[:, :, ::1], f8m, f8m, f8m)")
def kinematics(p, q, v, R, X, S, V):
    """Body rotations ``R`` (nb, 3, 3), origins ``X`` (nb, 3), coordinate twists ``S``
    (n, 6, world, at the origin, angular first) and body velocities ``V`` (nb, 6) at
    ``(q, v)`` (for Python: the tests, the model's point functions)."""
    _kinematics(p, q, v, R, X, S, V, np.empty(_work_size(p)))


@_jit
def _kinematics(p, q, v, R, X, S, V, w):
    """:func:`kinematics` with the buffer ``w``."""
    _, _, _, _, Ab, Wb, U, pd, _, _, T = _work(p, w)
    _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T)


#: the columns of a contact point's record in :func:`contact_points`'s ``geo``. A point
#: against a world plane (kind 0): its link, the sphere's centre in the link's frame (3),
#: its radius, the plane's unit normal (3), a point of the plane (3) and its two unit
#: tangents (3 each), all in the world; a cylinder's rim: its centre, its radius and the
#: cylinder's unit axis in the link's frame (3, zero for a sphere). A pair of spheres or
#: capsules (kind 1): the second geom's link, the first end of its axis segment (a sphere:
#: its centre) and its radius in the first three fields, the segment's other end in
#: ``SS_B`` (a sphere: its centre again), the first geom's link (-1: the world), radius
#: and axis ends (its link's frame) in ``SS_LINK1``, ``SS_R1``, ``SS_C1`` and ``SS_B1``.
PP_LINK, PP_S, PP_R, PP_N, PP_P0, PP_T1, PP_T2, PP_A, PP_KIND = 0, 1, 4, 5, 8, 11, 14, 17, 20
SS_LINK1, SS_R1, SS_C1, SS_B, SS_B1 = PP_N, PP_N + 1, PP_P0, PP_T1, PP_T2
#: a sphere against a box (kind 2): the box's link, centre (its link's frame) and radius 0
#: in the first three fields, the sphere's as a pair of spheres' (``SS_LINK1``, ``SS_R1``,
#: ``SS_C1``), the box's half sizes and its x and y axes (its link's frame) in ``SB_H``,
#: ``SB_X``, ``SB_Y``
SB_H, SB_X, SB_Y = PP_T1, PP_T2, PP_A
W_PP = 21
#: a rim whose ``|n - (n . a) a|`` is at most this lies flat (``tree_geometry.FACE_TOL``)
PP_FLAT = 1e-6
#: the tangents of a pair of spheres or capsules with normal ``n``: ``t1 =
#: n x e / |n x e|``, ``t2 = n x t1`` with ``e = SS_REF0``, or ``SS_REF1`` where ``|n .
#: SS_REF0| > SS_REF_COS`` (``n`` within 26 degrees of it). Why fixed reference directions
#: off the axes: the tangents must turn continuously with ``n`` along a run (a sliding
#: point's direction is kept in them), and no rule is continuous on the whole sphere of
#: normals; with the world axis least aligned with ``n`` the switch lay on the axis
#: directions themselves (``n = (0, 0, -1)`` with ``n_x, n_y`` at rounding level, a ball on
#: the bottom of a cup of capsules: the tangents flipped between nearby states and the
#: slip velocity's convective term was off by 3.6e9 in the check). Here the switch is
#: the cone ``|n . SS_REF0| = 0.9`` about a direction that no axis, face diagonal or body
#: diagonal lies near (their ``|n . SS_REF0|``: 0.02 to 0.82, 0.905 and 0.947); the two
#: references are 60 degrees apart, so ``|n x e| >= 0.43``.
SS_REF0 = (0.36, 0.48, 0.8)
SS_REF1 = (0.8, -0.36, 0.48)
SS_REF_COS = 0.9


@_unit("none(f8v, f8v, f8v, f8m, f8v, f8m, f8v, f8m, f8v, f8v, f8v)")
def contact_points(p, q, v, geo, gap, G, gam, T, u, ugam, tilt):
    """:func:`_points` with every output (its docstring)."""
    _points(p, q, v, geo, gap, G, gam, T, u, ugam, tilt, True)


@_unit("none(f8v, f8v, f8m, f8v)")
def contact_gaps(p, q, geo, gap):
    """The gaps of :func:`contact_points` alone at ``q``: what the run's watches read at
    every step and at the steps' interior points (hundreds of points in a model with
    many pairs; the rows, ``gamma`` and slips are computed only for a phase's rows)."""
    n = int(p[H_N])
    e1, e2 = np.empty(0), np.empty((0, n))
    _points(p, q, np.zeros(n), geo, gap, e2, e1, e2, e1, e1, e1, False)


@_unit_inline
def _points(p, q, v, geo, gap, G, gam, T, u, ugam, tilt, full):
    """The contact points of spheres (radius ``r``; 0: a box's corner) and cylinders' rims
    of moving links against world planes, and of pairs of spheres and capsules, one forward
    kinematics
    at ``(q, v)`` for all the points of ``geo`` (records of :data:`W_PP` values): the gaps,
    their Jacobian ``G`` (m, n), ``gamma`` with ``gap'' = G a - gamma``, the slip velocities
    ``u`` (2 m: the two tangents of point i in ``u[2 i], u[2 i + 1]``) of the second geom's
    material point at the contact point ``P`` relative to the first's, their matrix ``T``
    (2 m, n) with ``u = T v``, their convective terms ``ugam`` with ``u' = T a - ugam``, and
    ``tilt`` (m): a rim's ``|n - (n . a) a|``, 0 for two parallel capsules (1 for the
    others).

    With a link's twist ``(w, U)`` and bias acceleration ``(al, A)`` (at ``q'' = 0``, about
    the world origin), a centre ``c`` is a material point: ``c' = U + w x c``, ``c''_b = A +
    al x c + w x c'``. A material point's velocity at the (moving) contact point ``P`` is
    ``U + w x P``; its rate ``U' + w' x P + w x P'``, whose bias part is ``A + al x P + w x
    P'``.

    * a sphere on a plane: gap ``n . (c - p0) - r``, ``P = c - r n`` (``P' = c'``: it moves
      with the centre while the material point under it changes), ``gamma = -n . c''_b``.
    * a rim (axis ``a``, ``a' = w x a``): ``z = n - (n . a) a``, ``s = |z|``, ``e = z / s``,
      lowest point ``P = c - r e``, gap ``n . (c - p0) - r s``. Its rate ``n . c' - r e . z'``
      equals ``n`` times the velocity of the material point at ``P`` (``e`` is orthogonal to
      ``a``): ``G`` is that point's row. Differentiating once more at ``q'' = 0``: ``gamma =
      -n . c''_b + r (e' . z' + e . z''_b)`` with ``z' = -(n . a') a - (n . a) a'``,
      ``z''_b = -(n . a''_b) a - 2 (n . a') a' - (n . a) a''_b``, ``a''_b = al x a + w x
      a'``, ``e' = (z' - e (e . z')) / s``; ``P' = c' - r e'``. A rim lying flat (``s <=
      PP_FLAT``) has no lowest point: any point of it serves (``e`` from ``a`` and the world
      axis least aligned with it, held fixed; the caller refuses its derivatives where it
      touches: a face contact).
    * two spheres (centres ``c1``, ``c2``): ``d = c2 - c1``, ``L = |d|``, ``n = d / L``, gap
      ``L - r1 - r2``, ``gamma = -((|d'|^2 - (n . d')^2) / L + n . d''_b)``, ``n' = (d' - n
      (n . d')) / L``; ``P = c2 - r2 n``, ``P' = c2' - r2 n'``; tangents ``t1 = n x e / |n x
      e|`` (``e`` the fixed reference :data:`SS_REF0`, or :data:`SS_REF1` where ``|n .
      SS_REF0| > SS_REF_COS``), ``t2 = n x t1``, which turn with ``n``: ``t1' = (n' x e -
      t1 (t1 . n' x e)) / |n x e|``, ``t2' = n' x t1 + n x t1'``, and ``ugam_j = -(t_j' .
      u_rel + t_j . u_rel'_b)``.
    * a sphere (centre ``c1``) and a capsule (axis from ``a`` to ``b``, ``s = b - a``): as
      two spheres, with ``c2 = a + t s`` the point of the axis closest to ``c1``, ``t =
      (c1 - a) . s / |s|^2`` clamped to ``[0, 1]``. ``c2`` moves along the axis: ``c2' =
      y + t' s`` with ``y`` the velocity of link 2's material point at ``c2`` and ``t' =
      ((c1' - a') . s + (c1 - a) . s') / |s|^2`` inside the axis (0 at a clamped end), and
      ``c2''_b = z + 2 t' s'`` (``z`` that material point's bias acceleration; the ``t'' s``
      term has no normal part: inside, ``n . s = 0``). The gap's rate is ``n`` times the
      material points' relative velocity (``n . s t' = 0`` either way), so ``G``'s rows
      are those of the two material points at ``c1`` and ``c2``. The gap is continuously
      differentiable where ``t`` reaches an end; ``gamma`` jumps there by ``t'``'s terms
      (an acceleration-level kink, as a rim's). A sphere is a capsule of zero length (``a
      = b``: ``t = 0``).
    * two capsules: the closest points ``o = a1 + w e1`` and ``c2 = a2 + t e2`` of the two
      axes (:func:`_closest`), as two spheres at them. Inside both axes the conditions
      ``d . e1 = 0``, ``d . e2 = 0`` differentiated give ``-|e1|^2 w' + (e1 . e2) t' = -g1``,
      ``-(e1 . e2) w' + |e2|^2 t' = -g2`` with ``g_j = (y2 - y1) . e_j + d . e_j'`` (``y``
      the material points' velocities); inside one axis only, its own condition; at two
      ends, no rates. ``d' = y2 + t' e2 - y1 - w' e1`` and ``n . d''_b = n . (z2 - z1) + 2
      t' n . e2' - 2 w' n . e1'``. Parallel axes (their angle's sine at most
      :data:`PP_FLAT`) have no single pair of closest points: ``tilt`` 0 (the caller
      refuses their derivatives where they touch: a line contact).
    * a sphere (centre ``o``) and a box (centre ``B``, axes ``a_j``, half sizes ``h_j``): as
      two spheres (the box's radius 0) with ``c`` the box's point closest to ``o``, ``B +
      sum_j s_j a_j`` with ``s_j`` the centre's coordinate ``a_j . (o - B)`` clamped to
      ``[-h_j, h_j]``. A free coordinate (inside its range) moves at ``a_j . (o' - w)``
      (``w`` the velocity of the box's material point at ``o``), so ``c' = y + R s'``
      (``y`` the box's material point's velocity at ``c``) and ``n . c''_b = n . (z + 2
      omega x R s')`` (``n`` is orthogonal to the free axes). A centre inside the box takes
      its nearest face's point and the gap ``-|c - o| - r`` (``n`` reversed; ``gamma``'s
      first term changes sign).
    * a segment ``x(s) = C + s e``, ``s`` in ``[0, 1]`` (a capsule's axis, or a sphere's
      centre with ``e = 0``), and a solid cylinder (centre ``B``, unit axis ``a``, radius
      ``rc``, half height ``hc``): ``x`` the segment's point nearest the cylinder
      (:func:`_cyl_param`: the signed distance ``phi`` is convex along the segment) and
      ``c`` the cylinder's point closest to ``x`` (:func:`_cyl_near`), ``n`` from ``x``
      towards ``c``, gap ``phi - r``. With ``w = x' - (U + omega x x)`` (``x``'s velocity
      relative to the cylinder's material point there), ``H`` the distance's Hessian and
      ``C`` the closest point's Jacobian (:func:`_cyl_hess`): ``phi_t = -n . w``, the
      bias part of ``phi_tt`` is ``-n . (x''_b - z - 2 omega x w) + w . H w`` (``z`` the
      cylinder's material point's bias acceleration at ``x``), and inside the segment
      ``s' = -phi_st / phi_ss`` with ``phi_ss = e . H e``, ``phi_st = e . H w - n . (e' -
      omega x e)``, so ``gamma = -(bias of phi_tt + phi_st s')`` (at an end, ``s' = 0``).
      The normal turns at ``n' = omega x n - H (w + s' e)``, the contact point ``c`` moves
      at the cylinder's velocity there plus ``C (w + s' e)``. A segment parallel to a face
      it lies over, or to the axis beside the side, has no single nearest point: ``tilt``
      0 (a line contact).

    The columns of ``G`` and ``T`` are those of the links' coordinates and their ancestors'
    (zero elsewhere; a common ancestor's are the difference of the two)."""
    n = int(p[H_N])
    m = geo.shape[0]
    w = np.empty(_work_size(p))
    R, X, S, V, Ab, Wb, U, pd, _, _, Tw = _work(p, w)
    _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, Tw)
    if full:
        for r in range(2 * m):
            for c in range(n):
                T[r, c] = 0.0
    for i in range(m):
        if full:
            for c in range(n):
                G[i, c] = 0.0
        if geo[i, PP_KIND] == 1.0:
            _sphere_pair(p, R, X, S, V, Ab, geo, i, gap, G, gam, T, u, ugam, tilt, full)
            continue
        if geo[i, PP_KIND] == 2.0:
            _sphere_box(p, R, X, S, V, Ab, geo, i, gap, G, gam, T, u, ugam, full)
            if full:
                tilt[i] = 1.0
            continue
        if geo[i, PP_KIND] == 3.0:
            _seg_cylinder(p, R, X, S, V, Ab, geo, i, gap, G, gam, T, u, ugam, tilt, full)
            continue
        k = int(geo[i, PP_LINK])
        rad = geo[i, PP_R]
        n0, n1, n2 = geo[i, PP_N], geo[i, PP_N + 1], geo[i, PP_N + 2]
        c0, c1, c2, v0, v1, v2, a0, a1, a2 = _moving_point(R, X, V, Ab, k, geo, i, PP_S)
        h = n0 * (c0 - geo[i, PP_P0]) + n1 * (c1 - geo[i, PP_P0 + 1]) + n2 * (c2 - geo[i, PP_P0 + 2])
        w0, w1, w2 = V[k, 0], V[k, 1], V[k, 2]
        l0, l1, l2 = Ab[k, 0], Ab[k, 1], Ab[k, 2]
        g = -(n0 * a0 + n1 * a1 + n2 * a2)
        x0, x1, x2 = geo[i, PP_A], geo[i, PP_A + 1], geo[i, PP_A + 2]
        if x0 == 0.0 and x1 == 0.0 and x2 == 0.0:               # a sphere
            gap[i] = h - rad
            if not full:
                continue
            tilt[i] = 1.0
            e0, e1, e2 = n0, n1, n2
            d0 = d1 = d2 = 0.0                                  # e'
            rim = False
        else:                                                   # a rim
            A0, A1, A2 = _axis(R, k, geo, i, PP_A)
            na = n0 * A0 + n1 * A1 + n2 * A2
            z0, z1, z2 = n0 - na * A0, n1 - na * A1, n2 - na * A2
            sz = np.sqrt(z0 * z0 + z1 * z1 + z2 * z2)
            gap[i] = h - rad * sz
            if not full:
                continue
            tilt[i] = sz
            rim = True
            if sz <= PP_FLAT:
                # any rim point: e = a x (the world axis least aligned with a), fixed
                e0, e1, e2 = _across(A0, A1, A2)
                d0 = d1 = d2 = 0.0
            else:
                e0, e1, e2 = z0 / sz, z1 / sz, z2 / sz
                ad0, ad1, ad2 = w1 * A2 - w2 * A1, w2 * A0 - w0 * A2, w0 * A1 - w1 * A0
                add0 = l1 * A2 - l2 * A1 + (w1 * ad2 - w2 * ad1)
                add1 = l2 * A0 - l0 * A2 + (w2 * ad0 - w0 * ad2)
                add2 = l0 * A1 - l1 * A0 + (w0 * ad1 - w1 * ad0)
                nad = n0 * ad0 + n1 * ad1 + n2 * ad2
                nadd = n0 * add0 + n1 * add1 + n2 * add2
                zd0 = -nad * A0 - na * ad0
                zd1 = -nad * A1 - na * ad1
                zd2 = -nad * A2 - na * ad2
                zdd0 = -nadd * A0 - 2.0 * nad * ad0 - na * add0
                zdd1 = -nadd * A1 - 2.0 * nad * ad1 - na * add1
                zdd2 = -nadd * A2 - 2.0 * nad * ad2 - na * add2
                ez = e0 * zd0 + e1 * zd1 + e2 * zd2
                d0, d1, d2 = (zd0 - e0 * ez) / sz, (zd1 - e1 * ez) / sz, (zd2 - e2 * ez) / sz
                g += rad * (d0 * zd0 + d1 * zd1 + d2 * zd2 + e0 * zdd0 + e1 * zdd1 + e2 * zdd2)
        gam[i] = g
        p0, p1, p2 = c0 - rad * e0, c1 - rad * e1, c2 - rad * e2        # the contact point
        u0, u1, u2, b0, b1, b2 = _at_point(V, Ab, k, p0, p1, p2, v0 - rad * d0,
                                           v1 - rad * d1, v2 - rad * d2)
        for j in range(2):
            o = PP_T1 + 3 * j
            t0, t1, t2 = geo[i, o], geo[i, o + 1], geo[i, o + 2]
            u[2 * i + j] = t0 * u0 + t1 * u1 + t2 * u2
            ugam[2 * i + j] = -(t0 * b0 + t1 * b1 + t2 * b2)
        # G: the row of the material point at the centre (a sphere: the same as at P, the
        # rounding of the kernel's first version) or at P (a rim)
        f0, f1, f2 = (p0, p1, p2) if rim else (c0, c1, c2)
        _contact_rows(p, S, k, 1.0, i, n0, n1, n2, f0, f1, f2, p0, p1, p2,
                      geo[i, PP_T1], geo[i, PP_T1 + 1], geo[i, PP_T1 + 2],
                      geo[i, PP_T2], geo[i, PP_T2 + 1], geo[i, PP_T2 + 2], G, T)


@_inline
def _moving_point(R, X, V, Ab, k, geo, i, o):
    """The world position, velocity and bias acceleration of link ``k``'s material point
    ``geo[i, o:o + 3]`` (its frame; ``k < 0``: a fixed point of the world)."""
    s0, s1, s2 = geo[i, o], geo[i, o + 1], geo[i, o + 2]
    if k < 0:
        return s0, s1, s2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    c0 = X[k, 0] + R[k, 0, 0] * s0 + R[k, 0, 1] * s1 + R[k, 0, 2] * s2
    c1 = X[k, 1] + R[k, 1, 0] * s0 + R[k, 1, 1] * s1 + R[k, 1, 2] * s2
    c2 = X[k, 2] + R[k, 2, 0] * s0 + R[k, 2, 1] * s1 + R[k, 2, 2] * s2
    # (a material point: its velocity is the link's at c, and it moves with it)
    v0, v1, v2, _, _, _ = _at_point(V, Ab, k, c0, c1, c2, 0.0, 0.0, 0.0)
    _, _, _, a0, a1, a2 = _at_point(V, Ab, k, c0, c1, c2, v0, v1, v2)
    return c0, c1, c2, v0, v1, v2, a0, a1, a2


@_inline
def _at_point(V, Ab, k, p0, p1, p2, pv0, pv1, pv2):
    """Link ``k``'s material point at the world point ``P`` moving with ``P'``: its velocity
    ``U + w x P`` and the bias part ``A + al x P + w x P'`` of its rate (zeros for the
    world, ``k < 0``)."""
    if k < 0:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    w0, w1, w2 = V[k, 0], V[k, 1], V[k, 2]
    l0, l1, l2 = Ab[k, 0], Ab[k, 1], Ab[k, 2]
    u0 = V[k, 3] + w1 * p2 - w2 * p1
    u1 = V[k, 4] + w2 * p0 - w0 * p2
    u2 = V[k, 5] + w0 * p1 - w1 * p0
    b0 = Ab[k, 3] + l1 * p2 - l2 * p1 + (w1 * pv2 - w2 * pv1)
    b1 = Ab[k, 4] + l2 * p0 - l0 * p2 + (w2 * pv0 - w0 * pv2)
    b2 = Ab[k, 5] + l0 * p1 - l1 * p0 + (w0 * pv1 - w1 * pv0)
    return u0, u1, u2, b0, b1, b2


@_inline
def _across(a0, a1, a2):
    """A unit vector orthogonal to the unit ``a``: ``a x e / |a x e|``, ``e`` the world axis
    least aligned with ``a`` (the first of equals, as numpy's ``argmin``)."""
    b0, b1, b2 = abs(a0), abs(a1), abs(a2)
    if b0 <= b1 and b0 <= b2:
        z0, z1, z2 = 0.0, a2, -a1
    elif b1 <= b2:
        z0, z1, z2 = -a2, 0.0, a0
    else:
        z0, z1, z2 = a1, -a0, 0.0
    s = np.sqrt(z0 * z0 + z1 * z1 + z2 * z2)
    return z0 / s, z1 / s, z2 / s


@_inline
def _contact_rows(p, S, k, sgn, i, n0, n1, n2, f0, f1, f2, p0, p1, p2, ta0, ta1, ta2,
                tb0, tb1, tb2, G, T):
    """Add ``sgn`` times link ``k``'s rows to point ``i``'s: ``n`` times the velocity of its
    material point at ``f`` to ``G[i]``, the tangents ``ta``, ``tb`` times that at ``P`` to
    ``T[2 i]``, ``T[2 i + 1]``: over the coordinates of ``k`` and its ancestors (none for
    the world, ``k < 0``)."""
    ob = int(p[H_OB])
    b = k
    while b >= 0:
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        for c in range(q0, q0 + nq):
            e0, e1, e2 = S[c, 0], S[c, 1], S[c, 2]
            G[i, c] += sgn * (n0 * (S[c, 3] + e1 * f2 - e2 * f1)
                              + n1 * (S[c, 4] + e2 * f0 - e0 * f2)
                              + n2 * (S[c, 5] + e0 * f1 - e1 * f0))
            j0 = S[c, 3] + e1 * p2 - e2 * p1
            j1 = S[c, 4] + e2 * p0 - e0 * p2
            j2 = S[c, 5] + e0 * p1 - e1 * p0
            T[2 * i, c] += sgn * (ta0 * j0 + ta1 * j1 + ta2 * j2)
            T[2 * i + 1, c] += sgn * (tb0 * j0 + tb1 * j1 + tb2 * j2)
        b = int(p[rec + B_PAR])


@_inline
def _closest(a, b, c, e, f):
    """The parameters ``(s, t)`` in ``[0, 1]`` of the closest points ``a1 + s e1``, ``a2 + t
    e2`` of two segments, with ``a = e1 . e1``, ``b = e1 . e2``, ``c = e1 . r``, ``e = e2 .
    e2``, ``f = e2 . r``, ``r = a1 - a2`` (Ericson, Real-Time Collision Detection, 5.1.9; a
    segment of zero length is its point), and whether the segments are parallel (their
    angle's sine at most :data:`PP_FLAT`: the closest points are then not one pair, and
    ``s = 0`` is taken)."""
    if a <= 0.0 and e <= 0.0:
        return 0.0, 0.0, False
    if a <= 0.0:
        return 0.0, min(max(f / e, 0.0), 1.0), False
    if e <= 0.0:
        return min(max(-c / a, 0.0), 1.0), 0.0, False
    den = a * e - b * b
    par = den <= PP_FLAT * PP_FLAT * a * e
    s = 0.0 if par else min(max((b * f - c * e) / den, 0.0), 1.0)
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = min(max(-c / a, 0.0), 1.0)
    elif t > 1.0:
        t = 1.0
        s = min(max((b - c) / a, 0.0), 1.0)
    return s, t, par


@_jit
def _sphere_pair(p, R, X, S, V, Ab, geo, i, gap, G, gam, T, u, ugam, tilt, full):
    """Record ``i`` of :func:`contact_points`, a pair of spheres or capsules (its
    docstring); ``tilt[i]`` 0 where two capsules are parallel (else 1); not ``full``: the
    gap alone."""
    k2, k1 = int(geo[i, PP_LINK]), int(geo[i, SS_LINK1])
    r2, r1 = geo[i, PP_R], geo[i, SS_R1]
    # each geom's axis ends (a sphere: its centre twice): positions, material velocities,
    # bias accelerations
    A0, A1, A2, va0, va1, va2, aa0, aa1, aa2 = _moving_point(R, X, V, Ab, k2, geo, i, PP_S)
    B0, B1, B2, vb0, vb1, vb2, ab0, ab1, ab2 = _moving_point(R, X, V, Ab, k2, geo, i, SS_B)
    C0, C1, C2, vc0, vc1, vc2, ac0, ac1, ac2 = _moving_point(R, X, V, Ab, k1, geo, i, SS_C1)
    D0, D1, D2, vd0, vd1, vd2, ad0, ad1, ad2 = _moving_point(R, X, V, Ab, k1, geo, i, SS_B1)
    s0, s1, s2 = B0 - A0, B1 - A1, B2 - A2                     # e2 and its rate
    sd0, sd1, sd2 = vb0 - va0, vb1 - va1, vb2 - va2
    h0, h1, h2 = D0 - C0, D1 - C1, D2 - C2                     # e1 and its rate
    hd0, hd1, hd2 = vd0 - vc0, vd1 - vc1, vd2 - vc2
    ee = s0 * s0 + s1 * s1 + s2 * s2
    aa = h0 * h0 + h1 * h1 + h2 * h2
    rr0, rr1, rr2 = C0 - A0, C1 - A1, C2 - A2
    w, t, par = _closest(aa, h0 * s0 + h1 * s1 + h2 * s2, h0 * rr0 + h1 * rr1 + h2 * rr2, ee,
                         s0 * rr0 + s1 * rr1 + s2 * rr2)
    if not full:                   # (the same operations as below: the same gap)
        c0, c1, c2 = A0 + t * s0, A1 + t * s1, A2 + t * s2
        o0, o1, o2 = C0 + w * h0, C1 + w * h1, C2 + w * h2
        d0, d1, d2 = c0 - o0, c1 - o1, c2 - o2
        gap[i] = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2) - r1 - r2
        return
    tilt[i] = 0.0 if par else 1.0
    # the closest points and their material points' velocities and bias accelerations
    # (affine in the point): c2 = A + t e2 of link 2, o = C + w e1 of link 1
    c0, c1, c2 = A0 + t * s0, A1 + t * s1, A2 + t * s2
    v0, v1, v2 = va0 + t * sd0, va1 + t * sd1, va2 + t * sd2
    a0, a1, a2 = aa0 + t * (ab0 - aa0), aa1 + t * (ab1 - aa1), aa2 + t * (ab2 - aa2)
    o0, o1, o2 = C0 + w * h0, C1 + w * h1, C2 + w * h2
    y0, y1, y2 = vc0 + w * hd0, vc1 + w * hd1, vc2 + w * hd2
    z0, z1, z2 = ac0 + w * (ad0 - ac0), ac1 + w * (ad1 - ac1), ac2 + w * (ad2 - ac2)
    d0, d1, d2 = c0 - o0, c1 - o1, c2 - o2
    L = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    n0, n1, n2 = d0 / L, d1 / L, d2 / L
    # the parameters' rates where they are inside their segments (0 at an end): from the
    # closest points' conditions d . e1 = 0, d . e2 = 0 differentiated (g1, g2 below)
    wr0, wr1, wr2 = v0 - y0, v1 - y1, v2 - y2
    in1 = aa > 0.0 and 0.0 < w < 1.0
    in2 = ee > 0.0 and 0.0 < t < 1.0
    g1 = wr0 * h0 + wr1 * h1 + wr2 * h2 + d0 * hd0 + d1 * hd1 + d2 * hd2
    g2 = wr0 * s0 + wr1 * s1 + wr2 * s2 + d0 * sd0 + d1 * sd1 + d2 * sd2
    wd = 0.0
    td = 0.0                                                    # w', t'
    if in1 and in2 and not par:
        b = h0 * s0 + h1 * s1 + h2 * s2
        det = b * b - aa * ee
        wd = (b * g2 - ee * g1) / det
        td = (aa * g2 - b * g1) / det
    elif in1:
        wd = g1 / aa
    elif in2:
        td = -g2 / ee
    cv0, cv1, cv2 = v0 + td * s0, v1 + td * s1, v2 + td * s2   # c2'
    dd0 = cv0 - y0 - wd * h0                                    # d'
    dd1 = cv1 - y1 - wd * h1
    dd2 = cv2 - y2 - wd * h2
    ndd = n0 * dd0 + n1 * dd1 + n2 * dd2
    gap[i] = L - r1 - r2
    gam[i] = -((dd0 * dd0 + dd1 * dd1 + dd2 * dd2 - ndd * ndd) / L
               + n0 * (a0 - z0) + n1 * (a1 - z1) + n2 * (a2 - z2)
               + 2.0 * td * (n0 * sd0 + n1 * sd1 + n2 * sd2)
               - 2.0 * wd * (n0 * hd0 + n1 * hd1 + n2 * hd2))
    _pair_rows(p, S, V, Ab, i, k1, k2, r2, n0, n1, n2, dd0, dd1, dd2, ndd, L, c0, c1, c2,
               cv0, cv1, cv2, o0, o1, o2, G, T, u, ugam)


@_inline
def _axis(R, k, geo, i, o):
    """The vector ``geo[i, o:o + 3]`` of link ``k``'s frame in the world's axes (``k < 0``:
    the world's)."""
    x0, x1, x2 = geo[i, o], geo[i, o + 1], geo[i, o + 2]
    if k < 0:
        return x0, x1, x2
    return (R[k, 0, 0] * x0 + R[k, 0, 1] * x1 + R[k, 0, 2] * x2,
            R[k, 1, 0] * x0 + R[k, 1, 1] * x1 + R[k, 1, 2] * x2,
            R[k, 2, 0] * x0 + R[k, 2, 1] * x1 + R[k, 2, 2] * x2)


@_jit
def _sphere_box(p, R, X, S, V, Ab, geo, i, gap, G, gam, T, u, ugam, full):
    """Record ``i`` of :func:`contact_points`, a sphere against a box (its docstring); not
    ``full``: the gap alone."""
    k2, k1 = int(geo[i, PP_LINK]), int(geo[i, SS_LINK1])
    r1 = geo[i, SS_R1]
    o0, o1, o2, y0, y1, y2, z0, z1, z2 = _moving_point(R, X, V, Ab, k1, geo, i, SS_C1)
    B0, B1, B2 = _axis(R, k2, geo, i, PP_S)                     # (the centre: R s + X)
    if k2 >= 0:
        B0, B1, B2 = B0 + X[k2, 0], B1 + X[k2, 1], B2 + X[k2, 2]
    ax = _axis(R, k2, geo, i, SB_X)
    ay = _axis(R, k2, geo, i, SB_Y)
    az = (ax[1] * ay[2] - ax[2] * ay[1], ax[2] * ay[0] - ax[0] * ay[2],
          ax[0] * ay[1] - ax[1] * ay[0])
    # the sphere's centre in the box's frame (lx, ly, lz), clamped to the box (sx, sy, sz):
    # the closest point (a centre inside the box: its nearest face's point)
    hx, hy, hz = geo[i, SB_H], geo[i, SB_H + 1], geo[i, SB_H + 2]
    lx = ax[0] * (o0 - B0) + ax[1] * (o1 - B1) + ax[2] * (o2 - B2)
    ly = ay[0] * (o0 - B0) + ay[1] * (o1 - B1) + ay[2] * (o2 - B2)
    lz = az[0] * (o0 - B0) + az[1] * (o1 - B1) + az[2] * (o2 - B2)
    fx, fy, fz = -hx < lx < hx, -hy < ly < hy, -hz < lz < hz
    sx, sy, sz = min(max(lx, -hx), hx), min(max(ly, -hy), hy), min(max(lz, -hz), hz)
    sg = 1.0
    if fx and fy and fz:
        sg = -1.0
        dx, dy, dz = hx - abs(lx), hy - abs(ly), hz - abs(lz)
        if dx <= dy and dx <= dz:
            sx, fx = (hx if lx >= 0.0 else -hx), False
        elif dy <= dz:
            sy, fy = (hy if ly >= 0.0 else -hy), False
        else:
            sz, fz = (hz if lz >= 0.0 else -hz), False
    c0 = B0 + sx * ax[0] + sy * ay[0] + sz * az[0]
    c1 = B1 + sx * ax[1] + sy * ay[1] + sz * az[1]
    c2 = B2 + sx * ax[2] + sy * ay[2] + sz * az[2]
    if not full:
        m0, m1, m2 = c0 - o0, c1 - o1, c2 - o2
        gap[i] = sg * np.sqrt(m0 * m0 + m1 * m1 + m2 * m2) - r1
        return
    # the box's material point at c (velocity, bias acceleration) and at the sphere's
    # centre (velocity); the free coordinates' rates a_j . (o' - that velocity)
    v0, v1, v2, _, _, _ = _at_point(V, Ab, k2, c0, c1, c2, 0.0, 0.0, 0.0)
    _, _, _, a0, a1, a2 = _at_point(V, Ab, k2, c0, c1, c2, v0, v1, v2)
    wo0, wo1, wo2, _, _, _ = _at_point(V, Ab, k2, o0, o1, o2, 0.0, 0.0, 0.0)
    r0, r1_, r2_ = y0 - wo0, y1 - wo1, y2 - wo2
    dx = (ax[0] * r0 + ax[1] * r1_ + ax[2] * r2_) if fx else 0.0
    dy = (ay[0] * r0 + ay[1] * r1_ + ay[2] * r2_) if fy else 0.0
    dz = (az[0] * r0 + az[1] * r1_ + az[2] * r2_) if fz else 0.0
    w0 = dx * ax[0] + dy * ay[0] + dz * az[0]                 # R s' (the free part's rate)
    w1 = dx * ax[1] + dy * ay[1] + dz * az[1]
    w2 = dx * ax[2] + dy * ay[2] + dz * az[2]
    m0, m1, m2 = c0 - o0, c1 - o1, c2 - o2
    L = np.sqrt(m0 * m0 + m1 * m1 + m2 * m2)
    n0, n1, n2 = sg * m0 / L, sg * m1 / L, sg * m2 / L
    cv0, cv1, cv2 = v0 + w0, v1 + w1, v2 + w2                 # c'
    dd0, dd1, dd2 = cv0 - y0, cv1 - y1, cv2 - y2               # m'
    ndd = n0 * dd0 + n1 * dd1 + n2 * dd2
    om0 = om1 = om2 = 0.0
    if k2 >= 0:
        om0, om1, om2 = V[k2, 0], V[k2, 1], V[k2, 2]
    gap[i] = sg * L - r1
    gam[i] = -(sg * (dd0 * dd0 + dd1 * dd1 + dd2 * dd2 - ndd * ndd) / L
               + n0 * (a0 - z0) + n1 * (a1 - z1) + n2 * (a2 - z2)
               + 2.0 * (n0 * (om1 * w2 - om2 * w1) + n1 * (om2 * w0 - om0 * w2)
                        + n2 * (om0 * w1 - om1 * w0)))
    # (n' = sg (m' - n (n . m')) / L: the rows' helper takes sg m' for d')
    _pair_rows(p, S, V, Ab, i, k1, k2, 0.0, n0, n1, n2, sg * dd0, sg * dd1, sg * dd2,
               sg * ndd, L, c0, c1, c2, cv0, cv1, cv2, o0, o1, o2, G, T, u, ugam)


@_inline
def _pair_rows(p, S, V, Ab, i, k1, k2, r2, n0, n1, n2, dd0, dd1, dd2, ndd, L, c0, c1, c2,
               cv0, cv1, cv2, o0, o1, o2, G, T, u, ugam):
    """Record ``i`` of a pair of geoms (:func:`contact_points`: spheres, capsules, a sphere
    and a box) from its closest points, geom 2's ``c`` (link ``k2``, moving at ``c'`` =
    ``cv``; ``r2`` its radius) and geom 1's ``o`` (link ``k1``), the unit normal ``n``
    from ``o`` to ``c``, the distance ``L``, ``d' = dd`` and ``n . d' = ndd``: the normal's
    rate ``n' = (d' - n (n . d')) / L`` and the contact point ``c - r2 n`` (moving at ``c'
    - r2 n'``), then :func:`_pair_rows_nd`."""
    nd0, nd1, nd2 = (dd0 - n0 * ndd) / L, (dd1 - n1 * ndd) / L, (dd2 - n2 * ndd) / L  # n'
    _pair_rows_nd(p, S, V, Ab, i, k1, k2, n0, n1, n2, nd0, nd1, nd2, c0, c1, c2,
                  c0 - r2 * n0, c1 - r2 * n1, c2 - r2 * n2,
                  cv0 - r2 * nd0, cv1 - r2 * nd1, cv2 - r2 * nd2, o0, o1, o2, G, T, u, ugam)


@_inline
def _pair_rows_nd(p, S, V, Ab, i, k1, k2, n0, n1, n2, nd0, nd1, nd2, c0, c1, c2, p0, p1, p2,
                  pv0, pv1, pv2, o0, o1, o2, G, T, u, ugam):
    """Record ``i`` of a pair of geoms from the unit normal ``n`` (from geom 1 to geom 2) and
    its rate ``n'``, the contact point ``P`` moving at ``P' = pv``, and the points ``c`` of
    link ``k2`` and ``o`` of link ``k1`` whose material points' velocities give the gap's
    rate (``n`` times their difference): the tangents and their rates, the slip velocities
    at ``P`` and their convective terms, and the rows of ``G`` and ``T``."""
    # tangents t1 = n x e / |n x e| (e the reference direction, SS_REF0 or SS_REF1), t2 =
    # n x t1, and their rates (e fixed)
    if abs(n0 * SS_REF0[0] + n1 * SS_REF0[1] + n2 * SS_REF0[2]) <= SS_REF_COS:
        e0, e1, e2 = SS_REF0[0], SS_REF0[1], SS_REF0[2]
    else:
        e0, e1, e2 = SS_REF1[0], SS_REF1[1], SS_REF1[2]
    x0, x1, x2 = n1 * e2 - n2 * e1, n2 * e0 - n0 * e2, n0 * e1 - n1 * e0
    xd0, xd1, xd2 = nd1 * e2 - nd2 * e1, nd2 * e0 - nd0 * e2, nd0 * e1 - nd1 * e0
    sx = np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
    ta0, ta1, ta2 = x0 / sx, x1 / sx, x2 / sx
    tx = ta0 * xd0 + ta1 * xd1 + ta2 * xd2
    td0, td1, td2 = (xd0 - ta0 * tx) / sx, (xd1 - ta1 * tx) / sx, (xd2 - ta2 * tx) / sx
    tb0, tb1, tb2 = n1 * ta2 - n2 * ta1, n2 * ta0 - n0 * ta2, n0 * ta1 - n1 * ta0
    te0 = nd1 * ta2 - nd2 * ta1 + (n1 * td2 - n2 * td1)
    te1 = nd2 * ta0 - nd0 * ta2 + (n2 * td0 - n0 * td2)
    te2 = nd0 * ta1 - nd1 * ta0 + (n0 * td1 - n1 * td0)
    u0, u1, u2, e0, e1, e2 = _at_point(V, Ab, k2, p0, p1, p2, pv0, pv1, pv2)
    w0, w1, w2, f0, f1, f2 = _at_point(V, Ab, k1, p0, p1, p2, pv0, pv1, pv2)
    u0, u1, u2, e0, e1, e2 = u0 - w0, u1 - w1, u2 - w2, e0 - f0, e1 - f1, e2 - f2
    u[2 * i] = ta0 * u0 + ta1 * u1 + ta2 * u2
    u[2 * i + 1] = tb0 * u0 + tb1 * u1 + tb2 * u2
    ugam[2 * i] = -(td0 * u0 + td1 * u1 + td2 * u2 + ta0 * e0 + ta1 * e1 + ta2 * e2)
    ugam[2 * i + 1] = -(te0 * u0 + te1 * u1 + te2 * u2 + tb0 * e0 + tb1 * e1 + tb2 * e2)
    _contact_rows(p, S, k2, 1.0, i, n0, n1, n2, c0, c1, c2, p0, p1, p2,
                ta0, ta1, ta2, tb0, tb1, tb2, G, T)
    _contact_rows(p, S, k1, -1.0, i, n0, n1, n2, o0, o1, o2, p0, p1, p2,
                ta0, ta1, ta2, tb0, tb1, tb2, G, T)


#: a segment (sphere: of length 0) against a solid cylinder (kind 3): the cylinder's link,
#: centre (its link's frame) and radius in the first three fields, the segment's link,
#: radius and ends as a pair of capsules' (``SS_LINK1``, ``SS_R1``, ``SS_C1``, ``SS_B1``),
#: the cylinder's half height in ``CY_H`` and its unit axis (its link's frame) in ``CY_A``
CY_H, CY_A = PP_T1, PP_A


@_inline
def _cyl_near(B0, B1, B2, a0, a1, a2, rc, hc, x0, x1, x2):
    """The solid cylinder's (centre ``B``, unit axis ``a``, radius ``rc``, half height
    ``hc``) point ``c`` closest to ``x``: ``(region, c, n, d, ur, up, rho)`` with
    ``region`` 0 on the side, 1 on a flat face, 2 on a rim; ``n`` the unit normal from
    ``x`` towards the cylinder (the signed distance's gradient is ``-n``), ``d`` the signed
    distance (negative inside: the nearer of the side and the face), ``ur`` and ``up =
    a x ur`` the radial and circumferential directions at ``x`` and ``rho`` its distance
    from the axis. (A point on the axis takes a radial direction orthogonal to ``a``.)"""
    r0, r1, r2 = x0 - B0, x1 - B1, x2 - B2
    z = a0 * r0 + a1 * r1 + a2 * r2
    v0, v1, v2 = r0 - z * a0, r1 - z * a1, r2 - z * a2
    rho = np.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    if rho > 0.0:
        u0, u1, u2 = v0 / rho, v1 / rho, v2 / rho
    else:
        u0, u1, u2 = _across(a0, a1, a2)
    p0, p1, p2 = a1 * u2 - a2 * u1, a2 * u0 - a0 * u2, a0 * u1 - a1 * u0
    sg = 1.0 if z >= 0.0 else -1.0
    az = abs(z)
    if az < hc and rho < rc:                    # inside: the nearer of face and side
        region = 1 if hc - az <= rc - rho else 0
    elif az < hc:
        region = 0
    elif rho <= rc:
        region = 1
    else:
        region = 2
    if region == 0:
        c0, c1, c2 = B0 + z * a0 + rc * u0, B1 + z * a1 + rc * u1, B2 + z * a2 + rc * u2
        n0, n1, n2 = -u0, -u1, -u2
        d = rho - rc
    elif region == 1:
        c0, c1, c2 = B0 + sg * hc * a0 + v0, B1 + sg * hc * a1 + v1, B2 + sg * hc * a2 + v2
        n0, n1, n2 = -sg * a0, -sg * a1, -sg * a2
        d = az - hc
    else:
        c0 = B0 + sg * hc * a0 + rc * u0
        c1 = B1 + sg * hc * a1 + rc * u1
        c2 = B2 + sg * hc * a2 + rc * u2
        m0, m1, m2 = c0 - x0, c1 - x1, c2 - x2
        d = np.sqrt(m0 * m0 + m1 * m1 + m2 * m2)
        n0, n1, n2 = m0 / d, m1 / d, m2 / d
    return region, c0, c1, c2, n0, n1, n2, d, u0, u1, u2, p0, p1, p2, rho


@_inline
def _cyl_hess(region, a0, a1, a2, rc, n0, n1, n2, d, p0, p1, p2, rho, w0, w1, w2):
    """``H w`` and ``C w``: the signed distance's Hessian ``H`` and the closest point's
    Jacobian ``C`` (both in the world's axes, the cylinder held still) at a point of
    ``region`` (:func:`_cyl_near`'s outputs) applied to ``w``. On the side ``H = up up^T /
    rho``, ``C = a a^T + (rc / rho) up up^T``; on a face ``H = 0``, ``C = I - a a^T``; on
    a rim ``H = (I - n n^T - (rc / rho) up up^T) / d``, ``C = (rc / rho) up up^T``."""
    pw = p0 * w0 + p1 * w1 + p2 * w2
    k = rc / rho if rho > 0.0 else 0.0
    aw = a0 * w0 + a1 * w1 + a2 * w2
    if region == 0:
        h = pw / rho if rho > 0.0 else 0.0
        return (h * p0, h * p1, h * p2, aw * a0 + k * pw * p0, aw * a1 + k * pw * p1,
                aw * a2 + k * pw * p2)
    if region == 1:
        return 0.0, 0.0, 0.0, w0 - aw * a0, w1 - aw * a1, w2 - aw * a2
    nw = n0 * w0 + n1 * w1 + n2 * w2
    return ((w0 - nw * n0 - k * pw * p0) / d, (w1 - nw * n1 - k * pw * p1) / d,
            (w2 - nw * n2 - k * pw * p2) / d, k * pw * p0, k * pw * p1, k * pw * p2)


@_inline
def _cyl_slope(B0, B1, B2, a0, a1, a2, rc, hc, C0, C1, C2, e0, e1, e2, s):
    """The derivative in ``s`` of the signed distance of ``C + s e`` to the cylinder
    (``-n . e``) and its second derivative (``e . H e``)."""
    rg, _, _, _, n0, n1, n2, d, _, _, _, p0, p1, p2, rho = _cyl_near(
        B0, B1, B2, a0, a1, a2, rc, hc, C0 + s * e0, C1 + s * e1, C2 + s * e2)
    h0, h1, h2, _, _, _ = _cyl_hess(rg, a0, a1, a2, rc, n0, n1, n2, d, p0, p1, p2, rho,
                                    e0, e1, e2)
    return -(n0 * e0 + n1 * e1 + n2 * e2), e0 * h0 + e1 * h1 + e2 * h2


@_inline
def _cyl_param(B0, B1, B2, a0, a1, a2, rc, hc, C0, C1, C2, e0, e1, e2, s0):
    """The parameter ``s`` in ``[0, 1]`` of the point of the segment ``C + s e`` closest to
    the cylinder: the signed distance to a convex set is convex along the segment, so its
    slope (:func:`_cyl_slope`) increases with ``s``: ``s = 0`` where it is >= 0 there,
    ``s = 1`` where it is <= 0 at 1, else its root, by Newton's method from ``s0`` kept
    inside a bracket that halves where a Newton step leaves it (the slope has kinks where
    the closest point changes region, and is flat on a face)."""
    if e0 == 0.0 and e1 == 0.0 and e2 == 0.0:
        return 0.0
    f, _ = _cyl_slope(B0, B1, B2, a0, a1, a2, rc, hc, C0, C1, C2, e0, e1, e2, 0.0)
    if f >= 0.0:
        return 0.0
    f, _ = _cyl_slope(B0, B1, B2, a0, a1, a2, rc, hc, C0, C1, C2, e0, e1, e2, 1.0)
    if f <= 0.0:
        return 1.0
    lo, hi = 0.0, 1.0
    s = s0 if 0.0 < s0 < 1.0 else 0.5
    for _ in range(200):
        f, fs = _cyl_slope(B0, B1, B2, a0, a1, a2, rc, hc, C0, C1, C2, e0, e1, e2, s)
        if f < 0.0:
            lo = s
        elif f > 0.0:
            hi = s
        else:
            return s
        t = s - f / fs if fs > 0.0 else -1.0
        if not lo < t < hi:
            t = 0.5 * (lo + hi)
        if abs(t - s) <= 4e-16 or not lo < t < hi:
            return t if lo <= t <= hi else s
        s = t
    return s


@_jit
def _seg_cylinder(p, R, X, S, V, Ab, geo, i, gap, G, gam, T, u, ugam, tilt, full):
    """Record ``i`` of :func:`contact_points`, a sphere or capsule against a solid
    cylinder (its docstring); not ``full``: the gap alone."""
    k2, k1 = int(geo[i, PP_LINK]), int(geo[i, SS_LINK1])
    r1, rc, hc = geo[i, SS_R1], geo[i, PP_R], geo[i, CY_H]
    C0, C1, C2, vc0, vc1, vc2, ac0, ac1, ac2 = _moving_point(R, X, V, Ab, k1, geo, i, SS_C1)
    D0, D1, D2, vd0, vd1, vd2, ad0, ad1, ad2 = _moving_point(R, X, V, Ab, k1, geo, i, SS_B1)
    B0, B1, B2 = _axis(R, k2, geo, i, PP_S)
    if k2 >= 0:
        B0, B1, B2 = B0 + X[k2, 0], B1 + X[k2, 1], B2 + X[k2, 2]
    a0, a1, a2 = _axis(R, k2, geo, i, CY_A)
    e0, e1, e2 = D0 - C0, D1 - C1, D2 - C2
    # Newton's start: the segment's point closest to the cylinder's axis (exact where the
    # closest point is on the side)
    ee = e0 * e0 + e1 * e1 + e2 * e2
    s0 = 0.5
    if ee > 0.0:
        b0, b1, b2 = B0 - hc * a0, B1 - hc * a1, B2 - hc * a2
        s0, _, _ = _closest(ee, 2.0 * hc * (e0 * a0 + e1 * a1 + e2 * a2),
                            e0 * (C0 - b0) + e1 * (C1 - b1) + e2 * (C2 - b2),
                            4.0 * hc * hc,
                            2.0 * hc * (a0 * (C0 - b0) + a1 * (C1 - b1) + a2 * (C2 - b2)))
    s = _cyl_param(B0, B1, B2, a0, a1, a2, rc, hc, C0, C1, C2, e0, e1, e2, s0)
    if s == 0.0:                                  # (an end: its point exactly)
        x0, x1, x2 = C0, C1, C2
    elif s == 1.0:
        x0, x1, x2 = D0, D1, D2
    else:
        x0, x1, x2 = C0 + s * e0, C1 + s * e1, C2 + s * e2
    rg, c0, c1, c2, n0, n1, n2, d, _, _, _, p0, p1, p2, rho = _cyl_near(
        B0, B1, B2, a0, a1, a2, rc, hc, x0, x1, x2)
    gap[i] = d - r1
    if not full:
        return
    # a segment parallel to a face it lies over, or to the axis beside the side, touches
    # along a line (no single closest point)
    tilt[i] = 1.0
    if ee > 0.0:
        ea = e0 * a0 + e1 * a1 + e2 * a2
        if (rg == 1 and ea * ea <= PP_FLAT * PP_FLAT * ee) or \
                (rg == 0 and ee - ea * ea <= PP_FLAT * PP_FLAT * ee):
            tilt[i] = 0.0
    # the segment's material point at x (affine along it; at an end, the end's own values:
    # a capsule's middle point there is its end sphere's row bit for bit, not a row that
    # differs from it by rounding) and the cylinder's there
    if s == 0.0:
        vx0, vx1, vx2, ax0, ax1, ax2 = vc0, vc1, vc2, ac0, ac1, ac2
    elif s == 1.0:
        vx0, vx1, vx2, ax0, ax1, ax2 = vd0, vd1, vd2, ad0, ad1, ad2
    else:
        vx0, vx1, vx2 = vc0 + s * (vd0 - vc0), vc1 + s * (vd1 - vc1), vc2 + s * (vd2 - vc2)
        ax0, ax1, ax2 = ac0 + s * (ad0 - ac0), ac1 + s * (ad1 - ac1), ac2 + s * (ad2 - ac2)
    y0, y1, y2, _, _, _ = _at_point(V, Ab, k2, x0, x1, x2, 0.0, 0.0, 0.0)
    _, _, _, z0, z1, z2 = _at_point(V, Ab, k2, x0, x1, x2, y0, y1, y2)
    om0 = om1 = om2 = 0.0
    if k2 >= 0:
        om0, om1, om2 = V[k2, 0], V[k2, 1], V[k2, 2]
    w0, w1, w2 = vx0 - y0, vx1 - y1, vx2 - y2                  # x' relative to the cylinder
    hw0, hw1, hw2, _, _, _ = _cyl_hess(rg, a0, a1, a2, rc, n0, n1, n2, d, p0, p1, p2, rho,
                                       w0, w1, w2)
    # the parameter's rate inside the segment: the slope -n . e stays 0, so s' = -phi_st /
    # phi_ss with phi_ss = e . H e, phi_st = e . H w - n . (e' - omega x e)
    sd = 0.0
    fst = 0.0
    if 0.0 < s < 1.0 and tilt[i] == 1.0:
        he0, he1, he2, _, _, _ = _cyl_hess(rg, a0, a1, a2, rc, n0, n1, n2, d, p0, p1, p2, rho,
                                           e0, e1, e2)
        fss = e0 * he0 + e1 * he1 + e2 * he2
        if fss > 0.0:
            ed0, ed1, ed2 = vd0 - vc0, vd1 - vc1, vd2 - vc2
            q0 = ed0 - (om1 * e2 - om2 * e1)
            q1 = ed1 - (om2 * e0 - om0 * e2)
            q2 = ed2 - (om0 * e1 - om1 * e0)
            fst = (e0 * hw0 + e1 * hw1 + e2 * hw2) - (n0 * q0 + n1 * q1 + n2 * q2)
            sd = -fst / fss
    # gap'' = -n . (x''_b - z - 2 omega x w) + w . H w + phi_st s' (bias parts)
    ow0, ow1, ow2 = om1 * w2 - om2 * w1, om2 * w0 - om0 * w2, om0 * w1 - om1 * w0
    gam[i] = (n0 * (ax0 - z0 - 2.0 * ow0) + n1 * (ax1 - z1 - 2.0 * ow1)
              + n2 * (ax2 - z2 - 2.0 * ow2)
              - (w0 * hw0 + w1 * hw1 + w2 * hw2) - fst * sd)
    # n' = omega x n - H (w + s' e); the contact point c moves at the cylinder's velocity
    # there plus C (w + s' e)
    t0, t1, t2 = w0 + sd * e0, w1 + sd * e1, w2 + sd * e2
    ht0, ht1, ht2, ct0, ct1, ct2 = _cyl_hess(rg, a0, a1, a2, rc, n0, n1, n2, d, p0, p1, p2,
                                             rho, t0, t1, t2)
    nd0 = om1 * n2 - om2 * n1 - ht0
    nd1 = om2 * n0 - om0 * n2 - ht1
    nd2 = om0 * n1 - om1 * n0 - ht2
    yc0, yc1, yc2, _, _, _ = _at_point(V, Ab, k2, c0, c1, c2, 0.0, 0.0, 0.0)
    _pair_rows_nd(p, S, V, Ab, i, k1, k2, n0, n1, n2, nd0, nd1, nd2, c0, c1, c2, c0, c1, c2,
                  yc0 + ct0, yc1 + ct1, yc2 + ct2, x0, x1, x2, G, T, u, ugam)


# =========================================================================== lines, actuators
@_jit
def _line(p, l, x):
    """``sum c_k x_k`` over the terms of line ``l``: its length at ``x = q``, its rate at
    ``x = v``."""
    lr = int(p[H_OL]) + W_L * l
    t0 = int(p[H_OT]) + 2 * int(p[lr + L_T0])
    acc = 0.0
    for t in range(int(p[lr + L_NT])):
        acc += p[t0 + 2 * t + 1] * x[int(p[t0 + 2 * t])]
    return acc


@_jit
def _line_add(p, l, f, out):
    """``out += f c``: the generalized force of a force ``f`` along line ``l`` (``c`` its
    coefficients: ``dL/dq``)."""
    lr = int(p[H_OL]) + W_L * l
    t0 = int(p[H_OT]) + 2 * int(p[lr + L_T0])
    for t in range(int(p[lr + L_NT])):
        out[int(p[t0 + 2 * t])] += f * p[t0 + 2 * t + 1]


@_jit
def _stretch(p, lr, L):
    """How far the length ``L`` of the line at record ``lr`` is outside its spring's dead
    band ``[lower, upper]`` (MuJoCo's ``springlength``; zero inside)."""
    if L > p[lr + L_HI]:
        return L - p[lr + L_HI]
    if L < p[lr + L_LO]:
        return L - p[lr + L_LO]
    return 0.0


@_jit
def _lines_passive(p, q, v, F):
    """The tendons' springs (with their dead band) and dampers (MuJoCo's tendon
    ``stiffness``, ``springlength``, ``damping``): ``F += c f``, ``f = -k x - b L'``."""
    ol = int(p[H_OL])
    for l in range(int(p[H_NL])):
        lr = ol + W_L * l
        k, b = p[lr + L_K], p[lr + L_DAMP]
        if (k == 0.0 and b == 0.0) or p[lr + L_SP] != 0.0:
            continue
        f = 0.0
        if k != 0.0:
            f -= k * _stretch(p, lr, _line(p, l, q))
        if b != 0.0:
            f -= b * _line(p, l, v)
        _line_add(p, l, f, F)


@_jit
def _site_frame(p, ar, b, R, X):
    """The site of the actuator at record ``ar`` on body ``b``: its position ``P`` and the
    gear's force and torque directions ``gF``, ``gT`` in the kinematics' frame, as the
    9 numbers ``(P, gF, gT)`` (scalars: the kernel allocates nothing)."""
    sp0, sp1, sp2 = p[ar + A_SP], p[ar + A_SP + 1], p[ar + A_SP + 2]
    f0, f1, f2 = p[ar + A_SG], p[ar + A_SG + 1], p[ar + A_SG + 2]
    t0, t1, t2 = p[ar + A_SG + 3], p[ar + A_SG + 4], p[ar + A_SG + 5]
    P0 = X[b, 0] + R[b, 0, 0] * sp0 + R[b, 0, 1] * sp1 + R[b, 0, 2] * sp2
    P1 = X[b, 1] + R[b, 1, 0] * sp0 + R[b, 1, 1] * sp1 + R[b, 1, 2] * sp2
    P2 = X[b, 2] + R[b, 2, 0] * sp0 + R[b, 2, 1] * sp1 + R[b, 2, 2] * sp2
    F0 = R[b, 0, 0] * f0 + R[b, 0, 1] * f1 + R[b, 0, 2] * f2
    F1 = R[b, 1, 0] * f0 + R[b, 1, 1] * f1 + R[b, 1, 2] * f2
    F2 = R[b, 2, 0] * f0 + R[b, 2, 1] * f1 + R[b, 2, 2] * f2
    T0 = R[b, 0, 0] * t0 + R[b, 0, 1] * t1 + R[b, 0, 2] * t2
    T1 = R[b, 1, 0] * t0 + R[b, 1, 1] * t1 + R[b, 1, 2] * t2
    T2 = R[b, 2, 0] * t0 + R[b, 2, 1] * t1 + R[b, 2, 2] * t2
    return P0, P1, P2, F0, F1, F2, T0, T1, T2


@_jit
def _site_rate(p, ar, b, R, X, V):
    """The rate of the site actuator at record ``ar`` (MuJoCo's ``actuator_velocity`` of a
    site transmission: the gear's force direction along the site's velocity plus its
    torque direction along the body's angular velocity)."""
    P0, P1, P2, F0, F1, F2, T0, T1, T2 = _site_frame(p, ar, b, R, X)
    w0, w1, w2 = V[b, 0], V[b, 1], V[b, 2]
    v0 = V[b, 3] + w1 * P2 - w2 * P1
    v1 = V[b, 4] + w2 * P0 - w0 * P2
    v2 = V[b, 5] + w0 * P1 - w1 * P0
    return F0 * v0 + F1 * v1 + F2 * v2 + T0 * w0 + T1 * w1 + T2 * w2


@_jit
def _site_wrench(p, ar, b, R, X, frc, fb):
    """``fb[b] -= [P x F + tau; F]``: the force ``frc`` of the site actuator at record
    ``ar`` (``F = frc gF``, ``tau = frc gT``) into the bodies' forces of recursive
    Newton--Euler (whose ``-S^T fb`` is then the generalized force)."""
    P0, P1, P2, F0, F1, F2, T0, T1, T2 = _site_frame(p, ar, b, R, X)
    F0, F1, F2 = frc * F0, frc * F1, frc * F2
    fb[b, 0] -= P1 * F2 - P2 * F1 + frc * T0
    fb[b, 1] -= P2 * F0 - P0 * F2 + frc * T1
    fb[b, 2] -= P0 * F1 - P1 * F0 + frc * T2
    fb[b, 3] -= F0
    fb[b, 4] -= F1
    fb[b, 5] -= F2


@_jit
def _rotvec(w, x, y, z):
    """The rotation vector of the unit quaternion ``(w, x, y, z)``, its angle taken in
    ``(-pi, pi]`` (MuJoCo's ``mju_quat2Vel`` with ``dt = 1``)."""
    sn = np.sqrt(x * x + y * y + z * z)
    if sn > 0.0:
        ang = 2.0 * np.arctan2(sn, w)
        if ang > np.pi:
            ang -= 2.0 * np.pi
        sc = ang / sn
    else:
        sc = 2.0 / w
    return sc * x, sc * y, sc * z


@_jit
def _ball_gear(p, ar, q, a):
    """The torque part ``g`` of the gear of the actuator at record ``ar`` on the ball
    whose Euler parameters start at coordinate ``a``, in the joint's frame (a gear in the
    parent's frame, MuJoCo's jointinparent, turned by ``R(p)^T``), and its generalized
    force per unit force ``W^T g`` on the Euler parameters (``W = 2 G(p) / |p|^2``, the
    body-frame angular velocity ``u = W p'``): ``(f0, f1, f2, f3, g0, g1, g2)``. Its rate
    is then ``f . p'`` (``= g . u``), its length ``g . r`` (:func:`_ball_length`)."""
    e0, e1, e2, e3 = q[a], q[a + 1], q[a + 2], q[a + 3]
    g0, g1, g2 = p[ar + A_SG + 3], p[ar + A_SG + 4], p[ar + A_SG + 5]
    s2 = e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3
    if p[ar + A_JPARENT] != 0.0:
        r = 1.0 / np.sqrt(s2)
        w, x, y, z = e0 * r, e1 * r, e2 * r, e3 * r
        h0 = (1.0 - 2.0 * (y * y + z * z)) * g0 + 2.0 * (x * y + w * z) * g1 \
            + 2.0 * (x * z - w * y) * g2
        h1 = 2.0 * (x * y - w * z) * g0 + (1.0 - 2.0 * (x * x + z * z)) * g1 \
            + 2.0 * (y * z + w * x) * g2
        h2 = 2.0 * (x * z + w * y) * g0 + 2.0 * (y * z - w * x) * g1 \
            + (1.0 - 2.0 * (x * x + y * y)) * g2
        g0, g1, g2 = h0, h1, h2
    tw = 2.0 / s2
    # W rows (times tw): [-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]
    return (tw * (-e1 * g0 - e2 * g1 - e3 * g2), tw * (e0 * g0 - e3 * g1 + e2 * g2),
            tw * (e3 * g0 + e0 * g1 - e1 * g2), tw * (-e2 * g0 + e1 * g1 + e0 * g2),
            g0, g1, g2)


@_jit
def _ball_length(q, a, g0, g1, g2):
    """MuJoCo's length of a ball transmission: the gear ``g`` (in the joint's frame) along
    the rotation vector of ``p / |p|`` (``mju_quat2Vel``)."""
    e0, e1, e2, e3 = q[a], q[a + 1], q[a + 2], q[a + 3]
    r = 1.0 / np.sqrt(e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3)
    x0, x1, x2 = _rotvec(e0 * r, e1 * r, e2 * r, e3 * r)
    return g0 * x0 + g1 * x1 + g2 * x2


@_jit
def _wrapped(u, length, period):
    """A rotational servo's setpoint ``u``: its representative nearest the actuator's
    ``length``, ``period`` apart (MuJoCo 4's ``wrapSetpoint``, C's round: halves away from
    zero); ``u`` itself where ``period`` is 0 (no wrap)."""
    if period > 0.0:
        x = (u - length) / period
        u -= period * (np.floor(x + 0.5) if x >= 0.0 else np.ceil(x - 0.5))
    return u


@_jit
def _actuation(p, q, v, out, T, SL, R, X, V, fb):
    """MuJoCo's ``qfrc_actuator`` (``mj_fwdActuation``) into ``out`` (n,): per actuator the
    control ``u`` (clamped to its range when limited) and the force ``gain u + b0 + b1 l
    + b2 l'`` (``l = gear L`` the actuator's length along its line ``L``), where the
    actuator has an activation ``act`` (the velocity of its coordinate ``c``) with
    ``act`` in place of ``u`` and ``u - act`` (filter), ``u`` (integrator) or the
    muscle's rate on coordinate ``c`` (a muscle's force :func:`_muscle_force`); the
    forces of the actuators of a line whose actuator force is limited are scaled so that
    their sum is inside the range; each force is clamped to its own range and applied
    along its line (``out += gear f c``; an actuator on a site into the bodies' forces
    ``fb``, one on a ball or free joint onto its coordinates); last, each joint's total
    is clamped to its ``actuatorfrcrange``. ``T``: scratch, actuators plus twice the
    lines long; its last ``nl`` values are the tensions ``gear f`` of the actuators on
    spatial tendons (their generalized force comes from the sites,
    :func:`_site_forces`), whose lengths and rates are ``SL`` (:func:`_tendon_views`;
    the assembly refuses a joint's actuator force range beside them)."""
    n, na, nl = int(p[H_N]), int(p[H_NA]), int(p[H_NL])
    oa, ol, oj = int(p[H_OA]), int(p[H_OL]), int(p[H_OJ])
    for c in range(n):
        out[c] = 0.0
    ten = carve(T, na + nl, (nl,))
    for i in range(nl):
        ten[i] = 0.0
    if na == 0:
        return
    frc = carve(T, 0, (na,))
    tot = carve(T, na, (nl,))
    for i in range(nl):
        tot[i] = 0.0
    limited = False
    for i in range(na):
        ar = oa + W_A * i
        l, gear = int(p[ar + A_LINE]), p[ar + A_GEAR]
        u = p[ar + A_CTRL]
        if p[ar + A_CL] != 0.0:
            u = min(max(u, p[ar + A_CLO]), p[ar + A_CHI])
        c = int(p[ar + A_ACT])
        if c >= 0:
            # the activation drives the force; the control drives the activation, the
            # velocity of coordinate c (its mass tau, or 1: the armature of a joint that
            # moves nothing)
            dyn = int(p[ar + A_DYN])
            if dyn == ACT_FILTER:
                out[c] += u - v[c]
            elif dyn == ACT_INTEGRATOR:
                out[c] += u
            else:
                out[c] += _muscle_rate(p, ar, u, v[c])
            u = v[c]
        b = int(p[ar + A_SITE])
        ja = int(p[ar + A_JA])
        if ja >= 0:
            # on a ball or free joint: MuJoCo's length and rate of its transmission
            free = p[ar + A_JFREE] != 0.0
            a = ja + 3 if free else ja
            f0, f1, f2, f3, g0, g1, g2 = _ball_gear(p, ar, q, a)
            rate = f0 * v[a] + f1 * v[a + 1] + f2 * v[a + 2] + f3 * v[a + 3]
            if free:
                length = 0.0                        # (MuJoCo's: a free joint has none)
                for k in range(3):
                    rate += p[ar + A_SG + k] * v[ja + k]
            else:
                length = _ball_length(q, a, g0, g1, g2)
            u = _wrapped(u, length, p[ar + A_WRAP])
            g = p[ar + A_GAIN] + p[ar + A_G1] * length + p[ar + A_G2] * rate
            frc[i] = g * u + p[ar + A_B0] + p[ar + A_B1] * length + p[ar + A_B2] * rate
            continue
        sp = b < 0 and p[ol + W_L * l + L_SP] != 0.0
        if p[ar + A_MUS] != 0.0:                    # (on a line: the assembly's rule)
            f = _muscle_force(p, ar, u, gear * (SL[l, 0] if sp else _line(p, l, q)),
                              gear * (SL[l, 1] if sp else _line(p, l, v)))
        else:
            g = p[ar + A_GAIN]
            f = p[ar + A_B0]
            if b < 0 and (p[ar + A_B1] != 0.0 or p[ar + A_G1] != 0.0 or p[ar + A_WRAP] > 0.0):
                # (a site's length is zero: MuJoCo's without a reference site)
                x = gear * (SL[l, 0] if sp else _line(p, l, q))
                f += p[ar + A_B1] * x
                g += p[ar + A_G1] * x
                u = _wrapped(u, x, p[ar + A_WRAP])
            if p[ar + A_B2] != 0.0 or p[ar + A_G2] != 0.0:
                if b >= 0:
                    x = _site_rate(p, ar, b, R, X, V)
                else:
                    x = gear * (SL[l, 1] if sp else _line(p, l, v))
                f += p[ar + A_B2] * x
                g += p[ar + A_G2] * x
            f += g * u
        frc[i] = f
        if b < 0 and p[ol + W_L * l + L_AFL] != 0.0:
            tot[l] += f
            limited = True
    for i in range(na):
        ar = oa + W_A * i
        l = int(p[ar + A_LINE])
        f = frc[i]
        b = int(p[ar + A_SITE])
        if b >= 0:
            if p[ar + A_FL] != 0.0:
                f = min(max(f, p[ar + A_FLO]), p[ar + A_FHI])
            _site_wrench(p, ar, b, R, X, f, fb)
            continue
        ja = int(p[ar + A_JA])
        if ja >= 0:
            if p[ar + A_FL] != 0.0:
                f = min(max(f, p[ar + A_FLO]), p[ar + A_FHI])
            free = p[ar + A_JFREE] != 0.0
            a = ja + 3 if free else ja
            f0, f1, f2, f3, _, _, _ = _ball_gear(p, ar, q, a)
            out[a] += f0 * f
            out[a + 1] += f1 * f
            out[a + 2] += f2 * f
            out[a + 3] += f3 * f
            if free:
                for k in range(3):
                    out[ja + k] += p[ar + A_SG + k] * f
            continue
        lr = ol + W_L * l
        if limited and p[lr + L_AFL] != 0.0 and tot[l] != 0.0:
            if tot[l] < p[lr + L_AFLO]:
                f *= p[lr + L_AFLO] / tot[l]
            elif tot[l] > p[lr + L_AFHI]:
                f *= p[lr + L_AFHI] / tot[l]
        if p[ar + A_FL] != 0.0:
            f = min(max(f, p[ar + A_FLO]), p[ar + A_FHI])
        if p[lr + L_SP] != 0.0:
            ten[l] += p[ar + A_GEAR] * f
        else:
            _line_add(p, l, p[ar + A_GEAR] * f, out)
    for jj in range(int(p[H_NJ])):
        jr = oj + W_J * jj
        if p[jr + J_AFL] != 0.0:
            a = int(p[jr + J_Q])
            out[a] = min(max(out[a], p[jr + J_AFLO]), p[jr + J_AFHI])


@_jit
def _muscle_length_curve(x, lmin, lmax):
    """MuJoCo's ``mju_muscleGainLength``: the normalized force-length curve, four half
    quadratics from ``lmin`` to 1 (its peak) to ``lmax``, zero outside."""
    if x < lmin or x > lmax:
        return 0.0
    a = 0.5 * (lmin + 1.0)
    b = 0.5 * (1.0 + lmax)
    if x <= a:
        y = (x - lmin) / max(_MINVAL, a - lmin)
        return 0.5 * y * y
    if x <= 1.0:
        y = (1.0 - x) / max(_MINVAL, 1.0 - a)
        return 1.0 - 0.5 * y * y
    if x <= b:
        y = (x - 1.0) / max(_MINVAL, b - 1.0)
        return 1.0 - 0.5 * y * y
    y = (lmax - x) / max(_MINVAL, lmax - b)
    return 0.5 * y * y


@_jit
def _muscle_force(p, ar, act, length, rate):
    """A muscle's force ``gain act + bias`` at the actuator's ``length`` and its ``rate``:
    MuJoCo's ``mju_muscleGain`` (``-F FL(L) FV(V)``) and ``mju_muscleBias`` (``-F fpmax``
    times a half quadratic beyond the optimal length, then linear), ``L`` and ``V`` the
    length and rate normalized by the optimal length ``L0`` (the length range over the
    operating range) and by ``L0 vmax``."""
    F = p[ar + A_MF]
    r0 = p[ar + A_MR0]
    lr0 = p[ar + A_LR0]
    L0 = (p[ar + A_LR1] - lr0) / max(_MINVAL, p[ar + A_MR1] - r0)
    L = r0 + (length - lr0) / max(_MINVAL, L0)
    V = rate / max(_MINVAL, L0 * p[ar + A_MVMAX])
    lmax = p[ar + A_MLMAX]
    FL = _muscle_length_curve(L, p[ar + A_MLMIN], lmax)
    fvmax = p[ar + A_MFVMAX]
    y = fvmax - 1.0
    if V <= -1.0:
        FV = 0.0
    elif V <= 0.0:
        FV = (V + 1.0) * (V + 1.0)
    elif V <= y:
        FV = fvmax - (y - V) * (y - V) / max(_MINVAL, y)
    else:
        FV = fvmax
    b = 0.5 * (1.0 + lmax)
    if L <= 1.0:
        bias = 0.0
    elif L <= b:
        x = (L - 1.0) / max(_MINVAL, b - 1.0)
        bias = -F * p[ar + A_MFPMAX] * 0.5 * x * x
    else:
        x = (L - b) / max(_MINVAL, b - 1.0)
        bias = -F * p[ar + A_MFPMAX] * (0.5 + x)
    return -F * FL * FV * act + bias


@_jit
def _muscle_rate(p, ar, u, act):
    """A muscle's activation rate (MuJoCo's ``mju_muscleDynamics``): ``(u - act) / tau``,
    ``u`` clamped to [0, 1], ``tau`` the activation time constant times ``0.5 + 1.5 a``
    where ``u > act`` and the deactivation one over it where not (``a`` the activation
    clamped to [0, 1]; Millard et al. 2013), or between them by a quintic sigmoid of
    ``(u - act) / width + 1/2`` where a smoothing width is given."""
    uc = min(max(u, 0.0), 1.0)
    ac = min(max(act, 0.0), 1.0)
    t_act = p[ar + A_TACT] * (0.5 + 1.5 * ac)
    t_deact = p[ar + A_TDEACT] / (0.5 + 1.5 * ac)
    d = uc - act
    width = p[ar + A_TSMOOTH]
    if width < _MINVAL:
        tau = t_act if d > 0.0 else t_deact
    else:
        x = d / width + 0.5
        if x <= 0.0:
            sig = 0.0
        elif x >= 1.0:
            sig = 1.0
        else:
            sig = x * x * x * (3.0 * x * (2.0 * x - 5.0) + 10.0)
        tau = t_deact + (t_act - t_deact) * sig
    return d / max(_MINVAL, tau)


@_jit
def _ball_offset(p, jr, q, a, out):
    """MuJoCo's ``mju_subQuat(q / |q|, q_spring)`` of the ball at record ``jr`` (coordinates
    from ``a``): the rotation vector of ``q_spring^-1 q``, in the ball's frame, its angle
    taken in ``(-pi, pi]``."""
    e0, e1, e2, e3 = q[a], q[a + 1], q[a + 2], q[a + 3]
    r = 1.0 / np.sqrt(e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3)
    e0, e1, e2, e3 = e0 * r, e1 * r, e2 * r, e3 * r
    s0, s1, s2, s3 = (p[jr + J_SQ], -p[jr + J_SQ + 1], -p[jr + J_SQ + 2],
                      -p[jr + J_SQ + 3])
    w = s0 * e0 - s1 * e1 - s2 * e2 - s3 * e3
    x = s0 * e1 + s1 * e0 + s2 * e3 - s3 * e2
    y = s0 * e2 - s1 * e3 + s2 * e0 + s3 * e1
    z = s0 * e3 + s1 * e2 - s2 * e1 + s3 * e0
    out[0], out[1], out[2] = _rotvec(w, x, y, z)


@_unit("f8(f8v, f8v, i8)")
def line_length(p, q, l):
    """The length of line ``l`` at ``q`` (a spatial tendon's from the tree's kinematics)."""
    lr = int(p[H_OL]) + W_L * l
    if p[lr + L_SP] == 0.0:
        return _line(p, l, q)
    w = np.empty(_work_size(p))
    R, X, S, V, Ab, Wb, U, pd, C, Cc, T = _work(p, w)
    _kin(p, q, q, R, X, S, V, Ab, Wb, U, pd, T)
    return _tendon_length(p, lr, R, X, V, T, False)


@_unit("UniTuple(f8, 3)(f8v, f8v, f8v, i8, f8m)")
def line_state(p, q, v, l, row):
    """Line ``l``'s length, rate and bias at ``(q, v)`` (:func:`_line_state`), its Jacobian
    ``dL/dq`` into ``row`` (1, n) (for Python: the spatial tendons' hard stops)."""
    w = np.empty(_work_size(p))
    R, X, S, V, Ab, Wb, U, pd, C, Cc, T = _work(p, w)
    _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T)
    for c in range(row.shape[1]):
        row[0, c] = 0.0
    return _line_state(p, l, q, v, R, X, S, V, Ab, row, 0, 1.0, True, T)


@_unit("none(f8v, f8v, f8v, f8v)")
def actuation(p, q, v, out):
    """The actuators' generalized force (MuJoCo's ``qfrc_actuator``) at ``(q, v)`` and the
    controls in ``p`` into ``out`` (n,); with spatial tendons, their actuators' tensions at
    the sites mapped to the joints by the tree's kinematics."""
    w = np.empty(_work_size(p))
    R, X, S, V, Ab, Wb, U, pd, C, Cc, T = _work(p, w)
    ns, nb_, n, na = _n_sites(p), int(p[H_NB]), int(p[H_N]), int(p[H_NA])
    on_sites = False                        # (actuators on sites: MuJoCo's site transmission)
    for i in range(na):
        if p[int(p[H_OA]) + W_A * i + A_SITE] >= 0.0:
            on_sites = True
    if ns > 0 or on_sites:
        _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T)
        if ns > 0:
            _tendon_geometry(p, R, X, S, V, Ab, T)
        _at_tree_roots(p, X, S, V, Ab, T)
    reg, SL, _ = _tendon_views(p, T)
    Ta = carve(T, 6 * nb_ + 15 + n, (na + 2 * int(p[H_NL]),))
    f = carve(T, 0, (nb_, 6))
    for b in range(nb_):
        for i in range(6):
            f[b, i] = 0.0
    _actuation(p, q, v, out, Ta, SL, R, X, V, f)
    if ns > 0:
        _site_forces(p, reg, SL, Ta, False, f)
    if ns > 0 or on_sites:
        _to_joints(p, S, f, -1.0, out)


@_jit
def _site_world(p, i, R, X, P):
    """Site ``i``'s world position into ``P`` (the frame of :func:`_kin`)."""
    sr = int(p[H_OS]) + W_S * i
    b = int(p[sr])
    s0, s1, s2 = p[sr + 1], p[sr + 2], p[sr + 3]
    if b < 0:
        P[0], P[1], P[2] = s0, s1, s2
        return
    for k in range(3):
        P[k] = X[b, k] + R[b, k, 0] * s0 + R[b, k, 1] * s1 + R[b, k, 2] * s2


@_jit
def _world_velocity(V, b, P, vP):
    """The velocity ``vP`` of the point at the world position ``P`` carried by body ``b``
    (zero for the world: ``b < 0``)."""
    if b < 0:
        vP[0] = vP[1] = vP[2] = 0.0
        return
    _velocity_at(V[b], P, vP)


@_jit
def _velocity_at(Vb, P, vP):
    """The velocity ``vP`` of the point at the world position ``P`` of a body with velocity
    ``Vb`` (angular, then linear at the world origin)."""
    vP[0] = Vb[3] + Vb[1] * P[2] - Vb[2] * P[1]
    vP[1] = Vb[4] + Vb[2] * P[0] - Vb[0] * P[2]
    vP[2] = Vb[5] + Vb[0] * P[1] - Vb[1] * P[0]


@_jit
def _is_intersect(a0, a1, b0, b1, c0, c1, d0, d1):
    """Whether the 2-D segments ``a-b`` and ``c-d`` intersect (MuJoCo's ``is_intersect``)."""
    det = (d1 - c1) * (b0 - a0) - (d0 - c0) * (b1 - a1)
    if abs(det) < _MINVAL:
        return False
    x = ((d0 - c0) * (a1 - c1) - (d1 - c1) * (a0 - c0)) / det
    y = ((b0 - a0) * (a1 - c1) - (b1 - a1) * (a0 - c0)) / det
    return 0.0 <= x <= 1.0 and 0.0 <= y <= 1.0


@_jit
def _cross3(a0, a1, a2, b0, b1, b2):
    """The cross product ``a x b`` of two 3-vectors given by their components."""
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@_jit
def _unit2(x, y):
    """``(x, y)`` normalized as MuJoCo's ``mju_normalize`` (``(1, 0)`` below ``mjMINVAL``)."""
    nrm = math.sqrt(x * x + y * y)
    if nrm < _MINVAL:
        return 1.0, 0.0
    g = 1.0 / nrm
    return x * g, y * g


@_jit
def _sweep(a0, a1, b0, b1):
    """The signed angle from the direction ``a`` to ``b`` about the origin, in (-pi, pi]."""
    return math.atan2(a0 * b1 - a1 * b0, a0 * b0 + a1 * b1)


@_jit
def _wrap_circle(e0, e1, e2, e3, side, sd0, sd1, rad):
    """The string from ``(e0, e1)`` to ``(e2, e3)`` around the circle of radius ``rad`` at
    the origin (2-D): ``(arc length, t0, t1, t2, t3)`` with its two tangent points, or a
    negative length where it is straight (or an end is inside the circle).

    As MuJoCo (>= 4.0) decides it: without a side point, the string wraps where the
    straight segment would cut the circle, the shorter way; with a side point ``(sd0,
    sd1)``, the string is the shortest path homotopic to the polyline from the first end
    through the side point to the second, in the plane without the circle: that polyline
    turns about the centre by ``tau`` (the sum of its two segments' signed angles), the
    straight segment by ``phi``; the string is straight where ``tau`` is ``phi`` and the
    segment clears the circle, else it wraps counterclockwise where ``tau > 0`` (solution
    1 below) and clockwise otherwise (solution 0). (MuJoCo 3 used a half-plane test.)"""
    sqlen0 = e0 * e0 + e1 * e1
    sqlen1 = e2 * e2 + e3 * e3
    sqrad = rad * rad
    if sqlen0 < sqrad or sqlen1 < sqrad or rad < _MINVAL:
        return -1.0, 0.0, 0.0, 0.0, 0.0
    dif0, dif1 = e2 - e0, e3 - e1
    dd = dif0 * dif0 + dif1 * dif1
    if dd < _MINVAL:
        return -1.0, 0.0, 0.0, 0.0, 0.0
    a = -(dif0 * e0 + dif1 * e1) / dd
    if a < 0.0:
        a = 0.0
    elif a > 1.0:
        a = 1.0
    n0, n1 = a * dif0 + e0, a * dif1 + e1
    clear = n0 * n0 + n1 * n1 > sqrad
    if clear and not side:
        return -1.0, 0.0, 0.0, 0.0, 0.0
    sqrt0 = math.sqrt(sqlen0 - sqrad)
    sqrt1 = math.sqrt(sqlen1 - sqrad)
    if side:
        tau = _sweep(e0, e1, sd0, sd1) + _sweep(sd0, sd1, e2, e3)
        if clear and abs(tau - _sweep(e0, e1, e2, e3)) < math.pi:
            return -1.0, 0.0, 0.0, 0.0, 0.0
        best = 1 if tau > 0.0 else 0
    else:
        # the shorter of the two (MuJoCo's goodness: the closer tangent points, a solution
        # whose tangents cross penalized)
        best = 0
        good0 = 0.0
        for i in range(2):
            sgn = 1.0 if i == 0 else -1.0
            a0 = (e0 * sqrad + sgn * rad * e1 * sqrt0) / sqlen0
            a1 = (e1 * sqrad - sgn * rad * e0 * sqrt0) / sqlen0
            b0 = (e2 * sqrad - sgn * rad * e3 * sqrt1) / sqlen1
            b1 = (e3 * sqrad + sgn * rad * e2 * sqrt1) / sqlen1
            good = -((a0 - b0) * (a0 - b0) + (a1 - b1) * (a1 - b1))
            if _is_intersect(e0, e1, a0, a1, e2, e3, b0, b1):
                good = -10000.0
            if i == 0:
                good0 = good
            else:
                best = 0 if good0 > good else 1
    sgn = 1.0 if best == 0 else -1.0
    t0 = (e0 * sqrad + sgn * rad * e1 * sqrt0) / sqlen0
    t1 = (e1 * sqrad - sgn * rad * e0 * sqrt0) / sqlen0
    t2 = (e2 * sqrad - sgn * rad * e3 * sqrt1) / sqlen1
    t3 = (e3 * sqrad + sgn * rad * e2 * sqrt1) / sqlen1
    if _is_intersect(e0, e1, t0, t1, e2, e3, t2, t3):
        return -1.0, 0.0, 0.0, 0.0, 0.0
    # the arc between the tangent points, clockwise for solution 0, counterclockwise for
    # solution 1 (MuJoCo's length_circle)
    u0, u1 = _unit2(t0, t1)
    v0, v1 = _unit2(t2, t3)
    angle = math.acos(min(1.0, max(-1.0, u0 * v0 + u1 * v1)))
    cross = t1 * t2 - t0 * t3
    if (cross > 0.0 and best == 1) or (cross < 0.0 and best == 0):
        angle = 2.0 * math.pi - angle
    return rad * angle, t0, t1, t2, t3


@_lazy("f8(f8v, i8, f8[:, :, ::1], f8m, f8v, f8v, f8v, f8v)")
def _wrap(p, i, R, X, x0, x1, out, w):
    """MuJoCo's ``mju_wrap``: the string from ``x0`` to ``x1`` (world) around the sphere or
    cylinder of wrap record ``i`` (its geom, carried by the record's body), outside the
    geom (the side point, if any, outside it: checked when the model is built). Returns the
    length of its part on the geom, the two tangent points into ``out`` (6, world), or a
    negative number where the string does not touch the geom. ``w``: scratch, 24 values.

    In the geom's frame (``G`` its axes, ``c`` its centre): a sphere's circle is the one in
    the plane of the centre and the two ends, a cylinder's the section (its axis ``z``),
    with the tangent points' heights interpolated along the unrolled path (the helix: the
    geodesic). The answer is stationary in the tangent points' positions (the string is
    shortest), so ``dL/dq`` is that of the straight segments with the tangent points fixed
    on the geom's body: MuJoCo's ``ten_J``. (A unit of its own, loaded by the first path
    that wraps: a model whose tendons only pass through sites does not compile it, 2-3 s
    of its first use.)"""
    sr = int(p[H_OS]) + W_S * i
    kind = int(p[sr + S_KIND])
    rad = p[sr + S_RAD]
    G = carve(w, 0, (3, 3))
    c = carve(w, 9, (3,))
    _site_axes(p, i, R, G)                       # (the geom's axes and centre in the world)
    _site_world(p, i, R, X, c)
    # the ends in the geom's frame
    p00 = G[0, 0] * (x0[0] - c[0]) + G[1, 0] * (x0[1] - c[1]) + G[2, 0] * (x0[2] - c[2])
    p01 = G[0, 1] * (x0[0] - c[0]) + G[1, 1] * (x0[1] - c[1]) + G[2, 1] * (x0[2] - c[2])
    p02 = G[0, 2] * (x0[0] - c[0]) + G[1, 2] * (x0[1] - c[1]) + G[2, 2] * (x0[2] - c[2])
    p10 = G[0, 0] * (x1[0] - c[0]) + G[1, 0] * (x1[1] - c[1]) + G[2, 0] * (x1[2] - c[2])
    p11 = G[0, 1] * (x1[0] - c[0]) + G[1, 1] * (x1[1] - c[1]) + G[2, 1] * (x1[2] - c[2])
    p12 = G[0, 2] * (x1[0] - c[0]) + G[1, 2] * (x1[1] - c[1]) + G[2, 2] * (x1[2] - c[2])
    n0 = math.sqrt(p00 * p00 + p01 * p01 + p02 * p02)
    n1 = math.sqrt(p10 * p10 + p11 * p11 + p12 * p12)
    if n0 < _MINVAL or n1 < _MINVAL:
        return -1.0
    if kind == WRAP_SPHERE:
        # the first axis along the first end, the second in the plane of both ends
        a00, a01, a02 = p00 / n0, p01 / n0, p02 / n0
        m0, m1, m2 = _cross3(p00, p01, p02, p10, p11, p12)
        nm = math.sqrt(m0 * m0 + m1 * m1 + m2 * m2)
        if nm < _MINVAL:
            # the ends in line with the centre: any plane through them (MuJoCo's choice)
            k = 0
            if abs(a01) > abs(a00) and abs(a01) > abs(a02):
                k = 1
            if abs(a02) > abs(a00) and abs(a02) > abs(a01):
                k = 2
            e0 = 0.0 if k == 0 else 1.0
            e1 = 0.0 if k == 1 else 1.0
            e2 = 0.0 if k == 2 else 1.0
            m0, m1, m2 = _cross3(a00, a01, a02, e0, e1, e2)
            nm = math.sqrt(m0 * m0 + m1 * m1 + m2 * m2)
            if nm < _MINVAL:
                m0, m1, m2, nm = 1.0, 0.0, 0.0, 1.0
        m0, m1, m2 = m0 / nm, m1 / nm, m2 / nm
        a10, a11, a12 = _cross3(m0, m1, m2, a00, a01, a02)
        na = math.sqrt(a10 * a10 + a11 * a11 + a12 * a12)
        if na < _MINVAL:
            a10, a11, a12 = 1.0, 0.0, 0.0
        else:
            a10, a11, a12 = a10 / na, a11 / na, a12 / na
    else:
        a00, a01, a02 = 1.0, 0.0, 0.0
        a10, a11, a12 = 0.0, 1.0, 0.0
    d0 = p00 * a00 + p01 * a01 + p02 * a02
    d1 = p00 * a10 + p01 * a11 + p02 * a12
    d2 = p10 * a00 + p11 * a01 + p12 * a02
    d3 = p10 * a10 + p11 * a11 + p12 * a12
    side = p[sr + S_SIDE] != 0.0
    sd0 = sd1 = 0.0
    if side:
        q0, q1, q2 = p[sr + S_SD], p[sr + S_SD + 1], p[sr + S_SD + 2]
        sd0, sd1 = _unit2(q0 * a00 + q1 * a01 + q2 * a02, q0 * a10 + q1 * a11 + q2 * a12)
        sd0, sd1 = sd0 * rad, sd1 * rad
    wlen, t0, t1, t2, t3 = _wrap_circle(d0, d1, d2, d3, side, sd0, sd1, rad)
    if wlen < 0.0:
        return -1.0
    r0 = a00 * t0 + a10 * t1
    r1 = a01 * t0 + a11 * t1
    r2 = a02 * t0 + a12 * t1
    r3 = a00 * t2 + a10 * t3
    r4 = a01 * t2 + a11 * t3
    r5 = a02 * t2 + a12 * t3
    if kind == WRAP_CYLINDER:
        L0 = math.sqrt((p00 - r0) * (p00 - r0) + (p01 - r1) * (p01 - r1))
        L1 = math.sqrt((p10 - r3) * (p10 - r3) + (p11 - r4) * (p11 - r4))
        r2 = p02 + (p12 - p02) * L0 / (L0 + wlen + L1)
        r5 = p02 + (p12 - p02) * (L0 + wlen) / (L0 + wlen + L1)
        height = abs(r5 - r2)
        wlen = math.sqrt(wlen * wlen + height * height)
    for r in range(3):
        out[r] = G[r, 0] * r0 + G[r, 1] * r1 + G[r, 2] * r2 + c[r]
        out[3 + r] = G[r, 0] * r3 + G[r, 1] * r4 + G[r, 2] * r5 + c[r]
    return wlen


@_jit
def _path_points(p, lr, R, X, T):
    """The points of the path of the spatial tendon at line record ``lr`` at the state of
    the kinematics (the world frame of :func:`_kin`): its sites in order, and where it
    wraps a geom (:func:`_wrap`) the two tangent points between them, carried by the
    geom's body; each ``(record, body, x, y, z)`` into the scratch of :func:`_path_offset`
    (the wrap's records for the tangent points: the slots of their forces). Returns the
    number of points and the summed length on the geoms (the string between consecutive
    points is straight; on a geom, between its tangent points, it is that length)."""
    o, ns = _path_offset(p), _n_sites(p)
    pts = carve(T, o, (ns, 5))
    nxt = carve(T, o + 5 * ns, (3,))
    tang = carve(T, o + 5 * ns + 3, (6,))
    prev = carve(T, o + 5 * ns + 9, (3,))
    w = carve(T, o + 5 * ns + 12, (24,))
    os_ = int(p[H_OS])
    s0, nsl = int(p[lr + L_T0]), int(p[lr + L_NT])
    npts = 0
    arc = 0.0
    i = s0
    while i < s0 + nsl:
        sr = os_ + W_S * i
        if int(p[sr + S_KIND]) == SITE_POINT:
            pts[npts, 0], pts[npts, 1] = i, p[sr]
            _site_world(p, i, R, X, pts[npts, 2:5])
            npts += 1
            i += 1
            continue
        # a wrap (records i, i + 1) between the point before and the site after it
        _site_world(p, i + 2, R, X, nxt)
        for c in range(3):
            prev[c] = pts[npts - 1, 2 + c]
        wlen = _wrap(p, i, R, X, prev, nxt, tang, w)
        if wlen >= 0.0:
            for k in range(2):
                pts[npts, 0], pts[npts, 1] = i + k, p[sr]
                for c in range(3):
                    pts[npts, 2 + c] = tang[3 * k + c]
                npts += 1
            arc += wlen
        i += 2
    return npts, arc


@_jit
def _on_geom(p, pts, k):
    """Whether the part of the path from point ``k - 1`` to point ``k`` (of
    :func:`_path_points`) lies on a geom: from its first tangent point to its second."""
    return int(p[int(p[H_OS]) + W_S * int(pts[k, 0]) + S_KIND]) == WRAP_SECOND


@_lazy("f8(f8v, i8, f8[:, :, ::1], f8m, f8m, f8v, b1)")
def _tendon_length(p, lr, R, X, V, T, rate):
    """The length of the spatial tendon at line record ``lr`` (its straight segments between
    consecutive points of :func:`_path_points` and its arcs on the geoms it wraps), or with
    ``rate`` its rate ``L' = sum u . (v_b - v_a)`` (``u`` the unit vector of a segment from
    point a to point b; a tangent point moves with its geom's body, :func:`_wrap`).
    ``T``: :func:`_work`'s scratch."""
    npts, arc = _path_points(p, lr, R, X, T)
    pts = carve(T, _path_offset(p), (_n_sites(p), 5))
    va = carve(T, 0, (3,))
    vb = carve(T, 3, (3,))
    acc = 0.0 if rate else arc
    for k in range(1, npts):
        if _on_geom(p, pts, k):
            continue
        d0 = pts[k, 2] - pts[k - 1, 2]
        d1 = pts[k, 3] - pts[k - 1, 3]
        d2 = pts[k, 4] - pts[k - 1, 4]
        ln = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if rate:
            if ln > 0.0:
                _world_velocity(V, int(pts[k - 1, 1]), pts[k - 1, 2:5], va)
                _world_velocity(V, int(pts[k, 1]), pts[k, 2:5], vb)
                acc += (d0 * (vb[0] - va[0]) + d1 * (vb[1] - va[1])
                        + d2 * (vb[2] - va[2])) / ln
        else:
            acc += ln
    return acc


@_lazy("none(f8v, f8[:, :, ::1], f8m, f8m, f8m, f8m, f8v)")
def _tendon_geometry(p, R, X, S, V, Ab, T):
    """The spatial tendons at the state of the kinematics (:func:`_kin`, the world frame):
    per line its length ``L`` (its straight segments between consecutive points of
    :func:`_path_points` and its arcs on the geoms it wraps), its rate ``L' = sum u . (v_b -
    v_a)`` (``u`` the unit vector of a segment from point a to point b) and the tension of
    its spring and damper (MuJoCo's tendon ``stiffness``, ``springlength``, ``damping``:
    ``-k x - b L'``, ``x`` the stretch outside the dead band); per point its position
    relative to its body's tree root (the frame of :func:`_at_tree_roots`) and its force per
    unit tension: a tension ``f`` pulls every segment's ends together, the body of its end
    point b gets ``f u`` at it, that of its start a gets ``-f u``, which is the generalized
    force ``f dL/dq`` (a wrapped geom's body gets the forces at its tangent points, where
    the string leaves it: the resultant of its pressure on the geom); for a tendon with an
    armature ``dL/dq`` and ``beta`` (:func:`_path_state`). Into :func:`_tendon_views` of
    ``T``; a wrap's slots are zero where the string does not touch its geom."""
    ns, n = _n_sites(p), int(p[H_N])
    reg, SL, JB = _tendon_views(p, T)
    pts = carve(T, _path_offset(p), (ns, 5))
    vP = carve(T, 18, (3,))
    vQ = carve(T, 21, (3,))
    for i in range(ns):
        for k in range(9):
            reg[i, k] = 0.0
    ol = int(p[H_OL])
    for l in range(int(p[H_NL])):
        lr = ol + W_L * l
        if p[lr + L_SP] == 0.0:
            continue
        if p[lr + L_SP] != SP_PATH:
            # a transmission of two sites: no spring or damper
            if p[lr + L_SP] == SP_CRANK:
                SL[l, 0], SL[l, 1] = _crank_geometry(p, lr, R, X, V, reg, T)
            else:
                SL[l, 0], SL[l, 1] = _refsite_geometry(p, lr, R, X, V, reg, T)
            SL[l, 2] = 0.0
            continue
        # one pass over the path: its length, its rate, the points' positions (from their
        # bodies' tree roots) and unit forces
        npts, L = _path_points(p, lr, R, X, T)
        Ld = 0.0
        for k in range(npts):
            i = int(pts[k, 0])
            b = int(pts[k, 1])
            if b >= 0:
                r = _root_of(p, b)
                for c in range(3):
                    reg[i, c] = pts[k, 2 + c] - X[r, c]
            if k == 0 or _on_geom(p, pts, k):
                continue
            a = int(pts[k - 1, 0])
            d0 = pts[k, 2] - pts[k - 1, 2]
            d1 = pts[k, 3] - pts[k - 1, 3]
            d2 = pts[k, 4] - pts[k - 1, 4]
            ln = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
            if ln > 0.0:
                g = 1.0 / ln
                _world_velocity(V, int(pts[k - 1, 1]), pts[k - 1, 2:5], vP)
                _world_velocity(V, b, pts[k, 2:5], vQ)
                L += ln
                Ld += g * (d0 * (vQ[0] - vP[0]) + d1 * (vQ[1] - vP[1]) + d2 * (vQ[2] - vP[2]))
                reg[i, 3] += g * d0
                reg[i, 4] += g * d1
                reg[i, 5] += g * d2
                reg[a, 3] -= g * d0
                reg[a, 4] -= g * d1
                reg[a, 5] -= g * d2
        SL[l, 0], SL[l, 1] = L, Ld
        SL[l, 2] = -p[lr + L_K] * _stretch(p, lr, L) - p[lr + L_DAMP] * Ld
        if p[lr + L_ARM] != 0.0:
            for c in range(n + 1):
                JB[l, c] = 0.0
            JB[l, n] = _path_state(p, lr, R, X, S, V, Ab, JB, l, 1.0, True, T)[2]


@_lazy("none(f8v, f8m, f8m, f8v, b1)")
def _path_armature(p, JB, M, F, bias):
    """The spatial tendons' armatures (kinetic energy ``a L'^2 / 2``, ``L' = (dL/dq) v``):
    ``M += a (dL/dq)^T (dL/dq)`` (``F`` unused), or with ``bias`` ``F -= a (dL/dq)^T beta``
    (``L'' = (dL/dq) a + beta``: the terms of Lagrange's equations beside ``a``; ``M``
    unused), from ``JB`` (:func:`_tendon_views`)."""
    ol, n = int(p[H_OL]), int(p[H_N])
    for l in range(int(p[H_NL])):
        lr = ol + W_L * l
        arm = p[lr + L_ARM]
        if p[lr + L_SP] == 0.0 or arm == 0.0:
            continue
        if bias:
            g = arm * JB[l, n]
            for c in range(n):
                F[c] -= g * JB[l, c]
        else:
            for r in range(n):
                if JB[l, r] != 0.0:
                    for c in range(n):
                        M[r, c] += arm * JB[l, r] * JB[l, c]


@_jit
def _root_of(p, b):
    """The root body of body ``b``'s tree (``b`` >= 0)."""
    ob = int(p[H_OB])
    while int(p[ob + W_B * b + B_PAR]) >= 0:
        b = int(p[ob + W_B * b + B_PAR])
    return b


@_jit
def _site_axes(p, i, R, A):
    """Site ``i``'s axes in the world into ``A`` (3, 3; columns: ``R_body R_site``; a world
    site's own)."""
    sr = int(p[H_OS]) + W_S * i
    b = int(p[sr + S_BODY])
    for r in range(3):
        for c in range(3):
            if b < 0:
                A[r, c] = p[sr + S_ROT + 3 * r + c]
            else:
                A[r, c] = (R[b, r, 0] * p[sr + S_ROT + c] + R[b, r, 1] * p[sr + S_ROT + 3 + c]
                           + R[b, r, 2] * p[sr + S_ROT + 6 + c])


@_jit
def _put_site(p, i, P, X, reg):
    """Site ``i``'s world point ``P`` into ``reg[i, :3]``, relative to its body's tree root
    (the frame of :func:`_at_tree_roots`; a world site's is not read)."""
    b = int(p[int(p[H_OS]) + W_S * i + S_BODY])
    if b >= 0:
        r = _root_of(p, b)
        for c in range(3):
            reg[i, c] = P[c] - X[r, c]


@_inline
def _two_sites(p, lr, R, X, T):
    """The first two sites of the two-site line at record ``lr``: ``(s0, os, P0, P1, v0, v1,
    A)``, its first site's number and the sites' offset, their world positions ``P0``,
    ``P1``, two slots for their velocities and the second site's axes ``A`` (views of the
    scratch ``T`` from 24 on; inlined: it returns views)."""
    s0 = int(p[lr + L_T0])
    P0 = carve(T, 24, (3,))
    P1 = carve(T, 27, (3,))
    A = carve(T, 36, (3, 3))
    _site_world(p, s0, R, X, P0)
    _site_world(p, s0 + 1, R, X, P1)
    _site_axes(p, s0 + 1, R, A)
    return s0, int(p[H_OS]), P0, P1, carve(T, 30, (3,)), carve(T, 33, (3,)), A


@_jit
def _crank_geometry(p, lr, R, X, V, reg, T):
    """A slider-crank's length and rate (MuJoCo's ``mjTRN_SLIDERCRANK``, before its gear):
    with ``d`` from the slider site to the crank site, ``a`` the slider's axis and ``r``
    the rod's length, ``L = a.d - sqrt(det)``, ``det = (a.d)^2 + r^2 - d.d`` (where ``det
    <= 0``, the rod too short to reach the axis, MuJoCo's ``L = a.d`` with ``dL/dd = a``,
    ``dL/da = d``); its rate ``dL/dd . (v_crank - v_slider) + dL/da . (w x a)`` (``w`` the
    slider body's angular velocity). Per unit force the crank site gets ``dL/dd``, the slider
    site ``-dL/dd`` and its body the torque ``a x dL/da`` (the generalized force is then
    MuJoCo's moment, ``dL/dd J + dL/da J_a``), into ``reg``. ``T``: scratch, from 24 on."""
    s0, os_, P0, P1, v0, v1, A = _two_sites(p, lr, R, X, T)
    a0, a1, a2 = A[0, 2], A[1, 2], A[2, 2]
    d0, d1, d2 = P0[0] - P1[0], P0[1] - P1[1], P0[2] - P1[2]
    rod = p[lr + L_ROD]
    av = d0 * a0 + d1 * a1 + d2 * a2
    det = av * av + rod * rod - (d0 * d0 + d1 * d1 + d2 * d2)
    if det <= 0.0:
        L = av
        gv0, gv1, gv2 = a0, a1, a2
        ga0, ga1, ga2 = d0, d1, d2
    else:
        sdet = np.sqrt(det)
        L = av - sdet
        c = 1.0 - av / sdet
        gv0, gv1, gv2 = a0 * c + d0 / sdet, a1 * c + d1 / sdet, a2 * c + d2 / sdet
        ga0, ga1, ga2 = d0 * c, d1 * c, d2 * c
    b0 = int(p[os_ + W_S * s0 + S_BODY])
    b1 = int(p[os_ + W_S * (s0 + 1) + S_BODY])
    _world_velocity(V, b0, P0, v0)
    _world_velocity(V, b1, P1, v1)
    Ld = gv0 * (v0[0] - v1[0]) + gv1 * (v0[1] - v1[1]) + gv2 * (v0[2] - v1[2])
    if b1 >= 0:
        w0, w1, w2 = V[b1, 0], V[b1, 1], V[b1, 2]
        Ld += ga0 * (w1 * a2 - w2 * a1) + ga1 * (w2 * a0 - w0 * a2) + ga2 * (w0 * a1 - w1 * a0)
    _put_site(p, s0, P0, X, reg)
    _put_site(p, s0 + 1, P1, X, reg)
    reg[s0, 3], reg[s0, 4], reg[s0, 5] = gv0, gv1, gv2
    reg[s0 + 1, 3], reg[s0 + 1, 4], reg[s0 + 1, 5] = -gv0, -gv1, -gv2
    reg[s0 + 1, 6] = a1 * ga2 - a2 * ga1
    reg[s0 + 1, 7] = a2 * ga0 - a0 * ga2
    reg[s0 + 1, 8] = a0 * ga1 - a1 * ga0
    return L, Ld


@_jit
def _refsite_geometry(p, lr, R, X, V, reg, T):
    """A site transmission with a reference site (MuJoCo's ``mjTRN_SITE`` with ``refsite``):
    with ``g = (gt, gr)`` the gear and ``Rr`` the reference site's axes, the length ``d .
    Rr gt + r . gr`` (``d`` the site's position from the reference site, ``r`` the rotation
    vector of the site's axes in the reference's, MuJoCo's ``mju_subQuat``), and MuJoCo's
    moment: the force ``Rr gt`` at the site and its opposite at the reference site, the
    torque ``Rr gr`` on the site's body and its opposite on the reference's, with the
    columns of the degrees of freedom that move both bodies cleared (the deepest body
    carrying both moves the two sites together; the frame's own rotation is not
    differentiated, as in MuJoCo). The clearing is the torque ``-d x Rr gt`` on that body
    (the third site record): its degrees of freedom and its ancestors' then see no force.
    The rate is the moment times the velocities: ``Rr gt . (v_s - v_r - w_c x d) + Rr gr .
    (w_s - w_r)``. ``T``: scratch, from 24 on."""
    s0, os_, P0, P1, v0, v1, A1 = _two_sites(p, lr, R, X, T)
    bs = int(p[os_ + W_S * s0 + S_BODY])
    br = int(p[os_ + W_S * (s0 + 1) + S_BODY])
    bc = int(p[os_ + W_S * (s0 + 2) + S_BODY])
    gt0, gt1, gt2 = p[lr + L_G], p[lr + L_G + 1], p[lr + L_G + 2]
    gr0, gr1, gr2 = p[lr + L_G + 3], p[lr + L_G + 4], p[lr + L_G + 5]
    L = 0.0
    Ld = 0.0
    _put_site(p, s0, P0, X, reg)
    _put_site(p, s0 + 1, P1, X, reg)
    if gt0 != 0.0 or gt1 != 0.0 or gt2 != 0.0:
        # the gear along the reference's axes, in the world
        w0 = A1[0, 0] * gt0 + A1[0, 1] * gt1 + A1[0, 2] * gt2
        w1 = A1[1, 0] * gt0 + A1[1, 1] * gt1 + A1[1, 2] * gt2
        w2 = A1[2, 0] * gt0 + A1[2, 1] * gt1 + A1[2, 2] * gt2
        d0, d1, d2 = P0[0] - P1[0], P0[1] - P1[1], P0[2] - P1[2]
        # (MuJoCo's Rr^T d . gt)
        L += ((A1[0, 0] * d0 + A1[1, 0] * d1 + A1[2, 0] * d2) * gt0
              + (A1[0, 1] * d0 + A1[1, 1] * d1 + A1[2, 1] * d2) * gt1
              + (A1[0, 2] * d0 + A1[1, 2] * d1 + A1[2, 2] * d2) * gt2)
        _world_velocity(V, bs, P0, v0)
        _world_velocity(V, br, P1, v1)
        u0, u1, u2 = v0[0] - v1[0], v0[1] - v1[1], v0[2] - v1[2]
        if bc >= 0:
            c0, c1, c2 = V[bc, 0], V[bc, 1], V[bc, 2]
            u0 -= c1 * d2 - c2 * d1
            u1 -= c2 * d0 - c0 * d2
            u2 -= c0 * d1 - c1 * d0
            reg[s0 + 2, 6] = -(d1 * w2 - d2 * w1)
            reg[s0 + 2, 7] = -(d2 * w0 - d0 * w2)
            reg[s0 + 2, 8] = -(d0 * w1 - d1 * w0)
        Ld += w0 * u0 + w1 * u1 + w2 * u2
        reg[s0, 3], reg[s0, 4], reg[s0, 5] = w0, w1, w2
        reg[s0 + 1, 3], reg[s0 + 1, 4], reg[s0 + 1, 5] = -w0, -w1, -w2
    if gr0 != 0.0 or gr1 != 0.0 or gr2 != 0.0:
        # the rotation from the reference's axes to the site's, in the reference's frame
        # (Rr^T Rs), as a unit quaternion, then its rotation vector (angle in (-pi, pi])
        A0 = carve(T, 45, (3, 3))
        Q = carve(T, 54, (3, 3))
        _site_axes(p, s0, R, A0)
        for r in range(3):
            for c in range(3):
                Q[r, c] = A1[0, r] * A0[0, c] + A1[1, r] * A0[1, c] + A1[2, r] * A0[2, c]
        qw, qx, qy, qz = _matrix_quat(Q)
        x0, x1, x2 = _rotvec(qw, qx, qy, qz)
        L += x0 * gr0 + x1 * gr1 + x2 * gr2
        w0 = A1[0, 0] * gr0 + A1[0, 1] * gr1 + A1[0, 2] * gr2
        w1 = A1[1, 0] * gr0 + A1[1, 1] * gr1 + A1[1, 2] * gr2
        w2 = A1[2, 0] * gr0 + A1[2, 1] * gr1 + A1[2, 2] * gr2
        if bs >= 0:
            Ld += w0 * V[bs, 0] + w1 * V[bs, 1] + w2 * V[bs, 2]
        if br >= 0:
            Ld -= w0 * V[br, 0] + w1 * V[br, 1] + w2 * V[br, 2]
        reg[s0, 6], reg[s0, 7], reg[s0, 8] = w0, w1, w2
        reg[s0 + 1, 6], reg[s0 + 1, 7], reg[s0 + 1, 8] = -w0, -w1, -w2
    return L, Ld


@_jit
def _matrix_quat(Q):
    """The unit quaternion ``(w, x, y, z)``, ``w >= 0``, of the rotation matrix ``Q``
    (Shepperd's method: the largest of ``w`` and the axes' components first)."""
    tr = Q[0, 0] + Q[1, 1] + Q[2, 2]
    if tr > 0.0:
        w = 0.5 * np.sqrt(1.0 + tr)
        x = 0.25 * (Q[2, 1] - Q[1, 2]) / w
        y = 0.25 * (Q[0, 2] - Q[2, 0]) / w
        z = 0.25 * (Q[1, 0] - Q[0, 1]) / w
    elif Q[0, 0] > Q[1, 1] and Q[0, 0] > Q[2, 2]:
        x = 0.5 * np.sqrt(1.0 + Q[0, 0] - Q[1, 1] - Q[2, 2])
        w = 0.25 * (Q[2, 1] - Q[1, 2]) / x
        y = 0.25 * (Q[0, 1] + Q[1, 0]) / x
        z = 0.25 * (Q[0, 2] + Q[2, 0]) / x
    elif Q[1, 1] > Q[2, 2]:
        y = 0.5 * np.sqrt(1.0 - Q[0, 0] + Q[1, 1] - Q[2, 2])
        w = 0.25 * (Q[0, 2] - Q[2, 0]) / y
        x = 0.25 * (Q[0, 1] + Q[1, 0]) / y
        z = 0.25 * (Q[1, 2] + Q[2, 1]) / y
    else:
        z = 0.5 * np.sqrt(1.0 - Q[0, 0] - Q[1, 1] + Q[2, 2])
        w = 0.25 * (Q[1, 0] - Q[0, 1]) / z
        x = 0.25 * (Q[0, 2] + Q[2, 0]) / z
        y = 0.25 * (Q[1, 2] + Q[2, 1]) / z
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    return w, x, y, z


@_lazy("none(f8v, f8m, f8m, f8v, b1, f8m)")
def _site_forces(p, reg, SL, Ta, passive, f):
    """``f -= [P x F + tau; F]`` for every site (a point ``P`` of body ``b``, the force ``F``
    on it, a torque ``tau`` on the body): the spatial tendons' tensions at their sites (:func:`_tendon_geometry`), with
    ``passive`` their springs' and dampers' and always their actuators' (the last ``nl``
    values of the actuators' scratch ``Ta``, :func:`_actuation`), into the bodies' forces
    ``f`` (nb, 6) of recursive Newton--Euler (whose ``-S^T f`` is then ``+J^T F``)."""
    ol, os_ = int(p[H_OL]), int(p[H_OS])
    nl, na = int(p[H_NL]), int(p[H_NA])
    for l in range(nl):
        lr = ol + W_L * l
        if p[lr + L_SP] == 0.0:
            continue
        ten = Ta[na + nl + l]
        if passive:
            ten += SL[l, 2]
        if ten == 0.0:
            continue
        s0, nsl = int(p[lr + L_T0]), int(p[lr + L_NT])
        for i in range(s0, s0 + nsl):
            b = int(p[os_ + W_S * i])
            if b < 0:
                continue
            P0, P1, P2 = reg[i, 0], reg[i, 1], reg[i, 2]
            f0, f1, f2 = ten * reg[i, 3], ten * reg[i, 4], ten * reg[i, 5]
            f[b, 0] -= P1 * f2 - P2 * f1 + ten * reg[i, 6]
            f[b, 1] -= P2 * f0 - P0 * f2 + ten * reg[i, 7]
            f[b, 2] -= P0 * f1 - P1 * f0 + ten * reg[i, 8]
            f[b, 3] -= f0
            f[b, 4] -= f1
            f[b, 5] -= f2


# =========================================================================== dynamics
@_jit
def _inertias(p, R, X, C, Cc):
    """Every body's spatial inertia at the origin into ``C`` (nb, 13) and its centroid
    into ``Cc`` (nb, 3) (:func:`_body_inertia`)."""
    for b in range(int(p[H_NB])):
        _body_inertia(p, b, R, X, C, b, Cc)


@_jit
def _mass_into(p, S, Wb, C, M, T):
    """``M = S^T H S`` from the twists ``S`` and the body inertias ``C`` (overwritten by
    the composite inertias): the composite-rigid-body algorithm, then the armatures
    (``T``: scratch, 6 values)."""
    nb_, n = int(p[H_NB]), int(p[H_N])
    ob, oj = int(p[H_OB]), int(p[H_OJ])
    for r in range(n):
        for c in range(n):
            M[r, c] = 0.0
    for b in range(nb_ - 1, -1, -1):
        par = int(p[ob + W_B * b + B_PAR])
        if par >= 0:
            for i in range(13):
                C[par, i] += C[b, i]
    f = carve(T, 0, (6,))
    for b in range(nb_):
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        for c in range(q0, q0 + nq):
            _inertia_apply(C, b, S, c, f)
            for c2 in range(q0, c + 1):
                acc = 0.0
                for i in range(6):
                    acc += S[c2, i] * f[i]
                M[c, c2] = acc
                M[c2, c] = acc
            anc = int(p[rec + B_PAR])
            while anc >= 0:
                ra = ob + W_B * anc
                a0, na = int(p[ra + B_Q0]), int(p[ra + B_NQ])
                for c2 in range(a0, a0 + na):
                    acc = 0.0
                    for i in range(6):
                        acc += S[c2, i] * f[i]
                    M[c, c2] = acc
                    M[c2, c] = acc
                anc = int(p[ra + B_PAR])
    # armatures: a u'^2 / 2 per degree of freedom, u = q' (hinge, slide), W p' (ball)
    for jj in range(int(p[H_NJ])):
        jr = oj + W_J * jj
        a = int(p[jr + J_Q])
        if int(p[jr + J_TYPE]) == BALL:
            for k in range(3):
                ak = p[jr + J_ARM + k]
                if ak != 0.0:
                    for r in range(4):
                        for c in range(4):
                            M[a + r, a + c] += ak * Wb[jj, k, r] * Wb[jj, k, c]
        else:
            M[a, a] += p[jr + J_ARM]
    # the tendons' armatures: a L'^2 / 2, L' = c . q'
    ol, ot = int(p[H_OL]), int(p[H_OT])
    for l in range(int(p[H_NL])):
        lr = ol + W_L * l
        arm = p[lr + L_ARM]
        if arm != 0.0 and p[lr + L_SP] == 0.0:
            t0, nt = ot + 2 * int(p[lr + L_T0]), int(p[lr + L_NT])
            for t1 in range(nt):
                for t2 in range(nt):
                    M[int(p[t0 + 2 * t1]), int(p[t0 + 2 * t2])] += (
                        arm * p[t0 + 2 * t1 + 1] * p[t0 + 2 * t2 + 1])
    if _n_sites(p) > 0:
        JB = _tendon_views(p, T)[2]
        _path_armature(p, JB, M, JB[0], False)


@_jit
def _force_into(p, q, v, R, X, S, V, Ab, Wb, U, pd, C, Cc, F, T):
    """``F`` from the kinematics at ``(q, v)`` and the body inertias ``C`` (kept) with their
    centroids ``Cc``: recursive Newton--Euler at ``q'' = 0``, then the joints' passive
    forces and the armatures' velocity term, the tendons and the actuators (``T``: scratch,
    :func:`_scratch_size`; the spatial tendons' geometry there from
    :func:`_tendon_geometry`)."""
    nb_, n = int(p[H_NB]), int(p[H_N])
    ob, oj = int(p[H_OB]), int(p[H_OJ])
    gx, gy, gz = p[H_GX], p[H_GY], p[H_GZ]
    f = carve(T, 0, (nb_, 6))
    t1 = carve(T, 6 * nb_, (6,))
    t2 = carve(T, 6 * nb_ + 6, (6,))
    for b in range(nb_):
        _inertia_apply(C, b, Ab, b, t1)
        _inertia_apply(C, b, V, b, t2)
        w0, w1, w2, o0, o1, o2 = V[b, 0], V[b, 1], V[b, 2], V[b, 3], V[b, 4], V[b, 5]
        n0, n1, n2, f0, f1, f2 = t2[0], t2[1], t2[2], t2[3], t2[4], t2[5]
        # V x* (I V) = [w x n + vo x f; w x f], with vo x f = vo x (m vo - h x w) taken as
        # vo x e, e = -h x w (f's part beside m vo, which _inertia_apply summed into f):
        # m vo x vo is zero, but summed from rounded products it is eps m |vo|^2, an error
        # on joints whose torques are small beside it (dm_control's swimmer: 3.5e-18 N m
        # on a hinge whose torque is 0, over its pivot 8.4e-6: 4e-13 rad/s^2)
        h0, h1, h2 = C[b, 1], C[b, 2], C[b, 3]
        e0, e1, e2 = h2 * w1 - h1 * w2, h0 * w2 - h2 * w0, h1 * w0 - h0 * w1
        t1[0] += w1 * n2 - w2 * n1 + o1 * e2 - o2 * e1
        t1[1] += w2 * n0 - w0 * n2 + o2 * e0 - o0 * e2
        t1[2] += w0 * n1 - w1 * n0 + o0 * e1 - o1 * e0
        t1[3] += w1 * f2 - w2 * f1
        t1[4] += w2 * f0 - w0 * f2
        t1[5] += w0 * f1 - w1 * f0
        mg = p[ob + W_B * b + B_MG]
        g0, g1, g2 = mg * gx, mg * gy, mg * gz
        c0, c1, c2 = Cc[b, 0], Cc[b, 1], Cc[b, 2]
        # minus the gravity force [c x f_g; f_g]
        t1[0] -= c1 * g2 - c2 * g1
        t1[1] -= c2 * g0 - c0 * g2
        t1[2] -= c0 * g1 - c1 * g0
        t1[3] -= g0
        t1[4] -= g1
        t1[5] -= g2
        for i in range(6):
            f[b, i] = t1[i]
    # the actuators (before the tree's sums: their tensions along spatial tendons act at
    # the sites), then the spatial tendons' forces on their sites' bodies
    na = int(p[H_NA])
    fa = carve(T, 6 * nb_ + 15, (n,))
    Ta = carve(T, 6 * nb_ + 15 + n, (na + 2 * int(p[H_NL]),))
    reg, SL, _ = _tendon_views(p, T)
    if na > 0:
        _actuation(p, q, v, fa, Ta, SL, R, X, V, f)
    if _n_sites(p) > 0:
        if na == 0:
            for i in range(Ta.shape[0]):
                Ta[i] = 0.0
        _site_forces(p, reg, SL, Ta, True, f)
    for c in range(F.shape[0]):
        F[c] = 0.0
    _to_joints(p, S, f, -1.0, F)
    # passive forces of the joints (MuJoCo's qfrc_passive) and the armatures' term
    dif = carve(T, 6 * nb_ + 12, (3,))           # (written where read: a ball's spring)
    for jj in range(int(p[H_NJ])):
        jr = oj + W_J * jj
        a = int(p[jr + J_Q])
        if int(p[jr + J_TYPE]) == BALL:
            kst = p[jr + J_K]
            if kst != 0.0:
                _ball_offset(p, jr, q, a, dif)
            for k in range(3):
                # -damping u_k, and -a (W' p')_k = +2 a pd u_k (the armature's bias)
                tk = (-p[jr + J_DAMP + k] + 2.0 * p[jr + J_ARM + k] * pd[jj]) * U[jj, k]
                if kst != 0.0:
                    tk -= kst * dif[k]
                for c in range(4):
                    F[a + c] += Wb[jj, k, c] * tk
        else:
            F[a] -= p[jr + J_DAMP] * v[a] + p[jr + J_K] * (q[a] - p[jr + J_SREF])
    # the fixed tendons' springs and dampers, the spatial ones' armatures, the actuators
    _lines_passive(p, q, v, F)
    if _n_sites(p) > 0:
        JB = _tendon_views(p, T)[2]
        _path_armature(p, JB, JB, F, True)
    if na > 0:
        for c in range(F.shape[0]):
            F[c] += fa[c]


@_jit
def _to_joints(p, S, f, sign, out):
    """The second half of recursive Newton--Euler: the bodies' forces ``f`` (nb, 6) summed
    leaves to root (in place: each becomes its subtree's), then ``out[c] += sign S_c . f_b``
    for every coordinate ``c`` of body ``b``."""
    ob = int(p[H_OB])
    for b in range(int(p[H_NB]) - 1, -1, -1):
        par = int(p[ob + W_B * b + B_PAR])
        if par >= 0:
            for i in range(6):
                f[par, i] += f[b, i]
    for b in range(int(p[H_NB])):
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        for c in range(q0, q0 + nq):
            acc = 0.0
            for i in range(6):
                acc += S[c, i] * f[b, i]
            out[c] += sign * acc


@_jit
def _at_tree_roots(p, X, S, V, Ab, T):
    """Move the spatial quantities of every body from the world origin to the origin of
    its tree's root body (in place): twists, velocities and bias accelerations gain
    ``w x o`` (a motion vector at the point ``o``), origins become ``X - o``.

    Why: a spatial inertia about a point at distance ``d`` from a body's centroid holds
    ``m d^2`` beside the body's own inertia ``Ic``; the mass matrix then takes ``Ic`` back
    as a difference of such terms, losing ``m d^2 / |Ic|`` of its accuracy. A 0.2 g body
    (inertias 1e-8 kg m^2) 1 m from the world origin lost 2000 times eps in ``M`` and
    3e-9 relative in its angular accelerations; at its own tree's root the lever arms are
    the tree's own size (MuJoCo works about each tree's centre of mass for the same
    reason). ``M = S^T H S`` and ``F = -S^T f`` do not depend on the point (the
    coordinates' twists and the forces move together). ``T``: scratch, ``4 nb`` values."""
    nb_ = int(p[H_NB])
    ob = int(p[H_OB])
    root = carve(T, 0, (nb_,))                   # (body numbers, as floats)
    o = carve(T, nb_, (nb_, 3))
    for b in range(nb_):
        par = int(p[ob + W_B * b + B_PAR])
        root[b] = b if par < 0 else root[par]
    for b in range(nb_):
        r = int(root[b])
        if r == b:
            for i in range(3):
                o[b, i] = X[b, i]
    for b in range(nb_):
        r = int(root[b])
        o0, o1, o2 = o[r, 0], o[r, 1], o[r, 2]
        for i in range(3):
            X[b, i] -= o[r, i]
        for M6 in (V, Ab):
            w0, w1, w2 = M6[b, 0], M6[b, 1], M6[b, 2]
            M6[b, 3] += w1 * o2 - w2 * o1
            M6[b, 4] += w2 * o0 - w0 * o2
            M6[b, 5] += w0 * o1 - w1 * o0
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        for c in range(q0, q0 + nq):
            w0, w1, w2 = S[c, 0], S[c, 1], S[c, 2]
            S[c, 3] += w1 * o2 - w2 * o1
            S[c, 4] += w2 * o0 - w0 * o2
            S[c, 5] += w0 * o1 - w1 * o0


@_unit("none(f8v, f8v, f8m)")
def mass(p, q, M):
    """``M(q) = S^T H S`` (composite-rigid-body algorithm in the coordinates ``q``, with the
    armatures) into ``M`` (n, n)."""
    _mass(p, q, M, np.empty(_work_size(p)))


@_jit
def _mass(p, q, M, w):
    """:func:`mass` with the buffer ``w``."""
    R, X, S, V, Ab, Wb, U, pd, C, Cc, T = _work(p, w)
    _kin(p, q, q, R, X, S, V, Ab, Wb, U, pd, T)
    if _n_sites(p) > 0:
        _tendon_geometry(p, R, X, S, V, Ab, T)
    _at_tree_roots(p, X, S, V, Ab, T)
    _inertias(p, R, X, C, Cc)
    _mass_into(p, S, Wb, C, M, T)


@_unit("none(f8v, f8v, f8v, f8v, f8v)")
def force(p, q, v, ext, F):
    """``F(q, v) = -S^T (f_inertial - f_gravity)`` (recursive Newton--Euler at ``q'' = 0``)
    plus the joints' damping, stiffness and the armatures' velocity term, into ``F`` (n,)."""
    _force(p, q, v, F, np.empty(_work_size(p)))


@_jit
def _force(p, q, v, F, w):
    """:func:`force` with the buffer ``w``."""
    R, X, S, V, Ab, Wb, U, pd, C, Cc, T = _work(p, w)
    _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T)
    if _n_sites(p) > 0:
        _tendon_geometry(p, R, X, S, V, Ab, T)
    _at_tree_roots(p, X, S, V, Ab, T)
    _inertias(p, R, X, C, Cc)
    _force_into(p, q, v, R, X, S, V, Ab, Wb, U, pd, C, Cc, F, T)


@_unit("none(f8v, f8v, f8v, f8v, f8m, f8v)")
def mass_force(p, q, v, ext, M, F):
    """:func:`mass` and :func:`force` in one pass: one kinematics, one set of body
    inertias (what the compiled model functions call: :mod:`gaussopt.multibody.common.cfuncs`)."""
    _mass_force(p, q, v, M, F, np.empty(_work_size(p)))


@_jit
def _mass_force(p, q, v, M, F, w):
    """:func:`mass_force` with the buffer ``w``."""
    R, X, S, V, Ab, Wb, U, pd, C, Cc, T = _work(p, w)
    _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T)
    if _n_sites(p) > 0:
        _tendon_geometry(p, R, X, S, V, Ab, T)
    _at_tree_roots(p, X, S, V, Ab, T)
    _inertias(p, R, X, C, Cc)
    _force_into(p, q, v, R, X, S, V, Ab, Wb, U, pd, C, Cc, F, T)
    _mass_into(p, S, Wb, C, M, T)


@_unit("f8(f8v, f8v, f8v)")
def energy(p, q, v):
    """Kinetic energy ``V^T I V / 2`` of the bodies and ``a u^2 / 2`` of the armatures, plus
    the potentials of gravity and of the joints' stiffness."""
    return _energy(p, q, v, np.empty(_work_size(p)))


@_jit
def _energy(p, q, v, w):
    """:func:`energy` with the buffer ``w``."""
    nb_ = int(p[H_NB])
    ob, oj = int(p[H_OB]), int(p[H_OJ])
    R, X, S, V, Ab, Wb, U, pd, C, Cc, T = _work(p, w)
    _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T)
    _inertias(p, R, X, C, Cc)
    t = carve(T, 0, (12,))
    scratch = T
    T = 0.0
    Vp = 0.0
    for b in range(nb_):
        _inertia_apply(C, b, V, b, t)
        for i in range(6):
            T += 0.5 * V[b, i] * t[i]
        mg = p[ob + W_B * b + B_MG]
        Vp -= mg * (p[H_GX] * Cc[b, 0] + p[H_GY] * Cc[b, 1] + p[H_GZ] * Cc[b, 2])
    for jj in range(int(p[H_NJ])):
        jr = oj + W_J * jj
        nd = 3 if int(p[jr + J_TYPE]) == BALL else 1
        for k in range(nd):
            T += 0.5 * p[jr + J_ARM + k] * U[jj, k] * U[jj, k]
        a = int(p[jr + J_Q])
        if nd == 1:
            Vp += 0.5 * p[jr + J_K] * (q[a] - p[jr + J_SREF]) ** 2
        elif p[jr + J_K] != 0.0:
            # the ball's spring: -k times the rotation vector is the gradient of k |r|^2 / 2
            _ball_offset(p, jr, q, a, t)
            Vp += 0.5 * p[jr + J_K] * (t[0] * t[0] + t[1] * t[1] + t[2] * t[2])
    ol = int(p[H_OL])
    for l in range(int(p[H_NL])):
        lr = ol + W_L * l
        if p[lr + L_SP] != 0.0:
            if p[lr + L_K] != 0.0:
                x = _stretch(p, lr, _tendon_length(p, lr, R, X, V, scratch, False))
                Vp += 0.5 * p[lr + L_K] * x * x
            if p[lr + L_ARM] != 0.0:
                T += 0.5 * p[lr + L_ARM] * _tendon_length(p, lr, R, X, V, scratch, True) ** 2
            continue
        if p[lr + L_K] != 0.0:
            x = _stretch(p, lr, _line(p, l, q))
            Vp += 0.5 * p[lr + L_K] * x * x
            T += 0.5 * p[lr + L_ARM] * _line(p, l, v) ** 2
        elif p[lr + L_ARM] != 0.0:
            T += 0.5 * p[lr + L_ARM] * _line(p, l, v) ** 2
    return T + Vp


# =========================================================================== the recursive step
#: (the layout of its output: gaussopt.core.model_interface.recursive_parts)
#: the statuses of :func:`recursive_step`: answered (the engine then compares its backward
#: errors and pivot with the dense kernel's thresholds), a row that vanished identically
#: (the dense kernel decides it), an articulated inertia or a Delassus matrix not positive
#: definite
REC_OK, REC_ROWS, REC_INDEFINITE = 0, 1, 2


out_size = recursive_size      # (the length of recursive_step's ``out``)


@_jit
def _spatial_matrix(C, b, I6):
    """Body ``b``'s spatial inertia ``C[b] = (m, h, Ibar)`` as the 6 x 6 matrix
    ``[[Ibar, [h]x], [-[h]x, m 1]]`` (:func:`_inertia_apply` as a matrix)."""
    m, h0, h1, h2 = C[b, 0], C[b, 1], C[b, 2], C[b, 3]
    for i in range(3):
        for j in range(3):
            I6[i, j] = C[b, 4 + 3 * i + j]
            I6[3 + i, 3 + j] = m if i == j else 0.0
    I6[0, 3], I6[0, 4], I6[0, 5] = 0.0, -h2, h1
    I6[1, 3], I6[1, 4], I6[1, 5] = h2, 0.0, -h0
    I6[2, 3], I6[2, 4], I6[2, 5] = -h1, h0, 0.0
    for i in range(3):
        for j in range(3):
            I6[3 + j, i] = I6[i, 3 + j]            # (-[h]x = [h]x^T: symmetric)


@_jit
def _local_mass(p, b, q, Wb, D, q0, daug):
    """Add to the block ``D`` of body ``b`` (rows ``q0..``, lower triangle) what ``M`` holds
    within one joint only: the armatures (a hinge's or slide's on its diagonal, a ball's
    ``sum_k a_k W_k^T W_k``), and for each ball ``d p p^T``, ``d`` the mean diagonal of its
    block (stored in ``daug``; 1 where that is zero). The ball's normalization row ``p . p''
    = -p' . p'`` then holds at the minimum without a multiplier (module docstring of
    :func:`recursive_step`)."""
    oj = int(p[H_OJ])
    rec = int(p[H_OB]) + W_B * b
    j0, nj = int(p[rec + B_J0]), int(p[rec + B_NJ])
    for jj in range(j0, j0 + nj):
        jr = oj + W_J * jj
        a = int(p[jr + J_Q])
        o = a - q0
        if int(p[jr + J_TYPE]) == BALL:
            for k in range(3):
                ak = p[jr + J_ARM + k]
                if ak != 0.0:
                    for r in range(4):
                        for c in range(r + 1):
                            D[q0 + o + r, o + c] += ak * Wb[jj, k, r] * Wb[jj, k, c]
            d = 0.0
            for r in range(4):
                d += D[q0 + o + r, o + r]
            d *= 0.25
            if not (d > 0.0 and d < 1.0e300):
                d = 1.0
            daug[jj] = d
            for r in range(4):
                for c in range(r + 1):
                    D[q0 + o + r, o + c] += d * q[a + r] * q[a + c]
        else:
            D[q0 + o, o] += p[jr + J_ARM]


@_jit
def _block_solve(D, Li, q0, nq, x):
    """``x[q0:q0 + nq] = D_b^-1 x[q0:q0 + nq]`` with the Cholesky factor of body ``b``'s
    block in ``D`` (rows ``q0..``) and its pivots' inverses in ``Li``."""
    for i in range(nq):
        acc = x[q0 + i]
        for k in range(i):
            acc -= D[q0 + i, k] * x[q0 + k]
        x[q0 + i] = acc * Li[q0 + i]
    for i in range(nq - 1, -1, -1):
        acc = x[q0 + i]
        for k in range(i + 1, nq):
            acc -= D[q0 + k, i] * x[q0 + k]
        x[q0 + i] = acc * Li[q0 + i]


@_unit("i8(f8v, f8v, f8v, f8v)")
def recursive_step(p, q, v, out):
    """The Gauss step of a tree in O(n) (``O(n k^2)`` with ``k`` rows beside the balls'
    normalizations: closures and couplings): the articulated-body algorithm (Featherstone
    2008, sec. 7.3; Vereshchagin's and Popov's recursion, derived from Gauss's principle),
    verified by recursive Newton--Euler. Writes ``out`` (its layout:
    :func:`gaussopt.core.model_interface.recursive_parts`), returns a status
    (:data:`REC_OK`, ...).

    Why it is the dense kernel's step: for the balls' rows the Gauss function's minimum on
    them is the unconstrained minimum of ``1/2 a^T Mt a - a^T (F + sum d_j p_j b_j)``
    with ``Mt = M + sum d_j p_j p_j^T`` (``p_j`` the Euler parameters of ball ``j`` in its
    four columns, ``b_j = -p_j' . p_j'`` its row's right-hand side, any ``d_j > 0``):
    ``p_j`` is in the null space of ``M``'s rows of that ball (``S W p = 0``, ``W p = 0``)
    and ``p_j . F = 0`` (every force of the kind enters a ball through ``W^T``), so
    the stationarity ``M a - F + d_j p_j (p_j . a - b_j) = 0`` projected on ``p_j`` gives
    ``p_j . a = b_j``: the row holds with a zero multiplier. ``Mt`` differs from ``M`` only
    within single joints (as the armatures), so the articulated-body recursion factors it:
    leaves to root ``U_b = IA_b S_b``, ``D_b = S_b^T U_b + (joint-local terms)``,
    ``IA_parent += IA_b - U_b D_b^-1 U_b^T`` (every spatial quantity at the tree root's
    origin, :func:`_at_tree_roots`: no transforms between bodies), the bias ``pA``, then
    root to leaves ``a_b = D_b^-1 (u_b - U_b^T alpha_parent)`` (:func:`_ab_solve`). The
    ``D_b`` are the pivot blocks of ``Mt`` eliminated leaves first (the order of
    :func:`gaussopt.gauss.dense_algebra.tree_ltl`), so their smallest Cholesky pivot over
    ``sqrt(trace(M) / n)`` is the dense kernel's ``dmin``.

    The other rows ``C a = c`` (closures, couplings: ``k`` of them) enter as in the
    range-space form of the dense kernel, through the same factorization: ``a0 = Mt^-1 Ft``
    and ``X = Mt^-1 C^T`` (``k + 1`` solves, each O(n)), the Delassus matrix ``G = C X`` (k
    x k) with its rows and columns scaled by the rows' norms, factored by Cholesky, ``lam =
    G^-1 (c - C a0)``, ``a = a0 + X lam``. Their constraint forces ``C^T lam`` enter a ball
    through ``W^T`` too (their columns are combinations of the twists), so the balls' rows
    still hold with zero multipliers. Whether those rows may be solved so (their rank,
    vanished rows, a folded direction) is not decided here: the engine makes the dense
    kernel's own rank decision on the rows first
    (:func:`gaussopt.gauss.model_step._tree_step`) and takes this answer only where every
    row is kept; a Delassus pivot that is not positive refuses (:data:`REC_INDEFINITE`).

    Verification, in O(n k) as well: ``M a`` by recursive Newton--Euler with the
    accelerations ``a`` (no velocity, no gravity), so ``g = M a - F``; each ball's multiplier
    is the least-squares one, ``lam_j = p_j . (g - C^T lam)_j / |p_j|^2``; the stationarity
    residual ``g - A^T lam`` over ``sqrt(sum M_ii^2) |a| + |F|`` (a lower bound of
    ``|M|_F``: at least the dense kernel's backward error), the normalized rows' residual
    over ``|a| + |bn|`` (a lower bound of ``|An| |a| + |bn|`` for the balls' rows, whose
    singular values are 1, and for unit rows beside them)."""
    nb_, n, m, nj = int(p[H_NB]), int(p[H_N]), int(p[H_M]), int(p[H_NJ])
    nq_max = _nq_max(p)
    k = m - int(p[H_NBALL])
    size = (_work_size(p) + 6 + 7 * n + 6 * n + n * nq_max + 6 * nq_max + nj + 13 * nb_
            + 36 * nb_ + 18 * nb_)
    if k > 0:
        size += k * n + k * k + 2 * k
    return _recursive(p, q, v, out, nq_max, k, np.empty(size))


@_jit
def _nq_max(p):
    """The most coordinates of one body (at least 1)."""
    ob = int(p[H_OB])
    nq_max = 1
    for b in range(int(p[H_NB])):
        nq_max = max(nq_max, int(p[ob + W_B * b + B_NQ]))
    return nq_max


@_jit
def _ab_solve(p, S, Ub, D, Li, u, z, pA, al, x):
    """``x = Mt^-1 u`` with the articulated-body factorization of ``Mt``
    (:func:`recursive_step`: the blocks' Cholesky factors in ``D`` and ``Li``, ``Ub``):
    leaves to root the bias forces ``pA``, root to leaves the accelerations, whose bodies'
    spatial accelerations are left in ``al`` (``u`` overwritten; ``z``: scratch, n)."""
    nb_ = int(p[H_NB])
    ob = int(p[H_OB])
    for b in range(nb_):
        for i in range(6):
            pA[b, i] = 0.0
    for b in range(nb_ - 1, -1, -1):
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        par = int(p[rec + B_PAR])
        for c in range(q0, q0 + nq):
            acc = u[c]
            for i in range(6):
                acc -= S[c, i] * pA[b, i]
            u[c] = acc
            z[c] = acc
        if par >= 0:
            _block_solve(D, Li, q0, nq, z)
            for i in range(6):
                acc = pA[b, i]
                for c in range(q0, q0 + nq):
                    acc += Ub[c, i] * z[c]
                pA[par, i] += acc
    for b in range(nb_):
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        par = int(p[rec + B_PAR])
        for i in range(6):
            al[b, i] = al[par, i] if par >= 0 else 0.0
        for c in range(q0, q0 + nq):
            acc = u[c]
            for i in range(6):
                acc -= Ub[c, i] * al[b, i]
            x[c] = acc
        _block_solve(D, Li, q0, nq, x)
        for c in range(q0, q0 + nq):
            for i in range(6):
                al[b, i] += S[c, i] * x[c]


@_jit
def _recursive(p, q, v, out, nq_max, k, w):
    """:func:`recursive_step` with the buffer ``w``: :func:`_work`'s arrays, then the
    recursion's, then (``k`` rows beside the balls') the rows and the Delassus matrix."""
    nb_, n, m = int(p[H_NB]), int(p[H_N]), int(p[H_M])
    ob, oj, nj = int(p[H_OB]), int(p[H_OJ]), int(p[H_NJ])
    nball = m - k
    R, X, S, V, Ab, Wb, U, pd, C, Cc, T = _work(p, w)
    _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T)
    a, g, F, lam, res, sc = recursive_parts(out, n, m)
    # the recursion's arrays, after _work's
    o = _work_size(p)
    f6 = carve(w, o, (6,))
    o += 6
    diag, Li, u, z, st_, u2, a0 = (
        carve(w, o, (n,)), carve(w, o + n, (n,)), carve(w, o + 2 * n, (n,)),
        carve(w, o + 3 * n, (n,)), carve(w, o + 4 * n, (n,)), carve(w, o + 5 * n, (n,)),
        carve(w, o + 6 * n, (n,)))
    o += 7 * n
    Ub = carve(w, o, (n, 6))
    o += 6 * n
    D = carve(w, o, (n, nq_max))
    for i in range(n):
        for j in range(nq_max):
            D[i, j] = 0.0
    o += n * nq_max
    Y = carve(w, o, (nq_max, 6))
    o += 6 * nq_max
    daug = carve(w, o, (nj,))
    for i in range(nj):
        daug[i] = 0.0
    o += nj
    Cm = carve(w, o, (nb_, 13))
    o += 13 * nb_
    IA = carve(w, o, (nb_, 6, 6))
    o += 36 * nb_
    pA = carve(w, o, (nb_, 6))
    al = carve(w, o + 6 * nb_, (nb_, 6))
    fh = carve(w, o + 12 * nb_, (nb_, 6))
    o += 18 * nb_
    if k > 0:
        # the rows (all m: the balls' first) into the output, where the engine's rank
        # decision reads them (recursive_rows), from the kinematics about the world origin
        # (before _at_tree_roots moves it; the rows do not depend on the point)
        Af, br = recursive_rows(out, n, m)
        Ar = carve(Af, 0, (m, n))
        Xr = carve(w, o, (k, n))                    # row i: Mt^-1 C_i^T
        G = carve(w, o + k * n, (k, k))
        sk = carve(w, o + k * n + k * k, (k,))      # the rows' inverse norms
        lk = carve(w, o + k * n + k * k + k, (k,))  # the scaled right-hand side, then lam
        _ball_rows(p, q, v, br, Ar, br, False, True, True)
        _closure_rows(p, q, v, br, Ar, br, False, True, True, R, X, S, V, Ab, T)
        for i in range(k):
            nrm = LA.norm2(Ar[nball + i])
            if not nrm > 0.0:
                return REC_ROWS                   # (a vanished row: the dense kernel's)
            sk[i] = 1.0 / nrm
    _at_tree_roots(p, X, S, V, Ab, T)
    _inertias(p, R, X, C, Cc)
    _force_into(p, q, v, R, X, S, V, Ab, Wb, U, pd, C, Cc, F, T)
    for b in range(nb_):
        for i in range(13):
            Cm[b, i] = C[b, i]
    # leaves to root: articulated inertias, the blocks D_b and their factors; beside them
    # the composite inertias Cm, for the diagonal of M (its armatures added after)
    for b in range(nb_):
        _spatial_matrix(C, b, IA[b])
    dmin = np.inf
    for b in range(nb_ - 1, -1, -1):
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        par = int(p[rec + B_PAR])
        for c in range(q0, q0 + nq):
            _inertia_apply(Cm, b, S, c, f6)
            acc = 0.0
            for i in range(6):
                acc += S[c, i] * f6[i]
            diag[c] = acc
        if par >= 0:
            for i in range(13):
                Cm[par, i] += Cm[b, i]
        I6 = IA[b]
        for c in range(q0, q0 + nq):
            for i in range(6):
                acc = 0.0
                for kk in range(6):
                    acc += I6[i, kk] * S[c, kk]
                Ub[c, i] = acc
        for i in range(nq):
            for j in range(i + 1):
                acc = 0.0
                for kk in range(6):
                    acc += S[q0 + i, kk] * Ub[q0 + j, kk]
                D[q0 + i, j] = acc
        _local_mass(p, b, q, Wb, D, q0, daug)
        for i in range(nq):                          # Cholesky of D_b, in place
            for j in range(i + 1):
                acc = D[q0 + i, j]
                for kk in range(j):
                    acc -= D[q0 + i, kk] * D[q0 + j, kk]
                if i == j:
                    if not acc > 0.0:
                        return REC_INDEFINITE
                    D[q0 + i, i] = math.sqrt(acc)
                    Li[q0 + i] = 1.0 / D[q0 + i, i]
                    dmin = min(dmin, D[q0 + i, i])
                else:
                    D[q0 + i, j] = acc * Li[q0 + j]
        if par >= 0:
            Ip = IA[par]
            for kk in range(6):                      # Y = L_b^-1 U_b^T
                for i in range(nq):
                    acc = Ub[q0 + i, kk]
                    for l in range(i):
                        acc -= D[q0 + i, l] * Y[l, kk]
                    Y[i, kk] = acc * Li[q0 + i]
            for r in range(6):                       # (symmetric: the lower triangle)
                for c in range(r + 1):
                    acc = I6[r, c]
                    for i in range(nq):
                        acc -= Y[i, r] * Y[i, c]
                    Ip[r, c] += acc
                    if c != r:
                        Ip[c, r] += acc
    for jj in range(nj):                             # the armatures on M's diagonal
        jr = oj + W_J * jj
        c0 = int(p[jr + J_Q])
        if int(p[jr + J_TYPE]) == BALL:
            for kk in range(3):
                for r in range(4):
                    diag[c0 + r] += p[jr + J_ARM + kk] * Wb[jj, kk, r] * Wb[jj, kk, r]
        else:
            diag[c0] += p[jr + J_ARM]
    tr = 0.0
    d2 = 0.0
    for c in range(n):
        tr += diag[c]
        d2 += diag[c] * diag[c]
    wgt = tr / n if tr > 0.0 else 1.0
    # the right-hand side: F and the balls' d p b
    for c in range(n):
        u[c] = F[c]
    row = 0
    for jj in range(nj):
        jr = oj + W_J * jj
        if int(p[jr + J_TYPE]) == BALL:
            c0 = int(p[jr + J_Q])
            bj = 0.0
            for r in range(4):
                bj -= v[c0 + r] * v[c0 + r]
            res[row] = bj                           # (b, until the residual is formed)
            for r in range(4):
                u[c0 + r] += daug[jj] * q[c0 + r] * bj
            row += 1
    _ab_solve(p, S, Ub, D, Li, u, z, pA, al, a)
    if k > 0:
        # the other rows through the same factorization: X = Mt^-1 C^T, the scaled
        # Delassus matrix sk G sk (lower triangle) and right-hand side sk (c - C a0)
        for i in range(k):
            for c in range(n):
                u2[c] = Ar[nball + i, c]
            _ab_solve(p, S, Ub, D, Li, u2, z, pA, al, Xr[i])
        for i in range(k):
            acc = br[nball + i]
            for c in range(n):
                acc -= Ar[nball + i, c] * a[c]
            lk[i] = acc * sk[i]
            for j in range(i + 1):
                acc = 0.0
                for c in range(n):
                    acc += Ar[nball + i, c] * Xr[j, c]
                G[i, j] = acc * sk[i] * sk[j]
        if LA.cholesky(G, G) < 0.0:                  # (in place: its lower triangle read)
            return REC_INDEFINITE
        LA.forward_solve1(G, lk)                     # lk = G^-1 lk, then lam = sk lk
        LA.backward_solve_t(G, lk)
        for i in range(k):
            lk[i] *= sk[i]
            lam[nball + i] = lk[i]
            for c in range(n):
                a[c] += Xr[i, c] * lk[i]
        # the bodies' accelerations of the final a (al_b = al_parent + S_b a_b)
        for b in range(nb_):
            rec = ob + W_B * b
            q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
            par = int(p[rec + B_PAR])
            for i in range(6):
                acc = al[par, i] if par >= 0 else 0.0
                for c in range(q0, q0 + nq):
                    acc += S[c, i] * a[c]
                al[b, i] = acc
    # verification: M a by Newton--Euler (the accelerations al of the bodies are those of
    # a: al_b = al_parent + S_b a_b), g = M a - F
    for b in range(nb_):
        _inertia_apply(C, b, al, b, f6)
        for i in range(6):
            fh[b, i] = f6[i]
    for c in range(n):
        g[c] = -F[c]
    _to_joints(p, S, fh, 1.0, g)
    for jj in range(nj):                             # the armatures' part of M a
        jr = oj + W_J * jj
        c0 = int(p[jr + J_Q])
        if int(p[jr + J_TYPE]) == BALL:
            for kk in range(3):
                ak = p[jr + J_ARM + kk]
                if ak != 0.0:
                    uk = 0.0
                    for r in range(4):
                        uk += Wb[jj, kk, r] * a[c0 + r]
                    for r in range(4):
                        g[c0 + r] += ak * Wb[jj, kk, r] * uk
        else:
            g[c0] += p[jr + J_ARM] * a[c0]
    # the multipliers, the stationarity and feasibility residuals
    for c in range(n):                               # g - C^T lam - (the balls' below)
        st_[c] = g[c]
    ef = 0.0
    bnn = 0.0
    for i in range(k):
        li = lam[nball + i]
        acc = -br[nball + i]
        for c in range(n):
            st_[c] -= Ar[nball + i, c] * li
            acc += Ar[nball + i, c] * a[c]
        res[nball + i] = acc
        ef += (acc * sk[i]) ** 2
        bnn += (br[nball + i] * sk[i]) ** 2
    row = 0
    for jj in range(nj):
        jr = oj + W_J * jj
        if int(p[jr + J_TYPE]) == BALL:
            c0 = int(p[jr + J_Q])
            pp = 0.0
            pg = 0.0
            pa = 0.0
            for r in range(4):
                pp += q[c0 + r] * q[c0 + r]
                pg += q[c0 + r] * st_[c0 + r]
                pa += q[c0 + r] * a[c0 + r]
            lj = pg / pp
            lam[row] = lj
            for r in range(4):
                st_[c0 + r] -= lj * q[c0 + r]
            bj = res[row]
            res[row] = pa - bj
            nu = math.sqrt(pp)
            ef += ((pa - bj) / nu) ** 2
            bnn += (bj / nu) ** 2
            row += 1
    na = 0.0
    nf = 0.0
    for c in range(n):
        na += a[c] * a[c]
        nf += F[c] * F[c]
    na = math.sqrt(na)
    den_s = math.sqrt(d2) * na + math.sqrt(nf)
    ss = 0.0
    for c in range(n):
        ss += st_[c] * st_[c]
    ss = math.sqrt(ss)
    den_f = na + math.sqrt(bnn)
    sc[R_BEF] = math.sqrt(ef) / den_f if den_f > 0.0 else (0.0 if ef == 0.0 else np.inf)
    sc[R_BES] = ss / den_s if den_s > 0.0 else (0.0 if ss == 0.0 else np.inf)
    sc[R_DMIN] = dmin / math.sqrt(wgt) if nb_ > 0 else np.inf
    sc[R_WGT] = wgt
    sc[R_CLOSED] = k
    sc[R_SIG] = 1.0
    return REC_OK


# =========================================================================== closures
@_jit
def _frame_of(p, b, R, X, V, Ab, Rb, xb, Vb, Ab_):
    """Pose, velocity and bias acceleration of body ``b`` (the ground: ``b = -1``; mocap
    ``k``: ``b = -2 - k``, its state from its record, :data:`W_MC`: the twist about the
    world origin ``[w; v_x - w x x]`` and the spatial acceleration ``[al; a_x - al x x - w x
    v_x]`` of its origin's velocity ``v_x`` and acceleration ``a_x``)."""
    if b <= -2:
        r = int(p[H_OMC]) + W_MC * (-2 - b)
        for i in range(3):
            xb[i] = p[r + MC_X + i]
            for j in range(3):
                Rb[i, j] = p[r + MC_R + 3 * i + j]
            Vb[i] = p[r + MC_W + i]
            Ab_[i] = p[r + MC_AL + i]
        x0, x1, x2 = p[r + MC_X], p[r + MC_X + 1], p[r + MC_X + 2]
        w0, w1, w2 = Vb[0], Vb[1], Vb[2]
        l0, l1, l2 = Ab_[0], Ab_[1], Ab_[2]
        u0, u1, u2 = p[r + MC_V], p[r + MC_V + 1], p[r + MC_V + 2]
        Vb[3] = u0 - (w1 * x2 - w2 * x1)
        Vb[4] = u1 - (w2 * x0 - w0 * x2)
        Vb[5] = u2 - (w0 * x1 - w1 * x0)
        Ab_[3] = p[r + MC_A] - (l1 * x2 - l2 * x1) - (w1 * u2 - w2 * u1)
        Ab_[4] = p[r + MC_A + 1] - (l2 * x0 - l0 * x2) - (w2 * u0 - w0 * u2)
        Ab_[5] = p[r + MC_A + 2] - (l0 * x1 - l1 * x0) - (w0 * u1 - w1 * u0)
    elif b < 0:
        for i in range(3):
            xb[i] = 0.0
            for j in range(3):
                Rb[i, j] = 1.0 if i == j else 0.0
        for i in range(6):
            Vb[i] = 0.0
            Ab_[i] = 0.0
    else:
        for i in range(3):
            xb[i] = X[b, i]
            for j in range(3):
                Rb[i, j] = R[b, i, j]
        for i in range(6):
            Vb[i] = V[b, i]
            Ab_[i] = Ab[b, i]


@_jit
def _point_rows(p, b, P, S, A, r0, sign, sc):
    """``A[r0:r0+3] += sign * d P / d q`` for the point ``P`` carried by body ``b``: the
    columns ``S_c.lin + S_c.ang x P`` of the coordinates of ``b`` and of its ancestors;
    ``sc[0]`` the largest size of their terms so far (:func:`_snap`)."""
    ob = int(p[H_OB])
    pn = abs(P[0]) + abs(P[1]) + abs(P[2])
    while b >= 0:
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        for c in range(q0, q0 + nq):
            t = (abs(S[c, 3]) + abs(S[c, 4]) + abs(S[c, 5])
                 + (abs(S[c, 0]) + abs(S[c, 1]) + abs(S[c, 2])) * pn)
            if t > sc[0]:
                sc[0] = t
            A[r0, c] += sign * (S[c, 3] + S[c, 1] * P[2] - S[c, 2] * P[1])
            A[r0 + 1, c] += sign * (S[c, 4] + S[c, 2] * P[0] - S[c, 0] * P[2])
            A[r0 + 2, c] += sign * (S[c, 5] + S[c, 0] * P[1] - S[c, 1] * P[0])
        b = int(p[rec + B_PAR])


@_jit
def _axis_row(p, b, y, S, A, r, sign, sc):
    """``A[r] += sign * y . dw_b/dq'`` (the angular columns of body ``b``'s chain);
    ``sc[0]`` the largest size of its terms so far (:func:`_snap`)."""
    ob = int(p[H_OB])
    yn = abs(y[0]) + abs(y[1]) + abs(y[2])
    while b >= 0:
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        for c in range(q0, q0 + nq):
            t = (abs(S[c, 0]) + abs(S[c, 1]) + abs(S[c, 2])) * yn
            if t > sc[0]:
                sc[0] = t
            A[r, c] += sign * (y[0] * S[c, 0] + y[1] * S[c, 1] + y[2] * S[c, 2])
        b = int(p[rec + B_PAR])


@_jit
def _snap(A, g, r, n, scale, want_g, gscale):
    """A closure row whose every entry is at the rounding level of its terms (``64 (n + 1)
    eps`` times ``scale``, the largest term) vanishes: identically where the tree's joints
    make it hold for every motion (the planar loop's out-of-plane row, a weld's rotations
    about the axis the joints already share), or at this state only (a singular position:
    a chain stretched straight towards a fixed point). Rounding would leave it ``~eps`` in
    every entry, and the engine, which normalizes the rows before its rank decision, would
    take that noise for a constraint; it is returned as exactly zero. Its ``gamma`` is
    zeroed too where it is at the rounding level of its own terms (``gscale``: the
    derivative of a row that vanishes identically), and kept where it is not: at a
    singular position ``Phi_q v`` grows again along the motion, and a zero there was a
    wrong model function (which :meth:`gaussopt.System.check` refused at a loop loaded in
    its straight reference pose), where the right one lets the step say that no motion
    fits the row."""
    big = 0.0
    for c in range(n):
        x = abs(A[r, c])
        if x > big:
            big = x
    tol = 64.0 * (n + 1) * 2.220446049250313e-16
    if big <= tol * scale:
        for c in range(n):
            A[r, c] = 0.0
        if want_g and abs(g[r]) <= tol * gscale:
            g[r] = 0.0


@_jit
def _point_motion(Rb, xb, Vb, Ab_, s, P, vP, aP):
    """A body point ``s``: world position ``P``, velocity ``vP`` and bias acceleration
    ``aP = A.lin + A.ang x P + w x vP``."""
    for i in range(3):
        P[i] = xb[i] + Rb[i, 0] * s[0] + Rb[i, 1] * s[1] + Rb[i, 2] * s[2]
    _motion_at(Vb, Ab_, P, vP, aP)


@_jit
def _motion_at(Vb, Ab_, P, vP, aP):
    """The velocity ``vP`` and bias acceleration ``aP = A.lin + A.ang x P + w x vP`` of the
    point at the world position ``P`` of a body with velocity ``Vb`` and bias acceleration
    ``Ab_`` (both about the world origin, angular first)."""
    _velocity_at(Vb, P, vP)
    aP[0] = Ab_[3] + Ab_[1] * P[2] - Ab_[2] * P[1] + Vb[1] * vP[2] - Vb[2] * vP[1]
    aP[1] = Ab_[4] + Ab_[2] * P[0] - Ab_[0] * P[2] + Vb[2] * vP[0] - Vb[0] * vP[2]
    aP[2] = Ab_[5] + Ab_[0] * P[1] - Ab_[1] * P[0] + Vb[0] * vP[1] - Vb[1] * vP[0]


@_inline
def _weld_axes(p, er, k, R1, R2, y, z):
    """A weld's ``k``-th pair of axes in the world: ``y = R_1 a_k``, ``z = R_2 b_k``."""
    o1, o2 = er + E_A + 3 * k, er + E_B + 3 * k
    for i in range(3):
        y[i] = R1[i, 0] * p[o1] + R1[i, 1] * p[o1 + 1] + R1[i, 2] * p[o1 + 2]
        z[i] = R2[i, 0] * p[o2] + R2[i, 1] * p[o2 + 1] + R2[i, 2] * p[o2 + 2]


@_jit
def _point_dir_row(p, b, P, u, S, A, r, sign):
    """``A[r] += sign * u . dP/dq`` for the point ``P`` carried by body ``b`` (the columns of
    :func:`_point_rows` along the unit vector ``u``)."""
    ob = int(p[H_OB])
    while b >= 0:
        rec = ob + W_B * b
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        for c in range(q0, q0 + nq):
            A[r, c] += sign * (u[0] * (S[c, 3] + S[c, 1] * P[2] - S[c, 2] * P[1])
                               + u[1] * (S[c, 4] + S[c, 2] * P[0] - S[c, 0] * P[2])
                               + u[2] * (S[c, 5] + S[c, 0] * P[1] - S[c, 1] * P[0]))
        b = int(p[rec + B_PAR])


@_jit
def _line_state(p, l, q, v, R, X, S, V, Ab, A, r, coef, want_A, T):
    """Line ``l``'s length ``L``, rate ``L'`` and bias ``beta`` (``L'' = (dL/dq) a + beta``),
    and ``A[r] += coef dL/dq`` when ``want_A``. A fixed tendon or a joint: ``c . q``, ``c . v``,
    0 and ``c``; a spatial tendon: :func:`_path_state`."""
    lr = int(p[H_OL]) + W_L * l
    if p[lr + L_SP] == 0.0:
        if want_A:
            _line_add(p, l, coef, A[r])
        return _line(p, l, q), _line(p, l, v), 0.0
    return _path_state(p, lr, R, X, S, V, Ab, A, r, coef, want_A, T)


@_lazy("UniTuple(f8, 3)(f8v, i8, f8[:, :, ::1], f8m, f8m, f8m, f8m, f8m, i8, f8, b1, f8v)")
def _path_state(p, lr, R, X, S, V, Ab, A, r, coef, want_A, T):
    """:func:`_line_state` of the spatial tendon at line record ``lr``: the sum over the
    segments between the points of its path (:func:`_path_points`; ``d`` from point a to
    point b, ``u = d / |d|``): ``|d|`` (plus the arcs on wrapped geoms), ``u . d'``, ``u .
    (a_b - a_a) + (|d'|^2 - (u . d')^2) / |d|`` (``a`` the points' bias accelerations), and
    ``u . (dP_b/dq - dP_a/dq)``, from the kinematics about the world origin (:func:`_kin`).
    Where the string wraps a geom, ``beta`` is NaN: its arc's curvature terms are not
    written (the loader leaves the couplings, limits and armatures of wrapping tendons
    unmapped), while ``dL/dq`` stays exact (:func:`_wrap`). ``T``: :func:`_work`'s scratch
    (15 values from ``_T_EVAL + 80``, and the path's)."""
    o = _T_EVAL + 80
    va, aa = carve(T, o, (3,)), carve(T, o + 3, (3,))
    vb, ab = carve(T, o + 6, (3,)), carve(T, o + 9, (3,))
    u = carve(T, o + 12, (3,))
    npts, L = _path_points(p, lr, R, X, T)
    pts = carve(T, _path_offset(p), (_n_sites(p), 5))
    wrapped = False
    Ld, beta = 0.0, 0.0
    ba = int(pts[0, 1])
    _world_motion(V, Ab, ba, pts[0, 2:5], va, aa)
    for k in range(1, npts):
        bb = int(pts[k, 1])
        Pa, Pb = pts[k - 1, 2:5], pts[k, 2:5]
        _world_motion(V, Ab, bb, Pb, vb, ab)
        d0, d1, d2 = Pb[0] - Pa[0], Pb[1] - Pa[1], Pb[2] - Pa[2]
        ln = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if _on_geom(p, pts, k):
            wrapped = True          # (between the tangent points: the arc, in L already)
        elif ln > 0.0:
            u[0], u[1], u[2] = d0 / ln, d1 / ln, d2 / ln
            w0, w1, w2 = vb[0] - va[0], vb[1] - va[1], vb[2] - va[2]
            ud = u[0] * w0 + u[1] * w1 + u[2] * w2
            L += ln
            Ld += ud
            beta += (u[0] * (ab[0] - aa[0]) + u[1] * (ab[1] - aa[1]) + u[2] * (ab[2] - aa[2])
                     + (w0 * w0 + w1 * w1 + w2 * w2 - ud * ud) / ln)
            if want_A:
                _point_dir_row(p, bb, Pb, u, S, A, r, coef)
                _point_dir_row(p, ba, Pa, u, S, A, r, -coef)
        for c in range(3):
            va[c], aa[c] = vb[c], ab[c]
        ba = bb
    return L, Ld, (math.nan if wrapped else beta)


@_jit
def _world_motion(V, Ab, b, P, vP, aP):
    """The velocity and bias acceleration (``q'' = 0``) of the point at the world position
    ``P`` carried by body ``b`` (:func:`_point_motion`; zero for the world)."""
    if b < 0:
        for k in range(3):
            vP[k] = 0.0
            aP[k] = 0.0
        return
    _motion_at(V[b], Ab[b], P, vP, aP)


@_jit
def _coupling_row(p, er, q, v, ph, A, g, want_phi, want_A, want_g, R, X, S, V, Ab, T):
    """The row of a coupling of two lines (MuJoCo's ``joint`` and ``tendon`` equalities):
    ``x_i = L_i - ref_i``, ``Phi = x_1 - P(x_2)`` with ``P(x) = c0 + c1 x + ... + c4 x^4``
    (``P = c0`` without a second line); ``Phi_q = L_1,q - P'(x_2) L_2,q`` and, from ``d/dt
    (Phi_q v) = Phi_q a + beta_1 - P''(x_2) L_2'^2 - P'(x_2) beta_2``, ``gamma = P''(x_2)
    L_2'^2 - beta_1 + P'(x_2) beta_2`` (``beta`` the lines' bias, zero for fixed tendons and
    joints: :func:`_line_state`)."""
    l1, l2, r = int(p[er + E_B1]), int(p[er + E_B2]), int(p[er + E_ROW])
    c = er + E_POLY
    P, dP, ddP = p[c], 0.0, 0.0
    w, b2 = 0.0, 0.0
    if l2 >= 0:
        # (L_2,q goes into the row, zeroed by the caller, and is scaled by -P' once known)
        L2, w, b2 = _line_state(p, l2, q, v, R, X, S, V, Ab, A, r, 1.0, want_A, T)
        x = L2 - p[er + E_REF2]
        P += x * (p[c + 1] + x * (p[c + 2] + x * (p[c + 3] + x * p[c + 4])))
        dP = p[c + 1] + x * (2.0 * p[c + 2] + x * (3.0 * p[c + 3] + x * 4.0 * p[c + 4]))
        ddP = 2.0 * p[c + 2] + x * (6.0 * p[c + 3] + x * 12.0 * p[c + 4])
        if want_A:
            for k in range(A.shape[1]):
                A[r, k] *= -dP
    L1, _, b1 = _line_state(p, l1, q, v, R, X, S, V, Ab, A, r, 1.0, want_A, T)
    if want_phi:
        ph[r] = L1 - p[er + E_REF1] - P
    if want_g:
        g[r] = ddP * w * w - b1 + dP * b2


@_jit
def _evaluate(p, q, v, ph, A, g, want_phi, want_A, want_g, w):
    """One pass over the rows: the balls' normalizations first, then the closures;
    ``Phi`` into ``ph``, ``Phi_q`` into ``A`` (zeroed here) and ``gamma`` into ``g``, each
    when asked (``w``: :func:`_work_size` values where the model has closures, else
    none)."""
    _ball_rows(p, q, v, ph, A, g, want_phi, want_A, want_g)
    if int(p[H_NE]) == 0:
        return
    R, X, S, V, Ab, Wb, U, pd, _, _, T = _work(p, w)
    if int(p[H_NSP]) > 0:   # (couplings of fixed tendons and joints need no kinematics)
        _kin(p, q, v, R, X, S, V, Ab, Wb, U, pd, T)
    _closure_rows(p, q, v, ph, A, g, want_phi, want_A, want_g, R, X, S, V, Ab, T)


@_jit
def _ball_rows(p, q, v, ph, A, g, want_phi, want_A, want_g):
    """The balls' normalization rows of :func:`_evaluate` (the first rows), with ``A``
    zeroed when asked (every row: the closures' are added after)."""
    m, n = int(p[H_M]), int(p[H_N])
    oj = int(p[H_OJ])
    if want_A:
        for r in range(m):
            for c in range(n):
                A[r, c] = 0.0
    row = 0
    for jj in range(int(p[H_NJ])):
        jr = oj + W_J * jj
        if int(p[jr + J_TYPE]) == BALL:
            a = int(p[jr + J_Q])
            s = 0.0
            sv = 0.0
            for c in range(4):
                s += q[a + c] * q[a + c]
                sv += v[a + c] * v[a + c]
                if want_A:
                    A[row, a + c] = q[a + c]
            if want_phi:
                ph[row] = 0.5 * (s - 1.0)
            if want_g:
                g[row] = -sv
            row += 1


@_inline
def _closure_views(T):
    """The closures' temporaries as views of the scratch ``T`` from :data:`_T_EVAL` on (78
    values): the two sides' rotations, origins, points, point velocities and accelerations,
    three 3-vectors, twists and spatial accelerations."""
    return (carve(T, _T_EVAL, (3, 3)), carve(T, _T_EVAL + 9, (3, 3)),
            carve(T, _T_EVAL + 18, (3,)), carve(T, _T_EVAL + 21, (3,)),
            carve(T, _T_EVAL + 24, (3,)), carve(T, _T_EVAL + 27, (3,)),
            carve(T, _T_EVAL + 30, (3,)), carve(T, _T_EVAL + 33, (3,)),
            carve(T, _T_EVAL + 36, (3,)), carve(T, _T_EVAL + 39, (3,)),
            carve(T, _T_EVAL + 42, (3,)), carve(T, _T_EVAL + 45, (3,)),
            carve(T, _T_EVAL + 48, (3,)), carve(T, _T_EVAL + 51, (3,)),
            carve(T, _T_EVAL + 54, (6,)), carve(T, _T_EVAL + 60, (6,)),
            carve(T, _T_EVAL + 66, (6,)), carve(T, _T_EVAL + 72, (6,)))


@_jit
def _closure_rows(p, q, v, ph, A, g, want_phi, want_A, want_g, R, X, S, V, Ab, T):
    """The closures' and couplings' rows of :func:`_evaluate` (their entries of ``A``
    zeroed by the caller) from the kinematics at ``(q, v)`` about the world origin
    (:func:`_kin`, before :func:`_at_tree_roots`); ``T``: scratch, from :data:`_T_EVAL`
    on."""
    n = int(p[H_N])
    oe, ne = int(p[H_OE]), int(p[H_NE])
    # (every one written before it is read: _frame_of writes the frames whole)
    R1, R2, x1, x2, P1, P2, v1, v2, a1, a2, y, z, t, u, V1, V2, A1, A2 = _closure_views(T)
    sc = carve(T, _T_EVAL + 78, (1,))
    for e in range(ne):
        er = oe + W_E * e
        typ, b1, b2, r0 = int(p[er + E_TYPE]), int(p[er + E_B1]), int(p[er + E_B2]), \
            int(p[er + E_ROW])
        if typ == COUPLE:
            _coupling_row(p, er, q, v, ph, A, g, want_phi, want_A, want_g, R, X, S, V, Ab, T)
            continue
        _frame_of(p, b1, R, X, V, Ab, R1, x1, V1, A1)
        _frame_of(p, b2, R, X, V, Ab, R2, x2, V2, A2)
        if not want_g:
            for i in range(6):
                V1[i] = 0.0
                V2[i] = 0.0
                A1[i] = 0.0
                A2[i] = 0.0
        _point_motion(R1, x1, V1, A1, p[er + E_S1:er + E_S1 + 3], P1, v1, a1)
        _point_motion(R2, x2, V2, A2, p[er + E_S2:er + E_S2 + 3], P2, v2, a2)
        for i in range(3):
            if want_phi:
                ph[r0 + i] = P2[i] - P1[i]
            if want_g:
                g[r0 + i] = -(a2[i] - a1[i])
        if want_A:
            sc[0] = 0.0
            _point_rows(p, b2, P2, S, A, r0, 1.0, sc)
            _point_rows(p, b1, P1, S, A, r0, -1.0, sc)
            gs = 0.0                                 # (gamma's terms: the points' motion)
            for i in range(3):
                gs = max(gs, abs(a1[i]) + abs(a2[i]))
            for i in range(3):
                _snap(A, g, r0 + i, n, sc[0], want_g, gs)
        if typ == WELD:
            for k in range(3):
                _weld_axes(p, er, k, R1, R2, y, z)
                r = r0 + 3 + k
                # d/dt (y . z) = (w2 - w1) . (z x y)
                _cross(z, y, t)
                if want_phi:
                    ph[r] = y[0] * z[0] + y[1] * z[1] + y[2] * z[2]
                if want_A:
                    sc[0] = 0.0
                    _axis_row(p, b2, t, S, A, r, 1.0, sc)
                    _axis_row(p, b1, t, S, A, r, -1.0, sc)
                gs = 0.0                             # (the size of gamma's terms)
                if want_g:
                    # gamma = -[(al2 - al1) . (z x y) + (w2 - w1) . ((w2 x z) x y + z x (w1 x y))]
                    acc = 0.0
                    for i in range(3):
                        acc += (A2[i] - A1[i]) * t[i]
                        gs += (abs(A2[i]) + abs(A1[i])) * abs(t[i])
                    _cross(V2[0:3], z, u)
                    _cross(u, y, u)
                    _cross(V1[0:3], y, a1)
                    _cross(z, a1, a2)
                    for i in range(3):
                        acc += (V2[i] - V1[i]) * (u[i] + a2[i])
                        gs += (abs(V2[i]) + abs(V1[i])) * (abs(u[i]) + abs(a2[i]))
                    g[r] = -acc
                if want_A:
                    _snap(A, g, r, n, sc[0], want_g, gs)


@_unit("none(f8v, f8v, f8v, f8v)")
def phi(p, q, drv, out):
    """``Phi(q)`` into ``out``, shape (m,) (``drv`` unused: no driven rows)."""
    _evaluate(p, q, q, out, np.zeros((0, 0)), out, True, False, False, _rows_work(p))


@_unit("none(f8v, f8v, f8v, f8v, f8m, f8v, b1)")
def rows(p, q, v, drv, A, b, with_gamma):
    """``Phi_q`` into ``A`` (m, n) and, when ``with_gamma``, ``gamma`` into ``b``."""
    _evaluate(p, q, v, b, A, b, False, True, with_gamma, _rows_work(p))


@_unit_inline
def _rows_work(p):
    """The buffer :func:`_evaluate` takes: :func:`_work_size` values where the model has
    closures, else a view of ``p`` (no allocation: the balls' rows need none)."""
    if int(p[H_NE]) == 0:
        return p[:0]
    return np.empty(_work_size(p))


@_unit("none(f8v, f8v, f8v, f8v)")
def phi_t(p, q, drv, out):
    """``Phi_t`` into ``out``: zero but on the rows of closures with a mocap body, whose
    motion (its record) moves their anchors (:func:`_closure_rates`)."""
    for r in range(out.shape[0]):
        out[r] = 0.0
    if int(p[H_NMC]) > 0 and int(p[H_NE]) > 0:
        w = _rows_work(p)
        _closure_rates(p, q, out, w)


@_jit
def _closure_rates(p, q, out, w):
    """``Phi_t`` of the closures with a mocap side: ``Phi_q v + Phi_t`` at ``v = 0``, the
    rates of the rows while the tree stands still and the mocap bodies move (a point
    row's ``v_P2 - v_P1``, a weld's axis row ``(w_2 - w_1) . (z x y)``)."""
    R, X, S, V, Ab, Wb, U, pd, _, _, T = _work(p, w)
    n = int(p[H_N])
    zero = carve(T, _T_EVAL + 80, (n,))
    for c in range(n):
        zero[c] = 0.0
    _kin(p, q, zero, R, X, S, V, Ab, Wb, U, pd, T)
    R1, R2, x1, x2, P1, P2, v1, v2, a1, a2, y, z, t, _, V1, V2, A1, A2 = _closure_views(T)
    oe = int(p[H_OE])
    for e in range(int(p[H_NE])):
        er = oe + W_E * e
        typ, b1, b2, r0 = int(p[er + E_TYPE]), int(p[er + E_B1]), int(p[er + E_B2]), \
            int(p[er + E_ROW])
        if typ == COUPLE or (b1 > -2 and b2 > -2):
            continue
        _frame_of(p, b1, R, X, V, Ab, R1, x1, V1, A1)
        _frame_of(p, b2, R, X, V, Ab, R2, x2, V2, A2)
        _point_motion(R1, x1, V1, A1, p[er + E_S1:er + E_S1 + 3], P1, v1, a1)
        _point_motion(R2, x2, V2, A2, p[er + E_S2:er + E_S2 + 3], P2, v2, a2)
        for i in range(3):
            out[r0 + i] = v2[i] - v1[i]
        if typ == WELD:
            for k in range(3):
                _weld_axes(p, er, k, R1, R2, y, z)
                _cross(z, y, t)
                out[r0 + 3 + k] = ((V2[0] - V1[0]) * t[0] + (V2[1] - V1[1]) * t[1]
                                   + (V2[2] - V1[2]) * t[2])


# =========================================================================== compiled functions
@_inline
def sizes(p):
    """Coordinates, equations and (no sparse evaluation) 0 of the model packed in ``p``."""
    return int(p[H_N]), int(p[H_M]), 0


#: the compiled model functions of every tree model (:mod:`gaussopt.multibody.common.cfuncs`)
_KIND = KindFunctions(sys.modules[__name__])
#: the compiled model functions ``(dyn, rows, pos, vel, energy)`` of every tree model
FUNCTIONS = _KIND.functions


def sparse_model(p: np.ndarray) -> None:
    """None: a tree's ``M`` is dense (its O(n) step is the recursive one,
    :func:`recursive_model`)."""
    return None


def recursive_model(p: np.ndarray):
    """The recursive O(n) step of the model packed in ``p``
    (:class:`~gaussopt.core.model_interface.RecursiveModel`, :func:`recursive_step`), or None
    where it does not apply: a fixed tendon with armature (its ``a L'^2 / 2`` couples
    joints, so ``M`` is not ``S^T H S`` plus terms within single joints)."""
    if p[H_PYTHON] != 0.0 or int(p[H_LEN]) > int(p[H_OS]):
        return None             # (spatial tendons: their forces are on the dense path only)
    ol = int(p[H_OL])
    for ln in range(int(p[H_NL])):
        if p[ol + W_L * ln + L_ARM] != 0.0:
            return None
    return _KIND.recursive_model(p)


def mass_tree(p: np.ndarray):
    """The parent of every coordinate in the tree that ``M``'s sparsity follows
    (:attr:`gaussopt.System.mass_tree`): a body's coordinates form a chain, whose first
    hangs from the last coordinate of the nearest ancestor body that has any (-1: none).
    ``M[c, c']`` is the composite inertia seen through two twists of the same branch,
    zero between branches, except the armature of a fixed tendon (``a L'^2 / 2``), which
    couples its coordinates: None when a tendon with armature spans two branches."""
    ob, nb_, n = int(p[H_OB]), int(p[H_NB]), int(p[H_N])
    par = np.full(n, -1, dtype=np.int64)
    last = np.full(nb_, -1, dtype=np.int64)        # each body's last coordinate, or its
    for b in range(nb_):                           # nearest ancestor's
        rec = ob + W_B * b
        pb = int(p[rec + B_PAR])
        up = last[pb] if pb >= 0 else -1
        q0, nq = int(p[rec + B_Q0]), int(p[rec + B_NQ])
        for c in range(q0, q0 + nq):
            par[c] = up
            up = c
        last[b] = up
    ol, ot = int(p[H_OL]), int(p[H_OT])
    for ln in range(int(p[H_NL])):
        rec = ol + W_L * ln
        if p[rec + L_ARM] == 0.0:
            continue
        if p[rec + L_SP] != 0.0:
            return None         # (a spatial tendon's armature: dL/dq spans its sites' chains)
        t0, nt = int(p[rec + L_T0]), int(p[rec + L_NT])
        cs = sorted(int(p[ot + 2 * t]) for t in range(t0, t0 + nt))
        for lo, hi in zip(cs, cs[1:]):
            j = par[hi]
            while j > lo:
                j = par[j]
            if j != lo and lo != hi:
                return None
    return par


def compiled_factory(p: np.ndarray, system):
    """A factory of the engine's :class:`~gaussopt.core.model_interface.ModelFunctions` for
    ``system`` (the assembled system of the model packed in ``p``; fresh buffers per run).
    Its ``contact_rows(system)`` gives the compiled rows of a contact phase of this model
    (:func:`phase_functions`)."""
    factory = _KIND.compiled_factory(p, system)
    factory.contact_rows = lambda phase: phase_functions(p, system, phase)
    return factory


# =========================================================================== contact phases
# The rows of a contact run's phase (:mod:`gaussopt.integrate.contact_run`): the model's own
# rows, then one row per entry of a section appended to ``p`` (after its ``p[H_LEN]``
# values): a closed point's gap row (``G``, ``gamma``) or one of a sticking point's two
# no-slip rows (``T``, its convective term), all from one call of :func:`contact_points`
# over the section's point records. The section: ``PH_TAG``, the number of records ``nr``,
# of entries ``ne``, the records (``nr x W_PP``), the entries (``4 * record + e``: ``e`` 0
# the gap row, 1 and 2 the no-slip rows along the two tangents). The model functions below
# have the engine's signature (:data:`~gaussopt.core.model_interface.SIGNATURE`), ``M`` and
# ``F`` staying the model's own (:data:`FUNCTIONS`: they read ``p`` up to ``p[H_LEN]``).
#: the tag of a phase's section
PH_TAG = 20261201.0


@_unit_inline
def _phase_parts(pp):
    """``(p, full, nr, ne)``: the model's parameters, the whole array (the model's and the
    phase's section) and the section's counts; ``nr = -1`` where ``pp`` holds no model of
    this kind with a phase section."""
    p = vec(pp, int(vec(pp, H_LEN + 1)[H_LEN]))
    if p[0] != LAYOUT or p[H_PYTHON] != 0.0:
        return p, p, -1, 0
    ln = int(p[H_LEN])
    head = vec(pp, ln + 3)
    if head[ln] != PH_TAG:
        return p, p, -1, 0
    nr, ne = int(head[ln + 1]), int(head[ln + 2])
    return p, vec(pp, ln + 3 + nr * W_PP + ne), nr, ne


@_unit_inline
def _phase_points(p, full, nr, q, v):
    """:func:`contact_points` of the section's records at ``(q, v)``: ``(G, gam, T, ugam,
    gap, flat)`` carved from one buffer (the records, then the outputs: ``nr (W_PP + 7 +
    3 n)`` values), ``flat`` where a rim lying flat touches its plane (its derivatives are
    not defined: the caller fails, and the run's Python step names the face,
    :func:`gaussopt.multibody.tree.tree_geometry._face_error`)."""
    n = int(p[H_N])
    o = int(p[H_LEN]) + 3
    buf = np.empty(nr * (W_PP + 7 + 3 * n))
    for i in range(nr * W_PP):
        buf[i] = full[o + i]
    geo = carve(buf, 0, (nr, W_PP))
    at = nr * W_PP
    gap, gam = carve(buf, at, (nr,)), carve(buf, at + nr, (nr,))
    tilt = carve(buf, at + 2 * nr, (nr,))
    u, ugam = carve(buf, at + 3 * nr, (2 * nr,)), carve(buf, at + 5 * nr, (2 * nr,))
    G, T = carve(buf, at + 7 * nr, (nr, n)), carve(buf, at + 7 * nr + nr * n, (2 * nr, n))
    contact_points(p, q, v, geo, gap, G, gam, T, u, ugam, tilt)
    flat = False
    for i in range(nr):
        if (geo[i, PP_KIND] == 0.0 and (geo[i, PP_A] != 0.0 or geo[i, PP_A + 1] != 0.0
                                        or geo[i, PP_A + 2] != 0.0)
                and tilt[i] <= PP_FLAT and gap[i] + geo[i, PP_R] * tilt[i] <= 1.01 * geo[i, PP_R]):
            flat = True
    return G, gam, T, ugam, gap, flat


@_unit_inline
def _phase_fill(p, full, nr, ne, G, gam, T, ugam, A, b, with_b):
    """The section's rows into ``A`` after the model's ``p[H_M]`` rows (and, ``with_b``,
    their convective terms into ``b``): entry ``4 ri + e`` is record ``ri``'s gap row
    (``e`` 0) or its no-slip row along tangent ``e``."""
    n, m0 = int(p[H_N]), int(p[H_M])
    oe = int(p[H_LEN]) + 3 + nr * W_PP
    for k in range(ne):
        code = int(full[oe + k])
        ri, e = code // 4, code % 4
        r = m0 + k
        if e == 0:
            for c in range(n):
                A[r, c] = G[ri, c]
            if with_b:
                b[r] = gam[ri]
        else:
            for c in range(n):
                A[r, c] = T[2 * ri + e - 1, c]
            if with_b:
                b[r] = ugam[2 * ri + e - 1]


@cfunc(SIGNATURE, error_model="numpy")
def phase_rows(t, qp, vp, pp, Ap, bp):
    """The phase's ``A`` and ``b``: the model's rows, then the section's (module comment)."""
    p, full, nr, ne = _phase_parts(pp)
    if nr < 0:
        return 1
    n, m0 = int(p[H_N]), int(p[H_M])
    q, v = vec(qp, n), vec(vp, n)
    rows(p, q, v, p[:0], mat(Ap, m0, n), vec(bp, m0), True)
    G, gam, T, ugam, gap, flat = _phase_points(p, full, nr, q, v)
    if flat:
        return 1
    _phase_fill(p, full, nr, ne, G, gam, T, ugam, mat(Ap, m0 + ne, n), vec(bp, m0 + ne), True)
    return 0


@cfunc(SIGNATURE, error_model="numpy")
def phase_pos(t, qp, pp, phip, Jp, phitp):
    """The phase's holonomic rows: the model's ``Phi``, ``Phi_q``, ``Phi_t``, then the
    section's gaps (their rows and zero ``Phi_t``: the points are not driven)."""
    p, full, nr, ne = _phase_parts(pp)
    if nr < 0:
        return 1
    n, m0 = int(p[H_N]), int(p[H_M])
    q = vec(qp, n)
    phi(p, q, p[:0], vec(phip, m0))
    rows(p, q, q, p[:0], mat(Jp, m0, n), p[:0], False)
    phi_t(p, q, p[:0], vec(phitp, m0))
    oe = int(p[H_LEN]) + 3 + nr * W_PP
    ng = 0
    for k in range(ne):
        if int(full[oe + k]) % 4 == 0:
            ng += 1
    G, gam, T, ugam, gap, flat = _phase_points(p, full, nr, q, np.zeros(n))
    if flat:
        return 1
    ph, J, pt = vec(phip, m0 + ng), mat(Jp, m0 + ng, n), vec(phitp, m0 + ng)
    r = m0
    for k in range(ne):
        code = int(full[oe + k])
        if code % 4 != 0:
            continue
        ri = code // 4
        ph[r] = gap[ri]
        for c in range(n):
            J[r, c] = G[ri, c]
        pt[r] = 0.0
        r += 1
    return 0


@cfunc(SIGNATURE, error_model="numpy")
def phase_vel(t, qp, vp, pp, rp, Jvp):
    """The phase's velocity rows (every row) and their residual ``J v`` (the gaps' rates
    and the sticking points' slip velocities ``T v``)."""
    p, full, nr, ne = _phase_parts(pp)
    if nr < 0:
        return 1
    n, m0 = int(p[H_N]), int(p[H_M])
    q, v = vec(qp, n), vec(vp, n)
    rows(p, q, v, p[:0], mat(Jvp, m0, n), p[:0], False)
    G, gam, T, ugam, gap, flat = _phase_points(p, full, nr, q, v)
    if flat:
        return 1
    J, r = mat(Jvp, m0 + ne, n), vec(rp, m0 + ne)
    _phase_fill(p, full, nr, ne, G, gam, T, ugam, J, p[:0], False)
    for i in range(m0 + ne):
        acc = 0.0
        for c in range(n):
            acc += J[i, c] * v[c]
        r[i] = acc
    return 0


#: the compiled rows of a contact phase ``(rows, pos, vel)`` (the engine's ``rows``, ``pos``
#: and ``vel``; its ``dyn`` and ``energy`` are the model's)
PHASE_FUNCTIONS = (phase_rows, phase_pos, phase_vel)


def phase_functions(p: np.ndarray, origin, phase):
    """The compiled ``(rows, pos, vel)`` of a contact phase of a tree model and the
    parameter array they read (``p`` with the phase's section appended:
    :data:`PHASE_FUNCTIONS`), or None where the
    phase has rows the kernel does not evaluate.

    Why: a contact run's phase (:mod:`gaussopt.integrate.contact_run`) holds its closed
    points as bilateral gap rows and its sticking ones with two no-slip rows each; through
    Python those rows cost a callback per evaluation, and a step evaluates them at every
    stage and more (dm_control's stacker, 228 points: 5.7 evaluations of about 100 us per
    right-hand side). Compiled, the engine evaluates them with the model's own rows in
    one call of :func:`contact_points` over the phase's points only.

    ``phase``'s constraints must be ``origin``'s (the model's system, compiled on ``p``),
    in order, then constraints made by :class:`~gaussopt.model.contact.ContactPoints`
    (``holonomic``: gap rows, ``no_slip``: slip rows; their ``contact_rows``) of contacts
    of this model (:meth:`~gaussopt.multibody.tree.Model.contacts`: their ``pair_group``,
    a :class:`~gaussopt.multibody.tree.tree_geometry.PairGroup`) whose points the kernel
    evaluates (not a plane carried by a moving link)."""
    own = list(origin.equalities)
    eqs = list(phase.equalities)
    if len(eqs) <= len(own) or any(a is not b for a, b in zip(eqs, own)):
        return None
    records: list = []
    index: dict = {}
    entries: list = []
    for c in eqs[len(own):]:
        meta = getattr(c, "contact_rows", None)
        if meta is None:
            return None
        contact, rows, kind = meta
        grp = getattr(contact, "pair_group", None)     # (a tree_geometry.PairGroup)
        kin = getattr(grp, "kin", None)
        if (getattr(grp, "_record", None) is None or kin is None
                or kin.p.shape != p.shape or not np.array_equal(kin.p, p)):
            return None
        for r in rows:
            ri = grp._record.get(int(r))
            if ri is None:
                return None
            j = index.setdefault((id(grp), ri), len(records))
            if j == len(records):
                records.append(grp._pp[ri])
            entries += [4 * j] if kind == "gap" else [4 * j + 1, 4 * j + 2]
    if int(p[H_M]) + len(entries) != (phase.m or 0):
        return None
    section = np.concatenate([[PH_TAG, len(records), len(entries)],
                              np.ravel(records), entries])
    return PHASE_FUNCTIONS, np.concatenate([p, section])
