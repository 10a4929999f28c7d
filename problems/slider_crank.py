"""In-line slider-crank in the vertical plane, in body coordinates.

A crank (uniform rod, mass ``m1``, length ``r``) pinned to the ground at the
origin, a connecting rod (uniform rod, ``m2``, ``L > r``) pinned to the crank
tip ``B`` and to a slider (``m3``, centroidal inertia ``J3``) that moves along
the x-axis (a prismatic joint with the ground: ``y3 = 0``, ``phi3 = 0``).
Gravity ``g`` along ``-y``, a constant torque ``tau`` on the crank (``0`` for
free motion). Crank angle ``th`` from ``+x``, counter-clockwise.

Reference: with ``s = sin th``, ``c = cos th``, ``D = sqrt(L^2 - r^2 s^2)`` the
kinematics of the branch with the slider on the ``+x`` side are

* slider ``x3 = r c + D``;
* rod centroid ``G2 = (r c + D/2, r s/2)``, rod angle ``phi2 = -asin(r s / L)``,
  ``phi2' = -r c th' / D``;

so ``T = 1/2 m(th) th'^2`` with
``m(th) = m1 r^2/3 + m2 |dG2/dth|^2 + J2 (dphi2/dth)^2 + m3 (dx3/dth)^2``
(``J2 = m2 L^2/12``), ``V = g s r (m1 + m2)/2``, and Lagrange's equation in
``th`` is ``m(th) th'' + 1/2 m'(th) th'^2 = tau - V'(th)``, with ``m'`` from the
second derivatives of the kinematics (written out in :func:`reduced_mass`),
integrated with DOP853 at ``rtol = atol = 1e-13``.

Settings: DOP853, ``rtol = atol = 1e-11``, projected vector field
(:class:`gaussopt.multibody.LeastSquaresProjection`). Measured over the
default 5 s (``tau = 4``: the crank swings between ``pi/6`` and ``-1.39``):
``max |th - th_ref|`` 1.9e-10, slider 2.0e-11 m, energy drift 8e-12 J,
2700 right-hand sides, ~3 s. Free motion (``tau = 0``) swings through both
dead centres (``th = 0``, ``-pi``) to ``-7 pi/6``: 2.0e-10 over 5 s.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
import gaussopt.multibody as mb

G = 9.81
DEFAULTS = dict(r=0.3, L=0.8, m1=1.5, m2=2.0, m3=0.7, J3=0.004, tau=4.0, g=G)


def model(r=0.3, L=0.8, m1=1.5, m2=2.0, m3=0.7, J3=0.004, tau=4.0, g=G) -> mb.Model:
    """Bodies ``crank``, ``rod``, ``slider``; joints: ground pin, two pins, prismatic."""
    if not L > r > 0:
        raise go.ModelError(f"the rod must be longer than the crank: need `L` > `r` > 0, found "
                            f"L={L!r}, r={r!r}.")
    crank = mb.Body.uniform_rod("crank", m1, r)
    rod = mb.Body.uniform_rod("rod", m2, L)
    slider = mb.Body("slider", m3, J3)
    joints = [mb.Revolute(None, (0.0, 0.0), crank, (-r / 2, 0.0)),
              mb.Revolute(crank, (r / 2, 0.0), rod, (-L / 2, 0.0)),
              mb.Revolute(rod, (L / 2, 0.0), slider, (0.0, 0.0)),
              mb.Prismatic(None, (0.0, 0.0), (1.0, 0.0), slider, (0.0, 0.0))]
    forces = [mb.Torque(crank, tau)] if tau else []
    return mb.Model([crank, rod, slider], joints, forces, gravity=(0.0, -g), name="slider_crank")


def kinematics(th, r=0.3, L=0.8):
    """Positions and their first and second derivatives with respect to ``th``.

    Returns
    -------
    dict of ndarray
        ``x3, dx3, ddx3`` (slider), ``G2, dG2, ddG2`` (rod centroid, shape (2, ...)),
        ``phi2, dphi2, ddphi2`` (rod angle).
    """
    th = np.asarray(th) + 0.0              # float, or complex (complex-step checks)
    s, c = np.sin(th), np.cos(th)
    D = np.sqrt(L * L - r * r * s * s)
    dD = -r * r * s * c / D
    ddD = -r * r * (c * c - s * s) / D - r ** 4 * s * s * c * c / D ** 3
    x3, dx3, ddx3 = r * c + D, -r * s + dD, -r * c + ddD
    G2 = np.array([r * c + D / 2, r * s / 2])
    dG2 = np.array([-r * s + dD / 2, r * c / 2])
    ddG2 = np.array([-r * c + ddD / 2, -r * s / 2])
    phi2 = -np.arcsin(r * s / L)
    dphi2 = -r * c / D
    ddphi2 = r * s / D + r * c * dD / (D * D)
    return dict(x3=x3, dx3=dx3, ddx3=ddx3, G2=G2, dG2=dG2, ddG2=ddG2,
                phi2=phi2, dphi2=dphi2, ddphi2=ddphi2)


def reduced_mass(th, r=0.3, L=0.8, m1=1.5, m2=2.0, m3=0.7, **_):
    """``m(th)`` and ``m'(th)`` of ``T = 1/2 m(th) th'^2``."""
    k = kinematics(th, r, L)
    J2 = m2 * L * L / 12.0
    mass = (m1 * r * r / 3.0 + m2 * (k["dG2"] ** 2).sum(axis=0) + J2 * k["dphi2"] ** 2
            + m3 * k["dx3"] ** 2)
    dmass = 2.0 * (m2 * (k["dG2"] * k["ddG2"]).sum(axis=0) + J2 * k["dphi2"] * k["ddphi2"]
                   + m3 * k["dx3"] * k["ddx3"])
    return mass, dmass


def reference(t, th0=np.pi / 6, w0=0.0, r=0.3, L=0.8, m1=1.5, m2=2.0, m3=0.7, tau=4.0, g=G,
              **_) -> np.ndarray:
    """``th(t), th'(t)`` of the reduced one-DOF equation, shape (2, len(t))."""
    t = np.atleast_1d(np.asarray(t, dtype=float))

    def f(_, y):
        th, w = y
        mass, dmass = reduced_mass(th, r, L, m1, m2, m3)
        dV = g * np.cos(th) * r * (m1 + m2) / 2.0
        return [w, (tau - dV - 0.5 * dmass * w * w) / mass]

    sol = solve_ivp(f, (0.0, max(float(t.max()), 0.0)), [th0, w0], method="DOP853",
                    rtol=1e-13, atol=1e-13, dense_output=True)
    return sol.sol(t)


