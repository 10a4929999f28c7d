"""The compiled step calling a system's Python functions back
(:meth:`gaussopt.gauss.solvers.StepSolver.take_compiled_step`, what a contact phase's force
watches use): the multipliers of the analytic pendulum, the same state's answer as the
Python path's, and a model's own exception read as the Python path reports it."""

import numpy as np
import pytest

import gaussopt as go
from gaussopt.gauss.solvers import ClosedForm

M_, L_, G_ = 2.0, 1.5, 9.81


def _pendulum(fail_beyond=np.inf):
    def phi(t, q):
        if q[0] > fail_beyond:
            raise ValueError("the rod is not defined beyond x = 1")
        return np.array([q @ q - L_**2])
    return go.System(("x", "y"), mass=M_ * np.eye(2), force=[0.0, -M_ * G_],
                     constraints=[go.Holonomic(phi)])


def _states(k=20, seed=3):
    rng = np.random.default_rng(seed)
    th = rng.uniform(-3.0, 3.0, k)
    w = rng.uniform(-4.0, 4.0, k)
    Q = L_ * np.column_stack([np.sin(th), -np.cos(th)])
    V = L_ * w[:, None] * np.column_stack([np.cos(th), np.sin(th)])
    return Q, V


def test_the_compiled_step_with_callbacks_gives_the_pendulums_multiplier():
    """``M a - F = A^T lam`` with ``A = 2 q^T``, ``b = -2 v.v``: ``lam = (M b - A F) / (A A^T)``
    for ``M = m I`` (the rod's tension over ``2 l``). The compiled step is taken (its
    context built), and its multiplier equals that formula and the Python path's.
    Bound: every step is verified to a backward error of 16 (n + m + 1) eps = 64 eps of
    its terms, and this problem's condition is ``|A|^2 / (A A^T) = 1``: 1e-12 of the
    terms' scale leaves a factor 40 above it."""
    system = _pendulum()
    Q, V = _states()
    go.solve_step(system, 0.0, Q[0], V[0])            # (the rows counted, as in a run)
    fast = ClosedForm(system)
    fast.take_compiled_step()
    slow = ClosedForm(system)
    F = np.array([0.0, -M_ * G_])
    for q, v in zip(Q, V):
        A = 2.0 * q
        lam = (M_ * (-2.0 * v @ v) - A @ F) / (A @ A)
        scale = (M_ * 2.0 * (v @ v) + abs(A @ F)) / (A @ A)
        got = fast.multipliers(0.0, q, v)
        assert fast._ctx not in (None, False)          # the compiled step answered
        assert abs(got[0] - lam) <= 1e-12 * scale, (got, lam)
        assert abs(got[0] - slow.multipliers(0.0, q, v)[0]) <= 1e-12 * scale


def test_a_models_exception_reads_as_on_the_python_path():
    """A constraint that raises at a state: the compiled step cannot call it through, falls
    back to the Python path, and the caller sees the model's own exception."""
    system = _pendulum(fail_beyond=1.0)
    go.solve_step(system, 0.0, np.array([0.0, -L_]), np.array([1.0, 0.0]))
    s = ClosedForm(system)
    s.take_compiled_step()
    q = np.array([1.2, -np.sqrt(L_**2 - 1.44)])
    with pytest.raises(Exception) as fast:
        s.multipliers(0.0, q, np.zeros(2))
    with pytest.raises(Exception) as slow:
        ClosedForm(system).multipliers(0.0, q, np.zeros(2))
    assert type(fast.value) is type(slow.value)
    assert str(fast.value) == str(slow.value)
    assert "not defined beyond x = 1" in str(fast.value)
