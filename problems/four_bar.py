"""Paper 001: parallelogram four-bar with a singular mass matrix.

Three uniform rods (m = 12 kg, l = 2 m) in the vertical plane, redundant
coordinates q = (th1, th2, th3). The paper's model: M = diag(4 m l^2/3,
m l^2/3, 0) (singular), Q = (psi - 3/2 m g l cos th1, -1/2 m g l cos th2, 0),
constraints Phi = (l sin th1 - l sin th2, th1 + th3 - pi) = 0, start at
th1 = th2 = pi/3, th3 = 2 pi/3, at rest.

Reference: on the physical (parallelogram) branch th2 = th1, th3 = pi - th1,
the reduced equation is (5/3) m l^2 th1'' = psi - 2 m g l cos th1,
integrated at rtol = atol = 1e-13.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable
from gaussopt.study.problem import ga_settings, output_grid

G = 9.8


_MODEL = None


def model():
    """The paper's model derived once from its Lagrangian (sympy), parameters symbolic.

    ``T = 1/2 (4 m l^2/3) th1'^2 + 1/2 (m l^2/3) th2'^2`` (no th3' term: M is
    singular), ``V = m g l (3/2 sin th1 + 1/2 sin th2) - psi th1`` (the constant
    torque ``psi`` on the crank is conservative: its potential is ``-psi th1``, so
    ``T + V`` is the conserved energy), holonomic ``(l sin th1 - l sin th2,
    th1 + th3 - pi)``.
    """
    global _MODEL
    if _MODEL is None:
        import sympy as sp
        from sympy.physics.mechanics import dynamicsymbols

        from gaussopt.symbolic import SymbolicModel

        th1, th2, th3 = q = dynamicsymbols("th1 th2 th3")
        t = dynamicsymbols._t
        m, l, g, psi = sp.symbols("m l g psi", positive=True)
        T = sp.Rational(1, 2) * (4 * m * l**2 / 3) * th1.diff(t) ** 2 \
            + sp.Rational(1, 2) * (m * l**2 / 3) * th2.diff(t) ** 2
        V = m * g * l * (sp.Rational(3, 2) * sp.sin(th1) + sp.sin(th2) / 2) - psi * th1
        _MODEL = SymbolicModel(q, T, V,
                               holonomic=[l * sp.sin(th1) - l * sp.sin(th2), th1 + th3 - sp.pi],
                               name="four_bar")
    return _MODEL


def system(psi: float = 450.0, m: float = 12.0, l: float = 2.0, g: float = G) -> go.System:
    """The paper's singular-mass model, built from its Lagrangian (:func:`model`); its
    energy ``T + V`` includes the torque's potential ``- psi th1`` (conserved)."""
    return model().system({"m": m, "l": l, "g": g, "psi": psi})


@rebuildable        # its System pickles as this call
def system_handwritten(psi: float = 450.0, m: float = 12.0, l: float = 2.0, g: float = G,
                       extra_force: Optional[np.ndarray] = None) -> go.System:
    """The same model written by hand (kept as a cross-check of the symbolic one)."""
    M = np.diag([4 * m * l**2 / 3, m * l**2 / 3, 0.0])
    ext = np.zeros(3) if extra_force is None else np.asarray(extra_force, dtype=float)

    def force(t, q, v):
        return np.array([psi - 1.5 * m * g * l * np.cos(q[0]),
                         -0.5 * m * g * l * np.cos(q[1]), 0.0]) + ext

    def phi(t, q):
        return np.array([l * np.sin(q[0]) - l * np.sin(q[1]), q[0] + q[2] - np.pi])

    def jac(t, q):
        return np.array([[l * np.cos(q[0]), -l * np.cos(q[1]), 0.0], [1.0, 0.0, 1.0]])

    def gamma(t, q, v):
        return np.array([l * np.sin(q[0]) * v[0] ** 2 - l * np.sin(q[1]) * v[1] ** 2, 0.0])

    def energy(t, q, v):
        T = 0.5 * v @ M @ v
        V = m * g * l * (1.5 * np.sin(q[0]) + 0.5 * np.sin(q[1]))
        return T + V - psi * q[0]

    return go.System(("th1", "th2", "th3"), mass=M, force=force,
                     constraints=[go.Holonomic(phi, jac, gamma, rheonomic=False, name="loop")],
                     energy=energy, name="four_bar")


