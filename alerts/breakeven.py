"""Below break-even: measured goodput of a domain's speculative steps under its plain steps' (lookahead 0).

Goodput is tokens emitted per second of step time. Both sides must be measured (plain steps exist when a
policy or the switch runs K = 0 now and then); the loss counts only beyond ``confidence`` standard errors
of both ratio estimates (delta method) at ``dwell`` checks in a row. Plain steps cost what they cost
whatever the acceptance, so their memory is long; the speculative one is short, to see a loss soon.
Fires once per episode: again only after speculation has been measured at or above plain. Speculative
steps are counted from the first plain step on (before it there is nothing to compare with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from alerts.detectors.checks import check_count, check_positive
from policies.estimates import DecayingSums


@dataclass(frozen=True)
class BreakEvenConfig:
    """Half-lives and dwell in the domain's steps; ``check_every`` steps between two comparisons."""

    halflife: float = 200.0
    plain_halflife: float = 2000.0
    min_speculative: float = 50.0  # effective speculative steps before a comparison
    min_plain: float = 20.0  # effective plain steps before a comparison
    confidence: float = 3.0
    check_every: int = 16
    dwell: int = 4

    def __post_init__(self) -> None:
        for name in ("halflife", "plain_halflife", "min_speculative", "min_plain", "confidence"):
            check_positive(name, getattr(self, name))
        check_count("check_every", self.check_every)
        check_count("dwell", self.dwell)


@dataclass(frozen=True, slots=True)
class Loss:
    speculative: float  # tokens/s
    plain: float
    lookahead: int


class BreakEven:
    """One domain. ``observe`` returns a Loss when speculation has just been confirmed slower."""

    __slots__ = ("config", "_spec", "_plain", "_step", "_streak", "_firing", "_k_sum", "_k_n")

    def __init__(self, config: BreakEvenConfig):
        self.config = config
        self._spec = DecayingSums(config.halflife)
        self._plain = DecayingSums(config.plain_halflife)
        self._step = self._streak = 0
        self._firing = False
        self._k_sum = self._k_n = 0.0

    def observe(self, lookahead: int, emitted: int, seconds: float) -> Loss | None:
        if seconds <= 0:  # untimed steps say nothing about goodput
            return None
        if lookahead and not self._step:  # nothing to compare with before the first plain step: skip the work
            return None
        self._step += 1
        if lookahead:
            self._spec.add(self._step, emitted, seconds)
            self._k_sum, self._k_n = self._k_sum * 0.99 + lookahead, self._k_n * 0.99 + 1
        else:
            self._plain.add(self._step, emitted, seconds)
        if self._step % self.config.check_every:
            return None
        return self._check()

    def _check(self) -> Loss | None:
        cfg, step, spec, plain = self.config, self._step, self._spec, self._plain
        if spec.weight(step) < cfg.min_speculative or plain.weight(step) < cfg.min_plain:
            self._streak = 0
            return None
        g_spec, g_plain = spec.ratio(step), plain.ratio(step)
        if g_spec >= g_plain:
            self._streak, self._firing = 0, False
            return None
        noise = cfg.confidence * math.hypot(spec.stderr(step), plain.stderr(step))
        self._streak = self._streak + 1 if g_plain - g_spec > noise else 0
        if self._streak >= cfg.dwell and not self._firing:
            self._firing = True
            return Loss(g_spec, g_plain, max(1, round(self._k_sum / self._k_n)))
        return None
