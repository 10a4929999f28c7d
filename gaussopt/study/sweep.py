"""Parameter sweeps: many runs of a problem on all local cores or on a Dask cluster.

:func:`sweep` runs ``build(**params).simulate(solver, **settings)`` for every
parameter set (and every solver) and tabulates one row per run
(:class:`SweepResult`). What is sent to a worker is the task
``(builder, params, solver, settings)``, never a :class:`~gaussopt.System`: each
worker builds its own system, so nothing generated or compiled has to cross a
process boundary. Each finished run is written into ``out`` as it completes
(one small JSON file per run, named by a hash of the task), so an interrupted or
crashed sweep, run again with the same ``out``, computes only the missing runs
(each record carries checksums of its row and trajectory: a damaged one is
computed again), and sweeps running at once on the same ``out`` claim the runs
there and share the work.

Executors: without ``client``, a local process pool over ``workers`` processes
(forked on Linux, so the workers start with the parent's imported modules and
loaded compiled kernels; one process runs the tasks in the calling process);
with ``client`` (a ``dask.distributed.Client`` or a scheduler address), the
tasks go to that Dask cluster (``pip install "gaussopt[dask]"``).

The command line ``gaussopt sweep`` is :func:`cmd_sweep`.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import itertools
import json
import math
import os
import pickle
import signal
import socket
import sys
import time
import types
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: sweeps on one `out` do not coordinate
    fcntl = None

from gaussopt.study.compare import RowTable
from gaussopt.core.exceptions import ModelError

__all__ = ["sweep", "SweepResult", "sweep_arguments", "cmd_sweep"]

KEEP = ("summary", "trajectories")
#: the columns that measure time (they differ between two runs of the same task)
TIMING_COLUMNS = ("wall_time_s", "compile_time_s", "time_per_step_ms")
#: the first columns of a row after the parameters, in this order
_LEAD = ("solver", "success", "message", "wall_time_s", "steps", "t_final")


# =========================================================================== tasks
class _Task(NamedTuple):
    """One run: what a worker receives (never a System)."""

    index: int
    key: str
    builder: Callable
    params: dict
    solver: str
    settings: dict
    save: Optional[str]          # where to save the trajectory (keep="trajectories")


def _execute(task: _Task) -> tuple[dict, Optional[str]]:
    """Build the problem, simulate, summarize: the row of one run, and the SHA-256 of
    its saved trajectory file (``None``: none saved). A failure of the run (building
    it, a step, the model's code) is a row with ``success=False``; a
    KeyboardInterrupt is not a result and propagates."""
    from gaussopt.study.compare import summarize

    row: dict = {**task.params, "solver": task.solver}
    t0 = time.perf_counter()
    try:
        problem = task.builder(**task.params)
        t1 = time.perf_counter()
        tr = problem.simulate(task.solver, **task.settings)
        wall = time.perf_counter() - t1
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - a failed run is a row
        row.update(success=False, message=f"{type(e).__name__}: {e}",
                   wall_time_s=time.perf_counter() - t0)
        return row, None
    if isinstance(tr.exception, KeyboardInterrupt):
        raise KeyboardInterrupt(tr.message)
    try:
        summary = summarize(problem, task.solver, tr, wall)
    except Exception as e:  # noqa: BLE001 - the run is kept, its summary reports the fault
        summary = {"success": False, "wall_time_s": wall,
                   "message": f"summary failed: {type(e).__name__}: {e}"}
    summary.pop("solver", None)
    summary["t_final"] = summary.pop("t_end", float(tr.t[-1]) if len(tr) else math.nan)
    summary["message"] = summary.get("message") or ("" if tr.success else tr.message)
    row.update({k: summary.pop(k) for k in _LEAD if k in summary})
    row.update(_final_outputs(problem, tr))
    row.update(summary)
    if task.save is not None and len(tr):
        # (written to a temporary file and renamed: a reader sees all of it or nothing)
        return row, _file_sha256(tr.save(task.save))
    return row, None


def _file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _final_outputs(problem, tr) -> dict:
    """``final_<name>``: the problem's outputs at the last state (scalars only)."""
    if not len(tr):
        return {}
    try:
        out = problem.outputs(tr.q[-1:], tr.v[-1:])
    except Exception:  # noqa: BLE001 - outputs are optional columns
        return {}
    row = {}
    for k, val in out.items():
        arr = np.asarray(val, dtype=float).ravel()
        if arr.size == 1:
            row[f"final_{k}"] = float(arr[0])
    return row


def _run_in_worker(task: _Task) -> tuple[int, dict, Optional[str]]:
    return (task.index, *_execute(task))


def _ignore_sigint() -> None:
    """Pool workers leave Ctrl-C to the parent (which stops them): an interrupted run
    must not come back as a failed row. They also close the parent's claim on ``out``
    (a forked copy would keep it alive after the parent died)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in list(_OWNER_FDS):
        try:
            os.close(fd)
        except OSError:
            pass
    _OWNER_FDS.clear()


class _Portable:
    """A builder that crosses to a worker: by reference when pickle can (module-level
    functions), else by value through cloudpickle (lambdas, functions of ``__main__``
    defined interactively)."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, **params):
        return self.fn(**params)

    def __reduce__(self):
        try:
            pickle.dumps(self.fn)
            return (_Portable, (self.fn,))
        except Exception:  # noqa: BLE001 - not picklable by reference
            import cloudpickle

            return (_unpickle_portable, (cloudpickle.dumps(self.fn),))


def _unpickle_portable(blob: bytes) -> _Portable:
    return _Portable(pickle.loads(blob))


def _check_portable(builder: Callable, label: str) -> None:
    try:
        pickle.dumps(_Portable(builder))
    except Exception as e:  # noqa: BLE001
        raise ModelError(
            f"`problem`: the builder {label} cannot be sent to worker processes "
            f"({type(e).__name__}: {e}); define it at module level (or install cloudpickle), "
            "or pass workers=1.") from None


# =========================================================================== arguments
def _resolve_problem(problem: Any) -> tuple[Callable, str, Optional[Mapping]]:
    """``(build, label, DEFAULTS of its module)`` from a name, a module or a callable."""
    if isinstance(problem, str):
        from gaussopt.study.registry import get_problem

        mod = get_problem(problem)
        return mod.build, problem, getattr(mod, "DEFAULTS", None)
    if isinstance(problem, types.ModuleType):
        build = getattr(problem, "build", None)
        if not callable(build):
            raise ModelError(f"`problem`: the module {problem.__name__!r} has no build(); a "
                             "problem module defines build(**params) -> gaussopt.Problem.")
        return build, problem.__name__.rpartition(".")[2], getattr(problem, "DEFAULTS", None)
    if callable(problem):
        mod = sys.modules.get(getattr(problem, "__module__", None) or "")
        defaults = getattr(mod, "DEFAULTS", None) if getattr(mod, "build", None) is problem else None
        return problem, getattr(problem, "__qualname__", type(problem).__name__), defaults
    raise ModelError("`problem` must be a problem name (e.g. 'four_bar'), a module with build() "
                     f"or a callable build(**params) -> gaussopt.Problem; found "
                     f"{type(problem).__name__}.")


def _plain(x: Any) -> Any:
    """numpy scalars as Python numbers (rows, JSON and hashes see one type)."""
    if isinstance(x, np.generic):
        return x.item()
    return x


def _runs(params: Any) -> list[dict]:
    """A list of dicts (one run each) or a dict of lists (the Cartesian grid) -> runs."""
    if isinstance(params, Mapping):
        axes = []
        for k, vals in params.items():
            if not isinstance(k, str):
                raise ModelError(f"`params` keys must be parameter names (str), found {k!r}.")
            if isinstance(vals, np.ndarray):
                vals = list(vals.ravel()) if vals.ndim else [vals]
            elif not isinstance(vals, (list, tuple, range)):
                vals = [vals]
            if len(vals) == 0:
                raise ModelError(f"`params[{k!r}]` is empty: a grid axis needs at least one value.")
            axes.append([(k, _plain(v)) for v in vals])
        return [dict(combo) for combo in itertools.product(*axes)]
    if isinstance(params, (list, tuple)):
        runs = []
        for i, p in enumerate(params):
            if not isinstance(p, Mapping):
                raise ModelError(f"`params[{i}]` must be a dict of build() keywords, found "
                                 f"{type(p).__name__}.")
            for k in p:
                if not isinstance(k, str):
                    raise ModelError(f"`params[{i}]` keys must be parameter names (str), "
                                     f"found {k!r}.")
            runs.append({k: _plain(v) for k, v in p.items()})
        if not runs:
            raise ModelError("`params` is empty: give at least one parameter set ({} runs the "
                             "defaults).")
        return runs
    raise ModelError("`params` must be a list of dicts (one run each) or a dict of lists (the "
                     f"grid), found {type(params).__name__}.")


def _check_names(builder: Callable, label: str, defaults: Optional[Mapping],
                 runs: Sequence[dict]) -> None:
    """Every parameter must be one ``build()`` takes (else an error naming it and the
    accepted ones, before anything runs), and inside the range ``build()`` documents
    for it (:func:`gaussopt.study.registry.check_parameters`)."""
    from gaussopt.study.problem import BuildSignature, did_you_mean
    from gaussopt.study.registry import check_parameters

    try:
        sig = BuildSignature.of(builder, defaults)
    except (TypeError, ValueError):     # no signature to read (a builtin, a C function)
        return
    if not sig.open:
        accepted = list(sig.parameters)
        seen = list(dict.fromkeys(k for r in runs for k in r))
        for k in seen:
            if k not in sig.parameters:
                raise ModelError(f"`params`: build() of {label} takes no parameter {k!r}"
                                 f"{did_you_mean(k, accepted)} (parameters: "
                                 f"{', '.join(accepted) or 'none'}).")
    for r in runs:                      # values outside the ranges build() documents
        try:
            check_parameters(sig, r, label)
        except ModelError as e:
            raise ModelError(f"`params`: {e}") from None


def _canonical(x: Any) -> Any:
    """A JSON-able, address-free description of a value (the identity of a task)."""
    x = _plain(x)
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [_canonical(v) for v in x]
    if isinstance(x, np.ndarray):
        return {"array": _canonical(x.tolist()), "dtype": str(x.dtype)}
    if isinstance(x, (types.FunctionType, types.BuiltinFunctionType, type)):
        return f"{getattr(x, '__module__', '')}:{getattr(x, '__qualname__', repr(x))}"
    if hasattr(x, "__dict__"):
        return {"type": f"{type(x).__module__}:{type(x).__qualname__}",
                "state": _canonical({k: v for k, v in vars(x).items() if not k.startswith("_")})}
    return repr(x)


def _task_key(builder_id: str, params: dict, solver: str, settings: dict) -> str:
    text = json.dumps({"problem": builder_id, "params": _canonical(params), "solver": solver,
                       "settings": _canonical(settings)}, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:20]


def _through_json(row: dict) -> dict:
    """The row as it reads back from its file (tuples become lists, numbers Python's)."""
    return json.loads(json.dumps(row, default=_json_default))


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return repr(x)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# =========================================================================== result
@dataclass
class SweepResult(RowTable):
    """The rows of a sweep, one per finished run, in the order of the runs.

    Attributes
    ----------
    rows : list of dict
        The parameters of the run, ``solver``, ``success``, ``message`` (empty when
        it succeeded), ``wall_time_s`` (the simulation), ``steps``, ``t_final``,
        ``final_<output>`` (the problem's outputs at the end), ``max_err_<output>``
        (against the problem's reference, where it has one), ``max_pos_residual``,
        ``max_vel_residual``, ``max_energy_drift`` and the other columns of
        :func:`gaussopt.study.compare.summarize`.
    problem : str
    out : Path or None
    computed, reused : int
        Runs computed by this call / read back from ``out``.
    interrupted : bool
        The sweep was stopped (Ctrl-C, or a Dask cluster without workers): ``rows``
        holds the runs finished before.
    stopped : str
        Why it stopped (``"interrupted"``, or the cluster's state); empty when it
        ran to the end.
    """

    rows: list = field(default_factory=list)
    problem: str = ""
    out: Optional[Path] = None
    computed: int = 0
    reused: int = 0
    interrupted: bool = False
    stopped: str = ""
    _trajectories: list = field(default_factory=list, repr=False)
    _digits = 6

    def __len__(self) -> int:
        return len(self.rows)

    def to_dataframe(self):
        """The rows as a ``pandas.DataFrame`` (pandas is optional)."""
        try:
            import pandas as pd
        except ImportError:
            raise ModuleNotFoundError("SweepResult.to_dataframe needs pandas (pip install "
                                      "pandas); to_csv and rows do not.") from None
        return pd.DataFrame(self.rows, columns=self.columns)

    def trajectory(self, i: int):
        """The :class:`~gaussopt.Trajectory` of row ``i`` (``keep="trajectories"``)."""
        from gaussopt.core.result import load

        if not -len(self.rows) <= i < len(self.rows):
            raise IndexError(f"`i` must index the {len(self.rows)} rows, found {i}.")
        path = self._trajectories[i] if self._trajectories else None
        if path is None:
            raise ModelError(f"row {i} has no trajectory: run the sweep with "
                             "keep='trajectories' and out=DIR (a failed run before its first "
                             "step has none).")
        return load(path)

    def plot(self, x: str, y: str, ax=None, path=None, units: Optional[Mapping] = None):
        """``y`` (a column) against the parameter ``x``: one line per value of the other
        parameters that vary (and per solver); failed runs are left out
        (:func:`gaussopt.study.plotting.plot_sweep`). ``units``: the units of parameters
        and outputs for the axis labels (:func:`gaussopt.study.plotting.sweep_units`).

        Returns
        -------
        matplotlib Axes
        """
        from gaussopt.study.plotting import plot_sweep

        cols = self.columns
        for name, label in ((x, "x"), (y, "y")):
            if name not in cols:
                raise ModelError(f"`{label}` must be a column of the rows, found {name!r} "
                                 f"(columns: {', '.join(cols)}).")
        return plot_sweep(self.rows, x, y, params=_param_columns(self.rows),
                          problem=self.problem, units=units, ax=ax, path=path)


def _param_columns(rows: Sequence[dict]) -> list[str]:
    """The parameter columns: those before ``solver`` in the rows."""
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k == "solver":
                break
            if k not in cols:
                cols.append(k)
    return cols


# =========================================================================== sweep
def sweep(problem: Any, params: Union[Sequence[Mapping], Mapping[str, Sequence]], *,
          solver: Union[str, Sequence[str]] = "closed_form", settings: Optional[Mapping] = None,
          keep: str = "summary", out=None, client: Any = None, workers: Optional[int] = None,
          progress: bool = True, no_workers_timeout: float = 60.0) -> SweepResult:
    """Run a problem for many parameter sets (and solvers), in parallel.

    Parameters
    ----------
    problem : str, module or callable
        A problem name (``"four_bar"``), a module with ``build()``, or any
        callable ``build(**params) -> gaussopt.Problem`` (one of your own script
        too; with a process pool it is sent by reference, or by value through
        cloudpickle when it is a lambda).
    params : list of dict or dict of lists
        One run per dict, or the Cartesian grid of the lists (a value that is not a
        list is one value; a tuple-valued parameter goes in a list:
        ``{"v0": [(1, 0, 2)]}``).
    solver : str or sequence of str, default "closed_form"
        As for :meth:`Problem.simulate <gaussopt.Problem.simulate>` (also the
        problem's aliases); a list makes solver x params runs (solver outermost).
    settings : dict, optional
        Overrides of the problem's recommended settings for every run (``rtol``,
        ``method``, ``t_span``, ...).
    keep : {"summary", "trajectories"}
        ``"trajectories"`` also saves each run's :class:`~gaussopt.Trajectory`
        under ``out`` (:meth:`SweepResult.trajectory`).
    out : path, optional
        A directory: each finished run is written there as it completes
        (``runs/<key>.json``, the key a hash of problem, parameters, solver and
        settings) and ``table.csv`` at the end. Run the sweep again with the same
        ``out`` and only the missing runs are computed. (The key names the builder,
        not its code: use a new directory after changing the model.) Each record
        carries the SHA-256 of its row and of its trajectory file: a file truncated
        or altered after it was written is not used, its run is computed again (one
        warning tells how many). Several sweeps may share one ``out`` at the same
        time (other processes, other hosts on a shared file system with working
        ``flock``): each run is claimed there before it is computed, so they share the
        work, each returns every row and ``table.csv`` holds every row once; the
        claims of a sweep whose process has ended are taken over.
    client : dask.distributed.Client or str, optional
        Run the tasks on this Dask cluster (a client, or a scheduler address).
    workers : int, optional
        Local worker processes (default: all cores available); 1 runs the tasks
        one after the other in this process.
    progress : bool, default True
        A progress bar over the runs (on a terminal).
    no_workers_timeout : float, default 60
        With ``client``: once the cluster has had no workers for this many
        seconds, the sweep stops (the runs in flight are cancelled) and returns
        the rows finished so far with ``interrupted=True`` and the reason in
        ``stopped``, after a warning.

    Returns
    -------
    SweepResult
        A failed run is a row with ``success=False`` and its message, and the sweep
        goes on. On Ctrl-C, or when a Dask cluster has lost every worker, the rows
        finished so far (``interrupted=True``).

    Raises
    ------
    ModelError
        Before anything runs: an unknown problem, a parameter ``build()`` does not
        take (named, with the accepted ones), malformed ``params``, ``solver``,
        ``settings``, ``keep``, ``out``, ``client``, ``workers`` or
        ``no_workers_timeout``; a parameter value outside the range ``build()``
        documents (:func:`gaussopt.study.registry.check_parameters`).

    Examples
    --------
    >>> import gaussopt as go
    >>> res = go.sweep("four_bar", {"psi": [300.0, 450.0], "t_end": [1.0]}, workers=1,
    ...                progress=False)
    >>> [(r["psi"], r["success"]) for r in res.rows]
    [(300.0, True), (450.0, True)]
    """
    builder, label, defaults = _resolve_problem(problem)
    runs = _runs(params)
    _check_names(builder, label, defaults, runs)
    solvers = [solver] if isinstance(solver, str) else list(solver) if solver is not None else []
    if not solvers or not all(isinstance(s, str) for s in solvers):
        raise ModelError(f"`solver` must be a solver name or a list of names, found {solver!r}.")
    if settings is None:
        settings = {}
    if not isinstance(settings, Mapping):
        raise ModelError(f"`settings` must be a dict of simulate() keywords, found "
                         f"{type(settings).__name__}.")
    settings = dict(settings)
    if keep not in KEEP:
        raise ModelError(f"`keep` must be one of {KEEP}, found {keep!r}.")
    if keep == "trajectories" and out is None:
        raise ModelError("`keep='trajectories'` saves every trajectory under `out`: pass "
                         "out=DIRECTORY.")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ModelError(f"`workers` must be a positive integer, found {workers!r}.")
    if client is not None and not isinstance(client, str) and not hasattr(client, "submit"):
        raise ModelError("`client` must be a dask.distributed.Client or a scheduler address "
                         f"(str), found {type(client).__name__}.")
    if not (isinstance(no_workers_timeout, (int, float)) and not isinstance(no_workers_timeout, bool)
            and no_workers_timeout > 0):
        raise ModelError("`no_workers_timeout` must be a positive number of seconds, found "
                         f"{no_workers_timeout!r}.")
    outdir = _prepare_out(out)

    builder_id = (f"{getattr(builder, '__module__', '')}:"
                  f"{getattr(builder, '__qualname__', type(builder).__name__)}")
    runs_dir = outdir.resolve() / "runs" if outdir is not None else None   # (workers' cwd differ)
    tasks = []
    for s in solvers:
        for p in runs:
            key = _task_key(builder_id, p, s, settings)
            save = str(runs_dir / f"{key}.npz") if keep == "trajectories" else None
            tasks.append(_Task(len(tasks), key, builder, p, s, settings, save))
    if len({t.key for t in tasks}) < len(tasks):
        warnings.warn("`params` repeats a parameter set: each distinct run is computed once.",
                      stacklevel=2)
    # one computation per distinct task; repeats take its row
    first_of: dict[str, int] = {}
    unique = []
    for t in tasks:
        if t.key not in first_of:
            first_of[t.key] = t.index
            unique.append(t)

    result = SweepResult(problem=label, out=outdir)
    rows: dict[int, dict] = {}
    trajs: dict[int, Optional[str]] = {}
    store = _Store(outdir) if outdir is not None else None
    bar = _bar(len(unique), 0, label, progress)

    def reuse(task: _Task, rec: dict) -> None:
        """A run finished earlier, or by another sweep on the same ``out``."""
        rows[task.index] = rec["row"]
        trajs[task.index] = (str(outdir / "runs" / rec["trajectory"]) if rec.get("trajectory")
                             else None)
        result.reused += 1
        if bar is not None:
            bar.update(1)

    def finish(task: _Task, row: dict, digest: Optional[str] = None,
               persist: bool = True) -> None:
        row = _through_json(row)
        rows[task.index] = row
        traj = task.save if digest is not None else None
        trajs[task.index] = str(outdir / "runs" / Path(traj).name) if traj else None
        if store is not None:
            if persist:
                store.record(task, builder_id, row, traj, digest)
            else:
                store.release(task)
        if persist:
            result.computed += 1
        if bar is not None:
            bar.update(1)

    queue = _Queue(unique, store, keep, reuse)
    try:
        if client is not None:
            _run_dask(queue, client, finish, float(no_workers_timeout))
        else:
            n = min(workers or _cpu_count(), len(unique))
            if n <= 1:
                _run_serial(queue, finish)
            else:
                _check_portable(builder, label)
                _run_pool(queue, n, finish)
    except KeyboardInterrupt:
        result.interrupted = True
        result.stopped = "interrupted"
        warnings.warn(f"sweep interrupted: {len(rows)} of {len(tasks)} runs finished "
                      "(run it again with the same `out` to compute the rest).", stacklevel=2)
    except _ClusterLost as e:
        result.interrupted = True
        result.stopped = str(e)
        warnings.warn(f"sweep stopped: {e}; {len(rows)} of {len(tasks)} runs finished (run it "
                      "again with the same `out` once the cluster has workers, to compute the "
                      "rest).", stacklevel=2)
    finally:
        if bar is not None:
            bar.close()
        if store is not None:
            store.close()
    if store is not None and store.rejected:
        n_bad = len(store.rejected)
        warnings.warn(f"sweep: {n_bad} stored run{'s' if n_bad > 1 else ''} in {str(outdir)!r} "
                      "did not match {} checksum{} (a file truncated or altered after it was "
                      "written, or written by an older gaussopt) and {} computed again."
                      .format("their" if n_bad > 1 else "its", "s" if n_bad > 1 else "",
                              "were" if n_bad > 1 else "was"), stacklevel=2)
    for t in tasks:                      # repeated tasks share the computed row
        first = first_of[t.key]
        if t.index not in rows and first in rows:
            rows[t.index], trajs[t.index] = rows[first], trajs.get(first)
    order = sorted(rows)
    result.rows = [rows[i] for i in order]
    result._trajectories = [trajs.get(i) for i in order]
    if store is not None:
        store.write_table(result)
    return result


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _prepare_out(out) -> Optional[Path]:
    if out is None:
        return None
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ModelError(f"`out` must be a directory, found the file {str(path)!r}.")
    try:
        (path / "runs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ModelError(f"`out`: cannot create the directory {str(path)!r} ({e.strerror or e}).") \
            from None
    if not os.access(path / "runs", os.W_OK | os.X_OK):
        raise ModelError(f"`out`: the directory {str(path)!r} is not writable.")
    return path


#: seconds between two looks at the runs other sweeps have claimed, and at a Dask cluster
_POLL = 0.2
#: the owner files this process holds locked (closed in forked pool workers)
_OWNER_FDS: set = set()


def _record_digest(rec: dict) -> str:
    """The SHA-256 of a run record without its own ``sha256`` field."""
    body = {k: v for k, v in rec.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=_json_default)
                          .encode()).hexdigest()


def _flock(fd: int, blocking: bool) -> bool:
    """Lock ``fd`` exclusively (``flock``); False if ``blocking`` is false and another
    open file holds the lock. Without ``fcntl`` (not POSIX) nothing is locked."""
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


class _Store:
    """The ``out`` directory, shared by every sweep that uses it at the same time.

    - ``runs/<key>.json``: the record of a finished run: its row, the name and
      SHA-256 of its trajectory file, and the SHA-256 of the record itself. A
      record or trajectory that does not match its checksum is not used: the run
      is computed again (and counted in ``rejected``).
    - ``runs/<key>.claim``: the run is being computed by the sweep named in it
      (owner, host, pid). Runs are claimed, recorded and released under the
      directory lock (``.lock``, an ``flock``), so each run is computed by one sweep.
    - ``owners/<host>.<pid>.<random>``: the owner file of a running sweep, locked
      (``flock``) by it while it runs. The kernel releases that lock when the
      process ends, however it ends: a claim whose owner file is unlocked or gone
      is stale and is taken over.
    """

    def __init__(self, path: Path):
        self.path = path
        self.runs = path / "runs"
        self.owners = path / "owners"
        self.owners.mkdir(exist_ok=True)
        self.host = socket.gethostname()
        self.owner = f"{self.host}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        self.claimed: set = set()
        self.rejected: set = set()           # keys whose record failed its checksum
        with self._locked():                 # (created and locked at once: never seen unlocked)
            fd = os.open(self.owners / self.owner, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
            _flock(fd, blocking=True)
            os.write(fd, json.dumps({"host": self.host, "pid": os.getpid(),
                                     "started": time.time()}).encode())
        self._fd: Optional[int] = fd
        _OWNER_FDS.add(fd)

    @contextlib.contextmanager
    def _locked(self):
        fd = os.open(self.path / ".lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
        try:
            _flock(fd, blocking=True)
            yield
        finally:
            os.close(fd)                     # (releases the lock)

    def _alive(self, owner: str) -> bool:
        """The sweep ``owner`` still runs (its owner file is locked)."""
        if owner == self.owner:
            return True
        if not owner or "/" in owner or owner.startswith("."):
            return False
        path = self.owners / owner
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            if not _flock(fd, blocking=False):
                return True
        finally:
            os.close(fd)
        try:                                 # its process has ended: its file goes too
            path.unlink()
        except OSError:
            pass
        return False

    def _read(self, task: _Task, keep: str) -> Optional[dict]:
        """The record of ``task`` if it is there, intact and enough for ``keep``."""
        try:
            text = (self.runs / f"{task.key}.json").read_text()
        except FileNotFoundError:
            return None
        except OSError:
            text = ""
        try:
            rec = json.loads(text)
        except ValueError:
            rec = None
        if not self._intact(rec, task):
            self.rejected.add(task.key)
            return None
        if keep == "trajectories" and not rec.get("trajectory"):
            return None                      # kept without its trajectory: computed now
        return rec

    def _intact(self, rec: Any, task: _Task) -> bool:
        if not (isinstance(rec, dict) and rec.get("key") == task.key
                and isinstance(rec.get("row"), dict) and rec.get("sha256") == _record_digest(rec)):
            return False
        traj = rec.get("trajectory")
        if traj is None:
            return True
        if not isinstance(traj, str) or Path(traj).name != traj:
            return False
        try:
            return _file_sha256(self.runs / traj) == rec.get("trajectory_sha256")
        except OSError:
            return False

    def claim(self, task: _Task, keep: str) -> tuple[str, Optional[dict]]:
        """``("done", record)``, ``("mine", None)`` (this sweep computes it) or
        ``("busy", None)`` (another running sweep does)."""
        with self._locked():
            rec = self._read(task, keep)
            if rec is not None:
                return "done", rec
            path = self.runs / f"{task.key}.claim"
            try:
                info = json.loads(path.read_text())
            except FileNotFoundError:
                info = None
            except (OSError, ValueError):
                info = {}                    # damaged: stale
            owner = info.get("owner") if isinstance(info, dict) else None
            if isinstance(owner, str) and owner != self.owner and self._alive(owner):
                return "busy", None
            _write_atomic(path, json.dumps({"owner": self.owner, "host": self.host,
                                            "pid": os.getpid(), "time": time.time()}))
            self.claimed.add(task.key)
            return "mine", None

    def _unclaim(self, key: str) -> None:
        path = self.runs / f"{key}.claim"
        try:
            if json.loads(path.read_text()).get("owner") == self.owner:
                path.unlink()
        except (OSError, ValueError, AttributeError):
            pass
        self.claimed.discard(key)

    def record(self, task: _Task, builder_id: str, row: dict, traj: Optional[str],
               digest: Optional[str]) -> None:
        """Write the record of a finished run and release its claim."""
        rec = {"key": task.key, "problem": builder_id, "row": row,
               "trajectory": Path(traj).name if traj else None, "trajectory_sha256": digest}
        rec["sha256"] = _record_digest(rec)
        with self._locked():
            _write_atomic(self.runs / f"{task.key}.json",
                          json.dumps(rec, default=_json_default, indent=1))
            self._unclaim(task.key)

    def release(self, task: _Task) -> None:
        """Give up the claim of a run not recorded (another sweep may compute it)."""
        with self._locked():
            self._unclaim(task.key)

    def write_table(self, result: "SweepResult") -> None:
        with self._locked():
            tmp = self.path / f".table.csv.{self.owner}.tmp"
            result.to_csv(tmp)
            os.replace(tmp, self.path / "table.csv")

    def close(self) -> None:
        """Release every claim of this sweep, then its owner file."""
        if self._fd is None:
            return
        with self._locked():
            for key in list(self.claimed):
                self._unclaim(key)
            try:
                (self.owners / self.owner).unlink()
            except OSError:
                pass
        _OWNER_FDS.discard(self._fd)
        os.close(self._fd)
        self._fd = None


class _Queue:
    """The distinct runs still to do, handed out one at a time as a worker frees.

    With ``out``, each run is claimed there first: one finished meanwhile (by
    this sweep earlier, or by another sweep on the same ``out``) is reused, one
    another running sweep computes waits for its record (or for its owner to end).
    """

    def __init__(self, tasks: Sequence[_Task], store: Optional[_Store], keep: str,
                 reuse: Callable[[_Task, dict], None]):
        self.pending = collections.deque(tasks)
        self.again: collections.deque = collections.deque()
        self.waiting: list = []
        self.store, self.keep, self.reuse = store, keep, reuse
        self._next_look = 0.0

    def empty(self) -> bool:
        return not (self.pending or self.again or self.waiting)

    def retry(self, task: _Task) -> None:
        """Hand ``task`` (claimed already) out again."""
        self.again.append(task)

    def take(self) -> Optional[_Task]:
        """The next run for this sweep to compute, or ``None``: none now (the others
        are computed elsewhere; call again later, until :meth:`empty`)."""
        if self.again:
            return self.again.popleft()
        while self.pending:
            t = self.pending.popleft()
            if self.store is None:
                return t
            state, rec = self.store.claim(t, self.keep)
            if state == "mine":
                return t
            if state == "done":
                self.reuse(t, rec)
            else:
                self.waiting.append(t)
        if not self.waiting or time.monotonic() < self._next_look:
            return None
        self._next_look = time.monotonic() + _POLL
        got, still = None, []
        for t in self.waiting:
            if got is not None:
                still.append(t)
                continue
            state, rec = self.store.claim(t, self.keep)
            if state == "busy":
                still.append(t)
            elif state == "done":
                self.reuse(t, rec)
            else:
                got = t
        self.waiting = still
        return got


class _ClusterLost(Exception):
    """The Dask cluster has had no workers for longer than the sweep waits."""


def _bar(total: int, initial: int, label: str, progress: bool):
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, initial=initial, desc=f"sweep {label}", unit="run", leave=False,
                disable=None)


# =========================================================================== executors
def _mp_context():
    """Fork where it is safe and available (Linux): the workers start with this
    process's imported modules and loaded compiled kernels; spawn elsewhere."""
    import multiprocessing as mp

    if sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods():
        return mp.get_context("fork")
    return mp.get_context("spawn")


def _died(task: _Task, why: str) -> dict:
    return {**task.params, "solver": task.solver, "success": False, "message": why}


def _run_serial(queue: _Queue, finish: Callable) -> None:
    """The runs one after the other in this process."""
    while not queue.empty():
        t = queue.take()
        if t is None:                    # the rest is computed by other sweeps: wait
            time.sleep(_POLL)
            continue
        finish(t, *_execute(t))


def _run_pool(queue: _Queue, n: int, finish: Callable) -> None:
    """The runs on ``n`` local processes, ``n`` at a time; a worker that dies takes the
    pool with it: the runs in flight are sent again to a new pool once, a run whose
    second try dies too is a failed row."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    tries: dict[int, int] = {}
    ex = None
    futs: dict = {}

    def collect(f) -> bool:
        """Finish the run of ``f``; False if the pool broke under it."""
        t = futs.pop(f)
        try:
            _, row, digest = f.result()
        except BrokenProcessPool:
            tries[t.index] = tries.get(t.index, 0) + 1
            if tries[t.index] > 1:
                finish(t, _died(t, "the worker process running this run died"), persist=False)
            else:
                queue.retry(t)
            return False
        finish(t, row, digest)
        return True

    try:
        while futs or not queue.empty():
            if ex is None:
                ex = ProcessPoolExecutor(max_workers=n, mp_context=_mp_context(),
                                         initializer=_ignore_sigint)
            while len(futs) < n:
                t = queue.take()
                if t is None:
                    break
                futs[ex.submit(_run_in_worker, t._replace(builder=_Portable(t.builder)))] = t
            if not futs:
                time.sleep(_POLL)
                continue
            done, _ = wait(list(futs), timeout=_POLL, return_when=FIRST_COMPLETED)
            if not all([collect(f) for f in done]):
                wait(list(futs))          # the broken pool fails every run in flight
                for f in list(futs):
                    collect(f)
                ex.shutdown(wait=True)
                ex = None
    except BaseException:
        if ex is not None:
            _stop_pool(ex)
        raise
    if ex is not None:
        ex.shutdown(wait=True)


def _stop_pool(ex) -> None:
    """Cancel what has not started and end the workers (they ignore SIGINT)."""
    procs = list(getattr(ex, "_processes", {}) .values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.terminate()
        except Exception:  # noqa: BLE001 - already gone
            pass
    for p in procs:
        p.join(timeout=5)


def _cluster_threads(c) -> int:
    """Worker threads of the cluster now (0: no workers, or the scheduler is gone)."""
    if getattr(c, "status", "running") not in ("running", "connecting", "newly-created"):
        return 0
    try:
        return int(sum(c.nthreads().values()))
    except Exception:  # noqa: BLE001 - the scheduler cannot be reached: no workers either
        return 0


def _run_dask(queue: _Queue, client: Any, finish: Callable, no_workers_timeout: float) -> None:
    """The runs on a Dask cluster, about two per worker thread at a time. A run whose
    task fails (its worker died more often than Dask retries) is a failed row. Once
    the cluster has had no workers for ``no_workers_timeout`` seconds, the runs in
    flight are cancelled and :class:`_ClusterLost` is raised (the finished rows are kept)."""
    try:
        from distributed import Client
    except ImportError:
        raise ModelError("`client` needs dask.distributed: pip install \"gaussopt[dask]\" "
                         "(or \"dask[distributed]\").") from None
    own = isinstance(client, str)
    c = Client(client) if own else client
    futs: dict = {}
    tag = uuid.uuid4().hex[:12]          # a fresh key per call: the cluster recomputes
    capacity, next_look, idle_since = 2, 0.0, None
    try:
        while futs or not queue.empty():
            now = time.monotonic()
            if now >= next_look:
                next_look = now + min(1.0, no_workers_timeout / 4)
                threads = _cluster_threads(c)
                if threads:
                    idle_since, capacity = None, max(2, 2 * threads)
                else:
                    idle_since = now if idle_since is None else idle_since
                    if now - idle_since >= no_workers_timeout:
                        raise _ClusterLost(f"the Dask cluster has had no workers for "
                                           f"{now - idle_since:.1f} s (no_workers_timeout="
                                           f"{no_workers_timeout:g})")
            while len(futs) < capacity:
                t = queue.take()
                if t is None:
                    break
                futs[c.submit(_run_in_worker, t, pure=False,
                              key=f"gaussopt-sweep-{t.key}-{tag}")] = t
            done = [f for f in futs if f.done()]
            if not done:
                time.sleep(_POLL / 4)
                continue
            for f in done:
                t = futs.pop(f)
                try:
                    _, row, digest = f.result()
                except KeyboardInterrupt:
                    raise
                except Exception as e:  # noqa: BLE001 - the worker died, or the task was lost
                    finish(t, _died(t, f"the Dask task failed: {type(e).__name__}: {e}"),
                           persist=False)
                    continue
                finish(t, row, digest)
    except BaseException:
        try:
            c.cancel(list(futs))
        except Exception:  # noqa: BLE001 - the cluster is gone: nothing to cancel
            pass
        raise
    finally:
        if own:
            c.close()


# =========================================================================== command line
def _parse_values(text: str, parse: Callable[[str], Any]) -> list:
    """``a,b,c`` (a list) or ``start:stop:count`` (evenly spaced, ends included)."""
    if text.count(":") == 2 and "," not in text:
        a, b, n = (s.strip() for s in text.split(":"))
        try:
            lo, hi, cnt = float(a), float(b), int(n)
        except ValueError:
            raise ModelError(f"a range is start:stop:count with numbers, found {text!r}") from None
        if cnt < 1:
            raise ModelError(f"the count of {text!r} must be at least 1")
        vals = np.linspace(lo, hi, cnt)
        out = []
        for v in vals:
            s = repr(float(v))
            if float(v).is_integer() and _is_int(a) and _is_int(b):
                s = str(int(v))
            out.append(parse(s))
        return out
    return [parse(s.strip()) for s in text.split(",") if s.strip()]


def _is_int(s: str) -> bool:
    try:
        int(s)
        return True
    except ValueError:
        return False


def sweep_arguments(p) -> None:
    """The arguments of ``gaussopt sweep`` (added to its argparse parser)."""
    p.add_argument("problem", help="problem name (see `gaussopt list`) or path to a module")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUES",
                   help="a swept parameter: a list a,b,c or a range start:stop:count "
                        "(repeat for a grid)")
    p.add_argument("--solver", action="append", default=None, metavar="NAME",
                   help="step solver (repeat for several; default closed_form)")
    p.add_argument("--rtol", type=float)
    p.add_argument("--atol", type=float)
    p.add_argument("--method", help="rk4, euler, RK45, DOP853, Radau, BDF, LSODA")
    p.add_argument("--dt", type=float)
    p.add_argument("--workers", type=int, default=None,
                   help="local worker processes (default: all cores)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on this Dask scheduler (e.g. tcp://host:8786)")
    p.add_argument("--no-workers-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="with --scheduler: stop (keeping the finished runs) once the cluster "
                        "has had no workers this long (default 60)")
    p.add_argument("--keep", choices=KEEP, default="summary",
                   help="also keep every trajectory (under --out/runs)")
    p.add_argument("--out", default="sweep", metavar="DIR",
                   help="directory of the runs, table.csv, table.md and the figures "
                        "(default: sweep); a second run with the same DIR computes only "
                        "the missing runs")


def cmd_sweep(args) -> int:
    """run a problem over a grid of parameters (local cores or a Dask cluster)"""
    from gaussopt.study.registry import (UsageError, build_signature, check_parameters,
                                         load_problem_module)

    mod = load_problem_module(args.problem)
    sig = build_signature(mod)
    grid: dict = {}
    for it in args.param:
        name, eq, text = it.partition("=")
        name = name.strip()
        if not eq or not name or not text.strip():
            raise UsageError(f"--param expects NAME=VALUES (a,b,c or start:stop:count), "
                             f"found {it!r}")
        colons = text.count(":")
        if colons and (colons != 2 or "," in text):
            raise UsageError(f"--param {it}: a range is start:stop:count (e.g. "
                             f"{name}=0:450:4, four values with both ends), a list is a,b,c")
        try:
            grid[name] = _parse_values(text.strip(), lambda s, n=name: sig.parse(n, s))
            for v in grid[name]:            # inside the range build() documents
                check_parameters(sig, {name: v}, args.problem)
        except ModelError as e:
            raise UsageError(f"--param {it}: {str(e).rstrip('.')}; `gaussopt show "
                             f"{args.problem}` lists the parameters") from None
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, found {args.workers}")
    settings = {k: getattr(args, k) for k in ("rtol", "atol", "method", "dt")
                if getattr(args, k) is not None}
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out!r}: {str(out)!r} exists and is not a directory")
    if not (args.no_workers_timeout > 0):
        raise UsageError(f"--no-workers-timeout must be a positive number of seconds, found "
                         f"{args.no_workers_timeout:g}")
    with warnings.catch_warnings():         # a stop is told below, in one line
        warnings.filterwarnings("ignore", "sweep (interrupted|stopped)", UserWarning)
        res = sweep(mod, grid or [{}], solver=args.solver or "closed_form",
                    settings=settings, keep=args.keep, out=out, client=args.scheduler,
                    workers=args.workers, progress=True,
                    no_workers_timeout=args.no_workers_timeout)
    (out / "table.md").write_text(res.to_markdown() + "\n")
    print(res.to_markdown())
    from gaussopt.study.plotting import sweep_figures

    figs = sweep_figures(res, list(grid), out, problem=mod)
    print(f"wrote {out}/: table.csv, table.md ({len(res.rows)} runs: {res.computed} computed, "
          f"{res.reused} from earlier runs)" + (f", figures {', '.join(figs)}" if figs else ""))
    if res.interrupted:
        why = "interrupted" if res.stopped in ("", "interrupted") else f"stopped: {res.stopped}"
        print(f"{why}: run the same command again to compute the missing runs",
              file=sys.stderr)
        return 1
    return 0 if all(r.get("success") for r in res.rows) else 1
