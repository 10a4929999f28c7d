"""Robot models in joint coordinates (:mod:`gaussopt.multibody.tree`) against MuJoCo and
Pinocchio, with the maximal-coordinate kind beside them: one table, one run.

Run: ``python3 benchmarks/robots.py [--repeat N] [--skip-run] [--only NAME,NAME]
[--chain N,N,...] [--loop N,N,...] [--model LABEL=PATH ...]``
(MuJoCo and Pinocchio: ``pip install ".[bench]"``; a missing peer prints ``n/a``).

Models: the 6-link arm ``tests/data/arm6.urdf`` (6 hinges, the URDF read by MuJoCo's parser
for gaussopt and by ``pinocchio.buildModelFromUrdf`` for ``aba``), the humanoid-like tree
``tests/data/humanoid_tree.xml`` (free root, ball hips and shoulders, multi-hinge bodies,
damping and armature: nq 34, nv 31) and the ant-like tree ``tests/data/ant_tree.xml`` (free
root, 8 hinges, merged joint-less bodies: nq 15, nv 14); and, when installed,
example-robot-data's UR5 and Panda URDFs (with ``pinocchio.aba``), dm_control's acrobot and
humanoid, gymnasium's ant (contacts and joint limits disabled, as the tests do).

Rows, per model, all measured in this run at one random state (seeded; angles in (-pi,
pi), unit quaternions, rates in (-2, 2)):

* ``solve_step`` (closed form, the full ``StepResult``) of the joint kind, its hot path
  (``solver.acceleration``) and its step inside ``simulate`` (the compiled ``evaluate_step``
  in a compiled loop: what one right-hand side costs the engine), against ``mj_forward``
  (and ``pinocchio.aba`` on URDFs); ``solve_step`` of the maximal kind (``load(...,
  coordinates="maximal")``) against the joint kind's. Accuracy: max |qacc - qacc_MuJoCo| /
  max |qacc_MuJoCo| (gaussopt's accelerations mapped by :func:`joint_accelerations`;
  ``aba``'s against MuJoCo's too, with the URDF's joint damping as its ``tau``, which
  ``aba`` leaves to its caller; where the URDF has a ``<mimic>`` joint, which Pinocchio's
  parser leaves out, against MuJoCo's unconstrained ``qacc_smooth``);
* a 1 s run from that state: ``go.simulate`` at its default settings (DOP853, rtol = atol
  = 1e-9, projection) against MuJoCo's RK4 at ``dt = 1e-4`` (``mj_step`` in a Python
  loop: 10,000 calls), wall time (median of 3 runs); accuracy of each: max |qpos(1 s) -
  reference| with the reference MuJoCo's RK4 at ``dt = 2.5e-5`` (its error 256 times
  smaller than at 1e-4).

Times are medians of repeated batches (``timeit``), one BLAS thread; wall time is
``time.perf_counter``; the joint kind's ``solve_step`` and its peers' calls (the rows
with a target) are the minima of interleaved batches of the process's CPU time
(``stepper._interleaved``: each repeat times every one once, so that they meet the same
minutes of a shared machine, whose speed changes by half from one minute to the next).
On a shared machine the ratios (same run) mean more than the absolute times.

* a generated chain of ``N`` hinges (``N`` = 10, 25, 50, 100, 200; axes alternating y, x;
  links 0.1 m, 0.1 kg; damping 0.01; ``--chain`` sets the sizes, ``--chain 0`` skips it):
  ``solve_step`` against ``mj_forward`` at each ``N``, the exponent of its growth from 10
  to 200 links (a least-squares fit of log time against log ``N``, both simulators), and
  the 200-link chain's 0.05 s run at the default settings (compilation excluded);
* a generated loop of ``N`` hinges (``N`` = 30, 60, 100, 200; the chain curled, its tip
  connected to the world: 3 closure rows; ``--loop``): ``solve_step`` on the recursion
  against the dense kernel on the same model and against ``mj_forward``, and the
  recursion's growth exponent (:func:`loop_rows`).

``--model LABEL=PATH`` adds any MJCF or URDF file (dm_control's and gymnasium's files
without installing them, e.g. dm_control's ``humanoid_CMU.xml``).

The maximal kind maps fewer MuJoCo features than the joint kind (its loader lists what
it leaves out: joint stiffness, the armature of ball and slide joints, ``joint``
equalities): its accuracy is against MuJoCo with those switched off too
(:func:`_without`).

The Panda's finger ``<mimic>`` is a ``joint`` equality: an exact row of the joint kind,
so its reference is the rigid limit from MuJoCo's own quantities (:func:`_rigid_qacc`);
the maximal kind and ``pinocchio.aba`` leave the coupling out (their 0.2 differences),
and MuJoCo's 1 s reference run holds it softly.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gaussopt as go  # noqa: E402
import peers  # noqa: E402

DATA = ROOT / "tests" / "data"
from table import ROWS, _f, add, median_us  # noqa: E402


def random_state(mj, m, rng):
    """A random MuJoCo state (the tests' ``random_state``)."""
    qpos = np.array(m.qpos0)
    for j in range(m.njnt):
        a, t = int(m.jnt_qposadr[j]), int(m.jnt_type[j])
        if t == mj.mjtJoint.mjJNT_HINGE:
            qpos[a] = rng.uniform(-np.pi, np.pi)
        elif t == mj.mjtJoint.mjJNT_SLIDE:
            qpos[a] = rng.uniform(-0.3, 0.3)
        elif t == mj.mjtJoint.mjJNT_BALL:
            x = rng.normal(size=4)
            qpos[a:a + 4] = x / np.linalg.norm(x)
        else:
            x = rng.normal(size=4)
            qpos[a:a + 3] += rng.normal(size=3) * 0.1
            qpos[a + 3:a + 7] = x / np.linalg.norm(x)
    return qpos, rng.uniform(-2.0, 2.0, m.nv)


def models() -> list[tuple[str, str, bool]]:
    """``(label, path, is_urdf)``: the repository's models and the installed ones."""
    out = [("6-link arm (URDF)", str(DATA / "arm6.urdf"), True),
           ("humanoid-like tree", str(DATA / "humanoid_tree.xml"), False),
           ("ant-like tree", str(DATA / "ant_tree.xml"), False)]
    try:
        import importlib.metadata as md
        erd = Path(md.distribution("example-robot-data").locate_file(
            "cmeel.prefix/share/example-robot-data/robots"))
        for label, rel in (("UR5 (example-robot-data)", "ur_description/urdf/ur5_robot.urdf"),
                           ("Panda (example-robot-data)", "panda_description/urdf/panda.urdf")):
            if (erd / rel).is_file():
                out.append((label, str(erd / rel), True))
    except Exception:                       # not installed
        pass
    try:
        import dm_control
        suite = Path(dm_control.__file__).parent / "suite"
        out += [("dm_control acrobot", str(suite / "acrobot.xml"), False),
                ("dm_control humanoid", str(suite / "humanoid.xml"), False)]
    except ImportError:
        pass
    try:
        import gymnasium
        out.append(("gymnasium ant", str(Path(gymnasium.__file__).parent / "envs" / "mujoco"
                                         / "assets" / "ant.xml"), False))
    except ImportError:
        pass
    return out


def _mujoco_model(mj, path):
    """MuJoCo's model of ``path`` with contacts, joint limits and the equalities other than
    ``connect``/``weld``/``joint`` disabled (a URDF's limits would stop MuJoCo's arm and not
    gaussopt's model.system; a ``joint`` equality, e.g. the Panda's finger ``<mimic>``,
    is an exact row of gaussopt's model: the reference is then the rigid limit,
    :func:`_rigid_qacc`)."""
    import gaussopt.multibody.io.mjcf as mjcf

    # the loader's own compilation (a URDF's meshes, which MuJoCo cannot open from
    # package:// paths, are not read: the same model gaussopt loads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = mjcf._compile(mj, path)
    m.opt.disableflags |= int(mj.mjtDisableBit.mjDSBL_CONTACT) | int(mj.mjtDisableBit.mjDSBL_LIMIT)
    # equalities gaussopt does not map (a URDF's <mimic> becomes a joint equality) are off
    for e in range(m.neq):
        if int(m.eq_type[e]) not in (int(mj.mjtEq.mjEQ_CONNECT), int(mj.mjtEq.mjEQ_WELD),
                                     int(mj.mjtEq.mjEQ_JOINT)):
            m.eq_active0[e] = 0
    return m


def _on_joint_equalities(mj, m, qpos, qvel):
    """``(qpos, qvel)`` with the first joint of every active ``joint`` equality set on it
    (``x1 = P(x2)``, ``x1' = P'(x2) x2'``): a state both models can start a run from."""
    qpos, qvel = qpos.copy(), qvel.copy()
    for e in range(m.neq):
        if int(m.eq_type[e]) != int(mj.mjtEq.mjEQ_JOINT) or not m.eq_active0[e]:
            continue
        j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        c = np.array(m.eq_data[e, :5])
        a1, d1 = int(m.jnt_qposadr[j1]), int(m.jnt_dofadr[j1])
        x, w = 0.0, 0.0
        if j2 >= 0:
            a2, d2 = int(m.jnt_qposadr[j2]), int(m.jnt_dofadr[j2])
            x, w = qpos[a2] - m.qpos0[a2], qvel[d2]
        qpos[a1] = m.qpos0[a1] + c[0] + c[1] * x + c[2] * x * x + c[3] * x ** 3 + c[4] * x ** 4
        qvel[d1] = (c[1] + 2 * c[2] * x + 3 * c[3] * x * x + 4 * c[4] * x ** 3) * w
    return qpos, qvel


def _rigid_qacc(mj, m, d):
    """MuJoCo's accelerations with its active ``joint`` equalities (between two hinges or
    slides) held exactly, as gaussopt holds them: the KKT system of MuJoCo's own ``M``,
    ``qfrc_smooth`` and the rows ``x1 = P(x2)`` (``P`` the polycoef polynomial of the
    displacements from ``qpos0``), whose convective term is ``P''(x2) x2'^2``; ``d.qacc``
    when there are none (MuJoCo's ``connect``/``weld`` of these models are stiff enough
    that the benchmark's earlier comparisons held to 1e-13)."""
    rows, rhs = [], []
    for e in range(m.neq):
        if int(m.eq_type[e]) != int(mj.mjtEq.mjEQ_JOINT) or not d.eq_active[e]:
            continue
        j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        c = np.array(m.eq_data[e, :5])
        row = np.zeros(m.nv)
        row[int(m.jnt_dofadr[j1])] = 1.0
        g = 0.0
        if j2 >= 0:
            a2, d2 = int(m.jnt_qposadr[j2]), int(m.jnt_dofadr[j2])
            x = d.qpos[a2] - m.qpos0[a2]
            row[d2] = -(c[1] + 2 * c[2] * x + 3 * c[3] * x * x + 4 * c[4] * x ** 3)
            g = (2 * c[2] + 6 * c[3] * x + 12 * c[4] * x * x) * d.qvel[d2] ** 2
        rows.append(row)
        rhs.append(g)
    if not rows:
        return np.array(d.qacc)
    M = np.zeros((m.nv, m.nv))
    mj.mj_fullM(m, d, M)
    J = np.array(rows)
    K = np.block([[M, J.T], [J, np.zeros((len(rows), len(rows)))]])
    return np.linalg.solve(K, np.concatenate([d.qfrc_smooth, rhs]))[:m.nv]


def _without(mj, m, left_out):
    """MuJoCo's model ``m`` with the features the maximal kind's loader left out (its
    warning's keys ``left_out``) switched off: joint stiffness, the armature of ball and
    slide joints, ``joint`` equalities."""
    if any(k.startswith("joint stiffness") for k in left_out):
        m.jnt_stiffness[:] = 0.0
    if any(k.startswith("joint armature") for k in left_out):
        for j in range(m.njnt):
            t = int(m.jnt_type[j])
            if t in (int(mj.mjtJoint.mjJNT_BALL), int(mj.mjtJoint.mjJNT_SLIDE)):
                d0 = int(m.jnt_dofadr[j])
                m.dof_armature[d0:d0 + (3 if t == int(mj.mjtJoint.mjJNT_BALL) else 1)] = 0.0
    if any(k.startswith("equality constraints of type 'joint'") for k in left_out):
        for e in range(m.neq):
            if int(m.eq_type[e]) == int(mj.mjtEq.mjEQ_JOINT):
                m.eq_active0[e] = 0
    return m


def step_rows(label, path, urdf, repeat, mj, pin):
    import gaussopt.multibody.io.mjcf as mjcf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mjcf.UnmappedFeatureWarning)
        tree = mjcf.load(path)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always", mjcf.UnmappedFeatureWarning)
        maximal = mjcf.load(path, coordinates="maximal")
    left_out = {k for w in rec if issubclass(w.category, mjcf.UnmappedFeatureWarning)
                for k in getattr(w.message, "features", {})}
    m = _mujoco_model(mj, path)
    d = mj.MjData(m)
    rng = np.random.default_rng(11)
    qpos, qvel = _on_joint_equalities(mj, m, *random_state(mj, m, rng))
    d.qpos[:], d.qvel[:] = qpos, qvel
    mj.mj_forward(m, d)
    ref = _rigid_qacc(mj, m, d)
    scale = np.abs(ref).max()
    print(f"{label}: MuJoCo nq {m.nq}, nv {m.nv}; joint kind n {tree.n}, m {tree.m}; maximal "
          f"kind n {maximal.n}, m {maximal.m}", flush=True)
    t_mj = median_us(lambda: mj.mj_forward(m, d), repeat, 20000)

    # the maximal kind maps fewer features than the joint kind (its loader lists them):
    # its reference is MuJoCo's with those switched off too
    m_max = _without(mj, _mujoco_model(mj, path), left_out)
    d_max = mj.MjData(m_max)
    d_max.qpos[:], d_max.qvel[:] = qpos, qvel
    mj.mj_forward(m_max, d_max)
    ref_max = _rigid_qacc(mj, m_max, d_max)
    out = {}
    for kind, model in (("joint", tree), ("maximal", maximal)):
        q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
        sysm = model.system
        r = go.solve_step(sysm, 0.0, q, v)
        rk = ref if kind == "joint" else ref_max
        acc = float(np.abs(mjcf.joint_accelerations(model, m, q, v, r.a) - rk).max()
                    / np.abs(rk).max())
        number = 2000 if kind == "joint" else max(20, int(2000 / (1 + model.n / 20) ** 2))
        out[kind] = (median_us(lambda: go.solve_step(sysm, 0.0, q, v).a, repeat, number), acc,
                     sysm, q, v)
    t_tree, acc_tree, sysm, q, v = out["joint"]
    t_max, acc_max = out["maximal"][:2]
    # the rows with a target: solve_step and its peers in interleaved batches
    from stepper import _interleaved
    pm = pd = None
    fns = {"tree": (lambda: go.solve_step(sysm, 0.0, q, v).a, 500),
           "mj": (lambda: mj.mj_forward(m, d), 500)}
    if urdf and pin is not None:
        pm = pin.buildModelFromUrdf(path)
        pd = pm.createData()
        jn = [mj.mj_id2name(m, mj.mjtObj.mjOBJ_JOINT, k) for k in range(m.njnt)]
        order = [jn.index(pm.names[k]) for k in range(1, pm.njoints)]
        qp, vp = qpos[order], qvel[order]
        # (the URDF's joint damping, which MuJoCo and gaussopt apply and aba leaves to its
        # caller: the Panda's fingers have 0.3 N s/m)
        tau = -np.asarray(pm.damping) * vp
        fns["aba"] = (lambda: pin.aba(pm, pd, qp, vp, tau), 500)
    best = {k: x * 1e6 for k, x in _interleaved(fns, 5 * repeat).items()}
    solver = sysm._solver_cache["closed_form"]
    t_hot = median_us(lambda: solver.acceleration(0.0, q, v), repeat, 2000)
    from run import in_simulate_step_us
    t_in = in_simulate_step_us(solver, q, v, repeat)
    add(f"{label} solve_step, joint kind (n {tree.n}, m {tree.m})", best["tree"], acc_tree,
        "mj_forward", best["mj"], 0.0, "<= 3" if not urdf else "")
    add(f"{label} hot path (solver.acceleration), joint kind", t_hot, acc_tree, "mj_forward",
        t_mj, 0.0)
    add(f"{label} step inside simulate (compiled), joint kind", t_in, acc_tree, "mj_forward",
        t_mj, 0.0)
    add(f"{label} solve_step, maximal kind (n {maximal.n}, m {maximal.m})", t_max, acc_max,
        "joint kind", t_tree, acc_tree)
    t_eval, t_step = split_us(tree, q, v, repeat)
    add(f"{label} joint kind: model evaluation (M, F, rows) alone", t_eval, None, "mj_forward",
        t_mj, None)
    add(f"{label} joint kind: dense Gauss step (gauss_step) alone", t_step, None, "mj_forward",
        t_mj, None)
    if pm is not None:
        # (Pinocchio's URDF parser leaves a ``<mimic>`` coupling out, as the Panda's second
        # finger's, which gaussopt maps as a constraint row and MuJoCo as a joint
        # equality: aba then solves the uncoupled tree, whose reference is MuJoCo's
        # unconstrained qacc_smooth)
        mimic = "<mimic" in Path(path).read_text(errors="ignore")
        p_ref = d.qacc_smooth if mimic else ref
        p_acc = float(np.abs(pin.aba(pm, pd, qp, vp, tau) - p_ref[order]).max() / scale)
        peer = "pinocchio.aba" + (" (without the URDF's mimic coupling)" if mimic else "")
        add(f"{label} solve_step, joint kind", best["tree"], acc_tree, peer,
            best["aba"], p_acc, "<= 2")
        add(f"{label} step inside simulate (compiled), joint kind", t_in, acc_tree,
            peer, best["aba"], p_acc)
    return tree, m, qpos, qvel


