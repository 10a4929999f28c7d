"""What the models of every kind of multibody model share: the :class:`BaseModel` (the
assembly's data as attributes, the lookups, the joint equations and the energy through
the kind's kernel, the assembled :class:`~gaussopt.System` with its compiled functions),
which the planar :class:`~gaussopt.multibody.Model` and the spatial
:class:`~gaussopt.multibody.spatial.Model` extend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Callable, ClassVar, Optional, Sequence

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.model.constraints import Holonomic
from gaussopt.model.system import System
from gaussopt.multibody.common.cfuncs import H_PYTHON

__all__ = ["BaseModel"]


class _JointConstraint(Holonomic):
    """All joint equations of a model as one :class:`~gaussopt.Holonomic` block, with
    the model's exact Jacobian and ``gamma`` evaluated in one pass."""

    def __init__(self, model: "BaseModel") -> None:
        super().__init__(model.phi, jacobian=model.jacobian, gamma=model.gamma,
                         phi_t=model.phi_t if model.rheonomic else None,
                         rheonomic=model.rheonomic, name="joints")
        self._model = model

    def rows(self, t, q, v):
        return self._model.rows(t, q, v)


class _MultibodySystem(System):
    """A :class:`~gaussopt.System` whose row labels are the joints' row labels."""

    def __init__(self, *args, labels: Sequence[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._labels = list(labels)

    def row_labels(self, t: float = 0.0, q=None, v=None) -> list[str]:
        return list(self._labels)


class BaseModel:
    """Bodies, joints and forces assembled into a :class:`~gaussopt.System`: the part
    every kind shares.

    A kind sets the class attributes :attr:`kernel` (its compiled kernel module, the
    interface of :mod:`gaussopt.multibody.common.cfuncs`), :attr:`assemble_model` (its
    ``assemble_model(bodies, joints, forces, gravity, name)``, which returns a
    :class:`~gaussopt.multibody.common.base_assembly.BaseAssembly`) and :attr:`ref_name`
    (its reading of a body reference), and defines ``_mass_and_force()``: the ``mass``
    and ``force`` of its :class:`~gaussopt.System` (arrays or callables).

    Attributes
    ----------
    name : str
    bodies : tuple
    body_names : tuple of str
    nb, n, m : int
        Numbers of bodies, coordinates and equations.
    ground : int
        Index of the ground (the padding body ``nb``).
    coordinates : tuple of str
    gravity : ndarray
    joints : tuple
    labels, joint_labels : list of str
        One label per equation, ``"Revolute(crank2,coupler)[x]"`` (a second joint of the
        same kind between the same bodies is ``"...#2"``); one per joint.
    rheonomic : bool
        The model has driven angles with callable angles.
    conservative : bool
    """

    #: the kind's compiled kernel module
    kernel: ClassVar = None
    #: the kind's ``assemble_model``
    assemble_model: ClassVar[Callable] = None
    #: the kind's reading of a body reference (a body, its name or None) into its name
    ref_name: ClassVar[Callable] = None

    def __init__(self, bodies: Sequence, joints: Sequence = (), forces: Sequence = (),
                 gravity=None, name: str = "multibody") -> None:
        bodies, joints, forces = (list(x) if isinstance(x, Iterator) else x
                                  for x in (bodies, joints, forces))
        # a Model pickles as the call that built it (its tables are rebuilt on unpickling)
        self._args = (bodies, joints, forces, gravity, name)
        asm = type(self).assemble_model(bodies, joints, forces, gravity, name)
        self._asm = asm
        self._p = asm.p
        self.name = name
        self.bodies = asm.bodies
        self.body_names = asm.body_names
        self.nb = len(asm.bodies)
        self.n = asm.n
        self.m = asm.m
        self.ground = asm.ground
        self.coordinates = asm.coordinates
        self.gravity = asm.gravity
        self.joints = asm.joints
        self.labels = asm.labels
        self.joint_labels = asm.joint_labels
        self.rheonomic = bool(asm.drivers)
        self.conservative = asm.conservative
        self._system: Optional[System] = None

    def __reduce__(self):
        """Pickle as the call that built the model (its elements; the kernel's tables
        and the compiled functions are rebuilt on unpickling)."""
        return (type(self), self._args)

    # ------------------------------------------------------------------ lookups
    def index(self, coordinate: str) -> int:
        """Index of a coordinate ``"<body>.<axis>"`` in ``q``."""
        return self._asm.index_of(coordinate)

    def body_slice(self, body) -> slice:
        """Slice of ``q`` holding the coordinates of ``body``."""
        nm = type(self).ref_name(body)
        if nm not in self._asm.index:
            raise ModelError(f"`body` must be one of {list(self.body_names)}, found {body!r}.")
        c = self.kernel.COORDINATES
        k = self._asm.index[nm]
        return slice(c * k, c * k + c)

    # ------------------------------------------------------------------ the joints
    def phi(self, t: float, q: np.ndarray) -> np.ndarray:
        """Joint equations ``Phi(t, q)``, shape (m,) (complex-safe in ``t`` and ``q`` for the
        planar kernel, compiled for ``complex128`` too: the complex step)."""
        return self._asm.phi(t, q)

    def phi_t(self, t: float, q: np.ndarray) -> np.ndarray:
        """Explicit time derivative ``Phi_t``, shape (m,) (nonzero on driven rows only)."""
        return self._asm.phi_t(t, q)

    def jacobian(self, t: float, q: np.ndarray) -> np.ndarray:
        """Exact ``Phi_q``, shape (m, n)."""
        return self._asm.jacobian(t, q)

    def gamma(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Exact ``gamma = -(Phi_q v)_q v - 2 Phi_qt v - Phi_tt``, shape (m,)."""
        return self._asm.rows(t, q, v)[1]

    def rows(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Acceleration rows ``(Phi_q, gamma)``, shapes (m, n) and (m,), in one pass."""
        return self._asm.rows(t, q, v)

    # ------------------------------------------------------------------ energy, system
    def energy(self, t: float, q: np.ndarray, v: np.ndarray) -> float:
        """Kinetic energy plus the potentials of gravity, springs and the constant
        forces and torques [J]; conserved when :attr:`conservative`."""
        return float(self.kernel.energy(self._p, np.ascontiguousarray(q, dtype=float),
                                        np.ascontiguousarray(v, dtype=float)))

    @property
    def gruebler(self) -> int:
        """Gruebler's (Kutzbach's) count, coordinates minus equations ``n - m``: ``3 nb -
        joint equations`` planar, ``6 nb - joint equations`` spatial (``n = 7 nb`` with ``nb``
        normalizations)."""
        return self.n - self.m

    @property
    def system(self) -> System:
        """The assembled :class:`~gaussopt.System` (built once, then cached): the kind's
        mass and force, one :class:`~gaussopt.Holonomic` block ``"joints"`` with the exact
        ``Phi_q`` and ``gamma``, the energy, and the kind's compiled functions unless the
        model has Python callables."""
        if self._system is None:
            mass, force = self._mass_and_force()
            sysm = self._assemble_system(mass, force, self._p, self.name)
            self._system = sysm.rebuilt_by(_system_of_model, self)   # pickles as the model
        return self._system

    def _assemble_system(self, mass, force, p: Optional[np.ndarray], name: str) -> System:
        """A :class:`~gaussopt.System` of the model with these ``mass`` and ``force`` (the
        joints' block, the energy, the row labels as :attr:`system`'s) and, when ``p`` is a
        parameter array without Python callables, the kind's compiled functions on ``p``."""
        cons = [_JointConstraint(self)] if self.m else []
        sysm = _MultibodySystem(self.coordinates, mass=mass, force=force, constraints=cons,
                                energy=self.energy, name=name, labels=self.labels)
        if p is not None and p[H_PYTHON] == 0.0:
            sysm.compiled = self.kernel.compiled_factory(p, sysm)
            sysm.sparse = self.kernel.sparse_model(p)
            recursive = getattr(self.kernel, "recursive_model", None)   # (the tree kind's)
            if recursive is not None:
                sysm.recursive = recursive(p)
        mass_tree = getattr(self.kernel, "mass_tree", None)       # (the tree kind's)
        if mass_tree is not None:
            sysm.mass_tree = mass_tree(self._p)
        return sysm

    def _mass_and_force(self) -> tuple:
        raise NotImplementedError


def _system_of_model(model: BaseModel) -> System:
    """``model.system`` (how a multibody System pickles)."""
    return model.system
