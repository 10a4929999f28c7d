"""Consistent states of a planar multibody model: positions on the joints
(Gauss--Newton), velocities from independent components, both together."""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.gauss.solution import DEFAULT_RANK_TOL, null_space_split
from gaussopt.core.checks import as_state as _as_state
from gaussopt.multibody.common.base_assembly import BaseAssembly

__all__ = ["as_state", "assemble", "velocities", "initial_state"]


def as_state(n: int, x, label: str) -> np.ndarray:
    """``x`` as a finite float array of shape (n,), else a ModelError naming ``label``
    (:func:`gaussopt.gauss.solve_step.as_state`)."""
    return _as_state(x, n, label)


def _prescribed(asm: BaseAssembly, values: Optional[Mapping[str, float]], label: str):
    values = dict(values or {})
    idx = np.array([asm.index_of(k) for k in values], dtype=np.intp)
    val = np.array([float(x) for x in values.values()])
    if not np.all(np.isfinite(val)):
        raise ModelError(f"`{label}` values must be finite, found {values}.")
    return idx, val


def _selector(idx: np.ndarray, n: int) -> np.ndarray:
    E = np.zeros((idx.size, n))
    E[np.arange(idx.size), idx] = 1.0
    return E


def assemble(asm: BaseAssembly, fixed: Optional[Mapping[str, float]] = None, q_guess=None,
             t: float = 0.0, tol: float = 1e-13, max_iter: int = 50) -> np.ndarray:
    """:meth:`Model.assemble <gaussopt.multibody.Model.assemble>`."""
    idx, val = _prescribed(asm, fixed, "fixed")
    q = np.zeros(asm.n) if q_guess is None else as_state(asm.n, q_guess, "q_guess").copy()
    q[idx] = val
    E = _selector(idx, asm.n)
    res = np.inf
    for _ in range(int(max_iter)):
        ph = asm.phi(t, q)
        res = float(np.abs(ph).max(initial=0.0))
        if res <= tol * (1.0 + float(np.abs(q).max())):
            return q
        K = np.vstack([asm.jacobian(t, q), E])
        rhs = np.concatenate([-ph, val - q[idx]])
        q = q + np.linalg.lstsq(K, rhs, rcond=None)[0]
    raise ModelError(f"`assemble` did not converge in {max_iter} iterations (max |Phi| = "
                     f"{res:.3g}): the prescribed coordinates {dict(fixed or {})} may be "
                     "incompatible with the joints, or `q_guess` is too far away.")


def velocities(asm: BaseAssembly, q, prescribed: Optional[Mapping[str, float]] = None,
               t: float = 0.0, rank_tol: float = DEFAULT_RANK_TOL) -> np.ndarray:
    """:meth:`Model.velocities <gaussopt.multibody.Model.velocities>`."""
    n = asm.n
    q = as_state(n, q, "q")
    values = dict(prescribed or {})
    val = np.array([float(x) for x in values.values()])
    if not np.all(np.isfinite(val)):
        raise ModelError(f"`prescribed` values must be finite, found {values}.")
    J = asm.jacobian(t, q)
    K = np.vstack([J, asm.velocity_rows(q, list(values))])
    rhs = np.concatenate([-asm.phi_t(t, q), val])
    vp, N, r = null_space_split(K, rhs, rank_tol)
    if r < n:
        v = _second_order(asm, t, q, J, vp, N, rank_tol, prescribed, r)
    else:
        v = np.linalg.lstsq(K, rhs, rcond=None)[0]
    err = float(np.abs(K @ v - rhs).max(initial=0.0))
    if err > 1e-9 * (1.0 + float(np.abs(rhs).max(initial=0.0)) + float(np.abs(v).max())):
        raise ModelError(f"`prescribed` velocities {dict(prescribed or {})} contradict the "
                         f"joints (residual {err:.3g}).")
    return v


def _left_null(J: np.ndarray, rank_tol: float) -> np.ndarray:
    """The combinations ``u`` of the rows with ``u^T J = 0`` (rows normalized, the rank
    decision of :func:`gaussopt.gauss.solution.null_space_split`), in the rows' own scaling,
    shape (m, m - rank)."""
    nr = np.sqrt((J * J).sum(axis=1))
    nr = np.where(nr > 0, nr, 1.0)
    U, sv, _ = np.linalg.svd(J / nr[:, None], full_matrices=True)
    rank = int(np.count_nonzero(sv > rank_tol))
    return U[:, rank:] / nr[:, None]


