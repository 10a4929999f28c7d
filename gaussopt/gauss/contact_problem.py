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
decomposition of the scaled KKT matrix, and its answer is *certified* against
every condition above to the rounding of its terms. All combinations are tried
(at most :data:`MAX_COMBINATIONS`; measured: the 16 of a box on two frictional
corners take 7.6 ms, the 4 of two frictionless points 1.0 ms, once per event). The
accelerations of every certified combination must agree: if two differ, the contact
problem is indeterminate
(e.g. Painleve's paradox) and :class:`ContactSolveError` names the points; if
none is certified it has no solution. Where several combinations give the same
accelerations (a point touching with zero force and zero gap acceleration, a
point on the edge of its cone) the caller's preference decides (the change the
event announced, else the previous state).

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
accelerations are determined). Spatial point contacts (two tangents, the circular
cone ``|t| <= mu N``: not a linear complementarity problem) are solved by
:mod:`gaussopt.gauss.contact_cone`, the same enumeration with the slide directions
solved by Newton and indeterminate forces placed in the cones by Clarabel. Not
solved: problems with more than :data:`MAX_COMBINATIONS` combinations of modes.

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
from typing import Optional, Sequence

import numpy as np

from gaussopt.core.exceptions import GaussoptError, ModelError, SolverError
from gaussopt.core.settings import DEFAULT_RANK_TOL
from gaussopt.gauss.solution import solve_gauss

__all__ = ["ContactSolution", "ContactSolveError", "solve_contact", "verify", "same_motion",
           "admissible",
           "max_margin", "MAX_COMBINATIONS", "OPEN", "CLOSED", "STICK",
           "SLIDE_POS", "SLIDE_NEG", "MODE_NAMES"]

_EPS = float(np.finfo(float).eps)
#: the modes of a point: open; closed (frictionless, already sliding, or friction=inf:
#: no slip); with finite friction from rest: sticking, or starting to slide + or -
OPEN, CLOSED, STICK, SLIDE_POS, SLIDE_NEG = 0, 1, 2, 3, 4
MODE_NAMES = {OPEN: "open", CLOSED: "closed", STICK: "stick", SLIDE_POS: "slide +",
              SLIDE_NEG: "slide -"}
#: the largest number of combinations of modes tried (each one small SVD)
MAX_COMBINATIONS = 4096
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


