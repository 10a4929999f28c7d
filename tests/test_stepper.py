"""go.Stepper: fixed steps one call at a time, as a control loop takes them.

References: ``go.simulate`` with the same fixed-step method and dt (the stepper takes
the engine's own steps: equal to rounding); for the control input, paper 001's four-bar
driven by a torque ``psi(t)`` held constant over each step, against its reduced
one-coordinate equation ``(5/3) m l^2 th1'' = psi - 2 m g l cos th1`` integrated with
scipy's ``solve_ivp`` (DOP853, rtol = atol = 1e-13) interval by interval; the tolerance
is the stepper's own rk4 error estimated by Richardson extrapolation (runs at dt and
dt/2 with the same input schedule), written next to each check.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt_problems import four_bar

EPS = float(np.finfo(float).eps)
M_, L_, G_ = 12.0, 2.0, 9.8
Q0 = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])
V0 = np.zeros(3)


@pytest.fixture(scope="module")
def bar():
    return four_bar.system()


def pendulum(force=None):
    """A unit pendulum in Cartesian coordinates (Python functions)."""
    return go.System(("x", "y"), mass=np.eye(2),
                     force=force if force is not None else [0.0, -9.81],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])


@pytest.mark.parametrize("method, options", [
    ("rk4", {}), ("euler", {}), ("rk4", {"solver": "lagrange"}),
    ("rk4", {"stabilization": go.Baumgarte(10.0, 10.0)}),
    ("rk4", {"stabilization": None, "monitor_rank": False}),
    ("rk4", {"solver": "qp"})],
    ids=["rk4", "euler", "lagrange", "baumgarte", "bare", "qp"])
def test_steps_equal_simulate(bar, method, options):
    """N steps of the stepper end where simulate's run with the same method, dt, solver
    and stabilization ends: the same compiled steps in the same order (the tolerance
    allows rounding only: a few eps of the state's size, should a loop's summation order
    ever differ)."""
    dt, N = 1e-3, 300 if options.get("solver") != "qp" else 60
    st = go.Stepper(bar, Q0, V0, dt=dt, method=method, **options)
    for _ in range(N):
        st.step()
    tr = go.simulate(bar, (0.0, N * dt), Q0, V0, method=method, dt=dt, **options)
    assert tr.success
    assert st.steps == N and st.t == tr.t[-1]
    scale = 1.0 + np.abs(tr.q[-1]).max() + np.abs(tr.v[-1]).max()
    assert np.abs(st.q - tr.q[-1]).max() <= 8 * EPS * scale
    assert np.abs(st.v - tr.v[-1]).max() <= 8 * EPS * scale
    # and the accelerations at the final state are the step solver's there
    a = go.solve_step(bar, st.t, st.q.copy(), st.v.copy()).a
    assert np.abs(st.a - a).max() <= 1e-9 * (1.0 + np.abs(a).max())


def test_nstep_and_rank_events_as_simulate(bar):
    """step(nstep=k) is k calls of step(); the rank monitor finds the singular positions
    simulate finds (the crank passes th1 = pi/2 at about 0.3 s), at the same times."""
    dt, N = 1e-3, 600
    a = go.Stepper(bar, Q0, V0, dt=dt)
    a.step(nstep=N)
    b = go.Stepper(bar, Q0, V0, dt=dt)
    for _ in range(N):
        b.step()
    assert np.array_equal(a.q, b.q) and np.array_equal(a.v, b.v) and a.t == b.t
    tr = go.simulate(bar, (0.0, N * dt), Q0, V0, method="rk4", dt=dt)
    ev = [e.t for e in a.rank_events if e.kind == "passage"]
    ref = [e.t for e in tr.rank_events if e.kind == "passage"]
    assert len(ev) == len(ref) >= 1
    assert np.allclose(ev, ref, rtol=0, atol=1e-12)


def test_reset(bar):
    """reset starts the same motion again; an inconsistent state is refused (or projected
    with project_initial=True); the counts and events start afresh."""
    st = go.Stepper(bar, dt=1e-3)
    with pytest.raises(go.ModelError, match="reset"):
        st.step()
    st.reset(Q0, V0)
    st.step(nstep=50)
    q50, v50 = st.q.copy(), st.v.copy()
    st.step(nstep=550)
    assert st.steps == 600 and st.rank_events
    st.reset(Q0, V0, t=0.0)
    assert st.t == 0.0 and st.steps == 0 and st.rank_events == []
    st.step(nstep=50)
    assert np.array_equal(st.q, q50) and np.array_equal(st.v, v50)
    bad = Q0 + np.array([0.0, 0.01, 0.0])          # off the loop closure
    with pytest.raises(go.ModelError, match="inconsistent"):
        st.reset(bad, V0)
    with pytest.raises(go.ModelError, match="shape"):
        st.reset(Q0[:2], V0)
    with pytest.raises(go.ModelError, match="NaN"):
        st.reset(np.array([np.nan, 0.0, 0.0]), V0)
    pr = go.Stepper(bar, bad, V0, dt=1e-3, project_initial=True)
    assert np.abs(bar.position_residual(0.0, pr.q)).max() <= 1e-12


def _reduced_zoh(psis, dt, th0=np.pi / 3):
    """th1, th1' of the reduced equation with psi held at psis[k] over [k dt, (k+1) dt]."""
    y = np.array([th0, 0.0])
    for k, psi in enumerate(psis):
        def f(_, z, psi=psi):
            return [z[1], (psi - 2 * M_ * G_ * L_ * np.cos(z[0])) / (5.0 / 3.0 * M_ * L_**2)]
        y = solve_ivp(f, (k * dt, (k + 1) * dt), y, method="DOP853", rtol=1e-13,
                      atol=1e-13).y[:, -1]
    return y


