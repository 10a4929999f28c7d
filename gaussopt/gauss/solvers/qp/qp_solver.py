"""Gauss step as a quadratic program: Clarabel called directly, or any cvxpy backend."""

from __future__ import annotations

import numpy as np

import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
from gaussopt.core.exceptions import InconsistentConstraintsError, ModelError, SolverError
from gaussopt.gauss.solution import decide, inconsistency_residual, raise_for_status, solve_gauss
from gaussopt.core.model_interface import quiet_compile
from gaussopt.core.settings import QP_DENSE_MAX
from gaussopt.model.model_functions import model_functions
from gaussopt.core.result import LazyStepResult, StepResult
import gaussopt.gauss.solvers.qp.compiled_qp as QS
from gaussopt.gauss.solvers.base import StepSolver
from gaussopt.gauss.solvers.qp.clarabel_qp import STATUS_NAMES
from gaussopt.gauss.solvers.qp.sparse_qp import SparseQP, refusal

__all__ = ["QP", "BACKENDS"]

#: backends of the QP solver besides the names of installed cvxpy solvers
BACKENDS = ("clarabel", "cvxpy")

#: systems up to this many coordinates pass Clarabel dense data and take the compiled
#: path (:data:`gaussopt.core.settings.QP_DENSE_MAX`)
DENSE_MAX = QP_DENSE_MAX

#: Clarabel statuses that mean "no acceleration satisfies the rows"
_INFEASIBLE = ("primal_infeasible", "infeasible")

#: Clarabel's primary scaling (:class:`~gaussopt.gauss.solvers.qp.clarabel_qp.ClarabelQP`)
_SCALING = "jacobi"
_SCALING_CODE = {"jacobi": 0, "rows": 1, "none": 2}[_SCALING]
_F64 = np.dtype(np.float64)
_H_S = QS.H_S
_R_GAUSS, _R_DROPPED = QS.R_GAUSS, QS.R_DROPPED
#: non-empty once :func:`.compiled_qp.prepare_model` has been compiled or loaded in this process
_LOADED: list = []

class _Buffers:
    """What the compiled calls of one problem size use (:meth:`QP._buffers`, built once):
    the kernel workspace, the float and integer buffers (:func:`.compiled_qp.layout`), the
    options, Clarabel's solution ``xs``, ``zs`` (``zs`` for the largest rank; Clarabel
    fills its first ``r + p`` entries), per rank ``r`` the views of the buffers
    (:func:`_views`), and with a compiled model the context of the compiled calls
    (:class:`.compiled_qp.QPContext`, on the model's arrays) and their entry points.

    ``res`` is the results block of :func:`.compiled_qp.finish` (copied once per step),
    ``slices`` the places of ``a``, ``mu``, ``M a - F``, the multipliers and the
    singular values in it, ``a`` its acceleration and ``i_rho`` the index of the
    inconsistency in ``fb`` (the hot path's two results)."""

    __slots__ = ("work", "fb", "ib", "opt", "zero_ref", "P", "noP", "lay", "views", "live",
                 "xs", "zs", "m", "p", "ctx", "prepare_at", "finish_at", "res", "slices", "a",
                 "i_rho")

    def __init__(self, work, fb, ib, opt, zero_ref, P, lay, live, xs, zs, n, m, p):
        self.work, self.fb, self.ib, self.opt, self.zero_ref = work, fb, ib, opt, zero_ref
        self.P, self.noP, self.lay, self.views = P, np.zeros((0, 0)), lay, {}
        self.live, self.xs, self.zs = live, xs, zs
        self.m, self.p = m, p
        oo, oa, oFe = lay[21], lay[11], lay[14]
        self.res = fb[oo:oFe]
        i = oa - oo
        self.slices = (slice(i, i + n), slice(i + n, i + n + p),
                       slice(i + n + p, i + 2 * n + p), slice(i + 2 * n + p, i + 2 * n + p + m),
                       slice(i + 2 * n + p + m, oFe - oo))
        self.a = fb[oa:oa + n]
        self.i_rho = oo + QS.R_RHO
        self.ctx = None
        # the compiled functions, called directly once they are compiled for these types
        # (:func:`gaussopt.gauss.compiled_step.entry_point`: the argument types are those of every later
        # call of :meth:`QP._fast_model`, which alone uses them)
        self.prepare_at = self.finish_at = None

    def call_args(self, sref, M, F, A, b, G, h, ref) -> tuple:
        """The arguments of :func:`.compiled_qp.prepare` (with ``Pn`` for a full result and
        without) and of :func:`.compiled_qp.finish` (less ``want_lam``) on the arrays
        ``M, F, A, b, G, h, ref``: ``(prep_full, prep_hot, fin)``."""
        w = self.work
        head = (M, F, A, b, G, h, ref)
        prep = head + (sref, self.opt, w.f, w.i, self.fb, self.ib)
        return (prep + (self.P,), prep + (self.noP,),
                head + (self.xs, self.zs, self.opt, w.f, w.i, self.fb))

    def context(self, mc, sref):
        """The :class:`.compiled_qp.QPContext` on the compiled model's arrays (``mc``:
        :meth:`QP._model`), built once."""
        ctx = self.ctx
        if ctx is None:
            _, addrs, par, M, F, A, b, *_ = mc
            w = self.work
            ctx = self.ctx = QS.make_context(addrs, par, M, F, A, b, sref, self.opt, w.f, w.i,
                                             self.fb, self.ib, self.P, self.noP, self.xs,
                                             self.zs)
        return ctx


