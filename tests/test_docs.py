"""Every ```python block of every page of docs/ runs when pasted (in order, one namespace
per page), and the numbers a page states agree with independent references within
derived bounds. The checks moved here with the code they check when the README's user
guide became these pages (the README keeps its pendulum: tests/test_readme.py).

A block that takes longer than about 20 s is marked on the line before its fence with
``<!-- docs-test: slow -->`` (the page says so in its text): the default run leaves it
out, ``pytest -m slow`` runs the page with it.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import ellipk

from test_trajectory import energy_gradient, flow_growth, integration_bound

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))

#: a fenced Python block, with the marker line that may precede it
BLOCK = re.compile(r"^(?:<!-- docs-test: (?P<mark>[a-z]+)[^\n]*-->\n)?```python\n(?P<code>.*?)^```",
                   re.S | re.M)
MARKS = {"slow"}


def blocks(page: Path) -> list:
    """``[(mark or None, code), ...]`` of a page, in order."""
    found = [(m["mark"], m["code"]) for m in BLOCK.finditer(page.read_text())]
    unknown = {mark for mark, _ in found if mark is not None} - MARKS
    assert not unknown, f"{page.name}: unknown docs-test marker(s) {unknown}"
    return found


def _number(out: str, label: str) -> float:
    m = re.search(re.escape(label) + r"\s*([-+0-9.eE]+)", out)
    assert m, f"{label!r} not printed:\n{out}"
    return float(m.group(1).rstrip("."))


def run_page(page: Path, capsys, *, slow: bool) -> tuple:
    """Execute the page's blocks in one namespace; returns ``(ns, out)``."""
    ns: dict = {"__name__": f"docs_{page.stem}"}
    for mark, code in blocks(page):
        if mark == "slow" and not slow:
            continue
        exec(compile(code, str(page), "exec"), ns)
    return ns, capsys.readouterr().out


# ------------------------------------------------------------------------ the checks, by page
def check_quickstart(ns, out):
    # the pendulum's period against 4 sqrt(l/g) K(sin^2(th0/2)), as tests/test_readme.py
    # checks the README's copy: 8 decimals printed (rounding 5e-9) of twice a root located
    # by linear interpolation of v_x between samples 1e-4 s apart at rtol = atol = 1e-12.
    # Error of the root: the state error there over |a_x| (integration_bound; the flow's
    # growth over 3 s is below 10: test_pendulum measures 2.5 over 1.6 s) plus the
    # interpolation error h^2/8 max|v_x''| / |a_x| (|v_x''| <= |a_x'| ~ g sqrt(g/l) ~ 25).
    T = _number(out, "period")
    tr = ns["traj"]
    l, g, th0 = 1.5, 9.81, math.radians(60)
    T_exact = 4 * math.sqrt(l / g) * ellipk(math.sin(th0 / 2) ** 2)
    i = np.flatnonzero((tr.v[:-1, 0] < 0) & (tr.v[1:, 0] >= 0))[0]
    ax = min(abs(tr.a[i, 0]), abs(tr.a[i + 1, 0]))
    h = tr.t[i + 1] - tr.t[i]
    root = (10 * integration_bound(tr, dense=True) + h**2 / 8 * 25.0) / ax
    assert abs(T - T_exact) <= 5e-9 + 2 * root, (T, T_exact, root)
    # one step, four ways, against the step by hand: horizontal (q = (l, 0)) and moving up
    # at 2 m/s, the rod takes the centripetal a_x = -v^2 / l and leaves a_y = -g; its
    # force m a - F = (-m v^2 / l, 0) = Phi_q^T lam with Phi_q = 2 q^T. The GA is within
    # its tolerance 1e-8 (relative), the others within rounding; numpy prints 8 decimals.
    rows = re.findall(r"^(\w+) +a = \[([^\]]+)\], rod force = \[([^\]]+)\], lam = \[([^\]]+)\]",
                      out, re.M)
    assert [r[0] for r in rows] == ["closed_form", "lagrange", "qp", "ga"]
    m, v = 2.0, 2.0
    want_a, want_f = np.array([-v**2 / l, -g]), np.array([-m * v**2 / l, 0.0])
    for name, a, f, lam in rows:
        a, f, lam = (np.array(x.split(), dtype=float) for x in (a, f, lam))
        tol = 1e-8 * np.abs(want_a).max() + 5e-9       # GA tolerance + printed rounding
        assert np.abs(a - want_a).max() <= tol, (name, a)
        assert np.abs(f - want_f).max() <= m * tol, (name, f)
        assert abs(lam[0] - want_f[0] / (2 * l)) <= m * tol / (2 * l), (name, lam)


