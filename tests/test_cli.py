"""The console script: --version, --help, list, run, compare."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt.cli import main


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
    out = subprocess.run([sys.executable, "-m", "gaussopt.cli", "--version"], capture_output=True,
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
    with pytest.raises(SystemExit, match="unknown problem"):
        main(["run", "no_such_problem"])
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        main(["run", "four_bar", "--param", "psi"])


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
    from problems import four_bar
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

    # the package attribute `gaussopt.compare` is the function, not the module
    compare_mod = importlib.import_module("gaussopt.compare")
    integrate_mod = importlib.import_module("gaussopt.integrate")
    problem_mod = importlib.import_module("gaussopt.problem")

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

    import gaussopt.cli

    def forbidden(**params):
        raise Computed("the problem was built")

    monkeypatch.setattr(gaussopt.cli, "load_problem_module",
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
    import gaussopt.cli

    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(gaussopt.cli.os, "access",       # root may write anywhere: simulate
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
                r"cannot create the directory \(" + re.escape(repr(str(blocker)))
                + " is a file, not a directory\\)")
    assert main(["compare", "four_bar", "--out", str(blocker)]) == 2
    _path_error(capsys, r"--out .*exists and is not a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table"]


def test_compare_out_uncreatable(tmp_path, capsys, monkeypatch, no_build):
    from pathlib import Path as P

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(P, "mkdir", refuse)               # root may create anywhere: simulate
    assert main(["compare", "four_bar", "--out", str(tmp_path / "new")]) == 2
    _path_error(capsys, r"--out .*cannot create the directory \(Permission denied\)")


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


def test_compare_creates_out_directory_before_computing(tmp_path, capsys, no_compute):
    out = tmp_path / "a" / "b" / "c"
    with pytest.raises(Computed, match="a simulation was started"):
        main(["compare", "four_bar", "--solvers", "closed_form", "--out", str(out)])
    assert out.is_dir() and list(out.iterdir()) == []


def test_compare_unknown_problem_creates_no_out_directory(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match="unknown problem 'no_such_problem'"):
        main(["compare", "no_such_problem", "--out", str(out)])
    assert not out.exists()
