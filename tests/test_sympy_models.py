"""from_mechanics on sympy's own models as sympy builds them (issue item "Conventions of
sympy users").

The models are taken from sympy's own ``physics.mechanics`` (``models.py`` and the
tests ``test_system_class.py``, ``test_jointsmethod.py``, ``test_lagrange.py``),
verbatim where they are built in a test: specified inputs (dynamicsymbols such as
``F(t)`` in the loads, PyDy's ``specifieds``), a ``JointsMethod`` and a
``sympy.physics.mechanics.System`` passed as they are, and a constant that only
shifts the potential. The reference is sympy's own equations, never gaussopt's:
``mass_matrix_full x = forcing_full`` lambdified and solved by numpy at the same
input values, and integrated by solve_ivp (DOP853, rtol = atol = 1e-13).

Tolerances and why:

* accelerations (``solve_step``) against sympy's solution at random states, relative
  to max |a|: both sides evaluate exact expressions of the same equations in double
  precision and solve a small linear system. Each entry of ``M`` and ``F`` is a sum
  of at most a few tens of terms of size O(|F|) at these states, so it carries at
  most ~32 eps of its size; the solve amplifies that by at most cond (the condition
  number of the dynamic block of sympy's full matrix, the rows after its kinematic
  identity block, asserted below ``COND_MAX`` at every state), so each
  side errs by at most 32 * cond * eps relative: 2 * 32 * 70 * eps = 1.0e-12, the
  bound asserted (measured 5e-16 to 3e-15, cond up to 46);
* 1 s runs against the reference: test_trajectory.integration_bound (the local
  errors both runs admit, times the growth of errors along the exact motion,
  test_trajectory.flow_growth, from the reference); measured 1.0e-11 to 1.4e-11
  against bounds of 2e-10 to 1.2e-7 (the double pendulum on a cart: growth 65).

No wall-clock times are asserted (the cost of callable inputs is measured in the
docstring of :func:`gaussopt.symbolic.from_mechanics`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp
from sympy.physics import mechanics as me
from sympy.physics.mechanics import dynamicsymbols

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.symbolic import SymbolicModel, from_lagrangian, from_mechanics, kane_velocities
from test_trajectory import EPS, flow_growth, integration_bound

t = dynamicsymbols._t
COND_MAX = 70.0
ACC_TOL = 2 * 32 * COND_MAX * EPS   # = 1.0e-12, see the module docstring


# =========================================================================== sympy's equations
class SympyEquations:
    """sympy's own equations of a KanesMethod (kinematics ``q' = u``, checked) or a
    LagrangesMethod, with parameter values and the inputs as numbers:
    ``mass_matrix_full x = forcing_full`` solved by numpy."""

    def __init__(self, method, params: dict, inputs=()):
        self.kane = isinstance(method, me.KanesMethod)
        self.q = q = list(method.q)
        self.n = n = len(q)
        if self.kane:
            u = list(method.u)
            kd = method.kindiffdict()
            assert all(kd[x.diff(t)] == ui for x, ui in zip(q, u)), kd  # q' = u
        else:
            u = [x.diff(t) for x in q]
        self.inputs = list(inputs)
        sq, su = sp.symbols(f"sq:{n}"), sp.symbols(f"su:{n}")
        si = sp.symbols(f"si:{len(self.inputs)}")
        rep = dict(zip(self.inputs[::-1], si[::-1]))   # derivatives (listed last) first
        rep.update(zip(u, su))
        rep.update(zip(q, sq))
        Mf = me.msubs(method.mass_matrix_full, rep)
        Ff = me.msubs(method.forcing_full, rep)
        by_name = {str(k): v for k, v in params.items()}
        pv = {s: by_name[s.name] for s in Mf.free_symbols | Ff.free_symbols
              if s.name in by_name}
        Mf, Ff = Mf.xreplace(pv), Ff.xreplace(pv)
        self._f = sp.lambdify((t, sq, su, si), (Mf, Ff), cse=True)

    def solve(self, tv, q, u, ivals):
        A, b = self._f(tv, list(q), list(u), list(ivals))
        A = np.asarray(A, dtype=float)
        x = np.linalg.solve(A, np.asarray(b, dtype=float).ravel())
        # the kinematic rows (q' = u: an identity block) decouple: the condition of the
        # dynamic block (with the constraint rows and multipliers) is what amplifies
        return x, float(np.linalg.cond(A[self.n:, self.n:]))

    def accelerations(self, tv, q, u, ivals):
        """(q'', cond of the full matrix)."""
        x, cond = self.solve(tv, q, u, ivals)
        return x[self.n:2 * self.n], cond

    def reference(self, inputs, y0, t_eval):
        """solve_ivp (DOP853, rtol = atol = 1e-13) of sympy's equations, state (q, u);
        ``inputs(t, q, u)`` -> the input values."""
        n = self.n

        def rhs(tv, y):
            return np.concatenate([y[n:], self.accelerations(tv, y[:n], y[n:],
                                                             inputs(tv, y[:n], y[n:]))[0]])

        sol = solve_ivp(rhs, (0.0, float(t_eval[-1])), y0, method="DOP853", rtol=1e-13,
                        atol=1e-13, t_eval=t_eval)
        assert sol.success
        return sol


def check_accelerations(system, eqs, states, inputs):
    """gaussopt's step against sympy's solution at the states (t, q, u); returns the
    largest relative error and condition number."""
    worst = wcond = 0.0
    for tv, q, u in states:
        ref, cond = eqs.accelerations(tv, q, u, inputs(tv, q, u))
        assert cond < COND_MAX, cond           # the premise of ACC_TOL
        a = go.solve_step(system, tv, q, u).a
        err = np.abs(a - ref).max() / np.abs(ref).max()
        assert err <= ACC_TOL, (err, tv, q, u)
        worst, wcond = max(worst, err), max(wcond, cond)
    print(f"\naccelerations: max relative error {worst:.2g}, max cond {wcond:.3g}")
    return worst


def check_run(system, eqs, inputs, q0, v0, t_end=1.0):
    """A 1 s run against sympy's equations integrated by solve_ivp."""
    t_eval = np.linspace(0.0, t_end, 101)
    tr = go.simulate(system, (0.0, t_end), q0, v0, rtol=1e-12, atol=1e-12, t_eval=t_eval)
    assert tr.success, tr.message
    y0 = np.concatenate([q0, v0])
    ref = eqs.reference(inputs, y0, t_eval)
    err = max(np.abs(tr.q - ref.y[:eqs.n].T).max(), np.abs(tr.v - ref.y[eqs.n:].T).max())
    growth = flow_growth(lambda y, ts: eqs.reference(inputs, y, ts).y, y0, t_eval, samples=26)
    bound = integration_bound(tr, growth, dense=True, ref_tol=1e-13)
    assert err <= bound, (err, bound)
    print(f"\n1 s run: max error {err:.2g}, bound {bound:.2g} (growth {growth:.3g})")
    return err, bound


