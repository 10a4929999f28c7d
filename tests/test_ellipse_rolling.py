"""Paper 002's elliptical disk rolling without slip (problems/ellipse_rolling.py).

Independent references:

* geometry: the lowest point of the rotated ellipse found by minimizing over
  its parametrization (not from ``rho``), the material velocity of that point,
  ``int rho`` by adaptive quadrature;
* dynamics: the reduced one-degree-of-freedom equation in ``theta`` (its own
  closed form of ``m_eff'``), integrated by ``solve_ivp`` at
  ``rtol = atol = 1e-13``; checked itself by energy conservation, the uniform
  rolling of the circle and the elliptic-integral form of the rolling constraint;
* hand-written Jacobians and ``gamma`` against gaussopt's complex-step ones.

Tolerances are derived, not measured (measured values in brackets, DOP853 at
1e-11 + Projection): the state against the reference below the run's
integration_bound (the sum of the local errors DOP853 admits, times the growth of
errors along the exact motion, from the reference) [theta: 1.1e-11 case1,
3.2e-10 case3 over 20 s, 2.4e-9 / 3.5e-9 for the forced cases 4 / 5 where theta
reaches ~300 rad]; the energy, a first integral, below the local errors weighted
by |grad E|_1 [3.5e-11 case1, 2.6e-11 case3, 0 circle -- the paper reports
~1e-6]; the normal force (the library's ``M a - F`` against the reduced
dynamics) below the growth of the normal force's error along the motion times
the local errors, plus the verified step's error [5.5e-9 N of 16 N for case3;
2e-10 .. 2.6e-9 N elsewhere]; residuals below the projection's target plus the
rounding of the constraint; formulas against formulas to c eps times the size
of their terms (c counted from the operations).
Most runs use a generic disk (a = 1.3, b = 0.7, m = 2.3, g = 9.81, J != m (a^2
+ b^2)/4, all three loads nonzero) besides the paper's m = 1 cases, so a
missing factor of m, g or J shows.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq, minimize_scalar

import gaussopt as go
from gaussopt.core.exceptions import ModelError, UnsupportedConstraintError
from gaussopt_problems import ellipse_rolling as er
from test_step_properties import (QP_TOLERANCE, direct_tolerance, force_error_bound,
                                  multiplier_error_bound, step_error_bound)
from test_trajectory import EPS, flow_growth, integration_bound

#: a generic disk and load: nothing equal to 1, J not the uniform-disk value
GEN = dict(a=1.3, b=0.7, m=2.3, g=9.81, J=0.41, fx=-1.1, fy=0.4, tau=0.6, theta0=0.4,
           omega0=1.7, xc0=0.25)
REF_KEYS = ("a", "b", "m", "g", "J", "fx", "fy", "tau", "theta0", "omega0", "xc0")

_RUNS: dict = {}


def run(case: str, **overrides) -> tuple[go.Problem, go.Trajectory]:
    """Default-settings run of a case, cached for the module (several tests read it)."""
    key = (case, tuple(sorted(overrides.items())))
    if key not in _RUNS:
        p = er.build(case, **overrides)
        tr = p.simulate("closed_form")
        assert tr.success, tr.message
        _RUNS[key] = (p, tr)
    return _RUNS[key]


def ref_kw(p: go.Problem) -> dict:
    return {k: p.params[k] for k in REF_KEYS}


def ref_steps(kw: dict, t_end: float) -> int:
    """Steps of the reference's DOP853 run (its cached solution; at most nfev / 12)."""
    t_end = float(np.ceil(max(t_end, 1e-12) * 4.0) / 4.0)        # as reference_solution
    J = kw["J"] if kw.get("J") is not None else kw["m"] * (kw["a"] ** 2 + kw["b"] ** 2) / 4
    key = tuple(float(kw[k]) if k != "J" else float(J) for k in REF_KEYS) + (t_end,)
    return er._reference_cached(*key).nfev // 12 + 1


def reference_energy_error(kw: dict, r: dict, t_end: float) -> float:
    """Bound on the energy error of the reference (DOP853 at rtol = atol = 1e-13 on
    y = (theta, omega, xc)): E is a first integral, so its error is the sum of the local
    errors, glob = N 2 sqrt(3) 1e-13 (1 + max|y|) (N the reference's steps), weighted by
    |grad E|_1 = |E_theta| + |E_omega| + |fx|, E_theta = m_eff' w^2 / 2 + (m g - fy) rho'
    - tau, E_omega = m_eff w, m_eff = m (rho^2 + rho'^2) + J; plus the rounding of E
    (8 eps of its terms)."""
    a, b, m, g, J = (kw[k] for k in ("a", "b", "m", "g", "J"))
    th, w = r["theta"], r["omega"]
    rr, r1, r2 = er.rho(th, a, b), er.rho_d1(th, a, b), er.rho_d2(th, a, b)
    meff, dmeff = m * (rr**2 + r1**2) + J, 2 * m * (rr * r1 + r1 * r2)
    gradE = (np.abs(0.5 * dmeff * w * w + (m * g - kw["fy"]) * r1 - kw["tau"])
             + np.abs(meff * w) + abs(kw["fx"])).max()
    ymax = max(np.abs(th).max(), np.abs(w).max(), np.abs(r["xc"]).max())
    glob = ref_steps(kw, t_end) * 2 * np.sqrt(3) * 1e-13 * (1 + ymax)
    terms = (0.5 * meff * w * w + m * g * rr + np.abs(kw["fx"] * r["xc"]) + np.abs(kw["fy"] * rr)
             + np.abs(kw["tau"] * th))
    return float(gradE * glob + 8 * EPS * terms.max())


