"""The compiled model functions of every kind of multibody model, written once.

A *kind* of multibody model -- planar bodies (:mod:`gaussopt.multibody.planar.compiled_model`),
spatial bodies in Euler parameters (:mod:`gaussopt.multibody.spatial.compiled_model`) -- is a
module that packs a model into one ``float64`` array ``p`` and evaluates it with compiled
functions of one interface. The engine's functions of the model signature
(:data:`gaussopt.core.model_interface.SIGNATURE`) -- the dense five ``dyn, rows, pos, vel,
energy`` of :class:`~gaussopt.core.model_interface.ModelFunctions` and the sparse three
``dyn, rows, pos`` of :class:`~gaussopt.core.model_interface.SparseModel` -- only unwrap the
pointers into arrays and call the kind's functions, so they are written here once, as
templates, and :class:`KindFunctions` makes them for a kind.

What a kind module defines
--------------------------
=================================================  ===========================================
name                                               what
=================================================  ===========================================
``LAYOUT``                                         its tag in ``p[H_TAG]`` (a float)
``H_TAG, H_LEN, H_NB, H_M, H_PYTHON``              the first five header slots, as here: the
                                                   tag, ``len(p)``, bodies, equations, whether
                                                   the model has Python callables
``sizes(p) -> (n, m, nd)``                         coordinates, equations and the values
                                                   ``mass_blocks`` writes (``3 nb, m, 3 nb``
                                                   planar, ``7 nb, m, 19 nb`` spatial; a
                                                   ``jit`` function that Python calls too,
                                                   as its ``py_func``)
``mass(p, q, M)``                                  ``M(q)``, (n, n)
``force(p, q, v, ext, F)``                         ``F(q, v)``, (n,)
``phi(p, q, drv, out)``                            ``Phi(q)``, (m,)
``rows(p, q, v, drv, A, b, with_gamma)``           ``Phi_q`` (m, n), ``gamma`` (m,)
``phi_t(p, q, drv, out)``                          ``Phi_t``, (m,)
``energy(p, q, v) -> float``                       the mechanical energy
``mass_force(p, q, v, ext, M, F)``                 ``M`` and ``F`` in one pass (optional: a kind
                                                   whose two share their kinematics; the
                                                   compiled ``dyn`` then calls it alone)
``recursive_step(p, q, v, out)``                   the O(n) step of the model (optional:
                                                   :class:`~gaussopt.core.model_interface.RecursiveModel`)
``mass_blocks(p, q, d)``                           the diagonal blocks of ``M`` packed for
                                                   :mod:`gaussopt.gauss.band_step`
``sparse_values(p, q, v, datap, ph, b,``           ``Phi_q`` in the kind's CSR pattern at the
``want_phi, with_gamma)``                          address ``datap``, in the same pass ``Phi``
                                                   into ``ph`` and ``gamma`` into ``b`` when asked
=================================================  ===========================================

(compiled functions: units or ``jit``; the compiled model functions pass empty ``drv`` and
``ext``, since a model with Python callables has none: ``p[:0]``, a view of an input,
where ``np.zeros(0)`` would allocate at every call; an unused output stays a new empty
array, so that no kind can write into ``p``). ``mass_blocks`` and
``sparse_values`` go together and are optional: a kind without them has no sparse
evaluation. Nothing here counts coordinates per body: a kind whose bodies differ in
their coordinates (joint coordinates of a tree) says how many a model has in ``sizes``.

How the templates become a kind's functions, and stay cached
------------------------------------------------------------
Not as closures: numba keys the cache entry of a closure on a pickle of its cells, and a
compiled function pickles with an identifier drawn afresh in every process (checked with
numba 0.68: the key of a closure over ``planar.compiled_model.mass`` differs between two
processes), so a closure over a kind's functions would be compiled again by every process.
Instead each template's code object is bound to a namespace of its own per kind
(:class:`types.FunctionType`): this module's names plus ``kind``, the kind's module, and
``__name__``, the kind's module name. numba resolves ``kind.mass`` and
``kind.LAYOUT`` when it compiles (a call through the unit's pointer, a constant); the
cache key is the template's bytecode, the cache file is named after the function's module
(the kind's: :class:`gaussopt.core.compiled._Locator`), so each kind's functions are
compiled once per machine and loaded from :func:`gaussopt.core.compiled.code_cache_dir`
after, as every other function of gaussopt; and the cache is stamped with the hash of the
whole package's source, so editing a kind's functions compiles them afresh. The made
functions carry the kind's module name (``gaussopt.multibody.planar.compiled_model._dyn``):
:func:`gaussopt.core.compiled.ensure` and its helper process find them by importing the
kind's module.
"""

