"""Benchmark: the acceptance-history store, through its public write path (validation and aggregation
included) and the stats queries the CLI runs.

1. Ingest: step records/s through ``Store.write_records`` + ``Store.flush`` into SQLite and PostgreSQL
   (20 domains, K in {0, 2, 4, 6}, a flush every simulated 10 s window), plus the hot path alone
   (``Store.record``: validate + add to the window sums).
2. History: 30 days x 20 domains at minute resolution, ending now (a record per domain per minute, a K = 0
   step in one minute of ten, a target update after day 20), written day by day with hourly flushes,
   daily rollups and daily retention (as the scheduler would run them); the latency of
   ``stats --by hour --since 30d`` and ``stats --by day --domain X`` (median of 5, and the first run),
   and the database size on disk.

Goals: >= 100k step records/s into SQLite, each query <= 300 ms, database <= 500 MB. Not a test: prints
a table and writes bench/results/storage.json.

    python bench/storage.py [--records 200000] [--days 30] [--domains 20] [--pg URL | --no-pg]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specwatch_core.records import StepRecord  # noqa: E402
from storage import StatsQuery, Store, StoreConfig  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "storage.json"
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DAY = 86400


def record(rng: random.Random, domain: str, k: int, rate: float, ts: float, target: str) -> StepRecord:
    accepted = 0
    while accepted < k and rng.random() < rate:
        accepted += 1
    return StepRecord(domain=domain, lookahead=k, accepted=accepted, emitted=accepted + 1,
                      draft_seconds=0.0012 * k, verify_seconds=0.011 + 0.001 * rng.random(),
                      target_version=target, draft_version="d-5e1f0a", accepted_mask=[1] * accepted + [0] * (k - accepted),
                      expected_acceptance=[rate] * k, timestamp=ts)


def ingest_records(n: int, start: float, domains: list[str], per_second: int = 2000) -> list[StepRecord]:
    rng = random.Random(1)
    return [record(rng, domains[i % len(domains)], rng.choice((0, 2, 4, 6)), 0.7, start + i / per_second,
                   "t-aaa111") for i in range(n)]


def bench_ingest(url: str, records: list[StepRecord], batch: int = 1000) -> dict:
    store = Store.open(url, StoreConfig(pod="bench"), backfill=True)
    window = store.config.window_seconds
    start = time.perf_counter()
    next_flush = records[0].timestamp - records[0].timestamp % window + window
    for i in range(0, len(records), batch):
        chunk = records[i:i + batch]
        store.write_records(chunk)
        if chunk[-1].timestamp >= next_flush:
            store.flush(chunk[-1].timestamp)
            next_flush = chunk[-1].timestamp - chunk[-1].timestamp % window + window
    store.flush(records[-1].timestamp + 3 * window)
    seconds = time.perf_counter() - start
    store.close(flush=False)
    return dict(records=len(records), seconds=seconds, records_per_s=len(records) / seconds)


def bench_hot_path(records: list[StepRecord]) -> float:
    """Microseconds per Store.record (validate + add) with no database work."""
    store = Store.open("sqlite://", StoreConfig(pod="bench"), backfill=True)
    start = time.perf_counter()
    for r in records:
        store.record(r)
    us = (time.perf_counter() - start) / len(records) * 1e6
    store.close(flush=False)
    return us


def build_history(url: str, days: int, domains: list[str], end: float) -> dict:
    """Minute-resolution history ending at ``end``; returns timings and row counts."""
    store = Store.open(url, StoreConfig(pod="bench-pod", max_past_seconds=(days + 1) * DAY), backfill=True)
    rng = random.Random(2)
    policy_k = {d: rng.choice((2, 4, 6)) for d in domains}
    base_rate = {d: rng.uniform(0.45, 0.85) for d in domains}
    start = end - days * DAY
    written = ingest_s = rollup_s = prune_s = 0.0
    windows_pruned = 0
    for day in range(days):
        batch = []
        for minute in range(1440):
            t = start + day * DAY + minute * 60
            for i, d in enumerate(domains):
                target = "t-aaa111" if day < 20 else "t-bbb222"
                rate = base_rate[d] * (0.8 if day >= 20 and d.endswith("3") else 1.0)
                batch.append(record(rng, d, policy_k[d], rate, t + rng.random() * 9, target))
                if minute % 10 == i % 10:
                    batch.append(record(rng, d, 0, rate, t + rng.random() * 9, target))
        t0 = time.perf_counter()
        for hour in range(24):
            store.write_records(batch[hour * len(batch) // 24:(hour + 1) * len(batch) // 24])
            store.flush(start + day * DAY + (hour + 1) * 3600)
        t1 = time.perf_counter()
        store.rollup(start + (day + 1) * DAY)
        t2 = time.perf_counter()
        # Daily, as the scheduler would: space freed by retention is reused by the next days' rows.
        deleted = store.prune(start + (day + 1) * DAY)
        prune_s += time.perf_counter() - t2
        rollup_s += t2 - t1
        ingest_s += t1 - t0
        written += len(batch)
        windows_pruned += deleted.get("windows", 0)
    if store.db.dialect == "sqlite":
        with store.db.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    size = store.db.size_bytes()
    store.close(flush=False)
    return dict(records=int(written), ingest_s=ingest_s, rollup_s=rollup_s, prune_s=prune_s,
                windows_pruned=windows_pruned, size_mb=size / 1e6)


def time_query(url: str, query: StatsQuery, repeats: int = 5) -> dict:
    store = Store.open(url, migrate_schema=False)
    runs, rows, plan = [], 0, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = store.stats(query)
        runs.append((time.perf_counter() - start) * 1000)
        rows, plan = len(result.rows), result.plan.tiers_used()
    store.close(flush=False)
    return dict(first_ms=runs[0], median_ms=statistics.median(runs), rows=rows, tiers=plan)


def pg_schema(server: str) -> tuple[str, callable]:
    """A fresh schema on the server: its URL, and a function that drops it."""
    schema = f"specwatch_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()

    return f"{server}?options=-csearch_path%3D{schema}", drop


def run_backend(name: str, urls: tuple[str, str], args, domains: list[str], records: list[StepRecord]) -> dict:
    """Ingest into urls[0]; build the history in urls[1] and time the queries there."""
    console = Console()
    console.print(f"[bold]{name}[/]: ingest {len(records):,} records ...")
    out = dict(ingest=bench_ingest(urls[0], records))
    if name == "postgresql" and not args.pg_history:
        return out
    console.print(f"[bold]{name}[/]: {args.days} days x {len(domains)} domains of minute history ...")
    out["history"] = build_history(urls[1], args.days, domains, time.time())
    out["queries"] = {
        "stats --by hour --since 30d": time_query(urls[1], StatsQuery(since=time.time() - 30 * DAY, by=("hour",))),
        f"stats --by day --domain {domains[3]}": time_query(urls[1], StatsQuery(by=("day",), domain=domains[3])),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--domains", type=int, default=20)
    parser.add_argument("--pg", default=PG, help="PostgreSQL server URL")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--pg-history", action=argparse.BooleanOptionalAction, default=True,
                        help="also build the 30-day history on PostgreSQL")
    args = parser.parse_args()
    domains = [f"domain-{i:02d}" for i in range(args.domains)]
    records = ingest_records(args.records, time.time() - 7200, domains)
    results = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(),
                                platform=platform.platform(), load_before=os.getloadavg()),
                   hot_path_us_per_record=bench_hot_path(records[:50_000]), backends={})
    with tempfile.TemporaryDirectory() as tmp:
        results["backends"]["sqlite"] = run_backend(
            "sqlite", (f"sqlite:///{tmp}/ingest.db", f"sqlite:///{tmp}/history.db"), args, domains, records)
    if not args.no_pg:
        (ingest, drop_ingest), (history, drop_history) = pg_schema(args.pg), pg_schema(args.pg)
        try:
            results["backends"]["postgresql"] = run_backend("postgresql", (ingest, history), args, domains,
                                                            records)
        finally:
            drop_ingest()
            drop_history()
    results["machine"]["load_after"] = os.getloadavg()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print_table(results)


def print_table(results: dict) -> None:
    table = Table(title=f"specwatch storage (hot path {results['hot_path_us_per_record']:.2f} us/record: "
                        "validate + aggregate)")
    for col in ("backend", "measure", "value", "goal", "ok"):
        table.add_column(col, justify="right" if col in ("value", "goal") else "left")
    for name, r in results["backends"].items():
        ing = r["ingest"]
        table.add_row(name, f"ingest ({ing['records']:,} records, write_records + flush)",
                      f"{ing['records_per_s']:,.0f} rec/s", ">= 100,000" if name == "sqlite" else "",
                      _ok(ing["records_per_s"] >= 100_000) if name == "sqlite" else "")
        if "history" not in r:
            continue
        h = r["history"]
        table.add_row(name, f"history: {h['records']:,} records written", f"{h['ingest_s']:.1f} s "
                      f"({h['records'] / h['ingest_s']:,.0f} rec/s)", "", "")
        table.add_row(name, "history: rollups (daily) / prune", f"{h['rollup_s']:.1f} s / {h['prune_s']:.1f} s",
                      "", "")
        for q, m in r["queries"].items():
            tiers = ", ".join(m["tiers"])
            table.add_row(name, f"{q} ({m['rows']} rows; {tiers})",
                          f"{m['median_ms']:.0f} ms (first {m['first_ms']:.0f})", "<= 300 ms",
                          _ok(max(m["median_ms"], m["first_ms"]) <= 300))
        table.add_row(name, "database size on disk", f"{h['size_mb']:.0f} MB", "<= 500 MB", _ok(h["size_mb"] <= 500))
    console = Console(width=max(Console().width, 120))
    console.print(table)
    console.print(f"wrote {RESULTS}")


def _ok(good: bool) -> str:
    return "[green]yes[/]" if good else "[red]NO[/]"


if __name__ == "__main__":
    main()