def growth(p: go.Problem, t, output: str | None = None) -> float:
    """Growth of errors along the exact motion, from the reference as a function of its
    initial state (theta0, omega0, xc0): of the state, or of one output (normal force)."""
    kw = ref_kw(p)

    def ref(y0, ts):
        r = er.reference_solution(ts, **{**kw, "theta0": y0[0], "omega0": y0[1], "xc0": y0[2]})
        return np.array([r["theta"], r["omega"], r["xc"]] + ([r[output]] if output else []))

    return flow_growth(ref, [kw["theta0"], kw["omega0"], kw["xc0"]], t,
                       rows=None if output is None else [3])


def grad_energy(p: go.Problem, tr: go.Trajectory) -> float:
    """max |grad E|_1 along a run, E = T + m g yc - fx xc - fy yc - tau theta."""
    m, J, g = p.params["m"], p.params["J"], p.params["g"]
    fx, fy, tau = p.params["fx"], p.params["fy"], p.params["tau"]
    return float((m * np.abs(tr.v[:, :2]).sum(axis=1) + J * np.abs(tr.v[:, 2])).max()
                 + abs(fx) + abs(m * g - fy) + abs(tau))


def residual_bounds(p: go.Problem, tr: go.Trajectory) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample bounds on the position residual |yc - rho| and the velocity residual
    |(yc' - rho' th', xc' + rho th')| after the projection: its target, a row-normalized
    residual <= 1e-15 (1 + max|x_i|), times the row norms, plus the rounding of the
    constraints (rho: 8 eps max(a, b); the products and sums: 3 eps of their terms)."""
    a, b = p.params["a"], p.params["b"]
    th, v = tr.q[:, 2], tr.v
    r, r1 = er.rho(th, a, b), er.rho_d1(th, a, b)
    qm, vm = np.abs(tr.q).max(axis=1), np.abs(v).max(axis=1)
    pos = np.hypot(1.0, r1) * 1e-15 * (1 + qm) + 8 * EPS * (np.abs(tr.q[:, 1]) + max(a, b))
    hol = np.hypot(1.0, r1) * 1e-15 * (1 + vm) + 3 * EPS * (np.abs(v[:, 1]) + np.abs(r1 * v[:, 2]))
    roll = np.hypot(1.0, r) * 1e-15 * (1 + vm) + 3 * EPS * (np.abs(v[:, 0]) + np.abs(r * v[:, 2]))
    if p.params.get("rolling") == "holonomic":
        S = np.abs(er.arc_integral(th, a, b)) + max(a, b) * (np.abs(th) + 2 * np.pi)
        pos = np.hypot(pos, np.hypot(1.0, r) * 1e-15 * (1 + qm)
                       + 8 * EPS * (np.abs(tr.q[:, 0]) + S))
    return pos, np.hypot(hol, roll)


def state_bound(p: go.Problem, tr: go.Trajectory) -> float:
    """Bound on the error of theta, xc, yc (and omega) against the reference:
    integration_bound with the growth along the exact motion and the reference's error."""
    return integration_bound(tr, growth(p, tr.t), ref_tol=1e-13)


def normal_bound(p: go.Problem, tr: go.Trajectory, tau: float) -> float:
    """Bound on the error of the normal force M a - F (y component) against the reference:
    the state errors carried to N (growth of N along the motion times the local errors,
    integration_bound), plus the verified step's error (force_error_bound)."""
    sysm = p.system
    dQ = 0.0
    for t, q, v, a in zip(tr.t, tr.q, tr.v, tr.a):
        M, F = sysm.mass(t, q), sysm.force(t, q, v)
        dQ = max(dQ, force_error_bound(M, F, a, step_error_bound(M, F, *sysm.rows(t, q, v), a, tau)))
    return integration_bound(tr, growth(p, tr.t, "normal_force"), ref_tol=1e-13) + dQ


# --------------------------------------------------------------------------- geometry
@pytest.mark.parametrize("a,b", [(1.5, 1.0), (0.7, 1.3)])
def test_rho_derivatives_against_complex_step(a, b):
    th = np.linspace(-4.0, 4.0, 81) + 0.0123
    h = 1e-30
    d1 = er.rho(th + 1j * h, a, b).imag / h
    d2 = er.rho_d1(th + 1j * h, a, b).imag / h
    # The complex step is exact up to the rounding of the evaluation, like the formula:
    # each side ~8 roundings (squares, sin, cos, products, sqrt, division) of terms of size
    # (a^2 + b^2) |sin cos| / rho <= (a^2 + b^2) / min(a, b), and for rho'' also r1^2 / rho
    r, r1 = er.rho(th, a, b), er.rho_d1(th, a, b)
    assert np.max(np.abs(er.rho_d1(th, a, b) - d1)) < 16 * EPS * (a * a + b * b) / min(a, b)
    assert np.all(np.abs(er.rho_d2(th, a, b) - d2) < 32 * EPS * (a * a + b * b + r1 * r1) / r)
    # rho + rho'' is the radius of curvature at the contact: a^2/b at theta = 0 (contact at
    # the end of the e2 semi-axis b), b^2/a at theta = pi/2 (end of the e1 semi-axis a);
    # ~8 roundings of terms a^2/b and b^2/b (a^2/a and b^2/a at pi/2)
    assert er.rho(0.0, a, b) + er.rho_d2(0.0, a, b) == pytest.approx(
        a * a / b, rel=8 * EPS * (a * a + 2 * b * b) / (a * a))
    assert er.rho(np.pi / 2, a, b) + er.rho_d2(np.pi / 2, a, b) == pytest.approx(
        b * b / a, rel=8 * EPS * (2 * a * a + b * b) / (b * b))


@pytest.mark.parametrize("th", [0.0, 0.3, 1.2, np.pi / 2, 2.0, 3.5, -0.8])
def test_contact_point_is_the_lowest_point_and_rolling_is_no_slip(th):
    a, b = 1.3, 0.7
    R = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])

    def height(u):                       # world y of the body point (a cos u, b sin u)
        return (R @ np.array([a * np.cos(u), b * np.sin(u)]))[1]

    us = np.linspace(0, 2 * np.pi, 721)
    u0 = us[np.argmin([height(u) for u in us])]
    u = minimize_scalar(height, bounds=(u0 - 0.01, u0 + 0.01), method="bounded",
                        options={"xatol": 1e-12}).x
    r = R @ np.array([a * np.cos(u), b * np.sin(u)])      # contact point from the centroid
    # Brent's bounded search stops when the bracket is within 2 tol1, tol1 = sqrt(eps) |u|
    # + xatol / 3: u is within du = 4 tol1 of the minimum. At the (flat) minimum the height
    # errs by curvature (<= max(a, b)) * du^2 / 2 plus its rounding (4 eps max(a, b)); the
    # horizontal offset by |dr/du| du <= max(a, b) du.
    du = 4 * (np.sqrt(EPS) * abs(u) + 1e-12 / 3)
    dh = max(a, b) * du * du / 2 + 4 * EPS * max(a, b)
    assert r[1] == pytest.approx(-er.rho(th, a, b), abs=dh)
    assert r[0] == pytest.approx(-er.rho_d1(th, a, b), abs=max(a, b) * du + 4 * EPS * max(a, b))
    # material velocity of the contact point, v_c + w e_z x r, on the constraints
    w = 0.83
    vx, vy = -er.rho(th, a, b) * w, er.rho_d1(th, a, b) * w        # xc' from rolling, yc' from contact
    slip = np.array([vx - w * r[1], vy + w * r[0]])
    assert np.max(np.abs(slip)) < w * (max(a, b) * du + 8 * EPS * max(a, b))   # r's error above
    # exactly, with the analytic contact point (-rho', -rho): the same products, so 0
    r_exact = np.array([-er.rho_d1(th, a, b), -er.rho(th, a, b)])
    assert np.max(np.abs([vx - w * r_exact[1], vy + w * r_exact[0]])) == 0.0
    # the paper's eq. (8) (xc' - rho th' = 0) would leave the contact point slipping at 2 rho th'
    rr = er.rho(th, a, b)
    assert abs((rr * w) - w * r[1]) == pytest.approx(2 * rr * w, rel=dh / (2 * rr) + 4 * EPS)