def check_concepts(ns, out):
    assert "IndeterminateMotionError" in out and "(+1*y)" in out
    # M = diag(1, 0), F = (2, 0), a_y = a_x: minimize a_x^2 / 2 - 2 a_x -> a = (2, 2)
    step = ns["step"]
    assert np.allclose(step.a, [2.0, 2.0], rtol=0, atol=8 * np.finfo(float).eps)
    assert step.info["rank"] == 1


def check_constraints(ns, out):
    eps = np.finfo(float).eps
    # given and automatic derivatives: the automatic gamma errs by ~1e-11 relative to
    # |gamma| + |Phi'| |(1, v)| (gaussopt.model.constraints; tests/test_constraints.py),
    # here ~8 + 4 * 2.2; the one unit-normalized row and M = 2 I pass it to `a` unamplified
    a_auto, a_given = ns["a_auto"], ns["a_given"]
    assert np.abs(a_auto - a_given).max() <= 1e-11 * (8.0 + 4.0 * 2.3) + 100 * eps
    assert "ModelError:" in out and "abs" in out and "complex-step" in out
    # the sleigh: w1 = 1 + 0.75 sin t. The flow of (phi, phi', w1) amplifies errors by at
    # most 1 + |dw1/dphi0| + |dw1/dphi'| + |dphi/dphi'| <= 1 + 0.75 t + 0.75 t^2 / 2 + t = 6.5
    # at t = 2 (phi' is constant, w1' = 0.75 cos phi)
    w1 = _number(out, "sleigh w1(2)")
    assert abs(w1 - (1 + 0.75 * math.sin(2.0))) <= 5e-11 + integration_bound(ns["run"], 6.5)
    assert _number(out, "max |f|") <= 100 * eps
    # constant speed: |v| is a first integral of the flow whatever the state, so its error
    # is the sum of the local errors (times |grad |v|| = 1), whatever the flow's growth
    speed = ns["speed"]
    assert np.abs(speed - 5.0).max() <= integration_bound(ns["tr"])
    # the floor: pressed, a = 0 and the force m g; pulled by 30 N, a_y = (30 - m g) / m
    assert "lift  0.0 N: a = [0. 0.], floor force = [19.62] N" in out
    assert "lift 30.0 N: a = [0.   5.19], floor force = [0.] N" in out


def check_simulate(ns, out):
    # every stabilization keeps the pendulum on its rod, the projection to rounding
    assert _number(out, "projection max |x^2+y^2-l^2|") <= 1e-13
    # the events: zeros at 1, 3, 5 quarter periods, printed to 8 decimals (rounding 5e-9)
    # of t / (T_c / 4) with T_c = 2.6367222070 (10 decimals: relative error 2e-11). An
    # event's time errs by the state's error (integration_bound on the dense output, the
    # flow's growth below 10 as in check_quickstart) over the rate |x'| of f = x there.
    traj = ns["traj"]
    assert traj.status == 1 and len(traj.t_events[0]) == 3
    l, g, th0 = 1.5, 9.81, math.radians(60)
    T = 4 * math.sqrt(l / g) * ellipk(math.sin(th0 / 2) ** 2)
    Tc = 2.6367222070
    rate = np.abs(traj.v_events[0][:, 0]).min()
    dt = 10 * integration_bound(traj, dense=True) / rate
    printed = np.round(traj.t_events[0] / (Tc / 4), 8)
    for k, z in zip((1, 3, 5), printed):
        assert abs(z - k) <= 5e-9 + k * abs(T / Tc - 1) + dt / (Tc / 4), (k, z, dt)
    assert "True True" in out                     # saved and loaded with its events


