"""The contact problem of point contacts in space: Coulomb's circular friction cone.

A contact point in space has two tangent directions: its friction force is a vector
``t_i`` of the tangent plane, and isotropic Coulomb friction bounds it by the *circular*
cone ``|t_i| <= mu_i N_i`` (not a pyramid of planar cones, which would make friction
depend on how the tangents were chosen). The circle is not a polyhedron, so the planar
linear complementarity problem of :mod:`gaussopt.gauss.contact_problem` does not carry
over: at an event the accelerations ``x`` (or the velocities after an impact, ``F = M
v-``) solve the second-order-cone complementarity problem::

    M x - F = A^T lam + sum_i G_i^T N_i + sum_i T_i^T t_i
    A x = b
    g_i = G_i x - h_i >= 0,  N_i >= 0,  N_i g_i = 0
    u_i = T_i x - s_i  (the slip acceleration; T_i: 2 rows)
    |t_i| <= mu_i N_i;  u_i = 0 (stick)  or  t_i = -mu_i N_i u_i / |u_i| (slide)

and a point that already slips with the unit direction ``d_i`` (its slip velocity's)
carries ``t_i = -mu_i N_i d_i``; ``mu_i = inf``: ``u_i = 0`` and ``t_i`` free.

How it is solved, exactly: as the planar problem, by enumerating every point's mode
(``open``; ``closed``; from rest with finite friction ``stick`` or ``slide``). With the
slide directions ``d_j`` of the points starting to slide fixed, every combination is a
linear KKT system (:func:`gaussopt.gauss.contact_problem.svd_kkt`, the same SVD solve
as the planar problem's); the directions solve the nonlinear conditions ``d_j x u_j =
0`` (``u_j`` parallel to ``d_j``) by Newton's method on their angles (its Jacobian exact,
from one KKT solve with a column per slider: :func:`_direction_jacobian`), started from the
direction of the *excess force* (the sticking force ``t_j`` the point would need,
reversed: the tangential acceleration that sticking would have to suppress), then from
the frictionless slip and the four axes. Every answer is certified: ``|d_j x u_j|`` and
``u_j . d_j >= 0``, the gaps (the closed points' too, each to its own rounding) and normal
forces, and every cone to the rounding of their terms (``u_j . d_j`` also to what a force of
the cone margins' accuracy moves it: a slip onset is located on such a margin,
:func:`_certify`). Where the forces of the closed points are indeterminate (a box on four
sticking corners: 12 force components for 6 equations) a distribution inside every
circular cone is searched as a second-order-cone program, solved by Clarabel through its
direct interface (:func:`cone_margin`: the largest margin ``min_i (N_i, mu_i N_i -
|t_i|)`` of a distribution, certified when it is >= 0 within its rounding and Clarabel's
gap tolerance ``_SOCP_TOL`` of the force scale; :func:`least_norm_in_cones` the reported
distribution).

Many points (more than :data:`~gaussopt.gauss.contact_problem.ENUMERATE_MAX`
combinations: 81 for a cube on four frictional corners, 3^20 for a slab on twenty):
the states come from Lemke's algorithm on Stewart and Trinkle's LCP with every circle
replaced by its inscribed octagon (:func:`_by_lcp_cone`), and are then certified with
the circles exactly as above, the slide directions started from the octagon's slip.
The octagon holds less friction than the circle, so a point it lets stick sticks, and
one it lets slide may stick: both are certified, best first. A sticking combination
that cannot hold is refuted by a dual certificate where one is found cheaply (a virtual
motion slipping and lifting every point, :func:`_refuted`), else by the cone program.
Measured (``benchmarks/contact.py``): the cube on a slope about 1.1 ms at rest (its
uphill corners' cones bind: two cone programs) and 0.7 ms starting to slide (the
enumeration of its 81 combinations 0.1-0.3 s); the slab on twenty points about 1 ms at
rest (its least-norm forces inside every cone: no cone program) and 1.5-1.9 ms starting to
slide (Lemke's 200 unknowns about 0.25 ms, two combinations' KKT solves, the
certificate, the Python around them the rest; ranges: this VM's minutes differ). As in the plane, the answer is
certified but not proven unique on that path. Where the states read from the LCP
certify none (a degenerate LCP's reading depends on its regularization), the LCP is
solved again at other compliances (:data:`_LCP_RETRIES`), then with finer polygons (16
and 32 sides, :data:`_POLYGON_REFINED`: closer to the circles); where the state certified
slides with touching points left open, the whole family's state is certified too and the
rule below chooses (:func:`_whole_family`), so that the answer does not depend on which
member the reading gave.

Why this and not a Fischer-Burmeister/Alart-Curnier Newton on the whole problem
(Siconos's 3-D solvers): the enumeration certifies by construction, decides degenerate
states by the same preferences as the planar problem (the change an event announced),
and its cost is paid only at events.

Sliding points on dependent rows (a box sliding and turning flat on four corners): the
rigid model leaves the motion undetermined, since one combination of the corners' normal
forces does no work on the normal motion but moves the friction from one pair of
corners to the other. Every distribution from "three corners carry the box" to "the
other three do" is an admissible rigid motion. The one taken is the rigid limit of
equally stiff points, the forces without self-stress of the rows
(:func:`~gaussopt.gauss.contact_problem.selected_kkt`; without sliding friction the
least-norm distribution of indeterminate forces, the same rule), in the contact problem
and in the phase that follows; where it would pull on a point, the admissible
distribution nearest to it (:func:`_one_per_family`). Right-hand sides that make
dependent rows inconsistent by less than the caller's ``rhs_tol`` (a face landing nearly
flat, Newton's law asking each corner for its own rebound) are moved onto the rows'
range, only where the exact problem has no certified answer (:func:`_consistent`).

Several motions: rigid Coulomb friction may admit more than one (a box on three
sliding corners and a fourth at rest: that corner sticking with all four loaded, or
sliding while another lifts). With ``persist`` (the contact run's events) the state that
continues the previous one, changed only as the event announced, is taken where it is
among them; otherwise, and where it is not,
:class:`~gaussopt.gauss.contact_problem.ContactSolveError` names the points.

Not solved: uniqueness is checked among the solutions found (within a combination,
Newton finds one set of directions); Painleve-type indeterminacy (a normal force that
pushes its own contact closed) where no state continues the previous one; points with one
tangent (``slip``) together with spatial points in one problem.

References
----------
F. Pfeiffer, C. Glocker, *Multibody Dynamics with Unilateral Contacts*, Wiley 1996;
P. Alart, A. Curnier, "A mixed formulation for frictional contact problems prone to
Newton like solution methods", CMAME 92 (1991) 353-375; V. Acary, B. Brogliato,
*Numerical Methods for Nonsmooth Dynamical Systems*, Springer 2008 (the SOC
complementarity form).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Optional, Sequence

import numpy as np

from gaussopt.core.exceptions import GaussoptError, ModelError
from gaussopt.gauss.contact_problem import (CLOSED, ENUMERATE_MAX, MAX_COMBINATIONS, OPEN,
                                            SLIDE_POS, STICK, ContactSolution,
                                            ContactSolveError, _MU_INF, _bilateral_response,
                                            _score, _scales, compliant_lemke, mode_options,
                                            far_side, in_span, read_states, same_motion,
                                            self_stresses, svd_kkt_later, _svd)

__all__ = ["solve_contact_cone", "cone_margin", "best_distribution", "cone_slack",
           "least_norm", "least_norm_in_cones", "SLIDE"]

_EPS = float(np.finfo(float).eps)
#: the mode of a spatial point starting to slide (its direction solved): the planar
#: ``SLIDE_POS`` code, so that the planar problem's preferences apply unchanged
SLIDE = SLIDE_POS
#: Clarabel's gap and feasibility tolerances for the force distributions (relative to the
#: force scale): the certified margin of a distribution errs by about this much
_SOCP_TOL = 1e-11
#: Newton iterations on the slide directions, per starting direction
_NEWTON_ITER = 30


# --------------------------------------------------------------------------- SOC programs
#: Clarabel's settings changed in turn where a program ends without an answer
#: (``NumericalError``): the margin of dm_control's humanoid lying on 9 points (34 forces,
#: 8 free) stopped after 3 iterations with the defaults, and was solved (7.35 N, the group
#: holds) without equilibration, and with a tenfold static regularization; before, the run
#: ended there, its forces said to admit no distribution inside their cones
_SOCP_RETRIES = ({"equilibrate_enable": False}, {"static_regularization_constant": 1e-7})


def _socp(z0: np.ndarray, Z: np.ndarray, points: Sequence[tuple], margin: bool):
    """Clarabel on ``z = z0 + Z y``: the least-norm ``z`` with every point's forces in its
    cone, or (``margin``) the largest ``s`` with ``N_i >= s`` and ``mu_i N_i - |t_i| >= s``.
    ``points``: ``(n_index, t_indices or None, mu, weld)``. Returns ``(y, s, solved)``.

    The program's unknowns are the forces ``z`` themselves (and ``s``), held on the
    distributions by ``E^T z = E^T z0`` (``E``: an orthonormal basis of the complement of
    ``Z``'s columns, at most the coordinates' count of rows): each cone then reads three
    unknowns, where in ``y`` every cone row is dense. On a slab on 20 sticking points (54
    free forces) Clarabel's solve took 0.5 ms instead of 4 ms. The answer is returned in
    ``y`` (its least-squares coordinates along ``Z``), so that ``z0 + Z y`` lies on the
    distributions to rounding."""
    import clarabel
    from scipy import sparse

    p, r = Z.shape
    fs = max(1.0, float(np.abs(z0).max(initial=0.0)))
    z0s = z0 / fs
    nv = p + (1 if margin else 0)
    Et = np.linalg.qr(Z, mode="complete")[0][:, r:].T
    ne = Et.shape[0]
    rhs = list(Et @ z0s)
    cones = [clarabel.ZeroConeT(ne)] if ne else []
    # each unknown's entries below the equality rows (the cones on -A z + b: N_i - s >= 0;
    # (mu N_i - s, t_i) in the second-order cone), in the order of the rows
    below: list = [[] for _ in range(nv)]
    nr = ne
    for n_i, t_i, mu, weld in points:
        if not weld:
            below[n_i].append((nr, -1.0))
            if margin:
                below[p].append((nr, 1.0))
            rhs.append(0.0)
            nr += 1
            cones.append(clarabel.NonnegativeConeT(1))
        if t_i is not None:
            below[n_i].append((nr, -mu))
            if margin:
                below[p].append((nr, 1.0))
            rhs.append(0.0)
            nr += 1
            for j in t_i:
                below[j].append((nr, -1.0))
                rhs.append(0.0)
                nr += 1
            cones.append(clarabel.SecondOrderConeT(1 + len(t_i)))
    q = np.zeros(nv)
    if margin:
        cap = 1e6
        below[p].append((nr, 1.0))
        rhs.append(cap)
        nr += 1
        cones.append(clarabel.NonnegativeConeT(1))
        P = sparse.csc_matrix((np.zeros(0), np.zeros(0, np.int64), np.zeros(nv + 1, np.int64)),
                              shape=(nv, nv))
        q[p] = -1.0
    else:
        P = sparse.csc_matrix((np.ones(nv), np.arange(nv), np.arange(nv + 1)), shape=(nv, nv))
    # A in compressed columns, built directly (scipy's conversion from triplets cost more
    # than Clarabel's solve): a force's column holds the equality rows, then its cone rows
    indptr, indices, data = [0], [], []
    eq_rows = list(range(ne))
    EtT = Et.T.tolist()
    for j in range(nv):
        if j < p:
            indices += eq_rows
            data += EtT[j]
        for row, val in below[j]:
            indices.append(row)
            data.append(val)
        indptr.append(len(indices))
    A = sparse.csc_matrix((np.array(data, dtype=float), np.array(indices, dtype=np.int64),
                           np.array(indptr, dtype=np.int64)), shape=(nr, nv))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.presolve_enable = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = _SOCP_TOL
    settings.tol_ktratio = 1e-8
    b = np.array(rhs, dtype=float)
    out = clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()
    solved = str(out.status) in ("Solved", "AlmostSolved")
    for retry in _SOCP_RETRIES:
        if solved:
            break
        for key, val in retry.items():
            setattr(settings, key, val)
        out = clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()
        solved = str(out.status) in ("Solved", "AlmostSolved")
    x = np.array(out.x)
    y = _coords(Z, x[:p] * fs - z0)
    s = float(x[p]) * fs if margin else math.nan
    if margin and s >= 0.5 * cap * fs:
        s = math.inf
    return y, s, solved


def _coords(Z: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The least-squares coordinates ``y = Z^T d`` of ``d`` along the orthonormal columns
    of ``Z``."""
    return Z.T @ d


