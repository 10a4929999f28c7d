"""The output samples: accelerations, constraint forces, multipliers and residuals
recomputed from the model at output times (projected there first when the engine left
them unprojected)."""

from __future__ import annotations


import numpy as np

import gaussopt.gauss.workspace as WS
from gaussopt.core.views import wivec, wvec
import gaussopt.gauss.dense_algebra as LA
import gaussopt.gauss.band_step as SP
from gaussopt.core.compiled import jit, unit
from gaussopt.core.model_interface import functions
from gaussopt.integrate.engine.projection import project
from gaussopt.gauss.model_step import (_put, band_force, call_energy, call_pos, call_vel,
                                       evaluate_step, path_sigma, uses_sparse)
from gaussopt.core.records import *  # noqa: F401,F403 - the indices and codes of the records


#: the large functions are units (:mod:`gaussopt.core.compiled`: compiled once, called
#: through a pointer), the small ones ordinary compiled functions (``_nrt=True``
#: explicitly: a function without the option inherits its caller's)
_jit = jit(cache=True, _nrt=True)


def _unit(signature: str, lazy: bool = False, python: bool = False):
    return unit(signature, lazy=lazy, python=python, _nrt=True)


_EPS = float(np.finfo(float).eps)



# --------------------------------------------------------------------------- output samples
@_unit("i8(fns, fn, md, buf, opt, f8v, f8v, f8, f8v, f8v, f8v, f8v, f8v, f8v, w)")
def sample(fns, accel, md, buf, opt, ref, sref, t, q, v, out_a, out_qc, out_lam, out_f, w):
    """Diagnostics of one output sample: accelerations, constraint force, multipliers;
    ``out_f`` = (position residual, velocity residual, acceleration residual, energy,
    rank, sigma_min). Returns the kernel status (0 ok)."""
    n = md.dims[D_N]
    m = md.dims[D_M]
    mh = md.dims[D_MH]
    mv = md.dims[D_MV]
    for i in range(6):
        out_f[i] = np.nan
    if mh > 0:
        if call_pos(fns, md, buf, t, q) == 0:
            out_f[0] = LA.norm2(buf.phi)
    else:
        out_f[0] = 0.0
    if mv > 0:
        if call_vel(fns, md, buf, t, q, v) == 0:
            out_f[1] = LA.norm2(buf.r)
    else:
        out_f[1] = 0.0
    if md.dims[D_ENERGY] != 0:
        if call_energy(fns, md, buf, t, q, v) == 0:
            out_f[3] = buf.e[0]
    a = np.empty(n)
    status, r, mL, k, rho, allow, be, flags = evaluate_step(
        fns, accel, md, buf, opt, ref, sref, t, q, v, a, True, w)
    if status != 0:
        return status
    lam = wvec(w, WS.F_lam, m)
    _put(out_a, a)
    _put(out_lam, lam)
    out_f[4] = r
    if uses_sparse(flags):
        out_f[2] = band_force(md, a, out_qc, np.empty(m))
        out_f[5] = path_sigma(md)
        return 0
    s = wvec(w, WS.F_s, k)
    M = buf.M.reshape(n, n)
    for i in range(n):
        acc = -buf.F[i]
        for j in range(n):
            acc += M[i, j] * a[j]
        out_qc[i] = acc
    if m > 0:
        A = buf.A.reshape(m, n)
        res = np.empty(m)
        for i in range(m):
            acc = -buf.b[i]
            for j in range(n):
                acc += A[i, j] * a[j]
            res[i] = acc
        out_f[2] = LA.norm2(res)
        out_f[5] = s[r - 1] if r > 0 else 1.0
    else:
        out_f[2] = 0.0
        out_f[5] = 1.0
    return 0





@_unit("none(i8v, md, buf, opt, f8v, f8v, f8v, f8m, f8m, f8m, f8m, f8m, i8v, b1v, f8, i8v)", python=True)
def sample_all(addrs, md, buf, opt, ref, sref, ts, ys, A_out, Qc_out, lam_out, F_out,
               status_out, proj, vanished, tree):
    """:func:`sample` at every output; a failing sample keeps NaN (its status is kept).

    An output with ``proj[i]`` is first projected onto the constraints in place in ``ys``
    (:func:`gaussopt.integrate.engine.projection.project`, ``vanished`` its floor): an
    output the engine left unprojected (:data:`gaussopt.core.records.OUT_MANY_SAMPLES`).
    Right after its projection, the model's functions of a Python model answer the
    sample's position constraints from the projection's last evaluation at the same
    state. A failed projection leaves the output as it was, with the status
    :data:`MODEL_FAILED` (or ``-1``, a constraint not finite there). ``tree``: the step
    workspace's field ``tree`` (:data:`gaussopt.gauss.workspace.I_tree`): the samples solve
    as the steps do, ``M`` factored along the tree when the model has one."""
    fns, accel = functions(addrs)
    n = md.dims[D_N]
    w = WS.make_work_compiled(n, md.dims[D_M])
    wt = wivec(w, WS.I_tree, tree.shape[0])
    for i in range(tree.shape[0]):
        wt[i] = tree[i]
    for i in range(ts.shape[0]):
        q = ys[i, :n].copy()
        v = ys[i, n:].copy()
        if proj[i]:
            ps, its = project(fns, md, buf, opt, ts[i], q, v, vanished)
            if ps != 0:
                status_out[i] = ps
                continue
            _put(ys[i, :n], q)
            _put(ys[i, n:], v)
        status_out[i] = sample(fns, accel, md, buf, opt, ref, sref, ts[i], q, v, A_out[i],
                               Qc_out[i], lam_out[i], F_out[i], w)
