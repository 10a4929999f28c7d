"""Runs under faults (issue 21, section 2): tolerances below machine precision, a run that
outgrows its memory budget, Ctrl-C twice, a progress callback that raises, damaged or
forged trajectory files, and the messages of bad arguments and of a mass matrix that
turns indefinite mid-run. Each either gives the right answer, or ends with
``success=False`` keeping what was computed, or raises a specific error before anything
runs."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.exceptions import GaussoptError, ToleranceWarning, TrajectoryFileError
from gaussopt.integrate.guards import MemoryBudget
from gaussopt.integrate.validation import MIN_RTOL

G = 9.81
EPS = np.finfo(float).eps


def pendulum(mass=None):
    """Unit pendulum in Cartesian coordinates (the README's), released horizontally."""
    return go.System(("x", "y"), mass=np.eye(2) if mass is None else mass, force=[0.0, -G],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]), name="rod")],
                     energy=lambda t, q, v: 0.5 * v @ v + G * q[1])


Q0, V0 = [1.0, 0.0], [0.0, 0.0]


# --------------------------------------------------------------------------- tolerances
@pytest.mark.parametrize("method,kw", [("DOP853", {}), ("RK45", {}), ("rk4", {"dt": 1e-3})])
def test_tolerance_below_machine_precision_is_raised_with_a_warning(method, kw):
    with pytest.warns(ToleranceWarning, match=r"`rtol` = 1e-30 .* raised to 100 \* eps"):
        tr = go.simulate(pendulum(), (0.0, 0.1), Q0, V0, method=method, rtol=1e-30,
                         atol=1e-30, **kw)
    assert tr.success, tr.message
    assert tr.meta["rtol"] == MIN_RTOL == 100 * EPS
    # the run did finish at a bounded cost: DOP853/RK45 at rtol = 2.2e-14 over 0.1 s of a
    # unit pendulum take tens to hundreds of steps (a run stuck near t = 0 would stop at
    # max_steps, not here)
    assert tr.t[-1] == 0.1 and tr.stats["steps"] < 5000
    # and it is accurate: energy conserved to the tolerance's order (1e-14 relative on an
    # energy scale of G = 9.81 J, times the few hundred steps' accumulation: 1e-10), rk4 at
    # dt = 1e-3 to its own truncation error (h^4 ~ 1e-12 per unit time, times G)
    drift = np.abs(tr.energy - tr.energy[0]).max()
    assert drift < (1e-9 if method == "rk4" else 1e-10), drift


def test_tolerance_is_validated_before_the_run():
    with pytest.raises(go.ModelError, match=r"`rtol` must be a real number, found '1e-9' "
                                            r"\(str\); pass a number such as 1e-9"):
        go.simulate(pendulum(), (0.0, 0.1), Q0, V0, rtol="1e-9")
    with pytest.raises(go.ModelError, match=r"`atol` must be positive, found -1\.0"):
        go.simulate(pendulum(), (0.0, 0.1), Q0, V0, atol=-1.0)
    with pytest.raises(go.ModelError, match=r"`atol` must be a real number, found True"):
        go.simulate(pendulum(), (0.0, 0.1), Q0, V0, atol=True)


# --------------------------------------------------------------------------- messages
@pytest.mark.parametrize("kw,match", [
    (dict(max_steps=-1), r"`max_steps` must be an integer >= 1, found -1\."),
    (dict(max_steps=0), r"`max_steps` must be an integer >= 1, found 0\."),
    (dict(max_steps=2.5), r"`max_steps` must be an integer >= 1, found 2\.5 \(float\)"),
    (dict(consistency_tol=-1), r"`consistency_tol` must be positive, found -1\.0; "
                               r"a distance the initial state may be off the constraints"),
    (dict(consistency_tol=float("nan")), r"`consistency_tol` must be positive, found nan"),
    (dict(max_memory=-1), r"`max_memory` must be positive \(inf allowed\), found -1"),
    (dict(max_memory="1GB"), r"`max_memory` must be a real number, found '1GB'"),
    (dict(progress=3), r"`progress` must be None or a callable progress\(t\), found 3"),
    (dict(dt="1e-3"), r"`dt` must be positive \(used as first step\), found '1e-3' \(str\)"),
    (dict(t_eval=np.linspace(0.0, 0.1, 10**6), max_memory=1e6),
     r"`t_eval` has 1000000 times: their samples would take about \d+ MB, more than "
     r"max_memory=1e\+06 bytes"),
], ids=["max_steps -1", "max_steps 0", "max_steps float", "consistency_tol -1",
        "consistency_tol nan", "max_memory -1", "max_memory str", "progress", "dt str",
        "t_eval over budget"])
