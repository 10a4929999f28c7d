"""Compilation of sympy expressions into Python functions (common subexpressions, the
parameters bound as globals, specified inputs evaluated per call); the internal symbol
names."""

from __future__ import annotations

import itertools
import linecache
import types
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import sympy as sp

from gaussopt.core.exceptions import ModelError

MODULES = ("math", "numpy", "scipy")

# Internal symbol names: the user's own symbols never reach the generated code.
# _SN: specified inputs, the functions _gs<k>(_gt) in derivations and the symbols
# _gs<k>_<d> (the input's d-th time derivative) in generated code; _FN<slot>: the
# callable bound for a slot.
_TN, _QN, _VN, _AN, _PN, _CN, _SN = "_gt", "_gq", "_gv", "_ga", "_gp", "_gc", "_gs"
_FN = "_gf"
RESERVED = (_TN, _QN, _VN, _AN, _PN, _CN, _SN, _FN)


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
    """One compiled piece: code object, its base namespace and dependence.

    ``inputs`` are the slots of specified inputs the piece uses (``_gs<k>_<d>``). A
    slot bound to a number is a global of the function, as a parameter is; a slot
    bound to a callable is evaluated at the top of every call, by a variant of the
    function generated for that set of callable slots (:meth:`variant`, cached)."""

    name: str
    source: str
    function: Callable
    namespace: dict
    depends: bool  # on (t, q, v)
    args: str  # "tq" or "tqv"
    prelude: Any = None  # code of the parameter-only subexpressions
    inputs: tuple = ()  # slots of specified inputs used
    template: Any = None  # (head lines, body lines) of the generated source
    modules: str = "math"
    filename: str = ""
    _variants: Any = None

    def variant(self, calls: frozenset) -> Callable:
        """The function with the slots ``calls`` evaluated per call (``_gf<slot>(t, q,
        v)``; ``v`` is None in the pieces of ``(t, q)``)."""
        calls = frozenset(calls) & frozenset(self.inputs)
        if not calls:
            return self.function
        if self._variants is None:
            self._variants = {}
        if calls not in self._variants:
            head, body = self.template
            vel = "v" if self.args == "tqv" else "None"
            wrap = "_float" if self.modules == "math" else ""
            lines = list(head) + [f"    {s} = {wrap}({_FN}{s}(_gt, q, {vel}))"
                                  for s in sorted(calls)] + list(body)
            src = "\n".join(lines) + "\n"
            filename = f"{self.filename[:-1]} inputs {','.join(sorted(calls))}>"
            ns = _namespace(self.modules)
            exec(compile(src, filename, "exec"), ns)  # noqa: S102 - generated
            linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
            self._variants[calls] = ns[self.name]
        return self._variants[calls]

    def bind(self, values: Mapping[str, float], calls: Mapping[str, Callable] = None) -> Callable:
        """The function with the parameters (and constant inputs) ``values`` bound as
        globals and the callables ``calls`` (``{slot: f(t, q, v)}``) for the other
        slots of specified inputs it uses."""
        ns = dict(self.namespace)
        ns.update(values)
        calls = {k: f for k, f in (calls or {}).items() if k in self.inputs}
        for k, f in calls.items():
            ns[f"{_FN}{k}"] = f
        if self.prelude is not None:
            try:
                exec(self.prelude, ns)  # noqa: S102 - generated from sympy printers
            except (ValueError, ArithmeticError, TypeError) as e:
                raise ModelError(f"the parameter values make {self.name} undefined "
                                 f"({type(e).__name__}: {e}); check `params`.") from e
        f = self.variant(frozenset(calls))
        return types.FunctionType(f.__code__, ns, f.__name__, f.__defaults__, f.__closure__)

    def varies(self, calls: Mapping[str, Callable] = None) -> bool:
        """The piece depends on ``(t, q, v)`` for this binding: through the state, or
        through an input bound to a callable."""
        return self.depends or any(k in self.inputs for k in (calls or {}))


def _compile(name: str, outputs: Sequence[tuple[str, sp.MatrixBase]], n: int, args: str,
             modules: str, model_name: str, inputs: Sequence[str] = ()) -> _Compiled:
    """Generate and compile ``name(t, q[, v])`` returning the given outputs.

    ``outputs`` is a list of ``(kind, expr)`` with kind ``"scalar"`` (a sympy
    expression), ``"vec"`` (a column Matrix -> shape (k,)) or ``"mat"`` (a
    Matrix -> shape (k, n)); several outputs are returned as a tuple and share
    their common subexpressions. ``inputs`` are the names of the symbols of specified
    inputs (slots): they vary from call to call, as the state does.
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
    slots = {sp.Symbol(x) for x in inputs}
    head = list(lines)
    hoisted: list[str] = []
    varying: set = set()
    for s, e in reps:
        if e.free_symbols & (state | slots | varying):
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
    body = lines[len(head):]
    src = "\n".join(lines) + "\n"
    filename = f"<gaussopt.symbolic {model_name}.{name} #{next(_counter)}>"
    ns = _namespace(modules)
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - generated from sympy printers
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    fn = ns[name]
    depends = any(bool(e.free_symbols & state) for e in flat)
    used = set().union(*(e.free_symbols for e in flat)) if flat else set()
    used_inputs = tuple(sorted(s.name for s in used & slots))
    prelude = None
    if hoisted:
        psrc = "\n".join(hoisted) + "\n"
        prelude = compile(psrc, filename + " (parameters)", "exec")
        src = "# evaluated once per parameter set:\n# " + psrc.replace("\n", "\n# ").rstrip("# ") \
            + src
    return _Compiled(name, src, fn, ns, depends, args, prelude, used_inputs, (head, body),
                     modules, filename)
