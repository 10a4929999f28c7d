"""Paper 000's sleigh and paper 004's Appell--Hamel and second-order examples under Gauss's step.

References are independent of gaussopt: closed-form solutions of hand-derived
reduced equations, or those equations integrated by solve_ivp at 1e-13.

Measured (DOP853, rtol = atol = 1e-12 unless stated, gaussopt 0.1.0):

* sleigh, Gauss step (closed_form), 20 s: 1.1e-10 against the closed form
  (M = 2.5, I_C = 0.7, F = 1.7 at alpha = 0.4), 9.3e-11 with the defaults;
* Appell--Hamel, no horizontal force: Gauss 4.4e-15 against the analytic
  Chetaev motion (quadratic in t, which DOP853 integrates exactly), |f| <= 3e-15;
  the vakonomic (any lam0 != m s0/k) and new models agree to 1e-14;
  with an oblique horizontal force (fx, fy) = (1.1, -0.9), m = 1.7, a = 1.3,
  b = 0.6: Gauss vs the reduced Chetaev equations 7e-13; final-position
  differences Chetaev-new 1.2e-2, Chetaev-vakonomic(lam0 = 0) 3.1e-2;
  paper 004's printed eq. (37) coefficient 2.8e-2 off Gauss;
* second-order particle, 5 s: speed drift 8e-12, trajectory 2.7e-12 (position)
  and 8.7e-12 (velocity) against the closed form.

Tolerances are derived, not fitted to these measurements: states within
test_trajectory.integration_bound (the local errors the run admits, times the
growth of errors along the exact motion, test_trajectory.flow_growth); first
integrals (energy, speed) within the local errors weighted by their gradient;
residuals at the projection's target plus the rounding of the constraint; forces
of single steps within test_step_properties' bounds of the verified step.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from gaussopt.core.exceptions import ModelError
from gaussopt_problems import appell_hamel as ah
from gaussopt_problems import second_order_particle as sop
from gaussopt_problems import sleigh
from test_step_properties import direct_tolerance, force_error_bound, step_error_bound
from test_trajectory import EPS, flow_growth, integration_bound

TOL = 1e-12


def step_errors(sysm, tr, solver_tol):
    """Per-sample (|a - a*| bound, |(M a - F) - (M a - F)*| bound) of the recomputed steps
    (step_error_bound at the verified backward error, force_error_bound)."""
    da, dQ = [], []
    for t, q, v, a in zip(tr.t, tr.q, tr.v, tr.a):
        M, F = sysm.mass(t, q), sysm.force(t, q, v)
        d = step_error_bound(M, F, *sysm.rows(t, q, v), a, solver_tol)
        da.append(d)
        dQ.append(force_error_bound(M, F, a, d))
    return np.array(da), np.array(dQ)


def ivp_steps(fun, t_span, y0, args, rtol=1e-12, atol=1e-12):
    """Step count of a solve_ivp DOP853 run (the problems' own runs keep none): at most
    nfev / 12 accepted steps (12 evaluations per step, rejected ones included)."""
    sol = solve_ivp(fun, t_span, y0, method="DOP853", rtol=rtol, atol=atol, args=args)
    return sol.nfev // 12 + 1


def ah_model_steps(model, lam0, params, t_end, form="derived"):
    """Step count of ah.simulate_model(model, form, lam0, **params) (same solve_ivp call)."""
    p = {**ah.DEFAULTS, **params}
    y0 = [p["x0"], p["y0"], p["z0"], p["vx0"], p["vy0"]] + ([lam0] if model == "vakonomic" else [])
    return ivp_steps(ah.model_rhs, (0.0, t_end), y0,
                     (model, form) + tuple(p[k] for k in ("m", "a", "b", "g", "fx", "fy")))


def ah_growth(params, t, model="chetaev", lam0=0.0):
    """Growth of errors along the exact motion of a model (from its reduced reference;
    the state (x, y, z, x', y') of the initial conditions -> (x, y, z, s cos th, s sin th))."""
    def ref(y0, ts):
        kw = {**params, "x0": y0[0], "y0": y0[1], "z0": y0[2], "vx0": y0[3], "vy0": y0[4]}
        r = ah.reference(ts, model, lam0, **kw)
        th = r["theta"] if "theta" in r else np.full(ts.size, np.arctan2(y0[4], y0[3]))
        return np.array([r["x"], r["y"], r["z"], r["s"] * np.cos(th), r["s"] * np.sin(th)])
    p = {**ah.DEFAULTS, **params}
    return flow_growth(ref, [p["x0"], p["y0"], p["z0"], p["vx0"], p["vy0"]], t)


# --------------------------------------------------------------------------- sleigh
@pytest.mark.parametrize("params", [{}, dict(M=2.5, I_C=0.7, F=1.7, alpha=0.4, u0=0.8,
                                             omega0=1.3, phi0=-0.3, x0=0.2, y0=-0.1)])
def test_sleigh_gauss_step_against_closed_form(params):
    pb = sleigh.build(**params)
    te = np.linspace(0.0, 20.0, 401)
    tr = pb.simulate("closed_form", rtol=TOL, atol=TOL, t_eval=te)
    assert tr.success
    out, ref = pb.outputs(tr.q, tr.v), pb.reference(te)
    keys = ("x", "y", "phi", "w1", "w2")
    err = max(np.abs(out[k] - ref[k]).max() for k in keys)
    # integration_bound (dense output) with the exact flow's growth over 20 s, from the
    # closed form as a function of (x0, y0, phi0, u0, omega0) (an error in phi' shifts the
    # heading linearly in time); w1 and w2 are unit combinations of the velocities
    p = pb.params
    names = ("x0", "y0", "phi0", "u0", "omega0")
    growth = flow_growth(lambda y0, ts: np.array(list(sleigh.reference(
        ts, **{**params, **dict(zip(names, y0))}).values())), [p[k] for k in names], te)
    assert err < integration_bound(tr, growth, dense=True)
    # E = T - F . q is a first integral: sum of the local errors weighted by |grad E|_1
    gradE = (p["M"] * np.abs(tr.v[:, :2]).sum(axis=1).max() + p["I_C"] * np.abs(tr.v[:, 2]).max()
             + p["F"] * (abs(np.cos(p["alpha"])) + abs(np.sin(p["alpha"]))))
    assert np.abs(tr.energy_drift).max() < gradE * integration_bound(tr, dense=True)
    # the projection's target |f| / |f_v| <= 1e-15 (1 + max|v_i|) (|f_v| = 1) plus the
    # rounding of f = -x' sin phi + y' cos phi: 3 eps (|x'| + |y'|)
    vmax = np.abs(tr.v).max()
    assert tr.velocity_residual.max() < 1e-15 * (1 + vmax) + 3 * EPS * 2 * vmax


def test_sleigh_reference_is_consistent_with_its_reduced_equations():
    # the closed form against the reduced ODE (the path reference() takes for L_C != 0)
    p = dict(M=2.5, F=1.7, alpha=0.4, u0=0.8, omega0=1.3, phi0=-0.3)
    te = np.linspace(0.0, 6.0, 61)
    closed = sleigh.reference(te, **p)
    ode = sleigh.reference(te, **p, L_C=1e-300)      # takes the ODE branch; moment negligible
    # The ODE branch is DOP853 at rtol = atol = 1e-13 on z = (x, y, phi, w1, w2): global
    # error below growth * N 2 sqrt(5) 1e-13 (1 + max|z|) (N its steps, counted by the same
    # solve_ivp call; growth of the exact flow over [0, 6] from the closed form); the
    # closed form rounds to ~8 eps of its largest term (|x0| + |A0| / W + |K| (1 + t)).
    M, F, al, W = p["M"], p["F"], p["alpha"], p["omega0"]
    f = (lambda _, z: [z[3] * np.cos(z[2]), z[3] * np.sin(z[2]), z[4],
                       F / M * np.cos(z[2] - al), 0.0])
    z0 = [0.0, 0.0, p["phi0"], p["u0"], W]
    steps = ivp_steps(f, (0.0, 6.0), z0, (), rtol=1e-13, atol=1e-13)
    names = ("x0", "y0", "phi0", "u0", "omega0")
    growth = flow_growth(lambda y0, ts: np.array(list(sleigh.reference(
        ts, **{**p, **dict(zip(names, y0))}).values()))[:5], z0, te)
    zmax = max(np.abs(closed[k]).max() for k in ("x", "y", "phi", "w1"))
    K = F / (M * W)
    bound = (growth * steps * 2 * np.sqrt(5) * 1e-13 * (1 + zmax)
             + 8 * EPS * (zmax + (abs(p["u0"]) + 2 * abs(K)) / abs(W) + abs(K) * 7.0))
    for k in ("x", "y", "phi", "w1"):
        assert np.abs(closed[k] - ode[k]).max() < bound
    # and the W = 0 branch (no rotation): uniformly accelerated along the axis (closed
    # forms on both sides, ~4 roundings each)
    r = sleigh.reference([2.0], M=2.0, F=3.0, alpha=0.0, omega0=0.0, u0=1.0, phi0=0.5)
    assert r["w1"][0] == pytest.approx(1.0 + 1.5 * np.cos(0.5) * 2.0, rel=8 * EPS)


def test_sleigh_module_errors():
    with pytest.raises(ModelError, match="formulation"):
        sleigh.build(formulation="quasi")
    with pytest.raises(ModelError, match="formulation"):
        sleigh.run("euler")
    with pytest.raises(ModelError, match="unknown sleigh parameter"):
        sleigh.build(mass=2.0)
    with pytest.raises(ModelError, match="`M` must be positive"):
        sleigh.build(M=0.0)
    with pytest.raises(ModelError, match="`form`"):
        sleigh.routh_rhs(0.0, np.zeros(6), form="cot")


# --------------------------------------------------------------------------- Appell-Hamel
AH = dict(m=1.7, a=1.3, b=0.6, vx0=-2.0, vy0=1.5, x0=0.4, y0=-0.3, z0=0.2)


@pytest.mark.parametrize("params", [{}, AH])
def test_appell_hamel_gauss_is_the_analytic_chetaev_motion(params):
    pb = ah.build(**params)
    p = {**ah.DEFAULTS, **params}
    k, s0 = p["b"] / p["a"], np.hypot(p["vx0"], p["vy0"])
    rate = -p["g"] * p["a"] * p["b"] / (p["a"] ** 2 + p["b"] ** 2)
    # the same closed form written two ways: ~10 roundings on each side, no cancellation
    assert pb.t_span[1] == pytest.approx(0.98 * s0 / -rate, rel=20 * EPS)
    if not params:
        assert pb.t_span[1] == pytest.approx(0.98 * 5 / 3.92, rel=20 * EPS)  # s = 0 at 1.2755 s
    tr = pb.simulate("closed_form")
    assert tr.success
    out, ref = pb.outputs(tr.q, tr.v), pb.reference(tr.t)
    # Error estimate: DOP853 keeps every local error below sqrt(2n) (atol + rtol |y_i|)
    # per component (its RMS error norm <= 1, 2n = 6 components), and the motion is
    # stable (a lateral velocity decays like s(t), see below), so the global error of
    # any component, and of a unit combination of two, is below the sum of the local
    # errors: N_steps * 2 sqrt(2n) (atol + rtol max|y|).
    rtol, atol = pb.settings["rtol"], pb.settings["atol"]
    ymax = max(np.abs(tr.q).max(), np.abs(tr.v).max())
    glob = tr.stats["steps"] * 2 * np.sqrt(6) * (atol + rtol * ymax)
    assert max(np.abs(out[key] - ref[key]).max() for key in out) < glob   # measured 4.4e-15
    # the projection targets |f| / |f_v| <= 1e-15 (1 + |v|); evaluating f = z' - k s
    # rounds to ~4 eps (|z'| + k s): 2e-14 covers both with a margin of 3
    vmax = np.abs(tr.v).max()
    assert tr.velocity_residual.max() < 3 * (1e-15 * (1 + vmax) * np.sqrt(1 + k * k)
                                             + 4 * np.finfo(float).eps * 2 * vmax)
    # ideal constraint: E is conserved up to the integration error of the state,
    # |dE| <= (m |v| + m g) * glob
    assert np.abs(tr.energy_drift).max() < (p["m"] * vmax + p["m"] * p["g"]) * glob
    # the horizontal speed decreases linearly at rate -g a b / (a^2 + b^2); heading fixed
    assert np.abs(out["s"] - (s0 + rate * tr.t)).max() < glob
    th0 = np.arctan2(p["vy0"], p["vx0"])
    lateral = -tr.v[:, 0] * np.sin(th0) + tr.v[:, 1] * np.cos(th0)   # velocity across the heading
    # A lateral velocity u obeys u' = (s'/s) u (the constraint force turns it away), so
    # it decays like s(t): no error is amplified and |u| stays below the integrator's
    # bound; in the last steps h s'/s ~ -11 lies outside DOP853's stability interval, so
    # rounding there is amplified up to that bound (measured 2.5e-14 and 1.7e-13).
    assert np.abs(lateral).max() < glob
    # the Gauss multiplier is m g / (1 + k^2), whatever the state: the recomputed constraint
    # force errs only by the verified step (force_error_bound), the expected value by 4 eps
    lam = tr.multipliers[:, 0] / np.sqrt(1 + k * k)          # row f_v has norm sqrt(1 + k^2)
    _, dQ = step_errors(pb.system, tr, direct_tolerance(3, 1))
    Qz = p["m"] * p["g"] / (1 + k * k)
    assert np.all(np.abs(tr.constraint_force[:, 2] - Qz) <= dQ + 4 * EPS * Qz)
    assert np.all(np.isfinite(lam))


@pytest.mark.parametrize("force", [None, "parallel"])
def test_three_models_agree_on_straight_line_motions(force):
    params = dict(AH)
    if force == "parallel":           # along the initial horizontal velocity: path stays straight
        d = np.array([AH["vx0"], AH["vy0"]]) / np.hypot(AH["vx0"], AH["vy0"])
        params.update(fx=0.8 * d[0], fy=0.8 * d[1])
    pb = ah.build(**params)
    te = np.linspace(0.0, pb.t_span[1], 101)
    ref = ah.reference(te, "chetaev", **params)
    gauss = pb.simulate("closed_form", t_eval=te)
    runs = {"gauss": gauss}
    m, k, s0 = params["m"], params["b"] / params["a"], np.hypot(params["vx0"], params["vy0"])
    for form in ("derived", "printed"):
        runs[f"chetaev_{form}"] = ah.simulate_model("chetaev", form, t_eval=te, **params)
        runs[f"new_{form}"] = ah.simulate_model("new", form, t_eval=te, **params)
        for lam0 in (0.0, 0.7, -1.3, 2 * m * s0 / k):      # any lam0 != m s0 / k
            runs[f"vak_{form}_{lam0}"] = ah.simulate_model("vakonomic", form, lam0, t_eval=te,
                                                           **params)
    # Every run (gaussopt's and solve_ivp's, rtol = atol = 1e-12, t_eval: dense output)
    # against the closed-form straight line: integration_bound, the step count of the
    # solve_ivp runs counted by repeating them (ah_model_steps); the motion does not
    # amplify errors (a lateral velocity decays like s(t) for Chetaev, stays constant
    # for the new model, and for the vakonomic model the conserved horizontal momentum
    # keeps it bounded), so growth = 1 as in the test above.
    for name, tr in runs.items():
        assert tr.success, name
        out = ah.outputs(tr.q, tr.v)
        err = max(np.abs(out[key] - ref[key]).max() for key in out)
        if name == "gauss":
            bound = integration_bound(tr, dense=True)
        else:
            model, form = name.split("_")[:2]
            model = "vakonomic" if model == "vak" else model
            lam0 = float(name.split("_")[-1]) if model == "vakonomic" else 0.0
            bound = integration_bound(tr, dense=True, steps=ah_model_steps(
                model, lam0, params, te[-1], form))
        assert err < bound, (name, err, bound)                         # measured <= 4.9e-14


OBLIQUE = dict(m=1.7, a=1.3, b=0.6, fx=1.1, fy=-0.9, vx0=2.0, vy0=1.0)


@pytest.fixture(scope="module")
def oblique():
    pb = ah.build(**OBLIQUE)
    te = np.linspace(0.0, pb.t_span[1], 101)
    return pb, te, pb.simulate("closed_form", t_eval=te)


def test_oblique_force_gauss_against_reduced_chetaev(oblique):
    pb, te, tr = oblique
    # the same (deterministic) event location twice, times 0.98 or (1 - 0.02): 2 roundings
    assert pb.t_span[1] == pytest.approx(0.98 * ah.stop_time(**OBLIQUE), rel=2 * EPS)
    out = pb.outputs(tr.q, tr.v)
    s0 = np.hypot(OBLIQUE["vx0"], OBLIQUE["vy0"])
    assert 0.0 < out["s"][-1] < 0.05 * s0                     # just before s vanishes
    ref = ah.reference(te, "chetaev", **OBLIQUE)
    # integration_bound (dense output) with the exact flow's growth (from the reduced
    # reference in (s, heading)) and the reference's own error (DOP853 at 1e-13)
    growth = ah_growth(OBLIQUE, te)
    err = max(np.abs(out[key] - ref[key]).max() for key in out)
    assert err < integration_bound(tr, growth, dense=True, ref_tol=1e-13)  # measured 7e-13
    # the projection's target |f| / |f_v| <= 1e-15 (1 + max|v_i|), |f_v| = sqrt(1 + k^2),
    # plus the rounding of f = z' - k s: 4 eps (|z'| + k s)
    k, vmax = OBLIQUE["b"] / OBLIQUE["a"], np.abs(tr.v).max()
    assert tr.velocity_residual.max() < (1e-15 * (1 + vmax) * np.sqrt(1 + k * k)
                                         + 4 * EPS * 2 * vmax)
    # E = T + m g z - fx x - fy y is a first integral: local errors weighted by |grad E|_1
    m, g = OBLIQUE["m"], ah.DEFAULTS["g"]
    gradE = m * np.abs(tr.v).sum(axis=1).max() + m * g + abs(OBLIQUE["fx"]) + abs(OBLIQUE["fy"])
    assert np.abs(tr.energy_drift).max() < gradE * integration_bound(tr, dense=True)
    heading = np.unwrap(np.arctan2(tr.v[:, 1], tr.v[:, 0]))
    assert np.ptp(heading) > 0.5                                          # the path curves


def test_oblique_force_models_differ(oblique):
    pb, te, gauss = oblique
    g_out = ah.outputs(gauss.q, gauss.v)
    k = pb.params["b"] / pb.params["a"]
    final, bounds = {}, {}
    gauss_bound = integration_bound(gauss, ah_growth(OBLIQUE, te), dense=True)
    for model, lam0 in (("chetaev", 0.0), ("new", 0.0), ("vakonomic", 0.0), ("vakonomic", 1.0)):
        tr = ah.simulate_model(model, "derived", lam0, t_eval=te, **OBLIQUE)
        assert tr.success
        out = ah.outputs(tr.q, tr.v)
        own = ah.reference(te, model, lam0, **OBLIQUE)      # its polar reduced equations
        # integration_bound of the solve_ivp run (steps counted by repeating it) with the
        # model's own flow growth, plus its reference's error (DOP853 at 1e-13)
        bounds[(model, lam0)] = integration_bound(
            tr, ah_growth(OBLIQUE, te, model, lam0), dense=True, ref_tol=1e-13,
            steps=ah_model_steps(model, lam0, OBLIQUE, te[-1]))
        assert max(np.abs(out[key] - own[key]).max() for key in out) < bounds[(model, lam0)], model
        final[(model, lam0)] = np.hypot(out["x"][-1] - g_out["x"][-1], out["y"][-1] - g_out["y"][-1])
        # z' is set to k s from the integrated (x', y'): two roundings of k s
        assert np.all(np.abs(tr.v[:, 2] - k * out["s"]) <= 2 * EPS * k * out["s"])
    # derived eq. (37) == Gauss: the two runs' bounds (x and y: a factor sqrt(2))
    assert final[("chetaev", 0.0)] < np.sqrt(2) * (bounds[("chetaev", 0.0)] + gauss_bound)
    # Qualitative: the models differ by O(1e-2) (exact-model differences, 1.2e-2 and 3.1e-2
    # from the reduced equations, known to the bounds above, ~1e-9): a decade either side
    assert 5e-3 < final[("new", 0.0)] < 5e-2
    assert 1e-2 < final[("vakonomic", 0.0)] < 1e-1
    assert abs(final[("vakonomic", 1.0)] - final[("vakonomic", 0.0)]) > 1e-3   # depends on lam0


def test_paper_printed_chetaev_coefficient_differs_from_gauss_with_a_force(oblique):
    _, te, gauss = oblique
    tr = ah.simulate_model("chetaev", "printed", t_eval=te, **OBLIQUE)
    out, g_out = ah.outputs(tr.q, tr.v), ah.outputs(gauss.q, gauss.v)
    err = max(np.abs(out[key] - g_out[key]).max() for key in out)
    assert err > 1e-2          # exact-model difference 2.8e-2 (reduced equations), not rounding


def test_vakonomic_singular_at_zero_horizontal_momentum():
    m, k, s0 = AH["m"], AH["b"] / AH["a"], np.hypot(AH["vx0"], AH["vy0"])
    tr = ah.simulate_model("vakonomic", "derived", m * s0 / k, **AH)
    assert not tr.success and "singular" in tr.message


def test_appell_hamel_errors():
    with pytest.raises(ModelError, match="initial horizontal velocity"):
        ah.build(vx0=0.0, vy0=0.0)
    with pytest.raises(ModelError, match="unknown Appell-Hamel parameter"):
        ah.build(c=1.0)
    with pytest.raises(ModelError, match="`model`"):
        ah.model_rhs(0.0, np.ones(5), "hamel")
    with pytest.raises(ModelError, match="never vanishes"):
        ah.build(fx=9.0, vx0=1.0, vy0=0.0)           # pushed along the motion harder than g k


# --------------------------------------------------------------------------- second order
@pytest.mark.parametrize("params", [{}, dict(m=2.3, g=7.1, v0=(0.6, -0.9, 1.4),
                                             q0=(0.3, 0.2, -0.1), t_end=4.0)])
def test_second_order_particle_constant_speed_and_closed_form(params):
    pb = sop.build(**params)
    tr = pb.simulate("closed_form")
    assert tr.success and tr.t[-1] == pb.t_span[1]
    out, ref = pb.outputs(tr.q, tr.v), pb.reference(tr.t)
    c = np.linalg.norm(pb.v0)
    # The speed is a first integral of the exact motion (v . a = 0): its error is a sum of
    # local errors weighted by |grad |v||_1 <= sqrt(3) < 2, never amplified (no projection:
    # the constraint is at the acceleration level)
    glob = integration_bound(tr, dense=True)
    assert np.abs(out["speed"] - c).max() < glob                           # measured 8e-12
    # the state against the closed form: integration_bound with the exact flow's growth
    # (velocity errors carried into the positions grow linearly in time), from the closed
    # form as a function of (q0, v0)
    q0, v0, g = np.asarray(pb.q0), np.asarray(pb.v0), pb.params["g"]
    growth = flow_growth(lambda y0, ts: np.array(
        list(sop.reference(ts, y0[:3], y0[3:], g).values())[:6]), np.r_[q0, v0], tr.t)
    assert max(np.abs(out[key] - ref[key]).max() for key in ("x", "y", "z")) < growth * glob
    assert max(np.abs(out[key] - ref[key]).max() for key in ("vx", "vy", "vz")) < growth * glob
    # E = m |v|^2 / 2 (kinetic): a first integral, local errors weighted by m |v|_1
    m = pb.params["m"]
    assert np.abs(tr.energy_drift).max() < m * np.abs(tr.v).sum(axis=1).max() * glob
    # the constraint force cancels gravity's component along the velocity: the expected
    # force is evaluated at the same (numerical) states, so only the verified step
    # (force_error_bound) and the rounding of m g vhat_z vhat (~6 eps m g) differ
    vhat = tr.v / np.linalg.norm(tr.v, axis=1)[:, None]
    expected = m * g * vhat[:, 2:3] * vhat
    _, dQ = step_errors(pb.system, tr, direct_tolerance(3, 1))
    assert np.all(np.abs(tr.constraint_force - expected).max(axis=1) <= dQ + 6 * EPS * m * g)
    if not params:
        # turns down in the x-z plane towards a vertical fall at the constant speed sqrt(5):
        # y' = 0 and a_y = 0 exactly (no force, no constraint force across the x-z plane)
        assert np.abs(tr.q[:, 1]).max() == 0.0
        # at t = 5, v_z = -sqrt(5) tanh(tau), 1 - tanh(tau) ~ 2 exp(-2 tau) < 1e-18: the
        # state error alone
        assert tr.v[-1, 2] == pytest.approx(-np.sqrt(5.0), abs=growth * glob)


def test_second_order_reference_special_cases():
    r = sop.reference([1.5], v0=(0.0, 0.0, -2.0))          # vertical: straight, no gravity effect
    assert r["z"][0] == pytest.approx(-3.0, rel=EPS) and r["vz"][0] == -2.0   # -2 * 1.5
    with pytest.raises(ModelError, match="nonzero"):
        sop.reference([1.0], v0=(0.0, 0.0, 0.0))


def test_appell_hamel_symbolic_matches_handwritten():
    """The problem's system comes from its Lagrangian; the hand-written one agrees."""
    from gaussopt_problems import appell_hamel as ah

    params = dict(m=1.3, a=1.1, b=0.45, fx=0.7, fy=-0.4)
    sym, hand = ah.system(**params), ah.system_handwritten(**params)
    rng = np.random.default_rng(3)
    for _ in range(20):
        t, q, v = rng.uniform(-1, 1), rng.uniform(-3, 3, 3), rng.uniform(-4, 4, 3)
        # constant entries (m, fx, fy, -m g): equal up to one rounding of m g
        np.testing.assert_allclose(sym.mass(t, q), hand.mass(t, q), rtol=EPS)
        np.testing.assert_allclose(sym.force(t, q, v), hand.force(t, q, v), rtol=EPS)
        A, b = sym.rows(t, q, v)
        Ah, bh = hand.rows(t, q, v)
        # f_v = (-k x'/s, -k y'/s, 1): the compiled formula and the complex step of
        # z' - k sqrt(x'^2 + y'^2) each round to a few ulps (sqrt, products, a division):
        # 8 eps relative per entry
        np.testing.assert_allclose(A, Ah, rtol=8 * EPS, atol=0)
        # gamma = -(f_q v + f_t) = 0 exactly (f depends on v only)
        np.testing.assert_array_equal(b, 0.0)
        np.testing.assert_array_equal(bh, 0.0)
