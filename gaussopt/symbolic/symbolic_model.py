"""The symbolic model: a Lagrangian (or equations of motion) and constraints, derived
once, compiled once per piece, bound to any number of parameter sets as a System."""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import sympy as sp

from gaussopt.model.constraints import AccelerationConstraint, Holonomic, Nonholonomic
from gaussopt.core.exceptions import ModelError
from gaussopt.model.system import System
from gaussopt.symbolic._compile import _CN, _PN, _TN, MODULES, _Compiled, _compile, _printer
from gaussopt.symbolic._parse import (Exprs, _as_list, _Coordinates, _group, _group_if_smaller,
                                      _quadratic_parts, _simp, _uses)


# =========================================================================== the model
class SymbolicModel:
    """A mechanical system given by its Lagrangian and constraints in sympy.

    Derived once (:meth:`derive`), compiled once per piece, and turned into a
    :class:`~gaussopt.System` for any number of parameter sets (:meth:`system`).

    Parameters
    ----------
    q : sequence of sympy functions of t, or of Symbols, length n
        The generalized coordinates (possibly redundant).
    T : sympy expression
        Kinetic energy, at most quadratic in ``q'``; may depend on ``q`` and
        explicitly on ``t``. The mass matrix may be singular (a coordinate
        without inertia).
    V : sympy expression, default 0
        Potential ``V(q, t)``. A velocity-dependent (generalized) potential
        ``V(q, q', t)`` is accepted: the equations come from ``L = T - V``.
    forces : sequence of n expressions, or dict {coordinate: expression}, optional
        Non-potential generalized forces ``Q(q, q', t)`` (the coefficients of
        the virtual work ``delta W = sum_i Q_i delta q_i``).
    holonomic : expression or sequence of expressions
        ``Phi(q, t) = 0`` (an ``Eq(lhs, rhs)`` means ``lhs - rhs``).
    nonholonomic : expression or sequence of expressions
        ``f(q, q', t) = 0``, linear or nonlinear in ``q'``.
    acceleration : expression or sequence of expressions
        ``h(q, q', q'', t) = 0``, linear in ``q''`` (second-order constraints).
    t : Symbol, optional
        The time symbol; inferred from function coordinates, default
        ``Symbol("t")`` for symbol coordinates.
    coordinates : sequence of str, optional
        Names of the coordinates in the System; default the names in ``q``.
    name : str, optional
    velocities, accelerations : sequence of Symbols, optional
        For plain-symbol coordinates only: the symbols used for ``q'`` and
        ``q''`` (default ``<name>_dot``, ``<name>_ddot``).
    modules : {"math", "numpy", "scipy"}, default "math"
        Numeric back end of the compiled callables (see the module docstring).
    simplify : bool, default True
        Exact, cheap simplification before compiling. ``M``, ``b`` and ``L0``
        of ``L = 1/2 v^T M v + b.v + L0`` are read off the expanded Lagrangian
        (instead of differentiating it twice), their products of sines and
        cosines become sums (``sin^2 + cos^2 = 1``, ``cos a cos b + sin a sin b
        = cos(a - b)``) and ``L`` is rebuilt from them, so that ``g`` and ``F``
        stay compact; the terms of ``g``, ``F`` and the convective terms are
        expanded and collected by their state-dependent factor (Christoffel
        terms that cancel do cancel). On a 5-link pendulum chain in joint
        angles this makes ``F`` 3x and ``M`` 2x cheaper to evaluate and the
        compilation 4x faster, at about the same derivation time. ``False``
        differentiates ``L`` as given.

    Attributes
    ----------
    parameters : tuple of Symbol
        Free symbols other than ``t``, coordinates and their derivatives,
        sorted by name: :meth:`system` needs a value for each (after
        :meth:`derive`).
    expressions : dict of sympy objects
        The derived pieces (after :meth:`derive`), see :meth:`derive`.
    timings : dict
        ``"derive"`` (s) and ``"compile"`` (s, cumulative over pieces).
    q, v, a : tuples of Symbols; t : Symbol
        The internal symbols the derived expressions use (``_gq0``, ``_gv0``,
        ``_ga0``, ``_gt``); :meth:`to_user` maps an expression back to the
        user's coordinates.

    Notes
    -----
    The energy ``T + V`` attached to the System is a diagnostic: it is
    constant on the motion only when the non-potential forces do no work,
    ``V`` depends on ``q`` alone, ``T`` and the constraints are scleronomic,
    and the constraint forces do no work. Ideal constraint forces
    ``A^T lam`` have the power ``lam . (A v)``: zero for scleronomic holonomic
    rows (``Phi_q v = 0``) and for nonholonomic ``f(q, q') = 0`` homogeneous
    in ``q'`` (``f_v q' = k f = 0``: linear ``B(q) q' = 0``, Appell-Hamel), but
    not in general for acceleration constraints (``q' . q'' = 0`` keeps the
    speed, not ``T + V``).

    Examples
    --------
    One derivation, two parameter sets:

    >>> import sympy as sp
    >>> from gaussopt.symbolic import SymbolicModel
    >>> x = sp.Function("x")(sp.Symbol("t"))
    >>> k, m = sp.symbols("k m", positive=True)
    >>> osc = SymbolicModel([x], T=m / 2 * x.diff()**2, V=k / 2 * x**2).derive()
    >>> osc.parameters
    (k, m)
    >>> [float(osc.system({"k": k_, "m": 2.0}).force(0.0, [0.5], [0.0])[0]) for k_ in (3.0, 5.0)]
    [-1.5, -2.5]
    """

    def __init__(self, q: Any, T: Any, V: Any = 0, forces: Any = None,
                 holonomic: Exprs = (), nonholonomic: Exprs = (), acceleration: Exprs = (),
                 *, t: Optional[sp.Symbol] = None, coordinates: Optional[Sequence[str]] = None,
                 name: Optional[str] = None, velocities: Optional[Sequence] = None,
                 accelerations: Optional[Sequence] = None, modules: str = "math",
                 simplify: bool = True) -> None:
        self._init_common(q, t, coordinates, name, velocities, accelerations, modules,
                          holonomic, nonholonomic, acceleration)
        self.simplify = bool(simplify)
        c = self._c
        self._T = c.internal(T, "T")
        self._V = c.internal(V, "V")
        self._Q = self._parse_forces(forces)
        for label, e in (("T", self._T), ("V", self._V)):
            if _uses(e, c.a):
                raise ModelError(f"`{label}` must not depend on the accelerations q''; found "
                                 f"{c.external(e)}.")
        self._given = None  # (M, F, energy) for from-equations models

    # --------------------------------------------------------------- constructors
    def _init_common(self, q, t, coordinates, name, velocities, accelerations, modules,
                     holonomic, nonholonomic, acceleration) -> None:
        if modules not in MODULES:
            raise ModelError(f"`modules` must be one of {MODULES}, found {modules!r}.")
        self.modules = modules
        self._c = c = _Coordinates(q, t, velocities, accelerations, coordinates)
        self.n = c.n
        self.name = name or "symbolic"
        self.coordinates = c.names
        self.q, self.v, self.a, self.t = c.q, c.v, c.a, c.ts
        self._hol = [c.internal(e, f"holonomic[{i}]")
                     for i, e in enumerate(_as_list(holonomic, "holonomic"))]
        self._nh = [c.internal(e, f"nonholonomic[{i}]")
                    for i, e in enumerate(_as_list(nonholonomic, "nonholonomic"))]
        self._acc = [c.internal(e, f"acceleration[{i}]")
                     for i, e in enumerate(_as_list(acceleration, "acceleration"))]
        for i, e in enumerate(self._hol):
            if _uses(e, c.v + c.a):
                raise ModelError(f"`holonomic[{i}]` must depend on (q, t) only, found velocities "
                                 f"or accelerations in {c.external(e)}; give it as `nonholonomic`.")
        for i, e in enumerate(self._nh):
            if _uses(e, c.a):
                raise ModelError(f"`nonholonomic[{i}]` must depend on (q, q', t) only, found "
                                 f"accelerations in {c.external(e)}; give it as `acceleration`.")
        self.expressions: dict[str, Any] = {}
        self.timings: dict[str, float] = {"derive": 0.0, "compile": 0.0}
        self._compiled: dict[str, _Compiled] = {}
        self._derived = False

    @classmethod
    def from_equations(cls, q: Any, mass: Any, force: Any, holonomic: Exprs = (),
                       nonholonomic: Exprs = (), acceleration: Exprs = (), *,
                       energy: Any = None, t: Optional[sp.Symbol] = None,
                       coordinates: Optional[Sequence[str]] = None, name: Optional[str] = None,
                       velocities: Optional[Sequence] = None,
                       accelerations: Optional[Sequence] = None,
                       modules: str = "math", simplify: bool = True) -> "SymbolicModel":
        """A model from equations of motion ``mass q'' = force`` instead of a Lagrangian.

        Parameters
        ----------
        mass : sympy Matrix, shape (n, n)
            ``M(q, t)``, symmetric positive semi-definite.
        force : sympy Matrix or sequence, length n
            ``F(q, q', t) = Q - g``, everything but ``M q''``.
        energy : sympy expression, optional
            For diagnostics.
        Other parameters as in :class:`SymbolicModel`.
        """
        self = cls.__new__(cls)
        self._init_common(q, t, coordinates, name, velocities, accelerations, modules,
                          holonomic, nonholonomic, acceleration)
        c, n = self._c, self.n
        Mm = sp.Matrix(mass) if not isinstance(mass, sp.MatrixBase) else mass
        if Mm.shape != (n, n):
            raise ModelError(f"`mass` must have shape ({n}, {n}), found {Mm.shape}.")
        Fl = _as_list(force, "force")
        if len(Fl) != n:
            raise ModelError(f"`force` must have {n} entries, found {len(Fl)}.")
        M = sp.Matrix(n, n, lambda i, j: c.internal(Mm[i, j], f"mass[{i}, {j}]"))
        F = sp.Matrix([c.internal(f, f"force[{i}]") for i, f in enumerate(Fl)])
        if _uses(M, c.v + c.a):
            raise ModelError("`mass` must depend on (q, t) only; found velocities or accelerations.")
        if _uses(F, c.a):
            raise ModelError("`force` must not depend on the accelerations q''.")
        for i in range(n):
            for j in range(i + 1, n):
                d = M[i, j] - M[j, i]
                if d != 0 and sp.simplify(d) != 0:
                    raise ModelError(f"`mass` must be symmetric; mass[{i}, {j}] - mass[{j}, {i}] "
                                     f"= {sp.simplify(d)}.")
                M[j, i] = M[i, j]  # exactly symmetric numerically
        E = None if energy is None else c.internal(energy, "energy")
        self.simplify = bool(simplify)
        if self.simplify:
            M = M.applyfunc(lambda e: _simp(e, c.state))
        self._T = self._V = None
        self._Q = None
        self._given = (M, F, E)
        return self

    def to_user(self, e: Any) -> Any:
        """An expression in the internal symbols (:attr:`expressions`) written in
        the user's coordinates, velocities and time (parameters are unchanged)."""
        return self._c.external(sp.sympify(e))

    def _parse_forces(self, forces: Any) -> sp.Matrix:
        c, n = self._c, self.n
        if forces is None:
            return sp.zeros(n, 1)
        if isinstance(forces, Mapping):
            Q = [sp.Integer(0)] * n
            for key, val in forces.items():
                k = sp.sympify(key)
                if k not in c.user_q:
                    raise ModelError(f"`forces` keys must be coordinates from `q` {list(c.user_q)}, "
                                     f"found {key!r}.")
                Q[c.user_q.index(k)] = val
        else:
            Q = _as_list(forces, "forces")
            if len(Q) != n:
                raise ModelError(f"`forces` must have one generalized force per coordinate "
                                 f"({n}), found {len(Q)}.")
        out = sp.Matrix([c.internal(f, f"forces[{i}]") for i, f in enumerate(Q)])
        if _uses(out, c.a):
            raise ModelError("`forces` must not depend on the accelerations q''.")
        return out

    # --------------------------------------------------------------- derivation
    def _D(self, e: sp.MatrixBase) -> sp.MatrixBase:
        """Total time derivative at ``q'' = 0``: ``e_q v + e_t`` (e free of a)."""
        c = self._c
        v = sp.Matrix(c.v)
        return e.jacobian(sp.Matrix(c.q)) * v + e.diff(c.ts)

    def derive(self) -> "SymbolicModel":
        """Derive every piece exactly (once; later calls return at once).

        Fills :attr:`expressions` (sympy, in the internal symbols
        :attr:`q`, :attr:`v`, :attr:`a`, :attr:`t`): ``M``, ``F``, ``energy``
        and, for Lagrangian models, ``g`` and ``Q``; ``phi``, ``phi_q``,
        ``phi_t``, ``phi_gamma`` (holonomic); ``f``, ``f_v``, ``f_gamma``
        (nonholonomic); ``acc_A``, ``acc_b`` (acceleration).

        Returns
        -------
        self

        Raises
        ------
        ModelError
            ``T`` not quadratic in the velocities, an acceleration constraint
            not linear in ``q''``.
        """
        if self._derived:
            return self
        t0 = time.perf_counter()
        c, n = self._c, self.n
        qv, vv, av = sp.Matrix(c.q), sp.Matrix(c.v), sp.Matrix(c.a)
        ex = self.expressions
        if self._given is None:
            Lq = self._T - self._V
            parts = _quadratic_parts(Lq, c.v) if self.simplify else None
            if parts is not None:
                # L = 1/2 v^T M v + b.v + L0 read off the expanded Lagrangian (much faster
                # than differentiating a nested T twice), simplified, and L rebuilt from
                # them so that the Christoffel terms derived from it stay compact
                st = c.state
                M, b, L0 = parts
                M = M.applyfunc(lambda e: _simp(e, st))
                b = b.applyfunc(lambda e: _simp(e, st))
                Lq = (vv.T * M * vv)[0, 0] / 2 + (b.T * vv)[0, 0] + _simp(L0, st)
                L = sp.Matrix([Lq])
                p = L.jacobian(vv).T
            else:
                L = sp.Matrix([Lq])
                p = L.jacobian(vv).T  # dL/dq', (n, 1)
                M = sp.zeros(n, n)
                for i in range(n):
                    for j in range(i, n):
                        M[i, j] = M[j, i] = sp.diff(p[i], c.v[j])
                if _uses(M, c.v):
                    raise ModelError("`T` (and `V`) must be at most quadratic in the velocities "
                                     "q': the Hessian of T - V in q' (the mass matrix) depends "
                                     "on q'.")
            Tm = sp.Matrix([Lq + self._V])  # = T
            pT = Tm.jacobian(vv).T
            ex["g"] = self._D(pT) - Tm.jacobian(qv).T
            ex["Q"] = self._Q
            ex["M"] = M
            ex["F"] = self._Q - self._D(p) + L.jacobian(qv).T
            ex["energy"] = self._T + self._V
            if self.simplify:
                st = c.state
                ex["g"] = ex["g"].applyfunc(lambda e: _group(e, st))
                ex["F"] = ex["F"].applyfunc(lambda e: _group(e, st))
        else:
            M, F, E = self._given
            ex["M"], ex["F"] = M, F
            ex["energy"] = E
        tidy = (lambda e: _group_if_smaller(e, c.state)) if self.simplify else (lambda e: e)
        if self._hol:
            phi = sp.Matrix(self._hol)
            J = phi.jacobian(qv)
            pt = phi.diff(c.ts)
            w = J * vv + pt
            ex.update(phi=phi, phi_q=J, phi_t=pt, phi_gamma=(-self._D(w)).applyfunc(tidy))
        if self._nh:
            f = sp.Matrix(self._nh)
            ex.update(f=f, f_v=f.jacobian(vv), f_gamma=(-self._D(f)).applyfunc(tidy))
        if self._acc:
            h = sp.Matrix(self._acc)
            A = h.jacobian(av)
            if _uses(A, c.a):
                bad = [i for i in range(h.rows) if _uses(A[i, :], c.a)]
                raise ModelError(f"`acceleration[{bad[0]}]` must be linear in the accelerations "
                                 f"q'', found {c.external(h[bad[0]])}.")
            ex.update(acc_A=A, acc_b=-h.xreplace({a: 0 for a in c.a}))
        syms: set = set()
        for val in ex.values():
            if val is not None:
                syms |= sp.sympify(val).free_symbols
        self._parameters = tuple(sorted(syms - c.state, key=lambda s: s.name))
        self._pmap = {s: sp.Symbol(f"{_PN}{i}") for i, s in enumerate(self._parameters)}
        self.timings["derive"] = time.perf_counter() - t0
        self._derived = True
        return self

    @property
    def parameters(self) -> tuple:
        """The free symbols other than ``t``, the coordinates and their
        derivatives, sorted by name (derives the model if needed)."""
        self.derive()
        return self._parameters

    # --------------------------------------------------------------- compilation
    _PIECES = {
        # name: (args, outputs as (kind, expression key))
        "mass": ("tq", (("mat", "M"),)),
        "force": ("tqv", (("vec", "F"),)),
        "inertia": ("tqv", (("vec", "g"),)),
        "energy": ("tqv", (("scalar", "energy"),)),
        "phi": ("tq", (("vec", "phi"),)),
        "phi_q": ("tq", (("mat", "phi_q"),)),
        "phi_t": ("tq", (("vec", "phi_t"),)),
        "phi_gamma": ("tqv", (("vec", "phi_gamma"),)),
        "phi_rows": ("tqv", (("mat", "phi_q"), ("vec", "phi_gamma"))),
        "f": ("tqv", (("vec", "f"),)),
        "f_v": ("tqv", (("mat", "f_v"),)),
        "f_gamma": ("tqv", (("vec", "f_gamma"),)),
        "f_rows": ("tqv", (("mat", "f_v"), ("vec", "f_gamma"))),
        "acc_A": ("tqv", (("mat", "acc_A"),)),
        "acc_b": ("tqv", (("vec", "acc_b"),)),
        "acc_rows": ("tqv", (("mat", "acc_A"), ("vec", "acc_b"))),
    }

    @property
    def pieces(self) -> tuple[str, ...]:
        """Names of the pieces this model has (for :meth:`function`)."""
        self.derive()
        return tuple(k for k, (_, outs) in self._PIECES.items()
                     if all(self.expressions.get(key) is not None for _, key in outs))

    def _compiled_piece(self, piece: str) -> _Compiled:
        if piece in self._compiled:
            return self._compiled[piece]
        self.derive()
        if piece not in self._PIECES:
            raise ModelError(f"`piece` must be one of {list(self._PIECES)}, found {piece!r}.")
        args, outs = self._PIECES[piece]
        if piece not in self.pieces:
            raise ModelError(f"model {self.name!r} has no piece {piece!r}; it has {list(self.pieces)}.")
        t0 = time.perf_counter()
        outputs = []
        for kind, key in outs:
            e = self.expressions[key]
            e = e.xreplace(self._pmap) if kind == "scalar" else sp.Matrix(e).xreplace(self._pmap)
            outputs.append((kind, e))
        comp = _compile(piece, outputs, self.n, args, self.modules, self.name)
        self.timings["compile"] += time.perf_counter() - t0
        self._compiled[piece] = comp
        return comp

    def compile(self, pieces: Optional[Sequence[str]] = None) -> "SymbolicModel":
        """Compile the given pieces (default: all the model has) now rather than on first use."""
        for p in (self.pieces if pieces is None else pieces):
            self._compiled_piece(p)
        return self

    def source(self, piece: str) -> str:
        """The generated Python source of one compiled piece."""
        return self._compiled_piece(piece).source

    def _values(self, params: Optional[Mapping]) -> dict[str, float]:
        """Validate a parameter set; return {internal name: float}."""
        self.derive()
        params = {} if params is None else params
        if not isinstance(params, Mapping):
            raise ModelError(f"`params` must be a dict {{Symbol or name: value}}, found "
                             f"{type(params).__name__}.")
        for k in params:
            if not isinstance(k, (sp.Symbol, str)):
                raise ModelError(f"`params` keys must be sympy Symbols or their names, found "
                                 f"{k!r} ({type(k).__name__}).")
        by_name = {(k if isinstance(k, str) else k.name): k for k in params}
        out, missing = {}, []
        for s in self.parameters:
            # the symbol itself, else its name (a str key, or a Symbol of that name with
            # other assumptions)
            key = s if s in params else by_name.get(s.name)
            if key is None:
                missing.append(s.name)
                continue
            val = params[key]
            try:
                x = float(val)
            except (TypeError, ValueError):
                raise ModelError(f"`params[{s.name}]` must be a real number, found {val!r}.") from None
            if not math.isfinite(x):
                raise ModelError(f"`params[{s.name}]` must be finite, found {x}.")
            out[self._pmap[s].name] = x
        if missing:
            hint = ""
            if self._c.kind == "symbol":
                hint = (" (velocities and accelerations of plain-symbol coordinates are the "
                        f"symbols {[str(v) for v in self._c.user_v]} and "
                        f"{[str(a) for a in self._c.user_a]})")
            raise ModelError(f"unbound symbols in model {self.name!r}: {', '.join(missing)}; "
                             f"give their values in `params`{hint}.")
        return out

    def function(self, piece: str, params: Optional[Mapping] = None) -> Callable:
        """One compiled piece with a parameter set bound.

        Parameters
        ----------
        piece : str
            ``"mass"`` ``(t, q) -> (n, n)``; ``"force"`` ``(t, q, v) -> (n,)``
            (``F = Q - dV/dq - g``); ``"inertia"`` ``(t, q, v) -> (n,)`` (``g``);
            ``"energy"`` ``(t, q, v) -> float``; ``"phi"``, ``"phi_t"``
            ``(t, q) -> (k,)``; ``"phi_q"`` ``(t, q) -> (k, n)``;
            ``"phi_gamma"`` ``(t, q, v) -> (k,)``; ``"phi_rows"``
            ``(t, q, v) -> ((k, n), (k,))``; ``"f"``, ``"f_gamma"``
            ``(t, q, v) -> (k,)``; ``"f_v"`` ``(t, q, v) -> (k, n)``;
            ``"f_rows"``; ``"acc_A"``, ``"acc_b"``, ``"acc_rows"`` likewise.
            See :attr:`pieces`.
        params : dict, optional
            ``{Symbol or name: value}`` for every symbol in :attr:`parameters`.

        Returns
        -------
        callable
        """
        return self._compiled_piece(piece).bind(self._values(params))

    # --------------------------------------------------------------- System
    def system(self, params: Optional[Mapping] = None, *, name: Optional[str] = None) -> System:
        """Bind a parameter set and build the :class:`~gaussopt.System`.

        Parameters
        ----------
        params : dict, optional
            ``{Symbol or name: value}`` for every symbol in :attr:`parameters`.
        name : str, optional
            Name of the System (default the model's).

        Returns
        -------
        System
            Constant mass matrices and forces are passed as arrays. The
            holonomic, nonholonomic and acceleration constraints become one
            constraint object each (``"holonomic"``, ``"nonholonomic"``,
            ``"acceleration"``) with exact Jacobians and convective terms.

        Raises
        ------
        ModelError
            Unbound parameters (all listed), non-numeric values.
        """
        vals = self._values(params)
        has = self.pieces

        def bound(piece):
            return self._compiled_piece(piece).bind(vals)

        def const_or_fn(piece):
            comp = self._compiled_piece(piece)
            fn = comp.bind(vals)
            return _constant_value(comp, fn, self.n) if not comp.depends else fn

        mass = const_or_fn("mass")
        force = const_or_fn("force")
        cons = []
        if "phi" in has:
            rheo = _uses(self.expressions["phi"], [self.t])
            cons.append(_SymbolicHolonomic(
                bound("phi"), _constant_tq(self, "phi_q", vals), bound("phi_gamma"),
                _constant_tqv(self, "phi_rows", vals), phi_t=bound("phi_t") if rheo else None,
                rheonomic=rheo, name="holonomic"))
        if "f" in has:
            cons.append(_SymbolicNonholonomic(bound("f"), _constant_tqv(self, "f_v", vals),
                                              bound("f_gamma"), _constant_tqv(self, "f_rows", vals),
                                              name="nonholonomic"))
        if "acc_A" in has:
            cons.append(_SymbolicAcceleration(_constant_tqv(self, "acc_A", vals),
                                              _constant_tqv(self, "acc_b", vals),
                                              _constant_tqv(self, "acc_rows", vals),
                                              name="acceleration"))
        energy = bound("energy") if "energy" in has else None
        system = System(self.coordinates, mass=mass, force=force, constraints=cons, energy=energy,
                        name=name or self.name)
        module = self._numba_module()
        if module is not None:
            p = np.array([vals[self._pmap[sym].name] for sym in self.parameters], dtype=float)
            system.compiled = _compiled_factory(module, p, self, system)
        # a pickle of the system stores this model (its derived expressions; the
        # generated code is not pickled but generated again) and the parameter values
        system.rebuilt_by(self.system, {sym: vals[self._pmap[sym].name] for sym in self.parameters},
                          name=name)
        return system

    # --------------------------------------------------------------- compiled engine
    def _numba_module(self):
        """The model's five functions compiled with numba (:mod:`gaussopt.core.codegen`),
        generated once per model; ``None`` if numba cannot compile them (the model then
        runs through its Python functions)."""
        if getattr(self, "_numba", False) is not False:
            return self._numba
        import gaussopt.core.codegen as codegen

        self.derive()
        t0 = time.perf_counter()
        ex = self.expressions
        c, n = self._c, self.n
        vv = sp.Matrix(c.v)
        empty = sp.zeros(0, n)
        hol = ex.get("phi") is not None
        nh = ex.get("f") is not None
        acc = ex.get("acc_A") is not None
        Jh = ex["phi_q"] if hol else empty
        Jn = ex["f_v"] if nh else empty
        Ja = ex["acc_A"] if acc else empty
        A = Jh.col_join(Jn).col_join(Ja)
        gh = ex["phi_gamma"] if hol else sp.zeros(0, 1)
        gn = ex["f_gamma"] if nh else sp.zeros(0, 1)
        ga = ex["acc_b"] if acc else sp.zeros(0, 1)
        b = gh.col_join(gn).col_join(ga)
        r = (Jh * vv + ex["phi_t"] if hol else sp.zeros(0, 1)).col_join(
            ex["f"] if nh else sp.zeros(0, 1))
        energy = ex.get("energy")
        pieces = {
            "dyn": [("M", list(sp.Matrix(ex["M"]))), ("F", list(sp.Matrix(ex["F"])))],
            "rows": [("A", list(A)), ("b", list(b))],
            "pos": [("phi", list(ex["phi"]) if hol else []), ("J", list(Jh)),
                    ("phit", list(ex["phi_t"]) if hol else [])],
            "vel": [("r", list(r)), ("Jv", list(Jh.col_join(Jn)))],
            "energy": [("e", [energy] if energy is not None else [])],
        }
        sizes = {"n": n, "m": A.rows, "mh": Jh.rows, "mv": Jh.rows + Jn.rows,
                 "np": len(self.parameters)}
        printer = _printer("math")
        state = {sp.Symbol(_TN)} | set(self.q) | set(self.v)
        bodies = {}
        try:
            for name, outs in pieces.items():
                flat = [sp.sympify(e).xreplace(self._pmap) for _, es in outs for e in es]
                reps, reduced = sp.cse(flat, symbols=sp.numbered_symbols(_CN))
                used = set()
                for e in [e for _, e in reps] + list(reduced):
                    used |= e.free_symbols
                lines = []
                for i, sym in enumerate(self.q):
                    if sym in used:
                        lines.append(f"    {sym} = q[{i}]")
                for i, sym in enumerate(self.v):
                    if sym in used:
                        lines.append(f"    {sym} = v[{i}]")
                for i in range(len(self.parameters)):
                    if sp.Symbol(f"{_PN}{i}") in used:
                        lines.append(f"    {_PN}{i} = p[{i}]")
                for sym, e in reps:
                    lines.append(f"    {sym} = {printer.doprint(e)}")
                k = 0
                for arr, es in outs:
                    for j in range(len(es)):
                        lines.append(f"    {arr}[{j}] = {printer.doprint(reduced[k])}")
                        k += 1
                bodies[name] = lines
        except Exception:  # noqa: BLE001 - a function the math printer cannot print
            self._numba = None
            return None
        self._numba = codegen.load_module(codegen.module_source(bodies, sizes), self.name)
        self.timings["numba"] = time.perf_counter() - t0
        self._numba_sizes = sizes
        return self._numba

    def __getstate__(self) -> dict:
        """Pickle the derived expressions, not the generated code (functions, the numba
        module): unpickling generates it again from the expressions (no new derivation;
        the numba module is found in the cache of :mod:`gaussopt.core.codegen`)."""
        state = dict(self.__dict__)
        state["_compiled"] = {}
        state.pop("_numba", None)
        return state

    def __repr__(self) -> str:
        return (f"SymbolicModel({self.name!r}, coordinates={self.coordinates}, "
                f"holonomic={len(self._hol)}, nonholonomic={len(self._nh)}, "
                f"acceleration={len(self._acc)})")


