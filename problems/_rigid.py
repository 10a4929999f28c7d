"""Rigid-body kinematics for the references of the spatial problems (numpy only).

Written independently of :mod:`gaussopt.multibody.spatial`: the references of
``free_body``, ``heavy_top`` and ``rssr`` use these formulas, never the library's.
Quaternions (Euler parameters) are ``(e0, e1, e2, e3)`` (scalar first); the
rotation ``R(p)`` maps body-frame vectors to the world frame.
"""

from __future__ import annotations

import numpy as np


def rotation(p: np.ndarray) -> np.ndarray:
    """``R(p) = (e0^2 - e.e) I + 2 e e^T + 2 e0 [e]x`` of the normalized ``p``.

    Parameters
    ----------
    p : ndarray, shape (4,) or (N, 4)
        Euler parameters (normalized here).

    Returns
    -------
    ndarray, shape (3, 3) or (N, 3, 3)
    """
    p = np.asarray(p, dtype=float)
    single = p.ndim == 1
    p = np.atleast_2d(p)
    p = p / np.linalg.norm(p, axis=1)[:, None]
    e0, e1, e2, e3 = p.T
    R = np.empty((len(p), 3, 3))
    R[:, 0, 0] = e0**2 + e1**2 - e2**2 - e3**2
    R[:, 1, 1] = e0**2 - e1**2 + e2**2 - e3**2
    R[:, 2, 2] = e0**2 - e1**2 - e2**2 + e3**2
    R[:, 0, 1] = 2 * (e1 * e2 - e0 * e3)
    R[:, 1, 0] = 2 * (e1 * e2 + e0 * e3)
    R[:, 0, 2] = 2 * (e1 * e3 + e0 * e2)
    R[:, 2, 0] = 2 * (e1 * e3 - e0 * e2)
    R[:, 1, 2] = 2 * (e2 * e3 - e0 * e1)
    R[:, 2, 1] = 2 * (e2 * e3 + e0 * e1)
    return R[0] if single else R


def quaternion(R: np.ndarray) -> np.ndarray:
    """The Euler parameters (``e0 >= 0``) of a rotation matrix (Shepperd's method).

    Parameters
    ----------
    R : ndarray, shape (3, 3)

    Returns
    -------
    ndarray, shape (4,)
    """
    R = np.asarray(R, dtype=float)
    tr = np.trace(R)
    d = np.array([tr, R[0, 0], R[1, 1], R[2, 2]])
    k = int(np.argmax(d))
    if k == 0:
        e0 = 0.5 * np.sqrt(1 + tr)
        p = [e0, (R[2, 1] - R[1, 2]) / (4 * e0), (R[0, 2] - R[2, 0]) / (4 * e0),
             (R[1, 0] - R[0, 1]) / (4 * e0)]
    else:
        i, j, m = k - 1, k % 3, (k + 1) % 3
        ei = 0.5 * np.sqrt(1 + 2 * R[i, i] - tr)
        p = np.empty(4)
        p[0] = (R[m, j] - R[j, m]) / (4 * ei)
        p[1 + i] = ei
        p[1 + j] = (R[j, i] + R[i, j]) / (4 * ei)
        p[1 + m] = (R[m, i] + R[i, m]) / (4 * ei)
    p = np.asarray(p, dtype=float)
    return p if p[0] >= 0 else -p


def quaternion_rate(p: np.ndarray, w_body: np.ndarray) -> np.ndarray:
    """``p' = 1/2 p (x) (0, w')``: the rate of the Euler parameters for the
    body-frame angular velocity ``w_body`` (shape (4,))."""
    e0, e1, e2, e3 = p
    w1, w2, w3 = w_body
    return 0.5 * np.array([-e1 * w1 - e2 * w2 - e3 * w3,
                           e0 * w1 + e2 * w3 - e3 * w2,
                           e0 * w2 + e3 * w1 - e1 * w3,
                           e0 * w3 + e1 * w2 - e2 * w1])


def body_angular_velocity(p: np.ndarray, pdot: np.ndarray) -> np.ndarray:
    """The body-frame angular velocity ``w' = 2 conj(p) (x) p'`` (vector part), for
    ``p`` of shape (N, 4) (or (4,)); divided by ``|p|^2`` so that an ``p`` slightly off
    the unit sphere gives the angular velocity of its normalized rotation."""
    p, pdot = np.asarray(p, dtype=float), np.asarray(pdot, dtype=float)
    single = p.ndim == 1
    p, pdot = np.atleast_2d(p), np.atleast_2d(pdot)
    e0, e1, e2, e3 = p.T
    d0, d1, d2, d3 = pdot.T
    w = 2 * np.stack([e0 * d1 - e1 * d0 - e2 * d3 + e3 * d2,
                      e0 * d2 - e2 * d0 - e3 * d1 + e1 * d3,
                      e0 * d3 - e3 * d0 - e1 * d2 + e2 * d1], axis=1)
    w /= np.einsum("ij,ij->i", p, p)[:, None]
    return w[0] if single else w


def euler_zxz(phi: float, theta: float, psi: float) -> np.ndarray:
    """``Rz(phi) Rx(theta) Rz(psi)`` (precession, nutation, spin), shape (3, 3)."""
    def rz(a):
        c, s = np.cos(a), np.sin(a)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    c, s = np.cos(theta), np.sin(theta)
    rx = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    return rz(phi) @ rx @ rz(psi)
