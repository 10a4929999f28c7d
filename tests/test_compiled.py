"""How gaussopt's compiled code is compiled, cached and loaded (:mod:`gaussopt.core.compiled`).

* an edit of one module is seen by compiled code of another module that calls into it
  (the cache is keyed on the source of the whole package, not on each function's file);
* a unit is compiled for its declared signature only, whatever its callers pass;
* a compiled caller that reaches a unit nobody loaded loads it and goes on;
* the first compilation in a process says so on stderr, once; a warm process says nothing.
"""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
import gaussopt.core.compiled as C

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, env: dict, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _env(cache, path) -> dict:
    env = dict(os.environ, GAUSSOPT_CACHE_DIR=str(cache), PYTHONPATH=str(path))
    env.pop("GAUSSOPT_QUIET", None)
    return env


def test_an_edit_in_one_module_reaches_compiled_callers_in_another(tmp_path):
    """``engine.projection._distances`` (compiled, engine/projection.py) calls
    ``row_norms`` (gauss/dense_algebra.py). numba alone keys each function's cache on its own
    file: after an edit of dense_algebra.py only, the cached ``_distances`` kept running the
    old ``row_norms`` linked into it. Here the edited copy must give the new result."""
    pkg = tmp_path / "site"
    shutil.copytree(ROOT / "gaussopt", pkg / "gaussopt",
                    ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    code = """
        import numpy as np
        from gaussopt.integrate.engine.projection import _distances
        from gaussopt.core.compiled import code_cache_dir
        print(_distances(np.array([1.0]), np.array([[2.0, 0.0]])), code_cache_dir())
    """
    first = _run(code, _env(cache, pkg), tmp_path)
    assert first.returncode == 0, first.stderr
    d1, dir1 = first.stdout.split()
    assert float(d1) == 0.5                                   # |1| / |(2, 0)|
    again = _run(code, _env(cache, pkg), tmp_path)
    assert again.stdout.split() == [d1, dir1]
    assert "compiling" not in again.stderr                    # (warm: loaded, said nothing)
    kernel = pkg / "gaussopt" / "gauss" / "dense_algebra.py"
    src = kernel.read_text()
    old = "        out[i] = norm2(A[i])"
    assert src.count(old) == 1
    kernel.write_text(src.replace(old, "        out[i] = 2.0 * norm2(A[i])"))
    edited = _run(code, _env(cache, pkg), tmp_path)
    assert edited.returncode == 0, edited.stderr
    d2, dir2 = edited.stdout.split()
    assert float(d2) == 0.25                                  # the edited row norm, 4
    assert dir2 != dir1


def test_first_compilation_says_so_once(tmp_path):
    """A process that compiles prints the notice once on stderr; a warm one prints
    nothing; ``GAUSSOPT_QUIET=1`` silences it."""
    code = """
        import numpy as np, gaussopt.gauss.dense_step as K, gaussopt.gauss.dense_algebra as LA
        import gaussopt.gauss.workspace as WS
        w = K.make_work(3, 2)
        LA.svd_into(np.arange(6.0).reshape(2, 3), w, WS.F_U, WS.F_s, WS.F_V)
        K.reduce_rows(np.arange(6.0).reshape(2, 3), np.ones(2), np.zeros(2), 0.0, 1e-8, True, w)
    """
    cache = tmp_path / "cache"
    cold = _run(code, _env(cache, ROOT), tmp_path)
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr.count("gaussopt: compiling") == 1, cold.stderr
    warm = _run(code, _env(cache, ROOT), tmp_path)
    assert warm.returncode == 0 and warm.stderr == "", warm.stderr
    quiet = _run(code, dict(_env(tmp_path / "other", ROOT), GAUSSOPT_QUIET="1"), tmp_path)
    assert quiet.returncode == 0 and "gaussopt: compiling" not in quiet.stderr


def test_units_are_compiled_for_their_declared_signature_only():
    """After steps, a run and samples of the four-bar (literal and variable flags,
    views of every kind), every unit that was loaded has its declared signature, and the
    four-bar's calls compiled no other version of any unit. (Versions compiled before
    them are left out: a planar model's residual also has a complex version, which
    Python asks for in the complex step of another test, ``test_sparse_step``; with that
    test earlier in the session, comparing the whole list failed.)"""
    from gaussopt_problems import four_bar

    before = {u.name: set(u.dispatcher.overloads) for u in C.units() if u.loaded}
    pb = four_bar.build()
    go.solve_step(pb.system, 0.0, pb.q0, pb.v0)
    go.solve_step(pb.system, 0.0, pb.q0, pb.v0, solver="lagrange")
    go.simulate(pb.system, (0.0, 0.3), pb.q0, pb.v0, t_eval=np.linspace(0.0, 0.3, 7))
    loaded = [u for u in C.units() if u.loaded]
    assert len(loaded) >= 20
    for u in loaded:
        sigs = set(u.dispatcher.overloads)
        declared = tuple(u.signature.args)
        assert declared in sigs, (u.name, sigs)
        assert sigs - before.get(u.name, set()) <= {declared}, (u.name, sigs)


def _probe(module: str):
    """A compiled function of its own (a new one: compiled, never loaded) whose module is
    ``module``."""
    ns = {"__name__": module}
    exec("def probe(x):\n    s = 0.0\n    for i in range(x.shape[0]):\n"
         "        s += x[i] * x[i]\n    return s\n", ns)
    return C.jit(python=True)(ns["probe"])


def test_the_engine_is_compiled_without_loop_unrolling_and_the_kernels_and_users_code_with_it(
        monkeypatch):
    """The pass builder numba uses while it compiles a function of gaussopt turns LLVM's
    loop unrolling off, except for the multibody kernels; numba's own setting (on at -O3)
    holds for any other code, and after a compilation (:func:`gaussopt.core.compiled._tuned`)."""
    from numba.core import codegen as nb_codegen

    seen = []
    wrapped = nb_codegen.CPUCodegen._pass_builder
    assert getattr(wrapped, "_gaussopt", False)

    def spy(self, **kwargs):
        pb = wrapped(self, **kwargs)
        seen.append(bool(pb._pto.loop_unrolling))
        return pb

    monkeypatch.setattr(nb_codegen.CPUCodegen, "_pass_builder", spy)
    x = np.arange(3.0)
    for module, unrolled in (("gaussopt.gauss.probe", False),
                             ("gaussopt.multibody.tree.probe", True), ("users_code", True)):
        seen.clear()
        assert _probe(module)(x) == 5.0
        assert seen and set(seen) == {unrolled}, (module, seen)
    assert C._NO_UNROLL == [False]


def test_a_read_only_or_strided_input_from_python_runs_the_declared_signature():
    import gaussopt.gauss.dense_step as K
    import gaussopt.gauss.workspace as WS

    M = np.diag([1.0, 2.0, 3.0])
    A = np.asfortranarray(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))   # not C-contiguous
    M.setflags(write=False)
    w = K.make_work(3, 2)
    out = K.gauss_step(M, np.ones(3), A, np.zeros(2), np.zeros(2), 0.0, 1e-8, K.CLOSED_FORM,
                       True, True, w)
    assert out[0] == K.OK
    a = WS.field(w, out[1])
    # the minimum of 1/2 a^T M a - a^T F on a1 + a2 = 0, a2 + a3 = 0: a = (s, -s, s),
    # (1 + 2 + 3) s = 1 - 1 + 1
    assert np.allclose(a, [1 / 6, -1 / 6, 1 / 6], rtol=0, atol=1e-15)
    assert list(K.gauss_step.dispatcher.overloads) == [tuple(K.gauss_step.unit.signature.args)]


