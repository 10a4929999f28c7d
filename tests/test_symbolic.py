"""Tests of gaussopt.symbolic: sympy Lagrangian + constraints -> System.

Every derived piece is checked against an independent reference: a
hand-written System (paper 001's four-bar), the complex-step rows of a
hand-built System and 40-digit numerical derivatives (paper 002's rolling
ellipse), hand-derived rows and Christoffel terms (Appell-Hamel, double
pendulum), sympy.physics.mechanics (LagrangesMethod, KanesMethod), sympy's own
evaluation of the unsimplified expressions, analytic motions (bead on a
rotating wire, Appell-Hamel, constant-speed particle, damped oscillator,
inclined line) and reduced minimal-coordinate ODEs integrated with solve_ivp
at rtol = atol = 1e-12 (pendulum on a moving support). The double pendulum in
Cartesian coordinates (two rods as holonomic constraints) is compared with the
same pendulum in joint angles (no constraints). No parameter equals 1.

Tolerances and why (derived, never fitted to a measured error):

* pieces against hand-written formulas: c eps relative, c counted from the
  roundings of both evaluations (both exact formulas in double precision;
  measured 0 to 4e-16);
* rows against complex-step / 4th-order-difference rows: 1e-10 of the
  difference formula's error scale |gamma| + |Phi'| |(1, v)| (documented ~1e-11
  in gaussopt.model.constraints, tested at 1e-10 in test_constraints.py; measured
  1.5e-13);
* motions integrated with DOP853 at rtol = atol = 1e-12 against analytic or
  reduced solutions: test_trajectory.integration_bound (the sum of the local
  errors the run admits, times the growth of errors along the exact motion,
  test_trajectory.flow_growth); invariants (speed, energy) the local errors
  weighted by the invariant's gradient (no growth); constraint residuals the
  projection's target plus the rounding of the constraint.

The measured values are in comments at some assertions (this machine, shared
2 cores, gaussopt 0.1.0). The whole file runs in ~15-20 s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp
from sympy.physics.mechanics import dynamicsymbols

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.symbolic import SymbolicModel, from_lagrangian, from_mechanics
from gaussopt_problems import four_bar
from gaussopt_problems import second_order_particle as sop
from test_step_properties import direct_tolerance, step_error_bound
from test_trajectory import EPS, energy_gradient, flow_growth, integration_bound

t = dynamicsymbols._t
G = 9.8


def D(x, k=1):
    return x.diff(t, k)


def rel_err(a, b):
    """max |a - b| / max |b| (b nonzero), per array."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def random_states(n, count=20, seed=0, qscale=3.0, vscale=4.0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield rng.uniform(-3, 3), rng.uniform(-qscale, qscale, n), rng.uniform(-vscale, vscale, n)


def gamma_scale(A, v, q) -> float:
    """Size of the terms of a convective term gamma (quadratic in v, coefficients of the
    size of the Jacobian's entries times (1 + |q|)): the scale of its rounding."""
    return float(np.abs(A).max() * (1 + np.abs(q).max()) * (v @ v))


def ivp_reference_steps(fun, t_end, y0, rtol=1e-12):
    """Steps of a solve_ivp DOP853 reference run (at most nfev / 12)."""
    sol = solve_ivp(fun, (0.0, t_end), y0, method="DOP853", rtol=rtol, atol=rtol)
    return sol.nfev // 12 + 1


def run(system, t_end, q0, v0, n_eval=201, **kw):
    kw.setdefault("rtol", 1e-12)
    kw.setdefault("atol", 1e-12)
    tr = go.simulate(system, (0.0, t_end), q0, v0, t_eval=np.linspace(0.0, t_end, n_eval), **kw)
    assert tr.success, tr.message
    return tr


# =========================================================================== four-bar (paper 001)
def four_bar_model(modules: str = "math") -> tuple[SymbolicModel, tuple]:
    th1, th2, th3 = q = dynamicsymbols("th1 th2 th3")
    m, l, g, psi = sp.symbols("m l g psi")
    T = sp.Rational(1, 2) * (4 * m * l**2 / 3) * D(th1)**2 + sp.Rational(1, 2) * (m * l**2 / 3) * D(th2)**2
    V = m * g * l * (sp.Rational(3, 2) * sp.sin(th1) + sp.sin(th2) / 2)
    model = SymbolicModel(q, T, V, forces=[psi, 0, 0],
                          holonomic=[l * sp.sin(th1) - l * sp.sin(th2), th1 + th3 - sp.pi],
                          name="four_bar", modules=modules)
    return model, (m, l, g, psi)


@pytest.mark.parametrize("modules", ["math", "numpy"])
def test_four_bar_matches_hand_written_system(modules):
    model, (m, l, g, psi) = four_bar_model(modules)
    sym = model.system({m: 12, l: 2, g: 9.8, psi: 450})
    ref = four_bar.system_handwritten()
    # T has no th3' term: the mass matrix is singular, and constant -> passed as an array
    assert sym.constant_mass is not None
    np.testing.assert_array_equal(sym.constant_mass, np.diag([64.0, 16.0, 0.0]))
    worst = 0.0
    for tt, qq, vv in random_states(3, qscale=4.0, vscale=5.0):
        A, b = sym.rows(tt, qq, vv)
        Ar, br = ref.rows(tt, qq, vv)
        # the same closed forms, possibly in another order: each entry a few roundings
        # (products of at most 4 factors, sums of 2 terms): 16 eps of the terms (relative to
        # the largest entry; gamma's terms l |sin| v^2 measured by gamma_scale)
        errs = [rel_err(sym.mass(tt, qq), ref.mass(tt, qq)),
                rel_err(sym.force(tt, qq, vv), ref.force(tt, qq, vv)),
                rel_err(A, Ar), float(np.abs(b - br).max()) / gamma_scale(Ar, vv, qq)]
        worst = max(worst, *errs)
    assert worst < 16 * EPS, worst  # measured 0 (identical formulas)
    # the holonomic rows are scleronomic: no t derivative is compiled
    assert sym.holonomic[0].rheonomic is False


def test_four_bar_simulation_matches_reduced_reference():
    model, (m, l, g, psi) = four_bar_model()
    sym = model.system({m: 12, l: 2, g: 9.8, psi: 450})
    pb = four_bar.build(t_end=1.0)
    tr = run(sym, 1.0, pb.q0, pb.v0, rtol=1e-10, atol=1e-10, stabilization=go.Projection())
    th_ref, _ = four_bar.reference(tr.t)
    # the crank passes th1 = pi/2 (a singular position) at t = 0.58 s; measured 4.3e-10
    # (integrated at rtol = atol = 1e-10, the problem's own settings). integration_bound
    # (dense output) with the growth of the reduced (th1, th1') flow, and the reference's
    growth = flow_growth(lambda y, ts: np.asarray(four_bar.reference(ts, th0=y[0], w0=y[1])),
                         [np.pi / 3, 0.0], tr.t)
    assert np.max(np.abs(tr.q[:, 0] - th_ref)) < integration_bound(tr, growth, dense=True,
                                                                   ref_tol=1e-13)