def test_simulate_rejects_bad_arguments(kw, match):
    with pytest.raises(go.ModelError, match=match):
        go.simulate(pendulum(), (0.0, 0.1), Q0, V0, **kw)


@pytest.mark.parametrize("t,match", [
    (np.array([0.0, 1.0]), r"`t` must be one time \(a float\), found an array of shape \(2,\); "
                           r"for many states at once use gaussopt\.solve_steps"),
    ("0.5", r"`t` must be one time \(a float\), found '0\.5'"),
    (float("nan"), r"`t` must be finite, found nan"),
], ids=["array", "str", "nan"])
def test_solve_step_time_errors(t, match):
    with pytest.raises(go.ModelError, match=match):
        go.solve_step(pendulum(), t, Q0, V0)


PROBLEMS = ["pendulum", "four_bar", "double_parallelogram", "n_four_bar", "slider_crank",
            "sleigh", "second_order_particle", "appell_hamel", "ellipse_rolling"]


@pytest.mark.parametrize("name", PROBLEMS)
@pytest.mark.parametrize("t_end", [-1, 0.0, float("nan")], ids=["-1", "0", "nan"])
def test_problem_build_rejects_bad_t_end(name, t_end):
    mod = importlib.import_module(f"gaussopt_problems.{name}")
    with pytest.raises(go.ModelError, match=r"`t_end` must be"):
        mod.build(t_end=t_end)


def test_output_grid():
    from gaussopt.study.problem import output_grid

    g = output_grid(1.0, 0.01)
    assert g.size == 101 and g[0] == 0.0 and g[-1] == 1.0
    assert output_grid(0.001, 0.01).tolist() == [0.0, 0.001]      # at least one interval
    with pytest.raises(go.ModelError, match=r"`t_end` must be a finite number greater than "
                                            r"t0 = 0 \[s\], found -1; pass e\.g\. t_end=5\.0"):
        output_grid(-1, 0.01)


def test_mass_turning_indefinite_mid_run_gets_the_specific_message():
    # M = diag(1, 1 - 4 t): positive definite at t = 0, indefinite from t = 0.25 on
    sysm = pendulum(mass=lambda t, q: np.diag([1.0, 1.0 - 4.0 * t]))
    tr = go.simulate(sysm, (0.0, 1.0), Q0, V0)
    assert not tr.success
    assert "must be positive semi-definite; its smallest eigenvalue is" in tr.message, tr.message
    assert "non-finite data" not in tr.message
    # what was computed is kept: the run up to the failure. (Gauss's step needs M positive
    # on the null space of the constraint rows only, the reduced Hessian, which stays
    # positive a little beyond t = 0.25 while the rod has a y component: the step fails,
    # and the run stops, within 0.05 s after that)
    assert len(tr.t) > 1 and 0.2 < tr.t[-1] < 0.3, tr.t[-1]
    assert isinstance(tr.exception, go.ModelError)
    # the same matrix at t = 0 gets the same words, before anything runs
    bad0 = pendulum(mass=lambda t, q: np.diag([1.0, -1.0]))
    with pytest.raises(go.ModelError, match=r"must be positive semi-definite; its smallest "
                                            r"eigenvalue is -1"):
        go.simulate(bad0, (0.0, 1.0), Q0, V0)


# --------------------------------------------------------------------------- memory
def test_a_collapsed_step_size_says_whether_the_motion_became_singular():
    """An adaptive run whose step size collapses says what the accelerations do there. A
    particle pulled by ``1 / (1 - x)^2`` from rest at 0 reaches ``x = 1`` in finite time
    (``t = pi / (2 sqrt 2) = 1.1107``) with its acceleration unbounded: the message names the
    coordinate and the growth over the start's acceleration (1), and says the forces become
    singular; the run keeps what it computed up to there."""
    pull = go.System(("x",), mass=np.eye(1),
                     force=lambda t, q, v: np.array([1.0 / (1.0 - q[0]) ** 2]))
    tr = go.simulate(pull, (0.0, 5.0), [0.0], [0.0])
    assert not tr.success
    assert "Required step size is less than spacing" in tr.message
    assert "largest on 'x'" in tr.message and "become singular there" in tr.message
    # (the collapse is within rounding of the singular time, where the acceleration's
    # size is beyond 1e3 times the start's by far)
    assert abs(tr.t[-1] - np.pi / (2 * np.sqrt(2))) < 1e-6
    assert tr.q[-1, 0] > 0.99


