"""Rank monitoring along a run: singular positions located as sign changes.

At a *singular position* the constraint rows lose rank for an instant: on
paper 001's four-bar the row ``[l cos th1, -l cos th2, 0]`` vanishes at
``th1 = pi/2 + k pi``; on a linkage rows become dependent at a folded
configuration. A threshold on a singular value cannot locate such a passage
reliably -- the smallest singular value the integrator happens to sample
depends on the step sizes and the rounding of the machine. Along a smooth
path ``A(t)`` the singular values can instead be continued *analytically*:
with the singular pair ``(u, v)`` of the ``k``-th singular value at the
start of a step, ``g(t) = u^T A(t) v`` is a smooth function that equals
``+s_k`` at the start and changes sign where the analytic singular value
passes through zero. A passage is therefore a sign change of the
continued singular value on the step's dense output -- seen as a singular
pair that turns over between two samples, or as a sign change of ``g`` --
and its time is the root of ``g``, re-centred on the singular pair at each
iterate (Newton) until it no longer moves. A sign change that
belongs to a rotating pair rather than a vanishing singular value is told
apart by the size of the singular value at the root (a true passage has it at
the level of the root's accuracy, orders of magnitude below its size at the
ends of the bracket).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
from scipy.optimize import brentq

from . import kernel as K
from .result import RankEvent
from .system import System

__all__ = ["RankMonitor"]

_EPS = float(np.finfo(float).eps)
#: interior samples of every accepted step (fractions of the step)
_SAMPLES = (0.25, 0.5, 0.75)
#: a root whose singular value is not below this fraction of its size at the
#: bracket's ends belongs to a rotating pair, not a vanishing singular value
_DIP = 1e-3


class RankMonitor:
    """Track the numerical rank of the constraint rows along a run.

    Parameters
    ----------
    system : System
    labels : sequence of str
        Row labels (:meth:`System.row_labels`).
    rank_tol : float
        A singular value of the scaled rows below ``rank_tol`` does not count
        in the rank.
    reference : callable
        ``reference() -> ndarray (m,)`` or None: the reference scale of every
        row (the step solver's, from accepted states); the rows are divided by
        it, so that a row that vanishes shows up as a small singular value
        like rows that become dependent.

    Notes
    -----
    Events (:class:`~gaussopt.RankEvent`): ``"passage"`` (the rank dips at one
    instant, located as described in the module docstring), ``"drop"`` and
    ``"rise"`` (the rank at accepted states changes and stays changed for
    more than one step).
    """

    def __init__(self, system: System, labels: Sequence[str], rank_tol: float,
                 reference: Callable[[], Optional[np.ndarray]]) -> None:
        self.system = system
        self.labels = list(labels)
        self.rank_tol = float(rank_tol)
        self.reference = reference
        self.r0: Optional[int] = None
        self.events: list[RankEvent] = []
        self._pair = None
        self._rank: Optional[int] = None
        self._pending: Optional[RankEvent] = None
        self.evaluations = 0

    # ------------------------------------------------------------------ pieces
    def _scaled(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        A, _ = self.system.rows(t, q, v)
        self.evaluations += 1
        ref = self.reference()
        if ref is None:
            return A
        return A / np.where(ref > 0, ref, 1.0)[:, None]

    def _svd(self, A: np.ndarray):
        return K.svd_econ(np.ascontiguousarray(A, dtype=float))

    def _rows_of(self, u: np.ndarray) -> list[str]:
        big = np.flatnonzero(np.abs(u) > 0.3 * np.abs(u).max())
        return [self.labels[i] if i < len(self.labels) else str(i) for i in big]

    def _count(self, s: np.ndarray) -> int:
        return int(np.count_nonzero(s > self.rank_tol))

    # ------------------------------------------------------------------ interface
    def start(self, t: float, q: np.ndarray, v: np.ndarray) -> None:
        """The initial state: the regular rank ``r0`` and the first singular pair."""
        U, s, V = self._svd(self._scaled(t, q, v))
        self.r0 = self._rank = self._count(s)
        self._pair = self._smallest(U, s, V)

    def sigma_min(self) -> float:
        """The smallest live singular value of the scaled rows at the last accepted state."""
        return self._pair[2] if self._pair is not None else float("inf")

    def _smallest(self, U, s, V):
        """The singular pair of the smallest live singular value (None without rows)."""
        k = self._crossing_index(s)
        if k < 0:
            return None
        return U[:, k].copy(), V[:, k].copy(), float(s[k])

    def update(self, t_prev: float, t: float, q: np.ndarray, v: np.ndarray,
               interp: Callable[[float], tuple[np.ndarray, np.ndarray]]) -> None:
        """Register the accepted step ``(t_prev, t]`` ending at the (projected) state
        ``(q, v)``; ``interp(tt) -> (q, v)`` is the step's dense output.

        The smallest live singular value is followed through samples of the step;
        between two samples it has changed sign when its singular pair turned over
        (``(u_a . u_b)(v_a . v_b) < 0``: the SVD keeps singular values positive,
        so one vector of the analytically continued pair flips) or when
        ``g(t) = u_a^T A(t) v_a`` changed sign. Either makes the sub-interval a
        candidate, refined by :meth:`_passage`.
        """
        if self.r0 is None:
            self.start(t_prev, *interp(t_prev))
        step = (t_prev, t, q, v, interp)
        prev_t, prev = t_prev, self._pair
        for j, f in enumerate(_SAMPLES + (1.0,)):
            tt = t if f == 1.0 else t_prev + f * (t - t_prev)
            A = self._scaled(tt, q, v) if f == 1.0 else self._scaled(tt, *interp(tt))
            U, s, V = self._svd(A)
            cur = self._smallest(U, s, V)
            if prev is not None and cur is not None:
                u0, v0, s0 = prev
                u1, v1, s1 = cur
                flipped = float(u0 @ u1) * float(v0 @ v1) < 0.0
                g1 = float(u0 @ (A @ v0))
                if flipped or (s0 > 0.0 and g1 <= 0.0):
                    self._passage(prev_t, tt, prev, step)
            prev_t, prev = tt, cur
        r = self._count(s)
        self._rank_change(t, r, U)
        self._pair = prev

    # ------------------------------------------------------------------ events
    def _rank_change(self, t: float, r: int, U: np.ndarray) -> None:
        last = self._rank
        pend = self._pending
        if pend is not None:
            self._pending = None
            if r == pend.rank_before:
                # the rank came back at the next accepted step: an instant, not a change
                self._rank = r
                return
            self.events.append(pend)
        if r != last:
            ev = RankEvent(t=float(t), kind="drop" if r < last else "rise", rank_before=last,
                           rank_min=min(r, last), rank_after=r,
                           rows=self._rows_of(U[:, min(r, last) - 1]) if min(r, last) > 0 else [],
                           sigma_min=float("nan"))
            self._pending = ev
        self._rank = r

    def finish(self) -> list[RankEvent]:
        """Flush a pending rank change (the run ended right after it); return the events."""
        if self._pending is not None:
            self.events.append(self._pending)
            self._pending = None
        return self.events

    def _passage(self, ta: float, tb: float, pair, step) -> bool:
        """Locate the zero of the smallest live singular value in or near ``[ta, tb]``
        (a sub-interval of the accepted step ``step``) and record a passage.

        Start: the root of ``g(t) = u_a^T A(t) v_a`` (the pair at ``ta``) if it
        changes sign in the sub-interval, else its midpoint. Then Newton's
        iteration on ``g`` re-centred on the singular pair at the current
        iterate (quadratic convergence: the root of the linearization at ``t_k``
        is off by ``O(|t_k - t*|^2)``), kept inside the step. Accepted when the
        singular value at the converged root is below ``_DIP`` times its size at
        the ends of the sub-interval (a true zero is at the level of the root's
        accuracy; a pair that merely rotated keeps its size).
        """
        t_lo, t_hi, q_end, v_end, interp = step

        def A_at(tt):
            st = (q_end, v_end) if tt == t_hi else interp(tt)
            return self._scaled(tt, *st)

        u, w, s_a = pair
        xtol = 4 * _EPS * max(1.0, abs(t_hi))
        ga, gb = s_a, float(u @ (A_at(tb) @ w))
        if ga > 0.0 >= gb:
            ts = tb if gb == 0.0 else brentq(lambda tt: float(u @ (A_at(tt) @ w)), ta, tb,
                                              xtol=xtol, maxiter=200)
        else:
            ts = 0.5 * (ta + tb)
        span = t_hi - t_lo
        for _ in range(12):
            U, s, V = self._svd(A_at(ts))
            k = self._crossing_index(s)
            u, w, sk = U[:, k], V[:, k], float(s[k])
            if sk == 0.0:
                break
            d = max(1e-7 * span, 16 * xtol)
            lo, hi = max(t_lo, ts - d), min(t_hi, ts + d)
            slope = (float(u @ (A_at(hi) @ w)) - float(u @ (A_at(lo) @ w))) / (hi - lo)
            if slope == 0.0 or not np.isfinite(slope):
                break
            t_new = min(t_hi, max(t_lo, ts - sk / slope))
            moved = abs(t_new - ts)
            ts = t_new
            if moved <= xtol:
                break
        U, s, V = self._svd(A_at(ts))
        k = self._crossing_index(s)
        smin = float(s[k])
        ends = max(s_a, float(self._svd(A_at(tb))[1][k]))
        if not smin <= _DIP * ends:
            return False                             # a rotating pair, not a passage
        for e in self.events[-3:]:
            if e.kind == "passage" and abs(e.t - ts) <= max(1e-9 * span, 64 * xtol):
                return False                         # the same crossing, found twice
        rmin = self._count(np.where(np.arange(s.size) == k, 0.0, s))
        self.events.append(RankEvent(t=float(ts), kind="passage", rank_before=self._rank,
                                     rank_min=rmin, rank_after=self._rank,
                                     rows=self._rows_of(U[:, k]), sigma_min=smin))
        return True

    def _crossing_index(self, s: np.ndarray) -> int:
        """Index of the crossing singular value at a root: the smallest of the live ones."""
        r0 = self.r0 or 1
        return min(r0, s.size) - 1
