"""The workspace of the dense Gauss step: one flat buffer, its fields by number.

Everything the dense step (:mod:`gaussopt.gauss.dense_step`) and its algebra
(:mod:`gaussopt.gauss.dense_algebra`) write lives in one :data:`Work` per problem size
and thread: a float64 buffer ``f`` and an int64 table ``i`` of the fields' offsets
(``F_*`` float fields, ``I_*`` integer fields), made by :func:`make_work_compiled`. Nothing
is allocated on the hot path; compiled code takes a field as a view
(:mod:`gaussopt.core.views`), Python with :func:`view` or :func:`field`.
"""

from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from gaussopt.core.compiled import declare_types, jit, unit
from gaussopt.core.views import wmat, wvec

__all__ = ["Work", "make_work_compiled", "view", "field", "svd_views",
           "F_nu", "F_An", "F_bn", "F_X", "F_Q", "F_R", "F_hv", "F_tau",
           "F_Y", "F_W", "F_Vk", "F_norms", "F_U", "F_s", "F_V", "F_beta",
           "F_proj", "F_MN", "F_H", "F_LH", "F_a", "F_a2", "F_g", "F_z",
           "F_pp", "F_e", "F_fk", "F_Kk", "F_xk", "F_lam", "F_coef", "F_U2",
           "F_s2", "F_V2", "F_Al", "F_bb", "F_D", "F_LD", "F_mu", "I_live", "I_order",
           "I_tree", "I_flag", "set_mass_tree"]

_inline = jit(cache=True, nogil=True, _nrt=False, inline="always")

# --------------------------------------------------------------------------- workspace
#: The workspace of one problem size ``(n, m)``: ``Work(f, i)``, one float buffer
#: ``f`` holding every float array of the kernel and one integer buffer ``i`` whose
#: first entries are the offsets of the fields (``f[i[F]:i[F + 1]]`` is the float
#: field ``F``; the integer fields follow the offsets). Two arrays instead of one per
#: field: numba passes a tuple of arrays by value into every call, and a tuple of
#: 37 arrays cost ~0.25 us per call of :func:`svd`. Matrices are stored flat,
#: row-major, and viewed with their live sizes (:func:`wmat`).
Work = namedtuple("Work", ["f", "i"])


@declare_types
def _types():
    return {"w": nb.types.NamedTuple([nb.types.float64[::1], nb.types.int64[::1]], Work)}


# float fields (k = min(m, n), p = max(m, n)) and their sizes
F_nu = 0


F_An = 1


F_bn = 2


F_X = 3


F_Q = 4


F_R = 5


F_hv = 6


F_tau = 7


F_Y = 8


F_W = 9


F_Vk = 10


F_norms = 11


F_U = 12


F_s = 13


F_V = 14


F_beta = 15


F_proj = 16


F_MN = 17


F_H = 18


F_LH = 19


F_a = 20


F_a2 = 21


F_g = 22


F_z = 23


F_pp = 24


F_e = 25


F_fk = 26


F_Kk = 27


F_xk = 28


F_lam = 29


F_coef = 30


F_U2 = 31


F_s2 = 32


F_V2 = 33


F_Al = 34


F_bb = 35            # (m) the rows' right-hand side with Baumgarte's terms (engine)


# the range-space solve (:func:`gaussopt.gauss.dense_step.range_space`; its augmented mass
# matrix, factor and ``L^-1 V_r`` use the fields ``H``, ``LH`` and ``MN``)
F_D = 36             # (k, k) the Delassus matrix of the kept rows


F_LD = 37            # (k, k) its Cholesky factor


F_mu = 38            # (k) its right-hand side, then the multipliers of the kept rows


_NF = 39


# integer fields
I_live = 40


I_order = 41


#: (2 n + 1) the structure of the mass matrix, if the model gives it: entry 0 is 1 when
#: the next n hold each coordinate's parent in a tree whose every entry ``M[i, j] != 0``
#: has ``j`` an ancestor of ``i`` or ``i`` of ``j`` (parents numbered first; -1 a root),
#: and the last n the first coordinate of each one's *run* (the longest chain ``s, s + 1,
#: ..., i`` of coordinates each the parent of the next: a joint's coordinates, a branch
#: without forks), else 0 (a dense ``M``; :func:`set_mass_tree`,
#: :func:`gaussopt.gauss.dense_step.range_space`)
I_tree = 42


#: (1) bit 1: the last :func:`gaussopt.gauss.dense_algebra.svd_into` took its shortcut for
#: rows with disjoint supports and left no Householder reflectors for ``svd_complete``
I_flag = 43


