"""A torque-free rigid body in space: the intermediate-axis flip, and free precession.

One spatial body (:class:`gaussopt.multibody.spatial.Body`, seven coordinates:
centroid and Euler parameters, whose mass matrix ``diag(m I3, 4 G^T J G)`` is
singular), no joints, no gravity. Principal moments ``J1, J2, J3`` about the
centroid; it starts with the body-frame angular velocity ``(w1, w2, w3)`` from a
tilted orientation (a rotation by ``tilt`` about the world axis ``(1, 2, 2)/3``), its
centroid moving uniformly at ``(0.3, -0.2, 0.1)`` m/s. With the default moments
``J1 < J2 < J3`` and the spin mostly about the intermediate axis 2, the body flips
over and back (the Dzhanibekov effect), the rotation unstable about that axis.

References (all from this module's own equations, never the library's):

* the integrals: the energy ``E = 1/2 m |x'|^2 + 1/2 w'.J w'`` and the angular
  momentum about the centroid in the world frame ``L = R J w'`` (``w'`` the
  body-frame angular velocity, ``R`` the body's rotation) are constant, as are the
  centroid's velocity;
* ``reference(t)``: the body angular velocity in Jacobi's elliptic functions
  (:func:`elliptic_angular_velocity`, Landau & Lifshitz sec. 37); for an axisymmetric
  body (``J1 = J2``) it is the free precession (:func:`precession`): ``w3`` constant and
  ``w1 + i w2`` turning at ``Omega = (J3 - J1)/J1 w3``. Euler's equations ``J w'' = (J
  w') x w'`` with ``p' = 1/2 p (x) (0, w')``, integrated by DOP853 at ``rtol = atol =
  1e-13`` (:func:`euler_reference`), cross-check it (2e-11 rad/s over the default 20 s).

Measured (defaults, 20 s, DOP853 at the settings' ``rtol = atol = 3e-14``, projection;
371 steps): energy and world angular momentum within 3.3e-13 and 4.3e-13 (relative) of
their initial values; the drifts scale like ``rtol`` (1.2e-11 and 1.4e-11 at ``rtol =
1e-12``, 240 steps). Euler-parameter norm within 7e-15 of 1 (2.7e-10 without the
projection, at ``rtol = 1e-12``). Near the separatrix the flow of ``w`` amplifies
errors (by 270 over 5 s, 6e4 over 20 s): ``w`` follows the elliptic solution to 1.5e-11
rad/s over 5 s, 1.9e-8 over 20 s. An axisymmetric body (``J1 = J2 = 0.03``, ``J3 =
0.05``, ``w = (0.5, -0.3, 4)``) precesses at the analytic rate to 2.7e-12 (relative) at
``rtol = 1e-12``.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import ellipj, ellipkinc, ellipkm1

import gaussopt as go
from gaussopt.model.system import rebuildable

from gaussopt_problems._rigid import body_angular_velocity, quaternion, quaternion_rate, rotation

VELOCITY = np.array([0.3, -0.2, 0.1])          # of the centroid [m/s]
TILT_AXIS = np.array([1.0, 2.0, 2.0]) / 3.0


def initial_rotation(tilt: float) -> np.ndarray:
    """The initial body frame: a rotation by ``tilt`` [rad] about ``(1, 2, 2)/3`` (Rodrigues)."""
    k = TILT_AXIS
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + np.sin(tilt) * K + (1 - np.cos(tilt)) * K @ K


def euler_reference(t, J, w0, p0, dense: bool = False):
    """Euler parameters and body angular velocity ``(p, w')`` at ``t``, shape (7,
    len(t)), from Euler's equations and ``p' = 1/2 p (x) (0, w')`` (DOP853, ``rtol =
    atol = 1e-13``); the solve_ivp solution when ``dense``."""
    J = np.asarray(J, dtype=float)

    def rhs(_, y):
        w = y[4:]
        return np.concatenate([quaternion_rate(y[:4], w), np.cross(J * w, w) / J])

    t = np.atleast_1d(np.asarray(t, dtype=float))
    sol = solve_ivp(rhs, (0.0, float(t.max())), np.concatenate([p0, w0]), method="DOP853",
                    rtol=1e-13, atol=1e-13, dense_output=True)
    return sol if dense else sol.sol(t)


def precession(t, J1: float, J3: float, w0) -> np.ndarray:
    """Body angular velocity of the torque-free axisymmetric body (``J2 = J1``), shape
    (len(t), 3): ``w3 = w3(0)``, ``w1 + i w2 = (w1(0) + i w2(0)) exp(i Omega t)``,
    ``Omega = (J3 - J1)/J1 w3`` (from ``J1 w1' = (J1 - J3) w2 w3``, ``J1 w2' =
    (J3 - J1) w3 w1``)."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    w1, w2, w3 = (float(x) for x in w0)
    Om = (J3 - J1) / J1 * w3
    c, s = np.cos(Om * t), np.sin(Om * t)
    return np.stack([w1 * c - w2 * s, w1 * s + w2 * c, np.full_like(t, w3)], axis=1)


