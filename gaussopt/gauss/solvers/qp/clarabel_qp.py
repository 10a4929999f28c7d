"""Clarabel called directly, built once, updated in place: the Gauss-step QP.

Every time step of a Gauss-principle simulation solves the convex QP

.. math::

    \\min_a \\; \\tfrac12 a^T P a + q^T a
    \\quad \\text{s.t.} \\quad A_{eq} a = b_{eq}, \\quad G a \\ge h,

with ``P = M`` symmetric positive semi-definite (positive definite on
``null(A_eq)``) and ``q = -F``.  :class:`ClarabelQP` hands it to Clarabel's
``DefaultSolver`` directly (no cvxpy): the solver, with its symbolic KKT
factorization, is built once for a sparsity pattern and every later
:meth:`ClarabelQP.solve` only overwrites the numbers in place
(``solver.update(P=..., q=..., A=..., b=...)``).

Clarabel form
-------------
Clarabel solves ``min 0.5 x'Px + q'x  s.t.  A x + s = b, s in K`` and returns
``(x, z, s)`` with ``P x + q + A' z = 0``.  The QP above is passed as

* ``A = [A_eq; -G]``, ``b = [b_eq; -h]``, ``K = ZeroConeT(m) x NonnegativeConeT(p)``
  (``-G a + s = -h, s >= 0``  <=>  ``G a >= h``);
* ``P`` as its upper triangle in ``scipy.sparse`` CSC format (the strictly
  lower triangle of the caller's ``P`` is ignored; pass a symmetric ``P``
  or its upper triangle).

Hence ``P a = F - A_eq' z_eq + G' z_in``: the multipliers returned here are
``y = -z_eq`` and ``z = z_in >= 0``, so that

.. math::

    P a = F + A_{eq}^T y + G^T z, \\qquad z \\ge 0, \\quad z^T (G a - h) = 0

(``A_eq' y`` and ``G' z`` are the constraint forces, the same convention as
:class:`gaussopt.gauss.solvers.qp.cvxpy_qp.QPKernel`).

In-place updates
----------------
Clarabel accepts data updates only if the problem structure was not altered
when the solver was built (``solver.is_data_update_allowed()``).  Three
settings guarantee that and are forced here: ``presolve_enable = False``
(presolve drops rows with infinite bounds), ``chordal_decomposition_enable =
False`` (relevant for PSD cones only) and ``input_sparse_dropzeros = False``
(otherwise explicit zeros leave the pattern).  Updates must keep the
sparsity pattern, so:

* sparse inputs keep their explicit zeros; an input whose pattern is a
  subset of the built pattern is scattered into it (missing entries = 0) and
  still updated in place;
* dense inputs of a small problem (``n <= dense_full_max``) are taken with
  their full pattern (upper triangle of ``P``, every entry of the rows), so
  that an entry that happens to be 0 does not change the pattern; larger
  dense inputs contribute their nonzero pattern;
* an entry outside the built pattern triggers a rebuild on the union of the
  old and new patterns (``ClarabelQP.rebuilds`` counts them), so a pattern
  that alternates between two shapes rebuilds at most once
  (:meth:`ClarabelQP.reset` starts over from the next data).

Clarabel does not re-run its Ruiz equilibration on updates: it re-applies the
scaling computed from the data it was *built* with.  To make a solve
independent of its history (an in-place update gives the same numbers as a
fresh build), Clarabel's equilibration is disabled and the data are scaled
here, per solve, from the current numbers (see ``scaling``).

Scaling (``scaling="jacobi"``, default)
---------------------------------------
Per solve, from the current numbers (a compiled kernel, O(nnz)):

* columns: ``D = diag(d)``, ``d_j = 1/sqrt(P_jj)`` (a ``P_jj`` below
  ``1e-12 max P_ii``, e.g. a massless coordinate, gets the geometric mean of
  the other ``d_j``), so ``D P D`` has a unit diagonal;
* cost: ``P`` and ``q`` are multiplied by ``s = 1/max(mean diag(D P D),
  |D q|_inf)`` clipped to ``[1e-4, 1e4]`` (the cost scaling of Clarabel's own
  equilibration; without it the interior-point iterations can cycle when
  ``|q|`` is large);
* rows: each row of ``[A_eq; G] D`` (and its right-hand side) is divided by
  its Euclidean norm; rows whose norm is below ``64 eps`` times the largest
  are left alone (a zero row ``0 = b_i`` stays, so its infeasibility is
  still detected).

The minimiser is ``a = D a~``; the multipliers are mapped back to the
caller's units (``y_i = -z~_i / (s |row_i D|)``).  ``scaling="rows"`` uses
``D = I`` and ``P, q`` times ``n / trace(P)`` instead of the column scaling
(what :class:`QPKernel` does; the cost and row scalings follow), ``"none"``
passes the data unchanged.

Fallback
--------
If Clarabel ends without a solution or certificate (``max_iterations``,
``insufficient_progress``, ``numerical_error``, ``almost_*``), the same
solver is updated in place and re-run with the other scaling, then with
``max_step_fraction = 0.9`` and a 10x larger static regularization
(interior-point iterations on problems with a singular ``P`` occasionally
cycle with the default step fraction 0.99; a too small regularization can
break the factorization).  The first
``optimal`` result is returned (else the first ``almost_optimal``, else the
first attempt); ``QPSolution.attempts`` tells how many runs it took.
``fallback=False`` disables this.

Settings (:data:`DEFAULT_SETTINGS`)
-----------------------------------
* ``tol_feas = tol_gap_abs = tol_gap_rel = 1e-13``, ``tol_ktratio = 1e-11``
  (Clarabel: 1e-8 / 1e-6).  The residuals are relative to O(1) scaled data,
  so 1e-13 is ~450 eps: reachable without stalling, and the iterate it
  accepts is within ``cond * 1e-13`` of the exact solution.  1e-14 is still
  mostly reached on small problems but turns a few ill-conditioned ones into
  ``almost_optimal``.  ``tol_infeas_* = 1e-12``; the "almost" levels
  ``reduced_tol_* = 1e-9`` (``reduced_tol_ktratio = 1e-7``).
* ``iterative_refinement_reltol = abstol = 1e-16``, ``max_iter = 20``,
  ``stop_ratio = 2`` (Clarabel: 1e-13, 1e-12, 10, 5): every KKT solve is
  refined until it stops improving, i.e. to machine precision.  This is what
  makes equality-only problems (which Clarabel's initial KKT solve already
  finishes: 0 iterations) accurate to ``~cond(K) eps`` rather than to the
  regularization level.
* ``static_regularization_constant = 1e-8`` (Clarabel's default).  On
  unscaled data it sometimes breaks the factorization of equality-only
  problems with a singular ``P`` (status ``numerical_error`` on 10-17 % of
  random singular-``P`` cases, n = 3..30); after the scaling above no
  failure was seen in 8000 random problems.  The refinement converges only
  if this constant is below the smallest singular value of the scaled KKT
  matrix, so 1e-7 would cost accuracy on ill-conditioned problems
  (cond ~1e7).
* ``equilibrate_enable = False``: the scaling is done here, per solve.
* ``max_iter = 100`` (well-conditioned QPs take 5-20 iterations, equality
  only 0); ``max_threads = 1``.

Threads
-------
One :class:`threading.Lock` serializes mapping, update and solve of a
``ClarabelQP`` (without it, concurrent calls on one Clarabel solver fail
with ``RuntimeError: Already mutably borrowed`` or mix data); input checks
run outside the lock.  Clarabel releases the GIL while it iterates, so
different ``ClarabelQP`` objects solve in parallel.
"""

