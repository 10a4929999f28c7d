"""Constraints of every kind, brought to the acceleration level as rows ``A a = b``.

=================================  ======================  ==========================================
constraint                         user gives              acceleration rows
=================================  ======================  ==========================================
:class:`Holonomic`                 ``phi(t, q)``           ``Phi_q a = -(Phi_q v)_q v - 2 Phi_qt v - Phi_tt``
:class:`Nonholonomic`              ``f(t, q, v)``          ``f_v a = -(f_q v + f_t)``
:class:`AccelerationConstraint`    ``A(t, q, v), b(...)``  ``A a = b`` (second/higher order, linear in a)
:class:`Inequality`                ``G(t, q, v), h(...)``  ``G a >= h`` (unilateral; ``solver="qp"`` only)
=================================  ======================  ==========================================

Automatic derivatives
---------------------
When ``jacobian`` or ``gamma`` are omitted they are computed numerically from
the one definition the user gave, so that constraint, Jacobian and convective
term can never drift apart:

* Jacobians (``Phi_q``, ``f_v``), ``Phi_t`` and the nonholonomic ``gamma =
  -(f_q v + f_t)`` use the **complex step** ``Im f(x + i h e) / h`` with
  ``h = 1e-30``: no subtractive cancellation, exact to machine precision
  (relative error ~1e-16). This needs a function written with numpy ufuncs
  (``np.sin``, ``np.sqrt``, ...) that accept complex input; ``math.sin``
  raises and ``abs``/``np.abs``/``max`` silently destroy the derivative. At
  its first evaluation every automatic derivative is cross-checked against a
  central difference and a :class:`~gaussopt.core.exceptions.ModelError` says
  which function is not complex-safe.
* The holonomic ``gamma = -d^2/ds^2 Phi(t + s, q + s v)`` (a second
  directional derivative) is the complex-step first derivative differentiated
  once more with a 4th-order central difference along the normalized direction
  ``(1, v)/|(1, v)|`` (step ``1e-3``, shortened by the first check when
  ``phi`` varies on a shorter length scale). Its error is ~1e-11 relative to
  ``|gamma| + |Phi'| |(1, v)|`` (tested in ``tests/test_constraints.py``; where
  ``gamma`` is much smaller than that scale no difference formula is
  relatively accurate). Pass ``gamma=`` (or build the system with
  :mod:`gaussopt.symbolic`) for exact values and ~5x less work per step.

Given derivatives (``jacobian=``, ``gamma=``, and those :mod:`gaussopt.symbolic`
generates) are cross-checked the same way by ``System.check``, before anything runs,
at the given state and at a nearby moving one: ``Phi_q`` against differences of
``phi``, the holonomic ``gamma`` against differences of ``Phi_q v + Phi_t`` along
``(1, v)`` (see ``Holonomic._check_gamma`` for the error estimate behind the
threshold), with rounding scales that do not vanish where ``phi`` or ``q`` do. A
Jacobian of ``_FD_COLUMNS_MAX`` (256) or more columns is compared along four fixed
directions instead of column by column (:func:`_fd_jacobian_check`: 24 evaluations of the
function instead of ``6 n``).
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, Optional

import numpy as np

from gaussopt.core.exceptions import ModelError

__all__ = [
    "Constraint",
    "Holonomic",
    "Nonholonomic",
    "AccelerationConstraint",
    "Inequality",
    "complex_step_jacobian",
]

_H = 1e-30  # complex step
_EPS = float(np.finfo(float).eps)
_D2_STEP = 1e-3  # step of the 4th-order difference for second directional derivatives


def _is_sparse(x) -> bool:
    """``x`` is a scipy.sparse matrix or array (told without importing scipy.sparse)."""
    return hasattr(x, "tocsr") and hasattr(x, "nnz")


def _dense_rows(J) -> np.ndarray:
    """A Jacobian as a 2-D float array (a scipy.sparse result densified)."""
    if type(J) is np.ndarray and J.ndim == 2:
        return J
    if _is_sparse(J):
        return np.asarray(J.toarray(), dtype=float)
    return np.atleast_2d(np.asarray(J, dtype=float))


def _sparse_rows(J):
    """A scipy.sparse Jacobian as CSR with sorted, summed indices; None for anything else."""
    if not _is_sparse(J):
        return None
    J = J.tocsr()
    if not J.has_canonical_format:
        J = J.copy()
        J.sum_duplicates()
    return J


def _as_vec(x, name: str) -> np.ndarray:
    if type(x) is np.ndarray and x.ndim == 1 and x.dtype.kind in "fc":
        return x                    # (the common case: what np.asarray would return)
    arr = np.asarray(x)
    if arr.dtype.kind not in "biufc":
        # (numbers held as objects -- sympy's Floats, say -- are numbers; strings, None,
        # anything else is not: a TypeError, which the callers name by constraint)
        ok = arr.dtype.kind == "O" and all(isinstance(e, numbers.Number) or
                                           hasattr(e, "__complex__") for e in arr.flat)
        if not ok or x is None:
            raise TypeError(f"`{name}` must return numbers, found {type(x).__name__} "
                            f"{str(x)[:60]!r}")
        arr = arr.astype(complex)
        if not np.any(arr.imag):
            arr = arr.real.copy()
    if arr.ndim == 0:
        arr = arr.reshape(1)
    elif arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    return arr


def complex_step_jacobian(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """Jacobian of ``fun`` at ``x`` by the complex step, one column per coordinate.

    Parameters
    ----------
    fun : callable
        ``fun(x) -> ndarray, shape (k,)``, analytic (complex-safe) in ``x``.
    x : ndarray, shape (n,)

    Returns
    -------
    J : ndarray, shape (k, n)
        Exact to machine precision for complex-safe ``fun``.
    """
    x = np.asarray(x, dtype=float)
    n = x.size
    if n == 0:
        return np.zeros((0, 0))
    # row j: x with the step on coordinate j (each call gets a row of its own)
    X = x + _steps(n)
    if n == 1:
        return _as_vec(fun(X[0]), "fun").imag.reshape(-1, 1) / _H
    # (the columns written into one array: the same values as stacking them, without
    # the stacking's cost, which was a third of the Jacobian's in a run's samples)
    col = _as_vec(fun(X[0]), "fun").imag
    J = np.empty((col.size, n))
    J[:, 0] = col
    for j in range(1, n):
        J[:, j] = _as_vec(fun(X[j]), "fun").imag
    J /= _H
    return J


_STEPS: dict = {}
_D2_STEPS: dict = {}


def _d2_steps(hs: float) -> tuple:
    """``(-2 hs, -hs, hs, 2 hs)`` as a tuple of floats and as a column, shape (4, 1)
    (kept per ``hs``)."""
    s = _D2_STEPS.get(hs)
    if s is None:
        steps = (-2 * hs, -hs, hs, 2 * hs)
        column = np.array(steps)[:, None]
        column.flags.writeable = False
        s = (steps, column)
        if len(_D2_STEPS) < 64:
            _D2_STEPS[hs] = s
    return s


def _steps(n: int) -> np.ndarray:
    """``1j * h * I``, shape (n, n) (kept per n)."""
    s = _STEPS.get(n)
    if s is None:
        s = 1j * _H * np.eye(n)
        s.flags.writeable = False
        if n <= 64:                   # (kept for small n only: 16 n^2 bytes)
            _STEPS[n] = s
    return s


def _directional_cs(fun: Callable[[float, np.ndarray], np.ndarray], t: float, q: np.ndarray,
                    dt: float, dq: np.ndarray) -> np.ndarray:
    """``d/ds fun(t + s dt, q + s dq)`` at s = 0 by the complex step."""
    val = fun(t + 1j * _H * dt, q + 1j * _H * dq)
    return _as_vec(val, "fun").imag / _H


class Constraint:
    """Base class: a group of ``k`` constraint rows.

    Subclasses provide

    * ``level``: ``"position"``, ``"velocity"`` or ``"acceleration"``;
    * ``residual(t, q, v)``: the constraint's own residual at its level
      (``Phi`` for holonomic, ``f`` for nonholonomic; ``None`` for
      acceleration-level rows, whose residual needs ``a``);
    * ``rows(t, q, v) -> (A, b)``: the acceleration rows ``A a = b``.
    """

    level: str = "acceleration"
    kind: str = "equality"
    #: what generated the derivatives the constraint was given, when the user gave none
    #: (``gaussopt.symbolic`` sets it); named by the check's messages
    generated_by: Optional[str] = None
    #: what a failed derivative check tells the user to check, where the derivatives come
    #: from their data in another form (None: the constraint's arguments)
    check_hint: Optional[str] = None

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name or type(self).__name__

    def residual(self, t: float, q: np.ndarray, v: np.ndarray) -> Optional[np.ndarray]:
        return None

    def velocity_residual(self, t: float, q: np.ndarray, v: np.ndarray) -> Optional[np.ndarray]:
        """Residual at the velocity level (``Phi_q v + Phi_t`` for holonomic,
        ``f`` for nonholonomic, ``None`` for acceleration rows)."""
        return None

    def rows(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def check_derivatives(self, t: float, q: np.ndarray, v: np.ndarray,
                          strict: bool = True) -> list[str]:
        """Cross-check the derivatives (automatic or given) at one state against finite
        differences; return the problems found. ``strict=False`` (a perturbed state
        used only for this check) skips checks where the functions fail to evaluate."""
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def check_derivatives_near(c: Constraint, t: float, q: np.ndarray, v: np.ndarray
                           ) -> list[str]:
    """The problems :meth:`Constraint.check_derivatives` finds at ``(t, q, v)`` or, where it
    finds none there, at a nearby state with a nonzero velocity (``q + dq``, ``v + dv``:
    every coordinate moved by ~1e-3 of ``1 + |q_j|``, every velocity by ~0.5 of ``1 +
    |v_j|``). Why both: a function that is not complex-safe can look right at rest (``v
    = 0`` makes the complex-step directions real) and be wrong once it moves, and at a
    state where a contact's functions have no derivative (:attr:`gaussopt.Contact.
    nonsmooth_at`) nothing is concluded there. What :meth:`gaussopt.System.check` and the
    contact run check."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    found = c.check_derivatives(t, q, v)
    if found:
        return found
    k = np.arange(q.size)
    qp = q + 1e-3 * (1.0 + np.abs(q)) * np.sin(1.3 + 0.7 * k)
    vp = v + 0.5 * (1.0 + np.abs(v)) * np.cos(0.4 + 1.1 * k)
    return [f"{p} (at the perturbed state q + dq, v + dv used for this check)"
            for p in c.check_derivatives(t, qp, vp, strict=False)]


#: relative steps of the central differences that cross-check derivatives: the first
#: suits functions varying on the scale of the coordinates, the smaller ones functions
#: with a short length scale (``q1 - L sin(q0 / L)``, ``L = 1e-6``); a derivative
#: passes when the difference at any of them agrees
_FD_STEPS = (1e-6, 1e-8, 1e-10)


def _fd_check(label: str, exact: np.ndarray, fds, roundings, given: bool = False,
              arg: Optional[str] = None, generated: Optional[str] = None,
              of: str = "the function", hint: Optional[str] = None) -> list[str]:
    """Compare a derivative against central differences at several steps.

    ``fds`` are the differences, ``roundings`` their rounding errors (estimated
    as ``eps`` times the size of the terms the function sums, divided by the
    step or its square). A difference at step ``h`` errs by ``~h^2 |f^(3)| / 6``
    plus its rounding; a step is *informative* when its rounding is below
    ``1e-6`` of the derivative, and the derivative passes when one informative
    step agrees to ``1e-5`` relative (plus ten times its rounding). One of the
    steps ``_FD_STEPS`` is informative and accurate for any function smooth on
    the scale of that step; with no informative step nothing can be concluded
    and nothing is reported.

    ``given`` says the derivative came from outside (the argument ``arg`` of the
    constraint); ``generated`` names what generated it when the user gave none
    (``gaussopt.symbolic``); ``of`` is what the differences are taken of; ``hint`` what
    to check instead of the argument, where the derivative comes from the user's data in
    another form (a mocap body's motion).
    """
    exact = np.asarray(exact, dtype=float)
    if not np.all(np.isfinite(exact)):
        return [f"{label}: the {'given' if given else 'complex-step'} derivative is not finite"]
    best = None
    for fd, rnd in zip(fds, roundings):
        fd = np.asarray(fd, dtype=float)
        if fd.shape != exact.shape:
            return [f"{label}: shape {exact.shape}, {fd.shape} expected"]
        if not np.all(np.isfinite(fd)):
            continue
        size = max(float(np.max(np.abs(fd))) if fd.size else 0.0,
                   float(np.max(np.abs(exact))) if exact.size else 0.0)
        if rnd > 1e-6 * size:
            continue                                # rounding hides a 1e-5 mismatch
        err = float(np.max(np.abs(exact - fd))) if exact.size else 0.0
        if err <= 1e-5 * size + 10.0 * rnd:
            return []
        if best is None or err / size < best[0] / best[1]:
            best = (err, size)
    if best is None:
        return []
    if given and generated:
        return [f"{label}: the derivative generated by {generated} disagrees with finite "
                f"differences of {of} (max difference {best[0]:.3g}, scale {best[1]:.3g}): the "
                "model's expressions are not differentiable here (check them near this state), "
                "or this is a bug of gaussopt to report."]
    if given and hint:
        return [f"{label}: disagrees with finite differences of {of} (max difference "
                f"{best[0]:.3g}, scale {best[1]:.3g}); {hint}."]
    if given:
        what = f"check the argument `{arg}`" if arg else "check it"
        return [f"{label}: the given derivative disagrees with finite differences of "
                f"{of} (max difference {best[0]:.3g}, scale {best[1]:.3g}); {what} "
                "(or omit it: gaussopt then computes it exactly by the complex step)."]
    return [
        f"{label}: complex-step derivative disagrees with a finite difference "
        f"(max difference {best[0]:.3g}, scale {best[1]:.3g}). The function is probably not "
        "complex-safe (it uses abs, max, math.* or casts to float); write it with numpy "
        "ufuncs or pass the derivative explicitly."
    ]


def _noise(fun, x: np.ndarray, f0: np.ndarray, J: np.ndarray) -> float:
    """The rounding noise of ``fun`` next to ``x``, measured: the largest of ``|fun(x + d) -
    fun(x) - J d|`` over three steps ``d`` of 16 ulps of ``(1 + |x|)`` (the true change
    beyond ``J d`` is ``O(d^2)``, far below any rounding; a wrong ``J`` adds ``|J err| |d|``,
    ~3.6e-15 |J|, which leaves the differences' steps informative). Where the terms of
    ``fun`` cancel (``|fun|`` ~ 0 at a natural state such as ``q = 0``) this is the scale
    the estimates from ``|fun|`` and ``|J| |x|`` miss. 0.0 where ``fun`` fails."""
    if x.size == 0:
        return 0.0
    k = np.arange(x.size)
    out = 0.0
    try:
        for pattern in (np.sin(1.1 + 2.3 * k), np.cos(0.7 + 1.7 * k), np.sin(2.9 + 0.9 * k)):
            d = 16 * _EPS * (1.0 + np.abs(x)) * np.sign(pattern + 1e-3)
            d = (x + d) - x                      # the step as represented
            r = _as_vec(fun(x + d), "f").astype(float) - f0 - J @ d
            out = max(out, float(np.max(np.abs(r), initial=0)))
    except Exception:  # noqa: BLE001 - fun undefined next to x: nothing measured
        return out
    return out if np.isfinite(out) else 0.0


#: from this many coordinates on, a Jacobian is checked along fixed directions
#: (:func:`_fd_jacobian_check`) instead of column by column
_FD_COLUMNS_MAX = 256


def _fd_jacobian_check(fun, x: np.ndarray, J) -> tuple[np.ndarray, list]:
    """``(exact, fds)`` for :func:`_fd_check` of the Jacobian ``J`` of ``fun`` at ``x``:
    ``J`` itself and its central differences column by column (steps ``rel (1 + |x_j|)``,
    ``rel`` in ``_FD_STEPS``), or, from ``_FD_COLUMNS_MAX`` coordinates on, ``J D`` and
    the central differences along the four columns of ``D`` (entries ``(1 + |x_j|)``
    times unrelated patterns of size <= 1), step ``rel``.

    Why: column by column costs ``6 n`` evaluations of ``fun``, each ``O(n)``: for the
    2000-coordinate chain of ``docs/speed.md`` 24 000 evaluations, 0.7 s of its first
    step. Along four directions it costs 24. A wrong entry ``e`` at ``(i, j)`` changes
    entry ``i`` of every ``J d`` by ``e d_j``, nonzero for every direction whose ``d_j``
    is, and the patterns' entries are nonzero; the differences' rounding is the
    per-column one's (each step moves ``x_j`` by at most ``rel (1 + |x_j|)``)."""
    if x.size < _FD_COLUMNS_MAX:
        return J, [_fd_jacobian(fun, x, h) for h in _FD_STEPS]
    k = np.arange(x.size)
    D = np.stack([np.sin(1.3 + 2.1 * k), np.cos(0.4 + 1.9 * k), np.sin(2.2 + 0.7 * k),
                  np.cos(2.6 + 3.1 * k)], axis=1) * (1.0 + np.abs(x))[:, None]
    fds = []
    for rel in _FD_STEPS:
        fds.append(np.stack([(_as_vec(fun(x + rel * d), "f").astype(float)
                              - _as_vec(fun(x - rel * d), "f").astype(float)) / (2 * rel)
                             for d in D.T], axis=1))
    return np.asarray(J @ D), fds


def _fd_jacobian(fun, x: np.ndarray, rel: float) -> np.ndarray:
    """Central-difference Jacobian of ``fun`` at ``x`` with steps ``rel (1 + |x_j|)``."""
    n = x.size
    h = rel * (1.0 + np.abs(x))
    cols = []
    for j in range(n):
        e = np.zeros(n)
        e[j] = h[j]
        cols.append((_as_vec(fun(x + e), "f").astype(float) - _as_vec(fun(x - e), "f").astype(float))
                    / (2 * h[j]))
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0))


class Holonomic(Constraint):
    """Holonomic (position-level) constraints ``Phi(t, q) = 0``.

    Parameters
    ----------
    phi : callable
        ``phi(t, q) -> ndarray, shape (k,)``.
    jacobian : callable, optional
        ``jacobian(t, q) -> ndarray, shape (k, n)``, ``Phi_q``. Default: complex step.
    gamma : callable, optional
        ``gamma(t, q, v) -> ndarray, shape (k,)`` with ``Phi_q a = gamma``, i.e.
        ``gamma = -(Phi_q v)_q v - 2 Phi_qt v - Phi_tt``. Default: numerical
        second directional derivative (see module docstring for accuracy).
    phi_t : callable, optional
        ``phi_t(t, q) -> ndarray, shape (k,)``, the explicit time derivative,
        used only for the velocity residual of rheonomic constraints.
        Default: complex step in ``t``; pass ``rheonomic=False`` to skip it.
    rheonomic : bool, default True
        ``False`` declares that ``phi`` does not depend on ``t`` explicitly,
        which saves one evaluation per velocity residual.
    name : str, optional

    Examples
    --------
    >>> import numpy as np, gaussopt as go
    >>> rod = go.Holonomic(lambda t, q: np.array([q[0]**2 + q[1]**2 - 4.0]))
    >>> A, b = rod.rows(0.0, np.array([2.0, 0.0]), np.array([0.0, 1.0]))
    >>> A, b        # doctest: +NORMALIZE_WHITESPACE
    (array([[4., 0.]]), array([-2.]))
    """

    level = "position"

    def __init__(self, phi: Callable, jacobian: Optional[Callable] = None,
                 gamma: Optional[Callable] = None, *, phi_t: Optional[Callable] = None,
                 rheonomic: bool = True, name: Optional[str] = None) -> None:
        super().__init__(name)
        if not callable(phi):
            raise ModelError(f"`phi` must be a callable phi(t, q), found {type(phi).__name__}.")
        for label, f in (("jacobian", jacobian), ("gamma", gamma), ("phi_t", phi_t)):
            if f is not None and not callable(f):
                raise ModelError(f"`{label}` must be callable or None, found {type(f).__name__}.")
        self.phi = phi
        self._jac = jacobian
        self._gamma = gamma
        self._phi_t = phi_t
        self.rheonomic = bool(rheonomic)
        self.automatic = {"jacobian": jacobian is None, "gamma": gamma is None}
        #: step of the difference in the automatic gamma; shortened by the check for a
        #: phi that varies on a shorter length scale
        self._d2_step = _D2_STEP

    # -- values ---------------------------------------------------------
    def residual(self, t, q, v=None):
        try:
            return _as_vec(self.phi(t, q), "phi").astype(float, copy=False)
        except TypeError as e:            # (phi returned no numbers, or failed on them)
            raise ModelError(f"constraint {self.name!r}: {e}") from e

    def jacobian(self, t: float, q: np.ndarray) -> np.ndarray:
        """``Phi_q(t, q)`` as a dense array (a given ``jacobian`` may return a
        scipy.sparse matrix: see :meth:`sparse_jacobian`)."""
        if self._jac is not None:
            return _dense_rows(self._jac(t, q))
        return complex_step_jacobian(lambda x: self.phi(t, x), q)

    def sparse_jacobian(self, t: float, q: np.ndarray):
        """``Phi_q(t, q)`` as scipy.sparse CSR when the given ``jacobian`` returns a
        scipy.sparse matrix, else None (a system whose rows are all sparse, with a
        constant diagonal mass, takes the O(n) step: :mod:`gaussopt.gauss.band_step`)."""
        return _sparse_rows(self._jac(t, q)) if self._jac is not None else None

    def phi_t(self, t: float, q: np.ndarray) -> np.ndarray:
        if self._phi_t is not None:
            return _as_vec(self._phi_t(t, q), "phi_t").astype(float)
        if not self.rheonomic:
            return np.zeros(_as_vec(self.phi(t, q), "phi").size)
        # (the complex step along t alone: _directional_cs with dt = 1, dq = 0)
        return _as_vec(self.phi(t + 1j * _H, np.asarray(q, dtype=complex)), "phi").imag / _H

    def velocity_residual(self, t, q, v):
        r = self.jacobian(t, q) @ v
        if self.rheonomic or self._phi_t is not None:
            r = r + self.phi_t(t, q)
        return r

    def _first(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``Phi_q v + Phi_t`` by the complex step along (1, v)."""
        return _directional_cs(self.phi, t, q, 1.0 if self.rheonomic else 0.0, v)

    def gamma(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        if self._gamma is not None:
            g = self._gamma(t, q, v)
            if type(g) is np.ndarray and g.ndim == 1:
                return g
            return _as_vec(g, "gamma").astype(float)
        return -self._second_directional(t, q, v)

    def _second_directional(self, t, q, v):
        # d^2/ds^2 Phi(t + s c, q + s v), c = 1 if rheonomic else 0, via a 4th-order
        # central difference of the exact (complex-step) first derivative along the
        # normalized direction. (Written for few small-array operations: it is evaluated
        # at every right-hand side and output sample of a model without a given gamma;
        # the arithmetic is that of the formula, term by term.)
        c = 1.0 if self.rheonomic else 0.0
        norm = math.sqrt(c * c + float(np.dot(v, v)))
        if norm == 0.0:
            return np.zeros(_as_vec(self.phi(t, q), "phi").size)
        dt_, dq = c / norm, v / norm
        hs = self._d2_step
        steps, column = _d2_steps(hs)
        # the four points, each with the complex step along (dt_, dq)
        Q = (q + column * dq) + 1j * _H * dq
        ih = 1j * _H * dt_
        phi = self.phi
        g0 = _as_vec(phi(t + steps[0] * dt_ + ih, Q[0]), "phi").imag
        G = np.empty((4, g0.size))
        G[0] = g0
        for k in range(1, 4):
            G[k] = _as_vec(phi(t + steps[k] * dt_ + ih, Q[k]), "phi").imag
        G /= _H
        d2 = (G[0] - 8 * G[1] + 8 * G[2] - G[3]) / (12 * hs)
        return d2 * norm * norm

    def rows(self, t, q, v):
        return self.jacobian(t, q), self.gamma(t, q, v)

    def check_derivatives(self, t, q, v, strict=True):
        problems: list[str] = []
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        try:
            phi0 = self.residual(t, q)
        except Exception as e:  # noqa: BLE001 - reported to the user
            return [f"{self.name}: phi(t, q) raised {type(e).__name__}: {e}"] if strict else []
        if not strict and not np.all(np.isfinite(phi0)):
            return []
        k = phi0.size
        try:
            J = self.jacobian(t, q)
        except TypeError as e:
            return [f"{self.name}: the automatic Jacobian needs complex-safe phi, but phi raised "
                    f"TypeError ({e}); use numpy functions (np.sin, not math.sin) or pass jacobian="]
        if J.shape != (k, q.size):
            problems.append(f"{self.name}: jacobian has shape {J.shape}, expected ({k}, {q.size})")
            return problems
        # Rounding of phi: eps times the size of the terms phi sums, estimated by |phi| +
        # |Phi_q| |q| (an underestimate only makes a small step count as informative: it
        # can then fail alone, but never decides against a larger, accurate one), plus the
        # rounding noise of phi measured next to q, which does not vanish where phi and q
        # do (the upright bicycle's pitch constraint sums O(1) lengths to 5e-18 at q = 0)
        terms = float(np.max(np.abs(phi0), initial=0)) + float(np.max(np.abs(J), initial=0)) \
            * float(np.max(np.abs(q), initial=0))
        noise = _noise(lambda x: self.residual(t, x), q, phi0, J)
        jac_found: list[str] = []
        if q.size:
            try:
                exact, fds = _fd_jacobian_check(lambda x: self.phi(t, x), q, J)
            except Exception:  # noqa: BLE001 - phi undefined near q: nothing to compare
                exact, fds = J, []
            # a difference at step h (>= rel) rounds to ~eps |phi terms| / h
            jac_found = _fd_check(f"{self.name}: Phi_q", exact, fds,
                                  [4 * (_EPS * terms + noise) / h for h in _FD_STEPS[:len(fds)]],
                                  given=not self.automatic["jacobian"], arg="jacobian",
                                  generated=self.generated_by, of="phi")
            problems += jac_found
        try:
            gam = self.gamma(t, q, v)
        except TypeError as e:
            return problems + [f"{self.name}: automatic gamma needs complex-safe phi ({e})"]
        if gam.shape != (k,):
            problems.append(f"{self.name}: gamma has shape {gam.shape}, expected ({k},)")
        if self.rheonomic and self._phi_t is None:
            fds = []
            for rel in _FD_STEPS:
                s = rel * (1.0 + abs(t))
                fds.append((self.residual(t + s, q) - self.residual(t - s, q)) / (2 * s))
            pt = self.phi_t(t, q)
            problems += _fd_check(f"{self.name}: Phi_t", pt, fds,
                                  [4 * (_EPS * terms + noise) / (rel * (1.0 + abs(t)))
                                   for rel in _FD_STEPS],
                                  of="phi")
        if gam.shape == (k,) and not problems:
            # (after Phi_q and Phi_t agree with phi: gamma is checked against their derivative)
            problems += self._check_gamma(t, q, v, gam, J, strict)
        if strict and (not np.all(np.isfinite(J)) or not np.all(np.isfinite(gam))):
            problems.append(f"{self.name}: Jacobian or gamma is not finite at the initial state")
        return problems

    def _check_gamma(self, t, q, v, gam, J, strict) -> list[str]:
        """Cross-check ``gamma`` against central differences of the velocity residual.

        With ``x(s) = (t + c s, q + s v)`` (``c = 1`` for rheonomic constraints, else 0) and
        the velocity residual ``w(s) = Phi_q(x(s)) v + Phi_t(x(s))`` (``v`` held fixed),
        ``gamma = -w'(0)``: the derivative of the Jacobian, which the check before has
        compared with phi. The central difference at ``s = rel / |(c, v)|`` (``rel`` along
        the unit direction)

            D_s = -(w(s) - w(-s)) / (2 s) = gamma - s^2 w'''(0) / 6 + O(s^4)

        has two errors:

        * truncation ``s^2 |w'''| / 6``: for ``w`` varying on a length ``L`` along the unit
          direction, ``|w'''| ~ |w'| (|(c, v)| / L)^2``, a relative error ``(rel / L)^2 / 6``,
          below 1e-6 for ``rel <= 2.4e-3 L``: the step 1e-3 suits ``L >= 0.4``, the steps
          1e-5 ... 1e-11 shorter lengths, down to ``L >= 4e-9``;
        * rounding: each ``w`` carries at most ~4 ``eps`` times the size ``W`` of the terms
          it sums, ``W = max|Phi_q| |v|_1 + max|Phi_t|`` (not ``|w|``, which vanishes on the
          constraint, nor anything that vanishes at ``q = 0``), so ``|rounding(D_s)| <=
          2 * 4 eps W / (2 s) = 4 eps W / s``.

        :func:`_fd_check` judges only steps whose rounding bound is below 1e-6 of ``|gamma|``
        (informative) and accepts ``|gamma - D_s| <= 1e-5 |gamma| + 10 * 4 eps W / s``, plus
        the truncation of ``D_s`` estimated from the next step ``s / 10`` (Richardson), so a
        gamma passing through zero is not held to a truncation larger than itself. A
        right gamma (exact to a few ``eps`` of its own terms) passes with a margin of 10 over
        the truncation at ``rel <= 2.4e-3 L`` and of 10 over the rounding bound; a wrong one
        (a flipped sign, a factor 1.01, a dropped term larger than ~2e-5 of ``|gamma|``)
        fails at any informative step. When no step is informative (``|gamma| < 4e6 eps W /
        s``, a gamma lost in the rounding of ``w``) nothing is concluded.
        """
        c = 1.0 if self.rheonomic else 0.0
        nrm = float(np.sqrt(c * c + float(v @ v)))
        if nrm == 0.0:
            nrm = 1.0           # (the two points coincide: D_s = 0, and so is a right gamma)
        wt = 0.0
        if self.rheonomic or self._phi_t is not None:
            try:
                wt = float(np.max(np.abs(self.phi_t(t, q)), initial=0))
            except Exception:  # noqa: BLE001 - reported by the evaluation below
                wt = 0.0
        W = float(np.max(np.abs(J), initial=0)) * float(np.sum(np.abs(v))) + wt
        fds, roundings, used = [], [], []
        for rel in (1e-3, 1e-4, 1e-5, 1e-7, 1e-9, 1e-11):
            s = rel / nrm
            try:
                fds.append(-(self.velocity_residual(t + c * s, q + s * v, v)
                             - self.velocity_residual(t - c * s, q - s * v, v)) / (2 * s))
            except Exception:  # noqa: BLE001 - phi undefined near q: nothing to compare
                continue
            roundings.append(4 * _EPS * W / s)
            used.append(rel)
        # the truncation of a difference, estimated from the next step's (Richardson:
        # D_s - D_{s/10} = 0.99 s^2 w'''(0) / 6 + O(s^4)) beyond both roundings, is added to
        # its allowance: a gamma that is small against the terms it sums (a curvature passing
        # through zero) is not judged on a truncation error larger than itself, while a
        # wrong gamma still has to hide below the true truncation and rounding
        for i in range(len(fds) - 1):
            if used[i + 1] == used[i] / 10:
                diff = float(np.max(np.abs(np.asarray(fds[i]) - np.asarray(fds[i + 1])),
                                    initial=0.0))
                trunc = max(diff * 100 / 99 - roundings[i] - roundings[i + 1], 0.0)
                roundings[i] += trunc / 10           # (_fd_check allows 10 roundings)
        of = ("the velocity residual Phi_q v + Phi_t along (1, v)" if c else
              "the velocity residual Phi_q v along v")
        found = _fd_check(f"{self.name}: gamma", gam, fds, roundings,
                          given=not self.automatic["gamma"], arg="gamma",
                          generated=self.generated_by, of=of, hint=self.check_hint)
        if found and strict and self.automatic["gamma"]:
            # a phi with a short length scale: the automatic gamma's difference step
            # (1e-3 along the unit direction) is too long; take the longest shorter
            # step whose gamma agrees with the finite differences
            for step in (1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
                self._d2_step = step
                if not _fd_check(f"{self.name}: gamma", self.gamma(t, q, v), fds, roundings):
                    return []
            self._d2_step = _D2_STEP
        return found


class Nonholonomic(Constraint):
    """Velocity-level constraints ``f(t, q, v) = 0``, linear or nonlinear in ``v``.

    Parameters
    ----------
    f : callable
        ``f(t, q, v) -> ndarray, shape (k,)``.
    jacobian : callable, optional
        ``jacobian(t, q, v) -> ndarray, shape (k, n)``: ``f_v``. Default: complex step.
    gamma : callable, optional
        ``gamma(t, q, v) -> ndarray, shape (k,)`` with ``f_v a = gamma``, i.e.
        ``gamma = -(f_q v + f_t)``. Default: complex step along ``(1, v)``,
        exact to machine precision.
    name : str, optional

    Examples
    --------
    A knife edge (sleigh): the centroid moves along the body axis.

    >>> import numpy as np, gaussopt as go
    >>> knife = go.Nonholonomic(lambda t, q, v: np.array([-v[0]*np.sin(q[2]) + v[1]*np.cos(q[2])]))
    >>> A, b = knife.rows(0.0, np.zeros(3), np.array([1.0, 0.0, 1.0]))
    >>> A.round(12), b.round(12)
    (array([[0., 1., 0.]]), array([1.]))
    """

    level = "velocity"

    def __init__(self, f: Callable, jacobian: Optional[Callable] = None,
                 gamma: Optional[Callable] = None, *, name: Optional[str] = None) -> None:
        super().__init__(name)
        if not callable(f):
            raise ModelError(f"`f` must be a callable f(t, q, v), found {type(f).__name__}.")
        for label, g in (("jacobian", jacobian), ("gamma", gamma)):
            if g is not None and not callable(g):
                raise ModelError(f"`{label}` must be callable or None, found {type(g).__name__}.")
        self.f = f
        self._jac = jacobian
        self._gamma = gamma
        self.automatic = {"jacobian": jacobian is None, "gamma": gamma is None}

    def is_affine(self, t: float, q: np.ndarray, v: np.ndarray) -> bool:
        """Whether ``f`` is affine in the velocities near ``(t, q, v)``: its Jacobian does
        not change between ``v`` and a random probe velocity, and ``f(probe)`` equals its
        linearization at ``v = 0`` (both to 1e-9 of ``|f_v|``). Quasi-velocities and
        impacts (a jump of ``v``) need affine velocity constraints."""
        n = q.size
        scale = 1.0 + float(np.linalg.norm(v))
        probe = v + scale * np.random.default_rng(12345).standard_normal(n)
        J1 = self.jacobian(t, q, v)
        J2 = self.jacobian(t, q, probe)
        try:
            with np.errstate(all="ignore"):
                J0 = self.jacobian(t, q, np.zeros(n))
                f0 = np.asarray(self.f(t, q, np.zeros(n)), dtype=float).reshape(-1)
                lin = np.asarray(self.f(t, q, probe), dtype=float).reshape(-1) - (f0 + J0 @ probe)
        except ArithmeticError:      # f_v undefined at v = 0: not affine in v
            return False
        ref = max(float(np.abs(J1).max(initial=0.0)), 1e-300)
        return bool(np.all(np.isfinite(lin)) and np.abs(J1 - J2).max(initial=0.0) <= 1e-9 * ref
                    and np.abs(lin).max(initial=0.0) <= 1e-9 * ref * scale * 3)

    def velocity_residual(self, t, q, v):
        return _as_vec(self.f(t, q, v), "f").astype(float, copy=False)

    residual = velocity_residual

    def jacobian(self, t, q, v):
        """``df/dv(t, q, v)`` as a dense array (a given ``jacobian`` may return a
        scipy.sparse matrix: see :meth:`sparse_jacobian`)."""
        if self._jac is not None:
            return _dense_rows(self._jac(t, q, v))
        return complex_step_jacobian(lambda x: self.f(t, q, x), v)

    def sparse_jacobian(self, t, q, v):
        """``df/dv`` as scipy.sparse CSR when the given ``jacobian`` returns a
        scipy.sparse matrix, else None (as :meth:`Holonomic.sparse_jacobian`)."""
        return _sparse_rows(self._jac(t, q, v)) if self._jac is not None else None

    def gamma(self, t, q, v):
        if self._gamma is not None:
            return _as_vec(self._gamma(t, q, v), "gamma").astype(float)
        val = self.f(t + 1j * _H, q + 1j * _H * v, v)
        return -_as_vec(val, "f").imag / _H

    def rows(self, t, q, v):
        return self.jacobian(t, q, v), self.gamma(t, q, v)

    def check_derivatives(self, t, q, v, strict=True):
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        try:
            f0 = self.velocity_residual(t, q, v)
        except Exception as e:  # noqa: BLE001
            return [f"{self.name}: f(t, q, v) raised {type(e).__name__}: {e}"] if strict else []
        if not strict and not np.all(np.isfinite(f0)):
            return []
        k, n = f0.size, q.size
        problems: list[str] = []
        try:
            J, gam = self.rows(t, q, v)
        except TypeError as e:
            return [f"{self.name}: automatic derivatives need complex-safe f, but f raised "
                    f"TypeError ({e}); use numpy functions or pass jacobian= and gamma="]
        if J.shape != (k, n):
            return [f"{self.name}: jacobian has shape {J.shape}, expected ({k}, {n})"]
        if gam.shape != (k,):
            return [f"{self.name}: gamma has shape {gam.shape}, expected ({k},)"]
        try:
            exact, fds = _fd_jacobian_check(lambda x: self.f(t, q, x), v, J)
        except Exception:  # noqa: BLE001
            exact, fds = J, []
        # rounding of f: eps times the size of its terms, estimated by |f| + |f_v| |v|,
        # plus the rounding noise of f measured next to v (as for Holonomic: |f| and
        # |f_v| |v| vanish on a constraint at rest, the terms of a rheonomic f do not)
        terms = float(np.max(np.abs(f0), initial=0)) + float(np.max(np.abs(J), initial=0)) \
            * float(np.max(np.abs(v), initial=0)) \
            + _noise(lambda x: self.f(t, q, x), v, f0, J) / _EPS
        problems += _fd_check(f"{self.name}: f_v", exact, fds,
                              [4 * _EPS * terms / h for h in _FD_STEPS[:len(fds)]],
                              given=not self.automatic["jacobian"], arg="jacobian",
                              generated=self.generated_by, of="f")
        fds, steps = [], []
        for rel in _FD_STEPS:
            s = rel * (1.0 + abs(t))
            try:
                fds.append(-(_as_vec(self.f(t + s, q + s * v, v), "f")
                             - _as_vec(self.f(t - s, q - s * v, v), "f")) / (2 * s))
                steps.append(s)
            except Exception:  # noqa: BLE001
                continue
        problems += _fd_check(f"{self.name}: gamma", gam, fds,
                              [4 * _EPS * terms / s for s in steps],
                              given=not self.automatic["gamma"], arg="gamma",
                              generated=self.generated_by, of="f along (1, v)")
        return problems


class AccelerationConstraint(Constraint):
    """Constraints given directly at the acceleration level, ``A(t, q, v) a = b(t, q, v)``.

    Second- and higher-order constraints that are linear in ``a`` (for example
    constant speed, ``v . a = 0``) enter Gauss's principle directly.

    Parameters
    ----------
    A : callable or array_like
        ``A(t, q, v) -> ndarray, shape (k, n)``, or a constant array.
    b : callable or array_like
        ``b(t, q, v) -> ndarray, shape (k,)``, or a constant array.
    name : str, optional

    Examples
    --------
    >>> import numpy as np, gaussopt as go
    >>> speed = go.AccelerationConstraint(lambda t, q, v: v[None, :], lambda t, q, v: np.zeros(1))
    """

    level = "acceleration"

    def __init__(self, A, b, *, name: Optional[str] = None) -> None:
        super().__init__(name)
        self._A = A if callable(A) else _dense_rows(A)
        self._b = b if callable(b) else _as_vec(np.asarray(b, dtype=float), "b")

    def rows(self, t, q, v):
        A = _dense_rows(self._A(t, q, v)) if callable(self._A) else self._A
        b = _as_vec(self._b(t, q, v), "b").astype(float) if callable(self._b) else self._b
        return A, b


class Inequality(AccelerationConstraint):
    """Unilateral acceleration rows ``G(t, q, v) a >= h(t, q, v)``.

    Only ``solver="qp"`` treats inequality rows (a contact that can lift off);
    the other solvers raise :class:`~gaussopt.core.exceptions.UnsupportedConstraintError`.
    """

    kind = "inequality"
