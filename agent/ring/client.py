"""RingClient: the decoding process's end of the step ring (agent/ring/layout.py), with a Sidecar's hot-path
interface: ``record(step)``, ``decide(domain)``, ``stop_drafting(domain)`` and ``pod``, so
``agent.decoding.steer.generate_with(client, decoder, ...)`` decodes steered by a sidecar in another process
(``specwatch serve --ring NAME``).

``record`` packs the step into the next slot and returns; ``decide`` reads the domain's latest decision,
which the sidecar rewrites after each batch it takes (so it may be a step or two behind, as with background
ingest). Until the sidecar has published one for a domain (its first steps, or no sidecar attached),
``decide`` answers K = ``fallback``.

Bad records: what the ring cannot carry (a lookahead over its kmax, a list of the wrong length, a value of
the wrong type, a non-prefix mask, strings over their limits, and the aggregate fields: ``steps`` other than
1, ``drafted``, ``seconds``, ``pool``) raises RecordError naming the field, and nothing is written. The ring
carries per-step records of an in-process decoder; per-request aggregates go over ``POST /v1/steps``.
Values it can carry are validated by the sidecar like every record (a bad one is logged there and counted
in its ``rejected``).

A full ring (the sidecar behind) makes ``record`` wait, up to ``full_wait`` seconds; a ring whose reader
has not looked for ``dead_after`` seconds (none attached, or it died) is not waited for. Either way a record
that finds no room is dropped and counted (``dropped``, also in the ring's header for the sidecar): the
decoder never stalls because its monitor is down.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from dataclasses import dataclass, field

from agent.ring import layout as rl
from policies.base import Decision, StopDrafting
from policies.confidence_state import stop_rule
from specwatch_core.records import RecordError, StepRecord
from specwatch_core.records import _check_text

log = logging.getLogger(__name__)
# module constants as globals: one dictionary look-up each on the hot path instead of two
_U64, _NO_NAME, _SLOT_AT, _REQUEST_AT = rl.U64, rl.NO_NAME, rl.SLOT_AT, rl.REQUEST_AT


class _Stop:
    """A domain's stop-rule state as last read from the ring (what ``stop_rule`` reads at call time)."""

    __slots__ = ("threshold", "table", "limits")

    def __init__(self):
        self.threshold, self.table, self.limits = 1.0, None, None


@dataclass
class _Entry:
    offset: int
    seq: int = -1
    table_seq: int = 0
    decision: Decision | None = None
    rule: str | None = None  # None: the policy has no stop rule
    stop: _Stop = field(default_factory=_Stop)