from __future__ import annotations

import math
import threading
import time
from time import perf_counter as _perf_counter
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

import clarabel

from gaussopt.core.compiled import jit
from gaussopt.core.settings import CLARABEL

__all__ = ["ClarabelQP", "QPSolution", "DEFAULT_SETTINGS", "STATUS_NAMES"]

_EPS = float(np.finfo(float).eps)
_TINY = float(np.finfo(float).tiny)

#: Rows whose norm is below this fraction of the largest row norm are not scaled.
_ZERO_ROW_RTOL = 64.0 * _EPS
#: Diagonal entries of P below this fraction of the largest count as zero (jacobi).
_ZERO_DIAG_RTOL = 1e-12
#: Bounds of the cost scaling factor (Clarabel's equilibrate_min/max_scaling).
_COST_SCALE_MIN, _COST_SCALE_MAX = 1e-4, 1e4

#: Clarabel settings used unless overridden (see the notes of ClarabelQP): the one table of
#: solver settings' (:data:`gaussopt.core.settings.CLARABEL`)
DEFAULT_SETTINGS = CLARABEL

#: Settings ClarabelQP always imposes (in-place updates need them).
_FORCED_SETTINGS = {
    "presolve_enable": False,
    "chordal_decomposition_enable": False,
    "input_sparse_dropzeros": False,
}

#: Clarabel SolverStatus name -> status string of QPSolution.
STATUS_NAMES: dict[str, str] = {
    "Solved": "optimal",
    "AlmostSolved": "almost_optimal",
    "PrimalInfeasible": "primal_infeasible",
    "AlmostPrimalInfeasible": "almost_primal_infeasible",
    "DualInfeasible": "dual_infeasible",
    "AlmostDualInfeasible": "almost_dual_infeasible",
    "MaxIterations": "max_iterations",
    "MaxTime": "max_time",
    "NumericalError": "numerical_error",
    "InsufficientProgress": "insufficient_progress",
    "CallbackTerminated": "callback_terminated",
    "Unsolved": "unsolved",
}

_SCALINGS = ("jacobi", "rows", "none")

#: Clarabel ``SolverStatus`` -> its name (``str(status)``), filled as statuses are seen
_RAW_NAMES: dict = {}
#: Clarabel's ``Solved`` (the common outcome: an ``==`` test is cheaper than the lookup)
_SOLVED = clarabel.SolverStatus.Solved


class _Values(list):
    """Values of ``P`` or ``A`` on the built pattern, for ``solver.update``: a list that
    Clarabel takes as a value vector, as it takes a plain list.

    Clarabel's ``update`` first tries to read a matrix argument as a scipy CSC matrix
    (``getattr(arg, "data")``); on a plain list that lookup fails with an
    ``AttributeError`` that costs about 0.35 us per matrix. The class attribute
    ``data = None`` fails the matrix reading without raising in Python, and the
    values then go the same way as a plain list's (the same numbers in the solver).
    """

    __slots__ = ()
    data = None


#: Clarabel outcomes that are not retried by the fallback (a solution or a
#: certificate was found, or a user limit was hit).
_FINAL_RAW = frozenset({"Solved", "PrimalInfeasible", "DualInfeasible", "MaxTime",
                        "CallbackTerminated"})


