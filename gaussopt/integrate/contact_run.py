"""The event-driven run of a system with contacts: phases, impacts, lift-offs, accumulations.

Unilateral contact: lift-off, landing and impacts, by Gauss's principle.

A contact point may push but never pull: its gap ``g(t, q) >= 0``, and its
normal force ``N >= 0`` vanishes unless the gap is closed (complementarity).
Gauss's principle takes such sign conditions as they are: the accelerations
minimize the Gauss function subject to the bilateral rows *and* the
unilateral rows ``g'' >= 0`` of the closed points, a quadratic program whose
optimality conditions are the complementarity conditions. gaussopt treats
contacts *event-driven* (the "hard contact" school of Pfeiffer and Glocker),
never by penalties or softened constraints:

* a run is a sequence of smooth phases, each integrated by
  :func:`gaussopt.simulate` with the closed points as bilateral rows (so every
  trust guarantee of a smooth run holds inside a phase);
* an open point's closing (``g = 0`` with ``g' < 0``) and a closed point's
  lift-off (``N = 0``, decreasing) are terminal events, located on the dense
  output to ``4 eps`` in time;
* at a closing the impact is resolved by the same principle at the velocity
  level: ``v+`` minimizes ``1/2 (v+ - v-)^T M (v+ - v-)`` subject to the
  bilateral velocity constraints and Newton's law ``g'+ >= -e g'-`` with
  complementarity on the impulses, for every point that touches at once (a point
  touches within the run's gap tolerance, ``1e3 (atol + rtol max|q|)``, of its surface,
  unless lower touching points hold it off: the corners where two boxes of one body meet
  with a step of micrometres, :func:`_touching`);
* after every event (an impact, a closing, a lift-off, a stick-slip transition) the
  state of every touching point -- open or closed, sticking or sliding -- is decided
  by one contact problem for all points at once
  (:func:`gaussopt.gauss.contact_problem.solve_contact`: the planar LCP of Pfeiffer
  and Glocker with Coulomb friction: every combination of point states tried and
  certified, or, for many points, Lemke's algorithm with its answer certified).

Impact laws
-----------
``contact_options={"impact_law": "newton"}`` (the default) resolves an impact of several
touching points by the generalized Newton law at all of them at once, as above (a
Newton's cradle of three touching balls with ``e = 1`` gives ``(-1/3, 2/3, 2/3) v0``);
``"sequential"`` resolves it as binary impacts, one point at a time, the most negative
gap rate first (:func:`_sequential_impact`; the cradle gives ``(0, 0, v0)``). The end of
an accumulation of impacts is resolved at once under either law.

Accumulation of impacts (Zeno)
------------------------------
A bouncing body with ``0 < e < 1`` comes to rest after infinitely many impacts
in finite time. A rebound whose apex ``g'^2 / (2 |g''|)`` lies below
``zeno_height`` (default a hundred times the integrator's position tolerance,
``100 (atol + rtol max|q0|)``) is not integrated: that impact is made plastic
at the point, which then closes. What is approximated: the remaining flights,
whose heights are below ``zeno_height`` and whose durations add up to
``2 u / (|g''| (1 - e))`` (``u`` the last rebound velocity; for the default
tolerances microseconds); the point rests from the last resolved impact on,
and ``Impact.t_accumulation`` gives the extrapolated accumulation time. In
space with many touching points the rest sets are tried with the contact
problem's quick attempt (the octagonal cones' readings): the end is a shortcut,
and where none certifies so the impact is the generalized Newton law's and the
accumulation goes on.

Friction
--------
A ``slip(t, q)`` function per point gives the slip rate ``T v + slip_t``; a friction
force is its component along ``T`` (along the increasing slip coordinate: a point
slipping towards ``+`` feels ``-mu N``). ``friction=float("inf")``: the point does not
slip while closed or impacting (a sticking corner, rolling without slip); the
tangential force is the multiplier of the slip row. A finite ``mu`` (planar point
contacts): a closed point at rest tangentially sticks while its force lies in the cone
``|T| <= mu N`` (two events watch the cone's edges) and otherwise slides against it; a
sliding point carries ``T = -mu N s`` (``s`` the sign of its slip rate), a force that
depends on the normal force, so each right-hand side solves the accelerations and ``N``
together (a non-symmetric KKT system; the Gauss step of the phase then reproduces the
same ``N``); the slip rate's return to zero is an event. At every event the stick/slip
and open/closed states of *all* touching points are decided together by the contact
problem (exact for any number of planar points), and an impact's impulses obey
Newton's and Coulomb's laws together (the final impact of an accumulation included).
A sliding point whose normal acceleration does not grow with its normal force
(Painleve's paradox) has no determined motion: :class:`~gaussopt.ContactSolveError`.

Indeterminate forces: where the rows of the closed points are dependent (two sticking
corners of a box on a plane: only the sum of their friction forces is determined; a
ladder sticking at a rough wall and floor) the phase runs while *some* distribution of
those points' forces lies in every cone -- one event watches the largest margin of such
a distribution (:func:`~gaussopt.gauss.contact_problem.max_margin`; in space a cone
program, evaluated only where the last distribution found no longer proves a positive
margin), never each point's share alone -- and the forces reported are the least-norm
distribution inside every cone; ``meta["contact_indeterminate"]`` lists those phases.

Degenerate states: where several states give the same motion at an event (a point
touching with zero force and zero gap acceleration, a force on its cone's edge) the
change the event announced is taken, else the previous state; a force or cone margin
that starts at zero within rounding is watched with an offset of its rounding scale,
and an open point resting on its surface at ``gap + 1e-3 gap_tol`` until its gap has
grown past that offset (then at its gap: its next landing is located where the gap is
zero), so that rounding noise is no event; a point leaving its surface from a gap
within the gap tolerance (above or below zero) lands where its gap returns to that
start, and one that the projection of the phase's start puts below it by at most that
offset is watched relative to that dip (:func:`_gap_event`). An event at the end of
the span is resolved (an impact there is recorded) and the run ends with a zero-length
last phase. A gap that is an unsigned distance (:attr:`gaussopt.Contact.unsigned`: a
sphere or capsule against another, positive again once one has passed through the
other within a step) is also watched at interior points of the steps, as the force
events below.

Force events (a normal force reaching zero, a friction force reaching the
cone) are also checked at interior points of each step (``interp_points``):
the forces of a point at rest may vary with time while its state does not,
and the integrator's steps then grow long. A step that error control limited
(:meth:`~gaussopt.integrate.engine_run.Run.resolved`) is first screened
(``interp_screen``): the force at the step's middle, on the interpolant before
projection, and the parabola through it and the ends; the interior points are
checked only where that parabola comes within its own curvature term of zero.
Away from lift-off a closed-contact step then costs two force evaluations (its end
and its middle) instead of eleven. Where the interior points do not resolve a force
near zero (three consecutive values whose parabola comes within its curvature term
of zero) they are refined (:meth:`~gaussopt.integrate.dense_output.EventTracker._scan`):
a resting point under a push that oscillates within one long step lifts off at its
first dip (before: a 2 ms dip inside a 0.1 s step, between the even points, was
missed). Sampling stays sampling: a force whose samples all look alike (a period that
divides the spacing of every refinement) can still hide a dip.

``dense_output=True`` gives ``traj.sol`` (:class:`ContactDenseSolution`): the
phases' dense solutions in turn, continuous from the right at an impact.

Spatial point contacts (``Contact(slip_velocity=...)``, two tangents per point, the
circular cone ``|t| <= mu N``): a sticking point has two no-slip rows (velocity
level); a sliding one carries ``-mu N u/|u|`` along its slip velocity ``u``, a force of
the phase's smooth run (continued by the direction the contact problem gave where
``u`` starts from zero, :func:`_slip_direction`); the watches are ``mu N - |t|`` (slip
onset) and ``u . d`` with ``d`` the slip's direction at the start of each step
(``|u|`` never changes sign; ``u . d`` is ``|u|`` at the step's start and crosses zero
where ``u`` vanishes; the watch chooses its ``d`` anew after every step, the tracker's
``rebase``). Beyond that zero the force is continued as ``-u/|u|`` where ``u . d < 0``
(:func:`_continued_direction`): ``u/|u|`` itself flips there and pushes the slip back,
and the run would chatter at zero slip in steps of rounding size instead of crossing it
(the tippe top's slip, turning with its precession, did so in 1e-12 s steps with the
watch rebased and the force not continued). Before, ``d`` was the direction at the
phase's start and a phase ended at every quarter turn of the slip (99 phases in the
tippe top's 1.2 s, now 2). A slide that starts from rest (``|u| <= vel_tol``, the run's
own "at rest") carries ``-mu N d0`` along the direction the contact problem gave,
*locked*, while its slip stays along it: ``u/|u|`` there would make the run stiff (the
sideways slip is damped at the rate ``mu N / (m |u|)``, unbounded while ``u`` grows from
zero, and an explicit integrator's steps shrink with ``|u|``: a cube pushed through its
cone's edge took 2e-11 s steps). The lock ends (event ``"turn"``) when the slip across ``d0``
reaches ``2 vel_tol``; the slide then continues with ``u/|u|``
(:func:`_slip_turn_event`). The same stiffness makes a slide with ``u/|u|`` that slows
without stopping (a load held on its cone's edge) crawl: a phase with such a slide below
``100 vel_tol`` whose friction turns the slip a hundred times faster than the slip changes
by its own size (the stiffness ratio of :func:`_slip_stiff_event`; near 1 for a slide that
friction decelerates to its stop, which stays explicit) is integrated by Radau instead of
the run's explicit method (a "stiff" event switches within a phase;
``meta["contact_implicit"]`` lists those phases), with the same force. Events and impacts
are decided by :func:`gaussopt.gauss.contact_cone.solve_contact_cone`. ``friction_forces`` then has
shape (N, k, 2) and ``Impact.tangential_impulses`` (k, 2), along the two tangents of
``slip_velocity``. Frictional planar (``slip``) and spatial contacts in one system are
not supported.

Right-hand sides moved: where points held at rest within ``vel_tol`` have dependent rows
(a body lying on several points), the exact problem's rows may disagree by what that
tolerance allows (at impacts, velocities; at events, accelerations: the rows' turning
rate times ``vel_tol``, :func:`_rhs_tolerance`); only where the exact problem has no
certified state, the least change of them that makes the rows consistent is solved
(:func:`~gaussopt.gauss.contact_cone.solve_contact_cone`'s ``rhs_tol``). Its answer is
exact for right-hand sides the run cannot tell apart from the ones posed.

Not supported yet: contact problems that Lemke's algorithm does not solve (nor the
combinations one point's mode away from its readings) with more than
:data:`~gaussopt.gauss.contact_problem.MAX_COMBINATIONS` combinations of point states,
user ``events`` together with contacts, nonlinear nonholonomic constraints together
with contacts (an impact needs velocity constraints affine in ``v``).

References
----------
F. Pfeiffer, C. Glocker, *Multibody Dynamics with Unilateral Contacts*,
Wiley 1996. G. W. Housner, "The behavior of inverted pendulum structures
during earthquakes", Bull. Seismol. Soc. Am. 53 (1963) 403-417.
"""

from __future__ import annotations

import bisect
import math
import time

from typing import Any, Callable, Optional, Sequence

import numpy as np
from scipy.linalg.lapack import dgecon as _gecon, dgetrf as _getrf, dgetrs as _getrs

from gaussopt.model.constraints import Holonomic, check_derivatives_near
from gaussopt.integrate.dense_output import evaluation_times
from gaussopt.core.exceptions import GaussoptError, ModelError, UnsupportedConstraintError
from gaussopt.gauss.solution import solve_gauss
from gaussopt.core.result import Impact, Trajectory
from gaussopt.core.settings import DEFAULT_RANK_TOL
from gaussopt.gauss.solve_step import _cached_solver, solve_step
from gaussopt.model.system import System
from gaussopt.integrate.options import RunOptions
from gaussopt.integrate.guards import InterruptGuard
from gaussopt.gauss.contact_problem import (CLOSED, OPEN, SLIDE_NEG, SLIDE_POS, STICK,
                                            ContactSolveError, admissible, in_span, max_margin,
                                            selected_kkt, self_stresses, solve_contact)
from gaussopt.gauss.contact_cone import (_SOCP_TOL, best_distribution, cone_slack,
                                         least_norm, least_norm_in_cones,
                                         solve_contact_cone)
from gaussopt.model.contact import ContactPoints

__all__ = ["simulate_contacts", "Impact", "contact_step", "ContactDenseSolution"]

_EPS = float(np.finfo(float).eps)
#: phases that may end at the time they started (simultaneous transitions) before the
#: run is declared stuck
_MAX_ZERO_PHASES = 25
#: interior points of each step at which the sign of a force event is also checked: the
#: forces of a point at rest may change with an explicit time dependence that the
#: integrator's error control does not see (its state does not move), so its steps can
#: grow long enough to hold a pair of zeros
_INTERP = 10


class _Model:
    """The system without its contacts, the contact points, and the phase systems."""

    def __init__(self, system: System, t: float, q: np.ndarray):
        self.system = system
        self.points = P = ContactPoints(system.contacts, t, q)
        self.k = P.k
        self.base = self._system(())
        self._phases: dict = {}

    def _system(self, extra: Sequence[Holonomic], name: str = "",
                force: Optional[Callable] = None) -> System:
        s = self.system
        cons = [c for c in s.constraints if c.kind != "contact"] + list(extra)
        sysp = s.with_constraints(cons, force=force, name=name)
        if extra or name:
            # a phase: its rows are the base's constraints and the contacts' functions,
            # whose derivatives the run checked where it started (simulate_contacts)
            sysp._verified = frozenset(map(id, cons))
        return sysp

    def phase(self, closed: np.ndarray, sdir: np.ndarray, d0: Optional[np.ndarray] = None,
              locked: Optional[np.ndarray] = None) -> tuple[System, list[int], list[int]]:
        """The system of a phase: the closed points as bilateral normal rows, the sticking
        frictional ones with their no-slip rows, the sliding ones (``sdir`` = sign of the
        slip rate) with the Coulomb force ``-mu N sdir`` along their slip gradient. Returns
        it with the row indices (normal, tangential: -1 if none) of the closed points and
        the sliding spatial points' reference directions (a :class:`_SlipReference`, or
        None: see :func:`_coulomb_force`; the phase's slip watches move them).

        A spatial point (``slip_velocity``) sticks with two no-slip rows (the first one's
        index is returned) and slides (``sdir = 1``) with ``-mu N u/|u|`` along its slip
        velocity ``u`` (``d0``: its unit slip direction at the phase's start, which
        decides the direction where ``u`` starts from zero); ``locked`` (bool per point):
        the sliding spatial points that carry ``-mu N d0`` along ``d0`` itself (a slide
        from rest, while its slip stays along ``d0``: :func:`_coulomb_force`)."""
        key = tuple(np.flatnonzero(closed))
        dirs = tuple(int(sdir[i]) for i in key)
        P = self.points
        spatial_slide = any(d != 0 and P.dim[i] == 2 for i, d in zip(key, dirs))
        lock = tuple(bool(locked[i]) for i in key) if locked is not None else ()
        got = self._phases.get((key, dirs, lock)) if not spatial_slide else None
        if got is not None:
            return got
        # consecutive points of one contact share one constraint (rows in the same order)
        extra = [P.holonomic(run) for run in _runs(P, key)]
        sticking = [i for i, d in zip(key, dirs) if P.frictional[i] and d == 0]
        extra += [P.no_slip(run) if P.dim[run[0]] == 2 else P.holonomic(run, tangent=True)
                  for run in _runs(P, sticking)]
        name = ", ".join(P.labels[i] + ("" if d == 0 else (" sliding +" if d > 0 else " sliding -"))
                         for i, d in zip(key, dirs))
        name = name + " closed" if key else "contacts open"
        m = _row_count(self.base)
        n_rows = list(range(m, m + len(key)))
        t_rows = [-1] * len(key)
        width = [2 if P.dim[i] == 2 else 1 for i in sticking]
        for j, i in enumerate(key):
            if i in sticking:
                t_rows[j] = m + len(key) + sum(width[:sticking.index(i)])
        sliding = [(i, d, n_rows[j]) for j, (i, d) in enumerate(zip(key, dirs)) if d != 0]
        force = _coulomb_force(self, extra, sliding, d0, locked) if sliding else None
        sysp = self._system(extra, name, force)
        got = (sysp, n_rows, t_rows, None if force is None else force.reference)
        if not spatial_slide:
            # (a spatial slide's phase is its own: its force's reference directions move
            # with the run, :func:`_coulomb_force`)
            self._phases[(key, dirs, lock)] = got
        return got

    def velocity_rows(self, t, q, v) -> tuple[np.ndarray, np.ndarray]:
        """``(B, c)`` with ``B v + c = 0`` the bilateral velocity constraints (affine in v)."""
        base = self.base
        B = base.velocity_rows(t, q, v)
        c = base.velocity_residual(t, q, np.zeros_like(v))
        return B, c


