"""A large spatial open chain: N rods on revolute joints with alternating axes.

The reference for the spatial models' O(n) step.

Rod ``k`` (``k = 0 .. N-1``, solid cylinders of mass ``m``, length ``L``, radius ``r``)
lies, at the reference pose (all joint angles zero), along ``+x`` from ``P_k = (k L, 0,
0)`` to ``P_{k+1}``. Joint ``k`` (at ``P_k``) joins rod ``k - 1`` (the ground for ``k =
0``) to rod ``k``; its axis is ``a_k = z`` for even ``k`` and ``a_k = y`` for odd ``k``
in the world at the reference pose, and it turns with rod ``k - 1``. Gravity ``(0, 0,
-g)``. The chain has ``N`` degrees of freedom (joint angles ``theta_k``); gaussopt
models it with ``7 N`` coordinates (each rod's centroid and Euler parameters), ``N``
normalization rows and ``5 N`` revolute rows, so ``N >= 5`` takes the sparse O(n) step
(:mod:`gaussopt.gauss.band_step`, models with at least 30 coordinates).

Kinematics (this module's own, numpy): rod ``k``'s rotation ``R_k = R_{k-1} Rot(a_k,
theta_k)`` (``R_{-1} = I``), the world joint axis ``u_k = R_{k-1} a_k``, ``P_{k+1} = P_k
+ R_k (L, 0, 0)``, centroid ``c_k = P_k + R_k (L/2, 0, 0)``; angular velocities ``w_k =
w_{k-1} + theta_k' u_k`` and, since ``u_k' = w_{k-1} x u_k``, ``w_k' = w_{k-1}' +
theta_k'' u_k + theta_k' w_{k-1} x u_k`` (:func:`joint_accelerations` inverts it).

Reference (:func:`forward_dynamics`, written from scratch, never calling
:mod:`gaussopt.multibody.spatial`): the joint-space equations ``M(theta) theta'' = Q``.
``M`` by the composite-rigid-body sums ``M_ij = sum_{k >= max(i, j)} m (u_i x d_ki) .
(u_j x d_kj) + u_i . I_k u_j`` (``d_kj = c_k - P_j``, ``I_k = R_k diag(m r^2/2, t, t)
R_k^T``, ``t = m (3 r^2 + L^2) / 12``); ``Q`` by recursive Newton-Euler with
``theta'' = 0``: a forward pass for the velocity-product accelerations of the centroids
and the angular accelerations, then a backward pass accumulating the outboard forces
``F_k = m (g - a_k)`` and moments ``T_k = -I_k w_k' - w_k x I_k w_k`` about each joint,
``Q_j = u_j . sum_{k >= j} (d_kj x F_k + T_k)``. ``reference(t)`` integrates it by
DOP853 at ``rtol = atol = 1e-12``.

:func:`pinocchio_model` builds the same chain in Pinocchio (revolute joints ``RZ``/``RY``)
for the benchmark and a test: ``pinocchio.aba`` agrees with :func:`forward_dynamics`.

Measured (N = 10, defaults): :func:`forward_dynamics` equals ``pinocchio.aba`` to 9e-15
relative at 20 random states; gaussopt's step (sparse path, 70 coordinates) gives the
joint accelerations to 1.5e-14 relative (N = 3, dense kernel: 2.4e-15). A 2 s run at
the problem's settings (DOP853, ``rtol = atol = 1e-10``, projection) stays within
1.7e-10 rad of the reference, energy within 6e-11 relative, every right-hand side
on the O(n) path (1904 of 1904; 0.18 s on a 2-core machine). ``benchmarks/run.py``
times the step against ``pinocchio.aba`` and against gaussopt's dense step.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable

from gaussopt_problems._rigid import quaternion, quaternion_rate, rotation

_EX = np.array([1.0, 0.0, 0.0])


def axis(k: int) -> np.ndarray:
    """The local axis of joint ``k`` (in rod ``k - 1``'s frame, the world at the
    reference pose): ``z`` for even ``k``, ``y`` for odd ``k``."""
    return np.array([0.0, 0.0, 1.0]) if k % 2 == 0 else np.array([0.0, 1.0, 0.0])


def _rot(a: np.ndarray, th: float) -> np.ndarray:
    """Rotation by ``th`` about the unit coordinate axis ``a`` (Rodrigues)."""
    c, s = np.cos(th), np.sin(th)
    K = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.eye(3) + s * K + (1 - c) * (K @ K)


def rod_inertia(m: float, L: float, r: float) -> np.ndarray:
    """Principal moments of a solid cylinder about its centroid, its axis along body
    ``x``: ``(m r^2/2, m (3 r^2 + L^2)/12, m (3 r^2 + L^2)/12)`` [kg m^2]."""
    t = m * (3 * r**2 + L**2) / 12
    return np.array([m * r**2 / 2, t, t])


def kinematics(theta: Sequence[float], dtheta: Sequence[float], L: float = 0.5) -> dict:
    """Rotations ``R`` (N, 3, 3), world joint axes ``u``, joint points ``P``, centroids
    ``c`` (N, 3) and their velocities ``vc``, angular velocities ``w`` (N, 3) of the
    chain at the joint angles ``theta`` and rates ``dtheta`` (see the module docstring).

    Parameters
    ----------
    theta, dtheta : sequence of float, length N
        Joint angles [rad] and rates [rad/s].
    L : float
        Rod length [m].
    """
    theta, dtheta = np.asarray(theta, dtype=float), np.asarray(dtheta, dtype=float)
    N = len(theta)
    R, u, P, c, vc, w = (np.empty((N, 3, 3)), np.empty((N, 3)), np.empty((N, 3)),
                         np.empty((N, 3)), np.empty((N, 3)), np.empty((N, 3)))
    Rp, Pk, vP, wp = np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3)
    for k in range(N):
        a = axis(k)
        u[k] = Rp @ a
        R[k] = Rp @ _rot(a, theta[k])
        w[k] = wp + dtheta[k] * u[k]
        half = R[k] @ (0.5 * L * _EX)
        P[k], c[k] = Pk, Pk + half
        vc[k] = vP + np.cross(w[k], half)
        Pk, vP = Pk + 2 * half, vP + np.cross(w[k], 2 * half)
        Rp, wp = R[k], w[k]
    return {"R": R, "u": u, "P": P, "c": c, "vc": vc, "w": w}


def state(theta: Sequence[float], dtheta: Sequence[float],
          L: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """gaussopt's ``(q, v)`` (``7 N`` each: centroid and Euler parameters of each rod,
    the body frames the rods' reference frames turned by ``R_k``) at the joint angles
    ``theta`` and rates ``dtheta`` [rad, rad/s], from :func:`kinematics`."""
    s = kinematics(theta, dtheta, L)
    q, v = [], []
    for R, c, vc, w in zip(s["R"], s["c"], s["vc"], s["w"]):
        p = quaternion(R)
        q += [c, p]
        v += [vc, quaternion_rate(p, R.T @ w)]
    return np.concatenate(q), np.concatenate(v)


def _qmul_conj(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Vector part of ``a (x) conj(b)`` for quaternions of shape (..., 4)."""
    a0, a1, a2, a3 = np.moveaxis(a, -1, 0)
    b0, b1, b2, b3 = np.moveaxis(b, -1, 0)
    return np.stack([-a0 * b1 + a1 * b0 - a2 * b3 + a3 * b2,
                     -a0 * b2 + a2 * b0 - a3 * b1 + a1 * b3,
                     -a0 * b3 + a3 * b0 - a1 * b2 + a2 * b1], axis=-1)