def test_paper_initial_velocities_satisfy_the_corrected_rolling_constraint():
    # paper tables 1-4: (xc', yc', th') = (-0.5 a, 0, 0.5) at th = pi/2 and (-2.3 b, 0, 2.3) at 0
    for case, v_paper in (("circle", [-0.5, 0.0, 0.5]), ("case1", [-0.75, 0.0, 0.5]),
                          ("case3", [-2.3, 0.0, 2.3]), ("case5", [0.0, 0.0, 0.0])):
        p = er.build(case)
        # v0 = (-rho w0, rho' w0, w0): one or two roundings of each entry
        np.testing.assert_allclose(p.v0, v_paper, rtol=0, atol=2 * EPS * max(np.abs(v_paper)))
        r = p.system.velocity_residual(0.0, p.q0, p.v0)
        # the rows' residuals: ~3 roundings of their two terms (|xc'| + rho |th'| <= 2 |v|)
        assert np.max(np.abs(r)) <= 3 * EPS * 2 * np.abs(p.v0).max()
        assert abs(p.v0[0] - er.rho(p.q0[2], p.params["a"], p.params["b"]) * p.v0[2]) \
            == pytest.approx(2 * abs(p.v0[0]), rel=4 * EPS)  # paper's literal eq. (8) is violated