def check_contacts(ns, out):
    # (from tests/test_contact.py) printed to 12 / 9 / 9 decimals; the run's errors are
    # below 1e-12 (tests/test_contact.py checks them against the analytic impacts)
    pairs = re.findall(r"([-+0-9.eE]+) [sN] \((?:analytic|m g =) ([-+0-9.eE]+) [sN]\)", out)
    assert len(pairs) == 3
    for got, want in pairs:
        assert abs(float(got) - float(want)) <= 2e-9, (got, want)
    # the box on the incline (tests/test_contact_many.py): at rest, the friction forces'
    # sum is m g sin(beta) to rounding (printed to 6 decimals), inside both cones
    got, want = re.findall(r"friction ([-+0-9.eE]+) N = m g sin\(beta\) ([-+0-9.eE]+) N", out)[0]
    assert abs(float(got) - float(want)) <= 1e-6 and "inside both cones: True" in out
    assert "'close stick'), (0.0, 'corners[1]', 'close stick')" in out
    # Newton's cradle (tests/test_impact_laws.py): the velocities after the impact are
    # the impact laws' closed forms to rounding (no force acts before it), printed to
    # 12 decimals
    rows = dict(re.findall(r"(newton|sequential)\s+velocities after the impact: ([-0-9. ]+)",
                           out))
    for law, want in (("newton", [-1 / 3, 2 / 3, 2 / 3]), ("sequential", [0.0, 0.0, 1.0])):
        got = [float(x) for x in rows[law].split()]
        assert np.allclose(got, want, rtol=0, atol=1e-12), (law, got)
    # the sliding sphere (tests/test_contact_cone.py): its roll time and speed. At rtol =
    # atol = 1e-12 the velocities err by at most ~steps x 1e-12 x (1 + |v|) (the local
    # errors summed: ~60 steps, |v| <= 2: 2e-10 m/s), 10x that for the estimates' own
    # slack: 2e-9 m/s; the roll time by that over the slip's deceleration 7/2 mu g ~ 10
    # m/s^2: 2e-10 s (measured 1.3e-11 and 2.6e-11 s on two rounding paths). Printed to
    # 9 decimals, which these errors cannot change by more than one unit.
    got, want = re.findall(r"rolls at t = ([-+0-9.eE]+) s; 2 v0/\(7 mu g\) = ([-+0-9.eE]+) s",
                           out)[0]
    assert abs(float(got) - float(want)) <= 2e-10 + 1e-9
    got, want = re.findall(r"speed then ([-+0-9.eE]+) m/s; 5/7 v0 = ([-+0-9.eE]+) m/s", out)[0]
    assert abs(float(got) - float(want)) <= 2e-9 + 1e-9
    # the plank on 20 points (tests/test_contact_lcp.py): its stop is the zero of the slip
    # rate v0 - mu g t (a polynomial: a few steps at 1e-12, the stop within ~1e-12 s);
    # printed to 9 decimals, one unit of rounding. At rest its forces carry m g (rounding:
    # 1e-10 of m g = 2e-9 N, printed to 9 decimals)
    got, want = re.findall(r"plank stops at t = ([-+0-9.eE]+) s; v0/\(mu g\) = ([-+0-9.eE]+) s",
                           out)[0]
    assert abs(float(got) - float(want)) <= 1e-10 + 1e-9
    got = float(re.findall(r"normal forces at rest: ([-+0-9.eE]+) N on 20 points", out)[0])
    assert abs(got - 2.0 * 9.81) <= 2e-9 + 1e-9


