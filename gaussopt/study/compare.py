"""Compare step solvers on one problem (a :class:`Problem` or a :class:`System` with its
initial state): accuracy, constraint drift, energy drift, cost."""

from __future__ import annotations

import csv
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.study.problem import Problem, ga_settings
from gaussopt.core.result import Trajectory
from gaussopt.study.energy_balance import energy_balance
from gaussopt.model.system import System

__all__ = ["compare", "Comparison"]

DEFAULT_SOLVERS = ("closed_form", "lagrange", "qp", "ga")


class RowTable:
    """Rows (dicts) shown as a table: :attr:`columns` (every key of any row, in the order
    met), :meth:`to_markdown`, :meth:`to_csv`. Floats in Markdown with ``_digits``
    significant digits."""

    rows: list
    _digits = 3

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
            lines.append("| " + " | ".join(fmt_cell(r.get(c, ""), self._digits) for c in cols) + " |")
        return "\n".join(lines)

    def to_csv(self, path) -> Path:
        """Write the rows as CSV (one column per key of any row)."""
        path = Path(path)
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=self.columns)
            w.writeheader()
            for r in self.rows:
                w.writerow(r)
        return path


def fmt_cell(x, digits: int = 3) -> str:
    """A table cell: floats with ``digits`` significant digits."""
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


@dataclass
class Comparison(RowTable):
    """One row per solver (``rows``) plus the trajectories (``trajectories``)."""

    problem: Problem
    rows: list = field(default_factory=list)
    trajectories: dict = field(default_factory=dict)

    def plot(self, path=None, key: Optional[str] = None):
        """Summary figure: an output vs the reference, its error, residuals, energy."""
        from gaussopt.study.plotting import summary_figure

        return summary_figure(self.problem, self.trajectories, key=key, path=path)


def summarize(problem: Problem, name: str, tr: Trajectory, wall: float) -> dict:
    """One comparison row for a trajectory."""
    row: dict = {"solver": name, "t_end": float(tr.t[-1]) if len(tr) else float("nan"),
                 "success": tr.success}
    if problem.reference is not None and len(tr):
        ref = problem.reference(tr.t)
        out = problem.outputs(tr.q, tr.v)
        # at an impact (gaussopt.integrate.contact_run) the velocities jump and the run holds the state
        # before and after at the same time: the errors are taken off those instants
        keep = (~np.isin(tr.t, [im.t for im in tr.impacts]) if tr.impacts
                else np.ones(len(tr), dtype=bool))
        for k, rv in ref.items():
            if k in out and keep.any():
                row[f"max_err_{k}"] = float(np.max(np.abs(np.asarray(out[k] - rv)[keep])))
    row["max_pos_residual"] = float(np.max(tr.position_residual)) if len(tr) else float("nan")
    row["max_vel_residual"] = float(np.max(tr.velocity_residual)) if len(tr) else float("nan")
    if tr.energy is not None and len(tr):
        # a contact run's impacts and friction take energy: not drift (energy_balance)
        bal = energy_balance(tr, getattr(problem, "system", None))
        if bal is not None and bal.has_losses:
            row["max_energy_drift"] = float(np.max(np.abs(bal.drift)))
            if tr.impacts:
                row["energy_lost_impacts"] = float(bal.impact_loss[-1])
            if bal.friction_source != "none":
                row["energy_lost_friction"] = float(bal.friction_loss[-1])
        else:
            row["max_energy_drift"] = float(np.max(np.abs(tr.energy - tr.energy[0])))
    row["rank_events"] = len(tr.rank_events)
    if tr.multipliers.size:
        row["max_abs_multiplier"] = float(np.nanmax(np.abs(tr.multipliers)))
    # the run's own time (without compilation or cache loading: Trajectory.stats)
    row["wall_time_s"] = tr.stats.get("wall_time", wall)
    row["compile_time_s"] = tr.stats.get("compile_time", 0.0)
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


