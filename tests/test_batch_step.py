"""``go.solve_steps``: the Gauss step at a batch of states.

Row ``i`` must be what ``solve_step`` gives at ``(t[i], Q[i], V[i])`` (the issue's
contract: to 1e-12 relative, singular positions included) and the physics must be
right on its own (the reduced equation of the four-bar).
"""

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.gauss.solvers.base import BATCH_PER_THREAD
import gaussopt_problems.double_parallelogram as dp
import gaussopt_problems.four_bar as fb
import gaussopt_problems.pendulum as pendulum

# The batch and solve_step run the same compiled step (the same kernel, rank decision and
# verification) on the same inputs, so the rows agree to the last bit; 1e-12 relative is
# the contract of the issue and leaves room only for a different code path, which would
# be a bug.
RTOL = 1e-12


def _rowwise(system, t, Q, V, solver="closed_form", **options):
    res = [go.solve_step(system, t, q, v, solver, **options) for q, v in zip(Q, V)]
    return np.array([r.a for r in res]), np.array([r.multipliers for r in res])


def _assert_rows_equal(x, ref):
    scale = np.maximum(np.abs(ref).max(axis=1, keepdims=True), 1e-300)
    assert np.all(np.abs(x - ref) <= RTOL * scale)


def _four_bar_states(k, rng):
    """States on the four-bar's parallelogram branch (th2 = th1, th3 = pi - th1),
    including the singular positions th1 = pi/2 and 3 pi/2 (cos th1 = 0: the loop's
    first row vanishes)."""
    th = np.concatenate([rng.uniform(-np.pi, 2 * np.pi, k - 4), [np.pi / 2, 1.5 * np.pi,
                                                                np.pi / 2 + 1e-9, 0.0]])
    w = rng.uniform(-3.0, 3.0, k)
    Q = np.column_stack([th, th, np.pi - th])
    V = np.column_stack([w, w, -w])
    return Q, V


def test_batch_equals_solve_step_on_the_four_bar_with_threads():
    sysm = fb.build().system
    rng = np.random.default_rng(7)
    B = 2 * BATCH_PER_THREAD + 37            # more than one thread's share where threads exist
    Q, V = _four_bar_states(B, rng)
    A, L = go.solve_steps(sysm, 0.3, Q, V, multipliers=True)
    Aref, Lref = _rowwise(sysm, 0.3, Q, V)
    _assert_rows_equal(A, Aref)
    _assert_rows_equal(L, Lref)


def test_batch_four_bar_matches_the_reduced_equation():
    """Independent reference: on the parallelogram branch the four-bar is one pendulum-like
    DOF, th1'' = (psi - 2 m g l cos th1) / (5/3 m l^2) (problems/four_bar.reference)."""
    psi, m, l, g = 450.0, 12.0, 2.0, fb.G
    sysm = fb.build(psi=psi, m=m, l=l, g=g).system
    rng = np.random.default_rng(3)
    th = rng.uniform(-np.pi, 2 * np.pi, 200)
    th = th[np.abs(np.cos(th)) > 0.05]       # away from the singular positions
    w = rng.uniform(-3.0, 3.0, th.size)
    Q = np.column_stack([th, th, np.pi - th])
    V = np.column_stack([w, w, -w])
    A = go.solve_steps(sysm, 0.0, Q, V)
    exact = (psi - 2 * m * g * l * np.cos(th)) / (5.0 / 3.0 * m * l**2)
    # error estimate: roundoff of the null-space solve, eps * cond(A M^-1/2 A^T)
    # <= eps / cos(th)^2 * O(10) with |cos th| > 0.05 -> ~1e-12 relative
    np.testing.assert_allclose(A[:, 0], exact, rtol=1e-11, atol=1e-11 * np.abs(exact).max())
    np.testing.assert_allclose(A[:, 1], A[:, 0], rtol=1e-11, atol=1e-11 * np.abs(exact).max())
    np.testing.assert_allclose(A[:, 2], -A[:, 0], rtol=1e-11, atol=1e-11 * np.abs(exact).max())


def test_batch_at_folded_configurations_of_the_redundant_linkage():
    """The double parallelogram: 12 coordinates, one redundant joint, and a rank drop at
    the folded configurations th = k pi, where the batch must make solve_step's rank
    decision (the settings' rank_tol = 1e-5 included)."""
    pb = dp.build()
    ths = np.array([0.0, -np.pi, 1e-7, -np.pi + 3e-6, 0.4, np.pi / 3, -2.0])
    Q = np.array([dp.configuration(x) for x in ths])
    # the branch's tangent d configuration / d th times th' = 1.3 (a central difference:
    # any velocity is a valid state; near the branch keeps the step's numbers physical)
    h = 1e-6
    V = 1.3 * np.array([(dp.configuration(x + h) - dp.configuration(x - h)) / (2 * h) for x in ths])
    rank_tol = pb.settings["solver_options"]["rank_tol"]
    for solver in ("closed_form", "lagrange"):
        A, L = go.solve_steps(pb.system, 0.0, Q, V, solver, multipliers=True, rank_tol=rank_tol)
        Aref, Lref = _rowwise(pb.system, 0.0, Q, V, solver, rank_tol=rank_tol)
        _assert_rows_equal(A, Aref)
        _assert_rows_equal(L, Lref)
    ranks = [go.solve_step(pb.system, 0.0, q, v, rank_tol=rank_tol).info["rank"] for q, v in zip(Q, V)]
    assert ranks[0] == ranks[1] == 10 and ranks[-1] == 11     # the drop is really in the batch


@pytest.mark.parametrize("solver", ["closed_form", "qp"])
def test_batch_of_a_python_model_and_of_the_qp(solver):
    """A model of plain Python functions and the QP take the state-by-state path; the
    released pendulum has th'' = -(g/l) sin th, i.e. a_x = -g sin th cos th."""
    pb = pendulum.build()
    th = np.linspace(-1.2, 1.2, 9)
    Q = np.column_stack([np.sin(th), -np.cos(th)])
    V = np.zeros_like(Q)
    A = go.solve_steps(pb.system, np.zeros(th.size), Q, V, solver)
    _assert_rows_equal(A, _rowwise(pb.system, 0.0, Q, V, solver)[0])
    # the qp's answer is polished by the closed form of the same rank decision: roundoff
    np.testing.assert_allclose(A[:, 0], -9.81 * np.sin(th) * np.cos(th), atol=1e-12)


def test_batch_input_errors_name_the_argument():
    sysm = fb.build().system
    Q = np.tile(fb.build().q0, (4, 1))
    with pytest.raises(ModelError, match=r"`Q` must have shape \(B, 3\)"):
        go.solve_steps(sysm, 0.0, Q[:, :2], Q[:, :2])
    with pytest.raises(ModelError, match="`V` and|`Q` and `V`"):
        go.solve_steps(sysm, 0.0, Q, Q[:3])
    bad = Q.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ModelError, match="`V` contains NaN or inf in row 2"):
        go.solve_steps(sysm, 0.0, Q, bad)
    with pytest.raises(ModelError, match=r"`t` must be a float or an array of shape \(4,\)"):
        go.solve_steps(sysm, [0.0, 1.0], Q, Q)
    assert go.solve_steps(sysm, 0.0, Q[:0], Q[:0]).shape == (0, 3)
