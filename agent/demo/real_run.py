"""`specwatch demo --real`: the demo's story on the real model through llama.cpp and the proxy.

Phase 1 replays mixed traffic through `specwatch proxy` with target v1 (the proxy keeps a live sample of the
prompts). Before the update the guard scores the current draft against target v2 on that live sample and says
which domains would break. Then the update (target v2: every server's LoRA adapter switched on at a recorded
instant); phase 2 replays traffic until StaleDraft has fired for a domain, naming both target versions, and that
domain's requests have left the pool they were on, or a round after StaleDraft (or phase 2's time is up). Then
the draft is re-distilled against v2 on the live sample, mostly the stale domain's prompts, and served in place
of the old one (a new draft version the proxy reads itself);
phase 3 replays traffic until the stale domain is back on a speculating pool (or its time is up).

The control logic is here, over a ``World`` (agent/demo/real_world.py runs the real one: llama-server pools, the
proxy, the guard, the re-distillation); tests drive it with a fake world.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from agent.demo.real_story import moved_at, phase_rows

PHASES = ("1 v1", "2 v2 stale", "3 v2 fresh")
STALE = "StaleDraft"


class World(Protocol):
    def traffic(self, phase: int, seconds: float) -> list[dict]: ...  # replayed requests, as result dicts
    def update(self) -> float: ...  # switch to target v2; the unix time it took effect on every pool
    def alerts(self) -> list[dict]: ...  # every alert so far (admin /alerts?state=all)
    def versions(self) -> dict[str, str]: ...  # pool -> target version the proxy reads now
    def guard(self) -> dict: ...  # the guard on the live sample against v2: {"failed": [...], "rows": [...]}
    def redistill(self, domain: str | None) -> dict: ...  # re-distil against v2 on the live sample (mostly
    # ``domain``'s, the stale one) and serve the new draft


@dataclass(frozen=True)
class RealPlan:
    """Seconds of traffic per phase (phases 2 and 3 at most, in ``chunk``-second rounds, ending early once their
    condition holds: phase 2 once StaleDraft has fired and the domain has moved, or ``after_stale`` rounds after
    it; phase 3 once the domain is back) and the domain target v2 changes."""

    phase1: float = 50.0
    phase2: float = 70.0
    phase3: float = 40.0
    chunk: float = 10.0
    domain: str = "logs"
    after_stale: int = 1  # rounds of phase 2 after StaleDraft, for the switch to move the domain, before going on

    def __post_init__(self) -> None:
        for name in ("phase1", "phase2", "phase3", "chunk"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be > 0 seconds, got {getattr(self, name)!r}")
        if type(self.after_stale) is not int or self.after_stale < 0:
            raise ValueError(f"after_stale: must be an integer >= 0, got {self.after_stale!r}")


@dataclass
class RealResult:
    rows: list[dict]
    events: list[str]
    alerts: list[dict]
    guard: dict | None
    distill: dict | None
    stale: dict | None  # the first StaleDraft after the update: domain, delay, summary, names both versions
    moved: dict | None  # when the stale domain's traffic left its pool (moved_at)
    back: bool  # the stale domain had left its pool in phase 2 and was on a speculating one at phase 3's end
    stages: dict[str, float] = field(default_factory=dict)  # seconds of each stage
    versions: dict[str, dict[str, str]] = field(default_factory=dict)


class RealDemo:
    def __init__(self, plan: RealPlan, world: World, note: Callable[[str], None] = lambda _: None):
        self.plan, self.world, self._note = plan, world, note
        self.events: list[str] = []
        self.stages: dict[str, float] = {}
        self.phases: dict[str, list[dict]] = {p: [] for p in PHASES}

    def note(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S', time.gmtime())}Z {text}"
        self.events.append(line)
        self._note(line)

    def _timed(self, stage: str, run: Callable[[], object]):
        began = time.perf_counter()
        try:
            return run()
        finally:
            self.stages[stage] = self.stages.get(stage, 0.0) + time.perf_counter() - began

    def run(self) -> RealResult:
        p, w = self.plan, self.world
        self.note(f"phase 1: target v1, {p.phase1:.0f} s of mixed traffic")
        self.phases[PHASES[0]] = self._timed("phase 1", lambda: w.traffic(0, p.phase1))
        v1 = w.versions()
        report = self._timed("guard", w.guard)
        self.note(f"guard before the update, live sample against v2: "
                  f"{', '.join(report['failed']) or 'no domain'} would fall below break-even")
        updated = w.update()
        self.note("target updated v1 -> v2 (LoRA adapter on in every pool)")
        stale, moved = None, None
        spent, after = 0.0, 0
        while spent < p.phase2:
            chunk = min(p.chunk, p.phase2 - spent)
            self.phases[PHASES[1]] += self._timed("phase 2", lambda: w.traffic(1, chunk))
            spent += chunk
            after += stale is not None  # rounds run since StaleDraft was seen
            stale = stale or self._stale(w.alerts(), updated, v1, w.versions())
            moved = moved_at(self.phases[PHASES[0]], self.phases[PHASES[1]], stale["domain"] if stale else p.domain)
            if stale and (moved or after >= p.after_stale):
                break
        if stale:
            self.note(f"StaleDraft {stale['domain']} after {stale['delay']:.1f} s: {stale['summary']}")
        if moved:
            self.note(f"{moved_domain(stale, p)} moved {moved['from']} -> {moved['to']} "
                      f"{moved['seconds']:.0f} s into phase 2")
        v2 = w.versions()
        distill = self._timed("re-distillation", lambda: w.redistill(moved_domain(stale, p)))
        self.note(f"draft re-distilled against v2 on the live sample: {distill.get('steps')} steps, "
                  f"{distill.get('total_seconds', 0):.0f} s")
        back, spent = False, 0.0
        domain = moved_domain(stale, p)
        # Back means it had left: a domain that never left its pool runs phase 3's whole time (the new draft's
        # figures are then the point), never "back" after one round.
        while spent < p.phase3 and not back:
            chunk = min(p.chunk, p.phase3 - spent)
            self.phases[PHASES[2]] += self._timed("phase 3", lambda: w.traffic(2, chunk))
            spent += chunk
            mine = [r for r in sorted(self.phases[PHASES[2]], key=lambda r: r["started"])
                    if r["domain"] == domain and r.get("error") is None]
            back = moved is not None and bool(mine) and mine[-1].get("pool") not in (None, "off")
        self.note(f"phase 3: {domain} " + ("back on a speculating pool" if back else "never left its pool"
                                           if moved is None else "still not speculating"))
        return RealResult(phase_rows(self.phases), self.events, w.alerts(), report, distill, stale, moved, back,
                          {k: round(v, 1) for k, v in self.stages.items()}, {"v1": v1, "v2": v2})

    @staticmethod
    def _stale(alerts: list[dict], updated: float, v1: dict[str, str], v2: dict[str, str]) -> dict | None:
        """The first StaleDraft that fired after the update, and whether its text names both target versions."""
        found = sorted((a for a in alerts if a["labels"].get("alertname") == STALE and a["starts_at"] >= updated),
                       key=lambda a: a["starts_at"])
        if not found:
            return None
        a = found[0]
        return {"domain": a["labels"].get("domain"), "delay": a["starts_at"] - updated,
                "summary": a["annotations"].get("summary", ""), "names_both": names_both(a, v1, v2)}


def names_both(alert: dict, v1: dict[str, str], v2: dict[str, str]) -> bool:
    """The alert names the target version before the update and the one after, as the pools served them (v2's
    version is v1's with the adapter's appended: compared whole, not as substrings)."""
    notes = alert["annotations"]
    return notes.get("old_target_version") in set(v1.values()) and notes.get("new_target_version") in set(v2.values())


def moved_domain(stale: dict | None, plan: RealPlan) -> str:
    return stale["domain"] if stale and stale.get("domain") else plan.domain
