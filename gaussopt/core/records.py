"""The engine's records: what Python builds and compiled code reads and writes.

Named tuples of arrays (:class:`ModelData`, :class:`Buffers`, :class:`Options`,
:class:`Tableau`, :class:`State`), the indices of their scalar arrays, the
engine's status codes, and their compiled twins (:func:`pack`: numba structures
holding the very same arrays). The numba types of the packed records are
declared here for the signatures of the engine's units (:mod:`gaussopt.core.compiled`):
:func:`pack` checks that every array has the declared type, so that a run never
compiles another version of the engine for an array of another kind.
"""

from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np
from numba.core import types
from numba.experimental import structref

from gaussopt.core.compiled import declare_types, unit
from gaussopt.core.model_interface import FUNCTION
from gaussopt.core.status import (BAD_INPUT, BUFFER_FULL, CHUNK_DONE, FINISHED,  # noqa: F401
                                  MAX_STEPS,
                                  METHOD_CODES, MODEL_FAILED, SOLVER_CODES, STAB_BAUMGARTE,
                                  STAB_NONE, STAB_PROJECTION, STEP_TOO_LARGE, STEP_TOO_SMALL)

ModelData = namedtuple("ModelData", ["p", "dims", "hol_rows", "vel_rows", "vel_is_hol",
                                     "band"])
Buffers = namedtuple("Buffers", ["q", "v", "M", "F", "A", "b", "phi", "J", "phit", "r", "Jv",
                                 "e", "a"])
# i: integer settings (see the I_* indices); f: float settings (F_*)
Options = namedtuple("Options", ["i", "f"])

# dims
D_N, D_M, D_MH, D_MV, D_ENERGY, D_CONSTM = range(6)
# integer options
# (I_DENSE: prepare every accepted step's interpolant before the step's end is projected,
# for dense output (DENSE_EAGER), or keep what it needs and prepare it when Python asks
# for it (DENSE_LAZY: events; the step's interpolant is then built only in the steps
# whose events need their interior states, gaussopt.integrate.engine.integrator.dense_at))
# (I_GUARD: the checks of a fixed-step run, GUARD_RESIDUAL | GUARD_ENERGY, 0 for none;
# F_GUARD_RES, F_GUARD_E their bounds: gaussopt.core.settings.FIXED_STEP_RESIDUAL, ..._ENERGY)
(I_METHOD, I_SOLVER, I_STAB, I_PVEL, I_PRHS, I_PITER, I_MONITOR, I_MAXSTEPS, I_CHECKSYM,
 I_DENSE, I_GUARD) = range(11)
N_OI = 11
#: values of ``I_DENSE``
DENSE_NONE, DENSE_EAGER, DENSE_LAZY = 0, 1, 2
# float options
(F_RANKTOL, F_RTOL, F_ATOL, F_DT, F_PTOL, F_ALPHA, F_BETA, F_GAMMA, F_T1, F_FIRST,
 F_MAXSTEP, F_GUARD_RES, F_GUARD_E) = range(13)
N_OF = 13
#: the checks of a fixed-step run (bits of ``I_GUARD``): the position residual, the energy
GUARD_RESIDUAL, GUARD_ENERGY = 1, 2

# (the engine's statuses and option codes: :mod:`gaussopt.core.status`, re-exported here for
# the engine's modules, which read every name of this module)




def buffers(mf) -> Buffers:
    """The :class:`Buffers` of a model's compiled functions ``mf`` (its very arrays)."""
    return Buffers(*(mf.buffers[k] for k in Buffers._fields))


