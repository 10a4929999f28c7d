"""Command line: ``gaussopt list | show PROBLEM | run PROBLEM | compare PROBLEM``.

Each subcommand is one entry of :data:`COMMANDS`: a function that adds its
arguments to its parser and a function ``cmd(args) -> int`` (the exit code).
The problems are those registered as entry points (:mod:`gaussopt.study.registry`,
which also holds the problem lookup shared with ``gaussopt sweep``). A mistake on
the command line raises :class:`~gaussopt.study.registry.UsageError` (argparse's own errors
included); the library's :class:`~gaussopt.ModelError` from building the problem
or validating the settings is one too. :func:`main` prints either as one line
on stderr, ``gaussopt <command>: error: <what to do>``, and returns 2. A run that
did not succeed returns 1; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Callable, Optional, Sequence

from gaussopt.core.version import __version__
from gaussopt.core.exceptions import ModelError
from gaussopt.study.problem import BuildSignature, did_you_mean
from gaussopt.study.registry import (UsageError, build_signature, check_parameters,
                                     load_problem_module, parameter_range, problem_names)
from gaussopt.study.sweep import cmd_sweep, sweep_arguments

__all__ = ["main", "load_problem_module", "UsageError", "COMMANDS"]


class _Parser(argparse.ArgumentParser):
    """argparse's errors as a :class:`UsageError`: one line (argparse prints the usage
    before its message), with the closest choice of a mistyped one."""

    def error(self, message: str):
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        hint = did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2))) if m else ""
        raise UsageError(f"{message}{hint} (see `{self.prog} --help`)", prog=self.prog)


def _parse_params(sig: BuildSignature, items: Sequence[str], problem: str) -> dict:
    """``--param NAME=VALUE`` items as ``build()`` keywords, each checked against
    ``build()``'s signature and converted to its parameter's type."""
    out = {}
    for it in items or ():
        name, eq, text = it.partition("=")
        name = name.strip()
        if not eq or not name:
            raise UsageError(f"--param expects NAME=VALUE, found {it!r}")
        try:
            out[name] = sig.parse(name, text.strip())
            check_parameters(sig, {name: out[name]}, problem)
        except ModelError as e:
            raise UsageError(f"--param {it}: {str(e).rstrip('.')}; `gaussopt show {problem}` "
                             "lists the parameters") from None
    return out


def _build(args, extra: Optional[dict] = None):
    """Load the problem, check the ``--param`` items against ``build()`` and build it.
    ``extra``: keywords the command passes when ``build()`` takes them (``t_end``)."""
    mod = load_problem_module(args.problem)
    sig = build_signature(mod)
    params = _parse_params(sig, args.param, args.problem)
    for k, v in (extra or {}).items():
        if k in sig.parameters and k not in params:
            params[k] = v
    try:
        pb = mod.build(**params)
    except ModelError as e:
        given = ", ".join(f"{k}={v!r}" for k, v in params.items())
        raise UsageError(f"{args.problem}" + (f" with {given}" if given else "")
                         + f": {_one_line(str(e)).rstrip('.')}; `gaussopt show {args.problem}` "
                         "lists the parameters and their values") from None
    return pb


def _solver_names(pb) -> list[str]:
    from gaussopt.gauss.solvers import SOLVERS

    return list(SOLVERS) + [k for k in pb.solver_settings if k not in SOLVERS]


def _check_solvers(pb, names: Sequence[str], option: str) -> None:
    known = _solver_names(pb)
    for s in names:
        if s not in known:
            raise UsageError(f"{option}: unknown solver {s!r}{did_you_mean(s, known)} "
                             f"(solvers of {pb.name}: {', '.join(known)})")


def _check_t_end(pb, t_end: Optional[float]) -> None:
    if t_end is not None and not t_end > pb.t_span[0]:
        raise UsageError(f"--t-end must be later than {pb.name}'s start time "
                         f"{pb.t_span[0]:g} s, found {t_end:g}")


def _positive(text: str) -> float:
    """argparse type: a positive finite number."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, found {text!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, found {text!r}")
    return x


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


