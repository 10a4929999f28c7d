"""sympy.physics.mechanics: LagrangesMethod and KanesMethod as symbolic models."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef

from gaussopt.core.exceptions import ModelError
from gaussopt.model.system import System
from gaussopt.symbolic._parse import Exprs, _as_list, _sympify
from gaussopt.symbolic.symbolic_model import SymbolicModel


def _equations_method(method: Any) -> Any:
    """The KanesMethod or LagrangesMethod behind ``method``: itself, or the one a
    ``JointsMethod`` (``.method``) or a ``sympy.physics.mechanics.System``
    (``.eom_method``) forms its equations with; their ``form_eoms()`` is called if it
    was not (a LagrangesMethod when the speeds are the coordinates' derivatives, else
    sympy's default, a KanesMethod)."""
    from sympy.physics import mechanics as me
    if isinstance(method, (me.KanesMethod, me.LagrangesMethod)):
        return method
    wrappers = tuple(c for c in (getattr(me, "JointsMethod", None), getattr(me, "System", None))
                     if isinstance(c, type))
    if wrappers and isinstance(method, wrappers):
        inner = (getattr(method, "_method", None) if isinstance(method, me.JointsMethod)
                 else getattr(method, "_eom_method", None))
        if inner is None:
            # speeds that are the coordinates' derivatives (joints made for Lagrange's
            # equations) have no kinematic differential equations: LagrangesMethod
            speeds = list(method.u)
            lagrange = all(isinstance(x, sp.Derivative) for x in speeds)
            try:
                method.form_eoms(me.LagrangesMethod) if lagrange else method.form_eoms()
            except (ValueError, TypeError, AttributeError) as exc:  # sympy's validation
                raise ModelError(
                    f"`method`: sympy cannot form the equations of this "
                    f"{type(method).__name__} ({exc}); call its form_eoms(KanesMethod or "
                    "LagrangesMethod) first.") from exc
            inner = (method.method if isinstance(method, me.JointsMethod)
                     else method.eom_method)
        if isinstance(inner, (me.KanesMethod, me.LagrangesMethod)):
            return inner
        method = inner
    raise ModelError("`method` must be a sympy.physics.mechanics KanesMethod, LagrangesMethod, "
                     f"JointsMethod or System, found {type(method).__name__}.")


def _mechanics_model(method: Any, holonomic: Exprs, nonholonomic: Exprs, acceleration: Exprs,
                     coordinates, name, modules, energy: Any = None) -> SymbolicModel:
    from sympy.physics import mechanics as me

    t = me.dynamicsymbols._t
    method = _equations_method(method)
    if isinstance(method, me.LagrangesMethod):
        if method.eom is None:
            method.form_lagranges_equations()
        q = list(method.q)
        n = len(q)
        M = method.mass_matrix[:, :n]
        F = method.forcing
        hol = list(getattr(method, "_hol_coneqs", sp.Matrix()))
        nh = list(method.coneqs)[len(hol):]
        L = getattr(method, "_L", None)
        if energy is not None:
            energy = _sympify(energy, "energy")
            _check_energy(energy, q, [M, F] + hol + nh, f"not coordinates {[str(x) for x in q]} "
                          "of the LagrangesMethod")
        elif L is not None:
            L = sp.Matrix(L)[0]
            qd = [x.diff(t) for x in q]
            energy = sum(v * L.diff(v) for v in qd) - L  # Jacobi integral (= T + V if natural)
        return SymbolicModel.from_equations(
            q, M, F, hol + _as_list(holonomic, "holonomic"),
            nh + _as_list(nonholonomic, "nonholonomic"), acceleration, energy=energy,
            coordinates=coordinates, name=name, modules=modules)
    return _kane_model(method, holonomic, nonholonomic, acceleration, coordinates, name,
                       modules, energy)


def from_mechanics(method: Any, params: Optional[Mapping] = None, *, holonomic: Exprs = (),
                   nonholonomic: Exprs = (), acceleration: Exprs = (),
                   coordinates: Optional[Sequence[str]] = None, name: Optional[str] = None,
                   modules: str = "math", model: bool = False,
                   energy: Any = None,
                   specified: Optional[Mapping] = None) -> Union[System, SymbolicModel]:
    """Build a System from a ``sympy.physics.mechanics`` KanesMethod, LagrangesMethod,
    JointsMethod or System.

    A ``JointsMethod`` or a ``sympy.physics.mechanics.System`` is taken as it is: the
    KanesMethod or LagrangesMethod it forms its equations with (``.method``,
    ``.eom_method``; if they were not formed, ``form_eoms()`` is called: with
    ``LagrangesMethod`` when its speeds are the coordinates' derivatives, else
    with sympy's default, ``KanesMethod``).

    A ``LagrangesMethod`` gives the unconstrained part through its
    ``mass_matrix`` and ``forcing`` (``M q'' = forcing``); its holonomic and
    nonholonomic constraints (``hol_coneqs``, ``nonhol_coneqs``) are taken over;
    its energy is the Jacobi integral ``q' . dL/dq' - L`` (``T + V`` for natural
    systems).

    Any ``KanesMethod`` is accepted (it carries no energy of its own: pass
    ``energy``). Its kinematic
    differential equations ``K_u u + K_q q' + f_k = 0`` are solved for the
    speeds, ``u = W(q, t) q' + w0(q, t)`` (with fewer speeds than coordinates,
    the equations left over become nonholonomic constraints; with more, each
    speed ``u_j`` the equations leave free, an ignorable angle such as a wheel's
    spin in sympy's bicycle, gets a coordinate added after the method's,
    named ``int_<u_j>`` with ``int_<u_j>' = u_j``: nothing depends on it, its
    initial value is arbitrary), and Kane's
    equations are formed from its bodies and loads with the partial velocities
    with respect to ``q'``: ``M = W^T M_u W``, ``F = W^T (f_u - M_u (W q' +
    w0)')`` with ``(M_u, f_u)`` Kane's equations in ``u`` with every speed
    independent. The System's state is ``(q, q')`` (use :func:`kane_velocities`
    for initial speeds). Its velocity constraints (``u_dependent`` with
    ``velocity_constraints``) and the constraints passed here, in the speeds
    ``u`` (e.g. from ``ang_vel_in``) or in ``q'``, become nonholonomic
    constraints, its configuration constraints holonomic ones; auxiliary speeds
    are set to zero. The equations are not simplified (common subexpressions and
    the generated code handle them as they are: sympy's bicycle derives and
    compiles in seconds); only quotients that sympy's solution of the kinematic
    equations leaves, and that can vanish (``1/sin(q3)`` in the rolling disc),
    are cancelled.

    Where ``W`` is singular, ``q'`` does not follow from the speeds: the chart of
    the coordinates is singular (Euler angles at gimbal lock; sympy's rolling
    disc lying flat, lean ``q2 = +-pi/2``, where yaw and spin turn about the
    same axis). ``M`` is singular there, the yaw and spin rates grow like
    ``1/cos q2`` as the disc approaches it (the integrator's steps shrink) and
    the step at it is not determined; :func:`kane_velocities` raises a ``ModelError`` there. Use
    coordinates that stay regular along the motion, or stop the run before it.

    Specified inputs (dynamicsymbols other than ``q`` and ``u``: a force ``F(t)``
    in the loads, the way sympy's models and PyDy's ``specifieds`` give external
    forces and torques) are given with ``specified``; a missing one is reported
    with how to pass it. Only the symbols the equations use need values: a
    constant that only shifts the potential (in the energy alone) may be left out.

    Parameters
    ----------
    method : KanesMethod, LagrangesMethod, JointsMethod or System
        A ``LagrangesMethod`` with its equations formed
        (``form_lagranges_equations()`` is called if needed); a ``KanesMethod``
        with its bodies and loads (given to it, or through
        ``kanes_equations(bodies, loads)``); a ``JointsMethod`` or a
        ``sympy.physics.mechanics.System`` (its ``form_eoms()`` is called if
        needed).
    params : dict, optional
        ``{Symbol or name: value}`` for the symbols that the mass matrix, the
        forces and the constraints use (:meth:`SymbolicModel.system`).
    holonomic, nonholonomic, acceleration : expressions, optional
        Further constraints in the method's dynamicsymbols: ``q``, ``q'``, and
        for a ``KanesMethod`` also its speeds ``u`` (and ``u'`` in
        ``acceleration``).
    coordinates, name, modules
        As in :func:`from_lagrangian`.
    model : bool, default False
        Return the :class:`SymbolicModel` (for several parameter sets) instead
        of a System.
    energy : expression, optional
        The System's energy, a diagnostic (``Trajectory.energy``, the energy
        drift of :func:`gaussopt.study.compare`), in the method's dynamicsymbols as the
        constraints are. For a ``KanesMethod``, which has none without it,
        typically ``sum(b.kinetic_energy(N) for b in bodies) + V`` with ``V`` the
        potential of its conservative loads (the example below); for a
        ``LagrangesMethod`` it replaces the Jacobi integral.
    specified : dict, optional
        ``{input: f}``, PyDy's ``specifieds``: for each specified input (a
        dynamicsymbol such as ``F = dynamicsymbols('F')``, or
        ``sympy.Function('F')(t)``; also its function or name) a number or a
        callable ``f(t, q, v) -> float`` of the System's state (``q``, ``v = q'``),
        evaluated at each call of the pieces that use it. Where the equations
        contain time derivatives of an input (an input in a position: a prescribed
        motion), the derivatives are inputs of their own (key ``F.diff(t)``).
        Details in :meth:`SymbolicModel.system`.

    Returns
    -------
    System or SymbolicModel

    Notes
    -----
    Cost of specified inputs. Numbers are parameters of the compiled model: no
    cost per evaluation, and the run uses the model's numba functions. A
    callable input cannot be called from the engine's compiled code, so the
    System then runs through its Python functions (the choice made here), each
    of which calls the input where it uses it. Measured on sympy's
    ``n_link_pendulum_on_cart(1, cart_force=True)`` (2 coordinates, a 10 s run
    at rtol = atol = 1e-10, 3446 right-hand sides; shared 2-core machine,
    medians of 5): ``F`` a number, 12 ms (3.4 us per right-hand side, numba);
    ``F`` a callable, 114 ms (33 us, Python), whatever the callable: the
    Python path, not the input, is the cost (the generated force function
    alone: 5.0 us with a number, 6.0 us with a callable returning one, 7.8 us
    with ``3 sin t``). Passing callables' values to the numba functions through
    the parameter array instead would still need a Python call from the engine
    per evaluation; it is not done.

    Examples
    --------
    >>> import sympy as sp, numpy as np
    >>> from sympy.physics import mechanics as me
    >>> th, w = me.dynamicsymbols("theta omega")
    >>> m, l, g = 1.0, 2.0, 9.81
    >>> N = me.ReferenceFrame("N"); B = N.orientnew("B", "Axis", (th, N.z))
    >>> O = me.Point("O"); O.set_vel(N, 0)
    >>> P = O.locatenew("P", -l * B.y); _ = P.v2pt_theory(O, N, B)
    >>> bob = me.Particle("bob", P, m)
    >>> kane = me.KanesMethod(N, [th], [w], kd_eqs=[th.diff() - w])
    >>> _ = kane.kanes_equations([bob], [(P, -m * g * N.y)])
    >>> pend = from_mechanics(kane, energy=bob.kinetic_energy(N) + m * g * P.pos_from(O).dot(N.y))
    >>> pend.energy(0.0, np.array([0.0]), np.array([1.0]))   # at the bottom: m l^2 w^2 / 2 - m g l
    -17.62

    >>> from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols
    >>> from gaussopt.symbolic import from_mechanics
    >>> x = dynamicsymbols("x")
    >>> m, k = sp.symbols("m k", positive=True)
    >>> lm = LagrangesMethod(m / 2 * x.diff()**2 - k / 2 * x**2, [x])
    >>> osc = from_mechanics(lm, {m: 2.0, k: 8.0})
    >>> osc.force(0.0, np.array([0.5]), np.array([0.0])), osc.constant_mass
    (array([-4.]), array([[2.]]))

    A specified force: sympy's mass-spring-damper driven by ``f0(t)``, given as a
    callable of ``(t, q, v)`` (or a number: ``specified={"f0": 2.0}``):

    >>> from sympy.physics.mechanics.models import multi_mass_spring_damper
    >>> kane = multi_mass_spring_damper(1, apply_external_forces=True)
    >>> f0 = dynamicsymbols("f0")
    >>> msd = from_mechanics(kane, {"m0": 2.0, "k0": 8.0, "c0": 0.5},
    ...                      specified={f0: lambda t, q, v: np.sin(t)})
    >>> msd.force(np.pi / 2, np.array([0.5]), np.array([0.0]))   # f0 - k0 x0 - c0 v0
    array([-3.])
    """
    mdl = _mechanics_model(method, holonomic, nonholonomic, acceleration, coordinates, name,
                           modules, energy)
    return mdl if model else mdl.system(params, specified=specified)


# =========================================================================== KanesMethod
# A KanesMethod is taken over through its bodies, loads, kinematic differential
# equations and constraints, not through its reduced equations: its speeds u are
# eliminated with the kinematic differential equations solved for them,
#
#     K_u u + K_q q' + f_k = 0   ->   u = W(q, t) q' + w0(q, t),
#
# and Kane's equations are formed with the coordinate derivatives as the speeds: with
# the velocities v, angular velocities w and accelerations of the bodies written in
# q, q', q'' and t, and the partial velocities V_i = dv/dq'_i, W_i = dw/dq'_i,
#
#     M_ij = sum m V_i . V_j + W_i . I . W_j,
#     F_i  = sum (loads) . (V_i, W_i) - (m a + I . alpha + w x I . w)|_{q''=0} . (V_i, W_i),
#
# i.e. M = W^T M_u W and F = W^T (f_u - M_u (W' q' + w0')) with (M_u, f_u) Kane's
# unconstrained equations in u. Kane's, not Lagrange's equations of the kinetic
# energy: Kane models set velocities that are not time derivatives of positions
# (sympy's rolling disc sets its centre's velocity to w x r, true only while it
# rolls), for which Lagrange's equations of T are wrong (they give the dynamics with
# the constraints substituted into T) while Gibbs-Appell/Kane's, which use a = dv/dt,
# are right on the constrained motion.
# Why this and not an integration in the speeds (as gaussopt.quasi.QuasiVelocities
# does): the result is an ordinary System in q with v = q', so every solver, the
# projection, the rank monitor, events and the compiled path apply unchanged. The
# reduced form of a constrained KanesMethod (its mass_matrix with u_dependent)
# eliminates the constraint forces, which gaussopt's step needs as A^T lam; and
# sympy's solution of the kinematic equations for q' (kindiffdict) leaves removable
# singularities (1/sin(q3) in sympy's rolling disc, 0/0 at q3 = 0) that its
# equations in u inherit, where W comes from the equations as written.
# More speeds than coordinates (o > n: speeds of ignorable angles, which sympy lets a
# model leave without coordinates, as its bicycle does for the wheel spins) fit the
# same form: each speed u_j that the kinematic equations leave free gets an angle
# theta_j with theta_j' = u_j, appended to q (nothing depends on it), and W is square.

# trigsimp's cost grows fast with the size: larger coefficients stay as they are
_TIDY_MAX_OPS = 400


def _tidy(e: Any) -> Any:
    """Exact tidying of a coefficient that came through sympy's solution of linear
    equations (``cancel``, then ``trigsimp``), kept where it is shorter: the
    removable singularities of ``(sin q + cos(q)**2/sin q) ...`` cancel, so the
    compiled expression does not divide 0 by 0."""
    e = sp.sympify(e)
    if not isinstance(e, sp.Expr) or e.is_number or sp.count_ops(e) > _TIDY_MAX_OPS:
        return e
    s = sp.cancel(sp.together(e))
    if s.has(sp.sin, sp.cos, sp.tan):
        s = sp.trigsimp(s)
    return s if sp.count_ops(s) <= sp.count_ops(e) else e


def _has_quotient(e: Any) -> bool:
    """``e`` divides by an expression of the functions of t (an integer negative power)."""
    return any(p.exp.is_Integer and p.exp < 0 and p.base.atoms(AppliedUndef)
               for p in sp.sympify(e).atoms(sp.Pow))


def _tidy_linear(e: sp.Expr, xs: Sequence) -> sp.Expr:
    """``e`` linear in ``xs`` rebuilt as ``sum tidy(de/dx_i) x_i + tidy(e|x=0)``."""
    e = sp.expand(e) if sp.count_ops(e) <= _TIDY_MAX_OPS else e
    coeffs = [_tidy(e.diff(x)) for x in xs]
    rest = _tidy(e.xreplace({x: 0 for x in xs}))
    return sum((c * x for c, x in zip(coeffs, xs)), rest)


@dataclass
class _KaneKinematics:
    """The speeds of a KanesMethod in terms of its coordinate derivatives."""
    q: list            # coordinates (independent, then dependent), functions of t
    qd: list           # their derivatives q'
    u: list            # generalized speeds (independent, then dependent)
    W: sp.Matrix       # (o, n): u = W q' + w0
    w0: sp.Matrix      # (o, 1)
    sub: dict          # u -> W q' + w0, u' -> its time derivative, auxiliary speeds -> 0
    constraints: list  # kinematic equations left over when o < n, in q and q'
    added: list        # angles added for speeds without coordinates (theta' = u), at the end of q


def _random_values(e: sp.MatrixBase, seed: int = 0) -> sp.MatrixBase:
    """``e`` at random values (in [0.3, 1.3]) of its functions of t and symbols."""
    rng = np.random.default_rng(seed)
    atoms = sorted(e.atoms(AppliedUndef) | (e.free_symbols - {sp.Symbol("t")}), key=str)
    return e.xreplace({a: sp.Float(rng.uniform(0.3, 1.3)) for a in atoms})


def _kane_kinematics(method: Any) -> _KaneKinematics:
    """Solve a KanesMethod's kinematic differential equations for its speeds (once per
    method)."""
    return _kane_cached(method, "kinematics", lambda: _solve_kane_kinematics(method))


def _solve_kane_kinematics(method: Any) -> _KaneKinematics:
    """Solve a KanesMethod's kinematic differential equations for its speeds."""
    from sympy.physics.mechanics import dynamicsymbols
    t = dynamicsymbols._t
    q, u = list(method.q), list(method.u)
    n, o = len(q), len(u)
    qd = [x.diff(t) for x in q]
    if hasattr(method, "_k_ku_implicit"):
        # the equations as the user wrote them (sympy >= 1.13), not solved for q'
        Ku, Kq, fk = method._k_ku_implicit, method._k_kqdot_implicit, method._f_k_implicit
    else:  # mass_matrix_kin q' = forcing_kin
        Kq = method.mass_matrix_kin
        r = -sp.Matrix(method.forcing_kin)
        Ku, fk = r.jacobian(u), r.xreplace(dict.fromkeys(u, 0))
    Ku, Kq, fk = sp.Matrix(Ku), sp.Matrix(Kq), sp.Matrix(fk)
    if Ku.shape != (n, o) or Kq.shape != (n, n):
        raise ModelError("`method`: the KanesMethod has no kinematic differential equations "
                         "(kd_eqs); give them when creating it.")
    added: list = []
    if o > n:
        # speeds with no coordinate (sympy's bicycle: the wheels' spin rates, ignorable
        # angles): the o - n speeds the equations leave free (the columns of K_u outside
        # n independent ones, chosen by a pivoted QR: columns of zeros come last) get
        # an angle each, theta_k' = u_j
        from scipy.linalg import qr
        A = np.array(_random_values(Ku).evalf(), dtype=float)
        _, R, piv = qr(A, pivoting=True)
        if n == 0 or abs(R[n - 1, n - 1]) <= 1e-9 * abs(R[0, 0]):
            raise ModelError("`method`: the kinematic differential equations do not determine "
                             "the coordinate derivatives from the generalized speeds.")
        free = sorted(piv[n:].tolist())
        taken = {str(x.func) for x in q} | {str(x.func) for x in u} | {
            str(f.func) for f in Ku.atoms(AppliedUndef) | Kq.atoms(AppliedUndef)
            | fk.atoms(AppliedUndef)}
        for j in free:
            base = f"int_{u[j].func}"
            label, k = base, 1
            while label in taken:
                label, k = f"{base}_{k}", k + 1
            taken.add(label)
            added.append(dynamicsymbols(label))
        extra = len(added)
        rows_u = sp.zeros(extra, o)
        for k, j in enumerate(free):
            rows_u[k, j] = -1
        Ku = Ku.col_join(rows_u)
        Kq = sp.diag(Kq, sp.eye(extra))
        fk = fk.col_join(sp.zeros(extra, 1))
        q = q + added
        qd = qd + [x.diff(t) for x in added]
        n = o
    if o < n:  # the equations also constrain q': o of them give u, the others are constraints
        from scipy.linalg import qr
        A = np.array(_random_values(Ku).evalf(), dtype=float)
        _, R, piv = qr(A.T, pivoting=True)
        if o and abs(R[o - 1, o - 1]) <= 1e-9 * abs(R[0, 0]):
            raise ModelError("`method`: the kinematic differential equations do not determine "
                             "the generalized speeds from the coordinate derivatives.")
        rows = sorted(piv[:o].tolist())
    else:
        rows = list(range(n))
    others = [i for i in range(n) if i not in rows]
    KuR = Ku.extract(rows, list(range(o)))
    rhs = -(Kq.extract(rows, list(range(n))) * sp.Matrix(qd) + fk.extract(rows, [0]))
    # a constant K_u (kd_eqs q' - u = 0, in any order) is solved exactly without divisions by
    # expressions: nothing to tidy
    simple = not KuR.free_symbols and not KuR.atoms(AppliedUndef)
    try:
        if simple and KuR.is_diagonal():
            sol = sp.Matrix([rhs[i] / KuR[i, i] for i in range(o)])
        elif simple:
            sol = KuR.inv() * rhs
        else:
            sol = KuR.LUsolve(rhs)
    except (ValueError, ZeroDivisionError) as exc:
        raise ModelError("`method`: the kinematic differential equations cannot be solved for "
                         f"the generalized speeds {u} (their coefficient matrix is singular)."
                         ) from exc
    W = sol.jacobian(qd)
    w0 = sol.xreplace(dict.fromkeys(qd, 0))
    if not simple:
        W, w0 = W.applyfunc(_tidy), w0.applyfunc(_tidy)
    uq = W * sp.Matrix(qd) + w0
    sub = dict(zip(u, uq))
    sub.update({ui.diff(t): e.diff(t) for ui, e in zip(u, uq)})
    aux = list(getattr(method, "_uaux", []))
    sub.update(dict.fromkeys(aux + [x.diff(t) for x in aux], 0))
    cons = [_tidy_linear(sp.expand((Ku[i, :] * uq + Kq[i, :] * sp.Matrix(qd))[0] + fk[i]), qd)
            for i in others]
    return _KaneKinematics(q, qd, u, W, w0, sub, cons, added)


def _check_energy(energy: Any, q: list, equations: list, what: str) -> None:
    """An ``energy`` given by the user may use the coordinates and the specified inputs
    of the equations, nothing else (a stray function would make it an input that only
    the energy uses)."""
    inputs = set()
    for e in equations:
        inputs |= set(_unknown_functions(e, q))
    bad = sorted(set(_unknown_functions(energy, q)) - inputs)
    if bad:
        raise ModelError(f"`energy` depends on {bad}, which are {what}, nor specified inputs of "
                         "its equations.")


def _unknown_functions(e: Any, known: Iterable) -> list:
    e = sp.sympify(e)
    return sorted({str(f) for f in e.atoms(AppliedUndef)} - {str(k) for k in known})


def _kane_velocity_constraints(method: Any, kin: _KaneKinematics) -> list:
    """The KanesMethod's velocity constraints (``B u + c = 0``, as sympy stores them) in
    ``q'``, with the kinematic equations' own constraints first (once per method)."""
    return list(_kane_cached(method, "constraints",
                             lambda: _substitute_velocity_constraints(method, kin)))


def _substitute_velocity_constraints(method: Any, kin: _KaneKinematics) -> list:
    from sympy.physics.mechanics import msubs
    B, c = sp.Matrix(getattr(method, "_k_nh", sp.Matrix())), sp.Matrix(getattr(method, "_f_nh",
                                                                             sp.Matrix()))
    out = list(kin.constraints)
    if B.rows:
        f = msubs(B * sp.Matrix(kin.u) + c, kin.sub)
        # tidied only where sympy's solution of the kinematic equations left a quotient
        # that can vanish (1/sin(q3) in the rolling disc: 0/0 at q3 = 0); square roots
        # (the bicycle's normalized contact direction) are not removable and not worth the
        # trigsimp (10 s per coefficient there)
        out += [_tidy_linear(e, kin.qd) if _has_quotient(e) else e for e in f]
    return out


def _kane_model(method: Any, holonomic: Exprs, nonholonomic: Exprs, acceleration: Exprs,
                coordinates, name, modules, energy: Any = None) -> SymbolicModel:
    """A KanesMethod as a model in its coordinates (see the comment above)."""
    from sympy.physics import mechanics as me
    kin = _kane_kinematics(method)
    N = method._inertial
    bodies = method.bodies
    if not bodies:
        raise ModelError("`method` has no bodies: pass bodies= (and forcelist=) to the "
                         "KanesMethod, or call method.kanes_equations(bodies, loads) first.")
    sub, qd, n = kin.sub, kin.qd, len(kin.q)
    no_qdd = {x.diff(me.dynamicsymbols._t, 2): 0 for x in kin.q}
    M, F = sp.zeros(n, n), sp.zeros(n, 1)
    try:
        for k, body in enumerate(bodies):
            # velocities and accelerations as sympy's KanesMethod forms them (with the
            # accelerations a user may have set), written in q, q', q''
            if isinstance(body, me.RigidBody):
                vs = [body.masscenter.vel(N), body.frame.ang_vel_in(N)]
                acc = body.masscenter.acc(N)
                I = body.central_inertia
                w = me.msubs(vs[1], sub)
                torque = me.msubs(I.dt(body.frame).dot(w) + I.dot(body.frame.ang_acc_in(N)),
                                  sub) + w.cross(I.dot(w))
            elif isinstance(body, me.Particle):
                vs, acc, I, torque = [body.point.vel(N)], body.point.acc(N), None, None
            else:
                raise ModelError(f"`method`: body {k} is a {type(body).__name__}; expected a "
                                 "RigidBody or a Particle.")
            vs = [me.msubs(v, sub) for v in vs]
            force = me.msubs(body.mass.diff(me.dynamicsymbols._t) * vs[0] + body.mass * acc, sub)
            parts = me.partial_velocity(vs, qd, N)  # dv/dq'_i, dw/dq'_i
            Vp = parts[0]
            Ip = [I.dot(x) for x in parts[1]] if I is not None else None
            for i in range(n):
                for j in range(i, n):
                    M[i, j] += body.mass * Vp[i].dot(Vp[j])
                    if Ip is not None:
                        M[i, j] += Ip[i].dot(parts[1][j])
                F[i] -= me.msubs(force.dot(Vp[i]), no_qdd)
                if Ip is not None:
                    F[i] -= me.msubs(torque.dot(parts[1][i]), no_qdd)
        for k, load in enumerate(method.loads or ()):
            where, vec = load[0], load[1]
            if isinstance(where, me.Point):
                vel = where.vel(N)
            elif isinstance(where, me.ReferenceFrame):
                vel = where.ang_vel_in(N)
            else:
                raise ModelError(f"`method`: load {k} acts on {where!r}; expected a Point (force) "
                                 "or a ReferenceFrame (torque).")
            vel, vec = me.msubs(vel, sub), me.msubs(vec, sub)
            for i, part in enumerate(me.partial_velocity([vel], qd, N)[0]):
                F[i] += part.dot(vec)
    except ValueError as exc:  # sympy: a velocity it cannot find
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"`method`: sympy cannot form the bodies' velocities: {exc}") from exc
    for i in range(n):
        for j in range(i):
            M[i, j] = M[j, i]
    # functions of t other than the coordinates are specified inputs (sympy's
    # dynamicsymbols in loads, PyDy's specifieds): they stay as they are and are given
    # values by from_mechanics(..., specified=); the speeds were all substituted
    speeds = set(kin.u) | set(getattr(method, "_uaux", []))
    left = sorted(set(_unknown_functions(M, kin.q) + _unknown_functions(F, kin.q))
                  & {str(x) for x in speeds})
    if left:  # (not expected: every speed is replaced by W q' + w0)
        raise ModelError(f"`method`: the generalized speeds {left} could not be written in the "
                         "coordinate derivatives.")
    cons = {}
    for label, given in (("holonomic", holonomic), ("nonholonomic", nonholonomic),
                         ("acceleration", acceleration)):
        cons[label] = [me.msubs(_sympify(e, f"{label}[{i}]"), sub)
                       for i, e in enumerate(_as_list(given, label))]
    hol = list(getattr(method, "_f_h", sp.Matrix()))
    nh = _kane_velocity_constraints(method, kin)
    if energy is not None:
        energy = me.msubs(_sympify(energy, "energy"), sub)
        _check_energy(energy, kin.q, [M, F] + hol + nh + sum(cons.values(), []),
                      f"neither coordinates {[str(x) for x in kin.q]} nor generalized speeds "
                      f"{[str(x) for x in kin.u]} of the KanesMethod")
    # not simplified: cse and the generated code take the expressions as they are
    return SymbolicModel.from_equations(
        kin.q, M, F, hol + cons["holonomic"], nh + cons["nonholonomic"], cons["acceleration"],
        energy=energy, coordinates=coordinates, name=name, modules=modules, simplify=False)


