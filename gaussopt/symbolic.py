"""Symbolic front end: a Lagrangian and constraints in sympy -> a :class:`~gaussopt.System`.

Users write the kinetic energy ``T``, the potential ``V``, generalized forces
and constraints as sympy expressions; everything the Gauss step needs is
derived exactly and compiled once into fast numeric callables:

==========================  ===================================================
piece                       derivation (``L = T - V``, ``D`` = total d/dt)
==========================  ===================================================
mass matrix ``M(t, q)``     ``d^2 L / dq' dq'`` (the Hessian of ``T`` for ``V(q, t)``)
inertia term ``g``          ``D(dT/dq')|_{q''=0} - dT/dq`` (Christoffel terms, and
                            the rheonomic ones when ``T`` depends on ``t``)
force ``F(t, q, v)``        ``Q - D(dL/dq')|_{q''=0} + dL/dq`` (``= Q - dV/dq - g``)
holonomic ``Phi(t, q)``     ``Phi_q a = -(Phi_q v)_q v - 2 Phi_qt v - Phi_tt``
nonholonomic ``f(t, q, v)`` ``f_v a = -(f_q v + f_t)`` (linear or nonlinear in ``v``)
acceleration ``h(t,q,v,a)`` ``(dh/da) a = -h|_{a=0}`` (must be linear in ``a``)
energy                      ``T + V``
==========================  ===================================================

so that ``M q'' + g = Q - dV/dq`` are Lagrange's equations of the second kind
of the unconstrained system. The energy ``T + V`` is a diagnostic, conserved
only under the conditions listed in the Notes of :class:`SymbolicModel`
(no work by ``Q`` nor by the constraint forces, nothing depends on ``t``).

Coordinates
-----------
``q`` is a sequence of sympy functions of one time symbol
(``sympy.physics.mechanics.dynamicsymbols('x y')`` or ``sympy.Function('x')(t)``);
expressions then use ``q``, ``q.diff(t)`` and ``q.diff(t, 2)``. Plain symbols are
accepted too: the velocity and acceleration of a coordinate ``x`` are then the
symbols ``x_dot`` and ``x_ddot`` (created with the assumptions of ``x``; pass
``velocities=``/``accelerations=`` to choose others) and ``t`` is
``Symbol("t")`` unless given.

Parameter sets
--------------
Every other free symbol is a parameter. One :class:`SymbolicModel` is derived
(:meth:`SymbolicModel.derive`) and compiled once; :meth:`SymbolicModel.system`
binds a parameter set ``{Symbol or name: value}`` at no compile cost, so one
derivation serves many parameter sets. Unbound symbols raise a
:class:`~gaussopt.exceptions.ModelError` that lists them.

Compilation
-----------
Every piece is compiled once with common-subexpression elimination, the way
``sympy.lambdify(..., cse=True)`` does (sympy's ``cse`` and its code printers),
into a Python function with the documented argument order ``(t, q)`` or
``(t, q, v)`` returning float arrays of the documented shape (never ``(n, 1)``
or integer arrays). Parameters are bound as globals of a copy of the compiled
function, so binding costs nothing per call. Pieces that do not depend on
``(t, q, v)`` for the bound parameters are evaluated once and passed to
:class:`~gaussopt.System` as constant arrays.

``modules="math"`` (default) unpacks the state with ``ndarray.tolist()`` and
evaluates with the ``math`` module on Python floats, about 3x faster than
numpy scalar arithmetic at the sizes of mechanics (medians on a shared 2-core
machine: paper 001's four-bar ``F`` 1.6 vs 4.7 us, its rows 3.6 vs 10.6 us; a
5-link pendulum chain in joint angles ``F`` 4.5 vs 14 us), but it takes real
inputs only. ``modules="numpy"`` also takes complex inputs (complex-step
checks); ``modules="scipy"`` adds ``scipy.special`` (Bessel functions, ...),
which the ``math`` printer cannot print.

sympy.physics.mechanics
-----------------------
:func:`from_mechanics` takes a ``LagrangesMethod`` (its ``mass_matrix`` and
``forcing``, with its holonomic and nonholonomic constraints) or any
``KanesMethod``: its generalized speeds are eliminated through its kinematic
differential equations solved for them, ``u = W(q, t) q' + w0(q, t)``, and
Kane's equations are formed with ``q'`` as the speeds (``M = W^T M_u W``), so
the System's state is ``(q, q')``; velocity constraints (``u_dependent``) and
constraints given in the speeds ``u`` or in ``q'`` are kept as nonholonomic
constraints, auxiliary speeds are set to zero; a speed without a coordinate (an
ignorable angle: the wheel spins of sympy's bicycle) gets one, ``int_<speed>``,
added after the method's coordinates. :func:`kane_velocities` turns
initial speeds into ``q'`` (the symbolic work cached on the method). Where ``W`` is singular (a singular chart of the
coordinates: Euler angles at gimbal lock, sympy's rolling disc lying flat at
the lean ``q2 = +-pi/2``) ``M`` is singular and ``q'`` grows like ``1/cos q2``
near it; the step there is not determined by the model.

References
----------
.. [1] F. E. Udwadia, R. E. Kalaba, "A new perspective on constrained motion",
   Proc. R. Soc. Lond. A 439 (1992) 407-410.

Examples
--------
A pendulum of mass ``m`` on a rod of length ``l`` in Cartesian coordinates:

>>> import sympy as sp, numpy as np
>>> from sympy.physics.mechanics import dynamicsymbols
>>> from gaussopt.symbolic import from_lagrangian
>>> x, y = dynamicsymbols("x y")
>>> m, l, g = sp.symbols("m l g", positive=True)
>>> t = dynamicsymbols._t
>>> pend = from_lagrangian([x, y], T=m / 2 * (x.diff(t)**2 + y.diff(t)**2), V=m * g * y,
...                        holonomic=[x**2 + y**2 - l**2], params={m: 2.0, l: 1.5, g: 9.81})
>>> pend.mass(0.0, np.zeros(2))
array([[2., 0.],
       [0., 2.]])
>>> pend.rows(0.0, np.array([1.5, 0.0]), np.array([0.0, 2.0]))
(array([[3., 0.]]), array([-8.]))
"""

from __future__ import annotations

import itertools
import linecache
import math
import time
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef

from .constraints import AccelerationConstraint, Holonomic, Nonholonomic
from .exceptions import ModelError
from .system import System

__all__ = ["SymbolicModel", "from_lagrangian", "from_mechanics", "kane_velocities", "MODULES"]

MODULES = ("math", "numpy", "scipy")

# Internal symbol names: the user's own symbols never reach the generated code.
_TN, _QN, _VN, _AN, _PN, _CN = "_gt", "_gq", "_gv", "_ga", "_gp", "_gc"

Exprs = Union[sp.Expr, Sequence, sp.MatrixBase, None]


