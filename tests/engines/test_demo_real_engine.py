"""`specwatch demo --real`'s world on the real model and llama.cpp (agent/demo/real_pools.py, real_proxy.py): the
proxy reads target v1 (the adapter loaded at scale 0) off every pool, replayed requests pass through it with
the engine's drafted and accepted counts and its live sample keeps their prompts, the update (the adapter
switched on) shows as another target version on every pool, and a new draft file served in the draft pool's
place shows as another draft version. Skipped without llama-server or without the model's package."""

import pytest

from agent.demo.real_pools import DRAFT_POOL, RealPools
from agent.demo.real_proxy import ProxyProcess, prompt_sets, send
from agent.engines.llamacpp import LlamaServerError, find_binary
from agent.workload.mix import schedule

try:
    find_binary()
except LlamaServerError as exc:
    pytest.skip(f"llama-server not installed ({exc})", allow_module_level=True)


def test_the_update_and_a_new_draft_show_in_the_proxys_versions(real_model, tmp_path):
    from agent.kit.gguf import export_model

    if real_model.lora_gguf is None:
        pytest.skip("target v2's adapter is not installed")
    with RealPools(real_model, tmp_path, pools=("off", DRAFT_POOL)) as pools:
        proxy = ProxyProcess(pools.urls(), f"sqlite:///{tmp_path / 'proxy.db'}", tmp_path / "proxy.log",
                             options=pools.proxy_options(), sample=8)
        try:
            proxy.wait_ready(2)
            v1 = {p["name"]: p for p in proxy.pools()}
            # the adapter loaded at scale 0 is not applied: the base's version alone
            assert all("+" not in p["target_version"] for p in v1.values())
            assert v1[DRAFT_POOL]["draft_version"].startswith("draft.gguf@")

            run = send(proxy.url, schedule("logs=1,chat=1"), prompt_sets(("logs", "chat")), 6.0, concurrency=1,
                       tokens=12)
            assert run.results and all(r.ok for r in run.results)
            assert all(r.drafted >= r.accepted >= 0 for r in run.results)
            assert any(r.drafted > 0 for r in run.results if r.pool == DRAFT_POOL) or \
                all(r.pool != DRAFT_POOL for r in run.results)
            sample = proxy.sample()
            assert set(sample) == {r.domain for r in run.results} and all(sample.values())

            pools.set_adapter(1.0)
            proxy.wait_pools(lambda ps: all(p["target_version"].startswith(v1[n]["target_version"] + "+")
                                            for n, p in ps.items()), "target v2")

            other = tmp_path / "draft-f32.gguf"  # the same weights in other bytes: another version
            export_model(real_model.draft, other, dtype="f32", name="draft", tokenizer_from=real_model.target_gguf)
            pools.replace_draft(other)
            proxy.wait_pools(lambda ps: ps[DRAFT_POOL]["healthy"] and ps[DRAFT_POOL]["draft_version"]
                             not in (None, v1[DRAFT_POOL]["draft_version"]), "the new draft")
            after = {p["name"]: p for p in proxy.pools()}
            assert "+" in after[DRAFT_POOL]["target_version"]  # restarted at the scale in force
        finally:
            proxy.stop()
