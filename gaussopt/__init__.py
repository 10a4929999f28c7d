"""gaussopt: constrained mechanical systems by Gauss's principle of least constraint.

Every time step is an optimization: the accelerations minimize the Gauss
function ``0.5 a^T M a - a^T F`` subject to the constraints brought to the
acceleration level, ``A a = b``. The step can be solved in closed form
(Udwadia--Kalaba / Udwadia--Phohomsiri), through Lagrange's multipliers, as a
QP (cvxpy) or by a genetic algorithm (pygad).
"""

from .constraints import AccelerationConstraint, Constraint, Holonomic, Inequality, Nonholonomic
from .exceptions import (ConvergenceWarning, GaussoptError, InconsistentConstraintsError, IndeterminateMotionError,
                         ModelError, ObjectiveMismatchWarning, SolverError,
                         UnsupportedConstraintError)
from .integrate import Baumgarte, Projection, simulate
from . import plotting
from .compare import Comparison, compare
from .problem import Problem
from .quasi import QuasiVelocities
from .result import RankEvent, StepResult, Trajectory, load
from .solvers import SOLVERS, StepSolver
from .step import make_solver, solve_step
from .system import System

__version__ = "0.1.0"

__all__ = [
    "System", "Holonomic", "Nonholonomic", "AccelerationConstraint", "Inequality", "Constraint",
    "solve_step", "make_solver", "simulate", "Baumgarte", "Projection",
    "Problem", "QuasiVelocities", "compare", "Comparison", "plotting", "StepResult", "Trajectory", "RankEvent", "load", "SOLVERS", "StepSolver",
    "GaussoptError", "ModelError", "IndeterminateMotionError", "InconsistentConstraintsError",
    "UnsupportedConstraintError", "SolverError", "ObjectiveMismatchWarning", "ConvergenceWarning", "__version__",
]
