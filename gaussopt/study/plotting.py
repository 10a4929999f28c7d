"""Figures for trajectories and comparisons (matplotlib).

Every ``plot_*`` function draws on ``ax`` (a new figure when ``ax`` is None) and
returns the Axes it drew on, so figures compose::

    fig, axs = plt.subplots(2, 2)
    go.plotting.plot_coordinates(traj, ax=axs[0, 0])
    go.plotting.plot_residuals({"closed form": traj}, ax=axs[0, 1])

Conventions shared by every figure:

- **One colour per solver**, in every panel of every figure:
  :data:`SOLVER_COLORS` (a name not in it gets the next colour of a fixed cycle,
  :func:`solver_color`, and keeps it for the rest of the session). The
  closed form, Lagrange-I and the QP usually coincide to rounding; they are
  drawn thick to thin (:data:`SOLVER_WIDTHS`) so that all three stay visible.
- **Line style is the kind of quantity**: position-level solid, velocity-level
  dashed (:data:`KIND_STYLES`).
- **Units** on every axis (:mod:`gaussopt.study.units`): those ``problem.units``
  states (see :class:`gaussopt.Problem`: coordinates, outputs, ``"energy"``,
  ``"length"``, ``"constraints"``), else those a multibody model knows (its
  coordinates and the rows of its joints), and those that follow: the residuals
  (``Phi``, ``dPhi/dt``), the multipliers (energy / row unit) and ``M a - F``
  (energy / coordinate unit). A unit nobody can know is said in words
  (``[units of the constraint]``), never ``[?]``.
- Exact zeros on log axes are left out (NaN), not clipped to a floor; so are
  multipliers and ``M a - F`` where the constraints carry no load (rounding zeros,
  :func:`rounding_zeros`), with a note saying how many samples.
- **Singular positions** (a run's rank events) are grey vertical lines on every
  time axis, diamonds on an output, and drawn among the frames.
- The **energy drift** of the summary is relative to an energy scale ``E_s``
  (:func:`energy_scale`: ``max T + range V``) whose value its axis label states.
  A run that loses energy for physical reasons (impacts with restitution < 1,
  sliding friction) shows the **energy balance**
  (:func:`~gaussopt.study.energy_balance.energy_balance`): the drift
  ``|E - E(0) + losses|`` in the solver's colour and the losses themselves as
  their own black lines, never the losses as drift.
- **Contact runs**: the output plotted is the one that moves (:func:`moving_output`,
  by the range of the motion), and every **impact** is a red dashed vertical line on
  every time axis and a triangle on the output.
- **Multipliers** and ``M a - F`` are on a log axis where the values drawn span more
  than a decade, else on a linear one.
- **Drawings**: the problem's ``draw``, else its multibody model's bodies, joints
  and frames (:func:`draw_model`), a spatial model in 3-D with equal axes;
  :func:`animate` writes a GIF of any multibody run.
- Sweep figures (:func:`plot_sweep`) label their axes with the units of the
  parameters and outputs that ``gaussopt show`` prints (:func:`sweep_units`).
- One legend per figure, outside the data; the time label only on the bottom
  axis of a column.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.core.result import Trajectory
from gaussopt.study.energy_balance import energy_balance
from gaussopt.study.units import (Unknown, constraint_levels, derived_unit, energy_per,
                                  join_units, per_second, problem_units, times_second, unit_of)

__all__ = ["SOLVER_COLORS", "SOLVER_WIDTHS", "KIND_STYLES", "solver_color", "problem_units",
           "problem_title", "agreement", "plot_coordinates", "plot_outputs",
           "plot_output_difference",
           "plot_residuals", "plot_energy", "plot_multipliers", "draw_frame", "animate",
           "summary_figure", "make_comparison_figures", "comparison_figures",
           "energy_scale", "force_rounding_level", "rounding_zeros", "parameter_units",
           "sweep_units", "sweep_column_unit", "plot_sweep", "sweep_figures"]

Trajs = Union[Trajectory, Mapping[str, Trajectory]]

#: Colour of each solver (and alias) in every figure.
SOLVER_COLORS: dict = {
    "closed_form": "#1f77b4",          # blue
    "lagrange": "#ff7f0e",             # orange
    "qp": "#2ca02c",                   # green
    "ga": "#d62728",                   # red
    "lagrange_baumgarte": "#9467bd",   # purple
}
#: Colours given, in this order, to solver names not in ``SOLVER_COLORS``.
EXTRA_COLORS = ("#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#637939",
                "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d")
_FIXED = frozenset(SOLVER_COLORS)
#: Line widths: the solvers that agree to rounding are drawn thick to thin.
SOLVER_WIDTHS: dict = {"closed_form": 3.2, "lagrange": 2.0, "qp": 1.0}
_WIDTH = 1.4
#: Line style of each kind of quantity.
KIND_STYLES: dict = {"position": "-", "velocity": "--", "acceleration": ":"}
REFERENCE_STYLE = {"color": "k", "ls": ":", "lw": 1.3}
#: Rank events (singular positions): a thin grey vertical line behind the data on every
#: time axis and, on an output, a diamond at the event.
EVENT_STYLE = {"color": "0.62", "lw": 1.1, "ls": "-"}
EVENT_MARKER = {"marker": "D", "ms": 5.5, "mfc": "white", "mec": "k", "mew": 1.1}
#: Impacts of a contact run: a red dashed vertical line on every time axis and, on an
#: output, a triangle at the state before the impact.
IMPACT_STYLE = {"color": "#c0392b", "lw": 0.9, "ls": (0, (4, 2)), "alpha": 0.75}
IMPACT_MARKER = {"marker": "v", "ms": 5.0, "mfc": "#c0392b", "mec": "#7b241c", "mew": 0.6}
#: Solvers whose curves coincide to rounding (annotated with their mutual difference).
EXACT_SOLVERS = ("closed_form", "lagrange", "qp")


def _key(name: str) -> str:
    return str(name).strip().lower().replace(" ", "_").replace("-", "_")


def solver_color(name: str) -> str:
    """The colour of solver ``name`` in every figure.

    Names are matched case-insensitively with spaces as underscores (``"closed
    form"`` is ``closed_form``). A new name gets the next colour of
    :data:`EXTRA_COLORS` and keeps it for the rest of the session.
    """
    k = _key(name)
    if k not in SOLVER_COLORS:
        n_extra = sum(1 for s in SOLVER_COLORS if s not in _FIXED)
        SOLVER_COLORS[k] = EXTRA_COLORS[n_extra % len(EXTRA_COLORS)]
    return SOLVER_COLORS[k]


def _style(name: str, names: Optional[Sequence[str]] = None) -> dict:
    """Colour, width and drawing order of a solver's lines (thin lines on top). The
    widths of :data:`SOLVER_WIDTHS` apply when ``names`` (the runs drawn together)
    hold two or more of them; otherwise every line has the same width."""
    layered = names is None or sum(_key(n) in SOLVER_WIDTHS for n in names) > 1
    lw = SOLVER_WIDTHS.get(_key(name), _WIDTH) if layered else _WIDTH
    return {"color": solver_color(name), "lw": lw, "zorder": 2.5 - 0.1 * lw}


def _tag(lines, name: str):
    for ln in lines:
        ln.set_gid(f"solver:{_key(name)}")
    return lines


# --------------------------------------------------------------------------- units, titles

def _unit(units: Mapping, name: str) -> str:
    return unit_of(units, name)


#: The unit algebra of :mod:`gaussopt.study.units`, under the names figures use.
_join = join_units
_per_second = per_second
_energy_per = energy_per
_times_second = times_second
_derived_unit = derived_unit
_levels = constraint_levels


_SUPERSCRIPTS = str.maketrans({"2": "\u00b2", "3": "\u00b3", "-": "\u207b", "1": "\u00b9"})


def _label(text: str, unit: str) -> str:
    """``text [unit]``, with ``^2``-style exponents as superscripts (m/s^2 -> m/s\u00b2);
    a unit that cannot be known (:class:`~gaussopt.study.units.Unknown`) in words."""
    if isinstance(unit, Unknown):
        return f"{text} [{unit}]"
    unit = re.sub(r"\^(-?[123])", lambda m: m.group(1).translate(_SUPERSCRIPTS), unit)
    return f"{text} [{unit}]"


def problem_title(problem) -> str:
    """A readable title: ``problem.title`` if it has one, else the first sentence (or
    clause) of its description, cut at a comma to about 70 characters."""
    title = getattr(problem, "title", None)
    if title:
        return str(title)
    d = " ".join(str(getattr(problem, "description", "") or "").split())
    if not d:
        return str(getattr(problem, "name", ""))
    s = re.split(r"(?<=[.;])\s", d, maxsplit=1)[0].rstrip(".;")
    if len(s) > 72:
        cut = s.rfind(",", 0, 72)
        s = s[:cut] if cut > 20 else textwrap.shorten(s, 72, placeholder=" ...")
    return s


def _num(x) -> str:
    return f"{float(x):.3g}"


def _stabilization(s) -> str:
    if s is None or str(s) in ("None", "none", ""):
        return "no stabilization"
    s = str(s)
    name = s.split("(")[0]
    if name == "Baumgarte":
        ab = dict(re.findall(r"(alpha|beta)=([-+0-9.eE]+)", s))
        return "Baumgarte " + ", ".join(f"{k} {_num(v)}" for k, v in ab.items())
    return name[:1].lower() + name[1:] if name else s


def _settings(tr: Trajectory, t_end: float) -> dict:
    """The settings of a run that a reader needs, as ordered display items."""
    m = tr.meta or {}
    items = {}
    method = m.get("method")
    if method:
        items["method"] = str(method)
    if m.get("dt"):
        items["dt"] = f"dt {_num(m['dt'])} s"
    else:
        rtol, atol = m.get("rtol"), m.get("atol")
        if rtol is not None and atol is not None and float(rtol) == float(atol):
            items["tol"] = f"rtol = atol = {_num(rtol)}"
        else:
            if rtol is not None:
                items["rtol"] = f"rtol {_num(rtol)}"
            if atol is not None:
                items["atol"] = f"atol {_num(atol)}"
    if "stabilization" in m:
        items["stabilization"] = _stabilization(m.get("stabilization"))
    if len(tr) and tr.t[-1] < t_end * (1 - 1e-9):
        items["span"] = f"to t = {_num(tr.t[-1])} s"
    return items


def _describe_runs(trajs: Mapping[str, Trajectory]) -> tuple:
    """(the settings most runs share, {name: legend label with the run's own settings
    where they differ from those})."""
    t_end = max((float(tr.t[-1]) for tr in trajs.values() if len(tr)), default=0.0)
    sets = {n: _settings(tr, t_end) for n, tr in trajs.items()}
    keys = []
    for s in sets.values():
        keys += [k for k in s if k not in keys and k != "span"]
    common = {}
    for k in keys:                              # the most frequent value, first seen on ties
        vals = [s.get(k) for s in sets.values()]
        best = max(dict.fromkeys(vals), key=vals.count)
        if best is not None and vals.count(best) > len(vals) / 2:
            common[k] = best
    labels = {}
    for n, s in sets.items():
        own = [v for k, v in s.items() if common.get(k) != v]
        solver = (trajs[n].meta or {}).get("solver")
        if solver and _key(solver) != _key(n):
            own.insert(0, f"solver {solver}")
        labels[n] = f"{n} ({', '.join(own)})" if own else str(n)
    return ", ".join(common.values()), labels


def _suptitle(fig, problem, trajs: Mapping[str, Trajectory], what: str = "") -> dict:
    common, labels = _describe_runs(trajs)
    head = problem_title(problem) + (f": {what}" if what else "")
    if len(trajs) == 1:
        line2 = f"solver {next(iter(labels.values()))}" + (f"; {common}" if common else "")
    elif len(trajs) == 2:
        line2 = " vs ".join(labels.values()) + (f"; both {common}" if common else "")
    else:
        line2 = ", ".join(trajs) + (f"; {common} unless the legend says otherwise"
                                    if common else "")
    width = int(14 * fig.get_figwidth())
    fig.suptitle("\n".join(textwrap.wrap(head, width) + textwrap.wrap(line2, width)),
                 fontsize="medium")
    return labels


# --------------------------------------------------------------------------- helpers

def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 4), layout="constrained")
        return ax, True
    return ax, False


def _as_dict(trajs: Trajs) -> dict:
    return {"": trajs} if isinstance(trajs, Trajectory) else dict(trajs)


def _positive(x) -> np.ndarray:
    """``x`` with zeros (and negatives, NaN) masked as NaN for a log axis."""
    x = np.asarray(x, dtype=float)
    return np.where(x > 0, x, np.nan)


def _events(ax, tr: Trajectory):
    """Vertical lines at the run's rank events (singular positions), ``gid="rank_event"``
    (behind the data)."""
    for e in tr.rank_events:
        ax.axvline(e.t, **EVENT_STYLE, zorder=0.3, gid="rank_event")


def _event_run(trajs: Mapping[str, Trajectory]) -> Optional[str]:
    """The run whose rank events a figure marks: the one with the most events (the
    first listed on ties); None when no run has any."""
    names = [n for n, tr in trajs.items() if len(tr) and tr.rank_events]
    if not names:
        return None
    return max(names, key=lambda n: len(trajs[n].rank_events))


def _event_label(tr: Trajectory, name: str) -> str:
    """Legend text of the rank-event marks: the rank change and the run."""
    ranks = {(e.rank_before, e.rank_min) for e in tr.rank_events}
    what = ("rank {} \u2192 {}".format(*next(iter(ranks))) if len(ranks) == 1
            else "the rank drops")
    run = f", {name} run" if name else ""
    return f"singular position ({what}{run})"


def _impact_run(trajs: Mapping[str, Trajectory]) -> Optional[str]:
    """The run whose impacts a figure marks: the one with the most (the first listed on
    ties); None when no run has any."""
    names = [n for n, tr in trajs.items() if len(tr) and tr.impacts]
    if not names:
        return None
    return max(names, key=lambda n: len(trajs[n].impacts))


def _impact_times(tr: Trajectory) -> np.ndarray:
    return np.array(sorted({float(im.t) for im in tr.impacts}), dtype=float)


def _impacts(ax, tr: Trajectory):
    """Vertical lines at the run's impacts, ``gid="impact"`` (behind the data)."""
    for t in _impact_times(tr):
        ax.axvline(t, **IMPACT_STYLE, zorder=0.35, gid="impact")


def _impact_label(tr: Trajectory, name: str) -> str:
    """Legend text of the impact marks: how many, the accumulation, the run."""
    n = len(tr.impacts)
    acc = [im for im in tr.impacts if im.accumulation]
    what = f"impact ({n} in all"
    if acc:
        ta = acc[0].t_accumulation
        what += (f"; impacts accumulate, at rest from t = {acc[0].t:.3g} s" if not np.isfinite(ta)
                 else f"; impacts accumulate at t = {ta:.4g} s")
    return what + (f", {name} run" if name else "") + ")"


def _mark_impacts_on(ax, problem, tr: Trajectory, key: str):
    """Triangles on the output ``key`` of run ``tr`` at its impacts: the sample that holds
    the state before each impact (the first at its time), else the state interpolated
    there."""
    te = _impact_times(tr)
    if not te.size:
        return
    t = np.asarray(tr.t, dtype=float)
    y = np.asarray(problem.outputs(tr.q, tr.v)[key], dtype=float)
    ys = []
    for ti in te:
        at = np.flatnonzero(t == ti)
        ys.append(y[at[0]] if at.size else float(np.interp(ti, t, y)))
    ax.plot(te, ys, ls="none", **IMPACT_MARKER, zorder=4, gid="impact")


def moving_output(problem, trajs: Trajs) -> str:
    """The output a summary figure plots: the one that moves most among the outputs in
    the unit of the first (``problem.outputs``' order says which quantity matters, the
    range of the motion which of its kind to show: a ball's height, not its horizontal
    position moving at constant speed, nor a coordinate that does not move at all).

    Outputs in the same unit as the first (all when units are not stated) compete by
    the range (max - min) of their values over the runs; when none of them moves
    (range at most ``1e-9 (1 + max |y|)``), the first unit group that has a moving
    output is taken instead."""
    runs = {n: tr for n, tr in _as_dict(trajs).items() if len(tr)}
    first = next(iter(runs.values()))
    keys = list(problem.outputs(first.q[:1], first.v[:1]))
    units = problem_units(problem)
    ranges, moving = {}, {}
    for k in keys:
        vals = np.concatenate([np.ravel(np.asarray(problem.outputs(tr.q, tr.v)[k], dtype=float))
                               for tr in runs.values()])
        vals = vals[np.isfinite(vals)]
        r = float(np.ptp(vals)) if vals.size else 0.0
        ranges[k] = r
        moving[k] = r > 1e-9 * (1.0 + (float(np.max(np.abs(vals))) if vals.size else 0.0))
    groups: dict = {}
    for k in keys:
        groups.setdefault(str(_unit(units, k)), []).append(k)
    order = [groups[str(_unit(units, keys[0]))]] + [g for u, g in groups.items()
                                                   if u != str(_unit(units, keys[0]))]
    for g in order:
        if any(moving[k] for k in g):
            return max(g, key=lambda k: (ranges[k], -g.index(k)))
    return keys[0]


def _states_at(tr: Trajectory, times) -> tuple:
    """``(q, v)`` of run ``tr`` at ``times`` between its samples: ``q`` by cubic Hermite
    interpolation of the samples of ``q`` and ``v = dq/dt`` (error O(h^4)), ``v``
    linearly; both linearly where the samples do not allow it."""
    times = np.atleast_1d(np.asarray(times, dtype=float))
    t, q, v = np.asarray(tr.t), np.asarray(tr.q), np.asarray(tr.v)
    lin_v = np.array([[np.interp(s, t, v[:, j]) for j in range(v.shape[1])] for s in times])
    keep = np.concatenate([[True], np.diff(t) > 0])          # strictly increasing times
    try:
        from scipy.interpolate import CubicHermiteSpline

        qs = CubicHermiteSpline(t[keep], q[keep], v[keep], axis=0)(times)
    except ValueError:                                       # too few samples, v not q'
        qs = np.array([[np.interp(s, t, q[:, j]) for j in range(q.shape[1])] for s in times])
    return qs, lin_v


def _mark_events_on(ax, problem, tr: Trajectory, key: str):
    """Diamonds on the output ``key`` of run ``tr`` at its rank events (the state
    interpolated between the samples, :func:`_states_at`)."""
    te = np.array([e.t for e in tr.rank_events], dtype=float)
    q, v = _states_at(tr, te)
    y = np.asarray(problem.outputs(q, v)[key], dtype=float)
    ax.plot(te, y, ls="none", **EVENT_MARKER, zorder=4, gid="rank_event")


def _system_of(problem):
    """The :class:`~gaussopt.System` of ``problem`` (also inside a ``QuasiVelocities``),
    or None."""
    from gaussopt.model.system import System

    sysm = getattr(problem, "system", None)
    if sysm is not None and not isinstance(sysm, System):
        sysm = getattr(sysm, "system", None)
    return sysm if isinstance(sysm, System) else None


#: A value of ``M a - F`` at most ``ROUNDING`` times ``max_i (|M| |a| + |F|)_i`` (the
#: size of the terms it is the difference of) is a rounding zero: about 100 eps.
ROUNDING = 100 * float(np.finfo(float).eps)


def force_rounding_level(problem, traj: Trajectory) -> Optional[np.ndarray]:
    """The rounding level of ``max_i |(M a - F)_i|`` at each sample:
    ``ROUNDING * max_i (|M| |a| + |F|)_i`` with ``M`` and ``F`` of the problem's
    system; None without a system to evaluate (or when evaluating it fails)."""
    sysm = _system_of(problem)
    if sysm is None or not len(traj):
        return None
    out = np.empty(len(traj))
    diag = sysm.mass_diagonal                 # a constant diagonal M: no n x n products
    try:
        for k, (t, q, v, a) in enumerate(zip(traj.t, traj.q, traj.v, traj.a)):
            Ma = (np.abs(diag) * np.abs(a) if diag is not None
                  else np.abs(sysm.mass(t, q)) @ np.abs(a))
            out[k] = float(np.max(Ma + np.abs(sysm.force(t, q, v)), initial=0.0))
    except Exception:  # noqa: BLE001 - a model that cannot be evaluated here: no level
        return None
    return ROUNDING * out


def energy_scale(problem, traj: Trajectory) -> tuple:
    """``(E_s, how)``: the energy scale the drift of ``traj`` is measured against.

    ``E_s = max_t T + (max_t V - min_t V)`` with the kinetic energy
    ``T = v^T M(q) v / 2`` of the problem's system and ``V = E - T`` (how =
    ``"max T + range V"``): the energy that the motion moves between its kinetic and
    potential parts, independent of the zero of the potential. Without a system
    to evaluate: ``max_t |E|`` (how = ``"max |E|"``). ``(None, "")`` when the run has
    no energy or the scale is 0 (at rest with ``E = 0``)."""
    E = traj.energy
    if E is None or not len(traj):
        return None, ""
    E = np.asarray(E, dtype=float)
    if not np.any(np.isfinite(E)):
        return None, ""
    sysm = _system_of(problem)
    if sysm is not None:
        try:
            diag = sysm.mass_diagonal
            T = (0.5 * (np.asarray(traj.v) ** 2) @ diag if diag is not None else
                 np.array([0.5 * float(v @ (sysm.mass(t, q) @ v))
                           for t, q, v in zip(traj.t, traj.q, traj.v)]))
            V = E - T
            s = float(np.nanmax(T) + np.nanmax(V) - np.nanmin(V))
            if np.isfinite(s) and s > 0:
                return s, "max T + range V"
        except Exception:  # noqa: BLE001 - fall back to max |E|
            pass
    s = float(np.nanmax(np.abs(E)))
    return (s, "max |E|") if np.isfinite(s) and s > 0 else (None, "")


def _time_label(ax, show: bool = True):
    if show:
        ax.set_xlabel("t [s]")
    else:
        ax.set_xlabel("")
        ax.tick_params(labelbottom=False)


def _handles(names: Sequence[str], labels: Optional[Mapping] = None, reference: bool = False,
             kinds: Sequence[str] = (), events: Optional[str] = None,
             event_marker: bool = False, impacts: Optional[str] = None,
             losses: Sequence[str] = ()) -> list:
    """Legend entries: one per run (its solver's style), the reference, the kinds of
    quantity, the rank events, the impacts and the energy losses drawn."""
    from matplotlib.lines import Line2D

    hs = [Line2D([], [], **{k: v for k, v in _style(n, names).items() if k != "zorder"},
                 label=(labels or {}).get(n, n)) for n in names]
    if reference:
        hs.append(Line2D([], [], **REFERENCE_STYLE, label="reference"))
    for k in kinds:
        hs.append(Line2D([], [], color="0.35", lw=1.4, ls=KIND_STYLES[k], label=f"{k} level"))
    if events:
        hs.append(Line2D([], [], **EVENT_STYLE, **(EVENT_MARKER if event_marker else {}),
                         label=events))
    if impacts:
        hs.append(Line2D([], [], **IMPACT_STYLE, **IMPACT_MARKER, label=impacts))
    for k in losses:
        hs.append(Line2D([], [], **LOSS_STYLES[k], label=LOSS_LABELS[k] + " (L)"))
    return hs


def _pyplot(agg: bool):
    import matplotlib

    if agg:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _output_unit(problem, key: str) -> str:
    return _unit(problem_units(problem), key)


def agreement(problem, trajs: Mapping[str, Trajectory], key: str,
              names: Sequence[str] = EXACT_SOLVERS) -> tuple:
    """``(names, d)``: the runs among ``names`` and the largest difference of output
    ``key`` between any two of them on their common time range (the later runs
    interpolated on the first one's samples: their ``q`` by cubic Hermite
    interpolation, :func:`_states_at`, so that the interpolation's error, O(h^4), does
    not pass for a disagreement; a contact run's outputs linearly); ``d`` is None for
    fewer than two."""
    present = [n for n in trajs if _key(n) in {_key(x) for x in names} and len(trajs[n])]
    if len(present) < 2:
        return present, None
    base = trajs[present[0]]
    t_end = min(float(trajs[n].t[-1]) for n in present)
    sel = base.t <= t_end * (1 + 1e-12)
    ys = []
    for n in present:
        tr = trajs[n]
        y = np.asarray(problem.outputs(tr.q, tr.v)[key], dtype=float)
        if tr.t.shape == base.t.shape and np.array_equal(tr.t, base.t):
            ys.append(y[sel])
        elif tr.impacts:                   # velocities jump: linear between the samples
            ys.append(np.interp(base.t[sel], tr.t, y))
        else:                              # q by cubic Hermite (error O(h^4), _states_at)
            q, v = _states_at(tr, base.t[sel])
            ys.append(np.asarray(problem.outputs(q, v)[key], dtype=float))
    ys = np.array(ys)
    return present, float(np.nanmax(ys.max(axis=0) - ys.min(axis=0)))


# --------------------------------------------------------------------------- plot_*

def plot_coordinates(traj: Trajectory, ax=None, coordinates: Optional[Sequence[str]] = None,
                     show_events: bool = True, units: Optional[Mapping] = None):
    """Coordinates against time; dotted lines mark singular positions (rank events).

    ``units`` maps coordinate names to units (e.g. ``problem.units``)."""
    ax, own = _axes(ax)
    units = dict(units or {})
    names = list(coordinates or traj.coordinates)
    for c in names:
        ax.plot(traj.t, traj[c], label=f"{c} [{_unit(units, c)}]")
    if show_events:
        _events(ax, traj)
    ax.set_xlabel("t [s]")
    ax.set_ylabel(_label("q", _join(_unit(units, c) for c in names)))
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_outputs(problem, trajs: Trajs, key: str, ax=None, reference: bool = True,
                 legend: Optional[bool] = None, labels: Optional[Mapping] = None):
    """An output of ``problem.outputs`` (e.g. ``"y1"``) for several runs, with the reference.

    Each run in its solver's colour; ``legend`` (default: only on a figure of its
    own) draws a legend on ``ax``; ``labels`` maps run names to legend labels."""
    ax, own = _axes(ax)
    t_max = 0.0
    runs = _as_dict(trajs)
    for name, tr in runs.items():
        if not len(tr):
            continue
        _tag(ax.plot(tr.t, problem.outputs(tr.q, tr.v)[key], **_style(name, runs),
                     label=(labels or {}).get(name, name or key)), name or key)
        t_max = max(t_max, float(tr.t[-1]))
    if reference and problem.reference is not None and t_max > 0:
        t = np.linspace(problem.t_span[0], t_max, 2000)
        ref = problem.reference(t)
        if key in ref:
            ax.plot(t, ref[key], **REFERENCE_STYLE, zorder=3, label="reference")
    ax.set_xlabel("t [s]")
    ax.set_ylabel(_label(key, _output_unit(problem, key)))
    if legend or (legend is None and own):
        ax.legend(loc="best", fontsize="small")
    return ax


def plot_output_difference(problem, traj_a: Trajectory, traj_b: Trajectory, key: str, ax=None,
                           labels: Sequence[str] = ("a", "b")):
    """``key(a) - key(b)`` on the common time range (b interpolated on a's samples),
    e.g. paper 001's difference of y1 between the GA and Lagrange-I."""
    ax, _ = _axes(ax)
    t_end = min(traj_a.t[-1], traj_b.t[-1])
    sel = traj_a.t <= t_end
    ya = problem.outputs(traj_a.q[sel], traj_a.v[sel])[key]
    yb = np.interp(traj_a.t[sel], traj_b.t, problem.outputs(traj_b.q, traj_b.v)[key])
    ax.plot(traj_a.t[sel], ya - yb, color="k", lw=1.2)
    ax.axhline(0.0, color="0.7", lw=0.6, zorder=0)
    ax.set_xlabel("t [s]")
    ax.set_ylabel(_label(f"{key}({labels[0]}) - {key}({labels[1]})",
                         _output_unit(problem, key)))
    return ax


def plot_residuals(trajs: Trajs, ax=None, kinds: Sequence[str] = ("position", "velocity"),
                   problem=None, legend: Optional[bool] = None):
    """Constraint residual norms on a log scale (compare with/without stabilization).

    Position level ``||Phi||`` solid, velocity level ``||dPhi/dt||`` (and
    nonholonomic ``||f||``) dashed, each run in its solver's colour; exact zeros
    are left out. Units from ``problem.units`` (``"constraints"``)."""
    ax, own = _axes(ax)
    units = problem_units(problem)
    runs = _as_dict(trajs)
    drawn = False
    for name, tr in runs.items():
        for k in kinds:
            r = tr.residuals[k]
            if r.size and np.any(r > 0):
                drawn = True
                _tag(ax.semilogy(tr.t, _positive(r), ls=KIND_STYLES[k], marker=".", ms=2.5,
                                 label=f"{name} {k}".strip(), **_style(name, runs)), name or k)
    ax.set_yscale("log")
    if not drawn and any(len(tr) for tr in runs.values()):   # say so, not an empty frame
        span = [float(x) for tr in runs.values() if len(tr) for x in (tr.t[0], tr.t[-1])]
        ax.set_xlim(min(span), max(span) if max(span) > min(span) else min(span) + 1.0)
        ax.text(0.5, 0.5, "0 at every sample (exact zeros: nothing to draw on a log axis)",
                transform=ax.transAxes, ha="center", va="center", fontsize="small",
                color="0.25", gid="zero_note")
        ax.tick_params(axis="y", which="both", left=False, labelleft=False)
    ax.set_xlabel("t [s]")
    level = _levels(problem) if problem is not None else "holonomic"
    vsym = {"nonholonomic": r"$\|f\|$", "mixed": r"$\|(\dot\Phi, f)\|$"}.get(
        level, r"$\|\dot\Phi\|$")
    parts = {"position": (r"$\|\Phi\|$", "position_residual"),
             "velocity": (vsym, "velocity_residual"),
             "acceleration": (r"$\|A a - b\|$", None)}
    texts = []
    for k in kinds:
        sym, q = parts[k]
        unit = (_per_second(_derived_unit(units, "velocity_residual", level=level))
                if q is None else _derived_unit(units, q, level=level))
        texts.append(_label(sym, unit))
    ax.set_ylabel(", ".join(texts) if len(texts) > 1 else f"{kinds[0]} residual {texts[0]}")
    if legend or (legend is None and own):
        ax.legend(loc="best", fontsize="small")
    return ax


_SCALE_TEXT = {"max T + range V": r"max $T$ + range $V$", "max |E|": r"max $|E|$"}
#: The losses of an energy balance: black, impacts dashed, friction dotted.
LOSS_STYLES = {"impact_loss": {"color": "k", "ls": "--", "lw": 1.2},
               "friction_loss": {"color": "k", "ls": ":", "lw": 1.5}}
LOSS_LABELS = {"impact_loss": "energy lost at impacts",
               "friction_loss": "energy dissipated by friction"}


def _balances(problem, runs: Mapping[str, Trajectory]) -> dict:
    """The energy balance of every run with an energy that lost some at impacts or by
    friction (:func:`~gaussopt.study.energy_balance.energy_balance`), by run name."""
    sysm = _system_of(problem) if problem is not None else None
    out = {}
    for name, tr in runs.items():
        if tr.energy is None or not len(tr) or not (
                tr.impacts or (tr.friction_forces is not None
                               and np.any(np.asarray(tr.friction_forces) != 0))):
            continue
        bal = energy_balance(tr, sysm)
        if bal is not None and bal.has_losses:
            out[name] = bal
    return out


def plot_energy(trajs: Trajs, ax=None, relative: bool = False, unit: Optional[str] = None,
                legend: Optional[bool] = None, problem=None, scale: Optional[float] = None):
    """Energy drift ``|E(t) - E(0)|`` on a log scale (exact zeros left out).

    A run that lost energy at impacts or by sliding friction (a contact run) shows its
    energy balance (:func:`~gaussopt.study.energy_balance.energy_balance`): the drift
    ``|E(t) - E(0) + L(t)|`` (``L`` the energy lost at the impacts and dissipated by
    friction up to ``t``: zero for the exact motion) in the solver's colour, and the
    losses themselves as black lines (:data:`LOSS_STYLES`, ``gid`` ``"impact_loss"``,
    ``"friction_loss"``) of the first such run, on the same axis.

    ``relative``: everything divided by an energy scale ``E_s``, stated on the axis
    label: ``scale`` when given, else :func:`energy_scale` of ``problem`` and the
    first run with an energy (``max T + range V``: the energy the motion exchanges
    between its kinetic and potential parts). ``unit`` of the energy: default
    the problem's ``units["energy"]``, else ``"J"`` (gaussopt's problems are in SI
    units)."""
    ax, own = _axes(ax)
    runs = _as_dict(trajs)
    stated = problem_units(problem).get("energy")
    unit = unit or (stated if isinstance(stated, str) else None) or "J"
    how = "given"
    if relative and scale is None:
        first = next((tr for tr in runs.values() if tr.energy is not None and len(tr)), None)
        scale, how = energy_scale(problem, first) if first is not None else (None, "")
    relative = relative and scale is not None
    div = scale if relative else 1.0
    balances = _balances(problem, runs)
    for name, tr in runs.items():
        if tr.energy is None or not len(tr):
            continue
        bal = balances.get(name)
        d = np.abs(bal.drift if bal is not None else tr.energy - tr.energy[0]) / div
        _tag(ax.semilogy(tr.t, _positive(d), label=name or "energy", **_style(name, runs)),
             name or "energy")
    if balances:                        # the losses of the first run that had them
        name, bal = next(iter(balances.items()))
        for key in ("impact_loss", "friction_loss"):
            y = getattr(bal, key)
            if np.any(y != 0):
                ln, = ax.semilogy(bal.t, _positive(y / div), **LOSS_STYLES[key], zorder=2.0,
                                  label=LOSS_LABELS[key])
                ln.set_gid(key)
    ax.set_yscale("log")
    ax.set_xlabel("t [s]")
    if relative:
        how = f"{_SCALE_TEXT.get(how, how)} = " if how != "given" else ""
        text = (r"$|E - E(0) + L|\,/\,E_s$, $L\,/\,E_s$ [1]" if balances
                else r"$|E - E(0)|\,/\,E_s$ [1]")
        ax.set_ylabel(text + f"\n$E_s$ = {how}{scale:.3g} {unit}")
    else:
        ax.set_ylabel(_label(r"$|E - E(0) + L|$, $L$" if balances else r"$|E - E(0)|$", unit))
    if legend or (legend is None and own):
        ax.legend(loc="best", fontsize="small")
    return ax


def _loss_kinds(ax) -> list:
    """The loss lines drawn on ``ax`` (:func:`plot_energy`), as legend entries."""
    return [ln.get_gid() for ln in ax.lines if ln.get_gid() in LOSS_STYLES]


def _row_max(x) -> np.ndarray:
    """``max_k |x_k|`` of each row, NaN for a row of NaN (no warning)."""
    x = np.abs(np.asarray(x, dtype=float))
    out = np.full(x.shape[0], np.nan)
    ok = ~np.all(np.isnan(x), axis=1)
    out[ok] = np.nanmax(x[ok], axis=1)
    return out


def rounding_zeros(problem, traj: Trajectory, force_max: Optional[np.ndarray] = None
                   ) -> np.ndarray:
    """Samples of ``traj`` where ``max_i |(M a - F)_i|`` is a rounding zero: at most
    :func:`force_rounding_level` (without a system to evaluate: :data:`ROUNDING` times
    the run's largest value). There the constraints carry no load and the multipliers
    are rounding noise too; figures leave both out (a log axis would draw them as a
    line near 1e-17)."""
    f = _row_max(traj.constraint_force) if force_max is None else np.asarray(force_max)
    level = force_rounding_level(problem, traj)
    if level is None:
        level = ROUNDING * (float(np.nanmax(f)) if np.any(np.isfinite(f)) else 0.0)
    with np.errstate(invalid="ignore"):
        return np.asarray(f <= level)


def _value_scale(ax, decades: float = 1.0) -> str:
    """Put ``ax`` on a log y axis when the finite values of its solver lines are all
    positive and span more than ``decades`` decades, else on a linear one; on the log
    axis the lines' nonpositive values are NaN (left out). Returns the scale."""
    lines = [ln for ln in ax.lines if (ln.get_gid() or "").startswith("solver:")]
    ys = np.concatenate([np.asarray(ln.get_ydata(), dtype=float) for ln in lines]) \
        if lines else np.array([])
    ys = ys[np.isfinite(ys)]
    log = bool(ys.size and ys.min() > 0 and ys.max() > 10.0 ** decades * ys.min())
    if log:
        for ln in lines:
            ln.set_ydata(_positive(ln.get_ydata()))
    ax.set_yscale("log" if log else "linear")
    return "log" if log else "linear"


def plot_multipliers(trajs: Trajs, ax=None, problem=None, legend: Optional[bool] = None):
    """``max_k |lam_k|`` and ``max_i |(M a - F)_i|`` per sample, on two axes:
    multipliers blow up at singular positions, forces do not. Samples where the
    constraint force is a rounding zero (:func:`rounding_zeros`) are left out of both
    panels, and a note on the upper panel says how many. Each axis is logarithmic
    where the values it draws span more than a decade (:func:`_value_scale`), else
    linear (a contact's normal force of a body at rest, nearly constant, is then
    not drawn as a flat line on a log axis of one decade).

    ``ax``: a pair of Axes (multipliers, forces); a single Axes (the forces go on
    its twin y axis, dashed); or None (a new figure with two panels). Returns the
    pair. Units from ``problem.units``: a multiplier of a row in unit ``u`` is in
    ``energy/u``, ``(M a - F)_i`` in ``energy/(unit of q_i)``; the maximum over
    rows of different units is labelled with all of them."""
    if ax is None:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True, layout="constrained")
        own = True
    else:
        own = False
    if isinstance(ax, (tuple, list, np.ndarray)):
        a_lam, a_f = ax[0], ax[1]
        force_style = "-"
    else:
        a_lam, a_f = ax, ax.twinx()
        force_style = "--"
    units = problem_units(problem)
    coords = ()
    runs = _as_dict(trajs)
    masked, drawn, span = [], 0, []
    for name, tr in runs.items():
        coords = coords or tuple(tr.coordinates)
        if not (tr.multipliers.size and len(tr)):
            continue
        span += [float(tr.t[0]), float(tr.t[-1])]
        lam = _row_max(tr.multipliers)
        f = _row_max(tr.constraint_force)
        zero = rounding_zeros(problem, tr, f)
        if zero.any():
            masked.append(f"{name or 'the run'} {int(zero.sum())} of {len(tr)}")
            lam, f = np.where(zero, np.nan, lam), np.where(zero, np.nan, f)
        drawn += int((~zero).sum())
        _tag(a_lam.plot(tr.t, lam, label=name or "max|lam|", **_style(name, runs)),
             name or "lam")
        _tag(a_f.plot(tr.t, f, ls=force_style, label=name or "max|M a - F|",
                      **_style(name, runs)), name or "lam")
    rule = r"$|Ma-F| \leq 100\,\varepsilon\,(|M||a|+|F|)$"
    note = {"transform": a_lam.transAxes, "fontsize": "small", "color": "0.25",
            "gid": "rounding_note"}
    if masked:                             # the whole time span, drawn or not
        for a in (a_lam, a_f):
            a.set_xlim(min(span), max(span) if max(span) > min(span) else min(span) + 1.0)
    if masked and drawn:
        a_lam.text(0.01, 0.97, f"not drawn (both panels): rounding zeros, {rule}\n"
                   f"samples: {'; '.join(masked)}", va="top", ha="left", **note,
                   bbox={"facecolor": "white", "edgecolor": "0.7", "alpha": 0.85})
    elif masked:                           # nothing to draw: say why, over the time span
        a_lam.text(0.5, 0.5, "the constraints carry no load: M a - F is a rounding zero "
                   f"at every sample,\n{rule}; its multipliers are rounding noise, not "
                   "drawn in either panel", va="center", ha="center", **note)
        for a in (a_lam, a_f):
            a.tick_params(axis="y", which="both", left=False, labelleft=False)
    level = _levels(problem) if problem is not None else "holonomic"
    a_lam.set_ylabel(_label(r"$\max_k |\lambda_k|$",
                            _derived_unit(units, "multipliers", level=level)))
    a_f.set_ylabel(_label(r"$\max_i |(M a - F)_i|$" + (" (dashed)" if force_style == "--" else ""),
                          _derived_unit(units, "constraint_force", coords)))
    for a in (a_lam, a_f):
        _value_scale(a)
    if force_style == "-":                     # two panels, the forces below
        a_f.set_xlabel("t [s]")
        _time_label(a_lam, not a_lam.get_shared_x_axes().joined(a_lam, a_f))
    else:
        a_lam.set_xlabel("t [s]")
    if legend or (legend is None and own):
        a_lam.figure.legend(handles=_handles(list(_as_dict(trajs))), loc="outside lower center",
                            ncol=4, fontsize="small")
    return a_lam, a_f


