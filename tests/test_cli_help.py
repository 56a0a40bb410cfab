"""`specwatch --help` and every command's --help as a user sees them (rich, Markdown paragraphs so that
docstrings wrap to the terminal): one line per command in the overview at 100 columns, and no help text
loses a character to Markdown (a `*` or `_` read as emphasis: the scrape help lost its metric names so)."""

from __future__ import annotations

import re

from typer.main import get_command
from typer.testing import CliRunner

import agent.cli as cli

cli._register()
RUNNER = CliRunner()


def commands(cmd=None, path=()):
    cmd = cmd or get_command(cli.app)
    yield list(path), cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from commands(sub, (*path, name))


def shown(path: list[str], columns: int) -> str:
    return RUNNER.invoke(cli.app, [*path, "--help"], env={"COLUMNS": str(columns), "NO_COLOR": "1"}).output


def test_the_overview_has_one_line_per_command():
    out = shown([], 100)
    box = out.split("Commands", 1)[1]
    listed = [line for line in box.splitlines() if line.startswith("│ ")]
    names = set(get_command(cli.app).commands)
    rows = [line for line in listed if line[2:].split(" ", 1)[0] in names]
    assert {r[2:].split(" ", 1)[0] for r in rows} == names
    assert all(line[2:].split(" ", 1)[0] in names for line in listed), listed  # no continuation lines


def test_no_help_text_loses_characters_to_markdown():
    lost = []
    for path, cmd in commands():
        out = re.sub(r"\s+", " ", shown(path, 250))
        for text in [cmd.help or ""] + [getattr(p, "help", "") or "" for p in cmd.params]:
            for token in re.findall(r"\S*[_*]\S*", text):
                core = token.strip("`.,;:()")
                if core and core not in out and core.replace("`", "") not in out:
                    lost.append((" ".join(path), token))
    assert lost == []
