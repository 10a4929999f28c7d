"""Figures for trajectories and comparisons (matplotlib).

Every ``plot_*`` function draws on ``ax`` (a new figure when ``ax`` is None) and
returns the Axes it drew on, so figures compose::

    fig, axs = plt.subplots(2, 2)
    go.plotting.plot_coordinates(traj, ax=axs[0, 0])
    go.plotting.plot_residuals({"closed form": traj}, ax=axs[0, 1])
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from .result import Trajectory

__all__ = ["plot_coordinates", "plot_outputs", "plot_output_difference", "plot_residuals",
           "plot_energy", "plot_multipliers", "draw_frame", "animate", "summary_figure",
           "comparison_figures"]

Trajs = Union[Trajectory, Mapping[str, Trajectory]]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 4))
    return ax


def _as_dict(trajs: Trajs) -> dict:
    return {"": trajs} if isinstance(trajs, Trajectory) else dict(trajs)


def _events(ax, tr: Trajectory):
    for e in tr.rank_events:
        ax.axvline(e.t, color="0.7", lw=0.6, ls=":", zorder=0)


def plot_coordinates(traj: Trajectory, ax=None, coordinates: Optional[Sequence[str]] = None,
                     show_events: bool = True):
    """Coordinates against time; dotted lines mark singular positions (rank events)."""
    ax = _axes(ax)
    names = coordinates or traj.coordinates
    for c in names:
        ax.plot(traj.t, traj[c], label=c)
    if show_events:
        _events(ax, traj)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("q")
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_outputs(problem, trajs: Trajs, key: str, ax=None, reference: bool = True):
    """An output of ``problem.outputs`` (e.g. ``"y1"``) for several runs, with the reference."""
    ax = _axes(ax)
    t_max = 0.0
    for name, tr in _as_dict(trajs).items():
        ax.plot(tr.t, problem.outputs(tr.q, tr.v)[key], label=name or key)
        t_max = max(t_max, float(tr.t[-1]))
    if reference and problem.reference is not None and t_max > 0:
        t = np.linspace(problem.t_span[0], t_max, 2000)
        ref = problem.reference(t)
        if key in ref:
            ax.plot(t, ref[key], "k:", lw=1, label="reference")
    ax.set_xlabel("t [s]")
    ax.set_ylabel(key)
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_output_difference(problem, traj_a: Trajectory, traj_b: Trajectory, key: str, ax=None,
                           labels: Sequence[str] = ("a", "b")):
    """``key(a) - key(b)`` on the common time range (b interpolated on a's samples),
    e.g. paper 001's difference of y1 between the GA and Lagrange-I."""
    ax = _axes(ax)
    t_end = min(traj_a.t[-1], traj_b.t[-1])
    sel = traj_a.t <= t_end
    ya = problem.outputs(traj_a.q[sel], traj_a.v[sel])[key]
    yb = np.interp(traj_a.t[sel], traj_b.t, problem.outputs(traj_b.q, traj_b.v)[key])
    ax.plot(traj_a.t[sel], ya - yb)
    ax.set_xlabel("t [s]")
    ax.set_ylabel(f"{key}({labels[0]}) - {key}({labels[1]})")
    return ax


def plot_residuals(trajs: Trajs, ax=None, kinds: Sequence[str] = ("position", "velocity")):
    """Constraint residual norms on a log scale (compare with/without stabilization)."""
    ax = _axes(ax)
    styles = {"position": "-", "velocity": "--", "acceleration": ":"}
    for name, tr in _as_dict(trajs).items():
        for k in kinds:
            r = tr.residuals[k]
            if r.size and np.any(r > 0):
                ax.semilogy(tr.t, np.maximum(r, 1e-17), styles[k], label=f"{name} {k}".strip())
    ax.set_xlabel("t [s]")
    ax.set_ylabel("constraint residual")
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_energy(trajs: Trajs, ax=None, relative: bool = False):
    """Energy drift ``|E(t) - E(0)|`` on a log scale."""
    ax = _axes(ax)
    for name, tr in _as_dict(trajs).items():
        if tr.energy is None:
            continue
        d = np.abs(tr.energy - tr.energy[0])
        if relative:
            d = d / max(abs(tr.energy[0]), 1e-300)
        ax.semilogy(tr.t, np.maximum(d, 1e-17), label=name or "energy")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("relative energy drift" if relative else "|E - E(0)|")
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_multipliers(trajs: Trajs, ax=None):
    """``max |lam|`` per sample: multipliers blow up at singular positions, forces do not."""
    ax = _axes(ax)
    for name, tr in _as_dict(trajs).items():
        if tr.multipliers.size:
            ax.semilogy(tr.t, np.nanmax(np.abs(tr.multipliers), axis=1), label=f"{name} max|lam|")
            ax.semilogy(tr.t, np.nanmax(np.abs(tr.constraint_force), axis=1), "--",
                        label=f"{name} max|M a - F|")
    ax.set_xlabel("t [s]")
    ax.legend(loc="best", fontsize="small")
    return ax


def draw_frame(problem, q: np.ndarray, ax=None, title: Optional[str] = None):
    """Draw the mechanism at ``q`` with the problem's ``draw`` function."""
    ax = _axes(ax)
    if problem.draw is None:
        raise ValueError(f"problem {problem.name!r} has no `draw` function.")
    problem.draw(ax, np.asarray(q, dtype=float))
    if title:
        ax.set_title(title)
    return ax


def animate(problem, traj: Trajectory, path, frames: int = 120, fps: int = 24):
    """Write an animation (GIF via Pillow) of the mechanism along ``traj``."""
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation, PillowWriter

    idx = np.linspace(0, len(traj) - 1, min(frames, len(traj))).astype(int)
    fig, ax = plt.subplots(figsize=(5, 5))
    qs = traj.q[idx]

    def frame(i):
        ax.clear()
        draw_frame(problem, qs[i], ax=ax, title=f"t = {traj.t[idx[i]]:.2f} s")
        return ()

    anim = FuncAnimation(fig, frame, frames=len(idx), blit=False)
    anim.save(str(path), writer=PillowWriter(fps=fps))
    plt.close(fig)
    return path


def summary_figure(problem, trajs: Trajs, key: Optional[str] = None, path=None):
    """A 2x2 panel: an output vs the reference, its error, residuals, energy."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trajs = _as_dict(trajs)
    fig, axs = plt.subplots(2, 2, figsize=(11, 7))
    first = next(iter(trajs.values()))
    key = key or next(iter(problem.outputs(first.q[:1], first.v[:1])))
    plot_outputs(problem, trajs, key, ax=axs[0, 0])
    ax = axs[0, 1]
    if problem.reference is not None:
        for name, tr in trajs.items():
            ref = problem.reference(tr.t).get(key)
            if ref is not None:
                ax.semilogy(tr.t, np.abs(problem.outputs(tr.q, tr.v)[key] - ref) + 1e-17,
                            label=name)
        ax.set_ylabel(f"|{key} - reference|")
        ax.set_xlabel("t [s]")
        ax.legend(loc="best", fontsize="small")
    elif problem.draw is not None:
        draw_frame(problem, first.q[-1], ax=ax, title="final configuration")
    plot_residuals(trajs, ax=axs[1, 0])
    plot_energy(trajs, ax=axs[1, 1])
    fig.suptitle(problem.name)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def comparison_figures(pb, trajs: Mapping[str, Trajectory], out) -> list:
    """Problem-specific figures: the paper-001 set (y1 by GA and by Lagrange-I and their
    difference), multipliers vs constraint forces, and a drawing of the mechanism."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    names = []
    outs = pb.outputs(pb.q0[None, :], pb.v0[None, :])
    if "y1" in outs and "ga" in trajs and "lagrange" in trajs:
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
        t_end = trajs["ga"].t[-1]
        lag = trajs["lagrange"]
        sel = lag.t <= t_end + 1e-12
        plot_outputs(pb, {"GA (optimization)": trajs["ga"]}, "y1", ax=a1, reference=False)
        a1.plot(lag.t[sel], pb.outputs(lag.q[sel], lag.v[sel])["y1"], "--",
                label="Lagrange-I")
        a1.legend(fontsize="small")
        plot_output_difference(pb, trajs["ga"], lag, "y1", ax=a2,
                                        labels=("GA", "Lagrange-I"))
        fig.suptitle(f"{pb.name}: y of link 1's centroid (paper 001 figures)")
        fig.tight_layout()
        fig.savefig(out / f"{pb.name}_y1_ga_vs_lagrange.png", dpi=110)
        plt.close(fig)
        names.append(f"{pb.name}_y1_ga_vs_lagrange.png")
    if any(tr.multipliers.size for tr in trajs.values()):
        ax = plot_multipliers(trajs)
        ax.set_title(f"{pb.name}: multipliers vs constraint forces")
        ax.figure.savefig(out / f"{pb.name}_multipliers.png", dpi=110)
        plt.close(ax.figure)
        names.append(f"{pb.name}_multipliers.png")
    if pb.draw is not None:
        tr = next(iter(trajs.values()))
        fig, axs = plt.subplots(1, 4, figsize=(14, 4))
        for ax, i in zip(axs, np.linspace(0, len(tr) - 1, 4).astype(int)):
            draw_frame(pb, tr.q[i], ax=ax, title=f"t = {tr.t[i]:.2f} s")
        fig.tight_layout()
        fig.savefig(out / f"{pb.name}_frames.png", dpi=100)
        plt.close(fig)
        names.append(f"{pb.name}_frames.png")
    return names