# =========================================================================== rolling ellipse (paper 002)
def ellipse_model() -> tuple[SymbolicModel, tuple]:
    xc, yc, th = q = dynamicsymbols("xc yc th")
    m, a, b, g = sp.symbols("m a b g", positive=True)
    J = m * (a**2 + b**2) / 4
    rho = sp.sqrt(a**2 * sp.sin(th)**2 + b**2 * sp.cos(th)**2)
    model = SymbolicModel(q, T=m / 2 * (D(xc)**2 + D(yc)**2) + J / 2 * D(th)**2, V=m * g * yc,
                          holonomic=[yc - rho], nonholonomic=[D(xc) + rho * D(th)], name="ellipse")
    return model, (m, a, b, g)


def ellipse_by_hand(a, b, m, g=G) -> go.System:
    """Hand-built, with automatic (complex-step) Jacobians and gammas."""
    J = m * (a**2 + b**2) / 4

    def rho(th):
        return np.sqrt(a**2 * np.sin(th)**2 + b**2 * np.cos(th)**2)

    return go.System(("xc", "yc", "th"), mass=np.diag([m, m, J]), force=[0.0, -m * g, 0.0],
                     constraints=[go.Holonomic(lambda t, q: np.array([q[1] - rho(q[2])])),
                                  go.Nonholonomic(lambda t, q, v: np.array([v[0] + rho(q[2]) * v[2]]))],
                     energy=lambda t, q, v: 0.5 * (m * (v[0]**2 + v[1]**2) + J * v[2]**2) + m * g * q[1])


@pytest.mark.parametrize("a_, b_", [(1.5, 1.0), (1.3, 0.7)])
def test_rolling_ellipse_rows_match_complex_step(a_, b_):
    """Rows against the automatic rows of a hand-built System, and gamma against
    40-digit numerical differentiation (mpmath) of rho(theta).

    The automatic holonomic gamma (4th-order difference of a complex-step
    derivative) is accurate to ~1e-11 of the scale ``|gamma| + |Phi'| |(1, v)|``
    (gaussopt.model.constraints), not of ``|gamma|``: at a state with a small th'
    (gamma ~ 2e-6 here) it is off by 1e-7 *relative*, while the symbolic gamma
    is exact there to 2e-16. So the comparison with it is scaled that way.
    """
    import mpmath as mp
    model, (m, a, b, g) = ellipse_model()
    sym = model.system({m: 1.7, a: a_, b: b_, g: G})
    ref = ellipse_by_hand(a_, b_, 1.7)
    mp.mp.dps = 40

    def rho(th):
        return mp.sqrt(mp.mpf(a_)**2 * mp.sin(th)**2 + mp.mpf(b_)**2 * mp.cos(th)**2)

    worst_A = worst_b = worst_exact = 0.0
    for tt, qq, vv in random_states(3, seed=1):
        A, bb = sym.rows(tt, qq, vv)
        Ar, br = ref.rows(tt, qq, vv)
        worst_A = max(worst_A, rel_err(A, Ar))
        speed = float(np.linalg.norm(vv))
        scale = np.abs(br) + np.linalg.norm(Ar, axis=1) * speed * math.hypot(1.0, speed)
        worst_b = max(worst_b, float(np.max(np.abs(bb - br) / scale)))
        # exact: gamma_hol = rho''(th) th'^2, gamma_nonhol = -rho'(th) th'^2
        th, w = mp.mpf(qq[2]), mp.mpf(vv[2])
        exact = [float(mp.diff(rho, th, 2) * w**2), float(-mp.diff(rho, th) * w**2)]
        worst_exact = max(worst_exact, float(np.max(np.abs(bb - exact) / np.abs(exact))))
        # m, m g, J = m (a^2 + b^2) / 4: up to 4 roundings
        assert rel_err(sym.mass(tt, qq), ref.mass(tt, qq)) <= 4 * EPS
        assert rel_err(sym.force(tt, qq, vv), ref.force(tt, qq, vv)) <= 4 * EPS
    # complex step: exact Jacobians (entries 1 and rho' = (a^2 - b^2) sin cos / rho), up to
    # ~8 roundings on each side of terms (a^2 + b^2) / (2 min(a, b)) (measured 2e-16)
    assert worst_A < 16 * EPS * (a_ ** 2 + b_ ** 2) / (2 * min(a_, b_) ** 2), worst_A
    # the automatic gamma's documented accuracy on its scale (measured 1.5e-13)
    assert worst_b < 1e-10, worst_b
    # the symbolic gamma (rho'' w^2, -rho' w^2) against 40 digits: ~16 roundings, amplified
    # by the cancellation (a^2 + b^2) / |a^2 - b^2| in rho'' (measured 7e-16 per entry)
    assert worst_exact < 16 * EPS * (a_ ** 2 + b_ ** 2) / abs(a_ ** 2 - b_ ** 2), worst_exact


def test_rolling_ellipse_conserves_energy():
    # a scleronomic, conservative system: T + V is constant on the exact motion
    model, (m, a, b, g) = ellipse_model()
    sym = model.system({m: 1.7, a: 1.5, b: 1.0, g: G})
    q0 = np.array([0.0, 1.5, np.pi / 2])  # on the long axis's end: rho(pi/2) = a
    v0 = np.array([-0.5 * 1.5, 0.0, 0.5])
    tr = run(sym, 3.0, q0, v0)
    # E is a first integral: the local errors (dense output) weighted by |grad E|_1
    # (measured 1.1e-10 J of 25.6 J)
    glob = integration_bound(tr, dense=True)
    assert np.max(np.abs(tr.energy_drift)) < energy_gradient(sym, tr) * glob
    # residuals: the projection's target |r_i| / |grad_i| <= 1e-15 (1 + max|x|), times the
    # row norms (<= sqrt(1 + a^2)), plus the rounding of yc - rho(th) (8 eps (|yc| + a)) and
    # of the velocity rows (3 eps of their terms) (measured 7e-12 without projection)
    qm, vm = np.abs(tr.q).max(), np.abs(tr.v).max()
    row = np.sqrt(1 + 1.5**2)
    assert tr.position_residual.max() < row * 1e-15 * (1 + qm) + 8 * EPS * (qm + 1.5)
    assert tr.velocity_residual.max() < np.sqrt(2) * (row * 1e-15 * (1 + vm) + 3 * EPS * 2.5 * vm)


# =========================================================================== rheonomic
def test_bead_on_rotating_wire_matches_analytic():
    # polar coordinates (r, phi) in a horizontal plane, the wire turns: phi = omega t
    r, ph = q = dynamicsymbols("r phi")
    m, w = sp.symbols("m omega", positive=True)
    model = SymbolicModel(q, T=m / 2 * (D(r)**2 + r**2 * D(ph)**2), holonomic=[ph - w * t])
    om, r0, rd0 = 1.7, 0.4, 0.3
    sym = model.system({m: 0.8, w: om})
    hol = sym.holonomic[0]
    assert hol.rheonomic
    np.testing.assert_allclose(hol.phi_t(0.3, np.array([1.0, 2.0])), [-om], rtol=EPS)  # -omega
    tr = run(sym, 2.0, [r0, 0.0], [rd0, om])
    r_exact = r0 * np.cosh(om * tr.t) + rd0 / om * np.sinh(om * tr.t)
    # r'' = omega^2 r is unstable: errors grow like cosh(omega t) (flow_growth of the closed
    # form in (r0, r0')); measured 2.5e-12 relative. The closed form rounds to 4 eps |r|.
    growth = flow_growth(lambda y, ts: np.array([
        y[0] * np.cosh(om * ts) + y[1] / om * np.sinh(om * ts),
        y[0] * om * np.sinh(om * ts) + y[1] * np.cosh(om * ts)]), [r0, rd0], tr.t)
    assert np.max(np.abs(tr.q[:, 0] - r_exact)) < (integration_bound(tr, growth, dense=True)
                                                   + 4 * EPS * r_exact.max())
    # phi = omega t is held by the projection: 1e-15 (1 + max|q|) (|grad| = 1) plus the
    # rounding of phi - omega t (2 eps of its terms)
    assert np.max(np.abs(tr.q[:, 1] - om * tr.t)) < (1e-15 * (1 + np.abs(tr.q).max())
                                                     + 2 * EPS * 2 * om * tr.t[-1])


