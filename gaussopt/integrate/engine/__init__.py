"""The compiled engine of :func:`~gaussopt.simulate` (numba, compiled once per machine).

One driver for every explicit method and every model: the integrator
(``rk4``, ``euler``, ``RK23``, ``RK45``, ``DOP853`` with their embedded error
estimates and dense outputs, the step-size control of
:mod:`scipy.integrate`), the Gauss step (:func:`gaussopt.gauss.dense_step.gauss_step`),
the stabilization (projection onto the constraints, or Baumgarte's
correction), the rank monitor that locates passages through singular
positions, the output samples and their diagnostics are all compiled. The
model is called through function pointers (:mod:`gaussopt.core.model_interface`): compiled
models run entirely in machine code; a Python model or a step solver that runs
in Python (QP, GA) is called back. A run advances in chunks of bounded wall
time, so that a ``KeyboardInterrupt`` is seen between chunks and the part
computed so far is returned.

One module per role (the first two live in the packages below, which the engine uses):

=======================  ==========================================================
:mod:`.records`          (in ``gaussopt.core``) the records Python builds, their indices
                         and codes, :func:`pack`
:mod:`.model_step`       (in ``gaussopt.gauss``) the model's calls, Baumgarte's
                         correction, :func:`evaluate_step`
:mod:`.projection`       the projection onto the constraints (:func:`project`)
:mod:`.interpolation`    the dense output of the last step
:mod:`.rank_monitor`     the rank monitor (references, nearness, passages)
:mod:`.integrator`       the right-hand side, the steps, and the entry points
:mod:`.output_samples`   the output samples (:func:`sample_all`)
=======================  ==========================================================

The data passed around:

``fns``      the model's five functions (dyn, rows, pos, vel, energy)
``accel``    the step solver's callback (QP, GA) or :data:`~gaussopt.core.model_interface.NOOP`
``md``       :class:`ModelData`: parameters, sizes, row layout
``buf``      :class:`Buffers`: the flat arrays the model functions read and write
``opt``      :class:`Options`: integer and float settings
``st``       :class:`State`: everything that changes along a run

Python builds these as named tuples and passes them to compiled code packed
(:func:`pack`): as numba structures, each one pointer. A compiled function
that takes a named tuple of arrays increments and decrements the reference
count of every array in it on entry and exit whenever it allocates (numba's
reference-count pruning gives up there), about fifty atomic operations per
right-hand side of a run; a structure costs one.

How it is compiled (:mod:`gaussopt.core.compiled`): the large functions several
others call (:func:`evaluate_step`, :func:`project`, :func:`rhs`, the monitor's
update, what follows a step, the entry points) are units, compiled once each and
called through pointers; everything else is inlined into them.
"""

from gaussopt.core.records import *  # noqa: F401,F403
from gaussopt.core.records import Buffers, ModelData, Options, State, Tableau, buffers, pack
from gaussopt.gauss.model_step import (band_force, baumgarte, call_accel, call_dyn, call_energy,
                                       call_pos, call_rows, call_sp_dyn, call_sp_rows, call_tree,
                                       call_vel, evaluate_step, model_data, sparse_step_at, uses_sparse)
from gaussopt.integrate.engine.projection import project, vanished_floor
from gaussopt.integrate.engine.interpolation import dense_eval
from gaussopt.integrate.engine.rank_monitor import accept_rows, monitor_start, monitor_update
from gaussopt.integrate.engine.integrator import (advance, after_step, dense_at, initial_step,
                                                  initial_step_at, passage_ahead, place_step,
                                                  prepare_dense, project_at, rhs, rhs_at, start,
                                                  step, step_inputs, _stage_gap)
from gaussopt.integrate.engine.output_samples import sample, sample_all

__all__ = ["ModelData", "Buffers", "Options", "State", "Tableau", "pack", "evaluate_step", "project",
           "METHOD_CODES", "SOLVER_CODES"]

import gaussopt.core.compiled as _compiled
import gaussopt.gauss.dense_step as _kernel
import gaussopt.gauss.dense_algebra as _LA
import gaussopt.gauss.workspace as WS
import gaussopt.gauss.band_step as _sparse
import gaussopt.integrate.engine.rank_monitor as _monitor
import gaussopt.core.records as _records

#: compiled ahead, in a helper process, when gaussopt first compiles in a process: what a
#: default run calls (:func:`gaussopt.core.compiled.prefetch`)
_compiled.PREFETCH += [start, advance, sample_all, initial_step_at, prepare_dense,
                       _records._pack_model_data, _records._pack_buffers, _records._pack_options,
                       _records._pack_tableau, _records._pack_state, _sparse._band,
                       _sparse._band_mode, WS.make_work_compiled, _kernel.smallest_live_sigma]
#: and while the first run runs: the search of a singular position, the SVD of rows that
#: are not disjoint (:data:`gaussopt.core.compiled.BACKGROUND`)
_compiled.BACKGROUND += [_monitor._passage, _LA._svd_jacobi]