class RingClient:
    """See the module docstring. ``name``: the ring's shared-memory name (the sidecar attaches to it)."""

    def __init__(self, name: str = "specwatch", *, layout: rl.Layout | None = None, pod: str | None = None,
                 fallback: int = 0, full_wait: float = 0.5, dead_after: float = 5.0):
        self.layout = layout or rl.Layout()
        if type(fallback) is not int or not 0 <= fallback <= self.layout.kmax:
            raise ValueError(f"fallback: an integer in 0..{self.layout.kmax}, got {fallback!r}")
        if pod is not None:
            _check_text("pod", pod, 128)
        self.name, self.pod = name, pod
        self.full_wait, self.dead_after = full_wait, dead_after
        self.shm = rl.create(name, self.layout)
        self.buf = self.shm.buf
        self._lock = threading.Lock()
        self._names: dict[str, int] = {}
        self._ids: dict[tuple, tuple[int, int, int, int]] = {}  # (domain, target, draft, pod) -> name indexes
        self._kinds: dict[tuple, tuple[struct.Struct, int, list[int]]] = {}  # kind -> packer, flags, mask
        self._next = 0  # records written
        self._free = self.layout.slots  # slots known to be free before the read counter is looked at again
        self._lists = [struct.Struct(f"<{k}d") for k in range(self.layout.kmax + 2)]
        # the layout's offsets, as plain attributes (the hot path reads them every record)
        self._kmax, self._nslots = self.layout.kmax, self.layout.slots
        self._slot0, self._slot_size = self.layout.slots_at, self.layout.slot_size
        self._request: tuple[str | None, bytes] = (None, b"")
        self._entries: dict[str, _Entry] = {}
        self._scanned = 0  # decision entries looked at
        self._decisions: dict[int, Decision] = {}
        self.fallback = Decision(fallback, fallback > 0, f"K={fallback}: no decision from the sidecar yet", "sidecar")
        self.dropped = 0
        self.waited = 0  # records that found the ring full and waited for the sidecar

    # -- record ------------------------------------------------------------------------------------------
    def record(self, step: StepRecord) -> None:
        """Queue one step for the sidecar (see the module docstring for what is refused and when)."""
        if (step.steps != 1 or step.drafted is not None or step.seconds is not None or step.pool is not None
                or step.prompt_seconds is not None or step.load is not None):
            raise _aggregate(step)
        with self._lock:
            i = self._next
            if not self._free and not self._room(i):
                self._drop()
                return
            k, a, mask = step.lookahead, step.accepted, step.accepted_mask
            expected, confidence, ts = step.expected_acceptance, step.draft_confidence, step.timestamp
            kind = (k, a, mask is None, expected is None, confidence is None, ts is None)
            try:  # the common case: strings and kind of record seen before, one look-up each
                ids = self._ids[(step.domain, step.target_version, step.draft_version, step.pod)]
                packer, flags, valid_mask = self._kinds[kind]
            except (KeyError, TypeError):
                ids, (packer, flags, valid_mask) = self._learn(step, kind)
            if mask is not None and mask != valid_mask:
                raise _invalid(step, "accepted_mask", "must be `accepted` ones followed by zeros")
            buf = self.buf
            offset = self._slot0 + (i % self._nslots) * self._slot_size
            rid = step.request_id
            try:
                packer.pack_into(buf, offset + _SLOT_AT, *ids, k, a, step.emitted, flags, step.draft_seconds,
                                 step.verify_seconds, ts or 0.0, 0 if rid is None else self._request_length(rid),
                                 *(expected or ()), *(confidence or ()))
            except (struct.error, TypeError) as exc:  # a value of the wrong type, or a list of the wrong length
                self._check_open()
                raise _invalid(step, "record", str(exc)) from None
            if rid is not None:  # after the packing, which zeroes the request id's bytes
                data = self._request[1]
                buf[offset + _REQUEST_AT:offset + _REQUEST_AT + len(data)] = data
            _U64.pack_into(buf, offset, i + 1)  # the stamp, last: the slot is now the reader's
            self._next = i + 1
            self._free -= 1

    def _learn(self, step: StepRecord, kind: tuple) -> tuple[tuple[int, int, int, int], tuple]:
        """First record with these strings or of this kind: check and intern the strings, make the packer of
        the kind (lookahead, accepted, which optional fields are there). RecordError naming the field."""
        self._check_open()
        ids = (self._intern(step.domain, "domain", 64), self._intern(step.target_version, "target_version", 128),
               self._intern(step.draft_version, "draft_version", 128),
               _NO_NAME if step.pod is None else self._intern(step.pod, "pod", 128))
        k, a, no_mask, no_expected, no_confidence, no_ts = kind
        if type(k) is not int or not 0 <= k <= self._kmax:
            raise RecordError("lookahead", f"must be an integer in 0..{self._kmax} (the ring's kmax), got {k!r}")
        if type(a) is not int or not 0 <= a <= k:
            raise _invalid(step, "accepted", f"must be 0..{k}, got {a!r}")
        made = self._kinds.get(kind)
        if made is None:
            layout = ["<", rl.SLOT.format.lstrip("<"), f"{rl.LISTS_AT - rl.SLOT_AT - rl.SLOT.size}x"]
            if not no_expected:
                layout.append(f"{k}d")
            if not no_confidence:
                layout.append(f"{8 * (self._kmax - (0 if no_expected else k))}x{k}d")
            flags = ((0 if no_mask else rl.HAS_MASK) | (0 if no_expected else rl.HAS_EXPECTED)
                     | (0 if no_confidence else rl.HAS_CONFIDENCE) | (0 if no_ts else rl.HAS_TIMESTAMP))
            made = (struct.Struct("".join(layout)), flags, [1] * a + [0] * (k - a))
            if len(self._kinds) < 65_536:  # bounded: kinds are at most (kmax + 1)^2 x 16 anyway
                self._kinds[kind] = made
        key = (step.domain, step.target_version, step.draft_version, step.pod)
        if len(self._ids) < 65_536:
            self._ids[key] = ids
        return ids, made

    def _check_open(self) -> None:
        if self.buf is None:
            raise RuntimeError(f"step ring {self.name!r} is closed")

    def _room(self, i: int) -> bool:
        """Whether slot ``i`` is free, waiting up to ``full_wait`` while a live reader catches up."""
        self._check_open()
        deadline = None
        while True:
            self._free = self.layout.slots - (i - rl.U64.unpack_from(self.buf, rl.READ)[0])
            if self._free > 0:
                return True
            if time.time() - rl.F64.unpack_from(self.buf, rl.BEAT)[0] > self.dead_after:
                return False  # no reader, or a dead one: do not stall decoding
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.full_wait
                self.waited += 1
            if now >= deadline:
                return False
            time.sleep(0.0005)

    def _drop(self) -> None:
        self.dropped += 1
        self._publish_dropped()
        if self.dropped == 1 or self.dropped % 10_000 == 0:
            log.warning("step ring %r is full and its reader %s: %d record(s) dropped", self.name,
                        "is behind" if self._reader_alive() else "is not running", self.dropped)

    def _publish_dropped(self) -> None:
        """The drop count in the ring's header, where the sidecar exports it."""
        rl.U64.pack_into(self.buf, rl.DROPPED, self.dropped)

    def _reader_alive(self) -> bool:
        return time.time() - rl.F64.unpack_from(self.buf, rl.BEAT)[0] <= self.dead_after

    def _intern(self, text, field_name: str, limit: int) -> int:
        """The name index of ``text``, written to the ring's name table on first use."""
        index = self._names.get(text) if type(text) is str else None
        if index is not None:
            return index
        _check_text(field_name, text, limit)
        index = len(self._names)
        if index >= self.layout.names:
            raise RecordError(field_name, f"the ring's name table is full ({self.layout.names} distinct domain, "
                                          "version and pod strings); make the ring with more names")
        data = text.encode()
        at = self.layout.names_at + index * rl.NAME_SIZE
        struct.pack_into(f"<H{len(data)}s", self.buf, at, len(data), data)
        rl.U64.pack_into(self.buf, rl.NAMES_WRITTEN, index + 1)
        self._names[text] = index
        return index

    def _request_length(self, request_id) -> int:
        """Bytes of ``request_id`` in UTF-8 (kept in ``_request`` for the slot; the last one is reused)."""
        last, data = self._request
        if request_id is not last:
            _check_text("request_id", request_id, 128)
            data = request_id.encode()
            if len(data) > rl.REQUEST_BYTES:
                raise RecordError("request_id", f"longer than {rl.REQUEST_BYTES} bytes of UTF-8 (the ring's limit)")
            self._request = (request_id, data)
        return len(data)

    # -- decide --------------------------------------------------------------------------------------------
    def decide(self, domain: str) -> Decision:
        """The sidecar's latest decision for ``domain`` (``fallback`` until it has published one)."""
        entry = self._entries.get(domain) or self._find(domain)
        if entry is None:
            return self.fallback
        seq = rl.U64.unpack_from(self.buf, entry.offset)[0]
        if seq != entry.seq:
            self._refresh(entry, seq)
        return entry.decision or self.fallback

    def stop_drafting(self, domain: str) -> StopDrafting | None:
        """The domain's stop rule, applied here on the state the sidecar published (None: no rule known)."""
        entry = self._entries.get(domain) or self._find(domain)
        if entry is None:
            return None
        self.decide(domain)
        return None if entry.rule is None else stop_rule(entry.stop, entry.rule, self.layout.bins)

    def _find(self, domain: str) -> _Entry | None:
        """Look through decision entries the sidecar added since the last look."""
        used = rl.U64.unpack_from(self.buf, rl.ENTRIES_USED)[0]
        while self._scanned < min(used, self.layout.entries):
            offset = self.layout.entry(self._scanned)
            length = rl.ENTRY.unpack_from(self.buf, offset)[4]
            name = bytes(self.buf[offset + rl.DOMAIN_AT:offset + rl.DOMAIN_AT + length]).decode()
            self._entries[name] = _Entry(offset)
            self._scanned += 1
        return self._entries.get(domain)

    def _refresh(self, entry: _Entry, seq: int) -> None:
        """Copy a changed entry (a seqlock: an entry being rewritten is read again on the next decide)."""
        if seq & 1:
            return
        buf, layout, offset = self.buf, self.layout, entry.offset
        _, table_seq, k, flags, _, n_limits, threshold = rl.ENTRY.unpack_from(buf, offset)
        limits = list(self._lists[n_limits].unpack_from(buf, offset + rl.LIMITS_AT)) if flags & rl.HAS_TABLE \
            else None
        if rl.U64.unpack_from(buf, offset)[0] != seq:
            return
        stop = entry.stop
        if flags & rl.HAS_TABLE and table_seq != entry.table_seq:
            if table_seq & 1:
                return
            at = layout.table_at(offset)
            table = list(struct.unpack_from(f"<{layout.bins + 1}d", buf, at))
            if rl.U64.unpack_from(buf, offset + 8)[0] != table_seq:
                return
            stop.table, entry.table_seq = table, table_seq
        stop.threshold = threshold
        stop.limits = limits if stop.table is not None else None  # never limits without their table
        entry.rule = None if not flags & rl.HAS_STOP else "gain" if flags & rl.GAIN else "roc"
        decision = self._decisions.get(k)
        if decision is None:
            decision = self._decisions[k] = Decision(k, k > 0, f"K={k} from the sidecar (ring {self.name!r})",
                                                     "sidecar")
        entry.decision, entry.seq = decision, seq

    # -- lifecycle -----------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Records written that the sidecar has not read yet."""
        return self._next - rl.U64.unpack_from(self.buf, rl.READ)[0]

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until the sidecar has read every record written; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while self.pending > 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)
        return True

    def close(self) -> None:
        """Release and remove the ring (a sidecar attached finishes reading what is in it)."""
        buf, self.buf = self.buf, None
        del buf
        self.shm.close()
        rl.unlink(self.shm, self.name)

    def __enter__(self) -> "RingClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _aggregate(step: StepRecord) -> RecordError:
    for name, value in (("steps", step.steps != 1), ("drafted", step.drafted), ("seconds", step.seconds),
                        ("pool", step.pool), ("prompt_seconds", step.prompt_seconds),
                        ("load", step.load)):
        if value:
            break
    else:  # a zero, still not carried
        name = next(n for n in ("drafted", "seconds", "prompt_seconds") if getattr(step, n) is not None)
    return RecordError(name, "the step ring carries per-step records only (steps 1, no drafted, seconds, pool, "
                             "prompt_seconds or load); send aggregates with POST /v1/steps")


def _invalid(step: StepRecord, field_name: str, message: str) -> RecordError:
    """The record's own first error (naming its field) when it has one, else ``field_name: message``."""
    try:
        step.validate()
    except RecordError as exc:
        return exc
    return RecordError(field_name, message)
