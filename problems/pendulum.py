"""Cartesian pendulum: a point mass on a rigid massless rod, q = (x, y).

m = 1 kg, l = 1 m, g = 9.81 m/s^2, released at rest 60 degrees from the
downward vertical, 10 s. The rod is the holonomic constraint x^2 + y^2 = l^2
(its Jacobian and convective term are computed automatically). Reference: the
pendulum equation th'' = -(g/l) sin th in the angle from the downward
vertical, integrated at rtol = atol = 1e-13; the exact period is
T = 4 sqrt(l/g) K(sin^2(th0/2)).
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import ellipk

import gaussopt as go
from gaussopt.model.system import rebuildable
from gaussopt.study.problem import ga_settings


def period(l: float = 1.0, g: float = 9.81, th0_deg: float = 60.0) -> float:
    """Exact period ``4 sqrt(l/g) K(k^2)``, ``k = sin(th0/2)``."""
    return float(4 * np.sqrt(l / g) * ellipk(np.sin(np.radians(th0_deg) / 2) ** 2))


@rebuildable        # its System pickles as this call
def build(m: float = 1.0, l: float = 1.0, g: float = 9.81, th0_deg: float = 60.0,
          t_end: float = 10.0) -> go.Problem:
    """The Cartesian pendulum (defaults: m = 1, l = 1, 60 degrees, 10 s).

    Parameters
    ----------
    m : float, > 0
        Mass of the bob [kg].
    l : float, > 0
        Length of the rod [m].
    g : float
        Gravitational acceleration [m/s^2].
    th0_deg : float
        Release angle from the downward vertical [deg]; released at rest.
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``theta`` (angle from the downward vertical [rad]), ``x``,
        ``y`` [m]; ``reference(t)`` the same from the pendulum equation.
    """
    system = go.System(
        ("x", "y"), mass=m * np.eye(2), force=[0.0, -m * g],
        constraints=[go.Holonomic(lambda t, q: np.array([q @ q - l**2]), rheonomic=False,
                                  name="rod")],
        energy=lambda t, q, v: 0.5 * m * v @ v + m * g * q[1], name="pendulum")
    th0 = np.radians(th0_deg)
    q0 = np.array([l * np.sin(th0), -l * np.cos(th0)])

    def outputs(q, v):
        q = np.atleast_2d(q)
        return {"theta": np.arctan2(q[:, 0], -q[:, 1]), "x": q[:, 0], "y": q[:, 1]}

    def reference(t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        sol = solve_ivp(lambda _, s: [s[1], -(g / l) * np.sin(s[0])], (0.0, float(t.max())),
                        [th0, 0.0], method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True)
        th = sol.sol(t)[0]
        return {"theta": th, "x": l * np.sin(th), "y": -l * np.cos(th)}

    def draw(ax, q):
        ax.plot([0, q[0]], [0, q[1]], "-", color="C0", lw=2)
        ax.plot([q[0]], [q[1]], "o", color="C0", ms=12)
        ax.set_aspect("equal")
        return ax

    return go.Problem(
        name="pendulum", system=system, q0=q0, v0=np.zeros(2), t_span=(0.0, t_end),
        description=f"Cartesian pendulum, released at rest {th0_deg:g} degrees from the "
                    f"vertical; exact period {period(l, g, th0_deg):.10f} s.",
        settings={"method": "DOP853", "rtol": 1e-11, "atol": 1e-11,
                  "stabilization": go.Projection()},
        solver_settings={"ga": ga_settings(t_end, 0.3),
                         "lagrange_baumgarte": {"solver": "lagrange",
                                                "stabilization": go.Baumgarte(10.0, 10.0)}},
        outputs=outputs, reference=reference, draw=draw,
        params={"m": m, "l": l, "g": g, "th0_deg": th0_deg},
        # for figures: the rod's row is x^2 + y^2 - l^2 [m^2]
        units={"x": "m", "y": "m", "theta": "rad", "energy": "J", "length": "m",
               "constraints": ("m^2",)})
