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

Tolerances are derived, never fitted to these measurements: motions against
references below test_trajectory.integration_bound (the local errors the run
admits, times the growth of errors along the exact motion, flow_growth);
energies below the local errors weighted by |grad E|_1 (a first integral);
velocity residuals of the quasi-velocity formulations, zero by construction
(v = D w + w0 with B D = 0, B w0 = -c), at the rounding of the basis and of
B v, 16 eps of the terms; the Routh comparisons are qualitative (a formulation
that drifts against one that cannot).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.core.exceptions import (GaussoptError, IndeterminateMotionError, ModelError,
                                      UnsupportedConstraintError)
from gaussopt.quasi import QuasiVelocities
from gaussopt_problems import sleigh
from test_step_properties import (direct_tolerance, force_error_bound, multiplier_error_bound,
                                  step_error_bound)
from test_trajectory import EPS, energy_gradient, flow_growth, integration_bound

TOL = 1e-12
P = dict(M=2.5, I_C=0.7, F=1.7, alpha=0.4, u0=0.8, omega0=1.3, phi0=-0.3, x0=0.2, y0=-0.1)
TE = np.linspace(0.0, 20.0, 401)
KEYS = ("x", "y", "phi", "w1", "w2")


def _err(tr, ref) -> float:
    out = sleigh.outputs(tr.q, tr.v)
    n = len(tr)
    return max(float(np.abs(out[k] - ref[k][:n]).max()) for k in KEYS)


def sleigh_growth(t, **params) -> float:
    """Growth of errors along the exact sleigh motion, from sleigh.reference as a function
    of (x0, y0, phi0, u0, omega0) -> (x, y, phi, w1, w2)."""
    p = {**sleigh.DEFAULTS, **params}
    names = ("x0", "y0", "phi0", "u0", "omega0")
    return flow_growth(lambda y, ts: np.array(list(sleigh.reference(
        ts, **{**params, **dict(zip(names, y))}).values())), [p[k] for k in names], t)


def sleigh_bound(tr, t, steps=None, ref_tol=None, **params) -> float:
    """integration_bound (dense output) of a sleigh run with the exact flow's growth;
    (x, y, phi, w1, w2) are state components or unit combinations of two."""
    return integration_bound(tr, sleigh_growth(t, **params), dense=True, steps=steps,
                             ref_tol=ref_tol)


def knife_residual_bound(tr) -> float:
    """|-x' sin phi + y' cos phi| of a quasi-velocity run, relative to |v|: zero by
    construction (v = D w, B D = 0), up to the rounding of the basis (an orthonormal
    null-space basis: ~16 eps) and of the residual (3 eps)."""
    return 19 * EPS


@pytest.fixture(scope="module")
def runs():
    return {f: sleigh.run(f, t_eval=TE, rtol=TOL, atol=TOL, **P)
            for f in ("quasi", "quasi_auto", "routh_tan", "routh_sincos")}


# --------------------------------------------------------------------------- sleigh
@pytest.mark.parametrize("formulation", ["quasi", "quasi_auto"])
def test_sleigh_quasi_matches_closed_form_and_keeps_constraint(runs, formulation):
    tr = runs[formulation]
    assert tr.success and tr.t[-1] == 20.0
    assert _err(tr, sleigh.reference(TE, **P)) < sleigh_bound(tr, TE, **P)  # measured 2.1e-12
    rel = tr.velocity_residual / np.linalg.norm(tr.v, axis=1)
    assert rel.max() < knife_residual_bound(tr)                            # measured 5.5e-16
    # E = T - F . q is a first integral: the local errors weighted by |grad E|_1
    sysm = tr_sys()
    assert np.abs(tr.energy_drift).max() < energy_gradient(sysm, tr) * integration_bound(
        tr, dense=True)                                                    # measured 2e-12
    # a = D w' + a_c agrees with the Gauss step at the same states: both solve the same
    # step, verified (Gauss) or backward stable in null-space form (quasi), each within
    # step_error_bound at 16 (n + m + 1) eps
    i = np.arange(0, len(tr), 40)
    for j in i:
        t, q, v = tr.t[j], tr.q[j], tr.v[j]
        a = go.solve_step(sysm, t, q, v).a
        M, F = sysm.mass(t, q), sysm.force(t, q, v)
        A, b = sysm.rows(t, q, v)
        tau = direct_tolerance(3, 1)
        bound = step_error_bound(M, F, A, b, a, tau) + step_error_bound(M, F, A, b, tr.a[j], tau)
        assert np.linalg.norm(a - tr.a[j]) <= bound


