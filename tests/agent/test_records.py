import pytest

from specwatch_core.records import RecordError, StepRecord, validate_batch

GOOD = dict(domain="code", lookahead=3, accepted=1, emitted=2, draft_seconds=0.01,
            verify_seconds=0.02, target_version="t1", draft_version="d1",
            accepted_mask=[1, 0, 0], expected_acceptance=[0.9, 0.4, 0.2],
            draft_confidence=[0.8, 0.5, 0.3], timestamp=1.7e9, pod="pod-a")


def test_round_trip():
    record = StepRecord.from_dict(GOOD)
    assert StepRecord.from_dict(record.to_dict()) == record


def test_plain_target_step():
    StepRecord.from_dict({**GOOD, "lookahead": 0, "accepted": 0, "emitted": 1, "accepted_mask": [],
                          "expected_acceptance": [], "draft_confidence": []})


@pytest.mark.parametrize("change,field", [
    ({"domain": ""}, "domain"), ({"domain": "x" * 65}, "domain"), ({"domain": "a\nb"}, "domain"),
    ({"lookahead": -1}, "lookahead"), ({"lookahead": 2.0}, "lookahead"),
    ({"accepted": 4}, "accepted"), ({"emitted": 0}, "emitted"),
    ({"draft_seconds": float("nan")}, "draft_seconds"), ({"verify_seconds": -1}, "verify_seconds"),
    ({"accepted_mask": [1, 0]}, "accepted_mask"), ({"accepted_mask": [0, 1, 0]}, "accepted_mask"),
    ({"accepted_mask": [1, 0, 2]}, "accepted_mask"),
    ({"expected_acceptance": [0.9, 1.2, 0.1]}, "expected_acceptance"),
    ({"draft_confidence": [0.1, 0.2]}, "draft_confidence"),
    ({"target_version": None}, "target_version"), ({"colour": "red"}, "colour"),
])
def test_bad_fields_are_named(change, field):
    with pytest.raises(RecordError) as info:
        StepRecord.from_dict({**GOOD, **change})
    assert info.value.field == field


def test_missing_field_is_named():
    data = dict(GOOD)
    del data["verify_seconds"]
    with pytest.raises(RecordError, match="verify_seconds: required"):
        StepRecord.from_dict(data)


def test_batch_error_carries_the_index():
    records = [StepRecord(**GOOD), StepRecord(**{**GOOD, "accepted": 9})]
    with pytest.raises(RecordError, match=r"record 1: accepted") as info:
        validate_batch(records)
    assert info.value.index == 1
    with pytest.raises(RecordError, match="lookahead"):
        validate_batch([StepRecord(**GOOD)], max_lookahead=2)


@pytest.mark.parametrize("change,field,message", [
    ({"draft_seconds": 3600.0}, "draft_seconds", "3600"), ({"verify_seconds": 1e308}, "verify_seconds", ""),
    ({"timestamp": 1e12}, "timestamp", "got 1000000000000.0"), ({"timestamp": 1e300}, "timestamp", ""),
    ({"timestamp": float("inf")}, "timestamp", ""),
])
def test_every_number_is_bounded(change, field, message):
    with pytest.raises(RecordError, match=f"{field}: .*{message}"):
        StepRecord.from_dict({**GOOD, **change})
    StepRecord.from_dict({**GOOD, "draft_seconds": 3599.99, "timestamp": 9.9e9})  # just inside


def test_timestamps_outside_the_store_skew_are_named_with_the_index():
    ok, late = StepRecord(**GOOD), StepRecord(**{**GOOD, "timestamp": 1.7e9 + 301})
    validate_batch([ok, ok], earliest=1.7e9 - 7 * 86400, latest=1.7e9 + 300)
    with pytest.raises(RecordError, match=r"record 1: timestamp: .* in \[1699395200, 1700000300\]"):
        validate_batch([ok, late], earliest=1.7e9 - 7 * 86400, latest=1.7e9 + 300)
    with pytest.raises(RecordError, match="record 0: timestamp"):
        validate_batch([StepRecord(**{**GOOD, "timestamp": 1.7e9 - 7 * 86400 - 1})], earliest=1.7e9 - 7 * 86400)


