"""The woodpecker toy (Glocker 1995): a sleeve that jams on a pole and a bird on a spring,
three frictional contacts, impacts with and without rebound.

A sleeve (mass ``m_M``, inertia ``J_M``) slides down a vertical pole whose radius ``r_O``
is a little smaller than the sleeve's bore ``r_M``; a bird (``m_S``, ``J_S``) hangs on
it by a rotational spring ``c_phi``. Coordinates ``q = (y, phi_M, phi_S)``: the sleeve's
height, the sleeve's tilt and the bird's angle. Glocker's model is linear in small
angles (his thesis, pp. 162ff, and Siconos's ``Examples/Mechanics/Woodpecker``)::

    M = [[m_S + m_M,  m_S l_M,            m_S l_G          ],
         [m_S l_M,    J_M + m_S l_M^2,    m_S l_M l_G      ],
         [m_S l_G,    m_S l_M l_G,        J_S + m_S l_G^2  ]]
    F = -(m_S + m_M) g, -m_S l_M g, -m_S l_G g  -  c_phi (0, phi_M - phi_S, phi_S - phi_M)

and so are its three contacts (Coulomb friction ``mu = 0.3`` at each):

* the beak on the pole, ``g_1 = l_M + l_G - l_S - r_O - h_S phi_S``, slip
  ``y + l_M phi_M + (l_G - l_S) phi_S``, restitution 0.5;
* the sleeve's two edges on the pole, ``g_2,3 = r_M - r_O -+ h_M phi_M`` (the rows
  ``sleeve[0]`` and ``sleeve[1]`` below: ``sleeve[0]`` closes when the sleeve tilts
  with ``phi_M < 0``), slip ``y + r_M phi_M``, restitution 0.

The toy's motion is a limit cycle of about 0.146 s: the sleeve, tilted against the pole
on one edge, slides, jams (sticks) while the bird swings, slides again and opens; the bird
swings forward and its beak strikes the pole (a rebound with friction), the sleeve's
other edge strikes the pole and the sleeve slides up a little, opens, and the first edge
strikes again. The initial state is Glocker's point of the cycle (``y = 0``,
``phi_M = -0.1036``, ``phi_S = -0.2788``, ``y' = -0.3411``, ``phi_M' = 0``,
``phi_S' = -7.4583``), except that ``phi_M`` starts exactly on the contact,
``-(r_M - r_O) / h_M = -0.103448...``: the published four digits put the edge 8.8e-7 m
inside the pole. The point is near the cycle, not on it to its four digits: at rtol
1e-12 the run passes ``phi_S = -0.2788`` in every later cycle (period about 0.146 s) with
``y'`` about -0.339 to -0.341 and ``phi_S'`` about -7.455 to -7.470, a period-two
oscillation about the cycle that decays slowly (published: -0.3411 and -7.4583).

Every event of the cycle (three contacts, impacts with rebound and without, stick and
slip) is decided by the contact problem of :mod:`gaussopt.gauss.contact_problem`.
The test (``tests/test_woodpecker.py``) checks the run against the same model integrated
mode by mode in the test itself.

Ch. Glocker, *Dynamik von Starrkoerpersystemen mit Reibung und Stoessen*, PhD thesis,
TU Muenchen (1995); R. I. Leine, Ch. Glocker, D. H. van Campen, "Nonlinear dynamics of
the woodpecker toy", Proc. ASME DETC 2001.
"""

from __future__ import annotations

import math

import numpy as np

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.model.system import rebuildable

#: Glocker's parameters (SI units): geometry [m], masses [kg], inertias [kg m^2], spring
#: [N m / rad], gravity [m/s^2]
PARAMETERS = {"r_O": 0.0025, "r_M": 0.0031, "h_M": 0.0058, "l_M": 0.010, "l_G": 0.015,
              "h_S": 0.02, "l_S": 0.0201, "m_M": 0.0003, "m_S": 0.0045, "J_M": 5.0e-9,
              "J_S": 7.0e-7, "c_phi": 0.0056, "g": 9.81}
#: the contacts' coefficients: restitution of the beak and of the sleeve, Coulomb friction
CONTACT = {"e_beak": 0.5, "e_sleeve": 0.0, "mu": 0.3}
#: Glocker's initial state on the limit cycle (``phi_M`` as published; the run starts on
#: the contact instead, see the module docstring)
INITIAL = {"y": 0.0, "phi_M": -0.1036, "phi_S": -0.2788, "v_y": -0.3411, "w_M": 0.0,
           "w_S": -7.4583}


