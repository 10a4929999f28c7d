"""The model as the compiled engine calls it: six functions behind one signature.

Every model function has the C signature ``int64 f(double t, void *x1, ...,
void *x5)`` (:data:`SIGNATURE`): the compiled engine (:mod:`gaussopt.engine`)
calls it through a function pointer, so it is compiled once for all models.
The pointers address flat ``float64`` buffers; the function reads its inputs
and writes its outputs there and returns 0 (or a nonzero code: the model
failed, e.g. a Python exception it caught):

=========  ======================================  =====================================
function   arguments after ``t``                   writes
=========  ======================================  =====================================
dyn        ``q, v, p, M, F``                       ``M`` (n*n, row-major), ``F`` (n)
rows       ``q, v, p, A, b``                       equality rows ``A`` (m*n), ``b`` (m)
pos        ``q, p, phi, J, phit``                  holonomic ``Phi`` (mh), ``Phi_q`` (mh*n), ``Phi_t`` (mh)
vel        ``q, v, p, r, Jv``                      velocity-level residual (mv) and its ``d/dv`` (mv*n)
energy     ``q, v, p, e, -``                       ``e[0]``
accel      ``q, v, p, a, -``                       accelerations (n) (the QP and GA solvers)
=========  ======================================  =====================================

``p`` is the model's parameter array. A model compiled by a front end
(:mod:`gaussopt.symbolic`, :mod:`gaussopt.multibody`, and the problems built
on them) provides numba ``cfunc`` objects; any other model (Python callables,
``numba.njit`` functions included) is wrapped here in ctypes callbacks that call its Python functions (the general path:
the same engine, at the cost of one Python call per evaluation). A fault of
the user's code inside a callback is caught and kept (:attr:`ModelFunctions.error`)
and ends the run with the partial trajectory.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Optional

import warnings

import numba as nb
import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.errors import NumbaExperimentalFeatureWarning
from numba.core.types import WrapperAddressProtocol
from numba.extending import intrinsic

from .compiled import cfunc, jit
from .constraints import Holonomic, _is_sparse

#: the step solvers take the O(n) path of :mod:`gaussopt.sparse` from this many
#: coordinates on (``gaussopt.sparse.MIN_N``). It is faster than the dense kernel at every
#: size measured (the N-four-bar from 9 coordinates on, where both take microseconds);
#: below about 30 coordinates the dense step costs well under a millisecond and reports
#: every singular value, so small models keep it
MIN_N = 30
from .exceptions import ModelError

__all__ = ["SIGNATURE", "FUNCTION", "functions", "ModelFunctions", "SparseModel", "python_functions",
           "model_functions", "NOOP", "quiet_compile", "kernel_factory"]

#: the one signature of every model function
SIGNATURE = types.int64(types.float64, types.voidptr, types.voidptr, types.voidptr,
                        types.voidptr, types.voidptr)
_CTYPES_SIG = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_double, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p)

#: the numba type of a model function (a first-class function of :data:`SIGNATURE`)
FUNCTION = types.FunctionType(SIGNATURE)

#: a model failure reported by a function: the engine stops the run
MODEL_FAILED = 1

# function pointers as arguments of compiled functions are numba's "first-class
# function" feature, which numba still labels experimental: its warning, raised
# while compiling, says nothing to a user of gaussopt


class quiet_compile(warnings.catch_warnings):
    """Context manager around calls into the engine: silences numba's warning that
    first-class functions are experimental (raised once, while compiling)."""

    def __enter__(self):
        out = super().__enter__()
        warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
        return out


class NotCompiled(Exception):
    """A front end's compiled functions could not be compiled (numba rejected them): the
    model runs through its Python functions (:func:`model_functions`)."""


class _Callback(WrapperAddressProtocol):
    """A ctypes callback as numba's first-class function of :data:`SIGNATURE`: the
    engine sees it with the same type as a compiled function (one compilation)."""

    def __init__(self, fn):
        self.ctypes_function = _CTYPES_SIG(fn)

    def __wrapper_address__(self):
        return ctypes.cast(self.ctypes_function, ctypes.c_void_p).value

    def signature(self):
        return SIGNATURE


@intrinsic
def _function_at(typingctx, addr):
    """The model function at the address ``addr`` (an integer) as a :data:`FUNCTION`
    value: called through its C entry point. Python passes the engine plain
    addresses (:attr:`ModelFunctions.addrs`): numba's typing and unboxing of
    first-class function objects costs ~80 us per call from Python."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        fn = cgutils.create_struct_proxy(FUNCTION)(context, builder)
        vp = context.get_value_type(types.voidptr)
        fn.c_addr = builder.inttoptr(args[0], vp)
        fn.py_addr = vp(None)
        fn.jit_addr = vp(None)
        return fn._getvalue()

    return FUNCTION(addr), codegen


