"""StoreConfig: what the store keeps and for how long. Configuration only, never learned state."""

from __future__ import annotations

from dataclasses import dataclass

from storage.counts import MAX_LOOKAHEAD, POSITIONS

DAY = 86_400


@dataclass(frozen=True)
class StoreConfig:
    """Limits, window size and retention per tier (seconds).

    - ``kmax``: the largest lookahead a record may carry (up to 64); positions 1..min(kmax, 32) are counted
      (a per-step record of K over 32 keeps its sums; its positions above 32 are not counted).
    - ``window_seconds``: length of the in-memory aggregation window; divides 60 so windows nest in minutes.
    - ``late_seconds``: how long a flushed window still accepts late records; older records are counted in
      the oldest window still open to them, so a re-flush never replaces stored totals with partial ones.
    - ``retain_*``: how long each tier is kept (a lower tier only once the tier above covers it).
    - ``pod``: the pod name given to records that carry none.
    - ``max_past_seconds`` / ``max_future_seconds``: a record's timestamp must lie within this skew of the
      store's clock (7 days back, 5 minutes ahead); anything else is refused naming the field.
    - ``dead_letter``: JSON-lines file for window rows the database refuses; None: next to a SQLite file,
      else ``dead-letter.jsonl`` under SPECWATCH_HOME.
    - ``max_series_cached``: series ids kept in memory (least recently used dropped; a miss asks the
      database). ``max_windows_kept``: written window totals kept for late records (oldest dropped first;
      late records for a dropped window are counted in a later one, like records past ``late_seconds``).
    - ``max_unwritten``: window rows held while the database is away, beyond which the oldest go to the
      dead-letter file (None: no bound here; `specwatch serve` refuses ingest above its own bound instead).
    """

    kmax: int = 16
    max_domain_length: int = 64
    window_seconds: int = 10
    late_seconds: int = 300
    retain_windows: int = 7 * DAY
    retain_minutes: int = 30 * DAY
    retain_hours: int = 400 * DAY
    retain_days: int = 5 * 366 * DAY
    pod: str = "local"
    max_past_seconds: int = 7 * DAY
    max_future_seconds: int = 300
    dead_letter: str | None = None
    max_series_cached: int = 4_096
    max_windows_kept: int = 20_000
    max_unwritten: int | None = None

    def __post_init__(self) -> None:
        if type(self.kmax) is not int or not 1 <= self.kmax <= MAX_LOOKAHEAD:
            raise ValueError(f"kmax must be an integer in 1..{MAX_LOOKAHEAD} (positions 1..{POSITIONS} are "
                             f"counted), got {self.kmax!r}")
        if type(self.max_domain_length) is not int or not 1 <= self.max_domain_length <= 256:
            raise ValueError(f"max_domain_length must be in 1..256, got {self.max_domain_length!r}")
        if type(self.window_seconds) is not int or self.window_seconds < 1 or 60 % self.window_seconds:
            raise ValueError(f"window_seconds must divide 60 (1, 2, 5, 10, 30, ...), got {self.window_seconds!r}")
        if type(self.late_seconds) is not int or self.late_seconds < 0:
            raise ValueError(f"late_seconds must be a non-negative integer, got {self.late_seconds!r}")
        retention = (self.retain_windows, self.retain_minutes, self.retain_hours, self.retain_days)
        if any(type(r) is not int or r <= 0 for r in retention):
            raise ValueError(f"retention must be positive whole seconds, got {retention}")
        if self.retain_windows <= self.late_seconds + 3600:
            raise ValueError("retain_windows must exceed late_seconds by more than an hour, so late "
                             "records never land in windows that were already pruned")
        if not self.retain_windows <= self.retain_minutes <= self.retain_hours <= self.retain_days:
            raise ValueError("retention must grow with the tier: windows <= minutes <= hours <= days, got "
                             + " / ".join(str(r) for r in retention) + " s")
        for name in ("max_past_seconds", "max_future_seconds", "max_series_cached", "max_windows_kept"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.max_unwritten is not None and (type(self.max_unwritten) is not int or self.max_unwritten < 1):
            raise ValueError(f"max_unwritten must be a positive integer or None, got {self.max_unwritten!r}")
        if self.dead_letter is not None and (not isinstance(self.dead_letter, str) or not self.dead_letter):
            raise ValueError(f"dead_letter must be a file path or None, got {self.dead_letter!r}")
        if not isinstance(self.pod, str) or not self.pod or len(self.pod) > 128 or not self.pod.isprintable():
            raise ValueError(f"pod must be printable text of 1..128 characters, got {self.pod!r}")
