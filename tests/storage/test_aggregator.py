import threading

from history import T0, step
from storage.aggregator import WindowAggregator
from storage.counts import WindowCounts, accepted_tokens, drafted_tokens, position_counts
from storage.pending import PendingWindows


def test_position_counts_stop_at_the_first_rejection():
    # K = 4: one step accepted 2 (positions 1-2 accepted, 3 rejected, 4 never verified), one accepted 4,
    # one accepted 0.
    hist = [1, 0, 1, 0, 1]
    assert position_counts(hist) == [(1, 3, 2), (2, 2, 2), (3, 2, 1), (4, 1, 1)]
    assert position_counts([5, 0, 0]) == [(1, 5, 0)]  # nobody reached position 2
    assert position_counts([0]) == []  # K = 0


def test_window_sums_and_keys():
    agg = WindowAggregator(10, pod="pod-x", clock=lambda: T0 + 5)
    agg.add_many([step(accepted=2, ts=T0 + 1), step(accepted=4, ts=T0 + 9.99, expected=0.25),
                  step(accepted=1, ts=T0 + 10), step(k=0, accepted=0, ts=None), step(pod="p2", ts=T0)])
    closed = agg.take_closed(T0 + 10)
    assert list(closed) == [T0]  # the window [T0+10, T0+20) is still open
    series = closed[T0]
    c = series[("pod-x", "code", "t1", "d1", 4)]
    assert (c.steps, c.emitted, c.hist) == (2, 8, [0, 0, 1, 0, 1])
    assert (accepted_tokens(c), drafted_tokens(c), c.expected_n) == (6, 8, 8)
    assert abs(c.expected_sum - (4 * 0.5 + 4 * 0.25)) < 1e-12
    assert abs(c.draft_seconds - 0.008) < 1e-12
    assert series[("pod-x", "code", "t1", "d1", 0)].steps == 1  # no timestamp: the clock's window
    assert series[("p2", "code", "t1", "d1", 4)].steps == 1
    assert agg.take_closed(T0 + 10) == {}
    assert list(agg.take_all()) == [T0 + 10]


def test_late_records_count_in_the_oldest_open_window():
    agg = WindowAggregator(10, pod="p", clock=lambda: T0)
    assert agg.hold_from(T0 + 305) == T0 + 300
    assert agg.hold_from(T0 + 100) == T0 + 300  # the floor never goes back
    agg.add(step(ts=T0 + 12))
    agg.add(step(ts=T0 + 301))
    assert agg.late == 1
    assert {s: sum(c.steps for c in w.values()) for s, w in agg.take_all().items()} == {T0 + 300: 2}


def test_recording_while_another_thread_takes_loses_nothing():
    agg = WindowAggregator(1, pod="p")
    taken = []
    done = threading.Event()

    def record(offset):
        for i in range(5000):
            agg.add(step(ts=T0 + (i + offset) / 500))

    def take():
        while not done.is_set():
            taken.append(agg.take_closed(T0 + 5))
        taken.append(agg.take_all())

    workers = [threading.Thread(target=record, args=(o,)) for o in range(3)]
    taker = threading.Thread(target=take)
    taker.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    taker.join()
    assert sum(c.steps for t in taken for w in t.values() for c in w.values()) == 15000


def test_pending_keeps_running_totals_until_written_and_old():
    pending = PendingWindows()
    key = ("p", "code", "t1", "d1", 2)
    pending.merge({T0: {key: WindowCounts(2, steps=1, emitted=2, hist=[0, 1, 0])}})
    pending.mark_written([(T0, key)])
    assert pending.unwritten() == []
    pending.merge({T0: {key: WindowCounts(2, steps=2, emitted=6, hist=[0, 0, 2])}})
    [(start, k, total)] = pending.unwritten()
    assert (start, k, total.steps, total.emitted, total.hist) == (T0, key, 3, 8, [0, 1, 2])
    pending.evict_before(T0 + 60)
    assert len(pending) == 1  # not written yet: kept whatever its age
    pending.mark_written([(T0, key)])
    pending.evict_before(T0 + 60)
    assert len(pending) == 0
