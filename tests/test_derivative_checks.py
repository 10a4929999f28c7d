"""The check of constraint derivatives against finite differences (issue 21, parts 1 and 2).

* A wrong user ``gamma`` (the convective term of the acceleration rows ``A a = b``) is
  refused before anything runs: the README pendulum released at rest (``v = 0``, where
  every ``gamma = c v.v`` is right) with ``gamma = +2 v.v``, ``0`` and ``1.01`` times the
  right one. It is caught at the perturbed state the check also uses.
* The rounding scale of the check does not vanish at ``q = 0``: a constraint whose O(1)
  terms cancel there (as the upright bicycle's pitch constraint) is not refused.
* A derivative that the user did not give is not called "given".
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import gaussopt as go
from gaussopt.core.exceptions import ModelError

M_, L_, G_ = 2.0, 1.5, 9.81          # the README pendulum: mass, rod length, gravity
TH0 = np.radians(60)
Q0 = np.array([L_ * np.sin(TH0), -L_ * np.cos(TH0)])


def pendulum(gamma=None, name="rod"):
    """The README's pendulum ("The library in 15 lines"), optionally with a given gamma."""
    return go.System(
        coordinates=("x", "y"), mass=M_ * np.eye(2), force=[0.0, -M_ * G_],
        constraints=[go.Holonomic(lambda t, q: np.array([q @ q - L_**2]), gamma=gamma,
                                  name=name)],
        energy=lambda t, q, v: 0.5 * M_ * v @ v + M_ * G_ * q[1])


WRONG = {
    "plus": lambda t, q, v: np.array([2.0 * (v @ v)]),          # sign flipped
    "zero": lambda t, q, v: np.zeros(1),                        # forgotten
    "1.01": lambda t, q, v: np.array([-2.02 * (v @ v)]),        # 1 % off
}


@pytest.mark.parametrize("which", list(WRONG))
def test_wrong_user_gamma_is_refused_before_the_run(which):
    """At rest every c v.v vanishes: the check must (and does) compare gamma at the
    perturbed state. 1 % is far above the check's tolerance (1e-5 relative plus 10x the
    rounding bound, see Holonomic._check_gamma), a sign or a missing term more so."""
    with pytest.raises(ModelError, match=r"(?s)rod: gamma: the given derivative disagrees.*"
                                         r"check the argument `gamma`"):
        go.simulate(pendulum(WRONG[which]), (0.0, 0.1), Q0, [0.0, 0.0])
    with pytest.raises(ModelError, match=r"rod: gamma: .*`gamma`"):
        go.solve_step(pendulum(WRONG[which]), 0.0, Q0, np.zeros(2))


def test_right_user_gamma_passes_and_runs():
    """gamma = -2 v.v (exact): the check passes and the run matches the automatic one to
    the integration tolerance (both rtol = atol = 1e-10 over 0.5 s, states of size ~5:
    a few hundred steps of local error <= 1e-10 (1 + |y|) each, bounded by 1e-7)."""
    right = go.simulate(pendulum(lambda t, q, v: np.array([-2.0 * (v @ v)])), (0.0, 0.5), Q0,
                        [0.0, 0.0], rtol=1e-10, atol=1e-10)
    auto = go.simulate(pendulum(), (0.0, 0.5), Q0, [0.0, 0.0], rtol=1e-10, atol=1e-10)
    assert right.success and auto.success
    assert np.abs(right.q[-1] - auto.q[-1]).max() <= 1e-7


def test_gamma_is_checked_at_a_moving_state_too():
    """Moving (v != 0, consistent with the rod): the wrong gamma is caught at the given
    state already (no mention of the perturbed state)."""
    v = np.array([-Q0[1], Q0[0]]) * 0.8            # tangent to the circle
    sysm = pendulum(WRONG["1.01"])
    with pytest.raises(ModelError, match=r"rod: gamma: the given derivative") as exc:
        sysm.check(0.0, Q0, v)
    assert "perturbed" not in str(exc.value)


def test_check_of_gamma_direct():
    """At the constraint level: the problems list names the constraint and `gamma`; the
    right gamma and the automatic one give none."""
    q, v = Q0, np.array([0.3, -0.7])
    hol = go.Holonomic(lambda t, q: np.array([q @ q - L_**2]),
                       gamma=lambda t, q, v: np.array([2.0 * (v @ v)]), name="rod")
    (msg,) = hol.check_derivatives(0.0, q, v)
    assert msg.startswith("rod: gamma:") and "`gamma`" in msg
    ok = go.Holonomic(lambda t, q: np.array([q @ q - L_**2]),
                      gamma=lambda t, q, v: np.array([-2.0 * (v @ v)]), name="rod")
    assert ok.check_derivatives(0.0, q, v) == []
    assert go.Holonomic(lambda t, q: np.array([q @ q - L_**2])).check_derivatives(0.0, q, v) == []


