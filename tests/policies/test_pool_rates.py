"""RateTable: predictions for (domain, pool) cells never measured, a cell's own figures taking over, and a
change in acceptance cutting a domain's evidence."""

from __future__ import annotations

import pytest

from policies.goodput import leviathan_tokens
from policies.pool_rates import RateTable


def table() -> RateTable:
    return RateTable(halflife=32.0, cell_spread=0.25, domain_spread=0.5, jump=4.0)


def feed(rates: RateTable, domain: str, k: int, drafted_per_step: float, accept: float, n: int = 20,
         steps: float = 50.0) -> None:
    """``n`` requests whose steps draft ``drafted_per_step`` and accept Leviathan's length at ``accept``."""
    accepted = leviathan_tokens(accept, drafted_per_step) - 1.0
    for _ in range(n):
        rates.add(domain, k, steps, accepted * steps, drafted_per_step * steps)


def test_a_capped_pool_is_predicted_from_the_domain_level_and_its_acceptance():
    rates = table()
    # Two domains measured on both n-gram pools: k64 drafts twice what k24 does in each.
    feed(rates, "a", 24, 3.0, 0.9)
    feed(rates, "a", 64, 6.0, 0.9)
    feed(rates, "b", 24, 1.0, 0.5)
    feed(rates, "b", 64, 2.0, 0.5)
    # A third, measured on k24 only, drafting 4 a step whose tokens hold at 0.97.
    feed(rates, "c", 24, 4.0, 0.97)
    predicted = rates.predict("c", 64)
    assert predicted.requests == 0.0
    assert predicted.drafted == pytest.approx(8.0, rel=0.05)  # c's level x k64's
    assert predicted.accepted == pytest.approx(leviathan_tokens(0.97, 8.0) - 1.0, rel=0.05)
    assert predicted.accepted > 1.8 * rates.predict("c", 24).accepted  # a longer cap pays where drafts hold
    assert rates.predict("c", 8) is None  # no domain measured k8


def test_a_pool_that_drafts_its_k_is_predicted_at_k_in_every_domain():
    rates = table()
    feed(rates, "a", 4, 4.0, 0.8)
    feed(rates, "a", 24, 2.0, 0.9)
    feed(rates, "b", 24, 5.0, 0.7)
    assert rates.predict("b", 4).drafted == pytest.approx(4.0)  # not b's n-gram level
    new = rates.predict("new", 4)  # a domain never seen: the others' acceptance
    assert new.drafted == pytest.approx(4.0) and new.accepted_se > rates.predict("a", 4).accepted_se


def test_own_measurements_take_over_from_the_model():
    rates = table()
    feed(rates, "a", 24, 3.0, 0.9)
    feed(rates, "a", 64, 6.0, 0.9)
    feed(rates, "b", 24, 3.0, 0.9)
    feed(rates, "b", 64, 3.2, 0.9, n=30)  # b's k64 barely drafts more than its k24: its own figures hold
    assert rates.predict("b", 64).drafted == pytest.approx(3.2, rel=0.05)


def test_a_change_in_acceptance_cuts_the_domain_evidence_and_forget_drops_it():
    rates = table()
    feed(rates, "a", 8, 5.0, 0.95, n=30)
    feed(rates, "b", 8, 5.0, 0.95, n=30)
    before = rates.evidence("a")
    assert rates.add("a", 8, 50.0, 5.0, 250.0) is True  # accepted 0.1 a step where 4.4 was usual
    assert rates.evidence("a") < 0.2 * before and rates.evidence("b") > 10
    assert rates.predict("a", 8).accepted < 3.5  # from 4.4: the old figures weigh a tenth, about 2 requests
    for _ in range(3):
        rates.add("a", 8, 50.0, 5.0, 250.0)
    assert rates.predict("a", 8).accepted < 1.5 and rates.predict("b", 8).accepted > 4.0
    rates.forget("a")
    assert rates.evidence("a") == 0.0 and rates.predict("a", 8).requests == 0.0
