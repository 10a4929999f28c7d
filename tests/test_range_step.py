"""The range-space path of the dense step (:func:`gaussopt.gauss.dense_step.range_space`)
against the null-space path on the same data.

Both paths share the rank decision and the verification; they differ in the solve (the
augmented mass matrix ``M / w + V_r V_r^T`` by Cholesky and the ``r x r`` Delassus matrix,
against ``N^T M N``). The reference here is the null-space path as :func:`decide` and
:func:`closed_form` compute it (the path of every step before the range space, and of the
QP and GA solvers still), checked by the kernel's own verification: two results verified to
backward errors ``be_1`` and ``be_2`` differ by at most the sum of their forward-error
bounds (:func:`test_step_properties.step_error_bound`, from the conditioning of the rows and
of ``N^T M N``). Where the range space must not answer (redundant or folded rows, an
indeterminate motion) the step falls back to the null-space path, whose result is then the
reference's bit for bit.

* Trees in joint coordinates (tests/data/*.xml, loaded as trees) at random MuJoCo states:
  every one whose sizes select the range space (``3 m <= n``: the humanoid- and ant-like
  trees, the free double pendulum, the chains without rows) is answered by it, within the
  bound of the null-space result.
* A parallelogram linkage closed by a ``connect`` (tests' own MJCF, two free bodies beside it
  so that ``3 m <= n``) at its flat configuration, where the closure rows drop to rank 1:
  the step falls back; away from it the range space answers.
* Kernel problems with a singular ``M`` (quaternion-like null directions): fixed by the
  rows (range space), not fixed (indeterminate, as before), redundant rows, zero rows with
  a nonzero right-hand side (inconsistent, as before).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
from gaussopt.gauss import solution
from test_step_properties import step_error_bound

EPS = float(np.finfo(float).eps)
DATA = Path(__file__).parent / "data"


def kernel_step(M, F, A, b, mass_tree=None):
    """:func:`gauss_step` (closed form, multipliers) on fresh data: ``(status, a, r, mL, be,
    flags)``; with ``mass_tree``, the range space factors ``M`` along that tree."""
    n, m = M.shape[0], A.shape[0]
    w = K.make_work(n, m, mass_tree)
    status, fa, r, mL, k, rho, allow, be, dmin, flags = K.gauss_step(
        M, F, A, b, np.zeros(m), 0.0, 1e-8, K.CLOSED_FORM, True, True, w)
    return status, WS.field(w, fa)[:n].copy(), r, mL, be, flags


def null_space_step(M, F, A, b):
    """The null-space path alone (:func:`decide`, :func:`closed_form`, :func:`check`):
    ``(status, a, be)``; status INDETERMINATE without ``a``."""
    dec = solution.decide(M, A, b)
    if not dec.determinate:
        return K.INDETERMINATE, None, np.inf
    a = dec.closed_form(M, F)
    status, rho, allow, be = dec.check(M, F, A, b, None, 1e-8, a)
    return status, a, be


def bound(M, F, A, b, a, be):
    """Forward-error bound of a result verified to the backward error ``be``: the computed
    ``be`` errs by the rounding of the residuals it is made of, at most ``(n + 1) eps``
    times the same sums (dense_step's module docstring, item 3); twice that is added."""
    n, m = M.shape[0], A.shape[0]
    return step_error_bound(M, F, A, b, a, be + 2 * (n + m + 1) * EPS)


def compare(M, F, A, b, mass_tree=None):
    """The kernel's step and the null-space path agree within their bounds; returns the
    kernel's flags and the relative difference."""
    st1, a1, r, mL, be1, flags = kernel_step(M, F, A, b, mass_tree)
    st2, a2, be2 = null_space_step(M, F, A, b)
    assert st1 == st2 == K.OK
    tol = bound(M, F, A, b, a1, be1) + bound(M, F, A, b, a2, be2)
    err = float(np.linalg.norm(a1 - a2))
    assert err <= tol, (err, tol)
    return flags, err / np.linalg.norm(a2)


# ----------------------------------------------------------------------------- trees
mj = pytest.importorskip("mujoco")
import gaussopt.multibody.io.mjcf as mjcf  # noqa: E402
from test_mjcf import random_state  # noqa: E402

TREES = ["double_pendulum.xml", "double_pendulum_free.xml", "arm6.xml", "mixed_joints.xml",
         "double_pendulum_armature.xml", "humanoid_tree.xml", "ant_tree.xml"]


def _load(source):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mjcf.UnmappedFeatureWarning)
        return mjcf.load(source)