def random_states(n, count, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(rng.uniform(0, 2), rng.uniform(-scale, scale, n), rng.uniform(-scale, scale, n))
            for _ in range(count)]


# =========================================================================== specified forces
def test_multi_mass_spring_damper_specified_forces():
    """sympy's ``models.multi_mass_spring_damper(3, apply_gravity=True,
    apply_external_forces=True)``: a force ``f_i(t)`` on each mass. Given as a
    feedback of the state, a number and a function of time (a number is a parameter
    of the compiled model; a callable makes the System run through Python)."""
    from sympy.physics.mechanics.models import multi_mass_spring_damper
    kane = multi_mass_spring_damper(3, apply_gravity=True, apply_external_forces=True)
    f0, f1, f2 = dynamicsymbols("f0:3")
    params = {"m0": 1.3, "m1": 0.7, "m2": 2.1, "k0": 9.0, "k1": 4.0, "k2": 6.5,
              "c0": 0.4, "c1": 0.25, "c2": 0.6, "g": 9.81}

    def feedback(tv, q, v):
        return -0.8 * q[0] - 0.3 * v[2] + np.sin(2.0 * tv)

    def wave(tv, q, v):
        return 0.5 * np.cos(3.0 * tv)

    specified = {f0: feedback, f1: 1.5, f2: wave}
    system = from_mechanics(kane, params, specified=specified)
    assert system.compiled is None             # callable inputs: the Python functions

    def values(tv, q, u):
        return [feedback(tv, q, u), 1.5, wave(tv, q, u)]

    eqs = SympyEquations(kane, params, [f0, f1, f2])
    check_accelerations(system, eqs, random_states(3, 20, 1), values)
    q0, v0 = np.array([0.1, -0.2, 0.3]), np.array([0.0, 0.4, -0.1])
    check_run(system, eqs, values, q0, v0)

    # numbers only: folded into the parameters of the compiled model, same motion
    const = from_mechanics(kane, params, specified={"f0": -0.4, f1: 1.5, sp.Function("f2"): 0.2})
    assert const.compiled is not None
    check_run(const, eqs, lambda tv, q, u: [-0.4, 1.5, 0.2], q0, v0)


