"""The prompt sets: one JSON-lines file per domain in ``data/``, validated as they are read.

A line is one request in the chat format (OpenAI ``messages``)::

    {"id": "code-0007", "group": "5d41402abc4b", "split": "heldout",
     "messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}]}

``group`` names the source item a prompt was written from (a code snippet, a document, a paragraph): every
prompt of a group is in the same split, so a held-out prompt never shares its material with a training one.
``split`` is ``train`` (what a draft may be distilled on) or ``heldout`` (what benchmarks send). A file that
breaks any of this is refused with a WorkloadError naming the file, the line and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).parent / "data"
SPLITS = ("train", "heldout")
ROLES = ("system", "user", "assistant")
FIELDS = ("id", "group", "split", "messages")


class WorkloadError(ValueError):
    """A prompt set that cannot be used; the message names the file, the line and the field."""


@dataclass(frozen=True)
class Prompt:
    """One request of a domain: its id, source group, split and chat messages."""

    domain: str
    id: str
    group: str
    split: str
    turns: tuple[tuple[str, str], ...]  # (role, content), in order; the last is the user's

    @property
    def messages(self) -> list[dict[str, str]]:
        """The messages as /v1/chat/completions takes them."""
        return [{"role": role, "content": content} for role, content in self.turns]

    @property
    def text(self) -> str:
        """The user's last message."""
        return self.turns[-1][1]


def domains(root: Path = DATA) -> tuple[str, ...]:
    """The domains with a prompt set under ``root``, sorted."""
    return tuple(sorted(p.stem for p in root.glob("*.jsonl")))


def load(domain: str, split: str | None = None, root: Path = DATA) -> list[Prompt]:
    """The prompts of ``domain`` in ``split`` (default both), in the file's order."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split: expected one of {', '.join(SPLITS)}, got {split!r}")
    known = domains(root)
    if domain not in known:
        raise ValueError(f"domain: expected one of {', '.join(known)}, got {domain!r}")
    found = _read(root / f"{domain}.jsonl")
    return [p for p in found if split is None or p.split == split]


@lru_cache(maxsize=32)
def _read_cached(path: Path, mtime_ns: int) -> tuple[Prompt, ...]:
    return tuple(parse_file(path))


def _read(path: Path) -> tuple[Prompt, ...]:
    return _read_cached(path, path.stat().st_mtime_ns)


def parse_file(path: Path) -> list[Prompt]:
    """Every prompt of one file, validated; WorkloadError at the first fault. The domain is the file's stem."""
    prompts, ids, splits_of = [], set(), {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path.name}:{number}"
            prompt = parse_line(line, path.stem, where)
            if prompt.id in ids:
                raise WorkloadError(f"{where}: id: {prompt.id!r} appears twice")
            if splits_of.setdefault(prompt.group, prompt.split) != prompt.split:
                raise WorkloadError(f"{where}: split: group {prompt.group!r} is already in "
                                    f"{splits_of[prompt.group]!r} (a group stays in one split)")
            ids.add(prompt.id)
            prompts.append(prompt)
    if not prompts:
        raise WorkloadError(f"{path.name}: no prompts")
    return prompts


def parse_line(line: str, domain: str, where: str) -> Prompt:
    """One line of a prompt file; ``where`` (file:line) starts every error message."""
    item = _object(line, where)
    missing, extra = [f for f in FIELDS if f not in item], sorted(set(item) - set(FIELDS))
    if missing or extra:
        raise WorkloadError(f"{where}: {missing[0]}: missing" if missing else
                            f"{where}: {extra[0]}: unknown field (expected {', '.join(FIELDS)})")
    for name in ("id", "group"):
        if not isinstance(item[name], str) or not item[name].strip():
            raise WorkloadError(f"{where}: {name}: must be a non-empty string")
    if item["split"] not in SPLITS:
        raise WorkloadError(f"{where}: split: expected one of {', '.join(SPLITS)}, got {item['split']!r}")
    return Prompt(domain, item["id"], item["group"], item["split"], _turns(item["messages"], where))


def _object(line: str, where: str) -> dict:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{where}: not JSON ({exc.msg}, column {exc.colno})") from None
    if isinstance(item, dict):
        return item
    raise WorkloadError(f"{where}: expected a JSON object, got {type(item).__name__}")


def _turns(messages, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(messages, list) or not messages:
        raise WorkloadError(f"{where}: messages: must be a non-empty list")
    turns = []
    for i, message in enumerate(messages):
        field = f"messages[{i}]"
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise WorkloadError(f"{where}: {field}: must be an object with exactly role and content")
        if message["role"] not in ROLES:
            raise WorkloadError(f"{where}: {field}.role: expected one of {', '.join(ROLES)}, "
                                f"got {message['role']!r}")
        if not isinstance(message["content"], str) or not message["content"].strip():
            raise WorkloadError(f"{where}: {field}.content: must be a non-empty string")
        if message["role"] == "system" and i > 0:
            raise WorkloadError(f"{where}: {field}.role: a system message comes first or not at all")
        turns.append((message["role"], message["content"]))
    if turns[-1][0] != "user":
        raise WorkloadError(f"{where}: messages[{len(turns) - 1}].role: the last message must be the user's")
    return tuple(turns)
