"""Paper 004's second-order example (q' . q'' = 0 under gravity) in its three models:
``gaussopt_problems.second_order_particle.build(form="gauss" | "vakonomic" | "new")``.

Independent references, written out here from the models' equations (not from the
module): each model's acceleration-level equations solved as a small linear system
at every right-hand side and integrated by solve_ivp (DOP853, rtol = atol = 1e-13):

* gauss:      m a = F + Lam v,              v . a = 0        (unknowns a, Lam)
* vakonomic:  F - m a + mu a + mu' v = 0,   v . a = 0        (paper 004 (31), mu = lam'; unknowns a, mu')
* new:        m a_x = F_x, m a_y = F_y,     v . a = 0        (eq. (29) with z dependent)

and the module's closed forms are checked against the same references.

Measured (gaussopt 0.1.0, DOP853 at rtol = atol = 1e-12, 5 s unless stated):
gaussopt against the reduced references 8.7e-12 (gauss), 4.4e-12 (vakonomic,
lam_dot0 = 0), 1e-14 (new: a straight line); the module's closed forms against
them ~1e-13; vakonomic invariants (momentum p - F t, energy) 3e-12. Differences
between the models at t = 1 s (defaults): vakonomic - gauss 0.65 m, new - gauss
2.75 m; at t = 5 s 0.54 m and 20.0 m. With g = 0 (the paper's case) all three are
the same uniform straight line (differences ~1e-14).

Tolerances are derived from the runs' error control (test_trajectory.integration_bound,
times the growth of errors along the exact motion, test_trajectory.flow_growth), never
fitted to the measurements above.
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from gaussopt.core.exceptions import ModelError
from gaussopt_problems import second_order_particle as sop
from test_step_properties import (direct_tolerance, force_error_bound, multiplier_error_bound,
                                  step_error_bound)
from test_trajectory import EPS, flow_growth, integration_bound

REF_TOL = 1e-13
# non-unit parameters (a forgotten factor m, g or |v_h| hides behind 1)
OTHER = dict(m=1.3, g=7.1, v0=(0.6, -0.9, 1.4), q0=(0.3, 0.2, -0.1), t_end=4.0)


# --------------------------------------------------------------------------- references
def reduced_rhs(t, y, form, m, g):
    """State y = (q, v) (+ mu = lam' for vakonomic); the model's equations solved for a."""
    v = y[3:6]
    F = np.array([0.0, 0.0, -m * g])
    if form == "gauss":            # [m I, -v; v^T, 0] (a, Lam) = (F, 0)
        K = np.block([[m * np.eye(3), -v[:, None]], [v[None, :], np.zeros((1, 1))]])
        a = np.linalg.solve(K, np.r_[F, 0.0])[:3]
        return np.r_[v, a]
    if form == "vakonomic":        # (m - mu) a - mu' v = F, v . a = 0  (unknowns a, mu')
        mu = y[6]
        K = np.block([[(m - mu) * np.eye(3), -v[:, None]], [v[None, :], np.zeros((1, 1))]])
        sol = np.linalg.solve(K, np.r_[F, 0.0])
        return np.r_[v, sol[:3], sol[3]]
    ah = F[:2] / m                 # new: x, y free; z from the constraint
    return np.r_[v, ah, -(v[:2] @ ah) / v[2]]


def reduced(form, t, q0, v0, m, g, lam_dot0=0.0):
    """(sol, y(t)) of the reduced equations at REF_TOL."""
    y0 = np.r_[q0, v0] if form != "vakonomic" else np.r_[q0, v0, lam_dot0]
    sol = solve_ivp(reduced_rhs, (0.0, float(t[-1])), y0, method="DOP853", rtol=REF_TOL,
                    atol=REF_TOL, dense_output=True, args=(form, m, g))
    assert sol.success
    return sol, sol.sol(t)


def ref_bound(sol, growth):
    """integration_bound's estimate for the reference run: N_steps + 1 (dense output)
    local errors of at most 2 sqrt(n2) (atol + rtol max|y|) each, times the growth."""
    n2 = sol.y.shape[0]
    return growth * sol.t.size * 2 * math.sqrt(n2) * REF_TOL * (1 + np.abs(sol.y).max())


def closed_form_growth(form, pb, t):
    """flow_growth of the exact motion from the module's closed form as a function of
    (q0, v0) (+ lam_dot0): only a factor of the error bounds."""
    m, g = pb.params["m"], pb.params["g"]
    keys = ("x", "y", "z", "vx", "vy", "vz") + (("lam_dot",) if form == "vakonomic" else ())

    def ref(y0, ts):
        r = sop.reference(ts, y0[:3], y0[3:6], g, form, m, *(y0[6:] if form == "vakonomic" else ()))
        return np.array([r[k] for k in keys])
    y0 = np.r_[pb.params["q0"], pb.params["v0"]]
    if form == "vakonomic":
        y0 = np.r_[y0, pb.params["lam_dot0"]]
    return flow_growth(ref, y0, t)


CASES = [("gauss", {}), ("vakonomic", {}), ("new", {}),
         ("gauss", OTHER), ("vakonomic", {**OTHER, "lam_dot0": -1.7}),
         ("vakonomic", {"lam_dot0": 2.5}), ("new", OTHER)]


@pytest.mark.parametrize("form,params", CASES,
                         ids=[f"{f}-{'default' if not p else ','.join(p)}" for f, p in CASES])
def test_form_matches_its_reduced_equations(form, params):
    """Each form's gaussopt system (closed_form step) against the model's own reduced
    equations integrated by scipy, and the module's closed form against the same."""
    pb = sop.build(form=form, **params)
    tr = pb.simulate("closed_form")
    assert tr.success and tr.t[-1] == pb.t_span[1]
    m, g = pb.params["m"], pb.params["g"]
    q0, v0 = np.asarray(pb.params["q0"]), np.asarray(pb.params["v0"])
    sol, Y = reduced(form, tr.t, q0, v0, m, g, pb.params["lam_dot0"])
    growth = closed_form_growth(form, pb, tr.t)
    # both runs' global errors: local errors admitted by their error control, carried by
    # the exact flow (growth); outputs interpolated (dense)
    tol = integration_bound(tr, growth, dense=True) + ref_bound(sol, growth)
    state = np.c_[tr.q[:, :3], tr.v[:, :3]] if form != "vakonomic" else \
        np.c_[tr.q[:, :3], tr.v[:, :3], tr.q[:, 3]]
    assert np.abs(state - Y.T).max() < tol
    # the module's closed form (used by the notebook and compare) against the same reference
    ref = pb.reference(tr.t)
    keys = ("x", "y", "z", "vx", "vy", "vz") + (("lam_dot",) if form == "vakonomic" else ())
    closed = np.array([ref[k] for k in keys])
    assert np.abs(closed - Y).max() < ref_bound(sol, growth) + 64 * EPS * (1 + np.abs(Y).max())
    # the speed is a first integral of every form: local errors weighted by |grad |v||_1
    # <= sqrt(3) < 2, never amplified
    c = np.linalg.norm(v0)
    assert np.abs(pb.outputs(tr.q, tr.v)["speed"] - c).max() < 2 * integration_bound(tr, dense=True)


def test_vakonomic_step_is_paper_eq_31_and_keeps_its_invariants():
    """Along the gaussopt run: the residual of eq. (31) (with mass and gravity), the speed
    row's multiplier equal to lam'' (as (31) demands), the momentum p = (m - lam') v - F t
    and the energy (m/2 - lam') |v|^2 + m g z constant."""
    params = {**OTHER, "lam_dot0": -1.7}
    pb = sop.build(form="vakonomic", **params)
    tr = pb.simulate("closed_form")
    m, g = params["m"], params["g"]
    F = np.array([0.0, 0.0, -m * g])
    mu, mu_d, a, v = tr.q[:, 3], tr.v[:, 3], tr.a[:, :3], tr.v[:, :3]
    # the nonholonomic row's residual f = mu' + F.v/|v|^2 at the run's states (the exact step
    # at a state with f != 0 still solves (31) with mu' replaced by mu' - f)
    f = mu_d + (v @ F) / (v * v).sum(axis=1)
    tau = direct_tolerance(4, 2)
    bounds = []
    for t, q, vv, aa in zip(tr.t, tr.q, tr.v, tr.a):
        M, Fs = pb.system.mass(t, q), pb.system.force(t, q, vv)
        A, b = pb.system.rows(t, q, vv)
        da = step_error_bound(M, Fs, A, b, aa, tau)
        dQ = force_error_bound(M, Fs, aa, da)
        bounds.append((da, dQ, multiplier_error_bound(A, M @ aa - Fs, dQ, tau)))
    da, dQ, dlam = np.array(bounds).T
    # (31): F - m q'' + lam' q'' + lam'' q' = 0 at the run's states: the step's error
    # |m - mu| da, the residual f times |v|, and the rounding of this residual (4 products
    # and sums per component, 8 eps of its terms' size)
    scale = np.abs(m - mu) * np.abs(a).max(axis=1) + m * g + np.abs(mu_d) * np.abs(v).max(axis=1)
    res = F - (m - mu)[:, None] * a + mu_d[:, None] * v
    allowed = np.abs(m - mu) * da + np.abs(f) * np.linalg.norm(v, axis=1) + 8 * EPS * scale
    assert np.all(np.abs(res).max(axis=1) <= allowed)
    # the speed row's multiplier is lam'' (the massless coordinate's row carries none):
    # up to the multipliers' error bound and the row residual f
    assert np.all(np.abs(tr.multipliers[:, 0] - mu_d) <= dlam + np.abs(f))
    assert np.all(np.abs(tr.multipliers[:, 1]) <= dlam)
    # invariants: sums of local errors weighted by their gradients (p: |m - mu| + |v| + 1
    # per component; E: |m - 2 mu| |v|_1 + |v|^2 + m g), not amplified
    glob = integration_bound(tr, dense=True)
    p = (m - mu)[:, None] * v - F * tr.t[:, None]
    wp = (np.abs(m - mu) + np.abs(v).sum(axis=1) + 1).max()
    assert np.abs(p - p[0]).max() < wp * glob
    wE = (np.abs(m - 2 * mu) * np.abs(v).sum(axis=1) + (v * v).sum(axis=1) + m * g).max()
    assert np.abs(tr.energy_drift).max() < wE * glob


def test_forms_agree_without_gravity_and_differ_with_it():
    """Paper 004's case (unit mass, no gravity): all three models give the uniform
    straight line. With gravity they part: their differences from the Gauss motion equal
    those of the independent reduced references."""
    v0 = np.array([0.6, -0.9, 1.4])
    runs = {f: sop.build(form=f, g=0.0, v0=v0, t_end=2.0).simulate("closed_form") for f in sop.FORMS}
    for f, tr in runs.items():
        line = np.asarray(tr.q[:, :3]) - (v0 * tr.t[:, None])
        # uniform motion: DOP853 integrates it exactly up to the rounding of the local
        # errors; integration_bound covers both
        assert np.abs(line).max() < integration_bound(tr, dense=True)
        assert np.abs(tr.v[:, :3] - v0).max() < integration_bound(tr, dense=True)
    pbs = {f: sop.build(form=f) for f in sop.FORMS}
    trs = {f: pb.simulate("closed_form") for f, pb in pbs.items()}
    t = trs["gauss"].t
    sols, refs = {}, {}
    for f in sop.FORMS:
        sols[f], Y = reduced(f, t, np.zeros(3), np.array([1.0, 0.0, 2.0]), 1.0, sop.G)
        refs[f] = Y[:3]
    for f in ("vakonomic", "new"):
        assert np.array_equal(trs[f].t, t)
        d_run = trs[f].q[:, :3] - trs["gauss"].q[:, :3]
        d_ref = (refs[f] - refs["gauss"]).T
        # each run within its bound of its reference (as in the test above)
        tol = sum(integration_bound(trs[k], closed_form_growth(k, pbs[k], t), dense=True)
                  + ref_bound(sols[k], closed_form_growth(k, pbs[k], t)) for k in (f, "gauss"))
        assert np.abs(d_run - d_ref).max() < tol
        # and the difference is physical, not numerical: at t = 1 s at least 0.5 m
        # (vakonomic: 0.65 m, new: 2.75 m; both smooth in t, ~1e10 times tol)
        i1 = np.searchsorted(t, 1.0)
        assert np.linalg.norm(d_ref[i1]) > 0.5
    # vakonomic with lam'(0) = 0 starts with Gauss's acceleration (both g_vec minus its
    # component along v): equal up to the two verified steps' error bounds
    da0 = 0.0
    for f, (n, k) in (("gauss", (3, 1)), ("vakonomic", (4, 2))):
        tr, sysm = trs[f], pbs[f].system
        M, F = sysm.mass(0.0, tr.q[0]), sysm.force(0.0, tr.q[0], tr.v[0])
        da0 += step_error_bound(M, F, *sysm.rows(0.0, tr.q[0], tr.v[0]), tr.a[0],
                                direct_tolerance(n, k))
    assert np.abs(trs["gauss"].a[0] - trs["vakonomic"].a[0, :3]).max() <= da0
    # the new model's motion is the straight line q0 + v0 t: its constraint force, on z only,
    # cancels gravity (m a - F = (0, 0, m g)); the Gauss one turns down
    assert np.abs(trs["new"].a).max() < direct_tolerance(3, 1) * sop.G
    assert trs["gauss"].q[-1, 2] < 0 < trs["new"].q[-1, 2]


def test_form_errors():
    with pytest.raises(ModelError, match=r"`form` must be one of \('gauss', 'vakonomic', 'new'\)"):
        sop.build(form="chetaev")
    with pytest.raises(ModelError, match="singular"):
        sop.build(form="vakonomic", lam_dot0=1.0)          # = m
    with pytest.raises(ModelError, match="vakonomic' only"):
        sop.build(lam_dot0=0.5)
    with pytest.raises(ModelError, match="nonzero z"):
        sop.build(form="new", v0=(1.0, 2.0, 0.0))
    with pytest.raises(ModelError, match="nonzero"):
        sop.build(form="vakonomic", v0=(0.0, 0.0, 0.0))


def test_build_docstring_documents_every_parameter():
    """numpydoc "Parameters": every argument of build() with a unit in brackets or its
    allowed values in braces (read by `gaussopt show`)."""
    doc = inspect.getdoc(sop.build)
    section = doc.split("Parameters\n----------\n", 1)[1].split("\n\n", 1)[0]
    entries = {name: typ + body for name, typ, body in
               re.findall(r"^(\w+) : ([^\n]*)\n((?:    [^\n]*\n?)*)", section, flags=re.M)}
    assert set(entries) == set(inspect.signature(sop.build).parameters)
    for name, text in entries.items():
        assert re.search(r"\[[^\]]+\]", text) or "{" in text, name