def check_multibody(ns, out):
    assert "9 coordinates, 8 joint equations" in out and "1 DOF" in out
    # the cart pushed through a filter: the closed forms x = (u/m)(t^2/2 - tau t + tau^2 (1 -
    # e^(-t/tau))), act = u (1 - e^(-t/tau)) at t = 0.5 s; the run at rtol 1e-10 is within
    # 1e-9 of them, the page prints 6 decimals (rounding 5e-7)
    t, tau, u, m = 0.5, 0.05, 3.0, 2.0
    x = (u / m) * (t ** 2 / 2 - tau * t + tau ** 2 * (1 - np.exp(-t / tau)))
    assert "('x', 'push.act') {'push': 1}" in out
    got = re.search(r"^x ([0-9.]+) m \(exact [0-9.]+\), act ([0-9.]+)", out, re.M)
    assert got, out
    assert abs(float(got.group(1)) - x) <= 5e-7 + 1e-9
    assert abs(float(got.group(2)) - u * (1 - np.exp(-t / tau))) <= 5e-7 + 1e-9
    # the gripper: the coupled fingers (r = l) reduce the servo's law to l'' = 100 u - 200 l
    # - 20 l', solved exactly (expm); RK4 at dt 1e-3 (omega dt = 0.014) leaves a global
    # error ~ (omega dt)^4 times the offset 0.03 m ~ 1e-9 m, below the printed 6 decimals
    # (rounding 5e-7); DOP853 at the default rtol 1e-9 the same
    from scipy.linalg import expm
    assert "[['soft-constraint parameters (solref/solimp) of the mapped equality" in out
    x = expm(np.array([[0.0, 1.0], [-200.0, -20.0]])) @ np.array([0.04 - 0.01, 0.0])
    opening = 2 * (0.01 + x[0])
    assert abs(_number(out, "opening after 1 s:") - opening) <= 1e-6
    assert abs(_number(out, "simulate (DOP853): opening") - opening) <= 1e-6
    qg = ns["gripper_stepper"].q
    assert abs(qg[1] - qg[0]) < 1e-14
    assert max(abs(r - l) for l, r in ns["gripper_run"].q) < 1e-14
    # the tied arm (joint coordinates): 5 coordinates, 4 independent rows; its elbow angle is
    # fixed by the law of cosines (shoulder-to-tie distance sqrt(0.58), links 0.5 m), and
    # the projection keeps the loop and the angle at rounding of |q| ~ 1 (1e-12: margin 1e3)
    assert "5 coordinates, 4 joint equations" in out and "rank 4" in out
    arm, run = ns["arm"], ns["arm_run"]
    assert run.success
    assert np.abs(np.abs(run["elbow"]) - np.arccos((0.58 - 0.5) / 0.5)).max() < 1e-12
    assert max(np.abs(arm.phi(0.0, x)).max() for x in run.q) < 1e-12
    # the slider-crank's crank angle at 2 s against gaussopt_problems.slider_crank's reduced
    # one-DOF ODE (DOP853 at 1e-13): the bound of the run's global error with the growth
    # of the reduced flow (flow_growth), plus the reference's own error; the page prints
    # the value to 6 decimals (rounding 5e-7)
    from gaussopt_problems import slider_crank as sc

    th = _number(out, "crank angle at 2 s:")
    tr = ns["traj"]
    ts = np.linspace(0.0, 2.0, 81)
    growth = flow_growth(lambda y, t: sc.reference(t, th0=y[0], w0=y[1]), [np.pi / 6, 0.0], ts)
    bound = integration_bound(tr, growth, ref_tol=1e-13)
    assert abs(th - sc.reference(2.0)[0, 0]) <= 5e-7 + bound, (th, bound)
    # the ball on a floor from MJCF: rolls at 2 v0 / (7 mu g) (closed form), mu = max(0.3,
    # 0.1); the run at 1e-12 locates the event to 1e-9 relative (tests/test_contact_cone.py's
    # bound), printed to 10 decimals (rounding 5e-11); the velocity 5/7 v0 to 1e-8
    # the body swung by its mocap pivot (x_p = 0.1 sin 3t): its centroid's x = x_p + d sin th
    # with th of the reduced equation I_p th'' = -m g d sin th - m d x_p'' cos th (DOP853 at
    # 1e-13); the run's global error bound with the reduced flow's growth (as the slider
    # crank's), plus the 6 printed decimals' rounding 5e-7
    assert "('hand',) ['f.norm', 'Connect(bob,hand)[x]'" in out
    m_, d_, Ip = 1.3, 0.4, 0.03 + 1.3 * 0.16

    def swing(y0, t):
        def f(s, y):
            return [y[1], (-m_ * 9.81 * d_ * np.sin(y[0])
                           + m_ * d_ * 0.9 * np.sin(3 * s) * np.cos(y[0])) / Ip]
        return solve_ivp(f, (0.0, t[-1]), y0, method="DOP853", rtol=1e-13, atol=1e-13,
                         t_eval=t).y

    sw = ns["swing_run"]
    growth = flow_growth(swing, [0.0, 0.0], np.linspace(0.0, 2.0, 81))
    th = swing([0.0, 0.0], np.array([0.0, 2.0]))[0, -1]
    x_ref = 0.1 * np.sin(6.0) + d_ * np.sin(th)
    assert sw.success
    assert abs(_number(out, "bob at x =") - x_ref) <= 5e-7 + integration_bound(
        sw, growth, ref_tol=1e-13)
    assert np.abs(sw.position_residual).max() < 1e-12
    assert "[('floor', 'ball', 'plane-sphere', 0.3)]" in out
    assert abs(_number(out, "rolls from t =") - 2 * 2.0 / (7 * 0.3 * 9.81)) <= 5e-11 + 2e-10
    assert abs(ns["ball_run"].v[-1][0] - 5 / 7 * 2.0) <= 1e-8


