"""How a :class:`~gaussopt.System` becomes the functions the compiled engine calls.

A front end that compiles its model (:mod:`gaussopt.symbolic`, :mod:`gaussopt.multibody`)
gives the system a factory of :class:`~gaussopt.core.model_interface.ModelFunctions`
(``system.compiled``; :func:`kernel_factory` makes one from compiled functions); any
other system -- Python callables, ``numba.njit`` functions included -- is wrapped here
in ctypes callbacks of the one signature
(:data:`~gaussopt.core.model_interface.SIGNATURE`) that call its Python functions
(:func:`python_functions`): the same engine, at the cost of one Python call per
evaluation. A fault of the user's code inside a callback is caught and kept
(``ModelFunctions.error``) and ends the run with the partial trajectory.
:func:`model_functions` chooses between the two.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.core.settings import MIN_N
from gaussopt.core.model_interface import (FUNCTION_FAILED, NOOP, ModelFunctions, NotCompiled,
                                           SparseModel, _Callback, _doubles, make_buffers)
from gaussopt.model.constraints import Holonomic, Nonholonomic, _is_sparse

__all__ = ["model_functions", "python_functions", "python_sparse_model", "kernel_factory",
           "row_layout", "accel_callback"]


def python_sparse_model(system, t: float, q: np.ndarray, v: np.ndarray) -> Optional[SparseModel]:
    """The :class:`SparseModel` of a :class:`~gaussopt.System` given as Python
    functions, or None when it has none: it needs a constant diagonal mass matrix
    (:attr:`System.mass_diagonal`, positive), at least :data:`gaussopt.gauss.band_step.MIN_N`
    coordinates, no inequality rows, and equality constraints that are all
    :class:`~gaussopt.Holonomic` or :class:`~gaussopt.Nonholonomic` with a given
    ``jacobian`` returning scipy.sparse at ``(t, q, v)`` (the state of the check).

    The rows' CSR pattern is the one found there; at a later state a Jacobian whose
    pattern differs is scattered into it (entries it lacks are zero), and one with an
    entry outside it raises a :class:`ModelError` that ends the run (return explicit
    zeros where an entry can become nonzero). The two functions are ctypes callbacks
    of :data:`SIGNATURE` (made again after unpickling, by the next check); an
    exception in them is kept in the ``error`` of the run's :class:`ModelFunctions`
    (:func:`python_functions` connects them)."""

    n = system.n
    d = getattr(system, "mass_diagonal", None)
    if (d is None or n < MIN_N or system.inequalities or not system.equalities
            or not np.all(d > 0) or any(type(c) not in (Holonomic, Nonholonomic)
                                        or c._jac is None for c in system.equalities)):
        return None
    blocks = []
    for c in system.equalities:
        J = c.sparse_jacobian(t, q) if isinstance(c, Holonomic) else c.sparse_jacobian(t, q, v)
        if J is None or J.shape[1] != n:
            return None
        blocks.append((c, J.indptr.astype(np.int64), J.indices.astype(np.int64), J.shape[0]))
    indptr = [np.zeros(1, dtype=np.int64)]
    indices, offsets, start, m = [], [], 0, 0
    for c, ip, ix, k in blocks:
        indptr.append(ip[1:] + start)
        indices.append(ix)
        offsets.append((start, start + ix.size, m, m + k))
        start += ix.size
        m += k
    indptr = np.concatenate(indptr)
    indices = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
    nnz = indices.size
    # the pattern of each block as sorted linear indices (row * n + column), for the
    # scatter of a Jacobian whose pattern differs
    keys = []
    for (c, ip, ix, k) in blocks:
        rows = np.repeat(np.arange(k, dtype=np.int64), np.diff(ip))
        keys.append(rows * n + ix)
    diag = np.array(d, dtype=float)
    constant_force = system.constant_force
    sink: list = [None]

    def failed(e):
        mf = sink[0]
        if mf is not None and mf.error is None:
            mf.error = e
        return FUNCTION_FAILED

    def dyn(tt, qp, vp, pp, dp, Fp):
        try:
            _doubles(dp, n)[:] = diag
            if constant_force is not None:
                _doubles(Fp, n)[:] = constant_force
            else:
                qq, vv = _doubles(qp, n).copy(), _doubles(vp, n).copy()
                F = system.force(tt, qq, vv)
                if F.shape != (n,):
                    raise ModelError(f"force(t, q, v) returned shape {F.shape}, expected ({n},).")
                _doubles(Fp, n)[:] = F
            return 0
        except BaseException as e:  # noqa: BLE001 - kept, ends the run
            return failed(e)

    def rows(tt, qp, vp, pp, datap, bp):
        try:
            qq, vv = _doubles(qp, n).copy(), _doubles(vp, n).copy()
            data, b = _doubles(datap, nnz), _doubles(bp, m)
            for (c, ip, ix, k), key, (s0, s1, r0, r1) in zip(blocks, keys, offsets):
                if isinstance(c, Holonomic):
                    J = c.sparse_jacobian(tt, qq)
                else:
                    J = c.sparse_jacobian(tt, qq, vv)
                if J is None or J.shape != (k, n):
                    raise ModelError(f"constraint {c.name!r}: jacobian at t={tt} returned "
                                     f"{type(J).__name__ if J is None else J.shape}, expected a "
                                     f"scipy.sparse matrix of shape ({k}, {n}) as at the start.")
                if np.array_equal(J.indptr, ip) and np.array_equal(J.indices, ix):
                    data[s0:s1] = J.data
                else:
                    jr = np.repeat(np.arange(k, dtype=np.int64), np.diff(J.indptr))
                    lin = jr * n + J.indices
                    pos = np.searchsorted(key, lin)
                    ok = (pos < key.size) & (key[np.minimum(pos, key.size - 1)] == lin)
                    if not np.all(ok | (J.data == 0)):
                        i = int(np.flatnonzero(~(ok | (J.data == 0)))[0])
                        raise ModelError(
                            f"constraint {c.name!r}: its sparse jacobian at t={tt} has a nonzero "
                            f"entry at row {int(jr[i])}, column {int(J.indices[i])}, outside the "
                            f"sparsity pattern it had at the initial state; return explicit "
                            f"zeros where an entry can become nonzero.")
                    seg = data[s0:s1]
                    seg[:] = 0.0
                    seg[pos[ok]] = J.data[ok]
                b[r0:r1] = c.gamma(tt, qq, vv)
            return 0
        except BaseException as e:  # noqa: BLE001 - kept, ends the run
            return failed(e)

    sm = SparseModel(fns=(_Callback(dyn), _Callback(rows)), p=np.zeros(1), n=n, m=m,
                     indptr=indptr, indices=indices)
    sm.python = True
    sm.sink = sink
    return sm


def kernel_factory(fns, p: np.ndarray, n: int, m: int, system, constant_mass: bool):
    """A factory of :class:`ModelFunctions` for a model evaluated by compiled functions
    ``fns`` (:data:`SIGNATURE`, the model packed in ``p``: the multibody kernels), for the
    assembled ``system`` (fresh buffers per run)."""

    def factory() -> ModelFunctions:
        hol_rows, vel_rows, vel_is_hol = row_layout(system)
        mh, mv = hol_rows.size, vel_rows.size
        return ModelFunctions(
            fns=fns, accel=NOOP, p=p, n=n, m=m, mh=mh, mv=mv, hol_rows=hol_rows,
            vel_rows=vel_rows, vel_is_hol=vel_is_hol, has_energy=system.has_energy,
            constant_mass=constant_mass, compiled=True, buffers=make_buffers(n, m, mh, mv))

    factory.functions = fns    # (compiled with the rest of a run: gaussopt.core.compiled)
    factory.dynamics = lambda: (fns[0], fns[4], p)
    factory.rebind = lambda other: kernel_factory(fns, p, n, m, other, constant_mass)
    return factory


def row_layout(system) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``A`` that are holonomic / velocity-level (in the order of
    ``position_residual`` / ``velocity_residual``)."""

    hol, vel, is_hol = [], [], []
    start = 0
    for c, k in zip(system.equalities, system._row_counts):
        idx = list(range(start, start + k))
        if isinstance(c, Holonomic):
            hol += idx
            vel += idx
            is_hol += [True] * k
        elif isinstance(c, Nonholonomic):
            vel += idx
            is_hol += [False] * k
        start += k
    return (np.array(hol, dtype=np.int64), np.array(vel, dtype=np.int64),
            np.array(is_hol, dtype=np.bool_))


