"""Replay counterfactual traces: every policy faces the same positions, the same costs, and two oracles.

A trace of one request (recorded by bench/traces.py, greedy decoding) holds, per target position i, m[i]:
how many of the draft's greedy tokens drafted from the prefix the target accepts, and the draft's
confidence in each drafted token. Greedy outcomes are then fixed for every lookahead K: a step at i
drafts n = min(K, L - 1 - i) tokens (fewer if the policy's stop rule ends drafting), accepts
min(m[i], n), emits that + 1 and moves to the next position. Its seconds are a cost sample measured by
the real decoder for n drafted tokens, picked by a uniform u keyed by (request, position): samples of
each n are sorted by total time and u picks a quantile, so a step is "slow" for every K alike (load hits
all of them) and policies at the same position see the same cost.

Oracles: the best fixed K of each (domain, phase) (replaying a constant K for every K), and the per-step
oracle, a dynamic programme per request over positions that picks the best K at every step in hindsight
of acceptance, each step costing the mean of its drafted count's samples. Hindsight of the sampled costs
too would let the oracle jump over slow positions (a long accepted draft skips them), which measures the
timing noise rather than the policies. No policy, with or without a stop rule, beats it in expectation:
a policy's choice at a position never depends on that position's cost sample.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from policies.base import Decision, Outcome, Policy

TRACES = Path(__file__).parent / "traces"
FORMAT = 1
PHASES = {1: "target-v1", 2: "target-v2"}  # phase -> which target's traces it replays


@dataclass(frozen=True, slots=True)
class RequestTrace:
    """One request: ``m[i]`` accepted drafted tokens at position i, ``conf[i]`` the draft's confidence in
    each token it drafts there (min(kmax, L - 1 - i) of them; m[i] <= len(conf[i]))."""

    m: tuple[int, ...]
    conf: tuple[tuple[float, ...], ...]

    def __post_init__(self):
        if len(self.m) != len(self.conf):
            raise ValueError(f"trace: {len(self.m)} positions in m but {len(self.conf)} in conf")
        for i, (mi, ci) in enumerate(zip(self.m, self.conf)):
            if not 0 <= mi <= len(ci):
                raise ValueError(f"trace: m[{i}] = {mi} is outside 0..{len(ci)} drafted tokens")


@dataclass(frozen=True)
class Costs:
    """Measured (draft_seconds, verify_seconds) of real decoder steps, per drafted count n = 0..kmax."""

    samples: dict[int, tuple[tuple[float, float], ...]]

    def __post_init__(self):
        missing = [n for n in range(max(self.samples) + 1) if not self.samples.get(n)]
        if missing:
            raise ValueError(f"costs: no samples for drafted count {missing[0]}")
        # Sorted by total so u is a quantile: every n is slow at the same steps.
        object.__setattr__(self, "samples", {n: tuple(sorted(s, key=lambda p: (p[0] + p[1], p)))
                                             for n, s in self.samples.items()})
        object.__setattr__(self, "_totals", {n: tuple(d + v for d, v in s) for n, s in self.samples.items()})

    @property
    def kmax(self) -> int:
        return max(self.samples)

    def pick(self, n: int, u: float) -> tuple[float, float]:
        s = self.samples[n]
        return s[min(int(u * len(s)), len(s) - 1)]

    def total(self, n: int, u: float) -> float:
        t = self._totals[n]
        return t[min(int(u * len(t)), len(t) - 1)]

    def mean(self, n: int) -> float:
        t = self._totals[n]
        return sum(t) / len(t)


@dataclass(frozen=True)
class TraceSet:
    """Acceptance traces per target ("target-v1", "target-v2") and domain, plus measured costs."""

    traces: dict[str, dict[str, list[RequestTrace]]]
    costs: Costs
    meta: dict = field(default_factory=dict)

    @property
    def domains(self) -> list[str]:
        return list(next(iter(self.traces.values())))


@dataclass(frozen=True, slots=True)
class Request:
    index: int
    phase: int
    domain: str
    trace_index: int
    trace: RequestTrace
    u: tuple[float, ...]  # per position: which cost quantile a step there gets


# -- files ---------------------------------------------------------------------------------------------
def acceptance_path(size: str, directory: Path = TRACES) -> Path:
    return Path(directory) / f"{size}-acceptance.json.gz"


def costs_path(size: str, directory: Path = TRACES) -> Path:
    return Path(directory) / f"{size}-costs.json.gz"


def write_json_gz(path: Path, data: dict) -> None:
    """Compact JSON, gzip without a timestamp or name: the same data gives the same bytes."""
    raw = json.dumps(data, separators=(",", ":"), sort_keys=False).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))


def read_json_gz(path: Path) -> dict:
    return json.loads(gzip.decompress(Path(path).read_bytes()))


def parse_traces(data: dict) -> dict[str, dict[str, list[RequestTrace]]]:
    if data.get("format") != FORMAT:
        raise ValueError(f"acceptance traces: format {data.get('format')!r}, expected {FORMAT}")
    return {target: {domain: [RequestTrace(tuple(r["m"]), tuple(tuple(c) for c in r["conf"])) for r in reqs]
                     for domain, reqs in domains.items()}
            for target, domains in data["traces"].items()}


def parse_costs(data: dict) -> Costs:
    if data.get("format") != FORMAT:
        raise ValueError(f"cost samples: format {data.get('format')!r}, expected {FORMAT}")
    return Costs({int(n): tuple((float(d), float(v)) for d, v in s) for n, s in data["samples"].items()})


def load_traces(size: str = "full", directory: Path = TRACES) -> TraceSet:
    a, c = read_json_gz(acceptance_path(size, directory)), read_json_gz(costs_path(size, directory))
    costs = parse_costs(c)
    if costs.kmax < a["meta"]["kmax"]:
        raise ValueError(f"costs cover drafted counts 0..{costs.kmax}, traces draft up to {a['meta']['kmax']}")
    return TraceSet(parse_traces(a), costs, {"acceptance": a["meta"], "costs": c["meta"]})


# -- the stream ----------------------------------------------------------------------------------------
def build_stream(traces: dict[str, dict[str, list[RequestTrace]]], requests_per_phase: int,
                 seed: int = 0, domains: Sequence[str] | None = None) -> list[Request]:
    """Phase 1 replays target v1's traces, phase 2 target v2's: the target updated mid-stream. Domains are
    mixed uniformly at random, each request a random trace of its domain; all seeded."""
    domains = list(domains or next(iter(traces.values())))
    rng = random.Random(f"stream:{seed}")
    stream = []
    for phase, target in PHASES.items():
        for _ in range(requests_per_phase):
            domain = rng.choice(domains)
            j = rng.randrange(len(traces[target][domain]))
            trace = traces[target][domain][j]
            index = len(stream)
            step_rng = random.Random(f"costs:{seed}:{index}")
            stream.append(Request(index, phase, domain, j, trace,
                                  tuple(step_rng.random() for _ in trace.m)))
    return stream


# -- one step ------------------------------------------------------------------------------------------
def drafted_count(trace: RequestTrace, i: int, k: int, stop: Callable[[float, int], bool] | None) -> int:
    """Tokens drafted at position i for lookahead k, as the decoder does: clamped to the remaining budget
    (k accepted + 1 must fit), and ``stop(confidence, j)`` asked after each drafted token j < k."""
    n = min(k, len(trace.m) - 1 - i)
    if n > len(trace.conf[i]):
        raise ValueError(f"lookahead {k} is beyond the {len(trace.conf[i])} tokens the trace drafted")
    if stop is not None:
        conf = trace.conf[i]
        for j in range(1, n):
            if stop(conf[j - 1], j):
                return j
    return max(n, 0)


def step_outcome(request: Request, i: int, n: int, costs: Costs) -> Outcome:
    """What a step drafting n tokens at position i of ``request`` gives and costs."""
    a = min(request.trace.m[i], n)
    d, v = costs.pick(n, request.u[i])
    return Outcome(n, a, a + 1, d, v, tuple([1] * a + [0] * (n - a)), request.trace.conf[i][:n])


# -- replay --------------------------------------------------------------------------------------------
@dataclass
class Cell:
    """Totals of one policy in one (domain, phase)."""

    tokens: int = 0
    seconds: float = 0.0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    choices: Counter = field(default_factory=Counter)  # the policy's lookahead before clamping

    @property
    def goodput(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Result:
    name: str
    cells: dict[tuple[str, int], Cell]
    # per domain, phase 2: one flag per domain step, True when the step speculated and was not a probe
    speculating_after_update: dict[str, list[bool]]

    def total(self, phase: int | None = None) -> Cell:
        out = Cell()
        for (_, p), c in self.cells.items():
            if phase is None or p == phase:
                out.tokens += c.tokens
                out.seconds += c.seconds
                out.steps += c.steps
                out.drafted += c.drafted
                out.accepted += c.accepted
                out.choices.update(c.choices)
        return out

    def reaction(self, domain: str, window: int = 50, allowance: float = 0.1) -> int | None:
        return reaction_step(self.speculating_after_update.get(domain, []), window, allowance)


def is_probe(decision: Decision) -> bool:
    """A speculative step a policy labels as a probe (the switch's "off, probing K=..."), by its reason."""
    reason = decision.reason.lower()
    return "probe" in reason or "probing" in reason


def replay(policy: Policy, stream: Sequence[Request], costs: Costs, name: str | None = None,
           refit_every: int = 0) -> Result:
    """Run ``policy`` over the stream: choose before each step, update after it with the step's outcome.
    ``refit_every``: call the policy's ``refit()`` (if it has one) after every that many steps of the
    whole stream, as the sidecar's scheduler does every few seconds; 0: never (the policy fits inline)."""
    cells: dict[tuple[str, int], Cell] = {}
    after: dict[str, list[bool]] = {}
    kmax = min(policy.kmax, costs.kmax)
    refit = getattr(policy, "refit", None) if refit_every > 0 else None
    steps = 0
    for req in stream:
        cell = cells.setdefault((req.domain, req.phase), Cell())
        flags = after.setdefault(req.domain, []) if req.phase == 2 else None
        stop = policy.stop_drafting(req.domain)  # asked per request, as the decoder takes it per generate
        trace, i, length = req.trace, 0, len(req.trace.m)
        while i < length:
            decision = policy.choose(req.domain)
            k = decision.lookahead
            if type(k) is not int or not 0 <= k <= kmax:
                raise ValueError(f"{name or policy.name}: lookahead {k!r} outside 0..{kmax}")
            n = drafted_count(trace, i, k, stop)
            outcome = step_outcome(req, i, n, costs)
            policy.update(req.domain, outcome)
            cell.tokens += outcome.emitted
            cell.seconds += outcome.draft_seconds + outcome.verify_seconds
            cell.steps += 1
            cell.drafted += n
            cell.accepted += outcome.accepted
            cell.choices[k] += 1
            if flags is not None:
                flags.append(k > 0 and not is_probe(decision))
            i += outcome.emitted
            steps += 1
            if refit is not None and steps % refit_every == 0:
                refit()
    return Result(name or policy.name, cells, after)


def reaction_step(speculating: Sequence[bool], window: int = 50, allowance: float = 0.1) -> int | None:
    """The first domain step s from which the policy stays off: every full window of ``window`` steps
    starting at or after s has at most ``allowance`` of its steps speculating (probes are not counted),
    and step s itself does not speculate. None when it never settles."""
    n = len(speculating)
    if n < window:
        return None
    limit = int(allowance * window)
    run = sum(speculating[:window])
    last_bad = -1
    for j in range(n - window + 1):
        if j:
            run += speculating[j + window - 1] - speculating[j - 1]
        if run > limit:
            last_bad = j
    s = last_bad + 1
    while s < n and speculating[s]:
        s += 1
    return s if s <= n - window else None


class Constant(Policy):
    """Always the same lookahead (the fixed-K oracle's runs; K = 0 is no speculation)."""

    def __init__(self, k: int, kmax: int = 8):
        super().__init__(kmax)
        if not 0 <= k <= kmax:
            raise ValueError(f"k must be in 0..{kmax}, got {k}")
        self.k = k
        self.name = f"K={k}"

    def choose(self, domain: str) -> Decision:
        return self.decision(self.k, "fixed")

    def update(self, domain: str, outcome: Outcome) -> "Constant":
        return self


# -- oracles -------------------------------------------------------------------------------------------
def step_oracle_seconds(request: Request, costs: Costs, kmax: int) -> tuple[float, list[int]]:
    """Least expected time to emit the whole request choosing K at every step in hindsight, and those K.

    t[i] = min_K cost(K) + t[i + min(m_i, K) + 1], t[L] = 0, cost(K) the mean of K's samples; K ranges over
    0..min(kmax, L - 1 - i), which also covers every early stop (a step that drafts n tokens is K = n).
    """
    m = request.trace.m
    mean = [costs.mean(n) for n in range(kmax + 1)]
    length = len(m)
    t = [0.0] * (length + 1)
    best_k = [0] * length
    for i in range(length - 1, -1, -1):
        best, arg = math.inf, 0
        for k in range(min(kmax, length - 1 - i) + 1):
            c = mean[k] + t[i + min(m[i], k) + 1]
            if c < best:
                best, arg = c, k
        t[i], best_k[i] = best, arg
    path, i = [], 0
    while i < length:
        path.append(best_k[i])
        i += min(m[i], best_k[i]) + 1
    return t[0], path


def step_oracle(stream: Sequence[Request], costs: Costs, kmax: int) -> Result:
    cells: dict[tuple[str, int], Cell] = {}
    for req in stream:
        seconds, path = step_oracle_seconds(req, costs, kmax)
        cell = cells.setdefault((req.domain, req.phase), Cell())
        cell.tokens += len(req.trace.m)
        cell.seconds += seconds
        cell.steps += len(path)
        cell.choices.update(path)
    return Result("per-step oracle", cells, {})


def fixed_oracle(stream: Sequence[Request], costs: Costs, kmax: int) -> tuple[dict[int, Result], dict]:
    """Replays of every constant K, and per (domain, phase) the best one: {cell: (K, goodput)}."""
    runs = {k: replay(Constant(k, kmax), stream, costs) for k in range(kmax + 1)}
    best = {}
    for cell in runs[0].cells:
        k = max(range(kmax + 1), key=lambda k: (runs[k].cells[cell].goodput, -k))
        best[cell] = (k, runs[k].cells[cell].goodput)
    return runs, best
