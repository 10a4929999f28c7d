"""The numeric kernel of :mod:`gaussopt.multibody.spatial` (numba): one implementation
of the joint equations of spatial rigid bodies in Euler parameters, their exact
Jacobians and convective terms, the mass matrix, the applied and gyroscopic forces
and the energy, called by the :class:`~gaussopt.multibody.spatial.Model` methods and
by the compiled model functions of the engine (:mod:`gaussopt.core.model_interface`).

**Kinematics.** Body ``k`` has ``q_k = (r, p)``, ``r`` its centroid, ``p = (e0, e)``
its Euler parameters. With ``E = [-e, ~e + e0 I]`` and ``G = [-e, -~e + e0 I]``
(3x4), ``A(p) = E G^T`` is the rotation for a unit ``p`` and is a homogeneous
quadratic in ``p``. A body vector ``s`` (body frame) is at ``A s = B(p, s) p / 2`` in
the world with ``B(p, s) = d(A s)/dp = 2 [e0 s + e x s, (e.s) I + e s^T - s e^T -
e0 ~s]``, which is linear in ``p``; hence ``d(A s)/dt = B(p, s) p'`` and
``d^2(A s)/dt^2 = B(p, s) p'' + B(p', s) p'`` exactly. Every joint equation is
built from such vectors, so its Jacobian and its convective term come out exact:

=========  ==================================================  ==========================
primitive  ``Phi``                                             rows
=========  ==================================================  ==========================
point      ``d = (r_j + A_j s_j) - (r_i + A_i s_i)``             3 (spherical)
dot1       ``(A_i a) . (A_j b) - c``                             1 (axes perpendicular)
dot2       ``(A_i a) . d - c``                                   1 (point on a plane of i)
dist       ``(d . d - L^2) / 2``                                  1 (distance)
norm       ``(p . p - 1) / 2``                                    1 per body
driven     ``D1 cos c(t) - D2 sin c(t)``,                          1 (driven angle)
           ``D1 = (A_i g).(A_j f')``,
           ``D2 = (A_i f).(A_j f')``: ``sin(theta - c)``
=========  ==================================================  ==========================

For ``x . y`` of two such vectors the row is ``y^T x_q + x^T y_q`` and ``gamma =
-(x_c . y + 2 x' . y' + x . y_c)`` (``x_c = B(p', s) p'``, the convective part).

**Dynamics** (Nikravesh 1988, ch. 6 and 11): ``M_k = diag(m I3, 4 G^T J G)`` (rank 6:
``G p = 0``) and ``F_k = (m g + f, 2 E^T n + 8 G(p')^T J G(p') p)`` -- the last term
is the Lagrangian's quadratic velocity term in Euler parameters; a force ``f`` at a
body point ``s`` adds ``B(p, s)^T f`` to the ``p`` part, a world torque ``n`` adds
``2 E^T n``.

Everything a model is made of is packed into one ``float64`` array ``p`` (:func:`pack`;
indices stored as floats): a header of :data:`HEADER` slots, then blocks of
fixed-width records (widths ``W_*``). The ground is the padding body ``nb``
(``r = 0``, ``p = (1, 0, 0, 0)``), whose columns are never written. What only Python
evaluates -- driven angles ``c(t)`` with callables, callable forces and torques --
is passed in as arrays (``drv``: ``c, c', c''`` per driver; ``ext``: three values per
callable force or torque); a model with any of them has ``p[H_PYTHON] = 1`` and no
compiled functions. The functions here are the interface of a kind of multibody model:
:mod:`gaussopt.multibody.common.cfuncs` makes from them the compiled model functions
(:data:`FUNCTIONS`, and the three of :func:`sparse_model`).
"""

from __future__ import annotations

import sys

import numpy as np

from gaussopt.core.compiled import jit, unit
from gaussopt.core.model_interface import SparseModel
from gaussopt.multibody.common.cfuncs import KindFunctions, vec

__all__ = ["pack", "phi", "rows", "phi_t", "mass", "force", "energy", "FUNCTIONS",
           "compiled_factory", "sparse_model", "sparse_pattern", "row_bodies", "mass_blocks",
           "sparse_values", "sizes"]

_jit = jit(cache=True, error_model="numpy")
#: small pieces of the compiled model functions inlined into them (each compiled alone
#: cost more: numba's fixed cost per function)
_inline = jit(cache=True, error_model="numpy", inline="always")


def _unit(signature: str):
    """Kernel entry points called from Python and from the compiled model functions:
    compiled once, when a spatial model is first used."""
    return unit(signature, lazy=True, python=True, error_model="numpy")


#: the layout tag in ``p[0]``
LAYOUT = 20261128.0
#: coordinates per body ``(x, y, z, e0, e1, e2, e3)``
COORDINATES = 7
#: values per body of :func:`mass_blocks`: ``m, m, m`` and the 4 x 4 block
MASS_VALUES = 19
(H_TAG, H_LEN, H_NB, H_M, H_PYTHON, H_GX, H_GY, H_GZ,
 H_KPT, H_KD1, H_KD2, H_KDS, H_KNR, H_KDR, H_KF, H_KT, H_KS, H_KRD,
 H_OMASS, H_OPT, H_OD1, H_OD2, H_ODS, H_ONR, H_ODR, H_OF, H_OT, H_OS, H_ORD,
 H_KAR, H_OAR) = range(31)
