"""The real model's draft distillation: which prompts the teacher answers, a draft trained further from an
existing one, and the command a shipped draft names to rebuild it (no real model or engine needed)."""

from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from agent.decoding.versions import weights_version
from agent.pretrained.distill import build_draft, rebuild_command, save_streams
from agent.pretrained.draft import DraftShape, new_draft
from agent.pretrained.prepare import Prepared
from agent.pretrained.rebuild import training_prompts
from agent.workload import prompts as workload


def test_the_teacher_answers_every_workload_domain_from_the_training_split():
    chosen = training_prompts(per_domain=5)
    by_domain = {}
    for p in chosen:
        by_domain.setdefault(p.domain, []).append(p)
    assert set(by_domain) == set(workload.domains()) and len(by_domain) >= 7
    for domain, items in by_domain.items():
        assert items == workload.load(domain, "train")[:5]
    assert {p.split for p in chosen} == {"train"}


def test_a_domain_with_fewer_training_prompts_gives_all_it_has():
    largest = max(len(workload.load(d, "train")) for d in workload.domains())
    counts = {}
    for p in training_prompts(per_domain=largest):
        counts[p.domain] = counts.get(p.domain, 0) + 1
    assert counts == {d: len(workload.load(d, "train")) for d in workload.domains()}


def test_per_domain_below_one_is_refused():
    with pytest.raises(ValueError, match="per_domain"):
        training_prompts(per_domain=0)


def _tiny_target(vocab=64):
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    return LlamaForCausalLM(config)


def test_the_shape_read_back_from_a_drafts_config_is_the_one_it_was_made_with():
    shape = DraftShape(hidden=16, layers=1, heads=2, kv_heads=1, intermediate=24, max_positions=64)
    assert DraftShape.of(new_draft(_tiny_target(), shape).config) == shape


def test_a_draft_trained_further_starts_from_the_given_weights(tmp_path: Path):
    shape = DraftShape(hidden=16, layers=1, heads=2, kv_heads=1, intermediate=24, max_positions=64)
    start = tmp_path / "start"
    new_draft(_tiny_target(), shape, seed=3).save_pretrained(start)
    started = weights_version(LlamaForCausalLM.from_pretrained(start))
    prepared = Prepared("tiny", tmp_path, tmp_path / "t.gguf", "t", tmp_path / "no-target-needed", start, None, None)
    save_streams(prepared, [[(i * 7) % 60 + 3 for i in range(200)]] * 3, {"prompts": 3, "per_domain": 1})
    info = build_draft(prepared, tmp_path / "out", steps=3, batch_size=2, seq_len=16, start=start, threads=1,
                       precision="float32")
    assert info["started_from"] == started
    assert info["shape"] == shape.__dict__
    assert info["lr"] == pytest.approx(1e-3)  # halved for a fine-tune
    trained = LlamaForCausalLM.from_pretrained(tmp_path / "out")
    assert weights_version(trained) == info["version"] != started


def test_the_rebuild_command_names_how_the_draft_was_trained():
    fresh = {"steps": 600, "teacher": {"per_domain": 64}, "started_from": None}
    assert rebuild_command("m", fresh) == "specwatch models pretrained --name m --distill --steps 600 " \
                                          "--per-domain 64 --ship"
    further = {"steps": 200, "teacher": {"per_domain": 48}, "started_from": "abc123"}
    assert rebuild_command("m", further).endswith("--per-domain 48 --from-draft --ship  # with draft abc123 installed")