def kane_velocities(method: Any, q: Any, u: Any, params: Optional[Mapping] = None,
                    t: float = 0.0) -> np.ndarray:
    """The coordinate derivatives ``q'`` of a KanesMethod's state ``(q, u)``.

    For initial conditions of the System :func:`from_mechanics` builds from a
    ``KanesMethod``, whose state is ``(q, q')``: solves the kinematic
    differential equations ``u = W(q, t) q' + w0(q, t)`` together with the
    method's velocity constraints.

    Parameters
    ----------
    method : KanesMethod, or a JointsMethod or System that forms its equations with one
    q : array_like, shape (n,) or (n + k,)
        The coordinates, in the order of ``method.q``, optionally followed by the
        ``k`` angles added for speeds without coordinates (the System's
        coordinates; nothing depends on them).
    u : array_like, shape (o,) or (o - m,)
        All generalized speeds (``method.u``: independent, then dependent), or
        only the ``o - m`` independent ones (the dependent speeds then follow
        from the ``m`` velocity constraints).
    params : dict, optional
        ``{Symbol or name: value}`` for the symbols of the kinematics and
        constraints.
    t : float, default 0.0

    Returns
    -------
    ndarray, shape (n + k,)
        ``q'`` of the System's coordinates (with the added angles' rates).

    Notes
    -----
    The kinematics, the velocity constraints in ``q'`` and their numeric function
    are made once per method and kept with it (a weak reference): later calls
    only evaluate them.

    Raises
    ------
    ModelError
        Wrong lengths, unbound symbols; speeds that violate the velocity
        constraints; a configuration where the equations do not determine
        ``q'`` (``W`` singular: a singular chart of the coordinates, such as
        Euler angles at gimbal lock, e.g. the rolling disc lying flat,
        ``q2 = +-pi/2``).
    """
    from sympy.physics.mechanics import KanesMethod
    method = _equations_method(method)
    if not isinstance(method, KanesMethod):
        raise ModelError(f"`method` must be a KanesMethod (or a JointsMethod or System that "
                         f"forms its equations with one), found {type(method).__name__}.")
    kin = _kane_kinematics(method)
    ev = _kane_cached(method, "velocities", lambda: _KaneVelocities(method, kin))
    n, o, m = len(kin.q), len(kin.u), ev.m
    n0 = n - len(kin.added)
    qv = np.asarray(q, dtype=float).ravel()
    uv = np.asarray(u, dtype=float).ravel()
    if qv.shape not in ((n,), (n0,)):
        also = (f" (or the {n} of the System: with the added angles "
                f"{[str(x) for x in kin.added]})" if kin.added else "")
        raise ModelError(f"`q` must have the {n0} coordinates {[str(x) for x in kin.q[:n0]]}"
                         f"{also}, found shape {np.shape(q)}.")
    if qv.size == n0 and n0 < n:  # (nothing depends on the added angles)
        qv = np.concatenate([qv, np.zeros(n - n0)])
    if uv.size not in (o, o - m):
        raise ModelError(f"`u` must have all {o} generalized speeds {[str(x) for x in kin.u]} "
                         f"or the {o - m} independent ones, found shape {np.shape(u)}.")
    Wn, w0n, Bn, cn = ev(qv, float(t), params)
    k = uv.size
    A = np.vstack([Wn[:k], Bn])
    b = np.concatenate([uv - w0n[:k], -cn])
    if not (np.isfinite(A).all() and np.isfinite(b).all()):
        raise ModelError(f"the kinematics of `method` are not finite at q = {qv.tolist()}.")
    s = np.linalg.svd(A, compute_uv=False)
    # q' would carry a relative error cond(A) * eps >= 1e-4: the equations do not determine it
    if s.size < n or s[n - 1] <= 1e-12 * s[0]:
        raise ModelError(
            f"`q`: at q = {qv.tolist()} the kinematic differential equations and velocity "
            "constraints of `method` do not determine q' (singular values "
            f"{np.array2string(s, precision=3)}): the coordinates are singular there (e.g. "
            "Euler angles at gimbal lock, the rolling disc lying flat).")
    v, *_ = np.linalg.lstsq(A, b, rcond=None)
    res = A @ v - b
    scale = np.abs(A) @ np.abs(v) + np.abs(b)
    # consistent equations leave a residual of a few roundings of their terms
    if np.any(np.abs(res) > 1e-8 * (scale + 1e-300)) and uv.size == o:
        raise ModelError(f"`u` violates the velocity constraints of `method` by "
                         f"{np.abs(res[o:]).max():.3g}; give the {o - m} independent speeds only, "
                         "or consistent dependent ones.")
    return v


