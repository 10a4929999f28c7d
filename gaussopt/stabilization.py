"""Constraint stabilization: :class:`Baumgarte` and :class:`Projection`.

Integrating ``q' = v``, ``v' = a(t, q, v)`` keeps the constraints only at
the acceleration level; positions and velocities drift off them at the size
of the integration error. A stabilization pulls them back: Baumgarte's
feedback on the acceleration rows (paper 002), or a projection of the state
onto the constraints (the default of :func:`~gaussopt.simulate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from scipy.linalg import lapack

from .exceptions import ModelError
from .linalg import DEFAULT_RANK_TOL, mass_scale
from .system import System

__all__ = ["Baumgarte", "Projection"]

_EPS = float(np.finfo(float).eps)


@dataclass(frozen=True)
class Baumgarte:
    """Baumgarte stabilization (paper 002).

    Holonomic rows become ``Phi'' + alpha Phi' + beta Phi = 0`` and
    nonholonomic rows ``f' + gamma f = 0``: the acceleration rows keep ``A``
    and change ``b`` to ``b - alpha Phi' - beta Phi`` (holonomic) and
    ``b - gamma f`` (nonholonomic).

    Parameters
    ----------
    alpha, beta : float
        Holonomic gains (``alpha = 2 zeta omega``, ``beta = omega^2`` for a
        critically damped choice). Paper 002 uses ``alpha = beta = 10``.
    gamma : float, optional
        Nonholonomic gain; default ``alpha``.
    """

    alpha: float = 10.0
    beta: float = 10.0
    gamma: Optional[float] = None

    def __post_init__(self):
        for k in ("alpha", "beta", "gamma"):
            val = getattr(self, k)
            if val is not None and not (np.isfinite(val) and val >= 0):
                raise ModelError(f"Baumgarte `{k}` must be a finite number >= 0, found {val!r}.")

    def correction(self, system: System) -> Callable:
        """Build the hook ``(t, q, v, A) -> db`` for this system (once)."""
        alpha, beta = float(self.alpha), float(self.beta)
        gam = float(self.alpha if self.gamma is None else self.gamma)
        counts = system._row_counts
        hol, nh = [], []
        start = 0
        for c, k in zip(system.equalities, counts):
            idx = np.arange(start, start + k)
            if c.level == "position":
                hol.append((c, idx))
            elif c.level == "velocity":
                nh.append((c, idx))
            start += k
        m = start

        def db(t, q, v, A):
            out = np.zeros(m)
            for c, idx in hol:
                vel = A[idx] @ v
                if c.rheonomic or c._phi_t is not None:
                    vel = vel + c.phi_t(t, q)
                out[idx] = -alpha * vel - beta * c.residual(t, q)
            for c, idx in nh:
                out[idx] = -gam * c.velocity_residual(t, q, v)
            return out

        return db


@dataclass(frozen=True)
class Projection:
    """Project the state back onto the constraints after every accepted step.

    Positions: Gauss--Newton iterations ``q <- q + dq`` with the minimum-norm
    least-squares correction of ``Phi_q dq = -Phi`` in the metric ``W = M``
    (a column scaling when ``M`` is a positive diagonal, as in body
    coordinates) or ``W = M + w J^T J`` (``J`` the row-normalized
    velocity-level Jacobian, ``w = trace(M)/n``: the mass metric, augmented so
    that it stays positive definite for singular ``M``). Velocities: the same
    correction for ``J v + c = 0`` (iterated for nonlinear nonholonomic
    constraints).

    The corrections are least-squares and never raise on redundant rows: off
    the manifold by ``dist``, rows that are redundant on it have singular
    values ``~dist``, so directions below ``100 dist`` (relative) are dropped
    for the positions; the residual being corrected is in the range of ``J``
    only up to roundoff. The target sits at roundoff (iterations also stop when
    the correction stagnates at a few ulps): near a singular position a
    residual test ``|J v| <= tol`` would admit a velocity error ``tol/sigma``
    along the near-null direction.

    Parameters
    ----------
    tol : float, default 1e-15
        Target of the row-normalized residuals (``|Phi_i| / |grad Phi_i|``, a
        distance in the units of ``q``), relative to ``1 + |q|``.
    max_iter : int, default 10
    velocity : bool, default True
        Also project the velocities.
    rhs : bool, default True
        Also evaluate the right-hand side at the projected state (the
        *projected vector field* ``y' = f(P(y))``), so that the integrator's
        trial stages never see the off-constraint part of the acceleration
        field. Near singular positions that part is unbounded (it grows like
        ``1/sigma_min`` of the constraint rows, e.g. ``1/cos th1`` on paper
        001's four-bar) and without this an adaptive integrator's stages blow
        up there or jump to another branch of the constraint set. Costs one to
        two Gauss--Newton iterations per evaluation; ``rhs=False`` projects
        only after accepted steps.
    """

    tol: float = 1e-15
    max_iter: int = 10
    velocity: bool = True
    rhs: bool = True

    def __post_init__(self):
        if not (np.isfinite(self.tol) and self.tol > 0):
            raise ModelError(f"Projection `tol` must be positive, found {self.tol!r}.")
        if int(self.max_iter) < 1:
            raise ModelError(f"Projection `max_iter` must be >= 1, found {self.max_iter!r}.")

    @staticmethod
    def _correction(W: Optional[np.ndarray], J: np.ndarray, r: np.ndarray, rank_tol: float,
                    diag: Optional[np.ndarray] = None, floor: float = 0.0) -> np.ndarray:
        """Minimum-W-norm least-squares ``dx`` for ``J dx = -r`` (rows normalized).

        With ``diag`` (a positive diagonal mass, ``W = diag(diag)``) the metric
        factor is a column scaling; otherwise ``W`` is factorized (Cholesky).
        On a consistent system ``M`` and ``M + w J^T J`` give the same ``dx``.
        """
        nr = np.sqrt(np.einsum("ij,ij->i", J, J))
        nr = np.where(nr > 0, nr, 1.0)
        rn = -r / nr
        if diag is not None:
            L = None
            X = (J / nr[:, None] * (1.0 / np.sqrt(diag))).T       # W^-1/2 Jn^T, shape (n, m)
        else:
            L, info = lapack.dpotrf(W, lower=1, clean=1)
            if info != 0:
                raise ModelError(f"the projection metric M + w J^T J is not positive definite "
                                 f"(Cholesky info={info}).")
            X, _ = lapack.dtrtrs(L, (J / nr[:, None]).T, lower=1)  # L^-1 Jn^T
        K = X.T @ X
        LK, info = lapack.dpotrf(K, lower=1, clean=1)
        if info == 0 and LK.diagonal().min() ** 2 > 1e-8 * float(K.diagonal().max()):
            y, _ = lapack.dpotrs(LK, rn, lower=1)
            z = X @ y
        else:                                              # near-singular or redundant rows
            U, s, Vt = np.linalg.svd(X.T, full_matrices=False)
            thr = max(rank_tol, floor)
            k = int(np.count_nonzero(s > thr * s[0])) if s.size and s[0] > 0 else 0
            z = Vt[:k].T @ ((U[:, :k].T @ rn) / s[:k])
        if L is None:
            return z / np.sqrt(diag)
        dx, _ = lapack.dtrtrs(L, z, lower=1, trans=1)
        return dx

    def project(self, system: System, t: float, q: np.ndarray, v: np.ndarray,
                rank_tol: float = DEFAULT_RANK_TOL, vanished: float = 0.0
                ) -> tuple[np.ndarray, np.ndarray, int]:
        """Return the projected ``(q, v)`` and the number of corrections applied.

        ``vanished``: relative singular value below which a direction of the rows
        has vanished at a singular configuration (the step solver's
        ``FOLD_TOL * sigma_ref``); the corrections leave such directions alone, as
        the Gauss step does: a correction ``residual / sigma`` along them would
        throw the state along the linkage's shaky mode."""
        q = np.array(q, dtype=float)
        v = np.array(v, dtype=float)
        its = 0
        M = system.mass(t, q)
        w = mass_scale(M)
        holonomic_only = not system.nonholonomic
        d = np.diagonal(M)
        diag = d if (np.all(d > 0) and np.count_nonzero(M) == np.count_nonzero(d)) else None

        def metric(J):
            if diag is not None:
                return None
            if J.shape[0] == 0:
                return M + w * np.eye(system.n)
            nr = np.sqrt(np.einsum("ij,ij->i", J, J))
            Jn = J / np.where(nr > 0, nr, 1.0)[:, None]
            return M + w * (Jn.T @ Jn)

        def distances(res, J, what):
            if not (np.all(np.isfinite(res)) and np.all(np.isfinite(J))):
                raise ModelError(f"the {what} returned NaN or inf at t={t} (q = {q}): the "
                                 "constraint is undefined at this state.")
            nr = np.sqrt(np.einsum("ij,ij->i", J, J))
            return np.abs(res) / np.where(nr > 0, nr, 1.0)

        def converged(dist, x):
            return float(dist.max(initial=0.0)) <= self.tol * (1.0 + float(np.abs(x).max()))

        J = None                       # position Jacobian, valid at the current q
        if system.holonomic:
            for _ in range(int(self.max_iter)):
                phi = system.position_residual(t, q)
                J = system.position_jacobian(t, q)
                dist = distances(phi, J, "position constraint phi (or its Jacobian)")
                if converged(dist, q):
                    break
                Jm = J if holonomic_only else system.velocity_rows(t, q, v)
                dq = self._correction(metric(Jm), J, phi, rank_tol, diag,
                                      floor=max(vanished, 100.0 * float(dist.max())
                                                / (1.0 + float(np.abs(q).max()))))
                q += dq
                J = None
                its += 1
                if float(np.abs(dq).max()) <= 4 * _EPS * (1.0 + float(np.abs(q).max())):
                    break                                   # stagnated at roundoff
        if not self.velocity or not (system.holonomic or system.nonholonomic):
            return q, v, its
        if holonomic_only:
            # r = Phi_q v + Phi_t, exactly as Holonomic.velocity_residual; after a
            # correction dv the residual is r + J dv (linear in v), no re-evaluation
            if J is None:
                J = system.position_jacobian(t, q)
            if any(c.rheonomic or getattr(c, "_phi_t", None) is not None for c in system.holonomic):
                r = system.velocity_residual(t, q, v)       # includes Phi_t
            else:
                r = J @ v
            for _ in range(int(self.max_iter)):
                if converged(distances(r, J, "velocity residual"), v):
                    break
                dv = self._correction(metric(J), J, r, rank_tol, diag, floor=vanished)
                v += dv
                r = r + J @ dv
                its += 1
                if float(np.abs(dv).max()) <= 4 * _EPS * (1.0 + float(np.abs(v).max())):
                    break
            return q, v, its
        for _ in range(int(self.max_iter)):
            r = system.velocity_residual(t, q, v)
            J = system.velocity_rows(t, q, v)
            if converged(distances(r, J, "nonholonomic constraint f (or f_v)"), v):
                break
            dv = self._correction(metric(J), J, r, rank_tol, diag, floor=vanished)
            v += dv
            its += 1
            if float(np.abs(dv).max()) <= 4 * _EPS * (1.0 + float(np.abs(v).max())):
                break
        return q, v, its
