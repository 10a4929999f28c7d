"""What the assemblies of every kind of multibody model share: the model's tables in one
place (:class:`BaseAssembly`, which the planar :class:`~gaussopt.multibody.planar.assembly.Assembly`
and the :class:`~gaussopt.multibody.spatial.assembly.SpatialAssembly` extend with their
own data and kernel), and the resolution of body references while elements are checked
(:func:`body_resolver`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from gaussopt.core.exceptions import ModelError

__all__ = ["BaseAssembly", "body_resolver"]


@dataclass
class BaseAssembly:
    """The data every kind's assembly holds, and the evaluations that read them alike.

    A kind sets the class attributes :attr:`kernel` (its compiled kernel module, the
    interface of :mod:`gaussopt.multibody.common.cfuncs`) and :attr:`axes` (the names of
    a body's coordinates) and defines ``driver_values(t, order)``: the values of the
    callable driven angles its kernel takes (``order`` 1 for ``Phi_t``, 2 for ``gamma``),
    ``phi`` and ``jacobian``.

    Attributes
    ----------
    name : str
    bodies, body_names : tuple
    index : dict
        Body name -> body index.
    n, m : int
        Coordinates, equations.
    coordinates : tuple of str
        ``"<body>.<axis>"``, body by body.
    gravity : ndarray
    joints : tuple
    labels, joint_labels : list of str
        One label per equation / per joint.
    joint_rows : list of ndarray of int
        The rows of every joint.
    joint_ends : list of tuple
        The bodies of every joint and what its reaction is taken about (by kind).
    drivers : list of tuple
        The callables of the driven angles with callable angles.
    p : ndarray
        The kernel's parameter array.
    conservative : bool
        No callable forces, dampers or drives: the energy is conserved.
    """

    #: the kind's compiled kernel module
    kernel: ClassVar = None
    #: the names of a body's coordinates
    axes: ClassVar[tuple] = ()

    name: str
    bodies: tuple
    body_names: tuple
    index: dict
    n: int
    m: int
    coordinates: tuple
    gravity: np.ndarray
    joints: tuple
    labels: list
    joint_labels: list
    joint_rows: list
    joint_ends: list
    drivers: list
    p: np.ndarray
    conservative: bool

    @property
    def ground(self) -> int:
        """Index of the ground (the padding body)."""
        return len(self.bodies)

    # (the model's data and their evaluation live here, one home: the Model, the analysis
    # and the consistent states read them)
    def index_of(self, coordinate: str) -> int:
        """Index of a coordinate ``"<body>.<axis>"`` in ``q``."""
        try:
            return self.coordinates.index(coordinate)
        except ValueError:
            names = ", ".join(f"'<body>.{a}'" for a in self.axes)
            raise ModelError(f"unknown coordinate {coordinate!r}; coordinates are {names} for "
                             f"bodies {list(self.body_names)}.") from None

    def phi_t(self, t: float, q: np.ndarray) -> np.ndarray:
        """Explicit time derivative ``Phi_t``, shape (m,) (nonzero on driven rows only)."""
        out = np.empty(self.m)
        self.kernel.phi_t(self.p, np.ascontiguousarray(q, dtype=float),
                          self.driver_values(t, 1), out)
        return out

    def rows(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Acceleration rows ``(Phi_q, gamma)``, shapes (m, n) and (m,), in one pass
        (``gamma = -(Phi_q v)_q v - 2 Phi_qt v - Phi_tt``)."""
        A = np.empty((self.m, self.n))
        b = np.empty(self.m)
        self.kernel.rows(self.p, np.ascontiguousarray(q, dtype=float),
                         np.ascontiguousarray(v, dtype=float), self.driver_values(t, 2), A, b, True)
        return A, b

    def driver_values(self, t, order: int) -> np.ndarray:
        raise NotImplementedError


#: what :func:`body_resolver` adds to the problems by default (``label``, ``name``, ``bodies``)
UNKNOWN_BODY = "{label}: unknown body {name!r} (bodies: {bodies})"
OTHER_BODY = "{label}: Body {name!r} differs from the model's body of that name"


def body_resolver(bodies, index: dict, ref_name: Callable, body_type: type, problems: list,
                  unknown: str = UNKNOWN_BODY, other: str = OTHER_BODY) -> Callable:
    """``idx(ref, label)``: the index of the body referred to by ``ref`` (a body, its name,
    or None / ``"ground"``: the ground, index ``len(bodies)``) among ``bodies`` (named in
    ``index``); a reference that names no body of the model (``unknown``) -- or a
    ``body_type`` that is not the model's body of its name (``other``) -- adds a line to
    ``problems`` and resolves to the ground, so that the checks go on and report every
    problem at once. ``ref_name`` is the kind's reading of a reference (``_ref_name`` of
    its elements)."""
    ground = len(bodies)

    def idx(ref, label: str) -> int:
        try:
            nm = ref_name(ref)
        except ModelError as e:
            problems.append(f"{label}: {e}")
            return ground
        if nm is None:
            return ground
        if nm not in index:
            problems.append(unknown.format(label=label, name=nm, bodies=list(index)))
            return ground
        own = bodies[index[nm]]
        if isinstance(ref, body_type) and ref is not own and ref != own:
            problems.append(other.format(label=label, name=nm, bodies=list(index)))
        return index[nm]

    return idx
