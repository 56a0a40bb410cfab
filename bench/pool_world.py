"""A seeded simulation of pools of one llama.cpp target (``off`` and ``kN``) serving a few domains, for the
pool policies' tests and bench/pool_policy_sim.py.

Costs like bench/engine_llamacpp.py's on the full kit (one thread): a plain step about 2.4 ms, a step of
lookahead K about (1.1 + 0.7 K) plain steps, so pools land within 5-15% of each other. Each request emits
``tokens`` tokens; its acceptance is drawn around the domain's (prompts differ), the accepted length of each
step from it (a step drafts min(K, tokens left - 1)), and its time is multiplied by a load factor with
relative spread ``noise`` (other work on the machine). Request i of a domain is the same request (prompt,
load, token draws) whatever pool serves it, as in the benchmark's interleaved configurations, so a policy's
tokens/s compares with each fixed pool's on the same requests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from policies.base import Outcome

POOLS = {"off": 0, "k2": 2, "k4": 4, "k8": 8}


@dataclass
class PoolWorld:
    accept: dict[str, float]  # domain -> mean per-token acceptance
    step_seconds: float = 0.0024
    overhead: float = 1.1  # a speculative step's fixed part, in plain steps
    draft: float = 0.7  # each drafted token, in plain steps
    tokens: int = 64
    noise: float = 0.1
    concentration: float = 60.0  # Beta(a c, (1 - a) c): acceptance of one request
    seed: int = 0
    _memo: dict = field(default_factory=dict, repr=False)

    def request(self, domain: str, k: int, index: int) -> Outcome:
        """Request ``index`` of ``domain`` served by the pool of lookahead ``k``: one aggregate outcome."""
        key = (domain, k, index)
        if key not in self._memo:
            self._memo[key] = self._serve(domain, k, index)
        return self._memo[key]

    def _serve(self, domain: str, k: int, index: int) -> Outcome:
        rng = random.Random(f"{self.seed}:{domain}:{index}")
        mean = self.accept[domain]
        a = rng.betavariate(max(mean, 1e-3) * self.concentration, max(1.0 - mean, 1e-3) * self.concentration)
        load = max(0.3, rng.gauss(1.0, self.noise))
        emitted = steps = drafted = accepted = 0
        while emitted < self.tokens:
            n = min(k, self.tokens - emitted - 1)
            j = 0
            while j < n and rng.random() < a:
                j += 1
            steps, drafted, accepted, emitted = steps + 1, drafted + n, accepted + j, emitted + j + 1
        seconds = self.step_seconds * load * steps * (1.0 if k == 0 else self.overhead + self.draft * k)
        return Outcome(k, accepted, emitted, 0.0, seconds, steps=steps, seconds=seconds, drafted=drafted)

    def fixed_goodput(self, domain: str, k: int, indices) -> float:
        """Tokens per second of the pool of lookahead ``k`` over these requests of ``domain``."""
        outs = [self.request(domain, k, i) for i in indices]
        return sum(o.emitted for o in outs) / sum(o.seconds for o in outs)


def run(policy, world: PoolWorld, domains: list[str], rounds: int, start: int = 0,
        rng: random.Random | None = None) -> dict[str, list[Outcome]]:
    """``rounds`` requests of each domain, interleaved in a seeded random order; request indices from
    ``start``. The outcomes each domain got, in order."""
    order = [d for d in domains for _ in range(rounds)]
    (rng or random.Random(world.seed)).shuffle(order)
    seen = {d: 0 for d in domains}
    got: dict[str, list[Outcome]] = {d: [] for d in domains}
    for d in order:
        k = policy.choose(d).lookahead
        out = world.request(d, k, start + seen[d])
        seen[d] += 1
        policy.update(d, out)
        got[d].append(out)
    return got


def goodput(outcomes: list[Outcome]) -> float:
    return sum(o.emitted for o in outcomes) / sum(o.seconds for o in outcomes)