def _compile_bar() -> None:
    """From now on, a batch of compiled code that this machine's cache lacks shows a
    progress bar on stderr while it compiles (after gaussopt's one-line notice)."""
    import gaussopt.core.compiled as compiled

    state: dict = {}

    def show(done: int, total: int) -> None:
        bar = state.get("bar")
        if bar is None:
            from tqdm import tqdm

            bar = state["bar"] = tqdm(total=total, desc="gaussopt: compiling", unit=" fn",
                                      leave=False, disable=not sys.stderr.isatty())
        bar.total = total
        bar.update(done - bar.n)
        if done >= total:
            bar.close()
            state.pop("bar")

    compiled.PROGRESS = show


def _compile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("problems", nargs="*", metavar="PROBLEM",
                   help="also compile these problems' model functions (e.g. four_bar)")
    p.add_argument("--where", action="store_true",
                   help="print the directory of the compiled code and exit")


def cmd_compile(args) -> int:
    """compile the simulation engine ahead of its first run (once per machine and version)

    Later runs, in any process, load the compiled code from the cache."""
    import gaussopt.core.compiled as compiled

    where = compiled.code_cache_dir()
    if args.where:
        print(where)
        return 0
    # (an unknown name stops here, before anything compiles)
    models = [load_problem_module(name) for name in args.problems]
    extra = []
    for mod in models:
        extra += getattr(mod.build().system.compiled, "functions", ())
    compiled.NOTICE_STREAM = None            # (the progress bar says it)
    _compile_bar()
    seconds = compiled.compile_all(*extra)
    print(f"gaussopt compile: {len(compiled.units())} compiled functions ready in {where} "
          f"({seconds:.1f} s)")
    return 0


def _settings(args) -> dict:
    from gaussopt.integrate.stabilization import Baumgarte, Projection

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
        kw["stabilization"] = {"none": None, "baumgarte": Baumgarte(),
                               "projection": Projection()}[args.stabilization]
    return kw


# --------------------------------------------------------------------------- output paths
class _OutputPathError(UsageError):
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
    from gaussopt.core.result import _npz_path

    if Path(value).is_dir():      # would write VALUE.npz beside it: surely not what was meant
        raise _OutputPathError(f"--save {value!r}: it is a directory; give a file name")
    suffix = Path(value).suffix
    if suffix and suffix != ".npz":   # VALUE.npz would be written: not the file asked for
        raise _OutputPathError(f"--save {value!r}: a trajectory is written as an .npz archive, "
                               f"not {suffix}; give a name ending in .npz (e.g. "
                               f"{str(Path(value).with_suffix('.npz'))!r})")
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


def _check_out_dir(value: str) -> Path:
    """The ``--out`` directory: it exists and is writable, or only its last level is
    missing and can be created (nothing is created yet: :func:`_make_out_dir`)."""
    out = Path(value)
    where = f"--out {value!r}"
    if out.exists():
        if not out.is_dir():
            raise _OutputPathError(f"{where}: {str(out)!r} exists and is not a directory")
        if not os.access(out, os.W_OK | os.X_OK):
            raise _OutputPathError(f"{where}: the directory {str(out)!r} is not writable")
        return out
    parent = out.parent
    if not parent.is_dir():
        raise _OutputPathError(f"{where}: {_missing_parent(parent)}; create it first (only "
                               "the last level of --out is created)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _OutputPathError(f"{where}: cannot create the directory: {str(parent)!r} is "
                               "not writable")
    return out


def _make_out_dir(value: str, out: Path) -> Path:
    """Create the last level of the checked ``--out`` directory."""
    try:
        out.mkdir(exist_ok=True)
    except OSError as e:
        raise _OutputPathError(f"--out {value!r}: cannot create the directory "
                               f"({e.strerror or e})") from None
    return out


def _check_out_files(value: str, out: Path, names: Sequence[str]) -> None:
    """The files ``compare`` writes into ``out`` must not be directories or read-only."""
    for name in names:
        target = out / name
        _check_output_file("--out", value, target, replaced=name.endswith(".npz"))