def check_spatial(ns, out):
    # (from tests/test_spatial.py)
    assert "Gruebler count -4); rank 6" in out and "1 DOF" in out
    model, traj, axis = ns["model"], ns["traj"], np.asarray(ns["axis"])
    assert traj.success
    # independent: the energy integral of the swing about the fixed axis. The door's
    # centroid c moves on a circle about the axis; at rest at the start, its swing rate
    # w at any sample obeys J_axis w^2 / 2 = m g (z0 - z) with J_axis = u^T J u + m d^2.
    door = model.bodies[0]
    u = axis / np.linalg.norm(axis)
    c0 = door.reference_position
    low = np.array([0.0, 0.0, 0.2])
    d = c0 - low - ((c0 - low) @ u) * u
    J_axis = u @ door.inertia_tensor @ u + door.mass * (d @ d)
    z = traj.q[:, 2]
    w = model.angular_velocity(door, traj.q, traj.v) @ u
    # the run's defaults (rtol 1e-9) give errors ~1e-8 relative in the state; the
    # energy integral in w^2 is then met to ~1e-7 of m g |dz| + J w^2
    scale = door.mass * 9.81 * np.ptp(z) + J_axis * np.max(w * w)
    assert np.max(np.abs(0.5 * J_axis * w * w - door.mass * 9.81 * (z[0] - z))) < 1e-6 * scale
    assert np.ptp(z) > 0.01           # it does swing
    assert "[redundant: minimum-norm choice, not unique]" in out


def check_symbolic(ns, out):
    # the pendulum released from the horizontal, against its reduced equation
    # th'' = -(g/l) sin th (th from the downward vertical; DOP853 at 1e-13). The run's
    # error bound (integration_bound) is carried by the reduced flow's growth G and by
    # the chart (th, w) -> (q, v) = (l sin th, -l cos th, l w cos th, l w sin th) both
    # ways: K = max |chart'| * max |chart'^+| over the run.
    traj = ns["traj"]
    l, g = 1.5, 9.81

    def reference(y0, t):
        sol = solve_ivp(lambda s, y: [y[1], -g / l * math.sin(y[0])], (0.0, t[-1]), y0,
                        method="DOP853", rtol=1e-13, atol=1e-13, t_eval=t)
        return sol.y

    ts = np.linspace(0.0, 2.0, 81)
    G = flow_growth(reference, [math.pi / 2, 0.0], ts)
    th, w = reference([math.pi / 2, 0.0], traj.t)
    jac = [np.array([[l * math.cos(a), 0.0], [l * math.sin(a), 0.0],
                     [-l * b * math.sin(a), l * math.cos(a)], [l * b * math.cos(a), l * math.sin(a)]])
           for a, b in zip(th, w)]
    K = max(np.linalg.norm(J, 2) for J in jac) * max(np.linalg.norm(np.linalg.pinv(J), 2)
                                                     for J in jac)
    bound = integration_bound(traj, K * G, ref_tol=1e-13)
    q_ref = l * np.array([math.sin(th[-1]), -math.cos(th[-1])])
    assert np.abs(traj.q[-1] - q_ref).max() <= bound, (traj.q[-1], q_ref, bound)
    # the printed residual is rounding level; the energy drift is within the sum of the
    # local errors times |grad E| (the energy is a first integral)
    assert traj.position_residual.max() <= 1e-13
    assert np.abs(traj.energy_drift).max() <= energy_gradient(ns["pendulum"], traj) \
        * integration_bound(traj)