Tableau = namedtuple("Tableau", ["A", "B", "C", "E", "E3", "E5", "P", "A_extra", "C_extra", "D"])
State = namedtuple("State", [
    "sc",        # float scalars (S_*)
    "ic",        # int scalars (C_*)
    "y", "f", "y_old", "f_old", "K",     # integrator
    "ref", "sref",                        # the step solver's accepted-state references
    "mu", "mv",                           # the monitor's singular pair (u, v); S_MSIG its value
    "ev_f", "ev_i", "ev_rows",            # events: (t, sigma), (kind, before, min, after), rows
    "lsq_f", "lsq_y",                     # least-squares steps: (t, size), state there
    "t_eval", "out_t", "out_y", "out_k",  # outputs; out_k: see OUT_MANY_SAMPLES
    "dense", "fail_y",                    # dense-output coefficients; state of a failure
    "wk", "wm",                           # kernel workspaces: the step's, the monitor's
    "scr",                                # scratch (N_SCR, 2n): rows R_*
])
#: rows of the scratch ``scr``: the right-hand side's state (q | v) and its a; a stage's
#: state; the step's new state, derivative and error scale; rk4's k2, k3, k4; the
#: accepted state as projected, a copy for the projection, an output sample, a derivative;
#: the accepted step's end before its projection and the derivative there (kept for the
#: step's interpolant, built after the step when it is asked for: I_DENSE = DENSE_LAZY)
(R_QV, R_A, R_STAGE, R_YNEW, R_FNEW, R_SCALE, R_K2, R_K3, R_K4, R_ACC, R_PROJ, R_OUT,
 R_F, R_YRAW, R_FRAW) = range(15)
N_SCR = 15
#: A step of the run with at least this many output times (``t_eval``) strictly inside it
#: emits them as its interpolant gives them, unprojected, each marked in ``out_k`` with
#: the step's number (every other output: -1, the state as stated in ``out_y``): the
#: run's output assembly projects and samples a few of them and interpolates the rest
#: (:mod:`gaussopt.integrate.sample_interpolation`), instead of a projection and a step
#: per output time.
OUT_MANY_SAMPLES = 24
# float scalars
# (S_LSCALE, S_E0, S_ESCALE: the scales of a fixed-step run's checks, set at its start;
# S_TMAX the largest kinetic energy at its accepted steps; S_GUARD_SIZE, S_GUARD_BOUND:
# the residual or drift that ended it and its bound)
(S_T, S_HABS, S_HPREV, S_TOLD, S_MSIG, S_LSQ_T, S_LSQ_SIZE, S_FAIL_T, S_T0, S_NEAR, S_NEAR_T,
 S_NEAR_RATE, S_NEAR_TPREV, S_NEAR_RATE_PREV, S_LSCALE, S_E0, S_ESCALE, S_TMAX, S_GUARD_SIZE,
 S_GUARD_BOUND) = range(20)
N_SC = 20

#: the right-hand side is evaluated on the projected state (``Projection(rhs=True)``)
#: while the last accepted state is near a singular configuration: its rows, scaled by
#: their reference norms, have a singular value below ``NEAR_SINGULAR`` (a tenth of
#: their regular size). There the acceleration field off the constraints grows like
#: 1/sigma and the integrator's stages must not see it; elsewhere the field is smooth,
#: the projection after each accepted step suffices (the standard projection method),
#: and skipping the stages' projections changes the result only at the level of the
#: integration error.
NEAR_SINGULAR = 0.1
# int scalars
# (C_NBAND: right-hand sides whose step the O(n) path answered; C_NREJ: steps rejected
# by error control; C_GUARD, C_GUARD_ROW: the check of a fixed-step run that ended it,
# GUARD_RESIDUAL or GUARD_ENERGY, and the position row)
(C_STATUS, C_STEPS, C_NFEV, C_NPROJ, C_NOUT, C_NEV, C_NLSQ, C_RANK, C_R0, C_DENSE, C_IEVAL,
 C_PENDING, C_KSTEP, C_NMON, C_NSEARCH, C_NBAND, C_NREJ, C_GUARD, C_GUARD_ROW) = range(19)
N_IC = 19
EV_PASSAGE, EV_DROP, EV_RISE = 0, 1, 2


# The compiled twins of ModelData, Buffers, Options, Tableau and State: numba structures
# holding the very arrays of the named tuple (no copy; Python keeps reading the tuple).
def _unliteral(self, fields):
    return tuple((name, types.unliteral(typ)) for name, typ in fields)


@structref.register
class _ModelDataType(types.StructRef):
    preprocess_fields = _unliteral


@structref.register
class _BuffersType(types.StructRef):
    preprocess_fields = _unliteral


