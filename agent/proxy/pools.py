"""Upstream pools: their engine, health, lookahead and the model versions they serve, checked in the background.

Each check asks the engine's ``/health`` (llama.cpp answers 503 while loading); a pool that fails, or that a
request could not reach (``failed``), is out of rotation until a check passes again. The first passing check
finds which engine serves the pool (agent/proxy/engines/: llama.cpp's ``/props``, SGLang's
``/get_model_info``, TensorRT-LLM's ``/prometheus/metrics``, vLLM's ``/version``); then the pages its adapter
names (llama.cpp: ``/props``, ``/v1/models``, ``/lora-adapters``, ``/slots``) are read on every check (a GGUF
hash is cached by path, size and modification time), so a target replaced behind the proxy, an adapter loaded
or switched, or an engine restarted with other flags, shows in the next check. Each time a pool comes into
rotation (the first time too) a start check asks its engine whether its answers will carry their per-request
figures (agent/proxy/startcheck.py). A speculating pool whose engine reports nothing per request gets
pool-level records from its counters at each check (agent/proxy/engines/pool_level.py); what is missing is
logged once per pool and shown in its ``view`` (agent/proxy/pool.py).

A pool that answered a request since its last check has shown it is up, and is checked only every
``BUSY_ROUNDS`` rounds: /slots waits for the engine's task loop between decoding steps, and a busy pool would
otherwise be asked three times per round while it serves (bench/proxy_health_cost.py measures what that
costs the request it serves). Versions of a busy pool are therefore at most ``BUSY_ROUNDS`` rounds old.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from typing import Callable

import aiohttp

from agent.proxy import engines
from agent.proxy.config import MAX_LOOKAHEAD, Upstream
from agent.proxy.engines.base import Found
from agent.proxy.inflight import InFlight, Met
from agent.proxy.pool import Pool
from agent.proxy.startcheck import start_check
from agent.proxy.versions import FileVersions, clip, with_adapters
from agent.scrape.pages import PageError
from specwatch_core.records import RecordError, StepRecord

log = logging.getLogger("specwatch.proxy")
NO_DRAFT = "none"  # draft version of records from a pool without a draft when no pool has one
BUSY_ROUNDS = 5  # a pool that answered since its last check is checked every this many rounds


class Pools:
    """The pools of one proxy. ``on_change`` is called after a check changed a pool's health, lookahead or
    versions (the router then restricts the policy's arms)."""

    def __init__(self, upstreams: tuple[Upstream, ...], files: FileVersions | None = None,
                 timeout: float = 2.0, on_change: Callable[[], None] | None = None):
        self.all = [Pool(u, u.lookahead) for u in upstreams]
        self.by_name = {p.name: p for p in self.all}
        self.files = files or FileVersions()
        self.timeout = timeout
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self.on_change = on_change
        self.on_record: Callable[[StepRecord], None] | None = None  # pool-level records go there
        self.pod: str | None = None
        self.meter = InFlight()  # every pool's inspected requests (pools sharing one machine meet them all)

    def enter(self, pool: Pool) -> tuple[Met, Met]:
        """An inspected request is sent to ``pool``: counted on its meter and on every pool's."""
        return pool.meter.enter(), self.meter.enter()

    def leave(self, pool: Pool, met: tuple[Met, Met], ended: bool = True) -> None:
        """It ended (``ended``: its lifetime load on every pool counts toward the next request's, which only
        pools sharing one machine read, ``InFlight.ahead``; not so for one that failed over to another pool)."""
        pool.meter.leave()
        self.meter.leave(met[1] if ended else None)

    def healthy(self) -> list[Pool]:
        return [p for p in self.all if p.healthy]

    def draft_of(self, target_version: str | None) -> str:
        """The draft version speculative pools serve with ``target_version`` (records of the ``off`` pool carry
        it, as the in-process decoder's K = 0 steps carry its draft's: the pair is what is being judged)."""
        for p in self.all:
            if p.lookahead > 0 and p.draft_version and p.target_version == target_version:
                return p.draft_version
        return NO_DRAFT

    def failed(self, pool: Pool, error: str) -> None:
        """A request could not reach ``pool``: out of rotation now; the next passing check brings it back."""
        was, pool.healthy, pool.error, pool.checked = pool.healthy, False, error, time.time()
        if was:
            log.warning("pool %s out of rotation: %s", pool.name, error)
            if self.on_change is not None:
                self.on_change()

    async def check_all(self, client: aiohttp.ClientSession, busy_rounds: int = 1) -> None:
        """Check every pool, except one that answered since its last check and was checked within the last
        ``busy_rounds`` rounds (1: every pool, every round)."""
        due = []
        for p in self.all:
            if p.healthy and p.answered and p.skipped + 1 < busy_rounds:
                p.skipped += 1
            else:
                due.append(p)
            p.answered = False
        changed = await asyncio.gather(*(self.check(p, client) for p in due))
        if any(changed) and self.on_change is not None:
            self.on_change()

    async def run(self, client: aiohttp.ClientSession, interval: float) -> None:
        """Check every pool every ``interval`` seconds until cancelled, the first time ``interval`` from now
        (the proxy's start has just checked them all: a second check at once would only load the engines,
        and could end after something else, a request that found a pool down, had changed its state)."""
        started = time.monotonic()
        while True:
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
            started = time.monotonic()
            try:
                await self.check_all(client, BUSY_ROUNDS)
            except Exception:  # a bug in a check must not end health checking
                log.exception("pool health check failed")

    async def check(self, pool: Pool, client: aiohttp.ClientSession) -> bool:
        """Check one pool; True when its health, lookahead or versions changed."""
        before = (pool.healthy, pool.lookahead, pool.target_version, pool.draft_version)
        pool.skipped = 0
        try:
            async with client.get(pool.base + "/health", timeout=self._timeout) as answer:
                await answer.read()
                if answer.status != 200:
                    raise _Unhealthy(f"/health answered {answer.status}")
            await self._read_versions(pool, client)
        except (aiohttp.ClientError, asyncio.TimeoutError, _Unhealthy) as exc:
            if pool.healthy:
                log.warning("pool %s out of rotation: %s", pool.name, _describe(exc))
            pool.healthy, pool.error = False, _describe(exc)
        else:
            if not pool.healthy:
                log.info("pool %s in rotation (K=%d, target %s, draft %s)", pool.name, pool.lookahead,
                         pool.target_version, pool.draft_version)
                self._start_check(pool, client)  # it came up: will its answers carry their figures?
                if pool.counters is not None and pool.counters.first is None:
                    # pool-level from the start: read the counters now, before it takes a request, so that
                    # every draft it makes in rotation is in a later delta (not in the first reading)
                    await self._pool_level(pool, client)
            pool.healthy, pool.error = True, None
        pool.checked = time.time()
        after = (pool.healthy, pool.lookahead, pool.target_version, pool.draft_version)
        if before[2] is not None and after[2] is not None and before[2] != after[2]:
            log.warning("pool %s: target changed %s -> %s", pool.name, before[2], after[2])
        return before != after

    async def _read_versions(self, pool: Pool, client: aiohttp.ClientSession) -> None:
        if pool.engine is None:
            await self._detect(pool, client)
        paths = pool.engine.PAGES
        pages = dict(zip(paths, await asyncio.gather(*(_json(client, pool.base + p, self._timeout) for p in paths))))
        for path, older in getattr(pool.engine, "FALLBACK", {}).items():
            if pages.get(path) is None:  # a release before the page was renamed
                pages[path] = await _json(client, pool.base + older, self._timeout)
        found: Found = pool.engine.versions(pages)
        target = found.target
        if target is not None and found.target_is_path:
            target = await asyncio.to_thread(self.files.of, target)
        if target is None:
            raise _Unhealthy(f"the {pool.engine.TITLE} pages ({', '.join(paths)}) name no model")
        if found.adapters:  # LoRA adapters applied: another model than the base alone
            target = await asyncio.to_thread(with_adapters, target, found.adapters, self.files)
        draft, draft_path = pool.upstream.draft_version, found.draft_path
        if draft is not None and os.path.isfile(draft):  # --draft-version may name the draft GGUF itself
            draft_path = draft_path or draft
        if draft_path is not None:
            # a file the engine names is hashed when the proxy sees it; a model id (SGLang) is its version
            draft = await asyncio.to_thread(self.files.of, draft_path) if found.target_is_path or \
                os.path.isfile(draft_path) else clip(draft_path)
        self._lookahead(pool, found.lookahead, found.speculates, draft_path)
        pool.pages = pages
        pool.target_version = target
        pool.draft_version = draft if pool.lookahead > 0 else None
        if pool.counters is not None:
            await self._pool_level(pool, client)

    async def _detect(self, pool: Pool, client: aiohttp.ClientSession) -> None:
        """Which engine serves the pool, from its pages (llama.cpp when none says)."""
        probes = {}
        for path in engines.PROBES:
            probes[path] = await _json(client, pool.base + path, self._timeout, text=path.endswith("metrics"))
            found = engines.detect(probes)
            if found is not None:
                break
        pool.engine = found or engines.DEFAULT
        log.info("pool %s: %s%s", pool.name, pool.engine.TITLE, "" if found else " (no engine recognised)")

    def _start_check(self, pool: Pool, client: aiohttp.ClientSession) -> None:
        """Ask the engine, in the background, whether its answers will carry their per-request figures
        (agent/proxy/startcheck.py); what they lack is reported once, now rather than at the first answer."""
        if pool.starting is None or pool.starting.done():
            pool.starting = start_check(pool, client)

    async def stop(self) -> None:
        """Cancel start checks still running (the proxy is stopping)."""
        for pool in self.all:
            if pool.starting is not None and not pool.starting.done():
                pool.starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pool.starting

    async def _pool_level(self, pool: Pool, client: aiohttp.ClientSession) -> None:
        """The pool's counters since the last check as one pool-level record."""
        page = await _json(client, pool.base + pool.engine.COUNTERS, self._timeout, text=True)
        if not isinstance(page, str):
            return
        served = pool.served(pool.draft_version or self.draft_of(pool.target_version), self.pod)
        try:
            found = pool.counters.take(page, time.time(), served)
        except (PageError, RecordError) as exc:
            if str(exc) != pool.counters.problem:  # once while it lasts, not at every check
                log.warning("pool %s: no pool-level record from %s: %s", pool.name, pool.engine.COUNTERS, exc)
            pool.counters.problem = str(exc)
            return
        pool.counters.problem = None
        if found is not None and self.on_record is not None:
            self.on_record(found)

    @staticmethod
    def _lookahead(pool: Pool, reported: int | None, speculates: bool | None, draft_path: str | None) -> None:
        """What the engine reports about its speculation overrides the pool's name (a mismatch is logged): a
        pool named k8 whose engine drafts up to 64 a step (llama.cpp n-gram, --spec-default) records at K=64,
        so its requests are stored rather than refused for drafting more than 8 a step."""
        named = pool.upstream.lookahead
        if speculates is False or (reported is not None and (named > 0 or draft_path is not None)):
            k = 0 if speculates is False else reported
            if k > MAX_LOOKAHEAD:  # a store takes K up to 64: steps that draft more are refused, the rest kept
                log.warning("pool %s: the engine reports draft length %d; recording at K=%d, the most a store "
                            "takes", pool.name, k, MAX_LOOKAHEAD)
                k = MAX_LOOKAHEAD
            if k != pool.lookahead:
                log.warning("pool %s: the engine reports %s, not K=%d as the name says; recording K=%d", pool.name,
                            "no speculation" if speculates is False else f"draft length {k}", named, k)
            pool.lookahead = k
        elif speculates and named == 0 and pool.lookahead == 0:
            log.warning("pool %s: the engine speculates but reports no draft length; its drafted tokens are "
                        "refused (name the pool kN)", pool.name)
        else:
            pool.lookahead = named


class _Unhealthy(Exception):
    pass


async def _json(client: aiohttp.ClientSession, url: str, timeout: aiohttp.ClientTimeout, text: bool = False) -> object:
    """The page's JSON (``text``: its text), None when it does not answer 200 with one."""
    async with client.get(url, timeout=timeout) as answer:
        body = await answer.read()
    if answer.status != 200:
        return None
    if text:
        return body.decode("utf-8", "replace")
    try:
        return json.loads(body)
    except ValueError:
        return None


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
