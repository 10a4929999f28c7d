"""One Gauss step of a compiled model in one call into machine code.

:func:`~gaussopt.solve_step` on a model whose functions are compiled
(:mod:`gaussopt.symbolic`, :mod:`gaussopt.multibody`, the problems) does
not need Python between the model and the answer: :func:`solve_at` evaluates
the model, runs the kernel's step (:func:`gaussopt.gauss.model_step.evaluate_step`: the
same rank decision, solve and verification as everywhere else) and the
diagnostics of :class:`~gaussopt.core.result.StepResult` in one compiled call.

Everything the call needs is built once per step solver into a
:class:`StepContext` (a numba structure passed by reference: a call from
Python unboxes one object instead of some thirty arrays). Any status other
than success sends the step back to the Python path, which raises the
specific error (the same kernel decides, so it fails the same way).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from numba.core import types
from numba.experimental import structref

import gaussopt.gauss.model_step as MS
import gaussopt.gauss.dense_step as K
import gaussopt.gauss.workspace as WS
from gaussopt.core.views import wivec, wvec
import gaussopt.gauss.band_step as SP
from gaussopt.core.compiled import PREFETCH, declare_types, jit, unit
from gaussopt.core.model_interface import functions

_inline = jit(cache=True)

__all__ = ["StepContext", "make_context", "solve_at", "entry_point", "layout", "NULL_FORCE_RTOL",
           "NOTED",
           "S_R", "S_K", "S_RHO", "S_ALLOW", "S_BE", "S_FLAGS", "S_GAUSS", "S_RESID",
           "S_NULLF", "S_DROPPED", "N_SCALARS", "solve_batch", "null_force"]

#: relative size of the force's part in ``null(M)`` below which it counts as zero
#: (the objective-mismatch check of :class:`~gaussopt.gauss.solvers.StepSolver`)
NULL_FORCE_RTOL = 1e-14

# scalars at the end of ``out``
S_R, S_K, S_RHO, S_ALLOW, S_BE, S_FLAGS, S_GAUSS, S_RESID, S_NULLF, S_DROPPED = range(10)
N_SCALARS = 10
#: :func:`solve_at`'s status of an answer whose scalars need reading (rows vanished, or a
#: force in ``null(M)`` above :data:`NULL_FORCE_RTOL`): where it returns 0 they do not
NOTED = -1


@structref.register
class _ContextType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class StepContext(structref.StructRefProxy):
    """What :func:`solve_at` needs, built once (:func:`make_context`): the model's
    function addresses, data and buffers, the options, the running reference of
    the smallest singular value, a kernel workspace, the projector ``M M^+`` of a
    constant singular mass matrix (else an empty array) and the output array."""


structref.define_proxy(StepContext, _ContextType,
                       ["addrs", "md", "buf", "opt", "sref", "w", "P", "out"])


@declare_types
def _types() -> dict:
    """``ctx``: the numba type of a :class:`StepContext` (for the units' signatures)."""
    from gaussopt.core.compiled import _namespace

    ns = _namespace()
    f8v, f8m, i8v = ns["f8v"], ns["f8m"], ns["i8v"]
    return {"ctx": _ContextType([("addrs", i8v), ("md", ns["md"]), ("buf", ns["buf"]),
                                 ("opt", ns["opt"]), ("sref", f8v), ("w", ns["w"]),
                                 ("P", f8m), ("out", f8v)])}


@unit("ctx(i8v, md, buf, opt, f8v, w, f8m, f8v)", python=True)
def make_context(addrs, md, buf, opt, sref, w, P, out):
    """A :class:`StepContext` (compiled: no compilation per process)."""
    return StepContext(addrs, md, buf, opt, sref, w, P, out)


def entry_point(dispatcher, args: tuple):
    """The compiled function of ``dispatcher`` for the types of ``args`` (it must have
    been called with arguments of these types already), or ``dispatcher`` itself if
    numba does not tell it. Called directly it skips the dispatcher's typing of the
    arguments (about 15 ns an array; 0.7 us of the 3.3 us of a :func:`solve_at` call
    on the four-bar, where typing the :class:`StepContext` is the costly part), but
    checks none of them: only for calls whose every argument has exactly the types
    of ``args`` (the callers guarantee it: :meth:`gaussopt.gauss.solvers.StepSolver.solve`
    for :func:`solve_at`, :class:`gaussopt.gauss.solvers.QP` for its kernels). The version
    Python can call, compiled or loaded if only the one for compiled callers exists (whose
    entry has no wrapper to call: :class:`gaussopt.core.compiled._Dispatcher`)."""
    dispatcher = getattr(dispatcher, "dispatcher", dispatcher)   # (a unit: its dispatcher)
    try:
        key = tuple(nb.typeof(a) for a in args)
        entry = dispatcher.overloads[key].entry_point
        for_python = getattr(dispatcher, "compile_for_python", None)
        return for_python(key) if for_python is not None else entry
    except Exception:  # noqa: BLE001 - another numba: the dispatcher is always right
        return dispatcher


def layout(n: int, m: int) -> tuple[slice, slice, slice, slice, int]:
    """Slices of ``a``, ``M a - F``, multipliers and singular values in ``out``, and
    the index of the first scalar."""
    k = min(m, n)
    return (slice(0, n), slice(n, 2 * n), slice(2 * n, 2 * n + m),
            slice(2 * n + m, 2 * n + m + k), 2 * n + m + k)


@unit("i8(ctx, f8v, f8, f8v, f8v, b1)", python=True)
def solve_at(ctx, ref, t, q, v, want_lam):
    """The step at ``(t, q, v)`` into ``ctx.out`` (see :func:`layout`): accelerations,
    constraint force ``M a - F``, multipliers (if ``want_lam``), singular values,
    then the scalars ``S_*`` (rank, ``min(mL, n)``, inconsistency and allowance,
    backward error, kernel flags, Gauss value, ``max |A a - b|``, relative size of
    the force in ``null(M)`` (0 without a projector), number of vanished rows).

    Returns the status: 0 or :data:`NOTED` (answered; its scalars show a vanished row or
    a force in ``null(M)`` only where :data:`NOTED`), a kernel status,
    :data:`gaussopt.core.status.MODEL_FAILED`, or :data:`gaussopt.gauss.dense_step.NONFINITE`
    for a non-finite ``q``/``v``.
    """
    fns, accel = functions(ctx.addrs)
    md = ctx.md
    buf = ctx.buf
    w = ctx.w
    out = ctx.out
    n = md.dims[MS.D_N]
    m = md.dims[MS.D_M]
    for i in range(n):
        if not (np.isfinite(q[i]) and np.isfinite(v[i])):
            return K.NONFINITE
    a = out[:n]
    status, r, mL, k, rho, allow, be, flags = MS.evaluate_step(
        fns, accel, md, buf, ctx.opt, ref, ctx.sref, t, q, v, a, want_lam, w)
    if status != 0:
        return status
    if MS.uses_sparse(flags):
        _fill_sparse(ctx, a, want_lam, be, flags)
        sc = 2 * n + m + min(m, n)
        return 0 if out[sc + S_DROPPED] == 0.0 and out[sc + S_NULLF] <= NULL_FORCE_RTOL else NOTED
    M = buf.M
    F = buf.F
    gauss = 0.0
    for i in range(n):
        acc = -F[i]
        for j in range(n):
            acc += M[i * n + j] * a[j]
        out[n + i] = acc                         # M a - F
        gauss += a[i] * (0.5 * (acc + F[i]) - F[i])
    lam0 = 2 * n
    s0 = lam0 + m
    kmax = min(m, n)
    sc = s0 + kmax
    lam = wvec(w, WS.F_lam, m)
    live = wivec(w, WS.I_live, m)
    dropped = 0
    for i in range(m):
        out[lam0 + i] = lam[i] if want_lam else 0.0
        if not live[i]:
            dropped += 1
    s = wvec(w, WS.F_s, k)
    for i in range(kmax):
        out[s0 + i] = s[i] if i < k else 0.0
    resid = 0.0
    A = buf.A
    for i in range(m):
        acc = -buf.b[i]
        for j in range(n):
            acc += A[i * n + j] * a[j]
        if abs(acc) > resid:
            resid = abs(acc)
    nullf = null_force(ctx.P, F, n)
    out[sc + S_R] = r
    out[sc + S_K] = k
    out[sc + S_RHO] = rho
    out[sc + S_ALLOW] = allow
    out[sc + S_BE] = be
    out[sc + S_FLAGS] = flags
    out[sc + S_GAUSS] = gauss
    out[sc + S_RESID] = resid
    out[sc + S_NULLF] = nullf
    out[sc + S_DROPPED] = dropped
    return 0 if dropped == 0 and nullf <= NULL_FORCE_RTOL else NOTED


@unit("none(ctx, f8v, b1, f8, i8)", lazy=True)
def _fill_sparse(ctx, a, want_lam, be, flags):
    """The rest of ``out`` after a step on the O(n) path (:mod:`gaussopt.gauss.band_step`): rank
    ``m``, one singular value (the estimate of the smallest, with ``want_lam``, else
    NaN), no inconsistency, the flags with its bit."""
    md = ctx.md
    out = ctx.out
    n = md.dims[MS.D_N]
    m = md.dims[MS.D_M]
    res = np.empty(m)
    MS.band_force(md, a, out[n:2 * n], res)
    F = md.band.w.F
    gauss = 0.0
    for i in range(n):
        gauss += a[i] * (0.5 * (out[n + i] + F[i]) - F[i])
    lam0 = 2 * n
    lam = wvec(ctx.w, WS.F_lam, m)
    for i in range(m):
        out[lam0 + i] = lam[i] if want_lam else 0.0
    s0 = lam0 + m
    kmax = min(m, n)
    for i in range(kmax):
        out[s0 + i] = 0.0
    out[s0] = MS.path_sigma(md) if want_lam else np.nan
    resid = 0.0
    for i in range(m):
        resid = max(resid, abs(res[i]))
    sc = s0 + kmax
    rank = m
    for i in range(m):
        rank -= md.band.w.drop[i]                  # (a row set aside: gaussopt.gauss.band_step)
    out[sc + S_R] = rank
    out[sc + S_K] = 1
    out[sc + S_RHO] = 0.0
    out[sc + S_ALLOW] = math.sqrt(ctx.opt.f[MS.F_RANKTOL])
    out[sc + S_BE] = be
    out[sc + S_FLAGS] = flags
    out[sc + S_GAUSS] = gauss
    out[sc + S_RESID] = resid
    out[sc + S_NULLF] = null_force(ctx.P, F, n)
    out[sc + S_DROPPED] = 0


@_inline
def null_force(P, F, n):
    """Relative size of the force's part in ``null(M)``, ``|F - P F| / |F|`` (max norms;
    ``P = M M^+`` of a constant singular mass matrix, else empty: 0)."""
    if P.shape[0] != n:
        return 0.0
    big = 0.0
    dn = 0.0
    for i in range(n):
        acc = F[i]
        for j in range(n):
            acc -= P[i, j] * F[j]
        dn = max(dn, abs(acc))
        big = max(big, abs(F[i]))
    return dn / big if big > 0.0 else 0.0


@unit("none(ctx, f8v, f8v, f8m, f8m, b1, f8m, f8m, i8v)", nogil=True, python=True)
def solve_batch(ctx, ref, T, Q, V, want_lam, A_out, L_out, status_out):
    """The step of :func:`solve_at` (:func:`gaussopt.gauss.model_step.evaluate_step`: the same
    rank decision, solve and verification) at every ``(T[i], Q[i], V[i])`` (``Q``, ``V``
    validated finite, shape (B, n)), without the diagnostics of a StepResult:
    accelerations into ``A_out`` (B, n), multipliers into ``L_out`` (B, m) if
    ``want_lam``, and per row the status into ``status_out``: the step's, or -1 when the
    step is fine but the force has a part in ``null(M)`` (the objective-mismatch check
    runs in Python). Releases the GIL: threads with contexts of their own run parts of
    a batch at once."""
    md = ctx.md
    buf = ctx.buf
    w = ctx.w
    n = md.dims[MS.D_N]
    m = md.dims[MS.D_M]
    fns, accel = functions(ctx.addrs)
    for i in range(Q.shape[0]):
        s = MS.evaluate_step(fns, accel, md, buf, ctx.opt, ref, ctx.sref, T[i], Q[i], V[i],
                            A_out[i], want_lam, w)[0]
        if s == 0 and null_force(ctx.P, buf.F, n) > NULL_FORCE_RTOL:
            s = -1
        status_out[i] = s
        if s == 0 and want_lam:
            lam = wvec(w, WS.F_lam, m)
            for j in range(m):
                L_out[i, j] = lam[j]


PREFETCH += [solve_at, make_context]    # (compiled ahead with the engine: gaussopt.core.compiled)