@pytest.mark.parametrize("a,b", [(1.5, 1.0), (0.7, 1.3), (1.0, 1.0)])
def test_arc_integral_against_quadrature(a, b):
    for th in (-6.5, -1.0, 0.0, 0.4, 1.9, 3.3, 7.2):
        exact, qerr = quad(lambda s: float(er.rho(s, a, b)), 0.0, th, epsabs=0.0,
                           epsrel=1e-13, limit=200)
        # QUADPACK's own error estimate, plus the rounding of max(a, b) (E(phi1) - E(phi2))
        # (a few eps of each incomplete elliptic integral, |E(phi | e)| <= |phi|)
        rnd = 8 * EPS * max(a, b) * (abs(th) + np.pi)
        assert float(er.arc_integral(th, a, b)) == pytest.approx(exact, abs=qerr + rnd)


# --------------------------------------------------------------------------- Jacobians
@pytest.mark.parametrize("rolling", ["velocity", "holonomic"])
def test_hand_written_rows_match_automatic_derivatives(rolling):
    kw = {k: GEN[k] for k in ("a", "b", "m", "g", "J", "fx", "fy", "tau", "xc0", "theta0")}
    hand = er.system(rolling=rolling, **kw)
    auto = er.system(rolling=rolling, auto=True, **kw)
    rng = np.random.default_rng(2)
    for _ in range(25):
        th = rng.uniform(-7, 7)
        q = np.array([rng.uniform(-3, 3), er.rho(th, GEN["a"], GEN["b"]), th])
        v = rng.normal(size=3) * 2.0
        hand.check(0.0, q, v)
        # (auto.check is not called at these random states: its finite-difference
        # cross-check of the automatic holonomic gamma misfires where gamma is small
        # -- reported as a library issue; complex-safety of rho is shown by the
        # agreement itself and by test_rho_derivatives_against_complex_step)
        Ah, bh = hand.rows(0.0, q, v)
        Aa, ba = auto.rows(0.0, q, v)
        # entries 1, rho, -rho': the complex step and the formula each round to ~8 eps of
        # (a^2 + b^2) / min(a, b) (as in test_rho_derivatives_against_complex_step)
        jac_tol = 16 * EPS * (GEN["a"] ** 2 + GEN["b"] ** 2) / min(GEN["a"], GEN["b"])
        np.testing.assert_allclose(Ah, Aa, rtol=0, atol=jac_tol)
        # the automatic holonomic gamma (4th-order difference of the complex step) is
        # accurate to 1e-10 of |gamma| + |Phi'| |(1, v)| (documented ~1e-11 in
        # gaussopt.model.constraints, tested at 1e-10 in test_constraints.py)
        scale = np.abs(bh) + np.abs(Ah @ v) * np.sqrt(1.0 + v @ v)
        assert np.all(np.abs(bh - ba) <= 1e-10 * scale)
        np.testing.assert_allclose(hand.velocity_rows(0.0, q, v), auto.velocity_rows(0.0, q, v),
                                   rtol=0, atol=jac_tol)
    # both rolling forms give the same acceleration rows (hand-written both: the same
    # formulas up to ~4 roundings)
    other = er.system(rolling="holonomic" if rolling == "velocity" else "velocity", **kw)
    np.testing.assert_allclose(other.rows(0.0, q, v)[0], Ah, rtol=0, atol=4 * EPS * np.abs(Ah).max())
    np.testing.assert_allclose(other.rows(0.0, q, v)[1], bh, rtol=8 * EPS, atol=0)


# --------------------------------------------------------------------------- the reference
@pytest.mark.parametrize("case", ["case1", "case3", "case5", "gen"])
def test_reduced_reference_conserves_energy_and_integrates_the_rolling_constraint(case):
    p = er.build("case3", **GEN) if case == "gen" else er.build(case)
    kw = ref_kw(p)
    t = np.linspace(0.0, 20.0, 4001)
    r = er.reference_solution(t, **kw)
    E = r["energy"]
    # E is a first integral of the reduced equation: reference_energy_error (both ends)
    assert np.ptp(E) < 2 * reference_energy_error(kw, r, 20.0), np.ptp(E)
    # xc from the integrated rolling constraint (incomplete elliptic integral): the state
    # errors of xc and theta (rho |d theta|), both below the reference's summed local
    # errors glob (no growth: xc + S(theta) is a first integral, its error a sum of local
    # errors weighted by (1, rho)), plus the rounding of S (8 eps max(a, b) |phi|)
    a, b, m, g, J = (kw[k] for k in ("a", "b", "m", "g", "J"))
    th = r["theta"]
    ymax = max(np.abs(th).max(), np.abs(r["omega"]).max(), np.abs(r["xc"]).max())
    glob = ref_steps(kw, 20.0) * 2 * np.sqrt(3) * 1e-13 * (1 + ymax)
    S = er.arc_integral(r["theta"], kw["a"], kw["b"]) - er.arc_integral(kw["theta0"], kw["a"], kw["b"])
    S_rnd = 8 * EPS * max(a, b) * (np.abs(th).max() + abs(kw["theta0"]) + 2 * np.pi)
    assert np.max(np.abs(r["xc"] - (kw["xc0"] - S))) < (1 + max(a, b)) * glob + S_rnd
    # and the system's energy function agrees with the reference's at the reference states
    # (two evaluations of the same E: 8 eps of its terms each)
    q = np.stack([r["xc"], r["yc"], r["theta"]], axis=1)
    v = np.stack([r["vx"], r["vy"], r["omega"]], axis=1)
    E_sys = np.array([p.system.energy(0.0, qi, vi) for qi, vi in zip(q, v)])
    rr, w = er.rho(th, a, b), r["omega"]
    terms = (0.5 * (m * (r["vx"] ** 2 + r["vy"] ** 2) + J * w * w) + m * g * (rr + b)
             + np.abs(kw["fx"] * r["xc"]) + np.abs(kw["fy"] * rr) + np.abs(kw["tau"] * th))
    assert np.all(np.abs(E_sys - E) <= 16 * EPS * terms)


