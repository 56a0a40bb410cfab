"""The tables of bench/load_report.py on a hand-made log: the in-flight balance of two servers, the proxy
against the best fixed pool, and the rates per core when servers trade cores."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: bench/ is not installed

from bench import load_report as lr  # noqa: E402


def row(domain, server, start, end, n=64, core=None):
    r = {"domain": domain, "n": n, "wall": end - start, "server": server, "start": start, "end": end,
         "pool": server if server in ("off", "k24") else "", "drafted": 0, "accepted": 0,
         "engine": end - start, "prompt": 0.0}
    return r if core is None else {**r, "core": core}


def test_imbalance_is_the_time_mean_of_the_difference():
    # 0-1 s: 3 on server a, 1 on b (apart 2); 1-2 s: 2 and 2 (apart 0)
    rows = [row("chat", "a", 0, 2), row("chat", "a", 0, 2), row("chat", "a", 0, 1), row("chat", "b", 0, 2),
            row("chat", "b", 1, 2)]
    assert lr.imbalance(rows) == pytest.approx(1.0)
    assert lr.imbalance([row("chat", "a", 0, 1)]) is None  # one server: nothing to compare


def test_rates_per_core_and_the_proxy_against_the_best_pool():
    fixed = [row(d, s, 0, w, core=c) for d, s, w, c in
             [("chat", "0", 2, "0"), ("copy", "1", 4, "1"), ("chat", "1", 4, "1"), ("copy", "0", 2, "0")]]
    slow = [{**r, "wall": r["wall"] * 2} for r in fixed]
    proxy = [row("chat", "off", 0, 2, core="1"), row("copy", "k24", 0, 2, core="0")]
    log = {"8": {"off": {"rows": fixed, "wall": 4.0}, "k24": {"rows": slow, "wall": 8.0},
                 "proxy": {"rows": proxy, "wall": 2.0}}}
    s = lr.summary(log)["8"]
    assert s["by"]["off"]["by_core"] == {"0": pytest.approx(32.0), "1": pytest.approx(16.0)}
    assert s["best"] == {"chat": "off", "copy": "off"} and s["schedule"] == "off"
    assert s["proxy_vs_best"]["chat"] == pytest.approx(32 / (128 / 6))
    table = lr.core_table({"summary": {"8": s}})
    assert "| 8 | off | 1 | 16.0 | 50.0% |" in table.splitlines()
    kept = [{k: v for k, v in r.items() if k != "core"} for r in fixed]  # servers that kept their cores
    assert lr.core_table({"summary": lr.summary({"8": {"off": {"rows": kept, "wall": 4.0}}})}) == ""


def test_servers_decoding_time_a_token():
    rows = [row("chat", "0", 0, 2), row("copy", "0", 0, 4), row("chat", "1", 0, 6.4)]
    lines = lr.server_table({"log": {"4": {"off": {"rows": rows, "wall": 6.4}}}}).splitlines()
    assert lines[2:] == ["| 4 | off | 0 | 2 | 46.9 |", "| 4 | off | 1 | 1 | 100.0 |"]
