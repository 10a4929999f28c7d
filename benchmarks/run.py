"""gaussopt against the tools its users would otherwise pick: one table, one run.

Run: ``python3 benchmarks/run.py [--quick] [--skip-compile] [--repeat N]
[--only large|contact|spatial]``
(the peers are an extra: ``pip install ".[bench]"`` installs Pinocchio and
MuJoCo; a missing peer prints ``n/a``). Every row is measured in this run:
gaussopt, the peer, the ratio gaussopt / peer, and the accuracy of each
against the same independent reference (the four-bar's reduced
one-coordinate equation of :mod:`gaussopt_problems.four_bar`, the N-four-bar's of
:mod:`gaussopt_problems.n_four_bar`, Clarabel's own answer checked against the closed
form). Times are medians of repeated batches (``timeit``) or of repeated
whole runs, with one BLAS thread; wall time is ``time.perf_counter``.

Rows
----
* one step of the paper-001 four-bar at ``th1 = pi/3``, crank rate 1.3:
  ``go.solve_step`` (full ``StepResult``), the solver's hot path
  (``acceleration``), and the step inside ``simulate`` (the compiled
  ``evaluate_step`` in a compiled loop: what one right-hand side costs the
  engine), against Pinocchio's ``constraintDynamics`` on the same planar
  four-bar in joint coordinates;
* the verification inside the kernel step (its share of the step);
* the four-bar for 20 s with ``gaussopt_problems.four_bar.build(t_end=20)``'s
  recommended settings against MuJoCo at ``dt = 1e-3`` with its default
  (Euler) integrator, and gaussopt's ``rk4`` at ``dt = 1e-3`` against
  Pinocchio + the same RK4 in a Python loop;
* the QP step (Clarabel called directly by gaussopt) against the closed form,
  and against Clarabel called directly on the same QP by hand;
* the QP step with an ``Inequality`` row (paper 002's disk with the unilateral
  contact, :mod:`gaussopt_problems.ellipse_rolling`), in contact and lifted off, against
  the closed form of the same disk with the contact as an equality;
* contacts (:mod:`gaussopt.integrate.contact_run`): the step of paper 002's disk (case4) with its
  ``Contact`` closed (``friction = inf``: the gap and the no-slip row), as a contact run
  computes it where the contact state is decided (``contact_step``: the active-set
  solution of ``lcp.solve_contact`` with its verification), against the closed form of
  the same disk with the gap and the slip as ``go.Holonomic`` equalities; that
  verification (``lcp.verify``: forces >= 0, no penetration, complementarity) on its
  own; a step inside a closed-contact phase (the disk rolling from ``t = 0`` to 2.5 s,
  before its lift-off: the engine's step plus the lift-off watch, the normal force's
  sign at the step's end and middle, screened: :mod:`gaussopt.integrate.contact_run`)
  against the same run of the equality model; and a
  bouncing ball (``e = 0.95``) from release to rest, 219 impacts, against the 0.2 s
  target of 200 impacts (wall time, and the process's CPU time: on a shared machine the
  wall time also counts other processes);
* the N-four-bar step for N = 10..80 against ``scipy.sparse.linalg.splu`` of
  the same KKT matrix (and the growth exponents), and a 10 s run at N = 40
  against its target (not with ``--quick``);
* the GA step at ``tol = 1e-6``;
* one step of a 6-link spatial arm (``tests/data/arm6.urdf`` through
  :func:`gaussopt.multibody.load`) against ``pinocchio.aba``, both checked against
  MuJoCo's ``qacc``;
* the IFToMM A04 Bricard linkage (``problems/bricard.py``): 10 s at ``go.simulate``'s
  default settings against MuJoCo on ``tests/data/bricard.xml`` (max error of P2
  against the joint-angle reference, wall time), and one step against
  ``pinocchio.constraintDynamics`` (``--only spatial`` runs the spatial rows alone);
* ``go.Stepper`` (``benchmarks/stepper.py``, ``--only stepper`` runs these rows alone):
  its per-call overhead over the compiled step, 1000 fixed steps of the four-bar in a
  control loop against MuJoCo's ``mj_step`` (RK4 and its default Euler; both accuracies
  against the reduced equation), the one-step ``go.simulate`` loop it replaces, and
  ``go.solve_step``'s cost over the compiled step on the four-bar and the spatial arm
  (CPU time, minima of the batches);
* the first-call compile time of the kernels in a fresh cache, and the load
  time from the cache.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gaussopt as go  # noqa: E402
import gaussopt.core.records as R  # noqa: E402
import peers  # noqa: E402
from gaussopt_problems import four_bar, n_four_bar  # noqa: E402

from table import ROWS, _f, add, median_us  # noqa: E402


# ----------------------------------------------------------------------------- one step
def step_rows(repeat):
    print("one step of the four-bar", flush=True)
    th1, w = np.pi / 3, 1.3
    sysm = four_bar.system()
    q = np.array([th1, th1, np.pi - th1])
    v = np.array([w, w, -w])
    ref = peers.reduced_acceleration(th1)
    r = go.solve_step(sysm, 0.0, q, v)
    acc = abs(r.a[0] - ref) / abs(ref)
    t_full = median_us(lambda: go.solve_step(sysm, 0.0, q, v), repeat, 5000)
    solver = sysm._solver_cache["closed_form"]
    t_hot = median_us(lambda: solver.acceleration(0.0, q, v), repeat, 5000)
    t_in = in_simulate_step_us(solver, q, v, repeat)
    try:
        p = peers.pinocchio_four_bar(th1=th1, w=w, repeat=repeat)
        pv, pa = p["constraint_dynamics_us"], p["rel_err"]
    except ImportError:
        pv = pa = None
    add("four-bar solve_step closed_form", t_full, acc, "Pinocchio constraintDynamics", pv, pa,
        "<= 3")
    add("four-bar hot path (solver.acceleration)", t_hot, acc, "Pinocchio constraintDynamics",
        pv, pa)
    add("four-bar step inside simulate (compiled)", t_in, acc, "Pinocchio constraintDynamics",
        pv, pa, "<= 1.5")
    r = go.solve_step(sysm, 0.0, q, v, "qp")
    acc_qp = abs(r.a[0] - ref) / abs(ref)
    t_qp = median_us(lambda: go.solve_step(sysm, 0.0, q, v, "qp"), repeat, 1000)
    add("four-bar solve_step qp", t_qp, acc_qp, "gaussopt solve_step closed_form", t_full, acc,
        "<= 3")
    try:
        c_us, c_acc = clarabel_by_hand(sysm, q, v, r.a, repeat)
    except ImportError:
        c_us = c_acc = None
    add("four-bar solve_step qp", t_qp, acc_qp, "Clarabel direct (pre-built, update in place)",
        c_us, c_acc)
    ellipse_qp_rows(repeat)
    v_us, k_us = verification_us(sysm, q, v, repeat)
    add("four-bar: verification of the step (kernel check)", v_us, None,
        "the whole kernel step (decision, solve, verification)", k_us, acc)
    return t_full


def verification_us(sysm, q, v, repeat):
    """The cost of the per-step verification (:func:`gaussopt.gauss.dense_step.check`: backward
    error of the optimality conditions, inconsistency, vanished rows) and of the whole
    kernel step that contains it, both in compiled loops on the four-bar's M, F, A, b."""
    import numba as nb

    import gaussopt.gauss.dense_step as K
    import gaussopt.gauss.workspace as WS
    from gaussopt.core.views import wfull

    M, F, A, b = (np.array(x, dtype=float) for x in sysm.evaluate(0.0, q, v))   # (writable)
    n, m = M.shape[0], A.shape[0]
    w = K.make_work(n, m)
    ref = np.zeros(m)
    tol = 1e-8

    @nb.njit(cache=True)
    def loop_step(M, F, A, b, ref, tol, wf, wi, count):
        w = WS.Work(wf, wi)
        acc = 0.0
        for _ in range(count):
            out = K.gauss_step(M, F, A, b, ref, 0.0, tol, K.CLOSED_FORM, False, False, w)
            acc += wfull(w, out[1])[0]
        return acc

    @nb.njit(cache=True)
    def loop_check(M, F, A, b, ref, tol, wf, wi, count):
        w = WS.Work(wf, wi)
        status, wgt, mL, r, k, c_norm, dmin, flags = K.decide(M, A, b, ref, 0.0, tol, w)
        K.closed_form(M, F, wgt, mL, r, w)
        a = wfull(w, WS.F_a).copy()
        acc = 0.0
        for _ in range(count):
            acc += K.check(M, F, A, b, ref, tol, mL, r, k, c_norm, a, w)[3]
        return acc

    out = []
    for loop in (loop_check, loop_step):
        loop(M, F, A, b, ref, tol, w.f, w.i, 10)
        count = 200000
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            loop(M, F, A, b, ref, tol, w.f, w.i, count)
            times.append(time.perf_counter() - t0)
        out.append(float(np.median(times)) / count * 1e6)
    return out[0], out[1]


