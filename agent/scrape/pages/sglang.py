"""SGLang's speculative-decoding gauges, turned into counts with a token counter beside them.

python/sglang/srt/metrics/collector.py (SchedulerMetricsCollector; later observability/metrics_collector.py)
defines two gauges per scheduler (labels ``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank``,
``moe_ep_rank``, ``dp_rank`` when data-parallel): ``sglang:spec_accept_length``, the mean tokens a request
gains per verification pass (accepted drafts plus the bonus token), and ``sglang:spec_accept_rate``. Both
are set by ``log_decode_stats`` from the last ``decode_log_interval`` (default 40) decode batches only:
averages of a recent window, not counts. Two definitions of the rate exist: before sgl-project/sglang#23530
(April 2026) (accepted + passes) / (passes * num_draft_tokens), since then accepted / (passes * (num_draft_tokens
- 1)).

Counts come from a counter: ``sglang:realtime_tokens_total{mode="decode"}`` (tokens emitted by decode
passes, same labels; recent releases), else ``sglang:generation_tokens_total`` (per model_name, which also
counts each request's first token from prefill). Over an interval with E tokens emitted and acceptance length
L: passes = round(E / L), accepted = E - passes, drafted = passes * K, where K, the tokens drafted per pass,
is read off the gauges: K = L / rate - 1 under the old definition or (L - 1) / rate under the new one,
whichever is a whole number (once known for a series it is kept). The result is an aggregate record: the
per-position pattern, the exact number of passes and any change of L inside the interval are lost.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agent.scrape.pages.counts import PageError, SpecCounters
from agent.scrape.pages.page import Page, Series

NAME = "sglang"
TITLE = "SGLang"
FAMILY = "sglang:"
LENGTH, RATE = "sglang:spec_accept_length", "sglang:spec_accept_rate"
DECODE_TOKENS, GENERATED = "sglang:realtime_tokens_total", "sglang:generation_tokens_total"
MISSING = (f"no SGLang speculative-decoding gauges ({LENGTH}, {RATE}) on the page; start SGLang with "
           "--enable-metrics and a --speculative-algorithm")
WHOLE = 1e-6  # how close K must come to a whole number (the gauges are full-precision floats)


def draft_lengths(length: float, rate: float) -> tuple[int, ...]:
    """The tokens drafted per pass that the two gauges allow, under either definition of the rate."""
    if length < 1.0 or rate <= 0.0:
        return ()
    found = set()
    for k in (length / rate - 1.0, (length - 1.0) / rate):
        if k >= 0.5 and abs(k - round(k)) <= WHOLE * max(1.0, k):
            found.add(round(k))
    return tuple(sorted(found))


@dataclass(frozen=True)
class GaugeSnapshot:
    """One scheduler's gauges and its token counter. ``lookahead``: K when settled (``settle``)."""

    tokens: int
    length: float
    rate: float
    candidates: tuple[int, ...]
    lookahead: int | None = None
    created: float | None = None

    def settle(self, earlier: "GaugeSnapshot | None") -> "GaugeSnapshot":
        """This snapshot with K decided: its one candidate, or the earlier K when it is one of several
        (or when the gauges allow none, e.g. a rate of 0)."""
        if self.lookahead is not None:
            return self
        known = earlier.lookahead if isinstance(earlier, GaugeSnapshot) else None
        if len(self.candidates) == 1:
            return replace(self, lookahead=self.candidates[0])
        if known is not None and (not self.candidates or known in self.candidates):
            return replace(self, lookahead=known)
        return self

    def minus(self, earlier: "GaugeSnapshot") -> SpecCounters | None:
        if self.created is not None and earlier.created is not None and self.created != earlier.created:
            return None
        emitted = self.tokens - earlier.tokens
        return None if emitted < 0 else self._counts(emitted)

    def since_start(self) -> SpecCounters:
        return self._counts(self.tokens)

    def _counts(self, emitted: int) -> SpecCounters:
        """Estimated counts of ``emitted`` tokens; a delta whose ``problem`` says why when it cannot be made."""
        if emitted == 0:
            return SpecCounters(0, 0, 0, None, lookahead=self.lookahead)
        if self.length < 1.0:
            return SpecCounters(0, 0, 0, None, unknown=f"{LENGTH} is {self.length!r}: no acceptance length yet")
        if self.lookahead is None:
            return SpecCounters(0, 0, 0, None, unknown=(
                f"draft length not decidable from {LENGTH}={self.length!r} and {RATE}={self.rate!r} "
                f"(candidates {list(self.candidates)})"))
        passes = min(emitted, max(1, round(emitted / self.length)))
        return SpecCounters(passes, passes * self.lookahead, emitted - passes, None, lookahead=self.lookahead)


def detect(page: Page) -> bool:
    return bool(page.samples.get(LENGTH))


def read(page: Page) -> list[Series]:
    """One series per scheduler (label set of the gauges)."""
    lengths, rates = page.values(LENGTH), page.values(RATE)
    decode = {key: value for key, value in page.counts(DECODE_TOKENS).items() if ("mode", "decode") in key}
    decode = {tuple(kv for kv in key if kv[0] != "mode"): value for key, value in decode.items()}
    created = page.earliest([DECODE_TOKENS.removesuffix("_total") + "_created"], drop=("mode",))
    generated = page.counts(GENERATED)
    per_model: dict[str, int] = {}
    for key in lengths:
        model = dict(key).get("model_name", "")
        per_model[model] = per_model.get(model, 0) + 1
    out = []
    for key, length in sorted(lengths.items()):
        labels = dict(key)
        model = labels.get("model_name", "")
        if key in decode:
            tokens = decode[key]
        else:  # the tokenizer's counter is per model: usable when one scheduler serves that model
            matches = [v for k, v in generated.items() if dict(k).get("model_name", "") == model]
            if len(matches) != 1 or per_model[model] != 1:
                raise PageError(f"no token counter for SGLang scheduler {labels}: neither {DECODE_TOKENS}"
                                f"{{mode=\"decode\"}} with its labels nor one {GENERATED} for its model")
            tokens = matches[0]
        if key not in rates:
            raise PageError(f"SGLang scheduler {labels} has {LENGTH} but no {RATE}")
        rate = rates[key]
        snapshot = GaugeSnapshot(tokens, length, rate, draft_lengths(length, rate), created=created.get(key))
        out.append(Series(NAME, key, model or None, snapshot))
    return out
