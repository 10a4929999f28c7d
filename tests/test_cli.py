"""The console script: --version, --help, list, run, compare."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt.study.cli import main


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert go.__version__ in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "compare" in out and "run" in out and "list" in out


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "gaussopt.study.cli", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == f"gaussopt {go.__version__}"


def test_list_shows_four_bar(capsys):
    assert main(["list"]) == 0
    assert "four_bar" in capsys.readouterr().out


def test_run_four_bar_short_saves_and_plots(tmp_path, capsys):
    npz, png = tmp_path / "fb.npz", tmp_path / "fb.png"
    code = main(["run", "four_bar", "--t-end", "0.7", "--save", str(npz), "--plot", str(png)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "rank event" in out and "passage" in out     # th1 crosses pi/2 at t = 0.580 s
    tr = go.load(npz)
    assert tr.t[-1] == pytest.approx(0.7, rel=np.finfo(float).eps)   # the run ends at t_end
    assert png.stat().st_size > 10_000


def test_run_with_param_and_unknown_problem(capsys):
    assert main(["run", "four_bar", "--t-end", "0.2", "--param", "psi=0", "--solver",
                 "lagrange"]) == 0
    capsys.readouterr()
    assert main(["run", "no_such_problem"]) == 2
    assert "unknown problem 'no_such_problem'" in capsys.readouterr().err
    assert main(["run", "four_bar", "--param", "psi"]) == 2
    assert "--param expects NAME=VALUE, found 'psi'" in capsys.readouterr().err


def test_compare_writes_table(tmp_path, capsys):
    code = main(["compare", "four_bar", "--solvers", "closed_form,lagrange", "--param",
                 "t_end=0.3", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "| closed_form |" in out and "| lagrange |" in out
    for f in ("table.csv", "table.md", "four_bar_closed_form.npz", "four_bar_compare.png"):
        assert (tmp_path / f).exists(), f
    table = np.genfromtxt(tmp_path / "table.csv", delimiter=",", names=True, dtype=None,
                          encoding=None)
    # each solver's run against the reduced reference: integration_bound of the saved run
    # with the growth of the exact (th1, th1') flow over 0.3 s and the reference's error
    # (the direct solvers' step errors, ~1e-13, are far below it)
    from gaussopt_problems import four_bar
    from test_trajectory import flow_growth, integration_bound

    for solver, err in zip(table["solver"], table["max_err_th1"]):
        tr = go.load(tmp_path / f"four_bar_{solver}.npz")
        growth = flow_growth(lambda y, ts: np.asarray(four_bar.reference(ts, th0=y[0], w0=y[1])),
                             [np.pi / 3, 0.0], tr.t)
        assert err < integration_bound(tr, growth, ref_tol=1e-13), solver


# --------------------------------------------------------------------------- output paths
class Computed(AssertionError):
    """Raised by the patched entry points: something was computed."""


@pytest.fixture
def no_compute(monkeypatch):
    """Every way the CLI could run a simulation raises Computed."""
    import importlib

    # (the attribute `gaussopt.compare` is the function, not the module)
    compare_mod = importlib.import_module("gaussopt.study.compare")
    integrate_mod = importlib.import_module("gaussopt.integrate.ivp")
    problem_mod = importlib.import_module("gaussopt.study.problem")

    def forbidden(*args, **kwargs):
        raise Computed("a simulation was started")

    monkeypatch.setattr(go, "simulate", forbidden)
    monkeypatch.setattr(go, "compare", forbidden)
    monkeypatch.setattr(integrate_mod, "simulate", forbidden)
    monkeypatch.setattr(compare_mod, "compare", forbidden)
    monkeypatch.setattr(problem_mod.Problem, "simulate", forbidden)


@pytest.fixture
def no_build(monkeypatch, no_compute):
    """Not even the problem is built (its module may be imported)."""
    import types

    import gaussopt.study.cli

    def forbidden(**params):
        raise Computed("the problem was built")

    monkeypatch.setattr(gaussopt.study.cli, "load_problem_module",
                        lambda name: types.SimpleNamespace(build=forbidden))


def _path_error(capsys, *patterns):
    """The one-line message on stderr, matching every pattern; nothing on stdout."""
    cap = capsys.readouterr()
    assert cap.out == ""
    err = cap.err
    assert err.count("\n") == 1 and err.startswith("gaussopt "), err
    for p in patterns:
        assert re.search(p, err), (p, err)
    assert "nothing was computed" in err
    return err


def test_run_save_into_missing_directory(tmp_path, capsys, no_build):
    target = tmp_path / "missing" / "x.npz"
    assert main(["run", "four_bar", "--save", str(target)]) == 2
    _path_error(capsys, r"^gaussopt run: error: --save " + re.escape(repr(str(target))),
                r"the directory " + re.escape(repr(str(tmp_path / "missing"))) + " does not exist")
    assert list(tmp_path.iterdir()) == []


def test_run_save_suffix_is_npz_or_none(tmp_path, capsys, no_build):
    # fb.csv would have been written as fb.csv.npz: refused before anything is built
    assert main(["run", "four_bar", "--save", str(tmp_path / "fb.csv")]) == 2
    _path_error(capsys, r"not \.csv; give a name ending in \.npz")
    assert list(tmp_path.iterdir()) == []
    # .npz or no suffix (.npz appended) get as far as building
    for name in ("fb.npz", "fb"):
        with pytest.raises(Computed, match="the problem was built"):
            main(["run", "four_bar", "--save", str(tmp_path / name)])


def test_out_of_range_param_fails_before_building(capsys, monkeypatch, no_compute):
    from gaussopt_problems import four_bar

    def forbidden(**params):
        raise Computed("the problem was built")

    forbidden.__doc__ = four_bar.build.__doc__           # the same documented parameters
    monkeypatch.setattr(four_bar, "build", forbidden)
    assert main(["run", "four_bar", "--param", "m=0"]) == 2
    assert "`m` of four_bar must be > 0" in capsys.readouterr().err
    with pytest.raises(Computed):                       # inside the range: it goes on
        main(["run", "four_bar", "--param", "m=0.5"])
    assert main(["run", "n_four_bar", "--param", "N=0"]) == 2
    assert "`N` of n_four_bar must be >= 1" in capsys.readouterr().err


def test_show_prints_documented_ranges(capsys):
    assert main(["show", "four_bar"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  m(?: \[kg\])?  \(float, default 12; > 0\)", out, re.M), out


def test_run_save_onto_directory(tmp_path, capsys, no_build):
    assert main(["run", "four_bar", "--save", str(tmp_path)]) == 2
    _path_error(capsys, r"--save " + re.escape(repr(str(tmp_path))), "is a directory")
    (tmp_path / "d.npz").mkdir()             # --save d writes d.npz, which is a directory
    assert main(["run", "four_bar", "--save", str(tmp_path / "d")]) == 2
    _path_error(capsys, re.escape(repr(str(tmp_path / "d.npz"))) + " is a directory")


def test_run_plot_under_a_file(tmp_path, capsys, no_build):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a directory")
    target = blocker / "sub" / "fig.png"
    assert main(["run", "four_bar", "--t-end", "0.1", "--plot", str(target)]) == 2
    _path_error(capsys, r"--plot " + re.escape(repr(str(target))),
                re.escape(repr(str(blocker))) + " is a file, not a directory")
    assert blocker.read_text() == "a file, not a directory"


def test_run_plot_unknown_format_and_directory(tmp_path, capsys, no_build):
    assert main(["run", "four_bar", "--plot", str(tmp_path / "fig.xyz")]) == 2
    _path_error(capsys, r"--plot .*unsupported figure format 'xyz' \(supported: .*png")
    assert main(["run", "four_bar", "--plot", str(tmp_path)]) == 2
    _path_error(capsys, r"--plot .*is a directory")
    # good --save, bad --plot: the error is still reported before computing
    assert main(["run", "four_bar", "--save", str(tmp_path / "ok.npz"), "--plot",
                 str(tmp_path / "no" / "fig.png")]) == 2
    _path_error(capsys, r"--plot .*does not exist")
    assert list(tmp_path.iterdir()) == []


def test_run_save_into_unwritable_directory(tmp_path, capsys, monkeypatch, no_build):
    import gaussopt.study.cli

    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(gaussopt.study.cli.os, "access",       # root may write anywhere: simulate
                        lambda p, mode, **kw: False if Path(p) == locked
                        else real_access(p, mode, **kw))
    assert main(["run", "four_bar", "--save", str(locked / "x.npz")]) == 2
    _path_error(capsys, r"--save .*the directory " + re.escape(repr(str(locked)))
                + " is not writable")


def test_compare_out_under_a_file(tmp_path, capsys, no_build):
    blocker = tmp_path / "table"
    blocker.write_text("x")
    out = blocker / "results" / "deep"
    assert main(["compare", "four_bar", "--out", str(out)]) == 2
    _path_error(capsys, r"^gaussopt compare: error: --out " + re.escape(repr(str(out))),
                re.escape(repr(str(blocker))) + " is a file, not a directory")
    assert main(["compare", "four_bar", "--out", str(blocker)]) == 2
    _path_error(capsys, r"--out .*exists and is not a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table"]


def test_compare_out_uncreatable(tmp_path, capsys, monkeypatch, no_compute):
    from pathlib import Path as P

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(P, "mkdir", refuse)               # root may create anywhere: simulate
    assert main(["compare", "four_bar", "--solvers", "closed_form", "--out",
                 str(tmp_path / "new")]) == 2
    _path_error(capsys, r"--out .*cannot create the directory \(Permission denied\)")


def test_compare_out_parent_unwritable(tmp_path, capsys, monkeypatch, no_build):
    import gaussopt.study.cli

    real_access = os.access
    monkeypatch.setattr(gaussopt.study.cli.os, "access",       # root may write anywhere: simulate
                        lambda p, mode, **kw: False if Path(p) == tmp_path
                        else real_access(p, mode, **kw))
    assert main(["compare", "four_bar", "--out", str(tmp_path / "new")]) == 2
    _path_error(capsys, r"--out .*cannot create the directory: " + re.escape(repr(str(tmp_path)))
                + " is not writable")
    assert not (tmp_path / "new").exists()


def test_compare_out_file_is_a_directory(tmp_path, capsys, no_compute):
    (tmp_path / "table.csv").mkdir()
    assert main(["compare", "four_bar", "--solvers", "closed_form", "--out", str(tmp_path)]) == 2
    _path_error(capsys, r"--out .*" + re.escape(repr(str(tmp_path / "table.csv")))
                + " is a directory")
    (tmp_path / "table.csv").rmdir()
    (tmp_path / "four_bar_lagrange.npz").mkdir()
    assert main(["compare", "four_bar", "--solvers", "closed_form,lagrange", "--out",
                 str(tmp_path)]) == 2
    _path_error(capsys, re.escape("four_bar_lagrange.npz'") + " is a directory")


def test_compare_creates_only_the_last_level_of_out(tmp_path, capsys, no_compute):
    out = tmp_path / "a" / "b" / "c"                      # a/b missing: an error, nothing made
    assert main(["compare", "four_bar", "--solvers", "closed_form", "--out", str(out)]) == 2
    _path_error(capsys, r"--out .*the directory " + re.escape(repr(str(out.parent)))
                + " does not exist; create it first")
    assert list(tmp_path.iterdir()) == []
    out = tmp_path / "c"                                  # the last level is created, then computed
    with pytest.raises(Computed, match="a simulation was started"):
        main(["compare", "four_bar", "--solvers", "closed_form", "--out", str(out)])
    assert out.is_dir() and list(out.iterdir()) == []


def test_compare_unknown_problem_creates_no_out_directory(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compare", "no_such_problem", "--out", str(out)]) == 2
    assert "unknown problem 'no_such_problem'" in capsys.readouterr().err
    assert not out.exists()


# --------------------------------------------------------------------------- usage mistakes
# Each mistake -> exit code 2 and one line on stderr that says what to do (the patterns).
MISTAKES = {
    "solver-case": (["run", "four_bar", "--solver", "QP"],
                    [r"unknown solver 'QP'; did you mean 'qp'\?", "lagrange_baumgarte"]),
    "param-choice": (["run", "ellipse_rolling", "--param", "case=case9"],
                     [r"--param case=case9: `case` must be one of circle, case1, .*case5",
                      "gaussopt show ellipse_rolling"]),
    "param-type": (["run", "four_bar", "--param", "psi=abc"],
                   [r"`psi` must be a number, found 'abc'"]),
    "t-end-negative": (["run", "four_bar", "--t-end", "-1"],
                       [r"--t-end: must be a positive number, found '-1'", "--help"]),
    "t-end-zero": (["run", "four_bar", "--t-end", "0"], [r"--t-end: must be a positive number"]),
    "rtol-zero": (["run", "four_bar", "--rtol", "0"], [r"--rtol: must be a positive number"]),
    "rk4-without-dt": (["run", "four_bar", "--method", "rk4"],
                       [r"--dt must be a positive step for --method rk4"]),
    "param-invalid-model": (["run", "slider_crank", "--param", "L=0.2"],
                            [r"slider_crank with L=0.2: the rod must be longer than the crank",
                             "gaussopt show slider_crank"]),
    # the range build() documents (m : float, > 0) is checked before anything is built
    "param-out-of-range": (["run", "four_bar", "--param", "m=0"],
                           [r"--param m=0: `m` of four_bar must be > 0 \(the range its build\(\) "
                            r"documents\), found 0.0", "gaussopt show four_bar"]),
    "save-suffix": (["run", "four_bar", "--save", "{tmp}/fb.csv"],
                    [r"--save '.*fb.csv': a trajectory is written as an .npz archive, not "
                     r"\.csv; give a name ending in \.npz \(e\.g\. '.*fb\.npz'\)",
                     "nothing was computed"]),
    "compare-solvers": (["compare", "four_bar", "--solvers", "xyz", "--out", "{tmp}/out"],
                        [r"^gaussopt compare: error: --solvers: unknown solver 'xyz'",
                         r"solvers of four_bar: closed_form, lagrange, qp, ga"]),
    "plot-extension": (["run", "four_bar", "--plot", "{tmp}/x.svgx"],
                       [r"unsupported figure format 'svgx' \(supported: .*svg"]),
    "module-file": (["run", "{tmp}/nosuch.py"],
                    [r"no file '.*nosuch.py'; give a problem name"]),
    "param-unknown": (["run", "four_bar", "--param", "foo=1"],
                      [r"--param foo=1: no parameter 'foo' \(parameters: psi, m, l, g, t_end\)"]),
    "param-near-miss": (["run", "four_bar", "--param", "pis=1"], [r"did you mean 'psi'\?"]),
    "problem-near-miss": (["run", "four_bra"],
                          [r"unknown problem 'four_bra'; did you mean 'four_bar'\?"]),
    "show-near-miss": (["show", "pendulm"], [r"^gaussopt show: .*did you mean 'pendulum'\?"]),
    "method-choice": (["run", "four_bar", "--method", "dop853"],
                      [r"invalid choice: 'dop853'.*did you mean 'DOP853'\?"]),
    "command-near-miss": (["rnu", "four_bar"], [r"^gaussopt: error: .*did you mean 'run'\?"]),
    "missing-problem": (["compare"], [r"required: problem"]),
    "out-parent-missing": (["compare", "four_bar", "--out", "{tmp}/no/out"],
                           [r"does not exist; create it first"]),
}


@pytest.mark.parametrize("argv, patterns", list(MISTAKES.values()), ids=list(MISTAKES))
def test_usage_mistake_is_one_line_and_exit_code_2(argv, patterns, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.count("\n") == 1 and cap.err.endswith("\n"), cap.err
    assert cap.err.startswith("gaussopt") and "Traceback" not in cap.err
    for p in patterns:
        assert re.search(p, cap.err), (p, cap.err)
    assert list(tmp_path.iterdir()) == []                # nothing written


def test_usage_mistake_from_the_console_script(tmp_path):
    # the real process: exit status 2, no traceback, one line
    out = subprocess.run([sys.executable, "-m", "gaussopt.study.cli", "run", "four_bar", "--param",
                          "foo=1"], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert "no parameter 'foo'" in out.stderr


def test_output_into_a_closed_pipe_is_not_a_traceback(monkeypatch, capsys):
    # `gaussopt show four_bar | head -1`: the reader has gone when the output is written
    r, w = os.pipe()
    os.close(r)
    with open(w, "w", buffering=1) as pipe:              # line-buffered: the first line fails
        monkeypatch.setattr(sys, "stdout", pipe)
        assert main(["show", "four_bar"]) == 1           # quietly, no BrokenPipeError raised
        monkeypatch.undo()
    assert capsys.readouterr().err == ""


def test_internal_error_keeps_its_traceback(monkeypatch):
    # a bug (not a usage mistake) is not swallowed into a one-line message
    import types

    import gaussopt.study.cli

    def build(**params):
        return 1 / 0

    monkeypatch.setattr(gaussopt.study.cli, "load_problem_module",
                        lambda name: types.SimpleNamespace(build=build))
    with pytest.raises(ZeroDivisionError):
        main(["run", "four_bar"])


# --------------------------------------------------------------------------- show, --help
def test_show_describes_parameters_outputs_and_settings(capsys):
    from gaussopt_problems import ellipse_rolling

    assert main(["show", "ellipse_rolling"]) == 0
    out = capsys.readouterr().out
    pb = ellipse_rolling.build()
    assert " ".join(pb.description.split()[:8]) in " ".join(out.split())
    assert re.search(r"^  case  \(str, default 'circle'; one of circle, case1, case2, case3, "
                     r"case4, case5\)", out, re.M)
    assert re.search(r"^  unilateral  \(bool, default False\)", out, re.M)
    assert re.search(r"^  a  \(float, default the case's\)\n +Semi-axes .*\[m\]", out, re.M)
    # the outputs with their units (SI, stated by the problem) and a * for a reference
    assert re.search(r"^outputs.*\n  xc \[m\]\*, yc \[m\]\*, theta \[rad\]\*, "
                     r"omega \[rad/s\]\*, normal_force \[N\]\*", out, re.M)
    assert re.search(r"^  rtol: 1e-11$", out, re.M) and "solvers (the rows of compare)" in out
    # --param applies to show as to run: the settings of the problem so built
    assert main(["show", "ellipse_rolling", "--param", "t_end=3.5"]) == 0
    assert re.search(r"^  t_span: \(0, 3.5\) s$", capsys.readouterr().out, re.M)


def _problem_modules():
    import importlib
    import pkgutil

    import gaussopt_problems

    return [importlib.import_module(f"gaussopt_problems.{m.name}")
            for m in pkgutil.iter_modules(gaussopt_problems.__path__) if not m.name.startswith("_")]


@pytest.mark.parametrize("mod", _problem_modules(), ids=lambda m: m.__name__.split(".")[-1])
def test_every_build_parameter_is_documented_with_unit_or_values(mod):
    from gaussopt.study.problem import BuildSignature

    sig = BuildSignature.of(mod.build, getattr(mod, "DEFAULTS", None))
    assert not sig.open and sig.parameters
    for p in sig.parameters.values():
        assert p.doc, f"{p.name} of {mod.__name__}.build() is not documented"
        if p.kind == "float":        # a physical quantity: its unit in brackets
            assert re.search(r"\[[^\]]+\]", p.doc), f"{p.name}: no unit [..]: {p.doc!r}"


def test_help_of_run_and_compare_documents_the_options(capsys):
    for command in ("run", "compare"):
        with pytest.raises(SystemExit) as e:
            main([command, "--help"])
        assert e.value.code == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "--param NAME=VALUE a keyword of the problem's build()" in out
        assert "--dt DT fixed step [s] of --method rk4 or euler" in out
        assert "--rtol RTOL relative tolerance" in out
        assert "--t-end T end time [s]" in out


def test_no_internal_words_leak(capsys):
    assert main(["list"]) == 0
    listing = capsys.readouterr().out
    assert "BRIEF" not in listing and "four_bar" in listing
    root = Path(__file__).parents[1]
    files = [root / "README.md", *(root / "problems").glob("*.py"),
             *(root / "gaussopt").rglob("*.py")]
    leaks = [str(f.relative_to(root)) for f in files if "BRIEF" in f.read_text()]
    assert leaks == []


def test_param_values_are_converted_by_the_signature():
    from gaussopt.study.problem import BuildSignature
    from gaussopt_problems import ellipse_rolling, n_four_bar, sleigh

    sig = BuildSignature.of(ellipse_rolling.build)
    assert sig.parse("unilateral", "true") is True
    assert sig.parse("dt", "None") is None and sig.parse("dt", "0.01") == 0.01
    assert sig.parse("a", "2") == 2.0 and isinstance(sig.parse("a", "2"), float)
    assert sig.parse("baumgarte", "paper") == "paper"
    assert BuildSignature.of(n_four_bar.build).parse("N", "3") == 3
    with pytest.raises(go.ModelError, match="`N` must be an integer, found '2.5'"):
        BuildSignature.of(n_four_bar.build).parse("N", "2.5")
    with pytest.raises(go.ModelError, match="`formulation` must be one of gauss"):
        BuildSignature.of(sleigh.build, sleigh.DEFAULTS).parse("formulation", "routh_tan")


def test_compare_exits_1_when_a_run_did_not_succeed(tmp_path, capsys, monkeypatch):
    """Every row is still written (the computed part of a failed run too); the exit
    code and one line on stderr per failed row tell a script what went wrong."""
    C = sys.modules["gaussopt.study.compare"]          # (gaussopt.study.compare is also the function)
    real = C.compare

    def one_fails(*args, **kwargs):
        comp = real(*args, **kwargs)
        tr = comp.trajectories["lagrange"]
        tr.status, tr.message = -1, "the step size collapsed at t=0.1"
        return comp

    monkeypatch.setattr(C, "compare", one_fails)
    code = main(["compare", "four_bar", "--solvers", "closed_form,lagrange", "--param",
                 "t_end=0.2", "--out", str(tmp_path)])
    cap = capsys.readouterr()
    assert code == 1
    assert cap.err == "gaussopt compare: the lagrange run did not succeed: the step size collapsed at t=0.1\n"
    for f in ("table.csv", "four_bar_closed_form.npz", "four_bar_lagrange.npz"):
        assert (tmp_path / f).exists(), f
