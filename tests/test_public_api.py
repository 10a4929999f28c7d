"""Every public name of gaussopt 0.1 is importable where it was (the house moved its
modules into packages by role; the names users import did not move), and the new
conventions of the flat API hold (``dir(gaussopt)`` lists the lazily imported names)."""

import importlib

import pytest

import gaussopt as go

#: the names of each public namespace before the move (their ``__all__`` then)
BEFORE = {
    "gaussopt": [
        "AccelerationConstraint", "Baumgarte", "Comparison", "Constraint", "Contact",
        "ConvergenceWarning", "DenseSolution", "GaussoptError", "Holonomic",
        "InconsistentConstraintsError", "IndeterminateMotionError", "Inequality", "ModelError",
        "Nonholonomic", "ObjectiveMismatchWarning", "Problem", "Projection", "QuasiVelocities",
        "RankChangeWarning", "RankEvent", "SOLVERS", "SolverError", "StepResult", "StepSolver",
        "SweepResult", "SymbolicModel", "System", "ToleranceWarning", "Trajectory",
        "TrajectoryFileError", "UnsupportedConstraintError", "__version__", "compare",
        "from_lagrangian", "from_mechanics", "ga_settings", "kane_velocities", "load",
        "make_solver", "multibody", "plotting", "rebuildable", "simulate", "solve_step",
        "solve_steps", "sweep", "symbolic"],
    "gaussopt.multibody": [
        "Body", "Damper", "DrivenAngle", "Fixed", "GROUND", "JointReaction",
        "LeastSquaresProjection", "Mechanism", "Model", "PointForce", "PointOnLine", "Prismatic",
        "RankReport", "Revolute", "Spring", "Torque", "load", "spatial"],
    "gaussopt.multibody.spatial": [
        "Armature", "Body", "Cylindrical", "Distance", "DrivenAngle", "Fixed", "Force", "GROUND",
        "Joint", "JointReaction", "Model", "Planar", "PointOnLine", "PointOnPlane", "Prismatic",
        "RankReport", "Revolute", "RotationalDamper", "Spherical", "Spring", "Torque", "Universal",
        "quaternion", "rotation_matrix"],
    "gaussopt.symbolic": ["MODULES", "SymbolicModel", "from_lagrangian", "from_mechanics",
                          "kane_velocities"],
    "gaussopt.quasi": ["QUASI_METHODS", "QuasiVelocities"],
    "gaussopt.solvers": ["ClosedForm", "Genetic", "Lagrange", "OBJECTIVES", "QP", "SOLVERS",
                         "StepSolver"],
    "gaussopt.plotting": ["plot_coordinates", "plot_residuals", "plot_energy",
                          "plot_multipliers", "plot_outputs", "plot_output_difference",
                          "plot_sweep", "animate", "summary_figure", "solver_color",
                          "problem_units", "SOLVER_COLORS"],
    "gaussopt.exceptions": ["GaussoptError", "ModelError", "SolverError", "ToleranceWarning",
                            "TrajectoryFileError", "UnsupportedConstraintError"],
}

#: names of the dissolved package ``gaussopt.contact``: now in the flat API
CONTACT = ["Contact", "ContactDenseSolution", "ContactPoints", "ContactSolution",
           "ContactSolveError", "Impact", "solve_contact"]


@pytest.mark.parametrize("module", sorted(BEFORE))
def test_every_public_name_of_before_is_importable(module):
    mod = importlib.import_module(module)
    missing = [name for name in BEFORE[module] if not hasattr(mod, name)]
    assert missing == []
    # and by ``from module import name`` (the form users write)
    for name in BEFORE[module]:
        exec(f"from {module} import {name}", {})


def test_the_contact_names_are_in_the_flat_api():
    assert [n for n in CONTACT if not hasattr(go, n)] == []
    assert set(CONTACT) <= set(go.__all__)


def test_old_public_paths_are_the_same_modules():
    import gaussopt.exceptions
    import gaussopt.plotting
    import gaussopt.solvers

    from gaussopt.core import exceptions
    from gaussopt.gauss import solvers
    from gaussopt.study import plotting
    assert gaussopt.plotting is plotting and go.plotting is plotting
    assert gaussopt.exceptions is exceptions and gaussopt.solvers is solvers
    assert go.ModelError is exceptions.ModelError


def test_dir_lists_the_lazily_imported_names():
    names = dir(go)
    for lazy in ("symbolic", "SymbolicModel", "from_lagrangian", "from_mechanics",
                 "kane_velocities", "multibody"):
        assert lazy in names
    assert set(go.__all__) <= set(names)
    assert all(hasattr(go, n) for n in go.__all__)


#: names added to the flat API since the move
ADDED = ["Stepper", "StepFailedError"]


def test_added_names_are_in_the_flat_api():
    assert set(ADDED) <= set(go.__all__)
    for name in ADDED:
        exec(f"from gaussopt import {name}", {})
    assert issubclass(go.StepFailedError, go.SolverError)
