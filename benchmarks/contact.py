"""Hard contacts (gaussopt) against MuJoCo's soft contacts, in the same run.

Run: ``python3 benchmarks/contact.py``. MuJoCo is the optional ``bench`` extra
(``pip install ".[bench]"``); without it only gaussopt's rows are printed.

* **Bouncing ball** (``problems/bouncing_ball.py``, e = 0.6): the first five
  impact times against the analytic ones, and the wall time of a 3 s run.
  MuJoCo: a sphere on a plane, ``timestep = 1e-4``; with its default contact
  (``solref = 0.02 1``, critically damped) the ball does not bounce; the
  stiffest reasonable setting emulates restitution with a direct spring-damper
  (``solref = -k -b``, ``k = 1e6``, ``b = 2 zeta sqrt(k)`` with the damping ratio
  ``zeta`` of ``e``). An impact is where the vertical velocity turns positive
  after a fall faster than 1 cm/s.
* **Rocking block** (``problems/rocking_block.py``): the ratio of angular
  velocities after/before the first impact against Housner's
  ``1 - 3/2 sin^2 alpha``, the first impact time against the corner-pendulum
  reference, and the wall time of a 4 s run. MuJoCo: a box (depth 0.1 m) on a
  plane with friction 2 (no sliding), ``timestep = 1e-4``, default and stiff
  (``solref = 0.002 1``) contacts; the ratio is read 20 ms after the crossing of
  ``th = 0`` (the soft impact's duration).

Every time is the median of three runs after a warm-up (compilation excluded).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gaussopt_problems import bouncing_ball, rocking_block  # noqa: E402


def _median_time(fun, repeat: int = 3):
    fun()
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fun()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def gaussopt_ball() -> dict:
    p = bouncing_ball.build()
    wall, tr = _median_time(p.simulate)
    P = p.params
    ti = np.array([im.t for im in tr.impacts[:5]])
    exact = bouncing_ball.impact_times(5, P["h"], P["r"], P["e"], P["g"])
    return {"time": wall, "error": float(np.abs(ti - exact).max()), "impacts": len(tr.impacts)}


def gaussopt_block() -> dict:
    p = rocking_block.build()
    wall, tr = _median_time(p.simulate)
    P = p.params
    ratio = rocking_block.housner_ratio(P["b"], P["h"])
    im = tr.impacts[0]
    i = np.flatnonzero(tr.t == im.t)
    got = tr.v[i[-1], 2] / tr.v[i[0], 2]
    ref_t, _ = rocking_block.reference_impacts(1, P["b"], P["h"], P["g"],
                                                P["tilt"] * math.atan2(P["b"], P["h"]))
    return {"time": wall, "ratio_error": abs(got - ratio), "t_error": abs(im.t - ref_t[0])}


def mujoco_ball(solref: str, t_end: float = 3.0) -> dict:
    import mujoco

    P = bouncing_ball.build().params
    xml = f"""<mujoco><option timestep="1e-4" gravity="0 0 {-P['g']}"/>
    <worldbody><geom type="plane" size="5 5 0.1" solref="{solref}"/>
    <body pos="0 0 {P['h']}"><freejoint/>
    <geom type="sphere" size="{P['r']}" mass="{P['m']}" solref="{solref}"/></body>
    </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)

    def run():
        d = mujoco.MjData(model)
        imp, low = [], 0.0
        while d.time < t_end:
            mujoco.mj_step(model, d)
            vz = d.qvel[2]
            low = min(low, vz)
            if low < -1e-2 and vz >= 0:       # a rebound after a fall faster than 1 cm/s
                imp.append(d.time)
                low = 0.0
        return imp

    wall, imp = _median_time(run)
    exact = bouncing_ball.impact_times(5, P["h"], P["r"], P["e"], P["g"])
    n = min(len(imp), 5)
    err = float(np.abs(np.array(imp[:n]) - exact[:n]).max()) if n else math.nan
    return {"time": wall, "error": err, "impacts": len(imp)}


