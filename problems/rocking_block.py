"""A rigid block rocking on rigid ground (Housner 1963): plastic impacts that swap the pivot.

A rectangular block (mass m, half-width b, half-height h) stands on two bottom
corners, each a contact with ``friction = inf`` (no sliding) and restitution 0.
Released at rest tilted by ``th0`` onto its left corner, it falls back and
rocks: between impacts a pendulum about the pivot corner,
``I_O th'' = -sign(th) m g R sin(alpha - |th|)`` with ``R = sqrt(b^2 + h^2)``,
``alpha = atan(b / h)`` and ``I_O = (4/3) m R^2``; at ``th = 0`` the other
corner strikes, sticks, and the old pivot lifts off. Gauss's principle at the
velocity level gives Housner's ratio of the angular velocities after and
before, ``1 - (3/2) sin^2(alpha)``. The amplitude decays, the impacts
accumulate, and the block comes to rest on both corners (normal forces
``m g / 2`` each).

Reference: the pendulum equation of each half-cycle integrated at
``rtol = 1e-13`` with the impact as an event, and Housner's map applied at
every impact.

G. W. Housner, "The behavior of inverted pendulum structures during
earthquakes", Bull. Seismol. Soc. Am. 53 (1963) 403-417.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable


def housner_ratio(b: float = 0.2, h: float = 0.6) -> float:
    """Angular velocity after / before an impact: ``1 - (3/2) sin^2(atan(b / h))``."""
    return float(1 - 1.5 * np.sin(np.arctan2(b, h)) ** 2)


def half_cycles(b: float, h: float, g: float, th0: float, t_max: float):
    """The motion released at rest at ``th0 > 0``, half-cycle by half-cycle: yields
    ``(t_start, sol, t_impact, w_impact)`` per pendulum about a corner (``sol`` its dense
    solution, DOP853 at ``rtol = 1e-13``; ``t_impact`` the next ``th = 0`` or ``None`` before
    ``t_max``), Housner's map applied at every impact."""
    R, alpha = float(np.hypot(b, h)), float(np.arctan2(b, h))
    k = 3 * g / (4 * R)                       # m g R / I_O with I_O = 4/3 m R^2
    ratio = housner_ratio(b, h)
    t, y = 0.0, np.array([th0, 0.0])
    while t < t_max:
        sgn = 1.0 if y[0] > 0 or (y[0] == 0 and y[1] > 0) else -1.0

        def rhs(_, z, s=sgn):
            return [z[1], -s * k * np.sin(alpha - s * z[0])]

        def hit(_, z):
            return z[0]
        hit.terminal, hit.direction = True, -sgn
        sol = solve_ivp(rhs, (t, t_max), y, events=hit, method="DOP853", rtol=1e-13,
                        atol=1e-14, dense_output=True)
        if not sol.t_events[0].size:
            yield t, sol, None, None
            return
        te, w = float(sol.t_events[0][0]), float(sol.y_events[0][0][1])
        yield t, sol, te, w
        t, y = te, np.array([0.0, ratio * w])