class _PositionMemo:
    """``Phi``, ``Phi_q`` and ``Phi_t`` of one :class:`~gaussopt.Holonomic` constraint
    at the last ``(t, q)`` asked for, each computed when first asked (a run's own
    cache: :func:`python_functions` makes one per run, so a model changed between
    runs is never answered from it). ``Phi_t`` of a constraint declared
    ``rheonomic=False`` without a ``phi_t`` is zero, found without a call."""

    __slots__ = ("c", "t", "key", "values", "static", "sparse")

    def __init__(self, c, sparse: bool = False) -> None:
        self.c = c
        self.sparse = sparse and c._jac is not None
        self.t = None
        self.key = b""
        self.values: list = [None, None, None]
        self.static = not c.rheonomic and c._phi_t is None

    def _at(self, t, q) -> list:
        key = q.tobytes()
        if t != self.t or key != self.key:
            self.t, self.key = t, key
            self.values = [None, None, None]
        return self.values

    def phi(self, t, q) -> np.ndarray:
        vals = self._at(t, q)
        if vals[0] is None:
            vals[0] = self.c.residual(t, q)
        return vals[0]

    def J(self, t, q):
        """``Phi_q``: dense, or scipy.sparse CSR when the given jacobian returns that
        (:func:`_put_rows` writes either into a buffer; ``@`` works on both)."""
        vals = self._at(t, q)
        if vals[1] is None:
            J = self.c.sparse_jacobian(t, q) if self.sparse else None
            vals[1] = J if J is not None else self.c.jacobian(t, q)
        return vals[1]

    def phi_t(self, t, q) -> np.ndarray:
        vals = self._at(t, q)
        if vals[2] is None:
            vals[2] = (np.zeros(self.phi(t, q).size) if self.static
                       else self.c.phi_t(t, q))
        return vals[2]

    def velocity_residual(self, t, q, v, J) -> np.ndarray:
        """``Phi_q v + Phi_t`` (as :meth:`Holonomic.velocity_residual`)."""
        r = np.asarray(J @ v, dtype=float).reshape(-1)
        if not self.static:
            r = r + self.phi_t(t, q)
        return r


