"""Idempotency-Key for POST /v1/steps: a retry of a request that succeeded is answered with its first
answer and stores nothing twice.

A client sends ``Idempotency-Key: <key>`` (printable, 1..128 characters) and the same key again when it
retries, e.g. after a timeout that left it unsure whether the first attempt arrived. Within ``ttl``
seconds (10 minutes) of the first success, a request with the same key and the same body gets that first
answer again (with ``Idempotent-Replayed: true``); the same key with another body gets 422. A duplicate
that arrives while the first is still being handled waits for it. Only successes are remembered: a
request refused (422, 503) stored nothing, so its retry is handled afresh.

Keys are kept apart per credential (the bearer token presented), so clients with different tokens never
see each other's answers. Memory is bounded: at most ``max_entries`` answers (least recently used
forgotten first; a forgotten key is handled afresh), each a key, a body digest and a small JSON answer:
about 840 bytes with 128-character keys, so the default 16384 entries take about 14 MB (tracemalloc).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
TTL_SECONDS = 600.0
MAX_KEY_LENGTH = 128


class InvalidKey(ValueError):
    """The header's value is not a usable key (the message says why)."""


class KeyReused(ValueError):
    """The key was used before with a different body."""


def check_key(value: str) -> str:
    """The key, or InvalidKey naming what is wrong with it."""
    if not 1 <= len(value) <= MAX_KEY_LENGTH:
        raise InvalidKey(f"must be 1..{MAX_KEY_LENGTH} characters, got {len(value)}")
    if not value.isprintable() or not value.isascii():
        raise InvalidKey("must be printable ASCII text")
    return value


def scope_of(credential: str | None) -> str:
    """The namespace of a client's keys: a digest of its bearer token ('' without one)."""
    return hashlib.sha256(credential.encode()).hexdigest()[:32] if credential else ""


@dataclass
class _Entry:
    digest: bytes
    done: asyncio.Future
    expires: float = float("inf")
    answer: Any = field(default=None)


class IdempotencyCache:
    """Remembered answers by (scope, key). Use from one event loop (the server's): no locks needed."""

    def __init__(self, max_entries: int = 16_384, ttl: float = TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        if type(max_entries) is not int or max_entries < 1:
            raise ValueError(f"max_entries must be a positive integer, got {max_entries!r}")
        if not ttl > 0:
            raise ValueError(f"ttl must be positive seconds, got {ttl!r}")
        self.max_entries, self.ttl, self._clock = max_entries, ttl, clock
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self.replays = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def run(self, scope: str, key: str, body: bytes,
                  handle: Callable[[], Awaitable[Any]]) -> tuple[Any, bool]:
        """``(answer, replayed)``: the remembered answer for (scope, key), else ``await handle()``'s,
        remembered when it returns (an exception propagates and nothing is remembered). KeyReused when
        the key came with another body."""
        digest = hashlib.sha256(body).digest()
        ident = (scope, key)
        while True:
            entry = self._lookup(ident)
            if entry is None:
                break
            if entry.digest != digest:
                raise KeyReused("was used with a different request body; use a new key for new records")
            if not entry.done.done():
                await asyncio.shield(entry.done)  # the first is in flight: wait for its outcome
                continue  # a failure removed the entry (handle afresh); a success is found next round
            self.replays += 1
            return entry.answer, True
        entry = _Entry(digest, asyncio.get_running_loop().create_future())
        self._entries[ident] = entry
        self._bound()
        try:
            answer = await handle()
        except BaseException:
            if self._entries.get(ident) is entry:
                del self._entries[ident]
            entry.done.set_result(None)
            raise
        entry.answer, entry.expires = answer, self._clock() + self.ttl
        entry.done.set_result(None)
        return answer, False

    def _lookup(self, ident: tuple[str, str]) -> _Entry | None:
        entry = self._entries.get(ident)
        if entry is None:
            return None
        if entry.expires <= self._clock():
            del self._entries[ident]
            return None
        self._entries.move_to_end(ident)
        return entry

    def _bound(self) -> None:
        """Forget the least recently used answers beyond ``max_entries`` (never one still in flight)."""
        excess = len(self._entries) - self.max_entries
        victims: list[tuple[str, str]] = []
        for ident, entry in self._entries.items():
            if len(victims) >= excess:
                break
            if entry.done.done():
                victims.append(ident)
        for ident in victims:
            del self._entries[ident]
