"""What keeps a run's result when its resources or its user say stop.

:class:`MemoryBudget` bounds the memory a run's stored data will take (the output
samples, the rank events, the dense solution's steps, counted with what the
:class:`~gaussopt.core.result.Trajectory` built from them takes), so that a run that would
outgrow it stops with ``success=False`` and keeps what it computed instead of taking the
machine's memory. :class:`InterruptGuard` lets the first Ctrl-C stop a run and defers
further ones until the partial result is assembled and returned.
"""

from __future__ import annotations

import signal
import threading
from typing import Optional

__all__ = ["DEFAULT_MAX_MEMORY", "MemoryBudget", "InterruptGuard"]

#: default ``max_memory`` of :func:`gaussopt.simulate`: 1 GiB of stored data
DEFAULT_MAX_MEMORY = float(2**30)

_F = 8                     # bytes of a float64 / int64
#: a :class:`~gaussopt.core.result.RankEvent` as Python holds it (slots object, two floats,
#: the list of row labels; the labels themselves are shared), without its rows: measured
#: with the engine's record, 324 bytes per event of the four-bar (m = 2) on 3.3 million
#: events (the process's growth, allocator overhead included)
_RANK_EVENT_PY = 260
#: a step of the dense solution beyond its arrays (interpolant object, array headers)
_DENSE_STEP_PY = 600


class MemoryBudget:
    """The bytes a run's stored data take, and how far its buffers may grow.

    Parameters
    ----------
    limit : float
        Bytes (``inf``: no limit).
    n, m : int
        Coordinates and constraint rows of the system.
    dense_rows : int
        Rows of a step's interpolant (its coefficients, each of ``2 n`` floats).

    Notes
    -----
    Per output sample: the engine's time, state and step mark (``2 + 2 n`` numbers), their copy
    and the Trajectory's arrays (``q``, ``v``, ``a``, ``constraint_force``,
    ``multipliers``, five diagnostics, ``rank``, ``energy``). Per rank event: the
    engine's record (``6`` numbers and ``m`` flags) and the Python
    :class:`~gaussopt.core.result.RankEvent` with its list of rows. Per dense step: the
    interpolant's arrays and the stored state. The estimate is within tens of percent
    of the process's growth; the default budget leaves room for that.
    """

    def __init__(self, limit: float, n: int, m: int, dense_rows: int = 1):
        self.limit = float(limit)
        self.sample = _F * (2 + 2 * n) * 2 + _F * (4 * n + m + 12)
        self.engine_sample = _F * (2 + 2 * n)
        self.event = 6 * _F + m + _RANK_EVENT_PY + _F * m
        self.dense_step = _F * 2 * n * (dense_rows + 3) + _DENSE_STEP_PY

    def bytes(self, samples: int, events: int, dense_steps: int = 0) -> float:
        """Bytes of ``samples`` output samples, ``events`` rank events and
        ``dense_steps`` steps of dense output."""
        return samples * self.sample + events * self.event + dense_steps * self.dense_step

    def fits(self, samples: int, events: int, dense_steps: int = 0) -> bool:
        return self.bytes(samples, events, dense_steps) <= self.limit

    def grown(self, have: int, want: int, per_item: int, other: float) -> int:
        """The capacity a buffer of ``have`` items grows to: ``want``, or as many as
        fit beside ``other`` bytes; ``have`` when none more fits."""
        if other + want * per_item <= self.limit:
            return want
        room = int((self.limit - other) // per_item) if per_item else want
        return max(have, min(want, room))

    def message(self, t: float, samples: int, events: int, dense_steps: int,
                max_steps: int) -> str:
        """The message of a run stopped by its budget."""
        parts = [f"{samples} output samples", f"{events} rank events"]
        if dense_steps:
            parts.append(f"{dense_steps} dense-output steps")
        held = self.bytes(samples, events, dense_steps)
        return (f"Stopped at t={t:.9g}: the run's stored data ({', '.join(parts)}, about "
                f"{held / 1e6:.0f} MB with the Trajectory built from them) reached "
                f"max_memory={self.limit:.4g} bytes before max_steps={max_steps} steps. "
                "What was computed is kept. Pass a larger `max_memory` (inf: no limit), "
                "fewer output times (`t_eval`), monitor_rank=False (no rank events) or a "
                "shorter `t_span`.")


class InterruptGuard:
    """SIGINT handling of one run.

    While the run's arguments are checked and its code compiled, Ctrl-C raises
    ``KeyboardInterrupt`` as usual (nothing is computed yet). While the engine runs, the
    handler only records it (:attr:`requested`) and the driver raises
    ``KeyboardInterrupt`` at its next chunk boundary (every ~20 ms, or every step with a
    ``progress`` callback, events or dense output): a ``KeyboardInterrupt`` raised inside
    the model's callbacks, which the compiled engine calls, could be swallowed there or
    leave a buffer half written. Once the run has ended (:meth:`finishing`) further
    Ctrl-Cs are counted (:attr:`deferred`), not raised, until the guard exits, so that a
    second Ctrl-C while the partial result is assembled does not lose it; they only cut
    the recomputation of the output samples short (:attr:`stop_requested`).

    Installed only in the main thread and only over Python's default handler (a program
    with its own SIGINT handler keeps it); otherwise the guard does nothing.
    """

    def __init__(self) -> None:
        self.count = 0
        self.deferred = 0
        self.requested = False
        self._state = "setup"
        self._old: Optional[object] = None
        self._installed = False

    def __enter__(self) -> "InterruptGuard":
        if threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                    self._old = signal.signal(signal.SIGINT, self._handler)
                    self._installed = True
            except (ValueError, OSError):       # pragma: no cover - no signals here
                pass
        return self

    def __exit__(self, *exc) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._old)
            self._installed = False

    def _handler(self, signum, frame) -> None:
        self.count += 1
        if self._state == "setup":
            raise KeyboardInterrupt
        if self._state == "running" and not self.requested:
            self.requested = True               # the driver stops at its next chunk
            return
        self.deferred += 1

    def running(self) -> None:
        """The engine starts: from here on a Ctrl-C is recorded and the driver stops. (A
        guard shared by the phases of a contact run is running again at every phase: a
        Ctrl-C deferred between two phases stops the next one at its first chunk.)"""
        if self._installed:
            self._state = "running"
            if self.deferred:
                self.requested = True

    @property
    def interrupted(self) -> bool:
        """A Ctrl-C has arrived since the run started (recorded or deferred)."""
        return self.requested or self.deferred > 0

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if a Ctrl-C was recorded during the run (the
        drivers call this between chunks)."""
        if self.requested and self._state == "running":
            raise KeyboardInterrupt

    def finishing(self) -> None:
        """The run has ended: defer every further interrupt."""
        self._state = "finishing"

    @property
    def stop_requested(self) -> bool:
        """A Ctrl-C arrived after the run ended (long loops assembling the result stop
        early)."""
        return self.deferred > 0