# =========================================================================== compilation
def _namespace(modules: str) -> dict:
    ns: dict[str, Any] = {}
    if modules == "math":
        exec("from math import *", ns)  # noqa: S102 - fixed import
    else:
        exec("import numpy; from numpy import *", ns)  # noqa: S102
        if modules == "scipy":
            exec("from scipy.special import *", ns)  # noqa: S102
        import functools
        ns["reduce"] = functools.reduce
    ns.update({"_arr": np.array, "_float": float, "_ndarray": np.ndarray, "_fix": _fix_dtype})
    return ns


def _fix_dtype(a: np.ndarray) -> np.ndarray:
    """Integer results (constant expressions) become float arrays."""
    return a if a.dtype.kind in "fc" else a.astype(float)


def _printer(modules: str):
    settings = {"fully_qualified_modules": False, "inline": True,
                "allow_unknown_functions": False, "user_functions": {}}
    if modules == "math":
        from sympy.printing.pycode import PythonCodePrinter
        return PythonCodePrinter(settings)
    if modules == "numpy":
        from sympy.printing.numpy import NumPyPrinter
        return NumPyPrinter(settings)
    from sympy.printing.numpy import SciPyPrinter
    return SciPyPrinter(settings)


_counter = itertools.count()


@dataclass
class _Compiled:
    """One compiled piece: code object, its base namespace and dependence."""

    name: str
    source: str
    function: Callable
    namespace: dict
    depends: bool  # on (t, q, v)
    args: str  # "tq" or "tqv"
    prelude: Any = None  # code of the parameter-only subexpressions

    def bind(self, values: Mapping[str, float]) -> Callable:
        ns = dict(self.namespace)
        ns.update(values)
        if self.prelude is not None:
            try:
                exec(self.prelude, ns)  # noqa: S102 - generated from sympy printers
            except (ValueError, ArithmeticError, TypeError) as e:
                raise ModelError(f"the parameter values make {self.name} undefined "
                                 f"({type(e).__name__}: {e}); check `params`.") from e
        f = self.function
        return types.FunctionType(f.__code__, ns, f.__name__, f.__defaults__, f.__closure__)


def _compile(name: str, outputs: Sequence[tuple[str, sp.MatrixBase]], n: int, args: str,
             modules: str, model_name: str) -> _Compiled:
    """Generate and compile ``name(t, q[, v])`` returning the given outputs.

    ``outputs`` is a list of ``(kind, expr)`` with kind ``"scalar"`` (a sympy
    expression), ``"vec"`` (a column Matrix -> shape (k,)) or ``"mat"`` (a
    Matrix -> shape (k, n)); several outputs are returned as a tuple and share
    their common subexpressions.
    """
    flat: list[sp.Expr] = []
    shapes = []
    for kind, e in outputs:
        if kind == "scalar":
            flat.append(sp.sympify(e))
            shapes.append((kind, None))
        else:
            E = sp.Matrix(e)
            flat.extend(list(E))
            shapes.append((kind, E.shape))
    reps, reduced = sp.cse(flat, symbols=sp.numbered_symbols(_CN))
    printer = _printer(modules)

    def pr(e) -> str:
        try:
            return printer.doprint(e)
        except Exception as exc:  # sympy's PrintMethodNotImplementedError and friends
            raise ModelError(
                f"cannot compile {name} of {model_name!r} with modules={modules!r}: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}. "
                "Use modules='scipy' (special functions) or modules='numpy'.") from exc

    qs = ", ".join(f"{_QN}{i}" for i in range(n)) + ("," if n == 1 else "")
    vs = ", ".join(f"{_VN}{i}" for i in range(n)) + ("," if n == 1 else "")
    sig = "_gt, q" + (", v" if args == "tqv" else "")
    lines = [f"def {name}({sig}):"]
    if modules == "math":
        lines.append(f"    {qs} = q.tolist() if type(q) is _ndarray else q")
        if args == "tqv":
            lines.append(f"    {vs} = v.tolist() if type(v) is _ndarray else v")
    else:
        lines.append(f"    {qs} = q")
        if args == "tqv":
            lines.append(f"    {vs} = v")
    # subexpressions of the parameters alone are evaluated once, when the
    # parameters are bound (see _Compiled.bind), not at every call
    state = {sp.Symbol(_TN)} | {sp.Symbol(f"{_QN}{i}") for i in range(n)} \
        | {sp.Symbol(f"{_VN}{i}") for i in range(n)}
    hoisted: list[str] = []
    varying: set = set()
    for s, e in reps:
        if e.free_symbols & (state | varying):
            varying.add(s)
            lines.append(f"    {s} = {pr(e)}")
        else:
            hoisted.append(f"{s} = {pr(e)}")
    rets = []
    pos = 0
    for kind, shape in shapes:
        if kind == "scalar":
            rets.append(f"_float({pr(reduced[pos])})" if modules == "math" else pr(reduced[pos]))
            pos += 1
            continue
        k, m = shape
        items = [pr(x) for x in reduced[pos:pos + k * m]]
        pos += k * m
        if kind == "vec":
            body = "[" + ", ".join(items) + "]"
        else:
            body = "[" + ", ".join("[" + ", ".join(items[i * m:(i + 1) * m]) + "]"
                                   for i in range(k)) + "]"
        rets.append(f"_arr({body}, _float)" if modules == "math" else f"_fix(_arr({body}))")
    lines.append("    return " + (rets[0] if len(rets) == 1 else "(" + ", ".join(rets) + ")"))
    src = "\n".join(lines) + "\n"
    filename = f"<gaussopt.symbolic {model_name}.{name} #{next(_counter)}>"
    ns = _namespace(modules)
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - generated from sympy printers
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    fn = ns[name]
    depends = any(bool(e.free_symbols & state) for e in flat)
    prelude = None
    if hoisted:
        psrc = "\n".join(hoisted) + "\n"
        prelude = compile(psrc, filename + " (parameters)", "exec")
        src = "# evaluated once per parameter set:\n# " + psrc.replace("\n", "\n# ").rstrip("# ") \
            + src
    return _Compiled(name, src, fn, ns, depends, args, prelude)


# =========================================================================== parsing
def _as_list(x: Exprs, label: str) -> list:
    """A single expression, a sequence or a Matrix of expressions -> flat list."""
    if x is None:
        return []
    if isinstance(x, sp.MatrixBase):
        return list(x)
    if isinstance(x, (sp.Basic, int, float)):
        return [x]
    try:
        return list(x)
    except TypeError:
        raise ModelError(f"`{label}` must be an expression or a sequence of expressions, "
                         f"found {type(x).__name__}.") from None


def _sympify(e: Any, label: str) -> sp.Expr:
    try:
        e = sp.sympify(e, strict=not isinstance(e, str))
    except (sp.SympifyError, TypeError) as exc:
        raise ModelError(f"`{label}` must be a sympy expression, found {e!r} "
                         f"({type(e).__name__}).") from exc
    if isinstance(e, sp.Equality):
        e = e.lhs - e.rhs
    if isinstance(e, sp.MatrixBase) or not isinstance(e, sp.Expr):
        raise ModelError(f"`{label}` must be a scalar sympy expression, found {type(e).__name__}.")
    return e


