"""Contact problems with many points: Lemke's algorithm and the LCP path of the contact problem.

* ``gaussopt.gauss.lcp.lemke`` on random positive semi-definite LCPs: the returned ``z``
  meets ``z >= 0``, ``w = M z + q >= 0``, ``z . w = 0`` (checked here from ``z``), and an
  LCP without a solution is refuted (None);
* the LCP path of ``solve_contact`` (more than ``ENUMERATE_MAX`` combinations of point
  states) against the enumeration of every combination on random frictional problems:
  the same accelerations wherever the enumeration proves them unique;
* a plank on 20 frictional points (a rigid body on a line, rows of rank 3: the forces
  are indeterminate): the contact problem at rest, pushed below and above ``mu m g``,
  and sliding, against Newton-Euler's balance of the plank written here; and a run in
  which it slides until it stops (closed form ``t = v0 / (mu g)``,
  ``x = v0^2 / (2 mu g)``), and one on an incline above and below ``tan(beta) = mu``.

Tolerances: the contact problem's answers are rounding-accurate (a KKT solve of a few
dozen rows: 1e4 eps (n + m) of the forces' scale, 1e-10 m g with margin); the runs'
motions are polynomials in t integrated at rtol = atol = 1e-12 (states within
``integration_bound``, events within that over the slip rate's rate ``mu g``), as in
tests/test_contact_many.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gaussopt as go
import gaussopt.gauss.contact_cone as ccone
import gaussopt.gauss.contact_problem as cp
from gaussopt.gauss.lcp import lemke
from test_contact_cone import E, R, launch, rigid
from test_trajectory import integration_bound

G0 = 9.81
TOL = dict(rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- Lemke
@pytest.mark.parametrize("seed", range(6))
def test_lemke_solves_positive_semidefinite_lcps(seed):
    rng = np.random.default_rng(seed)
    for n in (1, 3, 10, 40, 150):
        L = rng.standard_normal((n, max(1, n // 2 if seed % 2 else n)))
        M = L @ L.T                                  # PSD, singular when seed is odd
        # a feasible q: q = w0 - M z0 with z0, w0 >= 0 (a solution exists)
        z0, w0 = rng.random(n) * (rng.random(n) < 0.5), rng.random(n)
        q = w0 - M @ z0
        z = lemke(M, q)
        assert z is not None
        w = M @ z + q
        scale = 1.0 + np.abs(M).max() * np.abs(z).max() + np.abs(q).max()
        # rounding of O(n) pivots of O(n) terms each
        tol = 1e3 * n * np.finfo(float).eps * scale
        assert z.min() >= 0.0 and w.min() >= -tol
        assert np.abs(z * w).max() <= tol * (1.0 + np.abs(z).max())


def test_lemke_with_a_compliance_solves_the_shifted_lcp_exactly():
    """``lemke_pair(M, q, compliance=c)`` solves ``LCP(q, M + c max|M| I)`` with the
    shifted matrix never formed in Python: the same pivots, hence the same numbers bit for
    bit, as the matrix formed here (the contact problem's regularization); and it still
    refuses non-finite input."""
    from gaussopt.gauss.lcp import lemke_pair

    rng = np.random.default_rng(7)
    for n in (1, 5, 37, 120):
        L = rng.standard_normal((n, max(1, n // 3)))
        M = L @ L.T
        q = rng.standard_normal(n)
        c = 1e-9
        a = lemke_pair(M, q, compliance=c)
        b = lemke_pair(M + c * np.abs(M).max() * np.eye(n), q)
        assert (a is None) == (b is None)
        if a is not None:
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="finite"):
        lemke_pair(np.array([[1.0, np.inf], [0.0, 1.0]]), np.array([-1.0, 1.0]),
                   compliance=1e-9)


def test_lemke_refutes_an_lcp_without_solution_and_checks_its_input():
    # w = z1 - z2 - 1 >= 0 and w2 = -z1 + z2 - 1 >= 0 add up to -2 >= 0: no solution
    M = np.array([[1.0, -1.0], [-1.0, 1.0]])
    assert lemke(M, np.array([-1.0, -1.0])) is None
    assert lemke(M, np.array([1.0, 2.0])).tolist() == [0.0, 0.0]       # q >= 0: z = 0
    with pytest.raises(ValueError, match="shape"):
        lemke(np.eye(2), np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        lemke(np.eye(2), np.array([-1.0, np.nan]))


# --------------------------------------------------------------------------- LCP vs enumeration
def random_problem(rng, ns, ks, tangents):
    """A random contact problem: n in range(*ns) coordinates, a positive definite M, k in
    range(*ks) points with tangent rows of shape (k, *tangents, n); no bilateral rows."""
    n, k = int(rng.integers(*ns)), int(rng.integers(*ks))
    L = rng.standard_normal((n, n))
    M = L @ L.T + 0.5 * np.eye(n)
    G, h = rng.standard_normal((k, n)), rng.standard_normal(k)
    T, s = rng.standard_normal((k, *tangents, n)), rng.standard_normal((k, *tangents))
    return M, rng.standard_normal(n), np.zeros((0, n)), np.zeros(0), G, h, T, s


@pytest.mark.parametrize("seed", range(4))
def test_lcp_path_agrees_with_the_enumeration(seed, monkeypatch):
    """Random frictional problems (mu 0, finite, inf): wherever the enumeration of every
    combination certifies a unique motion, the LCP path finds the same accelerations."""
    rng = np.random.default_rng(100 + seed)
    compared = 0
    for _ in range(40):
        M, F, A, b, G, h, T, s = random_problem(rng, (3, 7), (3, 6), ())
        mu = rng.choice([0.0, 0.3, 0.8, np.inf], size=G.shape[0])
        monkeypatch.setattr(cp, "ENUMERATE_MAX", 10 ** 9)
        try:
            every = cp.solve_contact(M, F, A, b, G, h, T, s, mu=mu)
        except cp.ContactSolveError:
            continue                  # no solution, or several motions: nothing to compare
        monkeypatch.setattr(cp, "ENUMERATE_MAX", 0)
        lcp = cp.solve_contact(M, F, A, b, G, h, T, s, mu=mu)
        scale = 1.0 + np.abs(every.x).max()
        # both answers come from the same certified KKT solve of one combination, each to
        # rounding (1e4 eps (n + k) of the scale ~ 2e-11, times the random M's condition,
        # at most ~1e2 here): 1e-9 of the scale
        assert np.abs(lcp.x - every.x).max() < 1e-9 * scale
        compared += 1
    assert compared >= 20


# --------------------------------------------------------------------------- a plank on 20 points
def plank_rows(k=20, b=0.5, h=0.05):
    """Rows of a plank (centre (x, y), angle 0) on the line y = 0 at k points of its bottom
    edge (x_i from -b to b, height h below the centre): gap accelerations ``y'' + x_i th''``,
    slip accelerations ``x'' + h th''``."""
    xs = np.linspace(-b, b, k)
    G = np.column_stack([np.zeros(k), np.ones(k), xs])
    T = np.column_stack([np.ones(k), np.zeros(k), np.full(k, h)])
    return xs, G, T


@pytest.mark.parametrize("case", ["rest", "pushed-holds", "pushed-slides", "sliding"])
def test_plank_on_twenty_points_balances_like_newton_euler(case):
    m, inertia, mu, h, k = 2.0, 0.2, 0.4, 0.05, 20
    xs, G, T = plank_rows(k, h=h)
    push = {"rest": 0.0, "pushed-holds": 0.7, "pushed-slides": 1.3, "sliding": 0.0}[case]
    push *= mu * m * G0
    slide = np.full(k, 1 if case == "sliding" else 0)
    M = np.diag([m, m, inertia])
    F = np.array([push, -m * G0, 0.0])
    sol = go.solve_contact(M, F, np.zeros((0, 3)), np.zeros(0), G, np.zeros(k), T, np.zeros(k),
                           mu=np.full(k, mu), slide=slide)
    N, tau = sol.nu, sol.tau
    fscale = 1e-10 * m * G0
    # Newton-Euler of the plank: m x'' = push + sum tau, m y'' = -m g + sum N,
    # I th'' = sum (x_i N_i + h tau_i) (the points are h below the centre)
    assert abs(m * sol.x[0] - push - tau.sum()) < fscale
    assert abs(m * sol.x[1] + m * G0 - N.sum()) < fscale
    assert abs(inertia * sol.x[2] - (xs @ N + h * tau.sum())) < fscale
    assert np.all(N >= -fscale) and np.all(np.abs(tau) <= mu * N + fscale)
    # the plank neither lifts nor tilts; it slides as Coulomb says (x from a KKT solve of
    # 3 coordinates and 40 rows of order 1: rounding ~1e2 eps of g = 2e-13 m/s2, < 1e-12 g)
    assert abs(sol.x[1]) < 1e-12 * G0 and abs(sol.x[2]) < 1e-12 * G0
    expected = {"rest": 0.0, "pushed-holds": 0.0, "pushed-slides": push / m - mu * G0,
                "sliding": -mu * G0}[case]
    assert sol.x[0] == pytest.approx(expected, abs=1e-12 * G0)
    if case in ("rest", "pushed-holds"):
        assert sol.indeterminate and set(sol.mode.tolist()) <= {cp.OPEN, cp.STICK}


def plank(mu, k=20, b=0.5, h=0.05, m=2.0, beta=0.0, push=0.0):
    """A plank (half length b, half height h, centre (x, y), angle th) lying on the line
    y = 0 on k points of its bottom edge; gravity tilted by beta (an incline along x);
    ``push``: a horizontal force ``push t`` through the centre."""
    xs = np.linspace(-b, b, k)

    def gap(t, q):
        x, y, th = q
        return y + xs * np.sin(th) - h * np.cos(th)

    def slip(t, q):
        x, y, th = q
        return x + xs * np.cos(th) + h * np.sin(th)

    bottom = go.Contact(gap, slip=slip, friction=mu, restitution=0.0, rheonomic=False,
                        name="bottom")
    inertia = m * (b * b + h * h) / 3

    def force(t, q, v):
        return np.array([push * t - m * G0 * math.sin(beta), -m * G0 * math.cos(beta), 0.0])
    return go.System(("x", "y", "th"), mass=np.diag([m, m, inertia]), force=force,
                     constraints=[bottom], name="plank")


def test_plank_on_twenty_points_slides_until_it_stops():
    mu, v0, h, m = 0.3, 1.5, 0.05, 2.0
    tr = go.simulate(plank(mu), (0.0, 1.0), [0.0, h, 0.0], [v0, 0.0, 0.0], **TOL)
    assert tr.success, tr.message
    t_stop = v0 / (mu * G0)
    stops = sorted({t for t, _, w in tr.meta["contact_transitions"] if w == "stick"})
    assert len(stops) == 1
    bound = integration_bound(tr)
    assert abs(stops[0] - t_stop) < bound / (mu * G0) + 4 * np.finfo(float).eps
    assert abs(stops[0] - t_stop) < 1e-9 * t_stop
    rest = tr.t > stops[0]
    slide = ~rest
    assert np.abs(tr.v[slide, 0] - (v0 - mu * G0 * tr.t[slide])).max() < bound
    assert np.abs(tr.q[rest, 0] - v0 ** 2 / (2 * mu * G0)).max() < 1e-8
    assert np.abs(tr.v[rest]).max() < bound
    # at rest on a flat floor the least-norm admissible friction is zero; the normal
    # forces carry m g (their distribution over 20 points is indeterminate)
    assert np.abs(tr.friction_forces[rest]).max() < 1e-10 * m * G0
    assert np.abs(tr.contact_forces[rest].sum(axis=1) - m * G0).max() < 1e-10 * m * G0
    scale = 1e-10 * m * G0
    assert np.all(tr.contact_forces >= -scale)
    assert np.all(np.abs(tr.friction_forces) <= mu * tr.contact_forces + scale)


def test_plank_on_twenty_points_pushed_until_it_slides():
    """A growing push k t: the 20 sticking points' forces are indeterminate, their group
    leaves the cones at k t = mu m g (the group event releases all 20 at once), then the
    plank slides with x'' = (k t - mu m g) / m: x = k (t - ts)^3 / (6 m) (closed form)."""
    mu, m, k = 0.3, 2.0, 5.0
    tr = go.simulate(plank(mu, push=k), (0.0, 2.0), [0.0, 0.05, 0.0], [0.0, 0.0, 0.0], **TOL)
    assert tr.success, tr.message
    ts = mu * m * G0 / k
    slides = sorted({t for t, _, w in tr.meta["contact_transitions"] if w == "slide +"})
    assert len(slides) == 1 and abs(slides[0] - ts) < 1e-9 * ts
    after = tr.t > slides[0]
    assert np.abs(tr.q[after, 0] - k * (tr.t[after] - ts) ** 3 / (6 * m)).max() < 1e-8
    assert np.abs(tr.q[~after, 0]).max() < 1e-12      # at rest: x'' = 0 to rounding
    scale = 1e-10 * m * G0
    assert np.all(np.abs(tr.friction_forces) <= mu * tr.contact_forces + scale)


def dropped_plank(k, mu=0.3, e=0.5, b=0.5, h=0.05, m=2.0):
    """A plank on k points of its bottom edge with restitution e, and its energy."""
    xs = np.linspace(-b, b, k)

    def gap(t, q):
        return q[1] + xs * np.sin(q[2]) - h * np.cos(q[2])

    def slip(t, q):
        return q[0] + xs * np.cos(q[2]) + h * np.sin(q[2])

    bottom = go.Contact(gap, slip=slip, friction=mu, restitution=e, rheonomic=False,
                        name="bottom")
    inertia = m * (b * b + h * h) / 3
    return go.System(("x", "y", "th"), mass=np.diag([m, m, inertia]), force=[0, -m * G0, 0],
                     constraints=[bottom], name="plank",
                     energy=lambda t, q, v: 0.5 * m * (v[0] ** 2 + v[1] ** 2)
                     + 0.5 * inertia * v[2] ** 2 + m * G0 * q[1])


@pytest.mark.parametrize("th0, y0, u0", [(0.3, 0.3, 0.0), (0.2, 0.2, 0.5)],
                         ids=["dropped", "thrown"])
def test_plank_dropped_tilted_settles_flat_as_on_its_two_ends(th0, y0, u0):
    """A plank (mu 0.3, e 0.5) dropped tilted lands on its lower end, rocks, slaps flat and
    settles: its last impacts strike the whole face at once (20 points, normal rows of rank
    2, every point on the edge of Newton's bound), and the accumulation ends with every
    point at rest. The contact problems of such a face are answered at its ends (the
    extreme rows: nonnegative impulses elsewhere need a pull), so the plank on 20 and on 5
    points moves as the plank on its two end points alone, whose problems the enumeration
    of all 16 combinations solves: the same impacts' times, the same final position (to
    the runs' error, rtol 1e-10: 1e-9; measured 2e-15 s and 1e-16 m, the same phases
    integrated alike). The first impact by free fall; at the
    end at rest, flat, its weight on its points. It ended with success=False before
    (Lemke's answer spread over scattered points: no certified reading; then the
    accumulation's rest of the points near the pivot alone, which stops the face's
    rotation against the far points' Newton law)."""
    runs = {k: go.simulate(dropped_plank(k), (0.0, 1.0), [0.0, y0, th0], [u0, 0.0, 0.0],
                           rtol=1e-10, atol=1e-10) for k in (2, 5, 20)}
    for k, tr in runs.items():
        assert tr.success, (k, tr.message)
        assert any(im.accumulation for im in tr.impacts)
        # the first impact: free fall of the lower end (no rotation in flight)
        low_end = y0 - 0.5 * math.sin(abs(th0)) - 0.05 * math.cos(th0)
        assert abs(tr.impacts[0].t - math.sqrt(2 * low_end / G0)) < 1e-9
        # at rest, flat, carrying its weight, friction inside the cones
        np.testing.assert_allclose(tr.q[-1, 1:], [0.05, 0.0], atol=1e-9)
        np.testing.assert_allclose(tr.v[-1], 0.0, atol=1e-9)
        np.testing.assert_allclose(tr.contact_forces[-1].sum(), 2.0 * G0, rtol=1e-9)
        assert np.all(np.abs(tr.friction_forces) <= 0.3 * tr.contact_forces + 1e-9 * 2 * G0)
        # impacts and friction only take energy (its rounding and the run's error: 1e-9)
        assert np.diff(tr.energy).max() < 1e-9 * np.abs(tr.energy).max()
    ref = runs[2]
    for k in (5, 20):
        t_ref = [im.t for im in ref.impacts if not im.accumulation]
        t_k = [im.t for im in runs[k].impacts if not im.accumulation]
        n = min(len(t_ref), len(t_k)) - 4      # (the accumulations end one or two apart)
        np.testing.assert_allclose(t_k[:n], t_ref[:n], rtol=0, atol=1e-9)
        assert abs(runs[k].q[-1, 0] - ref.q[-1, 0]) < 1e-9


def test_plank_landing_beside_an_accumulation_interrupts_it():
    """Thrown tilted the other way, the plank's near end accumulates impacts while the far
    end lands at 1.1 m/s within the gap tolerance: bringing the near end to rest would
    hold the plank against the far end's rebound (no answer), and the far end's flight
    after it (0.1 s) outlasts the accumulation's remaining time (1e-4 s): the landing
    interrupts the accumulation, and the impact is the generalized Newton law's of every
    touching point. Up to there the plank moves as on its two ends alone (the same 13
    impact times); then, on 20 points as on 5 and 2, it rocks, settles and rests flat,
    its energy never growing (impacts and friction only take it). It ended with
    success=False before."""
    runs = {k: go.simulate(dropped_plank(k), (0.0, 1.0), [0.0, 0.25, -0.25], [1.0, 0.0, 0.0],
                           rtol=1e-10, atol=1e-10) for k in (2, 20)}
    for k, tr in runs.items():
        assert tr.success, (k, tr.message)
        np.testing.assert_allclose(tr.q[-1, 1:], [0.05, 0.0], atol=1e-9)
        np.testing.assert_allclose(tr.v[-1], 0.0, atol=1e-9)
        # (the energy's rounding and the runs' error: 1e-9 of its 6 J)
        assert np.diff(tr.energy).max() < 1e-9 * np.abs(tr.energy).max()
    t2 = [im.t for im in runs[2].impacts][:13]
    np.testing.assert_allclose([im.t for im in runs[20].impacts][:13], t2, rtol=0, atol=1e-9)
    assert not any(im.accumulation for im in runs[20].impacts[:13])


def test_flat_slap_on_twenty_points_is_answered_at_the_plank_ends():
    """The degenerate impact itself: a plank 1.9e-8 rad from flat, its near end touching,
    the whole face closing at rates linear along it (1.5e-4 to 1.15 m/s), e = 0.5,
    mu = 0.3, sliding at 5e-5 m/s. Generalized Newton on 20 points against the same law on
    the two end points (enumerated): the same velocities after (a 3 x 3 system: 1e-12),
    and Newton's bound and the cones hold at every one of the 20 points."""
    th, u = -1.928e-8, np.array([0.05747932, -0.57441485, -1.14852702])
    m, b, h = 2.0, 0.5, 0.05
    M = np.diag([m, m, m * (b * b + h * h) / 3])
    got = {}
    for k in (2, 20):
        xs = np.linspace(-b, b, k)
        G = np.column_stack([np.zeros(k), np.ones(k), xs * math.cos(th) + h * math.sin(th)])
        T = np.column_stack([np.ones(k), np.zeros(k), -xs * math.sin(th) + h * math.cos(th)])
        gd = G @ u
        sol = cp.solve_contact(M, M @ u, np.zeros((0, 3)), np.zeros(0), G,
                               -0.5 * np.minimum(gd, 0.0), T, np.zeros(k),
                               mu=np.full(k, 0.3), prefer=np.full(k, cp.STICK))
        after = G @ sol.x
        assert np.all(after >= -0.5 * gd - 1e-12)
        assert np.all(sol.nu >= -1e-12) and np.all(np.abs(sol.tau) <= 0.3 * sol.nu + 1e-12)
        got[k] = sol.x
    np.testing.assert_allclose(got[20], got[2], rtol=0, atol=1e-12)


@pytest.mark.parametrize("above", [True, False], ids=["holds", "slides"])
def test_plank_on_twenty_points_on_an_incline(above):
    mu, h, m = 0.4, 0.05, 2.0
    beta = math.atan(mu) + (-0.05 if above else 0.05)
    tr = go.simulate(plank(mu, beta=beta), (0.0, 0.5), [0.0, h, 0.0], [0.0, 0.0, 0.0], **TOL)
    assert tr.success, tr.message
    a = 0.0 if above else G0 * (math.sin(beta) - mu * math.cos(beta))
    bound = integration_bound(tr)
    assert np.abs(tr.q[:, 0] + 0.5 * a * tr.t ** 2).max() < 1e-8
    assert np.abs(tr.v[:, 0] + a * tr.t).max() < max(bound, 1e-12)
    # y and th are held by the closed rows, projected to rounding; the integrator's error
    # in them is that of a zero acceleration (none): 1e-10 covers the projection's rounding
    assert np.abs(tr.q[:, 1:] - [h, 0.0]).max() < 1e-10
    # the friction's sum balances the slope (held) or is mu N (sliding)
    want = m * G0 * math.sin(beta) if above else mu * m * G0 * math.cos(beta)
    assert np.abs(np.abs(tr.friction_forces.sum(axis=1)) - want).max() < 1e-10 * m * G0


# --------------------------------------------------------------------------- in space
@pytest.mark.parametrize("seed", range(3))
def test_spatial_lcp_path_meets_every_condition(seed, monkeypatch):
    """Random spatial problems: the LCP path's answer meets Newton-Euler's balance, the
    normal complementarity and Coulomb's law with the circular cone (checked here from
    ``x`` and the forces), and it is the enumeration's answer in most cases. (Not in all:
    these nonsymmetric problems may have several solutions, and within one combination
    of states the enumeration's Newton finds one set of slide directions.)"""
    rng = np.random.default_rng(200 + seed)
    checked = agree = 0
    for _ in range(25):
        M, F, A, b, G, h, T, s = random_problem(rng, (4, 7), (3, 5), (2,))
        k = G.shape[0]
        mu = rng.choice([0.0, 0.4, 1.0], size=k)
        monkeypatch.setattr(ccone, "ENUMERATE_MAX", 0)
        try:
            sol = ccone.solve_contact_cone(M, F, A, b, G, h, T, s, mu=mu)
        except cp.ContactSolveError:
            continue                       # (Lemke may end on a ray of a nonconvex LCP)
        x, N, t = sol.x, sol.nu, sol.tau
        scale = 1.0 + np.abs(M @ x).max() + np.abs(F).max()
        # rounding of the certified KKT solve (1e4 eps of the scale) plus Newton's tolerance
        # on the slide directions (_slip_tol, the same order) and Clarabel's 1e-11 gap where
        # forces are indeterminate, times the random M's condition (~1e2): 1e-9
        tol = 1e-9 * scale
        assert np.abs(M @ x - F - G.T @ N - np.einsum("kjn,kj->n", T, t)).max() < tol
        g = G @ x - h
        u = np.einsum("kjn,n->kj", T, x) - s
        assert N.min() >= -tol and g.min() >= -tol and np.abs(N * g).max() < tol * scale
        for i in range(k):
            if sol.mode[i] == cp.OPEN:
                assert N[i] == 0 and not np.any(t[i])
            elif sol.mode[i] == cp.STICK:
                assert np.abs(u[i]).max() < tol and np.hypot(*t[i]) <= mu[i] * N[i] + tol
            elif sol.mode[i] == ccone.SLIDE:
                e = u[i] / np.hypot(*u[i])
                np.testing.assert_allclose(t[i], -mu[i] * N[i] * e, atol=tol)
        checked += 1
        monkeypatch.setattr(ccone, "ENUMERATE_MAX", 10 ** 9)
        try:
            every = ccone.solve_contact_cone(M, F, A, b, G, h, T, s, mu=mu)
        except cp.ContactSolveError:
            continue
        # (the same motion to the tolerances above; distinct solutions differ at order one)
        agree += np.abs(sol.x - every.x).max() < 1e-8 * (1.0 + np.abs(every.x).max())
    assert checked >= 10 and agree >= 0.7 * checked


M_P, HX, HY, HZ = 3.0, 0.3, 0.2, 0.02
GRID = np.array([[x, y, -HZ] for x in np.linspace(-HX, HX, 4) for y in np.linspace(-HY, HY, 5)])


def slab(mu, beta=0.0, push=None):
    """A slab on the 20 points of GRID (its bottom face) on the floor z = 0; gravity tilted
    by beta about y (an incline whose fall line is +x); ``push = (k, phi)``: a horizontal
    force k t at angle phi through the centre."""
    def gap(t, q):
        return q[2] + (R(q[3:7]) @ GRID.T)[2]

    def slip_velocity(t, q, v):
        w = 2 * E(q[3:7]) @ v[3:7]
        return (v[:3] + np.cross(w, (R(q[3:7]) @ GRID.T).T))[:, :2]

    grid = go.Contact(gap, slip_velocity=slip_velocity, friction=mu, rheonomic=False,
                      name="grid")
    force = [M_P * G0 * math.sin(beta), 0.0, -M_P * G0 * math.cos(beta), 0, 0, 0, 0]
    if push is not None:
        k, phi = push

        def force(t, q, v):
            return np.array([k * t * math.cos(phi), k * t * math.sin(phi), -M_P * G0,
                             0.0, 0.0, 0.0, 0.0])
    return rigid(M_P, M_P * (HX * HX + HY * HY) / 3, grid, force)


def assert_in_circular_cones(tr, mu, rel=1e-9):
    scale = rel * M_P * G0
    assert np.all(tr.contact_forces >= -scale)
    assert np.all(np.hypot(tr.friction_forces[..., 0], tr.friction_forces[..., 1])
                  <= mu * tr.contact_forces + scale)


@pytest.mark.parametrize("above", [True, False], ids=["holds", "slides"])
def test_slab_on_twenty_points_on_an_incline(above):
    beta = 0.3
    mu = math.tan(beta) + (0.05 if above else -0.05)
    q0, u0 = launch(HZ, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    tr = go.simulate(slab(mu, beta), (0.0, 0.5), q0, u0, **TOL)
    assert tr.success, tr.message
    assert_in_circular_cones(tr, mu)
    a = 0.0 if above else G0 * (math.sin(beta) - mu * math.cos(beta))
    np.testing.assert_allclose(tr.q[:, 0], 0.5 * a * tr.t ** 2, atol=1e-8)
    np.testing.assert_allclose(tr.q[:, 1:3], np.tile([0.0, HZ], (len(tr), 1)), atol=1e-8)
    np.testing.assert_allclose(tr.v[:, 0], a * tr.t, atol=1e-8)
    np.testing.assert_allclose(tr.contact_forces.sum(axis=1), M_P * G0 * math.cos(beta),
                               rtol=1e-9)
    fx = tr.friction_forces[..., 0].sum(axis=1)
    want = -M_P * G0 * math.sin(beta) if above else -mu * M_P * G0 * math.cos(beta)
    np.testing.assert_allclose(fx, want, atol=1e-9 * M_P * G0)


def test_slab_on_twenty_points_pushed_at_an_angle_slides_along_the_push():
    """Sticks until k t = mu m g (the group of 20 points released at once), then slides
    along the push: s = k (t - ts)^3 / (6 m) (closed form, as the cube of
    tests/test_contact_cone.py)."""
    mu, k, phi = 0.4, 30.0, 0.7
    q0, u0 = launch(HZ, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    tr = go.simulate(slab(mu, push=(k, phi)), (0.0, 0.6), q0, u0, **TOL)
    assert tr.success, tr.message
    assert_in_circular_cones(tr, mu)
    ts = mu * M_P * G0 / k
    onsets = sorted({t for t, _, w in tr.meta["contact_transitions"] if w == "slide"})
    assert len(onsets) == 1 and abs(onsets[0] - ts) < 1e-9 * ts
    d = np.array([math.cos(phi), math.sin(phi)])
    s_ref = np.where(tr.t > ts, k * np.clip(tr.t - ts, 0.0, None) ** 3 / (6 * M_P), 0.0)
    assert np.abs(tr.q[:, :2] - s_ref[:, None] * d).max() < 1e-8


def test_mixed_group_of_sticking_and_sliding_points_cannot_hold_beyond_its_friction():
    """A phase whose indeterminate group holds sticking and sliding points (sliding at zero
    slip, as at a degenerate release) is watched over distributions that move each sliding
    point's friction with its own normal force (the null space of the force columns
    ``G_i - mu d0 T_i``, not of the rows). Pushed with 15 N against ``mu m g`` = 11.77 N no
    distribution balances: every margin ``s`` (``N_i >= s``, ``mu N_i - |t_i| >= s``) has
    ``push <= sum |friction| <= mu m g - 10 s`` (ten sticking points), so the largest
    margin is at most ``(mu m g - push) / 10`` = -0.32 N; over the rows' null space (the
    sliding friction frozen at one solve's normal forces) it read +0.3 N, and the run
    reported the slab at rest."""
    from gaussopt.integrate import contact_run as cr

    mu, k, phi, t = 0.4, 30.0, 0.7, 0.5
    q, v = launch(HZ, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    model = cr._Model(slab(mu, push=(k, phi)), t, q)
    model.base.check(t, q, v)                    # (as the run does: counts its rows)
    n = model.k
    closed = np.ones(n, dtype=bool)
    sdir = np.zeros(n, dtype=int)
    sdir[:5] = sdir[15:] = 1                       # ten sliding, ten sticking points
    d0 = np.zeros((n, 2))
    d0[sdir != 0] = [math.cos(phi), math.sin(phi)]
    locked = sdir != 0
    model.points.anchor_slip(t, q, np.flatnonzero(sdir == 0))
    sysp, n_rows, t_rows, _ = model.phase(closed, sdir, d0, locked)
    forces = cr._PhaseForces(model, sysp, closed, sdir, n_rows, t_rows, t, q, v)
    assert len(forces.members) == n
    bound = (mu * M_P * G0 - k * t) / 10
    # (Clarabel's margin to 10 _SOCP_TOL of the force scale, ~30 N)
    assert forces.margin(t, q, v) <= bound + 10 * ccone._SOCP_TOL * 30.0
    # the watch of such a phase does not start: the run's contact problem chose a state
    # that cannot hold
    with pytest.raises(go.ContactSolveError, match="cannot hold"):
        cr._phase_events(model, forces, closed, sdir, n_rows, t_rows, t, q, v,
                         np.zeros(n, dtype=bool), np.full(n, np.nan), 0.0, d0,
                         np.full(n, 1e-9), locked)


def test_slab_on_twenty_points_slides_along_its_velocity_until_it_stops():
    mu, v0, phi = 0.4, 1.2, 0.6
    d = np.array([math.cos(phi), math.sin(phi)])
    q0, u0 = launch(HZ, [*(v0 * d), 0.0], [0.0, 0.0, 0.0])
    tr = go.simulate(slab(mu), (0.0, 0.5), q0, u0, **TOL)
    assert tr.success, tr.message
    assert_in_circular_cones(tr, mu)
    t_stop = v0 / (mu * G0)
    stops = sorted({t for t, _, w in tr.meta["contact_transitions"] if w == "stick"})
    assert len(stops) == 1
    assert abs(stops[0] - t_stop) < 1e-9 * t_stop
    slide, rest = tr.t <= stops[0], tr.t > stops[0]
    speed = v0 - mu * G0 * tr.t[slide]
    np.testing.assert_allclose(tr.v[slide][:, :2], speed[:, None] * d, atol=1e-8)
    assert rest.any()
    assert np.abs(tr.q[rest][:, :2] - v0 ** 2 / (2 * mu * G0) * d).max() < 1e-8
    assert np.abs(tr.v[rest]).max() < 1e-8


def table_xml(beta: float, mu: float) -> str:
    """An MJCF table (a top that touches nothing, four box legs 0.2 m high, 2.8 kg) standing
    on a plane tilted by beta about y: 16 leg corners touch (each plane-box pair has 8)."""
    deg = math.degrees(beta)
    legs = "".join(f'<geom type="box" size=".02 .02 .1" pos="{x} {y} -.1" mass=".2" '
                   f'friction="{mu} 0 0"/>' for x in (-.3, .3) for y in (-.2, .2))
    c = [0.2 * math.sin(beta), 0.0, 0.2 * math.cos(beta)]
    return f"""<mujoco><option gravity="0 0 -{G0}"/><worldbody>
<geom name="floor" type="plane" size="5 5 .1" euler="0 {deg!r} 0" friction="{mu} 0 0"/>
<body name="table" pos="{c[0]!r} 0 {c[2]!r}" euler="0 {deg!r} 0"><freejoint/>
  <geom name="top" type="box" size=".35 .25 .01" pos="0 0 .01" mass="2" contype="0"
        conaffinity="0"/>
  {legs}
</body></worldbody></mujoco>"""


@pytest.mark.parametrize("above", [True, False], ids=["holds", "slides"])
def test_mjcf_table_on_sixteen_corners_on_an_incline(above):
    """Contacts from model geometry with many points (3^16 combinations of point states):
    the table holds, or slides down the fall line with ``g (sin beta - mu cos beta)``."""
    pytest.importorskip("mujoco")
    import warnings

    import gaussopt.multibody.io.mjcf as mjcf

    beta = 0.3
    mu = math.tan(beta) + (0.05 if above else -0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mjcf.UnmappedFeatureWarning)
        model = mjcf.load(table_xml(beta, mu))
    assert [p.kind for p in model.contact_pairs] == ["plane-box"] * 4
    q0 = model.q_reference
    tr = go.simulate(model.with_contacts(), (0.0, 0.3), q0, np.zeros(model.n), **TOL)
    assert tr.success, tr.message
    a = 0.0 if above else G0 * (math.sin(beta) - mu * math.cos(beta))
    down = np.array([math.cos(beta), 0.0, -math.sin(beta)])
    X = tr.q[:, :3] - q0[:3]
    assert np.abs(X - 0.5 * a * tr.t[:, None] ** 2 * down).max() < 1e-8
    assert np.abs(tr.q[:, 3:7] - q0[3:7]).max() < 1e-8
    mass = 2.8
    np.testing.assert_allclose(tr.contact_forces.sum(axis=1), mass * G0 * math.cos(beta),
                               rtol=1e-9)
    # (loaded: above the 1e-9 m g of Clarabel's placement of indeterminate forces)
    assert np.count_nonzero(tr.contact_forces[-1] > 1e-9 * mass * G0) >= 3


def test_lcp_path_holds_welded_points_with_pulling_forces(monkeypatch):
    """Welded points (the end of an accumulation of impacts: held closed whatever the
    sign of their force) may pull: a plank on 4 frictionless points, two of them welded,
    lifted by 1.5 m g. The enumeration of every combination and the LCP path (where a
    welded point is read in its closed state) give the same motion: the welded end
    holds, the plank turns about it, the other points open (Newton-Euler: written
    here)."""
    m, inertia, mu, h = 2.0, 0.2, 0.0, 0.05
    xs, G, T = plank_rows(4, h=h)
    M = np.diag([m, m, inertia])
    F = np.array([0.0, 0.5 * m * G0, 0.0])          # gravity plus a lift of 1.5 m g
    weld = np.array([True, True, False, False])
    args = (M, F, np.zeros((0, 3)), np.zeros(0), G, np.zeros(4), T, np.zeros(4))
    got = {}
    for limit in (10 ** 9, 0):
        monkeypatch.setattr(cp, "ENUMERATE_MAX", limit)
        got[limit] = cp.solve_contact(*args, mu=np.full(4, mu), weld=weld)
    every, lcp = got[10 ** 9], got[0]
    # the same combination's KKT solve of 3 coordinates: rounding ~1e2 eps of g < 1e-12 g
    assert np.abs(lcp.x - every.x).max() < 1e-12 * G0
    assert list(lcp.mode[2:]) == [cp.OPEN, cp.OPEN] and lcp.nu[:2].sum() < 0
    # the welded points do not move: y'' + x_i th'' = 0 at both, so y'' = th'' = 0
    assert np.abs(G[:2] @ lcp.x).max() < 1e-12 * G0 and abs(lcp.x[1]) < 1e-12 * G0
    assert abs(lcp.nu.sum() + 0.5 * m * G0) < 1e-10 * m * G0


def _kkt_by_whole_svd(M, J, W, R_top, R_bot):
    """The reference of :func:`cp.kkt_solve`: one SVD of the whole scaled KKT matrix
    ``[M / ms, -(rs W)^T; rs J, 0]`` (what the contact problem did before it used the
    matrix's structure), with the same rank rule and checks, after the same change of
    coordinates ``x = D x'`` (``D = diag(M)^-1/2``, the heaviest's scale for a coordinate
    below 1e-12 of it); the solution returned in ``x``."""
    n, p = M.shape[0], J.shape[0]
    dg = np.diag(M)
    D = 1.0 / np.sqrt(np.where(dg > 1e-12 * dg.max(), dg, dg.max()))
    M, J, W, R_top = M * np.outer(D, D), J * D, W * D, R_top * D
    rn = np.sqrt((J * J).sum(axis=1))
    rs = 1.0 / np.where(rn > 0, rn, 1.0)
    ms = max(np.abs(M).max(initial=0.0), np.abs(W).max(initial=0.0), 1e-300)
    K = np.zeros((n + p, n + p))
    K[:n, :n] = M / ms
    K[:n, n:] = -(W * rs[:, None]).T
    K[n:, :n] = J * rs[:, None]
    R = np.concatenate([R_top / ms, R_bot * rs])
    U, sig, Vt = np.linalg.svd(K)
    rank = int(np.count_nonzero(sig > cp.DEFAULT_RANK_TOL * sig[0]))
    sol = Vt[:rank].T @ ((U[:, :rank].T @ R) / sig[:rank])
    res = K @ sol - R
    eps = np.finfo(float).eps
    if np.abs(res).max() > 1e4 * eps * (n + p) * (np.abs(K).max() * np.abs(sol).max()
                                                   + np.abs(R).max()):
        return None
    null = Vt[rank:].T
    if null.size and np.abs(null[:n]).max() > 1e-6:
        return None
    return np.concatenate([D * sol[:n], sol[n:]]), null, sig[0] / sig[rank - 1]


@pytest.mark.parametrize("seed", range(40))
def test_kkt_solve_by_its_blocks_equals_the_whole_matrix_svd(seed):
    """:func:`cp.kkt_solve` decomposes the KKT matrix through the SVDs of its blocks; on
    random systems of the contact problem's shapes (3 or 6 coordinates and up to 40
    rows; a singular mass matrix; repeated and dependent rows; sliding rows whose force
    direction differs from the row; consistent and inconsistent right-hand sides) it
    gives the same verdict, the same minimum-norm solution and the same null space as
    one SVD of the whole matrix. Bound: both solve one system whose condition number is
    below ~1e4 here (the well-separated singular values the random construction gives,
    relative to the rank threshold 1e-8), so the two answers differ by rounding times
    that: both are backward stable, so they differ by ``c (n + p) eps cond`` relative to
    the solution's size, ``cond`` the ratio of the largest kept singular value to the
    smallest (up to 3e5 here); c = 30 (measured over 400 seeds: at most 4)."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([3, 6]))
    r = int(rng.integers(1, n + 1))                 # the rank of the rows
    p = int(rng.integers(1, 41))
    base = rng.standard_normal((r, n))
    J = rng.standard_normal((p, r)) @ base          # p rows of rank <= r (dependent rows)
    if seed % 5 == 0:
        J[-1] = J[0]                                # a repeated row
    W = J.copy()
    slide = rng.random(p) < 0.3                     # sliding rows: another force direction
    W[slide] -= 0.3 * rng.standard_normal((int(slide.sum()), r)) @ base
    L = rng.standard_normal((n, n))
    M = L @ L.T + n * np.eye(n)
    if seed % 3 == 0:                               # a singular mass matrix
        P = rng.standard_normal((n, n - 1))
        M = P @ P.T
    F = rng.standard_normal(n)
    x_true = rng.standard_normal(n)
    rhs = J @ x_true
    if seed % 4 == 1:                               # inconsistent rows
        rhs = rhs + rng.standard_normal(p)
    got = cp.kkt_solve(M, J, W, F, rhs)
    ref = _kkt_by_whole_svd(M, J, W, F, rhs)
    assert (got is None) == (ref is None)
    if ref is None:
        return
    sol, rest, _, _ = got
    sol_ref, null_ref, cond = ref
    bound = 30 * (n + p) * np.finfo(float).eps * cond
    np.testing.assert_allclose(sol, sol_ref, rtol=0, atol=bound * np.abs(sol_ref).max())
    # the forces left free: the reference's null space's force part; kkt_solve gives the
    # complement (orthonormal columns): the two projectors add up to the identity
    np.testing.assert_allclose(rest.T @ rest, np.eye(rest.shape[1]), rtol=0, atol=1e-12)
    free = np.linalg.qr(null_ref[n:])[0] if null_ref.size else np.zeros((p, 0))
    assert rest.shape[1] + free.shape[1] == p
    np.testing.assert_allclose(rest @ rest.T + free @ free.T, np.eye(p), rtol=0, atol=bound)
    # the factorization kept (cp.KKTFactor: Newton's Jacobian on slide directions solves
    # its iterate's system again) solves other right-hand sides, three at once, as the
    # whole matrix's SVD solves each (the same bound)
    kkt, _ = cp._kkt_factored(M, J, W, F, rhs)
    R_top = rng.standard_normal((n, 3))
    R_bot = J @ rng.standard_normal((n, 3))
    if seed % 4 == 3:
        R_bot[:, 1] += rng.standard_normal(p)       # one inconsistent column
    refs = [_kkt_by_whole_svd(M, J, W, R_top[:, j], R_bot[:, j]) for j in range(3)]
    got = kkt.solve(R_top, R_bot)
    assert (got is None) == any(r is None for r in refs)
    if got is not None:
        for j, r in enumerate(refs):
            bound_j = 30 * (n + p) * np.finfo(float).eps * r[2]
            np.testing.assert_allclose(got[:, j], r[0], rtol=0,
                                       atol=bound_j * np.abs(r[0]).max())


@pytest.mark.parametrize("seed", range(20))
def test_selected_kkt_is_the_least_squares_solution_of_its_bordered_system(seed):
    """:func:`cp.selected_kkt` (sliding points on dependent rows: the forces without
    self-stress decide the motion) solves ``[M, -W^T; J, 0; 0, S^T] (x, z) = (F, rhs,
    0)`` with ``S`` the rows' self-stresses; :class:`cp.SelectedKKT` factors it by QR
    where it is well conditioned and by the SVD near its rank threshold. On random
    systems of a sliding phase's shapes (6 to 28 coordinates, 3 to 13 rows of a lower
    rank, half of them sliding), several right-hand sides at once: the same as numpy's
    ``lstsq`` of the whole bordered system in the original units (its own SVD). Bound:
    both backward stable, ``30 (n + p) eps cond`` of the solution's size, ``cond`` the
    bordered matrix's condition in kkt_solve's scaling."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([6, 12, 28]))
    p = int(rng.integers(3, 14))
    rk = min(n // 2, p - 1 - int(rng.integers(0, 2)))   # the rows' rank, below p
    base = rng.standard_normal((rk, n))
    J = rng.standard_normal((p, rk)) @ base          # p dependent rows
    W = J.copy()
    W[: p // 2] -= 0.3 * rng.standard_normal((p // 2, rk)) @ base
    L = rng.standard_normal((n, n))
    M = L @ L.T + n * np.eye(n)
    F = rng.standard_normal((n, 2))
    rhs = J @ rng.standard_normal((n, 2))
    kkt = cp.SelectedKKT.of(M, J, W)
    S = cp.self_stresses(J)
    assert S.shape[1] > 0 and kkt is not None
    assert kkt.qr is not None                        # (well conditioned: the QR path)
    got = kkt.solve(F, rhs)
    r = S.shape[1]
    K = np.zeros((n + p + r, n + p))
    K[:n, :n], K[:n, n:], K[n:n + p, :n], K[n + p:, n:] = M, -W.T, J, S.T
    R = np.concatenate([F, rhs, np.zeros((r, 2))])
    ref = np.linalg.lstsq(K, R, rcond=None)[0]
    cond = np.linalg.cond(kkt.K)
    bound = 30 * (n + p) * np.finfo(float).eps * cond
    for part, want in ((got[0], ref[:n]), (got[1], ref[n:])):
        np.testing.assert_allclose(part, want, rtol=0, atol=bound * np.abs(want).max())
    # the SVD path, forced: the same answer
    U, sig, Vt = np.linalg.svd(kkt.K, full_matrices=False)
    kkt.qr, kkt.Ur, kkt.sigr, kkt.Vr = None, U, sig, Vt.T
    again = kkt.solve(F, rhs)
    for part, want in ((again[0], ref[:n]), (again[1], ref[n:])):
        np.testing.assert_allclose(part, want, rtol=0, atol=bound * np.abs(want).max())


def test_resting_group_margin_is_proven_by_its_last_distribution(monkeypatch):
    """A slab resting on 20 points of an incline (its forces indeterminate) for 1 s: the
    group's watch needs the sign of the largest margin of a distribution inside every
    cone. The distribution found at the phase's start, carried along, proves it positive
    at every later evaluation, so the cone program runs once per margin that is not
    proven; the run (states, forces, transitions) is the one that solves the cone
    program at every evaluation, to rounding (the same steps: the watch's sign is all
    the integrator sees)."""
    import gaussopt.integrate.contact_run as cr

    beta = 0.3
    mu = math.tan(beta) + 0.05
    q0, u0 = launch(HZ, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    calls = []
    socp = ccone._socp

    def counted(*args, **kw):
        calls.append(kw.get("margin", args[3] if len(args) > 3 else None))
        return socp(*args, **kw)

    monkeypatch.setattr(ccone, "_socp", counted)
    tr = go.simulate(slab(mu, beta), (0.0, 1.0), q0, u0)
    margins = sum(1 for m in calls if m)
    monkeypatch.setattr(cr, "cone_slack", lambda z, points: -math.inf)   # never proven
    calls.clear()
    ref = go.simulate(slab(mu, beta), (0.0, 1.0), q0, u0)
    assert tr.success and ref.success
    assert margins <= 2 < sum(1 for m in calls if m)
    assert tr.meta["contact_transitions"] == ref.meta["contact_transitions"]
    np.testing.assert_array_equal(tr.t, ref.t)
    np.testing.assert_allclose(tr.q, ref.q, rtol=0, atol=1e-14)
    np.testing.assert_allclose(tr.contact_forces, ref.contact_forces, rtol=0,
                               atol=1e-12 * M_P * G0)


def _wrenches(points):
    """The unit wrench (force, moment about the centre) of each force of a body on
    ``points``, as rows in the order ``(N_1..N_k, t_1x, t_1y, ...)``."""
    k = len(points)
    J = np.zeros((3 * k, 6))
    for i, p in enumerate(points):
        for row, e in ((i, [0, 0, 1]), (k + 2 * i, [1, 0, 0]), (k + 2 * i + 1, [0, 1, 0])):
            J[row, :3] = e
            J[row, 3:] = np.cross(p, e)
    return J


def _body_on_points(points, beta, mu):
    """The forces of a body (3 kg) at rest on ``points`` (body frame) of a slope tilted by
    ``beta``, all sticking: ``(z0, Z, cone_points)`` with ``z = (N_1..N_k, t_1x, t_1y,
    ...)``, ``z0`` the least-norm forces that balance gravity and ``Z`` an orthonormal
    basis of the self-stresses (written here from the wrench of each force)."""
    k = len(points)
    J = _wrenches(points)                      # rows: the unit wrench of each force
    w = np.array([-M_P * G0 * math.sin(beta), 0, M_P * G0 * math.cos(beta), 0, 0, 0])
    z0 = np.linalg.lstsq(J.T, w, rcond=None)[0]
    U, sv, _ = np.linalg.svd(J)
    Z = U[:, int(np.sum(sv > 1e-12 * sv[0])):]
    pts = [(i, (k + 2 * i, k + 2 * i + 1), mu, False) for i in range(k)]
    return z0, Z, pts


@pytest.mark.parametrize("body", ["cube", "slab"])
def test_force_distributions_in_circular_cones_match_an_independent_solve(body, monkeypatch):
    """The largest margin of a distribution of indeterminate forces and the least-norm
    one inside every circular cone, against cvxpy's solve of the same programs written in
    the self-stresses' coordinates (a different formulation and canonicalization). The
    slab's least-norm forces are inside every cone: they are the answer without a cone
    program; the cube's leave the uphill corners' cones (the least-norm one in the cones
    is found by Clarabel on the forces' own rows)."""
    import cvxpy as cvx

    if body == "cube":
        pts = np.array([[x, y, -0.1] for x in (-0.1, 0.1) for y in (-0.1, 0.1)])
    else:
        pts = GRID
    mu = 0.4
    z0, Z, cones = _body_on_points(pts, math.atan(0.8 * mu), mu)
    calls = []
    socp = ccone._socp
    monkeypatch.setattr(ccone, "_socp", lambda *a, **kw: calls.append(1) or socp(*a, **kw))
    margin, held = ccone.best_distribution(z0, Z, cones)
    z = ccone.least_norm_in_cones(z0, Z, cones)
    programs = len(calls) - 1                  # (the margin's own)
    assert programs == (1 if body == "cube" else 0)

    y = cvx.Variable(Z.shape[1])
    zz = z0 + Z @ y
    k = len(pts)
    cone_rows = [cvx.norm(cvx.hstack([zz[k + 2 * i], zz[k + 2 * i + 1]])) <= mu * zz[i]
                 for i in range(k)]
    s = cvx.Variable()
    tight = dict(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    cvx.Problem(cvx.Maximize(s), [zz[:k] >= s] + [
        cvx.norm(cvx.hstack([zz[k + 2 * i], zz[k + 2 * i + 1]])) <= mu * zz[i] - s
        for i in range(k)]).solve(**tight)
    ref_margin = float(s.value)
    cvx.Problem(cvx.Minimize(cvx.sum_squares(zz)), [zz[:k] >= 0] + cone_rows).solve(**tight)
    ref = z0 + Z @ y.value
    # both programs to ~1e-11 of the force scale m g (ours and cvxpy's); the
    # least-norm objective |z|^2 agrees to that fraction of |z|^2 (an error e in the
    # argument of a strongly convex minimum moves it by O(e^2) only)
    scale = M_P * G0
    assert abs(margin - ref_margin) <= 1e-9 * scale
    assert ccone.cone_slack(held, cones) >= margin - 1e-9 * scale
    assert ccone.cone_slack(z, cones) >= -1e-9 * scale
    assert z @ z <= ref @ ref * (1 + 1e-9)
    # on the distributions: the balance of the given forces z0 (J^T z = J^T z0), to rounding
    E = np.linalg.svd(Z, full_matrices=True)[0][:, Z.shape[1]:]
    assert np.abs(E.T @ (z - z0)).max() <= 1e-13 * scale


@pytest.mark.parametrize("body", ["cube", "slab", "tall"])
def test_sticking_is_refuted_by_a_dual_certificate_only_where_no_distribution_holds(body):
    """The contact problem refutes a sticking combination by a dual (Farkas) certificate
    where it finds one (``_refuted``), without the cone program. A body on points of a
    slope with ``tan(beta) = f mu``: no distribution of its forces holds it exactly where
    ``f > 1`` (the friction the slope asks for, ``m g sin(beta)``, against the most the
    cones give, ``mu m g cos(beta)``), whatever the points. The certificate must fire there
    (each point slipping downhill and lifting by ``mu`` is a rigid motion of these bodies)
    and, wherever it fires, the largest margin of cvxpy's solve of the cone program (the
    self-stresses' coordinates, as above) must be below ``-delta``; at ``f < 1`` it must
    not fire (that margin is positive). The tall body (points 0.15 below its centre, 0.1
    from it sideways: it tips only beyond tan(beta) = 2/3, above the slopes here) loads
    its downhill points more."""
    import cvxpy as cvx

    pts = {"cube": [[x, y, -0.1] for x in (-0.1, 0.1) for y in (-0.1, 0.1)],
           "slab": GRID,
           "tall": [[x, y, -0.15] for x in (-0.1, 0.1) for y in (-0.1, 0.1)]}[body]
    pts = np.array(pts, dtype=float)
    k, mu, scale = len(pts), 0.4, M_P * G0
    delta = 1e-9 * scale                      # (the contact problem's 1e-10 m g, and more)
    for f in (0.8, 0.99, 1.01, 1.2):
        z0, Z, cones = _body_on_points(pts, math.atan(f * mu), mu)
        refuted = ccone._refuted(z0, _wrenches(pts), cones, delta)
        y, s = cvx.Variable(Z.shape[1]), cvx.Variable()
        zz = z0 + Z @ y
        prob = cvx.Problem(cvx.Maximize(s), [zz[:k] >= s] + [
            cvx.norm(cvx.hstack([zz[k + 2 * i], zz[k + 2 * i + 1]])) <= mu * zz[i] - s
            for i in range(k)])
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)
        # (cvxpy's margin to ~1e-9 m g; the margins here are 1e-3 m g or more from 0)
        assert prob.status == "optimal"
        assert refuted == (f > 1), (f, float(s.value))
        if refuted:
            assert float(s.value) < -delta
        else:
            assert float(s.value) > 0


def _spatial_body(points, beta, push=(0.0, 0.0), turn=0.0):
    """The spatial contact problem of the body of :func:`_body_on_points` (3 kg, isotropic
    inertia 0.1 kg m^2; coordinates: the centre's acceleration and the angular one) on
    ``points`` of a slope tilted by ``beta``, pushed along x and y and turned about z:
    ``(M, F, A, b, G, h, T, s)``."""
    k = len(points)
    G, T = np.zeros((k, 6)), np.zeros((k, 2, 6))
    for i, (px, py, pz) in enumerate(points):
        G[i] = [0, 0, 1, py, -px, 0]
        T[i, 0] = [1, 0, 0, 0, pz, -py]
        T[i, 1] = [0, 1, 0, -pz, 0, px]
    M = np.diag([M_P] * 3 + [0.1] * 3)
    F = np.array([M_P * G0 * math.sin(beta) + push[0], push[1], -M_P * G0 * math.cos(beta),
                  0.0, 0.0, turn])
    return M, F, np.zeros((0, 6)), np.zeros(0), G, np.zeros(k), T, np.zeros((k, 2))


@pytest.mark.parametrize("body", ["cube", "slab", "tall"])
def test_sticking_is_refuted_before_its_kkt_solve_only_where_no_distribution_holds(
        body, monkeypatch):
    """Where the polygon's LCP reads points sliding, the sticking combination is refuted
    before its KKT solve when a dual certificate proves it (``_stick_refuted``: the
    accelerations and the least-norm forces from one SVD of the rows, which determine the
    motion of a body on three or more points). The body of the test above on the slope
    ``tan(beta) = f mu``: it must fire exactly where ``f > 1`` (no distribution holds it
    there, whatever the points), leave the points' excess forces (unit, downhill: the
    slope's push is along +x) as the slide's start, and the contact problem's answer must
    be the one it gives without the early refutation: the same modes, and accelerations
    within the slide directions' Newton tolerance (it stops where each slider's slip is
    along its direction to the slip's rounding scale, ``1e4 eps``: the two starts converge
    to directions that far apart; 1e-9 of the slide's ``g`` is far above it and far below
    any other state). The analytic slide: ``x'' = g (sin(beta) - mu cos(beta))``, which
    both reach to that tolerance."""
    pts = {"cube": [[x, y, -0.1] for x in (-0.1, 0.1) for y in (-0.1, 0.1)],
           "slab": GRID,
           "tall": [[x, y, -0.15] for x in (-0.1, 0.1) for y in (-0.1, 0.1)]}[body]
    pts = np.array(pts, dtype=float)
    k, mu = len(pts), 0.4
    monkeypatch.setattr(ccone, "ENUMERATE_MAX", 0)            # (the LCP path at any k)
    stick = np.full(k, cp.STICK)
    for f in (0.8, 0.99, 1.01, 1.2):
        beta = math.atan(f * mu)
        args = _spatial_body(pts, beta)
        shared = ccone._Shared(args[0], args[6])
        refuted = ccone._stick_refuted(*args, np.full(k, mu), stick, np.zeros(k, dtype=bool),
                                       shared)
        assert refuted == (f > 1), f
        if refuted:
            excess = shared.excess[stick.tobytes()]
            assert np.allclose(excess, [1.0, 0.0], atol=1e-12)
        sol = ccone.solve_contact_cone(*args, mu=np.full(k, mu))
        with monkeypatch.context() as mp:
            mp.setattr(ccone, "_stick_refuted", lambda *a: False)
            plain = ccone.solve_contact_cone(*args, mu=np.full(k, mu))
        want = 0.0 if f < 1 else G0 * (math.sin(beta) - mu * math.cos(beta))
        assert np.array_equal(sol.mode, plain.mode)
        assert np.all(sol.mode == (ccone.SLIDE if f > 1 else cp.STICK))
        assert np.abs(sol.x - plain.x).max() <= 1e-9 * G0
        assert abs(sol.x[0] - want) <= 1e-9 * G0


def test_early_refutation_changes_no_state_of_pushed_and_turned_bodies(monkeypatch):
    """The same comparison on bodies pushed sideways and turned on slopes (random grids of
    4 to 16 points, seeded): with and without the early refutation, the same modes, and
    accelerations within the slide directions' Newton tolerance (the test above)."""
    rng = np.random.default_rng(5)
    monkeypatch.setattr(ccone, "ENUMERATE_MAX", 0)
    fired = 0
    real = ccone._stick_refuted

    def counted(*a):
        nonlocal fired
        got = real(*a)
        fired += got
        return got

    for trial in range(24):
        nx, ny = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        pts = np.array([[x, y, -rng.uniform(0.01, 0.2)] for x in np.linspace(-0.3, 0.3, nx)
                        for y in np.linspace(-0.2, 0.2, ny)])
        k, mu = len(pts), float(rng.uniform(0.2, 0.8))
        beta = math.atan(mu * float(rng.choice([0.5, 0.9, 1.1, 2.0])))
        args = _spatial_body(pts, beta, push=rng.normal(size=2) * 5.0,
                             turn=float(rng.normal()) * 0.5)
        with monkeypatch.context() as mp:
            mp.setattr(ccone, "_stick_refuted", counted)
            sol = ccone.solve_contact_cone(*args, mu=np.full(k, mu))
        with monkeypatch.context() as mp:
            mp.setattr(ccone, "_stick_refuted", lambda *a: False)
            plain = ccone.solve_contact_cone(*args, mu=np.full(k, mu))
        assert np.array_equal(sol.mode, plain.mode), trial
        assert np.abs(sol.x - plain.x).max() <= 1e-9 * G0, trial
    assert fired >= 10, fired                           # (it was exercised: 14 of 24)


def test_face_sliding_on_many_points_takes_the_whole_family_whatever_the_lcp_reads(
        monkeypatch):
    """A slab (3 kg, isotropic inertia 0.1 kg m^2) flat on 12 points of a plane (a 3 x 4
    grid 5 cm below its centre), pushed and turned from rest: it slides and turns on all
    12, its normal forces indeterminate. Rigid Coulomb friction admits a family of
    motions (from "three points carry it" to "all twelve do"); the rule taken is the
    rigid limit of equally stiff points: every point closed, its normal force affine in
    the point's position (the forces without self-stress). Reference: those equations
    written here (the six balances with N_i = a + b x_i + c y_i and each point's friction
    -mu N_i along its slip acceleration), solved by scipy's fsolve. The LCP path's answer
    is that motion whatever the compliance of the polygon's LCP (the states read from it
    differ: before, no certified state at the default compliance, a three-point motion
    turning 7.5 times faster at 1/100 of it)."""
    from scipy.optimize import fsolve

    m, inertia, mu = 3.0, 0.1, 0.4
    pts = np.array([[x, y, -0.05] for x in np.linspace(-0.3, 0.3, 3)
                    for y in np.linspace(-0.2, 0.2, 4)])
    k = len(pts)
    G, T = np.zeros((k, 6)), np.zeros((k, 2, 6))
    for i, (px, py, pz) in enumerate(pts):
        G[i] = [0, 0, 1, py, -px, 0]
        T[i, 0] = [1, 0, 0, 0, pz, -py]
        T[i, 1] = [0, 1, 0, -pz, 0, px]
    M = np.diag([m, m, m, inertia, inertia, inertia])
    F = np.array([12.0, -0.6, -26.5, 0.7, -0.06, -0.025])

    def balance(u):
        ax, ay, alpha, a, b, c = u
        N = a + b * pts[:, 0] + c * pts[:, 1]
        slip = np.column_stack([ax - alpha * pts[:, 1], ay + alpha * pts[:, 0]])
        d = slip / np.linalg.norm(slip, axis=1)[:, None]
        f = np.column_stack([-mu * N[:, None] * d, N])
        mom = np.cross(pts, f).sum(0)
        return [m * ax - F[0] - f[:, 0].sum(), m * ay - F[1] - f[:, 1].sum(),
                F[2] + f[:, 2].sum(), F[3] + mom[0], F[4] + mom[1],
                inertia * alpha - F[5] - mom[2]]

    ref = fsolve(balance, [1.0, 0.0, 0.1, 2.0, 0.0, 0.0], xtol=1e-13)
    assert np.abs(balance(ref)).max() < 1e-12
    want = np.array([ref[0], ref[1], 0.0, 0.0, 0.0, ref[2]])
    monkeypatch.setattr(ccone, "ENUMERATE_MAX", 0)
    base = cp._LCP_COMPLIANCE
    for factor in (1e-2, 1.0, 1e2):
        monkeypatch.setattr(cp, "_LCP_COMPLIANCE", base * factor)
        sol = ccone.solve_contact_cone(M, F, np.zeros((0, 6)), np.zeros(0), G, np.zeros(k), T,
                                       np.zeros((k, 2)), mu=np.full(k, mu))
        assert np.all(sol.mode == ccone.SLIDE)
        # both solve the same equations: the certified KKT solve to rounding, fsolve to a
        # residual below 1e-12 (condition of these equations ~10): 1e-9 of the scale
        np.testing.assert_allclose(sol.x, want, rtol=0, atol=1e-9 * (1 + np.abs(want).max()))
        np.testing.assert_allclose(sol.nu, ref[3] + ref[4] * pts[:, 0] + ref[5] * pts[:, 1],
                                   rtol=0, atol=1e-9 * m * G0)
