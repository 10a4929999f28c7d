"""go.sweep: grids, failed runs, resuming from `out`, local pool and Dask rows alike, CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt.sweep import TIMING_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
GRID = {"psi": [200.0, 330.0, 450.0], "t_end": [0.5]}


def _strip(rows):
    """Rows without the columns that measure time."""
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def counted(psi: float = 450.0, t_end: float = 0.5, fail: bool = False):
    """The four-bar; appends a line to $SWEEP_COUNT per call, raises KeyboardInterrupt
    (a simulated Ctrl-C) when psi equals $SWEEP_INTERRUPT_AT, ValueError when `fail`."""
    from problems import four_bar

    with open(os.environ["SWEEP_COUNT"], "a") as fh:
        fh.write(f"{psi}\n")
    if float(os.environ.get("SWEEP_INTERRUPT_AT", "nan")) == psi:
        raise KeyboardInterrupt
    if fail:
        raise ValueError(f"no four-bar for psi={psi}")
    return four_bar.build(psi=psi, t_end=t_end)


@pytest.fixture
def counter(tmp_path, monkeypatch):
    path = tmp_path / "count.txt"
    path.write_text("")
    monkeypatch.setenv("SWEEP_COUNT", str(path))
    return lambda: len(path.read_text().split())


def test_grid_rows_serial_and_pool_identical(counter):
    serial = go.sweep(counted, GRID, workers=1, progress=False)
    assert counter() == 3
    assert [r["psi"] for r in serial.rows] == GRID["psi"]
    r0 = serial.rows[0]
    assert list(r0)[:8] == ["psi", "t_end", "solver", "success", "message", "wall_time_s",
                            "steps", "t_final"]
    assert r0["success"] and r0["message"] == "" and r0["t_final"] == 0.5
    for col in ("final_th1", "max_err_th1", "max_pos_residual", "max_vel_residual",
                "max_energy_drift"):
        assert np.isfinite(r0[col]), col
    # the final output is the simulation's own last state, and the torque changes it
    assert len({r["final_th1"] for r in serial.rows}) == 3
    pool = go.sweep(counted, GRID, workers=2, progress=False)
    assert counter() == 6
    assert _strip(pool.rows) == _strip(serial.rows)


def test_failed_run_is_a_row_and_the_sweep_goes_on(counter):
    res = go.sweep(counted, [{"psi": 300.0}, {"psi": 310.0, "fail": True}, {"psi": 320.0}],
                   workers=2, progress=False)
    assert [r["success"] for r in res.rows] == [True, False, True]
    assert res.rows[1]["message"] == "ValueError: no four-bar for psi=310.0"
    assert res.rows[1]["fail"] is True and "fail" not in res.rows[0]


def test_unknown_parameter_is_an_error_before_anything_runs(tmp_path, counter):
    with pytest.raises(go.ModelError, match=r"build\(\) of four_bar takes no parameter 'psy'; "
                       r"did you mean 'psi'\? \(parameters: psi, m, l, g, t_end\)"):
        go.sweep("four_bar", {"psi": [1.0, 2.0], "psy": [3.0]}, out=tmp_path / "o")
    with pytest.raises(go.ModelError, match="takes no parameter 'omega'.*parameters: psi, t_end, fail"):
        go.sweep(counted, [{"psi": 1.0}, {"omega": 2.0}])
    assert counter() == 0
    assert not any((tmp_path / "o").rglob("*.json"))


@pytest.mark.parametrize("kw, match", [
    ({"params": 3}, "`params` must be a list of dicts"),
    ({"params": {"psi": []}}, r"`params\['psi'\]` is empty"),
    ({"keep": "all"}, "`keep` must be one of"),
    ({"keep": "trajectories"}, "pass out=DIRECTORY"),
    ({"workers": 0}, "`workers` must be a positive integer"),
    ({"client": 5}, "`client` must be a dask.distributed.Client"),
    ({"settings": [1]}, "`settings` must be a dict"),
    ({"problem": "four_barr"}, "unknown problem 'four_barr'; did you mean 'four_bar'"),
])
def test_argument_errors(kw, match):
    args = {"problem": "four_bar", "params": {"psi": [1.0]}, **kw}
    with pytest.raises(go.ModelError, match=match):
        go.sweep(args.pop("problem"), args.pop("params"), **args)


def test_interrupted_sweep_resumes_computing_only_the_missing_runs(tmp_path, counter,
                                                                   monkeypatch):
    grid = {"psi": [200.0, 250.0, 300.0, 350.0, 400.0, 450.0], "t_end": [0.3]}
    out = tmp_path / "sweep"
    monkeypatch.setenv("SWEEP_INTERRUPT_AT", "350.0")          # Ctrl-C during the 4th run
    with pytest.warns(UserWarning, match="interrupted: 3 of 6 runs"):
        first = go.sweep(counted, grid, out=out, workers=1, progress=False)
    assert first.interrupted and [r["psi"] for r in first.rows] == [200.0, 250.0, 300.0]
    assert len(list((out / "runs").glob("*.json"))) == 3
    calls = counter()
    monkeypatch.delenv("SWEEP_INTERRUPT_AT")
    second = go.sweep(counted, grid, out=out, workers=2, progress=False)
    assert counter() - calls == 3                                 # only the missing runs
    assert (second.computed, second.reused, second.interrupted) == (3, 3, False)
    assert [r["psi"] for r in second.rows] == grid["psi"]
    assert second.rows[:3] == first.rows                         # read back as written
    third = go.sweep(counted, grid, out=out, workers=2, progress=False)
    assert counter() - calls == 3 and third.computed == 0 and third.rows == second.rows
    table = (out / "table.csv").read_text().splitlines()
    assert len(table) == 7 and table[0].startswith("psi,t_end,solver,success")


def test_solver_list_trajectories_and_plot(tmp_path, counter):
    res = go.sweep(counted, {"psi": [300.0, 450.0]}, solver=["closed_form", "lagrange"],
                   keep="trajectories", out=tmp_path, workers=2, progress=False,
                   settings={"rtol": 1e-9, "atol": 1e-9})
    assert [(r["solver"], r["psi"]) for r in res.rows] == [
        ("closed_form", 300.0), ("closed_form", 450.0), ("lagrange", 300.0), ("lagrange", 450.0)]
    tr = res.trajectory(3)
    assert tr.q[-1, 0] == res.rows[3]["final_th1"] and tr.t[-1] == 0.5
    ax = res.plot("psi", "final_th1")
    assert len(ax.lines) == 2                                     # one line per solver
    assert list(ax.lines[0].get_xdata()) == [300.0, 450.0]
    with pytest.raises(go.ModelError, match="`y` must be a column"):
        res.plot("psi", "final_th9")


def test_lambda_builder_and_module_problem(counter):
    from problems import four_bar

    res = go.sweep(lambda psi: counted(psi=psi, t_end=0.2), {"psi": [300.0, 400.0]}, workers=2,
                   progress=False)
    ref = go.sweep(four_bar, {"psi": [300.0, 400.0], "t_end": [0.2]}, workers=1, progress=False)
    assert [r["final_th1"] for r in res.rows] == [r["final_th1"] for r in ref.rows]


def test_to_dataframe(counter):
    pd = pytest.importorskip("pandas")
    res = go.sweep(counted, {"psi": [300.0, 400.0], "t_end": [0.2]}, workers=1, progress=False)
    df = res.to_dataframe()
    assert isinstance(df, pd.DataFrame) and list(df["psi"]) == [300.0, 400.0]


def test_dask_local_cluster_rows_identical_to_local_run(counter, monkeypatch):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    # the worker processes import this gaussopt and this test module
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    local = go.sweep(counted, GRID, workers=2, progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        remote = go.sweep(counted, GRID, client=client, progress=False)
    assert _strip(remote.rows) == _strip(local.rows)
    assert counter() == 6


# ----------------------------------------------------------------------------- command line
def test_cli_sweep_writes_table_and_figures(tmp_path, capsys):
    from gaussopt.cli import main

    out = tmp_path / "sw"
    code = main(["sweep", "four_bar", "--param", "psi=300,450", "--param", "m=10:14:3",
                 "--param", "t_end=0.2", "--workers", "2", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    rows = (out / "table.csv").read_text().splitlines()
    assert len(rows) == 7 and rows[0].startswith("psi,m,t_end,solver")
    assert "| 450 | 14 | 0.2 | closed_form | True |" in (out / "table.md").read_text()
    assert (out / "final_th1_vs_psi.png").stat().st_size > 0
    again = main(["sweep", "four_bar", "--param", "psi=300,450", "--param", "m=10:14:3",
                  "--param", "t_end=0.2", "--workers", "2", "--out", str(out)])
    assert again == 0 and "0 computed, 6 from earlier runs" in capsys.readouterr().out


@pytest.mark.parametrize("argv, match", [
    (["--param", "psy=1,2"], "no parameter 'psy'; did you mean 'psi'"),
    (["--param", "psi"], "--param expects NAME=VALUES"),
    (["--param", "psi=1:2:x"], "start:stop:count"),
    (["--workers", "0"], "--workers must be at least 1"),
])
def test_cli_sweep_usage_errors(tmp_path, capsys, argv, match):
    from gaussopt.cli import main

    assert main(["sweep", "four_bar", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and match in err
    assert not (tmp_path / "o").exists()
