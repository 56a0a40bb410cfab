"""The redaction helper: what it hides in free text and in formatted log records."""

from __future__ import annotations

import logging

import pytest

from specwatch_core import redact


@pytest.mark.parametrize("text, shown", [
    ("db postgresql://spec:hunter22@db:5432/x?sslmode=require", "db postgresql://spec:***@db:5432/x?sslmode=require"),
    ("http://u:p4ss@hooks.example/x?token=abc123&ok=1", "http://u:***@hooks.example/x?token=***&ok=1"),
    ("https://hooks.slack.com/services/T000A/B000B/Xy12aB34cD56eF78gH90",
     "https://hooks.slack.com/services/T000A/B000B/***"),
    ("for url 'http://127.0.0.1:9/hook?api_key=zzz'", "for url 'http://127.0.0.1:9/hook?api_key=***'"),
    ("Authorization: Bearer abcdefgh12345", "Authorization: Bearer ***"),
    ("http://127.0.0.1:8790/v1/decision?domain=code", "http://127.0.0.1:8790/v1/decision?domain=code"),
    ("sqlite:////tmp/pytest-of-x/served.db", "sqlite:////tmp/pytest-of-x/served.db"),
])
def test_redact_hides_credentials_in_urls_and_headers(text, shown):
    assert redact.redact(text) == shown


def test_remembered_secrets_are_hidden_anywhere(caplog):
    redact.remember("quite-secret-token-9876")
    redact.remember_url("postgresql://u:pw-from-url-55@h/db?password=also-this-1")
    assert redact.redact("x quite-secret-token-9876 y pw-from-url-55 also-this-1") == "x *** y *** ***"


def test_the_formatter_redacts_messages_arguments_and_tracebacks():
    redact.remember("formatter-secret-4242")
    formatter = redact.RedactingFormatter("%(message)s")
    try:
        raise ValueError("boom formatter-secret-4242")
    except ValueError:
        import sys

        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "url %s", ("http://a:b-pass@h/",),
                                   sys.exc_info())
    out = formatter.format(record)
    assert "formatter-secret-4242" not in out and "b-pass" not in out and "url http://a:***@h/" in out
