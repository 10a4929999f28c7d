"""Command line: ``gaussopt list | run PROBLEM | compare PROBLEM``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import pkgutil
import sys
from pathlib import Path
from typing import Optional, Sequence


from . import __version__

__all__ = ["main", "load_problem_module"]


def load_problem_module(name: str):
    """A module of ``problems/`` by name, or a path to a module with ``build()``."""
    p = Path(name)
    if p.suffix == ".py" and p.exists():
        spec = importlib.util.spec_from_file_location(p.stem, p)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    try:
        return importlib.import_module(f"problems.{name}")
    except ModuleNotFoundError as e:
        if e.name not in (f"problems.{name}", "problems"):
            raise
        raise SystemExit(f"gaussopt: unknown problem {name!r}; `gaussopt list` shows the "
                         "problems, or pass a path to a module with build().") from None


def _problem_names() -> list[str]:
    import problems

    return sorted(m.name for m in pkgutil.iter_modules(problems.__path__) if not m.name.startswith("_"))


def _parse_params(items: Sequence[str]) -> dict:
    out = {}
    for it in items or ():
        if "=" not in it:
            raise SystemExit(f"gaussopt: --param expects NAME=VALUE, found {it!r}")
        k, v = it.split("=", 1)
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def _progress_bar(total: float, label: str):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is optional
        return None, None
    bar = tqdm(total=total, desc=label, unit="s", leave=False, disable=not sys.stderr.isatty(),
               bar_format="{l_bar}{bar}| {n:.3g}/{total:.3g} s [{elapsed}<{remaining}]")
    state = {"t": 0.0}

    def cb(t):
        bar.update(max(0.0, t - state["t"]))
        state["t"] = t

    return bar, cb


def _settings(args) -> dict:
    import gaussopt as go

    kw = {}
    if args.method:
        kw["method"] = args.method
    if args.dt is not None:
        kw["dt"] = args.dt
    if args.rtol is not None:
        kw["rtol"] = args.rtol
    if args.atol is not None:
        kw["atol"] = args.atol
    if args.stabilization:
        kw["stabilization"] = {"none": None, "baumgarte": go.Baumgarte(),
                               "projection": go.Projection()}[args.stabilization]
    return kw


# --------------------------------------------------------------------------- output paths
class _OutputPathError(Exception):
    """An output path given on the command line cannot be written; the message names
    the option and the path."""


def _missing_parent(path: Path) -> str:
    """Why the directory ``path`` is not there: a component is a file, or it does not exist."""
    for anc in (path, *path.parents):
        if anc.exists():
            if not anc.is_dir():
                return f"{str(anc)!r} is a file, not a directory"
            break
    return f"the directory {str(path)!r} does not exist"


def _check_output_file(option: str, value: str, target: Path, *, replaced: bool) -> None:
    """Raise :class:`_OutputPathError` unless ``target`` (the file ``value`` names) can be
    written: its directory exists and is writable and it is not a directory itself.
    ``replaced``: the file is written elsewhere and renamed onto ``target`` (an
    existing read-only file is then no obstacle)."""
    where = f"{option} {value!r}"
    parent = target.parent
    if target.is_dir():
        raise _OutputPathError(f"{where}: {str(target)!r} is a directory")
    if not parent.is_dir():
        raise _OutputPathError(f"{where}: {_missing_parent(parent)}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _OutputPathError(f"{where}: the directory {str(parent)!r} is not writable")
    if not replaced and target.exists() and not os.access(target, os.W_OK):
        raise _OutputPathError(f"{where}: {str(target)!r} exists and is not writable")


def _save_target(value: str) -> Path:
    """The file ``--save VALUE`` writes (``.npz`` appended as Trajectory.save does)."""
    from .result import _npz_path

    if Path(value).is_dir():      # would write VALUE.npz beside it: surely not what was meant
        raise _OutputPathError(f"--save {value!r}: it is a directory; give a file name")
    target = _npz_path(value)
    _check_output_file("--save", value, target, replaced=True)
    return target


def _plot_target(value: str) -> Path:
    """The file ``--plot VALUE`` writes; its extension must be a matplotlib format
    (none: matplotlib's ``savefig.format``, appended as ``Figure.savefig`` does)."""
    import matplotlib
    from matplotlib.backend_bases import FigureCanvasBase

    if Path(value).is_dir():
        raise _OutputPathError(f"--plot {value!r}: it is a directory; give a file name")
    ext = os.path.splitext(value)[1][1:].lower()
    target = Path(value)
    if not ext:
        target = Path(f"{value}.{matplotlib.rcParams['savefig.format']}")
    else:
        formats = FigureCanvasBase.get_supported_filetypes()
        if ext not in formats:
            raise _OutputPathError(f"--plot {value!r}: unsupported figure format {ext!r} "
                                   f"(supported: {', '.join(sorted(formats))})")
    _check_output_file("--plot", value, target, replaced=False)
    return target


def _prepare_out_dir(value: str) -> Path:
    """Create the ``--out`` directory (with its parents) and check that it is writable."""
    out = Path(value)
    where = f"--out {value!r}"
    if out.exists() and not out.is_dir():
        raise _OutputPathError(f"{where}: {str(out)!r} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        reason = _missing_parent(out.parent) if isinstance(e, (NotADirectoryError,
                                                               FileExistsError)) else e.strerror
        raise _OutputPathError(f"{where}: cannot create the directory ({reason or e})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise _OutputPathError(f"{where}: the directory {str(out)!r} is not writable")
    return out


def _check_out_files(value: str, out: Path, names: Sequence[str]) -> None:
    """The files ``compare`` writes into ``out`` must not be directories or read-only."""
    for name in names:
        target = out / name
        _check_output_file("--out", value, target, replaced=name.endswith(".npz"))


def _path_error(command: str, e: _OutputPathError) -> int:
    print(f"gaussopt {command}: error: {e}; nothing was computed.", file=sys.stderr)
    return 2


def cmd_list(args) -> int:
    for name in _problem_names():
        mod = load_problem_module(name)
        doc = (mod.__doc__ or "").strip().splitlines()
        print(f"{name:24s} {doc[0] if doc else ''}")
    return 0


def cmd_run(args) -> int:
    # every output path is checked before anything is computed
    try:
        save_to = _save_target(args.save) if args.save else None
        plot_to = _plot_target(args.plot) if args.plot else None
    except _OutputPathError as e:
        return _path_error("run", e)
    mod = load_problem_module(args.problem)
    pb = mod.build(**_parse_params(args.param))
    kw = _settings(args)
    if args.t_end is not None:
        kw["t_span"] = (pb.t_span[0], args.t_end)
    t_span = kw.get("t_span", pb.t_span)
    bar, cb = _progress_bar(t_span[1] - t_span[0], pb.name)
    if cb:
        kw["progress"] = cb
    tr = pb.simulate(args.solver, **kw)
    if bar is not None:
        bar.close()
    from .compare import summarize

    row = summarize(pb, args.solver, tr, tr.stats.get("wall_time", float("nan")))
    print(f"{pb.name}: {tr.message}")
    print("final state: " + ", ".join(f"{c}={x:.10g}" for c, x in zip(tr.coordinates, tr.q[-1])))
    for k, v in row.items():
        if k not in ("solver",):
            print(f"  {k:22s} {v:.6g}" if isinstance(v, float) else f"  {k:22s} {v}")
    for e in tr.rank_events[:10]:
        print(f"  rank event t={e.t:.9g} {e.kind} rows={e.rows} sigma_min={e.sigma_min:.2g}")
    if len(tr.rank_events) > 10:
        print(f"  ... {len(tr.rank_events)} rank events in all")
    if save_to is not None:
        print(f"saved {tr.save(save_to)}")
    if plot_to is not None:
        from .plotting import summary_figure

        summary_figure(pb, {args.solver: tr}, path=plot_to)
        print(f"plot {plot_to}")
    return 0 if tr.success else 1


def cmd_compare(args) -> int:
    from .compare import compare

    mod = load_problem_module(args.problem)     # an unknown name exits before --out is made
    # the output directory is created and checked before anything is built or computed
    try:
        out = _prepare_out_dir(args.out)
    except _OutputPathError as e:
        return _path_error("compare", e)
    pb = mod.build(**_parse_params(args.param))
    solvers = ([s.strip() for s in args.solvers.split(",") if s.strip()]
               if args.solvers else None)
    try:
        _check_out_files(args.out, out, ["table.csv", "table.md", f"{pb.name}_compare.png"]
                         + [f"{pb.name}_{s}.npz" for s in (solvers or pb.solvers)]
                         + [f"{pb.name}_{x}.png" for x in ("y1_ga_vs_lagrange", "multipliers",
                                                           "frames")])
    except _OutputPathError as e:
        return _path_error("compare", e)
    kw = _settings(args)
    bars = {}

    def progress(name, t):
        if name not in bars:
            bars[name] = _progress_bar(pb.t_span[1] - pb.t_span[0], f"{pb.name} {name}")
        _, cb = bars[name]
        if cb:
            cb(t)

    comp = compare(pb, solvers, progress=progress, **kw)
    for bar, _ in bars.values():
        if bar is not None:
            bar.close()
    print(comp.to_markdown())
    comp.to_csv(out / "table.csv")
    (out / "table.md").write_text(comp.to_markdown() + "\n")
    for name, tr in comp.trajectories.items():
        tr.save(out / f"{pb.name}_{name}.npz")
    comp.plot(out / f"{pb.name}_compare.png")
    figs = [f"{pb.name}_compare.png"]
    from .plotting import comparison_figures

    figs += comparison_figures(pb, comp.trajectories, out)
    print(f"wrote {out}/: table.csv, table.md, {len(comp.trajectories)} trajectories (.npz), "
          f"figures {', '.join(figs)}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gaussopt",
        description="Constrained mechanical systems by Gauss's principle of least constraint.")
    parser.add_argument("--version", action="version", version=f"gaussopt {__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("list", help="list the problems")

    def common(p):
        p.add_argument("problem", help="problem name (see `gaussopt list`) or path to a module")
        p.add_argument("--method", help="rk4, euler, RK45, DOP853, Radau, BDF, LSODA")
        p.add_argument("--dt", type=float)
        p.add_argument("--rtol", type=float)
        p.add_argument("--atol", type=float)
        p.add_argument("--stabilization", choices=["none", "baumgarte", "projection"])
        p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")

    pr = sub.add_parser("run", help="simulate one problem")
    common(pr)
    pr.add_argument("--solver", default="closed_form", help="closed_form, lagrange, qp, ga")
    pr.add_argument("--t-end", type=float)
    pr.add_argument("--save", help="write the trajectory (.npz)")
    pr.add_argument("--plot", help="write a figure (.png)")
    pc = sub.add_parser("compare", help="compare solvers on one problem")
    common(pc)
    pc.add_argument("--solvers", default=None,
                    help="comma-separated solver names (default: the problem's own list)")
    pc.add_argument("--out", default="out", help="directory for table, trajectories, figures")
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return {"list": cmd_list, "run": cmd_run, "compare": cmd_compare}[args.command](args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