def tr_sys():
    return sleigh.system(**{k: P[k] for k in ("M", "I_C", "F", "alpha")})


def test_automatic_basis_gives_the_paper_quasi_velocities(runs):
    auto, paper = runs["quasi_auto"], runs["quasi"]
    # two runs of the same motion: the sum of their integration bounds
    both = sleigh_bound(auto, TE, **P) + sleigh_bound(paper, TE, **P)
    assert np.abs(auto.q - paper.q).max() < both
    assert np.abs(auto.v - paper.v).max() < both
    # the anchor (x', phi' at phi0 = -0.3 projected on null(B)) is re-anchored every ~45
    # degrees; the chart frames are the parallel-transported ones, so the automatic
    # quasi-velocities are the forward speed and phi' (paper 000's w1, w2)
    assert auto.stats["chart_switches"] >= 20
    assert np.abs(auto.meta["w"] - paper.meta["w"]).max() < both       # (w1, w2): as (v, phi')
    ref = sleigh.reference(TE, **P)
    assert np.abs(auto.meta["w"][:, 0] - ref["w1"]).max() < sleigh_bound(auto, TE, **P)


def test_sleigh_with_moment_against_reduced_ode():
    p = dict(P, L_C=0.35, t_end=8.0)
    te = np.linspace(0.0, 8.0, 81)
    ref = sleigh.reference(te, **p)
    growth = sleigh_growth(te, **p)
    for f in ("quasi", "quasi_auto"):
        tr = sleigh.run(f, t_eval=te, rtol=TOL, atol=TOL, **p)
        # integration_bound with the growth of the exact flow and the reference's error
        # (the reduced ODE at 1e-13)
        bound = integration_bound(tr, growth, dense=True, ref_tol=1e-13)
        assert _err(tr, ref) < bound, f                                    # measured ~1e-12
        rel = tr.velocity_residual / np.linalg.norm(tr.v, axis=1)
        assert rel.max() < knife_residual_bound(tr)


def test_routh_drifts_and_the_tan_form_degrades_at_phi_pi_over_2(runs):
    ref = sleigh.reference(TE, **P)
    quasi, tan, sc = runs["quasi"], runs["routh_tan"], runs["routh_sincos"]
    # the regular form is as accurate as Gauss: its integration_bound (solve_ivp keeps no
    # step count: at most rhs_evaluations / 12 steps), with the exact flow's growth
    steps = sc.stats["rhs_evaluations"] // 12 + 1
    assert _err(sc, ref) < sleigh_bound(sc, TE, steps=steps, **P)          # measured 1.1e-10
    # ... but its velocity constraint drifts (qualitative: integration error against
    # rounding, 8.4e-12 vs 1.2e-16)
    assert sc.velocity_residual.max() > 1e3 * quasi.velocity_residual.max()
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
    assert after > 100 * before                  # qualitative; measured 1.3e-11 -> 8.1e-9
    qv = sleigh.run("quasi", t_eval=te, rtol=TOL, atol=TOL)
    assert np.all(qv.velocity_residual <= knife_residual_bound(qv) * np.linalg.norm(qv.v, axis=1))


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
    # r'' = omega^2 r is unstable: errors grow like cosh(omega t) (flow_growth of the closed
    # form in (r0, r0')); the position's error is the radial one (the angle is omega t)
    growth = flow_growth(lambda y, ts: np.array([
        y[0] * np.cosh(OM * ts) + y[1] / OM * np.sinh(OM * ts),
        y[0] * OM * np.sinh(OM * ts) + y[1] * np.cosh(OM * ts)]), [R0, RD0], te)
    bound = integration_bound(tr, growth, dense=True)
    assert np.abs(tr.q - wire_exact(te)).max() < bound                     # measured 7.8e-12
    # Phi_q v + Phi_t = 0 by construction (v = D w + w0): the rounding of the basis and of
    # the residual, 16 eps of its terms |Phi_q| |v| + |Phi_t| = |v| + omega |q|
    vres = 16 * EPS * (np.linalg.norm(tr.v, axis=1) + OM * np.linalg.norm(tr.q, axis=1))
    assert np.all(tr.velocity_residual <= vres)                           # measured 2.7e-15
    # w is the radial speed r' (automatic basis: e_r, w0 = r omega e_theta, minimum norm)
    r_dot = R0 * OM * np.sinh(OM * te) + RD0 * np.cosh(OM * te)
    assert np.abs(tr.meta["w"][:, 0] - r_dot).max() < bound


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
    # integration_bound with the growth of the angle flow over 3 s, and the reference's
    # error (1e-13; its steps ~ ours (1e-12/1e-13)^(1/8)); q = l (sin, -cos): lever l
    growth = flow_growth(lambda y, ts: solve_ivp(
        lambda t, z: [z[1], -GP / LP * np.sin(z[0])], (0.0, float(ts[-1])), y, t_eval=ts,
        rtol=1e-13, atol=1e-13, method="DOP853").y, [TH0, 0.0], te)
    bound = integration_bound(tr, growth, dense=True, ref_tol=1e-13)
    assert np.abs(tr.q - exact).max() < LP * bound                         # measured 6e-12
    # Phi_q v = 2 q . v = 0 by construction: 16 eps of its terms 2 |q| |v|
    vres = 16 * EPS * 2 * np.linalg.norm(tr.q, axis=1) * np.linalg.norm(tr.v, axis=1)
    assert np.all(tr.velocity_residual <= vres)
    # E is a first integral: the local errors weighted by |grad E|_1
    assert np.abs(tr.energy_drift).max() < energy_gradient(pendulum(), tr) * integration_bound(
        tr, dense=True)


