"""Comparing two stats answers row by row: keys and counts exactly, measures within a tolerance."""

from __future__ import annotations

import pytest


def same(a: list[dict], b: list[dict], rel: float = 1e-9, abs: float = 1e-12) -> None:
    assert len(a) == len(b) and a  # never vacuous
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key, value in x.items():
            if isinstance(value, float):
                assert value == pytest.approx(y[key], rel=rel, abs=abs), key
            else:
                assert value == y[key], key