def _split(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    return q.reshape(q.shape[:-1] + (q.shape[-1] // 7, 7))


def joint_angles(q: np.ndarray) -> np.ndarray:
    """Joint angles from gaussopt's ``q`` (shape ``(7 N,)`` -> ``(N,)``, or ``(T, 7 N)``
    -> ``(T, N)`` unwrapped along ``T``): ``Rot(a_k, theta_k) = R_{k-1}^T R_k`` with
    ``R`` from the Euler parameters."""
    b = _split(q)
    R = rotation(b[..., 3:].reshape(-1, 4)).reshape(b.shape[:-1] + (3, 3))
    Rp = np.concatenate([np.broadcast_to(np.eye(3), R[..., :1, :, :].shape), R[..., :-1, :, :]],
                        axis=-3)
    rel = np.swapaxes(Rp, -1, -2) @ R
    N = b.shape[-2]
    th = np.empty(b.shape[:-1])
    for k in range(N):
        if k % 2 == 0:      # Rz: rel[1, 0] = sin, rel[0, 0] = cos
            th[..., k] = np.arctan2(rel[..., k, 1, 0], rel[..., k, 0, 0])
        else:               # Ry: rel[0, 2] = sin
            th[..., k] = np.arctan2(rel[..., k, 0, 2], rel[..., k, 0, 0])
    return np.unwrap(th, axis=0) if th.ndim == 2 else th


def joint_accelerations(q: np.ndarray, v: np.ndarray, a: np.ndarray,
                        L: float = 0.5) -> np.ndarray:
    """Joint accelerations ``theta''`` (N,) from gaussopt's ``q, v, a`` (``7 N`` each):
    world ``w = 2 vec(p' (x) conj p)``, ``w' = 2 vec(p'' (x) conj p)`` (``p`` unit), the
    world axes ``u_k = R_{k-1} a_k`` and ``theta_k'' = u_k . (w_k' - w_{k-1}' - theta_k'
    w_{k-1} x u_k)`` (see the module docstring). ``L`` [m] does not enter (the axes
    follow from the rotations alone); accepted for symmetry with :func:`state`."""
    bq, bv, ba = _split(q), _split(v), _split(a)
    p = bq[:, 3:] / np.linalg.norm(bq[:, 3:], axis=1)[:, None]
    w = 2 * _qmul_conj(bv[:, 3:], p)
    dw = 2 * _qmul_conj(ba[:, 3:], p)
    R = rotation(p)
    N = len(p)
    out = np.empty(N)
    wp, dwp, Rp = np.zeros(3), np.zeros(3), np.eye(3)
    for k in range(N):
        u = Rp @ axis(k)
        dth = u @ (w[k] - wp)
        out[k] = u @ (dw[k] - dwp - dth * np.cross(wp, u))
        wp, dwp, Rp = w[k], dw[k], R[k]
    return out


def forward_dynamics(theta: Sequence[float], dtheta: Sequence[float], N: int, L: float,
                     m: float, r: float, g: float) -> np.ndarray:
    """``theta''`` (N,) of the chain from its joint-space equations (composite-rigid-body
    mass matrix, recursive Newton-Euler bias; module docstring), numpy only.

    Parameters
    ----------
    theta, dtheta : sequence of float, length N
        Joint angles [rad] and rates [rad/s].
    N : int
        Number of rods.
    L, m, r, g : float
        Rod length [m], mass [kg], radius [m]; gravity (along -z) [m/s^2].
    """
    theta, dtheta = np.asarray(theta, dtype=float), np.asarray(dtheta, dtype=float)
    s = kinematics(theta, dtheta, L)
    R, u, P, c, w = s["R"], s["u"], s["P"], s["c"], s["w"]
    Ib = rod_inertia(m, L, r)
    I = np.einsum("kab,b,kcb->kac", R, Ib, R)             # world inertia about centroids
    # mass matrix: composite sums over the outboard bodies k >= max(i, j)
    d = c[:, None, :] - P[None, :, :]                      # d[k, j] = c_k - P_j
    mask = np.tril(np.ones((N, N)))                        # [k, j]: j <= k
    Jv = np.cross(u[None, :, :], d) * mask[:, :, None]     # centroid velocity columns
    Jw = u[None, :, :] * mask[:, :, None]
    M = m * np.einsum("kia,kja->ij", Jv, Jv) + np.einsum("kia,kab,kjb->ij", Jw, I, Jw)
    # Newton-Euler with theta'' = 0: forward pass of the velocity-product accelerations
    ac, dw = np.empty((N, 3)), np.empty((N, 3))
    aP, dwp, wp = np.zeros(3), np.zeros(3), np.zeros(3)
    for k in range(N):
        dw[k] = dwp + dtheta[k] * np.cross(wp, u[k])
        half = R[k] @ (0.5 * L * _EX)
        ac[k] = aP + np.cross(dw[k], half) + np.cross(w[k], np.cross(w[k], half))
        aP = aP + np.cross(dw[k], 2 * half) + np.cross(w[k], np.cross(w[k], 2 * half))
        dwp, wp = dw[k], w[k]
    F = m * (np.array([0.0, 0.0, -g]) - ac)
    T = -np.einsum("kab,kb->ka", I, dw) - np.cross(w, np.einsum("kab,kb->ka", I, w))
    # backward pass: outboard force and moment about P_j
    Q = np.empty(N)
    f, n = np.zeros(3), np.zeros(3)
    for j in range(N - 1, -1, -1):
        f = f + F[j]
        n = n + T[j] + np.cross(c[j], F[j])               # moments about the origin
        Q[j] = u[j] @ (n - np.cross(P[j], f))
    return np.linalg.solve(M, Q)


def energy(theta: Sequence[float], dtheta: Sequence[float], L: float, m: float, r: float,
           g: float) -> float:
    """Kinetic plus potential energy [J] of the chain from :func:`kinematics`."""
    s = kinematics(theta, dtheta, L)
    Ib = rod_inertia(m, L, r)
    wb = np.einsum("kba,kb->ka", s["R"], s["w"])           # body-frame angular velocities
    return float(0.5 * m * np.sum(s["vc"]**2) + 0.5 * np.sum(Ib * wb**2)
                 + m * g * np.sum(s["c"][:, 2]))


def joint_space_reference(t, N: int, L: float, m: float, r: float, g: float,
                          theta0: Sequence[float], dtheta0: Sequence[float]):
    """The solve_ivp solution (dense output) of :func:`forward_dynamics` from ``theta0,
    dtheta0`` up to ``max(t)``, DOP853 at ``rtol = atol = 1e-12``; ``.sol(t)[:N]`` are
    the joint angles."""
    def rhs(_, y):
        return np.concatenate([y[N:], forward_dynamics(y[:N], y[N:], N, L, m, r, g)])

    t = np.atleast_1d(np.asarray(t, dtype=float))
    return solve_ivp(rhs, (0.0, float(t.max())), np.concatenate([theta0, dtheta0]),
                     method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True)


def pinocchio_model(N: int, L: float, m: float, r: float, g: float):
    """The same chain as a Pinocchio model (``JointModelRZ`` for even, ``JointModelRY``
    for odd joints, each placed ``(L, 0, 0)`` from its parent's; configuration = joint
    angles). Needs ``pinocchio`` (the ``bench`` extra)."""
    import pinocchio as pin

    model = pin.Model()
    model.gravity = pin.Motion(np.array([0.0, 0.0, -g]), np.zeros(3))
    inertia = pin.Inertia(m, np.array([L / 2, 0.0, 0.0]), np.diag(rod_inertia(m, L, r)))
    parent = 0
    for k in range(N):
        joint = pin.JointModelRZ() if k % 2 == 0 else pin.JointModelRY()
        placement = pin.SE3(np.eye(3), np.array([L if k else 0.0, 0.0, 0.0]))
        parent = model.addJoint(parent, joint, placement, f"joint{k}")
        model.appendBodyToJoint(parent, inertia, pin.SE3.Identity())
    return model


def _angles(x, N: int, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.shape != (N,) or not np.all(np.isfinite(x)):
        raise go.ModelError(f"`{name}`: expected {N} finite joint values (one per rod, `N` = "
                            f"{N}), found shape {x.shape} {x.tolist()}; pass a sequence of "
                            f"length N or None for the default.")
    return x


@rebuildable        # its System pickles as this call
def build(N: int = 10, L: float = 0.5, m: float = 1.0, r: float = 0.02, g: float = 9.81,
          theta0: Optional[Sequence[float]] = None, dtheta0: Optional[Sequence[float]] = None,
          t_end: float = 2.0) -> go.Problem:
    """A serial chain of ``N`` rods with alternating revolute axes, released under gravity.

    Parameters
    ----------
    N : int, >= 1
        Number of rods (``7 N`` coordinates; ``N >= 5`` takes the sparse step).
    L : float, > 0
        Rod length [m].
    m : float, > 0
        Rod mass [kg].
    r : float, > 0
        Rod radius [m].
    g : float
        Gravitational acceleration (along -z) [m/s^2].
    theta0 : sequence of float, optional
        Initial joint angles [rad], length ``N``; default ``0.4 sin(k + 1)``.
    dtheta0 : sequence of float, optional
        Initial joint rates [rad/s], length ``N``; default zero.
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: the joint angles ``theta0 .. theta{N-1}`` [rad] and ``energy``
        [J]; ``reference(t)``: the joint angles from :func:`forward_dynamics` integrated
        by DOP853 at ``rtol = atol = 1e-12``. ``model`` is the spatial Model.
    """
    import gaussopt.multibody.spatial as sp

    if int(N) != N or N < 1:
        raise go.ModelError(f"`N`: expected an integer >= 1 (the number of rods), found {N!r}; "
                            "pass e.g. N=10.")
    N = int(N)
    for name, val in (("L", L), ("m", m), ("r", r), ("t_end", t_end)):
        if not (np.isfinite(val) and val > 0):
            raise go.ModelError(f"`{name}`: expected a finite value > 0, found {val!r}; pass a "
                                "positive number.")
    th0 = 0.4 * np.sin(np.arange(N) + 1.0) if theta0 is None else _angles(theta0, N, "theta0")
    dth0 = np.zeros(N) if dtheta0 is None else _angles(dtheta0, N, "dtheta0")
    names = [f"rod{k}" for k in range(N)]
    bodies = [sp.Body(names[k], m, rod_inertia(m, L, r), position=((k + 0.5) * L, 0.0, 0.0))
              for k in range(N)]
    joints = [sp.Revolute(names[k - 1] if k else None, names[k], (k * L, 0.0, 0.0), axis(k))
              for k in range(N)]
    model = sp.Model(bodies, joints, gravity=(0.0, 0.0, -g), name="spatial_chain")
    q0, v0 = state(th0, dth0, L)
    keys = [f"theta{k}" for k in range(N)]

    def outputs(q, v):
        th = joint_angles(np.atleast_2d(q))
        out = {key: th[:, k] for k, key in enumerate(keys)}
        out["energy"] = np.array([model.energy(0.0, qi, vi)
                                  for qi, vi in zip(np.atleast_2d(q), np.atleast_2d(v))])
        return out

    cache = {}

    def reference(t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if "sol" not in cache or cache["sol"].t[-1] < t.max():
            cache["sol"] = joint_space_reference(max(t.max(), t_end), N, L, m, r, g, th0, dth0)
        th = cache["sol"].sol(t)[:N]
        return {key: th[k] for k, key in enumerate(keys)}

    def draw(ax, q):
        b = _split(q)
        R = rotation(b[:, 3:])
        pts = np.vstack([b[:, :3] - 0.5 * L * R[:, :, 0], b[-1:, :3] + 0.5 * L * R[-1:, :, 0]])
        ax.plot(pts[:, 0], pts[:, 2], "-o", lw=2)
        ax.set_aspect("equal")
        return ax

    return go.Problem(
        name="spatial_chain", system=model.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description=f"Spatial serial chain of {N} uniform rods, revolute joints with "
                    f"alternating axes z/y, released under gravity; {7 * N} Euler-parameter "
                    "coordinates (sparse O(n) step from 30).",
        settings={"method": "DOP853", "rtol": 1e-10, "atol": 1e-10,
                  "stabilization": go.Projection()},
        solvers=("closed_form", "lagrange"),
        outputs=outputs, reference=reference, draw=draw, model=model,
        params={"N": N, "L": L, "m": m, "r": r, "g": g, "theta0": th0.tolist(),
                "dtheta0": dth0.tolist(), "t_end": t_end},
        units={**{key: "rad" for key in keys}, "energy": "J", "length": "m"})
