"""The policy interface: ``choose(domain) -> Decision`` before a step, ``update(domain, outcome)`` after.

Arms are lookaheads K in 0..kmax; K = 0 is a plain target step ("speculation off"). Rewards are measured
goodput, tokens emitted per second of step time (draft + verify), never acceptance alone: whether a K pays
depends on this hardware's costs and load as much as on acceptance.

Policies never do I/O. History (for a warm start) is handed to them as ``ArmStats``.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping, NamedTuple, Sequence

StopDrafting = Callable[[float, int], bool]


class StopState(NamedTuple):
    """What a policy's in-step stop rule reads, so a decoder in another process can apply the same rule
    (policies.confidence_state.stop_rule). ``rule``: "gain" or "roc"; ``bins``: the calibration table's
    resolution; ``threshold``: the confidence below which drafting stops while ``limits`` is None;
    ``table``: P(accept | confidence bin), ``bins`` entries (a confidence of 1 reads the last);
    ``limits``: per drafted position, the P(all accepted) below which drafting stops (gain rule, fitted)."""

    rule: str
    bins: int
    threshold: float
    table: Sequence[float] | None
    limits: Sequence[float] | None


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do on the next step of a domain. ``speculate`` is False exactly when lookahead is 0."""

    lookahead: int
    speculate: bool
    reason: str
    policy: str = ""


class _OutcomeFields(NamedTuple):
    lookahead: int
    accepted: int
    emitted: int
    draft_seconds: float
    verify_seconds: float
    accepted_mask: tuple[int, ...] | None = None
    draft_confidence: tuple[float, ...] | None = None
    steps: int = 1
    seconds: float = 0.0
    drafted: int = 0
    prompt_seconds: float = 0.0
    load: int = 0


class Outcome(_OutcomeFields):
    """What one step, or an aggregate of ``steps`` steps of one request, cost and gave; built from a
    StepRecord (or anything with its attribute names). ``seconds`` is the step time (default draft_seconds
    + verify_seconds; from a record whose engine does not split them, its ``seconds``, the unsplit part
    counted as verify time as storage keeps it, so draft + verify = seconds), ``drafted`` the drafted tokens
    (default lookahead * steps), ``prompt_seconds`` the time the engine spent on the request's prompt before
    its steps (0 when unknown; not step time), ``load`` the load the request met (requests in flight on its
pool, itself included, or its batch; 0 when unknown: specwatch_core/loads.py). Rewards are goodput, emitted / seconds, one observation per outcome
    whatever its size. An aggregate (``aggregate``) has no per-position fields. A named tuple: immutable
    like a frozen dataclass, and several times cheaper to build on the hot path."""

    __slots__ = ()

    def __new__(cls, lookahead: int, accepted: int, emitted: int, draft_seconds: float, verify_seconds: float,
                accepted_mask: tuple[int, ...] | None = None, draft_confidence: tuple[float, ...] | None = None,
                steps: int = 1, seconds: float | None = None, drafted: int | None = None,
                prompt_seconds: float | None = None, load: int | None = None) -> "Outcome":
        return tuple.__new__(cls, (lookahead, accepted, emitted, draft_seconds, verify_seconds, accepted_mask,
                                   draft_confidence, steps,
                                   draft_seconds + verify_seconds if seconds is None else seconds,
                                   lookahead * steps if drafted is None else drafted,
                                   0.0 if prompt_seconds is None else prompt_seconds, load or 0))

    @property
    def aggregate(self) -> bool:
        """Several steps, or fewer tokens drafted than K: the positions are unknown."""
        return self.steps != 1 or self.drafted != self.lookahead

    @classmethod
    def of(cls, step: Any) -> "Outcome":
        if isinstance(step, Outcome):
            return step
        mask, conf = getattr(step, "accepted_mask", None), getattr(step, "draft_confidence", None)
        seconds, drafted = getattr(step, "seconds", None), getattr(step, "drafted", None)
        prompt, load = getattr(step, "prompt_seconds", None), getattr(step, "load", None)
        draft, verify = float(step.draft_seconds), float(step.verify_seconds)
        if seconds is not None:  # time the engine did not split counts as verify time, as storage keeps it
            verify = max(verify, float(seconds) - draft)
        return cls(int(step.lookahead), int(step.accepted), int(step.emitted), draft, verify,
                   tuple(mask) if mask is not None else None,
                   tuple(conf) if conf is not None else None, int(getattr(step, "steps", 1)),
                   None if seconds is None else float(seconds), None if drafted is None else int(drafted),
                   None if prompt is None else float(prompt), None if load is None else int(load))


