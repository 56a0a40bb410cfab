"""SidecarConfig: defaults, file < environment < flags, and messages that name the option and its source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.runtime.config import ConfigError, SidecarConfig, load


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("CONFIG", "HOST", "PORT", "TOKEN", "DB", "POD", "POLICY", "KMAX", "BODY_LIMIT", "KIT"):
        monkeypatch.delenv(f"SPECWATCH_{name}", raising=False)


def test_defaults_bind_loopback_and_use_the_benchmarks_best_policy(tmp_path):
    config = load()
    assert (config.host, config.port, config.token) == ("127.0.0.1", 8790, None)
    best = json.loads((Path(__file__).parents[2] / "bench/results/policies.json").read_text())["goals"]["best"]
    assert config.policy == f"{best}+switch"
    assert not config.models_configured and config.url == "http://127.0.0.1:8790"


def test_environment_overrides_the_file_and_flags_override_both(tmp_path, monkeypatch):
    path = tmp_path / "sidecar.toml"
    path.write_text('port = 9000\nhost = "0.0.0.0"\npolicy = "heuristic"\nflush_seconds = 2.5\n')
    monkeypatch.setenv("SPECWATCH_PORT", "9100")
    monkeypatch.setenv("SPECWATCH_CONFIG", str(path))
    config = load(overrides={"policy": "thompson+switch", "host": None})
    assert (config.port, config.host, config.policy, config.flush_seconds) == (9100, "0.0.0.0", "thompson+switch",
                                                                               2.5)


@pytest.mark.parametrize("env, value, message", [
    ("PORT", "http", "port: must be an integer, got 'http' (from SPECWATCH_PORT)"),
    ("PORT", "70000", "port: must be an integer in 0..65535, got 70000 (from SPECWATCH_PORT)"),
    ("TOKEN", "short", "token: must be at least 16 characters"),
    ("POLICY", "fastest", "policy: unknown 'fastest'"),
    ("BODY_LIMIT", "10", "body_limit: must be an integer in 1024..1073741824, got 10 (from SPECWATCH_BODY_LIMIT)"),
    ("KMAX", "0", "kmax: must be an integer in 1..64, got 0 (from SPECWATCH_KMAX)"),
    ("KMAX", "65", "kmax: must be an integer in 1..64, got 65 (from SPECWATCH_KMAX)"),
    ("RETAIN_WINDOWS", "3600", "retain_windows: must be over 3900 s: late records land in windows for 300 s"),
    ("RETAIN_MINUTES", "7d", "retain_minutes: must be an integer, got '7d' (from SPECWATCH_RETAIN_MINUTES)"),
    ("RING", "dev/shm/x", "ring: printable text without '/', 1..200 characters, got 'dev/shm/x' (from SPECWATCH_RING)"),
])
def test_bad_environment_values_name_the_option_and_variable(monkeypatch, env, value, message):
    monkeypatch.setenv(f"SPECWATCH_{env}", value)
    with pytest.raises(ConfigError) as info:
        load()
    assert str(info.value).startswith(message)
    assert info.value.field == env.lower()


def test_bad_file_values_name_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('flush_seconds = -1\n')
    with pytest.raises(ConfigError, match=rf"flush_seconds: must be a positive number of seconds, got -1 "
                                          rf"\(from config file {path}\)"):
        load(path)
    path.write_text('prot = 1\n')
    with pytest.raises(ConfigError, match="prot: unknown option in"):
        load(path)
    path.write_text('port = \n')
    with pytest.raises(ConfigError, match="config: cannot read"):
        load(path)
    with pytest.raises(ConfigError, match="config: no such file"):
        load(tmp_path / "missing.toml")


@pytest.mark.parametrize("kwargs, message", [
    ({"target_dir": "/models/t"}, "draft_dir: target_dir and draft_dir go together"),
    ({"kit": "tiny", "target_dir": "/t", "draft_dir": "/d"}, "kit: set either kit or target_dir"),
    ({"kit_target": "v3"}, "kit_target: must be one of v1, v2"),
    ({"alertmanager_url": "alertmanager:9093"}, "alertmanager_url: must be an http:// or https:// URL"),
    ({"shutdown_seconds": 12.0}, "shutdown_seconds: must leave the 10 s grace period room"),
    ({"host": ""}, "host: must be non-empty text"),
    ({"pod": "a\nb"}, "pod: must be printable text"),
    ({"retain_windows": 40 * 86400}, "retain_minutes: must be at least retain_windows (3456000 s)"),
    ({"retain_hours": 86400}, "retain_hours: must be at least retain_minutes (2592000 s)"),
    ({"retain_days": 0}, "retain_days: must be an integer in 1..1099511627776, got 0"),
])
def test_inconsistent_options_are_refused(kwargs, message):
    with pytest.raises(ConfigError) as info:
        SidecarConfig(**kwargs)
    assert str(info.value).startswith(message)


def test_retention_reaches_the_store(monkeypatch):
    monkeypatch.setenv("SPECWATCH_RETAIN_WINDOWS", "7200")
    store = load(None, {"retain_minutes": 7 * 86400}).store_config()
    assert (store.retain_windows, store.retain_minutes, store.retain_hours) == (7200, 7 * 86400, 400 * 86400)
