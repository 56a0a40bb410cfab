"""The demo run: a sidecar in-process on a real store, steering real speculative decoding of the model kit.

Phase 1 serves a mixed-domain workload with target v1 and its distilled draft. Then the target is updated
to v2 (the draft unchanged, now stale on `logs`): the drift watch raises StaleDraft, the switch turns
speculation off where it now loses and keeps it where it still pays. Then (unless disabled) the draft is
re-distilled against v2 on live requests sampled during phase 2 (opt-in, capped), and phase 3 serves with
the new draft version, on prompts the re-distillation never saw: speculation comes back where it pays.
Every step goes through ``Sidecar.record`` (by default only queued: the sidecar's ingest worker feeds the
data path, as in `specwatch serve`); the scheduler flushes windows, transitions and alerts to the database.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sqlalchemy.engine import make_url

from agent.decoding.decoder import SpeculativeDecoder
from agent.decoding.steer import generate_with
from agent.demo.plan import PHASES, DemoPlan
from agent.demo.tally import Tally
from agent.runtime.prompt_sampler import PromptSampler, SamplerConfig
from agent.runtime.times import iso
from alerts.alert import Alert
from alerts.sinks.base import Sink


@dataclass
class DemoResult:
    db: str
    pod: str
    started: float
    ended: float
    tally: Tally
    alerts: list[Alert]
    versions: dict[str, str]
    distill: dict | None
    events: list[str]
    hot_path: dict[str, float] | None = None  # record + decide on the decoding thread, per step

    def plot_command(self, path: str | None = None) -> str:
        """The stats command that draws this run; the picture goes beside the demo's database (its data
        directory), not into the working directory."""
        if path is None:
            database = make_url(self.db).database if self.db.startswith("sqlite") else None
            path = str(Path(database).parent / "specwatch-demo.png") if database else "specwatch-demo.png"
        return (f"specwatch stats --db {self.db} --since {iso(self.started)} --until {iso(self.ended + 60)} "
                f"--by domain --by target_version --plot {path}")


def phase_requests(plan: DemoPlan, kit, phase: int, rng: random.Random) -> list[tuple[str, list[int]]]:
    """The (domain, prompt ids) requests of a phase: domains drawn by the plan's weights, prompts from the kit's
    held-out prompts. Phases 1 and 2 use the first half of each domain's prompts, phase 3 the second half
    (never distilled on)."""
    names, weights = zip(*plan.mix)
    out = []
    for domain in rng.choices(names, weights, k=plan.requests[phase]):
        ids = kit.prompt_ids(domain)
        half = len(ids) // 2
        pool = ids[half:] if phase == 2 else ids[:max(half, 1)]
        out.append((domain, rng.choice(pool)))
    return out


class _EventSink(Sink):
    """Alerts as lines of the live view's event log (no re-sends)."""

    name = "demo-view"
    resend = False

    def __init__(self, note: Callable[[str], None]):
        self._note = note

    def send(self, alerts) -> None:
        for a in alerts:
            verb = "FIRING" if a.state == "firing" else "resolved"
            self._note(f"alert {verb}: {a.labels['alertname']} {a.labels.get('domain', '')}: "
                       f"{a.annotations.get('summary', '')}")


