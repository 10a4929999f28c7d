"""Outputs interpolated inside a step (``t_eval`` denser than the steps:
:mod:`gaussopt.integrate.sample_interpolation`), on the README's pendulum: the states and
every diagnostic against the exact motion and the closed forms of a point mass on a rod,
the period against the elliptic integral, the interpolated outputs against the exact
recomputation of the same outputs, and a failed check recomputing every output."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ellipk

import gaussopt as go
import gaussopt.integrate.sample_interpolation as SI
from gaussopt.core.records import OUT_MANY_SAMPLES
from test_trajectory import (EPS, EXACT_ERR, G_P, L_P, M_P, Q0, TH0, V0, exact_state,
                             integration_bound, pendulum, pendulum_growth, rod_bounds)

#: the README's run: 75 steps, 30,001 outputs (400 inside a step)
T_EVAL = np.linspace(0.0, 3.0, 30001)
#: Lebesgue constant of the nodes: 10 Chebyshev--Lobatto points have 2.1 (2/pi log 9 + 0.7);
#: the outputs nearest to them, 1/400 of the step apart, move them by less than 1/40 of
#: their smallest gap, which keeps it below 4
LEBESGUE = 4.0


def run(t_eval=T_EVAL, rtol=1e-12):
    tr = go.simulate(pendulum(), (0.0, 3.0), Q0, V0, rtol=rtol, atol=rtol, t_eval=t_eval)
    assert tr.success, tr.message
    return tr


def exact_run(monkeypatch, t_eval=T_EVAL):
    """The same run with every output recomputed exactly (no step gets nodes)."""
    with monkeypatch.context() as mp:
        mp.setattr(SI, "plan", lambda t, group: None)
        return run(t_eval)


@pytest.fixture(scope="module")
def readme_run():
    return run()


def closed_forms(q, v):
    """The diagnostics of a point mass on the rod q.q = l^2 at (q, v): a = g + lam' q with
    lam' = -(v.v + q.g) / (q.q), the constraint force m lam' q, the energy."""
    g = np.array([0.0, -G_P])
    qq, vv = (q * q).sum(1), (v * v).sum(1)
    lam = -(vv + q @ g) / qq
    a = g + lam[:, None] * q
    return a, M_P * lam[:, None] * q, 0.5 * M_P * vv + M_P * G_P * q[:, 1], lam


def test_barycentric_reproduces_a_polynomial_of_its_degree():
    x = np.sort(np.random.default_rng(0).uniform(-1.0, 2.0, SI.NODES))
    c = np.arange(1.0, SI.NODES + 1)
    p = lambda s: np.polyval(c, (s - 0.5) / 1.5)          # degree NODES - 1, |p| <= sum c
    at = np.linspace(x[0], x[-1], 101)
    got = SI.barycentric(x, p(x)[:, None], at)[:, 0]
    np.testing.assert_array_equal(SI.barycentric(x, p(x)[:, None], x)[:, 0], p(x))
    # the barycentric formula is forward stable: (3 K + 4) eps Lambda_K max|p| (Higham,
    # IMA J. Numer. Anal. 24, 2004); for these random nodes Lambda is computed
    L = np.abs(np.stack([SI.barycentric(x, np.eye(SI.NODES)[:, [j]], at)[:, 0]
                         for j in range(SI.NODES)])).sum(0).max()
    assert np.abs(got - p(at)).max() <= (3 * SI.NODES + 4) * EPS * L * c.sum()


def test_groups_and_plan():
    marks = np.array([-1, 3, 3, 3, -1, 4, 4, 5])
    assert [g.tolist() for g in SI.groups(marks)] == [[1, 2, 3], [5, 6], [7]]
    t = np.linspace(0.0, 1.0, 40)
    g = np.arange(40)
    assert SI.plan(t, g[:SI.NODES]) is None              # too few: every output exact
    nodes, check = SI.plan(t, g)
    assert nodes.size == SI.NODES and np.unique(nodes).size == SI.NODES
    assert nodes[0] == 0 and nodes[-1] == 39 and check not in nodes
    assert OUT_MANY_SAMPLES >= SI.NODES + 1


def test_readme_outputs_against_the_exact_motion(readme_run):
    tr = readme_run
    np.testing.assert_array_equal(tr.t, T_EVAL)
    # 400 outputs per step: all but the nodes and the check interpolated
    assert tr.stats["samples_interpolated"] >= T_EVAL.size - (SI.NODES + 2) * tr.stats["steps"]
    # the states: the run's error bound (dense output, the exact flow's growth) plus the
    # exact solution's own error
    bound = integration_bound(tr, pendulum_growth(T_EVAL), dense=True) + EXACT_ERR
    err = np.abs(np.hstack([tr.q, tr.v]) - exact_state(T_EVAL)).max()
    assert err < bound, (err, bound)
    # the period as the README computes it, against 4 sqrt(l/g) K(sin^2(th0/2)): the
    # root of v_x by linear interpolation between outputs 1e-4 s apart (tests/test_readme.py
    # derives the bound: state error over |a_x|, growth 10, plus h^2/8 |v_x''| / |a_x|)
    i = np.flatnonzero((tr.v[:-1, 0] < 0) & (tr.v[1:, 0] >= 0))[0]
    period = 2 * np.interp(0.0, tr.v[i:i + 2, 0], tr.t[i:i + 2])
    ax = min(abs(tr.a[i, 0]), abs(tr.a[i + 1, 0]))
    root = (10 * integration_bound(tr, dense=True) + 1e-8 / 8 * 25.0) / ax
    exact = 4 * math.sqrt(L_P / G_P) * ellipk(math.sin(TH0 / 2) ** 2)
    assert abs(period - exact) <= 2 * root, (period, exact)


def test_readme_outputs_on_the_constraints(readme_run):
    """An interpolated state is within STATE_TOL (1 + max|q|) of its projection (the check
    says so at one output per step; here at every output): its residuals within the
    projection's own (rod_bounds) plus |grad| = 2|q| times that."""
    tr = readme_run
    q, v = tr.q, tr.v
    qn = np.linalg.norm(q, axis=1)
    pos, vel = rod_bounds(tr)
    far = 2 * qn * SI.STATE_TOL * (1 + np.abs(q).max(axis=1))
    farv = 2 * qn * SI.STATE_TOL * (1 + np.abs(v).max(axis=1)) \
        + 2 * np.linalg.norm(v, axis=1) * SI.STATE_TOL * (1 + np.abs(q).max(axis=1))
    true_pos = np.abs((q * q).sum(1) - L_P**2)
    true_vel = np.abs(2 * (q * v).sum(1))
    assert np.all(true_pos <= pos + far)
    assert np.all(true_vel <= vel + farv)
    # the reported residuals are interpolated from the nodes' (each within rod_bounds
    # there, the interpolation multiplies that by at most LEBESGUE)
    assert np.all(tr.position_residual <= LEBESGUE * pos.max())
    assert np.all(tr.velocity_residual <= LEBESGUE * vel.max())


