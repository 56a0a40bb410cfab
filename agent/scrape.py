"""Record steps of an engine that cannot call the sidecar, from the deltas of its vLLM counters.

Between two scrapes vLLM's counters give, per engine: D drafts, T drafted tokens, A accepted tokens and
per_pos[i] (drafts accepted at position i, 0-based). Since acceptance is a prefix, the number of drafts that
accepted exactly m tokens is per_pos[m-1] - per_pos[m] (per_pos[-1] = D, per_pos[K] = 0): the histogram of
accepted lengths is known exactly. ``synthesize`` turns it into D StepRecords whose accepted counts give back
every per_pos delta and A, and whose lookaheads (each in max(accepted, 1)..K) sum to T, as even as that
allows (vLLM drafts K tokens per draft unless the proposer offers fewer, then T = D * K and every record
has K). Timing is unknown: draft_seconds = verify_seconds = 0, the mark of a record without timing
(alerts/metrics.py leaves such records out of latency histograms). The first scrape is a baseline; a counter
restart (new ``_created`` time or a counter that went down) counts everything since the restart.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from agent.records import RecordError, StepRecord
from agent.vllm_page import EngineKey, PageError, SpecCounters, parse_page
from storage import StoreError

log = logging.getLogger(__name__)
UNKNOWN_VERSION = "unknown"
POST_BATCH = 2000  # records per POST /v1/steps: well under the sidecar's default 4 MiB body limit


def accepted_lengths(delta: SpecCounters) -> list[int]:
    """counts[m]: drafts that accepted exactly m tokens, m = 0..K (from a consistent delta)."""
    p = delta.per_pos
    return [b - a for b, a in zip((delta.drafts, *p), (*p, 0))]


def lookahead_groups(delta: SpecCounters) -> list[tuple[int, int, int]]:
    """(accepted, lookahead, drafts) groups: accepted lengths exactly as counted, lookaheads summing to T.

    Water-filling: each draft starts at max(accepted, 1) tokens, then the lowest are raised to a common
    level L, and the remainder adds one token to drafts at L, those that accepted most first."""
    counts, k, total = accepted_lengths(delta), len(delta.per_pos), delta.draft_tokens
    floor = [max(m, 1) for m in range(k + 1)]

    def tokens(level: int) -> int:
        return sum(n * max(lo, level) for n, lo in zip(counts, floor))

    level = max(lv for lv in range(1, k + 1) if tokens(lv) <= total)
    extra = total - tokens(level)
    groups = []
    for m in range(k, -1, -1):
        n = counts[m]
        if not n:
            continue
        base = max(floor[m], level)
        raised = min(extra, n) if base == level and level < k else 0
        extra -= raised
        groups += [(m, base + 1, raised), (m, base, n - raised)]
    return [g for g in groups if g[2]]


def synthesize(delta: SpecCounters, *, domain: str, target_version: str, draft_version: str,
               timestamp: float | None = None, pod: str | None = None) -> list[StepRecord]:
    """One StepRecord per draft in ``delta`` (see the module docstring); raises ValueError if inconsistent."""
    problem = delta.problem()
    if problem:
        raise ValueError(problem)
    records = []
    for accepted, k, n in lookahead_groups(delta):
        mask = [1] * accepted + [0] * (k - accepted)
        records += [StepRecord(domain=domain, lookahead=k, accepted=accepted, emitted=accepted + 1,
                               draft_seconds=0.0, verify_seconds=0.0, target_version=target_version,
                               draft_version=draft_version, accepted_mask=mask, timestamp=timestamp, pod=pod)
                    for _ in range(n)]
    # Grouped by accepted length, a drift detector downstream would read a run of rejections then a run of
    # full acceptances as a change; a seeded shuffle keeps the sums and the output reproducible.
    random.Random(delta.drafts * 1_000_003 + delta.accepted).shuffle(records)
    return records


class Sink(Protocol):
    def write(self, records: Sequence[StepRecord]) -> None: ...


@dataclass
class ScrapeResult:
    """What one scrape did: records written and, per engine, why nothing was (baseline, held, restart)."""

    records: int = 0
    notes: list[str] = field(default_factory=list)


class Scraper:
    """Keeps the last counters of each engine on a page and writes the steps between scrapes to ``sink``.

    A delta that cannot come from whole drafts (a page caught mid-update) is held: the baseline stays, and
    the next scrape resolves it. After ``max_held`` held scrapes in a row the engine is re-baselined (those
    counts are dropped, with a warning)."""

    def __init__(self, sink: Sink, *, domain: str, target_version: str | None = None,
                 draft_version: str | None = None, pod: str | None = None, max_held: int = 4,
                 clock: Callable[[], float] = time.time):
        self.sink, self.domain, self.pod = sink, domain, pod
        self.target_version, self.draft_version = target_version, draft_version
        self.max_held = max_held
        self._clock = clock
        self._baseline: dict[EngineKey, SpecCounters] = {}
        self._held: dict[EngineKey, int] = {}
        self._last: float | None = None  # time of the last successful scrape

    def observe_page(self, text: str, now: float | None = None) -> ScrapeResult:
        """Parse a page (PageError if it has no spec-decode counters), write the deltas, then move the
        baselines: when the write raises, they stay, and the next scrape writes those counts again."""
        now = self._clock() if now is None else now
        current = parse_page(text)
        result, records, moves, held = ScrapeResult(), [], {}, {}
        for key, counters in sorted(current.items()):
            delta, note = self._delta(key, counters)
            if note:
                result.notes.append(f"{_name(key)}: {note}")
            if delta is None:
                moves[key] = counters
                continue
            problem = delta.problem()
            if problem and self._held.get(key, 0) < self.max_held:
                held[key] = self._held.get(key, 0) + 1
                result.notes.append(f"{_name(key)}: held ({problem}); retrying at the next scrape")
                continue
            if problem:
                log.warning("%s: dropping counts that never became consistent: %s", _name(key), problem)
                result.notes.append(f"{_name(key)}: re-baselined ({problem})")
            else:
                target = self.target_version or key[0] or UNKNOWN_VERSION
                records += synthesize(delta, domain=self.domain, target_version=target,
                                      draft_version=self.draft_version or UNKNOWN_VERSION, timestamp=now,
                                      pod=self.pod)
            moves[key], held[key] = counters, 0
        if records:
            self.sink.write(records)
        self._baseline.update(moves)
        self._held.update(held)
        self._last = now
        result.records = len(records)
        return result

    def _delta(self, key: EngineKey, counters: SpecCounters) -> tuple[SpecCounters | None, str | None]:
        before = self._baseline.get(key)
        if before is None:
            # An engine that started after our last scrape: all its counts are new. Otherwise a baseline.
            if self._last is not None and counters.created is not None and counters.created >= self._last:
                return counters.since_start(), "new engine, counted since its start"
            return None, "baseline"
        delta = counters.minus(before)
        if delta is None:
            return counters.since_start(), "counters restarted, counted since the restart"
        return delta, None


def _name(key: EngineKey) -> str:
    return f"model_name={key[0]!r} engine={key[1]!r}"


def fetch(client: httpx.Client, url: str) -> str:
    """GET a metrics page; raises httpx.HTTPError on a transport failure or a non-2xx status."""
    response = client.get(url, headers={"Accept": "text/plain;version=0.0.4"})
    response.raise_for_status()
    return response.text


class StoreSink:
    """Writes records through Store.write_records and flushes closed windows."""

    def __init__(self, store):
        self.store = store

    def write(self, records: Sequence[StepRecord]) -> None:
        self.store.write_records(records)
        self.store.flush()


class Rejected(ValueError):
    """The sidecar refused the records (4xx: invalid records, a wrong token): retrying cannot help."""


class SidecarSink:
    """POSTs records to a running sidecar's /v1/steps in batches; raises httpx.HTTPError on failure.

    Each batch carries an ``Idempotency-Key`` of its own and keeps it over up to ``attempts`` tries (a
    transport error, 429 or 5xx; waiting Retry-After, at most ``max_wait`` seconds): a batch whose first
    answer was lost is stored once, not twice."""

    def __init__(self, client: httpx.Client, base_url: str, token: str | None = None, *, attempts: int = 3,
                 max_wait: float = 5.0, sleep: Callable[[float], None] = time.sleep):
        self.client, self.url = client, base_url.rstrip("/") + "/v1/steps"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.attempts, self.max_wait, self._sleep = attempts, max_wait, sleep

    def write(self, records: Sequence[StepRecord]) -> None:
        for start in range(0, len(records), POST_BATCH):
            body = {"records": [r.to_dict() for r in records[start:start + POST_BATCH]]}
            self._post(body, {**self.headers, "Idempotency-Key": uuid.uuid4().hex})

    def _post(self, body: dict, headers: dict[str, str]) -> None:
        for attempt in range(1, self.attempts + 1):
            try:
                response = self.client.post(self.url, json=body, headers=headers)
            except httpx.TransportError:
                if attempt == self.attempts:
                    raise
                self._sleep(min(self.max_wait, 0.5 * attempt))
                continue
            if response.status_code == 202:
                return
            message = f"POST {self.url}: {response.status_code} {response.text[:300]}"
            if 400 <= response.status_code < 500 and response.status_code != 429:
                raise Rejected(message)
            if attempt == self.attempts:
                raise httpx.HTTPStatusError(message, request=response.request, response=response)
            self._sleep(min(self.max_wait, _retry_after(response) or 0.5 * attempt))


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def run(scraper: Scraper, page: Callable[[], str], *, interval: float, once: bool = False,
        stop: threading.Event | None = None, report: Callable[[ScrapeResult], None] = lambda r: None) -> int:
    """Scrape every ``interval`` seconds until ``stop`` is set, and return the records written.

    ``once``: a baseline scrape, ``interval`` seconds, one more scrape, then return; any failure raises.
    Otherwise an unreachable engine or sidecar, or a store error, is logged and retried at the next
    scrape (baselines stay, so nothing is lost); a page without spec-decode counters (PageError) or
    records the sink rejects (RecordError, Rejected) raise, since retrying cannot fix them."""
    stop = stop or threading.Event()
    written = scrapes = 0
    while True:
        started = time.monotonic()
        try:
            result = scraper.observe_page(page())
        except (PageError, RecordError, Rejected):
            raise
        except (httpx.HTTPError, StoreError) as exc:
            if once:
                raise
            log.warning("scrape failed, retrying in %.0f s: %s", interval, exc)
        else:
            written += result.records
            report(result)
        scrapes += 1
        if once and scrapes >= 2:
            return written
        if stop.wait(max(0.0, interval - (time.monotonic() - started))):
            return written


__all__ = ["Scraper", "ScrapeResult", "StoreSink", "SidecarSink", "Rejected", "run", "synthesize",
           "lookahead_groups", "accepted_lengths", "fetch", "PageError"]
