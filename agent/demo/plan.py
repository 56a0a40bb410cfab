"""What a demo run does: requests per phase, the domain mix, the re-distillation budget."""

from __future__ import annotations

from dataclasses import dataclass, replace

PHASES = ("v1", "v2 (draft stale)", "v2 + re-distilled draft")
SHORT = ("v1", "v2 stale", "v2 fresh")  # table cells: fresh = the re-distilled draft


@dataclass(frozen=True)
class DemoPlan:
    """Phase 1 serves with target v1; phase 2 with target v2 (the "update"), the draft unchanged; phase 3,
    after the draft was re-distilled against v2 on sampled live requests, with the new draft.

    ``requests``: per phase. ``new_tokens``: per request. ``mix``: domain weights of the workload.
    ``reference_every``: every n-th request of a domain is also decoded by the target alone (timed, not
    recorded) for the target-only tokens/s. ``sample_cap``: live requests kept per domain for
    re-distillation (opt-in sampling; only phase 2's traffic is sampled). ``distill_*``: the
    re-distillation budget; ``replay``: share of its batches drawn from the kit's own v2 training mix.
    ``background``: the sidecar's record work runs on its ingest worker thread (the decoding thread only
    queues each step), as in `specwatch serve`; False runs it inline on the decoding thread.
    """

    requests: tuple[int, int, int] = (90, 130, 210)
    new_tokens: int = 64
    mix: tuple[tuple[str, float], ...] = (("code", 1.0), ("prose", 1.0), ("logs", 1.0))
    reference_every: int = 15
    redistill: bool = True
    sample_cap: int = 48
    distill_steps: int = 100
    distill_batch: int = 8
    distill_seq: int = 192
    distill_lr: float = 2e-3
    replay: float = 0.5
    size: str = "full"
    policy: str = "confidence-stop+switch"
    seed: int = 0
    background: bool = True

    def __post_init__(self) -> None:
        if len(self.requests) != 3 or any(type(n) is not int or n < 1 for n in self.requests):
            raise ValueError(f"requests: three positive integers (one per phase), got {self.requests!r}")
        for name in ("new_tokens", "reference_every", "sample_cap", "distill_steps", "distill_batch",
                     "distill_seq"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        if not self.mix or any(not w > 0 for _, w in self.mix):
            raise ValueError("mix: at least one domain, every weight > 0")
        if not 0.0 <= self.replay < 1.0:
            raise ValueError(f"replay: must be in [0, 1), got {self.replay!r}")
        if not self.distill_lr > 0:
            raise ValueError(f"distill_lr: must be > 0, got {self.distill_lr!r}")

    @property
    def domains(self) -> list[str]:
        return [d for d, _ in self.mix]

    def quick(self) -> "DemoPlan":
        """About a minute with the kit cached: fewer requests, a shorter re-distillation."""
        return replace(self, requests=(30, 64, 64), new_tokens=48, reference_every=6, sample_cap=24,
                       distill_steps=40)