def test_circle_reference_is_uniform_rolling():
    p = er.build("circle")
    t = np.linspace(0.0, 20.0, 201)
    r = p.reference(t)
    # For a circle rho' = rho'' = 0 exactly, so the reduced right-hand side is exactly
    # (w0, 0, -w0): each DOP853 step adds h w0 with a few roundings, and the dense output
    # rounds a few more: the error is rounding, (N + 1) 4 eps max|y| (N its steps)
    kw = ref_kw(p)
    rnd = (ref_steps(kw, 20.0) + 1) * 4 * EPS * (np.pi / 2 + 0.5 * 20.0)
    np.testing.assert_allclose(r["theta"], np.pi / 2 + 0.5 * t, rtol=0, atol=rnd)
    np.testing.assert_allclose(r["xc"], -0.5 * t, rtol=0, atol=rnd)
    # N = m (rho'' w^2 + rho' alpha) + m g: exactly m g
    np.testing.assert_allclose(r["normal_force"], 9.8, rtol=0, atol=2 * EPS * 9.8)


# --------------------------------------------------------------------------- default runs
@pytest.mark.parametrize("case", ["circle", "case1", "case3"])
def test_conservative_cases_match_reference_and_conserve_energy_20s(case):
    p, tr = run(case)
    assert tr.t[-1] == 20.0
    ref = p.reference(tr.t)
    out = p.outputs(tr.q, tr.v)
    bound = state_bound(p, tr)          # growth over 20 s: ~28 circle, ~350 case1, ~900 case3
    for k in ("theta", "xc", "yc"):
        err = np.max(np.abs(out[k] - ref[k]))
        assert err < bound, (k, err, bound)
    # normal force: the library's constraint force M a - F against the reduced dynamics
    N = er.contact_forces(tr)["normal"]
    assert np.max(np.abs(N - ref["normal_force"])) < normal_bound(p, tr, direct_tolerance(3, 2))
    # energy drift: E is a first integral, the local errors weighted by |grad E|_1 (never
    # amplified). Acceptance (a requirement): 1000x below the paper's ~1e-6 over 20 s.
    drift = np.max(np.abs(tr.energy_drift))
    assert drift < grad_energy(p, tr) * integration_bound(tr)
    assert drift < 1e-9
    pos, vel = residual_bounds(p, tr)
    assert np.all(tr.position_residual <= pos) and np.all(tr.velocity_residual <= vel)


def test_case2_is_case1_without_the_papers_stabilization():
    p1, p2 = er.build("case1"), er.build("case2")
    np.testing.assert_array_equal(p1.q0, p2.q0)
    np.testing.assert_array_equal(p1.v0, p2.v0)
    assert {k: v for k, v in p1.params.items() if k != "case"} \
        == {k: v for k, v in p2.params.items() if k != "case"}
    assert er.build("case2", baumgarte="paper", dt=0.01).settings["stabilization"] is None
    st = er.build("case1", baumgarte="paper", dt=0.01).settings["stabilization"]
    assert isinstance(st, go.Baumgarte) and (st.alpha, st.beta, st.gamma) == (10.0, 10.0, 10.0)


@pytest.mark.parametrize("case", ["case4", "case5", "gen"])
def test_forced_cases_match_reference_5s(case):
    # 5 s covers the sign change of the normal force (~3 s); 20 s is the slow test below
    p, tr = run("case3", t_end=5.0, **GEN) if case == "gen" else run(case, t_end=5.0)
    ref = p.reference(tr.t)
    out = p.outputs(tr.q, tr.v)
    bound = state_bound(p, tr)
    for k in ("theta", "xc", "yc"):
        err = np.max(np.abs(out[k] - ref[k]))
        assert err < bound, (k, err, bound)
    # the constant loads have a potential: E = T + V - Q_applied . q is a first integral
    dE = np.max(np.abs(tr.energy - tr.energy[0]))
    assert dE < grad_energy(p, tr) * integration_bound(tr), dE
    N = er.contact_forces(tr)["normal"]
    assert np.max(np.abs(N - ref["normal_force"])) < normal_bound(p, tr, direct_tolerance(3, 2))
    # the contact row's multiplier is the normal force (its Jacobian has 1 on yc): both
    # come from the same verified step; the multipliers solve A^T lam = M a - F, whose
    # part outside range(A^T) is the stationarity residual tau (|M|_F |a| + |F|)
    tau = direct_tolerance(3, 2)
    sysm = p.system
    for t, q, v, a, lam, n in zip(tr.t, tr.q, tr.v, tr.a, tr.multipliers, N):
        M, F = sysm.mass(t, q), sysm.force(t, q, v)
        A, _ = sysm.rows(t, q, v)
        res = tau * (np.linalg.norm(M) * np.linalg.norm(a) + np.linalg.norm(F))
        assert abs(lam[0] - n) <= multiplier_error_bound(A, M @ a - F, res, tau)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["case4", "case5"])
