"""StepRecord: the one record type of specwatch, from the decoder to storage, policies and alerts.

Terms, defined once:
- draft: the small model that proposes tokens; target: the large model whose output is the result.
- lookahead (K): how many tokens the draft proposes in one step; K = 0 is a plain target step.
- accepted: how many of the K drafted tokens the target kept (a prefix of the draft).
- bonus token: the token the target adds after its verification pass (the replacement on a rejection,
  or one more token when all K were accepted); so emitted = accepted + 1.
- aggregate: one record folding ``steps`` verification passes of one request, as engines report per request
  (llama.cpp ``timings.draft_n`` / ``draft_n_accepted``): ``drafted``, ``accepted`` and ``emitted`` are
  sums over the steps, ``lookahead`` the K the engine drafted with, ``seconds`` their wall time when the
  engine does not split draft from verify time. A per-step record is the case steps = 1 (and ``drafted``
  defaults to lookahead * steps). Only a per-step record knows its positions: an aggregate carries no
  per-token lists and yields no per-position statistics (see ``is_aggregate``).

It is also the JSON body of ``POST /v1/steps``.
"""

from __future__ import annotations

import linecache
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from .contract import FIELDS, source


class RecordError(ValueError):
    """A step record that cannot be accepted; names the field (and the record's index in a batch)."""

    def __init__(self, field_name: str, message: str, index: int | None = None):
        self.field = field_name
        self.index = index
        self.message = message
        where = f"record {index}: " if index is not None else ""
        super().__init__(f"{where}{field_name}: {message}")

    def at(self, index: int) -> "RecordError":
        return RecordError(self.field, self.message, index)


# Bounds no store setting widens: a step's time below an hour, a timestamp an 8-byte integer always holds.
MAX_STEP_SECONDS = 3600.0  # draft_seconds, verify_seconds: 0 <= x < MAX_STEP_SECONDS
MAX_TIMESTAMP = 10_000_000_000.0  # unix seconds (year 2286); a store narrows it to its clock's skew
# Verification passes one aggregate record may fold: more than any request makes (each pass emits a token),
# and small enough that an hour of records per series stays far inside the store's 8-byte counts.
MAX_STEPS = 10_000_000
# Requests in flight on a pool (or sequences in a batch) when a request was sent: far above any engine's slots.
MAX_LOAD = 1_000_000


