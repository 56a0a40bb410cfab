"""The step ring: records cross it unchanged, decisions and the stop rule come back, nothing stalls decoding."""

from __future__ import annotations

import math
import os
import random
import time
import uuid

import pytest

from agent.hub.sidecar import Sidecar
from agent.ring import layout as rl
from agent.ring.client import RingClient
from agent.ring.reader import RingReader
from policies.base import Decision
from policies.confidence import ConfidenceStop
from policies.fixed import Fixed
from policies.registry import make
from specwatch_core.records import RecordError, StepRecord
from ring_fakes import Taker, record_steered, rich_step, stored_and_sent
from sidecar_fakes import T0, Clock, open_store, step
from storage import StatsQuery


@pytest.fixture
def name():
    return f"specwatch-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(name):
    c = RingClient(name, layout=rl.Layout(kmax=8, slots=64, names=16, entries=4, bins=10), pod="p1")
    yield c
    c.close()


def test_records_cross_the_ring_unchanged_and_in_order(client, name):
    rng = random.Random(1)
    sent = [rich_step(i, rng) for i in range(150)]  # over two laps of the 64 slots
    taker = Taker()
    reader = RingReader(taker, name, batch=40)
    for i, s in enumerate(sent):
        client.record(s)
        if i % 30 == 29:
            while reader.poll_once():
                pass
    while reader.poll_once():
        pass
    assert [t.to_dict() for t in taker.taken] == [s.to_dict() for s in sent]
    assert client.dropped == 0 and client.pending == 0 and reader.records == 150
    reader.stop()


@pytest.mark.parametrize("field, change", [
    ("lookahead", dict(lookahead=9, accepted=0, accepted_mask=[0] * 9, expected_acceptance=None)),
    ("lookahead", dict(lookahead=2.0)),
    ("expected_acceptance", dict(expected_acceptance=[0.5] * 3)),
    ("accepted_mask", dict(accepted_mask=[1, 0, 1, 0])),
    ("domain", dict(domain="x" * 65)),
    ("target_version", dict(target_version="")),
    ("pod", dict(pod="bad\npod")),
    ("request_id", dict(request_id="é" * 100)),  # 200 bytes of UTF-8: over the slot's 128
    ("draft_seconds", dict(draft_seconds="0.1")),
    ("accepted", dict(accepted=[2])),
    ("expected_acceptance", dict(expected_acceptance=0.5)),
])
def test_what_the_ring_cannot_carry_is_refused_naming_the_field_and_nothing_is_written(client, name, field, change):
    good = step("code", 4, 2, T0)
    bad = StepRecord(**{**good.to_dict(), **change})
    with pytest.raises(RecordError) as err:
        client.record(bad)
    assert err.value.field == field
    client.record(good)
    taker = Taker()
    RingReader(taker, name).poll_once()
    assert [t.to_dict() for t in taker.taken] == [good.to_dict()]


def test_values_the_ring_carries_are_validated_by_the_sidecar(tmp_path, client, name):
    store = open_store(tmp_path, Clock())
    sidecar = Sidecar(store, make("heuristic", 8), clock=Clock())
    reader = RingReader(sidecar, name)
    client.record(step("code", 4, 2, T0, draft_s=-1.0))  # packs, but is no valid record
    client.record(step("code", 4, 3, T0))
    reader.poll_once()
    assert sidecar.rejected == 1
    sidecar.flush(math.inf)
    rows = store.stats(StatsQuery(by=("domain",))).rows
    assert [(r["domain"], r["steps"], r["accepted"]) for r in rows] == [("code", 1, 3)]
    sidecar.close()


def test_decisions_come_back_per_domain(client, name):
    taker = Taker()
    reader = RingReader(taker, name)
    assert client.decide("code").lookahead == 0  # the fallback: nothing published yet
    taker.ks = {"code": 5, "prose": 0}
    client.record(step("code", 4, 2, T0))
    client.record(step("prose", 4, 2, T0))
    reader.poll_once()
    assert client.decide("code") == Decision(5, True, "K=5 from the sidecar (ring %r)" % name, "sidecar")
    assert client.decide("prose").lookahead == 0 and not client.decide("prose").speculate
    taker.ks["code"] = 2
    client.record(step("code", 5, 5, T0))
    reader.poll_once()
    assert client.decide("code").lookahead == 2
    assert client.decide("unseen").lookahead == 0


