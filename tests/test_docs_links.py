"""Every relative link in README.md and docs/*.md points to a file that exists (and, for a #fragment into a
Markdown file, to one of its headings, slugged as GitHub does)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans (links there are not links)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(lines)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    text = heading.replace("`", "").replace("**", "").strip().lower()
    return re.sub(r"[\x00-\x1f!-,./:-@\[-^`{-~]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen, fenced = set(), {}, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*)", line)):
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto: are not relative


def test_the_pages_have_links():
    assert sum(len(relative_links(page)) for page in PAGES) > 20


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(page):
    broken = []
    for target in relative_links(page):
        path_part, _, fragment = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(f"{target}: no heading #{fragment} in {path.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_slug_matches_github():
    assert slug("The model kit (`agent/kit/`, `specwatch models ...`)") == "the-model-kit-agentkit-specwatch-models-"
    assert slug("bench/overhead_insitu.py and bench/overhead.py (the sidecar's hot path; goal <= 20 us per step)") \
        == "benchoverhead_insitupy-and-benchoverheadpy-the-sidecars-hot-path-goal--20-us-per-step"
