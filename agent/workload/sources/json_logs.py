"""``json``: JSON log lines. Convert raw log lines (an application log, nginx's access log) to JSON lines,
continue a stream of JSON lines, or keep the lines that match a filter. The structure is rigid and repeats
line after line (keys, quotes, braces, timestamps that share a prefix): speculation pays here on a draft and
on n-gram lookup alike, and a model or schema change shows first here.

Log lines are drawn by a seeded generator, so the set is the same on every run."""

from __future__ import annotations

import json
import random

from agent.workload.sources.base import Item, user

SERVICES = ("auth", "billing", "catalog", "checkout", "gateway", "inventory", "mailer", "search", "users")
LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
MESSAGES = {
    "INFO": ("request completed", "user signed in", "cache refreshed", "job scheduled", "order created",
             "payment captured", "email queued"),
    "DEBUG": ("cache hit", "query planned", "retrying connection", "token validated"),
    "WARN": ("slow query", "rate limit close", "retrying after timeout", "deprecated field used"),
    "ERROR": ("database timeout", "payment declined", "upstream returned 502", "invalid signature"),
}
PATHS = ("/api/v1/orders", "/api/v1/users/me", "/login", "/static/app.js", "/api/v1/search", "/health",
         "/api/v1/cart/items", "/checkout/confirm")
AGENTS = ("Mozilla/5.0 (X11; Linux x86_64)", "curl/8.5.0", "python-httpx/0.27.0", "okhttp/4.12.0")
SYSTEM = "You are a log processing tool. Output JSON lines only, one object per line, no commentary."
BATCHES_PER_TASK = 32


def _clock(rng: random.Random):
    second = rng.randint(0, 80_000)
    day = rng.randint(1, 28)
    while True:
        second += rng.randint(0, 4)
        h, rest = divmod(second % 86_400, 3600)
        yield f"2025-03-{day:02d}T{h:02d}:{rest // 60:02d}:{rest % 60:02d}.{rng.randint(0, 999):03d}Z"


def _events(rng: random.Random, n: int) -> list[dict]:
    clock = _clock(rng)
    service = rng.choice(SERVICES)
    out = []
    for _ in range(n):
        level = rng.choice(LEVELS)
        event = {"ts": next(clock), "level": level, "service": service, "msg": rng.choice(MESSAGES[level]),
                 "request_id": f"{rng.getrandbits(32):08x}"}
        if rng.random() < 0.5:
            event["duration_ms"] = rng.randint(1, 2500)
        out.append(event)
    return out


def _raw_app(rng: random.Random, n: int) -> str:
    return "\n".join(f"{e['ts']} {e['level']:<5} [{e['service']}] {e['msg']} request_id={e['request_id']}"
                     + (f" duration_ms={e['duration_ms']}" if "duration_ms" in e else "")
                     for e in _events(rng, n))


def _raw_nginx(rng: random.Random, n: int) -> str:
    day = rng.randint(1, 28)
    lines = []
    for i in range(n):
        ip = ".".join(str(rng.randint(1, 254)) for _ in range(4))
        status = rng.choice((200, 200, 200, 201, 204, 301, 304, 400, 404, 500))
        lines.append(f'{ip} - - [{day:02d}/Mar/2025:10:{i:02d}:{rng.randint(0, 59):02d} +0000] '
                     f'"{rng.choice(("GET", "GET", "POST", "PUT"))} {rng.choice(PATHS)} HTTP/1.1" {status} '
                     f'{rng.randint(0, 40_000)} "-" "{rng.choice(AGENTS)}"')
    return "\n".join(lines)


def _json_lines(rng: random.Random, n: int) -> str:
    return "\n".join(json.dumps(e) for e in _events(rng, n))


TASKS = (
    (lambda rng: "Convert these log lines to JSON, one object per line, with the keys ts, level, service, msg, "
                 "request_id and duration_ms (when present):\n\n" + _raw_app(rng, rng.randint(4, 8))),
    (lambda rng: "Parse these nginx access log lines into JSON lines with the fields ip, time, method, path, "
                 "status, bytes and user_agent:\n\n" + _raw_nginx(rng, rng.randint(3, 7))),
    (lambda rng: "Here are the latest lines of a JSON log. Write the next 5 lines in exactly the same format, "
                 "with plausible values:\n\n" + _json_lines(rng, rng.randint(4, 7))),
    (lambda rng: "From these JSON log lines, return only the ones with level WARN or ERROR, unchanged:\n\n"
                 + _json_lines(rng, rng.randint(6, 10))),
    (lambda rng: "Add a field \"env\": \"prod\" to each of these JSON log lines and return them all:\n\n"
                 + _json_lines(rng, rng.randint(3, 6))),
)


def items() -> list[Item]:
    """BATCHES_PER_TASK prompts per task, each on a batch of log lines of its own (the group)."""
    rng = random.Random(2025)
    found = []
    for i in range(BATCHES_PER_TASK):
        for j, task in enumerate(TASKS):
            text = task(rng)
            found.append((text, user(text, SYSTEM if (i + j) % 3 else None)))
    return found
