"""What users do with problems: the registry, comparisons, sweeps, figures, the CLI.

:mod:`~gaussopt.study.problem` (:class:`~gaussopt.Problem`: a system with its initial
state, settings and reference), :mod:`~gaussopt.study.registry` (problems registered as
entry points), :mod:`~gaussopt.study.compare`, :mod:`~gaussopt.study.sweep`,
:mod:`~gaussopt.study.plotting` and :mod:`~gaussopt.study.cli` (``gaussopt ...``).
"""
