"""Paper 002: an elliptical disk rolling without slip on a horizontal line.

A uniform elliptical disk (semi-axes ``a`` along the body axis ``e1``, ``b``
along ``e2``, mass ``m``, centroidal inertia ``J = m (a^2 + b^2) / 4``) in
the vertical plane, coordinates ``q = (xc, yc, theta)``: the centroid and the
angle of ``e1`` from the horizontal. One degree of freedom.

Geometry
--------
The contact point is the body's lowest point. In the body frame it is
``(-a^2 sin th, -b^2 cos th) / rho`` with

    rho(th) = sqrt(a^2 sin^2 th + b^2 cos^2 th),

the height of the centroid above the lowest point (the support function of
the ellipse in the downward direction; paper 002 eq. (3) has stray squares on
``sin`` and ``cos``). In the world frame the contact point sits at
``r = (-rho'(th), -rho(th))`` from the centroid.

Constraints
-----------
*Contact* (holonomic, paper eq. (29)): ``Phi = yc - rho(th) = 0``, Jacobian
``[0, 1, -rho']``, ``gamma = rho'' th'^2``.

*Rolling* (no slip): the velocity of the material point at the contact is
``v_c + th' e_z x r = (xc' + rho th', yc' - rho' th')``. Its vertical part
vanishes by the contact constraint; its horizontal part gives

    f = xc' + rho(th) th' = 0,    f_v = [1, 0, rho],   gamma = -rho' th'^2.

This is *exact* for the ellipse: the vertical offset of the contact point is
exactly ``-rho`` (the lowest point lies ``rho`` below the centroid), so
``xc' - (y_contact - yc) th'`` is ``xc' + rho th'``; the horizontal offset
``-rho'`` only enters the vertical velocity. Paper 002's eqs. (7)-(8) write
``e_z`` with the wrong sign (``omega = (0, 0, -th')``), which gives
``xc' - rho th' = 0`` -- contradicted by the paper's own initial conditions
(``xc' = -0.5 a``, ``th' = 0.5`` at ``rho = a``). The constraint is integrable
(the paper notes it): ``xc + S(th) = const`` with ``S(th) = int_0^th rho``, an
incomplete elliptic integral of the second kind. ``rolling="velocity"``
(default, the paper's treatment) uses the velocity form,
``rolling="holonomic"`` the integrated one (then a projection also removes
drift of ``xc``).

Reduced (one-coordinate) dynamics
---------------------------------
With ``xc' = -rho th'`` and ``yc' = rho' th'``,
``T = 1/2 m_eff(th) th'^2``, ``m_eff = m (rho^2 + rho'^2) + J``,
``V = m g (rho - b)`` (the paper's zero: centroid at height ``b``), and the
applied loads ``(fx, fy, tau)`` (added to gravity) project onto the single
degree of freedom as ``Q* = -rho fx + rho' fy + tau``. The reference solution
integrates ``m_eff th'' + 1/2 m_eff' th'^2 + m g rho' = Q*`` (and
``xc' = -rho th'``) with ``solve_ivp`` at ``rtol = atol = 1e-13``, using its
own closed form of ``m_eff'`` (in ``sin 2th``, ``sin 4th``, not ``rho''``).

Cases (paper section 8, t in [0, 20] s, g = 9.8, m = 1)
-------------------------------------------------------
=========  =========  =======================================  =====================
case       a, b       (th0, th0')                              loads (besides m g)
=========  =========  =======================================  =====================
circle     1, 1       (pi/2, 0.5)                              --         (8.1)
case1      1.5, 1     (pi/2, 0.5): long axis vertical          --         (8.2)
case2      1.5, 1     as case1; the paper runs it without      --         (8.3)
                      Baumgarte (alpha = beta = gamma = 0)
case3      1.5, 1     (0, 2.3): short axis vertical, rocking   --         (8.4)
case4      1.5, 1     (0, 2.3)                                 fx = 3     (8.5)
case5      1.5, 1     (0, 0), from rest                        tau = 5    (8.5)
=========  =========  =======================================  =====================

The initial state is ``xc = 0``, ``yc = rho(th0)``, ``v = (-rho th0',
rho' th0', th0')``; at ``th0 = 0`` or ``pi/2`` (``rho' = 0``) this is the
paper's ``(-th0' a or b, 0, th0')``, consistent with both constraints.

Facts (checked in ``tests/test_ellipse_rolling.py``)
---------------------------------------------------
* case3 starts with ``E0 = 4.794 J``, 2.16 % below the ``m g (a - b) = 4.9 J``
  needed to roll over onto the long axis; it rocks with amplitude 1.4093 rad.
  1.2 % more initial speed and it rolls over: small energy errors change the
  motion qualitatively.
* In case4 and case5 the bilateral contact's normal force turns negative at
  t = 3.0700 s and 2.7837 s (:func:`liftoff_time`): from then on the paper's
  model pulls the disk down. With ``unilateral=True`` (``solver="qp"``) it
  lifts off there instead.
* Paper 002 reports energy spikes at ``theta = k pi``, attributed to a
  ``cos(k pi)`` denominator. This model has no such denominator, yet its
  Baumgarte/ode45 run shows the spikes too, within 0.35 rad before
  ``theta = k pi``: the fastest passages (short axis vertical, centroid
  lowest) -- integration error where the motion is fastest, not a singularity.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional, Union

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import ellipeinc

import gaussopt as go
from gaussopt.model.system import rebuildable
from gaussopt.study.problem import ga_settings
from gaussopt.core.exceptions import ModelError

__all__ = ["CASES", "build", "system", "rho", "rho_d1", "rho_d2", "arc_integral",
           "reference_solution", "contact_reference", "contact_forces", "normal_force", "liftoff_time", "PAPER_INTEGRATORS"]

G = 9.8

#: The paper's cases (section 8). ``paper_baumgarte`` are its (alpha, beta, gamma).
CASES: dict[str, dict[str, Any]] = {
    "circle": dict(a=1.0, b=1.0, theta0=np.pi / 2, omega0=0.5, fx=0.0, fy=0.0, tau=0.0,
                   paper_baumgarte=(10.0, 10.0, 10.0), section="8.1"),
    "case1": dict(a=1.5, b=1.0, theta0=np.pi / 2, omega0=0.5, fx=0.0, fy=0.0, tau=0.0,
                  paper_baumgarte=(10.0, 10.0, 10.0), section="8.2"),
    "case2": dict(a=1.5, b=1.0, theta0=np.pi / 2, omega0=0.5, fx=0.0, fy=0.0, tau=0.0,
                  paper_baumgarte=(0.0, 0.0, 0.0), section="8.3"),
    "case3": dict(a=1.5, b=1.0, theta0=0.0, omega0=2.3, fx=0.0, fy=0.0, tau=0.0,
                  paper_baumgarte=(10.0, 10.0, 10.0), section="8.4"),
    "case4": dict(a=1.5, b=1.0, theta0=0.0, omega0=2.3, fx=3.0, fy=0.0, tau=0.0,
                  paper_baumgarte=(10.0, 10.0, 10.0), section="8.5 (force)"),
    "case5": dict(a=1.5, b=1.0, theta0=0.0, omega0=0.0, fx=0.0, fy=0.0, tau=5.0,
                  paper_baumgarte=(10.0, 10.0, 10.0), section="8.5 (torque)"),
}

#: The paper's integrator (section 7): MATLAB ``ode45``, Dormand-Prince 5(4), output
#: every ``dt`` (``t = 0:0.01:20``, tables 1-6; the step itself is adaptive). The
#: paper does not give its tolerances. MATLAB's defaults (``"ode45-default"``)
#: give errors about 1000x larger than the paper reports; ``RelTol = 1e-6``,
#: ``AbsTol = 1e-9`` (``"ode45"``) reproduces its levels (energy ~1e-6,
#: contact ~1e-7, rolling ~1e-6 for case1). ``"rk4"``: classical RK4 at the
#: fixed step ``dt``.
PAPER_INTEGRATORS: dict[str, dict[str, Any]] = {
    "ode45": {"method": "RK45", "rtol": 1e-6, "atol": 1e-9},
    "ode45-default": {"method": "RK45", "rtol": 1e-3, "atol": 1e-6},
    "rk4": {"method": "rk4"},
}

#: Baumgarte gains (kd [1/s], kp [1/s^2]) of the unilateral contact row.
_UNILATERAL_GAINS = (20.0, 100.0)

_OVERRIDABLE = ("a", "b", "m", "g", "J", "theta0", "omega0", "xc0", "fx", "fy", "tau", "t_end")


# --------------------------------------------------------------------------- geometry
def rho(th, a: float, b: float):
    """Height of the centroid above the lowest point, ``sqrt(a^2 sin^2 th + b^2 cos^2 th)``.

    Complex-safe (numpy ufuncs only), so gaussopt's automatic derivatives apply.
    """
    s, c = np.sin(th), np.cos(th)
    return np.sqrt(a * a * s * s + b * b * c * c)


def rho_d1(th, a: float, b: float):
    """``rho'(th) = (a^2 - b^2) sin th cos th / rho``; minus the horizontal offset of
    the contact point from the centroid."""
    return (a * a - b * b) * np.sin(th) * np.cos(th) / rho(th, a, b)


def rho_d2(th, a: float, b: float):
    """``rho''(th) = ((a^2 - b^2) cos 2th - rho'^2) / rho`` (from ``(rho^2)'' = 2 (a^2 - b^2) cos 2th``).

    ``rho + rho''`` is the radius of curvature of the ellipse at the contact point.
    """
    r = rho(th, a, b)
    r1 = rho_d1(th, a, b)
    return ((a * a - b * b) * np.cos(2 * th) - r1 * r1) / r


def arc_integral(th, a: float, b: float):
    """``S(th) = int_0^th rho(phi) dphi`` (incomplete elliptic integral of the second kind).

    Rolling without slip is ``xc + S(th) = const``. For ``a >= b``,
    ``rho = a sqrt(1 - e cos^2)`` with ``e = 1 - b^2/a^2`` and
    ``S = a (E(pi/2 | e) - E(pi/2 - th | e))``; for ``b > a``,
    ``rho = b sqrt(1 - e sin^2)``, ``e = 1 - a^2/b^2``, ``S = b E(th | e)``.
    """
    th = np.asarray(th, dtype=float)
    if a >= b:
        e = 1.0 - (b / a) ** 2
        return a * (ellipeinc(np.pi / 2, e) - ellipeinc(np.pi / 2 - th, e))
    e = 1.0 - (a / b) ** 2
    return b * ellipeinc(th, e)


# --------------------------------------------------------------------------- system
_MODEL = None


def model():
    """The rolling disk derived once from its Lagrangian (sympy), parameters symbolic.

    ``T = m/2 (xc'^2 + yc'^2) + J/2 th'^2``, ``V = m g yc``, generalized forces
    ``(fx, fy, tau)``, holonomic contact ``yc - rho(th) = 0`` and nonholonomic
    rolling ``xc' + rho(th) th' = 0`` with ``rho = sqrt(a^2 sin^2 th + b^2 cos^2 th)``.
    """
    global _MODEL
    if _MODEL is None:
        import sympy as sp
        from sympy.physics.mechanics import dynamicsymbols

        from gaussopt.symbolic import SymbolicModel

        xc, yc, th = q = dynamicsymbols("xc yc theta")
        t = dynamicsymbols._t
        a, b, m, g, J = sp.symbols("a b m g J", positive=True)
        fx, fy, tau = sp.symbols("fx fy tau", real=True)
        r = sp.sqrt(a**2 * sp.sin(th) ** 2 + b**2 * sp.cos(th) ** 2)
        T = m / 2 * (xc.diff(t) ** 2 + yc.diff(t) ** 2) + J / 2 * th.diff(t) ** 2
        _MODEL = SymbolicModel(q, T, m * g * yc, forces=[fx, fy, tau], holonomic=[yc - r],
                               nonholonomic=[xc.diff(t) + r * th.diff(t)],
                               name="ellipse_rolling")
    return _MODEL


@rebuildable        # its System pickles as this call
def system(a: float = 1.5, b: float = 1.0, m: float = 1.0, g: float = G,
           J: Optional[float] = None, fx: float = 0.0, fy: float = 0.0, tau: float = 0.0,
           rolling: str = "velocity", unilateral: bool = False, xc0: float = 0.0,
           theta0: float = 0.0, auto: bool = False, derivation: str = "symbolic",
           contact: bool = False, friction: float = float("inf"),
           restitution: float = 0.0) -> go.System:
    """The rolling elliptical disk as a :class:`gaussopt.System`, ``q = (xc, yc, theta)``.

    Parameters
    ----------
    a, b : float
        Semi-axes along the body axes ``e1`` (angle ``theta`` from the horizontal)
        and ``e2``; both positive.
    m : float
        Mass, positive.
    g : float
        Gravity, ``>= 0``.
    J : float, optional
        Centroidal moment of inertia; default ``m (a^2 + b^2) / 4`` (uniform disk).
    fx, fy, tau : float
        Constant applied loads besides gravity: a force ``(fx, fy)`` at the
        centroid and a torque ``tau``. The generalized force is
        ``Q = (fx, fy - m g, tau)`` (paper 002's ``Q = (3, -m g, 0)`` is
        ``fx = 3``).
    rolling : {"velocity", "holonomic"}
        ``"velocity"``: the no-slip condition as the nonholonomic row
        ``xc' + rho(th) th' = 0`` (paper 002, sign corrected). ``"holonomic"``:
        its integral ``xc + S(th) - (xc0 + S(theta0)) = 0`` (same acceleration
        rows; the position residual then also measures ``xc`` drift).
    unilateral : bool
        Treat the normal contact as unilateral (``solver="qp"`` only): the
        contact row becomes the inequality ``Phi'' + kd Phi' + kp Phi >= 0``
        (``Phi = yc - rho`` the gap; ``kd, kp = 20, 100`` s^-1, s^-2, a
        critically damped Baumgarte term that keeps the gap from drifting
        while in contact and pushes back only if it closes). While the contact
        pushes (normal force > 0) the motion is the bilateral one; when the
        bilateral normal force would turn negative the disk lifts off. The
        rolling row stays bilateral -- in flight it still ties ``xc'`` to
        ``theta'``, which is not physical (there is no friction without
        contact): the variant is meant for the lift-off instant and the start
        of the flight, not for the motion after it.
    xc0, theta0 : float
        Reference point of the holonomic rolling form (``rolling="holonomic"``).
    contact : bool
        The physical contact (:class:`gaussopt.Contact`): the gap ``yc - rho(th) >= 0``
        with the slip ``xc + S(th)`` (its rate ``xc' + rho th'`` is the slip velocity of
        the contact point), ``friction`` and ``restitution``: the disk lifts off, flies,
        lands with an impact and rolls (or slides) again; any solver.
    auto : bool
        Omit the hand-written Jacobians and ``gamma`` and let gaussopt derive
        them by the complex step (for testing the hand-written ones).
    derivation : {"symbolic", "hand"}
        ``"symbolic"`` (default for the bilateral, velocity-form model): M, F,
        the constraint Jacobians and ``gamma`` are derived from the Lagrangian
        ``T = m/2 (xc'^2 + yc'^2) + J/2 th'^2``, ``V = m g yc`` by
        :mod:`gaussopt.symbolic` (:func:`model`). ``"hand"``: the hand-written
        rows below (kept as a cross-check; the other variants use them).

    Returns
    -------
    System
        With the energy ``T + m g (yc - b) - fx xc - fy yc - tau theta``: the
        constant loads have a potential, so it is conserved by the exact motion.

    Raises
    ------
    ModelError
        Non-positive ``a``, ``b``, ``m`` or ``J``, negative ``g``, unknown ``rolling``.
    """
    _check_params(a=a, b=b, m=m, g=g, J=J)
    if rolling not in ("velocity", "holonomic"):
        raise ModelError(f"`rolling` must be 'velocity' or 'holonomic', found {rolling!r}.")
    if contact and unilateral:
        raise ModelError("`contact=True` (the event-driven contact) and `unilateral=True` (the "
                         "QP inequality row) are two models of the same contact; pick one.")
    if unilateral and rolling != "velocity":
        raise ModelError("`unilateral=True` needs `rolling='velocity'` (the integrated rolling "
                         f"form assumes permanent contact), found rolling={rolling!r}.")
    if derivation not in ("symbolic", "hand"):
        raise ModelError(f"`derivation` must be 'symbolic' or 'hand', found {derivation!r}.")
    a, b, m, g = float(a), float(b), float(m), float(g)
    J = m * (a * a + b * b) / 4.0 if J is None else float(J)
    fx, fy, tau = float(fx), float(fy), float(tau)
    if derivation == "symbolic" and rolling == "velocity" and not unilateral and not auto \
            and not contact:
        sym = model().system({"a": a, "b": b, "m": m, "g": g, "J": J, "fx": fx, "fy": fy,
                              "tau": tau})
        for c, label in zip(sym.constraints, ("contact", "rolling")):
            c.name = label

        def energy_sym(t, q, v):
            T = 0.5 * m * (v[0] * v[0] + v[1] * v[1]) + 0.5 * J * v[2] * v[2]
            return T + m * g * (q[1] - b) - fx * q[0] - fy * q[1] - tau * q[2]

        return go.System(sym.coordinates, mass=sym.constant_mass, force=sym.constant_force
                         if sym.constant_force is not None else sym._force,
                         constraints=sym.constraints, energy=energy_sym, name="ellipse_rolling")
    M = np.diag([m, m, J])
    Q = np.array([fx, fy - m * g, tau])

    def contact_phi(t, q):
        return np.array([q[1] - rho(q[2], a, b)])

    def contact_jac(t, q):
        return np.array([[0.0, 1.0, -rho_d1(q[2], a, b)]])

    def contact_gamma(t, q, v):
        return np.array([rho_d2(q[2], a, b) * v[2] * v[2]])

    def roll_f(t, q, v):
        return np.array([v[0] + rho(q[2], a, b) * v[2]])

    def roll_jac(t, q, v=None):
        return np.array([[1.0, 0.0, rho(q[2], a, b)]])

    def roll_gamma(t, q, v):
        return np.array([-rho_d1(q[2], a, b) * v[2] * v[2]])

    s0 = float(xc0 + arc_integral(theta0, a, b))

    def roll_phi(t, q):
        return np.array([q[0] + arc_integral(q[2], a, b) - s0])

    def slip(t, q):
        return np.array([q[0] + arc_integral(q[2], a, b)])

    cons: list[go.Constraint]
    if contact:
        cons = [go.Contact(contact_phi, contact_jac, contact_gamma, slip=slip,
                           slip_jacobian=lambda t, q: roll_jac(t, q), slip_gamma=roll_gamma,
                           friction=friction, restitution=restitution, rheonomic=False,
                           name="ground")]
    elif unilateral:
        kd, kp = _UNILATERAL_GAINS

        def contact_G(t, q, v):
            return contact_jac(t, q)

        def contact_h(t, q, v):
            gap = q[1] - rho(q[2], a, b)
            rate = v[1] - rho_d1(q[2], a, b) * v[2]
            return contact_gamma(t, q, v) - kd * rate - kp * gap

        cons = [go.Inequality(contact_G, contact_h, name="contact"),
                go.Nonholonomic(roll_f, roll_jac, roll_gamma, name="rolling")]
    elif auto:
        cons = [go.Holonomic(contact_phi, rheonomic=False, name="contact")]
        cons.append(go.Nonholonomic(roll_f, name="rolling") if rolling == "velocity"
                    else go.Holonomic(roll_phi, jacobian=lambda t, q: roll_jac(t, q),
                                      gamma=roll_gamma, rheonomic=False, name="rolling"))
    else:
        cons = [go.Holonomic(contact_phi, contact_jac, contact_gamma, rheonomic=False,
                             name="contact")]
        cons.append(go.Nonholonomic(roll_f, roll_jac, roll_gamma, name="rolling")
                    if rolling == "velocity"
                    else go.Holonomic(roll_phi, lambda t, q: roll_jac(t, q), roll_gamma,
                                      rheonomic=False, name="rolling"))

    def energy(t, q, v):
        T = 0.5 * m * (v[0] * v[0] + v[1] * v[1]) + 0.5 * J * v[2] * v[2]
        return T + m * g * (q[1] - b) - fx * q[0] - fy * q[1] - tau * q[2]

    return go.System(("xc", "yc", "theta"), mass=M, force=Q, constraints=cons, energy=energy,
                     name="ellipse_rolling")


def _check_params(**kw) -> None:
    for k, val in kw.items():
        if val is None:
            continue
        try:
            x = float(val)
        except (TypeError, ValueError):
            raise ModelError(f"`{k}` must be a real number, found {val!r}.") from None
        if not np.isfinite(x):
            raise ModelError(f"`{k}` must be finite, found {val!r}.")
        if k == "g":
            if x < 0:
                raise ModelError(f"`g` must be >= 0, found {val!r}.")
        elif k in ("a", "b", "m", "J") and x <= 0:
            raise ModelError(f"`{k}` must be positive, found {val!r}.")


# --------------------------------------------------------------------------- reference
def _reduced_rhs(a, b, m, g, J, fx, fy, tau):
    """Right-hand side of the reduced equation in ``(th, th', xc)``.

    Written from ``T = 1/2 m_eff th'^2`` with ``m_eff = m (rho^2 + u / rho^2) + J``,
    ``rho^2 = b^2 + d sin^2 th``, ``u = (d/2)^2 sin^2 2th`` (``= (rho rho')^2``),
    ``d = a^2 - b^2``; ``m_eff'`` is differentiated in that form, independently
    of :func:`rho_d2`.
    """
    d = a * a - b * b

    def f(_, y):
        th, w = y[0], y[1]
        s2, s4 = np.sin(2 * th), np.sin(4 * th)
        r2 = b * b + d * np.sin(th) ** 2
        r = np.sqrt(r2)
        u = 0.25 * d * d * s2 * s2
        meff = m * (r2 + u / r2) + J
        dmeff = m * (d * s2 + (0.5 * d * d * s4 * r2 - u * d * s2) / (r2 * r2))
        r1 = 0.5 * d * s2 / r                              # rho'
        qstar = -r * fx + r1 * (fy - m * g) + tau         # D^T Q, D = (-rho, rho', 1)
        return [w, (qstar - 0.5 * dmeff * w * w) / meff, -r * w]

    return f


@lru_cache(maxsize=64)
def _reference_cached(a, b, m, g, J, fx, fy, tau, theta0, omega0, xc0, t_end):
    f = _reduced_rhs(a, b, m, g, J, fx, fy, tau)
    sol = solve_ivp(f, (0.0, t_end), [theta0, omega0, xc0], method="DOP853", rtol=1e-13,
                    atol=1e-13, dense_output=True)
    if not sol.success:  # pragma: no cover - scipy failure
        raise RuntimeError(f"reference integration failed: {sol.message}")
    return sol


def reference_solution(t, *, a: float, b: float, m: float = 1.0, g: float = G,
                       J: Optional[float] = None, fx: float = 0.0, fy: float = 0.0,
                       tau: float = 0.0, theta0: float = 0.0, omega0: float = 0.0,
                       xc0: float = 0.0) -> dict:
    """The reduced one-degree-of-freedom solution at the times ``t``.

    Parameters
    ----------
    t : array_like, shape (N,)
        Times ``>= 0`` (the motion starts at ``t = 0``).
    a, b, m, g, J, fx, fy, tau, theta0, omega0, xc0
        As in :func:`system` and :func:`build`.

    Returns
    -------
    dict
        ``theta``, ``omega`` (= theta'), ``xc``, ``yc``, ``vx``, ``vy``,
        ``alpha`` (= theta''), ``normal_force``, ``friction_force``, ``energy``;
        arrays of shape (N,). The dense solution is cached per parameter set.
    """
    J = m * (a * a + b * b) / 4.0 if J is None else J
    t = np.atleast_1d(np.asarray(t, dtype=float))
    if t.size and (t.min() < 0 or not np.all(np.isfinite(t))):
        raise ModelError(f"`t` must be finite and >= 0, found min {t.min()!r}.")
    t_end = float(max(t.max(initial=0.0), 1e-12))
    # round the horizon up so that nearby requests share one cached solution
    t_end = float(np.ceil(t_end * 4.0) / 4.0)
    key = tuple(float(x) for x in (a, b, m, g, J, fx, fy, tau, theta0, omega0, xc0)) + (t_end,)
    sol = _reference_cached(*key)
    th, w, xc = sol.sol(t)
    f = _reduced_rhs(*key[:8])
    alpha = np.asarray(f(None, [th, w, xc])[1])
    r, r1, r2 = rho(th, a, b), rho_d1(th, a, b), rho_d2(th, a, b)
    ydd = r2 * w * w + r1 * alpha
    xdd = -(r * alpha + r1 * w * w)
    out = {"theta": th, "omega": w, "xc": xc, "yc": r, "vx": -r * w, "vy": r1 * w,
           "alpha": alpha, "normal_force": m * ydd - (fy - m * g),
           "friction_force": m * xdd - fx}
    out["energy"] = (0.5 * (m * (r * r + r1 * r1) + J) * w * w + m * g * (r - b)
                     - fx * xc - fy * r - tau * th)
    return out


def contact_reference(t, *, a: float, b: float, m: float = 1.0, g: float = G,
                      J: Optional[float] = None, fx: float = 0.0, fy: float = 0.0,
                      tau: float = 0.0, theta0: float = 0.0, omega0: float = 0.0,
                      xc0: float = 0.0, mu: float = 0.5, with_events: bool = False):
    """The motion with a physical contact (Coulomb friction ``mu``, plastic landings).

    Written independently of :mod:`gaussopt.integrate.contact_run`, phase by phase, with the
    contact point's slip rate ``u = xc' + rho th'`` and the friction force ``T`` along
    ``x`` (``T = -mu N sign(u)`` while sliding):

    * rolling: the reduced equation (:func:`_reduced_rhs`), with ``N`` and
      ``T = m xc'' - fx`` from it, until ``N = 0`` (lift-off) or ``|T| = mu N``
      (it slides against ``T``);
    * sliding with ``s = sign(u)``: ``yc = rho(th)`` and
      ``(J + m rho' k) th'' = tau - k (m rho'' th'^2 - fy + m g)``, ``k = rho' + mu s rho``,
      ``N = m (rho' th'' + rho'' th'^2) - fy + m g``, ``m xc'' = fx - mu s N``, until
      ``N = 0`` or ``u = 0`` (then it rolls if ``|T| <= mu N``, else slides the other way);
    * flight: closed form (constant loads) until the gap ``yc - rho(th)`` closes;
    * landing (no rebound): the sticking impulse (angular momentum about the contact
      point conserved) if ``|P_t| <= mu P_n``, else the sliding one
      (``P_t = -mu s P_n``, ``s = -sign`` of the sticking ``P_t``).

    Rolling and sliding are integrated by DOP853 at ``rtol = atol = 1e-13`` with their
    switching conditions as events; flights are located by Brent's method on the closed
    form.

    Returns
    -------
    dict
        ``theta``, ``omega``, ``xc``, ``yc`` at the times ``t`` (at an event time the
        state before it); with ``with_events`` also ``events``: ``(time, what)``.
    """
    from scipy.optimize import brentq

    J = m * (a * a + b * b) / 4.0 if J is None else J
    t = np.atleast_1d(np.asarray(t, dtype=float))
    t_end = float(t.max())
    out = {k: np.full(t.shape, np.nan) for k in ("theta", "omega", "xc", "yc")}
    events: list = []
    roll = _reduced_rhs(a, b, m, g, J, fx, fy, tau)
    eps = np.finfo(float).eps

    def roll_forces(th, w):
        al = roll([None], [th, w, 0.0])[1]
        r, r1, r2 = rho(th, a, b), rho_d1(th, a, b), rho_d2(th, a, b)
        N = m * (r2 * w * w + r1 * al) - (fy - m * g)
        T = -m * (r * al + r1 * w * w) - fx
        return N, T

    def slide_rhs(s):
        def f(_, y):                                   # y = (th, w, xc, vx)
            th, w = y[0], y[1]
            r, r1, r2 = rho(th, a, b), rho_d1(th, a, b), rho_d2(th, a, b)
            k = r1 + mu * s * r
            al = (tau - k * (m * r2 * w * w - fy + m * g)) / (J + m * r1 * k)
            N = m * (r1 * al + r2 * w * w) - fy + m * g
            return [w, al, y[3], (fx - mu * s * N) / m]
        return f

    def slide_normal(s, th, w):
        r, r1, r2 = rho(th, a, b), rho_d1(th, a, b), rho_d2(th, a, b)
        k = r1 + mu * s * r
        al = (tau - k * (m * r2 * w * w - fy + m * g)) / (J + m * r1 * k)
        return m * (r1 * al + r2 * w * w) - fy + m * g

    def fill(ts, te, f):
        sel = (t >= ts) & (t <= te)
        if sel.any():
            th, w, xc, yc = f(t[sel])
            out["theta"][sel], out["omega"][sel], out["xc"][sel], out["yc"][sel] = th, w, xc, yc

    # the state: th, w, xc, vx, vy (yc follows from the mode while in contact)
    ts, th, w, xc = 0.0, float(theta0), float(omega0), float(xc0)
    vx = -float(rho(th, a, b)) * w
    mode = "roll"
    while ts < t_end:
        if mode in ("roll",):
            N, T = roll_forces(th, w)
            if N < 0:
                mode = "fly"
            elif mu != np.inf and abs(T) > mu * N * (1 + 1e-12):
                mode, s = "slide", (-1 if T > 0 else 1)
        if mode == "roll":
            lift = lambda _, y: roll_forces(y[0], y[1])[0]             # noqa: E731
            lift.terminal, lift.direction = True, -1
            evs = [lift]
            if mu != np.inf:
                for d in (1, -1):                                      # mu N - d T
                    ev = lambda _, y, d=d: mu * roll_forces(y[0], y[1])[0] - d * roll_forces(y[0], y[1])[1]  # noqa: E731,E501
                    ev.terminal, ev.direction = True, -1
                    evs.append(ev)
            sol = solve_ivp(roll, (ts, t_end), [th, w, xc], method="DOP853", rtol=1e-13,
                            atol=1e-13, dense_output=True, events=evs)
            hit = [i for i, e in enumerate(sol.t_events) if e.size]
            te = min((float(sol.t_events[i][0]) for i in hit), default=t_end)
            fill(ts, te, lambda x: (*sol.sol(x)[:3], rho(sol.sol(x)[0], a, b)))
            if te >= t_end:
                break
            i = min(hit, key=lambda i: sol.t_events[i][0])
            th, w, xc = (float(x) for x in sol.y_events[i][0])
            vx = -float(rho(th, a, b)) * w
            if i == 0:
                events.append((te, "lift-off"))
                mode = "fly"
            else:
                d = 1 if i == 1 else -1                                # T reached d mu N
                events.append((te, "slide " + ("+" if -d > 0 else "-")))
                mode, s = "slide", -d
            ts = te
            continue
        if mode == "slide":
            f = slide_rhs(s)
            lift = lambda _, y: slide_normal(s, y[0], y[1])            # noqa: E731
            lift.terminal, lift.direction = True, -1
            stop = lambda _, y: s * (y[3] + rho(y[0], a, b) * y[1])    # noqa: E731
            stop.terminal, stop.direction = True, -1
            sol = solve_ivp(f, (ts, t_end), [th, w, xc, vx], method="DOP853", rtol=1e-13,
                            atol=1e-13, dense_output=True, events=[lift, stop])
            hit = [i for i, e in enumerate(sol.t_events) if e.size]
            te = min((float(sol.t_events[i][0]) for i in hit), default=t_end)
            fill(ts, te, lambda x: (*sol.sol(x)[:3], rho(sol.sol(x)[0], a, b)))
            if te >= t_end:
                break
            i = min(hit, key=lambda i: sol.t_events[i][0])
            th, w, xc, vx = (float(x) for x in sol.y_events[i][0])
            ts = te
            if i == 0:
                events.append((te, "lift-off"))
                mode = "fly"
            else:
                N, T = roll_forces(th, w)
                if abs(T) <= mu * N:
                    events.append((te, "stick"))
                    mode = "roll"
                else:
                    s = -1 if T > 0 else 1
                    events.append((te, "slide " + ("+" if s > 0 else "-")))
            continue
        # ---- flight, closed form, from the contact state
        r, r1 = float(rho(th, a, b)), float(rho_d1(th, a, b))
        x0, y0, vy = xc, r, r1 * w
        ax, ay, aw = fx / m, fy / m - g, tau / J
        te = ts

        def state(s_, x0=x0, y0=y0, vx=vx, vy=vy, th0=th, w0=w):
            return (x0 + vx * s_ + 0.5 * ax * s_ * s_, y0 + vy * s_ + 0.5 * ay * s_ * s_,
                    th0 + w0 * s_ + 0.5 * aw * s_ * s_)

        def gap(s_):
            x_, y_, th_ = state(s_)
            return y_ - rho(th_, a, b)

        # the gap leaves zero like s^3 (N = 0 at the lift-off): scan past that start
        s_hit, lo = None, 1e-4
        while te + lo < t_end:
            hi = lo + 1e-3
            if gap(lo) > 0 and gap(hi) <= 0:
                s_hit = brentq(gap, lo, hi, xtol=1e-15, rtol=4 * eps)
                break
            lo = hi
        tl = te + s_hit if s_hit is not None else t_end
        w_fly = w
        fill(te, tl, lambda x: (state(x - te)[2], w_fly + aw * (x - te), state(x - te)[0],
                                state(x - te)[1]))
        if s_hit is None:
            break
        events.append((tl, "landing"))
        x_, y_, th_ = state(s_hit)
        vxl, vyl, wl = vx + ax * s_hit, vy + ay * s_hit, w + aw * s_hit
        dx, dy = float(rho_d1(th_, a, b)), float(rho(th_, a, b))
        # sticking impulse: angular momentum about the contact point conserved
        w_st = (J * wl + m * (dx * vyl - dy * vxl)) / (J + m * (dx * dx + dy * dy))
        Pt, Pn = m * (-dy * w_st - vxl), m * (dx * w_st - vyl)
        if abs(Pt) <= mu * Pn:
            w, vx, mode = w_st, -dy * w_st, "roll"
        else:
            s = -1 if Pt > 0 else 1
            k = dx + mu * s * dy
            Pn = -(vyl - dx * wl) / (1 / m + dx * k / J)
            vx, w = vxl - mu * s * Pn / m, wl - k * Pn / J
            mode = "slide"
        ts, th, xc = tl, float(th_), float(x_)
    if with_events:
        out["events"] = events
    return out


def _normal_force_from_state(q, v, a, b, m, g, J, fx, fy, tau):
    """Normal contact force from the reduced dynamics at states on the constraints."""
    q = np.atleast_2d(q)
    v = np.atleast_2d(v)
    th, w = q[:, 2], v[:, 2]
    f = _reduced_rhs(a, b, m, g, J, fx, fy, tau)
    alpha = np.asarray(f(None, [th, w, q[:, 0]])[1])
    return m * (rho_d2(th, a, b) * w * w + rho_d1(th, a, b) * alpha) - (fy - m * g)


def contact_forces(traj: go.Trajectory) -> dict:
    """Normal and friction force on the disk from a simulated trajectory.

    The generalized constraint force is ``lam_c [0, 1, -rho'] + lam_r [1, 0, rho]``,
    which is exactly the generalized force of a contact force ``(Fx, Fy)``
    applied at the contact point ``(-rho', -rho)`` from the centroid; so
    ``Fy = Qc[1]`` (normal force) and ``Fx = Qc[0]`` (friction).

    Parameters
    ----------
    traj : Trajectory
        A run of this problem (``constraint_force`` is recomputed by the solver
        at every output time).

    Returns
    -------
    dict
        ``{"normal": ndarray (N,), "friction": ndarray (N,)}``.
    """
    Qc = np.asarray(traj.constraint_force)
    if Qc.ndim != 2 or Qc.shape[1] != 3:
        raise ModelError(f"`traj.constraint_force` must have shape (N, 3), found {Qc.shape}.")
    return {"normal": Qc[:, 1].copy(), "friction": Qc[:, 0].copy()}


def normal_force(traj: go.Trajectory) -> np.ndarray:
    """Normal contact force on the disk along a trajectory, shape (N,) (see :func:`contact_forces`)."""
    return contact_forces(traj)["normal"]


def liftoff_time(problem: go.Problem, t_max: Optional[float] = None) -> Optional[float]:
    """First time the bilateral contact's normal force (reduced solution) turns negative.

    Located by Brent's method on the reference solution; ``None`` if it stays
    positive on ``[0, t_max]`` (default: the problem's horizon).
    """
    from scipy.optimize import brentq

    p = problem.params
    t_max = float(problem.t_span[1] if t_max is None else t_max)
    kw = {k: p[k] for k in ("a", "b", "m", "g", "J", "fx", "fy", "tau", "theta0", "omega0", "xc0")}
    grid = np.linspace(0.0, t_max, int(np.ceil(t_max / 1e-3)) + 1)
    N = reference_solution(grid, **kw)["normal_force"]
    idx = np.flatnonzero((N[:-1] > 0) & (N[1:] <= 0))
    if idx.size == 0:
        return None
    i = int(idx[0])
    return float(brentq(lambda s: reference_solution([s], **kw)["normal_force"][0],
                        grid[i], grid[i + 1], xtol=1e-14))


# --------------------------------------------------------------------------- build
def build(case: str = "circle", baumgarte: Union[None, str, tuple, go.Baumgarte] = None,
          dt: Optional[float] = None, *, integrator: str = "ode45", rolling: str = "velocity",
          unilateral: bool = False, contact: bool = False, friction: float = 0.5,
          **overrides: Any) -> go.Problem:
    """Paper 002's rolling elliptical disk.

    Parameters
    ----------
    case : {"circle", "case1", "case2", "case3", "case4", "case5"}
        The paper's cases (its sections 8.1-8.5; see the module docstring):
        the shape, start and loads below.
    baumgarte : None, "paper", (alpha, beta, gamma) or Baumgarte
        ``None`` (default): gaussopt's recommended stabilization,
        :class:`gaussopt.Projection` after every accepted step (``rhs=False``:
        the constraint rows never become singular here). ``"paper"``: the case's gains from the
        paper (10, 10, 10; 0, 0, 0 for ``case2``). A triple or a
        :class:`gaussopt.Baumgarte`: those gains (all zero means none).
    dt : float, optional
        ``None`` (default): DOP853 at ``rtol = atol = 1e-11``, output at every
        accepted step. A number [s]: the paper's integrator (``integrator``),
        output every ``dt`` (the paper's ``t = 0:0.01:20``).
        ``build(case, baumgarte="paper", dt=0.01)`` with ``solver="lagrange"``
        is the paper's computation.
    integrator : {"ode45", "ode45-default", "rk4"}
        Used only with ``dt``: MATLAB ``ode45`` emulated by RK45 at
        ``rtol = 1e-6, atol = 1e-9`` (assumed: the paper gives no tolerances;
        these reproduce its error levels), at MATLAB's defaults
        ``rtol = 1e-3, atol = 1e-6``, or fixed-step RK4 at step ``dt``
        (:data:`PAPER_INTEGRATORS`).
    rolling : {"velocity", "holonomic"}
        Form of the no-slip constraint (see :func:`system`).
    unilateral : bool
        Normal contact as an inequality (``solver="qp"`` only; see :func:`system`).
    contact : bool
        The physical, event-driven contact (see :func:`system`): in case4 and case5
        the disk lifts off where the paper's bilateral contact would pull it down,
        flies, lands with a plastic impact and rolls or slides again. ``reference(t)`` is
        then :func:`contact_reference`.
    friction : float, default 0.5
        Coulomb friction coefficient [1] of ``contact=True`` (``inf``: no slip while in
        contact; then a lift-off with a nonzero friction force has no consistent
        continuation and the run ends saying so).
    a, b : float, default: the case's
        Semi-axes along the body axes ``e1``, ``e2`` [m] (1, 1 for "circle", else 1.5, 1).
    m : float, default 1
        Mass of the disk [kg].
    g : float, default 9.8
        Gravitational acceleration [m/s^2].
    J : float, optional
        Centroidal moment of inertia [kg m^2]; default ``m (a^2 + b^2) / 4``
        (a uniform disk).
    theta0 : float, default: the case's
        Initial angle of ``e1`` from the horizontal [rad].
    omega0 : float, default: the case's
        Initial angular velocity [rad/s].
    xc0 : float, default 0
        Initial horizontal position of the centroid [m].
    fx, fy : float, default: the case's
        Constant force at the centroid [N].
    tau : float, default: the case's
        Constant torque on the disk [N m].
    t_end : float, default 20
        End time [s].
    **overrides
        The keywords above from ``a`` on, replacing the case's values.

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``xc``, ``yc``, ``theta``, ``omega`` and
        ``normal_force`` (from the reduced dynamics at the state);
        ``reference(t)`` the same keys from the reduced ODE.

    Raises
    ------
    ModelError
        Unknown case or override, invalid parameter or stabilization.

    Examples
    --------
    >>> from gaussopt_problems import ellipse_rolling as er
    >>> p = er.build("case3", t_end=1.0)
    >>> tr = p.simulate()
    >>> err = abs(tr["theta"][-1] - p.reference(tr.t[-1:])["theta"][0])
    >>> bool(err < 1e-8)
    True
    """
    if case not in CASES:
        raise ModelError(f"`case` must be one of {list(CASES)}, found {case!r}.")
    unknown = sorted(set(overrides) - set(_OVERRIDABLE))
    if unknown:
        raise ModelError(f"unknown parameter(s) {unknown}; `build` accepts {list(_OVERRIDABLE)}.")
    p = {k: v for k, v in CASES[case].items() if k not in ("paper_baumgarte", "section")}
    p.update({"m": 1.0, "g": G, "J": None, "xc0": 0.0, "t_end": 20.0})
    p.update(overrides)
    _check_params(a=p["a"], b=p["b"], m=p["m"], g=p["g"], J=p["J"])
    for k in ("theta0", "omega0", "xc0", "fx", "fy", "tau"):
        p[k] = float(p[k])
        if not np.isfinite(p[k]):
            raise ModelError(f"`{k}` must be finite, found {overrides.get(k)!r}.")
    t_end = float(p["t_end"])
    if not (np.isfinite(t_end) and t_end > 0):
        raise ModelError(f"`t_end` must be positive, found {p['t_end']!r}.")
    a, b, m, g = (float(p[k]) for k in ("a", "b", "m", "g"))
    J = m * (a * a + b * b) / 4.0 if p["J"] is None else float(p["J"])
    p.update(a=a, b=b, m=m, g=g, J=J, t_end=t_end)
    fx, fy, tau = p["fx"], p["fy"], p["tau"]
    th0, w0, xc0 = p["theta0"], p["omega0"], p["xc0"]

    sysm = system(a=a, b=b, m=m, g=g, J=J, fx=fx, fy=fy, tau=tau, rolling=rolling,
                  unilateral=unilateral, xc0=xc0, theta0=th0, contact=contact,
                  friction=friction)
    r0, r10 = float(rho(th0, a, b)), float(rho_d1(th0, a, b))
    q0 = np.array([xc0, r0, th0])
    v0 = np.array([-r0 * w0, r10 * w0, w0])

    # ---- stabilization
    if baumgarte is None:
        # the rows [0, 1, -rho'] and [1, 0, rho] are independent everywhere (rho >= min(a, b)),
        # so projecting after accepted steps suffices; the projected vector field
        # (rhs=True) gives the same accuracy here at 3.4x the cost
        stab: Optional[Union[go.Baumgarte, go.Projection]] = go.Projection(rhs=False)
    else:
        if isinstance(baumgarte, str):
            if baumgarte != "paper":
                raise ModelError(f"`baumgarte` must be None, 'paper', (alpha, beta, gamma) or a "
                                 f"gaussopt.Baumgarte, found {baumgarte!r}.")
            gains = CASES[case]["paper_baumgarte"]
        elif isinstance(baumgarte, go.Baumgarte):
            gains = (baumgarte.alpha, baumgarte.beta,
                     baumgarte.alpha if baumgarte.gamma is None else baumgarte.gamma)
        else:
            try:
                gains = tuple(float(x) for x in baumgarte)
            except (TypeError, ValueError):
                gains = ()
            if len(gains) != 3:
                raise ModelError(f"`baumgarte` must be None, 'paper', (alpha, beta, gamma) or a "
                                 f"gaussopt.Baumgarte, found {baumgarte!r}.")
        stab = None if all(x == 0 for x in gains) else go.Baumgarte(*gains)
    # ---- integrator
    if dt is None:
        settings: dict[str, Any] = {"method": "DOP853", "rtol": 1e-11, "atol": 1e-11,
                                    "stabilization": stab}
    else:
        if not (isinstance(dt, (int, float)) and np.isfinite(dt) and 0 < dt <= t_end):
            raise ModelError(f"`dt` must be a positive output step <= t_end={t_end}, found {dt!r}.")
        nout = int(round(t_end / dt))
        if abs(nout * dt - t_end) > 1e-9 * t_end:
            raise ModelError(f"`dt` must divide t_end={t_end} (the paper's grid 0:dt:t_end), "
                             f"found {dt!r}.")
        if integrator not in PAPER_INTEGRATORS:
            raise ModelError(f"`integrator` must be one of {list(PAPER_INTEGRATORS)}, "
                             f"found {integrator!r}.")
        settings = dict(PAPER_INTEGRATORS[integrator], stabilization=stab)
        if integrator == "rk4":
            settings["dt"] = float(dt)
        else:
            settings["t_eval"] = np.linspace(0.0, t_end, nout + 1)
    if unilateral and isinstance(settings["stabilization"], go.Baumgarte):
        raise ModelError("`baumgarte` cannot be combined with `unilateral=True` (the contact row "
                         "carries its own Baumgarte term); leave `baumgarte=None`.")

    kw = dict(a=a, b=b, m=m, g=g, J=J, fx=fx, fy=fy, tau=tau, theta0=th0, omega0=w0, xc0=xc0)

    def outputs(q, v):
        q = np.atleast_2d(q)
        v = np.atleast_2d(v)
        return {"xc": q[:, 0], "yc": q[:, 1], "theta": q[:, 2], "omega": v[:, 2],
                "normal_force": _normal_force_from_state(q, v, a, b, m, g, J, fx, fy, tau)}

    def ref(t):
        if contact:
            r = contact_reference(t, mu=friction, **kw)
            return {k: r[k] for k in ("xc", "yc", "theta", "omega")}
        r = reference_solution(t, **kw)
        return {k: r[k] for k in ("xc", "yc", "theta", "omega", "normal_force")}

    loads = ", ".join(f"{k} = {p[k]:g}" for k in ("fx", "fy", "tau") if p[k] != 0.0) or "none"
    desc = (f"Paper 002, section {CASES[case]['section']}: elliptical disk (a = {a:g}, b = {b:g}, "
            f"m = {m:g}, J = {J:g}) rolling without slip on a horizontal line, q = (xc, yc, "
            f"theta); contact yc = rho(theta) (holonomic), rolling xc' + rho(theta) theta' = 0 "
            f"({'integrated, holonomic' if rolling == 'holonomic' else 'velocity form'}; exact "
            f"no-slip of the contact point -- the paper's eqs. (7)-(8) have the opposite sign, "
            f"contradicting its initial conditions); start theta = {th0:g}, theta' = {w0:g}; "
            f"applied loads besides gravity: {loads}"
            f"{'; unilateral normal contact (qp), valid until touchdown' if unilateral else ''}"
            f"{f'; unilateral contact with lift-off, flight and landing (friction {friction:g})' if contact else ''}. "
            "Reference: the reduced one-DOF equation in theta (solve_ivp, rtol = atol = 1e-13).")
    params = dict(p, case=case, rolling=rolling, unilateral=unilateral, contact=contact,
                  friction=friction,
                  baumgarte=None if baumgarte is None else repr(baumgarte), dt=dt,
                  integrator=integrator if dt is not None else None)
    solver_settings = {"ga": {**ga_settings(t_end), "stabilization": stab}}
    if dt is not None:
        solver_settings["ga"]["t_eval"] = None
    # SI units (paper 002's g = 9.8, t in s). Every multiplier is a force [N]: the contact's
    # (a gap in m), the rolling row's (f = xc' + rho th' in m/s: lam f_v is a force; its
    # integrated form in m). The velocity form mixes a holonomic row (m) and a
    # nonholonomic one (m/s): the residuals' units are stated
    units = {"xc": "m", "yc": "m", "theta": "rad", "omega": "rad/s", "normal_force": "N",
             "energy": "J", "length": "m", "multipliers": "N"}
    if contact:
        units.update(constraints=("m",), contact_slip="m")
    elif unilateral:
        units.update(constraints=("m/s",))
    elif rolling == "holonomic":
        units.update(constraints=("m", "m"))
    else:
        units.update(constraints=("m", "m/s"), position_residual="m", velocity_residual="m/s")
    return go.Problem(name=f"ellipse_rolling_{case}", system=sysm, q0=q0, v0=v0,
                      t_span=(0.0, t_end), description=desc, settings=settings,
                      outputs=outputs, reference=ref, params=params,
                      solver_settings=solver_settings, units=units,
                      draw=lambda ax, q: draw(ax, q, params["a"], params["b"]))


def draw(ax, q, a: float = 1.5, b: float = 1.0):
    """Draw the disk at ``q = (xc, yc, theta)``: the ellipse, its axes, the ground line."""
    from matplotlib.patches import Ellipse

    xc, yc, th = (float(x) for x in q)
    ax.add_patch(Ellipse((xc, yc), 2 * a, 2 * b, angle=np.degrees(th), fill=False, lw=2,
                         color="C0"))
    e1 = np.array([np.cos(th), np.sin(th)])
    e2 = np.array([-np.sin(th), np.cos(th)])
    for e, r, c in ((e1, a, "C1"), (e2, b, "C2")):
        ax.plot([xc - r * e[0], xc + r * e[0]], [yc - r * e[1], yc + r * e[1]], color=c, lw=1)
    ax.axhline(0.0, color="k", lw=1)
    ax.set_xlim(xc - 2 * max(a, b), xc + 2 * max(a, b))
    ax.set_ylim(-0.3, 2.5 * max(a, b))
    ax.set_aspect("equal")
    return ax
