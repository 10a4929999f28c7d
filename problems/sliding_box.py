"""A box sliding on two frictional corners until it stops: the contact problem of two points.

A box (mass m, half width b, half height h, moving in its vertical plane: centre
``(x, y)``, angle ``th``) is launched along a rough floor ``y = 0`` with speed ``v0``
and slides on its two bottom corners, each a contact point with Coulomb friction
``mu`` (one ``Contact`` with two rows). While it slides, each corner feels ``-mu N_i``
along the floor; the box decelerates at ``mu g`` and stops at ``t_s = v0 / (mu g)``
after ``v0^2 / (2 mu g)``. The friction acts below the centre of mass, so the load
shifts to the front corner: the moment balance about the centre
``b (N_front - N_back) - h mu (N_front + N_back) = 0`` with ``N_front + N_back = m g``
gives ``N_front, N_back = m g (1 +- mu h / b) / 2`` (no tipping while ``mu h < b``).
After the stop the box rests: the normal forces are ``m g / 2`` each and the friction
forces are indeterminate (any equal and opposite pair inside both cones balances the
box); gaussopt reports the least-norm admissible pair, zero.

Both corners slide together, stop together, and their forces must be decided together:
the case a point-by-point stick/slip rule gets wrong (see docs/contacts.md).
"""

from __future__ import annotations

import numpy as np

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.model.system import rebuildable


def reference(t, m: float = 2.0, b: float = 0.2, h: float = 0.1, mu: float = 0.3,
              v0: float = 1.5, g: float = 9.81) -> dict:
    """``x``, ``u = x'`` and the normal forces of the back and front corners at the times
    ``t`` (closed form)."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    ts = v0 / (mu * g)
    s = np.minimum(t, ts)
    sliding = t < ts
    shift = np.where(sliding, mu * h / b, 0.0)
    return {"x": v0 * s - 0.5 * mu * g * s * s, "u": np.where(sliding, v0 - mu * g * t, 0.0),
            "N_back": 0.5 * m * g * (1 - shift), "N_front": 0.5 * m * g * (1 + shift)}


@rebuildable
def build(m: float = 2.0, b: float = 0.2, h: float = 0.1, mu: float = 0.3, v0: float = 1.5,
          g: float = 9.81, t_end: float = 1.0) -> go.Problem:
    """The box launched on its two bottom corners (defaults: 2 kg, 0.4 m x 0.2 m, mu = 0.3,
    1.5 m/s, 1 s: it stops at 0.5097 s).

    Parameters
    ----------
    m : float, > 0
        Mass [kg].
    b, h : float, > 0
        Half width and half height [m]; ``mu h < b`` (else the box tips over its front
        corner instead of sliding flat).
    mu : float, > 0
        Coulomb friction coefficient of both corners [1].
    v0 : float
        Launch speed along the floor [m/s].
    g : float, > 0
        Gravitational acceleration [m/s^2].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``x`` [m] and ``u`` [m/s]; ``reference(t)`` the same in closed
        form (and the corners' normal forces, ``N_back`` and ``N_front``).
    """
    if not mu * h < b:
        raise ModelError(f"`mu` * `h` must be below `b` (the box slides flat), found "
                         f"mu h = {mu * h:g} >= b = {b:g}: the box tips over its front corner.")

    def gap(t, q):
        x, y, th = q
        return np.array([y - b * np.sin(th) - h * np.cos(th), y + b * np.sin(th) - h * np.cos(th)])

    def slip(t, q):
        x, y, th = q
        return np.array([x - b * np.cos(th) + h * np.sin(th), x + b * np.cos(th) + h * np.sin(th)])

    corners = go.Contact(gap, slip=slip, friction=mu, rheonomic=False, name="corners")
    system = go.System(("x", "y", "th"), mass=np.diag([m, m, m * (b * b + h * h) / 3]),
                       force=[0.0, -m * g, 0.0], constraints=[corners], name="sliding_box")

    def outputs(q, v):
        q, v = np.atleast_2d(q), np.atleast_2d(v)
        return {"x": q[:, 0], "u": v[:, 0]}

    params = {"m": m, "b": b, "h": h, "mu": mu, "v0": v0, "g": g}

    def ref(t):
        r = reference(t, **params)
        return {"x": r["x"], "u": r["u"]}

    return go.Problem(
        name="sliding_box", system=system, q0=np.array([0.0, h, 0.0]),
        v0=np.array([v0, 0.0, 0.0]), t_span=(0.0, t_end),
        description=(f"A {2 * b:g} m x {2 * h:g} m box launched at {v0:g} m/s on two corners "
                     f"with friction {mu:g}: it slides, the load shifting to the front corner, "
                     f"and stops at t = {v0 / (mu * g):.4g} s."),
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12},
        solvers=("closed_form", "lagrange", "qp"),
        outputs=outputs, reference=ref, params=params,
        units={"x": "m", "y": "m", "th": "rad", "u": "m/s", "length": "m",
               "constraints": ("m",), "contact_slip": "m"})
