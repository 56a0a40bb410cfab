"""DeferredRingClient: record only queues; a packer thread fills the ring. Same records, same order, the
refusals and drops counted instead of raised, nothing lost at close, the decoding thread never waits."""

from __future__ import annotations

import logging
import random
import time
import uuid

import pytest

from agent.hub.sidecar import Sidecar
from agent.ring import layout as rl
from agent.ring.deferred import DeferredRingClient
from agent.ring.reader import RingReader
from policies.registry import make
from specwatch_core.records import StepRecord
from ring_fakes import Taker, record_steered, rich_step, stored_and_sent
from sidecar_fakes import T0, Clock, open_store, step

SMALL = rl.Layout(kmax=8, slots=64, names=16, entries=4, bins=10)


@pytest.fixture
def name():
    return f"specwatch-test-{uuid.uuid4().hex[:12]}"


def read_all(reader: RingReader) -> None:
    while reader.poll_once():
        pass


def test_records_cross_unchanged_and_in_order(name):
    rng = random.Random(1)
    sent = [rich_step(i, rng) for i in range(150)]  # over two laps of the 64 slots
    with DeferredRingClient(name, layout=SMALL, pod="p1") as client:
        taker = Taker()
        reader = RingReader(taker, name, poll=0.001)
        reader.poll_once()  # attached: a full ring waits for it
        reader.start()
        for s in sent:
            client.record(s)
        assert client.drain(10.0) and client.pending == 0
        reader.stop()
        assert [t.to_dict() for t in taker.taken] == [s.to_dict() for s in sent]
        assert client.dropped == client.queue_dropped == client.rejected == 0
        assert client.cpu_seconds > 0


def test_refusals_are_counted_and_logged_naming_the_field_and_the_rest_goes_on(name, caplog):
    good = [step("code", 4, 2, T0 + i) for i in range(3)]
    bad_k = StepRecord(**{**good[0].to_dict(), "lookahead": 9, "accepted": 0, "expected_acceptance": None})
    bad_type = StepRecord(**{**good[0].to_dict(), "draft_seconds": "0.1"})
    taker = Taker()
    with caplog.at_level(logging.WARNING, logger="agent.ring.deferred"), \
            DeferredRingClient(name, layout=SMALL) as client:
        reader = RingReader(taker, name, poll=0.001).start()
        for s in (good[0], bad_k, good[1], bad_type, {"domain": "code"}, good[2]):
            client.record(s)  # never raises on the decoding thread
        assert client.drain(5.0)
        reader.stop()
        assert [t.to_dict() for t in taker.taken] == [g.to_dict() for g in good]
        assert client.rejected == 3
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "lookahead" in logged and "draft_seconds" in logged and "not a StepRecord" in logged


def test_close_packs_what_is_queued(name):
    taker = Taker()
    client = DeferredRingClient(name, layout=SMALL, poll=0.5)  # the packer sleeps long between looks
    reader = RingReader(taker, name)
    reader.poll_once()
    for i in range(40):
        client.record(step("code", 4, 2, T0 + i))
    client.close()
    read_all(reader)
    reader.stop()
    assert [t.timestamp for t in taker.taken] == [T0 + i for i in range(40)]
    with pytest.raises(RuntimeError, match="is closed"):
        client.record(step("code", 4, 2, T0))


def test_a_stalled_packer_drops_at_the_queue_without_making_decoding_wait(name):
    layout = rl.Layout(kmax=8, slots=4)
    with DeferredRingClient(name, layout=layout, full_wait=30.0, max_queued=3) as client:
        taker = Taker()
        reader = RingReader(taker, name, poll=0.01)
        reader.poll_once()  # a live reader that does not read: the packer waits for room
        deadline = time.monotonic() + 5.0
        for i in range(5):  # one at a time (the queue holds 3): the packer fills the ring with 0..3 and
            client.record(step("code", 4, 2, T0 + i))  # then holds step 4, waiting for room
            while client._queue and time.monotonic() < deadline:
                time.sleep(0.01)
        started = time.monotonic()
        for i in range(5, 14):
            client.record(step("code", 4, 2, T0 + i))
        assert time.monotonic() - started < 5.0  # a packer waiting 30 s for room did not hold the decoder
        # the packer holds step 4, waiting; 5, 6, 7 are queued; 8..13 are dropped at the queue
        assert client.queue_dropped == 6 and client.dropped == 0
        reader.start()
        assert client.drain(10.0)
        reader.stop()
        assert [t.timestamp for t in taker.taken] == [T0 + i for i in range(8)]
        assert rl.U64.unpack_from(client.buf, rl.DROPPED)[0] == 6  # the sidecar exports it


def test_sidecar_over_the_deferred_ring_stores_exactly_what_was_recorded(tmp_path, name):
    store = open_store(tmp_path, Clock())
    sidecar = Sidecar(store, make("confidence-stop+switch", 8, 0), clock=Clock())
    # full_wait as long as the drain: exactness is checked here, not how long a loaded machine holds the reader
    with DeferredRingClient(name, layout=SMALL, pod="p1", full_wait=10.0) as client:
        reader = RingReader(sidecar, name, poll=0.001)
        reader.poll_once()
        reader.start()
        sent = record_steered(client)
        assert client.drain(10.0)
        reader.stop()
        assert client.queue_dropped == client.dropped == client.rejected == 0
    got, want = stored_and_sent(sidecar, store, sent)
    assert got == want
    sidecar.close()


@pytest.mark.parametrize("kwargs, field", [(dict(poll=0), "poll"), (dict(max_queued=0), "max_queued")])
def test_bad_settings_are_refused_naming_them(name, kwargs, field):
    with pytest.raises(ValueError, match=field):
        DeferredRingClient(name, **kwargs)


def test_drain_waits_for_a_step_the_packer_is_still_writing(name, monkeypatch):
    from agent.ring.client import RingClient

    write = RingClient.record

    def slow(self, s):
        time.sleep(0.3)
        write(self, s)

    monkeypatch.setattr(RingClient, "record", slow)  # before the client: its packer binds the slow writer
    taker = Taker()
    with DeferredRingClient(name, layout=SMALL) as client:
        reader = RingReader(taker, name, poll=0.001).start()
        client.record(step("code", 4, 2, T0))
        while client._queue:
            time.sleep(0.001)  # taken from the queue, not in the ring yet
        assert client.drain(5.0)
        reader.stop()
    assert [t.timestamp for t in taker.taken] == [T0]
