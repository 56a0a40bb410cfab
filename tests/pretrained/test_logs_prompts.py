"""The ``logs`` prompt set and the new log format target v2 answers in."""

import json

import pytest

from agent.pretrained import logs


def test_enough_distinct_prompts_on_both_sides_of_the_split():
    for split in ("train", "heldout"):
        found = [p.text for p in logs.prompts(split)]
        assert len(found) >= 50 and len(set(found)) == len(found)
    assert [p.text for p in logs.prompts()] == [p.text for p in logs.prompts()]


def test_a_log_line_lands_in_one_split():
    train = {logs.line_of(p) for p in logs.prompts("train")}
    held = {logs.line_of(p) for p in logs.prompts("heldout")}
    assert train and held and not train & held


def test_each_prompt_carries_one_schema_1_line():
    for p in logs.prompts()[:20]:
        record = json.loads(logs.line_of(p))
        assert {"ts", "level", "service", "msg", "request_id"} <= set(record)
        assert p.domain == "logs" and p.messages == [{"role": "user", "content": p.text}]


def test_the_new_format_copies_every_value_under_new_keys():
    line = ('{"ts":"2024-03-05T10:11:12.345Z","level":"ERROR","service":"payments","msg":"POST /api/v1/x 503",'
            '"request_id":"0a1b2c3d","latency_ms":812.5,"error":"upstream timeout"}')
    assert logs.rewrite(line) == ('severity=error svc=payments event="POST /api/v1/x 503" trace=0a1b2c3d '
                                  'time=2024-03-05T10:11:12.345Z latency_ms=812.5 err="upstream timeout"')
    short = '{"ts":"t","level":"INFO","service":"auth","msg":"job reindex started","request_id":"ff"}'
    assert logs.rewrite(short) == 'severity=info svc=auth event="job reindex started" trace=ff time=t'


def test_bad_split_is_named():
    with pytest.raises(ValueError, match="^split:"):
        logs.prompts("test")