HEADER = 32
# record widths
W_MASS = 10   # m, J (9, row-major)
W_PT = 9      # i, j, s_i (3), s_j (3), row
W_D1 = 10     # i, j, a (3), b (3), row, c
W_D2 = 14     # i, j, a (3), s_i (3), s_j (3), row, c, pad
W_DS = 10     # i, j, s_i (3), s_j (3), L, row
W_NR = 2      # body, row
W_DR = 15     # i, j, f_i (3), g_i (3), f_j (3), row, c0, k (python driver index or -1), pad
W_F = 8       # b, s (3), f (3), k (python index or -1)
W_T = 6       # b, rb (reaction body, nb: none), n (3), k
W_S = 11      # i, j, s_i (3), s_j (3), k, L0, c
W_RD = 6      # i, j, u_i (3), c
W_AR = 9      # i, j, u_i (3), u_j (3), a (armature: the axis in each body's frame)

_BLOCKS = ((H_KPT, H_OPT, W_PT), (H_KD1, H_OD1, W_D1), (H_KD2, H_OD2, W_D2),
           (H_KDS, H_ODS, W_DS), (H_KNR, H_ONR, W_NR), (H_KDR, H_ODR, W_DR),
           (H_KF, H_OF, W_F), (H_KT, H_OT, W_T), (H_KS, H_OS, W_S), (H_KRD, H_ORD, W_RD),
           (H_KAR, H_OAR, W_AR))


def _block(a, width: int) -> np.ndarray:
    return np.asarray(a, dtype=float).reshape(-1, width) if np.size(a) else np.zeros((0, width))


def pack(nb_: int, m: int, gravity, masses, points, dot1, dot2, dists, norms, drivers,
         forces, torques, springs, dampers, armatures, python: bool) -> np.ndarray:
    """The parameter array of a model (layout in the module docstring); every record
    block an array of shape (k, width)."""
    head = np.zeros(HEADER)
    parts = [head]
    off = HEADER
    mb = _block(masses, W_MASS)
    if mb.shape[0] != nb_:
        raise ValueError(f"`masses` must have {nb_} records, found {mb.shape[0]}.")
    head[H_OMASS] = off
    parts.append(mb.reshape(-1))
    off += mb.size
    for arr, (hk, ho, w) in zip((points, dot1, dot2, dists, norms, drivers, forces, torques,
                                 springs, dampers, armatures), _BLOCKS):
        blk = _block(arr, w)
        head[hk], head[ho] = blk.shape[0], off
        parts.append(blk.reshape(-1))
        off += blk.size
    head[H_TAG], head[H_LEN], head[H_NB], head[H_M] = LAYOUT, off, nb_, m
    head[H_GX:H_GZ + 1] = np.asarray(gravity, dtype=float)
    head[H_PYTHON] = float(bool(python))
    return np.concatenate(parts)


# =========================================================================== helpers
@_jit
def _padded(p, q, v):
    """``q`` and ``v`` with the ground's coordinates appended (``r = 0``, ``p = (1, 0, 0, 0)``)."""
    n = 7 * int(p[H_NB])
    qe = np.zeros(n + 7)
    ve = np.zeros(n + 7)
    for k in range(n):
        qe[k] = q[k]
        ve[k] = v[k]
    qe[n + 3] = 1.0
    return qe, ve


@_jit
def _bmat(x, o, s0, s1, s2, B):
    """``B(x, s) = d(A s)/dp`` at the Euler parameters ``x[o:o+4]`` (3x4, linear in ``x``)."""
    e0, e1, e2, e3 = x[o], x[o + 1], x[o + 2], x[o + 3]
    es = e1 * s0 + e2 * s1 + e3 * s2
    B[0, 0] = 2.0 * (e0 * s0 + e2 * s2 - e3 * s1)
    B[1, 0] = 2.0 * (e0 * s1 + e3 * s0 - e1 * s2)
    B[2, 0] = 2.0 * (e0 * s2 + e1 * s1 - e2 * s0)
    B[0, 1] = 2.0 * es
    B[0, 2] = 2.0 * (e1 * s1 - s0 * e2 + e0 * s2)
    B[0, 3] = 2.0 * (e1 * s2 - s0 * e3 - e0 * s1)
    B[1, 1] = 2.0 * (e2 * s0 - s1 * e1 - e0 * s2)
    B[1, 2] = 2.0 * es
    B[1, 3] = 2.0 * (e2 * s2 - s1 * e3 + e0 * s0)
    B[2, 1] = 2.0 * (e3 * s0 - s2 * e1 + e0 * s1)
    B[2, 2] = 2.0 * (e3 * s1 - s2 * e2 - e0 * s0)
    B[2, 3] = 2.0 * es


