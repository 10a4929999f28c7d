"""Paper 004, example 2: the Appell--Hamel system, a nonlinear nonholonomic constraint.

A particle q = (x, y, z), L = m/2 (x'^2 + y'^2 + z'^2) - m g z, with the
nonlinear nonholonomic constraint (paper 004, eq. (35))

    f = z' - k s = 0,     s = sqrt(x'^2 + y'^2) (horizontal speed),  k = b / a.

An optional uniform horizontal force (fx, fy) (not in the paper) makes the
horizontal path curve, which is where the models below part ways.
Defaults: m = 1, a = 1, b = 0.5, g = 9.8, start at the origin with
(x', y', z') = (3, 4, 2.5), run for 0.98 of the time until the horizontal
speed vanishes (then s = 2 % of s0; the direction of motion, hence the
constraint's gradient, is undefined at s = 0).

The three models of paper 004 (derived here from scratch; write t = (x', y')/s,
n = (-y', x')/s, C = x'' y' - x' y'', F_h = (fx, fy)):

* **Chetaev** (Lagrange--d'Alembert; what Gauss's principle gives,
  ``m a = F + lam f_v^T``): tangentially ``m (1 + k^2) s' = F_h . t - m g k``,
  normally ``m (a . n) = F_h . n`` (a free particle's turning). Cartesian form
  (eq. (37) corrected)::

      m (1 + k^2) x'' + m g k x'/s - m k^2 y' C / s^2 = fx,
      m (1 + k^2) y'' + m g k y'/s + m k^2 x' C / s^2 = fy.

  Paper 004's eq. (37) prints the C-terms as ``+m (b/a) y' C/s^2`` (a
  stray factor m); the derivation gives ``-m (b/a)^2``: the printed
  coefficient lacks a factor ``-b/a`` besides. With ``F_h = 0`` both vanish on
  every solution (C = 0), so the paper's example cannot tell; with a
  horizontal force the printed coefficient turns the wrong way
  (``form="printed"`` reproduces it, tests quantify it).
* **vakonomic** (``L + lam f`` varied freely, eq. (36))::

      m (1 + k^2) x'' + m g k x'/s - (m k^2 s + k lam) y' C / s^3 = fx,   (and y)
      m g + m z'' + lam' = 0.

  Equivalently the horizontal momentum ``(m - k lam / s) (x', y') - F_h t`` is
  conserved; tangentially as Chetaev, normally ``(m - k lam / s) (a . n) =
  F_h . n``. ``lam(0) = lam0`` is a free initial datum; ``lam0 = m s0 / k``
  (zero horizontal momentum) makes the equations singular. Paper 004's (36)
  prints ``(m (b/a) sqrt(.) + lam_z) y' C / (x'^2 + y)^(2/3)``; besides the
  exponent typo (read ``(x'^2 + y'^2)^(3/2)``) the multiplier term
  lacks the same factor ``-b/a`` as (37) (``form="printed"``).
* **new model** (Suslov variation, eq. (38))::

      m (1 + k^2) x'' + m g k x'/s = fx,   m (1 + k^2) y'' + m g k y'/s = fy:

  tangentially as Chetaev, normally ``m (1 + k^2) (a . n) = F_h . n``.

Where they agree: on every motion whose horizontal path is straight
(``C = 0``; then all three reduce to ``(1 + k^2) s' = F_h . t / m - g k``):
always without horizontal force (the paper's case; for the vakonomic model for
every ``lam0 != m s0 / k``), and with a force parallel to the initial
horizontal velocity. Then, with ``s' = (F_h . t / m - g k) / (1 + k^2)``
constant, ``s = s0 + s' t`` and the path is ``q0 + (t_h, k) (s0 t + s' t^2 / 2)``
(t_h the fixed horizontal direction): for the defaults s' = -g a b / (a^2 + b^2)
= -3.92 m/s^2, s vanishes at t = 1.2755 s. With a force oblique to the motion
the models differ (the normal response is 1, 1/(1 + k^2), 1/(1 - k lam/(m s))
times the free particle's).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable
from gaussopt.study.problem import ga_settings
from gaussopt.core.exceptions import GaussoptError, ModelError

__all__ = ["system", "model_rhs", "simulate_model", "reference", "stop_time", "build", "outputs",
           "MODELS", "DEFAULTS"]

G = 9.8
DEFAULTS = {"m": 1.0, "a": 1.0, "b": 0.5, "g": G, "fx": 0.0, "fy": 0.0,
            "x0": 0.0, "y0": 0.0, "z0": 0.0, "vx0": 3.0, "vy0": 4.0, "t_end": None}
MODELS = ("chetaev", "vakonomic", "new")
_PHYS = ("m", "a", "b", "g", "fx", "fy")
_END_FRACTION = 0.02     # run until s = 2 % of s0


def _params(**kw) -> dict:
    unknown = set(kw) - set(DEFAULTS)
    if unknown:
        raise ModelError(f"unknown Appell-Hamel parameter(s) {sorted(unknown)}; expected a subset "
                         f"of {sorted(DEFAULTS)}.")
    p = dict(DEFAULTS)
    p.update({k: (None if v is None else float(v)) for k, v in kw.items()})
    for k in ("m", "a", "b"):
        if not p[k] > 0:
            raise ModelError(f"`{k}` must be positive, found {p[k]}.")
    if np.hypot(p["vx0"], p["vy0"]) == 0:
        raise ModelError("the initial horizontal velocity (vx0, vy0) must be nonzero: the "
                         "constraint z' = (b/a) sqrt(x'^2 + y'^2) has no gradient at s = 0.")
    return p


def _constraint(k: float):
    def f(t, q, v):
        return np.array([v[2] - k * np.sqrt(v[0] * v[0] + v[1] * v[1])])
    return f


_MODEL = None


def model():
    """The Appell--Hamel particle derived once from its Lagrangian (sympy).

    ``L = m/2 (x'^2 + y'^2 + z'^2) - m g z``, generalized forces ``(fx, fy, 0)``,
    nonlinear nonholonomic constraint ``z' - (b/a) sqrt(x'^2 + y'^2) = 0``.
    """
    global _MODEL
    if _MODEL is None:
        import sympy as sp
        from sympy.physics.mechanics import dynamicsymbols

        from gaussopt.symbolic import SymbolicModel

        x, y, z = q = dynamicsymbols("x y z")
        t = dynamicsymbols._t
        m, a, b, g, fx, fy = sp.symbols("m a b g fx fy", real=True)
        xd, yd, zd = (c.diff(t) for c in q)
        T = m / 2 * (xd**2 + yd**2 + zd**2)
        _MODEL = SymbolicModel(q, T, m * g * z, forces=[fx, fy, 0],
                               nonholonomic=[zd - (b / a) * sp.sqrt(xd**2 + yd**2)],
                               name="appell_hamel")
    return _MODEL


@rebuildable        # its System pickles as this call
def system(m: float = 1.0, a: float = 1.0, b: float = 0.5, g: float = G, fx: float = 0.0,
           fy: float = 0.0) -> go.System:
    """The Appell--Hamel particle as a :class:`gaussopt.System` (Chetaev model by
    Gauss's principle), built from its Lagrangian (:func:`model`).

    ``energy = T + m g z - fx x - fy y`` is conserved: the constraint is
    homogeneous of degree 1 in ``v`` (``f_v v = f = 0``), so its force does no work.
    """
    sym = model().system({"m": m, "a": a, "b": b, "g": g, "fx": fx, "fy": fy})
    Fv = np.array([fx, fy, -m * g])

    def energy(t, q, v):
        return 0.5 * m * float(v @ v) - Fv @ q

    return go.System(sym.coordinates, mass=sym.constant_mass if sym.constant_mass is not None
                     else sym._mass, force=sym.constant_force if sym.constant_force is not None
                     else sym._force, constraints=sym.constraints, energy=energy,
                     name="appell_hamel")


@rebuildable        # its System pickles as this call
def system_handwritten(m: float = 1.0, a: float = 1.0, b: float = 0.5, g: float = G,
                       fx: float = 0.0, fy: float = 0.0) -> go.System:
    """The same system with the constraint written by hand (derivatives by complex
    step); a cross-check of :func:`system`."""
    k = b / a
    Fv = np.array([fx, fy, -m * g])
    return go.System(("x", "y", "z"), mass=m * np.eye(3), force=Fv,
                     constraints=[go.Nonholonomic(_constraint(k), name="appell_hamel")],
                     energy=lambda t, q, v: 0.5 * m * float(v @ v) - Fv @ q, name="appell_hamel")


# --------------------------------------------------------------------------- the three models
def _coefficient(model: str, form: str, s: float, lam: float, m: float, k: float) -> float:
    """kappa in ``(1 + k^2) x'' + g k x'/s + kappa y' C / s^2 = fx / m`` (and the y row)."""
    if model == "new":
        return 0.0
    if model == "chetaev":
        return -k * k if form == "derived" else k
    if form == "derived":                                     # vakonomic
        return -(k * k * s + k * lam / m) / s
    return (m * k * s + lam) / s


def model_rhs(t: float, y: np.ndarray, model: str = "chetaev", form: str = "derived",
              m: float = 1.0, a: float = 1.0, b: float = 0.5, g: float = G, fx: float = 0.0,
              fy: float = 0.0) -> np.ndarray:
    """Right-hand side of one model, state ``y = (x, y, z, x', y')`` (+ ``lam`` for vakonomic).

    ``z' = k s`` is not a state (the constraint). ``form="derived"`` uses the
    coefficients derived in the module notes, ``"printed"`` paper 004's
    (36)/(37) with only their typos fixed (the exponent of (36)). The two horizontal equations are
    linear in ``(x'', y'')`` and solved as a 2x2 system; a singular one (the
    vakonomic model at zero horizontal momentum) raises
    :class:`gaussopt.GaussoptError`.
    """
    if model not in MODELS:
        raise ModelError(f"`model` must be one of {MODELS}, found {model!r}.")
    if form not in ("derived", "printed"):
        raise ModelError(f"`form` must be 'derived' or 'printed', found {form!r}.")
    k = b / a
    xd, yd = y[3], y[4]
    s = float(np.hypot(xd, yd))
    if s == 0.0:
        raise GaussoptError(f"the horizontal speed vanished at t={t}: the Appell-Hamel models are "
                            "defined only while s > 0.")
    lam = y[5] if model == "vakonomic" else 0.0
    kap = _coefficient(model, form, s, lam, m, k)
    c0 = 1.0 + k * k
    A = np.array([[c0 + kap * yd * yd / s**2, -kap * xd * yd / s**2],
                  [-kap * xd * yd / s**2, c0 + kap * xd * xd / s**2]])
    rhs = np.array([fx / m - g * k * xd / s, fy / m - g * k * yd / s])
    det = A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]
    if abs(det) <= 1e-12 * c0 * c0:
        raise GaussoptError(f"the {model} equations are singular at t={t} (det {det:.3g}): for the "
                            "vakonomic model this is zero horizontal momentum, lam = m s / k, where "
                            "the horizontal direction is not determined.")
    xdd, ydd = np.linalg.solve(A, rhs)
    sd = (xd * xdd + yd * ydd) / s
    out = [xd, yd, k * s, xdd, ydd]
    if model == "vakonomic":
        out.append(-m * g - m * k * sd)                      # (36c): m g + m z'' + lam' = 0
    return np.array(out)


def simulate_model(model: str = "chetaev", form: str = "derived", lam0: float = 0.0, *,
                   t_span: Optional[Sequence[float]] = None, rtol: float = 1e-12,
                   atol: float = 1e-12, method: str = "DOP853",
                   t_eval: Optional[np.ndarray] = None, **params) -> go.Trajectory:
    """Integrate :func:`model_rhs` with ``solve_ivp``; returns a :class:`gaussopt.Trajectory`.

    ``q = (x, y, z)``, ``v = (x', y', k s)``, ``a`` from the model;
    ``multipliers`` are the vakonomic ``lam`` (vakonomic) or the minimum-norm
    ``lam`` with ``f_v^T lam = m a - F`` (the others; for the new model
    ``m a - F`` is not along ``f_v`` and this is only its projection).
    """
    p = _params(**params)
    phys = {kk: p[kk] for kk in _PHYS}
    k = p["b"] / p["a"]
    t0 = 0.0 if t_span is None else float(t_span[0])
    t1 = (stop_time(**params) * (1 - _END_FRACTION) if p["t_end"] is None else p["t_end"]) \
        if t_span is None else float(t_span[1])
    y0 = [p["x0"], p["y0"], p["z0"], p["vx0"], p["vy0"]] + ([lam0] if model == "vakonomic" else [])
    status, message = 0, ""
    sol_t, sol_y = np.array([t0]), np.array(y0)[:, None]
    try:
        sol = solve_ivp(model_rhs, (t0, t1), y0, method=method, rtol=rtol, atol=atol,
                        t_eval=t_eval, args=(model, form) + tuple(phys[kk] for kk in _PHYS))
        sol_t, sol_y = sol.t, sol.y
        status, message = (0 if sol.status == 0 else -1), sol.message
    except GaussoptError as e:
        status, message = -1, str(e)
    Y = sol_y.T
    N = Y.shape[0]
    s = np.hypot(Y[:, 3], Y[:, 4])
    q = Y[:, :3].copy()
    v = np.stack([Y[:, 3], Y[:, 4], k * s], axis=1)
    acc = np.zeros((N, 3))
    for i in range(N):
        try:
            d = model_rhs(sol_t[i], Y[i], model, form, *(phys[kk] for kk in _PHYS))
        except GaussoptError:
            acc[i] = np.nan
            continue
        acc[i] = [d[3], d[4], k * (Y[i, 3] * d[3] + Y[i, 4] * d[4]) / s[i]]
    Fv = np.array([p["fx"], p["fy"], -p["m"] * p["g"]])
    Qc = p["m"] * acc - Fv
    fv = np.stack([-k * Y[:, 3] / s, -k * Y[:, 4] / s, np.ones(N)], axis=1)
    lam = Y[:, 5] if model == "vakonomic" else np.einsum("ij,ij->i", fv, Qc) / (1 + k * k)
    sysm = system(**phys)
    energy = np.array([sysm.energy(tt, qq, vv) for tt, qq, vv in zip(sol_t, q, v)])
    return go.Trajectory(
        t=sol_t, q=q, v=v, a=acc, constraint_force=Qc, multipliers=lam[:, None],
        position_residual=np.zeros(N), velocity_residual=np.abs(v[:, 2] - k * s),
        acceleration_residual=np.zeros(N), energy=energy, rank=np.ones(N, dtype=int),
        sigma_min=np.ones(N), coordinates=("x", "y", "z"), status=status, message=message,
        meta={"solver": f"{model}_{form}", "method": method, "rtol": rtol, "atol": atol,
              "lam0": lam0 if model == "vakonomic" else None, "system": "appell_hamel",
              "t_span": [t0, t1]})


# --------------------------------------------------------------------------- references
def _polar_rhs(t, z, model, lam_state, m, k, g, fx, fy):
    """Reduced equations in (x, y, zc, s, theta[, lam]): tangential and normal balance."""
    s, th = z[3], z[4]
    c, sn = np.cos(th), np.sin(th)
    Ft, Fn = fx * c + fy * sn, -fx * sn + fy * c
    sd = (Ft / m - g * k) / (1 + k * k)
    if model == "chetaev":
        eff = m
    elif model == "new":
        eff = m * (1 + k * k)
    else:
        eff = m - k * z[5] / s
    out = [s * c, s * sn, k * s, sd, Fn / (eff * s)]
    if lam_state:
        out.append(-m * g - m * k * sd)
    return out


def reference(t, model: str = "chetaev", lam0: float = 0.0, **params) -> dict:
    """Independent solution of one model at times ``t``: ``x, y, z, s`` (and ``theta``).

    Closed form when the horizontal force is parallel to the initial horizontal
    velocity (or zero): then every model moves on the same straight line with
    ``s = s0 + s' t``, ``s' = (F_h . t / m - g k) / (1 + k^2)``. Otherwise the
    model's reduced equations in the speed ``s`` and the heading ``theta``
    (tangential and normal balance, see the module notes) at
    rtol = atol = 1e-13.
    """
    if model not in MODELS:
        raise ModelError(f"`model` must be one of {MODELS}, found {model!r}.")
    p = _params(**params)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    m, k, g, fx, fy = p["m"], p["b"] / p["a"], p["g"], p["fx"], p["fy"]
    s0 = float(np.hypot(p["vx0"], p["vy0"]))
    th0 = float(np.arctan2(p["vy0"], p["vx0"]))
    Fn = -fx * np.sin(th0) + fy * np.cos(th0)
    if Fn == 0.0:
        Ft = fx * np.cos(th0) + fy * np.sin(th0)
        sd = (Ft / m - g * k) / (1 + k * k)
        sig = s0 * t + 0.5 * sd * t * t
        return {"x": p["x0"] + np.cos(th0) * sig, "y": p["y0"] + np.sin(th0) * sig,
                "z": p["z0"] + k * sig, "s": s0 + sd * t, "theta": np.full(t.size, th0)}
    z0 = [p["x0"], p["y0"], p["z0"], s0, th0] + ([lam0] if model == "vakonomic" else [])
    sol = solve_ivp(_polar_rhs, (0.0, float(max(t.max(), 0.0)) or 1e-300), z0, method="DOP853",
                    rtol=1e-13, atol=1e-13, dense_output=True,
                    args=(model, model == "vakonomic", m, k, g, fx, fy))
    z = sol.sol(t)
    return {"x": z[0], "y": z[1], "z": z[2], "s": z[3], "theta": z[4]}


def stop_time(**params) -> float:
    """Time at which the Chetaev motion's horizontal speed vanishes (``inf`` if never).

    Closed form for a straight-line motion, otherwise the event ``s = 0`` of
    the reduced equations (located at ``s = 1e-9 s0``).
    """
    p = _params(**{k: v for k, v in params.items() if k != "t_end"})
    m, k, g, fx, fy = p["m"], p["b"] / p["a"], p["g"], p["fx"], p["fy"]
    s0 = float(np.hypot(p["vx0"], p["vy0"]))
    th0 = float(np.arctan2(p["vy0"], p["vx0"]))
    if -fx * np.sin(th0) + fy * np.cos(th0) == 0.0:
        sd = ((fx * np.cos(th0) + fy * np.sin(th0)) / m - g * k) / (1 + k * k)
        return s0 / -sd if sd < 0 else np.inf
    if np.hypot(fx, fy) / m >= g * k:
        return np.inf

    def ev(_, z, *a):
        return z[3] - 1e-9 * s0
    ev.terminal = True
    sd_max = (np.hypot(fx, fy) / m - g * k) / (1 + k * k)
    sol = solve_ivp(_polar_rhs, (0.0, 2 * s0 / -sd_max), [0, 0, 0, s0, th0], method="DOP853",
                    rtol=1e-12, atol=1e-12, events=ev, args=("chetaev", False, m, k, g, fx, fy))
    return float(sol.t_events[0][0]) if sol.t_events[0].size else np.inf


def outputs(q: np.ndarray, v: np.ndarray) -> dict:
    """``x, y, z`` and the horizontal speed ``s``."""
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    return {"x": q[:, 0], "y": q[:, 1], "z": q[:, 2], "s": np.hypot(v[:, 0], v[:, 1])}


def build(**params) -> go.Problem:
    """The Appell--Hamel problem, Chetaev model by Gauss's principle (see ``DEFAULTS``).

    Parameters
    ----------
    m : float, default 1
        Mass of the particle [kg].
    a, b : float, default 1, 0.5
        Paper 004's constants of the constraint ``z' = (b/a) sqrt(x'^2 + y'^2)``
        [1] (only ``k = b/a`` matters); both positive.
    g : float, default 9.8
        Gravitational acceleration [m/s^2].
    fx, fy : float, default 0
        Uniform horizontal force (not in the paper) [N].
    x0, y0, z0 : float, default 0
        Initial position [m].
    vx0, vy0 : float, default 3, 4
        Initial horizontal velocity [m/s] (``z'`` follows from the constraint).
    t_end : float, optional
        End time [s]; default 0.98 of :func:`stop_time`, the time at which the
        horizontal speed vanishes (for a straight-line motion: when it has
        dropped to 2 % of its initial value).
    """
    p = _params(**params)
    phys = {kk: p[kk] for kk in _PHYS}
    k = p["b"] / p["a"]
    s0 = float(np.hypot(p["vx0"], p["vy0"]))
    t_end = p["t_end"]
    if t_end is None:
        ts = stop_time(**params)
        if not np.isfinite(ts):
            raise ModelError("the horizontal speed never vanishes for these parameters; pass t_end.")
        t_end = ts * (1 - _END_FRACTION)
    if not t_end > 0:
        raise ModelError(f"`t_end` must be positive, found {t_end}.")
    q0 = np.array([p["x0"], p["y0"], p["z0"]])
    v0 = np.array([p["vx0"], p["vy0"], k * s0])
    ref_params = {kk: v for kk, v in params.items() if kk != "t_end"}
    return go.Problem(
        name="appell_hamel", system=system(**phys), q0=q0, v0=v0, t_span=(0.0, float(t_end)),
        description="Paper 004, example 2: Appell-Hamel particle with the nonlinear nonholonomic "
                    "constraint z' = (b/a) sqrt(x'^2 + y'^2); Gauss's principle gives the Chetaev "
                    "model (horizontal speed decreasing linearly, fixed heading).",
        settings={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12,
                  "t_eval": np.linspace(0.0, float(t_end), 201)},
        solver_settings={"ga": ga_settings(t_end),
                         "qp": {"t_span": (0.0, min(t_end, 0.5))}},
        outputs=outputs, reference=lambda t: reference(t, "chetaev", **ref_params),
        # for figures: the row z' - (b/a) sqrt(x'^2 + y'^2) is a velocity [m/s]
        units={"x": "m", "y": "m", "z": "m", "s": "m/s", "energy": "J", "length": "m",
               "constraints": ("m/s",)},
        params={**p, "t_end": float(t_end)}, solvers=("closed_form", "lagrange", "qp"))
