"""Paper 004, example 1: a particle under gravity with the second-order constraint q' . q'' = 0.

A particle of mass m in 3-D, q = (x, y, z), gravity -g along z (applied force
F = (0, 0, -m g)), constrained by ``x' x'' + y' y'' + z' z'' = 0`` (paper 004,
eq. (30)): its speed stays constant, c = |v0|. Paper 004 writes the example for
a unit mass without gravity; there all three of its models below give the
same uniform straight line. With gravity, as here, they differ, and
``build(form=...)`` builds each of them as a :class:`gaussopt.System`.

The three models (paper 004, eqs. (31)-(33), generalized to mass m and gravity)
-------------------------------------------------------------------------------
``form="gauss"`` (default) -- Gauss's principle, the Chetaev / Lagrange--d'Alembert
model with the virtual displacements orthogonal to ``df/dq'' = q'``::

    m a = F + Lam v,   v . a = 0   =>   a = g_vec - (g_vec . v) v / |v|^2.

The constraint force cancels the component of gravity along the velocity; the
particle keeps its speed and turns towards -z in the vertical plane of its
initial velocity (:class:`gaussopt.AccelerationConstraint`, row ``v``).
Closed form: with theta the angle of the velocity above the horizontal,
``c theta' = -g cos theta``, so with ``tau = asinh(tan theta0) - (g / c) t``::

    theta = arctan(sinh tau),   v = c (cos theta h, sin theta),
    horizontal distance d = (c^2 / g) (theta0 - theta),
    z - z0 = (c^2 / g) ln(cosh tau0 / cosh tau),

h the fixed unit horizontal direction of v0 (a vertical v0 falls or rises in a
straight line at constant speed). Paper 004's own Lagrange--d'Alembert
equations (32), ``q'' + lam' q'' - lam'' q' + 2 lam q''' = 0`` (unit mass, no
gravity; the extracted text drops the third derivative's dots), come from
its eq. (26), which keeps ``(-1)^(k+1) d^k lam/dt^k`` but drops the Leibniz cross
terms of ``d^k/dt^k (lam df/dq^(k))`` (and (26) itself gives ``-q''`` and ``-2 lam
q'''``, opposite signs to (32)): a third-order system with extra initial data
(``q''(0)``, ``lam(0)``, ``lam'(0)``). Without gravity its solution ``lam = 0``
is the uniform straight line, Gauss's motion; the Chetaev condition on the
virtual displacements for a second-order constraint, ``(df/dq'') . dq = 0``,
gives Gauss's equations above, which is what this form implements.

``form="vakonomic"`` -- eq. (22) for ``f = q' . q''`` (``df/dq' = q''``,
``df/dq'' = q'``): ``F - m q'' + lam' q'' + lam'' q' = 0`` (eq. (31) is this
for m = 1, F = 0, times -1; no typo). With ``mu = lam'`` (a mass, kg)::

    (m - mu) a = F + mu' v,   v . a = 0   =>   mu' = -F . v / |v|^2,

Gauss's principle for the effective mass ``m - mu`` whose multiplier is
``mu'``. It is built as a system in q = (x, y, z, lam_dot) with the singular
mass matrix ``diag((m - mu) I, 0)``, the constant-speed row ``(v, 0)`` and the
multiplier's own equation ``mu' + F . v / |v|^2 = 0`` as a
:class:`gaussopt.Nonholonomic` constraint on the massless coordinate ``mu``
(its multiplier is zero since ``mu`` has no mass; the speed row's multiplier
equals ``mu'``, as eq. (31) demands). ``mu(0) = lam_dot0`` is a free initial
datum. Equivalently ``p = (m - mu) v`` obeys ``p' = F`` (the vakonomic
Lagrangian ``(m - lam')|q'|^2 / 2 - m g z``: ``integral of lam f`` is ``-integral of
lam' |q'|^2 / 2`` up to end terms), so the velocity points along
``p(t) = (m - lam_dot0) v0 + F t`` at the constant speed c: for ``lam_dot0 = 0``
along the *free* particle's velocity ``v0 + g_vec t``. Closed form, ``s =
sign(m - lam_dot0)``, ``P = |p_h|``, ``F = -m g e_z``::

    v = s c p / |p|,   mu = m - s |p| / c,
    horizontal displacement  s c p_h / (m g) (asinh(p_z(0) / P) - asinh(p_z(t) / P)),
    z - z0 = s c (|p(0)| - |p(t)|) / (m g).

``E = (m/2 - mu) |v|^2 + m g z`` is conserved (the vakonomic Lagrangian does
not depend on t). With ``lam_dot0 = 0`` the initial acceleration equals Gauss's
(both ``g_vec - (g_vec . v) v / c^2``); the turning rates then part:
``theta' = -g cos theta / c`` (Gauss), ``-g cos^2 theta / (c cos theta0)``
(vakonomic): the vakonomic particle turns faster while ``|theta| < theta0`` and
slower afterwards; it approaches the vertical algebraically (``tan theta``
linear in t), Gauss's exponentially (``cos theta = 1 / cosh tau``). ``lam_dot0 > m`` turns the particle *up* (mass and force
change sign together; the system is built with ``|m - mu|`` and
``sign(m - mu) F``); ``lam_dot0 = m`` is singular.

``form="new"`` -- the Suslov variation, eq. (29) with the dependent coordinate
q3 = z (``df/dz' = z''``). Its bracket ``-[f]_i + sum_k (-1)^(k+1) d^k/dt^k
df/dq^(k)_i`` is the Euler--Lagrange operator of f, which vanishes identically for
``f = d/dt (|q'|^2 / 2)`` (here ``q''' - q'''``): what is left are the free
Lagrange equations of the independent coordinates and the constraint for z::

    m x'' = F_x,   m y'' = F_y,   z' z'' = -(x' x'' + y' y'').

This is Gauss's principle for the independent coordinates only: mass matrix
``diag(m, m, 0)`` and force ``(F_x, F_y, 0)`` (eq. (29) has no equation for the
dependent coordinate, so its applied force never enters), determined while
``z' != 0``. The constraint force acts along z and absorbs gravity: the
particle moves on the straight line ``q0 + v0 t``. Paper 004's printed eqs. (33)
reduce on the constraint (their denominator ``x' x'' + y' y''`` is ``-z' z''``
there) to one and the same equation ``z' z''' = 2 z''^2`` in all three rows (the
third is the differentiated constraint), i.e. ``1 / z'`` linear in t, and leave
the horizontal direction free; the motion above satisfies it.

Defaults: m = 1, g = 9.8, q0 = 0, v0 = (1, 0, 2), 5 s, ``lam_dot0 = 0``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

import gaussopt as go
from gaussopt.model.system import rebuildable
from gaussopt.study.problem import ga_settings
from gaussopt.core.exceptions import ModelError

__all__ = ["system", "initial_state", "reference", "build", "outputs", "FORMS"]

G = 9.8
FORMS = ("gauss", "vakonomic", "new")


def _check_form(form: str) -> None:
    if form not in FORMS:
        raise ModelError(f"`form` must be one of {FORMS} (paper 004's Gauss/Chetaev, vakonomic "
                         f"(31) and new (33) models), found {form!r}.")


def _speed_row(n: int) -> go.AccelerationConstraint:
    """``v . a = 0`` on the particle's three coordinates (zero in the others)."""
    def A(t, q, v):
        row = np.zeros((1, n))
        row[0, :3] = v[:3]
        return row
    return go.AccelerationConstraint(A, lambda t, q, v: np.zeros(1), name="constant_speed")


