"""Record steps of engines that cannot call the sidecar, from the deltas of their metrics pages.

Each scrape reads every engine series on a page (agent/scrape/pages: vLLM, llama.cpp, SGLang, TensorRT-LLM,
chosen from the page itself), subtracts the counts of the previous scrape and writes the difference as
records (agent/scrape/records.py): per-step records reproducing every count exactly where the engine exports
per-position counts, one aggregate record where it does not. The first scrape of a series is a baseline. A
restart (a new ``_created`` or process start time, or any counter of the engine going down) counts
everything since the restart, never a negative or a wrapped-around difference. The interval's step time
goes into the records' ``seconds``: the engine's own where its page has it, else the time between scrapes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import httpx

from agent.scrape.io import POST_BATCH, Rejected, SidecarSink, Sink, StoreSink, fetch
from agent.scrape.names import domain_of, pod_of
from agent.scrape.pages import PageError, Series, read_page
from agent.scrape.records import accepted_lengths, lookahead_groups, records_of, synthesize
from specwatch_core.records import RecordError
from storage import StoreError

log = logging.getLogger(__name__)
UNKNOWN_VERSION = "unknown"


@dataclass
class ScrapeResult:
    """What one scrape of one URL did: records written and, per series, why nothing was (baseline, held,
    restart)."""

    records: int = 0
    notes: list[str] = field(default_factory=list)
    url: str = ""


class Scraper:
    """Keeps the last counts of each engine series on one URL's page and writes the steps between scrapes
    to ``sink``.

    ``domain``: a template (agent/scrape/names.py). ``identify(engine)``: the served model for engines whose
    page names none (llama.cpp), asked at every scrape. A delta that cannot come from whole drafts (a page
    caught mid-update) is held: the baseline stays, and the next scrape resolves it. After ``max_held`` held
    scrapes in a row the series is re-baselined: those counts are written as one aggregate record when they
    make one, else dropped with a warning."""

    def __init__(self, sink: Sink, *, domain: str = "default", target_version: str | None = None,
                 draft_version: str | None = None, pod: str | None = None, max_held: int = 4,
                 clock: Callable[[], float] = time.time, url: str = "", several_urls: bool = False,
                 identify: Callable[[str], str | None] | None = None):
        self.sink, self.domain, self.pod, self.url = sink, domain, pod, url
        self.target_version, self.draft_version = target_version, draft_version
        self.max_held, self.several_urls, self.identify = max_held, several_urls, identify
        self._clock = clock
        self._baseline: dict = {}  # series key -> counts of the page the baseline came from
        self._seen: dict = {}  # series key -> time of that page
        self._held: dict = {}
        self._models: dict[str, str] = {}  # engine -> last model ``identify`` named
        self._split = False  # the page showed several models: one domain and pod per model from then on
        self._last: float | None = None  # time of the last successful scrape

    def observe_page(self, text: str, now: float | None = None) -> ScrapeResult:
        """Parse a page (PageError if it has no speculative-decoding metrics), write the deltas, then move
        the baselines: when the write raises, they stay, and the next scrape writes those counts again."""
        now = self._clock() if now is None else now
        series = sorted(read_page(text), key=lambda s: s.key)
        models = {s.key: self._model(s) for s in series}
        self._split = self._split or len({s.model for s in series if s.model}) > 1
        result, records, moves, held = ScrapeResult(url=self.url), [], {}, {}
        for s in series:
            key, name = s.key, _name(s)
            counters = s.counters.settle(self._baseline.get(key))
            delta, elapsed, note = self._delta(key, counters, now)
            if note:
                result.notes.append(f"{name}: {note}")
            if delta is None:
                moves[key] = counters
                continue
            problem = delta.problem()
            if problem:
                if self._held.get(key, 0) < self.max_held:
                    held[key] = self._held.get(key, 0) + 1
                    result.notes.append(f"{name}: held ({problem}); retrying at the next scrape")
                    continue
                delta = self._given_up(delta, problem, name, result)
            if delta is not None:
                model = models[key]
                records += records_of(
                    delta, domain=domain_of(self.domain, s, s.model or model, self._split), target_version=model,
                    draft_version=self.draft_version or UNKNOWN_VERSION, timestamp=now,
                    pod=pod_of(self.pod, self.url, s.model or model, self.several_urls, self._split),
                    seconds=delta.seconds if delta.seconds is not None else elapsed)
            moves[key], held[key] = counters, 0
        if records:
            self.sink.write(records)
        self._baseline.update(moves)
        self._seen.update(dict.fromkeys(moves, now))
        self._held.update(held)
        self._last = now
        result.records = len(records)
        return result

    @staticmethod
    def _given_up(delta, problem: str, name: str, result: ScrapeResult):
        """Counts held ``max_held`` times: as one aggregate record when they make one, else dropped."""
        whole = replace(delta, per_pos=None)
        if delta.per_pos is not None and whole.problem() is None:
            result.notes.append(f"{name}: written as one aggregate record ({problem})")
            return whole
        log.warning("%s: dropping counts that never became consistent: %s", name, problem)
        result.notes.append(f"{name}: re-baselined ({problem})")
        return None

    def _delta(self, key, counters, now: float):
        """(delta, seconds it spans, note): delta None for a baseline."""
        before = self._baseline.get(key)
        created = counters.created
        since_start = None if created is None or created > now else now - created
        if before is None:
            # A series that appeared after our last scrape: all its counts are new. Otherwise a baseline.
            if self._last is not None and created is not None and created >= self._last:
                return counters.since_start(), since_start, "new engine, counted since its start"
            return None, None, "baseline"
        delta = counters.minus(before)
        if delta is None:
            return (counters.since_start(), since_start if since_start is not None else now - self._seen[key],
                    "counters restarted, counted since the restart")
        return delta, now - self._seen[key], None

    def _model(self, series: Series) -> str:
        """The target version of a series: --target-version, the page's model, the engine's answer."""
        if self.target_version:
            return self.target_version
        if series.model:
            return series.model
        if self.identify is not None:
            found = self.identify(series.engine)
            if found:
                self._models[series.engine] = found
        return self._models.get(series.engine, UNKNOWN_VERSION)


def _name(series: Series) -> str:
    labels = " ".join(f"{k}={v!r}" for k, v in series.labels)
    return f"{series.engine} {labels}".rstrip()


def run_all(targets: Sequence[tuple[Scraper, Callable[[], str]]], *, interval: float, once: bool = False,
            stop: threading.Event | None = None, report: Callable[[ScrapeResult], None] = lambda r: None) -> int:
    """Scrape every target every ``interval`` seconds until ``stop`` is set; return the records written.

    ``once``: a baseline scrape of each, ``interval`` seconds, one more scrape, then return; any failure
    raises. Otherwise an unreachable engine or sidecar, or a store error, is logged and retried at the next
    scrape (baselines stay, so nothing is lost), each target on its own; a page without speculative-decoding
    metrics (PageError) or records the sink rejects (RecordError, Rejected) raise, since retrying cannot fix
    them."""
    stop = stop or threading.Event()
    written = rounds = 0
    while True:
        started = time.monotonic()
        for scraper, page in targets:
            try:
                result = scraper.observe_page(page())
            except PageError as exc:
                if scraper.url:
                    raise PageError(f"{scraper.url}: {exc}") from None
                raise
            except (RecordError, Rejected):
                raise
            except (httpx.HTTPError, StoreError) as exc:
                if once:
                    raise
                log.warning("%s: scrape failed, retrying in %.0f s: %s", scraper.url or "engine", interval, exc)
            else:
                written += result.records
                report(result)
        rounds += 1
        if once and rounds >= 2:
            return written
        if stop.wait(max(0.0, interval - (time.monotonic() - started))):
            return written


def run(scraper: Scraper, page: Callable[[], str], **options) -> int:
    """``run_all`` over one engine."""
    return run_all([(scraper, page)], **options)


__all__ = ["Scraper", "ScrapeResult", "StoreSink", "SidecarSink", "Rejected", "run", "run_all", "synthesize",
           "lookahead_groups", "accepted_lengths", "fetch", "PageError", "POST_BATCH"]