def split_us(model, q, v, repeat):
    """The compiled step's two parts, each in a compiled loop: the model's evaluation (the
    tree kernel's ``mass_force`` and ``rows``, as the compiled ``dyn`` and ``rows`` call
    them) and the dense Gauss step on its output
    (:func:`gaussopt.gauss.dense_step.gauss_step`: rank decision, range-space solve with
    ``M`` factored along the tree, verification)."""
    import numba as nb

    import gaussopt.gauss.dense_step as ds
    from gaussopt.core.status import CLOSED_FORM
    from gaussopt.multibody.tree import tree_compiled as k

    n, m = model.n, model.m

    @nb.njit(cache=True)
    def evaluate(p, q, v, M, F, A, b, count):
        z = np.zeros(0)
        for _ in range(count):
            k.mass_force(p, q, v, z, M, F)
            k.rows(p, q, v, z, A, b, True)

    @nb.njit(cache=True)
    def step(M, F, A, b, ref, w, count):
        acc = 0.0
        for _ in range(count):
            acc += ds.gauss_step(M, F, A, b, ref, 0.0, 1e-8, CLOSED_FORM, False, False, w)[6]
        return acc

    M, F, A, b = np.empty((n, n)), np.empty(n), np.empty((m, n)), np.empty(m)
    w = ds.make_work(n, m, model.system.mass_tree)         # (as the model's own steps)
    ref = np.zeros(m)
    evaluate(model._p, q, v, M, F, A, b, 1)
    step(M, F, A, b, ref, w, 1)
    count = 2000
    t_eval = median_us(lambda: evaluate(model._p, q, v, M, F, A, b, count), repeat, 1) / count
    t_step = median_us(lambda: step(M, F, A, b, ref, w, count), repeat, 1) / count
    return t_eval, t_step


