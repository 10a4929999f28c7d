"""Consistent states of a planar multibody model: positions on the joints
(Gauss--Newton), velocities from independent components, both together."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional

import numpy as np

from ..exceptions import ModelError
from ..linalg import DEFAULT_RANK_TOL, null_space_split
from ..step import as_state as _as_state

if TYPE_CHECKING:
    from .model import Model

__all__ = ["as_state", "assemble", "velocities", "initial_state"]


def as_state(n: int, x, label: str) -> np.ndarray:
    """``x`` as a finite float array of shape (n,), else a ModelError naming ``label``
    (:func:`gaussopt.step.as_state`)."""
    return _as_state(x, n, label)


def _prescribed(model: "Model", values: Optional[Mapping[str, float]], label: str):
    values = dict(values or {})
    idx = np.array([model.index(k) for k in values], dtype=np.intp)
    val = np.array([float(x) for x in values.values()])
    if not np.all(np.isfinite(val)):
        raise ModelError(f"`{label}` values must be finite, found {values}.")
    return idx, val


def _selector(idx: np.ndarray, n: int) -> np.ndarray:
    E = np.zeros((idx.size, n))
    E[np.arange(idx.size), idx] = 1.0
    return E


def assemble(model: "Model", fixed: Optional[Mapping[str, float]] = None, q_guess=None,
             t: float = 0.0, tol: float = 1e-13, max_iter: int = 50) -> np.ndarray:
    """:meth:`Model.assemble <gaussopt.multibody.Model.assemble>`."""
    idx, val = _prescribed(model, fixed, "fixed")
    q = np.zeros(model.n) if q_guess is None else as_state(model.n, q_guess, "q_guess").copy()
    q[idx] = val
    E = _selector(idx, model.n)
    res = np.inf
    for _ in range(int(max_iter)):
        ph = model.phi(t, q)
        res = float(np.abs(ph).max(initial=0.0))
        if res <= tol * (1.0 + float(np.abs(q).max())):
            return q
        K = np.vstack([model.jacobian(t, q), E])
        rhs = np.concatenate([-ph, val - q[idx]])
        q = q + np.linalg.lstsq(K, rhs, rcond=None)[0]
    raise ModelError(f"`assemble` did not converge in {max_iter} iterations (max |Phi| = "
                     f"{res:.3g}): the prescribed coordinates {dict(fixed or {})} may be "
                     "incompatible with the joints, or `q_guess` is too far away.")


def velocities(model: "Model", q, prescribed: Optional[Mapping[str, float]] = None,
               t: float = 0.0, rank_tol: float = DEFAULT_RANK_TOL) -> np.ndarray:
    """:meth:`Model.velocities <gaussopt.multibody.Model.velocities>`."""
    n = model.n
    q = as_state(n, q, "q")
    idx, val = _prescribed(model, prescribed, "prescribed")
    K = np.vstack([model.jacobian(t, q), _selector(idx, n)])
    rhs = np.concatenate([-model.phi_t(t, q), val])
    _, _, r = null_space_split(K, rhs, rank_tol)
    if r < n:
        raise ModelError(f"`prescribed` velocities {dict(prescribed or {})} do not determine the "
                         f"motion: the joint rows and the prescribed components have rank {r} < "
                         f"n = {n} here; prescribe {n - r} more independent component(s).")
    v = np.linalg.lstsq(K, rhs, rcond=None)[0]
    err = float(np.abs(K @ v - rhs).max(initial=0.0))
    if err > 1e-9 * (1.0 + float(np.abs(rhs).max(initial=0.0)) + float(np.abs(v).max())):
        raise ModelError(f"`prescribed` velocities {dict(prescribed or {})} contradict the "
                         f"joints (residual {err:.3g}).")
    return v


def initial_state(model: "Model", fixed: Optional[Mapping[str, float]] = None,
                  prescribed_velocities: Optional[Mapping[str, float]] = None,
                  q_guess=None, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Model.initial_state <gaussopt.multibody.Model.initial_state>`."""
    q0 = assemble(model, fixed, q_guess=q_guess, t=t)
    return q0, velocities(model, q0, prescribed_velocities, t)
