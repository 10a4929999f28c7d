"""Whole MJCF models with their contacts: gaussopt's exact contacts against MuJoCo's soft
ones on the files users bring, one table, one run.

Run: ``python3 benchmarks/model_contacts.py PATH [PATH ...] [--t-end 1.0] [--rim-points 8] [--cone
elliptic]`` (MuJoCo: ``pip install ".[bench]"``). Any MJCF file with contacts: MuJoCo's
``model/humanoid/humanoid.xml``, gymnasium's ``envs/mujoco/assets/*.xml``, dm_control's
``suite/*.xml`` (their packages are not needed, only the files).

Why: the contact benchmarks (``benchmarks/contact.py``) measure single bodies against
exact solutions; a user loading a robot or a humanoid meets many points at once, impacts
of several feet and slides that stop, where the cost of exactness shows. Both simulators
start from the file's initial state (``qpos0``; gaussopt with ``project_initial=True``,
which moves a state that penetrates a surface to the nearest one outside, as MuJoCo's
soft contacts tolerate it) and run ``--t-end`` seconds without actuation.

Per model and simulator: the wall time (one run; gaussopt's compiled code loaded before
it, never counted), and what each gets right where no exact reference exists: the deepest
penetration of any contact point over the run (gaussopt: the points' gaps at its output
samples, which its phases hold at zero or above to the gap tolerance; MuJoCo: its
contacts' ``dist``), and for gaussopt the impacts, contact transitions and the phases
integrated by Radau (stiff slides). MuJoCo runs RK4 at ``dt = 1e-4`` (the robots
benchmark's peer run) and its default integrator at the file's own ``timestep`` with the
chosen friction cone. The two trajectories are not compared with each other: a soft
contact model and a rigid one part after the first impacts.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def gaussopt_run(path: str, t_end: float, rim_points: int = 0) -> dict:
    """gaussopt's run of the file with its contacts (defaults, ``project_initial=True``;
    ``rim_points``: cylinders against planes as that many points per rim, for a puck or a
    can standing on its face)."""
    sys.path.insert(0, str(ROOT))
    import gaussopt as go
    from gaussopt.model.contact import ContactPoints
    from gaussopt.multibody import load

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # (the loader's list of unmapped features)
        model = load(path)
    system = model.with_contacts(rim_points=rim_points)
    q0, v0 = model.initial_state()
    go.simulate(system, (0.0, 1e-3), q0, v0, project_initial=True)     # (loads the code)
    w0 = time.perf_counter()
    tr = go.simulate(system, (0.0, t_end), q0, v0, project_initial=True)
    wall = time.perf_counter() - w0
    points = ContactPoints(system.contacts, 0.0, tr.q[0])
    depth = max(0.0, -min(float(points.gaps(t, q).min()) for t, q in zip(tr.t, tr.q)))
    return {"wall": wall, "ok": tr.success, "t": float(tr.t[-1]), "impacts": len(tr.impacts),
            "transitions": len(tr.meta["contact_transitions"]),
            "radau": len(tr.meta.get("contact_implicit", [])), "points": points.k,
            "penetration": depth, "message": "" if tr.success else tr.message}


def mujoco_run(path: str, t_end: float, integrator: str, dt: float | None, cone: str) -> dict:
    """MuJoCo's run of the same file: ``mj_step`` in a Python loop."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(path)
    if dt is not None:
        m.opt.timestep = dt
    m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator}")
    m.opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    d = mujoco.MjData(m)
    steps = int(round(t_end / m.opt.timestep))
    depth = 0.0
    w0 = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(m, d)
        if d.ncon:
            depth = max(depth, float(-d.contact.dist[:d.ncon].min()))
    wall = time.perf_counter() - w0
    return {"wall": wall, "ok": bool(np.all(np.isfinite(d.qpos))), "dt": m.opt.timestep,
            "steps": steps, "penetration": depth}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="MJCF files")
    ap.add_argument("--t-end", type=float, default=1.0, help="simulated seconds")
    ap.add_argument("--cone", default="elliptic", choices=("elliptic", "pyramidal"),
                    help="MuJoCo's friction cone")
    ap.add_argument("--rim-points", type=int, default=0,
                    help="gaussopt: each cylinder rim against a plane as K points (a puck "
                         "standing on its face, gymnasium's Pusher); 0: the rims' lowest points")
    args = ap.parse_args()
    try:
        import mujoco  # noqa: F401
    except ImportError:
        mujoco = None
        print("(MuJoCo not installed: pip install '.[bench]'; gaussopt's runs only)")
    print(f"| model (points) | simulator | wall, {args.t_end:g} s | gaussopt / this "
          "| deepest penetration | impacts / transitions / Radau phases |")
    print("|---|---|---|---|---|---|")
    for path in args.paths:
        name = Path(path).stem
        g = gaussopt_run(path, args.t_end, args.rim_points)
        done = "" if g["ok"] else f" (stopped at {g['t']:.4g} s: {g['message'][:80]})"
        print(f"| {name} ({g['points']}) | gaussopt, defaults | {g['wall']:.3g} s{done} | 1 | "
              f"{g['penetration']:.1e} m | {g['impacts']} / {g['transitions']} / "
              f"{g['radau']} |", flush=True)
        if mujoco is None:
            continue
        for integrator, dt in (("RK4", 1e-4), ("EULER", None)):
            r = mujoco_run(path, args.t_end, integrator, dt, args.cone)
            label = f"MuJoCo {integrator} dt {r['dt']:.2g}, {args.cone} cone"
            ratio = g["wall"] / r["wall"] if r["wall"] > 0 else math.nan
            print(f"| {name} | {label}{'' if r['ok'] else ' (diverged)'} | {r['wall']:.3g} s | "
                  f"{ratio:.3g} | {r['penetration']:.1e} m | soft |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
