"""The step by a genetic algorithm (paper 001): the ``"ga"`` solver and its pygad search.

:mod:`~gaussopt.gauss.solvers.ga.genetic` (the :class:`Genetic` step solver) and
:mod:`~gaussopt.gauss.solvers.ga.pygad_ga` (the search itself, on pygad).
"""
