"""The N-four-bar mechanism (the IFToMM multibody benchmark), in body coordinates.

``N + 1`` cranks (uniform rods, mass ``m``, length ``l``) pinned to the ground
at ``x = 0, l, ..., N l`` and ``N`` couplers (the same rods) joining the tips
of neighbouring cranks; gravity ``g`` along ``-y``. ``2N + 1`` bodies,
``3 (2N + 1)`` coordinates, ``2 (3N + 1)`` joint equations: Gruebler's count
is 1. Start: cranks vertical (``th = pi/2``), couplers horizontal, the tip
``B0`` of the first crank moving at ``u0`` along ``+x`` (crank rate
``-u0/l``). The cranks revolve clockwise and pass the collinear
configurations ``th = 0`` and ``th = -pi`` (every rod on the x-axis) twice
per revolution; there the rank of the constraint Jacobian drops by ``N``
(the DOF count jumps from 1 to ``N + 1``) and the motion must continue on the
parallelogram branch.

Reference: on the parallelogram branch every crank has the angle ``th`` and
the couplers translate with the crank tips, so
``T = 1/2 ((N + 1) m l^2 / 3 + N m l^2) th'^2`` and
``V = g l ((N + 1) m / 2 + N m) sin th``:
``((N + 1)/3 + N) m l^2 th'' = -g l ((N + 1)/2 + N) m cos th``, integrated
with DOP853 at ``rtol = atol = 1e-13``. Outputs: the position of ``B0``.

Settings: DOP853 with :class:`gaussopt.multibody.LeastSquaresProjection`
(projected vector field), ``rtol = atol = 1e-10``, default ``rank_tol``.
Measured (10 s, 10 collinear passages, rank ``6N + 2 -> 5N + 2`` at each; one
run each on a 2-core machine, with the rank monitor; ``on band``: right-hand
sides answered by the O(n) path of :mod:`gaussopt.gauss.band_step`, which ``simulate``
takes from :data:`gaussopt.gauss.band_step.MIN_N` coordinates on):

====  =====  ====================================  ==============  =====  =======  =======
N     rtol   B0 at t = 10 s                        max err of B0   RHS    on band  wall
====  =====  ====================================  ==============  =====  =======  =======
2     1e-6   (0.3284344452, 0.9445267679)          6.9e-5          1358   0        0.10 s
2     1e-8   (0.3284574993, 0.9445187511)          2.1e-6          1605   0        0.12 s
2     1e-10  (0.3284581095, 0.9445185389)          7.1e-9          2641   0        0.19 s
2     ref    (0.3284581115, 0.9445185382)
40    1e-6   (0.1804765621, 0.9835792853)          1.4e-4          1195   1195     0.43 s
40    1e-8   (0.1805112180, 0.9835729257)          4.2e-6          1883   1883     0.55 s
40    1e-10  (0.1805122194, 0.9835727419)          3.1e-8          2816   2800     1.03 s
40    ref    (0.1805122267, 0.9835727406)
====  =====  ====================================  ==============  =====  =======  =======

(``max err``: over the accepted steps' outputs. With the dense engine, before
the O(n) path reached ``simulate``, N = 40 at 1e-10 took 84 s with the monitor:
one right-hand side cost ~10 ms, of which ``Model.rows`` was 0.06 ms, the dense
closed-form step 7.9 ms and the projection ~2 ms, and the monitor took an SVD of
the 242 x 243 rows at four points per step. Now the right-hand sides next to a
collinear position, where full rank cannot be certified, and the searches that
locate the passages still run the dense kernel and SVD: most of what is left. The
projection evaluates its residuals and Jacobian in the rows' pattern since the sparse
model's ``pos``; before, the dense position Jacobian made N = 40 at 1e-10 take 3.3 s.)

One step outside a run (``go.solve_step``, ``go.solve_steps``) takes the O(n)
path of :mod:`gaussopt.gauss.band_step` at the regular positions (full row rank
certified): measured 0.03 / 0.05 / 0.09 / 0.17 ms at N = 10 / 20 / 40 / 80
(growth ~N^0.85; scipy's ``splu`` of the same KKT matrix 0.07 / 0.10 / 0.18 /
0.32 ms, N^0.74; the dense step ~50 ms at N = 80, N^2.2). At and near the
collinear positions it refuses and the dense kernel decides the rank drop.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
import gaussopt.multibody as mb

G = 9.81


def model(N: int = 2, m: float = 1.0, l: float = 1.0, g: float = G,
          redundant: bool = False) -> mb.Model:
    """Bodies ``crank0..crankN`` then ``coupler1..couplerN`` (coupler k joins cranks k-1
    and k); with ``redundant`` one more coupler ``coupler1b`` beside ``coupler1``
    (between cranks 0 and 1): one redundant joint equation at every parallelogram
    configuration (Gruebler 0, mobility 1), an overconstrained linkage."""
    if int(N) != N or N < 1:
        raise go.ModelError(f"`N` must be an integer >= 1, found {N!r}.")
    N = int(N)
    cranks = [mb.Body.uniform_rod(f"crank{k}", m, l) for k in range(N + 1)]
    couplers = [mb.Body.uniform_rod(f"coupler{k}", m, l) for k in range(1, N + 1)]
    joints = [mb.Revolute(None, (k * l, 0.0), c, (-l / 2, 0.0)) for k, c in enumerate(cranks)]
    for k, cp in enumerate(couplers, start=1):
        joints.append(mb.Revolute(cranks[k - 1], (l / 2, 0.0), cp, (-l / 2, 0.0)))
        joints.append(mb.Revolute(cranks[k], (l / 2, 0.0), cp, (l / 2, 0.0)))
    if redundant:
        extra = mb.Body.uniform_rod("coupler1b", m, l)
        couplers.append(extra)
        joints += [mb.Revolute(cranks[0], (l / 2, 0.0), extra, (-l / 2, 0.0)),
                   mb.Revolute(cranks[1], (l / 2, 0.0), extra, (l / 2, 0.0))]
    return mb.Model(cranks + couplers, joints, gravity=(0.0, -g),
                    name=f"n_four_bar_{N}" + ("_redundant" if redundant else ""))


def configuration(th: float, N: int = 2, l: float = 1.0, redundant: bool = False) -> np.ndarray:
    """Body coordinates on the parallelogram branch at crank angle ``th``, shape
    (3 (2N + 1),) (3 (2N + 2) with ``redundant``: ``coupler1b`` where ``coupler1`` is)."""
    c, s = np.cos(th), np.sin(th)
    q = []
    for k in range(N + 1):
        q += [k * l + 0.5 * l * c, 0.5 * l * s, th]
    for k in range(1, N + 1):
        q += [(k - 0.5) * l + l * c, l * s, 0.0]
    if redundant:
        q += [0.5 * l + l * c, l * s, 0.0]
    return np.array(q)


def reference(t, N: int = 2, m: float = 1.0, l: float = 1.0, g: float = G,
              th0: float = np.pi / 2, u0: float = 1.0, redundant: bool = False) -> np.ndarray:
    """``th(t), th'(t)`` of the reduced parallelogram dynamics, shape (2, len(t)) (with
    ``redundant`` the extra coupler translates like the others: one more ``m``)."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    nc = N + (1 if redundant else 0)
    mass = ((N + 1) / 3.0 + nc) * m * l * l
    k = g * l * ((N + 1) / 2.0 + nc) * m

    def f(_, y):
        return [y[1], -k * np.cos(y[0]) / mass]

    sol = solve_ivp(f, (0.0, max(float(t.max()), 0.0)), [th0, -u0 / l], method="DOP853",
                    rtol=1e-13, atol=1e-13, dense_output=True)
    return sol.sol(t)