def test_a_decision_being_rewritten_is_not_read(client, name):
    taker = Taker()
    reader = RingReader(taker, name)
    taker.ks = {"code": 4}
    client.record(step("code", 4, 2, T0))
    reader.poll_once()
    assert client.decide("code").lookahead == 4
    offset = reader._entries["code"].offset
    seq = rl.U64.unpack_from(reader.buf, offset)[0]
    rl.U64.pack_into(reader.buf, offset, seq + 1)  # odd: the sidecar is writing the entry
    struct_k = rl.ENTRY.unpack_from(reader.buf, offset)
    rl.ENTRY.pack_into(reader.buf, offset, seq + 1, struct_k[1], 7, *struct_k[3:])
    assert client.decide("code").lookahead == 4  # the old decision until the write completes
    rl.U64.pack_into(reader.buf, offset, seq + 2)
    assert client.decide("code").lookahead == 7


def fitted_confidence_sidecar(tmp_path, kmax: int = 8) -> Sidecar:
    """A real ConfidenceStop (gain rule) fitted on steps whose acceptance follows the draft's confidence."""
    policy = ConfidenceStop(Fixed(kmax, kmax=kmax), kmax=kmax, seed=0, min_pairs=50, refit_every=50, bins=10)
    sidecar = Sidecar(open_store(tmp_path, Clock()), policy, clock=Clock())
    rng = random.Random(0)
    for _ in range(120):
        conf = [rng.random() for _ in range(kmax)]
        a = next((i for i, c in enumerate(conf) if rng.random() > c), kmax)
        sidecar.record(StepRecord(domain="code", lookahead=kmax, accepted=a, emitted=a + 1, draft_seconds=0.001 * kmax,
                                  verify_seconds=0.004, target_version="t1", draft_version="d1",
                                  accepted_mask=[1] * a + [0] * (kmax - a), draft_confidence=conf, timestamp=T0))
    sidecar.refit()
    assert sidecar.stop_state("code").limits is not None, "the fixture must give a fitted gain rule"
    return sidecar


def decisions(rule, chains) -> list[list[bool]]:
    return [[rule(c, j + 1) for j, c in enumerate(chain)] for chain in chains]


def test_the_client_stops_drafting_exactly_where_the_policy_would(tmp_path, client, name):
    sidecar = fitted_confidence_sidecar(tmp_path)
    reader = RingReader(sidecar, name)
    assert client.stop_drafting("code") is None  # nothing published yet
    client.record(step("code", 4, 2, T0))
    reader.poll_once()
    rng = random.Random(2)
    chains = [[rng.random() for _ in range(8)] for _ in range(300)] + [[1.0] * 8, [0.0] * 8]
    want = decisions(sidecar.stop_drafting("code"), chains)
    assert decisions(client.stop_drafting("code"), chains) == want
    assert any(any(row) for row in want) and not all(all(row) for row in want), "the rule must matter here"
    # Power: a table shifted by one bin in the ring changes decisions, so the comparison would see it.
    entry = reader._entries["code"].offset
    table = list(sidecar.stop_state("code").table)
    shifted = table[1:] + table[-1:] * (reader.layout.bins + 1 - len(table) + 1)
    rl.U64.pack_into(reader.buf, entry + 8, rl.U64.unpack_from(reader.buf, entry + 8)[0] + 2)
    import struct
    struct.pack_into(f"<{reader.layout.bins + 1}d", reader.buf, reader.layout.table_at(entry), *shifted)
    rl.U64.pack_into(reader.buf, entry, rl.U64.unpack_from(reader.buf, entry)[0] + 2)
    assert decisions(client.stop_drafting("code"), chains) != want
    sidecar.close()


def test_without_a_live_reader_a_full_ring_drops_at_once_and_counts(name):
    with RingClient(name, layout=rl.Layout(kmax=8, slots=4), full_wait=5.0) as c:
        started = time.monotonic()
        for i in range(10):
            c.record(step("code", 4, 2, T0 + i))
        assert time.monotonic() - started < 4.0  # no reader has ever looked: nothing to wait for
        assert c.dropped == 6 and rl.U64.unpack_from(c.buf, rl.DROPPED)[0] == 6
        taker = Taker()
        RingReader(taker, name).poll_once()
        assert [t.timestamp for t in taker.taken] == [T0 + i for i in range(4)]  # the first four, in order