@dataclass
class QPSolution:
    """Result of one :meth:`ClarabelQP.solve`.

    Attributes
    ----------
    x : ndarray, shape (n,)
        Minimiser.
    y : ndarray, shape (m,)
        Equality multipliers, ``P x = F + A_eq^T y + G^T z`` with ``F = -q``.
    z : ndarray, shape (p,)
        Inequality multipliers (``>= 0`` up to the solver tolerance).
    status : str
        One of :data:`STATUS_NAMES` values: ``"optimal"``,
        ``"almost_optimal"``, ``"primal_infeasible"``, ``"dual_infeasible"``,
        ``"max_iterations"``, ``"numerical_error"``, ...  Only ``"optimal"``
        (and, at the caller's discretion, ``"almost_optimal"``) carry a usable
        solution; for infeasible statuses ``x``/``y``/``z`` hold Clarabel's
        certificate iterates.
    iterations : int
        Interior-point iterations (0 is common for equality-only problems:
        the initial KKT solve is already optimal).
    solve_time : float
        Wall time in seconds of mapping + update (or build) + solve.
    residuals : dict
        Clarabel's own measures, for the *scaled* problem it was given:
        ``primal``, ``dual`` (relative residuals), ``gap`` (absolute duality
        gap), ``gap_rel`` and ``ktratio``.
    raw_status : str
        Clarabel's ``SolverStatus`` name.
    rebuilt : bool
        True if this call (re)built the Clarabel solver.
    attempts : int
        Clarabel runs this call took (> 1 if the fallback was used).
    """

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    status: str
    iterations: int
    solve_time: float
    residuals: dict = field(default_factory=dict)
    raw_status: str = ""
    rebuilt: bool = False
    attempts: int = 1

    @property
    def ok(self) -> bool:
        """True for status ``"optimal"``."""
        return self.status == "optimal"


# ----------------------------------------------------------------------
# input conversion (no shared state: runs outside the lock)
# ----------------------------------------------------------------------
def _check_int(name: str, val, low: int) -> int:
    if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
        raise ValueError(f"ClarabelQP: {name} must be an int, got {val!r}")
    if val < low:
        raise ValueError(f"ClarabelQP: {name} must be >= {low}, got {val}")
    return int(val)


def _vector(name: str, v, size: int) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"ClarabelQP.solve: {name} is not a real numeric vector") from e
    if a.ndim == 2 and 1 in a.shape and a.size == size:
        a = a.reshape(size)
    if a.shape != (size,):
        raise ValueError(f"ClarabelQP.solve: {name} has shape {a.shape}, expected ({size},)")
    if not np.isfinite(a).all():
        raise ValueError(f"ClarabelQP.solve: {name} contains NaN or inf")
    return a


def _matrix(name: str, X, shape: tuple[int, int], fmt: str):
    """Return ("sparse", canonical csc/csr matrix) or ("dense", C-contiguous array)."""
    if sp.issparse(X):
        if X.shape != shape:
            raise ValueError(f"ClarabelQP.solve: {name} has shape {X.shape}, expected {shape}")
        Y = X.tocsc() if fmt == "csc" else X.tocsr()
        if Y.dtype != np.float64:
            try:
                Y = Y.astype(np.float64)
            except (TypeError, ValueError) as e:
                raise ValueError(f"ClarabelQP.solve: {name} is not a real numeric matrix") from e
        if not Y.has_canonical_format:
            Y = Y.copy() if Y is X else Y
            Y.sum_duplicates()  # also sorts the indices
        if not np.isfinite(Y.data).all():
            raise ValueError(f"ClarabelQP.solve: {name} contains NaN or inf")
        return "sparse", Y
    try:
        A = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"ClarabelQP.solve: {name} is not a real numeric matrix") from e
    if A.shape != shape:
        raise ValueError(f"ClarabelQP.solve: {name} has shape {A.shape}, expected {shape}")
    if not np.isfinite(A).all():
        raise ValueError(f"ClarabelQP.solve: {name} contains NaN or inf")
    return "dense", np.ascontiguousarray(A)


# ----------------------------------------------------------------------
# patterns
# ----------------------------------------------------------------------
class _Pattern:
    """A CSC pattern (rows x cols) with sorted linear keys ``col*rows + row``."""

    __slots__ = ("nrows", "ncols", "indptr", "indices", "rows", "cols", "keys")

    def __init__(self, nrows: int, ncols: int, keys: np.ndarray):
        keys = np.unique(np.asarray(keys, dtype=np.int64))
        self.nrows, self.ncols = nrows, ncols
        self.keys = keys
        if nrows:
            self.cols = keys // nrows
            self.rows = keys - self.cols * nrows
        else:
            self.cols = self.rows = np.zeros(0, dtype=np.int64)
        counts = np.bincount(self.cols, minlength=ncols) if ncols else np.zeros(0, np.int64)
        self.indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.indices = self.rows.astype(np.int64)

    @property
    def nnz(self) -> int:
        return int(self.keys.size)

    def csc(self, values: np.ndarray):
        return sp.csc_matrix(
            (values, self.indices, self.indptr), shape=(self.nrows, self.ncols)
        )

    def locate(self, keys: np.ndarray):
        """Positions of ``keys`` in the pattern, or None if one is missing."""
        if keys.size == 0:
            return np.zeros(0, dtype=np.int64)
        if self.keys.size == 0:
            return None
        pos = np.searchsorted(self.keys, keys)
        np.minimum(pos, self.keys.size - 1, out=pos)
        if not np.array_equal(self.keys[pos], keys):
            return None
        return pos

    def union(self, keys: np.ndarray) -> "_Pattern":
        return _Pattern(self.nrows, self.ncols, np.concatenate((self.keys, keys)))


def _upper_keys_dense(n: int) -> np.ndarray:
    j, i = np.meshgrid(np.arange(n), np.arange(n))  # i = row, j = col
    mask = i <= j
    return (j[mask].astype(np.int64) * n + i[mask]).ravel()


def _csc_upper(Pc) -> tuple[np.ndarray, np.ndarray]:
    """Keys ``col*n+row`` and data positions of the upper-triangle entries of a CSC matrix."""
    n = Pc.shape[0]
    cols = np.repeat(np.arange(n, dtype=np.int64), np.diff(Pc.indptr))
    rows = Pc.indices.astype(np.int64)
    sel = np.flatnonzero(rows <= cols)
    return cols[sel] * n + rows[sel], sel


