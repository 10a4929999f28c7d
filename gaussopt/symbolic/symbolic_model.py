"""The symbolic model: a Lagrangian (or equations of motion) and constraints, derived
once, compiled once per piece, bound to any number of parameter sets as a System."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import sympy as sp

from gaussopt.model.constraints import AccelerationConstraint, Holonomic, Nonholonomic
from gaussopt.core.exceptions import ModelError
from gaussopt.model.system import System
from sympy.core.function import AppliedUndef, UndefinedFunction

from gaussopt.symbolic._compile import (_CN, _PN, _SN, _TN, MODULES, _Compiled, _compile,
                                        _printer)
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
        sorted by name: :meth:`system` needs a value for each that ``M``,
        ``F`` or the constraints use (after :meth:`derive`).
    energy_only_parameters : tuple of Symbol
        The parameters only the energy uses (no value needed).
    inputs : tuple
        The specified inputs (functions of ``t`` that are not coordinates, and
        the time derivatives of them the derivation needs): the keys of
        ``specified`` in :meth:`system`.
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
        self._find_symbols()
        self.timings["derive"] = time.perf_counter() - t0
        self._derived = True
        return self

    def _find_symbols(self) -> None:
        """The parameters, the slots of specified inputs (an input function or one of its
        time derivatives, as the symbol ``_gs<k>_<d>`` of the generated code), and which
        of them each derived piece uses."""
        c, ex = self._c, self.expressions
        slots: dict = {}   # internal expression -> (k, d)
        uses: dict = {}    # key -> (parameters, slot expressions)
        state = set(c.state)
        for key, val in ex.items():
            if val is None:
                continue
            e = sp.sympify(val)
            ds = {d for d in e.atoms(sp.Derivative) if d.expr in c.internal_inputs}
            found = {d: (c.internal_inputs.index(d.expr), d.derivative_count) for d in ds}
            rest = e.xreplace(dict.fromkeys(ds, sp.Integer(0)))
            found.update({f: (c.internal_inputs.index(f), 0) for f in rest.atoms(AppliedUndef)
                          if f in c.internal_inputs})
            slots.update(found)
            uses[key] = (e.free_symbols - state, set(found))
        syms = set().union(*(u[0] for u in uses.values())) if uses else set()
        self._parameters = tuple(sorted(syms, key=lambda s: s.name))
        self._pmap = {s: sp.Symbol(f"{_PN}{i}") for i, s in enumerate(self._parameters)}
        order = sorted(slots, key=lambda x: (str(c.inputs[slots[x][0]]), slots[x][1]))
        self._slots = [(slots[x][0], slots[x][1], x, sp.Symbol(f"{_SN}{slots[x][0]}_{slots[x][1]}"))
                       for x in order]
        self._smap = {x: sym for _, _, x, sym in self._slots}
        self._uses = uses

    @property
    def parameters(self) -> tuple:
        """The free symbols other than ``t``, the coordinates and their
        derivatives, sorted by name (derives the model if needed)."""
        self.derive()
        return self._parameters

    @property
    def energy_only_parameters(self) -> tuple:
        """The :attr:`parameters` that only the energy uses (not ``M``, ``F`` nor the
        constraints: a constant that only shifts the potential): :meth:`system` needs
        no value for them (see there)."""
        self.derive()
        used = set().union(*(p for k, (p, _) in self._uses.items() if k != "energy"))
        return tuple(s for s in self._parameters if s not in used)

    @property
    def inputs(self) -> tuple:
        """The specified inputs the derived pieces use: functions of ``t`` that are not
        coordinates (``F(t)``, dynamicsymbols) and the time derivatives of them that the
        derivation needs, in the user's symbols; each is a key of ``specified`` in
        :meth:`system`."""
        self.derive()
        return tuple(self._user_input(k, d) for k, d, _, _ in self._slots)

    def _user_input(self, k: int, d: int):
        f = self._c.inputs[k]
        return f.diff(self._c.t, d) if d else f

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
            e = sp.sympify(e) if kind == "scalar" else sp.Matrix(e)
            outputs.append((kind, e.xreplace(self._smap).xreplace(self._pmap)))
        comp = _compile(piece, outputs, self.n, args, self.modules, self.name,
                        inputs=[sym.name for *_, sym in self._slots])
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
        """Validate a parameter set for every piece; return {internal name: float}."""
        return self._bind(params, None, None).values

    def _bind(self, params: Optional[Mapping], specified: Optional[Mapping],
              keys: Optional[set]) -> "_Binding":
        """Validate a parameter set and the specified inputs for the pieces ``keys`` (of
        :attr:`expressions`; None: all). Symbols and inputs that only the energy uses
        may be missing when the energy is not among ``keys``. Every problem is listed in
        one ModelError."""
        self.derive()
        params = {} if params is None else params
        if not isinstance(params, Mapping):
            raise ModelError(f"`params` must be a dict {{Symbol or name: value}}, found "
                             f"{type(params).__name__}.")
        for k in params:
            if not isinstance(k, (sp.Symbol, str)):
                raise ModelError(f"`params` keys must be sympy Symbols or their names, found "
                                 f"{k!r} ({type(k).__name__}).")
        keys = set(self._uses) if keys is None else set(keys) & set(self._uses)
        need_p = set().union(*(self._uses[k][0] for k in keys)) if keys else set()
        need_s = set().union(*(self._uses[k][1] for k in keys)) if keys else set()
        by_name = {(k if isinstance(k, str) else k.name): k for k in params}
        out, missing, optional = {}, [], []
        for s in self.parameters:
            # the symbol itself, else its name (a str key, or a Symbol of that name with
            # other assumptions)
            key = s if s in params else by_name.get(s.name)
            if key is None:
                (missing if s in need_p else optional).append(s)
                continue
            val = params[key]
            try:
                x = float(val)
            except (TypeError, ValueError):
                raise ModelError(f"`params[{s.name}]` must be a real number, found {val!r}.") from None
            if not math.isfinite(x):
                raise ModelError(f"`params[{s.name}]` must be finite, found {x}.")
            out[self._pmap[s].name] = x
        calls, given = self._specified(specified, out)
        unspecified = [(k, d, x, sym) for k, d, x, sym in self._slots if sym.name not in given]
        missing_in = [u for u in unspecified if u[2] in need_s]
        problems = []
        if missing:
            hint = ""
            if self._c.kind == "symbol":
                hint = (" (velocities and accelerations of plain-symbol coordinates are the "
                        f"symbols {[str(v) for v in self._c.user_v]} and "
                        f"{[str(a) for a in self._c.user_a]})")
            problems.append(f"unbound symbols in model {self.name!r}: "
                            f"{', '.join(s.name for s in missing)}; give their values in "
                            f"`params`{hint}.")
        if missing_in:
            shown = ", ".join(str(self._user_input(k, d)) for k, d, _, _ in missing_in)
            code = ", ".join(f"{self._input_key_code(k, d)}: ..." for k, d, _, _ in missing_in)
            what = "input" if len(missing_in) == 1 else "inputs"
            problems.append(
                f"{'U' if problems else 'u'}nspecified {what} of model {self.name!r}: {shown} "
                f"(functions of {self._c.t} that are not coordinates); pass "
                f"specified={{{code}}}, each a callable f(t, q, v) -> float or a number (if "
                "one is meant as a coordinate, add it to the coordinates).")
        if problems:
            raise ModelError(" ".join(problems))
        # what only the energy uses and is missing: 0 where that shifts the energy by a
        # constant, else the energy is left out
        energy = True
        gone = [s for s in optional] + [sym for _, _, x, sym in unspecified]
        if gone and "energy" in self._uses:
            E = sp.sympify(self.expressions["energy"]).xreplace(self._smap)
            varying = set(self._c.state) | {sp.Symbol(k) for k in calls} | set(gone)
            energy = all(not (E.diff(s).free_symbols & varying) for s in gone)
        for s in optional:
            out[self._pmap[s].name] = 0.0
        for *_, sym in unspecified:
            out[sym.name] = 0.0
        return _Binding(out, calls, energy,
                        {s: out[self._pmap[s].name] for s in self.parameters if s not in optional})

    def _input_key_code(self, k: int, d: int) -> str:
        f = str(self._c.inputs[k].func)
        return f if d == 0 else f"{f}.diff({self._c.t})" if d == 1 else \
            f"{f}.diff({self._c.t}, {d})"

    def _specified(self, specified: Optional[Mapping], out: dict) -> tuple[dict, set]:
        """Read ``specified``: numbers go into ``out`` (they are parameters of the
        generated code), callables are returned ``{slot name: f}``; also the names of the
        slots given."""
        if specified is None:
            return {}, set()
        if not isinstance(specified, Mapping):
            raise ModelError("`specified` must be a dict {input: callable f(t, q, v) or "
                             f"number}}, found {type(specified).__name__}.")
        c = self._c
        names = [str(f.func) for f in c.inputs]
        coords = {str(x.func) if c.kind == "function" else str(x) for x in c.user_q}
        slot = {(k, d): sym.name for k, d, _, sym in self._slots}
        calls, given = {}, set()
        for key, val in specified.items():
            k_d = _input_key(key, c.t, coords, names)
            if k_d is None or k_d not in slot:
                continue  # an input this model does not use
            sname = slot[k_d]
            if callable(val):
                calls[sname] = val
            else:
                try:
                    x = float(val)
                except (TypeError, ValueError):
                    raise ModelError(f"`specified[{key}]` must be a callable f(t, q, v) or a "
                                     f"real number, found {val!r}.") from None
                if not math.isfinite(x):
                    raise ModelError(f"`specified[{key}]` must be finite, found {x}.")
                out[sname] = x
            given.add(sname)
        return calls, given

    def function(self, piece: str, params: Optional[Mapping] = None, *,
                 specified: Optional[Mapping] = None) -> Callable:
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
            ``{Symbol or name: value}`` for every symbol the piece uses.
        specified : dict, optional
            Values of the specified inputs the piece uses, as in :meth:`system`.

        Returns
        -------
        callable
        """
        comp = self._compiled_piece(piece)
        b = self._bind(params, specified, {key for _, key in self._PIECES[piece][1]})
        return comp.bind(b.values, b.calls)

    # --------------------------------------------------------------- System
    def system(self, params: Optional[Mapping] = None, *, name: Optional[str] = None,
               specified: Optional[Mapping] = None) -> System:
        """Bind a parameter set and the specified inputs; build the :class:`~gaussopt.System`.

        Parameters
        ----------
        params : dict, optional
            ``{Symbol or name: value}`` for every symbol of :attr:`parameters` that
            ``M``, ``F`` or the constraints use. The others
            (:attr:`energy_only_parameters`: a constant that only shifts the potential)
            may be left out: where the energy depends on them by an additive constant
            they are taken as 0 (the energy is then known up to that constant, which
            its drift does not see); otherwise the System has no energy.
        name : str, optional
            Name of the System (default the model's).
        specified : dict, optional
            ``{input: f}`` for the specified inputs (:attr:`inputs`): functions of ``t``
            that are not coordinates, such as a force ``F(t)`` given as a dynamicsymbol
            (PyDy's ``specifieds``). A key is the input (``F``, a dynamicsymbol or
            ``sympy.Function('F')(t)``), its function (``sympy.Function('F')``) or name
            (``"F"``), or one of its time derivatives (``F.diff(t)``) where the derivation
            needs it (an input in a position, the Lagrangian or a constraint is
            differentiated in time). A value is a number, or a callable ``f(t, q, v)``
            returning a float, evaluated at each call of the pieces that use it (with
            ``v=None`` in the pieces of ``(t, q)``: the mass matrix, holonomic constraints).
            An input is a value, never differentiated: its dependence on ``q`` and ``v`` is
            right where it enters as a value (a load, a generalized force); in a position,
            the Lagrangian or a constraint it must be a function of ``t`` alone, with its
            derivatives given as inputs of their own. Inputs that only the energy uses may
            be left out (as parameters). Keys of inputs the model does not use are ignored.

        Returns
        -------
        System
            Constant mass matrices and forces are passed as arrays. The
            holonomic, nonholonomic and acceleration constraints become one
            constraint object each (``"holonomic"``, ``"nonholonomic"``,
            ``"acceleration"``) with exact Jacobians and convective terms.
            With numbers for all specified inputs, they are parameters of the
            compiled model (no cost per call; the engine runs the model's numba
            functions); a callable input makes the System run through its Python
            functions (the engine's numba functions cannot call Python), each
            call of a piece that uses the input calling it once (see the Notes of
            :func:`~gaussopt.symbolic.from_mechanics` for the cost).

        Raises
        ------
        ModelError
            Unbound parameters and unspecified inputs (all listed, with how to give
            them), non-numeric values, keys that are coordinates or not functions of
            ``t``.
        """
        self.derive()
        b = self._bind(params, specified, set(self._uses) - {"energy", "g", "Q"})
        vals, calls = b.values, b.calls
        has = self.pieces

        def bound(piece):
            return self._compiled_piece(piece).bind(vals, calls)

        def const_or_fn(piece):
            comp = self._compiled_piece(piece)
            fn = comp.bind(vals, calls)
            return fn if comp.varies(calls) else _constant_value(comp, fn, self.n)

        mass = const_or_fn("mass")
        force = const_or_fn("force")
        cons = []
        if "phi" in has:
            rheo = _uses(self.expressions["phi"], [self.t])
            cons.append(_SymbolicHolonomic(
                bound("phi"), _constant_tq(self, "phi_q", vals, calls), bound("phi_gamma"),
                _constant_tqv(self, "phi_rows", vals, calls),
                phi_t=bound("phi_t") if rheo else None, rheonomic=rheo, name="holonomic"))
        if "f" in has:
            cons.append(_SymbolicNonholonomic(bound("f"), _constant_tqv(self, "f_v", vals, calls),
                                              bound("f_gamma"),
                                              _constant_tqv(self, "f_rows", vals, calls),
                                              name="nonholonomic"))
        if "acc_A" in has:
            cons.append(_SymbolicAcceleration(_constant_tqv(self, "acc_A", vals, calls),
                                              _constant_tqv(self, "acc_b", vals, calls),
                                              _constant_tqv(self, "acc_rows", vals, calls),
                                              name="acceleration"))
        energy = bound("energy") if "energy" in has and b.energy else None
        system = System(self.coordinates, mass=mass, force=force, constraints=cons, energy=energy,
                        name=name or self.name)
        module = None if calls else self._numba_module()
        if module is not None:
            p = np.array([vals[self._pmap[sym].name] for sym in self.parameters]
                         + [vals[sym.name] for *_, sym in self._slots], dtype=float)
            system.compiled = _compiled_factory(module, p, self, system)
            system.parameter_slots = self._parameter_slots()
        # a pickle of the system stores this model (its derived expressions; the
        # generated code is not pickled but generated again), the parameter values and
        # the specified inputs (callables pickle if they are module-level functions)
        extra = {} if specified is None else {"specified": dict(specified)}
        system.rebuilt_by(self.system, b.given, name=name, **extra)
        return system

    def _parameter_slots(self):
        """The named entries of the compiled model's parameter array (the order of
        :meth:`system`'s ``p``: the parameters, then the specified inputs given as
        numbers; an input is named by its function, a time derivative of it is not
        named) and those that enter only the force (not ``M``, not a constraint)."""
        from gaussopt.core.model_interface import ParameterSlots

        npar = len(self._parameters)
        index = {s.name: i for i, s in enumerate(self._parameters)}
        slot_of = {}
        for j, (k, d, _, sym) in enumerate(self._slots):
            if d == 0:
                name = str(self._c.inputs[k].func)
                index.setdefault(name, npar + j)
                slot_of[sym.name] = name
        fixed = {"M", "phi", "phi_q", "phi_t", "phi_gamma", "f", "f_v", "f_gamma", "acc_A",
                 "acc_b"}
        held = set()
        for key, (params, slots) in self._uses.items():
            if key in fixed:
                held |= {s.name for s in params}
                held |= {slot_of.get(self._smap[x].name, "") for x in slots}
        return ParameterSlots(index=dict(index),
                              force_only=frozenset(k for k in index if k not in held))

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
        # the specified inputs given as numbers follow the parameters in p
        npar = len(self.parameters)
        sizes["np"] = npar + len(self._slots)
        pmap = dict(self._pmap)
        pmap.update({sym: sp.Symbol(f"{_PN}{npar + j}") for j, (*_, sym) in enumerate(self._slots)})
        printer = _printer("math")
        state = {sp.Symbol(_TN)} | set(self.q) | set(self.v)
        bodies = {}
        try:
            for name, outs in pieces.items():
                flat = [sp.sympify(e).xreplace(self._smap).xreplace(pmap)
                        for _, es in outs for e in es]
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
                for i in range(sizes["np"]):
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


