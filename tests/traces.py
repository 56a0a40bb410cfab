"""Where a name survives in an object graph: for tests that an evicted domain left no trace."""

from __future__ import annotations

import types
from collections import deque
from typing import Any

_OPAQUE = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type, int, float, bool, bytes,
           type(None))


def traces(root: Any, marker: str, skip: tuple = ()) -> list[str]:
    """Paths (attribute / key chains from ``root``) to every string containing ``marker``: dict keys and
    values, attributes (``__dict__`` and ``__slots__``), items of lists, tuples, sets and deques, the
    object behind a bound method. Objects in ``skip`` are not entered (an owner reached through a callback)."""
    found: list[str] = []
    seen: set[int] = {id(x) for x in skip}
    todo: list[tuple[Any, str]] = [(root, "root")]
    while todo:
        obj, path = todo.pop()
        if isinstance(obj, str):
            if marker in obj:
                found.append(path)
            continue
        if isinstance(obj, _OPAQUE) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, dict):
            for k, v in obj.items():
                todo += [(k, f"{path}[key {k!r}]"), (v, f"{path}[{k!r}]")]
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            todo += [(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        elif isinstance(obj, types.MethodType):
            todo.append((obj.__self__, f"{path}.__self__"))
        else:
            for name in getattr(type(obj), "__slots__", ()):
                if hasattr(obj, name):
                    todo.append((getattr(obj, name), f"{path}.{name}"))
            for name, v in getattr(obj, "__dict__", {}).items():
                todo.append((v, f"{path}.{name}"))
    return found