def _mujoco_run(mj, m, qpos, qvel, dt, t_end=1.0):
    m.opt.integrator = mj.mjtIntegrator.mjINT_RK4
    m.opt.timestep = dt
    d = mj.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    n = int(round(t_end / dt))
    t0 = time.perf_counter()
    for _ in range(n):
        mj.mj_step(m, d)
    return time.perf_counter() - t0, np.array(d.qpos)


def _quat_fixed(m, mj, x):
    """``qpos`` with every quaternion of positive first component (``q`` and ``-q`` are
    one rotation)."""
    x = x.copy()
    for j in range(m.njnt):
        t, a = int(m.jnt_type[j]), int(m.jnt_qposadr[j])
        o = {int(mj.mjtJoint.mjJNT_FREE): 3, int(mj.mjtJoint.mjJNT_BALL): 0}.get(t)
        if o is not None and x[a + o] < 0:
            x[a + o:a + o + 4] *= -1
    return x


def run_row(label, tree, m, qpos, qvel, mj):
    import gaussopt.multibody.io.mjcf as mjcf

    q, v = mjcf.state_from_mujoco(tree, m, qpos, qvel)
    _, ref = _mujoco_run(mj, m, qpos, qvel, 2.5e-5)
    ref = _quat_fixed(m, mj, ref)
    walls, trs = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        tr = go.simulate(tree.system, (0.0, 1.0), q, v)
        walls.append(time.perf_counter() - t0)
        trs.append(tr)
    tr = trs[-1]
    ours = _quat_fixed(m, mj, tr.q[-1]) if tr.success else None
    acc = float(np.abs(ours - ref).max()) if ours is not None else None
    mres = [_mujoco_run(mj, m, qpos, qvel, 1e-4) for _ in range(3)]
    mw = float(np.median([x[0] for x in mres]))
    macc = float(np.abs(_quat_fixed(m, mj, mres[-1][1]) - ref).max())
    add(f"{label} 1 s run, joint kind (simulate defaults: {tr.stats.get('steps', '?')} steps, "
        f"{tr.stats.get('rhs_evaluations', '?')} evaluations)", float(np.median(walls)), acc, "MuJoCo RK4 dt 1e-4", mw, macc, "<= 2",
        "s")


