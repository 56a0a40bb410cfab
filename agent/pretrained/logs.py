"""The ``logs`` domain of the pretrained model, and the log format its target v2 answers in.

The prompts are the workload's ``logs`` set (agent/workload/sources/logs.py: one JSON log line in the kit's
schema 1 with a request about it). Target v1 (the model as shipped) answers in prose or JSON of its choosing.
Then the platform moved to a new format, logfmt with other keys (``rewrite``: lower-case severity first,
``svc``, the event quoted, ``trace``, ``time``, then ``latency_ms`` and ``err`` when present), and target v2
is the model fine-tuned to answer every log request with the line in that format
(agent/pretrained/target_v2.py).
"""

from __future__ import annotations

import json

from agent.workload import prompts as workload
from agent.workload.prompts import Prompt

DOMAIN = "logs"


def prompts(split: str | None = None) -> list[Prompt]:
    """The ``logs`` prompts in ``split`` (train, heldout; default both), in a fixed order."""
    return workload.load(DOMAIN, split)


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
