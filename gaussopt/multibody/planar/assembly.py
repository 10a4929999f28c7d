"""Assembly of a planar multibody model: bodies, joints and forces -> the kernel's tables.

:func:`assemble_model` checks the elements (collecting *every* problem into one
:class:`~gaussopt.ModelError`), numbers the bodies (the ground is the padding
body ``len(bodies)``), the coordinates and the joint equations, labels the rows,
and packs the primitives and forces into the kernel's parameter array
(:func:`gaussopt.multibody.planar.compiled_model.pack`). The Python callables (driven angles,
callable point forces and torques) are kept aside: the :class:`Model` evaluates
them and hands their values to the kernel.

The :class:`Assembly` is the model's data in one place, with the evaluation of
the joints (``Phi``, ``Phi_t``, ``Phi_q``, the acceleration rows) and the lookup
of coordinates: :mod:`~gaussopt.multibody.common.analysis` and
:mod:`~gaussopt.multibody.common.states` take an ``Assembly`` (not
the :class:`~gaussopt.multibody.Model`, which composes them), so the package has
no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.multibody.common.base_assembly import BaseAssembly, body_resolver
import gaussopt.multibody.planar.compiled_model as kernel
from gaussopt.multibody.planar.elements import (GROUND, Body, Damper, Joint, PointForce, Spring,
                                                Torque, Vector2, _ref_name)

__all__ = ["Assembly", "assemble_model"]

_NONE = np.zeros(0)


@dataclass
class Assembly(BaseAssembly):
    """What :func:`assemble_model` builds (the :class:`Model` exposes most of it): the
    attributes of :class:`~gaussopt.multibody.common.base_assembly.BaseAssembly` (``n = 3 *
    len(bodies)``, ``gravity`` of shape (2,), ``joint_ends`` the ``(i, j, s_j)`` of every
    joint: its two bodies (the last primitive's) and the body-``j`` point its reaction
    moments are taken about (``None``: the centroid), ``drivers`` the ``(row, angle, rate,
    acceleration)`` of every driven angle with a callable angle) and these.

    Attributes
    ----------
    point_forces, torques : list of callable
        The callable point forces ``f(t, q, v) -> (2,)`` and torques ``f(t, q, v) -> float``,
        in the order of the kernel's records.
    mass_diagonal : ndarray, shape (n,)
    F0 : ndarray, shape (n,)
        The constant part of the applied force.
    state_dependent_force : bool
    """

    kernel = kernel
    axes = ("x", "y", "phi")

    point_forces: list
    torques: list
    mass_diagonal: np.ndarray
    F0: np.ndarray
    state_dependent_force: bool

    # ------------------------------------------------------------------ the joints' kinematics
    def velocity_rows(self, q: np.ndarray, names) -> np.ndarray:
        """Rows ``S`` with ``S v`` the named velocity components (coordinate rates)."""
        S = np.zeros((len(names), self.n))
        for k, nm in enumerate(names):
            S[k, self.index_of(nm)] = 1.0
        return S

    def driver_values(self, t, order: int, dtype=float) -> np.ndarray:
        """``c(t)`` (order 0), ``c'(t)`` (1) or ``c''(t)`` (2) of the driven rows."""
        if not self.drivers:
            return np.zeros(0, dtype)
        return np.array([d[1 + order](t) for d in self.drivers], dtype=dtype)

    def phi(self, t: float, q: np.ndarray) -> np.ndarray:
        """Joint equations ``Phi(t, q)``, shape (m,). Complex-safe in ``t`` and ``q``
        (the kernel is compiled for ``complex128`` too)."""
        q = np.asarray(q)
        dt = np.complex128 if np.iscomplexobj(q) or np.iscomplexobj(t) else np.float64
        out = np.empty(self.m, dt)
        kernel.phi(self.p, np.ascontiguousarray(q, dtype=dt), self.driver_values(t, 0, dt), out)
        return out

    def jacobian(self, t: float, q: np.ndarray, padded: bool = False) -> np.ndarray:
        """Exact ``Phi_q``, shape (m, n); ``padded``: with the ground's three columns,
        shape (m, n + 3) (the reactions)."""
        q = np.ascontiguousarray(q, dtype=float)
        A = np.empty((self.m, self.n + (3 if padded else 0)))
        kernel.rows(self.p, q, q, _NONE, A, _NONE, False)
        return A


def _vec2(x, label: str, problems: list) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        problems.append(f"{label} must be a pair of floats, found {x!r}")
        return np.zeros(2)
    if a.shape != (2,) or not np.all(np.isfinite(a)):
        problems.append(f"{label} must be a finite pair of floats (shape (2,)), found {x!r}")
        return np.zeros(2)
    return a


def _malformed(name: str, problems: list) -> ModelError:
    return ModelError(f"Model {name!r} is malformed:\n  - " + "\n  - ".join(problems))


def _check_bodies(bodies: list, name: str) -> list[str]:
    problems: list[str] = []
    if not bodies:
        raise ModelError("`bodies` is empty: a model needs at least one Body.")
    names: list[str] = []
    for k, b in enumerate(bodies):
        if not isinstance(b, Body):
            problems.append(f"`bodies[{k}]` must be a Body, found {type(b).__name__}")
            continue
        if not isinstance(b.name, str) or not b.name or b.name == GROUND or "." in b.name:
            problems.append(f"`bodies[{k}]`: the name must be a non-empty str without '.', "
                            f"not {GROUND!r}; found {b.name!r}")
        if not (np.isfinite(b.mass) and b.mass > 0):
            problems.append(f"body {b.name!r}: `mass` must be > 0, found {b.mass!r}")
        if not (np.isfinite(b.inertia) and b.inertia >= 0):
            problems.append(f"body {b.name!r}: `inertia` must be >= 0, found {b.inertia!r}")
        names.append(b.name)
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        problems.append(f"duplicate body names {dup}")
    if problems:
        raise _malformed(name, problems)
    return names


class _Tables:
    """The primitive records and labels, filled joint by joint."""

    def __init__(self) -> None:
        self.points: list = []       # (i, j, s_i, s_j, row)
        self.angles: list = []       # (i, j, c0, row)
        self.lines: list = []        # (i, j, s_i, s_j, n, row)
        self.drivers: list = []      # (row, angle, rate, acceleration)
        self.labels: list[str] = []
        self.joint_labels: list[str] = []
        self.joint_rows: list[np.ndarray] = []
        self.joint_ends: list[tuple[int, int, Optional[np.ndarray]]] = []
        self.row = 0


def _add_joints(joints: tuple, tab: _Tables, idx: Callable, ground: int, names: list,
                problems: list) -> None:
    seen: dict[str, int] = {}
    for jk, jt in enumerate(joints):
        if not isinstance(jt, Joint):
            problems.append(f"`joints[{jk}]` must be a Revolute, Prismatic, Fixed, DrivenAngle "
                            f"or PointOnLine, found {type(jt).__name__}")
            continue
        lab = f"joints[{jk}] {jt.kind}"
        try:
            lbl = jt.label()
        except ModelError as e:
            problems.append(f"{lab}: {e}")
            continue
        seen[lbl] = seen.get(lbl, 0) + 1
        if seen[lbl] > 1:                       # same kind between the same bodies again
            lbl = f"{lbl}#{seen[lbl]}"
        tab.joint_labels.append(lbl)
        start = tab.row
        end_i = end_j = ground
        Pj = None               # body-j point the reaction moments are taken about
        for eq in jt._equations():
            kind = eq[0]
            if kind == "point":
                _, bi, si, bj, sj = eq
                i, j = idx(bi, lab), idx(bj, lab)
                s_i = _vec2(si, f"{lab}: point_i", problems)
                Pj = _vec2(sj, f"{lab}: point_j", problems)
                tab.points.append((i, j, s_i, Pj, tab.row))
                tab.labels += [f"{lbl}[x]", f"{lbl}[y]"]
                tab.row += 2
            elif kind == "angle":
                _, bi, bj, c0, drv = eq
                i, j = idx(bi, lab), idx(bj, lab)
                if not np.isfinite(c0):
                    problems.append(f"{lab}: `angle` must be finite, found {c0!r}")
                tab.angles.append((i, j, c0, tab.row))
                if drv is not None:
                    f, df, ddf = drv
                    if not (callable(df) and callable(ddf)):
                        problems.append(f"{lab}: a callable `angle` needs callable `rate` and "
                                        f"`acceleration` (its exact derivatives); found "
                                        f"rate={df!r}, acceleration={ddf!r}")
                    tab.drivers.append((tab.row, f, df, ddf))
                tab.labels.append(f"{lbl}[phi]")
                tab.row += 1
            else:   # line
                _, bi, si, axis, bj, sj = eq
                i, j = idx(bi, lab), idx(bj, lab)
                ax = _vec2(axis, f"{lab}: axis", problems)
                nrm = float(np.hypot(*ax))
                if nrm == 0.0:
                    problems.append(f"{lab}: the axis/line direction must be nonzero, found {axis!r}")
                    nrm = 1.0
                s_i = _vec2(si, f"{lab}: point_i/line_point", problems)
                Pj = _vec2(sj, f"{lab}: point_j/point", problems)
                tab.lines.append((i, j, s_i, Pj, np.array([-ax[1], ax[0]]) / nrm, tab.row))
                tab.labels.append(f"{lbl}[n]")
                tab.row += 1
            end_i, end_j = i, j
            if i == j:
                problems.append(f"{lab} connects {'the ground' if i == ground else repr(names[i])} "
                                "to itself; give two different bodies")
        tab.joint_rows.append(np.arange(start, tab.row))
        tab.joint_ends.append((end_i, end_j, Pj))


def assemble_model(bodies: Sequence[Body], joints: Sequence[Joint] = (), forces: Sequence = (),
                   gravity: Vector2 = (0.0, 0.0), name: str = "multibody") -> Assembly:
    """Check the elements and build the kernel's tables (see the module docstring).

    Raises
    ------
    ModelError
        Listing every problem found (unknown bodies, bad geometry, missing
        derivatives of a drive, ...).
    """
    bodies = list(bodies)
    names = _check_bodies(bodies, name)
    problems: list[str] = []
    index = {nm: k for k, nm in enumerate(names)}
    nb_ = len(bodies)
    n = 3 * nb_
    ground = nb_
    g = _vec2(gravity, "`gravity`", problems)

    idx = body_resolver(bodies, index, _ref_name, Body, problems)

    joints = tuple(joints)
    tab = _Tables()
    _add_joints(joints, tab, idx, ground, names, problems)

    # ---------------------------------------------------------- forces
    mvec = np.array([b.mass for b in bodies])
    F0 = np.zeros(n)
    F0[0::3] = mvec * g[0]
    F0[1::3] = mvec * g[1]
    arms, point_forces, pf_records, torques, tq_records, springs = [], [], [], [], [], []
    for fk, fo in enumerate(forces):
        lab = f"forces[{fk}] {type(fo).__name__}"
        if isinstance(fo, PointForce):
            b = idx(fo.body, lab)
            s = _vec2(fo.point, f"{lab}: point", problems)
            if b == ground:
                problems.append(f"{lab}: a force on the ground has no effect; give a body")
            if callable(fo.force):
                point_forces.append(fo.force)
                pf_records.append((b, s[0], s[1]))
            else:
                f = _vec2(fo.force, f"{lab}: force", problems)
                if b != ground:
                    F0[3 * b] += f[0]
                    F0[3 * b + 1] += f[1]
                if np.any(s != 0.0):          # moment arms at the centroid vanish
                    arms.append((b, s[0], s[1], f[0], f[1]))
        elif isinstance(fo, Torque):
            b = idx(fo.body, lab)
            if b == ground:
                problems.append(f"{lab}: a torque on the ground has no effect; give a body")
            if callable(fo.torque):
                torques.append(fo.torque)
                tq_records.append((b,))
            elif not np.isfinite(fo.torque):
                problems.append(f"{lab}: `torque` must be finite, found {fo.torque!r}")
            elif b != ground:
                F0[3 * b + 2] += float(fo.torque)
        elif isinstance(fo, (Spring, Damper)):
            i, j = idx(fo.body_i, lab), idx(fo.body_j, lab)
            si = _vec2(fo.point_i, f"{lab}: point_i", problems)
            sj = _vec2(fo.point_j, f"{lab}: point_j", problems)
            if i == j:
                problems.append(f"{lab} connects a body to itself")
            if isinstance(fo, Spring):
                k, L0, c = float(fo.stiffness), float(fo.rest_length), 0.0
                if not (np.isfinite(k) and np.isfinite(L0) and L0 >= 0):
                    problems.append(f"{lab}: `stiffness` must be finite and `rest_length` >= 0, "
                                    f"found {fo.stiffness!r}, {fo.rest_length!r}")
            else:
                k, L0, c = 0.0, 0.0, float(fo.damping)
                if not np.isfinite(c):
                    problems.append(f"{lab}: `damping` must be finite, found {fo.damping!r}")
            springs.append((i, j, si[0], si[1], sj[0], sj[1], k, L0, c))
        else:
            problems.append(f"`forces[{fk}]` must be a PointForce, Torque, Spring or Damper, "
                            f"found {type(fo).__name__}")
    if problems:
        raise _malformed(name, problems)

    # ---------------------------------------------------------- the kernel's tables
    mdiag = np.repeat(mvec, 3)
    mdiag[2::3] = [b.inertia for b in bodies]
    p = kernel.pack(
        nb_, tab.row,
        points=[(i, j, *si, *sj, r) for i, j, si, sj, r in tab.points],
        angles=tab.angles,
        lines=[(i, j, *si, *sj, *nv, r) for i, j, si, sj, nv, r in tab.lines],
        driven_rows=[d[0] for d in tab.drivers], mass=mdiag, F0=F0, arms=arms,
        springs=springs, point_forces=pf_records, torques=tq_records)
    dampers = any(s[8] != 0.0 for s in springs)
    return Assembly(
        name=name, bodies=tuple(bodies), body_names=tuple(names), index=index, n=n, m=tab.row,
        coordinates=tuple(f"{nm}.{c}" for nm in names for c in ("x", "y", "phi")), gravity=g,
        joints=joints, labels=tab.labels, joint_labels=tab.joint_labels,
        joint_rows=tab.joint_rows, joint_ends=tab.joint_ends, drivers=tab.drivers,
        point_forces=point_forces, torques=torques, mass_diagonal=mdiag, F0=F0, p=p,
        conservative=not (point_forces or torques or dampers or tab.drivers),
        state_dependent_force=bool(point_forces or torques or springs or arms))
