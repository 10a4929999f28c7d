"""Result objects: one step (:class:`StepResult`) and a whole run (:class:`Trajectory`)."""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gaussopt.core.exceptions import ModelError, TrajectoryFileError

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


class LazyStepResult(StepResult):
    """A :class:`StepResult` whose ``info`` dict is built on first access, from
    ``make_info(*args)`` (the compiled step: most callers never read it). In every
    other respect a ``StepResult`` (also to :func:`dataclasses.replace`, which passes the
    fields, ``info`` among them, by name)."""

    def __init__(self, a, constraint_force, multipliers, gauss, make_info=None, args=None,
                 info=None):
        self.a = a
        self.constraint_force = constraint_force
        self.multipliers = multipliers
        self.gauss = gauss
        self._make_info = make_info
        self._info_args = args
        self._info = info

    @property
    def info(self) -> dict:
        d = self._info
        if d is None:
            d = self._info = self._make_info(*self._info_args)
            self._info_args = None
        return d

    @info.setter
    def info(self, value: dict) -> None:
        self._info = value

    def __repr__(self) -> str:
        return "StepResult" + StepResult.__repr__(self)[len(type(self).__qualname__):]

    def __reduce__(self):
        # pickles and copies as the plain StepResult it stands for
        return (StepResult, (self.a, self.constraint_force, self.multipliers, self.gauss,
                             self.info))


class _FromOutput:
    """An attribute of :class:`DirectStepResult` read from its output copy on first access
    and kept in the instance (a non-data descriptor: later reads, and assignments, go to
    the instance's dict as for a plain attribute)."""

    __slots__ = ("name", "k")

    def __init__(self, k: int) -> None:
        self.k = k
        self.name = ""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        where = obj._where[self.k]
        val = obj._o[where] if type(where) is slice else obj._o.item(where)
        obj.__dict__[self.name] = val
        return val


class DirectStepResult(LazyStepResult):
    """The :class:`StepResult` of a step called from Python through the compiled step
    (:meth:`gaussopt.gauss.solvers.StepSolver.solve_checked`): ``a`` is set, while
    ``constraint_force``, ``multipliers`` and ``gauss`` are views of (or a value in) the
    step's output copy ``o``, taken when first read, and ``info`` is built on first
    access. What a call from Python costs beyond the compiled step is this object: most
    callers read ``a`` alone (``benchmarks/stepper.py``). In every other respect a
    ``StepResult``."""

    constraint_force = _FromOutput(0)
    multipliers = _FromOutput(1)
    gauss = _FromOutput(2)

    #: (the instance's own once ``info`` is built; its other attributes, set where the
    #: result is made, :meth:`gaussopt.gauss.solvers.StepSolver._make_direct`: ``a``, the
    #: output copy ``_o``, ``_where`` = (slice of ``M a - F``, slice of the multipliers,
    #: index of the Gauss value), ``_make_info`` and its ``_info_args``)
    _info = None


@dataclass(slots=True)     # (slots: a long run holds millions of them)
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


