"""The QP step of a large sparse system: Clarabel on the sparse data, the band step's rank decision.

The QP's general path (:class:`~gaussopt.gauss.solvers.QP`) poses the QP on the dense
rank decision (:func:`gaussopt.gauss.solution.decide`: an SVD of the normalized rows and
an ``n x n`` basis) and passes Clarabel the kept orthonormal directions ``V_r^T``,
``r x n`` and dense. On the issue's chain of 1000 point masses (n = 2000, a
``scipy.sparse`` Jacobian with 4 entries per row) that costs 24 s and 1.2 GB for one
step, where the closed form answers in O(n) on the band (:mod:`gaussopt.gauss.band_step`).
Comparing the two solvers is what the library is for, so the QP of a system that has
the band path takes the same structure:

* **The rank decision** is the band step's: it *certifies* full row rank with a margin
  (a shifted band Cholesky of ``S = An H^-1 An^T``) and otherwise refuses. This module
  runs it through a closed-form solver sharing the QP's references (``row_ref``,
  ``sigma_ref``, rank tolerance); where the band path refuses (redundant or nearly
  dependent rows, a vanishing row, a singular mass block, a ``b`` hook), the step goes
  to the QP's dense path, which decides exactly as before -- the closed form does the
  same. So redundant rows are handled exactly where the closed form handles them.
* **Clarabel** gets the problem in sparse form: ``P = M / w`` (its diagonal, or the
  upper triangles of its diagonal blocks; ``w = trace(M)/n``), ``q = -F / (w s_a)``, the
  equality rows normalized, ``An = A / nu``, ``beq = bn / s_a``, as a ``ZeroConeT(m)``
  (``s_a = max(|F|/w, |bn|)``, the dense path's acceleration scale), on the values the
  band step evaluated (:meth:`~gaussopt.gauss.solvers.base.StepSolver.band_work`: the
  model is evaluated once per step). The CSC/CSR
  matrices are built once on the model's fixed pattern
  (:class:`~gaussopt.core.model_interface.SparseModel`) and only their values change;
  :class:`~gaussopt.gauss.solvers.qp.clarabel_qp.ClarabelQP` updates Clarabel in place.
  The KKT system Clarabel factors (``n + m`` unknowns) has ``O(nnz)`` entries, so
  memory is proportional to the nonzeros.
* **The polish** is the QP's usual one: the closed form of the same rank decision --
  here the band step's answer, verified by its own backward error against the QP's
  ``verify_tol`` (above it, as on the dense path, the closed form is accepted at the
  direct tolerance and ``info["fallback"]`` is True). Clarabel's own acceleration is
  kept in ``info["backend_a"]`` and its distance from the polished one in
  ``info["backend_deviation"]`` (relative to ``max |a|``): the comparison the user
  asked for. A Clarabel status other than ``optimal``/``almost_optimal`` is a fallback
  too, counted like the dense path's.

Inequality rows never reach this path: a system with them has no band model
(:func:`gaussopt.model.model_functions.python_sparse_model`); its QP takes the dense
path, and ``info["sparse_qp_reason"]`` says why.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import gaussopt.gauss.band_step as SP
from gaussopt.core.compiled import jit
from gaussopt.core.result import StepResult
from gaussopt.gauss.compiled_step import S_BE, S_FLAGS
from gaussopt.gauss.solvers.closed_form import ClosedForm
from gaussopt.gauss.solvers.qp.clarabel_qp import STATUS_NAMES

__all__ = ["SparseQP", "refusal"]

#: Clarabel statuses whose answer is accepted as the backend's (the polish then applies)
_ACCEPTED = ("optimal", "almost_optimal")


def refusal(qp) -> str | None:
    """Why the QP solver ``qp`` has no sparse path (None: it has one). Checked once per
    model (:meth:`QP._sparse_path`)."""
    system = qp.system
    if qp.backend != "clarabel":
        return f"backend {qp.backend!r}: the sparse path calls Clarabel directly"
    if qp.objective != "exact":
        return "objective 'paper': the sparse path minimizes the exact Gauss function"
    if system.inequalities:
        return "inequality rows: a system with Inequality constraints has no band model"
    if getattr(system, "sparse", None) is None:
        return ("no band model (it needs a diagonal or block-diagonal mass, scipy.sparse "
                f"Jacobians and at least {SP.MIN_N} coordinates)")
    if qp._compiled:
        return f"n = {qp._n} <= QP_DENSE_MAX: the compiled dense path is faster"
    return None


class SparseQP:
    """The sparse QP step of one :class:`~gaussopt.gauss.solvers.QP` on one band model
    (module docstring), built once: the closed-form solver that makes the rank
    decision, the CSC ``P`` and CSR ``A`` on the model's pattern, where their values go
    in Clarabel's order, and the Clarabel solver.

    Parameters
    ----------
    qp : QP
        The solver it serves (its references, tolerances, settings, lock).
    model : SparseModel
        ``qp.system.sparse``.
    """

    def __init__(self, qp, model) -> None:
        from gaussopt.gauss.solvers.qp.clarabel_qp import ClarabelQP

        self.qp = qp
        self.model = model
        n, m = model.n, model.m
        self.n, self.m = n, m
        # the rank decision: the closed form's band step, on the QP's references (the
        # reference of sigma_min is the same array, shared with the compiled engine)
        cf = self.closed_form = ClosedForm(qp.system, rank_tol=qp.rank_tol)
        cf._sref = qp._sref
        # the mass: diagonal, or dense blocks on consecutive coordinates packed row-major
        bptr = (np.arange(n + 1, dtype=np.int64) if model.block_ptr is None
                else np.asarray(model.block_ptr, dtype=np.int64))
        rows, cols, src, diag = [], [], [], []
        off = 0
        for B in range(bptr.size - 1):
            c0, s = int(bptr[B]), int(bptr[B + 1] - bptr[B])
            for j in range(s):                    # CSC order: column by column
                for i in range(j + 1):            # upper triangle
                    rows.append(c0 + i)
                    cols.append(c0 + j)
                    src.append(off + i * s + j)
            diag.extend(off + r * s + r for r in range(s))
            off += s * s
        self._diag = np.array(diag, dtype=np.int64)
        order = np.lexsort((rows, cols))
        self._src = np.array(src, dtype=np.int64)[order]
        self.P = sp.csc_matrix((np.zeros(len(src)), (np.array(rows)[order],
                                                       np.array(cols)[order])), shape=(n, n))
        self.P.sort_indices()
        indptr = np.asarray(model.indptr, dtype=np.int64)
        indices = np.asarray(model.indices, dtype=np.int64)
        self._rowof = np.repeat(np.arange(m), np.diff(indptr))
        self.A = sp.csr_matrix((np.zeros(indices.size), indices.copy(), indptr.copy()),
                               shape=(m, n))
        cq = self.clarabel = ClarabelQP(n, m, 0, P_pattern=self.P, A_pattern=self.A,
                                        settings=qp.backend_options, scaling="jacobi")
        # where the values go in the CSC order of the patterns Clarabel was built on (its
        # value entry, ClarabelQP.solve_values: no pattern matching per step)
        P = self.P
        pcols = np.repeat(np.arange(n, dtype=np.int64), np.diff(P.indptr))
        order = np.argsort(cq._Ppat.locate(pcols * n + P.indices.astype(np.int64)))
        self._Psrc = self._src[order]
        order = np.argsort(cq._Apat.locate(indices * m + self._rowof))
        self._Asrc = order
        self._Arow = self._rowof[order]
        self.steps = 0
        # the model's sparse data as the band step evaluates them (the same arrays every
        # step, for one compiled step: read once per context), and the values passed to
        # Clarabel (written in place every step)
        self._ctx_seen = None
        self._bw = None
        self._vals = (np.empty(self._Psrc.size), np.empty(self._Asrc.size), np.empty(n),
                      np.empty(m))
        self._scaled = (np.empty(self._Psrc.size), np.empty(n), np.empty(self._Asrc.size),
                        np.empty(m), np.empty(n), np.empty(m))
        self._xs = (np.empty(n), None)            # (Clarabel's primal answer, copied out)

    def step(self, t: float, q: np.ndarray, v: np.ndarray, full: bool):
        """One QP step on the sparse path: a StepResult (``full``) or the accelerations,
        or a string saying why the dense path must take it (the band step refused, a
        ``b`` hook)."""
        qp = self.qp
        cf = self.closed_form
        if qp.b_correction is not None:
            return "a b hook (Baumgarte): the band step runs without it"
        q = np.ascontiguousarray(q, dtype=float)
        v = np.ascontiguousarray(v, dtype=float)
        cf.row_ref = qp.row_ref
        with cf._lock:
            res = cf._solve_compiled(t, q, v, full)
            ctx = cf._ctx
            flags = int(ctx[8][S_FLAGS]) if ctx else 0
        if res is None or not flags & SP.SPARSE_FLAG:
            return ("the band step did not certify the rows' rank here (redundant or nearly "
                    "dependent rows, a vanishing row, ...): the dense rank decision takes it")
        a = res.a if full else res
        # the model's sparse data at this state, as the band step evaluated them (its
        # work arrays, looked up once per compiled context: 30 us a lookup at n = 2000)
        if ctx is not self._ctx_seen:
            bw = cf.band_work()
            self._bw = (bw.d, bw.F, bw.data, bw.b)
            self._ctx_seen = ctx
        d, F, data, b = self._bw
        n = self.n
        Pv, Av, qv, bv = self._vals
        sa = _scaled_values(d, F, data, b, self._diag, self._rowof, self._Psrc, self._Asrc,
                            self._Arow, Pv, Av, qv, bv)
        cq = self.clarabel
        first = cq._scale(Pv, qv, Av, bv, cq.scaling, self._scaled)
        # (the primal solution only: Clarabel's dual, read, costs 0.02 ms at n = 2000)
        xs, _, dd, _, _, raw, iters, _, solve_time = cq.solve_values(
            Pv, qv, Av, bv, first, self._xs)
        status = STATUS_NAMES.get(raw) or raw.lower()
        qp.statuses[status] = qp.statuses.get(status, 0) + 1
        self.steps += 1
        x = sa * (xs if dd is None else xs * dd)
        amax = float(np.abs(a).max(initial=0.0))
        dev = float(np.abs(x - a).max(initial=0.0)) / amax if amax > 0 else float(
            np.abs(x).max(initial=0.0))
        # (a NaN or infinity in Clarabel's answer is one in dev: the max propagates it)
        ok = status in _ACCEPTED and dev < np.inf
        be = float(ctx[8][S_BE])                    # the band step's backward error
        fallback = not ok or be > qp.verify_tol
        if fallback:
            qp.fallbacks += 1
        if not full:
            return a
        info = dict(res.info)
        info.update({"solver": qp.name, "status": status, "backend": "clarabel",
                     "iterations": int(iters), "solve_time": solve_time,
                     "fallback": fallback, "backward_error": be,
                     "inequality_multipliers": np.zeros(0), "sparse_qp": True,
                     "sparse_qp_reason": None, "backend_a": x, "backend_deviation": dev})
        out = StepResult(a=a, constraint_force=res.constraint_force,
                         multipliers=res.multipliers, gauss=res.gauss, info=info)
        qp.last_info = info
        return out


@jit(cache=True, python=True, error_model="numpy")
def _scaled_values(d, F, data, b, diag, rowof, Psrc, Asrc, Arow, Pv, Av, qv, bv):
    """The QP's data in Clarabel's order and scaling, in one pass (module docstring): the
    mass's weight ``w`` (its diagonal's mean), the rows' norms ``nu``, the acceleration
    scale ``s_a = max(|F| / w, |b / nu|)`` (1 where it is not positive and finite), then
    ``Pv = d / w`` on the pattern, ``Av`` the rows over their norms, ``qv = -F / (w s_a)``,
    ``bv = b / (nu s_a)`` (written into the arrays given). Returns ``s_a``."""
    n, m = F.size, b.size
    w = 0.0
    for i in range(diag.size):
        w += d[diag[i]]
    w /= n
    nu = np.zeros(m)
    for k in range(data.size):
        nu[rowof[k]] += data[k] * data[k]
    fn = 0.0
    for i in range(n):
        fn += F[i] * F[i]
    bnn = 0.0
    for i in range(m):
        nu[i] = np.sqrt(nu[i])
        x = b[i] / nu[i]
        bnn += x * x
    sa = max(np.sqrt(fn) / w, np.sqrt(bnn))
    if not (sa > 0.0 and sa < np.inf):
        sa = 1.0
    iw = 1.0 / w
    for k in range(Psrc.size):
        Pv[k] = d[Psrc[k]] * iw
    for k in range(Asrc.size):
        Av[k] = data[Asrc[k]] / nu[Arow[k]]
    c = -1.0 / (w * sa)
    for i in range(n):
        qv[i] = F[i] * c
    isa = 1.0 / sa
    for i in range(m):
        bv[i] = (b[i] / nu[i]) * isa
    return sa
