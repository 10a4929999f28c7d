"""Double parallelogram: a redundant linkage (one joint too many) through its folded configurations.

Three equal parallel cranks (uniform rods, mass ``m_crank``, length ``l``),
pinned to the ground at ``x = 0, d, 2 d`` and at their tips to one coupler (a
uniform rod of mass ``m_coupler`` and length ``2 d``, pinned at its ends and
its middle), in the vertical plane, gravity ``g`` along ``-y``. Body
coordinates: 4 bodies, 12 coordinates, 6 revolute joints = 12 equations of
rank 11 (the third crank's joint is redundant), 1 DOF; at the folded
configurations (cranks horizontal, ``th = k pi``: everything on the x-axis)
the rank drops to 10 and a first-order "shaky" mode (the coupler rotating
about its middle while the outer cranks turn opposite ways) appears, which
only the second-order kinematics rule out.

Default: released from rest at ``th = pi/3`` (crank angle from +x,
counter-clockwise). The crank falls through the horizontal ``th = 0``
(folded) at ``t = 0.545 s``, hangs at ``-pi/2``, passes the other folded
configuration ``th = -pi`` at ``t = 1.091 s`` and turns at ``th = -4 pi/3``
(the same height), then swings back: four folded passages per period
(``T = 3.273 s``), 12 in 10 s.

Settings (``settings``): DOP853 at ``rtol = atol = 1e-10`` with
:class:`gaussopt.multibody.LeastSquaresProjection` and ``rank_tol = 1e-5``.
Measured over 10 s (12 starting angles ``pi/3 + k 3e-4``, single- and
multi-threaded BLAS, 80 runs, none failed): ``max |th - th_ref|``
1.4-1.6e-7 (rtol 1e-9), 1.1-1.3e-8 (1e-10), 2.8-3.4e-9 (3e-11),
0.9-1.1e-9 (1e-11); ~3600 right-hand sides and ~4 s at 1e-10. Why these
settings:

* ``go.Projection()`` raises ``InconsistentConstraintsError`` inside its
  Gauss--Newton correction: with the redundant row, the ``~1e-13`` residual it
  corrects lies in the range of the Jacobian only up to roundoff
  (``~1e-16``), a relative inconsistency ``~1e-4 >= sqrt(rank_tol)`` (all 4
  runs at rtol 3e-11 and 1e-11 fail; 3 of 12 still fail with
  ``rank_tol = 1e-5``). ``LeastSquaresProjection`` takes the least-squares
  correction instead and drives the residuals to roundoff.
* Near a folded configuration (distance ``d`` in ``th``) the Jacobian has a
  singular value ``~0.67 d``; a displacement ``eps`` along the shaky mode
  changes ``Phi`` only by ``~d eps`` (plus ``eps^2``), so after any projection
  ``eps ~ 1e-16/d`` survives and tilts the computed tangent by ``eps/d``: the
  velocity gets a shaky component ``~1e-16 |v|/d^2``, which makes ``A a = b``
  inconsistent with the redundant row at relative size ``~1e-16/d^2``. With
  the default ``rank_tol = 1e-8`` (consistency threshold ``1e-4``) a stage
  that lands within ``d ~ 1e-6`` of the fold aborts the run (2 of 15 runs at
  ``rtol = 3e-11``). ``rank_tol = 1e-5`` treats the shaky direction as free
  for ``d < ~1.5e-5`` (rank 10 there) and raises the threshold to ``3e-3``:
  no failure in 92 runs; in 12 instrumented ones the largest inconsistency
  met was ``9e-7``, and the errors equal those of the runs that survive
  with ``rank_tol = 1e-8``.
* Inside that window the rows alone do not determine the shaky acceleration
  (the Gauss step sees only the first-order constraints; for this symmetric
  linkage the minimum-constraint choice is the exact one by symmetry, for
  unequal cranks it is off by ``O(1)``). The step restrains the dropped
  direction (:func:`gaussopt.gauss.model_step.fold_rows`): by the row itself where
  it is still accurate, closer to the fold by the derivative of the dropped row
  along the motion (exact at the fold, well conditioned through it), and from
  rest exactly at a fold by the branch along which the rows' second-order forms
  vanish. Unequal cranks released within ``1e-7 .. 1e-4`` rad of a fold, or at
  rest at one (``th0 = 0``, ``pi``: the initial velocity from the joints'
  second-order conditions, :meth:`gaussopt.multibody.Model.velocities`), follow
  the reference (``tests/test_folds.py``).

Reference: the linkage has one branch (a coupler whose middle pin stays at the
distance ``l`` from the middle ground pin keeps the outer cranks parallel), on
which all cranks have the angle ``th`` and the coupler translates (its centroid
at ``(d + l cos th, l sin th)``), whatever the masses. With crank masses ``m_k``
(uniform rods pinned at an end, ``m_k l^2 / 3`` each) and coupler mass ``m_p``:
``T = 1/2 (sum m_k l^2 / 3 + m_p l^2) th'^2`` and
``V = g (sum m_k l / 2 + m_p l) sin th``, so
``(sum m_k / 3 + m_p) l^2 th'' = -g l (sum m_k / 2 + m_p) cos th``, integrated
with DOP853 at ``rtol = atol = 1e-13`` (one coordinate: independent of the
body-coordinate model and of gaussopt).
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

import gaussopt as go
import gaussopt.multibody as mb

G = 9.81


def _crank_masses(m_crank) -> np.ndarray:
    """``m_crank`` as three masses: one number for all cranks, or one per crank."""
    mc = np.broadcast_to(np.asarray(m_crank, dtype=float), (3,)).copy() \
        if np.ndim(m_crank) == 0 else np.asarray(m_crank, dtype=float)
    if mc.shape != (3,) or not np.all(np.isfinite(mc)) or np.any(mc <= 0):
        raise go.ModelError(f"`m_crank` must be a positive mass or three of them (one per crank), "
                            f"found {m_crank!r}.")
    return mc


def model(m_crank=1.0, m_coupler: float = 2.0, l: float = 1.0, d: float = 1.0,
          g: float = G) -> mb.Model:
    """The linkage as a :class:`gaussopt.multibody.Model` (bodies crank1..3, coupler);
    ``m_crank`` is one mass for the three cranks or one per crank."""
    mc = _crank_masses(m_crank)
    cranks = [mb.Body.uniform_rod(f"crank{k + 1}", mc[k], l) for k in range(3)]
    coupler = mb.Body.uniform_rod("coupler", m_coupler, 2 * d)
    joints = []
    for k, c in enumerate(cranks):
        joints.append(mb.Revolute(None, (k * d, 0.0), c, (-l / 2, 0.0)))
        joints.append(mb.Revolute(c, (l / 2, 0.0), coupler, ((k - 1) * d, 0.0)))
    return mb.Model(cranks + [coupler], joints, gravity=(0.0, -g), name="double_parallelogram")


def configuration(th: float, l: float = 1.0, d: float = 1.0) -> np.ndarray:
    """Body coordinates on the parallelogram branch at crank angle ``th``, shape (12,)."""
    c, s = np.cos(th), np.sin(th)
    out = []
    for k in range(3):
        out += [k * d + 0.5 * l * c, 0.5 * l * s, th]
    out += [d + l * c, l * s, 0.0]
    return np.array(out)


def reference(t, th0: float = np.pi / 3, w0: float = 0.0, m_crank=1.0,
              m_coupler: float = 2.0, l: float = 1.0, g: float = G) -> np.ndarray:
    """``th(t), th'(t)`` of the reduced one-DOF equation, shape (2, len(t)).

    With crank masses ``m_k``: ``T = 1/2 (sum m_k l^2/3 + m_p l^2) th'^2``,
    ``V = g l (sum m_k/2 + m_p) sin th``."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    mc = _crank_masses(m_crank)
    mass = (mc.sum() / 3.0 + m_coupler) * l * l
    k = g * l * (0.5 * mc.sum() + m_coupler)

    def f(_, y):
        return [y[1], -k * np.cos(y[0]) / mass]

    sol = solve_ivp(f, (0.0, max(float(t.max()), 0.0)), [th0, w0], method="DOP853",
                    rtol=1e-13, atol=1e-13, dense_output=True)
    return sol.sol(t)


