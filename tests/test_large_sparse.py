"""A large user-built System with sparse Jacobians and a diagonal mass takes the O(n) step
(:mod:`gaussopt.gauss.band_step`), as large multibody models do.

The model: a planar chain of N point masses hanging from the origin (links of length L),
n = 2N coordinates, N distance constraints with an explicit scipy.sparse Jacobian (four
entries per row) and gamma, mass given as its diagonal. References: the same system with
a dense Jacobian (the dense kernel's SVD path: other linear algebra, same equations),
and the conservation of energy along a run.
"""

import pickle

import numpy as np
import scipy.sparse as sp

import gaussopt as go

N = 120
n = 2 * N
L, MASS, G = 0.05, 0.01, 9.81


def _rel(x):
    P = x.reshape(-1, 2)                  # (any chain length: tests/test_derivative_checks.py)
    D = P.copy()
    D[1:] -= P[:-1]
    return D


def phi(t, q):
    D = _rel(q)
    return (D * D).sum(1) - L * L


def jac_sparse(t, q):
    D = _rel(q)
    k, m = D.shape[0], q.size
    r = np.concatenate([np.repeat(np.arange(k), 2), np.repeat(np.arange(1, k), 2)])
    c = np.concatenate([np.arange(m), np.arange(m - 2)])
    return sp.csr_matrix((np.concatenate([2 * D.ravel(), -2 * D[1:].ravel()]), (r, c)),
                         shape=(k, m))


def jac_dense(t, q):
    return jac_sparse(t, q).toarray()


def gamma(t, q, v):
    W = _rel(v)
    return -2 * (W * W).sum(1)


def energy(t, q, v):
    return 0.5 * MASS * v @ v + MASS * G * q[1::2].sum()


def chain(jacobian, mass=None):
    return go.System([f"{a}{i}" for i in range(N) for a in "xy"],
                     mass=np.full(n, MASS) if mass is None else mass,
                     force=np.tile([0.0, -MASS * G], N),
                     constraints=[go.Holonomic(phi, jacobian, gamma, rheonomic=False)],
                     energy=energy)


def state(angle=0.4, spin=0.3):
    """A straight chain at ``angle`` from the vertical, each link turning at ``spin``
    rad/s relative to the previous one (a consistent velocity: ``Phi_q v = 0``)."""
    th = angle + 0.01 * np.arange(N)
    U = np.column_stack([np.sin(th), -np.cos(th)]) * L
    q = np.cumsum(U, axis=0).ravel()
    W = np.column_stack([np.cos(th), np.sin(th)]) * L * spin * np.arange(1, N + 1)[:, None]
    v = np.cumsum(W, axis=0).ravel()
    return q, v


def test_sparse_step_equals_the_dense_kernel():
    """The O(n) step answers (info['sparse']) and agrees with the dense kernel's SVD step.
    Both are backward stable: they differ by about cond(S) eps |a|, S = An H^-1 An^T the
    range-space matrix of the chain (condition ~ N^2 = 1.4e4 for a chain of N links), i.e.
    ~3e-12 relative; the bound 1e-9 leaves a factor 300 for the constants."""
    q, v = state()
    sparse, dense = chain(jac_sparse), chain(jac_dense)
    for solver in ("closed_form", "lagrange"):
        rs = go.solve_step(sparse, 0.0, q, v, solver=solver)
        rd = go.solve_step(dense, 0.0, q, v, solver=solver)
        assert rs.info["sparse"] and not rd.info["sparse"]
        assert np.abs(rs.a - rd.a).max() <= 1e-9 * np.abs(rd.a).max()
        assert np.abs(rs.multipliers - rd.multipliers).max() <= 1e-9 * np.abs(rd.multipliers).max()
        # the step satisfies the constraint rows to rounding (|A| |a| ~ 4 L |a|)
        A = jac_dense(0.0, q)
        assert np.abs(A @ rs.a - gamma(0.0, q, v)).max() <= 1e-12 * (4 * L * np.abs(rs.a).max()
                                                                   + np.abs(gamma(0.0, q, v)).max())


