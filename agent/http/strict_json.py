"""Request bodies parsed strictly: a JSON object with a duplicate key, or a number that is not a finite
float (NaN, Infinity, 1e400), is refused with 422 naming where it is ("record 3: lookahead: duplicate
key"), instead of Python's json taking the last duplicate and turning 1e400 into inf."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException, Request
from fastapi.routing import APIRoute


class BadJSON(HTTPException):
    """A body that is JSON but not acceptable JSON; ``loc`` is its place ("body", "records", 3, ...)."""

    def __init__(self, loc: tuple, message: str):
        super().__init__(422, message)
        self.loc, self.message = loc, message


class _Flagged(dict):
    problem: tuple[str, str]  # (key, message)


class _Number(float):
    """A number literal that is not a finite float, kept as text until its place is known."""

    text: str


def loads(body: bytes | str) -> Any:
    """``json.loads`` refusing duplicate keys and non-finite numbers (BadJSON naming the place)."""
    flagged = []

    def pairs(items: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for key, value in items:
            if key in out:
                marked = _Flagged(out)
                marked.problem = (key, "duplicate key in a JSON object")
                flagged.append(1)
                return marked
            out[key] = value
        return out

    def number(text: str) -> float:
        value = float(text)
        if math.isfinite(value):
            return value
        flagged.append(1)
        bad = _Number(0.0)
        bad.text = text
        return bad

    doc = json.loads(body, object_pairs_hook=pairs, parse_float=number, parse_constant=number)
    if flagged:
        _raise_first(doc, ("body",))
    return doc


def _raise_first(node: Any, loc: tuple) -> None:
    if isinstance(node, _Flagged):
        key, message = node.problem
        raise BadJSON(loc + (key,), message)
    if isinstance(node, _Number):
        raise BadJSON(loc, f"must be a finite number, got {node.text}")
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        _raise_first(child, loc + (key,))


class StrictRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """An APIRoute whose JSON bodies go through ``loads``."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Any:
            return await handler(StrictRequest(request.scope, request.receive))

        return strict
