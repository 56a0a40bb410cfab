"""Aggregate records (many steps of one request in one record): the fields, their checks, old clients."""

import pytest

from specwatch_core.records import RecordError, StepRecord, drafted_of, is_aggregate, step_seconds

from test_records import GOOD

AGG = dict(domain="code", lookahead=4, steps=10, drafted=38, accepted=25, emitted=33, draft_seconds=0.0,
           verify_seconds=0.0, seconds=0.25, target_version="t1", draft_version="d1", pool="k4",
           timestamp=1.7e9)


def test_an_aggregate_round_trips_and_its_derived_values():
    record = StepRecord.from_dict(AGG)
    assert StepRecord.from_dict(record.to_dict()) == record
    assert is_aggregate(record) and drafted_of(record) == 38 and step_seconds(record) == 0.25


def test_an_old_record_is_the_case_of_one_step_and_its_dict_is_unchanged():
    record = StepRecord.from_dict(GOOD)
    assert (record.steps, record.drafted, record.seconds, record.pool) == (1, None, None, None)
    assert record.to_dict() == GOOD  # no new key: an old server still reads what a new client sends
    assert not is_aggregate(record) and drafted_of(record) == 3
    assert step_seconds(record) == pytest.approx(0.03)


def test_drafted_defaults_to_lookahead_times_steps():
    record = StepRecord.from_dict({**AGG, "drafted": None})
    assert drafted_of(record) == 40
    assert not is_aggregate(StepRecord.from_dict({**GOOD, "drafted": 3, "seconds": 0.05, "pool": "k3"}))


@pytest.mark.parametrize("change,field,message", [
    ({"steps": 0}, "steps", "must be 1..10000000, got 0"),
    ({"steps": 10_000_001}, "steps", "must be 1..10000000, got 10000001"),
    ({"steps": 2.0}, "steps", "must be an integer"),
    ({"steps": True}, "steps", "must be an integer"),
    ({"drafted": 41}, "drafted", "must be 0..40, got 41"),
    ({"drafted": -1}, "drafted", "must be 0..40"),
    ({"drafted": 20}, "accepted", "must be 0..20, got 25"),
    ({"emitted": 9}, "emitted", "must be 10..35, got 9"),
    ({"emitted": 36}, "emitted", "must be 10..35, got 36"),
    ({"seconds": -1.0}, "seconds", "must be a finite non-negative number"),
    ({"seconds": float("inf")}, "seconds", "must be a finite non-negative number"),
    ({"seconds": 0.1, "draft_seconds": 0.05, "verify_seconds": 0.06}, "seconds",
     r"must be >= draft_seconds \+ verify_seconds"),
    ({"pool": ""}, "pool", "must be a non-empty string"),
    ({"pool": "p" * 65}, "pool", "longer than 64 characters"),
    ({"pool": "k\n4"}, "pool", "must be printable"),
    ({"prompt_seconds": -0.5}, "prompt_seconds", "must be a finite non-negative number"),
    ({"prompt_seconds": float("nan")}, "prompt_seconds", "must be a finite non-negative number"),
    ({"prompt_seconds": "0.2"}, "prompt_seconds", "must be a finite non-negative number"),
    ({"accepted_mask": [1, 0, 0, 0]}, "accepted_mask", "must be absent from an aggregate"),
    ({"expected_acceptance": [0.5] * 4}, "expected_acceptance", "must be absent from an aggregate"),
    ({"draft_confidence": [0.5] * 4}, "draft_confidence", "must be absent from an aggregate"),
])
def test_bad_aggregate_fields_are_named(change, field, message):
    with pytest.raises(RecordError, match=message) as info:
        StepRecord.from_dict({**AGG, **change})
    assert info.value.field == field


def test_a_single_step_with_fewer_drafted_than_lookahead_has_no_positions():
    with pytest.raises(RecordError, match="accepted_mask: must be absent"):
        StepRecord.from_dict({**GOOD, "drafted": 2})
    StepRecord.from_dict({**GOOD, "drafted": 2, "accepted_mask": None, "expected_acceptance": None,
                          "draft_confidence": None})


def test_seconds_may_equal_the_split_times_up_to_rounding():
    split = 0.1 + 0.2  # 0.30000000000000004
    StepRecord.from_dict({**AGG, "draft_seconds": 0.1, "verify_seconds": 0.2, "seconds": 0.3})
    assert step_seconds(StepRecord.from_dict({**AGG, "seconds": None, "draft_seconds": 0.1,
                                              "verify_seconds": 0.2})) == split


def test_records_with_aggregate_fields_always_take_the_field_checks(monkeypatch):
    checked = []
    monkeypatch.setattr(StepRecord, "_check", lambda self, *args, **kwargs: checked.append(self) or self)
    plain = StepRecord(**GOOD)
    plain.validate()
    assert checked == []  # the fast path takes the common record
    for change in ({"steps": 2}, {"steps": 0}, {"steps": True}, {"drafted": 9}, {"seconds": -1.0},
                   {"pool": ""}, {"drafted": 3}, {"seconds": 0.5}, {"pool": "k3"}):
        record = StepRecord(**{**GOOD, **change})
        record.validate()
        assert checked[-1] is record, change  # never passed by the fast path alone
