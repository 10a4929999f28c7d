"""Reusable, DPP-compiled cvxpy kernel for the Gauss-principle QP of one step.

Every time step of a Gauss-principle simulation solves the convex QP

.. math::

    \\min_a \\; \\tfrac12 a^T M a - F^T a
    \\quad \\text{s.t.} \\quad A a = b, \\quad G a \\ge h,

with ``M`` symmetric positive semi-definite and positive definite on
``null(A)`` (so that the minimiser is unique).  Only the numbers change from
one step to the next, never the shapes, so :class:`QPKernel` builds the cvxpy
problem once, with :class:`cvxpy.Parameter` objects for all data, and every
:meth:`QPKernel.solve` merely assigns parameter values.  The problem follows
the disciplined-parametrized-programming (DPP) rules, which lets cvxpy cache
its canonicalization: re-solves skip the expensive compilation.

Sign conventions
----------------
The returned multipliers satisfy the stationarity condition

.. math::

    M a = F + A^T \\lambda + G^T \\mu, \\qquad \\mu \\ge 0,

i.e. ``A^T lam`` and ``G^T mu`` are the constraint forces.  cvxpy reports the
dual of an equality ``A a == b`` with the *opposite* sign (its Lagrangian is
``f + y^T (A a - b)``), so ``lam = -y``; the dual of ``G a >= h`` is already
``mu >= 0`` in this convention.  Both facts are checked by the test-suite.

Numerical scaling
-----------------
Before the parameters are set the data are rescaled so that they are O(1):

* every row of ``A`` (and the matching entry of ``b``) is divided by its
  Euclidean norm; rows whose norm is negligible (``<= 64 eps`` times the
  largest row norm of ``[A; G]``) are replaced by ``0 a = 0`` (the caller
  guarantees consistency, so such a row carries no information);
  the same is done for ``G``/``h``;
* ``M`` and ``F`` are multiplied by ``s = n / trace(M)`` (or by
  ``1 / max|F|`` when ``M`` is numerically zero).

The minimiser ``a`` is invariant under this scaling; the multipliers are
mapped back to the caller's units (``lam_i = lam_scaled_i / (s ||A_i||)``)
and are 0 for dropped rows.

Backends
--------
``CLARABEL`` (default)
    Interior-point, run with the tolerances of :data:`gaussopt.core.settings.CLARABEL_TOLERANCES`
    (``1e-13``, as when gaussopt calls Clarabel directly); on well-conditioned problems
    ``a`` agrees with the exact KKT solution to ~1e-12 relative.
``OSQP``
    ADMM with ``eps_abs = eps_rel = 1e-7`` followed by solution polishing
    (a direct solve of the KKT system of the identified active set), which
    makes the result as accurate as a direct KKT solve (~1e-12) whenever
    polishing succeeds.  If polishing fails the ADMM iterate (~1e-7) is
    returned with status ``"optimal_inaccurate"``.  Tolerances of 1e-8 or
    below are often not reached by the ADMM iterations on medium-size
    problems (status ``user_limit`` -> :class:`SolverError`).  cvxpy's
    per-solve "Solution may be inaccurate" warning is silenced; the status
    field of :class:`QPOutcome` carries that information instead.
``SCS``
    First-order conic solver; low accuracy (typically 1e-5 .. 1e-7
    relative).  Usable for experiments only.
``HIGHS``
    Active-set QP solver of HiGHS; accuracy ~1e-6 with default options.

Any other QP/SOC-capable solver installed in cvxpy can be named too; see
:func:`available_solvers`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from gaussopt.core.exceptions import SolverError
from gaussopt.core.settings import CVXPY_BACKENDS

__all__ = ["QPKernel", "QPOutcome", "available_solvers", "DEFAULT_SOLVER"]

#: Backend used when ``solver=None``.
DEFAULT_SOLVER = "CLARABEL"

_EPS = np.finfo(float).eps
_TINY = np.finfo(float).tiny

#: Relative threshold below which a constraint row counts as zero.
_ZERO_ROW_RTOL = 64.0 * _EPS

#: Relative threshold below which an eigenvalue of ``M`` is clipped to 0.
_EIG_RTOL = 16.0 * _EPS

#: Default options per backend (user options are merged on top of them): the one table of
#: solver settings' (:data:`gaussopt.core.settings.CVXPY_BACKENDS`; Clarabel's tolerances are
#: the same as when gaussopt calls it directly)
_DEFAULT_OPTIONS = CVXPY_BACKENDS

_ACCEPTED_STATUSES = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)


def available_solvers() -> list[str]:
    """Names of the installed cvxpy backends able to solve the kernel's QP.

    Returns
    -------
    list of str
        Installed solvers that either accept a quadratic objective natively
        (cvxpy's QP solvers) or support second-order cones (conic solvers
        such as CLARABEL or SCS).  LP-only backends (e.g. ``SCIPY``) are
        excluded.
    """
    from cvxpy.constraints import SOC
    from cvxpy.reductions.solvers import defines

    out = []
    for name in cp.installed_solvers():
        if name in defines.QP_SOLVERS:
            out.append(name)
        elif name in defines.CONIC_SOLVERS:
            cls = defines.SOLVER_MAP_CONIC.get(name)
            if cls is not None and SOC in cls.SUPPORTED_CONSTRAINTS:
                out.append(name)
    return out


@dataclass
class QPOutcome:
    """Result of one :meth:`QPKernel.solve`.

    Attributes
    ----------
    a : ndarray, shape (n,)
        The minimiser (accelerations).
    lam : ndarray, shape (m,)
        Equality multipliers in the convention
        ``M a = F + A^T lam + G^T mu`` (caller's units).
    mu : ndarray, shape (p,)
        Inequality multipliers, ``mu >= 0``, same convention.
    status : str
        cvxpy status string: ``"optimal"`` or ``"optimal_inaccurate"``
        (the latter flags a solution the backend itself deems inaccurate).
    solver : str
        Name of the backend used.
    solve_time : float
        Wall time of ``problem.solve`` in seconds.
    """

    a: np.ndarray
    lam: np.ndarray
    mu: np.ndarray
    status: str
    solver: str
    solve_time: float


def _normalize_rows(
    R: np.ndarray, r: np.ndarray, zero_tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Divide each row of ``R`` and entry of ``r`` by the row's norm.

    Parameters
    ----------
    R : ndarray, shape (k, n)
    r : ndarray, shape (k,)
    zero_tol : float
        Rows with a norm ``<= zero_tol`` are replaced by zeros (and ``r`` by 0).

    Returns
    -------
    R_scaled, r_scaled : ndarray
        Scaled copies.
    inv_norm : ndarray, shape (k,)
        ``1 / ||R_i||`` for kept rows, 0 for dropped rows; the multiplier of
        the scaled row ``i`` times ``inv_norm[i]`` is the multiplier of the
        original row.
    """
    norms = np.linalg.norm(R, axis=1)
    keep = norms > zero_tol
    inv_norm = np.zeros_like(norms)
    inv_norm[keep] = 1.0 / norms[keep]
    return R * inv_norm[:, None], r * inv_norm, inv_norm


class QPKernel:
    """DPP-compiled Gauss-principle QP of fixed shape, re-solvable cheaply.

    Parameters
    ----------
    n : int
        Number of unknowns (size of ``a``), ``n >= 1``.
    m : int
        Number of equality rows ``A a = b`` (may be 0).
    p : int, optional
        Number of inequality rows ``G a >= h`` (default 0).
    solver : str or None, optional
        cvxpy backend name (case-insensitive), e.g. ``"CLARABEL"``
        (default), ``"OSQP"``, ``"SCS"``, ``"HIGHS"``.  Must be one of
        :func:`available_solvers`.
    solver_options : dict or None, optional
        Backend options passed to ``problem.solve``; they override the
        kernel's tight defaults for the chosen backend.

    Attributes
    ----------
    problem : cvxpy.Problem
        The parametrized problem, built once (``problem.is_dpp()`` is True).
    solver : str
        Upper-case name of the backend.
    solver_options : dict
        Effective backend options.

    Raises
    ------
    ValueError
        If a dimension is negative (or ``n < 1``) or the solver is unknown or
        not installed.

    Notes
    -----
    The objective is written ``0.5 * sum_squares(Lt @ a) - Fp @ a`` with
    ``Lt = L^T`` and ``M = L L^T`` from an eigen-decomposition, because
    ``quad_form(a, P)`` with a parametric ``P`` is not DPP.
    """

    def __init__(
        self,
        n: int,
        m: int,
        p: int = 0,
        *,
        solver: str | None = None,
        solver_options: dict | None = None,
    ) -> None:
        for name, val, low in (("n", n, 1), ("m", m, 0), ("p", p, 0)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
                raise ValueError(f"QPKernel: {name} must be an int, got {val!r}")
            if val < low:
                raise ValueError(f"QPKernel: {name} must be >= {low}, got {val}")
        self.n, self.m, self.p = int(n), int(m), int(p)

        choices = available_solvers()
        if solver is None:
            solver_name = DEFAULT_SOLVER
        elif isinstance(solver, str):
            solver_name = solver.strip().upper()
        else:
            raise ValueError(
                f"QPKernel: solver={solver!r} is not a string; installed "
                f"choices: {choices}"
            )
        if solver_name not in choices:
            raise ValueError(
                f"QPKernel: unknown or unavailable solver={solver!r}; "
                f"installed choices: {choices}"
            )
        self.solver: str = solver_name
        opts = dict(_DEFAULT_OPTIONS.get(solver_name, {}))
        if solver_options:
            opts.update(solver_options)
        self.solver_options: dict = opts

        n, m, p = self.n, self.m, self.p
        self._a = cp.Variable(n, name="a")
        self._Lt = cp.Parameter((n, n), name="Lt")
        self._Fp = cp.Parameter(n, name="F")
        objective = cp.Minimize(
            0.5 * cp.sum_squares(self._Lt @ self._a) - self._Fp @ self._a
        )
        constraints = []
        self._Ap = self._bp = self._eq = None
        self._Gp = self._hp = self._ineq = None
        if m > 0:
            self._Ap = cp.Parameter((m, n), name="A")
            self._bp = cp.Parameter(m, name="b")
            self._eq = self._Ap @ self._a == self._bp
            constraints.append(self._eq)
        if p > 0:
            self._Gp = cp.Parameter((p, n), name="G")
            self._hp = cp.Parameter(p, name="h")
            self._ineq = self._Gp @ self._a >= self._hp
            constraints.append(self._ineq)
        self.problem: cp.Problem = cp.Problem(objective, constraints)
        if not self.problem.is_dpp():  # pragma: no cover - structural guarantee
            raise SolverError("QPKernel: internal error, problem is not DPP")

        # Preallocated empty results for absent constraint blocks.
        self._empty = np.zeros(0)

    # ------------------------------------------------------------------
    def _check(self, name: str, X, shape: tuple[int, ...]) -> np.ndarray:
        """Convert ``X`` to a float array and check shape and finiteness."""
        try:
            Xa = np.asarray(X, dtype=float)
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"QPKernel.solve: {name} is not a real numeric array"
            ) from e
        if Xa.shape != shape:
            raise ValueError(
                f"QPKernel.solve: {name} has shape {Xa.shape}, expected {shape} "
                f"(kernel built for n={self.n}, m={self.m}, p={self.p})"
            )
        if not np.all(np.isfinite(Xa)):
            raise ValueError(f"QPKernel.solve: {name} contains NaN or inf")
        return Xa

    def solve(
        self,
        M: np.ndarray,
        F: np.ndarray,
        A: np.ndarray,
        b: np.ndarray,
        G: np.ndarray | None = None,
        h: np.ndarray | None = None,
    ) -> QPOutcome:
        """Solve the QP for new data (only parameter values change).

        Parameters
        ----------
        M : ndarray, shape (n, n)
            Symmetric positive semi-definite matrix (its symmetric part is
            used; negative round-off eigenvalues are clipped to 0).
        F : ndarray, shape (n,)
            Linear term (applied forces).
        A : ndarray, shape (m, n)
            Equality matrix; may be rank deficient if ``A a = b`` is
            consistent.  ``None`` is accepted when ``m == 0``.
        b : ndarray, shape (m,)
            Equality right-hand side (``None`` accepted when ``m == 0``).
        G : ndarray, shape (p, n), optional
            Inequality matrix of ``G a >= h``; required when ``p > 0``.
        h : ndarray, shape (p,), optional
            Inequality right-hand side; required when ``p > 0``.

        Returns
        -------
        QPOutcome
            Minimiser, multipliers (convention ``M a = F + A^T lam + G^T mu``),
            status, backend name and wall time.

        Raises
        ------
        ValueError
            If an input has the wrong shape or is not finite.
        SolverError
            If the backend raises or ends with a status other than
            ``"optimal"`` / ``"optimal_inaccurate"`` (e.g. infeasible
            inequalities).
        """
        n, m, p = self.n, self.m, self.p
        M = self._check("M", M, (n, n))
        F = self._check("F", F, (n,))
        if m == 0 and A is None:
            A = np.zeros((0, n))
        if m == 0 and b is None:
            b = self._empty
        A = self._check("A", A, (m, n))
        b = self._check("b", b, (m,))
        if p > 0 and (G is None or h is None):
            raise ValueError(
                f"QPKernel.solve: G and h are required (kernel built with p={p})"
            )
        if G is None:
            G = np.zeros((0, n))
        if h is None:
            h = self._empty
        G = self._check("G", G, (p, n))
        h = self._check("h", h, (p,))

        # --- scaling -------------------------------------------------
        Ms = 0.5 * (M + M.T)
        tr = float(np.trace(Ms))
        if tr > _TINY * n:
            s = n / tr
        else:  # M numerically zero: make the linear term O(1) instead
            fmax = float(np.max(np.abs(F))) if n else 0.0
            s = 1.0 / fmax if fmax > _TINY else 1.0
        Ms *= s
        Fs = s * F

        w, V = np.linalg.eigh(Ms)
        wmax = float(w[-1]) if w.size else 0.0
        w[w <= _EIG_RTOL * max(wmax, 0.0)] = 0.0
        self._Lt.value = np.sqrt(w)[:, None] * V.T
        self._Fp.value = Fs

        rownorm_max = 0.0
        if m:
            rownorm_max = float(np.max(np.linalg.norm(A, axis=1)))
        if p:
            rownorm_max = max(rownorm_max, float(np.max(np.linalg.norm(G, axis=1))))
        zero_tol = max(_ZERO_ROW_RTOL * rownorm_max, _TINY)
        if m:
            As, bs, a_inv = _normalize_rows(A, b, zero_tol)
            self._Ap.value = As
            self._bp.value = bs
        if p:
            Gs, hs, g_inv = _normalize_rows(G, h, zero_tol)
            self._Gp.value = Gs
            self._hp.value = hs

        # --- solve ---------------------------------------------------
        opts = dict(self.solver_options)  # cvxpy may mutate the dict
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # cvxpy warns "Solution may be inaccurate" on every inaccurate
                # solve; the status field reports it instead.
                warnings.filterwarnings(
                    "ignore", message="Solution may be inaccurate"
                )
                self.problem.solve(solver=self.solver, **opts)
        except Exception as e:  # cvxpy.error.SolverError, backend errors, ...
            raise SolverError(
                f"QPKernel: backend {self.solver} failed: "
                f"{type(e).__name__}: {e}"
            ) from e
        solve_time = time.perf_counter() - t0

        status = self.problem.status
        if status not in _ACCEPTED_STATUSES or self._a.value is None:
            raise SolverError(
                f"QPKernel: backend {self.solver} returned status {status!r} "
                f"(n={n}, m={m}, p={p})"
            )

        if status == cp.OPTIMAL and self.solver == "OSQP":
            # Accuracy hinges on polishing: 1 = success (OSQP >= 1.0 info).
            info = getattr(self.problem.solver_stats.extra_stats, "info", None)
            polish = getattr(info, "status_polish", 1)
            if self.solver_options.get("polishing", False) and polish != 1:
                status = cp.OPTIMAL_INACCURATE

        a = np.array(self._a.value, dtype=float).reshape(n)
        if m:
            y = self._eq.dual_value
            if y is None:
                raise SolverError(
                    f"QPKernel: backend {self.solver} returned no equality "
                    f"duals (status {status!r})"
                )
            # cvxpy: s M a - s F + As^T y = 0  ->  lam = -y / (s ||A_i||)
            lam = -np.asarray(y, dtype=float).reshape(m) * a_inv / s
        else:
            lam = np.zeros(0)
        if p:
            z = self._ineq.dual_value
            if z is None:
                raise SolverError(
                    f"QPKernel: backend {self.solver} returned no inequality "
                    f"duals (status {status!r})"
                )
            # cvxpy: s M a - s F - Gs^T z = 0, z >= 0 -> mu = z / (s ||G_i||)
            mu = np.maximum(np.asarray(z, dtype=float).reshape(p), 0.0) * g_inv / s
        else:
            mu = np.zeros(0)
        return QPOutcome(
            a=a, lam=lam, mu=mu, status=status, solver=self.solver,
            solve_time=solve_time,
        )

    def __repr__(self) -> str:
        return (
            f"QPKernel(n={self.n}, m={self.m}, p={self.p}, "
            f"solver={self.solver!r})"
        )
