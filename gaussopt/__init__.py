"""gaussopt: constrained mechanical systems by Gauss's principle of least constraint.

Every time step is an optimization: the accelerations minimize the Gauss
function ``0.5 a^T M a - a^T F`` subject to the constraints brought to the
acceleration level, ``A a = b``. The step can be solved in closed form
(Udwadia--Kalaba / Udwadia--Phohomsiri), through Lagrange's multipliers, as a
QP (cvxpy) or by a genetic algorithm (pygad).

This module is the flat public API; the code lives in packages by role, data
flowing downward (each imports only from the ones below it):

==================  ==================================================================
:mod:`.study`       problems registry, compare, sweep, plotting, the command line
:mod:`.symbolic`,   front ends: a Lagrangian in sympy; planar and spatial bodies and
:mod:`.multibody`,  joints, MJCF/URDF files; the reduced (quasi-velocity) formulation
:mod:`.quasi`       with its own run
:mod:`.integrate`   a run over time (:func:`simulate`): options, stabilization, the
                    compiled engine, dense output and events, the contact run
:mod:`.gauss`       one step at ``(t, q, v)``: rank decision, dense and band steps, the
                    four solvers, :func:`solve_step`, the contact problem
:mod:`.model`       what a user describes: :class:`System`, constraints, contacts
:mod:`.core`        compiled-code machinery, the model interface, records, results,
                    exceptions, the tables of status codes and settings
==================  ==================================================================
"""

import sys as _sys

from gaussopt.core.exceptions import (ConvergenceWarning, GaussoptError,
                                      InconsistentConstraintsError, IndeterminateMotionError,
                                      ModelError, ObjectiveMismatchWarning, RankChangeWarning,
                                      SolverError, StepFailedError, ToleranceWarning,
                                      TrajectoryFileError, UnsupportedConstraintError)
from gaussopt.core.result import Impact, RankEvent, StepResult, Trajectory, load
from gaussopt.model.constraints import (AccelerationConstraint, Constraint, Holonomic, Inequality,
                                        Nonholonomic)
from gaussopt.model.contact import Contact, ContactPoints
from gaussopt.model.system import System, rebuildable
from gaussopt.gauss.contact_problem import ContactSolution, ContactSolveError, solve_contact
from gaussopt.gauss.solvers import SOLVERS, StepSolver
from gaussopt.gauss.solve_step import make_solver, solve_step, solve_steps
from gaussopt.integrate.contact_run import ContactDenseSolution
from gaussopt.integrate.dense_output import DenseSolution
from gaussopt.integrate.ivp import simulate
from gaussopt.integrate.stabilization import Baumgarte, Projection
from gaussopt.integrate.stepper import Stepper
from gaussopt.quasi import QuasiVelocities
from gaussopt.study import plotting
from gaussopt.study.compare import Comparison, compare
from gaussopt.study.problem import Problem, ga_settings
from gaussopt.study.sweep import SweepResult, sweep
from gaussopt.core.version import __version__

#: public module paths of gaussopt 0.1 whose modules now live in a package by role: the
#: same module objects answer there (``import gaussopt.plotting``,
#: ``from gaussopt.exceptions import ModelError``, ``from gaussopt.solvers import QP``)
_PUBLIC_PATHS = {"plotting": "gaussopt.study.plotting", "exceptions": "gaussopt.core.exceptions",
                 "solvers": "gaussopt.gauss.solvers"}
for _name, _path in _PUBLIC_PATHS.items():
    _sys.modules[f"{__name__}.{_name}"] = _sys.modules[_path]
exceptions = _sys.modules["gaussopt.core.exceptions"]
solvers = _sys.modules["gaussopt.gauss.solvers"]
del _name, _path

#: imported on first use: sympy (the symbolic front end) costs about a second, the
#: multibody package its compiled kernels' set-up
_LAZY = {"symbolic": "gaussopt.symbolic", "SymbolicModel": "gaussopt.symbolic",
         "from_lagrangian": "gaussopt.symbolic", "from_mechanics": "gaussopt.symbolic",
         "kane_velocities": "gaussopt.symbolic", "multibody": "gaussopt.multibody"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        mod = importlib.import_module(_LAZY[name])
        return mod if mod.__name__ == f"{__name__}.{name}" else getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


__all__ = [
    # the system and its constraints
    "System", "rebuildable", "Holonomic", "Nonholonomic", "AccelerationConstraint",
    "Inequality", "Contact", "ContactPoints", "Constraint",
    # one step
    "solve_step", "solve_steps", "make_solver", "SOLVERS", "StepSolver", "StepResult",
    "solve_contact", "ContactSolution",
    # a run
    "simulate", "Baumgarte", "Projection", "Trajectory", "RankEvent", "Impact", "load",
    "DenseSolution", "ContactDenseSolution", "QuasiVelocities", "Stepper",
    # problems and studies
    "Problem", "ga_settings", "compare", "Comparison", "sweep", "SweepResult", "plotting",
    # front ends (imported on first use)
    "symbolic", "SymbolicModel", "from_lagrangian", "from_mechanics", "kane_velocities",
    "multibody",
    # exceptions and warnings
    "GaussoptError", "ModelError", "IndeterminateMotionError", "InconsistentConstraintsError",
    "UnsupportedConstraintError", "SolverError", "StepFailedError", "ContactSolveError",
    "TrajectoryFileError",
    "ObjectiveMismatchWarning", "ConvergenceWarning", "RankChangeWarning", "ToleranceWarning",
    "__version__",
]
