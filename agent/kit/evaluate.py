"""Measure a draft against one or more targets: real greedy speculative decoding on held-out prompts,
per-token agreement, target loss on held-out text, and the draft/target cost ratio c.

Pure functions returning data; printing is the CLI's job. Terms: acceptance rate = accepted / drafted
over every step (as vLLM counts it); agreement (alpha) = the share of positions, teacher-forced along the
target's greedy continuation, where the draft's argmax equals the target's. With independent positions,
acceptance at lookahead K is about (alpha + alpha^2 + ... + alpha^K) / K.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch

from agent.decoding import cost_model
from agent.decoding.decoder import SpeculativeDecoder
from agent.decoding.versions import weights_version
from agent.kit import tokenizer

MIN_BEST_ACCEPTANCE = 0.6
MIN_DOMAIN_SPREAD = 0.15
MIN_STALE_DROP = 0.15
COST_RATIO_AIM = 0.3


@dataclass(frozen=True)
class DomainResult:
    """One (target, domain) cell: counts, so cells can be summed without averaging averages."""

    target: str
    domain: str
    prompts: int
    accepted: int
    drafted: int
    steps: int
    emitted: int
    agreed: int
    positions: int
    bits_per_byte: float | None  # target loss on held-out text (None when there is none)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def agreement(self) -> float:
        return self.agreed / self.positions if self.positions else 0.0

    @property
    def tokens_per_step(self) -> float:
        return self.emitted / self.steps if self.steps else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "acceptance": self.acceptance, "agreement": self.agreement,
                "tokens_per_step": self.tokens_per_step}

    def predicted(self, lookahead: int) -> float:
        """Acceptance the agreement implies (see :func:`predicted_acceptance`)."""
        return predicted_acceptance(self.agreement, lookahead)


@dataclass(frozen=True)
class Cost:
    """Median milliseconds of one single-token forward with a KV cache."""

    draft_ms: float
    target_ms: float

    @property
    def ratio(self) -> float:
        return self.draft_ms / self.target_ms

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


@dataclass(frozen=True)
class Check:
    name: str
    holds: bool
    detail: str
    required: bool = True


@dataclass
class EvalReport:
    lookahead: int
    new_tokens: int
    results: list[DomainResult]
    costs: dict[str, Cost]
    checks: list[Check] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    def cell(self, target: str, domain: str) -> DomainResult:
        return next(r for r in self.results if r.target == target and r.domain == domain)

    @property
    def ok(self) -> bool:
        return all(c.holds for c in self.checks if c.required)

    def to_dict(self) -> dict:
        return {"lookahead": self.lookahead, "new_tokens": self.new_tokens, "versions": self.versions,
                "loss_unit": "bits per byte",
                "results": [{**r.to_dict(), "predicted_acceptance": r.predicted(self.lookahead)}
                            for r in self.results],
                "costs": {name: c.to_dict() for name, c in self.costs.items()},
                "checks": [asdict(c) for c in self.checks], "ok": self.ok}


def predicted_acceptance(alpha: float, lookahead: int) -> float:
    """Acceptance rate at K if each drafted token matches independently with probability alpha."""
    if lookahead < 1:
        return 0.0
    return sum(alpha ** i for i in range(1, lookahead + 1)) / lookahead


@torch.inference_mode()
def agreement(target, draft, prompt: list[int], continuation: list[int]) -> int:
    """How many continuation positions the draft's argmax matches the target's (teacher-forced)."""
    ids = torch.tensor([prompt + continuation], device=target.device)
    span = slice(len(prompt) - 1, len(prompt) - 1 + len(continuation))
    mine = target(input_ids=ids, use_cache=False).logits[0, span].argmax(-1)
    theirs = draft(input_ids=ids.to(draft.device), use_cache=False).logits[0, span].argmax(-1).to(mine.device)
    return int((mine == theirs).sum())


@torch.inference_mode()
def bits_per_byte(model, text: str, seq_len: int, max_windows: int = 16) -> float:
    """Mean next-byte cross-entropy of ``model`` over evenly spaced windows of ``text``, in bits."""
    ids = torch.tensor(tokenizer.encode(text), device=model.device)
    if len(ids) < 2:
        raise ValueError("text: need at least two bytes")
    window = min(seq_len, len(ids))
    starts = torch.linspace(0, len(ids) - window, min(max_windows, len(ids) - window + 1)).long().tolist()
    total, count = 0.0, 0
    for start in starts:
        chunk = ids[start:start + window].unsqueeze(0)
        logits = model(input_ids=chunk[:, :-1], use_cache=False).logits.float()
        total += float(torch.nn.functional.cross_entropy(logits[0], chunk[0, 1:], reduction="sum"))
        count += window - 1
    return total / count / math.log(2)


@torch.inference_mode()
def cost(target, draft, context: int = 256, calls: int = 100, warmup: int = 10) -> Cost:
    """Median milliseconds of one single-token forward with ``context`` cached tokens, per model (measured
    in alternation by agent/decoding/cost_model.py, so that both see the same machine load)."""
    context = min(context, *(m.config.max_position_embeddings - 1 for m in (target, draft)))
    ids = [t % 256 + tokenizer.OFFSET for t in range(context)]
    step = cost_model.measure(target, draft, ids, 0, repeats=calls, warmup=warmup).cost
    return Cost(draft_ms=step.draft_per_token * 1000, target_ms=step.verify[0] * 1000)


def evaluate_pair(target, draft, name: str, prompts: dict[str, list[str]], heldout: dict[str, str] | None,
                  lookahead: int, new_tokens: int, seq_len: int,
                  versions: tuple[str, str]) -> list[DomainResult]:
    """One target against the draft on every domain's prompts, with real speculative decoding."""
    decoder = SpeculativeDecoder(target, draft, temperature=0.0, target_version=versions[0],
                                 draft_version=versions[1])
    results = []
    for domain, texts in prompts.items():
        accepted = drafted = steps = emitted = agreed = positions = 0
        for text in texts:
            ids = tokenizer.encode(text)
            gen = decoder.generate(ids, new_tokens, lookahead=lookahead, domain=domain)
            accepted += sum(s.accepted for s in gen.steps)
            drafted += sum(s.lookahead for s in gen.steps)
            emitted += sum(s.emitted for s in gen.steps)
            steps += len(gen.steps)
            agreed += agreement(target, draft, ids, gen.tokens)
            positions += len(gen.tokens)
        loss = bits_per_byte(target, heldout[domain], seq_len) if heldout and domain in heldout else None
        results.append(DomainResult(name, domain, len(texts), accepted, drafted, steps, emitted, agreed,
                                    positions, loss))
    return results


