"""The traffic mix and its schedule, as pure functions: parsing, the mix in force at a time (a shift takes
over exactly at its time), and the draw that maps a uniform number to a domain with the mix's shares."""

from __future__ import annotations

import pytest

from agent.workload.mix import MixError, choose, parse_mix, parse_seconds, schedule


def test_a_mix_keeps_its_order_and_a_bare_domain_weighs_one():
    mix = parse_mix("code=3, chat")
    assert mix.weights == (("code", 3.0), ("chat", 1.0))
    assert mix.shares() == {"code": 0.75, "chat": 0.25}
    assert str(mix) == "code=3,chat=1"


@pytest.mark.parametrize("text, message", [
    ("code=0", "code: weight must be > 0"), ("code=-1", "code: weight must be > 0"),
    ("code=x", "'code': weight must be a number"), ("code=1,code=2", "a domain appears twice"),
    ("=2", "a domain name is empty"), ("code=nan", "code: weight must be > 0")])
def test_a_bad_mix_is_refused_saying_why(text, message):
    with pytest.raises(MixError, match=message):
        parse_mix(text)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("1.5m", 90), ("1h", 3600), (".5s", 0.5)])
def test_times_take_units(text, seconds):
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5s", "5d", "1m30s"])
def test_a_bad_time_is_refused(text):
    with pytest.raises(MixError, match="expected a time"):
        parse_seconds(text)


def test_a_shift_changes_the_mix_exactly_at_its_time():
    plan = schedule("code=3,chat=1", ["60s:json=4,chat=1"])
    assert str(plan.mix_at(0)) == str(plan.mix_at(59.999)) == "code=3,chat=1"
    assert str(plan.mix_at(60)) == str(plan.mix_at(10_000)) == "json=4,chat=1"
    assert [plan.phase_at(t) for t in (0, 59.999, 60, 61)] == [0, 0, 1, 1]
    assert plan.domains == ("code", "chat", "json")


def test_shifts_are_taken_in_time_order_whatever_order_they_are_written_in():
    plan = schedule("chat", ["2m:code", "30s:json", "1m:edit"])
    assert [(at, str(mix)) for at, mix in plan.phases] == [
        (0.0, "chat=1"), (30.0, "json=1"), (60.0, "edit=1"), (120.0, "code=1")]
    assert [str(plan.mix_at(t)) for t in (29, 30, 59, 60, 119, 120)] == [
        "chat=1", "json=1", "json=1", "edit=1", "edit=1", "code=1"]


@pytest.mark.parametrize("shifts, message", [
    (["0s:json=1"], "a shift must come after 0 s"), (["1m:json", "60s:code"], "increasing times"),
    (["json=1"], "a shift is AT:MIX"), (["later:json"], "expected a time")])
def test_bad_shifts_are_refused(shifts, message):
    with pytest.raises(MixError, match=message):
        schedule("chat", shifts)


def test_the_draw_gives_each_domain_its_share_of_the_unit_interval():
    mix = parse_mix("code=3,chat=1,json=4")
    n = 8000
    picks = [choose(mix, (i + 0.5) / n) for i in range(n)]
    assert {d: picks.count(d) for d in mix.domains} == {"code": 3000, "chat": 1000, "json": 4000}
    assert picks[:3000] == ["code"] * 3000  # in the mix's order: one interval per domain
    assert choose(mix, 0.0) == "code" and choose(mix, 0.999999) == "json"


@pytest.mark.parametrize("u", [-0.1, 1.0, 2])
def test_the_draw_takes_only_numbers_in_the_unit_interval(u):
    with pytest.raises(ValueError, match="^u:"):
        choose(parse_mix("chat"), u)