def draw_frame(problem, q: np.ndarray, ax=None, title: Optional[str] = None):
    """Draw the mechanism at ``q`` with the problem's ``draw`` function."""
    ax, _ = _axes(ax)
    if problem.draw is None:
        raise ValueError(f"problem {problem.name!r} has no `draw` function.")
    problem.draw(ax, np.asarray(q, dtype=float))
    if title:
        ax.set_title(title)
    return ax


# --------------------------------------------------------------------------- drawings

#: Colours of a body frame's axes (x, y, z) in :func:`draw_model`.
FRAME_COLORS = ("#d62728", "#2ca02c", "#1f77b4")
BODY_STYLE = {"color": "#4d4d4d", "lw": 2.4, "solid_capstyle": "round"}
JOINT_MARKER = {"marker": "o", "ms": 5.0, "mfc": "white", "mec": "k", "mew": 1.0}
GROUND_MARKER = {"marker": "s", "ms": 6.0, "mfc": "k", "mec": "k"}


def _model_kind(model) -> Optional[str]:
    """``"2d"`` for a planar multibody Model, ``"3d"`` for a spatial one, else None."""
    from gaussopt.multibody.planar.mechanism import Model as Planar
    from gaussopt.multibody.spatial.mechanism import Model as Spatial

    return "2d" if isinstance(model, Planar) else "3d" if isinstance(model, Spatial) else None