# symbolic work on a KanesMethod (its kinematics, velocity constraints and their numeric
# functions), done once per method: kane_velocities is then a few function calls
_KANE_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _kane_cached(method: Any, key: str, make: Callable) -> Any:
    try:
        store = _KANE_CACHE.setdefault(method, {})
    except TypeError:  # (not weakly referenceable: no cache)
        return make()
    if key not in store:
        store[key] = make()
    return store[key]


class _KaneVelocities:
    """``W, w0, B, c`` of ``u = W q' + w0`` and the velocity constraints ``B q' + c = 0``
    of a KanesMethod as one numeric function of ``(q, t, parameters)``."""

    def __init__(self, method: Any, kin: _KaneKinematics) -> None:
        from sympy.physics.mechanics import dynamicsymbols
        cons = _kane_velocity_constraints(method, kin)
        self.m = len(cons) - len(kin.constraints)
        n = len(kin.q)
        f = sp.Matrix(cons) if cons else sp.zeros(0, 1)
        B = f.jacobian(kin.qd) if cons else sp.zeros(0, n)
        c = f.xreplace(dict.fromkeys(kin.qd, 0))
        ts = dynamicsymbols._t
        qs = sp.symbols(f"_kq0:{n}")
        pieces = [e.xreplace(dict(zip(kin.q, qs))) for e in (kin.W, kin.w0, B, c)]
        self.shapes = [e.shape for e in pieces]
        syms = set().union(*(e.free_symbols for e in pieces)) - set(qs) - {ts}
        self.params = sorted(syms, key=lambda x: x.name)
        self._fn = sp.lambdify((list(qs), ts, self.params), pieces, modules="numpy", cse=True)

    def __call__(self, q: np.ndarray, t: float, params: Optional[Mapping]):
        params = {} if params is None else params
        by_name = {(k if isinstance(k, str) else getattr(k, "name", str(k))): v
                   for k, v in params.items()}
        missing = sorted(s.name for s in self.params if s.name not in by_name)
        if missing:
            raise ModelError(f"unbound symbols in the kinematics of `method`: "
                             f"{', '.join(missing)}; give their values in `params`.")
        p = [np.float64(by_name[s.name]) for s in self.params]
        with np.errstate(all="ignore"):
            try:
                out = self._fn([np.float64(x) for x in q], np.float64(t), p)
            except (ZeroDivisionError, OverflowError, ValueError):
                out = [np.full(shape, np.nan) for shape in self.shapes]
        W, w0, B, c = (np.asarray(e, dtype=float).reshape(shape) if shape[0] * shape[1]
                       else np.zeros(shape) for e, shape in zip(out, self.shapes))
        return W, w0.ravel(), B, c.ravel()
