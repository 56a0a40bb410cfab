"""A seeded simulation of pools whose K is a cap on what each step drafts, for pool-cap's tests and
bench/pool_cap_sim.py: ``off`` at 40 tokens/s, llama.cpp n-gram self-speculation pools capped at 8, 24 and
64, and a draft-model pool drafting exactly K = 4 a step (bench/engine_llamacpp.py's kind).

An n-gram step finds a continuation in the context with the domain's ``match`` probability, of a length
drawn around its ``run`` (geometric), drafts it up to the cap and the tokens left, and has it accepted token
by token at ``accept`` until the first rejection; without a match it drafts nothing. Costs in plain target
steps: a step verifies its drafted tokens at ``verify`` each beyond the plain pass, an n-gram lookup adds
``lookup``, the draft model ``draft`` per drafted token. So a step's cost depends on what it drafted, which
differs by domain: copy-heavy text drafts long runs, chat few. Each request emits ``tokens`` tokens; its
match, acceptance and load (relative spread ``noise``) are drawn around the domain's, and request i of a
domain is the same request (prompt, load, draws) whatever pool serves it, so a policy's tokens/s compares
with each fixed pool's on the same requests. ``run`` and ``goodput`` of bench/pool_world.py drive it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from policies.base import Outcome

POOLS = {"off": ("off", 0), "k4": ("draft", 4), "k8": ("ngram", 8), "k24": ("ngram", 24), "k64": ("ngram", 64)}


@dataclass(frozen=True)
class Domain:
    match: float  # P(a step's n-gram lookup finds a continuation)
    run: float  # mean length of the continuation found
    accept: float  # per-token acceptance of an n-gram continuation
    draft_accept: float  # per-token acceptance of the draft model's tokens


# Best pools differ: code k64 (rare but long exact repeats), logs k8 (long matches of which few tokens
# hold: k64 drafts 15 a step and verifies them for 2 accepted), chat the draft model (n-gram lookups
# rarely match). Speeds over off's 40 tok/s like the measured ones (n-gram pools up to 1.6-3.8x); the
# default pool (llama.cpp's --spec-default, k64) is 71-100% of each domain's best.
DOMAINS = {"code": Domain(match=0.2, run=60.0, accept=0.98, draft_accept=0.7),
           "logs": Domain(match=0.85, run=20.0, accept=0.7, draft_accept=0.5),
           "chat": Domain(match=0.5, run=6.0, accept=0.7, draft_accept=0.75)}


@dataclass
class NgramWorld:
    domains: dict[str, Domain] = field(default_factory=lambda: dict(DOMAINS))
    pools: dict[str, tuple[str, int]] = field(default_factory=lambda: dict(POOLS))
    plain_seconds: float = 1.0 / 40.0
    verify: float = 0.06
    lookup: float = 0.01
    draft: float = 0.12
    tokens: int = 256
    noise: float = 0.1
    concentration: float = 60.0  # Beta(m c, (1 - m) c): one request's match and acceptances
    seed: int = 0
    _memo: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._kinds = {k: kind for kind, k in self.pools.values()}

    def request(self, domain: str, k: int, index: int) -> Outcome:
        """Request ``index`` of ``domain`` served by the pool of lookahead ``k``: one aggregate outcome."""
        key = (domain, k, index, self.domains[domain])
        if key not in self._memo:
            self._memo[key] = self._serve(domain, k, index)
        return self._memo[key]

    def _serve(self, domain: str, k: int, index: int) -> Outcome:
        rng = random.Random(f"{self.seed}:{domain}:{index}")
        d = self.domains[domain]
        match, accept, draft_accept = (_beta(rng, m, self.concentration) for m in (d.match, d.accept, d.draft_accept))
        load = max(0.3, rng.gauss(1.0, self.noise))
        kind = self._kinds[k]
        emitted = steps = drafted = accepted = 0
        cost = 0.0
        while emitted < self.tokens:
            room = self.tokens - emitted - 1
            if kind == "draft":
                n, a = min(k, room), draft_accept
            elif kind == "ngram" and rng.random() < match:
                n, a = min(k, room, _geometric(rng, d.run)), accept
            else:
                n, a = 0, 0.0
            j = 0
            while j < n and rng.random() < a:
                j += 1
            cost += 1.0 + self.verify * n + (self.lookup if kind == "ngram" else self.draft * n if kind == "draft" else 0.0)
            steps, drafted, accepted, emitted = steps + 1, drafted + n, accepted + j, emitted + j + 1
        seconds = self.plain_seconds * load * cost
        return Outcome(k, accepted, emitted, 0.0, seconds, steps=steps, seconds=seconds, drafted=drafted)

    def fixed_goodput(self, domain: str, k: int, indices) -> float:
        """Tokens per second of the pool of lookahead ``k`` over these requests of ``domain``."""
        outs = [self.request(domain, k, i) for i in indices]
        return sum(o.emitted for o in outs) / sum(o.seconds for o in outs)


def _beta(rng: random.Random, mean: float, concentration: float) -> float:
    return rng.betavariate(max(mean, 1e-3) * concentration, max(1.0 - mean, 1e-3) * concentration)


def _geometric(rng: random.Random, mean: float) -> int:
    """1, 2, ... with the given mean."""
    if mean <= 1.0:
        return 1
    return 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - 1.0 / mean))
