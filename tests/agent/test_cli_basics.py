"""The command line's first impressions: --version, and a plain path given as --db."""

from __future__ import annotations

import tomllib
from pathlib import Path

from typer.testing import CliRunner

from agent import cli

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def app():
    cli._register()
    return cli.app


def test_version_prints_the_installed_version_and_exits_zero():
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = runner.invoke(app(), ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"specwatch {expected}"


def test_a_plain_file_path_as_db_gets_the_url_it_meant(tmp_path):
    path = tmp_path / "history.db"
    result = runner.invoke(app(), ["stats", "--db", str(path)])
    assert result.exit_code != 0
    assert f"didyoumeansqlite:///{path}?" in "".join(result.output.split())  # the console wraps lines