@structref.register
class _OptionsType(types.StructRef):
    preprocess_fields = _unliteral


@structref.register
class _TableauType(types.StructRef):
    preprocess_fields = _unliteral


@structref.register
class _StateType(types.StructRef):
    preprocess_fields = _unliteral


class PackedModelData(structref.StructRefProxy):
    """:class:`ModelData` as passed to compiled code (:func:`pack`)."""


class PackedBuffers(structref.StructRefProxy):
    """:class:`Buffers` as passed to compiled code (:func:`pack`)."""


class PackedOptions(structref.StructRefProxy):
    """:class:`Options` as passed to compiled code (:func:`pack`)."""


class PackedTableau(structref.StructRefProxy):
    """:class:`Tableau` as passed to compiled code (:func:`pack`)."""


class PackedState(structref.StructRefProxy):
    """:class:`State` as passed to compiled code (:func:`pack`)."""


structref.define_proxy(PackedModelData, _ModelDataType, list(ModelData._fields))
structref.define_proxy(PackedBuffers, _BuffersType, list(Buffers._fields))
structref.define_proxy(PackedOptions, _OptionsType, list(Options._fields))
structref.define_proxy(PackedTableau, _TableauType, list(Tableau._fields))
structref.define_proxy(PackedState, _StateType, list(State._fields))


@unit("md(f8v, i8v, i8v, i8v, b1v, band)", python=True)
def _pack_model_data(p, dims, hol_rows, vel_rows, vel_is_hol, band):
    return PackedModelData(p, dims, hol_rows, vel_rows, vel_is_hol, band)


@unit("buf(" + ", ".join(["f8v"] * 13) + ")", python=True)
def _pack_buffers(q, v, M, F, A, b, phi, J, phit, r, Jv, e, a):
    return PackedBuffers(q, v, M, F, A, b, phi, J, phit, r, Jv, e, a)


@unit("opt(i8v, f8v)", python=True)
def _pack_options(i, f):
    return PackedOptions(i, f)


@unit("tab(f8m, f8v, f8v, f8v, f8v, f8v, f8m, f8m, f8v, f8m)", python=True)
def _pack_tableau(A, B, C, E, E3, E5, P, A_extra, C_extra, D):
    return PackedTableau(A, B, C, E, E3, E5, P, A_extra, C_extra, D)


@unit("st(f8v, i8v, f8v, f8v, f8v, f8v, f8m, f8v, f8v, f8v, f8v, f8m, i8m, b1m, f8m, f8m, "
      "f8v, f8v, f8m, i8v, f8m, f8v, w, w, f8m)", python=True)
def _pack_state(sc, ic, y, f, y_old, f_old, K_, ref, sref, mu, mv, ev_f, ev_i, ev_rows, lsq_f,
                lsq_y, t_eval, out_t, out_y, out_k, dense, fail_y, wk, wm, scr):
    return PackedState(sc, ic, y, f, y_old, f_old, K_, ref, sref, mu, mv, ev_f, ev_i, ev_rows,
                       lsq_f, lsq_y, t_eval, out_t, out_y, out_k, dense, fail_y, wk, wm, scr)


_PACKERS = {ModelData: _pack_model_data, Buffers: _pack_buffers, Options: _pack_options,
            Tableau: _pack_tableau, State: _pack_state}


def _field_types(ns: dict) -> dict:
    """The numba type of every field of every record (``ns``: the short names of
    :data:`gaussopt.core.compiled.TYPES`)."""
    f8v, f8m, i8v, i8m, b1v = ns["f8v"], ns["f8m"], ns["i8v"], ns["i8m"], ns["b1v"]
    b1m = types.boolean[:, ::1]
    return {
        ModelData: (f8v, i8v, i8v, i8v, b1v, ns["band"]),
        Buffers: (f8v,) * len(Buffers._fields),
        Options: (i8v, f8v),
        Tableau: (f8m, f8v, f8v, f8v, f8v, f8v, f8m, f8m, f8v, f8m),
        State: (f8v, i8v, f8v, f8v, f8v, f8v, f8m, f8v, f8v, f8v, f8v, f8m, i8m, b1m, f8m, f8m,
                f8v, f8v, f8m, i8v, f8m, f8v, ns["w"], ns["w"], f8m),
    }


