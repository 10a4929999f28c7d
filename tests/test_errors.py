"""Every documented error and warning of gaussopt, with its message.

Each error is raised with ``pytest.raises(..., match=...)`` and checked to be a
:class:`gaussopt.GaussoptError`; bad input also is a ``ValueError``.
"""

from __future__ import annotations

import math
import re
import warnings
from contextlib import contextmanager

import numpy as np
import pytest

import gaussopt as go

ALL_SOLVERS = ("closed_form", "lagrange", "qp", "ga")
EXACT_SOLVERS = ("closed_form", "lagrange", "qp")
XY = ("x", "y")
M2 = np.diag([2.0, 3.0])
F2 = np.array([1.5, -4.0])
Q0 = np.array([0.1, -0.2])
V0 = np.array([0.3, 0.05])


@contextmanager
def raises(exc, match):
    """``pytest.raises`` that also checks the gaussopt base class."""
    with pytest.raises(exc, match=match) as info:
        yield info
    assert isinstance(info.value, go.GaussoptError)


def step(system, solver="closed_form", q=Q0, v=V0, **options):
    return go.solve_step(system, 0.25, q, v, solver=solver, **options)


def two_dof(constraints=(), mass=M2, force=F2):
    return go.System(XY, mass=mass, force=force, constraints=list(constraints))


# --------------------------------------------------------------------------- hierarchy
@pytest.mark.parametrize("exc,builtin", [
    (go.ModelError, ValueError),
    (go.IndeterminateMotionError, go.ModelError),
    (go.InconsistentConstraintsError, go.ModelError),
    (go.UnsupportedConstraintError, go.ModelError),
    (go.SolverError, RuntimeError),
])
def test_exception_hierarchy(exc, builtin):
    assert issubclass(exc, go.GaussoptError)
    assert issubclass(exc, builtin)
    assert issubclass(exc, Exception)


def test_warning_is_a_user_warning():
    assert issubclass(go.ObjectiveMismatchWarning, UserWarning)


# --------------------------------------------------------------------------- indeterminate motion
@pytest.mark.parametrize("mass_x", [1.0, 2.5])
@pytest.mark.parametrize("rows", [None, ([[1.0, 0.0]], [0.7])], ids=["no rows", "x rail"])
@pytest.mark.parametrize("solver", ALL_SOLVERS)
def test_indeterminate_motion(solver, rows, mass_x):
    # M = diag(m, 0) and nothing constrains y: a_y is arbitrary
    cons = [] if rows is None else [go.AccelerationConstraint(*rows, name="rail")]
    system = two_dof(cons, mass=np.diag([mass_x, 0.0]), force=[1.5, -0.8])
    with raises(go.IndeterminateMotionError,
                match=r"accelerations are not unique: rank\(\[M; A\]\) < n") as info:
        step(system, solver)
    d = info.value.direction
    assert d.shape == (2,)
    np.testing.assert_allclose(np.abs(d), [0.0, 1.0], atol=1e-12)
    # the message names the free coordinate, and only that one
    terms = re.search(r"d = \(([^)]*)\)", str(info.value)).group(1)
    assert re.fullmatch(r"[+-]1\*y", terms.strip()), terms


# --------------------------------------------------------------------------- inconsistent rows
def contradictory():
    # [1, 0] a = 1 and [2, 0] a = 5: a_x = 1 and a_x = 2.5
    return two_dof([go.AccelerationConstraint([[1.0, 0.0], [2.0, 0.0]], [1.0, 5.0], name="twice")])


@pytest.mark.parametrize("solver", ["closed_form", "lagrange"])
def test_inconsistent_constraints(solver):
    with raises(go.InconsistentConstraintsError, match=r"constraint rows are inconsistent") as info:
        step(contradictory(), solver)
    assert info.value.residual > 0.0