def test_n_link_pendulum_on_cart_cart_force_and_joint_torques():
    """sympy's ``models.n_link_pendulum_on_cart(2, cart_force=True, joint_torques=True)``:
    ``F(t)`` on the cart, ``T1(t)``, ``T2(t)`` at the joints. A missing input is named
    with how to pass it."""
    from sympy.physics.mechanics.models import n_link_pendulum_on_cart
    kane = n_link_pendulum_on_cart(2, cart_force=True, joint_torques=True)
    F, T1, T2 = dynamicsymbols("F T1 T2")
    params = {"m0": 2.0, "m1": 0.6, "m2": 0.45, "l0": 0.8, "l1": 0.55, "g": 9.81}
    with pytest.raises(ModelError, match=r"unspecified inputs of model .*: F\(t\), T1\(t\), "
                                         r"T2\(t\) .*pass specified=\{F: \.\.\., T1: \.\.\., "
                                         r"T2: \.\.\.\}, each a callable f\(t, q, v\)"):
        from_mechanics(kane, params)
    with pytest.raises(ModelError, match=r"unspecified input of model .*: T2\(t\) .*"
                                         r"specified=\{T2: \.\.\.\}"):
        from_mechanics(kane, params, specified={F: 1.0, T1: 1.0})
    with pytest.raises(ModelError, match=r"unbound symbols .*: g, l1;.*Unspecified input"):
        from_mechanics(kane, {k: v for k, v in params.items() if k not in ("g", "l1")},
                       specified={F: 1.0, T1: 1.0})

    def cart(tv, q, v):
        return 3.0 * np.sin(tv) - 2.0 * v[0]

    def torque(tv, q, v):
        return -1.5 * (q[1] - q[2]) - 0.2 * v[1]

    specified = {F: cart, T1: torque, "T2": 0.35}
    system = from_mechanics(kane, params, specified=specified)

    def values(tv, q, u):
        return [cart(tv, q, u), torque(tv, q, u), 0.35]

    eqs = SympyEquations(kane, params, [F, T1, T2])
    check_accelerations(system, eqs, random_states(3, 20, 2), values)
    check_run(system, eqs, values, np.array([0.2, 0.4, -0.3]), np.array([0.0, -0.5, 0.8]))


