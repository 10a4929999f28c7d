"""Quasi-velocities (gaussopt.quasi.QuasiVelocities, paper 000) against independent references.

Systems and references:

* paper 000's sleigh (problems/sleigh.py), parameters not 1 (M = 2.5,
  I_C = 0.7, F = 1.7 at alpha = 0.4, start phi0 = -0.3, forward speed 0.8,
  phi' = 1.3) over 20 s, against the closed-form solution of the reduced
  equations; with a moment L_C = 0.35 against the hand-derived reduced ODE at
  1e-13; Routh's equations with a multiplier (tan and sin/cos forms) as the
  classical baseline;
* a bead on a wire rotating at omega = 1.3 in a horizontal plane
  (rheonomic: w0 != 0), r'' = omega^2 r in closed form;
* a Cartesian pendulum (m = 2, l = 1.5) against the angle ODE at 1e-13;
* a 4-coordinate system with two rheonomic, affine nonholonomic constraints and
  a configuration-dependent mass matrix against gaussopt.simulate (the full
  Gauss step, an independent formulation), and the automatic basis' rate
  against a finite difference of the basis.

Measured (DOP853, rtol = atol = 1e-12, gaussopt 0.1.0): sleigh errors 2.1e-12
(paper basis and automatic basis, 29 re-anchorings), velocity residual
|-x' sin phi + y' cos phi| / |v| <= 5.5e-16 (automatic) and 6.3e-17 (paper
basis); Routh sin/cos form 1.1e-10 with residual 8.4e-12; Routh tan form
1.3e-4 with residual 7.6e-6: at every crossing of phi = pi/2 + j pi its
residual jumps by about three orders of magnitude (defaults: 1.3e-11 before
the first crossing, 8.1e-9 after) and it needs ~3x the evaluations.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.exceptions import (GaussoptError, IndeterminateMotionError, ModelError,
                                 UnsupportedConstraintError)
from gaussopt.quasi import QuasiVelocities
from problems import sleigh

TOL = 1e-12
P = dict(M=2.5, I_C=0.7, F=1.7, alpha=0.4, u0=0.8, omega0=1.3, phi0=-0.3, x0=0.2, y0=-0.1)
TE = np.linspace(0.0, 20.0, 401)
KEYS = ("x", "y", "phi", "w1", "w2")


def _err(tr, ref) -> float:
    out = sleigh.outputs(tr.q, tr.v)
    n = len(tr)
    return max(float(np.abs(out[k] - ref[k][:n]).max()) for k in KEYS)


@pytest.fixture(scope="module")
def runs():
    return {f: sleigh.run(f, t_eval=TE, rtol=TOL, atol=TOL, **P)
            for f in ("quasi", "quasi_auto", "routh_tan", "routh_sincos")}


# --------------------------------------------------------------------------- sleigh
@pytest.mark.parametrize("formulation", ["quasi", "quasi_auto"])
def test_sleigh_quasi_matches_closed_form_and_keeps_constraint(runs, formulation):
    tr = runs[formulation]
    assert tr.success and tr.t[-1] == 20.0
    assert _err(tr, sleigh.reference(TE, **P)) < 1e-9                      # measured 2.1e-12
    rel = tr.velocity_residual / np.linalg.norm(tr.v, axis=1)
    assert rel.max() < 1e-14                                               # measured 5.5e-16
    assert np.abs(tr.energy_drift).max() < 1e-9 * abs(tr.energy[0]) + 1e-9  # measured 2e-12
    # a = D w' + a_c agrees with the Gauss step at the same states
    i = np.arange(0, len(tr), 40)
    step = [go.solve_step(tr_sys(), tr.t[j], tr.q[j], tr.v[j]).a for j in i]
    assert np.abs(np.array(step) - tr.a[i]).max() < 1e-12


def tr_sys():
    return sleigh.system(**{k: P[k] for k in ("M", "I_C", "F", "alpha")})


def test_automatic_basis_gives_the_paper_quasi_velocities(runs):
    auto, paper = runs["quasi_auto"], runs["quasi"]
    assert np.abs(auto.q - paper.q).max() < 1e-10
    assert np.abs(auto.v - paper.v).max() < 1e-10
    # the anchor (x', phi' at phi0 = -0.3 projected on null(B)) is re-anchored every ~45
    # degrees; the chart frames are the parallel-transported ones, so the automatic
    # quasi-velocities are the forward speed and phi' (paper 000's w1, w2)
    assert auto.stats["chart_switches"] >= 20
    assert np.abs(auto.meta["w"] - paper.meta["w"]).max() < 1e-10
    ref = sleigh.reference(TE, **P)
    assert np.abs(auto.meta["w"][:, 0] - ref["w1"]).max() < 1e-9


def test_sleigh_with_moment_against_reduced_ode():
    p = dict(P, L_C=0.35, t_end=8.0)
    te = np.linspace(0.0, 8.0, 81)
    ref = sleigh.reference(te, **p)
    for f in ("quasi", "quasi_auto"):
        tr = sleigh.run(f, t_eval=te, rtol=TOL, atol=TOL, **p)
        assert _err(tr, ref) < 1e-9, f                                     # measured ~1e-12
        assert (tr.velocity_residual / np.linalg.norm(tr.v, axis=1)).max() < 1e-14


def test_routh_drifts_and_the_tan_form_degrades_at_phi_pi_over_2(runs):
    ref = sleigh.reference(TE, **P)
    quasi, tan, sc = runs["quasi"], runs["routh_tan"], runs["routh_sincos"]
    # the regular form is as accurate as Gauss, but its velocity constraint drifts
    assert _err(sc, ref) < 1e-9                                            # measured 1.1e-10
    assert sc.velocity_residual.max() > 1e3 * quasi.velocity_residual.max()  # 8.4e-12 vs 1.2e-16
    # the tan form passes phi = pi/2 + j pi (phi = -0.3 + 1.3 t: 9 crossings); its
    # residual jumps there and the solution degrades by six orders of magnitude
    assert tan.success
    assert _err(tan, ref) > 1e3 * _err(sc, ref)                           # 1.3e-4 vs 1.1e-10
    assert tan.velocity_residual.max() > 1e4 * sc.velocity_residual.max()  # 7.6e-6 vs 8.4e-12
    assert tan.stats["rhs_evaluations"] > 2 * sc.stats["rhs_evaluations"]


def test_routh_tan_residual_jumps_at_the_first_crossing():
    te = np.linspace(0.0, 3.0, 601)              # defaults: phi = t crosses pi/2 at t = 1.5708
    tr = sleigh.simulate_routh("tan", rtol=TOL, atol=TOL, t_eval=te)
    before = tr.velocity_residual[te < np.pi / 2 - 0.05].max()
    after = tr.velocity_residual[(te > np.pi / 2 + 0.05)].max()
    assert after > 100 * before                  # measured 1.3e-11 -> 8.1e-9
    qv = sleigh.run("quasi", t_eval=te, rtol=TOL, atol=TOL)
    assert qv.velocity_residual.max() < 1e-15


# --------------------------------------------------------------------------- rheonomic wire
OM, MW, R0, RD0 = 1.3, 0.8, 0.5, -0.2


def wire_system():
    wire = go.Holonomic(lambda t, q: np.array([q[0] * np.sin(OM * t) - q[1] * np.cos(OM * t)]),
                        name="wire")
    return go.System(("x", "y"), mass=MW * np.eye(2), constraints=[wire])


def wire_exact(t):
    r = R0 * np.cosh(OM * t) + RD0 / OM * np.sinh(OM * t)
    return np.stack([r * np.cos(OM * t), r * np.sin(OM * t)], axis=1)


@pytest.mark.parametrize("user", [False, True])
def test_rotating_wire_rheonomic_particular_velocity(user):
    sysw = wire_system()
    if user:
        qv = QuasiVelocities(
            sysw, D=lambda t, q: np.array([[np.cos(OM * t)], [np.sin(OM * t)]]),
            w0=lambda t, q: OM * (q[0] * np.cos(OM * t) + q[1] * np.sin(OM * t))
            * np.array([-np.sin(OM * t), np.cos(OM * t)]))
    else:
        qv = QuasiVelocities(sysw)
    te = np.linspace(0.0, 2.0, 41)
    tr = qv.simulate((0.0, 2.0), [R0, 0.0], [RD0, R0 * OM], rtol=TOL, atol=TOL, t_eval=te)
    assert tr.success
    assert np.abs(tr.q - wire_exact(te)).max() < 1e-9                      # measured 7.8e-12
    assert tr.velocity_residual.max() < 1e-14                              # measured 2.7e-15
    # w is the radial speed r' (automatic basis: e_r, w0 = r omega e_theta, minimum norm)
    r_dot = R0 * OM * np.sinh(OM * te) + RD0 * np.cosh(OM * te)
    assert np.abs(tr.meta["w"][:, 0] - r_dot).max() < 1e-9


# --------------------------------------------------------------------------- pendulum
MP, LP, GP = 2.0, 1.5, 9.81
TH0 = np.radians(60.0)


def pendulum():
    return go.System(("x", "y"), mass=MP * np.eye(2), force=[0.0, -MP * GP],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - LP**2]))],
                     energy=lambda t, q, v: 0.5 * MP * v @ v + MP * GP * q[1])


def test_pendulum_holonomic_charts_against_angle_ode():
    te = np.linspace(0.0, 3.0, 61)
    sol = solve_ivp(lambda t, y: [y[1], -GP / LP * np.sin(y[0])], (0.0, 3.0), [TH0, 0.0],
                    t_eval=te, rtol=1e-13, atol=1e-13, method="DOP853")
    exact = np.stack([LP * np.sin(sol.y[0]), -LP * np.cos(sol.y[0])], axis=1)
    tr = QuasiVelocities(pendulum()).simulate((0.0, 3.0), exact[0], [0.0, 0.0], rtol=TOL,
                                              atol=TOL, t_eval=te)
    assert tr.success and tr.stats["chart_switches"] >= 2                  # swings +-60 degrees
    assert np.abs(tr.q - exact).max() < 1e-9                               # measured 6e-12
    assert tr.velocity_residual.max() < 1e-13
    assert np.abs(tr.energy_drift).max() < 1e-9


def test_position_projection_of_holonomic_constraints():
    q0 = [LP * np.sin(TH0), -LP * np.cos(TH0)]
    free = QuasiVelocities(pendulum()).simulate((0.0, 3.0), q0, [0.0, 0.0], rtol=1e-6, atol=1e-6)
    proj = QuasiVelocities(pendulum()).simulate((0.0, 3.0), q0, [0.0, 0.0], rtol=1e-6, atol=1e-6,
                                                project_positions=True)
    # the velocity form Phi_q v = 0 holds exactly either way; Phi itself drifts unless projected
    assert free.velocity_residual.max() < 1e-13 and proj.velocity_residual.max() < 1e-13
    assert free.position_residual.max() > 1e-7
    assert proj.position_residual.max() < 1e-12
    assert proj.stats["projections"] > 0


# --------------------------------------------------------------------------- general system
def _f(t, q, v):
    return np.array([np.cos(q[2]) * v[0] + np.sin(q[2]) * v[1] - 0.4 * v[3] + 0.3 * np.sin(1.7 * t),
                     -0.5 * np.sin(q[3]) * v[0] + v[2] + 0.2 * q[0] * v[3]])


def general_system():
    def mass(t, q):
        return np.array([[1.3 + 0.2 * np.cos(q[3]), 0.1, 0.0, 0.0], [0.1, 0.9, 0.0, 0.05],
                         [0.0, 0.0, 0.6, 0.0], [0.0, 0.05, 0.0, 1.1]])
    K = np.diag([1.5, 0.7, 0.0, 2.0])
    return go.System(("a", "b", "c", "d"), mass=mass,
                     force=lambda t, q, v: -K @ q - 0.1 * v + np.array([0.0, -2.0, 0.5, 0.0]),
                     constraints=[go.Nonholonomic(_f, name="nh")])


def test_general_affine_nonholonomic_agrees_with_gauss_step():
    sysg = general_system()
    q0 = np.array([0.3, -0.2, 0.4, 0.1])
    qv = QuasiVelocities(sysg)
    qv.set_anchor(0.0, q0)
    D, w0 = qv.basis(0.0, q0)
    assert D.shape == (4, 2) and np.allclose(D.T @ D, np.eye(2), atol=1e-14)
    v0 = D @ np.array([1.0, -0.7]) + w0
    te = np.linspace(0.0, 4.0, 41)
    tr = qv.simulate((0.0, 4.0), q0, v0, rtol=TOL, atol=TOL, t_eval=te)
    ref = go.simulate(sysg, (0.0, 4.0), q0, v0, rtol=TOL, atol=TOL, t_eval=te)
    assert tr.success and ref.success
    assert np.abs(tr.q - ref.q).max() < 1e-9                               # measured 5.9e-12
    assert np.abs(tr.v - ref.v).max() < 1e-9
    assert np.abs(tr.constraint_force - ref.constraint_force).max() < 1e-9
    assert np.abs(tr.multipliers - ref.multipliers).max() < 1e-9
    assert tr.velocity_residual.max() < 1e-14                              # Gauss: 4.5e-12


def test_automatic_basis_rate_against_finite_difference():
    qv = QuasiVelocities(general_system())
    t, q, w = 1.3, np.array([0.5, 0.1, 1.2, -0.4]), np.array([0.8, -0.3])
    qv.set_anchor(t, q + 0.3)                      # an anchor away from the state: S != I
    assert 0.8 < qv.chart_quality(t, q) < 0.999
    D, w0 = qv.basis(t, q)
    v = D @ w + w0
    Dd = qv.basis_rate(t, q, w)
    h = 1e-3
    fd = (-qv.basis(t + 2 * h, q + 2 * h * v)[0] + 8 * qv.basis(t + h, q + h * v)[0]
          - 8 * qv.basis(t - h, q - h * v)[0] + qv.basis(t - 2 * h, q - 2 * h * v)[0]) / (12 * h)
    assert np.abs(Dd - fd).max() < 1e-10 * max(1.0, np.abs(fd).max())     # measured 1.8e-13
    Om = D.T @ Dd
    assert np.abs(Om + Om.T).max() < 1e-15                                 # rotation in null(B)


def test_redundant_rows_give_the_same_motion():
    base = tr_sys()
    dup = go.System(base.coordinates, mass=base.constant_mass, force=base.constant_force,
                    constraints=list(base.constraints) + [go.Nonholonomic(
                        lambda t, q, v: 2.5 * sleigh._knife(t, q, v), name="copy")])
    q0, v0 = np.array([0.0, 0.0, 0.3]), np.array([0.8 * np.cos(0.3), 0.8 * np.sin(0.3), 1.3])
    te = np.linspace(0.0, 3.0, 31)
    a = QuasiVelocities(base).simulate((0.0, 3.0), q0, v0, rtol=TOL, atol=TOL, t_eval=te)
    b = QuasiVelocities(dup).simulate((0.0, 3.0), q0, v0, rtol=TOL, atol=TOL, t_eval=te)
    assert b.rank[0] == 1 and b.multipliers.shape == (31, 2)
    assert np.abs(a.q - b.q).max() < 1e-12
    # minimum-norm multipliers: B^T lam = M a - F with lam along (1, 2.5), the copy's scale
    Qc = b.constraint_force
    B = np.stack([np.stack([-np.sin(b.q[:, 2]), np.cos(b.q[:, 2]), 0 * b.t], 1),
                  2.5 * np.stack([-np.sin(b.q[:, 2]), np.cos(b.q[:, 2]), 0 * b.t], 1)], 1)
    assert np.abs(np.einsum("nki,nk->ni", B, b.multipliers) - Qc).max() < 1e-12
    assert np.allclose(b.multipliers[:, 1], 2.5 * b.multipliers[:, 0], atol=1e-12)


# --------------------------------------------------------------------------- errors
def test_constraint_kinds_rejected():
    from problems import appell_hamel, second_order_particle

    with pytest.raises(ModelError, match="nonlinear in the velocities"):
        QuasiVelocities(appell_hamel.system()).simulate((0, 1), [0, 0, 0], [3.0, 4.0, 2.5])
    with pytest.raises(UnsupportedConstraintError, match="AccelerationConstraint"):
        QuasiVelocities(second_order_particle.system())


def test_argument_errors():
    s = tr_sys()
    q0, v0 = np.zeros(3), np.array([1.0, 0.0, 1.0])
    qv = QuasiVelocities(s)
    with pytest.raises(ModelError, match="exactly one of `v0`"):
        qv.simulate((0, 1), q0)
    with pytest.raises(ModelError, match="exactly one of `v0`"):
        qv.simulate((0, 1), q0, v0, w=[1.0, 1.0])
    with pytest.raises(ModelError, match="violates the velocity constraints"):
        qv.simulate((0, 1), q0, [1.0, 0.3, 1.0])
    with pytest.raises(ModelError, match="`method`"):
        qv.simulate((0, 1), q0, v0, method="rk4")
    with pytest.raises(ModelError, match="`t_span`"):
        qv.simulate((1, 0), q0, v0)
    with pytest.raises(ModelError, match="`w` must be 2"):
        qv.simulate((0, 1), q0, w=[1.0])
    with pytest.raises(ModelError, match="`dD` was given without `D`"):
        QuasiVelocities(s, dD=lambda t, q, v: None)
    with pytest.raises(ModelError, match="`chart_tol`"):
        QuasiVelocities(s, chart_tol=1.5)
    with pytest.raises(ModelError, match=r"must have shape \(3, 2\)"):
        QuasiVelocities(s, D=lambda t, q: np.eye(3)).simulate((0, 1), q0, v0)
    with pytest.raises(ModelError, match="does not span admissible velocities"):
        QuasiVelocities(s, D=lambda t, q: np.eye(3)[:, :2]).simulate((0, 1), q0, v0)
    good = sleigh.quasi_velocities(**{k: P[k] for k in ("M", "I_C", "F", "alpha")})
    wrong = QuasiVelocities(s, D=good._D, dD=lambda t, q, v: np.zeros((3, 2)) + 0.1)
    with pytest.raises(ModelError, match="`dD` disagrees"):
        wrong.simulate((0, 1), q0, v0)
    unsafe = QuasiVelocities(s, D=lambda t, q: np.array([[abs(np.cos(q[2])), 0], [np.sin(q[2]), 0],
                                                          [0, 1.0]]))
    with pytest.raises(ModelError, match="not complex-safe"):
        unsafe.simulate((0, 1), [0, 0, 0.2], [np.cos(0.2), np.sin(0.2), 1.0])


def test_indeterminate_and_singular_positions():
    # massless heading: D^T M D singular in the phi' direction
    s = go.System(("x", "y", "phi"), mass=np.diag([1.0, 1.0, 0.0]),
                  constraints=[go.Nonholonomic(sleigh._knife)])
    with pytest.raises(IndeterminateMotionError, match="not positive definite"):
        QuasiVelocities(s).reduced_rhs(0.0, np.zeros(3), [1.0, 1.0])
    # the row (0, x) vanishes at x = 0: undefined there (at the start: an error) ...
    s2 = go.System(("x", "y"), mass=np.eye(2),
                   constraints=[go.Nonholonomic(lambda t, q, v: np.array([q[0] * v[1]]))])
    with pytest.raises(GaussoptError, match="singular position"):
        QuasiVelocities(s2).simulate((0.0, 1.0), [0.0, 0.0], [1.0, 0.0])
    # ... and a run that lands on it (x' = 1 from x = -0.5, first step 0.5) stops there
    tr = QuasiVelocities(s2).simulate((0.0, 1.0), [-0.5, 0.0], [1.0, 0.0], first_step=0.5)
    assert not tr.success and "singular position" in tr.message
    assert tr.t[-1] == 0.0
    # stepping over it goes unnoticed: null(B) = span(e_x) on both sides (documented)
    assert QuasiVelocities(s2).simulate((0.0, 1.0), [-0.5, 0.0], [1.0, 0.0]).success


def test_constraint_that_is_not_complex_safe_uses_differences():
    import math

    def f(t, q, v):   # math.sin: no complex step; the Jacobian and gamma are given instead
        return np.array([-v[0] * math.sin(q[2]) + v[1] * math.cos(q[2])])

    def jac(t, q, v):
        return np.array([[-math.sin(q[2]), math.cos(q[2]), 0.0]])

    def gam(t, q, v):
        return np.array([v[2] * (v[0] * math.cos(q[2]) + v[1] * math.sin(q[2]))])

    s = go.System(("x", "y", "phi"), mass=np.diag([P["M"], P["M"], P["I_C"]]),
                  force=[P["F"] * np.cos(P["alpha"]), P["F"] * np.sin(P["alpha"]), 0.0],
                  constraints=[go.Nonholonomic(f, jac, gam)])
    qv = QuasiVelocities(s)
    te = np.linspace(0.0, 5.0, 51)
    q0, v0 = sleigh._initial({**sleigh.DEFAULTS, **P})
    tr = qv.simulate((0.0, 5.0), q0, v0, rtol=TOL, atol=TOL, t_eval=te)
    assert qv._nh_complex == {0: False}
    assert _err(tr, sleigh.reference(te, **P)) < 1e-9
