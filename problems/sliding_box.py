"""A box on two frictional corners, on a flat or inclined floor: it slides, stops, holds
or slides back; the contact problem of two points.

A box (mass m, half width b, half height h, moving in its vertical plane: centre
``(x, y)``, angle ``th``) rests on a rough floor ``y = 0`` on its two bottom corners,
each a contact point with Coulomb friction ``mu`` (one ``Contact`` with two rows). The
floor is inclined by ``beta``, written as gravity tilted by ``beta``: its component
``-m g sin(beta)`` points down the slope, along ``-x``. The box is launched up the slope
with speed ``v0 >= 0``.

Closed form, phase by phase (``N = m g cos(beta)`` the total normal force):

* sliding up (``x' > 0``): each corner feels ``-mu N_i``; ``x'' = -g (sin(beta) +
  mu cos(beta))`` until the stop at ``t_s = v0 / (g (sin(beta) + mu cos(beta)))``;
* then, if ``mu >= tan(beta)``, the box holds: the friction forces sum to
  ``m g sin(beta)`` but their split between the corners is indeterminate (any pair in
  both cones with that sum balances the box; gaussopt reports the least-norm one);
  otherwise it slides down with ``x'' = -g (sin(beta) - mu cos(beta))``.

The normal forces are determinate in every phase: with the corners at ``x = -+b``,
``y = -h`` from the centre and ``T`` the sum of the friction forces (along ``+x``), the
moment balance about the centre is ``b (N_right - N_left) + h T = 0``, so
``N_right, N_left = (N -+ h T / b) / 2`` with ``T = -mu N`` sliding up, ``+mu N``
sliding down, ``m g sin(beta)`` at rest. Friction acts below the centre of mass, so the
load shifts towards the front of a sliding box and towards the lower corner of a box
at rest on the slope (no tipping while ``mu h < b`` and ``h tan(beta) < b``).

Both corners slide together, stop together, and their forces must be decided together:
the case a point-by-point stick/slip rule gets wrong (see docs/contacts.md).
"""

from __future__ import annotations

import math

import numpy as np

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.model.system import rebuildable

DEFAULTS = {"m": 2.0, "b": 0.2, "h": 0.1, "mu": 0.3, "v0": 1.5, "beta": 0.0, "g": 9.81}


def reference(t, **params) -> dict:
    """``x``, ``u = x'`` and the normal forces ``N_left`` (corner at ``-b``) and
    ``N_right`` (``+b``) at the times ``t``, piecewise closed form (defaults: the
    problem's, :data:`DEFAULTS`)."""
    p = {**DEFAULTS, **params}
    m, b, h, mu, v0, beta, g = (p[k] for k in ("m", "b", "h", "mu", "v0", "beta", "g"))
    t = np.atleast_1d(np.asarray(t, dtype=float))
    sb, cb = math.sin(beta), math.cos(beta)
    N = m * g * cb
    up = g * (sb + mu * cb)                       # deceleration sliding up the slope
    ts = v0 / up if v0 > 0 else 0.0
    x1 = 0.5 * v0 * ts
    holds = mu >= math.tan(beta)
    s = np.minimum(t, ts)
    x = v0 * s - 0.5 * up * s * s
    u = np.where(t < ts, v0 - up * t, 0.0)
    T = np.where(t < ts, -mu * N, m * g * sb)     # the friction forces' sum, along +x
    if not holds:
        down = g * (sb - mu * cb)                 # acceleration down the slope (> 0)
        r = np.maximum(t - ts, 0.0)
        x = np.where(t < ts, x, x1 - 0.5 * down * r * r)
        u = np.where(t < ts, u, -down * r)
        T = np.where(t < ts, T, mu * N)
    return {"x": x, "u": u, "N_left": 0.5 * (N + h * T / b), "N_right": 0.5 * (N - h * T / b)}


