"""Domain resolution: header (UTF-8, or RFC 8187's form), then rules in order, then default; names validated like
StepRecord.domain."""

from __future__ import annotations

import pytest

from agent.proxy.domains import DEFAULT, DomainError, DomainRule, from_header, resolve

RULES = (DomainRule.parse("path:/v1/chat=chat"), DomainRule.parse("model:coder=code"),
         DomainRule.parse("metadata:domain"))


def test_the_header_wins_over_rules():
    assert resolve("law", "/v1/chat/completions", {"model": "coder"}, RULES) == "law"


def test_rules_in_order_then_default():
    assert resolve(None, "/v1/chat/completions", {"model": "coder"}, RULES) == "chat"
    assert resolve(None, "/v1/completions", {"model": "coder"}, RULES) == "code"
    assert resolve(None, "/v1/completions", {"metadata": {"domain": "med"}}, RULES) == "med"
    assert resolve(None, "/v1/completions", {"metadata": {"domain": "\x00"}}, RULES) == DEFAULT
    assert resolve(None, "/v1/completions", {"metadata": "flat"}, RULES) == DEFAULT
    assert resolve(None, "/v1/completions", None, RULES) == DEFAULT


@pytest.mark.parametrize("header", ["", "x" * 65, "tab\there"])
def test_an_invalid_header_names_itself(header):
    with pytest.raises(DomainError, match="X-Specwatch-Domain"):
        resolve(header, "/v1/completions", None, RULES)


@pytest.mark.parametrize("text, message", [("model", "write"), ("colour:x=y", "kind"), ("model:x", "DOMAIN"),
                                           ("path:v1=x", "start with /"), ("metadata:k=v", "takes no"),
                                           ("model:x=" + "y" * 65, "longer")])
def test_bad_rules_are_refused_naming_the_problem(text, message):
    with pytest.raises(DomainError, match=message):
        DomainRule.parse(text)


@pytest.mark.parametrize("raw, name", [("café".encode(), "café"), (b"UTF-8''caf%C3%A9", "café"),
                                       (b"utf-8'fr'caf%c3%a9", "café"), (b"plain", "plain"),
                                       (b"it''s", "it''s"), (b"ISO-8859-1''caf%E9", "ISO-8859-1''caf%E9")])
def test_the_header_is_read_as_utf8_or_in_rfc8187_form(raw, name):
    assert from_header(raw) == name


@pytest.mark.parametrize("raw", ["café".encode("latin-1"), b"UTF-8''caf%E9", b"\xff"])
def test_a_header_that_is_not_utf8_is_refused_saying_how_to_send_it(raw):
    with pytest.raises(DomainError, match=r"X-Specwatch-Domain: not UTF-8 \(byte 0x.. at \d+\).*RFC 8187"):
        from_header(raw)
