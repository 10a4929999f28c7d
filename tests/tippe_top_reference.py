"""The tippe top's reference: the Newton-Euler equations of the sliding and of the rolling
top, numpy and scipy only (used by tests/test_tippe_top.py and benchmarks/contact.py).

The top is a rigid body (mass ``m``, centroid ``x``, rotation ``R`` from Euler parameters
``e = (w, x, y, z)``, body angular velocity ``w``, inertia ``J = diag(A, A, C)`` about the
centroid) touching the floor at the lowest point of its sphere, ``rho = R (0, 0, a) - r
e_z`` from the centroid:

* sliding: the contact force is ``N (e_z - mu u/|u|)`` with ``u`` the contact point's
  velocity ``v + R w x rho`` (horizontal); ``m x'' = f - m g e_z``, ``J w' + w x J w =
  R^T (rho x f)``; ``N`` from the sphere's centre staying at height ``r`` (its second
  derivative, linear in ``N``). It ends where ``u`` vanishes (``|u|`` falls to 1e-11 m/s:
  1.3e-11 s early at the slip's deceleration of 0.8 m/s^2).
* rolling: the contact point's velocity stays zero, ``v + R w x rho = 0``; its derivative
  ``x'' + (R w') x rho + (R w) x ((R w) x R (0, 0, a)) = 0`` (``rho' = (R w) x R (0, 0,
  a)``: the contact point moves over the sphere) gives the three components of the contact
  force (one linear solve); the force must stay inside the cone, ``|f_t| <= mu f_n``.

scipy's DOP853 integrates both at rtol = 1e-13.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp

#: Leine and Glocker's tippe top as Siconos's example writes it (SI units), written again
#: here (the test checks the problem's parameters against them)
PARAMETERS = {"m": 6e-3, "r": 0.015, "a": 0.003, "r_s": 0.005, "l_s": 0.016, "A": 8e-7,
              "C": 7e-7, "mu": 0.3, "g": 9.81}
m, r, a, A, C, mu, g = (PARAMETERS[k] for k in ("m", "r", "a", "A", "C", "mu", "g"))
J = np.diag([A, A, C])
J_INV = np.linalg.inv(J)
EZ = np.array([0.0, 0.0, 1.0])
THETA0, SPIN, T_END = 0.1, 180.0, 1.2


def rot(e):
    e0, e1, e2, e3 = e / np.linalg.norm(e)
    return np.array([[1 - 2 * (e2 * e2 + e3 * e3), 2 * (e1 * e2 - e0 * e3), 2 * (e1 * e3 + e0 * e2)],
                     [2 * (e1 * e2 + e0 * e3), 1 - 2 * (e1 * e1 + e3 * e3), 2 * (e2 * e3 - e0 * e1)],
                     [2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1), 1 - 2 * (e1 * e1 + e2 * e2)]])


def e_rate(e, w_body):
    """``e' = 1/2 e (x) (0, w)`` for the body angular velocity ``w``."""
    e0, e1, e2, e3 = e
    w1, w2, w3 = w_body
    return 0.5 * np.array([-e1 * w1 - e2 * w2 - e3 * w3, e0 * w1 + e2 * w3 - e3 * w2,
                           e0 * w2 + e3 * w1 - e1 * w3, e0 * w3 + e1 * w2 - e2 * w1])


def geometry(y):
    """``(R, omega_world, s, rho, u)``: s = R (0, 0, a) (centroid to the sphere's centre)."""
    v, e, w = y[3:6], y[6:10], y[10:13]
    R = rot(e)
    s = R @ np.array([0.0, 0.0, a])
    rho = s - r * EZ
    om = R @ w
    return R, om, s, rho, v + np.cross(om, rho)


def motion(R, w, f):
    """``(x'', w')`` under the contact force ``f`` at rho and gravity."""
    return f / m - g * EZ, J_INV @ (R.T @ f - np.cross(w, J @ w))


