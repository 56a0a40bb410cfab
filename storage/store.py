"""The Store facade: what the rest of specwatch calls. SQL stays behind it.

The hot path (``record`` / ``write_records``) validates and adds to in-memory window sums; it never
touches the database. ``flush`` writes closed windows in one transaction; ``rollup`` and ``prune`` are
scheduler jobs. All of them may run on other threads than the one recording.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

from agent.records import StepRecord, validate_batch
from storage import events, migrate
from storage.aggregator import WindowAggregator
from storage.config import StoreConfig
from storage.counts import SeriesKey
from storage.engine import Database, Timeouts, database_errors
from storage.events import Decision, StoredAlert, Transition, VersionSeen
from storage.pending import PendingWindows
from storage.query import StatsQuery, StatsResult, stats
from storage.retention import prune
from storage.sql import ceil_to
from storage.rollup import rollup
from storage.tiers import tiers
from storage.timeline import History, Point, grain, off_periods, target_changes
from storage.writer import note_versions, write_windows


class Store:
    """See the module docstring. ``backfill``: see ``open``."""

    def __init__(self, db: Database, config: StoreConfig, clock: Callable[[], float] = time.time,
                 backfill: bool = False):
        self.db = db
        self.config = config
        self.tiers = tiers(config)
        self._clock = clock
        self._aggregator = WindowAggregator(config.window_seconds, config.pod, clock)
        self._pending = PendingWindows()
        self._series_ids: dict[SeriesKey, int] = {}
        self._flush_lock = threading.Lock()
        self._decisions: dict[tuple[str, str], Decision | None] = {}
        if not backfill:
            # An earlier process with this pod name may have written the current window; a flush
            # replaces totals, so this process starts counting at the next window.
            self._aggregator.hold_from(ceil_to(clock(), config.window_seconds))

    @classmethod
    def open(cls, url: str, config: StoreConfig | None = None, *, migrate_schema: bool = True,
             clock: Callable[[], float] = time.time, backfill: bool = False,
             timeouts: Timeouts | None = None) -> "Store":
        """Open a database. With ``migrate_schema`` an empty or older schema is migrated up (the embedded
        default); without, anything but the current schema is refused. A newer schema always is.

        Records older than the moment of opening are counted in the next window, since a previous process
        of this pod may have stored theirs. ``backfill=True`` keeps their own windows: for importing
        history this pod name has not written (benchmarks, tests, replays)."""
        db = Database.open(url, must_exist=not migrate_schema, timeouts=timeouts)
        try:
            with database_errors():
                migrate.upgrade(db) if migrate_schema else migrate.check(db)
        except BaseException:
            db.dispose()
            raise
        return cls(db, config or StoreConfig(), clock, backfill)

    def close(self, flush: bool = True) -> None:
        """Write every window, open ones included (shutdown), then release the database."""
        try:
            if flush:
                self.flush(math.inf)
        finally:
            self.db.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close(flush=exc[0] is None)

    # -- hot path ------------------------------------------------------------------------------------
    def write_records(self, records: Sequence[StepRecord]) -> int:
        """Validate the whole batch (RecordError naming index and field, nothing kept), then count it."""
        self.validate_records(records)
        self._aggregator.add_many(records)
        return len(records)

    def record(self, record: StepRecord) -> None:
        self.validate(record)
        self._aggregator.add(record)

    def validate(self, record: StepRecord) -> None:
        """RecordError naming the field if ``record`` breaks this store's limits; nothing is counted."""
        record.validate(self.config.kmax, self.config.max_domain_length)

    def validate_records(self, records: Sequence[StepRecord]) -> None:
        """RecordError naming index and field if any record of the batch is bad; nothing is counted."""
        validate_batch(records, max_lookahead=self.config.kmax,
                       max_domain_length=self.config.max_domain_length)

    def count_validated(self, records: Sequence[StepRecord]) -> None:
        """Count records that ``validate`` / ``validate_records`` passed already (no second check)."""
        self._aggregator.add_many(records)

    @property
    def late_records(self) -> int:
        """Records counted in a later window than their timestamp (they came after theirs was gone)."""
        return self._aggregator.late

    # -- scheduler jobs ------------------------------------------------------------------------------
    def flush(self, now: float | None = None) -> int:
        """Write windows closed by ``now`` (and late additions to recent ones); return windows written."""
        now = self._now(now)
        with self._flush_lock:
            if math.isinf(now):
                floor, closed = None, self._aggregator.take_all()
            else:
                # Hold first: a record arriving from here on for an older window is counted at `floor`.
                floor = self._aggregator.hold_from(int(now) - self.config.late_seconds)
                closed = self._aggregator.take_closed(now)
            self._pending.merge(closed)
            entries = self._pending.unwritten()
            if entries:
                with self.db.write() as conn:
                    ids = write_windows(conn, entries, self.config.window_seconds, self._series_ids)
                self._series_ids.update(ids)  # only after commit: a rolled-back id may be reused
                self._pending.mark_written([(start, key) for start, key, _ in entries])
            if floor is not None:
                self._pending.evict_before(floor)
            return len(entries)

    def rollup(self, now: float | None = None) -> dict[str, int]:
        """Rebuild minute and hour buckets that ended and changed; return buckets rebuilt per tier."""
        with self.db.write(exclusive="rollup") as conn:
            return rollup(conn, self.tiers, self._now(now))

    def prune(self, now: float | None = None) -> dict[str, int]:
        """Apply retention now; return rows deleted per table."""
        with self.db.write(exclusive="rollup") as conn:
            deleted = prune(conn, self.tiers, self._now(now), self.config.retain_hours)
        # Rollups churn the dirty marks; retention deletes whole days of rows.
        self.db.reclaim(["dirty", *(t for t, n in deleted.items() if n)])
        return deleted

    # -- events --------------------------------------------------------------------------------------
    def record_versions(self, target_version: str, draft_version: str, ts: float | None = None,
                        pod: str | None = None) -> None:
        ts, pod = self._now(ts), pod or self.config.pod
        with self.db.write() as conn:
            note_versions(conn, [dict(pod=pod, role=role, version=v, first_seen=ts, last_seen=ts)
                                 for role, v in (("target", target_version), ("draft", draft_version))])

    def record_transition(self, domain: str, enabled: bool, reason: str, ts: float | None = None,
                          pod: str | None = None) -> None:
        """Speculation turned on or off for a domain, and why."""
        with self.db.write() as conn:
            events.add_transition(conn, Transition(self._now(ts), pod or self.config.pod, domain,
                                                   bool(enabled), reason))

    def record_decision(self, domain: str, lookahead: int, speculate: bool, policy: str, reason: str = "",
                        ts: float | None = None, pod: str | None = None) -> bool:
        """Store a policy decision if it differs (K, on/off, policy) from the last one; True if stored."""
        decision = Decision(self._now(ts), pod or self.config.pod, domain, int(lookahead), bool(speculate),
                            policy, reason)
        key = (decision.pod, domain)
        with self.db.write() as conn:
            if key not in self._decisions:
                self._decisions[key] = events.last_decision(conn, *key)
            if decision.same_choice(self._decisions[key]):
                return False
            events.add_decision(conn, decision)
        self._decisions[key] = decision
        return True

    def save_alert(self, alert: StoredAlert, now: float | None = None) -> None:
        with self.db.write() as conn:
            events.save_alert(conn, alert, self._now(now))

    def load_alerts(self, state: str = "firing", since: float | None = None,
                    until: float | None = None) -> list[StoredAlert]:
        with self.db.read() as conn:
            return events.load_alerts(conn, state, since, until)

    # -- queries -------------------------------------------------------------------------------------
    def transitions(self, domain: str | None = None, until: float | None = None) -> list[Transition]:
        """Stored on/off transitions, oldest first."""
        with self.db.read() as conn:
            return events.transitions(conn, self._now(until), domain)

    def stats(self, query: StatsQuery) -> StatsResult:
        with self.db.read() as conn:
            return stats(conn, query, self.tiers, self._clock())

    def versions(self) -> list[VersionSeen]:
        with self.db.read() as conn:
            return events.versions(conn)

    def history(self, since: float | None = None, until: float | None = None,
                domain: str | None = None) -> History:
        """Acceptance per domain over time with speculation-off periods, alerts and target versions."""
        until = self._now(until)
        with self.db.read() as conn:
            if since is None:
                first = stats(conn, StatsQuery(until=until, by=("day",), domain=domain), self.tiers, until)
                since = first.rows[0]["day"] if first.rows else until - 86400
            step = grain(since, until)
            result = stats(conn, StatsQuery(since, until, ("domain", step), domain), self.tiers, until)
            changes = events.transitions(conn, until, domain)
            alerts = [a for a in events.load_alerts(conn, "all", since, until)
                      if domain is None or a.labels.get("domain") in (None, domain)]
            targets = [v for v in events.versions(conn) if v.role == "target"]
        acceptance: dict[str, list[Point]] = {}
        for row in result.rows:
            acceptance.setdefault(row["domain"], []).append(
                Point(row[step], row["acceptance_rate"], row["steps"]))
        return History(int(since), int(until), {"minute": 60, "hour": 3600, "day": 86400}[step], acceptance,
                       off_periods(changes, since, until), alerts, target_changes(targets, since, until))

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now