def test_run_outgrowing_its_memory_budget_stops_and_keeps_its_data():
    budget = 1e6
    tr = go.simulate(pendulum(), (0.0, 1000.0), Q0, V0, method="rk4", dt=1e-3,
                     max_memory=budget)
    assert not tr.success and tr.status == -1
    assert "max_memory=1e+06 bytes" in tr.message and "max_steps=" in tr.message, tr.message
    est = MemoryBudget(budget, 2, 1)
    # what was kept: every sample up to where it stopped, within the budget, on the
    # constraint (projection to rounding: 1e-15 on a unit length, x 10 for |q|^2)
    N = len(tr.t)
    assert 1000 < N and N * est.sample <= budget
    assert tr.t[-1] == pytest.approx((N - 1) * 1e-3, rel=1e-12)
    assert np.all(np.diff(tr.t) > 0) and np.all(np.isfinite(tr.a))
    assert tr.position_residual.max() < 1e-13


def test_rank_events_are_bounded_by_the_budget():
    from gaussopt_problems import four_bar

    # l = 0.01: the crank turns ~1.8e5 times a second, two passages per turn; without a
    # bound the rank events alone grew the process by 5 MB/s
    p = four_bar.build(l=0.01, t_end=10.0)
    budget = 5e6
    tr = p.simulate(max_memory=budget)
    assert not tr.success and "max_memory=5e+06 bytes" in tr.message, tr.message
    est = MemoryBudget(budget, 3, 2)
    k = len(tr.rank_events)
    assert 1000 < k and len(tr.t) * est.sample + k * est.event <= budget
    assert tr.t[-1] < 10.0 and all(e.t <= tr.t[-1] + 0.01 for e in tr.rank_events)


def test_memory_budget_bounds_what_python_allocates():
    from gaussopt_problems import four_bar

    # tracemalloc sees numpy's buffers and the Python objects: the run's peak stays within
    # the budget plus a fixed overhead (the model, the compiled records: < 2 MB measured).
    # A compiled model (no Python per step: tracemalloc would trace every callback), an
    # output sample per step and two rank events per crank turn
    p = four_bar.build(l=0.05, t_end=100.0)
    budget = 8e6
    p.simulate(t_span=(0.0, 0.01), t_eval=None)                    # (compiled and loaded)
    tracemalloc.start()
    try:
        tr = p.simulate(t_eval=None, max_memory=budget)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not tr.success and "max_memory" in tr.message, tr.message
    assert len(tr.rank_events) > 1000 and len(tr.t) > 1000
    assert peak < budget + 4e6, peak


def test_dense_output_counts_against_the_budget():
    tr = go.simulate(pendulum(), (0.0, 1000.0), Q0, V0, method="rk4", dt=1e-3,
                     dense_output=True, max_memory=2e6)
    assert not tr.success and "dense-output steps" in tr.message, tr.message
    # the dense solution covers what was computed
    t_mid = 0.5 * tr.t[-1]
    q, v = tr.sol(t_mid)
    assert abs(q @ q - 1.0) < 1e-12


