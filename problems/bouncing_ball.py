"""A ball bouncing on the floor with Newton's restitution: impacts and their accumulation.

A ball (mass m, radius r) dropped from height h with a horizontal velocity
``vx`` bounces on the floor ``y = 0`` (the contact ``gap = y - r >= 0``,
frictionless) with restitution e. Every impact and its time are analytic: the
first impact at ``t1 = sqrt(2 (h - r) / g)`` with speed ``v1 = g t1``, the k-th
rebound at speed ``e^k v1`` after a flight of ``2 e^k v1 / g``; the impacts
accumulate (Zeno) at ``t_inf = t1 + 2 e v1 / (g (1 - e))``, after which the
ball rests on the floor with normal force ``m g`` and slides on at ``vx``.
"""

from __future__ import annotations

import numpy as np

import gaussopt as go
from gaussopt.model.system import rebuildable


def first_impact(h: float = 1.3, r: float = 0.1, g: float = 9.81) -> tuple[float, float]:
    """``(t1, v1)``: time and speed of the first impact."""
    t1 = float(np.sqrt(2 * (h - r) / g))
    return t1, g * t1


def impact_times(count: int, h: float = 1.3, r: float = 0.1, e: float = 0.6,
                 g: float = 9.81) -> np.ndarray:
    """The first ``count`` impact times ``t_{k+1} = t_k + 2 e^k v1 / g``, shape (count,)."""
    t1, v1 = first_impact(h, r, g)
    flights = 2 * v1 * e ** np.arange(1, count) / g
    return t1 + np.concatenate([[0.0], np.cumsum(flights)])


def accumulation_time(h: float = 1.3, r: float = 0.1, e: float = 0.6, g: float = 9.81) -> float:
    """``t_inf = t1 + 2 e v1 / (g (1 - e))`` (``e < 1``)."""
    t1, v1 = first_impact(h, r, g)
    return t1 + 2 * e * v1 / (g * (1 - e))


@rebuildable
def build(m: float = 0.7, r: float = 0.1, h: float = 1.3, e: float = 0.6, vx: float = 0.3,
          g: float = 9.81, t_end: float = 3.0) -> go.Problem:
    """The bouncing ball (defaults: m = 0.7 kg, r = 0.1 m, dropped from 1.3 m, e = 0.6, 3 s).

    Parameters
    ----------
    m : float, > 0
        Mass [kg].
    r : float, >= 0
        Radius [m].
    h : float, > 0
        Height of the centre at release [m]; above the floor (``h > r``).
    e : float, in [0, 1)
        Coefficient of restitution [1].
    vx : float
        Horizontal velocity [m/s].
    g : float, > 0
        Gravitational acceleration [m/s^2].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``x``, ``y`` [m] and ``vy`` [m/s]; ``reference(t)`` the same,
        piecewise analytic (at an impact time: the state before the impact).
    """
    if not h > r:
        raise go.ModelError(f"`h` must exceed the radius r={r} (the ball starts above the "
                            f"floor), found {h}.")
    floor = go.Contact(lambda t, q: np.array([q[1] - r]), restitution=e, rheonomic=False,
                       name="floor")
    system = go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -m * g], constraints=[floor],
                       energy=lambda t, q, v: 0.5 * m * v @ v + m * g * q[1],
                       name="bouncing_ball")

    def outputs(q, v):
        q, v = np.atleast_2d(q), np.atleast_2d(v)
        return {"x": q[:, 0], "y": q[:, 1], "vy": v[:, 1]}

    def reference(t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        t1, v1 = first_impact(h, r, g)
        y, vy = np.empty_like(t), np.empty_like(t)
        before = t <= t1
        y[before] = h - 0.5 * g * t[before] ** 2
        vy[before] = -g * t[before]
        t_inf = accumulation_time(h, r, e, g) if e < 1 else np.inf
        rest = t >= t_inf
        y[rest], vy[rest] = r, 0.0
        fly = ~before & ~rest
        if fly.any():
            # the k-th flight starts at t_k = t1 + 2 v1 (e - e^k) / (g (1 - e)) with speed e^k v1
            tt = t[fly]
            if e == 0:
                y[fly], vy[fly] = r, 0.0
            else:
                # k from the geometric series: the largest k with t_k <= t
                # t_k <= t  <=>  e^k >= x = e - (t - t1) g (1 - e) / (2 v1)
                x = e - (tt - t1) * g * (1 - e) / (2 * v1)
                k = np.floor(np.log(np.maximum(x, 1e-300)) / np.log(e)).astype(int)
                k = np.maximum(k, 1)
                tk = t1 + 2 * v1 * (e - e ** k) / (g * (1 - e))
                over = tk > tt                                    # rounding at a boundary
                k[over] -= 1
                tk = t1 + 2 * v1 * (e - e ** k) / (g * (1 - e))
                u = e ** k * v1
                s = tt - tk
                y[fly] = r + u * s - 0.5 * g * s * s
                vy[fly] = u - g * s
        return {"x": vx * t, "y": y, "vy": vy}

    def draw(ax, q):
        import matplotlib.pyplot as plt

        ax.axhline(0.0, color="0.3", lw=1)
        ax.add_patch(plt.Circle((q[0], q[1]), r, color="C0"))
        ax.set_aspect("equal")
        return ax

    t1, v1 = first_impact(h, r, g)
    return go.Problem(
        name="bouncing_ball", system=system, q0=np.array([0.0, h]), v0=np.array([vx, 0.0]),
        t_span=(0.0, t_end),
        description=(f"A ball dropped from {h:g} m bouncing with restitution {e:g}: first impact "
                     f"at {t1:.10f} s, impacts accumulating at "
                     f"{accumulation_time(h, r, e, g) if e < 1 else np.inf:.10f} s."),
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12},
        solvers=("closed_form", "lagrange", "qp"),
        outputs=outputs, reference=reference, draw=draw,
        params={"m": m, "r": r, "h": h, "e": e, "vx": vx, "g": g},
        units={"x": "m", "y": "m", "vy": "m/s", "energy": "J", "length": "m",
               "constraints": ("m",)})