def _compiled_factory(module, p: np.ndarray, model: "SymbolicModel", system: System):
    """A factory of the engine's :class:`~gaussopt.core.model_interface.ModelFunctions` for ``system``
    (fresh buffers per run)."""
    import gaussopt.core.codegen as codegen
    from gaussopt.core.model_interface import ModelFunctions, NotCompiled, make_buffers
    from gaussopt.model.model_functions import row_layout

    fns = tuple(getattr(module, name) for name in ("dyn", "rows", "pos", "vel", "energy"))
    sizes = model._numba_sizes

    def factory():
        if not codegen.compile_functions(module):
            raise NotCompiled(f"numba could not compile the functions of {model.name!r}")
        hol_rows, vel_rows, vel_is_hol = row_layout(system)
        return ModelFunctions(
            fns=fns, accel=_noop(), p=p, n=sizes["n"], m=sizes["m"], mh=sizes["mh"],
            mv=sizes["mv"], hol_rows=hol_rows, vel_rows=vel_rows, vel_is_hol=vel_is_hol,
            has_energy=system.has_energy, constant_mass=system.constant_mass is not None,
            compiled=True, buffers=make_buffers(sizes["n"], sizes["m"], sizes["mh"], sizes["mv"]))

    factory.functions = fns          # (compiled with the rest of a run: gaussopt.core.compiled)
    return factory


