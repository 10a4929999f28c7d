"""Small checks and array helpers that every layer shares (no layer's data types).

Each check raises a :class:`~gaussopt.ModelError` that names the argument, what was
expected and what was found.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional

import numpy as np

from gaussopt.core.exceptions import ModelError

__all__ = ["found", "as_state", "check_real", "check_count", "diagonal_of"]


def found(x: Any) -> str:
    """``repr(x)`` cut to 60 characters, with its type: what an error message says it found."""
    r = repr(x)
    return (r if len(r) <= 60 else r[:57] + "...") + f" ({type(x).__name__})"


def check_real(value: Any, label: str, *, positive: bool = True, allow_zero: bool = False,
               allow_inf: bool = False, hint: str = "") -> float:
    """``value`` as a float; ModelError unless it is a real number (not a bool, not a
    string), finite (or ``inf`` when ``allow_inf``) and positive (or zero when
    ``allow_zero``) when ``positive``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ModelError(f"`{label}` must be a real number, found {found(value)}"
                         f"{'; ' + hint if hint else ''}.")
    x = float(value)
    bad = np.isnan(x) or (np.isinf(x) and not allow_inf)
    if positive:
        bad = bad or x < 0 or (x == 0 and not allow_zero)
    if bad:
        what = ("positive" if not allow_zero else "non-negative") if positive else "finite"
        what += " (inf allowed)" if allow_inf else ""
        raise ModelError(f"`{label}` must be {what}, found {x!r}{'; ' + hint if hint else ''}.")
    return x


def check_count(value: Any, label: str, *, minimum: int = 1) -> int:
    """``value`` as an int; ModelError unless it is an integer (not a bool) ``>= minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ModelError(f"`{label}` must be an integer >= {minimum}, found {found(value)}.")
    if int(value) < minimum:
        raise ModelError(f"`{label}` must be an integer >= {minimum}, found {int(value)}.")
    return int(value)


def as_state(x, n: int, label: str) -> np.ndarray:
    """Validate a state vector: shape (n,), finite."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as e:
        raise ModelError(f"`{label}` must be an array of {n} floats, found {x!r}.") from e
    if arr.shape != (n,):
        raise ModelError(f"`{label}` must have shape ({n},), found {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"`{label}` contains NaN or inf: {arr}.")
    return arr


def diagonal_of(M: np.ndarray) -> Optional[np.ndarray]:
    """The diagonal of a square matrix that has no nonzero entry off it (a copy), else
    None (an empty matrix: None)."""
    d = np.diag(M)
    return d.copy() if M.size and np.count_nonzero(M) == np.count_nonzero(d) else None