class _Coordinates:
    """Maps the user's coordinates (functions of t or symbols) to internal symbols."""

    def __init__(self, q: Any, t: Optional[sp.Symbol], velocities: Optional[Sequence],
                 accelerations: Optional[Sequence], names: Optional[Sequence[str]]) -> None:
        qs = _as_list(q, "q")
        if not qs:
            raise ModelError("`q` is empty: give at least one coordinate.")
        qs = [sp.sympify(x) for x in qs]
        kinds = []
        for i, x in enumerate(qs):
            if isinstance(x, AppliedUndef) and len(x.args) == 1 and isinstance(x.args[0], sp.Symbol):
                kinds.append("function")
            elif isinstance(x, sp.Symbol):
                kinds.append("symbol")
            else:
                raise ModelError(
                    f"`q[{i}]` must be a function of time (dynamicsymbols('x') or "
                    f"sympy.Function('x')(t)) or a plain sympy Symbol; found {x!r} "
                    f"({type(x).__name__}).")
        if len(set(kinds)) > 1:
            raise ModelError("`q` mixes functions of time and plain symbols; use one kind.")
        if len(set(qs)) != len(qs):
            raise ModelError(f"`q` has duplicate coordinates: {qs}.")
        self.kind = kinds[0]
        self.user_q = tuple(qs)
        n = self.n = len(qs)
        if self.kind == "function":
            ts = {x.args[0] for x in qs}
            if len(ts) > 1:
                raise ModelError(f"the coordinates in `q` depend on different time symbols {ts}.")
            t0 = ts.pop()
            if t is not None and sp.sympify(t) != t0:
                raise ModelError(f"`t` is {t!r} but the coordinates are functions of {t0!r}.")
            if velocities is not None or accelerations is not None:
                raise ModelError("`velocities`/`accelerations` are only for plain-symbol "
                                 "coordinates; functions of t use q.diff(t).")
            self.t = t0
            self.user_v = tuple(x.diff(t0) for x in qs)
            self.user_a = tuple(x.diff(t0, 2) for x in qs)
            default_names = [str(x.func) for x in qs]
        else:
            self.t = sp.Symbol("t") if t is None else sp.sympify(t)
            if not isinstance(self.t, sp.Symbol):
                raise ModelError(f"`t` must be a sympy Symbol, found {t!r}.")
            if velocities is None:
                velocities = [sp.Symbol(f"{x.name}_dot", **x.assumptions0) for x in qs]
            if accelerations is None:
                accelerations = [sp.Symbol(f"{x.name}_ddot", **x.assumptions0) for x in qs]
            for label, seq in (("velocities", velocities), ("accelerations", accelerations)):
                seq = list(seq)
                if len(seq) != n or not all(isinstance(s, sp.Symbol) for s in seq):
                    raise ModelError(f"`{label}` must be {n} sympy Symbols, found {seq!r}.")
            self.user_v = tuple(velocities)
            self.user_a = tuple(accelerations)
            default_names = [x.name for x in qs]
            clash = set(self.user_q + self.user_v + self.user_a + (self.t,))
            if len(clash) != 3 * n + 1:
                raise ModelError("coordinates, velocities, accelerations and `t` must be distinct "
                                 "symbols.")
        if names is None:
            names = default_names
        names = tuple(names) if not isinstance(names, str) else (names,)
        if len(names) != n or not all(isinstance(s, str) for s in names):
            raise ModelError(f"`coordinates` must be {n} names (str), found {names!r}.")
        self.names = names
        self.q = tuple(sp.Symbol(f"{_QN}{i}") for i in range(n))
        self.v = tuple(sp.Symbol(f"{_VN}{i}") for i in range(n))
        self.a = tuple(sp.Symbol(f"{_AN}{i}") for i in range(n))
        self.ts = sp.Symbol(_TN)
        # a first so that Derivative(x, (t, 2)) is replaced before its inner x
        self._fwd = {}
        for ua, a in zip(self.user_a, self.a):
            self._fwd[ua] = a
        for uv, v in zip(self.user_v, self.v):
            self._fwd[uv] = v
        for uq, qq in zip(self.user_q, self.q):
            self._fwd[uq] = qq
        self._fwd[self.t] = self.ts
        self._back = {v: k for k, v in self._fwd.items()}
        self.state = set(self.q) | set(self.v) | set(self.a) | {self.ts}

    def internal(self, e: Any, label: str) -> sp.Expr:
        """User expression -> internal symbols; rejects unknown functions of t."""
        e = _sympify(e, label)
        if self.kind == "function":
            allowed = set(self.user_v) | set(self.user_a)
            for d in e.atoms(sp.Derivative):
                if d not in allowed:
                    raise ModelError(
                        f"`{label}` contains {d}: only the coordinates and their first and "
                        "second time derivatives (q, q.diff(t), q.diff(t, 2)) may appear.")
        for s in e.free_symbols:
            if s.name.startswith(("_gt", "_gq", "_gv", "_ga", "_gp", "_gc")):
                raise ModelError(f"`{label}` uses the symbol {s}, a name reserved by "
                                 "gaussopt.symbolic; rename it.")
        bad = {f for f in e.atoms(AppliedUndef) if f not in self.user_q}
        if bad:
            raise ModelError(
                f"`{label}` depends on {sorted(map(str, bad))}, which "
                f"{'is' if len(bad) == 1 else 'are'} not among the coordinates `q` "
                f"{list(self.user_q)}; add it to `q` or replace it by a known expression.")
        out = e.xreplace(self._fwd)
        if out.atoms(sp.Derivative):
            raise ModelError(f"`{label}` contains unevaluated derivatives "
                             f"{sorted(map(str, out.atoms(sp.Derivative)))}.")
        return out

    def external(self, e: Any) -> Any:
        """Internal symbols -> the user's (for display)."""
        return e.xreplace(self._back)


def _simp(e: sp.Expr, state: set) -> sp.Expr:
    """Cheap exact simplification of a mass-matrix entry: products and powers of
    sines and cosines become sums (``fu.TR8``: ``sin^2 + cos^2 -> 1``,
    ``cos a cos b + sin a sin b -> cos(a - b)``), then :func:`_group`.
    (``trigsimp`` gives the same on a 5-link chain but costs ~5x more.)"""
    if not isinstance(e, sp.Expr) or e.is_number:
        return e
    from sympy.simplify.fu import TR8
    if e.has(sp.sin, sp.cos):
        e = TR8(sp.expand(e))
    return _group(e, state)


