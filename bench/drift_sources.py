"""Acceptance streams for bench/drift.py, as the drift watch sees them: one tuple per speculative step,
(accepted, rejected, expected acceptance of the counted positions or None), positions counted up to and
including the first rejection.

- iid: per position an expected acceptance e ~ Beta(mean x kappa, (1 - mean) x kappa) and a flag ~
  Bernoulli(e); flags are then iid Bernoulli(mean). Steps of a fixed lookahead.
- greedy real: the counterfactual traces of bench/traces.py replayed at a fixed lookahead (flags only).
- sampled real: the decoder's own steps recorded by bench/drift_traces.py (flags and expected acceptance).
Real streams are whole requests resampled with replacement (a block bootstrap over prompts), so the
correlation of flags inside a request is kept.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Sequence

from bench.replay import TRACES, RequestTrace, acceptance_path, parse_traces, read_json_gz

Step = tuple[int, int, tuple[float, ...] | None]
Request = list[Step]


def iid_steps(mean: float, flags: int, rng: random.Random, lookahead: int = 4, kappa: float = 4.0) -> list[Step]:
    """Steps until at least ``flags`` positions are counted."""
    a, b = mean * kappa, (1 - mean) * kappa
    out, counted = [], 0
    while counted < flags:
        values, accepted = [], 0
        while accepted < lookahead:
            e = rng.betavariate(a, b)
            values.append(e)
            if rng.random() >= e:
                break
            accepted += 1
        rejected = int(accepted < lookahead)
        out.append((accepted, rejected, tuple(values)))
        counted += accepted + rejected
    return out


def greedy_request(trace: RequestTrace, lookahead: int) -> Request:
    """A greedy trace replayed at a fixed lookahead, as bench/replay.py steps it (plain steps left out)."""
    out, i, length = [], 0, len(trace.m)
    while i < length:
        n = min(lookahead, length - 1 - i)
        if n == 0:
            i += 1
            continue
        a = min(trace.m[i], n)
        out.append((a, int(a < n), None))
        i += a + 1
    return out


def load_greedy(lookahead: int, size: str = "full", directory: Path = TRACES) -> dict[str, dict[str, list]]:
    """target -> domain -> requests (steps at ``lookahead``)."""
    traces = parse_traces(read_json_gz(acceptance_path(size, directory)))
    return {t: {d: [greedy_request(r, lookahead) for r in reqs] for d, reqs in domains.items()}
            for t, domains in traces.items()}


def sampled_path(size: str = "full", directory: Path = TRACES) -> Path:
    return Path(directory) / f"{size}-sampled.json.gz"


def load_sampled(size: str = "full", directory: Path = TRACES) -> tuple[dict[str, dict[str, list]], dict] | None:
    """target -> domain -> requests from bench/drift_traces.py, and the file's meta; None if not recorded."""
    path = sampled_path(size, directory)
    if not path.exists():
        return None
    data = read_json_gz(path)
    out = {t: {d: [[(a, int(a < n), tuple(v)) for a, n, v in r["steps"] if n > 0] for r in reqs]
               for d, reqs in domains.items()} for t, domains in data["traces"].items()}
    return out, data["meta"]


def bootstrap(requests: Sequence[Request], flags: int, rng: random.Random) -> list[Step]:
    """Whole requests drawn with replacement until at least ``flags`` positions are counted."""
    out, counted = [], 0
    while counted < flags:
        request = requests[rng.randrange(len(requests))]
        out.extend(request)
        counted += sum(a + r for a, r, _ in request)
    return out


def counted(steps: Sequence[Step]) -> int:
    return sum(a + r for a, r, _ in steps)


def acceptance(steps: Sequence[Step]) -> float:
    n = counted(steps)
    return sum(a for a, _, _ in steps) / n if n else 0.0


def concentration(requests: Sequence[Request]) -> float:
    """kappa of a Beta fitted to the expected-acceptance values by moments (for iid streams like them)."""
    values = [v for request in requests for _, _, vs in request for v in (vs or ())]
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return max(mean * (1 - mean) / var - 1, 0.1)
