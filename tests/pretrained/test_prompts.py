"""The per-domain prompt sets: enough held-out prompts for 200 requests per domain without repeating one,
and no copied paragraph on both sides of the split."""

import re

import pytest

from agent.pretrained.prompts import DOMAINS, prompts


@pytest.mark.parametrize("domain", DOMAINS)
def test_enough_distinct_heldout_prompts_per_domain(domain):
    held = [p.text for p in prompts(domain, "heldout")]
    assert len(held) >= 200 and len(set(held)) == len(held)
    assert len(prompts(domain, "train")) >= 150


def test_the_sets_are_fixed():
    assert [p.text for p in prompts()] == [p.text for p in prompts()]


def test_a_copied_paragraph_lands_in_one_split():
    def paragraph(text):
        return max(re.split(r"\n\n", text), key=len)

    train = {paragraph(p.text) for p in prompts("copy", "train")}
    held = {paragraph(p.text) for p in prompts("copy", "heldout")}
    assert not train & held


def test_messages_are_one_user_turn():
    p = prompts("chat")[0]
    assert p.messages == [{"role": "user", "content": p.text}]


@pytest.mark.parametrize("kwargs, field", [({"domain": "code"}, "domain"), ({"split": "test"}, "split")])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        prompts(**kwargs)
