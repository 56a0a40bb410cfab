"""Engine timings -> aggregate StepRecord, and the incremental SSE scan."""

from __future__ import annotations

import json

import pytest

from agent.proxy.engines.base import Served
from agent.proxy.engines.llamacpp import aggregate
from agent.proxy.engines.sse import LastEvent, whole
from specwatch_core.records import RecordError

SERVED = Served("code", "k4", 4, "t@1", "d@2", "r", "pod")


def test_aggregate_folds_the_request_into_one_record():
    r = aggregate({"predicted_n": 30, "predicted_ms": 150.0, "draft_n": 40, "draft_n_accepted": 20}, SERVED, 5.0)
    assert (r.steps, r.drafted, r.accepted, r.emitted, r.seconds) == (10, 40, 20, 30, 0.15)
    assert (r.lookahead, r.pool, r.domain, r.target_version, r.draft_version) == (4, "k4", "code", "t@1", "d@2")
    assert (r.draft_seconds, r.verify_seconds, r.timestamp, r.request_id, r.pod) == (0.0, 0.0, 5.0, "r", "pod")


@pytest.mark.parametrize("prompt_ms, seconds", [(250, 0.25), (0, 0.0), (None, None), (-3, None), ("9", None),
                                                (float("nan"), None)])
def test_the_prompts_time_is_kept_apart_from_the_steps(prompt_ms, seconds):
    timings = {"predicted_n": 30, "predicted_ms": 150.0, "draft_n": 40, "draft_n_accepted": 20}
    if prompt_ms is not None:
        timings["prompt_ms"] = prompt_ms
    r = aggregate(timings, SERVED, 5.0)
    assert (r.prompt_seconds, r.seconds) == (seconds, 0.15)  # a bad prompt_ms drops the field, not the record
    if seconds is not None:
        assert r.to_dict()["prompt_seconds"] == seconds
        assert type(r).from_dict(r.to_dict()) == r


def test_a_plain_pool_records_every_token_as_a_step():
    served = Served("code", "off", 0, "t", "d")
    r = aggregate({"predicted_n": 7, "predicted_ms": 70}, served, 1.0)
    assert (r.steps, r.drafted, r.accepted, r.emitted, r.lookahead) == (7, 0, 0, 7, 0)


@pytest.mark.parametrize("timings", [None, {}, {"predicted_n": 0, "predicted_ms": 1.0}, "x",
                                     {"predicted_n": 3, "predicted_ms": -1},
                                     {"predicted_n": 3, "predicted_ms": 1, "draft_n": 1.5}])
def test_nothing_to_record(timings):
    assert aggregate(timings, SERVED, 1.0) is None


def test_drafting_on_a_pool_without_a_draft_is_refused_naming_the_field():
    with pytest.raises(RecordError, match="drafted"):
        aggregate({"predicted_n": 5, "predicted_ms": 1, "draft_n": 4, "draft_n_accepted": 1},
                  Served("d", "off", 0, "t", "d"), 1.0)


def test_more_drafted_than_the_pool_lookahead_allows_is_refused():
    with pytest.raises(RecordError, match="drafted"):
        aggregate({"predicted_n": 5, "predicted_ms": 1, "draft_n": 50, "draft_n_accepted": 1}, SERVED, 1.0)


def stream(*events) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def test_sse_scan_finds_the_last_timings_whatever_the_chunking():
    body = stream({"text": "a"}, {"text": "b", "timings": {"predicted_n": 1}}, {"text": "c"},
                  {"text": "d", "timings": {"predicted_n": 2, "draft_n": 3}})
    for size in (1, 2, 7, 64, len(body)):
        scan = LastEvent(b'"timings"')
        for i in range(0, len(body), size):
            scan.feed(body[i:i + size])
        assert scan.close()["timings"] == {"predicted_n": 2, "draft_n": 3}, size


def test_sse_scan_takes_a_last_line_without_newline():
    scan = LastEvent(b'"timings"')
    scan.feed(b'data: {"timings": oops}\n\ndata: {"timings": {"predicted_n": 4}}')
    assert scan.close() == {"timings": {"predicted_n": 4}}


def test_sse_scan_gives_nothing_for_a_last_event_that_is_not_json():
    scan = LastEvent(b'"timings"')
    scan.feed(b'data: {"timings": {"predicted_n": 4}}\n\ndata: {"timings": oops}\n\n')
    assert scan.close() is None


def test_sse_scan_notices_an_error_event():
    scan = LastEvent(b'"usage"')
    scan.feed(b'data: {"choices": []}\n\ndata: {"error": {"message": "x", "code": 500}}\n\n')
    assert scan.error and scan.close() is None


def test_sse_scan_keeps_only_the_incomplete_line():
    scan = LastEvent(b'"timings"')
    scan.feed(b"data: " + b"x" * 10_000 + b"\n\ndata: {")
    assert scan._partial == b"data: {"


def test_whole_answers():
    assert whole(b'{"timings": {"predicted_n": 1}}') == {"timings": {"predicted_n": 1}}
    assert whole(b"[1]") is None and whole(b"not json") is None
