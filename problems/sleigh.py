"""Paper 000: nonholonomic rigid body (sleigh / knife edge) in quasi-coordinates.

A planar rigid body, mass M, inertia I_C about its centroid C, coordinates
q = (x, y, phi) of C and of the body axis C-xi. The centroid velocity is always
along the body axis (paper 000, eq. (12), written here regularly):

    -x' sin phi + y' cos phi = 0        (the paper: x' tan phi - y' = 0, singular at phi = pi/2)

A constant force F at world angle alpha acts at C, and a moment L_C.
Quasi-velocities w1 = x' cos phi + y' sin phi (forward speed), w2 = phi'
give paper 000's eq. (14): M w1' = F cos(phi - alpha), I_C w2' = L_C.

The paper gives no numbers; defaults M = I_C = F = 1, alpha = 0, L_C = 0, start
at x = y = phi = 0 with forward speed 1 and phi' = 1, over 20 s.

Three formulations, all returning a :class:`gaussopt.Trajectory`:

* ``"gauss"``: :func:`gaussopt.simulate` (Gauss step) with the regular sin/cos
  constraint (``build(formulation="gauss")``);
* ``"routh_tan"`` / ``"routh_sincos"``: Routh's equations with a multiplier
  (paper 000, eq. (15)) and the constraint in the paper's tan form or the
  regular form, the multiplier eliminated through the differentiated
  constraint (index reduction), integrated by ``solve_ivp`` -- the classical
  baseline (:func:`simulate_routh`);
* ``"quasi"`` / ``"quasi_auto"``: :class:`gaussopt.quasi.QuasiVelocities`
  with the paper's basis D = [[cos phi, 0], [sin phi, 0], [0, 1]] (exact dD)
  or with the automatic basis (:func:`quasi_velocities`).

:func:`run` dispatches all of them. Reference (:func:`reference`): with
L_C = 0 the reduced equations integrate in closed form (phi = phi0 + W t,
w1 = u0 + F/(M W) (sin(phi - alpha) - sin(phi0 - alpha)), x and y by
quadrature of products of sines and cosines); otherwise the hand-derived
5-state reduced ODE at rtol = atol = 1e-13.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
from gaussopt.model.system import rebuildable
from gaussopt.study.problem import ga_settings
from gaussopt.core.exceptions import ModelError
from gaussopt.quasi import QuasiVelocities

__all__ = ["system", "quasi_velocities", "routh_rhs", "simulate_routh", "reference", "build",
           "run", "FORMULATIONS", "DEFAULTS"]

DEFAULTS = {"M": 1.0, "I_C": 1.0, "F": 1.0, "alpha": 0.0, "L_C": 0.0,
            "x0": 0.0, "y0": 0.0, "phi0": 0.0, "u0": 1.0, "omega0": 1.0, "t_end": 20.0}
FORMULATIONS = ("gauss", "quasi", "quasi_auto", "routh_tan", "routh_sincos")
_PHYS = ("M", "I_C", "F", "alpha", "L_C")


def _params(**kw) -> dict:
    unknown = set(kw) - set(DEFAULTS)
    if unknown:
        raise ModelError(f"unknown sleigh parameter(s) {sorted(unknown)}; expected a subset of "
                         f"{sorted(DEFAULTS)}.")
    p = dict(DEFAULTS)
    p.update({k: float(v) for k, v in kw.items()})
    for k in ("M", "I_C"):
        if not p[k] > 0:
            raise ModelError(f"`{k}` must be positive, found {p[k]}.")
    if not p["t_end"] > 0:
        raise ModelError(f"`t_end` must be positive, found {p['t_end']}.")
    return p


def _knife(t, q, v):
    return np.array([-v[0] * np.sin(q[2]) + v[1] * np.cos(q[2])])


@rebuildable        # its System pickles as this call
def system(M: float = 1.0, I_C: float = 1.0, F: float = 1.0, alpha: float = 0.0,
           L_C: float = 0.0) -> go.System:
    """The sleigh as a :class:`gaussopt.System` with the regular constraint.

    ``energy`` is ``T - F (x cos alpha + y sin alpha) - L_C phi`` (constant
    force and moment have a potential; the constraint force does no work).
    """
    Mm = np.diag([M, M, I_C])
    Fv = np.array([F * np.cos(alpha), F * np.sin(alpha), L_C])

    def energy(t, q, v):
        return 0.5 * v @ Mm @ v - Fv @ q

    return go.System(("x", "y", "phi"), mass=Mm, force=Fv,
                     constraints=[go.Nonholonomic(_knife, name="knife_edge")],
                     energy=energy, name="sleigh")


def quasi_velocities(M: float = 1.0, I_C: float = 1.0, F: float = 1.0, alpha: float = 0.0,
                     L_C: float = 0.0, basis: str = "paper") -> QuasiVelocities:
    """Quasi-velocity formulation; ``basis="paper"`` (paper 000's eq. (13): w1 forward speed,
    w2 = phi', exact ``dD``, ``w0 = 0``; the reduced equations as they stand, no constraint
    evaluation per step) or ``"automatic"``."""
    sysm = system(M, I_C, F, alpha, L_C)
    if basis == "automatic":
        return QuasiVelocities(sysm)
    if basis != "paper":
        raise ModelError(f"`basis` must be 'paper' or 'automatic', found {basis!r}.")

    def D(t, q):
        c, s = np.cos(q[2]), np.sin(q[2])
        return np.array([[c, 0.0], [s, 0.0], [0.0, 1.0]])

    def dD(t, q, v):
        c, s = np.cos(q[2]), np.sin(q[2])
        return np.array([[-s * v[2], 0.0], [c * v[2], 0.0], [0.0, 0.0]])

    def zero(t, q, v=None):                # the constraint is homogeneous: w0 = 0
        return np.zeros(3)

    return QuasiVelocities(sysm, D=D, dD=dD, w0=zero, dw0=zero)


# --------------------------------------------------------------------------- Routh
def routh_rhs(t: float, y: np.ndarray, form: str = "tan", M: float = 1.0, I_C: float = 1.0,
              F: float = 1.0, alpha: float = 0.0, L_C: float = 0.0) -> np.ndarray:
    """Routh's equations with the multiplier eliminated, state ``y = (x, y, phi, x', y', phi')``.

    ``form="tan"`` (paper 000, eq. (15) with the constraint ``x' tan phi - y' = 0``)::

        M x'' = F cos a + lam tan phi,   M y'' = F sin a - lam,   I_C phi'' = L_C,
        lam = (F sin a - F cos a tan phi) / (1 + tan^2 phi) - M x' phi'

    (from ``d/dt (x' tan phi - y') = 0``); ``form="sincos"`` with
    ``-x' sin phi + y' cos phi = 0``::

        M x'' = F cos a - lam sin phi,   M y'' = F sin a + lam cos phi,
        lam = M phi' (x' cos phi + y' sin phi) - F sin(a - phi).

    Both conserve the constraint only in exact arithmetic (index reduction):
    its numerical error drifts. The tan form is singular at ``phi = pi/2 + k pi``.
    """
    _, _, ph, xd, yd, pd = y
    ca, sa = np.cos(alpha), np.sin(alpha)
    if form == "tan":
        tn = np.tan(ph)
        lam = (F * sa - F * ca * tn) / (1.0 + tn * tn) - M * xd * pd
        xdd = (F * ca + lam * tn) / M
        ydd = (F * sa - lam) / M
    elif form == "sincos":
        c, s = np.cos(ph), np.sin(ph)
        lam = M * pd * (xd * c + yd * s) - F * np.sin(alpha - ph)
        xdd = (F * ca - lam * s) / M
        ydd = (F * sa + lam * c) / M
    else:
        raise ModelError(f"`form` must be 'tan' or 'sincos', found {form!r}.")
    return np.array([xd, yd, pd, xdd, ydd, L_C / I_C])


def _routh_lambda(y: np.ndarray, form: str, M, F, alpha) -> float:
    _, _, ph, xd, yd, pd = y
    if form == "tan":
        tn = np.tan(ph)
        return (F * np.sin(alpha) - F * np.cos(alpha) * tn) / (1.0 + tn * tn) - M * xd * pd
    return M * pd * (xd * np.cos(ph) + yd * np.sin(ph)) - F * np.sin(alpha - ph)


def simulate_routh(form: str = "tan", *, t_span: Optional[Sequence[float]] = None,
                   rtol: float = 1e-10, atol: float = 1e-10, method: str = "DOP853",
                   t_eval: Optional[np.ndarray] = None, **params) -> go.Trajectory:
    """Integrate :func:`routh_rhs` with ``solve_ivp``; returns a :class:`gaussopt.Trajectory`.

    ``velocity_residual`` is ``|-x' sin phi + y' cos phi|`` for both forms (the
    regular, unit-row residual; the tan form's own residual is unbounded near
    ``phi = pi/2``); ``multipliers`` the form's ``lam``. A failure of the
    integrator (step size underflow at the singularity) comes back as
    ``success=False`` with the part computed so far.
    """
    if form not in ("tan", "sincos"):
        raise ModelError(f"`form` must be 'tan' or 'sincos', found {form!r}.")
    p = _params(**params)
    phys = {k: p[k] for k in _PHYS}
    t0, t1 = (0.0, p["t_end"]) if t_span is None else (float(t_span[0]), float(t_span[1]))
    q0, v0 = _initial(p)
    y0 = np.concatenate([q0, v0])
    with np.errstate(all="ignore"):
        sol = solve_ivp(routh_rhs, (t0, t1), y0, method=method, rtol=rtol, atol=atol,
                        t_eval=t_eval, args=(form,) + tuple(phys[k] for k in _PHYS))
    sysm = system(**phys)
    Y = sol.y.T
    N = Y.shape[0]
    q, v = Y[:, :3].copy(), Y[:, 3:].copy()
    a = np.array([routh_rhs(tt, yy, form, **phys)[3:] for tt, yy in zip(sol.t, Y)]).reshape(N, 3)
    Mm = sysm.mass(0.0, q0)
    Fv = sysm.force(0.0, q0, v0)
    lam = np.array([_routh_lambda(yy, form, phys["M"], phys["F"], phys["alpha"]) for yy in Y])
    vres = np.abs(-v[:, 0] * np.sin(q[:, 2]) + v[:, 1] * np.cos(q[:, 2]))
    A = np.stack([-np.sin(q[:, 2]), np.cos(q[:, 2]), np.zeros(N)], axis=1)
    b = v[:, 2] * (v[:, 0] * np.cos(q[:, 2]) + v[:, 1] * np.sin(q[:, 2]))
    ares = np.abs(np.einsum("ij,ij->i", A, a) - b)
    energy = np.array([sysm.energy(tt, qq, vv) for tt, qq, vv in zip(sol.t, q, v)])
    return go.Trajectory(
        t=sol.t, q=q, v=v, a=a, constraint_force=a @ Mm - Fv, multipliers=lam[:, None],
        position_residual=np.zeros(N), velocity_residual=vres, acceleration_residual=ares,
        energy=energy, rank=np.ones(N, dtype=int), sigma_min=np.ones(N),
        coordinates=("x", "y", "phi"), status=0 if sol.status == 0 else -1, message=sol.message,
        stats={"rhs_evaluations": int(sol.nfev),
               **({"steps": int(sol.t.size - 1)} if t_eval is None else {})},
        meta={"solver": f"routh_{form}", "method": method, "rtol": rtol, "atol": atol,
              "system": "sleigh", "t_span": [t0, t1]})


# --------------------------------------------------------------------------- reference
def _initial(p: dict) -> tuple[np.ndarray, np.ndarray]:
    c, s = np.cos(p["phi0"]), np.sin(p["phi0"])
    return (np.array([p["x0"], p["y0"], p["phi0"]]),
            np.array([p["u0"] * c, p["u0"] * s, p["omega0"]]))


def reference(t, **params) -> dict:
    """Independent solution at times ``t``: ``x, y, phi, w1, w2`` (arrays).

    With ``L_C = 0`` in closed form (``W = omega0``, ``psi = phi - alpha``,
    ``K = F / (M W)``, ``A0 = u0 - K sin(psi0)``)::

        phi = phi0 + W t,     w1 = A0 + K sin(psi)
        x = x0 + A0 (sin phi - sin phi0) / W
               - K [(cos(2 phi - alpha) - cos(2 phi0 - alpha)) / (4 W) + t sin(alpha) / 2]
        y = y0 - A0 (cos phi - cos phi0) / W
               + K [t cos(alpha) / 2 - (sin(2 phi - alpha) - sin(2 phi0 - alpha)) / (4 W)]

    (and the uniformly accelerated straight line when ``W = 0``). With
    ``L_C != 0`` the reduced ODE ``x' = w1 cos phi, y' = w1 sin phi, phi' = w2,
    M w1' = F cos(phi - alpha), I_C w2' = L_C`` at rtol = atol = 1e-13.
    """
    p = _params(**params)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    M, I_C, F, al, L = p["M"], p["I_C"], p["F"], p["alpha"], p["L_C"]
    x0, y0, ph0, u0, W = p["x0"], p["y0"], p["phi0"], p["u0"], p["omega0"]
    if L == 0.0 and W != 0.0:
        ph = ph0 + W * t
        K = F / (M * W)
        A0 = u0 - K * np.sin(ph0 - al)
        w1 = A0 + K * np.sin(ph - al)
        x = (x0 + A0 * (np.sin(ph) - np.sin(ph0)) / W
             - K * ((np.cos(2 * ph - al) - np.cos(2 * ph0 - al)) / (4 * W) + 0.5 * t * np.sin(al)))
        y = (y0 - A0 * (np.cos(ph) - np.cos(ph0)) / W
             + K * (0.5 * t * np.cos(al) - (np.sin(2 * ph - al) - np.sin(2 * ph0 - al)) / (4 * W)))
        return {"x": x, "y": y, "phi": ph, "w1": w1, "w2": np.full_like(t, W)}
    if L == 0.0:
        acc = F / M * np.cos(ph0 - al)
        d = u0 * t + 0.5 * acc * t * t
        return {"x": x0 + d * np.cos(ph0), "y": y0 + d * np.sin(ph0), "phi": np.full_like(t, ph0),
                "w1": u0 + acc * t, "w2": np.full_like(t, W)}

    def f(_, z):
        return [z[3] * np.cos(z[2]), z[3] * np.sin(z[2]), z[4], F / M * np.cos(z[2] - al), L / I_C]

    t_hi = float(max(t.max(), 0.0))
    if t_hi == 0.0:
        z = np.array([[x0], [y0], [ph0], [u0], [W]]) * np.ones((5, t.size))
    else:
        sol = solve_ivp(f, (0.0, t_hi), [x0, y0, ph0, u0, W], method="DOP853", rtol=1e-13,
                        atol=1e-13, dense_output=True)
        z = sol.sol(t)
    return {"x": z[0], "y": z[1], "phi": z[2], "w1": z[3], "w2": z[4]}


def outputs(q: np.ndarray, v: np.ndarray) -> dict:
    """``x, y, phi``, forward speed ``w1``, ``w2 = phi'`` and the lateral slip velocity."""
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    c, s = np.cos(q[:, 2]), np.sin(q[:, 2])
    return {"x": q[:, 0], "y": q[:, 1], "phi": q[:, 2], "w1": v[:, 0] * c + v[:, 1] * s,
            "w2": v[:, 2], "slip": -v[:, 0] * s + v[:, 1] * c}