def _driven(bar, psis, dt, sub=1):
    st = go.Stepper(bar, Q0, V0, dt=dt / sub, inputs=("psi",))
    for psi in psis:
        for _ in range(sub):
            st.step(psi)
    return st


def test_ctrl_drives_the_force(bar):
    """A torque changed every step moves the crank as the reduced equation with the same
    zero-order hold says; a constant torque would not."""
    dt, N = 2e-3, 200
    k = np.arange(N)
    psis = 450.0 + 200.0 * np.sin(2 * np.pi * 3.0 * k * dt)
    ref = _reduced_zoh(psis, dt)
    st = _driven(bar, psis, dt)
    fine = _driven(bar, psis, dt, sub=2)
    # rk4's error at dt: Richardson, |x_dt - x_dt/2| * 16 / 15 (order 4); allowed twice
    # that, plus the reference's own tolerance
    est_th = abs(st.q[0] - fine.q[0]) * 16 / 15
    est_w = abs(st.v[0] - fine.v[0]) * 16 / 15
    assert abs(st.q[0] - ref[0]) <= 2 * est_th + 1e-11
    assert abs(st.v[0] - ref[1]) <= 2 * est_w + 1e-10
    # the estimate is of rk4's size here, not of a missing refresh (which would be O(dt))
    assert est_th < 1e-8
    # the inputs matter: held at 450 the crank ends far from the driven one
    const = go.Stepper(bar, Q0, V0, dt=dt)
    const.step(nstep=N)
    assert abs(const.q[0] - st.q[0]) > 1e3 * (2 * est_th + 1e-11)
    # parallelogram branch and loop closure kept
    assert abs(st.q[1] - st.q[0]) < 1e-9 and abs(st.q[2] - (np.pi - st.q[0])) < 1e-9
    assert st.ctrl.tolist() == [psis[-1]]
    # the system itself is not changed by the stepper's inputs
    assert float(bar.force(0.0, Q0, V0)[0]) == pytest.approx(450.0 - 1.5 * M_ * G_ * L_ * 0.5)


def test_ctrl_bad_input(bar):
    """ctrl of the wrong shape or not finite: ModelError, nothing done."""
    st = go.Stepper(bar, Q0, V0, dt=1e-3, inputs=("psi",))
    st.step(100.0)
    t, q = st.t, st.q.copy()
    with pytest.raises(go.ModelError, match="finite"):
        st.step(float("nan"))
    with pytest.raises(go.ModelError, match="shape"):
        st.step([1.0, 2.0])
    with pytest.raises(go.ModelError, match="float"):
        st.step("fast")
    assert st.t == t and np.array_equal(st.q, q) and st.ctrl.tolist() == [100.0]
    with pytest.raises(go.ModelError, match="nstep"):
        st.step(nstep=0)
    plain = go.Stepper(bar, Q0, V0, dt=1e-3)
    with pytest.raises(go.ModelError, match="no inputs"):
        plain.step(1.0)