def test_emitted_is_at_most_accepted_plus_the_bonus_token():
    StepRecord.from_dict({**GOOD, "emitted": 1})  # stopped early: fewer is fine
    with pytest.raises(RecordError, match="emitted: must be 1..2, got 3"):
        StepRecord.from_dict({**GOOD, "emitted": 3})


def test_batch_items_must_be_records():
    with pytest.raises(RecordError, match=r"record 1: record: must be a StepRecord, got dict"):
        validate_batch([StepRecord(**GOOD), dict(GOOD)])


def test_the_fast_path_accepts_only_what_the_field_checks_accept():
    # validate() passes the common valid record in one pass and sends anything else to the field-by-field
    # checks. Over valid records and single-field mutations (the ones above plus values a quick check could
    # miss: NaN past the first entry, bools and floats in the mask, ints too large for a float, str
    # subclasses), the fast path must never pass a record the field checks reject, and must pass the valid
    # ones (else it is no fast path).
    from specwatch_core.records import _plainly_valid

    class Text(str):
        pass

    nan, inf = float("nan"), float("inf")
    mutations = [
        {}, {"domain": ""}, {"domain": "x" * 65}, {"domain": "a\nb"}, {"domain": Text("code")},
        {"target_version": None}, {"draft_version": "v" * 129}, {"lookahead": -1}, {"lookahead": 2.0},
        {"lookahead": True}, {"accepted": 4}, {"accepted": -1}, {"emitted": 0}, {"emitted": 3},
        {"draft_seconds": nan}, {"draft_seconds": inf}, {"verify_seconds": -1}, {"verify_seconds": 10**400},
        {"draft_seconds": True}, {"draft_seconds": 0}, {"timestamp": nan}, {"timestamp": -1.0}, {"pod": ""},
        {"pod": "p\tq"}, {"request_id": 7}, {"accepted_mask": [1, 0]}, {"accepted_mask": [0, 1, 0]},
        {"accepted_mask": [1, 0, 2]}, {"accepted_mask": [True, 0, 0]}, {"accepted_mask": [1.0, 0, 0]},
        {"accepted_mask": (1, 0, 0)}, {"expected_acceptance": [0.9, nan, 0.1]},
        {"expected_acceptance": [0.9, 1.2, 0.1]}, {"expected_acceptance": [0.9, -0.0, inf]},
        {"draft_confidence": [0.1, 0.2]}, {"draft_confidence": [0.1, True, 0.2]},
        {"draft_confidence": [0.1, "0.2", 0.3]}, {"draft_confidence": [1, 0, 1]},
        {"lookahead": 0, "accepted": 0, "emitted": 1, "accepted_mask": [], "expected_acceptance": [],
         "draft_confidence": []},
        {"accepted_mask": None, "expected_acceptance": None, "draft_confidence": None, "timestamp": None,
         "pod": None},
        # the bounds: seconds below an hour, timestamps inside the skew window (1.7e9 - 100 .. 1.7e9 + 5)
        {"draft_seconds": 3600.0}, {"verify_seconds": 3599.999}, {"verify_seconds": 3600}, {"timestamp": 1e12},
        {"timestamp": 1e300}, {"timestamp": 0}, {"timestamp": 1.7e9 - 100}, {"timestamp": 1.7e9 - 100.001},
        {"timestamp": 1.7e9 + 5}, {"timestamp": 1.7e9 + 5.001}, {"timestamp": 10**400},
    ]
    slow_only = []
    window = (1.7e9 - 100, 1.7e9 + 5)
    for change in mutations:
        for limits in ((None, 64, 0.0, 1e10), (2, 64, 0.0, 1e10), (8, 4, 0.0, 1e10), (8, 64, *window)):
            record = StepRecord(**{**GOOD, **change})
            try:
                record._check(*limits)
                ok = True
            except (RecordError, OverflowError):
                ok = False
            if _plainly_valid(record, *limits):
                assert ok, (change, limits)
            elif ok:
                slow_only.append(change)
    # Every other valid record above takes the fast path.
    assert slow_only == [{"domain": Text("code")}] * 3
