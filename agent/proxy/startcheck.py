"""The start check: when a pool comes into rotation (at the proxy's start, and each time it comes back), ask its
engine whether its answers will carry their per-request speculation figures, so that a start-up flag left off
is reported once, at start, rather than at the pool's first answer; the request path never waits for it.

Each adapter (agent/proxy/engines/) says how to ask: ``startup(pages, lookahead)`` names the requests, in
order (path, and a JSON body to POST or None to GET), and ``started(answers, lookahead)`` reads what came back
so far: True (its answers carry them), False (they never will: its ``MISSING`` is reported and, where the
engine has counters, the pool gets pool-level records), None (cannot tell yet: the next request is asked, and
when none is left the pool's first answer tells, as before). TensorRT-LLM needs no request (it never reports
per request); vLLM reads its configuration where the server shows it, else sends one 1-token completion.
"""

from __future__ import annotations

import asyncio
import json
import logging

import aiohttp

from agent.proxy.engines.base import Missing
from agent.proxy.pool import Pool

log = logging.getLogger("specwatch.proxy")
ASK_SECONDS = 30.0  # a 1-token completion on an engine that is busy or still warming up


def start_check(pool: Pool, client: aiohttp.ClientSession) -> asyncio.Task | None:
    """Settle at once what the pool's engine says without being asked; else a task that asks it."""
    verdict = pool.engine.started({}, pool.lookahead)
    if verdict is not None or not pool.engine.startup(pool.pages, pool.lookahead):
        settle(pool, verdict)
        return None
    return asyncio.ensure_future(_ask_all(pool, client))


def settle(pool: Pool, verdict: bool | None) -> None:
    if verdict is True:
        pool.carries()
    elif verdict is False:
        pool.lacks(Missing(*pool.engine.MISSING), at_start=True)
    elif pool.lookahead > 0:
        log.info("pool %s (%s): could not tell at start whether its answers carry per-request figures; its first "
                 "answer will tell", pool.name, pool.engine.TITLE)


async def _ask_all(pool: Pool, client: aiohttp.ClientSession) -> None:
    answers: dict[str, object] = {}
    verdict = None
    try:
        for path, body in pool.engine.startup(pool.pages, pool.lookahead):
            answers[path] = await _ask(client, pool.base + path, body)
            verdict = pool.engine.started(answers, pool.lookahead)
            if verdict is not None:
                break
    except Exception:  # a bug here must not stop the proxy; the first answer still tells
        log.exception("pool %s: start check failed", pool.name)
        return
    settle(pool, verdict)


async def _ask(client: aiohttp.ClientSession, url: str, body: dict | None) -> object:
    """The JSON answer of a GET (``body`` None) or POST, None when it does not answer 200 with JSON in time."""
    timeout = aiohttp.ClientTimeout(total=ASK_SECONDS)
    try:
        if body is None:
            request = client.get(url, timeout=timeout)
        else:
            request = client.post(url, json=body, timeout=timeout)
        async with request as answer:
            text = await answer.read()
            if answer.status != 200:
                return None
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
