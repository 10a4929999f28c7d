"""Base class of the step solvers: shared bookkeeping, objective handling, checks.

A step solver is built once per system (``solver = SOLVERS[name](system,
**options)``) and then evaluated many times: :meth:`StepSolver.acceleration`
is the hot path used inside integrators, :meth:`StepSolver.solve` returns the
full :class:`~gaussopt.core.result.StepResult`. Every solver works on the *same*
rank decision (:func:`gaussopt.gauss.solution.decide`, made once per step) and every
result is verified against the optimality conditions before it is returned
(:mod:`gaussopt.gauss.dense_step`); a subclass implements only ``_step(t, q, v, M, F,
A, b, want_lam) -> (a, lam, info)``.
"""

from __future__ import annotations

import math
import threading
import warnings
from typing import Callable, Optional

import numpy as np
from numba import config as nb_config

import gaussopt.gauss.model_step as MS
import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
import gaussopt.gauss.dense_algebra as LA
import gaussopt.gauss.band_step as SP
from gaussopt.model.model_functions import model_functions
from gaussopt.gauss.compiled_step import (N_SCALARS, NOTED, NULL_FORCE_RTOL, S_DROPPED,
                                          S_GAUSS, S_NULLF, S_RHO, entry_point, layout,
                                          make_context, solve_at, solve_batch)
from gaussopt.core.exceptions import (GaussoptError, ModelError, ObjectiveMismatchWarning,
                                      SolverError, UnsupportedConstraintError)
from gaussopt.gauss.solution import (DEFAULT_RANK_TOL, mass_scale, range_projector, solve_gauss,
                                     workspace)
from gaussopt.core.result import DirectStepResult, LazyStepResult, StepResult
from gaussopt.core.status import CALLBACK
import gaussopt.core.records as R
from gaussopt.model.system import System

__all__ = ["StepSolver", "OBJECTIVES"]

OBJECTIVES = ("exact", "paper")
#: the fewest states a thread of a batched step takes (a thread costs ~50 us to start)
BATCH_PER_THREAD = 500
_F64 = np.dtype(np.float64)
_S8 = (_F64.itemsize,)           # the strides of a contiguous vector of them
#: what :meth:`StepSolver._make_direct`'s function returns for arguments of other types
#: than those it was compiled for (the caller then takes the checked path)
NOT_TAKEN = object()


def _compiled_info(solver, o, ss, r, k, rho, be, flags, resid, dropped, lsq) -> dict:
    """``StepResult.info`` of the compiled step, from its output scalars (built on first
    access: :class:`gaussopt.core.result.LazyStepResult`)."""
    r = int(r)
    flags = int(flags)
    sigma = o[ss][:int(k)]
    on_sparse = bool(flags & (SP.SPARSE_FLAG | SP.TREE_FLAG))   # rank certified, sigma_min estimated
    return {"rank": r, "sigma_min": float(sigma[0] if on_sparse else sigma[r - 1]) if r else 1.0,
            "sigma": sigma, "dropped_rows": dropped or [], "sparse": on_sparse,
            "recursive": bool(flags & SP.TREE_FLAG),
            "inconsistency": rho, "least_squares": lsq, "backward_error": be,
            "fallback": bool(flags & 1), "kept_vanished_rows": bool(flags & 2),
            "solver": solver.name, "rank_tol": solver.rank_tol, "residual": resid}


def _direct_info(solver, o, ss, sc, dropped) -> dict:
    """:func:`_compiled_info` from the output ``o`` of the compiled step (its scalars from
    index ``sc``): ``info`` of :meth:`StepSolver.solve_checked`'s results."""
    r, k, rho, _, be, flags, _, resid, _, _ = o[sc:sc + N_SCALARS].tolist()
    return _compiled_info(solver, o, ss, r, k, rho, be, flags, resid, dropped,
                          rho > solver._root)


