from storage.planner import Segment, TierView, plan

H = 3600


def views(window_from=0, minute_from=0, hour_from=0, minute_dirty=(), hour_dirty=()):
    return [TierView("window", 10, window_from), TierView("minute", 60, minute_from, frozenset(minute_dirty)),
            TierView("hour", H, hour_from, frozenset(hour_dirty))]


def test_whole_hours_come_from_the_hour_tier():
    assert plan(0, 2 * H, views()).segments == (Segment("hour", 0, 2 * H),)


def test_unaligned_edges_come_from_finer_tiers():
    p = plan(H - 130, 2 * H + 75, views())
    assert p.segments == (Segment("window", H - 130, H - 120), Segment("minute", H - 120, H),
                          Segment("hour", H, 2 * H), Segment("minute", 2 * H, 2 * H + 60),
                          Segment("window", 2 * H + 60, 2 * H + 75))
    assert p.exact and p.tiers_used() == {"window": 25, "minute": 180, "hour": H}


def test_dirty_buckets_are_answered_below():
    p = plan(0, 3 * H, views(hour_dirty={H}, minute_dirty={H + 60}))
    assert p.segments == (Segment("hour", 0, H), Segment("minute", H, H + 60), Segment("window", H + 60, H + 120),
                          Segment("minute", H + 120, 2 * H), Segment("hour", 2 * H, 3 * H))


def test_pruned_tiers_are_not_used_and_the_gap_is_reported():
    # Windows kept from 5h, minutes from 2h: the range start 30 min is only in whole hours from 1h on.
    p = plan(1800, 6 * H, views(window_from=5 * H, minute_from=2 * H))
    assert p.segments == (Segment("hour", H, 6 * H),)
    assert not p.exact and p.missing == [(1800, H)]


def test_one_tier_only_when_forced():
    assert plan(5, 100, [TierView("hour", H)]).segments == (Segment("hour", 5, 100),)
    assert plan(100, 100, views()).segments == ()
