"""Quasi-velocities: Gauss's principle in the allowed directions (Maggi / Kane form).

The velocity-level constraints of a system (holonomic ones in their velocity
form ``Phi_q v + Phi_t = 0`` and nonholonomic ones *affine* in ``v``) read
``B(t, q) v + c(t, q) = 0``. Every admissible velocity is

    v = D(t, q) w + w0(t, q),        B D = 0,   B w0 + c = 0,

with ``D`` (n x k) a basis of ``null(B)``, ``k = n - rank B`` the number of
degrees of freedom and ``w`` (k,) the quasi-velocities. Gauss's principle with
``a = D w' + a_c``, ``a_c = D' w + w0'`` (``'`` the time derivative along the
motion) is minimized over ``w'`` alone; its optimality conditions are the
reduced (Maggi, Kane, paper-000) equations

    A* w' = Q*,     A* = D^T M D,     Q* = D^T (F - M a_c),

``k`` equations for ``k`` unknowns and no multipliers. The state is ``(q, w)``
with ``q' = D w + w0``, so the velocity constraints hold by construction (to
rounding) wherever the integrator goes; only holonomic constraints can drift,
at the position level (see ``project_positions`` of
:meth:`QuasiVelocities.simulate`).

How ``a_c`` is formed
---------------------
``B a_c = b`` holds for every basis, where ``B a = b`` are the constraints'
own acceleration rows (``b = gamma``, exact for nonholonomic constraints and
for holonomic ones with an explicit ``gamma``). So ``a_c`` is the
minimum-norm solution ``B^+ b`` plus its component in ``null(B)``,
``D (D^T D)^{-1} D^T a_c`` with ``D^T a_c = D^T D' w + D^T w0'``; only this
``k``-vector needs the rotation of the basis. For a user basis ``D'`` is
``dD(t, q, v)`` if given, else the complex step of ``D(t + i h, q + i h v)``.

The automatic basis (charts)
----------------------------
A null-space basis from an SVD flips sign and rotates from one state to the
next, so the automatic basis is the *Loewdin-orthonormalized projection of an
anchor frame* ``E`` (n x k, orthonormal)::

    G = P(t, q) E,   S = G^T G,   D = G S^{-1/2},    P = I - B^+ B,

the orthonormal basis of ``null(B(t, q))`` closest to ``E`` (Frobenius norm).
It is a smooth function of ``(t, q)`` while every principal angle between
``span E`` and ``null(B)`` stays below 90 degrees (``S`` positive definite).
The anchor is first the Loewdin-orthonormalized columns of ``P`` with the
largest pivots (QR with column pivoting), so the quasi-velocities follow the
coordinates where possible, and it is *re-anchored* (``E <- D``) after an
accepted step at which the cosine of the largest principal angle fell below
``chart_tol`` (default 0.7, about 45 degrees). At a re-anchoring point the new
basis equals the old one, so ``w`` is continuous; only the basis' rotation
rate, hence ``w'``, changes, and the integrator restarts its step there (RK
methods re-evaluate their first stage, the others are restarted). The step
size is capped so that ``null(B)`` turns by at most about 0.5 rad per step,
which keeps every trial stage inside the chart. For a system whose allowed
velocities turn in one plane (paper 000's sleigh) the chart bases are the
parallel-transported ones and ``w`` are the paper's quasi-velocities. The
rotation rate comes from the rate of the normalized rows ``R = Bn' D``::

    D' = -Bn^+ R + D Omega,    Omega = D^T D' = -H S^{-1/2} + S^{1/2} (S^{-1/2})',
    H = R^T Bn^{+T} E,         S' = -(S^{1/2} H + H^T S^{1/2}),

with ``(S^{-1/2})'`` from the Daleckii--Krein formula. ``R`` is exact (complex
step of ``f(t + i h, q + i h v, u)``) for nonholonomic constraints, and for
holonomic ones the polarization ``Phi_qq[v, u] + Phi_qt u = (gamma(v - u) -
gamma(v + u)) / 4`` of the constraint's own ``gamma``. For the minimum-norm
``w0 = -B^+ c``, ``D^T w0' = -D'^T w0 = R^T Bn^{+T} w0``.

Validity domain: the rank of ``B`` must stay constant along the motion. A
state where it drops (a singular position: rows dependent to ``rank_tol``, or
a row whose norm falls below ``rank_tol`` times the largest it has shown)
stops the run with ``success=False``; an isolated singular position that the
integrator steps over is not seen, which is harmless when ``null(B)`` is
continuous across it (use :func:`gaussopt.simulate`, whose rank monitor
records such passages, when it matters); nonholonomic
constraints must be affine in ``v`` (a nonlinear one, like paper 004's
Appell--Hamel constraint, has no linear velocity space: use
:func:`gaussopt.simulate`); acceleration-level and inequality constraints are
not supported; ``D^T M D`` must be positive definite.

Module layout
-------------
``reduced_model`` (:class:`QuasiVelocities`: the model pieces and the reduced
equations), ``charts`` (frames, the automatic basis and its rotation),
``model_checks`` (one-time checks of a model), ``derivatives`` (complex steps and
finite differences), ``quasi_run`` (the integration: driver, events, dense output,
output samples).

References
----------
Hao Xin, Liu Yanping, Yao Wenli, "Dynamic equation and numerical simulation
of nonholonomic multibody system in quasi-coordinate form", Dynamical Systems
and Control 9 (2020) 121-128 (paper 000).
"""

from gaussopt.quasi.reduced_model import QuasiVelocities
from gaussopt.quasi.quasi_run import QUASI_METHODS

__all__ = ["QuasiVelocities", "QUASI_METHODS"]
