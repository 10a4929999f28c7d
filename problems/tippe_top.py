"""The tippe top (Leine and Glocker's parameters): a spinning sphere whose centroid lies below
its centre slides on a rough floor, tips over towards its stem and stops sliding.

A sphere of radius ``r`` carries a stem; the centroid lies ``a`` below the sphere's centre
on the symmetry axis (transverse and axial moments of inertia ``A``, ``C`` about the
centroid). Set spinning fast about the vertical, slightly tilted, it touches the floor at
one point, the sphere's lowest, where Coulomb's friction ``mu`` acts against the point's
slip. The friction's moment raises the centroid: the top turns over ("tips") towards its
stem. With point contact (Coulomb friction only, no drilling friction) the slip stops
before the stem reaches the floor, and the top rolls on its sphere at a constant
inclination, its friction inside the cone.

The model is a tree in joint coordinates (:mod:`gaussopt.multibody.tree`: one free joint,
Euler parameters) with two contact pairs of its geometry (the sphere and the stem's end
sphere of radius ``r_s``, ``l_s`` above the centroid, against the floor ``z = 0``), each an
exact unilateral contact with the circular Coulomb cone: the sliding, the stop of the
slip and the rolling are phases of the event-driven contact run, the stop an event found
to rounding. The stem's gap is watched throughout (it stays open for these parameters).

Parameters as Siconos's tippe-top example writes Leine and Glocker's (their Contensou
drilling friction set to zero, the limit of a point contact): m = 6 g, r = 15 mm,
a = 3 mm, stem sphere 5 mm at 16 mm, A = 8e-7 kg m^2, C = 7e-7 kg m^2, mu = 0.3; tilted by
0.1 rad and spun at 180 rad/s about the vertical, centroid at rest, g = 9.81 m/s^2.

The test (``tests/test_tippe_top.py``) checks the run against Newton-Euler equations of the
sliding and of the rolling top written there without gaussopt.

R. I. Leine, Ch. Glocker, "A set-valued force law for spatial Coulomb-Contensou friction",
European Journal of Mechanics A/Solids 22 (2003) 193-216.
"""

from __future__ import annotations

import math

import numpy as np

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.model.system import rebuildable
from gaussopt_problems._rigid import quaternion_rate, rotation

#: Leine and Glocker's tippe top (SI units): mass [kg], sphere radius, centroid below the
#: sphere's centre, stem sphere radius, stem sphere above the centroid [m], transverse and
#: axial moments of inertia about the centroid [kg m^2], friction [1], gravity [m/s^2]
PARAMETERS = {"m": 6e-3, "r": 0.015, "a": 0.003, "r_s": 0.005, "l_s": 0.016, "A": 8e-7,
              "C": 7e-7, "mu": 0.3, "g": 9.81}


def initial_state(theta0: float, spin: float, r: float, a: float) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """``(q0, v0)``: tilted by ``theta0`` about the world y axis, the sphere touching the
    floor (centroid at height ``r - a cos(theta0)``), spinning at ``spin`` about the world
    vertical, centroid at rest."""
    e = np.array([math.cos(theta0 / 2), 0.0, math.sin(theta0 / 2), 0.0])
    q0 = np.concatenate([[0.0, 0.0, r - a * math.cos(theta0)], e])
    # (the free joint's velocity coordinates are the Euler parameters' rates)
    v0 = np.concatenate([np.zeros(3), quaternion_rate(e, rotation(e).T @ np.array([0.0, 0.0,
                                                                                  spin]))])
    return q0, v0


def observables(q: np.ndarray, v: np.ndarray) -> dict:
    """``theta`` (the symmetry axis from the upward vertical) [rad], the centroid's height
    ``z`` [m] and the vertical angular velocity ``w_z`` [rad/s]."""
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    e = q[:, 3:7] / np.linalg.norm(q[:, 3:7], axis=1)[:, None]
    e0, e1, e2, e3 = e.T
    cos_th = e0 * e0 - e1 * e1 - e2 * e2 + e3 * e3          # R[2, 2]
    d0, d1, d2, d3 = v[:, 3:7].T
    w_z = 2 * (e0 * d3 - e3 * d0 + e1 * d2 - e2 * d1)        # 2 (e' (x) conj(e)), z
    return {"theta": np.arccos(np.clip(cos_th, -1.0, 1.0)), "z": q[:, 2], "w_z": w_z}


