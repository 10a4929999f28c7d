"""Parsing of the user's expressions: coordinates, their derivatives and time mapped to
internal symbols; the cheap exact simplifications of the Lagrangian path."""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Union

import sympy as sp
from sympy.core.function import AppliedUndef

from gaussopt.core.exceptions import ModelError
from gaussopt.symbolic._compile import _AN, _QN, _SN, _TN, _VN, RESERVED

Exprs = Union[sp.Expr, Sequence, sp.MatrixBase, None]


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
    """Maps the user's coordinates (functions of t or symbols) to internal symbols.

    Any other function of the time symbol alone (``F(t)``, a dynamicsymbol) is a
    *specified input*: it becomes the function ``_gs<k>(_gt)`` of the internal time, so
    that derivations differentiate it as a function of time (its derivatives are
    inputs too); :attr:`inputs` lists them in the order met."""

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
        self.inputs: list = []       # the user's input functions, s(t)
        self.internal_inputs: list = []  # their internal functions _gs<k>(_gt)

    def _input(self, f: Any) -> bool:
        """Register ``f``, a function of the time symbol alone that is not a coordinate,
        as a specified input; False if ``f`` is not of that kind."""
        if not (isinstance(f, AppliedUndef) and f.args == (self.t,)) or f in self.user_q:
            return False
        if f not in self.inputs:
            g = sp.Function(f"{_SN}{len(self.inputs)}")(self.ts)
            self.inputs.append(f)
            self.internal_inputs.append(g)
            self._fwd[f] = g
            self._back[g] = f
        return True

    def internal(self, e: Any, label: str) -> sp.Expr:
        """User expression -> internal symbols; rejects unknown functions of t."""
        e = _sympify(e, label)
        for s in e.free_symbols:
            if s.name.startswith(RESERVED):
                raise ModelError(f"`{label}` uses the symbol {s}, a name reserved by "
                                 "gaussopt.symbolic; rename it.")
        for f in e.atoms(AppliedUndef):
            if f.func.__name__.startswith(RESERVED):
                raise ModelError(f"`{label}` uses the function {f}, a name reserved by "
                                 "gaussopt.symbolic; rename it.")
        # (inputs registered in the order of their names: reproducible internal names)
        bad = {f for f in sorted(e.atoms(AppliedUndef), key=str)
               if f not in self.user_q and not self._input(f)}
        if bad:
            raise ModelError(
                f"`{label}` depends on {sorted(map(str, bad))}, which "
                f"{'is' if len(bad) == 1 else 'are'} neither among the coordinates `q` "
                f"{list(self.user_q)} nor functions of {self.t} alone (specified inputs); "
                "replace it by a known expression.")
        if self.kind == "function":
            allowed = set(self.user_v) | set(self.user_a)
            for d in e.atoms(sp.Derivative):
                if d not in allowed and not (d.expr in self.inputs
                                             and set(d.variables) == {self.t}):
                    raise ModelError(
                        f"`{label}` contains {d}: only the coordinates and their first and "
                        "second time derivatives (q, q.diff(t), q.diff(t, 2)) and time "
                        "derivatives of specified inputs may appear.")
        out = e.xreplace(self._fwd)
        if any(d.expr not in self.internal_inputs for d in out.atoms(sp.Derivative)):
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
