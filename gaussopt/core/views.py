"""Views into compiled code's flat buffers, as numba intrinsics: a few instructions each.

A workspace of compiled code is a pair ``(f, i)`` of a float64 buffer and an int64
table of offsets (field ``k`` of ``f`` runs from ``i[k]`` to ``i[k + 1]``; see
:mod:`gaussopt.gauss.workspace`). :func:`wvec`, :func:`wfull`, :func:`wivec` and
:func:`wmat` return a field as a C-contiguous vector or matrix that borrows the buffer's
memory; :func:`as_matrix` reshapes a contiguous vector the same way, and :func:`carve`
takes an array of any shape from a contiguous vector at an offset (a kernel's scratch
arrays, all from one buffer allocated per call). They are intrinsics,
not functions: an inlined function costs numba a copy of its code at every call site, and
a compiled function without reference counting may not return an array from a call.
"""

from __future__ import annotations

import numba as nb
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.np.arrayobj import make_array, populate_array

__all__ = ["wvec", "wfull", "wivec", "wmat", "as_matrix", "carve"]


# The views of the workspace are intrinsics: a few instructions each where they are used
# (an inlined function costs numba a copy of its code at every call site, and a function
# without reference counting may not return an array from a call).
def _work_arrays(context, builder, wty, wv):
    """The float and integer buffers of the workspace value ``wv`` (numba arrays)."""
    f = make_array(wty.types[0])(context, builder, builder.extract_value(wv, 0))
    i = make_array(wty.types[1])(context, builder, builder.extract_value(wv, 1))
    return f, i


def _offset(context, builder, iarr, fld, fty, plus=0):
    """``w.i[fld + plus]`` (an intp)."""
    intp = context.get_value_type(nb.types.intp)
    k = context.cast(builder, fld, fty, nb.types.intp)
    if plus:
        k = builder.add(k, intp(plus))
    return builder.load(builder.gep(iarr.data, [k]))


def _make_view(context, builder, retty, src, data, dims):
    """A borrowed view of ``src``'s memory at ``data``, C-contiguous, of shape ``dims``."""
    intp = context.get_value_type(nb.types.intp)
    item = intp(context.get_abi_sizeof(context.get_data_type(retty.dtype)))
    strides = []
    acc = item
    for d in reversed(dims):
        strides.insert(0, acc)
        acc = builder.mul(acc, d)
    out = make_array(retty)(context, builder)
    populate_array(out, data=data, shape=cgutils.pack_array(builder, dims, ty=intp),
                   strides=cgutils.pack_array(builder, strides, ty=intp),
                   itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
    return impl_ret_borrowed(context, builder, retty, out._getvalue())


def _is_work(w) -> bool:
    return (isinstance(w, nb.types.BaseTuple) and len(w) == 2
            and all(isinstance(t, nb.types.Array) and t.ndim == 1 and t.layout == "C"
                    for t in w.types))


@nb.extending.intrinsic
def wvec(typingctx, w, fld, n):
    """The first ``n`` entries of the float field ``fld`` of the workspace ``w`` (a view)."""
    if not _is_work(w):
        return None
    ret = w.types[0]

    def codegen(context, builder, sig, args):
        f, i = _work_arrays(context, builder, sig.args[0], args[0])
        o = _offset(context, builder, i, args[1], sig.args[1])
        nn = context.cast(builder, args[2], sig.args[2], nb.types.intp)
        return _make_view(context, builder, ret, f, builder.gep(f.data, [o]), [nn])
    return ret(w, fld, n), codegen


@nb.extending.intrinsic
def wfull(typingctx, w, fld):
    """The whole float field ``fld`` (a view)."""
    if not _is_work(w):
        return None
    ret = w.types[0]

    def codegen(context, builder, sig, args):
        f, i = _work_arrays(context, builder, sig.args[0], args[0])
        o = _offset(context, builder, i, args[1], sig.args[1])
        o1 = _offset(context, builder, i, args[1], sig.args[1], plus=1)
        return _make_view(context, builder, ret, f, builder.gep(f.data, [o]),
                          [builder.sub(o1, o)])
    return ret(w, fld), codegen


@nb.extending.intrinsic
def wivec(typingctx, w, fld, n):
    """The first ``n`` entries of the integer field ``fld`` (a view)."""
    if not _is_work(w):
        return None
    ret = w.types[1]

    def codegen(context, builder, sig, args):
        f, i = _work_arrays(context, builder, sig.args[0], args[0])
        o = _offset(context, builder, i, args[1], sig.args[1])
        nn = context.cast(builder, args[2], sig.args[2], nb.types.intp)
        return _make_view(context, builder, ret, i, builder.gep(i.data, [o]), [nn])
    return ret(w, fld, n), codegen


@nb.extending.intrinsic
def wmat(typingctx, w, fld, r, c):
    """The first ``r * c`` entries of the float field ``fld`` as a C-contiguous ``(r, c)``
    matrix (a view)."""
    if not _is_work(w):
        return None
    ret = w.types[0].copy(ndim=2, layout="C")

    def codegen(context, builder, sig, args):
        f, i = _work_arrays(context, builder, sig.args[0], args[0])
        o = _offset(context, builder, i, args[1], sig.args[1])
        rr = context.cast(builder, args[2], sig.args[2], nb.types.intp)
        cc = context.cast(builder, args[3], sig.args[3], nb.types.intp)
        return _make_view(context, builder, ret, f, builder.gep(f.data, [o]), [rr, cc])
    return ret(w, fld, r, c), codegen


@nb.extending.intrinsic
def as_matrix(typingctx, x, r, c):
    """The first ``r * c`` entries of a contiguous vector ``x`` as a C-contiguous
    ``(r, c)`` matrix: a view sharing ``x``'s data and owner (no call, unlike numba's
    ``reshape``; allowed in a function without reference counting, unlike ``as_strided``,
    which numba compiles as a function returning a new array)."""
    if not (isinstance(x, nb.types.Array) and x.ndim == 1 and x.layout == "C"):
        return None
    ret = x.copy(ndim=2, layout="C")

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        rr = context.cast(builder, args[1], sig.args[1], nb.types.intp)
        cc = context.cast(builder, args[2], sig.args[2], nb.types.intp)
        return _make_view(context, builder, ret, src, src.data, [rr, cc])
    return ret(x, r, c), codegen


@nb.extending.intrinsic
def carve(typingctx, x, o, dims):
    """The ``prod(dims)`` entries of a contiguous vector ``x`` from offset ``o`` as a
    C-contiguous array of shape ``dims`` (a tuple of integers): a view sharing ``x``'s
    data and owner, without a bounds check (the caller sizes ``x``). What lets a kernel
    take all its scratch arrays from one buffer allocated once per call: numba allocates
    every ``np.empty`` (about 30 ns each), and without reference counting a function may
    not return the views an ordinary function would carve."""
    if not (isinstance(x, nb.types.Array) and x.ndim == 1 and x.layout == "C"
            and isinstance(o, nb.types.Integer) and isinstance(dims, nb.types.BaseTuple)
            and len(dims) > 0 and all(isinstance(t, nb.types.Integer) for t in dims)):
        return None
    ret = x.copy(ndim=len(dims), layout="C")

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        off = context.cast(builder, args[1], sig.args[1], nb.types.intp)
        shape = [context.cast(builder, builder.extract_value(args[2], k), t, nb.types.intp)
                 for k, t in enumerate(sig.args[2].types)]
        return _make_view(context, builder, ret, src, builder.gep(src.data, [off]), shape)
    return ret(x, o, dims), codegen