def _csr_keys(Rc, row_offset: int, nrows_total: int) -> np.ndarray:
    """Keys ``col*nrows_total + row`` of a CSR block placed at ``row_offset``."""
    r = Rc.shape[0]
    rows = np.repeat(np.arange(row_offset, row_offset + r, dtype=np.int64), np.diff(Rc.indptr))
    return Rc.indices.astype(np.int64) * nrows_total + rows


def _pattern_from_spec(spec, shape: tuple[int, int], upper: bool, name: str) -> np.ndarray:
    """Keys of a user-given pattern (sparse: structure incl. explicit zeros; dense: nonzeros)."""
    if sp.issparse(spec):
        if spec.shape != shape:
            raise ValueError(f"ClarabelQP: {name} has shape {spec.shape}, expected {shape}")
        C = spec.tocoo()
        rows, cols = C.row.astype(np.int64), C.col.astype(np.int64)
    else:
        S = np.asarray(spec)
        if S.shape != shape:
            raise ValueError(f"ClarabelQP: {name} has shape {S.shape}, expected {shape}")
        rows, cols = (a.astype(np.int64) for a in np.nonzero(S))
    if upper:
        keep = rows <= cols
        rows, cols = rows[keep], cols[keep]
    return cols * shape[0] + rows



_SCALING_CODES = {"jacobi": 0, "rows": 1, "none": 2}


@jit(cache=True, nogil=True, python=True)
def _scale_kernel(Pv, q, Av, bv, Prow, Pcol, Arow, Acol, mode, cost,
                  Po, qo, Ao, bo, d, rinv):  # pragma: no cover - compiled
    """Scale P (upper CSC values), q, A (CSC values), b; return the cost factor s.

    mode 0 ("jacobi"): d_j = 1/sqrt(P_jj) (P_jj <= 1e-12 max P_ii: geometric
    mean of the other d_j); mode 1 ("rows"): d = 1, P scaled to mean diagonal 1.
    Then s = 1/max(mean diag(P~), |q~|_inf) clipped to [1e-4, 1e4] (if cost),
    and every row of A~ = A D is divided by its norm (rows of norm <= 64 eps
    times the largest are left alone).  P~ = s D P D, q~ = s D q,
    A~ = R^-1 A D, b~ = R^-1 b with R = diag(1/rinv).
    """
    n = q.size
    mp = bv.size
    diag = np.zeros(n)
    for k in range(Pv.size):
        if Prow[k] == Pcol[k]:
            diag[Prow[k]] = Pv[k]
    dmax = 0.0
    for j in range(n):
        if diag[j] > dmax:
            dmax = diag[j]
    s = 1.0
    mean_diag = 0.0
    if mode == 0 and dmax > _TINY:
        thr = _ZERO_DIAG_RTOL * dmax
        logsum = 0.0
        cnt = 0
        for j in range(n):
            if diag[j] > thr:
                d[j] = 1.0 / math.sqrt(diag[j])
                logsum += math.log(d[j])
                cnt += 1
        dfill = math.exp(logsum / cnt)
        for j in range(n):
            if diag[j] <= thr:
                d[j] = dfill
            mean_diag += diag[j] * d[j] * d[j]
        mean_diag /= n
    else:
        tr = 0.0
        for j in range(n):
            d[j] = 1.0
            tr += diag[j]
        if tr > _TINY * n:
            s = n / tr
        mean_diag = s * tr / n
    qmax = 0.0
    for j in range(n):
        v = abs(q[j] * d[j])
        if v > qmax:
            qmax = v
    qmax *= s
    den = max(mean_diag, qmax)
    if cost and den > _TINY:
        s *= min(max(1.0 / den, _COST_SCALE_MIN), _COST_SCALE_MAX)
    for k in range(Pv.size):
        Po[k] = Pv[k] * d[Prow[k]] * d[Pcol[k]] * s
    for j in range(n):
        qo[j] = q[j] * d[j] * s
    for i in range(mp):
        rinv[i] = 0.0
    for k in range(Av.size):
        v = Av[k] * d[Acol[k]]
        Ao[k] = v
        rinv[Arow[k]] += v * v
    nmax = 0.0
    for i in range(mp):
        rinv[i] = math.sqrt(rinv[i])
        if rinv[i] > nmax:
            nmax = rinv[i]
    thr = max(_ZERO_ROW_RTOL * nmax, _TINY)
    for i in range(mp):
        rinv[i] = 1.0 / rinv[i] if rinv[i] > thr else 1.0
        bo[i] = bv[i] * rinv[i]
    for k in range(Av.size):
        Ao[k] *= rinv[Arow[k]]
    return s

def _raw_name(status) -> str:
    """``str(status)`` of a Clarabel ``SolverStatus`` (cached: :data:`_RAW_NAMES`)."""
    raw = _RAW_NAMES.get(status)
    if raw is None:
        raw = _RAW_NAMES[status] = str(status)
    return raw


