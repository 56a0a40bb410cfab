"""The replay driver: send a mix of prompt sets through an OpenAI-compatible endpoint at a given concurrency,
the mix following its schedule (a traffic shift), every request carrying its domain in the header
`specwatch proxy` reads.

``concurrency`` workers each send one request at a time. When a worker starts a request, the domain is drawn
from the mix in force at that moment (seeded, so two runs with the same seed and pace send the same
sequence), and the prompt is that domain's next one (its held-out split by default, in a seeded order,
cycling when exhausted). The run ends after ``requests`` requests or when ``duration`` seconds have passed
(whichever comes first; requests under way finish). A failed request is a result with its error, never an
exception: a replay measures an endpoint, failures included.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Callable

import httpx

from agent.workload import prompts as prompt_sets
from agent.workload.mix import Schedule, choose
from agent.workload.prompts import Prompt
from agent.workload.requests import APIS, Sampling, body, draft_counts, generated_tokens, prompt_tokens

# The header `specwatch proxy` takes a request's domain from (DESIGN.md; agent/proxy/domains.py reads it, a
# floor above this module, so the name is written here too and a test keeps the two equal).
DOMAIN_HEADER = "X-Specwatch-Domain"
POOL_HEADER = "x-specwatch-pool"  # the pool `specwatch proxy` sent a request to


@dataclass(frozen=True)
class ReplayConfig:
    """Where to send, what and how much. ``url`` is the endpoint's base (``http://127.0.0.1:8080``)."""

    url: str
    schedule: Schedule
    api: str = "chat"
    concurrency: int = 1
    requests: int | None = None
    duration: float | None = None
    split: str | None = "heldout"
    sampling: Sampling = field(default_factory=Sampling)
    seed: int = 0
    timeout: float = 300.0
    token: str | None = None  # sent as a bearer token (`specwatch serve` with SPECWATCH_TOKEN)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url: expected http://HOST:PORT or https://..., got {self.url!r}")
        if self.api not in APIS:
            raise ValueError(f"api: expected one of {', '.join(APIS)}, got {self.api!r}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency: must be >= 1, got {self.concurrency}")
        if self.requests is None and self.duration is None:
            raise ValueError("requests: give a number of requests, a duration, or both")
        if self.requests is not None and self.requests < 1:
            raise ValueError(f"requests: must be >= 1, got {self.requests}")
        if self.duration is not None and not self.duration > 0:
            raise ValueError(f"duration: must be > 0 seconds, got {self.duration}")
        if self.timeout <= 0:
            raise ValueError(f"timeout: must be > 0 seconds, got {self.timeout}")


@dataclass(frozen=True)
class Result:
    """One request: when it started, how long it took, what came back."""

    index: int  # in start order, from 0
    domain: str
    prompt_id: str
    phase: int  # the schedule's phase in force when it started
    started: float  # seconds into the run
    seconds: float  # wall time at the client
    status: int | None = None
    tokens: int = 0
    prompt_tokens: int = 0
    pool: str | None = None
    error: str | None = None
    drafted: int = 0  # the engine's own count, when its answer carries one (llama.cpp's timings)
    accepted: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Replay:
    """A finished run: every result in start order, the run's wall time, the most requests in flight, and
    whether it was stopped early (Ctrl-C)."""

    results: list[Result]
    seconds: float
    max_in_flight: int
    interrupted: bool = False


class Prompts:
    """Each domain's prompts in a seeded order, handed out in turn and cycling."""

    def __init__(self, sets: dict[str, list[Prompt]], seed: int):
        empty = [d for d, ps in sets.items() if not ps]
        if empty:
            raise ValueError(f"mix: no prompts for {empty[0]!r} in this split")
        self._sets = {d: random.Random(f"{seed}:{d}").sample(ps, len(ps)) for d, ps in sets.items()}
        self._next = dict.fromkeys(sets, 0)

    def next(self, domain: str) -> Prompt:
        ps = self._sets[domain]
        i = self._next[domain]
        self._next[domain] = i + 1
        return ps[i % len(ps)]


def prompt_sets_for(schedule: Schedule, split: str | None) -> dict[str, list[Prompt]]:
    """The prompt set of every domain the schedule sends to; ValueError naming a domain without one."""
    known = prompt_sets.domains()
    unknown = [d for d in schedule.domains if d not in known]
    if unknown:
        raise ValueError(f"mix: no prompt set for {unknown[0]!r}; the sets are {', '.join(known)}")
    return {d: prompt_sets.load(d, split) for d in schedule.domains}