def _quadratic_parts(L: sp.Expr, v: Sequence[sp.Symbol]):
    """``(M, b, L0)`` with ``L = 1/2 v^T M v + b.v + L0`` read off the terms of
    the expanded ``L``; ``None`` if ``L`` is not a polynomial of degree <= 2 in
    ``v`` (the caller then differentiates, and reports the error)."""
    n = len(v)
    idx = {s: i for i, s in enumerate(v)}
    M = sp.zeros(n, n)
    b = sp.zeros(n, 1)
    L0 = sp.Integer(0)
    for term in sp.Add.make_args(sp.expand(L)):
        coef, vp = term.as_independent(*v, as_Add=False)
        if vp == 1:
            L0 += coef
            continue
        pw = vp.as_powers_dict()
        if any(s not in idx or not (k.is_Integer and k > 0) for s, k in pw.items()):
            return None
        deg = sum(pw.values())
        if deg == 1:
            b[idx[next(iter(pw))]] += coef
        elif deg == 2 and len(pw) == 1:
            i = idx[next(iter(pw))]
            M[i, i] += 2 * coef
        elif deg == 2:
            i, j = (idx[s] for s in pw)
            M[i, j] += coef
            M[j, i] += coef
        else:
            return None
    return M, b, L0


def _group(e: sp.Expr, state: set) -> sp.Expr:
    """Expand and collect the terms with the same state-dependent factor, their
    parameter coefficients factored: exact, cheap, and it lets the terms of
    ``D(dL/dq') - dL/dq`` that cancel (in Christoffel sums) cancel."""
    if not isinstance(e, sp.Expr) or not (e.free_symbols & state):
        return e
    groups: dict = {}
    for term in sp.Add.make_args(sp.expand(e)):
        coef, dep = term.as_independent(*state, as_Add=False)
        groups[dep] = groups.get(dep, 0) + coef
    return sp.Add(*[sp.factor_terms(cf) * dep for dep, cf in groups.items()])


def _group_if_smaller(e: sp.Expr, state: set) -> sp.Expr:
    """:func:`_group` where it shortens the expression (it can lengthen
    quotients with square roots, e.g. the rolling ellipse's gamma)."""
    g = _group(e, state)
    return g if sp.count_ops(g) < sp.count_ops(e) else e