def test_inconsistent_constraints_qp():
    # the rank decision (shared by every solver) finds the contradiction before the QP
    # backend is called: the same error and residual as the other solvers
    with raises(go.InconsistentConstraintsError,
                match=r"constraint rows are inconsistent.*rounding explains") as info:
        step(contradictory(), "qp")
    with raises(go.InconsistentConstraintsError, match="inconsistent") as ref:
        step(contradictory(), "closed_form")
    assert info.value.residual == ref.value.residual


@pytest.mark.parametrize("solver", EXACT_SOLVERS)
def test_inconsistent_residual_is_the_documented_one(solver):
    # documented: residual = min_a ||A a - b|| in the row-normalized scale; the
    # normalized rows are a_x = 1 and a_x = 2.5, so min = ||(0.75, -0.75)||
    with raises(go.InconsistentConstraintsError, match="inconsistent") as info:
        step(contradictory(), solver)
    assert info.value.residual == pytest.approx(0.75 * math.sqrt(2.0), rel=1e-6)


# --------------------------------------------------------------------------- model errors
@pytest.mark.parametrize("build,match", [
    (lambda: go.System(XY, mass=np.eye(3)), r"`mass` must have shape \(2, 2\).*found \(3, 3\)"),
    (lambda: go.System(XY, mass=np.ones((2, 3))), r"`mass` must have shape \(2, 2\).*found \(2, 3\)"),
    (lambda: go.System(XY, mass=[[2.0, 0.5], [0.4, 3.0]]), r"`mass` must be symmetric"),
    (lambda: go.System(XY, mass=np.diag([2.0, -0.5])),
     r"`mass` must be positive semi-definite; its smallest eigenvalue is -0\.5"),
    (lambda: go.System(XY, mass=[[2.0, np.nan], [np.nan, 3.0]]), r"`mass` contains NaN"),
    (lambda: go.System(XY, mass=M2, force=[np.nan, 1.0]), r"`force` contains NaN or inf"),
    (lambda: go.System(XY, mass=M2, force=[1.0, 2.0, 3.0]), r"`force` must have shape \(2,\)"),
    (lambda: go.System("xy", mass=M2), r"`coordinates` must be a sequence of names.*'xy'"),
    (lambda: go.System(("x", "x"), mass=M2), r"`coordinates` has duplicate names"),
    (lambda: go.System((), mass=np.zeros((0, 0))), r"`coordinates` is empty"),
    (lambda: go.System(XY, mass=M2, constraints=[lambda t, q: q]),
     r"`constraints\[0\]` must be a gaussopt constraint"),
], ids=["mass shape", "mass not square", "mass asymmetric", "mass indefinite", "mass NaN",
        "force NaN", "force shape", "coordinates str", "coordinates duplicate",
        "coordinates empty", "constraint type"])
def test_model_errors_at_construction(build, match):
    with raises(go.ModelError, match=match) as info:
        build()
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("call,match", [
    (lambda s: step(s, q=[0.0, 0.0, 0.0]), r"`q` must have shape \(2,\), found \(3,\)"),
    (lambda s: step(s, q=[0.0, np.nan]), r"`q` contains NaN or inf"),
    (lambda s: step(s, v=[[0.0, 1.0]]), r"`v` must have shape \(2,\), found \(1, 2\)"),
    (lambda s: go.solve_step(s, np.nan, Q0, V0), r"`t` must be finite"),
    (lambda s: step(s, "newton"), r"`solver` must be one of \['closed_form', 'ga', 'lagrange', 'qp'\]"),
    (lambda s: step(s, object), r"`solver` must be a name, a StepSolver class or instance"),
    (lambda s: step(s, objective="approx"), r"`objective` must be one of \('exact', 'paper'\), found 'approx'"),
    (lambda s: step(s, "lagrange", objective="Exact"), r"`objective` must be one of"),
    (lambda s: step(s, "ga", mode="annealing"), r"`mode` must be one of \('nullspace', 'penalty'\)"),
    (lambda s: step(s, "ga", radius=-1.0), r"`radius` must be a positive number"),
    (lambda s: step(s, "lagrange", tolerance=1e-3), r"invalid option for solver 'lagrange'.*tolerance"),
    (lambda s: go.solve_step("not a system", 0.0, Q0, V0), r"`system` must be a gaussopt.System"),
], ids=["q shape", "q NaN", "v shape", "t NaN", "solver name", "solver type", "objective",
        "objective case", "ga mode", "ga radius", "unknown option", "system type"])