def _second_order(asm: BaseAssembly, t: float, q: np.ndarray, J: np.ndarray, vp: np.ndarray,
                  N: np.ndarray, rank_tol: float, prescribed, r: int) -> np.ndarray:
    """The velocity at a singular (folded) configuration, where the joint rows and the
    prescribed components leave directions ``N`` free to first order: ``v = vp + N b``
    with the second-order conditions of the joints, ``u^T gamma(q, v) = 0`` for every
    combination ``u`` of the rows with ``u^T Phi_q = 0`` (``d^2/dt^2 u^T Phi = u^T
    (Phi_q a - gamma)``: a motion through ``q`` keeps the joints only if it vanishes).
    At a fold of a redundant linkage these conditions single out the branch's velocity
    (the "shaky" mode is blocked at second order). ``gamma`` is quadratic in ``v``, so
    with one free direction the conditions are quadratics in ``b``, solved exactly
    (their common root, which must be unique). With more free directions the
    conditions may have several isolated roots (one per branch through a fold of a
    chain of parallelograms) that no local method can rule out: refused.
    """
    given = dict(prescribed or {})
    d = N.shape[1]
    U = _left_null(J, rank_tol)

    def cond(b):
        v = vp + N @ b
        g = asm.rows(t, q, v)[1]
        # the conditions and the size of their terms before cancellation
        return U.T @ g, np.abs(U).T @ np.abs(g)

    sv = 1.0 + float(np.abs(vp).max(initial=0.0))
    undetermined = (f"`prescribed` velocities {given} do not determine the motion: the joint "
                    f"rows and the prescribed components have rank {r} < n = {asm.n} here (a "
                    f"singular configuration)")
    more = f"; prescribe {d} more independent component(s)."
    if U.shape[1] == 0 or d > 1:
        raise ModelError(undetermined + more)
    e = np.ones(1)
    f0, s0 = cond(0.0 * e)
    fp, sp = cond(sv * e)
    fm, sm = cond(-sv * e)
    noise = 1e-12 * (s0 + sp + sm) + 1e-300
    c0, c1, c2 = f0, (fp - fm) / (2 * sv), (fp + fm - 2 * f0) / (2 * sv * sv)
    cands = []
    for i in range(U.shape[1]):
        if abs(c2[i]) * sv * sv > noise[i]:
            disc = c1[i] ** 2 - 4 * c2[i] * c0[i]
            if disc >= -1e-10 * c1[i] ** 2 - noise[i] * abs(c2[i]):
                sq = np.sqrt(max(disc, 0.0))
                q1 = -0.5 * (c1[i] + np.copysign(sq, c1[i]))
                cands += [q1 / c2[i]] + ([c0[i] / q1] if q1 != 0.0 else [])
        elif abs(c1[i]) * sv > noise[i]:
            cands.append(-c0[i] / c1[i])
    roots = []
    for b in cands:
        f, sz = cond(np.array([b]))
        if np.all(np.abs(f) <= 1e-8 * sz + noise) and not any(
                abs(b - r_) <= 1e-8 * (sv + abs(r_)) for r_ in roots):
            roots.append(b)
    if len(roots) == 1:
        return vp + N[:, 0] * roots[0]
    if roots or (not cands and np.all(np.abs(f0) <= noise)):
        # several branches through it take these values, or no condition acts
        raise ModelError(undetermined + f", and {len(roots)} of the branches through it "
                         f"take these values at second order" * bool(roots) + more)
    raise ModelError(f"`prescribed` velocities {given} contradict the joints at second "
                     f"order at this singular configuration (rank {r} < n = {asm.n}): no "
                     f"velocity with these components keeps them; the branches through "
                     f"it need other values.")


def initial_state(asm: BaseAssembly, fixed: Optional[Mapping[str, float]] = None,
                  prescribed_velocities: Optional[Mapping[str, float]] = None,
                  q_guess=None, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Model.initial_state <gaussopt.multibody.Model.initial_state>`."""
    q0 = assemble(asm, fixed, q_guess=q_guess, t=t)
    return q0, velocities(asm, q0, prescribed_velocities, t)