def replay(config: ReplayConfig, sets: dict[str, list[Prompt]] | None = None,
           progress: Callable[[Result], None] | None = None) -> Replay:
    """Run the replay; ``progress`` is called with every result as it comes. Ctrl-C stops it: the requests
    that finished by then are the run (``interrupted`` set)."""
    gathered = _Gathered()
    try:
        asyncio.run(replay_async(config, sets, progress, gathered))
    except KeyboardInterrupt:
        gathered.interrupted = True
    return gathered.replay()


class _Gathered:
    """What a run has gathered so far (kept outside the event loop, so an interrupted run keeps it)."""

    def __init__(self) -> None:
        self.results: list[Result] = []
        self.in_flight = self.most = 0
        self.began = time.monotonic()
        self.interrupted = False

    def replay(self) -> Replay:
        return Replay(sorted(self.results, key=lambda r: r.index), time.monotonic() - self.began, self.most,
                      self.interrupted)


async def replay_async(config: ReplayConfig, sets: dict[str, list[Prompt]] | None = None,
                       progress: Callable[[Result], None] | None = None,
                       gathered: _Gathered | None = None) -> Replay:
    sets = sets if sets is not None else prompt_sets_for(config.schedule, config.split)
    missing = [d for d in config.schedule.domains if d not in sets]
    if missing:
        raise ValueError(f"mix: no prompt set given for {missing[0]!r}")
    picker, rng = Prompts(sets, config.seed), random.Random(config.seed)
    run = gathered if gathered is not None else _Gathered()
    run.began = time.monotonic()
    claimed = 0

    def claim() -> tuple[int, float] | None:
        nonlocal claimed
        elapsed = time.monotonic() - run.began
        if (config.requests is not None and claimed >= config.requests) or (
                config.duration is not None and elapsed >= config.duration):
            return None
        claimed += 1
        return claimed - 1, elapsed

    async def worker(client: httpx.AsyncClient) -> None:
        while (slot := claim()) is not None:
            index, elapsed = slot
            phase = config.schedule.phase_at(elapsed)
            domain = choose(config.schedule.phases[phase][1], rng.random())
            prompt = picker.next(domain)
            run.in_flight += 1
            run.most = max(run.most, run.in_flight)
            try:
                result = await send(client, config, prompt, index, phase, elapsed)
            finally:
                run.in_flight -= 1
            run.results.append(result)
            if progress is not None:
                progress(result)

    headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
    limits = httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency)
    async with httpx.AsyncClient(base_url=config.url.rstrip("/"), timeout=config.timeout, limits=limits,
                                 headers=headers) as client:
        await asyncio.gather(*(worker(client) for _ in range(config.concurrency)))
    return run.replay()


async def send(client: httpx.AsyncClient, config: ReplayConfig, prompt: Prompt, index: int, phase: int,
               elapsed: float) -> Result:
    """One request; its result, failures included."""
    request_id = f"replay-{index}-{prompt.id}"
    start = time.monotonic()
    base = {"index": index, "domain": prompt.domain, "prompt_id": prompt.id, "phase": phase, "started": elapsed}
    try:
        answer = await client.post(APIS[config.api], json=body(config.api, prompt, config.sampling, request_id),
                                   headers={DOMAIN_HEADER: prompt.domain, "X-Request-Id": request_id})
        seconds = time.monotonic() - start
        pool = answer.headers.get(POOL_HEADER)
        if answer.status_code >= 400:
            return Result(**base, seconds=seconds, status=answer.status_code, pool=pool,
                          error=f"HTTP {answer.status_code}: {' '.join(answer.text.split())[:200]}")
        data = answer.json()
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        return Result(**base, seconds=seconds, status=answer.status_code, pool=pool,
                      tokens=generated_tokens(config.api, data), prompt_tokens=prompt_tokens(config.api, data),
                      **draft_counts(data))
    except (httpx.HTTPError, ValueError) as exc:  # ValueError: an answer that is not JSON
        return Result(**base, seconds=time.monotonic() - start, error=f"{type(exc).__name__}: {exc}"[:300])