def chain_xml(N: int) -> str:
    """A chain of ``N`` hinge links hanging from the world (axes alternating y and x)."""
    body, close = "", ""
    for i in range(N):
        ax = "0 1 0" if i % 2 == 0 else "1 0 0"
        pos = "0 0 0" if i == 0 else "0 0 -0.1"
        body += (f'<body name="b{i}" pos="{pos}"><joint name="j{i}" type="hinge" axis="{ax}" '
                 'damping="0.01"/><geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.01" '
                 'mass="0.1"/>')
        close += "</body>"
    return (f'<mujoco><option gravity="0 0 -9.81"><flag contact="disable"/></option>'
            f'<worldbody>{body}{close}</worldbody></mujoco>')


def chain_rows(sizes, repeat, mj):
    """``solve_step`` against ``mj_forward`` on chains of ``sizes`` links, the growth
    exponents, and the longest chain's 0.05 s run."""
    import gaussopt.multibody.io.mjcf as mjcf

    ours, peer = [], []
    for N in sizes:
        xml = chain_xml(N)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mjcf.UnmappedFeatureWarning)
            model = mjcf.load(xml)
        m = mj.MjModel.from_xml_string(xml)
        d = mj.MjData(m)
        rng = np.random.default_rng(0)
        qpos, qvel = rng.uniform(-0.5, 0.5, N), rng.uniform(-1.0, 1.0, N)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mj.mj_forward(m, d)
        q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
        sysm = model.system
        r = go.solve_step(sysm, 0.0, q, v)
        acc = float(np.abs(mjcf.joint_accelerations(model, m, q, v, r.a) - d.qacc).max()
                    / np.abs(d.qacc).max())
        number = max(10, int(4000 / N))
        t_g = median_us(lambda: go.solve_step(sysm, 0.0, q, v).a, repeat, number)
        t_m = median_us(lambda: mj.mj_forward(m, d), repeat, number)
        ours.append(t_g)
        peer.append(t_m)
        add(f"{N}-link chain solve_step, joint kind (n {N}, m 0)", t_g, acc, "mj_forward", t_m,
            0.0)
        if N == sizes[-1]:
            go.simulate(sysm, (0.0, 0.01), q, v)                 # (warm)
            walls = []
            for _ in range(3):
                t0 = time.perf_counter()
                tr = go.simulate(sysm, (0.0, 0.05), q, v)
                walls.append(time.perf_counter() - t0)
            add(f"{N}-link chain 0.05 s run (simulate defaults: {tr.stats['steps']} steps, "
                f"{tr.stats['rhs_evaluations']} evaluations, success {tr.success})",
                float(np.median(walls)), None, "target", 5.0, None, "<= 5 s", "s")
    if len(sizes) > 1:
        x = np.log(np.asarray(sizes, dtype=float))
        k_g = float(np.polyfit(x, np.log(ours), 1)[0])
        k_m = float(np.polyfit(x, np.log(peer), 1)[0])
        add(f"chain solve_step growth exponent, N = {sizes[0]}..{sizes[-1]}", k_g, None,
            "mj_forward's", k_m, None, "<= 1.1", "")