def test_a_live_reader_behind_gets_the_record_within_full_wait(name):
    with RingClient(name, layout=rl.Layout(kmax=8, slots=4), full_wait=5.0) as c:
        taker = Taker()
        reader = RingReader(taker, name, poll=0.05)
        reader.poll_once()  # attached: its heartbeat is fresh
        for i in range(4):
            c.record(step("code", 4, 2, T0 + i))
        reader.start()
        for i in range(4, 12):
            c.record(step("code", 4, 2, T0 + i))  # waits for room instead of dropping
        assert c.drain(5.0)
        reader.stop()
        assert c.dropped == 0 and [t.timestamp for t in taker.taken] == [T0 + i for i in range(12)]
        assert c.waited >= 1


def test_a_new_sidecar_goes_on_where_the_last_one_stopped(client, name):
    first, second = Taker(), Taker()
    for i in range(5):
        client.record(step("code", 4, 2, T0 + i))
    r1 = RingReader(first, name)
    r1.poll_once()
    r1.stop()
    for i in range(5, 9):
        client.record(step("code", 4, 2, T0 + i))
    RingReader(second, name).poll_once()
    assert [t.timestamp for t in first.taken + second.taken] == [T0 + i for i in range(9)]


def test_the_reader_reads_out_a_replaced_ring_then_follows_the_new_one(name):
    taker = Taker()
    reader = RingReader(taker, name)
    assert reader.poll_once() == 0 and not reader.attached  # waits for the decoding process
    old = RingClient(name, layout=rl.Layout(kmax=8, slots=16))
    old.record(step("code", 4, 2, T0))
    reader.poll_once()
    old.record(step("code", 4, 2, T0 + 1))  # not read yet when the decoding process restarts
    new = RingClient(name, layout=rl.Layout(kmax=8, slots=16))
    new.record(step("code", 4, 2, T0 + 2))
    reader._checked = 0.0  # the name's owner is checked once a second; now
    while reader.poll_once():
        pass
    assert [t.timestamp for t in taker.taken] == [T0, T0 + 1, T0 + 2]
    reader.stop()
    old.shm.close()
    new.close()


def test_sidecar_over_the_ring_stores_exactly_what_was_recorded(tmp_path, client, name):
    # A full ring waits for the live reader up to full_wait (0.5 s by default), then drops; a loaded machine
    # (a whole test run on 2 cores) once held the reader's thread longer. Exactness is what this test checks,
    # so the writer waits as long as the drain below.
    client.full_wait = 10.0
    store = open_store(tmp_path, Clock())
    sidecar = Sidecar(store, make("confidence-stop+switch", 8, 0), clock=Clock())
    reader = RingReader(sidecar, name, poll=0.001)
    reader.poll_once()  # attached before the first record: 400 records overrun 64 slots with no reader
    reader.start()
    sent = record_steered(client)
    assert client.drain(10.0)
    reader.stop()
    got, want = stored_and_sent(sidecar, store, sent)
    assert got == want and client.dropped == 0
    sidecar.close()


def test_a_closed_ring_says_so(name):
    c = RingClient(name, layout=rl.Layout(kmax=8, slots=4))
    c.close()
    with pytest.raises(RuntimeError, match="is closed"):
        c.record(step("code", 4, 2, T0))


def test_names_must_be_shared_memory_names():
    with pytest.raises(ValueError, match="ring name"):
        RingClient("a/b")
    with pytest.raises(rl.RingMissing):
        rl.attach(f"specwatch-absent-{os.getpid()}")


def test_stop_takes_every_record_written_before_it(client, name):
    taker = Taker()
    reader = RingReader(taker, name, poll=1.0, batch=2).start()  # looks once a second, two records a batch
    time.sleep(0.05)
    for i in range(9):
        client.record(step("code", 4, 2, T0 + i))
    reader.stop()
    assert [t.timestamp for t in taker.taken] == [T0 + i for i in range(9)] and not reader.attached


def test_ring_counts_are_exported_for_prometheus(client, name):
    from prometheus_client import CollectorRegistry, generate_latest

    from agent.ring.reader import RingCollector

    registry = CollectorRegistry()
    reader = RingReader(Taker(), name)
    registry.register(RingCollector(reader))
    assert b"specwatch_ring_attached 0.0" in generate_latest(registry)
    for i in range(3):
        client.record(step("code", 4, 2, T0 + i))
    reader.poll_once()
    client._drop()  # as a full ring with no reader would
    text = generate_latest(registry)
    assert b"specwatch_ring_records_read_total 3.0" in text
    assert b"specwatch_ring_records_dropped_total 1.0" in text and b"specwatch_ring_attached 1.0" in text