def test_model_errors_in_solve_step(call, match):
    with raises(go.ModelError, match=match):
        call(two_dof([go.AccelerationConstraint([[1.0, 1.0]], [0.5])]))


@pytest.mark.parametrize("rank_tol", [0.0, 1.0, -1e-3, 2.0, np.nan, np.inf])
@pytest.mark.parametrize("solver", ALL_SOLVERS)
def test_bad_rank_tol(solver, rank_tol):
    with raises(go.ModelError, match=r"`rank_tol` must be in \(0, 1\)"):
        step(two_dof(), solver, rank_tol=rank_tol)


def test_unknown_qp_backend_is_a_model_error():
    # a bad argument is a ModelError (a ValueError) like every other one
    system = two_dof([go.AccelerationConstraint([[1.0, 1.0]], [0.5])])
    with raises(go.ModelError, match=r"NOPE"):
        step(system, "qp", backend="NOPE")


def test_backend_failure_is_a_solver_error():
    system = two_dof([go.AccelerationConstraint([[1.0, 1.0]], [0.5])])
    with raises(go.SolverError, match=r"backend 'clarabel' failed.*nonsense_setting") as info:
        step(system, "qp", backend_options={"nonsense_setting": 1})
    with raises(go.SolverError, match=r"backend CLARABEL failed.*nonsense_setting"):
        step(system, "qp", backend="cvxpy", backend_options={"nonsense_setting": 1})
    assert isinstance(info.value, RuntimeError)
    assert info.value.__cause__ is not None          # the backend's exception is chained


def _asymmetric_mass(t, q):
    return np.array([[2.0, 1.0], [0.0, 3.0]])


def _wide_rows(t, q, v):
    return np.ones((1, 3))


def test_check_lists_all_problems_in_one_error():
    system = go.System(XY, mass=_asymmetric_mass, force=F2, name="broken",
                       constraints=[go.AccelerationConstraint(_wide_rows, lambda t, q, v: np.zeros(1),
                                                              name="wide")])
    with raises(go.ModelError, match=r"System 'broken' failed its check at t=0\.25") as info:
        step(system)
    msg = str(info.value)
    assert re.search(r"mass\(t, q\) must be symmetric", msg)
    assert re.search(r"constraint 'wide': rows have shapes A \(1, 3\), b \(1,\); expected \(k, 2\)", msg)
    assert msg.count("\n  - ") == 2
    # System.check itself raises the same error
    with raises(go.ModelError, match=r"(?s)symmetric.*constraint 'wide'"):
        system.check(0.0, Q0, V0)


def test_check_reports_wrong_shapes_of_functions():
    system = go.System(XY, mass=lambda t, q: np.eye(3), force=lambda t, q, v: np.zeros(3))
    with raises(go.ModelError, match=r"(?s)mass\(t, q\) returned shape \(3, 3\), expected \(2, 2\)"
                                     r".*force\(t, q, v\) returned shape \(3,\), expected \(2,\)"):
        step(system)


# constraints written with functions that are not complex-safe, derivatives automatic
def _phi_abs(t, q):
    return np.array([abs(q[0]) + q[1] - 1.0])


def _phi_math_sin(t, q):
    return np.array([math.sin(q[0]) + q[1] - 1.0])


