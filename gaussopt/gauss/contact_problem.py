"""Gauss's principle with unilateral rows: an active-set solution, exact and verified.

The acceleration of a system with closed contacts and the velocity after an
impact solve the same problem (with ``x = a`` or ``x = v+``)::

    min  1/2 x^T M x - F^T x
    s.t. A x = b                      (bilateral constraints)
         G_i x >= h_i                 (one row per contact point that may push)
         T_i x  = s_i   if i active   (no slip at the active sticking points)

whose optimality conditions are a linear complementarity problem:
``M x - F = A^T lam + G_W^T nu_W + T_W^T tau_W`` with the active set ``W``,
``nu >= 0``, ``G x >= h`` and ``nu_i (G_i x - h_i) = 0``. For the few contact
points of a mechanism an active-set iteration finds ``W``: solve the equality
problem on ``W`` with the library's verified Gauss step
(:func:`gaussopt.gauss.solution.solve_gauss`: rank decisions, redundant rows, singular
``M``), drop the most negative ``nu``, or add the most violated inequality; if
that cycles, every subset is tried (up to :data:`MAX_ENUMERATION` points).
The answer is accepted only when complementarity holds to the rounding of the
terms (``verify``); otherwise :class:`ContactSolveError` reports the points
involved (an indeterminate or inconsistent contact problem).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from gaussopt.core.exceptions import GaussoptError, SolverError
from gaussopt.gauss.solution import solve_gauss

__all__ = ["ContactSolution", "ContactSolveError", "solve_contact", "verify", "MAX_ENUMERATION"]

_EPS = float(np.finfo(float).eps)
#: the largest number of candidate points for which every active set is tried when the
#: active-set iteration cycles (2^k equality solves)
MAX_ENUMERATION = 12


class ContactSolveError(SolverError):
    """No active set satisfies the contact conditions (inconsistent or indeterminate
    contact problem, e.g. Painleve's paradox), or the candidates are too many to enumerate."""

    def __init__(self, message: str, points: Sequence[str] = ()):
        super().__init__(message)
        self.points = list(points)


@dataclass
class ContactSolution:
    """``x``, the active points, their normal multipliers ``nu`` (0 off ``W``), the
    tangential ones ``tau`` (0 off the active sticking points), the bilateral ``lam``,
    the slack ``G x - h`` and the complementarity defect relative to its scale."""

    x: np.ndarray
    active: np.ndarray
    nu: np.ndarray
    tau: np.ndarray
    lam: np.ndarray
    slack: np.ndarray
    defect: float


def _solve_set(M, F, A, b, G, h, T, s, W, stick):
    Ws = [i for i in W if stick[i]]
    rows = [A] + ([G[W]] if W else []) + ([T[Ws]] if Ws else [])
    rhs = [b] + ([h[W]] if W else []) + ([s[Ws]] if Ws else [])
    AA, bb = np.concatenate(rows), np.concatenate(rhs)
    sol = solve_gauss(M, F, AA, bb, check_symmetry=False)
    m = A.shape[0]
    k = G.shape[0]
    nu, tau = np.zeros(k), np.zeros(k)
    nu[W] = sol.lam[m:m + len(W)]
    tau[Ws] = sol.lam[m + len(W):]
    return sol.a, nu, tau, sol.lam[:m]


def verify(M: np.ndarray, F: np.ndarray, G: np.ndarray, h: np.ndarray, x: np.ndarray,
           nu: np.ndarray, W: Sequence[int]) -> tuple[list, list, np.ndarray, np.ndarray,
                                                      np.ndarray]:
    """The checks of the solution ``x`` on the active set ``W`` (normal multipliers ``nu``):
    ``(negative, violated, slack, nu_tol, slack_tol)``, the active points whose force is
    below ``-nu_tol`` (pulling) and the inactive ones whose slack ``G x - h`` is below
    ``-slack_tol`` (penetrating), with the rounding scales of both (:func:`_scales`).
    Every accepted contact step passes them (empty lists); its complementarity defect is
    then :attr:`ContactSolution.defect`."""
    nu_tol, slack_tol = _scales(M, F, G, h, x)
    slack = G @ x - h
    neg = [i for i in W if nu[i] < -nu_tol[i]]
    out = [] if neg else [i for i in range(G.shape[0]) if i not in W
                          and slack[i] < -slack_tol[i]]
    return neg, out, slack, nu_tol, slack_tol


def _scales(M, F, G, h, x):
    """Rounding scales of the multipliers (|M x| + |F| over the row norms) and of the slack."""
    gn = np.sqrt((G * G).sum(axis=1))
    force = float(np.abs(M @ x).max(initial=0.0) + np.abs(F).max(initial=0.0))
    nu_tol = 1e4 * _EPS * force / np.maximum(gn, 1e-300) * max(1, M.shape[0])
    slack_tol = 1e4 * _EPS * (gn * float(np.abs(x).max(initial=0.0)) + np.abs(h))
    return nu_tol, slack_tol


def solve_contact(M: np.ndarray, F: np.ndarray, A: np.ndarray, b: np.ndarray, G: np.ndarray,
                  h: np.ndarray, T: Optional[np.ndarray] = None, s: Optional[np.ndarray] = None,
                  stick: Optional[np.ndarray] = None, *, start: Sequence[int] = (),
                  labels: Optional[Sequence[str]] = None) -> ContactSolution:
    """Solve the contact problem of the module docstring.

    Parameters
    ----------
    M : ndarray, shape (n, n)
        Symmetric positive semi-definite.
    F : ndarray, shape (n,)
    A, b : ndarray, shapes (m, n), (m,)
        Bilateral rows.
    G, h : ndarray, shapes (k, n), (k,)
        Unilateral rows ``G x >= h``.
    T, s : ndarray, shapes (k, n), (k,), optional
        No-slip rows of the points with ``stick[i]``, enforced while ``i`` is active.
    stick : ndarray of bool, shape (k,), optional
    start : sequence of int
        First guess of the active set.
    labels : sequence of str, optional
        Names of the points, for messages.

    Returns
    -------
    ContactSolution

    Raises
    ------
    ContactSolveError
        No active set satisfies the conditions.
    """
    k = G.shape[0]
    n = M.shape[0]
    if T is None:
        T, s = np.zeros((k, n)), np.zeros(k)
    if stick is None:
        stick = np.zeros(k, dtype=bool)
    labels = list(labels) if labels is not None else [f"point {i}" for i in range(k)]
    W = sorted(set(int(i) for i in start))
    seen = set()
    last_error: Optional[BaseException] = None
    for _ in range(4 * k + 8):
        key = tuple(W)
        if key in seen:
            break
        seen.add(key)
        try:
            x, nu, tau, lam = _solve_set(M, F, A, b, G, h, T, s, W, stick)
        except (GaussoptError, np.linalg.LinAlgError) as e:
            last_error = e
            if not W:
                raise
            W = W[:-1]                 # the last point added made the set unsolvable
            continue
        neg, out, slack, nu_tol, slack_tol = verify(M, F, G, h, x, nu, W)
        if neg:
            W.remove(min(neg, key=lambda i: nu[i] / max(nu_tol[i], 1e-300)))
            continue
        if out:
            W = sorted(W + [min(out, key=lambda i: slack[i] / max(slack_tol[i], 1e-300))])
            continue
        return _solution(x, W, nu, tau, lam, slack, nu_tol, slack_tol)
    # the iteration cycled: every active set, smallest first
    if k > MAX_ENUMERATION:
        raise ContactSolveError(
            f"the contact problem of {k} points did not settle on an active set, and more than "
            f"MAX_ENUMERATION={MAX_ENUMERATION} points are too many to try every set.", labels)
    for size in range(k + 1):
        for W in itertools.combinations(range(k), size):
            W = list(W)
            try:
                x, nu, tau, lam = _solve_set(M, F, A, b, G, h, T, s, W, stick)
            except (GaussoptError, np.linalg.LinAlgError) as e:
                last_error = e
                continue
            _, _, slack, nu_tol, slack_tol = verify(M, F, G, h, x, nu, W)
            if all(nu[i] >= -nu_tol[i] for i in W) and np.all(slack >= -slack_tol):
                return _solution(x, W, nu, tau, lam, slack, nu_tol, slack_tol)
    detail = f" (last failure: {type(last_error).__name__}: {last_error})" if last_error else ""
    raise ContactSolveError(
        "no set of active contact points satisfies the contact conditions (forces >= 0, "
        "gaps not closing, complementarity): the contact problem has no solution here, e.g. "
        f"Painleve's paradox or inconsistent constraints. Points: {', '.join(labels)}{detail}.",
        labels)


def _solution(x, W, nu, tau, lam, slack, nu_tol, slack_tol) -> ContactSolution:
    # complementarity: nu_i * slack_i relative to the product of their rounding scales
    prod = np.abs(nu * slack) / np.maximum(nu_tol * slack_tol * 1e4, 1e-300)
    active = np.zeros(nu.size, dtype=bool)
    active[W] = True
    return ContactSolution(x=x, active=active, nu=nu, tau=tau, lam=lam, slack=slack,
                           defect=float(prod.max(initial=0.0)))