from __future__ import annotations

import types
from typing import Optional

import numba as nb
import numpy as np

from gaussopt.core.compiled import cfunc, jit
from gaussopt.core.model_interface import SIGNATURE, RecursiveModel, SparseModel, recursive_size
from gaussopt.gauss.dense_algebra import matvec as _matvec
from gaussopt.model.model_functions import kernel_factory

__all__ = ["H_TAG", "H_LEN", "H_NB", "H_M", "H_PYTHON", "KindFunctions", "vec", "mat"]

#: the header slots every kind's ``p`` begins with
H_TAG, H_LEN, H_NB, H_M, H_PYTHON = range(5)

_jit = jit(cache=True, error_model="numpy")


@_jit
def vec(ptr, k):
    """The ``k`` float64 values at the address ``ptr`` as an array."""
    return nb.carray(ptr, (k,), np.float64)


@_jit
def mat(ptr, k, n):
    """The ``k x n`` float64 values (row-major) at the address ``ptr`` as an array."""
    return nb.carray(ptr, (k, n), np.float64)


@_jit
def _param(pp):
    """The parameter array behind the pointer ``pp`` (its length in slot ``H_LEN``)."""
    return vec(pp, int(vec(pp, H_LEN + 1)[H_LEN]))


@_jit
def _usable(p, layout):
    """The compiled functions run only models of their kind without Python callables."""
    return p[H_TAG] == layout and p[H_PYTHON] == 0.0


# =========================================================================== templates
#: the kind's module in a made function's namespace (:class:`KindFunctions`); the templates
#: below are never compiled in this module's own namespace
kind: Optional[types.ModuleType] = None


def _dyn(t, qp, vp, pp, Mp, Fp):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    q, v = vec(qp, n), vec(vp, n)
    kind.mass(p, q, mat(Mp, n, n))
    kind.force(p, q, v, p[:0], vec(Fp, n))
    return 0


def _dyn_one_pass(t, qp, vp, pp, Mp, Fp):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    kind.mass_force(p, vec(qp, n), vec(vp, n), p[:0], mat(Mp, n, n), vec(Fp, n))
    return 0


def _rows(t, qp, vp, pp, Ap, bp):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    kind.rows(p, vec(qp, n), vec(vp, n), p[:0], mat(Ap, m, n), vec(bp, m), True)
    return 0


def _pos(t, qp, pp, phip, Jp, phitp):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    q = vec(qp, n)
    kind.phi(p, q, p[:0], vec(phip, m))
    kind.rows(p, q, q, p[:0], mat(Jp, m, n), np.zeros(0), False)
    kind.phi_t(p, q, p[:0], vec(phitp, m))
    return 0


def _vel(t, qp, vp, pp, rp, Jvp):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    v = vec(vp, n)
    J = mat(Jvp, m, n)
    kind.rows(p, vec(qp, n), v, p[:0], J, np.zeros(0), False)
    _matvec(J, v, vec(rp, m))          # Phi_q v (+ Phi_t = 0: no callable drives here)
    return 0


def _energy(t, qp, vp, pp, ep, unused):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    vec(ep, 1)[0] = kind.energy(p, vec(qp, n), vec(vp, n))
    return 0


def _sparse_dyn(t, qp, vp, pp, dp, Fp):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    q = vec(qp, n)
    kind.mass_blocks(p, q, vec(dp, nd))
    kind.force(p, q, vec(vp, n), p[:0], vec(Fp, n))
    return 0


def _sparse_rows(t, qp, vp, pp, datap, bp):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    b = vec(bp, m)
    kind.sparse_values(p, vec(qp, n), vec(vp, n), datap, b, b, False, True)
    return 0


def _sparse_pos(t, qp, pp, phip, datap, phitp):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return 1
    n, m, nd = kind.sizes(p)
    q = vec(qp, n)
    ph = vec(phip, m)
    kind.sparse_values(p, q, q, datap, ph, ph, True, False)     # Phi and Phi_q in one pass
    kind.phi_t(p, q, p[:0], vec(phitp, m))
    return 0


def _recursive(t, qp, vp, pp, outp, unused):
    p = _param(pp)
    if not _usable(p, kind.LAYOUT):
        return -1
    n, m, nd = kind.sizes(p)
    return kind.recursive_step(p, vec(qp, n), vec(vp, n), vec(outp, recursive_size(n, m)))