def cone_slack(z: np.ndarray, points: Sequence[tuple]) -> float:
    """The margin of one distribution of forces ``z``: ``min_i (N_i, mu_i N_i - |t_i|)``
    (force units; ``inf`` without conditions). ``points`` as :func:`best_distribution`'s."""
    zl = np.asarray(z, dtype=float).tolist()        # (floats: a few us for 20 points)
    low = math.inf
    for n_i, t_i, mu, weld in points:
        if not weld:
            low = min(low, zl[n_i])
        if t_i is not None:
            low = min(low, mu * zl[n_i] - math.hypot(*[zl[j] for j in t_i]))
    return low


def best_distribution(z0: np.ndarray, Z: np.ndarray, points: Sequence[tuple]
                      ) -> tuple[float, np.ndarray]:
    """``(margin, z)``: the largest margin ``max_y min_i (N_i, mu_i N_i - |t_i|)`` of the
    forces ``z0 + Z y`` (force units) and the distribution ``z`` that attains it, a
    second-order-cone program solved by Clarabel (to ``_SOCP_TOL`` of the force scale):
    positive while some distribution of indeterminate forces lies strictly inside every
    circular cone. ``points``: ``(n_index, t_indices or None, mu, weld)`` (``t_indices``
    of a sticking point with finite friction; a welded point has no ``N >= 0``). The
    margin is ``inf`` when unbounded, ``-inf`` when Clarabel fails (``z`` is then
    ``z0``, as when nothing is free)."""
    if Z.shape[1] == 0:
        return cone_slack(z0, points), np.array(z0)
    y, s, solved = _socp(z0, Z, points, margin=True)
    if not solved:
        return -math.inf, np.array(z0)
    return s, z0 + Z @ y


def cone_margin(z0: np.ndarray, Z: np.ndarray, points: Sequence[tuple]) -> float:
    """The largest margin of :func:`best_distribution`."""
    return best_distribution(z0, Z, points)[0]