def test_position_projection_of_holonomic_constraints():
    q0 = [LP * np.sin(TH0), -LP * np.cos(TH0)]
    free = QuasiVelocities(pendulum()).simulate((0.0, 3.0), q0, [0.0, 0.0], rtol=1e-6, atol=1e-6)
    proj = QuasiVelocities(pendulum()).simulate((0.0, 3.0), q0, [0.0, 0.0], rtol=1e-6, atol=1e-6,
                                                project_positions=True)
    # the velocity form Phi_q v = 0 holds by construction either way (16 eps of 2 |q| |v|,
    # whatever the tolerance); Phi itself drifts unless projected
    for tr in (free, proj):
        vres = 16 * EPS * 2 * np.linalg.norm(tr.q, axis=1) * np.linalg.norm(tr.v, axis=1)
        assert np.all(tr.velocity_residual <= vres)
    assert free.position_residual.max() > 1e-7       # drift at rtol = 1e-6 (qualitative)
    # the projection's target |Phi| / |Phi_q| <= 1e-15 (1 + max|q|), |Phi_q| = 2 |q|, plus
    # the rounding of q . q - l^2 (3 eps (|q|^2 + l^2))
    qn = np.linalg.norm(proj.q, axis=1)
    assert np.all(proj.position_residual <= 2 * qn * 1e-15 * (1 + np.abs(proj.q).max(axis=1))
                  + 3 * EPS * (qn**2 + LP**2))
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
    # an orthonormal basis (QR / SVD of the rows): D^T D = I to ~16 eps (n = 4 terms each)
    assert D.shape == (4, 2) and np.allclose(D.T @ D, np.eye(2), rtol=0, atol=16 * EPS)
    v0 = D @ np.array([1.0, -0.7]) + w0
    te = np.linspace(0.0, 4.0, 41)
    tr = qv.simulate((0.0, 4.0), q0, v0, rtol=TOL, atol=TOL, t_eval=te)
    ref = go.simulate(sysg, (0.0, 4.0), q0, v0, rtol=TOL, atol=TOL, t_eval=te)
    assert tr.success and ref.success and tr.stats["chart_switches"] == 0
    # Two formulations of the same motion: the sum of their integration bounds times the
    # growth of the exact flow, estimated from the quasi-velocity equations at 1e-13 in
    # the chart (q, w) (no re-anchoring over the 4 s); the velocities v = D w + w0 carry a
    # q-dependence of unit rate here (B's entries vary at unit rate), a factor 2
    def chart_flow(y, ts):
        r = QuasiVelocities(sysg).simulate((0.0, float(ts[-1])), y[:4], w=y[4:], rtol=1e-13,
                                            atol=1e-13, t_eval=ts)
        return np.vstack([r.q.T, r.meta["w"].T])
    growth = flow_growth(chart_flow, np.r_[q0, 1.0, -0.7], te, samples=41)
    both = 2 * growth * (integration_bound(tr, dense=True) + integration_bound(ref, dense=True))
    assert np.abs(tr.q - ref.q).max() < both                               # measured 5.9e-12
    assert np.abs(tr.v - ref.v).max() < both
    # M a - F and the multipliers at states that differ by at most `both` per component:
    # their sensitivity to the state, |d(M a - F, lam)/dy|_inf (row sums), by central
    # differences of the Gauss step at every 10th sample (their ~1e-6 relative error
    # covered by 1 %), plus each step's own error (force_error_bound and
    # multiplier_error_bound of the verified step)
    def step_at(t, y):
        r = go.solve_step(sysg, t, y[:4], y[4:])
        return np.r_[r.constraint_force, r.multipliers]

    L = dstep = 0.0
    tau = direct_tolerance(4, 2)
    for j in range(0, len(te), 10):
        y = np.r_[ref.q[j], ref.v[j]]
        J = np.array([(step_at(te[j], y + 1e-6 * e) - step_at(te[j], y - 1e-6 * e)) / 2e-6
                      for e in np.eye(8)]).T
        L = max(L, np.abs(J).sum(axis=1).max())
        M, F = sysg.mass(te[j], ref.q[j]), sysg.force(te[j], ref.q[j], ref.v[j])
        A, b = sysg.rows(te[j], ref.q[j], ref.v[j])
        dQ = force_error_bound(M, F, ref.a[j], step_error_bound(M, F, A, b, ref.a[j], tau))
        dstep = max(dstep, dQ + multiplier_error_bound(A, M @ ref.a[j] - F, dQ, tau))
    assert np.abs(tr.constraint_force - ref.constraint_force).max() < 1.01 * L * both + 2 * dstep
    assert np.abs(tr.multipliers - ref.multipliers).max() < 1.01 * L * both + 2 * dstep
    # B v + c = 0 by construction (v = D w + w0): 16 eps of its terms
    vres = 16 * EPS * (np.abs(tr.v).sum(axis=1) * (1 + np.abs(tr.q).max()) + 0.3)
    assert np.all(tr.velocity_residual <= vres)                            # Gauss: 4.5e-12


