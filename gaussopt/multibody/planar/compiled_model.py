"""The numeric kernel of :mod:`gaussopt.multibody` (numba): one implementation of the
joint equations, their exact Jacobian and convective terms, the applied forces and
the energy, called by the :class:`~gaussopt.multibody.Model` methods and by the
compiled model functions of the engine (:mod:`gaussopt.core.model_interface`).

Everything a model is made of is packed into one ``float64`` array ``p``
(:func:`pack`; body indices and rows are stored as floats, exact below 2^53):
a header of 24 slots (``H_*``: the layout tag, the length of ``p``, the
numbers of bodies ``nb`` and of equations ``m``, whether the model has Python
callables, the record counts ``H_K*`` and the block offsets ``H_O*``), then
the blocks below, in this order, each a run of fixed-width records. The
ground is the padding body ``nb`` with zero coordinates: a joint to the
ground needs no special case, and its columns (``3 nb .. 3 nb + 2``) are
written only when the caller asks for the padded Jacobian (the reactions).

================  =====  ====================================================
block             width  record
================  =====  ====================================================
mass              n      the diagonal of ``M`` (``n = 3 nb``)
F0                n      gravity, constant torques, constant point forces (at the centroid)
point             7      ``i, j, s_i (2), s_j (2), row`` (rows ``row``, ``row + 1``)
angle             4      ``i, j, c0, row``
line              9      ``i, j, s_i (2), s_j (2), n_i (2), row`` (``n_i`` unit normal, body ``i``)
driven            1      ``row`` of a driven angle (``c(t)`` given by the caller)
arm               5      ``b, s (2), f (2)``: a constant point force off the centroid (its moment)
spring            9      ``i, j, s_i (2), s_j (2), k, L0, c`` (springs and dampers)
point force (py)  3      ``b, s (2)``: a callable point force (its value given by the caller)
torque (py)       1      ``b``: a callable torque (its value given by the caller)
================  =====  ====================================================

The joint Jacobians are written once, by body (:func:`local_rows`: each row's
three derivatives by the coordinates of each of its two bodies); the dense
:func:`rows` scatters them into ``A``, and :func:`sparse_rows` gathers them
into the values of a fixed CSR pattern (:func:`sparse_pattern`: three columns
per moving body of a row, computed once per model) for the O(n) step of
:mod:`gaussopt.gauss.band_step` (:func:`sparse_model`, with the diagonal of ``M``).
:func:`phi` (the residual, generic in the dtype for the complex step) is the
only other place the geometry is written; the tests check one against the
other.

The kernel functions take ``(p, q, v, ...)`` and write into output arrays.
What only Python can evaluate -- the angle ``c(t)`` of a :class:`DrivenAngle`
with callable angle and its derivatives, the values of callable point forces and
torques -- is passed in as arrays (``drv``, ``ext``), evaluated by the Python
methods; a model with any of them has ``p[H_PYTHON] = 1`` and no compiled
functions (the engine then calls its Python methods). :func:`phi` is generic in
the dtype of ``q`` and ``drv`` (``float64`` or ``complex128``): the complex step of
:class:`~gaussopt.Holonomic` differentiates it. The functions here are the
interface of a kind of multibody model (:mod:`gaussopt.multibody.common.cfuncs`,
which makes from them the five compiled model functions, :data:`FUNCTIONS`, and the
three of :func:`sparse_model`); they are compiled once for all planar models, since
``p`` carries the model.
"""

from __future__ import annotations

import sys

import numpy as np

from gaussopt.core.compiled import jit, unit
from gaussopt.core.model_interface import SparseModel
from gaussopt.multibody.common.cfuncs import KindFunctions, vec

__all__ = ["pack", "phi", "rows", "local_rows", "row_bodies", "sparse_pattern", "sparse_rows",
           "phi_t", "mass", "force", "energy", "mass_blocks", "sparse_values", "sizes",
           "FUNCTIONS", "compiled_factory", "sparse_model"]

