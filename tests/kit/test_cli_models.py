import json

import pytest
from typer.testing import CliRunner

from agent.cli.models import models_app

runner = CliRunner()


@pytest.fixture
def home(kit_home, monkeypatch):
    monkeypatch.setenv("SPECWATCH_HOME", str(kit_home))
    monkeypatch.setenv("SPECWATCH_DEVICE", "cpu")
    return kit_home


def test_build_skips_built_stages(home):
    result = runner.invoke(models_app, ["build", "--size", "tiny"])
    assert result.exit_code == 0, result.output
    assert "already built" in result.output and "target-v2" in result.output


def test_eval_json(home):
    result = runner.invoke(models_app, ["eval", "--size", "tiny", "--per-domain", "1", "--new-tokens", "8",
                                        "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["lookahead"] == 4 and len(data["results"]) == 6
    assert {c["name"].split(" ")[0] for c in data["checks"]} >= {"acceptance", "domains", "cost"}


def test_eval_table_with_an_explicit_pair(home):
    root = home / "kit" / "tiny"
    result = runner.invoke(models_app, ["eval", "--size", "tiny", "--target", str(root / "target-v2"),
                                        "--draft", str(root / "draft"), "--per-domain", "1",
                                        "--new-tokens", "8",
                                        "-k", "2"])
    assert result.exit_code == 0, result.output
    assert "accept target" in result.output and ("PASS" in result.output or "FAIL" in result.output)


def test_missing_kit_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECWATCH_HOME", str(tmp_path))
    result = runner.invoke(models_app, ["eval", "--size", "full"])
    assert result.exit_code == 1
    assert "specwatch models build --size full" in result.output
    result = runner.invoke(models_app, ["eval", "--size", "tiny", "--target", str(tmp_path)])
    assert result.exit_code == 1 and "go together" in result.output


def test_distill_command(home, tmp_path):
    root = home / "kit" / "tiny"
    result = runner.invoke(models_app, ["distill", "--target", str(root / "target-v2"), "--draft",
                                        str(root / "draft"), "--out", str(tmp_path / "d"), "--prompts",
                                        str(root / "prompts.json"), "--steps", "2"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "d" / "model.safetensors").exists()


@pytest.mark.parametrize("command", ["build", "eval", "distill"])
def test_help_ends_with_an_example(command):
    result = runner.invoke(models_app, [command, "--help"])
    assert result.exit_code == 0
    out = result.output
    assert f"Example: specwatch models {command}" in out
    assert out.index("Example:") > out.index("--help")  # the example closes the help text