@dataclass
class Impact:
    """One impact: time, points that received an impulse, impulses, energies, accumulation.

    Attributes
    ----------
    t : float
    points : list of str
        Labels ``"<contact name>[row]"`` (or ``[<point name>]``, ``Contact(point_names=
        ...)``) of the points with a nonzero normal impulse.
    impulses : ndarray, shape (k,)
        Normal impulse of every contact point (0 for those not involved).
    tangential_impulses : ndarray, shape (k,)
        Tangential (friction) impulses along each point's slip gradient; shape (k, 2)
        with spatial contacts (``Contact(slip_velocity=...)``), along its two tangents.
    gap_rate_before, gap_rate_after : ndarray, shape (k,)
    kinetic_before, kinetic_after : float
        ``1/2 v^T M v`` before and after.
    accumulation : bool
        The impact ended an accumulation of impacts (Zeno): the rebound was below
        the run's resolution and the points were closed (see :mod:`gaussopt.integrate.contact_run`).
    t_accumulation : float
        With ``accumulation``: the extrapolated accumulation time (the sum of the
        remaining flight times of the geometric series), else ``nan``.
    """

    t: float
    points: list
    impulses: np.ndarray
    tangential_impulses: np.ndarray
    gap_rate_before: np.ndarray
    gap_rate_after: np.ndarray
    kinetic_before: float
    kinetic_after: float
    accumulation: bool = False
    t_accumulation: float = math.nan

    @classmethod
    def from_dict(cls, d: dict) -> "Impact":
        """The record :meth:`as_dict` wrote (as :func:`gaussopt.load` reads it)."""
        arr = ("impulses", "tangential_impulses", "gap_rate_before", "gap_rate_after")
        return cls(**{k: (np.asarray(d[k], dtype=float) if k in arr else d[k])
                      for k in ("t", "points", *arr, "kinetic_before", "kinetic_after",
                                "accumulation", "t_accumulation")})

    def as_dict(self) -> dict:
        return {"t": self.t, "points": list(self.points), "impulses": self.impulses.tolist(),
                "tangential_impulses": self.tangential_impulses.tolist(),
                "gap_rate_before": self.gap_rate_before.tolist(),
                "gap_rate_after": self.gap_rate_after.tolist(),
                "kinetic_before": self.kinetic_before, "kinetic_after": self.kinetic_after,
                "accumulation": self.accumulation, "t_accumulation": self.t_accumulation}


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
        ``steps``, ``rhs_evaluations``, ``wall_time`` (seconds of everything
        :func:`~gaussopt.simulate` did, output samples included, compilation and
        loading compiled code excluded), ``integration_time`` (the part before the
        output samples), ``time_per_step`` (``integration_time / steps``),
        ``compile_time`` (compiling and loading compiled code, before and during the
        run), solver-specific data (QP statuses, GA generations and gaps).
    status : int
        solve_ivp's codes: 0 the end of the span was reached, 1 a terminal event
        stopped the run (a success), -1 a failure or KeyboardInterrupt.
    message : str
    meta : dict
        Settings of the run (solver, method, tolerances, stabilization).
    least_squares_steps : list of dict
        Steps where the constraint rows were inconsistent by more than
        ``sqrt(rank_tol)`` but by no more than rounding explains near a singular
        configuration, so the least-squares step was taken: ``{"t", "size"
        (relative inconsistency), "rows" (labels of the rows involved)}``.
    exception : BaseException or None
        The exception that ended a failed run (the model's own, or gaussopt's),
        kept for inspection; not saved (its type and message are in ``message``).
    t_events : list of ndarray, shape (k_i,), or None
        With ``simulate(..., events=...)``: per event function, the times of
        its zeros (None without events).
    q_events, v_events : list of ndarray, shape (k_i, n), or None
        The states at those times.
    sol : callable or None
        With ``simulate(..., dense_output=True)``: ``sol(t) -> (q, v)``, the
        projected dense solution (:class:`gaussopt.integrate.dense_output.DenseSolution`). Not
        saved: a loaded trajectory has ``sol = None``.
    impacts : list of Impact
        A system with :class:`~gaussopt.Contact` constraints: every impact (time,
        points, impulses, kinetic energy before and after).
    contact_forces : ndarray, shape (N, k), or None
        The normal force of every contact point at each sample (0 while open).
    friction_forces : ndarray, shape (N, k), or None
        The tangential force of every contact point along its slip gradient (sticking:
        the no-slip row's multiplier; sliding: ``-mu N sign(slip rate)``; else 0). With
        spatial contacts (``Contact(slip_velocity=...)``) shape (N, k, 2), along the two
        tangents (sliding: ``-mu N u/|u|``).

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
    least_squares_steps: list = field(default_factory=list)
    exception: Optional[BaseException] = field(default=None, compare=False, repr=False)
    t_events: Optional[list] = field(default=None, compare=False, repr=False)
    q_events: Optional[list] = field(default=None, compare=False, repr=False)
    v_events: Optional[list] = field(default=None, compare=False, repr=False)
    sol: Optional[Any] = field(default=None, compare=False, repr=False)
    impacts: list = field(default_factory=list, compare=False, repr=False)
    contact_forces: Optional[np.ndarray] = field(default=None, compare=False, repr=False)
    friction_forces: Optional[np.ndarray] = field(default=None, compare=False, repr=False)

    @property
    def success(self) -> bool:
        """True if the run reached the end of its span or a terminal event (``status >= 0``)."""
        return self.status >= 0

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

    # ------------------------------------------------------------------ tables
    def columns(self) -> dict:
        """Every sampled quantity as one named column of length ``N`` (a dict, in order).

        Names: ``t``; ``q.<c>``, ``v.<c>``, ``a.<c>``, ``Qc.<c>`` (the constraint force
        ``M a - F``) for each coordinate ``c``; ``lam.<i>`` for each multiplier;
        ``position_residual``, ``velocity_residual``, ``acceleration_residual``,
        ``energy`` (when the system has one), ``rank``, ``sigma_min``; for a run with
        contacts ``N.<point>`` and ``T.<point>``, the normal and the friction force of
        each contact point (see :attr:`friction_forces` for its sign).
        """
        cols = {"t": self.t}
        for key, arr in (("q", self.q), ("v", self.v), ("a", self.a),
                         ("Qc", self.constraint_force)):
            for j, c in enumerate(self.coordinates):
                cols[f"{key}.{c}"] = arr[:, j]
        lam = self.multipliers
        for i in range(lam.shape[1] if lam.ndim == 2 else 0):
            cols[f"lam.{i}"] = lam[:, i]
        cols["position_residual"] = self.position_residual
        cols["velocity_residual"] = self.velocity_residual
        cols["acceleration_residual"] = self.acceleration_residual
        if self.energy is not None and self.energy.size:
            cols["energy"] = self.energy
        cols["rank"] = self.rank
        cols["sigma_min"] = self.sigma_min
        points = list(self.meta.get("contact_points", []))
        for key, arr in (("N", self.contact_forces), ("T", self.friction_forces)):
            if arr is not None:
                for i in range(arr.shape[1]):
                    name = f"{key}.{points[i] if i < len(points) else i}"
                    if arr.ndim == 3:               # spatial friction: two tangents
                        for j in range(arr.shape[2]):
                            cols[f"{name}.{j + 1}"] = arr[:, i, j]
                    else:
                        cols[name] = arr[:, i]
        return cols

    def to_dataframe(self):
        """The samples as a :class:`pandas.DataFrame`, one row per output time, the
        columns of :meth:`columns` (``t`` among them, and the index).

        pandas is optional: without it this raises ``ImportError`` saying so
        (:meth:`to_csv` and :meth:`save` need no pandas).

        Examples
        --------
        >>> import numpy as np, gaussopt as go
        >>> pend = go.System(("x", "y"), mass=np.eye(2), force=[0.0, -9.81],
        ...     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
        >>> tr = go.simulate(pend, (0.0, 0.5), [1.0, 0.0], [0.0, 0.0],
        ...                  t_eval=np.linspace(0.0, 0.5, 6))
        >>> df = tr.to_dataframe()                    # doctest: +SKIP
        >>> list(df.columns[:4])                      # doctest: +SKIP
        ['t', 'q.x', 'q.y', 'v.x']
        """
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Trajectory.to_dataframe needs pandas (python3 -m pip install "
                              "pandas); Trajectory.to_csv and Trajectory.save do not.") from e
        df = pd.DataFrame(self.columns())
        df.index = pd.Index(self.t, name="t")
        return df

    def to_csv(self, path) -> Path:
        """Write the columns of :meth:`columns` to a CSV file (a header row, then one row
        per sample, full precision: ``repr`` of each float); pandas is not needed.

        Parameters
        ----------
        path : str or path-like

        Returns
        -------
        Path
            The file written (atomically, as :meth:`save`).
        """
        import csv
        import io

        cols = self.columns()
        names = list(cols)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        data = np.column_stack([np.asarray(cols[k], dtype=float) for k in names]) \
            if len(self) else np.zeros((0, len(names)))
        for row in data:
            w.writerow([repr(float(x)) for x in row])
        path = Path(path)
        text = buf.getvalue().encode()
        _write_atomic(path, lambda fh: fh.write(text))
        return path

    # ------------------------------------------------------------------ I/O
    def save(self, path) -> Path:
        """Write every array, the coordinates, events, stats and metadata to ``.npz``.

        The events of ``simulate(..., events=...)`` (``t_events``, ``q_events``,
        ``v_events``) are written; the dense solution ``sol`` is not.

        The file is written atomically: the data go to a temporary file in the
        destination directory, which is flushed to disk and then renamed onto
        ``path``. An interruption (an exception, ``KeyboardInterrupt``) leaves
        an existing file at ``path`` untouched and no temporary file behind.

        Parameters
        ----------
        path : str or path-like
            Destination; ``".npz"`` is appended when the name does not end with
            it (as :func:`numpy.savez` does).

        Returns
        -------
        Path
            The path written, with its ``.npz`` suffix.

        Examples
        --------
        >>> p = traj.save("run")              # doctest: +SKIP
        >>> p.name                            # doctest: +SKIP
        'run.npz'
        """
        final = _npz_path(path)
        arrays = {k: np.asarray(getattr(self, k)) for k in _ARRAYS if getattr(self, k) is not None}
        n_events = None
        if self.t_events is not None:
            n_events = len(self.t_events)
            for i in range(n_events):
                for key, x in zip(_EVENT_KEYS, (self.t_events, self.q_events, self.v_events)):
                    arrays[f"{key}_{i}"] = np.asarray(x[i], dtype=float)
        for key in _CONTACT_ARRAYS:                 # a run with contacts (gaussopt.integrate.contact_run)
            if getattr(self, key) is not None:
                arrays[key] = np.asarray(getattr(self, key), dtype=float)
        header = {
            "coordinates": list(self.coordinates), "status": self.status, "message": self.message,
            "meta": self.meta, "stats": self.stats,
            "rank_events": [e.as_dict() for e in self.rank_events],
            "least_squares_steps": list(self.least_squares_steps),
            "has_energy": self.energy is not None, "format": _FORMAT,
            "status_codes": "solve_ivp", "n_events": n_events,
            "impacts": [im.as_dict() for im in self.impacts],
        }
        # encode before touching the file system: an unencodable header leaves no trace
        header_json = np.array(json.dumps(header, default=_jsonable))
        _write_atomic(final, lambda fh: np.savez_compressed(fh, __header__=header_json, **arrays))
        return final


#: Version of the ``.npz`` layout written by :meth:`Trajectory.save`.
_FORMAT = 1
#: Versions :func:`load` reads.
_READABLE_FORMATS = (1,)


def _npz_path(path) -> Path:
    """``path`` with ``".npz"`` appended unless its name already ends with it (numpy's rule)."""
    path = Path(path)
    return path if path.name.endswith(".npz") else path.with_name(path.name + ".npz")


def _write_atomic(final: Path, write) -> None:
    """Call ``write(fh)`` on a temporary file next to ``final``, fsync it, rename it onto ``final``.

    On any exception (``KeyboardInterrupt`` included) the temporary file is
    removed and the exception re-raised; ``final`` is then unchanged.
    """
    directory = final.parent
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    tmp = None
    try:
        while True:
            candidate = directory / f".{final.name}.{secrets.token_hex(6)}.tmp"
            try:
                # mode 0o666 filtered by the umask: the same permissions as a direct write
                fd = os.open(candidate, flags, 0o666)
            except FileExistsError:                # pragma: no cover - 48 random bits collide
                continue
            except OSError as e:                   # name the file asked for, not the temporary
                e.filename = str(final)
                raise
            tmp = candidate
            break
        with os.fdopen(fd, "wb") as fh:
            try:                                   # an overwritten file keeps its permissions
                os.chmod(tmp, stat.S_IMODE(os.stat(final).st_mode))
            except OSError:
                pass
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable where the platform allows it (POSIX)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:                                # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    except OSError:                                # pragma: no cover - some file systems
        pass
    finally:
        os.close(fd)


def _jsonable(x: Any):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return str(x)


#: Prefixes of the event arrays ``t_events_0``, ``q_events_0``, ... (``n_events`` in the header).
_EVENT_KEYS = ("t_events", "q_events", "v_events")
#: Arrays of shape (N, n), n = len(coordinates).
_STATE_ARRAYS = ("q", "v", "a", "constraint_force")
#: the per-point forces of a run with contacts, shape (N, k) (optional)
_CONTACT_ARRAYS = ("contact_forces", "friction_forces")
#: Arrays of shape (N,).
_SAMPLE_ARRAYS = ("position_residual", "velocity_residual", "acceleration_residual",
                  "sigma_min", "rank", "energy")
#: Arrays every file must hold (``energy`` is required only when ``has_energy``).
_REQUIRED_ARRAYS = tuple(k for k in _ARRAYS if k != "energy")
_RANK_EVENT_TYPES = {"t": "number", "kind": "str", "rank_before": "int", "rank_min": "int",
                     "rank_after": "int", "rows": "list of str", "sigma_min": "number"}


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _has_type(x, kind: str) -> bool:
    if kind == "int":
        return _is_int(x)
    if kind == "number":
        return _is_number(x)
    if kind == "str":
        return isinstance(x, str)
    if kind == "list of str":
        return isinstance(x, list) and all(isinstance(s, str) for s in x)
    raise AssertionError(kind)  # pragma: no cover


def _found(x) -> str:
    """``value (type)`` for an error message, shortened."""
    r = repr(x)
    if len(r) > 60:
        r = r[:57] + "..."
    return f"{r} ({type(x).__name__})"


#: What numpy, zipfile and zlib raise on a damaged or foreign file (zipfile raises
#: NotImplementedError for an unknown compression method, RuntimeError for an
#: encrypted entry, struct.error for a short header record).
_DAMAGE_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error,
                  struct.error, NotImplementedError, RuntimeError)


