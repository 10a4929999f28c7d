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
from gaussopt.core.exceptions import ModelError
from gaussopt.core.settings import DEFAULT_RANK_TOL
from gaussopt.model.system import System

__all__ = ["Baumgarte", "Projection"]



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
        only after accepted steps (a run that crosses a singular position
        then warns, :class:`~gaussopt.RankChangeWarning`).
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

    def project(self, system: System, t: float, q: np.ndarray, v: np.ndarray,
                rank_tol: float = DEFAULT_RANK_TOL, vanished: float = 0.0
                ) -> tuple[np.ndarray, np.ndarray, int]:
        """Return the projected ``(q, v)`` and the number of corrections applied.

        ``vanished``: relative singular value below which a direction of the rows
        has vanished at a singular configuration (the step solver's
        ``FOLD_TOL * sigma_ref``); the corrections leave such directions alone, as
        the Gauss step does: a correction ``residual / sigma`` along them would
        throw the state along the linkage's shaky mode."""
        import gaussopt.integrate.engine as E
        from gaussopt.core.model_interface import quiet_compile
        from gaussopt.model.model_functions import model_functions

        q = np.array(q, dtype=float)
        v = np.array(v, dtype=float)
        if system._row_counts is None:
            system.check(t, q, v)
        mf = model_functions(system)
        oi = np.zeros(E.N_OI, dtype=np.int64)
        of = np.zeros(E.N_OF)
        oi[E.I_PVEL] = int(self.velocity)
        oi[E.I_PITER] = int(self.max_iter)
        of[E.F_PTOL] = self.tol
        of[E.F_RANKTOL] = rank_tol
        with quiet_compile():
            status, its = E.project_at(mf.addrs, E.pack(E.model_data(mf, system)),
                                       E.pack(E.buffers(mf)),
                                       E.pack(E.Options(oi, of)), float(t), q, v, float(vanished))
        if status != 0:
            if mf.error is not None:
                raise mf.error
            raise ModelError(f"the constraints are not finite at t={t} (q = {q}): the "
                             "projection cannot proceed (a constraint is undefined there).")
        return q, v, int(its)