def _f_abs(t, q, v):
    return np.array([np.abs(v[0]) - 2.0 * v[1]])


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # math.sin(complex)
@pytest.mark.parametrize("constraint", [
    go.Holonomic(_phi_abs, name="abs_rod"),
    go.Holonomic(_phi_math_sin, name="math_sin_rod"),
    go.Nonholonomic(_f_abs, name="abs_knife"),
], ids=lambda c: c.name)
def test_not_complex_safe_function(constraint):
    system = two_dof([constraint])
    with raises(go.ModelError, match=rf"{constraint.name}: .*complex-safe"):
        step(system, q=[0.5, 0.4], v=[0.3, 0.15])


def test_not_complex_safe_phi_with_automatic_gamma():
    # phi = |x|^2 + y^2 - r^2 written with abs(); the Jacobian is given, gamma is
    # automatic (complex step of phi) and therefore wrong: it must be caught too
    # ("every automatic derivative is cross-checked", constraints module docstring)
    r = 1.5
    ring = go.Holonomic(lambda t, q: np.array([abs(q[0]) ** 2 + q[1] ** 2 - r**2]),
                        jacobian=lambda t, q: np.array([[2.0 * q[0], 2.0 * q[1]]]),
                        rheonomic=False, name="ring")
    system = two_dof([ring])
    with raises(go.ModelError, match=r"(?s)ring.*gamma.*complex-safe"):
        step(system, q=[0.9, 1.2], v=[-0.96, 0.72])


# --------------------------------------------------------------------------- unsupported constraints
def _floor_system():
    return two_dof([go.Inequality([[0.0, 1.0]], [0.0], name="floor")], force=[0.0, -9.81 * 3.0])


@pytest.mark.parametrize("solver", ["closed_form", "lagrange", "ga"])
def test_inequality_needs_qp(solver):
    with raises(go.UnsupportedConstraintError,
                match=rf"solver '{solver}' cannot treat the Inequality constraints \['floor'\]; "
                      r"use solver='qp'"):
        step(_floor_system(), solver)


def test_inequality_with_qp_is_accepted():
    r = step(_floor_system(), "qp")
    np.testing.assert_allclose(r.a, [0.0, 0.0], atol=1e-9)      # resting on the floor


# --------------------------------------------------------------------------- simulate
def pendulum():
    m, l, g = 2.0, 1.5, 9.81
    return go.System(XY, mass=m * np.eye(2), force=[0.0, -m * g],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - l**2]), name="rod")])


PQ0, PV0 = [1.5, 0.0], [0.0, 0.0]


@pytest.mark.parametrize("kwargs,match", [
    (dict(t_span=(1.0, np.nan)), r"`t_span` must be finite, found \(1\.0, nan\)"),
    (dict(t_span=(1.0, 0.5)), r"`t_span` must have t_end >= t0, found \(1\.0, 0\.5\): gaussopt "
                              r"integrates forward in time only"),
    (dict(t_span=(0.0, np.inf)), r"`t_span` must be finite"),
    (dict(t_span=2.0), r"`t_span` must be a pair \(t0, t_end\)"),
    (dict(method="RK99"), r"`method` must be one of \['rk4', 'euler', 'RK23'.*found 'RK99'"),
    (dict(method="rk4"), r"`dt` must be a positive step for method='rk4', found None"),
    (dict(method="euler", dt=0.0), r"`dt` must be a positive step for method='euler', found 0\.0"),
    (dict(dt=-1e-3), r"`dt` must be positive \(used as first step\)"),
    (dict(rtol=0.0), r"`rtol` must be positive"),
    (dict(stabilization="baumgarte"),
     r"`stabilization` must be None, gaussopt\.Baumgarte\(\.\.\.\) or gaussopt\.Projection\(\.\.\.\), "
     r"found 'baumgarte'"),
    (dict(stabilization=go.Baumgarte), r"`stabilization` must be None"),     # the class, not an object
    (dict(stabilization={"alpha": 10.0}), r"`stabilization` must be None"),
    (dict(t_eval=[0.0, 0.5, 1.5]), r"`t_eval` must be increasing and within t_span \[0\.0, 1\.0\]"),
    (dict(t_eval=[-0.1, 0.5]), r"`t_eval` must be increasing and within t_span"),
    (dict(t_eval=[0.5, 0.2]), r"`t_eval` must be increasing"),
    (dict(q0=[1.5, 0.0, 0.0]), r"`q0` must have shape \(2,\)"),
    (dict(solver="newton"), r"`solver` must be one of"),
], ids=["t_span nan", "t_span reversed", "t_span inf", "t_span scalar", "method", "rk4 no dt",
        "euler dt 0", "negative first step", "rtol", "stabilization str", "stabilization class",
        "stabilization dict", "t_eval after end", "t_eval before start", "t_eval decreasing",
        "q0 shape", "solver"])
