"""The database black-holed (a real loopback proxy that takes bytes and answers nothing), not a mock:
/readyz still answers within 2 s, ingest keeps acking until the store's unwritten cap and then answers 503
with Retry-After (counted), and once the route heals everything acked is stored."""

from __future__ import annotations

import time

import httpx

from agent.runtime.config import SidecarConfig
from blackhole import BlackHoleProxy
from running import Running
from storage import StatsQuery, Store

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"  # the server the ``schema`` fixture makes a schema on

CAP = 60  # unwritten window rows: each record below is a series of its own


def batch(tag: str, n: int = 5) -> list[dict]:
    return [{"domain": f"{tag}-{i}", "lookahead": 4, "accepted": 2, "emitted": 3, "draft_seconds": 0.001,
             "verify_seconds": 0.01, "target_version": "t1", "draft_version": "d1"} for i in range(n)]


def test_black_holed_database_neither_freezes_the_api_nor_loses_acked_records(schema):
    proxy = BlackHoleProxy(("127.0.0.1", 5432))
    url = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/test?options=-csearch_path%3D{schema}"
    config = SidecarConfig(db=url, pod="outage", policy="heuristic+switch", flush_seconds=0.2,
                           max_unwritten=CAP, db_connect_seconds=1.0, db_statement_seconds=2.0,
                           db_pool_seconds=1.0)
    acked, refused, refused_tags = 0, [], []
    try:
        with Running(config) as r:
            try:
                quick = httpx.Client(base_url=r.url, timeout=2.0)  # the contract: /readyz within 2 s
                assert r.client.post("/v1/steps", json={"records": batch("before")}).status_code == 202
                acked += 5
                assert quick.get("/readyz").status_code == 200

                proxy.pause()
                time.sleep(1.2)  # flushes now hang on the held route; the last probe result expires
                ready = quick.get("/readyz")
                assert ready.status_code == 503, ready.text
                assert ready.json()["checks"]["database"] != "ok"
                # Until the cap refuses (the ingest worker may lag the acks by a few batches), then 5 more.
                i, stop = 0, time.monotonic() + 20.0
                while (len(refused) < 5 or i < 40) and time.monotonic() < stop:
                    answer = r.client.post("/v1/steps", json={"records": batch(f"out{i}")})
                    i += 1
                    if answer.status_code == 503:
                        refused.append(answer)
                        refused_tags.append(f"out{i - 1}")
                        continue
                    assert answer.status_code == 202, answer.text
                    acked += 5
                    time.sleep(0.01)
                assert acked > 5, "ingest stopped acking as soon as the database went away"
                assert refused, "the unwritten cap never refused"
                assert refused[0].headers["Retry-After"] == "1"
                assert "unwritten" in refused[0].json()["message"]
                assert quick.get("/readyz").status_code == 503  # still answering, still not ready
                metrics = r.client.get("/metrics").text
                assert f'specwatch_ingest_refused_total{{reason="unwritten_cap"}} {5.0 * len(refused)}' in metrics

                proxy.resume()
                deadline = time.monotonic() + 30
                while quick.get("/readyz").status_code != 200:
                    assert time.monotonic() < deadline, quick.get("/readyz").text
                    time.sleep(0.2)
                while (after := r.client.post("/v1/steps", json={"records": batch("after")})).status_code != 202:
                    assert after.status_code == 503 and time.monotonic() < deadline, after.text
                    time.sleep(float(after.headers["Retry-After"]))  # as a client should
                acked += 5
            finally:
                proxy.resume()  # a failed check must not leave the shutdown flush hanging
    finally:
        proxy.close()
    direct = Store.open(f"{PG}?options=-csearch_path%3D{schema}", migrate_schema=False)
    try:
        rows = direct.stats(StatsQuery(by=("domain",), until=4102444800.0)).rows
    finally:
        direct.close(flush=False)
    assert sum(row["steps"] for row in rows) == acked
    stored = {row["domain"] for row in rows}
    assert not stored & {f"{tag}-{j}" for tag in refused_tags for j in range(5)}  # refused: nothing kept
