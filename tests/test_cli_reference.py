"""docs/cli.md is the CLI's own `--help` text: regenerated in memory here, it must equal the file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli", ROOT / "docs" / "gen_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_matches_the_cli():
    expected = _generator().render()
    actual = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/cli.md is out of date: run `python docs/gen_cli.py`"


def test_cli_reference_covers_every_command_and_sub_command():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for path in ("specwatch serve", "specwatch proxy", "specwatch scrape", "specwatch recommend",
                 "specwatch models build", "specwatch models export-gguf", "specwatch db migrate",
                 "specwatch db prune"):
        assert f"## `{path}`" in text, path
