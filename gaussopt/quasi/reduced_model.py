"""The reduced (quasi-velocity) equations of a :class:`~gaussopt.System`; see :mod:`gaussopt.quasi`."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from gaussopt.model.constraints import Holonomic, Nonholonomic
from gaussopt.core.exceptions import (IndeterminateMotionError, ModelError,
                                      UnsupportedConstraintError)
from gaussopt.core.settings import DEFAULT_RANK_TOL
from gaussopt.core.result import Trajectory
from gaussopt.core.checks import as_state
from gaussopt.model.system import System
import gaussopt.quasi.quasi_run as run
from gaussopt.quasi.charts import Charts, Frame
from gaussopt.quasi.model_checks import Checks
from gaussopt.quasi.derivatives import complex_step, nh_rate_cs, nh_rate_fd

__all__ = ["QuasiVelocities"]


class QuasiVelocities(Charts, Checks):
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
                out.append(nh_rate_cs(con, t, q, v, U))
            else:
                out.append(nh_rate_fd(con, t, q, v, U))
        return np.concatenate(out) if out else np.zeros((0, k))

    # ------------------------------------------------------------------ user callables
    def _user_D(self, t, q) -> np.ndarray:
        D = np.asarray(self._D(t, q), dtype=float)
        return D.reshape(self.n, -1) if D.ndim == 1 else D

    def _user_w0(self, t, q) -> np.ndarray:
        return np.asarray(self._w0(t, q), dtype=float).reshape(-1)

    # ------------------------------------------------------------------ dynamics
    def _evaluate(self, t: float, q: np.ndarray, w: np.ndarray, fr: Optional[Frame] = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Optional[Frame]]:
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
        return complex_step(self._w0, t, q, v, (self.n,))

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

    def simulate(self, t_span: Sequence[float], q0, v0=None, *, w=None, method: str = "DOP853",
                 rtol: float = 1e-9, atol: float = 1e-9, t_eval: Optional[Sequence[float]] = None,
                 first_step: Optional[float] = None, max_step: float = np.inf,
                 project_positions: bool = False, consistency_tol: float = 1e-8,
                 max_steps: int = 10_000_000, progress: Optional[Callable[[float], Any]] = None,
                 events: Union[None, Callable, Sequence[Callable]] = None,
                 dense_output: bool = False) -> Trajectory:
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
        events : callable or sequence of callables, optional
            Event functions ``f(t, q, v) -> float`` with solve_ivp's optional
            attributes ``terminal`` and ``direction``, exactly as for
            :func:`gaussopt.simulate`: a zero is a sign change of ``f`` between the
            ends of an accepted step, located by Brent's method to ``4 eps`` on the
            step's interpolant of ``(q, w)`` mapped to ``v = D w + w0`` in the chart
            the step was computed in. Results in ``t_events``, ``q_events``,
            ``v_events``; a terminal event ends the run with ``status = 1``.
        dense_output : bool, default False
            Keep every step's interpolant: ``traj.sol(t) -> (q, v)`` anywhere in the
            computed span (a :class:`gaussopt.integrate.dense_output.DenseSolution`; between the
            steps it is the integrator's interpolant of ``(q, w)``, not projected,
            with ``v = D w + w0`` in the step's chart, so the velocity constraints
            hold there to rounding; at the steps it returns the stored states).

        Returns
        -------
        Trajectory
            ``q``, ``v = D w + w0``, ``a = D w' + a_c`` and residuals recomputed
            at the output times; ``multipliers`` are the minimum-norm ``lam``
            with ``B^T lam = M a - F``; ``meta["w"]`` holds the quasi-velocities
            (shape (N, k)) and ``meta["chart_switches"]`` the re-anchoring
            times; on a failure (or ``KeyboardInterrupt``) the part computed so
            far with ``success=False``.
        """
        return run.simulate(self, t_span, q0, v0, w=w, method=method, rtol=rtol, atol=atol,
                            t_eval=t_eval, first_step=first_step, max_step=max_step,
                            project_positions=project_positions, consistency_tol=consistency_tol,
                            max_steps=max_steps, progress=progress, events=events,
                            dense_output=dense_output)

    def __repr__(self) -> str:
        return (f"QuasiVelocities({self.system.name!r}, basis="
                f"{'automatic' if self.automatic else 'user'}, k={self.k})")
