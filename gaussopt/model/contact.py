"""The contact constraint and the evaluation of every contact point of a system at one state."""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import numpy as np

from gaussopt.model.constraints import Constraint, Holonomic, Nonholonomic
from gaussopt.core.exceptions import ModelError

__all__ = ["Contact", "ContactPoints"]

#: inputs remembered per contact function by :meth:`ContactPoints._memo` (the n + 4 points
#: of a row's complex-step Jacobian and convective term, and a few states)
_MEMO = 32


class Contact(Constraint):
    """A unilateral contact: ``gap(t, q) >= 0``, the body may only be pushed apart.

    While the gap is open the contact exerts no force; while it is closed its
    normal force ``N >= 0`` is the multiplier of the gap's acceleration row, and
    the contact opens (lifts off) when ``N`` falls to zero; an arrival at
    ``gap = 0`` with a closing velocity is an impact, resolved by Gauss's
    principle at the velocity level with Newton's restitution law (see
    :mod:`gaussopt.integrate.contact_run`). Each row of ``gap`` is one contact point.

    Parameters
    ----------
    gap : callable
        ``gap(t, q) -> ndarray, shape (k,)``: the signed distances of ``k``
        contact points (positive: open). Written with numpy functions when
        ``jacobian`` or ``gamma`` is left to the automatic derivatives (complex
        step), as for :class:`~gaussopt.Holonomic`.
    jacobian : callable, optional
        ``jacobian(t, q) -> ndarray, shape (k, n)``, ``gap_q``.
    gamma : callable, optional
        ``gamma(t, q, v) -> ndarray, shape (k,)`` with ``gap_q a = gamma`` when
        ``gap'' = 0`` (``gap'' = gap_q a - gamma``), as for
        :class:`~gaussopt.Holonomic`.
    slip : callable, optional
        ``slip(t, q) -> ndarray, shape (k,)``: a function whose rate is the
        tangential (slip) velocity of each contact point, e.g. the contact
        point's coordinate along a flat surface. Needed for friction.
    restitution : float, default 0
        Newton's coefficient ``e`` in ``[0, 1]``: after an impact the gap rate is
        ``-e`` times the rate before (``0``: plastic, the contact closes).
    slip_jacobian, slip_gamma : callable, optional
        The derivatives of ``slip``, as ``jacobian`` and ``gamma`` are of ``gap``
        (default: automatic, which needs a complex-safe ``slip``).
    slip_velocity : callable, optional
        Point contacts in space: ``slip_velocity(t, q, v) -> ndarray, shape (k, 2)``,
        the two components of each contact point's tangential (slip) velocity along two
        orthonormal tangent directions of the surface, affine in ``v`` (it need not be
        the rate of a function of ``q``: a rolling sphere's is not). The friction force
        of a point is then a vector ``t`` in the tangent plane, in the *circular*
        Coulomb cone ``|t| <= mu N`` (isotropic friction, not a pyramid): sticking,
        the slip velocity stays zero; sliding, ``t = -mu N u / |u|``
        (:mod:`gaussopt.gauss.contact_cone`). Instead of ``slip``; its derivatives are
        automatic (complex step: write it with numpy functions).
    slip_velocity_jacobian : callable, optional
        ``slip_velocity_jacobian(t, q, v) -> ndarray, shape (k, 2, n)``: the slip
        velocity's derivative in ``v`` (its matrix ``T(t, q)``: the slip velocity is
        affine in ``v``). Default: a complex step in ``v``, ``n`` evaluations of
        ``slip_velocity`` per Jacobian; a model that has ``T`` at hand (the geometry
        contacts of :mod:`gaussopt.multibody`) saves them. Checked against the complex
        step when the system is checked.
    slip_velocity_gamma : callable, optional
        ``slip_velocity_gamma(t, q, v) -> ndarray, shape (k, 2)``: the slip velocity's
        convective term ``c`` with ``u' = T a - c`` (``-(u_q v + u_t)``, the
        ``gamma`` of :class:`~gaussopt.Nonholonomic`). Default: one complex step of
        ``slip_velocity`` along ``(1, v)`` (which then must accept a complex ``q``).
        Checked against the complex step when the system is checked.
    friction : float or None, default None
        ``None`` or ``0``: frictionless. A finite ``mu > 0``: Coulomb friction
        (with ``slip``, planar point contacts; with ``slip_velocity``, the circular
        cone above): a closed point sticks while its tangential
        force ``|T| <= mu N`` and slides with ``T = -mu N sign(slip rate)``
        otherwise (``T`` along the increasing slip coordinate; the states of all
        touching points are decided together, :mod:`gaussopt.gauss.contact_problem`).
        ``float("inf")``: no slip while the contact is closed or
        impacting (rolling without slip, a sticking corner). Friction needs
        ``slip`` or ``slip_velocity``.
    rheonomic : bool, default True
        ``False`` declares that ``gap`` and ``slip`` do not depend on ``t``.
    name : str, optional
    point_names : sequence of str, optional
        One name per gap row (contact point), used in the run's labels, transitions and
        messages as ``"<name>[<point name>]"`` (default: the row's index,
        ``"<name>[0]"``).

    Examples
    --------
    A ball of radius 0.1 above the floor ``y = 0``, bouncing with ``e = 0.8``:

    >>> import numpy as np, gaussopt as go
    >>> floor = go.Contact(lambda t, q: np.array([q[1] - 0.1]), restitution=0.8, name="floor")
    >>> floor.restitution, floor.friction
    (0.8, 0.0)
    """

    kind = "contact"
    level = "position"
    #: ``nonsmooth_at(t, q) -> bool``: where the functions are known to have no derivative
    #: (a geometry's kink: a cylinder's rim standing exactly on its axis above a plane, whose
    #: lowest point is then every point of the rim), or None (nowhere). The derivative check
    #: (:meth:`check_derivatives`) concludes nothing at such a state: its finite
    #: differences would straddle the kink and disagree with any derivative given there;
    #: :meth:`gaussopt.System.check` then checks at its perturbed state. Set by
    #: :meth:`gaussopt.multibody.tree.Model.contacts`.
    nonsmooth_at: Optional[Callable] = None
    #: the rows (points) whose gap is an unsigned distance: two convex shapes' distance less
    #: their radii (a sphere or a capsule against another), which is positive again once
    #: one has passed through the other. A run watches their closing also at interior
    #: points of its steps (a plane's gap keeps its sign beyond the plane: a sign change
    #: at a step's end finds the landing; a free fall is integrated exactly in steps long
    #: enough to pass a capsule through another). Set by
    #: :meth:`gaussopt.multibody.tree.Model.contacts`.
    unsigned: tuple = ()

    def __init__(self, gap: Callable, jacobian: Optional[Callable] = None,
                 gamma: Optional[Callable] = None, *, slip: Optional[Callable] = None,
                 slip_jacobian: Optional[Callable] = None, slip_gamma: Optional[Callable] = None,
                 slip_velocity: Optional[Callable] = None,
                 slip_velocity_jacobian: Optional[Callable] = None,
                 slip_velocity_gamma: Optional[Callable] = None,
                 restitution: float = 0.0, friction: Optional[float] = None,
                 rheonomic: bool = True, name: Optional[str] = None,
                 point_names: Optional[Sequence[str]] = None) -> None:
        super().__init__(name)
        if point_names is not None:
            if not isinstance(point_names, (list, tuple)) or not all(
                    isinstance(x, str) for x in point_names):
                raise ModelError(f"contact {self.name!r}: `point_names` must be a list or "
                                 "tuple of str (one per gap row), found "
                                 f"{point_names!r}.")
            point_names = tuple(point_names)
        #: the points' names (None: their row indices)
        self.point_names = point_names
        if not callable(gap):
            raise ModelError(f"`gap` must be a callable gap(t, q), found {type(gap).__name__}.")
        if slip is not None and not callable(slip):
            raise ModelError(f"`slip` must be a callable slip(t, q) or None, found "
                             f"{type(slip).__name__}.")
        if slip_velocity is not None and not callable(slip_velocity):
            raise ModelError(f"`slip_velocity` must be a callable slip_velocity(t, q, v) or None, "
                             f"found {type(slip_velocity).__name__}.")
        for label, f in (("slip_velocity_jacobian", slip_velocity_jacobian),
                         ("slip_velocity_gamma", slip_velocity_gamma)):
            if f is not None and (slip_velocity is None or not callable(f)):
                raise ModelError(
                    f"contact {self.name!r}: `{label}` must be a callable {label}(t, q, v), "
                    f"given with `slip_velocity`; found {type(f).__name__} (slip_velocity "
                    f"{'given' if slip_velocity is not None else 'None'}).")
        if slip is not None and slip_velocity is not None:
            raise ModelError(f"contact {self.name!r}: give `slip` (planar: one tangent per point) "
                             "or `slip_velocity` (in space: two tangents per point), not both.")
        if isinstance(restitution, (bool, np.bool_, str, bytes)):
            raise ModelError(f"`restitution` must be a number in [0, 1], found {restitution!r} "
                             f"({type(restitution).__name__}).")
        try:
            e = float(restitution)
        except (TypeError, ValueError):
            raise ModelError(f"`restitution` must be a number in [0, 1], found "
                             f"{restitution!r}.") from None
        if not 0.0 <= e <= 1.0:
            raise ModelError(f"`restitution` must lie in [0, 1] (0: plastic, 1: elastic), found {e}.")
        if friction is None:
            mu = 0.0
        elif isinstance(friction, (bool, np.bool_, str, bytes)):
            raise ModelError(f"`friction` must be None, a number >= 0 or float('inf'), found "
                             f"{friction!r} ({type(friction).__name__}).")
        else:
            try:
                mu = float(friction)
            except (TypeError, ValueError):
                raise ModelError(f"`friction` must be None, a number >= 0 or float('inf'), found "
                                 f"{friction!r}.") from None
            if math.isnan(mu) or mu < 0:
                raise ModelError(f"`friction` must be None, a number >= 0 or float('inf'), found "
                                 f"{friction!r}.")
        if mu > 0 and slip is None and slip_velocity is None:
            raise ModelError(f"contact {self.name!r}: `friction={friction}` needs `slip`, a function "
                             "slip(t, q) whose rate is the tangential velocity of each contact point "
                             "(e.g. the contact point's coordinate along a flat floor), or, in "
                             "space, `slip_velocity(t, q, v)` with its two tangential components.")
        self.restitution = e
        self.friction = mu
        self.normal = Holonomic(gap, jacobian, gamma, rheonomic=rheonomic, name=f"{self.name}.gap")
        if slip is None and (slip_jacobian is not None or slip_gamma is not None):
            raise ModelError(f"contact {self.name!r}: `slip_jacobian`/`slip_gamma` were given "
                             "without `slip`.")
        self.tangent = (Holonomic(slip, slip_jacobian, slip_gamma, rheonomic=rheonomic,
                                  name=f"{self.name}.slip") if slip is not None else None)
        #: the spatial slip velocity, raveled: rows (2 r, 2 r + 1) are point r's components
        self.cone = None
        if slip_velocity is not None:
            self.cone = Nonholonomic(
                _Raveled(slip_velocity),
                None if slip_velocity_jacobian is None else _RaveledJacobian(
                    slip_velocity_jacobian),
                None if slip_velocity_gamma is None else _Raveled(slip_velocity_gamma),
                name=f"{self.name}.slip_velocity")

    @property
    def tangent_dim(self) -> int:
        """Tangent directions per point: 0 (no slip function), 1 (``slip``), 2
        (``slip_velocity``)."""
        return 2 if self.cone is not None else 1 if self.tangent is not None else 0

    @property
    def sticks(self) -> bool:
        """True for ``friction = inf``: no slip while closed or impacting."""
        return self.friction == math.inf

    @property
    def frictional(self) -> bool:
        """True for ``friction > 0`` (Coulomb, or no slip for ``inf``)."""
        return self.friction > 0

    def residual(self, t, q, v=None):
        return self.normal.residual(t, q)

    def check_derivatives(self, t, q, v, strict=True) -> list[str]:
        if self.nonsmooth_at is not None and self.nonsmooth_at(t, np.asarray(q, dtype=float)):
            return []           # (no derivative to compare here: see ``nonsmooth_at``)
        problems = self.normal.check_derivatives(t, q, v, strict)
        if self.tangent is not None:
            problems += self.tangent.check_derivatives(t, q, v, strict)
        if self.cone is not None:
            k = self.normal.residual(t, q).size
            try:
                u = np.asarray(self.cone.velocity_residual(t, q, v))
            except ModelError as e:
                return problems + [str(e)]
            if u.shape != (2 * k,):
                return problems + [f"{self.name}: `slip_velocity` returned {u.size} value(s), "
                                   f"expected shape ({k}, 2) (two tangential components per "
                                   "gap row)"]
            problems += self.cone.check_derivatives(t, q, v, strict)
            if not self.cone.is_affine(t, q, v):
                problems.append(f"{self.name}: `slip_velocity` must be affine in v (a slip "
                                "velocity T(t, q) v + c(t, q))")
        return problems

    def __repr__(self) -> str:
        return (f"Contact(name={self.name!r}, restitution={self.restitution}, "
                f"friction={self.friction})")


