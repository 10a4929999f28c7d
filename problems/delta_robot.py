"""A passive delta robot: three closed loops, parallelogram forearms, released under gravity.

A small delta robot (Clavel's design, of the size of a desktop pick-and-place robot)
hangs from a horizontal base (``z = 0``, gravity ``g`` along ``-z``). Arm ``i``
(``i = 0, 1, 2`` at the azimuths ``phi_i = 0, 120, 240`` degrees, radial direction
``rho_i``, tangent ``u_i = z x rho_i``) is an upper arm pivoted on the base at
``B_i = R_b rho_i`` about ``u_i``, its angle ``th_i`` measured down from the horizontal
(elbow ``E_i = B_i + L_a (cos th_i rho_i - sin th_i z)``), and a forearm: a
parallelogram of two rods of length ``L_f`` from ``E_i +- (w/2) u_i`` on the upper arm
to ``C_i +- (w/2) u_i`` on the platform, ``C_i = x + R_p rho_i`` (``x`` the centre of
the platform). The parallelograms keep the platform parallel to the base: it
translates, three dof. Nothing drives the arms: released at rest from the asymmetric
pose ``th = th0`` (default 1.4, 1.65, 1.9 rad), the robot swings under gravity about
its hanging equilibrium (all arms at 1.6673 rad, 5.5 degrees past the vertical, the
platform's centre at z = -0.3421 m), three swings in the default 2 s.

Default dimensions and masses: base radius ``R_b = 0.10 m``, platform radius
``R_p = 0.03 m``, upper arms ``L_a = 0.10 m``, forearm rods ``L_f = 0.25 m``,
parallelogram width ``w = 0.04 m``; upper arms uniform cylinders of 0.08 kg and radius
8 mm (moment about the pivot ``m (L_a^2 / 3 + r^2 / 4)``), forearm rods uniform
cylinders (carbon tubes) of 0.015 kg and radius 3 mm, platform a disc of 0.06 kg.

Two models of the rods' ends (``rod_ends``):

- ``"spherical"`` (Clavel's ball joints): 10 bodies, 3 revolute and 12 spherical joints,
  51 joint equations; Gruebler-Kutzbach ``6 * 10 - 51 = 9`` and the true mobility is 9
  too: the platform's 3 translations and the spin of each of the 6 rods about its own
  axis (free and decoupled: the joints' forces pass through the axis, the rod is
  axisymmetric, so its spin rate is constant, here 0). No joint equation is redundant:
  each parallelogram's second rod fixes one rotation of the platform.
- ``"universal"``: universal joints at both ends of each rod (axes ``u_i`` on the
  upper arm and on the platform, the parallelogram's normal on the rod): 3 * 5 + 12 * 4 = 63
  equations, Gruebler-Kutzbach ``60 - 63 = -3``, true mobility 3, so 6 equations are
  redundant (two per parallelogram loop). The universal joints make the rods spin with
  the motion; the rods are then slender (no moment about their axis, ``rod_radius``
  ignored), so the spin carries no energy and the reference below stays exact.

Reference (:class:`ReducedReference`, numpy/scipy only): Kane's equations in the three
arm angles ``th``. Forward kinematics in closed form: the platform centre ``x`` is the
lower intersection of the three spheres of radius ``L_f`` about ``E_i - R_p rho_i``
(two planes and a quadratic). The loop equations ``|r_i|^2 = L_f^2``,
``r_i = C_i - E_i``, give ``A x' = D th'`` (rows ``r_i``, ``D = diag(r_i . dE_i/dth_i)``)
and, differentiated once more, ``A x'' = D th'' + h`` with
``h_i = (r_i . d2E_i/dth_i^2) th_i'^2 - |r_i'|^2``: exact Jacobians and convective
terms. A rod between two joint centres ``A`` and ``B`` with no spin energy has
``T = 1/2 m |(v_A + v_B)/2|^2 + 1/2 J_t |v_B - v_A|^2 / L_f^2`` (``J_t`` its transverse
moment about its centroid), a quadratic form in ``v_A, v_B`` with constant
coefficients, so its generalized inertia force is that of the end accelerations;
gravity acts half at each end. Upper arms rotate about fixed axes, the platform
translates. ``M(th) th'' = f(th, th')`` is integrated by DOP853 at
``rtol = atol = 1e-13``; the energy of the reference is conserved to ~1e-15 J, its
runs at 1e-12 and 1e-13 differ by 2e-14 m. At consistent states of its motion
gaussopt's platform accelerations equal its own to ~3e-14 m/s^2, the arms' angular
accelerations to ~7e-13 rad/s^2 (of ~100).

Measured (gaussopt, the default 2 s, one run each on a shared 2-core machine; max error
of the platform's centre, the drift of the energy, steps, wall time):

=========  ======================================  ======================================
rtol       spherical rod ends                      universal rod ends
=========  ======================================  ======================================
1e-9       6.2e-11 m, 2.7e-11 J, 155 steps, ~5 s   6.2e-11 m, 2.7e-11 J, 155 steps, ~12 s
1e-10      4.9e-12 m, 2.2e-12 J, 205 steps, ~6 s   5.1e-12 m, 2.1e-12 J, 205 steps, ~15 s
=========  ======================================  ======================================
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable

G = 9.81
Z = np.array([0.0, 0.0, 1.0])
#: default dimensions [m] and masses [kg]
DIMENSIONS = {"R_b": 0.10, "R_p": 0.03, "L_a": 0.10, "L_f": 0.25, "w": 0.04}
MASSES = {"m_a": 0.08, "r_a": 0.008, "m_r": 0.015, "r_r": 0.003, "m_p": 0.06}
ROD_ENDS = ("spherical", "universal")


def _skew(x: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues' formula: the rotation by ``angle`` about the unit ``axis``."""
    K = _skew(axis)
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * (K @ K)