def evaluate(targets: dict[str, torch.nn.Module], draft, prompts: dict[str, list[str]],
             heldout: dict[str, str] | None = None, *, lookahead: int = 4, new_tokens: int = 64,
             seq_len: int | None = None, versions: dict[str, str] | None = None,
             cost_calls: int = 100) -> EvalReport:
    """Every target (first = the one the draft was made for) against ``draft``; checks included."""
    if lookahead < 1:
        raise ValueError(f"lookahead: must be >= 1, got {lookahead}")
    versions = dict(versions or {})
    versions.setdefault("draft", weights_version(draft))
    seq_len = seq_len or draft.config.max_position_embeddings
    results, costs = [], {}
    for name, target in targets.items():
        versions.setdefault(name, weights_version(target))
        results += evaluate_pair(target, draft, name, prompts, heldout, lookahead, new_tokens, seq_len,
                                 (versions[name], versions["draft"]))
        costs[name] = cost(target, draft, calls=cost_calls)
    report = EvalReport(lookahead, new_tokens, results, costs, versions=versions)
    report.checks = check_requirements(report, list(targets))
    return report


def check_requirements(report: EvalReport, targets: list[str]) -> list[Check]:
    """The kit's quality bar: one domain easy enough, domains distinct, and the update visible."""
    base = [r for r in report.results if r.target == targets[0]]
    best, worst = max(base, key=lambda r: r.acceptance), min(base, key=lambda r: r.acceptance)
    checks = [
        Check(f"acceptance vs {targets[0]} >= {MIN_BEST_ACCEPTANCE} on some domain",
              best.acceptance >= MIN_BEST_ACCEPTANCE, f"best: {best.domain} {best.acceptance:.3f}"),
        Check(f"domains differ by >= {MIN_DOMAIN_SPREAD} (vs {targets[0]})",
              best.acceptance - worst.acceptance >= MIN_DOMAIN_SPREAD,
              f"{best.domain} {best.acceptance:.3f} - {worst.domain} {worst.acceptance:.3f} = "
              f"{best.acceptance - worst.acceptance:.3f}"),
    ]
    for other in targets[1:]:
        drops = {r.domain: r.acceptance - report.cell(other, r.domain).acceptance for r in base}
        domain = max(drops, key=drops.get)
        checks.append(Check(f"acceptance vs {other} >= {MIN_STALE_DROP} lower than vs {targets[0]} "
                            "on some domain",
                            drops[domain] >= MIN_STALE_DROP, f"largest drop: {domain} {drops[domain]:.3f}"))
    for name, c in report.costs.items():
        checks.append(Check(f"cost ratio c <= {COST_RATIO_AIM} vs {name} (aim)", c.ratio <= COST_RATIO_AIM,
                            f"c = {c.draft_ms:.2f} ms / {c.target_ms:.2f} ms = {c.ratio:.2f}",
                            required=False))
    return checks


def evaluate_kit(kit, *, lookahead: int = 4, new_tokens: int | None = None,
                 prompts_per_domain: int | None = None, cost_calls: int = 100) -> EvalReport:
    """The kit's draft against target v1 and target v2 ("v1", "v2" in the report)."""
    spec = kit.manifest["spec"]
    prompts = {domain: texts[:prompts_per_domain] for domain, texts in kit.prompts.items()}
    versions = {"v1": kit.versions["target-v1"], "v2": kit.versions["target-v2"],
                "draft": kit.versions["draft"]}
    return evaluate({"v1": kit.target_v1, "v2": kit.target_v2}, kit.draft, prompts, kit.heldout(),
                    lookahead=lookahead, new_tokens=new_tokens or spec["eval_new_tokens"],
                    seq_len=spec["seq_len"], versions=versions, cost_calls=cost_calls)
