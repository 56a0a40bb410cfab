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


def test_an_edge_mostly_inside_a_bucket_is_that_bucket_less_the_rest():
    # [600, H) is 50 of the hour's 60 minutes: the hour row less its first 10 minutes, not 50 minute rows.
    p = plan(600, 3 * H, views())
    assert p.segments == (Segment("hour", 600, H, (0, H), "minute"), Segment("hour", H, 3 * H))
    assert p.segments[0].reads() == [("hour", 0, H, 1), ("minute", 0, 600, -1)]
    assert p.exact and p.tiers_used() == {"hour": 3 * H - 600}
    tail = plan(0, 2 * H - 600, views()).segments
    assert tail == (Segment("hour", 0, H), Segment("hour", H, 2 * H - 600, (H, 2 * H), "minute"))
    assert tail[1].reads() == [("hour", H, 2 * H, 1), ("minute", 2 * H - 600, 2 * H, -1)]


def test_no_complement_when_it_reads_more_or_cannot_be_exact():
    assert plan(2400, 2 * H, views()).segments == (Segment("minute", 2400, H), Segment("hour", H, 2 * H))
    assert plan(600, 2 * H, views(hour_dirty={0})).segments == (Segment("minute", 600, H), Segment("hour", H, 2 * H))
    # minutes pruned before 300: the first ten minutes cannot be subtracted
    assert plan(600, 2 * H, views(minute_from=300)).segments == (Segment("minute", 600, H), Segment("hour", H, 2 * H))
    # the hour holding the range's end not rolled up yet (it may be open), marks or not
    rolled = [TierView("window", 10), TierView("minute", 60), TierView("hour", H, rolled_until=H)]
    assert plan(0, 2 * H - 600, rolled).segments == (Segment("hour", 0, H), Segment("minute", H, 2 * H - 600))


def test_a_gap_below_a_complement_is_still_reported():
    # Windows kept from 5h: [605, 660) is in no tier; the rest of the first hour is the hour less [0, 660).
    p = plan(605, 2 * H, views(window_from=5 * H))
    assert p.segments == (Segment("hour", 660, H, (0, H), "minute"), Segment("hour", H, 2 * H))
    assert p.missing == [(605, 660)]