def in_simulate_step_us(solver, q, v, repeat):
    """The compiled step as the engine calls it: model + kernel, in a compiled loop."""
    import numba as nb

    import gaussopt.integrate.engine as E
    from gaussopt.core.model_interface import functions

    ctx = solver._context()
    handle = ctx[0]

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
    md = E.model_data(mf, solver.system)
    buf = E.buffers(mf)
    oi = np.zeros(R.N_OI, dtype=np.int64)
    of = np.zeros(R.N_OF)
    of[E.F_RANKTOL] = solver.rank_tol
    opt = E.Options(oi, of)
    w = ctx[7]
    ref = np.zeros(ctx[6])
    sref = np.zeros(1)
    args = (mf.addrs, E.pack(md), E.pack(buf), E.pack(opt), ref, sref, q, v, w)
    loop(*args, 10)
    t0 = time.perf_counter()
    loop(*args, 10)
    one = (time.perf_counter() - t0) / 10
    count = int(min(200000, max(10, 0.2 / max(one, 1e-9))))     # ~0.2 s per repeat
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        loop(*args, count)
        times.append(time.perf_counter() - t0)
    del handle
    return float(np.median(times)) / count * 1e6


def clarabel_by_hand(sysm, q, v, a_qp, repeat):
    """Clarabel on min 1/2 a^T M a - F^T a s.t. A a = b, built once and updated in place
    (``presolve_enable=False``), M, F, A, b evaluated once: the bare solver's cost."""
    import clarabel
    import scipy.sparse as sp

    M, F, A, b = sysm.evaluate(0.0, q, v)
    n, m = M.shape[0], A.shape[0]
    P = sp.triu(sp.csc_matrix(M + 1e-300), format="csc")
    Asp = sp.csc_matrix(A)
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.presolve_enable = False
    solver = clarabel.DefaultSolver(P, -F, Asp, b, [clarabel.ZeroConeT(m)], st)
    sol = solver.solve()
    x = np.array(sol.x)

    def step():
        solver.update(q=-F, b=b)
        return solver.solve()

    us = median_us(step, repeat, 500)
    ref = peers.reduced_acceleration(q[0])
    return us, abs(x[0] - ref) / abs(ref)


def ellipse_qp_rows(repeat):
    """The QP step with an :class:`~gaussopt.Inequality` row: paper 002's disk (case4,
    ``fx = 3``) with the unilateral contact (:func:`gaussopt_problems.ellipse_rolling.build`,
    ``unilateral=True``), in contact and lifted off, against the closed form of the same
    disk with the contact as an equality.

    The peer is ``ellipse_rolling.system(derivation="hand")``: the bilateral model built
    from the same hand-written rows (``contact_jac``, ``contact_gamma``, the rolling row)
    that the unilateral variant evaluates, so both steps pay the same model evaluation in
    Python and the ratio is that of the step solvers (``build(unilateral=False)``'s default
    model is derived by sympy instead, about 15 % cheaper to evaluate; neither is compiled).

    States (from the bilateral reduced solution, so ``gap = gap' = 0`` and the contact
    row's Baumgarte terms vanish): ``t = 1 s``, normal force 8.6 N, where the inequality
    is active and the motion is the bilateral one; and ``t = 3.2 s``, after the bilateral
    normal force turns negative (3.07 s), with the centroid raised 1 cm off the line
    (lifted off: the row is inactive). Accuracy, max |a - a_ref| / max |a_ref|: in
    contact ``a_ref`` is the reduced one-coordinate equation's (:func:`reference_solution`,
    independent of gaussopt; the peer against the same); lifted off, ``a_ref`` is Gauss's
    step with the rolling row alone, written out here (the rolling row stays bilateral in
    flight, see :func:`~gaussopt_problems.ellipse_rolling.system`, so it is not ``M^-1 F``), and the
    peer, which still holds the contact, against the reduced equation at the same
    ``theta, theta'`` (its rows do not depend on ``yc``).
    """
    from gaussopt_problems import ellipse_rolling as er

    pu = er.build("case4", unilateral=True)
    p = pu.params
    kw = {k: p[k] for k in ("a", "b", "m", "g", "J", "fx", "fy", "tau", "theta0", "omega0",
                            "xc0")}
    a_, b_, m, g, J, fx, fy, tau = (p[k] for k in ("a", "b", "m", "g", "J", "fx", "fy", "tau"))
    s_qp = pu.system
    s_cf = er.system(a=a_, b=b_, m=m, g=g, J=J, fx=fx, fy=fy, tau=tau, derivation="hand")
    for t, lift, label in ((1.0, 0.0, "in contact"), (3.2, 0.01, "lifted off 1 cm")):
        r = er.reference_solution([t], **kw)
        th, w = float(r["theta"][0]), float(r["omega"][0])
        q = np.array([r["xc"][0], r["yc"][0] + lift, th])
        v = np.array([r["vx"][0], r["vy"][0], w])
        # the reduced equation's acceleration (a = M^-1 (F + constraint force))
        reduced = np.array([(r["friction_force"][0] + fx) / m,
                            (r["normal_force"][0] + fy - m * g) / m, r["alpha"][0]])
        if lift == 0.0:
            a_ref = reduced
        else:
            # Gauss's step with the rolling row [1, 0, rho] a = -rho' th'^2 alone
            Minv = np.array([1.0 / m, 1.0 / m, 1.0 / J])
            F = np.array([fx, fy - m * g, tau])
            row = np.array([1.0, 0.0, float(er.rho(th, a_, b_))])
            rhs = -float(er.rho_d1(th, a_, b_)) * w * w
            lam = (rhs - row @ (Minv * F)) / (row @ (Minv * row))
            a_ref = Minv * (F + lam * row)
        res = go.solve_step(s_qp, 0.0, q, v, "qp")
        acc_qp = float(np.max(np.abs(res.a - a_ref)) / np.max(np.abs(a_ref)))
        mu = float(res.info["inequality_multipliers"][0])
        t_qp = median_us(lambda: go.solve_step(s_qp, 0.0, q, v, "qp"), repeat, 1000)
        res_cf = go.solve_step(s_cf, 0.0, q, v, "closed_form")
        acc_cf = float(np.max(np.abs(res_cf.a - reduced)) / np.max(np.abs(reduced)))
        t_cf = median_us(lambda: go.solve_step(s_cf, 0.0, q, v, "closed_form"), repeat, 1000)
        add(f"unilateral ellipse solve_step qp (Inequality contact row), {label}, "
            f"mu = {mu:.2g} N", t_qp, acc_qp,
            "closed_form solve_step, same ellipse, contact as an equality", t_cf, acc_cf,
            "<= 3")


