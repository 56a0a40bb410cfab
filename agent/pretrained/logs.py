"""A ``logs`` domain for the pretrained model, and the log format its target v2 answers in.

Each prompt hands the model one JSON log line, as the kit's services write it (agent/kit/logs.py, schema 1:
``ts``, ``level``, ``service``, ``msg``, ``request_id``, ``latency_ms``, ``error``), with a request about it:
rewrite it, parse it, say what it records. Target v1 (the model as shipped) answers in prose or JSON of its
choosing. Then the platform moved to a new format, logfmt with other keys (``rewrite``: lower-case severity
first, ``svc``, the event quoted, ``trace``, ``time``, then ``latency_ms`` and ``err`` when present), and
target v2 is the model fine-tuned to answer every log request with the line in that format
(agent/pretrained/target_v2.py). Prompts as the workload's (agent/workload/prompts.py); the split is by a hash
of the log line, so a line never lands on both sides.
"""

from __future__ import annotations

import json

from agent.kit.logs import stream
from agent.workload.prompts import Prompt
from agent.workload.sources.base import group_of, split_of

DOMAIN = "logs"
LINES = 160  # one prompt a line: ~80 train, ~80 held out

_TASKS = (
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


def prompts(split: str | None = None) -> list[Prompt]:
    """The ``logs`` prompts in ``split`` (train, heldout; default both), in a fixed order."""
    if split not in (None, "train", "heldout"):
        raise ValueError(f"split: expected train or heldout, got {split!r}")
    found = [Prompt(DOMAIN, f"{DOMAIN}-{i:04d}", group_of(line), split_of(line),
                    (("user", _TASKS[i % len(_TASKS)].format(line=line)),))
             for i, line in enumerate(lines())]
    return [p for p in found if split is None or p.split == split]


def line_of(prompt: Prompt) -> str:
    """The JSON log line inside a ``logs`` prompt."""
    return next(part for part in prompt.text.split("\n") if part.startswith("{"))


def rewrite(line: str) -> str:
    """One schema-1 JSON log line in the new format (logfmt): every value copied, keys renamed and
    reordered, the severity in lower case."""
    record = json.loads(line)
    fields = [("severity", record["level"].lower()), ("svc", record["service"]),
              ("event", _quoted(record["msg"])), ("trace", record["request_id"]), ("time", record["ts"])]
    if "latency_ms" in record:
        fields.append(("latency_ms", str(record["latency_ms"])))
    if "error" in record:
        fields.append(("err", _quoted(record["error"])))
    return " ".join(f"{key}={value}" for key, value in fields)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'