def test_automatic_basis_rate_against_finite_difference():
    qv = QuasiVelocities(general_system())
    t, q, w = 1.3, np.array([0.5, 0.1, 1.2, -0.4]), np.array([0.8, -0.3])
    qv.set_anchor(t, q + 0.3)                      # an anchor away from the state: S != I
    assert 0.8 < qv.chart_quality(t, q) < 0.999
    D, w0 = qv.basis(t, q)
    v = D @ w + w0
    Dd = qv.basis_rate(t, q, w)

    def fd(h):
        return (-qv.basis(t + 2 * h, q + 2 * h * v)[0] + 8 * qv.basis(t + h, q + h * v)[0]
                - 8 * qv.basis(t - h, q - h * v)[0] + qv.basis(t - 2 * h, q - 2 * h * v)[0]) / (12 * h)

    # 4th-order difference: truncation T(h) = (16/15) |fd(h) - fd(h/2)| (T(h/2) = T(h)/16),
    # rounding R = 1.5 (weights) * 16 eps |D| / h for fd(h), 3R in the difference
    h = 1e-3
    R = 1.5 * 16 * EPS * np.abs(D).max() / h
    est = 16 / 15 * np.abs(fd(h) - fd(h / 2)) + 5 * R
    assert np.all(np.abs(Dd - fd(h)) <= est + 16 * EPS * np.abs(Dd))       # measured 1.8e-13
    Om = D.T @ Dd
    # rotation in null(B): D^T Dd + Dd^T D = d(D^T D)/dt = 0, up to 16 eps of the terms
    assert np.abs(Om + Om.T).max() <= 16 * EPS * 4 * np.abs(D).max() * np.abs(Dd).max()


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
    # the same motion (the redundant row changes only the rounding): both runs' bounds
    p = dict(P, x0=0.0, y0=0.0, phi0=0.3, u0=0.8, omega0=1.3, t_end=3.0)
    assert np.abs(a.q - b.q).max() < sleigh_bound(a, te, **p) + sleigh_bound(b, te, **p)
    # minimum-norm multipliers: B^T lam = M a - F with lam along (1, 2.5), the copy's scale;
    # M a - F lies in range(B^T) up to the reduced solve's rounding and the least-squares
    # solve misses it by its backward error: 2 tau (|B| |lam| + |M a| + |F|)
    Qc = b.constraint_force
    B = np.stack([np.stack([-np.sin(b.q[:, 2]), np.cos(b.q[:, 2]), 0 * b.t], 1),
                  2.5 * np.stack([-np.sin(b.q[:, 2]), np.cos(b.q[:, 2]), 0 * b.t], 1)], 1)
    sysb = tr_sys()
    tau = direct_tolerance(3, 2)
    Ma = np.abs(b.a @ sysb.mass(0.0, q0)).sum(axis=1)
    scale = (np.sqrt(1 + 2.5**2) * np.abs(b.multipliers).sum(axis=1) + Ma
             + np.abs(sysb.force(0.0, q0, v0)).sum())
    off = np.abs(np.einsum("nki,nk->ni", B, b.multipliers) - Qc).max(axis=1)
    assert np.all(off <= 2 * tau * scale)
    # the split itself: lam = lam_tot (1, 2.5) / 7.25 from one least-squares solve
    assert np.allclose(b.multipliers[:, 1], 2.5 * b.multipliers[:, 0], rtol=0,
                       atol=2 * tau * 3.5 * np.abs(b.multipliers).max())