@pytest.mark.parametrize("fname", TREES)
@pytest.mark.parametrize("factor", ["dense", "tree"])
def test_trees_range_space_equals_null_space(fname, factor):
    """At 10 random states of each tree: the range space answers (``3 m <= n`` for all of
    them) and agrees with the null-space path within the bound (measured: <= 1e-14
    relative), with a dense Cholesky of the augmented mass matrix and with its factor
    along the tree (``System.mass_tree``, what the model's own steps use)."""
    jt = _load(str(DATA / fname))
    m = mj.MjModel.from_xml_path(str(DATA / fname))
    assert K.range_space_pays(jt.n, jt.m)
    tree = jt.system.mass_tree if factor == "tree" else None
    assert factor == "dense" or tree is not None
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(10):
        qpos, qvel = random_state(m, rng)
        q, v = mjcf.state_from_mujoco(jt, m, qpos, qvel)
        M, F, A, b = jt.system.evaluate(0.0, q, v)
        flags, rel = compare(*(np.array(x, dtype=float) for x in (M, F, A, b)), tree)
        assert flags & K.RANGE_FLAG
        worst = max(worst, rel)
    print(f"{fname}: n {jt.n}, m {jt.m}, worst relative difference {worst:.1e}")


def test_mass_tree_is_the_sparsity_of_the_mass_matrix():
    """``System.mass_tree`` of every tree model: parents numbered first, and ``M`` at a
    random state is zero wherever neither coordinate is an ancestor of the other (the
    property the tree factorization relies on; a violation would make its answer fail
    the verification, not pass wrongly, but would cost the fallback at every step)."""
    rng = np.random.default_rng(8)
    for fname in TREES:
        jt = _load(str(DATA / fname))
        par = jt.system.mass_tree
        n = jt.n
        assert par.shape == (n,) and np.all(par < np.arange(n))
        anc = _ancestors(par)
        m = mj.MjModel.from_xml_path(str(DATA / fname))
        q, v = mjcf.state_from_mujoco(jt, m, *random_state(m, rng))
        M = np.array(jt.system.evaluate(0.0, q, v)[0])
        assert np.all(M[~anc] == 0.0), fname


#: a parallelogram A-B-C-D (crank AB 0.2, coupler BC 0.5, rocker DC 0.2, ground AD 0.5)
#: drawn at its flat configuration, along u = (cos 0.6, 0, sin 0.6) in the xz plane (hinges
#: along y), closed by a connect at C; two free bodies beside it (n 17, m 5: 3 m <= n).
#: At qpos0 the connect's rows x and z are proportional (all of A, B, C, D on one line: the
#: columns of the Jacobian are all along y x u): rank 1 of 2 live rows (row y is zero).
_U = np.array([np.cos(0.6), 0.0, np.sin(0.6)])


def _p(s):
    return " ".join(f"{x:.17g}" for x in s * _U)


FLAT = f"""
<mujoco model="flat_parallelogram">
  <compiler angle="radian"/>
  <option gravity="0 0 -9.81"><flag contact="disable"/></option>
  <worldbody>
    <body name="crank">
      <joint name="hA" type="hinge" axis="0 1 0"/>
      <inertial pos="{_p(0.1)}" mass="0.4" diaginertia="0.001 0.0013 0.0004"/>
      <body name="coupler" pos="{_p(0.2)}">
        <joint name="hB" type="hinge" axis="0 1 0"/>
        <inertial pos="{_p(0.25)}" mass="0.9" diaginertia="0.004 0.02 0.018"/>
      </body>
    </body>
    <body name="rocker" pos="{_p(0.5)}">
      <joint name="hD" type="hinge" axis="0 1 0"/>
      <inertial pos="{_p(0.1)}" mass="0.6" diaginertia="0.007 0.0072 0.0005"/>
    </body>
    <body name="f1" pos="2 0 1">
      <freejoint/>
      <inertial pos="0 0 0" mass="1.3" diaginertia="0.02 0.03 0.04"/>
    </body>
    <body name="f2" pos="-2 0 1">
      <freejoint/>
      <inertial pos="0 0 0" mass="0.7" diaginertia="0.01 0.012 0.02"/>
    </body>
  </worldbody>
  <equality>
    <connect name="C" body1="coupler" body2="rocker" anchor="{_p(0.5)}"/>
  </equality>
</mujoco>
"""