# =========================================================================== wrappers as they are
def cart_pendulum_system(lagrange: bool):
    """sympy's TestSystemExamples.test_cart_pendulum_kanes / _lagrange (test_system_class.py),
    verbatim: a cart (qc) on a rail driven by ``F(t)``, a pendulum (qp) with a torsion
    spring k, then the constraint that the bob stays above the rail's origin (qc
    dependent)."""
    from sympy.physics.mechanics import (Particle, PinJoint, PrismaticJoint, ReferenceFrame,
                                         RigidBody, System, TorqueActuator)
    g, l, mc, mp, k = sp.symbols('g l mc mp k')
    F, qp, qc, up, uc = dynamicsymbols('F qp qc up uc')
    if lagrange:
        up, uc = dynamicsymbols('qp qc', 1)
    rail = RigidBody('rail')
    cart = RigidBody('cart', mass=mc)
    bob = Particle('bob', mass=mp)
    bob_frame = ReferenceFrame('bob_frame')
    system = System.from_newtonian(rail)
    slider = PrismaticJoint('slider', rail, cart, qc, uc, joint_axis=rail.x)
    pin = PinJoint('pin', cart, bob, qp, up, joint_axis=cart.z,
                   child_interframe=bob_frame, child_point=l * bob_frame.y)
    system.add_joints(slider, pin)
    if lagrange:
        for body in system.bodies:
            body.potential_energy = body.mass * g * body.masscenter.pos_from(
                system.fixed_point).dot(system.y)
    else:
        system.apply_uniform_gravity(-g * system.y)
    system.add_loads((cart.masscenter, F * rail.x))
    system.add_actuators(TorqueActuator(k * qp, cart.z, bob_frame, cart))
    system.add_holonomic_constraints(
        sp.sympify(bob.masscenter.pos_from(rail.masscenter).dot(system.x)))
    system.q_ind, system.q_dep = qp, qc
    if not lagrange:
        system.u_ind, system.u_dep = up, uc
    system.validate_system(me.LagrangesMethod if lagrange else me.KanesMethod)
    system.form_eoms(me.LagrangesMethod) if lagrange else system.form_eoms()
    return system, F


P_CART = {"g": 9.81, "l": 0.7, "mc": 1.6, "mp": 0.45, "k": 2.5}


def cart_states(count, seed):
    """States on the constraint: qc = -l sin(qp), qc' = -l cos(qp) qp' (sympy's test)."""
    l_ = P_CART["l"]
    out = []
    for tv, (qp,), (up,) in random_states(1, count, seed, scale=1.2):
        out.append((tv, np.array([qp, -l_ * np.sin(qp)]), np.array([up, -l_ * np.cos(qp) * up])))
    return out


@pytest.mark.parametrize("lagrange", [False, True], ids=["kane", "lagrange"])
def test_system_cart_pendulum_with_time_varying_force(lagrange):
    """A sympy System (KanesMethod or LagrangesMethod), passed as it is, with its
    holonomic constraint, torque actuator and the cart force F(t) as a specified input."""
    system, F = cart_pendulum_system(lagrange)
    assert from_mechanics(system, model=True).inputs == (F,)

    def force(tv, q, v):
        return 2.0 * np.cos(1.7 * tv) - 0.5 * v[1]

    gs = from_mechanics(system, P_CART, specified={F: force})
    assert gs.coordinates == ("qp", "qc")
    eqs = SympyEquations(system.eom_method, P_CART, [F])

    def values(tv, q, u):
        return [force(tv, q, u)]

    check_accelerations(gs, eqs, cart_states(20, 3), values)
    _, q0, v0 = cart_states(1, 4)[0]
    check_run(gs, eqs, values, q0, v0)


def chaos_pendulum():
    """sympy's test_jointsmethod.test_chaos_pendulum (PyDy's chaos pendulum), verbatim:
    a JointsMethod over two pin joints."""
    from sympy.physics.mechanics import Body, JointsMethod, PinJoint, ReferenceFrame, inertia
    mA, mB, lA, lB, IAxx, IBxx, IByy, IBzz, g = sp.symbols(
        'mA, mB, lA, lB, IAxx, IBxx, IByy, IBzz, g')
    theta, phi, omega, alpha = dynamicsymbols('theta phi omega alpha')
    A = ReferenceFrame('A')
    B = ReferenceFrame('B')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (Body and JointsMethod are deprecated in sympy)
        rod = Body('rod', mass=mA, frame=A, central_inertia=inertia(A, IAxx, IAxx, 0))
        plate = Body('plate', mass=mB, frame=B, central_inertia=inertia(B, IBxx, IByy, IBzz))
        C = Body('C')
        J1 = PinJoint('J1', C, rod, coordinates=theta, speeds=omega,
                      child_point=-lA * rod.z, joint_axis=C.y)
        J2 = PinJoint('J2', rod, plate, coordinates=phi, speeds=alpha,
                      parent_point=(lB - lA) * rod.z, joint_axis=rod.z)
        rod.apply_force(mA * g * C.z)
        plate.apply_force(mB * g * C.z)
        method = JointsMethod(C, J1, J2)
    return method