#: compiled inside the model's functions (:mod:`gaussopt.core.compiled`), or alone when Python
#: calls them
_jit = jit(cache=True, error_model="numpy")
#: small pieces of the compiled model functions inlined into them (each compiled alone
#: cost more: numba's fixed cost per function)
_inline = jit(cache=True, error_model="numpy", inline="always")


def _unit(signature: str, lazy: bool = False):
    """The model's pieces that both the compiled model functions and Python call:
    units (:mod:`gaussopt.core.compiled`), compiled once for float arguments (``phi`` also for
    complex ones when Python asks: the complex step of a :class:`~gaussopt.Holonomic`)."""
    return unit(signature, lazy=lazy, python=True, error_model="numpy")

#: the layout tag in ``p[0]`` (checked by the compiled functions)
LAYOUT = 20250601.0
#: coordinates per body ``(x, y, phi)``; values per body of :func:`mass_blocks`
COORDINATES = MASS_VALUES = 3
# header slots
(H_TAG, H_LEN, H_NB, H_M, H_PYTHON,
 H_KP, H_KA, H_KL, H_KD, H_KF, H_KS, H_KFC, H_KTC,
 H_OP, H_OA, H_OL, H_OD, H_OMASS, H_OF0, H_OF, H_OS, H_OFC, H_OTC) = range(23)
HEADER = 24
# record widths
W_P, W_A, W_L, W_D, W_F, W_S, W_FC, W_TC = 7, 4, 9, 1, 5, 9, 3, 1


def _block(a, width: int) -> np.ndarray:
    return np.asarray(a, dtype=float).reshape(-1, width) if np.size(a) else np.zeros((0, width))


def pack(nb_: int, m: int, points, angles, lines, driven_rows, mass, F0, arms, springs,
         point_forces, torques) -> np.ndarray:
    """The parameter array ``p`` of a model (layout in the module docstring).

    Parameters
    ----------
    nb_ : int
        Number of bodies (the ground is body ``nb_``).
    m : int
        Number of joint equations.
    points, angles, lines, arms, springs, point_forces, torques : array_like
        Records, shapes (k, width) with the widths of the module docstring.
    driven_rows : array_like of int
        Rows of the driven angles, in the order of the caller's ``drv`` values.
    mass, F0 : array_like, shape ``(3 nb_,)``
    """
    blocks = [(_block(points, W_P), H_KP, H_OP), (_block(angles, W_A), H_KA, H_OA),
              (_block(lines, W_L), H_KL, H_OL), (_block(driven_rows, W_D), H_KD, H_OD),
              (_block(arms, W_F), H_KF, H_OF), (_block(springs, W_S), H_KS, H_OS),
              (_block(point_forces, W_FC), H_KFC, H_OFC), (_block(torques, W_TC), H_KTC, H_OTC)]
    head = np.zeros(HEADER)
    parts = [head]
    off = HEADER
    for arr in (np.asarray(mass, dtype=float), np.asarray(F0, dtype=float)):
        if arr.shape != (3 * nb_,):
            raise ValueError(f"`mass` and `F0` must have shape ({3 * nb_},), found {arr.shape}.")
    head[H_OMASS], head[H_OF0] = off, off + 3 * nb_
    parts += [np.asarray(mass, dtype=float), np.asarray(F0, dtype=float)]
    off += 6 * nb_
    for arr, hk, ho in blocks:
        head[hk], head[ho] = arr.shape[0], off
        parts.append(arr.reshape(-1))
        off += arr.size
    head[H_TAG], head[H_LEN], head[H_NB], head[H_M] = LAYOUT, off, nb_, m
    head[H_PYTHON] = float(head[H_KD] + head[H_KFC] + head[H_KTC] > 0)
    return np.concatenate(parts)


# =========================================================================== helpers
@_jit
def _padded(p, x):
    """``x`` with the ground's three zero coordinates appended (dtype of ``x``)."""
    n = 3 * int(p[H_NB])
    xe = np.zeros(n + 3, x.dtype)
    for i in range(n):
        xe[i] = x[i]
    return xe


@_jit
def _put(A, r, c, val):
    """``A[r, c] = val`` unless ``c`` is a ground column beyond ``A``'s width."""
    if c < A.shape[1]:
        A[r, c] = val