@intrinsic
def data_ptr(typingctx, arr):
    """The data pointer of a contiguous array as a ``void*`` for a model function.
    ``arr.ctypes`` would do, but it holds a reference to the array (an atomic
    increment and decrement per argument of every model call)."""
    if not (isinstance(arr, types.Array) and arr.layout == "C"):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.bitcast(ary.data, context.get_value_type(types.voidptr))

    return types.voidptr(arr), codegen


@jit(cache=True)
def functions(addrs):
    """``(dyn, rows, pos, vel, energy), accel`` from their six addresses."""
    return ((_function_at(addrs[0]), _function_at(addrs[1]), _function_at(addrs[2]),
             _function_at(addrs[3]), _function_at(addrs[4])), _function_at(addrs[5]))


def address(fn) -> int:
    """The C entry point of a model function (a numba cfunc or a :class:`_Callback`)."""
    if isinstance(fn, WrapperAddressProtocol):
        return int(fn.__wrapper_address__())
    return int(fn.address)


@cfunc(SIGNATURE)
def NOOP(t, x1, x2, x3, x4, x5):  # noqa: N802 - a constant
    """A compiled model function that does nothing (a model without that piece)."""
    return 0


@dataclass
class ModelFunctions:
    """The six functions of a model, its parameters, sizes and row layout.

    Attributes
    ----------
    fns : tuple
        ``(dyn, rows, pos, vel, energy)``: numba cfuncs, or ctypes callbacks for
        a Python model (never mixed).
    accel : cfunc or ctypes callback
        The step solver's accelerations for the solvers that run in Python (QP,
        GA); :data:`NOOP` otherwise.
    p : ndarray
        Parameter array passed to every function.
    n, m, mh, mv : int
        Coordinates, equality rows, holonomic rows, velocity-level rows.
    hol_rows, vel_rows : ndarray of int
        Index in ``A`` of every holonomic row (``mh``) and velocity-level row (``mv``).
    vel_is_hol : ndarray of bool
        Whether a velocity-level row is holonomic (else nonholonomic).
    has_energy, constant_mass : bool
    compiled : bool
        The functions are compiled (else ctypes callbacks).
    buffers : dict
        The flat buffers the engine must pass (a Python model's callbacks read and
        write these very arrays).
    error : BaseException or None
        The first exception a Python callback caught.
    """

    fns: tuple
    accel: Any
    p: np.ndarray
    n: int
    m: int
    mh: int
    mv: int
    hol_rows: np.ndarray
    vel_rows: np.ndarray
    vel_is_hol: np.ndarray
    has_energy: bool
    constant_mass: bool
    compiled: bool
    buffers: dict = field(default_factory=dict)
    error: Optional[BaseException] = None
    keepalive: Any = None

    @property
    def addrs(self) -> np.ndarray:
        """The addresses of ``fns`` and ``accel`` (what the engine's entry points take;
        the objects stay alive with this ModelFunctions)."""
        return np.array([address(f) for f in (*self.fns, self.accel)], dtype=np.int64)

    def dims(self) -> np.ndarray:
        return np.array([self.n, self.m, self.mh, self.mv, int(self.has_energy),
                         int(self.constant_mass)], dtype=np.int64)


