"""The kernel's SVD (:func:`gaussopt.kernel.svd_econ` / ``svd_into``) on both of its
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

from gaussopt import kernel as K

EPS = np.finfo(float).eps


@pytest.mark.parametrize("m,n", [(5, 7), (7, 5), (K.LAPACK_MIN - 1, K.LAPACK_MIN + 3),
                                 (K.LAPACK_MIN + 12, K.LAPACK_MIN + 13),
                                 (K.LAPACK_MIN + 13, K.LAPACK_MIN + 12)])
def test_svd_reproduces_the_matrix_on_both_paths(m, n):
    rng = np.random.default_rng(m * 100 + n)
    X = rng.standard_normal((m, n))
    X[1] = X[0] * 3.0                                   # a dependent row and a dependent
    X[:, 1] = X[:, 0] * 2.0                             # column: rank < min(m, n)
    U, s, V = K.svd_econ(X)
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