def draw(ax, q, length: float = 0.6):
    """The body as an arrow along its axis at the centroid."""
    x, y, ph = q
    ax.arrow(x, y, length * np.cos(ph), length * np.sin(ph), width=0.04, color="C0")
    ax.plot([x], [y], "ko")
    ax.set_aspect("equal")
    return ax


# --------------------------------------------------------------------------- problem
def build(formulation: str = "gauss", **params) -> go.Problem:
    """The sleigh as a :class:`gaussopt.Problem` (Gauss formulation, regular constraint).

    The other formulations are run by :func:`run` / :func:`simulate_routh` /
    :func:`quasi_velocities` (and are rows of the problem's comparison).

    Parameters
    ----------
    formulation : {"gauss"}
        A Problem runs the Gauss step.
    M : float, default 1
        Mass of the body [kg].
    I_C : float, default 1
        Moment of inertia about the centroid C [kg m^2].
    F : float, default 1
        Magnitude of the constant force at C [N].
    alpha : float, default 0
        Direction of the force from the world x axis [rad].
    L_C : float, default 0
        Constant moment about C [N m].
    x0, y0 : float, default 0
        Initial position of C [m].
    phi0 : float, default 0
        Initial heading of the body axis [rad].
    u0 : float, default 1
        Initial forward speed along the body axis [m/s].
    omega0 : float, default 1
        Initial turning rate phi' [rad/s].
    t_end : float, default 20
        End time [s].
    """
    if formulation != "gauss":
        raise ModelError(f"`formulation` of build() must be 'gauss' (a gaussopt.Problem runs the "
                         f"Gauss step); found {formulation!r}. Use run({formulation!r}, ...) for "
                         f"the formulations {FORMULATIONS}.")
    p = _params(**params)
    phys = {k: p[k] for k in _PHYS}
    q0, v0 = _initial(p)
    t_end = p["t_end"]

    def runner(formulation):
        def go_run(t_span, **kw):
            return run(formulation, **kw, **{**params, "t_end": t_span[1]})
        return {"runner": go_run}
    return go.Problem(
        name="sleigh", system=system(**phys), q0=q0, v0=v0, t_span=(0.0, t_end),
        description="Paper 000: planar rigid body whose centroid velocity stays along its axis "
                    "(knife edge / sleigh), force F at angle alpha and moment L_C; Gauss step with "
                    "the regular constraint -x' sin phi + y' cos phi = 0.",
        settings={"method": "DOP853", "rtol": 1e-11, "atol": 1e-11,
                  "t_eval": np.linspace(0.0, t_end, int(round(t_end / 0.02)) + 1)},
        solver_settings={"ga": ga_settings(t_end),
                         "qp": {"t_span": (0.0, min(t_end, 2.0))},
                         **{f: runner(f) for f in ("quasi", "quasi_auto", "routh_sincos",
                                                   "routh_tan")}},
        outputs=outputs, reference=lambda t: reference(t, **params), params=p, draw=draw,
        # for figures: the no-slip row -x' sin phi + y' cos phi is a velocity [m/s]
        units={"x": "m", "y": "m", "phi": "rad", "w1": "m/s", "w2": "rad/s", "slip": "m/s",
               "energy": "J", "length": "m", "constraints": ("m/s",)},
        solvers=("closed_form", "lagrange", "qp", "ga", "quasi", "quasi_auto", "routh_sincos",
                 "routh_tan"))


def run(formulation: str = "gauss", *, rtol: float = 1e-11, atol: float = 1e-11,
        t_eval: Optional[np.ndarray] = None, method: str = "DOP853", **params) -> go.Trajectory:
    """Simulate the sleigh with one of ``FORMULATIONS`` under the same settings."""
    p = _params(**params)
    phys = {k: p[k] for k in _PHYS}
    q0, v0 = _initial(p)
    t_span = (0.0, p["t_end"])
    if formulation == "gauss":
        return build(**params).simulate("closed_form", rtol=rtol, atol=atol, t_eval=t_eval,
                                        method=method)
    if formulation in ("quasi", "quasi_auto"):
        qv = quasi_velocities(**phys, basis="paper" if formulation == "quasi" else "automatic")
        return qv.simulate(t_span, q0, v0, rtol=rtol, atol=atol, t_eval=t_eval, method=method)
    if formulation in ("routh_tan", "routh_sincos"):
        return simulate_routh(formulation.split("_")[1], rtol=rtol, atol=atol, t_eval=t_eval,
                              method=method, **params)
    raise ModelError(f"`formulation` must be one of {FORMULATIONS}, found {formulation!r}.")
