"""Rows (a)-(e) of bench/faults.py: data loss at shutdown and crash, visibility, a black-holed database,
squatted domain slots. Each row measures what happens whatever the sidecar does (no feature assumed) and
returns (outcome, figures)."""

from __future__ import annotations

import signal
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from fault_server import REPO, Backend, BlackHole, Poster, Server, count, record


@dataclass
class Ctx:
    """One row's run: backend kind, scratch folder, quick sizes or full ones; the checkout whose proxy the
    proxy rows run (another one gives the figures before a change)."""

    kind: str
    tmp: Path
    quick: bool
    repo: Path = REPO

    def backend(self, **kwargs) -> Backend:
        return Backend(self.kind, self.tmp, **kwargs)


def ms(seconds: list[float]) -> dict[str, float | None]:
    """Median and max of latencies in milliseconds."""
    if not seconds:
        return {"p50_ms": None, "max_ms": None}
    return {"p50_ms": round(1000 * statistics.median(seconds), 1), "max_ms": round(1000 * max(seconds), 1)}


def post(server: Server, records: list[dict], **kwargs) -> int:
    return server.client.post("/v1/steps", json={"records": records}, **kwargs).status_code


def dead_letters(log: str) -> int:
    return sum(1 for line in log.splitlines() if "dead-letter" in line.lower() or "dead letter" in line.lower())


def row_a(ctx: Ctx) -> tuple[str, dict]:
    """A record with timestamp 1e12 inside a good batch, another good batch, SIGTERM."""
    db = ctx.backend()
    try:
        with Server(db.url(), ctx.tmp) as s:
            batch = [record() for _ in range(50)] + [record(ts=1e12)] + [record() for _ in range(49)]
            first = post(s, batch)
            second = post(s, [record() for _ in range(100)])
            code, secs = s.stop()
            log = s.output()
        good = 99 * (first == 202) + 100 * (second == 202)
        n, shown = count(db.url())
    finally:
        db.drop()
    outcome = (f"POST with the bad record: {first}; exit {code}; {n} of {good} acked good records stored "
               f"({shown} shown by stats)"
               + (f"; {dead_letters(log)} dead-letter log lines" if dead_letters(log) else ""))
    return outcome, {"bad_batch_status": first, "acked_good": good, "stored": n, "stats_shows": shown,
                     "lost": good - n, "exit_code": code, "shutdown_seconds": round(secs, 2)}


def _restart_then_count(db: Backend, ctx: Ctx) -> tuple[int, int]:
    """Stored steps right after the crash, and after a clean start and stop (a journal replays then)."""
    before = count(db.url())[0]
    with Server(db.url(), ctx.tmp) as s:
        s.stop()
    return before, count(db.url())[0]


def _crash(ctx: Ctx, run_for: float, rate: float) -> dict:
    db = ctx.backend()
    try:
        with Server(db.url(), ctx.tmp) as s:
            poster = Poster(s.url, rate)
            poster.start()
            time.sleep(run_for)
            s.stop(signal.SIGKILL)
            poster.stop()
        before, after = _restart_then_count(db, ctx)
    finally:
        db.drop()
    lost = poster.acked - after
    return {"seconds_run": run_for, "posted": poster.posted, "acked": poster.acked, "stored_at_once": before,
            "stored_after_restart": after, "lost": lost, "lost_seconds": round(lost / rate, 2),
            "lost_fraction": round(lost / poster.acked, 3) if poster.acked else None}


def row_b(ctx: Ctx) -> tuple[str, dict]:
    """kill -9 under 2k records/s: after a while, and within the first 1.5 s after start."""
    rate = 2000.0
    steady = _crash(ctx, 6.0 if ctx.quick else 20.0, rate)
    early = _crash(ctx, 1.5, rate)
    outcome = (f"lost {steady['lost']} of {steady['acked']} acked ({steady['lost_seconds']} s of records); "
               f"killed 1.5 s after start: lost {early['lost']} of {early['acked']} ({early['lost_seconds']} s)")
    return outcome, {"rate": rate, "steady": steady, "early": early}