def compare(problem: Union[Problem, System], solvers: Optional[Sequence[str]] = None,
            progress: Optional[Callable] = None, *, t_span: Optional[tuple] = None,
            q0=None, v0=None, reference: Optional[Callable] = None,
            outputs: Optional[Callable] = None, solver_settings: Optional[dict] = None,
            **settings) -> Comparison:
    """Simulate ``problem`` with every solver and tabulate the results.

    Parameters
    ----------
    problem : Problem or System
        A :class:`Problem` (``problems/``), or a :class:`System` with ``t_span``,
        ``q0`` and ``v0``.
    solvers : sequence of str, optional
        Solver names, or aliases defined in ``solver_settings``; default
        ``problem.solvers``, for a System ``("closed_form", "lagrange", "qp")``.
    progress : callable, optional
        ``progress(solver_name, t)`` after every accepted step.
    t_span : (float, float)
        The time span [s]: required with a System; with a Problem it replaces the
        span of every row (including a row's own, e.g. the GA's short one).
    q0, v0 : array_like, shape (n,)
        The initial state: required with a System; with a Problem they replace its own.
    reference : callable, optional
        ``reference(t) -> dict`` of independent values of outputs at the times ``t``
        (shape (N,)); each row gets ``max_err_<name>`` for every name that
        ``outputs`` also has.
    outputs : callable, optional
        ``outputs(q, v) -> dict`` of quantities on arrays of shape (N, n); default for
        a System: the coordinates by name.
    solver_settings : dict, optional
        Per-solver settings by solver name or alias (see :class:`Problem`); an
        entry may contain ``t_span``. With a System, a ``"ga"`` row without an
        entry runs :func:`ga_settings` (``rk4`` at ``dt = 1e-3`` over the first
        0.2 s: the GA costs milliseconds per step). With a Problem they update its own.
    **settings
        Keyword arguments of :func:`~gaussopt.simulate` for every row: with a System
        the settings of every row (``solver_settings`` apply on top), with a
        Problem overrides of its recommended settings.

    Returns
    -------
    Comparison
        ``rows`` (one dict per solver: errors against the reference, residuals,
        energy drift, rank events, cost) and ``trajectories`` by solver name.

    Raises
    ------
    ModelError
        A System without ``t_span``, ``q0`` or ``v0``; ``problem`` neither a
        Problem nor a System.

    Examples
    --------
    A Cartesian pendulum, the direct solvers against each other:

    >>> import numpy as np, gaussopt as go
    >>> pend = go.System(("x", "y"), mass=np.eye(2), force=[0.0, -9.81],
    ...                  constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
    >>> comp = go.compare(pend, ["closed_form", "lagrange"], t_span=(0.0, 0.5),
    ...                   q0=[1.0, 0.0], v0=[0.0, 0.0], rtol=1e-10, atol=1e-10)
    >>> [row["solver"] for row in comp.rows]
    ['closed_form', 'lagrange']
    """
    if isinstance(problem, System):        # the settings of every row, under solver_settings
        problem = _system_problem(problem, t_span=t_span, q0=q0, v0=v0, reference=reference,
                                  outputs=outputs, solver_settings=solver_settings,
                                  settings=settings)
        settings = {}
    else:                                  # overrides of the problem's settings
        problem = _replaced(problem, q0=q0, v0=v0, reference=reference, outputs=outputs,
                            solver_settings=solver_settings)
        if t_span is not None:
            settings["t_span"] = tuple(t_span)
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


def _replaced(problem: Problem, *, q0, v0, reference, outputs, solver_settings) -> Problem:
    """``problem`` with the fields :func:`compare` was given replaced."""
    if not isinstance(problem, Problem):
        raise ModelError(f"`problem` must be a gaussopt.Problem or a gaussopt.System, found "
                         f"{type(problem).__name__}.")
    given = {k: v for k, v in (("reference", reference), ("outputs", outputs)) if v is not None}
    given.update({k: np.asarray(v, dtype=float) for k, v in (("q0", q0), ("v0", v0))
                  if v is not None})
    if solver_settings is not None:
        given["solver_settings"] = {**problem.solver_settings, **solver_settings}
    return dataclasses.replace(problem, **given) if given else problem


def _system_problem(system: System, *, t_span, q0, v0, reference, outputs, solver_settings,
                    settings: dict) -> Problem:
    """The :class:`Problem` made of a :class:`System` and its initial value problem."""
    missing = [k for k, v in (("t_span", t_span), ("q0", q0), ("v0", v0)) if v is None]
    if missing:
        raise ModelError(f"comparing a System needs its time span and initial state: pass "
                         f"{', '.join(f'`{k}`' for k in missing)} (e.g. go.compare(system, "
                         f"t_span=(0, 1), q0=q0, v0=v0)).")
    t_span = tuple(float(t) for t in np.ravel(t_span))
    if len(t_span) != 2:
        raise ModelError(f"`t_span` must be (t0, t_end), found {t_span!r}.")
    names = system.coordinates

    def coordinates(q, v):
        q = np.atleast_2d(q)
        return {c: q[:, i] for i, c in enumerate(names)}

    return Problem(name=system.name, system=system, q0=np.asarray(q0, dtype=float),
                   v0=np.asarray(v0, dtype=float), t_span=t_span, settings=dict(settings),
                   outputs=outputs or coordinates, reference=reference,
                   solver_settings={"ga": ga_settings(t_span[1], t0=t_span[0]),
                                    **(solver_settings or {})},
                   solvers=("closed_form", "lagrange", "qp"))
