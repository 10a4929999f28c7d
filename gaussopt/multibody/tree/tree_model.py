"""The tree :class:`Model`: links, joints and loop closures in joint coordinates as a
:class:`~gaussopt.System`, with its rank report, consistent states, the links' poses and
its actuators' controls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence, Union

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.core.model_interface import ParameterSlots
from gaussopt.model.contact import Contact
from gaussopt.model.system import System
from gaussopt.gauss.solution import DEFAULT_RANK_TOL
from gaussopt.core.checks import as_state
import gaussopt.multibody.common.analysis as analysis
import gaussopt.multibody.common.states as states
from gaussopt.multibody.common.analysis import RankReport
from gaussopt.model.constraints import Holonomic
from gaussopt.multibody.common.base_model import BaseModel, _JointConstraint, _MultibodySystem
import gaussopt.multibody.tree.tree_compiled as kernel
from gaussopt.multibody.tree.tree_assembly import _link_name, assemble_model, quat_matrix
from gaussopt.multibody.tree.tree_elements import Link, MocapMotion
from gaussopt.multibody.tree.tree_geometry import PairGroup, TreeKinematics, check_rim_points

__all__ = ["Model", "Keyframe"]

_NONE = np.zeros(0)


@dataclass(frozen=True)
class Keyframe:
    """A state of a model saved with it (MuJoCo's ``<key>``, read by
    :func:`gaussopt.multibody.load`): start a run from ``(q, v)`` and hold the actuators at
    ``ctrl`` (``model.controlled(key.ctrl)``).

    Attributes
    ----------
    time : float
    q, v : ndarray, shape (n,)
        The model's coordinates and their rates (:func:`~gaussopt.multibody.io.mjcf.
        state_from_mujoco` of MuJoCo's ``qpos``, ``qvel``).
    ctrl : ndarray, shape (len(model.actuator_names),)
        The controls of the model's actuators.
    """

    time: float
    q: np.ndarray
    v: np.ndarray
    ctrl: np.ndarray


class Model(BaseModel):
    """A tree of rigid links in joint coordinates, its loops closed by constraint rows,
    assembled into a :class:`~gaussopt.System`.

    Parameters
    ----------
    links : sequence of Link
        Parents before their children.
    joints : sequence
        :class:`TreeJoint` (hinge, slide, ball, free; the coordinates ``q`` are theirs, link
        by link, each link's joints in order) and the closures :class:`Connect`,
        :class:`Weld` (3 and 6 rows), :class:`JointEquality`, :class:`TendonEquality` (one
        row each).
    forces : sequence
        :class:`FixedTendon` (its spring, damper and armature; the line that actuators and
        :class:`TendonEquality` act along) and :class:`Actuator` (a force set by a control,
        along a joint or a tendon). The joints' own passive forces are their damping and
        stiffness.
    gravity : array_like, shape (3,)
    name : str

    Attributes
    ----------
    system : System
        The assembled system (built once): ``M(q)`` from the composite-rigid-body algorithm
        (singular along the Euler parameters of every ball and free joint), ``F(q, v)`` from
        the recursive Newton--Euler algorithm, one :class:`~gaussopt.Holonomic` block
        ``"joints"`` (a normalization row per ball or free joint, then the closures' rows),
        the mechanical energy; always compiled.
    n, m : int
    coordinates : tuple of str
        ``"<joint>"`` (hinge, slide), ``"<joint>.e0"``... (ball), ``"<joint>.x"``... (free),
        then ``"<actuator>.act"`` for each actuator with activation dynamics (its velocity
        is the activation, :attr:`activations`).
    activations : dict
        Actuator name -> index of the coordinate whose velocity is its activation.
    q_reference : ndarray
        Every joint at its reference.
    description : str
        What the model is, in a few lines.
    actuator_names : tuple of str
        The actuators, in the order of ``ctrl`` (the names of the controls in
        ``system.parameter_slots``: ``go.Stepper(model.system, q0, v0, dt=dt,
        inputs=model.actuator_names)`` sets them per step).
    tendon_names : tuple of str
    keyframes : dict
        Name -> :class:`Keyframe`: states saved with the model (the loader fills it from
        MuJoCo's keyframes).

    Notes
    -----
    **Controls.** Every actuator's control ``ctrl`` is an entry of the compiled model's
    parameter array (its value in :attr:`system`: the :class:`Actuator`'s ``ctrl``, 0 by
    default). Three ways to set it, one mechanism: ``go.Stepper(model.system, ...,
    inputs=model.actuator_names)`` and ``stepper.step(ctrl)`` in a control loop (held over
    each step); :meth:`controlled` with a constant ``ctrl`` for ``go.simulate`` (a compiled
    system on a copy of the parameters); :meth:`controlled` with a feedback law ``ctrl(t, q,
    v)`` (the system's force then calls it at every evaluation, through Python).
    """

    kernel = kernel
    assemble_model = staticmethod(assemble_model)
    ref_name = staticmethod(_link_name)

    def __init__(self, links: Sequence[Link], joints: Sequence = (), forces: Sequence = (),
                 gravity=(0.0, 0.0, 0.0), name: str = "tree") -> None:
        super().__init__(links, joints, forces, gravity, name)
        #: a line of the model's description added by the loader (its origin)
        self.origin = ""
        #: name -> :class:`Keyframe` (the loader's, from MuJoCo's keyframes)
        self.keyframes: dict = {}
        #: joint name -> ``(lower, upper)`` of the hinges and slides with hard stops (the
        #: loader's, from MuJoCo's limited joints): :meth:`limits`, :meth:`with_limits`
        self.joint_ranges: dict = {}
        #: fixed tendon name -> ``(lower, upper)`` of its length ``L(q) = sum c_k q_k`` (the
        #: loader's, from MuJoCo's limited fixed tendons): :meth:`limits`, :meth:`with_limits`
        self.tendon_ranges: dict = {}
        #: the pairs of colliding geoms (the loader's, from MuJoCo's geoms and ``<pair>``
        #: elements): :class:`~gaussopt.multibody.tree.tree_geometry.ContactPair`;
        #: :meth:`contacts`, :meth:`with_contacts`
        self.contact_pairs: tuple = ()
        #: mocap body -> the parts of it that stay at its reference pose when it moves (the
        #: loader's: links under it, geoms of it in contact pairs): :meth:`moved` refuses
        #: to move it
        self.mocap_fixed: dict = {}
        self.mocap_names = self._asm.mocap_names
        self._kin_numpy = None
        self.actuator_names = self._asm.actuator_names
        self.tendon_names = self._asm.tendon_names
        #: actuator -> the coordinate whose velocity is its activation (the actuators with
        #: activation dynamics: :class:`Actuator`'s ``dynamics``)
        self.activations = dict(self._asm.activations or {})
        #: ``(coordinate, MuJoCo's actadr)`` of each activation (a loaded model's: the
        #: loader's :func:`~gaussopt.multibody.io.mjcf.state_from_mujoco` reads ``act``)
        self.mujoco_activations: tuple = ()

    def __reduce__(self):
        """Pickle as the call that built the model, with the loader's additions."""
        return (type(self), self._args, {"origin": self.origin, "keyframes": self.keyframes,
                                         "joint_ranges": self.joint_ranges,
                                         "tendon_ranges": self.tendon_ranges,
                                         "contact_pairs": self.contact_pairs,
                                         "mocap_fixed": self.mocap_fixed,
                                         "mujoco_activations": self.mujoco_activations})

    @property
    def system(self) -> System:
        """The assembled :class:`~gaussopt.System` (built once), compiled; its
        ``parameter_slots`` name the actuators' controls (every one enters only the
        force)."""
        if self._system is None:
            sysm = BaseModel.system.fget(self)
            sysm.parameter_slots = self._parameter_slots()
        return self._system

    def _parameter_slots(self) -> ParameterSlots:
        names = self.actuator_names
        return ParameterSlots(index={nm: int(k) for nm, k in zip(names, self._asm.ctrl_slots)},
                              force_only=frozenset(names))

    # ------------------------------------------------------------------ controls
    @property
    def ctrl(self) -> np.ndarray:
        """The actuators' controls in the model's parameters (a copy), shape (nu,)."""
        return self._p[self._asm.ctrl_slots].copy()

    def _ctrl_values(self, ctrl, what: str = "`ctrl`") -> np.ndarray:
        """``ctrl`` (an array of nu numbers, or a mapping actuator name -> value over the
        model's controls) as an array."""
        names = self.actuator_names
        if isinstance(ctrl, Mapping):
            unknown = [k for k in ctrl if k not in names]
            if unknown:
                raise ModelError(f"{what} names unknown actuators {unknown}; the actuators are "
                                 f"{list(names)}.")
            u = self.ctrl
            for k, x in ctrl.items():
                u[names.index(k)] = x
            ctrl = u
        try:
            u = np.asarray(ctrl, dtype=float).reshape(-1) if np.ndim(ctrl) <= 1 else None
        except (TypeError, ValueError):
            u = None
        if u is None or u.shape != (len(names),) or not np.all(np.isfinite(u)):
            raise ModelError(f"{what} must be {len(names)} finite numbers (one per actuator: "
                             f"{list(names)}) or a mapping name -> value, found {ctrl!r}.")
        return u

    def controlled(self, ctrl: Union[Sequence[float], Mapping[str, float], Callable]) -> System:
        """The model's :class:`~gaussopt.System` with its actuators driven by ``ctrl``.

        Parameters
        ----------
        ctrl : array_like, shape (nu,), mapping or callable
            Constant controls (an array in the order of :attr:`actuator_names`, or a mapping
            name -> value for some of them, the rest at the model's values): a compiled
            system on a copy of the model's parameters with these controls. Or a feedback
            law ``ctrl(t, q, v)`` returning the ``nu`` controls: the system's force writes
            them into its own copy of the parameters at every evaluation and runs the
            compiled force (the run calls Python once per evaluation).

        Returns
        -------
        System
            For :func:`gaussopt.simulate`, :func:`gaussopt.solve_step`, a
            :class:`~gaussopt.Stepper` (constant ``ctrl``: its ``parameter_slots`` are
            :attr:`system`'s).

        Raises
        ------
        ModelError
            ``ctrl`` of the wrong size, not finite, naming unknown actuators; a callable
            whose value is such (when the force is evaluated).
        """
        p = self._p.copy()
        slots = self._asm.ctrl_slots
        if callable(ctrl):
            law = ctrl
            label = getattr(law, "__name__", type(law).__name__)

            def force(t, q, v):
                p[slots] = self._ctrl_values(law(t, q, v), f"`ctrl(t, q, v)` ({label})")
                F = np.empty(self.n)
                kernel.force(p, np.ascontiguousarray(q, dtype=float),
                             np.ascontiguousarray(v, dtype=float), _NONE, F)
                return F

            sysm = self._assemble_system(self.mass, force, None, f"{self.name} (ctrl {label})")
        else:
            p[slots] = self._ctrl_values(ctrl)

            def force(t, q, v):
                F = np.empty(self.n)
                kernel.force(p, np.ascontiguousarray(q, dtype=float),
                             np.ascontiguousarray(v, dtype=float), _NONE, F)
                return F

            sysm = self._assemble_system(self.mass, force, p, f"{self.name} (ctrl held)")
            sysm.parameter_slots = self._parameter_slots()
        return sysm.rebuilt_by(_controlled_system, self, ctrl)

    # ------------------------------------------------------------------ mocap bodies
    def moved(self, motions: Mapping[str, MocapMotion], system: Optional[System] = None
              ) -> System:
        """``system`` (default :attr:`system`; e.g. :meth:`controlled`'s) with the
        :class:`~gaussopt.multibody.tree.Mocap` bodies named in ``motions`` following their
        prescribed motions, the others at rest.

        Why: a mocap body is how a MuJoCo model lets the user move something -- a target
        welded to a gripper, a pivot carried by a hand. MuJoCo holds the weld by a spring
        (``solref``); here the closures that name the body are exact rheonomic rows, their
        ``Phi_t`` and ``gamma`` computed in the model's kernel from the motion's velocity and
        acceleration (:func:`~gaussopt.multibody.tree.tree_compiled.phi_t`). The motion is a
        Python callable, so the rows are evaluated through Python (one call per evaluation,
        each on its own copy of the model's parameters: safe in threads); mass and force
        stay the system's.

        Parameters
        ----------
        motions : mapping
            Mocap name (:attr:`mocap_names`) -> :class:`~gaussopt.multibody.tree.MocapMotion`.
        system : System, optional

        Returns
        -------
        System
            Rheonomic: its energy is the tree's, which the motion's work changes.

        Raises
        ------
        ModelError
            An unknown or repeated name, a motion that is not a ``MocapMotion``, a part given
            without both its derivatives, a mocap body with parts that cannot follow it (the
            loader's :attr:`mocap_fixed`: links under it, its geoms in contact pairs); a motion
            whose value is not finite or of the wrong shape (when evaluated).
        """
        if not isinstance(motions, Mapping) or not motions:
            raise ModelError("`motions` must be a non-empty mapping mocap name -> MocapMotion, "
                             f"found {motions!r}.")
        moving = {}
        for name, mo in motions.items():
            if name not in self.mocap_names:
                raise ModelError(f"`motions` names {name!r}, which is not a mocap body of model "
                                 f"{self.name!r} (its mocap bodies: {list(self.mocap_names)}).")
            if not isinstance(mo, MocapMotion):
                raise ModelError(f"`motions[{name!r}]` must be a MocapMotion, found "
                                 f"{type(mo).__name__}.")
            for part, ders in (("position", ("velocity", "acceleration")),
                               ("orientation", ("angular_velocity", "angular_acceleration"))):
                given = [getattr(mo, x) for x in (part,) + ders]
                if given[0] is not None and not all(callable(f) for f in given):
                    raise ModelError(f"`motions[{name!r}]`: `{part}` needs `{ders[0]}` and "
                                     f"`{ders[1]}` (callables of t, exact: they enter the "
                                     f"rows' Phi_t and gamma), found {given[1:]!r}.")
                if given[0] is None and any(f is not None for f in given[1:]):
                    raise ModelError(f"`motions[{name!r}]`: `{ders[0]}`/`{ders[1]}` given "
                                     f"without `{part}`.")
                if given[0] is not None and not callable(given[0]):
                    raise ModelError(f"`motions[{name!r}].{part}` must be a callable of t, "
                                     f"found {given[0]!r}.")
            fixed = self.mocap_fixed.get(name, ())
            if fixed:
                raise ModelError(f"mocap body {name!r} cannot be moved: {', '.join(fixed)} "
                                 f"of it stay at its reference pose in this model (the "
                                 f"loader maps only its equalities to its motion).")
            moving[self.mocap_names.index(name)] = mo
        base = self.system if system is None else system
        if not isinstance(base, System) or base.n != self.n:
            raise ModelError(f"`system` must be a System of this model's {self.n} coordinates, "
                             f"found {base!r}.")
        joints = _MovedJoints(self, moving)
        others = [c for c in base.constraints if not isinstance(c, _JointConstraint)]
        mass = base.constant_mass if base.constant_mass is not None else base._mass
        force = base.constant_force if base.constant_force is not None else base._force
        label = ", ".join(motions)
        if others:
            sysm = System(self.coordinates, mass, force, [joints] + others, energy=self.energy,
                          name=f"{base.name} (moving {label})")
        else:
            sysm = _MultibodySystem(self.coordinates, mass=mass, force=force,
                                    constraints=[joints], energy=self.energy,
                                    name=f"{base.name} (moving {label})", labels=self.labels)
        return sysm.rebuilt_by(_moved_system, self, dict(motions), system)

    def actuation(self, q, v, ctrl=None) -> np.ndarray:
        """The actuators' generalized force at ``(q, v)`` (MuJoCo's ``qfrc_actuator``;
        ``ctrl`` as in :meth:`controlled` but not callable, default the model's), shape
        (n,)."""
        q = np.ascontiguousarray(as_state(q, self.n, "q"))
        v = np.ascontiguousarray(as_state(v, self.n, "v"))
        p = self._p
        if ctrl is not None:
            p = p.copy()
            p[self._asm.ctrl_slots] = self._ctrl_values(ctrl)
        out = np.empty(self.n)
        kernel.actuation(p, q, v, out)
        return out

    def limits(self, restitution: float = 0.0) -> Contact:
        """The joint ranges (:attr:`joint_ranges`) and the tendons' ranges
        (:attr:`tendon_ranges`) as hard stops: one unilateral :class:`~gaussopt.Contact`
        with two rows per range, ``x - lower >= 0`` and ``upper - x >= 0`` (``x`` the joint's
        coordinate, or the tendon's length: ``L(q) = sum c_k q_k`` for a fixed tendon, the
        length of its path for a spatial one, :meth:`tendon_length`; frictionless; the
        joints' rows first, then the fixed tendons', then the spatial ones', each range's
        lower row before its upper).

        Why opt-in: MuJoCo's limits are soft (a spring-damper that lets the joint or the
        tendon pass its range a little, ``solref``/``solimp``); here it stops exactly at its
        bound, with Newton's ``restitution`` (0: it stays at the stop until its load pulls it
        away). A system with contacts runs event by event (:func:`gaussopt.simulate`'s
        contact run, through Python callbacks) and is not a :class:`~gaussopt.Stepper`'s,
        so :attr:`system` keeps none; :meth:`with_limits` adds them.

        Raises
        ------
        ModelError
            No joint or tendon has a range, or a range names an unknown joint or tendon, a
            joint with more than one coordinate, or is not ``lower < upper`` (finite).
        """
        if not self.joint_ranges and not self.tendon_ranges:
            raise ModelError(f"model {self.name!r} has no joint or tendon ranges "
                             "(`joint_ranges` and `tendon_ranges` are empty: the loader fills "
                             "them from MuJoCo's limited hinges, slides and fixed tendons).")
        rows, lo, hi, spatial = [], [], [], []
        strings = self._asm.spatial_lines or {}
        for what, ranges in (("joint_ranges", self.joint_ranges),
                             ("tendon_ranges", self.tendon_ranges)):
            for name, rng in ranges.items():
                if name in strings and what == "tendon_ranges":
                    if name in self._asm.wrapped_tendons:
                        raise ModelError(f"`tendon_ranges[{name!r}]`: tendon {name!r} wraps a "
                                         "geom; its hard stop (whose row needs the string's "
                                         "curvature on the geom) is not modelled.")
                    c = None
                elif what == "joint_ranges":
                    sl = self.joint_slice(name)
                    if sl.stop - sl.start != 1:
                        raise ModelError(f"`joint_ranges[{name!r}]`: joint {name!r} has "
                                         f"{sl.stop - sl.start} coordinates; ranges are for "
                                         "hinges and slides (one coordinate).")
                    c = np.zeros(self.n)
                    c[sl.start] = 1.0
                else:
                    c = self.tendon_row(name)
                try:
                    a, b = (float(x) for x in rng)
                except (TypeError, ValueError):
                    raise ModelError(f"`{what}[{name!r}]` must be a pair (lower, upper), "
                                     f"found {rng!r}.") from None
                if not (np.isfinite(a) and np.isfinite(b) and a < b):
                    raise ModelError(f"`{what}[{name!r}]` must be finite with lower < upper, "
                                     f"found ({a}, {b}).")
                if c is None:
                    spatial.append((strings[name], a, b))
                    continue
                rows.append(c)
                lo.append(a)
                hi.append(b)
        stops = _Stops(np.array(rows).reshape(-1, self.n), np.array(lo), np.array(hi),
                       self._p, spatial)
        return Contact(stops.gap, stops.jacobian, stops.gamma, restitution=restitution,
                       rheonomic=False, name="limits")

    def tendon_row(self, name: str) -> np.ndarray:
        """The coefficients ``c`` (n,) of the fixed tendon ``name``: its length is ``L(q) =
        c . q`` (MuJoCo's ``ten_length``: the sum of its joints' coefficients times their
        coordinates)."""
        if name not in self.tendon_names:
            strings = self._asm.spatial_lines or {}
            extra = (f" ({name!r} is a spatial tendon: its row depends on q)"
                     if name in strings else "")
            raise ModelError(f"`tendon` must be one of the fixed tendons "
                             f"{list(self.tendon_names)}, found {name!r}{extra}.")
        p = self._p
        k = list(self.tendon_names).index(name)       # (the tendons are the first lines)
        rec = int(p[kernel.H_OL]) + kernel.W_L * k
        t0, nt = int(p[rec + kernel.L_T0]), int(p[rec + kernel.L_NT])
        ot = int(p[kernel.H_OT])
        c = np.zeros(self.n)
        for t in range(t0, t0 + nt):
            c[int(p[ot + 2 * t])] += p[ot + 2 * t + 1]
        return c

    def tendon_length(self, name: str, q) -> float:
        """The length of the tendon ``name``: ``L(q) = c . q`` for a fixed tendon
        (:meth:`tendon_row`), the sum of its segments for a spatial one (MuJoCo's
        ``ten_length``)."""
        strings = self._asm.spatial_lines or {}
        if name in strings:
            q = np.ascontiguousarray(as_state(q, self.n, "q"))
            return float(kernel.line_length(self._p, q, strings[name]))
        return float(self.tendon_row(name) @ np.asarray(q, dtype=float))

    def tendon_jacobian(self, name: str, q) -> np.ndarray:
        """The Jacobian ``dL/dq`` (n,) of the tendon ``name`` at ``q``: its rate is ``L' =
        J . v`` for every velocity ``v`` of the model (MuJoCo's ``ten_J``, in this model's
        coordinates: a ball's or free joint's Euler-parameter rates where MuJoCo has the
        angular velocity). A fixed tendon's is :meth:`tendon_row` at every ``q``; a spatial
        tendon's is the sum over its segments of ``u . (dP_b/dq - dP_a/dq)`` (``u`` the
        segment's unit vector from site a to site b), as its equality rows use it: what a
        user needs for a moment arm, an own controller along the tendon, or a test."""
        strings = self._asm.spatial_lines or {}
        q = np.ascontiguousarray(as_state(q, self.n, "q"))
        if name not in strings:
            if name not in self.tendon_names:
                raise ModelError(f"`tendon` must be one of the tendons "
                                 f"{list(self.tendon_names) + list(strings)}, found {name!r}.")
            return self.tendon_row(name)
        row = np.zeros((1, self.n))
        kernel.line_state(self._p, q, np.zeros(self.n), strings[name], row)
        return row[0]

    def with_limits(self, system: Optional[System] = None, restitution: float = 0.0) -> System:
        """``system`` (default :attr:`system`; e.g. :meth:`controlled`'s) with the hard stops
        of :meth:`limits` added."""
        return self._extended(system, [self.limits(restitution)], "limits")

    def _extended(self, system: Optional[System], extra: list, name: str) -> System:
        """``system`` (default :attr:`system`), checked, with the constraints ``extra``."""
        base = self.system if system is None else system
        if not isinstance(base, System) or base.n != self.n:
            raise ModelError(f"`system` must be a System of this model's {self.n} coordinates, "
                             f"found {base!r}.")
        return base.with_constraints(list(base.constraints) + list(extra), name=name)

    @property
    def geometry_kinematics(self) -> TreeKinematics:
        """The forward kinematics in numpy (:class:`~gaussopt.multibody.tree.tree_geometry.
        TreeKinematics`, any dtype: what the contacts' complex steps evaluate), built once."""
        if self._kin_numpy is None:
            self._kin_numpy = TreeKinematics(self._p)
        return self._kin_numpy

    def contacts(self, restitution: float = 0.0, rim_points: int = 0) -> list:
        """The colliding geom pairs (:attr:`contact_pairs`) as hard unilateral contacts: one
        :class:`~gaussopt.Contact` per friction coefficient (a gap row per contact point:
        a sphere's lowest point, a capsule's two end spheres, a cylinder's two rims' lowest
        points, a box's 8 corners, a capsule against a box 14: its two end spheres and the
        box's 12 edges, :meth:`~gaussopt.multibody.tree.tree_geometry.ContactPair.parts`;
        the pairs
        of ``friction > 0`` with the spatial Coulomb cone of their ``slip_velocity``).

        ``rim_points``: 0 (default), a cylinder touches a plane at its rims' lowest points
        (exact rolling on a rim; standing on a flat face is refused by name, its rims
        having no lowest point there); ``K >= 3``, each rim is ``K`` points at equal angles
        (:meth:`~gaussopt.multibody.tree.tree_geometry.ContactPair.with_rim_points`): the
        cylinder touches as a regular K-gon prism inscribed in it, which stands, slides
        and spins on its face (a puck, a mug, a can) and tips where its centre of pressure
        leaves the polygon.

        Why opt-in: MuJoCo's contacts are soft (``solref``/``solimp``: a ball resting on the
        floor sinks a fraction of a millimetre) and have no restitution; here a contact
        closes exactly, with Newton's ``restitution`` (default 0, plastic: MuJoCo's
        contacts do not bounce either). A system with contacts runs event by event: each
        phase's ``M`` and ``F`` by the model's compiled functions, its rows (the model's,
        the closed points' gap rows, the sticking points' no-slip rows) by compiled
        functions too (:func:`~gaussopt.multibody.tree.tree_compiled.phase_functions`),
        its events and contact problems in Python, so :attr:`system` keeps none;
        :meth:`with_contacts` adds them.

        Returns
        -------
        list of Contact
            Named ``"contacts"`` (one friction) or ``"contacts.mu=<friction>"``.

        Raises
        ------
        ModelError
            The model has no contact pairs, or a pair names an unknown link.
        """
        if not self.contact_pairs:
            raise ModelError(f"model {self.name!r} has no contact pairs (`contact_pairs` is "
                             "empty: the loader fills it from MuJoCo's colliding geoms: world "
                             "planes against spheres, capsules, cylinders and boxes, spheres "
                             "and capsules against spheres, capsules and boxes).")
        for pr in self.contact_pairs:
            for ln in (pr.link1, pr.link2):
                if ln is not None and ln not in self._asm.index:
                    raise ModelError(f"`contact_pairs`: pair ({pr.geom1!r}, {pr.geom2!r}) names "
                                     f"link {ln!r}, not one of {list(self.body_names)}.")
        check_rim_points(rim_points, "rim_points", zero=True)
        groups: dict = {}
        for pr in self.contact_pairs:
            if rim_points and pr.kind == "plane-cylinder":
                pr = pr.with_rim_points(int(rim_points))
            groups.setdefault(float(pr.friction), []).append(pr)
        out = []
        kin = self.geometry_kinematics
        for mu, prs in groups.items():
            grp = PairGroup(kin, prs, self._asm.index)
            name = "contacts" if len(groups) == 1 else f"contacts.mu={mu:g}"
            contact = Contact(grp.gap, grp.jacobian, grp.gamma,
                              slip_velocity=grp.slip_velocity if mu > 0 else None,
                              slip_velocity_jacobian=(grp.slip_velocity_jacobian if mu > 0
                                                      else None),
                              slip_velocity_gamma=(grp.slip_velocity_gamma if mu > 0
                                                   else None),
                              friction=mu, restitution=restitution, rheonomic=False,
                              name=name, point_names=grp.point_names)
            if grp.has_kinks:
                contact.nonsmooth_at = grp.nonsmooth_at
            contact.unsigned = grp.unsigned_rows
            # (a contact run's phases evaluate its closed points' rows by the compiled
            # kernel: tree_compiled.phase_functions)
            contact.pair_group = grp
            # (a phase's closed points' rows by the kernel on their records alone)
            contact.subset = grp.subset
            out.append(contact)
        return out

    def with_contacts(self, system: Optional[System] = None, restitution: float = 0.0,
                      rim_points: int = 0) -> System:
        """``system`` (default :attr:`system`; e.g. :meth:`with_limits`'s) with the contacts
        of :meth:`contacts` added (``restitution``, ``rim_points``: as there)."""
        return self._extended(system, self.contacts(restitution, rim_points), "contacts")

    @property
    def q_reference(self) -> np.ndarray:
        return self._asm.q_reference.copy()

    @property
    def joint_names(self) -> tuple:
        return self._asm.joint_names

    def joint_slice(self, joint: str) -> slice:
        """Slice of ``q`` holding the coordinates of ``joint``."""
        if joint not in self._asm.joint_slices:
            raise ModelError(f"`joint` must be one of {list(self._asm.joint_slices)}, found "
                             f"{joint!r}.")
        return self._asm.joint_slices[joint]

    def body_slice(self, body) -> slice:
        raise ModelError("a link of a tree model has no coordinates of its own; use "
                         "`joint_slice(joint)` for a joint's coordinates.")

    @property
    def description(self) -> str:
        nball = sum(1 for lb in self.labels if lb.endswith(".norm"))
        lines = [f"{self.name}: {self.nb} links in joint coordinates (gaussopt.multibody.tree): "
                 f"n = {self.n} coordinates, m = {self.m} rows ({nball} normalizations, "
                 f"{self.m - nball} loop-closure rows)"]
        if self.origin:
            lines.append(self.origin)
        return "\n".join(lines)

    # ------------------------------------------------------------------ kinematics
    def _link(self, link) -> int:
        nm = _link_name(link)
        if nm is None:
            return -1
        if nm not in self._asm.index:
            raise ModelError(f"`link` must be one of {list(self.body_names)}, found {link!r}.")
        return self._asm.index[nm]

    def kinematics(self, q, v=None):
        """``(R, X, S, V)``: the links' rotations (nb, 3, 3) and origins (nb, 3), the world
        twist of every coordinate (n, 6: angular, then the linear velocity at the world
        origin) and the links' twists (nb, 6) at ``(q, v)``."""
        q = np.ascontiguousarray(as_state(q, self.n, "q"))
        v = np.zeros(self.n) if v is None else np.ascontiguousarray(as_state(v, self.n, "v"))
        R, X = np.empty((self.nb, 3, 3)), np.empty((self.nb, 3))
        S, V = np.empty((self.n, 6)), np.empty((self.nb, 6))
        kernel.kinematics(self._p, q, v, R, X, S, V)
        return R, X, S, V

    def pose(self, link, q) -> tuple[np.ndarray, np.ndarray]:
        """Rotation (3, 3) and origin (3,) of ``link``'s frame at ``q``."""
        k = self._link(link)
        if k < 0:
            return np.eye(3), np.zeros(3)
        R, X, _, _ = self.kinematics(q)
        return R[k], X[k]

    def point(self, link, s, q) -> np.ndarray:
        """World position of the point ``s`` of ``link``'s frame at ``q``; (3,) or (N, 3)
        for states ``q`` of shape (N, n)."""
        q = np.asarray(q, dtype=float)
        s = np.asarray(s, dtype=float)
        if q.ndim == 2:
            return np.array([self.point(link, s, x) for x in q])
        R, x = self.pose(link, q)
        return x + R @ s

    def point_velocity(self, link, s, q, v) -> np.ndarray:
        """World velocity of the point ``s`` of ``link``'s frame."""
        k = self._link(link)
        if k < 0:
            return np.zeros(3)
        R, X, _, V = self.kinematics(q, v)
        P = X[k] + R[k] @ np.asarray(s, dtype=float)
        return V[k, 3:] + np.cross(V[k, :3], P)

    def angular_velocity(self, link, q, v) -> np.ndarray:
        """World angular velocity of ``link``."""
        k = self._link(link)
        return np.zeros(3) if k < 0 else self.kinematics(q, v)[3][k, :3]

    # ------------------------------------------------------------------ kernel
    def mass(self, t: float, q) -> np.ndarray:
        """``M(q)``, shape (n, n) (composite-rigid-body algorithm)."""
        M = np.empty((self.n, self.n))
        kernel.mass(self._p, np.ascontiguousarray(q, dtype=float), M)
        return M

    def force(self, t: float, q, v) -> np.ndarray:
        """``F(q, v)``, shape (n,) (recursive Newton--Euler at zero acceleration)."""
        F = np.empty(self.n)
        kernel.force(self._p, np.ascontiguousarray(q, dtype=float),
                     np.ascontiguousarray(v, dtype=float), _NONE, F)
        return F

    def _mass_and_force(self) -> tuple:
        return self.mass, self.force

    # ------------------------------------------------------------------ analysis, states
    def rank_report(self, q=None, t: float = 0.0, rank_tol: float = DEFAULT_RANK_TOL) -> RankReport:
        """The rank of the rows (normalizations and closures) at ``q`` (default the
        reference), the true mobility ``n - rank`` and the redundant rows."""
        q = self._asm.q_reference if q is None else q
        return analysis.rank_report(self._asm, q, t, rank_tol)

    def assemble(self, q_guess=None, fixed: Optional[Mapping[str, float]] = None, t: float = 0.0,
                 tol: float = 1e-13, max_iter: int = 50) -> np.ndarray:
        """Positions with ``Phi(q) = 0`` (loops closed, Euler parameters unit) near
        ``q_guess`` (default the reference), some coordinates prescribed (``fixed``)."""
        q0 = self._asm.q_reference if q_guess is None else q_guess
        return states.assemble(self._asm, fixed, q0, t, tol, max_iter)

    def velocities(self, q, prescribed: Optional[Mapping[str, float]] = None, t: float = 0.0,
                   rank_tol: float = DEFAULT_RANK_TOL) -> np.ndarray:
        """Velocities with ``Phi_q v = 0`` and the ``prescribed`` coordinate rates
        (``None``: at rest)."""
        if prescribed is None:
            as_state(q, self.n, "q")
            return np.zeros(self.n)
        return states.velocities(self._asm, q, prescribed, t, rank_tol)

    def initial_state(self, fixed: Optional[Mapping[str, float]] = None,
                      prescribed_velocities: Optional[Mapping[str, float]] = None,
                      q_guess=None, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``(q0, v0)``: :meth:`assemble`, then :meth:`velocities`."""
        q0 = self.assemble(q_guess, fixed, t)
        return q0, self.velocities(q0, prescribed_velocities, t)

    def __repr__(self) -> str:
        return (f"tree.Model({self.name!r}, links={len(self.body_names)}, "
                f"joints={len(self.joint_names)}, n={self.n}, m={self.m})")


class _MovedJoints(Holonomic):
    """The model's rows with mocap bodies in motion (:meth:`Model.moved`): every evaluation
    at ``t`` writes the moving bodies' states into its own copy of the parameters (kept for
    the next evaluation at the same ``t``) and calls the kernel."""

    def __init__(self, model: Model, moving: dict) -> None:
        self._model = model
        self._moving = moving
        self._slots = model._asm.mocap_slots
        self._last: tuple = (None, None)
        super().__init__(self.phi, jacobian=self.jacobian, gamma=self.gamma,
                         phi_t=self.phi_t, rheonomic=True, name="joints")
        names = [model.mocap_names[k] for k in moving]
        self.check_hint = (f"the rows' Phi_t and gamma come from the motions of {names}: check "
                           "that their velocity and acceleration (angular_velocity, "
                           "angular_acceleration: world frame) are the derivatives of their "
                           "position (orientation)")

    def _vec(self, f, t, k: int, label: str) -> np.ndarray:
        val = f(t)
        try:
            x = np.asarray(val, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            x = None
        if x is None or x.shape != (k,) or not np.all(np.isfinite(x)):
            raise ModelError(f"`{label}(t)` must return {k} finite numbers, found {val!r} at "
                             f"t={t}.")
        return x

    def params(self, t: float) -> np.ndarray:
        """The parameters at ``t`` (the moving bodies' states written in)."""
        t = float(t)
        last_t, last_p = self._last
        if last_t == t:
            return last_p
        p = self._model._p.copy()
        names = self._model.mocap_names
        for k, mo in self._moving.items():
            r = int(self._slots[k])
            lab = f"motions[{names[k]!r}]"
            if mo.position is not None:
                p[r + kernel.MC_X:r + kernel.MC_X + 3] = self._vec(mo.position, t, 3,
                                                                   f"{lab}.position")
                p[r + kernel.MC_V:r + kernel.MC_V + 3] = self._vec(mo.velocity, t, 3,
                                                                   f"{lab}.velocity")
                p[r + kernel.MC_A:r + kernel.MC_A + 3] = self._vec(mo.acceleration, t, 3,
                                                                   f"{lab}.acceleration")
            if mo.orientation is not None:
                e = self._vec(mo.orientation, t, 4, f"{lab}.orientation")
                if not np.any(e):
                    raise ModelError(f"`{lab}.orientation(t)` must be a nonzero quaternion, "
                                     f"found {e!r} at t={t}.")
                p[r + kernel.MC_R:r + kernel.MC_R + 9] = quat_matrix(e).reshape(-1)
                p[r + kernel.MC_W:r + kernel.MC_W + 3] = self._vec(
                    mo.angular_velocity, t, 3, f"{lab}.angular_velocity")
                p[r + kernel.MC_AL:r + kernel.MC_AL + 3] = self._vec(
                    mo.angular_acceleration, t, 3, f"{lab}.angular_acceleration")
        self._last = (t, p)
        return p

    def phi(self, t, q):
        out = np.empty(self._model.m)
        kernel.phi(self.params(t), np.ascontiguousarray(q, dtype=float), _NONE, out)
        return out

    def phi_t(self, t, q):
        out = np.empty(self._model.m)
        kernel.phi_t(self.params(t), np.ascontiguousarray(q, dtype=float), _NONE, out)
        return out

    def jacobian(self, t, q):
        q = np.ascontiguousarray(q, dtype=float)
        A = np.empty((self._model.m, self._model.n))
        kernel.rows(self.params(t), q, q, _NONE, A, _NONE, False)
        return A

    def rows(self, t, q, v):
        A = np.empty((self._model.m, self._model.n))
        g = np.empty(self._model.m)
        kernel.rows(self.params(t), np.ascontiguousarray(q, dtype=float),
                    np.ascontiguousarray(v, dtype=float), _NONE, A, g, True)
        return A, g

    def gamma(self, t, q, v):
        return self.rows(t, q, v)[1]


def _moved_system(model: Model, motions: dict, system: Optional[System]) -> System:
    """``model.moved(motions, system)`` (how such a System pickles)."""
    return model.moved(motions, system)


def _controlled_system(model: Model, ctrl) -> System:
    """``model.controlled(ctrl)`` (how such a System pickles)."""
    return model.controlled(ctrl)


class _Stops:
    """The gap functions of :meth:`Model.limits` (picklable: no closures): for ranges of
    ``x = c_i . q`` (the rows ``c_i`` of ``C``: a joint's unit row, a fixed tendon's
    coefficients), the rows ``c_i . q - lower_i`` then ``upper_i - c_i . q`` of each range;
    then those of the spatial tendons' lengths ``L_j(q)`` (``spatial``: their lines in the
    packed model ``p``, lower and upper), ``L_j - lower_j`` and ``upper_j - L_j``, their
    Jacobians ``+-dL/dq`` and convective terms ``-+beta`` (``L'' = (dL/dq) a + beta``) from
    the kernel (:func:`~gaussopt.multibody.tree.tree_compiled.line_state`)."""

    def __init__(self, C: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                 p: Optional[np.ndarray] = None, spatial: Sequence = ()) -> None:
        k, n = C.shape
        self.J = np.zeros((2 * k, n))
        self.J[0::2] = C
        self.J[1::2] = -C
        self.g0 = np.zeros(2 * k)
        self.g0[0::2] = -lower
        self.g0[1::2] = upper
        self.p, self.spatial = p, [(int(ln), float(a), float(b)) for ln, a, b in spatial]

    def _spatial(self, q, v, what: str) -> np.ndarray:
        ks = len(self.spatial)
        q = np.ascontiguousarray(q, dtype=float)
        v = np.ascontiguousarray(q if v is None else v, dtype=float)
        row = np.zeros((1, q.size))
        out = np.zeros((2 * ks, q.size)) if what == "J" else np.zeros(2 * ks)
        for j, (ln, a, b) in enumerate(self.spatial):
            L, _, beta = kernel.line_state(self.p, q, v, ln, row)
            if what == "J":
                out[2 * j], out[2 * j + 1] = row[0], -row[0]
            elif what == "gap":
                out[2 * j], out[2 * j + 1] = L - a, b - L
            else:
                out[2 * j], out[2 * j + 1] = -beta, beta
        return out

    def gap(self, t, q):
        g = self.J @ q + self.g0
        return np.concatenate([g, self._spatial(q, None, "gap")]) if self.spatial else g

    def jacobian(self, t, q):
        if not self.spatial:
            return self.J
        return np.vstack([self.J, self._spatial(q, None, "J")])

    def gamma(self, t, q, v):
        g = np.zeros(self.J.shape[0])
        return np.concatenate([g, self._spatial(q, v, "gamma")]) if self.spatial else g