# ----------------------------------------------------------------------------- contacts
def contact_rows(repeat):
    """Contacts: the contact step against the closed form of the same system with the
    contact as an equality, its verification, a step inside a closed phase, and the
    bouncing ball's run time (see the module docstring).

    The disk: paper 002's case4 (``fx = 3``) at ``t = 1 s`` of the reduced solution
    (normal force 8.6 N: the contact pushes, the motion is the bilateral one), with
    ``contact=True, friction=inf`` (the gap and the slip of the same hand-written
    functions, :func:`gaussopt_problems.ellipse_rolling.system`) and, as the peer,
    ``rolling="holonomic", derivation="hand"`` (the gap and the integrated slip as
    ``go.Holonomic`` rows). Accuracy: max |a - a_ref| / max |a_ref| against the reduced
    one-coordinate equation. The phase rows: DOP853 at ``rtol = atol = 1e-11``
    (``build``'s settings), per accepted step; accuracy: max |q - q_ref| at 2.5 s against
    the reduced equation.
    """
    import gaussopt.gauss.contact_problem as lcp
    from gaussopt.integrate.contact_run import _Model, contact_step
    from gaussopt_problems import bouncing_ball
    from gaussopt_problems import ellipse_rolling as er

    print("contacts", flush=True)
    pc = er.build("case4", contact=True, friction=float("inf"))
    p = pc.params
    kw = {k: p[k] for k in ("a", "b", "m", "g", "J", "fx", "fy", "tau")}
    s_c = pc.system
    s_eq = er.system(**kw, rolling="holonomic", derivation="hand", xc0=p["xc0"],
                     theta0=p["theta0"])
    ref_kw = {**kw, **{k: p[k] for k in ("theta0", "omega0", "xc0")}}
    r = er.reference_solution([1.0], **ref_kw)
    q = np.array([r["xc"][0], r["yc"][0], r["theta"][0]])
    v = np.array([r["vx"][0], r["vy"][0], r["omega"][0]])
    a_ref = np.array([(r["friction_force"][0] + p["fx"]) / p["m"],
                      (r["normal_force"][0] + p["fy"] - p["m"] * p["g"]) / p["m"],
                      r["alpha"][0]])
    t = 1.0
    model = _Model(s_c, t, q)
    model.base.check(t, q, v)
    cand = np.ones(model.k, dtype=bool)
    idx, sol = contact_step(model, t, q, v, cand, start=[0])
    acc_c = float(np.max(np.abs(sol.x - a_ref)) / np.max(np.abs(a_ref)))
    t_c = median_us(lambda: contact_step(model, t, q, v, cand, start=[0]), repeat, 1000)
    res = go.solve_step(s_eq, t, q, v)
    acc_eq = float(np.max(np.abs(res.a - a_ref)) / np.max(np.abs(a_ref)))
    t_eq = median_us(lambda: go.solve_step(s_eq, t, q, v), repeat, 1000)
    add(f"ellipse contact step, closed, friction inf (contact_step: solve_contact, "
        f"N = {sol.nu[0]:.3g} N)", t_c, acc_c,
        "closed_form solve_step, same ellipse, gap and slip as go.Holonomic", t_eq, acc_eq,
        "<= 3")
    M, F, _, _ = model.base.evaluate(t, q, v)
    G, _, gam = model.points.normal_rows(t, q, v)
    G, h = G[idx], gam[idx]
    W = [int(i) for i in np.flatnonzero(sol.active)]

    def verification():
        return lcp.verify(M, F, G, h, sol.x, sol.nu, W)

    neg, out = verification()[:2]
    assert not neg and not out, "the contact step of the benchmark fails its own checks"
    t_v = median_us(verification, repeat, 5000)
    add("ellipse contact step: its normal checks (lcp.verify)", t_v,
        None, "the whole contact step", t_c, acc_c)

    # a closed phase: the run of the contact model before its lift-off (one phase)
    span = (0.0, 2.5)
    st = dict(pc.settings)

    def run(system):
        return go.simulate(system, span, pc.q0, pc.v0, **st)

    # (the two runs interleaved, CPU-time minima: on a shared machine their medians moved
    # by 2x between minutes, and a ratio of two separate medians with them)
    from stepper import _interleaved

    systems = {"contact": s_c, "equality": s_eq}
    trs = {name: run(system) for name, system in systems.items()}
    best = _interleaved({name: (lambda s=system: run(s), 1) for name, system in systems.items()},
                        max(repeat, 5))
    rr = er.reference_solution([span[1]], **ref_kw)
    q_ref = np.array([rr["xc"][0], rr["yc"][0], rr["theta"][0]])
    walls = {name: (best[name] / tr.stats["steps"] * 1e6,
                    float(np.max(np.abs(tr.q[-1] - q_ref))), tr.stats["steps"])
             for name, tr in trs.items()}
    (w_c, e_c, n_c), (w_eq, e_eq, n_eq) = walls["contact"], walls["equality"]
    add(f"ellipse closed-contact phase, per step ({n_c} steps to 2.5 s, with the lift-off "
        "watch; CPU, interleaved minima)", w_c, e_c,
        f"the same run of the equality model, per step ({n_eq} steps)", w_eq, e_eq, "<= 1.5")
    add("ellipse closed-contact phase: the lift-off watch per step (normal force sign at "
        "the end and the middle; the difference of the two runs)", w_c - w_eq, None,
        "the equality model's step in its run", w_eq, e_eq)

    # the bouncing ball from release to rest (e = 0.95: 219 impacts)
    pb = bouncing_ball.build(e=0.95, t_end=25.0)
    tr = pb.simulate()
    times, cpu = [], []
    for _ in range(max(repeat // 2, 3)):
        t0, c0 = time.perf_counter(), time.process_time()
        tr = pb.simulate()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    P = pb.params
    ti = np.array([im.t for im in tr.impacts if not im.accumulation])
    exact = bouncing_ball.impact_times(ti.size, P["h"], P["r"], P["e"], P["g"])
    err = float(np.max(np.abs(ti - exact) / exact))
    wall = float(np.median(times))
    add(f"bouncing ball e = 0.95 to rest: {len(tr.impacts)} impacts, {tr.stats['phases']} "
        "phases (impact times' max rel. err)", wall, err, "target: 200 impacts in 0.2 s",
        0.2 * len(tr.impacts) / 200, None, "<= 1", "s")
    # (the process's CPU time too: on a shared machine the wall time also counts the
    # time other processes hold the CPU)
    add("bouncing ball e = 0.95 to rest, CPU time of the process", float(np.median(cpu)), err,
        "target: 200 impacts in 0.2 s", 0.2 * len(tr.impacts) / 200, None, "<= 1", "s")
    add("bouncing ball: one phase (impact, restart, flight to the next impact)",
        wall / tr.stats["phases"] * 1e3, None, "", None, None, "", "ms")


# ----------------------------------------------------------------------------- whole runs
def run_rows(repeat, t_end):
    print(f"four-bar, {t_end:g} s", flush=True)
    pb = four_bar.build(t_end=t_end)

    def ours(**over):
        kw = dict(pb.settings)
        kw.update(over)
        return go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **kw)

    tr = ours()                                   # warm (compiled, cached)
    # three rounds, each ours then MuJoCo's, medians of all: the two are timed in the
    # same minutes (a machine's speed drifts by 10-20 % over a benchmark's run)
    walls, mj_walls = [], []
    mj_wall = mj_err = None
    for _ in range(3):
        for _ in range(max(repeat // 2, 2)):
            t0 = time.perf_counter()
            tr = ours()
            walls.append(time.perf_counter() - t0)
        try:
            mj = peers.mujoco_four_bar(t_end=t_end, repeat=3)
            mj_walls.append(min(mj["wall_loop_s"], mj.get("wall_rollout_s", np.inf)))
            mj_err = mj["err_max_finite"]
        except ImportError:
            pass
    err = float(np.max(np.abs(tr["th1"] - four_bar.reference(tr.t)[0])))
    wall = float(np.median(walls))
    if mj_walls:
        mj_wall = float(np.median(mj_walls))
    s = pb.settings
    add(f"four-bar {t_end:g} s, build() settings ({s['method']}, rtol {s['rtol']:g}), "
        "th1 max err", wall, err, "MuJoCo Euler dt 1e-3 (rollout or loop, faster)", mj_wall,
        mj_err, "<= 1, err <= 1e-8", "s")

    dt = 1e-3
    tr = ours(method="rk4", dt=dt, t_eval=None)
    t0 = time.perf_counter()
    tr = ours(method="rk4", dt=dt, t_eval=None)
    wall4 = time.perf_counter() - t0
    err4 = float(np.max(np.abs(tr["th1"] - four_bar.reference(tr.t)[0])))
    try:
        pr = peers.pinocchio_rk4(t_end=t_end, dt=dt)
        p_wall, p_err = pr["wall_s"], pr["err_max_finite"]
    except ImportError:
        p_wall = p_err = None
    add(f"four-bar {t_end:g} s, rk4 dt 1e-3", wall4, err4, "Pinocchio + RK4 (Python loop)",
        p_wall, p_err, "", "s")


# ----------------------------------------------------------------------------- stepper
def stepper_rows(repeat):
    """``go.Stepper`` against MuJoCo's ``mj_step`` and ``go.solve_step`` over the compiled
    step: the rows of ``benchmarks/stepper.py`` (see there), into this table."""
    print("Stepper and solve_step's overhead", flush=True)
    import stepper

    stepper.ROWS.clear()
    stepper.stepper_rows(go, four_bar, peers, repeat)
    stepper.solve_step_rows(go, four_bar, repeat)
    for measure, ours, oacc, peer, pval, pacc, _, unit, note in stepper.ROWS:
        add(measure, ours, oacc, peer, pval, pacc, note, unit)


# ----------------------------------------------------------------------------- large
def large_rows(repeat, Ns):
    print("N-four-bar", flush=True)
    ours_ms, peer_ms = [], []
    for N in Ns:
        pb = n_four_bar.build(N=N)
        sysm = pb.system
        r = go.solve_step(sysm, 0.0, pb.q0, pb.v0)
        i = sysm.coordinates.index("crank0.phi")
        p = pb.params
        mass = ((N + 1) / 3.0 + N) * p["m"] * p["l"] ** 2
        th_dd = -p["g"] * p["l"] * ((N + 1) / 2.0 + N) * p["m"] * np.cos(np.pi / 2) / mass
        acc = abs(r.a[i] - th_dd)
        number = max(1, int(0.05 / max(timeit.timeit(
            lambda: go.solve_step(sysm, 0.0, pb.q0, pb.v0), number=1), 1e-7)))
        ms = median_us(lambda: go.solve_step(sysm, 0.0, pb.q0, pb.v0), repeat, number) / 1e3
        sp_ = peers.splu_n_four_bar(N, repeat=repeat)
        ours_ms.append(ms)
        peer_ms.append(sp_["ms"])
        add(f"N-four-bar N = {N} (n = {sysm.n}) solve_step closed_form", ms, acc,
            "scipy splu factor + solve of the KKT", sp_["ms"], sp_["crank_acc_err"],
            "<= 2" if N == Ns[-1] else "", "ms")
    e_ours = float(np.polyfit(np.log(Ns), np.log(ours_ms), 1)[0])
    e_peer = float(np.polyfit(np.log(Ns), np.log(peer_ms), 1)[0])
    add(f"growth exponent over N = {Ns[0]}..{Ns[-1]}", e_ours, None, "splu", e_peer, None,
        "<= 1.2", "")
    return e_ours


def n40_run():
    print("N-four-bar N = 40, 10 s", flush=True)
    pb = n_four_bar.build(N=40, t_end=10.0)
    kw = dict(pb.settings)
    kw.update(rtol=1e-10, atol=1e-10)
    go.simulate(pb.system, (0.0, 0.01), pb.q0, pb.v0, **kw)      # compiled model loaded
    t0 = time.perf_counter()
    tr = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **kw)
    wall = time.perf_counter() - t0
    ref = pb.reference(tr.t)
    out = pb.outputs(tr.q, tr.v)
    err = max(float(np.max(np.abs(out[k] - ref[k]))) for k in ("B0_x", "B0_y")) \
        if tr.success else None
    add("N-four-bar N = 40, 10 s, rtol 1e-10 (B0 max err)", wall, err, "target", 10.0, None,
        "<= 1", "s")


def ga_row(repeat):
    print("GA step", flush=True)
    sysm = four_bar.system()
    th1, w = np.pi / 3, 1.3
    q = np.array([th1, th1, np.pi - th1])
    v = np.array([w, w, -w])
    s = go.make_solver(sysm, "ga", tol=1e-6, seed=1)
    r = s.solve(0.0, q, v)
    ref = peers.reduced_acceleration(th1)

    def cold():
        s.reset()
        return s.acceleration(0.0, q, v)

    ms = median_us(cold, repeat, 20) / 1e3
    add("four-bar GA step, tol 1e-6 (cold, null-space mode)", ms, abs(r.a[0] - ref) / abs(ref),
        "target", 5.0, None, "<= 1", "ms")


# ----------------------------------------------------------------------------- batched step
def batch_rows(repeat, t_full):
    """``go.solve_steps`` per state for B states on the four-bar's branch, against the
    per-state cost of ``solve_step`` in a loop (``t_full``, measured in this run); accuracy:
    max |th1'' - reduced| / max |reduced| over the batch."""
    print("batched step (go.solve_steps)", flush=True)
    sysm = four_bar.system()
    rng = np.random.default_rng(0)
    th = rng.uniform(0.2, 1.3, 10000)
    w = rng.uniform(-3.0, 3.0, th.size)
    Q = np.column_stack([th, th, np.pi - th])
    V = np.column_stack([w, w, -w])
    ref = peers.reduced_acceleration(th)
    for B in (1, 100, 1000, 10000):
        A = go.solve_steps(sysm, 0.0, Q[:B], V[:B])
        acc = float(np.max(np.abs(A[:, 0] - ref[:B])) / np.max(np.abs(ref[:B])))
        us = median_us(lambda: go.solve_steps(sysm, 0.0, Q[:B], V[:B]), repeat,
                       max(1, 20000 // B)) / B
        add(f"four-bar solve_steps, B = {B}, per state", us, acc,
            "solve_step in a Python loop, per state", t_full, None,
            "<= 1 us" if B == 1000 else "")


# ----------------------------------------------------------------------------- compile
def compile_rows():
    """First call in a fresh process with empty numba/model caches, then the same from
    the caches just written."""
    print("compile time (fresh caches; takes minutes)", flush=True)
    code = ("import time; t0 = time.perf_counter(); import numpy as np, gaussopt as go; "
            "from gaussopt_problems import four_bar; p = four_bar.build(); "
            "go.solve_step(p.system, 0.0, p.q0, p.v0); "
            "go.simulate(p.system, (0.0, 0.1), p.q0, p.v0); "
            "print(time.perf_counter() - t0)")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, NUMBA_CACHE_DIR=d, GAUSSOPT_CACHE_DIR=d, PYTHONPATH=str(ROOT))
        out = []
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, cwd=str(ROOT))
            if res.returncode != 0:
                print(res.stderr[-2000:])
                return
            out.append(float(res.stdout.strip().splitlines()[-1]))
    add("first call (compile kernels, engine, model), fresh cache", out[0], None,
        "second process (load from the cache)", out[1], None, "", "s")


# ----------------------------------------------------------------------------- spatial
def spatial_arm_rows(repeat):
    """The 6-link spatial arm of ``tests/data/arm6.urdf`` (loaded through
    :func:`gaussopt.multibody.load`, MuJoCo's URDF parser: 6 bodies, n = 42, m = 36)
    against ``pinocchio.aba`` on ``pinocchio.buildModelFromUrdf`` of the same file: one
    forward-dynamics step at a random state (angles in (-pi, pi), rates in (-2, 2)),
    no torque. Accuracy of each: max |qdd - qdd_ref| / max |qdd_ref| against MuJoCo's
    ``mj_forward`` ``qacc`` of the same file (a third direct solver), gaussopt's step
    mapped to joint accelerations by
    :func:`~gaussopt.multibody.io.mjcf.joint_accelerations`."""
    print("6-link spatial arm (URDF) one step", flush=True)
    import warnings

    try:
        import mujoco
        import pinocchio as pin
    except ImportError:
        add("6-link arm solve_step closed_form", None, None, "pinocchio.aba", None, None, "<= 3")
        return
    import gaussopt.multibody.io.mjcf as mjcf

    path = ROOT / "tests" / "data" / "arm6.urdf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mjcf.UnmappedFeatureWarning)   # the joint limits
        model = mjcf.load(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    jn = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, k) for k in range(m.njnt)]
    order = [jn.index(pm.names[k]) for k in range(1, pm.njoints)]
    rng = np.random.default_rng(11)
    qp, vp, tau = rng.uniform(-np.pi, np.pi, 6), rng.uniform(-2.0, 2.0, 6), np.zeros(6)
    qpos, qvel = np.empty(6), np.empty(6)
    qpos[order], qvel[order] = qp, vp
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    ref = np.array(d.qacc)[order]
    q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
    sysm = model.system
    r = go.solve_step(sysm, 0.0, q, v)
    ours = mjcf.joint_accelerations(model, m, q, v, r.a)[order]
    acc = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))
    p_acc = float(np.max(np.abs(pin.aba(pm, pd, qp, vp, tau) - ref)) / np.max(np.abs(ref)))
    t_full = median_us(lambda: go.solve_step(sysm, 0.0, q, v), repeat, 2000)
    solver = sysm._solver_cache["closed_form"]
    t_hot = median_us(lambda: solver.acceleration(0.0, q, v), repeat, 2000)
    t_in = in_simulate_step_us(solver, q, v, repeat)
    t_aba = median_us(lambda: pin.aba(pm, pd, qp, vp, tau), repeat, 20000)
    add("6-link arm (URDF) solve_step closed_form", t_full, acc, "pinocchio.aba", t_aba, p_acc,
        "<= 3")
    add("6-link arm hot path (solver.acceleration)", t_hot, acc, "pinocchio.aba", t_aba, p_acc)
    add("6-link arm step inside simulate (compiled)", t_in, acc, "pinocchio.aba", t_aba, p_acc)