@rebuildable        # its System pickles as this call
def system(m: float = 1.0, g: float = G, form: str = "gauss", lam_dot0: float = 0.0
           ) -> go.System:
    """Particle with the constant-speed constraint ``v . a = 0`` under one of ``FORMS``.

    ``"gauss"`` and ``"new"``: coordinates (x, y, z); ``"vakonomic"``: (x, y, z,
    lam_dot), see the module notes. ``lam_dot0`` only fixes the sign of ``m -
    lam_dot`` of the vakonomic system (its value is an initial state, see
    :func:`initial_state`). ``energy`` is the quantity each model conserves: the
    kinetic energy (gauss, new; the constraint force does work against
    gravity), ``(m/2 - lam_dot) |v|^2 + m g z`` (vakonomic).
    """
    _check_form(form)
    if not m > 0:
        raise ModelError(f"`m` must be positive, found {m}.")
    F = np.array([0.0, 0.0, -m * g])
    if form == "gauss":
        return go.System(("x", "y", "z"), mass=m * np.eye(3), force=F,
                         constraints=[_speed_row(3)],
                         energy=lambda t, q, v: 0.5 * m * float(v @ v),
                         name="second_order_particle")
    if form == "new":
        # Gauss's principle for the independent coordinates (x, y) only: z carries no mass
        # and no applied force (eq. (29) has no equation for the dependent coordinate)
        return go.System(("x", "y", "z"), mass=np.diag([m, m, 0.0]),
                         force=np.array([F[0], F[1], 0.0]), constraints=[_speed_row(3)],
                         energy=lambda t, q, v: 0.5 * m * float(v @ v),
                         name="second_order_particle_new")
    if lam_dot0 == m:
        raise ModelError(f"`lam_dot0` = m = {m} makes the vakonomic equations singular (zero "
                         "effective mass m - lam_dot); choose another value.")
    sgn = 1.0 if lam_dot0 < m else -1.0

    def mass(t, q):
        M = np.zeros((4, 4))
        M[0, 0] = M[1, 1] = M[2, 2] = sgn * (m - q[3])
        return M

    def rate(t, q, v):                      # mu' + F . v / |v|^2 = 0 (the multiplier's equation)
        w = v[:3]
        return np.array([v[3] + (F @ w) / (w @ w)])

    return go.System(("x", "y", "z", "lam_dot"), mass=mass, force=np.r_[sgn * F, 0.0],
                     constraints=[_speed_row(4), go.Nonholonomic(rate, name="vakonomic_rate")],
                     energy=lambda t, q, v: float((0.5 * m - q[3]) * (v[:3] @ v[:3])
                                                  + m * g * q[2]),
                     name="second_order_particle_vakonomic")


