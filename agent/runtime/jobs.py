"""The sidecar's periodic jobs on one APScheduler 3.11 BackgroundScheduler per process.

flush (1 s): closed windows and queued events to the database; rollup (1 min); retention (1 h); policy refit
(1 s, when the policy has fits to run off the hot path: they are what lets it follow a target update and
end a new domain's warm-up; a run fits only the domains that fell due, milliseconds each); alerts (15 s: pending -> firing, re-sends
every 60 s inside the alert manager); domains (30 s: evict idle domains, warm-start returning ones); fleet
(5 min, with an alert manager and a fleet check: this pod against its peers in the shared history, FleetOutlier). Every job: max_instances=1 (a slow run is never overlapped by the
next), coalesce (a backlog runs once), and a misfire grace of one interval (a run later than that is
superseded by the next one anyway), instead of APScheduler's default of 1 s that silently drops late runs.
The flush alone may have a second run start beside a running one: it starts no flush, but counts one that
has run ``stalled_after`` seconds (a database that does not answer) as timed out, once, and reports it as
the job's error, where APScheduler would warn of a skipped run every second.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from apscheduler.schedulers.background import BackgroundScheduler

from agent.hub.sidecar import Sidecar
from agent.runtime.options import Intervals
from agent.runtime.fleet import check_fleet

log = logging.getLogger(__name__)
STALLED_AFTER = 5.0  # seconds a flush may run before it counts as timed out (one takes milliseconds)

_running: "Jobs | None" = None  # one scheduler per process
_guard = threading.Lock()


class Jobs:
    """Owns the scheduler. ``start`` adds the jobs the sidecar has use for; ``shutdown`` waits for running
    jobs, then runs a final flush (open windows included) unless told not to. ``flush_timeouts``: flushes
    that ran ``stalled_after`` seconds."""

    def __init__(self, sidecar: Sidecar, intervals: Intervals | None = None, fleet: Any = None,
                 stalled_after: float = STALLED_AFTER):
        self.sidecar = sidecar
        self.stalled_after = stalled_after
        self.flush_timeouts = 0
        self._flushing = threading.Lock()
        self._flush_since: float | None = None  # monotonic start of the running flush
        self._stall_counted = False
        self.fleet = fleet  # an alerts.fleet.FleetCheck, or None
        self.intervals = intervals or Intervals()
        self.scheduler = BackgroundScheduler(timezone=timezone.utc, job_defaults={
            "coalesce": True, "max_instances": 1})
        self.errors: dict[str, str] = {}  # job -> last error (cleared by its next success)
        self.runs: dict[str, int] = {}

    def jobs(self) -> dict[str, tuple[float, Callable[[], object]]]:
        """The jobs this sidecar needs, by name: (interval, function)."""
        s, every = self.sidecar, self.intervals
        out: dict[str, tuple[float, Callable[[], object]]] = {
            "flush": (every.flush, self._flush), "rollup": (every.rollup, s.rollup), "prune": (every.prune, s.prune),
            "domains": (every.domains, s.tend_domains)}
        if s.can_refit:
            out["refit"] = (every.refit, s.refit)
        if s.alerts is not None:
            out["alerts"] = (every.alerts, s.tick_alerts)
            if self.fleet is not None:
                out["fleet"] = (every.fleet, lambda: check_fleet(s, self.fleet))
        return out

    def start(self) -> "Jobs":
        global _running
        with _guard:
            if _running is not None:
                raise RuntimeError("a sidecar scheduler is already running in this process")
            _running = self
        try:
            for name, (interval, fn) in self.jobs().items():
                # The first refit at once: from then on the policy leaves its fits to this job.
                first = {"next_run_time": datetime.now(timezone.utc)} if name == "refit" else {}
                self.scheduler.add_job(self._run, "interval", args=(name, fn), id=name, name=name,
                                       seconds=interval, misfire_grace_time=max(1, math.ceil(interval)),
                                       max_instances=2 if name == "flush" else 1, **first)
            self.scheduler.start()
        except BaseException:
            self._release()
            raise
        return self

    def shutdown(self, wait: bool = True, final_flush: bool = True) -> None:
        """Stop the scheduler (``wait``: let running jobs finish) and run the final flush."""
        try:
            if self.scheduler.running:
                self.scheduler.shutdown(wait=wait)
            if final_flush:
                self.sidecar.flush(math.inf)
        finally:
            self._release()

    @property
    def flush_running_seconds(self) -> float:
        """How long the running flush has run (0 when none runs)."""
        since = self._flush_since
        return 0.0 if since is None else time.monotonic() - since

    def _flush(self) -> None:
        if not self._flushing.acquire(blocking=False):
            if self.flush_running_seconds >= self.stalled_after:
                if not self._stall_counted:
                    self._stall_counted = True
                    self.flush_timeouts += 1
                raise Stalled(f"a flush has run over {self.stalled_after:g} s: the database does not answer "
                              f"(records stay in memory)")
            return
        try:
            self._flush_since, self._stall_counted = time.monotonic(), False
            self.sidecar.flush()
        finally:
            self._flush_since = None
            self._flushing.release()

    def _run(self, name: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as exc:  # keep the job scheduled; the next run retries (queued data stays queued)
            if self.errors.get(name) != str(exc):
                log.error("job %s failed: %s", name, exc)
            self.errors[name] = str(exc)
        else:
            self.errors.pop(name, None)
            self.runs[name] = self.runs.get(name, 0) + 1

    def _release(self) -> None:
        global _running
        with _guard:
            if _running is self:
                _running = None


class Stalled(RuntimeError):
    """The flush job found the previous flush still running past ``stalled_after``."""