def test_forced_cases_match_reference_20s(case):
    p, tr = run(case)
    ref = p.reference(tr.t)
    # |theta| reaches ~290-360 rad and |theta'| ~30-45 rad/s; measured 2.4e-9 / 3.5e-9. The
    # derived bound is loose here: the local-error allowance rtol |theta| grows to ~4e-9 per
    # step over ~3000-4000 steps, and the growth along the motion is ~500-1400.
    err = np.max(np.abs(tr.q[:, 2] - ref["theta"]))
    assert err < state_bound(p, tr), err
    # E is a first integral: local errors weighted by |grad E|_1 (measured 2.3e-8 / 2.0e-8 J)
    dE = np.max(np.abs(tr.energy - tr.energy[0]))
    assert dE < grad_energy(p, tr) * integration_bound(tr), dE


def test_rolling_holonomic_form_matches_reference_and_keeps_xc_on_the_constraint():
    p = er.build("case3", rolling="holonomic", t_end=6.0)
    tr = p.simulate()
    assert tr.success, tr.message
    ref = p.reference(tr.t)
    bound = state_bound(p, tr)
    assert np.max(np.abs(tr.q[:, 2] - ref["theta"])) < bound
    assert np.max(np.abs(tr.q[:, 0] - ref["xc"])) < bound
    # the position residual now includes xc + S(theta) - const (projected like the contact)
    assert np.all(tr.position_residual <= residual_bounds(p, tr)[0])


# --------------------------------------------------------------------------- the paper's run
def test_papers_settings_reproduce_papers_error_levels():
    """Lagrange-I + Baumgarte (10, 10, 10), ode45-like RK45 output every 0.01 s.

    Paper 002 (case1, section 8.2): energy error ~1e-6, contact ~1e-7, rolling
    ~1e-6; without Baumgarte (8.3) contact ~1e-4, rolling ~1e-5. Measured
    (RK45 rtol 1e-6, atol 1e-9): 2.8e-6, 1.2e-7, 1.8e-6; without: 2.1e-5, 2.4e-5.
    """
    p = er.build("case1", baumgarte=(10, 10, 10), dt=0.01)
    tr = p.simulate("lagrange")
    assert tr.success, tr.message
    assert tr.t.size == 2001 and tr.t[1] == pytest.approx(0.01, rel=2 * EPS)   # linspace
    # The brackets below are the paper's reported levels (a decade either side), not error
    # bounds: the level is the truncation error of RK45 at rtol = 1e-6, ~1e10 times the
    # rounding, so it is the same on any machine up to far less than the decade.
    dE = np.max(np.abs(tr.energy_drift))
    assert 1e-7 < dE < 1e-5, dE
    assert 1e-8 < tr.position_residual.max() < 1e-6, tr.position_residual.max()
    assert 1e-7 < tr.velocity_residual.max() < 1e-5, tr.velocity_residual.max()
    # and the error spikes sit just before theta = k pi (short axis vertical, fastest passage)
    jumps = np.abs(np.diff(tr.energy))
    th = np.mod(tr.q[np.argsort(jumps)[-10:], 2], np.pi)
    # (where RK45's truncation error concentrates, a property of the motion; measured
    # within 0.24 rad, the bound is a fifth of the half turn)
    assert np.all(np.minimum(th, np.pi - th) < 0.35), th
    # the paper's case2: no stabilization -> far larger drift
    p2 = er.build("case2", baumgarte="paper", dt=0.01)
    tr2 = p2.simulate("lagrange")
    assert 1e-6 < tr2.position_residual.max() < 1e-3
    assert tr2.position_residual.max() > 30 * tr.position_residual.max()
    assert 1e-6 < tr2.velocity_residual.max() < 1e-4
    # acceptance (a requirement): ours (default settings) is more than 1000x better in energy
    _, ours = run("case1")
    assert np.max(np.abs(ours.energy_drift)) < 1e-3 * dE