class _Entry:
    """What the ``.npy`` header of an archive entry declares, read before its data: the
    attributes of an array that the checks look at (``dtype``, ``shape``, ``ndim``,
    ``size``), and the entry's sizes in the archive."""

    __slots__ = ("name", "member", "dtype", "shape", "ndim", "size", "nbytes")

    def __init__(self, name: str, member: str, dtype: np.dtype, shape: tuple, nbytes: int):
        self.name, self.member, self.dtype, self.shape = name, member, dtype, shape
        self.ndim = len(shape)
        self.size = int(np.prod(shape, dtype=object)) if shape else 1
        self.nbytes = nbytes


#: an archive whose entries expand to more than this many times its size on disk (and
#: more than :data:`_EXPANSION_FLOOR`) is refused unless ``max_memory`` allows it: real
#: trajectories (increasing times, moving states) compress a few times; deflate's limit
#: is about 1032 (a zip bomb)
_MAX_EXPANSION = 100
_EXPANSION_FLOOR = 2**28


def _fail(name: str, message: str, path: Path, field: Optional[str] = None):
    raise TrajectoryFileError(f"{name}: {message}", str(path), field)


def _scan_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, key: str, name: str,
                path: Path) -> _Entry:
    """The declared dtype and shape of one ``.npy`` entry, checked against the entry's
    stored size (a shape the data cannot fill is refused before anything is allocated)."""
    from numpy.lib import format as npf

    with zf.open(info) as fh:
        version = npf.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npf.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = npf.read_array_header_2_0(fh)
        else:
            shape, fortran, dtype = npf._read_array_header(fh, version)
        offset = fh.tell()
    if dtype.hasobject:
        _fail(name, f"entry `{key}` holds Python objects (dtype {dtype}); a trajectory file "
                    "holds numbers only (the file was not written by Trajectory.save).", path, key)
    size = 1
    for d in shape:
        size *= int(d)
    nbytes = size * dtype.itemsize
    if offset + nbytes != info.file_size:
        _fail(name, f"the file is damaged: entry `{key}` declares shape {tuple(shape)} of "
                    f"{dtype} ({nbytes} bytes) but the archive stores {info.file_size - offset} "
                    "bytes of data for it.", path, key)
    return _Entry(key, info.filename, dtype, tuple(int(d) for d in shape), nbytes)


