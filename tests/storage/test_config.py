import pytest

from storage import StoreConfig


@pytest.mark.parametrize("change,message", [
    ({"kmax": 0}, "kmax"), ({"kmax": 65}, "kmax must be an integer in 1..64"), ({"window_seconds": 7}, "divide 60"), ({"late_seconds": -1}, "late_seconds"),
    ({"retain_windows": 0}, "positive"), ({"retain_windows": 600}, "exceed late_seconds"),
    ({"retain_minutes": 86400}, "grow with the tier"), ({"retain_days": 86400}, "hours <= days"), ({"pod": ""}, "pod"), ({"pod": "a\nb"}, "pod"),
])
def test_bad_config_is_refused_with_a_specific_message(change, message):
    with pytest.raises(ValueError, match=message):
        StoreConfig(**change)


def test_defaults_follow_the_issue():
    c = StoreConfig()
    assert (c.kmax, c.retain_windows, c.retain_minutes, c.retain_hours) == (16, 7 * 86400, 30 * 86400,
                                                                            400 * 86400)
    assert c.retain_days == 5 * 366 * 86400


def test_a_store_takes_k_up_to_64():
    assert StoreConfig(kmax=64).kmax == 64