@dataclass(slots=True, kw_only=True)
class StepRecord:
    """One speculative step, or an aggregate of ``steps`` of them (module docstring). Per-token lists count
    drafted positions 1..lookahead."""

    domain: str
    lookahead: int
    accepted: int
    emitted: int
    draft_seconds: float
    verify_seconds: float
    target_version: str
    draft_version: str
    # 1 for an accepted drafted token; the first 0 is the rejected token, later entries (discarded,
    # never verified) are 0 too.
    accepted_mask: list[int] | None = None
    # Per drafted position: sum over the vocabulary of min(p, q), the probability that a token drafted
    # there is accepted. Far less noisy than the 0/1 mask.
    expected_acceptance: list[float] | None = None
    # Per drafted position: the draft's probability of the token it proposed.
    draft_confidence: list[float] | None = None
    timestamp: float | None = None
    pod: str | None = None
    request_id: str | None = None
    # Aggregates (module docstring): verification passes folded into this record, drafted tokens in total
    # (None: lookahead * steps), wall seconds of the steps when draft and verify time are not split (then
    # draft_seconds and verify_seconds may be 0), the proxy pool that served the request, and the seconds
    # the engine spent on the prompt before the first step (llama.cpp ``timings.prompt_ms``): not step time,
    # it tells how much of a request's wall time its steps are.
    steps: int = 1
    drafted: int | None = None
    seconds: float | None = None
    pool: str | None = None
    prompt_seconds: float | None = None
    # The load the request met: requests in flight on its pool when the proxy sent it, this one included
    # (1: alone), or the batch it decoded in. Speculation pays differently under load (policies/pool_cap.py).
    load: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields; absent optional fields and steps = 1 are left out (old servers read it)."""
        data = {k: v for k, v in asdict(self).items() if v is not None}
        if self.steps == 1:
            del data["steps"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StepRecord":
        """Build and validate a record from JSON-like data; raises RecordError naming the field."""
        if not isinstance(data, dict):
            raise RecordError("record", "must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RecordError(unknown[0], "unknown field")
        missing = [f.name for f in fields(cls) if f.name in REQUIRED and f.name not in data]
        if missing:
            raise RecordError(missing[0], "required field is missing")
        record = cls(**data)
        record.validate()
        return record

    def validate(self, max_lookahead: int | None = None, max_domain_length: int = 64,
                 earliest: float = 0.0, latest: float = MAX_TIMESTAMP) -> "StepRecord":
        """Check the record is self-consistent and inside the bounds; raise RecordError naming the first
        bad field. ``earliest`` / ``latest``: the timestamps a store accepts (its clock's skew window)."""
        if _plainly_valid(self, max_lookahead, max_domain_length, earliest, latest):  # the common case
            return self
        return self._check(max_lookahead, max_domain_length, earliest, latest)

    def _check(self, max_lookahead: int | None, max_domain_length: int, earliest: float,
               latest: float) -> "StepRecord":
        """Field by field, in the order errors are reported (the rows of ``specwatch_core.contract.FIELDS``)."""
        _check_fields(self, max_lookahead, max_domain_length, earliest, latest)
        return self


REQUIRED = frozenset(
    ("domain", "lookahead", "accepted", "emitted", "draft_seconds", "verify_seconds",
     "target_version", "draft_version")
)


def drafted_of(record: StepRecord) -> int:
    """Tokens drafted in the record's steps: ``drafted``, by default lookahead * steps."""
    return record.lookahead * record.steps if record.drafted is None else record.drafted


def step_seconds(record: StepRecord) -> float:
    """The record's step time: ``seconds`` when given, else draft_seconds + verify_seconds."""
    return record.draft_seconds + record.verify_seconds if record.seconds is None else record.seconds


def verify_seconds_of(record: StepRecord) -> float:
    """Verify time as stored and learnt: time the engine did not split (``seconds`` beyond draft_seconds)
    counts as verify time."""
    s = record.seconds
    return record.verify_seconds if s is None else max(record.verify_seconds, s - record.draft_seconds)


def is_aggregate(record: StepRecord) -> bool:
    """True when the record's positions are unknown: it folds several steps, or drafted differs from
    lookahead. Such a record feeds sums (drafted, accepted, emitted, steps, time) but no per-position
    statistic; a per-step record with ``seconds`` or ``pool`` is no aggregate."""
    return record.steps != 1 or (record.drafted is not None and record.drafted != record.lookahead)


_INT = frozenset((int,))
_NUMBER = frozenset((int, float))  # not bool: type(True) is bool
_MASKS: dict[tuple[int, int], list[int]] = {}  # (lookahead, accepted) -> the only valid accepted_mask


def _mask(lookahead: int, accepted: int) -> list[int]:
    """The only valid accepted_mask: ``accepted`` ones, then zeros up to ``lookahead``."""
    valid = _MASKS.get((lookahead, accepted))
    if valid is None:
        valid = [1] * accepted + [0] * (lookahead - accepted)
        if len(_MASKS) < 4096:  # bounded: without max_lookahead any K can come
            _MASKS[(lookahead, accepted)] = valid
    return valid


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_text(name: str, value: Any, max_length: int) -> None:
    if not isinstance(value, str) or not value:
        raise RecordError(name, "must be a non-empty string")
    if len(value) > max_length:
        raise RecordError(name, f"longer than {max_length} characters")
    if not value.isprintable():
        raise RecordError(name, "must be printable text")


def _check_int(name: str, value: Any, low: int, high: int | None) -> None:
    if type(value) is not int:
        raise RecordError(name, "must be an integer")
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise RecordError(name, f"must be {bound}, got {value}")


def _check_seconds(name: str, value: Any) -> None:
    if not _is_number(value) or not 0 <= value < MAX_STEP_SECONDS:
        raise RecordError(name, f"must be a finite non-negative number below {MAX_STEP_SECONDS:.0f} (seconds)")


def _check_number(name: str, value: Any, low: float, high: float) -> None:
    if not _is_number(value) or not low <= value <= high:
        raise RecordError(name, f"must be a finite number in [{low:.0f}, {high:.0f}], got {value!r}")


def _check_list(name: str, value: Any, length: int) -> None:
    if not isinstance(value, list):
        raise RecordError(name, "must be a list")
    if len(value) != length:
        raise RecordError(name, f"must have length lookahead={length}, got {len(value)}")


def _check_step_time(name: str, value: Any, draft_seconds: float, verify_seconds: float) -> None:
    _check_seconds(name, value)
    split = draft_seconds + verify_seconds
    if value < split - 1e-9 * max(1.0, split):  # a rounding's worth of slack
        raise RecordError(name, f"must be >= draft_seconds + verify_seconds = {split!r}, got {value!r}")


def _check_positions(name: str, record: StepRecord) -> None:
    if is_aggregate(record):
        raise RecordError(name, "must be absent from an aggregate (steps > 1, or drafted other than lookahead): "
                                "its positions are unknown")


def _check_mask(name: str, value: Any, length: int, ones: int) -> None:
    _check_list(name, value, length)
    if value != [1] * ones + [0] * (length - ones) or not _INT.issuperset(map(type, value)):
        if any(type(v) is not int or v not in (0, 1) for v in value):
            raise RecordError(name, "entries must be 0 or 1")
        raise RecordError(name, "must be `accepted` ones followed by zeros")


def _check_probabilities(name: str, value: Any, length: int) -> None:
    _check_list(name, value, length)
    if value and not (_NUMBER.issuperset(map(type, value)) and math.isfinite(math.fsum(value))
                      and min(value) >= 0.0 and max(value) <= 1.0):
        raise RecordError(name, "entries must be probabilities in [0, 1]")


# The two checkers, written from the contract's table once at import (records/contract.py) and compiled here,
# so they read this module's bounds at call time.
_SOURCE = source(FIELDS)
_FILENAME = "<specwatch_core.contract.source()>"
linecache.cache[_FILENAME] = (len(_SOURCE), None, _SOURCE.splitlines(True), _FILENAME)  # readable tracebacks
_generated: dict[str, Any] = {}
exec(compile(_SOURCE, _FILENAME, "exec"), globals(), _generated)
_check_fields = _generated["_check_fields"]
_plainly_valid = _generated["_plainly_valid"]


def validate_batch(records: list[StepRecord], **limits: Any) -> list[StepRecord]:
    """Validate every record; the first failure raises RecordError carrying the record's index."""
    for i, record in enumerate(records):
        if not isinstance(record, StepRecord):
            raise RecordError("record", f"must be a StepRecord, got {type(record).__name__}", i)
        try:
            record.validate(**limits)
        except RecordError as exc:
            raise exc.at(i) from None
    return records


__all__ = ["StepRecord", "RecordError", "validate_batch", "REQUIRED", "MAX_STEP_SECONDS", "MAX_TIMESTAMP",
           "MAX_STEPS", "MAX_LOAD", "drafted_of", "step_seconds", "verify_seconds_of", "is_aggregate"]
