"""The QP step at scale against the closed form: the issue's 2000-coordinate chain.

Run: ``python3 benchmarks/qp_scale.py [--N 1000 250] [--later 5] [--four-bar]``.

The model (as ``tests/test_large_sparse.py``): a planar chain of N point masses hanging
from the origin, n = 2N coordinates, N distance constraints with an explicit
``scipy.sparse`` Jacobian, diagonal mass; N = 1000 is the issue's case. For each N and
each solver (``"closed_form"``, ``"qp"``) a fresh Python process builds the system and
times its first ``go.solve_step`` (wall time: the system's check, the solver's
construction and any compiled code loaded from numba's cache are part of it, as for a
user) and ``--later`` later calls at other states (same pattern): the smallest CPU time
of the process over them (``time.process_time``: on a machine shared with other work,
wall times of millisecond calls scatter by several times; the minimum of the process's
own CPU time does not). Memory is the
process's peak resident set during the first call over its resident set just before it
(``ru_maxrss`` against ``/proc/self/statm``: Clarabel's Rust allocations count too,
which ``tracemalloc`` would not see). The last columns are the QP's relative difference
from the closed form, ``max |a_qp - a_cf| / max |a_cf|`` (0 on the sparse path, whose
polish is the band closed form), and Clarabel's own answer's before the polish
(``info["backend_deviation"]``, the largest over the calls; nan on the dense path).

``--four-bar`` adds the QP's step inside a run on paper 001's four-bar (the problem's
own settings, 5 s, as ``gaussopt compare four_bar``): the run's time per step with
``"closed_form"`` and ``"qp"``, the right-hand sides per step, and where the QP run's
time goes (``cProfile`` of a second run: Clarabel's ``solve``, its ``update``, the
compiled calls around it, the rest of the Python callback; the profiler's own overhead
inflates the Python parts, so the shares are indicative, the run times are measured
without it).

BLAS is limited to one thread, as ``go.simulate`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, os, resource, sys, time
import numpy as np, scipy.sparse as sp
sys.path.insert(0, ROOT)
import gaussopt as go

N, solver, later = NN, SOLVER, LATER
n = 2 * N
L, MASS, G = 0.05, 0.01, 9.81

def rel(x):
    P = x.reshape(N, 2)
    D = P.copy()
    D[1:] -= P[:-1]
    return D

def phi(t, q):
    D = rel(q)
    return (D * D).sum(1) - L * L

def jac(t, q):
    D = rel(q)
    r = np.concatenate([np.repeat(np.arange(N), 2), np.repeat(np.arange(1, N), 2)])
    c = np.concatenate([np.arange(n), np.arange(n - 2)])
    return sp.csr_matrix((np.concatenate([2 * D.ravel(), -2 * D[1:].ravel()]), (r, c)),
                         shape=(N, n))

def gamma(t, q, v):
    W = rel(v)
    return -2 * (W * W).sum(1)

def state(angle, spin=0.3):
    th = angle + 0.01 * np.arange(N)
    U = np.column_stack([np.sin(th), -np.cos(th)]) * L
    W = np.column_stack([np.cos(th), np.sin(th)]) * L * spin * np.arange(1, N + 1)[:, None]
    return np.cumsum(U, axis=0).ravel(), np.cumsum(W, axis=0).ravel()

system = go.System([f"{a}{i}" for i in range(N) for a in "xy"], mass=np.full(n, MASS),
                   force=np.tile([0.0, -MASS * G], N),
                   constraints=[go.Holonomic(phi, jac, gamma, rheonomic=False)])
q, v = state(0.4)
page = os.sysconf("SC_PAGE_SIZE")
rss0 = int(open("/proc/self/statm").read().split()[1]) * page
t0 = time.perf_counter()
r = go.solve_step(system, 0.0, q, v, solver)
first = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
times, outs = [], []
bdev = [r.info.get("backend_deviation", float("nan"))]
for k in range(later):
    qk, vk = state(0.4 + 0.05 * (k + 1))
    t0 = time.process_time()
    rk = go.solve_step(system, 0.0, qk, vk, solver)
    times.append(time.process_time() - t0)
    outs.append(rk.a.tolist())
    bdev.append(rk.info.get("backend_deviation", float("nan")))
print(json.dumps({"first": first, "later": float(np.min(times)) if times else None,
                  "mem": max(peak - rss0, 0), "a": r.a.tolist(), "later_a": outs,
                  "sparse": bool(r.info.get("sparse")),
                  "sparse_qp": bool(r.info.get("sparse_qp", False)),
                  "bdev": float(np.max(bdev))}))
"""


