"""What clients send the proxy: a domain header in UTF-8 is stored as sent (one not in UTF-8 is refused
before the engine), domains beyond ``max_domains`` are stored under ``other`` (counted), and a client that
does not finish its request's headers in time is disconnected."""

from __future__ import annotations

import socket
import time

import httpx

from storage import StatsQuery, Store
from tests.proxy.fake_engine import FakeEngine
from tests.proxy.test_proxy import wait_for


def stored_domains(runtime) -> dict[str, int]:
    runtime.sidecar.flush()
    with Store.open(runtime.config.sidecar.db) as store:
        rows = store.stats(StatsQuery(until=time.time() + 60, by=("domain",))).rows
    return {r["domain"]: r["steps"] for r in rows}


def test_a_utf8_domain_is_stored_as_sent_and_one_not_in_utf8_is_refused(engines, proxy):
    engine = FakeEngine()
    url, runtime = proxy({"off": engines(engine)})
    for raw in ("café".encode(), b"UTF-8''caf%C3%A9"):
        answer = httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 3},
                            headers={"X-Specwatch-Domain": raw})
        assert answer.status_code == 200
    refused = httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 3},
                         headers={"X-Specwatch-Domain": "café".encode("latin-1")})
    assert refused.status_code == 400 and "not UTF-8" in refused.json()["error"]["message"]
    assert len(engine.requests) == 2  # refused before the engine
    wait_for(lambda: len(runtime.taken) == 2)
    assert stored_domains(runtime) == {"café": 6}


def test_domains_beyond_max_domains_are_stored_as_other_and_counted(engines, proxy):
    url, runtime = proxy({"off": engines(FakeEngine())}, max_domains=3)
    for i in range(10):
        httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 2},
                   headers={"X-Specwatch-Domain": f"tenant-{i}"}).raise_for_status()
    wait_for(lambda: len(runtime.taken) == 10)
    stored = stored_domains(runtime)
    assert stored == {"tenant-0": 2, "tenant-1": 2, "tenant-2": 2, "other": 14}
    metrics = httpx.get(runtime.admin + "/metrics").text
    assert "specwatch_proxy_domain_overflow_total 7.0" in metrics


def test_a_client_that_does_not_finish_its_headers_is_disconnected(engines, proxy):
    url, _ = proxy({"off": engines(FakeEngine())}, header_seconds=0.5)
    port = int(url.rsplit(":", 1)[1])
    for sent in (b"", b"POST /v1/compl"):  # nothing at all; half a request line
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(sent)
            sock.settimeout(10)
            started = time.monotonic()
            assert sock.recv(100) == b""  # closed by the proxy, not by the 10 s of this test
            assert time.monotonic() - started < 5
    # A whole request in time is answered, also on a kept-alive connection after a pause under the limit.
    with httpx.Client(base_url=url) as client:
        assert client.get("/health").status_code == 200
        time.sleep(0.3)
        assert client.get("/health").status_code == 200
