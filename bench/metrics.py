"""Benchmark: the cost per step record of alerts.metrics.export.Metrics.observe (the sidecar's hot path), against
the obvious alternative of incrementing prometheus-client children (cached per domain and position) for
every counter, every per-position counter and both histograms; and the cost of one /metrics scrape.

Goal: <= 5 us per record for Metrics.observe. Not a test: prints a table and writes
bench/results/metrics.json.

    python bench/metrics.py [--records 100000] [--domains 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alerts.metrics.counts import DRAFT_BUCKETS, VERIFY_BUCKETS  # noqa: E402
from alerts.metrics.export import Metrics  # noqa: E402
from specwatch_core.records import StepRecord  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "metrics.json"
GOAL_US = 5.0


def records(n: int, domains: int, seed: int = 1) -> list[StepRecord]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.choice((0, 2, 4, 6, 8))
        a = 0
        while a < k and rng.random() < 0.7:
            a += 1
        out.append(StepRecord(domain=f"domain-{i % domains:02d}", lookahead=k, accepted=a, emitted=a + 1,
                              draft_seconds=0.0012 * k, verify_seconds=0.011 + 0.001 * rng.random(),
                              target_version="t", draft_version="d", accepted_mask=[1] * a + [0] * (k - a)))
    return out


class ChildrenPerPosition:
    """The alternative: prometheus-client children, pre-resolved per domain and position."""

    def __init__(self):
        r = CollectorRegistry()
        names = ("steps", "draft_tokens", "accepted_tokens", "emitted_tokens")
        self.counters = {n: Counter(f"x_{n}", n, ["domain"], registry=r) for n in names}
        self.reached = Counter("x_reached", "r", ["domain", "position"], registry=r)
        self.accepted = Counter("x_accepted_pos", "a", ["domain", "position"], registry=r)
        self.ratio = Gauge("x_ratio", "r", ["domain"], registry=r)
        self.draft = Histogram("x_draft", "d", ["domain"], buckets=DRAFT_BUCKETS, registry=r)
        self.verify = Histogram("x_verify", "v", ["domain"], buckets=VERIFY_BUCKETS, registry=r)
        self.cache: dict[str, tuple] = {}
        self.window: dict[str, list[float]] = {}

    def _children(self, domain: str) -> tuple:
        c = self.cache.get(domain)
        if c is None:
            c = self.cache[domain] = (
                *(m.labels(domain) for m in self.counters.values()),
                [self.reached.labels(domain, str(i)) for i in range(1, 17)],
                [self.accepted.labels(domain, str(i)) for i in range(1, 17)],
                self.ratio.labels(domain), self.draft.labels(domain), self.verify.labels(domain))
        return c

    def observe(self, r: StepRecord) -> None:
        steps, drafted, accepted, emitted, reached_at, accepted_at, ratio, draft, verify = self._children(r.domain)
        steps.inc()
        emitted.inc(r.emitted)
        if r.lookahead:
            drafted.inc(r.lookahead)
            accepted.inc(r.accepted)
            for i in range(min(r.accepted + 1, r.lookahead)):
                reached_at[i].inc()
                if i < r.accepted:
                    accepted_at[i].inc()
            w = self.window.setdefault(r.domain, [0.0, 0.0])
            w[0] = w[0] * 0.999 ** r.lookahead + r.accepted
            w[1] = w[1] * 0.999 ** r.lookahead + r.lookahead
            ratio.set(w[0] / w[1])
            draft.observe(r.draft_seconds)
        verify.observe(r.verify_seconds)


def per_record_us(observe, recs: list[StepRecord], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for r in recs:
            observe(r)
        times.append((time.perf_counter() - start) / len(recs) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--domains", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    recs = records(args.records, args.domains)
    metrics, alternative = Metrics(max_domains=32), ChildrenPerPosition()
    ours = per_record_us(metrics.observe, recs, args.repeats)
    theirs = per_record_us(alternative.observe, recs, args.repeats)
    scrape = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        body = generate_latest(metrics.registry)
        scrape.append((time.perf_counter() - start) * 1e3)
    results = dict(machine=dict(python=platform.python_version(), cpus=os.cpu_count(),
                                platform=platform.platform(), load=os.getloadavg()),
                   records=args.records, domains=args.domains, repeats=args.repeats,
                   observe_us_per_record=ours, children_us_per_record=theirs,
                   scrape_ms=statistics.median(scrape), scrape_bytes=len(body), goal_us=GOAL_US)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    table = Table(title=f"specwatch metrics hot path ({args.records:,} records, {args.domains} domains, "
                        f"median of {args.repeats})")
    for col in ("measure", "value", "goal", "ok"):
        table.add_column(col, justify="left" if col == "measure" else "right")
    table.add_row("Metrics.observe (raw counts, exported at scrape)", f"{ours:.2f} us/record", f"<= {GOAL_US:g}",
                  "yes" if ours <= GOAL_US else "NO")
    table.add_row("prometheus-client children per counter/position", f"{theirs:.2f} us/record", "", "")
    table.add_row(f"one /metrics scrape ({len(body) / 1024:.0f} KiB)", f"{results['scrape_ms']:.1f} ms", "", "")
    Console().print(table)


if __name__ == "__main__":
    main()