class StepSolver:
    """Common machinery of every step solver.

    Parameters
    ----------
    system : System
    objective : {"exact", "paper"}, default "exact"
        ``"exact"`` minimizes ``0.5 a^T M a - a^T F`` (the KKT conditions are
        Lagrange's equations of the first kind; correct for singular ``M``).
        ``"paper"`` minimizes paper 001's ``(M a - F)^T M^+ (M a - F)``, which
        equals the exact objective with ``F`` replaced by ``M M^+ F``: it drops
        the part of ``F`` acting in ``null(M)``. When the two give different
        accelerations (``N^T (I - M M^+) F != 0``, ``N`` a basis of
        ``null(A)``) an :class:`~gaussopt.core.exceptions.ObjectiveMismatchWarning`
        is issued (checked whenever ``M`` is constant, and at every step in
        ``"paper"`` mode) and ``info["objective_mismatch"]`` gives
        ``|a_exact - a_paper|``.
    rank_tol : float, default 1e-8
        Relative tolerance of all rank decisions (see :mod:`gaussopt.gauss.solution`).
    row_scale : array_like, shape (m,), optional
        Fixed reference scale of each constraint row for the vanishing-row
        test. Default: inside :func:`~gaussopt.simulate`, the largest norm the
        row has shown at an accepted state of the run; in a single
        :func:`~gaussopt.solve_step`, none (only exactly-zero rows vanish).

    Notes
    -----
    ``StepResult.info`` reports the shared rank decision (``rank``,
    ``sigma`` the singular values of the live row-normalized rows,
    ``sigma_min``, ``dropped_rows``), the verification (``backward_error``,
    ``fallback``: the solver's own result failed and the closed form was used)
    and ``inconsistency``/``least_squares`` (see :mod:`gaussopt.gauss.solution`).
    ``sparse``: the step was answered by the O(n) path of :mod:`gaussopt.gauss.band_step`
    (large multibody models: full rank certified, so ``rank = m``; ``sigma`` then
    holds only ``sigma_min``, an estimate from above).
    Solvers are safe to call from several threads on one system.
    """

    name = "base"
    supports_inequalities = False
    #: kernel method of the direct solvers (None: the solver solves the reduced problem itself)
    _method: Optional[int] = None

    def __init__(self, system: System, *, objective: str = "exact",
                 rank_tol: float = DEFAULT_RANK_TOL, row_scale=None) -> None:
        if not isinstance(system, System):
            raise ModelError(f"`system` must be a gaussopt.System, found {type(system).__name__}.")
        if objective not in OBJECTIVES:
            raise ModelError(f"`objective` must be one of {OBJECTIVES}, found {objective!r}.")
        if not (isinstance(rank_tol, (int, float, np.floating)) and np.isfinite(rank_tol)
                and 0 < rank_tol < 1):
            raise ModelError(f"`rank_tol` must be in (0, 1), found {rank_tol!r}.")
        if system.contacts:
            raise UnsupportedConstraintError(
                f"a step solver does not decide the state of the Contact constraints "
                f"{[c.name for c in system.contacts]} (open, closed, impacting): gaussopt.simulate "
                "runs a system with contacts phase by phase; for one state's contact forces use "
                "gaussopt.gauss.contact_problem.solve_contact.")
        if system.inequalities and not self.supports_inequalities:
            raise UnsupportedConstraintError(
                f"solver {self.name!r} cannot treat the Inequality constraints "
                f"{[c.name for c in system.inequalities]}; use solver='qp'.")
        self.system = system
        self.objective = objective
        self.rank_tol = float(rank_tol)
        self._root = math.sqrt(self.rank_tol)   # inconsistency above it: a least-squares step
        self._fixed_ref = None
        if row_scale is not None:
            ref = np.asarray(row_scale, dtype=float).ravel()
            if not np.all(np.isfinite(ref)) or np.any(ref <= 0):
                raise ModelError(f"`row_scale` must be positive and finite, found {row_scale!r}.")
            if system.m is not None and ref.shape != (system.m,):
                raise ModelError(f"`row_scale` must have one entry per constraint row, shape "
                                 f"({system.m},), found {ref.shape}.")
            self._fixed_ref = ref
        self.row_ref: Optional[np.ndarray] = self._fixed_ref
        self._sref = np.zeros(1)           # sigma_ref, shared with the compiled engine
        self.coords = list(system.coordinates)
        self._n = system.n
        self._lock = threading.RLock()
        # set-up work done once
        self._w_const: Optional[float] = None
        self._P_const: Optional[np.ndarray] = None      # projector M M^+ (constant singular M)
        self._null_force_check = False
        self._check_symmetry = system.constant_mass is None
        Mc = system.constant_mass
        if Mc is not None:
            self._w_const = mass_scale(Mc)
            P, r = range_projector(Mc)
            if r < self._n:
                self._P_const = P
                self._null_force_check = True
        self.last_info = {}
        self._ctx = None                    # the compiled step's context (point.py), lazily
        self._entry = None                  # point.solve_at's compiled function (entry_point)
        self._thread_ctx: list = []         # more contexts for the threads of a batch
        self._mismatch_warned = False
        self.least_squares_steps: list = []

    # ------------------------------------------------------------- row reference
    @property
    def last_info(self) -> dict:
        """``info`` of the last step solved."""
        li = self._last_info
        return li if type(li) is dict else li.info

    @last_info.setter
    def last_info(self, value) -> None:
        self._last_info = value

    @property
    def sigma_ref(self) -> float:
        """Reference of the smallest singular value of the normalized rows (the largest
        it has been at accepted states; :data:`gaussopt.gauss.dense_step.FOLD_TOL`)."""
        return float(self._sref[0])

    @sigma_ref.setter
    def sigma_ref(self, value: float) -> None:
        self._sref[0] = value

    def inconsistent_rows(self, t, q, v) -> list:
        """Rows with the largest share of the inconsistent part of ``bn`` at ``(t, q, v)``
        (the rows a least-squares step concerned)."""
        from gaussopt.gauss.solution import decide

        M, F, A, b = self.system.evaluate(t, q, v)
        dec = decide(M, A, b, rank_tol=self.rank_tol, ref=self._reference(A.shape[0]),
                     sig_ref=self.sigma_ref)
        res = dec.bn - dec.Ur @ (dec.Ur.T @ dec.bn)
        live = np.flatnonzero(dec.live)
        return (live[np.abs(res) >= 0.3 * np.abs(res).max()] if res.size else live[:0]).tolist()

    def accept(self, A: np.ndarray) -> None:
        """Register the rows ``A`` of an *accepted* state (trial stages of an
        integrator never call this): the reference scale of each row becomes the
        largest norm it has shown at accepted states (unless ``row_scale`` fixes
        it), and the reference of the smallest singular value of the normalized
        rows the largest it has been (:data:`gaussopt.gauss.dense_step.FOLD_TOL`)."""
        if A.shape[0] == 0:
            return
        A = np.array(A, dtype=float)
        sl = (float(K.smallest_live_sigma(A, self.rank_tol, workspace(A.shape[1], A.shape[0])))
              if np.all(np.isfinite(A)) else 0.0)
        if np.isfinite(sl) and sl > self._sref[0]:
            self._sref[0] = sl
        if self._fixed_ref is not None:
            return
        nu = np.empty(A.shape[0])
        LA.row_norms(A, nu)
        if self.row_ref is None or self.row_ref.shape != nu.shape:
            self.row_ref = nu
        else:
            np.maximum(self.row_ref, nu, out=self.row_ref)

    def reset_reference(self) -> None:
        """Forget the running references (back to the fixed ``row_scale`` or none)."""
        self.row_ref = None if self._fixed_ref is None else self._fixed_ref.copy()
        self._sref[0] = 0.0

    def _reference(self, m: int) -> Optional[np.ndarray]:
        ref = self.row_ref
        if ref is not None and ref.shape != (m,):
            raise ModelError(f"`row_scale` must have one entry per constraint row, shape ({m},), "
                             f"found {ref.shape}.")
        return ref

    # ------------------------------------------------------------- evaluation
    def _prepare(self, t, q, v):
        """Evaluate ``M, F, A, b`` (shapes checked) and apply the ``b`` hook."""
        M, F, A, b = self.system.evaluate(t, q, v)
        if self.b_correction is not None:
            b = b + self.b_correction(t, q, v, A)
        return M, F, A, b

    #: optional hook ``(t, q, v, A) -> db`` added to ``b`` (Baumgarte stabilization)
    b_correction: Optional[Callable] = None

    def _objective_force(self, M, F):
        """Force entering the objective: ``F`` or ``M M^+ F``; also returns the
        dropped null-space part ``d`` (or None when it is zero/unknown)."""
        if self.objective == "exact" and not self._null_force_check:
            return F, None
        if self._P_const is not None:
            P = self._P_const
        elif self.system.constant_mass is not None:
            return F, None                          # constant regular M: P = I
        else:
            P, r = range_projector(M)
            if r == self._n:
                return F, None
        PF = P @ F
        d = F - PF
        if float(np.abs(d).max(initial=0.0)) <= 1e-14 * max(float(np.abs(F).max(initial=0.0)), 1e-300):
            d = None
        return (PF if self.objective == "paper" else F), d

    def _w(self, M) -> float:
        return self._w_const if self._w_const is not None else mass_scale(M)

    def _check_mismatch(self, M, A, d, a) -> float:
        """``|a_exact - a_paper|`` caused by the null-space force ``d``; warns once."""
        if d is None:
            return 0.0
        sol = solve_gauss(M, d, A, np.zeros(A.shape[0]), rank_tol=self.rank_tol,
                          want_multipliers=False, check_symmetry=False, coords=self.coords)
        da = float(np.sqrt(sol.a @ sol.a))
        scale = float(np.sqrt(a @ a)) + 1e-300
        if da > 1e-9 * scale and not self._mismatch_warned:
            self._mismatch_warned = True
            warnings.warn(
                "objective='exact' and objective='paper' give different accelerations here "
                f"(|a_exact - a_paper| = {da:.3g}, |a| = {scale:.3g}): the applied force has a "
                "component in null(M) that the constraints do not balance, which paper 001's "
                "M^+-weighted Gauss function ignores. 'exact' is the Lagrange-I motion.",
                ObjectiveMismatchWarning, stacklevel=4)
        return da

    # ------------------------------------------------------------- interface
    def _step(self, t, q, v, M, F, A, b, want_lam: bool) -> tuple[np.ndarray, np.ndarray, dict]:
        """Solve one verified step; the direct solvers go through the kernel."""
        sol = solve_gauss(M, F, A, b, rank_tol=self.rank_tol, ref=self._reference(A.shape[0]),
                          sig_ref=self.sigma_ref, method=self._method, want_multipliers=want_lam,
                          check_symmetry=self._check_symmetry, coords=self.coords,
                          mass_tree=getattr(self.system, "mass_tree", None))
        if want_lam:
            return sol.a, sol.lam, sol.info()
        return sol.a, sol.lam, {"least_squares": sol.least_squares,
                                "inconsistency": sol.inconsistency}

    def solve(self, t: float, q: np.ndarray, v: np.ndarray) -> StepResult:
        """Solve one step at ``(t, q, v)`` and return the full :class:`StepResult`."""
        if self._method is not None:
            res = self._solve_compiled(t, q, v, True)
            if res is not None:
                return res
        return self._python_result(t, q, v, *self._prepare(t, q, v))

    def multipliers(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The multipliers of the step at ``(t, q, v)``, solved and verified as by
        :meth:`solve`, without the diagnostics of its :class:`StepResult` (constraint force,
        Gauss value, residual, the objective's mismatch): the hot path of a contact phase's
        force watches, which evaluate the multipliers at every step."""
        if self._method is not None:
            res = self._solve_compiled(t, q, v, True)
            if res is not None:
                return res.multipliers
        M, F, A, b = self._prepare(t, q, v)
        Fobj, _ = self._objective_force(M, F)
        a, lam, _ = self._step(t, q, v, M, Fobj, A, b, True)
        if not np.all(np.isfinite(a)):
            raise SolverError(f"solver {self.name!r} produced non-finite accelerations at t={t}.")
        return lam

    def _python_result(self, t, q, v, M, F, A, b, *extra) -> StepResult:
        """The Python path's StepResult on evaluated data (``extra``: what the solver's
        ``_step`` takes after ``want_lam``)."""
        Fobj, d = self._objective_force(M, F)
        a, lam, info = self._step(t, q, v, M, Fobj, A, b, True, *extra)
        return self._result(t, M, F, Fobj, A, b, a, lam, info, d)

    def _result(self, t, M, F, Fobj, A, b, a, lam, info, d=None) -> StepResult:
        """StepResult from a solved step: the diagnostics (residual, constraint force,
        Gauss value, objective mismatch for ``d`` not None) added to ``info``."""
        if not np.all(np.isfinite(a)):
            raise SolverError(f"solver {self.name!r} produced non-finite accelerations at t={t}.")
        info = dict(info)
        info.setdefault("solver", self.name)
        info.setdefault("sparse", False)
        info["rank_tol"] = self.rank_tol
        info["residual"] = float(np.abs(A @ a - b).max(initial=0.0))
        if d is not None:
            info["objective_mismatch"] = self._check_mismatch(M, A, d, a)
        Qc = M @ a - F
        gauss = float(0.5 * a @ (M @ a) - a @ Fobj)
        self.last_info = info
        return StepResult(a=a, constraint_force=Qc, multipliers=lam, gauss=gauss, info=info)

    def acceleration(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Hot path: accelerations only (no multipliers, constraint force, Gauss value,
        residual or objective-mismatch diagnostics); verified all the same."""
        if self._method is not None:
            fast = self._direct_a
            if fast is not None:
                a = fast(t, q, v)
                if a is not None and a is not NOT_TAKEN:
                    return a
            a = self._solve_compiled(t, q, v, False)
            if a is not None:
                if fast is None and self._entry is not None and self._ctx:
                    self._direct_a = self._make_direct(False)
                return a
        M, F, A, b = self._prepare(t, q, v)
        if self.objective == "paper":
            F, _ = self._objective_force(M, F)
        a, _, info = self._step(t, q, v, M, F, A, b, False)
        if info.get("least_squares"):
            self._record_least_squares(t, q, v, A, b, float(info["inconsistency"]))
        return a

    # ------------------------------------------------------------- compiled path
    def _context(self):
        """The compiled step's context (:mod:`gaussopt.gauss.compiled_step`), built on first use, or
        None when the step has to run in Python: a model without compiled functions,
        the ``"paper"`` objective, a ``b`` hook (Baumgarte), rows not yet counted."""
        ctx = self._ctx
        if ctx is not None:
            return ctx if ctx is not False and self.b_correction is None else None
        system = self.system
        if system._row_counts is None or self.b_correction is not None:
            return None
        # (a system of Python functions too when it has the O(n) path: its steps then
        # cost O(n) in compiled code around the callbacks, not an SVD of the rows)
        if ((getattr(system, "compiled", None) is None
             and not getattr(getattr(system, "sparse", None), "python", False)
             and not self._callbacks)
                or self.objective != "exact" or system.inequalities):
            self._ctx = False
            return None
        self._ctx = ctx = self._new_context()
        return ctx

    def _new_context(self):
        """A compiled step context with buffers and workspace of its own (one per thread),
        with the O(n) path of :mod:`gaussopt.gauss.band_step` if the system has one
        (:func:`gaussopt.gauss.model_step.model_data`; its :class:`~gaussopt.gauss.band_step.Band`
        is the tuple's last entry, :meth:`band_work`)."""
        mf = model_functions(self.system)
        n, m = self.system.n, mf.m
        oi = np.zeros(R.N_OI, dtype=np.int64)      # (the engine's option record, whole)
        of = np.zeros(R.N_OF)
        oi[MS.I_SOLVER] = self._method
        oi[MS.I_CHECKSYM] = int(self._check_symmetry)
        of[MS.F_RANKTOL] = self.rank_tol
        P = self._P_const if self._P_const is not None else np.zeros((0, 0))
        out = np.zeros(layout(n, m)[4] + N_SCALARS)
        work = K.make_work(n, m, getattr(self.system, "mass_tree", None))
        data = MS.model_data(mf, self.system)
        handle = make_context(
            mf.addrs, MS.pack(data),
            MS.pack(MS.buffers(mf)), MS.pack(MS.Options(oi, of)),
            self._sref,
            work, np.ascontiguousarray(P, dtype=float), out)
        lay = layout(n, m)
        return (handle, mf, out, lay, np.zeros(m), n, m, work, out[lay[4]:], data.band)

    def band_work(self):
        """The work arrays of the O(n) band step inside this solver's compiled step
        (:class:`gaussopt.gauss.band_step.SparseWork`; after a step the band answered they
        hold the model's sparse data at its state: the mass blocks ``d``, ``F``, the rows'
        values ``data`` in the model's pattern, ``b``), or None (no band path, or no
        compiled step yet). The QP's sparse path (:mod:`.qp.sparse_qp`) reads them
        instead of evaluating the model a second time."""
        ctx = self._ctx
        if not ctx or ctx[9].mode not in (SP.MODE_STEP, SP.MODE_PROJECT):
            return None
        return SP.band_work(ctx[9])

    def solve_checked(self, t: float, q: np.ndarray, v: np.ndarray) -> Optional[StepResult]:
        """:meth:`solve` for arguments that :func:`~gaussopt.solve_step` has checked (``t`` a
        finite float, ``q`` and ``v`` C-contiguous float64 arrays of shape (n,), the system
        compiled): the StepResult through the compiled step, or None when :meth:`solve`
        must take it (then it raises the specific error, or takes the Python path).

        After its first clean step, the compiled step is called with what
        :meth:`_solve_compiled` found out once (the context, the compiled function for
        the arguments' types, the layout of its output): a call costs the compiled step
        plus copying its output (``benchmarks/stepper.py`` measures both)."""
        fast = self._direct
        if fast is not None:
            res = fast(t, q, v)
            if res is not NOT_TAKEN:
                return res
            return self._solve_compiled(t, q, v, True, True)
        if self._method is not None and type(self).solve is StepSolver.solve:
            res = self._solve_compiled(t, q, v, True, True)
            if res is not None and self._entry is not None and self._ctx:
                self._direct = self._make_direct()
            return res
        return self._solve_checked(t, q, v)

    def _make_direct(self, full: bool = True):
        """What :meth:`solve_checked` (``full``) and :meth:`acceleration` (not ``full``) call
        after their first clean step: a function of ``(t, q, v)`` holding what
        :meth:`_solve_compiled` found out once (the context, the compiled function for the
        arguments' types, the layout of its output), which checks the arguments' types
        itself (:data:`NOT_TAKEN` where they are others). A call costs the compiled step,
        copying its output and making the :class:`~gaussopt.core.result.DirectStepResult`
        (``full``; else copying the accelerations); everything else is bound here
        (``benchmarks/stepper.py`` measures the difference)."""
        call = self._entry
        handle, _, out, (sa, sq, sl, ss, sc), zero_ref, n, m, work, _, _ = self._ctx
        where = (sq, sl, sc + S_GAUSS)
        i_dropped, i_nullf, i_rho = sc + S_DROPPED, sc + S_NULLF, sc + S_RHO
        acquire, release = self._lock.acquire, self._lock.release
        compiled = self._solve_compiled
        shape, array, inf = (n,), np.ndarray, math.inf
        new, cls = object.__new__, DirectStepResult
        root = self._root

        def direct(t, q, v):
            # the arguments the compiled function was called with once, exactly (it is
            # called below without numba's checks of their types): ``t`` a finite float,
            # ``q`` and ``v`` contiguous float64 vectors of shape (n,) (strides (8,))
            if not (type(t) is float and type(q) is array and type(v) is array
                    and q.dtype is _F64 and v.dtype is _F64 and q.strides == _S8
                    and v.strides == _S8 and q.shape == shape and v.shape == shape
                    and -inf < t < inf):
                return NOT_TAKEN
            ref = self.row_ref
            if ref is None:
                ref = zero_ref
            elif ref is not self._direct_ref:
                # (a new array: the compiled function is called without numba's checks of
                # the types, so it must be a C-contiguous float64 array of shape (m,))
                if not (type(ref) is np.ndarray and ref.dtype is _F64 and ref.shape == (m,)
                        and ref.flags.c_contiguous):
                    return compiled(t, q, v, full, True)
                self._direct_ref = ref
            if self.b_correction is not None:
                return compiled(t, q, v, full, True)
            acquire()
            try:
                status = call(handle, ref, t, q, v, full)
                if status != 0 and status != NOTED:
                    o = None
                elif not full:
                    o = out[sa].copy()
                    rho = out.item(i_rho)
                    nullf = out.item(i_nullf) if status == NOTED else 0.0
                else:
                    o = out.copy()
                    # (the rows dropped are read now: the workspace is the next call's;
                    # the other scalars when ``info`` is first read, :func:`_direct_info`)
                    dropped = (np.flatnonzero(WS.view(work, "live", m) == 0).tolist()
                               if status == NOTED and o.item(i_dropped) else 0)
            finally:
                release()
            if o is None:
                return compiled(t, q, v, full, True)       # (it says why)
            if not full:
                if nullf > NULL_FORCE_RTOL:
                    return None               # the objective-mismatch check runs in Python
                if rho > root:
                    self._record_least_squares(t, q, v, *self.system.rows(t, q, v), rho)
                return o
            if status == NOTED and o.item(i_nullf) > NULL_FORCE_RTOL:
                return None                   # the objective-mismatch check runs in Python
            # (no constructor call: 0.1 us of a 3.5 us solve_step)
            res = self._last_info = new(cls)
            res.a = o[sa]
            res._o = o
            res._where = where
            res._make_info = _direct_info
            res._info_args = (self, o, ss, sc, dropped)
            return res
        return direct

    #: the compiled step also for a system of Python functions (:meth:`take_compiled_step`)
    _callbacks = False

    def take_compiled_step(self) -> None:
        """Solve through the compiled step also where the system's functions are Python
        callables (called back from it), as the engine does in a run, instead of the
        Python path that :func:`~gaussopt.solve_step` takes for them (which reports a
        model's own exception with its traceback; the compiled step falls back to it on
        any failure, so errors still read the same). For the hot loops of a run: the
        contact phase's force watches, two evaluations per step, cost 36 instead of 70 us
        each on the rolling ellipse of ``benchmarks/run.py --only contact`` (118 of them
        timed inside its 2.5 s run)."""
        if not self._callbacks:
            self._callbacks = True
            if self._ctx is False:
                self._ctx = None

    #: what :meth:`solve_checked` calls after its first clean step (None: not yet;
    #: :meth:`_make_direct`)
    _direct = None
    _direct_ref = None
    #: what :meth:`acceleration` calls after its first clean compiled step (None: not yet)
    _direct_a = None

    # ------------------------------------------------------------- what a run asks
    @property
    def runs_in_python(self) -> bool:
        """The solver's steps run in Python (the QP, the GA, the paper objective): the
        compiled engine calls :meth:`acceleration` back."""
        return self._method is None or self.objective == "paper"

    @property
    def compiled_method(self) -> int:
        """How the compiled engine solves this solver's steps: its own
        (:data:`gaussopt.core.status.CLOSED_FORM`, :data:`~gaussopt.core.status.LAGRANGE`),
        or :data:`~gaussopt.core.status.CALLBACK` for a solver that runs in Python."""
        return CALLBACK if self.runs_in_python else int(self._method)

    def begin_run(self, t: float, q: np.ndarray, v: np.ndarray,
                  b_correction: Optional[Callable] = None) -> None:
        """Start a run at ``(t, q, v)``: the references of earlier runs are forgotten (back
        to ``row_scale``), the rows at the initial state are the first accepted ones
        (:meth:`accept`), :attr:`least_squares_steps` is emptied, and ``b_correction``
        (Baumgarte's ``(t, q, v, A) -> db``, or None) is added to every step's ``b``."""
        self.reset_reference()
        m = self.system.m or 0
        if m:
            self.accept(self.system.rows(t, q, v)[0])
        if self.row_ref is None:
            self.row_ref = np.zeros(m)
        self.least_squares_steps.clear()
        self.b_correction = b_correction

    def engine_references(self) -> tuple[np.ndarray, np.ndarray]:
        """``(row_ref, sigma_ref)``: the arrays of the running references (one entry per
        row; one entry) that the compiled engine shares with this solver and updates at
        accepted states (after :meth:`begin_run`)."""
        m = self.system.m or 0
        ref = self.row_ref if self.row_ref is not None else np.zeros(m)
        return ref, self._sref

    def _solve_checked(self, t, q, v):
        """:meth:`solve` through a solver's own compiled path, for arguments that
        :meth:`solve_checked` has made sure of (a solver with its own compiled path
        overrides it): the StepResult, or None (then :meth:`solve` takes it). None here;
        :class:`~gaussopt.gauss.solvers.QP` has one."""
        return None

    def _solve_compiled(self, t, q, v, full: bool, checked: bool = False):
        """The step through :func:`gaussopt.gauss.compiled_step.solve_at`: a StepResult (``full``) or the
        accelerations; None when the Python path must take it (no compiled model, or
        anything but a clean success: the Python path raises the specific error).
        ``checked``: ``t`` is a float, ``q`` and ``v`` are known to be contiguous float arrays
        of shape (n,)."""
        ctx = self._ctx
        if ctx is None or ctx is False or self.b_correction is not None:
            ctx = self._context()
            if ctx is None:
                return None
        handle, mf, out, (sa, sq, sl, ss, sc), zero_ref, n, m, work, scalars, _ = ctx
        if not checked and not (
                type(q) is np.ndarray and type(v) is np.ndarray and q.dtype == np.float64
                and v.dtype == np.float64 and q.shape == (n,) and v.shape == (n,)
                and q.flags.c_contiguous and v.flags.c_contiguous):
            q = np.ascontiguousarray(q, dtype=float)
            v = np.ascontiguousarray(v, dtype=float)
            if q.shape != (n,) or v.shape != (n,):
                return None
        ref = self.row_ref
        fast = self._entry
        if ref is None:
            ref = zero_ref
        elif ref.shape != (m,):
            return None
        elif fast is not None and not (type(ref) is np.ndarray and ref.dtype is _F64
                                       and ref.flags.c_contiguous):
            fast = None                       # the dispatcher types (and converts) it
        if not checked:
            t = float(t)
        with self._lock:
            if fast is not None:
                # every argument has the types of the first call (StepContext, float64
                # C arrays, float, bool): the compiled function without the typing
                status = fast(handle, ref, t, q, v, full)
            else:
                status = solve_at(handle, ref, t, q, v, full)
                if status <= 0 and self._entry is None:
                    self._entry = entry_point(solve_at, (handle, zero_ref, t, q, v, full))
            if status > 0:
                if status == K.NONFINITE:
                    for x, label in ((q, "q"), (v, "v")):
                        if not np.all(np.isfinite(x)):
                            raise ModelError(f"`{label}` contains NaN or inf: {x}.")
                return None
            o = out.copy()
            r, k, rho, _, be, flags, gauss, resid, nullf, dropped = scalars.tolist()
            if full and dropped:
                dropped = np.flatnonzero(WS.view(work, "live", m) == 0).tolist()
        if nullf > NULL_FORCE_RTOL:
            return None                       # the objective-mismatch check runs in Python
        lsq = rho > self._root
        if not full:
            if lsq:
                self._record_least_squares(t, q, v, *self.system.rows(t, q, v), rho)
            return o[sa]
        res = LazyStepResult(o[sa], o[sq], o[sl], gauss, _compiled_info,
                             (self, o, ss, r, k, rho, be, flags, resid, dropped, lsq))
        self.last_info = res
        return res

    def solve_many(self, T: np.ndarray, Q: np.ndarray, V: np.ndarray,
                   want_lam: bool) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """:meth:`solve` at every ``(T[i], Q[i], V[i])`` (validated float arrays, ``Q`` and
        ``V`` C-contiguous of shape (B, n)): the accelerations (B, n) and, if ``want_lam``,
        the multipliers (B, m). A compiled model takes one compiled loop over the states
        (:func:`gaussopt.gauss.compiled_step.solve_batch`); a state it does not settle cleanly, and every
        state of a model without compiled functions, goes through :meth:`solve`, so each
        row is what :meth:`solve` gives (the same code decides)."""
        B, n = Q.shape
        acc = np.empty((B, n))
        lam = None
        todo = range(B)
        ctx = self._context() if self._method is not None and B else None
        if ctx is not None:
            m = ctx[6]
            ref = self.row_ref if self.row_ref is not None else ctx[4]
            if ref.shape == (m,):
                lam = np.empty((B, m)) if want_lam else np.empty((0, 0))
                status = np.empty(B, dtype=np.int64)
                with self._lock:
                    self._batch(ref, T, Q, V, want_lam, acc, lam, status)
                todo = np.flatnonzero(status != 0)
        for i in todo:
            try:
                res = self.solve(float(T[i]), Q[i], V[i])
            except GaussoptError as e:
                if hasattr(e, "add_note"):         # Python >= 3.11
                    e.add_note(f"at state {i} of the batch: t={T[i]!r}, q={Q[i]!r}, v={V[i]!r}")
                raise
            acc[i] = res.a
            if want_lam:
                if lam is None:
                    lam = np.empty((B, res.multipliers.size))
                lam[i] = res.multipliers
        if want_lam and lam is None:               # B = 0
            lam = np.empty((0, 0))
        return acc, (lam if want_lam else None)

    def _batch(self, ref, T, Q, V, want_lam, acc, lam, status) -> None:
        """:func:`~gaussopt.gauss.compiled_step.solve_batch` over the states, split between up to
        ``numba.config.NUMBA_NUM_THREADS`` threads (at least ``BATCH_PER_THREAD`` states
        each), every thread with a compiled context of its own."""
        B = Q.shape[0]
        k = max(1, min(nb_config.NUMBA_NUM_THREADS, B // BATCH_PER_THREAD))
        while len(self._thread_ctx) < k - 1:
            self._thread_ctx.append(self._new_context())
        if k == 1:
            solve_batch(self._ctx[0], ref, T, Q, V, want_lam, acc, lam, status)
            return
        handles = [self._ctx[0]] + [c[0] for c in self._thread_ctx[:k - 1]]
        cuts = [B * j // k for j in range(k + 1)]

        def part(j):
            s = slice(cuts[j], cuts[j + 1])
            solve_batch(handles[j], ref, T[s], Q[s], V[s], want_lam, acc[s],
                        lam[s] if want_lam else lam, status[s])

        threads = [threading.Thread(target=part, args=(j,)) for j in range(1, k)]
        for th in threads:
            th.start()
        part(0)
        for th in threads:
            th.join()

    def _record_least_squares(self, t, q, v, A, b, size: float) -> None:
        """Remember a least-squares step: time, relative size, rows involved (the rows
        with the largest share of the inconsistent part of ``bn``); the integrator
        reads and clears :attr:`least_squares_steps`."""
        from gaussopt.gauss.solution import decide

        M = self.system.mass(t, q)
        dec = decide(M, A, b, rank_tol=self.rank_tol, ref=self._reference(A.shape[0]),
                     sig_ref=self.sigma_ref)
        res = dec.bn - dec.Ur @ (dec.Ur.T @ dec.bn)
        live = np.flatnonzero(dec.live)
        big = live[np.abs(res) >= 0.3 * np.abs(res).max()] if res.size else live[:0]
        self.least_squares_steps.append((float(t), size, big.tolist()))

    def reset(self) -> None:
        """Forget state carried between steps (warm starts)."""

    def run_stats(self) -> dict:
        """Statistics of a run for ``Trajectory.stats`` (solver-specific); resets them."""
        return {}

    def compiled_units(self) -> list:
        """The compiled functions (:func:`gaussopt.core.compiled.unit`) this solver calls from
        Python during a run, which :func:`~gaussopt.simulate` loads before it starts the
        clock (the direct solvers run inside the engine: none)."""
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(system={self.system.name!r}, objective={self.objective!r})"