_NI = 4


@unit("w(i8, i8)", python=True, nogil=True, _nrt=True)
def make_work_compiled(n, m):
    """A workspace for ``n`` coordinates and ``m`` rows (see :data:`Work`)."""
    k = min(m, n)
    p = max(m, n, 1)
    m1 = max(m, 1)
    k1 = max(k, 1)
    sizes = (m1, m1 * n, m1, p * k1, p * p, k1 * k1, p * k1, k1, k1 * k1, k1 * k1, n * k1, k1, m1 * k1, k1, n * n, k1, m1, n * n, n * n, n * n, n, n, n, n, n, m1, k1, (n + k) * (n + k), n + k, m1, k1, m1 * k1, k1, n * n, m1 * n, m1, k1 * k1, k1 * k1, k1)
    head = _NF + 1 + _NI + 1
    iw = np.zeros(head + m1 + k1 + 2 * n + 1 + 1, dtype=np.int64)
    off = 0
    for j in range(_NF):
        iw[j] = off
        off += sizes[j]
    iw[_NF] = off
    iw[I_live] = head
    iw[I_order] = head + m1
    iw[I_tree] = head + m1 + k1
    iw[I_flag] = head + m1 + k1 + 2 * n + 1
    iw[I_flag + 1] = head + m1 + k1 + 2 * n + 2
    return Work(np.zeros(off), iw)


def set_mass_tree(w, parents) -> None:
    """Record in the workspace ``w`` that the mass matrix has the sparsity of the tree
    ``parents`` (each coordinate's parent, parents first, -1 a root; :data:`I_tree`), or
    that it is dense (``None``)."""
    t = view(w, "tree")
    t[:] = 0
    if parents is not None:
        parents = np.asarray(parents, dtype=np.int64)
        n = (t.shape[0] - 1) // 2
        if parents.shape != (n,) or np.any(parents >= np.arange(n)) or np.any(parents < -1):
            raise ValueError(f"`parents` must give each of the {n} coordinates a parent "
                             f"numbered before it (or -1), found {parents!r}")
        t[1:n + 1] = parents
        for i in range(n):
            t[n + 1 + i] = t[n + i] if i > 0 and parents[i] == i - 1 else i
        t[0] = 1


@_inline
def svd_views(w, fU, fs, fV, m, n):
    """Views ``U`` (m, k), ``s`` (k,), ``V`` (n, n) of what :func:`svd_into` wrote into
    the fields ``fU``, ``fs``, ``fV`` for an (m, n) matrix, ``k = min(m, n)``."""
    k = min(m, n)
    return wmat(w, fU, m, k), wvec(w, fs, k), wmat(w, fV, n, n)


def view(w, name, *shape):
    """A field of the workspace from Python: ``view(w, "U", m, k)`` (a view)."""
    if name in _INT_FIELDS:
        fld = _INT_FIELDS[name]
        o = int(w.i[fld])
        size = int(np.prod(shape)) if shape else int(w.i[fld + 1]) - o
        return w.i[o:o + size].reshape(shape) if shape else w.i[o:o + size]
    fld = _FLOAT_FIELDS[name]
    o = int(w.i[fld])
    size = int(np.prod(shape)) if shape else int(w.i[fld + 1]) - o
    return w.f[o:o + size].reshape(shape) if shape else w.f[o:o + size]


def field(w, fld):
    """The whole float field number ``fld`` of the workspace from Python (a view):
    ``field(w, fa)`` is the ``a`` of :func:`gauss_step`."""
    return w.f[int(w.i[fld]):int(w.i[fld + 1])]


_FLOAT_FIELDS = {"nu": F_nu, "An": F_An, "bn": F_bn, "X": F_X, "Q": F_Q, "R": F_R, "hv": F_hv, "tau": F_tau, "Y": F_Y, "W": F_W, "Vk": F_Vk, "norms": F_norms, "U": F_U, "s": F_s, "V": F_V, "beta": F_beta, "proj": F_proj, "MN": F_MN, "H": F_H, "LH": F_LH, "a": F_a, "a2": F_a2, "g": F_g, "z": F_z, "pp": F_pp, "e": F_e, "fk": F_fk, "Kk": F_Kk, "xk": F_xk, "lam": F_lam, "coef": F_coef, "U2": F_U2, "s2": F_s2, "V2": F_V2, "Al": F_Al, "bb": F_bb, "D": F_D, "LD": F_LD, "mu": F_mu}


_INT_FIELDS = {"live": I_live, "order": I_order, "tree": I_tree, "flag": I_flag}
