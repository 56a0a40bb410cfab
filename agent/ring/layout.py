"""The step ring: a shared-memory segment that carries StepRecords from a decoding process to the sidecar,
and the sidecar's decisions back. This module holds only its layout and how to open it.

The decoding process (agent/ring/client.py) creates the segment and is its only writer of records; the
sidecar process (agent/ring/reader.py) attaches, consumes records and is the only writer of decisions.
So the decoding thread's share of the data path is packing one record into a slot (no lock, no system
call, no wake-up), and everything else runs in the sidecar's process, on its own core.

Layout (little-endian; offsets in bytes):
- header (256): magic, format, kmax, slots, slot size, names capacity, decision entries, bins, a nonce
  (a new segment under the same name has a new one), then the counters: records read (reader), the
  reader's heartbeat (time.time() of its last look), names written and records dropped (client), decision
  entries in use (reader).
- names: ``names`` entries of NAME_SIZE, each u16 length + UTF-8: the domain, version and pod strings a
  slot refers to by index (interned by the client: each is written once, before the first slot using it).
- slots: ``slots`` records of ``slot_size``. A slot's first 8 bytes, its stamp, are written last: the
  slot's sequence number + 1. The reader takes slot i only once its stamp says i + 1.
- decisions: ``entries`` entries, one per domain, written by the reader: a sequence number (bumped after
  each write), the table's own sequence number (odd while the table is being rewritten: a seqlock), the
  domain, K, flags, the stop rule's threshold, its per-position limits and calibration table.

Ordering: the writer of a slot (or table) stores its payload before its stamp (sequence number), and the
reader loads the stamp before the payload; x86-64 keeps stores and loads in program order, which this
relies on. On weakly ordered CPUs (ARM) a torn decision table is possible, caught by the seqlock in most
cases; a torn record is caught by the sidecar's validation.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

MAGIC = b"SPECRING"
FORMAT = 1
HEADER_SIZE = 256
NAME_SIZE = 520  # u16 length + up to 128 characters of UTF-8 (512 bytes), padded
NAME_BYTES = NAME_SIZE - 2
DOMAIN_BYTES = 256  # up to 64 characters of UTF-8
REQUEST_BYTES = 128  # a request id's UTF-8 bytes a slot carries
NO_NAME = 0xFFFF  # a slot's pod when there is none
MAX_NAMES = 4096
_created: set[str] = set()  # rings this process created (and its resource tracker unlinks if it must)

# header
HEAD = struct.Struct("<8sIIIIIIIQ")  # magic, format, kmax, slots, slot size, names, entries, bins, nonce
READ, BEAT, NAMES_WRITTEN, DROPPED, ENTRIES_USED = 48, 56, 64, 72, 80
U64 = struct.Struct("<Q")
F64 = struct.Struct("<d")

# slot: stamp, then domain, target, draft, pod (name indexes), lookahead, accepted, emitted, flags,
# draft seconds, verify seconds, timestamp, request id length; the request id; then the per-position lists
SLOT = struct.Struct("<HHHHHHHHdddH")
SLOT_AT = 8
REQUEST_AT = SLOT_AT + SLOT.size
LISTS_AT = (REQUEST_AT + REQUEST_BYTES + 7) // 8 * 8
HAS_MASK, HAS_EXPECTED, HAS_CONFIDENCE, HAS_TIMESTAMP = 1, 2, 4, 8

# decision entry: sequence, table sequence, then lookahead, flags, domain length, limits count, threshold;
# the domain; the limits; the table
ENTRY = struct.Struct("<QQHHHHd")
DOMAIN_AT = ENTRY.size
LIMITS_AT = DOMAIN_AT + DOMAIN_BYTES
SPECULATE, HAS_STOP, GAIN, HAS_TABLE = 1, 2, 4, 8


@dataclass(frozen=True)
class Layout:
    """Sizes and offsets of a ring; see the module docstring."""

    kmax: int = 16
    slots: int = 16_384
    names: int = 1024
    entries: int = 128
    bins: int = 1000

    def __post_init__(self):
        for name, low, high in (("kmax", 1, 64), ("slots", 2, 1 << 24), ("names", 4, MAX_NAMES),
                                ("entries", 1, 4096), ("bins", 1, 100_000)):
            value = getattr(self, name)
            if type(value) is not int or not low <= value <= high:
                raise ValueError(f"ring {name}: must be an integer in {low}..{high}, got {value!r}")

    @property
    def slot_size(self) -> int:
        return (LISTS_AT + 16 * self.kmax + 63) // 64 * 64

    @property
    def entry_size(self) -> int:
        return (LIMITS_AT + 8 * (self.kmax + 1) + 8 * (self.bins + 1) + 63) // 64 * 64

    @property
    def names_at(self) -> int:
        return HEADER_SIZE

    @property
    def slots_at(self) -> int:
        return (self.names_at + self.names * NAME_SIZE + 63) // 64 * 64

    @property
    def entries_at(self) -> int:
        return self.slots_at + self.slots * self.slot_size

    @property
    def size(self) -> int:
        return self.entries_at + self.entries * self.entry_size

    def slot(self, index: int) -> int:
        """Offset of the slot that holds record number ``index``."""
        return self.slots_at + (index % self.slots) * self.slot_size

    def entry(self, index: int) -> int:
        return self.entries_at + index * self.entry_size

    def table_at(self, entry: int) -> int:
        return entry + LIMITS_AT + 8 * (self.kmax + 1)


class RingMissing(FileNotFoundError):
    """No ring of that name (the decoding process creates it)."""


def create(name: str, layout: Layout) -> shared_memory.SharedMemory:
    """A new, zeroed ring named ``name`` (an older segment of that name is replaced)."""
    check_name(name)
    try:
        old = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        pass
    else:  # a decoding process that died without closing: its ring is ours to replace
        old.close()
        old.unlink()
    shm = shared_memory.SharedMemory(name=name, create=True, size=layout.size)
    _created.add(name)
    shm.buf[:HEADER_SIZE] = bytes(HEADER_SIZE)
    HEAD.pack_into(shm.buf, 0, MAGIC, FORMAT, layout.kmax, layout.slots, layout.slot_size, layout.names,
                   layout.entries, layout.bins, int.from_bytes(os.urandom(8), "little"))
    return shm


def attach(name: str) -> tuple[shared_memory.SharedMemory, Layout, int]:
    """Open the ring ``name`` made by a decoding process: (segment, layout, nonce). RingMissing if absent;
    ValueError if the segment is not a ring of this format."""
    check_name(name)
    try:
        shm = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        raise RingMissing(f"no step ring {name!r} (the decoding process creates it)") from None
    # Python 3.11 registers attached segments with the resource tracker, which would unlink the decoding
    # process's ring when this process exits (bpo-39959); only the creator may unlink it.
    if name not in _created:  # the creator's own registration (a test running both ends) must stay
        resource_tracker.unregister(shm._name, "shared_memory")  # noqa: SLF001 (the documented workaround)
    try:
        magic, fmt, kmax, slots, slot_size, names, entries, bins, nonce = HEAD.unpack_from(shm.buf, 0)
        if magic != MAGIC or fmt != FORMAT:
            raise ValueError(f"shared memory {name!r} is not a specwatch step ring (format {FORMAT})")
        layout = Layout(kmax=kmax, slots=slots, names=names, entries=entries, bins=bins)
        if layout.slot_size != slot_size or layout.size > shm.size:
            raise ValueError(f"step ring {name!r}: inconsistent header")
    except BaseException:
        shm.close()
        raise
    return shm, layout, nonce


def unlink(shm: shared_memory.SharedMemory, name: str) -> None:
    """Remove the ring the creator made (it stays mapped wherever it is attached)."""
    _created.discard(name)
    try:
        shm.unlink()
    except FileNotFoundError:
        pass


def nonce_of(name: str) -> int | None:
    """The nonce of the ring now under ``name`` (None if there is none)."""
    try:
        shm, _, nonce = attach(name)
    except (RingMissing, ValueError):
        return None
    shm.close()
    return nonce


def beat(buf, now: float | None = None) -> None:
    F64.pack_into(buf, BEAT, time.time() if now is None else now)


def check_name(name: str) -> None:
    """ValueError unless ``name`` can name a shared-memory segment."""
    if not isinstance(name, str) or not name or len(name) > 200 or "/" in name or not name.isprintable():
        raise ValueError(f"ring name: printable text without '/', 1..200 characters, got {name!r}")
