"""Step solvers: one Gauss step, four ways. ``SOLVERS`` maps names to classes."""

from gaussopt.gauss.solvers.base import OBJECTIVES, StepSolver
from gaussopt.gauss.solvers.closed_form import ClosedForm
from gaussopt.gauss.solvers.ga.genetic import Genetic
from gaussopt.gauss.solvers.lagrange import Lagrange
from gaussopt.gauss.solvers.qp.qp_solver import QP

SOLVERS: dict[str, type[StepSolver]] = {
    "closed_form": ClosedForm,
    "lagrange": Lagrange,
    "qp": QP,
    "ga": Genetic,
}

__all__ = ["SOLVERS", "StepSolver", "ClosedForm", "Lagrange", "QP", "Genetic", "OBJECTIVES"]