A_S, W_S = 0.3, 2.0  # support motion x_s(t) = A_S sin(W_S t)
L_MS, M_MS = 0.9, 1.4


def moving_support_reference(t_eval, th0, w0):
    """theta'' = -(g/l) sin theta - x_s''(t) cos theta / l."""
    def f(tt, y):
        xs_dd = -A_S * W_S**2 * np.sin(W_S * tt)
        return [y[1], -G / L_MS * np.sin(y[0]) - xs_dd * np.cos(y[0]) / L_MS]

    sol = solve_ivp(f, (0.0, t_eval[-1]), [th0, w0], method="DOP853", rtol=1e-12, atol=1e-12,
                    t_eval=t_eval)
    return sol.y[0]


def moving_support_bound(tr, th0, w0, lever=1.0):
    """Bound on |theta_sim - theta_ref|: both runs' integration_bound (the reference at
    rtol = atol = 1e-12 over its own steps, counted by repeating it) times the growth of
    the forced pendulum's (theta, theta') flow; ``lever``: theta's error per unit error of
    the simulated state (1 in the angle, 1/l from Cartesian positions, 2 components)."""
    def f(tt, y):
        return [y[1], -G / L_MS * np.sin(y[0]) + A_S * W_S**2 * np.sin(W_S * tt) * np.cos(y[0]) / L_MS]

    def ref(y, ts):
        return solve_ivp(f, (0.0, float(ts[-1])), y, method="DOP853", rtol=1e-13, atol=1e-13,
                         t_eval=ts).y

    growth = flow_growth(ref, [th0, w0], tr.t)
    steps = ivp_reference_steps(f, float(tr.t[-1]), [th0, w0])
    ymax = max(np.abs(tr.q).max(), np.abs(tr.v).max())
    ref_glob = (steps + 1) * 2 * np.sqrt(2) * 1e-12 * (1 + ymax)
    return growth * (lever * integration_bound(tr, dense=True) + ref_glob)


def test_moving_support_pendulum_rheonomic_T():
    # one angle; T depends on t explicitly -> g must contain the d/dt terms
    th = dynamicsymbols("theta")
    m, l, g, A, W = sp.symbols("m l g A W", positive=True)
    xs = A * sp.sin(W * t)
    x, y = xs + l * sp.sin(th), -l * sp.cos(th)
    model = SymbolicModel([th], T=m / 2 * (D(x)**2 + D(y)**2), V=m * g * y)
    assert model.derive().expressions["g"][0].has(model.t)  # the rheonomic inertia term
    sym = model.system({m: M_MS, l: L_MS, g: G, A: A_S, W: W_S})
    th0, w0 = 0.5, -0.2
    tr = run(sym, 5.0, [th0], [w0])
    ref = moving_support_reference(tr.t, th0, w0)
    # measured 1e-15: the same ODE and integrator settings as the reference, so a wrong
    # (or missing) rheonomic term of g would be the only source of a difference; the
    # bound: both runs' integration errors (moving_support_bound)
    assert np.max(np.abs(tr.q[:, 0] - ref)) < moving_support_bound(tr, th0, w0)


def test_moving_support_pendulum_rheonomic_constraint():
    # Cartesian (x, y), rod (x - x_s(t))^2 + y^2 = l^2: gamma has Phi_qt and Phi_tt terms
    x, y = dynamicsymbols("x y")
    m, l, g, A, W = sp.symbols("m l g A W", positive=True)
    xs = A * sp.sin(W * t)
    model = SymbolicModel([x, y], T=m / 2 * (D(x)**2 + D(y)**2), V=m * g * y,
                          holonomic=[(x - xs)**2 + y**2 - l**2])
    sym = model.system({m: M_MS, l: L_MS, g: G, A: A_S, W: W_S})
    th0, w0 = 0.5, -0.2
    q0 = [L_MS * np.sin(th0), -L_MS * np.cos(th0)]
    v0 = [A_S * W_S + L_MS * np.cos(th0) * w0, L_MS * np.sin(th0) * w0]
    tr = run(sym, 5.0, q0, v0)
    xs_t = A_S * np.sin(W_S * tr.t)
    th_sim = np.arctan2(tr.q[:, 0] - xs_t, -tr.q[:, 1])
    ref = moving_support_reference(tr.t, th0, w0)
    # theta = atan2(x - x_s, -y): |d theta| <= |dq| / l (measured 4.4e-12)
    assert np.max(np.abs(th_sim - ref)) < moving_support_bound(tr, th0, w0, lever=1 / L_MS)


# =========================================================================== Appell-Hamel (paper 004)
AH_M, AH_A, AH_B = 1.3, 1.0, 0.5


def appell_hamel_model(plain: bool = False):
    if plain:
        x, y, z = q = sp.symbols("x y z")
        xd, yd, zd = sp.symbols("x_dot y_dot z_dot")
    else:
        x, y, z = q = dynamicsymbols("x y z")
        xd, yd, zd = D(x), D(y), D(z)
    m, a, b, g = sp.symbols("m a b g", positive=True)
    return SymbolicModel(q, T=m / 2 * (xd**2 + yd**2 + zd**2), V=m * g * z,
                         nonholonomic=[zd - b / a * sp.sqrt(xd**2 + yd**2)]), (m, a, b, g)


@pytest.mark.parametrize("plain", [False, True])
def test_appell_hamel_rows_match_hand_derived(plain):
    model, (m, a, b, g) = appell_hamel_model(plain)
    sym = model.system({m: AH_M, a: AH_A, b: AH_B, g: G})
    c = AH_B / AH_A
    worst = 0.0
    for tt, qq, vv in random_states(3, seed=2):
        s = math.hypot(vv[0], vv[1])
        A, bb = sym.rows(tt, qq, vv)
        A_hand = np.array([[-c * vv[0] / s, -c * vv[1] / s, 1.0]])
        worst = max(worst, rel_err(A, A_hand))
        assert np.all(bb == 0.0)  # f depends on v only: gamma = -(f_q v + f_t) = 0
        assert rel_err(sym.force(tt, qq, vv), [0.0, 0.0, -AH_M * G]) == 0.0
    # -c x'/s, -c y'/s, 1: ~6 roundings (squares, sum, sqrt, product, division) per side
    assert worst < 12 * EPS, worst  # measured 1.1e-16


