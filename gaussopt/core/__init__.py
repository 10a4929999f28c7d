"""The contracts every other package builds on, and the machinery of compiled code.

Nothing here knows a mechanical system: :mod:`~gaussopt.core.compiled` compiles,
caches and calls gaussopt's numba code; :mod:`~gaussopt.core.codegen` turns generated
source into compiled model functions; :mod:`~gaussopt.core.model_interface` is the
signature through which the compiled engine calls a model; :mod:`~gaussopt.core.records`
holds the records Python hands to compiled code; :mod:`~gaussopt.core.result` the
result objects (:class:`~gaussopt.StepResult`, :class:`~gaussopt.Trajectory`);
:mod:`~gaussopt.core.exceptions` the exception hierarchy.
"""
