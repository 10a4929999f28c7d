"""go.sweep: grids, failed runs, resuming from `out`, local pool and Dask rows alike, CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt.study.sweep import TIMING_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
GRID = {"psi": [200.0, 330.0, 450.0], "t_end": [0.5]}


def _strip(rows):
    """Rows without the columns that measure time."""
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def counted(psi: float = 450.0, t_end: float = 0.5, fail: bool = False):
    """The four-bar; appends a line to $SWEEP_COUNT per call, raises KeyboardInterrupt
    (a simulated Ctrl-C) when psi equals $SWEEP_INTERRUPT_AT, ValueError when `fail`."""
    from gaussopt_problems import four_bar

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
    ({"no_workers_timeout": 0}, "`no_workers_timeout` must be a positive number of seconds"),
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
    from gaussopt_problems import four_bar

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
    from gaussopt.study.cli import main

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
    (["--param", "psi=0:450"], "a range is start:stop:count (e.g. psi=0:450:4"),
    (["--no-workers-timeout", "0"], "--no-workers-timeout must be a positive number"),
    (["--param", "m=0:12:4"], "--param m=0:12:4: `m` of four_bar must be > 0"),
])
def test_cli_sweep_usage_errors(tmp_path, capsys, argv, match):
    from gaussopt.study.cli import main

    assert main(["sweep", "four_bar", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and match in err
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------- faults
def _records(out):
    return {p.stem: json.loads(p.read_text()) for p in (out / "runs").glob("*.json")}


def test_damaged_run_files_are_recomputed_once_told(tmp_path, counter):
    out = tmp_path / "sw"
    grid = {"psi": [300.0, 400.0, 450.0], "t_end": [0.2]}
    first = go.sweep(counted, grid, keep="trajectories", out=out, workers=1, progress=False)
    assert counter() == 3
    recs = _records(out)
    by_psi = {r["row"]["psi"]: (k, r) for k, r in recs.items()}
    assert all(len(r["sha256"]) == 64 and len(r["trajectory_sha256"]) == 64 for r in recs.values())
    # a truncated trajectory, and a row altered after it was written
    key, rec = by_psi[300.0]
    npz = out / "runs" / rec["trajectory"]
    npz.write_bytes(npz.read_bytes()[:200])
    key, rec = by_psi[400.0]
    rec["row"]["final_th1"] = 0.0
    (out / "runs" / f"{key}.json").write_text(json.dumps(rec))
    with pytest.warns(UserWarning, match=r"2 stored runs in .* did not match their checksums "
                                         r"\(a file truncated or altered .*were computed again"):
        second = go.sweep(counted, grid, keep="trajectories", out=out, workers=1, progress=False)
    assert counter() == 5 and (second.computed, second.reused) == (2, 1)
    assert _strip(second.rows) == _strip(first.rows)
    for i, r in enumerate(second.rows):                  # every trajectory loads again
        assert second.trajectory(i).q[-1, 0] == r["final_th1"]
    import warnings

    with warnings.catch_warnings():                      # intact now: nothing told, nothing run
        warnings.simplefilter("error")
        third = go.sweep(counted, grid, keep="trajectories", out=out, workers=1, progress=False)
    assert counter() == 5 and third.reused == 3
    # a record whose trajectory file has gone is computed again too
    (out / "runs" / by_psi[450.0][1]["trajectory"]).unlink()
    with pytest.warns(UserWarning, match=r"1 stored run in .* did not match its checksum"):
        fourth = go.sweep(counted, grid, keep="trajectories", out=out, workers=1, progress=False)
    assert counter() == 6 and fourth.computed == 1


def slow_counted(psi: float = 450.0, t_end: float = 0.2):
    """`counted`, slower (0.3 s more): runs of two sweeps overlap."""
    import time

    time.sleep(0.3)
    return counted(psi=psi, t_end=t_end)


def kill_at(psi: float = 450.0, t_end: float = 0.2):
    """`counted`; the process dies (SIGKILL, nothing cleaned up) when psi is $SWEEP_KILL_AT."""
    import signal

    if float(os.environ.get("SWEEP_KILL_AT", "nan")) == psi:
        os.kill(os.getpid(), signal.SIGKILL)
    return counted(psi=psi, t_end=t_end)


_SCRIPT = """
import json, os, sys, time
import gaussopt as go
import test_sweep
ready = sys.argv[2]
open(os.path.join(ready, str(os.getpid())), "w").close()
while len(os.listdir(ready)) < int(sys.argv[3]):      # start together
    time.sleep(0.01)
res = go.sweep(getattr(test_sweep, sys.argv[4]), json.loads(sys.argv[5]), out=sys.argv[1],
               workers=1, progress=False)