def test_closure_rank_drop_falls_back_to_the_null_space():
    """The parallelogram at its flat configuration (rank drop of the closure rows: 2 live
    rows, rank 1): the step falls back to the null-space path (no range-space flag) and
    its result is the null-space path's bit for bit; turned away from it (crank 0.3 rad,
    the parallelogram's coupler parallel to the ground) the range space answers, within
    the bound of the null-space result."""
    jt = _load(FLAT)
    assert (jt.n, jt.m) == (17, 5) and K.range_space_pays(jt.n, jt.m)
    q = jt.q_reference
    i = {c: k for k, c in enumerate(jt.coordinates)}
    v = np.zeros(jt.n)
    v[i["hA"]], v[i["hB"]], v[i["hD"]] = 1.0, -1.0, 1.0     # the parallelogram's motion
    M, F, A, b = (np.array(x, dtype=float) for x in jt.system.evaluate(0.0, q, v))
    st1, a1, r, mL, be1, flags = kernel_step(M, F, A, b)
    assert r < mL                                         # the rank drop
    assert not flags & K.RANGE_FLAG
    st2, a2, be2 = null_space_step(M, F, A, b)
    assert st1 == st2
    if st1 == K.OK:
        assert np.array_equal(a1, a2)
    # a regular configuration: crank and rocker turned by 0.3, coupler kept parallel
    q2 = q.copy()
    q2[i["hA"]], q2[i["hB"]], q2[i["hD"]] = 0.3, -0.3, 0.3
    M, F, A, b = (np.array(x, dtype=float) for x in jt.system.evaluate(0.0, q2, v))
    flags, rel = compare(M, F, A, b)
    assert flags & K.RANGE_FLAG


# ----------------------------------------------------------------------------- kernel problems
def _tree_like(rng, nq, nfree):
    """A positive semidefinite ``M`` (n = nfree + 4 nq) singular along ``nq`` unit
    quaternion-like directions ``e_j`` (4 coordinates each, ``M e_j = 0``), with the rows
    ``e_j^T a = b_j`` that fix them, and a force."""
    n = nfree + 4 * nq
    E = np.zeros((nq, n))
    for j in range(nq):
        x = rng.normal(size=4)
        E[j, nfree + 4 * j:nfree + 4 * j + 4] = x / np.linalg.norm(x)
    P = np.eye(n) - E.T @ E                          # (the e_j are orthonormal)
    B = rng.normal(size=(n, n))
    M = P @ (B @ B.T + n * np.eye(n)) @ P
    M = 0.5 * (M + M.T)
    return M, rng.normal(size=n), E, rng.normal(size=nq)