def _one_line(message: str) -> str:
    return " ".join(line.strip() for line in str(message).splitlines() if line.strip())


#: keywords of :func:`gaussopt.simulate` in the library's messages -> the options that set them
_OPTIONS = {"dt": "--dt", "rtol": "--rtol", "atol": "--atol", "method": "--method",
            "solver": "--solver", "stabilization": "--stabilization", "t_span": "--t-end"}


def _cli_words(message: str) -> str:
    """A library message in the command line's words: `dt` -> --dt, ..."""
    message = re.sub(r"method='(\w+)'", r"--method \1", message)
    return re.sub(r"`(\w+)`", lambda m: _OPTIONS.get(m.group(1), m.group(0)), message)


# --------------------------------------------------------------------------- commands
def _list_arguments(p: argparse.ArgumentParser) -> None:
    pass


def cmd_list(args) -> int:
    """list the problems"""
    names = problem_names()
    if not names:
        raise UsageError(f"no problems are registered (the entry-point group "
                         f"'gaussopt.problems' is empty); reinstall gaussopt (`pip install -e .` "
                         "in its checkout) so that its problems are registered")
    for name in names:
        try:
            mod = load_problem_module(name)
        except UsageError as e:           # a broken third-party problem: named, the list goes on
            print(f"{name:24s} (cannot be loaded: {_one_line(str(e))})")
            continue
        doc = (mod.__doc__ or "").strip().splitlines()
        print(f"{name:24s} {doc[0] if doc else ''}")
    return 0


def _value(x) -> str:
    """A setting or a default, short: floats with %g, long arrays by their extent."""
    import numpy as np

    if isinstance(x, (float, np.floating)):
        return f"{float(x):g}"
    if isinstance(x, np.ndarray):
        if x.ndim == 1 and x.size > 6:
            return f"{x.size} points from {x[0]:g} to {x[-1]:g}"
        return np.array2string(x, precision=6, separator=", ")
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(_value(v) for v in x) + ")"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in x.items()) + "}"
    if callable(x) and not hasattr(x, "__dataclass_fields__"):
        return getattr(x, "__name__", type(x).__name__)
    return repr(x)


def _plain(text: str) -> str:
    """reStructuredText markup off for the terminal: ``x`` -> x, :func:`f` -> f."""
    text = re.sub(r":\w+:`~?([^`]*)`", r"\1", text)
    return text.replace("``", "")


def _show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("problem", help="problem name (see `gaussopt list`) or path to a module")
    _param_argument(p)


def cmd_show(args) -> int:
    """describe a problem: its parameters, outputs and recommended settings"""
    import numpy as np

    sig = build_signature(load_problem_module(args.problem))
    pb = _build(args)
    para = textwrap.TextWrapper(width=100, initial_indent="  ", subsequent_indent="  ")
    sub = textwrap.TextWrapper(width=100, initial_indent=" " * 6, subsequent_indent=" " * 6)
    print(pb.name)
    print(para.fill(pb.description) if pb.description else "  (no description)")
    print("\nparameters (--param NAME=VALUE):")
    units = getattr(pb, "units", None) or {}
    for p in sig.parameters.values():
        default = ("required" if p.required else
                   "default " + re.sub(r"^default[:=]?\s*", "", p.default_text))
        if p.default is None and pb.params.get(p.name) is not None:
            default += f" (here {_value(pb.params[p.name])})"
        kind = p.kind or ("" if p.choices else _plain(p.type))
        unit = f" [{units[p.name]}]" if isinstance(units.get(p.name), str) else ""
        allowed = f"; one of {', '.join(p.choices)}" if p.choices else ""
        rng = parameter_range(p)
        allowed += f"; {rng.text}" if rng is not None else ""
        print(f"  {p.name}{unit}  ({kind + ', ' if kind else ''}{default}{allowed})")
        if p.doc:
            print(sub.fill(_plain(p.doc)))
    if sig.open:
        print("  build() also takes other keywords, passed on unchecked")
    outs = pb.outputs(pb.q0[None, :], pb.v0[None, :])
    ref = (set(pb.reference(np.array([pb.t_span[0]]))) if pb.reference is not None
           else set())
    print("\noutputs" + (" (those marked * with an independent reference)" if ref else "")
          + ":")
    print("  " + ", ".join(f"{k}{' [' + units[k] + ']' if k in units else ''}"
                           f"{'*' if k in ref else ''}" for k in outs))
    print(f"  coordinates: {', '.join(pb.system.coordinates)}")
    print("\nrecommended settings (options of run and compare override them):")
    print(f"  t_span: {_value(tuple(pb.t_span))} s")
    for k, v in pb.settings.items():
        print(f"  {k}: {_value(v)}")
    print(f"  solvers (the rows of compare): {', '.join(pb.solvers)}")
    for k, v in pb.solver_settings.items():
        print(f"  {k}: {_value(v)}")
    return 0