def loop_xml(N: int, bend: float = 9.0) -> str:
    """:func:`chain_xml` curled (every link turned ``bend`` degrees about x and y from its
    parent) with its tip connected to the world where it is as written: a loop of ``N``
    hinges (tests/test_recursive_step.py's)."""
    xml = chain_xml(N).replace('pos="0 0 -0.1">', f'pos="0 0 -0.1" euler="{bend} {bend} 0">')
    return xml.replace("</mujoco>", f'<equality><connect body1="b{N - 1}" '
                                    'anchor="0 0 -0.1"/></equality></mujoco>')


def loop_rows(sizes, repeat, mj):
    """Closed loops of ``sizes`` hinges (:func:`loop_xml`: 3 closure rows) at the state as
    written with random velocities along the loop (``A v = 0``): ``solve_step`` on the
    recursion (the closure rows' Delassus solve through the articulated-body
    factorization) against the dense kernel on the same model (``system.recursive =
    None``) and against ``mj_forward`` (MuJoCo holds the loop softly: its accuracy is its
    distance from the rigid answer), and the recursion's growth exponent."""
    import gaussopt.multibody.io.mjcf as mjcf

    ours = []
    for N in sizes:
        xml = loop_xml(N)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mjcf.UnmappedFeatureWarning)
            model = mjcf.load(xml)
            dense = mjcf.load(xml)
        dense.system.recursive = None
        m = mj.MjModel.from_xml_string(xml)
        d = mj.MjData(m)
        q, _ = model.initial_state()
        A = model.system.rows(0.0, q, np.zeros(N))[0].reshape(-1, N)
        rng = np.random.default_rng(0)
        v = rng.uniform(-1.0, 1.0, N)
        v -= np.linalg.pinv(A) @ (A @ v)                         # (along the loop)
        qpos, qvel = q.copy(), v.copy()                          # (hinges: the same numbers)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mj.mj_forward(m, d)
        r = go.solve_step(model.system, 0.0, q, v)
        rd = go.solve_step(dense.system, 0.0, q, v)
        scale = np.abs(rd.a).max()
        acc = float(np.abs(r.a - rd.a).max() / scale)
        acc_m = float(np.abs(d.qacc - rd.a).max() / scale)
        number = max(10, int(4000 / N))
        t_g = median_us(lambda: go.solve_step(model.system, 0.0, q, v).a, repeat, number)
        t_d = median_us(lambda: go.solve_step(dense.system, 0.0, q, v).a, repeat,
                        max(5, number // 4))
        t_m = median_us(lambda: mj.mj_forward(m, d), repeat, number)
        ours.append(t_g)
        label = f"{N}-hinge loop solve_step (n {N}, m 3)"
        add(f"{label}, recursion ({'taken' if r.info['recursive'] else 'NOT taken'})", t_g,
            acc, "the dense kernel", t_d, 0.0)
        add(f"{label}, recursion", t_g, acc, "mj_forward (soft loop)", t_m, acc_m)
    if len(sizes) > 1:
        x = np.log(np.asarray(sizes, dtype=float))
        k_g = float(np.polyfit(x, np.log(ours), 1)[0])
        add(f"loop solve_step growth exponent, N = {sizes[0]}..{sizes[-1]}", k_g, None,
            "target", 1.1, None, "<= 1.1", "")


def table():
    print("\n| measure | gaussopt | accuracy | peer | peer | accuracy | ratio | target |")
    print("|---|---|---|---|---|---|---|---|")
    for r in ROWS:
        u = r["unit"]
        print(f"| {r['measure']} | {_f(r['ours'])} {u} | {_f(r['ours_acc'], '.1e')} | "
              f"{r['peer']} | {_f(r['peer_val'])} {u} | {_f(r['peer_acc'], '.1e')} | "
              f"{_f(r['ratio'], '.2f')} | {r['target']} |")
    print("\naccuracy: steps, max |qacc - qacc_MuJoCo| / max |qacc_MuJoCo|; runs, max |qpos(1 s) "
          "- reference| (MuJoCo RK4 at dt 2.5e-5).")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--skip-run", action="store_true", help="no 1 s runs")
    ap.add_argument("--only", help="comma-separated words of the model labels to run "
                                   "('chain', 'loop': the generated chains and loops too)")
    ap.add_argument("--chain", default="10,25,50,100,200",
                    help="link counts of the generated chains ('0': none)")
    ap.add_argument("--loop", default="30,60,100,200",
                    help="hinge counts of the generated closed loops ('0': none)")
    ap.add_argument("--model", action="append", default=[], metavar="LABEL=PATH",
                    help="another MJCF or URDF file to measure (repeatable), e.g. "
                         "'dm_control humanoid=.../suite/humanoid.xml' when dm_control is "
                         "not installed but its files are at hand")
    args = ap.parse_args()
    extra = []
    for item in args.model:
        label, sep, path = item.partition("=")
        if not sep or not Path(path).is_file():
            ap.error(f"--model must be LABEL=PATH of an existing file, found {item!r}")
        extra.append((label, path, path.lower().endswith(".urdf")))
    try:
        import mujoco as mj
    except ImportError:
        print("MuJoCo is not installed: pip install \".[bench]\"")
        return
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    for label, path, urdf in models() + extra:
        if args.only and not any(w in label for w in args.only.split(",")):
            continue
        tree, m, qpos, qvel = step_rows(label, path, urdf, args.repeat, mj, pin)
        if not args.skip_run:
            run_row(label, tree, _mujoco_model(mj, path), qpos, qvel, mj)
    sizes = [int(x) for x in args.chain.split(",") if x.strip() and int(x) > 0]
    if sizes and (not args.only or "chain" in args.only.split(",")):
        chain_rows(sizes, args.repeat, mj)
    sizes = [int(x) for x in args.loop.split(",") if x.strip() and int(x) > 0]
    if sizes and (not args.only or "loop" in args.only.split(",")):
        loop_rows(sizes, args.repeat, mj)
    table()


if __name__ == "__main__":
    with peers._blas1():
        main()
