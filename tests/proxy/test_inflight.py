"""The load a request met over its life, and the load the next one will meet (agent/proxy/inflight.py)."""

from agent.proxy.inflight import FRESH, RECENT, InFlight


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_requests_sent_together_met_each_other_whatever_their_order():
    clock = Clock()
    meter = InFlight(clock)
    mets = [meter.enter() for _ in range(4)]  # a burst: counts 1, 2, 3, 4 when sent
    assert [m.sent for m in mets] == [1, 2, 3, 4]
    clock.now += 4.0
    assert [m.load() for m in mets] == [4, 4, 4, 4]
    for m in mets:
        meter.leave(m)
    assert meter.count == 0


def test_a_request_that_outlived_the_others_met_them_for_a_share_of_its_life():
    clock = Clock()
    meter = InFlight(clock)
    long = meter.enter()
    short = [meter.enter() for _ in range(3)]
    clock.now += 1.0
    assert [m.load() for m in short] == [4, 4, 4]  # read as each record is made, before it leaves
    for m in short:
        meter.leave(m)
    clock.now += 3.0
    assert long.load() == 2  # 1 s with four in flight, 3 s alone: (4 + 3) / 4 = 1.75
    clock.now += 12.0
    assert long.load() == 1  # (4 + 15) / 16


def test_the_next_request_meets_what_the_last_ones_met_until_that_is_stale():
    clock = Clock()
    meter = InFlight(clock)
    assert meter.ahead() == 1  # nothing known: itself
    for _ in range(2):  # two bursts of four, each decoding 4 s
        mets = [meter.enter() for _ in range(4)]
        clock.now += 4.0
        for m in mets:
            meter.leave(m)
        clock.now += 1.0
    assert meter.count == 0 and meter.ahead() == 4  # the first of the next burst: scored as the burst
    meter.enter()
    meter.enter()
    assert meter.ahead() == 4  # the count now (2) and itself is less than the burst
    clock.now += FRESH + 1
    assert meter.ahead() == 3  # stale: the count and itself
    assert RECENT >= 4
