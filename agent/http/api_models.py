"""Request and response bodies of the sidecar's HTTP API (pydantic; they make the published OpenAPI).

Request models are strict (no "4" for 4, no true for 1) and refuse unknown fields, like StepRecord.from_dict;
the record's own consistency checks (accepted <= lookahead, mask shape, ...) run in the sidecar after.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from specwatch_core.records import MAX_STEPS, StepRecord

Strict = ConfigDict(strict=True, extra="forbid")


class StepRecordIn(BaseModel):
    """One speculative step, or an aggregate of ``steps`` steps of one request (see specwatch_core/records.py for the
    terms). Old clients send no aggregate field: their record is the case steps = 1."""

    model_config = ConfigDict(strict=True, extra="forbid", json_schema_extra={"example": {
        "domain": "code", "lookahead": 4, "accepted": 2, "emitted": 3, "draft_seconds": 0.004,
        "verify_seconds": 0.011, "target_version": "3f2a9c1b0d4e", "draft_version": "77e0c2a1b9f3",
        "accepted_mask": [1, 1, 0, 0], "timestamp": 1767225600.0}})

    domain: str = Field(description="Free-text label of the request's kind (code, chat, ...).")
    lookahead: int = Field(description="K: tokens drafted in this step; 0 is a plain target step.")
    accepted: int = Field(description="Drafted tokens the target kept (a prefix of the draft).")
    emitted: int = Field(description="Tokens this step produced: accepted + 1 (the bonus token).")
    draft_seconds: float
    verify_seconds: float
    target_version: str
    draft_version: str
    accepted_mask: list[int] | None = Field(None, description="Per drafted position: 1 accepted, else 0.")
    expected_acceptance: list[float] | None = Field(None, description="Per drafted position: sum min(p, q).")
    draft_confidence: list[float] | None = Field(None, description="Per drafted position: q(drafted token).")
    timestamp: float | None = Field(None, description="Unix seconds (UTC); default: time of arrival.")
    pod: str | None = None
    request_id: str | None = None
    # The range is checked by StepRecord.validate (its messages name the record); the schema only shows it.
    steps: int = Field(1, json_schema_extra={"minimum": 1, "maximum": MAX_STEPS},
                       description="Verification passes folded into this record (an aggregate when > 1); "
                                   "accepted, emitted and drafted are then sums over them, emitted is "
                                   "steps..accepted + steps, and the per-position lists must be absent.")
    drafted: int | None = Field(None, description="Drafted tokens in total, 0..lookahead * steps; default "
                                                  "lookahead * steps. accepted <= drafted.")
    seconds: float | None = Field(None, description="Wall seconds the steps took when the engine does not "
                                                    "split draft from verify time (those may then be 0); "
                                                    ">= draft_seconds + verify_seconds. The record's step "
                                                    "time is this, else draft_seconds + verify_seconds.")
    pool: str | None = Field(None, description="The proxy pool that served the request (printable, "
                                               "<= 64 characters).")

    def to_record(self) -> StepRecord:
        return StepRecord(**{name: getattr(self, name) for name in _RECORD_FIELDS})


_RECORD_FIELDS = tuple(StepRecordIn.model_fields)


class StepsIn(BaseModel):
    model_config = Strict
    records: list[StepRecordIn]


class StepsAccepted(BaseModel):
    accepted: int


class DecisionOut(BaseModel):
    domain: str
    lookahead: int
    speculate: bool
    policy: str
    reason: str


class GenerateIn(BaseModel):
    model_config = Strict
    prompt: str = Field(min_length=1, max_length=100_000)
    domain: str = Field("default", min_length=1, max_length=64)
    max_tokens: int = Field(64, ge=1)
    temperature: float = Field(0.0, ge=0.0, le=100.0, description="0 = greedy.")
    top_k: int = Field(0, ge=0, description="0 = no top-k filter.")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=0)
    request_id: str | None = Field(None, max_length=128)


class GenerateOut(BaseModel):
    text: str
    domain: str
    tokens: int
    steps: int
    drafted: int
    accepted: int
    acceptance_rate: float | None = Field(description="accepted / drafted; null when nothing was drafted.")
    tokens_per_step: float
    lookaheads: dict[str, int] = Field(description="Steps per lookahead K run.")
    seconds: float
    tokens_per_second: float | None
    target_version: str
    draft_version: str


class AlertOut(BaseModel):
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: float
    ends_at: float | None
    state: Literal["firing", "resolved", "pending"] | str
    fingerprint: str


class AlertsOut(BaseModel):
    state: str
    alerts: list[AlertOut]


class Problem(BaseModel):
    """An error: ``message`` in one line; ``detail`` lists each problem with its location."""

    message: str
    detail: list[dict] | str | None = None
