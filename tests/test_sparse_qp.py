"""The QP's sparse path (:mod:`gaussopt.gauss.solvers.qp.sparse_qp`) on the chain of
``tests/test_large_sparse.py``: a planar chain of N point masses, n = 2N coordinates, N
distance constraints with a scipy.sparse Jacobian, diagonal mass.

References, never the code path under test: the closed form on the *dense*-Jacobian chain
(the dense kernel's SVD rank decision and null-space solve: other linear algebra, the same
equations), the constraint rows themselves, and the KKT conditions.
"""

import numpy as np
import scipy.sparse as sp

import gaussopt as go
from test_large_sparse import L, MASS, G, N, chain, gamma, jac_dense, jac_sparse, n, \
    state  # noqa: F401

# The chain's range-space matrix S = An H^-1 An^T has condition ~ N^2 (1.4e4 at N = 120;
# test_large_sparse). Two backward-stable solves of the same KKT equations differ by about
# cond eps |a| ~ 3e-12 relative: the bound 1e-9 of test_large_sparse (a factor 300 for the
# constants) holds for the polished QP step and its multipliers.
DIRECT_RTOL = 1e-9
# Clarabel's own acceleration (before the polish) on the equality-only chain: Clarabel's
# initial KKT solve is already optimal (0 iterations) and is refined until it stops
# improving, i.e. to ~cond(KKT) eps (clarabel_qp's module docstring, "Settings"), with
# cond ~ N^2 as above: DIRECT_RTOL holds for it too (measured 3e-14).
# With an inequality row Clarabel iterates: it stops at relative residuals of 1e-13 of the
# scaled data (gaussopt.core.settings.CLARABEL_TOLERANCES), and the iterate it accepts is
# within cond(KKT) * 1e-13 of the exact solution, cond ~ N^2 = 1.4e4: 1.4e-9. The bound
# 1e-8 leaves a factor 7 (measured 4e-12).
CLARABEL_RTOL = 1e-8


def _rel(x, ref):
    return float(np.abs(x - ref).max() / np.abs(ref).max())


def test_the_sparse_path_answers_and_agrees_with_the_dense_closed_form():
    q, v = state()
    s = chain(jac_sparse)
    r = go.solve_step(s, 0.0, q, v, "qp")
    assert r.info["sparse_qp"] and r.info["sparse"] and r.info["sparse_qp_reason"] is None
    assert r.info["status"] == "optimal" and not r.info["fallback"]
    assert r.info["solver"] == "qp"
    ref = go.solve_step(chain(jac_dense), 0.0, q, v, "closed_form")
    assert not ref.info["sparse"]                     # (the dense kernel: independent)
    assert _rel(r.a, ref.a) <= DIRECT_RTOL
    assert _rel(r.multipliers, ref.multipliers) <= DIRECT_RTOL
    # equality rows only: Clarabel's initial KKT solve is already the optimum; it stops
    # there (0 iterations) when that solve's residuals land below its tolerance (1e-13 of
    # the scaled data, CLARABEL_TOLERANCES), and takes one iteration where the CPU's
    # rounding leaves them just above (a cond(KKT) eps ~ 3e-12 solve: measured 0 on the
    # machines before, 1 on this stop's Xeon, the answer within 2.4e-14 of the reference
    # on both): never more
    assert r.info["iterations"] <= 1
    assert _rel(r.info["backend_a"], ref.a) <= DIRECT_RTOL
    assert r.info["backend_deviation"] <= DIRECT_RTOL
    # the rows hold to rounding (|A| |a| ~ 4 L |a|; as in test_large_sparse)
    A, b = jac_dense(0.0, q), gamma(0.0, q, v)
    assert np.abs(A @ r.a - b).max() <= 1e-12 * (4 * L * np.abs(r.a).max() + np.abs(b).max())
    # stationarity, M a = F + A^T lam: to the scale of the forces times the direct tolerance
    # of the step (16 (n + m + 1) eps ~ 1.3e-12 at n + m = 360)
    F = np.tile([0.0, -MASS * G], N)
    res = MASS * r.a - F - A.T @ r.multipliers
    assert np.abs(res).max() <= 16 * (n + N + 1) * np.finfo(float).eps * (
        MASS * np.abs(r.a).max() + np.abs(F).max() + np.abs(A.T @ r.multipliers).max())


def test_later_steps_update_clarabel_in_place():
    """Other states, the same pattern: one Clarabel build, every step on the sparse path,
    each against the dense closed form."""
    s = chain(jac_sparse)
    sd = chain(jac_dense)
    go.solve_step(s, 0.0, *state(), "qp")               # (checks the system)
    solver = go.make_solver(s, "qp")
    for k in range(3):
        q, v = state(angle=0.3 + 0.1 * k, spin=0.2 * k)
        r = solver.solve(0.0, q, v)
        assert r.info["sparse_qp"]
        assert _rel(r.a, go.solve_step(sd, 0.0, q, v, "closed_form").a) <= DIRECT_RTOL
        a = solver.acceleration(0.0, q, v)             # the hot path: the same step
        assert np.array_equal(a, r.a)
    assert solver.run_stats()["qp_sparse_steps"] == 6
    assert solver._sq[1].clarabel.builds == 1