@dataclass
class SparseModel:
    """The sparse evaluation of a model, for the O(n) step of :mod:`gaussopt.sparse`.

    Two functions of :data:`SIGNATURE`: ``dyn(t, q, v, p, d, F)`` writes the diagonal
    ``d`` (n) of a *diagonal* mass matrix -- or, with ``block_ptr``, its diagonal blocks
    packed row-major one after the other -- and the force ``F`` (n); ``rows(t, q, v, p,
    data, b)`` writes the values ``data`` (nnz) of the equality rows ``A`` in the fixed
    CSR pattern ``(indptr, indices)`` (columns ascending within a row) and ``b`` (m).
    An optional third function ``pos(t, q, p, phi, data, phit)`` writes the position
    residual ``phi`` (m), the position Jacobian in the same pattern and ``Phi_t`` (m),
    for models whose rows are all holonomic: the projection then stays O(n).
    A front end sets it on a system as ``system.sparse`` (a :class:`SparseModel`);
    :mod:`gaussopt.multibody` does.

    Attributes
    ----------
    fns : tuple
        ``(dyn, rows)`` or ``(dyn, rows, pos)``, numba cfuncs.
    p : ndarray
        Parameter array passed to both.
    n, m : int
    indptr : ndarray of int64, shape (m + 1,)
    indices : ndarray of int64, shape (nnz,)
    block_ptr : ndarray of int64, optional
        The first coordinate of every diagonal block of ``M`` (consecutive coordinates),
        then ``n``; None: ``M`` diagonal. A row that touches a block holds all its
        columns; a block may be singular where rows inside it fix its null space
        (:mod:`gaussopt.sparse`, "Block mass").
    """

    fns: tuple
    p: np.ndarray
    n: int
    m: int
    indptr: np.ndarray
    indices: np.ndarray
    block_ptr: Optional[np.ndarray] = None

    @property
    def addrs(self) -> np.ndarray:
        """The addresses of ``fns`` (the objects stay alive with this SparseModel), three
        of them: ``0`` for a missing ``pos``."""
        a = [address(f) for f in self.fns]
        return np.array(a + [0] * (3 - len(a)), dtype=np.int64)


def _doubles(addr: int, size: int) -> np.ndarray:
    """The ``size`` doubles at ``addr`` as a writable array (a view, no copy)."""
    if size == 0:
        return np.zeros(0)
    return np.ctypeslib.as_array((ctypes.c_double * size).from_address(addr))


def python_sparse_model(system, t: float, q: np.ndarray, v: np.ndarray) -> Optional[SparseModel]:
    """The :class:`SparseModel` of a :class:`~gaussopt.System` given as Python
    functions, or None when it has none: it needs a constant diagonal mass matrix
    (:attr:`System.mass_diagonal`, positive), at least :data:`gaussopt.sparse.MIN_N`
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
    from .constraints import Nonholonomic

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
        return MODEL_FAILED

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


def make_buffers(n: int, m: int, mh: int, mv: int) -> dict:
    """The flat buffers of the model calls (one set per run)."""
    z = np.zeros
    return {"q": z(n), "v": z(n), "M": z(n * n), "F": z(n), "A": z(m * n), "b": z(m),
            "phi": z(mh), "J": z(mh * n), "phit": z(mh), "r": z(mv), "Jv": z(mv * n),
            "e": z(1), "a": z(n)}


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

    factory.functions = fns    # (compiled with the rest of a run: gaussopt.compiled)
    return factory


def row_layout(system) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``A`` that are holonomic / velocity-level (in the order of
    ``position_residual`` / ``velocity_residual``)."""
    from .constraints import Holonomic, Nonholonomic

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
                return MODEL_FAILED
        return call

    def put(dst, val, what, shape):
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
            return MODEL_FAILED

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