@_jit
def _points(p, r, C, S):
    """The bodies ``i``, ``j`` of the record at ``r`` and its points ``R_i s_i``, ``R_j
    s_j`` rotated by ``C``, ``S`` (cosines and sines of the bodies' angles): the
    records of pins, point-on-line joints and springs begin with ``i, j, s_i, s_j``.
    The one place of that geometry (:func:`phi`, :func:`local_rows`, the springs)."""
    i, j = int(p[r]), int(p[r + 1])
    six, siy, sjx, sjy = p[r + 2], p[r + 3], p[r + 4], p[r + 5]
    return (i, j, C[i] * six - S[i] * siy, S[i] * six + C[i] * siy,
            C[j] * sjx - S[j] * sjy, S[j] * sjx + C[j] * sjy)


@_jit
def _line_at(p, r, C, S, qe):
    """The point-on-line joint whose record starts at ``r`` (width ``W_L``) at the
    padded coordinates ``qe`` and their rotations ``C``, ``S``: :func:`_points`, its
    row, the line's normal ``n = R_i l_n`` and ``d = P_j - P_i`` between the two
    points (:func:`phi`, :func:`local_rows`)."""
    i, j, rix, riy, rjx, rjy = _points(p, r, C, S)
    lnx, lny = p[r + 6], p[r + 7]
    nx, ny = C[i] * lnx - S[i] * lny, S[i] * lnx + C[i] * lny
    dx = (qe[3 * j] + rjx) - (qe[3 * i] + rix)
    dy = (qe[3 * j + 1] + rjy) - (qe[3 * i + 1] + riy)
    return i, j, int(p[r + 8]), rix, riy, rjx, rjy, nx, ny, dx, dy


# =========================================================================== joints
@_unit("none(f8v, f8v, f8v, f8v)")
def phi(p, q, drv, out):
    """Joint equations ``Phi`` into ``out`` (m,); ``drv`` the driven angles ``c(t)``.
    Generic: ``q``, ``drv``, ``out`` all ``float64`` or all ``complex128``."""
    qe = _padded(p, q)
    C = np.cos(qe[2::3])
    S = np.sin(qe[2::3])
    o = int(p[H_OP])
    for k in range(int(p[H_KP])):
        r = o + W_P * k
        i, j, rix, riy, rjx, rjy = _points(p, r, C, S)
        row = int(p[r + 6])
        out[row] = (qe[3 * i] + rix) - (qe[3 * j] + rjx)
        out[row + 1] = (qe[3 * i + 1] + riy) - (qe[3 * j + 1] + rjy)
    o = int(p[H_OA])
    for k in range(int(p[H_KA])):
        r = o + W_A * k
        i, j = int(p[r]), int(p[r + 1])
        out[int(p[r + 3])] = qe[3 * j + 2] - qe[3 * i + 2] - p[r + 2]
    o = int(p[H_OD])
    for k in range(int(p[H_KD])):
        row = int(p[o + k])
        out[row] = out[row] - drv[k]
    o = int(p[H_OL])
    for k in range(int(p[H_KL])):
        _, _, row, _, _, _, _, nx, ny, dx, dy = _line_at(p, o + W_L * k, C, S, qe)
        out[row] = nx * dx + ny * dy


