"""Requests by the load they met: the ``load_hours`` stage beside the window tiers.

A record that says its load (``StepRecord.load``: requests in flight on its pool when the proxy sent it, it
included) is also added to one row per (hour, series, load band) (specwatch_core/loads.py): requests, steps,
drafted, accepted, emitted, seconds of the steps and of the prompt. An hour and a band, not ten seconds: the
question is how a pool pays at each load over a day, not when; a series whose load stays in one band costs
a row an hour. ``LoadTally`` holds the open sums in memory; the flush adds them to their rows (an upsert that
adds, so two flushes of one hour sum), and keeps them for the next flush when the database is away
(``MAX_KEYS`` at most). ``stats`` answers ``specwatch stats --by load``; ``prune`` keeps them as long as
hours.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from specwatch_core.loads import band, label
from specwatch_core.records import StepRecord
from storage import schema
from storage.counts import SeriesKey
from storage.sql import floor_to, upsert
from storage.writer import Known, resolve_series

log = logging.getLogger(__name__)
HOUR = 3600
MAX_KEYS = 100_000  # open (hour, series, band) sums kept while the database is away; older ones are dropped
COUNTS = ("requests", "steps", "drafted", "accepted", "emitted")
SUMS = ("seconds", "prompt_seconds")
LoadKey = tuple[int, SeriesKey, int]  # hour start, series, band


class LoadTally:
    """Open sums per (hour, series, band) of the records that carry a load."""

    def __init__(self, pod: str):
        self.pod = pod
        self._lock = threading.Lock()
        self._sums: dict[LoadKey, list] = {}
        self.dropped = 0

    def add_many(self, records: Iterable[StepRecord], now: float) -> None:
        with self._lock:
            for r in records:
                if r.load is None:
                    continue
                ts = now if r.timestamp is None else r.timestamp
                key = (floor_to(ts, HOUR), (r.pod or self.pod, r.domain, r.target_version, r.draft_version,
                                            r.lookahead), band(r.load))
                s = self._sums.get(key)
                if s is None:
                    s = self._sums[key] = [0, 0, 0, 0, 0, 0.0, 0.0]
                seconds = r.seconds if r.seconds is not None else r.draft_seconds + r.verify_seconds
                s[0] += 1
                s[1] += r.steps
                s[2] += r.lookahead * r.steps if r.drafted is None else r.drafted
                s[3] += r.accepted
                s[4] += r.emitted
                s[5] += seconds
                s[6] += r.prompt_seconds or 0.0

    def take(self) -> dict[LoadKey, list]:
        with self._lock:
            taken, self._sums = self._sums, {}
        return taken

    def put_back(self, taken: dict[LoadKey, list]) -> None:
        """Sums a flush could not write: added back, the oldest hours dropped beyond ``MAX_KEYS``."""
        with self._lock:
            for key, s in taken.items():
                mine = self._sums.get(key)
                self._sums[key] = s if mine is None else [a + b for a, b in zip(mine, s)]
            over = len(self._sums) - MAX_KEYS
            if over > 0:
                for key in sorted(self._sums)[:over]:
                    del self._sums[key]
                self.dropped += over
                log.warning("load_hours: %d sums dropped while the database was away (over %d kept)", over,
                            MAX_KEYS)

    def __len__(self) -> int:
        return len(self._sums)


def write(conn: sa.Connection, taken: dict[LoadKey, list], known: Known) -> dict[SeriesKey, int]:
    """Add ``taken`` to its rows (creating series as the windows' writer does); the series ids used."""
    if not taken:
        return {}
    ids = resolve_series(conn, {series for _, series, _ in taken}, known)
    rows = [dict(bucket_start=hour, series_id=ids[series], band=b, **dict(zip((*COUNTS, *SUMS), s)))
            for (hour, series, b), s in sorted(taken.items())]
    upsert(conn, schema.load_hours, rows, ["bucket_start", "series_id", "band"],
           {c: (lambda ex, c=c: schema.load_hours.c[c] + ex[c]) for c in (*COUNTS, *SUMS)})
    return ids


def prune(conn: sa.Connection, before: int) -> int:
    """Delete the rows of hours that ended before ``before``; rows deleted."""
    t = schema.load_hours
    return conn.execute(sa.delete(t).where(t.c.bucket_start <= before - HOUR)).rowcount


SERIES_DIMS = ("domain", "lookahead", "target_version", "draft_version", "pod")


def stats(conn: sa.Connection, since: int, until: int, by: Sequence[str], domain: str | None) -> list[dict]:
    """Rows grouped by ``by`` (``load`` and any series dimension) over the hours that start in
    [since, until): requests, tokens per request, accepted / drafted, tokens per step, seconds per step, the
    rate of a request (tokens over its step seconds) and its whole rate (with the prompt's seconds), and the
    speed-up over K = 0 at the same load and other keys."""
    t, s = schema.load_hours, schema.series.c
    dims = [t.c.band if d == "load" else s[d] for d in by]
    spec = s.lookahead > sa.literal_column("0")  # the same text in SELECT and GROUP BY (no two parameters)
    query = (sa.select(*dims, spec, *(sa.func.sum(t.c[c]) for c in (*COUNTS, *SUMS)))
             .select_from(t.join(schema.series, schema.series.c.id == t.c.series_id))
             .where(t.c.bucket_start >= floor_to(since, HOUR), t.c.bucket_start < until)
             .group_by(*dims, spec))
    if domain is not None:
        query = query.where(s.domain == domain)
    groups: dict[tuple, list] = {}
    for row in conn.execute(query):
        key = tuple(v if isinstance(v, str) else int(v) for v in row[:len(by)])
        values = [float(v) for v in row[len(by) + 1:]]
        pair = groups.setdefault(key, [[0.0] * 7, [0.0] * 7])  # speculative, plain
        pair[0 if row[len(by)] else 1] = [a + b for a, b in zip(pair[0 if row[len(by)] else 1], values)]
    k = by.index("lookahead") if "lookahead" in by else None
    plain_sums: dict[tuple, list] = {}  # K = 0 tokens and seconds of the same other keys (and load)
    for key, (_, plain) in groups.items():
        rest = key if k is None else key[:k] + key[k + 1:]
        have = plain_sums.setdefault(rest, [0.0, 0.0])
        have[0], have[1] = have[0] + plain[4], have[1] + plain[5]
    plain_rate = {rest: e / sec for rest, (e, sec) in plain_sums.items() if sec > 0}
    at = by.index("load") if "load" in by else None
    rows = []
    for key in sorted(groups):
        spec, plain = groups[key]
        both = [a + b for a, b in zip(spec, plain)]
        requests, steps, drafted, accepted, emitted, seconds, prompt = both
        rest = key if k is None else key[:k] + key[k + 1:]
        base = plain_rate.get(rest)
        rate = emitted / seconds if seconds > 0 else None
        spec_rate = spec[4] / spec[5] if spec[5] > 0 else None
        rows.append({**{d: label(v) if i == at else v for i, (d, v) in enumerate(zip(by, key))},
                     "requests": int(requests), "tokens_per_request": emitted / requests if requests else None,
                     "acceptance_rate": accepted / drafted if drafted else None,
                     "tokens_per_step": emitted / steps if steps else None,
                     "seconds_per_step": seconds / steps if steps else None,
                     "tokens_per_second": rate,
                     "request_tokens_per_second": emitted / (seconds + prompt) if seconds + prompt > 0 else None,
                     "speedup": spec_rate / base if spec_rate is not None and base else None})
    return rows
