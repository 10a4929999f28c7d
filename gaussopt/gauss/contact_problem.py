"""The contact problem of all planar contact points at once: normal and Coulomb friction.

At an event of a contact run (a closing, an impact, a lift-off, a stick-slip
transition) the state of every touching point must be decided *together*: two
sticking corners of one box share their friction in a way no point-by-point rule
can see. The acceleration of the system and the velocity after an impact solve the
same problem (``x = a``, or ``x = v+`` with ``F = M v-``): Pfeiffer and Glocker's
linear complementarity problem of planar contacts with Coulomb friction::

    M x - F = A^T lam + sum_i (G_i - mu_i d_i T_i)^T N_i + sum_i T_i^T tau_i
    A x = b                                          (bilateral rows)
    g_i = G_i x - h_i >= 0,  N_i >= 0,  N_i g_i = 0   (normal complementarity)

and, for a closed point with finite friction ``mu_i`` that does not slip yet
(``d_i = 0``), the friction saturation split into its two sides: with
``u_i = T_i x - s_i`` (the slip acceleration, or the slip velocity after an
impact) ``u_i = u+ - u-``, ``mu_i N_i + tau_i >= 0 _|_ u+ >= 0`` and
``mu_i N_i - tau_i >= 0 _|_ u- >= 0``. A point that already slips (``d_i = +-1``,
the sign of its slip rate) carries ``-mu_i d_i N_i`` along ``T_i``; a point with
``mu_i = inf`` does not slip while closed (``u_i = 0``, ``tau_i`` free); a
frictionless point has no tangential force.

Sign convention: ``tau_i`` (and a sliding point's ``-mu_i d_i N_i``) is the
tangential force along the *increasing* slip coordinate, i.e. along ``T_i``; a
point slipping towards ``+`` feels ``-mu N``.

How it is solved, exactly: every point takes one of its modes (``open``,
``closed``; with finite friction from rest ``stick``, ``slide +``, ``slide -``);
each combination of modes is a linear (KKT) system, solved by a singular value
decomposition of the scaled KKT matrix (:func:`kkt_solve`: through the SVDs of its
blocks, as many rows as points but at most ``n`` of them independent), and its answer
is *certified* against
every condition above to the rounding of its terms. Up to :data:`ENUMERATE_MAX`
combinations all are tried (measured: the 16 of a box on two frictional corners take
7.6 ms, the 4 of two frictionless points 1.0 ms, once per event). The accelerations
of every certified combination must agree: if two differ, the contact problem is
indeterminate (e.g. Painleve's paradox) and :class:`ContactSolveError` names the
points; if none is certified it has no solution. Where several combinations give the
same accelerations (a point touching with zero force and zero gap acceleration, a
point on the edge of its cone) the caller's preference decides (the change the
event announced, else the previous state).

Many points (more than :data:`ENUMERATE_MAX` combinations: 4^20 for twenty frictional
points) are solved by Lemke's algorithm (:mod:`gaussopt.gauss.lcp`) on the LCP written
in the contact forces: the motion without contacts and its response to every force
come from the bilateral KKT system, and the unknowns are ``z = (N, lam+, u-)`` with
``lam+ = mu N + tau`` (:func:`_by_lcp`). A small compliance (:data:`_LCP_COMPLIANCE`)
keeps the pivots away from the degeneracy of dependent rows (a body on many points),
where Lemke's algorithm could end on a ray. The modes are read from its last basis;
a point it leaves on an edge (zero force and zero rate) may take either side, so the
preferred side and its own are certified, best first, exactly as above. Its answer is
therefore as certain as the enumeration's, but not proven unique: a second motion is
found only by the enumeration. Measured on a plank lying on 20 frictional points:
0.8-1.0 ms per solve, where the enumeration would need 4^20 combinations
(``benchmarks/contact.py``).

Indeterminate forces: where the rows of the closed points are dependent (two
sticking corners of a box on a plane; a ladder sticking on a rough wall and floor)
the accelerations are unique but the forces are not: every ``lam0 + Z y`` with
``Z`` spanning the null space of the rows' transpose balances the motion. A
combination is certified if *some* distribution lies in every cone; the one
reported is the least-norm admissible distribution (:func:`admissible`, an exact
projection onto the polyhedron of admissible ``y``), flagged ``indeterminate``.
It is never an equal split judged point by point.

Exact for planar point contacts (one tangent per point) with any number of
points, bilateral rows, redundant rows and singular ``M`` (as long as the
accelerations are determined; on the LCP path also without the contacts). A face
landing flat on many points (dependent rows, every point on the edge of its condition)
is answered at its extreme rows' points where Lemke's reading certifies nothing
(:func:`_vertex_states`); a degenerate problem whose answer needs other points (Newton's
bounds not linear along the face) stays unanswered. Spatial point contacts (two
tangents, the circular cone ``|t| <= mu N``: not a linear complementarity problem) are
solved by :mod:`gaussopt.gauss.contact_cone`, the same enumeration with the slide
directions solved by Newton and indeterminate forces placed in the cones by Clarabel. Not
solved: spatial problems with more than :data:`MAX_COMBINATIONS` combinations of
modes, and planar ones beyond :data:`ENUMERATE_MAX` whose LCP Lemke's algorithm does
not solve (it ends on a ray: then :data:`MAX_COMBINATIONS` combinations are still
tried one by one).

References
----------
F. Pfeiffer, C. Glocker, *Multibody Dynamics with Unilateral Contacts*, Wiley 1996,
ch. 6-7 (the planar LCP with friction); Ch. Glocker, *Set-Valued Force Laws*,
Springer 2001 (the impact law).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
from scipy.linalg.lapack import dgeqrf as _GEQRF, dgesdd as _GESDD, dormqr as _ORMQR, \
    dtrcon as _TRCON, dtrtrs as _TRTRS

from gaussopt.core.compiled import jit
from gaussopt.core.exceptions import GaussoptError, ModelError, SolverError
from gaussopt.core.settings import DEFAULT_RANK_TOL
import gaussopt.gauss.dense_algebra as LA
from gaussopt.gauss.solution import solve_gauss

__all__ = ["ContactSolution", "ContactSolveError", "solve_contact", "verify", "same_motion",
           "admissible", "ENUMERATE_MAX", "in_span", "self_stresses", "selected_kkt",
           "max_margin", "MAX_COMBINATIONS", "OPEN", "CLOSED", "STICK",
           "SLIDE_POS", "SLIDE_NEG", "MODE_NAMES"]

_EPS = float(np.finfo(float).eps)


def _max_abs(x) -> float:
    """``max |x|`` over every entry of a vector or matrix (0 for an empty one): the
    compiled :func:`gaussopt.gauss.dense_algebra.absmax` / ``absmax_vec``, where numpy's
    ``np.abs(x).max(initial=0.0)`` cost 1.5 us a call on a contact problem's small arrays
    (some 40 calls per problem)."""
    return LA.absmax(x) if x.ndim == 2 else LA.absmax_vec(x)


#: a coordinate whose diagonal mass is below this fraction of the heaviest's is massless
#: for the scaling of :func:`kkt_solve` (rounding of a computed singular ``M``)
_MASSLESS = 1e-12
#: the modes of a point: open; closed (frictionless, already sliding, or friction=inf:
#: no slip); with finite friction from rest: sticking, or starting to slide + or -
OPEN, CLOSED, STICK, SLIDE_POS, SLIDE_NEG = 0, 1, 2, 3, 4
MODE_NAMES = {OPEN: "open", CLOSED: "closed", STICK: "stick", SLIDE_POS: "slide +",
              SLIDE_NEG: "slide -"}
#: the largest number of combinations of modes tried one by one (each one small SVD)
MAX_COMBINATIONS = 4096
#: beyond this many combinations the states come from Lemke's algorithm on the LCP
#: (:func:`_by_lcp`), each combination it leaves open certified; up to it every
#: combination is tried, which also proves the motion unique
ENUMERATE_MAX = 64
#: relative agreement of the accelerations of two certified combinations: beyond it the
#: motion is indeterminate (rounding of a KKT solve is ~1e-13; distinct motions differ at
#: order one)
_SAME_X = 1e-7


class ContactSolveError(SolverError):
    """No combination of contact modes satisfies the contact conditions (an inconsistent
    contact problem), several with different motions do (indeterminate: e.g. Painleve's
    paradox), or the combinations are too many to try."""

    def __init__(self, message: str, points: Sequence[str] = ()):
        super().__init__(message)
        self.points = list(points)


@dataclass
class ContactSolution:
    """The certified answer.

    Attributes
    ----------
    x : ndarray, shape (n,)
        Accelerations (or velocities after an impact).
    active : ndarray of bool, shape (k,)
        The closed points.
    nu, tau : ndarray, shape (k,)
        Normal force and tangential force along ``T_i`` of every point (0 when open; a
        sliding point's ``tau = -mu d N``).
    lam : ndarray, shape (m,)
        Multipliers of the bilateral rows.
    slack : ndarray, shape (k,)
        ``G x - h``.
    defect : float
        Complementarity defect ``max |nu slack|`` relative to the product of their
        rounding scales.
    mode : ndarray of int, shape (k,)
        :data:`OPEN`, :data:`CLOSED`, :data:`STICK`, :data:`SLIDE_POS`, :data:`SLIDE_NEG`.
    indeterminate : bool
        The forces are not unique: ``nu``, ``tau`` (and ``lam``) are the least-norm
        distribution inside every cone.
    slip : ndarray, shape (k,)
        ``T x - s``.
    direction : ndarray, shape (k, 2)
        Spatial points only (:func:`gaussopt.gauss.contact_cone.solve_contact_cone`, where
        ``tau`` and ``slip`` have shape (k, 2)): the unit slip direction of every sliding
        point, 0 elsewhere.
    """

    x: np.ndarray
    active: np.ndarray
    nu: np.ndarray
    tau: np.ndarray
    lam: np.ndarray
    slack: np.ndarray
    defect: float
    mode: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    indeterminate: bool = False
    slip: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: spatial points (:mod:`gaussopt.gauss.contact_cone`), shape (k, 2): the unit slip
    #: direction of every sliding point (0 for the others)
    direction: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))


@jit(cache=True, python=True, nogil=True)
def _scales(M, F, G, h, x):
    """Rounding scales of the multipliers (|M x| + |F| over the row norms) and of ``G x - h``
    (compiled: eight whole-array operations on a contact problem's few rows cost some 25
    us a call, and a combination's certificate takes two or three)."""
    n, k = M.shape[0], G.shape[0]
    mx = 0.0
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += M[i, j] * x[j]
        mx = max(mx, abs(acc))
    force = mx + LA.absmax_vec(F)
    # x errs by rounding of its own size and of the forces' over the mass (x may vanish
    # where the forces balance: a cone's edge, a point at rest)
    xs = LA.absmax_vec(x) + force / max(LA.absmax(M), 1e-300)
    nu_tol = np.empty(k)
    slack_tol = np.empty(k)
    for i in range(k):
        gn = LA.norm2(G[i])
        nu_tol[i] = 1e4 * _EPS * force / max(gn, 1e-300) * max(1, n)
        slack_tol[i] = 1e4 * _EPS * (gn * xs + abs(h[i]))
    return nu_tol, slack_tol


def verify(M: np.ndarray, F: np.ndarray, G: np.ndarray, h: np.ndarray, x: np.ndarray,
           nu: np.ndarray, W: Sequence[int]) -> tuple[list, list, np.ndarray, np.ndarray,
                                                      np.ndarray]:
    """The normal checks of ``x`` with the closed set ``W`` (normal forces ``nu``):
    ``(negative, violated, slack, nu_tol, slack_tol)``, the closed points whose force is
    below ``-nu_tol`` (pulling) and the open ones whose slack ``G x - h`` is below
    ``-slack_tol`` (penetrating), with the rounding scales of both."""
    nu_tol, slack_tol = _scales(M, F, G, h, x)
    slack = G @ x - h
    W = set(int(i) for i in W)
    neg = [i for i in sorted(W) if nu[i] < -nu_tol[i]]
    out = [i for i in range(G.shape[0]) if i not in W and slack[i] < -slack_tol[i]]
    return neg, out, slack, nu_tol, slack_tol


# --------------------------------------------------------------------------- force polyhedra
def admissible(y0: np.ndarray, C: np.ndarray, d: np.ndarray, tol: np.ndarray
               ) -> Optional[np.ndarray]:
    """The point of ``{y : C y <= d + tol}`` nearest to ``y0`` (exact), or None if empty.

    The projection is a convex QP; its optimality conditions are the linear
    complementarity problem ``y = y0 - C^T w``, ``w >= 0 _|_ d - C y >= 0``, i.e.
    ``LCP(d - C y0, C C^T)`` with a positive semi-definite matrix, which Lemke's
    algorithm (:func:`gaussopt.gauss.lcp.lemke`) solves whenever the polyhedron is not
    empty and refutes (a ray) when it is (then the same with ``d + tol``). The answer is
    re-solved on its face (the rows with ``w > 0``, least squares) to the rounding of
    that face's own system: a force on a cone's edge is on it to rounding. Used for the
    least-norm admissible distribution of indeterminate contact forces.
    """
    from gaussopt.gauss.lcp import lemke

    y0 = np.asarray(y0, dtype=float)
    C, d, tol = np.asarray(C, dtype=float), np.asarray(d, dtype=float), np.asarray(tol, float)
    r, p = y0.size, C.shape[0]
    if p == 0:
        return y0.copy()
    if r == 0:
        return y0 if np.all(C @ y0 <= d + tol) else None
    # the exact polyhedron first (the answer then lies on its faces, as the cones' edges
    # are), the rounding allowance only if that one is empty
    G_ = C @ C.T
    for allowance in (np.zeros(p), tol):
        w = lemke(G_, d + allowance - C @ y0)
        if w is None:
            continue
        y = y0 - C.T @ w
        face = np.flatnonzero(w > 0.0)
        if face.size:
            CS = C[face]
            # the projection onto the face {C_S y = d_S}: y0 - C_S^T mult, to the rounding of
            # the face's own system
            mult = np.linalg.lstsq(CS @ CS.T, CS @ y0 - d[face] - allowance[face],
                                   rcond=None)[0]
            y_face = y0 - CS.T @ mult
            if np.all(C @ y_face <= d + tol):
                y = y_face
        if np.all(C @ y <= d + tol):
            return y
    return None


def max_margin(b: np.ndarray, a: np.ndarray) -> float:
    """``max_y min_j (b_j + a_j y)`` (exact): the largest margin by which a distribution of
    indeterminate forces can keep every condition ``b_j + a_j y >= 0`` (a normal force, a
    side of a cone). Positive while the contacts can hold, zero when they just can.

    ``a``: shape (p, r). The linear program ``max s`` subject to ``b + a y >= s`` (after
    removing the directions of ``y`` that change no condition) is solved as the linear
    complementarity problem of its optimality conditions by Lemke's algorithm
    (:func:`gaussopt.gauss.lcp.lemke`: ``y`` and ``s`` split into nonnegative parts; the
    program is always feasible, so a ray means it is unbounded), and the optimal vertex is
    re-solved from the ``r + 1`` conditions its multipliers make active, to the rounding
    of that square system. Returns ``inf`` when the margin is unbounded (the forces can
    grow without limit inside all cones, e.g. free internal forces of ``friction=inf``
    points).
    """
    from gaussopt.gauss.lcp import lemke

    b, a = np.asarray(b, dtype=float), np.asarray(a, dtype=float)
    p, r = a.shape
    if p == 0:
        return math.inf
    if r:
        # the directions that change some piece (others change none): y = V w
        _, sv, Vt = np.linalg.svd(a, full_matrices=False)
        keep = sv > 1e-12 * max(1.0, float(sv[0]) if sv.size else 1.0)
        a = a @ Vt[keep].T
        r = a.shape[1]
    if r == 0:
        return float(b.min())
    # min c.x  s.t.  D x >= -b, x >= 0, with x = (y+, y-, s+, s-) and c = (0, 0, -1, 1):
    # LCP of  (x, u):  w = [c - D^T u; D x + b],  matrix [[0, -D^T], [D, 0]]
    one = np.ones((p, 1))
    D = np.hstack([a, -a, -one, one])
    nx = 2 * r + 2
    Ml = np.zeros((nx + p, nx + p))
    Ml[:nx, nx:] = -D.T
    Ml[nx:, :nx] = D
    c = np.zeros(nx)
    c[2 * r], c[2 * r + 1] = -1.0, 1.0
    zl = lemke(Ml, np.concatenate([c, b]))
    if zl is None:
        return math.inf
    x, u = zl[:nx], zl[nx:]
    y, s = x[:r] - x[r:2 * r], float(x[2 * r] - x[2 * r + 1])
    # the vertex from its active conditions (the largest multipliers; they sum to 1)
    S = np.argsort(-u)[:r + 1]
    K = np.hstack([a[S], -np.ones((r + 1, 1))])
    scale = 1.0 + float(np.abs(b).max())
    if np.all(u[S] > 0.0) and np.linalg.matrix_rank(
            K, tol=1e-12 * max(1.0, float(np.abs(K).max()))) == r + 1:
        zv = np.linalg.solve(K, -b[S])
        if np.all(b + a @ zv[:r] >= zv[r] - 1e-12 * scale):
            return float(zv[r])
    return s


# --------------------------------------------------------------------------- one combination
@dataclass
class _Combination:
    x: np.ndarray
    z: np.ndarray               # multipliers: bilateral, normal of closed, tangential of rows
    Z: np.ndarray               # (len(z), r) orthonormal basis of the indeterminate forces
    closed: list
    trows: list                 # points with a tangential row (stick, friction=inf)
    W_rows: np.ndarray          # the force directions (rows of W)
    J_rows: np.ndarray
    rhs: np.ndarray


def _directions(mode, mu, slide, k):
    """Per point: the sign d of its sliding friction (0 none) and whether it has a
    tangential (no-slip) row."""
    d = np.zeros(k)
    trow = np.zeros(k, dtype=bool)
    for i in range(k):
        mi = int(mode[i])
        if mi == OPEN:
            continue
        if mi == SLIDE_POS:
            d[i] = 1.0
        elif mi == SLIDE_NEG:
            d[i] = -1.0
        elif mi == STICK or (mi == CLOSED and mu[i] == math.inf):
            trow[i] = True
        elif mi == CLOSED and mu[i] > 0 and slide[i] != 0:
            d[i] = float(slide[i])
    return d, trow


def _solve_combination(M, F, A, b, G, h, T, s, mu, slide, mode) -> Optional[_Combination]:
    """The KKT system of one combination of modes, by an SVD of its scaled matrix: None if
    it is inconsistent or leaves the accelerations undetermined."""
    n, m, k = M.shape[0], A.shape[0], G.shape[0]
    d, trow = _directions(mode, mu, slide, k)
    closed = [i for i in range(k) if mode[i] != OPEN]
    trows = [i for i in range(k) if trow[i]]
    J = np.concatenate([A, G[closed], T[trows]])
    fr = np.zeros(k)                                       # (mu = inf never slides)
    fr[d != 0] = mu[d != 0] * d[d != 0]
    W = np.concatenate([A, G[closed] - fr[closed][:, None] * T[closed], T[trows]])
    rhs = np.concatenate([b, h[closed], s[trows]])
    got = svd_kkt(M, F, J, W, rhs)
    if got is None:
        return None
    x, z, Z = got
    return _Combination(x=x, z=z, Z=Z, closed=closed, trows=trows, W_rows=W, J_rows=J,
                        rhs=rhs)


def _svd(X: np.ndarray, full: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``numpy.linalg.svd(X, full_matrices=full)`` by LAPACK's ``gesdd`` called directly:
    on the small matrices of a contact problem numpy's checks and dispatch cost as much
    as the factorization (6 x 6: 23 against 11 us). numpy's own where ``gesdd`` does not
    converge (it raises ``LinAlgError``) or ``X`` is empty."""
    if X.size:
        U, sv, Vt, info = _GESDD(X, full_matrices=int(full))
        if info == 0:
            return U, sv, Vt
    return np.linalg.svd(X, full_matrices=full)


def _kkt_scaling(M: np.ndarray, J: np.ndarray, W: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, float]:
    """``(D, rs, ms)``: the scales of a KKT system (:func:`kkt_solve`): coordinates ``x =
    D x'`` with ``D_ii = M_ii^-1/2`` (a massless coordinate, ``M_ii`` below
    :data:`_MASSLESS` of the heaviest's, keeps the heaviest's scale), rows by ``rs =
    1 / |J_i D|``, and ``ms`` the largest entry of ``D M D`` or ``W D``."""
    n, p = M.shape[0], J.shape[0]
    got = _kkt_scaled(M, J, W, np.zeros((n, 0)), np.zeros((p, 0)))
    return got[0], got[1], got[2]


@jit(cache=True, python=True, nogil=True)
def _kkt_scaled(M, J, W, R_top, R_bot):
    """:func:`_kkt_scaling`'s ``(D, rs, ms)`` and the scaled system of :func:`kkt_solve`,
    ``(Ms, C, Bt, f, c)`` = ``(D M D / ms, rs J D, rs W D, D R_top / ms, rs R_bot)``
    (right-hand sides as columns), in one compiled call: as fifteen numpy operations on
    a contact problem's small arrays they cost 50 us, more than the factorizations."""
    n, p = M.shape[0], J.shape[0]
    top = 0.0
    for i in range(n):
        top = max(top, M[i, i])
    D = np.empty(n)
    for i in range(n):
        if top > 0:
            D[i] = 1.0 / math.sqrt(M[i, i] if M[i, i] > _MASSLESS * top else top)
        else:
            D[i] = 1.0
    Ms = np.empty((n, n))
    ms = 1e-300
    for i in range(n):
        for j in range(n):
            Ms[i, j] = M[i, j] * D[i] * D[j]
            ms = max(ms, abs(Ms[i, j]))
    C = np.empty((p, n))
    Bt = np.empty((p, n))
    rs = np.empty(p)
    for r in range(p):
        acc = 0.0
        for j in range(n):
            C[r, j] = J[r, j] * D[j]
            Bt[r, j] = W[r, j] * D[j]
            acc += C[r, j] * C[r, j]
            ms = max(ms, abs(Bt[r, j]))
        rn = math.sqrt(acc)
        rs[r] = 1.0 / (rn if rn > 0 else 1.0)
    for r in range(p):
        for j in range(n):
            C[r, j] *= rs[r]
            Bt[r, j] *= rs[r]
    for i in range(n):
        for j in range(n):
            Ms[i, j] /= ms
    f = np.empty(R_top.shape)
    for i in range(n):
        for j in range(R_top.shape[1]):
            f[i, j] = R_top[i, j] * D[i] / ms
    c = np.empty(R_bot.shape)
    for r in range(p):
        for j in range(R_bot.shape[1]):
            c[r, j] = R_bot[r, j] * rs[r]
    return D, rs, ms, Ms, C, Bt, f, c


def kkt_solve(M: np.ndarray, J: np.ndarray, W: np.ndarray, R_top: np.ndarray,
              R_bot: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray, float]]:
    """The KKT system ``M x - W^T z = R_top``, ``J x = R_bot`` (one right-hand side, or
    several as columns), scaled, by its singular value decomposition:
    ``(sol, rest, rs, ms)`` with ``sol = (x, z_s)`` the minimum-norm solution of the
    scaled system and ``rest`` an orthonormal basis (columns) of the scaled forces'
    directions that the system determines (the complement of the forces' part of its
    null space, which holds no accelerations), where
    the rows are scaled by their norms (``rs = 1 / |J_i|``), ``M`` by its largest entry
    or ``W``'s (``ms``), and the forces are ``z = ms rs z_s``; None when the system is
    inconsistent (residual above the rounding of its terms) or its null space reaches
    the accelerations (they are not determined).

    The scaled matrix ``K = [M / ms, B; C, 0]`` (``B = -(rs W)^T``, ``C = rs J``: p rows,
    n coordinates) has many more rows than coordinates when a body touches at many
    points (43 x 43 for a plank on 20 frictional points, where ``n = 3``), and an SVD of
    it cost ~0.3 ms. Its structure gives the same decomposition from small ones: with
    ``B^T = U_w S_w V_w^T`` and ``C = U_j S_j V_j^T``, the orthogonal change of unknowns
    ``z_s = U_w y`` and of rows ``U_j^T`` turns ``K`` into ``K_s = [M / ms, V_w S_w; S_j
    V_j^T, 0]`` (``(n + r_j) x (n + r_w)``, ``r`` the ranks: at most ``n`` each) bordered
    by zero rows and columns. ``K`` and ``K_s`` have the same nonzero singular values; the
    minimum-norm least-squares solution sets the unknowns of the zero columns (the
    forces that do no work, ``U_w``'s last ``p - r_w`` columns) to zero and ignores the
    zero rows (their right-hand side is the residual the consistency check sees), and
    the null space is ``K_s``'s mapped back plus those force directions (``rest``: the
    complement, of at most ``n`` columns, cheaper to factor than the null space). The rank is
    decided as for ``K`` (``DEFAULT_RANK_TOL`` relative to the largest singular value);
    the directions of ``B`` and ``C`` dropped before (their singular values below that
    fraction of their own largest) lie below that threshold too, since ``K_s`` holds
    ``S_w`` and ``S_j``.

    The coordinates are scaled first, by their masses (``x = D x'``, ``D_ii = M_ii^-1/2``:
    ``D M D`` has a unit diagonal), so that the rank decision does not depend on the units
    of the coordinates. Without it a model that mixes a sleeve's 5e-9 kg m^2 with a body's
    4.8e-3 kg (Glocker's woodpecker: ``M``'s eigenvalues 3e-8 to 5e-3, the Delassus
    matrix of its beak's contact well conditioned, 12) put the smallest singular value of
    a sliding impact's system at 7e-9 of the largest: below the rank tolerance, the
    impact was declared undetermined, and no combination was left to certify. Scaled,
    the answer is the same whatever units the coordinates are written in. Coordinates
    without mass (a singular ``M``: ``M_ii`` below :data:`_MASSLESS` of the heaviest's)
    keep the heaviest's scale."""
    kkt, sol = _kkt_factored(M, J, W, R_top, R_bot)
    return None if sol is None else (sol, kkt.rest(), kkt.rs, kkt.ms)


def _kkt_factored(M, J, W, R_top, R_bot) -> tuple["KKTFactor", Optional[np.ndarray]]:
    """The system's factorization (:class:`KKTFactor`) and its solution ``(x, z_s)`` for
    ``R_top``, ``R_bot`` (:meth:`KKTFactor.solve`)."""
    n, p = M.shape[0], J.shape[0]
    one = R_top.ndim == 1
    cols = 1 if one else R_top.shape[1]
    D, rs, ms, Ms, C, Bt, f, c = _kkt_scaled(                 # (Bt: -B^T)
        np.ascontiguousarray(M, dtype=float), np.ascontiguousarray(J, dtype=float),
        np.ascontiguousarray(W, dtype=float),
        np.ascontiguousarray(R_top.reshape(n, cols), dtype=float),
        np.ascontiguousarray(R_bot.reshape(p, cols), dtype=float))
    kkt = KKTFactor(D, rs, ms, Ms, C, Bt, W is J or np.array_equal(W, J))
    return kkt, (kkt._solve_scaled(f[:, 0], c[:, 0]) if one else kkt._solve_scaled(f, c))


class KKTFactor:
    """The factorization of one KKT system of :func:`kkt_solve` (its scales, the SVDs of
    its rows and of the small system ``K_s``), kept to solve it again for other
    right-hand sides (:meth:`solve`): Newton's Jacobian on slide directions solves the
    system its iterate has just solved, with a column per slider (MuJoCo's humanoid: two
    thirds of its impacts' time in those SVDs, half of them repeated)."""

    def __init__(self, D, rs, ms, Ms, C, Bt, same: bool):
        n, p = Ms.shape[0], C.shape[0]
        self.n, self.p, self.D, self.rs, self.ms = n, p, D, rs, ms
        self.Ms, self.C, self.Bt = Ms, C, Bt
        if p:
            Uj, sj, Vjt = _svd(C, full=False)
            # (U_w's first r_w columns are read; W = J without sliding rows: one SVD)
            Uw, sw, Vwt = (Uj, sj, Vjt) if same else _svd(Bt, full=False)
            pre = DEFAULT_RANK_TOL * max(float(sw[0]), float(sj[0]))
            rw, rj = int(np.count_nonzero(sw > pre)), int(np.count_nonzero(sj > pre))
            Ks = np.zeros((n + rj, n + rw))
            Ks[:n, :n] = Ms
            Ks[:n, n:] = -(Vwt[:rw].T * sw[:rw])
            Ks[n:, :n] = sj[:rj, None] * Vjt[:rj]
            self.Ujr = Uj[:, :rj]
        else:                                              # (no rows: K is M / ms)
            Uw, rw, Ks, self.Ujr = np.zeros((0, 0)), 0, Ms, None
        self.Uwr = Uw[:, :rw]
        U, sig, Vt = _svd(Ks)
        rank = int(np.count_nonzero(sig > DEFAULT_RANK_TOL * (sig[0] if sig.size else 0.0)))
        self.Ur, self.sigr, self.Vr = U[:, :rank], sig[:rank], Vt[:rank].T
        self.null_s = Vt[rank:].T
        self.big = max(_max_abs(Ms), _max_abs(Bt), _max_abs(C))
        #: whether the accelerations are determined (the null space holds forces only)
        self.determined = not (self.null_s.size and np.abs(self.null_s[:n]).max() > 1e-6)
        self._rest: Optional[np.ndarray] = None

    def solve(self, R_top: np.ndarray, R_bot: np.ndarray) -> Optional[np.ndarray]:
        """:func:`kkt_solve`'s solution ``(x, z_s)`` of this system (``sol``, without the
        basis ``rest``: :meth:`rest`) with the right-hand sides ``R_top`` (n,) or (n, c)
        and ``R_bot`` (p,) or (p, c); None where they are inconsistent or the
        accelerations not determined."""
        f = R_top * (self.D if R_top.ndim == 1 else self.D[:, None]) / self.ms
        c = R_bot * (self.rs if R_bot.ndim == 1 else self.rs[:, None])
        return self._solve_scaled(f, c)

    def _solve_scaled(self, f, c):
        n, p = self.n, self.p
        if not self.determined:
            return None                                    # accelerations not determined
        Rs = np.concatenate([f, self.Ujr.T @ c]) if p else f
        coef = self.Ur.T @ Rs
        sol_s = self.Vr @ (coef / (self.sigr if Rs.ndim == 1 else self.sigr[:, None]))
        x, zs = sol_s[:n], self.Uwr @ sol_s[n:]
        res = max(_max_abs(self.Ms @ x - self.Bt.T @ zs - f), _max_abs(self.C @ x - c))
        size = max(_max_abs(x), _max_abs(zs))
        if res > 1e4 * _EPS * (n + p) * (self.big * size + max(_max_abs(f), _max_abs(c))):
            return None                                    # inconsistent rows
        D = self.D
        return np.concatenate([x * (D if x.ndim == 1 else D[:, None]), zs])

    def rest(self) -> np.ndarray:
        """An orthonormal basis (columns) of the scaled forces' directions the system
        determines (:func:`kkt_solve`'s ``rest``), computed once, when asked (Newton's
        iterates on slide directions do not need it)."""
        if self._rest is None:
            # the forces' null space is U_w's last columns and U_w's first ones times the
            # force part of K_s's: its complement, U_w's first columns times that part's
            # complement
            null_s, n = self.null_s, self.n
            if null_s.size:
                self._rest = self.Uwr @ np.linalg.qr(null_s[n:], mode="complete")[0][
                    :, null_s.shape[1]:]
            else:
                self._rest = self.Uwr
        return self._rest


def self_stresses(J: np.ndarray) -> np.ndarray:
    """An orthonormal basis (columns) of ``null(J^T)``: the force combinations of the rows
    ``J`` that do no work on any motion (a box's four corners on a plane: loading two
    opposite corners and unloading the other two). Decided on the row-normalized rows
    (``DEFAULT_RANK_TOL`` of the largest singular value), so that rows of different
    units do not hide a dependence; shape ``(p, 0)`` when the rows are independent."""
    p = J.shape[0]
    if p < 2:
        return np.zeros((p, 0))
    rn = np.sqrt((J * J).sum(axis=1))
    rn = np.where(rn > 0, rn, 1.0)
    U, sv, _ = _svd(J / rn[:, None])
    rank = int(np.count_nonzero(sv > DEFAULT_RANK_TOL * float(sv[0]))) if sv.size else 0
    if rank == p:
        return np.zeros((p, 0))
    return np.linalg.qr(U[:, rank:] / rn[:, None])[0]


def in_span(rows: np.ndarray, base: np.ndarray) -> bool:
    """Whether every row of ``rows`` is a combination of the rows of ``base`` (the rank
    decision of the row-normalized rows, ``DEFAULT_RANK_TOL``)."""
    if base.shape[0] == 0:
        return False
    both = np.vstack([base, rows])
    rn = np.sqrt((both * both).sum(axis=1))
    both = both / np.where(rn > 0, rn, 1.0)[:, None]
    sb = np.linalg.svd(both[:base.shape[0]], compute_uv=False)
    sa = np.linalg.svd(both, compute_uv=False)
    tol = DEFAULT_RANK_TOL * max(float(sa[0]), 1e-300)
    return int(np.count_nonzero(sa > tol)) == int(np.count_nonzero(sb > tol))


def selected_kkt(M: np.ndarray, F: np.ndarray, J: np.ndarray, W: np.ndarray, rhs: np.ndarray
                 ) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """``(x, z)`` of ``M x - W^T z = F``, ``J x = rhs`` whose forces carry no self-stress
    of the rows, ``S^T z = 0`` (``S``: :func:`self_stresses` of ``J``); None when that
    system is inconsistent or leaves the accelerations undetermined.

    Why: with sliding points (``W != J``: a sliding point's column carries its friction
    ``-mu N d T``) on dependent rows, the rigid model does not determine the motion. A
    box sliding and spinning flat on four corners: one combination of the corners'
    normal forces (two opposite corners loaded, two unloaded) does no work on the
    normal motion, but it moves the friction from one pair of corners to the other and
    turns the box. Every distribution between "three corners carry it" and "the other
    three do" is an admissible rigid motion. The one chosen is the rigid limit of equally
    stiff points: stiff points carry forces ``N = k G dq`` in the range of the rows
    (``G`` the gaps' rows), i.e. orthogonal to ``null(G^T)`` -- no self-stress. Without
    sliding friction it is the least-norm distribution (the forces of indeterminate
    sticking points, and what a minimum-norm solve gives), so the rule is one rule.

    ``F`` and ``rhs`` may also hold several right-hand sides as columns ((n, c), (p, c)):
    ``x`` and ``z`` then have as many columns."""
    kkt = SelectedKKT.of(M, J, W)
    return None if kkt is None else kkt.solve(F, rhs)


class SelectedKKT:
    """The factorization of :func:`selected_kkt`'s system (its scales, the self-stresses
    and the bordered matrix's QR, or its SVD near the rank threshold), kept to solve it
    for other right-hand sides (:meth:`solve`): Newton's Jacobian on the slide directions
    of a face sliding on its corners solves the system its iterate has just solved."""

    @classmethod
    def of(cls, M: np.ndarray, J: np.ndarray, W: np.ndarray) -> Optional["SelectedKKT"]:
        """The factorization, or None where the rows carry no self-stress or the system
        leaves the accelerations undetermined."""
        S = self_stresses(J)
        if S.shape[1] == 0:
            return None
        kkt = cls(M, J, W, S)
        return kkt if kkt.determined else None

    def __init__(self, M, J, W, S):
        n, p = M.shape[0], J.shape[0]
        r = S.shape[1]
        D, rs, ms = _kkt_scaling(M, J, W)
        # unknowns x = D x', z = ms rs z'; rows scaled as kkt_solve's
        K = np.zeros((n + p + r, n + p))
        K[:n, :n] = M * D[:, None] * D[None, :] / ms
        K[:n, n:] = -(W * D * rs[:, None]).T
        K[n:n + p, :n] = J * D * rs[:, None]
        St = S.T * (ms * rs)[None, :]
        St = St / np.maximum(np.sqrt((St * St).sum(axis=1)), 1e-300)[:, None]
        K[n + p:, n:] = St
        self.n, self.p, self.r, self.D, self.rs, self.ms, self.K = n, p, r, D, rs, ms, K
        self.Kmax = _max_abs(K)
        #: ``(qr, tau)``: K's QR factorization, where K is well away from the rank
        #: decision's threshold (then of full column rank: the least-squares solution is
        #: unique, the SVD's minimum-norm one, and the accelerations determined)
        self.qr = None
        N = n + p
        qr, tau, _, info = _GEQRF(K)
        if info == 0 and N:
            rcond, info = _TRCON(qr[:N], norm="1", uplo="U", diag="N")
            # LAPACK's 1-norm estimate, 1.5 to 5.2 times the 2-norm condition on the
            # sliding phases of MuJoCo's humanoid (the 2-norm one is within N of the
            # 1-norm's, and the estimate within N of that): well away from the SVD's
            # threshold where it clears it by N^2 and a factor 10. Why: a sliding phase's
            # force factors this matrix at every evaluation (n = 28, p = 12 on the
            # humanoid's feet: the SVD 190 us, the QR 14)
            if info == 0 and rcond > 10.0 * N * N * DEFAULT_RANK_TOL:
                self.qr = (qr, tau)
                self.determined = True
                return
        U, sig, Vt = _svd(K, full=False)
        rank = int(np.count_nonzero(sig > DEFAULT_RANK_TOL * (sig[0] if sig.size else 0.0)))
        self.determined = not (rank < n + p and np.abs(Vt[rank:, :n]).max(initial=0.0) > 1e-6)
        self.Ur, self.sigr, self.Vr = U[:, :rank], sig[:rank], Vt[:rank].T

    def solve(self, F: np.ndarray, rhs: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """:func:`selected_kkt` of this system with ``F`` (n,) or (n, c) and ``rhs`` (p,)
        or (p, c)."""
        n, p, r = self.n, self.p, self.r
        one = F.ndim == 1
        Dc, rc = (self.D, self.rs) if one else (self.D[:, None], self.rs[:, None])
        R = np.concatenate([F * Dc / self.ms, rhs * rc, np.zeros((r,) + F.shape[1:])])
        if self.qr is not None:
            sol = self._qr_solve(R)
        else:
            sol = self.Vr @ ((self.Ur.T @ R) / (self.sigr if one else self.sigr[:, None]))
        res = _max_abs(self.K @ sol - R)
        size = _max_abs(sol)
        if res > 1e4 * _EPS * (n + p + r) * (self.Kmax * size + _max_abs(R)):
            return None                                    # inconsistent rows
        return sol[:n] * Dc, sol[n:] * self.ms * rc

    def _qr_solve(self, R: np.ndarray) -> np.ndarray:
        """The least-squares solution of ``K sol = R`` by K's QR factorization."""
        qr, tau = self.qr
        N = self.n + self.p
        one = R.ndim == 1
        C = R.reshape(R.shape[0], -1)
        y, _, info = _ORMQR("L", "T", qr, tau, C, max(1, C.shape[1]))
        if info != 0:
            raise np.linalg.LinAlgError(f"LAPACK ormqr failed (info {info})")
        sol, info = _TRTRS(qr[:N], y[:N], lower=0)
        if info != 0:
            raise np.linalg.LinAlgError(f"LAPACK trtrs failed (info {info})")
        return sol[:, 0] if one else sol


def svd_kkt(M: np.ndarray, F: np.ndarray, J: np.ndarray, W: np.ndarray, rhs: np.ndarray,
            select: bool = False, basis: bool = True
            ) -> Optional[tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]]:
    """``(x, z, Z)`` of ``M x - W^T z = F``, ``J x = rhs`` (``W`` = ``J`` but for sliding
    points' rows), by :func:`kkt_solve`: the minimum-norm ``z`` and an orthonormal basis
    ``Z`` of the force combinations left free; None when the rows are inconsistent or
    the accelerations are not determined. ``select``: where sliding points on dependent
    rows leave the accelerations undetermined, the forces without self-stress decide
    them (:func:`selected_kkt`) and ``Z`` spans ``null(W^T)``, the forces that change
    nothing. ``basis=False``: ``Z`` is None (not computed: Newton's iterates on slide
    directions read ``x`` and ``z`` only)."""
    got = svd_kkt_later(M, F, J, W, rhs, select)
    if got is None:
        return None
    return got[0], got[1], (got[2]() if basis else None)


def svd_kkt_later(M: np.ndarray, F: np.ndarray, J: np.ndarray, W: np.ndarray, rhs: np.ndarray,
                  select: bool = False) -> Optional[tuple[np.ndarray, np.ndarray, Callable]]:
    """:func:`svd_kkt` with the basis ``Z`` computed later, when asked: ``(x, z, basis)``,
    ``basis()`` returning ``Z`` (Newton's iterates on slide directions read ``x`` and
    ``z`` only; the converged one also needs ``Z``, without solving its system again).
    ``basis.selected``: whether the forces without self-stress decided the motion
    (:func:`selected_kkt`); ``basis.kkt``: the system's factorization to solve it again,
    :class:`SelectedKKT` where they did, :class:`KKTFactor` where not."""
    n = M.shape[0]
    p = J.shape[0]
    kkt, sol = _kkt_factored(M, J, W, F, rhs)
    if sol is None:
        if not select or p < 2 or W is J or np.array_equal(W, J):
            return None
        skkt = SelectedKKT.of(M, J, W)
        sel = None if skkt is None else skkt.solve(F, rhs)
        if sel is None:
            return None

        def stresses() -> np.ndarray:
            return self_stresses(W)
        stresses.selected = True
        stresses.kkt = skkt
        return sel[0], sel[1], stresses
    x = sol[:n]
    zscale = kkt.ms * kkt.rs                               # z = ms * rs * z_scaled
    z = sol[n:] * zscale

    def basis() -> np.ndarray:
        # the free forces z = zscale z_s, z_s orthogonal to rest: z orthogonal to
        # rest / zscale
        if not p:
            return np.zeros((0, 0))
        rest = kkt.rest()
        if rest.shape[1] >= p:
            # (the system determines every force: no free combination, and no QR of a
            # square matrix to find that out -- a third of a one-point problem's time)
            return np.zeros((p, 0))
        Q = np.linalg.qr(rest / zscale[:, None], mode="complete")[0]
        return Q[:, rest.shape[1]:]
    basis.selected = False
    basis.kkt = kkt
    return x, z, basis


def _force_conditions(comb: _Combination, m: int, mu: np.ndarray, mode: np.ndarray,
                      nu_tol: np.ndarray, weld: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The admissibility of the forces as ``c_j . z >= 0`` (rows ``c_j``) with their
    tolerances: every closed point's ``N >= 0`` (not for a welded one); a sticking
    point's ``mu N -+ tau >= 0``. (Written point by point: for the few dozen rows of a
    contact problem, a dozen whole-array operations cost three times as much.)"""
    z = comb.z
    nc = len(comb.closed)
    tpos = {i: m + nc + j for j, i in enumerate(comb.trows)}
    modes = np.asarray(mode).tolist()
    # in the order of the points: each closed point's N >= 0 (not for a welded one), then
    # a sticking one's mu N - tau >= 0 and mu N + tau >= 0
    rows = []
    for j, i in enumerate(comb.closed):
        if not weld[i]:
            rows.append((i, m + j, -1))
        if modes[i] == STICK:
            rows.append((i, m + j, tpos[i]))
    count = sum(1 if t < 0 else 2 for _, _, t in rows)
    Cz = np.zeros((count, z.size))
    tols = np.empty(count)
    r = 0
    for i, p, t in rows:
        if t < 0:
            Cz[r, p] = 1.0
            tols[r] = nu_tol[i]
            r += 1
            continue
        mi = float(mu[i])
        Cz[r, p] = Cz[r + 1, p] = mi
        Cz[r, t], Cz[r + 1, t] = -1.0, 1.0
        tols[r] = tols[r + 1] = nu_tol[i] * (1.0 + mi) + 1e4 * _EPS * (
            mi * abs(z[p]) + abs(z[t]))
        r += 2
    return Cz, tols, np.zeros(count)


def _forces(comb: _Combination, m: int, mu, mode, nu_tol, weld) -> tuple[Optional[np.ndarray],
                                                                          bool]:
    """The force vector ``z`` of the combination inside every cone (the unique one, or the
    least-norm admissible one when the forces are indeterminate), or None."""
    Cz, tols, _ = _force_conditions(comb, m, mu, mode, nu_tol, weld)
    z0, Z = comb.z, comb.Z
    if Z.shape[1] == 0:
        ok = np.all(Cz @ z0 >= -tols) if Cz.size else True
        return (z0 if ok else None), False
    # least norm of z0 + Z y: y0 = -Z^T z0; constraints -Cz (z0 + Z y) <= 0
    y0 = -Z.T @ z0
    y = admissible(y0, -Cz @ Z, Cz @ z0, tols)
    if y is None:
        return None, True
    return z0 + Z @ y, True


# --------------------------------------------------------------------------- the problem
def solve_contact(M: np.ndarray, F: np.ndarray, A: np.ndarray, b: np.ndarray, G: np.ndarray,
                  h: np.ndarray, T: Optional[np.ndarray] = None, s: Optional[np.ndarray] = None,
                  stick: Optional[np.ndarray] = None, *, mu: Optional[np.ndarray] = None,
                  slide: Optional[np.ndarray] = None, start: Sequence[int] = (),
                  prefer: Optional[np.ndarray] = None, release: Sequence[Sequence[int]] = (),
                  weld: Optional[np.ndarray] = None,
                  labels: Optional[Sequence[str]] = None) -> ContactSolution:
    """Solve the contact problem of the module docstring, certified.

    Parameters
    ----------
    M : ndarray, shape (n, n)
        Symmetric positive semi-definite.
    F : ndarray, shape (n,)
    A, b : ndarray, shapes (m, n), (m,)
        Bilateral rows.
    G, h : ndarray, shapes (k, n), (k,)
        Unilateral rows ``G x >= h``.
    T, s : ndarray, shapes (k, n), (k,), optional
        Tangential rows: the slip acceleration (or velocity) ``T x - s``.
    stick : ndarray of bool, shape (k,), optional
        Points that do not slip while closed (``friction=inf``); shorthand for ``mu=inf``
        there and 0 elsewhere.
    mu : ndarray, shape (k,), optional
        Friction coefficient of every point (0, finite, or ``inf``); overrides ``stick``.
    slide : ndarray of int, shape (k,), optional
        ``+1``/``-1``: the point already slips that way (its friction is ``-mu N``
        times that sign along ``T``); 0: at rest tangentially (stick or start to slide).
    start : sequence of int
        Points preferred closed (as ``prefer`` with their closed mode), when several
        combinations give the same accelerations.
    prefer : ndarray of int, shape (k,), optional
        The preferred mode of every point (the previous state with the change an
        event announced), deciding between combinations with the same accelerations:
        the fewest points away from it win.
    release : sequence of sequences of int
        Groups of points whose indeterminate forces just left their cones (an event):
        a combination that keeps every member sticking loses, and the fewest members
        still sticking (then open before sliding) win.
    weld : ndarray of bool, shape (k,), optional
        Points held closed (``G_i x = h_i`` whatever the sign of their normal force: the
        end of an accumulation of impacts brings them to rest); their friction obeys the
        cone as the others'.
    labels : sequence of str, optional
        Names of the points, for messages.

    Returns
    -------
    ContactSolution

    Raises
    ------
    ContactSolveError
        No combination satisfies the conditions, or several with different motions do.
    """
    M = np.asarray(M, dtype=float)
    F, A, b = np.asarray(F, dtype=float), np.asarray(A, dtype=float), np.asarray(b, dtype=float)
    G, h = np.asarray(G, dtype=float), np.asarray(h, dtype=float)
    k, n, m = G.shape[0], M.shape[0], A.shape[0]
    if T is None:
        T, s = np.zeros((k, n)), np.zeros(k)
    T, s = np.asarray(T, dtype=float), np.asarray(s, dtype=float)
    if mu is None:
        mu = np.where(np.asarray(stick, dtype=bool), math.inf, 0.0) if stick is not None \
            else np.zeros(k)
    mu = np.asarray(mu, dtype=float)
    slide = np.zeros(k, dtype=int) if slide is None else np.asarray(slide, dtype=int)
    if mu.shape != (k,) or slide.shape != (k,):
        raise ModelError(f"`mu` and `slide` must have shape ({k},), found {mu.shape}, "
                         f"{slide.shape}.")
    labels = list(labels) if labels is not None else [f"point {i}" for i in range(k)]
    weld = np.zeros(k, dtype=bool) if weld is None else np.asarray(weld, dtype=bool)
    options = mode_options((0 < mu) & (mu < math.inf) & (slide == 0),
                           (OPEN, STICK, SLIDE_POS, SLIDE_NEG), weld, labels, limit=None)
    if prefer is None:
        prefer = np.full(k, -1)
        for i in start:
            prefer[int(i)] = STICK if len(options[int(i)]) == 4 else CLOSED
    prefer = np.asarray(prefer, dtype=int)
    total = math.prod(len(o) for o in options)
    found: list = []
    errors: list = []
    certify = _Certifier(M, F, A, b, G, h, T, s, mu, slide, weld, errors)
    if total > ENUMERATE_MAX:
        # many points: Lemke's algorithm on the LCP finds the states, the certificate checks
        # them; the points it leaves on an edge (zero force and zero rate) take each of
        # their states, best first
        found = _by_lcp(certify, options, prefer, release)
        if found:
            best = found[0]
            mode, comb, z, indet, slack, slip, nu_tol, slack_tol = best
            return _solution(M, F, A, b, G, h, T, s, mu, slide, mode, comb, z, indet, slack,
                             slip, nu_tol, slack_tol)
        if total > MAX_COMBINATIONS:
            raise ContactSolveError(
                f"the contact problem of {k} points has {total} combinations of modes: Lemke's "
                "algorithm found no certified solution, and they are more than "
                f"MAX_COMBINATIONS={MAX_COMBINATIONS} to try one by one.", labels)
    for mode in itertools.product(*options):
        got = certify(np.array(mode, dtype=int))
        if got is not None:
            found.append(got)
    if not found:
        last_error = errors[-1] if errors else None
        detail = f" (last failure: {type(last_error).__name__}: {last_error})" if last_error \
            else ""
        raise ContactSolveError(
            "no set of active contact points satisfies the contact conditions (forces >= 0 and "
            "inside their friction cones, gaps not closing, slips against their friction, "
            "complementarity): the contact problem has no solution here, e.g. Painleve's "
            f"paradox or inconsistent constraints. Points: {', '.join(labels)}{detail}.", labels)
    same_motion([f[1].x for f in found], [f[0] for f in found], labels)
    # ties (the same motion, the same changes): the least-norm forces
    best = min(found, key=lambda f: (*_score(f[0], prefer, release, options),
                                     float(np.linalg.norm(f[2]))))
    mode, comb, z, indet, slack, slip, nu_tol, slack_tol = best
    return _solution(M, F, A, b, G, h, T, s, mu, slide, mode, comb, z, indet, slack, slip,
                     nu_tol, slack_tol)


class _Certifier:
    """``certify(mode)``: the certified answer of one combination of modes (the tuple the
    selection takes), or None when it violates a condition; failures of the solve are
    appended to ``errors``."""

    def __init__(self, M, F, A, b, G, h, T, s, mu, slide, weld, errors):
        self.args = (M, F, A, b, G, h, T, s, mu, slide)
        self.weld, self.errors = weld, errors

    def __call__(self, mode: np.ndarray):
        M, F, A, b, G, h, T, s, mu, slide = self.args
        k, m = G.shape[0], A.shape[0]
        try:
            comb = _solve_combination(M, F, A, b, G, h, T, s, mu, slide, mode)
        except (GaussoptError, np.linalg.LinAlgError) as e:
            self.errors.append(e)
            return None
        if comb is None:
            return None
        x = comb.x
        nu_tol, slack_tol = _scales(M, F, G, h, x)
        slack = G @ x - h
        slip = T @ x - s
        _, slip_tol = _scales(M, F, T, s, x)
        # kinematic conditions: open points do not penetrate, starting slides slip their way
        if any(slack[i] < -slack_tol[i] for i in range(k) if mode[i] == OPEN):
            return None
        if any(slip[i] < -slip_tol[i] for i in range(k) if mode[i] == SLIDE_POS) or \
                any(slip[i] > slip_tol[i] for i in range(k) if mode[i] == SLIDE_NEG):
            return None
        z, indet = _forces(comb, m, mu, mode, nu_tol, self.weld)
        if z is None:
            return None
        return (mode, comb, z, indet, slack, slip, nu_tol, slack_tol)


#: a friction coefficient standing for ``mu = inf`` in the LCP (a guess only: the modes
#: it gives are certified with the no-slip row)
_MU_INF = 1e6
#: the most combinations :func:`_vertex_states` certifies (one at a time, ~50 us each)
_VERTEX_MAX = 2048
#: the compliance of the LCP solved for the states (relative to its matrix's largest entry)
_LCP_COMPLIANCE = 1e-9


def _by_lcp(certify: _Certifier, options: list, prefer: np.ndarray,
            release: Sequence[Sequence[int]]) -> list:
    """The contact problem by Lemke's algorithm (:func:`gaussopt.gauss.lcp.lemke`) on
    Pfeiffer and Glocker's LCP: the certified answer (a one-element list), or ``[]``.

    The motion without contacts ``x0`` and its response ``X r`` to the contact forces
    ``r`` come from the bilateral KKT system (an SVD of the scaled ``[M -A^T; A 0]``: the
    accelerations must be determined without the contacts, else ``[]``). Per point
    ``N >= 0 _|_ g >= 0`` and, for a point at rest with finite friction,
    ``lam+ = mu N + tau >= 0 _|_ u+ >= 0``, ``lam- = mu N - tau >= 0 _|_ u- >= 0`` with
    ``u = u+ - u-`` (unknowns ``z = (N, lam+, u-)``, ``w = (g, u+, lam-)``). The states
    read from ``z`` and ``w``; a point with a zero force and a zero rate may take either
    side, so every such combination is certified in the order of the selection's
    preferences (:func:`_score`) and the first certified wins (up to
    :data:`ENUMERATE_MAX` of them; beyond, the answer's own states, the preferred ones and
    those with every point on an edge sliding, :func:`far_side`: the states a released
    group of sticking points asks for).
    """
    M, F, A, b, G, h, T, s, mu, slide = certify.args
    n, k = M.shape[0], G.shape[0]
    rest = np.array([len(o) == 4 or (len(o) == 3 and OPEN not in o) for o in options])
    infinite = (mu == math.inf)
    fr = np.flatnonzero(rest | infinite)                     # points with a tangential unknown
    mu_f = np.where(infinite[fr], _MU_INF, mu[fr])
    d = np.where(rest | infinite | (mu == 0), 0.0, slide.astype(float))
    dirs_n = G - (np.where(np.isfinite(mu), mu, 0.0) * d)[:, None] * T
    # the bilateral KKT system's pseudo-inverse applied to [F, forces; b, 0]
    rhs = np.column_stack([F, dirs_n.T, T[fr].T])
    got = _bilateral_response(M, A, b, rhs)
    if got is None:
        return []
    x0, XN, XT = got[:, 0], got[:, 1:1 + k], got[:, 1 + k:]
    kf = fr.size
    E = np.zeros((kf, k))
    E[np.arange(kf), fr] = 1.0
    Y = XN - XT @ (mu_f[:, None] * E)                          # x = x0 + Y N + XT lam+
    GY, GX, TY, TX = G @ Y, G @ XT, T[fr] @ Y, T[fr] @ XT
    L = k + 2 * kf
    Ml = np.zeros((L, L))
    Ml[:k, :k], Ml[:k, k:k + kf] = GY, GX
    Ml[k:k + kf, :k], Ml[k:k + kf, k:k + kf] = TY, TX
    Ml[k:k + kf, k + kf:] = np.eye(kf)
    Ml[k + kf:, :k], Ml[k + kf:, k:k + kf] = 2.0 * mu_f[:, None] * E, -np.eye(kf)
    ql = np.concatenate([G @ x0 - h, T[fr] @ x0 - s[fr], np.zeros(kf)])
    got = compliant_lemke(Ml, ql)
    if got is None:
        return []
    zl, wl, zero = got
    N, lp, um = zl[:k], zl[k:k + kf], zl[k + kf:]
    g, up, lm = wl[:k], wl[k:k + kf], wl[k + kf:]
    ftol = zero * (_max_abs(zl[:k + kf]) + _max_abs(F) + 1e-300)
    ktol = zero * (_max_abs(ql) + _max_abs(wl[:k + kf]) + _max_abs(um) + 1e-300)
    # each point's states as read (vectorized; the lists only where several are possible)
    at = np.full(k, -1)
    at[fr] = np.arange(kf)
    rest_at = rest & (at >= 0)
    j = np.where(rest_at, at, kf)                     # (kf: a zero appended to each)
    up_, um_, lp_, lm_ = (np.append(x, 0.0)[j] for x in (up, um, lp, lm))
    upk, umk = (up_ > ktol) & rest_at, (um_ > ktol) & rest_at
    edge_p = rest_at & ~upk & ~umk & (lp_ <= ftol)         # tau = -mu N: the + slide's edge
    edge_m = rest_at & ~upk & ~umk & (lm_ <= ftol)
    first = np.where(upk, SLIDE_POS, np.where(umk, SLIDE_NEG, np.where(rest_at, STICK, CLOSED)))
    closed_modes = []
    for i in range(k):
        cm = [int(first[i])]
        if edge_p[i]:
            cm.append(SLIDE_POS)
        if edge_m[i]:
            cm.append(SLIDE_NEG)
        closed_modes.append(cm)
    sets, own, near = read_states(closed_modes, N, N > ftol, g > ktol, options, prefer)
    modes = {tuple(near), tuple(own), tuple(far_side(sets))}
    if math.prod(len(c) for c in sets) <= ENUMERATE_MAX:
        modes.update(itertools.product(*sets))
    order = sorted(modes, key=lambda c: _score(c, prefer, release, options)) \
        if len(modes) > 1 else list(modes)
    for mode in order:
        mode = np.array(mode, dtype=int)
        got = certify(mode)
        if got is not None:
            return [got]
    return _vertex_states(certify, options)


def _vertex_states(certify: "_Certifier", options: list) -> list:
    """The last candidates of :func:`_by_lcp`: the vertices of a degenerate problem.

    A flat face landing on many points at once (a plank slapping the floor nearly flat:
    its 20 normal rows have rank 2, Newton's bounds are linear along the face like the
    rates, so every point is on the edge of its condition, zero impulse and zero slack)
    has answers carried by as many points as the rank ``r`` of the normal rows; Lemke's
    compliant answer spreads the forces over scattered points, whose states, read one by
    one, need not fit together (sticking rows that differ by the face's 2e-8 rad tilt
    forbid its rotation). Nonnegative normal forces on ``r`` points reach every force
    of the rows' cone only from its extreme rays (Caratheodory: a simplex of them; the
    interior points' rows need a pull on one side): for ``r = 2`` the two extreme rows,
    for ``r = 3`` the vertices of the rows' section (their convex hull), ``r`` of them
    at a time; points held closed (welded at the end of an accumulation: their impulses
    take either sign) count as bilateral rows, the others' rows in the complement of
    theirs. Those points are closed, in each of their states, and the others open (or
    closed, where they may not open); the first certified wins. At most
    :data:`_VERTEX_MAX` combinations. (Where Newton's bounds are not linear along the
    face, the binding points need not be extreme: a point held at rest next to others
    that rebound. Those problems stay unanswered here.)"""
    G = certify.args[4]
    # points held closed (welded: they may not open) act as bilateral rows: the others'
    # rows count in the complement of their span
    held = [i for i, o in enumerate(options) if OPEN not in o]
    can = [i for i, o in enumerate(options) if OPEN in o and len(o) > 1]
    if not can:
        return []
    Gc = G[can]
    if held:
        Gh = G[held] / np.maximum(np.sqrt((G[held] ** 2).sum(axis=1)), 1e-300)[:, None]
        _, sh, Vh = np.linalg.svd(Gh, full_matrices=True)
        rh = int(np.count_nonzero(sh > DEFAULT_RANK_TOL * sh[0]))
        Gc = Gc @ Vh[rh:].T                    # (the complement of the held rows' span)
    norms = np.sqrt((Gc ** 2).sum(axis=1))
    keep = norms > DEFAULT_RANK_TOL * max(float(norms.max(initial=0.0)), 1e-300)
    can = [i for i, kp in zip(can, keep) if kp]
    if not can:
        return []
    Gc = Gc[keep] / norms[keep][:, None]
    _, sv, Vt = np.linalg.svd(Gc)
    r = int(np.count_nonzero(sv > DEFAULT_RANK_TOL * sv[0]))
    Y = Gc @ Vt[:r].T                          # the rows in their own r-dimensional span
    ext: list = []
    if r == 1:
        ext = [int(np.argmax(np.abs(Y[:, 0])))]
    else:
        mean = Y.mean(axis=0)
        nm = float(np.linalg.norm(mean))
        along = Y @ (mean / nm) if nm > 0 else np.zeros(len(can))
        if np.all(along > 0):                  # a pointed cone: its section's vertices
            e = mean / nm
            B = np.linalg.svd(np.eye(r) - np.outer(e, e))[0][:, :r - 1]
            X = (Y / along[:, None]) @ B
            if r == 2:
                ext = sorted({int(np.argmin(X[:, 0])), int(np.argmax(X[:, 0]))})
            else:
                from scipy.spatial import ConvexHull, QhullError
                try:
                    ext = sorted(int(j) for j in ConvexHull(X).vertices)
                except (QhullError, ValueError):
                    ext = []
    base = np.array([OPEN if OPEN in o else o[0] for o in options], dtype=int)
    modes = ((pts, states)
             for pts in itertools.combinations([can[j] for j in ext], min(r, len(ext)))
             for states in itertools.product(*[[c for c in options[i] if c != OPEN]
                                               for i in pts]))
    for pts, states in itertools.islice(modes, _VERTEX_MAX):
        mode = base.copy()
        mode[list(pts)] = states
        got = certify(mode)
        if got is not None:
            return [got]
    return []


def read_states(closed_modes: list, N: np.ndarray, loaded: np.ndarray, opening: np.ndarray,
                options: list, prefer: np.ndarray) -> tuple[list, list, list]:
    """The states of every point as an LCP answer gives them: ``(sets, own, near)``.

    ``closed_modes[i]``: the point's possible states if closed (its friction's reading);
    a ``loaded`` point is closed, an ``opening`` one open, one with neither (zero force
    and zero gap rate) may take either side; each set restricted to the point's
    ``options``. ``own``: the answer's own state of every point; ``near``: the state
    ``prefer`` asks for where the set holds it (open where it asks none), else the
    first."""
    sets, own = [], []
    for i, cm in enumerate(closed_modes):
        cand = cm if loaded[i] else ([OPEN] if opening[i] else [OPEN] + cm)
        cand = [c for c in cand if c in options[i]] or [c for c in cm if c in options[i]]
        sets.append(cand)
        own.append(int(cand[-1] if cand[0] == OPEN and N[i] > 0.0 else cand[0]))
    near = [int(prefer[i]) if int(prefer[i]) in c else
            (OPEN if OPEN in c and int(prefer[i]) < 0 else c[0]) for i, c in enumerate(sets)]
    return sets, own, near


def far_side(sets: list) -> list:
    """Every closed point on an edge of its cone (a set of closed states) on its last side
    (sliding), the others as read: the states an event that released a group of sticking
    points asks for, when every point of a body is on its edge at once."""
    return [c[-1] if c[0] != OPEN else c[0] for c in sets]


def compliant_lemke(Ml: np.ndarray, ql: np.ndarray, scale: float = 1.0
                    ) -> Optional[tuple[np.ndarray, np.ndarray, float]]:
    """``(z, w, zero)``: Lemke's answer (:func:`gaussopt.gauss.lcp.lemke_pair`) to the
    contact LCP made compliant, with the relative size ``zero`` below which its forces
    and rates count as zero; None if every attempt ends on a ray.

    Many dependent rows (a body on many points) make the rigid LCP degenerate, where
    Lemke's algorithm may end on a ray; the compliant problem (:data:`_LCP_COMPLIANCE`
    on the diagonal) is not, and its answer is as good a guess: every state read from it
    is certified (a welded point, held closed whatever the sign of its force, is a
    unilateral one here: the states read for it are its closed ones). Its pivots can
    still meet exact ties (a symmetric grid of points: a
    slab sliding on 20 points cycled for 10^4 pivots, where a perturbed ``q`` needs 62),
    so ``q`` is perturbed by a fixed pattern of relative size 1e-10 (far below the
    1e-6 at which states are read), and if Lemke's algorithm still ends on a ray or
    exceeds ``10 L`` pivots, the compliance and the perturbation are raised 100-fold.
    The states are read from the last basis: a nonbasic force or rate is exactly
    zero. ``scale`` multiplies the compliance (the spatial problem's retries,
    :data:`gaussopt.gauss.contact_cone._LCP_RETRIES`)."""
    from gaussopt.gauss.lcp import lemke_pair

    L = ql.size
    qs = _max_abs(ql)
    pattern = np.sin(1.0 + np.arange(L) * 2.399963)          # (the golden angle: no ties)
    for comp, pert in ((scale * _LCP_COMPLIANCE, 1e-10), (100 * scale * _LCP_COMPLIANCE, 1e-8)):
        got = lemke_pair(Ml, ql + pert * qs * pattern, max_pivots=10 * L + 50,
                         compliance=comp)
        if got is not None:
            return got[0], got[1], 1e3 * comp
    return None


def _bilateral_response(M: np.ndarray, A: np.ndarray, b: np.ndarray, rhs: np.ndarray
                        ) -> Optional[np.ndarray]:
    """``x`` (n, c) of ``M x - A^T lam = rhs[:, j]``, ``A x = b`` for the first column and
    ``= 0`` for the others, by :func:`kkt_solve` (redundant rows and a singular ``M``
    allowed); None when the rows leave the accelerations undetermined or are
    inconsistent."""
    n, m = M.shape[0], A.shape[0]
    R_bot = np.zeros((m, rhs.shape[1]))
    R_bot[:, 0] = b
    got = kkt_solve(M, A, A, rhs, R_bot)
    return None if got is None else got[0][:n]


def mode_options(free: np.ndarray, frictional: tuple, weld: np.ndarray,
                 labels: Sequence[str], limit: Optional[int] = MAX_COMBINATIONS) -> list:
    """The modes each point may take: ``frictional`` (open first) where ``free`` (finite
    friction, no slide given), else open or closed; a ``weld`` point never opens. Raises
    :class:`ContactSolveError` beyond ``limit`` combinations (None: no limit)."""
    options = []
    for i in range(len(free)):
        opts = frictional if free[i] else (OPEN, CLOSED)
        options.append(opts[1:] if weld[i] else opts)
    total = math.prod(len(o) for o in options)
    if limit is not None and total > limit:
        raise ContactSolveError(
            f"the contact problem of {len(free)} points has {total} combinations of modes, "
            f"more than {limit}: too many to try.", labels)
    return options


def same_motion(xs: Sequence[np.ndarray], modes: Sequence, labels: Sequence[str]) -> None:
    """Raise :class:`ContactSolveError` unless the accelerations ``xs`` of the admissible
    contact states ``modes`` agree (to ``_SAME_X`` of their size): several states with
    different motions (Painleve's paradox) leave the motion undetermined."""
    xs = np.array(xs)
    xscale = 1.0 + float(np.abs(xs).max())
    spread = float(np.abs(xs - xs[0]).max())
    if spread > _SAME_X * xscale:
        j = int(np.argmax(np.abs(xs - xs[0]).max(axis=1)))
        a, c = modes[0], modes[j]
        which = [labels[i] for i in range(len(labels)) if a[i] != c[i]] or list(labels)
        raise ContactSolveError(
            "the contact problem is indeterminate: several contact states with different "
            f"motions satisfy the contact conditions ({_describe(a, labels)} and "
            f"{_describe(c, labels)}; accelerations differ by {spread:.3g}): Coulomb friction "
            "between rigid bodies admits more than one motion here (as in Painleve's "
            f"paradox). Points: {', '.join(which)}.", which)


def _describe(mode, labels) -> str:
    return "{" + ", ".join(f"{lab} {MODE_NAMES[int(c)]}" for lab, c in zip(labels, mode)) + "}"


def _score(mode, prefer, release, options) -> tuple:
    """Smaller is preferred: released groups changed, fewest members still sticking, open
    before sliding, then the fewest points away from ``prefer``, then the fewest points
    starting to slide that were not asked to (a slide whose slip acceleration is zero is
    a stick on its cone's edge)."""
    kept, sticking, sliding = 0, 0, 0
    for grp in release:
        grp = list(grp)
        if all(mode[i] in (STICK, CLOSED) for i in grp):
            kept += 1
        sticking += sum(mode[i] in (STICK, CLOSED) for i in grp)
        sliding += sum(mode[i] in (SLIDE_POS, SLIDE_NEG) for i in grp)
    away, slides = 0, 0
    for i, (c, p) in enumerate(zip(np.asarray(mode).tolist(), np.asarray(prefer).tolist())):
        slides += int(c in (SLIDE_POS, SLIDE_NEG) and c != p)
        if p < 0:
            p = OPEN
        if p == STICK and len(options[i]) == 2:
            p = CLOSED
        if p in (SLIDE_POS, SLIDE_NEG) and len(options[i]) == 2:
            p = CLOSED
        away += int(c != p)
    return (kept, sticking, sliding, away, slides)


def _solution(M, F, A, b, G, h, T, s, mu, slide, mode, comb, z, indet, slack, slip, nu_tol,
              slack_tol) -> ContactSolution:
    """The chosen combination as a :class:`ContactSolution`. Without sliding friction the
    accelerations are re-solved by the library's verified Gauss step (its rank decision and
    backward-error check), with the same forces where they are determinate."""
    k, m = G.shape[0], A.shape[0]
    d, trow = _directions(mode, mu, slide, k)
    x = comb.x
    if not np.any(d):
        try:
            sol = solve_gauss(M, F, comb.J_rows, comb.rhs, check_symmetry=False)
        except GaussoptError:
            sol = None                 # (the certified SVD answer stands)
        if sol is not None:
            x = sol.a
            if not indet:
                z = sol.lam
            slack, slip = G @ x - h, T @ x - s
    nu, tau = np.zeros(k), np.zeros(k)
    for j, i in enumerate(comb.closed):
        nu[i] = z[m + j]
        if d[i]:
            tau[i] = -mu[i] * d[i] * nu[i]
    for j, i in enumerate(comb.trows):
        tau[i] = z[m + len(comb.closed) + j]
    active = np.asarray(mode) != OPEN
    prod = np.abs(nu * slack) / np.maximum(nu_tol * slack_tol * 1e4, 1e-300)
    return ContactSolution(x=x, active=active, nu=nu, tau=tau, lam=z[:m], slack=slack,
                           defect=float(prod.max(initial=0.0)), mode=np.asarray(mode).copy(),
                           indeterminate=bool(indet), slip=slip)
