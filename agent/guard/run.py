"""``specwatch guard``'s run, from its options to the report: the prompt sample, both models, the history
under the current target, the step cost (the flag's, the history's, else measured here) and the verdicts
(agent/guard/report.py)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from agent.decoding import cost_model
from agent.decoding.sampling import SamplingParams
from agent.decoding.versions import weights_version
from agent.guard.history import stored_history
from agent.guard.report import GuardReport, guard
from agent.guard.sample import SampleError, load_sample, target_encoder
from agent.kit.load import load_model
from policies.rollout import RolloutConfig, StepCost
from storage import StoreError


class GuardError(Exception):
    """The guard cannot run (a bad option, an unreadable sample or model, a database that cannot be read);
    the message is one line."""


@dataclass(frozen=True)
class GuardOptions:
    """What to check: ``target`` (the new one) and ``draft`` checkpoint folders, the ``prompts`` file, the
    history in ``db`` (None: the default database, whose absence is no history) between ``since`` and ``now``
    (unix seconds). ``lookahead``: the K served now (None: each domain's from the history); ``cost_ratio``:
    c fixed (None: from the history, else measured); ``threads``: torch CPU threads (0: torch's default)."""

    target: Path
    draft: Path
    prompts: Path
    since: float
    now: float
    db: str | None = None
    current_target: str | None = None
    lookahead: int | None = None
    kmax: int = 8
    min_speedup: float = 1.0
    max_drop: float = 0.10
    cost_ratio: float | None = None
    new_tokens: int = 64
    temperature: float = 0.0
    batch_size: int = 64
    seed: int = 0
    threads: int = 1
    device: str = "auto"


def run(options: GuardOptions, loading: AbstractContextManager = nullcontext()) -> GuardReport:
    """The guard's report; GuardError when it cannot be made. ``loading`` is entered while the models load
    (a progress line)."""
    o = options
    if o.threads:
        import torch

        torch.set_num_threads(o.threads)
    try:
        config = RolloutConfig(kmax=o.kmax, min_speedup=o.min_speedup, max_drop=o.max_drop)
        fixed = StepCost.from_ratio(o.cost_ratio) if o.cost_ratio is not None else None
        params = SamplingParams(o.temperature)
        sample = load_sample(o.prompts, target_encoder(o.target))
        with loading:
            new, old = load_model(o.target, o.device), load_model(o.draft, o.device)
    except (SampleError, ValueError, OSError) as exc:
        raise GuardError(str(exc)) from exc
    versions = (weights_version(new), weights_version(old))
    try:
        history = stored_history(o.db, versions[1], o.current_target, o.since, o.now, o.kmax)
    except StoreError as exc:
        raise GuardError(str(exc)) from exc
    cost, source = (fixed, "flag") if fixed else (history.cost, "history") if history.cost else (None, "measured")
    if cost is None:
        cost = measured_cost(new, old, sample, o.new_tokens, o.kmax)
    try:
        return guard(new, old, sample, history, cost, versions=versions, cost_source=source,
                     lookahead=o.lookahead, params=params, new_tokens=o.new_tokens, batch_size=o.batch_size,
                     seed=o.seed, config=config, pad_id=new.config.pad_token_id or 0)
    except ValueError as exc:
        raise GuardError(str(exc)) from exc


def measured_cost(target, draft, sample: dict[str, list[list[int]]], new_tokens: int, kmax: int) -> StepCost:
    """Without history: the step cost measured here (agent/decoding/cost_model.py: a draft forward, a verify
    pass per K), at the sample's mean context (prompt plus half the new tokens)."""
    limit = min(m.config.max_position_embeddings for m in (target, draft)) - kmax - 1
    context = cost_model.typical_context([p for texts in sample.values() for p in texts], new_tokens, limit)
    return cost_model.measure(target, draft, context, kmax).cost
