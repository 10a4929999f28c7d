"""The units of a problem's quantities, for the labels of its figures and tables.

Three sources, in this order of precedence:

1. what the problem states, ``problem.units`` (see :class:`gaussopt.Problem`):
   coordinates, outputs, ``"energy"``, ``"length"``, ``"constraints"`` (the
   units of the rows of ``Phi`` or of ``f(t, q, v)``, one per row or the
   distinct ones) and ``"contact_slip"`` (the unit of the ``slip`` functions
   of frictional contacts);
2. what a multibody model knows (:func:`model_units`): a planar body's
   ``x, y`` are lengths and ``phi`` an angle; a spatial body's ``x, y, z``
   lengths and its Euler parameters ``e0..e3`` dimensionless; the rows of
   its joints have the unit of what they compare (points: a length, unit
   vectors' dot products and the Euler-parameter normalizations: 1, an angle:
   rad, a :class:`~gaussopt.multibody.spatial.Distance`: length squared);
3. the units that follow (:func:`derived_unit`): a holonomic row in unit ``u``
   has the residual ``Phi`` in ``u`` and ``dPhi/dt`` in ``u/s``, its
   multiplier in ``energy/u`` (``A^T lam`` is a generalized force); a
   nonholonomic row ``f`` in ``u`` has its multiplier in ``energy/(u s)``;
   ``(M a - F)_i`` is in ``energy/(unit of q_i)``. A contact's gap rows are
   holonomic rows, its slip rows too (a sticking point's ``slip - anchor``).

A unit that none of them gives is :class:`Unknown`: a string of words (``"units
of the constraint"``, ``"J per unit of the constraint"``) that a label shows
in its place, never a question mark.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

__all__ = ["Unknown", "NOT_STATED", "ROWS_UNKNOWN", "unit_of", "join_units", "per_second",
           "times_second", "energy_per", "model_units", "problem_units", "constraint_levels",
           "derived_unit"]


class Unknown(str):
    """A unit that cannot be known, as the words a label shows in its place.

    ``noun`` is how the algebra of units refers to one such unit (``"J per unit of
    the constraint"`` is :func:`energy_per` of ``"J"`` and ``Unknown("units of the
    constraint", "unit of the constraint")``)."""

    noun: str

    def __new__(cls, words: str, noun: Optional[str] = None) -> "Unknown":
        self = super().__new__(cls, words)
        self.noun = noun or words
        return self


#: A coordinate's, an output's or a parameter's unit the problem does not state.
NOT_STATED = Unknown("unit not stated", "unit of the quantity")
#: The units of constraint rows neither stated nor known from a multibody model.
ROWS_UNKNOWN = Unknown("units of the constraint", "unit of the constraint")
_COORDINATE = Unknown("units of the coordinate", "unit of the coordinate")
_ENERGY = Unknown("energy unit not stated", "energy unit")
_SLIP = Unknown("units of the slip", "unit of the slip")


def unit_of(units: Mapping, name: str, unknown: Unknown = NOT_STATED) -> str:
    """``units[name]`` as a string, or ``unknown`` when it is not stated."""
    u = units.get(name)
    return str(u) if isinstance(u, str) and u != "" else unknown


def join_units(us) -> str:
    """The distinct units of ``us`` in order, joined by ``", "`` (the label of a maximum
    over rows or coordinates of different units)."""
    out: list = []
    for u in us:
        if u not in out:
            out.append(u)
    if not out:
        return ROWS_UNKNOWN
    if len(out) == 1:
        return out[0]
    text = ", ".join(out)
    return Unknown(text, text) if any(isinstance(u, Unknown) for u in out) else text


def per_second(u: str) -> str:
    """The unit of the rate of a quantity in ``u``."""
    if isinstance(u, Unknown):
        return Unknown(f"{u} per s", f"{u.noun} per s")
    if u in ("1", "-"):
        return "1/s"
    if u.endswith("/s"):
        return u[:-2] + "/s^2"
    return f"({u})/s" if "/" in u else f"{u}/s"


def times_second(u: str) -> str:
    """The unit of the time integral of a quantity in ``u``."""
    if isinstance(u, Unknown):
        return Unknown(f"{u} times s", f"{u.noun} times s")
    return u[:-2] if u.endswith("/s") else f"{u} s"


_ENERGY_PER = {"m": "N", "rad": "N m", "1": "J", "-": "J", "m/s": "N s", "rad/s": "N m s"}


def energy_per(e: str, u: str) -> str:
    """The unit of ``e / u``: a generalized force (``u`` a coordinate's unit), a
    multiplier (``u`` a row's unit)."""
    if isinstance(u, Unknown) or isinstance(e, Unknown):
        en = e.noun if isinstance(e, Unknown) else e
        un = u.noun if isinstance(u, Unknown) else u
        return Unknown(f"{en} per {un}", f"{en} per {un}")
    if e == "J" and u in _ENERGY_PER:
        return _ENERGY_PER[u]
    return f"{e}/({u})" if ("/" in u or " " in u) else f"{e}/{u}"


# --------------------------------------------------------------------------- sources

def _planar_model():
    from gaussopt.multibody.planar.mechanism import Model

    return Model


def _spatial_model():
    from gaussopt.multibody.spatial.mechanism import Model

    return Model


#: Units of the rows of the spatial joints by the suffix of their labels; "L" (a
#: Distance, ``(|d|^2 - L^2) / 2``) is a squared length, the rest (dot products of unit
#: vectors, a driven angle's ``sin``) dimensionless.
_SPATIAL_LENGTH_ROWS = frozenset({"x", "y", "z", "d.f", "d.g", "d.n"})


def model_units(model, length: str = "m", energy: str = "J") -> dict:
    """The units a multibody model knows: its coordinates, ``"constraints"`` (one per
    row, in the order of ``model.labels``), ``"energy"`` and ``"length"``.

    ``model``: a :class:`gaussopt.multibody.Model` (planar) or a
    :class:`gaussopt.multibody.spatial.Model`; anything else gives ``{}``. Lengths
    are in ``length`` (the multibody models take SI inputs: m, kg, s)."""
    planar, spatial = _planar_model(), _spatial_model()
    if isinstance(model, planar):
        coord = {"x": length, "y": length, "phi": "rad"}
        rows = {"x": length, "y": length, "n": length, "phi": "rad"}
    elif isinstance(model, spatial):
        coord = {"x": length, "y": length, "z": length, "e0": "1", "e1": "1", "e2": "1",
                 "e3": "1"}
        rows = None
    else:
        return {}
    out = {c: coord[c.rsplit(".", 1)[-1]] for c in model.coordinates
           if c.rsplit(".", 1)[-1] in coord}
    row_units = []
    for label in model.labels:
        suffix = label[label.rfind("[") + 1:-1] if label.endswith("]") else ""
        if rows is not None:
            row_units.append(rows.get(suffix, ROWS_UNKNOWN))
        elif label.endswith(".norm"):               # p^T p - 1 of a body's Euler parameters
            row_units.append("1")
        elif suffix in _SPATIAL_LENGTH_ROWS:
            row_units.append(length)
        elif suffix == "L":
            row_units.append(f"{length}^2")
        else:
            row_units.append("1")
    out.update({"constraints": tuple(row_units), "energy": energy, "length": length})
    return out


def _system_of(problem):
    from gaussopt.model.system import System

    sysm = getattr(problem, "system", None)
    if sysm is not None and not isinstance(sysm, System):
        sysm = getattr(sysm, "system", None)
    return sysm if isinstance(sysm, System) else None


def problem_units(problem) -> dict:
    """The units of ``problem``'s quantities: ``problem.units`` over those of its
    multibody model (``problem.model``, :func:`model_units`). With frictional
    contacts, ``"constraints"`` also holds the unit of their slip rows
    (``units["contact_slip"]``, else :class:`Unknown`). Empty for None."""
    if problem is None:
        return {}
    stated = dict(getattr(problem, "units", None) or {})
    model = getattr(problem, "model", None)
    out = dict(model_units(model, length=stated.get("length", "m")) if model is not None else {})
    out.update(stated)
    sysm = _system_of(problem)
    if sysm is not None and any(c.frictional for c in sysm.contacts) and "constraints" in out:
        slip = out.get("contact_slip")
        slip = [slip] if isinstance(slip, str) else list(slip or [_SLIP])
        rows = out["constraints"]
        out["constraints"] = ((rows,) if isinstance(rows, str) else tuple(rows)) + tuple(slip)
    return out


def constraint_levels(problem) -> str:
    """``"holonomic"``, ``"nonholonomic"``, ``"acceleration"``, ``"mixed"`` or ``""`` (no
    rows): the level at which the problem's equality constraints and contacts are
    written (a contact's gap and slip are holonomic rows)."""
    sysm = _system_of(problem) if problem is not None else None
    if sysm is None:
        sysm = getattr(problem, "system", None)
    eqs = tuple(getattr(sysm, "equalities", ()))
    contacts = tuple(getattr(sysm, "contacts", ()))
    if not eqs and not contacts:
        return ""
    nh, nn = len(getattr(sysm, "holonomic", ())), len(getattr(sysm, "nonholonomic", ()))
    if nh == len(eqs):
        return "holonomic"
    if nn == len(eqs) and not contacts:
        return "nonholonomic"
    if nh == nn == 0 and not contacts:
        return "acceleration"
    return "mixed"


def _rows(units: Mapping) -> list:
    c = units.get("constraints")
    if c is None:
        return [ROWS_UNKNOWN]
    return [c] if isinstance(c, str) else [x if isinstance(x, Unknown) else str(x) for x in c]


def derived_unit(units: Mapping, quantity: str, coordinates: Sequence[str] = (),
                 level: str = "holonomic") -> str:
    """The unit of ``position_residual``, ``velocity_residual``, ``multipliers`` or
    ``constraint_force`` (``M a - F``) from ``units`` (an explicit entry wins).

    ``units["constraints"]`` are the units of the rows as written: ``Phi`` for
    holonomic rows (residuals ``Phi`` and ``dPhi/dt``, multipliers
    ``energy/Phi``), ``f(t, q, v)`` for nonholonomic ones (the velocity residual
    is ``f``, a multiplier ``energy/(f s)``). Rows of mixed levels need the
    explicit entries; without them, and without stated rows, the unit is
    :class:`Unknown` (words)."""
    if units.get(quantity):
        return str(units[quantity])
    e = unit_of(units, "energy", _ENERGY)
    if quantity == "constraint_force":
        if not coordinates:
            return energy_per(e, _COORDINATE)
        return join_units(energy_per(e, unit_of(units, c, _COORDINATE)) for c in coordinates)
    rows = _rows(units)
    if level == "holonomic":
        per = {"position_residual": rows, "velocity_residual": [per_second(u) for u in rows],
               "multipliers": [energy_per(e, u) for u in rows]}
    elif level == "nonholonomic":
        per = {"velocity_residual": rows,
               "multipliers": [energy_per(e, times_second(u)) for u in rows]}
    else:                                   # mixed levels: the rows' units do not say which;
        # acceleration-level rows (A a = b) have no residual at the position or velocity level
        words = {"position_residual": ROWS_UNKNOWN,
                 "velocity_residual": Unknown("units of the constraint rows' rates",
                                              "unit of the constraint rows' rates"),
                 "multipliers": energy_per(e, ROWS_UNKNOWN)}
        return words.get(quantity, ROWS_UNKNOWN)
    return join_units(per.get(quantity, []))