def build(th0: float = np.pi / 3, w0: float = 0.0, m_crank=1.0, m_coupler: float = 2.0,
          l: float = 1.0, d: float = 1.0, g: float = G, t_end: float = 10.0) -> go.Problem:
    """The double parallelogram released at crank angle ``th0`` with rate ``w0``.

    Parameters
    ----------
    th0 : float
        Initial crank angle from the +x axis [rad] (the folded configurations
        are ``th = k pi``).
    w0 : float
        Initial crank rate [rad/s].
    m_crank : float or sequence of 3 floats
        Mass of each crank, or of the three cranks [kg].
    m_coupler : float
        Mass of the coupler [kg].
    l : float
        Length of the cranks [m].
    d : float
        Distance between neighbouring ground pins [m] (the coupler is ``2 d`` long).
    g : float
        Gravitational acceleration [m/s^2].
    t_end : float
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``th`` (angle of the first crank [rad]);
        ``reference(t)`` the same from the reduced one-coordinate equation.
    """
    mdl = model(m_crank=m_crank, m_coupler=m_coupler, l=l, d=d, g=g)
    q0 = configuration(th0, l=l, d=d)
    v0 = mdl.velocities(q0, {"crank1.phi": w0})
    i_th = mdl.index("crank1.phi")

    def outputs(q, v):
        q = np.atleast_2d(q)
        return {"th": q[:, i_th]}

    def ref(t):
        return {"th": reference(t, th0=th0, w0=w0, m_crank=m_crank, m_coupler=m_coupler, l=l, g=g)[0]}

    prob = go.Problem(
        name="double_parallelogram", system=mdl.system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description="Double parallelogram (three parallel cranks on one coupler) in body "
                    "coordinates: 12 coordinates, 12 joint equations of rank 11 (one redundant), "
                    "1 DOF; rank 10 at the folded configurations th = k pi, which the swing "
                    "passes again and again.",
        settings={"method": "DOP853", "rtol": 1e-10, "atol": 1e-10,
                  "stabilization": mb.LeastSquaresProjection(),
                  "solver_options": {"rank_tol": 1e-5}},
        outputs=outputs, reference=ref,
        # for figures: body coordinates in m and rad, revolute joints' rows in m
        units={**{c: ("rad" if c.endswith(".phi") else "m") for c in mdl.system.coordinates},
               "th": "rad", "energy": "J", "length": "m", "constraints": ("m",)},
        params={"th0": th0, "w0": w0, "m_crank": np.asarray(m_crank, dtype=float).tolist(),
                "m_coupler": m_coupler, "l": l, "d": d,
                "g": g})
    prob.model = mdl
    return prob