def test_a_dense_mass_that_is_diagonal_and_a_sparse_mass_qualify_too():
    q, v = state()
    for mass in (MASS * np.eye(n), sp.identity(n, format="csr") * MASS):
        r = go.solve_step(chain(jac_sparse, mass), 0.0, q, v)
        assert r.info["sparse"]
    # a dense Jacobian keeps the dense kernel
    assert not go.solve_step(chain(jac_dense), 0.0, q, v).info["sparse"]


def test_sparse_run_conserves_energy_and_matches_the_dense_run():
    """A 0.1 s run at rtol = atol = 1e-10: energy is conserved (the chain is conservative)
    to the integrator's tolerance times the energy scale (local error <= 1e-10 relative per
    step, some hundred steps, plus the projection's rounding: <= ~1e-8 of the scale; the
    bound 1e-7 leaves a factor 10). And its first 0.01 s (about 20 steps) agree with the
    dense-kernel run of the same system (same integrator, same equations: the two differ
    by the rounding of the steps, amplified by the chain's dynamics; measured 8e-15 of
    each other in the coordinates, the bound 1e-6 N L of the chain's length). The dense run is kept short because it is the expensive reference: a
    dense step of these 240 coordinates costs about 100 times the O(n) step (the full 0.1 s
    dense run took 100-230 s of the test suite on a 2-core machine)."""
    q, v = state()
    kw = dict(rtol=1e-10, atol=1e-10)
    ts = chain(jac_sparse)
    tr = go.simulate(ts, (0.0, 0.1), q, v, **kw)
    assert tr.success and tr.stats["sparse_steps"] > 0
    scale = MASS * G * N * N * L + energy(0.0, q, v)       # |potential| + kinetic
    assert np.abs(tr.energy_drift).max() <= 1e-7 * scale
    assert np.abs(tr.position_residual).max() <= 1e-12
    short = go.simulate(ts, (0.0, 0.01), q, v, **kw)
    td = go.simulate(chain(jac_dense), (0.0, 0.01), q, v, **kw)
    assert short.success and td.success and td.stats["sparse_steps"] == 0
    assert short.stats["steps"] >= 10                      # (a comparison over many steps)
    assert np.abs(short.q[-1] - td.q[-1]).max() <= 1e-6 * N * L


def test_an_entry_outside_the_initial_pattern_is_a_clear_error():
    """The rows' pattern is fixed at the check's state; a run whose Jacobian grows an
    entry outside it stops with a message that says so (what it computed is kept). A
    single step there is answered by the dense kernel (the step needs no pattern)."""
    q, v = state()

    def growing(t, q):
        J = jac_sparse(t, q).tolil()
        if t > 0.01:
            J[0, n - 1] = 1e-9            # a new entry, far from the link's coordinates
        return J.tocsr()

    s = chain(growing)
    assert go.solve_step(s, 0.0, q, v).info["sparse"]
    r = go.solve_step(s, 0.5, q, v)
    assert not r.info["sparse"]
    tr = go.simulate(s, (0.0, 0.05), q, v, rtol=1e-8, atol=1e-8)
    assert not tr.success and "outside the sparsity pattern" in tr.message, tr.message
    assert tr.t[0] == 0.0 and tr.t[-1] <= 0.01 + 1e-12     # (the states before it are kept)


def test_a_sparse_system_pickles_and_takes_the_sparse_step_again():
    q, v = state()
    s = chain(jac_sparse)
    go.solve_step(s, 0.0, q, v)
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.sparse is None              # (callbacks: made again by the next check)
    r = go.solve_step(s2, 0.0, q, v)
    assert r.info["sparse"]
    np.testing.assert_array_equal(r.a, go.solve_step(s, 0.0, q, v).a)