@_jit
def local_rows(p, q, v, ddrv, L, ij, b, with_gamma):
    """Exact ``Phi_q`` by body: row ``k`` of ``Phi_q`` is ``L[k, :3]`` in the columns
    ``(x, y, phi)`` of body ``ij[k, 0]`` plus ``L[k, 3:]`` in those of body ``ij[k, 1]``
    (the ground is body ``nb``, a column beyond ``n``), and (``with_gamma``) ``gamma``
    into ``b``. The one implementation of the joint Jacobians: the dense
    :func:`rows` and the sparse :func:`sparse_rows` scatter ``L``.

    ``L`` (m, 6) float, ``ij`` (m, 2) int64; ``ddrv`` the driven angles' ``c''(t)``;
    ``v`` is not read without ``with_gamma``.
    """
    qe = _padded(p, q)
    ve = _padded(p, v) if with_gamma else qe
    C = np.cos(qe[2::3])
    S = np.sin(qe[2::3])
    if with_gamma:
        for i in range(b.shape[0]):
            b[i] = 0.0
    o = int(p[H_OP])
    for k in range(int(p[H_KP])):
        r = o + W_P * k
        i, j, rix, riy, rjx, rjy = _points(p, r, C, S)
        row = int(p[r + 6])
        # [I, perp(R_i s_i) | -I, -perp(R_j s_j)]
        _local(L, ij, row, i, j, 1.0, 0.0, -riy, -1.0, 0.0, rjy)
        _local(L, ij, row + 1, i, j, 0.0, 1.0, rix, 0.0, -1.0, -rjx)
        if with_gamma:
            wi2, wj2 = ve[3 * i + 2] * ve[3 * i + 2], ve[3 * j + 2] * ve[3 * j + 2]
            b[row] = rix * wi2 - rjx * wj2
            b[row + 1] = riy * wi2 - rjy * wj2
    o = int(p[H_OA])
    for k in range(int(p[H_KA])):
        r = o + W_A * k
        i, j, row = int(p[r]), int(p[r + 1]), int(p[r + 3])
        _local(L, ij, row, i, j, 0.0, 0.0, -1.0, 0.0, 0.0, 1.0)
    o = int(p[H_OL])
    for k in range(int(p[H_KL])):
        i, j, row, rix, riy, rjx, rjy, nx, ny, dx, dy = _line_at(p, o + W_L * k, C, S, qe)
        # [-n, cross(n, d) - cross(R_i s_i, n) | n, cross(R_j s_j, n)]
        _local(L, ij, row, i, j, -nx, -ny, nx * dy - ny * dx - (rix * ny - riy * nx),
               nx, ny, rjx * ny - rjy * nx)
        if with_gamma:
            wi, wj = ve[3 * i + 2], ve[3 * j + 2]
            ddx = ve[3 * j] - wj * rjy - ve[3 * i] + wi * riy          # d' = P_j' - P_i'
            ddy = ve[3 * j + 1] + wj * rjx - ve[3 * i + 1] - wi * rix
            wi2, wj2 = wi * wi, wj * wj
            b[row] = -(nx * (wi2 * rix - wj2 * rjx) + ny * (wi2 * riy - wj2 * rjy)
                       + 2.0 * wi * (nx * ddy - ny * ddx) - wi2 * (nx * dx + ny * dy))
    if with_gamma:
        o = int(p[H_OD])
        for k in range(int(p[H_KD])):
            b[int(p[o + k])] = ddrv[k]


@_jit
def _local(L, ij, row, i, j, a0, a1, a2, c0, c1, c2):
    """Row ``row`` of :func:`local_rows`: ``(a0, a1, a2)`` for body ``i``, ``(c0, c1, c2)`` for ``j``."""
    ij[row, 0] = i
    ij[row, 1] = j
    L[row, 0] = a0
    L[row, 1] = a1
    L[row, 2] = a2
    L[row, 3] = c0
    L[row, 4] = c1
    L[row, 5] = c2


@_unit("none(f8v, f8v, f8v, f8v, f8m, f8v, b1)")
def rows(p, q, v, ddrv, A, b, with_gamma):
    """Exact ``Phi_q`` into ``A`` and (``with_gamma``) ``gamma`` into ``b``, one pass
    (:func:`local_rows` scattered).

    ``A`` has shape (m, n) or, with the ground's columns, (m, n + 3) (the reactions);
    ``ddrv`` the driven angles' ``c''(t)``; ``v`` is not read without ``with_gamma``.
    """
    m = int(p[H_M])
    L = np.empty((m, 6))
    ij = np.empty((m, 2), np.int64)
    local_rows(p, q, v, ddrv, L, ij, b, with_gamma)
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            A[i, j] = 0.0
    width = A.shape[1]
    for k in range(m):
        for s in range(2):
            c0 = 3 * ij[k, s]
            if c0 < width:              # the ground's columns only in the padded A
                for c in range(3):
                    A[k, c0 + c] += L[k, 3 * s + c]


