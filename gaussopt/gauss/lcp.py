"""Lemke's complementary pivoting: the linear complementarity problem ``LCP(q, M)``.

Find ``z >= 0`` with ``w = M z + q >= 0`` and ``z . w = 0``. Contact problems with many
points cannot be solved by trying every combination of point states (there are 2 to 4
per point: 4^20 for twenty frictional points), but they are LCPs (Pfeiffer and
Glocker's for planar friction, :mod:`gaussopt.gauss.contact_problem`), and so is the
projection of a point onto a polyhedron (the least-norm admissible distribution of
indeterminate contact forces). Lemke's algorithm walks from one basis of the tableau
``w - M z - d z0 = q`` to the next, keeping one complementary pair out of the basis at
a time, until the artificial variable ``z0`` leaves: a finite number of pivots, each
``O(n^2)``. It solves every LCP whose matrix is positive semi-definite (copositive-plus)
when a solution exists, and ends on a ray when none does (then :func:`lemke` returns
``None``); on other matrices (friction) it usually solves it and may end on a ray.
Degenerate pivots are ordered lexicographically (Cottle, Pang and Stone, *The Linear
Complementarity Problem*, SIAM 2009, sec. 4.4), so it cannot cycle.

The answer is the basic solution of the last basis, accurate to the rounding of the
pivots; callers that need it exactly certify it (the contact problem re-solves the
chosen point states by their KKT system and checks every condition).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from gaussopt.core.compiled import jit, unit

__all__ = ["lemke", "lemke_pair"]

_EPS = float(np.finfo(float).eps)


def lemke(M: np.ndarray, q: np.ndarray, max_pivots: Optional[int] = None
          ) -> Optional[np.ndarray]:
    """``z`` solving ``LCP(q, M)`` by Lemke's algorithm (covering vector of ones,
    lexicographic pivoting), or ``None`` when it ends on a ray (no solution for a
    positive semi-definite ``M``) or exceeds ``max_pivots`` (default ``50 n + 50``).

    Parameters
    ----------
    M : ndarray, shape (n, n)
    q : ndarray, shape (n,)

    Returns
    -------
    ndarray, shape (n,), or None
    """
    got = lemke_pair(M, q, max_pivots)
    return None if got is None else got[0]


def lemke_pair(M: np.ndarray, q: np.ndarray, max_pivots: Optional[int] = None,
               compliance: float = 0.0) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """:func:`lemke`'s ``(z, w)`` as its last basis gives them: each pair has at most one
    basic member, the other is exactly zero (the complementarity is structural, not a
    rounded product), and the basic values carry the rounding of the pivots. None as
    :func:`lemke`. ``compliance``: solves ``LCP(q, M + compliance max|M| I)`` (the
    contact problem's regularization) without forming that matrix in Python."""
    M = np.ascontiguousarray(M, dtype=float)
    q = np.ascontiguousarray(q, dtype=float)
    n = q.size
    if M.shape != (n, n):
        raise ValueError(f"`M` must have shape ({n}, {n}), found {M.shape}")
    Ms, qs = np.empty((n, n)), np.empty(n)
    # (compiled passes: the checks, the shift and the scaling in numpy took as long as
    # the pivots of a 200-unknown contact LCP)
    scale = _prepare(M, q, float(compliance), Ms, qs) if n else 1.0
    if not scale >= 0.0:
        raise ValueError("`M` and `q` must be finite")
    if n == 0 or q.min() >= 0.0:
        return np.zeros(n), q.copy()
    if max_pivots is None:
        max_pivots = 50 * n + 50
    z, w = np.zeros(n), np.zeros(n)
    got = _lemke(Ms, qs, int(max_pivots), z, w)
    if got <= 0:
        return None
    return z, w * scale


@unit("f8(f8m, f8v, f8, f8m, f8v)", python=True, nogil=True)
def _prepare(M, q, compliance, Ms, qs):
    """``Ms = (M + compliance max|M| I) / scale``, ``qs = q / scale``, ``scale`` (returned)
    the largest entry of either, at least 1e-300 (exactly numpy's shifted matrix divided by
    its largest entry, so the same pivots, where the diagonal is non-negative, as a contact
    LCP's; otherwise the largest entry of ``M`` may stand in for it); -1 when an entry is
    not finite.

    One pass reads ``M`` (its largest entry, and a sum that is NaN where an entry is not
    finite, each in four independent lanes: a single running maximum is one long chain
    of dependent comparisons, three times slower), one writes ``Ms``: 35 us for 200
    unknowns, where numpy's checks, shift and division took 100. (A power of two as the
    scale would make the division a product, 15 us less, but changes the pivots'
    rounding: the states a degenerate LCP reads, and a face landing nearly flat of
    ``tests/test_contact_cone.py`` then had no certified reading.)"""
    n = q.size
    b0 = b1 = b2 = b3 = 0.0
    f0 = f1 = f2 = f3 = 0.0
    n4 = n - n % 4
    for i in range(n):
        row = M[i]
        for j in range(0, n4, 4):
            a0, a1, a2, a3 = abs(row[j]), abs(row[j + 1]), abs(row[j + 2]), abs(row[j + 3])
            f0 += a0 - a0
            f1 += a1 - a1
            f2 += a2 - a2
            f3 += a3 - a3
            b0 = a0 if a0 > b0 else b0
            b1 = a1 if a1 > b1 else b1
            b2 = a2 if a2 > b2 else b2
            b3 = a3 if a3 > b3 else b3
        for j in range(n4, n):
            a0 = abs(row[j])
            f0 += a0 - a0
            b0 = a0 if a0 > b0 else b0
        f1 += q[i] - q[i]
    if not (f0 + f1 + f2 + f3 == 0.0):
        return -1.0
    big = max(b0, b1, b2, b3)
    shift = compliance * big
    scale = max(big, 1e-300)
    for i in range(n):
        scale = max(scale, abs(M[i, i] + shift), abs(q[i]))
    for i in range(n):
        row = M[i]
        out = Ms[i]
        for j in range(n):
            out[j] = row[j] / scale
        out[i] = (row[i] + shift) / scale
        qs[i] = q[i] / scale
    return scale


@unit("i8(f8m, f8v, i8, f8v, f8v)", python=True, nogil=True, _nrt=True)
def _lemke(Ms, q, max_pivots, z, w):
    """The pivots of :func:`lemke` on the scaled ``Ms``, ``q``: writes ``z`` and ``w``
    (their basic values; the nonbasic ones stay 0) and returns the number of pivots
    after which ``z0`` left the basis (> 0), minus the number after which it ended on a
    ray (< 0), or 0 when ``max_pivots`` were not enough. Variables: ``0..n-1`` the
    ``w``, ``n..2n-1`` the ``z``, ``2n`` the artificial ``z0``; their columns in
    ``w - Ms z - d z0 = q``.

    The basis inverse starts as the identity, and a pivot on row ``r`` changes only its
    columns that are no longer unit vectors and column ``r`` (a unit column ``e_j``, ``j !=
    r``, has a zero in row ``r``). It is stored transposed (``BT[j]`` its column ``j``,
    contiguous), and the entering column and the pivot run over the non-unit columns
    only, each a contiguous axpy: ``O(n k)`` per pivot after ``k`` distinct rows have
    pivoted instead of ``O(n^2)``. Every entry sums the same nonzero terms in the same
    order as the dense algorithm's loops, so the pivots are the same (a slab on 20
    points, 200 unknowns: 2.2 ms with those loops, 0.4 ms now)."""
    n = q.size
    tie = 1e3 * 2.220446049250313e-16
    piv_tol = tie * n
    BT = np.eye(n)                                        # the basis inverse, transposed
    unit_col = np.ones(n, np.bool_)
    xB = q.copy()
    basis = np.arange(n)
    col = np.empty(n)
    live = np.empty(n, np.int64)
    # z0 enters (column -1): the most negative q leaves, lexicographically among ties
    for i in range(n):
        col[i] = -1.0
    nl = 0
    qmin = xB.min()
    for i in range(n):
        if xB[i] <= qmin + tie * (1.0 + abs(qmin)):
            live[nl] = i
            nl += 1
    r = _lexmin(live, nl, xB, col, BT, True)
    leaving = basis[r]
    _pivot(BT, xB, col, r, unit_col)
    basis[r] = 2 * n
    for it in range(max_pivots):
        entering = leaving + n if leaving < n else leaving - n
        # col = Binv @ (column of `entering`)
        if entering < n:
            for i in range(n):
                col[i] = BT[entering, i]
        else:
            # -Binv @ Ms[:, c], column by column of Binv in the order of k: a unit column
            # e_k adds its one term to entry k
            c = entering - n
            for i in range(n):
                col[i] = 0.0
            for k in range(n):
                f = Ms[k, c]
                if unit_col[k]:
                    col[k] -= f
                else:
                    bk = BT[k]
                    for i in range(n):
                        col[i] -= bk[i] * f
        big = 1.0
        for i in range(n):
            big = max(big, abs(col[i]))
        # ratio test over the rows whose basic variable decreases
        best = np.inf
        for i in range(n):
            if col[i] > piv_tol * big:
                best = min(best, max(xB[i], 0.0) / col[i])
        if best == np.inf:
            return -(it + 1)                              # a ray: no solution found
        nl = 0
        z0row = -1
        for i in range(n):
            if col[i] > piv_tol * big and max(xB[i], 0.0) / col[i] <= best + tie * (
                    1.0 + abs(best)):
                live[nl] = i
                nl += 1
                if basis[i] == 2 * n:
                    z0row = i
        # z0 leaves whenever it may: the solution
        r = z0row if z0row >= 0 else _lexmin(live, nl, xB, col, BT, False)
        leaving = basis[r]
        _pivot(BT, xB, col, r, unit_col)
        basis[r] = entering
        if leaving == 2 * n:
            for i in range(n):
                if n <= basis[i] < 2 * n:
                    z[basis[i] - n] = max(xB[i], 0.0)
                elif basis[i] < n:
                    w[basis[i]] = max(xB[i], 0.0)
            return it + 1
    return 0


@jit(cache=True, nogil=True, _nrt=True)
def _pivot(BT, xB, col, r, unit_col):
    """Pivot the basis inverse (transposed: ``BT[j]`` its column ``j``) and the basic
    solution on row ``r`` of ``col``: the non-unit columns and column ``r`` change (the
    others have a zero in row ``r``), each by an axpy; column ``r`` is non-unit after."""
    n = xB.size
    unit_col[r] = False
    piv = col[r]
    for j in range(n):
        if not unit_col[j]:
            bj = BT[j]
            bj[r] /= piv
            br = bj[r]
            for i in range(n):
                if i != r:
                    bj[i] -= col[i] * br
    xB[r] /= piv
    xr = xB[r]
    for i in range(n):
        if i != r:
            xB[i] -= col[i] * xr


@jit(cache=True, nogil=True, _nrt=True)
def _lexmin(live, nl, xB, col, BT, first):
    """The row of the lexicographically smallest ``(x_i, Binv_i) / col_i`` among the
    ``nl`` rows of ``live`` (``first``: the entering column is -1, the keys are
    ``(x_i, Binv_i)``; ``BT`` the basis inverse transposed): ties of the ratio broken by
    the basis inverse's rows, no cycling."""
    tie = 1e3 * 2.220446049250313e-16
    n = xB.size
    cur = live[:nl].copy()
    m = nl
    for j in range(-1, n):
        if m == 1:
            break
        vmin = np.inf
        for a in range(m):
            i = cur[a]
            v = (max(xB[i], 0.0) if j < 0 else BT[j, i]) / (1.0 if first else col[i])
            vmin = min(vmin, v)
        k = 0
        for a in range(m):
            i = cur[a]
            v = (max(xB[i], 0.0) if j < 0 else BT[j, i]) / (1.0 if first else col[i])
            if v <= vmin + tie * (1.0 + abs(vmin)):
                cur[k] = i
                k += 1
        m = k
    return cur[0]


