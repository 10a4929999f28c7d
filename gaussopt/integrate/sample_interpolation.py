"""Output samples inside a step from a few of them, when ``t_eval`` is denser than the steps.

Why: a run's output times are often far denser than its steps (the README's pendulum asks
for 30,001 outputs of a run of 75 steps). Recomputing every output -- projecting the
interpolated state onto the constraints, then solving the Gauss step there for the
accelerations, constraint forces and multipliers, and evaluating the residuals and the
energy -- calls the model's functions about 17 times per output; through the callbacks of
a model written in Python that was 230 us per output, 20 times the run itself. Within
one step everything is smooth: the step's interpolant is a polynomial, its projection
onto the constraints differs from it by a smooth correction of the size of the step's
local error, and every diagnostic is a smooth function of the projected state. So a step
with at least :data:`~gaussopt.core.records.OUT_MANY_SAMPLES` output times inside it
(the engine leaves those outputs unprojected and marks them with the step) is projected
and recomputed exactly at :data:`NODES` of its outputs -- those nearest to the
Chebyshev--Lobatto points of their span, the first and the last included -- and its
other outputs are interpolated from these (barycentric Lagrange interpolation of degree
``NODES - 1``): the projection's correction of the state, and every diagnostic.

One more output of the step, the one farthest from the nodes, is recomputed exactly as a
check; when the interpolated values differ there from the exact ones by more than
:data:`STATE_TOL` (the state, relative to ``1 +`` its largest component in the step) or
:data:`VALUE_TOL` (the accelerations, constraint forces, multipliers, energy and
``sigma_min``, each relative to its largest size at the nodes), or the rank is not the
same at all of them, every output of that step is recomputed exactly. The residuals
are interpolated too but not checked: at the nodes they are those of states projected
to the projection's tolerance (rounding), and an interpolated state is within the
checked ``STATE_TOL`` of its projection.

Accuracy: the interpolation error of an analytic function of ``t`` over a span ``h``
from ``K`` Chebyshev--Lobatto nodes is about ``(h omega / 4)^K`` of its size, ``omega``
its fastest rate of change (``1/omega`` the time over which it changes by its own size).
An adaptive run at ``rtol = 1e-12`` takes ``h omega ~ 0.1``: ``1e-16`` of the size at
``K = 10``, below the rounding of the recomputation itself. The README's pendulum
(``benchmarks/samples.py``): states within 3e-15 of the exact projection, the
accelerations, constraint forces and multipliers within 3e-13 of their size (the
exact recomputation's own rounding), the energy within 4e-15 of its size. (At
``K = 8`` the interpolated states were 4e-14 off: the projection's correction of a
7th-degree interpolant of a quadratic constraint is a polynomial of degree 14.) A step
too long for that fails the check and is recomputed exactly.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NODES", "STATE_TOL", "VALUE_TOL", "groups", "plan", "barycentric"]

#: outputs of a step recomputed exactly, the nodes of the interpolation
NODES = 10
#: the interpolated state at the check output: within this of the exact projection,
#: relative to 1 + the step's largest ``|q|`` (``|v|`` for the velocities): 16 times the
#: projection's default tolerance (1e-15, the rounding of a projected state)
STATE_TOL = 16e-15
#: each diagnostic at the check output: within this of the exact recomputation,
#: relative to its largest size at the nodes (the recomputation's own rounding reaches
#: ~2e3 eps = 4.4e-13 with the automatic convective term of a constraint)
VALUE_TOL = 1e-10


def groups(marks: np.ndarray) -> list[np.ndarray]:
    """The indices of the outputs of each marked step (``marks >= 0``, equal marks
    consecutive), in order."""
    idx = np.flatnonzero(marks >= 0)
    if idx.size == 0:
        return []
    cut = np.flatnonzero((np.diff(marks[idx]) != 0) | (np.diff(idx) != 1)) + 1
    return np.split(idx, cut)


def plan(t: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, int] | None:
    """``(nodes, check)``: the outputs of ``group`` recomputed as nodes (indices into
    ``t``; the first and last of the group among them) and the check output; None when
    the group is too small (fewer than ``NODES + 1`` distinct outputs: all exact)."""
    tg = t[group]
    if group.size < NODES + 1 or not tg[-1] > tg[0]:
        return None
    x = 0.5 * (tg[0] + tg[-1]) - 0.5 * (tg[-1] - tg[0]) * np.cos(np.pi * np.arange(NODES)
                                                                 / (NODES - 1))
    pos = np.clip(np.searchsorted(tg, x), 1, tg.size - 1)
    pos = np.where(np.abs(tg[pos - 1] - x) <= np.abs(tg[pos] - x), pos - 1, pos)
    pos = np.unique(pos)
    if pos.size < NODES:
        return None
    gap = np.abs(tg[:, None] - tg[pos][None, :]).min(axis=1)
    gap[pos] = -1.0
    return group[pos], int(group[int(np.argmax(gap))])


def barycentric(x: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The polynomial through ``(x[j], values[j])`` at the points ``at`` (barycentric
    Lagrange formula, exact at the nodes).

    Parameters
    ----------
    x : ndarray, shape (K,)
        Distinct nodes.
    values : ndarray, shape (K, c)
    at : ndarray, shape (N,)

    Returns
    -------
    ndarray, shape (N, c)
    """
    lo, hi = x.min(), x.max()
    xs = (2.0 * x - (lo + hi)) / (hi - lo)            # (scaled to [-1, 1]: the weights'
    ts = (2.0 * at - (lo + hi)) / (hi - lo)           # products stay of order 1)
    diff = xs[:, None] - xs[None, :]
    np.fill_diagonal(diff, 1.0)
    w = 1.0 / diff.prod(axis=1)
    d = ts[:, None] - xs[None, :]
    hit = d == 0.0
    d[hit] = 1.0
    c = w / d
    out = (c @ values) / c.sum(axis=1)[:, None]
    rows, cols = np.nonzero(hit)
    out[rows] = values[cols]
    return out
