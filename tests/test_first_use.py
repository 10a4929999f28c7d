"""What gaussopt reports on first use: run times never include compiling or loading
compiled code, whichever solver runs first."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, cache) -> str:
    env = dict(os.environ, GAUSSOPT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


@pytest.mark.slow
def test_first_run_in_a_fresh_cache_reports_the_run_not_the_compilation(tmp_path):
    """The first run compiles the engine (seconds); its wall time is the run's. The bound:
    both runs do the same work (the same steps, bit for bit), so their wall times differ
    by the machine's noise; a factor 3 leaves room for a busy machine, and compilation
    (over 100 times the run) cannot hide in it."""
    out = _python("""
        import gaussopt as go
        from gaussopt_problems import four_bar
        pb = four_bar.build(t_end=5.0)
        a = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **pb.settings)
        b = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **pb.settings)
        print(a.stats["wall_time"], b.stats["wall_time"], a.stats["compile_time"],
              b.stats["compile_time"], a.stats["steps"] == b.stats["steps"])
    """, tmp_path / "cache")
    w1, w2, c1, c2, same = out.split()
    w1, w2, c1, c2 = float(w1), float(w2), float(c1), float(c2)
    assert same == "True"
    assert c1 > 30 * max(w1, w2)         # it did compile (a fresh cache), and said so
    assert c2 < c1
    assert w1 <= 3 * w2 and w2 <= 3 * w1, (w1, w2)


def test_loading_compiled_code_is_never_a_runs_time():
    """A comparison in a new process (the compiled code in the cache): the solver that runs
    first used to pay for loading the compiled code (~0.5 s, 10-40 times its run). Here
    loading is made slow on purpose -- 0.2 s of sleep in every unit that loads -- and
    each run's reported wall time plus the sleeps inside the run must fit in the time the
    call took (disjoint parts of one interval: no threshold on the machine's speed, so a
    busy machine cannot fail it). Had the sleeps been counted as the run's, the sum would
    exceed the call by their total. Both orders of the solvers, and the first run of each
    order did load units (else the check proves nothing). The processes share the test
    session's compile cache: a new process loads every unit it uses whatever the cache
    holds, so a fresh cache (which would compile the engine again, ~2 min of a 2-core
    machine) adds nothing to the check."""
    from gaussopt.core.compiled import cache_dir
    cache = cache_dir()
    code = """
        import time
        import gaussopt as go
        from gaussopt.core import compiled as C
        from gaussopt_problems import four_bar
        slept = [0.0]
        load = C.Unit.load
        def slow_load(self):
            if not self.loaded:
                time.sleep(0.2)
                slept[0] += 0.2
            return load(self)
        C.Unit.load = slow_load
        pb = four_bar.build(t_end=0.5)
        for solver in {solvers}:
            s0, c0 = slept[0], time.perf_counter()
            tr = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, solver=solver)
            took = time.perf_counter() - c0
            print(solver, repr(tr.stats["wall_time"]), repr(slept[0] - s0), repr(took))
    """
    _python(code.format(solvers=["closed_form"]), cache)          # (the cache is filled)
    for order in (["closed_form", "lagrange", "qp"], ["qp", "lagrange", "closed_form"]):
        rows = [line.split() for line in _python(code.format(solvers=order), cache).splitlines()
                if line.split() and line.split()[0] in order]
        assert [r[0] for r in rows] == order
        assert float(rows[0][2]) > 0                  # the first run loaded units
        for solver, wall, slept, took in rows:
            wall, slept, took = float(wall), float(slept), float(took)
            assert 0 < wall and wall + slept <= took * (1 + 1e-9), (solver, wall, slept, took)


def test_output_samples_are_the_runs_even_if_the_model_changes_afterwards():
    """Every column of the output samples is computed by simulate: a model whose Python
    functions read a global that the user rebinds afterwards (one name reused down a
    script or notebook: ``l = sympy.Symbol("l")`` after a numeric pendulum) keeps the
    run's accelerations. (Computing the columns when first read would have evaluated
    the rebound functions.)"""
    ns = {"np": np, "go": go, "l": 1.5}
    exec(textwrap.dedent("""
        pend = go.System(coordinates=("x", "y"), mass=2.0 * np.eye(2), force=[0.0, -19.62],
                         constraints=[go.Holonomic(lambda t, q: np.array([q @ q - l**2]))])
        tr = go.simulate(pend, (0.0, 0.5), [1.5 * np.sin(1.0), -1.5 * np.cos(1.0)],
                         [0.0, 0.0], t_eval=np.linspace(0.0, 0.5, 26))
    """), ns)
    tr = ns["tr"]
    a = tr.a.copy()
    ns["l"] = 1.0e3                                       # rebound after the run
    assert np.array_equal(tr.a, a) and np.all(np.isfinite(a)) and tr.success