def _dense(J) -> np.ndarray:
    return J.toarray() if _is_sparse(J) else J


def _scatter(dst: np.ndarray, J) -> None:
    """Write the scipy.sparse CSR ``J`` (canonical: :meth:`Holonomic.sparse_jacobian`)
    into the dense ``dst`` of its shape (zeroed first; no dense temporary)."""
    dst[...] = 0.0
    rows = np.repeat(np.arange(J.shape[0]), np.diff(J.indptr))
    dst[rows, J.indices] = J.data


def python_functions(system, accel=None) -> ModelFunctions:
    """Wrap a :class:`~gaussopt.System`'s Python functions as ctypes callbacks.

    ``accel(t, q, v) -> a`` (a step solver's hot path) becomes the sixth
    function. Shapes are checked at every call; any exception is caught, kept
    in ``error`` and reported to the engine as a model failure.
    """
    n = system.n
    m = system.m or 0
    hol_rows, vel_rows, vel_is_hol = row_layout(system)
    mh, mv = hol_rows.size, vel_rows.size
    buf = make_buffers(n, m, mh, mv)
    mf = ModelFunctions(fns=(), accel=NOOP, p=np.zeros(1), n=n, m=m, mh=mh, mv=mv,
                        hol_rows=hol_rows,
                        vel_rows=vel_rows, vel_is_hol=vel_is_hol,
                        has_energy=system.has_energy,
                        constant_mass=system.constant_mass is not None, compiled=False,
                        buffers=buf)
    sm = getattr(system, "sparse", None)
    if getattr(sm, "python", False):
        sm.sink[0] = mf                  # (the sparse callbacks' errors: this run's)
    qb, vb = buf["q"], buf["v"]
    Mb, Fb, Ab, bb = (buf["M"].reshape(n, n), buf["F"], buf["A"].reshape(m, n), buf["b"])
    phib, Jb, phitb = buf["phi"], buf["J"].reshape(mh, n), buf["phit"]
    rb, Jvb, eb, ab = buf["r"], buf["Jv"].reshape(mv, n), buf["e"], buf["a"]

    def guarded(fun):
        def call(t, x1, x2, x3, x4, x5):
            try:
                fun(t)
                return 0
            except BaseException as e:  # noqa: BLE001 - kept, ends the run
                if mf.error is None:
                    mf.error = e
                return FUNCTION_FAILED
        return call

    def put(dst, val, what, shape):
        if type(val) is np.ndarray and val.shape == shape and val.dtype == np.float64:
            dst[...] = val              # (the common case, checked and written at once)
            return
        if _is_sparse(val):             # (a sparse Jacobian: scattered, never densified)
            if val.shape != shape:
                raise ModelError(f"{what} returned shape {val.shape}, expected {shape}.")
            _scatter(dst, val)
            return
        arr = np.asarray(val, dtype=float)
        if arr.shape != shape:
            arr = arr.reshape(-1) if arr.size == int(np.prod(shape)) and arr.ndim <= 2 \
                and len(shape) == 1 else arr
            if arr.shape != shape:
                raise ModelError(f"{what} returned shape {np.shape(val)}, expected {shape}.")
        dst[...] = arr

    constant = system.constant_mass is not None and system.constant_force is not None
    done = [False]

    def dyn(t):
        if constant and done[0]:
            return                  # (M and F are constant: the buffers hold them)
        q, v = qb.copy(), vb.copy()
        put(Mb, system.mass(t, q), "mass(t, q)", (n, n))
        put(Fb, system.force(t, q, v), "force(t, q, v)", (n,))
        done[0] = constant

    # Phi, Phi_q and Phi_t of each holonomic constraint are kept for the last (t, q) of
    # this run: the rows, the residuals and the output samples of one state share them
    # (a sample evaluates pos, vel and rows at the state its projection ended on).
    memos = {id(c): _PositionMemo(c, sparse=getattr(sm, "python", False))
             for c in system.holonomic}
    hol = [memos[id(c)] for c in system.holonomic]
    vel_level = [(memos.get(id(c)), c) for c in system._velocity_level]
    eq_rows = [(memos.get(id(c)) if type(c).rows is Holonomic.rows else None, c)
               for c in system.equalities]

    def rows(t):
        q, v = qb.copy(), vb.copy()
        if len(eq_rows) == 1:
            memo, c = eq_rows[0]
            A, b = (memo.J(t, q), c.gamma(t, q, v)) if memo is not None else c.rows(t, q, v)
        else:
            parts = [(_dense(memo.J(t, q)), c.gamma(t, q, v)) if memo is not None
                     else c.rows(t, q, v) for memo, c in eq_rows]
            A = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, n))
            b = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
        if A.shape != (m, n) or b.shape != (m,):
            raise system._row_count_error(t, q, v, _dense(A), b)
        if _is_sparse(A):
            _scatter(Ab, A)
        else:
            Ab[...] = A
        bb[...] = b

    def pos(t):
        q = qb.copy()
        if len(hol) == 1:
            memo = hol[0]
            put(phib, memo.phi(t, q), "the holonomic constraints", (mh,))
            put(Jb, memo.J(t, q), "the holonomic Jacobian", (mh, n))
            phitb[...] = memo.phi_t(t, q)
            return
        put(phib, np.concatenate([c.phi(t, q) for c in hol]) if hol else np.zeros(0),
            "the holonomic constraints", (mh,))
        put(Jb, np.concatenate([_dense(c.J(t, q)) for c in hol]) if hol else np.zeros((0, n)),
            "the holonomic Jacobian", (mh, n))
        phitb[...] = np.concatenate([c.phi_t(t, q) for c in hol]) if hol else np.zeros(0)

    def vel(t):
        q, v = qb.copy(), vb.copy()
        r, Jv = [], []
        for memo, c in vel_level:
            if memo is not None:
                J = memo.J(t, q)
                r.append(memo.velocity_residual(t, q, v, J))
                Jv.append(J)
            else:
                r.append(c.velocity_residual(t, q, v))
                Jv.append(c.jacobian(t, q, v))
        put(rb, r[0] if len(r) == 1 else np.concatenate(r) if r else np.zeros(0),
            "the velocity residual", (mv,))
        put(Jvb, Jv[0] if len(Jv) == 1 else np.concatenate([_dense(J) for J in Jv]) if Jv
            else np.zeros((0, n)), "the velocity rows", (mv, n))

    def energy(t):
        eb[0] = system.energy(t, qb.copy(), vb.copy()) if system.has_energy else 0.0

    def acc(t):
        put(ab, accel(t, qb.copy(), vb.copy()), "the step solver", (n,))

    callbacks = [_Callback(guarded(f)) for f in (dyn, rows, pos, vel, energy)]
    mf.fns = tuple(callbacks)
    origin = system.compiled_origin
    dynamics = (getattr(origin.compiled, "dynamics", None)
                if origin is not None and origin is not system else None)
    if dynamics is not None:
        # M, F and the energy by the origin's compiled functions (the same mass, force and
        # energy: System.with_constraints; ``p`` theirs, which the callbacks ignore), the
        # rows by this system's Python functions
        try:
            dyn_c, energy_c, p = dynamics()
        except NotCompiled:
            dyn_c = None
        if dyn_c is not None:
            mf.fns = (dyn_c,) + mf.fns[1:4] + (energy_c,)
            mf.p = p
    rows_origin = system.__dict__.get("_rows_origin")
    contact_rows = getattr(getattr(rows_origin, "compiled", None), "contact_rows", None)
    if contact_rows is not None:
        # the rows by compiled functions of the origin's kind where it has them for these
        # constraints (a contact phase of a tree model: its closed points' rows,
        # gaussopt.multibody.tree.tree_compiled.phase_functions), reading ``p`` extended
        # by the constraints' section (the origin's compiled M and F read its first part)
        got = contact_rows(system)
        if got is not None:
            (rows_c, pos_c, vel_c), mf.p = got
            mf.fns = (mf.fns[0], rows_c, pos_c, vel_c, mf.fns[4])
    if accel is not None:
        mf.accel = accel_callback(mf, accel)
        callbacks.append(mf.accel)
    mf.keepalive = callbacks
    return mf


