"""Exception and warning hierarchy of gaussopt.

Every exception derives from :class:`GaussoptError`; the ones caused by bad
input also derive from :class:`ValueError` so that generic ``except
ValueError`` code keeps working.
"""

from __future__ import annotations

import numpy as np


class GaussoptError(Exception):
    """Base class of every gaussopt exception."""


class ModelError(GaussoptError, ValueError):
    """The model or an argument is malformed: wrong shape, NaN/inf, asymmetric
    or indefinite mass matrix, unknown option, ..."""


class IndeterminateMotionError(ModelError):
    """``rank([M; A]) < n``: the accelerations are not unique.

    Attributes
    ----------
    direction : ndarray, shape (n,)
        A unit direction ``d`` with ``M d ~ 0`` and ``A d ~ 0``: adding any
        multiple of it to the accelerations leaves the Gauss function and the
        constraints unchanged.
    """

    def __init__(self, message: str, direction: np.ndarray | None = None):
        super().__init__(message)
        self.direction = direction


class InconsistentConstraintsError(ModelError):
    """``A a = b`` has no solution (contradictory constraint rows).

    Attributes
    ----------
    residual : float
        ``min_a ||An a - bn||`` with every row of ``A`` (and ``b``) divided by
        its norm; the same number whichever solver raised it.
    """

    def __init__(self, message: str, residual: float = float("nan")):
        super().__init__(message)
        self.residual = residual


class TrajectoryFileError(ModelError):
    """A file given to :func:`gaussopt.load` is not a valid gaussopt trajectory: not an
    ``.npz`` archive, damaged, or an entry whose stored dtype, shape or size disagrees
    with the header and the other entries (checked before any array is read), or whose
    values break the trajectory's invariants (times increasing, states finite).

    Attributes
    ----------
    path : str
        The file.
    field : str or None
        The entry or header field at fault (the first one found), if any.
    """

    def __init__(self, message: str, path: str = "", field: str | None = None):
        super().__init__(message)
        self.path = path
        self.field = field


class UnsupportedConstraintError(ModelError):
    """The chosen step solver cannot treat a constraint of the system
    (inequality rows need ``solver="qp"``)."""


class SolverError(GaussoptError, RuntimeError):
    """A numerical back end (cvxpy, pygad, LAPACK) failed or returned an
    unusable status; the original exception is chained."""


class StepFailedError(SolverError):
    """A step of a :class:`~gaussopt.Stepper` could not be taken or did not pass its
    verification (the step solver's decision on the rows, the optimality check, a model
    function that failed or returned NaN). The stepper's state is left at the last good
    step (``stepper.t``, ``q``, ``v``, ``a`` as before the call), so a control loop may
    catch it, change ``dt``/the input, or :meth:`~gaussopt.Stepper.reset`.

    Attributes
    ----------
    t : float
        Time of the last good step (the stepper's time).
    status : int
        The engine's status code (:mod:`gaussopt.core.status`).
    t_failed : float
        Time of the evaluation that failed (a stage of the step, ``t <= t_failed <= t + dt``).

    The specific error found at the failing state (an
    :class:`~gaussopt.IndeterminateMotionError`, an
    :class:`~gaussopt.InconsistentConstraintsError`, the model's own exception, ...) is
    chained as ``__cause__``.
    """

    def __init__(self, message: str, t: float = float("nan"), status: int = 0,
                 t_failed: float = float("nan")):
        super().__init__(message)
        self.t = t
        self.status = status
        self.t_failed = t_failed


class ObjectiveMismatchWarning(UserWarning):
    """The paper objective (``M^+``-weighted Gauss function) and the exact
    objective give different accelerations: the applied force has a component
    in ``null(M)`` that is not balanced by the constraints."""


class RankChangeWarning(UserWarning):
    """A run crossed singular positions in a way that may have cost it its branch or
    its accuracy (:func:`~gaussopt.simulate` with ``Projection(rhs=False)``: the
    integrator's stages were not projected near them)."""


class ConvergenceWarning(UserWarning):
    """An iterative step solver (the GA) returned a step less accurate than its ``tol``
    asks for (its ``info["tolerance"]``, a bound on the error, exceeds ``info["requested"]``)."""


class ToleranceWarning(UserWarning):
    """A tolerance of :func:`~gaussopt.simulate` was below what double precision can
    deliver and was raised (``rtol`` to ``100 eps``, as :func:`scipy.integrate.solve_ivp`
    does)."""
