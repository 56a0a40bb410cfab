"""The real world of `specwatch demo --real` (agent/demo/real_run.py's World): llama-server pools on the prepared
model with target v2's adapter switched off (agent/demo/real_pools.py), `specwatch proxy` in front with a live
prompt sample (agent/demo/real_proxy.py), replayed mixed traffic, the guard on the live sample against target v2
(transformers: the target checkpoint with the adapter merged, agent/pretrained/target_v2.py), and the
re-distillation of the draft against v2 from the live sample (agent/demo/real_redistill.py)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.demo.real_pools import DRAFT_POOL, RealPools
from agent.demo.real_proxy import LOGS, ProxyProcess, prompt_sets, send
from agent.workload.mix import schedule

# Phase 1 is chat-heavy; from phase 2 on copy and json weigh more (the traffic shifts as the target changes).
# logs weighs more after the update: StaleDraft needs a few of its requests (about 500 drafted tokens) to confirm.
MIXES = ("chat=3,copy=1,json=1,logs=2", "chat=1,copy=2,json=2,logs=3", "chat=1,copy=2,json=2,logs=3")


@dataclass(frozen=True)
class WorldOptions:
    concurrency: int = 2
    tokens: int = 48  # per answer
    distill_steps: int = 40
    distill_tokens: int = 64  # of each v2 answer to the sampled prompts
    distill_own: int = 16  # sampled prompts of the stale domain to re-distil on
    distill_others: int = 4  # and of every other domain (so the draft keeps them)
    guard_prompts: int = 8  # per domain, from the live sample
    guard_tokens: int = 32
    cost_ratio: float = 0.3  # the guard's c (draft step / target step) when the history has no timed steps
    sample: int = 48  # prompts the proxy keeps per domain
    mixes: tuple[str, str, str] = MIXES
    # The proxy's policy. Pinned to the draft pool, the switch free to turn a domain's speculation off (and on
    # again): on this CPU the draft pool runs at about half the speed of `off` in every domain under v1
    # (bench/real_model.py), so the proxy's own policy leaves it within a domain's first requests, before any
    # update, and there would be no draft to go stale.
    policy: str = "fixed:3+switch"


class LiveWorld:
    def __init__(self, model, work: Path, options: WorldOptions = WorldOptions(),
                 say: Callable[[str], None] = lambda _: None):
        self.model, self.work, self.o, self.say = model, Path(work), options, say
        self.sets = prompt_sets(("chat", "copy", "json", LOGS))
        self.draft = Path(model.draft)  # the transformers folder of the draft served now
        self.db = f"sqlite:///{self.work / 'proxy.db'}"
        self.started = time.time()
        self.rounds = 0
        # target v2 for the guard, copied as the pools' adapter file is (a retrained one may land mid-run)
        self.lora = self.work / "lora-v2-peft"
        shutil.copytree(model.lora, self.lora)
        self.pools = RealPools(model, self.work).start()
        try:
            self.proxy = ProxyProcess(self.pools.urls(), self.db, self.work / "proxy.log",
                                      options=self.pools.proxy_options(), sample=options.sample,
                                      policy=options.policy)
            self.proxy.wait_ready(len(self.pools.servers))
        except BaseException:
            self.pools.stop()
            raise

    def traffic(self, phase: int, seconds: float) -> list[dict]:
        self.rounds += 1
        done = send(self.proxy.url, schedule(self.o.mixes[phase]), self.sets, seconds,
                    concurrency=self.o.concurrency, tokens=self.o.tokens, seed=1000 * phase + self.rounds)
        return [r.__dict__ for r in done.results]

    def update(self) -> float:
        return self.pools.set_adapter(1.0)

    def alerts(self) -> list[dict]:
        return self.proxy.alerts()

    def versions(self) -> dict[str, str]:
        return {p["name"]: p["target_version"] for p in self.proxy.pools()}

    def guard(self) -> dict:
        """The guard (agent/guard/report.py) on the live sample: the served draft against target v2, the
        history the proxy stored under v1 beside it."""
        from transformers import AutoTokenizer

        from agent.guard.history import stored_history
        from agent.guard.report import guard
        from agent.kit.load import load_model
        from agent.pretrained.target_v2 import load_v2
        from agent.pretrained.teacher import chat_ids
        from policies.rollout import StepCost

        began = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(self.model.hf)
        sample = {d: [chat_ids(tokenizer, [{"role": "user", "content": t}]) for t in texts[:self.o.guard_prompts]]
                  for d, texts in self.proxy.sample().items()}
        pools = {p["name"]: p for p in self.proxy.pools()}
        draft_version, target_version = pools[DRAFT_POOL]["draft_version"], pools[DRAFT_POOL]["target_version"]
        history = stored_history(self.db, draft_version, target_version, self.started - 60, time.time() + 60, 8)
        # llama.cpp does not split a step's time between draft and verify: a cost the history fits from the
        # proxy's records says nothing of the draft's share (it came out as c = 0), so c is assumed then
        known = history.cost is not None and history.cost.ratio > 0.01
        cost = history.cost if known else StepCost.from_ratio(self.o.cost_ratio)
        target = load_v2(self.model, adapter=self.lora)
        draft = load_model(self.draft, device="cpu", dtype="float32")
        report = guard(target, draft, sample, history, cost, versions=("target v2", draft_version),
                       cost_source="history" if known else "assumed", lookahead=3,
                       new_tokens=self.o.guard_tokens, batch_size=16, pad_id=tokenizer.pad_token_id or 0)
        del target, draft
        return {"failed": report.failed, "title": report.title, "rows": report.rows(),
                "verdicts": {d.domain: d.verdict.verdict for d in report.domains},
                "seconds": round(time.perf_counter() - began, 1)}

    def redistill(self, domain: str | None) -> dict:
        """Re-distil on the live sample, most of it the stale ``domain``'s, answered by the two pools that do
        not run the draft (both serve the target; greedy answers do not depend on speculation)."""
        from agent.demo.real_redistill import focus, redistill

        sample = focus(self.proxy.sample(), domain, self.o.distill_own, self.o.distill_others)
        urls = [url for name, url in self.pools.urls().items() if name != DRAFT_POOL]
        info = redistill(self.model, urls, sample, self.work / f"redistill-{self.rounds}",
                         draft=self.draft, steps=self.o.distill_steps, new_tokens=self.o.distill_tokens,
                         say=self.say)
        before = {p["name"]: p for p in self.proxy.pools()}[DRAFT_POOL]["draft_version"]
        info["restart_seconds"] = round(self.pools.replace_draft(Path(info["gguf"])), 1)
        self.draft = Path(info["folder"])
        self.proxy.wait_pools(lambda pools: pools[DRAFT_POOL]["healthy"] and pools[DRAFT_POOL]["draft_version"]
                              not in (None, before), "the re-distilled draft")
        return info

    def close(self) -> None:
        try:
            self.proxy.stop()
        finally:
            self.pools.stop()