def _band_vs_dense_run(label, build, keys, repeat, target=""):
    """One run of the problem ``build()`` on the O(n) path and the same run with the
    sparse model removed (the dense kernel and SVD throughout), each timed once warm;
    accuracy: max |output - reference| over ``keys``."""
    walls, accs, band = [], [], None
    for sparse in (True, False):
        pb = build()
        if not sparse:
            pb.system.sparse = None
        go.simulate(pb.system, (0.0, 0.01), pb.q0, pb.v0, **pb.settings)   # compiled, loaded
        t0 = time.perf_counter()
        tr = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **pb.settings)
        walls.append(time.perf_counter() - t0)
        ref, out = pb.reference(tr.t), pb.outputs(tr.q, tr.v)
        accs.append(max(float(np.max(np.abs(np.asarray(out[k]) - np.asarray(ref[k]))))
                        for k in keys) if tr.success else None)
        if sparse:
            band = (tr.stats["sparse_steps"], tr.stats["rhs_evaluations"])
    print(f"  {label}: {band[0]} of {band[1]} right-hand sides on the band", flush=True)
    add(label, walls[0], accs[0], "the same run, dense kernel", walls[1], accs[1], target, "s")


def spatial_chain_rows(repeat, Ns=(10, 40, 160)):
    """The N-link spatial chain (problems/spatial_chain.py: slender rods, revolute joints
    with alternating axes; 7 N coordinates, 6 N equations) at a random state: one step
    as the engine takes it inside ``simulate`` (compiled; the O(n) path) against
    ``pinocchio.aba`` of the same chain (O(n) recursion in its N joint coordinates), and,
    up to N = 40, against gaussopt's dense step on the same model (the baseline the O(n)
    path replaces); growth exponents. Accuracy: max |th'' - ref| / max |ref| against the
    problem's own joint-space reference (composite-rigid-body + Newton-Euler, numpy)."""
    from gaussopt_problems import spatial_chain as sc

    print("N-link spatial chain one step", flush=True)
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    L, m, r, g = 0.5, 1.0, 0.02, 9.81
    ours, peer, dense = [], [], []
    for N in Ns:
        rng = np.random.default_rng(N)
        th, dth = rng.uniform(-np.pi, np.pi, N), rng.uniform(-2.0, 2.0, N)
        q, v = sc.state(th, dth, L)
        ref = sc.forward_dynamics(th, dth, N, L, m, r, g)
        scale = np.max(np.abs(ref))
        pb = sc.build(N=N, L=L, m=m, r=r, g=g)
        sysm = pb.system
        step = go.solve_step(sysm, 0.0, q, v)
        acc = float(np.max(np.abs(sc.joint_accelerations(q, v, step.a, L) - ref)) / scale)
        t_in = in_simulate_step_us(sysm._solver_cache["closed_form"], q, v, repeat)
        ours.append(t_in)
        t_aba = p_acc = None
        if pin is not None:
            pm = sc.pinocchio_model(N, L, m, r, g)
            pd = pm.createData()
            tau = np.zeros(N)
            p_acc = float(np.max(np.abs(pin.aba(pm, pd, th, dth, tau) - ref)) / scale)
            t_aba = median_us(lambda: pin.aba(pm, pd, th, dth, tau), repeat, 2000)
            peer.append(t_aba)
        add(f"spatial chain N = {N} (n = {7 * N}) step inside simulate (O(n) path: "
            f"{'yes' if step.info['sparse'] else 'NO'})", t_in, acc, "pinocchio.aba", t_aba, p_acc)
        if N <= 40:
            pd_ = sc.build(N=N, L=L, m=m, r=r, g=g)
            pd_.system.sparse = None
            sd = pd_.system
            sd_step = go.solve_step(sd, 0.0, q, v)
            d_acc = float(np.max(np.abs(sc.joint_accelerations(q, v, sd_step.a, L) - ref)) / scale)
            t_d = in_simulate_step_us(sd._solver_cache["closed_form"], q, v, repeat)
            dense.append(t_d)
            add(f"spatial chain N = {N} step inside simulate, O(n) path vs dense step", t_in, acc,
                "gaussopt dense step", t_d, d_acc)
    e_ours = float(np.polyfit(np.log(Ns), np.log(ours), 1)[0])
    e_peer = float(np.polyfit(np.log(Ns), np.log(peer), 1)[0]) if len(peer) == len(Ns) else None
    add(f"spatial chain growth exponent over N = {Ns[0]}..{Ns[-1]}", e_ours, None,
        "pinocchio.aba", e_peer, None, "", "")


