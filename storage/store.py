"""The Store facade: what the rest of specwatch calls. SQL stays behind it.

The hot path (``record`` / ``write_records``) validates and adds to in-memory window sums; it never
touches the database. ``flush`` writes the totals so far of every window that changed, open ones too, so
the database is at most a flush interval behind (storage/flush.py: rows the database refuses go to a
dead-letter file, an unreachable database keeps them in memory, up to ``max_unwritten`` rows, the oldest
beyond that going to the dead-letter file too). ``spill`` lets go of what is unwritten at a shutdown the
database does not answer in time. A store opened with ``wait=False`` reaches the database at its first
flush instead of at opening. ``rollup`` and ``prune`` are scheduler jobs. All of them may run on other
threads than the one recording. docs/durability.md states the promises.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from specwatch_core.records import StepRecord, validate_batch
from storage import deadletter, events, loads, migrate
from storage.aggregator import WindowAggregator
from storage.cache import LRU
from storage.config import StoreConfig
from storage.counts import SeriesKey
from storage.engine import Database, Timeouts, database_errors
from storage.events import Decision, StoredAlert, Transition, VersionSeen
from storage.flush import write_all
from storage.history import read_history
from storage.loads import LoadTally
from storage.pack import pack_due
from storage.pending import PendingWindows
from storage.query import StatsQuery, StatsResult, last_window_of, stats
from storage.retention import prune
from storage.rollup import rollup
from storage.sql import ceil_to, floor_to
from storage.tiers import tiers
from storage.timeline import History
from storage.writer import note_versions

log = logging.getLogger(__name__)


class Store:
    """See the module docstring. ``backfill``, ``migrate_schema``: see ``open``; ``ready``: the schema was
    checked (else ``connect`` does it)."""

    def __init__(self, db: Database, config: StoreConfig, clock: Callable[[], float] = time.time,
                 backfill: bool = False, ready: bool = True, migrate_schema: bool = True):
        self.db = db
        self.config = config
        self.tiers = tiers(config)
        self._clock = clock
        self._aggregator = WindowAggregator(config.window_seconds, config.pod, clock)
        self._loads = LoadTally(config.pod)
        self._pending = PendingWindows()
        self._series_ids: LRU[SeriesKey, int] = LRU(config.max_series_cached)
        self._flush_lock = threading.Lock()
        self._decisions: LRU[tuple[str, str], Decision | None] = LRU(config.max_series_cached)
        self.dead_lettered = 0  # window rows the database refused, appended to ``dead_letter_path``
        self.flush_failures = 0  # flushes that could not reach the database (their rows kept for the next)
        self.spilled = 0  # unwritten rows let go of (``spill``), appended to ``dead_letter_path``
        self.lost = 0  # unwritten rows let go of that the dead-letter file could not take (logged instead)
        self.ready, self._backfill, self._migrate = False, backfill, migrate_schema
        self._when_ready: list[Callable[[], object]] = []
        if not backfill:
            self._aggregator.hold_from(ceil_to(clock(), config.window_seconds))
        if ready:
            self._resume()

    def when_ready(self, then: Callable[[], object]) -> None:
        """Call ``then`` once the database is reached (at once if it was), e.g. a warm start."""
        if self.ready:
            then()
        else:
            self._when_ready.append(then)

    def connect(self) -> None:
        """Reach the database if this store has not yet (``open(wait=False)``): check or migrate its schema,
        find where this pod's predecessor stopped, run the ``when_ready`` callbacks. StoreError while it
        cannot be reached (SchemaError: a schema this code cannot use)."""
        if self.ready:
            return
        with database_errors():
            migrate.upgrade(self.db) if self._migrate else migrate.check(self.db)
        self._resume()
        log.info("database reached: %d window rows held meanwhile go to it now", self.unwritten)
        for then in self._when_ready:
            try:
                then()
            except Exception as exc:  # a warm start that fails leaves the store usable
                log.error("after reaching the database: %s", exc)
        self._when_ready.clear()

    def _resume(self) -> None:
        """An earlier process with this pod name may have written the current window (and later ones, for
        records stamped ahead of the clock); a flush replaces totals, so this process counts from after the
        last window it finds, and what it counted before it knew goes there too."""
        if not self._backfill:
            floor = self._aggregator.hold_from(self._resume_after())
            self._pending.merge(self._aggregator.take_all())
            self._pending.move_before(floor)
        self.ready = True

    @classmethod
    def open(cls, url: str, config: StoreConfig | None = None, *, migrate_schema: bool = True,
             clock: Callable[[], float] = time.time, backfill: bool = False,
             timeouts: Timeouts | None = None, wait: bool = True) -> "Store":
        """Open a database. With ``migrate_schema`` an empty or older schema is migrated up (the embedded
        default); without, anything but the current schema is refused. A newer schema always is.
        ``wait=False``: reach the database later, at the first flush (``connect``), not now; records are
        counted meanwhile (a process that must not depend on the database to start: `specwatch proxy`).

        Records older than the moment of opening are counted in the next window, since a previous process
        of this pod may have stored theirs. ``backfill=True`` keeps their own windows: for importing
        history this pod name has not written (benchmarks, tests, replays)."""
        db = Database.open(url, must_exist=not migrate_schema, timeouts=timeouts)
        if not wait:
            return cls(db, config or StoreConfig(), clock, backfill, ready=False, migrate_schema=migrate_schema)
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
        self._loads.add_many(records, self._clock())
        return len(records)

    def record(self, record: StepRecord) -> None:
        self.validate(record)
        self._aggregator.add(record)
        if record.load is not None:
            self._loads.add_many((record,), self._clock())

    def validate(self, record: StepRecord) -> None:
        """RecordError naming the field if ``record`` breaks this store's limits; nothing is counted."""
        now = self._clock()
        record.validate(self.config.kmax, self.config.max_domain_length, now - self.config.max_past_seconds,
                        now + self.config.max_future_seconds)

    def validate_records(self, records: Sequence[StepRecord]) -> None:
        """RecordError naming index and field if any record of the batch is bad; nothing is counted."""
        now = self._clock()
        validate_batch(records, max_lookahead=self.config.kmax, max_domain_length=self.config.max_domain_length,
                       earliest=now - self.config.max_past_seconds, latest=now + self.config.max_future_seconds)

    def count_validated(self, records: Sequence[StepRecord]) -> None:
        """Count records that ``validate`` / ``validate_records`` passed already (no second check)."""
        self._aggregator.add_many(records)
        self._loads.add_many(records, self._clock())

    @property
    def unwritten(self) -> int:
        """Window rows held in memory that the database does not have yet (all of them while it is away)."""
        return self._pending.unwritten_count + self._aggregator.open_windows()

    @property
    def dead_letter_path(self) -> Path:
        """Where rows the database did not take are appended (storage/deadletter.py)."""
        return deadletter.path_for(self.config.dead_letter, self.db)

    @property
    def late_records(self) -> int:
        """Records counted in a later window than their timestamp (they came after theirs was gone)."""
        return self._aggregator.late

    # -- scheduler jobs ------------------------------------------------------------------------------
    def flush(self, now: float | None = None) -> int:
        """Write the totals so far of every window that changed since the last flush, open windows too
        (their rows are replaced as they grow); return window rows written. Rows the database refuses are
        dead-lettered; if it cannot be reached, the rows stay for the next flush (beyond ``max_unwritten``
        the oldest are spilled) and the error is raised. ``now`` = inf (shutdown) keeps no window open to
        late records."""
        now = self._now(now)
        with self._flush_lock:
            # Hold first: a record arriving from here on for an older window is counted at `floor`.
            floor = None if math.isinf(now) else self._aggregator.hold_from(int(now) - self.config.late_seconds)
            self._pending.merge(self._aggregator.take_all())
            try:
                self.connect()
                written = self._write()
                self._write_loads()
            except BaseException:
                self.flush_failures += 1
                bound = self.config.max_unwritten
                if bound is not None and self._pending.unwritten_count > bound:
                    self._spill(bound, f"over max_unwritten={bound} rows held while the database was away")
                raise
            if floor is not None:
                self._pending.evict_before(floor)
            dropped = self._pending.evict_over(self.config.max_windows_kept)
            if dropped is not None:  # its total is gone from memory: later records must not replace it
                self._aggregator.hold_from(dropped + self.config.window_seconds)
            return written

    def _write(self) -> int:
        entries = self._pending.unwritten()
        if entries:
            outcome = write_all(self.db, entries, self.config.window_seconds, self._series_ids,
                                self._series_ids.update, self.dead_letter_path)
            self._pending.mark_written([(start, key) for start, key, _ in outcome.written])
            self._pending.forget([(start, key) for start, key, _ in outcome.dead])
            self.dead_lettered += len(outcome.dead)
            if outcome.error is not None:
                raise outcome.error
        return len(entries)

    def _write_loads(self) -> None:
        """Add the open load sums to ``load_hours`` (storage/loads.py); kept for the next flush on failure."""
        taken = self._loads.take()
        if not taken:
            return
        try:
            with self.db.write() as conn:
                ids = loads.write(conn, taken, self._series_ids)
        except BaseException:
            self._loads.put_back(taken)
            raise
        self._series_ids.update(ids)

    def spill(self, reason: str, wait: float = 1.0) -> int:
        """Every unwritten row, open windows too, to the dead-letter file (a shutdown the database did not
        answer in time); returns rows spilled. A flush held by the database keeps its lock: after ``wait``
        seconds the rows are taken without it (the process is ending; should that flush complete, it
        writes the totals the file holds, never more)."""
        locked = self._flush_lock.acquire(timeout=wait)
        try:
            self._pending.merge(self._aggregator.take_all())
            return self._spill(0, reason)
        finally:
            if locked:
                self._flush_lock.release()

    def _spill(self, keep: int, reason: str) -> int:
        gone, failed = deadletter.spill(self._pending, keep, self.dead_letter_path, reason)
        if gone:  # later records for these windows count after them: a replayed row never meets a partial one
            self._aggregator.hold_from(gone[-1][0] + self.config.window_seconds)
            if failed is None:
                self.spilled += len(gone)
            else:
                self.lost += len(gone)
        return len(gone)

    def compact(self) -> bool:
        """After a burst of windows has gone (PendingWindows.compact): shrink the window totals' tables, let
        the caches of series ids and last decisions start over (the burst's entries are scattered through
        the heap; the series in use are looked up again once) and close idle database connections (their
        page caches). True if it did."""
        with self._flush_lock:
            if not self._pending.compact():
                return False
            self._series_ids.clear()
            self._decisions.clear()
        self.db.close_idle()
        return True

    def rollup(self, now: float | None = None) -> dict[str, int]:
        """Rebuild minute and hour buckets that ended and changed; return buckets rebuilt per tier."""
        with self.db.write(exclusive="rollup") as conn:
            return rollup(conn, self.tiers, self._now(now))

    def pack(self, now: float | None = None, max_hours: int = 24) -> dict[str, int]:
        """Pack up to ``max_hours`` ended, rolled-up hours of each fine tier into blocks (storage/pack.py);
        return blocks written per tier. Each range of series is its own transaction."""
        return pack_due(self.db, self.tiers, self._now(now), self.config.late_seconds + 60, max_hours)

    def prune(self, now: float | None = None) -> dict[str, int]:
        """Apply retention now; return rows deleted per table (on PostgreSQL, days of blocks dropped as
        ``<blocks table>_days``). Its own lock: rollups and packing go on meanwhile."""
        with self.db.write(exclusive="prune") as conn:
            deleted = prune(conn, self.tiers, self._now(now), self.config.retain_hours)
            deleted["load_hours"] = loads.prune(conn, int(self._now(now) - self.config.retain_hours))
        # Rollups churn the dirty marks; retention deletes whole days of rows (dropped partitions need nothing).
        self.db.reclaim(["dirty", *(t for t, n in deleted.items() if n and not t.endswith("_days"))])
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
                self._decisions.put(key, events.last_decision(conn, *key))
            if decision.same_choice(self._decisions.get(key)):
                return False
            events.add_decision(conn, decision)
        self._decisions.put(key, decision)
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
        with self.db.read(scan=True) as conn:
            return stats(conn, query, self.tiers, self._clock())

    def versions(self) -> list[VersionSeen]:
        with self.db.read() as conn:
            return events.versions(conn)

    def history(self, since: float | None = None, until: float | None = None,
                domain: str | None = None) -> History:
        """Acceptance per domain over time with speculation-off periods, alerts and target versions."""
        with self.db.read(scan=True) as conn:
            return read_history(conn, self.tiers, self._clock(), since, until, domain)

    def _resume_after(self) -> int:
        """The end of the latest window this pod stored at or after now (0 if none)."""
        with self.db.read() as conn:
            last = last_window_of(conn, self.config.pod, floor_to(self._clock(), self.config.window_seconds))
        return 0 if last is None else last + self.config.window_seconds

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now
