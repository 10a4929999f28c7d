"""Result objects: one step (:class:`StepResult`) and a whole run (:class:`Trajectory`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .exceptions import ModelError

__all__ = ["StepResult", "Trajectory", "RankEvent", "load"]


@dataclass
class StepResult:
    """The solution of one Gauss step.

    Attributes
    ----------
    a : ndarray, shape (n,)
        Accelerations.
    constraint_force : ndarray, shape (n,)
        ``M a - F``: the generalized constraint (reaction) force; unique even when
        the multipliers are not.
    multipliers : ndarray, shape (m,)
        ``lam`` with ``M a = F + A^T lam``; the minimum-norm choice when the
        constraints are redundant.
    gauss : float
        Value of the minimized objective ``0.5 a^T M a - a^T F_obj``
        (``F_obj = F`` for ``objective="exact"``, ``M M^+ F`` for ``"paper"``;
        the paper's ``(M a - F)^T M^+ (M a - F)`` equals twice this plus a
        constant).
    info : dict
        Solver-specific data: ``rank`` (numerical rank of the constraint rows),
        ``residual`` (``max |A a - b|``), ``solver``; QP status, GA generations
        and gap, ...
    """

    a: np.ndarray
    constraint_force: np.ndarray
    multipliers: np.ndarray
    gauss: float
    info: dict = field(default_factory=dict)


@dataclass
class RankEvent:
    """A change of the numerical rank of the constraint rows along a trajectory.

    Attributes
    ----------
    t : float
        Time of the event (refined where the integrator's dense output allows).
    kind : str
        ``"passage"`` (the rank dips at one instant ``t``: a singular position
        crossed), ``"drop"`` or ``"rise"`` (the rank changes and stays).
    rank_before, rank_min, rank_after : int
        Numerical rank of the constraint rows before, at ``t``, and after.
    rows : list of str
        Labels of the rows involved (largest components of the singular vector).
    sigma_min : float
        Smallest live singular value of the rows scaled by their reference
        norms, at ``t`` (``0`` = exactly singular).
    """

    t: float
    kind: str
    rank_before: int
    rank_min: int
    rank_after: int
    rows: list
    sigma_min: float

    def as_dict(self) -> dict:
        return {"t": self.t, "kind": self.kind, "rank_before": self.rank_before,
                "rank_min": self.rank_min, "rank_after": self.rank_after,
                "rows": list(self.rows), "sigma_min": self.sigma_min}


_ARRAYS = ("t", "q", "v", "a", "constraint_force", "multipliers", "position_residual",
           "velocity_residual", "acceleration_residual", "energy", "sigma_min", "rank")


@dataclass
class Trajectory:
    """A simulated motion, sampled at the output times.

    Attributes
    ----------
    t : ndarray, shape (N,)
    q, v, a : ndarray, shape (N, n)
    constraint_force : ndarray, shape (N, n)
        ``M a - F`` at each sample.
    multipliers : ndarray, shape (N, m)
    position_residual : ndarray, shape (N,)
        ``||Phi(t, q)||`` (0-length columns give zeros).
    velocity_residual : ndarray, shape (N,)
        ``||Phi_q v + Phi_t||`` and ``||f(t, q, v)||`` together.
    acceleration_residual : ndarray, shape (N,)
        ``||A a - b||``.
    energy : ndarray, shape (N,) or None
    rank, sigma_min : ndarray, shape (N,)
        Numerical rank of the constraint rows and the smallest normalized
        singular value at each sample.
    rank_events : list of RankEvent
    coordinates : tuple of str
    stats : dict
        ``steps``, ``rhs_evaluations``, ``wall_time``, ``time_per_step``,
        solver-specific data (QP statuses, GA generations and gaps).
    status : int
        0 finished, 1 interrupted by a failure or KeyboardInterrupt.
    message : str
    meta : dict
        Settings of the run (solver, method, tolerances, stabilization).

    All arrays after ``t``, ``q``, ``v`` are recomputed from the model at the
    output times, never collected inside the right-hand side.
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    constraint_force: np.ndarray
    multipliers: np.ndarray
    position_residual: np.ndarray
    velocity_residual: np.ndarray
    acceleration_residual: np.ndarray
    energy: Optional[np.ndarray]
    rank: np.ndarray
    sigma_min: np.ndarray
    coordinates: tuple
    rank_events: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    status: int = 0
    message: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.status == 0

    @property
    def residuals(self) -> dict:
        """``{"position": ..., "velocity": ..., "acceleration": ...}`` residual norms."""
        return {"position": self.position_residual, "velocity": self.velocity_residual,
                "acceleration": self.acceleration_residual}

    @property
    def energy_drift(self) -> Optional[np.ndarray]:
        """``E(t) - E(t0)``, or None."""
        if self.energy is None or self.energy.size == 0:
            return None
        return self.energy - self.energy[0]

    def __getitem__(self, name: str) -> np.ndarray:
        """Coordinate history by name: ``traj["th1"]``."""
        try:
            i = self.coordinates.index(name)
        except ValueError:
            raise KeyError(f"no coordinate {name!r}; coordinates are {self.coordinates}") from None
        return self.q[:, i]

    def __len__(self) -> int:
        return int(self.t.size)

    def __repr__(self) -> str:
        return (f"Trajectory(N={len(self)}, t=[{self.t[0] if len(self) else 'nan'}, "
                f"{self.t[-1] if len(self) else 'nan'}], success={self.success}, "
                f"message={self.message!r})")

    # ------------------------------------------------------------------ I/O
    def save(self, path) -> Path:
        """Write every array, the coordinates, events, stats and metadata to ``.npz``."""
        path = Path(path)
        arrays = {k: np.asarray(getattr(self, k)) for k in _ARRAYS if getattr(self, k) is not None}
        header = {
            "coordinates": list(self.coordinates), "status": self.status, "message": self.message,
            "meta": self.meta, "stats": self.stats,
            "rank_events": [e.as_dict() for e in self.rank_events],
            "has_energy": self.energy is not None, "format": 1,
        }
        np.savez_compressed(path, __header__=np.array(json.dumps(header, default=_jsonable)),
                            **arrays)
        return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def _jsonable(x: Any):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return str(x)


def load(path) -> Trajectory:
    """Read a :class:`Trajectory` written by :meth:`Trajectory.save`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"`path` {str(path)!r} does not exist.")
    with np.load(path, allow_pickle=False) as data:
        if "__header__" not in data:
            raise ModelError(f"{str(path)!r} is not a gaussopt trajectory file (no header).")
        header = json.loads(str(data["__header__"]))
        arrays = {k: data[k] for k in _ARRAYS if k in data}
    if not header.get("has_energy", False):
        arrays["energy"] = None
    events = [RankEvent(**e) for e in header.get("rank_events", [])]
    return Trajectory(coordinates=tuple(header["coordinates"]), rank_events=events,
                      stats=header.get("stats", {}), status=header.get("status", 0),
                      message=header.get("message", ""), meta=header.get("meta", {}), **arrays)