P_CHAOS = {"mA": 0.01, "mB": 0.1, "lA": 0.1, "lB": 0.2, "IAxx": 1.2e-4, "IBxx": 2.5e-4,
           "IByy": 8.0e-4, "IBzz": 1.05e-3, "g": 9.81}


def test_jointsmethod_chaos_pendulum():
    """A JointsMethod passed as it is (its form_eoms called by from_mechanics)."""
    method = chaos_pendulum()
    assert method.method is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system = from_mechanics(method, P_CHAOS)
    assert method.method is not None and system.coordinates == ("theta", "phi")
    eqs = SympyEquations(method.method, P_CHAOS)
    no_inputs = (lambda tv, q, u: [])
    check_accelerations(system, eqs, random_states(2, 20, 5, scale=2.0), no_inputs)
    q0, v0 = np.array([0.6, 0.2]), np.array([0.0, 3.0])
    check_run(system, eqs, no_inputs, q0, v0)
    # the speeds of a JointsMethod are its KanesMethod's
    assert np.array_equal(kane_velocities(method, q0, v0, P_CHAOS), v0)


def test_jointsmethod_lagrange_simple_pendulum():
    """sympy's test_jointsmethod.test_simple_pedulum: a JointsMethod formed with
    LagrangesMethod, the potential given on the body."""
    from sympy.physics.mechanics import Body, JointsMethod, PinJoint
    l, m, g = sp.symbols('l m g')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        C = Body('C')
        b = Body('b', mass=m)
        q = dynamicsymbols('q')
        P = PinJoint('P', C, b, speeds=q.diff(t), coordinates=q, child_point=-l * b.x,
                     joint_axis=C.z)
        b.potential_energy = - m * g * l * sp.cos(q)
        method = JointsMethod(C, P)
        method.form_eoms(me.LagrangesMethod)
    system = from_mechanics(method, {l: 0.9, m: 1.7, g: 9.81})
    a = go.solve_step(system, 0.0, np.array([0.4]), np.array([0.3])).a
    # sympy's own rhs: -g sin(q) / l (its test); a few roundings
    assert abs(a[0] + 9.81 * np.sin(0.4) / 0.9) <= 4 * EPS * 9.81 / 0.9


def test_system_not_yet_formed():
    """The example of sympy's System.form_eoms docstring (a spring-mass-damper on a
    prismatic joint whose speed is q'), given before its equations are formed:
    from_mechanics forms them (LagrangesMethod: the speeds are the coordinates'
    derivatives) and follows sympy's own ``rhs`` (b q' - k q) / m."""
    q = dynamicsymbols('q')
    qd = dynamicsymbols('q', 1)
    m, k, b = sp.symbols('m k b')
    wall = me.RigidBody('W')
    system = me.System.from_newtonian(wall)
    bob = me.Particle('P', mass=m)
    bob.potential_energy = sp.S.Half * k * q**2
    system.add_joints(me.PrismaticJoint('J', wall, bob, q, qd))
    system.add_loads((bob.masscenter, b * qd * system.x))
    gs = from_mechanics(system, {m: 2.0, k: 8.0, b: 0.5})
    assert isinstance(system.eom_method, me.LagrangesMethod)
    rhs = sp.lambdify((q, qd), system.rhs()[1].subs({m: 2.0, k: 8.0, b: 0.5}))
    a = go.solve_step(gs, 0.0, np.array([0.5]), np.array([1.0])).a
    assert abs(a[0] - rhs(0.5, 1.0)) <= 4 * EPS * (8.0 * 0.5 + 0.5 * 1.0) / 2.0