@dataclass(frozen=True, slots=True)
class ArmStats:
    """Stored totals of one domain at one lookahead (for a warm start).

    ``reached[i]`` / ``accepted[i]``: drafts that reached position i + 1 / were accepted there (counted up
    to and including the first rejection, so accepted / reached is the conditional acceptance).
    ``drafted``: tokens drafted in those steps (None: lookahead x steps; fewer where steps drafted less than
    K, as n-gram self-speculation does).
    """

    lookahead: int
    steps: int
    emitted: int
    draft_seconds: float
    verify_seconds: float
    reached: tuple[int, ...] = field(default=())
    accepted: tuple[int, ...] = field(default=())
    drafted: int | None = None


class Policy(ABC):
    """Chooses a lookahead per domain from measured outcomes. Seeded: same seed, same choices."""

    name = "policy"

    def __init__(self, kmax: int = 8, seed: int | None = None):
        if type(kmax) is not int or not 1 <= kmax <= 64:
            raise ValueError(f"kmax must be an integer in 1..64, got {kmax!r}")
        self.kmax = kmax
        self.seed = seed
        self._rng = random.Random(seed)

    @abstractmethod
    def choose(self, domain: str) -> Decision:
        """The lookahead for the next step of ``domain``."""

    load_aware = False  # whether ``choose_at`` reads the loads (else it is ``choose``)

    def choose_at(self, domain: str, loads: Mapping[int, int], busy: Collection[int] | None = None) -> Decision:
        """The lookahead for the next request of ``domain`` when it would meet load ``loads[k]`` on the pool
        of K = k (requests in flight there, itself included); ``busy``: the pools running requests now, where
        the pools share one machine (None: they do not). A policy that does not weigh the load
        (``load_aware`` False) chooses as ``choose`` does."""
        return self.choose(domain)

    @abstractmethod
    def update(self, domain: str, outcome: Outcome) -> "Policy":
        """Learn from one step of ``domain``; returns self."""

    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "Policy":
        """Start ``domain`` from stored totals instead of from zero; returns self. Default: ignore."""
        return self

    def prefer(self, arm: int | str | None) -> "Policy":
        """Name the arm a domain without evidence starts on (the engine's own default pool: a K, or a pool
        name ``off`` / ``kN``; None: none); returns self. Default: ignored (the policy has its own start)."""
        return self

    def stop_drafting(self, domain: str) -> StopDrafting | None:
        """A callable that ends drafting inside a step (``None``: draft all K)."""
        return None

    def stop_state(self, domain: str) -> StopState | None:
        """The state ``stop_drafting`` reads, for a decoder in another process (``None``: no stop rule)."""
        return None

    def reconsider(self) -> "Policy":
        """A model version changed (new target, re-distilled draft): drop evidence that only described the
        old pair, where the policy keeps any apart from its decaying estimates. Default: nothing."""
        return self

    def forget(self, domain: str) -> "Policy":
        """Drop every trace of ``domain`` (an idle domain evicted from memory; its history stays in the
        database and warm-starts it if it returns); returns self. Default: nothing (no per-domain state)."""
        return self

    def decision(self, lookahead: int, reason: str) -> Decision:
        return Decision(lookahead, lookahead > 0, reason, self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kmax={self.kmax}, seed={self.seed})"


def has_refits(policy: Any) -> bool:
    """Whether ``policy`` has fits to run off the hot path (``prepare_refit`` or ``refit``)."""
    return callable(getattr(policy, "prepare_refit", None)) or callable(getattr(policy, "refit", None))