def mujoco_block(solref: str, t_end: float = 4.0) -> dict:
    import mujoco

    P = rocking_block.build().params
    b, h, m, g = P["b"], P["h"], P["m"], P["g"]
    alpha = math.atan2(b, h)
    th0 = P["tilt"] * alpha
    # rotation by th0 about -y tilts the block onto its corner at x = -b (world x-z plane,
    # the block's angle th measured from +x to +z as in the planar model)
    c, s = math.cos(th0), math.sin(th0)
    x0, z0 = b * c - h * s, b * s + h * c           # the corner (-b, -h) at the origin
    quat = (math.cos(th0 / 2), 0.0, -math.sin(th0 / 2), 0.0)
    xml = f"""<mujoco><option timestep="1e-4" gravity="0 0 {-g}"/>
    <worldbody><geom type="plane" size="5 5 0.1" friction="2 0.005 0.0001" solref="{solref}"/>
    <body pos="{x0} 0 {z0 + 1e-9}" quat="{' '.join(map(str, quat))}"><freejoint/>
    <geom type="box" size="{b} 0.05 {h}" mass="{m}" friction="2 0.005 0.0001" solref="{solref}"/>
    </body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)

    def run():
        d = mujoco.MjData(model)
        w_before = t_cross = None
        w_after = None
        while d.time < t_end:
            w = -d.qvel[4]                        # angular velocity about -y = th'
            mujoco.mj_step(model, d)
            th = 2 * math.atan2(-d.qpos[5], d.qpos[3])
            if t_cross is None and th <= 0:
                t_cross, w_before = d.time, w
            if t_cross is not None and d.time >= t_cross + 0.02:
                w_after = -d.qvel[4]
                break
        return t_cross, w_before, w_after

    wall, (t_cross, wb, wa) = _median_time(run)
    ratio = rocking_block.housner_ratio(b, h)
    ref_t, _ = rocking_block.reference_impacts(1, b, h, g, th0)
    return {"time": wall, "ratio_error": abs(wa / wb - ratio) if wb else math.nan,
            "t_error": abs(t_cross - ref_t[0]) if t_cross else math.nan, "run": "to 20 ms after impact 1"}


def main() -> int:
    rows = []
    gb = gaussopt_ball()
    rows.append(("bouncing ball, 3 s", "gaussopt (hard, e = 0.6)", gb["time"],
                 f"impact times err {gb['error']:.1e} s"))
    gk = gaussopt_block()
    rows.append(("rocking block, 4 s", "gaussopt (hard, friction inf)", gk["time"],
                 f"ratio err {gk['ratio_error']:.1e}, impact time err {gk['t_error']:.1e} s"))
    try:
        import mujoco  # noqa: F401
    except ImportError:
        print("(MuJoCo not installed: pip install '.[bench]')")
    else:
        e = bouncing_ball.build().params["e"]
        zeta = -math.log(e) / math.sqrt(math.pi ** 2 + math.log(e) ** 2)
        for label, solref in (("default solref 0.02 1", "0.02 1"),
                              ("solref -1e6 -2 zeta sqrt(1e6)", f"-1e6 {-2 * zeta * 1e3}")):
            r = mujoco_ball(solref)
            rows.append(("bouncing ball, 3 s", f"MuJoCo dt 1e-4, {label}", r["time"],
                         f"impact times err {r['error']:.1e} s ({r['impacts']} bounces seen)"))
        for label, solref in (("default solref 0.02 1", "0.02 1"), ("solref 0.002 1", "0.002 1")):
            r = mujoco_block(solref)
            rows.append(("rocking block, first impact", f"MuJoCo dt 1e-4, {label}", r["time"],
                         f"ratio err {r['ratio_error']:.1e}, impact time err {r['t_error']:.1e} s"))
    print("| problem | simulator | wall time | accuracy |")
    print("|---|---|---|---|")
    for prob, sim, wall, acc in rows:
        print(f"| {prob} | {sim} | {wall:.3g} s | {acc} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
