"""Step solvers: one Gauss step, four ways. ``SOLVERS`` maps names to classes."""

from .base import OBJECTIVES, StepSolver
from .closed_form import ClosedForm
from .genetic import Genetic
from .lagrange import Lagrange
from .qp import QP

SOLVERS: dict[str, type[StepSolver]] = {
    "closed_form": ClosedForm,
    "lagrange": Lagrange,
    "qp": QP,
    "ga": Genetic,
}

__all__ = ["SOLVERS", "StepSolver", "ClosedForm", "Lagrange", "QP", "Genetic", "OBJECTIVES"]
