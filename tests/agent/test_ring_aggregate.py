"""The step ring carries per-step records only: aggregates are refused at ``record``, naming the field."""

from __future__ import annotations

import pytest

from agent.ring.reader import RingReader
from specwatch_core.records import RecordError, StepRecord
from history import aggregate
from ring_fakes import Taker
from sidecar_fakes import T0, step
from test_ring import client, name  # noqa: F401 (fixtures)


@pytest.mark.parametrize("field, record", [
    ("steps", aggregate("code", 4, steps=10, accepted=20, seconds=None, draft_s=0.01, verify_s=0.02)),
    ("drafted", StepRecord(**{**step("code", 4, 2, T0).to_dict(), "drafted": 4})),
    ("seconds", StepRecord(**{**step("code", 4, 2, T0).to_dict(), "seconds": 0.5})),
    ("seconds", StepRecord(**{**step("code", 4, 2, T0).to_dict(), "seconds": 0.0})),
    ("pool", StepRecord(**{**step("code", 4, 2, T0).to_dict(), "pool": "k4"})),
    ("prompt_seconds", StepRecord(**{**step("code", 4, 2, T0).to_dict(), "prompt_seconds": 0.2})),
    ("prompt_seconds", StepRecord(**{**step("code", 4, 2, T0).to_dict(), "prompt_seconds": 0.0})),
])
def test_an_aggregate_is_refused_with_the_way_to_send_it_and_nothing_is_written(client, name, field, record):
    with pytest.raises(RecordError, match="per-step records only.*POST /v1/steps") as err:
        client.record(record)
    assert err.value.field == field
    good = step("code", 4, 2, T0)
    client.record(good)
    taker = Taker()
    RingReader(taker, name).poll_once()
    assert [t.to_dict() for t in taker.taken] == [good.to_dict()]
