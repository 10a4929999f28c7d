"""The IFToMM A04 benchmark: Bricard's mechanism, five rods and six revolute joints.

An overconstrained spatial loop (IFToMM Technical Committee for Multibody Dynamics,
library of computational benchmark problems, problem A04; M. Gonzalez, D. Dopico,
U. Lugris, J. Cuadrado, Multibody Syst. Dyn. 16 (2006) 179-190). Five uniform rods of
length ``L`` and mass ``m`` (slender: moment ``m L^2 / 12`` about any transverse axis
through the centroid and none about the rod's own axis, unless ``width`` gives them a
square cross-section) join the joint centres ``P0 = (0, 0, 0)``, ``P1 = (L, 0, 0)``,
``P2 = (L, -L, 0)``, ``P3 = (L, -L, L)``, ``P4 = (0, -L, L)``, ``P5 = (0, 0, L)`` of
the initial pose (rod ``k`` from ``P(k-1)`` to ``Pk``); the ground closes the loop from
``P5`` back to ``P0``. The revolute joints' axes are ``y`` at ``P0``, ``z`` at ``P1``,
``x`` at ``P2``, ``y`` at ``P3``, ``z`` at ``P4`` and ``x`` at ``P5``: each rod's two
axes are perpendicular to it and to each other. Gravity ``g`` along ``-y``; 10 s.

Gruebler-Kutzbach: ``6 * 5 - 6 * 5 = 0``; the true mobility is 1 (the joint screws
span only 5 dimensions, one of the 30 joint equations is redundant).

Initial state: the pose above, released at rest (``omega0 = 0``) as in the published
implementations of A04 found (the MBS-benchmarks-in-OpenSim model, Exudyn's test model,
simEngine3D's driver, all starting from rest); ``omega0`` gives the first joint an
initial rate instead. Output: the trajectory of ``P2`` (the end of rod 2, joint 3).
The published reference trajectory (the benchmark's solution file) could not be
retrieved here; the tests compare with the independent reference below.

Reference (:class:`JointAngleReference`, numpy/scipy only, none of gaussopt's
kinematics): the relative angles ``th1..th6`` of the six joints around the loop
(``thk`` the rotation of rod ``k`` relative to rod ``k-1``; ``th6`` that of the ground
relative to rod 5). The open chain ground-1-2-3-4-5 is the product of exponentials
``g_k = exp(xi_1 th1) ... exp(xi_k thk)`` of the joints' twists ``xi = (p x w, w)``. The
loop closes when rod 5 carries ``P5`` and the ``x`` axis of joint 6 back onto the
ground's: ``th2..th5`` follow from ``th1`` by Newton's method (Gauss-Newton on the six
residuals, exact Jacobian columns ``w_i x (P5 - p_i)``, ``w_i x x``), from the previous
solution. Velocities: the closure ``sum_i xi_i' th_i' = 0`` (``xi_i'`` the current
twists, a 6 x 6 matrix of rank 5) gives ``th' = s(th) u`` with ``s_1 = 1``, ``u = th1'``;
accelerations from its derivative ``sum_i (xi_i' th_i'' + [V_(i-1), xi_i' th_i']) = 0``
(``V_k = sum_(i <= k) xi_i' th_i'`` the spatial velocity of rod ``k``, ``[.,.]`` the Lie
bracket of twists) in closed form. The one-dof equation is Kane's:
``sum_k (m v_k . (a_k - g) + w_k . (J_k alpha_k + omega_k x J_k omega_k)) = 0`` with the
partial velocities ``v_k, w_k`` of rod ``k``'s centroid and rotation per unit ``u``;
``th1, u`` integrated by DOP853 at ``rtol = atol = 1e-13``. The dependent columns
stay well conditioned (their least singular value >= 0.37 over the 10 s from rest).
The energy of the reference is conserved to ~1e-11 J (of -29.43 J) over 10 s; its runs
at 1e-12 and 1e-13 differ by 6e-12 m in ``P2``. At consistent states of its motion
gaussopt's accelerations equal its own to ~5e-14.

Measured (gaussopt, 10 s from rest, one run each on a shared 2-core machine, compiled
code cached):

================================================  =====  =========  ============  ======
settings                                          steps  max err P2 energy drift  wall
================================================  =====  =========  ============  ======
defaults (DOP853, rtol = atol = 1e-9)             152    1.7e-10 m  1.5e-9 J      ~0.8 s
rtol = atol = 1e-10                               162    1.3e-10 m  6.0e-10 J     0.81 s
rtol = atol = 1e-12 (``settings``)                153    1.1e-12 m  4.1e-12 J     0.71 s
defaults + ``solver_options={"rank_tol": 1e-4}``  67     7.3e-10 m  4.3e-9 J      0.36 s
================================================  =====  =========  ============  ======

(The stages of DOP853's large steps lie far off the constraints, where the exactly
redundant row turns into a nearly dependent one: its singular value passes the default
``rank_tol``, the row is kept, the 35 rows then fix all 35 accelerations by themselves
(``a = A^-1 b``, the mass matrix has no say) and they come out wrong. ``simulate``
rejects and halves such steps; a coarser ``rank_tol`` drops the row, in fewer steps.)
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable

G = 9.81

#: joint centres P0..P5 of the initial pose for L = 1 [m] (rod k from P(k-1) to Pk)
POINTS = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, -1.0, 0.0],
                   [1.0, -1.0, 1.0], [0.0, -1.0, 1.0], [0.0, 0.0, 1.0]])
#: the joints' axes at P0..P5
AXES = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0],
                 [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
RODS = ("rod1", "rod2", "rod3", "rod4", "rod5")


def rod_inertia(m: float, L: float, width: float, direction) -> np.ndarray:
    """Inertia tensor [kg m^2] about the centroid of a uniform rod of square cross-section
    ``width`` along the unit vector ``direction``: ``m (L^2 + width^2) / 12`` across,
    ``m width^2 / 6`` along (``width = 0``: a slender rod)."""
    d = np.asarray(direction, dtype=float)
    dd = np.outer(d, d)
    return m * (L * L + width * width) / 12.0 * (np.eye(3) - dd) + m * width * width / 6.0 * dd


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues' formula: the rotation by ``angle`` about the unit ``axis``."""
    K = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]],
                  [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * (K @ K)


def _skew(x: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def _quaternion(R: np.ndarray) -> np.ndarray:
    """The unit quaternion ``(e0, e1, e2, e3)``, ``e0 >= 0``, of a rotation matrix
    (Shepperd's method: from the largest of its four squares)."""
    tr = np.trace(R)
    sq = np.array([1 + tr, 1 + 2 * R[0, 0] - tr, 1 + 2 * R[1, 1] - tr, 1 + 2 * R[2, 2] - tr])
    i = int(np.argmax(sq))
    e = np.empty(4)
    e[i] = 0.5 * np.sqrt(sq[i])
    f = 0.25 / e[i]
    if i == 0:
        e[1:] = f * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    elif i == 1:
        e[0], e[2], e[3] = f * (R[2, 1] - R[1, 2]), f * (R[0, 1] + R[1, 0]), f * (R[0, 2] + R[2, 0])
    elif i == 2:
        e[0], e[1], e[3] = f * (R[0, 2] - R[2, 0]), f * (R[0, 1] + R[1, 0]), f * (R[1, 2] + R[2, 1])
    else:
        e[0], e[1], e[2] = f * (R[1, 0] - R[0, 1]), f * (R[0, 2] + R[2, 0]), f * (R[1, 2] + R[2, 1])
    return e if e[0] >= 0 else -e


def _bracket(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Lie bracket of twists ``(v, w)``: ``(w_a x v_b - w_b x v_a, w_a x w_b)``."""
    return np.concatenate([np.cross(a[3:], b[:3]) - np.cross(b[3:], a[:3]),
                           np.cross(a[3:], b[3:])])


class JointAngleReference:
    """The one-dof joint-angle model of A04 (see the module's docstring).

    Parameters
    ----------
    L, m, g, width : float
        Rod length [m], rod mass [kg], gravity along -y [m/s^2], rod cross-section [m].
    omega0 : float
        Initial rate of joint 1 (``th1'``) [rad/s].
    """

    def __init__(self, L: float = 1.0, m: float = 1.0, g: float = G, width: float = 0.0,
                 omega0: float = 0.0):
        self.L, self.m, self.g, self.omega0 = float(L), float(m), float(g), float(omega0)
        self.P = POINTS * self.L
        self.W = AXES.copy()
        dirs = [(self.P[k + 1] - self.P[k]) / self.L for k in range(5)]
        self.J0 = [rod_inertia(m, L, width, d) for d in dirs]
        self.C0 = [(self.P[k] + self.P[k + 1]) / 2 for k in range(5)]
        self._th = np.zeros(6)          # the last closure solution (Newton's start)
        self._sol = None

    # ------------------------------------------------------------------ kinematics
    def chain(self, th: np.ndarray):
        """Rotations ``R_k``, translations ``t_k`` of rods 1..5 (``x = R_k x0 + t_k``) and
        the current axes and centres of joints 1..6."""
        R, t = np.eye(3), np.zeros(3)
        Rs, ts, ws, ps = [], [], [], []
        for i in range(5):
            ws.append(R @ self.W[i])
            ps.append(R @ self.P[i] + t)
            Ri = _rotation(self.W[i], th[i])
            t = R @ ((np.eye(3) - Ri) @ self.P[i]) + t
            R = R @ Ri
            Rs.append(R)
            ts.append(t)
        ws.append(R @ self.W[5])
        ps.append(R @ self.P[5] + t)
        return Rs, ts, np.array(ws), np.array(ps)

    def close(self, th1: float, guess=None) -> np.ndarray:
        """All six joint angles on the loop for ``th1`` (Newton from ``guess``)."""
        th = np.array(self._th if guess is None else guess, dtype=float)
        th[0] = th1
        for it in range(50):
            _, _, ws, ps = self.chain(th)
            r = np.concatenate([ps[5] - self.P[5], ws[5] - self.W[5]])
            J = np.empty((6, 4))
            for i in range(1, 5):
                J[:3, i - 1] = np.cross(ws[i], ps[5] - ps[i])
                J[3:, i - 1] = np.cross(ws[i], ws[5])
            dx = np.linalg.lstsq(J, -r, rcond=None)[0]
            th[1:5] += dx
            if np.max(np.abs(dx)) < 1e-15 or (it > 3 and np.max(np.abs(r)) < 1e-15):
                break
        else:                                       # pragma: no cover - a regular loop
            raise RuntimeError(f"loop closure did not converge at th1 = {th1}")
        # th6: the ground's rotation relative to rod 5 about x, -(the rotation of rod 5)
        Rs, _, _, _ = self.chain(th)
        th[5] = -np.arctan2(Rs[4][2, 1], Rs[4][1, 1])
        self._th = th
        return th

    def twists(self, th: np.ndarray):
        """``(Rs, ts, S)``: the chain and the 6 x 6 matrix of the current joint twists."""
        Rs, ts, ws, ps = self.chain(th)
        S = np.array([np.concatenate([np.cross(p, w), w]) for w, p in zip(ws, ps)]).T
        return Rs, ts, S

    def rates(self, S: np.ndarray) -> np.ndarray:
        """``s``: the joint rates per unit ``th1'`` (``S s = 0``, ``s_1 = 1``)."""
        s = np.ones(6)
        s[1:] = np.linalg.lstsq(S[:, 1:], -S[:, 0], rcond=None)[0]
        return s

    def body_motion(self, th: np.ndarray, u: float, du: float = 0.0):
        """Per rod: centroid ``x``, velocity, acceleration, angular velocity and
        acceleration, the partial velocities (per unit ``u``) and the inertia tensor, at
        ``th1' = u``, ``th1'' = du``."""
        Rs, ts, S = self.twists(th)
        s = self.rates(S)
        thd = s * u
        # the closure's derivative: S thdd + sum_i [V_(i-1), xi_i thd_i] = 0
        bias = np.zeros(6)
        V = np.zeros(6)
        cum_bias = []
        for i in range(6):
            bias = bias + _bracket(V, S[:, i] * thd[i])
            V = V + S[:, i] * thd[i]
            cum_bias.append(bias.copy())
        thdd = s * du
        thdd[1:] += np.linalg.lstsq(S[:, 1:], -cum_bias[5], rcond=None)[0]
        out = []
        for k in range(5):
            Vk = S[:, :k + 1] @ thd[:k + 1]
            Ak = S[:, :k + 1] @ thdd[:k + 1] + cum_bias[k]
            Pk = S[:, :k + 1] @ s[:k + 1]
            x = Rs[k] @ self.C0[k] + ts[k]
            om = Vk[3:]
            xd = Vk[:3] + np.cross(om, x)
            xdd = Ak[:3] + np.cross(Ak[3:], x) + np.cross(om, xd)
            J = Rs[k] @ self.J0[k] @ Rs[k].T
            out.append((x, xd, xdd, om, Ak[3:], Pk[:3] + np.cross(Pk[3:], x), Pk[3:], J))
        return out

    def acceleration(self, th1: float, u: float) -> float:
        """``th1''`` from Kane's equation of the one-dof loop."""
        th = self.close(th1)
        gv = np.array([0.0, -self.g, 0.0])
        lhs = rhs = 0.0
        # the motion at th1'' = 0 and the partial velocities; a is affine in th1''
        for (x, xd, xdd, om, al, vp, wp, J) in self.body_motion(th, u, 0.0):
            lhs += self.m * vp @ vp + wp @ J @ wp
            rhs += self.m * vp @ (gv - xdd) - wp @ (J @ al + np.cross(om, J @ om))
        return rhs / lhs

    def energy(self, th: np.ndarray, u: float) -> float:
        """Kinetic plus potential energy [J] (potential zero at y = 0)."""
        E = 0.0
        for (x, xd, _, om, _, _, _, J) in self.body_motion(th, u):
            E += 0.5 * self.m * xd @ xd + 0.5 * om @ J @ om + self.m * self.g * x[1]
        return float(E)

    # ------------------------------------------------------------------ the run
    def solve(self, t_end: float, rtol: float = 1e-13, atol: float = 1e-13):
        """Integrate ``(th1, th1')`` from the initial pose; the dense solution."""
        self._th = np.zeros(6)

        def f(_, y):
            return [y[1], self.acceleration(y[0], y[1])]

        sol = solve_ivp(f, (0.0, float(t_end)), [0.0, self.omega0], method="DOP853",
                        rtol=rtol, atol=atol, dense_output=True)
        if not sol.success:                         # pragma: no cover
            raise RuntimeError(f"the joint-angle reference failed: {sol.message}")
        self._sol = sol
        return sol

    def states(self, t) -> tuple[np.ndarray, np.ndarray]:
        """Joint angles (N, 6) and ``th1'`` (N,) at the times ``t`` of the last solve."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        y = self._sol.sol(t)
        self._th = np.zeros(6)
        order = np.argsort(t)                      # continue the closure along the path
        th = np.empty((len(t), 6))
        prev = 0.0
        for j in order:
            # walk th1 in steps of at most 0.05 rad (Newton stays on the branch)
            n = int(np.ceil(abs(y[0, j] - prev) / 0.05))
            for x in np.linspace(prev, y[0, j], n + 1)[1:-1]:
                self.close(x)
            th[j] = self.close(y[0, j])
            prev = y[0, j]
        return th, y[1]

    def point(self, th: np.ndarray, k: int) -> np.ndarray:
        """The joint centre ``Pk`` (k = 0..5) at the joint angles ``th``, (3,)."""
        _, _, _, ps = self.chain(th)
        return ps[k]

    def body_coordinates(self, th: np.ndarray, u: float, du: float = 0.0):
        """``q, v, a`` of the five rods in Euler parameters (centroid, quaternion) at the
        joint angles ``th``, ``th1' = u``, ``th1'' = du`` (rod frames: the world axes at
        the initial pose); ``e' = E(e)^T omega / 2``, ``e'' = (E(e)^T alpha - |omega|^2 e
        / 2) / 2``."""
        Rs, _, _ = self.twists(th)
        q, v, a = (np.empty(35) for _ in range(3))
        for k, (x, xd, xdd, om, al, _, _, _) in enumerate(self.body_motion(th, u, du)):
            e = _quaternion(Rs[k])
            Et = np.column_stack([-e[1:], e[0] * np.eye(3) + _skew(e[1:])]).T  # E(e)^T, 4x3
            q[7 * k:7 * k + 7] = np.r_[x, e]
            v[7 * k:7 * k + 7] = np.r_[xd, Et @ om / 2]
            a[7 * k:7 * k + 7] = np.r_[xdd, (Et @ al - 0.5 * (om @ om) * e) / 2]
        return q, v, a

    def initial_velocities(self):
        """Per rod: centroid velocity and angular velocity at the start."""
        th = np.zeros(6)
        return [(xd, om) for (_, xd, _, om, _, _, _, _) in self.body_motion(th, self.omega0)]


@lru_cache(maxsize=8)
def reference_solution(t_end: float = 10.0, L: float = 1.0, m: float = 1.0, g: float = G,
                       width: float = 0.0, omega0: float = 0.0,
                       rtol: float = 1e-13) -> JointAngleReference:
    """A solved :class:`JointAngleReference` (cached: one solve per parameter set)."""
    ref = JointAngleReference(L=L, m=m, g=g, width=width, omega0=omega0)
    ref.solve(t_end, rtol=rtol, atol=rtol)
    return ref


def reference(t, t_end: float = 10.0, **params) -> dict:
    """``P2_x, P2_y, P2_z`` [m] and ``energy`` [J] of the joint-angle reference at ``t``."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    ref = reference_solution(max(float(t_end), float(t.max())), **params)
    th, u = ref.states(t)
    P2 = np.array([ref.point(x, 2) for x in th])
    E = np.array([ref.energy(x, w) for x, w in zip(th, u)])
    return {"P2_x": P2[:, 0], "P2_y": P2[:, 1], "P2_z": P2[:, 2], "energy": E}


# ---------------------------------------------------------------------- gaussopt's model
def model(L: float = 1.0, m: float = 1.0, g: float = G, width: float = 0.0):
    """The A04 mechanism from ``sp.Body`` and six ``sp.Revolute``: bodies ``rod1..rod5``."""
    import gaussopt.multibody.spatial as sp

    P, W = POINTS * L, AXES
    bodies = [sp.Body(RODS[k], m, rod_inertia(m, L, width, (P[k + 1] - P[k]) / L),
                      position=(P[k] + P[k + 1]) / 2) for k in range(5)]
    ends = [None, *bodies, None]
    joints = [sp.Revolute(ends[k], ends[k + 1], P[k], W[k]) for k in range(5)]
    joints.append(sp.Revolute(bodies[4], None, P[5], W[5]))
    return sp.Model(bodies, joints, gravity=(0.0, -g, 0.0), name="bricard")


def _rotation_of_quaternions(p: np.ndarray) -> np.ndarray:
    """Rotation matrices (N, 3, 3) of unit quaternions ``(e0, e1, e2, e3)`` (N, 4)."""
    e0, e1, e2, e3 = p.T
    rows = ((e0**2 + e1**2 - e2**2 - e3**2, 2 * (e1 * e2 - e0 * e3), 2 * (e1 * e3 + e0 * e2)),
            (2 * (e1 * e2 + e0 * e3), e0**2 - e1**2 + e2**2 - e3**2, 2 * (e2 * e3 - e0 * e1)),
            (2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1), e0**2 - e1**2 - e2**2 + e3**2))
    return np.stack([np.stack(r, -1) for r in rows], -2)


@rebuildable        # its System pickles as this call
def build(L: float = 1.0, m: float = 1.0, g: float = G, width: float = 0.0,
          omega0: float = 0.0, t_end: float = 10.0) -> go.Problem:
    """The IFToMM A04 Bricard mechanism (defaults: the benchmark's values, from rest).

    Parameters
    ----------
    L : float, > 0
        Length of each rod; the joint centres are ``L`` apart [m].
    m : float, > 0
        Mass of each rod [kg].
    g : float
        Gravitational acceleration, along -y [m/s^2].
    width : float, >= 0
        Side of the rods' square cross-section (0: slender rods) [m].
    omega0 : float
        Initial rate of joint 1 (the rotation of rod 1 about y at P0) [rad/s].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``P2_x``, ``P2_y``, ``P2_z`` (the end of rod 2 [m]);
        ``reference(t)`` the same from the joint-angle model
        (:class:`JointAngleReference`).
    """
    for name, val, ok in (("L", L, L > 0), ("m", m, m > 0), ("width", width, width >= 0)):
        if not (np.isfinite(val) and ok):
            raise go.ModelError(f"`{name}` must be a finite number "
                                f"{'>= 0' if name == 'width' else '> 0'}, found {val!r}.")
    mdl = model(L=L, m=m, g=g, width=width)
    q0 = np.asarray(mdl.q_reference, dtype=float).copy()
    v0 = np.zeros_like(q0)
    if omega0:
        # the reference's own initial velocities; at the identity orientation the
        # Euler parameters' rates are (0, omega / 2)
        for k, (xd, om) in enumerate(JointAngleReference(L, m, g, width, omega0)
                                     .initial_velocities()):
            v0[7 * k:7 * k + 3] = xd
            v0[7 * k + 4:7 * k + 7] = om / 2
    s2 = np.array([0.0, -L / 2, 0.0])          # P2 from rod 2's centroid (body frame)

    def outputs(q, v):
        q = np.atleast_2d(q)
        b = q[:, 7:14]
        P2 = b[:, :3] + _rotation_of_quaternions(b[:, 3:]) @ s2
        return {"P2_x": P2[:, 0], "P2_y": P2[:, 1], "P2_z": P2[:, 2]}

    def ref(t):
        r = reference(t, t_end=t_end, L=L, m=m, g=g, width=width, omega0=omega0)
        return {k: r[k] for k in ("P2_x", "P2_y", "P2_z")}

    def draw(ax, q):
        P = [np.zeros(3)] + [q[7 * k:7 * k + 3] + _rotation_of_quaternions(
            q[None, 7 * k + 3:7 * k + 7])[0] @ np.array(
            (POINTS[k + 1] - POINTS[k]) * L / 2) for k in range(5)] + [POINTS[5] * L]
        P = np.array(P)
        # an oblique view: x right, y up, z receding to the lower left
        X, Y = P[:, 0] - 0.5 * P[:, 2], P[:, 1] - 0.3 * P[:, 2]
        ax.plot(X, Y, "-o", color="C0", lw=3)
        ax.plot(X[[5, 0]], Y[[5, 0]], "k--", lw=1)
        ax.set_aspect("equal")
        return ax

    prob = go.Problem(
        name="bricard", system=mdl.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description="IFToMM A04: Bricard's mechanism, five rods and six revolute joints "
                    "(Gruebler-Kutzbach 0, mobility 1: one redundant joint equation), "
                    "Euler parameters (singular mass matrix), gravity along -y; outputs "
                    "the end P2 of rod 2.",
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12},
        solvers=("closed_form", "lagrange", "qp"),
        outputs=outputs, reference=ref, draw=draw,
        params={"L": L, "m": m, "g": g, "width": width, "omega0": omega0, "t_end": t_end},
        units={**{c: ("m" if c.split(".")[-1] in ("x", "y", "z") else "1")
                  for c in mdl.system.coordinates},
               "P2_x": "m", "P2_y": "m", "P2_z": "m", "energy": "J", "length": "m"})
    prob.model = mdl
    return prob