def test_readme_diagnostics_against_closed_forms(readme_run):
    """Every diagnostic at every output against its closed form on the output's state."""
    tr = readme_run
    q, v = tr.q, tr.v
    a, Qc, E, lam = closed_forms(q, v)
    qq, vv = (q * q).sum(1), (v * v).sum(1)
    # At a node: the exact recomputation, within 2e3 eps (|v|^2 + |g| |q|) / |q| of the
    # closed form (tests/test_output_samples.py derives it: the automatic convective term's
    # rounding). Between nodes: the interpolation of those values (their error times
    # LEBESGUE); its truncation error max|a^(K)| / K! max|prod (t - t_j)| with
    # prod <= 4 (h/4)^K at Chebyshev--Lobatto nodes over a step h, and by Cauchy's estimate
    # on discs of radius 1/(2 omega) about the real axis (the motion is analytic there: its
    # poles lie K'(k)/omega = 2.2/omega away), |a^(K)| <= K! (2 omega)^K 10 max|a| (10 a
    # bound of |a| on those discs): 40 (h omega / 2)^K max|a|; and the closed form's change
    # over the state's distance from its projection (|da/dy| <= 2 omega^2 + |v|/|q|, times
    # STATE_TOL (1 + max|y|))
    om = math.sqrt(G_P / L_P)
    h = np.diff(run(None).t).max()
    trunc = 40 * (h * om / 2) ** SI.NODES * np.abs(a).max()
    node = 2e3 * EPS * (vv + G_P * np.sqrt(qq)) / np.sqrt(qq)
    shift = (2 * om**2 + np.sqrt(vv / qq)) * SI.STATE_TOL * (1 + max(np.abs(q).max(),
                                                                     np.abs(v).max()))
    tol_a = (1 + LEBESGUE) * node + trunc + shift
    assert np.all(np.abs(tr.a - a).max(axis=1) <= tol_a), np.abs(tr.a - a).max()
    tol_f = M_P * (tol_a + 4 * EPS * G_P)
    assert np.all(np.abs(tr.constraint_force - Qc).max(axis=1) <= tol_f)
    # the multiplier of the row 2 q: A^T mu = the constraint force, mu = m lam' / 2
    # (its error: the force's over |A| = 2 |q|)
    mu = tr.multipliers[:, 0]
    assert np.all(np.abs(mu - M_P * lam / 2) <= tol_f / (2 * np.sqrt(qq)) + 4 * EPS * np.abs(mu))
    # the energy: the model's formula at the nodes (4 eps of its terms), interpolated, and
    # its change over the state's distance from its projection (|grad E|_1 times it)
    terms = 0.5 * M_P * vv.max() + M_P * G_P * L_P
    gradE = M_P * (np.abs(v).sum(1).max() + G_P)
    tol_E = (1 + LEBESGUE) * 4 * EPS * terms + gradE * SI.STATE_TOL * (1 + np.abs(v).max())
    assert np.all(np.abs(tr.energy - E) <= tol_E)
    assert np.all(tr.rank == 1)