def least_norm(z0: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """The least-norm forces ``z0 + Z y`` without cones: ``z0`` minus its part along the
    columns of ``Z`` (orthonormal, as every basis of free forces here: the contact
    problem's and the contact run's)."""
    return z0 - Z @ _coords(Z, z0)


def least_norm_in_cones(z0: np.ndarray, Z: np.ndarray, points: Sequence[tuple]) -> np.ndarray:
    """The least-norm forces ``z0 + Z y`` inside every cone (``Z``: orthonormal columns);
    ``z0`` itself when nothing is free or no such distribution is found.

    Where the least-norm distribution without cones (:func:`least_norm`) lies inside
    every cone it is the answer, exactly (the minimum over all distributions is admissible,
    so it is the minimum over the admissible ones): a body resting evenly on its points
    (a slab on 20 points of a slope: one projection instead of a cone program of 54
    free forces, about 1 ms). Otherwise a second-order-cone program, Clarabel, to
    ``_SOCP_TOL``."""
    if Z.shape[1] == 0 or not points:
        return np.array(z0)
    z = least_norm(z0, Z)
    if cone_slack(z, points) >= 0.0:
        return z
    y, _, solved = _socp(z0, Z, points, margin=False)
    return z0 + Z @ y if solved else np.array(z0)


# --------------------------------------------------------------------------- one combination
def _unit(theta: float) -> np.ndarray:
    return np.array([math.cos(theta), math.sin(theta)])


def _closed_rows(mode, mu) -> tuple[list, list]:
    """``(closed, trows)``: the closed points of a combination, and those of them with
    no-slip rows (sticking, or closed with ``mu = inf``)."""
    closed = [i for i in range(len(mode)) if mode[i] != OPEN]
    return closed, [i for i in closed
                    if mode[i] == STICK or (mode[i] == CLOSED and mu[i] == math.inf)]


class _Combo:
    """One combination of modes with its slide directions: the linear KKT solve.

    ``tol`` (per point, or None): where the closed rows are dependent and their
    right-hand sides disagree, by at most this much per row, the least change that makes
    them agree (their projection on the rows' range, :func:`_consistent`) is solved.
    ``select``: sliding points on dependent rows take the forces without self-stress
    where the motion depends on them (:func:`~gaussopt.gauss.contact_problem.svd_kkt`).
    ``basis=False``: the free forces' basis ``Z`` is not computed (``got[2]`` None)."""

    def __init__(self, M, F, A, b, G, h, T, s, mu, mode, dirs, tol=None, select=False,
                 basis=True):
        self.closed, self.trows = _closed_rows(mode, mu)
        J = _rows(A, G, T, self.closed, self.trows)
        W = J.copy()
        # a closed point sliding along d_i with finite friction: G_i - mu_i d_i . T_i
        cl = self.closed
        d, mc = dirs[cl], mu[cl]
        fr = np.where(np.any(d != 0, axis=1) & (mc > 0) & (mc < math.inf), mc, 0.0)
        if np.any(fr):
            W[A.shape[0]:A.shape[0] + len(cl)] -= fr[:, None] * np.einsum("ka,kan->kn",
                                                                         d, T[cl])
        rhs = np.concatenate([b, h[self.closed], s[self.trows].reshape(-1)])
        #: whether the forces without self-stress decided the motion (set by _solve_mode)
        self.selected = False
        #: how far each point's right-hand side may move (None: not at all)
        self.tol = tol
        #: the rows and the forces' rows (``W``: ``M x - W^T z = F``)
        self.J, self.W = J, W
        got = svd_kkt_later(M, F, J, W, rhs, select)
        if got is None and tol is not None:
            # (the bilateral rows' own right-hand sides: by their rounding only)
            tol_rows = np.concatenate([np.zeros(b.size), tol[self.closed],
                                       np.repeat(tol[self.trows], 2)])
            tol_rows += 1e4 * _EPS * float(np.abs(rhs).max(initial=0.0))
            moved = _consistent(J, rhs, tol_rows)
            if moved is not None:
                got = svd_kkt_later(M, F, J, W, moved, select)
        self._basis = None if got is None else got[2]
        #: whether the forces without self-stress decided the motion (``select``)
        self.selected_solve = got is not None and got[2].selected
        #: the KKT system's factorization, to solve it again (:func:`_direction_jacobian`):
        #: a :class:`~gaussopt.gauss.contact_problem.SelectedKKT` where ``selected_solve``,
        #: else a :class:`~gaussopt.gauss.contact_problem.KKTFactor`
        self.kkt = None if got is None else got[2].kkt
        #: ``(x, z, Z)``, ``Z`` None until :meth:`with_basis` (unless ``basis``); or None
        self.got = None if got is None else (got[0], got[1], None)
        if basis:
            self.with_basis()

    def with_basis(self) -> "_Combo":
        """The combination with its free forces' basis ``Z`` in ``got`` (computed once)."""
        if self.got is not None and self.got[2] is None:
            self.got = (self.got[0], self.got[1], self._basis())
        return self


def _consistent(J: np.ndarray, rhs: np.ndarray, tol: np.ndarray) -> Optional[np.ndarray]:
    """``rhs`` moved onto the range of the dependent rows ``J`` (the least change: minus
    its part along their self-stresses, :func:`~gaussopt.gauss.contact_problem.
    self_stresses`), or None when the rows are independent or a row would move by more
    than its ``tol``.

    Why: at an impact Newton's law asks each touching point for its own rebound
    (``gap'+ >= -e gap'-`` where it approached, ``>= 0`` where it did not), and sticking
    points for zero slip. A box landing nearly flat, its face tilted by 1e-7 and turning,
    has rows that are dependent to the rank decision (its sticking corners' tangents
    nearly span its normals' differences) but right-hand sides that disagree by 1e-8 m/s:
    no combination with those corners sticking was consistent, every one with them
    sliding asked for slips of that size whose directions Newton could not settle, and
    the impact had no certified answer (fuzzed drop, seed 14). Moved by less than the
    driver's velocity tolerance (what it already treats as rest), the sticking answer is
    exact for right-hand sides it cannot tell apart."""
    S = self_stresses(J)
    if S.shape[1] == 0:
        return None
    d = S @ (S.T @ rhs)
    if not np.all(np.abs(d) <= tol):
        return None
    return rhs - d


def _certify(M, F, A, b, G, h, T, s, mu, mode, dirs, weld, combo: _Combo, sliders, shared):
    """The conditions of one solved combination: None if violated, else ``(z, Z, points,
    indeterminate)`` with the forces inside every cone.

    A point starting to slide may slip *against* its direction by the rounding of its
    slip acceleration plus what a force of the cone margins' accuracy (``10 _SOCP_TOL``
    of the force scale, as the cones' own check below) moves it (:func:`_onset_slack`):
    a slip onset is an event on such a margin (a box on four corners: the largest margin
    of its indeterminate forces, Clarabel's), located where the margin is zero to that
    accuracy, so the excess force there is zero only to it. Without this slack a box
    pushed through its cones' edge could not start to slide on four corners along the
    push (its slip acceleration at the located onset was -2.2e-11 m/s^2, ten times the
    rounding scale), and a degenerate mode with slide directions tilted by 2e-5 was
    taken instead."""
    x, z, Z = combo.got
    k, m = G.shape[0], A.shape[0]
    nu_tol, slack_tol = _scales(M, F, G, h, x)
    if combo.tol is not None:
        # (an open point's row is a right-hand side like a closed one's: where those may
        # move by ``tol``, its slack may fall short by as much -- an impact of two foot
        # capsules at 1e-4 m/s beside eleven resting points left one open point
        # approaching at 2.8e-8 m/s, against a velocity tolerance of 2.7e-6, in the only
        # combination whose forces lay inside their cones)
        slack_tol = slack_tol + combo.tol
    slack = G @ x - h
    if any(slack[i] < -slack_tol[i] for i in range(k) if mode[i] == OPEN):
        return None
    # the closed rows hold to their own rounding: the KKT solve's consistency check is
    # the whole system's (its residual against all its terms), and a least-squares answer
    # of dependent rows whose right-hand sides disagree by 4e-9 m/s^2 (a humanoid lying
    # on nine points) passed it with a closed point's gap accelerating into the floor at
    # 3.7e-9, eight times that point's rounding scale, two others sliding at slips of
    # 1e-8 to make the rest fit
    if any(abs(slack[i]) > slack_tol[i] for i in combo.closed):
        return None
    if sliders:
        fscale = max(1.0, float(np.abs(z).max(initial=0.0)))
        cross, along = _slip_parts(x, T, s, dirs, sliders)
        tols = _slip_tols(M, F, T, s, x, sliders)
        for j, i in enumerate(sliders):
            if abs(cross[j]) > tols[j] or _against(along[j], tols[j], shared, i, fscale):
                return None
    nc = len(combo.closed)
    points, tols = [], []
    for j, i in enumerate(combo.closed):
        t_i = None
        if i in combo.trows and mu[i] < math.inf:
            jj = m + nc + 2 * combo.trows.index(i)
            t_i = (jj, jj + 1)
        points.append((m + j, t_i, float(mu[i]), bool(weld[i])))
        tols.append(nu_tol[i] * (1.0 + (mu[i] if t_i is not None else 0.0)))
    tol = max(tols, default=0.0) + 1e4 * _EPS * float(np.abs(z).max(initial=0.0))
    if Z.shape[1] == 0:
        return (z, Z, points, False) if cone_margin(z, Z, points) >= -tol else None
    # the least-norm distribution inside every cone is the one reported, and proves the
    # largest margin >= 0 without its cone program (a lower bound of it)
    zl = least_norm(z, Z)
    if cone_slack(zl, points) >= 0.0:
        return zl, Z, points, True
    scale = max(1.0, float(np.abs(z).max(initial=0.0)))
    bound = tol + 10 * _SOCP_TOL * scale
    # no admissible distribution: proved by a dual certificate where one is found cheaply
    # (a body that must slide), else the cone program decides
    if _refuted(zl, combo.W, points, bound) or cone_margin(z, Z, points) < -bound:
        return None
    return least_norm_in_cones(z, Z, points), Z, points, True


#: how much larger than the certification's tolerance the margin of :func:`_stick_refuted`
#: is taken: its scale is the least-norm forces', where :func:`_certify`'s is the KKT
#: solve's forces (a least-norm solution in the solve's scaled rows: the same size up to
#: the ratio of the row scales, a few units for contact rows of unit normals and
#: tangents); a larger tolerance only refutes less, it never refutes what :func:`_certify`
#: would accept
_PRE_SAFETY = 100.0


def _stick_refuted(M, F, A, b, G, h, T, s, mu, mode, weld, shared) -> bool:
    """Whether the combination ``mode`` (no point starting to slide) is refuted before its
    KKT solve: its sticking points cannot hold, proved by :func:`_refuted`'s dual
    certificate. Tried where the polygon's LCP reads some of those points sliding (a slab
    on 20 points of a slope steeper than its friction: the sticking combination comes
    first in the preferences' order, and its KKT solve and certificate cost 0.45 ms of a
    1.6 ms problem).

    Only where the combination's rows determine the motion (rank ``n``: a body on three
    or more points): the accelerations are then ``x = J^+ rhs`` whatever the forces, the
    least-norm forces ``z = J^{+T} (M x - F)`` (what :func:`_certify` would read from the
    KKT solve: every distribution differs from it by forces that do no work), both from
    one thin SVD of the rows (``J`` is the forces' rows ``W``: no point slides). False
    (not refuted: the combination is solved and certified as every other) where the rows
    leave the motion free, their right-hand sides disagree beyond rounding, the least-norm
    forces are inside every cone to the tolerance, or no certificate is found; the
    tolerance is :func:`_certify`'s with the forces' scale times :data:`_PRE_SAFETY`.

    A refuted combination leaves its sticking points' excess forces (their least-norm
    friction reversed, unit) in ``shared.excess``: the start of the slide directions of
    the combinations that let those points slide (:func:`_starts`), which would otherwise
    solve this combination's KKT for them."""
    closed, trows = _closed_rows(mode, mu)
    if not trows:
        return False
    n, m = M.shape[0], A.shape[0]
    J = _rows(A, G, T, closed, trows)
    U, sv, Vt = _svd(J, full=False)
    if sv.size < n or not sv[-1] > 1e-8 * sv[0]:
        return False
    rhs = np.concatenate([b, h[closed], s[trows].reshape(-1)])
    x = Vt.T @ ((U.T @ rhs) / sv)
    if np.abs(J @ x - rhs).max() > 1e4 * _EPS * J.shape[0] * (
            np.abs(J).max() * np.abs(x).max() + np.abs(rhs).max(initial=0.0)):
        return False
    z = U @ ((Vt @ (M @ x - F)) / sv)
    nu_tol, _ = _scales(M, F, G, h, x)
    nc = len(closed)
    tpos = {i: m + nc + 2 * j for j, i in enumerate(trows)}
    mu_c, weld_c = mu[closed].tolist(), weld[closed].tolist()
    points = [(m + j, (tpos[i], tpos[i] + 1) if i in tpos and mu_c[j] < math.inf else None,
               mu_c[j], weld_c[j]) for j, i in enumerate(closed)]
    fric = np.array([0.0 if pt[1] is None else pt[2] for pt in points])
    tol = float(np.max(nu_tol[closed] * (1.0 + fric), initial=0.0))
    scale = _PRE_SAFETY * max(1.0, float(np.abs(z).max(initial=0.0)))
    bound = tol + 1e4 * _EPS * scale + 10 * _SOCP_TOL * scale
    if cone_slack(z, points) >= -bound or not _refuted(z, J, points, bound,
                                                          (U, sv, Vt)):
        return False
    # the excess forces: the sticking points' least-norm friction reversed, unit (zero
    # where it vanishes, as _slip_direction)
    rows = np.array(list(tpos.items()), dtype=np.int64).reshape(-1, 2)
    t = -np.column_stack([z[rows[:, 1]], z[rows[:, 1] + 1]])
    size = np.hypot(t[:, 0], t[:, 1])
    excess = np.zeros((len(mode), 2))
    excess[rows[:, 0]] = np.where((size > 0)[:, None], t / np.where(size > 0, size, 1.0)[:, None],
                                  0.0)
    shared.excess[np.asarray(mode, dtype=int).tobytes()] = excess
    return True


def _refuted(z: np.ndarray, W: np.ndarray, points: Sequence[tuple], delta: float,
             svd: Optional[tuple] = None) -> bool:
    """Whether a dual (Farkas) certificate proves that no forces ``z + Z y`` (``Z``: the
    forces that do no work, ``W^T Z = 0``) have a margin ``>= -delta``
    (:func:`cone_slack`): the combination's sticking points cannot hold, without the
    cone program (:func:`cone_margin`, about 1 ms for a slab on 20 points).

    The certificate is a virtual motion ``v`` whose rates ``w = W v`` lie in the dual
    cones: ``a_i >= mu_i |c_i|`` for a sticking point's normal and tangential rates
    ``(a_i, c_i)``, ``a_i >= 0`` for a point with a normal force only, ``0`` on the rows
    whose forces have no sign (bilateral rows, welded points). Every force of a cone
    enlarged by ``delta`` then does work ``z_i . w_i >= -delta (a_i + |c_i|)`` on it, while
    the work of every distribution is the same, ``z . w`` (``W^T Z = 0``): if ``z . w <
    -delta sum_i (a_i + |c_i|)``, no distribution has the margin ``-delta``. The candidate:
    each sticking point slipping against its least-norm friction ``t_i`` and lifting by
    ``mu_i`` (a body that must slide, slipping and rising off its support by its friction
    coefficient: the work of its forces is ``mu N - |t|`` per point), fitted by least
    squares to the motions ``v`` there are, plus the multiple ``lam`` of a uniform lift
    that the dual cones need. It only has to be valid: every condition is checked on the
    ``w`` it gives, to the rounding of its terms. ``svd``: the thin SVD of ``W`` if the
    caller has it (used where every row has a sign: the motions are then all of them)."""
    p, n = W.shape
    cn = [n_i for n_i, t_i, mu, weld in points if t_i is not None]
    if not cn:
        return False
    ct = np.array([t_i for n_i, t_i, mu, weld in points if t_i is not None], dtype=np.int64)
    cmu = np.array([mu for n_i, t_i, mu, weld in points if t_i is not None])
    nn = [n_i for n_i, t_i, mu, weld in points if t_i is None and not weld]
    cn = np.array(cn, dtype=np.int64)
    free = np.ones(p, dtype=bool)
    free[cn] = False
    free[ct.reshape(-1)] = False
    free[nn] = False
    # the candidate: every sticking point slipping against its friction and lifting by mu
    t = z[ct]                                                    # (kc, 2)
    tn = np.hypot(t[:, 0], t[:, 1])
    if not np.any(tn > 0) or float(np.sum(cmu * z[cn] - tn)) >= 0.0:
        # (the candidate's work is about sum_i (mu_i N_i - |t_i|) where the points slip
        # alike: not negative, it proves nothing, and the cone program decides -- a body
        # holding with a few cones binding, the cube at rest)
        return False
    slip = np.zeros(p)
    lift = np.zeros(p)
    moving = tn > 0
    slip[ct[moving]] = -t[moving] / tn[moving, None]
    slip[cn[moving]] = cmu[moving]
    lift[cn] = 1.0
    lift[nn] = 1.0
    # motions that keep the rows without a sign still: the null space of those rows
    Wf = W[free]
    if Wf.shape[0]:
        _, sv, Vt = np.linalg.svd(Wf)
        rank = int(np.count_nonzero(sv > 1e-12 * float(sv[0]))) if sv.size else 0
        basis = Vt[rank:].T
        if basis.shape[1] == 0:
            return False
        Wb = W @ basis
        U, sv, Vt = _svd(Wb, full=False)
    else:
        Wb = W
        U, sv, Vt = _svd(Wb, full=False) if svd is None else svd
    keep = sv > 1e-12 * float(sv[0]) if sv.size else sv > 0
    coef = Vt[keep].T @ ((U[:, keep].T @ np.column_stack([slip, lift])) / sv[keep, None])
    ws, wl = Wb @ coef[:, 0], Wb @ coef[:, 1]
    # the least lift that puts every point's rates in its dual cone (each condition
    # holds on an interval of lam; linearized, then checked exactly below)
    lam = 0.0
    if nn:
        a_s, a_l = ws[nn], wl[nn]
        low = a_s < 0
        if np.any(low & (a_l <= 0)):
            return False
        if np.any(low):
            lam = max(lam, float(np.max(-a_s[low] / a_l[low])))
    a_s, a_l = ws[cn], wl[cn]
    c_s = np.hypot(ws[ct[:, 0]], ws[ct[:, 1]])
    c_l = np.hypot(wl[ct[:, 0]], wl[ct[:, 1]])
    need = cmu * c_s - a_s
    short = need > 0
    if np.any(short):
        room = a_l[short] - cmu[short] * c_l[short]
        if np.any(room <= 0):
            return False
        lam = max(lam, float(np.max(need[short] / room)))
    w = ws + lam * (1.0 + 1e-9) * wl
    a = w[cn]
    c = np.hypot(w[ct[:, 0]], w[ct[:, 1]])
    if np.any(a < cmu * c) or (nn and np.any(w[nn] < 0)):
        return False
    budget = float(np.sum(a + c)) + (float(np.sum(w[nn])) if nn else 0.0)
    work = float(z @ w)
    rounding = 1e4 * _EPS * p * float(np.abs(z).max(initial=0.0)) * float(np.abs(w).max())
    return work < -(delta * budget + rounding)


def _against(along: float, tol: float, shared: "_Shared", i: int, fscale: float) -> bool:
    """Whether a slider's slip ``along`` its direction is against it beyond its rounding
    ``tol`` and its onset slack (:func:`_onset_slack`; the point's mobility is computed
    only for a slip that the rounding alone does not clear)."""
    return along < -tol and along < -(tol + _onset_slack(shared.mobility(i), fscale))


def _onset_slack(mob: float, fscale: float) -> float:
    """The slip acceleration that a force of ``10 _SOCP_TOL fscale`` on the point's
    tangents gives it at most: that force times the point's tangential mobility ``mob``
    (:func:`_mobilities`)."""
    return 10 * _SOCP_TOL * fscale * mob


class _Shared:
    """What one contact problem computes once for all its combinations: every point's
    tangential mobility (:func:`_mobilities`, when first read: a problem without points
    starting to slide reads none), and the combinations without sliders already solved
    (:func:`_combo`: the sticking combination that the preferences try first is the one
    whose forces start the slide directions of the next)."""

    def __init__(self, M: np.ndarray, T: np.ndarray):
        self._M, self._T, self._values = M, T, None
        self.combos: dict = {}
        #: sticking combinations refuted before their KKT solve (:func:`_stick_refuted`):
        #: their points' excess-force directions, (k, 2), by the combination's bytes
        self.excess: dict = {}
        #: combinations that did not certify (:func:`_solve_mode`): the slide directions'
        #: starting hints they were tried from, by the combination's bytes and
        #: right-hand sides (exact or moved)
        self.failed: dict = {}

    def mobility(self, i: int) -> float:
        if self._values is None:
            self._values = _mobilities(self._M, self._T)
        return float(self._values[i])


def _combo(shared: _Shared, M, F, A, b, G, h, T, s, mu, mode, dirs, tol, select, basis):
    """The :class:`_Combo` of ``mode`` with the directions ``dirs``, solved once per
    problem (``shared``; one with the basis serves a request without)."""
    c = shared.combos.get(_combo_key(mode, dirs, tol, select))
    if c is None:
        c = _Combo(M, F, A, b, G, h, T, s, mu, mode, dirs, tol, select, basis)
        shared.combos[_combo_key(mode, dirs, tol, select)] = c
    return c.with_basis() if basis else c


def _combo_key(mode, dirs, tol, select) -> tuple:
    return np.asarray(mode).tobytes(), dirs.tobytes(), tol is None, select


def _mobilities(M: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Every point's tangential mobility: the largest eigenvalue of the 2 x 2 symmetric
    ``T_i M^+ T_i^T`` (``M^+`` the pseudo-inverse: a scale), in closed form, for all the
    points at once (once per contact problem)."""
    W = np.einsum("kan,kbn->kab", T @ np.linalg.pinv(M), T)         # (M^+ symmetric)
    a, d, c = W[:, 0, 0], W[:, 1, 1], 0.5 * (W[:, 0, 1] + W[:, 1, 0])
    return 0.5 * (a + d) + np.hypot(0.5 * (a - d), c)


def _slides(mode, known, mu, closed) -> bool:
    """Whether a closed point of ``mode`` slides: starting to (:data:`SLIDE`), or already
    along its known direction with finite friction."""
    if not closed:
        return False
    c = np.asarray(closed)
    if np.any(np.asarray(mode)[c] == SLIDE):
        return True
    mc = mu[c]
    return bool(np.any(np.any(known[c] != 0, axis=1) & (mc > 0) & (mc < math.inf)))


def _slip_direction(u: np.ndarray) -> np.ndarray:
    """The unit direction of the slip ``u`` (2,), zero where it vanishes: a slide
    direction's start."""
    nu_ = float(np.hypot(u[0], u[1]))
    return u / nu_ if nu_ > 0 else np.zeros(2)


def _slip_tols(M, F, T, s, x, sliders) -> list:
    """The rounding scale of each slider's slip ``T_i x - s_i`` (the larger of its two
    rows'), all at once."""
    n = M.shape[0]
    _, tol = _scales(M, F, T[sliders].reshape(-1, n), s[sliders].reshape(-1), x)
    return tol.reshape(-1, 2).max(axis=1).tolist()


def _slip_parts(x, T, s, dirs, sliders) -> tuple[list, list]:
    """``(d_j x u_j, d_j . u_j)`` of every slider: its slip ``u_j = T_j x - s_j`` across and
    along its direction ``d_j``."""
    u = np.einsum("kan,n->ka", T[sliders], x) - s[sliders]
    d = dirs[sliders]
    return ((d[:, 0] * u[:, 1] - d[:, 1] * u[:, 0]).tolist(),
            np.einsum("ka,ka->k", d, u).tolist())


def _solve_mode(M, F, A, b, G, h, T, s, mu, mode, known, weld, shared, hint=None, tol=None):
    """The combination ``mode`` (the points in :data:`SLIDE` with their directions solved
    by Newton, started first from ``hint``, unit directions per point, if given):
    ``(combo, z, Z, points, indet, dirs)`` certified, or None.

    Tried once per problem (``shared``) and start: a combination that did not certify is
    not solved again from a hint within :data:`_HINT_SAME` of one it was tried from (the
    same polygon's readings at its other compliances, or the same moved right-hand sides,
    give the same combination again with its hint moved by rounding: MuJoCo's humanoid
    landing on eleven points solved 168 combinations of which 66 differed, 10-15 s a
    decision). A finer polygon's hint (a sector apart) is tried: the humanoid's answer
    certified only from the 16-gon's."""
    key = (np.asarray(mode).tobytes(), None if tol is None else np.asarray(tol).tobytes())
    start = _hint_angles(mode, hint)
    if any(_same_start(start, tried) for tried in shared.failed.get(key, ())):
        return None
    got = _solve_mode_from(M, F, A, b, G, h, T, s, mu, mode, known, weld, shared, hint, tol)
    if got is None:
        shared.failed.setdefault(key, []).append(start)
    return got


#: hints (slide directions' starts) closer than this (radians, every slider) count as
#: the same start: a polygon's readings at its compliances differ by rounding (1e-4 rad on
#: the humanoid's eleven points), its finer polygons' by a sector (pi / 16 and more)
_HINT_SAME = 1e-2


def _hint_angles(mode, hint) -> Optional[np.ndarray]:
    """The angles of ``hint``'s directions of ``mode``'s sliders (None where it gives
    none: :func:`_solve_mode_with` starts without it then)."""
    sliders = np.flatnonzero(np.asarray(mode) == SLIDE)
    if hint is None or sliders.size == 0 or not bool(np.all(np.any(hint[sliders] != 0,
                                                                    axis=1))):
        return None
    return np.arctan2(hint[sliders, 1], hint[sliders, 0])


def _same_start(a: Optional[np.ndarray], b: Optional[np.ndarray]) -> bool:
    """Whether two starts (:func:`_hint_angles`) are the same within :data:`_HINT_SAME`."""
    if a is None or b is None:
        return a is None and b is None
    return float(np.abs((a - b + np.pi) % (2 * np.pi) - np.pi).max(initial=0.0)) <= _HINT_SAME


def _solve_mode_from(M, F, A, b, G, h, T, s, mu, mode, known, weld, shared, hint, tol):
    """:func:`_solve_mode`, every time it is asked.

    Solved first with determined accelerations only; where sliding points on dependent
    rows leave none (a box sliding and turning flat on four corners), again with the
    forces without self-stress deciding the motion (``select``). Not both at once: at a
    slide onset the slip accelerations vanish, every direction nearly solves
    ``d x u = 0``, and Newton's first start (the corners' excess forces, which an
    indeterminate distribution tilts by 1e-5) converged to directions 2e-5 apart, whose
    turning moment made the slide a stiff run (62 steps instead of 10); the determined
    combination has one direction for all."""
    got = _solve_mode_with(M, F, A, b, G, h, T, s, mu, mode, known, weld, shared, hint, tol,
                           False)
    if got is not None:
        return got
    closed, trows = _closed_rows(mode, mu)
    sliding = _slides(mode, known, mu, closed)
    if not sliding or len(closed) < 2:
        return None
    if self_stresses(_rows(A, G, T, closed, trows)).shape[1] == 0:
        return None
    got = _solve_mode_with(M, F, A, b, G, h, T, s, mu, mode, known, weld, shared, hint, tol,
                           True)
    if got is not None:
        got[0].selected = True
    return got


def _solve_mode_with(M, F, A, b, G, h, T, s, mu, mode, known, weld, shared, hint, tol, select):
    """:func:`_solve_mode` with or without ``select``."""
    k = G.shape[0]
    sliders = [i for i in range(k) if mode[i] == SLIDE]
    dirs = np.array(known, dtype=float)
    if not sliders:
        c = _combo(shared, M, F, A, b, G, h, T, s, mu, mode, dirs, tol, select, True)
        if c.got is None:
            return None
        got = _certify(M, F, A, b, G, h, T, s, mu, mode, dirs, weld, c, sliders, shared)
        return None if got is None else (c, *got, dirs)
    # (lazily: the first start usually converges; the others are built from the
    # directions known before Newton moves ``dirs``)
    if _hint_angles(mode, hint) is None:
        hint = None
    starts = _starts(shared, M, F, A, b, G, h, T, s, mu, mode, dirs.copy(), sliders, tol,
                     select, hint)
    for theta0 in starts:
        theta = np.array(theta0, dtype=float)
        for _ in range(_NEWTON_ITER):
            for j, i in enumerate(sliders):
                dirs[i] = _unit(theta[j])
            c = _Combo(M, F, A, b, G, h, T, s, mu, mode, dirs, tol, select, basis=False)
            if c.got is None:
                break
            x = c.got[0]
            cross, along = _slip_parts(x, T, s, dirs, sliders)
            R = np.array(cross)
            tols = _slip_tols(M, F, T, s, x, sliders)
            if all(abs(r) <= t for r, t in zip(cross, tols)):
                # converged. ``d x u = 0`` has a second root per slider, ``u`` against
                # ``d`` (the friction pushing the slip on), which a start may reach: the
                # next start is tried then; at the root with every slip along its
                # direction, the combination's other conditions decide it
                fscale = max(1.0, float(np.abs(c.got[1]).max(initial=0.0)))
                if any(_against(along[j], tols[j], shared, i, fscale)
                       for j, i in enumerate(sliders)):
                    break
                c.with_basis()
                done = _certify(M, F, A, b, G, h, T, s, mu, mode, dirs, weld, c, sliders,
                                shared)
                return None if done is None else (c, *done, dirs.copy())
            Jac = _direction_jacobian(M, A, T, mu, c, dirs, sliders, along)
            if Jac is None:
                # (by differences, where the derivatives' system failed)
                Jac = np.zeros((len(sliders), len(sliders)))
                dt = 1e-7
                ok = True
                for j, i in enumerate(sliders):
                    d2 = dirs.copy()
                    d2[i] = _unit(theta[j] + dt)
                    c2 = _Combo(M, F, A, b, G, h, T, s, mu, mode, d2, tol, select, basis=False)
                    if c2.got is None:
                        ok = False
                        break
                    Jac[:, j] = (np.array(_slip_parts(c2.got[0], T, s, d2, sliders)[0]) - R
                                 ) / dt
                if not ok:
                    break
            try:
                step = np.linalg.lstsq(Jac, -R, rcond=None)[0]
            except np.linalg.LinAlgError:
                break
            if not np.all(np.isfinite(step)) or np.abs(step).max(initial=0.0) < 1e-15:
                break
            theta = theta + np.clip(step, -1.0, 1.0)
    return None


def _direction_jacobian(M, A, T, mu, c: "_Combo", dirs, sliders, along
                        ) -> Optional[np.ndarray]:
    """The derivatives of the sliders' slips across their directions (``d_i x u_i``,
    :func:`_slip_parts`) with respect to their directions' angles, at the solved
    combination ``c``: Newton's Jacobian on the slide directions, exact, from one KKT
    solve with a right-hand side per slider (None where that solve fails).

    Turning slider ``j``'s direction by ``dtheta`` turns its force row ``W_j = G_j - mu_j
    d_j . T_j`` by ``-mu_j d_j^perp . T_j dtheta``, so ``M x' - W^T z' = -mu_j N_j T_j^T
    d_j^perp`` and ``J x' = 0`` (the same matrices as ``c``'s solve), and ``(d_i x u_i)' =
    d_i x T_i x' - delta_ij d_i . u_i``; where the forces without self-stress decided the
    motion (``c.selected_solve``, :func:`~gaussopt.gauss.contact_problem.selected_kkt`), the
    same with that rule's rows, which do not turn. Why: by differences every Newton
    iteration cost a KKT solve per slider; an impact of MuJoCo's humanoid on ten sliding
    points made 764,000 of them in a 2 s run (370 of its 598 s under the profiler)."""
    n, m = M.shape[0], A.shape[0]
    z = c.got[1]
    R_top = np.empty((n, len(sliders)))
    for j, i in enumerate(sliders):
        d = dirs[i]
        R_top[:, j] = (-mu[i] * z[m + c.closed.index(i)]) * (T[i].T @ np.array([-d[1], d[0]]))
    R_bot = np.zeros((c.J.shape[0], len(sliders)))
    # (by the factorization of ``c``'s own solve: the same system)
    got = c.kkt.solve(R_top, R_bot)
    if got is None:
        return None
    X = got[0] if c.selected_solve else got[:n]
    d = dirs[sliders]
    TX = np.einsum("kan,nj->kaj", T[sliders], X)                    # (ns, 2, ns)
    Jac = d[:, 0, None] * TX[:, 1, :] - d[:, 1, None] * TX[:, 0, :]
    Jac[np.diag_indices(len(sliders))] -= np.asarray(along, dtype=float)
    return Jac if np.all(np.isfinite(Jac)) else None


def _starts(shared, M, F, A, b, G, h, T, s, mu, mode, dirs, sliders, tol=None, select=False,
            hint=None):
    """Starting angles of the slide directions, one after another (a generator): the
    excess force (the sliders sticking: their sticking forces reversed), the frictionless
    slip (the sliders without friction), then the four axes; ``hint`` (unit directions
    per point: the polygon's slip) before them, or after the excess force where that
    costs nothing (its sticking combination already solved in this problem: tried first
    by the preferences). The polygon's slip is off by its tie-breaking perturbation (a
    slab on 20 points: 4.4e-6), enough to make the directions of a body sliding flat on
    many points differ, its motion undetermined and the start fail; the excess force is
    the direction a slip starts in."""
    stick = np.array(mode)
    stick[sliders] = STICK
    hint_angles = None if hint is None else [math.atan2(hint[i][1], hint[i][0])
                                             for i in sliders]
    known = _combo_key(stick, dirs, tol, select) in shared.combos
    pre = None if known else shared.excess.get(stick.tobytes())
    if pre is not None and bool(np.all(np.any(pre[sliders] != 0, axis=1))):
        # (the excess force of the sticking combination refuted before its KKT solve)
        yield [math.atan2(pre[i][1], pre[i][0]) for i in sliders]
    if hint_angles is not None and not known:
        yield hint_angles
    c = _combo(shared, M, F, A, b, G, h, T, s, mu, stick, dirs, tol, select, False)
    if c.got is not None:
        x, z, _ = c.got
        m, nc = A.shape[0], len(c.closed)
        th = []
        for i in sliders:
            jj = m + nc + 2 * c.trows.index(i)
            t = z[jj:jj + 2]
            th.append(math.atan2(-t[1], -t[0]) if np.any(t) else 0.0)
        yield th
    if hint_angles is not None and known:
        yield hint_angles
    free = np.array(mu, dtype=float)
    free[sliders] = 0.0
    c = _Combo(M, F, A, b, G, h, T, s, free, mode, dirs, tol, select, basis=False)
    if c.got is not None:
        x = c.got[0]
        yield [math.atan2(*(T[i] @ x - s[i])[::-1]) for i in sliders]
    for a in (0.0, 0.5 * math.pi, math.pi, 1.5 * math.pi):
        yield [a] * len(sliders)


# --------------------------------------------------------------------------- many points
#: the compliances (times the planar problem's) of the polygon's LCP, tried in turn where
#: the states read from one certify none: the reading of a degenerate LCP (a body on many
#: points) depends on its regularization, the certified answer does not (a slab on 9 or
#: 12 points, pushed and turned: no certified state at the first, the same state at the
#: others, the whole family's: :func:`_whole_family`)
_LCP_RETRIES = (1.0, 1e-2, 1e2)

#: directions of the polygon inscribed in each circular cone for the LCP of many points
#: (its friction reaches cos(pi / 8) = 92 % of the circle's between two directions)
_POLYGON = 8
#: finer polygons, tried in turn (each at every compliance of :data:`_LCP_RETRIES`) where
#: no state read from the coarser ones certifies: the closer polygon's reading is closer to
#: the circle's answer. (dm_control's humanoid landing on its hands while its head, seat,
#: thighs and upper arms touch the floor, an impact of 9 points with mu = 1: no state read
#: from the octagon's LCP certified at any compliance, and 3^9 combinations are too many to
#: try; the 16-gon's reading certified at once: head, seat and thighs sliding, hands
#: sticking, upper arms lifting)
_POLYGON_REFINED = (16, 32)


@functools.lru_cache(maxsize=None)
def _polygon_dirs(nd: int) -> np.ndarray:
    """The directions of the polygon of ``nd`` sides, (2, nd) (built once per ``nd``)."""
    a = 2.0 * np.pi * np.arange(nd) / nd
    return np.vstack([np.cos(a), np.sin(a)])


def _by_lcp_cone(M, F, A, b, G, h, T, s, mu, known, weld, options, prefer, release,
                 score_opts, shared, tol=None, compliance=1.0, nd=_POLYGON, readings=None,
                 wide=True):
    """The spatial contact problem of many points: the states from Lemke's algorithm on
    the LCP with every circular cone replaced by its inscribed polygon of
    ``nd`` directions ``d_j`` (Stewart and Trinkle's form: per point
    ``N >= 0 _|_ g >= 0``, ``beta_j >= 0 _|_ d_j . u + lam >= 0``,
    ``lam >= 0 _|_ mu N - sum beta_j >= 0``, friction ``sum beta_j d_j``), then certified
    with the circular cones exactly as every combination of :func:`solve_contact_cone`
    (the slide directions by Newton, started from the polygon's slip). The polygon holds
    less friction than the circle, so a point it lets stick sticks, and one it lets slide
    may stick: its own states, the same with its sliding points sticking, the preferred
    states and those with every point on an edge sliding (:func:`far_side`) are
    certified, best first; ``compliance`` scales the LCP's
    (:func:`~gaussopt.gauss.contact_problem.compliant_lemke`). ``wide``: also every
    combination of the states the reading leaves open (a point with zero force and zero
    gap rate, a force on its cone's edge), where they are at most
    :data:`~gaussopt.gauss.contact_problem.ENUMERATE_MAX`. Returns the selection's
    tuple or None; ``readings`` (a list), if given, gets the state read (its points' modes)."""
    n, k = M.shape[0], G.shape[0]
    rest = np.array([SLIDE in o for o in options])
    infinite = mu == math.inf
    fr = np.flatnonzero(rest | infinite)
    kf = fr.size
    mu_f = np.where(infinite[fr], _MU_INF, mu[fr])
    D = _polygon_dirs(nd)                                           # (2, nd)
    slides = ~rest & ~infinite & (mu > 0) & np.any(known != 0, axis=1)
    dirs_n = G.copy()
    for i in np.flatnonzero(slides):
        dirs_n[i] = G[i] - mu[i] * (known[i] @ T[i])
    Tf = T[fr].reshape(-1, n)                                       # (2 kf, n)
    rhs = np.column_stack([F, dirs_n.T, Tf.T])
    got = _bilateral_response(M, A, b, rhs)
    if got is None:
        return None
    x0, XN, XT = got[:, 0], got[:, 1:1 + k], got[:, 1 + k:]
    # tangential unknowns: beta (kf nd), the force T^T D beta per point. The map from
    # the points' tangent pairs to their polygons' directions is block diagonal (the
    # 2 x nd block D per point): applied per block (einsum), not as a dense matrix, whose
    # products cost 30 times the work (and, multithreaded by BLAS on a busy machine,
    # milliseconds)
    def to_dirs(Y):
        """``Dblk^T Y``: the rows of Y (2 kf, c) in pairs, each pair onto the nd
        directions of its polygon."""
        c = Y.shape[1]
        return np.einsum("ab,kac->kbc", D, Y.reshape(kf, 2, c)).reshape(kf * nd, c)

    XB = np.einsum("nka,ab->nkb", XT.reshape(n, kf, 2), D).reshape(n, kf * nd)
    L = k + kf * nd + kf
    Ml = np.zeros((L, L))
    cb, cl = k, k + kf * nd
    Ml[:k, :k], Ml[:k, cb:cl] = G @ XN, G @ XB
    Ml[cb:cl, :k], Ml[cb:cl, cb:cl] = to_dirs(Tf @ XN), to_dirs(Tf @ XB)
    beta_rows = np.arange(cb, cl)
    owner = cl + np.repeat(np.arange(kf), nd)                       # each beta's lam
    Ml[beta_rows, owner] = 1.0                                      # d_j . u + lam
    Ml[cl + np.arange(kf), fr] = mu_f                               # mu N - sum beta
    Ml[owner, beta_rows] = -1.0
    u0 = Tf @ x0 - s[fr].reshape(-1)
    ql = np.concatenate([G @ x0 - h, to_dirs(u0[:, None])[:, 0], np.zeros(kf)])
    got = compliant_lemke(Ml, ql, compliance)
    if got is None:
        return None
    zl, wl, zero = got
    N, beta, lam = zl[:k], zl[cb:cl], zl[cl:]
    g = wl[:k]
    x = x0 + XN @ N + XB @ beta
    ftol = zero * (float(np.abs(zl).max(initial=0.0)) + float(np.abs(F).max(initial=0.0))
                        + 1e-300)
    ktol = zero * (float(np.abs(ql).max(initial=0.0)) + float(np.abs(wl).max(initial=0.0))
                        + 1e-300)
    closed_modes = []
    pos = np.full(k, -1)
    pos[fr] = np.arange(kf)
    # the polygon's slip directions of the points it reads sliding (all at once: unit,
    # zero where the slip vanishes, as :func:`_slip_direction`)
    read = np.zeros(k, dtype=bool)
    read[fr] = rest[fr] & (lam > ktol)
    slips = np.einsum("kan,n->ka", T, x) - s
    size = np.hypot(slips[:, 0], slips[:, 1])
    hint = np.where((read & (size > 0))[:, None], slips / np.where(size > 0, size, 1.0)[:, None],
                    0.0)
    pos, read_, rest_ = pos.tolist(), read.tolist(), rest.tolist()
    for i in range(k):
        j = pos[i]
        if read_[i]:
            closed_modes.append([SLIDE, STICK])
        elif rest_[i]:
            closed_modes.append([STICK, SLIDE] if wl[cl + j] <= ftol else [STICK])
        else:
            closed_modes.append([CLOSED])
    sets, own, near = read_states(closed_modes, N, N > ftol, g > ktol, options, prefer)
    if readings is not None:
        readings.append(tuple(int(c) for c in own))
    stuck = [STICK if c == SLIDE else c for c in own]
    modes = {tuple(own), tuple(stuck), tuple(near), tuple(far_side(sets))}
    # a released group asks for its members to slide: every closed member that may slide
    # does (at a degenerate release every force is on its cone's edge and the polygon's
    # answer may read some of them inside it, by rounding)
    for group in release:
        asked = list(own)
        for i in group:
            if SLIDE in options[i] and asked[i] != OPEN:
                asked[i] = SLIDE
        modes.add(tuple(asked))
    if wide and math.prod(len(c) for c in sets) <= ENUMERATE_MAX:
        modes.update(itertools.product(*sets))
    read_sliding = {i for i in range(k) if own[i] == SLIDE}
    return _first_certified(M, F, A, b, G, h, T, s, mu, known, weld, shared, tol, options,
                            sorted(modes, key=lambda c: _score_cone(c, prefer, release,
                                                                    score_opts)),
                            hint, read_sliding)


def _first_certified(M, F, A, b, G, h, T, s, mu, known, weld, shared, tol, options, modes,
                     hint=None, read_sliding=frozenset()):
    """The first of ``modes`` (in their order) that certifies (:func:`_solve_mode`, its
    slide directions started from ``hint``), as the state :func:`_whole_family` takes for
    it; None if none does. A combination sticking points of ``read_sliding`` (points that
    a polygon's LCP reads sliding) is first refuted, where a certificate proves it cheaply,
    before its KKT solve (:func:`_stick_refuted`)."""
    for mode in modes:
        if (read_sliding and SLIDE not in mode
                and any(mode[i] == STICK for i in read_sliding)
                and _stick_refuted(M, F, A, b, G, h, T, s, mu, mode, weld, shared)):
            continue
        mode = np.array(mode, dtype=int)
        try:
            got = _solve_mode(M, F, A, b, G, h, T, s, mu, mode, known, weld, shared, hint=hint,
                              tol=tol)
        except (GaussoptError, np.linalg.LinAlgError):
            continue
        if got is not None:
            found = (mode, *got)
            whole = _whole_family(M, F, A, b, G, h, T, s, mu, known, weld, shared, tol, options,
                                  found)
            return found if whole is None else whole
    return None


def _whole_family(M, F, A, b, G, h, T, s, mu, known, weld, shared, tol, options, found):
    """The state the enumeration's rule (:func:`_one_per_family`) takes instead of
    ``found``, a certified state of the LCP path, or None to keep it.

    Where closed points slide on dependent rows (a face sliding on a plane), the rigid
    motion is undetermined: the state with all the touching points closed takes the
    forces without self-stress (the rigid limit of equally stiff points), and each state
    with some of them open at zero load (three corners of a slab carrying it) is another
    admissible motion of the same family. The enumeration certifies them all and keeps
    the whole family's; the LCP path certifies the first its polygon's answer reads, a
    member or the whole family depending on that answer's rounding (the slab on 12 points
    of ``tests/test_contact_lcp.py``, pushed and turned: its angular acceleration -1.64
    rad/s^2 on three points, -0.218 on all twelve, as the LCP's compliance was changed).
    So where ``found`` slides and leaves
    open points touching it (zero gap acceleration, rows in the span of its closed ones),
    the state with those points closed (sliding from rest where they may) is certified
    too, and :func:`_one_per_family` chooses between the two."""
    mode, combo = found[0], found[1]
    k = G.shape[0]
    closed = combo.closed
    sliding = _slides(mode, known, mu, closed)
    if not sliding or not closed:
        return None
    x = combo.got[0]
    slack = G @ x - h
    _, slack_tol = _scales(M, F, G, h, x)
    touching = [i for i in range(k) if mode[i] == OPEN and abs(slack[i]) <= slack_tol[i]
                and len(options[i]) > 1]
    if not touching or not in_span(G[touching], np.concatenate([A, G[closed]])):
        return None
    whole = np.array(mode)
    hint = np.zeros((k, 2))
    for i in touching:
        whole[i] = SLIDE if SLIDE in options[i] else options[i][1]
    for i in range(k):
        if whole[i] == SLIDE:
            hint[i] = _slip_direction(T[i] @ x - s[i])
    if any(whole[i] == SLIDE and not np.any(hint[i]) for i in range(k)):
        hint = None
    try:
        got = _solve_mode(M, F, A, b, G, h, T, s, mu, whole, known, weld, shared, hint=hint,
                          tol=tol)
    except (GaussoptError, np.linalg.LinAlgError):
        return None
    if got is None:
        return None
    kept = _one_per_family([found, (whole, *got)], A, G, T)
    return kept[0] if len(kept) == 1 and kept[0] is not found else None


# --------------------------------------------------------------------------- families
def _rows(A, G, T, closed, trows) -> np.ndarray:
    """The rows of a combination: ``A``, the closed points' normals, the sticking points'
    two tangents (the order of its forces ``z``)."""
    n = A.shape[1]
    return np.concatenate([A, G[list(closed)], T[list(trows)].reshape(-1, n)])


def _one_per_family(found: list, A, G, T) -> list:
    """The certified combinations with one member per family of rigid motions (a state
    decided by the stiff-points rule only with determined members of its family, or with
    no determined state at all).

    Where closed points' rows are dependent (a box flat on four corners) and some of them
    slide, the rigid model leaves the motion undetermined: the combination with all of
    them closed takes the distribution without self-stress
    (:func:`~gaussopt.gauss.contact_problem.selected_kkt`, the rigid limit of equally
    stiff points), while each combination with some of them open at zero load (three
    corners carrying the box) is another admissible rigid motion of the same family, not
    a competing state: it is dropped when the whole family's combination is certified.
    Where it is not (its distribution without self-stress pulls on a point), the member
    nearest to it is kept: the one whose forces, written over the union of the members'
    rows, carry the least self-stress of those rows (for one redundant row, the end of
    the admissible interval of distributions nearest the stiff-points one). A member is a
    combination whose closed points keep another's modes and whose missing points' rows
    lie in the span of its own (their gap acceleration is then zero, as the family's)."""
    def key(f):
        return {i: int(f[0][i]) for i in f[1].closed}

    def rows_in_span(f, extra) -> bool:
        if not extra:
            return True
        base = np.concatenate([A, G[f[1].closed]])
        return in_span(G[extra], base)

    def member(f, g) -> bool:
        """Whether ``f`` is ``g`` with some of ``g``'s closed points open."""
        kf, kg = key(f), key(g)
        if len(kf) >= len(kg) or any(kg.get(i) != c for i, c in kf.items()):
            return False
        return rows_in_span(f, [i for i in kg if i not in kf])

    # a state whose motion only the stiff-points rule decides stands for its family: it
    # is kept where determined certified states are its members (three corners of four
    # carrying a sliding box), or where no state is determined; beside determined states
    # outside its family it is dropped (two corners sliding, the other two at rest: one
    # lifting while the other sticks is determined, all four loaded and the two starting
    # to slide is a motion only the rule picks)
    determined = [f for f in found if not f[1].selected]
    chosen = [g for g in found if g[1].selected
              and (not determined or any(member(f, g) for f in determined))]
    found = [f for f in found if not f[1].selected] + chosen
    kept = [f for f in found if not any(member(f, g) for g in found if g is not f)]
    if len(kept) < 2:
        return kept
    # no certified whole family: several members of one union of closed points?
    union: dict = {}
    for f in kept:
        for i, c in key(f).items():
            if union.setdefault(i, c) != c:
                return kept                         # (modes differ: not one family)
    closed_u = sorted(union)
    if not all(rows_in_span(f, [i for i in closed_u if i not in key(f)]) for f in kept):
        return kept
    trows_u = [i for i in closed_u if union[i] == STICK]
    S = self_stresses(_rows(A, G, T, closed_u, trows_u))
    if S.shape[1] == 0:
        return kept
    m = A.shape[0]
    pos = {i: m + j for j, i in enumerate(closed_u)}
    tpos = {i: m + len(closed_u) + 2 * j for j, i in enumerate(trows_u)}

    def stress(f) -> float:
        combo, z = f[1], f[2]
        zu = np.zeros(S.shape[0])
        zu[:m] = z[:m]
        nc = len(combo.closed)
        for j, i in enumerate(combo.closed):
            zu[pos[i]] = z[m + j]
        for j, i in enumerate(combo.trows):
            zu[tpos[i]:tpos[i] + 2] = z[m + nc + 2 * j:m + nc + 2 * j + 2]
        return float(np.linalg.norm(S.T @ zu))

    return [min(kept, key=stress)]


# --------------------------------------------------------------------------- the problem
def _score_cone(mode, prefer, release, options) -> tuple:
    """The planar preferences (:func:`~gaussopt.gauss.contact_problem._score`) without its
    "open before sliding" and with the fewest open points after the fewest changes: in
    space three corners of four carry a body as well as four, so a released group's
    member left open with zero force would be a tie decided against the forces of all
    (a box starting to slide on four corners slides on four)."""
    kept, sticking, _, away, slides = _score(mode, prefer, release, options)
    return (kept, sticking, away, int(np.count_nonzero(np.asarray(mode) == OPEN)), slides)


def solve_contact_cone(M: np.ndarray, F: np.ndarray, A: np.ndarray, b: np.ndarray,
                       G: np.ndarray, h: np.ndarray, T: np.ndarray, s: np.ndarray, *,
                       mu: np.ndarray, slide: Optional[np.ndarray] = None,
                       prefer: Optional[np.ndarray] = None,
                       release: Sequence[Sequence[int]] = (),
                       weld: Optional[np.ndarray] = None,
                       labels: Optional[Sequence[str]] = None,
                       rhs_tol: Optional[np.ndarray] = None,
                       persist: bool = False, quick: bool = False) -> ContactSolution:
    """Solve the spatial contact problem of the module docstring, certified.

    Parameters
    ----------
    M, F, A, b, G, h
        As :func:`gaussopt.gauss.contact_problem.solve_contact`.
    T, s : ndarray, shapes (k, 2, n), (k, 2)
        The slip rows: point ``i``'s slip acceleration (or velocity) ``T_i x - s_i`` along
        its two orthonormal tangents.
    mu : ndarray, shape (k,)
        Friction coefficients (0, finite, or ``inf``: no slip while closed).
    slide : ndarray, shape (k, 2), optional
        The unit slip direction of the points that already slip (their friction is
        ``-mu N`` along it); zero rows: at rest tangentially (stick or start to slide).
    prefer, release, weld, labels
        As :func:`~gaussopt.gauss.contact_problem.solve_contact` (:data:`SLIDE` is the
        mode of a point starting to slide).
    rhs_tol : ndarray, shape (k,), or callable, optional
        Per point, how far its rows' right-hand sides (``h_i``, ``s_i``) may be moved to
        make dependent rows consistent (:func:`_consistent`; at an impact the driver's
        velocity tolerance), where the exact problem has no certified answer; a callable
        returning it is called only there. None: not moved.
    persist : bool
        Where several certified states move differently (rigid Coulomb friction admits
        more than one motion), take the one that is exactly ``prefer`` (with the
        ``release`` groups released) if it is among them: the contact state continues
        where it is admissible, changed only as the event announced. The contact run
        passes it at its events (a box sliding on three corners, the fourth at rest: that
        corner sticking with all four loaded, or starting to slide while another lifts,
        are both certified; the first continues the state). False: such a problem raises.
    quick : bool
        Many points (Lemke's path): read the states from the first polygon only, without
        the refined polygons, the other compliances or the combinations one mode away
        from the readings, and raise where those do not certify. For a caller to whom
        the answer is optional (the contact run's end of an accumulation, a shortcut):
        a problem whose readings do not certify costs seconds in the full search
        (MuJoCo's humanoid, 38 points, its feet rocking: 13-20 s each).

    Returns
    -------
    ContactSolution
        With ``tau`` and ``slip`` of shape (k, 2) and ``direction`` the unit slip
        direction of every sliding point.

    Raises
    ------
    ContactSolveError
        No combination satisfies the conditions, several with different motions do, or
        Lemke's algorithm finds no certified state and there are more than
        :data:`~gaussopt.gauss.contact_problem.MAX_COMBINATIONS` to try.
    """
    M = np.asarray(M, dtype=float)
    F, A, b = np.asarray(F, dtype=float), np.asarray(A, dtype=float), np.asarray(b, dtype=float)
    G, h = np.asarray(G, dtype=float), np.asarray(h, dtype=float)
    T, s = np.asarray(T, dtype=float), np.asarray(s, dtype=float)
    k, n = G.shape[0], M.shape[0]
    mu = np.asarray(mu, dtype=float)
    if T.shape != (k, 2, n) or s.shape != (k, 2) or mu.shape != (k,):
        raise ModelError(f"`T`, `s`, `mu` must have shapes ({k}, 2, {n}), ({k}, 2), ({k},), "
                         f"found {T.shape}, {s.shape}, {mu.shape}.")
    known = np.zeros((k, 2)) if slide is None else np.asarray(slide, dtype=float)
    labels = list(labels) if labels is not None else [f"point {i}" for i in range(k)]
    weld = np.zeros(k, dtype=bool) if weld is None else np.asarray(weld, dtype=bool)
    options = mode_options((0 < mu) & (mu < math.inf) & ~np.any(known != 0, axis=1),
                           (OPEN, STICK, SLIDE), weld, labels, limit=None)
    prefer = np.full(k, -1) if prefer is None else np.asarray(prefer, dtype=int)
    # the planar preferences: a 3-option point has no SLIDE_NEG, which _score reads from
    # the option count 4; give it the 4-option form
    score_opts = [o if len(o) != 3 else (OPEN, STICK, SLIDE, SLIDE + 1) for o in options]
    total = math.prod(len(o) for o in options)
    shared = _Shared(M, T)
    last_error: Optional[BaseException] = None

    @functools.cache
    def moved_tol() -> np.ndarray:
        """``rhs_tol`` per point (a callable's value computed once, when first needed)."""
        tol = rhs_tol() if callable(rhs_tol) else rhs_tol
        return np.broadcast_to(np.asarray(tol, dtype=float), (k,))

    # the exact problem first; its right-hand sides moved (``rhs_tol``) only where it has
    # no certified answer: a moved answer differs from an exact one by what it moved.
    # Lemke's readings polygon by polygon, each exact then moved: where dependent rows'
    # right-hand sides disagree (a humanoid lying on nine points, its rows inconsistent by
    # 4e-9 m/s^2), every exact reading fails, and the finer polygons' exact attempts cost
    # seconds (their sliding combinations' Newton solves) before a moved octagon's certifies
    tols = (False, True) if rhs_tol is not None else (False,)
    polygons = (_POLYGON,) if quick else (_POLYGON,) + _POLYGON_REFINED
    compliances = _LCP_RETRIES[:1] if quick else _LCP_RETRIES

    readings: list = []

    def lcp_states() -> list:
        # the first reading with the combinations it leaves open (their best by the
        # preferences: the state continued where it may), then every other reading's own
        # states, then those with their open combinations: where the octagon's reading is
        # off, its open combinations (32 on MuJoCo's humanoid landing on eleven points,
        # each a Newton solve of its slide directions) certified none, at each
        # compliance, exact and moved (4 s), before the 16-gon's own reading certified
        order = [(nd, with_tol, compliance) for nd in polygons for with_tol in tols
                 for compliance in compliances]
        for key, wide in [(order[0], True)] + [(o, False) for o in order[1:]] + [
                (o, True) for o in order[1:]]:
            nd, with_tol, compliance = key
            got = _by_lcp_cone(M, F, A, b, G, h, T, s, mu, known, weld, options, prefer,
                               release, score_opts, shared,
                               moved_tol() if with_tol else None, compliance, nd, readings,
                               wide)
            if got is not None:
                return [got]
        return []

    def near_readings() -> list:
        """The first certified combination (best first) that differs from a state read
        from the polygons in one point's mode, where none of those states certified and
        the combinations are too many to try: dm_control's humanoid landing on its feet
        beside eleven other touching points (13 points, 3^13 combinations), posed exactly,
        is read with its seat's second point lifting, where the circular cones need it
        sliding. (With its right-hand sides moved by the velocity tolerance, the reading
        itself certifies: the point lifting at a rest-level rate.)"""
        tol = moved_tol() if rhs_tol is not None else None
        seen = set(readings)
        near = []
        for r in dict.fromkeys(readings):
            for i in range(k):
                for o in options[i]:
                    mode = r[:i] + (int(o),) + r[i + 1:]
                    if mode not in seen:
                        seen.add(mode)
                        near.append(mode)
        near.sort(key=lambda c: _score_cone(c, prefer, release, score_opts))
        got = _first_certified(M, F, A, b, G, h, T, s, mu, known, weld, shared, tol, options,
                               near[:MAX_COMBINATIONS])
        return [] if got is None else [got]

    def every_combination(tol) -> list:
        """The certified combinations, their right-hand sides moved by at most ``tol``."""
        nonlocal last_error
        out = []
        for mode in itertools.product(*options):
            mode = np.array(mode, dtype=int)
            try:
                got = _solve_mode(M, F, A, b, G, h, T, s, mu, mode, known, weld, shared, tol=tol)
            except (GaussoptError, np.linalg.LinAlgError) as e:
                last_error = e
                continue
            if got is not None:
                out.append((mode, *got))
        return out

    found = lcp_states() if total > ENUMERATE_MAX else []
    if not found and total > ENUMERATE_MAX and quick:
        raise ContactSolveError(
            f"the contact problem of {k} points: Lemke's algorithm on the octagonal cones "
            "found no certified state (quick attempt: the refined polygons and the "
            "combinations near the readings not tried).", labels)
    if not found and total > MAX_COMBINATIONS:
        found = near_readings()
    if not found and total <= MAX_COMBINATIONS:
        found = every_combination(None)
        if not found and rhs_tol is not None:
            found = every_combination(moved_tol())
    if not found and total > MAX_COMBINATIONS:
        raise ContactSolveError(
            f"the contact problem of {k} points has {total} combinations of modes: Lemke's "
            "algorithm on the polyhedral cones found no certified solution, nor did the "
            "combinations one point's mode away from its readings, and they are "
            f"more than MAX_COMBINATIONS={MAX_COMBINATIONS} to try one by one.", labels)
    if not found:
        detail = f" (last failure: {type(last_error).__name__}: {last_error})" if last_error \
            else ""
        raise ContactSolveError(
            "no set of active contact points satisfies the contact conditions (forces >= 0 and "
            "inside their circular friction cones, gaps not closing, slips against their "
            "friction, complementarity): the contact problem has no solution here. Points: "
            f"{', '.join(labels)}{detail}.", labels)
    if len(found) > 1:
        found = _one_per_family(found, A, G, T)
    if len(found) > 1 and persist:
        # the caller's state continued (as the event announced it) where it is admissible
        mine = [f for f in found if _score_cone(f[0], prefer, release, score_opts)[:3]
                == (0, 0, 0)]
        if len(mine) == 1:
            found = mine
    if len(found) > 1:
        same_motion([f[1].got[0] for f in found], [f[0] for f in found], labels)
    best = found[0] if len(found) == 1 else min(
        found, key=lambda f: (*_score_cone(f[0], prefer, release, score_opts),
                              float(np.linalg.norm(f[2]))))
    mode, combo, z, Z, points, indet, dirs = best
    x = combo.got[0]
    m = A.shape[0]
    nu, tau = np.zeros(k), np.zeros((k, 2))
    direction = np.zeros((k, 2))
    nc = len(combo.closed)
    closed, trows = combo.closed, combo.trows
    nu[closed] = z[m:m + nc]
    tau[trows] = z[m + nc:m + nc + 2 * len(trows)].reshape(-1, 2)
    # the closed points without no-slip rows that slide along a direction
    sticking = set(trows)
    other = np.array([i for i in closed if i not in sticking], dtype=int)
    along = other[np.any(dirs[other] != 0, axis=1) & (mu[other] > 0) & (mu[other] < math.inf)]
    tau[along] = -(mu[along] * nu[along])[:, None] * dirs[along]
    direction[along] = dirs[along]
    slack = G @ x - h
    slip = np.einsum("kjn,n->kj", T, x) - s
    nu_tol, slack_tol = _scales(M, F, G, h, x)
    prod = np.abs(nu * slack) / np.maximum(nu_tol * slack_tol * 1e4, 1e-300)
    return ContactSolution(x=x, active=np.asarray(mode) != OPEN, nu=nu, tau=tau, lam=z[:m],
                           slack=slack, defect=float(prod.max(initial=0.0)),
                           mode=np.asarray(mode).copy(), indeterminate=bool(indet), slip=slip,
                           direction=direction)
