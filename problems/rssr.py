"""A spatial RSSR four-bar: revolute - spherical - spherical - revolute.

Three uniform rods (cylinders of radius ``RADIUS`` = 1 cm):

* the crank (mass ``m1``, length ``r1``) turns about the ground axis ``a = x``
  through ``A = 0`` (a revolute joint); its tip is ``P = A + r1 (y cos th + z sin th)``;
* the rocker (``m2``, ``r2``) turns about the ground axis ``b = y`` through
  ``B = (0.3, 0.1, 0.5)`` m -- skew to ``a`` -- with its tip at ``Q = B + r2 (x cos phi
  - z sin phi)``;
* the coupler (``m3``, length ``L``) joins ``P`` and ``Q`` by a spherical joint at
  each end.

Gravity ``g`` along ``-z``; a constant torque ``tau`` on the crank about ``a``; released
at the crank angle ``theta0`` on the rocker's branch ``phi`` in ``(30, 60)`` degrees,
from rest, or, with ``drive != 0``, the crank driven at the constant rate ``drive``
(:class:`gaussopt.multibody.spatial.DrivenAngle` with its revolute joint).

The coupler with spherical joints at both ends can spin about its own axis: the
mechanism has two degrees of freedom (Gruebler-Kutzbach ``6 * 3 - (5 + 3 + 3 + 5) =
2``, and the Jacobian's rank agrees). The coupler is a cylinder, axisymmetric about its
axis, and the joint forces act on that axis and gravity at its centroid: no torque about
the axis, so by Euler's equation its axial angular velocity ``w_a`` is constant -- zero
here, started at zero. The spin is a true degree of freedom; the model keeps it (the
coupler's axial moment ``I_a = m3 RADIUS^2 / 2 > 0``, so the mass matrix's only singular
directions are the Euler parameters' radial ones). It does not change the crank's
motion either: with the spin angle ``psi`` cyclic, ``w_a = psi' + c(th) th'`` and the
Routhian ``1/2 mu th'^2 + I_a w_a c(th) th' - V - ...`` whose middle term, with one
remaining coordinate, is the time derivative of a function of ``th`` (it only changes the
joints' reactions, which supply the gyroscopic torque ``I_a w_a e'``). The reference
therefore holds for any constant spin; it sets it to zero.

Reference (reduced one-degree-of-freedom equations in the crank angle, this module's own):
the loop closure ``|Q(phi) - P(th)| = L`` solved in closed form, ``phi = alpha(th) -
arccos(K / rho)`` (``D = P - B``, ``K = (|D|^2 + r2^2 - L^2) / (2 r2)``, ``rho, alpha``
the polar form of ``(D.x, -D.z)``), ``phi_th`` and ``phi_thth`` from the derivatives of
``d.d_th = 0`` (``d = Q - P``). Each body's centroid velocity and angular velocity are
``J_k(th) th'`` and ``w_k(th) th'`` (the coupler's ``w = d x d_th / L^2``, its axial
spin being zero), so ``T = 1/2 mu(th) th'^2``, ``mu = sum m_k |J_k|^2 + w_k.I_k w_k``,
and Lagrange's equation is ``mu th'' + c th'^2 = tau - V_th``, ``c = sum m_k J_k.J_k,th
+ w_k.I_k w_k,th`` (``= mu_th / 2``), integrated by DOP853 at ``rtol = atol = 1e-13``
(:func:`reduced_reference`).

Measured (defaults, 5 s, DOP853 at ``rtol = atol = 1e-11``, projection; 466 steps; the
crank swings six times through about -3.3 rad): crank angle within 3.0e-10 rad and the
coupler's centroid within 1.8e-11 m of the reference (1.4e-12 rad at ``rtol = 1e-13``);
the coupler's axial spin stays below 3e-11 rad/s. Driven at 3 rad/s: the drive's torque
equals the reduced inverse dynamics ``c(th) th'^2 + V'(th)`` to 9e-15 N m.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable

from gaussopt_problems._rigid import quaternion, quaternion_rate

RADIUS = 0.01                                   # of the three rods [m]
A_POINT, A_AXIS = np.zeros(3), np.array([1.0, 0.0, 0.0])
B_POINT, B_AXIS = np.array([0.3, 0.1, 0.5]), np.array([0.0, 1.0, 0.0])
U1, V1 = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])      # crank plane, V1 = a x U1
U2, V2 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, -1.0])     # rocker plane, V2 = b x U2


def rod_inertia(m: float, length: float) -> np.ndarray:
    """Principal moments of a cylinder (radius ``RADIUS``) about its centroid, its axis
    along the body x-axis: ``(m r^2/2, m (3 r^2 + l^2)/12, m (3 r^2 + l^2)/12)``."""
    t = m * (3 * RADIUS**2 + length**2) / 12
    return np.array([m * RADIUS**2 / 2, t, t])


def _dot(a, b) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a, b) -> tuple:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _comb(*terms) -> tuple:
    """``sum c_k x_k`` of the pairs ``(c_k, x_k)`` (3-vectors as tuples: the reference's
    right-hand side runs on Python floats, ten times faster than on small arrays)."""
    return tuple(sum(c * x[i] for c, x in terms) for i in range(3))


class Kinematics:
    """The RSSR's loop closure and velocity coefficients (see the module docstring).

    Parameters
    ----------
    r1, r2, L : float
        Crank, rocker and coupler lengths [m].
    """

    _A, _B = tuple(A_POINT), tuple(B_POINT)
    _U1, _V1, _U2, _V2 = tuple(U1), tuple(V1), tuple(U2), tuple(V2)

    def __init__(self, r1: float, r2: float, L: float):
        self.r1, self.r2, self.L = r1, r2, L

    def crank(self, th: float) -> tuple:
        """``P, P_th, P_thth`` (3-tuples)."""
        c, s, r = math.cos(th), math.sin(th), self.r1
        return (_comb((1.0, self._A), (r * c, self._U1), (r * s, self._V1)),
                _comb((-r * s, self._U1), (r * c, self._V1)),
                _comb((-r * c, self._U1), (-r * s, self._V1)))

    def rocker(self, phi: float) -> tuple:
        """``Q, Q_phi, Q_phiphi`` (3-tuples)."""
        c, s, r = math.cos(phi), math.sin(phi), self.r2
        return (_comb((1.0, self._B), (r * c, self._U2), (r * s, self._V2)),
                _comb((-r * s, self._U2), (r * c, self._V2)),
                _comb((-r * c, self._U2), (-r * s, self._V2)))

    def rocker_angle(self, th: float) -> float:
        """``phi(th)`` on the branch ``alpha - arccos(K / rho)``.

        Raises
        ------
        ModelError
            No closure at ``th`` (``|K| > rho``): the lengths do not fit the pivots.
        """
        D = _comb((1.0, self.crank(th)[0]), (-1.0, self._B))
        K = (_dot(D, D) + self.r2**2 - self.L**2) / (2 * self.r2)
        du, dv = _dot(D, self._U2), _dot(D, self._V2)
        rho = math.hypot(du, dv)
        if abs(K) > rho:
            raise go.ModelError(
                f"the RSSR does not close at the crank angle {th:g} rad with `r1` = {self.r1:g}, "
                f"`r2` = {self.r2:g}, `L` = {self.L:g} m: the coupler would have to reach "
                f"{abs(K):.6g} m along the rocker's plane, expected at most {rho:.6g} m; "
                "change `L` (or `theta0`) so that the loop closes.")
        return math.atan2(dv, du) - math.acos(K / rho)

    def terms(self, th: float) -> dict:
        """Positions and the derivatives in ``th`` of everything the reference uses, as
        3-tuples (:meth:`state` gives arrays)."""
        P, Pt, Ptt = self.crank(th)
        phi = self.rocker_angle(th)
        Q, Qp, Qpp = self.rocker(phi)
        d = _comb((1.0, Q), (-1.0, P))
        dQ = _dot(d, Qp)
        phit = _dot(d, Pt) / dQ                              # d.d_th = 0
        dt = _comb((phit, Qp), (-1.0, Pt))
        phitt = -(_dot(dt, dt) + phit**2 * _dot(d, Qpp) - _dot(d, Ptt)) / dQ
        dtt = _comb((phit**2, Qpp), (phitt, Qp), (-1.0, Ptt))
        L2 = self.L**2
        return {"P": P, "Q": Q, "phi": phi, "phit": phit, "phitt": phitt,
                "c": [_comb((0.5, self._A), (0.5, P)), _comb((0.5, self._B), (0.5, Q)),
                      _comb((0.5, P), (0.5, Q))],
                "J": [_comb((0.5, Pt)), _comb((0.5 * phit, Qp)),
                      _comb((0.5, Pt), (0.5 * phit, Qp))],
                "Jt": [_comb((0.5, Ptt)), _comb((0.5 * phit**2, Qpp), (0.5 * phitt, Qp)),
                       _comb((0.5, Ptt), (0.5 * phit**2, Qpp), (0.5 * phitt, Qp))],
                "w": [tuple(A_AXIS), _comb((phit, tuple(B_AXIS))),
                      _comb((1 / L2, _cross(d, dt)))],
                "wt": [(0.0, 0.0, 0.0), _comb((phitt, tuple(B_AXIS))),
                       _comb((1 / L2, _cross(d, dtt)))]}

    def state(self, th: float) -> dict:
        """:meth:`terms` with the vectors as arrays, shape (3,)."""
        out = {}
        for k, x in self.terms(th).items():
            if isinstance(x, list):
                out[k] = [np.array(y) for y in x]
            elif isinstance(x, tuple):
                out[k] = np.array(x)
            else:
                out[k] = x
        return out

    def coefficients(self, th: float, masses, inertia) -> tuple[float, float, float]:
        """``mu(th)``, ``c(th)`` (``= mu'(th) / 2``) and ``sum m_k J_k,z`` (``V'(th) / g``)
        of the reduced equation for the masses and the moments about the rotation axes."""
        s = self.terms(th)
        mu = c = vz = 0.0
        for mk, Ik, J, Jt, w, wt in zip(masses, inertia, s["J"], s["Jt"], s["w"], s["wt"]):
            mu += mk * _dot(J, J) + Ik * _dot(w, w)
            c += mk * _dot(J, Jt) + Ik * _dot(w, wt)
            vz += mk * J[2]
        return mu, c, vz


def reduced_reference(t, r1: float, r2: float, L: float, m1: float, m2: float, m3: float,
                      g: float, tau: float, theta0: float, dtheta0: float = 0.0,
                      dense: bool = False):
    """``(th, th')`` at ``t`` (shape (2, len(t))) from Lagrange's equation in the crank
    angle, DOP853 at ``rtol = atol = 1e-13``; the solve_ivp solution when ``dense``.
    The moments about each rod's rotation axis are the transverse ones of
    :func:`rod_inertia` (the crank about ``a``, the rocker about ``b``, the coupler about
    any axis normal to it)."""
    kin = Kinematics(r1, r2, L)
    m = (m1, m2, m3)
    inertia = [rod_inertia(mk, lk)[1] for mk, lk in zip(m, (r1, r2, L))]

    def rhs(_, y):
        mu, c, vz = kin.coefficients(y[0], m, inertia)
        return [y[1], (tau - c * y[1]**2 - g * vz) / mu]

    t = np.atleast_1d(np.asarray(t, dtype=float))
    sol = solve_ivp(rhs, (0.0, float(t.max())), [theta0, dtheta0], method="DOP853",
                    rtol=1e-13, atol=1e-13, dense_output=True)
    return sol if dense else sol.sol(t)


def reduced_energy(th, dth, r1, r2, L, m1, m2, m3, g) -> np.ndarray:
    """``1/2 mu(th) th'^2 + V(th)`` of the reduced model [J] (``V`` from the centroids'
    heights; the torque's work not included)."""
    kin = Kinematics(r1, r2, L)
    m = (m1, m2, m3)
    inertia = [rod_inertia(mk, lk)[1] for mk, lk in zip(m, (r1, r2, L))]
    out = []
    for x, dx in zip(np.atleast_1d(th), np.atleast_1d(dth)):
        mu = kin.coefficients(x, m, inertia)[0]
        out.append(0.5 * mu * dx**2 + g * sum(mk * c[2] for mk, c in zip(m, kin.terms(x)["c"])))
    return np.array(out)


def body_frames(s: dict) -> list:
    """The three rods' body frames, rotation matrices whose columns are the body axes in
    the world: x along the rod (from its pivot, or from ``P`` to ``Q``), z the joint axis
    for the crank (``a``) and the rocker (``b``), and for the coupler y horizontal
    (``e_z x x``, normalized; the coupler is never vertical here)."""
    frames = []
    for x, z in (((s["P"] - A_POINT), A_AXIS), ((s["Q"] - B_POINT), B_AXIS)):
        x = x / np.linalg.norm(x)
        frames.append(np.column_stack([x, np.cross(z, x), z]))
    x = (s["Q"] - s["P"]) / np.linalg.norm(s["Q"] - s["P"])
    y = np.cross(np.array([0.0, 0.0, 1.0]), x)
    y /= np.linalg.norm(y)
    frames.append(np.column_stack([x, y, np.cross(x, y)]))
    return frames


def pose(kin: Kinematics, th: float, dth: float) -> tuple[np.ndarray, np.ndarray, list]:
    """``(q, v, frames)`` of the three bodies (crank, rocker, coupler) at the crank
    angle ``th`` and rate ``dth`` (the coupler's axial spin zero)."""
    s = kin.state(th)
    frames = body_frames(s)
    q, v = [], []
    for k, R in enumerate(frames):
        p = quaternion(R)
        q += [s["c"][k], p]
        v += [s["J"][k] * dth, quaternion_rate(p, R.T @ (s["w"][k] * dth))]
    return np.concatenate(q), np.concatenate(v), frames


def observables(q: np.ndarray, kin: Kinematics) -> dict:
    """From states of shape (N, 21) (crank, rocker, coupler): the crank angle ``theta``
    and the rocker angle ``phi`` [rad] (unwrapped, from their centroids), the coupler's
    centroid ``xc, yc, zc`` [m] and the closure error ``closure`` (``|Q - P| - L`` [m],
    with ``P``, ``Q`` from the two angles)."""
    q = np.atleast_2d(q)
    c1, c2 = q[:, 0:3] - A_POINT, q[:, 7:10] - B_POINT
    th = np.unwrap(np.arctan2(c1 @ V1, c1 @ U1))
    phi = np.unwrap(np.arctan2(c2 @ V2, c2 @ U2))
    P = A_POINT + kin.r1 * (np.outer(np.cos(th), U1) + np.outer(np.sin(th), V1))
    Q = B_POINT + kin.r2 * (np.outer(np.cos(phi), U2) + np.outer(np.sin(phi), V2))
    return {"theta": th, "phi": phi, "xc": q[:, 14], "yc": q[:, 15], "zc": q[:, 16],
            "closure": np.linalg.norm(Q - P, axis=1) - kin.L}


@rebuildable        # its System pickles as this call
def build(r1: float = 0.12, r2: float = 0.3, L: float = 0.6, m1: float = 0.8, m2: float = 1.2,
          m3: float = 0.5, g: float = 9.81, tau: float = 0.0, theta0: float = 0.0,
          drive: float = 0.0, t_end: float = 5.0) -> go.Problem:
    """The RSSR four-bar (defaults: released from rest at ``theta0 = 0`` under gravity).

    Parameters
    ----------
    r1 : float, > 0
        Crank length [m].
    r2 : float, > 0
        Rocker length [m].
    L : float, > 0
        Coupler length [m].
    m1 : float, > 0
        Crank mass [kg].
    m2 : float, > 0
        Rocker mass [kg].
    m3 : float, > 0
        Coupler mass [kg].
    g : float
        Gravitational acceleration (along -z) [m/s^2].
    tau : float
        Constant torque on the crank about its axis ``x`` [N m] (free crank only).
    theta0 : float
        Initial crank angle [rad].
    drive : float
        ``0``: the crank is free; otherwise it is driven at this constant rate [rad/s]
        (a driving constraint, the crank angle ``theta0 + drive t``).
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``theta``, ``phi`` [rad], the coupler centroid ``xc, yc, zc``
        [m], ``closure`` [m]; ``reference(t)``: ``theta``, ``phi``, ``xc, yc, zc`` from
        the reduced equation (or, driven, the closed-form loop closure). ``model`` is the
        spatial Model.
    """
    import gaussopt.multibody.spatial as sp

    kin = Kinematics(r1, r2, L)
    q0, v0, frames = pose(kin, theta0, drive)
    s0 = kin.state(theta0)
    names = ("crank", "rocker", "coupler")
    bodies = [sp.Body(n, mk, rod_inertia(mk, lk), position=q0[7 * k:7 * k + 3],
                      orientation=frames[k])
              for k, (n, mk, lk) in enumerate(zip(names, (m1, m2, m3), (r1, r2, L)))]
    joints = [sp.Revolute(None, "crank", A_POINT, A_AXIS),
              sp.Spherical("crank", "coupler", s0["P"]),
              sp.Spherical("coupler", "rocker", s0["Q"]),
              sp.Revolute(None, "rocker", B_POINT, B_AXIS)]
    forces = []
    if drive:
        joints.append(sp.DrivenAngle(None, "crank", A_AXIS, lambda t: drive * t,
                                     rate=lambda t: drive, acceleration=lambda t: 0.0))
    elif tau:
        forces.append(sp.Torque("crank", tau * A_AXIS))
    model = sp.Model(bodies, joints, forces=forces, gravity=(0.0, 0.0, -g), name="rssr")

    def outputs(q, v):
        return observables(q, kin)

    def reference(t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        th = theta0 + drive * t if drive else reduced_reference(
            t, r1, r2, L, m1, m2, m3, g, tau, theta0)[0]
        states = [kin.terms(x) for x in th]
        c3 = np.array([s["c"][2] for s in states])
        return {"theta": th, "phi": np.array([s["phi"] for s in states]), "xc": c3[:, 0],
                "yc": c3[:, 1], "zc": c3[:, 2]}

    def draw(ax, q):
        ob = observables(q[None, :], kin)
        th, phi = ob["theta"][0], ob["phi"][0]
        P = kin.crank(th)[0]
        Q = kin.rocker(phi)[0]
        for X, Y, c in ((A_POINT, P, "C0"), (P, Q, "C1"), (B_POINT, Q, "C2")):
            ax.plot([X[0], Y[0]], [X[2], Y[2]], "-o", color=c, lw=3)
        ax.set_aspect("equal")
        return ax

    how = f"driven at {drive:g} rad/s" if drive else "released from rest under gravity"
    return go.Problem(
        name="rssr", system=model.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description=f"Spatial RSSR four-bar (skew revolute axes, two spherical joints), "
                    f"{how}; two degrees of freedom (the coupler's free spin about its axis).",
        settings={"method": "DOP853", "rtol": 1e-11, "atol": 1e-11,
                  "stabilization": go.Projection()},
        solvers=("closed_form", "lagrange"),
        outputs=outputs, reference=reference, draw=draw, model=model,
        params={"r1": r1, "r2": r2, "L": L, "m1": m1, "m2": m2, "m3": m3, "g": g, "tau": tau,
                "theta0": theta0, "drive": drive},
        units={"theta": "rad", "phi": "rad", "xc": "m", "yc": "m", "zc": "m", "closure": "m",
               "energy": "J", "length": "m"})