def test_singular_mass_fixed_by_the_rows_takes_the_range_space():
    """``M`` singular along three quaternion directions, fixed by their rows (and one more
    generic row): the range space answers, within the bound of the null-space result."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        M, F, E, b = _tree_like(rng, 3, 6)
        A = np.vstack([E, rng.normal(size=(1, M.shape[0]))])
        b = np.append(b, rng.normal())
        flags, rel = compare(M, F, A, b)
        assert flags & K.RANGE_FLAG


def test_singular_mass_not_fixed_is_indeterminate_as_before():
    """A coordinate without mass and without a row (n 6, m 2: the range space's size):
    ``M / w + V_r V_r^T`` has an exactly zero pivot, the step falls back and the null-space
    path reports the indeterminate motion; with a row on that coordinate both answer, the
    range space within the bound. (The data are exact: an ``M`` singular only to
    rounding, ``lambda ~ 1e-16`` relative, is at the null-space test's own threshold
    ``rank_tol**2`` and decided either way by rounding.)"""
    M = np.diag([1.0, 2.0, 3.0, 4.0, 5.0, 0.0])
    F = np.array([1.0, -2.0, 0.5, 3.0, -1.0, 0.0])
    A = np.zeros((2, 6))
    A[0, 0] = A[1, 1] = 1.0
    b = np.array([0.3, -0.7])
    st1, a1, r, mL, be1, flags = kernel_step(M, F, A, b)
    assert not flags & K.RANGE_FLAG
    assert st1 == K.INDETERMINATE == null_space_step(M, F, A, b)[0]
    A[1] = [0.0, 1.0, 0.0, 0.0, 0.5, 1.0]           # the massless coordinate held by a row
    flags, rel = compare(M, F, A, b)
    assert flags & K.RANGE_FLAG


def test_redundant_rows_fall_back_bit_for_bit():
    """A row repeated (scaled): 4 live rows of rank 3, consistent; the step falls back and
    gives the null-space path's accelerations bit for bit."""
    rng = np.random.default_rng(5)
    M, F, E, b = _tree_like(rng, 3, 6)
    A = np.vstack([E, 2.0 * E[1]])
    b = np.append(b, 2.0 * b[1])
    st1, a1, r, mL, be1, flags = kernel_step(M, F, A, b)
    st2, a2, be2 = null_space_step(M, F, A, b)
    assert (st1, st2, r, mL) == (K.OK, K.OK, 3, 4)
    assert not flags & K.RANGE_FLAG
    assert np.array_equal(a1, a2)


def test_inconsistent_rows_are_reported_as_before():
    """A repeated row with another right-hand side (falls back; inconsistent) and a zero
    row with a nonzero right-hand side (the range space solves the live rows; the check
    after it finds the vanished row's contradiction): the statuses of the null-space path."""
    rng = np.random.default_rng(6)
    M, F, E, b = _tree_like(rng, 3, 6)
    A = np.vstack([E, E[1]])
    bb = np.append(b, b[1] + 1.0)
    assert kernel_step(M, F, A, bb)[0] == K.INCONSISTENT == null_space_step(M, F, A, bb)[0]
    A = np.vstack([E, np.zeros(M.shape[0])])
    bb = np.append(b, 1.0)
    st1, a1, r, mL, be1, flags = kernel_step(M, F, A, bb)
    assert flags & K.RANGE_FLAG
    assert st1 == K.INCONSISTENT_VANISHED == null_space_step(M, F, A, bb)[0]


# ----------------------------------------------------------------------------- tree factor
def _random_tree(rng, n):
    """Parents of ``n`` coordinates (parents first): runs of 1-4 coordinates (joints) hung
    from random earlier ones, some at the root."""
    par = np.full(n, -1, dtype=np.int64)
    i = 0
    while i < n:
        size = int(rng.integers(1, 5))
        up = int(rng.integers(-1, i)) if i > 0 else -1
        for c in range(i, min(i + size, n)):
            par[c] = up
            up = c
        i += size
    return par


def _ancestors(par):
    n = par.shape[0]
    anc = np.eye(n, dtype=bool)
    for i in range(n):
        j = par[i]
        while j != -1:
            anc[i, j] = anc[j, i] = True
            j = par[j]
    return anc


def _tree_spd(rng, par, singular=()):
    """``L^T L`` for a random lower ``L`` on the tree's pattern (so ``M`` has the pattern),
    rank-deficient by the coordinates in ``singular`` (their diagonal of ``L`` zero)."""
    n = par.shape[0]
    L = np.zeros((n, n))
    for i in range(n):
        L[i, i] = 0.0 if i in singular else 0.5 + rng.random()
        j = par[i]
        while j != -1:
            L[i, j] = 0.4 * rng.normal()
            j = par[j]
    return L.T @ L, L


def test_tree_factor_reproduces_the_matrix_and_solves():
    """:func:`tree_ltl` on random trees (n 5..60): ``L^T L`` reproduces ``S`` to ``c n eps
    |S|`` (Cholesky's backward error, Higham Thm. 10.3, ``c = 4`` for the constant and the
    norm), ``L`` keeps the pattern, its solves invert ``L`` and ``L^T`` to the forward
    error ``c n eps cond(L)`` of a triangular solve."""
    import gaussopt.gauss.dense_algebra as LA
    import gaussopt.gauss.workspace as W
    rng = np.random.default_rng(11)
    for n in (5, 9, 17, 34, 60):
        par = _random_tree(rng, n)
        w = K.make_work(n, 1, par)
        run = W.view(w, "tree")[n + 1:].copy()
        S, _ = _tree_spd(rng, par)
        anc = _ancestors(par)
        L = np.where(np.tril(anc), S, 7.0)              # off the pattern: never read
        dmin = LA.tree_ltl(L, par, run)
        L = np.where(np.tril(anc), L, 0.0)
        assert dmin > 0.0
        assert np.abs(L.T @ L - S).max() <= 4 * n * EPS * np.abs(S).max()
        x = rng.normal(size=n)
        cond = np.linalg.cond(L)
        y = x.copy()
        LA.tree_solve_lt(L, par, run, y)
        ref = np.linalg.solve(L.T, x)
        assert np.abs(y - ref).max() <= 4 * n * EPS * cond * np.abs(ref).max()
        y = x.copy()
        LA.tree_solve_l(L, par, run, y)
        ref = np.linalg.solve(L, x)
        assert np.abs(y - ref).max() <= 4 * n * EPS * cond * np.abs(ref).max()
    # a singular matrix: a pivot of zero is refused
    par = _random_tree(rng, 12)
    w = K.make_work(12, 1, par)
    S, _ = _tree_spd(rng, par, singular=(0,))
    assert LA.tree_ltl(S.copy(), par, W.view(w, "tree")[13:].copy()) <= 1e-12


def test_tree_range_space_on_random_trees():
    """Random trees in the kernel with the tree's factor: ``M`` singular along quaternion-
    like directions of 4-coordinate runs, fixed by their rows (on one path each: they
    augment ``M``), plus a closure row between two branches (through the Delassus matrix
    only): the range space answers, within the bound of the null-space result. ``M``
    singular in a coordinate that only the closure row restrains: the tree's pivot fails,
    the dense range space or the null space answers, still within the bound."""
    rng = np.random.default_rng(12)
    answered = 0
    for trial in range(30):
        n = int(rng.integers(12, 40))
        par = _random_tree(rng, n)
        runs = [i for i in range(3, n) if par[i] == i - 1 and par[i - 1] == i - 2
                and par[i - 2] == i - 3]
        M, L = _tree_spd(rng, par)
        rows = []
        for i in runs[:max(1, n // 12)]:                # quaternion-like blocks: M e = 0
            e = np.zeros(n)
            e[i - 3:i + 1] = rng.normal(size=4)
            e /= np.linalg.norm(e)
            P = np.eye(n) - np.outer(e, e)
            if all(np.dot(e, r) == 0.0 for r in rows):
                M = P @ M @ P
                rows.append(e)
        anc = _ancestors(par)
        M = np.where(anc, 0.5 * (M + M.T), 0.0)
        i, j = next(((i, j) for i in range(n) for j in range(i) if not anc[i, j]), (None, None))
        if i is not None:                                # a closure between two branches
            c = np.zeros(n)
            c[i], c[j] = 1.0, -0.7
            rows.append(c)
        A = np.array(rows)
        b = rng.normal(size=A.shape[0])
        F = rng.normal(size=n)
        if 3 * A.shape[0] > n:
            continue
        flags, rel = compare(M, F, A, b, par)
        answered += bool(flags & K.RANGE_FLAG)
        if i is not None:                                # only the closure holds i
            M2 = M.copy()
            M2[i, :] = M2[:, i] = 0.0
            st1, a1, r, mL, be1, fl = kernel_step(M2, F, A, b, par)
            st2, a2, be2 = null_space_step(M2, F, A, b)
            assert st1 == st2
            if st1 == K.OK:
                tol = bound(M2, F, A, b, a1, be1) + bound(M2, F, A, b, a2, be2)
                assert np.linalg.norm(a1 - a2) <= tol
    assert answered >= 20


def test_run_samples_and_solve_step_factor_alike():
    """A run's output samples of a tree (recomputed by the engine after the run) and
    ``solve_step`` at the same states both factor ``M`` along the tree: the same
    accelerations to the last bit."""
    import gaussopt as go
    jt = _load(str(DATA / "humanoid_tree.xml"))
    q, v = jt.initial_state()
    v = np.random.default_rng(0).normal(size=jt.n) * 0.3
    tr = go.simulate(jt.system, (0.0, 0.05), q, v, project_initial=True)
    assert tr.success
    for i in (0, -1):
        r = go.solve_step(jt.system, float(tr.t[i]), tr.q[i].copy(), tr.v[i].copy())
        assert np.array_equal(r.a, tr.a[i])
        assert r.info["rank"] == jt.m