def delta_rows(repeat):
    """The delta robot (three closed loops, spherical rod ends, n = 70) and the
    overconstrained N-four-bar (N = 20, one redundant joint equation at every state):
    a run on the O(n) path against the same run on the dense step, each against its
    independent reference (the platform's reduced-coordinate equation; the reduced
    one-coordinate equation)."""
    from gaussopt_problems import delta_robot

    print("runs on the band against the dense step", flush=True)
    _band_vs_dense_run("delta robot (n = 70, 3 loops) 2 s run (platform max err, m)",
                       lambda: delta_robot.build(), ("x", "y", "z"), repeat)
    _band_vs_dense_run("overconstrained N-four-bar N = 20 (n = 129, 1 redundant row) 2 s run "
                       "(B0 max err, m)",
                       lambda: n_four_bar.build(N=20, t_end=2.0, redundant=True), ("B0_x", "B0_y"),
                       repeat)


def _bricard_pinocchio(pin, L=1.0, m=1.0, g=9.81):
    """Pinocchio's model of the Bricard chain (problems/bricard.py, slender rods): five
    revolute joints JointModelRX/RY/RZ at P0..P4 (each joint frame at its centre with the
    world's orientation at q = 0), the rods' inertias about their centroids, and the loop
    closed at joint 6 by two CONTACT_3D between rod 5 and the ground: at P5 and at
    P5 + (L, 0, 0) on its axis (6 rows, rank 5: pinocchio has no 5-row hinge contact)."""
    from gaussopt_problems import bricard

    P, W = bricard.POINTS * L, bricard.AXES
    model = pin.Model()
    parent = 0
    for k in range(5):
        jm = (pin.JointModelRX, pin.JointModelRY, pin.JointModelRZ)[int(np.argmax(W[k]))]()
        at = P[k] - (P[k - 1] if k else 0.0)
        parent = model.addJoint(parent, jm, pin.SE3(np.eye(3), at), f"j{k + 1}")
        d = (P[k + 1] - P[k]) / L
        model.appendBodyToJoint(parent, pin.Inertia(m, d * L / 2, bricard.rod_inertia(m, L, 0.0, d)),
                                pin.SE3.Identity())
    model.gravity.linear = np.array([0.0, -g, 0.0])
    cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for off in (np.zeros(3), np.array([L, 0.0, 0.0])):
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, model, parent,
                                      pin.SE3(np.eye(3), P[5] - P[4] + off), 0,
                                      pin.SE3(np.eye(3), P[5] + off), pin.ReferenceFrame.LOCAL)
        cms.append(cm)
        cds.append(cm.createData())
    data = model.createData()
    pin.initConstraintDynamics(model, data, cms, cds)
    return model, data, cms, cds