def _scales(M, F, G, h, x):
    """Rounding scales of the multipliers (|M x| + |F| over the row norms) and of ``G x - h``."""
    gn = np.sqrt((G * G).sum(axis=1))
    force = float(np.abs(M @ x).max(initial=0.0) + np.abs(F).max(initial=0.0))
    nu_tol = 1e4 * _EPS * force / np.maximum(gn, 1e-300) * max(1, M.shape[0])
    # x errs by rounding of its own size and of the forces' over the mass (x may vanish
    # where the forces balance: a cone's edge, a point at rest)
    xs = float(np.abs(x).max(initial=0.0)) + force / max(float(np.abs(M).max(initial=0.0)),
                                                         1e-300)
    slack_tol = 1e4 * _EPS * (gn * xs + np.abs(h))
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

    The projection of a point onto a polyhedron lies on one face; with ``r = y0.size``
    (the number of indeterminate force combinations, 1 or 2 in practice) every set of
    at most ``r`` independent active rows is tried, smallest first, and the first whose
    projection is feasible with nonnegative multipliers is the answer (unique: the
    objective is strictly convex). Used for the least-norm admissible distribution of
    indeterminate contact forces.
    """
    r, p = y0.size, C.shape[0]
    if r == 0:
        return y0 if np.all(C @ y0 <= d + tol) else None
    if sum(math.comb(p, j) for j in range(min(r, p) + 1)) > 200000:
        raise ContactSolveError(f"the contact forces are indeterminate in {r} combinations "
                                f"with {p} cone conditions: too many faces to enumerate.")
    for size in range(min(r, p) + 1):
        for S in itertools.combinations(range(p), size):
            S = list(S)
            if S:
                CS = C[S]
                GS = CS @ CS.T
                if np.linalg.matrix_rank(GS, tol=1e-10 * max(1.0, np.abs(GS).max())) < size:
                    continue
                mult = np.linalg.solve(GS, CS @ y0 - d[S])
                if np.any(mult < -1e-9 * (1.0 + np.abs(mult).max())):
                    continue
                y = y0 - CS.T @ mult
            else:
                y = y0
            if np.all(C @ y <= d + tol):
                return y
    return None


def max_margin(b: np.ndarray, a: np.ndarray) -> float:
    """``max_y min_j (b_j + a_j y)`` (exact): the largest margin by which a distribution of
    indeterminate forces can keep every condition ``b_j + a_j y >= 0`` (a normal force, a
    side of a cone). Positive while the contacts can hold, zero when they just can.

    ``a``: shape (p, r). The maximum of a concave piecewise-linear function lies on a
    vertex where ``r + 1`` of its pieces meet; every such vertex is tried. Returns
    ``inf`` when the margin is unbounded (the forces can grow without limit inside all
    cones, e.g. frictionless-free internal forces of ``friction=inf`` points).
    """
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
    # bounded iff 0 lies in the convex hull of the a_j (Gordan): else some direction
    # raises every piece
    from scipy.optimize import nnls

    wgt = 1e3 * (1.0 + float(np.abs(a).max()))
    _, res = nnls(np.vstack([a.T, wgt * np.ones((1, p))]), np.concatenate([np.zeros(r), [wgt]]))
    if res > 1e-9 * wgt:
        return math.inf
    best = -math.inf
    scale = 1.0 + float(np.abs(b).max())
    for S in itertools.combinations(range(p), r + 1):
        S = list(S)
        K = np.hstack([a[S], -np.ones((r + 1, 1))])       # b_j + a_j y - s = 0, j in S
        if np.linalg.matrix_rank(K, tol=1e-12 * max(1.0, float(np.abs(K).max()))) < r + 1:
            continue
        z = np.linalg.solve(K, -b[S])
        y, s = z[:r], z[r]
        if s > best and np.all(b + a @ y >= s - 1e-12 * scale):
            best = float(s)
    return best


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


def svd_kkt(M: np.ndarray, F: np.ndarray, J: np.ndarray, W: np.ndarray, rhs: np.ndarray
            ) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(x, z, Z)`` of ``M x - W^T z = F``, ``J x = rhs`` (``W`` = ``J`` but for sliding
    points' rows), by an SVD of the row-scaled KKT matrix: the minimum-norm ``z`` and an
    orthonormal basis ``Z`` of the force combinations left free; None when the rows are
    inconsistent or the accelerations are not determined."""
    n = M.shape[0]
    p = J.shape[0]
    rn = np.sqrt((J * J).sum(axis=1))
    rs = 1.0 / np.where(rn > 0, rn, 1.0)
    ms = max(float(np.abs(M).max(initial=0.0)), float(np.abs(W).max(initial=0.0)), 1e-300)
    K = np.zeros((n + p, n + p))
    K[:n, :n] = M / ms
    K[:n, n:] = -(W * rs[:, None]).T
    K[n:, :n] = J * rs[:, None]
    r_all = np.concatenate([F / ms, rhs * rs])
    U, sig, Vt = np.linalg.svd(K)
    tol = DEFAULT_RANK_TOL * (sig[0] if sig.size else 0.0)
    rank = int(np.count_nonzero(sig > tol))
    sol = Vt[:rank].T @ ((U[:, :rank].T @ r_all) / sig[:rank])
    res = K @ sol - r_all
    if np.abs(res).max(initial=0.0) > 1e4 * _EPS * (n + p) * (
            float(np.abs(K).max()) * float(np.abs(sol).max(initial=0.0))
            + float(np.abs(r_all).max(initial=0.0))):
        return None                                        # inconsistent rows
    null = Vt[rank:].T
    if null.size and np.abs(null[:n]).max() > 1e-6:
        return None                                        # accelerations not determined
    x = sol[:n]
    zscale = ms * rs                                       # z = ms * rs * z_scaled
    z = sol[n:] * zscale
    if null.size:
        Z, _ = np.linalg.qr(null[n:] * zscale[:, None])
    else:
        Z = np.zeros((p, 0))
    return x, z, Z