def test_rheonomic_gamma_checked_along_time():
    """A moving support, phi = |q - s(t)|^2 - l^2 with s(t) = (0.2 sin 3t, 0): the exact
    gamma has the terms -2 |v - s'|^2 + 2 (q - s).s''; dropping the time terms (the
    scleronomic formula -2 v.v) is refused, the right one passes."""
    def s(t):
        return np.array([0.2 * np.sin(3 * t), 0.0])

    def sd(t):
        return np.array([0.6 * np.cos(3 * t), 0.0])

    def sdd(t):
        return np.array([-1.8 * np.sin(3 * t), 0.0])

    def phi(t, q):
        d = q - s(t)
        return np.array([d @ d - L_**2])

    def right(t, q, v):
        w = v - sd(t)
        return np.array([-2.0 * (w @ w) + 2.0 * ((q - s(t)) @ sdd(t))])

    t, q, v = 0.4, Q0 + s(0.4), np.array([0.5, 0.1])
    assert go.Holonomic(phi, gamma=right, name="swing").check_derivatives(t, q, v) == []
    wrong = go.Holonomic(phi, gamma=lambda t, q, v: np.array([-2.0 * (v @ v)]), name="swing")
    (msg,) = wrong.check_derivatives(t, q, v)
    assert msg.startswith("swing: gamma: the given derivative disagrees")


def _cancelling(gamma):
    """phi = 0.1 cos q0 + 1e-3 q2 + 0.2 cos q1 - 0.3: at q = 0 its O(0.1) terms cancel to
    rounding (0.1 + 0.2 - 0.3 = 5.6e-17, as the upright bicycle's pitch constraint sums
    O(1) lengths to 5e-18), |q| = 0, and the exact gamma along v = e2 is 0."""
    return go.Holonomic(lambda t, q: np.array([0.1 * np.cos(q[0]) + 1e-3 * q[2]
                                               + 0.2 * np.cos(q[1]) - 0.3]),
                        jacobian=lambda t, q: np.array([[-0.1 * np.sin(q[0]),
                                                         -0.2 * np.sin(q[1]), 1e-3]]),
                        gamma=gamma, rheonomic=False, name="pitch")


def test_rounding_scale_does_not_vanish_at_q_zero():
    """The right derivatives at q = 0 pass: the rounding scale of phi is |phi| +
    |Phi_q| (1 + |q|), not |phi| + |Phi_q| |q| (which is ~5e-17 here and made the
    finite differences' rounding noise (~1e-17 / s^2 for second differences) look like a
    disagreement with the exact gamma = 0)."""
    right = _cancelling(lambda t, q, v: np.array([0.1 * np.cos(q[0]) * v[0]**2
                                                  + 0.2 * np.cos(q[1]) * v[1]**2]))
    z = np.zeros(3)
    assert right.check_derivatives(0.0, z, np.array([0.0, 0.0, 1.0])) == []
    assert right.check_derivatives(0.0, z, np.array([0.5, -0.3, 1.0])) == []
    sysm = go.System(("a", "b", "c"), mass=np.eye(3), constraints=[right])
    sysm.check(0.0, z, np.zeros(3))
    # the check still refuses a wrong gamma there (the sign of one term flipped)
    wrong = _cancelling(lambda t, q, v: np.array([0.1 * np.cos(q[0]) * v[0]**2
                                                  - 0.2 * np.cos(q[1]) * v[1]**2]))
    (msg,) = wrong.check_derivatives(0.0, z, np.array([0.5, -0.3, 1.0]))
    assert msg.startswith("pitch: gamma: the given derivative disagrees")


def test_generated_derivative_is_not_called_given():
    """A derivative from gaussopt.symbolic that disagrees with its function (here made
    wrong on purpose: the generated code is exact) is reported as generated, not as
    "the given derivative"."""
    x, y = dynamicsymbols("x y")
    m, l, g = sp.symbols("m l g", positive=True)
    t = dynamicsymbols._t
    sysm = go.from_lagrangian([x, y], T=m / 2 * (x.diff(t)**2 + y.diff(t)**2), V=m * g * y,
                              holonomic=[x**2 + y**2 - l**2],
                              params={m: M_, l: L_, g: G_})
    (hol,) = sysm.constraints
    assert hol.check_derivatives(0.0, Q0, np.array([0.3, -0.7])) == []
    good = hol._gamma
    hol._gamma = lambda t, q, v: 1.5 * good(t, q, v)
    (msg,) = hol.check_derivatives(0.0, Q0, np.array([0.3, -0.7]))
    assert "generated by gaussopt.symbolic" in msg and "given" not in msg


