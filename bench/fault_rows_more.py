"""Rows (f)-(k) of bench/faults.py: 100k domains, generate under load, secrets in logs, slow headers,
invalid values, a schema-driven fuzz run. Each returns (outcome, figures) whatever the sidecar does."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from fault_rows import Ctx, ms, post
from fault_server import Backend, Server, count, in_db, record

IDLE_ENV = {"SPECWATCH_DOMAIN_IDLE_SECONDS": "5", "SPECWATCH_DOMAINS_SECONDS": "5"}  # eviction options


def series(metrics: str) -> int:
    return sum(1 for line in metrics.splitlines() if line and not line.startswith("#"))


def row_f(ctx: Ctx) -> tuple[str, dict]:
    """Distinct domains posted (100k; 10k quick): RSS before / peak / after eviction, /metrics series, the
    time until everything posted is visible in stats (the flushes)."""
    n, batch = (10_000 if ctx.quick else 100_000), 1000
    # Past the store's late period (late_seconds, 300 s), when written window totals are let go too.
    wait_evict = 40.0 if ctx.quick else 330.0
    db = ctx.backend()
    try:
        with Server(db.url(), ctx.tmp, env=IDLE_ENV) as s:
            time.sleep(2.0)
            before = peak = s.rss_mb()
            t0, acked = time.monotonic(), 0
            for start in range(0, n, batch):
                status = post(s, [record(f"d{start + i:06d}-{'x' * 8}") for i in range(batch)], timeout=60.0)
                acked += batch * (status == 202)
                peak = max(peak, s.rss_mb())
            post_seconds = time.monotonic() - t0
            metrics_peak = series(s.client.get("/metrics").text)
            t1 = time.monotonic()
            visible = 0
            while time.monotonic() - t1 < 120.0:
                visible = in_db(db.url())
                peak = max(peak, s.rss_mb())
                if visible >= acked:
                    break
                time.sleep(2.0)
            flush_seconds = time.monotonic() - t1
            end = time.monotonic() + wait_evict
            while time.monotonic() < end:
                time.sleep(2.0)
                peak = max(peak, s.rss_mb())
            after = s.rss_mb()
            metrics_after = series(s.client.get("/metrics").text)
            log = s.output()
            s.stop()
    finally:
        db.drop()
    evicted = sum(int(m) for m in re.findall(r"domains: (\d+) evicted", log))
    figures = {"domains": n, "acked": acked, "post_seconds": round(post_seconds, 1),
               "rss_mb": {"before": round(before, 1), "peak": round(peak, 1), "after": round(after, 1)},
               "after_over_before": round(after / before, 2), "metrics_series": {"peak": metrics_peak,
                                                                                  "after": metrics_after},
               "in_database": visible, "seconds_until_in_database": round(flush_seconds, 1),
               "evicted_logged": evicted, "eviction_env": IDLE_ENV, "waited_for_eviction_s": wait_evict}
    outcome = (f"RSS {before:.0f} -> {peak:.0f} -> {after:.0f} MB; /metrics {metrics_peak} -> {metrics_after} "
               f"series; {visible} of {acked} in the database after {flush_seconds:.1f} s; "
               f"{evicted} domains evicted")
    return outcome, figures


def row_g(ctx: Ctx) -> tuple[str, dict]:
    """60 concurrent POST /v1/generate (kit tiny) while /v1/steps is timed."""
    db = ctx.backend()
    try:
        with Server(db.url(), ctx.tmp, args=("--kit", "tiny")) as s:
            loaded = _ready(s, 180.0)  # the models load after /healthz answers
            base = [_timed(s, 10) for _ in range(10)]
            with ThreadPoolExecutor(60) as pool:
                futures = [pool.submit(_generate, s.url, i) for i in range(60)]
                during = []
                while not all(f.done() for f in futures):
                    during.append(_timed(s, 10))
                    time.sleep(0.1)
                results = [f.result() for f in futures]
            s.stop()
    finally:
        db.drop()
    statuses: dict[str, int] = {}
    for status, _, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    retry_after = sum(1 for _, _, ra in results if ra)
    figures = {"models_ready_seconds": loaded, "generate_statuses": statuses, "generate_retry_after": retry_after,
               "generate_seconds": ms([t for _, t, _ in results]), "steps_before": ms(base),
               "steps_during": ms(during)}
    outcome = (f"generate {statuses} ({retry_after} with Retry-After); /v1/steps p50/max "
               f"{figures['steps_during']['p50_ms']}/{figures['steps_during']['max_ms']} ms during "
               f"(before {figures['steps_before']['p50_ms']} ms)")
    return outcome, figures


def _ready(s: Server, limit: float) -> float | None:
    """Seconds until /readyz answers 200 (None: not within ``limit``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            if s.client.get("/readyz", timeout=5.0).status_code == 200:
                return round(time.monotonic() - t0, 1)
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return None


def _timed(s: Server, n: int) -> float:
    t0 = time.monotonic()
    post(s, [record("timed") for _ in range(n)])
    return time.monotonic() - t0


def _generate(url: str, i: int) -> tuple[int | str, float, bool]:
    t0 = time.monotonic()
    try:
        r = httpx.post(f"{url}/v1/generate", json={"prompt": f"def f{i}(x):", "domain": "code", "max_tokens": 48},
                       timeout=300.0)
        return r.status_code, time.monotonic() - t0, "retry-after" in r.headers
    except httpx.HTTPError as exc:
        return type(exc).__name__, time.monotonic() - t0, False


class _Hook(BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def row_h(ctx: Ctx) -> tuple[str, dict]:
    """A secret-bearing database URL (PostgreSQL), webhook URL and token: grep the log for them."""
    secrets = {"db_password": "DbPassw0rd-s3cret", "webhook_token": "HookT0ken-s3cret",
               "api_token": "ApiT0ken-s3cret-0123456789"}
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    db = Backend(ctx.kind, ctx.tmp, password=secrets["db_password"] if ctx.kind == "postgresql" else None)
    env = {"SPECWATCH_WEBHOOK_URL": f"http://127.0.0.1:{hook.server_port}/hook?token={secrets['webhook_token']}",
           "SPECWATCH_TOKEN": secrets["api_token"], "SPECWATCH_ALERTS_SECONDS": "1"}
    try:
        with Server(db.url(), ctx.tmp, env=env) as s:
            auth = {"Authorization": f"Bearer {secrets['api_token']}"}
            bad = s.client.post("/v1/steps", json={"records": [record()]},
                                headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code
            for _ in range(20):  # K=4 never accepted and slow: speculation loses, the switch alerts
                s.client.post("/v1/steps", headers=auth, json={"records": [
                    record("losing", k=4, accepted=0, draft_seconds=0.2, verify_seconds=0.02) for _ in range(100)]
                    + [record("losing", k=0, accepted=0, draft_seconds=0.0, verify_seconds=0.02)
                       for _ in range(20)]})
            end = time.monotonic() + (20.0 if ctx.quick else 45.0)
            while time.monotonic() < end and _Hook.hits < 2:
                time.sleep(1.0)
            s.stop()
            log = s.output()
    finally:
        hook.shutdown()
        db.drop()
    found = {name: log.count(value) for name, value in secrets.items()}
    if ctx.kind != "postgresql":
        found.pop("db_password")
    outcome = (f"secrets in the log: {sum(found.values())} ({', '.join(f'{k} {v}' for k, v in found.items())}); "
               f"webhook called {_Hook.hits} times (answering 500); wrong token -> {bad}")
    return outcome, {"occurrences": found, "webhook_hits": _Hook.hits, "wrong_token_status": bad,
                     "log_lines": len(log.splitlines())}


def row_i(ctx: Ctx) -> tuple[str, dict]:
    """A client that sends half a request line and waits: is the connection closed, after how long."""
    limit = 20.0 if ctx.quick else 70.0
    db = ctx.backend()
    try:
        with Server(db.url(), ctx.tmp) as s:
            sock = socket.create_connection(("127.0.0.1", s.port))
            sock.sendall(b"GET /heal")
            sock.settimeout(limit)
            t0 = time.monotonic()
            try:
                data = sock.recv(4096)
                closed, waited = True, time.monotonic() - t0
            except TimeoutError:
                data, closed, waited = b"", False, limit
            sock.close()
            s.stop()
    finally:
        db.drop()
    first = data.split(b"\r\n", 1)[0].decode(errors="replace")
    outcome = (f"closed after {waited:.1f} s{f' ({first})' if first else ''}" if closed
               else f"still open after {limit:.0f} s")
    return outcome, {"closed": closed, "seconds": round(waited, 1), "answer": first, "limit": limit}


INVALID = {"timestamp 0": {"timestamp": 0}, "timestamp 1e12": {"timestamp": 1e12},
           "timestamp 1e300": {"timestamp": 1e300}, "draft_seconds 1e308": {"draft_seconds": 1e308},
           "lookahead 9 (kmax 8)": {"lookahead": 9, "accepted": 0, "emitted": 1}}


def row_j(ctx: Ctx) -> tuple[str, dict]:
    """Invalid values, each in a batch with a good record: status codes, then what was stored."""
    db = ctx.backend()
    codes: dict[str, int] = {}
    try:
        with Server(db.url(), ctx.tmp) as s:
            for name, fields in INVALID.items():
                codes[name] = post(s, [record(), record(**fields)])
            good = json.dumps({"records": [record()]})
            dup = good.replace('"lookahead": 4', '"lookahead": 4, "lookahead": 2', 1)
            codes["duplicate JSON keys"] = s.client.post(
                "/v1/steps", content=dup, headers={"content-type": "application/json"}).status_code
            code, _ = s.stop()
        n = count(db.url())[0]
    finally:
        db.drop()
    accepted = [k for k, v in codes.items() if v < 400]
    outcome = (f"{len(codes) - len(accepted)} of {len(codes)} refused with 4xx; accepted: "
               f"{', '.join(accepted) or 'none'}; exit {code}, {n} records stored")
    return outcome, {"statuses": codes, "exit_code": code, "stored": n}


def row_k(ctx: Ctx) -> tuple[str, dict]:
    """Schemathesis against /openapi.json: cases run, 5xx other than the documented 503s."""
    examples = 150 if ctx.quick else 3500  # 3000 gave 9212 cases
    db = ctx.backend()
    har = ctx.tmp / f"fuzz-{ctx.kind}.har"
    try:
        with Server(db.url(), ctx.tmp) as s:
            cmd = [_st(), "run", f"{s.url}/openapi.json", "--max-examples",
                   str(examples), "--checks", "not_a_server_error", "--report", "har", "--report-har-path",
                   str(har), "--workers", "2", "--no-color"]
            t0 = time.monotonic()
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=ctx.tmp)
            seconds = time.monotonic() - t0
            alive = s.proc.poll() is None
            s.stop()
    finally:
        db.drop()
    try:
        entries = json.loads(har.read_text())["log"]["entries"]
    except (OSError, ValueError, KeyError):
        return f"schemathesis gave no report (exit {run.returncode}): {run.stderr.strip()[-200:]}", {}
    statuses: dict[str, int] = {}
    for e in entries:
        key = str(e["response"]["status"])
        statuses[key] = statuses.get(key, 0) + 1
    bad = sum(v for k, v in statuses.items() if k.startswith("5") and k != "503")
    outcome = (f"{len(entries)} cases in {seconds:.0f} s: {bad} 5xx other than 503; statuses {statuses}; "
               f"server {'alive' if alive else 'died'}")
    return outcome, {"cases": len(entries), "server_errors": bad, "statuses": statuses, "seconds": round(seconds),
                     "max_examples_per_operation": examples, "schemathesis_exit": run.returncode}


def _st() -> str:
    """The schemathesis CLI beside this Python (the venv), else on PATH."""
    here = Path(sys.executable).parent / "st"
    return str(here) if here.exists() else (shutil.which("st") or "st")