def build(N: int = 2, t_end: float = 10.0, m: float = 1.0, l: float = 1.0, g: float = G,
          u0: float = 1.0, redundant: bool = False) -> go.Problem:
    """The N-four-bar from the vertical position with ``B0`` moving at ``u0`` along ``+x``.

    Parameters
    ----------
    N : int, >= 1
        Number of couplers (``N + 1`` cranks), at least 1.
    t_end : float, > 0
        End time [s].
    m : float, > 0
        Mass of each rod [kg].
    l : float, > 0
        Length of each rod [m]; the ground pins are ``l`` apart.
    g : float
        Gravitational acceleration [m/s^2].
    u0 : float
        Initial speed of the first crank's tip ``B0`` along +x [m/s].
    redundant : bool
        One more coupler beside the first (:func:`model`): an overconstrained linkage
        with one redundant joint equation at every state.

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``B0_x``, ``B0_y`` (the first crank's tip [m]);
        ``reference(t)`` the same from the reduced one-coordinate equation.
    """
    mdl = model(N=N, m=m, l=l, g=g, redundant=redundant)
    q0 = configuration(np.pi / 2, N=N, l=l, redundant=redundant)
    v0 = mdl.velocities(q0, {"crank0.phi": -u0 / l})
    B = (l / 2, 0.0)

    def outputs(q, v):
        P = mdl.point("crank0", B, np.atleast_2d(q))
        return {"B0_x": P[:, 0], "B0_y": P[:, 1]}

    def ref(t):
        th = reference(t, N=N, m=m, l=l, g=g, u0=u0, redundant=redundant)[0]
        return {"B0_x": l * np.cos(th), "B0_y": l * np.sin(th)}

    prob = go.Problem(
        name="n_four_bar", system=mdl.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description=f"N-four-bar benchmark (N = {N}): {N + 1} cranks and {N} couplers, uniform "
                    "rods, body coordinates; passes the collinear configurations where the DOF "
                    f"count jumps from 1 to {N + 1}; outputs the tip B0 of the first crank.",
        settings={"method": "DOP853", "rtol": 1e-10, "atol": 1e-10,
                  "stabilization": mb.LeastSquaresProjection()},
        outputs=outputs, reference=ref,
        # for figures: body coordinates in m and rad, revolute joints' rows in m
        units={**{c: ("rad" if c.endswith(".phi") else "m") for c in mdl.system.coordinates},
               "B0_x": "m", "B0_y": "m", "energy": "J", "length": "m", "constraints": ("m",)},
        params={"N": N, "m": m, "l": l, "g": g, "u0": u0, "t_end": t_end, "redundant": redundant})
    prob.model = mdl
    return prob