def _read_npz(path: Path, name: str, max_memory: Optional[float] = None) -> tuple[dict, dict]:
    """The JSON header and the arrays of a trajectory file; TrajectoryFileError if it is
    not one. Every entry's declared dtype and shape is checked against its stored size,
    the header and the other entries before any array is read (:func:`load`)."""
    not_ours = f"{name} is not a gaussopt trajectory file"
    os_errors = (FileNotFoundError, PermissionError, IsADirectoryError)
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
        zf = zipfile.ZipFile(path)
    except os_errors:
        raise
    except _DAMAGE_ERRORS as e:
        if magic == b"\x93NUMPY":
            _fail(not_ours, "it holds a single .npy array, not an .npz archive written by "
                            "Trajectory.save.", path)
        raise TrajectoryFileError(f"{not_ours}: it cannot be opened as an .npz archive "
                                  f"({type(e).__name__}: {e}).", str(path)) from e
    with zf:
        infos = {}
        for info in zf.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            infos.setdefault(key, info)
        if "__header__" not in infos:
            raise TrajectoryFileError(f"{not_ours}: no `__header__` entry (found arrays "
                                      f"{sorted(infos)[:12]}).", str(path), "__header__")
        events = tuple(k for k in infos if k.split("_")[0] in ("t", "q", "v")
                       and k.rsplit("_", 1)[0] in _EVENT_KEYS)
        wanted = [k for k in ("__header__",) + _ARRAYS + _CONTACT_ARRAYS + events if k in infos]
        entries = {}
        try:
            for key in wanted:
                info = infos[key]
                if info.flag_bits & 0x1:
                    _fail(name, f"entry `{key}` is encrypted.", path, key)
                entries[key] = _scan_entry(zf, info, key, name, path)
        except os_errors:
            raise
        except TrajectoryFileError:
            raise
        except _DAMAGE_ERRORS as e:
            raise TrajectoryFileError(f"{name}: the file is damaged: entry `{key}` cannot be "
                                      f"read ({type(e).__name__}: {e}).", str(path), key) from e
        hdr = entries["__header__"]
        if hdr.ndim != 0 or hdr.dtype.kind != "U":
            raise TrajectoryFileError(
                f"{not_ours}: `__header__` must be a JSON string, found an array of dtype "
                f"{hdr.dtype} and shape {hdr.shape}.", str(path), "__header__")
        # what reading would allocate, against the file's size: a zip bomb is refused here
        total = sum(e.nbytes for e in entries.values())
        on_disk = max(path.stat().st_size, 1)
        limit = max_memory if max_memory is not None else max(_EXPANSION_FLOOR,
                                                               _MAX_EXPANSION * on_disk)
        if total > limit:
            big = max(entries.values(), key=lambda e: e.nbytes)
            _fail(name, f"its entries would expand to {total / 1e6:.4g} MB from a file of "
                        f"{on_disk / 1e6:.4g} MB (the largest, `{big.name}`, shape {big.shape}"
                        f" of {big.dtype}), more than "
                        + (f"max_memory={limit:.4g} bytes" if max_memory is not None else
                           f"{_MAX_EXPANSION} times the file's size")
                        + "; trajectory files do not compress that much (a forged or damaged "
                          "file). Pass a larger `max_memory` to read it anyway.", path, big.name)
        try:
            raw = _read_entry(zf, infos["__header__"])
        except _DAMAGE_ERRORS as e:
            raise TrajectoryFileError(f"{name}: the file is damaged: entry `__header__` cannot "
                                      f"be read ({type(e).__name__}: {e}).", str(path),
                                      "__header__") from e
        try:
            header = json.loads(str(raw))
        except ValueError as e:
            raise TrajectoryFileError(f"{not_ours}: `__header__` is not valid JSON ({e}).",
                                      str(path), "__header__") from e
        if not isinstance(header, dict):
            raise TrajectoryFileError(f"{not_ours}: `__header__` must be a JSON object, found "
                                      f"{type(header).__name__}.", str(path), "__header__")
        entries.pop("__header__")
        return header, _Archive(zf.filename, infos, entries, name, path)


