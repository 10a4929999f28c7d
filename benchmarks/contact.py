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
* **Sliding box** (``problems/sliding_box.py``, two frictional corners, mu = 0.3):
  launched at 1.5 m/s on a flat floor, 1 s: the stop time and the sliding distance
  against the closed form, the share of the normal load on the front corner(s) at
  mid-slide against ``(1 + mu h / b) / 2`` (friction below the centre of mass shifts
  the load forward), the penetration at rest. MuJoCo: a box of depth 0.1 m (four
  corners touch; the front pair's forces summed), ``timestep = 1e-4``, pyramidal and
  elliptic cones (default ``solref``) and an elliptic cone with ``solref = 0.002 1``;
  the stop is where ``x'`` first falls below 1e-3 m/s; MuJoCo's share is averaged over
  the steps of the middle half of the slide (the soft box chatters: its corners touch in
  some steps and not in others).
* **Box holding on a slope** (the same problem, ``beta = 0.25``: ``tan(beta) = 0.255 <
  mu``, released at rest, 2 s): it must not move. The creep ``|x(2 s) - x(0)|`` and the
  lower corner's share of the load against ``(1 + h tan(beta) / b) / 2``.

* **Spatial contacts from one MJCF file** (both simulators read the same file; gaussopt
  through ``gaussopt.multibody.load(...).with_contacts()``: the exact circular cone, hard
  contacts; MuJoCo at ``timestep = 1e-4`` with its pyramidal and elliptic cones):

  - a sphere (r 0.1 m, mu 0.3) launched sliding at 2 m/s without spin, 1 s: it rolls from
    ``2 v0 / (7 mu g)`` at ``5/7 v0`` (closed form): the roll-onset time (MuJoCo: the
    first step whose slip ``|v - omega r|`` is below 1e-3 m/s), the speed at 1 s, the
    penetration;
  - a cube (half-side 0.1 m) on a plane tilted by 0.3 rad with ``mu = tan 0.3 + 0.05``,
    released at rest, 2 s: it must not move: the creep and the penetration;
  - a thick disk (a ``cylinder`` geom: m 0.5 kg, r 0.1 m, half-thickness 5 mm; mu 2)
    leaning 20 degrees, rolling at spin 40 rad/s and turning at 2 rad/s, 1 s: its centroid
    at 1 s against the Newton-Euler reference of ``tests/rolling_disk_reference.py``
    (rolling without slipping, solve_ivp at 1e-13; written independently of both);
  - the same cube on a flat floor, 1 s: the normal forces over its four bottom corners
    (a rigid body on four coplanar points: only their sum ``m g`` and their moment about
    the centre are determined, gaussopt reports the least-norm distribution in the cone)
    and their sum's error;
  - a frictionless capsule (r 0.1 m) lying across a world capsule (r 0.2 m, axis along x
    from -1 to 1), launched along it at 0.8 m/s from x = 0.5: it slides along the top and
    over the rounded end, and leaves where ``cos th = (2 + v0^2 / (g rho)) / 3`` (``rho``
    the radii's sum; the time by energy and quadrature): the lift-off time (MuJoCo: its
    last step with a contact, its soft contact opening and closing over the end) and the
    penetration.

* **Many points** (a plank, half length 0.5 m, half height 0.05 m, 2 kg, lying on N
  points of its bottom edge on a line, mu 0.3; planar: x, y, th):

  - the contact problem of all N points at once (``gaussopt.solve_contact``), at rest
    pushed horizontally by 0.7 mu m g (it holds: the forces are indeterminate, the
    least-norm distribution in every cone is reported) and by 1.3 mu m g (it slides):
    the time per solve, by trying every combination of point states (up to
    ``MAX_COMBINATIONS``: the only method before) and by Lemke's algorithm on the LCP
    (``ENUMERATE_MAX`` combinations on), and the error of ``x''`` against Newton-Euler's
    ``0`` / ``(P - mu m g) / m``;
  - the same in space (circular cones): a body on a slope at rest with ``tan(beta) =
    0.8 mu`` (holds) and ``1.2 mu`` (slides), on the four bottom corners of a cube
    (81 combinations of point states) and on a 4 x 5 grid of points under a slab; the
    Lemke path there solves the LCP of the cones' inscribed octagons and certifies its
    states with the circles;
  - the 20-point plank launched at 1.5 m/s, 1 s: the stop time and the distance against
    ``v0 / (mu g)`` and ``v0^2 / (2 mu g)``. MuJoCo: the plank on slide-x, slide-z and
    hinge-y joints with 20 spheres of radius 1 mm along its bottom edge (20 contacts),
    ``timestep = 1e-4``, pyramidal and elliptic cones; its stop as for the box, and its
    ``mj_step`` time per step with the 20 contacts.

Every time is the median of three runs after a warm-up (compilation excluded).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gaussopt_problems import bouncing_ball, rocking_block, sliding_box  # noqa: E402


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


def gaussopt_box(**params) -> dict:
    """The sliding box (or the box on a slope): its errors against the closed form."""
    p = sliding_box.build(**params)
    wall, tr = _median_time(p.simulate)
    P = p.params
    ref = sliding_box.reference(tr.t, **P)
    out = {"time": wall, "x_error": float(np.abs(tr.q[:, 0] - ref["x"]).max()),
           "penetration": float(max(0.0, -np.min(np.c_[
               tr.q[:, 1] - P["b"] * np.sin(tr.q[:, 2]) - P["h"] * np.cos(tr.q[:, 2]),
               tr.q[:, 1] + P["b"] * np.sin(tr.q[:, 2]) - P["h"] * np.cos(tr.q[:, 2])])))}
    stops = [t for t, _, w in tr.meta["contact_transitions"] if "slide +" not in w]
    if P["v0"] > 0:
        t_stop = P["v0"] / (P["g"] * (math.sin(P["beta"]) + P["mu"] * math.cos(P["beta"])))
        out["t_error"] = abs(stops[0] - t_stop)
        i = int(np.argmin(np.abs(tr.t - 0.5 * t_stop)))
        share = tr.contact_forces[i, 1] / tr.contact_forces[i].sum()
        out["share_error"] = abs(share - 0.5 * (1 + P["mu"] * P["h"] / P["b"]))
    else:
        share = tr.contact_forces[-1, 0] / tr.contact_forces[-1].sum()
        out["share_error"] = abs(share - 0.5 * (1 + P["h"] * math.tan(P["beta"]) / P["b"]))
        out["creep"] = float(np.abs(tr.q[:, 0]).max())
    return out


def mujoco_box(cone: str, solref: str, beta: float = 0.0, v0: float = 1.5,
               t_end: float = 1.0) -> dict:
    """The box of ``problems/sliding_box.py`` in MuJoCo (depth 0.1 m, four bottom corners),
    on a plane with gravity tilted by ``beta`` (down the slope: -x)."""
    import mujoco

    P = sliding_box.build(beta=beta, v0=v0).params
    b, h, m, g, mu = P["b"], P["h"], P["m"], P["g"], P["mu"]
    gx, gz = -g * math.sin(beta), -g * math.cos(beta)
    fr = f"{mu} 0.005 0.0001"
    xml = f"""<mujoco><option timestep="1e-4" gravity="{gx} 0 {gz}" cone="{cone}"/>
    <worldbody><geom type="plane" size="5 5 0.1" friction="{fr}" solref="{solref}"/>
    <body pos="0 0 {h}"><freejoint/>
    <geom type="box" size="{b} 0.05 {h}" mass="{m}" friction="{fr}" solref="{solref}"/>
    </body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    t_stop = v0 / (g * (math.sin(beta) + mu * math.cos(beta))) if v0 > 0 else 0.0

    def normal_load(d, front: bool) -> tuple[float, float]:
        """The normal load on the corners at x > x_centre (front) or below, and the total."""
        f6 = np.zeros(6)
        tot = part = 0.0
        for k in range(d.ncon):
            mujoco.mj_contactForce(model, d, k, f6)
            tot += f6[0]
            if (d.contact[k].pos[0] > d.qpos[0]) == front:
                part += f6[0]
        return part, tot

    def run():
        # the load share averaged over steps (the soft box chatters: contacts come and go
        # from step to step, so one step's share means little): over the middle of the
        # slide (0.25 to 0.75 of the stop time), or the last 0.5 s at rest
        d = mujoco.MjData(model)
        d.qvel[0] = v0
        stop = None
        part = tot = 0.0
        lo, hi = (0.25 * t_stop, 0.75 * t_stop) if v0 > 0 else (t_end - 0.5, t_end)
        while d.time < t_end:
            mujoco.mj_step(model, d)
            if lo <= d.time <= hi:
                p_, t_ = normal_load(d, v0 > 0)
                part, tot = part + p_, tot + t_
            if v0 > 0 and stop is None and d.time > 0.01 and d.qvel[0] < 1e-3:
                stop = d.time
        pen = max([0.0] + [-d.contact[k].dist for k in range(d.ncon)])
        return stop, part / tot if tot > 0 else math.nan, float(d.qpos[0]), pen

    wall, (stop, share, x_end, pen) = _median_time(run)
    ref = sliding_box.reference([t_end], **P)
    out = {"time": wall, "x_error": abs(x_end - float(ref["x"][0])), "penetration": pen}
    if v0 > 0:
        out["t_error"] = abs(stop - t_stop) if stop is not None else math.nan
        out["share_error"] = abs(share - 0.5 * (1 + mu * h / b))
    else:
        out["creep"] = abs(x_end)
        out["share_error"] = abs(share - 0.5 * (1 + h * math.tan(beta) / b))
    return out


# --------------------------------------------------------------------------- many points
PLANK = {"b": 0.5, "h": 0.05, "m": 2.0, "mu": 0.3, "g": 9.81, "v0": 1.5}


def plank_problem(k: int, push: float):
    """The plank's contact problem at rest on ``k`` points, pushed by ``push`` along x:
    ``(M, F, A, b, G, h, T, s, mu)`` (gap accelerations ``y'' + x_i th''``, slip
    accelerations ``x'' + h th''``)."""
    P = PLANK
    xs = np.linspace(-P["b"], P["b"], k)
    inertia = P["m"] * (P["b"] ** 2 + P["h"] ** 2) / 3
    G = np.column_stack([np.zeros(k), np.ones(k), xs])
    T = np.column_stack([np.ones(k), np.zeros(k), np.full(k, P["h"])])
    return (np.diag([P["m"], P["m"], inertia]), np.array([push, -P["m"] * P["g"], 0.0]),
            np.zeros((0, 3)), np.zeros(0), G, np.zeros(k), T, np.zeros(k),
            np.full(k, P["mu"]))


def contact_problem_rows() -> list:
    """The time of one contact problem of N plank points, by enumeration and by Lemke."""
    import gaussopt.gauss.contact_problem as cp

    P = PLANK
    rows = []
    saved = cp.ENUMERATE_MAX
    try:
        for k in (4, 6, 20):
            for frac in (0.7, 1.3):
                push = frac * P["mu"] * P["m"] * P["g"]
                args = plank_problem(k, push)
                want = 0.0 if frac < 1 else push / P["m"] - P["mu"] * P["g"]
                for method, limit in (("every combination", 10 ** 12), ("Lemke", 0)):
                    if method == "every combination" and 4 ** k > cp.MAX_COMBINATIONS:
                        rows.append((f"contact problem, {k} points, push {frac} mu m g",
                                     f"gaussopt, {method}", math.nan,
                                     f"{4 ** k} combinations: refused"))
                        continue
                    cp.ENUMERATE_MAX = limit
                    sol = cp.solve_contact(*args[:8], mu=args[8])
                    reps = 3 if method == "every combination" else 50
                    wall, _ = _median_time(lambda: [cp.solve_contact(*args[:8], mu=args[8])
                                                    for _ in range(reps)])
                    rows.append((f"contact problem, {k} points, push {frac} mu m g",
                                 f"gaussopt, {method}", wall / reps,
                                 f"x'' err {abs(sol.x[0] - want):.1e} m/s2"))
    finally:
        cp.ENUMERATE_MAX = saved
    return rows + spatial_problem_rows()


def spatial_problem(points: np.ndarray, mu: float, beta: float):
    """The contact problem of a body (3 kg, isotropic inertia 0.1 kg m^2; coordinates: the
    velocity and the angular velocity) at rest on ``points`` (body frame, below its centre)
    on a plane tilted by ``beta`` about y: ``(M, F, A, b, G, h, T, s)`` with the gap
    acceleration ``v_z + (w x p)_z`` and the slip accelerations along x and y."""
    m, inertia, g = 3.0, 0.1, 9.81
    k = len(points)
    G = np.zeros((k, 6))
    T = np.zeros((k, 2, 6))
    for i, (px, py, pz) in enumerate(points):
        G[i] = [0, 0, 1, py, -px, 0]
        T[i, 0] = [1, 0, 0, 0, pz, -py]
        T[i, 1] = [0, 1, 0, -pz, 0, px]
    M = np.diag([m, m, m, inertia, inertia, inertia])
    F = np.array([m * g * math.sin(beta), 0.0, -m * g * math.cos(beta), 0.0, 0.0, 0.0])
    return M, F, np.zeros((0, 6)), np.zeros(0), G, np.zeros(k), T, np.zeros((k, 2))


def spatial_problem_rows() -> list:
    """The time of one spatial contact problem (circular cones): a cube on its four bottom
    corners and a slab on a 4 x 5 grid of points, at rest on a slope with ``tan(beta) = 0.8
    mu`` (holds) and ``1.2 mu`` (slides)."""
    import gaussopt.gauss.contact_cone as cc

    mu = 0.4
    cube = np.array([[x, y, -0.1] for x in (-0.1, 0.1) for y in (-0.1, 0.1)])
    grid = np.array([[x, y, -0.02] for x in np.linspace(-0.3, 0.3, 4)
                     for y in np.linspace(-0.2, 0.2, 5)])
    rows = []
    saved = cc.ENUMERATE_MAX
    try:
        for name, pts in (("cube, 4 corners", cube), ("slab, 20 points", grid)):
            for frac in (0.8, 1.2):
                beta = math.atan(frac * mu)
                args = spatial_problem(pts, mu, beta)
                want = 0.0 if frac < 1 else 9.81 * (math.sin(beta) - mu * math.cos(beta))
                for method, limit in (("every combination", 10 ** 12), ("Lemke (polygon)", 0)):
                    label = f"spatial contact problem, {name}, tan(beta) = {frac} mu"
                    if method == "every combination" and 3 ** len(pts) > cc.MAX_COMBINATIONS:
                        rows.append((label, f"gaussopt, {method}", math.nan,
                                     f"{3 ** len(pts)} combinations: refused"))
                        continue
                    cc.ENUMERATE_MAX = limit
                    sol = cc.solve_contact_cone(*args, mu=np.full(len(pts), mu))
                    wall, _ = _median_time(lambda: cc.solve_contact_cone(
                        *args, mu=np.full(len(pts), mu)))
                    rows.append((label, f"gaussopt, {method}", wall,
                                 f"x'' err {abs(sol.x[0] - want):.1e} m/s2"))
    finally:
        cc.ENUMERATE_MAX = saved
    return rows


def gaussopt_plank(k: int = 20) -> dict:
    """The plank on ``k`` points launched at ``v0``, 1 s: stop time and distance errors."""
    import gaussopt as go

    P = PLANK
    xs = np.linspace(-P["b"], P["b"], k)

    def gap(t, q):
        return q[1] + xs * np.sin(q[2]) - P["h"] * np.cos(q[2])

    def slip(t, q):
        return q[0] + xs * np.cos(q[2]) + P["h"] * np.sin(q[2])

    bottom = go.Contact(gap, slip=slip, friction=P["mu"], restitution=0.0, rheonomic=False,
                        name="bottom")
    inertia = P["m"] * (P["b"] ** 2 + P["h"] ** 2) / 3
    sys_ = go.System(("x", "y", "th"), mass=np.diag([P["m"], P["m"], inertia]),
                     force=[0.0, -P["m"] * P["g"], 0.0], constraints=[bottom], name="plank")
    wall, tr = _median_time(lambda: go.simulate(sys_, (0.0, 1.0), [0.0, P["h"], 0.0],
                                                [P["v0"], 0.0, 0.0]))
    t_stop = P["v0"] / (P["mu"] * P["g"])
    stop = min(t for t, _, w in tr.meta["contact_transitions"] if w == "stick")
    return {"time": wall, "t_error": abs(stop - t_stop),
            "x_error": abs(tr.q[-1, 0] - P["v0"] ** 2 / (2 * P["mu"] * P["g"])),
            "penetration": float(max(0.0, -min(gap(0, q).min() for q in tr.q)))}


def mujoco_plank(cone: str, k: int = 20) -> dict:
    """The plank in MuJoCo: planar joints, ``k`` spheres of radius 1 mm on its bottom edge."""
    import mujoco

    P = PLANK
    r = 1e-3
    inertia = P["m"] * (P["b"] ** 2 + P["h"] ** 2) / 3
    fr = f"{P['mu']} 0.005 0.0001"
    balls = "".join(f'<geom type="sphere" size="{r}" pos="{x} 0 {-P["h"] + r}" '
                    f'friction="{fr}" mass="0"/>' for x in np.linspace(-P["b"], P["b"], k))
    xml = f"""<mujoco><option timestep="1e-4" cone="{cone}"/>
    <worldbody><geom type="plane" size="5 5 0.1" friction="{fr}"/>
    <body pos="0 0 {P['h']}">
    <joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 0 1"/>
    <joint type="hinge" axis="0 1 0"/>
    <inertial pos="0 0 0" mass="{P['m']}" diaginertia="{inertia} {inertia} {inertia}"/>
    {balls}</body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    t_stop = P["v0"] / (P["mu"] * P["g"])

    def run():
        d = mujoco.MjData(model)
        d.qvel[0] = P["v0"]
        stop, ncon, steps = None, 0, 0
        pen = 0.0
        while d.time < 1.0:
            mujoco.mj_step(model, d)
            steps += 1
            ncon = max(ncon, d.ncon)
            pen = max([pen] + [-d.contact[j].dist for j in range(d.ncon)])
            if stop is None and d.time > 0.01 and d.qvel[0] < 1e-3:
                stop = d.time
        return stop, float(d.qpos[0]), pen, ncon, steps

    wall, (stop, x_end, pen, ncon, steps) = _median_time(run)
    return {"time": wall, "t_error": abs(stop - t_stop) if stop is not None else math.nan,
            "x_error": abs(x_end - P["v0"] ** 2 / (2 * P["mu"] * P["g"])),
            "penetration": pen, "contacts": ncon, "per_step": wall / steps}


def _plank_row(r: dict) -> str:
    out = (f"stop time err {r['t_error']:.1e} s, distance err {r['x_error']:.1e} m, "
           f"penetration {r['penetration']:.1e} m")
    if "contacts" in r:
        out += f", {r['contacts']} contacts, {r['per_step'] * 1e6:.3g} us per mj_step"
    return out


# --------------------------------------------------------------------------- spatial
G0, R_S, M_S, B, M_B = 9.81, 0.1, 2.0, 0.1, 3.0


def sphere_xml(option: str = "", mu: float = 0.3) -> str:
    return f"""<mujoco><option gravity="0 0 -{G0}" {option}/><worldbody>
<geom name="floor" type="plane" size="5 5 .1" friction="{mu} 0 0"/>
<body name="ball" pos="0 0 {R_S}"><freejoint name="f"/>
  <geom name="b" type="sphere" size="{R_S}" mass="{M_S}" friction="{mu} 0 0"/>
</body></worldbody></mujoco>"""


def cube_xml(option: str = "", beta: float = 0.0, mu: float = 0.5) -> str:
    """A cube of half-side B resting on a plane tilted by ``beta`` about y, both in the
    same rotated frame."""
    deg = math.degrees(beta)
    c = [B * math.sin(beta), 0.0, B * math.cos(beta)]
    return f"""<mujoco><option gravity="0 0 -{G0}" {option}/><worldbody>
<geom name="floor" type="plane" size="5 5 .1" euler="0 {deg!r} 0" friction="{mu} 0 0"/>
<body name="box" pos="{c[0]!r} 0 {c[2]!r}" euler="0 {deg!r} 0"><freejoint/>
  <geom name="cube" type="box" size="{B} {B} {B}" mass="{M_B}" friction="{mu} 0 0"/>
</body></worldbody></mujoco>"""


def disk_case():
    """The leaning disk: its MJCF (``option`` attributes inserted), initial state (world
    frame: centroid, quaternion, velocity, angular velocity) and the reference centroid at
    1 s."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from rolling_disk_reference import reference, rolling_initial_state

    m, R, H, mu = 0.5, 0.1, 0.005, 2.0
    c0, e0, vc0, w0 = rolling_initial_state(m, R, H, G0, tilt=math.radians(20.0),
                                            heading=0.0, spin=40.0, yaw_rate=2.0)
    ref = reference(np.array([0.0, 1.0]), m, R, H, G0, c0, e0, vc0, w0)["c"][-1]

    def xml(option: str = "") -> str:
        return f"""<mujoco><option gravity="0 0 -{G0}" {option}/><worldbody>
<geom name="floor" type="plane" size="50 50 .1" friction="{mu} 0 0"/>
<body name="disk" pos="0 0 1"><freejoint/>
  <geom name="d" type="cylinder" size="{R} {H}" mass="{m}" friction="{mu} 0 0"/>
</body></worldbody></mujoco>"""
    return xml, (c0, e0, vc0, w0), ref


def _load_mjcf(xml):
    import warnings

    import gaussopt.multibody.io.mjcf as mjcf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mjcf.load(xml)


def gaussopt_spatial() -> dict:
    """The three spatial cases in gaussopt (default tolerances)."""
    import gaussopt as go

    out = {}
    mu, v0 = 0.3, 2.0
    model = _load_mjcf(sphere_xml())
    sysm = model.with_contacts()
    u0 = np.zeros(model.n)
    u0[0] = v0
    wall, tr = _median_time(lambda: go.simulate(sysm, (0.0, 1.0), model.q_reference, u0))
    roll = [t for t, _, w in tr.meta["contact_transitions"] if w == "stick"]
    out["sphere"] = {"time": wall, "ok": tr.success,
                     "t_error": abs(roll[0] - 2 * v0 / (7 * mu * G0)) if roll else math.nan,
                     "v_error": abs(tr.v[-1][0] - 5 / 7 * v0),
                     "penetration": float(max(0.0, -np.min(tr.q[:, 2] - R_S)))}
    beta = 0.3
    model = _load_mjcf(cube_xml(beta=beta, mu=math.tan(beta) + 0.05))
    sysm = model.with_contacts()
    q0 = model.q_reference
    wall, tr = _median_time(lambda: go.simulate(sysm, (0.0, 2.0), q0, np.zeros(model.n)))
    out["slope"] = {"time": wall, "ok": tr.success,
                    "creep": float(np.abs(tr.q[:, :3] - q0[:3]).max()), "penetration": 0.0}
    xml, (c0, e0, vc0, w0), ref = disk_case()
    model = _load_mjcf(xml())
    sysm = model.with_contacts()
    w = np.r_[0.0, w0]                  # the free joint's v: (velocity, e' = (0, w) e / 2)
    ed = 0.5 * np.array([-w[1:] @ e0[1:], *(e0[0] * w[1:] + np.cross(w[1:], e0[1:]))])
    wall, tr = _median_time(lambda: go.simulate(sysm, (0.0, 1.0), np.r_[c0, e0],
                                                np.r_[vc0, ed]))
    out["disk"] = {"time": wall, "ok": tr.success,
                   "c_error": float(np.abs(tr.q[-1][:3] - ref).max()),
                   "steps": tr.stats["steps"]}
    model = _load_mjcf(cube_xml())
    sysm = model.with_contacts()
    q0 = model.q_reference
    wall, tr = _median_time(lambda: go.simulate(sysm, (0.0, 1.0), q0, np.zeros(model.n)))
    f = np.asarray(tr.contact_forces[-1], dtype=float)
    f = np.sort(f[f > 1e-12 * M_B * G0])
    out["rest"] = {"time": wall, "ok": tr.success, "corners": f / (M_B * G0),
                   "sum_error": abs(f.sum() - M_B * G0) / (M_B * G0),
                   "creep": float(np.abs(tr.q - q0).max()), "penetration": 0.0}
    return out


def mujoco_spatial(cone: str) -> dict:
    """The three spatial cases in MuJoCo, from the same files (``timestep = 1e-4``)."""
    import mujoco

    opt = f'timestep="1e-4" cone="{cone}"'
    out = {}
    mu, v0 = 0.3, 2.0
    model = mujoco.MjModel.from_xml_string(sphere_xml(opt))

    def sphere():
        d = mujoco.MjData(model)
        d.qvel[0] = v0
        roll, pen = None, 0.0
        while d.time < 1.0 - 1e-12:
            mujoco.mj_step(model, d)
            if roll is None and abs(d.qvel[0] - R_S * d.qvel[4]) < 1e-3:
                roll = d.time
            pen = max([pen] + [-d.contact[k].dist for k in range(d.ncon)])
        return roll, float(d.qvel[0]), pen

    wall, (roll, v1, pen) = _median_time(sphere)
    out["sphere"] = {"time": wall, "ok": True,
                     "t_error": abs(roll - 2 * v0 / (7 * mu * G0)) if roll else math.nan,
                     "v_error": abs(v1 - 5 / 7 * v0), "penetration": pen}
    beta = 0.3
    model = mujoco.MjModel.from_xml_string(cube_xml(opt, beta, math.tan(beta) + 0.05))

    def slope():
        d = mujoco.MjData(model)
        x0 = np.array(d.qpos[:3])
        creep, pen = 0.0, 0.0
        while d.time < 2.0 - 1e-12:
            mujoco.mj_step(model, d)
            creep = max(creep, float(np.abs(d.qpos[:3] - x0).max()))
            pen = max([pen] + [-d.contact[k].dist for k in range(d.ncon)])
        return creep, pen

    wall, (creep, pen) = _median_time(slope)
    out["slope"] = {"time": wall, "ok": True, "creep": creep, "penetration": pen}
    xml, (c0, e0, vc0, w0), ref = disk_case()
    model = mujoco.MjModel.from_xml_string(xml(opt))

    def disk():
        d = mujoco.MjData(model)
        d.qpos[:3], d.qpos[3:7], d.qvel[:3] = c0, e0, vc0
        Rm = np.zeros(9)
        mujoco.mju_quat2Mat(Rm, np.asarray(e0, dtype=float))
        d.qvel[3:6] = Rm.reshape(3, 3).T @ w0          # (MuJoCo: body-frame angular velocity)
        while d.time < 1.0 - 1e-12:
            mujoco.mj_step(model, d)
        return np.array(d.qpos[:3])

    wall, c1 = _median_time(disk)
    out["disk"] = {"time": wall, "ok": True, "c_error": float(np.abs(c1 - ref).max()),
                   "steps": 10000}
    model = mujoco.MjModel.from_xml_string(cube_xml(opt))

    def rest():
        d = mujoco.MjData(model)
        q0 = np.array(d.qpos)
        creep, pen = 0.0, 0.0
        while d.time < 1.0 - 1e-12:
            mujoco.mj_step(model, d)
            creep = max(creep, float(np.abs(d.qpos - q0).max()))
            pen = max([pen] + [-d.contact[k].dist for k in range(d.ncon)])
        f6 = np.zeros(6)
        f = []
        for k in range(d.ncon):
            mujoco.mj_contactForce(model, d, k, f6)
            f.append(f6[0])
        return np.sort(np.array(f)), creep, pen

    wall, (f, creep, pen) = _median_time(rest)
    out["rest"] = {"time": wall, "ok": True, "corners": f / (M_B * G0),
                   "sum_error": abs(f.sum() - M_B * G0) / (M_B * G0), "creep": creep,
                   "penetration": pen}
    return out


def _tippe_reference():
    """The tippe top's Newton-Euler reference (tests/tippe_top_reference.py): the slip's
    stop and the tilt at the end of the 1.2 s run."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import tippe_top_reference as tt

    ts, _, s2 = tt.reference()
    return tt, ts, math.acos(tt.rot(s2.y[6:10, -1])[2, 2])


def gaussopt_tippe_top(tt, ts: float, th1: float) -> dict:
    """problems/tippe_top.py at the default tolerances (its tree model with the contacts of
    its two spheres): the slip's stop and the tilt at 1.2 s against the reference."""
    import gaussopt as go
    from gaussopt_problems import tippe_top

    pb = tippe_top.build(t_end=tt.T_END)
    wall, tr = _median_time(lambda: go.simulate(pb.system, pb.t_span, pb.q0, pb.v0))
    stop = [t for t, _, w in tr.meta["contact_transitions"] if w == "stick"]
    return {"time": wall, "ok": tr.success, "t_error": abs(stop[0] - ts) if stop else math.nan,
            "th_error": abs(float(pb.outputs(tr.q[-1], tr.v[-1])["theta"][0]) - th1),
            "penetration": 0.0}


def mujoco_tippe_top(tt, ts: float, th1: float, cone: str) -> dict:
    """The same top in MuJoCo (``timestep = 1e-4``): its slip's stop (the contact point's
    slip speed below 1e-3 m/s, as the sphere's row) and its tilt at 1.2 s."""
    import mujoco

    p = tt.PARAMETERS
    mu = p["mu"]
    xml = f"""<mujoco><option gravity="0 0 -{p['g']}" timestep="1e-4" cone="{cone}"/>
<worldbody><geom name="floor" type="plane" size="1 1 .1" friction="{mu} 0 0"/>
<body name="top"><freejoint/>
  <inertial pos="0 0 0" mass="{p['m']}" diaginertia="{p['A']} {p['A']} {p['C']}"/>
  <geom type="sphere" size="{p['r']}" pos="0 0 {p['a']}" friction="{mu} 0 0"/>
  <geom type="sphere" size="{p['r_s']}" pos="0 0 {p['l_s']}" friction="{mu} 0 0"/>
</body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    th0 = tt.THETA0

    def run():
        d = mujoco.MjData(model)
        e = np.array([math.cos(th0 / 2), 0.0, math.sin(th0 / 2), 0.0])
        d.qpos[:3] = [0.0, 0.0, p["r"] - p["a"] * math.cos(th0)]
        d.qpos[3:7] = e
        d.qvel[3:6] = tt.rot(e).T @ np.array([0.0, 0.0, tt.SPIN])     # (body frame)
        stop, pen = None, 0.0
        while d.time < tt.T_END - 1e-12:
            mujoco.mj_step(model, d)
            R = tt.rot(np.array(d.qpos[3:7]))
            rho = R @ np.array([0.0, 0.0, p["a"]]) - np.array([0.0, 0.0, p["r"]])
            u = d.qvel[:3] + np.cross(R @ d.qvel[3:6], rho)
            if stop is None and math.hypot(u[0], u[1]) < 1e-3:
                stop = d.time
            pen = max([pen] + [-d.contact[k].dist for k in range(d.ncon)])
        return stop, math.acos(tt.rot(np.array(d.qpos[3:7]))[2, 2]), pen

    wall, (stop, th, pen) = _median_time(run)
    return {"time": wall, "ok": True, "t_error": abs(stop - ts) if stop else math.nan,
            "th_error": abs(th - th1), "penetration": pen}


#: a frictionless log (capsule, radius 0.1 m) lying across a world bar (capsule, radius 0.2
#: m, axis along x from -1 to 1), launched along the bar at 0.8 m/s from x = 0.5: it slides
#: along the top, over the bar's rounded end and leaves it (tests/test_mjcf_contacts.py)
LOG = {"R": 0.2, "r": 0.1, "v0": 0.8, "x0": 0.5}


def log_xml(option: str = "") -> str:
    """The log and the bar of :data:`LOG` (``option``: MuJoCo's ``<option>`` attributes)."""
    R, r, x0 = LOG["R"], LOG["r"], LOG["x0"]
    return f"""<mujoco><option gravity="0 0 -9.81" {option}/><worldbody>
<geom name="bar" type="capsule" fromto="-1 0 0 1 0 0" size="{R}" condim="1"/>
<body name="log" pos="{x0} 0 {R + r}"><freejoint/>
<geom name="log" type="capsule" fromto="0 -.15 0 0 .15 0" size="{r}" mass="1" condim="1"/>
</body></worldbody></mujoco>"""


def _log_leaves() -> float:
    """When the log leaves the bar (energy: the particle leaving a smooth cylinder, over the
    end's sphere of radius ``R + r``; scipy's quad)."""
    from scipy.integrate import quad

    g, rho, v0 = 9.81, LOG["R"] + LOG["r"], LOG["v0"]
    th = math.acos((2.0 + v0 ** 2 / (g * rho)) / 3.0)
    t_cap = quad(lambda a: rho / math.sqrt(v0 ** 2 + 2 * g * rho * (1 - math.cos(a))), 0.0, th,
                 epsabs=0.0, epsrel=1e-13)[0]
    return (1.0 - LOG["x0"]) / v0 + t_cap


def gaussopt_log() -> dict:
    """The log's run (capsule-capsule contact, the defaults) to 0.2 s past the exact lift-off:
    the lift-off time's error and the deepest penetration at its samples."""
    import gaussopt as go
    from gaussopt.model.contact import ContactPoints

    model = _load_mjcf(log_xml())
    system = model.with_contacts()
    v0 = np.zeros(model.n)
    v0[0] = LOG["v0"]
    t_l = _log_leaves()
    wall, tr = _median_time(lambda: go.simulate(system, (0.0, t_l + 0.2), model.q_reference, v0))
    points = ContactPoints(system.contacts, 0.0, tr.q[0])
    pen = max(0.0, -min(float(points.gaps(t, q).min()) for t, q in zip(tr.t, tr.q)))
    opened = [x[0] for x in tr.meta["contact_transitions"] if x[2] == "open"]
    return {"time": wall, "ok": tr.success, "penetration": pen,
            "t_error": abs(opened[0] - t_l) if opened else math.nan}


def mujoco_log(cone: str) -> dict:
    """The same in MuJoCo (``timestep = 1e-4``): its last step with a contact against the
    lift-off (its soft contact opens and closes again for 0.19 s before: from x = 1.02,
    where the log reaches the bar's end), and the deepest penetration."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(log_xml(f'timestep="1e-4" cone="{cone}"'))
    t_l = _log_leaves()

    def run():
        d = mujoco.MjData(model)
        d.qvel[0] = LOG["v0"]
        t_off, pen = None, 0.0
        while d.time < t_l + 0.2 - 1e-12:
            mujoco.mj_step(model, d)
            if d.ncon:
                t_off = d.time
            pen = max([pen] + [-d.contact[k].dist for k in range(d.ncon)])
        return t_off, pen

    wall, (t_off, pen) = _median_time(run)
    return {"time": wall, "ok": True, "penetration": pen,
            "t_error": abs(t_off - t_l) if t_off is not None else math.nan}


def _log_row(sim: str, r: dict) -> tuple:
    return ("capsule sliding across a capsule and over its end (MJCF), until 0.2 s after it "
            "leaves", sim, r["time"],
            f"lift-off err {r['t_error']:.1e} s, penetration {r['penetration']:.1e} m"
            + ("" if r["ok"] else " (the run failed)"))


def _drop_reference():
    """The tilted box drop of tests/box_drop_reference.py: its module, the first impact
    ``(t, corner, x, v, R, w)`` and the sticking impulse there (mu = 1)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import box_drop_reference as bd
    from tippe_top_reference import rot

    model = _load_mjcf(bd.drop_xml(1.0))
    q0 = model.q_reference
    first = bd.free_flight_to_impact(q0[:3], q0[3:7])
    P, _ = bd.corner_impulse(first[1], *first[3:6], DROP_E, sticking=True)
    return bd, rot, q0, first, P


#: the drop's restitution (gaussopt); MuJoCo's contacts do not bounce
DROP_E = 0.3


def gaussopt_drop(bd, rot, q0, first, P) -> dict:
    """The box dropped tilted and spinning, 1 s at the default tolerances: the first impact's
    time and impulse against the reference, the rest height and attitude."""
    import gaussopt as go
    from tippe_top_reference import e_rate

    model = _load_mjcf(bd.drop_xml(1.0))
    sysm = model.with_contacts(restitution=DROP_E)
    v0 = np.concatenate([bd.V0, e_rate(q0[3:7], rot(q0[3:7]).T @ bd.W0)])
    wall, tr = _median_time(lambda: go.simulate(sysm, (0.0, 1.0), q0, v0))
    im = tr.impacts[0]
    return {"time": wall, "ok": tr.success, "t_error": abs(im.t - first[0]),
            "p_error": abs(im.impulses[first[1]] - P[2]) / P[2],
            "z_error": abs(tr.q[-1, 2] - bd.BOX_HALF[2]), "penetration": 0.0,
            "impacts": len(tr.impacts)}


def mujoco_drop(bd, rot, q0, first, P, cone: str) -> dict:
    """The same drop in MuJoCo (``timestep = 1e-4``, soft contacts without restitution): the
    first step with a contact against the first impact's time, the rest height at 1 s and
    the deepest penetration."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(bd.drop_xml(1.0, f'timestep="1e-4" cone="{cone}"'))

    def run():
        d = mujoco.MjData(model)
        d.qvel[:3] = bd.V0
        d.qvel[3:6] = rot(np.array(d.qpos[3:7])).T @ bd.W0        # (body frame)
        t_hit, pen = None, 0.0
        while d.time < 1.0 - 1e-12:
            mujoco.mj_step(model, d)
            if t_hit is None and d.ncon:
                t_hit = d.time
            pen = max([pen] + [-d.contact[k].dist for k in range(d.ncon)])
        return t_hit, float(d.qpos[2]), pen

    wall, (t_hit, z, pen) = _median_time(run)
    return {"time": wall, "ok": True, "t_error": abs(t_hit - first[0]) if t_hit else math.nan,
            "p_error": math.nan, "z_error": abs(z - bd.BOX_HALF[2]), "penetration": pen}


def _drop_row(sim: str, r: dict) -> tuple:
    imp = ("" if math.isnan(r["p_error"]) else
           f", its impulse err {r['p_error']:.1e} (relative), {r['impacts']} impacts")
    return ("box dropped tilted and spinning onto a corner (MJCF), 1 s", sim, r["time"],
            f"first impact time err {r['t_error']:.1e} s{imp}, rest height err "
            f"{r['z_error']:.1e} m, penetration {r['penetration']:.1e} m"
            + ("" if r["ok"] else " (the run failed)"))


def _tippe_row(sim: str, r: dict) -> tuple:
    return ("tippe top slides, tips and rolls (1.2 s)", sim, r["time"],
            ("slip stop not seen (slip speed above 1e-3 m/s throughout)"
             if math.isnan(r["t_error"]) else f"slip stop err {r['t_error']:.1e} s")
            + f", tilt at 1.2 s err {r['th_error']:.1e} rad, "
            f"penetration {r['penetration']:.1e} m" + ("" if r["ok"] else " (the run failed)"))


def _spatial_rows(sim: str, r: dict) -> list:
    s, sl, rest = r["sphere"], r["slope"], r["rest"]
    bad = "" if all(x["ok"] for x in (s, sl, rest)) else " (a run failed)"
    return [
        ("sphere launched sliding (MJCF), 1 s", sim, s["time"],
         f"roll onset err {s['t_error']:.1e} s, speed at 1 s err {s['v_error']:.1e} m/s, "
         f"penetration {s['penetration']:.1e} m{bad}"),
        ("cube holding on a 0.3 rad slope (MJCF), 2 s", sim, sl["time"],
         f"creep {sl['creep']:.1e} m, penetration {sl['penetration']:.1e} m"),
        ("leaning disk rolling and turning (MJCF cylinder), 1 s", sim, r["disk"]["time"],
         f"centroid at 1 s err {r['disk']['c_error']:.1e} m ({r['disk']['steps']} steps)"
         + ("" if r["disk"]["ok"] else " (the run failed)")),
        ("cube at rest on a floor (MJCF), 1 s", sim, rest["time"],
         f"bottom corners' loads / m g: {', '.join(f'{x:.3f}' for x in rest['corners'])} "
         f"(sum err {rest['sum_error']:.1e}), creep {rest['creep']:.1e}, penetration "
         f"{rest['penetration']:.1e} m"),
    ]


def _box_row(r: dict) -> str:
    if "creep" in r:
        return (f"creep {r['creep']:.1e} m, lower corner's load share err "
                f"{r['share_error']:.1e}, penetration {r['penetration']:.1e} m")
    return (f"stop time err {r['t_error']:.1e} s, distance err {r['x_error']:.1e} m, front "
            f"load share err {r['share_error']:.1e}, penetration {r['penetration']:.1e} m")


def main() -> int:
    rows = []
    gb = gaussopt_ball()
    rows.append(("bouncing ball, 3 s", "gaussopt (hard, e = 0.6)", gb["time"],
                 f"impact times err {gb['error']:.1e} s"))
    gk = gaussopt_block()
    rows.append(("rocking block, 4 s", "gaussopt (hard, friction inf)", gk["time"],
                 f"ratio err {gk['ratio_error']:.1e}, impact time err {gk['t_error']:.1e} s"))
    slope = {"beta": 0.25, "v0": 0.0, "t_end": 2.0}
    gf = gaussopt_box()
    rows.append(("sliding box, 1 s", "gaussopt (hard, two corners)", gf["time"], _box_row(gf)))
    gs = gaussopt_box(**slope)
    rows.append(("box holding on a slope, 2 s", "gaussopt (hard, two corners)", gs["time"],
                 _box_row(gs)))
    rows += contact_problem_rows()
    gp = gaussopt_plank()
    rows.append(("plank on 20 points, 1 s", "gaussopt (hard, 20 points)", gp["time"],
                 _plank_row(gp)))
    try:
        import mujoco  # noqa: F401
    except ImportError:
        print("(MuJoCo not installed: pip install '.[bench]')")
    else:
        rows += _spatial_rows("gaussopt (hard, circular cone)", gaussopt_spatial())
        for cone in ("pyramidal", "elliptic"):
            rows += _spatial_rows(f"MuJoCo dt 1e-4, {cone} cone", mujoco_spatial(cone))
        dr = _drop_reference()
        rows.append(_drop_row(f"gaussopt (hard, circular cone, e = {DROP_E})",
                              gaussopt_drop(*dr)))
        for cone in ("pyramidal", "elliptic"):
            rows.append(_drop_row(f"MuJoCo dt 1e-4, {cone} cone", mujoco_drop(*dr, cone)))
        rows.append(_log_row("gaussopt (hard, frictionless)", gaussopt_log()))
        for cone in ("pyramidal", "elliptic"):
            rows.append(_log_row(f"MuJoCo dt 1e-4, {cone} cone", mujoco_log(cone)))
        tt = _tippe_reference()
        rows.append(_tippe_row("gaussopt (hard, circular cone)", gaussopt_tippe_top(*tt)))
        for cone in ("pyramidal", "elliptic"):
            rows.append(_tippe_row(f"MuJoCo dt 1e-4, {cone} cone", mujoco_tippe_top(*tt, cone)))
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
        for cone in ("pyramidal", "elliptic"):
            r = mujoco_plank(cone)
            rows.append(("plank on 20 points, 1 s", f"MuJoCo dt 1e-4, {cone} cone", r["time"],
                         _plank_row(r)))
        for label, cone, solref in (("pyramidal cone", "pyramidal", "0.02 1"),
                                    ("elliptic cone", "elliptic", "0.02 1"),
                                    ("elliptic, solref 0.002 1", "elliptic", "0.002 1")):
            r = mujoco_box(cone, solref)
            rows.append(("sliding box, 1 s", f"MuJoCo dt 1e-4, {label}", r["time"], _box_row(r)))
            r = mujoco_box(cone, solref, beta=slope["beta"], v0=0.0, t_end=slope["t_end"])
            rows.append(("box holding on a slope, 2 s", f"MuJoCo dt 1e-4, {label}", r["time"],
                         _box_row(r)))
    print("| problem | simulator | wall time | accuracy |")
    print("|---|---|---|---|")
    for prob, sim, wall, acc in rows:
        shown = "—" if math.isnan(wall) else (f"{wall * 1e3:.3g} ms" if wall < 0.1
                                               else f"{wall:.3g} s")
        print(f"| {prob} | {sim} | {shown} | {acc} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
