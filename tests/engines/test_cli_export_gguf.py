from typer.testing import CliRunner

from agent.cli.models import models_app

runner = CliRunner()


def test_export_gguf_prints_the_written_paths(kit_home, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECWATCH_HOME", str(kit_home))
    result = runner.invoke(models_app, ["export-gguf", "--size", "tiny", "--out", str(tmp_path),
                                        "--models", "draft,target-v2", "--dtype", "f16"])
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in tmp_path.glob("*.gguf"))
    assert [name.split("-")[0] for name in written] == ["draft", "target"]
    assert all(name.endswith("-f16.gguf") for name in written)
    assert all(str(tmp_path / name) in result.stdout for name in written)


def test_export_gguf_without_a_kit_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECWATCH_HOME", str(tmp_path))
    result = runner.invoke(models_app, ["export-gguf", "--size", "tiny"])
    assert result.exit_code == 1
    assert "specwatch models build --size tiny" in " ".join(result.output.split())