# =========================================================================== potential-only constants
def test_potential_only_constant_needs_no_value():
    """sympy's test_lagrange.test_disc_on_an_incline_plane, verbatim: the potential
    m g (l - y) sin(alpha) uses the length l of the incline, which is absent from
    sympy's equations: no value is needed; the energy is then known up to the
    constant m g l sin(alpha) (its drift does not see it). A symbol the equations
    use is still named when missing."""
    y, theta = dynamicsymbols('y theta')
    yd, thetad = dynamicsymbols('y theta', 1)
    m, g, R, l, alpha = sp.symbols('m g R l alpha')
    N = me.ReferenceFrame('N')
    A = N.orientnew('A', 'Axis', [sp.pi / 2 - alpha, N.z])
    B = A.orientnew('B', 'Axis', [-theta, A.z])
    Do = me.Point('Do')
    Do.set_vel(N, yd * A.x)
    I = m * R**2 / 2 * B.z | B.z
    D = me.RigidBody('D', Do, B, m, (I, Do))
    D.potential_energy = m * g * (l - y) * sp.sin(alpha)
    L = me.Lagrangian(N, D)
    lm = me.LagrangesMethod(L, [y, theta], hol_coneqs=[y - R * theta])
    lm.form_lagranges_equations()
    assert l not in lm.mass_matrix_full.free_symbols | lm.forcing_full.free_symbols

    params = {m: 1.4, g: 9.81, R: 0.3, alpha: 0.5}
    model = from_mechanics(lm, model=True)
    assert model.energy_only_parameters == (l,)
    system = from_mechanics(lm, params)
    eqs = SympyEquations(lm, params)
    states = [(tv, np.array([R_ * th, th]), np.array([R_ * w, w]))
              for tv, (th,), (w,) in random_states(1, 10, 6) for R_ in [params[R]]]
    check_accelerations(system, eqs, states, lambda tv, q, u: [])
    q, v = np.array([0.3, 1.0]), np.array([0.6, 2.0])
    # T + m g (l - y) sin(alpha) with l = 0: T = m y'^2 / 2 + m R^2 th'^2 / 4
    E = 1.4 * 0.6**2 / 2 + 1.4 * 0.3**2 * 2.0**2 / 4 - 1.4 * 9.81 * 0.3 * np.sin(0.5)
    assert system.energy(0.0, q, v) == pytest.approx(E, rel=8 * EPS)
    with_l = from_mechanics(lm, {**params, l: 2.0})
    assert with_l.energy(0.0, q, v) - system.energy(0.0, q, v) == pytest.approx(
        1.4 * 9.81 * 2.0 * np.sin(0.5), rel=64 * EPS)
    with pytest.raises(ModelError, match=r"unbound symbols in model .*: R; give their values"):
        from_mechanics(lm, {m: 1.4, g: 9.81, alpha: 0.5})


def test_energy_only_symbol_entering_not_additively_drops_the_energy():
    """A symbol only the energy uses, but multiplying the state (here a potential
    h * y' added to the energy by hand): 0 would not be a constant shift, so without
    its value the System has no energy; with it, the energy is complete."""
    x = dynamicsymbols("x")
    m, k, h = sp.symbols("m k h")
    model = SymbolicModel.from_equations([x], [[m]], [-k * x],
                                         energy=m * x.diff(t)**2 / 2 + k * x**2 / 2 + h * x.diff(t))
    assert model.energy_only_parameters == (h,)
    assert not model.system({m: 2.0, k: 3.0}).has_energy
    full = model.system({m: 2.0, k: 3.0, h: 0.5})
    assert full.energy(0.0, np.array([1.0]), np.array([2.0])) == 4.0 + 1.5 + 1.0


# =========================================================================== inputs in positions
def moving_support(as_input: bool):
    """A pendulum whose support moves along x: x_s = A sin(W t) written out, or as a
    specified input xs(t) (in the Lagrangian: its derivatives are inputs too)."""
    th = dynamicsymbols("theta")
    m, l, g = sp.symbols("m l g", positive=True)
    xs = dynamicsymbols("xs") if as_input else 0.3 * sp.sin(2.0 * t)
    x, y = xs + l * sp.sin(th), -l * sp.cos(th)
    return SymbolicModel([th], T=m / 2 * (x.diff(t)**2 + y.diff(t)**2), V=m * g * y), xs


