"""A traffic mix (domain -> weight) and a schedule of mixes over time, as pure functions.

``code=3,chat=1`` sends three code requests for every chat request, on average. A schedule is the starting
mix and its shifts, each ``AT:MIX`` (``60s:json=4,chat=1``: from 60 s into the run on, that mix), where AT is
seconds, optionally with a unit (``90``, ``90s``, ``1.5m``, ``1h``). Which domain a request goes to is a draw
from the mix in force when the request starts: :func:`choose` maps a uniform number in [0, 1) to a domain.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from itertools import accumulate

UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)\s*$")


class MixError(ValueError):
    """A mix, a shift or a time that cannot be read; the message quotes it."""


@dataclass(frozen=True)
class Mix:
    """Domains and their weights (> 0), in the order written."""

    weights: tuple[tuple[str, float], ...]

    def __post_init__(self) -> None:
        if not self.weights:
            raise MixError("a mix needs at least one domain")
        names = [d for d, _ in self.weights]
        if len(set(names)) < len(names):
            raise MixError(f"a domain appears twice in the mix: {', '.join(names)}")
        for domain, weight in self.weights:
            if not domain:
                raise MixError("a domain name is empty")
            if not weight > 0:
                raise MixError(f"{domain}: weight must be > 0, got {weight:g}")

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.weights)

    def shares(self) -> dict[str, float]:
        """Each domain's share of the requests (weights normalised to sum to 1)."""
        total = sum(w for _, w in self.weights)
        return {d: w / total for d, w in self.weights}

    def __str__(self) -> str:
        return ",".join(f"{d}={w:g}" for d, w in self.weights)


@dataclass(frozen=True)
class Schedule:
    """Mixes by start time (seconds into the run): the first starts at 0, later ones are shifts."""

    phases: tuple[tuple[float, Mix], ...]

    def __post_init__(self) -> None:
        if not self.phases or self.phases[0][0] != 0:
            raise MixError("a schedule starts with a mix at 0 s")
        starts = [at for at, _ in self.phases]
        if any(b <= a for a, b in zip(starts, starts[1:])):
            raise MixError(f"shifts must be at increasing times, got {', '.join(f'{s:g}s' for s in starts[1:])}")

    @property
    def domains(self) -> tuple[str, ...]:
        """Every domain any phase sends to, in order of first appearance."""
        return tuple(dict.fromkeys(d for _, mix in self.phases for d in mix.domains))

    def phase_at(self, elapsed: float) -> int:
        """Index of the phase in force ``elapsed`` seconds into the run (a shift at t is in force from t on)."""
        return max(0, bisect.bisect_right([at for at, _ in self.phases], elapsed) - 1)

    def mix_at(self, elapsed: float) -> Mix:
        """The mix in force ``elapsed`` seconds into the run."""
        return self.phases[self.phase_at(elapsed)][1]


def parse_seconds(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``1h`` -> seconds."""
    match = _TIME.match(text)
    if match is None:
        raise MixError(f"expected a time such as 90, 90s, 1.5m or 1h, got {text!r}")
    return float(match.group(1)) * UNITS[match.group(2)]


def parse_mix(text: str) -> Mix:
    """``code=3,chat=1`` -> Mix; a bare domain (``chat``) has weight 1."""
    weights = []
    for part in text.split(","):
        domain, sep, weight = part.strip().partition("=")
        domain = domain.strip()
        try:
            value = float(weight) if sep else 1.0
        except ValueError:
            raise MixError(f"{domain or part!r}: weight must be a number, got {weight!r}") from None
        weights.append((domain, value))
    return Mix(tuple(weights))


def parse_shift(text: str) -> tuple[float, Mix]:
    """``60s:json=4,chat=1`` -> (60.0, Mix)."""
    at, sep, mix = text.partition(":")
    if not sep:
        raise MixError(f"a shift is AT:MIX, e.g. 60s:json=4,chat=1, got {text!r}")
    return parse_seconds(at), parse_mix(mix)


def schedule(mix: str, shifts: list[str] | tuple[str, ...] = ()) -> Schedule:
    """The schedule of ``--mix`` and its ``--shift`` options (in any order; sorted by time)."""
    later = sorted((parse_shift(s) for s in shifts), key=lambda p: p[0])
    if later and later[0][0] <= 0:
        raise MixError("a shift must come after 0 s (the --mix is the mix at 0 s)")
    return Schedule(((0.0, parse_mix(mix)), *later))


def choose(mix: Mix, u: float) -> str:
    """The domain a uniform draw ``u`` in [0, 1) picks, each domain with its share of [0, 1)."""
    if not 0 <= u < 1:
        raise ValueError(f"u: expected a number in [0, 1), got {u}")
    total = sum(w for _, w in mix.weights)
    edges = list(accumulate(w / total for _, w in mix.weights))
    return mix.weights[min(bisect.bisect_right(edges, u), len(edges) - 1)][0]
