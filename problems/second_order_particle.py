"""Paper 004, example 1: a particle under gravity with the second-order constraint q' . q'' = 0.

A particle of mass m in 3-D, q = (x, y, z), gravity -g along z, constrained by
``x' x'' + y' y'' + z' z'' = 0`` (paper 004, eq. (30)): its speed stays
constant. The constraint is linear in the accelerations, so Gauss's principle
takes it as it is (:class:`gaussopt.AccelerationConstraint`, row ``v``): the
constraint force cancels the component of gravity along the velocity,

    a = g_vec - (g_vec . v) v / |v|^2,

so the particle keeps its speed c = |v0| and turns towards -z in the vertical
plane of its initial velocity. (Paper 004 writes the example without gravity,
where it is a straight line; with gravity, as here, it is not trivial.)

Analytic solution. With theta the angle of the velocity above the horizontal,
``c theta' = -g cos theta``, so with ``tau = asinh(tan theta0) - (g / c) t``::

    theta = arctan(sinh tau),   v = c (cos theta h, sin theta),
    horizontal distance d = (c^2 / g) (theta0 - theta),
    z - z0 = (c^2 / g) ln(cosh tau0 / cosh tau),

h the fixed unit horizontal direction of v0 (a vertical v0 falls or rises in a
straight line at constant speed). Defaults: m = 1, g = 9.8, q0 = 0,
v0 = (1, 0, 2), 5 s.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

import gaussopt as go
from gaussopt.problem import ga_settings
from gaussopt.exceptions import ModelError

__all__ = ["system", "reference", "build", "outputs"]

G = 9.8


def system(m: float = 1.0, g: float = G) -> go.System:
    """Particle with the constant-speed constraint ``v . a = 0``.

    ``energy`` is the *kinetic* energy, the quantity the constraint conserves
    (the constraint force does work against gravity, so T + V is not constant).
    """
    if not m > 0:
        raise ModelError(f"`m` must be positive, found {m}.")
    speed = go.AccelerationConstraint(lambda t, q, v: v[None, :], lambda t, q, v: np.zeros(1),
                                      name="constant_speed")
    return go.System(("x", "y", "z"), mass=m * np.eye(3), force=[0.0, 0.0, -m * g],
                     constraints=[speed], energy=lambda t, q, v: 0.5 * m * float(v @ v),
                     name="second_order_particle")


def _lncosh(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x)
    return ax + np.log1p(np.exp(-2.0 * ax)) - np.log(2.0)


def reference(t, q0: Sequence[float] = (0.0, 0.0, 0.0), v0: Sequence[float] = (1.0, 0.0, 2.0),
              g: float = G) -> dict:
    """Closed-form motion at times ``t``: ``x, y, z, vx, vy, vz, speed`` (arrays)."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    q0 = np.asarray(q0, dtype=float)
    v0 = np.asarray(v0, dtype=float)
    c = float(np.linalg.norm(v0))
    if c == 0.0:
        raise ModelError("`v0` must be nonzero: at rest the constraint row v vanishes and the "
                         "motion is not determined by q' . q'' = 0.")
    vh = float(np.hypot(v0[0], v0[1]))
    if vh == 0.0 or g == 0.0:           # vertical throw (gravity cancelled) or no gravity
        pos = q0[:, None] + v0[:, None] * t
        vel = np.repeat(v0[:, None], t.size, axis=1)
    else:
        h = v0[:2] / vh
        th0 = np.arctan2(v0[2], vh)
        tau0 = np.arcsinh(np.tan(th0))
        tau = tau0 - g / c * t
        th = np.arctan(np.sinh(tau))
        d = c * c / g * (th0 - th)
        dz = c * c / g * (_lncosh(tau0) - _lncosh(tau))
        pos = np.stack([q0[0] + d * h[0], q0[1] + d * h[1], q0[2] + dz])
        ct = 1.0 / np.cosh(tau)
        vel = np.stack([c * ct * h[0], c * ct * h[1], c * np.tanh(tau)])
    return {"x": pos[0], "y": pos[1], "z": pos[2], "vx": vel[0], "vy": vel[1], "vz": vel[2],
            "speed": np.full(t.size, c)}


def outputs(q: np.ndarray, v: np.ndarray) -> dict:
    """``x, y, z``, velocity components and the speed."""
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    return {"x": q[:, 0], "y": q[:, 1], "z": q[:, 2], "vx": v[:, 0], "vy": v[:, 1],
            "vz": v[:, 2], "speed": np.sqrt((v * v).sum(axis=1))}


def build(m: float = 1.0, g: float = G, t_end: float = 5.0,
          q0: Sequence[float] = (0.0, 0.0, 0.0), v0: Sequence[float] = (1.0, 0.0, 2.0)
          ) -> go.Problem:
    """Paper 004's second-order constraint with gravity (defaults: unit mass, v0 = (1, 0, 2), 5 s)."""
    q0a = np.asarray(q0, dtype=float)
    v0a = np.asarray(v0, dtype=float)
    if q0a.shape != (3,) or v0a.shape != (3,):
        raise ModelError(f"`q0` and `v0` must have 3 components, found {q0a.shape}, {v0a.shape}.")
    if not t_end > 0:
        raise ModelError(f"`t_end` must be positive, found {t_end}.")
    return go.Problem(
        name="second_order_particle", system=system(m, g), q0=q0a, v0=v0a, t_span=(0.0, t_end),
        description="Paper 004, example 1: particle with the second-order (constant-speed) "
                    "constraint q' . q'' = 0 under gravity; Gauss's principle takes the "
                    "acceleration-level constraint directly.",
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12,
                  "t_eval": np.linspace(0.0, t_end, int(round(t_end / 0.01)) + 1)},
        solver_settings={"ga": ga_settings(t_end),
                         "qp": {"t_span": (0.0, min(t_end, 1.0))}},
        outputs=outputs, reference=lambda t: reference(t, q0a, v0a, g),
        params={"m": m, "g": g, "t_end": t_end, "q0": q0a.tolist(), "v0": v0a.tolist()},
        solvers=("closed_form", "lagrange", "qp"))
