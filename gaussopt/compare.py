"""Compare step solvers on one problem: accuracy, constraint drift, energy drift, cost."""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .problem import Problem
from .result import Trajectory

__all__ = ["compare", "Comparison"]

DEFAULT_SOLVERS = ("closed_form", "lagrange", "qp", "ga")


@dataclass
class Comparison:
    """One row per solver (``rows``) plus the trajectories (``trajectories``)."""

    problem: Problem
    rows: list = field(default_factory=list)
    trajectories: dict = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        cols: list[str] = []
        for r in self.rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
        return cols

    def to_markdown(self) -> str:
        cols = self.columns
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in self.rows:
            lines.append("| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |")
        return "\n".join(lines)

    def to_csv(self, path) -> Path:
        path = Path(path)
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=self.columns)
            w.writeheader()
            for r in self.rows:
                w.writerow(r)
        return path

    def plot(self, path=None, key: Optional[str] = None):
        """Summary figure: an output vs the reference, its error, residuals, energy."""
        from .plotting import summary_figure

        return summary_figure(self.problem, self.trajectories, key=key, path=path)


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def summarize(problem: Problem, name: str, tr: Trajectory, wall: float) -> dict:
    """One comparison row for a trajectory."""
    row: dict = {"solver": name, "t_end": float(tr.t[-1]) if len(tr) else float("nan"),
                 "success": tr.success}
    if problem.reference is not None and len(tr):
        ref = problem.reference(tr.t)
        out = problem.outputs(tr.q, tr.v)
        for k, rv in ref.items():
            if k in out:
                row[f"max_err_{k}"] = float(np.max(np.abs(out[k] - rv)))
    row["max_pos_residual"] = float(np.max(tr.position_residual)) if len(tr) else float("nan")
    row["max_vel_residual"] = float(np.max(tr.velocity_residual)) if len(tr) else float("nan")
    if tr.energy is not None and len(tr):
        row["max_energy_drift"] = float(np.max(np.abs(tr.energy - tr.energy[0])))
    row["rank_events"] = len(tr.rank_events)
    if tr.multipliers.size:
        row["max_abs_multiplier"] = float(np.nanmax(np.abs(tr.multipliers)))
    row["wall_time_s"] = wall
    row["steps"] = tr.stats.get("steps", 0)
    row["time_per_step_ms"] = 1e3 * tr.stats.get("time_per_step", float("nan"))
    row["rhs_evals"] = tr.stats.get("rhs_evaluations", 0)
    if "sample_error_max" in tr.stats:
        row["ga_error_max"] = tr.stats["sample_error_max"]
    if "ga_generations_mean" in tr.stats:
        row["ga_generations_mean"] = tr.stats["ga_generations_mean"]
    if not tr.success:
        row["message"] = tr.message
    return row


def compare(problem: Problem, solvers: Optional[Sequence[str]] = None,
            progress: Optional[callable] = None, **settings) -> Comparison:
    """Simulate ``problem`` with every solver and tabulate the results.

    Parameters
    ----------
    problem : Problem
    solvers : sequence of str, optional
        Solver names or aliases defined in ``problem.solver_settings``;
        default ``problem.solvers``.
    progress : callable, optional
        ``progress(solver_name, t)`` after every accepted step.
    **settings
        Overrides of the problem's recommended :func:`~gaussopt.simulate` settings.

    Returns
    -------
    Comparison
    """
    comp = Comparison(problem=problem)
    for name in (problem.solvers if solvers is None else solvers):
        kw = dict(settings)
        if progress is not None:
            kw["progress"] = (lambda t, name=name: progress(name, t))
        t0 = time.perf_counter()
        tr = problem.simulate(name, **kw)
        wall = time.perf_counter() - t0
        comp.trajectories[name] = tr
        comp.rows.append(summarize(problem, name, tr, wall))
    return comp
