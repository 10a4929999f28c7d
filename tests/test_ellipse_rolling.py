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

Tolerances (measured values in brackets, DOP853 at 1e-11 + Projection):
theta within 1e-8 of the reference [1.1e-11 case1, 3.2e-10 case3 over 20 s,
2.4e-9 / 3.5e-9 for the forced cases 4 / 5 where theta reaches ~300 rad];
energy drift below 1e-9 J over 20 s for the conservative cases
[3.5e-11 case1, 2.6e-11 case3, 0 circle] -- the paper reports ~1e-6.
Normal force (the library's ``M a - F`` against the reduced dynamics) within
1e-8 of max(m g, |N|) [5.5e-9 N of 16 N for case3, which carries the 3e-10 rad
state error; 2e-10 .. 2.6e-9 N elsewhere].
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
from gaussopt.exceptions import ModelError, UnsupportedConstraintError
from problems import ellipse_rolling as er

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


def kinetic(p: go.Problem, tr: go.Trajectory) -> np.ndarray:
    """Kinetic energy along a run: the scale of the energy error when E(0) ~ 0."""
    m, J = p.params["m"], p.params["J"]
    return 0.5 * (m * (tr.v[:, 0] ** 2 + tr.v[:, 1] ** 2) + J * tr.v[:, 2] ** 2)


def ref_kw(p: go.Problem) -> dict:
    return {k: p.params[k] for k in REF_KEYS}


# --------------------------------------------------------------------------- geometry
@pytest.mark.parametrize("a,b", [(1.5, 1.0), (0.7, 1.3)])
def test_rho_derivatives_against_complex_step(a, b):
    th = np.linspace(-4.0, 4.0, 81) + 0.0123
    h = 1e-30
    d1 = er.rho(th + 1j * h, a, b).imag / h
    d2 = er.rho_d1(th + 1j * h, a, b).imag / h
    assert np.max(np.abs(er.rho_d1(th, a, b) - d1)) < 1e-14 * max(a, b) ** 2
    assert np.max(np.abs(er.rho_d2(th, a, b) - d2)) < 1e-13 * max(a, b) ** 2
    # rho + rho'' is the radius of curvature at the contact: a^2/b at theta = 0 (contact at
    # the end of the e2 semi-axis b), b^2/a at theta = pi/2 (end of the e1 semi-axis a)
    assert er.rho(0.0, a, b) + er.rho_d2(0.0, a, b) == pytest.approx(a * a / b, rel=1e-14)
    assert er.rho(np.pi / 2, a, b) + er.rho_d2(np.pi / 2, a, b) == pytest.approx(b * b / a, rel=1e-13)


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
    assert r[1] == pytest.approx(-er.rho(th, a, b), abs=1e-12)
    assert r[0] == pytest.approx(-er.rho_d1(th, a, b), abs=1e-6)   # flat minimum: u to ~1e-6
    # material velocity of the contact point, v_c + w e_z x r, on the constraints
    w = 0.83
    vx, vy = -er.rho(th, a, b) * w, er.rho_d1(th, a, b) * w        # xc' from rolling, yc' from contact
    slip = np.array([vx - w * r[1], vy + w * r[0]])
    assert np.max(np.abs(slip)) < 1e-5 * w          # limited by r[0] above
    # exactly, with the analytic contact point (-rho', -rho):
    r_exact = np.array([-er.rho_d1(th, a, b), -er.rho(th, a, b)])
    assert np.max(np.abs([vx - w * r_exact[1], vy + w * r_exact[0]])) < 1e-15
    # the paper's eq. (8) (xc' - rho th' = 0) would leave the contact point slipping at 2 rho th'
    assert abs((er.rho(th, a, b) * w) - w * r[1]) == pytest.approx(2 * er.rho(th, a, b) * w, rel=1e-12)


def test_paper_initial_velocities_satisfy_the_corrected_rolling_constraint():
    # paper tables 1-4: (xc', yc', th') = (-0.5 a, 0, 0.5) at th = pi/2 and (-2.3 b, 0, 2.3) at 0
    for case, v_paper in (("circle", [-0.5, 0.0, 0.5]), ("case1", [-0.75, 0.0, 0.5]),
                          ("case3", [-2.3, 0.0, 2.3]), ("case5", [0.0, 0.0, 0.0])):
        p = er.build(case)
        np.testing.assert_allclose(p.v0, v_paper, rtol=0, atol=1e-15)
        r = p.system.velocity_residual(0.0, p.q0, p.v0)
        assert np.max(np.abs(r)) < 1e-15
        assert abs(p.v0[0] - er.rho(p.q0[2], p.params["a"], p.params["b"]) * p.v0[2]) \
            == pytest.approx(2 * abs(p.v0[0]))     # paper's literal eq. (8) is violated


@pytest.mark.parametrize("a,b", [(1.5, 1.0), (0.7, 1.3), (1.0, 1.0)])
def test_arc_integral_against_quadrature(a, b):
    for th in (-6.5, -1.0, 0.0, 0.4, 1.9, 3.3, 7.2):
        exact, _ = quad(lambda s: float(er.rho(s, a, b)), 0.0, th, epsabs=0.0, epsrel=1e-13,
                        limit=200)
        assert float(er.arc_integral(th, a, b)) == pytest.approx(exact, rel=1e-12, abs=1e-13)


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
        np.testing.assert_allclose(Ah, Aa, rtol=0, atol=1e-14 * max(1.0, np.abs(Ah).max()))
        # the automatic holonomic gamma is a 4th-order difference of the complex step: ~1e-11
        scale = max(1.0, float(v @ v))
        np.testing.assert_allclose(bh, ba, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(hand.velocity_rows(0.0, q, v), auto.velocity_rows(0.0, q, v),
                                   rtol=0, atol=1e-14 * max(1.0, np.abs(Ah).max()))
    # both rolling forms give the same acceleration rows
    other = er.system(rolling="holonomic" if rolling == "velocity" else "velocity", **kw)
    np.testing.assert_allclose(other.rows(0.0, q, v)[0], Ah, rtol=0, atol=1e-15)
    np.testing.assert_allclose(other.rows(0.0, q, v)[1], bh, rtol=0, atol=1e-14 * scale)


# --------------------------------------------------------------------------- the reference
@pytest.mark.parametrize("case", ["case1", "case3", "case5", "gen"])
def test_reduced_reference_conserves_energy_and_integrates_the_rolling_constraint(case):
    p = er.build("case3", **GEN) if case == "gen" else er.build(case)
    kw = ref_kw(p)
    t = np.linspace(0.0, 20.0, 4001)
    r = er.reference_solution(t, **kw)
    E = r["energy"]
    T = 0.5 * (kw["m"] * (r["vx"] ** 2 + r["vy"] ** 2) + kw["J"] * r["omega"] ** 2)
    assert np.ptp(E) < 1e-10 * max(1.0, T.max()), (np.ptp(E), T.max())
    # xc from the integrated rolling constraint (incomplete elliptic integral)
    S = er.arc_integral(r["theta"], kw["a"], kw["b"]) - er.arc_integral(kw["theta0"], kw["a"], kw["b"])
    assert np.max(np.abs(r["xc"] - (kw["xc0"] - S))) < 1e-11 * max(1.0, np.abs(r["xc"]).max())
    # and the system's energy function agrees with the reference's at the reference states
    q = np.stack([r["xc"], r["yc"], r["theta"]], axis=1)
    v = np.stack([r["vx"], r["vy"], r["omega"]], axis=1)
    E_sys = np.array([p.system.energy(0.0, qi, vi) for qi, vi in zip(q, v)])
    np.testing.assert_allclose(E_sys, E, rtol=1e-13, atol=1e-12)


def test_circle_reference_is_uniform_rolling():
    p = er.build("circle")
    t = np.linspace(0.0, 20.0, 201)
    r = p.reference(t)
    np.testing.assert_allclose(r["theta"], np.pi / 2 + 0.5 * t, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r["xc"], -0.5 * t, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r["normal_force"], 9.8, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- default runs
@pytest.mark.parametrize("case", ["circle", "case1", "case3"])
def test_conservative_cases_match_reference_and_conserve_energy_20s(case):
    p, tr = run(case)
    assert tr.t[-1] == 20.0
    ref = p.reference(tr.t)
    out = p.outputs(tr.q, tr.v)
    for k in ("theta", "xc", "yc"):
        err = np.max(np.abs(out[k] - ref[k]))
        assert err < 1e-8, (k, err)
    # normal force: the library's constraint force M a - F against the reduced dynamics
    N = er.contact_forces(tr)["normal"]
    scale = max(p.params["m"] * p.params["g"], np.abs(N).max())
    assert np.max(np.abs(N - ref["normal_force"])) < 1e-8 * scale
    # acceptance: energy drift over 20 s at least 1000x below the paper's ~1e-6
    assert np.max(np.abs(tr.energy_drift)) < 1e-9
    assert tr.position_residual.max() < 1e-11 and tr.velocity_residual.max() < 1e-11


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
    for k in ("theta", "xc", "yc"):
        err = np.max(np.abs(out[k] - ref[k]))
        assert err < 1e-8, (k, err)
    # the constant loads have a potential: E = T + V - Q_applied . q is conserved
    dE = np.max(np.abs(tr.energy - tr.energy[0]))
    assert dE < 1e-10 * max(1.0, kinetic(p, tr).max()), dE
    N = er.contact_forces(tr)["normal"]
    scale = p.params["m"] * p.params["g"]
    assert np.max(np.abs(N - ref["normal_force"])) < 1e-8 * max(scale, np.abs(N).max())
    # the contact row's multiplier is the normal force (its Jacobian has 1 on yc)
    np.testing.assert_allclose(tr.multipliers[:, 0], N, rtol=1e-12, atol=1e-12 * np.abs(N).max())


@pytest.mark.slow
@pytest.mark.parametrize("case", ["case4", "case5"])
def test_forced_cases_match_reference_20s(case):
    p, tr = run(case)
    ref = p.reference(tr.t)
    # |theta| reaches ~290-360 rad and |theta'| ~30-45 rad/s; measured 2.4e-9 / 3.5e-9
    err = np.max(np.abs(tr.q[:, 2] - ref["theta"]))
    assert err < 1e-8, err
    dE = np.max(np.abs(tr.energy - tr.energy[0]))
    assert dE < 1e-10 * kinetic(p, tr).max(), dE      # measured 2.3e-8 / 2.0e-8 J at T ~ 1e3 J


def test_rolling_holonomic_form_matches_reference_and_keeps_xc_on_the_constraint():
    p = er.build("case3", rolling="holonomic", t_end=6.0)
    tr = p.simulate()
    assert tr.success, tr.message
    ref = p.reference(tr.t)
    assert np.max(np.abs(tr.q[:, 2] - ref["theta"])) < 1e-8
    assert np.max(np.abs(tr.q[:, 0] - ref["xc"])) < 1e-8
    # the position residual now includes xc + S(theta) - const
    assert tr.position_residual.max() < 1e-12


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
    assert tr.t.size == 2001 and tr.t[1] == pytest.approx(0.01)
    dE = np.max(np.abs(tr.energy_drift))
    assert 1e-7 < dE < 1e-5, dE
    assert 1e-8 < tr.position_residual.max() < 1e-6, tr.position_residual.max()
    assert 1e-7 < tr.velocity_residual.max() < 1e-5, tr.velocity_residual.max()
    # and the error spikes sit just before theta = k pi (short axis vertical, fastest passage)
    jumps = np.abs(np.diff(tr.energy))
    th = np.mod(tr.q[np.argsort(jumps)[-10:], 2], np.pi)
    assert np.all(np.minimum(th, np.pi - th) < 0.35), th
    # the paper's case2: no stabilization -> far larger drift
    p2 = er.build("case2", baumgarte="paper", dt=0.01)
    tr2 = p2.simulate("lagrange")
    assert 1e-6 < tr2.position_residual.max() < 1e-3
    assert tr2.position_residual.max() > 30 * tr.position_residual.max()
    assert 1e-6 < tr2.velocity_residual.max() < 1e-4
    # ours (default settings) is more than 1000x better in energy
    _, ours = run("case1")
    assert np.max(np.abs(ours.energy_drift)) < 1e-3 * dE


# --------------------------------------------------------------------------- facts
def test_short_axis_rocking_is_two_percent_below_rolling_over():
    p = er.build("case3")
    a, b, m, g = (p.params[k] for k in ("a", "b", "m", "g"))
    E0 = p.system.energy(0.0, p.q0, p.v0)
    E_top = p.system.energy(0.0, np.array([0.0, a, np.pi / 2]), np.zeros(3))   # long axis up, at rest
    assert E_top == pytest.approx(m * g * (a - b))
    margin = 1 - E0 / E_top
    assert 0.02 < margin < 0.023, margin                # 2.16 %
    # turning angle from energy conservation: m g (rho(th) - b) = E0
    amp = brentq(lambda x: m * g * (er.rho(x, a, b) - b) - E0, 0.0, np.pi / 2, xtol=1e-15)
    assert amp == pytest.approx(1.40931, abs=1e-5)
    t = np.linspace(0, 20, 4001)
    th = er.reference_solution(t, **ref_kw(p))["theta"]
    assert amp - 1e-3 < np.abs(th).max() <= amp + 1e-12      # rocks, never rolls over
    # 1.2 % more speed (2.4 % more energy) and it rolls over
    kw = dict(ref_kw(p), omega0=1.012 * p.params["omega0"])
    assert np.abs(er.reference_solution(t, **kw)["theta"]).max() > np.pi
    # the default run rocks within the same amplitude
    _, tr = run("case3")
    assert np.abs(tr.q[:, 2]).max() <= amp + 1e-9


@pytest.mark.parametrize("case,t_expected", [("case4", 3.0700), ("case5", 2.7837)])
def test_normal_force_turns_negative_after_about_3_s(case, t_expected):
    p, tr = run(case, t_end=5.0)
    tl = er.liftoff_time(p)
    assert tl == pytest.approx(t_expected, abs=1e-4)
    N = er.contact_forces(tr)["normal"]
    assert np.all(N[tr.t < tl - 1e-3] > 0)
    assert np.any(N[tr.t > tl] < 0)
    # the sign change of the simulated normal force brackets the reference's
    i = np.flatnonzero((N[:-1] > 0) & (N[1:] <= 0))[0]
    assert tr.t[i] <= tl <= tr.t[i + 1]


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
    assert np.max(np.abs(tr.q[before, 2] - ref["theta"])) < 1e-8
    assert np.max(np.abs(gap[before])) < 1e-10
    t_sep = tr.t[np.flatnonzero(gap > 1e-8)[0]]
    assert tl < t_sep < tl + 0.01                      # gap grows like (t - t_l)^3
    assert gap[-1] > 1e-3                              # 3.5e-3 after 0.33 s of flight
    # a unilateral contact never pulls
    assert er.contact_forces(tr)["normal"].min() > -1e-8


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
    from problems import ellipse_rolling as er

    kw = dict(a=1.3, b=0.7, m=1.7, fx=0.4, fy=-0.3, tau=0.25)
    sym, hand = er.system(**kw), er.system(derivation="hand", **kw)
    rng = np.random.default_rng(11)
    for _ in range(25):
        t, q, v = 0.0, rng.uniform(-3, 3, 3), rng.uniform(-3, 3, 3)
        np.testing.assert_allclose(sym.mass(t, q), hand.mass(t, q), rtol=1e-15)
        np.testing.assert_allclose(sym.force(t, q, v), hand.force(t, q, v), rtol=1e-15)
        A, b = sym.rows(t, q, v)
        Ah, bh = hand.rows(t, q, v)
        np.testing.assert_allclose(A, Ah, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(b, bh, rtol=1e-12, atol=1e-14)