def matrices(**params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(M, F0, K)`` of Glocker's model: the constant mass matrix, the gravity forces and
    the spring's stiffness (the force is ``F0 - K q``)."""
    p = {**PARAMETERS, **params}
    mM, mS, JM, JS, lM, lG = (p[k] for k in ("m_M", "m_S", "J_M", "J_S", "l_M", "l_G"))
    c, g = p["c_phi"], p["g"]
    M = np.array([[mS + mM, mS * lM, mS * lG],
                  [mS * lM, JM + mS * lM * lM, mS * lM * lG],
                  [mS * lG, mS * lM * lG, JS + mS * lG * lG]])
    F0 = np.array([-(mS + mM) * g, -mS * lM * g, -mS * lG * g])
    K = np.array([[0.0, 0.0, 0.0], [0.0, c, -c], [0.0, -c, c]])
    return M, F0, K


def contact_rows(**params) -> dict:
    """The contacts as affine functions of ``q``: ``gap = G q + g0`` and ``slip = T q``
    for the beak (one row) and the sleeve (two rows)."""
    p = {**PARAMETERS, **params}
    rO, rM, hM, lM, lG, hS, lS = (p[k] for k in ("r_O", "r_M", "h_M", "l_M", "l_G", "h_S",
                                                 "l_S"))
    return {"beak": (np.array([[0.0, 0.0, -hS]]), np.array([lM + lG - lS - rO]),
                     np.array([[1.0, lM, lG - lS]])),
            "sleeve": (np.array([[0.0, hM, 0.0], [0.0, -hM, 0.0]]),
                       np.array([rM - rO, rM - rO]),
                       np.array([[1.0, rM, 0.0], [1.0, rM, 0.0]]))}


@rebuildable
def build(mu: float = 0.3, e_beak: float = 0.5, e_sleeve: float = 0.0,
          t_end: float = 0.3) -> go.Problem:
    """The woodpecker toy with Glocker's parameters, from his point of the limit cycle
    (defaults: 0.3 s, two cycles).

    Parameters
    ----------
    mu : float, > 0
        Coulomb friction coefficient of the three contacts [1].
    e_beak, e_sleeve : float, in [0, 1]
        Newton's restitution of the beak's and of the sleeve's impacts [1].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``y`` [m], ``phi_M``, ``phi_S`` [rad] and the sleeve's speed
        ``v_y`` [m/s]. No reference in the problem: the test integrates the model mode by
        mode.
    """
    if not (math.isfinite(mu) and mu > 0):
        raise ModelError(f"`mu` must be a finite friction coefficient > 0, found {mu!r}.")
    if not (math.isfinite(t_end) and t_end > 0):
        raise ModelError(f"`t_end` must be a finite time > 0 [s], found {t_end!r}.")
    M, F0, K = matrices()
    rows = contact_rows()

    def force(t, q, v):
        return F0 - K @ q

    def energy(t, q, v):
        return float(0.5 * v @ M @ v - F0 @ q + 0.5 * q @ K @ q)

    contacts = []
    for name, e in (("beak", e_beak), ("sleeve", e_sleeve)):
        G, g0, T = rows[name]
        zero = np.zeros(G.shape[0])
        contacts.append(go.Contact(
            lambda t, q, G=G, g0=g0: G @ q + g0, lambda t, q, G=G: G,
            lambda t, q, v, z=zero: z, slip=lambda t, q, T=T: T @ q,
            slip_jacobian=lambda t, q, T=T: T, slip_gamma=lambda t, q, v, z=zero: z,
            restitution=e, friction=mu, rheonomic=False, name=name))
    system = go.System(("y", "phi_M", "phi_S"), mass=M, force=force, constraints=contacts,
                       energy=energy, name="woodpecker")
    p = PARAMETERS
    q0 = np.array([INITIAL["y"], -(p["r_M"] - p["r_O"]) / p["h_M"], INITIAL["phi_S"]])
    v0 = np.array([INITIAL["v_y"], INITIAL["w_M"], INITIAL["w_S"]])

    def outputs(q, v):
        q, v = np.atleast_2d(q), np.atleast_2d(v)
        return {"y": q[:, 0], "phi_M": q[:, 1], "phi_S": q[:, 2], "v_y": v[:, 0]}

    def draw(ax, q):
        # Glocker's small-angle geometry: the pole at x = 0, the sleeve centred on it at
        # height y, the spring's hinge at l_M from the sleeve, the bird's centre at l_G
        # from the hinge, its beak at l_S back towards the pole and h_S up
        y, pm, ps = q
        lM, lG, lS, hS, hM, rM, rO = (p[k] for k in ("l_M", "l_G", "l_S", "h_S", "h_M",
                                                     "r_M", "r_O"))
        ax.axvspan(-rO, rO, color="0.8")
        c, s = math.cos(pm), math.sin(pm)
        box = np.array([[-rM, -hM], [rM, -hM], [rM, hM], [-rM, hM], [-rM, -hM]])
        ax.plot(box[:, 0] * c - box[:, 1] * s, y + box[:, 0] * s + box[:, 1] * c, "C0-")
        hinge = np.array([lM, y + lM * pm])
        centre = hinge + [lG, lG * ps]
        beak = centre + [-lS - hS * ps, -lS * ps]
        ax.plot([0.0, hinge[0], centre[0], beak[0]], [y, hinge[1], centre[1], beak[1]],
                "C1o-", ms=3)
        ax.set_aspect("equal")
        return ax

    return go.Problem(
        name="woodpecker", system=system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description=("Glocker's woodpecker toy: a sleeve jamming on a pole and a bird on a "
                     f"spring, three contacts with friction {mu:g} (beak e = {e_beak:g}, "
                     f"sleeve e = {e_sleeve:g}); a limit cycle of stick, slip and impacts."),
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12},
        solvers=("closed_form", "lagrange", "qp"),
        outputs=outputs, draw=draw,
        params={"mu": mu, "e_beak": e_beak, "e_sleeve": e_sleeve},
        units={"y": "m", "phi_M": "rad", "phi_S": "rad", "v_y": "m/s", "energy": "J",
               "length": "m", "constraints": ("m", "m"), "contact_slip": "m"})