# --------------------------------------------------------------------------- facts
def test_short_axis_rocking_is_two_percent_below_rolling_over():
    p = er.build("case3")
    a, b, m, g = (p.params[k] for k in ("a", "b", "m", "g"))
    E0 = p.system.energy(0.0, p.q0, p.v0)
    E_top = p.system.energy(0.0, np.array([0.0, a, np.pi / 2]), np.zeros(3))   # long axis up, at rest
    # m g (a - b): ~4 roundings of terms m g a, amplified by the cancellation a / (a - b)
    assert E_top == pytest.approx(m * g * (a - b), rel=8 * EPS * a / (a - b))
    margin = 1 - E0 / E_top
    assert 0.02 < margin < 0.023, margin                # 2.16 %: a physical fact, not a tolerance
    # turning angle from energy conservation: m g (rho(th) - b) = E0
    amp = brentq(lambda x: m * g * (er.rho(x, a, b) - b) - E0, 0.0, np.pi / 2, xtol=1e-15)
    assert amp == pytest.approx(1.40931, abs=0.5e-5 + 1e-15)   # literal rounded to 5 decimals
    t = np.linspace(0, 20, 4001)
    kw0 = ref_kw(p)
    r = er.reference_solution(t, **kw0)
    th = r["theta"]
    # At a turning point all energy is potential, so an energy error dE moves the amplitude
    # by dE / (m g rho'(amp)) (dE: reference_energy_error, + brentq's xtol). Between the
    # samples (dt = 5e-3) the maximum falls short by at most max|theta''| (dt/2)^2 / 2.
    V1 = m * g * er.rho_d1(amp, a, b)
    d_amp = reference_energy_error(kw0, r, 20.0) / V1 + 1e-15
    sag = np.abs(r["alpha"]).max() * (t[1] - t[0]) ** 2 / 8
    assert amp - sag - d_amp <= np.abs(th).max() <= amp + d_amp      # rocks, never rolls over
    # 1.2 % more speed (2.4 % more energy) and it rolls over
    kw = dict(ref_kw(p), omega0=1.012 * p.params["omega0"])
    assert np.abs(er.reference_solution(t, **kw)["theta"]).max() > np.pi
    # the default run rocks within the same amplitude: its energy error (the local errors
    # weighted by |grad E|_1) moves its turning points by at most that / (m g rho'(amp))
    _, tr = run("case3")
    assert np.abs(tr.q[:, 2]).max() <= amp + grad_energy(p, tr) * integration_bound(tr) / V1


@pytest.mark.parametrize("case,t_expected", [("case4", 3.0700), ("case5", 2.7837)])
def test_normal_force_turns_negative_after_about_3_s(case, t_expected):
    p, tr = run(case, t_end=5.0)
    tl = er.liftoff_time(p)
    assert tl == pytest.approx(t_expected, abs=0.5e-4)   # literal rounded to 4 decimals
    N = er.contact_forces(tr)["normal"]
    # N falls through 0 at |N'| ~ 10 N/s: 1e-3 s before the root it is ~1e-2 N, above its
    # error normal_bound (~1e-3 N), so it is still positive there
    nb = normal_bound(p, tr, direct_tolerance(3, 2))
    Nr = er.reference_solution([tl - 1e-4, tl + 1e-4], **ref_kw(p))["normal_force"]
    assert nb < abs(Nr[1] - Nr[0]) / 2e-4 * 1e-3
    assert np.all(N[tr.t < tl - 1e-3] > 0)
    assert np.any(N[tr.t > tl] < 0)
    # the sign change of the simulated normal force brackets the reference's, up to the
    # time an error nb of N moves a root: nb / |N'| (a sample may fall that close to it;
    # in fact N errs by ~1e-9 N)
    slope = abs(Nr[1] - Nr[0]) / 2e-4
    i = np.flatnonzero((N[:-1] > 0) & (N[1:] <= 0))[0]
    assert tr.t[i] - nb / slope <= tl <= tr.t[i + 1] + nb / slope


