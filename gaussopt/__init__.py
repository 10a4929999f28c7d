"""gaussopt: constrained mechanical systems by Gauss's principle of least constraint.

Every time step is an optimization: the accelerations minimize the Gauss
function ``0.5 a^T M a - a^T F`` subject to the constraints brought to the
acceleration level, ``A a = b``. The step can be solved in closed form
(Udwadia--Kalaba / Udwadia--Phohomsiri), through Lagrange's multipliers, as a
QP (cvxpy) or by a genetic algorithm (pygad).
"""

from .constraints import AccelerationConstraint, Constraint, Holonomic, Inequality, Nonholonomic
from .exceptions import (ConvergenceWarning, GaussoptError, InconsistentConstraintsError, IndeterminateMotionError,
                         ModelError, ObjectiveMismatchWarning, RankChangeWarning, SolverError,
                         ToleranceWarning, TrajectoryFileError, UnsupportedConstraintError)
from .contact import Contact
from .dense import DenseSolution
from .integrate import Baumgarte, Projection, simulate
from . import plotting
from .compare import Comparison, compare
from .problem import Problem, ga_settings
from .quasi import QuasiVelocities
from .result import RankEvent, StepResult, Trajectory, load
from .solvers import SOLVERS, StepSolver
from .step import make_solver, solve_step, solve_steps
from .system import System, rebuildable
from .sweep import SweepResult, sweep

__version__ = "0.1.0"

_LAZY = ("symbolic", "SymbolicModel", "from_lagrangian", "from_mechanics", "kane_velocities",
         "multibody")


def __getattr__(name):
    # sympy (symbolic) is imported on first use only: it costs ~1 s
    if name in _LAZY:
        import importlib

        if name == "multibody":
            return importlib.import_module(".multibody", __name__)
        mod = importlib.import_module(".symbolic", __name__)
        return mod if name == "symbolic" else getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "System", "rebuildable", "sweep", "SweepResult", "Holonomic", "Nonholonomic", "AccelerationConstraint", "Inequality", "Contact", "Constraint",
    "solve_step", "solve_steps", "make_solver", "simulate", "Baumgarte", "Projection",
    "DenseSolution", "Problem", "ga_settings", "QuasiVelocities", "compare", "Comparison", "plotting", "StepResult", "Trajectory", "RankEvent", "load", "SOLVERS", "StepSolver",
    "GaussoptError", "ModelError", "IndeterminateMotionError", "InconsistentConstraintsError",
    "symbolic", "SymbolicModel", "from_lagrangian", "from_mechanics", "kane_velocities", "multibody",
    "UnsupportedConstraintError", "SolverError", "ObjectiveMismatchWarning", "ConvergenceWarning", "RankChangeWarning",
    "ToleranceWarning", "TrajectoryFileError", "__version__",
]