def _bricard_joint_accelerations(ref, th, u, du):
    """The reference's joint accelerations ``th''`` (6,) at ``th``, ``th1' = u``,
    ``th1'' = du``: its closure derivative ``S th'' + sum_i [V_(i-1), xi_i th_i'] = 0``
    (problems/bricard.py, JointAngleReference.body_motion) solved for th2''..th6''."""
    from gaussopt_problems.bricard import _bracket

    _, _, S = ref.twists(th)
    thd = ref.rates(S) * u
    bias, V = np.zeros(6), np.zeros(6)
    for i in range(6):
        bias = bias + _bracket(V, S[:, i] * thd[i])
        V = V + S[:, i] * thd[i]
    thdd = np.empty(6)
    thdd[0] = du
    thdd[1:] = np.linalg.lstsq(S[:, 1:], -S[:, 0] * du - bias, rcond=None)[0]
    return thdd


def _mujoco_bricard_run(mujoco, path, t_end, dt=None, solref=None, solimp=None,
                        integrator=None, every=0.02):
    """MuJoCo on tests/data/bricard.xml for ``t_end``: (wall time of the mj_step loop
    [s], sample times, P2 at them (the origin of body rod3), max gap of the loop at P5)."""
    m = mujoco.MjModel.from_xml_path(str(path))
    if dt is not None:
        m.opt.timestep = dt
    if integrator is not None:
        m.opt.integrator = integrator
    if solref is not None:
        m.eq_solref[:] = solref
    if solimp is not None:
        m.eq_solimp[:, :len(solimp)] = solimp
    n = int(round(t_end / m.opt.timestep))
    d = mujoco.MjData(m)
    t0 = time.perf_counter()
    for _ in range(n):
        mujoco.mj_step(m, d)
    wall = time.perf_counter() - t0
    # the same run again (deterministic), sampled: positions by mj_kinematics
    mujoco.mj_resetData(m, d)
    stride = max(1, int(round(every / m.opt.timestep)))
    rod3 = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "rod3")
    site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "P5")
    mujoco.mj_kinematics(m, d)
    ts, P2, gap = [0.0], [np.array(d.xpos[rod3])], 0.0
    for k in range(1, n + 1):
        mujoco.mj_step(m, d)
        if k % stride == 0:
            mujoco.mj_kinematics(m, d)
            ts.append(d.time)
            P2.append(np.array(d.xpos[rod3]))
            gap = max(gap, float(np.linalg.norm(d.site_xpos[site] - np.array([0.0, 0.0, 1.0]))))
    return wall, np.array(ts), np.array(P2), gap


