import pytest

from agent.runtime.times import iso, parse_time, span

NOW = 1_700_000_000.0


@pytest.mark.parametrize("text,expected", [
    ("24h", NOW - 86400), ("30m", NOW - 1800), ("7d", NOW - 7 * 86400), ("90s", NOW - 90), ("now", NOW),
    ("2023-11-14T22:13:20Z", NOW), ("2023-11-14T22:13:20", NOW), ("2023-11-14T23:13:20+01:00", NOW),
])
def test_parse_time(text, expected):
    assert parse_time(text, NOW) == expected


def test_bad_time_names_the_option():
    with pytest.raises(ValueError, match="--until: expected"):
        parse_time("soon", NOW, "--until")


def test_output_formats():
    assert iso(NOW) == "2023-11-14T22:13:20Z"
    assert (span(45), span(720), span(3 * 3600 + 1800), span(2 * 86400)) == ("45s", "12m", "3h30m", "2d")
