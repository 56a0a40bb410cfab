"""Idempotency-Key on POST /v1/steps: a retry is answered once and stored once (read back from the store),
keys are validated, kept apart per token, bounded and forgotten after 10 minutes."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi.testclient import TestClient

from agent.http.api import create_app
from agent.http.idempotency import IdempotencyCache, KeyReused
from api_helpers import stored_steps
from sidecar_fakes import T0, step

TOKEN = "s3cret-token-for-tests"


BATCH = {"records": [step("code", 4, 2, T0).to_dict(), step("chat", 2, 1, T0 + 1).to_dict()]}


def test_the_same_batch_posted_twice_with_one_key_is_stored_once(sidecar):
    client = TestClient(create_app(sidecar))
    first = client.post("/v1/steps", json=BATCH, headers={"Idempotency-Key": "batch-1"})
    again = client.post("/v1/steps", json=BATCH, headers={"Idempotency-Key": "batch-1"})
    assert (first.status_code, first.json()) == (again.status_code, again.json()) == (202, {"accepted": 2})
    assert "Idempotent-Replayed" not in first.headers and again.headers["Idempotent-Replayed"] == "true"
    assert stored_steps(sidecar) == 2


def test_different_keys_and_no_key_store_every_time(sidecar):
    client = TestClient(create_app(sidecar))
    for headers in ({"Idempotency-Key": "a"}, {"Idempotency-Key": "b"}, {}, {}):
        assert client.post("/v1/steps", json=BATCH, headers=headers).status_code == 202
    assert stored_steps(sidecar) == 8


@pytest.mark.parametrize("key, message", [
    ("x" * 129, "Idempotency-Key: must be 1..128 characters, got 129"),
    ("tab\there", "Idempotency-Key: must be printable ASCII text"),
])
def test_a_bad_key_gets_422_naming_the_header_and_nothing_is_stored(sidecar, key, message):
    r = TestClient(create_app(sidecar)).post("/v1/steps", json=BATCH, headers={"Idempotency-Key": key})
    assert r.status_code == 422 and r.json()["message"] == message
    assert stored_steps(sidecar) == 0


def test_a_key_reused_with_another_body_gets_422(sidecar):
    client = TestClient(create_app(sidecar))
    assert client.post("/v1/steps", json=BATCH, headers={"Idempotency-Key": "k"}).status_code == 202
    other = {"records": BATCH["records"][:1]}
    r = client.post("/v1/steps", json=other, headers={"Idempotency-Key": "k"})
    assert r.status_code == 422 and r.json()["message"].startswith("Idempotency-Key: was used with a different")
    assert stored_steps(sidecar) == 2


def test_a_refused_request_is_not_remembered(sidecar):
    client = TestClient(create_app(sidecar))
    bad = {"records": [dict(BATCH["records"][0], accepted=9)]}
    assert client.post("/v1/steps", json=bad, headers={"Idempotency-Key": "k"}).status_code == 422
    assert client.post("/v1/steps", json=bad, headers={"Idempotency-Key": "k"}).status_code == 422
    assert stored_steps(sidecar) == 0


def test_keys_are_kept_apart_per_token(sidecar):
    client = TestClient(create_app(sidecar, token=TOKEN))
    headers = {"Idempotency-Key": "k", "Authorization": f"Bearer {TOKEN}"}
    assert client.post("/v1/steps", json=BATCH, headers=headers).status_code == 202
    assert client.post("/v1/steps", json=BATCH, headers=headers).headers.get("Idempotent-Replayed") == "true"
    assert client.post("/v1/steps", json=BATCH, headers={"Idempotency-Key": "k"}).status_code == 401
    assert stored_steps(sidecar) == 2


class Ticker:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(coroutine):
    return asyncio.run(coroutine)


def test_an_answer_expires_after_ten_minutes():
    clock, calls = Ticker(), []

    async def handle():
        calls.append(1)
        return {"accepted": len(calls)}

    async def scenario():
        cache = IdempotencyCache(clock=clock)
        first = await cache.run("", "k", b"body", handle)
        clock.now = 599.0
        within = await cache.run("", "k", b"body", handle)
        clock.now = 600.5
        after = await cache.run("", "k", b"body", handle)
        return first, within, after

    assert run(scenario()) == (({"accepted": 1}, False), ({"accepted": 1}, True), ({"accepted": 2}, False))


def test_a_concurrent_duplicate_waits_for_the_first_and_replays_it():
    release, calls = None, []

    async def handle():
        calls.append(1)
        await release.wait()
        return {"accepted": 5}

    async def scenario():
        nonlocal release
        release = asyncio.Event()
        cache = IdempotencyCache()
        first = asyncio.create_task(cache.run("", "k", b"b", handle))
        second = asyncio.create_task(cache.run("", "k", b"b", handle))
        await asyncio.sleep(0.01)
        assert not second.done()  # waiting for the first, not handled in parallel
        release.set()
        return await first, await second

    assert run(scenario()) == (({"accepted": 5}, False), ({"accepted": 5}, True))
    assert len(calls) == 1


def test_a_duplicate_of_a_failed_first_is_handled_afresh():
    outcomes = iter([RuntimeError("database away"), {"accepted": 1}])

    async def handle():
        await asyncio.sleep(0)
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def scenario():
        cache = IdempotencyCache()
        first = asyncio.create_task(cache.run("", "k", b"b", handle))
        second = asyncio.create_task(cache.run("", "k", b"b", handle))
        with pytest.raises(RuntimeError):
            await first
        return await second

    assert run(scenario()) == ({"accepted": 1}, False)


def test_the_cache_is_bounded_least_recently_used_first():
    async def handle():
        return {"accepted": 1}

    async def scenario():
        cache = IdempotencyCache(max_entries=3)
        for key in "abc":
            await cache.run("", key, b"", handle)
        await cache.run("", "a", b"", handle)  # a is now the most recently used
        await cache.run("", "d", b"", handle)  # forgets b
        replayed = {key: (await cache.run("", key, b"", handle))[1] for key in "acd"}
        return len(cache), replayed, (await cache.run("", "b", b"", handle))[1]

    size, replayed, b_replayed = run(scenario())
    assert size == 3 and replayed == {"a": True, "c": True, "d": True} and b_replayed is False


def test_key_reuse_is_detected_by_the_cache():
    async def handle():
        return {}

    async def scenario():
        cache = IdempotencyCache()
        await cache.run("", "k", b"one", handle)
        await cache.run("", "k", b"two", handle)

    with pytest.raises(KeyReused):
        run(scenario())


class LosesFirstAnswer(httpx.BaseTransport):
    """An httpx transport over the app that delivers the first request but loses its answer (a timeout
    on the client after the server stored it: the case that double-counted before Idempotency-Key)."""

    def __init__(self, inner):
        self.inner, self.keys = inner, []

    def handle_request(self, request):
        self.keys.append(request.headers.get("Idempotency-Key"))
        response = self.inner.handle_request(request)
        content = response.read()
        if len(self.keys) == 1:
            raise httpx.ReadTimeout("answer lost", request=request)
        return httpx.Response(response.status_code, headers=response.headers, content=content)


def test_the_bundled_client_retries_with_the_same_key_and_the_batch_is_stored_once(sidecar):
    from agent.scrape.scraper import SidecarSink
    from specwatch_core.records import StepRecord

    app_client = TestClient(create_app(sidecar))
    lossy = LosesFirstAnswer(app_client._transport)
    sink = SidecarSink(httpx.Client(transport=lossy, base_url="http://testserver"), "http://testserver",
                       sleep=lambda _: None)
    sink.write([StepRecord.from_dict(r) for r in BATCH["records"]])
    assert len(lossy.keys) == 2 and lossy.keys[0] == lossy.keys[1] and len(lossy.keys[0]) == 32
    assert stored_steps(sidecar) == 2
    sink.write([StepRecord.from_dict(r) for r in BATCH["records"]])  # a new batch: a new key
    assert len(set(lossy.keys)) == 2 and stored_steps(sidecar) == 4