def test_simulate_argument_errors(kwargs, match):
    args = dict(t_span=(0.0, 1.0), q0=PQ0, v0=PV0)
    args.update(kwargs)
    with raises(go.ModelError, match=match):
        go.simulate(pendulum(), args.pop("t_span"), args.pop("q0"), args.pop("v0"), **args)


@pytest.mark.parametrize("build,match", [
    (lambda: go.Baumgarte(alpha=-1.0), r"Baumgarte `alpha` must be a finite number >= 0, found -1\.0"),
    (lambda: go.Baumgarte(beta=np.nan), r"Baumgarte `beta` must be a finite number >= 0"),
    (lambda: go.Projection(tol=0.0), r"Projection `tol` must be positive"),
    (lambda: go.Projection(max_iter=0), r"Projection `max_iter` must be >= 1"),
], ids=["baumgarte alpha", "baumgarte beta", "projection tol", "projection max_iter"])
def test_bad_stabilization_parameters(build, match):
    with raises(go.ModelError, match=match):
        build()


@pytest.mark.parametrize("q0,v0,what", [
    ([1.6, 0.0], PV0, "position"),
    (PQ0, [0.3, 0.0], "velocity"),       # moving along the rod
])
def test_simulate_inconsistent_initial_state(q0, v0, what):
    with raises(go.ModelError, match=rf"initial state is inconsistent with the constraints: {what} "
                                     r"constraints violated.*Pass project_initial=True"):
        go.simulate(pendulum(), (0.0, 0.01), q0, v0)
    # the suggested fix works
    tr = go.simulate(pendulum(), (0.0, 0.01), q0, v0, project_initial=True)
    assert tr.success
    assert tr.position_residual[0] < 1e-10 and tr.velocity_residual[0] < 1e-10


# --------------------------------------------------------------------------- objective mismatch
# The four-bar of paper 001: q = (th1, th2, th3), M = diag(4 m l^2/3, m l^2/3, 0)
# (singular), F = (450 - 1.5 m g l cos th1, -0.5 m g l cos th2, F3).
FB_M, FB_L, FB_G = 12.0, 2.0, 9.8
FB_Q = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])
FB_V = np.zeros(3)


def four_bar(closure="paper", f3=0.0):
    m, l, g = FB_M, FB_L, FB_G

    def force(t, q, v):
        return np.array([450.0 - 1.5 * m * g * l * np.cos(q[0]), -0.5 * m * g * l * np.cos(q[1]), f3])

    def phi(t, q):
        loop = l * np.sin(q[0]) - l * np.sin(q[1])
        if closure == "paper":        # th1 + th3 = pi
            second = q[0] + q[2] - np.pi
        elif closure == "follow":     # th3 - th1 = pi/3: th3 moves with th1
            second = q[2] - q[0] - np.pi / 3
        else:                         # "fixed": th3 = 2 pi/3 on its own
            second = q[2] - 2 * np.pi / 3
        return np.array([loop, second])

    return go.System(("th1", "th2", "th3"), mass=np.diag([4 * m * l**2 / 3, m * l**2 / 3, 0.0]),
                     force=force, constraints=[go.Holonomic(phi, rheonomic=False, name="closure")],
                     name="four-bar")


