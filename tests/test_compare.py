"""go.compare from research code: a System with its initial value problem, go.ga_settings."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go

M_BOB, L_ROD, G = 2.0, 1.5, 9.81
TH0 = np.radians(50)
Q0 = [L_ROD * np.sin(TH0), -L_ROD * np.cos(TH0)]
V0 = [0.0, 0.0]
SETTINGS = dict(rtol=1e-10, atol=1e-10, stabilization=go.Projection(),
                t_eval=np.linspace(0.0, 1.0, 21))


def pendulum() -> go.System:
    """A point mass on a rod in Cartesian coordinates (parameters not 1)."""
    return go.System(("x", "y"), mass=M_BOB * np.eye(2), force=[0.0, -M_BOB * G],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - L_ROD**2]))],
                     energy=lambda t, q, v: 0.5 * M_BOB * v @ v + M_BOB * G * q[1],
                     name="cartesian_pendulum")


def reference(t):
    """x, y of the pendulum equation in the angle, integrated independently."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    sol = solve_ivp(lambda _, s: [s[1], -(G / L_ROD) * np.sin(s[0])], (0.0, float(t.max())),
                    [TH0, 0.0], method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True)
    th = sol.sol(t)[0]
    return {"x": L_ROD * np.sin(th), "y": -L_ROD * np.cos(th)}


@pytest.fixture(scope="module")
def system():
    return pendulum()


def test_compare_a_system_agrees_with_direct_simulate(system):
    solvers = ["closed_form", "lagrange", "qp"]
    comp = go.compare(system, solvers, t_span=(0.0, 1.0), q0=Q0, v0=V0, reference=reference,
                      **SETTINGS)
    assert [r["solver"] for r in comp.rows] == solvers
    assert comp.problem.name == "cartesian_pendulum"
    for row in comp.rows:
        direct = go.simulate(system, (0.0, 1.0), Q0, V0, solver=row["solver"], **SETTINGS)
        tr = comp.trajectories[row["solver"]]
        assert tr.success and np.array_equal(tr.t, direct.t) and np.array_equal(tr.q, direct.q)
        assert row["max_pos_residual"] == np.max(direct.position_residual)
        assert row["max_energy_drift"] == np.max(np.abs(direct.energy - direct.energy[0]))
        # the default outputs are the coordinates, compared with the reference by name
        ref = reference(direct.t)
        for i, c in enumerate(("x", "y")):
            assert row[f"max_err_{c}"] == np.max(np.abs(direct.q[:, i] - ref[c]))
    # the direct solvers give the same motion, on the same output grid, to the tolerance
    qs = [comp.trajectories[s].q for s in solvers]
    assert max(np.max(np.abs(q - qs[0])) for q in qs) < 100 * SETTINGS["rtol"]


def test_compare_a_system_solver_settings_and_outputs(system):
    comp = go.compare(
        system, ["lagrange_b", "ga"], t_span=(0.5, 1.5), q0=Q0, v0=V0,
        outputs=lambda q, v: {"r": np.hypot(q[:, 0], q[:, 1])},
        solver_settings={"lagrange_b": {"solver": "lagrange",
                                        "stabilization": go.Baumgarte(10.0, 10.0)},
                         "ga": go.ga_settings(1.5, horizon=0.005, dt=1e-3, t0=0.5)},
        rtol=1e-9, atol=1e-9)
    lag, ga = comp.trajectories["lagrange_b"], comp.trajectories["ga"]
    direct = go.simulate(system, (0.5, 1.5), Q0, V0, solver="lagrange", rtol=1e-9, atol=1e-9,
                         stabilization=go.Baumgarte(10.0, 10.0))
    assert np.array_equal(lag.q, direct.q)
    # the GA row runs its own span (solver_settings' t_span) at its fixed step
    assert ga.t[0] == 0.5 and ga.t[-1] == pytest.approx(0.505) and ga.stats["steps"] == 5
    assert comp.problem.outputs(lag.q, lag.v).keys() == {"r"}


def test_compare_a_system_defaults(system):
    comp = go.compare(system, [], t_span=(1.0, 3.0), q0=Q0, v0=V0)      # no rows: nothing run
    assert comp.rows == [] and comp.problem.t_span == (1.0, 3.0)
    assert comp.problem.solvers == ("closed_form", "lagrange", "qp")
    # a GA row asked for without settings runs ga_settings over the system's span
    assert comp.problem.solver_settings["ga"] == go.ga_settings(3.0, t0=1.0)
    assert go.ga_settings(3.0, t0=1.0)["t_span"] == (1.0, 1.2)


@pytest.mark.parametrize("missing", ["t_span", "q0", "v0"])
def test_compare_a_system_needs_its_initial_value_problem(system, missing):
    kw = dict(t_span=(0.0, 1.0), q0=Q0, v0=V0)
    del kw[missing]
    with pytest.raises(go.ModelError, match=rf"comparing a System needs .*pass `{missing}`"):
        go.compare(system, ["closed_form"], **kw)


def test_compare_rejects_other_objects():
    with pytest.raises(go.ModelError, match="must be a gaussopt.Problem or a gaussopt.System, "
                                            "found list"):
        go.compare([1, 2], ["closed_form"])


def test_compare_a_problem_with_replaced_initial_state():
    from gaussopt_problems import pendulum as pend

    pb = pend.build(t_end=0.4)
    q0 = np.array([np.sin(0.3), -np.cos(0.3)])
    comp = go.compare(pb, ["closed_form"], q0=q0, t_span=(0.0, 0.2))
    tr = comp.trajectories["closed_form"]
    assert np.array_equal(tr.q[0], q0) and tr.t[-1] == pytest.approx(0.2)
    assert np.array_equal(pb.q0, pend.build(t_end=0.4).q0)          # the problem is untouched
