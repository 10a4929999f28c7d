"""The O(n) Gauss step of large mechanisms: certified full rank, banded range-space solve.

The dense kernel (:mod:`gaussopt.gauss.dense_step`) decides the rank of every step by an
SVD of the normalized rows and forms an ``n x n`` basis: ``O(n^3)``, 50 ms at
483 coordinates. Most steps of a large mechanism do not need that decision:
its rows have full rank with a wide margin and its mass matrix is diagonal.
This module answers those steps in ``O(n)`` (for a fixed bandwidth) and hands
every other step to the dense kernel, which then decides exactly as before.

**Data** (:class:`gaussopt.core.model_interface.SparseModel`, e.g. from
:mod:`gaussopt.multibody`): the diagonal ``d`` of ``M``, ``F``, the rows ``A``
in a fixed CSR pattern and ``b``. With ``w = trace(M)/n``, ``H = M/w``
(diagonal, ``h_i = d_i/w``), ``g = F/w``, the normalized rows ``An = A/nu``,
``bn = b/nu`` (``nu_i`` the row norms, as the dense kernel normalizes them),
the step is ``H a = g + An^T mu``, ``An a = bn`` (Lagrange's equations;
``lam_i = w mu_i / nu_i`` are the multipliers of ``A`` with the dense kernel's
convention ``M a = F + A^T lam``).

**Range-space solve.** Eliminating ``a = H^-1 (g + An^T mu)`` leaves
``S mu = bn - An H^-1 g`` with ``S = An H^-1 An^T`` (m x m, symmetric).
Its pattern (rows sharing a coordinate) is fixed: a reverse Cuthill--McKee
order of the rows, computed once (:func:`make_structure`), makes ``S`` a band
of half-bandwidth ``kb`` (12 for the N-four-bar at every N), which is formed
from precomputed index pairs in ``O(nnz)`` and factored by a band Cholesky in
``O(m kb^2)`` (:mod:`gaussopt.gauss.banded`).

**Block mass.** ``M`` may also be block diagonal with small dense blocks on
consecutive coordinates (:attr:`gaussopt.core.model_interface.SparseModel.block_ptr`; a spatial
body's ``4 G^T J G`` of its Euler parameters, a 4 x 4 block of rank 3). A row
that touches a block holds all of its columns, so ``H^-1 An_i^T`` is formed
within the row's own entries. A block may be singular when rows lying inside it
fix its null space (the normalization ``p . p'' = -p' . p'`` of the Euler
parameters): every row ``i`` inside a block of more than one coordinate adds
``rho An_i^T An_i`` to the block and ``rho An_i^T bn_i`` to ``g`` (``rho`` the
block's mean diagonal entry). On the feasible set that adds a constant to the
Gauss function, so the minimizer is the same (the augmented Lagrangian), and
``N^T H N`` (``N`` a basis of ``null(An)``) is unchanged, so the certification
below holds with the regularized ``H`` (its smallest eigenvalue bounded below by
``1 / |H_B^-1|_F`` per block). The multipliers of those rows are ``mu_i + rho r_i``
(``r`` the final residual), and the verification uses the model's own ``M`` and ``F``.

**Redundant rows.** A linkage whose rows are exactly redundant at every state (the
Bricard linkage: 30 joint equations of rank 29) never has full row rank, and the
dense kernel drops the redundant direction at every step. After it has done so
(one direction, every row live), the engine sets aside the row with the largest
component in the left null vector (:func:`set_aside`): the other rows have full
rank, and the path solves on them (the row set aside decoupled in ``S``, its
multiplier zero) -- certified as above -- and then requires the row set aside to
hold as well, to the verification's tolerance. A minimum of the Gauss function on
the other rows that satisfies the row set aside is the minimum on all rows: the
answer of the dense kernel, which drops the dependent direction. Where the row is
not implied (off the constraints, or the redundancy ends), the check fails and the
dense kernel decides (and clears or renews the choice). The multipliers are made
the dense kernel's minimum-norm ones (redundant rows share the force): the
component along the left null vector of the rows, found by one more band solve, is
removed. Two or more redundant directions are not answered this way,
where a fold of the linkage cannot be told from a persistent redundancy without the
dense kernel's second-order analysis (:func:`gaussopt.integrate.engine.fold_rows`). The
projection's correction sets the same row aside and requires its residual to fall
to second order.

**Certification** (the guarantee: the fast path answers only where the dense
kernel would have found full row rank and a determinate motion, with a margin
``MARGIN = 1e3``; otherwise it refuses and the dense kernel decides):

* ``M`` diagonal (or block diagonal, regularized as above) with ``h_i >= MARGIN rank_tol``
  (the smallest eigenvalue of each block) (so the reduced Hessian
  ``N^T H N``, eigenvalues ``>= min h_i``, is positive definite far above the
  dense kernel's pivot threshold ``rank_tol^2``), ``0 < m <= n``;
* no row near vanishing: ``nu_i > MARGIN rank_tol ref_i`` (the dense kernel
  drops rows with ``nu_i <= rank_tol ref_i``, :func:`gaussopt.gauss.dense_step.reduce_rows`);
* ``sigma_min(An) >= T = MARGIN max(rank_tol, FOLD_TOL sig_ref)`` (the dense
  kernel drops directions with ``s_k <= max(rank_tol, FOLD_TOL sig_ref)``). Since
  ``y^T S y = |H^-1/2 An^T y|^2 <= |An^T y|^2 / min h``,
  ``sigma_min(An)^2 >= min h * lambda_min(S)``; so it suffices that
  ``lambda_min(S) >= tau = T^2 / min h``. This is *proved*, not estimated: the
  band Cholesky of ``S - (tau + delta) I`` must run to completion, ``delta``
  the bound of the rounding errors of forming and factoring ``S``
  (:func:`gaussopt.gauss.banded.error_bound`; Rump's test of positive definiteness).
  The perturbation of ``An`` by the rounding of the normalization (a few ulps
  per entry) is covered by the margin.

**Solve and verification.** Once certified, ``S`` itself is factored (it is
positive definite: ``S - shift I`` is) and the factor is the preconditioner of an
iterative refinement of ``S mu = bn - An H^-1 g``: each step recomputes
``a = H^-1 (g + An^T mu)`` and the residual ``bn - An a`` exactly as the
verification does, and contracts the error by about ``kappa(S) eps`` (one or two
steps at regular states). (The shifted factor would contract it only by ``tau /
(lambda_min(S) - tau)``, which approaches 1 where ``M`` has small eigenvalues --
thin rods, ``J ~ m r^2`` -- and ``sig_ref`` raises ``tau``.) The result is then verified as the dense
kernel verifies its own (module docstring of :mod:`gaussopt.gauss.dense_step`, item 3):
the backward errors of feasibility ``|An a - bn| / (|a| + |bn|)`` (``s_1 >= 1``
replaced by its lower bound 1: stricter than the dense test) and of
stationarity ``|M a - F - A^T lam| / (|M|_F |a| + |F|)`` (which bounds the
dense kernel's ``|N^T (M a - F)|``) must not exceed
:func:`gaussopt.gauss.dense_step.direct_tolerance`. A result that fails is never
returned: the step goes to the dense kernel.

**Diagnostics.** The rank is ``m``; there is no inconsistency (full row
rank). ``sigma_min`` is an *estimate* (:func:`sigma_estimate`, only for a full
result, not on the hot path): ``|An^T y|`` for the ``y`` of three steps of
inverse iteration on ``An An^T`` (one more band Cholesky). It is never below
the true ``sigma_min(An)``, its error shrinks like ``(s_m / s_{m-1})^6``; the
certified lower bound is ``T``. No
other singular value is computed.

:func:`sparse_step` is the linear algebra with a status code (0 = answered),
on data already evaluated into the workspace. Its one caller is the engine's
:func:`gaussopt.gauss.model_step.evaluate_step`, which evaluates the sparse model, runs
it, and on any refusal evaluates the dense model and runs the dense kernel:
the step of :func:`~gaussopt.solve_step`, of batches and of
:func:`~gaussopt.simulate` alike. :func:`make_band` builds what it needs once
per model, for systems with a :class:`~gaussopt.core.model_interface.SparseModel` and at least
:data:`MIN_N` coordinates.

**The rest of a run on the same band** (the engine, while the rows keep full
rank): the projection's least-squares correction (:func:`correction`: the same
range-space solve with ``H = M``, the position Jacobian in the rows' pattern)
and the smallest singular pair of the rows scaled by their references
(:func:`smallest_pair`: inverse iteration on ``As As^T``, warm-started from the
pair of the previous accepted state), which the engine's rank monitor and its
nearness to a singular position need; where either cannot answer (the band
factor fails, the smallest value is not live), the engine takes the dense SVD
as before.

References
----------
J. Demmel, "On floating point errors in Cholesky", LAPACK Working Note 14 (1989).
S. M. Rump, "Verification of positive definiteness", BIT 46 (2006) 433-452.
E. Cuthill, J. McKee, "Reducing the bandwidth of sparse symmetric matrices",
Proc. 24th ACM National Conference (1969) 157-172.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Optional

import numba as nb
import numpy as np
from numba.core import types
from numba.experimental import structref

import gaussopt.gauss.banded as banded
import gaussopt.gauss.dense_step as K
import gaussopt.gauss.dense_algebra as LA
from gaussopt.core.compiled import declare_types, jit, unit
from gaussopt.core.status import (BAND_MODEL_FAILED, OK, REFUSED_DATA, REFUSED_MASS,  # noqa: F401
                                  REFUSED_MULTIPLIERS, REFUSED_SHAPE, REFUSED_UNCERTIFIED,
                                  REFUSED_VANISHED, UNVERIFIED)
from gaussopt.core.model_interface import SparseModel
from gaussopt.core.settings import MIN_N, TREE_MIN_N  # noqa: F401 - (gaussopt.gauss.band_step.MIN_N)

__all__ = ["Structure", "SparseWork", "make_structure", "make_work", "sparse_step", "sigma_estimate",
           "smallest_pair", "correction", "Band", "make_band", "band_work", "MIN_N", "MARGIN",
           "SPARSE_FLAG", "TREE_FLAG", "MODE_TREE", "TREE_MIN_N", "on_band"]

_EPS = float(np.finfo(float).eps)

#: margin of every certification test over the dense kernel's thresholds
MARGIN = 1e3
#: bit of the step's ``flags`` (:data:`gaussopt.gauss.compiled_step.S_FLAGS`): answered by this path
SPARSE_FLAG = 4
#: most refinement steps before the path gives up (the dense kernel takes the step)
MAX_REFINE = 8
#: inverse-iteration steps of the ``sigma_min`` estimate
SIGMA_ITERS = 3

# (the statuses of sparse_step are in :mod:`gaussopt.core.status`: 0 answered, anything else
# leaves the step to the dense kernel; :data:`~gaussopt.core.status.BAND_STATUS`)

#: How the path is compiled (:mod:`gaussopt.core.compiled`): its entry points are *lazy*
#: units, compiled the first time a model with the path runs. (``_nrt=True``
#: explicitly: a function without it inherits its caller's.)
_jit = jit(cache=True, nogil=True, _nrt=True)


def _unit(signature: str):
    return unit(signature, lazy=True, nogil=True, _nrt=True)

#: What is fixed per model (:func:`make_structure`): ``dims = (n, m, nnz, kb, maxrow,
#: nblk, nd, maxblk)`` (``maxrow`` the most entries of a row; ``nblk`` mass blocks with
#: ``nd`` packed entries, the largest of size ``maxblk``); the CSR
#: pattern ``indptr``, ``indices`` and each entry's row ``rowof``; ``pos`` the band
#: position of every row (the reverse Cuthill--McKee order); the index pairs forming
#: ``S``: entries ``pe1``, ``pe2`` of one column, added at ``pslot`` of the
#: flattened band; the mass blocks: first coordinate ``bptr`` (nblk + 1), offset
#: ``boff`` (nblk + 1) of the packed row-major values, the block ``bof`` of every
#: coordinate; the rows that regularize a block (``regrow``, grouped by their block
#: ``regblk``, those of block ``B`` at ``regptr[B]:regptr[B + 1]``:
#: module docstring, "Block mass").
Structure = namedtuple("Structure", ["dims", "indptr", "indices", "rowof", "pos", "pe1", "pe2",
                                     "pslot", "bptr", "boff", "bof", "regrow", "regblk",
                                     "regptr"])
#: The per-step arrays (:func:`make_work`): the model's outputs ``d`` (the mass blocks,
#: packed: the diagonal of a diagonal M), ``F``, ``data`` (A in the pattern), ``b``; ``h``
#: and ``g`` (M and F scaled), ``hi`` the inverses of the regularized blocks of size > 1
#: and ``gr`` the regularized force (module docstring); the normalized rows ``dn`` and
#: ``dw = H^-1 dn`` (per entry), other scratch (``wk``: two blocks), the results ``a`` (n)
#: and ``lam`` (m), ``Sb``/``Lb`` (m, kb + 1) the band of ``S`` and of its factor, and ``drop``
#: (m, int) the rows set aside as exactly redundant (module docstring, "Redundant rows").
SparseWork = namedtuple("SparseWork", ["d", "F", "data", "b", "h", "g", "nu", "dn", "dw", "bn", "Sb",
                                       "Lb", "a", "t", "mu", "r", "y", "lam", "hi", "gr", "wk", "drop"])


@declare_types
def _types() -> dict:
    """``spst``, ``spw``, ``band``: the numba types of :class:`Structure`,
    :class:`SparseWork` and :class:`Band` (for the units' signatures)."""
    st = _empty_structure(1)
    spst = nb.typeof(st)
    spw = nb.typeof(make_work(st))
    band = _BandType([("mode", types.int64), ("sp", spst), ("w", spw),
                      ("addrs", types.int64[::1]), ("p", types.float64[::1])])
    return {"spst": spst, "spw": spw, "band": band}


def _blocks(n: int, block_ptr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(bptr, boff, bof)`` of the mass blocks starting at ``block_ptr`` (None: the
    diagonal, every coordinate a block of its own)."""
    if block_ptr is None:
        bptr = np.arange(n + 1, dtype=np.int64)
    else:
        bptr = np.ascontiguousarray(block_ptr, dtype=np.int64)
        if (bptr.ndim != 1 or bptr.size < 1 or bptr[0] != 0 or bptr[-1] != n
                or np.any(np.diff(bptr) <= 0)):
            raise ValueError(f"`block_ptr` must rise strictly from 0 to n = {n} (the first "
                             f"coordinate of every mass block, then n); found {bptr.tolist()}.")
    size = np.diff(bptr)
    boff = np.concatenate([[0], np.cumsum(size * size)]).astype(np.int64)
    bof = np.repeat(np.arange(size.size, dtype=np.int64), size)
    return bptr, boff, bof


def make_structure(n: int, m: int, indptr: np.ndarray, indices: np.ndarray,
                   block_ptr: Optional[np.ndarray] = None) -> Structure:
    """The fixed structure of a sparse model (module docstring): the row order that
    makes ``S = An H^-1 An^T`` a narrow band, its bandwidth, the index pairs that form
    it, and the mass blocks (``block_ptr``, :class:`~gaussopt.core.model_interface.SparseModel`).

    A row that touches a block must hold all its coordinates, in order (``H^-1`` of the
    row is then formed within the row's own entries); a row inside one block of size
    > 1 regularizes that block (module docstring, "Block mass")."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    nnz = int(indptr[-1])
    if indptr.shape != (m + 1,) or indices.shape != (nnz,) or (nnz and (
            indices.min() < 0 or indices.max() >= n)):
        raise ValueError(f"a CSR pattern of shape ({m}, {n}) must have indptr of shape ({m + 1},) "
                         f"and {nnz} column indices in [0, {n}).")
    bptr, boff, bof = _blocks(n, block_ptr)
    size = np.diff(bptr)
    regrow, regblk = [], []
    for i in range(m):
        cols = indices[indptr[i]:indptr[i + 1]]
        blks = np.unique(bof[cols])
        want = np.concatenate([np.arange(bptr[b], bptr[b + 1]) for b in blks]) if blks.size else cols
        if not np.array_equal(cols, want):
            raise ValueError(f"row {i} of the sparse pattern has the columns {cols.tolist()}: a row "
                             f"that touches a mass block must hold all its columns in ascending "
                             f"order ({want.tolist()}).")
        if blks.size == 1 and size[blks[0]] > 1:
            regrow.append(i)
            regblk.append(int(blks[0]))
    rowof = np.repeat(np.arange(m, dtype=np.int64), np.diff(indptr))
    B = csr_matrix((np.ones(nnz), indices, indptr), shape=(m, n))
    G = (B @ B.T).tocsr()
    perm = reverse_cuthill_mckee(G, symmetric_mode=True) if m else np.zeros(0, np.int64)
    pos = np.empty(m, dtype=np.int64)
    pos[perm] = np.arange(m)
    Gc = G.tocoo()
    kb = banded.bandwidth(pos[Gc.row], pos[Gc.col])
    # pairs of entries sharing a column, each (i, j) of the lower band once
    order = np.argsort(indices, kind="stable")
    colptr = np.concatenate([[0], np.cumsum(np.bincount(indices, minlength=n))])
    pe1, pe2 = [], []
    for c in range(n):
        ents = order[colptr[c]:colptr[c + 1]]
        for e1 in ents:
            for e2 in ents:
                if pos[rowof[e2]] <= pos[rowof[e1]] and (e1 == e2 or rowof[e1] != rowof[e2]):
                    pe1.append(e1)
                    pe2.append(e2)
    pe1 = np.array(pe1, dtype=np.int64)
    pe2 = np.array(pe2, dtype=np.int64)
    pi, pj = pos[rowof[pe1]], pos[rowof[pe2]]
    pslot = pi * (kb + 1) + (pi - pj)
    maxrow = int(np.diff(indptr).max()) if m else 0
    dims = [n, m, nnz, kb, maxrow, size.size, int(boff[-1]), int(size.max()) if n else 1]
    return Structure(np.array(dims, dtype=np.int64), indptr, indices, rowof, pos,
                     pe1, pe2, pslot.astype(np.int64), bptr, boff, bof,
                     *_grouped(regrow, regblk, size.size))


def _grouped(regrow: list, regblk: list, nblk: int) -> tuple:
    """``(regrow, regblk, regptr)``: the regularizing rows sorted by block, and each
    block's range in them."""
    rb = np.array(regblk, dtype=np.int64)
    order = np.argsort(rb, kind="stable")
    regptr = np.concatenate([[0], np.cumsum(np.bincount(rb, minlength=nblk))]).astype(np.int64)
    return np.array(regrow, dtype=np.int64)[order], rb[order], regptr


def make_work(st: Structure) -> SparseWork:
    """The per-step arrays of :func:`sparse_step` for the structure ``st``."""
    n, m, nnz, kb = (int(x) for x in st.dims[:4])
    nd, mb = int(st.dims[6]), int(st.dims[7])
    z = np.zeros
    return SparseWork(z(nd), z(n), z(nnz), z(m), z(nd), z(n), z(m), z(nnz), z(nnz), z(m),
                      z((m, kb + 1)), z((m, kb + 1)), z(n), z(n), z(m), z(m), z(m), z(m),
                      z(nd), z(n), z(2 * mb * mb), np.zeros(m, dtype=np.int64))


@_jit
def _rows_t(st, vals, y, t):
    """``t = R^T y`` for the rows ``R`` with the values ``vals`` in the pattern."""
    for c in range(t.shape[0]):
        t[c] = 0.0
    for i in range(st.dims[1]):
        yi = y[i]
        for k in range(st.indptr[i], st.indptr[i + 1]):
            t[st.indices[k]] += vals[k] * yi


@_jit
def _form_band(st, w, left):
    """The band ``w.Sb`` of ``L R^T`` (``L`` with the values ``left``, ``R`` with ``w.dn``,
    both in the pattern; ``S`` itself when ``left`` is ``dn / h`` or ``dn``)."""
    Sf = w.Sb.reshape(w.Sb.shape[0] * w.Sb.shape[1])
    for k in range(Sf.shape[0]):
        Sf[k] = 0.0
    for p in range(st.pe1.shape[0]):
        Sf[st.pslot[p]] += left[st.pe1[p]] * w.dn[st.pe2[p]]


@_jit
def _block_inverse(x, o, s, wk):
    """The symmetric ``s x s`` block ``x[o:o + s^2]`` (row-major) replaced by its
    inverse, through its Cholesky factor (``wk``: ``2 s^2`` scratch). Returns the lower
    bound ``1 / |inverse|_F`` of its smallest eigenvalue, or ``-1.0`` (``x`` untouched)
    when a pivot is not positive: not positive definite to working precision."""
    ss = s * s
    for i in range(s):
        for j in range(i + 1):
            acc = x[o + i * s + j]
            for k in range(j):
                acc -= wk[i * s + k] * wk[j * s + k]
            if i == j:
                if not acc > 0.0:
                    return -1.0
                wk[i * s + i] = math.sqrt(acc)
            else:
                wk[i * s + j] = acc / wk[j * s + j]
    for j in range(s):                     # L^-1 (lower) into wk[ss:]
        for i in range(s):
            if i < j:
                wk[ss + i * s + j] = 0.0
            elif i == j:
                wk[ss + i * s + i] = 1.0 / wk[i * s + i]
            else:
                acc = 0.0
                for k in range(j, i):
                    acc += wk[i * s + k] * wk[ss + k * s + j]
                wk[ss + i * s + j] = -acc / wk[i * s + i]
    fro = 0.0
    for i in range(s):                     # L^-T L^-1
        for j in range(s):
            acc = 0.0
            for k in range(max(i, j), s):
                acc += wk[ss + k * s + i] * wk[ss + k * s + j]
            x[o + i * s + j] = acc
            fro += acc * acc
    return 1.0 / math.sqrt(fro)


@_jit
def _rho(st, h, B):
    """The weight of the rows that regularize block ``B``: its mean diagonal entry."""
    o = st.boff[B]
    s = st.bptr[B + 1] - st.bptr[B]
    acc = 0.0
    for r in range(s):
        acc += h[o + r * s + r]
    return acc / s


@_jit
def _regularize(st, w, h, with_g):
    """The blocks of ``h`` (packed) of more than one coordinate plus ``rho An_i^T An_i``
    for the rows ``i`` inside them (rows normalized in ``w.dn``), inverted into ``w.hi``;
    with ``with_g`` also ``rho An_i^T bn_i`` added to ``w.gr`` (module docstring, "Block
    mass"). Returns a lower bound of the smallest eigenvalue of the (regularized) blocks,
    ``h`` itself on blocks of one coordinate; ``-1.0`` if a block is not positive definite."""
    hmin = np.inf
    for B in range(st.dims[5]):
        o, c0 = st.boff[B], st.bptr[B]
        s = st.bptr[B + 1] - c0
        if s == 1:
            hmin = min(hmin, h[o])
            continue
        rho = _rho(st, h, B)
        for k in range(s * s):
            w.hi[o + k] = h[o + k]
        for e in range(st.regptr[B], st.regptr[B + 1]):
            i = st.regrow[e]
            k0 = st.indptr[i]
            for r in range(s):
                if with_g:
                    w.gr[c0 + r] += rho * w.dn[k0 + r] * w.bn[i]
                for c in range(s):
                    w.hi[o + r * s + c] += rho * w.dn[k0 + r] * w.dn[k0 + c]
        lo = _block_inverse(w.hi, o, s, w.wk)
        if not lo > 0.0:
            return -1.0
        hmin = min(hmin, lo)
    return hmin


@_jit
def _weights(st, w, h):
    """``w.dw = H^-1 An^T`` per entry (``An`` in ``w.dn``; a row holds whole blocks, in
    order): ``dn / h`` on blocks of one coordinate, ``w.hi`` (:func:`_regularize`) on the others."""
    for k in range(st.dims[2]):
        c = st.indices[k]
        B = st.bof[c]
        o, c0 = st.boff[B], st.bptr[B]
        s = st.bptr[B + 1] - c0
        if s == 1:
            w.dw[k] = w.dn[k] / h[o]
        else:
            r = c - c0
            k0 = k - r
            acc = 0.0
            for cc in range(s):
                acc += w.hi[o + r * s + cc] * w.dn[k0 + cc]
            w.dw[k] = acc


@_jit
def mass_times(st, d, x, out):
    """``out = M x`` for the mass blocks packed in ``d`` (``st.boff``)."""
    for B in range(st.dims[5]):
        c0, o = st.bptr[B], st.boff[B]
        s = st.bptr[B + 1] - c0
        for r in range(s):
            acc = 0.0
            for c in range(s):
                acc += d[o + r * s + c] * x[c0 + c]
            out[c0 + r] = acc


@_jit
def _at_mu(st, w, n, m):
    """``a = H^-1 (g + An^T mu)`` into ``w.a`` (``w.t = An^T mu``; ``H``, ``g`` the
    regularized ones: ``h`` on blocks of one coordinate, ``hi`` on the others)."""
    t = w.t
    _rows_t(st, w.dn, w.mu, t)
    for B in range(st.dims[5]):
        c0, o = st.bptr[B], st.boff[B]
        s = st.bptr[B + 1] - c0
        if s == 1:
            w.a[c0] = (w.gr[c0] + t[c0]) / w.h[o]
        else:
            for r in range(s):
                acc = 0.0
                for c in range(s):
                    acc += w.hi[o + r * s + c] * (w.gr[c0 + c] + t[c0 + c])
                w.a[c0 + r] = acc


@_jit
def _decouple(st, w):
    """Rows set aside (``w.drop``): their diagonal entry of ``S`` 1, the rest of their
    band row and column 0 already (their entries are zero in ``dn`` and ``dw``)."""
    for i in range(st.dims[1]):
        if w.drop[i]:
            w.Sb[st.pos[i], 0] = 1.0


@_jit
def _set_aside_error(st, w, m, nbn):
    """Backward error ``|An_D a - bn_D| / (|a| + |bn|)`` of the rows set aside (``A``
    from ``w.data``, normalized by ``w.nu``)."""
    rr = 0.0
    bb = nbn * nbn
    for i in range(m):
        if w.drop[i]:
            acc = w.b[i]
            for k in range(st.indptr[i], st.indptr[i + 1]):
                acc -= w.data[k] * w.a[st.indices[k]]
            rr += (acc / w.nu[i]) ** 2
            bb += (w.b[i] / w.nu[i]) ** 2
    den = LA.norm2(w.a) + math.sqrt(bb)
    rn = math.sqrt(rr)
    return rn / den if den > 0.0 else (0.0 if rn == 0.0 else np.inf)


@_jit
def set_aside(w, U, r, mL, k, m):
    """After a dense step that found the rows exactly redundant in one direction
    (``r = mL - 1``, every row live, ``k = mL``; ``U`` the left singular vectors of the
    normalized rows): set aside the row with the largest component in the left null
    vector ``U[:, r]`` (the other rows then have full rank). Any other outcome of the
    dense step clears the rows set aside."""
    for i in range(m):
        w.drop[i] = 0
    if not (r == mL - 1 and mL == m and k == mL):
        return
    best = -1
    big = 0.0
    for i in range(m):
        x = abs(U[i, r])
        if x > big:
            big = x
            best = i
    if best >= 0:
        w.drop[best] = 1


@_jit
def rows_times(st, vals, x, out):
    """``out = R x`` for the rows ``R`` with the values ``vals`` in the pattern."""
    for i in range(st.dims[1]):
        acc = 0.0
        for k in range(st.indptr[i], st.indptr[i + 1]):
            acc += vals[k] * x[st.indices[k]]
        out[i] = acc


@_jit
def distances(st, vals, res):
    """``max |res_i| / |R_i|`` (a zero row counts 1), ``inf`` if not finite: the dense
    projection's ``_distances`` on the rows ``R`` in the pattern."""
    dmax = 0.0
    for i in range(st.dims[1]):
        nr = LA.norm2(vals[st.indptr[i]:st.indptr[i + 1]])
        d = abs(res[i]) / (nr if nr > 0.0 else 1.0)
        if not np.isfinite(d):
            return np.inf
        if d > dmax:
            dmax = d
    return dmax


@_jit
def _feasibility(st, w, m):
    """``r = bn - An a`` into ``w.r``; returns ``|r|``."""
    for i in range(m):
        acc = w.bn[i]
        for k in range(st.indptr[i], st.indptr[i + 1]):
            acc -= w.dn[k] * w.a[st.indices[k]]
        w.r[i] = acc
    return LA.norm2(w.r)


@_jit
def _band_solve(st, w, kb, x, m):
    """``x <- (S - shift I)^-1 x`` through the band order (``w.y`` scratch)."""
    y = w.y
    for i in range(m):
        y[st.pos[i]] = x[i]
    banded.solve(w.Lb, kb, y)
    for i in range(m):
        x[i] = y[st.pos[i]]


@_unit("Tuple((i8, f8, i8))(spst, spw, f8v, f8, f8, b1)")
def sparse_step(st, w, ref, sig_ref, rank_tol, want_lam):
    """One certified step on the data in ``w`` (``d``, ``F``, ``data``, ``b``; module
    docstring).

    Parameters
    ----------
    st : Structure
    w : SparseWork
    ref : (m,) reference row scales (``<= 0``: none), as for :func:`gaussopt.gauss.dense_step.gauss_step`
    sig_ref : reference of the smallest singular value (``<= 0``: none)
    rank_tol : float
    want_lam : bool
        Multipliers into ``w.lam`` (the dense kernel's convention ``M a = F + A^T lam``).

    Returns
    -------
    status : int
        0: answered (``a`` in ``w.a``); otherwise the code of the refusal or of the
        failed verification (:data:`gaussopt.core.status.BAND_STATUS`): the dense kernel must take the step.
    be : float
        Backward error of ``a`` (the larger of feasibility and stationarity).
    iters : int
        Refinement steps taken.
    """
    n, m, nnz, kb = st.dims[0], st.dims[1], st.dims[2], st.dims[3]
    if m == 0 or m > n:
        return REFUSED_SHAPE, np.inf, 0
    ndrop = 0
    for i in range(m):
        ndrop += w.drop[i]
    if want_lam and ndrop > 1:
        return REFUSED_MULTIPLIERS, np.inf, 0
    d, F, data, b = w.d, w.F, w.data, w.b
    nblk, nd = st.dims[5], st.dims[6]
    for i in range(n):
        if not np.isfinite(F[i]):
            return REFUSED_DATA, np.inf, 0
    for i in range(nd):
        if not np.isfinite(d[i]):
            return REFUSED_DATA, np.inf, 0
    for k in range(nnz):
        if not np.isfinite(data[k]):
            return REFUSED_DATA, np.inf, 0
    for i in range(m):
        if not np.isfinite(b[i]):
            return REFUSED_DATA, np.inf, 0
    # mass scaled by its mean diagonal entry
    tr = 0.0
    for B in range(nblk):
        s = st.bptr[B + 1] - st.bptr[B]
        for r in range(s):
            tr += d[st.boff[B] + r * s + r]
    if not tr > 0.0:
        return REFUSED_MASS, np.inf, 0
    wgt = tr / n
    for i in range(nd):
        w.h[i] = d[i] / wgt
    for i in range(n):
        w.g[i] = F[i] / wgt
        w.gr[i] = w.g[i]
    # rows: norms, no row near vanishing, normalized
    for i in range(m):
        k0, k1 = st.indptr[i], st.indptr[i + 1]
        nu = LA.norm2(data[k0:k1])
        rf = ref[i] if ref[i] > 0.0 else nu
        if not (nu > 0.0 and nu > MARGIN * rank_tol * rf):
            return REFUSED_VANISHED, np.inf, 0
        w.nu[i] = nu
        inv = 0.0 if w.drop[i] else 1.0 / nu       # (a row set aside: no entries, no b)
        for k in range(k0, k1):
            w.dn[k] = data[k] * inv
        w.bn[i] = b[i] * inv
    # blocks of more than one coordinate regularized and inverted (module docstring,
    # "Block mass"); hmin a lower bound of lambda_min; dw = H^-1 An^T
    hmin = _regularize(st, w, w.h, True)
    if not hmin >= MARGIN * rank_tol:
        return REFUSED_MASS, np.inf, 0
    _weights(st, w, w.h)
    # S = An H^-1 An^T in band form, certified lambda_min(S) >= tau by a shifted Cholesky
    _form_band(st, w, w.dw)
    _decouple(st, w)
    thr = max(rank_tol, K.FOLD_TOL * sig_ref)
    T = MARGIN * thr
    tau = T * T / hmin
    shift = tau + banded.error_bound(kb, st.dims[4] + st.dims[7] - 1, 1.0 / hmin)
    if banded.cholesky(w.Sb, kb, shift, w.Lb) < 0.0:
        return REFUSED_UNCERTIFIED, np.inf, 0
    if banded.cholesky(w.Sb, kb, 0.0, w.Lb) < 0.0:      # (cannot fail after the above)
        return REFUSED_UNCERTIFIED, np.inf, 0
    # refinement of S mu = bn - An H^-1 g, preconditioned by the factor of S
    for i in range(m):
        w.mu[i] = 0.0
    nbn = LA.norm2(w.bn)
    tol = K.direct_tolerance(n, m)
    be_f = np.inf
    iters = 0
    while True:
        _at_mu(st, w, n, m)
        prev = be_f
        den = LA.norm2(w.a) + nbn
        rn = _feasibility(st, w, m)
        be_f = rn / den if den > 0.0 else (0.0 if rn == 0.0 else np.inf)
        if be_f <= 4.0 * _EPS or iters >= MAX_REFINE or not be_f < 0.5 * prev:
            break
        _band_solve(st, w, kb, w.r, m)
        for i in range(m):
            w.mu[i] += w.r[i]
        iters += 1
    # the multipliers of the rows that regularize a block: mu + rho r (module docstring)
    if st.regrow.shape[0] > 0:
        for e in range(st.regrow.shape[0]):
            w.mu[st.regrow[e]] += _rho(st, w.h, st.regblk[e]) * w.r[st.regrow[e]]
        _rows_t(st, w.dn, w.mu, w.t)
    # stationarity: |M a - F - A^T lam| = w |H a - g - An^T mu| (w.t = An^T mu)
    ha = w.gr                               # (scratch now: H a)
    mass_times(st, w.h, w.a, ha)
    acc = 0.0
    scale = 0.0
    for c in range(n):
        x = abs(ha[c] - w.g[c] - w.t[c])
        if x > scale:
            acc = acc * (scale / x) ** 2 + 1.0
            scale = x
        elif x > 0.0:
            acc += (x / scale) ** 2
    st_res = wgt * scale * math.sqrt(acc)
    mf = 0.0
    for k in range(nd):
        mf += d[k] * d[k]
    den = math.sqrt(mf) * LA.norm2(w.a) + LA.norm2(F)
    be_s = st_res / den if den > 0.0 else (0.0 if st_res == 0.0 else np.inf)
    be = max(be_f, be_s)
    if ndrop > 0:
        # the rows set aside must hold too: then a, the minimum on the other rows, is the
        # minimum on all of them (module docstring, "Redundant rows")
        be = max(be, _set_aside_error(st, w, m, nbn))
    if not be <= tol:
        return UNVERIFIED, be, iters
    if want_lam:
        for i in range(m):
            w.lam[i] = wgt * w.mu[i] / w.nu[i]
        if ndrop > 0 and not _minimum_norm(st, w, m, n, kb):
            return REFUSED_MULTIPLIERS, be, iters
    return OK, be, iters


@_jit
def _minimum_norm(st, w, m, n, kb):
    """The minimum-norm multipliers with a row ``d`` set aside (``w.lam`` has ``lam_d =
    0``): ``lam - (z . lam / z . z) z`` with ``z_i = u_i / nu_i``, ``u`` the left null
    vector of the normalized rows (``u_d = 1``, the others from the band solve of
    ``An_-d An_-d^T u_-d = -An_-d An_d^T``) -- the dense kernel's ``min |lam|`` over the
    redundant rows (:func:`gaussopt.gauss.dense_step.multipliers`). False (the dense kernel then
    answers) when ``An^T u`` is not zero to rounding: the redundancy is not exact."""
    dr = -1
    for i in range(m):
        if w.drop[i]:
            dr = i
    t = w.t
    for c in range(n):
        t[c] = 0.0
    for k in range(st.indptr[dr], st.indptr[dr + 1]):
        t[st.indices[k]] = w.data[k] / w.nu[dr]          # An_d^T
    u = w.r
    rows_times(st, w.dn, t, u)                           # (An_-d An_d^T; row d: 0)
    for i in range(m):
        u[i] = -u[i]
    _form_band(st, w, w.dn)
    _decouple(st, w)
    if banded.cholesky(w.Sb, kb, 0.0, w.Lb) < 0.0:
        return False
    _band_solve(st, w, kb, u, m)
    u[dr] = 1.0
    # An^T u = An_-d^T u_-d + An_d^T (t): zero to rounding for an exact redundancy
    res = w.gr                                           # (scratch after the step)
    _rows_t(st, w.dn, u, res)
    rr = 0.0
    for c in range(n):
        rr += (res[c] + t[c]) ** 2
    if not math.sqrt(rr) <= 1e3 * _EPS * math.sqrt(m) * LA.norm2(u):
        return False
    zl = 0.0
    zz = 0.0
    for i in range(m):
        z = u[i] / w.nu[i]
        zl += z * w.lam[i]
        zz += z * z
    f = zl / zz
    for i in range(m):
        w.lam[i] -= f * u[i] / w.nu[i]
    return True


@_unit("f8(spst, spw)")
def sigma_estimate(st, w):
    """Estimate of ``sigma_min(An)`` after a successful :func:`sparse_step` (its ``dn``):
    ``|An^T y|`` for the unit ``y`` of :data:`SIGMA_ITERS` steps of inverse iteration
    on ``An An^T`` (band Cholesky in the same order; ``Sb``, ``Lb``, ``r`` and ``t`` are
    overwritten). Never below the true value; its error shrinks like
    ``(sigma_1 / sigma_2)^(2 k)`` after ``k`` steps (``sigma_2`` the next singular value).
    Returns 0 if the factorization fails (it cannot after a certified step)."""
    n, m, kb = st.dims[0], st.dims[1], st.dims[3]
    _form_band(st, w, w.dn)
    if banded.cholesky(w.Sb, kb, 0.0, w.Lb) < 0.0:
        return 0.0
    y = w.r
    for i in range(m):
        y[i] = 1.0 + 0.5 * math.sin(1.0 + i)          # a fixed, generic start
    for _ in range(SIGMA_ITERS):
        _band_solve(st, w, kb, y, m)
        s = 1.0 / LA.norm2(y)
        for i in range(m):
            y[i] *= s
    _rows_t(st, w.dn, y, w.t)
    return LA.norm2(w.t)




#: most inverse-iteration steps of :func:`smallest_pair` (from a warm start it needs a
#: few; a cold start on a clustered spectrum may need all of them)
PAIR_ITERS = 60


@_unit("f8(spst, spw, f8v, f8v, f8v)")
def smallest_pair(st, w, scale, u, wv):
    """Smallest singular value ``sigma`` of the rows ``As = A / scale`` (``A`` in
    ``w.data``, row ``i`` divided by ``scale[i]``, or by 1 where ``scale[i] <= 0``) and
    its pair: ``u`` (m, unit) and ``wv = As^T u / sigma`` (n).

    Inverse iteration on ``G = As As^T`` (band Cholesky in the band order, a shift of
    ``-64 eps max G_ii`` keeps it positive definite at a rank drop itself), started
    from ``u`` as given (the pair of the previous state; a generic vector if ``u`` is
    zero), until ``sigma`` settles to ``1e-14`` relative (at most :data:`PAIR_ITERS`
    steps); ``u`` keeps the orientation of the start. ``sigma = |As^T u|`` is never
    below the true value; the error of ``u`` falls like ``(s_m / s_{m-1})^2`` per
    step. Overwrites ``dn`` (with ``As``), ``Sb``, ``Lb``, ``r``, ``t`` and ``y``.
    Returns ``sigma``, or ``-1.0`` when the factorization or the iteration fails
    (the caller then takes the dense SVD)."""
    n, m, kb = st.dims[0], st.dims[1], st.dims[3]
    for i in range(m):
        inv = 1.0 / scale[i] if scale[i] > 0.0 else 1.0
        for k in range(st.indptr[i], st.indptr[i + 1]):
            w.dn[k] = w.data[k] * inv
    _form_band(st, w, w.dn)
    gmax = 0.0
    for i in range(m):
        gmax = max(gmax, w.Sb[i, 0])
    if not (gmax > 0.0 and np.isfinite(gmax)):
        return -1.0
    if banded.cholesky(w.Sb, kb, -64.0 * _EPS * gmax, w.Lb) < 0.0:
        return -1.0
    x = w.r
    nu0 = LA.norm2(u)
    if nu0 > 0.0 and np.isfinite(nu0):
        for i in range(m):
            x[i] = u[i] / nu0
    else:
        for i in range(m):
            x[i] = 1.0 + 0.5 * math.sin(1.0 + i)
    t = w.t
    sig = np.inf
    for _ in range(PAIR_ITERS):
        _band_solve(st, w, kb, x, m)
        nx = LA.norm2(x)
        if not (nx > 0.0 and np.isfinite(nx)):
            return -1.0
        for i in range(m):
            x[i] /= nx
        _rows_t(st, w.dn, x, t)
        prev = sig
        sig = LA.norm2(t)
        if abs(prev - sig) <= 1e-14 * sig:
            break
    if not (sig > 0.0 and np.isfinite(sig)):
        return -1.0
    dot = 0.0
    for i in range(m):
        dot += x[i] * u[i]
    sgn = -1.0 if dot < 0.0 else 1.0
    for i in range(m):
        u[i] = sgn * x[i]
    for c in range(n):
        wv[c] = sgn * t[c] / sig
    return sig


@_unit("f8(spst, spw, f8v, f8v)")
def bilinear(st, w, u, wv):
    """``u^T As wv`` with ``As`` the scaled rows in ``w.dn`` (:func:`smallest_pair`)."""
    m = st.dims[1]
    acc = 0.0
    for i in range(m):
        row = 0.0
        for k in range(st.indptr[i], st.indptr[i + 1]):
            row += w.dn[k] * wv[st.indices[k]]
        acc += u[i] * row
    return acc


@_unit("b1(spst, spw, f8v, f8v)")
def correction(st, w, res, dx):
    """The least-squares correction of :func:`gaussopt.integrate.engine.project` on the band:
    the minimum-``H``-norm ``dx`` with ``J dx = -res`` (``J`` in ``w.data``, in the rows'
    pattern; ``H`` the mass matrix the sparse model wrote into ``w.d``, its blocks of more
    than one coordinate regularized by the rows inside them as in the step), by the
    range-space solve with ``S = Jn H^-1 Jn^T`` (``Jn`` the normalized rows): ``dx =
    H^-1 Jn^T S^-1 (-res / nu)``. Returns False (``dx`` untouched) when a row vanishes,
    a block is not positive definite, or the Cholesky factor of ``S`` has a pivot below
    ``1e-8`` of its largest diagonal entry (near-singular or redundant rows: the dense
    correction's truncated SVD decides), the criterion of the dense
    :func:`gaussopt.integrate.engine._correction`."""
    n, m, kb = st.dims[0], st.dims[1], st.dims[3]
    for i in range(m):
        k0, k1 = st.indptr[i], st.indptr[i + 1]
        nu = LA.norm2(w.data[k0:k1])
        if not (nu > 0.0 and np.isfinite(nu)):
            return False
        w.nu[i] = nu
        inv = 0.0 if w.drop[i] else 1.0 / nu
        for k in range(k0, k1):
            w.dn[k] = w.data[k] * inv
        w.mu[i] = -res[i] * inv
    for k in range(st.dims[6]):
        if not np.isfinite(w.d[k]):
            return False
    if not _regularize(st, w, w.d, False) > 0.0:
        return False
    _weights(st, w, w.d)
    _form_band(st, w, w.dw)
    smax = 0.0
    for i in range(m):
        smax = max(smax, w.Sb[i, 0])
    _decouple(st, w)
    dmin = banded.cholesky(w.Sb, kb, 0.0, w.Lb)
    if not dmin > 1e-8 * smax:
        return False
    _band_solve(st, w, kb, w.mu, m)
    _rows_t(st, w.dw, w.mu, dx)
    # a row set aside is implied by the others on the constraints: its residual after the
    # correction is of second order in it; else (not implied here) the dense correction
    rmax = 0.0
    for i in range(m):
        rmax = max(rmax, abs(res[i]) / w.nu[i])
    for i in range(m):
        if w.drop[i]:
            acc = res[i]
            for k in range(st.indptr[i], st.indptr[i + 1]):
                acc += w.data[k] * dx[st.indices[k]]
            if not abs(acc) / w.nu[i] <= 0.5 * rmax:
                return False
    return True


def _empty_structure(n: int) -> Structure:
    """The structure of a model without a sparse path (every size zero)."""
    zi = np.zeros(0, dtype=np.int64)
    return Structure(np.array([n, 0, 0, 0, 0, 0, 0, 0], dtype=np.int64),
                     np.zeros(1, dtype=np.int64), zi, zi, zi, zi, zi, zi,
                     np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), zi, zi, zi,
                     np.zeros(1, dtype=np.int64))


#: ``mode`` of a :class:`Band`: no sparse path; the step, rank monitor and nearness
#: on the band; also the projection (every row holonomic, the rows in the order of the
#: position constraints); the recursive step of a tree
#: (:class:`~gaussopt.core.model_interface.RecursiveModel`: the step alone, its output in
#: the work's ``d``, the rank monitor and the projection dense as without the path)
MODE_NONE, MODE_STEP, MODE_PROJECT, MODE_TREE = 0, 1, 2, 3
#: bit of the step's ``flags``: answered by the recursive step of a tree (``MODE_TREE``;
#: the dense kernel's bits are 1, 2 and :data:`gaussopt.gauss.dense_step.RANGE_FLAG`, 8)
TREE_FLAG = 16


@structref.register
class _BandType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Band(structref.StructRefProxy):
    """The O(n) path of one model for the engine (:func:`make_band`): ``mode`` (one of
    the ``MODE_*``), the :class:`Structure` ``sp``, the :class:`SparseWork` ``w``, the
    sparse model's function addresses ``addrs`` (``dyn``, ``rows``, ``pos`` or 0) and its
    parameters ``p``. One
    object passed by reference: a model without the path pays one pointer, not the
    thirty arrays of the parts."""

    @property
    def mode(self) -> int:
        return _band_mode(self)


@unit("i8(band)", python=True)
def _band_mode(b):
    return b.mode


@_unit("spw(band)")
def band_work(b):
    """The :class:`SparseWork` of the Band ``b`` as Python sees it (the arrays themselves,
    not copies): after a step the band answered, the model's sparse data at its state
    (:meth:`gaussopt.gauss.solvers.base.StepSolver.band_work`)."""
    return b.w


structref.define_proxy(Band, _BandType, ["mode", "sp", "w", "addrs", "p"])


@unit("band(i8, spst, spw, i8v, f8v)", python=True)
def _band(mode, sp, w, addrs, p):
    return Band(mode, sp, w, addrs, p)


# The band's entry points for the engine, on a :class:`Band` (one pointer). The engine's
# default units (the step, the projection, the rank monitor) only read ``b.mode`` and call
# these: a model without the path compiles none of them (lazy units), and the default
# units' machine code holds no copy of the structure's and the work's thirty-six arrays
# (passing them, as namedtuples, unpacks every array: the projection's compilation took
# about half again as long with them).
@_unit("f8(band, f8v)")
def band_distances(b, res):
    """:func:`distances` of ``res`` against the rows in ``b.w.data``."""
    return distances(b.sp, b.w.data, res)


@_unit("i8(band, f8v, f8v)")
def band_rows_times(b, x, out):
    """:func:`rows_times` of the rows in ``b.w.data``; returns 0."""
    rows_times(b.sp, b.w.data, x, out)
    return 0


@_unit("b1(band, f8v, f8v)")
def band_correction(b, res, dx):
    """:func:`correction` on ``b``."""
    return correction(b.sp, b.w, res, dx)


@_unit("f8(band, f8v, f8v, f8v)")
def band_smallest_pair(b, scale, u, wv):
    """:func:`smallest_pair` on ``b``."""
    return smallest_pair(b.sp, b.w, scale, u, wv)


@_unit("f8(band, f8v, f8v)")
def band_bilinear(b, u, wv):
    """:func:`bilinear` on ``b``."""
    return bilinear(b.sp, b.w, u, wv)


@_unit("f8(band, f8v, f8v, f8v)")
def band_scaled_form(b, scale, u, wv):
    """``u^T As wv`` with ``As`` the rows in ``b.w.data`` divided by ``scale`` (1 where
    ``scale[i] <= 0``): :func:`bilinear` on the raw rows (the rank monitor's rate)."""
    st = b.sp
    data = b.w.data
    g = 0.0
    for i in range(st.dims[1]):
        r = scale[i] if scale[i] > 0.0 else 1.0
        acc = 0.0
        for k in range(st.indptr[i], st.indptr[i + 1]):
            acc += data[k] * wv[st.indices[k]]
        g += u[i] * acc / r
    return g


@_unit("b1(band, f8v)")
def band_row_norms(b, nu):
    """Norms of the rows in ``b.w.data`` into ``nu``; False if one is zero or not finite."""
    st = b.sp
    w = b.w
    for i in range(st.dims[1]):
        x = LA.norm2(w.data[st.indptr[i]:st.indptr[i + 1]])
        if not (x > 0.0 and np.isfinite(x)):
            return False
        nu[i] = x
    return True


@_unit("i8(band, f8m, i8, i8, i8, i8)")
def band_set_aside(b, U, r, mL, k, m):
    """:func:`set_aside` on ``b``'s work; returns 0."""
    set_aside(b.w, U, r, mL, k, m)
    return 0


@_unit("f8(band)")
def band_sigma(b):
    """:func:`sigma_estimate` on ``b``."""
    return sigma_estimate(b.sp, b.w)


@jit(cache=True, inline="always")
def on_band(mode):
    """The mode is one of the band's own (the step, the rank monitor and maybe the
    projection on the sparse rows), not none or the recursive step of a tree."""
    return mode == MODE_STEP or mode == MODE_PROJECT


def _tree_band(rec, mf, n: int, m: int) -> Band:
    """The :class:`Band` of a tree's recursive step ``rec``
    (:class:`~gaussopt.core.model_interface.RecursiveModel`): an empty structure whose
    work's ``d`` holds the step's output (``rec.out_size`` values). Its parameters are the
    model functions' own array ``mf.p`` (the same layout), not a copy: a
    :class:`~gaussopt.Stepper` writes its inputs there."""
    st = _empty_structure(n)
    st.dims[1] = m
    st.dims[6] = rec.out_size
    p = mf.p
    if not (isinstance(p, np.ndarray) and p.dtype == np.float64 and p.flags.c_contiguous
            and p.shape == rec.p.shape):
        raise ValueError("the recursive step needs the model functions' parameter array "
                         f"(float64, C-contiguous, shape {rec.p.shape}).")
    return _band(MODE_TREE, st, make_work(st), rec.addrs, p)


def tree_step(system, tree_min_n: int = TREE_MIN_N):
    """The recursive step (:class:`~gaussopt.core.model_interface.RecursiveModel`) that
    :func:`make_band` gives ``system``, or None: a tree's, from ``tree_min_n`` coordinates
    on, without inequality rows."""
    rec = getattr(system, "recursive", None)
    if rec is None or system.n < tree_min_n or system.inequalities or rec.n != system.n:
        return None
    return rec


def make_band(system, mf, min_n: int = MIN_N, tree_min_n: int = TREE_MIN_N) -> Band:
    """The :class:`Band` of ``system`` for the engine's
    :class:`~gaussopt.integrate.engine.ModelData` (``mf`` its
    :class:`~gaussopt.core.model_interface.ModelFunctions`): :data:`MODE_NONE` with empty parts
    when the path does not apply (no :class:`~gaussopt.core.model_interface.SparseModel` on
    ``system.sparse``, fewer than ``min_n`` coordinates, inequality constraints, a
    different row count). The structure is built once per system and shared; the
    work arrays are new on every call (one set per run or step context)."""
    sm: Optional[SparseModel] = getattr(system, "sparse", None)
    n = system.n
    rec = tree_step(system, tree_min_n)
    if rec is not None and rec.m == mf.m:
        return _tree_band(rec, mf, n, mf.m)
    if (sm is None or n < min_n or system.inequalities or sm.m != mf.m or sm.n != n):
        st = _empty_structure(n)
        return _band(MODE_NONE, st, make_work(st), np.zeros(3, dtype=np.int64), np.zeros(0))
    cache = getattr(sm, "_structure", None)
    if cache is None:
        cache = make_structure(sm.n, sm.m, sm.indptr, sm.indices, sm.block_ptr)
        try:
            sm._structure = cache
        except AttributeError:                     # a frozen SparseModel: build per call
            pass
    m = mf.m
    hol = np.asarray(mf.hol_rows)
    mode = (MODE_PROJECT if (hol.size == m and mf.vel_rows.size == m
                             and np.array_equal(hol, np.arange(m))) else MODE_STEP)
    return _band(mode, cache, make_work(cache), sm.addrs, np.ascontiguousarray(sm.p, dtype=float))