def bricard_rows(repeat):
    """The IFToMM A04 Bricard mechanism (problems/bricard.py: 5 rods, 6 revolute joints,
    one redundant joint equation), against its independent joint-angle reference.

    * 10 s from rest at ``go.simulate``'s default settings (compiled, warm: the median
      of ``repeat`` runs' ``stats["wall_time"]``), max |P2 - P2_ref| over its steps;
      beside it MuJoCo on tests/data/bricard.xml (the same mechanism: a hinge chain
      closed by two ``connect`` equalities on joint 6's axis): ``mj_step`` at its
      defaults (Euler, dt = 2 ms, solref 0.02 s, solimp 0.9..0.95) and a stiff variant
      (dt = 0.2 ms, solref 0.4 ms, solimp 0.9999) with Euler and with RK4, max |P2 -
      P2_ref| every 0.02 s. Measured: the default run's loop opens by ~6e-4 m at P5 and
      P2 is 2e-2 m off; the stiff Euler run's gap is ~4e-7 m but Euler's first-order
      error leaves P2 2e-3 m off; stiff RK4 follows the reference to ~1e-9 m.
    * One step at t = 1 s of the reference's motion: ``go.solve_step`` (relative error
      of its 35 body accelerations against the reference's) against
      ``pinocchio.constraintDynamics`` (relative error of its 5 joint accelerations
      against the reference's ``th''``)."""
    print("Bricard linkage (IFToMM A04)", flush=True)
    import warnings

    from gaussopt_problems import bricard

    pb = bricard.build()
    sysm = pb.system

    def p2_err(t, P2):
        r = pb.reference(t)
        return float(np.abs(P2 - np.column_stack([r["P2_x"], r["P2_y"], r["P2_z"]])).max())

    go.simulate(sysm, pb.t_span, pb.q0, pb.v0)            # compile, warm the caches
    walls, traj = [], None
    for _ in range(repeat):
        traj = go.simulate(sysm, pb.t_span, pb.q0, pb.v0)
        walls.append(float(traj.stats["wall_time"]))
    o = pb.outputs(traj.q, traj.v)
    err = p2_err(traj.t, np.column_stack([o["P2_x"], o["P2_y"], o["P2_z"]])) \
        if traj.success else None
    ours = float(np.median(walls))
    print(f"  gaussopt: success {traj.success}, {len(traj.t) - 1} steps, "
          f"max |P2 - ref| {_f(err, '.2e')} m, wall {ours:.3f} s", flush=True)
    try:
        import mujoco
    except ImportError:
        add("Bricard 10 s default settings (wall)", ours, err, "MuJoCo", None, None,
            "<= 1 s", unit="s")
    else:
        path = ROOT / "tests" / "data" / "bricard.xml"
        for label, kw in (("MuJoCo mj_step (Euler, dt 2 ms, defaults)", {}),
                          ("MuJoCo mj_step (Euler, dt 0.2 ms, solref 0.4 ms, solimp 0.9999)",
                           dict(dt=2e-4, solref=(4e-4, 1.0), solimp=(0.9999, 0.9999))),
                          ("MuJoCo mj_step (RK4, dt 0.2 ms, solref 0.4 ms, solimp 0.9999)",
                           dict(dt=2e-4, solref=(4e-4, 1.0), solimp=(0.9999, 0.9999),
                                integrator=mujoco.mjtIntegrator.mjINT_RK4))):
            mw, ts, P2, gap = _mujoco_bricard_run(mujoco, path, pb.t_span[1], **kw)
            me = p2_err(ts, P2) if np.all(np.isfinite(P2)) else None
            print(f"  {label}: max |P2 - ref| {_f(me, '.2e')} m, loop gap at P5 up to "
                  f"{gap:.2e} m, wall {mw:.3f} s", flush=True)
            add(f"Bricard 10 s default settings (wall) vs {label}", ours, err, "MuJoCo", mw,
                me, "<= 1 s", unit="s")

    # one step at t = 1 s of the reference's motion
    ref = bricard.reference_solution(pb.t_span[1], L=1.0, m=1.0, g=bricard.G, width=0.0,
                                     omega0=0.0)     # the one pb.reference solved
    t = 1.0
    th, u = ref.states([t])
    th1, u = ref._sol.sol(t)
    du = ref.acceleration(th1, u)
    th = ref.close(th1, th[0])
    q, v, a_ref = ref.body_coordinates(th, u, du)
    step = go.solve_step(sysm, t, q, v)
    acc = float(np.abs(step.a - a_ref).max() / np.abs(a_ref).max())
    t_full = median_us(lambda: go.solve_step(sysm, t, q, v), repeat, 500)
    solver = sysm._solver_cache["closed_form"]
    t_hot = median_us(lambda: solver.acceleration(t, q, v), repeat, 500)
    try:
        import pinocchio as pin
    except ImportError:
        add("Bricard solve_step closed_form", t_full, acc, "pinocchio.constraintDynamics",
            None, None, "<= 2")
        return
    model, data, cms, cds = _bricard_pinocchio(pin)
    thdd = _bricard_joint_accelerations(ref, th, u, du)
    qp, vp, tau = th[:5].copy(), ref.rates(ref.twists(th)[2])[:5] * u, np.zeros(5)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a_plain = np.array(pin.constraintDynamics(model, data, qp, vp, tau, cms, cds))
    print(f"  pinocchio.constraintDynamics without ProximalSettings: {a_plain} "
          f"({'NaN' if np.isnan(a_plain).any() else 'finite'})", flush=True)
    # its proximal iterations never meet their accuracy (the redundant row's multiplier
    # drifts along the null space of the Jacobian's transpose: at mu = 1e-12 the relative
    # residual stays ~3e-3), so every call runs max_iter iterations; mu = 1e-8 and two
    # iterations is the cheapest setting giving the accelerations to rounding (one
    # iteration leaves an error ~ mu relative).
    for mu, iters in ((0.0, 10), (1e-12, 10), (1e-8, 2), (1e-4, 5)):
        prox = pin.ProximalSettings(1e-12, 1e-12, mu, iters)
        with np.errstate(invalid="ignore"):
            ap = np.array(pin.constraintDynamics(model, data, qp, vp, tau, cms, cds, prox))
        p_acc = (float(np.abs(ap - thdd[:5]).max() / np.abs(thdd[:5]).max())
                 if np.all(np.isfinite(ap)) else None)
        print(f"  pinocchio prox mu={mu:g} max_iter={iters}: iterations {prox.iter}, "
              f"residual {prox.absolute_residual:.2e}, rel. error {_f(p_acc, '.2e')}",
              flush=True)
        if mu == 0.0:
            continue
        t_cd = median_us(lambda: pin.constraintDynamics(model, data, qp, vp, tau, cms, cds,
                                                        prox), repeat, 2000)
        add(f"Bricard solve_step closed_form vs constraintDynamics (mu {mu:g}, "
            f"max_iter {iters}, {prox.iter} it)", t_full, acc,
            "pinocchio.constraintDynamics", t_cd, p_acc, "<= 2")
        if (mu, iters) == (1e-8, 2):
            best = (t_cd, p_acc)
    add("Bricard hot path (solver.acceleration) vs mu 1e-8, 2 it", t_hot, acc,
        "pinocchio.constraintDynamics", *best)