def test_nonlinear_nonholonomic_gamma_rheonomic_variant():
    # f = z' - c sqrt(x'^2 + y'^2) - k t sin(x): gamma = -(f_q v + f_t) = k t cos(x) x' + k sin(x)
    x, y, z = q = dynamicsymbols("x y z")
    c, k = sp.symbols("c k")
    model = SymbolicModel(q, T=(D(x)**2 + D(y)**2 + D(z)**2) * 3 / 4,
                          nonholonomic=[D(z) - c * sp.sqrt(D(x)**2 + D(y)**2) - k * t * sp.sin(x)])
    sym = model.system({c: 0.6, k: 1.7})
    for tt, qq, vv in random_states(3, seed=3):
        _, bb = sym.rows(tt, qq, vv)
        hand = 1.7 * tt * np.cos(qq[0]) * vv[0] + 1.7 * np.sin(qq[0])
        # ~6 roundings per side of the two terms 1.7 |t cos x x'| and 1.7 |sin x|
        terms = 1.7 * (abs(tt * np.cos(qq[0]) * vv[0]) + abs(np.sin(qq[0])))
        assert abs(bb[0] - hand) <= 12 * EPS * terms  # measured 0 / 1 ulp


def test_appell_hamel_motion_chetaev():
    """Chetaev (Gauss) model of Appell-Hamel, derived by hand.

    With c = b/a and s = |(x', y')|, Gauss's principle gives m a = F + lam f_v,
    f_v = (-c x'/s, -c y'/s, 1), F = (0, 0, -m g). The horizontal equations
    keep the direction of (x', y') and give s' = -lam c / m; the constraint row
    f_v a = 0 (gamma = 0) gives z'' = c s'; the vertical equation
    z'' = -g + lam/m. Hence lam = m g / (1 + c^2) and

        s' = -c g / (1 + c^2) = -a b g / (a^2 + b^2)   (constant),

    so the horizontal speed decreases linearly, z' = c s, and the motion is
    quadratic in t while s > 0 (here until t = 5 / 3.92 = 1.2755 s).
    Energy is conserved: the constraint force's power lam f_v . v = lam f = 0.
    """
    model, (m, a, b, g) = appell_hamel_model()
    sym = model.system({m: AH_M, a: AH_A, b: AH_B, g: G})
    v0 = np.array([3.0, 4.0, 2.5])  # s0 = 5, z' = c s0: consistent
    tr = run(sym, 1.0, np.zeros(3), v0)
    c = AH_B / AH_A
    sdot = -c * G / (1 + c**2)
    # the same quantity written two ways: ~6 roundings each, no cancellation
    assert sdot == pytest.approx(-AH_A * AH_B * G / (AH_A**2 + AH_B**2), rel=12 * EPS)
    s_exact = 5.0 + sdot * tr.t
    dist = 5.0 * tr.t + sdot * tr.t**2 / 2
    s_sim = np.hypot(tr.v[:, 0], tr.v[:, 1])
    f_sim = tr.v[:, 2] - c * s_sim
    # measured: f 1.1e-14, s 5.8e-15, positions 6e-15, energy 7e-14 (the motion is quadratic
    # in t, which DOP853 integrates exactly up to rounding)
    # f: the projection's target 1e-15 (1 + max|v|) |f_v| (|f_v| = sqrt(1 + c^2)) plus the
    # rounding of f (4 eps (|z'| + c s)), here recomputed by the test (2 more roundings)
    vm = np.abs(tr.v).max()
    assert np.max(np.abs(f_sim)) < 1e-15 * (1 + vm) * np.sqrt(1 + c * c) + 6 * EPS * 2 * vm
    # s and the positions: integration_bound (dense output) with the growth of the exact
    # flow (the closed form q0 + (h, c) (s0 t + s' t^2 / 2) as a function of (q0, x0', y0'))
    def closed(y, ts):
        s0, h = np.hypot(y[3], y[4]), np.array([y[3], y[4]]) / np.hypot(y[3], y[4])
        d = s0 * ts + sdot * ts**2 / 2
        return np.array([y[0] + h[0] * d, y[1] + h[1] * d, y[2] + c * d,
                         h[0] * (s0 + sdot * ts), h[1] * (s0 + sdot * ts)])
    glob = integration_bound(tr, flow_growth(closed, [0.0, 0.0, 0.0, 3.0, 4.0], tr.t), dense=True)
    assert np.max(np.abs(s_sim - s_exact)) < glob
    np.testing.assert_allclose(tr.q, np.stack([0.6 * dist, 0.8 * dist, c * dist], axis=1),
                               rtol=0, atol=glob)
    # E is a first integral: the local errors weighted by |grad E|_1
    assert np.max(np.abs(tr.energy_drift)) < energy_gradient(sym, tr) * integration_bound(
        tr, dense=True)


# =========================================================================== acceleration constraint
def test_constant_speed_second_order_constraint():
    """Particle under gravity with q' . q'' = 0 (paper 004 (a)).

    Gauss: m a = F + lam v with v . a = 0 -> a = -g (e_z - (v_z/|v|^2) v). The
    speed s is constant, the horizontal direction too, and the unit velocity's
    z component obeys u_z' = -(g/s)(1 - u_z^2): u_z = -tanh(tau), tau = g t/s
    + atanh(-u_z0). Integrating s u: z - z0 = -(s^2/g)(ln cosh tau - ln cosh tau0),
    horizontal distance (s^2/g)(gd(tau) - gd(tau0)), gd = atan(sinh).
    """
    x, y, z = q = dynamicsymbols("x y z")
    m, g = sp.symbols("m g", positive=True)
    model = SymbolicModel(q, T=m / 2 * (D(x)**2 + D(y)**2 + D(z)**2), V=m * g * z,
                          acceleration=[sum(D(c) * D(c, 2) for c in q)])
    sym = model.system({m: 1.3, g: G})
    v0 = np.array([1.2, -0.7, 2.0])
    s = float(np.linalg.norm(v0))
    q0 = np.array([0.3, 0.1, -0.2])
    tr = run(sym, 5.0, q0, v0)
    speed = np.linalg.norm(tr.v, axis=1)
    # the speed is a first integral (v . a = 0): the local errors weighted by
    # |grad |v||_1 <= sqrt(3) < 2 (integration_bound's factor), never amplified
    assert np.max(np.abs(speed - s)) < integration_bound(tr, dense=True)  # measured 8e-15
    tau0 = math.atanh(-v0[2] / s)
    tau = G * tr.t / s + tau0

    def lncosh(u):
        return np.logaddexp(u, -u) - math.log(2)

    z_exact = -0.2 - s**2 / G * (lncosh(tau) - lncosh(tau0))
    d_exact = s**2 / G * (np.arctan(np.sinh(tau)) - math.atan(math.sinh(tau0)))
    eh = v0[:2] / np.linalg.norm(v0[:2])
    # measured 2e-13. integration_bound (dense output) with the growth of the exact flow
    # (the same motion's closed form in gaussopt_problems.second_order_particle, as a function of
    # (q0, v0)); the closed form rounds to ~16 eps of s^2/g (|tau| + 1)
    growth = flow_growth(lambda y, ts: np.array(list(sop.reference(ts, y[:3], y[3:], G).values())[:6]),
                         np.r_[q0, v0], tr.t)
    bound = (integration_bound(tr, growth, dense=True)
             + 16 * EPS * s**2 / G * (np.abs(tau).max() + 1))
    np.testing.assert_allclose(tr.q[:, 2], z_exact, rtol=0, atol=bound)
    np.testing.assert_allclose(tr.q[:, :2], np.array([0.3, 0.1]) + d_exact[:, None] * eh,
                               rtol=0, atol=bound)


