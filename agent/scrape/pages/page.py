"""A Prometheus text page, parsed once, and the helpers every engine reader uses on it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from agent.scrape.pages.counts import PageError

Labels = tuple[tuple[str, str], ...]  # a series' identifying labels, sorted by name


@dataclass(frozen=True)
class Series:
    """One engine instance on a page (one model, engine index or scheduler rank) and its counts.

    ``model``: the target model as the engine names it (the default target version). ``counters``: a
    SpecCounters, or an engine's own snapshot with the same ``minus``, ``since_start`` and ``created``."""

    engine: str
    labels: Labels
    model: str | None
    counters: object

    @property
    def key(self) -> tuple[str, Labels]:
        return self.engine, self.labels

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)


@dataclass
class Page:
    """Every sample of a page by sample name (``X_total``, ``X_created``, ``X_sum`` are names of their own)."""

    samples: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def parse(cls, text: str) -> "Page":
        page = cls()
        if text.lstrip()[:1] in ("{", "["):
            raise PageError("a JSON page, not Prometheus text (trtllm-serve's /metrics is JSON; its Prometheus "
                            "page is /prometheus/metrics)")
        try:
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    page.samples[sample.name].append((sample.labels, sample.value))
        except ValueError as exc:
            raise PageError(f"not a Prometheus text page: {exc}") from None
        return page

    def has(self, prefix: str) -> bool:
        return any(name.startswith(prefix) for name in self.samples)

    def values(self, name: str, drop: Iterable[str] = ()) -> dict[Labels, float]:
        """Sample ``name`` by its labels without ``drop``; several samples under one key are summed."""
        out: dict[Labels, float] = {}
        for labels, value in self.samples.get(name, ()):
            key = key_of(labels, drop)
            out[key] = out.get(key, 0.0) + value
        return out

    def counts(self, name: str, drop: Iterable[str] = ()) -> dict[Labels, int]:
        """Like ``values``, each a whole non-negative count (PageError otherwise)."""
        return {key: whole(name, value) for key, value in self.values(name, drop).items()}

    def positions(self, name: str, label: str, drop: Iterable[str] = ()) -> dict[Labels, dict[int, int]]:
        """A per-position counter: {series labels: {position: count}}; ``label`` names the position."""
        out: dict[Labels, dict[int, int]] = {}
        for labels, value in self.samples.get(name, ()):
            position = whole(f"{name} {label}", labels.get(label))
            out.setdefault(key_of(labels, (label, *drop)), {})[position] = whole(name, value)
        return out

    def earliest(self, names: Iterable[str], drop: Iterable[str] = ()) -> dict[Labels, float]:
        """The earliest ``_created`` time per series over ``names`` (every child has its own; a restart
        renews them all, so the earliest will do)."""
        out: dict[Labels, float] = {}
        for name in names:
            for labels, value in self.samples.get(name, ()):
                key = key_of(labels, drop)
                out[key] = min(out.get(key, value), value)
        return out

    def witness(self, names: Iterable[str], drop: Iterable[str] = ()) -> dict[Labels, tuple[tuple[str, float], ...]]:
        """Per series, (name, value) of those counters of ``names`` that the page has (restart witnesses)."""
        out: dict[Labels, list] = {}
        for name in names:
            for key, value in self.values(name, drop).items():
                out.setdefault(key, []).append((name, value))
        return {key: tuple(pairs) for key, pairs in out.items()}

    def start_time(self) -> float | None:
        """``process_start_time_seconds`` of the page's process, when it exports one (and only one)."""
        found = {value for _, value in self.samples.get("process_start_time_seconds", ())}
        return found.pop() if len(found) == 1 else None


def key_of(labels: dict[str, str], drop: Iterable[str] = ()) -> Labels:
    dropped = set(drop)
    return tuple(sorted((k, v) for k, v in labels.items() if k not in dropped))


def whole(what: str, value) -> int:
    """``value`` as a whole non-negative count; PageError naming ``what`` otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PageError(f"{what}: not a number: {value!r}") from None
    if not number >= 0 or number != int(number):
        raise PageError(f"{what}: not a whole non-negative count: {value!r}")
    return int(number)


def ordered(positions: dict[int, int], what: str, width: int | None = None) -> tuple[int, ...]:
    """Per-position counts 0..K-1 as a tuple; positions missing below ``width`` (or the largest) count 0
    when ``width`` is given, and are a PageError otherwise."""
    k = width if width is not None else (max(positions) + 1 if positions else 0)
    if width is None and sorted(positions) != list(range(k)):
        raise PageError(f"{what} has positions {sorted(positions)}, not 0..K-1")
    if any(p >= k for p in positions):
        raise PageError(f"{what} has positions {sorted(positions)} beyond the {k} drafted")
    return tuple(positions.get(i, 0) for i in range(k))