def reference_impacts(count: int, b: float = 0.2, h: float = 0.6, g: float = 9.81,
                      th0: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Times and angular velocities before the first ``count`` impacts (released at rest at
    ``th0 > 0``): :func:`half_cycles`."""
    times, rates = [], []
    for _, _, te, w in half_cycles(b, h, g, th0, 1e3):
        if te is None or len(times) == count:
            break
        times.append(te)
        rates.append(w)
    return np.array(times), np.array(rates)


@rebuildable
def build(m: float = 2.0, b: float = 0.2, h: float = 0.6, g: float = 9.81, tilt: float = 0.6,
          t_end: float = 4.0) -> go.Problem:
    """The rocking block (defaults: 2 kg, 0.4 m x 1.2 m, released at 0.6 alpha, 4 s).

    Parameters
    ----------
    m : float, > 0
        Mass [kg].
    b : float, > 0
        Half-width [m].
    h : float, > 0
        Half-height [m].
    g : float, > 0
        Gravitational acceleration [m/s^2].
    tilt : float, in (0, 1)
        Release angle as a fraction [1] of the critical angle ``alpha = atan(b / h)``.
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``th`` [rad] and ``w`` [rad/s]; ``reference(t)`` the same from
        the half-cycle pendulums and Housner's map, and at rest (0) after the impacts
        accumulate.
    """
    Ic = m * (b * b + h * h) / 3
    alpha = float(np.arctan2(b, h))
    th0 = tilt * alpha

    def gap(t, q):
        c, s = np.cos(q[2]), np.sin(q[2])
        return np.array([q[1] - b * s - h * c, q[1] + b * s - h * c])

    def slip(t, q):
        c, s = np.cos(q[2]), np.sin(q[2])
        return np.array([q[0] - b * c + h * s, q[0] + b * c + h * s])

    # the derivatives written out (gap'' = J a - gamma; checked against differences of the
    # functions by System.check): the run then evaluates no complex steps
    def gap_jac(t, q):
        c, s = np.cos(q[2]), np.sin(q[2])
        return np.array([[0.0, 1.0, -b * c + h * s], [0.0, 1.0, b * c + h * s]])

    def gap_gamma(t, q, v):
        c, s = np.cos(q[2]), np.sin(q[2])
        return np.array([-(b * s + h * c), b * s - h * c]) * v[2] ** 2

    def slip_jac(t, q):
        c, s = np.cos(q[2]), np.sin(q[2])
        return np.array([[1.0, 0.0, b * s + h * c], [1.0, 0.0, h * c - b * s]])

    def slip_gamma(t, q, v):
        c, s = np.cos(q[2]), np.sin(q[2])
        return np.array([h * s - b * c, b * c + h * s]) * v[2] ** 2

    corners = go.Contact(gap, gap_jac, gap_gamma, slip=slip, slip_jacobian=slip_jac,
                         slip_gamma=slip_gamma, restitution=0.0, friction=float("inf"),
                         rheonomic=False, name="corners")
    system = go.System(("x", "y", "th"), mass=np.diag([m, m, Ic]), force=[0.0, -m * g, 0.0],
                       constraints=[corners],
                       energy=lambda t, q, v: 0.5 * (m * (v[0] ** 2 + v[1] ** 2) + Ic * v[2] ** 2)
                       + m * g * q[1], name="rocking_block")
    # the left corner at the origin
    q0 = np.array([b * np.cos(th0) - h * np.sin(th0), b * np.sin(th0) + h * np.cos(th0), th0])

    def outputs(q, v):
        q, v = np.atleast_2d(q), np.atleast_2d(v)
        return {"th": q[:, 2], "w": v[:, 2]}

    def reference(t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        th, w = np.full(t.shape, np.nan), np.full(t.shape, np.nan)
        for ts, sol, te, _ in half_cycles(b, h, g, th0, float(t.max())):
            te = float(t.max()) if te is None else te
            sel = (t >= ts) & (t <= te)
            if sel.any():
                th[sel], w[sel] = sol.sol(t[sel])
            if te - ts < 1e-9:
                # the accumulation: the half-cycles shrink geometrically (by Housner's
                # ratio r, their durations being proportional to the launch rate w), so the
                # rest add up to less than 1e-9 / (1 - r) s with |th| < |w| 1e-9; then the
                # block rests on both corners
                th[t > te], w[t > te] = 0.0, 0.0
                break
        return {"th": th, "w": w}

    def draw(ax, q):
        c, s = np.cos(q[2]), np.sin(q[2])
        pts = np.array([[-b, -h], [b, -h], [b, h], [-b, h], [-b, -h]])
        xy = q[:2] + pts @ np.array([[c, s], [-s, c]])
        ax.axhline(0.0, color="0.3", lw=1)
        ax.plot(xy[:, 0], xy[:, 1], "-", color="C0", lw=2)
        ax.set_aspect("equal")
        return ax

    return go.Problem(
        name="rocking_block", system=system, q0=q0, v0=np.zeros(3), t_span=(0.0, t_end),
        description=(f"A {2 * b:g} m x {2 * h:g} m block rocking on two sticking corners "
                     f"(Housner 1963): angular velocity ratio {housner_ratio(b, h):.12f} at "
                     "every impact."),
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12},
        solvers=("closed_form", "lagrange", "qp"),
        outputs=outputs, reference=reference, draw=draw,
        params={"m": m, "b": b, "h": h, "g": g, "tilt": tilt},
        units={"x": "m", "y": "m", "th": "rad", "w": "rad/s", "energy": "J", "length": "m",
               "constraints": ("m", "m"), "contact_slip": "m"})
