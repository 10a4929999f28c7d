"""Derivatives of the quasi-velocity equations: complex steps and finite differences.

The rate of an affine nonholonomic constraint's rows along the motion is the
complex step of ``f(t + ih, q + ih v, u)`` when ``f`` is complex-safe (exact to
rounding), else a 4th-order central difference of its Jacobian ``f_v``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from gaussopt.model.constraints import Nonholonomic

__all__ = ["H", "ComplexWarning", "complex_step", "nh_rate_cs", "nh_rate_fd", "fd4"]

H = 1e-30  # complex step
ComplexWarning = getattr(getattr(np, "exceptions", np), "ComplexWarning")  # numpy < 1.25


def complex_step(fun: Callable, t: float, q: np.ndarray, v: np.ndarray, shape: tuple) -> np.ndarray:
    """``d/ds fun(t + s, q + s v)`` at ``s = 0`` by the complex step, reshaped to ``shape``."""
    val = np.asarray(fun(t + 1j * H, q + 1j * H * v), dtype=complex)
    return val.imag.reshape(shape) / H


def nh_rate_cs(con: Nonholonomic, t: float, q: np.ndarray, v: np.ndarray,
                U: np.ndarray) -> np.ndarray:
    """``B' U`` of an affine nonholonomic constraint: ``Im f(t + ih, q + ih v, u) / h`` minus
    the same at ``u = 0`` (exact for complex-safe ``f``)."""
    tc, qc = t + 1j * H, q + 1j * H * v
    base = np.asarray(con.f(tc, qc, np.zeros(q.size)), dtype=complex).reshape(-1).imag
    cols = [(np.asarray(con.f(tc, qc, U[:, j]), dtype=complex).reshape(-1).imag - base) / H
            for j in range(U.shape[1])]
    return np.stack(cols, axis=1) if cols else np.zeros((base.size, 0))


def nh_rate_fd(con: Nonholonomic, t: float, q: np.ndarray, v: np.ndarray,
                U: np.ndarray) -> np.ndarray:
    """``B' U`` by a 4th-order central difference of ``f_v`` along ``(1, v)``."""
    return fd4(lambda s: con.jacobian(t + s, q + s * v, v) @ U, v)


def fd4(fun: Callable[[float], np.ndarray], v: np.ndarray) -> np.ndarray:
    """4th-order central difference ``d/ds fun(s)`` at 0 with a step scaled by ``|(1, v)|``."""
    h = 1e-3 / np.sqrt(1.0 + float(np.dot(v, v)))
    return (np.asarray(fun(-2 * h)) - 8 * np.asarray(fun(-h)) + 8 * np.asarray(fun(h))
            - np.asarray(fun(2 * h))) / (12 * h)