def _param_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a keyword of the problem's build(), repeatable (--param psi=0 "
                        "--param t_end=2); `gaussopt show PROBLEM` lists them with their "
                        "defaults, units and allowed values")


def _simulation_arguments(p: argparse.ArgumentParser) -> None:
    from gaussopt.integrate.options import FIXED_STEP_METHODS
    from gaussopt.integrate.scipy_methods import IVP_METHODS

    p.add_argument("problem", help="problem name (see `gaussopt list`) or path to a module "
                                   "with build()")
    _param_argument(p)
    p.add_argument("--t-end", type=_positive, metavar="T",
                   help="end time [s] (default: the problem's; `gaussopt show` gives it)")
    p.add_argument("--method", choices=[*FIXED_STEP_METHODS, *IVP_METHODS],
                   help="integration method: rk4 and euler take a fixed step --dt, the others "
                        "(scipy's solve_ivp) adapt it to --rtol/--atol (default: the "
                        "problem's, usually DOP853)")
    p.add_argument("--dt", type=_positive, metavar="DT",
                   help="fixed step [s] of --method rk4 or euler (required by them)")
    p.add_argument("--rtol", type=_positive,
                   help="relative tolerance of the adaptive methods (default: the problem's)")
    p.add_argument("--atol", type=_positive,
                   help="absolute tolerance of the adaptive methods (default: the problem's)")
    p.add_argument("--stabilization", choices=["none", "baumgarte", "projection"],
                   help="constraint stabilization (default: the problem's)")


def _run_arguments(p: argparse.ArgumentParser) -> None:
    _simulation_arguments(p)
    p.add_argument("--solver", default="closed_form",
                   help="closed_form (default), lagrange, qp, ga, or a variant the problem "
                        "defines (`gaussopt show PROBLEM` lists them)")
    p.add_argument("--save", metavar="FILE", help="write the trajectory (.npz)")
    p.add_argument("--plot", metavar="FILE",
                   help="write a figure; the extension picks the format (.png, .pdf, .svg)")


def cmd_run(args) -> int:
    """simulate one problem"""
    # every output path is checked before anything is computed
    save_to = _save_target(args.save) if args.save else None
    plot_to = _plot_target(args.plot) if args.plot else None
    pb = _build(args, {"t_end": args.t_end} if args.t_end is not None else None)
    _check_solvers(pb, [args.solver], "--solver")
    _check_t_end(pb, args.t_end)
    kw = _settings(args)
    if args.t_end is not None:        # also past a solver's own shorter span (the GA's)
        kw["t_span"] = (pb.t_span[0], args.t_end)
    t_span = kw.get("t_span", pb.t_span)
    bar, cb = _progress_bar(t_span[1] - t_span[0], pb.name)
    if cb:
        kw["progress"] = cb
    tr = pb.simulate(args.solver, **kw)
    if bar is not None:
        bar.close()
    from gaussopt.study.compare import summarize

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
        from gaussopt.study.plotting import summary_figure

        summary_figure(pb, {args.solver: tr}, path=plot_to)
        print(f"plot {plot_to}")
    return 0 if tr.success else 1


