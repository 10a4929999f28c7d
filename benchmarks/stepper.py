"""The stepping interface (``go.Stepper``) against MuJoCo's ``mj_step``, and ``go.solve_step``'s
cost over the compiled step it calls.

Run: ``python3 benchmarks/stepper.py [--repeat N] [--root PATH]`` (``--root`` imports
gaussopt from another checkout, e.g. the main branch, for a before/after of the
``solve_step`` rows; the ``Stepper`` rows need a gaussopt that has it). MuJoCo is
optional (``pip install ".[bench]"``): without it its rows print ``n/a``.

Rows, all on paper 001's four-bar (``gaussopt_problems.four_bar``: psi = 450 N m, from
``th1 = pi/3`` at rest) unless said:

* **per-call overhead of** ``Stepper.step()``: 1000 calls of ``step()`` less one call of
  ``step(nstep=1000)`` (the same 1000 compiled steps without Python between them), per
  call; with ``ctrl`` held (``step(450.0)``: the value is written, the step is not
  refreshed) and with ``ctrl`` changing every step (the accelerations at the state are
  computed again: one more evaluation of the step, a compiled cost);
* **1000 fixed steps at dt = 1 ms, a control loop in Python**: ``stepper.step(psi)``
  and ``th1`` read after every step, against ``data.ctrl[0] = psi; mujoco.mj_step(model,
  data)`` and ``data.qpos[0]`` read after every step on the same four-bar in MJCF
  (:func:`peers.mujoco_xml`: hinges, an equality ``connect`` closing the loop, a motor on
  the crank), with MuJoCo's default integrator (semi-implicit Euler) and its RK4. The
  accuracy of each is the largest ``|th1 - th1_ref|`` over the second against the reduced
  equation integrated by scipy at 1e-13 (:func:`gaussopt_problems.four_bar.reference`);
* **the loop it replaces**: ``go.simulate`` of one 1 ms span per call, with the four-bar's
  published settings (DOP853, rtol 1e-11, the projection) and with rk4 at dt = 1 ms;
* **solve_step over the compiled step**: ``go.solve_step(system, t, q, v).a`` (a
  StepResult, its accelerations read) against the compiled step it calls
  (``gaussopt.gauss.compiled_step.solve_at`` through its compiled function, no Python
  around it) and against the step inside a run (``evaluate_step`` in a compiled loop: no
  call from Python at all), on the four-bar and on the 6-link arm of
  ``tests/data/arm6.urdf`` as the loader gives it (joint coordinates: n = 6, m = 0).

Times are the process's CPU time (``time.process_time``), the minimum over ``--repeat``
batches, one BLAS thread: the machine this is measured on is shared, and CPU time and
minima are what other processes disturb least (wall times are printed too). Compilation
is never in a timed batch (every path is called once before).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

ROWS: list = []


def _interleaved(fns: dict, repeat: int, timer=time.process_time) -> dict:
    """``{name: minimum seconds per call}`` of ``fns = {name: (fn, number)}``, the batches
    of the functions interleaved (each repeat times every function once), so that all of
    them meet the same minutes of a shared machine."""
    best = {k: np.inf for k in fns}
    for _ in range(repeat):
        for k, (fn, number) in fns.items():
            t0 = timer()
            for _ in range(number):
                fn()
            best[k] = min(best[k], (timer() - t0) / number)
    return best


def _min_of(fn, repeat: int, timer=time.process_time) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = timer()
        fn()
        best = min(best, timer() - t0)
    return best


def row(measure, ours, peer, peer_val, unit="us", ours_acc=None, peer_acc=None, note=""):
    ratio = ours / peer_val if (ours is not None and peer_val) else None
    ROWS.append((measure, ours, ours_acc, peer, peer_val, peer_acc, ratio, unit, note))
    f = (lambda x, s=".3g": "n/a" if x is None else format(x, s))
    print(f"  {measure}: {f(ours)} {unit} (acc {f(ours_acc, '.1e')}) | {peer} {f(peer_val)} "
          f"{unit} (acc {f(peer_acc, '.1e')}) | ratio {f(ratio, '.2f')} {note}", flush=True)


# ----------------------------------------------------------------------------- the stepper
def stepper_rows(go, four_bar, peers, repeat: int) -> None:
    if not hasattr(go, "Stepper"):
        print("  (this gaussopt has no Stepper: its rows are skipped)")
        return
    pb = four_bar.build()
    sysm, q0, v0 = pb.system, pb.q0, pb.v0
    dt, N = 1e-3, 1000
    st = go.Stepper(sysm, q0, v0, dt=dt, inputs=("psi",))

    def loop():
        st.reset(q0, v0)
        step = st.step
        for _ in range(N):
            step()

    def chunk():
        st.reset(q0, v0)
        st.step(nstep=N)

    def loop_held():
        st.reset(q0, v0)
        step = st.step
        for _ in range(N):
            step(450.0)

    psis = 450.0 + 50.0 * np.sin(np.arange(N) * dt * 2 * np.pi * 5.0)

    def loop_changing():
        st.reset(q0, v0)
        step = st.step
        for p in psis:
            step(p)
        st.step(450.0)            # (back to the model's value for the next loop)

    def reset_only():
        st.reset(q0, v0)

    for f in (loop, chunk, loop_held, loop_changing):
        f()
    best = {f.__name__: np.inf for f in (loop, chunk, loop_held, loop_changing, reset_only)}
    # (the overhead is the difference of two minima of ~12 ms batches: many batches, for
    # minima that other processes did not disturb)
    for _ in range(4 * repeat):                   # interleaved: the same minutes for each
        for f in (loop, chunk, loop_held, loop_changing, reset_only):
            t0 = time.process_time()
            f()
            best[f.__name__] = min(best[f.__name__], time.process_time() - t0)
    base = best["reset_only"]
    compiled = (best["chunk"] - base) / N * 1e6
    over = (best["loop"] - best["chunk"]) / N * 1e6
    held = (best["loop_held"] - best["chunk"]) / N * 1e6
    changing = (best["loop_changing"] - best["chunk"]) / N * 1e6
    row("Stepper.step(): per-call overhead over the compiled step (four-bar rk4)", over,
        "the compiled step itself (step(nstep=1000) / 1000)", compiled, note="target <= 5 us")
    row("Stepper.step(ctrl) held: per-call overhead", held, "the compiled step itself",
        compiled)
    row("Stepper.step(ctrl) changing every step: overhead incl. the refreshed accelerations",
        changing, "the compiled step itself", compiled)

    # 1000 fixed steps, a control loop in Python, against MuJoCo's
    ref = four_bar.reference(np.arange(1, N + 1) * dt)[0]
    th = np.empty(N)

    def ours(method, **options):
        s = go.Stepper(sysm, q0, v0, dt=dt, method=method, inputs=("psi",), **options)

        def run():
            s.reset(q0, v0)
            step, q = s.step, s.q
            for k in range(N):
                step(450.0)
                th[k] = q[0]
        run()
        return run, float(np.max(np.abs(th - ref)))

    def theirs(integrator):
        import mujoco

        model = mujoco.MjModel.from_xml_string(peers.mujoco_xml(dt, integrator))
        data = mujoco.MjData(model)
        qpos0, _ = peers.joint_state(np.pi / 3, 0.0)

        def run():
            mujoco.mj_resetData(model, data)
            data.qpos[:] = qpos0
            step, ctrl, qpos = mujoco.mj_step, data.ctrl, data.qpos
            for k in range(N):
                ctrl[0] = 450.0
                step(model, data)
                th[k] = qpos[0]
        run()
        return run, float(np.max(np.abs(th - ref)))

    runs, accs = {}, {}
    for key, make, args, kw in (("rk4", ours, ("rk4",), {}), ("euler", ours, ("euler",), {}),
                                ("euler, monitor_rank=False", ours, ("euler",),
                                 {"monitor_rank": False}),
                                ("RK4", theirs, ("RK4",), {}), ("Euler", theirs, ("Euler",), {})):
        try:
            runs[key], accs[key] = make(*args, **kw)
        except ImportError:                       # (MuJoCo missing)
            pass
    cpu = _interleaved({k: (f, 1) for k, f in runs.items()}, repeat)
    wall = _interleaved({k: (f, 1) for k, f in runs.items()}, repeat, time.perf_counter)
    for method, integrator in (("rk4", "RK4"), ("rk4", "Euler"), ("euler", "Euler"),
                               ("euler, monitor_rank=False", "Euler")):
        row(f"1000 steps of 1 ms, control loop: Stepper {method} (CPU)", cpu[method] * 1e3,
            f"MuJoCo mj_step {integrator}", cpu.get(integrator, np.nan) * 1e3, "ms",
            accs[method], accs.get(integrator), note="target ratio <= 2")
        row(f"  the same, wall time (Stepper {method})", wall[method] * 1e3,
            f"MuJoCo mj_step {integrator}", wall.get(integrator, np.nan) * 1e3, "ms")

    # the loop it replaces: simulate over one step per call
    def sim_loop(k, **kw):
        def run():
            q, v, t = q0, v0, 0.0
            for _ in range(k):
                tr = go.simulate(sysm, (t, t + dt), q, v, **kw)
                q, v, t = tr.q[-1], tr.v[-1], tr.t[-1]
        run()
        return _min_of(run, max(2, repeat // 3)) / k * 1e3

    settings = {key: val for key, val in pb.settings.items() if key != "t_eval"}
    row("go.simulate over one 1 ms span per call, published settings (DOP853 1e-11)",
        sim_loop(100, **settings), "Stepper.step() (rk4, 1 ms)",
        (best["loop"] - base) / N * 1e3, "ms")
    row("go.simulate over one 1 ms span per call, rk4 dt 1 ms", sim_loop(100, method="rk4",
                                                                          dt=dt),
        "Stepper.step() (rk4, 1 ms)", (best["loop"] - base) / N * 1e3, "ms")


# ----------------------------------------------------------------------------- solve_step
def _in_engine_us(go, solver, q, v, repeat) -> float:
    """The step inside a run: ``evaluate_step`` in a compiled loop (as benchmarks/run.py)."""
    import numba as nb

    import gaussopt.core.records as R
    import gaussopt.integrate.engine as E
    from gaussopt.core.model_interface import functions

    ctx = solver._context()

    @nb.njit(cache=True)
    def loop(addrs, md, buf, opt, ref, sref, q, v, w, count):
        fns, accel = functions(addrs)
        a = np.empty(q.shape[0])
        acc = 0.0
        for _ in range(count):
            E.evaluate_step(fns, accel, md, buf, opt, ref, sref, 0.0, q, v, a, False, w)
            acc += a[0]
        return acc

    mf = ctx[1]
    oi = np.zeros(R.N_OI, dtype=np.int64)
    of = np.zeros(R.N_OF)
    of[E.F_RANKTOL] = solver.rank_tol
    args = (mf.addrs, E.pack(E.model_data(mf, solver.system)), E.pack(E.buffers(mf)),
            E.pack(E.Options(oi, of)), np.zeros(ctx[6]), np.zeros(1), q, v, ctx[7])
    loop(*args, 10)
    count = 2000
    best = np.inf
    for _ in range(repeat):
        t0 = time.process_time()
        loop(*args, count)
        best = min(best, time.process_time() - t0)
    return best / count * 1e6


def solve_step_rows(go, four_bar, repeat: int) -> None:
    cases = [("four-bar", four_bar.system(), np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3]),
              np.array([1.3, 1.3, -1.3]))]
    root = Path(go.__file__).resolve().parents[1]
    try:
        import gaussopt.multibody.io.mjcf as mjcf

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = mjcf.load(root / "tests" / "data" / "arm6.urdf")
        import mujoco

        m = mujoco.MjModel.from_xml_path(str(root / "tests" / "data" / "arm6.urdf"))
        rng = np.random.default_rng(11)
        q, v = mjcf.state_from_mujoco(model, m, rng.uniform(-np.pi, np.pi, 6),
                                      rng.uniform(-2.0, 2.0, 6))
        cases.append((f"6-link arm (n {model.system.n}, m {model.m})", model.system, q, v))
    except ImportError:
        print("  (MuJoCo missing: the spatial arm's row is skipped)")
    for label, sysm, q, v in cases:
        go.solve_step(sysm, 0.0, q, v)
        go.solve_step(sysm, 0.0, q, v)
        solver = sysm._solver_cache["closed_form"]
        ctx = solver._context()
        handle, zero_ref = ctx[0], ctx[4]
        ref = solver.row_ref if solver.row_ref is not None else zero_ref
        call = solver._entry
        number = 5000 if sysm.n < 10 else 500
        best = _interleaved({"full": (lambda: go.solve_step(sysm, 0.0, q, v).a, number),
                             "comp": (lambda: call(handle, ref, 0.0, q, v, True), number)},
                            3 * repeat)
        full, comp = best["full"] * 1e6, best["comp"] * 1e6
        engine = _in_engine_us(go, solver, q, v, repeat)
        row(f"{label}: go.solve_step(...).a", full,
            "the compiled step called from Python (solve_at)", comp,
            note=f"overhead {full - comp:.2f} us")
        row(f"{label}: go.solve_step(...).a", full, "the step inside a run (compiled loop)", engine,
            note=f"overhead {full - engine:.2f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--root", type=str, default=str(HERE.parent),
                    help="the checkout whose gaussopt is measured (default: this one)")
    ap.add_argument("--only", choices=("stepper", "solve_step"))
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    sys.path.insert(1, str(HERE))
    import gaussopt as go
    import peers
    from gaussopt_problems import four_bar

    print(f"gaussopt from {Path(go.__file__).resolve().parent}", flush=True)
    with peers._blas1():
        if args.only != "solve_step":
            stepper_rows(go, four_bar, peers, args.repeat)
        if args.only != "stepper":
            solve_step_rows(go, four_bar, args.repeat)
    print("\n| measure | gaussopt | accuracy | peer | peer | peer accuracy | ratio | note |")
    print("|---|---|---|---|---|---|---|---|")
    f = (lambda x, s=".3g": "n/a" if x is None else format(x, s))
    for measure, ours, oacc, peer, pval, pacc, ratio, unit, note in ROWS:
        print(f"| {measure} | {f(ours)} {unit} | {f(oacc, '.1e')} | {peer} | {f(pval)} {unit} | "
              f"{f(pacc, '.1e')} | {f(ratio, '.2f')} | {note} |")
    print("\naccuracy: max |th1 - th1_ref| (rad) over the 1000 steps against the reduced "
          "equation (scipy DOP853, 1e-13). Times: CPU time, minimum of the batches.")


if __name__ == "__main__":
    main()
