"""The step as a quadratic program: the ``"qp"`` solver and its backends.

:mod:`~gaussopt.gauss.solvers.qp.qp_solver` (the :class:`QP` step solver),
:mod:`~gaussopt.gauss.solvers.qp.clarabel_qp` (Clarabel called directly, its problem
built once), :mod:`~gaussopt.gauss.solvers.qp.compiled_qp` (the compiled parts around
Clarabel's call), :mod:`~gaussopt.gauss.solvers.qp.sparse_qp` (the QP of a large system
with the band step: Clarabel on the sparse data) and
:mod:`~gaussopt.gauss.solvers.qp.cvxpy_qp` (any cvxpy solver on a DPP problem built once).
"""