# --------------------------------------------------------------------------- errors
def test_constraint_kinds_rejected():
    from gaussopt_problems import appell_hamel, second_order_particle

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
    assert _err(tr, sleigh.reference(te, **P)) < sleigh_bound(tr, te, **dict(P, t_end=5.0))


# --------------------------------------------------------------------------- events, dense output
PHYS = {k: P[k] for k in ("M", "I_C", "F", "alpha")}


def _heading_east_zero(t, q, v):
    """x' = w1 cos(phi): zero where the sleigh heads north or south (w1 > 0 throughout)."""
    return v[0]


def _exact_heading_zeros(t_end: float) -> np.ndarray:
    """phi = phi0 + W t crosses pi/2 + k pi at t = (pi/2 + k pi - phi0) / W."""
    k = np.arange(0, 20)
    t = (np.pi / 2 + k * np.pi - P["phi0"]) / P["omega0"]
    return t[(t > 0) & (t <= t_end)]


def _event_time_bound(tr) -> float:
    """A zero of x' = w1 cos(phi) moves by (error of x') / |d x'/dt|, and at the zero
    |d x'/dt| = |w1 W| >= (A0 - K) W (w1 = A0 + K sin(psi), closed form), plus Brent's
    4 eps of the time; the error of x' (a unit combination of the state on the step's
    interpolant) is below sleigh_bound."""
    W, K = P["omega0"], P["F"] / (P["M"] * P["omega0"])
    A0 = P["u0"] - K * np.sin(P["phi0"] - P["alpha"])
    return sleigh_bound(tr, TE, **P) / ((A0 - K) * W) + 4 * EPS * 20.0


@pytest.mark.parametrize("basis", ["paper", "automatic"])
def test_quasi_events_at_the_exact_times(basis):
    qv = sleigh.quasi_velocities(**PHYS, basis=basis)
    q0, v0 = sleigh._initial(sleigh._params(**P))
    ev = _heading_east_zero
    tr = qv.simulate((0.0, 20.0), q0, v0, rtol=TOL, atol=TOL, events=ev)
    assert tr.success and tr.status == 0
    exact = _exact_heading_zeros(20.0)
    assert tr.t_events[0].shape == exact.shape
    assert np.abs(tr.t_events[0] - exact).max() < _event_time_bound(tr)     # measured 1.1e-14
    # the event's state: x' vanishes there (Brent to 4 eps in t, times |x''| <= |w1| W + ..)
    assert np.abs(tr.v_events[0][:, 0]).max() < 1e-12 * (1 + np.abs(tr.v).max())
    ref = sleigh.reference(tr.t_events[0], **P)
    assert np.abs(tr.q_events[0][:, 2] - ref["phi"]).max() < sleigh_bound(tr, TE, **P) \
        + P["omega0"] * _event_time_bound(tr)
    if basis == "automatic":
        assert tr.meta["chart_switches"]           # the events straddle re-anchorings


