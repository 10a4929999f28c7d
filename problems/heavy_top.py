"""The heavy symmetric top (Lagrange top): one spatial rigid body pinned at its tip.

An axisymmetric body of mass ``m`` whose centroid lies on its symmetry axis (the
body z-axis) at the distance ``l`` from its tip; the tip is held at the origin by a
spherical joint with the ground (:class:`gaussopt.multibody.spatial.Spherical`),
gravity ``g`` along ``-z``. ``A`` is the transverse and ``C`` the axial moment of
inertia about the centroid; about the tip the transverse one is ``A' = A + m l^2``.
The body's pose is seven Euler-parameter coordinates (a singular mass matrix).
Initial state from the Euler angles ``(phi, theta, psi)`` (z-x-z: precession,
nutation, spin) and their rates.

Reference (Goldstein, *Classical Mechanics*, 3rd ed., sec. 5.7). With
``u = cos(theta)`` the motion has three integrals, the momenta about the vertical
and about the symmetry axis and the energy::

    p_psi = C (psi' + phi' u)            = A' a
    p_phi = A' phi' (1 - u^2) + p_psi u  = A' b
    E     = A'/2 (theta'^2 + phi'^2 (1 - u^2)) + p_psi^2 / (2 C) + m g l u

so that ``u'^2 = f(u) = (1 - u^2)(alpha - beta u) - (b - a u)^2``, ``alpha =
(2 E - p_psi^2 / C) / A'``, ``beta = 2 m g l / A'``. The nutation limits
``theta_min, theta_max`` are ``arccos`` of the two roots of the cubic ``f`` in
``[-1, 1]`` (:func:`nutation_limits`: ``numpy.roots``, polished by Newton's method).
``reference(t)`` integrates Lagrange's equations in the Euler angles, with
``phi'`` and ``psi'`` from the two momenta::

    A' theta'' = A' phi'^2 sin(theta) cos(theta) - p_psi phi' sin(theta) + m g l sin(theta)

by DOP853 at ``rtol = atol = 1e-13`` (:func:`euler_angle_reference`).

Measured (defaults, 5 s, DOP853 at ``rtol = atol = 1e-12``, projection; 567 steps):
``theta`` within 2.3e-11 rad of the reference; the 11 nutation extremes (located as
zeros of ``d cos(theta)/dt``, :func:`cos_theta_rate`) within 1.5e-11 rad of the cubic's
limits; energy within 4e-10 J, the momenta within 1e-11 kg m^2/s.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable

from gaussopt_problems._rigid import body_angular_velocity, euler_zxz, quaternion, quaternion_rate, rotation

G = 9.81


def integrals(m: float, l: float, A: float, C: float, g: float, theta: float, dphi: float,
              dtheta: float, dpsi: float) -> dict:
    """The top's integrals from its Euler angles and rates (the angle ``phi`` and
    ``psi`` do not enter): ``p_psi``, ``p_phi`` [kg m^2/s], ``E`` [J] and the
    constants ``a, b, alpha, beta`` of the cubic (see the module docstring)."""
    At = A + m * l**2
    u = np.cos(theta)
    p_psi = C * (dpsi + dphi * u)
    p_phi = At * dphi * (1 - u**2) + p_psi * u
    E = 0.5 * At * (dtheta**2 + dphi**2 * (1 - u**2)) + p_psi**2 / (2 * C) + m * g * l * u
    return integrals_of(m, l, A, C, g, p_psi, p_phi, E)


def integrals_of(m: float, l: float, A: float, C: float, g: float, p_psi: float, p_phi: float,
                 E: float) -> dict:
    """The integrals (see :func:`integrals`) from the momenta ``p_psi``, ``p_phi`` and
    the energy ``E``."""
    At = A + m * l**2
    return {"p_psi": p_psi, "p_phi": p_phi, "E": E, "a": p_psi / At, "b": p_phi / At,
            "alpha": (2 * E - p_psi**2 / C) / At, "beta": 2 * m * g * l / At}


def cubic(k: dict) -> np.ndarray:
    """Coefficients (highest power first) of ``f(u) = (1 - u^2)(alpha - beta u) -
    (b - a u)^2`` for the integrals ``k`` (:func:`integrals`)."""
    a, b, al, be = k["a"], k["b"], k["alpha"], k["beta"]
    return np.array([be, -al - a**2, -be + 2 * a * b, al - b**2])


def nutation_limits(k: dict) -> tuple[float, float]:
    """``(theta_min, theta_max)`` [rad]: ``arccos`` of the two roots of the cubic in
    ``[-1, 1]``, from ``numpy.roots`` polished by three Newton steps on ``f``.

    Raises
    ------
    ModelError
        The cubic does not have two real roots in ``[-1, 1]``: the integrals do not come
        from a real state, or the top passes through the vertical (``b = +-a``, a root at
        ``u = +-1``; the Euler angles are singular there).
    """
    c = cubic(k)
    r = np.roots(c)
    r = np.sort(r[np.abs(r.imag) < 1e-9].real)
    inside = r[(r >= -1 - 1e-9) & (r <= 1 + 1e-9)]
    if len(inside) != 2:
        raise go.ModelError(f"`k`: the top's cubic f(u) has the real roots {r.tolist()}, "
                            "expected two in [-1, 1]; pass the integrals of a real state "
                            "(heavy_top.integrals).")
    dc = np.polyder(c)
    out = []
    for u in inside:
        for _ in range(3):
            d = np.polyval(dc, u)
            if d != 0:
                u = u - np.polyval(c, u) / d
        out.append(float(np.clip(u, -1.0, 1.0)))
    u_lo, u_hi = out
    return float(np.arccos(u_hi)), float(np.arccos(u_lo))


def euler_angle_reference(t, m: float, l: float, A: float, C: float, g: float, phi0: float,
                          theta0: float, psi0: float, dphi0: float, dtheta0: float,
                          dpsi0: float, dense: bool = False):
    """``(phi, theta, psi, theta')`` at ``t`` from Lagrange's equations in the Euler
    angles (``phi'``, ``psi'`` from the conserved momenta), DOP853 at ``rtol = atol
    = 1e-13``; shape (4, len(t)), or the solve_ivp solution when ``dense``."""
    k = integrals(m, l, A, C, g, theta0, dphi0, dtheta0, dpsi0)
    At = A + m * l**2
    p_psi, p_phi = k["p_psi"], k["p_phi"]

    def rhs(_, y):
        phi, th, psi, dth = y
        s, c = np.sin(th), np.cos(th)
        dphi = (p_phi - p_psi * c) / (At * s**2)
        dpsi = p_psi / C - dphi * c
        ddth = dphi**2 * s * c - p_psi * dphi * s / At + m * g * l * s / At
        return [dphi, dth, dpsi, ddth]

    t = np.atleast_1d(np.asarray(t, dtype=float))
    sol = solve_ivp(rhs, (0.0, float(t.max())), [phi0, theta0, psi0, dtheta0], method="DOP853",
                    rtol=1e-13, atol=1e-13, dense_output=True)
    return sol if dense else sol.sol(t)


def initial_state(m: float, l: float, phi0: float, theta0: float, psi0: float, dphi0: float,
                  dtheta0: float, dpsi0: float) -> tuple[np.ndarray, np.ndarray]:
    """``(q0, v0)`` of the body (centroid, Euler parameters) from the Euler angles and
    rates: ``R = Rz(phi) Rx(theta) Rz(psi)``, the body-frame angular velocity
    ``(phi' s_theta s_psi + theta' c_psi, phi' s_theta c_psi - theta' s_psi,
    phi' c_theta + psi')``, centroid ``l R e_z`` and its velocity ``w x (l R e_z)``."""
    R = euler_zxz(phi0, theta0, psi0)
    p = quaternion(R)
    st, ct, sp_, cp = np.sin(theta0), np.cos(theta0), np.sin(psi0), np.cos(psi0)
    wb = np.array([dphi0 * st * sp_ + dtheta0 * cp, dphi0 * st * cp - dtheta0 * sp_,
                   dphi0 * ct + dpsi0])
    r = l * R[:, 2]
    w = R @ wb
    q0 = np.concatenate([r, p])
    v0 = np.concatenate([np.cross(w, r), quaternion_rate(p, wb)])
    return q0, v0


def observables(q: np.ndarray, v: np.ndarray, m: float, l: float, A: float, C: float,
                g: float) -> dict:
    """Quantities of the simulated states (shape (N, 7)), from this module's own
    quaternion formulas: ``theta`` (nutation [rad]), the centroid ``x, y, z`` [m],
    ``p_phi`` (angular momentum about the vertical through the tip), ``p_psi``
    (about the symmetry axis) [kg m^2/s] and the energy ``E`` [J]."""
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    R = rotation(q[:, 3:7])
    wb = body_angular_velocity(q[:, 3:7], v[:, 3:7])
    Jb = np.array([A, A, C])
    Lc = np.einsum("nij,nj->ni", R, Jb * wb)                  # about the centroid, world
    Ltip = Lc + m * np.cross(q[:, :3], v[:, :3])               # about the tip (the origin)
    ez = R[:, :, 2]
    E = 0.5 * m * np.einsum("ij,ij->i", v[:, :3], v[:, :3]) + 0.5 * np.einsum(
        "ij,ij->i", wb, Jb * wb) + m * g * q[:, 2]
    return {"theta": np.arccos(np.clip(R[:, 2, 2], -1.0, 1.0)), "x": q[:, 0], "y": q[:, 1],
            "z": q[:, 2], "p_phi": Ltip[:, 2], "p_psi": np.einsum("ij,ij->i", Ltip, ez),
            "E": E}


def cos_theta_rate(t: float, q: np.ndarray, v: np.ndarray) -> float:
    """``d/dt cos(theta)`` with ``cos(theta) = R_zz = (e0^2 - e1^2 - e2^2 + e3^2) / |p|^2``:
    an event function whose zeros are the nutation extremes."""
    p, dp = q[3:7], v[3:7]
    n = p @ p
    num = p[0]**2 - p[1]**2 - p[2]**2 + p[3]**2
    dnum = 2 * (p[0] * dp[0] - p[1] * dp[1] - p[2] * dp[2] + p[3] * dp[3])
    return float(dnum / n - num * 2 * (p @ dp) / n**2)


@rebuildable        # its System pickles as this call
def build(m: float = 1.5, l: float = 0.2, A: float = 0.008, C: float = 0.012, g: float = G,
          theta0: float = 0.6, dphi0: float = 2.0, dtheta0: float = 1.0, dpsi0: float = 40.0,
          t_end: float = 5.0) -> go.Problem:
    """The heavy symmetric top (defaults: nutation between 0.572 and 1.968 rad).

    Parameters
    ----------
    m : float, > 0
        Mass [kg].
    l : float, > 0
        Distance from the tip to the centroid [m].
    A : float, > 0
        Transverse moment of inertia about the centroid [kg m^2].
    C : float, > 0
        Axial moment of inertia [kg m^2].
    g : float
        Gravitational acceleration (along -z) [m/s^2].
    theta0 : float, > 0, < 3.14159
        Initial nutation angle from the upward vertical [rad].
    dphi0 : float
        Initial precession rate [rad/s].
    dtheta0 : float
        Initial nutation rate [rad/s].
    dpsi0 : float
        Initial spin rate (relative, the Euler angle's) [rad/s].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``theta`` [rad] and the centroid ``x, y, z`` [m] (also the
        integrals ``p_phi``, ``p_psi``, ``E``); ``reference(t)``: ``theta, x, y, z``
        from the Euler-angle equations. ``model`` is the spatial Model.
    """
    import gaussopt.multibody.spatial as sp

    phi0, psi0 = 0.3, 0.0
    q0, v0 = initial_state(m, l, phi0, theta0, psi0, dphi0, dtheta0, dpsi0)
    R0 = rotation(q0[3:7])
    body = sp.Body("top", m, (A, A, C), position=q0[:3], orientation=R0)
    model = sp.Model([body], [sp.Spherical(None, "top", (0.0, 0.0, 0.0))],
                     gravity=(0.0, 0.0, -g), name="heavy_top")
    k = integrals(m, l, A, C, g, theta0, dphi0, dtheta0, dpsi0)
    th_min, th_max = nutation_limits(k)

    def outputs(q, v):
        return observables(q, v, m, l, A, C, g)

    def reference(t):
        phi, th, _, _ = euler_angle_reference(t, m, l, A, C, g, phi0, theta0, psi0, dphi0,
                                              dtheta0, dpsi0)
        return {"theta": th, "x": l * np.sin(th) * np.sin(phi),
                "y": -l * np.sin(th) * np.cos(phi), "z": l * np.cos(th)}

    def draw(ax, q):
        ax.plot([0.0, q[0]], [0.0, q[2]], "-o", color="C0", lw=3)
        ax.set_aspect("equal")
        return ax

    return go.Problem(
        name="heavy_top", system=model.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description=f"Heavy symmetric (Lagrange) top pinned at its tip by a spherical joint, "
                    f"Euler-parameter coordinates; nutation between {th_min:.10f} and "
                    f"{th_max:.10f} rad (roots of the cubic of its integrals).",
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12,
                  "stabilization": go.Projection()},
        solvers=("closed_form", "lagrange"),
        outputs=outputs, reference=reference, draw=draw, model=model,
        params={"m": m, "l": l, "A": A, "C": C, "g": g, "theta0": theta0, "dphi0": dphi0,
                "dtheta0": dtheta0, "dpsi0": dpsi0},
        units={"theta": "rad", "x": "m", "y": "m", "z": "m", "p_phi": "kg m^2/s",
               "p_psi": "kg m^2/s", "E": "J", "energy": "J", "length": "m"})