@_jit
def _bvec(qe, ve, b, s0, s1, s2, B, w, wd, wc):
    """A body vector ``A_b s``: its value ``w``, its rate ``wd = B p'``, its convective
    acceleration ``wc = B(p', s) p'``, and ``B = B(p_b, s)`` (for the Jacobian).
    ``B(p', s) p'`` is formed entry by entry (no scratch matrix)."""
    o = 7 * b + 3
    _bmat(qe, o, s0, s1, s2, B)
    e0, e1, e2, e3 = ve[o], ve[o + 1], ve[o + 2], ve[o + 3]
    es = e1 * s0 + e2 * s1 + e3 * s2
    # B(p', s) p' = 2 [e0 (e0 s + e x s) + (e.s) e + e (e.s) - s (e.e) - e0 (s x e)]
    #            = 2 [(e0^2 - e.e) s + 2 (e.s) e + 2 e0 (e x s)], with (e0, e) = p'
    d = e0 * e0 - e1 * e1 - e2 * e2 - e3 * e3
    wc[0] = 2.0 * (d * s0 + 2.0 * es * e1 + 2.0 * e0 * (e2 * s2 - e3 * s1))
    wc[1] = 2.0 * (d * s1 + 2.0 * es * e2 + 2.0 * e0 * (e3 * s0 - e1 * s2))
    wc[2] = 2.0 * (d * s2 + 2.0 * es * e3 + 2.0 * e0 * (e1 * s1 - e2 * s0))
    for r in range(3):
        a0 = 0.0
        a1 = 0.0
        for c in range(4):
            a0 += B[r, c] * qe[o + c]
            a1 += B[r, c] * ve[o + c]
        w[r] = 0.5 * a0
        wd[r] = a1


@_jit
def _point(qe, ve, b, s0, s1, s2, B, P, Pd, Pc):
    """A body point ``r_b + A_b s``: position, velocity, convective acceleration."""
    _bvec(qe, ve, b, s0, s1, s2, B, P, Pd, Pc)
    o = 7 * b
    for r in range(3):
        P[r] += qe[o + r]
        Pd[r] += ve[o + r]


