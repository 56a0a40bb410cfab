"""Per-load schedules: the K the history supports at each load, as the engines that key K on load take it.

From ``load_hours`` (``specwatch stats --by load``: requests by the load they met, requests in flight on their
pool, in bands 1, 2, 3-4, 5-8, ...). Per band and K, a domain's speed is its tokens over its step seconds
there; a (domain, K, band) counts with ``min_requests`` requests. Per band:

- pod-wide: the K of the least total time for the band's traffic, sum over domains of tokens / speed (the
  token-weighted harmonic mean, as ``recommend``'s pod-wide K); a K counts where it is measured in every
  domain the band carries;
- per domain: the K of its highest speed there (a pool that serves one domain).

A band without a measured K takes the nearest measured band's (the lower on a tie). As each engine takes it:

- vLLM: ``--speculative-config`` with ``num_speculative_tokens`` (the largest K) and
  ``num_speculative_tokens_per_batch_size`` {batch size: K} (0 = off), keyed by each band's upper bound;
- TensorRT-LLM: ``draft_len_schedule`` {batch size: K}, the same keys, the last band up to ``MAX_BATCH``
  (it drafts nothing above its last key);
- SGLang: no K per batch size (``--speculative-adaptive`` moves between ``candidate_steps`` by acceptance,
  not load): a pool per K of the schedule, split by load in front of it (the proxy);
- llama.cpp: K is fixed per server: a pool per K of the schedule; ``specwatch proxy`` routes each request by
  its domain and the load of each pool at that moment.
"""

from __future__ import annotations

from dataclasses import dataclass

from specwatch_core.loads import BANDS, bounds, label
from storage import Store
from storage.query import StatsQuery

MAX_BATCH = 2048  # TensorRT-LLM's default max_batch_size (LLM API)


@dataclass(frozen=True)
class Schedule:
    """K per load band (``by_band``: band -> K, every band from 0 to the last measured; None: no band has
    enough data), ``measured``: the bands whose K is measured, not carried from a neighbour."""

    name: str  # "pod" or a domain
    by_band: dict[int, int]
    measured: tuple[int, ...]

    def by_batch(self) -> dict[int, int]:
        """{the band's largest batch size: K}; the last band to ``MAX_BATCH``; runs of one K merged."""
        out: dict[int, int] = {}
        bands = sorted(self.by_band)
        for i, b in enumerate(bands):
            high = bounds(b)[1]
            key = MAX_BATCH if i == len(bands) - 1 or high is None else high
            if out and list(out.values())[-1] == self.by_band[b]:
                out.pop(list(out)[-1])
            out[key] = self.by_band[b]
        return out

    def rows(self) -> list[dict]:
        return [{"schedule": self.name, "load": label(b), "lookahead": k, "measured": b in self.measured}
                for b, k in sorted(self.by_band.items())]


def speeds(store: Store, since: float, until: float | None = None, domain: str | None = None,
           min_requests: int = 5) -> dict[str, dict[int, dict[int, tuple[float, int]]]]:
    """{domain: {band: {K: (tokens per step second, tokens)}}} where a (domain, K, band) has ``min_requests``."""
    rows = store.stats(StatsQuery(since=since, until=until, by=("domain", "lookahead", "load"), domain=domain)).rows
    band_of = {label(b): b for b in range(BANDS)}
    out: dict[str, dict[int, dict[int, tuple[float, int]]]] = {}
    for r in rows:
        if r["requests"] < min_requests or not r["tokens_per_second"]:
            continue
        tokens = round(r["tokens_per_request"] * r["requests"])
        out.setdefault(r["domain"], {}).setdefault(band_of[r["load"]], {})[r["lookahead"]] = \
            (r["tokens_per_second"], tokens)
    return out


def schedules(measured: dict[str, dict[int, dict[int, tuple[float, int]]]]) -> list[Schedule]:
    """The pod-wide schedule first, then one per domain (a domain with no measured band has none)."""
    pod: dict[int, int] = {}
    for b in range(BANDS):
        here = {d: by[b] for d, by in measured.items() if b in by}
        if not here:
            continue
        common = set.intersection(*(set(ks) for ks in here.values()))
        if common:
            pod[b] = min(common, key=lambda k: (sum(sum(t for _, t in ks.values()) / ks[k][0]
                                                    for ks in here.values()), k))
    out = [_filled("pod", pod)] if pod else []
    for d, by in sorted(measured.items()):
        best = {b: max(ks, key=lambda k: (ks[k][0], -k)) for b, ks in by.items()}
        if best:
            out.append(_filled(d, best))
    return out


def _filled(name: str, best: dict[int, int]) -> Schedule:
    """Every band from 0 to the last measured one; a gap takes its nearest measured band's K."""
    filled = {b: best[min(best, key=lambda m: (abs(m - b), m))] for b in range(max(best) + 1)}
    return Schedule(name, filled, tuple(sorted(best)))


def engine_config(engine: str, schedule: Schedule) -> str:
    """``engine``'s configuration of ``schedule`` (see the module docstring)."""
    batch = schedule.by_batch()
    ks = sorted(set(schedule.by_band.values()))
    pools = ", ".join("off" if k == 0 else f"k{k}" for k in ks)
    if engine == "vllm":
        top = max(ks)
        if top == 0:
            return "no --speculative-config (K = 0 at every load)"
        table = ", ".join(f'"{b}": {k}' for b, k in batch.items())
        return (f"--speculative-config '{{\"num_speculative_tokens\": {top}, "
                f"\"num_speculative_tokens_per_batch_size\": {{{table}}}}}'")
    if engine == "trtllm":
        return "draft_len_schedule: {" + ", ".join(f"{b}: {k}" for b, k in batch.items()) + "}"
    if engine in ("sglang", "llamacpp"):
        if len(ks) == 1:
            return f"one pool ({pools}) at every load"
        return f"pools {pools} behind specwatch proxy, which routes by domain and load"
    raise ValueError(f"unknown engine {engine!r}")
