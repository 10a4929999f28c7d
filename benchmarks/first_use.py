"""What a newcomer waits for: first calls in a fresh cache, and the same calls warm.

Run: ``python3 benchmarks/first_use.py [--only ITEM,ITEM] [--json FILE] [--top 20]``

Each item is run twice in child processes of its own: first with empty caches (a new
temporary directory as ``NUMBA_CACHE_DIR`` and ``GAUSSOPT_CACHE_DIR``, which the
library honours for every piece of compiled code it writes), then again with the
caches the first process wrote ("warm"). For each process the table gives the wall
time of the item's code (the interpreter's own start excluded), the time numba spent
compiling (its ``numba:compile`` events, nested compilations counted once), the
number of compilations, and the process's peak resident memory (``wait4``). Then it
lists the functions that cost the most compile time over all items, by their own
time (a function's compile time minus that of the functions it compiled on the way).

Items
-----
* ``import``: ``import gaussopt``;
* ``step_closed_form``, ``step_lagrange``, ``step_qp``: the first ``go.solve_step`` of
  the paper-001 four-bar (``gaussopt_problems.four_bar.build()``) with that solver;
* ``simulate_dop853``, ``simulate_rk4``: its first ``go.simulate`` with the problem's
  settings (DOP853), and with ``method="rk4"``;
* ``solve_steps``: its first ``go.solve_steps`` on 100 states;
* ``multibody``: the double parallelogram (``gaussopt_problems.double_parallelogram``) built from
  bodies and joints and run for 1 s;
* ``lagrangian``: the sympy pendulum of docs/symbolic.md, ``go.from_lagrangian`` and a 2 s run;
* ``tree``: the humanoid-like tree of ``tests/data/humanoid_tree.xml`` loaded in joint
  coordinates (:mod:`gaussopt.multibody.tree`, MuJoCo needed), one ``solve_step`` and a
  0.1 s run (the tree kind's kernel, its compiled model functions and the engine);
* ``tree_contacts``: a box and a ball dropped sliding on a floor (an MJCF string), loaded
  with their contacts and run for 0.5 s (impacts, the contact problems, the phases'
  compiled rows: ``tree_compiled.PHASE_FUNCTIONS``);
* ``pendulum``: the README's 18-line pendulum example as pasted (30,001 output samples);
* ``cli_list``, ``cli_help``, ``cli_show``: ``gaussopt list``, ``--help``, ``show four_bar``;
* ``main_job``: the README's main job, ``gaussopt compare four_bar --out DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FOUR_BAR = "from gaussopt_problems import four_bar\npb = four_bar.build()\n"

PENDULUM = '''
import numpy as np
import gaussopt as go

m, l, g = 2.0, 1.5, 9.81
pendulum = go.System(
    coordinates=("x", "y"),
    mass=m * np.eye(2),
    force=[0.0, -m * g],
    constraints=[go.Holonomic(lambda t, q: np.array([q @ q - l**2]))],
    energy=lambda t, q, v: 0.5 * m * v @ v + m * g * q[1],
)
th0 = np.radians(60)
traj = go.simulate(pendulum, (0.0, 3.0), [l * np.sin(th0), -l * np.cos(th0)], [0.0, 0.0],
                   rtol=1e-12, atol=1e-12, t_eval=np.linspace(0.0, 3.0, 30001))
i = np.flatnonzero((traj.v[:-1, 0] < 0) & (traj.v[1:, 0] >= 0))[0]
t_half = np.interp(0.0, traj.v[i:i + 2, 0], traj.t[i:i + 2])
print(f"period {2 * t_half:.8f} s, max |x^2+y^2-l^2| {traj.position_residual.max():.1e}, "
      f"energy drift {np.abs(traj.energy_drift).max():.1e} J")
'''

LAGRANGIAN = '''
import numpy as np
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols
import gaussopt as go

x, y = dynamicsymbols("x y")
t = dynamicsymbols._t
m, l, g = sp.symbols("m l g", positive=True)
pendulum = go.from_lagrangian(
    [x, y], T=m / 2 * (x.diff(t)**2 + y.diff(t)**2), V=m * g * y,
    holonomic=[x**2 + y**2 - l**2],
    params={m: 2.0, l: 1.5, g: 9.81})
traj = go.simulate(pendulum, (0.0, 2.0), [1.5, 0.0], [0.0, 0.0], stabilization=go.Projection())
print(traj.q[-1], traj.position_residual.max(), np.abs(traj.energy_drift).max())
'''

#: a box and a ball dropped on a floor, sliding (MJCF): the contact run of a loaded model
TREE_CONTACTS = """<mujoco><worldbody><geom type="plane" size="5 5 .1" friction=".3 0 0"/>
<body pos="0 0 .2"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
<body pos="1 0 .3"><freejoint/><geom type="sphere" size=".1" mass="1"/></body>
</worldbody></mujoco>"""

ITEMS = {
    "import": "import gaussopt as go\n",
    "step_closed_form": "import gaussopt as go\n" + FOUR_BAR
                        + "go.solve_step(pb.system, 0.0, pb.q0, pb.v0, solver='closed_form')\n",
    "step_lagrange": "import gaussopt as go\n" + FOUR_BAR
                     + "go.solve_step(pb.system, 0.0, pb.q0, pb.v0, solver='lagrange')\n",
    "step_qp": "import gaussopt as go\n" + FOUR_BAR
               + "go.solve_step(pb.system, 0.0, pb.q0, pb.v0, solver='qp')\n",
    "simulate_dop853": "import gaussopt as go\n" + FOUR_BAR
                       + "go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **pb.settings)\n",
    "simulate_rk4": "import gaussopt as go\n" + FOUR_BAR
                    + "go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, method='rk4', dt=1e-3)\n",
    "solve_steps": "import numpy as np, gaussopt as go\n" + FOUR_BAR + textwrap.dedent('''
        th = np.linspace(0.2, 1.3, 100)
        Q = np.column_stack([th, th, np.pi - th]); V = np.column_stack([0 * th + 1, 0 * th + 1, 0 * th - 1])
        go.solve_steps(pb.system, 0.0, Q, V)
        '''),
    "multibody": "import gaussopt as go\nfrom problems import double_parallelogram\n"
                 "pb = double_parallelogram.build(t_end=1.0)\n"
                 "go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **pb.settings)\n",
    "lagrangian": LAGRANGIAN,
    "tree": "import numpy as np, gaussopt as go\nimport gaussopt.multibody.io.mjcf as mjcf\n"
            f"model = mjcf.load({str(ROOT / 'tests' / 'data' / 'humanoid_tree.xml')!r})\n"
            "q, v = model.q_reference, np.zeros(model.n)\n"
            "go.solve_step(model.system, 0.0, q, v)\n"
            "go.simulate(model.system, (0.0, 0.1), q, v)\n",
    "pendulum": PENDULUM,
    "cli_list": "from gaussopt.study.cli import main\nmain(['list'])\n",
    "cli_help": "from gaussopt.study.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n",
    "cli_show": "from gaussopt.study.cli import main\nmain(['show', 'four_bar'])\n",
    "tree_contacts": "import numpy as np, gaussopt as go\n"
                     "import gaussopt.multibody.io.mjcf as mjcf\n"
                     "model = mjcf.load(" + repr(TREE_CONTACTS) + ")\n"
                     "q, v = model.q_reference, np.zeros(model.n)\nv[0] = 1.0\n"
                     "tr = go.simulate(model.with_contacts(), (0.0, 0.5), q, v)\n"
                     "assert tr.success, tr.message\n",
    "main_job": "from gaussopt.study.cli import main\nimport sys\nsys.exit(main(['compare', 'four_bar', "
                "'--out', OUT]))\n",
}

#: run in the child before the item: numba's compile events are recorded (numba is
#: imported for that, so the ``import`` item runs without it and reports no compilations)
_PRELUDE = '''
import json, os, sys, time
_events = []
if ITEM != "import":
    from numba.core import event as _ev

    class _Rec(_ev.Listener):
        def on_start(self, e):
            _events.append((time.perf_counter(), 0, e.data["dispatcher"].py_func))
        def on_end(self, e):
            _events.append((time.perf_counter(), 1, None))
    _ev.register("numba:compile", _Rec())
_t0 = time.perf_counter()
_code = 0
try:
    exec(compile(CODE, ITEM, "exec"), {"__name__": "__main__", "OUT": OUT})
except SystemExit as e:
    _code = e.code or 0
_wall = time.perf_counter() - _t0
# own compile time per function: its duration minus the compilations nested in it
_own, _stack, _total, _n = {}, [], 0.0, 0
for ts, end, f in _events:
    if not end:
        _stack.append([ts, f, 0.0])
        _n += 1
        continue
    t_start, f, nested = _stack.pop()
    dur = ts - t_start
    name = f"{f.__module__}.{f.__qualname__}"
    c = _own.setdefault(name, [0.0, 0])
    c[0] += dur - nested
    c[1] += 1
    if _stack:
        _stack[-1][2] += dur
    else:
        _total += dur
with open(RESULT, "w") as fh:
    json.dump({"wall": _wall, "compile": _total, "n_compile": _n, "own": _own, "code": _code}, fh)
'''


def run_item(item: str, cache: str, out: str) -> dict:
    """One child process of ``item`` with its caches in ``cache``; its measurements."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as fh:
        result = fh.name
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, GAUSSOPT_CACHE_DIR=cache, MPLBACKEND="Agg",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = (f"ITEM = {item!r}\nCODE = {ITEMS[item]!r}\nOUT = {out!r}\nRESULT = {result!r}\n"
            + _PRELUDE)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=out,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    total = time.perf_counter() - t0
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        with open(result) as fh:
            res = json.load(fh)
    except (OSError, ValueError):
        res = {"wall": float("nan"), "compile": float("nan"), "n_compile": 0, "own": {}, "code": -1}
    finally:
        os.unlink(result)
    res.update(process=total, rss_mb=usage.ru_maxrss / 1024, returncode=proc.returncode,
               stderr=stderr, stdout=stdout)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated items (default: all): " + ", ".join(ITEMS))
    ap.add_argument("--json", help="write every measurement into this file")
    ap.add_argument("--top", type=int, default=20, help="functions listed by compile time")
    args = ap.parse_args()
    items = args.only.split(",") if args.only else list(ITEMS)
    for it in items:
        if it not in ITEMS:
            ap.error(f"unknown item {it!r} (items: {', '.join(ITEMS)})")
    rows, own = [], {}
    for it in items:
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
            cold = run_item(it, cache, out)
            warm = run_item(it, cache, out)
        for r in (cold, warm):
            if r["returncode"] != 0:
                print(f"{it}: exit {r['returncode']}\n{r['stderr'][-3000:]}", file=sys.stderr)
        for name, (sec, cnt) in cold["own"].items():
            o = own.setdefault(name, [0.0, 0, set()])
            o[0] += sec
            o[1] += cnt
            o[2].add(it)
        rows.append((it, cold, warm))
        print(f"{it:18s} fresh {cold['wall']:8.2f} s (compile {cold['compile']:7.2f} s, "
              f"{cold['n_compile']:4d} functions, {cold['rss_mb']:6.0f} MB)   warm "
              f"{warm['wall']:7.2f} s (compile {warm['compile']:.2f} s, {warm['rss_mb']:.0f} MB)",
              flush=True)
    print("\n| item | fresh cache: wall | of it compiling | compilations | peak RSS | warm: wall "
          "| warm: compilations | warm: peak RSS | process (fresh / warm) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for it, c, w in rows:
        print(f"| {it} | {c['wall']:.2f} s | {c['compile']:.2f} s | {c['n_compile']} | "
              f"{c['rss_mb']:.0f} MB | {w['wall']:.2f} s | {w['n_compile']} | {w['rss_mb']:.0f} MB | "
              f"{c['process']:.2f} / {w['process']:.2f} s |")
    top = sorted(own.items(), key=lambda kv: -kv[1][0])[:args.top]
    if top:
        print(f"\n| function (own compile time, summed over the fresh runs) | seconds | "
              f"compilations | items |")
        print("|---|---|---|---|")
        for name, (sec, cnt, its) in top:
            print(f"| {name} | {sec:.2f} | {cnt} | {len(its)} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{"item": it, "fresh": {k: c[k] for k in c if k not in ("stderr", "stdout")},
                        "warm": {k: w[k] for k in w if k not in ("stderr", "stdout")}}
                       for it, c, w in rows], fh, indent=1)


if __name__ == "__main__":
    main()