def _views(fb: np.ndarray, lay: tuple, n: int, r: int, p: int) -> tuple:
    """Views of the float buffer for rank ``r`` (:func:`.compiled_qp.layout`): Clarabel's
    values unscaled and scaled, the scaling."""
    (oPv, oqv, oAv, obv, oPo, oqo, oAo, obo, od, orinv, *_) = lay
    nP = n * (n + 1) // 2
    rr = r + p
    return (fb[oPv:oPv + nP], fb[oqv:oqv + n], fb[oAv:oAv + rr * n], fb[obv:obv + rr],
            fb[oPo:oPo + nP], fb[oqo:oqo + n], fb[oAo:oAo + rr * n], fb[obo:obo + rr],
            fb[od:od + n], fb[orinv:orinv + rr])


def _carray(x: np.ndarray) -> np.ndarray:
    """``x`` as a writable C-contiguous float array (what the compiled calls are compiled
    for: another layout or a read-only array would compile them again)."""
    return x if x.flags.carray and x.dtype is _F64 else np.array(x, dtype=float)


class _ClarabelBackend:
    """Clarabel built once for the sizes of the reduced problem, updated in place (built
    on its dense patterns right away for ``n <= DENSE_MAX``: the compiled path passes
    the values on them)."""

    def __init__(self, n: int, m: int, p: int, options: dict | None) -> None:
        from gaussopt.gauss.solvers.qp.clarabel_qp import ClarabelQP

        if n <= DENSE_MAX:
            self.qp = ClarabelQP(n, m, p, settings=options, scaling=_SCALING,
                                 dense_full_max=DENSE_MAX, P_pattern=np.ones((n, n)),
                                 A_pattern=np.ones((m + p, n)))
        else:
            self.qp = ClarabelQP(n, m, p, settings=options, scaling=_SCALING,
                                 dense_full_max=DENSE_MAX)
        self.name = "clarabel"

    def solve(self, P, F, Aeq, beq, G, h):
        out = self.qp.solve(P, -F, Aeq, beq, G, h)
        return out.x, out.z, out.status, out.iterations, out.solve_time


class _CvxpyBackend:
    """cvxpy's DPP-compiled problem (:class:`~gaussopt.gauss.solvers.qp.cvxpy_qp.QPKernel`)."""

    def __init__(self, n: int, m: int, p: int, solver: str | None, options: dict | None) -> None:
        from gaussopt.gauss.solvers.qp.cvxpy_qp import QPKernel  # cvxpy is imported on first use (1 s)

        self.kernel = QPKernel(n, m, p, solver=solver, solver_options=options)
        self.name = f"cvxpy/{self.kernel.solver}"

    def solve(self, P, F, Aeq, beq, G, h):
        out = self.kernel.solve(P, F, Aeq, beq, G if G.shape[0] else None, h if G.shape[0] else None)
        return out.a, out.mu, out.status, -1, out.solve_time



def _qp_info(solver, o, slices, status, backend, iters, solve_time, r, dropped_rows) -> dict:
    """``StepResult.info`` of the compiled qp step (built on first access:
    :class:`gaussopt.core.result.LazyStepResult`), from ``o``, the step's copy of the results
    block of :func:`.compiled_qp.finish` (``slices``: :attr:`_Buffers.slices`)."""
    rho = float(o[QS.R_RHO])
    sigma = o[slices[4]][:int(o[QS.R_K])]
    return {"status": status, "backend": backend, "iterations": iters,
            "solve_time": solve_time, "fallback": False,
            "backward_error": float(o[QS.R_BE]), "rank": r, "sigma": sigma,
            "sigma_min": float(sigma[r - 1]) if r else 1.0, "dropped_rows": dropped_rows,
            "inconsistency": rho, "least_squares": rho > solver._root,
            "kept_vanished_rows": bool(o[QS.R_KEPT]), "inequality_multipliers": o[slices[1]],
            "solver": solver.name, "rank_tol": solver.rank_tol,
            "residual": float(o[QS.R_RESID]), "sparse_qp": False,
            "sparse_qp_reason": solver._sparse_path()[1]}

