"""How far SGLang's gauges are from the counts: ``specwatch scrape``'s estimate against a simulated truth.

SGLang exports only the acceptance length L and rate of its last ``decode_log_interval`` (40) decode batches
(agent/scrape/pages/sglang.py); the scraper turns a scrape's decode tokens E into passes = round(E / L). Here
a scheduler runs ``--batches`` decode batches of ``--requests`` requests per scrape (K = 3, the gauges set
every 40 batches as log_decode_stats does, the rate by the definition since sgl-project/sglang#23530), once
with a steady per-token acceptance and once with acceptance falling half-way through the scrape; the
estimated passes and acceptance (accepted / drafted) are compared with the simulated ones. Also counted:
scrapes whose gauges leave K undecidable on their own (the first reading of a series then waits).
Not a test: prints a table and writes bench/results/sglang_estimate.json.

    python bench/sglang_estimate.py [--scrapes 300] [--batches 240] [--requests 8]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.scrape.pages.sglang import GaugeSnapshot, draft_lengths  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "sglang_estimate.json"
K, WINDOW = 3, 40


def scrape(seed: int, batches: int, requests: int, before: float, after: float) -> dict:
    """One scrape interval: the true counts, and the scraper's estimate from the gauges at its end."""
    rng = random.Random(seed)
    passes = accepted = window_passes = window_accepted = 0
    length = rate = 0.0
    for batch in range(batches):
        p = before if batch < batches // 2 else after
        for _ in range(requests):
            m = 0
            while m < K and rng.random() < p:
                m += 1
            passes, accepted = passes + 1, accepted + m
            window_passes, window_accepted = window_passes + 1, window_accepted + m
        if (batch + 1) % WINDOW == 0:
            length = (window_accepted + window_passes) / window_passes
            rate = window_accepted / (window_passes * K)
            window_passes = window_accepted = 0
    start = GaugeSnapshot(0, length, rate, draft_lengths(length, rate)).settle(None)
    end = GaugeSnapshot(passes + accepted, length, rate, draft_lengths(length, rate)).settle(None)
    estimate = end.minus(start)
    if estimate.problem():
        return {"undecidable": True}
    return {"undecidable": False, "passes_error": (estimate.drafts - passes) / passes,
            "acceptance_error": estimate.accepted / estimate.draft_tokens - accepted / (passes * K)}


def summary(rows: list[dict]) -> dict:
    done = [r for r in rows if not r["undecidable"]]
    errors = sorted(abs(r["passes_error"]) for r in done)
    return {"scrapes": len(rows), "undecidable_k": len(rows) - len(done),
            "passes_error_mean": statistics.mean(r["passes_error"] for r in done),
            "passes_error_abs_mean": statistics.mean(errors),
            "passes_error_abs_p95": errors[int(0.95 * (len(errors) - 1))],
            "acceptance_error_mean": statistics.mean(r["acceptance_error"] for r in done)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--batches", type=int, default=240)
    parser.add_argument("--requests", type=int, default=8)
    args = parser.parse_args()
    cases = {"steady p = 0.6": (0.6, 0.6), "p 0.6 -> 0.4 half-way": (0.6, 0.4)}
    results = {name: summary([scrape(seed, args.batches, args.requests, *ps) for seed in range(args.scrapes)])
               for name, ps in cases.items()}
    table = Table(title=f"SGLang estimate, {args.batches} batches x {args.requests} requests per scrape, K = {K}")
    for column in ("case", "passes error (mean)", "|error| mean", "|error| p95", "acceptance error", "K undecidable"):
        table.add_column(column)
    for name, r in results.items():
        table.add_row(name, f"{r['passes_error_mean']:+.2%}", f"{r['passes_error_abs_mean']:.2%}",
                      f"{r['passes_error_abs_p95']:.2%}", f"{r['acceptance_error_mean']:+.3f}",
                      f"{r['undecidable_k']} / {r['scrapes']}")
    Console().print(table)
    RESULTS.write_text(json.dumps({"args": vars(args), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
