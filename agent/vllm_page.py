"""vLLM's speculative-decoding counters, read from its Prometheus /metrics page, and their deltas.

vLLM v1 (vllm/v1/spec_decode/metrics.py) exports, per ``model_name`` and ``engine``, the counters
``vllm:spec_decode_num_drafts``, ``_num_draft_tokens``, ``_num_accepted_tokens`` and
``_num_accepted_tokens_per_pos`` (extra label ``position``, 0..K-1), each with the ``_total`` suffix and,
outside multiprocess mode, a ``_created`` sample. ``per_pos[i]`` counts drafts whose token at position i
was accepted (acceptance is a prefix, so every earlier one was too).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

PREFIX = "vllm:spec_decode_num_"
COUNTERS = ("drafts", "draft_tokens", "accepted_tokens", "accepted_tokens_per_pos")
EngineKey = tuple[str, str]  # (model_name, engine)


class PageError(ValueError):
    """A metrics page that does not carry vLLM's speculative-decoding counters, or carries them broken."""


@dataclass(frozen=True)
class SpecCounters:
    """One engine's counters (a snapshot), or the difference of two snapshots (a delta)."""

    drafts: int
    draft_tokens: int
    accepted: int
    per_pos: tuple[int, ...]
    created: float | None = None  # when the engine's counters started (None: unknown or a delta)

    def minus(self, earlier: "SpecCounters") -> "SpecCounters | None":
        """The counts since ``earlier``, or None when the counters restarted in between (an engine restart:
        a new ``_created`` time, a counter that went down, or a different number of positions)."""
        restarted = (self.created is not None and earlier.created is not None
                     and self.created != earlier.created)
        if restarted or len(self.per_pos) != len(earlier.per_pos):
            return None
        delta = SpecCounters(self.drafts - earlier.drafts, self.draft_tokens - earlier.draft_tokens,
                             self.accepted - earlier.accepted,
                             tuple(a - b for a, b in zip(self.per_pos, earlier.per_pos)))
        if min(delta.drafts, delta.draft_tokens, delta.accepted, *delta.per_pos, 0) < 0:
            return None
        return delta

    def since_start(self) -> "SpecCounters":
        """All counts since the counters started, as a delta (after a restart, like Prometheus' rate)."""
        return SpecCounters(self.drafts, self.draft_tokens, self.accepted, self.per_pos)

    def problem(self) -> str | None:
        """Why these counts (a delta) cannot come from whole drafts, or None when they can.

        A page scraped while vLLM updates its counters one by one can show part of an update; such a delta
        resolves at the next scrape."""
        p = self.per_pos
        if self.drafts == 0:
            return None if self.draft_tokens == self.accepted == sum(p) == 0 else "tokens without drafts"
        if sum(p) != self.accepted:
            return f"per-position accepted sum {sum(p)} != accepted tokens {self.accepted}"
        if any(later > earlier for earlier, later in zip((self.drafts, *p), p)):
            return "per-position counts must not grow with position (acceptance is a prefix)"
        k = len(p)
        if not self.drafts <= self.draft_tokens <= self.drafts * k:
            return f"draft tokens {self.draft_tokens} outside 1..{k} per draft for {self.drafts} drafts"
        least = self.accepted + (self.drafts - p[0]) if k else 0  # each draft drafts >= max(accepted, 1)
        if self.draft_tokens < least:
            return f"draft tokens {self.draft_tokens} fewer than accepted plus rejected drafts ({least})"
        return None


def parse_page(text: str) -> dict[EngineKey, SpecCounters]:
    """Each engine's speculative-decoding counters on a Prometheus text page.

    Raises PageError when the page has none of them (speculative decoding off, or not a vLLM page), some
    but not all, or values that are not whole non-negative counts."""
    found: dict[str, dict[EngineKey, dict]] = {name: {} for name in COUNTERS}
    created: dict[EngineKey, float] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise PageError(f"not a Prometheus text page: {exc}") from None
    for family in families:
        # The text format puts a counter's _created samples in a gauge family of their own.
        name = family.name.removeprefix(PREFIX).removesuffix("_created")
        if not family.name.startswith(PREFIX) or name not in found:
            continue
        for sample in family.samples:
            key = (sample.labels.get("model_name", ""), sample.labels.get("engine", ""))
            if sample.name.endswith("_created"):
                # Every child has its own creation time; a restart renews them all, so the earliest will do.
                created[key] = min(created.get(key, sample.value), sample.value)
                continue
            if not sample.name.endswith("_total"):
                continue
            value = _count(sample.name, sample.value)
            if name == "accepted_tokens_per_pos":
                position = _count(f"{sample.name} position", sample.labels.get("position"))
                found[name].setdefault(key, {})[position] = value
            else:
                found[name][key] = value
    present = [n for n in COUNTERS if found[n]]
    if not present:
        raise PageError("no vLLM speculative-decoding metrics (vllm:spec_decode_num_*) on the page; is "
                        "speculative decoding configured on the engine (--speculative-config)?")
    if len(present) < len(COUNTERS):
        missing = ", ".join(PREFIX + n for n in COUNTERS if n not in present)
        raise PageError(f"the page lacks {missing}; specwatch scrape needs vLLM v1's four counters")
    out = {}
    for key, drafts in found["drafts"].items():
        positions = found["accepted_tokens_per_pos"].get(key, {})
        if not positions or sorted(positions) != list(range(len(positions))):
            raise PageError(f"{PREFIX}accepted_tokens_per_pos of {key} has positions {sorted(positions)}, "
                            "not 0..K-1")
        try:
            out[key] = SpecCounters(drafts, found["draft_tokens"][key], found["accepted_tokens"][key],
                                    tuple(positions[i] for i in range(len(positions))), created.get(key))
        except KeyError:
            raise PageError(f"counters of model_name={key[0]!r} engine={key[1]!r} are incomplete") from None
    return out


def _count(what: str, value) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PageError(f"{what}: not a number: {value!r}") from None
    if number < 0 or number != int(number):
        raise PageError(f"{what}: not a whole non-negative count: {value!r}")
    return int(number)