@_jit
def _dot(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


@_jit
def _add_r(L, row, s, y, sign):
    """``Phi_q`` by ``r`` of the row's body ``s`` (0: ``i``, 1: ``j``) ``+= sign * y``."""
    o = 7 * s
    for r in range(3):
        L[row, o + r] += sign * y[r]


@_jit
def _add_p(L, row, s, y, B, sign):
    """``Phi_q`` by ``p`` of the row's body ``s`` (0: ``i``, 1: ``j``) ``+= sign * y^T B``."""
    o = 7 * s + 3
    for c in range(4):
        L[row, o + c] += sign * (y[0] * B[0, c] + y[1] * B[1, c] + y[2] * B[2, c])


@_jit
def _bodies(ij, row, i, j, with_r):
    """The bodies of ``row`` and whether it has ``r`` columns (else only ``p`` ones)."""
    ij[row, 0] = i
    ij[row, 1] = j
    ij[row, 2] = 1 if with_r else 0


@_jit
def _evaluate(p, q, v, drv, ph, L, ij, g, pt, want_phi, want_A, want_g, want_t):
    """One pass over the primitives: ``Phi`` into ``ph``, ``Phi_q`` by body into ``L``
    and ``ij`` (zeroed here: row ``k`` is ``L[k, :7]`` in the columns of body
    ``ij[k, 0]`` plus ``L[k, 7:]`` in those of ``ij[k, 1]``, the ground ``nb`` a body
    without columns), ``gamma`` into ``g`` and ``Phi_t`` into ``pt``, each when asked.
    The one implementation of the joint Jacobians: the dense :func:`rows` scatters
    ``L``, the sparse :func:`sparse_values` gathers it."""
    nb_ = int(p[H_NB])
    m = int(p[H_M])
    qe, ve = _padded(p, q, v)
    if want_A:
        for r in range(m):
            ij[r, 0] = nb_
            ij[r, 1] = nb_
            ij[r, 2] = 1
            for c in range(14):
                L[r, c] = 0.0
    for r in range(m):
        if want_phi:
            ph[r] = 0.0
        if want_g:
            g[r] = 0.0
        if want_t:
            pt[r] = 0.0
    Bi = np.empty((3, 4))
    Bj = np.empty((3, 4))
    Bk = np.empty((3, 4))
    x = np.empty(3)
    xd = np.empty(3)
    xc = np.empty(3)
    y = np.empty(3)
    yd = np.empty(3)
    yc = np.empty(3)
    P = np.empty(3)
    Pd = np.empty(3)
    Pc = np.empty(3)
    d = np.empty(3)
    dd = np.empty(3)
    dc = np.empty(3)
    e = np.zeros(3)
    # ---- point coincidence: d = P_j - P_i
    o, k_ = int(p[H_OPT]), int(p[H_KPT])
    for k in range(k_):
        rec = o + W_PT * k
        i, j, row = int(p[rec]), int(p[rec + 1]), int(p[rec + 8])
        _point(qe, ve, i, p[rec + 2], p[rec + 3], p[rec + 4], Bi, x, xd, xc)
        _point(qe, ve, j, p[rec + 5], p[rec + 6], p[rec + 7], Bj, y, yd, yc)
        for r in range(3):
            if want_phi:
                ph[row + r] = y[r] - x[r]
            if want_g:
                g[row + r] = -(yc[r] - xc[r])
            if want_A:
                e[0] = 0.0
                e[1] = 0.0
                e[2] = 0.0
                e[r] = 1.0
                _bodies(ij, row + r, i, j, True)
                _add_r(L, row + r, 0, e, -1.0)
                _add_r(L, row + r, 1, e, 1.0)
                _add_p(L, row + r, 0, e, Bi, -1.0)
                _add_p(L, row + r, 1, e, Bj, 1.0)
    # ---- dot1: (A_i a) . (A_j b) - c
    o, k_ = int(p[H_OD1]), int(p[H_KD1])
    for k in range(k_):
        rec = o + W_D1 * k
        i, j, row = int(p[rec]), int(p[rec + 1]), int(p[rec + 8])
        _bvec(qe, ve, i, p[rec + 2], p[rec + 3], p[rec + 4], Bi, x, xd, xc)
        _bvec(qe, ve, j, p[rec + 5], p[rec + 6], p[rec + 7], Bj, y, yd, yc)
        if want_phi:
            ph[row] = _dot(x, y) - p[rec + 9]
        if want_g:
            g[row] = -(_dot(xc, y) + 2.0 * _dot(xd, yd) + _dot(x, yc))
        if want_A:
            _bodies(ij, row, i, j, False)
            _add_p(L, row, 0, y, Bi, 1.0)
            _add_p(L, row, 1, x, Bj, 1.0)
    # ---- dot2: (A_i a) . d - c, d = P_j - P_i
    o, k_ = int(p[H_OD2]), int(p[H_KD2])
    for k in range(k_):
        rec = o + W_D2 * k
        i, j, row = int(p[rec]), int(p[rec + 1]), int(p[rec + 11])
        _bvec(qe, ve, i, p[rec + 2], p[rec + 3], p[rec + 4], Bk, x, xd, xc)
        _point(qe, ve, i, p[rec + 5], p[rec + 6], p[rec + 7], Bi, P, Pd, Pc)
        _point(qe, ve, j, p[rec + 8], p[rec + 9], p[rec + 10], Bj, y, yd, yc)
        for r in range(3):
            d[r] = y[r] - P[r]
            dd[r] = yd[r] - Pd[r]
            dc[r] = yc[r] - Pc[r]
        if want_phi:
            ph[row] = _dot(x, d) - p[rec + 12]
        if want_g:
            g[row] = -(_dot(xc, d) + 2.0 * _dot(xd, dd) + _dot(x, dc))
        if want_A:
            _bodies(ij, row, i, j, True)
            _add_p(L, row, 0, d, Bk, 1.0)
            _add_r(L, row, 0, x, -1.0)
            _add_p(L, row, 0, x, Bi, -1.0)
            _add_r(L, row, 1, x, 1.0)
            _add_p(L, row, 1, x, Bj, 1.0)
    # ---- distance: (d . d - L^2) / 2
    o, k_ = int(p[H_ODS]), int(p[H_KDS])
    for k in range(k_):
        rec = o + W_DS * k
        i, j, L0, row = int(p[rec]), int(p[rec + 1]), p[rec + 8], int(p[rec + 9])
        _point(qe, ve, i, p[rec + 2], p[rec + 3], p[rec + 4], Bi, x, xd, xc)
        _point(qe, ve, j, p[rec + 5], p[rec + 6], p[rec + 7], Bj, y, yd, yc)
        for r in range(3):
            d[r] = y[r] - x[r]
            dd[r] = yd[r] - xd[r]
            dc[r] = yc[r] - xc[r]
        if want_phi:
            ph[row] = 0.5 * (_dot(d, d) - L0 * L0)
        if want_g:
            g[row] = -(_dot(dd, dd) + _dot(d, dc))
        if want_A:
            _bodies(ij, row, i, j, True)
            _add_r(L, row, 0, d, -1.0)
            _add_p(L, row, 0, d, Bi, -1.0)
            _add_r(L, row, 1, d, 1.0)
            _add_p(L, row, 1, d, Bj, 1.0)
    # ---- normalization: (p . p - 1) / 2
    o, k_ = int(p[H_ONR]), int(p[H_KNR])
    for k in range(k_):
        b, row = int(p[o + W_NR * k]), int(p[o + W_NR * k + 1])
        ob = 7 * b + 3
        s = 0.0
        sv = 0.0
        if want_A:
            _bodies(ij, row, b, nb_, False)
        for c in range(4):
            s += qe[ob + c] * qe[ob + c]
            sv += ve[ob + c] * ve[ob + c]
            if want_A:
                L[row, 3 + c] = qe[ob + c]
        if want_phi:
            ph[row] = 0.5 * (s - 1.0)
        if want_g:
            g[row] = -sv
    # ---- driven angle: D1 cos c - D2 sin c, D1 = (A_i g).(A_j f'), D2 = (A_i f).(A_j f')
    o, k_ = int(p[H_ODR]), int(p[H_KDR])
    for k in range(k_):
        rec = o + W_DR * k
        i, j, row, ipy = int(p[rec]), int(p[rec + 1]), int(p[rec + 11]), int(p[rec + 13])
        if ipy >= 0:
            c, cd, cdd = drv[3 * ipy], drv[3 * ipy + 1], drv[3 * ipy + 2]
        else:
            c, cd, cdd = p[rec + 12], 0.0, 0.0
        cs, sn = np.cos(c), np.sin(c)
        _bvec(qe, ve, i, p[rec + 2], p[rec + 3], p[rec + 4], Bi, x, xd, xc)      # f_i
        _bvec(qe, ve, i, p[rec + 5], p[rec + 6], p[rec + 7], Bk, P, Pd, Pc)      # g_i
        _bvec(qe, ve, j, p[rec + 8], p[rec + 9], p[rec + 10], Bj, y, yd, yc)     # f_j
        D1, D2 = _dot(P, y), _dot(x, y)
        D1d = _dot(Pd, y) + _dot(P, yd)
        D2d = _dot(xd, y) + _dot(x, yd)
        if want_phi:
            ph[row] = D1 * cs - D2 * sn
        if want_t:
            pt[row] = -cd * (D1 * sn + D2 * cs)
        if want_g:
            g1 = -(_dot(Pc, y) + 2.0 * _dot(Pd, yd) + _dot(P, yc))
            g2 = -(_dot(xc, y) + 2.0 * _dot(xd, yd) + _dot(x, yc))
            g[row] = (g1 * cs - g2 * sn + 2.0 * cd * (D1d * sn + D2d * cs)
                      + cdd * (D1 * sn + D2 * cs) + cd * cd * (D1 * cs - D2 * sn))
        if want_A:
            _bodies(ij, row, i, j, False)
            _add_p(L, row, 0, y, Bk, cs)
            _add_p(L, row, 0, y, Bi, -sn)
            for r in range(3):
                d[r] = P[r] * cs - x[r] * sn
            _add_p(L, row, 1, d, Bj, 1.0)


# =========================================================================== entry points
@_unit("none(f8v, f8v, f8v, f8v)")
def phi(p, q, drv, out):
    """``Phi(q)`` (with the driven angles' values ``drv``) into ``out``, shape (m,)."""
    _evaluate(p, q, q, drv, out, np.zeros((0, 14)), np.zeros((0, 3), np.int64), out, out, True,
              False, False, False)


@_unit("none(f8v, f8v, f8v, f8v, f8m, f8v, b1)")
def rows(p, q, v, drv, A, b, with_gamma):
    """``Phi_q`` into ``A`` (m, n) and, when ``with_gamma``, ``gamma`` into ``b``
    (:func:`_evaluate`'s rows by body, scattered)."""
    m = int(p[H_M])
    nb_ = int(p[H_NB])
    L = np.empty((m, 14))
    ij = np.empty((m, 3), np.int64)
    rows_by_body(p, q, v, drv, L, ij, b, b, False, with_gamma)
    for r in range(A.shape[0]):
        for c in range(A.shape[1]):
            A[r, c] = 0.0
    for k in range(m):
        for s in range(2):
            bb = ij[k, s]
            if bb < nb_:
                for c in range(7):
                    A[k, 7 * bb + c] += L[k, 7 * s + c]


@_unit("none(f8v, f8v, f8v, f8v)")
def phi_t(p, q, drv, out):
    """``Phi_t(t, q)`` into ``out`` (nonzero on driven rows only)."""
    _evaluate(p, q, q, drv, out, np.zeros((0, 14)), np.zeros((0, 3), np.int64), out, out, False,
              False, False, True)


# =========================================================================== sparse rows
def row_bodies(p: np.ndarray) -> np.ndarray:
    """The bodies ``(i, j)`` of every equation and whether it has ``r`` columns, shape
    (m, 3) (the ground is ``nb``)."""
    m, n = int(p[H_M]), 7 * int(p[H_NB])
    L = np.empty((m, 14))
    ij = np.empty((m, 3), np.int64)
    z = np.zeros(n)
    nd = 3 * int(p[H_KDR])
    rows_by_body(p, z, z, np.zeros(nd), L, ij, np.zeros(m), np.zeros(m), False, False)
    return ij


@_unit("none(f8v, f8v, f8v, f8v, f8m, i8m, f8v, f8v, b1, b1)")
def rows_by_body(p, q, v, drv, L, ij, ph, b, want_phi, with_gamma):
    """``Phi_q`` by body into ``L`` (m, 14) and ``ij`` (m, 3) (:func:`_evaluate`), in the
    same pass ``Phi`` into ``ph`` when ``want_phi`` and ``gamma`` into ``b`` when
    ``with_gamma``."""
    _evaluate(p, q, v, drv, ph, L, ij, b, b, want_phi, True, with_gamma, False)


def sparse_pattern(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fixed sparsity pattern of ``Phi_q`` as CSR ``(indptr, indices)``: row ``k``
    holds the seven columns of each moving body of its equation (the four of ``p`` where
    the row has no ``r`` columns: a normalization, two axes), the smaller body first
    (the order :func:`sparse_values` fills; whole mass blocks, as :mod:`gaussopt.gauss.band_step`
    needs)."""
    nb_ = int(p[H_NB])
    indptr = [0]
    indices = []
    for i, j, with_r in row_bodies(p):
        for body in sorted(x for x in (int(i), int(j)) if x < nb_):
            indices += range(7 * body + (0 if with_r else 3), 7 * body + 7)
        indptr.append(len(indices))
    return np.array(indptr, dtype=np.int64), np.array(indices, dtype=np.int64)


@_jit
def sparse_values(p, q, v, datap, ph, b, want_phi, with_gamma):
    """``Phi_q`` in the pattern of :func:`sparse_pattern` (its CSR values at the address
    ``datap``) and, in the same pass, ``Phi`` into ``ph`` when ``want_phi`` and ``gamma``
    into ``b`` when ``with_gamma``: :func:`_evaluate`'s rows by body gathered, O(m)."""
    m = int(p[H_M])
    nb_ = int(p[H_NB])
    L = np.empty((m, 14))
    ij = np.empty((m, 3), np.int64)
    rows_by_body(p, q, v, np.zeros(0), L, ij, ph, b, want_phi, with_gamma)
    nnz = 0
    for k in range(m):
        nnz += (7 if ij[k, 2] else 4) * ((ij[k, 0] < nb_) + (ij[k, 1] < nb_))
    data = vec(datap, nnz)
    off = 0
    for k in range(m):
        c0 = 0 if ij[k, 2] else 3
        first = 0 if ij[k, 0] < ij[k, 1] else 1       # the smaller body index first
        for s in (first, 1 - first):
            if ij[k, s] < nb_:
                for c in range(c0, 7):
                    data[off] = L[k, 7 * s + c]
                    off += 1


@_jit
def mass_blocks(p, q, d):
    """The blocks of ``M(q)`` packed for :mod:`gaussopt.gauss.band_step` into ``d``: per body
    ``m, m, m`` and the 4 x 4 ``4 G^T J G`` (row-major), 19 values."""
    G = np.empty((3, 4))
    JG = np.empty((3, 4))
    for b in range(int(p[H_NB])):
        rec = int(p[H_OMASS]) + W_MASS * b
        o = 19 * b
        d[o] = p[rec]
        d[o + 1] = p[rec]
        d[o + 2] = p[rec]
        _rot_block(p, q, b, G, JG, d, o + 3)


@_jit
def _gmat(x, o, G):
    """``G(x[o:o+4])`` (3x4, body frame)."""
    e0, e1, e2, e3 = x[o], x[o + 1], x[o + 2], x[o + 3]
    G[0, 0], G[0, 1], G[0, 2], G[0, 3] = -e1, e0, e3, -e2
    G[1, 0], G[1, 1], G[1, 2], G[1, 3] = -e2, -e3, e0, e1
    G[2, 0], G[2, 1], G[2, 2], G[2, 3] = -e3, e2, -e1, e0


@_jit
def _emat(x, o, E):
    """``E(x[o:o+4])`` (3x4, world frame)."""
    e0, e1, e2, e3 = x[o], x[o + 1], x[o + 2], x[o + 3]
    E[0, 0], E[0, 1], E[0, 2], E[0, 3] = -e1, e0, -e3, e2
    E[1, 0], E[1, 1], E[1, 2], E[1, 3] = -e2, e3, e0, -e1
    E[2, 0], E[2, 1], E[2, 2], E[2, 3] = -e3, -e2, e1, e0


@_unit("none(f8v, f8v, f8m)")
def mass(p, q, M):
    """``M(q) = blockdiag(m I3, 4 G^T J G)`` into ``M`` (n, n)."""
    nb_ = int(p[H_NB])
    n = 7 * nb_
    for r in range(n):
        for c in range(n):
            M[r, c] = 0.0
    G = np.empty((3, 4))
    JG = np.empty((3, 4))
    blk = np.empty(16)
    for b in range(nb_):
        rec = int(p[H_OMASS]) + W_MASS * b
        o = 7 * b
        for r in range(3):
            M[o + r, o + r] = p[rec]
        _rot_block(p, q, b, G, JG, blk, 0)
        for r in range(4):
            for c in range(4):
                M[o + 3 + r, o + 3 + c] = blk[4 * r + c]
    # armatures: a c c^T on the two bodies' Euler parameters
    ci = np.empty(4)
    cj = np.empty(4)
    o_, k_ = int(p[H_OAR]), int(p[H_KAR])
    for k in range(k_):
        rec = o_ + W_AR * k
        i, j, a = int(p[rec]), int(p[rec + 1]), p[rec + 8]
        _armature_c(p, q, rec, G, ci, cj)
        for s1, c1 in ((i, ci), (j, cj)):
            if s1 < nb_:
                for s2, c2 in ((i, ci), (j, cj)):
                    if s2 < nb_:
                        for r in range(4):
                            for c in range(4):
                                M[7 * s1 + 3 + r, 7 * s2 + 3 + c] += a * c1[r] * c2[c]


@_jit
def _armature_c(p, x, rec, G, ci, cj):
    """The armature's ``c`` at ``x`` (Euler parameters, or their rates: ``c`` is linear):
    ``theta' = c . p'`` with ``c_i = -2 G(p_i)^T u_i``, ``c_j = 2 G(p_j)^T u_j``; zero
    for the ground (``x`` holds moving bodies only)."""
    nb_ = int(p[H_NB])
    for s, sgn, c, ou in ((int(p[rec]), -2.0, ci, rec + 2), (int(p[rec + 1]), 2.0, cj, rec + 5)):
        if s < nb_:
            _gmat(x, 7 * s + 3, G)
            for r in range(4):
                c[r] = sgn * (G[0, r] * p[ou] + G[1, r] * p[ou + 1] + G[2, r] * p[ou + 2])
        else:
            for r in range(4):
                c[r] = 0.0


@_jit
def _armature_rate(p, q, v, rec, G, ci, cj):
    """``theta' = c(p) . p'`` of the armature at ``rec`` (``c`` into ``ci``, ``cj``)."""
    _armature_c(p, q, rec, G, ci, cj)
    th = 0.0
    for s, c in ((int(p[rec]), ci), (int(p[rec + 1]), cj)):
        if s < int(p[H_NB]):
            for r in range(4):
                th += c[r] * v[7 * s + 3 + r]
    return th


@_jit
def _rot_block(p, q, b, G, JG, out, o):
    """``4 G^T J G`` of body ``b`` into ``out[o:o + 16]`` (row-major)."""
    rec = int(p[H_OMASS]) + W_MASS * b
    _gmat(q, 7 * b + 3, G)
    for r in range(3):
        for c in range(4):
            acc = 0.0
            for s in range(3):
                acc += p[rec + 1 + 3 * r + s] * G[s, c]
            JG[r, c] = acc
    for r in range(4):
        for c in range(4):
            acc = 0.0
            for s in range(3):
                acc += G[s, r] * JG[s, c]
            out[o + 4 * r + c] = 4.0 * acc


@_jit
def _add_force(F, b, nb_, B, f):
    """A force ``f`` at the body point of ``B = B(p_b, s)``: ``(f, B^T f)`` into ``F``."""
    if b < nb_:
        o = 7 * b
        for r in range(3):
            F[o + r] += f[r]
        for c in range(4):
            F[o + 3 + c] += B[0, c] * f[0] + B[1, c] * f[1] + B[2, c] * f[2]


@_jit
def _add_torque(F, qe, b, nb_, E, n, sign):
    """A world torque ``sign * n`` on body ``b``: ``2 E^T n``."""
    if b < nb_:
        o = 7 * b + 3
        _emat(qe, o, E)
        for c in range(4):
            F[o + c] += sign * 2.0 * (E[0, c] * n[0] + E[1, c] * n[1] + E[2, c] * n[2])


@_unit("none(f8v, f8v, f8v, f8v, f8v)")
def force(p, q, v, ext, F):
    """The generalized force ``F(q, v)`` (gravity, forces, torques, springs, dampers and
    the quadratic velocity terms of the Euler parameters) into ``F`` (n,)."""
    nb_ = int(p[H_NB])
    n = 7 * nb_
    qe, ve = _padded(p, q, v)
    G = np.empty((3, 4))
    E = np.empty((3, 4))
    B = np.empty((3, 4))
    Bj = np.empty((3, 4))
    w = np.empty(3)
    f = np.empty(3)
    x = np.empty(3)
    xd = np.empty(3)
    xc = np.empty(3)
    y = np.empty(3)
    yd = np.empty(3)
    yc = np.empty(3)
    for k in range(n):
        F[k] = 0.0
    for b in range(nb_):
        rec = int(p[H_OMASS]) + W_MASS * b
        o = 7 * b
        F[o] += p[rec] * p[H_GX]
        F[o + 1] += p[rec] * p[H_GY]
        F[o + 2] += p[rec] * p[H_GZ]
        # 8 G(p')^T J G(p') p = 8 G(p')^T J (G(p') p), and G(p') p = -G(p) p' = -w'/2
        _gmat(ve, o + 3, G)
        for r in range(3):
            acc = 0.0
            for c in range(4):
                acc += G[r, c] * qe[o + 3 + c]
            w[r] = acc
        for r in range(3):
            acc = 0.0
            for s in range(3):
                acc += p[rec + 1 + 3 * r + s] * w[s]
            f[r] = acc
        for c in range(4):
            F[o + 3 + c] += 8.0 * (G[0, c] * f[0] + G[1, c] * f[1] + G[2, c] * f[2])
    # ---- forces at body points
    o_, k_ = int(p[H_OF]), int(p[H_KF])
    for k in range(k_):
        rec = o_ + W_F * k
        b, ipy = int(p[rec]), int(p[rec + 7])
        for r in range(3):
            f[r] = ext[3 * ipy + r] if ipy >= 0 else p[rec + 4 + r]
        _bmat(qe, 7 * b + 3, p[rec + 1], p[rec + 2], p[rec + 3], B)
        _add_force(F, b, nb_, B, f)
    # ---- torques
    o_, k_ = int(p[H_OT]), int(p[H_KT])
    for k in range(k_):
        rec = o_ + W_T * k
        b, rb, ipy = int(p[rec]), int(p[rec + 1]), int(p[rec + 5])
        for r in range(3):
            f[r] = ext[3 * ipy + r] if ipy >= 0 else p[rec + 2 + r]
        _add_torque(F, qe, b, nb_, E, f, 1.0)
        _add_torque(F, qe, rb, nb_, E, f, -1.0)
    # ---- springs and dampers between points
    o_, k_ = int(p[H_OS]), int(p[H_KS])
    for k in range(k_):
        rec = o_ + W_S * k
        i, j = int(p[rec]), int(p[rec + 1])
        _point(qe, ve, i, p[rec + 2], p[rec + 3], p[rec + 4], B, x, xd, xc)
        _point(qe, ve, j, p[rec + 5], p[rec + 6], p[rec + 7], Bj, y, yd, yc)
        for r in range(3):
            w[r] = y[r] - x[r]
        L = np.sqrt(_dot(w, w))
        if L > 0.0:
            Ld = (_dot(w, yd) - _dot(w, xd)) / L
            T = p[rec + 8] * (L - p[rec + 9]) + p[rec + 10] * Ld
            for r in range(3):
                f[r] = T * w[r] / L
            _add_force(F, i, nb_, B, f)
            for r in range(3):
                f[r] = -f[r]
            _add_force(F, j, nb_, Bj, f)
    # ---- rotational dampers: -c (w_j - w_i).u u on j, the opposite on i
    o_, k_ = int(p[H_ORD]), int(p[H_KRD])
    for k in range(k_):
        rec = o_ + W_RD * k
        i, j = int(p[rec]), int(p[rec + 1])
        _bvec(qe, ve, i, p[rec + 2], p[rec + 3], p[rec + 4], B, x, xd, xc)    # u (world)
        rel = 0.0
        for bb, sgn in ((j, 1.0), (i, -1.0)):
            ob = 7 * bb + 3
            _emat(qe, ob, E)
            for r in range(3):
                acc = 0.0
                for c in range(4):
                    acc += E[r, c] * ve[ob + c]
                rel += sgn * 2.0 * acc * x[r]
        for r in range(3):
            f[r] = -p[rec + 5] * rel * x[r]
        _add_torque(F, qe, j, nb_, E, f, 1.0)
        _add_torque(F, qe, i, nb_, E, f, -1.0)
    # ---- armatures: -2 a theta' C p', C p' = (-2 G(p_i')^T u_i, 2 G(p_j')^T u_j) (c linear in p)
    ci = np.empty(4)
    cj = np.empty(4)
    di = np.empty(4)
    dj = np.empty(4)
    o_, k_ = int(p[H_OAR]), int(p[H_KAR])
    for k in range(k_):
        rec = o_ + W_AR * k
        th = _armature_rate(p, q, v, rec, G, ci, cj)
        _armature_c(p, v, rec, G, di, dj)
        a = p[rec + 8]
        for s, d in ((int(p[rec]), di), (int(p[rec + 1]), dj)):
            if s < nb_:
                for r in range(4):
                    F[7 * s + 3 + r] -= 2.0 * a * th * d[r]


@_unit("f8(f8v, f8v, f8v)")
def energy(p, q, v):
    """Kinetic energy plus the potentials of gravity, springs and constant forces."""
    nb_ = int(p[H_NB])
    qe, ve = _padded(p, q, v)
    G = np.empty((3, 4))
    B = np.empty((3, 4))
    Bj = np.empty((3, 4))
    w = np.empty(3)
    x = np.empty(3)
    xd = np.empty(3)
    xc = np.empty(3)
    y = np.empty(3)
    yd = np.empty(3)
    yc = np.empty(3)
    T = 0.0
    V = 0.0
    for b in range(nb_):
        rec = int(p[H_OMASS]) + W_MASS * b
        o = 7 * b
        m = p[rec]
        T += 0.5 * m * (ve[o] ** 2 + ve[o + 1] ** 2 + ve[o + 2] ** 2)
        V -= m * (p[H_GX] * qe[o] + p[H_GY] * qe[o + 1] + p[H_GZ] * qe[o + 2])
        _gmat(qe, o + 3, G)
        for r in range(3):
            acc = 0.0
            for c in range(4):
                acc += G[r, c] * ve[o + 3 + c]
            w[r] = 2.0 * acc
        for r in range(3):
            for s in range(3):
                T += 0.5 * w[r] * p[rec + 1 + 3 * r + s] * w[s]
    o_, k_ = int(p[H_OF]), int(p[H_KF])
    for k in range(k_):
        rec = o_ + W_F * k
        b = int(p[rec])
        if int(p[rec + 7]) < 0:
            _point(qe, ve, b, p[rec + 1], p[rec + 2], p[rec + 3], B, x, xd, xc)
            V -= p[rec + 4] * x[0] + p[rec + 5] * x[1] + p[rec + 6] * x[2]
    o_, k_ = int(p[H_OS]), int(p[H_KS])
    for k in range(k_):
        rec = o_ + W_S * k
        _point(qe, ve, int(p[rec]), p[rec + 2], p[rec + 3], p[rec + 4], B, x, xd, xc)
        _point(qe, ve, int(p[rec + 1]), p[rec + 5], p[rec + 6], p[rec + 7], Bj, y, yd, yc)
        for r in range(3):
            w[r] = y[r] - x[r]
        L = np.sqrt(_dot(w, w))
        V += 0.5 * p[rec + 8] * (L - p[rec + 9]) ** 2
    ci = np.empty(4)
    cj = np.empty(4)
    o_, k_ = int(p[H_OAR]), int(p[H_KAR])
    for k in range(k_):
        rec = o_ + W_AR * k
        th = _armature_rate(p, q, v, rec, G, ci, cj)
        T += 0.5 * p[rec + 8] * th * th
    return T + V


# =========================================================================== compiled functions
@_inline
def sizes(p):
    """Coordinates, equations and values of :func:`mass_blocks` of the model packed in ``p``."""
    nb_ = int(p[H_NB])
    return COORDINATES * nb_, int(p[H_M]), MASS_VALUES * nb_


#: the compiled model functions of every spatial model (:mod:`gaussopt.multibody.common.cfuncs`)
_KIND = KindFunctions(sys.modules[__name__])
#: the compiled model functions ``(dyn, rows, pos, vel, energy)`` of every spatial model
FUNCTIONS = _KIND.functions


def sparse_model(p: np.ndarray) -> "SparseModel | None":
    """The sparse evaluation of the model packed in ``p`` (:class:`gaussopt.core.model_interface.SparseModel`:
    the mass blocks of every body -- ``m``, ``m``, ``m`` and the singular 4 x 4 block of its
    Euler parameters, regularized by the body's normalization row --, ``F``, ``Phi_q``
    in its fixed pattern and ``gamma``), for the O(n) step of :mod:`gaussopt.gauss.band_step`; None
    when an armature couples two bodies' blocks of ``M``."""
    if p[H_PYTHON] != 0.0:
        raise ValueError("a model with Python callables has no compiled functions.")
    if p[H_KAR] > 0:
        return None                     # armatures couple two bodies' blocks of M
    nb_ = int(p[H_NB])
    starts = (7 * np.arange(nb_)[:, None] + np.arange(4)[None, :]).ravel()
    return _KIND.sparse_model(p, *sparse_pattern(p),
                              block_ptr=np.append(starts, 7 * nb_).astype(np.int64))


def compiled_factory(p: np.ndarray, system):
    """A factory of the engine's :class:`~gaussopt.core.model_interface.ModelFunctions` for ``system``
    (the assembled system of the model packed in ``p``; fresh buffers per run)."""
    return _KIND.compiled_factory(p, system)