@dataclass
class _Binding:
    """A validated parameter set and specified inputs."""
    values: dict   # {internal name: float}: parameters, inputs given as numbers (0 if unused)
    calls: dict    # {slot name: callable f(t, q, v)}: inputs given as callables
    energy: bool   # the energy is defined by the values given
    given: dict    # {Symbol: value} of the parameters given


def _input_key(key: Any, t: sp.Symbol, coords: set, names: list):
    """``(k, d)`` of a key of ``specified`` (input ``names[k]``, its ``d``-th time
    derivative); None for an input the model does not have; ModelError for a key that is
    not a function of ``t`` alone or is a coordinate."""
    d = 0
    what = key
    if isinstance(key, sp.Derivative):
        if set(key.variables) != {t}:
            raise ModelError(f"`specified` key {key} must be a time derivative (with respect "
                             f"to {t}) of a function of {t}.")
        d, key = key.derivative_count, key.expr
    if isinstance(key, str):
        name = key
    elif isinstance(key, UndefinedFunction):
        name = key.__name__
    elif isinstance(key, AppliedUndef) and key.args == (t,):
        name = str(key.func)
    else:
        raise ModelError(f"`specified` keys must be functions of {t} (a dynamicsymbol, "
                         f"sympy.Function('F')({t}), its function or name, or a time "
                         f"derivative of one), found {what!r} ({type(what).__name__}); "
                         "constant symbols go in `params`.")
    if name in coords:
        raise ModelError(f"`specified` key {what} is a coordinate of the model; a specified "
                         "input is a function of time that is not a coordinate.")
    return (names.index(name), d) if name in names else None


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

    def dynamics():
        if not codegen.compile_functions(module):
            raise NotCompiled(f"numba could not compile the functions of {model.name!r}")
        return fns[0], fns[4], p

    factory.functions = fns          # (compiled with the rest of a run: gaussopt.core.compiled)
    factory.dynamics = dynamics
    factory.rebind = lambda other: _compiled_factory(module, p, model, other)
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