# ----------------------------------------------------------------------
class ClarabelQP:
    """Clarabel solver built once for fixed sizes and sparsity, updated in place per solve.

    Parameters
    ----------
    n : int
        Number of unknowns, ``n >= 1``.
    m : int
        Number of equality rows ``A_eq a = b_eq`` (may be 0).
    p : int, optional
        Number of inequality rows ``G a >= h`` (default 0).
    P_pattern : array_like or sparse matrix, optional
        Sparsity pattern of ``P`` (its upper triangle is used; for a sparse
        matrix every stored entry counts, explicit zeros included; for a dense
        array the nonzero entries).  Together with ``A_pattern`` (when
        ``m + p > 0``) it makes the constructor build the Clarabel solver
        right away (with zero data); otherwise the first :meth:`solve` builds
        it from its data.
    A_pattern : array_like, sparse matrix or tuple, optional
        Pattern of the stacked rows ``[A_eq; G]`` (shape ``(m + p, n)``), or a
        tuple ``(A_eq_pattern, G_pattern)``.
    settings : dict or clarabel.DefaultSettings, optional
        Clarabel settings overriding :data:`DEFAULT_SETTINGS` (a dict of
        attribute names, or a complete ``DefaultSettings``).  ``presolve_enable``,
        ``chordal_decomposition_enable`` and ``input_sparse_dropzeros`` are
        always set to False (in-place updates require it).
    scaling : {"jacobi", "rows", "none"}, optional
        Per-solve scaling of the data (module docstring); default "jacobi".
    dense_full_max : int, optional
        Dense inputs with ``n <= dense_full_max`` (default 64) are taken with
        their full pattern, larger ones with their nonzero pattern.
    fallback : bool, optional
        Re-run a failed solve with the other scaling, then with shorter steps
        and more regularization (module docstring); default True.

    Attributes
    ----------
    n, m, p : int
    builds : int
        Number of Clarabel solvers constructed so far.
    rebuilds : int
        ``max(builds - 1, 0)``: constructions after the first one (pattern
        changes, or updates refused by ``is_data_update_allowed()``).
    updates : int
        Solves that updated the existing solver in place.
    solves : int
        Clarabel runs (a fallback adds runs).
    fallbacks : int
        Calls of :meth:`solve` that needed the fallback.
    settings : clarabel.DefaultSettings
        Effective settings.

    Raises
    ------
    ValueError
        Bad dimensions, patterns, settings or scaling name.
    """

    def __init__(self, n, m, p=0, *, P_pattern=None, A_pattern=None, settings=None,
                 scaling: str = "jacobi", dense_full_max: int = 64,
                 fallback: bool = True) -> None:
        self.n = _check_int("n", n, 1)
        self.m = _check_int("m", m, 0)
        self.p = _check_int("p", p, 0)
        if scaling not in _SCALINGS:
            raise ValueError(f"ClarabelQP: scaling must be one of {_SCALINGS}, got {scaling!r}")
        self.scaling = scaling
        self.cost_scaling = True
        self.fallback = bool(fallback)
        self.dense_full_max = _check_int("dense_full_max", dense_full_max, 0)
        self.settings = self._make_settings(settings)
        alt = self._make_settings(settings)
        alt.max_step_fraction = min(0.9, float(self.settings.max_step_fraction))
        alt.static_regularization_constant = 10.0 * float(self.settings.static_regularization_constant)
        other = "rows" if scaling == "jacobi" else "jacobi"
        # primary attempt, then (on failure) the other scaling, then shorter steps
        self._attempts = ((scaling, None), (other, None), (scaling, alt))
        self._cones = []
        if self.m:
            self._cones.append(clarabel.ZeroConeT(self.m))
        if self.p:
            self._cones.append(clarabel.NonnegativeConeT(self.p))

        self._lock = threading.Lock()
        self._solver = None
        self._update_ok = False
        # the values of P the solver holds from the last fast update (None: unknown); an
        # unchanged P (a constant mass matrix) is not sent again (~0.7 us of a step)
        self._P_last: np.ndarray | None = None
        self._Ppat: _Pattern | None = None
        self._Apat: _Pattern | None = None
        self._cache: dict = {}
        self.builds = 0
        self.updates = 0
        self.solves = 0
        self.fallbacks = 0

        mp = self.m + self.p
        if P_pattern is not None and (A_pattern is not None or mp == 0):
            self._Ppat = _Pattern(self.n, self.n,
                                  _pattern_from_spec(P_pattern, (self.n, self.n), True, "P_pattern"))
            self._Apat = _Pattern(mp, self.n, self._A_pattern_keys(A_pattern))
            self._build(np.zeros(self._Ppat.nnz), np.zeros(self.n),
                        np.zeros(self._Apat.nnz), np.zeros(mp))
        elif A_pattern is not None:
            raise ValueError("ClarabelQP: A_pattern needs P_pattern as well")
        elif P_pattern is not None:
            raise ValueError("ClarabelQP: P_pattern needs A_pattern as well (m + p > 0)")

    # ------------------------------------------------------------------
    @property
    def rebuilds(self) -> int:
        return max(self.builds - 1, 0)

    @property
    def built(self) -> bool:
        return self._solver is not None

    def reset(self) -> None:
        """Forget the solver and its patterns; the next :meth:`solve` builds afresh.

        Useful after a structural change, since rebuilds keep the union of all
        patterns seen (a pattern grown from unrelated shapes can factor with
        more fill than the current one needs).
        """
        with self._lock:
            self._solver = None
            self._update_ok = False
            self._P_last = None
            self._Ppat = self._Apat = None
            self._cache = {}

    def is_data_update_allowed(self) -> bool:
        """Clarabel's ``is_data_update_allowed()`` of the current solver (False if none)."""
        with self._lock:
            return self._solver is not None and bool(self._solver.is_data_update_allowed())

    def __repr__(self) -> str:
        return (f"ClarabelQP(n={self.n}, m={self.m}, p={self.p}, builds={self.builds}, "
                f"updates={self.updates}, scaling={self.scaling!r})")

    # ------------------------------------------------------------------
    @staticmethod
    def _make_settings(settings) -> "clarabel.DefaultSettings":
        if isinstance(settings, clarabel.DefaultSettings):
            s = settings
        else:
            s = clarabel.DefaultSettings()
            opts = dict(DEFAULT_SETTINGS)
            if settings is not None:
                if not isinstance(settings, dict):
                    raise ValueError("ClarabelQP: settings must be a dict or clarabel.DefaultSettings")
                opts.update(settings)
            for k, v in opts.items():
                if not hasattr(s, k):
                    raise ValueError(f"ClarabelQP: unknown Clarabel setting {k!r}")
                try:
                    setattr(s, k, v)
                except (TypeError, ValueError, AttributeError) as e:
                    raise ValueError(f"ClarabelQP: bad value for setting {k!r}: {v!r}") from e
        for k, v in _FORCED_SETTINGS.items():
            setattr(s, k, v)
        return s

    def _A_pattern_keys(self, A_pattern) -> np.ndarray:
        n, m, p = self.n, self.m, self.p
        mp = m + p
        if mp == 0:
            return np.zeros(0, dtype=np.int64)
        if isinstance(A_pattern, tuple):
            if len(A_pattern) != 2:
                raise ValueError("ClarabelQP: A_pattern tuple must be (A_eq_pattern, G_pattern)")
            keys = []
            for spec, off, r, name in ((A_pattern[0], 0, m, "A_eq pattern"),
                                       (A_pattern[1], m, p, "G pattern")):
                if r == 0:
                    continue
                k = _pattern_from_spec(spec, (r, n), False, name)
                c = k // r
                keys.append(c * mp + (k - c * r) + off)
            return np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        return _pattern_from_spec(A_pattern, (mp, n), False, "A_pattern")

    # ------------------------------------------------------------------
    def _build(self, Pv, qv, Av, bv) -> None:
        """Construct the Clarabel solver on the current patterns with the given (scaled) values."""
        Pm = self._Ppat.csc(Pv)
        Am = self._Apat.csc(Av)
        self._solver = clarabel.DefaultSolver(Pm, qv, Am, bv, self._cones, self.settings)
        self._update_ok = bool(self._solver.is_data_update_allowed())
        self._P_last = None
        self.builds += 1

    # ------------------------------------------------------------------
    # value mapping (inside the lock: uses the current patterns / cache)
    def _P_keys_of(self, kind, X):
        n = self.n
        if kind == "dense":
            if n <= self.dense_full_max:
                return _upper_keys_dense(n)
            r, c = np.nonzero(np.triu(X))
            return c.astype(np.int64) * n + r
        keys, _ = _csc_upper(X)
        return keys

    def _P_values(self, kind, X):
        """Values of P on the built pattern, or None if X has entries outside it."""
        pat = self._Ppat
        n = self.n
        if kind == "dense":
            flat = self._cache.get("P_dense")
            if flat is None:
                flat = pat.rows * n + pat.cols
                self._cache["P_dense"] = flat
            vals = X.ravel().take(flat)
            if pat.nnz != n * (n + 1) // 2:
                # everything outside the pattern must be zero
                if np.count_nonzero(np.triu(X)) != np.count_nonzero(vals):
                    return None
            return vals
        key = self._cache.get("P_sparse")
        if key is not None and np.array_equal(key[0], X.indptr) and np.array_equal(key[1], X.indices):
            sel, pos = key[2], key[3]
        else:
            keys, sel = _csc_upper(X)
            pos = pat.locate(keys)
            if pos is None:
                return None
            self._cache["P_sparse"] = (X.indptr.copy(), X.indices.copy(), sel, pos)
        vals = np.zeros(pat.nnz)
        vals[pos] = X.data[sel]
        return vals

    def _block_keys_of(self, kind, X, off):
        n, mp = self.n, self.m + self.p
        r = X.shape[0]
        if kind == "dense":
            if n <= self.dense_full_max:
                rr, cc = np.divmod(np.arange(r * n, dtype=np.int64), n)
            else:
                rr, cc = (a.astype(np.int64) for a in np.nonzero(X))
            return cc * mp + rr + off
        return _csr_keys(X, off, mp)

    def _A_values(self, blocks):
        """Values of [A_eq; -G] on the built pattern, or None if outside it."""
        pat = self._Apat
        n, mp = self.n, self.m + self.p
        vals = np.zeros(pat.nnz)
        for tag, kind, X, off, sign in blocks:
            r = X.shape[0]
            if r == 0:
                continue
            if kind == "dense":
                ck = "A_dense_" + tag
                ent = self._cache.get(ck)
                if ent is None:
                    inblk = (pat.rows >= off) & (pat.rows < off + r)
                    posb = np.flatnonzero(inblk)
                    flat = (pat.rows[posb] - off) * n + pat.cols[posb]
                    ent = (posb, flat, posb.size == r * n)
                    self._cache[ck] = ent
                posb, flat, full = ent
                v = X.ravel().take(flat)
                if not full and np.count_nonzero(X) != np.count_nonzero(v):
                    return None
            else:
                ck = "A_sparse_" + tag
                ent = self._cache.get(ck)
                if ent is not None and np.array_equal(ent[0], X.indptr) and np.array_equal(ent[1], X.indices):
                    posb = ent[2]
                else:
                    posb = pat.locate(_csr_keys(X, off, mp))
                    if posb is None:
                        return None
                    self._cache[ck] = (X.indptr.copy(), X.indices.copy(), posb)
                v = X.data
            if sign < 0:
                vals[posb] = -v
            else:
                vals[posb] = v
        return vals

    # ------------------------------------------------------------------
    def _scale(self, Pv, q, Av, bvec, mode, out=None):
        """Scaled copies of the data and the back-mapping ``(d, rinv, s)``.

        ``x = d * x~``, ``y_i = -z~_i * rinv_i / s``; ``d``/``rinv`` are None
        when they are all ones. ``out``: the six arrays ``(Po, qo, Ao, bo, d, rinv)`` to
        write them into (a caller that solves one problem size at every step; else new).
        """
        code = _SCALING_CODES[mode]
        if code == 2:
            return Pv, q, Av, bvec, None, None, 1.0
        n, mp = self.n, self.m + self.p
        Ppat, Apat = self._Ppat, self._Apat
        if out is None:
            out = (np.empty_like(Pv), np.empty_like(q), np.empty_like(Av),
                   np.empty_like(bvec), np.empty(n), np.empty(mp))
        Po, qo, Ao, bo, d, rinv = out
        s = _scale_kernel(Pv, q, Av, bvec, Ppat.rows, Ppat.cols, Apat.rows, Apat.cols,
                          code, self.cost_scaling, Po, qo, Ao, bo, d, rinv)
        return Po, qo, Ao, bo, (d if code == 0 else None), (rinv if mp else None), s

    # ------------------------------------------------------------------
    def _run(self, Pv, qv, Av, bv, rebuild, first=None, want_info=True, primary=None):
        """Clarabel on values of the built patterns (inside the lock): the primary
        attempt, then (on failure) the fallback attempts (module docstring).

        ``rebuild``: build the solver from the primary attempt's data instead of
        updating it; ``first``: the primary attempt's scaled data if the caller has
        them (:meth:`solve_values`); ``primary``: ``(sol, raw)`` of the primary
        attempt if the caller has run it already on ``first`` (then the loop starts
        at the fallback attempts). Returns ``(sol, info, d, rinv, s, raw, attempts)``
        of the attempt chosen (``info`` None unless ``want_info``).
        """
        tries = self._attempts if self.fallback else self._attempts[:1]
        chosen = None
        for k, (mode, alt) in enumerate(tries):
            if k == 0 and first is not None:
                Ps, qs, As, bs, d, rinv, s = first
            else:
                Ps, qs, As, bs, d, rinv, s = self._scale(Pv, qv, Av, bv, mode)
            if k == 0 and primary is not None:
                sol, raw = primary
                res = (sol, self._solver.get_info() if want_info else None, d, rinv, s, raw)
                if raw in _FINAL_RAW:
                    chosen = res
                    break
                chosen = res
                continue
            if k == 0 and rebuild:
                self._build(Ps, qs, As, bs)
            else:
                self._solver.update(P=_Values(Ps.tolist()), q=qs.tolist(),
                                    A=_Values(As.tolist()), b=bs.tolist())
                self._P_last = None
                if k == 0:
                    self.updates += 1
            if alt is not None:
                self._solver.update(settings=alt)
                try:
                    sol = self._solver.solve()
                finally:
                    self._solver.update(settings=self.settings)
            else:
                sol = self._solver.solve()
            self.solves += 1
            raw = _raw_name(sol.status)
            res = (sol, self._solver.get_info() if want_info else None, d, rinv, s, raw)
            if raw in _FINAL_RAW:
                chosen = res
                break
            if chosen is None or (chosen[5] != "AlmostSolved" and raw == "AlmostSolved"):
                chosen = res
        if k > 0:
            self.fallbacks += 1
        return (*chosen, k + 1)

    def solve_values(self, Pv, qv, Av, bv, first, out=None):
        """Solve for data given as values on the built patterns: the fast entry of
        :class:`~gaussopt.gauss.solvers.QP` (no input checks, no pattern mapping).

        Parameters
        ----------
        Pv, qv, Av, bv : ndarray
            Values of ``P`` (upper triangle), ``q``, ``[A_eq; -G]`` and ``[b_eq; -h]``
            in the CSC order of the patterns the solver was built with
            (``P_pattern``, ``A_pattern``), unscaled (the fallback attempts scale
            them), finite.
        first : tuple
            ``(Ps, qs, As, bs, d, rinv, s)``: the same data scaled with the primary
            scaling, as :meth:`_scale` gives them (``d``, ``rinv`` may be arrays of
            ones where it gives None), computed by the caller (in its compiled
            kernel, :func:`gaussopt.gauss.solvers.qp.compiled_qp.prepare`).
        out : tuple of ndarray, optional
            ``(xs, zs)``, shapes ``(n,)`` and ``(m + p,)``: write the solution there
            (else into new arrays); ``zs`` None: the dual solution is not wanted (and
            None is returned for it).

        Returns
        -------
        xs, zs : ndarray
            Clarabel's primal and dual solution of the scaled problem (the arrays of
            ``out`` if given).
        d, rinv, s
            The scaling of the attempt returned (``x = d xs``, ``z_i = zs_i rinv_i / s``;
            ``d``, ``rinv`` None for ones); the arrays of ``first`` when the primary
            attempt is returned.
        raw_status : str
            Clarabel's ``SolverStatus`` name (:data:`STATUS_NAMES` maps it).
        iterations, attempts : int
        solve_time : float
            Wall time of update and solve(s), seconds.
        """
        with self._lock:
            return self._solve_values(Pv, qv, Av, bv, first[:6], first[6], out)

    def _solve_values(self, Pv, qv, Av, bv, first, s, out):
        """:meth:`solve_values` with ``first`` less its ``s`` (given apart), for a caller
        that serializes every use of this object under its own lock
        (:class:`~gaussopt.gauss.solvers.QP`); the lock of this object is not taken."""
        solver = self._solver
        if solver is None:
            raise ValueError("ClarabelQP.solve_values: the solver is not built (give "
                             "P_pattern and A_pattern to the constructor)")
        t0 = _perf_counter()
        if self._update_ok:
            # the primary attempt (what :meth:`_run` does first), inline; the fallback
            # attempts, if it needs them, in :meth:`_run`
            # (P is passed only where its values changed: a constant mass matrix's are the
            # same every step; compared as arrays, a list of n values costs 30 us at n = 2000)
            P_now, last = first[0], self._P_last
            if last is not None and last.shape == P_now.shape and np.array_equal(P_now, last):
                solver.update(q=first[1].tolist(), A=_Values(first[2].tolist()),
                              b=first[3].tolist())
            else:
                solver.update(P=_Values(P_now.tolist()), q=first[1].tolist(),
                              A=_Values(first[2].tolist()), b=first[3].tolist())
                self._P_last = P_now.copy()
            self.updates += 1
            sol = solver.solve()
            self.solves += 1
            raw = "Solved" if sol.status == _SOLVED else _raw_name(sol.status)
            if raw in _FINAL_RAW or not self.fallback:
                d, rinv, attempts = first[4], first[5], 1
            else:
                sol, _, d, rinv, s, raw, attempts = self._run(
                    Pv, qv, Av, bv, False, (*first, s), False, (sol, raw))
        else:
            sol, _, d, rinv, s, raw, attempts = self._run(Pv, qv, Av, bv, True, (*first, s),
                                                          False)
        if out is None:
            xs = np.array(sol.x, dtype=float)
            zs = np.array(sol.z, dtype=float)
        else:
            xs, zs = out
            xs[:] = sol.x
            if zs is not None:
                zs[:] = sol.z
        t1 = _perf_counter()
        return xs, zs, d, rinv, s, raw, sol.iterations, attempts, t1 - t0

    # ------------------------------------------------------------------
    def solve(self, P, q, Aeq=None, beq=None, G=None, h=None) -> QPSolution:
        """Solve ``min 0.5 a'Pa + q'a  s.t.  Aeq a = beq, G a >= h`` for new data.

        Parameters
        ----------
        P : (n, n) array_like or scipy.sparse matrix
            Symmetric PSD (only its upper triangle is read).
        q : (n,) array_like
            Linear term (``-F``).
        Aeq : (m, n) array_like or sparse, optional when m == 0
        beq : (m,) array_like, optional when m == 0
        G : (p, n) array_like or sparse; required when p > 0
        h : (p,) array_like; required when p > 0

        Returns
        -------
        QPSolution
            Never raises for solver outcomes: infeasibility, iteration limits
            or numerical trouble are reported in ``status``.

        Raises
        ------
        ValueError
            Wrong shapes, non-numeric or non-finite input.
        """
        n, m, p = self.n, self.m, self.p
        Pk, Px = _matrix("P", P, (n, n), "csc")
        if Pk == "dense" and n > self.dense_full_max:
            Pk, Px = "sparse", sp.csc_matrix(Px)
        qv = _vector("q", q, n)
        blocks = []
        bv = np.zeros(0)
        if m:
            if Aeq is None or beq is None:
                raise ValueError(f"ClarabelQP.solve: Aeq and beq are required (m={m})")
            Ak, Ax = _matrix("Aeq", Aeq, (m, n), "csr")
            if Ak == "dense" and n > self.dense_full_max:
                Ak, Ax = "sparse", sp.csr_matrix(Ax)
            blocks.append(("eq", Ak, Ax, 0, 1.0))
            bv = _vector("beq", beq, m)
        else:
            if Aeq is not None:
                _matrix("Aeq", Aeq, (0, n), "csr")
            if beq is not None:
                _vector("beq", beq, 0)
        if p:
            if G is None or h is None:
                raise ValueError(f"ClarabelQP.solve: G and h are required (p={p})")
            Gk, Gx = _matrix("G", G, (p, n), "csr")
            if Gk == "dense" and n > self.dense_full_max:
                Gk, Gx = "sparse", sp.csr_matrix(Gx)
            blocks.append(("in", Gk, Gx, m, -1.0))
            hv = _vector("h", h, p)
            bv = np.concatenate((bv, -hv)) if m else -hv
        else:
            if G is not None:
                _matrix("G", G, (0, n), "csr")
            if h is not None:
                _vector("h", h, 0)

        with self._lock:
            t0 = time.perf_counter()
            rebuilt = False
            Pv = Av = None
            if self._solver is not None:
                Pv = self._P_values(Pk, Px)
                Av = self._A_values(blocks)
            if Pv is None or Av is None or not self._update_ok:
                # (re)build on the union of the old and new patterns
                kP = self._P_keys_of(Pk, Px)
                kA = np.concatenate([self._block_keys_of(k, X, off) for _, k, X, off, _ in blocks]
                                    + [np.zeros(0, dtype=np.int64)])
                if self._Ppat is None:
                    self._Ppat = _Pattern(n, n, kP)
                    self._Apat = _Pattern(m + p, n, kA)
                else:
                    self._Ppat = self._Ppat.union(kP)
                    self._Apat = self._Apat.union(kA)
                self._cache = {}
                Pv = self._P_values(Pk, Px)
                Av = self._A_values(blocks)
                rebuilt = True
            sol, info, d, rinv, s, raw, attempts = self._run(Pv, qv, Av, bv, rebuilt)
            x = np.array(sol.x, dtype=float)
            zz = np.array(sol.z, dtype=float)
            t1 = time.perf_counter()

        if d is not None:
            x *= d
        zz *= 1.0 / s
        if rinv is not None:
            zz *= rinv
        return QPSolution(
            x=x, y=-zz[:m], z=zz[m:], status=STATUS_NAMES.get(raw, raw.lower()),
            iterations=int(sol.iterations), solve_time=t1 - t0,
            residuals={"primal": float(info.res_primal), "dual": float(info.res_dual),
                       "gap": float(info.gap_abs), "gap_rel": float(info.gap_rel),
                       "ktratio": float(info.ktratio)},
            raw_status=raw, rebuilt=rebuilt, attempts=attempts,
        )