def _noop():
    from gaussopt.core.model_interface import NOOP

    return NOOP


def _readonly(x):
    if isinstance(x, tuple):
        return tuple(_readonly(y) for y in x)
    x = np.array(x, dtype=float)
    x.setflags(write=False)
    return x


def _constant_value(comp: _Compiled, fn: Callable, n: int):
    """Evaluate a piece that does not depend on (t, q, v), once; read-only arrays."""
    z = np.zeros(n)
    try:
        val = fn(0.0, z, z) if comp.args == "tqv" else fn(0.0, z)
    except (ValueError, ArithmeticError, TypeError) as e:
        raise ModelError(f"the parameter values make {comp.name} undefined "
                         f"({type(e).__name__}: {e}); check `params`.") from e
    return _readonly(val)


def _constant_tq(model: SymbolicModel, piece: str, vals: dict) -> Callable:
    """The bound piece, or a function returning its constant (read-only) value."""
    comp = model._compiled_piece(piece)
    fn = comp.bind(vals)
    if comp.depends:
        return fn
    val = _constant_value(comp, fn, model.n)
    return lambda t, q: val


def _constant_tqv(model: SymbolicModel, piece: str, vals: dict) -> Callable:
    comp = model._compiled_piece(piece)
    fn = comp.bind(vals)
    if comp.depends:
        return fn
    val = _constant_value(comp, fn, model.n)
    return lambda t, q, v: val


