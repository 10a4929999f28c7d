"""The linear algebra of one Gauss step, shared by every step solver.

Problem: ``minimize 0.5 a^T M a - F^T a  subject to  A a = b`` with ``M``
symmetric positive semi-definite. Its KKT conditions are Lagrange's equations
of the first kind ``M a = F + A^T lam``, ``A a = b``.

The numerics live in the compiled kernel :mod:`gaussopt.gauss.dense_step` (one
implementation, used by every solver and by the integrator); this module is
its Python face: it turns the kernel's status codes into specific exceptions
and its outputs into :class:`GaussSolution`.

Rank decisions (documented tolerance ``rank_tol``, default ``1e-8``)
--------------------------------------------------------------------
Made once per step and shared by every solver (:func:`gaussopt.gauss.dense_step.decide`):

1. Every row of ``A`` has the norm ``nu_i`` (computed without underflow). A
   row whose norm is below ``rank_tol`` times its *reference scale* (the
   largest norm it has shown at an accepted state of the run, or the
   ``row_scale`` the user gave) has *vanished* (a singular position) and is
   dropped; its right-hand side must vanish too. Without a reference (a
   fresh step) only exactly-zero rows vanish. When dropping vanished rows
   leaves the motion indeterminate, they are kept (as a fresh step would).
2. The live rows are normalized (``An``, ``bn``) and decomposed,
   ``An = U S V^T``. Directions with ``s_k <= rank_tol`` are redundant (the
   normalized rows have ``s_1`` in ``[1, sqrt(m)]``); along a run, a
   direction whose singular value has *vanished* -- fallen below
   ``FOLD_TOL = 1e-5`` times the largest value the smallest singular value
   has had at accepted states (a folded configuration of a redundant
   linkage) -- is dropped as well (:data:`gaussopt.gauss.dense_step.FOLD_TOL` says why).
   The numerical rank ``r`` is the number of the others, and every solver
   works with the kept orthonormal rows ``V_r^T a = S_r^-1 U_r^T bn``.
3. ``A a = b`` is consistent when the part of ``bn`` outside ``span(U_r)``,
   relative to ``|bn| + |a|`` (plus the rounding floor ``1e4 eps |F| / max|M|`` of the
   accelerations the forces produce), is below ``sqrt(rank_tol)`` -- or below what
   rounding explains near a singular configuration
   (:func:`gaussopt.gauss.dense_step.inconsistency_allowance`), in which case the
   least-squares step is taken and reported (``info["least_squares"]``);
   otherwise :class:`~gaussopt.core.exceptions.InconsistentConstraintsError`.
4. The motion is determinate when the reduced Hessian ``N^T M N`` (``N`` an
   orthonormal basis of the null space of the kept rows) is positive
   definite: a Cholesky pivot of ``N^T M N / w`` (``w = trace(M)/n``) below
   ``rank_tol**2`` means ``rank([M; A]) < n``:
   :class:`~gaussopt.core.exceptions.IndeterminateMotionError`.

The closed form (Udwadia--Kalaba with the weighted Moore--Penrose inverse,
Udwadia--Phohomsiri for singular ``M``) is then evaluated in null-space form::

    a = V_r beta + N z,    (N^T M N) z = N^T (F - M V_r beta)

which equals ``a_u + M^{-1/2} (A M^{-1/2})^+ (b - A a_u)`` where ``M`` is
invertible, needs ``M`` positive definite only on ``null(A)``, and satisfies
the kept rows by construction however large ``F`` is. No inverse is formed.
Every result is verified (backward errors of feasibility and stationarity)
before it is returned.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
import gaussopt.gauss.dense_algebra as LA
from gaussopt.core.checks import diagonal_of
from gaussopt.core.settings import DEFAULT_RANK_TOL
from gaussopt.core.exceptions import (InconsistentConstraintsError, IndeterminateMotionError,
                                      ModelError, SolverError)

__all__ = ["GaussSolution", "Decision", "solve_gauss", "decide", "null_space_split",
           "min_norm_multipliers", "inconsistency_residual", "mass_scale", "range_projector",
           "raise_for_status", "workspace", "DEFAULT_RANK_TOL"]

_NO_REF = {}


def _ref(ref: Optional[np.ndarray], m: int) -> np.ndarray:
    if ref is None:
        z = _NO_REF.get(m)
        if z is None:
            z = _NO_REF[m] = np.zeros(m)      # writable: numba types read-only arrays apart
        return z
    return ref


@dataclass
class GaussSolution:
    """Everything one step produced.

    Attributes
    ----------
    a : ndarray, shape (n,)
    lam : ndarray, shape (m,)
        Minimum-norm multipliers with ``M a = F + A^T lam`` (0 on vanished rows).
    rank : int
        Numerical rank of the live constraint rows.
    sigma : ndarray
        Singular values of the live row-normalized constraint rows, descending.
    dropped : ndarray of int
        Rows that vanished (singular position).
    inconsistency : float
        Relative size of the inconsistent part of ``b`` (``|bn - U_r U_r^T bn| / (|bn| + |a| + 1e4 eps |F| / max|M|)``).
    allowance : float
        Largest inconsistency rounding explains here.
    backward_error : float
        Backward error of ``a`` in the optimality conditions.
    fallback : bool
        The solver's own result failed its verification; the closed form was used.
    kept_vanished : bool
        Rows that vanished relative to their reference were kept (determinacy).
    """

    a: np.ndarray
    lam: np.ndarray
    rank: int
    sigma: np.ndarray
    dropped: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    inconsistency: float = 0.0
    allowance: float = 0.0
    backward_error: float = 0.0
    fallback: bool = False
    kept_vanished: bool = False

    @property
    def least_squares(self) -> bool:
        """The constraints were inconsistent beyond ``sqrt(rank_tol)`` (but within
        what rounding explains): the least-squares step was taken."""
        return self.inconsistency > self._root

    _root: float = 1e-4

    def info(self) -> dict:
        """The rank decision and verification, as reported in ``StepResult.info``."""
        return {"rank": self.rank,
                "sigma_min": float(self.sigma[self.rank - 1]) if self.rank else 1.0,
                "sigma": self.sigma, "dropped_rows": self.dropped.tolist(),
                "inconsistency": self.inconsistency, "least_squares": self.least_squares,
                "backward_error": self.backward_error, "fallback": self.fallback,
                "kept_vanished_rows": self.kept_vanished}


def mass_scale(M: np.ndarray) -> float:
    """``trace(M)/n``, the scale by which constraint rows are weighted; 1 if M = 0."""
    n = M.shape[0]
    w = float(np.trace(M)) / n
    return w if w > 0.0 else 1.0




def range_projector(M: np.ndarray, rtol: float = 1e-12) -> tuple[np.ndarray, int]:
    """Orthogonal projector ``M M^+`` onto the range of a PSD matrix and its rank."""
    d = diagonal_of(M)
    if d is not None:
        # diagonal: the projector keeps the coordinates with a mass (the eigenvalues are
        # the diagonal, the eigenvectors the unit vectors; the same threshold)
        keep = d > rtol * max(float(d.max()), 1e-300)
        return np.diag(keep.astype(float)), int(keep.sum())
    w, V = np.linalg.eigh(M)
    keep = w > rtol * max(float(w[-1]) if w.size else 0.0, 1e-300)
    Vr = V[:, keep]
    return Vr @ Vr.T, int(keep.sum())


def _nonfinite(M, F, A, b) -> Optional[ModelError]:
    """A ModelError naming the non-finite model data, or None."""
    bad = [name for name, x in (("mass M", M), ("force F", F), ("constraint rows A", A),
                                ("constraint right-hand side b", b)) if not np.all(np.isfinite(x))]
    if bad:
        return ModelError("the model returned non-finite values (NaN or inf) in "
                          + ", ".join(bad) + " at this state.")
    return None


def _indeterminate(M: np.ndarray, A: np.ndarray, live: np.ndarray, coords=None
                   ) -> IndeterminateMotionError:
    """The error naming a free direction ``d`` (``M d ~ 0``, ``A d ~ 0``)."""
    n = M.shape[0]
    Al = A[live]
    nr = np.sqrt(np.einsum("ij,ij->i", Al, Al)) if Al.size else np.zeros(0)
    An = Al / np.where(nr > 0, nr, 1.0)[:, None] if Al.size else np.zeros((0, n))
    Ma = M / mass_scale(M) + An.T @ An          # singular exactly when N^T M N is
    vals, vecs = np.linalg.eigh(Ma)
    d = vecs[:, 0]
    d = d * np.sign(d[np.argmax(np.abs(d))])
    names = coords or [f"q{i}" for i in range(n)]
    terms = " ".join(f"{c:+.3g}*{nm}" for c, nm in zip(d, names) if abs(c) > 1e-3)
    return IndeterminateMotionError(
        "The accelerations are not unique: rank([M; A]) < n. The direction "
        f"a -> a + s*d with d = ({terms}) changes neither the Gauss function nor the "
        f"constraints (smallest eigenvalue of M/w + An^T An is {vals[0]:.3g}). Add a constraint "
        "or mass in that direction.", direction=d)


def inconsistency_residual(A: np.ndarray, b: np.ndarray) -> float:
    """``min_a ||An a - bn||`` with rows normalized: how contradictory ``A a = b`` is."""
    nr = np.zeros(A.shape[0])
    if A.shape[0]:
        LA.row_norms(_arrays(A)[0], nr)
    keep = nr > 0
    An = A[keep] / nr[keep, None]
    bn = b[keep] / nr[keep]
    x = np.linalg.lstsq(An, bn, rcond=None)[0] if An.size else np.zeros(A.shape[1])
    r = float(np.linalg.norm(An @ x - bn)) if An.size else 0.0
    return float(np.hypot(r, np.linalg.norm(b[~keep])))


def raise_for_status(status: int, *, M, F, A, b, live, rank: int, rho: float = 0.0,
                     allow: float = 0.0, be: float = 0.0, tol: float = 0.0, coords=None,
                     solver: str = "closed_form") -> None:
    """Raise the specific exception for a kernel status (no-op for ``OK``)."""
    if status == K.OK:
        return
    if status == K.NONFINITE:
        raise _nonfinite(M, F, A, b) or ModelError("the model returned non-finite values.")
    if status == K.NONSYMMETRIC:
        asym = float(np.max(np.abs(M - M.T)))
        raise ModelError(f"the mass matrix M returned by the model is not symmetric at this "
                         f"state: max |M - M^T| = {asym:.3g} (relative "
                         f"{asym / max(float(np.max(np.abs(M))), 1e-300):.3g}); every solver "
                         "needs a symmetric M (check the mass function).")
    if status == K.INDETERMINATE:
        raise _indeterminate(M, A, live, coords)
    m = A.shape[0]
    if status == K.INCONSISTENT:
        res = inconsistency_residual(A, b)
        raise InconsistentConstraintsError(
            "The constraint rows are inconsistent: A a = b has no solution (row-normalized "
            f"least-squares residual {res:.3g}; relative size of the contradictory part "
            f"{rho:.3g} > {allow:.3g}, the most that rounding explains here; numerical rank "
            f"{rank} of {int(np.count_nonzero(live))} live rows of {m}). Check redundant "
            "constraints for contradictory right-hand sides or the initial state.",
            residual=res)
    if status == K.INCONSISTENT_VANISHED:
        dropped = np.flatnonzero(~live).tolist()
        raise InconsistentConstraintsError(
            f"Constraint rows {dropped} vanished (singular position: zero Jacobian row) but "
            f"their right-hand side is {np.asarray(b)[~live].tolist()}; no acceleration "
            "satisfies them.", residual=inconsistency_residual(A, b))
    if status == K.UNVERIFIED:
        raise SolverError(
            f"solver {solver!r}: the step failed its verification even on the robust path "
            f"(backward error {be:.3g} > {tol:.3g} in the optimality conditions): the data "
            "are too ill-conditioned for double precision here.")
    raise SolverError(f"unknown kernel status {status}")


def solve_gauss(M: np.ndarray, F: np.ndarray, A: np.ndarray, b: np.ndarray, *,
                rank_tol: float = DEFAULT_RANK_TOL, ref: Optional[np.ndarray] = None,
                sig_ref: float = 0.0,
                method: int = K.CLOSED_FORM, want_multipliers: bool = True,
                check_symmetry: bool = True, coords=None,
                mass_tree: Optional[np.ndarray] = None) -> GaussSolution:
    """One verified Gauss step (rank decision, solve, verification) with the kernel.

    Parameters
    ----------
    M : ndarray, shape (n, n)
        Symmetric positive semi-definite mass matrix.
    F : ndarray, shape (n,)
    A : ndarray, shape (m, n)
    b : ndarray, shape (m,)
    rank_tol : float
        Relative tolerance of every rank decision (module docstring).
    ref : ndarray, shape (m,), optional
        Reference scale of each row for the vanishing-row test (default: none,
        only exactly-zero rows vanish).
    sig_ref : float, optional
        Reference of the smallest singular value of the normalized rows for the
        vanishing-direction test (:data:`gaussopt.gauss.dense_step.FOLD_TOL`; default none).
    method : int
        :data:`gaussopt.gauss.dense_step.CLOSED_FORM` or :data:`gaussopt.gauss.dense_step.LAGRANGE`.
    want_multipliers : bool
    check_symmetry : bool
        Reject an asymmetric ``M`` (skip it for a constant, already checked ``M``).
    coords : sequence of str, optional
        Coordinate names, used in error messages.
    mass_tree : ndarray of int, shape (n,), optional
        ``M``'s sparsity is that of this tree (:attr:`gaussopt.System.mass_tree`): the
        range-space step then factors ``M`` along it, as the compiled step of the same
        system does (same answer to the last bit).

    Returns
    -------
    GaussSolution

    Raises
    ------
    IndeterminateMotionError
        ``rank([M; A]) < n``.
    InconsistentConstraintsError
        ``A a = b`` has no solution.
    ModelError
        Non-finite or non-symmetric data.
    SolverError
        The result failed its verification.

    Examples
    --------
    >>> import numpy as np
    >>> sol = solve_gauss(np.diag([1.0, 1e-9, 0.0]), np.ones(3),
    ...                   np.array([[0.0, 0, 1], [0, 0, 1]]), np.zeros(2))
    >>> sol.a, sol.rank
    (array([1.e+00, 1.e+09, 0.e+00]), 1)
    """
    m, n = A.shape
    w = workspace(n, m, mass_tree)
    M, F, A, b = _arrays(M, F, A, b)
    (status, fa, r, mL, k, rho, allow, be, dmin,
     flags) = K.gauss_step(M, F, A, b, _ref(ref, m), sig_ref, rank_tol, method,
                           want_multipliers, check_symmetry, w)
    live = WS.view(w, "live", m).astype(bool)
    if status != K.OK:
        raise_for_status(status, M=M, F=F, A=A, b=b, live=live, rank=r, rho=rho, allow=allow,
                         be=be, tol=K.direct_tolerance(n, int(live.sum())),
                         coords=coords)
    sol = GaussSolution(a=WS.field(w, fa)[:n].copy(), lam=WS.view(w, "lam", m).copy() if want_multipliers else np.zeros(m),
                        rank=int(r), sigma=WS.view(w, "s", k).copy(), dropped=np.flatnonzero(~live),
                        inconsistency=float(rho), allowance=float(allow),
                        backward_error=float(be), fallback=bool(flags & 1),
                        kept_vanished=bool(flags & 2))
    sol._root = float(np.sqrt(rank_tol))
    return sol


_LOCAL = threading.local()


def workspace(n: int, m: int, mass_tree: Optional[np.ndarray] = None) -> "WS.Work":
    """This thread's kernel workspace for ``n`` coordinates and ``m`` rows (reused), with
    the sparsity ``mass_tree`` of ``M`` (:func:`gaussopt.gauss.workspace.set_mass_tree`)."""
    cache = getattr(_LOCAL, "work", None)
    if cache is None:
        cache = _LOCAL.work = {}
    key = (n, m) if mass_tree is None else (n, m, np.asarray(mass_tree).tobytes())
    w = cache.get(key)
    if w is None:
        w = cache[key] = K.make_work(n, m, mass_tree)
    return w


def _arrays(*xs):
    """Writable float arrays (a read-only array, e.g. a constant mass matrix, would make
    numba compile the kernel a second time)."""
    out = []
    for x in xs:
        x = np.asarray(x, dtype=float)
        out.append(x if x.flags.writeable and x.flags.c_contiguous else np.array(x))
    return out


@dataclass
class Decision:
    """The shared rank decision of one step (:func:`gaussopt.gauss.dense_step.decide`), for
    solvers that solve the reduced problem themselves (QP, GA). It owns the kernel
    workspace it was made in (``work``): :meth:`closed_form`, :meth:`verify`,
    :meth:`check` and :meth:`multipliers` continue from it."""

    w: float
    nu: np.ndarray
    live: np.ndarray
    An: np.ndarray
    bn: np.ndarray
    s: np.ndarray
    r: int
    mL: int
    k: int
    Ur: np.ndarray
    Vr: np.ndarray
    N: np.ndarray
    beta: np.ndarray
    c_norm: float
    dmin: float
    kept_vanished: bool
    determinate: bool
    work: "WS.Work"

    def closed_form(self, M: np.ndarray, F: np.ndarray) -> np.ndarray:
        """The closed-form solution with this decision (the robust path)."""
        M, F = _arrays(M, F)
        K.closed_form(M, F, self.w, self.mL, self.r, self.work)
        return WS.view(self.work, "a", M.shape[0]).copy()

    def verify(self, M, F, a) -> float:
        """The backward error of ``a`` (:func:`gaussopt.gauss.dense_step.verify`)."""
        M, F, a = _arrays(M, F, a)
        return float(max(K.verify(M, F, a, self.mL, self.r, self.k, self.work)))

    def check(self, M, F, A, b, ref, rank_tol, a):
        """:func:`gaussopt.gauss.dense_step.check`: ``(status, rho, allow, be)``."""
        M, F, A, b, a = _arrays(M, F, A, b, a)
        return K.check(M, F, A, b, _ref(ref, A.shape[0]), rank_tol, self.mL, self.r, self.k,
                       self.c_norm, a, self.work)

    def multipliers(self, M, F, a, A) -> np.ndarray:
        """Minimum-norm multipliers (:func:`gaussopt.gauss.dense_step.multipliers`)."""
        M, F, a, A = _arrays(M, F, a, A)
        K.multipliers(M, F, a, A, self.mL, self.r, self.k, self.work)
        return WS.view(self.work, "lam", A.shape[0]).copy()

    def null_space(self) -> tuple[np.ndarray, np.ndarray]:
        """``a_p = V_r beta`` (minimum norm particular solution) and an orthonormal
        basis ``N`` (n, n - r) of the null space of the kept rows."""
        return self.Vr @ self.beta, self.N


def decide(M: np.ndarray, A: np.ndarray, b: np.ndarray, *, rank_tol: float = DEFAULT_RANK_TOL,
           ref: Optional[np.ndarray] = None, sig_ref: float = 0.0) -> Decision:
    """The rank decision of one step (module docstring), without solving."""
    m, n = A.shape
    w = K.make_work(n, m)
    M, A, b = _arrays(M, A, b)
    status, wgt, mL, r, k, c_norm, dmin, flags = K.decide(M, A, b, _ref(ref, m), sig_ref,
                                                          rank_tol, w)
    V = WS.view(w, "V", n, n)
    U = WS.view(w, "U", mL, k)
    return Decision(w=wgt, nu=WS.view(w, "nu", m).copy(), live=WS.view(w, "live", m).astype(bool),
                    An=WS.view(w, "An", mL, n).copy(), bn=WS.view(w, "bn", mL).copy(),
                    s=WS.view(w, "s", k).copy(), r=int(r), mL=int(mL), k=int(k),
                    Ur=U[:, :r].copy(), Vr=V[:, :r].copy(), N=V[:, r:].copy(),
                    beta=WS.view(w, "beta", r).copy(),
                    c_norm=float(c_norm), dmin=float(dmin), kept_vanished=bool(flags & 2),
                    determinate=status == K.OK, work=w)


def min_norm_multipliers(A: np.ndarray, Qc: np.ndarray,
                         rank_tol: float = DEFAULT_RANK_TOL) -> np.ndarray:
    """Minimum-norm ``lam`` with ``A^T lam = Qc`` under the shared rank decision
    (redundant directions share the force; zero rows get 0)."""
    m, n = A.shape
    if m == 0:
        return np.zeros(0)
    A, Qc = _arrays(A, Qc)
    w = K.make_work(n, m)
    mL, r, k, c_norm = K.reduce_rows(A, np.zeros(m), _ref(None, m), 0.0, rank_tol, True, w)
    K.multipliers(np.zeros((n, n)), -Qc, np.zeros(n), A, mL, r, k, w)
    return WS.view(w, "lam", m).copy()


def null_space_split(A: np.ndarray, b: np.ndarray, rank_tol: float = DEFAULT_RANK_TOL
                     ) -> tuple[np.ndarray, np.ndarray, int]:
    """Minimum-norm particular solution and orthonormal null-space basis of ``A``
    under the shared rank decision (rows normalized; directions with singular
    value ``<= rank_tol`` redundant).

    Returns
    -------
    a_p : ndarray, shape (n,)
        Minimum-norm solution of the kept rows.
    N : ndarray, shape (n, n - r)
        Orthonormal basis of their null space.
    r : int
        Numerical rank.
    """
    m, n = A.shape
    if m == 0:
        return np.zeros(n), np.eye(n), 0
    A, b = _arrays(A, b)
    w = K.make_work(n, m)
    mL, r, k, c_norm = K.reduce_rows(A, b, _ref(None, m), 0.0, rank_tol, True, w)
    LA.svd_complete(w, WS.F_V, mL, n)       # (the null-space columns of V)
    V = WS.view(w, "V", n, n)
    return V[:, :r] @ WS.view(w, "beta", r), V[:, r:].copy(), int(r)