def _read_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    from numpy.lib import format as npf

    with zf.open(info) as fh:
        return npf.read_array(fh, allow_pickle=False)


class _Archive(dict):
    """The entries of a trajectory file, as declared (:class:`_Entry`), until
    :meth:`read` reads them (after the checks)."""

    def __init__(self, filename, infos, entries, name, path):
        super().__init__(entries)
        self.filename, self.infos, self.name, self.path = filename, infos, name, path

    def read(self) -> dict:
        out = {}
        with zipfile.ZipFile(self.filename) as zf:
            for key in self:
                try:
                    out[key] = _read_entry(zf, self.infos[key])
                except (FileNotFoundError, PermissionError, IsADirectoryError):
                    raise
                except _DAMAGE_ERRORS as e:
                    raise TrajectoryFileError(
                        f"{self.name}: the file is damaged: entry `{key}` cannot be read "
                        f"({type(e).__name__}: {e}).", str(self.path), key) from e
        return out


def _contact_points(header: dict) -> list:
    """The contact points a file's meta names (a run with contacts), else ``[]``."""
    meta = header.get("meta")
    points = meta.get("contact_points") if isinstance(meta, dict) else None
    return points if isinstance(points, list) else []


def _transition_times(header: dict) -> set:
    """The times of the contact transitions a file's meta records (closings, openings,
    stick/slip changes of a run with contacts: ``[t, point, kind]`` each)."""
    meta = header.get("meta")
    rows = meta.get("contact_transitions") if isinstance(meta, dict) else None
    return {float(r[0]) for r in rows} if isinstance(rows, list) else set()