# ----------------------------------------------------------------------------- table
def table():
    print("\n| measure | gaussopt | accuracy | peer | peer | peer accuracy | ratio | target |")
    print("|---|---|---|---|---|---|---|---|")
    for r in ROWS:
        u = r["unit"]
        print(f"| {r['measure']} | {_f(r['ours'])} {u} | {_f(r['ours_acc'], '.1e')} | "
              f"{r['peer']} | {_f(r['peer_val'])} {u} | {_f(r['peer_acc'], '.1e')} | "
              f"{_f(r['ratio'], '.2f')} | {r['target']} |")
    print("\naccuracy: relative error of th1'' (steps), max |a - a_ref| / max |a_ref| (ellipse "
          "steps: the reduced equation in contact, the rolling row alone lifted off), "
          "max |th1 - reference| in rad (runs), max error of B0 (N-four-bar run), |crank th''| "
          "error (N-four-bar steps); contacts: max |a - a_ref| / max |a_ref| of the reduced "
          "equation (ellipse steps), max |q - q_ref| at 2.5 s (ellipse phases), max relative "
          "error of the impact times (ball); Bricard: max |P2 - P2_ref| in m (runs), max |a - a_ref| / "
          "max |a_ref| of the body (gaussopt) or joint (Pinocchio) accelerations (step).")
    print("The peers' run errors are what they are: MuJoCo (soft equality constraints, Euler) "
          "and Pinocchio's constraintDynamics + RK4 (no projection) leave the physical branch "
          "at the four-bar's first singular positions (cos th1 = 0) and do not come back; "
          "`python3 benchmarks/peers.py` shows them with Baumgarte gains and other settings.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="smaller N, shorter runs")
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument("--t-end", type=float, default=20.0)
    ap.add_argument("--only", choices=("large", "contact", "spatial", "stepper"),
                    help="only these rows: 'large' the N-four-bar steps against splu, "
                         "'contact' the contact rows, 'spatial' the spatial rows, "
                         "'stepper' the Stepper and solve_step overhead rows")
    args = ap.parse_args()
    if args.only == "contact":
        contact_rows(args.repeat)
        table()
        return
    if args.only == "stepper":
        stepper_rows(args.repeat)
        table()
        return
    if args.only == "spatial":
        spatial_arm_rows(args.repeat)
        spatial_chain_rows(args.repeat)
        delta_rows(args.repeat)
        bricard_rows(args.repeat)
        table()
        return
    if args.only != "large":
        t_full = step_rows(args.repeat)
        contact_rows(args.repeat)
        batch_rows(args.repeat, t_full)
        run_rows(args.repeat, args.t_end)
        stepper_rows(args.repeat)
        ga_row(args.repeat)
        spatial_arm_rows(args.repeat)
        spatial_chain_rows(args.repeat)
        delta_rows(args.repeat)
        bricard_rows(args.repeat)
    large_rows(args.repeat, (10, 20, 40) if args.quick else (10, 20, 40, 80))
    if not args.quick:
        n40_run()
    if not args.skip_compile and args.only is None:
        compile_rows()
    table()


if __name__ == "__main__":
    with peers._blas1():
        main()