def accel_callback(mf: ModelFunctions, accel):
    """A ctypes callback computing ``accel(t, q, v)`` (a Python step solver) into the
    engine's buffer ``a``; exceptions are kept in ``mf.error``."""
    qb, vb, ab = mf.buffers["q"], mf.buffers["v"], mf.buffers["a"]
    n = mf.n

    def call(t, x1, x2, x3, x4, x5):
        try:
            a = np.asarray(accel(t, qb.copy(), vb.copy()), dtype=float)
            if a.shape != (n,):
                raise ModelError(f"the step solver returned shape {a.shape}, expected ({n},).")
            ab[...] = a
            return 0
        except BaseException as e:  # noqa: BLE001 - kept, ends the run
            if mf.error is None:
                mf.error = e
            return FUNCTION_FAILED

    return _Callback(call)


def model_functions(system, accel=None) -> ModelFunctions:
    """The functions the engine calls for ``system``: its compiled ones when a front
    end provided them (``system.compiled``, a callable returning a fresh
    :class:`ModelFunctions`), else ctypes callbacks around its Python functions;
    ``accel`` (a step solver's ``acceleration``) becomes the callback of the
    solvers that run in Python."""
    factory = getattr(system, "compiled", None)
    if factory is None:
        return python_functions(system, accel)
    try:
        mf = factory()
    except NotCompiled:
        system.compiled = None              # (for good: the Python functions it is)
        return python_functions(system, accel)
    if accel is not None:
        cb = accel_callback(mf, accel)
        mf.accel = cb
        mf.keepalive = [cb, mf.keepalive]
    return mf
