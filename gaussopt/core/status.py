"""Every status code and every option code of gaussopt's compiled code, in one table.

Compiled code cannot raise a specific exception; it returns an integer and Python
turns it into an exception or a message. Each code below has one name, one value and
one message, and every module reads it from here: the Gauss step
(:mod:`gaussopt.gauss.dense_step`), the O(n) step (:mod:`gaussopt.gauss.band_step`),
the engine (:mod:`gaussopt.integrate.engine`) and the run's Python side
(:mod:`gaussopt.integrate.engine_run`). The value ranges never overlap, so a code seen
anywhere names one thing.

================  ========  =======================================================
range             owner     meaning
================  ========  =======================================================
0 -- 6            step      :func:`gaussopt.gauss.dense_step.gauss_step`
10 -- 17          engine    a run of the compiled engine
20 -- 26          band      the O(n) step refused or failed (the dense step decides)
100 -- 102        run       the Python side of a run (events, progress, memory)
================  ========  =======================================================

The option codes say which solve, integration method and stabilization the compiled
code runs (:data:`SOLVER_CODES`, :data:`METHOD_CODES`, ``STAB_*``).
"""

from __future__ import annotations

__all__ = ["OK", "INDETERMINATE", "INCONSISTENT", "NONFINITE", "UNVERIFIED",
           "INCONSISTENT_VANISHED", "NONSYMMETRIC", "STEP_STATUS", "MODEL_FAILED",
           "STEP_TOO_SMALL", "STEP_TOO_LARGE", "MAX_STEPS", "CHUNK_DONE", "FINISHED", "BUFFER_FULL",
           "BAD_INPUT",
           "REFUSED_SHAPE", "REFUSED_DATA", "REFUSED_MASS", "REFUSED_VANISHED",
           "REFUSED_UNCERTIFIED", "BAND_MODEL_FAILED", "REFUSED_MULTIPLIERS", "BAND_STATUS",
           "TERMINATED", "HOOK_FAILED", "OUT_OF_MEMORY", "MESSAGES", "message",
           "CLOSED_FORM", "LAGRANGE", "CALLBACK", "SOLVER_CODES", "METHOD_CODES",
           "STAB_NONE", "STAB_PROJECTION", "STAB_BAUMGARTE"]

# --------------------------------------------------------------------------- the Gauss step
OK = 0
INDETERMINATE = 1             # [M; A] rank deficient: the motion is not determined
INCONSISTENT = 2              # A a = b has no solution
NONFINITE = 3                 # NaN or inf in M, F, A or b
UNVERIFIED = 4                # the answer failed its optimality check
INCONSISTENT_VANISHED = 5     # a vanished row's b is not zero
NONSYMMETRIC = 6              # M is not symmetric
#: the step's statuses and their messages (what :func:`gaussopt.gauss.solution.raise_for_status`
#: turns into exceptions)
STEP_STATUS = {OK: "ok", INDETERMINATE: "indeterminate", INCONSISTENT: "inconsistent",
               NONFINITE: "non-finite data", UNVERIFIED: "verification failed",
               INCONSISTENT_VANISHED: "vanished row inconsistent",
               NONSYMMETRIC: "asymmetric mass"}

# --------------------------------------------------------------------------- the engine
MODEL_FAILED = 10             # a model function returned nonzero
STEP_TOO_SMALL = 11           # the step size collapsed
MAX_STEPS = 12                # max_steps reached
CHUNK_DONE = 13               # the wall-time budget of a chunk is used up (not an end)
FINISHED = 14                 # the end of t_span
BUFFER_FULL = 15              # a buffer (outputs, events) must grow (not an end)
BAD_INPUT = 16                # an input of the model (a Stepper's ctrl) is not finite
STEP_TOO_LARGE = 17           # a fixed step left the constraints or the energy (no error control)
ENGINE_STATUS = {MODEL_FAILED: "a model function failed", STEP_TOO_SMALL: "step size too small",
                 MAX_STEPS: "max_steps reached", CHUNK_DONE: "chunk done",
                 FINISHED: "finished", BUFFER_FULL: "buffer full",
                 BAD_INPUT: "an input of the model is not finite",
                 STEP_TOO_LARGE: "fixed step too large for the motion"}

# --------------------------------------------------------------------------- the O(n) step
# (0: answered; UNVERIFIED: its answer failed verification; anything else: refused)
REFUSED_SHAPE = 20
REFUSED_DATA = 21
REFUSED_MASS = 22
REFUSED_VANISHED = 23
REFUSED_UNCERTIFIED = 24
BAND_MODEL_FAILED = 25
REFUSED_MULTIPLIERS = 26
BAND_STATUS = {OK: "ok", UNVERIFIED: "verification failed",
               REFUSED_SHAPE: "no rows or more rows than coordinates",
               REFUSED_DATA: "non-finite data",
               REFUSED_MASS: "mass not positive definite with margin",
               REFUSED_VANISHED: "a row (nearly) vanished",
               REFUSED_UNCERTIFIED: "full row rank not certified",
               BAND_MODEL_FAILED: "model evaluation failed",
               REFUSED_MULTIPLIERS: "multipliers: the row set aside is not exactly redundant, "
                                    "or more than one row is set aside"}

# --------------------------------------------------------------------------- a run's Python side
TERMINATED = 100              # a terminal event stopped the run
HOOK_FAILED = 101             # an event function (or the dense output behind it), or progress, raised
OUT_OF_MEMORY = 102           # the stored data reached max_memory (gaussopt.integrate.guards)
RUN_STATUS = {TERMINATED: "terminal event", HOOK_FAILED: "event or progress callback failed",
              OUT_OF_MEMORY: "max_memory reached"}

#: every status's message, by code
MESSAGES = {**STEP_STATUS, **ENGINE_STATUS, **BAND_STATUS, **RUN_STATUS}


def message(code: int) -> str:
    """The message of a status code (the code itself, as text, when it is unknown)."""
    return MESSAGES.get(int(code), str(int(code)))


# --------------------------------------------------------------------------- option codes
#: how the step is solved: the closed form, the KKT (Lagrange-I) system, or a solver that
#: runs in Python (QP, GA, the paper's objective) called back by the engine
CLOSED_FORM = 0
LAGRANGE = 1
CALLBACK = 2
SOLVER_CODES = {"closed_form": CLOSED_FORM, "lagrange": LAGRANGE, "callback": CALLBACK}
#: the engine's explicit methods
METHOD_CODES = {"euler": 0, "rk4": 1, "RK23": 2, "RK45": 3, "DOP853": 4}
#: the stabilization the engine applies
STAB_NONE, STAB_PROJECTION, STAB_BAUMGARTE = 0, 1, 2