@rebuildable        # its System pickles as this call
def build(m: float = 6e-3, r: float = 0.015, a: float = 0.003, r_s: float = 0.005,
          l_s: float = 0.016, A: float = 8e-7, C: float = 7e-7, mu: float = 0.3,
          g: float = 9.81, theta0: float = 0.1, spin: float = 180.0,
          t_end: float = 1.3) -> go.Problem:
    """The tippe top launched tilted and spinning (defaults: Leine and Glocker's, module
    docstring; it slides until t = 1.105 s, then rolls).

    Parameters
    ----------
    m : float, > 0
        Mass [kg].
    r : float, > 0
        Radius of the sphere [m].
    a : float, in [0, r)
        Distance of the centroid below the sphere's centre [m].
    r_s : float, > 0
        Radius of the stem's end sphere [m].
    l_s : float
        Height of the stem's end sphere's centre above the centroid [m] (on the axis).
    A, C : float, > 0
        Transverse and axial moments of inertia about the centroid [kg m^2].
    mu : float, > 0
        Coulomb friction coefficient of both spheres on the floor [1].
    g : float, > 0
        Gravitational acceleration [m/s^2].
    theta0 : float, in (0, pi/2)
        Initial tilt of the axis from the vertical [rad].
    spin : float
        Initial angular velocity about the vertical [rad/s].
    t_end : float, > 0
        End time [s].

    Returns
    -------
    Problem
        ``outputs(q, v)``: ``theta`` [rad], ``z`` [m], ``w_z`` [rad/s] (:func:`observables`);
        ``model`` the tree Model with its two contact pairs; no ``reference`` (the test
        integrates the Newton-Euler equations of the sliding and rolling top).
    """
    from gaussopt.multibody import tree
    from gaussopt.multibody.tree.tree_geometry import ContactPair

    for name, val in (("m", m), ("r", r), ("r_s", r_s), ("A", A), ("C", C), ("mu", mu),
                      ("g", g)):
        if not (math.isfinite(val) and val > 0):
            raise ModelError(f"`{name}` must be a finite number > 0, found {val!r}.")
    if not (math.isfinite(a) and 0 <= a < r):
        raise ModelError(f"`a` must lie in [0, r) (the centroid inside the sphere, below its "
                         f"centre) [m], found {a!r} with r = {r!r}.")
    if not (math.isfinite(l_s) and math.isfinite(spin)):
        raise ModelError(f"`l_s` and `spin` must be finite, found {l_s!r}, {spin!r}.")
    if not 0 < theta0 < math.pi / 2:
        raise ModelError(f"`theta0` must lie in (0, pi/2) [rad], found {theta0!r}.")
    link = tree.Link("top", None, mass=m, inertia=np.diag([A, A, C]))
    model = tree.Model([link], [tree.TreeJoint("free", "free", "top")], gravity=(0.0, 0.0, -g),
                       name="tippe_top")
    floor = dict(kind="plane-sphere", friction=mu, link1=None, link2="top",
                 origin1=(0.0, 0.0, 0.0), frame1=((1.0, 0.0, 0.0), (0.0, 1.0, 0.0),
                                                   (0.0, 0.0, 1.0)), radius1=0.0,
                 source="pair")
    model.contact_pairs = (
        ContactPair("floor", "sphere", points2=((0.0, 0.0, a),), radius2=r, **floor),
        ContactPair("floor", "stem", points2=((0.0, 0.0, l_s),), radius2=r_s, **floor))
    system = model.with_contacts()
    q0, v0 = initial_state(theta0, spin, r, a)

    def draw(ax, q):
        from matplotlib.patches import Circle

        o = observables(q, np.zeros_like(q))
        th = float(o["theta"][0])
        c = np.array([0.0, float(q[2]) + a * math.cos(th)])
        ax.add_patch(Circle(c, r, fill=False, color="C0", lw=2))
        tip = c + (l_s - a) * np.array([math.sin(th), math.cos(th)])
        ax.plot([c[0], tip[0]], [c[1], tip[1]], "-", color="C0", lw=3)
        ax.axhline(0.0, color="k", lw=1)
        ax.set_aspect("equal")
        return ax

    return go.Problem(
        name="tippe_top", system=system, q0=q0, v0=v0, t_span=(0.0, t_end),
        description=(f"Tippe top (m = {m:g} kg, r = {r:g} m, centroid {a:g} m below the "
                     f"centre, mu = {mu:g}) tilted by {theta0:g} rad and spun at {spin:g} "
                     "rad/s: it slides and tips towards its stem, then rolls."),
        settings={"method": "DOP853", "rtol": 1e-10, "atol": 1e-12},
        solvers=("closed_form",), outputs=observables, draw=draw, model=model,
        params={"m": m, "r": r, "a": a, "r_s": r_s, "l_s": l_s, "A": A, "C": C, "mu": mu,
                "g": g, "theta0": theta0, "spin": spin},
        units={"theta": "rad", "z": "m", "w_z": "rad/s", "energy": "J", "length": "m"})
