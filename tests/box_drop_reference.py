"""A box dropped tilted and spinning onto a floor: the torque-free flight to its first impact
and that impact at one corner, solved without gaussopt (used by
``tests/test_mjcf_contacts.py`` and ``benchmarks/contact.py``).

The flight: Euler's equations in the box's principal frame (inertias ``m/3 (b^2 + c^2)``,
... for half sizes ``a, b, c``), Euler parameters for the attitude, the centroid in free
fall, integrated by scipy's DOP853 at 1e-13 until a corner reaches ``z = 0``.

The impact at corner ``r`` (from the centroid, world frame; floor normal ``n = z``): a
velocity jump ``du = K P`` of the corner under the impulse ``P`` with ``K = 1/m -
[r]x I^-1 [r]x`` (``I`` the world inertia). Newton's law without friction gives ``P = -(1 +
e) u_n / (n . K n) n``; with friction that sticks, ``P = K^-1 (-e u_n n - u)`` (the
corner leaves with the normal rebound only), valid where ``|P_t| <= mu P_n``.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from tippe_top_reference import e_rate, rot

G0 = 9.81
#: half sizes [m] and mass [kg]; dropped at height Z0 with Euler angles EULER (MuJoCo's
#: intrinsic xyz, degrees), velocity V0 and world angular velocity W0
BOX_HALF, BOX_M = np.array([0.1, 0.15, 0.05]), 1.0
Z0, EULER = 0.5, (20, 30, 10)
V0, W0 = np.array([0.5, 0.0, 0.0]), np.array([1.0, -2.0, 3.0])
#: the corners in the order of the loader's points (signs of (x, y, z), z fastest)
CORNERS = np.array([[sx, sy, sz] for sx in (1, -1) for sy in (1, -1) for sz in (1, -1)]) \
    * BOX_HALF


def drop_xml(mu: float, option: str = "") -> str:
    """The box over a floor (both geoms' sliding friction ``mu``), as MJCF."""
    return f"""<mujoco><option gravity="0 0 -{G0}" {option}/><worldbody>
<geom name="floor" type="plane" size="5 5 .1" friction="{mu} 0 0"/>
<body name="box" pos="0 0 {Z0}" euler="{' '.join(map(str, EULER))}"><freejoint/>
  <geom name="cube" type="box" size="{' '.join(map(str, BOX_HALF))}" mass="{BOX_M}"
        friction="{mu} 0 0"/>
</body></worldbody></mujoco>"""


def inertia() -> np.ndarray:
    a, b, c = BOX_HALF
    return BOX_M / 3 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])


def free_flight_to_impact(x0, e0):
    """The flight from the centroid ``x0`` and Euler parameters ``e0`` with ``V0``, ``W0`` to
    the first corner reaching ``z = 0``: ``(t, corner index, x, v, R, w_world)`` there."""
    J = inertia()

    def rhs(t, y):
        w = y[10:13]
        return np.concatenate([y[3:6], [0.0, 0.0, -G0], e_rate(y[6:10], w),
                               -np.cross(w, J * w) / J])

    def corner_height(k):
        def ev(t, y):
            return y[2] + (rot(y[6:10]) @ CORNERS[k])[2]
        ev.terminal, ev.direction = True, -1
        return ev

    y0 = np.concatenate([x0, V0, e0, rot(e0).T @ W0])
    sol = solve_ivp(rhs, (0.0, 2.0), y0, method="DOP853", rtol=1e-13, atol=1e-13,
                    events=[corner_height(k) for k in range(8)])
    k = int(np.argmin([te[0] if len(te) else np.inf for te in sol.t_events]))
    y = sol.y_events[k][0]
    R = rot(y[6:10])
    return sol.t_events[k][0], k, y[:3], y[3:6], R, R @ y[10:13]


def corner_impulse(k, v, R, w, e: float, sticking: bool):
    """``(P, u)``: the impulse at corner ``k`` (frictionless, or sticking) and the corner's
    velocity before it, at the state ``(v, R, w)`` of :func:`free_flight_to_impact`."""
    r = R @ CORNERS[k]
    Iw = R @ np.diag(inertia()) @ R.T
    rx = np.array([[0, -r[2], r[1]], [r[2], 0, -r[0]], [-r[1], r[0], 0]])
    K = np.eye(3) / BOX_M - rx @ np.linalg.solve(Iw, rx)
    u = v + np.cross(w, r)
    n = np.array([0.0, 0.0, 1.0])
    if sticking:
        return np.linalg.solve(K, -e * u[2] * n - u), u
    return -(1 + e) * u[2] / (n @ K @ n) * n, u


def after(k, v, R, w, P):
    """The centroid's velocity, the angular velocity and the kinetic energy after ``P``."""
    r = R @ CORNERS[k]
    Iw = R @ np.diag(inertia()) @ R.T
    v1, w1 = v + P / BOX_M, w + np.linalg.solve(Iw, np.cross(r, P))
    return v1, w1, 0.5 * BOX_M * v1 @ v1 + 0.5 * w1 @ Iw @ w1