def _check_contact_meta(header: dict) -> list[str]:
    """Problems of the contact meta of a run with contacts (:func:`_contact_points`)."""
    meta = header.get("meta")
    if not isinstance(meta, dict):
        return []
    problems = []
    points = meta.get("contact_points")
    if points is not None and not (isinstance(points, list) and points
                                   and all(isinstance(p, str) for p in points)):
        problems.append(f"header `meta.contact_points` must be a non-empty list of str, found "
                        f"{_found(points)}")
    rows = meta.get("contact_transitions")
    if rows is not None:
        ok = isinstance(rows, list) and all(
            isinstance(r, list) and len(r) == 3 and _is_number(r[0])
            and math.isfinite(float(r[0])) and isinstance(r[1], str) and isinstance(r[2], str)
            for r in rows)
        if not ok:
            problems.append("header `meta.contact_transitions` must be a list of [t, point, "
                            f"kind] (a finite number, two str), found {_found(rows)}")
        elif points is None:
            problems.append("header `meta.contact_transitions` without `meta.contact_points`")
    return problems


def _check_header(header: dict) -> list[str]:
    """Problems of the header fields (format checked before)."""
    problems = _check_contact_meta(header)
    coords = header.get("coordinates")
    if not (isinstance(coords, list) and all(isinstance(c, str) for c in coords)):
        problems.append(f"header `coordinates` must be a list of str, found {_found(coords)}")
    for key, kind, default in (("status", "int", 0), ("message", "str", ""),
                               ("meta", "dict", {}), ("stats", "dict", {}),
                               ("has_energy", "bool", False), ("rank_events", "list", [])):
        x = header.get(key, default)
        ok = {"int": _is_int(x), "str": isinstance(x, str), "dict": isinstance(x, dict),
              "bool": isinstance(x, bool), "list": isinstance(x, list)}[kind]
        if not ok:
            problems.append(f"header `{key}` must be {'a' if kind != 'int' else 'an'} {kind}, "
                            f"found {_found(x)}")
    events = header.get("rank_events", [])
    if isinstance(events, list):
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                problems.append(f"header `rank_events[{i}]` must be a dict with the fields "
                                f"{list(_RANK_EVENT_TYPES)}, found {_found(e)}")
                continue
            missing = [k for k in _RANK_EVENT_TYPES if k not in e]
            if missing:
                problems.append(f"header `rank_events[{i}]` lacks the field(s) {missing}")
            bad = [f"`{k}` must be {kind}, found {_found(e[k])}"
                   for k, kind in _RANK_EVENT_TYPES.items() if k in e and not _has_type(e[k], kind)]
            if bad:
                problems.append(f"header `rank_events[{i}]`: " + ", ".join(bad))
    return problems


def _check_arrays(arrays: dict, header: dict) -> list[str]:
    """Problems of the arrays: presence, dtype, shape against ``t`` and the coordinates."""
    problems = []
    has_energy = header.get("has_energy", False) is True
    required = _REQUIRED_ARRAYS + (("energy",) if has_energy else ())
    missing = [k for k in required if k not in arrays]
    if missing:
        problems.append("missing array(s) " + ", ".join(f"`{k}`" for k in missing))
    for k, x in arrays.items():
        if k == "energy" and not has_energy:       # ignored, as load drops it
            continue
        kinds, what = ("iu", "integer") if k == "rank" else ("fiu", "real numeric")
        if x.dtype.kind not in kinds:
            problems.append(f"array `{k}` must be {what}, found dtype {x.dtype}")
        elif k != "rank" and not (x.dtype.kind == "f" and x.dtype.itemsize == 8):
            problems.append(f"array `{k}` must be float64 (as Trajectory.save writes it), "
                            f"found dtype {x.dtype}")
    t = arrays.get("t")
    if t is None:
        return problems
    if t.ndim != 1:
        problems.append(f"array `t` must be 1-D, found shape {t.shape}")
        return problems
    N = t.size
    coords = header.get("coordinates")
    n = len(coords) if isinstance(coords, list) else None
    for k in _STATE_ARRAYS:
        x = arrays.get(k)
        if x is None:
            continue
        if x.ndim != 2:
            problems.append(f"array `{k}` must have shape (N, n) = ({N}, {n}), found {x.shape}")
        elif x.shape[0] != N:
            problems.append(f"array `{k}` has shape {x.shape} but `t` has {N} samples")
        elif n is not None and x.shape[1] != n:
            problems.append(f"array `{k}` has shape {x.shape} but there are {n} coordinates "
                            f"{coords}")
    points = _contact_points(header)
    for k in _CONTACT_ARRAYS:
        x = arrays.get(k)
        if x is None:
            if points:
                # a run with contacts (its meta names the contact points) writes both
                problems.append(f"missing array `{k}`: the file is a run with contacts (meta "
                                f"`contact_points` = {points}), which Trajectory.save writes "
                                "with its per-point forces")
        elif (x.ndim != 2 and not (k == "friction_forces" and x.ndim == 3 and x.shape[2] == 2)
              or x.shape[0] != N):
            problems.append(f"array `{k}` must have shape (N, k) with N = {N} samples (friction "
                            f"forces of points in space: (N, k, 2)), found {x.shape}")
        elif points and x.shape[1] != len(points):
            problems.append(f"array `{k}` has shape {x.shape} but there are {len(points)} "
                            f"contact points {points} (expected ({N}, {len(points)}))")
    lam = arrays.get("multipliers")
    if lam is not None:
        if lam.ndim != 2:
            problems.append(f"array `multipliers` must have shape (N, m) with N = {N}, "
                            f"found {lam.shape}")
        elif lam.shape[0] != N:
            problems.append(f"array `multipliers` has shape {lam.shape} but `t` has {N} samples")
    for k in _SAMPLE_ARRAYS:
        x = arrays.get(k)
        if x is None or (k == "energy" and not has_energy):
            continue
        if x.shape != (N,):
            problems.append(f"array `{k}` has shape {x.shape} but `t` has {N} samples "
                            f"(expected ({N},))")
    return problems


