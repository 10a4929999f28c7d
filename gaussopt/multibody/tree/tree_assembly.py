"""Assembly of a tree model: links, joints and closures -> the kernel's tables.

:func:`assemble_model` checks the elements (collecting every problem into one
:class:`~gaussopt.ModelError`), numbers the links (parents first), the coordinates (link by
link, each link's joints in order: MuJoCo's ``qpos`` order) and the rows (one normalization
per ball or free joint, then the closures in the order given), numbers the lines that
tendons, actuators and equalities act along (the fixed tendons in the order given, then a
line per joint an actuator or a joint equality names), and packs everything into
the kernel's parameter array (:func:`gaussopt.multibody.tree.tree_compiled.pack`). The
:class:`TreeAssembly` is the model's data in one place, with the evaluation of the rows;
:mod:`gaussopt.multibody.common.states` and :mod:`gaussopt.multibody.common.analysis` read it
as they read the other kinds'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.multibody.common.base_assembly import BaseAssembly
import gaussopt.multibody.tree.tree_compiled as kernel
from gaussopt.multibody.tree.tree_elements import (JOINT_KINDS, WORLD, Actuator, Connect,
                                                   FixedTendon, JointEquality, Link, Mocap,
                                                   SpatialTendon, TendonEquality, TendonWrap,
                                                   TreeJoint,
                                                   Weld)

__all__ = ["TreeAssembly", "assemble_model", "quat_matrix"]

_NONE = np.zeros(0)


def quat_matrix(e) -> np.ndarray:
    """Rotation matrix of the quaternion ``e = (w, x, y, z)`` (normalized)."""
    e0, e1, e2, e3 = np.asarray(e, dtype=float) / np.linalg.norm(e)
    return np.array([
        [e0 * e0 + e1 * e1 - e2 * e2 - e3 * e3, 2 * (e1 * e2 - e0 * e3), 2 * (e1 * e3 + e0 * e2)],
        [2 * (e1 * e2 + e0 * e3), e0 * e0 - e1 * e1 + e2 * e2 - e3 * e3, 2 * (e2 * e3 - e0 * e1)],
        [2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1), e0 * e0 - e1 * e1 - e2 * e2 + e3 * e3]])


@dataclass
class TreeAssembly(BaseAssembly):
    """What :func:`assemble_model` builds: the attributes of
    :class:`~gaussopt.multibody.common.base_assembly.BaseAssembly` (``bodies`` the links,
    ``joints`` the tree joints and the closures, ``joint_labels``/``joint_rows`` those of
    the closures, ``joint_ends`` their links) and these.

    Attributes
    ----------
    q_reference : ndarray, shape (n,)
        Every joint at its reference (hinges and slides at ``reference``, balls and free
        joints at the identity rotation, free joints at their link's offset position).
    joint_names : tuple of str
    joint_slices : dict
        Joint name -> slice of ``q``.
    parents : tuple of int
        Each link's parent (-1: the world).
    actuator_names, tendon_names : tuple of str
        (``tendon_names``: the fixed tendons)
    ctrl_slots : ndarray of int
        Index in ``p`` of every actuator's control.
    mocap_names : tuple of str
        The :class:`Mocap` bodies (a closure's side ``-2 - k`` is ``mocap_names[k]``).
    mocap_slots : ndarray of int
        Index in ``p`` of every mocap body's record (:data:`~gaussopt.multibody.tree.
        tree_compiled.W_MC` values: its state at rest, as packed).
    """

    kernel = kernel
    axes = ()

    q_reference: np.ndarray
    joint_names: tuple
    joint_slices: dict
    parents: tuple
    actuator_names: tuple = ()
    tendon_names: tuple = ()
    ctrl_slots: np.ndarray = None
    mocap_names: tuple = ()
    mocap_slots: np.ndarray = None
    #: the spatial tendons' lines in ``p`` by name
    spatial_lines: dict = None
    #: the spatial tendons that wrap a geom (no couplings, limits or armature), by name
    wrapped_tendons: frozenset = frozenset()
    #: the coordinate of each actuator with activation dynamics (its velocity is the
    #: activation), by the actuator's name
    activations: dict = None

    def index_of(self, coordinate: str) -> int:
        try:
            return self.coordinates.index(coordinate)
        except ValueError:
            raise ModelError(f"unknown coordinate {coordinate!r}; the coordinates are "
                             f"{list(self.coordinates)}.") from None

    def velocity_rows(self, q: np.ndarray, names) -> np.ndarray:
        """Rows ``S`` with ``S v`` the named coordinates' rates."""
        S = np.zeros((len(names), self.n))
        for k, nm in enumerate(names):
            S[k, self.index_of(nm)] = 1.0
        return S

    def driver_values(self, t, order: int) -> np.ndarray:
        return _NONE

    def phi(self, t: float, q: np.ndarray) -> np.ndarray:
        out = np.empty(self.m)
        kernel.phi(self.p, np.ascontiguousarray(q, dtype=float), _NONE, out)
        return out

    def jacobian(self, t: float, q: np.ndarray) -> np.ndarray:
        q = np.ascontiguousarray(q, dtype=float)
        A = np.empty((self.m, self.n))
        kernel.rows(self.p, q, q, _NONE, A, _NONE, False)
        return A


def _vec(x, k: int, label: str, problems: list) -> np.ndarray:
    a = np.asarray(x, dtype=float).reshape(-1) if np.size(x) else np.zeros(0)
    if a.shape != (k,) or not np.all(np.isfinite(a)):
        problems.append(f"{label} must be {k} finite numbers, found {x!r}")
        return np.zeros(k)
    return a


def _per_dof(x, k: int, label: str, problems: list) -> np.ndarray:
    """A value per degree of freedom: a scalar (the same for all) or ``k`` values, >= 0."""
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.size == 1:
        a = np.full(k, float(a[0]))
    if a.shape != (k,) or not np.all(np.isfinite(a)) or np.any(a < 0):
        problems.append(f"{label} must be a number or {k} numbers, finite and >= 0, found {x!r}")
        return np.zeros(k)
    return a


def _link_name(ref):
    if ref is None or ref == WORLD:
        return None
    if isinstance(ref, (Link, Mocap)):
        return ref.name
    if isinstance(ref, str):
        return ref
    raise ModelError(f"a link must be given by its name, a Link, or None / {WORLD!r} for the "
                     f"world, found {type(ref).__name__}")


def assemble_model(links: Sequence[Link], joints: Sequence = (), forces: Sequence = (),
                   gravity=(0.0, 0.0, 0.0), name: str = "tree") -> TreeAssembly:
    """Check the elements and build the :class:`TreeAssembly` (see the module docstring)."""
    links, joints, forces = tuple(links), tuple(joints), tuple(forces)
    problems: list[str] = []
    for k, fo in enumerate(forces):
        if not isinstance(fo, (FixedTendon, SpatialTendon, Actuator)):
            problems.append(f"forces[{k}] must be a FixedTendon, a SpatialTendon or an "
                            f"Actuator (a tree model's other passive forces are the joints' "
                            f"damping and stiffness), found {type(fo).__name__}")
    for k, ln in enumerate(links):
        if not isinstance(ln, (Link, Mocap)):
            problems.append(f"links[{k}] must be a tree Link or a Mocap, found "
                            f"{type(ln).__name__}")
    if problems:
        raise ModelError(f"model {name!r}: " + "; ".join(problems) + ".")
    mocaps = [ln for ln in links if isinstance(ln, Mocap)]
    links = tuple(ln for ln in links if isinstance(ln, Link))
    if not links:
        raise ModelError(f"model {name!r}: `links` holds no Link.")
    mocap_index = {mc.name: k for k, mc in enumerate(mocaps)}
    names = [ln.name for ln in links]
    every = names + list(mocap_index)
    dup = sorted({x for x in every if every.count(x) > 1})
    if dup:
        raise ModelError(f"model {name!r}: link names must be unique, found {dup} more than once.")
    if WORLD in names:
        raise ModelError(f"model {name!r}: {WORLD!r} is the name of the world; rename that link.")
    index = {nm: k for k, nm in enumerate(names)}
    g = _vec(gravity, 3, "`gravity`", problems)

    # ---- links
    parents = []
    brec = np.zeros((len(links), kernel.W_B))
    for k, ln in enumerate(links):
        label = f"links[{k}] ({ln.name!r})"
        try:
            par = _link_name(ln.parent)
        except ModelError as e:
            problems.append(f"{label}.parent: {e}")
            par = None
        if par is not None and par in mocap_index:
            problems.append(f"{label}.parent is the mocap body {par!r}: a mocap body carries "
                            f"no links here (attach them to the world, or join them to it by "
                            f"a Weld)")
            par = None
        elif par is not None and (par not in index or index[par] >= k):
            problems.append(f"{label}.parent must be the world or a link listed before it, "
                            f"found {par!r}")
            par = None
        parents.append(-1 if par is None else index[par])
        quat = _vec(ln.orientation, 4, f"{label}.orientation", problems)
        if np.linalg.norm(quat) == 0:
            problems.append(f"{label}.orientation must be a nonzero quaternion")
            quat = np.array([1.0, 0.0, 0.0, 0.0])
        J = np.asarray(ln.inertia, dtype=float)
        if J.shape == (3,):
            J = np.diag(J)
        mass = float(ln.mass)
        if J.shape != (3, 3) or not np.all(np.isfinite(J)) or not np.isfinite(mass) or mass < 0:
            problems.append(f"{label}: `mass` must be finite and >= 0 and `inertia` a finite "
                            f"3 x 3 tensor (or its 3 principal moments), found {ln.mass!r}, "
                            f"{ln.inertia!r}")
            J = np.zeros((3, 3))
        elif np.linalg.eigvalsh(0.5 * (J + J.T)).min() < -1e-12 * max(1.0, np.abs(J).max()):
            problems.append(f"{label}.inertia must be positive semidefinite, found eigenvalues "
                            f"{np.linalg.eigvalsh(0.5 * (J + J.T)).round(12).tolist()}")
        brec[k, kernel.B_PAR] = parents[-1]
        brec[k, kernel.B_POS:kernel.B_POS + 3] = _vec(ln.position, 3, f"{label}.position",
                                                      problems)
        brec[k, kernel.B_ROT:kernel.B_ROT + 9] = quat_matrix(quat).reshape(-1)
        brec[k, kernel.B_MASS] = mass
        brec[k, kernel.B_MG] = mass * float(ln.gravity_scale)
        brec[k, kernel.B_COM:kernel.B_COM + 3] = _vec(ln.com, 3, f"{label}.com", problems)
        brec[k, kernel.B_INER:kernel.B_INER + 9] = (0.5 * (J + J.T)).reshape(-1)

    # ---- joints (tree joints grouped by link, in link order), closures
    tree_joints = [j for j in joints if isinstance(j, TreeJoint)]
    closures = [j for j in joints if isinstance(j, (Connect, Weld, JointEquality,
                                                    TendonEquality))]
    for k, j in enumerate(joints):
        if not isinstance(j, (TreeJoint, Connect, Weld, JointEquality, TendonEquality)):
            problems.append(f"joints[{k}] must be a TreeJoint, Connect, Weld, JointEquality "
                            f"or TendonEquality, found {type(j).__name__}")
    jnames = [j.name for j in tree_joints]
    dupj = sorted({x for x in jnames if jnames.count(x) > 1})
    if dupj:
        problems.append(f"joint names must be unique, found {dupj} more than once")
    by_link: dict = {}
    for k, j in enumerate(tree_joints):
        if j.link not in index:
            problems.append(f"joint {j.name!r}: unknown link {j.link!r} (links: {names})")
            continue
        if j.kind not in JOINT_KINDS:
            problems.append(f"joint {j.name!r}: `kind` must be one of {list(JOINT_KINDS)}, "
                            f"found {j.kind!r}")
            continue
        by_link.setdefault(index[j.link], []).append(j)
    order = [j for b in range(len(links)) for j in by_link.get(b, [])]
    jrec = []
    coords: list[str] = []
    qref: list[float] = []
    slices: dict = {}
    labels: list[str] = []
    nball = 0
    conservative = True
    for b in range(len(links)):
        js = by_link.get(b, [])
        brec[b, kernel.B_J0] = len(jrec)
        brec[b, kernel.B_Q0] = len(coords)
        for t, j in enumerate(js):
            label = f"joint {j.name!r}"
            pos = _vec(j.position, 3, f"{label}.position", problems)
            axis = _vec(j.axis, 3, f"{label}.axis", problems)
            start = len(coords)
            if j.kind == "free":
                if len(js) != 1 or parents[b] != -1:
                    problems.append(f"{label}: a free joint must be the only joint of a link "
                                    f"whose parent is the world")
                    continue
                damp = _per_dof(j.damping, 6, f"{label}.damping", problems)
                arm = _per_dof(j.armature, 6, f"{label}.armature", problems)
                # the world position of the link's origin: its offset is the reference pose
                x0 = brec[b, kernel.B_POS:kernel.B_POS + 3].copy()
                q0 = quat_matrix_to_quat(brec[b, kernel.B_ROT:kernel.B_ROT + 9].reshape(3, 3))
                brec[b, kernel.B_POS:kernel.B_POS + 3] = 0.0
                brec[b, kernel.B_ROT:kernel.B_ROT + 9] = np.eye(3).reshape(-1)
                k_ = _stiffness(j, label, problems)
                sref = _spring_ref(j, 7, np.concatenate([x0, q0]), label, problems)
                for k in range(3):
                    e = np.zeros(3)
                    e[k] = 1.0
                    jrec.append(_jrec(kernel.SLIDE, len(coords), np.zeros(3), e, 0.0,
                                      [damp[k]], [arm[k]], k_, sref[k]))
                    coords.append(f"{j.name}.{'xyz'[k]}")
                    qref.append(x0[k])
                jrec.append(_jrec(kernel.BALL, len(coords), np.zeros(3), np.zeros(3), 0.0,
                                  damp[3:], arm[3:], k_, 0.0, sq=sref[3:]))
                coords += [f"{j.name}.e{k}" for k in range(4)]
                qref += list(q0)
                labels.append(f"{j.name}.norm")
                nball += 1
                conservative = conservative and not np.any(damp)
            elif j.kind == "ball":
                damp = _per_dof(j.damping, 3, f"{label}.damping", problems)
                arm = _per_dof(j.armature, 3, f"{label}.armature", problems)
                k_ = _stiffness(j, label, problems)
                sq = _spring_ref(j, 4, np.array([1.0, 0.0, 0.0, 0.0]), label, problems)
                jrec.append(_jrec(kernel.BALL, len(coords), pos, np.zeros(3), 0.0, damp, arm,
                                  k_, 0.0, sq=sq))
                coords += [f"{j.name}.e{k}" for k in range(4)]
                qref += [1.0, 0.0, 0.0, 0.0]
                labels.append(f"{j.name}.norm")
                nball += 1
                conservative = conservative and not np.any(damp)
            else:
                nrm = np.linalg.norm(axis)
                if nrm == 0:
                    problems.append(f"{label}.axis must be nonzero")
                    nrm = 1.0
                damp = _per_dof(j.damping, 1, f"{label}.damping", problems)
                arm = _per_dof(j.armature, 1, f"{label}.armature", problems)
                k_ = _stiffness(j, label, problems)
                sref = float(_spring_ref(j, 1, np.zeros(1), label, problems)[0])
                ref = float(j.reference)
                if not np.isfinite(ref):
                    problems.append(f"{label}.reference must be finite, found {ref!r}")
                afr = _range(j.actuator_force_range, f"{label}.actuator_force_range", problems)
                typ = kernel.HINGE if j.kind == "hinge" else kernel.SLIDE
                jrec.append(_jrec(typ, len(coords), pos, axis / nrm, ref, damp, arm, k_, sref,
                                  afr=afr))
                coords.append(j.name)
                qref.append(ref)
                conservative = conservative and not np.any(damp)
            slices[j.name] = slice(start, len(coords))
            if j.kind in ("ball", "free") and j.actuator_force_range is not None:
                problems.append(f"{label}.actuator_force_range applies to hinges and slides")
        brec[b, kernel.B_NJ] = len(jrec) - brec[b, kernel.B_J0]
        brec[b, kernel.B_NQ] = len(coords) - brec[b, kernel.B_Q0]

    # ---- closures
    erec = []
    row = nball
    joint_labels, joint_rows, joint_ends = [], [], []
    seen: dict = {}
    lines = _Lines(tree_joints, slices, [c for c in forces if isinstance(c, FixedTendon)],
                   problems)
    spatial = [c for c in forces if isinstance(c, SpatialTendon)]
    srec = _spatial_tendons(spatial, lines, index, problems)
    qref_arr = np.array(qref, dtype=float)
    for k, c in enumerate(closures):
        label = f"closure {c.name or k!r}"
        if isinstance(c, (JointEquality, TendonEquality)):
            joint = isinstance(c, JointEquality)
            kind = "JointEquality" if joint else "TendonEquality"
            refs = (c.joint_1, c.joint_2) if joint else (c.tendon_1, c.tendon_2)
            if not joint and any(r in lines.wrapped for r in refs if r is not None):
                problems.append(f"{label}: a TendonEquality of a tendon that wraps a geom is "
                                "not modelled (its row's velocity terms need the string's "
                                f"curvature on the geom), found {refs!r}")
                continue
            ls = [lines.joint(r, f"{label}", problems) if joint else
                  lines.tendon(r, f"{label}", problems)
                  for r in refs if r is not None]
            poly = _vec(c.polycoef, 5, f"{label}.polycoef", problems)
            if refs[0] is None:
                problems.append(f"{label}: the first {'joint' if joint else 'tendon'} is "
                                f"missing")
                continue
            rec = np.zeros(kernel.W_E)
            rec[kernel.E_TYPE], rec[kernel.E_ROW] = kernel.COUPLE, row
            rec[kernel.E_B1] = ls[0]
            rec[kernel.E_B2] = ls[1] if len(ls) > 1 else -1
            rec[kernel.E_POLY:kernel.E_POLY + 5] = poly
            rec[kernel.E_REF1] = lines.length(ls[0], qref_arr)
            rec[kernel.E_REF2] = lines.length(ls[1], qref_arr) if len(ls) > 1 else 0.0
            base = c.name or f"{kind}({','.join(r for r in refs if r is not None)})"
            seen[base] = seen.get(base, 0) + 1
            jlabel = base if seen[base] == 1 else f"{base}#{seen[base]}"
            labels.append(jlabel)
            joint_labels.append(jlabel)
            joint_rows.append(np.arange(row, row + 1))
            joint_ends.append((-1, -1))
            erec.append(rec)
            row += 1
            continue
        ends = []
        for ref in (c.link_1, c.link_2):
            try:
                nm = _link_name(ref)
            except ModelError as e:
                problems.append(f"{label}: {e}")
                nm = None
            if nm is not None and nm in mocap_index:
                ends.append(-2 - mocap_index[nm])
                continue
            if nm is not None and nm not in index:
                problems.append(f"{label}: unknown link {nm!r} (links: {names}"
                                + (f"; mocap bodies: {list(mocap_index)}" if mocaps else "")
                                + ")")
                nm = None
            ends.append(-1 if nm is None else index[nm])
        if ends[0] == ends[1]:
            problems.append(f"{label} joins {_end_name(ends[0], names, mocaps)!r} to itself")
            continue
        if ends[0] < 0 and ends[1] < 0:
            problems.append(f"{label} joins {_end_name(ends[0], names, mocaps)!r} to "
                            f"{_end_name(ends[1], names, mocaps)!r}: neither moves with the "
                            f"tree")
            continue
        rec = np.zeros(kernel.W_E)
        rec[kernel.E_B1], rec[kernel.E_B2], rec[kernel.E_ROW] = ends[0], ends[1], row
        rec[kernel.E_S1:kernel.E_S1 + 3] = _vec(c.point_1, 3, f"{label}.point_1", problems)
        rec[kernel.E_S2:kernel.E_S2 + 3] = _vec(c.point_2, 3, f"{label}.point_2", problems)
        kind = type(c).__name__
        suff = ["x", "y", "z"]
        if isinstance(c, Weld):
            Rr = _rotation_matrix(c.rotation, f"{label}.rotation", problems)
            if Rr is None:
                Rr = np.eye(3)
            rec[kernel.E_TYPE] = kernel.WELD
            I3 = np.eye(3)
            for q_ in range(3):
                rec[kernel.E_A + 3 * q_:kernel.E_A + 3 * q_ + 3] = Rr @ I3[q_]
                rec[kernel.E_B + 3 * q_:kernel.E_B + 3 * q_ + 3] = I3[(q_ + 1) % 3]
            suff += ["xy", "yz", "zx"]
        else:
            rec[kernel.E_TYPE] = kernel.CONNECT
        n1 = _end_name(ends[0], names, mocaps)
        n2 = _end_name(ends[1], names, mocaps)
        base = c.name or f"{kind}({n1},{n2})"
        seen[base] = seen.get(base, 0) + 1
        jlabel = base if seen[base] == 1 else f"{base}#{seen[base]}"
        labels += [f"{jlabel}[{s}]" for s in suff]
        joint_labels.append(jlabel)
        joint_rows.append(np.arange(row, row + len(suff)))
        joint_ends.append((ends[0], ends[1]))
        erec.append(rec)
        row += len(suff)
    # ---- actuators (their lines after the tendons' and the equalities')
    arec = []
    anames = []
    activated: list = []
    kinds = {j.name: j.kind for j in tree_joints}
    xsites: list = []              # (the two-site transmissions' sites, after the tendons')
    for k, a in enumerate(c for c in forces if isinstance(c, Actuator)):
        label = f"actuator {a.name!r}"
        anames.append(a.name)
        if (a.joint is not None) + (a.tendon is not None) + (a.site is not None) + (
                a.crank is not None) != 1:
            problems.append(f"{label}: give exactly one of `joint`, `tendon`, `site` and "
                            f"`crank`, found joint={a.joint!r}, tendon={a.tendon!r}, "
                            f"site={a.site!r}, crank={a.crank!r}")
            continue
        if (a.crank is None) != (a.slider is None) or (a.crank is None) != (a.rod is None):
            problems.append(f"{label}: a slider-crank needs `crank`, `slider` and `rod` "
                            f"together, found crank={a.crank!r}, slider={a.slider!r}, "
                            f"rod={a.rod!r}")
            continue
        if a.reference is not None and a.site is None:
            problems.append(f"{label}: `reference` is the reference site of a `site` "
                            f"actuator, found site=None")
            continue
        rec = np.zeros(kernel.W_A)
        rec[kernel.A_SITE] = rec[kernel.A_JA] = -1
        rec[kernel.A_CTRL] = _vec([a.ctrl], 1, f"{label}.ctrl", problems)[0]
        if a.crank is not None or a.reference is not None:
            # a line of two sites: its length is the transmission's (tree_compiled)
            first = len(srec) + len(xsites)
            if a.crank is not None:
                rec[kernel.A_GEAR] = _vec([a.gear], 1, f"{label}.gear", problems)[0]
                xsites += _crank_sites(a, label, index, problems)
            else:
                rec[kernel.A_GEAR] = 1.0
                xsites += _refsite_sites(a, label, index, parents, problems)
                gear = np.ravel(np.asarray(a.gear, dtype=float))
                if gear.size == 6 and not np.any(gear[:3]) and _servo(a):
                    # (a purely rotational gear: the setpoint wraps as a ball servo's)
                    rec[kernel.A_WRAP] = 2.0 * np.pi * float(np.linalg.norm(gear[3:]))
            rec[kernel.A_LINE] = lines.two_sites(a, first, label, problems)
            if a.muscle is not None and a.reference is not None:
                problems.append(f"{label}: a muscle on a site is not modelled (a site "
                                "transmission has no length range of its own here)")
        elif a.site is not None or kinds.get(a.joint) in ("ball", "free"):
            # (no line: a site's or a rotational joint's gear is read by the kernel itself)
            rec[kernel.A_LINE], rec[kernel.A_GEAR] = -1, 1.0
            if a.site is not None:
                _site_actuator(rec, a, label, index, problems)
            else:
                _rotational_actuator(rec, a, kinds[a.joint], slices[a.joint].start, label,
                                     problems)
        else:
            rec[kernel.A_LINE] = (lines.joint(a.joint, label, problems) if a.joint is not None
                                  else lines.tendon(a.tendon, label, problems))
            rec[kernel.A_GEAR] = _vec([a.gear], 1, f"{label}.gear", problems)[0]
        # a gain, or (constant, length, velocity) coefficients: MuJoCo's affine gain
        gain = (a.gain, 0.0, 0.0) if np.ndim(a.gain) == 0 else a.gain
        rec[kernel.A_GAIN], rec[kernel.A_G1], rec[kernel.A_G2] = _vec(
            gain, 3, f"{label}.gain (a number, or 3: constant, length, velocity)", problems)
        rec[kernel.A_B0:kernel.A_B0 + 3] = _vec(a.bias, 3, f"{label}.bias", problems)
        rec[kernel.A_CL:kernel.A_CL + 3] = _range(a.ctrl_range, f"{label}.ctrl_range",
                                                  problems)
        rec[kernel.A_FL:kernel.A_FL + 3] = _range(a.force_range, f"{label}.force_range",
                                                  problems)
        rec[kernel.A_ACT] = -1
        if a.muscle is not None:
            if a.dynamics is not None or not np.array_equal(np.ravel(a.gain), [1.0]) or any(
                    a.bias):
                problems.append(f"{label}: a muscle has its own gain, bias and dynamics, found "
                                f"gain={a.gain!r}, bias={a.bias!r}, dynamics={a.dynamics!r}")
            activated.append((rec, a, (kernel.ACT_MUSCLE, 1.0)))
            _muscle(rec, a.muscle, label, problems)
        elif a.dynamics is not None:
            activated.append((rec, a, _activation(a, label, problems)))
        elif a.time_constant is not None:
            problems.append(f"{label}: a time_constant needs dynamics='filter', found "
                            f"dynamics=None")
        arec.append(rec)
    if xsites:
        srec = np.concatenate([srec, np.array(xsites, dtype=float).reshape(-1, kernel.W_S)])
    dupa = sorted({x for x in anames if anames.count(x) > 1})
    if dupa:
        problems.append(f"actuator names must be unique, found {dupa} more than once")
    if not problems and any(r[kernel.A_SITE] >= 0 for r in arec) and any(
            r[kernel.J_AFL] for r in jrec):
        problems.append("a joint's actuator_force_range beside actuators on sites is not "
                        "modelled (the range clamps the joint's total actuator force, to "
                        "which a site's actuators contribute through the tree)")
    if not problems and any(r[kernel.A_LINE] >= 0 and lines.records[int(r[kernel.A_LINE])][
            kernel.L_SP] for r in arec) and any(r[kernel.J_AFL] for r in jrec):
        problems.append("a joint's actuator_force_range beside actuators on a SpatialTendon, "
                        "a slider-crank or a site with a reference site is not modelled (the "
                        "range clamps the joint's total actuator force, to which they "
                        "contribute through the tree)")
    if arec or lines.damped:
        conservative = False
    # ---- activations: each a coordinate after the joints', whose velocity is the
    # activation: a slide without axis (it moves nothing) on the last link, its armature
    # the activation's "mass" (tau, or 1), its force the actuator's (tree_compiled)
    activation_index = {}
    if activated and links:
        last = len(links) - 1
        for rec, a, (dyn, mass) in activated:
            c = len(coords)
            rec[kernel.A_ACT], rec[kernel.A_DYN] = c, dyn
            jrec.append(_jrec(kernel.SLIDE, c, np.zeros(3), np.zeros(3), 0.0, [0.0], [mass],
                              0.0, 0.0))
            coords.append(f"{a.name}.act")
            qref.append(0.0)
            activation_index[a.name] = c
        brec[last, kernel.B_NJ] += len(activated)
        brec[last, kernel.B_NQ] += len(activated)
    if problems:
        raise ModelError(f"model {name!r} has {len(problems)} problem(s): " + "; ".join(problems)
                         + ".")
    mrec = np.zeros((len(mocaps), kernel.W_MC))
    for k, mc in enumerate(mocaps):
        label = f"mocap body {mc.name!r}"
        mrec[k, kernel.MC_X:kernel.MC_X + 3] = _vec(mc.position, 3, f"{label}.position",
                                                    problems)
        quat = _vec(mc.orientation, 4, f"{label}.orientation", problems)
        if np.linalg.norm(quat) == 0:
            problems.append(f"{label}.orientation must be a nonzero quaternion")
            quat = np.array([1.0, 0.0, 0.0, 0.0])
        mrec[k, kernel.MC_R:kernel.MC_R + 9] = quat_matrix(quat).reshape(-1)
    if problems:
        raise ModelError(f"model {name!r} has {len(problems)} problem(s): " + "; ".join(problems)
                         + ".")
    n, m = len(coords), row
    p = kernel.pack(n, m, g, brec, np.array(jrec), np.array(erec), np.array(lines.records),
                    np.array(lines.terms), np.array(arec), mrec, srec)
    # the couplings' reference lengths of spatial tendons, at q_reference (MuJoCo's
    # tendon_length0), from the packed model's kinematics
    for k, rec in enumerate(erec):
        if rec[kernel.E_TYPE] != kernel.COUPLE:
            continue
        at = int(p[kernel.H_OE]) + kernel.W_E * k
        for side, ref in ((kernel.E_B1, kernel.E_REF1), (kernel.E_B2, kernel.E_REF2)):
            ln = int(rec[side])
            if ln >= 0 and lines.records[ln][kernel.L_SP]:
                p[at + ref] = kernel.line_length(p, qref_arr, ln)
    ctrl_slots = (int(p[kernel.H_OA]) + kernel.W_A * np.arange(len(arec), dtype=np.int64)
                  + kernel.A_CTRL)
    return TreeAssembly(name=name, bodies=links, body_names=tuple(names), index=index, n=n, m=m,
                        coordinates=tuple(coords), gravity=g, joints=tuple(order) + tuple(closures),
                        labels=labels, joint_labels=joint_labels, joint_rows=joint_rows,
                        joint_ends=joint_ends, drivers=[], p=p, conservative=conservative,
                        q_reference=np.array(qref, dtype=float), joint_names=tuple(jnames),
                        joint_slices=slices, parents=tuple(parents),
                        actuator_names=tuple(anames), tendon_names=tuple(lines.tendon_names),
                        ctrl_slots=ctrl_slots, mocap_names=tuple(mocap_index),
                        spatial_lines=dict(lines.spatial_index),
                        wrapped_tendons=frozenset(lines.wrapped),
                        activations=activation_index,
                        mocap_slots=(int(p[kernel.H_OMC])
                                     + kernel.W_MC * np.arange(len(mocaps), dtype=np.int64)))


def _end_name(end: int, names: list, mocaps: list) -> str:
    """A closure side's name: a link, the world (-1) or a mocap body (-2 - k)."""
    return names[end] if end >= 0 else WORLD if end == -1 else mocaps[-2 - end].name


def _stiffness(j, label: str, problems: list) -> float:
    k = float(j.stiffness)
    if not (np.isfinite(k) and k >= 0):
        problems.append(f"{label}.stiffness must be finite and >= 0, found {j.stiffness!r}")
        return 0.0
    return k


def _spring_ref(j, k: int, default: np.ndarray, label: str, problems: list) -> np.ndarray:
    """The spring's reference of a joint: ``k`` numbers (the Euler parameters among them
    normalized), ``default`` when None."""
    if j.spring_reference is None:
        return np.array(default, dtype=float)
    a = _vec(j.spring_reference, k, f"{label}.spring_reference", problems)
    if k >= 4:
        e = a[k - 4:]
        nrm = np.linalg.norm(e)
        if nrm == 0:
            problems.append(f"{label}.spring_reference: its Euler parameters must be nonzero")
            return np.array(default, dtype=float)
        a[k - 4:] = e / nrm
    return a


def _range(x, label: str, problems: list) -> np.ndarray:
    """``(limited, lower, upper)`` of an optional range ``(lower, upper)``."""
    if x is None:
        return np.zeros(3)
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.shape != (2,) or not np.all(np.isfinite(a)) or a[0] > a[1]:
        problems.append(f"{label} must be None or (lower, upper) with lower <= upper, found "
                        f"{x!r}")
        return np.zeros(3)
    return np.array([1.0, a[0], a[1]])


class _Lines:
    """The lines of a model: its fixed tendons, in the order given, then a line per joint
    that an actuator or a joint equality names (its coordinate), each once; their records
    and terms for :func:`~gaussopt.multibody.tree.tree_compiled.pack`."""

    def __init__(self, tree_joints, slices: dict, tendons, problems: list) -> None:
        self.kinds = {j.name: j.kind for j in tree_joints}
        self.slices = slices
        self.records: list = []
        self.terms: list = []
        self.index: dict = {}
        self.tendon_names: list = []
        self.damped = False
        #: the spatial tendons that wrap a geom, by name
        self.wrapped: set = set()
        for t in tendons:
            label = f"tendon {t.name!r}"
            if t.name in self.index:
                problems.append(f"tendon names must be unique, found {t.name!r} more than once")
                continue
            pairs = []
            try:
                items = list(t.terms)
            except TypeError:
                items = None
            if not items:
                problems.append(f"{label}.terms must be a nonempty sequence of (joint, coef), "
                                f"found {t.terms!r}")
                items = []
            for it in items:
                try:
                    jn, coef = it
                    coef = float(coef)
                except (TypeError, ValueError):
                    problems.append(f"{label}.terms: each term must be (joint name, coef), "
                                    f"found {it!r}")
                    continue
                c = self._coordinate(jn, label, problems)
                if c is not None and np.isfinite(coef):
                    pairs.append((c, coef))
            rec = self._add(pairs)
            _tendon_params(t, label, problems, rec)
            self.damped = self.damped or bool(rec[kernel.L_DAMP])
            self.index[t.name] = len(self.records) - 1
            self.tendon_names.append(t.name)
        self.joints: dict = {}

    def _coordinate(self, joint, label: str, problems: list):
        if joint not in self.kinds:
            problems.append(f"{label}: unknown joint {joint!r} (joints: {list(self.kinds)})")
            return None
        if self.kinds[joint] not in ("hinge", "slide"):
            problems.append(f"{label}: joint {joint!r} is a {self.kinds[joint]}; only hinges "
                            f"and slides have a scalar coordinate")
            return None
        return self.slices[joint].start if joint in self.slices else None

    def _add(self, pairs) -> np.ndarray:
        rec = np.zeros(kernel.W_L)
        rec[kernel.L_NT], rec[kernel.L_T0] = len(pairs), len(self.terms)
        self.terms += [[c, coef] for c, coef in pairs]
        self.records.append(rec)
        return rec

    def joint(self, joint, label: str, problems: list) -> int:
        """The line of a joint's coordinate (made at the first call)."""
        if joint in self.joints:
            return self.joints[joint]
        c = self._coordinate(joint, label, problems)
        if c is None:
            return 0
        self._add([(c, 1.0)])
        self.joints[joint] = len(self.records) - 1
        return self.joints[joint]

    #: the lines of the spatial tendons by name (:class:`SpatialTendon`)
    spatial_index: dict = {}

    def tendon(self, tendon, label: str, problems: list) -> int:
        """The line of a fixed or spatial tendon by name."""
        if tendon in self.spatial_index:
            return self.spatial_index[tendon]
        if tendon not in self.index:
            problems.append(f"{label}: unknown tendon {tendon!r} (tendons: "
                            f"{list(self.tendon_names) + list(self.spatial_index)})")
            return 0
        return self.index[tendon]

    def two_sites(self, a, first: int, label: str, problems: list) -> int:
        """A line of two sites for actuator ``a`` (its sites from ``first``): a slider-crank
        (the rod's length) or a site with a reference site (the 6-D gear); its number."""
        rec = np.zeros(kernel.W_L)
        if a.crank is not None:
            rec[kernel.L_SP], rec[kernel.L_NT] = kernel.SP_CRANK, 2
            rod = _vec([a.rod], 1, f"{label}.rod", problems)[0]
            if not rod > 0:
                problems.append(f"{label}.rod must be positive, found {a.rod!r}")
            rec[kernel.L_ROD] = rod
        else:
            rec[kernel.L_SP], rec[kernel.L_NT] = kernel.SP_REF, 3
            rec[kernel.L_G:kernel.L_G + 6] = _vec(
                a.gear, 6, f"{label}.gear (6 numbers on a site: force and torque along the "
                           "reference site's axes)", problems)
        rec[kernel.L_T0] = first
        self.records.append(rec)
        return len(self.records) - 1

    def length(self, line: int, q: np.ndarray) -> float:
        """The line's length at ``q`` (NaN for a spatial tendon: the kernel's, once packed,
        :func:`~gaussopt.multibody.tree.tree_compiled.line_length`)."""
        rec = self.records[line]
        if rec[kernel.L_SP]:
            return float("nan")
        t0, nt = int(rec[kernel.L_T0]), int(rec[kernel.L_NT])
        return float(sum(coef * q[int(c)] for c, coef in self.terms[t0:t0 + nt]))


def _tendon_params(t, label: str, problems: list, rec: np.ndarray) -> None:
    """A tendon's (fixed or spatial) stiffness, damping, armature, spring length (one, or the
    dead band ``(lower, upper)``) and actuator force range, checked, into its line record."""
    vals = _vec([t.stiffness, t.damping, t.armature], 3,
                f"{label}: stiffness, damping and armature", problems)
    if np.any(vals < 0):
        problems.append(f"{label}: stiffness, damping and armature must be >= 0, found "
                        f"{vals.tolist()}")
    sl = np.asarray(t.spring_length, dtype=float).reshape(-1)
    if sl.size == 1:
        sl = np.array([sl[0], sl[0]])
    if sl.shape != (2,) or not np.all(np.isfinite(sl)) or sl[0] > sl[1]:
        problems.append(f"{label}.spring_length must be a length or (lower, upper) with lower "
                        f"<= upper, found {t.spring_length!r}")
        sl = np.zeros(2)
    rec[kernel.L_K], rec[kernel.L_DAMP], rec[kernel.L_ARM] = vals
    rec[kernel.L_LO], rec[kernel.L_HI] = sl
    rec[kernel.L_AFL:kernel.L_AFL + 3] = _range(t.actuator_force_range,
                                                f"{label}.actuator_force_range", problems)


def _spatial_tendons(spatial: list, lines: "_Lines", index: dict, problems: list) -> np.ndarray:
    """The lines of the :class:`SpatialTendon` s (appended to ``lines.records``) and their
    sites' records (returned: (k, ``W_S``))."""
    sites = []
    lines.spatial_index = {}
    for t in spatial:
        label = f"spatial tendon {t.name!r}"
        if t.name in lines.index or t.name in lines.spatial_index:
            problems.append(f"tendon names must be unique, found {t.name!r} more than once")
            continue
        try:
            path = list(t.path)
        except TypeError:
            path = []
        if len(path) < 2:
            problems.append(f"{label}.path must hold at least two (link, point) pairs, found "
                            f"{t.path!r}")
            continue
        first = len(sites)
        wraps = [k for k, it in enumerate(path) if isinstance(it, TendonWrap)]
        for k in wraps:
            if k == 0 or k == len(path) - 1 or k + 1 in wraps:
                problems.append(f"{label}.path[{k}]: a TendonWrap must stand between two "
                                "points (not first, last or next to another wrap)")
        if wraps and t.armature:
            problems.append(f"{label}: a wrapping tendon has no armature (its velocity terms "
                            f"need the string's curvature on the geom), found {t.armature}")
        if wraps:
            lines.wrapped.add(t.name)
        for k, it in enumerate(path):
            if isinstance(it, TendonWrap):
                sites.extend(_wrap_records(it, f"{label}.path[{k}]", index, problems))
                continue
            try:
                ref, point = it
                nm = _link_name(ref)
            except (TypeError, ValueError, ModelError) as e:
                problems.append(f"{label}.path[{k}] must be (link, point (3,)) or a "
                                f"TendonWrap, found {it!r}"
                                + (f" ({e})" if isinstance(e, ModelError) else ""))
                continue
            body = _path_body(nm, f"{label}.path[{k}]", index, problems)
            if body is None:
                continue
            rec = np.zeros(kernel.W_S)
            rec[kernel.S_BODY] = body
            rec[kernel.S_POS:kernel.S_POS + 3] = _vec(point, 3, f"{label}.path[{k}] point",
                                                      problems)
            sites.append(rec)
        rec = np.zeros(kernel.W_L)
        rec[kernel.L_SP], rec[kernel.L_NT], rec[kernel.L_T0] = 1.0, len(sites) - first, first
        _tendon_params(t, label, problems, rec)
        lines.spatial_index[t.name] = len(lines.records)
        lines.records.append(rec)
        lines.damped = lines.damped or bool(rec[kernel.L_DAMP])
    return np.array(sites, dtype=float).reshape(-1, kernel.W_S)


def _path_body(nm, label: str, index: dict, problems: list):
    """The body number of a link named in a tendon's path (-1: the world), or None (the
    problem noted) for an unknown one."""
    if nm is None:
        return -1
    if nm not in index:
        problems.append(f"{label}: unknown link {nm!r} (links: {list(index)})")
        return None
    return index[nm]


def _rotation_matrix(x, label: str, problems: list):
    """``x`` as a rotation matrix (3, 3): orthonormal to 1e-9 with determinant +1; None
    (the problem noted) otherwise."""
    try:
        R = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        R = np.zeros(0)
    if R.shape != (3, 3) or not np.all(np.isfinite(R)) or \
            np.abs(R.T @ R - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0:
        problems.append(f"{label} must be a rotation matrix (3, 3), orthonormal to 1e-9 "
                        f"with determinant +1, found {x!r}")
        return None
    return R


def _wrap_records(w: TendonWrap, label: str, index: dict, problems: list) -> list:
    """The two site records of a :class:`TendonWrap` (the geom, then the second tangent
    point's slot), checked."""
    try:
        body = _path_body(_link_name(w.link), f"{label}.link", index, problems)
    except ModelError as e:
        problems.append(f"{label}.link: {e}")
        return []
    if body is None:
        return []
    kinds = {"sphere": kernel.WRAP_SPHERE, "cylinder": kernel.WRAP_CYLINDER}
    if w.shape not in kinds:
        problems.append(f"{label}.shape must be 'sphere' or 'cylinder', found {w.shape!r}")
        return []
    radius = float(w.radius) if np.ndim(w.radius) == 0 else math.nan
    if not (math.isfinite(radius) and radius > 0):
        problems.append(f"{label}.radius must be a finite number > 0, found {w.radius!r}")
        return []
    pos = _vec(w.position, 3, f"{label}.position", problems)
    R = _rotation_matrix(w.rotation, f"{label}.rotation", problems)
    if R is None:
        return []
    first = np.zeros(kernel.W_S)
    first[kernel.S_BODY] = body
    first[kernel.S_POS:kernel.S_POS + 3] = pos
    first[kernel.S_KIND], first[kernel.S_RAD] = kinds[w.shape], radius
    first[kernel.S_ROT:kernel.S_ROT + 9] = R.reshape(-1)
    if w.side is not None:
        sd = R.T @ (_vec(w.side, 3, f"{label}.side", problems) - pos)
        if np.linalg.norm(sd) < radius:
            problems.append(f"{label}.side must lie outside the geom (MuJoCo's wrapping from "
                            f"a side point inside it is not modelled), found {w.side!r} at "
                            f"{np.linalg.norm(sd):.6g} from the centre, radius {radius:.6g}")
        first[kernel.S_SIDE] = 1.0
        first[kernel.S_SD:kernel.S_SD + 3] = sd
    second = np.zeros(kernel.W_S)
    second[kernel.S_BODY] = first[kernel.S_BODY]
    second[kernel.S_KIND] = kernel.WRAP_SECOND
    return [first, second]


def _rotational_actuator(rec: np.ndarray, a, kind: str, start: int, label: str,
                         problems: list) -> None:
    """Actuator ``a`` on a ball (``gear``: 3 numbers, the torque in the joint's frame) or a
    free joint (6: the force along the world axes, the torque in the body's frame) whose
    coordinates start at ``start`` into its record ``rec`` (MuJoCo's joint transmission
    of those joints)."""
    k = 3 if kind == "ball" else 6
    gear = _vec(a.gear, k, f"{label}.gear ({k} numbers on a {kind} joint)", problems)
    rec[kernel.A_JA] = start
    rec[kernel.A_JFREE] = kind == "free"
    rec[kernel.A_JPARENT] = bool(a.in_parent)
    rec[kernel.A_SG + 6 - k:kernel.A_SG + 6] = gear
    if a.muscle is not None:
        problems.append(f"{label}: a muscle on a {kind} joint is not modelled")
    if kind == "ball" and _servo(a):
        rec[kernel.A_WRAP] = 2.0 * np.pi * float(np.linalg.norm(gear))


def _servo(a) -> bool:
    """Whether actuator ``a`` is MuJoCo 4's rotational servo where its transmission is
    rotational (a ball joint, a site's purely rotational gear about a reference site): a
    fixed gain ``kp``, the bias's ``-kp`` on the length, no dynamics or an integrator. Its
    setpoint then wraps to the representative nearest the length, ``2 pi |gear|`` apart
    (MuJoCo's ``wrapPeriod``)."""
    bias = np.asarray(a.bias, dtype=float).ravel()
    return (np.ndim(a.gain) == 0 and bias.size == 3 and a.muscle is None
            and float(a.gain) == -bias[1] and a.dynamics in (None, "integrator"))


def _site_record(site, label: str, index: dict, problems: list, axes: bool = True):
    """The site record (``W_S``) of ``site = (link, position[, rotation])`` (``link`` None
    for the world; the rotation's columns the site's axes in the link's frame), or None
    with the problem noted (a malformed site, an unknown link)."""
    rec = np.zeros(kernel.W_S)
    if not isinstance(site, (tuple, list)) or len(site) not in ((2, 3) if axes else (2,)):
        problems.append(f"{label} must be (link, position)" + (" or (link, position, "
                        "rotation)" if axes else "") + f", found {site!r}")
        return None
    try:
        nm = _link_name(site[0])
    except ModelError as e:
        problems.append(f"{label}: {e}")
        return None
    body = _path_body(nm, label, index, problems)
    if body is None:
        return None
    rec[kernel.S_BODY] = body
    rec[kernel.S_POS:kernel.S_POS + 3] = _vec(site[1], 3, f"{label}'s position", problems)
    R = np.eye(3) if len(site) == 2 else _rotation_matrix(site[2], f"{label}'s rotation",
                                                          problems)
    rec[kernel.S_ROT:kernel.S_ROT + 9] = (np.eye(3) if R is None else R).reshape(-1)
    return rec


def _crank_sites(a, label: str, index: dict, problems: list) -> list:
    """The crank's and the slider's site records of slider-crank actuator ``a``."""
    crank = _site_record(a.crank, f"{label}.crank", index, problems, axes=False)
    slider = _site_record(a.slider, f"{label}.slider", index, problems)
    if crank is None or slider is None:
        return [np.zeros(kernel.W_S)] * 2         # (the model is refused: problems noted)
    if crank[kernel.S_BODY] < 0 and slider[kernel.S_BODY] < 0:
        problems.append(f"{label}: a slider-crank with both sites on the world moves nothing")
    return [crank, slider]


def _refsite_sites(a, label: str, index: dict, parents: list, problems: list) -> list:
    """The site's, the reference site's and the common body's records of actuator ``a``
    (a site with a reference site): the third is the deepest body that carries both (an
    ancestor of both, or one of them; -1: none), on which the moment's clearing acts."""
    site = _site_record(a.site, f"{label}.site", index, problems)
    ref = _site_record(a.reference, f"{label}.reference", index, problems)
    if site is None or ref is None:
        return [np.zeros(kernel.W_S)] * 3         # (the model is refused: problems noted)
    bs, br = int(site[kernel.S_BODY]), int(ref[kernel.S_BODY])
    if bs < 0 and br < 0:
        problems.append(f"{label}: a site and a reference site both on the world move nothing")
    up = set()
    b = bs
    while b >= 0:
        up.add(b)
        b = parents[b]
    c = br
    while c >= 0 and c not in up:
        c = parents[c]
    common = np.zeros(kernel.W_S)
    common[kernel.S_BODY] = c if bs >= 0 else -1
    common[kernel.S_ROT:kernel.S_ROT + 9] = np.eye(3).reshape(-1)
    return [site, ref, common]


def _site_actuator(rec: np.ndarray, a, label: str, index: dict, problems: list) -> None:
    """The site of actuator ``a`` (``site = (link, position[, rotation])``, its ``gear`` 6
    numbers: force and torque in the site's frame) into its record ``rec``."""
    known = len(problems)
    site = _site_record(a.site, f"{label}.site", index, problems)
    if site is None:
        return
    if site[kernel.S_BODY] < 0:
        problems.append(f"{label}.site: a site of the world moves nothing (give one of the "
                        f"model's links {list(index)})")
        return
    gear = _vec(a.gear, 6, f"{label}.gear (6 numbers on a site: force and torque in the "
                           f"site's frame)", problems)
    if len(problems) > known:
        return
    if a.muscle is not None:
        problems.append(f"{label}: a muscle on a site is not modelled (a site transmission "
                        f"has no length)")
    R = site[kernel.S_ROT:kernel.S_ROT + 9].reshape(3, 3)
    rec[kernel.A_SITE] = site[kernel.S_BODY]
    rec[kernel.A_SP:kernel.A_SP + 3] = site[kernel.S_POS:kernel.S_POS + 3]
    rec[kernel.A_SG:kernel.A_SG + 3] = R @ gear[:3]
    rec[kernel.A_SG + 3:kernel.A_SG + 6] = R @ gear[3:]


def _muscle(rec: np.ndarray, mu, label: str, problems: list) -> None:
    """The muscle ``mu`` (:class:`Muscle`) into the actuator record ``rec``."""
    try:
        vals = np.array([*mu.range, mu.force, mu.lmin, mu.lmax, mu.vmax, mu.fpmax, mu.fvmax,
                         *mu.length_range, *mu.time_constants, mu.smoothing], dtype=float)
    except (TypeError, ValueError, AttributeError):
        vals = np.full(13, np.nan)
    if vals.shape != (13,):
        vals = np.full(13, np.nan)
    r0, r1, F, lmin, lmax, vmax, fpmax, fvmax, lr0, lr1, ta, td, ts = vals
    if not (np.all(np.isfinite(vals)) and r0 < r1 and F > 0 and lmin < 1 < lmax
            and vmax > 0 and fpmax >= 0 and fvmax >= 1 and lr0 < lr1 and ta > 0 and td > 0
            and ts >= 0):
        problems.append(f"{label}.muscle must hold finite parameters with range[0] < "
                        f"range[1], force > 0, lmin < 1 < lmax, vmax > 0, fpmax >= 0, fvmax "
                        f">= 1, length_range[0] < length_range[1], time constants > 0 and "
                        f"smoothing >= 0, found {mu!r}")
        return
    rec[kernel.A_MUS] = 1.0
    rec[kernel.A_MR0:kernel.A_TSMOOTH + 1] = vals


def _activation(a, label: str, problems: list) -> tuple:
    """``(dynamics code, mass of the activation's coordinate)`` of the actuator ``a``."""
    if a.dynamics == "filter":
        tau = a.time_constant
        try:
            tau = float(tau)
        except (TypeError, ValueError):
            tau = math.nan
        if not (math.isfinite(tau) and tau > 0):
            problems.append(f"{label}: a filter's time_constant must be finite and > 0, found "
                            f"{a.time_constant!r}")
            tau = 1.0
        return kernel.ACT_FILTER, tau
    if a.dynamics == "integrator":
        if a.time_constant is not None:
            problems.append(f"{label}: an integrator has no time_constant, found "
                            f"{a.time_constant!r}")
        return kernel.ACT_INTEGRATOR, 1.0
    problems.append(f"{label}.dynamics must be None, 'filter' or 'integrator', found "
                    f"{a.dynamics!r}")
    return kernel.ACT_FILTER, 1.0


def _jrec(typ, qadr, pos, axis, ref, damp, arm, k, sref, sq=(1.0, 0.0, 0.0, 0.0),
          afr=(0.0, 0.0, 0.0)) -> np.ndarray:
    r = np.zeros(kernel.W_J)
    r[kernel.J_SQ:kernel.J_SQ + 4] = sq
    r[kernel.J_AFL:kernel.J_AFL + 3] = afr
    r[kernel.J_TYPE], r[kernel.J_Q] = typ, qadr
    r[kernel.J_POS:kernel.J_POS + 3] = pos
    r[kernel.J_AXIS:kernel.J_AXIS + 3] = axis
    r[kernel.J_REF] = ref
    r[kernel.J_DAMP:kernel.J_DAMP + len(damp)] = damp
    r[kernel.J_ARM:kernel.J_ARM + len(arm)] = arm
    r[kernel.J_K], r[kernel.J_SREF] = k, sref
    return r


def quat_matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """The unit quaternion ``(w, x, y, z)``, ``w >= 0``, of the rotation matrix ``R``."""
    tr = np.trace(R)
    if tr > 0:
        s = 2.0 * np.sqrt(1.0 + tr)
        e = np.array([0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s,
                      (R[1, 0] - R[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        e = np.empty(4)
        e[0] = (R[k, j] - R[j, k]) / s
        e[1 + i] = 0.25 * s
        e[1 + j] = (R[j, i] + R[i, j]) / s
        e[1 + k] = (R[k, i] + R[i, k]) / s
    e /= np.linalg.norm(e)
    return e if e[0] >= 0 else -e