# =========================================================================== double pendulum
DP = dict(m1=1.3, m2=0.8, l1=1.1, l2=0.7)


def double_pendulum_angles():
    th1, th2 = dynamicsymbols("th1 th2")
    m1, m2, l1, l2, g = sp.symbols("m1 m2 l1 l2 g", positive=True)
    x1, y1 = l1 * sp.sin(th1), -l1 * sp.cos(th1)
    x2, y2 = x1 + l2 * sp.sin(th2), y1 - l2 * sp.cos(th2)
    T = m1 / 2 * (D(x1)**2 + D(y1)**2) + m2 / 2 * (D(x2)**2 + D(y2)**2)
    return SymbolicModel([th1, th2], T, V=g * (m1 * y1 + m2 * y2), name="dp_angles")


def double_pendulum_cartesian(**kw):
    x1, y1, x2, y2 = q = dynamicsymbols("x1 y1 x2 y2")
    m1, m2, l1, l2, g = sp.symbols("m1 m2 l1 l2 g", positive=True)
    T = m1 / 2 * (D(x1)**2 + D(y1)**2) + m2 / 2 * (D(x2)**2 + D(y2)**2)
    return SymbolicModel(q, T, V=g * (m1 * y1 + m2 * y2),
                         holonomic=[x1**2 + y1**2 - l1**2, (x2 - x1)**2 + (y2 - y1)**2 - l2**2],
                         name="dp_cartesian", **kw)


def test_double_pendulum_angles_vs_cartesian():
    P = {**DP, "g": G}
    ang = double_pendulum_angles().system(P)
    cart = double_pendulum_cartesian().system(P)
    th0, w0 = np.array([0.6, -0.4]), np.array([0.3, -0.5])
    l1, l2 = DP["l1"], DP["l2"]
    p1 = l1 * np.array([np.sin(th0[0]), -np.cos(th0[0])])
    p2 = p1 + l2 * np.array([np.sin(th0[1]), -np.cos(th0[1])])
    v1 = l1 * w0[0] * np.array([np.cos(th0[0]), np.sin(th0[0])])
    v2 = v1 + l2 * w0[1] * np.array([np.cos(th0[1]), np.sin(th0[1])])
    ta = run(ang, 5.0, th0, w0)
    tc = run(cart, 5.0, np.r_[p1, p2], np.r_[v1, v2])
    q = tc.q
    th1 = np.arctan2(q[:, 0], -q[:, 1])
    th2 = np.arctan2(q[:, 2] - q[:, 0], -(q[:, 3] - q[:, 1]))
    # measured 2.8e-12 and 1.8e-11 rad. Both runs' integration_bound (dense output) times
    # the growth of the angle flow over 5 s (from ang's own equations at 1e-13); an angle
    # from Cartesian positions errs by |dp_1| / l1 (th1) or (|dp_1| + |dp_2|) / l2 (th2)
    def angles(y, ts):                   # (th1, th2, th1', th2') of ang itself at 1e-13
        r = run(ang, float(ts[-1]), y[:2], y[2:], n_eval=ts.size, rtol=1e-13, atol=1e-13)
        return np.vstack([r.q.T, r.v.T])

    growth = flow_growth(angles, np.r_[th0, w0], ta.t, samples=60)
    ga, gc = integration_bound(ta, dense=True), integration_bound(tc, dense=True)
    assert np.max(np.abs(th1 - ta.q[:, 0])) < growth * (ga + gc / DP["l1"])
    assert np.max(np.abs(th2 - ta.q[:, 1])) < growth * (ga + 2 * gc / DP["l2"])
    # the same energy function (T + V) in both, conserved: each run's drift is its local
    # errors weighted by |grad E|_1 (a first integral: no growth); the two initial values
    # (the same state in two coordinates) round to 8 eps of the energy's terms
    Ea, Ec = energy_gradient(ang, ta) * ga, energy_gradient(cart, tc) * gc
    terms = 0.5 * (DP["m1"] * v1 @ v1 + DP["m2"] * v2 @ v2) + G * (DP["m1"] * abs(p1[1])
                                                                    + DP["m2"] * abs(p2[1]))
    np.testing.assert_allclose(tc.energy, ta.energy, rtol=0, atol=Ea + Ec + 16 * EPS * terms)
    assert np.max(np.abs(ta.energy_drift)) < Ea  # measured 2.2e-11 J (E = -23.6 J)
    # the Cartesian model's mass matrix and force are constant: passed as arrays
    assert cart.constant_mass is not None and cart.constant_force is not None


# =========================================================================== parameter sets
def test_one_derivation_many_parameter_sets():
    model, (m, a, b, g) = ellipse_model()
    model.derive()
    t_derive = model.timings["derive"]
    s1 = model.system({m: 1.7, a: 1.5, b: 1.0, g: G})
    compiled = dict(model._compiled)
    s2 = model.system({"m": 0.9, "a": 1.3, "b": 0.7, "g": 9.81})  # names work as keys too
    assert model._compiled == compiled  # nothing recompiled
    assert model.timings["derive"] == t_derive
    r1, r2 = ellipse_by_hand(1.5, 1.0, 1.7), ellipse_by_hand(1.3, 0.7, 0.9, 9.81)
    for tt, qq, vv in random_states(3, count=5, seed=4):
        for sym, ref in ((s1, r1), (s2, r2)):  # s1 unchanged by building s2
            # m, m g, J = m (a^2 + b^2) / 4: up to 4 roundings
            assert rel_err(sym.mass(tt, qq), ref.mass(tt, qq)) <= 4 * EPS
            assert rel_err(sym.force(tt, qq, vv), ref.force(tt, qq, vv)) <= 4 * EPS
            # the reference's automatic gamma: its documented accuracy on its scale
            # |gamma| + |Phi'| |(1, v)| (test_constraints.py)
            A_r, b_r = ref.rows(tt, qq, vv)
            b_s = sym.rows(tt, qq, vv)[1]
            scale = np.abs(b_r) + np.abs(A_r @ vv) * np.sqrt(1 + vv @ vv)
            assert np.all(np.abs(b_s - b_r) <= 1e-10 * scale)
            # T + V: ~8 roundings per side of its terms
            E = ref.energy(tt, qq, vv)
            M_r = ref.mass(tt, qq)
            terms = 0.5 * vv @ (np.diag(M_r) * vv) + np.abs(ref.force(tt, qq, vv) @ qq)
            assert sym.energy(tt, qq, vv) == pytest.approx(E, abs=16 * EPS * terms)
    assert not np.allclose(s1.rows(0.1, np.ones(3), np.ones(3))[1], s2.rows(0.1, np.ones(3), np.ones(3))[1])