def _force_conditions(comb: _Combination, m: int, mu: np.ndarray, mode: np.ndarray,
                      nu_tol: np.ndarray, weld: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The admissibility of the forces as ``c_j . z >= 0`` (rows ``c_j``) with their
    tolerances: every closed point's ``N >= 0`` (not for a welded one); a sticking
    point's ``mu N -+ tau >= 0``."""
    L = comb.z.size
    rows, tols = [], []
    pos = {i: m + j for j, i in enumerate(comb.closed)}
    tpos = {i: m + len(comb.closed) + j for j, i in enumerate(comb.trows)}
    for i in comb.closed:
        if not weld[i]:
            c = np.zeros(L)
            c[pos[i]] = 1.0
            rows.append(c)
            tols.append(nu_tol[i])
        if mode[i] == STICK:
            for sgn in (1.0, -1.0):
                c = np.zeros(L)
                c[pos[i]] = mu[i]
                c[tpos[i]] = -sgn
                rows.append(c)
                tols.append(nu_tol[i] * (1.0 + mu[i]) + 1e4 * _EPS * (
                    mu[i] * abs(comb.z[pos[i]]) + abs(comb.z[tpos[i]])))
    Cz = np.array(rows) if rows else np.zeros((0, L))
    return Cz, np.array(tols), np.zeros(len(rows))


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
                           (OPEN, STICK, SLIDE_POS, SLIDE_NEG), weld, labels)
    if prefer is None:
        prefer = np.full(k, -1)
        for i in start:
            prefer[int(i)] = STICK if len(options[int(i)]) == 4 else CLOSED
    prefer = np.asarray(prefer, dtype=int)
    found = []
    last_error: Optional[BaseException] = None
    for mode in itertools.product(*options):
        mode = np.array(mode, dtype=int)
        try:
            comb = _solve_combination(M, F, A, b, G, h, T, s, mu, slide, mode)
        except (GaussoptError, np.linalg.LinAlgError) as e:
            last_error = e
            continue
        if comb is None:
            continue
        x = comb.x
        nu_tol, slack_tol = _scales(M, F, G, h, x)
        slack = G @ x - h
        slip = T @ x - s
        _, slip_tol = _scales(M, F, T, s, x)
        # kinematic conditions: open points do not penetrate, starting slides slip their way
        if any(slack[i] < -slack_tol[i] for i in range(k) if mode[i] == OPEN):
            continue
        if any(slip[i] < -slip_tol[i] for i in range(k) if mode[i] == SLIDE_POS) or \
                any(slip[i] > slip_tol[i] for i in range(k) if mode[i] == SLIDE_NEG):
            continue
        z, indet = _forces(comb, m, mu, mode, nu_tol, weld)
        if z is None:
            continue
        found.append((mode, comb, z, indet, slack, slip, nu_tol, slack_tol))
    if not found:
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


def mode_options(free: np.ndarray, frictional: tuple, weld: np.ndarray,
                 labels: Sequence[str]) -> list:
    """The modes each point may take: ``frictional`` (open first) where ``free`` (finite
    friction, no slide given), else open or closed; a ``weld`` point never opens. Raises
    :class:`ContactSolveError` beyond :data:`MAX_COMBINATIONS` combinations."""
    options = []
    for i in range(len(free)):
        opts = frictional if free[i] else (OPEN, CLOSED)
        options.append(opts[1:] if weld[i] else opts)
    total = math.prod(len(o) for o in options)
    if total > MAX_COMBINATIONS:
        raise ContactSolveError(
            f"the contact problem of {len(free)} points has {total} combinations of modes, "
            f"more than MAX_COMBINATIONS={MAX_COMBINATIONS}: too many to try.", labels)
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
            f"{_describe(c, labels)}; accelerations differ by {spread:.3g}), e.g. Painleve's "
            f"paradox. Points: {', '.join(which)}.", which)


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
    for i, c in enumerate(mode):
        slides += int(c in (SLIDE_POS, SLIDE_NEG) and c != prefer[i])
        p = int(prefer[i])
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
