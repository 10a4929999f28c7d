"""Base class of the step solvers: shared bookkeeping, objective handling, checks.

A step solver is built once per system (``solver = SOLVERS[name](system,
**options)``) and then evaluated many times: :meth:`StepSolver.acceleration`
is the hot path used inside integrators, :meth:`StepSolver.solve` returns the
full :class:`~gaussopt.result.StepResult`. Each subclass implements only
``_solve(t, q, v, M, F, A, b) -> (a, lam, info)``.
"""

from __future__ import annotations

import warnings
from typing import Callable, Optional

import numpy as np

from ..exceptions import ModelError, ObjectiveMismatchWarning, UnsupportedConstraintError
from ..linalg import DEFAULT_RANK_TOL, mass_scale, range_projector, solve_gauss
from ..result import StepResult
from ..system import System

__all__ = ["StepSolver", "OBJECTIVES"]

OBJECTIVES = ("exact", "paper")


class StepSolver:
    """Common machinery of every step solver.

    Parameters
    ----------
    system : System
    objective : {"exact", "paper"}, default "exact"
        ``"exact"`` minimizes ``0.5 a^T M a - a^T F`` (the KKT conditions are
        Lagrange's equations of the first kind; correct for singular ``M``).
        ``"paper"`` minimizes paper 001's ``(M a - F)^T M^+ (M a - F)``, which
        equals the exact objective with ``F`` replaced by ``M M^+ F``: it drops
        the part of ``F`` acting in ``null(M)``. When the two give different
        accelerations (``N^T (I - M M^+) F != 0``, ``N`` a basis of
        ``null(A)``) an :class:`~gaussopt.exceptions.ObjectiveMismatchWarning`
        is issued (checked whenever ``M`` is constant, and at every step in
        ``"paper"`` mode) and ``info["objective_mismatch"]`` gives
        ``|a_exact - a_paper|``.
    rank_tol : float, default 1e-8
        Relative tolerance of all rank decisions (see :mod:`gaussopt.linalg`).
    row_scale : array_like, shape (m,), optional
        Reference scale of each constraint row for the vanishing-row test
        (default: the largest norm the row has shown to this solver).
    """

    name = "base"
    supports_inequalities = False

    def __init__(self, system: System, *, objective: str = "exact",
                 rank_tol: float = DEFAULT_RANK_TOL, row_scale=None) -> None:
        if not isinstance(system, System):
            raise ModelError(f"`system` must be a gaussopt.System, found {type(system).__name__}.")
        if objective not in OBJECTIVES:
            raise ModelError(f"`objective` must be one of {OBJECTIVES}, found {objective!r}.")
        if not (np.isfinite(rank_tol) and 0 < rank_tol < 1):
            raise ModelError(f"`rank_tol` must be in (0, 1), found {rank_tol!r}.")
        if system.inequalities and not self.supports_inequalities:
            raise UnsupportedConstraintError(
                f"solver {self.name!r} cannot treat the Inequality constraints "
                f"{[c.name for c in system.inequalities]}; use solver='qp'.")
        self.system = system
        self.objective = objective
        self.rank_tol = float(rank_tol)
        self.row_ref = None if row_scale is None else np.asarray(row_scale, dtype=float)
        self.coords = list(system.coordinates)
        self._n = system.n
        # set-up work done once
        self._w_const: Optional[float] = None
        self._P_const: Optional[np.ndarray] = None      # projector M M^+ (constant singular M)
        self._null_force_check = False
        Mc = system.constant_mass
        if Mc is not None:
            self._w_const = mass_scale(Mc)
            P, r = range_projector(Mc)
            if r < self._n:
                self._P_const = P
                self._null_force_check = True
        self.last_info: dict = {}
        self._mismatch_warned = False

    # ------------------------------------------------------------- evaluation
    def _mass(self, t, q):
        return self.system.mass(t, q)

    def _prepare(self, t, q, v):
        """Evaluate M, F, the objective's force and the equality rows."""
        sysm = self.system
        M = sysm.mass(t, q)
        F = sysm.force(t, q, v)
        A, b = sysm.rows(t, q, v)
        if self.b_correction is not None:
            b = b + self.b_correction(t, q, v, A)
        return M, F, A, b

    #: optional hook ``(t, q, v, A) -> db`` added to ``b`` (Baumgarte stabilization)
    b_correction: Optional[Callable] = None

    def _objective_force(self, M, F):
        """Force entering the objective: ``F`` or ``M M^+ F``; also returns the
        dropped null-space part ``d`` (or None when it is zero/unknown)."""
        if self.objective == "exact" and not self._null_force_check:
            return F, None
        if self._P_const is not None:
            P = self._P_const
        elif self.system.constant_mass is not None:
            return F, None                          # constant regular M: P = I
        else:
            P, r = range_projector(M)
            if r == self._n:
                return F, None
        PF = P @ F
        d = F - PF
        if float(np.abs(d).max(initial=0.0)) <= 1e-14 * max(float(np.abs(F).max(initial=0.0)), 1e-300):
            d = None
        return (PF if self.objective == "paper" else F), d

    def _w(self, M) -> float:
        return self._w_const if self._w_const is not None else mass_scale(M)

    def _check_mismatch(self, M, A, d, a) -> float:
        """``|a_exact - a_paper|`` caused by the null-space force ``d``; warns once."""
        if d is None:
            return 0.0
        sol = solve_gauss(M, d, A, np.zeros(A.shape[0]), rank_tol=self.rank_tol, w=self._w(M),
                          want_multipliers=False)
        da = float(np.sqrt(sol.a @ sol.a))
        scale = float(np.sqrt(a @ a)) + 1e-300
        if da > 1e-9 * scale and not self._mismatch_warned:
            self._mismatch_warned = True
            warnings.warn(
                "objective='exact' and objective='paper' give different accelerations here "
                f"(|a_exact - a_paper| = {da:.3g}, |a| = {scale:.3g}): the applied force has a "
                "component in null(M) that the constraints do not balance, which paper 001's "
                "M^+-weighted Gauss function ignores. 'exact' is the Lagrange-I motion.",
                ObjectiveMismatchWarning, stacklevel=4)
        return da

    # ------------------------------------------------------------- interface
    def _solve(self, t, q, v, M, F, A, b) -> tuple[np.ndarray, np.ndarray, dict]:
        raise NotImplementedError

    def solve(self, t: float, q: np.ndarray, v: np.ndarray) -> StepResult:
        """Solve one step at ``(t, q, v)`` and return the full :class:`StepResult`."""
        M, F, A, b = self._prepare(t, q, v)
        Fobj, d = self._objective_force(M, F)
        a, lam, info = self._solve(t, q, v, M, Fobj, A, b)
        if not np.all(np.isfinite(a)):
            from ..exceptions import SolverError
            raise SolverError(f"solver {self.name!r} produced non-finite accelerations at t={t}.")
        info = dict(info)
        info.setdefault("solver", self.name)
        info["residual"] = float(np.abs(A @ a - b).max(initial=0.0))
        if d is not None:
            info["objective_mismatch"] = self._check_mismatch(M, A, d, a)
        Qc = M @ a - F
        gauss = float(0.5 * a @ (M @ a) - a @ Fobj)
        self.last_info = info
        return StepResult(a=a, constraint_force=Qc, multipliers=lam, gauss=gauss, info=info)

    def acceleration(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Hot path: accelerations only (no constraint force, Gauss value, residual or
        objective-mismatch diagnostics)."""
        M, F, A, b = self._prepare(t, q, v)
        if self.objective == "paper":
            F, _ = self._objective_force(M, F)
        a = self._solve(t, q, v, M, F, A, b)[0]
        if not np.all(np.isfinite(a)):
            from ..exceptions import SolverError
            raise SolverError(f"solver {self.name!r} produced non-finite accelerations at t={t}.")
        return a

    def reset(self) -> None:
        """Forget state carried between steps (warm starts)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(system={self.system.name!r}, objective={self.objective!r})"