# =========================================================================== forces, plain symbols
def test_damped_oscillator_velocity_dependent_force():
    x = dynamicsymbols("x")
    m, k, c = sp.symbols("m k c", positive=True)
    sym = from_lagrangian([x], m / 2 * D(x)**2, k / 2 * x**2, forces={x: -c * D(x)},
                          params={m: 1.3, k: 7.0, c: 0.9})
    tr = run(sym, 3.0, [0.4], [0.0])
    z = 0.9 / (2 * math.sqrt(7.0 * 1.3))
    wn = math.sqrt(7.0 / 1.3)
    wd = wn * math.sqrt(1 - z**2)
    exact = 0.4 * np.exp(-z * wn * tr.t) * (np.cos(wd * tr.t) + z * wn / wd * np.sin(wd * tr.t))

    def closed(y, ts):                   # the damped oscillation from (x0, x0')
        e, c_, s_ = np.exp(-z * wn * ts), np.cos(wd * ts), np.sin(wd * ts)
        x = e * (y[0] * c_ + (y[1] + z * wn * y[0]) / wd * s_)
        v = e * (y[1] * c_ - (wn * y[0] + z * y[1]) * wn / wd * s_)
        return np.array([x, v])

    # integration_bound (dense output) with the growth of the damped flow (<= max(wn, 1/wn)),
    # plus the closed form's rounding (8 eps of 0.4 (1 + z wn / wd)) (measured 4e-14)
    growth = flow_growth(closed, [0.4, 0.0], tr.t)
    assert np.max(np.abs(tr.q[:, 0] - exact)) < (integration_bound(tr, growth, dense=True)
                                                  + 8 * EPS * 0.4 * (1 + z * wn / wd))


def test_velocity_dependent_potential_lorentz_force():
    # charge e in a uniform field B e_z: L = m/2 |v|^2 + e v . A, A = B/2 (-y, x): V = -e v . A.
    # The Lorentz force e v x B = e B (y', -x') is F; the motion is a circle traversed
    # clockwise (e B > 0) at omega = e B / m.
    x, y = dynamicsymbols("x y")
    m, e, B = sp.symbols("m e B")
    sym = from_lagrangian([x, y], m / 2 * (D(x)**2 + D(y)**2),
                          V=-e * B / 2 * (x * D(y) - y * D(x)), params={m: 1.3, e: 0.8, B: 2.5})
    for tt, qq, vv in random_states(2, count=5, seed=9):
        # e B = 0.8 * 2.5 = 2 (one rounding) times a velocity (one more)
        assert rel_err(sym.force(tt, qq, vv), [2.0 * vv[1], -2.0 * vv[0]]) <= 2 * EPS
    np.testing.assert_array_equal(sym.constant_mass, 1.3 * np.eye(2))
    w = 0.8 * 2.5 / 1.3
    tr = run(sym, 3.0, [0.0, 0.0], [0.7, 0.0])

    def closed(y, ts):                   # the circle from (x0, y0, x0', y0'), clockwise
        c_, s_ = np.cos(w * ts), np.sin(w * ts)
        return np.array([y[0] + (y[2] * s_ + y[3] * (1 - c_)) / w,
                         y[1] + (y[2] * (c_ - 1) + y[3] * s_) / w,
                         y[2] * c_ + y[3] * s_, -y[2] * s_ + y[3] * c_])

    # x = (v0/w) sin(w t), y = (v0/w) (cos(w t) - 1); measured 2.2e-12. integration_bound
    # (dense output) with the growth of the flow, plus 4 eps of v0/w for the closed form
    growth = flow_growth(closed, [0.0, 0.0, 0.7, 0.0], tr.t)
    np.testing.assert_allclose(tr.q, 0.7 / w * np.stack([np.sin(w * tr.t), np.cos(w * tr.t) - 1], 1),
                               rtol=0, atol=integration_bound(tr, growth, dense=True)
                               + 4 * EPS * 0.7 / w)


def test_plain_symbols_and_explicit_velocity_symbols():
    x, y = sp.symbols("x y")
    u, w, ud, wd = sp.symbols("u w ud wd")
    k = sp.Symbol("k")
    a = from_lagrangian([x, y], (u**2 + 3 * w**2) / 2, k * x * y, holonomic=[x * y - k],
                        acceleration=[u * ud + w * wd], params={k: 0.7},
                        velocities=[u, w], accelerations=[ud, wd])
    b = from_lagrangian([x, y], (sp.Symbol("x_dot")**2 + 3 * sp.Symbol("y_dot")**2) / 2, k * x * y,
                        holonomic=[x * y - k],
                        acceleration=[sp.Symbol("x_dot") * sp.Symbol("x_ddot")
                                      + sp.Symbol("y_dot") * sp.Symbol("y_ddot")], params={k: 0.7})
    qq, vv = np.array([0.3, -1.2]), np.array([0.8, 2.1])
    for s in (a, b):
        np.testing.assert_array_equal(s.constant_mass, np.diag([1.0, 3.0]))
        # -k (y, x): one rounding of the product, one of the literal
        np.testing.assert_allclose(s.force(0.0, qq, vv), [0.84, -0.21], rtol=2 * EPS)
        A, bb = s.rows(0.0, qq, vv)
        # rows: holonomic [y, x] a = -2 x' y'; acceleration v . a = 0 (copies of q, v, and
        # a product of three factors: two roundings)
        np.testing.assert_allclose(A, [[-1.2, 0.3], [0.8, 2.1]], rtol=0, atol=0)
        np.testing.assert_allclose(bb, [-2 * 0.8 * 2.1, 0.0], rtol=2 * EPS)


def test_constant_rows_are_read_only_arrays_and_simulate():
    # a particle on a line inclined at alpha: the rows do not depend on (t, q, v)
    x, y = sp.symbols("x y")
    m, g, al = sp.symbols("m g alpha")
    sym = from_lagrangian([x, y], m / 2 * (sp.Symbol("x_dot")**2 + sp.Symbol("y_dot")**2), m * g * y,
                          holonomic=[sp.Eq(y, x * sp.tan(al))], params={m: 1.3, g: G, al: 0.4})
    A, b = sym.rows(0.0, np.zeros(2), np.ones(2))
    assert not A.flags.writeable and not b.flags.writeable
    assert sym.constant_mass is not None and sym.constant_force is not None
    a_exact = -G * math.sin(0.4) * np.array([math.cos(0.4), math.sin(0.4)])
    q0, v0 = np.array([1.0, math.tan(0.4)]), np.array([0.5, 0.5 * math.tan(0.4)])
    A, b = sym.rows(0.0, q0, v0)
    for solver in ("closed_form", "lagrange"):
        r = go.solve_step(sym, 0.0, q0, v0, solver=solver)
        # the verified step (step_error_bound) plus the rounding of a_exact (4 eps of g)
        da = step_error_bound(sym.mass(0.0, q0), sym.force(0.0, q0, v0), A, b, r.a,
                              direct_tolerance(2, 1))
        np.testing.assert_allclose(r.a, a_exact, rtol=0, atol=da + 4 * EPS * G)
    tr = run(sym, 1.0, q0, v0, n_eval=11)
    # integration_bound (dense output) with the growth of the free flight along the line
    # (q0 + v0 t + a t^2 / 2: velocity errors carried into the positions, 1 + t), plus the
    # rounding of the closed form (4 eps of its terms)
    growth = flow_growth(lambda y, ts: np.vstack([
        y[:2, None] + np.outer(y[2:], ts) + np.outer(a_exact, ts**2 / 2),
        y[2:, None] + np.outer(a_exact, ts)]), np.r_[q0, v0], tr.t)
    np.testing.assert_allclose(tr.q, q0 + np.outer(tr.t, v0) + np.outer(tr.t**2 / 2, a_exact),
                               rtol=0, atol=integration_bound(tr, growth, dense=True)
                               + 4 * EPS * (np.abs(q0).max() + np.abs(v0).max() + G))


