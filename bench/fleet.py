"""Benchmark: a fleet of sidecars sharing one PostgreSQL, write side and query side.

1. Write side, for N = 10, 100, 1000 pods (bench/fleet_pods.py): each pod is a real ``Store`` with its
   own pod name, counting 20 domains' step records and flushing every simulated second (the sidecar's
   flush job), running the rollup job every 60 simulated seconds; the pods are spread over worker
   processes. Measured: flush latency per flush (p50 / p99), window rows and records written per wall
   second, the server's CPU seconds (its processes, from /proc) per simulated pod-second, and the growth
   of every table (pg_total_relation_size) scaled to one pod-day. The simulated clock is paced to the
   wall; when the machine cannot keep up (N = 1000 on 2 cores) it runs slower than the wall: the
   reported ``dilation`` is wall seconds per simulated second, so the flushes of 1000 pods' simulated
   second are squeezed through as fast as the server takes them (every pod still flushes once per
   simulated second, with the content of one second).
2. Query side (bench/fleet_history.py): 30 days x 1000 pods x 20 domains loaded in bulk, then
   ``stats --since 30d`` fleet-wide (by domain) and ``--by pod``, the rollup and the retention jobs.

3. Storage side (bench/fleet_size.py): a few pods' simulated hours written, rolled up and packed, the live
   size of every tier table scaled to one pod-day.

The pods of the write side connect through a PgBouncer in transaction mode (bench/pgbouncer.py, started
here on loopback; ``--pool-size`` server connections, 0: no pooler), each pod with its own connection, as
sidecars do. Goals: flush p99 <= 1 s at N = 1000 with <= 100 server connections, in real time (dilation
<= 1.05: the flushes of a simulated second took no longer than a second); each stats <= 500 ms; retention
<= 0.5 s; storage <= 5 MB per pod-day (live: after VACUUM FULL). The server's CPU is measured for all its
processes: run nothing else against it meanwhile. Not a test: prints a table and writes bench/results/fleet.json.

    python bench/fleet.py [--pods 10,100,1000] [--seconds 60] [--workers 4] [--pool-size 40]
                          [--size-pods 20] [--history-pods 1000] [--server URL] [--out FILE]
                          [--keep-history | --history-schema NAME]

A history takes ~10 minutes to load at 1000 pods: ``--keep-history`` keeps its schema, and
``--history-schema NAME`` times the queries and jobs again on it (after migrating it to this code's schema,
which is timed: the migration's cost on 30 days of a fleet).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import time
import uuid
from pathlib import Path

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import fleet_history, fleet_pods, fleet_size, pgstat  # noqa: E402
from bench.pgbouncer import PgBouncer  # noqa: E402
from storage import Store, StoreConfig, migrate  # noqa: E402
from storage.engine import Database  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "fleet.json"
SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DAY = 86400
TIERS = ("windows", "minutes", "hours", "days")
# the second: schemas before 0005; then 0006 on, and ten_minute_blocks 0007 on
TIER_TABLES = {*TIERS, *(f"{t[:-1]}_positions" for t in TIERS), "window_blocks", "minute_blocks", "ten_minutes",
               "ten_minute_blocks"}
console = Console(stderr=True)


def say(text: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")


class Schema:
    """A fresh schema on the server for one run, dropped afterwards; ``database=True``: a fresh database
    instead (a pooler such as PgBouncer passes no search_path, so the run gets a database of its own)."""

    def __init__(self, server: str, keep: bool = False, database: bool = False, existing: str | None = None):
        """``existing``: a schema kept by an earlier run, used again (and kept)."""
        self.name, self.keep, self.database = existing or f"fleet_{uuid.uuid4().hex[:8]}", keep or bool(existing), database
        self.admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
        if not existing:
            with self.admin.connect() as conn:
                conn.exec_driver_sql(f'CREATE {"DATABASE" if database else "SCHEMA"} "{self.name}"')
        base = sa.engine.make_url(server)
        self.url = (base.set(database=self.name).render_as_string(hide_password=False) if database
                    else f"{server}?options=-csearch_path%3D{self.name}")
        self.engine = sa.create_engine(self.url)

    def __enter__(self) -> "Schema":
        return self

    def __exit__(self, *exc) -> None:
        self.engine.dispose()
        if self.keep:
            say(f"kept schema {self.name}")
        else:
            with self.admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE "{self.name}" WITH (FORCE)' if self.database
                                     else f'DROP SCHEMA "{self.name}" CASCADE')
        self.admin.dispose()


def write_side(server: str, pods: int, seconds: int, workers: int, pool_size: int | None) -> dict:
    """``pool_size``: every pod with its own connection, through a PgBouncer in transaction mode with that
    many server connections (None: the pods of a worker process share one SQLAlchemy pool, no pooler)."""
    with Schema(server, database=pool_size is not None) as schema:
        Store.open(schema.url, StoreConfig()).close()
        bouncer = PgBouncer(pool_size=pool_size, max_clients=pods + 100).start() if pool_size else None
        url = bouncer.url(schema.name) if bouncer else schema.url
        postmaster = pgstat.postmaster_pid(schema.engine)
        sizes0, cpu0 = pgstat.table_sizes(schema.engine), pgstat.cpu_seconds(postmaster)
        names = [f"pod-{i:04d}" for i in range(pods)]
        shares = [names[w::workers] for w in range(min(workers, pods))]
        start, wall_start = time.time() - 3600, time.time() + 2  # content an hour old: no clock skew
        jobs = [(url, share, seconds, start, 1.0, wall_start, bouncer is not None) for share in shares]
        try:
            # The pool first: a process forked while the sampler's thread holds a lock would wait forever.
            with multiprocessing.get_context("fork").Pool(len(jobs)) as pool, \
                    pgstat.ConnectionSampler(schema.admin, schema.name if bouncer else None) as servers:
                results = pool.map(fleet_pods._worker, jobs)
        finally:
            if bouncer:
                bouncer.stop()
        cpu = pgstat.cpu_seconds(postmaster) - cpu0
        sizes = pgstat.table_sizes(schema.engine)
        tiers = sorted(t for t in sizes if t in TIER_TABLES)
        counts = pgstat.row_counts(schema.engine, [t for t in tiers if t.startswith(("window", "minute"))])
        pgstat.vacuum_full(schema.engine, tiers)  # what autovacuum would let the tables settle to
        live = pgstat.table_sizes(schema.engine)
    out = fleet_pods.summarize(results, pods, seconds)
    pod_days = pods * seconds / DAY
    # Tier tables grow with time; series, versions and dirty marks are a fixed cost per pod (or churn).
    growth = {t: (sizes[t] - sizes0.get(t, 0)) / pod_days for t in tiers}
    live_growth = {t: (live[t] - sizes0.get(t, 0)) / pod_days for t in tiers}
    fixed = {t: (sizes[t] - sizes0.get(t, 0)) / pods for t in sizes if t not in TIER_TABLES}
    windows = sum(v for t, v in counts.items() if t.startswith("window"))
    out.update(pg_cpu_seconds=cpu, pg_cores=cpu / out["wall_seconds"],
               pg_cpu_ms_per_flush=cpu / out["flushes"] * 1000, rows=counts,
               rows_per_s=windows / out["wall_seconds"],
               bytes_per_pod_day=growth, bytes_per_pod_day_live=live_growth, bytes_per_pod_fixed=fixed,
               mb_per_pod_day=sum(growth.values()) / 1e6, mb_per_pod_day_live=sum(live_growth.values()) / 1e6,
               workers=len(jobs), pooler=dict(pool_size=pool_size, client_connections=pods if bouncer else None,
                                              server_connections_max=servers.most) if bouncer else None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", default="10,100,1000", help="pod counts of the write side")
    parser.add_argument("--seconds", type=int, default=60, help="simulated seconds per pod count")
    parser.add_argument("--workers", type=int, default=4, help="worker processes hosting the pods")
    parser.add_argument("--pool-size", type=int, default=40,
                        help="server connections of the PgBouncer the pods connect through (0: no pooler)")
    parser.add_argument("--size-pods", type=int, default=20, help="pods of the storage side (0: skip it)")
    parser.add_argument("--size-hours", type=int, default=1, help="simulated hours of the storage side")
    parser.add_argument("--history-pods", type=int, default=1000, help="0: skip the query side")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--domains", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep-history", action="store_true", help="keep the history's schema (to explain)")
    parser.add_argument("--history-schema", help="a schema --keep-history kept: migrate it to this code's schema "
                                                 "(timed), then time the queries and jobs again; no load")
    parser.add_argument("--server", default=SERVER, help="PostgreSQL URL (a schema is created and dropped)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(),
                                platform=platform.platform(), load_before=os.getloadavg()),
                   schema_revision=migrate.head_revision(), write={}, size=None, history=None)
    for n in [int(x) for x in args.pods.split(",") if x]:
        say(f"write side: {n} pods x {args.seconds} simulated seconds, {args.workers} worker processes ...")
        results["write"][str(n)] = write_side(args.server, n, args.seconds, args.workers, args.pool_size or None)
        r = results["write"][str(n)]
        say(f"  flush p50 {r['flush_p50_ms']:.1f} ms, p99 {r['flush_p99_ms']:.1f} ms, dilation {r['dilation']:.2f}")
    if args.size_pods:
        say(f"storage side: {args.size_pods} pods x {args.size_hours} simulated hours, then rollup and pack ...")
        with Schema(args.server) as schema:
            Store.open(schema.url, StoreConfig()).close()
            results["size"] = fleet_size.run(schema.url, schema.engine, args.size_pods, args.size_hours, say)
    if args.history_schema:
        with Schema(args.server, existing=args.history_schema) as schema:
            say(f"history: {args.history_schema} again, migrated to {migrate.head_revision()} ...")
            db = Database.open(schema.url)
            t0 = time.perf_counter()
            before, after = migrate.upgrade(db)
            migrated = dict(before=before, after=after, seconds=time.perf_counter() - t0)
            db.dispose()
            results["history"] = fleet_history.rerun(schema.url, schema.engine, args.days, args.repeats, say)
            results["history"]["migrated"] = migrated
            results["history"]["sizes"] = pgstat.table_sizes(schema.engine)
    elif args.history_pods:
        with Schema(args.server, keep=args.keep_history) as schema:
            Store.open(schema.url, StoreConfig()).close()
            results["history"] = fleet_history.run(schema.url, schema.engine, args.history_pods, args.domains,
                                                    args.days, args.repeats, say)
            results["history"]["sizes"] = sizes = pgstat.table_sizes(schema.engine)
            # hours and days are loaded in full (VACUUM ANALYZEd): their size per pod-day is what a day adds
            results["history"]["bytes_per_pod_day"] = {
                t: sizes[t] / (args.history_pods * args.days) for t in ("hours", "days") if t in sizes}
    results["machine"]["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print_tables(results)
    say(f"wrote {args.out}")


def print_tables(results: dict) -> None:
    out = Console(width=max(Console().width, 140))
    table = Table(title=f"fleet write side (schema {results['schema_revision']}, load "
                        f"{results['machine']['load_before'][0]:.1f} before, {results['machine']['load_after'][0]:.1f} after)")
    for col in ("pods", "pooler (server conns max)", "flushes", "dilation", "flush p50", "flush p99", "rows/s",
                "records/s", "PG cores", "PG ms/flush", "p99 <= 1 s", "conns <= 100", "real time"):
        table.add_column(col, justify="right")
    for n, r in results["write"].items():
        pooler = r.get("pooler")
        table.add_row(n, f"{pooler['pool_size']} ({pooler['server_connections_max']})" if pooler else "none",
                      f"{r['flushes']:,}", f"{r['dilation']:.2f}x", f"{r['flush_p50_ms']:.1f} ms",
                      f"{r['flush_p99_ms']:.1f} ms", f"{r['rows_per_s']:,.0f}",
                      f"{r['records'] / r['wall_seconds']:,.0f}", f"{r['pg_cores']:.2f}",
                      f"{r['pg_cpu_ms_per_flush']:.2f}", _ok(r["flush_p99_ms"] <= 1000),
                      _ok(pooler is not None and (pooler["server_connections_max"] or 0) <= 100),
                      _ok(r["dilation"] <= 1.05))
    out.print(table)
    size = results.get("size")
    if size:
        hours_tier = results.get("history") or {}
        per_tier = dict(size["bytes_per_pod_day_live"])
        per_tier["days"] = hours_tier.get("bytes_per_pod_day", {}).get("days", 0.0)
        table = Table(title=f"storage per pod-day, live ({size['pods']} pods x {size['hours']} h, packed; "
                            f"pack {size['rows_packed']:,} rows in {size['pack_seconds']:.1f} s)")
        for col in ("table", "MB per pod-day"):
            table.add_column(col, justify="right")
        for t, b in per_tier.items():
            table.add_row(t, f"{b / 1e6:.3f}")
        total = sum(per_tier.values()) / 1e6
        table.add_row("total", f"{total:.2f} {_ok(total <= 5)}")
        out.print(table)
    h = results["history"]
    if not h:
        return
    table = Table(title="fleet query side (30 days of history)")
    for col in ("measure", "value", "goal", "ok"):
        table.add_column(col, justify="left" if col == "measure" else "right")
    load = h.get("load", {})
    if load:
        table.add_row(f"bulk load ({sum(load['rows'].values()):,} rows)", f"{load['load_seconds']:.0f} s", "", "")
    if "migrated" in h:
        m = h["migrated"]
        table.add_row(f"migrate {m['before']} -> {m['after']}", f"{m['seconds']:.2f} s", "", "")
    for q, m in h["queries"].items():
        table.add_row(f"{q} ({m['rows']} rows; {', '.join(m['tiers'])})",
                      f"{m['median_ms']:.0f} ms (first {m['first_ms']:.0f}, max {m['max_ms']:.0f})", "<= 500 ms",
                      _ok(m["max_ms"] <= 500))
    for job, m in h.get("jobs", {}).items():
        what = m.get("rebuilt") or m.get("deleted")
        goal = "<= 0.5 s" if job == "prune" else ""
        table.add_row(f"{job} {what}", f"{m['seconds']:.2f} s", goal, _ok(m["seconds"] <= 0.5) if goal else "")
    for tier, m in {**load.get("packed", {}), **h.get("packed", {})}.items():
        table.add_row(f"pack {m['rows']:,} {tier} rows into {m['blocks']:,} blocks", f"{m['seconds']:.1f} s", "", "")
    for t, b in h.get("bytes_per_pod_day", {}).items():
        table.add_row(f"{t}: bytes per pod-day", f"{b / 1e6:.3f} MB", "", "")
    out.print(table)


def _ok(good: bool) -> str:
    return "[green]yes[/]" if good else "[red]NO[/]"


if __name__ == "__main__":
    main()