class QP(StepSolver):
    """The Gauss step as a convex QP, ``min 0.5 a^T M a - F^T a`` s.t. ``A a = b``, ``G a >= h``.

    The QP is posed on the shared rank decision: the equality rows are the
    kept orthonormal directions ``V_r^T a = beta`` (so redundant and nearly
    dependent rows never reach the QP solver), ``M`` is divided by
    ``w = trace(M)/n`` and ``F``, ``beta``, ``h`` by an acceleration scale
    ``s_a = max(|F|/w, |beta|, |h|)``, so that the backend's tolerances are
    relative to the answer. This is the only solver that accepts
    :class:`~gaussopt.Inequality` rows (unilateral constraints, e.g. a contact
    that can lift off).

    The backend's answer is polished: with its inequality forces ``G^T mu``
    held fixed, the acceleration is recomputed by the closed form of the same
    rank decision, so that the equality part is exact to rounding (an
    interior-point answer is exact only to its stopping tolerances, noise that
    an adaptive integrator at ``rtol = 1e-12`` cannot step through); without
    inequality rows the QP's acceleration is the closed form's.

    Every result is verified: the backward error of the optimality conditions
    (with the inequality forces ``G^T mu`` as applied forces, ``mu >= 0``,
    ``G a >= h``, complementarity) must not exceed ``verify_tol``; a result
    that fails is re-solved on the robust path -- the closed form, or with
    inequality rows the closed form on the equality rows plus the QP's active
    set, accepted only if its multipliers are ``>= 0`` and the inactive rows
    hold -- and ``info["fallback"]`` says so.

    A large system that takes the closed form's O(n) band step (a diagonal or
    block-diagonal mass and ``scipy.sparse`` Jacobians, more than
    :data:`~gaussopt.core.settings.QP_DENSE_MAX` coordinates, no inequality rows)
    takes the sparse path instead (:mod:`.sparse_qp`): the band step's certified rank
    decision, Clarabel on the sparse ``M`` and rows (memory proportional to the
    nonzeros), the band step's closed form as the polish; where the band step refuses
    (redundant rows, say), the dense path above decides. ``info["sparse_qp"]`` says
    which path answered and ``info["sparse_qp_reason"]`` why not the sparse one.

    Parameters
    ----------
    system : System
    backend : str, default "clarabel"
        ``"clarabel"``: Clarabel called directly, built once per system (sparse
        data, updated in place every step). ``"cvxpy"``: the problem built once
        as a cvxpy DPP problem (``cvxpy_solver`` chooses its backend, default
        Clarabel); the name of an installed cvxpy solver (``"OSQP"``,
        ``"SCS"``, ...) means ``"cvxpy"`` with that solver.
    backend_options : dict, optional
        Settings of the backend (Clarabel settings, or options of ``problem.solve``).
    verify_tol : float, default 1e-12
        Largest accepted backward error (relative) of the QP's result.
    **kwargs
        ``objective``, ``rank_tol``, ``row_scale`` as for every step solver.

    Notes
    -----
    ``info`` holds the backend's ``status``, ``backend``, ``iterations``,
    ``solve_time``, ``inequality_multipliers`` (``mu >= 0`` with
    ``M a = F + A^T lam + G^T mu``) and the verification; on the sparse path also
    ``backend_a`` (Clarabel's acceleration before the polish) and
    ``backend_deviation`` (its distance from the result, relative to ``max |a|``). Safe to call from
    several threads on one system (the backend is locked per solve).
    """

    name = "qp"
    supports_inequalities = True

    def __init__(self, system, *, backend: str = "clarabel", backend_options: dict | None = None,
                 verify_tol: float = 1e-12, cvxpy_solver: str | None = None, **kwargs) -> None:
        super().__init__(system, **kwargs)
        if not isinstance(backend, str):
            raise ModelError(f"`backend` must be a str, found {type(backend).__name__}.")
        kind, solver = backend.lower(), cvxpy_solver
        if kind not in BACKENDS:
            from gaussopt.gauss.solvers.qp.cvxpy_qp import available_solvers

            choices = available_solvers()
            if backend.upper() not in choices:
                raise ModelError(f"`backend` must be one of {list(BACKENDS)} or an installed cvxpy "
                                 f"solver {choices}, found {backend!r}.")
            kind, solver = "cvxpy", backend.upper()
        if backend_options is not None and not isinstance(backend_options, dict):
            raise ModelError(f"`backend_options` must be a dict, found {type(backend_options).__name__}.")
        if not (np.isfinite(verify_tol) and 0 < verify_tol < 1):
            raise ModelError(f"`verify_tol` must be in (0, 1), found {verify_tol!r}.")
        self.backend = kind
        self.cvxpy_solver = solver
        self.backend_options = backend_options
        self.verify_tol = float(verify_tol)
        self._backends: dict = {}
        self.statuses: dict[str, int] = {}
        self.fallbacks = 0
        # the compiled path (qp_step): Clarabel, objective "exact", dense sizes
        self._compiled = (kind == "clarabel" and self.objective == "exact"
                          and self._n <= DENSE_MAX)
        self._bufs: dict = {}
        self._mbufs = None
        self._mc = None                     # the compiled model's functions (:meth:`_model`)
        # writable copies of a constant (read-only) M and F for the compiled calls
        self._Mc, self._Fc = system.constant_mass, system.constant_force
        self._Mw = None if self._Mc is None else np.array(self._Mc, dtype=float)
        self._Fw = None if self._Fc is None else np.array(self._Fc, dtype=float)
        # the sparse path (:meth:`_sparse_path`): (the band model it was built for, the
        # SparseQP or None, why not)
        self._sq: tuple | None = None

    def _get_backend(self, r: int, p: int):
        # the kept rank can change (singular positions): one backend per shape
        backend = self._backends.get((r, p))
        if backend is None:
            if self.backend == "clarabel":
                backend = _ClarabelBackend(self._n, r, p, self.backend_options)
            else:
                backend = _CvxpyBackend(self._n, r, p, self.cvxpy_solver, self.backend_options)
            self._backends[(r, p)] = backend
        return backend

    def _sparse_path(self) -> tuple:
        """``(sparse, why_not)``: the :class:`.sparse_qp.SparseQP` of the system's band
        model (built once per model) or None, and why there is none (None when there
        is one). The model appears with the system's check (its first step)."""
        model = getattr(self.system, "sparse", None)
        cached = self._sq
        if cached is not None and cached[0] is model:
            return cached[1], cached[2]
        why = refusal(self)
        sq = SparseQP(self, model) if why is None else None
        self._sq = (model, sq, why)
        return sq, why

    # ------------------------------------------------------------- interface
    def solve(self, t: float, q: np.ndarray, v: np.ndarray) -> StepResult:
        """Solve one step at ``(t, q, v)`` (:meth:`StepSolver.solve`); through the
        compiled path (:mod:`.compiled_qp`) or the sparse path (:mod:`.sparse_qp`) where
        one applies."""
        if not self._compiled:
            sq, why = self._sparse_path()
            if sq is not None:
                with self._lock:
                    out = sq.step(t, q, v, True)
                if type(out) is not str:
                    return out
                why = out
            res = super().solve(t, q, v)
            res.info["sparse_qp"] = False
            res.info["sparse_qp_reason"] = why
            return res
        out = self._fast_model(t, q, v, True)
        if out is not None:
            return out
        M, F, A, b = self._prepare(t, q, v)
        G, h = self.system.inequality_rows(t, q, v)
        out = self._fast(t, M, F, A, b, G, h, True)
        if out is not None:
            return out
        return self._python_result(t, q, v, M, F, A, b, G, h)

    def acceleration(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Hot path (:meth:`StepSolver.acceleration`); through the compiled path where
        it applies."""
        if not self._compiled:
            sq = self._sparse_path()[0]
            if sq is not None:
                with self._lock:
                    out = sq.step(t, q, v, False)
                if type(out) is not str:
                    return out
            return super().acceleration(t, q, v)
        out = self._fast_model(t, q, v, False)
        if out is None:
            M, F, A, b = self._prepare(t, q, v)
            G, h = self.system.inequality_rows(t, q, v)
            out = self._fast(t, M, F, A, b, G, h, False)
            if out is None:
                a, _, info = self._step(t, q, v, M, F, A, b, False, G, h)
                if info.get("least_squares"):
                    self._record_least_squares(t, q, v, A, b, float(info["inconsistency"]))
                return a
        a, rho = out
        if rho > self._root:
            self._record_least_squares(t, q, v, *self.system.rows(t, q, v), rho)
        return a

    # ------------------------------------------------------------- compiled path
    def _buffers(self, m: int, p: int) -> _Buffers:
        """Workspace, buffers and options of the compiled calls for ``m`` rows and ``p``
        inequality rows (built once)."""
        bufs = self._bufs.get((m, p))
        if bufs is None:
            n = self._n
            lay = QS.layout(n, m, p)
            opt = np.zeros(QS.N_OPTS)
            opt[QS.O_RANKTOL] = self.rank_tol
            opt[QS.O_CHECKSYM] = float(self._check_symmetry)
            opt[QS.O_SCALING] = _SCALING_CODE
            opt[QS.O_COST] = 1.0
            opt[QS.O_VERIFY] = self.verify_tol
            P = self._P_const if self._null_force_check else None
            # (a writable copy: the type of the (0, 0) array passed without it)
            P = np.array(P, dtype=float) if P is not None else np.zeros((0, 0))
            w = K.make_work(n, m)
            bufs = self._bufs[(m, p)] = _Buffers(
                w, np.zeros(lay[15]), np.zeros(lay[20], dtype=np.int64), opt,
                np.zeros(m), P, lay, WS.view(w, "live", m), np.zeros(n),
                np.zeros(min(m, n) + p), n, m, p)
        return bufs

    def _ref_array(self, bufs: _Buffers) -> np.ndarray:
        """The row reference as the compiled calls take it (zeros: none)."""
        ref = self.row_ref
        if ref is None:
            return bufs.zero_ref
        return _carray(self._reference(bufs.m))

    def _model(self):
        """The compiled model's functions and buffers (:func:`gaussopt.core.model_interface.model_functions`),
        or None when the model is evaluated in Python (no compiled functions, rows not
        yet counted, a ``b`` hook)."""
        mc = self._mc
        if mc is None:
            system = self.system
            if system._row_counts is None:
                return None
            if getattr(system, "compiled", None) is None:
                self._mc = False
                return None
            mf = model_functions(system)
            n, m = self._n, mf.m
            bufs = mf.buffers
            G0, h0 = np.zeros((0, n)), np.zeros(0)
            mc = self._mc = (mf, mf.addrs, _carray(np.asarray(mf.p)),
                             bufs["M"].reshape(n, n), bufs["F"], bufs["A"].reshape(m, n),
                             bufs["b"], G0, h0, (n,))
        return mc if mc is not False and self.b_correction is None else None

    def _fast_model(self, t, q, v, full, checked=False):
        """:meth:`_fast` with the model evaluated in the compiled call (a compiled model):
        its result, or None (then the Python path evaluates the model). ``checked``:
        ``t`` is a float and ``q``, ``v`` are C-contiguous float arrays of shape (n,)."""
        mc = self._mc
        if mc is None or mc is False or self.b_correction is not None:
            mc = self._model()
            if mc is None:
                return None
        mf, addrs, par, M, F, A, b, G, h, shape = mc
        if not checked:
            if not (type(q) is np.ndarray and type(v) is np.ndarray and q.dtype is _F64
                    and v.dtype is _F64 and q.shape == shape and v.shape == shape
                    and q.flags.carray and v.flags.carray):
                return None
            if type(t) is not float:
                t = float(t)
        if self.system.inequalities:
            G, h = self.system.inequality_rows(t, q, v)
            G, h = _carray(G), _carray(h)
            bufs = self._bufs.get((A.shape[0], G.shape[0]))
            if bufs is None:
                bufs = self._buffers(A.shape[0], G.shape[0])
        else:
            bufs = self._mbufs                # (the model's sizes: always the same buffers)
            if bufs is None:
                bufs = self._mbufs = self._buffers(A.shape[0], 0)
        ref = bufs.zero_ref if self.row_ref is None else self._ref_array(bufs)
        call = bufs.prepare_at
        with self._lock:
            if call is not None:
                code, r = call(bufs.ctx, G, h, ref, t, q, v, full)
            else:
                ctx = bufs.context(mc, self._sref)
                if _LOADED:
                    code, r = QS.prepare_at(ctx, G, h, ref, t, q, v, full)
                else:
                    with quiet_compile():           # numba's note on first-class functions
                        code, r = QS.prepare_at(ctx, G, h, ref, t, q, v, full)
                    _LOADED.append(True)
                bufs.prepare_at = QS.entry_point(QS.prepare_at, (ctx, G, h, ref, t, q, v, full))
            if code:
                return None
            fin = bufs.finish_at
            out = self._solve_prepared(t, bufs, r, full, fin or QS.finish_at,
                                       (bufs.ctx, G, h, ref), (M, F, A, b, G, h), True)
            if fin is None:               # (once finish_at has run for these types)
                fin = QS.entry_point(QS.finish_at, (bufs.ctx, G, h, ref, full))
                if fin is not QS.finish_at:
                    bufs.finish_at = fin
            return out

    def _solve_checked(self, t, q, v):
        """:meth:`StepSolver._solve_checked`: the compiled path of :meth:`solve`."""
        return self._fast_model(t, q, v, True, True) if self._compiled else None

    def _fast(self, t, M, F, A, b, G, h, full):
        """The step in two compiled calls around Clarabel (:mod:`.compiled_qp`): a StepResult
        (``full``), or ``(a, inconsistency)``; None when the Python path must take it
        (errors, a force in ``null(M)``)."""
        bufs = self._buffers(A.shape[0], G.shape[0])
        ref = self._ref_array(bufs)
        M = self._Mw if M is self._Mc else _carray(M)
        F = self._Fw if F is self._Fc else _carray(F)
        A, b, G, h = _carray(A), _carray(b), _carray(G), _carray(h)
        prep_full, prep_hot, fin = bufs.call_args(self._sref, M, F, A, b, G, h, ref)
        with self._lock:
            code, r = QS.prepare(*(prep_full if full else prep_hot))
            if code:
                return None
            return self._solve_prepared(t, bufs, r, full, QS.finish, fin, (M, F, A, b, G, h),
                                        False)

    def _rank_views(self, bufs: _Buffers, r: int) -> tuple:
        """What one solve at rank ``r`` uses: the views of the buffers (:func:`_views`),
        the scaled data as :meth:`ClarabelQP.solve_values` takes them (less ``s``), the
        arrays Clarabel's solution is written to (without inequality rows, no ``zs``:
        :func:`.compiled_qp.finish` reads only its inequality part), the backend."""
        p = bufs.p
        Pv, qv, Av, bv, Po, qo, Ao, bo, d, rinv = _views(bufs.fb, bufs.lay, self._n, r, p)
        backend = self._get_backend(r, p)
        return (Pv, qv, Av, bv, (Po, qo, Ao, bo, d, rinv), d, rinv,
                (bufs.xs, bufs.zs[:r + p] if p else None), backend)

    def _solve_prepared(self, t, bufs, r, full, finish, fin, data, shared):
        """Clarabel and ``finish(*fin, full)`` (:func:`.compiled_qp.finish` or
        :func:`.compiled_qp.finish_at`) after :func:`.compiled_qp.prepare` (inside the lock,
        which also serializes every use of the backends: they are called without their
        own lock); ``data``: the step's ``M, F, A, b, G, h``; ``shared``: ``M, F, A,
        b`` are the compiled model's buffers."""
        fb = bufs.fb
        try:
            views = bufs.views.get(r)
            if views is None:
                views = bufs.views[r] = self._rank_views(bufs, r)
            Pv, qv, Av, bv, first, d, rinv, out, backend = views
            (xs, zs, dd, rr, s, raw, iters, attempts,
             solve_time) = backend.qp._solve_values(Pv, qv, Av, bv, first, fb[_H_S], out)
        except SolverError:
            raise
        except Exception as e:  # noqa: BLE001 - the backend's own error, chained
            raise SolverError(f"QP backend {self.backend!r} failed: {type(e).__name__}: "
                              f"{e}") from e
        status = STATUS_NAMES.get(raw)
        if status is None:
            status = raw.lower()
        statuses = self.statuses
        statuses[status] = statuses.get(status, 0) + 1
        if dd is not d:                       # a fallback attempt of Clarabel's: its scaling
            d[:] = 1.0 if dd is None else dd
            fb[QS.H_S] = s
        if rr is not rinv:
            rinv[:] = 1.0 if rr is None else rr
        p = bufs.p
        code = finish(*fin, full) if not (p and status in _INFEASIBLE) else QS.DEFER
        if code:
            # the Python path from the backend's answer on: it raises, or re-solves on the
            # robust path
            M, F, A, b, G, h = data
            if shared:
                M, F, A, b = M.copy(), F.copy(), A.copy(), b.copy()
            x = xs * d
            z = ((zs * (1.0 / fb[QS.H_S])) * rinv)[r:] if p else np.zeros(0)
            ref_p = self._reference(bufs.m)
            dec = decide(M, A, b, rank_tol=self.rank_tol, ref=ref_p, sig_ref=self.sigma_ref)
            gn = np.sqrt(np.einsum("ij,ij->i", G, G)) if p else np.zeros(0)
            gn = np.where(gn > 0, gn, 1.0)
            a, lam, info = self._conclude(t, M, F, A, b, G, h, ref_p, dec, gn, fb[QS.H_WGT],
                                          fb[QS.H_SA], x, z, status, iters, solve_time,
                                          backend.name, full)
            if not full:
                return a, float(info["inconsistency"])
            return self._result(t, M, F, F, A, b, a, lam, info)
        if not full:
            return bufs.a.copy(), fb[bufs.i_rho]
        o = bufs.res.copy()                   # the results block, copied once
        sl = bufs.slices
        res = LazyStepResult(
            o[sl[0]], o[sl[2]], o[sl[3]], float(o[_R_GAUSS]), _qp_info,
            (self, o, sl, status, backend.name, iters, solve_time, r,
             np.flatnonzero(bufs.live == 0).tolist() if o[_R_DROPPED] else []))
        self._last_info = res                 # (the ``last_info`` setter, without its call)
        return res

    # ------------------------------------------------------------- Python path
    def _step(self, t, q, v, M, F, A, b, want_lam, G=None, h=None):
        if G is None:
            G, h = self.system.inequality_rows(t, q, v)
        p = G.shape[0]
        if self._check_symmetry and K.asymmetric(M):
            raise_for_status(K.NONSYMMETRIC, M=M, F=F, A=A, b=b, live=np.ones(A.shape[0], bool),
                             rank=0)
        if not (np.all(np.isfinite(M)) and np.all(np.isfinite(F)) and np.all(np.isfinite(A))
                and np.all(np.isfinite(b)) and np.all(np.isfinite(G)) and np.all(np.isfinite(h))):
            raise_for_status(K.NONFINITE, M=M, F=F, A=A, b=b, live=np.ones(A.shape[0], bool),
                             rank=0)
        ref = self._reference(A.shape[0])
        dec = decide(M, A, b, rank_tol=self.rank_tol, ref=ref, sig_ref=self.sigma_ref)
        if not dec.determinate and not p:
            raise_for_status(K.INDETERMINATE, M=M, F=F, A=A, b=b, live=dec.live, rank=dec.r,
                             coords=self.coords)
        w = dec.w
        gn = np.sqrt(np.einsum("ij,ij->i", G, G)) if p else np.zeros(0)
        gn = np.where(gn > 0, gn, 1.0)
        Gs, hs = (G / gn[:, None], h / gn) if p else (G, h)
        sa = max(float(np.linalg.norm(F)) / w, float(np.linalg.norm(dec.beta)),
                 float(np.abs(hs).max(initial=0.0)))
        sa = sa if sa > 0 and np.isfinite(sa) else 1.0
        with self._lock:
            # a backend that fails (bad settings, an exception) raises SolverError; a result
            # that is inaccurate or not optimal is re-solved on the robust path below
            try:
                backend = self._get_backend(dec.r, p)
                x, z, status, iters, solve_time = backend.solve(
                    M / w, F / (w * sa), np.ascontiguousarray(dec.Vr.T), dec.beta / sa, Gs,
                    hs / sa)
            except SolverError:
                raise
            except Exception as e:  # noqa: BLE001 - the backend's own error, chained
                raise SolverError(f"QP backend {self.backend!r} failed: {type(e).__name__}: "
                                  f"{e}") from e
            self.statuses[status] = self.statuses.get(status, 0) + 1
        return self._conclude(t, M, F, A, b, G, h, ref, dec, gn, w, sa, x, z, status, iters,
                              solve_time, getattr(backend, "name", self.backend), want_lam)

    def _conclude(self, t, M, F, A, b, G, h, ref, dec, gn, w, sa, x, z, status, iters,
                  solve_time, backend_name, want_lam):
        """From the backend's answer ``x``, ``z`` (of the problem scaled by ``w`` and
        ``sa``) to the verified step: the robust path when it fails its verification."""
        p = G.shape[0]
        if status in _INFEASIBLE and p:
            res = inconsistency_residual(np.vstack([A, G]), np.concatenate([b, h]))
            raise InconsistentConstraintsError(
                f"The QP is infeasible at t={t}: no acceleration satisfies the equality rows and "
                f"the inequality rows G a >= h together (backend status {status!r}).",
                residual=res)
        info = {"status": status, "backend": backend_name,
                "iterations": iters, "solve_time": solve_time, "fallback": False}
        a = mu = None
        if x is not None and np.all(np.isfinite(x)):
            a = sa * np.asarray(x, dtype=float)
            mu = (w * sa * np.maximum(np.asarray(z, dtype=float), 0.0) / gn) if p else np.zeros(0)
            if dec.determinate:
                # polish (as :func:`.compiled_qp.finish`): the closed form with the inequality
                # forces fixed, exact to rounding; verified below like the raw answer
                a = dec.closed_form(M, F + G.T @ mu if p else F)
            be = self._verify(M, F, A, b, G, h, ref, dec, a, mu)
            if be > self.verify_tol:
                a = None
            else:
                info["backward_error"] = be
        if a is None:
            # the robust path
            a, mu, be = self._robust(t, M, F, A, b, G, h, ref, dec, z, gn)
            info.update(fallback=True, backward_error=be)
            self.fallbacks += 1
        Feff = F + G.T @ mu if p else F
        status_k, rho, allow, be_k = dec.check(M, Feff, A, b, ref, self.rank_tol, a)
        if status_k != K.OK:
            raise_for_status(status_k, M=M, F=F, A=A, b=b, live=dec.live, rank=dec.r, rho=rho,
                             allow=allow, coords=self.coords, solver=self.name)
        lam = dec.multipliers(M, Feff, a, A) if want_lam else np.zeros(A.shape[0])
        info.update({"rank": dec.r, "sigma": dec.s,
                     "sigma_min": float(dec.s[dec.r - 1]) if dec.r else 1.0,
                     "dropped_rows": np.flatnonzero(~dec.live).tolist(),
                     "inconsistency": float(rho), "least_squares": bool(rho > np.sqrt(self.rank_tol)),
                     "kept_vanished_rows": dec.kept_vanished, "inequality_multipliers": mu})
        return a, lam, info

    def _verify(self, M, F, A, b, G, h, ref, dec, a, mu) -> float:
        """Backward error of a QP result (equality part with the inequality forces as
        applied forces, plus the inequality rows' feasibility and complementarity)."""
        Feff = F + G.T @ mu if G.shape[0] else F
        be = dec.verify(M, Feff, a)
        if G.shape[0]:
            # inequality rows, in dimensionless form: slack relative to |G_i| |a| + |h_i|, force
            # share mu_i |G_i| relative to |M a| + |F|; violation and complementarity
            gnorm = np.sqrt(np.einsum("ij,ij->i", G, G))
            sn = (G @ a - h) / np.maximum(gnorm * float(np.linalg.norm(a)) + np.abs(h), 1e-300)
            fn = mu * gnorm / (float(np.linalg.norm(M @ a)) + float(np.linalg.norm(F)) + 1e-300)
            be = max(be, float(np.max(np.maximum(-sn, 0.0))), float(np.max(np.abs(fn * sn))))
        return be

    def _robust(self, t, M, F, A, b, G, h, ref, dec, z, gn):
        """Closed form on the equality rows (plus the QP's active inequality rows)."""
        tol = K.direct_tolerance(self._n, A.shape[0] + G.shape[0])
        p = G.shape[0]
        if not p:
            if not dec.determinate:
                raise_for_status(K.INDETERMINATE, M=M, F=F, A=A, b=b, live=dec.live,
                                 rank=dec.r, coords=self.coords)
            a = dec.closed_form(M, F)
            be = dec.verify(M, F, a)
            if be > tol:
                raise SolverError(f"solver 'qp' at t={t}: the QP result and the closed form both "
                                  f"fail their verification (backward error {be:.3g}).")
            return a, np.zeros(0), be
        # active set from the QP's duals (or, failing those, from the unconstrained step)
        if z is not None and np.all(np.isfinite(z)):
            zz = np.asarray(z, dtype=float)
            active = zz > 1e-8 * max(float(zz.max(initial=0.0)), 1e-300)
        else:
            active = np.zeros(p, dtype=bool)
        for _ in range(p + 1):
            Aa = np.vstack([A, G[active]])
            ba = np.concatenate([b, h[active]])
            sol = solve_gauss(M, F, Aa, ba, rank_tol=self.rank_tol, want_multipliers=True,
                              check_symmetry=False, coords=self.coords)
            mu = np.zeros(p)
            mu[active] = sol.lam[A.shape[0]:]
            slack = G @ sol.a - h
            scale = np.sqrt(np.einsum("ij,ij->i", G, G)) * float(np.linalg.norm(sol.a)) + np.abs(h)
            bad_in = active & (mu < -tol * (np.abs(mu).max(initial=0.0) + 1e-300))
            bad_out = ~active & (slack < -tol * np.maximum(scale, 1e-300))
            if not (bad_in.any() or bad_out.any()):
                return sol.a, np.maximum(mu, 0.0), sol.backward_error
            # one active-set change per round: drop the most negative multiplier, else add
            # the most violated row
            if bad_in.any():
                active[np.argmin(np.where(bad_in, mu, np.inf))] = False
            else:
                active[np.argmin(np.where(bad_out, slack / np.maximum(scale, 1e-300), np.inf))] = True
        raise SolverError(f"solver 'qp' at t={t}: the QP result failed its verification and the "
                          "active-set re-solve did not converge.")

    def run_stats(self) -> dict:
        sq = self._sq[1] if self._sq is not None else None
        out = {"qp_statuses": dict(self.statuses), "qp_fallbacks": self.fallbacks,
               "qp_sparse_steps": sq.steps if sq is not None else 0}
        return out

    def compiled_units(self) -> list:
        """:meth:`StepSolver.compiled_units`: the compiled calls around the backend (those
        of a compiled model when the system has one) and the rank decision of the Python
        path."""
        if self.backend != "clarabel":
            return [K.decide]
        if getattr(self.system, "compiled", None) is not None:
            return [QS.make_context, QS.prepare_at, QS.finish_at, K.decide]
        return [QS.prepare, QS.finish, K.decide]