def test_unilateral_contact_lifts_off_where_the_bilateral_force_vanishes():
    # start from the reference state at t = 2.6 s (case4) to keep the QP run short
    p = er.build("case4")
    t_s = 2.6
    r = er.reference_solution([t_s], **ref_kw(p))
    start = dict(theta0=float(r["theta"][0]), omega0=float(r["omega"][0]),
                 xc0=float(r["xc"][0]))
    tl = er.liftoff_time(p) - t_s
    pu = er.build("case4", unilateral=True, t_end=0.8, **start)
    with pytest.raises(UnsupportedConstraintError, match="qp"):
        pu.simulate("closed_form")
    tr = pu.simulate("qp", rtol=1e-10, atol=1e-10)
    assert tr.success, tr.message
    a, b = p.params["a"], p.params["b"]
    gap = tr.q[:, 1] - er.rho(tr.q[:, 2], a, b)
    before = tr.t < tl
    ref = er.reference_solution(tr.t[before] + t_s, **ref_kw(p))
    # While the contact holds the motion is the bilateral one: integration_bound with the
    # growth along the reference from the start state, and the reference's error; the QP's
    # accelerations err by step_error_bound at its verified 1e-12 (the active contact row
    # taken as an equality), which perturbs theta by growth (t + t^2/2) max da.
    sysm = pu.system
    da = 0.0
    for t, q, v, acc in zip(tr.t[before], tr.q[before], tr.v[before], tr.a[before]):
        A, bb = sysm.rows(t, q, v)
        Gi, h = sysm.inequality_rows(t, q, v)
        da = max(da, step_error_bound(sysm.mass(t, q), sysm.force(t, q, v), np.vstack([A, Gi]),
                                      np.concatenate([bb, h]), acc, QP_TOLERANCE))
    G_b = growth(pu, tr.t[before])
    theta_bound = integration_bound(tr, G_b, ref_tol=1e-13) + G_b * (tl + tl**2 / 2) * da
    assert np.max(np.abs(tr.q[before, 2] - ref["theta"])) < theta_bound
    # the gap is held at the acceleration level only (with its own stabilizing term), so it
    # drifts by the local errors of yc and theta: |grad gap| (1 + max|rho'|) times them
    gap_bound = (1 + np.abs(er.rho_d1(tr.q[:, 2], a, b)).max()) * integration_bound(tr)
    assert np.max(np.abs(gap[before])) < gap_bound
    # after t_l the gap grows like c (t - t_l)^3 (c ~ 1.7 m/s^3, set by the reference's
    # dN/dt = -11.6 N/s at t_l): from t_l + 0.01 on it is above ~1.7e-6 > gap_bound (~3e-7),
    # so the disk has left the floor at t_l (not before: the gap stays below gap_bound)
    assert np.all(gap[tr.t > tl + 0.01] > gap_bound)
    assert gap[-1] > 1e-3                              # 3.5e-3 after 0.33 s of flight
    # a unilateral contact never pulls: the exact normal force is >= 0, the recomputed
    # M a - F errs by force_error_bound of the verified QP step
    dQ = max(force_error_bound(sysm.mass(t, q), sysm.force(t, q, v), acc, da)
             for t, q, v, acc in zip(tr.t, tr.q, tr.v, tr.a))
    assert er.contact_forces(tr)["normal"].min() >= -dQ


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kwargs,match", [
    (dict(case="case9"), "`case`"),
    (dict(a=-1.0), "`a` must be positive"),
    (dict(m=0.0), "`m` must be positive"),
    (dict(g=-9.8), "`g` must be >= 0"),
    (dict(baumgarte=(1.0, 2.0)), "`baumgarte`"),
    (dict(baumgarte="strong"), "`baumgarte`"),
    (dict(dt=0.03), "divide"),
    (dict(dt=-0.01), "`dt`"),
    (dict(dt=0.01, integrator="euler"), "`integrator`"),
    (dict(foo=1.0), "unknown parameter"),
    (dict(rolling="paper"), "`rolling`"),
    (dict(unilateral=True, rolling="holonomic"), "unilateral"),
    (dict(unilateral=True, baumgarte="paper"), "unilateral"),
    (dict(t_end=0.0), "`t_end`"),
    (dict(omega0=float("nan")), "`omega0`"),
])
def test_build_errors(kwargs, match):
    with pytest.raises(ModelError, match=match):
        er.build(**kwargs)


def test_contact_forces_rejects_foreign_trajectory():
    tr = go.simulate(go.System(("x",), mass=[[1.0]]), (0.0, 0.1), [0.0], [1.0])
    with pytest.raises(ModelError, match="constraint_force"):
        er.contact_forces(tr)


def test_symbolic_model_matches_handwritten_rows():
    """The default system is derived from the Lagrangian (gaussopt.symbolic); the
    hand-written rows agree at random states (parameters != 1)."""
    from gaussopt_problems import ellipse_rolling as er

    kw = dict(a=1.3, b=0.7, m=1.7, fx=0.4, fy=-0.3, tau=0.25)
    sym, hand = er.system(**kw), er.system(derivation="hand", **kw)
    rng = np.random.default_rng(11)
    for _ in range(25):
        t, q, v = 0.0, rng.uniform(-3, 3, 3), rng.uniform(-3, 3, 3)
        # m, J = m (a^2 + b^2) / 4, the loads: up to 4 roundings
        np.testing.assert_allclose(sym.mass(t, q), hand.mass(t, q), rtol=4 * EPS)
        np.testing.assert_allclose(sym.force(t, q, v), hand.force(t, q, v), rtol=4 * EPS)
        A, b = sym.rows(t, q, v)
        Ah, bh = hand.rows(t, q, v)
        # exact formulas for 1, rho, rho' (as in test_rho_derivatives_against_complex_step:
        # 16 eps of (a^2 + b^2) / min(a, b)) and gamma = (rho'' w^2, -rho' w^2) (32 eps of
        # (a^2 + b^2 + rho'^2) / rho times w^2)
        a_, b_ = kw["a"], kw["b"]
        np.testing.assert_allclose(A, Ah, rtol=0, atol=16 * EPS * (a_**2 + b_**2) / min(a_, b_))
        r, r1 = er.rho(q[2], a_, b_), er.rho_d1(q[2], a_, b_)
        np.testing.assert_allclose(b, bh, rtol=0,
                                   atol=32 * EPS * (a_**2 + b_**2 + r1**2) / r * v[2] ** 2)