def _chain(N, wrong=None, counted=None):
    """``tests/test_large_sparse.py``'s hanging chain with N point masses, its Jacobian
    given sparse; ``wrong = (i, j, factor)`` scales one of its entries; ``counted``
    collects the evaluations of phi."""
    import test_large_sparse as ls

    def phi(t, q):
        if counted is not None:
            counted.append(1)
        return ls.phi(t, q)

    def jac(t, q):
        J = ls.jac_sparse(t, q)
        if wrong is not None:
            J = J.tolil()
            J[wrong[0], wrong[1]] *= wrong[2]
            J = J.tocsr()
        return J

    n = 2 * N
    th = 0.4 + 0.01 * np.arange(N)
    q = np.cumsum(np.column_stack([np.sin(th), -np.cos(th)]) * ls.L, axis=0).ravel()
    v = np.cumsum(np.column_stack([np.cos(th), np.sin(th)]) * ls.L * 0.3, axis=0).ravel()
    sysm = go.System([f"{a}{i}" for i in range(N) for a in "xy"], mass=np.full(n, ls.MASS),
                     force=np.tile([0.0, -ls.MASS * ls.G], N),
                     constraints=[go.Holonomic(phi, jac, ls.gamma, rheonomic=False,
                                               name="links")])
    return sysm, q, v


@pytest.mark.parametrize("wrong", [None, (137, 275, 1.001), (0, 1, -1.0), (299, 597, 0.0)],
                         ids=["right", "entry 0.1 % off", "sign flipped", "entry dropped"])
def test_large_jacobian_checked_along_directions(wrong):
    """From 256 coordinates on a given Jacobian is compared with central differences
    along four fixed directions, not column by column: a 600-coordinate chain's checks
    evaluate phi about 30 times (not 6 n = 3600), and still find one wrong entry among
    1200 (0.1 % off, a flipped sign, a dropped entry), each named as the given
    derivative's disagreement."""
    calls: list = []
    sysm, q, v = _chain(300, wrong, calls)
    if wrong is None:
        sysm.check(0.0, q, v)
    else:
        with pytest.raises(ModelError, match=r"links: Phi_q: the given derivative disagrees"):
            sysm.check(0.0, q, v)
    # (three steps x four directions x two sides, the rounding noise's three, the
    # residuals' own: the column-by-column check took 6 n)
    assert len(calls) < 60


@pytest.mark.parametrize("slope", [0.1, 0.2])
def test_a_contact_nonsmooth_at_the_initial_state_is_checked_next_to_it(slope):
    """``Contact.nonsmooth_at``: a gap ``y - 0.1 |x|`` with the Jacobian of one side at the
    kink ``x = 0`` (the one-sided slopes are -0.1 and +0.1, the central differences 0: no
    derivative to judge there). Declared non-smooth at ``|x| < 1e-4``, the check concludes
    nothing at the initial state and checks at its perturbed state (``x`` ~ 1e-3): the right
    Jacobian passes and the run goes on; a Jacobian with the wrong slope (0.2) is refused
    there, so the declaration does not switch the check off. Undeclared, the right
    Jacobian is refused at the kink."""
    def gap(t, q):
        return np.array([q[1] - 0.1 * np.abs(q[0])])

    def jacobian(t, q):
        return np.array([[-slope if q[0] >= 0 else slope, 1.0]])

    def system(declared):
        floor = go.Contact(gap, jacobian, lambda t, q, v: np.zeros(1), rheonomic=False,
                           name="vee")
        if declared:
            floor.nonsmooth_at = lambda t, q: abs(q[0]) < 1e-4
        return go.System(("x", "y"), mass=np.eye(2), force=[0.0, -9.81],
                         constraints=[floor])

    q0, v0 = np.array([0.0, 1.0]), np.zeros(2)
    if slope == 0.1:
        run = go.simulate(system(True), (0.0, 0.1), q0, v0)
        assert run.success
        with pytest.raises(ModelError, match="vee.gap: Phi_q: the given derivative disagrees"):
            go.simulate(system(False), (0.0, 0.1), q0, v0)
    else:
        with pytest.raises(ModelError, match="perturbed state"):
            go.simulate(system(True), (0.0, 0.1), q0, v0)