def _compare_arguments(p: argparse.ArgumentParser) -> None:
    _simulation_arguments(p)
    p.add_argument("--solvers", default=None, metavar="A,B,...",
                   help="comma-separated solver names (default: the problem's own list; "
                        "`gaussopt show PROBLEM` gives it)")
    p.add_argument("--out", default="out", metavar="DIR",
                   help="directory for the table, trajectories and figures (default: out); "
                        "only its last level is created")


def cmd_compare(args) -> int:
    """compare solvers on one problem"""
    from gaussopt.study.compare import compare

    mod = load_problem_module(args.problem)     # an unknown name exits before --out is made
    # --out is checked before anything is built, created before anything is computed
    out = _check_out_dir(args.out)
    # --t-end sets the problem's t_end (the GA row keeps its shorter span), or, when build()
    # has none, the span of every row
    pb = _build(args, {"t_end": args.t_end} if args.t_end is not None else None)
    _check_t_end(pb, args.t_end)
    solvers = ([s.strip() for s in args.solvers.split(",") if s.strip()]
               if args.solvers else None)
    _check_solvers(pb, solvers or pb.solvers, "--solvers")
    kw = _settings(args)
    if args.t_end is not None and "t_end" not in build_signature(mod).parameters:
        kw["t_span"] = (pb.t_span[0], args.t_end)
    _make_out_dir(args.out, out)
    _check_out_files(args.out, out, ["table.csv", "table.md", f"{pb.name}_compare.png"]
                     + [f"{pb.name}_{s}.npz" for s in (solvers or pb.solvers)]
                     + [f"{pb.name}_{x}.png" for x in ("y1_ga_vs_lagrange", "multipliers",
                                                       "frames")])
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
    from gaussopt.study.plotting import comparison_figures

    figs += comparison_figures(pb, comp.trajectories, out)
    print(f"wrote {out}/: table.csv, table.md, {len(comp.trajectories)} trajectories (.npz), "
          f"figures {', '.join(figs)}")
    failed = [(name, tr) for name, tr in comp.trajectories.items() if not tr.success]
    for name, tr in failed:       # everything computed is written; the exit code tells
        print(f"gaussopt compare: the {name} run did not succeed: {_one_line(tr.message)}",
              file=sys.stderr)
    return 1 if failed else 0


#: The subcommands: name -> (adds its arguments to its parser, runs it and returns the
#: exit code). The first line of the function's docstring is its help.
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[..., int]]] = {
    "list": (_list_arguments, cmd_list),
    "show": (_show_arguments, cmd_show),
    "run": (_run_arguments, cmd_run),
    "compare": (_compare_arguments, cmd_compare),
    "sweep": (sweep_arguments, cmd_sweep),
    "compile": (_compile_arguments, cmd_compile),
}


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gaussopt",
        description="Constrained mechanical systems by Gauss's principle of least constraint.")
    parser.add_argument("--version", action="version", version=f"gaussopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    for name, (arguments, command) in COMMANDS.items():
        doc = (command.__doc__ or "").strip().splitlines()
        p = sub.add_parser(name, help=doc[0] if doc else None,
                           description=doc[0][:1].upper() + doc[0][1:] + "." if doc else None)
        arguments(p)
        p.set_defaults(command_function=command)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``gaussopt`` console script; returns the exit code (0 done, 1 a run that did
    not succeed, 2 a mistake on the command line, told in one line on stderr)."""
    parser = _parser()
    args = argparse.Namespace(command=None)
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        if args.command in ("run", "compare", "sweep"):
            _compile_bar()
        return args.command_function(args)
    except UsageError as e:
        prog = e.prog or " ".join(filter(None, ("gaussopt", args.command)))
        tail = "; nothing was computed." if isinstance(e, _OutputPathError) else ""
        print(f"{prog}: error: {_one_line(str(e))}{tail}", file=sys.stderr)
    except ModelError as e:       # the library's word on an argument or the model
        prog = " ".join(filter(None, ("gaussopt", args.command)))
        print(f"{prog}: error: {_one_line(_cli_words(str(e)))}", file=sys.stderr)
    except BrokenPipeError:       # the reader went away (`gaussopt show x | head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())   # no second error when Python flushes stdout
        return 1
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
