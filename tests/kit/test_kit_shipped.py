"""The kit's weights shipped in the repository (agent/kit/weights/): they install as a kit with the
versions their manifest states and reproduce the trained kit's acceptance figures within the manifest's
tolerance (0.03). Power: the same check fails when v1's and v2's files are swapped. A damaged file is
refused by name and leaves the kit unfinished, never half-installed as complete."""

from __future__ import annotations

import json
import shutil

import pytest

from agent.kit import layout
from agent.kit.build import build_kit
from agent.kit.load import load_kit
from agent.kit.ship import acceptance, differences
from agent.kit.shipped import ShippedWeightsError, folder, manifest_for
from agent.kit.specs import get_spec


@pytest.fixture(scope="module", params=["tiny", "full"])
def installed(request, tmp_path_factory):
    size = request.param
    manifest = manifest_for(get_spec(size))
    assert manifest is not None, f"no shipped {size} weights for the current spec (run specwatch models ship)"
    home = tmp_path_factory.mktemp(f"shipped-{size}")
    build_kit(size, home=home, shipped=True)
    return size, manifest, load_kit(size, device="cpu", home=home)


def test_shipped_weights_install_with_the_manifests_versions(installed):
    size, manifest, kit = installed
    for name in layout.MODELS:
        assert kit.versions[name] == manifest["models"][name]["version"]
        assert kit.manifest["stages"][name]["source"] == "shipped weights (float16)"
        assert kit.manifest["stages"][name]["trained_version"] == manifest["models"][name]["trained_version"]
    assert kit.manifest["complete"]


def test_shipped_weights_reproduce_the_trained_acceptance(installed):
    _, manifest, kit = installed
    measured = acceptance(kit, manifest["acceptance"]["prompts_per_domain"], manifest["acceptance"]["lookahead"])
    assert differences(measured, manifest) == []


def test_swapped_targets_fail_the_same_check(installed):
    size, manifest, kit = installed
    kit.target_v1, kit.target_v2 = kit.target_v2, kit.target_v1
    measured = acceptance(kit, manifest["acceptance"]["prompts_per_domain"], manifest["acceptance"]["lookahead"])
    assert differences(measured, manifest), measured


def test_shipped_weights_stay_within_the_size_budget():
    total = sum(p.stat().st_size for size in ("tiny", "full") if folder(size).exists() for p in folder(size).iterdir())
    assert total <= 25 * 2**20, total


def test_a_damaged_file_is_refused_by_name(tmp_path):
    copy = tmp_path / "weights"
    shutil.copytree(folder("tiny"), copy)
    path = copy / "draft.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    home = tmp_path / "home"
    with pytest.raises(ShippedWeightsError, match="draft.safetensors: sha256"):
        build_kit("tiny", home=home, shipped=copy)
    manifest = json.loads((layout.kit_dir("tiny", home) / layout.MANIFEST).read_text())
    assert not manifest["complete"] and "draft" not in manifest["stages"]


def test_weights_of_another_spec_are_not_used(tmp_path):
    copy = tmp_path / "weights"
    shutil.copytree(folder("tiny"), copy)
    manifest = json.loads((copy / layout.MANIFEST).read_text())
    manifest["spec_hash"] = "0" * 12
    (copy / layout.MANIFEST).write_text(json.dumps(manifest))
    assert manifest_for(get_spec("tiny"), copy) is None
