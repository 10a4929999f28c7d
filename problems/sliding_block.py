"""A block on a rough incline pushed by a periodic force: Coulomb friction, stick and slip.

A block (mass m, as a point on the surface) rests on a plane inclined by ``beta``
with Coulomb friction ``mu`` and is pushed along the plane by
``P(t) = m g sin(beta) + P1 sin(w t)`` (the constant part holds it against
gravity). The contact is ``gap = -x sin(beta) + y cos(beta) >= 0`` with
``slip = x cos(beta) + y sin(beta)`` (the position along the plane) and
``friction = mu``. Along the plane ``m s'' = P1 sin(w t) + T`` with the normal
force ``N = m g cos(beta)``: the block sticks while ``|P1 sin(w t)| <= mu N``
and slides with ``T = -mu N sign(s')`` otherwise, until its slip rate returns
to zero. Every phase is closed form; the switching times are roots of closed
forms (Brent's method to 1e-15).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

import gaussopt as go
from gaussopt.model.system import rebuildable


def reference_phases(t_end: float, m: float = 1.5, beta: float = 0.3, mu: float = 0.4,
                     P1: float = 9.0, w: float = 2.0, g: float = 9.81) -> list:
    """The phases ``(t_start, t_end, d, s0, u0)`` up to ``t_end`` (``d`` = 0 stick, +-1
    sliding with the sign of the slip rate), piecewise closed form."""
    A, mup = P1 / m, mu * g * np.cos(beta)

    def IR(t):
        return -A / w * np.cos(w * t)

    def IIR(t):
        return -A / w ** 2 * np.sin(w * t)

    def u_of(t, ts, u0, d):
        return u0 + IR(t) - IR(ts) - d * mup * (t - ts)

    def s_of(t, ts, s0, u0, d):
        return s0 + u0 * (t - ts) + IIR(t) - IIR(ts) - IR(ts) * (t - ts) - 0.5 * d * mup * (t - ts) ** 2

    def first_root(f, ts, step=1e-3):
        a, fa = ts, f(ts)
        while a < t_end:
            b = min(a + step, t_end)
            fb = f(b)
            if fa * fb < 0 or fb == 0:
                return brentq(f, a, b, xtol=1e-15, rtol=4 * np.finfo(float).eps)
            a, fa = b, fb
        return None

    phases = []
    t, s, u, d = 0.0, 0.0, 0.0, 0
    while t < t_end:
        if d == 0:
            # sticks until |A sin(w t)| reaches mu' (nudged past the start: the cone is left)
            te = first_root(lambda x: abs(A * np.sin(w * x)) - mup, t + 1e-9)
            te = t_end if te is None else te
            phases.append((t, te, 0, s, 0.0))
            if te >= t_end:
                break
            d = 1 if A * np.sin(w * te) > 0 else -1
            t = te
        else:
            # from a stick the slip rate grows like (t - ts)^2: start the scan where it is
            # clear of rounding
            te = first_root(lambda x: d * u_of(x, t, u, d), t + (1e-3 if u == 0 else 1e-9))
            te = t_end if te is None else te
            phases.append((t, te, d, s, u))
            s = s_of(te, t, s, u, d)
            if te >= t_end:
                break
            u = 0.0
            R = A * np.sin(w * te)
            d = 0 if abs(R) <= mup else (1 if R > 0 else -1)
            t = te
    return phases


def reference(t, **params) -> dict:
    """``s`` (position along the plane) and ``u = s'`` at the times ``t`` (closed form)."""
    p = {"m": 1.5, "beta": 0.3, "mu": 0.4, "P1": 9.0, "w": 2.0, "g": 9.81, **params}
    t = np.atleast_1d(np.asarray(t, dtype=float))
    A, mup, w = p["P1"] / p["m"], p["mu"] * p["g"] * np.cos(p["beta"]), p["w"]
    phases = reference_phases(float(t.max()) + 1e-9, **p)
    s, u = np.empty_like(t), np.empty_like(t)
    for ts, te, d, s0, u0 in phases:
        sel = (t >= ts) & (t <= te)
        x = t[sel]
        if d == 0:
            s[sel], u[sel] = s0, 0.0
        else:
            IR = lambda y: -A / w * np.cos(w * y)                     # noqa: E731
            IIR = lambda y: -A / w ** 2 * np.sin(w * y)               # noqa: E731
            u[sel] = u0 + IR(x) - IR(ts) - d * mup * (x - ts)
            s[sel] = (s0 + u0 * (x - ts) + IIR(x) - IIR(ts) - IR(ts) * (x - ts)
                      - 0.5 * d * mup * (x - ts) ** 2)
    return {"s": s, "u": u}


@rebuildable
def build(m: float = 1.5, beta: float = 0.3, mu: float = 0.4, P1: float = 9.0, w: float = 2.0,
          g: float = 9.81, t_end: float = 6.0) -> go.Problem:
    """The pushed block on the rough incline (defaults: 1.5 kg, 0.3 rad, mu = 0.4, 6 s).

    Parameters
    ----------
    m : float, > 0
        Mass [kg].
    beta : float
        Inclination [rad].
    mu : float, > 0
        Coulomb friction coefficient [1].
    P1 : float
        Amplitude of the periodic push [N].
    w : float, > 0
        Angular frequency of the push [rad/s].
    g : float, > 0
        Gravitational acceleration [m/s^2].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``s`` (position along the plane [m]) and ``u`` (its rate
        [m/s]); ``reference(t)`` the same in closed form.
    """
    cb, sb = np.cos(beta), np.sin(beta)
    plane = go.Contact(lambda t, q: np.array([-q[0] * sb + q[1] * cb]),
                       lambda t, q: np.array([[-sb, cb]]),
                       slip=lambda t, q: np.array([q[0] * cb + q[1] * sb]),
                       slip_jacobian=lambda t, q: np.array([[cb, sb]]),
                       friction=mu, rheonomic=False, name="plane")

    def force(t, q, v):
        push = m * g * sb + P1 * np.sin(w * t)
        return np.array([push * cb, push * sb - m * g])

    system = go.System(("x", "y"), mass=m * np.eye(2), force=force, constraints=[plane],
                       name="sliding_block")

    def outputs(q, v):
        q, v = np.atleast_2d(q), np.atleast_2d(v)
        return {"s": q[:, 0] * cb + q[:, 1] * sb, "u": v[:, 0] * cb + v[:, 1] * sb}

    params = {"m": m, "beta": beta, "mu": mu, "P1": P1, "w": w, "g": g}
    return go.Problem(
        name="sliding_block", system=system, q0=np.zeros(2), v0=np.zeros(2),
        t_span=(0.0, t_end),
        description=(f"A block on a plane inclined by {beta:g} rad with friction {mu:g}, pushed "
                     f"by m g sin(beta) + {P1:g} sin({w:g} t): it sticks and slides."),
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12},
        solvers=("closed_form", "lagrange", "qp"),
        outputs=outputs, reference=lambda t: reference(t, **params), params=params,
        units={"x": "m", "y": "m", "s": "m", "u": "m/s", "length": "m", "constraints": ("m",),
               "contact_slip": "m"})
