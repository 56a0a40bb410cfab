"""The StepRecords of one generate() call, timed step by step and handed to the sidecar.

transformers' assisted loop asks its candidate generator for candidates before every verification pass and
tells it afterwards how many the target accepted. Both of specwatch's generators (a draft model's,
candidates.py; prompt lookup's, lookup.py) time and record their steps here: draft seconds run from the call
for candidates to their return; verify seconds from there to the next call (or the end of generation), so
they cover the target's pass, acceptance, cache crops and generate's bookkeeping: the two add up to the step's
wall time. A step is recorded (``on_step``, then ``Sidecar.record``) as the next one starts, so the policy
learns within a request.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from agent.decoding.devices import synchronize
from specwatch_core.records import StepRecord


class StepLog:
    """Opens a record when drafting ends (``drafted``), closes it when the next step begins (``begin``) or
    generation ends (``finish``). ``pending`` is the step whose verification is running."""

    def __init__(self, sidecar, device: torch.device, *, domain: str, target_version: str, draft_version: str,
                 request_id: str | None = None, on_step: Callable[[StepRecord], None] | None = None):
        self.sidecar, self.device, self.on_step = sidecar, device, on_step
        self.domain, self.request_id = domain, request_id
        self.target_version, self.draft_version = target_version, draft_version
        self.pending: StepRecord | None = None
        self._started = self._verify_from = 0.0

    def begin(self) -> None:
        """A step's drafting begins: the previous step ends here."""
        synchronize(self.device)
        self._started = time.perf_counter()
        self._close(self._started)

    def drafted(self, lookahead: int, drafted: int | None = None) -> StepRecord:
        """Drafting ended: the step's record (accepted 0 and emitted 1 until ``update_candidate_strategy``
        fills them), now pending. ``drafted``: tokens proposed when fewer than ``lookahead``."""
        synchronize(self.device)
        self._verify_from = time.perf_counter()
        self.pending = StepRecord(
            domain=self.domain, lookahead=lookahead, accepted=0, emitted=1,
            draft_seconds=self._verify_from - self._started, verify_seconds=0.0,
            target_version=self.target_version, draft_version=self.draft_version, pod=self.sidecar.pod,
            request_id=self.request_id, drafted=None if drafted in (None, lookahead) else drafted)
        return self.pending

    def finish(self) -> None:
        """Record the last step (generate has returned)."""
        synchronize(self.device)
        self._close(time.perf_counter())

    def _close(self, now: float) -> None:
        record = self.pending
        if record is None:
            return
        self.pending = None
        record.verify_seconds = now - self._verify_from
        record.timestamp = time.time()
        if self.on_step is not None:
            self.on_step(record)
        self.sidecar.record(record)


def accepted_prefix(record: StepRecord, num_matches: int) -> None:
    """Note that the target kept ``num_matches`` drafted tokens (plus its own): accepted, emitted, and the
    accepted mask of a step whose positions are known (all of its lookahead drafted)."""
    accepted = int(num_matches)
    record.accepted, record.emitted = accepted, accepted + 1
    if record.drafted is None:
        record.accepted_mask = [1] * accepted + [0] * (record.lookahead - accepted)


def probabilities(values: torch.Tensor) -> list[float]:
    """Floats clamped into [0, 1] (sums of float32 products can stray by an ulp)."""
    return [min(max(v, 0.0), 1.0) for v in values.tolist()]
