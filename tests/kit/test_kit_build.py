import dataclasses

import pytest

from agent.decoding.versions import weights_version
from agent.kit import layout
from agent.kit.build import BuildProgress, KitBuildError, build_kit
from agent.kit.load import KitNotBuiltError, load_kit
from kit_micro import MICRO


class Interrupt(Exception):
    pass


class Recorder(BuildProgress):
    def __init__(self, stop_stage=None, stop_step=None, stop_after=None):
        self.events, self.stop_stage, self.stop_step, self.stop_after = [], stop_stage, stop_step, stop_after

    def stage_advanced(self, stage, done, total, loss):
        if stage == self.stop_stage and done == self.stop_step:
            raise Interrupt

    def stage_finished(self, stage, info, skipped):
        self.events.append((stage, skipped))
        if stage == self.stop_after:
            raise Interrupt


def test_tiny_kit_layout(kit_home):
    root = layout.kit_dir("tiny", kit_home)
    manifest = layout.read_manifest(root)
    assert manifest["complete"] and list(manifest["stages"]) == list(layout.STAGES)
    assert set(manifest["versions"]) == set(layout.MODELS)
    assert len(set(manifest["versions"].values())) == 3
    for name in layout.MODELS:
        assert (root / name / "model.safetensors").exists() and (root / name / "config.json").exists()
        assert not (root / f"{name}.ckpt").exists()
    prompts = layout.load_prompts(root)
    assert set(prompts) == {"code", "prose", "logs"}
    assert manifest["stages"]["draft"]["parameters"] * 5 < manifest["stages"]["target-v1"]["parameters"]


def test_versions_match_the_saved_weights(tiny_kit):
    assert tiny_kit.versions["target-v1"] == weights_version(tiny_kit.target_v1)
    assert tiny_kit.versions["draft"] == weights_version(tiny_kit.draft)
    assert tiny_kit.versions["target-v2"] == weights_version(tiny_kit.target_v2)


def test_build_is_deterministic(micro_root, tmp_path):
    again = build_kit(MICRO, home=tmp_path)
    first, second = layout.read_manifest(micro_root), layout.read_manifest(again)
    assert first["versions"] == second["versions"]
    assert layout.load_prompts(micro_root) == layout.load_prompts(again)


def test_interrupted_mid_stage_resumes_to_the_same_kit(micro_root, tmp_path):
    with pytest.raises(Interrupt):
        build_kit(MICRO, home=tmp_path, progress=Recorder(stop_stage="draft", stop_step=6))
    root = layout.kit_dir("micro", tmp_path)
    assert list(layout.read_manifest(root)["stages"]) == ["corpus", "target-v1"]
    assert (root / "draft.ckpt").exists()
    with pytest.raises(KitNotBuiltError, match="unfinished .*done: corpus, target-v1"):
        load_kit("micro", home=tmp_path)
    recorder = Recorder()
    build_kit(MICRO, home=tmp_path, progress=recorder)
    assert recorder.events == [("corpus", True), ("target-v1", True), ("draft", False), ("target-v2", False)]
    manifest = layout.read_manifest(root)
    assert manifest["stages"]["draft"]["resumed_from"] == 6
    assert manifest["versions"] == layout.read_manifest(micro_root)["versions"]


def test_interrupted_after_a_stage_skips_it(micro_root, tmp_path):
    with pytest.raises(Interrupt):
        build_kit(MICRO, home=tmp_path, progress=Recorder(stop_after="target-v1"))
    recorder = Recorder()
    build_kit(MICRO, home=tmp_path, progress=recorder)
    assert recorder.events[:2] == [("corpus", True), ("target-v1", True)]
    assert layout.read_manifest(layout.kit_dir("micro", tmp_path))["versions"] == \
        layout.read_manifest(micro_root)["versions"]


def test_a_changed_spec_needs_force(micro_root):
    home = micro_root.parent.parent
    changed = dataclasses.replace(MICRO, seed=1)
    with pytest.raises(KitBuildError, match="--force"):
        build_kit(changed, home=home)


def test_load_kit_names_the_build_command(tmp_path):
    with pytest.raises(KitNotBuiltError, match="specwatch models build --size full"):
        load_kit("full", home=tmp_path)
