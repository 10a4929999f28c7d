"""Dense output and events of :func:`gaussopt.simulate`, with solve_ivp's conventions.

:class:`DenseSolution` is ``Trajectory.sol``: the integrator's interpolant of
each accepted step, projected onto the constraints the way the run projects
its states, and equal to the stored state at every step. :class:`EventTracker`
locates the zeros of the user's event functions ``f(t, q, v)`` on that
projected solution, step by step, as :func:`scipy.integrate.solve_ivp` does on
its own (unconstrained) solution: a sign change between the ends of a step
(filtered by the event's ``direction``), refined by Brent's method.

Both are independent of how a step is taken: a step is handed over as its
interval, its projected end state and an interpolant ``y(t)`` (the compiled
engine's Runge--Kutta or Hermite interpolant, or a scipy ``DenseOutput``).
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, Optional, Sequence

import numpy as np

from gaussopt.core.exceptions import ModelError

__all__ = ["DenseSolution", "EventTracker", "HermiteStep", "RungeKuttaStep", "Dop853Step",
           "ScipyStep"]

_EPS = float(np.finfo(float).eps)


# --------------------------------------------------------------------------- step interpolants
# The engine's interpolants (:func:`gaussopt.integrate.engine.dense_eval`), evaluated on arrays of
# times: each maps ``t``, shape (k,), to the states, shape (k, 2n).

def evaluation_times(t) -> tuple[np.ndarray, bool]:
    """The times a dense solution is asked for: ``(ts, scalar)``, ``ts`` a 1-D float array
    (``t`` a float: one entry, ``scalar`` True); a ModelError naming ``t`` otherwise."""
    scalar = np.ndim(t) == 0
    try:
        ts = np.atleast_1d(np.asarray(t, dtype=float))
    except (TypeError, ValueError) as e:
        raise ModelError(f"`t` must be a float or an array of floats, found {t!r}.") from e
    if ts.ndim != 1:
        raise ModelError(f"`t` must be a float or a 1-D array, found shape {ts.shape}.")
    return ts, scalar

class HermiteStep:
    """Cubic Hermite interpolant from ``(y, y')`` at both ends (``rk4``, ``euler``)."""

    __slots__ = ("t_old", "h", "y_old", "f_old", "y", "f")

    def __init__(self, t_old, h, y_old, f_old, y, f):
        self.t_old, self.h = t_old, h
        self.y_old, self.f_old, self.y, self.f = y_old, f_old, y, f

    def __call__(self, t: np.ndarray) -> np.ndarray:
        x = ((t - self.t_old) / self.h)[:, None]
        return ((2 * x**3 - 3 * x**2 + 1) * self.y_old + (x**3 - 2 * x**2 + x) * self.h * self.f_old
                + (-2 * x**3 + 3 * x**2) * self.y + (x**3 - x**2) * self.h * self.f)


class RungeKuttaStep:
    """``y_old + h sum_i Q_i x^(i+1)`` (scipy's RK23/RK45 dense output; ``Q = K^T P``)."""

    __slots__ = ("t_old", "h", "y_old", "Q")

    def __init__(self, t_old, h, y_old, Q):
        self.t_old, self.h, self.y_old, self.Q = t_old, h, y_old, Q

    def __call__(self, t: np.ndarray) -> np.ndarray:
        x = (t - self.t_old) / self.h
        powers = np.cumprod(np.repeat(x[:, None], self.Q.shape[0], axis=1), axis=1)
        return self.y_old + self.h * powers @ self.Q


class Dop853Step:
    """DOP853's 7th-order dense output in its nested form (coefficients ``F``, shape (7, 2n))."""

    __slots__ = ("t_old", "h", "y_old", "F")

    def __init__(self, t_old, h, y_old, F):
        self.t_old, self.h, self.y_old, self.F = t_old, h, y_old, F

    def __call__(self, t: np.ndarray) -> np.ndarray:
        x = ((t - self.t_old) / self.h)[:, None]
        acc = np.zeros((x.shape[0], self.F.shape[1]))
        P = self.F.shape[0]
        for i in range(P - 1, -1, -1):
            acc += self.F[i]
            acc *= x if (P - 1 - i) % 2 == 0 else 1.0 - x
        return self.y_old + acc


class LazyStep:
    """A step's interpolant built when it is first evaluated (``build()`` gives it): a run
    with events but no dense output builds DOP853's (three more evaluations of the model)
    only in the steps whose events need their interior states
    (:meth:`gaussopt.integrate.engine_run.Run.interpolant`)."""

    __slots__ = ("build", "step")

    def __init__(self, build):
        self.build, self.step = build, None

    def __call__(self, t: np.ndarray) -> np.ndarray:
        if self.step is None:
            self.step = self.build()
        return self.step(t)


class QuinticScreen:
    """The quintic Hermite interpolant of a step from ``(q, q', q'')`` at both ends (``y =
    (q, v)``, ``f = (v, a)``: ``q' = v``, ``q'' = a``), ``v`` its derivative: what the
    events' screens (``interp_screen``) of a DOP853 run evaluate, from the step's ends
    before projection. Its errors are ``O(h^6)`` in ``q`` and ``O(h^5)`` in ``v``, far below
    the margin of the screen's parabola test (its curvature term, ``O(h^2)``, plus 1e-3 of
    the values: :func:`_parabola_clear`), and it needs none of the three evaluations of the
    model that DOP853's 7th-order interpolant adds to a step."""

    __slots__ = ("t_old", "h", "y_old", "f_old", "y", "f")

    def __init__(self, t_old, h, y_old, f_old, y, f):
        self.t_old, self.h = t_old, h
        self.y_old, self.f_old, self.y, self.f = y_old, f_old, y, f

    def __call__(self, t: float) -> np.ndarray:
        """The state ``(q, v)`` at the time ``t`` (a float), shape (2n,)."""
        h = self.h
        x = (t - self.t_old) / h
        x2, x3 = x * x, x * x * x
        x4, x5 = x3 * x, x3 * x2
        n = self.y.size // 2
        q0, v0, a0 = self.y_old[:n], self.f_old[:n], self.f_old[n:]
        q1, v1, a1 = self.y[:n], self.f[:n], self.f[n:]
        # the basis of q0, h v0, h^2 a0, q1, h v1, h^2 a1 and its derivatives in x
        b = (1 - 10 * x3 + 15 * x4 - 6 * x5, x - 6 * x3 + 8 * x4 - 3 * x5,
             0.5 * (x2 - 3 * x3 + 3 * x4 - x5), 10 * x3 - 15 * x4 + 6 * x5,
             -4 * x3 + 7 * x4 - 3 * x5, 0.5 * (x3 - 2 * x4 + x5))
        d = (-30 * x2 + 60 * x3 - 30 * x4, 1 - 18 * x2 + 32 * x3 - 15 * x4,
             0.5 * (2 * x - 9 * x2 + 12 * x3 - 5 * x4), 30 * x2 - 60 * x3 + 30 * x4,
             -12 * x2 + 28 * x3 - 15 * x4, 0.5 * (3 * x2 - 8 * x3 + 5 * x4))
        hh = h * h
        q = b[0] * q0 + b[1] * h * v0 + b[2] * hh * a0 + b[3] * q1 + b[4] * h * v1 \
            + b[5] * hh * a1
        v = (d[0] * q0 + d[1] * h * v0 + d[2] * hh * a0 + d[3] * q1 + d[4] * h * v1
             + d[5] * hh * a1) / h
        return np.concatenate([q, v])


class ScipyStep:
    """A :class:`scipy.integrate.DenseOutput` (Radau, BDF, LSODA steps)."""

    __slots__ = ("dense",)

    def __init__(self, dense):
        self.dense = dense

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return np.asarray(self.dense(t)).reshape(-1, t.size).T


# --------------------------------------------------------------------------- dense solution
class DenseSolution:
    """``Trajectory.sol``: the state ``(q, v)`` anywhere in the computed span.

    Within an accepted step the integrator's interpolant of that step is
    evaluated and the result projected onto the position and velocity
    constraints with the run's own projection (``Projection`` settings, the
    rank decisions of the step), so ``sol(t)`` lies on the constraint manifold
    to the run's projection tolerance; without a projection
    (``stabilization=Baumgarte(...)`` or ``None``) the interpolant is returned
    as it is. At the accepted steps it returns the stored (projected) states
    exactly. Between steps its error is about the local error of a step
    (the interpolants of ``DOP853``/``RK45``/``RK23`` are of order 7/4/3, the
    cubic Hermite of ``rk4``/``euler`` of order 3).

    Call as ``q, v = sol(t)``: ``t`` a float gives arrays of shape ``(n,)``,
    an array of ``N`` times arrays of shape ``(N, n)``. Times outside the
    computed span raise :class:`~gaussopt.ModelError`.

    ``sol`` holds the model's compiled functions; it is not written by
    :meth:`Trajectory.save` (a loaded trajectory has ``sol = None``).
    """

    def __init__(self, n: int, t0: float, y0: np.ndarray,
                 project: Optional[Callable[[float, np.ndarray, float], np.ndarray]],
                 keep: bool = True):
        self.n = n
        self._project = project
        self._keep = keep
        self._t = [float(t0)]
        self._y = [np.array(y0, dtype=float)]
        self._steps: list = []          # interpolant of step i: [t[i], t[i+1]]
        self._floors: list = []         # the projection's "vanished" floor during step i
        self._arrays: Optional[tuple] = None

    # ---------------------------------------------------------------- building
    def append(self, t_new: float, y_new: np.ndarray, interpolant, floor: float = 0.0) -> None:
        """Add an accepted step ending at ``t_new`` with the (projected) state ``y_new``."""
        if not self._keep:
            self._t, self._y = self._t[-1:], self._y[-1:]
            self._steps, self._floors = [], []
        self._t.append(float(t_new))
        self._y.append(np.array(y_new, dtype=float))
        self._steps.append(interpolant)
        self._floors.append(float(floor))
        self._arrays = None

    def end_at(self, t_end: float, y_end: np.ndarray) -> None:
        """Cut the last step at ``t_end`` (a terminal event) with the state there."""
        self._t[-1] = float(t_end)
        self._y[-1] = np.array(y_end, dtype=float)
        self._arrays = None

    @property
    def t_min(self) -> float:
        return self._t[0]

    @property
    def t_max(self) -> float:
        return self._t[-1]

    def in_last_step(self, t: float) -> np.ndarray:
        """The state (projected) at ``t`` within the last step, ``t`` a float; shape (2n,)."""
        if t == self._t[-1]:
            return self._y[-1].copy()
        if t == self._t[-2]:
            return self._y[-2].copy()
        y = self._steps[-1](np.array([t]))[0]
        return self._projected(t, y, self._floors[-1])

    def raw_in_last_step(self, t: float) -> np.ndarray:
        """The last step's interpolant at ``t``, before projection; shape (2n,)."""
        return self._steps[-1](np.array([t]))[0]

    def _projected(self, t: float, y: np.ndarray, floor: float) -> np.ndarray:
        return y if self._project is None else self._project(t, y, floor)

    # ---------------------------------------------------------------- evaluation
    def __call__(self, t):
        """``(q, v)`` at ``t`` (float: shapes (n,); array of N: shapes (N, n))."""
        ts, scalar = evaluation_times(t)
        if self._arrays is None:
            self._arrays = (np.asarray(self._t), np.asarray(self._y))
        tb, yb = self._arrays
        bad = ~((ts >= tb[0]) & (ts <= tb[-1]))
        if np.any(bad):
            raise ModelError(f"`t` must lie within the computed span [{tb[0]}, {tb[-1]}], "
                             f"found {ts[bad][0]!r}.")
        out = np.empty((ts.size, yb.shape[1]))
        i = np.searchsorted(tb, ts, side="left")
        at_step = tb[np.minimum(i, tb.size - 1)] == ts
        out[at_step] = yb[i[at_step]]
        inner = np.flatnonzero(~at_step)
        seg = i[inner] - 1                      # tb[seg] < t < tb[seg + 1]
        for s in np.unique(seg):
            idx = inner[seg == s]
            ys = self._steps[s](ts[idx])
            for k, j in enumerate(idx):
                out[j] = self._projected(float(ts[j]), ys[k], self._floors[s])
        q, v = out[:, :self.n], out[:, self.n:]
        if scalar:
            return q[0].copy(), v[0].copy()
        return q, v

    def __repr__(self) -> str:
        return (f"DenseSolution(t=[{self._t[0]}, {self._t[-1]}], steps={len(self._steps)}, "
                f"projected={self._project is not None})")


# --------------------------------------------------------------------------- events
#: evaluations an event's interior scan may add to a step where its points do not resolve
#: the function near zero (:meth:`EventTracker._scan`)
REFINE_BUDGET = 256


def _parabola_clear(g0, gm, g1, xm):
    """Whether the parabola ``p`` through ``(0, g0), (xm, gm), (1, g1)`` (three values of one
    sign, ``0 < xm < 1``) keeps that sign on [0, 1] by more than its curvature term
    ``|p''| / 2`` plus 1e-3 of the values: a function that the three points resolve departs
    from its parabola by far less, and has no zero in between. Floats, or arrays (one test
    per element, the same operations: a step's screens of hundreds of contact points at
    once, where a Python call per point cost seconds per run; on floats Python's
    arithmetic is ten times numpy's on scalars)."""
    if np.ndim(g0):
        s = np.where(g0 > 0, 1.0, -1.0)
        g0, gm, g1 = s * g0, s * gm, s * g1
        c2 = ((gm - g0) - xm * (g1 - g0)) / (xm * xm - xm)
        c1 = (g1 - g0) - c2
        low = np.minimum(np.minimum(g0, g1), gm)
        inner = (c2 > 0.0) & (0.0 < -c1) & (-c1 < 2.0 * c2)
        with np.errstate(divide="ignore", invalid="ignore"):
            low = np.where(inner, np.minimum(low, g0 - c1 * c1 / (4.0 * c2)), low)
        return low > np.abs(c2) + 1e-3 * np.maximum(np.maximum(g0, g1), np.abs(gm))
    s = 1.0 if g0 > 0 else -1.0
    g0, gm, g1 = s * g0, s * gm, s * g1
    # p(x) = g0 + c1 x + c2 x^2 with p(xm) = gm, p(1) = g1
    c2 = ((gm - g0) - xm * (g1 - g0)) / (xm * xm - xm)
    c1 = (g1 - g0) - c2
    low = min(g0, g1, gm)
    if c2 > 0.0 and 0.0 < -c1 < 2.0 * c2:
        low = min(low, g0 - c1 * c1 / (4.0 * c2))
    return low > abs(c2) + 1e-3 * max(g0, g1, abs(gm))


class EventTracker:
    """The zeros of event functions ``f(t, q, v)`` along a run (solve_ivp's rules).

    ``events`` is one callable or a sequence of callables, each with optional
    attributes ``terminal`` (bool, or a positive int: stop at that occurrence),
    ``direction`` (> 0: only zeros where ``f`` goes from negative to
    positive; < 0 the reverse; 0 both) and ``interp_points`` (an int, default
    0: the sign is also checked at that many interior points of each step, so
    two zeros within one long step are not missed; refined where they do not resolve the
    function near zero, :meth:`_scan`). Each function is called once at the
    initial state to check that it returns a finite real number.

    ``rebase`` (optional callable ``rebase(t, q, v)``): the function is one of a family,
    and the member is chosen anew after every accepted step (not after one that ends in a
    terminal event), from the state at the step's end; every function's value there is then
    evaluated again (a rebase may change what the others read: a contact phase's forces
    follow its sliding points' reference directions). Within a step the function stays one
    continuous function of ``(t, q, v)``, so its zeros are found as every other's. A
    spatial sliding point's slip watch uses it: ``u . d_k`` with ``d_k`` the slip's
    direction at the step's start is positive there (``|u|``) and reaches zero exactly
    where the slip stops (or, within one step, turns by a right angle).

    ``shared`` and ``from_shared`` (optional, together): the function reads a quantity
    that others read too: ``shared(t, q, v)`` (the same object for all of them) computes
    it, ``from_shared(t, value)`` is the function's value from it (what the function
    returns). Every state's :meth:`values` then evaluates ``shared`` once (a contact
    phase's gap watches, one per open point, read one evaluation of every gap: with 160
    points, 160 evaluations of all gaps per state before).

    ``interp_screen`` (bool, default False; with ``interp_points``): the interior points are
    checked only in the steps where the function may come near zero. The function is
    evaluated at the step's middle on the interpolated state before its projection (no
    projection: a screen, not a root; with DOP853 the quintic Hermite interpolant of the
    step's ends, :class:`QuinticScreen`, which needs none of the three evaluations of the
    model that DOP853's own interpolant adds), and the parabola ``p(s)`` through the values at the
    step's start, middle and end (``s`` in [0, 1]) is taken for the function: where ``p``
    keeps the sign of both ends by more than its own curvature term ``|p''| / 2`` plus 1e-3
    of the values, the step has no zero pair to find (a function that a step resolves
    departs from its parabola by far less than that term), and the interior points are
    skipped; elsewhere they are checked as without the screen. A contact phase's force
    watches use it: away from lift-off a step costs one evaluation more instead of
    ``interp_points``.
    """

    def __init__(self, events, t0: float, q0: np.ndarray, v0: np.ndarray):
        if callable(events):
            events = (events,)
        elif isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
            raise ModelError("`events` must be a callable f(t, q, v) -> float or a sequence of "
                             f"them, found {type(events).__name__}.")
        events = tuple(events)
        if not events:
            raise ModelError("`events` must hold at least one callable f(t, q, v) -> float, "
                             "found an empty sequence.")
        self.functions = events
        k = len(events)
        self.n = q0.size
        self.max_count = np.full(k, np.inf)
        self.direction = np.zeros(k)
        self.interp = np.zeros(k, dtype=int)
        self.screen = np.zeros(k, dtype=bool)
        self.rebase: list[int] = []
        for i, f in enumerate(events):
            name = f"events[{i}]"
            if not callable(f):
                raise ModelError(f"`{name}` must be a callable f(t, q, v) -> float, found "
                                 f"{type(f).__name__}.")
            terminal = getattr(f, "terminal", None)
            if terminal is None or terminal is False or (isinstance(terminal, numbers.Integral)
                                                         and terminal == 0):
                pass
            elif terminal is True:
                self.max_count[i] = 1
            elif isinstance(terminal, numbers.Integral) and not isinstance(terminal, bool) \
                    and terminal > 0:
                self.max_count[i] = int(terminal)
            else:
                raise ModelError(f"`{name}.terminal` must be a bool or a positive int, found "
                                 f"{terminal!r}.")
            d = getattr(f, "direction", 0)
            if isinstance(d, bool) or not isinstance(d, numbers.Real) or not np.isfinite(d):
                raise ModelError(f"`{name}.direction` must be a finite real number (> 0, < 0 or "
                                 f"0), found {d!r}.")
            self.direction[i] = float(d)
            ip = getattr(f, "interp_points", 0)
            if isinstance(ip, bool) or not isinstance(ip, numbers.Integral) or ip < 0:
                raise ModelError(f"`{name}.interp_points` must be an int >= 0, found {ip!r}.")
            self.interp[i] = int(ip)
            sc = getattr(f, "interp_screen", False)
            if not isinstance(sc, (bool, np.bool_)):
                raise ModelError(f"`{name}.interp_screen` must be a bool, found {sc!r}.")
            self.screen[i] = bool(sc)
            rb = getattr(f, "rebase", None)
            if rb is not None:
                if not callable(rb):
                    raise ModelError(f"`{name}.rebase` must be a callable rebase(t, q, v), found "
                                     f"{type(rb).__name__}.")
                self.rebase.append(i)
        # functions that read one shared quantity (``shared(t, q, v)``, the same object,
        # and ``from_shared(t, value) -> float``: a contact phase's gap watches, one per
        # open point): :meth:`values` evaluates the source once per state
        groups: dict = {}
        for i, f in enumerate(events):
            src = getattr(f, "shared", None)
            if src is not None and callable(getattr(f, "from_shared", None)):
                groups.setdefault(id(src), (src, []))[1].append(i)
        self._groups = [(src, members, [events[i].from_shared for i in members])
                        for src, members in groups.values()]
        grouped = {i for _, members, _ in self._groups for i in members}
        #: a grouped function's source and reader: its evaluations at a step's interior
        #: points and screens (:meth:`value` with ``share``) read one evaluation of the
        #: source per state, kept in ``_memo`` for the step
        self._reader = {i: (src, events[i].from_shared) for src, members, _ in self._groups
                        for i in members}
        self._memo: dict = {}
        self._alone = [i for i in range(k) if i not in grouped]
        #: steps whose interior points a screen skipped (per event), and those it did not
        self.screened = np.zeros(k, dtype=np.int64)
        self.unscreened = np.zeros(k, dtype=np.int64)
        self.count = np.zeros(k)
        self.t_events: list[list[float]] = [[] for _ in events]
        self.y_events: list[list[np.ndarray]] = [[] for _ in events]
        self.terminated_by: Optional[int] = None
        self.failed: Optional[int] = None          # the event whose function raised
        self.t_terminal: Optional[float] = None
        self.y_terminal: Optional[np.ndarray] = None
        y0 = np.concatenate([q0, v0])
        self.g = self.values(t0, y0, initial=True)

    def start_at(self, t0: float, y0: np.ndarray) -> None:
        """Take the functions' values at ``t0`` from ``y0``: the start as the run's dense
        output gives it (projected onto the constraints), which its first step's interior
        continues. Evaluated at the start as given instead, a function of a quantity the
        projection moves (a contact phase's gap of a point beside the closed ones: MuJoCo's
        humanoid's foot, 1.4e-10 m) jumps between the start and the step's interior, and
        that jump is no event."""
        self.g = self.values(t0, np.asarray(y0, dtype=float), initial=True)

    def label(self, i: int) -> str:
        """``events[i] (name)`` for messages."""
        name = getattr(self.functions[i], "__name__", None)
        return f"events[{i}]" + (f" ({name})" if name and name != "<lambda>" else "")

    def value(self, i: int, t: float, y: np.ndarray, initial: bool = False,
              share: bool = False) -> float:
        """``f_i(t, q, v)`` as a float; ModelError unless it is a finite real number.
        ``share`` (the interior points and screens of a step): a function with a shared
        source reads the source's value at ``(t, y)``, kept for the step (the interior
        points of several gap watches of one contact phase: one evaluation of every gap per
        state)."""
        n = self.n
        got = self._reader.get(i) if share else None
        if got is None or initial:
            return self._float(i, t, self._call(i, t, initial, self.functions[i], y[:n].copy(),
                                                y[n:].copy()))
        src, reader = got
        key = (id(src), t, y.tobytes())
        shared = self._memo.get(key)
        if shared is None:
            if len(self._memo) > 256:
                self._memo.clear()
            shared = self._memo[key] = self._call(i, t, False, src, y[:n].copy(),
                                                  y[n:].copy())
        return self._float(i, t, self._call(i, t, False, reader, shared))

    def _call(self, i: int, t: float, initial: bool, f: Callable, *args):
        """``f(t, *args)`` for event ``i`` (its function at ``(q, v)``, its shared source,
        or its value from the source's, ``from_shared``): what it raises at the initial
        state as a ModelError naming the event; later as it is, the event recorded as the
        one that failed."""
        try:
            return f(t, *args)
        except Exception as e:
            if initial:
                raise ModelError(f"`events[{i}]` raised {type(e).__name__} at the initial state "
                                 f"(t={t}): {e}") from e
            self.failed = i
            raise

    def _float(self, i: int, t: float, r) -> float:
        """Event ``i``'s value ``r`` as a float; ModelError unless it is a finite real
        number."""
        if type(r) is float and math.isfinite(r):
            return r
        x = np.asarray(r)
        if x.size != 1 or x.dtype.kind not in "biuf" or not np.isfinite(x.reshape(-1)[0]):
            self.failed = i
            raise ModelError(f"`events[{i}]` must return a finite float, found {r!r} at t={t}.")
        return float(x.reshape(-1)[0])

    def _crosses(self, i: int, g0: float, g1: float) -> bool:
        up, down = g0 <= 0 <= g1, g0 >= 0 >= g1
        d = self.direction[i]
        return bool(up and d > 0 or down and d < 0 or (up or down) and d == 0)

    def values(self, t: float, y: np.ndarray, initial: bool = False) -> np.ndarray:
        """Every function's value at ``(t, y)``; the functions with a ``shared`` source
        read it once (:class:`EventTracker`)."""
        if not self._groups:
            return np.array([self.value(i, t, y, initial) for i in range(len(self.functions))])
        out = np.empty(len(self.functions))
        for i in self._alone:
            out[i] = self.value(i, t, y, initial)
        n = self.n
        for source, members, readers in self._groups:
            # (a source that raises is named by its first member, as that one's own
            # evaluation would be)
            shared = self._call(members[0], t, initial, source, y[:n].copy(), y[n:].copy())
            try:
                vals = np.array([f(t, shared) for f in readers], dtype=float)
                ok = bool(np.all(np.isfinite(vals)))
            except Exception:       # noqa: BLE001 - named member by member below
                ok = False
            if not ok:
                # (the first member that raises or returns no finite float, named as by
                # its own evaluation)
                vals = [self._float(i, t, self._call(i, t, initial, f, shared))
                        for i, f in zip(members, readers)]
            out[members] = vals
        return out

    def after_step(self, t_old: float, t_new: float, y_new: np.ndarray,
                   state: Callable[[float], np.ndarray],
                   raw: Optional[Callable[[float], np.ndarray]] = None) -> bool:
        """Record the events of the accepted step ``[t_old, t_new]``; True if one terminates.

        ``state(t)`` is the projected solution within the step (the stored states
        at its ends). An event is active when its function changes sign between
        the step's ends (zeros included, as solve_ivp), in its ``direction``; its
        time is the root of ``f(t, state(t))`` by Brent's method to ``4 eps``.
        ``raw(t)``: the step's state before projection (the step's interpolant, or a
        :class:`QuinticScreen`), for the screens of events with ``interp_screen``; without
        it every interior point is checked.
        """
        self._memo.clear()
        g_new = g_end = self.values(t_new, y_new)        # (g_new is replaced, not changed)
        g = self.g
        lo = np.full(g.size, t_old)
        hi = np.full(g.size, t_new)
        # each state of the step is made (interpolated and projected) once, whichever
        # events ask for it (the force events of a contact phase sample the same interior
        # points, and Brent's iterates may meet them)
        memo: dict = {}
        base = state

        def state(t: float) -> np.ndarray:
            y = memo.get(t)
            if y is None:
                if len(memo) > 256:
                    memo.clear()
                y = memo[t] = base(t)
            return y.copy()

        # events with ``interp_points``: the sign is also checked at that many interior
        # points of the step (a zero pair inside one long step is then found, as the
        # continuous callbacks of DifferentialEquations.jl do); the first bracket counts
        watched = np.flatnonzero(self.interp > 0)
        if raw is not None and watched.size:
            scr = watched[self.screen[watched]]
            clear = self._clear(scr, t_old, t_new, g[scr], g_new[scr], raw)
            self.screened[scr[clear]] += 1
            self.unscreened[scr[~clear]] += 1
            keep = np.ones(self.interp.size, dtype=bool)
            keep[scr[clear]] = False
            watched = watched[keep[watched]]
        for i in watched:
            found, prev_t, prev_g, tj, gj = self._scan(i, t_old, t_new, g[i], state)
            if found:
                lo[i], hi[i], g_new = prev_t, tj, g_new.copy()
                g_new[i] = gj
            else:
                lo[i] = prev_t
                g = g.copy()
                g[i] = prev_g
        up = (g <= 0) & (g_new >= 0)
        down = (g >= 0) & (g_new <= 0)
        active = np.flatnonzero(up & (self.direction > 0) | down & (self.direction < 0)
                                | (up | down) & (self.direction == 0))
        self.g = g_end
        if active.size == 0:
            if self.rebase:
                self._rebase(t_new, y_new)
            return False
        self.count[active] += 1
        from scipy.optimize import brentq

        def root(i: int) -> float:
            f = lambda t: self.value(i, t, state(t))          # noqa: E731
            fa, fb = f(lo[i]), f(hi[i])
            if fa * fb > 0.0:
                # (the values that made the bracket are not these: a function whose value
                # at a state is not one function of (t, q, v))
                self.failed = int(i)
                name = getattr(self.functions[i], "__name__", type(self.functions[i]).__name__)
                raise ModelError(
                    f"`events[{i}]` ({name}) changed sign between t={float(lo[i])!r} and "
                    f"t={float(hi[i])!r} as first evaluated, but evaluated again there it is "
                    f"{float(fa)!r} and {float(fb)!r}: its "
                    "value must be one function of (t, q, v) within a step.")
            te = brentq(f, lo[i], hi[i], xtol=4 * _EPS, rtol=4 * _EPS)
            # The event's state is taken past the crossing: Brent's root is within 4 eps
            # (1 + t) of it on either side, which for a function that jumps there is the
            # difference between its two sides. A contact point's force jumps below zero
            # where the surface under it curves away (a sphere sliding off a box's face over
            # its edge faster than sqrt(g r): the edge's curvature enters its gap's second
            # derivative there); located on the face's side, the contact problem saw the
            # face, kept the point, and the same event ended the next phase at once ("did
            # not settle" after 26 zero-length phases). Past it, the state's own quantities
            # are the side the motion enters. (For a continuous function the step is within
            # twice Brent's tolerance: the state moves by rounding.)
            ft = f(te)
            if ft != 0.0 and (ft > 0.0) == (fa > 0.0):
                # (the least step past it, doubling from one unit in the last place: the
                # crossing is within 4 eps (1 + t) of te, some 8 units at most)
                step = np.spacing(te)
                for _ in range(16):
                    tn = min(te + step, float(hi[i]))
                    fn = f(tn)
                    if fn == 0.0 or (fn > 0.0) != (fa > 0.0):
                        te = tn
                        break
                    if tn == hi[i]:
                        break
                    step *= 2.0
            return te

        roots = np.array([root(i) for i in active])
        order = np.argsort(roots, kind="stable")
        active, roots = active[order], roots[order]
        hit = np.flatnonzero(self.count[active] >= self.max_count[active])
        if hit.size:
            active, roots = active[:hit[0] + 1], roots[:hit[0] + 1]
        for i, te in zip(active, roots):
            ye = state(float(te))
            self.t_events[i].append(float(te))
            self.y_events[i].append(ye)
        if hit.size:
            self.terminated_by = int(active[-1])
            self.t_terminal = float(roots[-1])
            self.y_terminal = self.y_events[self.terminated_by][-1]
            return True
        if self.rebase:
            self._rebase(t_new, y_new)
        return False

    def _rebase(self, t: float, y: np.ndarray) -> None:
        """Choose the next member of every rebased function at ``(t, y)``, the end of the
        step just accepted, and evaluate every function there (the next step's start).

        Every function, not only the rebased ones: a rebase may change what the others
        read. dm_control's humanoid sliding on several points: a point's reference
        direction moved at a step's end changed the phase's force there, its group's
        cone margin at that state went from 13.5 N (kept from before the move) to -8.9 N,
        and the next step read the kept value as a crossing that Brent's method then
        could not bracket (``ValueError`` out of the run)."""
        n = self.n
        for i in self.rebase:
            try:
                self.functions[i].rebase(t, y[:n].copy(), y[n:].copy())
            except Exception:
                self.failed = i
                raise
        self.g = self.values(t, y)

    def _clear(self, which: np.ndarray, t_old: float, t_new: float, g0: np.ndarray,
               g1: np.ndarray, raw) -> np.ndarray:
        """Which of the events ``which`` keep the sign of their step's ends (``g0``, ``g1``)
        throughout the step, by the screen of :class:`EventTracker` (``interp_screen``): one
        state at the step's middle for all, each shared source read once there and its
        readers called directly (a model with hundreds of watched contact points screens
        them all at every step: event by event, through :meth:`value`, this was 60 % of
        dm_control's manipulator's run). A reader that raises or returns no finite float
        is evaluated again by :meth:`value`, which names it."""
        out = np.zeros(which.size, dtype=bool)
        a, b = g0.tolist(), g1.tolist()
        same = [j for j in range(which.size)
                if a[j] > 0 and b[j] > 0 or a[j] < 0 and b[j] < 0]
        if not same:
            return out
        tm = 0.5 * (t_old + t_new)
        ym = raw(tm)
        n = self.n
        shared: dict = {}
        gms = []
        for j in same:
            i = int(which[j])
            got = self._reader.get(i)
            gm = None
            if got is not None:
                src, reader = got
                val = shared.get(id(src))
                if val is None:
                    val = shared[id(src)] = self._call(i, tm, False, src, ym[:n].copy(),
                                                       ym[n:].copy())
                try:
                    gm = reader(tm, val)
                except Exception:     # noqa: BLE001 - named by value() below
                    gm = None
                if not isinstance(gm, float) or not math.isfinite(gm):
                    gm = None
            if gm is None:
                gm = self.value(i, tm, ym, share=True)
            gms.append(gm)
        if len(same) <= 8:
            for j, gm in zip(same, gms):
                out[j] = _parabola_clear(a[j], gm, b[j], 0.5)
        else:
            out[same] = _parabola_clear(g0[same], np.array(gms), g1[same], 0.5)
        return out

    def _scan(self, i: int, t_old: float, t_new: float, g0: float, state) -> tuple:
        """The interior points of event ``i`` in the step, in order: ``(True, t_a, g_a, t_b,
        g_b)`` around the first zero crossed in the event's direction, else ``(False, t, g,
        None, None)`` at the last interior point.

        ``interp_points`` points evenly spaced, refined where they do not resolve the
        function near zero: wherever three consecutive values of one sign fail
        :func:`_parabola_clear` (their parabola comes within its curvature term of zero),
        the two intervals are halved before the scan goes on, down to ``1/4096`` of the step
        and within :data:`REFINE_BUDGET` more evaluations per step. A function that varies
        in time faster than the even points (a resting contact under an oscillating push:
        error control then lets the steps grow) is sampled where it dips."""
        h = t_new - t_old
        k = int(self.interp[i])
        todo = [t_old + h * j / (k + 1) for j in range(1, k + 1)]
        pts = [(t_old, g0)]
        seen: dict = {}
        budget = REFINE_BUDGET
        min_span = h / 4096.0
        while todo:
            tj = todo.pop(0)
            gj = seen.get(tj)
            if gj is None:
                gj = seen[tj] = self.value(i, tj, state(tj), share=True)
            prev_t, prev_g = pts[-1]
            if self._crosses(i, prev_g, gj):
                return True, prev_t, prev_g, tj, gj
            pts.append((tj, gj))
            if len(pts) < 3 or budget <= 0:
                continue
            (ta, ga), (tb, gb), (tc, gc) = pts[-3:]
            if tc - ta > min_span and (ga > 0 and gb > 0 and gc > 0 or ga < 0 and gb < 0
                                       and gc < 0) \
                    and not _parabola_clear(ga, gb, gc, (tb - ta) / (tc - ta)):
                del pts[-2:]
                todo[:0] = [0.5 * (ta + tb), tb, 0.5 * (tb + tc), tc]
                budget -= 2
        return (False, *pts[-1], None, None)

    def arrays(self) -> tuple[list, list, list]:
        """``t_events``, ``q_events``, ``v_events``: per event arrays of shapes (k,), (k, n)."""
        n = self.n
        ts = [np.asarray(t, dtype=float) for t in self.t_events]
        ys = [np.asarray(y, dtype=float).reshape(len(y), 2 * n) for y in self.y_events]
        return ts, [y[:, :n].copy() for y in ys], [y[:, n:].copy() for y in ys]