def row_c(ctx: Ctx) -> tuple[str, dict]:
    """Records posted, SIGTERM at once, then ``specwatch stats``."""
    db = ctx.backend()
    try:
        with Server(db.url(), ctx.tmp) as s:
            acked = sum(100 for _ in range(10) if post(s, [record() for _ in range(100)]) == 202)
            code, secs = s.stop()
        held, n = count(db.url())
    finally:
        db.drop()
    return (f"stats shows {n} of {acked} acked records ({held} in the database); exit {code}",
            {"acked": acked, "stats_steps": n, "in_database": held, "exit_code": code,
             "shutdown_seconds": round(secs, 2)})


def row_d(ctx: Ctx) -> tuple[str, dict]:
    """PostgreSQL black-holed: /readyz and POST latency, 503s, then what was stored once it came back."""
    if ctx.kind != "postgresql":
        return "n/a (PostgreSQL only)", {}
    hole_for = 12.0 if ctx.quick else 30.0
    db, proxy = ctx.backend(), None
    try:
        proxy = BlackHole(5432)
        with Server(db.url(proxy.port), ctx.tmp) as s:
            poster = Poster(s.url, 500.0, batch=50)
            poster.start()
            time.sleep(3.0)
            proxy.hole.set()
            t0 = time.monotonic()
            ready = _probe_readyz(s.url, hole_for, proxy.hole.clear)
            t1 = t0 + hole_for
            during = [latency for start, latency in poster.sent if t0 <= start < t1]
            statuses = dict(poster.statuses)
            time.sleep(5.0)
            poster.stop()
            code, _ = s.stop()
        n = count(db.url())[0]
    finally:
        if proxy is not None:
            proxy.close()
        db.drop()
    codes = [c for c, _ in ready]
    figures = {"hole_seconds": hole_for, "readyz": {**ms([t for _, t in ready]), "statuses": _count(codes)},
               "post_during_hole": ms(during), "post_statuses": statuses, "post_timeouts": poster.failed,
               "posted": poster.posted, "acked": poster.acked, "stored": n, "lost": poster.acked - n,
               "exit_code": code}
    outcome = (f"/readyz max {figures['readyz']['max_ms']} ms ({_count(codes)}); POST max "
               f"{figures['post_during_hole']['max_ms']} ms, 503s {statuses.get(503, 0)}, client timeouts "
               f"{poster.failed}; stored {n} of {poster.acked} acked")
    return outcome, figures


def _probe_readyz(url: str, seconds: float, then) -> list[tuple[int | str, float]]:
    """(status or "timeout", seconds) of /readyz asked once a second for ``seconds``, each probe on its own
    thread (a hanging probe does not delay the next) with a 10 s client timeout; ``then()`` runs when the
    last probe has started (the fault ends), before waiting for the answers."""
    out: list[tuple[int | str, float]] = []

    def probe() -> None:
        t0 = time.monotonic()
        try:
            status: int | str = httpx.get(f"{url}/readyz", timeout=10.0).status_code
        except httpx.HTTPError:
            status = "timeout"
        out.append((status, time.monotonic() - t0))

    probes = []
    for _ in range(int(seconds)):
        probes.append(threading.Thread(target=probe, daemon=True))
        probes[-1].start()
        time.sleep(1.0)
    then()
    for t in probes:
        t.join(12.0)
    return out


def _count(values: list) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


def row_e(ctx: Ctx) -> tuple[str, dict]:
    """32 made-up GET /v1/decision, then a real domain's records."""
    db = ctx.backend()
    try:
        with Server(db.url(), ctx.tmp) as s:
            made_up = [s.client.get("/v1/decision", params={"domain": f"made-up-{i}"}).json() for i in range(32)]
            post(s, [record("real-domain") for _ in range(50)])
            time.sleep(1.5)
            real = s.client.get("/v1/decision", params={"domain": "real-domain"}).json()
            metrics = s.client.get("/metrics").text
            s.stop()
    finally:
        db.drop()
    own = "shared state of 'other'" not in real.get("reason", "")
    series = 'domain="real-domain"' in metrics
    squatted = sum(1 for line in metrics.splitlines() if 'domain="made-up-' in line)
    outcome = (f"real domain {'has its own state' if own else 'falls into other'}; its metric series "
               f"{'exist' if series else 'are missing'}; {squatted} made-up metric lines; made-up answer: "
               f"K={made_up[0].get('lookahead')} ({made_up[0].get('reason', '')[:90]})")
    return outcome, {"real_has_own_state": own, "real_metric_series": series, "made_up_metric_lines": squatted,
                     "made_up_answer": made_up[0], "real_answer": real}

