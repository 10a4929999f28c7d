"""One Gauss step at ``(t, q, v)``: the rank decision, the solves, the verification.

The mathematics of the step is compiled once (:mod:`~gaussopt.gauss.dense_step`: the
rank decision and the dense closed-form and KKT solves with their verification;
:mod:`~gaussopt.gauss.band_step`: the O(n) step of large mechanisms on band matrices,
:mod:`~gaussopt.gauss.banded`). :mod:`~gaussopt.gauss.model_step` evaluates a model and
runs the step inside compiled code, :mod:`~gaussopt.gauss.compiled_step` does it in one
call from Python, :mod:`~gaussopt.gauss.solution` is the Python face of the step
(statuses as exceptions). The four step solvers (:mod:`~gaussopt.gauss.solvers`) and
:func:`~gaussopt.solve_step` / :func:`~gaussopt.solve_steps`
(:mod:`~gaussopt.gauss.solve_step`) sit on top; the contact problem at one instant
(closed points, impacts) is :mod:`~gaussopt.gauss.contact_problem`.
"""
