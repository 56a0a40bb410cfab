"""The contract every engine adapter of the proxy keeps, and the one record it makes of a request.

An adapter (one module per engine beside this one) knows four things about its engine:

- ``detect(probes)``: whether the answers of the pool's own pages (``PROBES``, path -> parsed JSON, text or
  None) are this engine's;
- ``versions(probes, pool)``: the target and draft versions and the draft length the engine reports
  (``Found``), from the same pages;
- ``figures(answer)``: the request's speculation figures (``Figures``) from its whole JSON answer, or from the
  one streamed event that carries them (``MARKER`` names a key only that event has); ``Missing`` naming the
  field when the engine answered without them (a start-up flag is off), None when the answer is incomplete;
- ``startup(pages, lookahead)`` and ``started(answers, lookahead)``: the start check (agent/proxy/startcheck.py):
  the requests that tell, when a pool comes up, whether its answers will carry the figures, and what their
  answers say (True, False: ``MISSING`` applies, None: cannot tell).

Each adapter module also names: ``NAME`` and ``TITLE``; ``PAGES`` its versions come from (``FALLBACK``: older
names of renamed pages); ``COUNTERS``, the page of its speculation counters for pool-level records (None:
none to read); ``MISSING``, the (field, hint) reported when its answers lack their figures.

``record(figures, served, timestamp)`` then makes the request's aggregate StepRecord the same way for every
engine. Terms: a *step* is one target pass (it emits its accepted drafted tokens plus one bonus token);
*drafted* and *accepted* are token counts summed over the request's steps; ``per_position[i]`` counts the steps
whose drafted token at position i (0-based) was accepted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agent.proxy.inflight import Met
from specwatch_core.records import RecordError, StepRecord


@dataclass(frozen=True, slots=True)
class Served:
    """What the proxy knows about the request besides the engine's figures."""

    domain: str
    pool: str
    lookahead: int  # the pool's K: records are stored at it
    # the pair being judged: the target the pool serves and its draft (the off pool's carry its peers' draft)
    target_version: str
    draft_version: str
    request_id: str | None = None
    pod: str | None = None
    load: int | None = None  # requests in flight on the pool when this one was sent, it included
    met: Met | None = None  # the load over its life (agent/proxy/inflight.py): what its record carries


@dataclass(frozen=True, slots=True)
class Figures:
    """One request's figures as its engine reports them. ``steps`` None: emitted - accepted (each step emits
    its accepted tokens plus one). ``seconds`` None: the engine reports no time; the proxy's wall time of the
    request is used. ``lookahead``: the draft length the engine says it drafted with (None: unsaid)."""

    emitted: int
    drafted: int = 0
    accepted: int = 0
    steps: int | None = None
    seconds: float | None = None
    per_position: tuple[int, ...] | None = None
    lookahead: int | None = None
    verified: int | None = None  # steps with drafts that ``per_position`` counts over (its histogram's sum)
    prompt_seconds: float | None = None  # the engine's time on the prompt before the first step (None: unsaid)


@dataclass(frozen=True, slots=True)
class Found:
    """What an engine's pages say it serves: ``target`` (a version, or a file path when ``target_is_path``),
    ``draft_path`` (None: unsaid), ``lookahead`` (the draft length, None: unsaid), ``speculates`` (None:
    unsaid), ``adapters`` (LoRA adapters applied to the target: part of its version)."""

    target: str | None
    draft_path: str | None = None
    lookahead: int | None = None
    speculates: bool | None = None
    target_is_path: bool = False
    adapters: tuple[tuple[str, float], ...] = ()  # (path, scale) of each LoRA adapter applied to the target


class Missing(Exception):
    """The engine answered without its per-request speculation figures; ``field`` names what is missing and
    ``hint`` how to turn it on."""

    def __init__(self, field: str, hint: str):
        self.field, self.hint = field, hint
        super().__init__(f"{field} missing from the answer ({hint})")


def record(figures: Figures, served: Served, timestamp: float, elapsed: float | None = None) -> StepRecord:
    """The request's aggregate record. RecordError naming the field when the figures do not fit the pool (a
    draft on a pool without one, an engine drafting more than the pool's K) or each other."""
    f = figures
    if served.lookahead == 0 and f.drafted:
        raise RecordError("drafted", f"pool {served.pool} serves without a draft but the engine drafted {f.drafted}")
    if f.lookahead is not None and f.lookahead > served.lookahead:
        raise RecordError("lookahead", f"the engine drafts up to {f.lookahead} a step, pool {served.pool} is "
                                       f"recorded at K={served.lookahead}; name the pool k{f.lookahead}")
    steps = f.emitted - f.accepted if f.steps is None else f.steps
    if steps < 1:
        raise RecordError("steps", f"{f.emitted} tokens emitted with {f.accepted} accepted leaves no step")
    seconds = f.seconds if f.seconds is not None else elapsed
    if seconds is None:
        raise RecordError("seconds", "neither the engine nor the proxy timed the request")
    out = StepRecord(
        domain=served.domain, lookahead=served.lookahead, accepted=f.accepted, emitted=f.emitted,
        draft_seconds=0.0, verify_seconds=0.0, seconds=seconds, steps=steps, drafted=f.drafted,
        pool=served.pool, target_version=served.target_version, draft_version=served.draft_version,
        timestamp=timestamp, pod=served.pod, request_id=served.request_id, prompt_seconds=f.prompt_seconds,
        load=served.load if served.met is None else served.met.load())
    return out.validate()


def per_position(histogram: list[int]) -> tuple[int, ...]:
    """Per-position accepted counts from a histogram whose entry j counts the steps that accepted exactly j
    drafted tokens (acceptance is a prefix: position i is accepted in every step that accepted more than i)."""
    out, above = [], 0
    for count in reversed(histogram[1:]):
        above += count
        out.append(above)
    return tuple(reversed(out))


def count(value: Any) -> bool:
    """A whole non-negative count (JSON integers only: a float or a bool is not one)."""
    return type(value) is int and value >= 0


def number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def field(answer: Any, *path: str | int) -> Any:
    """``answer[path[0]][path[1]]...``, None where a step is missing or of the wrong kind."""
    for key in path:
        if isinstance(key, int):
            if not isinstance(answer, list) or len(answer) <= key:
                return None
        elif not isinstance(answer, dict):
            return None
        answer = answer[key] if isinstance(key, int) else answer.get(key)
    return answer
