"""Validation of detector configurations: one check per kind of value, each naming the field."""

from __future__ import annotations

import math
from typing import Any


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_count(name: str, value: Any, low: int = 1) -> None:
    if type(value) is not int or value < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")


def check_open_fraction(name: str, value: Any) -> None:
    """A probability strictly between 0 and 1."""
    if not _number(value) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}")


def check_at_least(name: str, value: Any, low: float) -> None:
    if not _number(value) or value < low:
        raise ValueError(f"{name} must be a finite number >= {low}, got {value!r}")


def check_positive(name: str, value: Any) -> None:
    if not _number(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