def test_interpolated_against_exact_recomputation(readme_run, monkeypatch):
    """The interpolated outputs against the same outputs recomputed exactly (the former
    path: each projected, each a Gauss step) at a few outputs: within the check's
    tolerances (the state) and twice the recomputation's rounding (the diagnostics)."""
    tr = readme_run
    t_eval = T_EVAL[::97]                       # (every output of it inside a step)
    ref = exact_run(monkeypatch, t_eval)
    assert ref.stats["samples_interpolated"] == 0
    idx = np.searchsorted(T_EVAL, t_eval)
    scale_q = 1 + np.abs(ref.q).max()
    scale_v = 1 + np.abs(ref.v).max()
    assert np.abs(tr.q[idx] - ref.q).max() <= SI.STATE_TOL * scale_q
    assert np.abs(tr.v[idx] - ref.v).max() <= SI.STATE_TOL * scale_v
    # both are recomputations within (1 + LEBESGUE) node errors of the closed form
    # (test_readme_diagnostics_against_closed_forms): their difference within the sum
    qq, vv = (ref.q**2).sum(1), (ref.v**2).sum(1)
    node = 2e3 * EPS * (vv + G_P * np.sqrt(qq)) / np.sqrt(qq)
    assert np.all(np.abs(tr.a[idx] - ref.a).max(axis=1) <= (2 + LEBESGUE) * node + 1e-13)
    assert np.all(np.abs(tr.energy[idx] - ref.energy)
                  <= (2 + LEBESGUE) * 4 * EPS * (0.5 * M_P * vv.max() + M_P * G_P * L_P) + 1e-13)


