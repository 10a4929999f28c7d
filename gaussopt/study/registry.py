"""Where problems come from: the registry of problem modules, and the usage error.

A problem is a module with ``build(**params) -> gaussopt.Problem``. Packages
register their problems as entry points of the group :data:`GROUP`
(``"gaussopt.problems"``), name -> module, in their ``pyproject.toml``::

    [project.entry-points."gaussopt.problems"]
    my_linkage = "mypackage.my_linkage"

gaussopt registers its own (``problems/*``) the same way; the library imports
no problem by name: :func:`get_problem` and :func:`problem_names` read the
installed entry points (:func:`importlib.metadata.entry_points`).

The parameters of ``build()`` are read from its signature and its numpydoc
docstring (:class:`gaussopt.study.problem.BuildSignature`). A parameter may document
its range after its type, ``m : float, > 0`` (also ``>=``, ``<``, ``<=``, ``!=``,
several separated by commas, or an interval ``float, in [0, 1)``);
:func:`check_parameters` checks values against it before anything is built.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import math
import os
import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from gaussopt.core.exceptions import ModelError
from gaussopt.study.problem import BuildParameter, BuildSignature, did_you_mean

__all__ = ["GROUP", "UsageError", "problem_names", "get_problem", "load_problem_module",
           "build_signature", "parameter_range", "check_parameters", "Range"]

#: the entry-point group of problem modules
GROUP = "gaussopt.problems"


class UsageError(Exception):
    """A mistake on the command line; ``gaussopt``'s ``main`` prints it as one line and
    returns 2.

    ``prog``: the command it belongs to (``"gaussopt run"``); ``None``: the
    command being run.
    """

    def __init__(self, message: str, prog: Optional[str] = None):
        super().__init__(message)
        self.prog = prog


# --------------------------------------------------------------------------- the registry
def _entry_points() -> dict[str, list]:
    """``{name: [EntryPoint, ...]}`` of :data:`GROUP`; the same target registered by
    several distributions (an installed copy and a development one) counts once."""
    out: dict[str, list] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        same = out.setdefault(ep.name, [])
        if all(e.value != ep.value for e in same):
            same.append(ep)
    return out


def problem_names() -> list[str]:
    """The names of the registered problems, sorted.

    Returns
    -------
    list of str
        Empty when nothing is registered (gaussopt installed without its metadata).
    """
    return sorted(_entry_points())


def _dist_name(ep) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or "an unknown distribution"


def _not_registered(name: str, argument: str) -> str:
    names = problem_names()
    if not names:
        return (f"{argument}unknown problem {name!r}: no problems are registered (the "
                f"entry-point group {GROUP!r} is empty); gaussopt registers its own when it is "
                "installed: reinstall it (`pip install -e .` in its checkout, or "
                "`pip install gaussopt`)")
    return (f"{argument}unknown problem {name!r}{did_you_mean(name, names)} "
            f"(problems: {', '.join(names)})")


def get_problem(name: str) -> types.ModuleType:
    """The registered problem module called ``name``.

    Parameters
    ----------
    name : str
        A name of :func:`problem_names` (``"four_bar"``).

    Returns
    -------
    module
        The module; it has ``build()``.

    Raises
    ------
    ModelError
        No problem of that name is registered (the message lists those that are, or
        says to reinstall when none is), several distributions register different
        modules under it, or its module fails to import or has no ``build()``.

    Examples
    --------
    >>> from gaussopt.study.registry import get_problem
    >>> get_problem("four_bar").__name__
    'gaussopt_problems.four_bar'
    """
    eps = _entry_points().get(name)
    if not eps:
        raise ModelError(_not_registered(name, "`problem`: ") + "; or pass a module with "
                         "build() or a builder function.")
    if len(eps) > 1:
        raise ModelError(f"`problem`: the name {name!r} is registered by several distributions "
                         "with different modules: " + ", ".join(
                             f"{_dist_name(e)} ({e.value})" for e in eps)
                         + "; uninstall one of them, or pass the module itself.")
    ep = eps[0]
    try:
        mod = ep.load()
    except Exception as e:  # noqa: BLE001 - a broken third-party module is named, not raised raw
        raise ModelError(f"`problem`: the problem {name!r} registered by {_dist_name(ep)} "
                         f"({ep.value}) cannot be imported: {type(e).__name__}: {e}") from e
    if not callable(getattr(mod, "build", None)):
        raise ModelError(f"`problem`: the entry point {name!r} of {_dist_name(ep)} ({ep.value}) "
                         "is not a module with build(); a problem module defines "
                         "build(**params) -> gaussopt.Problem.")
    return mod


def load_problem_module(name: str) -> types.ModuleType:
    """A registered problem by name, or a module with ``build()`` by its path (the
    command line's ``PROBLEM`` argument).

    Raises
    ------
    UsageError
        No such problem or file, or the module has no ``build()``.
    """
    p = Path(name)
    if p.suffix == ".py" or "/" in name or os.sep in name:
        if not p.is_file():
            raise UsageError(f"no file {name!r}; give a problem name (`gaussopt list`) or the "
                             "path of a module with build()")
        spec = importlib.util.spec_from_file_location(p.stem, p)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if not callable(getattr(mod, "build", None)):
            raise UsageError(f"{name!r} has no build(); a problem module defines "
                             "build(**params) -> gaussopt.Problem")
        return mod
    if name not in _entry_points():
        raise UsageError(_not_registered(name, "") + "; or give the path of a module with "
                         "build()")
    try:
        return get_problem(name)
    except ModelError as e:
        raise UsageError(str(e).replace("`problem`: ", "", 1)) from None


def build_signature(mod: Any) -> BuildSignature:
    """The :class:`~gaussopt.study.problem.BuildSignature` of a problem module's ``build()``."""
    return BuildSignature.of(mod.build, getattr(mod, "DEFAULTS", None))


# --------------------------------------------------------------------------- documented ranges
_NUM = r"[-+]?(?:inf|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_BOUND = re.compile(rf"^(>=|<=|!=|>|<)\s*({_NUM})$")
_INTERVAL = re.compile(rf"^in\s*([\[(])\s*({_NUM})\s*,\s*({_NUM})\s*([\])])$")


@dataclass(frozen=True)
class Range:
    """The documented range of a numeric parameter: ``lo < x`` (or ``<=`` when
    ``lo_closed``), ``x < hi`` (``<=``), ``x`` not in ``excluded``. An open side
    excludes infinity (``> 0`` means a finite positive number)."""

    lo: float = -math.inf
    lo_closed: bool = False
    hi: float = math.inf
    hi_closed: bool = False
    excluded: tuple = ()
    text: str = ""

    def contains(self, x: float) -> bool:
        """``x`` is in the range (NaN never is)."""
        if math.isnan(x):
            return False
        ok_lo = x >= self.lo if self.lo_closed else x > self.lo
        ok_hi = x <= self.hi if self.hi_closed else x < self.hi
        return ok_lo and ok_hi and x not in self.excluded


def parameter_range(p: BuildParameter) -> Optional[Range]:
    """The range documented in ``p``'s type text (``float, > 0``), or ``None``."""
    parts = [s.strip() for s in p.type.split(",")[1:]]
    lo, lo_c, hi, hi_c, excl, texts = -math.inf, False, math.inf, False, [], []
    for i, s in enumerate(parts):
        m = _BOUND.match(s)
        if m is None and s.startswith("in") and i + 1 < len(parts):   # "in [0, 1)" was split
            m2 = _INTERVAL.match(f"{s}, {parts[i + 1]}")
            if m2:
                lo, lo_c = float(m2.group(2)), m2.group(1) == "["
                hi, hi_c = float(m2.group(3)), m2.group(4) == "]"
                texts.append(f"{s}, {parts[i + 1]}")
            continue
        if m is None:
            continue
        op, val = m.group(1), float(m.group(2))
        texts.append(s)
        if op in (">", ">="):
            lo, lo_c = val, op == ">="
        elif op in ("<", "<="):
            hi, hi_c = val, op == "<="
        else:
            excl.append(val)
    if not texts:
        return None
    return Range(lo, lo_c, hi, hi_c, tuple(excl), ", ".join(texts))


def check_parameters(sig: BuildSignature, params: Mapping[str, Any], label: str) -> None:
    """Check ``params`` against the ranges ``build()`` documents (before building).

    Parameters
    ----------
    sig : BuildSignature
    params : mapping
        ``build()`` keywords; those without a documented range, and values that are
        not real numbers (sequences, strings, ``None``), are not checked here.
    label : str
        The problem's name, for the message.

    Raises
    ------
    ModelError
        A value outside its documented range (named, with the range and the value).
    """
    for name, value in params.items():
        p = sig.parameters.get(name)
        rng = parameter_range(p) if p is not None else None
        if rng is None or isinstance(value, bool):
            continue
        try:
            x = float(value)
        except (TypeError, ValueError):
            continue
        if not rng.contains(x):
            finite = "" if math.isfinite(x) else " and finite"
            raise ModelError(f"`{name}` of {label} must be {rng.text}{finite} (the range its "
                             f"build() documents), found {value!r}.")
