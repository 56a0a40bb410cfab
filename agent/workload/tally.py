"""A replay's summary: per domain and over all, requests, errors, tokens and rates; requests per domain in each
phase of the schedule (what the traffic shift did); the whole run as JSON.

Two rates: ``tok/s`` is the tokens a domain received per second of the run (its throughput, what concurrency
shares out); ``tok/s/req`` is generated tokens over the time its successful requests took (the speed one
request sees, what speculation changes)."""

from __future__ import annotations

import statistics
from dataclasses import asdict

from agent.workload.mix import Schedule
from agent.workload.replay import Replay, ReplayConfig, Result

ALL = "all"


def row(domain: str, results: list[Result], run_seconds: float) -> dict:
    """The summary row of ``results`` (one domain's, or all)."""
    ok = [r for r in results if r.ok]
    tokens = sum(r.tokens for r in ok)
    busy = sum(r.seconds for r in ok)
    latencies = sorted(r.seconds for r in ok)
    return {"domain": domain, "requests": len(results), "errors": len(results) - len(ok), "tokens": tokens,
            "tok/s": tokens / run_seconds if run_seconds > 0 else 0.0,
            "tok/s/req": tokens / busy if busy > 0 else 0.0,
            "p50 s": statistics.median(latencies) if latencies else None,
            "p95 s": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))] if latencies else None}


def summary(run: Replay, order: tuple[str, ...] = ()) -> list[dict]:
    """One row per domain that got a request (those in ``order`` first, in that order, then in order of first
    request), then the ``all`` row."""
    by: dict[str, list[Result]] = {d: [] for d in order}
    for r in run.results:
        by.setdefault(r.domain, []).append(r)
    return [row(d, rs, run.seconds) for d, rs in by.items() if rs] + [row(ALL, run.results, run.seconds)]


def phases(run: Replay, schedule: Schedule) -> list[dict]:
    """Per phase of the schedule: when it started, its mix, and the requests each domain got in it."""
    out = []
    for i, (at, mix) in enumerate(schedule.phases):
        sent = [r for r in run.results if r.phase == i]
        out.append({"phase": i, "from_s": at, "mix": str(mix), "requests": len(sent),
                    "by_domain": {d: sum(r.domain == d for r in sent) for d in schedule.domains}})
    return out


def errors(run: Replay, most: int = 5) -> list[str]:
    """The distinct error messages, most frequent first, with their counts."""
    counts: dict[str, int] = {}
    for r in run.results:
        if r.error is not None:
            counts[r.error] = counts.get(r.error, 0) + 1
    return [f"{n} x {e}" for e, n in sorted(counts.items(), key=lambda kv: -kv[1])[:most]]


def as_json(config: ReplayConfig, run: Replay) -> dict:
    """The whole run: its configuration, summary, phases and every request."""
    return {"url": config.url, "api": config.api, "concurrency": config.concurrency, "split": config.split,
            "seed": config.seed, "max_tokens": config.sampling.max_tokens,
            "temperature": config.sampling.temperature,
            "schedule": [{"from_s": at, "mix": str(mix)} for at, mix in config.schedule.phases],
            "seconds": run.seconds, "max_in_flight": run.max_in_flight, "interrupted": run.interrupted,
            "summary": summary(run, config.schedule.domains), "phases": phases(run, config.schedule),
            "results": [asdict(r) for r in run.results]}