# --------------------------------------------------------------------------- callbacks, Ctrl-C
def test_progress_callback_that_raises_returns_the_partial_run():
    seen = []

    def progress(t):
        seen.append(t)
        if t > 0.05:
            raise ValueError("progress bar closed")

    tr = go.simulate(pendulum(), (0.0, 1.0), Q0, V0, progress=progress)
    assert not tr.success and tr.status == -1
    assert tr.message.startswith("The `progress` callback raised ValueError at t=")
    assert "progress bar closed" in tr.message and "test_faults.py" in tr.message
    assert isinstance(tr.exception, ValueError)
    assert tr.t[-1] == seen[-1] > 0.05 and len(tr.t) == len(seen) + 1
    assert np.all(np.isfinite(tr.a))


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
def test_ctrl_c_inside_the_models_code_stops_the_run_cleanly():
    # a Ctrl-C that arrives while the engine is in the model's Python code (here: sent
    # from it) is recorded and the run stops at the next chunk: no KeyboardInterrupt is
    # raised inside the callback the compiled engine made (it could be swallowed there)
    sent = []

    def force(t, q, v):
        if t > 0.1 and not sent:
            sent.append(t)
            os.kill(os.getpid(), signal.SIGINT)
        return np.array([0.0, -G])

    sysm = go.System(("x", "y"), mass=np.eye(2), force=force,
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
    tr = go.simulate(sysm, (0.0, 100.0), Q0, V0, method="rk4", dt=1e-3)
    assert not tr.success and tr.message.startswith("Interrupted (KeyboardInterrupt) at t=")
    assert isinstance(tr.exception, KeyboardInterrupt)
    # within a chunk (~20 ms of wall time, well under 100 s of simulated time) of the
    # interrupt, and every kept sample is a proper one
    assert sent and sent[0] <= tr.t[-1] < 100.0
    assert np.all(np.isfinite(tr.a)) and tr.position_residual.max() < 1e-12
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # (restored)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
@pytest.mark.parametrize("mode", ["chunks", "progress"])
def test_second_ctrl_c_keeps_the_partial_run(tmp_path, monkeypatch, mode):
    """A first Ctrl-C stops a long run; a second one, while the partial result is
    assembled, is deferred and the partial run is kept (and saved). Both are sent from
    inside the run -- the first from the model's code once the run is under way, the
    second when the result's assembly starts -- with ``signal.raise_signal`` (delivered
    to this thread before it returns; its Python handler runs at the next bytecode), so
    where they arrive in the run is the same on any machine, busy or not. (They were sent
    from a parent process 10-30 ms apart: on a loaded machine the second one could arrive
    after the run had returned, in the script's own ``save``.)"""
    from gaussopt.integrate import smooth_run

    sent = []

    def phi(t, q):
        if not sent and np.real(t) > 0.05:
            sent.append(float(np.real(t)))
            signal.raise_signal(signal.SIGINT)
        return np.array([q @ q - 1.0])

    postprocess = smooth_run.postprocess
    assembled = []

    def second_ctrl_c(*args, **kw):
        if sent and not assembled:
            assembled.append(1)
            signal.raise_signal(signal.SIGINT)           # the second Ctrl-C: deferred
        return postprocess(*args, **kw)

    monkeypatch.setattr(smooth_run, "postprocess", second_ctrl_c)
    pend = go.System(("x", "y"), mass=np.eye(2), force=[0.0, -G],
                     constraints=[go.Holonomic(phi)])
    kw = dict(method="rk4", dt=1e-4)
    if mode == "progress":
        kw["progress"] = lambda t: None
    tr = go.simulate(pend, (0.0, 1e4), [1.0, 0.0], [0.0, 0.0], **kw)
    assert sent and assembled
    assert not tr.success and tr.message.startswith("Interrupted (KeyboardInterrupt) at t=")
    assert isinstance(tr.exception, KeyboardInterrupt)
    assert tr.meta["deferred_interrupts"] >= 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # (restored)
    back = go.load(tr.save(tmp_path / "partial.npz"))
    assert not back.success and back.message.startswith("Interrupted")
    # (what the run kept: its samples up to the chunk boundary where it stopped)
    assert len(back) == len(tr) >= 2 and np.all(np.diff(back.t) > 0)
    np.testing.assert_array_equal(back.q, tr.q)
    assert back.position_residual.max() < 1e-12


# --------------------------------------------------------------------------- files
@pytest.fixture(scope="module")
def saved_run():
    return go.simulate(pendulum(), (0.0, 0.1), Q0, V0, method="rk4", dt=0.01)


def _entries(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _write(path, entries):
    np.savez_compressed(path, **entries)


def _npy_header(shape, descr="<f8"):
    from numpy.lib import format as npf
    import io

    buf = io.BytesIO()
    npf.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_load_refuses_a_claimed_shape_before_allocating(tmp_path, saved_run):
    good = saved_run.save(tmp_path / "good.npz")
    bad = tmp_path / "bad.npz"
    entries = _entries(good)
    with zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, x in entries.items():
            if k == "q":     # a header claiming 10^12 x 2 floats, 16 bytes of data
                zf.writestr("q.npy", _npy_header((10**12, 2)) + b"\0" * 16)
            else:
                with zf.open(f"{k}.npy", "w") as fh:
                    np.lib.format.write_array(fh, x, allow_pickle=False)
    with pytest.raises(TrajectoryFileError, match=r"bad\.npz': the file is damaged: entry `q` "
                       r"declares shape \(1000000000000, 2\) of float64 \(16000000000000 bytes\) "
                       r"but the archive stores 16 bytes") as info:
        go.load(bad)
    assert isinstance(info.value, ValueError) and isinstance(info.value, GaussoptError)
    assert info.value.field == "q" and info.value.path == str(bad)


def test_load_refuses_a_zip_bomb_before_allocating(tmp_path, saved_run):
    # every entry consistent with the header (N samples), all zeros: 400 MB from a file
    # of 0.4 MB (deflate's ratio on zeros is about 1000)
    header = _entries(saved_run.save(tmp_path / "good.npz"))["__header__"]
    N = 3 * 2**20
    bomb = tmp_path / "bomb.npz"
    shapes = {"t": (N,), "q": (N, 2), "v": (N, 2), "a": (N, 2), "constraint_force": (N, 2),
              "multipliers": (N, 1), "position_residual": (N,), "velocity_residual": (N,),
              "acceleration_residual": (N,), "energy": (N,), "sigma_min": (N,), "rank": (N,)}
    chunk = bytes(2**20)
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("__header__.npy", "w") as fh:
            np.lib.format.write_array(fh, header)
        for k, shape in shapes.items():
            descr = "<i8" if k == "rank" else "<f8"
            nbytes = int(np.prod(shape)) * 8
            with zf.open(f"{k}.npy", "w", force_zip64=True) as fh:
                fh.write(_npy_header(shape, descr))
                for _ in range(nbytes // len(chunk)):
                    fh.write(chunk)
    assert bomb.stat().st_size < 1e6
    tracemalloc.start()
    try:
        with pytest.raises(TrajectoryFileError, match=r"bomb\.npz': its entries would expand to "
                           r"4\d\d\.\d+ MB from a file of 0\.\d+ MB .*more than 100 times the "
                           r"file's size"):
            go.load(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5e6, peak                  # nothing was allocated for the arrays


@pytest.mark.parametrize("case,change,match", [
    ("decreasing t", lambda e: e.__setitem__("t", e["t"][::-1].copy()),
     r"array `t` must be increasing, but t\[1\] = 0\.09\d* <= t\[0\] = 0\.1"),
    ("NaN t", lambda e: e["t"].__setitem__(3, np.nan), r"array `t` has NaN or inf at index 3"),
    ("NaN q", lambda e: e["q"].__setitem__((4, 1), np.nan),
     r"array `q` has NaN or inf \(row 4\); the states of a run are finite"),
    ("inf v", lambda e: e["v"].__setitem__((2, 0), np.inf), r"array `v` has NaN or inf \(row 2\)"),
    ("float32 q", lambda e: e.__setitem__("q", e["q"].astype(np.float32)),
     r"array `q` must be float64 \(as Trajectory\.save writes it\), found dtype float32"),
    ("float32 t", lambda e: e.__setitem__("t", e["t"].astype(np.float32)),
     r"array `t` must be float64"),
    ("int q", lambda e: e.__setitem__("q", e["q"].astype(np.int64)),
     r"array `q` must be float64 .*found dtype int64"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_load_checks_values_and_dtypes(tmp_path, saved_run, case, change, match):
    good = saved_run.save(tmp_path / "good.npz")
    entries = _entries(good)
    change(entries)
    bad = tmp_path / "bad.npz"
    _write(bad, entries)
    with pytest.raises(TrajectoryFileError, match=r"bad\.npz': " + match):
        go.load(bad)


def test_load_still_reads_a_good_file_and_a_partial_run(tmp_path, saved_run):
    back = go.load(saved_run.save(tmp_path / "good.npz"))
    assert np.array_equal(back.t, saved_run.t) and np.array_equal(back.q, saved_run.q)
    # a run stopped by its budget saves and loads like any other
    part = go.simulate(pendulum(), (0.0, 1000.0), Q0, V0, method="rk4", dt=1e-3,
                       max_memory=1e6)
    back = go.load(part.save(tmp_path / "part.npz"))
    assert not back.success and "max_memory" in back.message and len(back) == len(part)
    header = json.loads(str(_entries(tmp_path / "part.npz")["__header__"]))
    assert header["status"] == -1