def _runs(P: ContactPoints, points: Sequence[int]) -> list[list[int]]:
    """``points`` cut into runs of consecutive points of one contact."""
    out: list[list[int]] = []
    for i in points:
        i = int(i)
        if out and P.owner[out[-1][-1]] == P.owner[i]:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _kkt_nonsymmetric(M, F, A, b, W, select: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(x, lam)`` of ``M x - W^T lam = F``, ``A x = b`` (``W = A`` but for the sliding
    points' rows ``G_i - mu s T_i``), least squares (singular ``M``, redundant rows).
    ``select``: the rows are dependent (a box sliding flat on four corners), and the
    multipliers carry no self-stress of them
    (:func:`~gaussopt.gauss.contact_problem.selected_kkt`: the rigid limit of equally
    stiff points, the contact problem's own rule), which decides the motion where the
    sliding friction makes it depend on them."""
    if select:
        sel = selected_kkt(M, F, A, W, b)
        if sel is not None:
            return sel
    n, m = M.shape[0], A.shape[0]
    K = np.zeros((n + m, n + m))          # (filled by slices: np.block costs 5x more here)
    K[:n, :n] = M
    K[:n, n:] = -W.T
    K[n:, :n] = A
    z = _square_solve(K, np.concatenate([F, b]))
    return z[:n], z[n:]


def _square_solve(K: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The minimum-norm least-squares solution of ``K z = r`` (square ``K``), as numpy's
    ``lstsq`` gives it (its SVD, its cut-off ``eps n`` of the largest singular value),
    by an LU factorization where ``K`` is well away from that cut-off: LAPACK's estimate
    of its reciprocal condition number (``gecon``, within a factor ``n`` of the true one)
    above ``1e3 n eps``, where the two solutions differ by rounding. Why: a sliding
    phase's force solves its KKT system at every evaluation, and on MuJoCo's humanoid (n
    + m = 60) the SVD cost 0.2 ms of each, the LU 0.03 ms."""
    n = K.shape[0]
    if n:
        lu, piv, info = _getrf(K)
        if info == 0:
            rcond, info2 = _gecon(lu, float(np.abs(K).sum(axis=0).max()))
            if info2 == 0 and rcond > 1e3 * n * _EPS:
                z, info3 = _getrs(lu, piv, r)
                if info3 == 0 and np.all(np.isfinite(z)):
                    return z
    return np.linalg.lstsq(K, r, rcond=None)[0]


def _coulomb_force(model: "_Model", extra: Sequence[Holonomic], sliding: list,
                   d0: Optional[np.ndarray] = None, locked: Optional[np.ndarray] = None
                   ) -> Callable:
    """``F - sum_i mu_i s_i N_i T_i^T`` with the normal forces ``N_i`` of the sliding points
    solved together with the accelerations (the friction force depends on ``N``).

    A spatial point's ``s_i T_i`` is ``e_i^T T_i`` with ``e_i`` the unit direction of its
    slip velocity ``u_i`` (:func:`_slip_direction`), or ``d0_i`` itself for a ``locked``
    point (a slide from rest while its slip stays along ``d0_i``): ``u/|u|`` would make
    the force's derivative across the slip ``mu N / |u|``, unbounded where ``u`` starts
    from zero, the run stiff; along ``d0`` the two agree while the slip across it stays
    below the event's ``2 vel_tol`` (:func:`_slip_turn_event`)."""
    P, base = model.points, model.base
    cons = list(base.equalities) + list(extra)
    spatial = any(P.dim[i] == 2 for i, _, _ in sliding)
    d0 = np.array(d0, dtype=float) if d0 is not None else np.zeros((P.k, 2))
    locked = np.zeros(P.k, dtype=bool) if locked is None else np.array(locked, dtype=bool)
    # the sliding spatial points' reference directions: d0, then the slip's direction at
    # each step's start (moved by the phase's slip watch, _slip_dir_event)
    ref = _SlipReference(d0)

    def columns(t, q, v):
        """``(M, F, A, b, W, T)``: the phase's rows ``A`` and its force columns ``W``."""
        F = base.force(t, q, v)
        M = base.mass(t, q)
        parts = [c.rows(t, q, v) for c in cons]
        A = np.concatenate([p[0] for p in parts])
        b = np.concatenate([p[1] for p in parts])
        T, _, _ = P.tangent_rows(t, q, v)
        if spatial:
            T2, c2, _ = P.cone_rows(t, q, v)
            for i, _, _ in sliding:
                if P.dim[i] == 2:
                    e = d0[i] if locked[i] else _continued_direction(T2[i] @ v + c2[i],
                                                                     ref.at(i, t), v, T2[i])
                    T[i] = e @ T2[i]
        W = A.copy()
        for i, d, row in sliding:
            W[row] -= P.mu[i] * d * T[i]
        return M, F, A, b, W, T

    #: whether the phase's rows are dependent (decided once, at its first evaluation: a
    #: face's corners are dependent wherever they touch), so that one rule gives the
    #: multipliers over the whole phase: switched by a rank decision evaluation by
    #: evaluation, the force was not smooth where every corner slides along one direction
    #: (the self-stress then does no work and the rank is decided on rounding), and a
    #: cube's slide took 62 steps instead of 10
    dependent: list = []

    def solve(M, F, A, b, W):
        if not dependent:
            dependent.append(A.shape[0] > 1 and self_stresses(A).shape[1] > 0)
        return _kkt_nonsymmetric(M, F, A, b, W, select=dependent[0])

    #: the last state solved, ``(key, (M, F, A, b, W, T), (x, lam))``: the phase's watches
    #: (:func:`_slip_stiff_event`, :class:`_PhaseForces`) read the state of the step's end,
    #: which the integrator has just evaluated (MuJoCo's humanoid: 95 % of their calls)
    last: list = [None, None, None]

    def solved(t, q, v):
        """``(columns, (x, lam))`` at the state, solved once per state."""
        key = (float(t), np.asarray(q).tobytes(), np.asarray(v).tobytes(), ref.version)
        if last[0] != key:
            cols = columns(t, q, v)
            got = solve(*cols[:5])
            # (kept: copies, read-only, whatever buffers the model returned)
            cols, got = tuple(_frozen(a) for a in cols), tuple(_frozen(a) for a in got)
            last[:] = [key, cols, got]
        return last[1], last[2]

    def force(t, q, v):
        (M, F, A, b, W, T), (_, lam) = solved(t, q, v)
        out = np.array(F, dtype=float)
        for i, d, row in sliding:
            out -= P.mu[i] * d * lam[row] * T[i]
        return out

    def balance(t, q, v):
        """``(lam, W)``: the multipliers of the phase's own balance ``M a - F = W^T lam``
        (each sliding point's friction carried by its own normal force) and the force
        columns ``W``; :class:`_PhaseForces` distributes indeterminate forces over
        ``null(W^T)``."""
        cols, (_, lam) = solved(t, q, v)
        return lam, cols[4]

    rows = {i: row for i, _, row in sliding}

    def stiffness(t, q, v, i):
        """``(mu N w, |a_par|)`` of sliding spatial point ``i``: the acceleration its friction
        gives its slip across the slip's direction per unit turn of that direction (``w``
        = ``e_perp^T T_i y`` with ``y`` the phase's response to a unit force ``T_i^T
        e_perp``: the point's mobility across its slip under the phase's rows), and the
        slip's own acceleration along its direction. Their ratio is the stiffness of the
        slide over the time the slip takes to change by its own size (:func:`_slip_stiff_event`)."""
        (M, F, A, b, W, _), (x, lam) = solved(t, q, v)
        T2, c2, gam2 = P.cone_rows(t, q, v)
        Ti = T2[i]
        u = Ti @ v + c2[i]
        s = float(np.hypot(u[0], u[1]))
        if not s > 0.0:
            return 0.0, 0.0
        e = u / s
        perp = np.array([-e[1], e[0]])
        a_par = abs(float(e @ (Ti @ x - gam2[i])))
        # (the response to a unit force across the slip: the phase's KKT with W = A)
        y = _kkt_nonsymmetric(M, Ti.T @ perp, A, np.zeros(A.shape[0]), A)[0]
        w = max(float(perp @ (Ti @ y)), 0.0)
        return float(P.mu[i]) * abs(float(lam[rows[i]])) * w, a_par

    force.balance = balance
    force.stiffness = stiffness
    force.reference = ref
    return force


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only copy of ``a``."""
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


class _SlipReference:
    """The reference directions of a phase's sliding spatial points, step by step: ``d0``
    from the phase's start, then the slip's direction at each accepted step's start
    (:meth:`move`, by the point's slip watch). :meth:`at` gives the one of the step holding
    ``t``, so that the phase's force evaluated again at an earlier time (its output
    samples, after the run) is the one the run integrated."""

    def __init__(self, d0: np.ndarray) -> None:
        k = len(d0)
        self.t: list = [[-math.inf] for _ in range(k)]
        self.d: list = [[np.array(d0[i], dtype=float)] for i in range(k)]
        #: counts the moves: what was computed from the directions before a move is stale
        #: (:class:`_PhaseForces`' multipliers at a state)
        self.version = 0

    def at(self, i: int, t: float) -> np.ndarray:
        ts = self.t[i]
        if t >= ts[-1]:
            return self.d[i][-1]
        return self.d[i][bisect.bisect_right(ts, t) - 1]

    def move(self, i: int, t: float, d: np.ndarray) -> None:
        """From ``t`` on, point ``i``'s reference is ``d`` (``t`` after every earlier one)."""
        self.version += 1
        if t > self.t[i][-1]:
            self.t[i].append(float(t))
            self.d[i].append(np.array(d, dtype=float))
        else:
            self.d[i][-1] = np.array(d, dtype=float)


def _continued_direction(u: np.ndarray, d: np.ndarray, v: np.ndarray,
                         Ti: np.ndarray) -> np.ndarray:
    """The friction direction of a sliding spatial point, continued past the slip's stop:
    ``u/|u|`` (:func:`_slip_direction`) where ``u . d >= 0``, ``-u/|u|`` beyond, ``d`` the
    reference direction of the step (the slip's at its start).

    Why: the slide's phase ends where ``u`` vanishes (``u . d`` crosses zero), and the
    integrator must be able to step across that point to find it. ``u/|u|`` itself flips
    there, and the flipped force pushes the slip back: ``u . d`` then never changes sign,
    the steps shrink to rounding and the slip chatters at zero. Continued, the force is
    continuous where the slip stops along a direction (``u ~ (t* - t) c d*``: ``u/|u|``
    before and ``-u/|u|`` after both tend to ``d*``), so the step across it is accepted
    and the root is found; before the stop nothing changes."""
    e = _slip_direction(u, d, v, Ti)
    return -e if float(u[0] * d[0] + u[1] * d[1]) < 0.0 else e


def _slip_direction(u: np.ndarray, d0: np.ndarray, v: np.ndarray, Ti: np.ndarray) -> np.ndarray:
    """The unit direction of a spatial point's slip velocity ``u``, continued by ``d0`` (the
    direction the contact problem gave at the phase's start) where ``u`` vanishes: the
    direction of ``u + delta d0`` with ``delta`` the rounding scale of ``u`` (``1e2 eps
    |T| |v|``), so that a slide starting from rest (``u = 0``, growing along ``d0``) has
    a defined and continuous force. Elsewhere the change is ``delta / |u|``, rounding."""
    delta = 1e2 * _EPS * (1.0 + float(np.abs(Ti).max(initial=0.0)) * float(
        np.abs(v).max(initial=0.0)))
    w = u + delta * d0
    nw = float(np.hypot(w[0], w[1]))
    return w / nw if nw > 0 else np.array(d0, dtype=float)


def _row_count(system: System) -> int:
    counts = system._row_counts
    if counts is None:
        raise ModelError("internal: the base system's rows are counted by its check")
    return int(sum(counts))


def _kinetic(M: np.ndarray, v: np.ndarray) -> float:
    return 0.5 * float(v @ (M @ v))


def _check_affine(model: _Model, t, q, v) -> None:
    """Impacts need velocity constraints affine in v (a jump of v must keep them)."""
    for c in model.base.nonholonomic:
        if not c.is_affine(t, q, v):
            raise UnsupportedConstraintError(
                f"constraint {c.name!r} is not affine in the velocities: an impact (a jump of v) "
                "has no well-defined velocity constraint; contacts need holonomic or affine "
                "nonholonomic constraints.")


def contact_step(model: "_Model", t: float, q: np.ndarray, v: np.ndarray,
                 candidates: np.ndarray, start: Sequence[int] = (),
                 prefer: Optional[np.ndarray] = None, release: Sequence[Sequence[int]] = (),
                 vel_tol: Optional[np.ndarray] = None, persist: bool = False):
    """The contact problem of the candidate points at the acceleration level, all together
    (:func:`gaussopt.gauss.contact_problem.solve_contact`): which close, which stick, which
    slide. A frictional point whose slip rate exceeds ``vel_tol`` slides with its sign;
    the others may stick or start to slide. ``prefer`` (a mode per point, all points) and
    ``release`` (groups of point indices) as there; ``persist``: points in space, where
    several certified states move differently, the one that is ``prefer`` is taken
    (:func:`~gaussopt.gauss.contact_cone.solve_contact_cone`). Returns ``(idx, sol)``: the
    candidates' indices and the solution over them."""
    P = model.points
    M, F, A, b = model.base.evaluate(t, q, v)
    G, _, gam = P.normal_rows(t, q, v)
    T, ct, gamt = P.tangent_rows(t, q, v)
    idx = np.flatnonzero(candidates)
    slide = _slide_signs(P, T @ v + ct, vel_tol)
    pos = {int(i): j for j, i in enumerate(idx)}
    if prefer is None:
        prefer = np.full(P.k, -1)
        prefer[[i for i in start if i in pos]] = CLOSED
    rel = [[pos[i] for i in grp if i in pos] for grp in release]
    if P.spatial:
        T2, c2, gam2 = P.cone_rows(t, q, v)
        sol = solve_contact_cone(M, F, A, b, G[idx], gam[idx], T2[idx], gam2[idx], mu=P.mu[idx],
                                 slide=_slide_directions(P, T2, c2, v, vel_tol)[idx],
                                 prefer=np.asarray(prefer)[idx], release=rel,
                                 labels=[P.labels[i] for i in idx], persist=persist,
                                 rhs_tol=None if vel_tol is None else
                                 (lambda: _rhs_tolerance(P, t, q, v, idx, vel_tol, G, T2)))
        return idx, sol
    sol = solve_contact(M, F, A, b, G[idx], gam[idx], T[idx], gamt[idx], mu=P.mu[idx],
                        slide=slide[idx], prefer=np.asarray(prefer)[idx], release=rel,
                        labels=[P.labels[i] for i in idx])
    return idx, sol


def _start_phase(model: "_Model", t: float, q: np.ndarray, v: np.ndarray, closed: np.ndarray,
                 sdir: np.ndarray, idx, sol, vel_tol: np.ndarray, gap_tol: float,
                 touching: np.ndarray, settle_tol: Optional[float]):
    """The phase a contact state starts: ``(sysp, n_rows, t_rows, ref, q, v, d0, locked)``,
    with ``(q, v)`` settled onto its rows (:func:`_settle`, then checked against
    ``settle_tol``; the caller's own initial state is not: ``settle_tol`` None), ``d0``
    the sliding spatial points' directions from the contact problem's ``sol`` over the
    points ``idx``, and ``locked`` those of them that slide from rest (:func:`_locked`)."""
    P = model.points
    d0 = np.zeros((P.k, 2))          # spatial sliding points: the slip direction now
    locked = np.zeros(P.k, dtype=bool)     # ... sliding from rest: along d0 itself
    spatial_slide = P.spatial and sol is not None
    if spatial_slide:
        d0[idx] = sol.direction
        locked = _locked(P, t, q, v, closed, sdir, vel_tol)
    sysp, n_rows, t_rows, ref = model.phase(closed, sdir, d0, locked)
    if settle_tol is None:
        return sysp, n_rows, t_rows, ref, q, v, d0, locked
    q, v = _settle(sysp, P, t, q, v, closed, n_rows, gap_tol, float(vel_tol.max(initial=0.0)),
                   touching, sdir, t_rows)
    _unsettled(P, t, q, v, closed, settle_tol)
    if spatial_slide:
        # The settled velocities decide which sliding points start from rest: zeroing
        # the sticking points' slips (each at most vel_tol) moves the slips of sliding
        # points on the same bodies by as much. A humanoid's head sliding at 6e-6 m/s
        # beside its sticking seat was left slipping at 2e-13 m/s, whose direction
        # (rounding) turned its friction by 84 degrees from the one the contact problem
        # certified; the phase's sticking forces then lay 313 N outside their cones.
        moved = _locked(P, t, q, v, closed, sdir, vel_tol)
        if np.any(moved != locked):
            locked = moved
            sysp, n_rows, t_rows, ref = model.phase(closed, sdir, d0, locked)
    return sysp, n_rows, t_rows, ref, q, v, d0, locked


#: how far (relative to the accelerations' scale) a phase's accelerations at its start may
#: be from those of the contact problem that chose it before the start is decided again
#: (:func:`_start_departs`)
_START_TOL = 1e-3

#: below ``_STIFF vel_tol`` a spatial point sliding with ``-mu N u/|u|`` may make its phase
#: stiff for an explicit method (:func:`_slip_stiff_event`, where its stiffness ratio
#: exceeds :data:`_STIFF_RATIO`): the phase is then integrated by an implicit one
#: (:data:`_IMPLICIT`)
_STIFF = 100.0
#: the stiffness ratio ``mu N w / |a_par|`` of such a slide beyond which it is integrated
#: by the implicit method (:func:`_slip_stiff_event`): about the number of the explicit
#: method's stability-limited steps per change of the slip by its own size
_STIFF_RATIO = 100.0
#: the implicit method of a stiff slide's phase, and the explicit methods it replaces
_IMPLICIT = "Radau"
_EXPLICIT = ("RK23", "RK45", "DOP853")


def _start_departs(step, sol) -> bool:
    """Whether a phase whose Gauss step at its settled start is ``step`` (None: the step
    failed) moves otherwise than the contact problem ``sol`` that chose it: its
    accelerations differ from ``sol.x`` by more than :data:`_START_TOL` of their scale
    (``max |x|``, at least 1).

    Why: the contact problem decides from the velocities before the phase's settle
    (:func:`_settle`), which zeroes the slips and gap rates it took for rest (each within
    ``vel_tol``) by a least-squares change of the velocities: of their size, unless the
    rows it holds are nearly dependent. gymnasium's HumanoidStandup lying on its head,
    seat, thighs and feet with its forearms sliding (the held rows' smallest singular value
    6.6e-6 of the largest) had its head's slip of 1.5e-6 m/s zeroed by a change that
    turned the forearms' slips by up to 0.3 rad from the directions the contact problem had
    certified its forces with: the phase's sticking forces lay 1.24e4 N outside their cones,
    and the run ended at 0.8879 s. (On a variant of the run whose earlier impacts differed,
    the settle kept those slips and changed a joint's rate by 0.36 instead: 2.3e3 N.)"""
    if sol is None:
        return False
    if step is None:
        return True
    x = np.asarray(sol.x)
    return bool(np.abs(step.a - x).max() > _START_TOL * max(1.0, float(np.abs(x).max())))


def _velocity_tolerances(G: np.ndarray, v: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Per point, the gap rate (and slip) below which the run takes a point for at rest:
    a thousand times the integration's velocity resolution, scaled by the norm of the
    point's normal row ``G_i`` (at least 1)."""
    return 1e3 * (atol + rtol * (1.0 + float(np.abs(v).max()))) * np.sqrt(
        (G * G).sum(axis=1)).clip(min=1.0)


def _locked(P: ContactPoints, t: float, q: np.ndarray, v: np.ndarray, closed: np.ndarray,
            sdir: np.ndarray, vel_tol: np.ndarray) -> np.ndarray:
    """The closed spatial points sliding from rest (their slip at most ``vel_tol``): their
    friction acts along the contact problem's direction ``d0`` itself
    (:func:`_coulomb_force`'s ``locked``)."""
    u = P.slip_velocities(t, q, v)
    return closed & (sdir != 0) & (P.dim == 2) & (np.hypot(u[:, 0], u[:, 1]) <= vel_tol)


def _rhs_tolerance(P: ContactPoints, t: float, q: np.ndarray, v: np.ndarray, idx: np.ndarray,
                   vel_tol: np.ndarray, G: np.ndarray, T: np.ndarray) -> np.ndarray:
    """How far the acceleration-level right-hand sides of the points ``idx`` may be moved
    to make dependent rows consistent (:func:`~gaussopt.gauss.contact_cone.
    solve_contact_cone`'s ``rhs_tol``, tried only where the exact problem has no certified
    answer): the same for every point, ``max_i rate_i * max_i vel_tol_i``.

    Why: rows that are dependent along the motion (``sum_k c_k J_k = 0`` at every state,
    ``c`` a unit self-stress: a body resting on several points) have right-hand sides
    ``-J_k' v`` whose combination is ``sum_k c_k' J_k v``: zero only where every row's
    velocity residual ``J_k v`` is. The run holds a point at rest while its gap rate and
    slip are within ``vel_tol`` (each at most that, not zero), so the combination is up to
    ``|c'| max vel_tol``, ``|c'|`` the rate at which the rows turn along the motion (their
    relative change over a step ``dt`` along ``v``, ``rate_i``). MuJoCo's humanoid lying on
    nine points (its thighs' rows turning at 2.8e-3 /s, slips up to 8e-6 m/s) had
    sticking rows inconsistent by 4e-9 m/s^2 and no certified state; moved by less than
    this, its state is certified (the same as the polygon's). ``G`` and ``T``: every
    point's normal and slip rows at ``(t, q, v)`` (the contact problem's)."""
    vn = float(np.linalg.norm(v))
    if vn == 0.0 or idx.size == 0:
        return np.zeros(idx.size)
    dt = 1e-7 * (1.0 + float(np.abs(q).max())) / vn
    q1 = q + dt * v
    G0, G1 = G[idx], P.normal_rows(t + dt, q1, v)[0][idx]
    T0, T1 = T[idx], P.cone_rows(t + dt, q1, v)[0][idx]
    size = np.maximum(np.abs(G0).max(axis=1), np.abs(T0).reshape(idx.size, -1).max(axis=1))
    turn = np.maximum(np.abs(G1 - G0).max(axis=1),
                      np.abs(T1 - T0).reshape(idx.size, -1).max(axis=1))
    rate = float(np.max(turn / np.where(size > 0, size, 1.0))) / dt
    return np.full(idx.size, rate * float(vel_tol[idx].max()))


def _slide_directions(P: ContactPoints, T2: np.ndarray, c2: np.ndarray, v: np.ndarray,
                      vel_tol: Optional[np.ndarray]) -> np.ndarray:
    """The unit slip directions of the spatial points with finite friction that slip faster
    than ``vel_tol``, zero rows for the others."""
    out = np.zeros((P.k, 2))
    if vel_tol is None:
        return out
    u = np.einsum("kjn,n->kj", T2, v) + c2
    speed = np.hypot(u[:, 0], u[:, 1])
    moving = P.frictional & ~P.sticks & (P.dim == 2) & (speed > vel_tol)
    out[moving] = u[moving] / speed[moving, None]
    return out


def _slide_signs(P: ContactPoints, u: np.ndarray, vel_tol: Optional[np.ndarray]) -> np.ndarray:
    """+-1 for the points with finite friction that slip faster than ``vel_tol``, else 0."""
    slide = np.zeros(P.k, dtype=int)
    if vel_tol is None:
        return slide
    moving = P.frictional & ~P.sticks & (np.abs(u) > vel_tol)
    slide[moving] = np.where(u[moving] > 0, 1, -1)
    return slide


def _decide(model: "_Model", t: float, q: np.ndarray, v: np.ndarray, cand: np.ndarray,
            closed: np.ndarray, sdir: np.ndarray, hints: dict, release: list,
            vel_tol: np.ndarray):
    """The contact state after an event: ``(closed, sdir, idx, sol)``.

    One contact problem decides every candidate point's normal and tangential state
    together (:func:`contact_step`). Where several states give the same motion (a point
    touching with zero force and zero gap acceleration, a force just on its cone's edge)
    the change the event announced (``hints``: point -> mode) wins, else the previous
    state. A sliding point's normal force must be determined (no Painleve paradox): when
    no state is consistent, a sliding candidate whose normal acceleration does not grow
    with its normal force is named.
    """
    P = model.points
    k = P.k
    prefer = np.full(k, OPEN)
    for i in np.flatnonzero(closed):
        if not (P.frictional[i] and not P.sticks[i]):
            prefer[i] = CLOSED
        else:
            # sticking, or sliding (its slip rate decides: still moving, it slides on;
            # at rest, it sticks unless an event announced a slide)
            prefer[i] = STICK
    for i, mode in hints.items():
        prefer[i] = mode
    new_closed = np.zeros(k, dtype=bool)
    new_sdir = np.zeros(k, dtype=int)
    if not cand.any():
        return new_closed, new_sdir, None, None
    if P.spatial:
        # circular cones: a point sliding on (its slip velocity above vel_tol) or starting
        # to slide has sdir = 1, its direction in sol.direction. A touching point at rest
        # prefers to close (unless an event said otherwise): on four corners, three carry
        # a body as well as four, and the one left open would be a tie decided against
        # the least-norm forces of all four
        for i in np.flatnonzero(cand & ~closed):
            if i not in hints:
                prefer[i] = STICK if P.frictional[i] and not P.sticks[i] else CLOSED
        idx, sol = contact_step(model, t, q, v, cand, prefer=prefer, release=release,
                                vel_tol=vel_tol, persist=True)
        new_closed[idx[sol.active]] = True
        for j, i in enumerate(idx):
            if np.any(sol.direction[j]):
                new_sdir[i] = 1
        return new_closed, new_sdir, idx, sol
    T, ct, _ = P.tangent_rows(t, q, v)
    slide = _slide_signs(P, T @ v + ct, vel_tol)
    try:
        idx, sol = contact_step(model, t, q, v, cand, prefer=prefer, release=release,
                                vel_tol=vel_tol)
    except ContactSolveError:
        for i in np.flatnonzero(cand & (slide != 0)):
            _check_painleve(model, t, q, v, cand, i, int(slide[i]))
        raise
    new_closed[idx[sol.active]] = True
    for j, i in enumerate(idx):
        mode = int(sol.mode[j])
        if mode == SLIDE_POS:
            new_sdir[i] = 1
        elif mode == SLIDE_NEG:
            new_sdir[i] = -1
        elif mode == CLOSED and slide[i] != 0:
            new_sdir[i] = slide[i]
    for i in np.flatnonzero(new_sdir):
        _check_painleve(model, t, q, v, new_closed, i, int(new_sdir[i]))
    return new_closed, new_sdir, idx, sol


def _check_painleve(model: "_Model", t, q, v, closed, i, d) -> None:
    """A point ``i`` sliding ``d``: its normal force is determined only if the normal
    acceleration grows with it (with its sliding friction ``-mu d N`` along the slip)."""
    P = model.points
    M, F, A, b = model.base.evaluate(t, q, v)
    G, _, gam = P.normal_rows(t, q, v)
    T, _, gamt = P.tangent_rows(t, q, v)
    others = [j for j in np.flatnonzero(closed) if j != i]
    Ao = np.concatenate([A, G[others]])
    if in_span(G[i][None, :], Ao):
        # its row depends on the others' (a body on many points): its normal force is not
        # determined alone, only with theirs, and the contact problem that chose these
        # states certified that some distribution of them holds
        return
    W = G[i] - P.mu[i] * d * T[i]
    try:
        resp = solve_gauss(M, W, Ao, np.zeros(Ao.shape[0]), check_symmetry=False).a
    except GaussoptError:
        return                          # (the others' rows alone are degenerate: not this test)
    c = float(G[i] @ resp)
    scale = float(np.abs(G[i]).max()) * float(np.abs(resp).max(initial=0.0)) + 1e-300
    if c <= 1e4 * _EPS * scale:
        raise ContactSolveError(
            f"Painleve's paradox at {P.labels[i]} (t={t}): sliding with friction "
            f"{P.mu[i]:g}, a normal force pushes the contact closed instead of open (normal "
            f"acceleration per unit force {c:.3g} <= 0), so the normal force is indeterminate "
            "or no force satisfies the contact conditions.", [P.labels[i]])


def _settle(sysp: System, P: ContactPoints, t: float, q: np.ndarray, v: np.ndarray,
            closed: np.ndarray, n_rows: list, gap_tol: float, vel_tol: float,
            touching: Optional[np.ndarray] = None, sdir: Optional[np.ndarray] = None,
            t_rows: Optional[list] = None) -> tuple[np.ndarray, np.ndarray]:
    """``(q, v)`` with the closed points' gaps and the phase's velocity rows brought to
    zero, where they are not already.

    The points of an impact are those within ``gap_tol`` of their surface (a face landing
    nearly flat: its far end still 1.7e-8 m above the floor when the near end lands); a
    phase holds them closed as equality rows, which the phase checks against its own
    consistency tolerance (1e-8). Those gaps, at most ``gap_tol``, are the driver's own
    decision's tolerance: they are closed by a minimum-norm correction of ``q`` (Newton
    on the phase's rows, the other rows held), before the phase starts. The no-slip rows
    of sticking points in space (``t_rows``: velocity rows, they hold no position) are
    not held: a ball landing in the corner of a cup of capsules (MuJoCo's
    ``ball_in_cup``) touches its bottom and, 3e-7 m away, its side; its two normals span
    its motion relative to the cup, so holding its slips as well left the least-squares
    compromise, both gaps 6e-8 m off, and the phase refused to start. A ``touching``
    point that stays open and that the correction pushes into its surface is brought to
    it instead (an active set): a corner that just rebounded from the floor, beside one
    closing 1.4e-6 m away, was pushed 1.2e-6 m into the floor, and its touch event then
    ended every phase where it started.

    The same for the velocities: a point is held closed where its gap rate is within
    ``vel_tol``, and sticking where its slip is (the contact problem's answer after an
    impact may leave a slip of that size: a box's edge landing with Newton's law at both
    corners, whose rebounds differ along the edge by 1e-8 m/s, slides one corner by that
    much). Velocity rows of the phase whose normalized residual is at most ``vel_tol``
    (plus what the correction of ``q`` changed it by: the rows turn with ``q``) are zeroed
    by a minimum-norm correction of ``v`` (the rows are linear in ``v``: one
    least-squares solve); larger ones are left for the phase to refuse. The correction
    leaves the slips of the closed points that slide (``sdir``) as they are, as far as
    the phase's rows allow (its part along them removed within the rows' null space):
    the contact problem decided their friction from those slips. Without that, a
    humanoid's seat and thigh zeroed from slips of 3e-6 m/s turned its sliding head's
    slip by 70 degrees and grew it to 1.2e-5 m/s (a minimum-norm change of every
    coordinate's rate), its phase's accelerations were 65 m/s^2 away from the contact
    problem's, and the seat's forces 78 N outside their cones."""
    idx = np.flatnonzero(closed)
    if idx.size == 0:
        return q, v
    q_in = q
    free = (np.flatnonzero(touching & ~closed) if touching is not None
            else np.zeros(0, dtype=int))
    # the rows a correction of q holds: all but the spatial no-slip rows (velocity rows)
    slip = [] if t_rows is None else [
        r for j, i in enumerate(idx) if t_rows[j] >= 0 and P.dim[i] == 2
        for r in (t_rows[j], t_rows[j] + 1)]
    held = np.zeros(0, dtype=int)
    small = 1e-3 * gap_tol
    for _ in range(6):
        g_all = P.gaps(t, q)
        g = g_all[idx]
        # (an active set: the open touching points the correction pushed into their
        # surface are brought to it, not held where they were -- a face's four corners
        # cannot keep two apart while the other two close)
        held = np.union1d(held, free[g_all[free] < -small]).astype(int)
        if np.any(np.abs(g) > gap_tol) or (np.all(np.abs(g) <= small)
                                          and np.all(np.abs(g_all[held]) <= small)):
            break
        _, _, A, _ = sysp.evaluate(t, q, v)
        r = np.zeros(A.shape[0])
        r[n_rows] = g
        if slip:
            A, r = np.delete(A, slip, axis=0), np.delete(r, slip)
        if len(held):
            A = np.concatenate([A, P.normal_rows(t, q, v)[0][held]])
            r = np.concatenate([r, g_all[held]])
        q = q - _small_correction(A, r, 100.0 * gap_tol)
    if sysp.holonomic or sysp.nonholonomic:
        r = sysp.velocity_residual(t, q, v)
        B = sysp.velocity_rows(t, q, v)
        nr = np.sqrt((B * B).sum(axis=1))
        nr = np.where(nr > 0, nr, 1.0)
        d = np.abs(r) / nr
        # (what the correction of q did to the rows is the correction's, not the state's:
        # a bowl turned by 1e-6 rad to close a corner's 2e-8 m, spinning at 6 rad/s, left
        # its quaternion's rate 1.5e-5 off its row, twice vel_tol)
        moved = (np.abs(r - sysp.velocity_residual(t, q_in, v)) / nr if q is not q_in
                 else 0.0)
        if 0 < d.max(initial=0.0) and np.all(d <= vel_tol + moved):
            keep = _sliding_slip_rows(P, t, q, v, closed, sdir)
            if not keep.shape[0]:
                dv = np.linalg.lstsq(B, r, rcond=None)[0]
            else:
                # one SVD: the minimum-norm correction (numpy's lstsq cut-off) and the
                # rows' null space, within which its part along the sliding slips goes
                U, sig, Vt = np.linalg.svd(B)
                big = sig[0] if sig.size else 0.0
                used = int(np.count_nonzero(sig > _EPS * max(B.shape) * big))
                dv = Vt[:used].T @ ((U[:, :used].T @ r) / sig[:used])
                N = Vt[int(np.count_nonzero(sig > DEFAULT_RANK_TOL * big)):].T
                if N.shape[1]:
                    # (directions the slips barely see are left alone: rcond 1e-8; and a
                    # correction that would not zero the rows as well is not taken)
                    moved = dv - N @ np.linalg.lstsq(keep @ N, keep @ dv, rcond=1e-8)[0]
                    if (np.abs(B @ moved - r).max(initial=0.0)
                            <= np.abs(B @ dv - r).max(initial=0.0) + 1e-12 * np.abs(r).max()):
                        dv = moved
            v = v - dv
    return q, v


def _sliding_slip_rows(P: ContactPoints, t: float, q: np.ndarray, v: np.ndarray,
                       closed: np.ndarray, sdir: Optional[np.ndarray]) -> np.ndarray:
    """The slip rows (the matrices of their slip velocities in ``v``) of the closed points
    that slide, stacked; (0, n) where none does."""
    n = q.size
    if sdir is None:
        return np.zeros((0, n))
    sliding = closed & (np.asarray(sdir) != 0) & P.frictional
    if not sliding.any():
        return np.zeros((0, n))
    parts = []
    if np.any(sliding & (P.dim == 2)):
        T2 = P.cone_rows(t, q, v)[0]
        parts.append(T2[sliding & (P.dim == 2)].reshape(-1, n))
    if np.any(sliding & (P.dim == 1)):
        parts.append(P.tangent_rows(t, q, v)[0][sliding & (P.dim == 1)])
    return np.concatenate(parts)


def _small_correction(A: np.ndarray, r: np.ndarray, bound: float,
                      D: Optional[np.ndarray] = None) -> np.ndarray:
    """The minimum-norm least-squares ``dq`` of ``A dq = r`` over the singular directions
    of ``A`` whose part of it is at most ``bound`` (:func:`_settle`'s Newton step).

    Why: the gaps it closes are within the driver's ``gap_tol``, so its correction is of
    their size; a direction that needs far more is a near-dependency of the rows, not a
    small correction. A ring of 30 boxes landing on its rim (MuJoCo's
    ``replicate/cylinder.xml``) has corners of neighbouring boxes 3e-6 m apart, one on
    the floor, its twin 2.5e-6 m above it: their rows differ by 6e-8 of their size (above
    any rank tolerance), and holding one at the floor while closing the other asked for a
    turn of 10 rad, which the linearization took: the phase started with a unit
    quaternion of norm 15. Such gaps cannot be closed by a small motion; they are left
    (:func:`_unsettled` names them; :func:`_touching` keeps such points out of the
    touching set in the first place)."""
    U, sv, Vt = np.linalg.svd(A, full_matrices=False)
    c = U.T @ r
    big = float(sv[0]) if sv.size else 0.0
    # (``D``: the size of a direction's part is the largest change it makes to ``D dq``,
    # every contact point's gap, instead of its coordinates' size)
    reach = np.ones(sv.size) if D is None else np.abs(D @ Vt.T).max(axis=0, initial=0.0)
    keep = (sv > DEFAULT_RANK_TOL * big) & (np.abs(c) * reach <= bound * sv)
    return Vt[keep].T @ (c[keep] / sv[keep])


def _touching(model: "_Model", t: float, q: np.ndarray, v: np.ndarray, gaps: np.ndarray,
              G: np.ndarray, gap_tol: float, tol: float) -> np.ndarray:
    """The points touching their surfaces: within ``gap_tol`` of them, less those that
    lower touching points hold off their surfaces.

    Why: the run takes points within its gap tolerance (``1e3 (atol + rtol max|q|)``) as
    touching at once -- a face landing nearly flat, its far end still 1.7e-8 m above the
    floor when the near end lands -- and :func:`_settle` closes such gaps by a small
    motion. Points whose rows are nearly dependent cannot all be brought to a surface
    that way when their gaps differ: MuJoCo's ``replicate/cylinder.xml`` (a ring of 30
    boxes) rolls over the corners where neighbouring boxes meet, one box's corner 2.5e-6 m
    above the floor while its twin 2.4e-5 m away touches it; a bowl of boxes
    (``replicate/bowl.xml``) lands on a corner 2.6e-7 m above the floor 1 mm from one on
    it. Taken as touching, the higher corner joined its twin's impact and was put at rest
    (its twin rebounding); the phase then held it closed, and either no small motion
    brought it to the floor (the run ended) or the motion that did turned the bowl by
    2.4e-4 rad and left its quaternion's rate 1.2e-4 off its row (the phase refused to
    start).

    So the touching points are taken from the lowest up (their gaps, rounding-level ones
    together): a point joins if the touching points below it and it can be brought to
    their surfaces together by a small motion, leaving none of them farther than the
    phases' consistency tolerance ``tol`` (relative to the largest coordinate, as the
    phases' check). Small: along every singular direction of the rows (the base rows
    held) the motion changes no contact point's gap by more than ``gap_tol``
    (:func:`_small_correction` with every point's rows ``G``). The measure is the gaps'
    and not the coordinates': a humanoid lying on its back lowers a hand 1.6e-6 m by
    turning its arm 3e-6 rad, more than the gap tolerance in radians (3e-6), and the
    hand was held off by its twin on the other side; the bowl's turn of 2.4e-4 rad moves
    its rim's corners by 1e-5 m, and the ring's twin needs a turn of 0.1 rad. A point
    that does not join is held off by those below it: open, its landing watched by its
    gap."""
    touching = np.abs(gaps) <= gap_tol
    idx = np.flatnonzero(touching)
    small = 1e-3 * gap_tol
    level = np.abs(gaps[idx]) <= small
    if idx.size < 2 or np.all(level):
        return touching
    _, _, A, _ = model.base.evaluate(t, q, v)
    norms = np.sqrt((G * G).sum(axis=1)).clip(min=1e-300)
    far = tol * (1.0 + float(np.abs(q).max()))
    kept = list(idx[level])
    rest = idx[~level]
    for i in rest[np.argsort(gaps[rest], kind="stable")]:
        trial = kept + [int(i)]
        rows = np.concatenate([A, G[trial]])
        r = np.concatenate([np.zeros(A.shape[0]), gaps[trial]])
        left = gaps[trial] - G[trial] @ _small_correction(rows, r, gap_tol, G)
        if np.any(np.abs(left) / norms[trial] > far):
            touching[i] = False
        else:
            kept.append(int(i))
    return touching


#: the most Newton steps of :func:`_separate`
_SEPARATE_ITER = 30


def _separate(model: "_Model", t: float, q: np.ndarray, gap_tol: float, tol: float
              ) -> np.ndarray:
    """The configuration nearest ``q`` in the mass metric where no contact point penetrates
    and the model's own position rows hold (``project_initial=True`` of a run whose ``q0``
    penetrates): ``min 1/2 (q1 - q)^T M (q1 - q)`` subject to ``Phi(q1) = 0`` and
    ``gap(q1) >= 0``, by sequential quadratic steps, each the frictionless contact problem
    at the position level (:func:`~gaussopt.gauss.contact_problem.solve_contact`: Gauss's
    principle for a displacement, ``M`` at the current state, the points that would
    penetrate pushing with nonnegative multipliers; a singular ``M``'s directions held by
    the rows, as in a step).

    Why: MuJoCo's contacts are soft and tolerate a start inside the floor (gymnasium's
    HumanoidStandup starts with both arms 3.5 cm into it); a hard contact cannot start
    there. Each step takes the points within ``|min gap| + gap_tol`` of their surfaces
    and every point an earlier step took (those the others cannot reach by it; one that
    is on the next step joins then); the steps end when every gap is at least ``-1e-3
    gap_tol``, the rows hold to ``tol`` and the step is below ``tol`` (relative to the
    largest coordinate, as the phases' check)."""
    P = model.points
    base = model.base
    q0 = q
    zero = np.zeros(q.size)
    taken = np.zeros(P.k, dtype=bool)
    for _ in range(_SEPARATE_ITER):
        g = P.gaps(t, q)
        phi = base.position_residual(t, q)
        scale = tol * (1.0 + float(np.abs(q).max()))
        taken |= g < max(-g.min(initial=0.0), 0.0) + gap_tol
        near = np.flatnonzero(taken)
        G = P.normal_rows(t, q, zero)[0][near]
        M = base.mass(t, q)
        try:
            sol = solve_contact(M, M @ (q0 - q), base.position_jacobian(t, q), -phi, G,
                                -g[near], np.zeros(G.shape), np.zeros(near.size),
                                mu=np.zeros(near.size), labels=[P.labels[i] for i in near])
        except GaussoptError as e:
            raise ModelError(f"`q0` penetrates the contacts and project_initial=True found no "
                             f"state near it that does not: {e}") from e
        q = q + sol.x
        if (np.abs(sol.x).max(initial=0.0) <= scale
                and P.gaps(t, q).min(initial=0.0) >= -1e-3 * gap_tol
                and np.abs(base.position_residual(t, q)).max(initial=0.0) <= scale):
            return q
    bad = [P.labels[i] for i in np.flatnonzero(P.gaps(t, q) < -1e-3 * gap_tol)]
    raise ModelError(f"`q0` penetrates the contacts and project_initial=True did not converge "
                     f"to a state that does not in {_SEPARATE_ITER} steps (still in: {bad}).")


def _unsettled(P: ContactPoints, t: float, q: np.ndarray, v: np.ndarray, closed: np.ndarray,
               tol: float) -> None:
    """Raise :class:`~gaussopt.ContactSolveError` naming the closed points whose gaps
    :func:`_settle` left beyond the phase's consistency tolerance ``tol`` (the phase would
    refuse to start; its message would ask for a projection of an initial state the user
    never gave). (The rows at ``(t, q, v)``: the phase's forces read them next.)"""
    idx = np.flatnonzero(closed)
    if idx.size == 0:
        return
    G = P.normal_rows(t, q, v)[0][idx]
    d = np.abs(P.gaps(t, q)[idx]) / np.sqrt((G * G).sum(axis=1)).clip(min=1e-300)
    bad = idx[d > tol * (1.0 + float(np.abs(q).max()))]
    if bad.size:
        names = [P.labels[i] for i in bad]
        raise ContactSolveError(
            f"the contact points {names} are held closed at t={t} but stay up to "
            f"{float(d.max()):.3g} off their surfaces: no small change of the state "
            "brings them there together with the other touching points (their rows are "
            "nearly dependent on those points': e.g. two contact points micrometres apart on "
            "one body, one resting and its twin above it). Points that close together are "
            "taken as touching within the run's gap tolerance, 1e3 (atol + rtol max|q|): "
            "merge them, or tighten the tolerances below their distance.", names)


def _check_lift_off(model: "_Model", t, q, v, closed, sdir, points, vel_tol, d0=None,
                    locked=None) -> None:
    """A point with ``friction = inf`` whose normal force reached zero: with it open the
    tangential force vanishes too, and the gap must then open (``gap'' >= 0``). A
    nonzero tangential force at ``N = 0`` (no finite ``mu`` would have held it) can
    leave the gap closing: no continuation is consistent."""
    P = model.points
    for i in np.flatnonzero(points):
        rest = closed.copy()
        rest[i] = False
        sysp = model.phase(rest, sdir, d0, locked)[0]
        acc = solve_step(sysp, t, q, v).a
        G, _, gam = P.normal_rows(t, q, v)
        gdd = float(G[i] @ acc - gam[i])
        scale = float(np.abs(G[i]).max()) * float(np.abs(acc).max(initial=0.0)) + abs(gam[i])
        if gdd < -1e-6 * scale:
            raise ContactSolveError(
                f"{P.labels[i]} reaches zero normal force at t={t} while it sticks with a "
                f"nonzero tangential force (friction=inf): opened, its gap would close "
                f"(gap'' = {gdd:.3g}), closed, it would pull. No continuation is consistent; "
                "give the contact a finite friction coefficient (it then slides before it "
                "lifts off).", [P.labels[i]])


def _impact(model: _Model, t: float, q: np.ndarray, v: np.ndarray, candidates: np.ndarray,
            closing: np.ndarray, rest: Optional[np.ndarray] = None,
            vel_tol: Optional[np.ndarray] = None, quick: bool = False
            ) -> tuple[np.ndarray, Impact]:
    """``v+`` of an impact of the ``closing`` points among the touching ``candidates``.

    The impact problem is the contact problem at the velocity level
    (:func:`~gaussopt.gauss.contact_problem.solve_contact` with ``x = v+``, ``F = M v-``):
    Newton's law ``gap'+ >= -e gap'-`` with complementarity on the normal impulses, and
    Coulomb's law on the tangential ones (a point with finite friction sticks after the
    impact with ``|P_t| <= mu P_n``, or slides with ``P_t = -mu P_n`` times the sign of
    its slip velocity after it; ``friction=inf``: it does not slip), for every touching
    point at once. ``rest``: points brought to rest (``gap'+ = 0`` whatever the sign of
    their impulse: the end of an accumulation of impacts), with the same Coulomb law.
    ``vel_tol`` (per point): how far the rows of points in space may be moved to make
    dependent rows consistent (:func:`~gaussopt.gauss.contact_cone.solve_contact_cone`'s
    ``rhs_tol``: a face landing nearly flat). ``quick``: points in space, its ``quick``
    attempt (ContactSolveError where that does not certify).
    """
    P = model.points
    M = model.base.mass(t, q)
    B, c = model.velocity_rows(t, q, v)
    G, cg, _ = P.normal_rows(t, q, v)
    T, ct, _ = P.tangent_rows(t, q, v)
    gdot = G @ v + cg
    if rest is None:
        rest = np.zeros(P.k, dtype=bool)
    idx = np.flatnonzero(candidates | rest)
    e = np.where(closing & ~rest, P.e, 0.0)
    # Newton: gap'+ >= -e gap'- for the closing points, >= 0 for the touching ones, = 0
    # for the points brought to rest
    h = -cg - e * np.minimum(gdot, 0.0)
    h[rest] = -cg[rest]
    prefer = np.where(closing | rest, STICK, OPEN)
    if P.spatial:
        # the circular cones at the velocity level: the slip velocity after the impact
        # u+ = T2 v+ + c2 (Coulomb's impulse -mu P_n u+/|u+| where it slides)
        T2, c2, _ = P.cone_rows(t, q, v)
        sol = solve_contact_cone(M, M @ v, B, -c, G[idx], h[idx], T2[idx], -c2[idx],
                                 mu=P.mu[idx], prefer=prefer[idx], weld=rest[idx],
                                 labels=[P.labels[i] for i in idx],
                                 rhs_tol=None if vel_tol is None else vel_tol[idx],
                                 quick=quick)
        timp = np.zeros((P.k, 2))
    else:
        sol = solve_contact(M, M @ v, B, -c, G[idx], h[idx], T[idx], -ct[idx], mu=P.mu[idx],
                            prefer=prefer[idx], weld=rest[idx], labels=[P.labels[i] for i in idx])
        timp = np.zeros(P.k)
    vp = sol.x
    imp = np.zeros(P.k)
    imp[idx], timp[idx] = sol.nu, sol.tau
    active = np.zeros(P.k, dtype=bool)
    active[idx[sol.active]] = True
    rec = Impact(t=float(t), points=[P.labels[i] for i in np.flatnonzero(active)], impulses=imp,
                 tangential_impulses=timp, gap_rate_before=gdot, gap_rate_after=G @ vp + cg,
                 kinetic_before=_kinetic(M, v), kinetic_after=_kinetic(M, vp))
    return vp, rec


#: the most binary impacts of one sequential impact (:func:`_sequential_impact`)
MAX_BINARY_IMPACTS = 100_000


def _sequential_impact(model: _Model, t: float, q: np.ndarray, v: np.ndarray,
                       candidates: np.ndarray, vel_tol: np.ndarray) -> tuple[np.ndarray, Impact]:
    """``v+`` of an impact resolved as a sequence of binary impacts (``impact_law=
    "sequential"``): while a touching point approaches (``gap' < -vel_tol``), the one with
    the most negative gap rate takes its impact alone (:func:`_impact` with that point as
    the only candidate: Newton's law with its restitution, Coulomb's law on its
    tangential impulse), the others free. A chain of touching bodies passes the impact on
    one contact at a time (a Newton's cradle with ``e = 1``: ``(0, 0, v0)``); with ``e < 1``
    the sequence is a convergent series, ended when no point approaches faster than
    ``vel_tol``. The record sums the impulses of the sequence."""
    P = model.points
    M = model.base.mass(t, q)
    G, cg, _ = P.normal_rows(t, q, v)
    gdot0 = G @ v + cg
    imp, timp = np.zeros(P.k), np.zeros((P.k, 2) if P.spatial else P.k)
    vp = v
    for _ in range(MAX_BINARY_IMPACTS):
        gd = G @ vp + cg
        approaching = candidates & (gd < -vel_tol)
        if not approaching.any():
            break
        i = int(np.flatnonzero(approaching)[np.argmin(gd[approaching])])
        one = np.zeros(P.k, dtype=bool)
        one[i] = True
        vp, rec = _impact(model, t, q, vp, one, one, vel_tol=vel_tol)
        imp += rec.impulses
        timp += rec.tangential_impulses
    else:
        raise ContactSolveError(
            f"The sequential impact at t={t} did not end after {MAX_BINARY_IMPACTS} binary "
            "impacts (the touching points still approach one another): use "
            "contact_options={'impact_law': 'newton'} for this impact.",
            [P.labels[i] for i in np.flatnonzero(candidates)])
    rec = Impact(t=float(t), points=[P.labels[i] for i in np.flatnonzero(imp != 0)],
                 impulses=imp, tangential_impulses=timp, gap_rate_before=gdot0,
                 gap_rate_after=G @ vp + cg, kinetic_before=_kinetic(M, v),
                 kinetic_after=_kinetic(M, vp))
    return vp, rec


def _accumulation(model: _Model, t: float, q: np.ndarray, vp: np.ndarray, rec: Impact,
                  touching: np.ndarray, vel_tol: np.ndarray, zeno_height: float,
                  history: Sequence[Impact]) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """The touching points whose rebound after this impact stays below ``zeno_height``
    (apex ``gap'^2 / (2 |gap''|)``, ``gap''`` with the points that rest after the impact
    closed), with every touching point's flight after it (``2 gap' / |gap''|``, inf where
    it does not come back or does not leave), or None."""
    P = model.points
    gd = rec.gap_rate_after
    sep = touching & (gd > vel_tol)
    if not sep.any():
        return None
    resting = touching & (np.abs(gd) <= vel_tol)
    if resting.any():
        idx, sol = contact_step(model, t, q, vp, resting, vel_tol=vel_tol)
        acc = sol.x
    else:
        acc = solve_step(model.base, t, q, vp).a
    G, _, gam = P.normal_rows(t, q, vp)
    decel = -(G @ acc - gam)
    low = sep & (decel > 0) & (gd * gd <= 2 * np.maximum(decel, 0) * zeno_height)
    if not low.any():
        return None
    flight = np.full(P.k, math.inf)
    back = sep & (decel > 0)
    flight[back] = 2 * gd[back] / decel[back]
    # the accumulation time: one bouncing point's geometric series of flights
    # (2 u e^j / d, j >= 0: t_inf - t = 2 u / (d (1 - e))), else the series of the last
    # intervals between impacts
    bouncing = np.flatnonzero(low & (P.e > 0) & (rec.gap_rate_before < 0))
    rec.t_accumulation = math.nan
    if bouncing.size == 1 and np.count_nonzero(low) == 1:
        i = bouncing[0]
        if P.e[i] < 1:
            rec.t_accumulation = float(t + 2 * gd[i] / (decel[i] * (1 - P.e[i])))
    elif len(history) >= 2:
        d1, d0 = t - history[-1].t, history[-1].t - history[-2].t
        r = d1 / d0 if d0 > 0 else math.nan
        if 0 < r < 1:
            rec.t_accumulation = float(t + d1 * r / (1 - r))
    return low, flight


def simulate_contacts(system: System, t0: float, t1: float, q0: np.ndarray, v0: np.ndarray,
                      opts: RunOptions, phase: Callable,
                      guard: Optional[InterruptGuard] = None) -> Trajectory:
    """Simulate a system with :class:`~gaussopt.Contact` constraints (see the module's
    documentation): :func:`gaussopt.simulate` calls it for such systems.

    Parameters
    ----------
    system : System
        With one or more contacts among its constraints.
    t0, t1 : float
        The span (``t1 >= t0``).
    q0, v0 : ndarray, shape (n,)
        The initial state, checked; ``q0`` must not penetrate (``gap >= 0`` within the
        gap tolerance).
    opts : RunOptions
        The run's checked options (:func:`gaussopt.integrate.options.run_options`), its
        ``contact`` among them (:class:`~gaussopt.integrate.options.ContactOptions`:
        ``max_impacts``; ``zeno_height``, a rebound whose apex ``gap'^2 / (2 |gap''|)``
        is below it closes the contact, default ``100 (atol + rtol max|q0|)``). Every
        phase runs with them, its own events and output times changed
        (:meth:`~gaussopt.integrate.options.RunOptions.but`); ``t_eval`` defaults to
        every accepted step, with two samples at every impact (before and after, at the
        same time); ``dense_output=True`` gives ``traj.sol``, a
        :class:`ContactDenseSolution` (``max_memory`` applies to each phase).
    phase : callable
        ``phase(system, t0, t1, q, v, opts) -> Trajectory``, the smooth run of each phase
        (:func:`gaussopt.integrate.smooth_run.phases`).
    guard : InterruptGuard, optional
        The run's :class:`~gaussopt.integrate.guards.InterruptGuard`, shared with every
        phase: a Ctrl-C during a phase stops it at its next chunk, one between two phases
        stops the run before the next, and one while the phases are joined is deferred;
        each ends the run with ``success=False`` and what was computed.

    Returns
    -------
    Trajectory
        The phases joined (on a failure -- a phase that failed, an exception of the
        model's functions or of the contact problem, ``KeyboardInterrupt`` -- the phases
        computed so far, ``success=False``, the reason in ``message`` and the exception in
        ``exception``); ``contact_forces`` (N, k) holds the normal force of
        every contact point (0 while open), ``impacts`` every :class:`Impact`,
        ``meta["contact_points"]`` the points' labels and
        ``meta["contact_transitions"]`` every change of a point's state as
        ``(t, point, label)`` with the labels ``"close"``, ``"close stick"``,
        ``"close slide +"``, ``"close slide -"``, ``"open"``, ``"stick"``, ``"slide +"``,
        ``"slide -"``, and ``meta["contact_transition_states"]`` (shape (K, 2 n)) the state
        ``(q, v)`` at each of them, in the same order (after an impact: the velocities
        after it); ``meta["contact_indeterminate"]`` the phases whose contact
        forces were indeterminate, as ``(t_start, t_end, points)`` (their forces: the
        least-norm distribution inside every cone); ``meta["contact_implicit"]`` the
        phases integrated by an implicit method (``"Radau"``) because a spatial slide in
        them was slow enough to make them stiff (:func:`_slip_stiff_event`), as
        ``(t_start, t_end)``.
    """
    if not system.contacts:
        raise ModelError("`system` has no Contact constraints; use gaussopt.simulate.")
    dense_output, t_eval = opts.dense_output, opts.t_eval
    max_impacts = opts.contact.max_impacts
    zeno_height = opts.contact.zeno_height
    sequential = opts.contact.impact_law == "sequential"
    q, v = np.array(q0, dtype=float), np.array(v0, dtype=float)
    rtol, atol = opts.rtol, opts.atol
    model = _Model(system, t0, q)
    P, k = model.points, model.points.k
    if P.spatial and np.any(P.frictional & (P.dim == 1)):
        raise UnsupportedConstraintError(
            "contacts with `slip_velocity` (circular friction cones in space) and frictional "
            "contacts with `slip` (planar) in one system: give every frictional contact of a "
            "spatial system a `slip_velocity`.")
    P.gaps(t0, q)                  # (a gap that returns no finite numbers: named here)
    model.base.check(t0, q, v)
    for c in system.contacts:
        problems = check_derivatives_near(c, t0, q, v)
        if problems:
            raise ModelError(f"contact {c.name!r} failed its check: " + "; ".join(problems))
    _check_affine(model, t0, q, v)
    if zeno_height is None:
        zeno_height = 100 * (atol + rtol * float(np.abs(q).max()))
    if t_eval is not None:
        t_eval = np.asarray(t_eval, dtype=float).ravel()
    scale_q = 1.0 + float(np.abs(q).max())
    gap_tol = 1e3 * (atol + rtol * scale_q)

    g0 = P.gaps(t0, q)
    if np.any(g0 < -gap_tol):
        bad = [P.labels[i] for i in np.flatnonzero(g0 < -gap_tol)]
        if not opts.project_initial:
            raise ModelError(f"`q0` penetrates the contacts {bad} (gaps {g0[g0 < -gap_tol]}); "
                             "start with gap >= 0, or pass project_initial=True to start from "
                             "the nearest state that does not (in the mass metric).")
        q = _separate(model, t0, q, gap_tol, opts.consistency_tol)
    m = _row_count(model.base)
    pieces: list[tuple[Trajectory, np.ndarray]] = []
    impacts: list[Impact] = []
    transitions: list[tuple] = []
    transition_states: list[np.ndarray] = []     # (q, v) at each transition
    lifted = np.zeros(k, dtype=bool)
    closed = np.zeros(k, dtype=bool)
    sdir = np.zeros(k, dtype=int)          # sliding points: the sign of their slip rate
    hints: dict = {}                       # the change each event announced: point -> mode
    release: list = []                     # groups of points whose forces left their cones
    indeterminate: list = []               # phases with indeterminate contact forces
    status, message = 0, "The integration reached the end of t_span."
    exception: Optional[BaseException] = None
    t = t0
    zero_phases = 0
    restiff = False                        # the last phase ended at a "stiff" event
    implicit_phases: list = []             # phases integrated by _IMPLICIT (stiff slides)
    wall0 = time.perf_counter()
    try:
        while True:
            if guard is not None and guard.interrupted:
                raise KeyboardInterrupt      # (a Ctrl-C between two phases)
            G, cg, _ = P.normal_rows(t, q, v)
            gdot = G @ v + cg
            gaps = P.gaps(t, q)
            vel_tol = _velocity_tolerances(G, v, rtol, atol)
            touching = _touching(model, t, q, v, gaps, G, gap_tol, opts.consistency_tol)
            closing = touching & (gdot < -vel_tol)
            if closing.any():
                if len(impacts) >= max_impacts:
                    status, message = -1, f"Stopped after max_impacts={max_impacts} impacts at t={t}."
                    break
                if sequential:
                    vp, rec = _sequential_impact(model, t, q, v, touching, vel_tol)
                else:
                    vp, rec = _impact(model, t, q, v, touching, closing, vel_tol=vel_tol)
                acc = _accumulation(model, t, q, vp, rec, touching, vel_tol, zeno_height,
                                    impacts)
                if acc is not None:
                    low, flight = acc
                    # the end of an accumulation: the rebounds below zeno_height are not
                    # integrated; the points come to rest at this impact
                    t_acc = rec.t_accumulation
                    still = touching & (np.abs(rec.gap_rate_after) <= vel_tol)
                    # The points whose rebound stays below zeno_height come to rest. Those
                    # may be more than the accumulating point: its neighbours on one rigid
                    # face rebound less by their distance from it, and held at rest
                    # together they stop the face's rotation against the other points'
                    # Newton law (no solution). Then the lowest alone comes to rest.
                    # Failing that, every touching point, if every one's rebound would be
                    # over within the accumulation's remaining time (a face settling flat
                    # about one end: every point's rebound vanishes with the end's). A
                    # point that would fly longer (a far end landing at speed) is no part
                    # of the accumulation: its landing interrupts it, and the impact is
                    # the generalized Newton law's of all touching points (computed above;
                    # the accumulation may end at a later impact).
                    # (apex gap'^2 / (2 |gap''|) = gap' flight / 4: the lowest's by its
                    # own deceleration)
                    apex = rec.gap_rate_after[low] * flight[low]
                    lowest = np.zeros(k, dtype=bool)
                    lowest[np.flatnonzero(low)[np.argmin(apex)]] = True
                    tries = [low | still, lowest | still]
                    left = t_acc - t if math.isfinite(t_acc) else math.nan
                    if np.all(np.where(touching & (rec.gap_rate_after > vel_tol), flight,
                                       0.0) <= 10 * left):
                        tries.append(touching)
                    # (the contact problems of many points in space are tried quickly:
                    # the end of an accumulation is a shortcut, taken where a rest set's
                    # problem certifies from the octagon's readings; where none does, the
                    # impact is the generalized Newton law's and the accumulation goes on.
                    # Their full searches cost 13-20 s each on MuJoCo's humanoid rocking on
                    # its feet, one or two per impact: 1.1229 to 1.1231 s took minutes)
                    for rest in tries:
                        try:
                            vp, rec = _impact(model, t, q, v, touching, closing, rest=rest,
                                              vel_tol=vel_tol, quick=True)
                        except ContactSolveError:
                            continue
                        rec.accumulation, rec.t_accumulation = True, t_acc
                        break
                    else:
                        rec.t_accumulation = math.nan     # (the impact computed above)
                v = vp
                impacts.append(rec)
                gdot = G @ v + cg
            if restiff and not closing.any():
                # a slide slowed to where its phase is stiff (a "stiff" event): the same
                # phase goes on under an implicit method; nothing is decided
                try:
                    step = solve_step(sysp, t, q, v)
                except GaussoptError:
                    step = None
            else:
                for again in (False, True):
                    cand = touching & (np.abs(gdot) <= vel_tol)
                    new_closed, new_sdir, idx, sol = _decide(model, t, q, v, cand, closed, sdir,
                                                             hints, release, vel_tol)
                    for i in np.flatnonzero((new_closed != closed) | (new_sdir != sdir)):
                        what = ("open" if not new_closed[i] else "close" if not closed[i]
                                else "") + (
                            "" if not new_closed[i]
                            else " stick" if P.frictional[i] and new_sdir[i] == 0
                            else " slide" if new_sdir[i] and P.dim[i] == 2
                            else f" slide {'+' if new_sdir[i] > 0 else '-'}" if new_sdir[i] else "")
                        transitions.append((t, P.labels[i], what.strip()))
                        transition_states.append(np.concatenate([q, v]))
                    sticking = new_closed & P.frictional & (new_sdir == 0)
                    P.anchor_slip(t, q, np.flatnonzero(sticking & ~(closed & (sdir == 0))))
                    closed, sdir = new_closed, new_sdir
                    hints, release = {}, []
                    sysp, n_rows, t_rows, ref, q, v, d0, locked = _start_phase(
                        model, t, q, v, closed, sdir, idx, sol, vel_tol, gap_tol, touching,
                        opts.consistency_tol if t > t0 else None)
                    # The contact problem decided from the velocities before the phase's settle
                    # (:func:`_settle`); where the phase then moves otherwise (nearly dependent
                    # held rows: :func:`_start_departs`), it decides again from the settled state,
                    # whose held rows are then already zero.
                    # (the phase's step there, shared with its forces' watch)
                    try:
                        step = solve_step(sysp, t, q, v)
                    except GaussoptError:
                        step = None
                    if again or t <= t0 or not _start_departs(step, sol):
                        break
                    G, cg, _ = P.normal_rows(t, q, v)
                    gdot = G @ v + cg
            implicit = opts.method in _EXPLICIT and (restiff or _slow_slide(
                P, getattr(sysp, "_force", None), t, q, v, closed, sdir, locked, vel_tol))
            restiff = False
            forces = _PhaseForces(model, sysp, closed, sdir, n_rows, t_rows, t, q, v, step)
            # (an open point away from its surface is watched by its gap alone: its rate is
            # no value of gap / (t - t_start) there)
            events, kinds = _phase_events(model, forces, closed, sdir, n_rows, t_rows, t, q, v,
                                          touching & ~closed & (np.abs(gdot) <= vel_tol),
                                          np.where(touching, gdot, np.nan), 1e-3 * gap_tol,
                                          d0, vel_tol, locked, ref, (rtol, atol),
                                          stiff_watch=opts.method in _EXPLICIT and not implicit)
            te_phase = None
            if t_eval is not None:
                # the output times not yet passed ([t1] as a placeholder, dropped in _join)
                done = pieces[-1][0].t[-1] if pieces and len(pieces[-1][0]) else -np.inf
                te_phase = t_eval[(t_eval >= t) & (t_eval > done) & (t_eval <= t1)]
                if te_phase.size == 0:
                    te_phase = np.array([t1])
            tr = phase(sysp, t, t1, q, v, opts.but(events=tuple(events), t_eval=te_phase,
                                                   method=_IMPLICIT if implicit else opts.method))
            if implicit:
                implicit_phases.append((t, float(tr.t[-1]) if len(tr) else t))
            if forces.members:
                # indeterminate forces: report the least-norm distribution inside every cone
                forces.adjust(tr)
                indeterminate.append((float(tr.t[0]) if len(tr) else t, float(tr.t[-1]) if
                                      len(tr) else t, [P.labels[i] for i in forces.members]))
            pieces.append((tr, closed.copy(), n_rows, t_rows, sdir.copy(), ref, locked))
            if not tr.success:
                status, message, exception = tr.status, tr.message, tr.exception
                break
            if guard is not None and guard.interrupted:
                raise KeyboardInterrupt      # (while the phase's result was assembled)
            if tr.status == 0:
                break
            te = min(float(x[-1]) for x in tr.t_events if x.size)
            hits = [j for j, x in enumerate(tr.t_events) if x.size and float(x[-1]) == te]
            j0 = hits[0]
            q, v = tr.q_events[j0][-1].copy(), tr.v_events[j0][-1].copy()
            zero_phases = zero_phases + 1 if te == t else 0
            if zero_phases > _MAX_ZERO_PHASES:
                status = -1
                message = (f"The contact state did not settle at t={t}: {zero_phases} phases ended "
                           "where they started (points " + ", ".join(
                               P.labels[kinds[j][1]] for j in hits) + "); the contact problem is "
                           "degenerate here.")
                break
            lifted[:] = False
            for j in hits:
                kind, i, d = kinds[j]
                if kind == "open":
                    lifted[i] = True
                    hints[i] = OPEN
                elif kind == "slide":
                    hints[i] = SLIDE_POS if d > 0 else SLIDE_NEG
                elif kind == "slip0":
                    hints[i] = STICK
                elif kind == "touch":
                    hints[i] = STICK if P.frictional[i] and not P.sticks[i] else CLOSED
                elif kind == "group":
                    release.append(list(forces.members))
            restiff = all(kinds[j][0] == "stiff" for j in hits)
            t = te
            _check_lift_off(model, t, q, v, closed, sdir, lifted & P.sticks, vel_tol, d0,
                            locked)
    except ContactSolveError as e:
        if not pieces:                       # nothing computed: the state cannot start
            raise
        status, message, exception = -1, f"The contact problem failed at t={t}: {e}", e
    except KeyboardInterrupt as e:
        if not pieces:
            raise
        t_stop = float(pieces[-1][0].t[-1]) if len(pieces[-1][0]) else t
        status, message, exception = -1, f"Interrupted (KeyboardInterrupt) at t={t_stop}.", e
    except Exception as e:
        # the model's own functions failed between two phases (a gap, its Jacobian or
        # convective term, a contact force): the phases computed so far are kept
        if not pieces:
            raise
        status, exception = -1, e
        message = (f"The run stopped at t={t} where the contacts' functions failed: "
                   f"{type(e).__name__}: {e}")
    if guard is not None:
        guard.finishing()                    # a Ctrl-C from here on is deferred
    wall = time.perf_counter() - wall0
    traj = _join(model, pieces, m, k, t_eval)
    traj.status, traj.message, traj.exception = status, message, exception
    if guard is not None and guard.deferred:
        traj.meta["deferred_interrupts"] = guard.deferred
    if dense_output:
        traj.sol = ContactDenseSolution([p[0].sol for p in pieces])
    traj.impacts = impacts
    # the run's own time: compiling or loading compiled code (counted by each phase) is not
    compile_time = float(traj.stats.get("compile_time", 0.0))
    traj.stats["wall_time"] = wall - compile_time
    steps = traj.stats.get("steps", 0)
    traj.stats["time_per_step"] = (traj.stats.get("integration_time", wall - compile_time)
                                   / steps if steps else float("nan"))
    traj.stats["impacts"] = len(impacts)
    traj.stats["phases"] = len(pieces)
    traj.meta["contact_transition_states"] = (np.array(transition_states) if transition_states
                                              else np.zeros((0, 2 * q.shape[0])))
    traj.meta.update({"contact_points": list(P.labels), "contact_transitions": transitions,
                      "zeno_height": zeno_height, "contact_indeterminate": indeterminate,
                      "contact_implicit": implicit_phases})
    return traj


class ContactDenseSolution:
    """``Trajectory.sol`` of a contact run: the dense solutions of its phases in turn.

    ``sol(t) -> (q, v)`` as :class:`gaussopt.integrate.dense_output.DenseSolution` (within a phase the
    integrator's interpolant, projected onto that phase's constraints, its closed contacts
    included; the stored states at the accepted steps). At the time of an impact, or of
    any change of the contact state, the state after it is returned (the solution is
    continuous from the right: ``v`` jumps at an impact; the run's samples hold the state
    before and after). ``phases`` lists the phases' own dense solutions.
    """

    def __init__(self, phases: Sequence[Any]):
        if not phases or any(p is None for p in phases):
            raise ModelError("internal: a contact run's dense solution needs every phase's")
        self.phases = list(phases)
        self.n = self.phases[0].n
        self._starts = np.array([p.t_min for p in self.phases])

    @property
    def t_min(self) -> float:
        return float(self._starts[0])

    @property
    def t_max(self) -> float:
        return float(self.phases[-1].t_max)

    def __call__(self, t):
        """``(q, v)`` at ``t`` (float: shapes (n,); array of N: shapes (N, n))."""
        ts, scalar = evaluation_times(t)
        bad = ~((ts >= self.t_min) & (ts <= self.t_max))
        if np.any(bad):
            raise ModelError(f"`t` must lie within the computed span [{self.t_min}, "
                             f"{self.t_max}], found {ts[bad][0]!r}.")
        # the last phase that starts at or before t: after a transition at t, the new state
        which = np.searchsorted(self._starts, ts, side="right") - 1
        q, v = np.empty((ts.size, self.n)), np.empty((ts.size, self.n))
        for j in np.unique(which):
            idx = np.flatnonzero(which == j)
            q[idx], v[idx] = self.phases[j](ts[idx])
        if scalar:
            return q[0].copy(), v[0].copy()
        return q, v

    def __repr__(self) -> str:
        return (f"ContactDenseSolution(t=[{self.t_min}, {self.t_max}], "
                f"phases={len(self.phases)})")


def _gap_event(P: ContactPoints, i: int, t_start: float, rate0: Optional[float],
               offset: float = 0.0, gap0: float = 0.0):
    """The closing of point ``i``: ``gap``, or, for a point that starts the phase touching
    (its gap ``gap0`` at ``t_start``, within the run's gap tolerance of zero, leaving at
    the rate ``rate0 >= 0``), ``(gap - gap0) / (t - t_start)`` (``rate0`` at ``t_start``):
    its zero at the start is divided out, so a landing within the phase's first step (a
    short flight, an integrator step longer than it) is still a sign change.

    The landing is where the gap comes back to ``gap0``, not to zero: a point that starts
    below its surface by the accuracy of a projection (dm_control's humanoid rocking on
    its right foot's two capsules, one 1.6e-9 m below the floor rising at 1.1e-5 m/s and
    decelerating at 0.078 m/s^2: its apex 8.5e-10 m below the floor) was watched by
    ``gap / (t - t_start)``, negative from the start: a landing at ``t_start``, after
    which the contact problem closed the point while it still rose at four times the
    velocity tolerance, and the phase refused to start. Measured from ``gap0`` it flies
    0.28 ms and lands at its own speed (an impact).

    A point that has just lifted off leaves tangentially (``gap' = gap'' = 0`` there, to
    the accuracy of the located lift-off): its gap may dip by rounding before it grows, so
    its closing is ``gap + offset`` (``offset`` far above rounding, far below the gap
    tolerance), not a spurious landing at the lift-off, until the gap has grown past
    ``offset``: from then on the watch is the gap itself (the offset is disarmed, a
    hysteresis), so the landing is located where the gap is zero. A point whose gap is an
    unsigned distance (:attr:`gaussopt.Contact.unsigned`: a sphere or capsule
    against another, positive again past a passage) is watched also at interior points
    of the steps, in any order of time; its offset is disarmed at the end of the first
    step that ends with the gap past it (the tracker's ``rebase``), so a landing within
    that first step is located at ``gap = -offset`` (late by ``offset / |gap'|``). (Kept
    armed, the offset put the landing late by ``offset / |gap'|``: for Glocker's woodpecker, whose sleeve
    lands again at 8.5 mm/s 2.7 ms after an impact without rebound, 2.7e-10 s at
    ``rtol = 1e-12`` and 2.7e-7 s at the defaults, above the run's own error.) Disarming
    keeps the sign: the watch is positive before and after.

    A point leaving at ``rate0``: the phase's first steps project its state onto the closed
    points' rows, which may move the point below its surface by the projection's accuracy
    (dm_control's humanoid with ten points closed put a foot leaving at 2.9e-4 m/s 4.7e-10
    m below the floor: its watch changed sign at once, ``rate0`` at ``t_start`` and ``-4.7e-10
    / (t - t_start)`` after it, the contact problem let the foot leave again, and 26 phases
    of zero length ended the run, "did not settle"). A gap below zero by at most ``offset``
    at the start as the run projects it (:meth:`~gaussopt.integrate.dense_output.
    EventTracker.start_at`), else at the watch's first state after ``t_start``, is that
    dip (read at the first state only, it was missed where the first step was long enough
    to hold the real landing: MuJoCo's humanoid's foot at 1.1207 s, moved 1.4e-10 m by the
    projection, hopping 4e-11 m): the watch is then ``(gap - 2
    g_1) / (t - t_start)`` (``g_1`` that gap), positive there, and a landing is located
    where the gap is ``2 g_1``, within ``2 offset`` of the surface. A point whose gap is not
    negative there (a ball leaving at its rebound) is watched exactly as before. (All of
    this relative to ``gap0``: the dip is ``g_1 - gap0``.)"""
    rebase = None
    if rate0 is None:
        if offset == 0.0:
            def from_gaps(t, gaps):
                return float(gaps[i])
        elif P.unsigned[i]:
            # (watched at interior points too, in any order of t: armed at a step's end, for
            # the next step, so that within a step the watch is one function of the state)
            armed, end = [False], [-math.inf, 0.0]

            def from_gaps(t, gaps):
                g = float(gaps[i])
                if t >= end[0]:
                    end[:] = [t, g]
                return g if armed[0] else g + offset

            def rebase(t, q, v):
                if not armed[0] and t == end[0] and end[1] > offset:
                    armed[0] = True
        else:
            armed = [False]

            def from_gaps(t, gaps):
                g = float(gaps[i])
                if armed[0]:
                    return g
                if g > offset:
                    armed[0] = True
                    return g
                return g + offset
    else:
        dip = [None]                    # twice the start's dip (0: none), set at first

        def from_gaps(t, gaps):
            if t == t_start:
                # (the start as the phase's output gives it, projected onto the closed
                # points' rows: a dip there is the projection's, EventTracker.start_at)
                g = float(gaps[i]) - gap0
                if dip[0] is None and -offset <= g < 0.0:
                    dip[0] = 2.0 * g
                return rate0
            g = float(gaps[i]) - gap0
            if dip[0] is None:
                dip[0] = 2.0 * g if -offset <= g < 0.0 else 0.0
            return (g - dip[0]) / (t - t_start)

    def gap(t, q, v):
        return from_gaps(t, P.gaps(t, q))
    gap.__name__ = f"gap of {P.labels[i]}"
    if P.unsigned[i]:
        # (a distance, positive again past a passage: also at interior points of the steps
        # where the screen's parabola comes near zero; Contact.unsigned)
        gap.interp_points = _INTERP
        gap.interp_screen = True
        if rebase is not None:
            gap.rebase = rebase
    # (the tracker evaluates every point's watch from one evaluation of all gaps per state:
    # EventTracker's ``shared``)
    gap.shared, gap.from_shared = P.gap_source, from_gaps
    return gap


class _PhaseForces:
    """The contact forces of one phase: ``forces(t, q, v)`` the multipliers of the phase's
    Gauss step (minimum norm), shared by the phase's force events (the normal force of
    every closed point and the cone's edges of every sticking one are evaluated at the
    same states: the ends of each step and its interior points), each state solved once.

    Where the rows of the closed points are dependent (two sticking corners of a box on a
    plane; a ladder sticking at a rough wall and floor), the forces of those points
    (``members``) are not determined: every ``lam + Z y`` (``Z`` spanning the null space of
    the rows' transpose) balances the motion. Their state is then watched as one: the
    phase continues while *some* distribution keeps every member's normal force >= 0 and
    its friction in its cone (:meth:`margin`, the largest margin of such a distribution,
    :func:`~gaussopt.gauss.contact_problem.max_margin`), and the forces reported are the
    least-norm distribution inside every cone (:meth:`distribution`, :meth:`adjust`).
    Per phase: the phase system's no-slip rows depend on the slip anchors of its start.
    """

    #: states kept (a step's ends and interior points, and Brent's iterates); then cleared
    SIZE = 64

    def __init__(self, model: "_Model", sysp: System, closed: np.ndarray, sdir: np.ndarray,
                 n_rows: list, t_rows: list, t: float, q: np.ndarray, v: np.ndarray,
                 step=None):
        self.sysp = sysp
        self._memo: dict = {}
        #: the sliding points' reference directions, whose moves the memo's keys follow
        self._ref = getattr(getattr(sysp, "_force", None), "reference", None)
        #: spatial points: the distribution of the last margin computed (multipliers), whose
        #: own margin bounds the largest one from below (:meth:`margin`)
        self._held: Optional[np.ndarray] = None
        P = model.points
        M, F, A, _ = sysp.evaluate(t, q, v)
        step = solve_step(sysp, t, q, v) if step is None else step
        self._solver = _cached_solver(sysp, "closed_form", {})    # (solve_step's own)
        self._solver.take_compiled_step()
        a = step.a
        #: rounding scale of a force (as the contact problem's): |M a| + |F|, times 1e4 eps n,
        #: plus what the forces move in the time a located event is known to (Brent's
        #: 4 eps (1 + |t|)): where the applied force nets to zero from large terms (a pull
        #: that just cancels the weight at a lift-off) |F| says nothing of their rounding,
        #: and a phase started at such an event with its force at +1e-15 ended where it
        #: started, 26 times (:meth:`_rate`)
        self.tol = 1e4 * _EPS * M.shape[0] * (float(np.abs(M @ a).max(initial=0.0))
                                              + float(np.abs(F).max(initial=0.0)))
        if any(closed):
            self.tol += 8.0 * _EPS * (1.0 + abs(t)) * self._rate(t, q, v, a, step.multipliers)
        #: a phase with sliding points: their friction is part of the phase's force, from
        #: their normal forces ``N_part`` of one solve (:func:`_coulomb_force`). A
        #: distribution of indeterminate forces must move each sliding point's friction
        #: with its normal force: the distributions are ``lam + Z y`` over the null space
        #: of the force columns ``W^T`` (``G_i - mu s T_i`` for a sliding point), with
        #: ``lam`` the multipliers of that balance. Over ``null(A^T)`` a redistribution
        #: moved normal load off a sliding point while its friction stayed: a slab held by
        #: ten sticking points and ten sliding ones at zero slip passed for holding while
        #: pushed 50 % beyond ``mu m g`` (a positive margin), and the run reported rest.
        self._balance = getattr(getattr(sysp, "_force", None), "balance", None)
        # the conditions c_j . lam >= 0 of the points with indeterminate forces
        Z = self._null(self._balance(t, q, v)[1] if self._balance is not None else A)
        closed_idx = list(np.flatnonzero(closed))
        self.members = []
        rows = []
        #: spatial points: the members' circular cones as (normal row, tangent rows or None,
        #: mu, False) for :func:`~gaussopt.gauss.contact_cone.best_distribution`; else None
        self.cone_points = [] if P.spatial else None
        for j, i in enumerate(closed_idx):
            t_all = [] if t_rows[j] < 0 else [t_rows[j]] + ([t_rows[j] + 1] if P.dim[i] == 2
                                                             else [])
            hit = np.abs(Z[n_rows[j]]).max(initial=0.0) > 1e-8 or any(
                np.abs(Z[r]).max(initial=0.0) > 1e-8 for r in t_all)
            if not hit:
                continue
            self.members.append(int(i))
            if self.cone_points is not None:
                finite = bool(t_all) and P.frictional[i] and not P.sticks[i]
                self.cone_points.append((n_rows[j], tuple(t_all) if finite else None,
                                         float(P.mu[i]), False))
                continue
            c = np.zeros(A.shape[0])
            c[n_rows[j]] = 1.0
            rows.append(c)
            if t_rows[j] >= 0 and P.frictional[i] and not P.sticks[i]:
                for sgn in (1.0, -1.0):
                    c = np.zeros(A.shape[0])
                    c[n_rows[j]], c[t_rows[j]] = P.mu[i], -sgn
                    rows.append(c)
        self.C = np.array(rows) if rows else np.zeros((0, A.shape[0]))

    def _rate(self, t, q, v, a, lam) -> float:
        """The largest rate of change of the forces along the motion at ``(t, q, v)``: a
        difference over ``1e-8 max(1, |t|)`` (unprojected: a scale, not a value; 0 where
        the step there fails)."""
        dt = 1e-8 * max(1.0, abs(t))
        try:
            lam1 = self._solver.multipliers(t + dt, q + dt * v, v + dt * a)
        except Exception:  # noqa: BLE001 - a scale estimate: the model's own functions may
            return 0.0     # refuse a state off the constraints by O(dt^2); none is then added
        d = float(np.abs(np.asarray(lam1) - lam).max(initial=0.0)) / dt
        return d if math.isfinite(d) else 0.0

    @staticmethod
    def _null(A: np.ndarray) -> np.ndarray:
        """An orthonormal basis of the null space of ``A^T`` (the multiplier combinations
        that exert no force), by the rank decision of the row-normalized rows."""
        if A.shape[0] == 0 or A.shape[1] == 0:
            return np.zeros((A.shape[0], 0))
        rn = np.sqrt((A * A).sum(axis=1))
        rs = 1.0 / np.where(rn > 0, rn, 1.0)
        U, sig, _ = np.linalg.svd(A * rs[:, None])
        rank = int(np.count_nonzero(sig > DEFAULT_RANK_TOL * (sig[0] if sig.size else 0.0)))
        Zs = U[:, rank:] * rs[:, None]          # A^T (rs u) = (rs A)^T u = 0
        if Zs.shape[1] == 0:
            return Zs
        Z, _ = np.linalg.qr(Zs)
        return Z

    def __call__(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        key = (float(t), np.asarray(q, dtype=float).tobytes(),
               np.asarray(v, dtype=float).tobytes(),
               self._ref.version if self._ref is not None else 0)
        lam = self._memo.get(key)
        if lam is None:
            if len(self._memo) >= self.SIZE:
                self._memo.clear()
            # (solve_step's solver and step, without its result's diagnostics)
            self._solver.reset()
            lam = np.array(self._solver.multipliers(float(t), np.asarray(q, dtype=float),
                                                    np.asarray(v, dtype=float)))
            lam.setflags(write=False)
            self._memo[key] = lam
        return lam

    def _parts(self, t, q, v):
        if self._balance is not None:
            lam, W = self._balance(t, q, v)
            return lam, self._null(W)
        lam = self(t, q, v)
        _, _, A, _ = self.sysp.evaluate(t, q, v)
        return lam, self._null(A)

    def margin(self, t: float, q: np.ndarray, v: np.ndarray) -> float:
        """The largest margin (force units) by which a distribution of the members' forces
        keeps every normal force >= 0 and every friction force inside its cone; in space,
        where it is positive beyond the forces' rounding, possibly a positive lower bound
        of it (the event needs its sign: see the comment)."""
        lam, Z = self._parts(t, q, v)
        if self.cone_points is not None:
            lam = np.asarray(lam)
            # The group holds while its largest margin is positive; only the sign decides
            # the event (Brent's method locates its root from signs). The distribution of
            # the last margin computed, carried to this state (its part the null space can
            # reach), has a margin of its own: a lower bound of the largest, and so has the
            # least-norm distribution. Beyond the rounding of the forces either proves the
            # group holds without the cone program (a body resting on 20 points evaluated
            # it at every interior point of every step); at or below it, the exact margin
            # decides.
            if Z.shape[1]:
                low = cone_slack(least_norm(lam, Z), self.cone_points)
                if low > self.tol:
                    return low
            if self._held is not None and Z.shape[1]:
                low = cone_slack(lam + Z @ (Z.T @ (self._held - lam)), self.cone_points)
                if low > self.tol:
                    return low
            val, held = best_distribution(lam, Z, self.cone_points)
            if val > 0:
                self._held = held
        else:
            val = max_margin(self.C @ lam, self.C @ Z)
        return val if math.isfinite(val) else (1e300 if val > 0 else -1e300)

    def distribution(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The least-norm multipliers with every member's forces admissible (the minimum-norm
        ones where no distribution is: the phase then ends at its group event)."""
        lam, Z = self._parts(t, q, v)
        if self.cone_points is not None:
            return least_norm_in_cones(np.asarray(lam), Z, self.cone_points)
        if Z.shape[1] == 0 or self.C.shape[0] == 0:
            return np.array(lam)
        y = admissible(-Z.T @ lam, -self.C @ Z, self.C @ lam, np.full(self.C.shape[0], self.tol))
        return np.array(lam) if y is None else lam + Z @ y

    def adjust(self, tr: Trajectory) -> None:
        """Replace the phase run's multipliers by :meth:`distribution` at every sample."""
        for r in range(len(tr)):
            tr.multipliers[r] = self.distribution(float(tr.t[r]), tr.q[r], tr.v[r])


def _phase_events(model: "_Model", forces: _PhaseForces, closed, sdir, n_rows, t_rows,
                  t, q, v, resting, gdot, offset, d0=None, vel_tol=None, locked=None,
                  ref=None, tols: Optional[tuple[float, float]] = None,
                  stiff_watch: bool = False) -> tuple[list, list]:
    """The terminal events of a phase and their kinds ``(kind, point, direction)``: a closed
    point's normal force reaching zero ("open") and, sticking with finite friction, its
    force reaching either edge of its cone ("slide"), or, sliding, its slip rate reaching
    zero ("slip0"), a spatial one sliding from rest along its locked ``d0``, its slip
    across ``d0`` reaching ``2 vel_tol`` ("turn"); the members of an indeterminate group
    together ("group"); an open point's closing ("touch").

    A force that starts at zero within rounding (a point touching without load) is watched
    with an offset of its rounding scale, so that rounding noise around zero is no event;
    an open point resting on its surface (``resting``: touching with a zero gap rate) or
    just lifted off is watched at ``gap + offset`` for the same reason. ``gdot``: the gap
    rates of the touching points (NaN for the others, which are watched by their gap:
    :func:`_gap_event`'s ``(gap - gap0) / (t - t_start)`` with its rate at ``t_start``
    holds only for a gap within the gap tolerance there). ``ref``: the phase force's
    reference directions (:meth:`_Model.phase`), which the sliding spatial points' slip
    watches move.
    ``tols``: the run's ``(rtol, atol)``, from which a sliding spatial point's slip speed
    is also watched at ten times its integration resolution (:func:`_slip_floor_event`).
    ``stiff_watch`` (a phase under an explicit method): a spatial point sliding with
    ``u/|u|`` is watched becoming stiff below ``_STIFF vel_tol`` ("stiff":
    :func:`_slip_stiff_event`).
    """
    P = model.points
    events, kinds = [], []
    lam0 = forces(t, q, v)
    tol = forces.tol
    gaps0 = P.gaps(t, q)

    def add(f, kind):
        f.terminal, f.direction = True, -1
        events.append(f)
        kinds.append(kind)

    closed_idx = list(np.flatnonzero(closed))
    coulomb = getattr(forces.sysp, "_force", None)       # (a phase with sliding points)
    if tols is not None and P.spatial:
        cone_T = P.cone_rows(t, q, v)[0]
        speed0 = np.hypot(*P.slip_velocities(t, q, v).T)

    def slip_events(i):
        """A sliding point's: its slip rate reaching zero; in space, sliding from rest
        along its locked d0, its slip across d0 reaching 2 vel_tol."""
        if P.dim[i] == 2:
            add(_slip_dir_event(P, i, ref, t, q, v, vel_tol[i], 1e-3 * vel_tol[i]),
                ("slip0", i, 0))
            if tols is not None:
                # ten times the integration's resolution of this slip: its rows applied to
                # the velocities' error scales atol + rtol |v_j|
                floor = 10.0 * float((np.abs(cone_T[i]) @ (tols[1] + tols[0] * np.abs(v))
                                      ).max())
                # (armed above twice its floor: a phase that starts at the floor, its slip
                # dying out, would end where it started -- gymnasium's HumanoidStandup's
                # feet, sliding from rest, slip 4e-12 above the floor and falling: 26 such
                # phases, "did not settle")
                if speed0[i] > 2.0 * floor:
                    add(_slip_floor_event(P, i, floor), ("slip0", i, 0))
            if locked is not None and locked[i]:
                add(_slip_turn_event(P, i, d0[i], 2.0 * vel_tol[i]), ("turn", i, 0))
            elif stiff_watch:
                # (a phase whose slide starts below twice the switch is implicit already,
                # :func:`_slow_slide`: no phase starts at its switch)
                add(_slip_stiff_event(P, coulomb, i, _STIFF * vel_tol[i]), ("stiff", i, 0))
        else:
            add(_slip_rate_event(P, i, int(sdir[i])), ("slip0", i, 0))

    for i in range(P.k):
        if closed[i]:
            if i in forces.members:
                # its forces are watched with the group's; its slip as every point's
                if P.frictional[i] and not P.sticks[i] and sdir[i] != 0:
                    slip_events(i)
                continue
            j = closed_idx.index(i)
            N0 = float(lam0[n_rows[j]])
            add(_force_event(forces, n_rows[j], tol if abs(N0) <= tol else 0.0), ("open", i, 0))
            if P.frictional[i] and not P.sticks[i] and P.dim[i] == 2:
                if sdir[i] == 0:
                    # the circular cone: mu N - |t| reaches zero
                    t_r = t_rows[j]
                    m0 = P.mu[i] * N0 - float(np.hypot(lam0[t_r], lam0[t_r + 1]))
                    add(_circle_event(forces, n_rows[j], t_r, P.mu[i],
                                      tol if abs(m0) <= tol else 0.0), ("slide", i, 1))
                else:
                    slip_events(i)
            elif P.frictional[i] and not P.sticks[i]:
                if sdir[i] == 0:
                    for d in (-1, 1):       # mu N + d T (T reaches -d mu N: slides d)
                        m0 = P.mu[i] * N0 + d * float(lam0[t_rows[j]])
                        add(_cone_event(forces, n_rows[j], t_rows[j], P.mu[i], d,
                                        tol if abs(m0) <= tol else 0.0), ("slide", i, d))
                else:
                    slip_events(i)
        else:
            rest = bool(resting[i])
            rate = float(gdot[i])
            away = not math.isfinite(rate)
            add(_gap_event(P, i, t, None if rest or away else rate, 0.0 if away else offset,
                           0.0 if rest or away else float(gaps0[i])), ("touch", i, 0))
    if forces.members:
        m0 = forces.margin(t, q, v)
        # A margin below zero at the start is the contact problem's choice within its own
        # accuracy: watched from there (offset ``tol - m0``), so that its further fall is
        # an event. That accuracy is the certificate's (contact_cone._certify): a margin
        # ``mu N - |t|`` errs by the forces' rounding ``tol`` times ``1 + mu`` (the larger
        # coefficient of the members), in space plus the cone program's ``10 _SOCP_TOL``
        # of the force scale. (Without the ``1 + mu``, dm_control's humanoid with its
        # self-contacts mapped stopped at t = 0.565 s: a state the contact problem had
        # certified started its phase with a margin of -6.1e-8 N against a band of
        # 5.9e-8; its forces' rounding scale 5.4e-8, mu = 1.) Below that accuracy the
        # state chosen cannot hold at all: a watch starting negative would never change
        # sign, and the phase would run on with forces outside their cones.
        mus = P.mu[forces.members]
        mu_max = float(np.max(mus[np.isfinite(mus)], initial=0.0))
        band = tol * (1.0 + mu_max) + (
            10 * _SOCP_TOL * max(1.0, float(np.abs(lam0).max(initial=0.0)))
            if forces.cone_points is not None else 0.0)
        if m0 < -band:
            raise ContactSolveError(
                f"at t={t} the indeterminate forces of "
                f"{', '.join(P.labels[i] for i in forces.members)} admit no distribution "
                f"inside their friction cones (largest margin {m0:.3g}): the contact state "
                "chosen cannot hold.", [P.labels[i] for i in forces.members])
        add(_group_event(forces, tol if abs(m0) <= tol else tol - m0 if m0 < 0 else 0.0),
            ("group", forces.members[0], 0))
    return events, kinds


def _group_event(forces: _PhaseForces, offset: float):
    """The members of an indeterminate group can no longer hold: no distribution of their
    forces keeps every normal force >= 0 and every friction force in its cone."""
    def group(t, q, v):
        return forces.margin(t, q, v) + offset
    group.__name__ = "indeterminate contact forces reach their cones"
    group.interp_points = _INTERP
    group.interp_screen = True
    return group


def _circle_event(forces: _PhaseForces, n_row: int, t_row: int, mu: float,
                  offset: float = 0.0):
    """``mu N - |t|``: a sticking spatial point's friction force reaches its circular cone
    (it then starts to slide, in the direction the contact problem decides: the excess
    force's)."""
    def circle(t, q, v):
        lam = forces(t, q, v)
        return float(mu * lam[n_row] - math.hypot(lam[t_row], lam[t_row + 1])) + offset
    circle.__name__ = "circular friction cone"
    circle.interp_points = _INTERP
    circle.interp_screen = True
    return circle


def _slip_dir_event(P: ContactPoints, i: int, ref: "_SlipReference", t_start: float, q0, v0,
                    vel_tol: float, offset: float):
    """A sliding spatial point's slip velocity ``u`` stops: ``u . d`` reaches zero, ``d``
    its direction at the start of each step (``d0`` at the phase's start; the event's
    ``rebase``, :class:`~gaussopt.integrate.dense_output.EventTracker`). ``|u|`` itself
    never changes sign, so its return to zero is watched through ``u . d``, which is
    ``|u|`` at the step's start and crosses zero where ``u`` vanishes. A slip that turns
    by a right angle within one step ends the phase too, and the contact problem
    continues the slide with the new direction. A slide that starts from rest (``|u| <=
    vel_tol``) is watched as ``u . d0 + offset`` (``offset`` far below ``vel_tol``, far
    above rounding; ``d0`` kept through the phase): its slip acceleration may start at
    zero (a push growing through the cone's edge) and, the onset being located to
    rounding, dip by rounding first."""
    u0 = P.slip_velocities(t_start, q0, v0)[i]
    off = offset if float(np.hypot(u0[0], u0[1])) <= vel_tol else 0.0

    def slip_dir(t, q, v):
        return float(ref.at(i, t) @ P.slip_velocities(t, q, v)[i]) + off

    def rebase(t, q, v):
        # the direction at the next step's start (a slip that turns -- a top precessing
        # -- is watched from its own direction, not the phase's first one: the phase
        # ends where it stops, not every quarter turn). Also below ``vel_tol``: a slip
        # that dies out while its direction swings (a box's corner pivoting as it spins)
        # chattered about 3e-9 m/s with its force flipping, always on the watch's
        # positive side of a direction kept from above ``vel_tol``, in 7e-9 s steps; a
        # flip of the direction within a step is a root of the rebased watch, the point
        # is then at rest by the run's own measure and the contact problem decides it
        if off == 0.0:
            u = P.slip_velocities(t, q, v)[i]
            nu = float(np.hypot(u[0], u[1]))
            if nu > 0.0:
                ref.move(i, t, u / nu)
    slip_dir.__name__ = f"slip velocity of {P.labels[i]} along its direction"
    slip_dir.rebase = rebase
    return slip_dir


def _slip_floor_event(P: ContactPoints, i: int, floor: float):
    """``|u| - floor``: a sliding spatial point's slip speed falls to ``floor`` (ten times
    the integration's resolution of this slip, far below the driver's ``vel_tol``), where
    the point is at rest by the run's measure and the contact problem decides it.

    Why: a slip that dies out while the body turns (a box's corner pivoting as it spins)
    can hover at the integrator's resolution (5e-9 m/s at the default tolerances) with
    its direction swinging by tens of degrees from step to step, never crossing zero
    along the watched direction (:func:`_slip_dir_event`): the friction ``u/|u|`` of such
    a slip is noise, and the run crawled in 1.6e-8 s steps (fuzzed drop, seed 89: 11,684
    steps in the last 1e-5 s before it was stopped). A slip that stops along a steady
    direction passes ``floor`` a moment before its stop: the phase ends there, ``floor /
    |u'|`` early, and the contact problem sees the point at rest. ``floor`` is ten times
    the slip's resolution (its rows applied to the velocities' error scales ``atol +
    rtol |v_j|``), not the driver's ``vel_tol``, whose ``rtol |v|`` counts the fastest
    coordinate: a tippe top's spin put it at 2e-9 m/s at ``rtol = atol = 1e-12``, its
    slip stop came 6e-10 s early, and its Euler parameters, turning at 90 /s, 5e-8 off."""
    def slip_floor(t, q, v):
        u = P.slip_velocities(t, q, v)[i]
        return float(np.hypot(u[0], u[1])) - floor
    slip_floor.__name__ = f"slip speed of {P.labels[i]}"
    return slip_floor


def _slow_slide(P: ContactPoints, force: Optional[Callable], t: float, q: np.ndarray,
                v: np.ndarray, closed: np.ndarray, sdir: np.ndarray, locked: np.ndarray,
                vel_tol: np.ndarray) -> bool:
    """Whether a spatial point slides with ``-mu N u/|u|`` (not locked) at a slip of at
    most ``2 _STIFF vel_tol`` with a stiffness ratio of at least ``_STIFF_RATIO / 2``
    (:func:`_slip_stiff_event`): its phase is stiff, or nearly, and is integrated by the
    implicit method from its start (the factors 2 are a hysteresis: a phase whose settled
    start lay just on the safe side of the switch would be ended by its stiff watch within
    its first step, a phase of next to no length). ``force``: the phase's Coulomb force
    (:func:`_coulomb_force`)."""
    if not P.spatial or force is None:
        return False
    u = P.slip_velocities(t, q, v)
    free = closed & (sdir != 0) & (P.dim == 2) & ~np.asarray(locked, dtype=bool)
    for i in np.flatnonzero(free & (np.hypot(u[:, 0], u[:, 1]) <= 2.0 * _STIFF * vel_tol)):
        fw, a_par = force.stiffness(t, q, v, int(i))
        if fw >= 0.5 * _STIFF_RATIO * a_par and fw > 0.0:
            return True
    return False


def _slip_stiff_event(P: ContactPoints, force: Callable, i: int, limit: float,
                      ratio: float = _STIFF_RATIO):
    """A spatial point sliding with its friction along ``u/|u|`` becomes stiff: below the
    slip speed ``limit`` (``_STIFF vel_tol``), its friction's own rate of turning the slip
    over the slip's rate of change (``mu N w / |a_par|``, ``force.stiffness``:
    :func:`_coulomb_force`) rises to ``ratio`` (:data:`_STIFF_RATIO`); the run then goes on
    in the same contact state with an implicit method (:data:`_IMPLICIT`).

    Why: ``-mu N u/|u|`` damps the slip across its own direction at the rate ``lambda =
    mu N w / |u|`` (``w`` the point's mobility across its slip), so an explicit method's
    steps are stable only below a few ``1/lambda``. A slip that changes by its own size in
    ``tau = |u| / |a_par|`` then needs about ``lambda tau = mu N w / |a_par|`` of them
    for that: near 1 for a slide that friction decelerates to its stop (the explicit
    method's accuracy asks for as many: not stiff), without bound where the slip hovers
    (a load on its cone's edge: a creeping body). gymnasium's HumanoidStandup's head, its
    slip held at 1e-7 m/s by such a load while every other point stuck, was integrated in
    6.8e-8 s steps of constant size, and a puck whose slip slows from 4e-7 to 7e-8 m/s
    under a push at its cone took 52,196 steps of DOP853 for 0.02 s and ended 5e-8 m/s
    off (the chatter of the slip's direction lowers the mean friction), where Radau takes
    16 steps and ends 4e-14 m/s off. A speed alone (the watch's first form) also switched
    the short slides of a humanoid's rocking feet to their stops: 101 Radau phases of
    finite-difference Jacobians, 229 s of a 492 s run, where DOP853 takes a few steps.
    Nothing in the physics is approximated: the slide's force is the same, only its
    integration changes.

    The value: ``|u| - limit`` above ``limit`` (the ratio is not computed there), else
    ``limit (ratio |a_par| - mu N w) / (ratio |a_par| + mu N w)``, continuous where the
    ratio crosses ``ratio`` and negative beyond."""
    def slip_stiff(t, q, v):
        u = P.slip_velocities(t, q, v)[i]
        s = float(np.hypot(u[0], u[1]))
        if s > limit:
            return s - limit
        fw, a_par = force.stiffness(t, q, v, i)
        den = ratio * a_par + fw
        return limit * (ratio * a_par - fw) / den if den > 0.0 else limit
    slip_stiff.__name__ = f"stiffness of the slide of {P.labels[i]}"
    return slip_stiff


def _slip_turn_event(P: ContactPoints, i: int, d0: np.ndarray, limit: float):
    """``limit - |u x d0|``: the slip of a point sliding from rest with its friction locked
    along ``d0`` (:func:`_coulomb_force`) turns away from ``d0``. While the slip across
    ``d0`` stays below ``limit`` (``2 vel_tol``: above the run's "at rest", so that the
    contact problem at the event sees a moving point and the next phase follows
    ``u/|u|``), the locked force's direction differs from ``u/|u|`` by at most ``limit /
    |u|``; a slide that keeps its direction (a body pushed straight) never ends this
    way."""
    def slip_turn(t, q, v):
        u = P.slip_velocities(t, q, v)[i]
        return limit - abs(float(d0[0] * u[1] - d0[1] * u[0]))
    slip_turn.__name__ = f"slip of {P.labels[i]} across its starting direction"
    return slip_turn


def _cone_event(forces: _PhaseForces, n_row: int, t_row: int, mu: float, d: int,
                offset: float = 0.0):
    """``mu N + d T``: a sticking point reaches the friction cone (``T = -d mu N``)."""
    def cone(t, q, v):
        lam = forces(t, q, v)
        return float(mu * lam[n_row] + d * lam[t_row]) + offset
    cone.__name__ = "friction cone"
    cone.interp_points = _INTERP
    cone.interp_screen = True
    return cone


def _slip_rate_event(P: ContactPoints, i: int, d: int):
    """``d * slip rate`` of a sliding point: it reaches zero (the point may stick)."""
    def slip_rate(t, q, v):
        T, ct, _ = P.tangent_rows(t, q, v)
        return float(d * (T[i] @ v + ct[i]))
    slip_rate.__name__ = f"slip rate of {P.labels[i]}"
    return slip_rate


def _force_event(forces: _PhaseForces, row: int, offset: float = 0.0):
    def normal_force(t, q, v):
        return float(forces(t, q, v)[row]) + offset
    normal_force.__name__ = "normal force"
    normal_force.interp_points = _INTERP
    normal_force.interp_screen = True
    return normal_force


def _join_spatial(P: ContactPoints, tr: Trajectory, closed, n_rows, t_rows, sdir, ref, locked,
                  m: int, cforce: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One phase's multipliers (base rows, normal forces, two tangential components per
    point: ``m + 3 k`` columns), normal forces (N, k) and friction forces (N, k, 2) of a
    system with spatial points; a sliding point's ``-mu N e`` is added to ``cforce``."""
    N, k = len(tr), P.k
    L = np.zeros((N, m + 3 * k))
    L[:, :m] = tr.multipliers[:, :m]
    f, fr = np.zeros((N, k)), np.zeros((N, k, 2))
    for j, i in enumerate(np.flatnonzero(closed)):
        L[:, m + i] = f[:, i] = tr.multipliers[:, n_rows[j]]
        if t_rows[j] >= 0:
            width = 2 if P.dim[i] == 2 else 1
            fr[:, i, :width] = tr.multipliers[:, t_rows[j]:t_rows[j] + width]
        elif sdir[i]:
            for r in range(N):
                T2, c2, _ = P.cone_rows(float(tr.t[r]), tr.q[r], tr.v[r])
                d = ref.at(i, float(tr.t[r]))
                e = d if locked[i] else _continued_direction(T2[i] @ tr.v[r] + c2[i], d,
                                                             tr.v[r], T2[i])
                fr[r, i] = -P.mu[i] * f[r, i] * e
                cforce[r] += fr[r, i] @ T2[i]
        L[:, m + k + 2 * i:m + k + 2 * i + 2] = fr[:, i]
    return L, f, fr


def _join_planar(P, tr, closed, n_rows, t_rows, sdir, m, cforce):
    """A planar phase's multipliers ``(N, m + 2 k)`` (base rows, normal, tangential), its
    normal and friction forces ``(N, k)``; a sliding point's Coulomb force, applied as a
    force in the phase, added to ``cforce`` (the phase's ``M a - F`` lacks it)."""
    N, k = len(tr), P.k
    L = np.zeros((N, m + 2 * k))
    L[:, :m] = tr.multipliers[:, :m]
    f, fr = np.zeros((N, k)), np.zeros((N, k))
    for j, i in enumerate(np.flatnonzero(closed)):
        L[:, m + i] = tr.multipliers[:, n_rows[j]]
        f[:, i] = tr.multipliers[:, n_rows[j]]
        if t_rows[j] >= 0:
            L[:, m + k + i] = fr[:, i] = tr.multipliers[:, t_rows[j]]
        elif sdir[i]:
            # sliding: the Coulomb force -mu s N along the slip gradient
            L[:, m + k + i] = fr[:, i] = -P.mu[i] * sdir[i] * f[:, i]
            for r in range(N):
                Tr, _, _ = P.tangent_rows(float(tr.t[r]), tr.q[r], tr.v[r])
                cforce[r] += fr[r, i] * Tr[i]
    return L, f, fr


def _join(model: _Model, pieces: list, m: int, k: int, t_eval) -> Trajectory:
    """The phases as one trajectory, multipliers (base rows, normal, tangential) and forces."""
    P = model.points
    n = model.system.n
    cols = {"t": [], "q": [], "v": [], "a": [], "constraint_force": [], "position_residual": [],
            "velocity_residual": [], "acceleration_residual": [], "energy": [], "rank": [],
            "sigma_min": []}
    lam, forces, frictions = [], [], []
    rank_events, stats = [], {}
    for tr, closed, n_rows, t_rows, sdir, ref, locked in pieces:
        N = len(tr)
        for key in cols:
            val = getattr(tr, key)
            cols[key].append(val if val is not None else np.full(N, np.nan))
        cols["constraint_force"][-1] = np.array(cols["constraint_force"][-1])   # own copy
        if P.spatial:
            L, f, fr = _join_spatial(P, tr, closed, n_rows, t_rows, sdir, ref, locked, m,
                                     cols["constraint_force"][-1])
        else:
            L, f, fr = _join_planar(P, tr, closed, n_rows, t_rows, sdir, m,
                                    cols["constraint_force"][-1])
        lam.append(L)
        forces.append(f)
        frictions.append(fr)
        rank_events += tr.rank_events
        for key, val in tr.stats.items():
            if isinstance(val, (int, float)) and not isinstance(val, bool):
                stats[key] = stats.get(key, 0) + val
    if not pieces:
        raise ModelError("internal: a contact run without phases")
    joined = {key: np.concatenate(val) for key, val in cols.items()}
    last = pieces[-1][0]
    energy = joined["energy"] if model.system.has_energy else None
    traj = Trajectory(t=joined["t"], q=joined["q"].reshape(-1, n), v=joined["v"].reshape(-1, n),
                      a=joined["a"].reshape(-1, n),
                      constraint_force=joined["constraint_force"].reshape(-1, n),
                      multipliers=np.concatenate(lam), position_residual=joined["position_residual"],
                      velocity_residual=joined["velocity_residual"],
                      acceleration_residual=joined["acceleration_residual"], energy=energy,
                      rank=joined["rank"].astype(int), sigma_min=joined["sigma_min"],
                      coordinates=model.system.coordinates, rank_events=rank_events, stats=stats,
                      meta=dict(last.meta))
    traj.contact_forces = np.concatenate(forces)
    traj.friction_forces = np.concatenate(frictions)
    if t_eval is not None:                 # drop the placeholders at t1 not asked for
        keep = np.isin(traj.t, t_eval)
        for key in (*cols, "multipliers", "contact_forces", "friction_forces"):
            val = getattr(traj, key)
            if val is not None:
                setattr(traj, key, val[keep])
    return traj
