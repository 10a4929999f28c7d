"""Quasi-velocities: Gauss's principle in the allowed directions (Maggi / Kane form).

The velocity-level constraints of a system (holonomic ones in their velocity
form ``Phi_q v + Phi_t = 0`` and nonholonomic ones *affine* in ``v``) read
``B(t, q) v + c(t, q) = 0``. Every admissible velocity is

    v = D(t, q) w + w0(t, q),        B D = 0,   B w0 + c = 0,

with ``D`` (n x k) a basis of ``null(B)``, ``k = n - rank B`` the number of
degrees of freedom and ``w`` (k,) the quasi-velocities. Gauss's principle with
``a = D w' + a_c``, ``a_c = D' w + w0'`` (``'`` the time derivative along the
motion) is minimized over ``w'`` alone; its optimality conditions are the
reduced (Maggi, Kane, paper-000) equations

    A* w' = Q*,     A* = D^T M D,     Q* = D^T (F - M a_c),

``k`` equations for ``k`` unknowns and no multipliers. The state is ``(q, w)``
with ``q' = D w + w0``, so the velocity constraints hold by construction (to
rounding) wherever the integrator goes; only holonomic constraints can drift,
at the position level (see ``project_positions`` of
:meth:`QuasiVelocities.simulate`).

How ``a_c`` is formed
---------------------
``B a_c = b`` holds for every basis, where ``B a = b`` are the constraints'
own acceleration rows (``b = gamma``, exact for nonholonomic constraints and
for holonomic ones with an explicit ``gamma``). So ``a_c`` is the
minimum-norm solution ``B^+ b`` plus its component in ``null(B)``,
``D (D^T D)^{-1} D^T a_c`` with ``D^T a_c = D^T D' w + D^T w0'``; only this
``k``-vector needs the rotation of the basis. For a user basis ``D'`` is
``dD(t, q, v)`` if given, else the complex step of ``D(t + i h, q + i h v)``.

The automatic basis (charts)
----------------------------
A null-space basis from an SVD flips sign and rotates from one state to the
next, so the automatic basis is the *Loewdin-orthonormalized projection of an
anchor frame* ``E`` (n x k, orthonormal)::

    G = P(t, q) E,   S = G^T G,   D = G S^{-1/2},    P = I - B^+ B,

the orthonormal basis of ``null(B(t, q))`` closest to ``E`` (Frobenius norm).
It is a smooth function of ``(t, q)`` while every principal angle between
``span E`` and ``null(B)`` stays below 90 degrees (``S`` positive definite).
The anchor is first the Loewdin-orthonormalized columns of ``P`` with the
largest pivots (QR with column pivoting), so the quasi-velocities follow the
coordinates where possible, and it is *re-anchored* (``E <- D``) after an
accepted step at which the cosine of the largest principal angle fell below
``chart_tol`` (default 0.7, about 45 degrees). At a re-anchoring point the new
basis equals the old one, so ``w`` is continuous; only the basis' rotation
rate, hence ``w'``, changes, and the integrator restarts its step there (RK
methods re-evaluate their first stage, the others are restarted). The step
size is capped so that ``null(B)`` turns by at most about 0.5 rad per step,
which keeps every trial stage inside the chart. For a system whose allowed
velocities turn in one plane (paper 000's sleigh) the chart bases are the
parallel-transported ones and ``w`` are the paper's quasi-velocities. The
rotation rate comes from the rate of the normalized rows ``R = Bn' D``::

    D' = -Bn^+ R + D Omega,    Omega = D^T D' = -H S^{-1/2} + S^{1/2} (S^{-1/2})',
    H = R^T Bn^{+T} E,         S' = -(S^{1/2} H + H^T S^{1/2}),

with ``(S^{-1/2})'`` from the Daleckii--Krein formula. ``R`` is exact (complex
step of ``f(t + i h, q + i h v, u)``) for nonholonomic constraints, and for
holonomic ones the polarization ``Phi_qq[v, u] + Phi_qt u = (gamma(v - u) -
gamma(v + u)) / 4`` of the constraint's own ``gamma``. For the minimum-norm
``w0 = -B^+ c``, ``D^T w0' = -D'^T w0 = R^T Bn^{+T} w0``.

Validity domain: the rank of ``B`` must stay constant along the motion. A
state where it drops (a singular position: rows dependent to ``rank_tol``, or
a row whose norm falls below ``rank_tol`` times the largest it has shown)
stops the run with ``success=False``; an isolated singular position that the
integrator steps over is not seen, which is harmless when ``null(B)`` is
continuous across it (use :func:`gaussopt.simulate`, whose rank monitor
records such passages, when it matters); nonholonomic
constraints must be affine in ``v`` (a nonlinear one, like paper 004's
Appell--Hamel constraint, has no linear velocity space: use
:func:`gaussopt.simulate`); acceleration-level and inequality constraints are
not supported; ``D^T M D`` must be positive definite.

References
----------
Hao Xin, Liu Yanping, Yao Wenli, "Dynamic equation and numerical simulation
of nonholonomic multibody system in quasi-coordinate form", Dynamical Systems
and Control 9 (2020) 121-128 (paper 000).
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .constraints import Holonomic, Nonholonomic
from .exceptions import (GaussoptError, IndeterminateMotionError, ModelError,
                         UnsupportedConstraintError)
from .integrate import IVP_METHODS, Projection, drive_ivp
from .linalg import DEFAULT_RANK_TOL, min_norm_multipliers
from .result import Trajectory
from .step import as_state
from .system import System

__all__ = ["QuasiVelocities", "QUASI_METHODS"]

_H = 1e-30  # complex step
QUASI_METHODS = IVP_METHODS      # the solve_ivp methods, driven by integrate.drive_ivp
_ComplexWarning = getattr(getattr(np, "exceptions", np), "ComplexWarning")  # numpy < 1.25
_CHART_FLOOR = 1e-4  # S eigenvalue (cos^2 of a principal angle) below which a chart is broken


class _Frame:
    """Everything evaluated at one (t, q): rows, pseudo-inverse pieces, basis."""

    __slots__ = ("B", "norms", "c", "Ur", "sr", "Vr", "r", "D", "w0", "X", "Xinv", "s", "Us",
                 "E", "DtD")


class QuasiVelocities:
    """Reduced (quasi-velocity) equations of motion ``D^T M D w' = D^T (F - M a_c)``.

    Parameters
    ----------
    system : System
        Its equality constraints must be :class:`~gaussopt.Holonomic` or
        :class:`~gaussopt.Nonholonomic` *affine* in ``v``.
    D : callable, optional
        ``D(t, q) -> ndarray, shape (n, k)``: a basis of the admissible
        velocities (``B D = 0``, rank ``k = n - rank B``). Default: the
        automatic orthonormal basis (see the module notes: charts anchored at
        the initial state, re-anchored when the null space has turned by about
        45 degrees).
    w0 : callable, optional
        ``w0(t, q) -> ndarray, shape (n,)``: a particular solution of the
        velocity constraints, ``B w0 + c = 0`` (rheonomic or affine
        constraints). Default: the minimum-norm one, ``-B^+ c``.
    dD : callable, optional
        ``dD(t, q, v) -> ndarray, shape (n, k)``: the time derivative of ``D``
        along the motion, ``D_t + D_q[v]``. Only with ``D``. Default: complex
        step of ``D`` along ``(1, v)`` (``D`` must then be written with numpy
        ufuncs; checked once against a finite difference).
    dw0 : callable, optional
        ``dw0(t, q, v) -> ndarray, shape (n,)``, likewise for ``w0``.
    rank_tol : float, default 1e-8
        Relative tolerance of the rank decision on the row-normalized ``B``.
    chart_tol : float, default 0.7
        Re-anchor the automatic basis when the cosine of the largest principal
        angle between the anchor frame and ``null(B)`` falls below this.

    Attributes
    ----------
    k : int or None
        Number of quasi-velocities (degrees of freedom); known after the first
        evaluation.
    anchor : ndarray, shape (n, k) or None
        The current anchor frame ``E`` of the automatic basis.

    Notes
    -----
    The equations are those of paper 000, eq. (11), ``A* w' + g* = Q*`` with
    ``A* = D^T M D`` and ``Q* - g* = D^T (F - M (D' w + w0'))`` (``F = Q - g``
    collects the applied forces and the velocity-dependent inertia terms).
    They agree with :func:`gaussopt.simulate` (the full Gauss step) on every
    system both accept; their advantage is that the velocity constraints
    cannot drift and no multipliers are needed.

    References
    ----------
    Hao Xin, Liu Yanping, Yao Wenli, Dynamical Systems and Control 9 (2020)
    121-128 (paper 000).

    Examples
    --------
    A knife edge (sleigh) of mass 2 and inertia 0.5 pushed along ``x`` by a
    force 1.5: the forward speed ``w1`` obeys ``2 w1' = 1.5 cos(phi)``.

    >>> import numpy as np, gaussopt as go
    >>> from gaussopt.quasi import QuasiVelocities
    >>> knife = go.Nonholonomic(lambda t, q, v: np.array([-v[0] * np.sin(q[2]) + v[1] * np.cos(q[2])]))
    >>> sleigh = go.System(("x", "y", "phi"), mass=np.diag([2.0, 2.0, 0.5]),
    ...                    force=[1.5, 0.0, 0.0], constraints=[knife])
    >>> qv = QuasiVelocities(sleigh)
    >>> tr = qv.simulate((0.0, 2.0), [0.0, 0.0, 0.0], [1.0, 0.0, 1.0], rtol=1e-11, atol=1e-11)
    >>> w1 = tr.v[:, 0] * np.cos(tr.q[:, 2]) + tr.v[:, 1] * np.sin(tr.q[:, 2])
    >>> bool(abs(w1[-1] - (1.0 + 0.75 * np.sin(2.0))) < 1e-9), bool(tr.velocity_residual.max() < 1e-14)
    (True, True)
    """

    def __init__(self, system: System, D: Optional[Callable] = None,
                 w0: Optional[Callable] = None, *, dD: Optional[Callable] = None,
                 dw0: Optional[Callable] = None, rank_tol: float = DEFAULT_RANK_TOL,
                 chart_tol: float = 0.7) -> None:
        if not isinstance(system, System):
            raise ModelError(f"`system` must be a gaussopt.System, found {type(system).__name__}.")
        for label, f in (("D", D), ("w0", w0), ("dD", dD), ("dw0", dw0)):
            if f is not None and not callable(f):
                raise ModelError(f"`{label}` must be callable or None, found {type(f).__name__}.")
        if dD is not None and D is None:
            raise ModelError("`dD` was given without `D`: the derivative of the automatic basis is "
                             "computed internally; pass D= together with dD=.")
        if dw0 is not None and w0 is None:
            raise ModelError("`dw0` was given without `w0`; pass w0= together with dw0=.")
        if not (np.isfinite(rank_tol) and 0 < rank_tol < 1):
            raise ModelError(f"`rank_tol` must lie in (0, 1), found {rank_tol!r}.")
        if not (np.isfinite(chart_tol) and 0 < chart_tol < 1):
            raise ModelError(f"`chart_tol` must lie in (0, 1), found {chart_tol!r}.")
        bad = [c for c in system.constraints if not isinstance(c, (Holonomic, Nonholonomic))]
        if bad:
            names = ", ".join(f"{c.name!r} ({type(c).__name__})" for c in bad)
            raise UnsupportedConstraintError(
                f"QuasiVelocities needs holonomic or nonholonomic (velocity-level) constraints; "
                f"found {names}. Acceleration-level and inequality constraints have no "
                "velocity space to parametrize: use gaussopt.simulate.")
        self.system = system
        self.n = system.n
        self._D, self._w0, self._dD, self._dw0 = D, w0, dD, dw0
        self.automatic = D is None
        self._direct = not any(f is None for f in (D, dD, w0, dw0))
        self.rank_tol = float(rank_tol)
        self.chart_tol = float(chart_tol)
        self._cons = system.equalities
        self.k: Optional[int] = None
        self.r: Optional[int] = None
        self.anchor: Optional[np.ndarray] = None
        self._prepared = False
        self._nh_complex: dict[int, bool] = {}
        self._ref_norms: Optional[np.ndarray] = None
        self._nfev = 0

    # ------------------------------------------------------------------ model pieces
    def _rows(self, t: float, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``B(t, q)`` (m, n) and ``c(t, q)`` (m,) in the order of ``system.equalities``."""
        n = self.n
        if not self._cons:
            return np.zeros((0, n)), np.zeros(0)
        z = np.zeros(n)
        Bs, cs = [], []
        for con in self._cons:
            if isinstance(con, Holonomic):
                Bs.append(con.jacobian(t, q))
                cs.append(con.phi_t(t, q))
            else:
                Bs.append(con.jacobian(t, q, z))
                cs.append(con.velocity_residual(t, q, z))
        return np.concatenate(Bs), np.concatenate(cs).astype(float)

    def _gamma(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Right-hand sides ``b`` of the acceleration rows ``B a = b``."""
        if not self._cons:
            return np.zeros(0)
        return np.concatenate([con.gamma(t, q, v) for con in self._cons])

    def _rate(self, t: float, q: np.ndarray, v: np.ndarray, U: np.ndarray) -> np.ndarray:
        """``B'(t, q; v) U``: the rate of the velocity rows along ``(1, v)`` applied to ``U``."""
        k = U.shape[1]
        out = []
        for i, con in enumerate(self._cons):
            if isinstance(con, Holonomic):
                # Phi_qq[v, u] + Phi_qt u = (gamma(v - u) - gamma(v + u)) / 4 (gamma is
                # quadratic in (1, v)); u scaled like v for the numerical gamma's accuracy
                sc = 1.0 + float(np.linalg.norm(v))
                cols = [(con.gamma(t, q, v - sc * U[:, j]) - con.gamma(t, q, v + sc * U[:, j]))
                        / (4.0 * sc) for j in range(k)]
                out.append(np.stack(cols, axis=1) if k
                           else np.zeros((np.size(con.gamma(t, q, v)), 0)))
            elif self._nh_complex.get(i, True):
                out.append(_nh_rate_cs(con, t, q, v, U))
            else:
                out.append(_nh_rate_fd(con, t, q, v, U))
        return np.concatenate(out) if out else np.zeros((0, k))

    # ------------------------------------------------------------------ setup checks
    def _prepare(self, t: float, q: np.ndarray, v: np.ndarray) -> None:
        """Check linearity in ``v`` and the derivative paths once, at one state."""
        n = self.n
        rng = np.random.default_rng(12345)
        scale = 1.0 + float(np.linalg.norm(v))
        probe = v + scale * rng.standard_normal(n)
        problems = []
        for i, con in enumerate(self._cons):
            if not isinstance(con, Nonholonomic):
                continue
            J1 = con.jacobian(t, q, v)
            J2 = con.jacobian(t, q, probe)
            try:
                with np.errstate(all="ignore"):
                    J0 = con.jacobian(t, q, np.zeros(n))
                    f0 = np.asarray(con.f(t, q, np.zeros(n)), dtype=float).reshape(-1)
                    lin = np.asarray(con.f(t, q, probe), dtype=float).reshape(-1) - (f0 + J0 @ probe)
            except ArithmeticError:      # f_v undefined at v = 0: not affine in v
                lin = np.array([np.inf])
            ref = max(float(np.abs(J1).max(initial=0.0)), 1e-300)
            if not np.all(np.isfinite(lin)) or (np.abs(J1 - J2).max(initial=0.0) > 1e-9 * ref
                    or np.abs(lin).max(initial=0.0) > 1e-9 * ref * scale * 3):
                problems.append(
                    f"constraint {con.name!r} is nonlinear in the velocities (its Jacobian f_v "
                    "changes with v); quasi-velocities v = D w + w0 need constraints affine in v. "
                    "Use gaussopt.simulate, whose Gauss step treats nonlinear nonholonomic "
                    "constraints")
                continue
            # the rate of the rows by the complex step of f along (1, v) at a fixed velocity
            # argument when f is complex-safe (checked once against a difference of f_v),
            # else by a 4th-order difference of f_v
            U = np.eye(n)
            fd = _nh_rate_fd(con, t, q, v, U)
            try:
                with warnings.catch_warnings():      # math.* on complex input: a cast warning
                    warnings.simplefilter("ignore", _ComplexWarning)
                    cs = _nh_rate_cs(con, t, q, v, U)
                err = float(np.abs(cs - fd).max(initial=0.0))
                self._nh_complex[i] = err <= 1e-6 * max(float(np.abs(fd).max(initial=0.0)), ref)
            except (TypeError, ValueError):
                self._nh_complex[i] = False
        if problems:
            raise ModelError("QuasiVelocities cannot treat the system: " + "; ".join(problems) + ".")
        if not self.automatic:
            self._check_user(t, q, v)
        self._prepared = True

    def _check_user(self, t: float, q: np.ndarray, v: np.ndarray) -> None:
        """Validate the user's D, w0 (shapes, null space, rank) and their derivative paths."""
        n = self.n
        B, c = self._rows(t, q)
        fr = self._svd(B, c, t)
        D = self._user_D(t, q)
        k = n - fr.r
        problems = []
        if D.shape != (n, k):
            raise ModelError(f"`D(t, q)` must have shape ({n}, {k}) (n coordinates, n - rank B = "
                             f"{k} degrees of freedom), found {D.shape}.")
        nb = B / fr.norms[:, None] if B.shape[0] else B
        res = float(np.abs(nb @ D).max(initial=0.0))
        dn = float(np.abs(D).max(initial=0.0))
        if res > 1e-9 * max(dn, 1e-300):
            problems.append(f"`D` does not span admissible velocities: max |B D| (rows normalized) "
                            f"= {res:.3g} relative to max |D| = {dn:.3g}; expected B D = 0")
        sv = np.linalg.svd(D, compute_uv=False)
        if k and sv[-1] <= self.rank_tol * sv[0]:
            problems.append(f"`D` is rank deficient (singular values {sv}); expected rank {k}")
        if self._w0 is not None:
            w0 = self._user_w0(t, q)
            if w0.shape != (n,):
                problems.append(f"`w0(t, q)` must have shape ({n},), found {w0.shape}")
            elif B.shape[0]:
                r0 = float(np.abs((B @ w0 + c) / fr.norms).max())
                if r0 > 1e-9 * (1.0 + float(np.abs(w0).max())):
                    problems.append(f"`w0` violates the velocity constraints: max |B w0 + c| "
                                    f"(rows normalized) = {r0:.3g}")
        if self._dD is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", _ComplexWarning)
                    cs = self._cs(self._D, t, q, v, (n, k))
            except TypeError as e:
                problems.append(f"`D` is not complex-safe ({e}); use numpy ufuncs or pass dD=")
            else:
                fd = _fd4(lambda s: self._user_D(t + s, q + s * v), v)
                if np.abs(cs - fd).max(initial=0.0) > 1e-6 * max(float(np.abs(fd).max(initial=0.0)), dn):
                    problems.append("the complex-step derivative of `D` disagrees with a finite "
                                    "difference: D is not complex-safe (abs, math.*, casts); write it "
                                    "with numpy ufuncs or pass dD=")
        else:
            dd = np.asarray(self._dD(t, q, v), dtype=float)
            if dd.shape != (n, k):
                problems.append(f"`dD(t, q, v)` must have shape ({n}, {k}), found {dd.shape}")
            else:
                fd = _fd4(lambda s: self._user_D(t + s, q + s * v), v)
                if np.abs(dd - fd).max(initial=0.0) > 1e-6 * max(float(np.abs(fd).max(initial=0.0)), dn):
                    problems.append(f"`dD` disagrees with a finite difference of D along (1, v) "
                                    f"(max difference {np.abs(dd - fd).max():.3g})")
        if self._w0 is not None and self._dw0 is not None:
            dw = np.asarray(self._dw0(t, q, v), dtype=float).reshape(-1)
            fd = _fd4(lambda s: self._user_w0(t + s, q + s * v), v)
            if dw.shape != (n,) or np.abs(dw - fd).max(initial=0.0) > \
                    1e-6 * max(float(np.abs(fd).max(initial=0.0)), 1.0):
                problems.append("`dw0` disagrees with a finite difference of w0 along (1, v) or "
                                f"has the wrong shape ({dw.shape}, expected ({n},))")
        if self._w0 is not None and self._dw0 is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", _ComplexWarning)
                    cs = self._cs(self._w0, t, q, v, (n,))
            except TypeError as e:
                problems.append(f"`w0` is not complex-safe ({e}); pass dw0=")
            else:
                fd = _fd4(lambda s: self._user_w0(t + s, q + s * v), v)
                if np.abs(cs - fd).max(initial=0.0) > 1e-6 * max(float(np.abs(fd).max(initial=0.0)), 1.0):
                    problems.append("the complex-step derivative of `w0` disagrees with a finite "
                                    "difference: w0 is not complex-safe; pass dw0=")
        if problems:
            raise ModelError("QuasiVelocities: " + "; ".join(problems) + ".")

    # ------------------------------------------------------------------ user callables
    def _user_D(self, t, q) -> np.ndarray:
        D = np.asarray(self._D(t, q), dtype=float)
        return D.reshape(self.n, -1) if D.ndim == 1 else D

    def _user_w0(self, t, q) -> np.ndarray:
        return np.asarray(self._w0(t, q), dtype=float).reshape(-1)

    @staticmethod
    def _cs(fun: Callable, t: float, q: np.ndarray, v: np.ndarray, shape: tuple) -> np.ndarray:
        val = np.asarray(fun(t + 1j * _H, q + 1j * _H * v), dtype=complex)
        return val.imag.reshape(shape) / _H

    # ------------------------------------------------------------------ frames
    def _svd(self, B: np.ndarray, c: np.ndarray, t: float) -> _Frame:
        fr = _Frame()
        n = self.n
        m = B.shape[0]
        fr.B, fr.c = B, c
        if m == 0:
            fr.norms = np.zeros(0)
            fr.Ur, fr.sr, fr.Vr, fr.r = np.zeros((0, 0)), np.zeros(0), np.zeros((n, 0)), 0
            return fr
        norms = np.sqrt((B * B).sum(axis=1))
        if self._ref_norms is None or self._ref_norms.shape != norms.shape:
            self._ref_norms = norms.copy()
        else:
            np.maximum(self._ref_norms, norms, out=self._ref_norms)
        if not np.all(norms > self.rank_tol * self._ref_norms) or not np.all(np.isfinite(B)):
            raise GaussoptError(
                f"a velocity constraint row vanished or is not finite at t={t} (row norms "
                f"{norms}, largest seen {self._ref_norms}): a singular position, where the "
                "quasi-velocity parametrization is not defined. Use gaussopt.simulate with a "
                "Projection.")
        fr.norms = norms
        U, s, Vt = np.linalg.svd(B / norms[:, None], full_matrices=False)
        r = int(np.count_nonzero(s > self.rank_tol * s[0]))
        fr.Ur, fr.sr, fr.Vr, fr.r = U[:, :r], s[:r], Vt[:r].T, r
        return fr

    def _initial_anchor(self, fr: _Frame) -> np.ndarray:
        """Loewdin-orthonormalized columns of P with the largest QR pivots, in coordinate order."""
        n, k = self.n, self.n - fr.r
        P = np.eye(n) - fr.Vr @ fr.Vr.T
        from scipy.linalg import qr

        _, _, piv = qr(P, pivoting=True, mode="economic")
        G = P[:, np.sort(piv[:k])]
        s, Us = np.linalg.eigh(G.T @ G)
        return G @ (Us / np.sqrt(s)) @ Us.T

    def set_anchor(self, t: float, q, E: Optional[np.ndarray] = None) -> None:
        """(Re-)anchor the automatic basis at ``(t, q)``.

        Parameters
        ----------
        t : float
        q : array_like, shape (n,)
        E : ndarray, shape (n, k), optional
            The anchor frame; default the orthonormalized columns of the
            null-space projector with the largest pivots (the quasi-velocities
            then follow the coordinates where they can).
        """
        q = as_state(q, self.n, "q")
        B, c = self._rows(float(t), q)
        fr = self._svd(B, c, float(t))
        if self.r is not None and fr.r != self.r:
            raise GaussoptError(f"the rank of the velocity constraints changed ({self.r} -> {fr.r}) "
                                f"at t={t}.")
        self.r, self.k = fr.r, self.n - fr.r
        if E is None:
            E = self._initial_anchor(fr)
        else:
            E = np.asarray(E, dtype=float)
            if E.shape != (self.n, self.k):
                raise ModelError(f"`E` must have shape ({self.n}, {self.k}), found {E.shape}.")
        self.anchor = E

    def _frame(self, t: float, q: np.ndarray) -> _Frame:
        B, c = self._rows(t, q)
        fr = self._svd(B, c, t)
        if self.r is None:
            self.r, self.k = fr.r, self.n - fr.r
        elif fr.r != self.r:
            raise GaussoptError(
                f"the rank of the velocity constraints changed from {self.r} to {fr.r} at t={t}: "
                "a singular position, where the number of degrees of freedom changes and the "
                "quasi-velocity parametrization breaks down. Use gaussopt.simulate with a "
                "Projection there.")
        r = fr.r
        # minimum-norm particular solution -Bn^+ cn
        if r:
            cn = c / fr.norms
            w0_min = -fr.Vr @ ((fr.Ur.T @ cn) / fr.sr)
        else:
            w0_min = np.zeros(self.n)
        if self.automatic:
            if self.anchor is None:
                self.set_anchor(t, q)
            E = self.anchor
            G = E - fr.Vr @ (fr.Vr.T @ E)
            s, Us = np.linalg.eigh(G.T @ G)
            if s.size and s[0] < _CHART_FLOOR:
                raise GaussoptError(
                    f"the automatic quasi-velocity basis lost its chart at t={t} (cos^2 of the "
                    f"largest principal angle to the anchor frame = {s[0]:.3g}); decrease the "
                    "integrator's step (max_step) or raise chart_tol.")
            rs = np.sqrt(s)
            fr.X = (Us / rs) @ Us.T
            fr.Xinv = (Us * rs) @ Us.T
            fr.s, fr.Us, fr.E = s, Us, E
            fr.D = G @ fr.X
            fr.DtD = None
        else:
            fr.D = self._user_D(t, q)
            fr.DtD = fr.D.T @ fr.D
        fr.w0 = w0_min if self._w0 is None else self._user_w0(t, q)
        return fr

    def chart_quality(self, t: float, q) -> float:
        """Cosine of the largest principal angle between the anchor frame and ``null(B(t, q))``
        (1 for a user basis)."""
        if not self.automatic or self.anchor is None:
            return 1.0
        fr = self._frame(float(t), as_state(q, self.n, "q"))
        return float(np.sqrt(fr.s[0])) if fr.s.size else 1.0

    # ------------------------------------------------------------------ public maps
    def basis(self, t: float, q) -> tuple[np.ndarray, np.ndarray]:
        """``(D, w0)`` at ``(t, q)``: shapes (n, k) and (n,)."""
        fr = self._frame(float(t), as_state(q, self.n, "q"))
        return fr.D.copy(), fr.w0.copy()

    def velocity(self, t: float, q, w) -> np.ndarray:
        """Generalized velocities ``v = D w + w0``, shape (n,)."""
        D, w0 = self.basis(t, q)
        return D @ np.asarray(w, dtype=float) + w0

    def quasi(self, t: float, q, v) -> np.ndarray:
        """Quasi-velocities of ``v``: the least-squares ``w`` of ``D w = v - w0``, shape (k,)."""
        fr = self._frame(float(t), as_state(q, self.n, "q"))
        return self._w_of(fr, as_state(v, self.n, "v"))

    @staticmethod
    def _w_of(fr: _Frame, v: np.ndarray) -> np.ndarray:
        if fr.DtD is None:
            return fr.D.T @ (v - fr.w0)
        return np.linalg.solve(fr.DtD, fr.D.T @ (v - fr.w0))

    def basis_rate(self, t: float, q, w) -> np.ndarray:
        """``D'``, the time derivative of the basis along the motion, shape (n, k)."""
        t = float(t)
        q = as_state(q, self.n, "q")
        fr = self._frame(t, q)
        v = fr.D @ np.asarray(w, dtype=float) + fr.w0
        if not self.automatic:
            return self._Ddot_user(t, q, v)
        R = self._rate(t, q, v, fr.D) / fr.norms[:, None] if fr.r else np.zeros((0, self.k))
        Omega, _ = self._omega(fr, R)
        pinv_R = fr.Vr @ ((fr.Ur.T @ R) / fr.sr[:, None]) if fr.r else np.zeros((self.n, self.k))
        return -pinv_R + fr.D @ Omega

    def _Ddot_user(self, t, q, v) -> np.ndarray:
        if self._dD is not None:
            return np.asarray(self._dD(t, q, v), dtype=float).reshape(self.n, -1)
        return self._cs(self._D, t, q, v, (self.n, self.k))

    def _omega(self, fr: _Frame, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``Omega = D^T D'`` of the chart basis and ``Y = Bn^{+T}`` (m, n)."""
        k = self.k
        if fr.r == 0:
            return np.zeros((k, k)), np.zeros((0, self.n))
        Y = (fr.Ur / fr.sr) @ fr.Vr.T
        H = R.T @ (Y @ fr.E)
        Sd = -(fr.Xinv @ H + H.T @ fr.Xinv)
        rs = np.sqrt(fr.s)
        dk = -1.0 / (np.outer(rs, rs) * (rs[:, None] + rs[None, :]))   # Daleckii-Krein, s^(-1/2)
        Xd = fr.Us @ (dk * (fr.Us.T @ Sd @ fr.Us)) @ fr.Us.T
        return -H @ fr.X + fr.Xinv @ Xd, Y

    # ------------------------------------------------------------------ dynamics
    def _evaluate(self, t: float, q: np.ndarray, w: np.ndarray, fr: Optional[_Frame] = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Optional[_Frame]]:
        """``(v, w', a, frame)`` at ``(t, q, w)`` (frame None on the fully-user path)."""
        if self._direct and fr is None:
            # D, w0 and both derivatives given (checked once against the constraints):
            # paper 000's equations as they stand, no constraint evaluation
            D = self._user_D(t, q)
            v = D @ w + self._user_w0(t, q)
            a_c = np.asarray(self._dD(t, q, v), dtype=float).reshape(self.n, -1) @ w \
                + np.asarray(self._dw0(t, q, v), dtype=float).reshape(-1)
            wd, a = self._solve_reduced(t, q, v, D, a_c)
            return v, wd, a, None
        if fr is None:
            fr = self._frame(t, q)
        D = fr.D
        v = D @ w + fr.w0
        n, k, r = self.n, self.k, fr.r
        if r:
            bn = self._gamma(t, q, v) / fr.norms
            a_row = fr.Vr @ ((fr.Ur.T @ bn) / fr.sr)
        else:
            a_row = np.zeros(n)
        if self.automatic:
            if r:
                R = self._rate(t, q, v, D) / fr.norms[:, None]
                Omega, Y = self._omega(fr, R)
                nu = Omega @ w
                if self._w0 is None:
                    nu = nu + R.T @ (Y @ fr.w0)
                else:
                    nu = nu + D.T @ self._w0dot(t, q, v)
            else:
                nu = np.zeros(k) if self._w0 is None else D.T @ self._w0dot(t, q, v)
            a_c = a_row + D @ nu
        else:
            Dd = self._Ddot_user(t, q, v)
            nu = D.T @ (Dd @ w)
            if self._w0 is None:
                nu = nu - Dd.T @ fr.w0
            else:
                nu = nu + D.T @ self._w0dot(t, q, v)
            a_c = a_row + D @ np.linalg.solve(fr.DtD, nu)
        wd, a = self._solve_reduced(t, q, v, D, a_c)
        return v, wd, a, fr

    def _solve_reduced(self, t: float, q: np.ndarray, v: np.ndarray, D: np.ndarray,
                       a_c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``w'`` from ``D^T M D w' = D^T (F - M a_c)`` and ``a = D w' + a_c``; ``D^T M D``
        must be positive definite (Cholesky test)."""
        M = self.system.mass(t, q)
        F = self.system.force(t, q, v)
        As = D.T @ M @ D
        rhs = D.T @ (F - M @ a_c)
        try:
            np.linalg.cholesky(As)                   # the definiteness check
        except np.linalg.LinAlgError:
            vals, vecs = np.linalg.eigh(As)
            raise IndeterminateMotionError(
                f"D^T M D is not positive definite at t={t} (eigenvalues {vals}): the mass "
                "matrix vanishes on an admissible direction, so the motion is not determined.",
                direction=D @ vecs[:, 0]) from None
        wd = np.linalg.solve(As, rhs)
        return wd, D @ wd + a_c

    def _w0dot(self, t, q, v) -> np.ndarray:
        if self._dw0 is not None:
            return np.asarray(self._dw0(t, q, v), dtype=float).reshape(-1)
        return self._cs(self._w0, t, q, v, (self.n,))

    def reduced_rhs(self, t: float, q, w) -> np.ndarray:
        """Quasi-accelerations ``w' = (D^T M D)^{-1} D^T (F - M a_c)``, shape (k,).

        For the automatic basis the current anchor is used (set at the first
        call, or by :meth:`set_anchor` / :meth:`simulate`).
        """
        q = as_state(q, self.n, "q")
        if not self._prepared:
            self._prepare(float(t), q, np.zeros(self.n))
        fr = self._frame(float(t), q)
        w = np.asarray(w, dtype=float).reshape(-1)
        if w.shape != (self.k,):
            raise ModelError(f"`w` must have shape ({self.k},), found {w.shape}.")
        return self._evaluate(float(t), q, w, fr)[1]

    def accelerations(self, t: float, q, w) -> np.ndarray:
        """Generalized accelerations ``a = D w' + a_c``, shape (n,)."""
        q = as_state(q, self.n, "q")
        w = np.asarray(w, dtype=float).reshape(-1)
        if not self._prepared:
            self._prepare(float(t), q, np.zeros(self.n))
        return self._evaluate(float(t), q, w)[2]

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """Right-hand side of the first-order system ``y = (q, w)``: ``(D w + w0, w')``."""
        self._nfev += 1
        n = self.n
        v, wd, _, _ = self._evaluate(t, y[:n], y[n:])
        return np.concatenate([v, wd])

    # ------------------------------------------------------------------ simulate
    def simulate(self, t_span: Sequence[float], q0, v0=None, *, w=None, method: str = "DOP853",
                 rtol: float = 1e-9, atol: float = 1e-9, t_eval: Optional[Sequence[float]] = None,
                 first_step: Optional[float] = None, max_step: float = np.inf,
                 project_positions: bool = False, consistency_tol: float = 1e-8,
                 max_steps: int = 10_000_000, progress: Optional[Callable[[float], Any]] = None
                 ) -> Trajectory:
        """Integrate the reduced equations from ``q0`` with velocities ``v0`` (or ``w``).

        Parameters
        ----------
        t_span : (float, float)
        q0 : array_like, shape (n,)
            Must satisfy the holonomic constraints to ``consistency_tol``.
        v0 : array_like, shape (n,), optional
            Initial generalized velocities; must satisfy the velocity
            constraints to ``consistency_tol`` (row-normalized). Give either
            ``v0`` or ``w``.
        w : array_like, shape (k,), optional
            Initial quasi-velocities (in the initial basis: for the automatic
            one, :meth:`basis` after :meth:`set_anchor` at ``q0`` shows it).
        method : {"DOP853", "RK45", "RK23", "Radau", "BDF", "LSODA"}
        rtol, atol : float
            Tolerances of the integrator (on ``q`` and ``w``).
        t_eval : array_like, optional
            Output times; default every accepted step.
        first_step, max_step : float, optional
            Passed to the integrator.
        project_positions : bool, default False
            After every accepted step, project ``q`` onto the holonomic
            constraints (:class:`gaussopt.Projection`, mass metric) and
            recompute ``w`` there. Without it the velocity form of holonomic
            constraints holds exactly but ``Phi(q)`` drifts like the
            integration error.
        consistency_tol : float, default 1e-8
        max_steps : int
        progress : callable, optional
            ``progress(t)`` after every accepted step.

        Returns
        -------
        Trajectory
            ``q``, ``v = D w + w0``, ``a = D w' + a_c`` and residuals recomputed
            at the output times; ``multipliers`` are the minimum-norm ``lam``
            with ``B^T lam = M a - F``; ``meta["w"]`` holds the quasi-velocities
            (shape (N, k)) and ``meta["chart_switches"]`` the re-anchoring
            times; on a failure the part computed so far with ``success=False``.
        """

        system, n = self.system, self.n
        try:
            t0, t1 = (float(x) for x in t_span)
        except (TypeError, ValueError) as e:
            raise ModelError(f"`t_span` must be a pair (t0, t_end), found {t_span!r}.") from e
        if not (np.isfinite(t0) and np.isfinite(t1) and t1 > t0):
            raise ModelError(f"`t_span` must be finite with t_end > t0, found ({t0}, {t1}).")
        if method not in QUASI_METHODS:
            raise ModelError(f"`method` must be one of {list(QUASI_METHODS)}, found {method!r}.")
        for label, val in (("rtol", rtol), ("atol", atol)):
            if not (np.isfinite(val) and val > 0):
                raise ModelError(f"`{label}` must be positive, found {val!r}.")
        if (v0 is None) == (w is None):
            raise ModelError("give exactly one of `v0` (generalized velocities, shape (n,)) and `w` "
                             "(quasi-velocities, shape (k,)).")
        if t_eval is not None:
            t_eval = np.asarray(t_eval, dtype=float).ravel()
            if t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < t0 \
                    or t_eval[-1] > t1 or not np.all(np.isfinite(t_eval)):
                raise ModelError(f"`t_eval` must be increasing and within t_span [{t0}, {t1}].")
        q = as_state(q0, n, "q0")
        system.check(t0, q, as_state(v0, n, "v0") if v0 is not None else np.zeros(n))
        if system.holonomic:
            phi = system.position_residual(t0, q)
            J = system.position_jacobian(t0, q)
            d = np.abs(phi) / np.maximum(np.sqrt((J * J).sum(axis=1)), 1e-300)
            if d.max() > consistency_tol * (1.0 + np.abs(q).max()):
                raise ModelError(f"`q0` violates the holonomic constraints: |Phi_i|/|grad Phi_i| up to "
                                 f"{d.max():.3g} (consistency_tol={consistency_tol}). Project q0 first.")
        if not self._prepared:
            self._prepare(t0, q, as_state(v0, n, "v0") if v0 is not None else np.zeros(n))
        self.r = self.k = None
        self._ref_norms = None
        if self.automatic:
            self.anchor = None
            self.set_anchor(t0, q)
        fr = self._frame(t0, q)
        if v0 is not None:
            v = as_state(v0, n, "v0")
            wv = self._w_of(fr, v)
            vv = fr.D @ wv + fr.w0
            if fr.r:
                res = np.abs(fr.B @ v + fr.c) / fr.norms
                if res.max() > consistency_tol * (1.0 + np.abs(v).max()):
                    raise ModelError(f"`v0` violates the velocity constraints: normalized residual up "
                                     f"to {res.max():.3g} (consistency_tol={consistency_tol}). Correct "
                                     f"v0 or give quasi-velocities w= (v0 admissible is e.g. {vv}).")
        else:
            wv = np.asarray(w, dtype=float).reshape(-1)
            if wv.shape != (self.k,) or not np.all(np.isfinite(wv)):
                raise ModelError(f"`w` must be {self.k} finite quasi-velocities, found {w!r}.")
            vv = fr.D @ wv + fr.w0
        projector = Projection(velocity=False) if (project_positions and system.holonomic) else None

        y = np.concatenate([q, wv])
        self._nfev = 0
        out_t: list[float] = []
        out: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        switches: list[float] = []
        status, message = 0, "The integration reached the end of t_span."
        steps = n_proj = 0
        ev = t_eval
        ev_i = 0

        def record(tt, yy):
            vq, _, aq, _ = self._evaluate(tt, yy[:n], yy[n:])
            out_t.append(tt)
            out.append((yy[:n].copy(), vq, aq, yy[n:].copy()))

        wall0 = time.perf_counter()
        t = t0
        try:
            if ev is None or ev[0] == t0:
                record(t0, y)
                ev_i = 1 if ev is not None else 0
            kw: dict[str, Any] = {"rtol": rtol, "atol": atol, "max_step": max_step}
            if first_step is not None:
                kw["first_step"] = first_step

            def after_step(ode, t_prev, dense):
                nonlocal t, y, ev_i, n_proj
                y_new = ode.y.copy()
                changed = False
                if projector is not None:
                    qn, wn = y_new[:n], y_new[n:]
                    frn = self._frame(ode.t, qn)
                    vn = frn.D @ wn + frn.w0
                    qp, _, its = projector.project(system, ode.t, qn, vn, self.rank_tol)
                    if its:
                        n_proj += 1
                        frp = self._frame(ode.t, qp)
                        y_new = np.concatenate([qp, self._w_of(frp, vn)])
                        changed = True
                # outputs of this step, in the chart it was computed in
                if ev is None:
                    record(ode.t, y_new)
                else:
                    while ev_i < ev.size and ev[ev_i] <= ode.t:
                        te = ev[ev_i]
                        record(te, y_new if te == ode.t else dense(te))
                        ev_i += 1
                if self.automatic and self.k and ode.status == "running":
                    fr_end = self._frame(ode.t, y_new[:n])
                    if np.sqrt(fr_end.s[0]) < self.chart_tol:
                        self.anchor = fr_end.D.copy()
                        switches.append(float(ode.t))
                        changed = True
                    if fr_end.r:
                        # keep the next step's turn of null(B) below ~0.5 rad, so that the
                        # chart (valid up to 90 degrees) cannot break inside a step
                        v_end = fr_end.D @ y_new[n:] + fr_end.w0
                        R = self._rate(ode.t, y_new[:n], v_end, fr_end.D) / fr_end.norms[:, None]
                        turn = float(np.linalg.norm(
                            fr_end.Vr @ ((fr_end.Ur.T @ R) / fr_end.sr[:, None]), 2))
                        ode.max_step = min(max_step, 0.5 / turn) if turn > 0 else max_step
                t, y = ode.t, y_new
                if progress is not None:
                    progress(t)
                return y_new, changed

            counter = {"steps": 0}
            try:
                status, message = drive_ivp(method, self.rhs, t0, y, t1, kw, max_steps,
                                            after_step, counter)
            finally:
                steps = counter["steps"]
        except KeyboardInterrupt:
            status, message = -1, f"Interrupted (KeyboardInterrupt) at t={t}."
        except (GaussoptError, np.linalg.LinAlgError, FloatingPointError, ValueError) as e:
            status, message = -1, f"The quasi-velocity equations failed at t≈{t}: {type(e).__name__}: {e}"
        wall = time.perf_counter() - wall0
        traj = self._trajectory(np.asarray(out_t), out)
        traj.status, traj.message = status, message
        traj.stats.update({"steps": steps, "rhs_evaluations": self._nfev, "wall_time": wall,
                           "time_per_step": wall / steps if steps else float("nan"),
                           "chart_switches": len(switches), "projections": n_proj})
        traj.meta.update({"solver": "quasi_velocities", "method": method, "rtol": rtol, "atol": atol,
                          "basis": "automatic" if self.automatic else "user",
                          "chart_switches": switches, "system": system.name, "t_span": [t0, t1],
                          "project_positions": bool(project_positions)})
        return traj

    def _trajectory(self, t: np.ndarray, out: list) -> Trajectory:
        """Residuals, forces and multipliers recomputed at the samples."""
        system, n = self.system, self.n
        N = t.size
        k = self.k or 0
        q = np.array([o[0] for o in out]).reshape(N, n)
        v = np.array([o[1] for o in out]).reshape(N, n)
        a = np.array([o[2] for o in out]).reshape(N, n)
        w = np.array([o[3] for o in out]).reshape(N, k)
        m = sum(np.size(con.gamma(t[0], q[0], v[0])) for con in self._cons) if N else 0
        Qc = np.full((N, n), np.nan)
        lam = np.full((N, m), np.nan)
        pres, vres, ares = np.zeros(N), np.zeros(N), np.zeros(N)
        rank = np.full(N, self.r if self.r is not None else -1, dtype=int)
        smin = np.full(N, np.nan)
        energy = np.full(N, np.nan) if system.has_energy else None
        for i in range(N):
            ti, qi, vi, ai = float(t[i]), q[i], v[i], a[i]
            pres[i] = float(np.linalg.norm(system.position_residual(ti, qi)))
            vres[i] = float(np.linalg.norm(system.velocity_residual(ti, qi, vi)))
            if energy is not None:
                energy[i] = system.energy(ti, qi, vi)
            Qc[i] = system.mass(ti, qi) @ ai - system.force(ti, qi, vi)
            if m:
                B, _ = self._rows(ti, qi)
                ares[i] = float(np.linalg.norm(B @ ai - self._gamma(ti, qi, vi)))
                lam[i] = min_norm_multipliers(B, Qc[i], self.rank_tol)
                nr = np.sqrt((B * B).sum(axis=1))
                sv = np.linalg.svd(B / nr[:, None], compute_uv=False)
                smin[i] = float(sv[(self.r or 1) - 1]) if self.r else np.nan
        return Trajectory(t=t, q=q, v=v, a=a, constraint_force=Qc, multipliers=lam,
                          position_residual=pres, velocity_residual=vres, acceleration_residual=ares,
                          energy=energy, rank=rank, sigma_min=smin, coordinates=system.coordinates,
                          meta={"w": w})

    def __repr__(self) -> str:
        return (f"QuasiVelocities({self.system.name!r}, basis="
                f"{'automatic' if self.automatic else 'user'}, k={self.k})")


def _nh_rate_cs(con: Nonholonomic, t: float, q: np.ndarray, v: np.ndarray,
                U: np.ndarray) -> np.ndarray:
    """``B' U`` of an affine nonholonomic constraint: ``Im f(t + ih, q + ih v, u) / h`` minus
    the same at ``u = 0`` (exact for complex-safe ``f``)."""
    tc, qc = t + 1j * _H, q + 1j * _H * v
    base = np.asarray(con.f(tc, qc, np.zeros(q.size)), dtype=complex).reshape(-1).imag
    cols = [(np.asarray(con.f(tc, qc, U[:, j]), dtype=complex).reshape(-1).imag - base) / _H
            for j in range(U.shape[1])]
    return np.stack(cols, axis=1) if cols else np.zeros((base.size, 0))


def _nh_rate_fd(con: Nonholonomic, t: float, q: np.ndarray, v: np.ndarray,
                U: np.ndarray) -> np.ndarray:
    """``B' U`` by a 4th-order central difference of ``f_v`` along ``(1, v)``."""
    return _fd4(lambda s: con.jacobian(t + s, q + s * v, v) @ U, v)


def _fd4(fun: Callable[[float], np.ndarray], v: np.ndarray) -> np.ndarray:
    """4th-order central difference ``d/ds fun(s)`` at 0 with a step scaled by ``|(1, v)|``."""
    h = 1e-3 / np.sqrt(1.0 + float(np.dot(v, v)))
    return (np.asarray(fun(-2 * h)) - 8 * np.asarray(fun(-h)) + 8 * np.asarray(fun(h))
            - np.asarray(fun(2 * h))) / (12 * h)
