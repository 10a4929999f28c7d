"""The model as the compiled engine calls it: six functions behind one signature.

Every model function has the C signature ``int64 f(double t, void *x1, ...,
void *x5)`` (:data:`SIGNATURE`): the compiled engine (:mod:`gaussopt.integrate.engine`)
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

import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.errors import NumbaExperimentalFeatureWarning
from numba.core.types import WrapperAddressProtocol
from numba.extending import intrinsic

from gaussopt.core.compiled import cfunc, jit


__all__ = ["SIGNATURE", "FUNCTION", "FUNCTION_FAILED", "functions", "address", "ModelFunctions",
           "SparseModel", "RecursiveModel", "recursive_parts", "R_SCALARS", "ParameterSlots", "NOOP", "quiet_compile", "NotCompiled",
           "make_buffers"]

#: the one signature of every model function
SIGNATURE = types.int64(types.float64, types.voidptr, types.voidptr, types.voidptr,
                        types.voidptr, types.voidptr)
_CTYPES_SIG = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_double, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p)

#: the numba type of a model function (a first-class function of :data:`SIGNATURE`)
FUNCTION = types.FunctionType(SIGNATURE)

#: what a model function returns when it failed (a Python exception it caught, say): the
#: engine then stops the run with :data:`gaussopt.core.status.MODEL_FAILED`
FUNCTION_FAILED = 1

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
    """The sparse evaluation of a model, for the O(n) step of :mod:`gaussopt.gauss.band_step`.

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
        (:mod:`gaussopt.gauss.band_step`, "Block mass").
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


#: the scalars at the end of a :class:`RecursiveModel` step's output: the backward errors of
#: feasibility and stationarity, the smallest pivot of the articulated inertias (relative,
#: as the dense kernel's ``dmin``), the mass weight ``trace(M) / n``, the rows other than
#: the balls' normalizations (closures and couplings, whose rank the engine decides:
#: :func:`gaussopt.gauss.model_step._tree_step`) and the smallest singular value of the
#: normalized rows (1 for the balls' alone: disjoint unit rows; set by the engine where
#: there are others)
R_BEF, R_BES, R_DMIN, R_WGT, R_CLOSED, R_SIG = range(6)
R_SCALARS = 6


@jit(cache=True, inline="always")
def recursive_size(n, m):
    """The length of a :class:`RecursiveModel` step's output (:func:`recursive_parts`,
    then :func:`recursive_rows`)."""
    return 3 * n + 2 * m + R_SCALARS + m * n + m


@jit(cache=True, inline="always")
def recursive_parts(out, n, m):
    """The parts of a :class:`RecursiveModel` step's output ``out`` (views, in this order):
    ``a`` (n), ``M a - F`` (n), ``F`` (n), the rows' multipliers (m), their residuals
    ``A a - b`` (m), the :data:`R_SCALARS` scalars (``R_BEF``, ...). The one statement of
    the layout: the step writes it, the engine reads it."""
    return (out[:n], out[n:2 * n], out[2 * n:3 * n], out[3 * n:3 * n + m],
            out[3 * n + m:3 * n + 2 * m], out[3 * n + 2 * m:3 * n + 2 * m + R_SCALARS])


@jit(cache=True, inline="always")
def recursive_rows(out, n, m):
    """After :func:`recursive_parts` in a step's output: its rows ``A`` (``m * n``,
    row-major) and their right-hand sides ``b`` (m), written where the step has rows
    beside the balls' normalizations (``R_CLOSED > 0``), for the engine's rank decision
    (:func:`gaussopt.gauss.model_step._tree_step`: the step has evaluated them already)."""
    o = 3 * n + 2 * m + R_SCALARS
    return out[o:o + m * n], out[o + m * n:o + m * n + m]


@dataclass
class RecursiveModel:
    """The recursive O(n) step of a tree in joint coordinates whose only rows are its
    balls' normalizations (the articulated-body algorithm:
    :func:`gaussopt.multibody.tree.tree_compiled.recursive_step`), for the engine's O(n)
    path (:mod:`gaussopt.gauss.band_step`, ``MODE_TREE``).

    One function of :data:`SIGNATURE`: ``step(t, q, v, p, out, unused)`` writes its
    output into ``out`` (:func:`recursive_parts`: the accelerations, ``M a - F``, ``F``,
    the rows' multipliers and residuals, the scalars) and returns 0, or a refusal (the
    dense kernel then takes the step). A front end sets it on a system as
    ``system.recursive``; the tree kind of :mod:`gaussopt.multibody` does.

    Attributes
    ----------
    fns : tuple
        ``(step,)``, a numba cfunc.
    p : ndarray
        Its parameter array.
    n, m : int
    """

    fns: tuple
    p: np.ndarray
    n: int
    m: int

    @property
    def out_size(self) -> int:
        """The length of the step's ``out``."""
        return recursive_size(self.n, self.m)

    @property
    def addrs(self) -> np.ndarray:
        """The step's address, then two zeros (a :class:`SparseModel`'s three slots)."""
        return np.array([address(self.fns[0]), 0, 0], dtype=np.int64)


@dataclass(frozen=True)
class ParameterSlots:
    """The named entries of a compiled model's parameter array ``p`` (the array every
    model function reads): what a front end that generates the functions knows about
    them, so that a caller can change one between steps without rebuilding the model
    (:class:`gaussopt.integrate.stepper.Stepper`'s inputs).

    Attributes
    ----------
    index : Mapping[str, int]
        Name of a parameter or of a specified input given as a number -> its index in
        ``p``.
    force_only : frozenset of str
        The names that enter only the applied force ``F`` (and the energy): neither the
        mass matrix nor a constraint. Only these may change along a run: a new value of
        a length in a constraint would move the constraint manifold under the state.
    """

    index: Any
    force_only: frozenset


def _doubles(addr: int, size: int) -> np.ndarray:
    """The ``size`` doubles at ``addr`` as a writable array (a view, no copy)."""
    if size == 0:
        return np.zeros(0)
    return np.ctypeslib.as_array((ctypes.c_double * size).from_address(addr))


def make_buffers(n: int, m: int, mh: int, mv: int) -> dict:
    """The flat buffers of the model calls (one set per run)."""
    z = np.zeros
    return {"q": z(n), "v": z(n), "M": z(n * n), "F": z(n), "A": z(m * n), "b": z(m),
            "phi": z(mh), "J": z(mh * n), "phit": z(mh), "r": z(mv), "Jv": z(mv * n),
            "e": z(1), "a": z(n)}
