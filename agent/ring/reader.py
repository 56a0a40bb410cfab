"""RingReader: the sidecar's end of the step ring (agent/ring/layout.py).

A thread in the sidecar's process looks at the ring every ``poll`` seconds (backing off to ``IDLE_POLL``
while nothing comes), takes every record the decoding process has written since, feeds them to the Sidecar
(``Sidecar.take``: checked one by one, then window sums, metrics, drift watch, policy) and publishes the
next decision, and the stop rule's state, of each domain it fed. It waits for the ring to appear (the
decoding process creates it), and when a new ring replaces it under the same name (the decoding process
restarted) it reads what is left in the old one, then moves to the new one. Where to start reading is
kept in the ring itself, so a restarted sidecar goes on where the last one stopped.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent.ring import layout as rl
from specwatch_core.records import StepRecord

log = logging.getLogger(__name__)

IDLE_POLL = 0.02  # seconds between looks once the ring has stayed empty a while
RECHECK = 1.0  # seconds between checks that the ring under the name is still the one attached


@dataclass
class _Entry:
    """A domain's decision entry: where it is, its sequence numbers, and what was last written there
    (K, flags, threshold; the limits and table by identity: policies replace them on a refit)."""

    offset: int
    seq: int = 0
    table_seq: int = 0
    state: tuple | None = None
    limits: Any = None
    table: Any = None


class RingReader:
    """See the module docstring. ``sidecar``: an agent.hub.sidecar.Sidecar (or anything with ``take``,
    ``decide`` and ``stop_state``)."""

    def __init__(self, sidecar: Any, name: str = "specwatch", *, poll: float = 0.001, batch: int = 4096):
        rl.check_name(name)
        if not 0 < poll <= 1:
            raise ValueError(f"poll must be in (0, 1] seconds, got {poll!r}")
        self.sidecar, self.name, self.poll, self.batch = sidecar, name, poll, batch
        self.shm = self.buf = self.layout = None
        self.nonce = None
        self._names: list[str] = []
        self._entries: dict[str, _Entry] = {}  # domain -> its decision entry in the attached ring
        self._unlisted: set[str] = set()  # domains that found no entry (warned once)
        self._warned_bins = False
        self.records = 0  # records read
        self.corrupt = 0  # slots that named no known string (skipped)
        self._dropped = 0  # the writer's drop count when last looked at
        self._checked = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- status -----------------------------------------------------------------------------------------
    @property
    def attached(self) -> bool:
        return self.buf is not None

    @property
    def dropped(self) -> int:
        """Records the decoding process dropped for want of room (counted by it, in the ring)."""
        buf = self.buf
        if buf is not None:
            self._dropped = rl.U64.unpack_from(buf, rl.DROPPED)[0]
        return self._dropped

    @property
    def status(self) -> str:
        if not self.attached:
            return f"waiting for the decoding process to create ring {self.name!r}"
        return f"attached to ring {self.name!r}: {self.records} records read, {self.dropped} dropped by the writer"

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the loop ---------------------------------------------------------------------------------------
    def start(self) -> "RingReader":
        self._thread = threading.Thread(target=self._run, name="specwatch-ring", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Read what the ring holds now, then stop the thread and detach."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.alive:
            log.error("ring reader did not stop within %.0f s", timeout)
            return
        self._detach()

    def _run(self) -> None:
        idle = self.poll
        while True:
            try:
                got = self.poll_once()
            except Exception:  # keep reading: one bad batch must not stop the data path
                log.exception("ring %r: a batch failed", self.name)
                got = 0
            if got:
                idle = self.poll
                continue
            if self._stop.is_set():
                while self.poll_once():  # what the ring holds at the stop
                    pass
                return
            self._stop.wait(idle)
            idle = min(idle * 2, IDLE_POLL)

    def poll_once(self) -> int:
        """Attach if needed, take every record written so far (up to ``batch``); the number taken."""
        now = time.monotonic()
        if now - self._checked >= RECHECK or not self.attached:
            self._checked = now
            self._follow()
        return self._take() if self.attached else 0

    def _take(self) -> int:
        buf, layout = self.buf, self.layout
        rl.beat(buf)
        start = i = rl.U64.unpack_from(buf, rl.READ)[0]
        steps: list[StepRecord] = []
        while i - start < self.batch and rl.U64.unpack_from(buf, layout.slot(i))[0] == i + 1:
            step = self._unpack(layout.slot(i))
            if step is not None:
                steps.append(step)
            i += 1
        if i == start:
            return 0
        rl.U64.pack_into(buf, rl.READ, i)  # the slots are free again: the records are Python objects now
        self.records += i - start
        for domain in self.sidecar.take(steps):
            self._publish(domain)
        return i - start

    # -- records ----------------------------------------------------------------------------------------
    def _unpack(self, offset: int) -> StepRecord | None:
        buf, kmax = self.buf, self.layout.kmax
        d, t, v, p, k, a, e, flags, ds, vs, ts, rid = rl.SLOT.unpack_from(buf, offset + rl.SLOT_AT)
        names = self._names
        highest = max(d, t, v, p if p != rl.NO_NAME else 0)
        if highest >= len(names):
            self._load_names()
        if highest >= len(names) or k > kmax:
            self.corrupt += 1
            log.error("ring %r: a slot names no known string or has K over the ring's kmax; skipped (%d so far)",
                      self.name, self.corrupt)
            return None
        lists = self._lists[k]
        at = offset + rl.LISTS_AT
        return StepRecord(
            domain=names[d], lookahead=k, accepted=a, emitted=e, draft_seconds=ds, verify_seconds=vs,
            target_version=names[t], draft_version=names[v],
            accepted_mask=[1] * a + [0] * (k - a) if flags & rl.HAS_MASK else None,
            expected_acceptance=list(lists.unpack_from(buf, at)) if flags & rl.HAS_EXPECTED else None,
            draft_confidence=list(lists.unpack_from(buf, at + 8 * kmax)) if flags & rl.HAS_CONFIDENCE else None,
            timestamp=ts if flags & rl.HAS_TIMESTAMP else None,
            pod=None if p == rl.NO_NAME else names[p],
            request_id=bytes(buf[offset + rl.REQUEST_AT:offset + rl.REQUEST_AT + rid]).decode() if rid else None)

    def _load_names(self) -> None:
        buf, layout = self.buf, self.layout
        written = min(rl.U64.unpack_from(buf, rl.NAMES_WRITTEN)[0], layout.names)
        for index in range(len(self._names), written):
            at = layout.names_at + index * rl.NAME_SIZE
            length = min(struct.unpack_from("<H", buf, at)[0], rl.NAME_BYTES)
            self._names.append(bytes(buf[at + 2:at + 2 + length]).decode(errors="replace"))

    # -- decisions --------------------------------------------------------------------------------------
    def _publish(self, domain: str) -> None:
        """Write ``domain``'s next decision and stop-rule state into its entry (seqlocked), if it changed."""
        entry = self._entries.get(domain)
        new = entry is None
        if new:
            entry = self._new_entry(domain)
            if entry is None:
                return
        decision = self.sidecar.decide(domain)
        stop = self.sidecar.stop_state(domain)
        buf, layout, offset = self.buf, self.layout, entry.offset
        flags = threshold = 0
        limits = table = None
        if stop is not None:
            flags, threshold = rl.HAS_STOP | (rl.GAIN if stop.rule == "gain" else 0), stop.threshold
            if stop.limits is not None and stop.table is not None and stop.bins == layout.bins \
                    and layout.bins <= len(stop.table) <= layout.bins + 1 and len(stop.limits) <= layout.kmax + 1:
                flags |= rl.HAS_TABLE
                limits, table = stop.limits, stop.table
            elif stop.limits is not None and not self._warned_bins:
                self._warned_bins = True
                log.warning("ring %r: the stop rule's table (%d bins) does not fit the ring's (%d bins, "
                            "kmax %d); the decoder stops on the confidence threshold", self.name, stop.bins,
                            layout.bins, layout.kmax)
        state = (decision.lookahead, flags, threshold)
        if state == entry.state and limits is entry.limits and table is entry.table:
            return  # unchanged: the client's decide stays a single read
        entry.seq += 1  # odd: being written
        rl.U64.pack_into(buf, offset, entry.seq)
        if table is not None and table is not entry.table:
            entry.table_seq += 1
            rl.U64.pack_into(buf, offset + 8, entry.table_seq)
            # the rule reads table[-1] past the last bin: the ring's table always has that entry
            struct.pack_into(f"<{layout.bins + 1}d", buf, layout.table_at(offset), *table,
                             *table[-1:] * (layout.bins + 1 - len(table)))
            entry.table_seq += 1
        if limits is not None:
            struct.pack_into(f"<{len(limits)}d", buf, offset + rl.LIMITS_AT, *limits)
        length = rl.ENTRY.unpack_from(buf, offset)[4]
        rl.ENTRY.pack_into(buf, offset, entry.seq, entry.table_seq, decision.lookahead, flags, length,
                           0 if limits is None else len(limits), threshold)
        entry.seq += 1  # even: complete
        rl.U64.pack_into(buf, offset, entry.seq)
        entry.state, entry.limits, entry.table = state, limits, table
        if new:  # the client looks only at entries counted here
            rl.U64.pack_into(buf, rl.ENTRIES_USED, len(self._entries))

    def _new_entry(self, domain: str) -> _Entry | None:
        index = len(self._entries)
        data = domain.encode()
        if index >= self.layout.entries or len(data) > rl.DOMAIN_BYTES:
            if domain not in self._unlisted:
                self._unlisted.add(domain)
                log.warning("ring %r: no decision entry for domain %r; it decodes with the client's "
                            "fallback K", self.name, domain)
            return None
        entry = self._entries[domain] = _Entry(self.layout.entry(index))
        rl.ENTRY.pack_into(self.buf, entry.offset, 0, 0, 0, 0, len(data), 0, 0.0)
        self.buf[entry.offset + rl.DOMAIN_AT:entry.offset + rl.DOMAIN_AT + len(data)] = data
        return entry

    # -- attaching --------------------------------------------------------------------------------------
    def _follow(self) -> None:
        """Attach to the ring under the name, or move to a new one there once the old one is read out."""
        if self.attached:
            nonce = rl.nonce_of(self.name)
            if nonce is None or nonce == self.nonce:
                return
            while self._take():  # what the old ring still holds
                pass
            self._detach()
        try:
            shm, layout, nonce = rl.attach(self.name)
        except rl.RingMissing:
            return
        except ValueError as exc:
            log.error("%s", exc)
            return
        self.shm, self.buf, self.layout, self.nonce = shm, shm.buf, layout, nonce
        self._lists = [struct.Struct(f"<{k}d") for k in range(layout.kmax + 1)]
        self._names, self._entries = [], {}
        for index in range(min(rl.U64.unpack_from(shm.buf, rl.ENTRIES_USED)[0], layout.entries)):
            # a ring a previous sidecar published into: keep its entries and go on from their sequence numbers
            offset = layout.entry(index)
            seq, table_seq, _, _, length, _, _ = rl.ENTRY.unpack_from(shm.buf, offset)
            domain = bytes(shm.buf[offset + rl.DOMAIN_AT:offset + rl.DOMAIN_AT + length]).decode()
            self._entries[domain] = _Entry(offset, seq + (seq & 1), table_seq + (table_seq & 1))
        rl.beat(shm.buf)
        log.info("attached to step ring %r (kmax %d, %d slots)", self.name, layout.kmax, layout.slots)

    def _detach(self) -> None:
        if self.shm is None:
            return
        self.buf = None
        try:
            self.shm.close()
        except BufferError:  # a view still held somewhere: the mapping goes with the process
            pass
        self.shm = self.layout = None


class RingCollector(Collector):
    """The step ring's counts on /metrics (``specwatch serve --ring`` registers one beside the Metrics)."""

    def __init__(self, reader: RingReader):
        self._reader = reader

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        r = self._reader
        return [
            CounterMetricFamily("specwatch_ring_records_read", "Steps the sidecar read from the step ring.",
                                value=r.records),
            CounterMetricFamily("specwatch_ring_records_dropped",
                                "Steps the decoding process dropped because the step ring was full and the "
                                "sidecar was behind or not reading (counted by the decoding process).",
                                value=r.dropped),
            GaugeMetricFamily("specwatch_ring_attached", "1 while the sidecar is attached to its step ring, 0 "
                              "while it waits for the decoding process to create it.",
                              value=1.0 if r.attached else 0.0),
        ]