def _drawing(problem) -> Optional[str]:
    """How ``problem``'s configurations are drawn: ``"3d"`` (a spatial multibody model,
    :func:`draw_model`), ``"2d"`` (its ``draw``, else a planar model), or None."""
    kind = _model_kind(getattr(problem, "model", None))
    if kind == "3d":
        return "3d"
    if getattr(problem, "draw", None) is not None or kind == "2d":
        return "2d"
    return None


def _body_name(ref) -> Optional[str]:
    """A joint's body reference as a body name; None for the ground."""
    if ref is None:
        return None
    name = ref if isinstance(ref, str) else getattr(ref, "name", None)
    return None if name in (None, "ground") else name


def _joint_points(model) -> list:
    """Every joint of ``model`` as ``((body_i, s_i), (body_j, s_j))``: the joint's point on
    each body in that body's frame (a ground end: the world point, body None); joints
    without a point (a driven angle) are left out."""
    kind = _model_kind(model)
    out = []
    for jt in model.joints:
        if kind == "2d":
            if hasattr(jt, "point_i") and hasattr(jt, "point_j"):
                ends = ((jt.body_i, jt.point_i), (jt.body_j, jt.point_j))
            elif hasattr(jt, "line_point"):            # a body point on a ground line
                ends = ((None, None), (jt.body, jt.point))
            else:
                continue
            pair = []
            for ref, s in ends:
                b = _body_name(ref)
                pair.append((b, None if s is None else np.asarray(s, dtype=float)))
            if pair[0][1] is None:                   # the ground line: where the point is
                pair[0] = (None, None)
            out.append(tuple(pair))
        else:
            Pi = getattr(jt, "point_i", None)
            Pj = getattr(jt, "point_j", None)
            P = getattr(jt, "point", None)
            Pi, Pj = (P if Pi is None else Pi), (P if Pj is None else Pj)
            if Pi is None or Pj is None:              # a driven angle, a weld at a centroid
                continue
            pair = []
            for ref, Pw in ((jt.body_i, Pi), (jt.body_j, Pj)):
                b = _body_name(ref)
                Pw = np.asarray(Pw, dtype=float)
                pair.append((b, Pw if b is None else model.world_point(b, Pw)))
            out.append(tuple(pair))
    return out