def elliptic_angular_velocity(t, J, w0) -> np.ndarray:
    """Body angular velocity of the torque-free body from Jacobi's elliptic functions
    (Landau & Lifshitz, *Mechanics*, sec. 37), shape (len(t), 3).

    With the axes sorted by moment, ``I_1 <= I_2 <= I_3`` (not all equal), ``2E =
    sum I_n w_n^2`` and ``M^2 = sum I_n^2 w_n^2``: for ``M^2 > 2 E I_2`` (``(i, j, k) =
    (1, 2, 3)``; otherwise ``(3, 2, 1)``)::

        w_i = A cn(u),  w_j = B sn(u),  w_k = C dn(u),  u = u0 + s lam t,
        A^2 = (2E I_k - M^2) / (I_i (I_k - I_i)),
        B^2 = (2E I_k - M^2) / (I_j (I_k - I_j)),
        C^2 = (M^2 - 2E I_i) / (I_k (I_k - I_i)),
        lam^2 = (I_k - I_j)(M^2 - 2E I_i) / (I_i I_j I_k),
        1 - k^2 = (I_k - I_i)(M^2 - 2E I_j) / ((I_k - I_j)(M^2 - 2E I_i)),

    ``B > 0``, ``A`` and ``C`` with the sign of ``w_k(0)`` (``dn > 0``; the second case
    is the first with the suffixes 1 and 3 exchanged, which Euler's equations allow with
    these signs), ``s = +-1`` the parity of the sorting as a permutation of the body axes
    (Euler's equations are invariant under cyclic permutations only), and ``u0`` from
    ``sn(u0) = w_j(0)/B``, ``cn(u0) = w_i(0)/A`` (the incomplete integral of the first
    kind, continued by ``F(phi + n pi) = F(phi) + 2 n K``). The differences ``M^2 - 2E
    I_n = sum_m I_m (I_m - I_n) w_m^2`` are summed term by term (no cancellation near the
    separatrix). An axisymmetric body gives ``k = 0``: the free precession
    (:func:`precession`); a steady rotation about a principal axis gives ``w0`` throughout.

    Raises
    ------
    ModelError
        ``w0`` on the separatrix (``M^2 = 2 E I_2`` exactly, not a steady rotation): the
        motion is asymptotic, not periodic.
    """
    t = np.atleast_1d(np.asarray(t, dtype=float))
    J, w0 = np.asarray(J, dtype=float), np.asarray(w0, dtype=float)
    order = np.argsort(J, kind="stable")
    I, W = J[order], w0[order]
    if I[0] == I[2]:
        return np.tile(w0, (len(t), 1))                   # a spherical body: w constant

    def excess(n):                                        # M^2 - 2E I_n
        return float(np.sum(I * (I - I[n]) * W**2))

    i, j, k = (0, 1, 2) if excess(1) > 0 else (2, 1, 0)
    s = 1.0 if tuple(order) in ((0, 1, 2), (1, 2, 0), (2, 0, 1)) else -1.0
    Ii, Ij, Ik = I[i], I[j], I[k]
    Ek, Ei, Ej = -excess(k), excess(i), excess(j)         # 2E I_k - M^2, M^2 - 2E I_i, ...
    if Ek * (Ik - Ii) <= 0 or Ei * (Ik - Ii) <= 0 or W[i] == W[k] == 0:
        return np.tile(w0, (len(t), 1))                   # a steady rotation about an axis
    if Ej == 0:
        raise go.ModelError(f"`w0` = {w0.tolist()} lies on the separatrix (M^2 = 2 E I_2): its "
                            "motion is not periodic; perturb `w0`.")
    A = np.sqrt(Ek / (Ii * (Ik - Ii)))
    B = np.sqrt(Ek / (Ij * (Ik - Ij)))
    C = np.sqrt(Ei / (Ik * (Ik - Ii)))
    lam = np.sqrt((Ik - Ij) * Ei / (Ii * Ij * Ik))
    m1 = (Ik - Ii) * Ej / ((Ik - Ij) * Ei)                # 1 - k^2
    sign = 1.0 if W[k] >= 0 else -1.0
    A, C = sign * A, sign * C
    K = ellipkm1(m1)
    phi0 = np.arctan2(W[j] / B, W[i] / A)
    n = np.round(phi0 / np.pi)
    u0 = ellipkinc(phi0 - n * np.pi, 1 - m1) + 2 * n * K
    sn, cn, dn, _ = ellipj(u0 + s * lam * t, 1 - m1)
    out = np.empty((len(t), 3))
    out[:, order[i]], out[:, order[j]], out[:, order[k]] = A * cn, B * sn, C * dn
    return out