def test_bad_arguments(bar):
    with pytest.raises(go.ModelError, match="`method`"):
        go.Stepper(bar, Q0, V0, dt=1e-3, method="DOP853")
    with pytest.raises(go.ModelError, match="`dt`"):
        go.Stepper(bar, Q0, V0, dt=-1e-3)
    with pytest.raises(go.ModelError, match="`system`"):
        go.Stepper("bar", Q0, V0, dt=1e-3)
    with pytest.raises(go.ModelError, match="together"):
        go.Stepper(bar, Q0, dt=1e-3)
    with pytest.raises(go.ModelError, match="not parameters"):
        go.Stepper(bar, Q0, V0, dt=1e-3, inputs=("torque",))
    with pytest.raises(go.ModelError, match="only enter the force"):
        go.Stepper(bar, Q0, V0, dt=1e-3, inputs=("l",))       # l is in the constraints
    with pytest.raises(go.ModelError, match="Python"):
        go.Stepper(bar, Q0, V0, dt=1e-3, inputs=("psi",), solver="qp")
    with pytest.raises(go.ModelError, match="compiled model"):
        go.Stepper(pendulum(), [1.0, 0.0], [0.0, 0.0], dt=1e-3, inputs=("g",))
    with pytest.raises(go.ModelError, match="`inputs`"):
        go.Stepper(bar, Q0, V0, dt=1e-3, inputs="psi")


def test_failure_keeps_the_last_good_step():
    """A model that turns bad mid-step: StepFailedError with the specific error chained,
    the state left at the last good step, and the stepper usable after a reset."""
    def force(t, q, v):
        return np.array([0.0, -9.81]) if t < 0.0405 else np.array([np.nan, -9.81])

    sysm = pendulum(force)
    st = go.Stepper(sysm, [1.0, 0.0], [0.0, 0.0], dt=1e-3)
    st.step(nstep=40)
    t, q, v, a = st.t, st.q.copy(), st.v.copy(), st.a.copy()
    with pytest.raises(go.StepFailedError) as info:
        st.step()                                   # its stages reach t = 0.041
    err = info.value
    assert isinstance(err, go.SolverError)
    assert err.t == t and t < err.t_failed <= t + 1e-3
    assert isinstance(err.__cause__, go.GaussoptError)
    assert st.t == t and np.array_equal(st.q, q) and np.array_equal(st.v, v)
    assert np.array_equal(st.a, a) and st.steps == 40
    with pytest.raises(go.StepFailedError):
        st.step()                                   # still failing, still there
    assert st.t == t
    st.reset([1.0, 0.0], [0.0, 0.0])
    st.step(nstep=10)
    assert st.t == pytest.approx(0.01, abs=1e-15)


def test_failure_of_the_model_code():
    """The model's own exception is chained (a Python model that raises)."""
    def force(t, q, v):
        if t > 0.0025:
            raise ZeroDivisionError("the actuator model")
        return np.array([0.0, -9.81])

    st = go.Stepper(pendulum(force), [1.0, 0.0], [0.0, 0.0], dt=1e-3)
    st.step(nstep=2)
    with pytest.raises(go.StepFailedError) as info:
        st.step(nstep=3)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert st.t == pytest.approx(0.002, abs=1e-15) and st.steps == 2


def test_unverified_start_raises():
    """A state where the motion is not determined (M singular where no constraint acts)
    fails at once: reset raises StepFailedError naming the indeterminate motion."""
    sysm = go.System(("x", "y"), mass=[1.0, 0.0], force=[0.0, 1.0])
    with pytest.raises(go.StepFailedError) as info:
        go.Stepper(sysm, [0.0, 0.0], [0.0, 0.0], dt=1e-3)
    assert isinstance(info.value.__cause__, go.IndeterminateMotionError)


def test_many_rank_events_grow_the_buffer(bar):
    """A crank driven hard crosses its singular positions over and over: the rank events'
    buffer (64 rows) grows inside one call of step(nstep=...), no step is lost or taken
    twice, and the events and the state are simulate's with the same torque."""
    dt, N = 1e-3, 4000
    st = go.Stepper(bar, Q0, V0, dt=dt, inputs=("psi",))
    st.step(4000.0, nstep=N)
    tr = go.simulate(four_bar.system(psi=4000.0), (0.0, N * dt), Q0, V0, method="rk4", dt=dt)
    assert tr.success and st.steps == N and st.t == tr.t[-1]
    ev = [e.t for e in st.rank_events if e.kind == "passage"]
    ref = [e.t for e in tr.rank_events if e.kind == "passage"]
    assert len(ev) == len(ref) > 64
    assert np.allclose(ev, ref, rtol=0, atol=1e-12)
    scale = 1.0 + np.abs(tr.q[-1]).max() + np.abs(tr.v[-1]).max()
    assert np.abs(st.q - tr.q[-1]).max() <= 8 * EPS * scale