def _uses(e: Any, syms: Iterable[sp.Symbol]) -> bool:
    return bool(sp.sympify(e).free_symbols & set(syms))


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
        """The model's five functions compiled with numba (:mod:`gaussopt.codegen`),
        generated once per model; ``None`` if numba cannot compile them (the model then
        runs through its Python functions)."""
        if getattr(self, "_numba", False) is not False:
            return self._numba
        from . import codegen

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
        the numba module is found in the cache of :mod:`gaussopt.codegen`)."""
        state = dict(self.__dict__)
        state["_compiled"] = {}
        state.pop("_numba", None)
        return state

    def __repr__(self) -> str:
        return (f"SymbolicModel({self.name!r}, coordinates={self.coordinates}, "
                f"holonomic={len(self._hol)}, nonholonomic={len(self._nh)}, "
                f"acceleration={len(self._acc)})")


def _compiled_factory(module, p: np.ndarray, model: "SymbolicModel", system: System):
    """A factory of the engine's :class:`~gaussopt.model.ModelFunctions` for ``system``
    (fresh buffers per run)."""
    from . import codegen
    from .model import ModelFunctions, NotCompiled, make_buffers, row_layout

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

    factory.functions = fns          # (compiled with the rest of a run: gaussopt.compiled)
    return factory


def _noop():
    from .model import NOOP

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


def _mechanics_model(method: Any, holonomic: Exprs, nonholonomic: Exprs, acceleration: Exprs,
                     coordinates, name, modules, energy: Any = None) -> SymbolicModel:
    from sympy.physics import mechanics as me

    t = me.dynamicsymbols._t
    if isinstance(method, me.LagrangesMethod):
        if method.eom is None:
            method.form_lagranges_equations()
        q = list(method.q)
        n = len(q)
        M = method.mass_matrix[:, :n]
        F = method.forcing
        hol = list(getattr(method, "_hol_coneqs", sp.Matrix()))
        nh = list(method.coneqs)[len(hol):]
        L = getattr(method, "_L", None)
        if energy is not None:
            energy = _sympify(energy, "energy")
            bad = _unknown_functions(energy, q)
            if bad:
                raise ModelError(f"`energy` depends on {bad}, which are not coordinates "
                                 f"{[str(x) for x in q]} of the LagrangesMethod.")
        elif L is not None:
            L = sp.Matrix(L)[0]
            qd = [x.diff(t) for x in q]
            energy = sum(v * L.diff(v) for v in qd) - L  # Jacobi integral (= T + V if natural)
        return SymbolicModel.from_equations(
            q, M, F, hol + _as_list(holonomic, "holonomic"),
            nh + _as_list(nonholonomic, "nonholonomic"), acceleration, energy=energy,
            coordinates=coordinates, name=name, modules=modules)
    if isinstance(method, me.KanesMethod):
        return _kane_model(method, holonomic, nonholonomic, acceleration, coordinates, name,
                           modules, energy)
    raise ModelError(f"`method` must be a sympy.physics.mechanics LagrangesMethod or KanesMethod, "
                     f"found {type(method).__name__}.")


def from_mechanics(method: Any, params: Optional[Mapping] = None, *, holonomic: Exprs = (),
                   nonholonomic: Exprs = (), acceleration: Exprs = (),
                   coordinates: Optional[Sequence[str]] = None, name: Optional[str] = None,
                   modules: str = "math", model: bool = False,
                   energy: Any = None) -> Union[System, SymbolicModel]:
    """Build a System from a ``sympy.physics.mechanics`` LagrangesMethod or KanesMethod.

    A ``LagrangesMethod`` gives the unconstrained part through its
    ``mass_matrix`` and ``forcing`` (``M q'' = forcing``); its holonomic and
    nonholonomic constraints (``hol_coneqs``, ``nonhol_coneqs``) are taken over;
    its energy is the Jacobi integral ``q' . dL/dq' - L`` (``T + V`` for natural
    systems).

    Any ``KanesMethod`` is accepted (it carries no energy of its own: pass
    ``energy``). Its kinematic
    differential equations ``K_u u + K_q q' + f_k = 0`` are solved for the
    speeds, ``u = W(q, t) q' + w0(q, t)`` (with fewer speeds than coordinates,
    the equations left over become nonholonomic constraints; with more, each
    speed ``u_j`` the equations leave free, an ignorable angle such as a wheel's
    spin in sympy's bicycle, gets a coordinate added after the method's,
    named ``int_<u_j>`` with ``int_<u_j>' = u_j``: nothing depends on it, its
    initial value is arbitrary), and Kane's
    equations are formed from its bodies and loads with the partial velocities
    with respect to ``q'``: ``M = W^T M_u W``, ``F = W^T (f_u - M_u (W q' +
    w0)')`` with ``(M_u, f_u)`` Kane's equations in ``u`` with every speed
    independent. The System's state is ``(q, q')`` (use :func:`kane_velocities`
    for initial speeds). Its velocity constraints (``u_dependent`` with
    ``velocity_constraints``) and the constraints passed here, in the speeds
    ``u`` (e.g. from ``ang_vel_in``) or in ``q'``, become nonholonomic
    constraints, its configuration constraints holonomic ones; auxiliary speeds
    are set to zero; specified inputs (dynamicsymbols other than ``q``, ``u``)
    are refused. The equations are not simplified (common subexpressions and
    the generated code handle them as they are: sympy's bicycle derives and
    compiles in seconds); only quotients that sympy's solution of the kinematic
    equations leaves, and that can vanish (``1/sin(q3)`` in the rolling disc),
    are cancelled.

    Where ``W`` is singular, ``q'`` does not follow from the speeds: the chart of
    the coordinates is singular (Euler angles at gimbal lock; sympy's rolling
    disc lying flat, lean ``q2 = +-pi/2``, where yaw and spin turn about the
    same axis). ``M`` is singular there, the yaw and spin rates grow like
    ``1/cos q2`` as the disc approaches it (the integrator's steps shrink) and
    the step at it is not determined; :func:`kane_velocities` raises a ``ModelError`` there. Use
    coordinates that stay regular along the motion, or stop the run before it.

    Parameters
    ----------
    method : LagrangesMethod or KanesMethod
        A ``LagrangesMethod`` with its equations formed
        (``form_lagranges_equations()`` is called if needed); a ``KanesMethod``
        with its bodies and loads (given to it, or through
        ``kanes_equations(bodies, loads)``).
    params : dict, optional
        ``{Symbol or name: value}``.
    holonomic, nonholonomic, acceleration : expressions, optional
        Further constraints in the method's dynamicsymbols: ``q``, ``q'``, and
        for a ``KanesMethod`` also its speeds ``u`` (and ``u'`` in
        ``acceleration``).
    coordinates, name, modules
        As in :func:`from_lagrangian`.
    model : bool, default False
        Return the :class:`SymbolicModel` (for several parameter sets) instead
        of a System.
    energy : expression, optional
        The System's energy, a diagnostic (``Trajectory.energy``, the energy
        drift of :func:`gaussopt.compare`), in the method's dynamicsymbols as the
        constraints are. For a ``KanesMethod``, which has none without it,
        typically ``sum(b.kinetic_energy(N) for b in bodies) + V`` with ``V`` the
        potential of its conservative loads (the example below); for a
        ``LagrangesMethod`` it replaces the Jacobi integral.

    Returns
    -------
    System or SymbolicModel

    Examples
    --------
    >>> import sympy as sp, numpy as np
    >>> from sympy.physics import mechanics as me
    >>> th, w = me.dynamicsymbols("theta omega")
    >>> m, l, g = 1.0, 2.0, 9.81
    >>> N = me.ReferenceFrame("N"); B = N.orientnew("B", "Axis", (th, N.z))
    >>> O = me.Point("O"); O.set_vel(N, 0)
    >>> P = O.locatenew("P", -l * B.y); _ = P.v2pt_theory(O, N, B)
    >>> bob = me.Particle("bob", P, m)
    >>> kane = me.KanesMethod(N, [th], [w], kd_eqs=[th.diff() - w])
    >>> _ = kane.kanes_equations([bob], [(P, -m * g * N.y)])
    >>> pend = from_mechanics(kane, energy=bob.kinetic_energy(N) + m * g * P.pos_from(O).dot(N.y))
    >>> pend.energy(0.0, np.array([0.0]), np.array([1.0]))   # at the bottom: m l^2 w^2 / 2 - m g l
    -17.62

    >>> from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols
    >>> from gaussopt.symbolic import from_mechanics
    >>> x = dynamicsymbols("x")
    >>> m, k = sp.symbols("m k", positive=True)
    >>> lm = LagrangesMethod(m / 2 * x.diff()**2 - k / 2 * x**2, [x])
    >>> osc = from_mechanics(lm, {m: 2.0, k: 8.0})
    >>> osc.force(0.0, np.array([0.5]), np.array([0.0])), osc.constant_mass
    (array([-4.]), array([[2.]]))
    """
    mdl = _mechanics_model(method, holonomic, nonholonomic, acceleration, coordinates, name,
                           modules, energy)
    return mdl if model else mdl.system(params)


# =========================================================================== KanesMethod
# A KanesMethod is taken over through its bodies, loads, kinematic differential
# equations and constraints, not through its reduced equations: its speeds u are
# eliminated with the kinematic differential equations solved for them,
#
#     K_u u + K_q q' + f_k = 0   ->   u = W(q, t) q' + w0(q, t),
#
# and Kane's equations are formed with the coordinate derivatives as the speeds: with
# the velocities v, angular velocities w and accelerations of the bodies written in
# q, q', q'' and t, and the partial velocities V_i = dv/dq'_i, W_i = dw/dq'_i,
#
#     M_ij = sum m V_i . V_j + W_i . I . W_j,
#     F_i  = sum (loads) . (V_i, W_i) - (m a + I . alpha + w x I . w)|_{q''=0} . (V_i, W_i),
#
# i.e. M = W^T M_u W and F = W^T (f_u - M_u (W' q' + w0')) with (M_u, f_u) Kane's
# unconstrained equations in u. Kane's, not Lagrange's equations of the kinetic
# energy: Kane models set velocities that are not time derivatives of positions
# (sympy's rolling disc sets its centre's velocity to w x r, true only while it
# rolls), for which Lagrange's equations of T are wrong (they give the dynamics with
# the constraints substituted into T) while Gibbs-Appell/Kane's, which use a = dv/dt,
# are right on the constrained motion.
# Why this and not an integration in the speeds (as gaussopt.quasi.QuasiVelocities
# does): the result is an ordinary System in q with v = q', so every solver, the
# projection, the rank monitor, events and the compiled path apply unchanged. The
# reduced form of a constrained KanesMethod (its mass_matrix with u_dependent)
# eliminates the constraint forces, which gaussopt's step needs as A^T lam; and
# sympy's solution of the kinematic equations for q' (kindiffdict) leaves removable
# singularities (1/sin(q3) in sympy's rolling disc, 0/0 at q3 = 0) that its
# equations in u inherit, where W comes from the equations as written.
# More speeds than coordinates (o > n: speeds of ignorable angles, which sympy lets a
# model leave without coordinates, as its bicycle does for the wheel spins) fit the
# same form: each speed u_j that the kinematic equations leave free gets an angle
# theta_j with theta_j' = u_j, appended to q (nothing depends on it), and W is square.

# trigsimp's cost grows fast with the size: larger coefficients stay as they are
_TIDY_MAX_OPS = 400


def _tidy(e: Any) -> Any:
    """Exact tidying of a coefficient that came through sympy's solution of linear
    equations (``cancel``, then ``trigsimp``), kept where it is shorter: the
    removable singularities of ``(sin q + cos(q)**2/sin q) ...`` cancel, so the
    compiled expression does not divide 0 by 0."""
    e = sp.sympify(e)
    if not isinstance(e, sp.Expr) or e.is_number or sp.count_ops(e) > _TIDY_MAX_OPS:
        return e
    s = sp.cancel(sp.together(e))
    if s.has(sp.sin, sp.cos, sp.tan):
        s = sp.trigsimp(s)
    return s if sp.count_ops(s) <= sp.count_ops(e) else e


def _has_quotient(e: Any) -> bool:
    """``e`` divides by an expression of the functions of t (an integer negative power)."""
    return any(p.exp.is_Integer and p.exp < 0 and p.base.atoms(AppliedUndef)
               for p in sp.sympify(e).atoms(sp.Pow))


def _tidy_linear(e: sp.Expr, xs: Sequence) -> sp.Expr:
    """``e`` linear in ``xs`` rebuilt as ``sum tidy(de/dx_i) x_i + tidy(e|x=0)``."""
    e = sp.expand(e) if sp.count_ops(e) <= _TIDY_MAX_OPS else e
    coeffs = [_tidy(e.diff(x)) for x in xs]
    rest = _tidy(e.xreplace({x: 0 for x in xs}))
    return sum((c * x for c, x in zip(coeffs, xs)), rest)


@dataclass
class _KaneKinematics:
    """The speeds of a KanesMethod in terms of its coordinate derivatives."""
    q: list            # coordinates (independent, then dependent), functions of t
    qd: list           # their derivatives q'
    u: list            # generalized speeds (independent, then dependent)
    W: sp.Matrix       # (o, n): u = W q' + w0
    w0: sp.Matrix      # (o, 1)
    sub: dict          # u -> W q' + w0, u' -> its time derivative, auxiliary speeds -> 0
    constraints: list  # kinematic equations left over when o < n, in q and q'
    added: list        # angles added for speeds without coordinates (theta' = u), at the end of q


def _random_values(e: sp.MatrixBase, seed: int = 0) -> sp.MatrixBase:
    """``e`` at random values (in [0.3, 1.3]) of its functions of t and symbols."""
    rng = np.random.default_rng(seed)
    atoms = sorted(e.atoms(AppliedUndef) | (e.free_symbols - {sp.Symbol("t")}), key=str)
    return e.xreplace({a: sp.Float(rng.uniform(0.3, 1.3)) for a in atoms})


def _kane_kinematics(method: Any) -> _KaneKinematics:
    """Solve a KanesMethod's kinematic differential equations for its speeds (once per
    method)."""
    return _kane_cached(method, "kinematics", lambda: _solve_kane_kinematics(method))


def _solve_kane_kinematics(method: Any) -> _KaneKinematics:
    """Solve a KanesMethod's kinematic differential equations for its speeds."""
    from sympy.physics.mechanics import dynamicsymbols
    t = dynamicsymbols._t
    q, u = list(method.q), list(method.u)
    n, o = len(q), len(u)
    qd = [x.diff(t) for x in q]
    if hasattr(method, "_k_ku_implicit"):
        # the equations as the user wrote them (sympy >= 1.13), not solved for q'
        Ku, Kq, fk = method._k_ku_implicit, method._k_kqdot_implicit, method._f_k_implicit
    else:  # mass_matrix_kin q' = forcing_kin
        Kq = method.mass_matrix_kin
        r = -sp.Matrix(method.forcing_kin)
        Ku, fk = r.jacobian(u), r.xreplace(dict.fromkeys(u, 0))
    Ku, Kq, fk = sp.Matrix(Ku), sp.Matrix(Kq), sp.Matrix(fk)
    if Ku.shape != (n, o) or Kq.shape != (n, n):
        raise ModelError("`method`: the KanesMethod has no kinematic differential equations "
                         "(kd_eqs); give them when creating it.")
    added: list = []
    if o > n:
        # speeds with no coordinate (sympy's bicycle: the wheels' spin rates, ignorable
        # angles): the o - n speeds the equations leave free (the columns of K_u outside
        # n independent ones, chosen by a pivoted QR: columns of zeros come last) get
        # an angle each, theta_k' = u_j
        from scipy.linalg import qr
        A = np.array(_random_values(Ku).evalf(), dtype=float)
        _, R, piv = qr(A, pivoting=True)
        if n == 0 or abs(R[n - 1, n - 1]) <= 1e-9 * abs(R[0, 0]):
            raise ModelError("`method`: the kinematic differential equations do not determine "
                             "the coordinate derivatives from the generalized speeds.")
        free = sorted(piv[n:].tolist())
        taken = {str(x.func) for x in q} | {str(x.func) for x in u} | {
            str(f.func) for f in Ku.atoms(AppliedUndef) | Kq.atoms(AppliedUndef)
            | fk.atoms(AppliedUndef)}
        for j in free:
            base = f"int_{u[j].func}"
            label, k = base, 1
            while label in taken:
                label, k = f"{base}_{k}", k + 1
            taken.add(label)
            added.append(dynamicsymbols(label))
        extra = len(added)
        rows_u = sp.zeros(extra, o)
        for k, j in enumerate(free):
            rows_u[k, j] = -1
        Ku = Ku.col_join(rows_u)
        Kq = sp.diag(Kq, sp.eye(extra))
        fk = fk.col_join(sp.zeros(extra, 1))
        q = q + added
        qd = qd + [x.diff(t) for x in added]
        n = o
    if o < n:  # the equations also constrain q': o of them give u, the others are constraints
        from scipy.linalg import qr
        A = np.array(_random_values(Ku).evalf(), dtype=float)
        _, R, piv = qr(A.T, pivoting=True)
        if o and abs(R[o - 1, o - 1]) <= 1e-9 * abs(R[0, 0]):
            raise ModelError("`method`: the kinematic differential equations do not determine "
                             "the generalized speeds from the coordinate derivatives.")
        rows = sorted(piv[:o].tolist())
    else:
        rows = list(range(n))
    others = [i for i in range(n) if i not in rows]
    KuR = Ku.extract(rows, list(range(o)))
    rhs = -(Kq.extract(rows, list(range(n))) * sp.Matrix(qd) + fk.extract(rows, [0]))
    # a constant K_u (kd_eqs q' - u = 0, in any order) is solved exactly without divisions by
    # expressions: nothing to tidy
    simple = not KuR.free_symbols and not KuR.atoms(AppliedUndef)
    try:
        if simple and KuR.is_diagonal():
            sol = sp.Matrix([rhs[i] / KuR[i, i] for i in range(o)])
        elif simple:
            sol = KuR.inv() * rhs
        else:
            sol = KuR.LUsolve(rhs)
    except (ValueError, ZeroDivisionError) as exc:
        raise ModelError("`method`: the kinematic differential equations cannot be solved for "
                         f"the generalized speeds {u} (their coefficient matrix is singular)."
                         ) from exc
    W = sol.jacobian(qd)
    w0 = sol.xreplace(dict.fromkeys(qd, 0))
    if not simple:
        W, w0 = W.applyfunc(_tidy), w0.applyfunc(_tidy)
    uq = W * sp.Matrix(qd) + w0
    sub = dict(zip(u, uq))
    sub.update({ui.diff(t): e.diff(t) for ui, e in zip(u, uq)})
    aux = list(getattr(method, "_uaux", []))
    sub.update(dict.fromkeys(aux + [x.diff(t) for x in aux], 0))
    cons = [_tidy_linear(sp.expand((Ku[i, :] * uq + Kq[i, :] * sp.Matrix(qd))[0] + fk[i]), qd)
            for i in others]
    return _KaneKinematics(q, qd, u, W, w0, sub, cons, added)