@rebuildable
def build(m: float = 2.0, b: float = 0.2, h: float = 0.1, mu: float = 0.3, v0: float = 1.5,
          beta: float = 0.0, g: float = 9.81, t_end: float = 1.0) -> go.Problem:
    """The box launched on its two bottom corners (defaults: 2 kg, 0.4 m x 0.2 m, mu = 0.3,
    1.5 m/s on a flat floor, 1 s: it stops at 0.5097 s).

    Parameters
    ----------
    m : float, > 0
        Mass [kg].
    b, h : float, > 0
        Half width and half height [m]; ``mu h < b`` and ``h tan(beta) < b`` (else the box
        tips over a corner instead of sliding or resting flat).
    mu : float, > 0
        Coulomb friction coefficient of both corners [1].
    v0 : float, >= 0
        Launch speed up the slope [m/s].
    beta : float, in [0, pi/2)
        Inclination of the floor [rad] (gravity tilted by ``beta``; down the slope is
        ``-x``).
    g : float, > 0
        Gravitational acceleration [m/s^2].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``x`` [m] and ``u`` [m/s]; ``reference(t)`` the same in closed
        form (the module's :func:`reference` also gives the corners' normal forces).
    """
    for name, val in (("m", m), ("b", b), ("h", h), ("mu", mu), ("g", g)):
        if not (math.isfinite(val) and val > 0):
            raise ModelError(f"`{name}` must be a finite number > 0, found {val!r}.")
    if not (math.isfinite(v0) and v0 >= 0):
        raise ModelError(f"`v0` must be a finite speed >= 0 (up the slope), found {v0!r}.")
    if not 0 <= beta < math.pi / 2:
        raise ModelError(f"`beta` must lie in [0, pi/2) [rad], found {beta!r}.")
    if not (mu * h < b and h * math.tan(beta) < b):
        raise ModelError(f"the box must slide or rest flat: `mu` h < b and h tan(`beta`) < b, "
                         f"found mu h = {mu * h:g}, h tan(beta) = {h * math.tan(beta):g}, "
                         f"b = {b:g}: it tips over a corner.")

    def gap(t, q):
        x, y, th = q
        return np.array([y - b * np.sin(th) - h * np.cos(th), y + b * np.sin(th) - h * np.cos(th)])

    def slip(t, q):
        x, y, th = q
        return np.array([x - b * np.cos(th) + h * np.sin(th), x + b * np.cos(th) + h * np.sin(th)])

    corners = go.Contact(gap, slip=slip, friction=mu, rheonomic=False, name="corners")
    system = go.System(("x", "y", "th"), mass=np.diag([m, m, m * (b * b + h * h) / 3]),
                       force=[-m * g * math.sin(beta), -m * g * math.cos(beta), 0.0],
                       constraints=[corners], name="sliding_box")

    def outputs(q, v):
        q, v = np.atleast_2d(q), np.atleast_2d(v)
        return {"x": q[:, 0], "u": v[:, 0]}

    params = {"m": m, "b": b, "h": h, "mu": mu, "v0": v0, "beta": beta, "g": g}

    def ref(t):
        r = reference(t, **params)
        return {"x": r["x"], "u": r["u"]}

    up = g * (math.sin(beta) + mu * math.cos(beta))
    fate = "holds" if mu >= math.tan(beta) else "slides back down"
    where = "a flat floor" if beta == 0 else f"a floor inclined by {beta:g} rad"
    return go.Problem(
        name="sliding_box", system=system, q0=np.array([0.0, h, 0.0]),
        v0=np.array([v0, 0.0, 0.0]), t_span=(0.0, t_end),
        description=(f"A {2 * b:g} m x {2 * h:g} m box on two corners with friction {mu:g} on "
                     f"{where}, launched at {v0:g} m/s: it stops at t = {v0 / up:.4g} s and "
                     f"{fate}; the load shifts between the corners."),
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12},
        solvers=("closed_form", "lagrange", "qp"),
        outputs=outputs, reference=ref, params=params,
        units={"x": "m", "y": "m", "th": "rad", "u": "m/s", "length": "m",
               "constraints": ("m",), "contact_slip": "m"})
