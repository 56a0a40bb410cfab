"""The record contracts, re-exported from records/ where they live (below every package that reads them), so
that ``from agent.records import StepRecord`` keeps working. Code in this repository imports ``records``."""

from records.records import (  # noqa: F401
    MAX_STEP_SECONDS,
    MAX_STEPS,
    MAX_TIMESTAMP,
    REQUIRED,
    RecordError,
    StepRecord,
    drafted_of,
    is_aggregate,
    step_seconds,
    validate_batch,
    verify_seconds_of,
)

__all__ = ["StepRecord", "RecordError", "validate_batch", "REQUIRED", "MAX_STEP_SECONDS", "MAX_TIMESTAMP",
           "MAX_STEPS", "drafted_of", "step_seconds", "verify_seconds_of", "is_aggregate"]