print(json.dumps([res.computed, res.reused, [r["psi"] for r in res.rows]]))
"""


def _sweep_processes(out, n, builder, grid, tmp_path, env=None):
    import subprocess
    import sys

    ready = tmp_path / f"ready-{builder}"
    ready.mkdir()
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    return [subprocess.Popen([sys.executable, "-c", _SCRIPT, str(out), str(ready), str(n),
                              builder, json.dumps(grid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)]


def test_two_sweeps_on_one_out_share_the_work(tmp_path, counter):
    out = tmp_path / "shared"
    grid = {"psi": [150.0, 250.0, 350.0, 450.0], "t_end": [0.2]}
    procs = _sweep_processes(out, 2, "slow_counted", grid, tmp_path)
    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    assert counter() == 4                                  # each run computed once
    assert sorted(r[0] for r in results)[0] >= 1           # by both
    assert sum(r[0] for r in results) == 4
    for computed, reused, psis in results:                 # each returns every row
        assert computed + reused == 4 and psis == grid["psi"]
    table = (out / "table.csv").read_text().splitlines()
    assert len(table) == 5 and sorted(float(r.split(",")[0]) for r in table[1:]) == grid["psi"]
    assert not list((out / "runs").glob("*.claim")) and not list((out / "owners").iterdir())


def test_claims_of_a_killed_sweep_are_taken_over(tmp_path, counter):
    out = tmp_path / "sw"
    grid = {"psi": [200.0, 300.0, 400.0], "t_end": [0.2]}
    (p,) = _sweep_processes(out, 1, "kill_at", grid, tmp_path, env={"SWEEP_KILL_AT": "300.0"})
    p.communicate(timeout=300)
    assert p.returncode == -9                              # killed in its second run
    claims = list((out / "runs").glob("*.claim"))
    assert len(claims) == 1 and json.loads(claims[0].read_text())["pid"] == p.pid
    assert len(_records(out)) == 1
    res = go.sweep(kill_at, grid, out=out, workers=1, progress=False)   # does not wait for it
    assert (res.computed, res.reused) == (2, 1) and [r["success"] for r in res.rows] == [True] * 3
    assert not list((out / "runs").glob("*.claim")) and not list((out / "owners").iterdir())


def test_a_live_claim_is_waited_for(tmp_path, counter):
    # a claim held by a running sweep (another _Store of this process: its own flock) is
    # not computed twice: the sweep takes the row once the claimant records it
    import threading

    import importlib

    S = importlib.import_module("gaussopt.study.sweep")      # (go.sweep is the function)

    out = tmp_path / "sw"
    grid = {"psi": [200.0, 300.0], "t_end": [0.2]}
    S._prepare_out(out)
    other = S._Store(out)
    builder_id = f"{counted.__module__}:{counted.__qualname__}"
    key = S._task_key(builder_id, {"psi": 300.0, "t_end": 0.2}, "closed_form", {})
    task = S._Task(1, key, counted, {"psi": 300.0, "t_end": 0.2}, "closed_form", {}, None)
    assert other.claim(task, "summary") == ("mine", None)

    def finish_later():
        row, _ = S._execute(task)
        other.record(task, builder_id, S._through_json(row), None, None)

    timer = threading.Timer(1.0, finish_later)
    timer.start()
    try:
        res = go.sweep(counted, grid, out=out, workers=1, progress=False)
    finally:
        timer.join()
        other.close()
    assert (res.computed, res.reused) == (1, 1) and counter() == 2
    assert [r["psi"] for r in res.rows] == [200.0, 300.0]


def _kill_workers(cluster, out: Path, after: int, for_good: bool) -> float:
    """SIGKILL every worker process of ``cluster`` once ``after`` runs are recorded in
    ``out``; ``for_good``: their nannies close instead of restarting them. Returns the
    time (monotonic) of the kill."""
    import signal
    import time

    from distributed.core import Status

    while len(list((out / "runs").glob("*.json"))) < after:
        time.sleep(0.05)
    nannies = list(cluster.workers.values())
    if for_good:
        for n in nannies:
            n.status = Status.closing_gracefully
    for n in nannies:
        os.kill(n.pid, signal.SIGKILL)
    return time.monotonic()


@pytest.mark.slow
def test_dask_workers_killed_restarted_or_gone(tmp_path, counter, monkeypatch):
    # workers killed (SIGKILL) while the sweep runs: restarted by their nannies, the
    # sweep finishes every run; gone for good, the sweep stops within no_workers_timeout
    # of losing the last one, keeping every finished row (and its record in `out`)
    pytest.importorskip("distributed")
    import threading
    import time

    from distributed import Client, LocalCluster

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    grid = {"psi": [float(x) for x in range(100, 500, 50)], "t_end": [0.2]}     # 8 runs
    killed = {}

    def killer(name, **kw):
        t = threading.Thread(target=lambda: killed.setdefault(name, _kill_workers(**kw)),
                             daemon=True)
        t.start()
        return t

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        out = tmp_path / "restarted"
        k = killer("restarted", cluster=cluster, out=out, after=2, for_good=False)
        res = go.sweep(slow_counted, grid, client=client, out=out, progress=False)
        k.join(timeout=5)
        assert "restarted" in killed and not res.interrupted
        assert [r["psi"] for r in res.rows] == grid["psi"]
        assert all(r["success"] for r in res.rows), [r["message"] for r in res.rows]

        out = tmp_path / "gone"
        grid["psi"] = [p + 25.0 for p in grid["psi"]]
        k = killer("gone", cluster=cluster, out=out, after=2, for_good=True)
        with pytest.warns(UserWarning, match=r"sweep stopped: the Dask cluster has had no "
                                             r"workers for .* s \(no_workers_timeout=2\); "
                                             r"\d of 8 runs finished"):
            res = go.sweep(slow_counted, grid, client=client, out=out, progress=False,
                           no_workers_timeout=2.0)
        stopped = time.monotonic()
        k.join(timeout=5)
    # 2 s without workers, plus the scheduler's notice of the deaths and one look (1 s)
    assert stopped - killed["gone"] < 2.0 + 10.0
    assert res.interrupted and "no workers" in res.stopped
    finished = [r for r in res.rows if r["success"]]
    assert 2 <= len(finished) < 8 and len(res.rows) < 8
    assert {r["psi"] for r in finished} == {rec["row"]["psi"] for rec in _records(out).values()}
    assert not list((out / "runs").glob("*.claim"))
