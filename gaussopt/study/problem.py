"""A benchmark problem: a system, its initial state, recommended settings and a reference."""

from __future__ import annotations

import difflib
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

import numpy as np

from gaussopt.core.exceptions import ModelError
from gaussopt.model.system import System

__all__ = ["Problem", "ga_settings", "BuildParameter", "BuildSignature", "did_you_mean",
           "check_t_end", "output_grid"]


def check_t_end(t_end: Any, t0: float = 0.0, label: str = "t_end") -> float:
    """The end time of a problem as a float: ModelError unless it is a finite number
    greater than ``t0``.

    Examples
    --------
    >>> from gaussopt.study.problem import check_t_end
    >>> check_t_end(2)
    2.0
    """
    try:
        x = float(t_end)
    except (TypeError, ValueError):
        x = float("nan")
    if isinstance(t_end, (bool, np.bool_, str)) or not (np.isfinite(x) and x > t0):
        raise ModelError(f"`{label}` must be a finite number greater than t0 = {t0:g} [s], "
                         f"found {t_end!r}; pass e.g. {label}=5.0.")
    return x


def output_grid(t_end: Any, step: float, t0: float = 0.0) -> np.ndarray:
    """Output times ``t0, t0 + step, ..., t_end`` of a problem (the last one ``t_end``
    exactly; ``round((t_end - t0) / step)`` intervals, at least one), after checking
    ``t_end`` (:func:`check_t_end`).

    Examples
    --------
    >>> from gaussopt.study.problem import output_grid
    >>> output_grid(0.05, 0.01).round(3).tolist()
    [0.0, 0.01, 0.02, 0.03, 0.04, 0.05]
    """
    t1 = check_t_end(t_end, t0)
    return np.linspace(t0, t1, max(1, int(round((t1 - t0) / step))) + 1)