class Demo:
    """See the module docstring. ``redraw`` is called whenever the view should refresh."""

    def __init__(self, plan: DemoPlan, kit, db: str, *, home: Path, alerts_log: Path | None = None,
                 redraw: Callable[[], None] = lambda: None):
        self.plan, self.kit, self.db, self.home = plan, kit, db, Path(home)
        self.alerts_log, self.redraw = alerts_log, redraw
        self.tally = Tally()
        self.events: list[str] = []
        self.status = ""
        self.phase, self.done = 0, 0
        self.total = sum(plan.requests)
        self.last_decision: dict[str, Any] = {}
        self.hot_path_ns: list[int] = []
        self.started = time.time()
        self.pod = "demo-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime(self.started))
        self.target_version = kit.versions["target-v1"]
        self.draft_version = kit.versions["draft"]
        self.sampler = PromptSampler(SamplerConfig(cap=plan.sample_cap), seed=plan.seed) if plan.redistill else None
        self._rng = random.Random(plan.seed)
        self.sidecar = self.jobs = None

    # -- what the view reads -------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.time() - self.started

    def speculating(self, domain: str) -> bool:
        switch = self.sidecar.switch if self.sidecar is not None else None
        return switch.is_on(domain) if switch is not None else True

    def firing(self) -> list[Alert]:
        alerts = self.sidecar.alerts if self.sidecar is not None else None
        return alerts.alerts("firing") if alerts is not None else []

    def note(self, text: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S', time.gmtime())}Z {text}")

    # -- the run -------------------------------------------------------------------------------------
    def run(self) -> DemoResult:
        self._open()
        distilled = None
        try:
            decoder = self._decoder(self.kit.target_v1, self.kit.draft)
            self._serve(0, decoder, self._prompts(0))
            self.target_version = self.kit.versions["target-v2"]
            self.note(f"target updated: v1 {self.kit.versions['target-v1'][:12]} -> v2 "
                      f"{self.target_version[:12]}; the draft is unchanged")
            self._serve(1, self._decoder(self.kit.target_v2, self.kit.draft), self._prompts(1))
            if self.plan.redistill:
                distilled, draft = self._redistill()
                self._serve(2, self._decoder(self.kit.target_v2, draft), self._prompts(2))
        finally:
            self._close()
        alerts = [a for a in self.sidecar.alerts.alerts("all") if a.starts_at >= self.started - 1]
        versions = {"target-v1": self.kit.versions["target-v1"], "target-v2": self.kit.versions["target-v2"],
                    "draft": self.kit.versions["draft"]}
        if distilled:
            versions["draft-redistilled"] = distilled["version"]
        return DemoResult(self.db, self.pod, self.started, time.time(), self.tally, alerts, versions, distilled,
                          self.events, self._hot_path())

    def _hot_path(self) -> dict[str, float] | None:
        ns = sorted(self.hot_path_ns)
        if not ns:
            return None
        ingest = self.sidecar.ingest
        return {"steps": len(ns), "median_us": ns[len(ns) // 2] / 1e3, "p99_us": ns[int(0.99 * (len(ns) - 1))] / 1e3,
                "worker_cpu_us_per_step": ingest.cpu_seconds / len(ns) * 1e6 if ingest else None}

    def _open(self) -> None:
        from agent.hub.sidecar import Sidecar
        from agent.runtime.jobs import Jobs
        from agent.runtime.options import Intervals
        from alerts.manager import AlertManager
        from alerts.metrics.export import Metrics
        from alerts.sinks import LogSink
        from alerts.watch import DriftWatch
        from policies.registry import make
        from storage import Store, StoreConfig

        store = Store.open(self.db, StoreConfig(pod=self.pod))
        sinks: list[Sink] = [_EventSink(self.note)]
        if self.alerts_log is not None:
            self._log = open(self.alerts_log, "a", encoding="utf-8")
            sinks.append(LogSink(stream=self._log))
        alerts = AlertManager(sinks, store, pod=self.pod)
        self.sidecar = Sidecar(store, make(self.plan.policy, 8, self.plan.seed), watch=DriftWatch(),
                               alerts=alerts, metrics=Metrics(), pod=self.pod, background=self.plan.background)
        self.jobs = Jobs(self.sidecar, Intervals(flush=1.0, alerts=1.0)).start()
        if self.sidecar.switch is not None:
            self.sidecar.switch.subscribe(self._note_transition)
        self.note(f"sidecar up: policy {self.plan.policy}, pod {self.pod}")

    def _close(self) -> None:
        if self.jobs is not None:
            self.jobs.shutdown(wait=True, final_flush=False)
        if self.sidecar is not None:
            self.sidecar.close()
        if getattr(self, "_log", None) is not None:
            self._log.close()

    def _decoder(self, target, draft, draft_version: str | None = None) -> SpeculativeDecoder:
        versions = {id(self.kit.target_v1): self.kit.versions["target-v1"],
                    id(self.kit.target_v2): self.kit.versions["target-v2"]}
        self.draft_version = draft_version or self.draft_version
        return SpeculativeDecoder(target, draft, target_version=versions[id(target)],
                                  draft_version=self.draft_version)

    def _prompts(self, phase: int) -> list[tuple[str, list[int]]]:
        return phase_requests(self.plan, self.kit, phase, self._rng)

    def _serve(self, phase: int, decoder: SpeculativeDecoder, requests) -> None:
        self.phase = phase
        self.note(f"phase {phase + 1}: {PHASES[phase]} ({len(requests)} requests)")
        for domain, ids in requests:
            n = min(self.plan.new_tokens, decoder.max_positions - len(ids))  # the tiny kit's context is short
            cell = self.tally.cell(phase, domain)
            if cell.requests % self.plan.reference_every == 0:
                began = time.perf_counter()
                ref = decoder.generate(ids, n, 0, domain)
                self.tally.add_reference(phase, domain, len(ref.tokens), time.perf_counter() - began)
            began = time.perf_counter()
            gen = generate_with(self.sidecar, decoder, ids, n, domain, hot_path_ns=self.hot_path_ns)
            self.tally.add_generation(phase, domain, gen.steps, len(gen.tokens), time.perf_counter() - began)
            # Not ``decide``: that would take the decision readied for the domain's next step.
            self.last_decision[domain] = self.sidecar.latest(domain)
            if phase == 1 and self.sampler is not None:
                self.sampler.offer(domain, ids, gen.tokens)
            self.done += 1
            self.redraw()

    def _note_transition(self, t) -> None:
        """Every switch transition as it happens (called by the switch, on the thread that records): two
        within one request both show, where reading the state after each request showed neither."""
        self.note(f"speculation {'ON' if t.speculate else 'OFF'} for {t.domain}: {t.reason}")

    def _redistill(self):
        from agent.kit.distill import distill
        from agent.kit.load import load_model

        streams = self.sampler.sample()
        counts = ", ".join(f"{d} {k}/{n}" for d, (k, n) in sorted(self.sampler.counts().items()))
        self.note(f"re-distilling the draft against target v2 on {len(streams)} sampled live requests ({counts})")
        out = self.home / "demo" / f"draft-{self.pod}"

        def progress(done: int, total: int, loss: float) -> None:
            self.status = f"re-distilling the draft: step {done}/{total}, KL {loss:.3f}"
            self.redraw()

        info = distill(self.kit.root / "target-v2", self.kit.root / "draft", out, streams=streams,
                       kit_root=self.kit.root, replay=self.plan.replay, steps=self.plan.distill_steps,
                       batch_size=self.plan.distill_batch, lr=self.plan.distill_lr, seq_len=self.plan.distill_seq,
                       seed=self.plan.seed, progress=progress)
        self.status = ""
        draft = load_model(out, device=self.kit.target_v2.device)
        self.note(f"new draft version {info['version'][:12]} (was {info['draft_version_before'][:12]}) in "
                  f"{info['seconds']:.0f}s, KL {info['loss']:.3f}; saved to {out}")
        self.draft_version = info["version"]
        return info, draft