def load(path, *, max_memory: Optional[float] = None) -> Trajectory:
    """Read a :class:`Trajectory` written by :meth:`Trajectory.save`.

    Every entry's stored dtype and shape are checked against the header, the other
    entries and the entry's size in the archive before any array is read, so a damaged
    or forged file is refused before it can allocate (a zip bomb, a claimed shape of
    ``(10**12, 3)``); then the values: times finite and increasing, states finite.

    Parameters
    ----------
    path : str or path-like
        An ``.npz`` file written by :meth:`Trajectory.save`.
    max_memory : float, optional
        Bytes the file's arrays may take once read. Default: 100 times the file's size
        (at least 256 MiB); real trajectories compress a few times.

    Returns
    -------
    Trajectory

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    TrajectoryFileError
        (a :class:`ModelError`, so a ``ValueError``) The file is not a gaussopt
        trajectory (not an ``.npz`` archive, no or broken header), is damaged, has an
        unsupported format version, its entries have the wrong dtype (``float64``; an
        integer ``rank``), shape or stored size, would expand beyond ``max_memory``, or
        its times are not increasing or its states not finite. The message names the
        file and lists every problem found; ``field`` is the first entry at fault.

    Notes
    -----
    Header keys and arrays this version does not know are ignored, so files
    written by later versions of the same format still load.
    """
    path = Path(path)
    name = repr(str(path))
    if not path.exists():
        raise FileNotFoundError(f"`path` {str(path)!r} does not exist.")
    if max_memory is not None and not (isinstance(max_memory, (int, float))
                                       and not isinstance(max_memory, bool) and max_memory > 0):
        raise ModelError(f"`max_memory` must be a positive number of bytes, found {max_memory!r}.")
    header, archive = _read_npz(path, name, max_memory)
    fmt = header.get("format")
    if "format" not in header:
        _fail(f"{name} is not a gaussopt trajectory file", "the header has no `format` (this "
              f"gaussopt reads format {_formats()}).", path, "format")
    if not _is_int(fmt):
        _fail(name, f"header `format` must be an int, found {_found(fmt)} (this gaussopt reads "
                    f"format {_formats()}).", path, "format")
    if fmt not in _READABLE_FORMATS:
        _fail(name, f"unsupported format {fmt} (this gaussopt reads format {_formats()}).",
              path, "format")
    specs = dict(archive)
    ev_specs = {k: specs.pop(k) for k in list(specs) if k.rsplit("_", 1)[0] in _EVENT_KEYS}
    problems = _check_header(header) + _check_arrays(specs, header)
    problems += _check_events(ev_specs, header)
    if problems:
        _fail(name, "; ".join(problems) + ".", path, _first_field(problems))
    arrays = archive.read()
    ev_arrays = {k: arrays.pop(k) for k in list(arrays) if k in ev_specs}
    impacts = header.get("impacts", [])
    if not (isinstance(impacts, list) and all(isinstance(x, dict) and _is_number(x.get("t"))
                                              for x in impacts)):
        _fail(name, "header `impacts` must be a list of impact records with a time `t`.",
              path, "impacts")
    repeats = frozenset(float(x["t"]) for x in impacts) | frozenset(_transition_times(header))
    problems = _check_values(arrays, ev_arrays, repeats)
    if problems:
        _fail(name, "; ".join(problems) + ".", path, _first_field(problems))
    ev = _read_events(ev_arrays, header)
    if not header.get("has_energy", False):
        arrays["energy"] = None
    events = [RankEvent(**{k: e[k] for k in _RANK_EVENT_TYPES})
              for e in header.get("rank_events", [])]
    lsq = header.get("least_squares_steps", [])
    if not (isinstance(lsq, list) and all(isinstance(x, dict) for x in lsq)):
        _fail(repr(str(path)), "header `least_squares_steps` must be a list of dicts, found "
                               f"{type(lsq).__name__}.", path, "least_squares_steps")
    status = header.get("status", 0)
    if header.get("status_codes") != "solve_ivp" and status == 1:
        status = -1                 # written before solve_ivp's codes: 1 was a failure
    contact = {key: arrays.pop(key) for key in _CONTACT_ARRAYS if key in arrays}
    traj = Trajectory(coordinates=tuple(header["coordinates"]), rank_events=events,
                      stats=header.get("stats", {}), status=status,
                      message=header.get("message", ""), meta=header.get("meta", {}),
                      least_squares_steps=lsq, t_events=ev[0], q_events=ev[1], v_events=ev[2],
                      **arrays)
    if impacts:
        traj.impacts = [Impact.from_dict(x) for x in impacts]
    for key, x in contact.items():
        setattr(traj, key, x)
    return traj