def ga_settings(t_end: float, horizon: float = 0.2, dt: float = 1e-3, t0: float = 0.0) -> dict:
    """Per-solver settings for the GA row of a comparison.

    The GA costs milliseconds per step (100-1000 times the closed form), so it
    runs the first ``horizon`` seconds only, with the paper's fixed-step
    integration (``rk4`` at ``dt``).

    Parameters
    ----------
    t_end : float
        End of the comparison's time span [s].
    horizon : float
        Longest GA run [s].
    dt : float
        The fixed ``rk4`` step [s].
    t0 : float
        Start of the time span [s].

    Returns
    -------
    dict
        ``{"method": "rk4", "dt": dt, "t_span": (t0, min(t_end, t0 + horizon))}``, an
        entry of ``solver_settings`` (:class:`Problem`, :func:`gaussopt.study.compare`).

    Examples
    --------
    >>> import gaussopt as go
    >>> go.ga_settings(5.0)
    {'method': 'rk4', 'dt': 0.001, 't_span': (0.0, 0.2)}
    """
    t0 = float(t0)
    return {"method": "rk4", "dt": dt, "t_span": (t0, min(float(t_end), t0 + horizon))}


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the one candidate closest to ``name`` (case is
    ignored), or ``""`` when none is close or several are equally close."""
    cands = list(dict.fromkeys(str(c) for c in candidates))
    key = str(name).lower()
    scores = sorted(((difflib.SequenceMatcher(None, key, c.lower()).ratio(), c) for c in cands),
                    reverse=True)
    if not scores or scores[0][0] < 0.6 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
        return ""
    return f"; did you mean {scores[0][1]!r}?"


# --------------------------------------------------------------------------- build() parameters
_NO_DEFAULT = inspect.Parameter.empty
_KINDS = ("bool", "int", "float", "str")


@dataclass(frozen=True)
class BuildParameter:
    """One keyword of a problem module's ``build()``, read from its signature and from
    the numpydoc ``Parameters`` section of its docstring (``name : type`` then an
    indented description, with the unit in brackets: ``Crank torque [N m].``).

    Attributes
    ----------
    name : str
    default : object
        The signature's default (or the module's ``DEFAULTS`` entry);
        ``inspect.Parameter.empty`` when there is none.
    type : str
        The docstring's type text, e.g. ``"float"`` or ``'{"circle", "case1"}'``.
    doc : str
        The docstring's description, on one line.
    choices : tuple of str, optional
        The allowed values when the type is a set of strings (``{"a", "b"}``).
    """

    name: str
    default: Any = _NO_DEFAULT
    type: str = ""
    doc: str = ""
    choices: Optional[tuple] = None

    @property
    def kind(self) -> str:
        """``"bool"``, ``"int"``, ``"float"``, ``"str"`` or ``""`` (unknown): from the
        default's type, else from the docstring's type."""
        d = self.default
        if isinstance(d, (bool, np.bool_)):
            return "bool"
        if isinstance(d, (int, np.integer)):
            return "int"
        if isinstance(d, (float, np.floating)):
            return "float"
        if isinstance(d, str):
            return "str"
        first = re.split(r"[,\s]", self.type.strip(), maxsplit=1)[0] if self.type else ""
        return first if first in _KINDS else ""

    @property
    def required(self) -> bool:
        """No default in the signature nor ``optional``/``default ...`` in the type."""
        return self.default is _NO_DEFAULT and not re.search(r"\b(optional|default)\b",
                                                              self.type)

    @property
    def default_text(self) -> str:
        """The default as the docstring or the signature states it."""
        m = re.search(r"\bdefault[:=]?\s*(.*)$", self.type)
        if self.default is not _NO_DEFAULT:
            d = self.default
            return f"{float(d):g}" if isinstance(d, (float, np.floating)) else repr(d)
        return m.group(1).strip() if m else ("optional" if not self.required else "required")

    def parse(self, text: str) -> Any:
        """The value a command-line ``NAME=VALUE`` means for this parameter.

        Raises
        ------
        ModelError
            ``text`` is not a value of the parameter's type or choices.
        """
        if text in ("None", "none") and self.default is None:
            return None
        if self.choices is not None:
            if text in self.choices:
                return text
            raise ModelError(f"`{self.name}` must be one of {', '.join(self.choices)}; found "
                             f"{text!r}{did_you_mean(text, self.choices)}")
        kind = self.kind
        if kind == "bool":
            low = text.lower()
            if low in ("true", "yes", "1", "false", "no", "0"):
                return low in ("true", "yes", "1")
            raise ModelError(f"`{self.name}` must be true or false, found {text!r}")
        if kind == "int":
            try:
                return int(text)
            except ValueError:
                raise ModelError(f"`{self.name}` must be an integer, found {text!r}") from None
        if kind == "float":
            try:
                return float(text)
            except ValueError:
                raise ModelError(f"`{self.name}` must be a number, found {text!r}") from None
        if kind == "str":
            return text
        for conv in (int, float):          # unknown type: the most specific reading
            try:
                return conv(text)
            except ValueError:
                pass
        if "," in text:                    # a sequence of numbers: "1,0,2"
            try:
                return tuple(float(x) for x in text.strip("()[] ").split(","))
            except ValueError:
                pass
        return {"True": True, "False": False}.get(text, text)

    def describe(self) -> str:
        """One line: ``name = default  (type)  description``."""
        typ = f"  ({self.type})" if self.type else ""
        return f"{self.name} = {self.default_text}{typ}  {self.doc}".rstrip()


def _docstring_parameters(doc: Optional[str]) -> dict:
    """``{name: (type, description)}`` of the numpydoc ``Parameters`` section."""
    lines = inspect.cleandoc(doc or "").splitlines()
    out: dict = {}
    try:
        i = next(k for k in range(len(lines) - 1) if lines[k].strip() == "Parameters"
                 and re.fullmatch(r"-{3,}", lines[k + 1].strip()))
    except StopIteration:
        return out
    k = i + 2
    entry = None
    while k < len(lines):
        line = lines[k]
        if line.strip() and k + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[k + 1].strip()):
            break                                   # the next section
        if line.strip() and not line[0].isspace():
            names, _, typ = line.partition(" : ")
            entry = ([n.strip() for n in names.split(",") if n.strip()], typ.strip(), [])
            for n in entry[0]:
                out[n] = entry
        elif line.strip() and entry is not None:
            entry[2].append(line.strip())
        k += 1
    return {n: (typ, " ".join(desc)) for n, (_, typ, desc) in out.items()}


def _choices(typ: str) -> Optional[tuple]:
    m = re.match(r"\s*\{([^}]*)\}", typ)
    if not m:
        return None
    found = re.findall(r"\"([^\"]*)\"|'([^']*)'", m.group(1))
    return tuple(a or b for a, b in found) or None


@dataclass
class BuildSignature:
    """The keywords a problem module's ``build()`` accepts (:class:`BuildParameter`).

    ``open`` is true when ``build()`` takes ``**kwargs`` that neither its docstring
    nor the module's ``DEFAULTS`` name: then any other keyword is passed on unchecked.
    """

    parameters: dict
    open: bool = False

    @classmethod
    def of(cls, build: Callable, defaults: Optional[Mapping] = None) -> "BuildSignature":
        """Read ``build``'s signature and docstring; ``defaults``: the module's
        ``DEFAULTS`` (the values of the keywords ``build(**params)`` accepts)."""
        documented = _docstring_parameters(build.__doc__)
        params: dict = {}
        var_kw = False
        for p in inspect.signature(build).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                var_kw = True
            elif p.kind is not p.VAR_POSITIONAL:
                params[p.name] = p.default
        extra: list = []
        if var_kw:
            extra = [n for n in (*documented, *(defaults or {}))
                     if not n.startswith("*") and n not in params]
            for n in extra:
                params.setdefault(n, (defaults or {}).get(n, _NO_DEFAULT))
        out = {}
        for n, d in params.items():
            typ, doc = documented.get(n, ("", ""))
            out[n] = BuildParameter(n, d, typ, doc, _choices(typ))
        return cls(out, open=var_kw and not extra)

    def parse(self, name: str, text: str) -> Any:
        """The value of ``NAME=VALUE`` for ``build()``.

        Raises
        ------
        ModelError
            ``build()`` has no parameter ``name``, or ``text`` is not one of its values.
        """
        p = self.parameters.get(name)
        if p is None:
            if self.open:
                return BuildParameter(name).parse(text)
            raise ModelError(f"no parameter {name!r}{did_you_mean(name, self.parameters)} "
                             f"(parameters: {', '.join(self.parameters) or 'none'})")
        return p.parse(text)


@dataclass
class Problem:
    """A ready-to-run problem (see the modules in ``problems/``).

    Attributes
    ----------
    name : str
    system : System
    q0, v0 : ndarray, shape (n,)
    t_span : (float, float)
    description : str
        One paragraph with the source (paper, equation numbers).
    settings : dict
        Recommended keyword arguments of :func:`gaussopt.simulate`
        (``method``, ``rtol``, ``atol``, ``dt``, ``stabilization``, ...).
    outputs : callable
        ``outputs(q, v) -> dict`` of the physical quantities the paper plots,
        evaluated on arrays of shape (N, n).
    reference : callable, optional
        ``reference(t) -> dict`` of independent values of some of those
        outputs at the times ``t`` (analytic or a reduced ODE integrated at
        tight tolerance).
    params : dict
        The parameters the problem was built with.
    solver_settings : dict
        Per-solver overrides of ``settings``, by solver name; an entry may
        contain ``t_span`` (e.g. :func:`ga_settings`: the GA row runs a shorter
        span at a fixed step). A key may also be
        an alias that names its solver, e.g. ``{"lagrange_baumgarte": {"solver":
        "lagrange", "stabilization": Baumgarte(10, 10)}}`` (the classical
        Lagrange-I + Baumgarte method as a row of a comparison), or give a
        ``"runner"``: ``runner(t_span=..., rtol=..., atol=..., t_eval=...,
        method=...) -> Trajectory`` for another formulation (quasi-velocities,
        Routh's equations) compared on the same footing.
    solvers : tuple of str
        The rows of :func:`gaussopt.study.compare.compare` for this problem.
    draw : callable, optional
        ``draw(ax, q)`` draws the mechanism at configuration ``q`` on a matplotlib Axes.
    model : object, optional
        The object the system was built from, when there is one (a
        :class:`gaussopt.multibody.Model`, a :class:`gaussopt.symbolic.SymbolicModel`).
    units : dict
        Units by name, for figures and tables: of the coordinates, the outputs and
        the parameters (e.g. ``{"th1": "rad", "y1": "m", "psi": "N m"}``), and
        ``"energy"`` (of ``system.energy``), ``"length"`` (of the drawings),
        ``"constraints"`` (the units of the rows of ``Phi``, e.g. ``("m", "rad")``;
        a contact's gap rows among them) and ``"contact_slip"`` (of the ``slip`` of
        frictional contacts), from which the units of residuals, multipliers and
        ``M a - F`` follow; rows of mixed levels state ``"position_residual"``,
        ``"velocity_residual"``, ``"multipliers"`` themselves. A multibody ``model``
        supplies the units of its coordinates and joint rows (see
        :mod:`gaussopt.study.units`). Empty: units not stated (figures say so in
        words).
    """

    name: str
    system: System
    q0: np.ndarray
    v0: np.ndarray
    t_span: tuple
    description: str = ""
    settings: dict = field(default_factory=dict)
    outputs: Callable[[np.ndarray, np.ndarray], dict] = lambda q, v: {}
    reference: Optional[Callable[[np.ndarray], dict]] = None
    params: dict = field(default_factory=dict)
    solver_settings: dict = field(default_factory=dict)
    solvers: tuple = ("closed_form", "lagrange", "qp", "ga")
    draw: Optional[Callable] = None
    model: Any = None
    units: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            t0, t1 = (float(x) for x in self.t_span)
        except (TypeError, ValueError):
            raise ModelError(f"problem {self.name!r}: `t_span` must be a pair (t0, t_end), "
                             f"found {self.t_span!r}.") from None
        if not np.isfinite(t0):
            raise ModelError(f"problem {self.name!r}: the start time must be finite, found {t0}.")
        check_t_end(t1, t0)

    def simulate(self, solver: str = "closed_form", **overrides: Any):
        """Run :func:`gaussopt.simulate` with the recommended settings, updated by
        ``overrides`` (``solver_settings[solver]`` apply first)."""
        from gaussopt.integrate.ivp import simulate

        kw = dict(self.settings)
        kw.update(self.solver_settings.get(solver, {}))
        kw.update(overrides)
        t_span = kw.pop("t_span", self.t_span)
        solver = kw.pop("solver", solver)
        runner = kw.pop("runner", None)
        if kw.get("t_eval") is not None:           # keep the output grid inside the span
            te = np.asarray(kw["t_eval"], dtype=float)
            kw["t_eval"] = te[(te >= t_span[0]) & (te <= t_span[1] + 1e-12 * abs(t_span[1]))]
            kw["t_eval"][-1:] = np.minimum(kw["t_eval"][-1:], t_span[1])
        if runner is not None:
            # another formulation (quasi-velocities, Routh's equations, ...) as a row
            keep = ("rtol", "atol", "t_eval", "method")
            return runner(t_span=tuple(t_span), **{k: v for k, v in kw.items() if k in keep})
        return simulate(self.system, t_span, self.q0, self.v0, solver=solver, **kw)