# =========================================================================== sparse rows
@jit(cache=True, error_model="numpy", python=True)     # (Python calls it)
def row_bodies(p):
    """The bodies ``(i, j)`` of every joint equation, shape (m, 2) (the ground is ``nb``)."""
    m = int(p[H_M])
    ij = np.full((m, 2), int(p[H_NB]), np.int64)
    o = int(p[H_OP])
    for k in range(int(p[H_KP])):
        r = o + W_P * k
        for d in range(2):
            ij[int(p[r + 6]) + d, 0] = int(p[r])
            ij[int(p[r + 6]) + d, 1] = int(p[r + 1])
    for ho, hk, wd, wr in ((H_OA, H_KA, W_A, 3), (H_OL, H_KL, W_L, 8)):
        o = int(p[ho])
        for k in range(int(p[hk])):
            r = o + wd * k
            ij[int(p[r + wr]), 0] = int(p[r])
            ij[int(p[r + wr]), 1] = int(p[r + 1])
    return ij


def sparse_pattern(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fixed sparsity pattern of ``Phi_q`` as CSR ``(indptr, indices)``: row ``k``
    holds the three columns of each moving body of its joint, in ascending order (the
    order :func:`sparse_rows` fills)."""
    nb_ = int(p[H_NB])
    ij = row_bodies(p)
    indptr = [0]
    indices = []
    for i, j in ij:
        for body in sorted(x for x in (int(i), int(j)) if x < nb_):
            indices += [3 * body, 3 * body + 1, 3 * body + 2]
        indptr.append(len(indices))
    return np.array(indptr, dtype=np.int64), np.array(indices, dtype=np.int64)


@_unit("none(f8v, f8v, f8v, f8v, f8v, f8v, b1)", lazy=True)
def sparse_rows(p, q, v, ddrv, data, b, with_gamma):
    """``Phi_q`` in the pattern of :func:`sparse_pattern` (its CSR values into ``data``)
    and (``with_gamma``) ``gamma`` into ``b``: :func:`local_rows` gathered, O(m)."""
    m = int(p[H_M])
    nb_ = int(p[H_NB])
    L = np.empty((m, 6))
    ij = np.empty((m, 2), np.int64)
    local_rows(p, q, v, ddrv, L, ij, b, with_gamma)
    off = 0
    for k in range(m):
        i, j = ij[k, 0], ij[k, 1]
        first = 0 if i < j else 1           # the smaller body index first
        for s in (first, 1 - first):
            if ij[k, s] < nb_:
                for c in range(3):
                    data[off + c] = L[k, 3 * s + c]
                off += 3


@_unit("none(f8v, f8v, f8v, f8v)")
def phi_t(p, q, drate, out):
    """``Phi_t`` into ``out`` (m,): ``-c'(t)`` on the driven rows (``drate``), else 0
    (``q`` is not read: the interface of :mod:`gaussopt.multibody.common.cfuncs`)."""
    for i in range(out.shape[0]):
        out[i] = 0.0
    o = int(p[H_OD])
    for k in range(int(p[H_KD])):
        out[int(p[o + k])] = -drate[k]


# =========================================================================== forces
@_unit("none(f8v, f8v, f8m)")
def mass(p, q, M):
    """The constant diagonal mass matrix into ``M`` (n, n) (``q`` is not read)."""
    n = 3 * int(p[H_NB])
    o = int(p[H_OMASS])
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            M[i, j] = 0.0
    for k in range(n):
        M[k, k] = p[o + k]


@_jit
def _spring_geometry(p, r, C, S, qe):
    """Offsets ``R_i s_i``, ``R_j s_j``, direction ``e`` and length ``L`` of spring record ``r``."""
    i, j, rix, riy, rjx, rjy = _points(p, r, C, S)
    dx = qe[3 * j] + rjx - qe[3 * i] - rix
    dy = qe[3 * j + 1] + rjy - qe[3 * i + 1] - riy
    L = np.hypot(dx, dy)
    ex = dx / L if L > 0.0 else 0.0
    ey = dy / L if L > 0.0 else 0.0
    return i, j, rix, riy, rjx, rjy, ex, ey, L


@_unit("none(f8v, f8v, f8v, f8v, f8v)")
def force(p, q, v, ext, F):
    """Generalized applied force ``F = Q`` into ``F`` (n,); ``ext`` the values of the
    callable point forces (two each) then of the callable torques."""
    n = 3 * int(p[H_NB])
    o = int(p[H_OF0])
    if int(p[H_KF]) + int(p[H_KFC]) + int(p[H_KTC]) + int(p[H_KS]) == 0:
        for i in range(n):                      # a constant force
            F[i] = p[o + i]
        return
    qe = _padded(p, q)
    ve = _padded(p, v)
    C = np.cos(qe[2::3])
    S = np.sin(qe[2::3])
    Fe = np.zeros(n + 3)                        # padded: forces on the ground are dropped
    for i in range(n):
        Fe[i] = p[o + i]
    # moments of the constant point forces off the centroid
    acc = np.zeros(n + 3)
    o = int(p[H_OF])
    for k in range(int(p[H_KF])):
        r = o + W_F * k
        bb = int(p[r])
        sx, sy, fx, fy = p[r + 1], p[r + 2], p[r + 3], p[r + 4]
        rx, ry = C[bb] * sx - S[bb] * sy, S[bb] * sx + C[bb] * sy
        acc[3 * bb + 2] += rx * fy - ry * fx
    Fe += acc
    # callable point forces and torques (values from the caller)
    o = int(p[H_OFC])
    kfc = int(p[H_KFC])
    for k in range(kfc):
        r = o + W_FC * k
        bb = int(p[r])
        sx, sy, fx, fy = p[r + 1], p[r + 2], ext[2 * k], ext[2 * k + 1]
        rx, ry = C[bb] * sx - S[bb] * sy, S[bb] * sx + C[bb] * sy
        Fe[3 * bb] += fx
        Fe[3 * bb + 1] += fy
        Fe[3 * bb + 2] += rx * fy - ry * fx
    o = int(p[H_OTC])
    for k in range(int(p[H_KTC])):
        Fe[3 * int(p[o + k]) + 2] += ext[2 * kfc + k]
    # springs and dampers: tension k (L - L0) + c L' along e (force on i towards j)
    ks = int(p[H_KS])
    if ks > 0:
        for i in range(acc.shape[0]):
            acc[i] = 0.0
        fj = np.empty((ks, 3))                  # the j ends, added after every i end
        o = int(p[H_OS])
        for k in range(ks):
            r = o + W_S * k
            i, j, rix, riy, rjx, rjy, ex, ey, L = _spring_geometry(p, r, C, S, qe)
            ddx = ve[3 * j] - ve[3 * j + 2] * rjy - ve[3 * i] + ve[3 * i + 2] * riy
            ddy = ve[3 * j + 1] + ve[3 * j + 2] * rjx - ve[3 * i + 1] - ve[3 * i + 2] * rix
            Ld = ex * ddx + ey * ddy
            T = p[r + 6] * (L - p[r + 7]) + p[r + 8] * Ld
            fx, fy = T * ex, T * ey
            acc[3 * i] += fx
            acc[3 * i + 1] += fy
            acc[3 * i + 2] += rix * fy - riy * fx
            fj[k, 0], fj[k, 1], fj[k, 2] = -fx, -fy, -(rjx * fy - rjy * fx)
        for k in range(ks):
            j = int(p[o + W_S * k + 1])
            for c in range(3):
                acc[3 * j + c] += fj[k, c]
        Fe += acc
    for i in range(n):
        F[i] = Fe[i]


@_unit("f8(f8v, f8v, f8v)")
def energy(p, q, v):
    """Kinetic energy plus the potentials of gravity, springs, constant point forces
    and torques."""
    n = 3 * int(p[H_NB])
    om, of = int(p[H_OMASS]), int(p[H_OF0])
    T = 0.0
    for k in range(n):
        T += p[om + k] * v[k] * v[k]
    T *= 0.5
    # -F0 . q covers gravity, constant torques and the centroid part of constant forces
    V = 0.0
    for k in range(n):
        V += p[of + k] * q[k]
    V = -V
    kf, ks = int(p[H_KF]), int(p[H_KS])
    if kf + ks == 0:
        return T + V
    qe = _padded(p, q)
    C = np.cos(qe[2::3])
    S = np.sin(qe[2::3])
    o = int(p[H_OF])
    if kf > 0:
        acc = 0.0
        for k in range(kf):
            r = o + W_F * k
            bb = int(p[r])
            sx, sy, fx, fy = p[r + 1], p[r + 2], p[r + 3], p[r + 4]
            acc += (C[bb] * sx - S[bb] * sy) * fx + (S[bb] * sx + C[bb] * sy) * fy
        V -= acc
    o = int(p[H_OS])
    if ks > 0:
        acc = 0.0
        for k in range(ks):
            r = o + W_S * k
            L = _spring_geometry(p, r, C, S, qe)[8]
            acc += p[r + 6] * (L - p[r + 7]) ** 2
        V += 0.5 * acc
    return T + V


# =========================================================================== compiled functions
@_inline
def sizes(p):
    """Coordinates, equations and values of :func:`mass_blocks` of the model packed in ``p``."""
    nb_ = int(p[H_NB])
    return COORDINATES * nb_, int(p[H_M]), MASS_VALUES * nb_


@_inline
def mass_blocks(p, q, d):
    """The diagonal of ``M`` into ``d`` (n,): the mass blocks of the O(n) step
    (:mod:`gaussopt.gauss.band_step`), one value per coordinate."""
    o = int(p[H_OMASS])
    for k in range(COORDINATES * int(p[H_NB])):
        d[k] = p[o + k]


@_jit
def _nnz(p):
    """Entries of the pattern of :func:`sparse_pattern` (three per moving body of a row)."""
    nb_ = int(p[H_NB])
    count = 0
    for ho, hk, wd, per in ((H_OP, H_KP, W_P, 2), (H_OA, H_KA, W_A, 1), (H_OL, H_KL, W_L, 1)):
        o = int(p[ho])
        for k in range(int(p[hk])):
            r = o + wd * k
            count += per * 3 * ((int(p[r]) < nb_) + (int(p[r + 1]) < nb_))
    return count


@_inline
def sparse_values(p, q, v, datap, ph, b, want_phi, with_gamma):
    """``Phi_q`` in the pattern of :func:`sparse_pattern` (its CSR values at the address
    ``datap``: :func:`sparse_rows`), ``Phi`` into ``ph`` when ``want_phi`` and ``gamma``
    into ``b`` when ``with_gamma`` (the sparse model functions,
    :mod:`gaussopt.multibody.common.cfuncs`)."""
    if want_phi:
        phi(p, q, np.zeros(0), ph)
    sparse_rows(p, q, v, np.zeros(0), vec(datap, _nnz(p)), b, with_gamma)


#: the compiled model functions of every planar model (:mod:`gaussopt.multibody.common.cfuncs`)
_KIND = KindFunctions(sys.modules[__name__])
#: the compiled model functions ``(dyn, rows, pos, vel, energy)`` of every multibody model
FUNCTIONS = _KIND.functions


def sparse_model(p: np.ndarray) -> SparseModel:
    """The sparse evaluation of the model packed in ``p`` (:class:`gaussopt.core.model_interface.SparseModel`:
    the diagonal of ``M``, ``F``, ``Phi_q`` in its fixed pattern and ``gamma``), for the
    O(n) step of :mod:`gaussopt.gauss.band_step`."""
    return _KIND.sparse_model(p, *sparse_pattern(p))


def compiled_factory(p: np.ndarray, system):
    """A factory of the engine's :class:`~gaussopt.core.model_interface.ModelFunctions` for ``system``
    (the assembled system of the model packed in ``p``; fresh buffers per run)."""
    return _KIND.compiled_factory(p, system)