def sliding(y):
    """``(N, x'', w', u)`` of the sliding top."""
    R, om, s, rho, u = geometry(y)
    w = y[10:13]
    d = np.array([u[0], u[1], 0.0]) / math.hypot(u[0], u[1])
    f1 = EZ - mu * d
    a0, w0 = motion(R, w, np.zeros(3))
    w0 = J_INV @ (-np.cross(w, J @ w))
    aN, wN = f1 / m, J_INV @ (R.T @ np.cross(rho, f1))
    # the sphere's centre x + s stays at height r: (x + s)_z'' = 0, linear in N
    c0 = a0[2] + np.cross(R @ w0, s)[2] + np.cross(om, np.cross(om, s))[2]
    cN = aN[2] + np.cross(R @ wN, s)[2]
    N = -c0 / cN
    return N, a0 + N * aN, w0 + N * wN, u


def rolling(y):
    """``(f, x'', w')`` of the rolling top (f the contact force)."""
    R, om, s, rho, _ = geometry(y)
    w = y[10:13]

    def slip_rate(f):
        acc = f / m - g * EZ
        wd = J_INV @ (R.T @ np.cross(rho, f) - np.cross(w, J @ w))
        return acc + np.cross(R @ wd, rho) + np.cross(om, np.cross(om, s))
    b = slip_rate(np.zeros(3))
    K = np.column_stack([slip_rate(col) - b for col in np.eye(3)])
    f = np.linalg.solve(K, -b)
    acc = f / m - g * EZ
    return f, acc, J_INV @ (R.T @ np.cross(rho, f) - np.cross(w, J @ w))


def rhs_sliding(t, y):
    _, acc, wd, _ = sliding(y)
    return np.concatenate([y[3:6], acc, e_rate(y[6:10], y[10:13]), wd])


def rhs_rolling(t, y):
    _, acc, wd = rolling(y)
    return np.concatenate([y[3:6], acc, e_rate(y[6:10], y[10:13]), wd])


def reference(theta0=THETA0, spin=SPIN, t_end=T_END):
    """``(t_stop, sliding solution, rolling solution)``: launched tilted by ``theta0`` about
    the world y axis, spinning at ``spin`` about the vertical, centroid at rest; both
    solutions dense (scipy's ``OdeSolution``)."""
    e0 = np.array([math.cos(theta0 / 2), 0.0, math.sin(theta0 / 2), 0.0])
    y0 = np.concatenate([[0.0, 0.0, r - a * math.cos(theta0)], np.zeros(3), e0,
                         rot(e0).T @ np.array([0.0, 0.0, spin])])

    def stop(t, y):
        u = geometry(y)[4]
        return math.hypot(u[0], u[1]) - 1e-11
    stop.terminal, stop.direction = True, -1

    def cone(t, y):
        f = rolling(y)[0]
        return mu * f[2] - math.hypot(f[0], f[1])
    cone.terminal, cone.direction = True, -1
    kw = dict(method="DOP853", rtol=1e-13, atol=1e-15, dense_output=True)
    s1 = solve_ivp(rhs_sliding, (0.0, t_end), y0, events=stop, **kw)
    if s1.status != 1:
        raise RuntimeError("the reference's top did not stop sliding before t_end")
    ts = float(s1.t_events[0][0])
    s2 = solve_ivp(rhs_rolling, (ts, t_end), s1.y_events[0][0], events=cone, **kw)
    if s2.status != 0:                    # rolls on: the friction stays inside its cone
        raise RuntimeError("the reference's rolling top reached its friction cone")
    return ts, s1, s2


def state_of(q, v):
    """The reference's state ``(x, v, e, w_body)`` of gaussopt's ``(q, v)`` (the free joint:
    position, Euler parameters and their rates)."""
    e, de = q[3:7], v[3:7]
    e0, e1, e2, e3 = e / np.linalg.norm(e)
    d0, d1, d2, d3 = de / np.linalg.norm(e)
    w_body = 2 * np.array([e0 * d1 - e1 * d0 - e2 * d3 + e3 * d2,
                           e0 * d2 - e2 * d0 - e3 * d1 + e1 * d3,
                           e0 * d3 - e3 * d0 - e1 * d2 + e2 * d1])
    return np.concatenate([q[:3], v[:3], e, w_body])
