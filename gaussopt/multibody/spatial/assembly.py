"""Assembly of a spatial multibody model: bodies, joints and forces -> the kernel's tables.

:func:`assemble_model` checks the elements (collecting every problem into one
:class:`~gaussopt.ModelError`), numbers bodies (the ground is the padding body
``len(bodies)``), coordinates and equations (first one normalization row per body,
then the joints' rows in the order given), turns the joints' world geometry at the
reference pose into body-frame vectors, and packs everything into the kernel's
parameter array (:func:`gaussopt.multibody.spatial.compiled_model.pack`). The
:class:`SpatialAssembly` is the model's data in one place, with the evaluation of
the joints; :mod:`gaussopt.multibody.common.states` and :mod:`gaussopt.multibody.common.analysis`
read it as they read the planar one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.multibody.common.base_assembly import BaseAssembly, body_resolver
import gaussopt.multibody.spatial.compiled_model as kernel
from gaussopt.multibody.spatial.elements import (GROUND, Armature, Body, Force, Joint,
                                                 RotationalDamper, Spring, Torque, _ref_name, _vec3,
                                                 rotation_matrix)

__all__ = ["SpatialAssembly", "assemble_model"]

_NONE = np.zeros(0)
_AXES = ("x", "y", "z", "e0", "e1", "e2", "e3")
_RATES = {"wx": 0, "wy": 1, "wz": 2}


@dataclass
class SpatialAssembly(BaseAssembly):
    """What :func:`assemble_model` builds (the :class:`~gaussopt.multibody.spatial.Model` exposes most of it):
    the attributes of :class:`~gaussopt.multibody.common.base_assembly.BaseAssembly` (``n =
    7 * len(bodies)``, ``m`` with the normalizations first, ``gravity`` of shape (3,),
    ``joint_ends`` the ``(i, j, s_i, s_j, frame_i)`` of every joint: its bodies (``ground``
    index for the ground), its anchor in the frames of ``i`` and ``j`` (``None``: the
    centroid of ``j``) and its frame's axes (rows) in the frame of ``i``; ``drivers`` the
    ``(angle, rate, acceleration)`` of the driven angles with callables) and these.

    Attributes
    ----------
    py_forces : list of tuple
        ``("force" | "torque", callable)`` in the order of the kernel's ``ext`` values.
    q_reference : ndarray, shape (n,)
    nnorm : int
        The normalization rows (one per body, first).
    """

    kernel = kernel
    axes = _AXES

    py_forces: list
    q_reference: np.ndarray
    nnorm: int

    def velocity_rows(self, q: np.ndarray, names) -> np.ndarray:
        """Rows ``S`` with ``S v`` the named velocity components: coordinate rates
        (``"<body>.x"``, ...) and world angular velocity components (``"<body>.wx"``,
        ``".wy"``, ``".wz"``: ``w = 2 E(p) p'``)."""
        S = np.zeros((len(names), self.n))
        for k, nm in enumerate(names):
            body, _, comp = str(nm).rpartition(".")
            if comp in _RATES and body in self.index:
                o = 7 * self.index[body] + 3
                e0, e1, e2, e3 = q[o:o + 4]
                E = np.array([[-e1, e0, -e3, e2], [-e2, e3, e0, -e1], [-e3, -e2, e1, e0]])
                S[k, o:o + 4] = 2.0 * E[_RATES[comp]]
            else:
                try:
                    S[k, self.coordinates.index(nm)] = 1.0
                except ValueError:
                    raise ModelError(
                        f"unknown velocity component {nm!r}; use a coordinate ('<body>.x', ..., "
                        f"'<body>.e3') or a world angular velocity component ('<body>.wx', "
                        f"'.wy', '.wz') of bodies {list(self.body_names)}.") from None
        return S

    def driver_values(self, t, order: int) -> np.ndarray:
        """``c, c', c''`` of every callable driven angle (three values each); ``order``
        is accepted for the planar interface and ignored."""
        if not self.drivers:
            return _NONE
        return np.array([float(f(t)) for d in self.drivers for f in d], dtype=float)

    def external(self, t, q, v) -> np.ndarray:
        """The values of the callable forces and torques (three each)."""
        if not self.py_forces:
            return _NONE
        out = []
        for kind, f in self.py_forces:
            val = np.asarray(f(t, q, v), dtype=float).reshape(-1)
            if val.shape != (3,) or not np.all(np.isfinite(val)):
                raise ModelError(f"a callable {kind} of model {self.name!r} returned "
                                 f"{val!r}; expected 3 finite numbers (world frame).")
            out.append(val)
        return np.concatenate(out)

    def phi(self, t: float, q: np.ndarray) -> np.ndarray:
        out = np.empty(self.m)
        kernel.phi(self.p, np.ascontiguousarray(q, dtype=float), self.driver_values(t, 0), out)
        return out

    def jacobian(self, t: float, q: np.ndarray) -> np.ndarray:
        q = np.ascontiguousarray(q, dtype=float)
        A = np.empty((self.m, self.n))
        kernel.rows(self.p, q, q, self.driver_values(t, 0), A, _NONE, False)
        return A


def _local(R: np.ndarray, r: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Body-frame coordinates of the world point ``P`` (reference pose ``R``, ``r``)."""
    return R.T @ (P - r)


def assemble_model(bodies: Sequence[Body], joints: Sequence[Joint] = (), forces: Sequence = (),
                   gravity=(0.0, 0.0, 0.0), name: str = "spatial") -> SpatialAssembly:
    """Check the elements and build the :class:`SpatialAssembly` (see the module docstring)."""
    bodies, joints, forces = tuple(bodies), tuple(joints), tuple(forces)
    problems: list[str] = []
    for k, b in enumerate(bodies):
        if not isinstance(b, Body):
            problems.append(f"bodies[{k}] must be a spatial Body, found {type(b).__name__}")
    if problems:
        raise ModelError(f"model {name!r}: " + "; ".join(problems) + ".")
    names = [b.name for b in bodies]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise ModelError(f"model {name!r}: body names must be unique, found {dup} more than once.")
    if GROUND in names:
        raise ModelError(f"model {name!r}: {GROUND!r} is the name of the ground; rename that body.")
    if not bodies:
        raise ModelError(f"model {name!r}: `bodies` is empty.")
    index = {nm: k for k, nm in enumerate(names)}
    nb_ = len(bodies)
    ground = nb_
    try:
        g = _vec3(gravity, "gravity")
    except ModelError as e:
        raise ModelError(f"model {name!r}: {e}") from None

    Rs = [rotation_matrix(b._p) for b in bodies] + [np.eye(3)]
    rs = [b._r for b in bodies] + [np.zeros(3)]

    idx = body_resolver(bodies, index, _ref_name, Body, problems,
                        unknown="{label} names body {name!r}, which is not in `bodies` {bodies}",
                        other="{label} refers to a Body named {name!r} that is not the one in "
                              "`bodies`")

    masses = [[b.mass] + list(b._J.reshape(-1)) for b in bodies]
    norms = [[k, k] for k in range(nb_)]
    labels = [f"{nm}.norm" for nm in names]
    row = nb_
    points, dot1, dot2, dists, drivers_rec = [], [], [], [], []
    py_drivers, joint_labels, joint_rows, joint_ends = [], [], [], []
    seen: dict = {}
    for jn, jt in enumerate(joints):
        label = f"joints[{jn}]"
        if not isinstance(jt, Joint):
            problems.append(f"{label} must be a spatial joint (Spherical, Revolute, ...), found "
                            f"{type(jt).__name__}")
            continue
        i, j = idx(jt.body_i, f"{label}.body_i"), idx(jt.body_j, f"{label}.body_j")
        if i == j:
            problems.append(f"{label} ({type(jt).__name__}) joins "
                            f"{'the ground' if i == ground else repr(names[i])} to itself")
            continue
        try:
            eqs = jt._equations()
            anchor = jt._anchor()
            frame = jt._frame()
        except ModelError as e:
            problems.append(f"{label}: {e}")
            continue
        nm_i = GROUND if i == ground else names[i]
        nm_j = GROUND if j == ground else names[j]
        base = f"{type(jt).__name__}({nm_i},{nm_j})"
        seen[base] = seen.get(base, 0) + 1
        jlabel = base if seen[base] == 1 else f"{base}#{seen[base]}"
        Ri, Rj, ri, rj = Rs[i], Rs[j], rs[i], rs[j]
        start = row
        for kind, suff, data in eqs:
            if kind == "point":
                P = data if data is not None else (rj if j != ground else ri)
                points.append([i, j, *_local(Ri, ri, P), *_local(Rj, rj, P), row])
            elif kind == "dot1":
                a, b = data
                dot1.append([i, j, *(Ri.T @ a), *(Rj.T @ b), row, 0.0])
            elif kind == "dot2":
                a, P = data
                dot2.append([i, j, *(Ri.T @ a), *_local(Ri, ri, P), *_local(Rj, rj, P), row, 0.0, 0.0])
            elif kind == "dist":
                Pi, Pj, L = data
                dists.append([i, j, *_local(Ri, ri, Pi), *_local(Rj, rj, Pj), L, row])
            elif kind == "driven":
                f, gg, angle, rate, acc = data
                if callable(angle):
                    k = len(py_drivers)
                    py_drivers.append((angle, rate, acc))
                    c0 = 0.0
                else:
                    k, c0 = -1, float(angle)
                drivers_rec.append([i, j, *(Ri.T @ f), *(Ri.T @ gg), *(Rj.T @ f), row, c0, k, 0.0])
            labels += [f"{jlabel}[{s}]" for s in suff]
            row += len(suff)
        joint_labels.append(jlabel)
        joint_rows.append(np.arange(start, row))
        if anchor is None:
            s_i = None if j != ground else None
            s_j = None
        else:
            s_i, s_j = _local(Ri, ri, anchor), _local(Rj, rj, anchor)
        joint_ends.append((i, j, s_i, s_j, frame @ Ri))   # frame axes in body i's frame (rows)

    fpy, frec, trec, srec, drec, arec = [], [], [], [], [], []
    conservative = not py_drivers
    for fn, fo in enumerate(forces):
        label = f"forces[{fn}]"
        if isinstance(fo, Force):
            b = idx(fo.body, f"{label}.body")
            if b == ground:
                problems.append(f"{label}: a Force on the ground does nothing; give a moving body")
                continue
            s = np.zeros(3) if fo.point is None else _local(Rs[b], rs[b], _vec3(fo.point, f"{label}.point"))
            if callable(fo.force):
                frec.append([b, *s, 0.0, 0.0, 0.0, len(fpy)])
                fpy.append(("force", fo.force))
                conservative = False
            else:
                try:
                    frec.append([b, *s, *_vec3(fo.force, f"{label}.force"), -1])
                except ModelError as e:
                    problems.append(str(e))
        elif isinstance(fo, Torque):
            b = idx(fo.body, f"{label}.body")
            rb = idx(fo.reaction, f"{label}.reaction")
            conservative = False
            if callable(fo.torque):
                trec.append([b, rb, 0.0, 0.0, 0.0, len(fpy)])
                fpy.append(("torque", fo.torque))
            else:
                try:
                    trec.append([b, rb, *_vec3(fo.torque, f"{label}.torque"), -1])
                except ModelError as e:
                    problems.append(str(e))
        elif isinstance(fo, Spring):
            i, j = idx(fo.body_i, f"{label}.body_i"), idx(fo.body_j, f"{label}.body_j")
            try:
                Pi, Pj = _vec3(fo.point_i, f"{label}.point_i"), _vec3(fo.point_j, f"{label}.point_j")
            except ModelError as e:
                problems.append(str(e))
                continue
            L0 = float(np.linalg.norm(Pj - Pi)) if fo.length is None else float(fo.length)
            k, c = float(fo.stiffness), float(fo.damping)
            if not (np.isfinite(k) and np.isfinite(c) and np.isfinite(L0) and k >= 0 and c >= 0 and L0 >= 0):
                problems.append(f"{label}: `stiffness`, `damping` and `length` must be finite and "
                                f">= 0, found {k!r}, {c!r}, {L0!r}")
                continue
            conservative = conservative and c == 0.0
            srec.append([i, j, *_local(Rs[i], rs[i], Pi), *_local(Rs[j], rs[j], Pj), k, L0, c])
        elif isinstance(fo, (RotationalDamper, Armature)):
            # an axis between two bodies and a value >= 0: the damping or the inertia
            what = "damping" if isinstance(fo, RotationalDamper) else "inertia"
            i, j = idx(fo.body_i, f"{label}.body_i"), idx(fo.body_j, f"{label}.body_j")
            c = float(getattr(fo, what))
            try:
                u = _vec3(fo.axis, f"{label}.axis")
            except ModelError as e:
                problems.append(str(e))
                continue
            if not np.isfinite(c) or c < 0 or np.linalg.norm(u) == 0 or i == j:
                problems.append(f"{label}: `{what}` must be finite and >= 0, `axis` nonzero and "
                                f"the two bodies different, found {c!r}, {u.tolist()}")
                continue
            u = u / np.linalg.norm(u)
            if what == "damping":
                conservative = False
                drec.append([i, j, *(Rs[i].T @ u), c])
            else:
                arec.append([i, j, *(Rs[i].T @ u), *(Rs[j].T @ u), c])
        else:
            problems.append(f"{label} must be a Force, Torque, Spring, RotationalDamper or "
                            f"Armature, found {type(fo).__name__}")
    if problems:
        raise ModelError(f"model {name!r} has {len(problems)} problem(s): " + "; ".join(problems) + ".")
    m = row
    python = bool(py_drivers or fpy)
    p = kernel.pack(nb_, m, g, masses, points, dot1, dot2, dists, norms, drivers_rec, frec,
                    trec, srec, drec, arec, python)
    coords = tuple(f"{nm}.{a}" for nm in names for a in _AXES)
    qref = np.concatenate([np.concatenate([b._r, b._p]) for b in bodies])
    return SpatialAssembly(name=name, bodies=bodies, body_names=tuple(names), index=index,
                           n=7 * nb_, m=m, coordinates=coords, gravity=g, joints=joints,
                           labels=labels, joint_labels=joint_labels, joint_rows=joint_rows,
                           joint_ends=joint_ends, drivers=py_drivers, py_forces=fpy, p=p,
                           conservative=conservative, q_reference=qref, nnorm=nb_)
