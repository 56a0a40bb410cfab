"""End to end through a real `specwatch serve` process on a loopback port, SQLite in tmp_path."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections import defaultdict

import httpx
import pytest

from served import CLI, REPO, Served, random_records, tiny_model_dirs

# Records older than a sidecar's start are counted in the first window after it (a previous process of the
# pod may have written theirs), which may begin a few seconds in the future: query up to well past it.
UNTIL = ("--until", "2099-01-01T00:00:00")
GRACE = 10.0  # Kubernetes' default termination grace period: the contract, not a speed measurement


def expected_totals(records: list[dict]) -> dict[tuple[str, int], dict[str, float]]:
    out: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in records:
        t = out[(r["domain"], r["lookahead"])]
        t["steps"] += 1
        for name in ("accepted", "emitted", "draft_seconds", "verify_seconds"):
            t[name] += r[name]
    return out


def expected_positions(records: list[dict]) -> dict[tuple[str, int], tuple[int, int]]:
    """(reached, accepted) per (domain, position): positions up to and including the first rejection."""
    out: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        for i in range(1, r["lookahead"] + 1):
            if r["accepted"] >= i - 1:
                out[(r["domain"], i)][0] += 1
            if r["accepted"] >= i:
                out[(r["domain"], i)][1] += 1
    return {k: tuple(v) for k, v in out.items()}


def test_records_in_stats_out_exactly(tmp_path):
    records = random_records(3000, seed=1)
    with Served(tmp_path) as s:
        for i in range(0, len(records), 500):
            r = s.client.post("/v1/steps", json={"records": records[i:i + 500]})
            assert (r.status_code, r.json()) == (202, {"accepted": 500})
        code, _ = s.stop(timeout=GRACE)
        assert code == 0, s.output()
        rows = s.cli("stats", "--by", "domain", "--by", "lookahead", *UNTIL)
        positions = s.cli("stats", "--by", "domain", "--by", "position", *UNTIL)
    want = expected_totals(records)
    assert {(r["domain"], r["lookahead"]) for r in rows} == set(want)
    for row in rows:
        w = want[(row["domain"], row["lookahead"])]
        n = row["steps"]
        assert n == w["steps"]
        assert round(row["tokens_per_step"] * n) == w["emitted"]
        if row["lookahead"]:
            assert round(row["mean_accepted"] * n) == w["accepted"]
        assert row["draft_ms"] * n / 1000 == pytest.approx(w["draft_seconds"], rel=1e-9, abs=1e-12)
        assert row["verify_ms"] * n / 1000 == pytest.approx(w["verify_seconds"], rel=1e-9)
    got = {(p["domain"], p["position"]): (p["reached"], p["accepted"]) for p in positions}
    assert got == expected_positions(records)


def test_sigterm_flushes_everything_posted_before_it(tmp_path):
    batches = [random_records(50, seed=i) for i in range(1000)]
    accepted, uncertain, started = [], [], threading.Event()
    with Served(tmp_path) as s:
        def post() -> None:
            with httpx.Client(base_url=s.url, timeout=10.0) as client:
                for batch in batches:
                    try:
                        r = client.post("/v1/steps", json={"records": batch})
                    except httpx.TransportError:
                        uncertain.append(batch)  # sent around the signal: the response never came
                        return
                    if r.status_code != 202:
                        return  # the server is going away
                    accepted.extend(batch)
                    if len(accepted) >= 1000:
                        started.set()

        poster = threading.Thread(target=post)
        poster.start()
        assert started.wait(60), s.output()
        code, _ = s.stop(timeout=GRACE)
        poster.join()
        assert code == 0, s.output()
        assert "shut down cleanly" in s.output()
        (row,) = s.cli("stats", "--by", "pod", *UNTIL)
    stored = row["steps"]
    assert len(accepted) <= stored <= len(accepted) + 50 * len(uncertain)
    assert len(accepted) < 50 * len(batches)  # the signal did arrive mid-stream


def cost_record(domain: str, k: int) -> dict:
    """Speculation loses here: a plain step is 10 ms per token; a speculative one accepts nothing and pays
    4 ms per drafted token on top of a 12 ms verify pass."""
    return {"domain": domain, "lookahead": k, "accepted": 0, "emitted": 1, "draft_seconds": 0.004 * k,
            "verify_seconds": 0.012 if k else 0.010, "target_version": "t1", "draft_version": "d1",
            "accepted_mask": [0] * k}


def test_decisions_turn_speculation_off_when_costs_make_it_lose(tmp_path):
    with Served(tmp_path, env={"SPECWATCH_ALERTS_SECONDS": "0.5"}) as s:
        first = s.client.get("/v1/decision", params={"domain": "slow"}).json()
        assert first["speculate"] and first["lookahead"] > 0 and first["policy"] == "confidence-stop+switch"
        seen = []
        for _ in range(600):
            d = s.client.get("/v1/decision", params={"domain": "slow"}).json()
            seen.append(d["speculate"])
            r = s.client.post("/v1/steps", json={"records": [cost_record("slow", d["lookahead"])] * 5})
            assert r.status_code == 202
            if len(seen) >= 60 and sum(seen[-60:]) <= 6:  # off, apart from rare probes
                break
        assert len(seen) < 600, f"still speculating: {seen[-60:]}"
        off = s.client.get("/v1/decision", params={"domain": "slow"}).json()
        assert off["domain"] == "slow" and set(off) == {"domain", "lookahead", "speculate", "policy", "reason"}
        code, _ = s.stop(timeout=GRACE)
        assert code == 0, s.output()
        alerts = s.cli("alerts", "--state", "all")
    assert any(a["alertname"] == "SpeculationDisabled" and a["domain"] == "slow" for a in alerts), alerts


def test_bad_requests_get_4xx_naming_the_field_and_store_nothing(tmp_path):
    token = "e2e-token-0123456789"
    env = {"SPECWATCH_TOKEN": token, "SPECWATCH_BODY_LIMIT": "65536"}
    auth = {"Authorization": f"Bearer {token}"}
    good = random_records(3, seed=5)
    bad = dict(good[1], accepted=good[1]["lookahead"] + 1)
    with Served(tmp_path, env=env) as s:
        r = s.client.post("/v1/steps", json={"records": [good[0], bad, good[2]]}, headers=auth)
        assert r.status_code == 422 and r.json()["message"].startswith("record 1: ")
        assert r.json()["detail"][0]["loc"][:3] == ["body", "records", 1]
        r = s.client.post("/v1/steps", json={"records": [good[0], dict(good[1], lookahead="4")]}, headers=auth)
        assert (r.status_code, r.json()["message"]) == (422, "record 1: lookahead: Input should be a valid integer")
        r = s.client.post("/v1/steps", json={"records": good})
        assert r.status_code == 401
        r = s.client.post("/v1/steps", json={"records": random_records(2000, seed=6)}, headers=auth)
        assert r.status_code == 413
        r = s.client.get("/v1/decision")
        assert (r.status_code, r.json()["message"]) == (422, "domain: required field is missing")
        r = s.client.get("/v1/alerts", params={"state": "open"})
        assert r.status_code == 422 and r.json()["message"].startswith("state: ")
        assert s.client.get("/readyz").json()["status"] == "ready"
        code, _ = s.stop(timeout=GRACE)
        assert code == 0, s.output()
        assert s.cli("stats", "--by", "domain", *UNTIL) == []


def test_a_bad_configuration_stops_the_start_with_a_clear_message(tmp_path):
    env = {"SPECWATCH_PORT": "http", "SPECWATCH_DB": f"sqlite:///{tmp_path / 'x.db'}"}
    import os

    done = subprocess.run([*CLI, "serve"], cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert "config: port: must be an integer, got 'http' (from SPECWATCH_PORT)" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT])
def test_ctrl_c_shuts_down_cleanly_too(tmp_path, sig):
    records = random_records(100, seed=9)
    with Served(tmp_path) as s:
        assert s.client.post("/v1/steps", json={"records": records}).status_code == 202
        code, _ = s.stop(sig, timeout=GRACE)
        assert code == 0, s.output()
        (row,) = s.cli("stats", "--by", "pod", *UNTIL)
    assert row["steps"] == 100


def test_generate_through_the_served_decoder_is_ready_only_with_its_models(tmp_path):
    target, draft = tiny_model_dirs(tmp_path)
    env = {"SPECWATCH_TARGET_DIR": str(target), "SPECWATCH_DRAFT_DIR": str(draft), "SPECWATCH_DEVICE": "cpu"}
    with Served(tmp_path, env=env) as s:
        deadline = time.monotonic() + 120
        while (ready := s.client.get("/readyz")).status_code != 200:
            assert ready.json()["checks"]["models"] == "loading", ready.json()
            assert time.monotonic() < deadline, s.output()
            time.sleep(0.2)
        r = s.client.post("/v1/generate", json={"prompt": "GET /index.html", "domain": "logs", "max_tokens": 32})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["tokens"] == 32 and out["steps"] == sum(out["lookaheads"].values())
        code, _ = s.stop(timeout=GRACE)
        assert code == 0, s.output()
        (row,) = s.cli("stats", "--by", "domain", *UNTIL)
    assert (row["domain"], row["steps"]) == ("logs", out["steps"])


@pytest.mark.parametrize("deferred", [False, True], ids=["RingClient", "DeferredRingClient"])
def test_steps_over_the_step_ring_are_all_stored_even_when_sigterm_comes_at_once(tmp_path, deferred):
    from agent.ring.client import RingClient
    from agent.ring.deferred import DeferredRingClient
    from specwatch_core.records import StepRecord

    name = f"specwatch-e2e-{tmp_path.name[-20:]}"
    records = random_records(3000, seed=4)
    kind = DeferredRingClient if deferred else RingClient
    with kind(name, pod="e2e") as ring, Served(tmp_path, env={"SPECWATCH_RING": name}) as s:
        assert s.client.get("/readyz").json()["checks"]["ring"] == "ok"
        for r in records[:100]:
            ring.record(StepRecord(**r))
        assert ring.drain(30.0), "the sidecar reads the ring"
        deadline = time.monotonic() + 30.0  # read first, then fed and decided: the decision follows shortly
        while "from the sidecar (ring" not in ring.decide("code").reason and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ring.decide("code").reason.endswith(f"from the sidecar (ring {name!r})")
        assert "specwatch_ring_records_read_total 100.0" in s.client.get("/metrics").text
        for r in records[100:]:
            ring.record(StepRecord(**r))
        if deferred:  # SIGTERM reads out the ring; steps still queued in the decoding process wait for the next
            assert ring.flush(30.0)
        code, _ = s.stop(timeout=GRACE)  # no wait for the reader: the shutdown reads what the ring holds
        assert code == 0, s.output()
        assert ring.pending == 0 and ring.dropped == 0
        rows = s.cli("stats", "--by", "domain", "--by", "lookahead", *UNTIL)
    want = expected_totals(records)
    assert {(r["domain"], r["lookahead"]) for r in rows} == set(want)
    for row in rows:
        w = want[(row["domain"], row["lookahead"])]
        assert row["steps"] == w["steps"] and round(row["tokens_per_step"] * row["steps"]) == w["emitted"]
