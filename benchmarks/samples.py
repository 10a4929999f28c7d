"""The cost and the accuracy of output samples: the README's pendulum with 30,001 outputs.

Run: ``python3 benchmarks/samples.py [--repeat 5]``

Three runs of the README's Cartesian pendulum (``rtol = atol = 1e-12`` over 3 s, a
Python model: its constraint's Jacobian and convective term by complex step), each the
median CPU time (``time.process_time``) of ``--repeat`` warm runs:

* ``no t_eval``: the run alone (its 75 steps are its outputs);
* ``t_eval, interpolated``: 30,001 outputs, those inside a step interpolated from a few
  recomputed nodes per step (:mod:`gaussopt.integrate.sample_interpolation`, the default);
* ``t_eval, exact``: the same outputs each projected and recomputed exactly (the
  interpolation switched off: every step takes the check's fallback, as before it).

Then the largest difference between the interpolated and the exact outputs of the same
run, per quantity, absolute and relative to the quantity's largest size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # (this checkout's gaussopt)
import gaussopt as go  # noqa: E402
import gaussopt.integrate.sample_interpolation as SI  # noqa: E402

M, L, G = 2.0, 1.5, 9.81
TH0 = np.radians(60)
Q0 = [L * np.sin(TH0), -L * np.cos(TH0)]
T_EVAL = np.linspace(0.0, 3.0, 30001)


def pendulum() -> go.System:
    return go.System(coordinates=("x", "y"), mass=M * np.eye(2), force=[0.0, -M * G],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - L**2]))],
                     energy=lambda t, q, v: 0.5 * M * v @ v + M * G * q[1])


def run(t_eval) -> tuple[float, go.Trajectory]:
    system = pendulum()
    c0 = time.process_time()
    kw = {} if t_eval is None else {"t_eval": t_eval}
    tr = go.simulate(system, (0.0, 3.0), Q0, [0.0, 0.0], rtol=1e-12, atol=1e-12, **kw)
    return time.process_time() - c0, tr


def exact(t_eval) -> tuple[float, go.Trajectory]:
    """A run whose outputs are all recomputed exactly (no step gets nodes)."""
    plan = SI.plan
    SI.plan = lambda t, group: None
    try:
        return run(t_eval)
    finally:
        SI.plan = plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    run(T_EVAL)                       # (warm: compiled code loaded, first calls made)
    cases = {"no t_eval": lambda: run(None), "t_eval, interpolated": lambda: run(T_EVAL),
             "t_eval, exact": lambda: exact(T_EVAL)}
    times, trajs = {}, {}
    for name, f in cases.items():
        ts = []
        for _ in range(args.repeat):
            dt, tr = f()
            assert tr.success, tr.message
            ts.append(dt)
        times[name], trajs[name] = float(np.median(ts)), tr
    base = times["no t_eval"]
    print(f"README pendulum, {T_EVAL.size} outputs, {trajs['no t_eval'].stats['steps']} steps "
          f"(CPU s, median of {args.repeat})")
    print(f"{'case':24s} {'total':>8s} {'samples':>8s} {'per sample':>11s}")
    for name, dt in times.items():
        per = (dt - base) / T_EVAL.size * 1e6 if name != "no t_eval" else float("nan")
        print(f"{name:24s} {dt:8.3f} {dt - base:8.3f} {per:9.1f} us")
    new, ref = trajs["t_eval, interpolated"], trajs["t_eval, exact"]
    print(f"\ninterpolated outputs: {new.stats['samples_interpolated']} of {len(new)}")
    print(f"{'quantity':22s} {'max |new - exact|':>18s} {'relative':>10s}")
    pairs = {"q": (new.q, ref.q), "v": (new.v, ref.v), "a": (new.a, ref.a),
             "constraint_force": (new.constraint_force, ref.constraint_force),
             "multipliers": (new.multipliers, ref.multipliers),
             "position_residual": (new.position_residual, ref.position_residual),
             "velocity_residual": (new.velocity_residual, ref.velocity_residual),
             "energy": (new.energy, ref.energy)}
    for name, (x, y) in pairs.items():
        d = float(np.max(np.abs(x - y)))
        size = float(np.max(np.abs(y)))
        print(f"{name:22s} {d:18.2e} {d / size if size else float('nan'):10.1e}")
    for name, tr in (("interpolated", new), ("exact", ref)):
        i = np.flatnonzero((tr.v[:-1, 0] < 0) & (tr.v[1:, 0] >= 0))[0]
        t_half = np.interp(0.0, tr.v[i:i + 2, 0], tr.t[i:i + 2])
        print(f"{name:12s} period {2 * t_half:.8f} s, max residual "
              f"{tr.position_residual.max():.1e}, energy drift "
              f"{np.abs(tr.energy_drift).max():.1e} J")


if __name__ == "__main__":
    main()