def check_quasi(ns, out):
    # w1 = 1 + 0.75 sin t; the flow's growth as in check_constraints (6.5)
    tr = ns["tr"]
    w1 = _number(out, "w1(2)")
    assert abs(w1 - (1 + 0.75 * math.sin(2.0))) <= 5e-11 + integration_bound(tr, 6.5)
    assert ns["qv"].k == 2
    assert _number(out, "max |f|") <= 100 * np.finfo(float).eps


def check_speed(ns, out):
    # the hanging chain released at rest: with v = 0 the rows are A a = 0 and
    # M a = F + A^T lam, so the tensions solve (A M^-1 A^T) lam = -A M^-1 F, a tridiagonal
    # system (banded solve, no gaussopt). Its condition number ~ N^2 bounds the error of
    # both answers: 100 eps cond |a|.
    from scipy.linalg import solve_banded

    step, q0, m, g, N = ns["step"], ns["q0"], ns["m"], ns["g"], ns["N"]
    assert step.info["sparse"] is True
    A = ns["jac"](0.0, q0)
    F = np.tile([0.0, -m * g], N)
    S = (A @ A.T).toarray() / m
    ab = np.zeros((3, N))
    ab[0, 1:] = np.diag(S, 1)
    ab[1] = np.diag(S)
    ab[2, :-1] = np.diag(S, -1)
    lam = solve_banded((1, 1), ab, -(A @ F) / m)
    a = (F + A.T @ lam) / m
    cond = np.linalg.cond(S)
    assert np.abs(step.a - a).max() <= 100 * np.finfo(float).eps * cond * np.abs(a).max()
    # the chain of hinges on the recursive step, against numpy's solve of M a = F with the
    # composite-rigid-body M and Newton--Euler F (no recursion): 100 eps cond(M) |a|
    sysm, tq, tv, tstep = ns["tree_chain"].system, ns["tq"], ns["tv"], ns["tstep"]
    assert tstep.info["recursive"] is True
    M, F = sysm.mass(0.0, tq), sysm.force(0.0, tq, tv)
    a = np.linalg.solve(M, F)
    assert np.abs(tstep.a - a).max() <= 100 * np.finfo(float).eps * np.linalg.cond(M) * np.abs(a).max()
    ttr = ns["ttr"]
    assert ttr.success and ttr.stats["sparse_steps"] == ttr.stats["rhs_evaluations"]


def check_problems(ns, out):
    # the free swing of paper 001's four-bar against its reduced ODE (the problem's
    # reference): the acceptance of tests/test_problems_core.py, th1 within 1e-6 (a
    # requirement, not an error estimate: the provable bound through the singular
    # positions is far looser; tests/test_four_bar_step.py derives it for psi = 0)
    assert float(out.split()[-1]) < 1e-6


def check_sweeps(ns, out):
    res = ns["res"]
    assert len(res.rows) == 6 and all(r["success"] for r in res.rows)
    # the two solvers solve the same step: the same final angle to the printed digits
    by = {(r["solver"], r["psi"]): r["final_th1"] for r in res.rows}
    for psi in (150.0, 300.0, 450.0):
        assert abs(by["closed_form", psi] - by["lagrange", psi]) < 5e-7


