"""The trace replay of bench/replay.py on hand-made traces, and the traces against the real decoder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: bench/ is not installed

from bench import replay as rp  # noqa: E402
from policies.base import Decision, Policy  # noqa: E402


def trace(m, kmax=8, conf=0.5):
    length = len(m)
    m = [min(x, kmax, length - 1 - i) for i, x in enumerate(m)]
    return rp.RequestTrace(tuple(m), tuple(tuple([conf] * min(kmax, length - 1 - i)) for i in range(length)))


def request(t, u=None, domain="code", phase=1, index=0):
    return rp.Request(index, phase, domain, 0, t, tuple(u if u is not None else [0.5] * len(t.m)))


def costs(per_n, kmax=8):
    """Deterministic costs: every sample of n drafted tokens takes per_n(n) seconds (draft 0.1 of it)."""
    return rp.Costs({n: ((0.1 * per_n(n), 0.9 * per_n(n)),) for n in range(kmax + 1)})


class Script(Policy):
    """Plays a given list of lookaheads and records every outcome it is fed."""

    def __init__(self, ks, kmax=8, stop=None):
        super().__init__(kmax)
        self.ks, self.seen, self.stop = list(ks), [], stop

    def choose(self, domain):
        return self.decision(self.ks.pop(0) if self.ks else 0, "script")

    def update(self, domain, outcome):
        self.seen.append(outcome)
        return self

    def stop_drafting(self, domain):
        return self.stop


def test_accepted_is_min_of_m_and_k_and_positions_advance_by_emitted():
    t = trace([3, 0, 0, 2, 5, 1, 0, 0, 0, 0, 0, 0])
    p = Script([2, 4, 4, 4])
    rp.replay(p, [request(t)], costs(lambda n: 1.0))
    # position 0: m=3, K=2 -> 2 accepted, next 3; position 3: m=2, K=4 -> 2, next 6; 6: m=0 -> 0, next 7
    assert [(o.lookahead, o.accepted, o.emitted) for o in p.seen[:4]] == [(2, 2, 3), (4, 2, 3), (4, 0, 1),
                                                                          (4, 0, 1)]
    assert p.seen[0].accepted_mask == (1, 1) and p.seen[1].accepted_mask == (1, 1, 0, 0)
    assert sum(o.emitted for o in p.seen) == len(t.m)


def test_lookahead_is_clamped_to_the_remaining_budget():
    t = trace([0] * 6, kmax=8)
    p = Script([8] * 10)
    rp.replay(p, [request(t)], costs(lambda n: 1.0))
    # at position i only L - 1 - i tokens may be drafted: 5, 4, 3, 2, 1, 0
    assert [o.lookahead for o in p.seen] == [5, 4, 3, 2, 1, 0]
    assert all(len(o.draft_confidence) == o.lookahead for o in p.seen)


def test_stop_rule_ends_drafting_where_the_decoder_would():
    conf = ((0.9, 0.8, 0.2, 0.9), (0.1, 0.9, 0.9, 0.9), (0.9, 0.9, 0.9), (0.9, 0.9), (0.9,), ())
    t = rp.RequestTrace((4, 0, 0, 0, 0, 0), conf)

    def stop(c, j):
        return c < 0.5

    assert rp.drafted_count(t, 0, 4, stop) == 3  # stops after the third token (0.2): it is kept
    assert rp.drafted_count(t, 1, 4, stop) == 1
    assert rp.drafted_count(t, 2, 4, stop) == 3  # clamped to L - 1 - 2 = 3 tokens, never stopped
    assert rp.drafted_count(t, 0, 2, stop) == 2  # not asked after the last token
    p = Script([4], stop=stop)
    rp.replay(p, [request(t)], costs(lambda n: 1.0))
    assert (p.seen[0].lookahead, p.seen[0].accepted) == (3, 3)


def test_costs_pick_quantiles_of_sorted_samples():
    c = rp.Costs({0: ((0.0, 3.0), (0.0, 1.0), (0.0, 2.0)), 1: ((0.1, 9.0), (0.1, 5.0), (0.1, 7.0))})
    assert c.pick(0, 0.0) == (0.0, 1.0) and c.pick(0, 0.5) == (0.0, 2.0) and c.pick(0, 0.999) == (0.0, 3.0)
    assert c.total(1, 0.0) == pytest.approx(5.1) and c.mean(0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="drafted count 1"):
        rp.Costs({0: ((0.0, 1.0),), 2: ((0.0, 1.0),)})


def test_every_policy_gets_the_same_cost_at_the_same_position_and_count():
    tr = {"target-v1": {"code": [trace([1, 2, 0, 3, 0, 1, 4, 0, 0, 0, 0, 0]), trace([2] * 12)],
                        "prose": [trace([0] * 12)]}}
    tr["target-v2"] = tr["target-v1"]
    samples = {n: tuple((0.001 * (n + 1), 0.01 * j + 0.001 * n) for j in range(50)) for n in range(9)}
    c = rp.Costs(samples)
    stream = rp.build_stream(tr, 20, seed=3)
    assert stream == rp.build_stream(tr, 20, seed=3)
    assert stream != rp.build_stream(tr, 20, seed=4)
    assert {r.domain for r in stream} == {"code", "prose"} and [r.phase for r in stream] == [1] * 20 + [2] * 20
    seen = {}
    for ks in ([1] * 400, [2, 0, 3] * 200, [3] * 400):
        p = Script(ks)
        order = []
        original = p.update

        def update(domain, outcome, order=order, original=original):
            order.append(outcome)
            return original(domain, outcome)

        p.update = update
        rp.replay(p, stream, c)
        # rebuild (request, position) of each step to compare costs across policies
        it = iter(order)
        for req in stream:
            i = 0
            while i < len(req.trace.m):
                o = next(it)
                key = (req.index, i, o.lookahead)
                assert seen.setdefault(key, (o.draft_seconds, o.verify_seconds)) == (o.draft_seconds,
                                                                                     o.verify_seconds)
                i += o.emitted
    # a step's cost is the u of its (request, position): the same quantile for every drafted count
    req = stream[0]
    for i in range(len(req.trace.m)):
        for n in range(min(8, len(req.trace.m) - 1 - i) + 1):
            o = rp.step_outcome(req, i, n, c)
            assert (o.draft_seconds, o.verify_seconds) == c.pick(n, req.u[i])
    shared = [k for k in seen if k[2] == 0]
    assert len(shared) > 10  # policies did meet at the same positions
    # and the cost depends on the position's u, not on a policy's own step count
    assert len({seen[k] for k in shared}) > 5


def test_step_oracle_uses_expected_costs_not_the_samples():
    # two samples per count; a clairvoyant oracle would skip the slow position 1 with K = 1 at 0
    c = rp.Costs({0: ((0.0, 1.0), (0.0, 3.0)), 1: ((0.0, 1.5), (0.0, 1.5))})
    req = request(trace([1, 0, 0], kmax=1), u=[0.0, 0.9, 0.0])
    seconds, path = rp.step_oracle_seconds(req, c, kmax=1)
    # K=0 every step: 3 x mean 2 = 6; K=1 at 0 (accepts 1) then K=0: 1.5 + 2 = 3.5
    assert seconds == pytest.approx(3.5) and path == [1, 0]


def test_step_oracle_on_a_case_computed_by_hand():
    # L = 4, m = [3, 0, 1, 0]; cost(K) = 1 + K/2. Options from 0: K=0 -> 1 + t1; K=3 -> 2.5 (all done)
    # t3 = 1; t2: K=0 -> 1 + t3 = 2, K=1 -> 1.5 + t4 = 1.5 -> 1.5; t1: K=0 -> 1 + 1.5 = 2.5,
    # K>=1 (m=0) -> 1.5 + t2 = 3 -> 2.5; t0: K=0 -> 3.5, K=1 -> 1.5 + t2 = 3.0, K=2 -> 2 + t3 = 3,
    # K=3 -> 2.5 + t4 = 2.5 -> 2.5 with path [3]
    t = trace([3, 0, 1, 0])
    c = costs(lambda n: 1 + n / 2)
    seconds, path = rp.step_oracle_seconds(request(t), c, kmax=8)
    assert seconds == pytest.approx(2.5) and path == [3]
    seconds, path = rp.step_oracle_seconds(request(t), c, kmax=2)
    assert seconds == pytest.approx(3.0)
    # m = [1, 0, 0, 0]: t3 = 1, t2 = min(1 + 1, 1.5 + 1) = 2, t1 = min(1 + 2, 1.5 + 2) = 3,
    # t0 = min(K=0: 1 + 3, K=1: 1.5 + t2 = 3.5, K=2: 2 + t2 = 4, K=3: 2.5 + t2 = 4.5) = 3.5
    seconds, path = rp.step_oracle_seconds(request(trace([1, 0, 0, 0])), c, kmax=8)
    assert seconds == pytest.approx(3.5) and path == [1, 0, 0]
    # no constant K is faster than the oracle on any request
    for k in range(9):
        r = rp.replay(rp.Constant(k), [request(t)], c)
        assert r.total().seconds >= 2.5 - 1e-12


def test_step_oracle_bounds_every_policy_on_random_traces():
    import random

    rng = random.Random(0)
    reqs = []
    for j in range(30):
        m, length = [], 20
        for i in range(length):
            n = min(8, length - 1 - i)
            a = 0
            while a < n and rng.random() < 0.7:
                a += 1
            m.append(a)
        reqs.append(request(trace(m), [rng.random() for _ in m], index=j))
    # one sample per count: a policy's cost is then exactly the oracle's expected cost
    c = rp.Costs({n: ((0.01 * n, 0.1 + 0.02 * n + 0.05 * rng.random()),) for n in range(9)})
    oracle = rp.step_oracle(reqs, c, 8).total()
    runs, best = rp.fixed_oracle(reqs, c, 8)
    assert all(r.total().goodput <= oracle.goodput + 1e-9 for r in runs.values())
    p = Script([rng.randrange(9) for _ in range(2000)], stop=lambda conf, j: j >= 2)
    assert rp.replay(p, reqs, c).total().goodput <= oracle.goodput + 1e-9
    k, g = best[("code", 1)]
    assert g == max(r.cells[("code", 1)].goodput for r in runs.values()) == runs[k].cells[("code", 1)].goodput


def test_fixed_oracle_picks_the_best_k_per_domain_and_phase():
    tr = {"target-v1": {"code": [trace([8, 7, 6, 5, 4, 3, 2, 1, 0, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0])],
                        "logs": [trace([0] * 20)]},
          "target-v2": {"code": [trace([0] * 20)], "logs": [trace([2, 1, 0] * 6 + [0, 0])]}}
    c = costs(lambda n: 1 + 0.1 * n)
    stream = rp.build_stream(tr, 10, seed=0)
    _, best = rp.fixed_oracle(stream, c, 8)
    assert best[("code", 1)][0] == 8 and best[("code", 2)][0] == 0 and best[("logs", 1)][0] == 0
    assert best[("logs", 2)][0] == 2


def test_reaction_step_finds_when_a_policy_stays_off():
    off, on = [False], [True]
    assert rp.reaction_step(on * 120 + off * 200, window=50) == 120
    # isolated speculating steps (<= 10% of a window) after settling are allowed; steps that never settle are not
    assert rp.reaction_step(on * 30 + (off * 19 + on) * 10, window=50) == 30
    assert rp.reaction_step((on * 10 + off * 10) * 20, window=50) is None
    assert rp.reaction_step(off * 40, window=50) is None  # too few steps to tell
    assert rp.reaction_step(off * 60, window=50) == 0


def test_probe_decisions_do_not_count_as_speculating():
    class Prober(Script):
        def choose(self, domain):
            d = super().choose(domain)
            return Decision(d.lookahead, d.lookahead > 0, "switch: off, probing K=2" if d.lookahead else "off")

    t = trace([0] * 12)
    p = Prober([2, 0, 0, 0, 2, 0, 0, 0, 0, 0])
    r = rp.replay(p, [request(t, phase=2)], costs(lambda n: 1.0))
    assert r.speculating_after_update["code"] == [False] * 12
    r = rp.replay(Script([2, 0, 0, 0, 2, 0, 0, 0, 0, 0]), [request(t, phase=2)], costs(lambda n: 1.0))
    assert r.speculating_after_update["code"][:5] == [True, False, False, False, True]


def test_lookahead_outside_the_traces_is_an_error():
    with pytest.raises(ValueError, match="outside"):
        rp.replay(Script([9], kmax=9), [request(trace([0] * 12))], costs(lambda n: 1.0))


def test_trace_files_are_deterministic(tmp_path):
    data = {"format": rp.FORMAT, "meta": {"kmax": 2},
            "traces": {"target-v1": {"code": [{"m": [1, 0, 0], "conf": [[0.5, 0.25], [0.75], []]}]}}}
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    rp.write_json_gz(a, data)
    rp.write_json_gz(b, data)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes()[4:8] == bytes(4)  # no timestamp in the gzip header
    parsed = rp.parse_traces(rp.read_json_gz(a))
    assert parsed["target-v1"]["code"][0] == rp.RequestTrace((1, 0, 0), ((0.5, 0.25), (0.75,), ()))
    with pytest.raises(ValueError, match="m\\[0\\]"):
        rp.RequestTrace((3, 0), ((0.5,), ()))


# -- the traces against the real decoder ---------------------------------------------------------------
@pytest.fixture(scope="module")
def models():
    from tiny_models import llama, perturbed

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    target = llama(vocab=32, layers=2, width=32, seed=0, logit_scale=6.0)
    yield target, perturbed(target, 0.2, seed=1)
    torch.set_num_threads(previous)


def test_replaying_a_trace_reproduces_the_real_decoder_step_by_step(models):
    """Greedy: the decoder at fixed K drafts and accepts exactly what the trace predicts, at every step."""
    from bench.traces import check_against_decoder, greedy_continuation, record_acceptance

    target, draft = models
    for prompt in ([5, 17, 9, 30, 2, 11, 23], [1, 2, 3, 4, 5]):
        t, cont = record_acceptance(target, draft, prompt, 40, 6)
        assert cont == greedy_continuation(target, prompt, 40)
        assert len(set(t.m)) >= 5  # a trace with variety: the comparison below can tell K apart
        for k in (1, 2, 3, 4, 6):
            assert check_against_decoder(target, draft, prompt, t, cont, k) == []
    # a stop rule on the draft's confidence: a threshold no recorded confidence is near
    confs = sorted({c for row in t.conf for c in row})
    gaps = [(b - a, (a + b) / 2) for a, b in zip(confs, confs[1:]) if a >= confs[len(confs) // 4]]
    threshold = max(gaps)[1]

    def stop(c, j):
        return c < threshold

    assert check_against_decoder(target, draft, prompt, t, cont, 6, stop) == []
    # and the check does catch a wrong trace
    wrong = rp.RequestTrace(tuple(min(x + 1, len(c)) for x, c in zip(t.m, t.conf)), t.conf)
    assert check_against_decoder(target, draft, prompt, wrong, cont, 4) != []
