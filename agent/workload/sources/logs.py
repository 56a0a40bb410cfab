"""``logs``: one JSON log line, as the kit's services write it (service_logs.py, schema 1: ``ts``, ``level``,
``service``, ``msg``, ``request_id``, ``latency_ms``, ``error``), with a request about it: rewrite it, parse
it, say what it records. The domain the real model's target v2 changes (agent/pretrained/logs.py): v1 answers
in prose or JSON of its choosing, v2 with the line in the new format. One prompt a line; the group is the line,
so a line never lands on both sides of the split."""

from __future__ import annotations

from agent.workload.sources.base import Item, user
from agent.workload.sources.service_logs import stream

LINES = 160  # one prompt a line: ~80 train, ~80 held out

TASKS = (
    "Rewrite this log line in our log format:\n\n{line}",
    "Parse the following log entry:\n\n{line}",
    "What does this log line say?\n\n{line}",
    "Convert this JSON log record to the current logging format:\n\n{line}",
    "Here is a line from a service log:\n\n{line}\n\nReformat it.",
    "Summarize this log entry in one line:\n\n{line}",
)


def lines(n: int = LINES) -> list[str]:
    """``n`` schema-1 log lines, one per seed, in a fixed order."""
    return [stream(seed, 1).splitlines()[0] for seed in range(n)]


def items() -> list[Item]:
    return [(line, user(TASKS[i % len(TASKS)].format(line=line))) for i, line in enumerate(lines())]
