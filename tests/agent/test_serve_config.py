"""The serve options of issue 17 from TOML, SPECWATCH_* variables and validation naming the option."""

from __future__ import annotations

import pytest

from agent.runtime import config as cfg
from agent.runtime.config import ConfigError, SidecarConfig


def test_timeouts_and_limits_come_from_the_environment(monkeypatch):
    for name, value in (("DB_CONNECT_SECONDS", "2.5"), ("DB_STATEMENT_SECONDS", "7"), ("DB_POOL_SECONDS", "3"),
                        ("MAX_UNWRITTEN", "1000"), ("GENERATE_CONCURRENCY", "4"), ("GENERATE_QUEUE", "0"),
                        ("READ_TIMEOUT", "9"), ("KEEPALIVE_SECONDS", "2"), ("AUTH", "all"),
                        ("TOKEN", "t" * 20)):
        monkeypatch.setenv(f"SPECWATCH_{name}", value)
    c = cfg.load(None)
    assert (c.db_connect_seconds, c.db_statement_seconds, c.db_pool_seconds) == (2.5, 7.0, 3.0)
    assert (c.max_unwritten, c.generate_concurrency, c.generate_queue) == (1000, 4, 0)
    assert (c.read_timeout, c.keepalive_seconds, c.auth) == (9.0, 2.0, "all")


@pytest.mark.parametrize("options, message", [
    ({"db_statement_seconds": 0}, "db_statement_seconds: must be a positive number of seconds, got 0"),
    ({"read_timeout": float("inf")}, "read_timeout: must be a positive number of seconds, got inf"),
    ({"generate_concurrency": 0}, "generate_concurrency: must be an integer in 1..1024, got 0"),
    ({"max_unwritten": -1}, "max_unwritten: must be an integer in 1..1099511627776, got -1"),
    ({"auth": "all"}, "auth: auth = all needs a token (set token or SPECWATCH_TOKEN)"),
])
def test_bad_values_are_named(options, message):
    with pytest.raises(ConfigError) as info:
        SidecarConfig(**options)
    assert str(info.value) == message


def test_the_source_of_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv("SPECWATCH_DB_POOL_SECONDS", "soon")
    with pytest.raises(ConfigError, match=r"db_pool_seconds: must be a number, got 'soon' \(from SPECWATCH_DB_POOL_SECONDS\)"):
        cfg.load(None)


def test_serve_refuses_auth_all_without_a_token(tmp_path):
    import subprocess

    from served import CLI, REPO

    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SPECWATCH_")}
    done = subprocess.run([*CLI, "serve", "--auth", "all", "--db", f"sqlite:///{tmp_path / 'x.db'}"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "config: auth: auth = all needs a token" in " ".join(done.stderr.split())  # rich wraps lines