def _with_duplicate(jac):
    """The chain with its last distance row given twice (the second scaled by 2): rank N
    of N + 1 rows at every state."""

    def phi(t, q):
        P = q.reshape(N, 2)
        D = P.copy()
        D[1:] -= P[:-1]
        p = (D * D).sum(1) - L * L
        return np.concatenate([p, 2 * p[-1:]])

    def J(t, q):
        A = jac(t, q)
        A = sp.csr_matrix(A) if sp.issparse(A) else A
        last = 2 * A[-1:]
        return sp.vstack([A, last], format="csr") if sp.issparse(A) else np.vstack([A, last])

    def gam(t, q, v):
        g = gamma(t, q, v)
        return np.concatenate([g, 2 * g[-1:]])

    return go.System([f"{a}{i}" for i in range(N) for a in "xy"], mass=np.full(n, MASS),
                     force=np.tile([0.0, -MASS * G], N),
                     constraints=[go.Holonomic(phi, J, gam, rheonomic=False)])


def test_redundant_rows_go_to_the_dense_rank_decision():
    """A duplicated row: the band step cannot certify the rank, so neither the closed form
    nor the QP answers on the band; the QP's dense path drops the redundant direction
    exactly, and its step is the non-redundant chain's (dense closed form)."""
    q, v = state()
    s = _with_duplicate(jac_sparse)
    cf = go.solve_step(s, 0.0, q, v, "closed_form")
    assert not cf.info["sparse"]
    r = go.solve_step(s, 0.0, q, v, "qp")
    assert not r.info["sparse_qp"] and "certify" in r.info["sparse_qp_reason"]
    assert r.info["rank"] == N
    ref = go.solve_step(chain(jac_dense), 0.0, q, v, "closed_form")
    assert _rel(r.a, ref.a) <= DIRECT_RTOL
    # both copies of the row hold (|row| |a| ~ 4 L |a| for the doubled row)
    A = jac_dense(0.0, q)
    A = np.vstack([A, 2 * A[-1:]])
    b = np.concatenate([gamma(0.0, q, v), 2 * gamma(0.0, q, v)[-1:]])
    assert np.abs(A @ r.a - b).max() <= 1e-12 * (8 * L * np.abs(r.a).max() + np.abs(b).max())


def test_inequality_rows_take_the_dense_path_and_say_so():
    """A contact-like row on the chain's tip (``y_tip'' >= 0``, a floor holding it): such a
    system has no band model, the QP answers on its dense path, ``info`` says why, and the
    answer is the closed form with the (active) row as an equality."""
    q, v = state(spin=0.0)
    G_row = np.zeros((1, n))
    G_row[0, -1] = 1.0
    names = [f"{a}{i}" for i in range(N) for a in "xy"]
    F = np.tile([0.0, -MASS * G], N)
    rows = go.Holonomic(lambda t, x: (_pos(x)), jac_dense,
                        lambda t, x, y: gamma(t, x, y), rheonomic=False)
    s = go.System(names, mass=np.full(n, MASS), force=F,
                  constraints=[rows, go.Inequality(G_row, [0.0], name="floor")])
    r = go.solve_step(s, 0.0, q, v, "qp")
    assert not r.info["sparse_qp"] and "inequality" in r.info["sparse_qp_reason"]
    mu = r.info["inequality_multipliers"]
    assert mu[0] > 0                                   # (the floor holds the tip)
    y0 = q[-1]
    tip = go.Holonomic(lambda t, x: np.array([x[-1] - y0]), lambda t, x: G_row,
                       lambda t, x, y: np.zeros(1), rheonomic=False)
    ref = go.solve_step(go.System(names, mass=np.full(n, MASS), force=F,
                                  constraints=[rows, tip]), 0.0, q, v, "closed_form")
    # the QP polishes with its contact force fixed: a differs from the reference by the
    # error of mu, Clarabel's tolerance times the condition of the KKT system (~N^2, as
    # above): CLARABEL_RTOL
    assert _rel(r.a, ref.a) <= CLARABEL_RTOL
    assert abs(mu[0] - ref.multipliers[-1]) <= CLARABEL_RTOL * np.abs(ref.multipliers).max()


def _pos(x):
    P = x.reshape(N, 2)
    D = P.copy()
    D[1:] -= P[:-1]
    return (D * D).sum(1) - L * L


def test_a_run_with_the_qp_takes_the_sparse_path_and_matches_the_closed_form_run():
    """Inside ``simulate`` the QP's hot path (``acceleration``, called back by the engine)
    takes the sparse path too; every step's answer is verified against its own tolerance
    and polished by the same closed form, so the run follows the closed form's run to
    rounding (the two differ by the rounding of the steps, amplified by the chain's
    dynamics over ~20 steps: bound 1e-6 N L of the chain's length, as test_large_sparse's
    sparse-against-dense runs)."""
    q, v = state()
    kw = dict(rtol=1e-10, atol=1e-10)
    tq = go.simulate(chain(jac_sparse), (0.0, 0.01), q, v, solver="qp", **kw)
    tc = go.simulate(chain(jac_sparse), (0.0, 0.01), q, v, solver="closed_form", **kw)
    assert tq.success and tc.success
    assert tq.stats["qp_sparse_steps"] >= tq.stats["steps"] > 0
    assert tq.stats["qp_fallbacks"] == 0 and set(tq.stats["qp_statuses"]) == {"optimal"}
    assert np.abs(tq.q[-1] - tc.q[-1]).max() <= 1e-6 * N * L
    assert np.abs(tq.position_residual).max() <= 1e-12