_DENSE = (_dyn, _rows, _pos, _vel, _energy)
_SPARSE = (_sparse_dyn, _sparse_rows, _sparse_pos)
#: what a kind module must define (the table of the module docstring), and what it may
_INTERFACE = ("LAYOUT", "sizes", "mass", "force", "phi", "rows", "phi_t", "energy")
_SPARSE_INTERFACE = ("mass_blocks", "sparse_values")
#: the kinds made so far, by module name (each is made once: its functions' cache files
#: are named after it)
_KINDS: dict = {}


class KindFunctions:
    """The compiled model functions of one kind of multibody model, made from the
    templates of this module (see the module docstring).

    Parameters
    ----------
    kind : module
        The kind's module (it defines the names of the module docstring's table); made
        once per module, at its import: ``KindFunctions(sys.modules[__name__])`` at its end.

    Attributes
    ----------
    functions : tuple
        The cfuncs ``(dyn, rows, pos, vel, energy)`` of every model of the kind.
    sparse_functions : tuple
        The cfuncs ``(dyn, rows, pos)`` of the kind's sparse evaluation (empty for a kind
        without one).
    """

    def __init__(self, kind: types.ModuleType) -> None:
        name = kind.__name__
        missing = [x for x in _INTERFACE if not hasattr(kind, x)]
        sparse = [hasattr(kind, x) for x in _SPARSE_INTERFACE]
        if any(sparse) and not all(sparse):
            missing += [x for x, has in zip(_SPARSE_INTERFACE, sparse) if not has]
        header = [x for x, k in zip(("H_TAG", "H_LEN", "H_NB", "H_M", "H_PYTHON"), range(5))
                  if getattr(kind, x, None) != k]
        if missing or header:
            raise TypeError(f"{name} is not a kind of multibody model: it lacks {missing}, its "
                            f"header slots {header} differ from gaussopt.multibody.common.cfuncs'.")
        if name in _KINDS:
            raise RuntimeError(f"the compiled functions of {name} are made already "
                               "(once per module: their cache files are named after it).")
        _KINDS[name] = self
        ns = dict(globals())
        ns.update(__name__=name, kind=kind)
        self._sizes = kind.sizes.py_func
        dense = ((_dyn_one_pass,) + _DENSE[1:]) if hasattr(kind, "mass_force") else _DENSE
        self.functions = tuple(self._make(f, ns) for f in dense)
        self.sparse_functions = tuple(self._make(f, ns) for f in _SPARSE) if all(sparse) else ()
        self.recursive_functions = ((self._make(_recursive, ns),)
                                    if hasattr(kind, "recursive_step") else ())

    @staticmethod
    def _make(template, ns: dict) -> cfunc:
        fn = types.FunctionType(template.__code__, ns, template.__name__)
        fn.__qualname__ = template.__qualname__
        return cfunc(SIGNATURE, error_model="numpy")(fn)

    def compiled_factory(self, p: np.ndarray, system):
        """A factory of the engine's :class:`~gaussopt.core.model_interface.ModelFunctions`
        for ``system`` (the assembled system of the model packed in ``p``; fresh buffers per
        run)."""
        _check_compiled(p)
        n, m, _ = self._sizes(p)
        return kernel_factory(self.functions, p, n, m, system, system.constant_mass is not None)

    def sparse_model(self, p: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                     block_ptr: Optional[np.ndarray] = None) -> SparseModel:
        """The sparse evaluation of the model packed in ``p``
        (:class:`~gaussopt.core.model_interface.SparseModel`) in the CSR pattern ``(indptr,
        indices)`` of its ``Phi_q``, for the O(n) step of :mod:`gaussopt.gauss.band_step`;
        ``block_ptr`` the first coordinate of every diagonal block of ``M`` (None: ``M``
        diagonal)."""
        _check_compiled(p)
        if not self.sparse_functions:
            raise ValueError("this kind of multibody model has no sparse evaluation.")
        n, m, _ = self._sizes(p)
        return SparseModel(fns=self.sparse_functions, p=p, n=n, m=m, indptr=indptr,
                           indices=indices, block_ptr=block_ptr)

    def recursive_model(self, p: np.ndarray) -> RecursiveModel:
        """The recursive O(n) step of the model packed in ``p``
        (:class:`~gaussopt.core.model_interface.RecursiveModel`)."""
        _check_compiled(p)
        if not self.recursive_functions:
            raise ValueError("this kind of multibody model has no recursive step.")
        n, m, _ = self._sizes(p)
        return RecursiveModel(fns=self.recursive_functions, p=p, n=n, m=m)


def _check_compiled(p: np.ndarray) -> None:
    if p[H_PYTHON] != 0.0:
        raise ValueError("a model with Python callables has no compiled functions.")
