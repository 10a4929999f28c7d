"""Analysis of a planar multibody model at one state: rank of the joint equations,
redundant rows, joint reactions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.gauss.solution import DEFAULT_RANK_TOL, min_norm_multipliers, null_space_split
from gaussopt.core.result import StepResult
from gaussopt.core.checks import as_state as _as_state
from gaussopt.multibody.common.base_assembly import BaseAssembly
from gaussopt.multibody.planar.elements import GROUND

__all__ = ["RankReport", "JointReaction", "rank_report", "reactions"]


@dataclass
class RankReport:
    """Counts and the numerical rank of the joint equations at one state.

    Attributes
    ----------
    coordinates : int
        ``n = 3 * bodies``.
    equations : int
        ``m``, number of joint equations.
    gruebler : int
        Gruebler's count ``3 * bodies - equations``.
    rank : int
        Numerical rank of ``Phi_q`` (rows normalized, singular values relative
        to the largest below ``rank_tol`` dropped: :func:`gaussopt.gauss.solution.null_space_split`).
    dof : int
        ``n - rank``: the instantaneous degrees of freedom.
    redundant : list of str
        ``m - rank`` row labels that can be removed without changing the rank:
        going through the (normalized) rows in order, a row is redundant when its
        distance to the span of the rows kept before it is below ``rank_tol``
        (if that count disagrees with ``rank``, the ``m - rank`` rows of smallest
        distance). Which rows are called redundant is a choice; ``involved``
        lists every row of the dependent groups.
    involved : list of str
        Every row with a component above ``1e-6`` in the (unit) left null space
        of the normalized ``Phi_q``: the rows whose multipliers are not unique.
    singular_values : ndarray, shape (min(m, n),)
        Singular values of the row-normalized Jacobian, descending.
    rank_tol : float
    redundant_rows, involved_rows : ndarray of int
        Row indices of ``redundant`` and ``involved``.
    """

    coordinates: int
    equations: int
    gruebler: int
    rank: int
    dof: int
    redundant: list
    involved: list
    singular_values: np.ndarray
    rank_tol: float
    redundant_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    involved_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    def __str__(self) -> str:
        return (f"{self.coordinates} coordinates, {self.equations} joint equations (Gruebler "
                f"count {self.gruebler}); rank {self.rank} (rank_tol {self.rank_tol:g}), "
                f"{self.dof} DOF; redundant rows: {self.redundant or 'none'}")


@dataclass
class JointReaction:
    """Constraint force and moment a joint exerts on its two bodies (world frame).

    Attributes
    ----------
    joint : str
        Joint label, e.g. ``"Revolute(crank1,coupler)"``.
    body_i, body_j : str
        Body names (``"ground"`` for the ground).
    point : ndarray, shape (2,)
        World point the moments are taken about: the joint point ``P_j`` of body
        ``j`` (for :class:`DrivenAngle`, body ``j``'s centroid).
    force_i, force_j : ndarray, shape (2,)
        Force on body ``i`` / ``j`` [N]; ``force_i = -force_j``.
    moment_i, moment_j : float
        Moment on body ``i`` / ``j`` about ``point`` [N m]; ``moment_i = -moment_j``
        (zero for an ideal revolute joint).
    multipliers : ndarray, shape (k,)
        The joint's multipliers ``lam`` (``M a = F + Phi_q^T lam``).
    unique : bool
        ``False`` when the joint's rows belong to a redundant group: then only
        the sum over the group is determined and this is the *minimum-norm*
        choice of the multipliers, not a physical fact.
    """

    joint: str
    body_i: str
    body_j: str
    point: np.ndarray
    force_i: np.ndarray
    moment_i: float
    force_j: np.ndarray
    moment_j: float
    multipliers: np.ndarray
    unique: bool = True

    def __str__(self) -> str:
        tag = "" if self.unique else "  [redundant: minimum-norm choice, not unique]"
        return (f"{self.joint}: on {self.body_j} F = ({self.force_j[0]:.6g}, {self.force_j[1]:.6g}) N, "
                f"M = {self.moment_j:.6g} N m about ({self.point[0]:.4g}, {self.point[1]:.4g}){tag}")


def rank_report(asm: BaseAssembly, q, t: float = 0.0,
                rank_tol: float = DEFAULT_RANK_TOL) -> RankReport:
    """:meth:`Model.rank_report <gaussopt.multibody.Model.rank_report>` (``asm``: its
    :class:`~gaussopt.multibody.planar.assembly.Assembly`)."""
    q = _as_state(q, asm.n, "q")
    A = asm.jacobian(t, q)
    m, n = A.shape
    if m == 0:
        return RankReport(n, 0, n, 0, n, [], [], np.zeros(0), rank_tol)
    _, _, r = null_space_split(A, np.zeros(m), rank_tol)
    nr = np.sqrt((A * A).sum(axis=1))
    An = A / np.where(nr > 0, nr, 1.0)[:, None]
    U, s, _ = np.linalg.svd(An, full_matrices=True)          # report: full left basis
    left = U[:, r:]                                    # left null space (m - r columns)
    involved = (np.flatnonzero(np.sqrt((left * left).sum(axis=1)) > 1e-6) if m > r
                else np.zeros(0, dtype=int))
    # greedy in row order: residual of each row off the span of the rows kept before it
    resid = np.zeros(m)
    basis = np.zeros((0, n))
    for k in range(m):
        x = An[k].copy()
        for _ in range(2):                               # Gram-Schmidt, reorthogonalized
            x -= basis.T @ (basis @ x)
        resid[k] = float(np.sqrt(x @ x))
        if nr[k] > 0 and resid[k] > rank_tol:
            basis = np.vstack([basis, x / resid[k]])
    red = np.flatnonzero((resid <= rank_tol) | (nr == 0))
    if red.size != m - r:                                # disagreement near the threshold
        red = np.sort(np.argsort(resid, kind="stable")[:m - r])
    return RankReport(coordinates=n, equations=m, gruebler=n - m, rank=r, dof=n - r,
                      redundant=[asm.labels[k] for k in red],
                      involved=[asm.labels[k] for k in involved],
                      singular_values=s, rank_tol=rank_tol, redundant_rows=red,
                      involved_rows=np.asarray(involved, dtype=int))


def _multipliers(asm: BaseAssembly, A: np.ndarray, step: Union[StepResult, np.ndarray],
                 rank_tol: float) -> np.ndarray:
    """The multipliers of ``step``: minimum-norm ones of its constraint force, or as given."""
    if isinstance(step, StepResult):
        # the constraint force M a - F is unique; its minimum-norm multipliers are
        # computed here, whatever choice the step solver made
        Qc = np.asarray(step.constraint_force, dtype=float).reshape(-1)
        if Qc.shape != (asm.n,) or not np.all(np.isfinite(Qc)):
            raise ModelError(f"`step.constraint_force` must be a finite array of shape "
                             f"({asm.n},), found shape {Qc.shape}.")
        lam = min_norm_multipliers(A, Qc, rank_tol)
        off = float(np.abs(A.T @ lam - Qc).max(initial=0.0))
        if off > 1e-8 * (1.0 + float(np.abs(Qc).max(initial=0.0))):
            raise ModelError(f"`step.constraint_force` is not a combination of the joint rows "
                             f"at `q` (residual {off:.3g}): was the step computed at this state "
                             "for this model?")
        return lam
    lam = np.asarray(step, dtype=float).reshape(-1)
    if lam.shape != (asm.m,):
        raise ModelError(f"`step` multipliers must have shape ({asm.m},), found {lam.shape}.")
    if not np.all(np.isfinite(lam)):
        raise ModelError("`step` multipliers contain NaN or inf.")
    return lam


def reactions(asm: BaseAssembly, t: float, q, step: Union[StepResult, np.ndarray],
              rank_tol: float = DEFAULT_RANK_TOL) -> list[JointReaction]:
    """:meth:`Model.reactions <gaussopt.multibody.Model.reactions>` (``asm``: its
    :class:`~gaussopt.multibody.planar.assembly.Assembly`)."""
    q = _as_state(q, asm.n, "q")
    Ae = asm.jacobian(t, q, padded=True)     # (m, n + 3): the ground's columns too
    rep = rank_report(asm, q, t, rank_tol)
    lam = _multipliers(asm, np.ascontiguousarray(Ae[:, :asm.n]), step, rank_tol)
    involved = set(rep.involved_rows.tolist())
    qe = np.zeros(asm.n + 3)
    qe[:asm.n] = q
    ground = asm.ground
    out = []
    for jlabel, rows, (bi, bj, sj) in zip(asm.joint_labels, asm.joint_rows,
                                          asm.joint_ends):
        Q = Ae[rows].T @ lam[rows]
        Qi, Qj = Q[3 * bi:3 * bi + 3], Q[3 * bj:3 * bj + 3]
        Gi, Gj = qe[3 * bi:3 * bi + 2], qe[3 * bj:3 * bj + 2]
        if sj is None:
            pt = Gj.copy()
        else:
            c, s = np.cos(qe[3 * bj + 2]), np.sin(qe[3 * bj + 2])
            pt = Gj + np.array([c * sj[0] - s * sj[1], s * sj[0] + c * sj[1]])
        # moment about pt = moment about the centroid - cross(pt - G, f)
        mi = Qi[2] - ((pt[0] - Gi[0]) * Qi[1] - (pt[1] - Gi[1]) * Qi[0])
        mj = Qj[2] - ((pt[0] - Gj[0]) * Qj[1] - (pt[1] - Gj[1]) * Qj[0])
        name_i = GROUND if bi == ground else asm.body_names[bi]
        name_j = GROUND if bj == ground else asm.body_names[bj]
        out.append(JointReaction(joint=jlabel, body_i=name_i, body_j=name_j, point=pt,
                                 force_i=Qi[:2].copy(), moment_i=float(mi),
                                 force_j=Qj[:2].copy(), moment_j=float(mj),
                                 multipliers=lam[rows].copy(),
                                 unique=not any(int(k) in involved for k in rows)))
    return out