class _Raveled:
    """``f(t, q, v)`` raveled (a class, not a closure: a system with spatial contacts
    pickles)."""

    def __init__(self, f: Callable) -> None:
        self.f = f

    def __call__(self, t, q, v):
        return np.reshape(self.f(t, q, v), -1)


class _RaveledJacobian:
    """``J(t, q, v)`` of shape (k, 2, n) as the (2 k, n) Jacobian of the raveled slip
    velocity (:class:`_Raveled`'s row order)."""

    def __init__(self, f: Callable) -> None:
        self.f = f

    def __call__(self, t, q, v):
        J = np.asarray(self.f(t, q, v))
        return J.reshape(-1, J.shape[-1]) if J.ndim == 3 else J


class _GapSource:
    """``(t, q, v) -> gaps(t, q)`` of a :class:`ContactPoints` (picklable)."""

    def __init__(self, points: "ContactPoints") -> None:
        self.points = points

    def __call__(self, t, q, v):
        return self.points.gaps(t, q)


class ContactPoints:
    """Every contact point (a row of a :class:`Contact`) of a system, evaluated together.

    Point ``i`` is row ``row[i]`` of ``contacts[owner[i]]``; ``k`` points in all.
    """

    def __init__(self, contacts: Sequence[Contact], t: float, q: np.ndarray):
        self.contacts = tuple(contacts)
        owner, row = [], []
        for j, c in enumerate(self.contacts):
            g = c.normal.residual(t, q)
            if c.tangent is not None:
                s = c.tangent.residual(t, q)
                if s.shape != g.shape:
                    raise ModelError(f"contact {c.name!r}: `slip` returned shape {s.shape}, "
                                     f"expected {g.shape} (one slip per gap row).")
            owner += [j] * g.size
            row += list(range(g.size))
        self.owner = np.array(owner, dtype=int)
        self.row = np.array(row, dtype=int)
        self.k = len(owner)
        self.e = np.array([self.contacts[j].restitution for j in owner])
        self.mu = np.array([self.contacts[j].friction for j in owner])
        self.sticks = np.array([self.contacts[j].sticks for j in owner], dtype=bool)
        self.frictional = self.mu > 0
        #: tangent directions of each point: 0, 1 (``slip``: planar), 2 (``slip_velocity``)
        self.dim = np.array([self.contacts[j].tangent_dim for j in owner], dtype=int)
        #: the points whose gap is an unsigned distance (:attr:`Contact.unsigned`)
        unsigned = [set(c.unsigned) for c in self.contacts]
        self.unsigned = np.array([r in unsigned[j] for j, r in zip(owner, row)], dtype=bool)
        #: some point has two tangents: the contact problem is the circular cones'
        self.spatial = bool(np.any(self.dim == 2))
        #: the points of each contact (its gap's rows at the run's start)
        self.sizes = [owner.count(j) for j in range(len(self.contacts))]
        #: some point has a planar ``slip`` (:meth:`tangent_rows` has rows to fill)
        self.planar = any(c.frictional and c.tangent is not None for c in self.contacts)
        for c, size in zip(self.contacts, self.sizes):
            if c.point_names is not None and len(c.point_names) != size:
                raise ModelError(f"contact {c.name!r}: `point_names` has "
                                 f"{len(c.point_names)} name(s), its gap {size} row(s) "
                                 f"at t={t}.")
        self.labels = [f"{self.contacts[j].name}[{self._point(j, r)}]"
                       for j, r in zip(owner, row)]
        #: the slip of each sticking point where it closed: its no-slip constraint while
        #: closed is ``slip(t, q) - anchor = 0`` (set by :meth:`anchor_slip`)
        self.anchor = np.zeros(self.k)
        #: the last state's normal rows (a contact run asks for them several times at
        #: an impact): ``(t, q, v, (G, c, gam))``
        self._normal_memo: Optional[tuple] = None
        self._gap_memo: Optional[tuple] = None
        #: ``gap_source(t, q, v)``: :meth:`gaps` as an event tracker's shared source (one
        #: object, so that the watches of every point read one evaluation per state)
        self.gap_source = _GapSource(self)

    def _point(self, j: int, r: int) -> str:
        """Row ``r`` of contact ``j`` as its label writes it: its name or its index."""
        names = self.contacts[j].point_names
        return str(r) if names is None else names[r]

    def anchor_slip(self, t: float, q: np.ndarray, points) -> None:
        """Anchor the no-slip constraints of ``points`` (indices) at their slip now."""
        for i in points:
            c = self.contacts[self.owner[i]]
            if c.tangent is not None:
                self.anchor[i] = c.tangent.residual(t, q)[self.row[i]]

    def _stack(self, f, what: str = "", t: float = float("nan")) -> np.ndarray:
        """``f(contact)`` of every contact, stacked; a ModelError naming the contact, the
        function and the time when one returns something else than a finite array of
        one value per point (the points are counted at the run's start)."""
        parts = []
        for c, size in zip(self.contacts, self.sizes):
            try:
                x = np.asarray(f(c), dtype=float).ravel()
            except ModelError:
                raise
            except (TypeError, ValueError) as e:
                raise ModelError(f"contact {c.name!r}: `{what or 'gap'}` must return {size} "
                                 f"float(s) at t={t}, found {type(e).__name__}: {e}") from e
            if x.shape != (size,):
                raise ModelError(f"contact {c.name!r}: `{what or 'gap'}` returned {x.size} "
                                 f"value(s) at t={t}, expected {size} (one per contact point, "
                                 "as at the start of the run).")
            if not np.all(np.isfinite(x)):
                raise ModelError(f"contact {c.name!r}: `{what or 'gap'}` is not finite at "
                                 f"t={t}: {x}.")
            parts.append(x)
        return np.concatenate(parts) if parts else np.zeros(0)

    def gaps(self, t: float, q: np.ndarray) -> np.ndarray:
        """``gap(t, q)`` of every point, shape (k,) (read-only: the last state's are kept).

        Why kept: a phase watches each open point's gap by an event of its own; the event
        tracker reads them from one evaluation per state (:attr:`gap_source`), and the
        contact run's other readers at the same state (a watch called on its own, the
        settling of a phase's start) share that evaluation through this memo (dm_control's
        manipulator, 160 points: 160 evaluations of the 16 pairs of spheres per step
        before)."""
        memo = self._gap_memo
        if memo is not None and memo[0] == t and np.array_equal(memo[1], q):
            return memo[2]
        out = self._stack(lambda c: c.normal.residual(t, q), "gap", t)
        out.setflags(write=False)          # (shared by the calls at the same state)
        self._gap_memo = (t, np.array(q, dtype=float), out)
        return out

    def normal_rows(self, t: float, q: np.ndarray, v: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(G, c, gam)``: ``gap' = G v + c`` and ``gap'' = G a - gam``; shapes (k, n), (k,), (k,)."""
        memo = self._normal_memo
        if memo is not None and memo[0] == t and np.array_equal(memo[1], q) \
                and np.array_equal(memo[2], v):
            return memo[3]
        G = np.concatenate([c.normal.jacobian(t, q) for c in self.contacts])
        if G.shape != (self.k, q.shape[0]) or not np.all(np.isfinite(G)):
            bad = [c.name for c in self.contacts
                   if not np.all(np.isfinite(c.normal.jacobian(t, q)))] or \
                [c.name for c in self.contacts]
            raise ModelError(f"contact(s) {bad}: the gap's Jacobian at t={t} must be a finite "
                             f"({self.k}, {q.shape[0]}) array, found shape {G.shape}"
                             f"{'' if np.all(np.isfinite(G)) else ' with NaN or inf'}.")
        c_ = self._stack(lambda c: c.normal.phi_t(t, q), "gap's time derivative", t)
        gam = self._stack(lambda c: c.normal.gamma(t, q, v), "gap's convective term", t)
        out = (G, c_, gam)
        for x in out:
            x.setflags(write=False)        # (shared by the calls at the same state)
        self._normal_memo = (t, np.array(q, dtype=float), np.array(v, dtype=float), out)
        return out

    def tangent_rows(self, t: float, q: np.ndarray, v: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The same for the slip of the frictional points (rows of the others are zero)."""
        n = q.size
        T, c_, gam = np.zeros((self.k, n)), np.zeros(self.k), np.zeros(self.k)
        if not self.planar:
            return T, c_, gam
        i = 0
        for c, kc in zip(self.contacts, self.sizes):
            if c.frictional and c.tangent is not None:
                T[i:i + kc] = c.tangent.jacobian(t, q)
                c_[i:i + kc] = c.tangent.phi_t(t, q)
                gam[i:i + kc] = c.tangent.gamma(t, q, v)
            i += kc
        return T, c_, gam

    def _slip(self, c: "Contact", kc: int, t, q, v) -> np.ndarray:
        """Contact ``c``'s spatial slip velocities (``kc`` points) raveled, checked."""
        u = np.asarray(c.cone.velocity_residual(t, q, v), dtype=float)
        if u.shape != (2 * kc,) or not np.all(np.isfinite(u)):
            raise ModelError(f"contact {c.name!r}: `slip_velocity` must return a finite "
                             f"({kc}, 2) array at t={t}, found {u.size} value(s)"
                             f"{'' if np.all(np.isfinite(u)) else ' with NaN or inf'}.")
        return u

    def slip_velocities(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The points' spatial slip velocities ``u_i``, shape (k, 2), without the
        derivatives of :meth:`cone_rows` (zero for the points without ``slip_velocity``
        and the frictionless ones): what a slide's watches read at every step."""
        out = np.zeros((self.k, 2))
        i = 0
        for c, kc in zip(self.contacts, self.sizes):
            if c.frictional and c.cone is not None:
                out[i:i + kc] = self._slip(c, kc, t, q, v).reshape(kc, 2)
            i += kc
        return out

    def cone_rows(self, t: float, q: np.ndarray, v: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(T, c, gam)`` of the points' spatial slip: the slip velocity ``u_i = T_i v +
        c_i`` and its rate ``u_i' = T_i a - gam_i``; shapes (k, 2, n), (k, 2), (k, 2) (zero
        for the points without ``slip_velocity`` and the frictionless ones)."""
        n = q.size
        T, c_, gam = np.zeros((self.k, 2, n)), np.zeros((self.k, 2)), np.zeros((self.k, 2))
        i = 0
        for c, kc in zip(self.contacts, self.sizes):
            if c.frictional and c.cone is not None:
                u = self._slip(c, kc, t, q, v)
                J = c.cone.jacobian(t, q, v)
                T[i:i + kc] = J.reshape(kc, 2, n)
                c_[i:i + kc] = (u - J @ v).reshape(kc, 2)
                gam[i:i + kc] = c.cone.gamma(t, q, v).reshape(kc, 2)
            i += kc
        return T, c_, gam

    def no_slip(self, i) -> Nonholonomic:
        """Point ``i``'s spatial slip velocity as a two-row :class:`~gaussopt.Nonholonomic`
        constraint ``u_i = 0``: a sticking (or rolling) point. ``i`` may also be a
        sequence of points of one contact: one constraint with their rows in that order
        (the contact's slip velocities evaluated once per complex-step point for all)."""
        pts = [int(i)] if np.ndim(i) == 0 else [int(j) for j in i]
        c = self._one_contact(pts)
        cone = c.cone
        rows = np.array([2 * int(self.row[j]) + e for j in pts for e in (0, 1)])
        values = self._memo(cone, cone.f)
        # the contact's own Jacobian in v, where it has one (else a complex step in v: n
        # evaluations of the slip velocity at every evaluation of the phase's rows); a
        # contact that evaluates some of its points alone (``subset``: a loaded model's
        # geometry) evaluates these
        sub = self._subset(c, [int(self.row[j]) for j in pts])
        if sub is not None:
            jac, gam = sub.slip_velocity_jacobian, sub.slip_velocity_gamma
        else:
            jac = (None if cone.automatic["jacobian"]
                   else (lambda t, q, v: cone.jacobian(t, q, v)[rows]))
            gam = (None if cone.automatic["gamma"]
                   else (lambda t, q, v: cone.gamma(t, q, v)[rows]))
        label = self.labels[pts[0]] if len(pts) == 1 else \
            f"{c.name}[{', '.join(self._point(self.owner[j], self.row[j]) for j in pts)}]"
        out = Nonholonomic(lambda t, q, v: values(t, q, v)[rows], jac, gam,
                           name=f"{label}.no_slip")
        out.contact_rows = (c, rows[::2] // 2, "slip")
        return out

    @staticmethod
    def _subset(c: "Contact", rows):
        """``c.subset(rows)`` where the contact has one (an object whose ``jacobian``,
        ``gamma``, ``slip_velocity_jacobian`` and ``slip_velocity_gamma`` are those of the
        rows ``rows`` alone, raveled as :attr:`Contact.cone`'s; None: it cannot), else
        None."""
        fn = getattr(c, "subset", None)
        return None if fn is None else fn(rows)

    def _one_contact(self, pts: Sequence[int]) -> "Contact":
        owners = {int(self.owner[j]) for j in pts}
        if len(owners) != 1:
            raise ModelError(f"internal: points {pts} of several contacts in one constraint")
        return self.contacts[owners.pop()]

    def _memo(self, src, fn: Callable) -> Callable:
        """``fn(t, q[, v])`` (``src``'s function) as a flat array, remembering its last
        :data:`_MEMO` inputs: the constraints of a contact's points (:meth:`holonomic`,
        :meth:`no_slip`) differentiate the same vector function at the same (complex-step)
        points, row after row, so each such point is evaluated once instead of once per
        row (20 points: 20 times fewer calls of the user's function). (One function per
        ``src``: its ``phi`` or its ``f``.)"""
        memos = self.__dict__.setdefault("_memos", {})
        got = memos.get(id(src))
        if got is not None:
            return got
        cache: dict = {}

        def values(t, *arrays):
            key = (t, *((a.dtype.char, a.tobytes()) for a in map(np.asarray, arrays)))
            out = cache.get(key)
            if out is None:
                if len(cache) >= _MEMO:
                    cache.clear()
                out = np.asarray(fn(t, *arrays)).reshape(-1)
                out.setflags(write=False)
                cache[key] = out
            return out
        memos[id(src)] = values
        return values

    def holonomic(self, i, tangent: bool = False) -> Holonomic:
        """Point ``i``'s gap (or slip) as a one-row :class:`~gaussopt.Holonomic`: the
        bilateral constraint of a closed contact. ``i`` may also be a sequence of points
        of one contact: one constraint with their rows in that order (its Jacobian and
        convective term then take one evaluation of the contact's vector function per
        complex step, not one per point)."""
        pts = [int(i)] if np.ndim(i) == 0 else [int(j) for j in i]
        c = self._one_contact(pts)
        src = c.tangent if tangent else c.normal
        rows = np.array([int(self.row[j]) for j in pts])
        idx = np.array(pts)
        label = self.labels[pts[0]] if len(pts) == 1 else \
            f"{c.name}[{', '.join(self._point(self.owner[j], self.row[j]) for j in pts)}]"
        name = f"{label}.{'slip' if tangent else 'gap'}"
        if np.array_equal(rows, np.arange(self.sizes[self.owner[pts[0]]])):
            # all the contact's rows in their order: its own functions, without the
            # selection and the memo (nothing else differentiates them at the same
            # points); a phase evaluates these at every right-hand side
            if tangent:
                anchor, fun = self.anchor, src.phi       # (the anchor as it is when called)
                phi = lambda t, q: fun(t, q) - anchor[idx]      # noqa: E731
            else:
                phi = src.phi
            out = Holonomic(phi, src._jac, src._gamma, rheonomic=src.rheonomic, name=name)
        else:
            out = self._selected(src, rows, idx, tangent, name,
                                 None if tangent else self._subset(c, rows))
        if not tangent:
            #: ``(contact, its rows, "gap" | "slip")``: what a compiled model evaluates
            #: in place of these functions (:func:`~gaussopt.multibody.tree.tree_compiled.
            #: phase_functions`)
            out.contact_rows = (c, rows, "gap")
        return out

    def _selected(self, src, rows: np.ndarray, idx: np.ndarray, tangent: bool,
                  name: str, sub=None) -> Holonomic:
        """:meth:`holonomic`'s constraint of some of a contact's rows (``src`` its gap or
        slip): its functions selected from the contact's, evaluated once per point, or
        (``sub``: :meth:`_subset`) the rows' own Jacobian and ``gamma``."""
        if sub is not None:
            jac, gam = sub.jacobian, sub.gamma
        else:
            jac = ((lambda t, q: src.jacobian(t, q)[rows]) if not src.automatic["jacobian"]
                   else None)
            gam = ((lambda t, q, v: src.gamma(t, q, v)[rows]) if not src.automatic["gamma"]
                   else None)
        values = self._memo(src, src.phi)
        if tangent:
            anchor = self.anchor

            def phi(t, q):
                return values(t, q)[rows] - anchor[idx]
        else:
            def phi(t, q):
                return values(t, q)[rows]
        return Holonomic(phi, jac, gam, rheonomic=src.rheonomic, name=name)
