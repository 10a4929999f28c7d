"""The settings of gaussopt's step solvers, in one table.

Every tolerance and crossover that decides how a step is solved lives here, with the
reason for its value; the modules that use one import it from here (and re-export it
under the name their documentation gives it, e.g. ``gaussopt.gauss.dense_step.FOLD_TOL``).
A user changes the per-solver ones through the solvers' options (``rank_tol``, the QP's
``settings``), never by editing this table.

============================  =============  ==========================================
setting                       value          used by
============================  =============  ==========================================
:data:`DEFAULT_RANK_TOL`      1e-8           every solver's rank decision (``rank_tol``)
:data:`FOLD_TOL`              1e-5           the rank decision near folded positions
:data:`SYMMETRY_RTOL`         1e-12          the check of ``M``'s symmetry
:data:`MIN_N`                 30             the O(n) band step's crossover (coordinates)
:data:`QP_DENSE_MAX`          64             the QP's compiled dense path (coordinates)
:data:`CLARABEL`              (dict)         the QP through Clarabel, directly or by cvxpy
:data:`CVXPY_BACKENDS`        (dict)         the QP's other cvxpy backends
:data:`FIXED_STEP_RESIDUAL`   1.0            a fixed-step run's bound on the constraints
:data:`FIXED_STEP_ENERGY`     100.0          a fixed-step run's bound on the energy drift
============================  =============  ==========================================
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["DEFAULT_RANK_TOL", "FOLD_TOL", "SYMMETRY_RTOL", "MIN_N", "QP_DENSE_MAX",
           "CLARABEL_TOLERANCES", "CLARABEL", "CVXPY_BACKENDS", "FIXED_STEP_RESIDUAL",
           "FIXED_STEP_ENERGY"]

#: A row of the normalized constraint rows, or a direction of their SVD, whose size falls
#: below ``rank_tol`` (relative) is dropped as vanished or redundant
#: (:func:`gaussopt.gauss.dense_step.reduce_rows`): 1e-8 is the square root of the
#: rounding of double precision, the level below which a direction cannot be told from
#: a rounding error of the rows after the squaring that the Gauss problem's normal
#: equations imply.
DEFAULT_RANK_TOL = 1e-8

#: A direction of the normalized rows whose singular value falls below ``FOLD_TOL`` times
#: its reference (the largest smallest-singular-value seen at accepted states of the run)
#: is dropped as vanished. At a folded configuration of a redundant linkage the
#: acceleration-level equations amplify an error of the state along the "shaky" mode
#: roughly like ``(sigma_far / sigma_near)`` between the regular and the nearest sampled
#: configuration: with ``1e-5`` the amplification stays below ``1e5`` (rounding grows to
#: ~1e-11), where keeping every direction above ``rank_tol = 1e-8`` lets it reach ``1e8``
#: and an integrator at ``rtol = 1e-12`` collapses its step there. Rows that are nearly
#: dependent from the start of a run (a small reference) are decided by ``rank_tol`` as
#: before.
FOLD_TOL = 1e-5

#: relative asymmetry of ``M`` above which it is rejected (``max |M - M^T| / max |M|``):
#: each solver would read another triangle of it
SYMMETRY_RTOL = 1e-12

#: the step solvers take the O(n) path of :mod:`gaussopt.gauss.band_step` from this many
#: coordinates on. It is faster than the dense kernel at every size measured (the
#: N-four-bar from 9 coordinates on, where both take microseconds); below about 30
#: coordinates the dense step costs well under a millisecond and reports every singular
#: value, so small models keep it
MIN_N = 30
#: the step solvers take the recursive O(n) step of a tree in joint coordinates
#: (:class:`gaussopt.core.model_interface.RecursiveModel`) from this many coordinates on
#: (measured: benchmarks/robots.py, the crossover with the dense step over the tree)
TREE_MIN_N = 30

#: systems up to this many coordinates pass Clarabel dense data (the reduced rows
#: ``V_r^T`` are dense anyway) and take the QP's compiled path
#: (:mod:`gaussopt.gauss.solvers.qp.compiled_qp`)
QP_DENSE_MAX = 64

#: Clarabel's termination tolerances, one set for both ways the QP calls it (directly,
#: :class:`gaussopt.gauss.solvers.qp.clarabel_qp.ClarabelQP`, and through cvxpy,
#: :mod:`gaussopt.gauss.solvers.qp.cvxpy_qp`). Both hand Clarabel data scaled to O(1)
#: (rows normalized, ``M`` scaled by ``n / trace M``), on which the residuals and the gap
#: reach ~450 eps without stalling (1e-14 still converges on the well-conditioned cases
#: but stalls in ``almost_optimal`` on the others); the iterate accepted is within
#: ``cond * 1e-13`` of the exact solution. The "almost" levels ``reduced_tol_*`` are
#: reported as inaccurate, never taken silently.
CLARABEL_TOLERANCES = MappingProxyType({
    "tol_gap_abs": 1e-13,
    "tol_gap_rel": 1e-13,
    "tol_feas": 1e-13,
    "tol_ktratio": 1e-11,
    "tol_infeas_abs": 1e-12,
    "tol_infeas_rel": 1e-12,
    "reduced_tol_gap_abs": 1e-9,
    "reduced_tol_gap_rel": 1e-9,
    "reduced_tol_feas": 1e-9,
    "reduced_tol_ktratio": 1e-7,
})

#: Clarabel's settings when gaussopt calls it directly (the tolerances above, and what
#: in-place updates of a problem built once need; see the notes of ``ClarabelQP``)
CLARABEL = MappingProxyType({
    "verbose": False,
    # required for in-place updates (forced)
    "presolve_enable": False,
    "chordal_decomposition_enable": False,
    "input_sparse_dropzeros": False,
    # data are scaled per solve by ClarabelQP (history-independent)
    "equilibrate_enable": False,
    **CLARABEL_TOLERANCES,
    # KKT: static regularization (Clarabel's default 1e-8; safe on the scaled data),
    # undone by iterative refinement run to machine precision (until it stops improving
    # by 2x per step)
    "static_regularization_constant": 1e-8,
    "iterative_refinement_reltol": 1e-16,
    "iterative_refinement_abstol": 1e-16,
    "iterative_refinement_max_iter": 20,
    "iterative_refinement_stop_ratio": 2.0,
    "max_iter": 100,
    "max_threads": 1,
})

#: options of the QP's cvxpy backends (the user's ``solver_options`` are merged on top)
CVXPY_BACKENDS = MappingProxyType({
    "CLARABEL": MappingProxyType({**CLARABEL_TOLERANCES, "max_iter": 200}),
    # ADMM only has to locate the active set; polishing then solves the reduced KKT
    # system exactly. Tighter eps (<= 1e-8) makes OSQP hit max_iter on medium problems
    # (n ~ 30..60) without gaining accuracy.
    "OSQP": MappingProxyType({"eps_abs": 1e-7, "eps_rel": 1e-7, "polishing": True,
                              "polish_refine_iter": 10, "max_iter": 20000}),
    "SCS": MappingProxyType({"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 100000}),
    "HIGHS": MappingProxyType({}),
})

# A fixed-step run (``rk4``, ``euler``) has no error control: a step too large for the
# motion is taken as readily as a good one, and the state it produces may be nonsense
# (the pendulum at dt = 10 s: q of size 1e6, an energy drift of 1e31 J). What the run
# does know is the size of the problem at its start, and two quantities a motion of
# the system keeps: its constraints and (where the model defines it) its energy. The
# engine checks both after every step, on the state as the step produced it (before a
# projection hides what the step did), and ends the run when one has left its bound
# (:data:`gaussopt.core.status.STEP_TOO_LARGE`):
#
# * the constraints: the distance of q from each position constraint,
#   ``|Phi_i| / ref_i`` (``ref_i`` the largest norm of the row's gradient at the
#   accepted states so far, so that the distance is not inflated where a gradient
#   vanishes at a singular position), against ``FIXED_STEP_RESIDUAL * (1 + max|q0|)``;
# * the energy: ``|E - E0|`` against ``FIXED_STEP_ENERGY * max(|E0|, T0, |F0| (1 +
#   max|q0|), T_max)`` -- the larger of the initial energy, the initial kinetic energy,
#   the work the initial applied forces do over a displacement of the configuration's
#   size (so that a start at rest with the potential's zero there still has a scale)
#   and the largest kinetic energy of the accepted steps before (a motion spun up by a
#   driving torque keeps its energy while its kinetic and potential parts grow far past
#   their initial sizes, and a fixed step's error grows with them: paper 002's disk
#   from rest under a torque, rk4 at dt = 0.01 s, drifts by 22 J at t = 18 s against a
#   kinetic energy of hundreds of J; a diverging step multiplies the kinetic energy
#   itself, so its drift outruns the largest value before it).
#
# Both bounds say "the state is off by as much as the problem's own size": no motion
# of the system is that far from its constraints or its energy. A convergent fixed-step
# run stays well inside them (the unstabilized Euler pendulum of tests/test_trajectory.py,
# dt = 0.02 s over 4 s, drifts to 0.18 of the residual bound and its Baumgarte-stabilized
# twin to 0.3 of the energy bound), while a diverging one crosses them within a step or
# two (divergence is geometric: x 400 per step for the pendulum at dt = 1 s), so the
# moment a run is stopped hardly depends on the exact values. That is why the energy's
# bound is 100 times its scale rather than 1: the energy is the model's ``energy(t, q,
# v)``, the quantity whose drift its diagnostics report, and a driven model's energy
# legitimately changes (a bead lifted by a constant force 2 m g gains twice its largest
# kinetic energy, tests/test_fixed_step_bounds.py); a factor 100 leaves such motions
# alone and stops a diverging run one step later. A model whose energy legitimately
# changes by more than 100 times its scale should not pass it to a fixed-step run (the
# constraints are checked all the same).

#: bound of a fixed-step run's position residual, relative to ``1 + max|q0|``
FIXED_STEP_RESIDUAL = 1.0

#: bound of a fixed-step run's energy drift, relative to the initial energy scale
FIXED_STEP_ENERGY = 100.0