# =========================================================================== compiled code
def test_compiled_pieces_agree_with_sympy_evaluation():
    """math and numpy back ends, simplified and raw derivations, against sympy's
    own evaluation of the unsimplified expressions (an independent path)."""
    raw = double_pendulum_cartesian(simplify=False).derive()
    P = {**DP, "g": G}
    subs_p = {s: P[s.name] for s in raw.parameters}
    models = []
    for modules in ("math", "numpy"):
        for simplify in (True, False):
            models.append(double_pendulum_cartesian(modules=modules, simplify=simplify))
    for tt, qq, vv in random_states(4, count=4, seed=5):
        subs = {**subs_p, raw.t: tt, **dict(zip(raw.q, qq)), **dict(zip(raw.v, vv))}
        expect = {k: np.array(sp.Matrix(raw.expressions[k]).evalf(30, subs=subs), dtype=float)
                  for k in ("F", "phi_q", "phi_gamma")}
        for mdl in models:
            F = mdl.function("force", P)(tt, qq, vv)
            A, b = mdl.function("phi_rows", P)(tt, qq, vv)
            assert F.dtype == A.dtype == b.dtype == np.float64
            assert F.shape == (4,) and A.shape == (2, 4) and b.shape == (2,)
            # constants m g, entries 2 (x_i - x_j), and -2 |v_i - v_j|^2: at most ~8 roundings
            # of terms without cancellation, against 30 digits
            assert rel_err(F, expect["F"].ravel()) <= 8 * EPS
            assert rel_err(A, expect["phi_q"]) <= 8 * EPS
            assert rel_err(b, expect["phi_gamma"].ravel()) <= 8 * EPS


def test_simplified_equals_raw_derivation_with_rheonomic_kinetic_energy():
    # T = T2 + T1 + T0 (support moving as A sin(W t), plus a second, coupled angle):
    # the simplified path reads M, b, L0 off the expanded Lagrangian and rebuilds it
    th, ph = q = dynamicsymbols("theta phi")
    m, l, g, A, W, k = sp.symbols("m l g A W k", positive=True)
    xs = A * sp.sin(W * t)
    x, y = xs + l * sp.sin(th) + l / 2 * sp.sin(ph), -l * sp.cos(th) - l / 2 * sp.cos(ph)
    kw = dict(T=m / 2 * (D(x)**2 + D(y)**2) + k * D(th) * D(ph), V=m * g * y)
    P = {m: M_MS, l: L_MS, g: G, A: A_S, W: W_S, k: 0.3}
    simp, raw = SymbolicModel(q, **kw), SymbolicModel(q, **kw, simplify=False)
    for tt, qq, vv in random_states(2, count=10, seed=10):
        for piece in ("mass", "force", "inertia", "energy"):
            args = (tt, qq) if piece == "mass" else (tt, qq, vv)
            # two forms of the same expression (expanded and rebuilt): ~16 roundings per
            # side of products of a few sin/cos factors, parameters and velocities, whose
            # size is bounded by the sum of the absolute terms; that sum is at most
            # (1 + A W / |v| + ...) ~ 4 times the largest entry at these states
            assert rel_err(simp.function(piece, P)(*args), raw.function(piece, P)(*args)) \
                <= 4 * 32 * EPS


def test_double_pendulum_mass_and_christoffel_terms_by_hand():
    # inertia term g of the double pendulum in angles, by hand (Christoffel terms):
    # g1 = m2 l1 l2 sin(th1 - th2) th2'^2, g2 = -m2 l1 l2 sin(th1 - th2) th1'^2
    mdl = double_pendulum_angles()
    P = {**DP, "g": G}
    ginert = mdl.function("inertia", P)
    mass = mdl.function("mass", P)
    m1, m2, l1, l2 = DP["m1"], DP["m2"], DP["l1"], DP["l2"]
    for tt, qq, vv in random_states(2, count=5, seed=6):
        s12, c12 = math.sin(qq[0] - qq[1]), math.cos(qq[0] - qq[1])
        g_hand = [m2 * l1 * l2 * s12 * vv[1]**2, -m2 * l1 * l2 * s12 * vv[0]**2]
        M_hand = [[(m1 + m2) * l1**2, m2 * l1 * l2 * c12], [m2 * l1 * l2 * c12, m2 * l2**2]]
        # products of 4-5 factors: ~6 roundings per side
        assert rel_err(ginert(tt, qq, vv), g_hand) <= 12 * EPS
        assert rel_err(mass(tt, qq), M_hand) <= 12 * EPS
    assert "sin(_gq0)**2" not in mdl.source("mass")  # simplified: sin^2 + cos^2 = 1


# =========================================================================== sympy.physics.mechanics
def _mechanics_double_pendulum(kind):
    import sympy.physics.mechanics as me
    q1, q2 = dynamicsymbols("th1 th2")
    u1, u2 = dynamicsymbols("u1 u2")
    m1, m2, l1, l2, g = sp.symbols("m1 m2 l1 l2 g", positive=True)
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P1 = O.locatenew("P1", l1 * (sp.sin(q1) * N.x - sp.cos(q1) * N.y))
    P2 = P1.locatenew("P2", l2 * (sp.sin(q2) * N.x - sp.cos(q2) * N.y))
    for P in (P1, P2):
        P.set_vel(N, P.pos_from(O).dt(N))
    pa1, pa2 = me.Particle("pa1", P1, m1), me.Particle("pa2", P2, m2)
    if kind == "lagrange":
        pa1.potential_energy = m1 * g * P1.pos_from(O).dot(N.y)
        pa2.potential_energy = m2 * g * P2.pos_from(O).dot(N.y)
        L = me.Lagrangian(N, pa1, pa2)
        return me.LagrangesMethod(L, [q1, q2])
    kd = {D(q1): u1, D(q2): u2}
    for P in (P1, P2):
        P.set_vel(N, P.vel(N).subs(kd))
    km = me.KanesMethod(N, q_ind=[q1, q2], u_ind=[u1, u2], kd_eqs=[D(q1) - u1, D(q2) - u2])
    km.kanes_equations([pa1, pa2], [(P1, -m1 * g * N.y), (P2, -m2 * g * N.y)])
    return km


@pytest.mark.parametrize("kind", ["lagrange", "kane"])
def test_from_mechanics_double_pendulum(kind):
    P = {**DP, "g": G}
    mech = from_mechanics(_mechanics_double_pendulum(kind), P)
    ref = double_pendulum_angles().system(P)
    assert mech.coordinates == ("th1", "th2")
    for tt, qq, vv in random_states(2, seed=7):
        # the same mass matrix and forces derived along two routes (sympy's mechanics and
        # gaussopt's): products of a few factors, ~16 roundings per side, and the forces
        # sum terms of up to m2 l1 l2 v^2 + (m1 + m2) g l (gamma_scale-like), 2x the entries
        assert rel_err(mech.mass(tt, qq), ref.mass(tt, qq)) <= 32 * EPS
        assert rel_err(mech.force(tt, qq, vv), ref.force(tt, qq, vv)) <= 2 * 32 * EPS
        if kind == "lagrange":  # the Jacobi integral = T + V here
            E = ref.energy(tt, qq, vv)
            terms = 0.5 * abs(vv @ ref.mass(tt, qq) @ vv) + np.abs(ref.force(tt, qq, np.zeros(2))
                                                                   @ np.ones(2)) * 3
            assert mech.energy(tt, qq, vv) == pytest.approx(E, abs=32 * EPS * terms)
    assert mech.has_energy == (kind == "lagrange")
    model = from_mechanics(_mechanics_double_pendulum(kind), model=True)
    assert isinstance(model, SymbolicModel)
    assert [p.name for p in model.parameters] == ["g", "l1", "l2", "m1", "m2"]


