"""Symmetric positive definite band matrices (numba): Cholesky with a shift, solves.

A symmetric band matrix ``S`` (m, m) of half-bandwidth ``kb`` (``S_ij = 0`` for
``|i - j| > kb``) is stored by its lower band, ``Sb`` of shape (m, kb + 1)
with ``Sb[i, d] = S[i, i - d]`` (LAPACK's ``pbtrf`` keeps the same band, by
columns). :func:`cholesky` factors ``S - shift I = L L^T`` (``L`` in the same
storage, its diagonal inverted) in ``O(m kb^2)``, :func:`solve` solves
with the factor in ``O(m kb)``; nothing is allocated.

Why a shift: if the factorization of ``S - shift I`` runs to completion with
positive pivots, then ``S - shift I + E`` is positive definite with ``E``
the backward error of the factorization, ``|E_ij| <= gamma_{kb+1}
sqrt(S_ii S_jj)`` (Demmel 1989; Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., Thm. 10.5), so ``lambda_min(S) >= shift - |E|_2`` with
``|E|_2 <= (2 kb + 1) max_ij |E_ij|`` (:func:`error_bound`). A completed
factorization is a proof that the smallest eigenvalue is above the shift
(Rump's test of positive definiteness), not an estimate; and the factor is a
preconditioner of ``S`` itself whose iterative refinement contracts the
error by ``shift / (lambda_min(S) - shift)`` per step.
"""

from __future__ import annotations

import math

import numpy as np

from gaussopt.core.compiled import jit

__all__ = ["cholesky", "solve", "error_bound", "bandwidth"]

_EPS = float(np.finfo(float).eps)

#: compiled inside their callers (:mod:`gaussopt.core.compiled`), or alone when Python calls them
_jit = jit(cache=True, nogil=True)


@_jit
def cholesky(Sb, kb, shift, Lb):
    """Cholesky factor of ``S - shift I`` (band storage, module docstring) into ``Lb``:
    ``Lb[i, d] = L[i, i - d]`` for ``d > 0`` and ``Lb[i, 0] = 1 / L[i, i]`` (the solves
    multiply: a division on the critical path of a triangular solve costs as much as the
    rest of its row). Returns the smallest pivot ``L_ii^2`` (``-1.0`` as soon as a pivot
    is not positive: ``S - shift I`` is not positive definite to working precision;
    ``Lb`` is then incomplete)."""
    m = Sb.shape[0]
    dmin = np.inf
    for i in range(m):
        j0 = i - kb if i > kb else 0
        for j in range(j0, i + 1):
            s = Sb[i, i - j]
            for k in range(j0, j):          # L[i, k] L[j, k], both inside the band
                s -= Lb[i, i - k] * Lb[j, j - k]
            if j < i:
                Lb[i, i - j] = s * Lb[j, 0]
            else:
                s -= shift
                if not s > 0.0:
                    return -1.0
                if s < dmin:
                    dmin = s
                Lb[i, 0] = 1.0 / math.sqrt(s)
    return dmin


@_jit
def solve(Lb, kb, x):
    """Solve ``L L^T y = x`` in place (``Lb`` from :func:`cholesky`)."""
    m = Lb.shape[0]
    for i in range(m):
        s = x[i]
        k0 = i - kb if i > kb else 0
        for k in range(k0, i):
            s -= Lb[i, i - k] * x[k]
        x[i] = s * Lb[i, 0]
    for i in range(m - 1, -1, -1):
        s = x[i]
        k1 = i + kb + 1 if i + kb + 1 < m else m
        for k in range(i + 1, k1):
            s -= Lb[k, k - i] * x[k]
        x[i] = s * Lb[i, 0]


@_jit
def error_bound(kb, terms, smax):
    """Bound of ``|dS|_2``, ``dS`` the rounding of forming ``S`` (each entry a sum of at
    most ``terms`` products of unit rows, weights at most ``smax``) plus the backward
    error of :func:`cholesky` (module docstring), both at most ``(2 kb + 1)`` entries per
    row of size ``<= (kb + terms + 4) eps smax`` (``|S_ij| <= smax``); a factor 2 of
    margin."""
    return 2.0 * (2 * kb + 1) * (kb + terms + 4) * _EPS * smax


def bandwidth(rows: np.ndarray, cols: np.ndarray) -> int:
    """Half-bandwidth ``max |i - j|`` of a pattern given by its entries (0 if empty)."""
    return int(np.max(np.abs(rows - cols))) if rows.size else 0