def _model_geometry(model, q: np.ndarray) -> dict:
    """World geometry of ``model`` at ``q``: ``centroids`` {body: point}, ``frames``
    {body: rotation (columns the body axes)}, ``links`` [(body, point)] (a body's
    joint points), ``ground`` [points], ``pairs`` [(P_i, P_j)] (joint ends that do not
    coincide: a distance joint, a point on a line)."""
    q = np.asarray(q, dtype=float)
    kind = _model_kind(model)
    cents, frames = {}, {}
    for b in model.body_names:
        sl = model.body_slice(b)
        if kind == "2d":
            x, y, phi = q[sl]
            cents[b] = np.array([x, y])
            frames[b] = np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])
        else:
            cents[b] = q[sl][:3].copy()
            frames[b] = model.rotation(b, q)
    links, ground, pairs = [], [], []
    for (bi, si), (bj, sj) in _joint_points(model):
        ends = []
        for b, s in ((bi, si), (bj, sj)):
            if s is None:
                ends.append(None)
                continue
            P = s if b is None else (np.asarray(model.point(b, s, q), dtype=float))
            ends.append(P)
            if b is None:
                ground.append(P)
            else:
                links.append((b, P))
        if ends[0] is not None and ends[1] is not None and \
                np.linalg.norm(ends[0] - ends[1]) > 1e-9 * (1 + np.linalg.norm(ends[0])):
            pairs.append((ends[0], ends[1]))
    return {"centroids": cents, "frames": frames, "links": links, "ground": ground,
            "pairs": pairs}