def test_from_mechanics_lagranges_method_with_constraints():
    import sympy.physics.mechanics as me
    x, y = dynamicsymbols("x y")
    m, l, g, k = sp.symbols("m l g k", positive=True)
    L = m / 2 * (D(x)**2 + D(y)**2) - m * g * y
    lm = me.LagrangesMethod(L, [x, y], hol_coneqs=[x**2 + y**2 - l**2],
                            nonhol_coneqs=[D(x) - k * y * D(y)])
    mech = from_mechanics(lm, {m: 1.3, l: 1.1, g: G, k: 0.6})
    ref = from_lagrangian([x, y], m / 2 * (D(x)**2 + D(y)**2), m * g * y,
                          holonomic=[x**2 + y**2 - l**2], nonholonomic=[D(x) - k * y * D(y)],
                          params={m: 1.3, l: 1.1, g: G, k: 0.6})
    for tt, qq, vv in random_states(2, seed=8):
        A, b = mech.rows(tt, qq, vv)
        Ar, br = ref.rows(tt, qq, vv)
        # the same rows and forces (2 x, 2 y, -k y ...): at most 2 roundings per side
        assert rel_err(A, Ar) <= 4 * EPS and rel_err(b, br) <= 4 * EPS
        assert rel_err(mech.force(tt, qq, vv), ref.force(tt, qq, vv)) <= 4 * EPS


# =========================================================================== errors
def test_errors():
    x, y = dynamicsymbols("x y")
    m, k = sp.symbols("m k")
    with pytest.raises(ModelError, match=r"acceleration\[0\].*linear in the accelerations"):
        SymbolicModel([x, y], m / 2 * D(x)**2, acceleration=[D(x, 2)**2 + D(y, 2)]).derive()
    with pytest.raises(ModelError, match=r"`q\[1\]` must be a function of time .* found x\(t\)\*\*2"):
        SymbolicModel([x, x**2], D(x)**2)
    with pytest.raises(ModelError, match=r"`q\[0\]` must be a function of time"):
        SymbolicModel([sp.Function("f")(sp.Symbol("s"), sp.Symbol("t"))], 0)
    with pytest.raises(ModelError, match=r"`q\[0\]` must be .* found 3"):
        SymbolicModel([3], 0)
    model = SymbolicModel([x, y], m / 2 * (D(x)**2 + D(y)**2), k * x**2 / 2 + sp.Symbol("g0") * y)
    with pytest.raises(ModelError, match=r"unbound symbols .*: g0, k; give their values in `params`"):
        model.system({m: 1.3})
    with pytest.raises(ModelError, match=r"`params\[k\]` must be a real number"):
        model.system({m: 1.3, k: "stiff", "g0": 9.8})
    with pytest.raises(ModelError, match=r"quadratic in the velocities"):
        SymbolicModel([x], D(x)**4).derive()
    with pytest.raises(ModelError, match=r"holonomic\[0\]` must depend on \(q, t\) only"):
        SymbolicModel([x, y], D(x)**2, holonomic=[D(x) - y])
    # a function of t that is not a coordinate is a specified input: named when missing
    with pytest.raises(ModelError, match=r"unspecified input of model .*: z\(t\) .*"
                                         r"specified=\{z: \.\.\.\}.*add it to the coordinates"):
        SymbolicModel([x, y], D(x)**2, V=dynamicsymbols("z") * x).system()
    with pytest.raises(ModelError, match=r"depends on \['f\(x\(t\)\)'\], which is neither among "
                                         r"the coordinates"):
        SymbolicModel([x, y], D(x)**2, V=sp.Function("f")(x))
    with pytest.raises(ModelError, match=r"one generalized force per coordinate \(2\), found 3"):
        SymbolicModel([x, y], D(x)**2, forces=[1, 2, 3])
    with pytest.raises(ModelError, match=r"only the coordinates and their first and second"):
        SymbolicModel([x, y], D(x)**2, forces=[D(x, 3), 0])
    with pytest.raises(ModelError, match=r"`modules` must be one of"):
        SymbolicModel([x], D(x)**2, modules="tensorflow")
    with pytest.raises(ModelError, match=r"cannot compile force .* modules='math'.*scipy"):
        from_lagrangian([x], D(x)**2, V=sp.besselj(0, x))
    sysm = from_lagrangian([x], D(x)**2, V=sp.besselj(0, x), modules="scipy")
    # F = -d/dx J0 = J1(0.5): scipy's j1 (Cephes, a few ulps) and the 16-digit literal
    assert sysm.force(0.0, np.array([0.5]), np.array([0.0]))[0] == pytest.approx(
        0.2422684576748739, rel=8 * EPS)
    with pytest.raises(ModelError, match=r"parameter values make force undefined .*math domain"):
        from_lagrangian([x], D(x)**2, V=sp.sqrt(k) * x, params={k: -2.0})
    with pytest.raises(ModelError, match=r"`params` keys must be sympy Symbols or their names"):
        model.system({m: 1.3, k: 2.0, "g0": 9.8, 3: 1.0})
    with pytest.raises(ModelError, match=r"`T` must not depend on the accelerations"):
        SymbolicModel([x], D(x) * D(x, 2))
    with pytest.raises(ModelError, match=r"`t` is s but the coordinates are functions of t"):
        SymbolicModel([x], D(x)**2, t=sp.Symbol("s"))
    with pytest.raises(ModelError, match=r"`method` must be a sympy.physics.mechanics"):
        from_mechanics(object())


# (KanesMethods with dependent speeds are accepted: tests/test_kane.py)


# =========================================================================== cost
def test_compile_once():
    """A model is derived, lambdified and compiled once: a second system with other
    parameter values reuses every compiled piece and the generated numba module
    (nothing is generated again), and its functions use the new values.
    (Per-call costs are measured in benchmarks/, not asserted here.)"""
    import gaussopt.symbolic as S
    import gaussopt.core.codegen as codegen

    model, (m, l, g, psi) = four_bar_model()
    sym = model.system({m: 12, l: 2, g: 9.8, psi: 450})
    pieces = dict(model._compiled)
    module = model._numba
    calls = []
    orig_compile, orig_load = S._compile, codegen.load_module
    try:
        S._compile = lambda *a, **k: calls.append("lambdify") or orig_compile(*a, **k)
        codegen.load_module = lambda *a, **k: calls.append("numba") or orig_load(*a, **k)
        sym2 = model.system({m: 6, l: 2, g: 9.8, psi: 450})
    finally:
        S._compile, codegen.load_module = orig_compile, orig_load
    assert calls == []
    assert model._numba is module and all(model._compiled[k] is c for k, c in pieces.items())
    qq, vv = np.array([0.3, 0.2, 0.1]), np.array([1.0, -2.0, 0.5])
    # M is linear in m: halving m halves M exactly (one rounding of the same products)
    np.testing.assert_allclose(sym2.mass(0.0, qq), 0.5 * sym.mass(0.0, qq), rtol=4 * EPS, atol=0)