def observables(q: np.ndarray, v: np.ndarray, m: float, J) -> dict:
    """From states of shape (N, 7): the body angular velocity ``w1, w2, w3`` [rad/s],
    the world angular momentum about the centroid ``Lx, Ly, Lz`` [kg m^2/s] (``R J
    w'``), the energy ``E`` [J], the centroid velocity ``vx, vy, vz`` [m/s] and the
    Euler parameters' norm ``pnorm``."""
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    J = np.asarray(J, dtype=float)
    w = body_angular_velocity(q[:, 3:7], v[:, 3:7])
    L = np.einsum("nij,nj->ni", rotation(q[:, 3:7]), J * w)
    E = 0.5 * m * np.einsum("ij,ij->i", v[:, :3], v[:, :3]) + 0.5 * np.einsum("ij,ij->i", w, J * w)
    return {"w1": w[:, 0], "w2": w[:, 1], "w3": w[:, 2], "Lx": L[:, 0], "Ly": L[:, 1],
            "Lz": L[:, 2], "E": E, "vx": v[:, 0], "vy": v[:, 1], "vz": v[:, 2],
            "pnorm": np.linalg.norm(q[:, 3:7], axis=1)}


@rebuildable        # its System pickles as this call
def build(m: float = 2.0, J1: float = 0.02, J2: float = 0.035, J3: float = 0.05,
          w1: float = 0.02, w2: float = 4.0, w3: float = 0.03, tilt: float = 0.7,
          t_end: float = 20.0) -> go.Problem:
    """The torque-free body (defaults: spun near its intermediate axis; ``w2`` reverses at
    3.3, 9.5 and 15.7 s).

    Parameters
    ----------
    m : float, > 0
        Mass [kg].
    J1 : float, > 0
        Principal moment of inertia about the body x-axis [kg m^2].
    J2 : float, > 0
        Principal moment about the body y-axis [kg m^2].
    J3 : float, > 0
        Principal moment about the body z-axis [kg m^2].
    w1 : float
        Initial angular velocity about the body x-axis [rad/s].
    w2 : float
        Initial angular velocity about the body y-axis [rad/s].
    w3 : float
        Initial angular velocity about the body z-axis [rad/s].
    tilt : float
        Initial rotation about the world axis (1, 2, 2)/3 [rad].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``w1, w2, w3`` (body frame) and the integrals (see
        :func:`observables`); ``reference(t)``: ``w1, w2, w3`` and ``Lx, Ly, Lz``, ``E``
        (constant). ``model`` is the spatial Model.
    """
    import gaussopt.multibody.spatial as sp

    J = np.array([J1, J2, J3])
    wb = np.array([w1, w2, w3])
    R0 = initial_rotation(tilt)
    p0 = quaternion(R0)
    q0 = np.concatenate([np.zeros(3), p0])
    v0 = np.concatenate([VELOCITY, quaternion_rate(p0, wb)])
    model = sp.Model([sp.Body("body", m, (J1, J2, J3), orientation=R0)], [],
                     gravity=(0.0, 0.0, 0.0), name="free_body")
    L0 = R0 @ (J * wb)
    E0 = 0.5 * m * VELOCITY @ VELOCITY + 0.5 * wb @ (J * wb)

    def outputs(q, v):
        return observables(q, v, m, J)

    def reference(t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        w = elliptic_angular_velocity(t, J, wb)
        out = {"w1": w[:, 0], "w2": w[:, 1], "w3": w[:, 2], "E": np.full_like(t, E0)}
        out.update({k: np.full_like(t, L0[i]) for i, k in enumerate(("Lx", "Ly", "Lz"))})
        return out

    axis = "symmetric" if J1 == J2 else "asymmetric"
    return go.Problem(
        name="free_body", system=model.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description=f"Torque-free {axis} rigid body, Euler-parameter coordinates (singular "
                    f"mass matrix), spun at {tuple(float(x) for x in wb)} rad/s (body frame); "
                    "energy and world angular momentum conserved.",
        # rtol 3e-14 (just above the 100 eps floor): the energy and the angular momentum
        # drift by about 10 rtol over 20 s, the 1e-12 needs rtol < 7e-14
        settings={"method": "DOP853", "rtol": 3e-14, "atol": 3e-14,
                  "stabilization": go.Projection()},
        solvers=("closed_form", "lagrange"),
        outputs=outputs, reference=reference, model=model,
        params={"m": m, "J1": J1, "J2": J2, "J3": J3, "w1": w1, "w2": w2, "w3": w3,
                "tilt": tilt},
        units={"w1": "rad/s", "w2": "rad/s", "w3": "rad/s", "Lx": "kg m^2/s",
               "Ly": "kg m^2/s", "Lz": "kg m^2/s", "E": "J", "vx": "m/s", "vy": "m/s",
               "vz": "m/s", "pnorm": "1", "energy": "J", "length": "m"})