_STRUCTS = {ModelData: _ModelDataType, Buffers: _BuffersType, Options: _OptionsType,
            Tableau: _TableauType, State: _StateType}
_FIELD_TYPES: dict = {}


@declare_types
def _types() -> dict:
    """``md``, ``buf``, ``opt``, ``tab``, ``st``: the packed records; ``fns``, ``fn``: the
    model's five functions and one function (for the units' signatures)."""
    from gaussopt.core.compiled import TYPES

    # (the records hold the Gauss step's workspace ``w`` and the O(n) step's data ``band``,
    # declared by their own modules: :func:`gaussopt.core.compiled.declare_types` makes
    # this maker wait for them)
    ns = dict(TYPES)
    _FIELD_TYPES.update(_field_types(ns))
    out = {name: _STRUCTS[rec](list(zip(rec._fields, _FIELD_TYPES[rec])))
           for name, rec in (("md", ModelData), ("buf", Buffers), ("opt", Options),
                             ("tab", Tableau), ("st", State))}
    out.update(fns=types.UniTuple(FUNCTION, 5), fn=FUNCTION)
    return out


def pack(record):
    """The compiled twin of a :class:`ModelData`, :class:`Buffers`, :class:`Options`,
    :class:`Tableau` or :class:`State`: a numba structure holding the same arrays
    (writes on either side are seen on the other). Every compiled entry point of the
    engine takes packed records. Raises ``TypeError`` for a field that is not of its
    declared type (a float64 array that is not C-contiguous, say)."""
    kind = type(record)
    specs = _ARRAY_SPECS.get(kind)
    if specs is None:
        specs = _array_specs(kind)
    for name, x, t, spec in zip(kind._fields, record, _FIELD_TYPES[kind], specs):
        # an ndarray of the declared dtype and rank, C-contiguous, writeable and aligned is
        # of the declared type, and so is a named tuple of such arrays (numba's typeof of
        # an array, about 15 us, is left out: a run packs some 60); anything else is typed
        # and compared
        if spec is not None and _matches(x, spec):
            continue
        if nb.typeof(x) != t:
            raise TypeError(f"gaussopt.integrate.engine.pack: {kind.__name__}.{name} must be {t}, "
                            f"found {nb.typeof(x)}")
    return _PACKERS[kind](*record)


#: per record, per field, what :func:`pack` checks without numba's typeof: ``(numpy
#: dtype, ndim)`` for a field declared a C-contiguous, writeable, aligned array, ``(named
#: tuple class, (specs of its fields))`` for a named tuple of such arrays, else None
_ARRAY_SPECS: dict = {}


def _spec(t):
    if isinstance(t, types.Array):
        if t.layout == "C" and t.mutable and t.aligned and isinstance(
                t.dtype, (types.Float, types.Integer, types.Boolean)):
            return np.dtype(nb.np.numpy_support.as_dtype(t.dtype)), t.ndim
        return None
    if isinstance(t, types.NamedTuple):
        inner = tuple(_spec(f) for f in t.types)
        if all(s is not None and isinstance(s[0], np.dtype) for s in inner):
            return t.instance_class, inner
    return None


def _matches(x, spec) -> bool:
    """Whether ``x`` is certainly of the type ``spec`` was made from (:func:`_spec`)."""
    head, rest = spec
    if isinstance(head, np.dtype):
        if type(x) is not np.ndarray or x.dtype != head or x.ndim != rest:
            return False
        flags = x.flags
        return flags.c_contiguous and flags.writeable and flags.aligned
    return type(x) is head and len(x) == len(rest) and all(
        _matches(xi, si) for xi, si in zip(x, rest))


def _array_specs(kind) -> tuple:
    if not _FIELD_TYPES:
        from gaussopt.core.compiled import _namespace

        _namespace()
    out = _ARRAY_SPECS[kind] = tuple(_spec(t) for t in _FIELD_TYPES[kind])
    return out