@pytest.mark.parametrize("name", ["STATE_TOL", "VALUE_TOL"])
def test_a_failed_check_recomputes_every_output(monkeypatch, name):
    """A step whose check fails is recomputed at every output: the same values as the
    exact path, bit for bit."""
    t_eval = np.linspace(0.0, 1.0, 1201)
    ref = exact_run(monkeypatch, t_eval)
    with monkeypatch.context() as mp:
        mp.setattr(SI, name, -1.0)
        tr = run(t_eval)
    assert tr.stats["samples_interpolated"] == 0
    for key in ("q", "v", "a", "constraint_force", "multipliers", "position_residual",
                "velocity_residual", "acceleration_residual", "energy", "rank", "sigma_min"):
        np.testing.assert_array_equal(getattr(tr, key), getattr(ref, key), err_msg=key)


def test_compiled_model_outputs_interpolated_against_closed_forms():
    """The same pendulum as a compiled model (go.from_lagrangian: M, F, Phi_q and gamma
    derived exactly, evaluated by compiled code): its interpolated outputs against the
    closed forms, within the README test's bounds (the derived gamma has no difference
    formula: its rounding is below the 2e3 eps of the automatic one)."""
    sp = pytest.importorskip("sympy")
    t, m, l, g = sp.symbols("t m l g")
    x, y = sp.Function("x")(t), sp.Function("y")(t)
    system = go.from_lagrangian([x, y], T=m / 2 * (x.diff(t)**2 + y.diff(t)**2), V=m * g * y,
                                holonomic=[x**2 + y**2 - l**2],
                                params={m: M_P, l: L_P, g: G_P})
    t_eval = np.linspace(0.0, 3.0, 3001)
    tr = go.simulate(system, (0.0, 3.0), Q0, V0, rtol=1e-12, atol=1e-12, t_eval=t_eval)
    assert tr.success, tr.message
    assert tr.stats["model"] == "compiled" and tr.stats["samples_interpolated"] > 0
    bound = integration_bound(tr, pendulum_growth(t_eval), dense=True) + EXACT_ERR
    assert np.abs(np.hstack([tr.q, tr.v]) - exact_state(t_eval)).max() < bound
    q, v = tr.q, tr.v
    a, Qc, E, lam = closed_forms(q, v)
    qq, vv = (q * q).sum(1), (v * v).sum(1)
    om = math.sqrt(G_P / L_P)
    node = 2e3 * EPS * (vv + G_P * np.sqrt(qq)) / np.sqrt(qq)
    shift = (2 * om**2 + np.sqrt(vv / qq)) * SI.STATE_TOL * (1 + max(np.abs(q).max(),
                                                                     np.abs(v).max()))
    assert np.all(np.abs(tr.a - a).max(axis=1) <= (1 + LEBESGUE) * node + shift)
    pos, vel = rod_bounds(tr)
    assert np.all(np.abs((q * q).sum(1) - L_P**2)
                  <= pos + 2 * np.sqrt(qq) * SI.STATE_TOL * (1 + np.abs(q).max(axis=1)))


def test_a_step_solver_in_python_projects_and_recomputes_every_output():
    """The QP (a step solver in Python) recomputes every output in Python: those the
    engine left unprojected (3 steps, 121 outputs: about 40 inside each) are projected
    first, onto the rod within the projection's target (rod_bounds), none interpolated."""
    t_eval = np.linspace(0.0, 0.3, 121)
    tr = go.simulate(pendulum(), (0.0, 0.3), Q0, V0, solver="qp", rtol=1e-8, atol=1e-8,
                     t_eval=t_eval)
    assert tr.success, tr.message
    assert tr.stats["steps"] * OUT_MANY_SAMPLES <= t_eval.size
    assert tr.stats["samples_interpolated"] == 0
    q, v = tr.q, tr.v
    pos, vel = rod_bounds(tr)
    assert np.all(np.abs((q * q).sum(1) - L_P**2) <= pos)
    assert np.all(np.abs(2 * (q * v).sum(1)) <= vel)
    assert np.all(tr.position_residual <= pos)