def reference(t, psi: float = 450.0, m: float = 12.0, l: float = 2.0, g: float = G,
              th0: float = np.pi / 3, w0: float = 0.0) -> np.ndarray:
    """th1(t), th1'(t) of the reduced parallelogram dynamics, shape (2, len(t))."""
    t = np.atleast_1d(np.asarray(t, dtype=float))

    def f(_, y):
        return [y[1], (psi - 2 * m * g * l * np.cos(y[0])) / (5.0 / 3.0 * m * l**2)]

    sol = solve_ivp(f, (0.0, float(t.max())), [th0, w0], method="DOP853", rtol=1e-13,
                    atol=1e-13, dense_output=True)
    return sol.sol(t)


def draw(ax, q, l: float = 2.0):
    """Draw the parallelogram at ``q = (th1, th2, th3)``: crank, coupler, rocker."""
    th1, th2, _ = q
    d = l  # ground pins of the parallelogram one link length apart
    A, B = np.array([0.0, 0.0]), np.array([l * np.cos(th1), l * np.sin(th1)])
    D = np.array([d, 0.0])
    C = D + np.array([l * np.cos(th2), l * np.sin(th2)])
    for P, Q, c in ((A, B, "C0"), (B, C, "C1"), (D, C, "C2")):
        ax.plot([P[0], Q[0]], [P[1], Q[1]], "-o", color=c, lw=3)
    ax.plot([A[0], D[0]], [A[1], D[1]], "k--", lw=1)
    ax.set_aspect("equal")
    return ax


def build(psi: float = 450.0, m: float = 12.0, l: float = 2.0, g: float = G,
          t_end: float = 5.0) -> go.Problem:
    """Paper 001's four-bar (defaults: the paper's values).

    Parameters
    ----------
    psi : float
        Constant driving torque on the crank [N m].
    m : float, > 0
        Mass of each of the three rods (crank, coupler, rocker) [kg].
    l : float, > 0
        Length of each rod [m]; the two ground pins are ``l`` apart.
    g : float
        Gravitational acceleration [m/s^2].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``th1`` (crank angle [rad]) and ``y1`` (height of the
        crank's centroid [m]); ``reference(t)`` the same from the reduced equation.
    """
    sysm = system(psi=psi, m=m, l=l, g=g)
    q0 = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])

    def outputs(q, v):
        q = np.atleast_2d(q)
        return {"th1": q[:, 0], "y1": 0.5 * l * np.sin(q[:, 0])}

    def ref(t):
        th, _ = reference(t, psi=psi, m=m, l=l, g=g)
        return {"th1": th, "y1": 0.5 * l * np.sin(th)}

    return go.Problem(
        name="four_bar", system=sysm, q0=q0, v0=np.zeros(3), t_span=(0.0, t_end),
        description="Paper 001: parallelogram four-bar, singular mass matrix, redundant "
                    "coordinates (th1, th2, th3), torque psi on the crank; the crank revolves "
                    "through the singular positions cos th1 = 0.",
        # rtol 1e-11: th1 within 1e-8 of the reference over 20 s (the crank revolves
        # ~180 times; the global error grows with the number of revolutions)
        settings={"method": "DOP853", "rtol": 1e-11, "atol": 1e-11,
                  "stabilization": go.Projection(),
                  "t_eval": output_grid(t_end, 0.01)},
        solver_settings={
            # the classical method: Lagrange-I with Baumgarte stabilization (paper 002's
            # alpha = beta = 10) instead of the projection
            "lagrange_baumgarte": {"solver": "lagrange", "stabilization": go.Baumgarte(10.0, 10.0)},
            # the GA costs milliseconds per solve: a short run with the paper-style fixed step
            "ga": ga_settings(t_end),
        },
        solvers=("closed_form", "lagrange", "lagrange_baumgarte", "qp", "ga"),
        draw=lambda ax, q: draw(ax, q, l=l),
        outputs=outputs, reference=ref, params={"psi": psi, "m": m, "l": l, "g": g},
        # units of coordinates, outputs and constraint rows, for figures (the
        # parameters' units are in the docstring)
        units={"th1": "rad", "th2": "rad", "th3": "rad", "y1": "m", "energy": "J",
               "length": "m", "constraints": ("m", "rad")})