def _unknown_functions(e: Any, known: Iterable) -> list:
    e = sp.sympify(e)
    return sorted({str(f) for f in e.atoms(AppliedUndef)} - {str(k) for k in known})


def _kane_velocity_constraints(method: Any, kin: _KaneKinematics) -> list:
    """The KanesMethod's velocity constraints (``B u + c = 0``, as sympy stores them) in
    ``q'``, with the kinematic equations' own constraints first (once per method)."""
    return list(_kane_cached(method, "constraints",
                             lambda: _substitute_velocity_constraints(method, kin)))


def _substitute_velocity_constraints(method: Any, kin: _KaneKinematics) -> list:
    from sympy.physics.mechanics import msubs
    B, c = sp.Matrix(getattr(method, "_k_nh", sp.Matrix())), sp.Matrix(getattr(method, "_f_nh",
                                                                             sp.Matrix()))
    out = list(kin.constraints)
    if B.rows:
        f = msubs(B * sp.Matrix(kin.u) + c, kin.sub)
        # tidied only where sympy's solution of the kinematic equations left a quotient
        # that can vanish (1/sin(q3) in the rolling disc: 0/0 at q3 = 0); square roots
        # (the bicycle's normalized contact direction) are not removable and not worth the
        # trigsimp (10 s per coefficient there)
        out += [_tidy_linear(e, kin.qd) if _has_quotient(e) else e for e in f]
    return out


