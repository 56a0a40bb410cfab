"""The write side of bench/fleet.py: many pods' flushes into one PostgreSQL, through the real ``Store``.

Each worker process hosts a share of the pods. A pod is a ``Store`` with its own pod name (all pods of a
process share one connection pool: a thousand pools would pass ``max_connections``). Every simulated
second each pod counts its step records (20 domains, 2 per-step records per domain and second, K per
domain 2..8, a K = 0 probe per domain one second in ten) and flushes, at its own phase within the second,
exactly as the sidecar's 1 s flush job does; every 60 simulated seconds it runs the rollup job too. The
simulated clock is paced at ``pace`` wall seconds per simulated second; when the flushes of a second take
longer than that, the clock falls behind the wall (``dilation`` = wall seconds per simulated second).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from dataclasses import dataclass

from specwatch_core.records import StepRecord
from storage import Store, StoreConfig
from storage.engine import Database

DOMAINS = 20
STEPS_PER_DOMAIN_SECOND = 2


class SimClock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def domain_records(seed: int, domains: int) -> list[list[list[StepRecord]]]:
    """Per domain, 16 prepared seconds of records (timestamp None: a store stamps them with its clock)."""
    rng = random.Random(seed)
    out = []
    for d in range(domains):
        k, rate = 2 + (d % 4) * 2, 0.45 + 0.4 * rng.random()
        seconds = []
        for s in range(16):
            batch = []
            for lookahead in [k] * STEPS_PER_DOMAIN_SECOND + ([0] if s % 10 == d % 10 else []):
                a = 0
                while a < lookahead and rng.random() < rate:
                    a += 1
                batch.append(StepRecord(domain=f"domain-{d:02d}", lookahead=lookahead, accepted=a,
                                        emitted=a + 1, draft_seconds=0.0012 * lookahead,
                                        verify_seconds=0.011, target_version="t-aaa111",
                                        draft_version="d-5e1f0a", expected_acceptance=[rate] * lookahead))
            seconds.append(batch)
        out.append(seconds)
    return out


@dataclass
class WorkerResult:
    flush_seconds: list[float]
    rollup_seconds: list[float]
    rows: int
    records: int
    wall: float


def run_pods(url: str, pods: list[str], sim_seconds: int, start: float, pace: float, wall_start: float,
             own_connections: bool = False, domains: int = DOMAINS, rollup_every: int = 60) -> WorkerResult:
    """One worker: ``pods`` flushing every simulated second for ``sim_seconds``. ``own_connections``: each
    pod opens its own database connection, as sidecars do (through a pooler: a thousand of them)."""
    clock = SimClock(start)
    config = StoreConfig(pod="x", max_past_seconds=7 * 86400)
    rng = random.Random(hash(pods[0]) & 0xFFFF)
    shared = None if own_connections else Database.open(url)
    dbs = [shared or Database.open(url) for _ in pods]
    stores = [Store(db, StoreConfig(**{**config.__dict__, "pod": name}), clock=clock, backfill=True)
              for db, name in zip(dbs, pods)]
    phases = sorted((rng.random(), i) for i in range(len(stores)))
    prepared = domain_records(os.getpid(), domains)
    flushes, rollups, rows, records = [], [], 0, 0
    for second in range(sim_seconds):
        for phase, i in phases:
            at = second + phase
            delay = wall_start + at * pace - time.time()
            if delay > 0:
                time.sleep(delay)
            clock.now = start + at
            batch = [r for d in range(domains) for r in prepared[d][(second + i) % 16]]
            stores[i].write_records(batch)
            records += len(batch)
            t0 = time.perf_counter()
            rows += stores[i].flush(clock.now)
            flushes.append(time.perf_counter() - t0)
            if (second + i) % rollup_every == 0 and second:
                t0 = time.perf_counter()
                stores[i].rollup(clock.now)  # the sidecar's rollup job: roll up, then pack what is due
                stores[i].pack(clock.now)
                rollups.append(time.perf_counter() - t0)
    clock.now = start + sim_seconds
    for s in stores:
        rows += s.flush(clock.now)
    wall = time.time() - wall_start
    for db in {id(db): db for db in dbs}.values():
        db.dispose()
    return WorkerResult(flushes, rollups, rows, records, wall)


def _worker(args) -> WorkerResult:
    return run_pods(*args)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summarize(results: list[WorkerResult], pods: int, sim_seconds: int) -> dict:
    flushes = [x for r in results for x in r.flush_seconds]
    rollups = [x for r in results for x in r.rollup_seconds]
    wall = max(r.wall for r in results)
    rows = sum(r.rows for r in results)
    return dict(pods=pods, sim_seconds=sim_seconds, wall_seconds=wall, dilation=wall / sim_seconds,
                flushes=len(flushes), flushes_per_s=len(flushes) / wall, window_rows=rows,
                window_rows_per_s=rows / wall, records=sum(r.records for r in results),
                flush_p50_ms=percentile(flushes, 0.5) * 1000, flush_p99_ms=percentile(flushes, 0.99) * 1000,
                flush_max_ms=max(flushes) * 1000, flush_mean_ms=statistics.fmean(flushes) * 1000,
                rollups=len(rollups), rollup_p50_ms=percentile(rollups, 0.5) * 1000,
                rollup_p99_ms=percentile(rollups, 0.99) * 1000)