def _constant_tq(model: SymbolicModel, piece: str, vals: dict, calls: dict) -> Callable:
    """The bound piece, or a function returning its constant (read-only) value."""
    comp = model._compiled_piece(piece)
    fn = comp.bind(vals, calls)
    if comp.varies(calls):
        return fn
    val = _constant_value(comp, fn, model.n)
    return lambda t, q: val


def _constant_tqv(model: SymbolicModel, piece: str, vals: dict, calls: dict) -> Callable:
    comp = model._compiled_piece(piece)
    fn = comp.bind(vals, calls)
    if comp.varies(calls):
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
                    simplify: bool = True, specified: Optional[Mapping] = None) -> System:
    """Build a :class:`~gaussopt.System` from a Lagrangian and constraints.

    A thin wrapper: ``SymbolicModel(q, T, V, ...).system(params, specified=...)``.
    To build many parameter sets from one derivation use :class:`SymbolicModel`.

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
    specified : dict, optional
        ``{input: number or callable f(t, q, v)}`` for the specified inputs:
        functions of ``t`` in the expressions that are not coordinates (a
        driving force ``F(t)``, PyDy's ``specifieds``); see
        :meth:`SymbolicModel.system`.

    Returns
    -------
    System

    Raises
    ------
    ModelError
        A coordinate that is neither a function of t nor a Symbol; functions
        of anything but t alone; unbound parameters and unspecified inputs;
        ``T`` not quadratic in ``q'``; an acceleration constraint not linear
        in ``q''``.

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

    A driving torque ``tau(t)`` given as a function of time instead
    (a specified input; a number would do too):

    >>> tau = dynamicsymbols("tau")
    >>> fb2 = from_lagrangian(q, T, V, forces=[tau, 0, 0],
    ...                       holonomic=[l * sp.sin(th1) - l * sp.sin(th2), th1 + th3 - sp.pi],
    ...                       params={m: 12, l: 2, g: 9.8},
    ...                       specified={tau: lambda t, q, v: 450.0 * np.exp(-t)})
    >>> fb2.force(0.0, np.zeros(3), np.zeros(3))   # tau - 3/2 m g l cos th1, ...
    array([  97.2, -117.6,    0. ])
    """
    model = SymbolicModel(q, T, V, forces, holonomic, nonholonomic, acceleration, t=t,
                          coordinates=coordinates, name=name, velocities=velocities,
                          accelerations=accelerations, modules=modules, simplify=simplify)
    return model.system(params, specified=specified)