def _kane_model(method: Any, holonomic: Exprs, nonholonomic: Exprs, acceleration: Exprs,
                coordinates, name, modules, energy: Any = None) -> SymbolicModel:
    """A KanesMethod as a model in its coordinates (see the comment above)."""
    from sympy.physics import mechanics as me
    kin = _kane_kinematics(method)
    N = method._inertial
    bodies = method.bodies
    if not bodies:
        raise ModelError("`method` has no bodies: pass bodies= (and forcelist=) to the "
                         "KanesMethod, or call method.kanes_equations(bodies, loads) first.")
    sub, qd, n = kin.sub, kin.qd, len(kin.q)
    no_qdd = {x.diff(me.dynamicsymbols._t, 2): 0 for x in kin.q}
    M, F = sp.zeros(n, n), sp.zeros(n, 1)
    try:
        for k, body in enumerate(bodies):
            # velocities and accelerations as sympy's KanesMethod forms them (with the
            # accelerations a user may have set), written in q, q', q''
            if isinstance(body, me.RigidBody):
                vs = [body.masscenter.vel(N), body.frame.ang_vel_in(N)]
                acc = body.masscenter.acc(N)
                I = body.central_inertia
                w = me.msubs(vs[1], sub)
                torque = me.msubs(I.dt(body.frame).dot(w) + I.dot(body.frame.ang_acc_in(N)),
                                  sub) + w.cross(I.dot(w))
            elif isinstance(body, me.Particle):
                vs, acc, I, torque = [body.point.vel(N)], body.point.acc(N), None, None
            else:
                raise ModelError(f"`method`: body {k} is a {type(body).__name__}; expected a "
                                 "RigidBody or a Particle.")
            vs = [me.msubs(v, sub) for v in vs]
            force = me.msubs(body.mass.diff(me.dynamicsymbols._t) * vs[0] + body.mass * acc, sub)
            parts = me.partial_velocity(vs, qd, N)  # dv/dq'_i, dw/dq'_i
            Vp = parts[0]
            Ip = [I.dot(x) for x in parts[1]] if I is not None else None
            for i in range(n):
                for j in range(i, n):
                    M[i, j] += body.mass * Vp[i].dot(Vp[j])
                    if Ip is not None:
                        M[i, j] += Ip[i].dot(parts[1][j])
                F[i] -= me.msubs(force.dot(Vp[i]), no_qdd)
                if Ip is not None:
                    F[i] -= me.msubs(torque.dot(parts[1][i]), no_qdd)
        for k, load in enumerate(method.loads or ()):
            where, vec = load[0], load[1]
            if isinstance(where, me.Point):
                vel = where.vel(N)
            elif isinstance(where, me.ReferenceFrame):
                vel = where.ang_vel_in(N)
            else:
                raise ModelError(f"`method`: load {k} acts on {where!r}; expected a Point (force) "
                                 "or a ReferenceFrame (torque).")
            vel, vec = me.msubs(vel, sub), me.msubs(vec, sub)
            for i, part in enumerate(me.partial_velocity([vel], qd, N)[0]):
                F[i] += part.dot(vec)
    except ValueError as exc:  # sympy: a velocity it cannot find
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"`method`: sympy cannot form the bodies' velocities: {exc}") from exc
    for i in range(n):
        for j in range(i):
            M[i, j] = M[j, i]
    known = kin.q
    bad = _unknown_functions(M, known) + _unknown_functions(F, known)
    if bad:
        raise ModelError(
            f"`method`: the bodies or loads depend on {sorted(set(bad))}, which are neither "
            "coordinates nor generalized speeds of the KanesMethod; give specified inputs as "
            "expressions in q, q', t and parameter symbols.")
    cons = {}
    for label, given in (("holonomic", holonomic), ("nonholonomic", nonholonomic),
                         ("acceleration", acceleration)):
        out = []
        for i, e in enumerate(_as_list(given, label)):
            e = me.msubs(_sympify(e, f"{label}[{i}]"), sub)
            bad = _unknown_functions(e, known)
            if bad:
                raise ModelError(
                    f"`{label}[{i}]` depends on {bad}, which are neither coordinates "
                    f"{[str(x) for x in kin.q]} nor generalized speeds {[str(x) for x in kin.u]} "
                    "of the KanesMethod.")
            out.append(e)
        cons[label] = out
    if energy is not None:
        energy = me.msubs(_sympify(energy, "energy"), sub)
        bad = _unknown_functions(energy, known)
        if bad:
            raise ModelError(
                f"`energy` depends on {bad}, which are neither coordinates "
                f"{[str(x) for x in kin.q]} nor generalized speeds {[str(x) for x in kin.u]} of "
                "the KanesMethod.")
    hol = list(getattr(method, "_f_h", sp.Matrix()))
    nh = _kane_velocity_constraints(method, kin)
    # not simplified: cse and the generated code take the expressions as they are
    return SymbolicModel.from_equations(
        kin.q, M, F, hol + cons["holonomic"], nh + cons["nonholonomic"], cons["acceleration"],
        energy=energy, coordinates=coordinates, name=name, modules=modules, simplify=False)