def test_input_in_the_lagrangian_with_its_derivatives():
    """An input in a position is differentiated in time by the derivation: its
    derivatives are inputs of their own; given consistently they reproduce the model
    with the motion written out (the same equations: a few roundings)."""
    ref_model, _ = moving_support(False)
    model, xs = moving_support(True)
    # x_s' is in T (the energy) but cancels from F: only x_s'' is needed
    assert model.inputs == (xs.diff(t), xs.diff(t, 2))
    params = {"m": 1.2, "l": 0.8, "g": 9.81}
    with pytest.raises(ModelError, match=r"Derivative\(xs\(t\), \(t, 2\)\).*"
                                         r"specified=\{xs\.diff\(t, 2\): \.\.\.\}"):
        model.system(params)
    sys_in = model.system(params, specified={xs.diff(t, 2): lambda tv, q, v: -1.2 * np.sin(2 * tv),
                                             xs: lambda tv, q, v: 0.3 * np.sin(2 * tv)})
    sys_ref = ref_model.system(params)
    assert not sys_in.has_energy    # (x_s' not given: the energy is not defined)
    for tv, q, v in random_states(1, 10, 7, scale=2.0):
        a_in = go.solve_step(sys_in, tv, q, v).a
        a_ref = go.solve_step(sys_ref, tv, q, v).a
        scale = 9.81 / 0.8 + 1.2 / 0.8 + np.abs(v).max()**2
        assert np.abs(a_in - a_ref).max() <= 16 * EPS * scale


# =========================================================================== errors
def test_specified_errors():
    x, y = dynamicsymbols("x y")
    F = dynamicsymbols("F")
    m = sp.Symbol("m")
    model = SymbolicModel([x, y], m / 2 * (x.diff(t)**2 + y.diff(t)**2), forces=[F, 0])
    with pytest.raises(ModelError, match=r"`specified` key x\(t\) is a coordinate"):
        model.system({m: 1.0}, specified={x: 1.0, F: 1.0})
    with pytest.raises(ModelError, match=r"`specified` keys must be functions of t .*found m"):
        model.system({m: 1.0}, specified={m: 1.0, F: 1.0})
    with pytest.raises(ModelError, match=r"`specified\[F\(t\)\]` must be a callable f\(t, q, v\) "
                                         r"or a real number, found 'strong'"):
        model.system({m: 1.0}, specified={F: "strong"})
    with pytest.raises(ModelError, match=r"`specified` must be a dict"):
        model.system({m: 1.0}, specified=[F])
    with pytest.raises(ModelError, match=r"neither among the coordinates .* nor functions of t "
                                         r"alone"):
        SymbolicModel([x], x.diff(t)**2, V=sp.Function("f")(x))
    # an input the model does not use is ignored; from_lagrangian passes `specified` on
    sysm = from_lagrangian([x, y], m / 2 * (x.diff(t)**2 + y.diff(t)**2), forces=[F, 0],
                           params={m: 2.0}, specified={F: 3.0, dynamicsymbols("G"): 1.0})
    assert np.array_equal(sysm.constant_force, [3.0, 0.0])
    with pytest.raises(ModelError, match=r"`method` must be a sympy.physics.mechanics KanesMethod, "
                                         r"LagrangesMethod, JointsMethod or System"):
        from_mechanics(object())


def test_pickle_keeps_specified_inputs():
    """A System with specified inputs pickles with them (numbers; module-level callables)."""
    import pickle
    from sympy.physics.mechanics.models import multi_mass_spring_damper
    kane = multi_mass_spring_damper(1, apply_external_forces=True)
    system = from_mechanics(kane, {"m0": 2.0, "k0": 8.0, "c0": 0.5}, specified={"f0": 1.25})
    again = pickle.loads(pickle.dumps(system))
    q, v = np.array([0.5]), np.array([0.2])
    assert np.array_equal(again.force(0.0, q, v), system.force(0.0, q, v))
    assert system.force(0.0, q, v)[0] == pytest.approx(1.25 - 4.0 - 0.1, rel=4 * EPS)
