"""Hyper-parameter rules shared by the boosters and the learners: each refuses a bad value at
construction with a ``ValueError`` naming the parameter, its value and what is allowed — never
a silent coercion (``stall_window=2.5`` is not 2, ``step=True`` is not 1.0).

>>> positive_int("n_learners", 1.5)
Traceback (most recent call last):
...
ValueError: n_learners must be an integer >= 1, got 1.5
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["flag", "integer", "positive_float", "positive_int"]


def integer(name: str, value: Any, minimum: int | None = None) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) ``>= minimum``, else a
    ``ValueError``."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or (minimum is not None and value < minimum)):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ValueError(f"{name} must be an integer{bound}, got {value!r}")
    return int(value)


def positive_int(name: str, value: Any) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) ``>= 1``, else a ``ValueError``."""
    return integer(name, value, 1)


def positive_float(name: str, value: Any) -> float:
    """``value`` as a ``float`` if it is a finite real number (not a bool) ``> 0``."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or value <= 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def flag(name: str, value: Any) -> bool:
    """``value`` if it is a bool, else a ``ValueError``."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value