def run_child(N: int, solver: str, later: int) -> dict:
    code = (_CHILD.replace("ROOT", repr(str(ROOT))).replace("NN", str(N))
            .replace("SOLVER", repr(solver)).replace("LATER", str(later)))
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=False)
    if out.returncode:
        raise SystemExit(f"N={N} {solver}: the child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def four_bar_rows() -> None:
    """The four-bar in a run: closed form against the QP (module docstring)."""
    import cProfile
    import pstats

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "problems"))
    import gaussopt as go
    import four_bar

    prob = four_bar.build(t_end=5.0)
    kw = dict(prob.settings) if getattr(prob, "settings", None) else {}
    runs = {}
    for solver in ("closed_form", "qp"):
        short = {k: x for k, x in kw.items() if k != "t_eval"}
        go.simulate(prob.system, (0.0, 0.05), prob.q0, prob.v0, solver=solver, **short)  # (loads)
        best = None
        for _ in range(3):
            tr = go.simulate(prob.system, prob.t_span, prob.q0, prob.v0, solver=solver, **kw)
            st = tr.stats
            if best is None or st["time_per_step"] < best["time_per_step"]:
                best = st
        runs[solver] = best
    cf, qp = runs["closed_form"], runs["qp"]
    print(f"\nfour-bar, 5 s, {({k: x for k, x in kw.items() if k != 't_eval'})}")
    print(f"{'solver':>12} {'steps':>7} {'rhs/step':>9} {'ms/step':>9} {'us/rhs':>8}")
    for name, st in runs.items():
        rps = st["rhs_evaluations"] / st["steps"]
        print(f"{name:>12} {st['steps']:>7} {rps:>9.2f} {1e3 * st['time_per_step']:>9.4f} "
              f"{1e6 * st['time_per_step'] / rps:>8.2f}")
    print(f"in-run ratio qp / closed_form: {qp['time_per_step'] / cf['time_per_step']:.2f}")
    prof = cProfile.Profile()
    prof.enable()
    tr = go.simulate(prob.system, prob.t_span, prob.q0, prob.v0, solver="qp", **kw)
    prof.disable()
    st = pstats.Stats(prof)
    total = sum(v[3] for k, v in st.stats.items() if k[2] == "simulate")
    calls = tr.stats["rhs_evaluations"]
    print(f"profiled qp run: {total:.3f} s ({calls} right-hand sides); tottime by function:")
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:8]
    for (fn, line, name), (cc, nc, tt, ct, _) in rows:
        print(f"  {tt:8.3f} s {100 * tt / total:5.1f} %  {nc:>8} calls  "
              f"{1e6 * tt / max(nc, 1):7.2f} us/call  {Path(fn).name}:{line} {name}")


def main() -> None:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, nargs="+", default=[1000], help="chain lengths")
    ap.add_argument("--later", type=int, default=5, help="later calls timed (median)")
    ap.add_argument("--four-bar", action="store_true", help="the four-bar in a run too")
    args = ap.parse_args()
    head = (f"{'n':>6} {'cf first s':>10} {'cf later s':>10} {'qp first s':>10} "
            f"{'qp later s':>10} {'first x':>8} {'later x':>8} {'cf MB':>8} {'qp MB':>8} "
            f"{'qp path':>8} {'max|a_qp-a_cf|/max|a_cf|':>25} {'Clarabel dev':>12}")
    print(head)
    for N in args.N:
        cf = run_child(N, "closed_form", args.later)
        qp = run_child(N, "qp", args.later)
        dev = 0.0
        for a, b in zip([qp["a"]] + qp["later_a"], [cf["a"]] + cf["later_a"]):
            a, b = np.asarray(a), np.asarray(b)
            dev = max(dev, float(np.abs(a - b).max() / np.abs(b).max()))
        path = "sparse" if qp["sparse_qp"] else "dense"
        print(f"{2 * N:>6} {cf['first']:>10.3f} {cf['later']:>10.4f} {qp['first']:>10.3f} "
              f"{qp['later']:>10.4f} {qp['first'] / cf['first']:>8.2f} "
              f"{qp['later'] / cf['later']:>8.2f} {cf['mem'] / 2**20:>8.1f} "
              f"{qp['mem'] / 2**20:>8.1f} {path:>8} {dev:>25.2e} {qp['bdev']:>12.2e}",
              flush=True)
    if args.four_bar:
        four_bar_rows()


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"(total {time.perf_counter() - t0:.0f} s; peak RSS of this parent "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