def _model_extent(model, qs) -> tuple:
    """``(lo, hi)``: the box around every centroid and joint point of ``model`` at the
    configurations ``qs``, shape (2,) or (3,) each."""
    pts = []
    for q in np.atleast_2d(np.asarray(qs, dtype=float)):
        g = _model_geometry(model, q)
        pts += list(g["centroids"].values()) + [P for _, P in g["links"]] + g["ground"]
    pts = np.array(pts, dtype=float)
    return pts.min(axis=0), pts.max(axis=0)


def _equal_limits(ax, lo, hi, margin: float = 0.08):
    """Equal scales on every axis of ``ax`` around the box ``[lo, hi]``: a cube in 3-D
    (limits of one length and ``set_box_aspect((1, 1, 1))``), ``aspect = "equal"`` in 2-D."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    half = 0.5 * float(np.max(hi - lo)) * (1 + 2 * margin)
    half = half if half > 0 else 1.0
    mid = 0.5 * (lo + hi)
    setters = (ax.set_xlim, ax.set_ylim, getattr(ax, "set_zlim", None))
    for k in range(lo.size):
        setters[k](mid[k] - half, mid[k] + half)
    if lo.size == 3:
        ax.set_box_aspect((1, 1, 1), zoom=0.82)      # (room for the z label)
    else:
        ax.set_aspect("equal", adjustable="box")


def draw_model(model, q, ax=None, *, title: Optional[str] = None, limits=None,
               length_unit: str = "m"):
    """Draw a multibody model's bodies, joints and body frames at the configuration ``q``.

    Each body is a grey line from its centroid to each of its joint points, with its
    body frame at the centroid (x red, y green, z blue); joint points are white
    circles, joints to the ground black squares, and joints whose two points do not
    coincide (a :class:`~gaussopt.multibody.spatial.Distance`) a dashed line. A
    planar model is drawn in 2-D, a spatial one in 3-D (mplot3d), both with equal
    scales on every axis.

    Parameters
    ----------
    model : gaussopt.multibody.Model or gaussopt.multibody.spatial.Model
    q : array_like, shape (n,)
        The configuration (``model.coordinates``).
    ax : matplotlib Axes, optional
        Where to draw (a 3-D Axes for a spatial model); default a new figure.
    title : str, optional
    limits : (array_like, array_like), optional
        ``(lo, hi)`` of the box to show (default: the drawing's own), e.g. the
        extent of a whole run so that frames share one scale.
    length_unit : str
        The unit of the axis labels.

    Returns
    -------
    Axes

    Examples
    --------
    A spatial pendulum (a rod hanging from a ball joint):

    >>> import numpy as np
    >>> from gaussopt.multibody import spatial as sp
    >>> rod = sp.Body.uniform_rod("rod", 1.0, (0, 0, 0), (0, 0, -1))
    >>> model = sp.Model([rod], [sp.Spherical(None, rod, point=(0, 0, 0))],
    ...                  gravity=(0, 0, -9.81))
    >>> ax = draw_model(model, model.q_reference)
    >>> ax.name, ax.get_zlabel()
    ('3d', 'z [m]')
    """
    kind = _model_kind(model)
    if kind is None:
        raise ModelError(f"`model` must be a gaussopt.multibody Model (planar) or a "
                         f"gaussopt.multibody.spatial Model, found {type(model).__name__}.")
    q = np.asarray(q, dtype=float)
    if q.shape != (len(model.coordinates),):
        raise ModelError(f"`q` must have shape ({len(model.coordinates)},) (the model's "
                         f"coordinates), found {q.shape}.")
    if ax is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(5.5, 5.5), layout="constrained")
        ax = fig.add_subplot(projection="3d" if kind == "3d" else None)
    three = kind == "3d"
    if three and getattr(ax, "name", "") != "3d":
        raise ModelError("`ax` must be a 3-D Axes (projection='3d') to draw a spatial model, "
                         f"found a {getattr(ax, 'name', type(ax).__name__)!r} Axes.")
    g = _model_geometry(model, q)
    lo, hi = (_model_extent(model, q) if limits is None else
              (np.asarray(limits[0], dtype=float), np.asarray(limits[1], dtype=float)))
    size = float(np.max(hi - lo)) or 1.0

    def line(P, **kw):
        P = np.asarray(P, dtype=float)
        return ax.plot(*[P[:, k] for k in range(P.shape[1])], **kw)

    for b, P in g["links"]:
        line([g["centroids"][b], P], **BODY_STYLE, zorder=2)
    for Pi, Pj in g["pairs"]:
        line([Pi, Pj], color="0.35", lw=1.2, ls="--", zorder=2)
    # the frames' arms: a third of a typical body (centroid to joint), at most 12 % of the view
    reach = [float(np.linalg.norm(P - g["centroids"][b])) for b, P in g["links"]]
    reach = [x for x in reach if x > 0]
    arm = min(0.35 * float(np.median(reach)), 0.12 * size) if reach else 0.12 * size
    for b, c in g["centroids"].items():
        R = g["frames"][b]
        for k in range(R.shape[1]):
            line([c, c + arm * R[:, k]], color=FRAME_COLORS[k], lw=1.3, zorder=3)
        line([c], marker="o", ms=3.5, color="k", ls="none", zorder=4)
    if g["links"]:
        line([P for _, P in g["links"]], ls="none", **JOINT_MARKER, zorder=5)
    if g["ground"]:
        line(g["ground"], ls="none", **GROUND_MARKER, zorder=5)
    _equal_limits(ax, lo, hi)
    ax.set_xlabel(_label("x", length_unit))
    ax.set_ylabel(_label("y", length_unit))
    if three:
        ax.set_zlabel(_label("z", length_unit))
    if title:
        ax.set_title(title)
    return ax


def draw_configuration(problem, q, ax=None, *, title: Optional[str] = None, limits=None):
    """Draw ``problem`` at the configuration ``q``: a spatial multibody model
    (``problem.model``) in 3-D by :func:`draw_model`, else the problem's own ``draw``,
    else a planar model by :func:`draw_model`; the axes labelled in the problem's
    length unit."""
    units = problem_units(problem)
    lu = units.get("length") if isinstance(units.get("length"), str) else "m"
    model = getattr(problem, "model", None)
    kind = _drawing(problem)
    if kind is None:
        raise ModelError(f"`problem` must have a `draw` function or a multibody `model` to be "
                         f"drawn, found neither in {problem.name!r}.")
    if kind == "3d" or getattr(problem, "draw", None) is None:
        return draw_model(model, q, ax=ax, title=title, limits=limits, length_unit=lu)
    ax = draw_frame(problem, q, ax=ax, title=title)
    ax.set_xlabel(_label("x", lu))
    ax.set_ylabel(_label("y", lu))
    return ax


# --------------------------------------------------------------------------- animation

_MOVIE_SUFFIXES = (".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm")


def _writer(path: Path, fps: int):
    """Pillow's GIF writer for ``.gif`` (no ffmpeg needed); ffmpeg's for a movie format
    when it is installed."""
    from matplotlib.animation import FFMpegWriter, PillowWriter

    suffix = path.suffix.lower()
    if suffix in ("", ".gif"):
        return PillowWriter(fps=fps)
    if suffix in _MOVIE_SUFFIXES:
        if not FFMpegWriter.isAvailable():
            raise ModelError(f"`path` {str(path)!r}: writing a {suffix} movie needs ffmpeg, which "
                             "is not installed; give a .gif path (written by Pillow).")
        return FFMpegWriter(fps=fps)
    raise ModelError(f"`path` must end in .gif (or a movie format with ffmpeg: "
                     f"{', '.join(_MOVIE_SUFFIXES)}), found {str(path)!r}.")


def animate(subject, traj=None, path=None, frames: int = 120, fps: int = 24, *,
            model=None, dpi: int = 100):
    """Write an animation of a mechanism along a run: a GIF by Pillow (no ffmpeg needed).

    Three ways to call it:

    - ``animate(problem, traj, path)``: a :class:`~gaussopt.Problem`, drawn as
      :func:`draw_configuration` draws it (its spatial multibody model in 3-D, else
      its ``draw``, else its planar model);
    - ``animate(model, traj, path)``: a multibody model, planar
      (:class:`gaussopt.multibody.Model`, 2-D) or spatial
      (:class:`gaussopt.multibody.spatial.Model`, 3-D), drawn by :func:`draw_model`;
    - ``animate(traj, path, model=model)``: the same, the trajectory first
      (``frames`` and ``fps`` then by keyword).

    Parameters
    ----------
    subject : Problem, Model or Trajectory
        What draws the mechanism, or the run (then ``model=`` draws it).
    traj : Trajectory
        The run (a run of ``model.system``: the same coordinates), any solver,
        smooth or with contacts; or, in the trajectory-first call, the path.
    path : str or path-like
        ``.gif`` (Pillow; no suffix: ``.gif`` is appended), or ``.mp4``, ``.mov``,
        ... when ffmpeg is installed.
    frames : int, default 120
        At most this many frames: the samples nearest to evenly spaced times (the
        run's own states, never interpolated: a contact run's velocities jump).
    fps : int, default 24
        Frames per second.
    model : Model or Problem, optional
        What draws the mechanism in the trajectory-first call.
    dpi : int, default 100

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ModelError
        Nothing to draw with, a trajectory whose coordinates are not the model's, a
        movie format without ffmpeg, an unknown suffix.

    Examples
    --------
    A planar pendulum (a rod pinned at its end), 0.3 s, in 3 frames:

    >>> import tempfile, pathlib, numpy as np, gaussopt as go
    >>> from gaussopt import multibody as mb
    >>> rod = mb.Body.uniform_rod("rod", mass=1.0, length=1.0)
    >>> model = mb.Model([rod], [mb.Revolute(None, (0.0, 0.0), rod, (-0.5, 0.0))],
    ...                  gravity=(0.0, -9.81))
    >>> q0, v0 = model.initial_state({"rod.phi": 0.0}, {"rod.phi": 0.0})
    >>> traj = go.simulate(model.system, (0.0, 0.3), q0, v0)
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "pendulum.gif"
    >>> animate(model, traj, out, frames=3).name
    'pendulum.gif'
    >>> animate(traj, out, model=model, frames=3).stat().st_size > 0
    True
    """
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    if isinstance(subject, Trajectory):            # animate(traj, path, model=...)
        if path is not None:
            raise ModelError("`path`: in animate(traj, path, model=...) give frames and fps by "
                             f"keyword, found a third positional argument {path!r}.")
        subject, traj, path = model, subject, traj
        if subject is None:
            raise ModelError("`model` is needed to draw a trajectory: pass the multibody model "
                             "(or the Problem) whose system ran it, animate(traj, path, "
                             "model=model).")
    if not isinstance(traj, Trajectory):
        raise ModelError(f"`traj` must be a gaussopt Trajectory, found {type(traj).__name__}.")
    if path is None:
        raise ModelError("`path` is required: the .gif file to write.")
    if not len(traj):
        raise ModelError("`traj` has no samples to animate.")
    path = Path(path)
    if path.suffix == "":
        path = path.with_suffix(".gif")
    writer = _writer(path, fps)
    kind = _model_kind(subject)
    if kind is not None:
        coords = tuple(subject.coordinates)
        draw_q = (lambda q, ax, title, lim: draw_model(subject, q, ax=ax, title=title,
                                                       limits=lim))
    elif _drawing(subject) is not None:
        kind = _drawing(subject)
        coords = tuple(subject.system.coordinates)
        draw_q = (lambda q, ax, title, lim: draw_configuration(subject, q, ax=ax, title=title,
                                                               limits=lim))
    else:
        raise ModelError(f"`{'model' if model is not None else 'subject'}` must be a "
                         "gaussopt.multibody Model (planar or spatial) or a Problem with a "
                         f"`draw` function or a multibody model, found {type(subject).__name__}.")
    if tuple(traj.coordinates) != coords:
        raise ModelError(f"`traj` must be a run of the model's system (coordinates "
                         f"{coords[:4]}{' ...' if len(coords) > 4 else ''}), found coordinates "
                         f"{tuple(traj.coordinates)[:4]}{' ...' if len(traj.coordinates) > 4 else ''}.")
    t = np.asarray(traj.t, dtype=float)
    want = np.linspace(t[0], t[-1], max(1, min(int(frames), len(traj))))
    idx = np.unique(np.clip(np.searchsorted(t, want), 0, len(traj) - 1))
    qs = np.asarray(traj.q, dtype=float)[idx]
    fig = plt.figure(figsize=(5, 5))       # fixed margins: a layout engine per frame is slow
    fig.subplots_adjust(left=0.16, right=0.96, bottom=0.11, top=0.92)
    ax = fig.add_subplot(projection="3d" if kind == "3d" else None)
    # the model draw_model draws (None: the problem's own draw function)
    multibody = (subject if _model_kind(subject) is not None else subject.model
                 if kind == "3d" or getattr(subject, "draw", None) is None else None)
    if multibody is not None:
        lim = _model_extent(multibody, qs)
    else:                                           # the problem's own drawing: its extent
        boxes = []
        for q in qs:
            ax.clear()
            draw_q(q, ax, None, None)
            boxes.append(ax.dataLim.frozen())
        lim = (np.array([min(b.x0 for b in boxes), min(b.y0 for b in boxes)]),
               np.array([max(b.x1 for b in boxes), max(b.y1 for b in boxes)]))

    def frame(i):
        ax.clear()
        draw_q(qs[i], ax, f"t = {t[idx[i]]:.3f} s", lim)
        if multibody is None:                       # one scale for every frame
            _equal_limits(ax, *lim)
        return ()

    anim = FuncAnimation(fig, frame, frames=len(idx), blit=False)
    try:
        anim.save(str(path), writer=writer, dpi=dpi)
    finally:
        plt.close(fig)
    return path


# --------------------------------------------------------------------------- figures

def _common_limits(axs, margin: float = 0.06):
    """The same x and y limits on every drawing panel (the union of their data)."""
    boxes = [a.dataLim for a in axs]
    x0, x1 = min(b.x0 for b in boxes), max(b.x1 for b in boxes)
    y0, y1 = min(b.y0 for b in boxes), max(b.y1 for b in boxes)
    pad = margin * max(x1 - x0, y1 - y0, 1e-12)
    for a in axs:
        a.set_xlim(x0 - pad, x1 + pad)
        a.set_ylim(y0 - pad, y1 + pad)
        a.set_aspect("equal", adjustable="box")


def summary_figure(problem, trajs: Trajs, key: Optional[str] = None, path=None, *,
                   agree: Sequence[str] = EXACT_SOLVERS, dpi: int = 150):
    """Output vs the reference, its error, the position and velocity residuals and the
    energy drift relative to the energy scale (:func:`energy_scale`, stated on the
    axis), against time, one colour per solver; one legend (its own panel)
    with each run's settings where they differ from the others', and the largest
    mutual difference of the runs in ``agree`` (those that coincide to rounding).
    The rank events (singular positions) of the run with the most of them are
    grey vertical lines on every time axis and diamonds on the output.

    ``key``: the output to plot, by default :func:`moving_output` (the one that
    moves most among those in the unit of the problem's first output). A contact
    run's impacts (of the run with the most) are red dashed vertical lines on every
    time axis and triangles on the output; its errors against the reference leave
    out the instants of the impacts (the run holds the state before and after at
    the same time, the reference one of them), and its energy panel shows the
    energy balance (:func:`plot_energy`). Without a reference, the configuration
    at the end is drawn (:func:`draw_configuration`; a spatial multibody model in
    3-D).

    Returns the Figure (closed after saving when ``path`` is given)."""
    plt = _pyplot(path is not None)
    trajs = {n: tr for n, tr in _as_dict(trajs).items()}
    nonempty = {n: tr for n, tr in trajs.items() if len(tr)} or trajs
    first = next(iter(nonempty.values()))
    units = problem_units(problem)
    key = key or moving_output(problem, nonempty)
    kunit = _unit(units, key)
    refs = {}
    if problem.reference is not None:
        for n, tr in nonempty.items():
            r = problem.reference(tr.t).get(key)
            if r is not None:
                refs[n] = np.asarray(r, dtype=float)
    panels = ["output"]
    if refs:
        panels.append("error")
    elif _drawing(problem) is not None:
        panels.append("frame")
    level = _levels(problem)
    if level in ("holonomic", "mixed") or any(
            np.any(tr.position_residual > 0) for tr in nonempty.values()):
        panels.append("position")
    if level != "acceleration" or any(
            np.any(tr.velocity_residual > 0) for tr in nonempty.values()):
        panels.append("velocity")
    if any(tr.energy is not None for tr in nonempty.values()):
        panels.append("energy")
    # the legend in the free cell of an odd number of panels, else below the panels
    cells = panels + ["legend"] * (len(panels) % 2)
    mosaic = [cells[i:i + 2] for i in range(0, len(cells), 2)]
    three_d = "frame" in panels and _drawing(problem) == "3d"
    fig, axd = plt.subplot_mosaic(mosaic, figsize=(11, 2.6 * len(mosaic) + 1.0 + 0.8 * (
        "legend" not in cells)), layout="constrained",
        per_subplot_kw={"frame": {"projection": "3d"}} if three_d else None)
    timed = [p for p in panels if p != "frame"]
    for p in timed[1:]:
        axd[p].sharex(axd[timed[0]])
    labels = _suptitle(fig, problem, nonempty)

    plot_outputs(problem, nonempty, key, ax=axd["output"], legend=False)
    if "error" in axd:
        ax = axd["error"]
        for n, r in refs.items():
            tr = nonempty[n]
            err = np.abs(problem.outputs(tr.q, tr.v)[key] - r)
            if tr.impacts:                 # the instants of the impacts: before or after?
                err = np.where(np.isin(tr.t, _impact_times(tr)), np.nan, err)
            _tag(ax.semilogy(tr.t, _positive(err), label=n, **_style(n, nonempty)), n)
        ax.set_yscale("log")
        ax.set_ylabel(_label(f"|{key} - {key} reference|", kunit))
    if "frame" in axd:
        draw_configuration(problem, first.q[-1], ax=axd["frame"],
                           title=f"final configuration (t = {first.t[-1]:.3g} s)")
    if "position" in axd:
        plot_residuals(nonempty, ax=axd["position"], kinds=("position",), problem=problem,
                       legend=False)
    if "velocity" in axd:
        plot_residuals(nonempty, ax=axd["velocity"], kinds=("velocity",), problem=problem,
                       legend=False)
    if "energy" in axd:
        plot_energy(nonempty, ax=axd["energy"], relative=True, unit=_unit(units, "energy"),
                    legend=False, problem=problem)
    ev = _event_run(nonempty)
    if ev is not None:                     # singular positions on every time axis
        for p in timed:
            _events(axd[p], nonempty[ev])
        _mark_events_on(axd["output"], problem, nonempty[ev], key)
    im = _impact_run(nonempty)
    if im is not None:                     # impacts on every time axis
        for p in timed:
            _impacts(axd[p], nonempty[im])
        _mark_impacts_on(axd["output"], problem, nonempty[im], key)
    # time label only on the lowest time axis of each column
    cols = {}
    for r, row in enumerate(mosaic):
        for c, p in enumerate(row):
            if p in timed:
                cols.setdefault(c, []).append((r, p))
    for entries in cols.values():
        bottom = max(entries)[1]
        for _, p in entries:
            _time_label(axd[p], p == bottom)

    has_ref = any(ln.get_label() == "reference" for ln in axd["output"].lines)
    kinds = tuple(k for k in ("position", "velocity") if k in axd)
    handles = _handles(list(nonempty), labels, reference=has_ref, kinds=kinds,
                       events=None if ev is None else _event_label(
                           nonempty[ev], ev if len(nonempty) > 1 else ""),
                       event_marker=True,
                       impacts=None if im is None else _impact_label(
                           nonempty[im], im if len(nonempty) > 1 else ""),
                       losses=_loss_kinds(axd["energy"]) if "energy" in axd else ())
    present, d = agreement(problem, nonempty, key, agree)
    title = None
    if d is not None:
        amount = "0 (identical)" if d == 0 else f"{d:.1e}" + (
            f" {kunit}" if not isinstance(kunit, Unknown) else "")
        title = f"{', '.join(present)} coincide: max mutual difference of {key} {amount}"
    if "legend" in axd:
        lax = axd["legend"]
        lax.axis("off")
        leg = lax.legend(handles=handles, loc="center", frameon=False, fontsize="small",
                         title=title and title.replace(": ", ":\n", 1), title_fontsize="small")
        leg._legend_box.align = "left"
    else:
        fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize="small",
                   title=title, title_fontsize="small")
    if path is not None:
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
    return fig


def _frame_states(tr: Trajectory, count: int) -> list:
    """``count`` states ``(t, q, singular)`` to draw: the first and the last sample and,
    when the run has rank events, the configurations at its first events (``q``
    interpolated between the samples, :func:`_states_at`: a singular position is a
    configuration worth seeing), the rest evenly spaced samples."""
    first, last = float(tr.t[0]), float(tr.t[-1])
    events = sorted({float(e.t) for e in tr.rank_events if first < e.t < last})
    picks = [(t, True) for t in events[:count - 2]]
    spare = count - 2 - len(picks)
    even = np.linspace(0, len(tr) - 1, spare + 2).astype(int)[1:-1]
    for i in [*even, *range(1, len(tr) - 1)]:       # evenly spaced, else any free sample
        if len(picks) == count - 2:
            break
        if all(abs(tr.t[i] - t) > 1e-3 * (last - first) for t, _ in picks):
            picks.append((float(tr.t[i]), False))
    times = [(first, False)] + sorted(picks) + [(last, False)]
    qs, _ = _states_at(tr, [t for t, _ in times])
    return [(t, q, singular) for (t, singular), q in zip(times, qs)]


def make_comparison_figures(pb, trajs: Mapping[str, Trajectory]) -> dict:
    """The problem-specific comparison figures as ``{file stem: Figure}``: the
    paper-001 set (y1 by the GA and by Lagrange-I and their difference), the
    multipliers vs the constraint forces (rank events as grey vertical lines, impacts
    as red dashed ones), and drawings of the mechanism (at the start, at the first
    singular positions, at the end): :func:`draw_configuration`, a spatial multibody
    model in 3-D with one cube of equal axes for the four drawings."""
    import matplotlib.pyplot as plt

    figs = {}
    trajs = {n: tr for n, tr in trajs.items() if len(tr)}
    if not trajs:
        return figs
    units = problem_units(pb)
    outs = pb.outputs(pb.q0[None, :], pb.v0[None, :])
    if "y1" in outs and "ga" in trajs and "lagrange" in trajs:
        ga, lag = trajs["ga"], trajs["lagrange"]
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True, layout="constrained")
        t_end = ga.t[-1]
        sel = lag.t <= t_end + 1e-12
        pair = {"lagrange": lag, "ga": ga}
        labels = _suptitle(fig, pb, pair, "GA vs Lagrange-I (paper 001)")
        lines = _tag(a1.plot(lag.t[sel], pb.outputs(lag.q[sel], lag.v[sel])["y1"],
                             **{**_style("lagrange", pair), "lw": 2.6}, label=labels["lagrange"]),
                     "lagrange")
        lines += _tag(a1.plot(ga.t, pb.outputs(ga.q, ga.v)["y1"], **_style("ga", pair),
                              marker="o", ms=3.5, mfc="none", label=labels["ga"]), "ga")
        a1.set_ylabel(_label("y1", _unit(units, "y1")))
        _time_label(a1, False)
        plot_output_difference(pb, ga, lag, "y1", ax=a2, labels=("GA", "Lagrange-I"))
        fig.legend(handles=lines, loc="outside lower center", ncol=2, fontsize="small")
        figs[f"{pb.name}_y1_ga_vs_lagrange"] = fig
    if any(tr.multipliers.size for tr in trajs.values()):
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True, layout="constrained")
        labels = _suptitle(fig, pb, trajs, "multipliers vs constraint forces")
        plot_multipliers(trajs, ax=(a1, a2), problem=pb, legend=False)
        ev = _event_run(trajs)
        events = None
        if ev is not None:
            for a in (a1, a2):
                _events(a, trajs[ev])
            events = _event_label(trajs[ev], ev)
        im = _impact_run(trajs)
        impacts = None
        if im is not None:
            for a in (a1, a2):
                _impacts(a, trajs[im])
            impacts = _impact_label(trajs[im], im)
        fig.legend(handles=_handles(list(trajs), labels, events=events, impacts=impacts),
                   loc="outside lower center", ncol=3, fontsize="small")
        figs[f"{pb.name}_multipliers"] = fig
    kind = _drawing(pb)
    if kind is not None:
        name = max(trajs, key=lambda n: (trajs[n].success, trajs[n].t[-1]))
        tr = trajs[name]
        states = _frame_states(tr, 4)
        if kind == "3d":
            fig, axs = plt.subplots(1, 4, figsize=(14, 4.6), layout="constrained",
                                    subplot_kw={"projection": "3d"})
            lim = _model_extent(pb.model, [q for _, q, _ in states])
        else:
            fig, axs = plt.subplots(1, 4, figsize=(13, 3.8), sharex=True, sharey=True,
                                    layout="constrained")
            lim = None
        for ax, (t, q, singular) in zip(axs, states):
            draw_configuration(pb, q, ax=ax, limits=lim, title=f"t = {t:.3g} s" + (
                "\nsingular position (rank event)" if singular else ""))
            if singular and kind == "2d":
                for sp in ax.spines.values():
                    sp.set(ls=(0, (5, 3)), color="0.3", lw=1.2)
        if kind == "2d":
            _common_limits(axs)
            for ax in axs[1:]:
                ax.set_ylabel("")
        _suptitle(fig, pb, {name: tr}, "configurations" + (
            " (body frames: x red, y green" + (", z blue)" if kind == "3d" else ")")
            if kind == "3d" or pb.draw is None else ""))
        figs[f"{pb.name}_frames"] = fig
    return figs


def comparison_figures(pb, trajs: Mapping[str, Trajectory], out, dpi: int = 150) -> list:
    """Write :func:`make_comparison_figures` to ``out`` as PNG; returns the file names."""
    plt = _pyplot(True)
    out = Path(out)
    names = []
    for stem, fig in make_comparison_figures(pb, trajs).items():
        fig.savefig(out / f"{stem}.png", dpi=dpi)
        plt.close(fig)
        names.append(f"{stem}.png")
    return names


# --------------------------------------------------------------------------- sweeps

#: Units of the sweep columns that are not a parameter or an output (``None``: from
#: the problem's units, see :func:`sweep_column_unit`).
_SWEEP_COLUMN_UNITS = {"t_final": "s", "wall_time_s": "s", "compile_time_s": "s",
                       "time_per_step_ms": "ms", "steps": "1", "rhs_evals": "1",
                       "rank_events": "1", "max_energy_drift": None,
                       "energy_lost_impacts": None, "energy_lost_friction": None,
                       "max_pos_residual": None, "max_vel_residual": None,
                       "max_abs_multiplier": None}


def parameter_units(build, defaults: Optional[Mapping] = None) -> dict:
    """The units of ``build()``'s parameters as ``gaussopt show`` prints them: the
    first ``[unit]`` of each parameter's description in the docstring (``"Constant
    driving torque on the crank [N m]."`` -> ``"N m"``)."""
    from gaussopt.study.problem import BuildSignature

    try:
        sig = BuildSignature.of(build, defaults)
    except (TypeError, ValueError):     # no signature to read
        return {}
    out = {}
    for name, p in sig.parameters.items():
        m = re.search(r"\[([^\]\[]+)\]", str(p.doc or ""))
        if m:
            out[name] = m.group(1).strip()
    return out


def sweep_units(problem, params: Optional[Mapping] = None) -> dict:
    """The units a sweep's figures label their axes with, as ``gaussopt show`` knows
    them: those of ``problem.units`` (outputs, coordinates, ``energy``, constraint
    rows) of the problem built with ``params``, and of the parameters (their
    ``problem.units`` entry, else the ``[unit]`` in ``build()``'s docstring).

    ``problem``: a problem module (with ``build()``) or a builder function. A
    problem that builds neither with ``params`` nor with its defaults gives the
    docstring's units only."""
    build = getattr(problem, "build", problem)
    units = parameter_units(build, getattr(problem, "DEFAULTS", None))
    pb = None
    for kw in (dict(params or {}), {}):        # the given parameters, else the defaults
        try:
            pb = build(**kw)
            break
        except Exception:  # noqa: BLE001 - try the next, else the docstring's units
            continue
    if pb is None:
        return units
    stated = problem_units(pb)
    units.update({k: v for k, v in stated.items() if k not in units or isinstance(v, str)})
    return units


def sweep_column_unit(units: Mapping, column: str) -> str:
    """The unit of a sweep column (a parameter, ``final_<output>``,
    ``max_err_<output>``, a residual, the energy drift, a cost) from ``units``
    (:func:`sweep_units`); when unknown, words (:class:`~gaussopt.study.units.Unknown`)."""
    if column in _SWEEP_COLUMN_UNITS and _SWEEP_COLUMN_UNITS[column] is not None:
        return _SWEEP_COLUMN_UNITS[column]
    for prefix in ("final_", "max_err_"):
        if column.startswith(prefix) and column[len(prefix):] in units:
            return _unit(units, column[len(prefix):])
    if column in ("max_energy_drift", "energy_lost_impacts", "energy_lost_friction"):
        return _unit(units, "energy")
    derived = {"max_pos_residual": "position_residual", "max_vel_residual": "velocity_residual",
               "max_abs_multiplier": "multipliers"}
    if column in derived:
        return _derived_unit(units, derived[column])
    return _unit(units, column)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)


def plot_sweep(rows: Sequence[Mapping], x: str, y: str, *, params: Sequence[str] = (),
               problem: str = "", units: Optional[Mapping] = None, ax=None, path=None):
    """Column ``y`` of a sweep's rows against the parameter ``x``: one line per value of
    the other parameters that vary (and per solver); failed runs are left out (the
    title says how many). Axis labels carry the units of :func:`sweep_column_unit`
    (``units``: :func:`sweep_units`; in words where unknown). A column ``max_*`` whose
    values are all positive and span more than two decades is drawn on a log axis.

    ``params``: the parameter columns of the rows. Returns the Axes (the figure
    saved to ``path`` when given)."""
    units = dict(units or {})
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    others = [c for c in [*params, "solver"] if c != x
              and len({repr(r.get(c)) for r in rows}) > 1]
    groups: dict = {}
    failed = 0
    for r in rows:
        if not r.get("success", False):
            failed += 1
            continue
        if not _finite(r.get(x)) or not _finite(r.get(y)):
            continue
        label = ", ".join(f"{c}={r.get(c):g}" if _finite(r.get(c)) else f"{c}={r.get(c)}"
                          for c in others)
        groups.setdefault(label, []).append((float(r[x]), float(r[y])))
    by_solver = others == ["solver"]       # one line per solver: its colour and width
    solvers = [lab.partition("=")[2] for lab in groups] if by_solver else []
    for label, pts in groups.items():
        pts.sort()
        style = {}
        if by_solver:
            style = _style(label.partition("=")[2], solvers)
            style["ms"] = 2.0 + 1.5 * style["lw"]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label or None, **style)
    ys = np.array([p[1] for pts in groups.values() for p in pts])
    if (y.startswith("max_") and ys.size and np.all(ys > 0)
            and ys.max() > 100 * ys.min()):
        ax.set_yscale("log")
    ax.set_xlabel(_label(x, sweep_column_unit(units, x)))
    ax.set_ylabel(_label(y, sweep_column_unit(units, y)))
    ax.set_title(f"{problem}: {y} against {x}" + (
        f" ({failed} failed run{'s' if failed > 1 else ''} not drawn)" if failed else ""),
        fontsize="medium")
    if len(groups) > 1:
        ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    if path is not None:
        ax.figure.savefig(path, dpi=120)
    return ax


def sweep_figures(res, swept: Sequence[str], out, units: Optional[Mapping] = None,
                  problem=None) -> list:
    """The figures of ``gaussopt sweep``: one per output column (``final_*``,
    ``max_err_*``) of ``res`` (a :class:`~gaussopt.study.sweep.SweepResult`) against the
    first parameter of ``swept`` with several values, written into ``out`` as PNG
    with the axes in ``units``, by default :func:`sweep_units` of ``problem`` (its
    module or builder) built with the first row's parameters. Returns the file
    names."""
    rows = res.rows
    varying = [k for k in swept if len({repr(r.get(k)) for r in rows}) > 1]
    if not varying or not rows:
        return []
    if units is None and problem is not None:
        row = next((r for r in rows if r.get("success")), rows[0])
        units = sweep_units(problem, {k: row[k] for k in swept if k in row})
    plt = _pyplot(True)
    x = varying[0]
    names = []
    for col in res.columns:
        if col.startswith(("final_", "max_err_")):
            ax = res.plot(x, col, path=Path(out) / f"{col}_vs_{x}.png", units=units)
            plt.close(ax.figure)
            names.append(f"{col}_vs_{x}.png")
    return names