def test_a_compiled_caller_loads_a_unit_nobody_loaded(tmp_path):
    """The LAPACK path of the SVD is a lazy unit (compiled only for models of at least
    ``LAPACK_MIN`` singular values): a fresh process reaching it from compiled code, with
    nothing loaded ahead, compiles it on the spot and returns the right answer."""
    code = """
        import numpy as np, gaussopt.gauss.dense_step as K, gaussopt.gauss.dense_algebra as LA
        import gaussopt.gauss.workspace as WS
        from gaussopt.core import compiled as C
        X = np.random.default_rng(1).standard_normal((60, 61))
        assert not LA._svd_lapack.unit.loaded
        U, s, V = LA.svd_econ(X)
        print(LA._svd_lapack.unit.loaded, np.abs(s - np.linalg.svd(X)[1]).max() / s[0])
    """
    res = _run(code, _env(tmp_path / "cache", ROOT), tmp_path)
    assert res.returncode == 0, res.stderr
    loaded, err = res.stdout.split()
    assert loaded == "True"
    assert float(err) < 1e-13          # LAPACK's gesdd against numpy's: rounding, ~1e-15


def test_ensure_and_compile_seconds():
    import gaussopt.gauss.dense_step as K

    t = C.ensure(K.gauss_step)
    assert t >= 0.0 and K.gauss_step.unit.loaded and K.decide.unit.loaded
    assert C.compile_seconds() >= 0.0
    with pytest.raises(TypeError, match="units"):
        C.ensure(np.sum)