def check_stepper(ns, out):
    # the PD loop against the reduced equation (5/3) m l^2 th'' = psi - 2 m g l cos th,
    # integrated here by the classical RK4 in numpy at the same dt with the same torques
    # held over each step: two RK4 discretizations of one motion, each with a global
    # error of ~2e-12 rad per 0.4 s on this model (Richardson, tests/test_stepper.py) in a
    # contracting closed loop; 1e-9 rad bounds their difference with a wide margin
    m, l, g, dt = 12.0, 2.0, 9.8, 1e-3
    y = np.array([np.pi / 3, 0.0])
    for psi in ns["psis"]:
        def f(z, psi=psi):
            return np.array([z[1], (psi - 2 * m * g * l * np.cos(z[0])) / (5 / 3 * m * l * l)])
        k1 = f(y)
        k2 = f(y + dt / 2 * k1)
        k3 = f(y + dt / 2 * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    st = ns["stepper"]
    assert abs(st.q[0] - y[0]) <= 1e-9 and abs(st.v[0] - y[1]) <= 1e-9
    # the printed numbers: the crank on the target to the 6 decimals shown (the linear
    # closed loop's error after 4 s is 0.22 e^-20 21 = 1e-8 rad), the rate ~1e-8
    assert _number(out, "t =") == 4.0
    assert _number(out, "crank") == _number(out, "target")
    assert abs(_number(out, "rate")) < 1e-6
    assert _number(out, "loop closure |Phi|") <= 1e-13


def check_compare(ns, out):
    comp = ns["comp"]
    assert set(comp.trajectories) == {"closed_form", "lagrange", "qp", "ga"}
    assert all(tr.success for tr in comp.trajectories.values())


CHECKS = {"quickstart": check_quickstart, "concepts": check_concepts,
          "constraints": check_constraints, "simulate": check_simulate,
          "contacts": check_contacts, "multibody": check_multibody, "spatial": check_spatial,
          "symbolic": check_symbolic, "quasi": check_quasi, "speed": check_speed,
          "problems": check_problems, "sweeps": check_sweeps, "compare": check_compare,
          "stepper": check_stepper}

WITH_CODE = [p for p in PAGES if blocks(p)]
WITH_SLOW = [p for p in PAGES if any(mark == "slow" for mark, _ in blocks(p))]


@pytest.mark.parametrize("page", WITH_CODE, ids=[p.stem for p in WITH_CODE])
def test_page_code_runs_and_prints_the_stated_numbers(page, monkeypatch, capsys):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ns, out = run_page(page, capsys, slow=False)
    check = CHECKS.get(page.stem)
    if check is not None and not any(mark == "slow" for mark, _ in blocks(page)):
        check(ns, out)


@pytest.mark.slow
@pytest.mark.parametrize("page", WITH_SLOW, ids=[p.stem for p in WITH_SLOW])
def test_page_code_with_its_slow_blocks(page, monkeypatch, capsys):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ns, out = run_page(page, capsys, slow=True)
    check = CHECKS.get(page.stem)
    if check is not None:
        check(ns, out)


def test_every_page_with_code_is_checked_or_says_why_not():
    """A page that prints numbers has a check here (a new page: add one)."""
    unchecked = {p.stem for p in WITH_CODE} - set(CHECKS)
    assert unchecked == set()


def test_every_page_is_in_the_index():
    index = (DOCS / "index.md").read_text()
    listed = set(re.findall(r"^([a-z_]+)$", index, re.M))
    assert {p.stem for p in PAGES} - {"index"} <= listed


def test_layout_table_names_modules_that_exist():
    """docs/layout.md's table old path -> new path (and CHANGELOG.md's copy): every new
    path is a file of the tree, every old one is not."""
    for doc in (DOCS / "layout.md", ROOT / "CHANGELOG.md"):
        text = doc.read_text().partition("## Old module paths")[2] or doc.read_text()
        rows = re.findall(r"^\| `(gaussopt/[^`]+)` \| (.*) \|$", text, re.M)
        assert len(rows) > 50, doc
        for old, new in rows:
            assert not (ROOT / old).exists(), (doc.name, old)
            for path in re.findall(r"`(gaussopt/[^`]+\.py)`", new):
                assert (ROOT / path).is_file(), (doc.name, old, path)


def test_citation_names_this_version():
    import gaussopt

    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(r'^version: "?([^"\n]+)"?$', cff, re.M).group(1) == gaussopt.__version__
    assert re.search(r"^cff-version: 1\.2\.0$", cff, re.M)
