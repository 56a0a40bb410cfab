"""Write the prompt sets from their templates: ``python -m agent.workload.build [DOMAIN ...] [--check]``.

The sets are kept in the repository as files (agent/workload/data/), so what a benchmark sends does not
depend on the Python that runs it (``copy`` reads the standard library's docstrings). ``--check`` writes
nothing and exits 1 when a file differs from what its templates give now.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.workload.prompts import DATA, parse_file
from agent.workload.sources import registry
from agent.workload.sources.base import group_of, split_of


def render(domain: str) -> str:
    """The file text of ``domain``'s set: one JSON object a line, ids numbered in template order."""
    lines = []
    for i, (key, messages) in enumerate(registry()[domain]()):
        item = {"id": f"{domain}-{i:04d}", "group": group_of(key), "split": split_of(key), "messages": messages}
        lines.append(json.dumps(item, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def write(domain: str, root: Path = DATA) -> Path:
    """Write and validate one set; the path written."""
    path = root / f"{domain}.jsonl"
    path.write_text(render(domain), encoding="utf-8")
    parse_file(path)
    return path


def stale(domains: list[str], root: Path = DATA) -> list[str]:
    """The domains whose file is missing or differs from its templates."""
    return [d for d in domains if not (root / f"{d}.jsonl").is_file()
            or (root / f"{d}.jsonl").read_text(encoding="utf-8") != render(d)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("domains", nargs="*", help=f"default: all ({', '.join(registry())})")
    parser.add_argument("--check", action="store_true", help="compare, write nothing; exit 1 on a difference")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.domains) - set(registry()))
    if unknown:
        parser.error(f"unknown domain {unknown[0]!r}; expected one of {', '.join(registry())}")
    domains = args.domains or list(registry())
    if args.check:
        differ = stale(domains)
        for d in differ:
            print(f"{d}: agent/workload/data/{d}.jsonl differs from its templates", file=sys.stderr)
        return 1 if differ else 0
    for d in domains:
        path = write(d)
        print(f"{d}: {sum(1 for _ in path.open())} prompts -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