def initial_state(q0: Sequence[float], v0: Sequence[float], m: float = 1.0, g: float = G,
                  form: str = "gauss", lam_dot0: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``(q0, v0)`` of the form's system: the vakonomic one appends ``lam_dot0`` and its
    rate ``-F . v0 / |v0|^2``."""
    _check_form(form)
    q0, v0 = np.asarray(q0, dtype=float), np.asarray(v0, dtype=float)
    if form != "vakonomic":
        return q0, v0
    F = np.array([0.0, 0.0, -m * g])
    return np.r_[q0, lam_dot0], np.r_[v0, -(F @ v0) / (v0 @ v0)]


def _lncosh(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x)
    return ax + np.log1p(np.exp(-2.0 * ax)) - np.log(2.0)


def reference(t, q0: Sequence[float] = (0.0, 0.0, 0.0), v0: Sequence[float] = (1.0, 0.0, 2.0),
              g: float = G, form: str = "gauss", m: float = 1.0, lam_dot0: float = 0.0) -> dict:
    """Closed-form motion of one form at times ``t``: ``x, y, z, vx, vy, vz, speed``
    (and ``lam_dot`` for the vakonomic form), arrays; formulas in the module notes."""
    _check_form(form)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    q0 = np.asarray(q0, dtype=float)
    v0 = np.asarray(v0, dtype=float)
    c = float(np.linalg.norm(v0))
    if c == 0.0:
        raise ModelError("`v0` must be nonzero: at rest the constraint row v vanishes and the "
                         "motion is not determined by q' . q'' = 0.")
    vh = float(np.hypot(v0[0], v0[1]))
    extra = {}
    if form == "new" or g == 0.0 or (form == "gauss" and vh == 0.0):
        # uniform straight line: no gravity; or gravity absorbed along the dependent z
        # (new); or a vertical throw (Gauss: gravity is along v and cancelled)
        pos = q0[:, None] + v0[:, None] * t
        vel = np.repeat(v0[:, None], t.size, axis=1)
        if form == "vakonomic":
            extra = {"lam_dot": np.full(t.size, float(lam_dot0))}
    elif form == "gauss":
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
    else:                                             # vakonomic: p = (m - lam_dot0) v0 + F t
        if lam_dot0 == m:
            raise ModelError(f"`lam_dot0` = m = {m} makes the vakonomic equations singular.")
        sgn = 1.0 if lam_dot0 < m else -1.0
        ph = (m - lam_dot0) * v0[:2]
        pz = (m - lam_dot0) * v0[2] - m * g * t
        P = float(np.hypot(ph[0], ph[1]))
        pz0 = (m - lam_dot0) * v0[2]
        pn, pn0 = np.hypot(P, pz), float(np.hypot(P, pz0))
        if P > 0.0:
            dh = sgn * c * P / (m * g) * (np.arcsinh(pz0 / P) - np.arcsinh(pz / P))
            hx, hy = ph / P
        else:                                         # vertical: defined while p_z keeps its sign
            dh, hx, hy = np.zeros(t.size), 0.0, 0.0
        dz = sgn * c / (m * g) * (pn0 - pn)
        pos = np.stack([q0[0] + dh * hx, q0[1] + dh * hy, q0[2] + dz])
        vel = sgn * c * np.stack([np.full(t.size, ph[0]), np.full(t.size, ph[1]), pz]) / pn
        extra = {"lam_dot": m - sgn * pn / c}
    return {"x": pos[0], "y": pos[1], "z": pos[2], "vx": vel[0], "vy": vel[1], "vz": vel[2],
            "speed": np.full(t.size, c), **extra}


def outputs(q: np.ndarray, v: np.ndarray) -> dict:
    """``x, y, z``, velocity components and the speed (and ``lam_dot``, the vakonomic
    multiplier's rate, when q has its fourth column)."""
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    out = {"x": q[:, 0], "y": q[:, 1], "z": q[:, 2], "vx": v[:, 0], "vy": v[:, 1],
           "vz": v[:, 2], "speed": np.sqrt((v[:, :3] * v[:, :3]).sum(axis=1))}
    if q.shape[1] == 4:
        out["lam_dot"] = q[:, 3]
    return out


def build(m: float = 1.0, g: float = G, t_end: float = 5.0,
          q0: Sequence[float] = (0.0, 0.0, 0.0), v0: Sequence[float] = (1.0, 0.0, 2.0),
          form: str = "gauss", lam_dot0: float = 0.0) -> go.Problem:
    """Paper 004's second-order constraint ``q' . q'' = 0`` with gravity, in one of its models.

    Parameters
    ----------
    m : float
        Mass of the particle [kg]; positive. Default 1.
    g : float
        Gravitational acceleration along -z [m/s^2]; any real (0 is paper 004's
        gravity-free example, where all forms give the same straight line). Default 9.8.
    t_end : float
        End of the simulated interval [s]; positive. Default 5.
    q0 : sequence of 3 floats
        Initial position (x, y, z) [m]. Default (0, 0, 0).
    v0 : sequence of 3 floats
        Initial velocity [m/s]; nonzero (its norm is the constant speed), and with
        ``form="new"`` a nonzero z component. Default (1, 0, 2).
    form : {"gauss", "vakonomic", "new"}
        The dynamical model (paper 004, eqs. (31)-(33); see the module notes):
        ``"gauss"`` Gauss's principle (Chetaev / Lagrange--d'Alembert),
        ``"vakonomic"`` eq. (31) (system in (x, y, z, lam_dot)), ``"new"`` the
        Suslov-variation model of eq. (29)/(33) with dependent coordinate z.
        Default ``"gauss"``.
    lam_dot0 : float
        Initial rate ``lam'(0)`` of the vakonomic multiplier [kg] (a free initial
        datum of the vakonomic model; ``m - lam_dot`` acts as its effective mass);
        any real except m. Used by ``form="vakonomic"`` only (must stay 0
        otherwise). Default 0.

    Returns
    -------
    Problem
        With the form's closed-form reference (module notes) and outputs ``x, y,
        z, vx, vy, vz, speed`` (+ ``lam_dot`` for the vakonomic form).
    """
    _check_form(form)
    q0a = np.asarray(q0, dtype=float)
    v0a = np.asarray(v0, dtype=float)
    if q0a.shape != (3,) or v0a.shape != (3,):
        raise ModelError(f"`q0` and `v0` must have 3 components, found {q0a.shape}, {v0a.shape}.")
    if not np.any(v0a != 0.0):
        raise ModelError("`v0` must be nonzero: at rest the constraint row v vanishes and the "
                         "motion is not determined by q' . q'' = 0.")
    if not t_end > 0:
        raise ModelError(f"`t_end` must be positive, found {t_end}.")
    if form != "vakonomic" and lam_dot0 != 0.0:
        raise ModelError(f"`lam_dot0` is the vakonomic multiplier's initial rate; it applies to "
                         f"form='vakonomic' only, found lam_dot0={lam_dot0} with form={form!r}.")
    if form == "new" and v0a[2] == 0.0:
        raise ModelError("form='new' takes z as the dependent coordinate: `v0` needs a nonzero z "
                         "component (z' z'' = -(x' x'' + y' y'') determines z'').")
    Q0, V0 = initial_state(q0a, v0a, m, g, form, lam_dot0)
    names = {"gauss": "Gauss's principle (the Chetaev model): the constraint force cancels "
                      "gravity's component along the velocity",
             "vakonomic": f"the vakonomic model (eq. (31)) with lam'(0) = {lam_dot0} kg: the "
                          "velocity turns along (m - lam'(0)) v0 + F t",
             "new": "the new (Suslov-variation) model (eq. (33)) with z dependent: x, y move "
                    "freely, the constraint force absorbs gravity"}
    return go.Problem(
        name="second_order_particle", system=system(m, g, form, lam_dot0), q0=Q0, v0=V0,
        t_span=(0.0, t_end),
        description="Paper 004, example 1: particle with the second-order (constant-speed) "
                    f"constraint q' . q'' = 0 under gravity; {names[form]}.",
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12,
                  "t_eval": np.linspace(0.0, t_end, int(round(t_end / 0.01)) + 1)},
        solver_settings={"ga": ga_settings(t_end),
                         "qp": {"t_span": (0.0, min(t_end, 1.0))}},
        outputs=outputs,
        reference=lambda t: reference(t, q0a, v0a, g, form, m, lam_dot0),
        params={"m": m, "g": g, "t_end": t_end, "q0": q0a.tolist(), "v0": v0a.tolist(),
                "form": form, "lam_dot0": lam_dot0},
        solvers=("closed_form", "lagrange", "qp"),
        # SI units; the row v . a = 0 has A = v [m/s], so lam v is a force: lam in kg/s
        units={"x": "m", "y": "m", "z": "m", "lam_dot": "kg", "vx": "m/s", "vy": "m/s",
               "vz": "m/s", "speed": "m/s", "energy": "J", "length": "m",
               "multipliers": "kg/s"})
