"""The interpolant of the last accepted step (the engine's dense output)."""

from __future__ import annotations


import numpy as np

from gaussopt.core.compiled import jit, unit
from gaussopt.core.records import *  # noqa: F401,F403 - the indices and codes of the records


#: the large functions are units (:mod:`gaussopt.core.compiled`: compiled once, called
#: through a pointer), the small ones ordinary compiled functions (``_nrt=True``
#: explicitly: a function without the option inherits its caller's)
_jit = jit(cache=True, _nrt=True)


def _unit(signature: str):
    return unit(signature, _nrt=True)


_EPS = float(np.finfo(float).eps)




# --------------------------------------------------------------------------- dense output
@_unit("none(i8, st, tab, f8, f8v)")
def dense_eval(method, st, tab, t, out):
    """The step's interpolant at ``t`` (state before the projection of the step's end),
    into ``out``."""
    N = st.y.shape[0]
    t_old = st.sc[S_TOLD]
    h = st.sc[S_HPREV]
    x = (t - t_old) / h
    if method == 4:                                     # DOP853: nested form
        F = st.dense
        P = F.shape[0]
        for j in range(N):
            acc = 0.0
            for i in range(P - 1, -1, -1):
                acc += F[i, j]
                if (P - 1 - i) % 2 == 0:
                    acc *= x
                else:
                    acc *= 1.0 - x
            out[j] = st.y_old[j] + acc
        return
    if method == 2 or method == 3:                      # RK23 / RK45: Q = K^T P
        Q = st.dense                                    # (order + 1, N)
        for j in range(N):
            acc = 0.0
            p = 1.0
            for i in range(Q.shape[0]):
                p *= x
                acc += Q[i, j] * p
            out[j] = st.y_old[j] + h * acc
        return
    # rk4 / euler (and the monitor's samples, method -1): cubic Hermite from (y, y') at
    # both ends of the step as integrated (before the end's projection)
    h00 = 2 * x**3 - 3 * x**2 + 1
    h10 = x**3 - 2 * x**2 + x
    h01 = -2 * x**3 + 3 * x**2
    h11 = x**3 - x**2
    for j in range(N):
        out[j] = (h00 * st.y_old[j] + h10 * h * st.f_old[j] + h01 * st.y[j]
                  + h11 * h * st.f[j])
