"""The kernel's SVD (:func:`gaussopt.gauss.dense_step.svd_econ` / ``svd_into``) on both of its
paths: one-sided Jacobi below ``LAPACK_MIN`` singular values, LAPACK's gesdd from
there on. Checked against the definition, not against another SVD: ``U diag(s) V_k^T``
reproduces ``X``, ``V`` is orthogonal (its last ``n - k`` columns span the rest of
``R^n``, orthogonal to the rows), ``s`` descends.

Bounds: a backward-stable SVD reproduces ``X`` to ``c (m + n) eps |X|_2`` and its
computed orthogonal factors are orthogonal to ``c n eps``; ``c = 10`` covers the
constants of Householder QR + Jacobi rotations and of gesdd (both ``O(n eps)``
with small constants).
"""

from __future__ import annotations

import numpy as np
import pytest

import gaussopt.gauss.dense_algebra as LA

EPS = np.finfo(float).eps


@pytest.mark.parametrize("m,n", [(5, 7), (7, 5), (LA.LAPACK_MIN - 1, LA.LAPACK_MIN + 3),
                                 (LA.LAPACK_MIN + 12, LA.LAPACK_MIN + 13),
                                 (LA.LAPACK_MIN + 13, LA.LAPACK_MIN + 12)])
def test_svd_reproduces_the_matrix_on_both_paths(m, n):
    rng = np.random.default_rng(m * 100 + n)
    X = rng.standard_normal((m, n))
    X[1] = X[0] * 3.0                                   # a dependent row and a dependent
    X[:, 1] = X[:, 0] * 2.0                             # column: rank < min(m, n)
    U, s, V = LA.svd_econ(X)
    k = min(m, n)
    assert U.shape == (m, k) and s.shape == (k,) and V.shape == (n, n)
    assert np.all(np.diff(s) <= 0.0)
    scale = s[0]
    tol = 10.0 * (m + n) * EPS
    np.testing.assert_allclose(U @ (s[:, None] * V[:, :k].T), X, rtol=0, atol=tol * scale)
    assert np.abs(V.T @ V - np.eye(n)).max() <= 10.0 * n * EPS
    live = s > tol * scale
    assert np.abs(U[:, live].T @ U[:, live] - np.eye(int(live.sum()))).max() <= 10.0 * n * EPS
    assert s[-1] <= tol * scale                          # the rank deficiency
    # the trailing columns of V are orthogonal to every row
    assert np.abs(X @ V[:, k:]).max(initial=0.0) <= tol * scale


@pytest.mark.parametrize("m,n", [(1, 4), (3, 13), (5, 34), (LA.LAPACK_MIN + 2, 4 * LA.LAPACK_MIN + 9)])
def test_svd_of_rows_with_disjoint_supports(m, n):
    """Rows with disjoint supports (a tree's normalization rows, one per ball joint) take
    the SVD written down (the row norms, a permutation, the normalized rows), also beyond
    ``LAPACK_MIN``; it satisfies the same definition as the other paths, and the completed
    ``V``'s last columns are orthogonal to the rows."""
    rng = np.random.default_rng(m + n)
    X = np.zeros((m, n))
    cols = rng.permutation(n)
    for i in range(m):
        X[i, cols[4 * i:4 * i + 4 if m > 1 else n]] = rng.normal(size=4 if m > 1 else n) * 10.0 ** rng.integers(-3, 3)
    U, s, V = LA.svd_econ(X)
    assert np.all(np.diff(s) <= 0.0)
    np.testing.assert_allclose(np.sort(s)[::-1], np.sort(np.linalg.norm(X, axis=1))[::-1],
                               rtol=4 * n * EPS)
    tol = 10.0 * (m + n) * EPS
    np.testing.assert_allclose(U @ (s[:, None] * V[:, :m].T), X, rtol=0, atol=tol * s[0])
    assert np.abs(V.T @ V - np.eye(n)).max() <= 10.0 * n * EPS
    assert np.abs(U.T @ U - np.eye(m)).max() == 0.0               # a permutation
    assert np.abs(X @ V[:, m:]).max(initial=0.0) <= tol * s[0]


@pytest.mark.parametrize("e", [-320, -300, -200, -150, -146, -145, -100, 0, 100, 144, 145,
                               146, 200, 300, 307])
def test_norms_on_both_paths_over_the_exponent_range(e):
    """The kernel's norms (``_norm2`` by ``row_norms``, ``_frobenius``, the Householder
    column norm inside the SVD) take the plain sum of squares where it can neither
    overflow nor lose the norm to underflow, and scale by the largest entry elsewhere:
    at every magnitude the result is the exact norm to a few eps (the sum of squares
    of 4 terms: 4 eps; the square root and scaling: 2 eps more). The exact norm is
    computed in integers (entries are integer multiples of 2^-40 scaled by 2^k,
    so the scaling by a power of two is exact). Entries ~1e80 gave singular values off
    in the third digit, ~1e200 gave zeros: Jacobi's sums of squares overflowed."""
    from fractions import Fraction
    import math

    rng = np.random.default_rng(abs(e) + 1)
    mant = rng.integers(1, 2 ** 20, size=(2, 4)).astype(float) * 2.0 ** -20
    k = int(round(e * math.log2(10)))
    # keep the largest entry finite and the smallest representable (subnormals allowed)
    k = max(min(k, 1023 - 1), -1074 + 21)
    X = np.ldexp(mant, k)
    assert np.all(np.isfinite(X)) and np.all(X > 0)

    def exact(v):
        # |v| in exact rational arithmetic, rounded once
        ss = sum(Fraction(float(x)) ** 2 for x in v)
        return math.sqrt(float(ss * Fraction(2) ** (-2 * k))) * 2.0 ** k

    out = np.zeros(2)
    LA.row_norms(X, out)
    for i in range(2):
        assert out[i] == pytest.approx(exact(X[i]), rel=6 * EPS, abs=0)
    assert LA.frobenius(X) == pytest.approx(exact(X.ravel()), rel=6 * EPS, abs=0)
    # the SVD (scaled by a power of two outside [2^-200, 2^200], where Jacobi's sums of
    # squares would overflow or underflow): singular values of the scaled-up copy times
    # the scale, and the product U s V^T reproduces X to the bound of
    # test_svd_reproduces_the_matrix_on_both_paths (10 (m + n) eps |X|), plus, for
    # subnormal X, the rounding of the product's 2 terms onto the subnormal grid
    # (2^-1074 each, 2 roundings per term: 4 grid steps)
    U, s, V = LA.svd_econ(X)
    s_ref = np.ldexp(np.linalg.svd(np.ldexp(X, -k), compute_uv=False), k)
    # (a subnormal singular value is rounded onto the grid of 2^-1074)
    np.testing.assert_allclose(s, s_ref, rtol=10.0 * 6 * EPS, atol=2.0 ** -1074)
    np.testing.assert_allclose(U @ (s[:, None] * V[:, :2].T), X, rtol=0,
                               atol=10.0 * 6 * EPS * s[0] + 4 * 2.0 ** -1074)
