"""Domain resolution: header, then rules in order, then default; names validated like StepRecord.domain."""

from __future__ import annotations

import pytest

from agent.proxy.domains import DEFAULT, DomainError, DomainRule, resolve

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
