"""The storage side of bench/fleet.py: what one pod's day costs in each tier once the jobs have packed it.

A 60-second write run cannot show it: hours are packed once they are over. Here ``pods`` real ``Store``s
count ``hours`` simulated hours of step records (not paced: the clock jumps), flushing every simulated
minute (the rows written are the same as with a flush a second: a window's row is replaced, not added),
then the rollup and pack jobs run as they would once the hour is over. Live sizes (after VACUUM FULL) of
every tier table, scaled to one pod-day. Step records are those of bench/fleet_pods.py (20 domains, 2
per-step records a domain and second at K = 2..8, a K = 0 probe one second in ten) but drawn afresh every
second, with the step times jittered +-20% and the acceptance drifting: constant values would compress to
nothing and flatter the blocks.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import sqlalchemy as sa

from bench import pgstat
from bench.fleet_pods import DOMAINS, STEPS_PER_DOMAIN_SECOND, SimClock
from specwatch_core.records import StepRecord
from storage import Store, StoreConfig
from storage.engine import Database

HOUR, DAY = 3600, 86400


def second_of(rng: random.Random, rates: list[float], second: int) -> list[StepRecord]:
    out = []
    for d, rate in enumerate(rates):
        k = 2 + (d % 4) * 2
        rates[d] = min(0.9, max(0.3, rate + rng.gauss(0, 0.005)))
        for lookahead in [k] * STEPS_PER_DOMAIN_SECOND + ([0] if second % 10 == d % 10 else []):
            a = 0
            while a < lookahead and rng.random() < rate:
                a += 1
            out.append(StepRecord(domain=f"domain-{d:02d}", lookahead=lookahead, accepted=a, emitted=a + 1,
                                  draft_seconds=0.0012 * lookahead * rng.uniform(0.8, 1.2),
                                  verify_seconds=0.011 * rng.uniform(0.8, 1.2), target_version="t-aaa111",
                                  draft_version="d-5e1f0a",
                                  expected_acceptance=[min(1.0, max(0.0, rng.gauss(rate, 0.1)))] * lookahead))
    return out


def run(url: str, engine: sa.Engine, pods: int, hours: int, say: Callable[[str], None]) -> dict:
    start = (int(time.time()) // HOUR - 3 * 24) * HOUR  # whole hours, three days back
    db = Database.open(url)
    clock = SimClock(start)
    stores = [Store(db, StoreConfig(pod=f"pod-{i:04d}", max_past_seconds=7 * DAY), clock=clock, backfill=True)
              for i in range(pods)]
    rngs = [random.Random(i) for i in range(pods)]
    rates = [[rng.uniform(0.45, 0.85) for _ in range(DOMAINS)] for rng in rngs]
    t0 = time.perf_counter()
    for second in range(hours * HOUR):
        clock.now = start + second
        for store, rng, rate in zip(stores, rngs, rates):
            store.write_records(second_of(rng, rate, second))
        if second % 60 == 59:
            for store in stores:
                store.flush(clock.now + 1)
        if second % 600 == 599:
            say(f"  {second + 1} of {hours * HOUR} simulated seconds, {time.perf_counter() - t0:.0f} s")
    end = start + hours * HOUR
    for store in stores:
        store.flush(end)
    t1 = time.perf_counter()
    rolled = stores[0].rollup(end + 600)
    rollup_seconds = time.perf_counter() - t1
    sizes_raw = pgstat.table_sizes(engine)  # after the rollup: minutes and ten minutes exist from it
    fine = ["windows", "minutes", "ten_minutes"]
    to_pack = sum(pgstat.row_counts(engine, fine).values())  # not part of the pack's time
    t2 = time.perf_counter()
    packed = stores[0].pack(end + 600)
    t3 = time.perf_counter()
    tiers = [*fine, "hours", "window_blocks", "minute_blocks", "ten_minute_blocks"]
    counts = pgstat.row_counts(engine, tiers)
    pgstat.vacuum_full(engine, tiers)
    live = pgstat.table_sizes(engine)
    db.dispose()
    pod_days = pods * hours / 24
    return dict(pods=pods, hours=hours, rows=counts, rolled=rolled, packed=packed,
                rollup_seconds=rollup_seconds, pack_seconds=t3 - t2,
                rows_packed=to_pack, rows_packed_per_s=to_pack / (t3 - t2),
                bytes_before_pack_per_pod_day={t: sizes_raw.get(t, 0) / pod_days for t in fine},
                bytes_per_pod_day_live={t: live.get(t, 0) / pod_days for t in tiers})
