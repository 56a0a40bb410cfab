"""A bounded mapping that forgets the least recently used entry: for caches of what the database holds,
where a miss costs one query and never a wrong answer."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; ``get`` and ``put`` make an entry the most recently used."""

    def __init__(self, size: int):
        if type(size) is not int or size < 1:
            raise ValueError(f"size must be a positive integer, got {size!r}")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, default: V | None = None) -> V | None:
        value = self._items.get(key, default)
        if key in self._items:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self.size:
            self._items.popitem(last=False)

    def update(self, items: dict[K, V]) -> None:
        for key, value in items.items():
            self.put(key, value)

    def clear(self) -> None:
        self._items = OrderedDict()  # a new table: clear() would keep the old one's size

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)