def test_compile_where_prints_the_versions_directory(tmp_path):
    env = _env(tmp_path / "cache", ROOT)
    res = subprocess.run([sys.executable, "-m", "gaussopt.study.cli", "compile", "--where"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    where = Path(res.stdout.strip())
    assert where.parent == tmp_path / "cache" / "compiled" and where.name == C.source_hash()


def test_compile_unknown_problem_is_refused_before_compiling(tmp_path):
    env = _env(tmp_path / "cache", ROOT)
    res = subprocess.run([sys.executable, "-m", "gaussopt.study.cli", "compile", "four_barr"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "four_bar" in res.stderr, res.stderr   # (did you mean)
    assert "gaussopt: compiling" not in res.stderr
    assert not (tmp_path / "cache" / "compiled").exists() or not any(
        (tmp_path / "cache" / "compiled").rglob("*.nbi"))


@pytest.mark.slow
def test_gaussopt_compile_leaves_nothing_to_compile_for_the_main_job(tmp_path):
    """After ``gaussopt compile four_bar`` in a fresh cache, a process that runs the
    four-bar with every solver of the main job compiles nothing (numba's compile events)
    and prints no notice."""
    env = _env(tmp_path / "cache", ROOT)
    res = subprocess.run([sys.executable, "-m", "gaussopt.study.cli", "compile", "four_bar"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    assert "compiled functions ready" in res.stdout
    code = """
        from numba.core import event
        seen = []
        class L(event.Listener):
            def on_start(self, e):
                seen.append(str(e.data.get("dispatcher")))
            def on_end(self, e):
                pass
        event.register("numba:compile", L())
        import gaussopt_problems.four_bar as fb
        pb = fb.build(t_end=0.3)
        for s in ("closed_form", "lagrange", "qp"):
            assert pb.simulate(solver=s).success
        print(len(seen), seen[:5])
    """
    warm = _run(code, env, tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.startswith("0 "), warm.stdout
    assert "gaussopt: compiling" not in warm.stderr, warm.stderr


def test_python_gets_its_own_version_of_a_function_compiled_for_compiled_callers(tmp_path):
    """Wrappers on demand (:class:`gaussopt.core.compiled._Dispatcher`): a helper first
    compiled while a compiled caller was typed has no version that Python can call (no
    CPython wrapper: it is kept out of the table Python's calls look up, where its entry
    would jump to a wrapper that does not exist). Python's first call compiles that
    version, with the same answers; a new process finds both versions in the cache and
    compiles nothing."""
    mod = tmp_path / "wrapmod.py"
    mod.write_text(textwrap.dedent("""
        from gaussopt.core.compiled import jit

        @jit(cache=True)
        def helper(x):
            return 2.0 * x + 1.0

        @jit(cache=True)
        def caller(x):
            return helper(x) + helper(-x)
    """))
    code = """
        import sys
        from numba.core import event
        seen = []
        class L(event.Listener):
            def on_start(self, e):
                seen.append(e.data["dispatcher"].py_func.__name__)
            def on_end(self, e):
                pass
        event.register("numba:compile", L())
        import wrapmod
        print(wrapmod.caller(1.0))                       # 3 + (-1)
        print(sorted(wrapmod.helper._gaussopt_py or ()))  # helper: compiled callers only
        print(wrapmod.helper(3.0), wrapmod.caller(2.0))
        print(sorted(map(str, wrapmod.helper._gaussopt_py)), sorted(seen))
    """
    env = dict(_env(tmp_path / "cache", ROOT), PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    first = _run(code, env, tmp_path)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[:3] == ["2.0", "[]", "7.0 2.0"], lines
    assert lines[3] == "['(float64,)'] ['caller', 'helper', 'helper']", lines
    warm = _run(code, env, tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.splitlines()[2:] == ["7.0 2.0", "['(float64,)'] []"], warm.stdout


def _script(tmp_path, code: str) -> Path:
    """``code`` as a script in a directory of its own (its directory, not the working
    directory, comes first on ``sys.path``)."""
    d = tmp_path / "script"
    d.mkdir(exist_ok=True)
    path = d / "run.py"
    path.write_text(textwrap.dedent(code))
    return path


def test_the_compile_helper_imports_this_gaussopt_whatever_the_working_directory(tmp_path):
    """The helper process that shares a compilation runs ``python -c``, which puts the
    working directory first on its path: from a directory holding another ``gaussopt``
    (a checkout, or anything of that name) it imported that one, found another source
    hash and quit, and every compilation fell back to one process, silently."""
    bogus = tmp_path / "gaussopt"
    bogus.mkdir()
    (bogus / "__init__.py").write_text("raise ImportError('not the gaussopt under test')\n")
    script = _script(tmp_path, """
        import time
        from gaussopt.core import compiled as C
        import gaussopt.gauss.dense_algebra as LA
        u = LA._svd_lapack.unit
        b = C._Batch()
        b.add([u])
        t0 = time.time()
        while not b.done(u.name) and b.alive() and time.time() - t0 < 600:
            time.sleep(0.05)
        print(b.done(u.name), u.in_cache(), u.loaded)
        b.close(kill=True)
    """)
    res = subprocess.run([sys.executable, str(script)], env=_env(tmp_path / "cache", ROOT),
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "False"], (res.stdout, res.stderr)


def test_a_run_that_reaches_a_unit_the_helper_is_compiling_waits_for_its_copy(tmp_path):
    """A lazy unit handed to the helper (:data:`gaussopt.core.compiled.BACKGROUND`) and
    reached from compiled code while the helper compiles it: this process waits for the
    helper's copy and loads it from the cache (it does not compile it a second time), and
    the answer is right. (The helper's claim is awaited first: no timing involved.)"""
    script = _script(tmp_path, """
        import time
        import numpy as np
        from numba.core import event
        from gaussopt.core import compiled as C
        import gaussopt.gauss.dense_algebra as LA
        seen = []
        class L(event.Listener):
            def on_start(self, e):
                f = getattr(e.data.get("dispatcher"), "py_func", None)
                seen.append(getattr(f, "__qualname__", ""))
            def on_end(self, e):
                pass
        event.register("numba:compile", L())
        X = np.random.default_rng(1).standard_normal((60, 61))
        C.ensure(LA.svd_into, LA._svd_jacobi, LA.svd_complete)
        u = LA._svd_lapack.unit
        b = C._Batch()
        C._ACTIVE[0] = b
        b.add([u])
        t0 = time.time()
        while not (b.dir / u.name).exists() and time.time() - t0 < 600:
            time.sleep(0.01)                         # the helper has claimed it
        U, s, V = LA.svd_econ(X)
        print(b.done(u.name), "_svd_lapack" in seen,
              np.abs(s - np.linalg.svd(X)[1]).max() / s[0])
        b.close(kill=True)
    """)
    env = dict(_env(tmp_path / "cache", ROOT), GAUSSOPT_COMPILE_JOBS="1")   # (our batch only)
    res = subprocess.run([sys.executable, str(script)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    done, compiled_here, err = res.stdout.split()
    assert (done, compiled_here) == ("True", "False"), (res.stdout, res.stderr)
    assert float(err) < 1e-13          # LAPACK's gesdd against numpy's: rounding, ~1e-15


def test_a_model_without_the_o_n_path_loads_none_of_its_units():
    """The O(n) path's entry points (:mod:`gaussopt.gauss.band_step`'s ``band_*``, the
    band's and a tree's steps) are lazy units that the engine's default units call
    through a pointer: a model without the path never loads them (their code, and the
    thirty-six arrays of the band's structure and work, used to be compiled into the
    projection, the rank monitor and the step of every model). A run and a
    ``solve_step`` of a pendulum load none of them; a run of :mod:`test_large_sparse`'s
    chain (240 coordinates, sparse rows: the band) loads the band's, so the listing sees
    them when they are used. A process of its own with the session's cache (the units
    compiled by earlier tests are loaded, not compiled)."""
    code = """
        import numpy as np, gaussopt as go
        from gaussopt.core import compiled as C
        PATH = ("gaussopt.gauss.band_step.", "gaussopt.gauss.model_step._band_step",
                "gaussopt.gauss.model_step._tree_step", "gaussopt.gauss.model_step.path_sigma",
                "gaussopt.gauss.compiled_step._fill_sparse")

        def on_path():
            return sorted(u.name.rpartition(".")[2] for u in C.units()
                          if u.loaded and u.lazy and u.name.startswith(PATH)) or ["-"]

        pend = go.System(("x", "y"), mass=2.0 * np.eye(2), force=[0.0, -19.62],
                         constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 2.25]))])
        tr = go.simulate(pend, (0.0, 0.5), [1.5 * np.sin(1.0), -1.5 * np.cos(1.0)], [0.0, 0.0],
                         t_eval=np.linspace(0.0, 0.5, 11))
        go.solve_step(pend, 0.0, np.array([1.5, 0.0]), np.array([0.0, 1.0]))
        print(tr.success, ",".join(on_path()))
        import test_large_sparse as T              # (its chain of point masses)
        chain = T.chain(T.jac_sparse)
        q0, v0 = T.state()
        tr = go.simulate(chain, (0.0, 0.01), q0, v0)
        print(tr.success, tr.stats["sparse_steps"] > 0, ",".join(on_path()))
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    res = _run(code, env, ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    small, band = res.stdout.split("\n")[:2]
    assert small == "True -", small
    ok, sparse, names = band.split()
    assert ok == "True" and sparse == "True", band
    assert {"band_distances", "_band_step", "sparse_step", "band_smallest_pair"} <= set(
        names.split(",")), names