def reduced_th1_acceleration(f3):
    """Hand-derived: with th2 = th1 (l sin th1 = l sin th2 near th1 = th2) and th3 = th1 + c,
    th1'' (I1 + I2 + 0) = F1 + F2 + F3 at v = 0."""
    m, l, g = FB_M, FB_L, FB_G
    th1 = FB_Q[0]
    mass = 4 * m * l**2 / 3 + m * l**2 / 3
    force = 450.0 - 1.5 * m * g * l * np.cos(th1) - 0.5 * m * g * l * np.cos(th1) + f3
    return force / mass


def _no_mismatch_warning_step(system, solver, objective):
    with warnings.catch_warnings():
        warnings.simplefilter("error", go.ObjectiveMismatchWarning)
        return step(system, solver, q=FB_Q, v=FB_V, objective=objective)


@pytest.mark.parametrize("solver", EXACT_SOLVERS)
def test_four_bar_of_paper_001_paper_and_exact_agree(solver):
    exact = _no_mismatch_warning_step(four_bar("paper"), solver, "exact")
    paper = _no_mismatch_warning_step(four_bar("paper"), solver, "paper")
    np.testing.assert_allclose(paper.a, exact.a, rtol=1e-10, atol=1e-10)
    # th3 = pi - th1, so th3'' = -th1''; 80 th1'' = F1 + F2 = 214.8
    a1 = reduced_th1_acceleration(0.0)
    assert a1 == pytest.approx(2.685, rel=1e-12)
    np.testing.assert_allclose(exact.a, [a1, a1, -a1], rtol=1e-9)
    assert "objective_mismatch" not in exact.info


@pytest.mark.parametrize("solver", EXACT_SOLVERS)
def test_null_space_force_balanced_by_its_own_constraint_gives_no_warning(solver):
    # F3 acts on the massless th3, but th3 is fixed by a constraint of its own:
    # N^T (I - M M^+) F = 0, both objectives agree
    exact = _no_mismatch_warning_step(four_bar("fixed", f3=7.0), solver, "exact")
    paper = _no_mismatch_warning_step(four_bar("fixed", f3=7.0), solver, "paper")
    np.testing.assert_allclose(paper.a, exact.a, rtol=1e-10, atol=1e-10)
    assert exact.a[2] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("solver", EXACT_SOLVERS)
def test_unbalanced_null_space_force_warns_and_objectives_differ(solver):
    # th3 - th1 = pi/3: th3 has no mass of its own, but F3 = 7 drives the
    # mechanism through the constraint. N = (1, 1, 1)/sqrt(3) spans null(A) and
    # N^T (I - M M^+) F = F3 / sqrt(3) != 0.
    f3 = 7.0
    match = r"objective='exact' and objective='paper' give different accelerations"
    with pytest.warns(go.ObjectiveMismatchWarning, match=match):
        paper = step(four_bar("follow", f3), solver, q=FB_Q, v=FB_V, objective="paper")
    with pytest.warns(go.ObjectiveMismatchWarning, match=match):     # checked for constant M
        exact = step(four_bar("follow", f3), solver, q=FB_Q, v=FB_V, objective="exact")

    # exact objective = Lagrange I = the hand-derived reduced equation with F3
    a1 = reduced_th1_acceleration(f3)
    assert a1 == pytest.approx(221.8 / 80.0, rel=1e-12)
    np.testing.assert_allclose(exact.a, [a1, a1, a1], rtol=1e-9)
    # paper objective drops F3 (the part of F in null(M))
    a1_paper = reduced_th1_acceleration(0.0)
    np.testing.assert_allclose(paper.a, [a1_paper, a1_paper, a1_paper], rtol=1e-9)

    diff = np.linalg.norm(exact.a - paper.a)
    assert diff == pytest.approx(math.sqrt(3.0) * f3 / 80.0, rel=1e-9)
    for r in (exact, paper):
        assert r.info["objective_mismatch"] == pytest.approx(diff, rel=1e-9)
