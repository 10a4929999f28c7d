"""A run over time: :func:`~gaussopt.simulate` and its parts, one file per role.

As scipy's ``integrate/_ivp``: :mod:`~gaussopt.integrate.ivp` is the front door
(:func:`simulate`), :mod:`~gaussopt.integrate.validation` checks its arguments,
:mod:`~gaussopt.integrate.stabilization` holds :class:`Projection` and
:class:`Baumgarte`, :mod:`~gaussopt.integrate.engine_run` drives the compiled engine
(:mod:`~gaussopt.integrate.engine`), :mod:`~gaussopt.integrate.dense_output` gives
dense output and events, :mod:`~gaussopt.integrate.guards` bounds memory and keeps a
run through Ctrl-C, :mod:`~gaussopt.integrate.output_assembly` turns the engine's
records into the :class:`~gaussopt.Trajectory`, and
:mod:`~gaussopt.integrate.contact_run` joins smooth phases by impacts, closings and
lift-offs.
"""

from gaussopt.integrate.ivp import simulate
from gaussopt.integrate.stabilization import Baumgarte, Projection

__all__ = ["simulate", "Baumgarte", "Projection"]