class _CompiledRows:
    """Mixin: ``rows`` evaluates the Jacobian and ``gamma`` in one compiled call
    (shared subexpressions); the other methods use the separate callables."""

    generated_by = "gaussopt.symbolic (from_lagrangian / from_mechanics)"

    def __init__(self, fun, jacobian, gamma, rows, **kw) -> None:
        super().__init__(fun, jacobian, gamma, **kw)
        self._rows = rows

    def rows(self, t, q, v):
        return self._rows(t, q, v)


class _SymbolicHolonomic(_CompiledRows, Holonomic):
    """Holonomic constraints with exact, compiled ``Phi_q`` and ``gamma``."""


class _SymbolicNonholonomic(_CompiledRows, Nonholonomic):
    """Nonholonomic constraints with exact, compiled ``f_v`` and ``gamma``."""


class _SymbolicAcceleration(AccelerationConstraint):
    """Acceleration constraints ``A a = b`` derived from ``h(q, q', q'', t) = 0``."""

    generated_by = _CompiledRows.generated_by

    def __init__(self, A, b, rows, **kw) -> None:
        super().__init__(A, b, **kw)
        self._rows = rows

    def rows(self, t, q, v):
        return self._rows(t, q, v)


# =========================================================================== wrappers
def from_lagrangian(q: Any, T: Any, V: Any = 0, forces: Any = None, holonomic: Exprs = (),
                    nonholonomic: Exprs = (), acceleration: Exprs = (),
                    params: Optional[Mapping] = None, t: Optional[sp.Symbol] = None,
                    coordinates: Optional[Sequence[str]] = None, name: Optional[str] = None,
                    *, velocities: Optional[Sequence] = None,
                    accelerations: Optional[Sequence] = None, modules: str = "math",
                    simplify: bool = True) -> System:
    """Build a :class:`~gaussopt.System` from a Lagrangian and constraints.

    A thin wrapper: ``SymbolicModel(q, T, V, ...).system(params)``. To build
    many parameter sets from one derivation use :class:`SymbolicModel`.

    Parameters
    ----------
    q : sequence of sympy functions of t (``dynamicsymbols``) or Symbols, length n
    T : sympy expression
        Kinetic energy, quadratic in ``q'`` (the mass matrix may be singular).
    V : sympy expression, default 0
        Potential energy.
    forces : sequence of n expressions or dict {coordinate: expression}, optional
        Generalized non-potential forces ``Q`` (virtual work ``sum Q_i delta q_i``).
    holonomic, nonholonomic, acceleration : expression or sequence of expressions
        ``Phi(q, t) = 0``; ``f(q, q', t) = 0``; ``h(q, q', q'', t) = 0`` linear in ``q''``.
    params : dict, optional
        ``{Symbol or name: value}`` for every other free symbol.
    t : Symbol, optional
    coordinates : sequence of str, optional
    name : str, optional
    velocities, accelerations : sequence of Symbols, optional
        For plain-symbol coordinates (default ``<name>_dot``, ``<name>_ddot``).
    modules : {"math", "numpy", "scipy"}, default "math"
    simplify : bool, default True
        See :class:`SymbolicModel`.

    Returns
    -------
    System

    Raises
    ------
    ModelError
        A coordinate that is neither a function of t nor a Symbol; unknown
        functions of t; unbound parameters; ``T`` not quadratic in ``q'``;
        an acceleration constraint not linear in ``q''``.

    Examples
    --------
    Paper 001's four-bar (singular mass matrix: no ``th3'`` in ``T``):

    >>> import sympy as sp, numpy as np
    >>> from sympy.physics.mechanics import dynamicsymbols
    >>> from gaussopt.symbolic import from_lagrangian
    >>> th1, th2, th3 = q = dynamicsymbols("th1 th2 th3")
    >>> m, l, g, psi = sp.symbols("m l g psi")
    >>> t = dynamicsymbols._t
    >>> T = (4 * m * l**2 / 3 * th1.diff(t)**2 + m * l**2 / 3 * th2.diff(t)**2) / 2
    >>> V = m * g * l * (sp.Rational(3, 2) * sp.sin(th1) + sp.sin(th2) / 2)
    >>> fb = from_lagrangian(q, T, V, forces=[psi, 0, 0],
    ...                      holonomic=[l * sp.sin(th1) - l * sp.sin(th2), th1 + th3 - sp.pi],
    ...                      params={m: 12, l: 2, g: 9.8, psi: 450})
    >>> fb.constant_mass
    array([[64.,  0.,  0.],
           [ 0., 16.,  0.],
           [ 0.,  0.,  0.]])
    """
    model = SymbolicModel(q, T, V, forces, holonomic, nonholonomic, acceleration, t=t,
                          coordinates=coordinates, name=name, velocities=velocities,
                          accelerations=accelerations, modules=modules, simplify=simplify)
    return model.system(params)