def _first_field(problems: list[str]) -> Optional[str]:
    """The entry or header field the first problem names (its first `quoted` name)."""
    m = re.search(r"`([^`]+)`", problems[0]) if problems else None
    return m.group(1) if m else None


def _check_events(ev_arrays: dict, header: dict) -> list[str]:
    """Problems of the event entries (declared dtypes and shapes) against ``n_events``."""
    k = header.get("n_events")
    if k is None:
        return []
    if not _is_int(k) or k < 0:
        return [f"header `n_events` must be a non-negative int or null, found {_found(k)}"]
    coords = header.get("coordinates")
    n = len(coords) if isinstance(coords, list) else None
    problems = []
    for i in range(k):
        xs = []
        for key in _EVENT_KEYS:
            name = f"{key}_{i}"
            x = ev_arrays.get(name)
            if x is None:
                problems.append(f"missing array `{name}` (the header says n_events = {k})")
                continue
            if x.dtype.kind not in "fiu":
                problems.append(f"array `{name}` must be real numeric, found dtype {x.dtype}")
            elif not (x.dtype.kind == "f" and x.dtype.itemsize == 8):
                problems.append(f"array `{name}` must be float64 (as Trajectory.save writes "
                                f"it), found dtype {x.dtype}")
            xs.append(x)
        if len(xs) == 3:
            t, q, v = xs
            if t.ndim != 1:
                problems.append(f"array `t_events_{i}` must be 1-D, found shape {t.shape}")
            for name, x in ((f"q_events_{i}", q), (f"v_events_{i}", v)):
                if x.ndim != 2 or x.shape[0] != t.size or (n is not None and x.shape[1] != n):
                    problems.append(f"array `{name}` must have shape ({t.size}, {n}), "
                                    f"found {x.shape}")
    return problems


def _read_events(ev_arrays: dict, header: dict) -> tuple:
    """``(t_events, q_events, v_events)`` (None each without events), the arrays checked."""
    k = header.get("n_events")
    if k is None:
        return None, None, None
    return tuple([np.asarray(ev_arrays[f"{key}_{i}"], dtype=float) for i in range(k)]
                 for key in _EVENT_KEYS)


def _check_values(arrays: dict, ev_arrays: dict, impact_times=frozenset()) -> list[str]:
    """Problems of the values (read): times finite and increasing (a time repeats only at
    a recorded impact or contact transition, ``impact_times``), states and the per-point
    contact forces finite."""
    problems = []
    t = arrays["t"]
    if not np.all(np.isfinite(t)):
        problems.append(f"array `t` has NaN or inf at index {int(np.flatnonzero(~np.isfinite(t))[0])}")
    elif t.size > 1 and not np.all(np.diff(t) >= 0):
        i = int(np.flatnonzero(np.diff(t) < 0)[0])
        problems.append(f"array `t` must be increasing, but t[{i + 1}] = {float(t[i + 1])!r} <= "
                        f"t[{i}] = {float(t[i])!r}")
    elif t.size > 1 and np.any(np.diff(t) == 0):
        # a time repeats only where a run with contacts restarts: at an impact (the state
        # before and after) or a change of the contact state (the phase that ends and the
        # one that begins), each recorded in the header; every repeat is checked
        for i in np.flatnonzero(np.diff(t) == 0).tolist():
            if float(t[i]) not in impact_times:
                problems.append(f"array `t` must be increasing, but t[{i + 1}] = t[{i}] = "
                                f"{float(t[i])!r} (a time repeats only at a recorded impact "
                                "or contact transition)")
                break
    for k in ("q", "v") + tuple(x for x in ev_arrays if x.split("_")[0] in ("t", "q", "v")):
        x = arrays.get(k, ev_arrays.get(k))
        if x is not None and x.size and not np.all(np.isfinite(x)):
            row = int(np.flatnonzero(~np.all(np.isfinite(x.reshape(x.shape[0], -1)), axis=1))[0])
            problems.append(f"array `{k}` has NaN or inf (row {row}); the states of a run are "
                            "finite")
    for k in _CONTACT_ARRAYS:
        x = arrays.get(k)
        if x is not None and x.size and not np.all(np.isfinite(x)):
            row = int(np.flatnonzero(~np.all(np.isfinite(x.reshape(x.shape[0], -1)), axis=1))[0])
            problems.append(f"array `{k}` has NaN or inf (row {row}); a run with contacts "
                            "writes the force of every point at every sample")
    return problems


def _formats() -> str:
    return " or ".join(str(f) for f in _READABLE_FORMATS)