def kane_velocities(method: Any, q: Any, u: Any, params: Optional[Mapping] = None,
                    t: float = 0.0) -> np.ndarray:
    """The coordinate derivatives ``q'`` of a KanesMethod's state ``(q, u)``.

    For initial conditions of the System :func:`from_mechanics` builds from a
    ``KanesMethod``, whose state is ``(q, q')``: solves the kinematic
    differential equations ``u = W(q, t) q' + w0(q, t)`` together with the
    method's velocity constraints.

    Parameters
    ----------
    method : KanesMethod
    q : array_like, shape (n,) or (n + k,)
        The coordinates, in the order of ``method.q``, optionally followed by the
        ``k`` angles added for speeds without coordinates (the System's
        coordinates; nothing depends on them).
    u : array_like, shape (o,) or (o - m,)
        All generalized speeds (``method.u``: independent, then dependent), or
        only the ``o - m`` independent ones (the dependent speeds then follow
        from the ``m`` velocity constraints).
    params : dict, optional
        ``{Symbol or name: value}`` for the symbols of the kinematics and
        constraints.
    t : float, default 0.0

    Returns
    -------
    ndarray, shape (n + k,)
        ``q'`` of the System's coordinates (with the added angles' rates).

    Notes
    -----
    The kinematics, the velocity constraints in ``q'`` and their numeric function
    are made once per method and kept with it (a weak reference): later calls
    only evaluate them.

    Raises
    ------
    ModelError
        Wrong lengths, unbound symbols; speeds that violate the velocity
        constraints; a configuration where the equations do not determine
        ``q'`` (``W`` singular: a singular chart of the coordinates, such as
        Euler angles at gimbal lock, e.g. the rolling disc lying flat,
        ``q2 = +-pi/2``).
    """
    kin = _kane_kinematics(method)
    ev = _kane_cached(method, "velocities", lambda: _KaneVelocities(method, kin))
    n, o, m = len(kin.q), len(kin.u), ev.m
    n0 = n - len(kin.added)
    qv = np.asarray(q, dtype=float).ravel()
    uv = np.asarray(u, dtype=float).ravel()
    if qv.shape not in ((n,), (n0,)):
        also = (f" (or the {n} of the System: with the added angles "
                f"{[str(x) for x in kin.added]})" if kin.added else "")
        raise ModelError(f"`q` must have the {n0} coordinates {[str(x) for x in kin.q[:n0]]}"
                         f"{also}, found shape {np.shape(q)}.")
    if qv.size == n0 and n0 < n:  # (nothing depends on the added angles)
        qv = np.concatenate([qv, np.zeros(n - n0)])
    if uv.size not in (o, o - m):
        raise ModelError(f"`u` must have all {o} generalized speeds {[str(x) for x in kin.u]} "
                         f"or the {o - m} independent ones, found shape {np.shape(u)}.")
    Wn, w0n, Bn, cn = ev(qv, float(t), params)
    k = uv.size
    A = np.vstack([Wn[:k], Bn])
    b = np.concatenate([uv - w0n[:k], -cn])
    if not (np.isfinite(A).all() and np.isfinite(b).all()):
        raise ModelError(f"the kinematics of `method` are not finite at q = {qv.tolist()}.")
    s = np.linalg.svd(A, compute_uv=False)
    # q' would carry a relative error cond(A) * eps >= 1e-4: the equations do not determine it
    if s.size < n or s[n - 1] <= 1e-12 * s[0]:
        raise ModelError(
            f"`q`: at q = {qv.tolist()} the kinematic differential equations and velocity "
            "constraints of `method` do not determine q' (singular values "
            f"{np.array2string(s, precision=3)}): the coordinates are singular there (e.g. "
            "Euler angles at gimbal lock, the rolling disc lying flat).")
    v, *_ = np.linalg.lstsq(A, b, rcond=None)
    res = A @ v - b
    scale = np.abs(A) @ np.abs(v) + np.abs(b)
    # consistent equations leave a residual of a few roundings of their terms
    if np.any(np.abs(res) > 1e-8 * (scale + 1e-300)) and uv.size == o:
        raise ModelError(f"`u` violates the velocity constraints of `method` by "
                         f"{np.abs(res[o:]).max():.3g}; give the {o - m} independent speeds only, "
                         "or consistent dependent ones.")
    return v


# symbolic work on a KanesMethod (its kinematics, velocity constraints and their numeric
# functions), done once per method: kane_velocities is then a few function calls
_KANE_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _kane_cached(method: Any, key: str, make: Callable) -> Any:
    try:
        store = _KANE_CACHE.setdefault(method, {})
    except TypeError:  # (not weakly referenceable: no cache)
        return make()
    if key not in store:
        store[key] = make()
    return store[key]


class _KaneVelocities:
    """``W, w0, B, c`` of ``u = W q' + w0`` and the velocity constraints ``B q' + c = 0``
    of a KanesMethod as one numeric function of ``(q, t, parameters)``."""

    def __init__(self, method: Any, kin: _KaneKinematics) -> None:
        from sympy.physics.mechanics import dynamicsymbols
        cons = _kane_velocity_constraints(method, kin)
        self.m = len(cons) - len(kin.constraints)
        n = len(kin.q)
        f = sp.Matrix(cons) if cons else sp.zeros(0, 1)
        B = f.jacobian(kin.qd) if cons else sp.zeros(0, n)
        c = f.xreplace(dict.fromkeys(kin.qd, 0))
        ts = dynamicsymbols._t
        qs = sp.symbols(f"_kq0:{n}")
        pieces = [e.xreplace(dict(zip(kin.q, qs))) for e in (kin.W, kin.w0, B, c)]
        self.shapes = [e.shape for e in pieces]
        syms = set().union(*(e.free_symbols for e in pieces)) - set(qs) - {ts}
        self.params = sorted(syms, key=lambda x: x.name)
        self._fn = sp.lambdify((list(qs), ts, self.params), pieces, modules="numpy", cse=True)

    def __call__(self, q: np.ndarray, t: float, params: Optional[Mapping]):
        params = {} if params is None else params
        by_name = {(k if isinstance(k, str) else getattr(k, "name", str(k))): v
                   for k, v in params.items()}
        missing = sorted(s.name for s in self.params if s.name not in by_name)
        if missing:
            raise ModelError(f"unbound symbols in the kinematics of `method`: "
                             f"{', '.join(missing)}; give their values in `params`.")
        p = [np.float64(by_name[s.name]) for s in self.params]
        with np.errstate(all="ignore"):
            try:
                out = self._fn([np.float64(x) for x in q], np.float64(t), p)
            except (ZeroDivisionError, OverflowError, ValueError):
                out = [np.full(shape, np.nan) for shape in self.shapes]
        W, w0, B, c = (np.asarray(e, dtype=float).reshape(shape) if shape[0] * shape[1]
                       else np.zeros(shape) for e, shape in zip(out, self.shapes))
        return W, w0.ravel(), B, c.ravel()
