import json

import pytest

from agent.decoding.versions import weights_version
from agent.kit import layout
from agent.kit.distill import distill, read_prompts
from agent.kit.load import load_model


def test_read_prompts_formats(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(["x", "y"]))
    (tmp_path / "b.json").write_text(json.dumps({"code": ["x"], "logs": ["y"]}))
    (tmp_path / "c.jsonl").write_text('{"prompt": "x"}\n\n{"text": "y"}\n"z"\n')
    assert read_prompts(tmp_path / "a.json") == ["x", "y"]
    assert read_prompts(tmp_path / "b.json") == ["x", "y"]
    assert read_prompts(tmp_path / "c.jsonl") == ["x", "y", "z"]
    # the sidecar's live sample (GET /v1/sample), also when it holds a single prompt
    (tmp_path / "d.jsonl").write_text('{"domain": "code", "text": "def f():"}\n')
    assert read_prompts(tmp_path / "d.jsonl") == ["def f():"]


def test_distill_refreshes_the_draft(kit_home, tmp_path):
    root = layout.kit_dir("tiny", kit_home)
    prompts = layout.load_prompts(root)["logs"]
    info = distill(root / "target-v2", root / "draft", tmp_path / "fresh", prompts=prompts, steps=4,
                   batch_size=2, new_tokens=16)
    fresh = load_model(tmp_path / "fresh", device="cpu")
    assert info["version"] == weights_version(fresh) != info["draft_version_before"]
    assert info["target_version"] == layout.read_manifest(root)["versions"]["target-v2"]
    assert json.loads((tmp_path / "fresh" / "distill.json").read_text())["steps"] == 4
    # Without prompts, the kit's own training text is used.
    info = distill(root / "target-v2", root / "draft", tmp_path / "kit-text", kit_root=root, steps=2,
                   batch_size=2)
    assert "kit training text" in info["text"] and info["replay"] == 1.0
    info = distill(root / "target-v2", root / "draft", tmp_path / "mixed", prompts=prompts, kit_root=root,
                   replay=0.5, steps=2, batch_size=2, new_tokens=8)
    assert "kit training text" in info["text"] and "prompts" in info["text"]


def test_replay_needs_the_kit(kit_home, tmp_path):
    root = layout.kit_dir("tiny", kit_home)
    with pytest.raises(FileNotFoundError, match="specwatch models build"):
        distill(root / "target-v2", root / "draft", tmp_path / "x", prompts=["a b c"], kit_root=tmp_path,
                replay=0.5, steps=1)
    with pytest.raises(ValueError, match="replay"):
        distill(root / "target-v2", root / "draft", tmp_path / "x", prompts=["a b c"], replay=1.0, steps=1)
