"""Synthetic service logs (JSON lines) from a seeded RNG: the kit's most predictable domain (agent/kit/corpora.py)
and the lines of the workload's ``logs`` prompt set (logs.py beside this module).

Two schemas tell the kit's "target updated" story. Schema 1 is what the services wrote when target v1
and its draft were trained. Then the platform moved to schema 2 (keys renamed and reordered, lower-case
severities, durations in seconds, a trace id on every line), and target v2 was fine-tuned on fresh logs:
it now writes schema 2 even after schema-1 lines, while the draft still proposes schema-1 keys.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

SERVICES = ("checkout", "payments", "inventory", "search", "auth", "gateway", "shipping", "profile")
METHODS = (("GET", 0.7), ("POST", 0.2), ("PUT", 0.06), ("DELETE", 0.04))
ROUTES = ("/api/v1/orders/{id}", "/api/v1/users/{id}", "/api/v1/items/{id}", "/api/v1/carts/{id}/items",
          "/api/v1/search", "/healthz", "/api/v1/payments/{id}/capture", "/api/v1/sessions")
TABLES = ("orders", "users", "items", "payments", "sessions")
JOBS = ("reindex", "send_receipts", "expire_sessions", "sync_inventory", "rollup_metrics")
ERRORS = ("upstream timeout", "connection reset by peer", "deadlock detected", "rate limit exceeded")
EPOCH = datetime(2024, 3, 1, tzinfo=timezone.utc)


def stream(seed: int, n_bytes: int, schema: int = 1) -> str:
    """About ``n_bytes`` of one service's log (whole lines), reproducible from ``seed``."""
    if schema not in (1, 2):
        raise ValueError(f"schema: expected 1 or 2, got {schema}")
    rng = random.Random(seed)
    service = rng.choice(SERVICES)
    now = EPOCH + timedelta(seconds=rng.randrange(60 * 86400))
    lines: list[str] = []
    size = 0
    while size < n_bytes:
        now += timedelta(milliseconds=rng.expovariate(1 / 250))
        event = _event(rng, service)
        line = _schema1(now, event) if schema == 1 else _schema2(now, event, rng)
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


def _event(rng: random.Random, service: str) -> dict:
    kind = rng.choices(("http", "db", "cache", "job"), weights=(0.55, 0.2, 0.15, 0.1))[0]
    event: dict = {"service": service, "kind": kind, "request_id": f"{rng.getrandbits(32):08x}"}
    if kind == "http":
        route = rng.choice(ROUTES)
        status = rng.choices((200, 201, 204, 400, 404, 500, 503), (80, 6, 4, 3, 4, 2, 1))[0]
        event.update(method=rng.choices(*zip(*METHODS))[0],
                     path=route.replace("{id}", str(rng.randrange(1, 5000))),
                     status=status, latency_ms=round(rng.lognormvariate(3.0, 0.8), 1))
        if status >= 500:
            event["error"] = rng.choice(ERRORS)
    elif kind == "db":
        event.update(table=rng.choice(TABLES), op=rng.choice(("select", "insert", "update")),
                     rows=rng.randrange(0, 200), latency_ms=round(rng.lognormvariate(1.5, 0.7), 1))
    elif kind == "cache":
        event.update(key=f"{rng.choice(TABLES)}:{rng.randrange(1, 5000)}", hit=rng.random() < 0.8)
    else:
        event.update(job=rng.choice(JOBS), state=rng.choice(("started", "finished")))
    return event


def _level(event: dict) -> str:
    if event.get("status", 0) >= 500:
        return "ERROR"
    if event.get("status", 0) >= 400 or event.get("latency_ms", 0) > 200:
        return "WARN"
    return "INFO"


def _message(event: dict) -> str:
    kind = event["kind"]
    if kind == "http":
        return f"{event['method']} {event['path']} {event['status']}"
    if kind == "db":
        return f"{event['op']} {event['table']} rows={event['rows']}"
    if kind == "cache":
        return f"cache {'hit' if event['hit'] else 'miss'} {event['key']}"
    return f"job {event['job']} {event['state']}"


def _schema1(now: datetime, event: dict) -> str:
    record = {"ts": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
              "level": _level(event), "service": event["service"], "msg": _message(event),
              "request_id": event["request_id"]}
    if "latency_ms" in event:
        record["latency_ms"] = event["latency_ms"]
    if "error" in event:
        record["error"] = event["error"]
    return json.dumps(record, separators=(",", ":"))


def _schema2(now: datetime, event: dict, rng: random.Random) -> str:
    record = {"severity": _level(event).lower(), "time": f"{now.timestamp():.3f}",
              "svc": event["service"], "trace": f"{rng.getrandbits(32):08x}",
              "event": _message(event)}
    if "latency_ms" in event:
        record["duration_s"] = round(event["latency_ms"] / 1000, 4)
    if "error" in event:
        record["err"] = event["error"]
    return json.dumps(record, separators=(",", ":"))
