"""The console script: --version, --help, list, run, compare."""

import subprocess
import sys

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
    assert tr.t[-1] == pytest.approx(0.7)
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
    errs = np.genfromtxt(tmp_path / "table.csv", delimiter=",", names=True, dtype=None,
                         encoding=None)["max_err_th1"]
    assert np.all(errs < 1e-8)