def _least_rotation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotation about ``a x b`` that turns the unit vector ``a`` into ``b``."""
    c = np.cross(a, b)
    s = np.linalg.norm(c)
    if s < 1e-15:
        return np.eye(3)
    return _rotation(c / s, np.arctan2(s, a @ b))


def _quaternion(R: np.ndarray) -> np.ndarray:
    """The unit quaternion ``(e0, e1, e2, e3)``, ``e0 >= 0``, of a rotation matrix."""
    from gaussopt_problems.bricard import _quaternion as quat

    return quat(R)


def cylinder_inertia(m: float, L: float, r: float, direction) -> np.ndarray:
    """Inertia tensor [kg m^2] about the centroid of a uniform cylinder (length ``L``,
    radius ``r``) along the unit vector ``direction``."""
    d = np.asarray(direction, dtype=float)
    dd = np.outer(d, d)
    return m * (L * L / 12 + r * r / 4) * (np.eye(3) - dd) + m * r * r / 2 * dd


class ReducedReference:
    """The delta robot in its three arm angles (see the module's docstring).

    Parameters
    ----------
    g : float
        Gravity along -z [m/s^2].
    th0 : (3,) array_like
        Initial arm angles [rad] (released at rest).
    dims, masses : dict
        Overrides of :data:`DIMENSIONS` and :data:`MASSES`.
    rod_ends : {"spherical", "universal"}
        ``"universal"``: slender rods (``rod_radius`` ignored).
    """

    def __init__(self, g: float = G, th0=(1.4, 1.65, 1.9), dims=None, masses=None,
                 rod_ends: str = "spherical"):
        d = {**DIMENSIONS, **(dims or {})}
        ms = {**MASSES, **(masses or {})}
        self.g, self.th0 = float(g), np.asarray(th0, dtype=float)
        self.Rb, self.Rp, self.La, self.Lf, self.w = (d[k] for k in
                                                      ("R_b", "R_p", "L_a", "L_f", "w"))
        self.ma, self.ra, self.mr, self.rr, self.mp = (ms[k] for k in
                                                       ("m_a", "r_a", "m_r", "r_r", "m_p"))
        if rod_ends == "universal":
            self.rr = 0.0
        phi = np.radians([0.0, 120.0, 240.0])
        self.rho = np.stack([np.cos(phi), np.sin(phi), np.zeros(3)], 1)
        self.u = np.cross(Z, self.rho)
        # the arms' moment about their pivots, the rods' transverse moment, and the
        # coefficients of a rod's kinetic energy in its end velocities
        self.Ja = self.ma * (self.La**2 / 3 + self.ra**2 / 4)
        Jt = self.mr * (self.Lf**2 / 12 + self.rr**2 / 4)
        self.a = self.mr / 4 + Jt / self.Lf**2
        self.b = self.mr / 4 - Jt / self.Lf**2
        self._sol = None

    # ------------------------------------------------------------------ kinematics
    def elbows(self, th: np.ndarray):
        """Elbows ``E_i`` and their first and second derivatives in ``th_i``, (3, 3) each."""
        c, s = np.cos(th)[:, None], np.sin(th)[:, None]
        E = self.Rb * self.rho + self.La * (c * self.rho - s * Z)
        Et = self.La * (-s * self.rho - c * Z)
        Ett = -self.La * (c * self.rho - s * Z)
        return E, Et, Ett

    def platform(self, th: np.ndarray) -> np.ndarray:
        """Centre ``x`` of the platform (the lower intersection of the three spheres)."""
        E, _, _ = self.elbows(th)
        S = E - self.Rp * self.rho
        A = 2 * (S[1:] - S[0])
        b = (S[1:] ** 2).sum(1) - S[0] @ S[0]
        x0 = np.linalg.lstsq(A, b, rcond=None)[0]
        n = np.cross(S[1] - S[0], S[2] - S[0])
        n = n / np.linalg.norm(n)
        p = x0 - S[0]
        # |p + lam n|^2 = L_f^2
        B, C = p @ n, p @ p - self.Lf**2
        disc = B * B - C
        if disc < 0:
            raise ValueError(f"no platform position for the arm angles {th}")
        lam = np.array([-B - np.sqrt(disc), -B + np.sqrt(disc)])
        xs = x0 + lam[:, None] * n
        return xs[np.argmin(xs[:, 2])]

    def motion(self, th: np.ndarray, thd: np.ndarray):
        """``(x, G, cx, E, Et, Ett)``: the platform centre, ``x' = G th'`` and the
        convective part ``cx`` of ``x''``, and the elbows."""
        E, Et, Ett = self.elbows(th)
        x = self.platform(th)
        r = x + self.Rp * self.rho - E
        D = np.einsum("ij,ij->i", r, Et)
        A = r
        G = np.linalg.solve(A, np.diag(D))
        xd = G @ thd
        rd = xd - Et * thd[:, None]
        h = np.einsum("ij,ij->i", r, Ett) * thd**2 - (rd**2).sum(1)
        cx = np.linalg.solve(A, h)
        return x, G, cx, E, Et, Ett

    def mass_and_force(self, th: np.ndarray, thd: np.ndarray):
        """``M(th)`` and ``f(th, th')`` of ``M th'' = f``."""
        x, Gm, cx, E, Et, Ett = self.motion(th, thd)
        gv = np.array([0.0, 0.0, -self.g])
        M = self.mp * Gm.T @ Gm + np.diag(np.full(3, self.Ja))
        f = Gm.T @ (self.mp * (gv - cx)) + self.ma * self.g * self.La / 2 * np.cos(th)
        for i in range(3):
            P = np.outer(Et[i], np.eye(3)[i])      # the elbow's partial velocities
            cA = Ett[i] * thd[i] ** 2
            k = 2.0                                # two rods per parallelogram
            M += k * (self.a * P.T @ P + self.a * Gm.T @ Gm + self.b * (P.T @ Gm + Gm.T @ P))
            f += k * (P.T @ (self.mr / 2 * gv - self.a * cA - self.b * cx)
                      + Gm.T @ (self.mr / 2 * gv - self.b * cA - self.a * cx))
        return M, f

    def energy(self, th: np.ndarray, thd: np.ndarray) -> float:
        """Kinetic plus potential energy [J] (potential zero at z = 0)."""
        M, _ = self.mass_and_force(th, thd)
        x, _, _, E, _, _ = self.motion(th, thd)
        V = self.g * (self.ma * (-self.La / 2 * np.sin(th)).sum() + self.mp * x[2]
                      + 2 * self.mr * ((E[:, 2] + x[2]) / 2).sum())
        return float(0.5 * thd @ M @ thd + V)

    def accelerations(self, th: np.ndarray, thd: np.ndarray):
        """``th''`` and the platform's ``x''`` of the reduced equations."""
        M, f = self.mass_and_force(th, thd)
        thdd = np.linalg.solve(M, f)
        _, Gm, cx, _, _, _ = self.motion(th, thd)
        return thdd, Gm @ thdd + cx

    def body_coordinates(self, th: np.ndarray, thd: np.ndarray):
        """``q, v`` of the spherical-ended model (bodies ``arm0, rod0a, rod0b, arm1, ...,
        rod2b, platform``, as :func:`model` orders them) at ``th, th'``; the body
        frames are the world axes in the pose ``th0``. The rods do not spin: each is
        turned from its initial direction by the least rotation, ``omega = d x d'``."""
        E, Et, _ = self.elbows(th)
        E0, _, _ = self.elbows(self.th0)
        x, Gm, _, _, _, _ = self.motion(th, thd)
        x0 = self.platform(self.th0)
        xd = Gm @ thd
        qs, vs = [], []

        def put(c, cd, R, om):
            e = _quaternion(R)
            Et4 = np.column_stack([-e[1:], e[0] * np.eye(3) + _skew(e[1:])]).T
            qs.append(np.r_[c, e])
            vs.append(np.r_[cd, Et4 @ om / 2])

        parts = []
        for i in range(3):
            B = self.Rb * self.rho[i]
            parts.append(((B + E[i]) / 2, Et[i] * thd[i] / 2,
                         _rotation(self.u[i], th[i] - self.th0[i]), self.u[i] * thd[i]))
            d0 = (x0 + self.Rp * self.rho[i] - E0[i]) / self.Lf
            d = (x + self.Rp * self.rho[i] - E[i]) / self.Lf
            dd = (xd - Et[i] * thd[i]) / self.Lf
            R = _least_rotation(d0, d)
            for sgn in (1.0, -1.0):
                off = sgn * self.w / 2 * self.u[i]
                parts.append(((E[i] + x + self.Rp * self.rho[i]) / 2 + off,
                             (Et[i] * thd[i] + xd) / 2, R, np.cross(d, dd)))
        for c in parts:
            put(*c)
        put(x, xd, np.eye(3), np.zeros(3))
        return np.concatenate(qs), np.concatenate(vs)

    # ------------------------------------------------------------------ the run
    def solve(self, t_end: float, rtol: float = 1e-13, atol: float = 1e-13):
        """Integrate ``(th, th')`` from rest at ``th0``; the dense solution."""
        def f(_, y):
            M, rhs = self.mass_and_force(y[:3], y[3:])
            return np.concatenate([y[3:], np.linalg.solve(M, rhs)])

        sol = solve_ivp(f, (0.0, float(t_end)), np.concatenate([self.th0, np.zeros(3)]),
                        method="DOP853", rtol=rtol, atol=atol, dense_output=True)
        if not sol.success:                         # pragma: no cover
            raise RuntimeError(f"the reduced delta reference failed: {sol.message}")
        self._sol = sol
        return sol

    def states(self, t):
        """Arm angles (N, 3), rates (N, 3) and platform centres (N, 3) at ``t``."""
        y = self._sol.sol(np.atleast_1d(np.asarray(t, dtype=float)))
        th, thd = y[:3].T, y[3:].T
        return th, thd, np.array([self.platform(a) for a in th])


@lru_cache(maxsize=8)
def reference_solution(t_end: float, g: float = G, th0=(1.4, 1.65, 1.9),
                       rod_ends: str = "spherical", rtol: float = 1e-13) -> ReducedReference:
    """A solved :class:`ReducedReference` (cached)."""
    ref = ReducedReference(g=g, th0=th0, rod_ends=rod_ends)
    ref.solve(t_end, rtol=rtol, atol=rtol)
    return ref


# ---------------------------------------------------------------------- gaussopt's model
def model(g: float = G, th0=(1.4, 1.65, 1.9), rod_ends: str = "spherical"):
    """The delta robot from ``sp`` bodies and joints in the pose ``th0``: bodies
    ``arm0, rod0a, rod0b, arm1, rod1a, rod1b, arm2, rod2a, rod2b, platform``."""
    import gaussopt.multibody.spatial as sp

    ref = ReducedReference(g=g, th0=th0, rod_ends=rod_ends)
    th = ref.th0
    E, _, _ = ref.elbows(th)
    x = ref.platform(th)
    bodies, joints = [], []
    platform = sp.Body("platform", ref.mp, [ref.mp * ref.Rp**2 / 4] * 2 + [ref.mp * ref.Rp**2 / 2],
                       position=x)
    for i in range(3):
        B = ref.Rb * ref.rho[i]
        arm = sp.Body(f"arm{i}", ref.ma,
                      cylinder_inertia(ref.ma, ref.La, ref.ra, (E[i] - B) / ref.La),
                      position=(B + E[i]) / 2)
        bodies.append(arm)
        joints.append(sp.Revolute(None, arm, B, ref.u[i]))
        C = x + ref.Rp * ref.rho[i]
        d = (C - E[i]) / ref.Lf
        n = np.cross(d, ref.u[i])
        n = n / np.linalg.norm(n)
        for side, sgn in (("a", 1.0), ("b", -1.0)):
            A_, B_ = E[i] + sgn * ref.w / 2 * ref.u[i], C + sgn * ref.w / 2 * ref.u[i]
            rod = sp.Body(f"rod{i}{side}", ref.mr, cylinder_inertia(ref.mr, ref.Lf, ref.rr, d),
                          position=(A_ + B_) / 2)
            bodies.append(rod)
            if rod_ends == "spherical":
                joints += [sp.Spherical(arm, rod, A_), sp.Spherical(rod, platform, B_)]
            else:
                joints += [sp.Universal(arm, rod, A_, ref.u[i], n),
                           sp.Universal(rod, platform, B_, n, ref.u[i])]
    bodies.append(platform)
    return sp.Model(bodies, joints, gravity=(0.0, 0.0, -g), name=f"delta_robot_{rod_ends}")


@rebuildable        # its System pickles as this call
def build(th0_1: float = 1.4, th0_2: float = 1.65, th0_3: float = 1.9, g: float = G,
          rod_ends: str = "spherical", t_end: float = 2.0) -> go.Problem:
    """A passive delta robot released at rest under gravity (dimensions: the module's).

    Parameters
    ----------
    th0_1 : float
        Initial angle of upper arm 0 below the horizontal [rad].
    th0_2 : float
        Initial angle of upper arm 1 below the horizontal [rad].
    th0_3 : float
        Initial angle of upper arm 2 below the horizontal [rad].
    g : float
        Gravitational acceleration, along -z [m/s^2].
    rod_ends : {"spherical", "universal"}
        The joints at the forearm rods' ends: ball joints (no redundant equation, the
        rods' spins free) or universal joints (6 redundant equations).
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``x``, ``y``, ``z`` (the platform's centre [m]);
        ``reference(t)`` the same from the reduced equations in the arm angles
        (:class:`ReducedReference`).
    """
    if rod_ends not in ROD_ENDS:
        raise go.ModelError(f"`rod_ends` must be one of {', '.join(ROD_ENDS)}; found "
                            f"{rod_ends!r}; pass rod_ends='spherical'.")
    th0 = (float(th0_1), float(th0_2), float(th0_3))
    mdl = model(g=g, th0=th0, rod_ends=rod_ends)
    q0 = np.asarray(mdl.q_reference, dtype=float).copy()
    v0 = np.zeros_like(q0)
    k = 7 * 9                                  # the platform: the last of the 10 bodies

    def outputs(q, v):
        q = np.atleast_2d(q)
        return {"x": q[:, k], "y": q[:, k + 1], "z": q[:, k + 2]}

    def ref(t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        r = reference_solution(max(float(t_end), float(t.max())), g=g, th0=th0,
                               rod_ends=rod_ends)
        X = r.states(t)[2]
        return {"x": X[:, 0], "y": X[:, 1], "z": X[:, 2]}

    def draw(ax, q):
        X = [q[7 * j:7 * j + 3] for j in range(10)]
        for i in range(3):
            arm, rod = X[3 * i], X[3 * i + 1]
            phi = 2 * np.pi * i / 3
            B = DIMENSIONS["R_b"] * np.array([np.cos(phi), np.sin(phi), 0.0])
            Ei = 2 * arm - B
            for P, Q in ((B, Ei), (Ei, 2 * rod - Ei)):
                ax.plot([P[0], Q[0]], [P[2], Q[2]], "-", color=f"C{i}", lw=2)
        ax.plot([X[9][0]], [X[9][2]], "ks", ms=8)
        ax.set_aspect("equal")
        return ax

    prob = go.Problem(
        name="delta_robot", system=mdl.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description=f"Passive delta robot ({rod_ends} rod ends): three closed loops with "
                    "parallelogram forearms, 10 bodies in Euler parameters, released at rest "
                    "under gravity; outputs the platform's centre.",
        settings={"method": "DOP853", "rtol": 1e-10, "atol": 1e-10},
        solvers=("closed_form", "lagrange", "qp"),
        outputs=outputs, reference=ref, draw=draw,
        params={"th0_1": th0[0], "th0_2": th0[1], "th0_3": th0[2], "g": g,
                "rod_ends": rod_ends, "t_end": t_end},
        units={**{c: ("m" if c.split(".")[-1] in ("x", "y", "z") else "1")
                  for c in mdl.system.coordinates},
               "x": "m", "y": "m", "z": "m", "energy": "J", "length": "m"})
    prob.model = mdl
    return prob