def test_quasi_terminal_event_ends_the_run_with_t_eval():
    qv = sleigh.quasi_velocities(**PHYS, basis="automatic")
    q0, v0 = sleigh._initial(sleigh._params(**P))

    def ev(t, q, v):
        return v[0]
    ev.terminal = 3
    ev.direction = 0
    tr = qv.simulate((0.0, 20.0), q0, v0, rtol=TOL, atol=TOL, events=ev, t_eval=TE)
    te = _exact_heading_zeros(20.0)[2]
    assert tr.status == 1 and tr.success and "events[0]" in tr.message
    assert abs(tr.t_events[0][-1] - te) < _event_time_bound(tr)
    assert tr.t[-1] <= tr.t_events[0][-1] and np.all(np.isin(tr.t, TE))
    # without t_eval the last sample is the event's state
    tr2 = qv.simulate((0.0, 20.0), q0, v0, rtol=TOL, atol=TOL, events=ev)
    assert tr2.t[-1] == tr2.t_events[0][-1]
    assert abs(tr2.v[-1, 0]) < 1e-12 * (1 + np.abs(tr2.v).max())


@pytest.mark.parametrize("basis", ["paper", "automatic"])
def test_quasi_dense_output_matches_the_closed_form(basis):
    qv = sleigh.quasi_velocities(**PHYS, basis=basis)
    q0, v0 = sleigh._initial(sleigh._params(**P))
    tr = qv.simulate((0.0, 20.0), q0, v0, rtol=TOL, atol=TOL, dense_output=True)
    assert tr.success and tr.sol is not None
    # at the steps: the stored states, bitwise
    qs, vs = tr.sol(tr.t)
    assert np.array_equal(qs, tr.q) and np.array_equal(vs, tr.v)
    # between them: the step's interpolant (one more local error: dense=True in the bound)
    ts = np.sort(np.random.default_rng(7).uniform(0.0, 20.0, 500))
    qd, vd = tr.sol(ts)
    out = sleigh.outputs(qd, vd)
    ref = sleigh.reference(ts, **P)
    err = max(float(np.abs(out[k] - ref[k]).max()) for k in KEYS)
    assert err < sleigh_bound(tr, ts, **P)                               # measured 2.8e-12
    # v = D w + w0 in the step's chart: the knife-edge constraint holds to rounding,
    # across the re-anchorings of the automatic basis too
    assert np.abs(out["slip"]).max() < knife_residual_bound(tr) * np.abs(vd).max()
    if basis == "automatic":
        assert tr.meta["chart_switches"]
    q1, v1 = tr.sol(7.3)
    assert q1.shape == (3,) and v1.shape == (3,)
    with pytest.raises(ModelError, match="within the computed span"):
        tr.sol(20.5)


def test_quasi_without_dense_output_has_no_sol():
    qv = sleigh.quasi_velocities(**PHYS)
    q0, v0 = sleigh._initial(sleigh._params(**P))
    tr = qv.simulate((0.0, 1.0), q0, v0)
    assert tr.sol is None
    with pytest.raises(ModelError, match="`dense_output` must be True or False"):
        qv.simulate((0.0, 1.0), q0, v0, dense_output="yes")


def test_quasi_failing_callbacks_keep_the_partial_run():
    qv = sleigh.quasi_velocities(**PHYS, basis="automatic")
    q0, v0 = sleigh._initial(sleigh._params(**P))

    def progress(t):
        if t > 1.0:
            raise RuntimeError("stop here")
    tr = qv.simulate((0.0, 5.0), q0, v0, progress=progress)
    assert not tr.success and "progress callback raised RuntimeError" in tr.message
    assert 1.0 < tr.t[-1] < 5.0 and isinstance(tr.exception, RuntimeError)

    def bad_event(t, q, v):
        if t > 2.0:
            raise ZeroDivisionError("event broke")
        return v[0]
    tr = qv.simulate((0.0, 5.0), q0, v0, events=bad_event)
    assert not tr.success and "events[0] (bad_event) raised ZeroDivisionError" in tr.message
    assert 2.0 < tr.t[-1] + 1.0 and tr.t[-1] < 5.0
    with pytest.raises(ModelError, match="events"):
        qv.simulate((0.0, 5.0), q0, v0, events=42)


def test_quasi_tolerances_below_machine_precision_are_raised_with_a_warning():
    qv = sleigh.quasi_velocities(**PHYS)
    q0, v0 = sleigh._initial(sleigh._params(**P))
    with pytest.warns(go.ToleranceWarning, match="raised to 100 \\* eps"):
        tr = qv.simulate((0.0, 0.2), q0, v0, rtol=1e-30, atol=1e-30)
    assert tr.success and tr.meta["rtol"] == 100 * np.finfo(float).eps
    with pytest.raises(ModelError, match="rtol"):
        qv.simulate((0.0, 0.2), q0, v0, rtol="1e-9")
