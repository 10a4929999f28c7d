"""The recursive O(n) step of trees in joint coordinates (the articulated-body algorithm,
gaussopt.multibody.tree.tree_compiled.recursive_step, taken by the engine from
gaussopt.core.settings.TREE_MIN_N coordinates on) against references that do not share
its code:

* random trees written as MJCF (random parents; hinges, slides, balls, two joints on one
  body, a free root; random inertias in rotated frames, armature, damping, stiffness):
  MuJoCo's ``qacc`` at random states, with the bound of tests/test_tree.py (gaussopt's
  verified step error through the map to joint accelerations, plus MuJoCo's ``nv cond(M)
  eps |qacc|``), and a dense solve of Lagrange's equations of the first kind (the
  joint-space ``M``, ``F`` and rows from the composite-rigid-body algorithm, numpy's LU of
  the KKT matrix), whose rounding is ``cond(K) eps`` beside the verified bound;
* the balls' normalization rows hold (their multipliers vanish: the module docstring of
  ``recursive_step`` says why);
* a step the recursion must refuse (a singular mass matrix: a point mass on a hinge
  through itself) is decided by the dense kernel, with its error;
* a 200-link chain: MuJoCo's ``qacc`` (tests/test_tree.py's bound), and the 0.05 s run
  takes the recursive step at every right-hand side.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.settings import TREE_MIN_N
from test_step_properties import solver_tolerance, step_error_bound
from test_trajectory import EPS

mj = pytest.importorskip("mujoco")
import gaussopt.multibody.io.mjcf as mjcf  # noqa: E402
from gaussopt.multibody import tree  # noqa: E402
from test_mjcf import joint_mass  # noqa: E402
from test_tree import check_against_mujoco  # noqa: E402
from test_tree import gauss_bound  # noqa: E402


def _vec(x) -> str:
    return " ".join(f"{float(c):.6g}" for c in x)


def random_tree_xml(rng: np.random.Generator, min_n: int) -> str:
    """A random tree of at least ``min_n`` coordinates (MJCF)."""
    bodies = []                                  # (parent index or -1, xml of its joints)
    n = 0
    kinds = ["hinge", "hinge", "slide", "ball", "hinge+slide", "hinge+hinge"]
    while n < min_n:
        k = len(bodies)
        parent = -1 if k == 0 else int(rng.integers(0, k))
        if k == 0 and rng.random() < 0.5:
            kind = "free"
        else:
            kind = kinds[int(rng.integers(0, len(kinds)))]
        joints = []
        for j, part in enumerate(kind.split("+")):
            axis = rng.normal(size=3)
            attrs = f'name="j{k}_{j}" type="{part}"'
            if part in ("hinge", "slide"):
                attrs += f' axis="{_vec(axis / np.linalg.norm(axis))}" pos="{_vec(rng.uniform(-0.05, 0.05, 3))}"'
                attrs += f' stiffness="{rng.uniform(0, 2):.3g}" springref="{rng.uniform(-0.3, 0.3):.3g}"'
            if part != "free":
                attrs += f' armature="{rng.uniform(0, 0.02):.3g}" damping="{rng.uniform(0, 0.1):.3g}"'
            joints.append(f"<joint {attrs}/>")
            n += {"hinge": 1, "slide": 1, "ball": 4, "free": 7}[part]
        quat = rng.normal(size=4)
        mass = rng.uniform(0.2, 2.0)
        s = rng.uniform(0.01, 0.1, 3)               # a box's squared sides: A + B >= C
        inertia = mass / 12 * np.array([s[1] + s[2], s[0] + s[2], s[0] + s[1]])
        inertial = (f'<inertial pos="{_vec(rng.uniform(-0.1, 0.1, 3))}" '
                    f'quat="{_vec(quat / np.linalg.norm(quat))}" mass="{mass:.6g}" '
                    f'diaginertia="{_vec(inertia)}"/>')
        bodies.append((parent, "".join(joints) + inertial))
    children = {i: [] for i in range(-1, len(bodies))}
    for i, (par, _) in enumerate(bodies):
        children[par].append(i)

    def body(i: int) -> str:
        pos = rng.uniform(-0.3, 0.3, 3)
        inner = "".join(body(c) for c in children[i])
        return f'<body name="b{i}" pos="{_vec(pos)}">{bodies[i][1]}{inner}</body>'

    world = "".join(body(c) for c in children[-1])
    return (f'<mujoco model="random_tree"><option gravity="0 0 -9.81"><flag contact="disable"/>'
            f'</option><worldbody>{world}</worldbody></mujoco>')


def _load(xml: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mjcf.UnmappedFeatureWarning)
        return go.multibody.load(xml)


@pytest.mark.parametrize("seed", range(6))
def test_random_trees_match_mujoco_and_the_dense_solve(seed):
    """At 8 random states per tree: MuJoCo's qacc within tests/test_tree.py's bound, the
    dense KKT solve within the verified bound plus its own rounding, the normalization
    rows with zero multipliers; the recursive step answered every one."""
    rng = np.random.default_rng(seed)
    xml = random_tree_xml(rng, TREE_MIN_N)
    model = _load(xml)
    m = mj.MjModel.from_xml_string(xml)
    assert model.system.recursive is not None and model.n >= TREE_MIN_N
    check_against_mujoco(model, m, 8, rng)
    d = mj.MjData(m)
    from test_mjcf import random_state
    for _ in range(8):
        qpos, qvel = random_state(m, rng)
        q, v = mjcf.state_from_mujoco(model, m, qpos, qvel)
        step = go.solve_step(model.system, 0.0, q, v)
        assert step.info["recursive"], step.info
        sysm = model.system
        M, F = sysm.mass(0.0, q), sysm.force(0.0, q, v)
        A, b = sysm.rows(0.0, q, v)
        A = A.reshape(-1, q.size)
        k = A.shape[0]
        K = np.block([[M, A.T], [A, np.zeros((k, k))]])
        ref = np.linalg.solve(K, np.concatenate([F, b]))
        # the LU solve's forward error: cond(K) eps |x| (a generous constant: 10 n)
        lu = 10 * K.shape[0] * np.linalg.cond(K) * EPS * np.linalg.norm(ref)
        assert np.linalg.norm(step.a - ref[:q.size]) <= gauss_bound(model, q, v, step) + lu
        # the rows hold: the step's verified feasibility (unit rows |p| = 1, backward error
        # <= gaussopt.gauss.dense_step.direct_tolerance = 16 (n + m + 1) eps of |a| + |b|)
        tol = 16 * (q.size + k + 1) * EPS
        assert np.linalg.norm(A @ step.a - b) <= tol * (np.linalg.norm(step.a) + np.linalg.norm(b))
        # the multipliers are zero exactly (recursive_step's docstring); computed, they are
        # p . (M a - F) with M a - F formed by Newton-Euler: its rounding, ~n eps of the
        # terms' size |F| + |M| |a| per entry (64: a generous constant)
        assert np.abs(step.multipliers).max(initial=0.0) <= 64 * EPS * model.n * (
            np.abs(F).max() + np.abs(M).max() * np.abs(step.a).max())
    del d


def test_a_singular_mass_matrix_is_left_to_the_dense_kernel():
    """A point mass on a hinge whose axis passes through it (no inertia about that axis):
    ``M`` is singular; the recursion meets a zero pivot and refuses; the dense kernel then
    decides -- the same error as without the recursive step."""
    links, joints = [], []
    parent = None
    for i in range(TREE_MIN_N):
        name = f"l{i}"
        last = i == TREE_MIN_N - 1
        links.append(tree.Link(name, parent, position=(0.0, 0.0, -0.1 if i else 0.0),
                               mass=1.0, com=(0.0, 0.0, 0.0 if last else -0.05),
                               inertia=np.zeros((3, 3)) if last else 0.01 * np.eye(3)))
        joints.append(tree.TreeJoint(f"h{i}", "hinge", name, axis=(0.0, 0.0, 1.0) if last
                                     else ((0.0, 1.0, 0.0) if i % 2 == 0 else (1.0, 0.0, 0.0))))
        parent = name
    model = tree.Model(links, joints, gravity=(0.0, 0.0, -9.81))
    assert model.system.recursive is not None
    q = np.full(model.n, 0.2)
    v = np.full(model.n, 0.1)
    errors = []
    for recursive in (model.system.recursive, None):
        sysm = tree.Model(links, joints, gravity=(0.0, 0.0, -9.81)).system
        sysm.recursive = recursive
        with pytest.raises(go.GaussoptError) as e:
            go.solve_step(sysm, 0.0, q, v)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]


def chain_xml(N: int) -> str:
    """A chain of ``N`` hinge links hanging from the world, axes alternating y and x
    (benchmarks/robots.py's)."""
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


def test_a_200_link_chain_matches_mujoco_and_runs_on_the_recursion():
    """The chain of benchmarks/robots.py (hinges, axes alternating): MuJoCo's qacc at 3
    random states within tests/test_tree.py's bound; its 0.05 s run answers every
    right-hand side by the recursive step."""
    xml = chain_xml(200)
    model = _load(xml)
    m = mj.MjModel.from_xml_string(xml)
    rng = np.random.default_rng(3)
    check_against_mujoco(model, m, 3, rng)
    q, v = model.initial_state()
    tr = go.simulate(model.system, (0.0, 0.05), q, np.full(model.n, 0.1))
    assert tr.success, tr.message
    assert tr.stats["sparse_steps"] == tr.stats["rhs_evaluations"]


def test_controls_reach_the_recursive_step_through_a_stepper():
    """A 30-link chain with motors: a :class:`~gaussopt.Stepper` with
    ``inputs=model.actuator_names`` writes the controls into the model functions' own
    parameters, which the recursive step reads: after 20 steps its accelerations are
    MuJoCo's ``qacc`` with that ``ctrl`` (the step's verified error, ~1e-14 relative, and
    the state's mapping), and its state is where ``go.simulate`` of
    ``model.controlled(ctrl)`` ends (same method and dt: rounding)."""
    N = TREE_MIN_N
    acts = "".join(f'<motor joint="j{i}" gear="2"/>' for i in range(0, N, 5))
    xml = chain_xml(N).replace("</worldbody>", f"</worldbody><actuator>{acts}</actuator>")
    model = _load(xml)
    m = mj.MjModel.from_xml_string(xml)
    d = mj.MjData(m)
    q0, v0 = model.initial_state()
    ctrl = np.linspace(-0.2, 0.3, m.nu)
    stepper = go.Stepper(model.system, q0, v0, dt=1e-3, inputs=model.actuator_names)
    stepper.step(ctrl, nstep=20)
    tr = go.simulate(model.controlled(ctrl), (0.0, 0.02), q0, v0, method="rk4", dt=1e-3)
    assert tr.success and tr.stats["sparse_steps"] == tr.stats["rhs_evaluations"]
    # the same 20 RK4 steps of the same right-hand side: they differ by the rounding of
    # the two evaluation orders only, ~20 steps x 4 stages x eps x |q|, |v| ~ 1 (as
    # tests/test_tree_actuation.py's comparison)
    assert np.abs(stepper.q - tr.q[-1]).max() < 1e-13
    assert np.abs(stepper.v - tr.v[-1]).max() < 1e-12
    d.qpos[:], d.qvel[:], d.ctrl[:] = stepper.q, stepper.v, ctrl
    mj.mj_forward(m, d)
    assert np.abs(d.qpos).max() > 1e-3                       # (the motors moved it)
    # tests/test_tree.py's bound: the step's verified error (here with the controls'
    # force) plus MuJoCo's 10 nv cond(M) eps |qacc| (hinges: qacc is a itself)
    sysc = model.controlled(ctrl)
    M, F = sysc.mass(0.0, stepper.q), sysc.force(0.0, stepper.q, stepper.v)
    bound = (step_error_bound(M, F, np.zeros((0, N)), np.zeros(0), stepper.a,
                              solver_tolerance("closed_form", N, 0))
             + 10 * m.nv * np.linalg.cond(joint_mass(m, d)) * EPS * np.linalg.norm(d.qacc))
    assert np.linalg.norm(stepper.a - d.qacc) <= bound


def _closures_xml(rng: np.random.Generator, xml: str, kinds=("connect", "connect", "weld")) -> str:
    """``xml`` (a random tree of :func:`random_tree_xml`) with equalities closing loops:
    each between a random body and the world or another body, chosen where the tree
    path between them has at least twice the equality's rows in degrees of freedom (so
    that the rows are independent at almost every state)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    parent, dofs = {}, {}

    def walk(el, par):
        for b in el.findall("body"):
            name = b.get("name")
            parent[name] = par
            dofs[name] = sum({"hinge": 1, "slide": 1, "ball": 3, "free": 6}[j.get("type")]
                             for j in b.findall("joint"))
            walk(b, name)
    walk(root.find("worldbody"), None)

    def chain(b):
        out = []
        while b is not None:
            out.append(b)
            b = parent[b]
        return out

    names = sorted(parent)
    eqs = []
    for kind in kinds:
        need = 2 * (3 if kind == "connect" else 6)
        for _ in range(1000):
            b1 = names[int(rng.integers(len(names)))]
            b2 = None if rng.random() < 0.4 else names[int(rng.integers(len(names)))]
            c1, c2 = chain(b1), chain(b2) if b2 is not None else []
            path = set(c1) ^ set(c2)              # (the bodies below the common ancestor)
            if b1 != b2 and sum(dofs[b] for b in path) >= need:
                break
        other = f' body2="{b2}"' if b2 is not None else ""
        anchor = f' anchor="{_vec(rng.uniform(-0.1, 0.1, 3))}"' if kind == "connect" else ""
        eqs.append(f'<{kind} body1="{b1}"{other}{anchor}/>')
    return xml.replace("</mujoco>", f"<equality>{''.join(eqs)}</equality></mujoco>")


def _sigma_min(A: np.ndarray) -> float:
    """The smallest singular value of the rows of ``A`` normalized (the dense kernel's
    measure of their independence)."""
    An = A / np.linalg.norm(A, axis=1)[:, None]
    return float(np.linalg.svd(An, compute_uv=False)[-1])


@pytest.mark.parametrize("seed", range(4))
def test_random_trees_with_closures_take_the_recursion_and_match_the_dense_solve(seed):
    """Random trees of :func:`random_tree_xml` closed by two ``connect`` and one ``weld``
    equality (12 rows beside the balls'): at random states where the rows are independent
    (the normalized rows' smallest singular value above 1e-4; at least 5 of 8 states) the
    recursive step answers (its Delassus solve of the closure rows, the dense kernel's
    rank decision keeping every row), within the verified bound plus the LU solve's
    rounding of a dense solve of Lagrange's equations of the first kind; its multipliers
    are that solve's, and the rows hold."""
    rng = np.random.default_rng(100 + seed)
    tree_xml = random_tree_xml(rng, TREE_MIN_N)
    for _ in range(20):                 # equalities independent at the reference state
        model = _load(_closures_xml(rng, tree_xml))
        q, v = model.initial_state()
        A = model.system.rows(0.0, q, v)[0].reshape(-1, model.n)
        if _sigma_min(A) > 0.05:
            break
    sysm = model.system
    assert sysm.recursive is not None and model.n >= TREE_MIN_N
    n = model.n
    answered = 0
    for _ in range(8):
        q, v = model.initial_state()
        q = q + rng.normal(scale=0.2, size=n)
        v = rng.normal(size=n)
        M, F = sysm.mass(0.0, q), sysm.force(0.0, q, v)
        A, b = sysm.rows(0.0, q, v)
        A = A.reshape(-1, n)
        if _sigma_min(A) < 1e-4:
            continue                    # (near a singular position: the dense kernel's)
        step = go.solve_step(sysm, 0.0, q, v)
        assert step.info["recursive"], step.info
        answered += 1
        k = A.shape[0]
        K = np.block([[M, A.T], [A, np.zeros((k, k))]])
        ref = np.linalg.solve(K, np.concatenate([F, b]))
        # the LU solve's forward error: cond(K) eps |x| (a generous constant: 10 (n + k))
        lu = 10 * K.shape[0] * np.linalg.cond(K) * EPS * np.linalg.norm(ref)
        bound = gauss_bound(model, q, v, step)
        assert np.linalg.norm(step.a - ref[:n]) <= bound + lu
        # the multipliers (M a = F + A^T lam: ref holds -lam): the same rounding, and the
        # step's error through A^T's pseudo-inverse (|lam - lam*| <= |M| |a - a*| / s_min(A)
        # from the stationarity of both)
        s_min = np.linalg.svd(A, compute_uv=False)[-1]
        assert (np.linalg.norm(step.multipliers + ref[n:])
                <= lu + np.linalg.norm(M, 2) * bound / s_min)
        # the rows hold: the step's verified feasibility (16 (n + m + 1) eps, normalized)
        tol = 16 * (n + k + 1) * EPS
        nu = np.linalg.norm(A, axis=1)
        assert (np.linalg.norm((A @ step.a - b) / nu)
                <= tol * (np.linalg.norm(step.a) + np.linalg.norm(b / nu)))
    assert answered >= 5


def test_redundant_closures_are_left_to_the_dense_kernel():
    """The same ``connect`` twice (three redundant rows): the dense kernel's rank decision
    on the rows drops three directions, so the recursion's answer is not taken; the step
    is the dense kernel's, the same as without the recursive step (the same kernel
    decides: to rounding of the two evaluations)."""
    rng = np.random.default_rng(7)
    xml = _closures_xml(rng, random_tree_xml(rng, TREE_MIN_N), kinds=("connect",))
    eq = xml[xml.index("<equality>") + 10:xml.index("</equality>")]
    xml = xml.replace(f"<equality>{eq}", f"<equality>{eq}{eq}")
    q, v = None, None
    results = []
    for recursive in (True, False):
        model = _load(xml)
        if not recursive:
            model.system.recursive = None
        if q is None:
            q, v = model.initial_state()
            v = rng.normal(size=model.n)
        step = go.solve_step(model.system, 0.0, q, v)
        assert not step.info["recursive"]
        assert step.info["rank"] == model.m - 3
        results.append(step.a)
    assert np.abs(results[0] - results[1]).max() <= 1e-12 * np.abs(results[1]).max()


def closed_chain_xml(N: int, bend: float = 9.0) -> str:
    """:func:`chain_xml` curled (every link turned by ``bend`` degrees about x and y from
    its parent: away from the straight chain, whose tip cannot move along it) with its
    last link's tip connected to the world where it is in the model as written: a loop
    of ``N`` hinges."""
    xml = chain_xml(N).replace('pos="0 0 -0.1">', f'pos="0 0 -0.1" euler="{bend} {bend} 0">')
    return xml.replace("</mujoco>", f'<equality><connect body1="b{N - 1}" '
                                    'anchor="0 0 -0.1"/></equality></mujoco>')


def test_a_closed_chain_runs_on_the_recursion_as_on_the_dense_kernel():
    """A loop of 40 hinges (:func:`closed_chain_xml`): 20 RK4 steps take the recursive step
    at every right-hand side and end where the dense kernel's run ends (the same method
    and dt: the two differ by the rounding of their evaluations, about 20 steps x 4
    stages x eps times the accelerations' condition, |a| ~ 50 here: measured 4e-15 in q
    and 5e-14 in v); the loop stays closed (RK4's local error dt^5 |q^(5)| ~ 1e-15 x 100
    per step, 20 steps: below 1e-10; measured 4e-16)."""
    xml = closed_chain_xml(40)
    ends = []
    for recursive in (True, False):
        model = _load(xml)
        if not recursive:
            model.system.recursive = None
        q0, v0 = model.initial_state()
        assert np.abs(model.phi(0.0, q0)).max() < 1e-14
        tr = go.simulate(model.system, (0.0, 0.02), q0, v0, method="rk4", dt=1e-3)
        assert tr.success, tr.message
        assert tr.stats["sparse_steps"] == (tr.stats["rhs_evaluations"] if recursive else 0)
        assert np.abs(model.phi(0.0, tr.q[-1])).max() < 1e-10
        ends.append((tr.q[-1], tr.v[-1]))
    assert np.abs(ends[0][0] - ends[1][0]).max() < 1e-12
    assert np.abs(ends[0][1] - ends[1][1]).max() < 1e-11


@pytest.mark.parametrize("N", [5, TREE_MIN_N + 10])
def test_a_loop_loaded_at_a_singular_position_is_stepped_or_refused_by_its_physics(N):
    """A chain written straight with its tip connected to the world (:func:`closed_chain_xml`
    without the curl): at its reference pose the tip cannot move along the chain, so the
    connect's row along it vanishes (a singular position, not an identically zero row).
    Its ``gamma`` is the derivative of ``Phi_q v`` (the system's check, which compares it
    with finite differences, passes; it used to refuse the model's own gamma, zeroed with
    the row). At rest the step holds the chain (the vanished row's right-hand side is 0:
    the other two rows decide); moving sideways, the chain would have to shorten: the
    vanished row's right-hand side is not zero and the step says so, naming the row."""
    model = _load(closed_chain_xml(N, bend=0.0))
    sysm = model.system
    q0, v0 = model.initial_state()
    A = sysm.rows(0.0, q0, v0)[0].reshape(-1, N)
    assert np.abs(A[2]).max() == 0.0 and np.abs(A[:2]).max() > 0.01   # (z: along the chain)
    step = go.solve_step(sysm, 0.0, q0, v0)
    assert step.info["rank"] == 2
    # at rest under gravity along the chain, nothing moves (the tip is held, the links
    # hang): gravity has no torque about any hinge but its rounding, ~n eps g (measured 0)
    assert np.abs(step.a).max() <= N * EPS * 9.81
    v = np.random.default_rng(0).normal(size=N)
    v -= np.linalg.pinv(A[:2]) @ (A[:2] @ v)             # along the two live rows
    sysm.check(0.0, q0, v)
    with pytest.raises(go.InconsistentConstraintsError, match=r"rows \[2\] vanished"):
        go.solve_step(sysm, 0.0, q0, v)
