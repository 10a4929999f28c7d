"""The constrained mechanical system ``M(q, t) a = F(q, v, t) + A^T lam``, ``A a = b``."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from gaussopt.model.constraints import (Constraint, Holonomic, Nonholonomic, _is_sparse,
                                       check_derivatives_near)
from gaussopt.core.exceptions import ModelError
from gaussopt.core.checks import diagonal_of

__all__ = ["System", "rebuildable"]

ArrayOrCallable = Union[Callable, np.ndarray, Sequence]


class System:
    """A mechanical system with (possibly redundant) coordinates and constraints.

    Parameters
    ----------
    coordinates : sequence of str
        Names of the generalized coordinates; ``n = len(coordinates)``.
    mass : callable or array_like
        ``mass(t, q) -> ndarray, shape (n, n)``, symmetric positive
        *semi*-definite, or a constant array: shape (n, n) (a scipy.sparse
        matrix too) or, for a diagonal mass matrix, its diagonal, shape (n,).
    force : callable or array_like, optional
        ``force(t, q, v) -> ndarray, shape (n,)``: ``F = Q - g``, the applied
        generalized forces minus the velocity-dependent inertia terms; or a
        constant array. Default zero.
    constraints : sequence of Constraint
        :class:`~gaussopt.Holonomic`, :class:`~gaussopt.Nonholonomic`,
        :class:`~gaussopt.AccelerationConstraint`, :class:`~gaussopt.Inequality`,
        :class:`~gaussopt.Contact`.
    energy : callable, optional
        ``energy(t, q, v) -> float`` for diagnostics (energy drift). A run with a
        fixed step (``rk4``, ``euler``) also stops when its drift reaches the energy's
        own scale (:data:`gaussopt.core.settings.FIXED_STEP_ENERGY`): give the energy
        the system keeps.
    name : str, optional

    Notes
    -----
    Nothing is evaluated at construction. :meth:`check` evaluates every piece
    at one state, collects *all* problems (shapes, NaN/inf, asymmetric or
    indefinite ``M``, functions that are not complex-safe where automatic
    derivatives need it) and raises one :class:`~gaussopt.core.exceptions.ModelError`
    listing them; :func:`~gaussopt.simulate` and :func:`~gaussopt.solve_step`
    call it once.

    **Large sparse systems.** A system whose constant mass matrix is diagonal and
    whose equality constraints (:class:`~gaussopt.Holonomic`,
    :class:`~gaussopt.Nonholonomic`) all have a given ``jacobian`` returning a
    scipy.sparse matrix (with at least :data:`gaussopt.gauss.band_step.MIN_N`
    coordinates and no inequality rows) takes the O(n) step of
    :mod:`gaussopt.gauss.band_step`, as large multibody models do: its rows keep the
    sparsity pattern of the check's state (an entry outside it sends that step to
    the dense kernel), and any step that is not certified of full rank with a
    margin (near a singular position) is decided by the dense kernel as usual.

    Examples
    --------
    A pendulum of mass 2 kg on a 1.5 m rod in Cartesian coordinates:

    >>> import numpy as np, gaussopt as go
    >>> m, l, g = 2.0, 1.5, 9.81
    >>> pend = go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -m * g],
    ...                  constraints=[go.Holonomic(lambda t, q: np.array([q @ q - l**2]))])
    >>> pend.n
    2
    """

    def __init__(self, coordinates: Sequence[str], mass: ArrayOrCallable,
                 force: Optional[ArrayOrCallable] = None,
                 constraints: Sequence[Constraint] = (),
                 energy: Optional[Callable] = None, name: Optional[str] = None) -> None:
        if isinstance(coordinates, str) or not all(isinstance(c, str) for c in coordinates):
            raise ModelError("`coordinates` must be a sequence of names (str), e.g. ('x', 'y'); "
                             f"found {coordinates!r}.")
        coords = tuple(coordinates)
        if len(coords) == 0:
            raise ModelError("`coordinates` is empty: a system needs at least one coordinate.")
        if len(set(coords)) != len(coords):
            raise ModelError(f"`coordinates` has duplicate names: {coords}.")
        self.coordinates = coords
        self.n = n = len(coords)
        self.name = name or "system"

        #: the diagonal of a constant diagonal mass matrix (None otherwise)
        self.mass_diagonal: Optional[np.ndarray] = None
        if callable(mass):
            self._mass, self.constant_mass = mass, None
        else:
            if _is_sparse(mass):
                mass = mass.toarray()
            Mc = np.asarray(mass, dtype=float)
            if Mc.shape == (n,):
                Mc = np.diag(Mc)                   # the diagonal of a diagonal M
            if Mc.shape != (n, n):
                raise ModelError(f"`mass` must have shape ({n}, {n}) or, for a diagonal mass "
                                 f"matrix, ({n},) for {n} coordinates, found {Mc.shape}.")
            _check_mass(Mc, "`mass`")
            Mc = np.array(Mc)
            Mc.setflags(write=False)
            self._mass, self.constant_mass = None, Mc
            self.mass_diagonal = diagonal_of(Mc)

        if force is None:
            force = np.zeros(n)
        if callable(force):
            self._force, self.constant_force = force, None
        else:
            Fc = np.asarray(force, dtype=float).ravel()
            if Fc.shape != (n,):
                raise ModelError(f"`force` must have shape ({n},), found {np.shape(force)}.")
            if not np.all(np.isfinite(Fc)):
                raise ModelError("`force` contains NaN or inf.")
            Fc.setflags(write=False)
            self._force, self.constant_force = None, Fc

        cons = list(constraints)
        for i, c in enumerate(cons):
            if not isinstance(c, Constraint):
                raise ModelError(f"`constraints[{i}]` must be a gaussopt constraint (Holonomic, "
                                 f"Nonholonomic, AccelerationConstraint, Inequality), found "
                                 f"{type(c).__name__}.")
        self.constraints = tuple(cons)
        self.equalities = tuple(c for c in cons if c.kind == "equality")
        self.inequalities = tuple(c for c in cons if c.kind == "inequality")
        #: unilateral contacts (:class:`~gaussopt.Contact`): :func:`~gaussopt.simulate`
        #: decides their state along the run (:mod:`gaussopt.integrate.contact_run`)
        self.contacts = tuple(c for c in cons if c.kind == "contact")
        self.holonomic = tuple(c for c in self.equalities if isinstance(c, Holonomic))
        self.nonholonomic = tuple(c for c in self.equalities if isinstance(c, Nonholonomic))
        # holonomic and nonholonomic constraints in declaration order (the order of rows())
        self._velocity_level = tuple(c for c in self.equalities
                                     if isinstance(c, (Holonomic, Nonholonomic)))
        if energy is not None and not callable(energy):
            raise ModelError(f"`energy` must be callable energy(t, q, v) or None, found "
                             f"{type(energy).__name__}.")
        self._energy = energy
        self._row_counts: Optional[tuple[int, ...]] = None
        #: ids of constraints whose derivatives a check of the same run has verified (the
        #: phase systems of a contact run: the base's constraints and the contacts'
        #: functions are checked where the run starts); :meth:`check` evaluates their rows
        #: but does not differentiate them again
        self._verified: frozenset = frozenset()
        #: ``None``, or a factory of the compiled functions of this system
        #: (:class:`gaussopt.core.model_interface.ModelFunctions`) set by a front end that generated
        #: them (:mod:`gaussopt.symbolic`, :mod:`gaussopt.multibody`); the compiled
        #: engine then runs without calling Python
        self.compiled: Optional[Callable] = None
        #: ``None``, or the model's sparse evaluation (:class:`gaussopt.core.model_interface.SparseModel`:
        #: diagonal ``M``, rows in a fixed pattern) set by a front end
        #: (:mod:`gaussopt.multibody`); large systems then take the O(n) step of
        #: :mod:`gaussopt.gauss.band_step`
        self.sparse = None
        #: ``None``, or the recursive O(n) step of a tree in joint coordinates
        #: (:class:`gaussopt.core.model_interface.RecursiveModel`: the articulated-body
        #: algorithm) set by the tree kind of :mod:`gaussopt.multibody`; long trees then
        #: take it (:mod:`gaussopt.gauss.band_step`, ``MODE_TREE``)
        self.recursive = None
        #: ``None``, or the named entries of the compiled model's parameter array
        #: (:class:`gaussopt.core.model_interface.ParameterSlots`) set by a front end that
        #: generated the functions (:mod:`gaussopt.symbolic`; the tree kind of
        #: :mod:`gaussopt.multibody`: its actuators' controls): the inputs a
        #: :class:`~gaussopt.Stepper` may change between steps (``ctrl``)
        self.parameter_slots = None
        #: ``None``, or the parent of every coordinate in a tree (parents numbered first,
        #: -1 a root) such that ``M[i, j]`` is zero unless one of ``i``, ``j`` is an
        #: ancestor of the other: the mass matrix of a tree in joint coordinates, set by
        #: the tree kind of :mod:`gaussopt.multibody`; the compiled step then factors
        #: ``M`` along the tree (:func:`gaussopt.gauss.dense_step.range_space`)
        self.mass_tree = None
        self._ineq_counts: Optional[tuple[int, ...]] = None
        self._solver_cache: dict = {}
        #: the repeated :func:`~gaussopt.solve_step` call's function per solver name (its
        #: cached solver's compiled step, :meth:`StepSolver._make_direct`)
        self._direct_steps: dict = {}
        #: ``None``, or ``(builder, args, kwargs)``: ``builder(*args, **kwargs)`` builds this
        #: system again; set by the front ends and by :func:`rebuildable`, and what a
        #: pickle of the system stores (see :meth:`__reduce_ex__`)
        self._recipe: Optional[tuple] = None

    # ------------------------------------------------------------------ values
    def mass(self, t: float, q: np.ndarray) -> np.ndarray:
        """Mass matrix ``M(t, q)``, shape (n, n)."""
        if self.constant_mass is not None:
            return self.constant_mass
        return np.asarray(self._mass(t, q), dtype=float)

    def force(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Generalized force ``F = Q - g``, shape (n,)."""
        if self.constant_force is not None:
            return self.constant_force
        return np.asarray(self._force(t, q, v), dtype=float).reshape(-1)

    def rows(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stacked equality rows ``(A, b)``, shapes (m, n) and (m,)."""
        eqs = self.equalities
        if len(eqs) == 1:
            return eqs[0].rows(t, q, v)
        if not eqs:
            return np.zeros((0, self.n)), np.zeros(0)
        parts = [c.rows(t, q, v) for c in eqs]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def evaluate(self, t: float, q: np.ndarray, v: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``M, F, A, b`` at one state, with their shapes checked (every step).

        Raises
        ------
        ModelError
            A piece has the wrong shape, or the number of rows of a constraint
            differs from the count found by :meth:`check` (named).
        """
        n = self.n
        M = self.mass(t, q)
        if M.shape != (n, n):
            raise ModelError(f"mass(t, q) returned shape {M.shape} at t={t}, expected ({n}, {n}).")
        F = self.force(t, q, v)
        if F.shape != (n,):
            raise ModelError(f"force(t, q, v) returned shape {F.shape} at t={t}, expected ({n},).")
        A, b = self.rows(t, q, v)
        m = self.m
        if A.shape != (m if m is not None else A.shape[0], n) or b.shape != (A.shape[0],):
            raise self._row_count_error(t, q, v, A, b)
        return M, F, A, b

    def _row_count_error(self, t, q, v, A, b) -> ModelError:
        """The error for rows whose count or shape changed (failure path only)."""
        found = []
        for c, k in zip(self.equalities, self._row_counts or (None,) * len(self.equalities)):
            try:
                Ac, bc = c.rows(t, q, v)
                shape = (np.shape(Ac), np.shape(bc))
            except Exception as e:  # noqa: BLE001 - reported
                shape = f"{type(e).__name__}: {e}"
            if k is None or shape != ((k, self.n), (k,)):
                found.append(f"constraint {c.name!r} returned rows of shapes {shape} where "
                             f"{k} rows ({k}, {self.n}) and ({k},) were found by the check at the start")
        detail = "; ".join(found) or f"A {A.shape}, b {b.shape}"
        return ModelError(f"the constraint rows changed shape at t={t}: {detail}. A constraint "
                          "must return the same number of rows at every state (write a vanishing "
                          "row as zeros instead of leaving it out).")

    def inequality_rows(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stacked inequality rows ``(G, h)`` with ``G a >= h``."""
        if not self.inequalities:
            return np.zeros((0, self.n)), np.zeros(0)
        parts = [c.rows(t, q, v) for c in self.inequalities]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def energy(self, t: float, q: np.ndarray, v: np.ndarray) -> Optional[float]:
        """Total energy, or ``None`` when the system defines none."""
        if self._energy is None:
            return None
        return float(self._energy(t, q, v))

    @property
    def has_energy(self) -> bool:
        return self._energy is not None

    def position_residual(self, t: float, q: np.ndarray) -> np.ndarray:
        """Stacked ``Phi(t, q)`` of the holonomic constraints."""
        hol = self.holonomic
        if len(hol) == 1:
            return hol[0].residual(t, q)
        if not hol:
            return np.zeros(0)
        return np.concatenate([c.residual(t, q) for c in hol])

    def position_jacobian(self, t: float, q: np.ndarray) -> np.ndarray:
        hol = self.holonomic
        if len(hol) == 1:
            return hol[0].jacobian(t, q)
        if not hol:
            return np.zeros((0, self.n))
        return np.concatenate([c.jacobian(t, q) for c in hol])

    def velocity_residual(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Stacked velocity-level residuals ``Phi_q v + Phi_t`` and ``f(t, q, v)``, in
        the declaration order of the constraints (as :meth:`rows`, without the
        acceleration-level constraints)."""
        vel = self._velocity_level
        if len(vel) == 1:
            return vel[0].velocity_residual(t, q, v)
        parts = [c.velocity_residual(t, q, v) for c in vel]
        return np.concatenate(parts) if parts else np.zeros(0)

    def velocity_rows(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Jacobian of the velocity-level residual with respect to ``v``."""
        parts = [c.jacobian(t, q) if c.level == "position" else c.jacobian(t, q, v)
                 for c in self._velocity_level]
        return np.concatenate(parts) if parts else np.zeros((0, self.n))

    def row_labels(self, t: float = 0.0, q=None, v=None) -> list[str]:
        """Names of the equality rows, ``"<constraint name>[i]"``; needs the row
        counts, known after :meth:`check`."""
        if self._row_counts is None:
            raise ModelError("row labels are known after `System.check(t, q, v)` has run.")
        return [f"{c.name}[{i}]" for c, k in zip(self.equalities, self._row_counts) for i in range(k)]

    # ------------------------------------------------------------------ checks
    def check(self, t: float, q, v) -> None:
        """Evaluate every piece at ``(t, q, v)`` and raise one ModelError listing
        all problems found (shapes, NaN/inf, symmetry/definiteness of M,
        complex-safety of functions whose derivatives are automatic)."""
        n = self.n
        problems: list[str] = []
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        if q.shape != (n,):
            problems.append(f"`q` must have shape ({n},), found {q.shape}")
        if v.shape != (n,):
            problems.append(f"`v` must have shape ({n},), found {v.shape}")
        if problems:
            raise ModelError("; ".join(problems))
        try:
            M = self.mass(t, q)
            if M.shape != (n, n):
                problems.append(f"mass(t, q) returned shape {M.shape}, expected ({n}, {n})")
            else:
                try:
                    _check_mass(M, "mass(t, q)")
                except ModelError as e:
                    problems.append(str(e))
        except Exception as e:  # noqa: BLE001
            problems.append(f"mass(t, q) raised {type(e).__name__}: {e}")
        try:
            F = np.asarray(self.force(t, q, v))
            if F.shape != (n,):
                problems.append(f"force(t, q, v) returned shape {F.shape}, expected ({n},)")
            elif not np.all(np.isfinite(F)):
                problems.append("force(t, q, v) contains NaN or inf")
        except Exception as e:  # noqa: BLE001
            problems.append(f"force(t, q, v) raised {type(e).__name__}: {e}")
        counts, icounts = [], []
        for c in self.constraints:
            found = check_derivatives_near(c, t, q, v) if id(c) not in self._verified else []
            if found:
                problems += found
                counts.append(0) if c.kind == "equality" else icounts.append(0)
                continue
            if c.kind == "contact":        # its rows are decided along a run (gaussopt.integrate.contact_run)
                continue
            try:
                A, b = c.rows(t, q, v)
            except Exception as e:  # noqa: BLE001
                problems.append(f"constraint {c.name!r}: rows raised {type(e).__name__}: {e}")
                counts.append(0) if c.kind == "equality" else icounts.append(0)
                continue
            A = np.atleast_2d(np.asarray(A, dtype=float))
            b = np.asarray(b, dtype=float).reshape(-1)
            if A.ndim != 2 or A.shape[1] != n or b.shape != (A.shape[0],):
                problems.append(f"constraint {c.name!r}: rows have shapes A {A.shape}, b {b.shape}; "
                                f"expected (k, {n}) and (k,)")
            elif not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
                problems.append(f"constraint {c.name!r}: rows contain NaN or inf")
            (counts if c.kind == "equality" else icounts).append(A.shape[0])
        if self._energy is not None:
            try:
                e = self.energy(t, q, v)
                if not np.isfinite(e):
                    problems.append("energy(t, q, v) is not finite")
            except Exception as e:  # noqa: BLE001
                problems.append(f"energy(t, q, v) raised {type(e).__name__}: {e}")
        if problems:
            raise ModelError(f"System {self.name!r} failed its check at t={t}:\n  - "
                             + "\n  - ".join(problems))
        self._row_counts = tuple(counts)
        self._ineq_counts = tuple(icounts)
        if getattr(self, "compiled", None) is None and self.sparse is None:
            # (made once: the step contexts cached on this system's solvers call its
            # callbacks by address, so it lives as long as the system; its pattern is
            # the first check's)
            from gaussopt.model.model_functions import python_sparse_model

            self.sparse = python_sparse_model(self, t, q, v)

    @property
    def m(self) -> Optional[int]:
        """Number of equality rows (known after :meth:`check`)."""
        return None if self._row_counts is None else int(sum(self._row_counts))

    def with_constraints(self, constraints: Sequence[Constraint], *,
                         force: Optional[ArrayOrCallable] = None, name: str = "") -> "System":
        """A new system with this one's coordinates, mass and energy, and the given
        ``constraints`` (and ``force``, when given; else this one's). ``name`` is added to
        this one's name in brackets. (A contact run builds each phase's system this way:
        the closed points as bilateral rows, a sliding point's Coulomb force.)"""
        mass = self.constant_mass if self.constant_mass is not None else self._mass
        rows_origin = self.compiled_origin
        origin = rows_origin if force is None else None
        if force is None:
            force = self.constant_force if self.constant_force is not None else self._force
        new = System(self.coordinates, mass, force, list(constraints), energy=self._energy,
                     name=self.name + (f" [{name}]" if name else ""))
        if origin is not None:
            rebind = getattr(origin.compiled, "rebind", None)
            if rebind is not None and (tuple(map(id, new.constraints))
                                       == tuple(map(id, origin.constraints))):
                # the origin's own constraints again (a contact run's phase with every
                # contact open): the origin's compiled functions are this system's
                new.compiled = rebind(new)
                for attr in ("sparse", "recursive", "mass_tree", "parameter_slots"):
                    setattr(new, attr, getattr(origin, attr))
            else:
                new._compiled_origin = origin
        if rows_origin is not None and new.compiled is None:
            # (whose rows this one extends, whatever its force: a contact phase's rows may
            # be compiled by it, python_functions)
            new._rows_origin = rows_origin
        return new

    @property
    def compiled_origin(self) -> Optional["System"]:
        """The system with compiled functions (:attr:`compiled`) whose mass, force and
        energy this one has: itself, or the one it was derived from by
        :meth:`with_constraints` (other constraints, the same force); None when there is
        none. A Python-function run of this system takes its mass, force and energy from
        the origin's compiled functions (:func:`~gaussopt.model.model_functions.
        python_functions`): a contact run's phases of a compiled model evaluate ``M`` and
        ``F`` without a Python call."""
        if self.compiled is not None:
            return self
        origin = self.__dict__.get("_compiled_origin")
        return origin if origin is not None and origin.compiled is not None else None

    # ------------------------------------------------------------------ pickling
    def rebuilt_by(self, builder: Callable, *args: Any, **kwargs: Any) -> "System":
        """Record that ``builder(*args, **kwargs)`` builds this system; return ``self``.

        A pickle of the system then stores the builder (by reference: a
        module-level function or method) and its arguments instead of the
        system's functions, and unpickling calls the builder. This is how the
        systems of :mod:`gaussopt.symbolic`, :mod:`gaussopt.multibody` and
        ``problems`` pickle, whose functions are generated code or closures.
        """
        if not callable(builder):
            raise ModelError(f"`builder` must be callable, found {type(builder).__name__}.")
        self._recipe = (builder, tuple(args), dict(kwargs))
        return self

    def __reduce_ex__(self, protocol):
        """Pickle: ``(builder, args, kwargs)`` when the system records how it was built
        (:meth:`rebuilt_by`), else its attributes (its functions must then pickle:
        module-level functions do, lambdas and closures do not)."""
        recipe = self.__dict__.get("_recipe")
        if recipe is not None:
            builder, args, kwargs = recipe
            return (_rebuild, (builder, args, kwargs, self.name))
        return super().__reduce_ex__(protocol)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_solver_cache"] = {}       # solvers hold compiled state: rebuilt on demand
        state["_direct_steps"] = {}
        state["_verified"] = frozenset()  # (ids of this process's objects)
        if getattr(state.get("sparse"), "python", False):
            state["sparse"] = None        # (ctypes callbacks: made again by the next check)
            state["_row_counts"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("_recipe", None)
        state.setdefault("parameter_slots", None)
        state.setdefault("sparse", None)
        state.setdefault("_direct_steps", {})
        state.setdefault("_verified", frozenset())
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return (f"System({self.name!r}, coordinates={self.coordinates}, "
                f"constraints={[c.name for c in self.constraints]})")


def _check_mass(M: np.ndarray, label: str) -> None:
    """Raise ModelError unless M is finite, symmetric and positive semi-definite."""
    if not np.all(np.isfinite(M)):
        raise ModelError(f"{label} contains NaN or inf.")
    d = diagonal_of(M)
    if d is not None:                  # diagonal: the eigenvalues are its entries
        if d.min() < -1e-12 * max(float(np.abs(d).max()), 1e-300) * M.shape[0]:
            raise ModelError(f"{label} must be positive semi-definite; its smallest eigenvalue is "
                             f"{d.min():.6g} (largest {d.max():.6g}; M is diagonal: the entry "
                             f"of coordinate {int(np.argmin(d))}).")
        return
    scale = float(np.max(np.abs(M))) if M.size else 0.0
    asym = float(np.max(np.abs(M - M.T))) if M.size else 0.0
    if asym > 1e-12 * max(scale, 1e-300):
        raise ModelError(f"{label} must be symmetric; max |M - M^T| = {asym:.3g} "
                         f"(relative {asym / max(scale, 1e-300):.3g}).")
    w = np.linalg.eigvalsh(M)
    if w.size and w[0] < -1e-12 * max(scale, 1e-300) * M.shape[0]:
        raise ModelError(f"{label} must be positive semi-definite; its smallest eigenvalue is "
                         f"{w[0]:.6g} (largest {w[-1]:.6g}).")


def _rebuild(builder: Callable, args: tuple, kwargs: dict, name: str) -> "System":
    """Unpickle a system: build it again (see :meth:`System.rebuilt_by`)."""
    system = builder(*args, **kwargs)
    if not isinstance(system, System):
        raise ModelError(f"unpickling a System: its builder {getattr(builder, '__qualname__', builder)!r} "
                         f"returned {type(system).__name__}, expected a System.")
    system.name = name
    return system


def _system_of(builder: Callable, args: tuple, kwargs: dict) -> "System":
    """``builder(*args, **kwargs).system``: a builder of a Problem as a builder of its System."""
    return builder(*args, **kwargs).system


def rebuildable(builder: Callable) -> Callable:
    """Decorator of a module-level function that builds a :class:`System` (or a
    :class:`~gaussopt.Problem`): the systems it returns pickle as the call that
    built them (see :meth:`System.rebuilt_by`), whatever their functions are
    (lambdas and closures included).

    Examples
    --------
    In a module of your own::

        @go.rebuildable
        def spring(k=2.0):
            return go.System(("x",), mass=[[1.0]], force=lambda t, q, v: -k * q)

    ``pickle.dumps(spring(k=3.0))`` then stores ``spring`` and ``k=3.0``. The
    pendulum of ``problems`` is built that way (its constraint is a lambda):

    >>> import pickle, numpy as np
    >>> from gaussopt_problems import pendulum
    >>> s = pickle.loads(pickle.dumps(pendulum.build(l=2.0).system))
    >>> float(s.position_residual(0.0, np.array([2.0, 0.0]))[0])   # l = 2 travelled along
    0.0
    """
    @functools.wraps(builder)
    def build(*args, **kwargs):
        out = builder(*args, **kwargs)
        if isinstance(out, System):
            out.rebuilt_by(build, *args, **kwargs)
        elif isinstance(getattr(out, "system", None), System):
            out.system.rebuilt_by(_system_of, build, args, kwargs)
        return out

    return build