def configuration(th, r=0.3, L=0.8) -> np.ndarray:
    """Body coordinates at crank angle ``th`` (slider on the ``+x`` side), shape (9,)."""
    k = kinematics(th, r, L)
    return np.array([r / 2 * np.cos(th), r / 2 * np.sin(th), th,
                     k["G2"][0], k["G2"][1], k["phi2"], k["x3"], 0.0, 0.0])


def build(th0: float = np.pi / 6, w0: float = 0.0, t_end: float = 5.0, **params) -> go.Problem:
    """The slider-crank released at crank angle ``th0`` with rate ``w0``.

    Parameters
    ----------
    th0 : float
        Initial crank angle from +x, counter-clockwise [rad].
    w0 : float
        Initial crank rate [rad/s].
    t_end : float
        End time [s].
    r : float, default 0.3
        Crank length [m].
    L : float, default 0.8
        Connecting-rod length [m]; must exceed ``r``.
    m1, m2 : float, default 1.5, 2.0
        Masses of the crank and the connecting rod (uniform rods) [kg].
    m3 : float, default 0.7
        Mass of the slider [kg].
    J3 : float, default 0.004
        Centroidal moment of inertia of the slider [kg m^2].
    tau : float, default 4.0
        Constant torque on the crank [N m] (0: free motion).
    g : float, default 9.81
        Gravitational acceleration [m/s^2].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``th`` (crank angle [rad]) and ``x_slider`` [m];
        ``reference(t)`` the same from the reduced one-coordinate equation.
    """
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise go.ModelError(f"unknown parameters {sorted(unknown)}; expected some of {sorted(DEFAULTS)}.")
    p = {**DEFAULTS, **params}
    mdl = model(**p)
    q0 = configuration(th0, p["r"], p["L"])
    v0 = mdl.velocities(q0, {"crank.phi": w0})
    i_th, i_x = mdl.index("crank.phi"), mdl.index("slider.x")

    def outputs(q, v):
        q = np.atleast_2d(q)
        return {"th": q[:, i_th], "x_slider": q[:, i_x]}

    def ref(t):
        th = reference(t, th0=th0, w0=w0, **p)[0]
        return {"th": th, "x_slider": kinematics(th, p["r"], p["L"])["x3"]}

    prob = go.Problem(
        name="slider_crank", system=mdl.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description="In-line slider-crank in body coordinates (crank, connecting rod, slider on "
                    "a prismatic joint), gravity and a constant crank torque; outputs the crank "
                    "angle and the slider position.",
        settings={"method": "DOP853", "rtol": 1e-11, "atol": 1e-11,
                  "stabilization": mb.LeastSquaresProjection()},
        # for figures: body coordinates in m and rad; pins' rows in m, the prismatic
        # joint's in m and rad
        units={**{c: ("rad" if c.endswith(".phi") else "m") for c in mdl.system.coordinates},
               "th": "rad", "x_slider": "m", "energy": "J", "length": "m", "constraints": ("m", "rad")},
        outputs=outputs, reference=ref, params={"th0": th0, "w0": w0, "t_end": t_end, **p})
    prob.model = mdl
    return prob
