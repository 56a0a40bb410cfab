import pytest

from agent.records import RecordError, StepRecord, validate_batch

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


def test_emitted_is_at_most_accepted_plus_the_bonus_token():
    StepRecord.from_dict({**GOOD, "emitted": 1})  # stopped early: fewer is fine
    with pytest.raises(RecordError, match="emitted: must be 1..2, got 3"):
        StepRecord.from_dict({**GOOD, "emitted": 3})


def test_batch_items_must_be_records():
    with pytest.raises(RecordError, match=r"record 1: record: must be a StepRecord, got dict"):
        validate_batch([StepRecord(**GOOD), dict(GOOD)])
