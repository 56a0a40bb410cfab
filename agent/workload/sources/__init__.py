"""The templates each prompt set is written from, one module per domain. Each module's ``items()`` returns
(group key, messages) pairs in a fixed order: the group key is the source item a prompt was made from (a
snippet, a document, a paragraph), and every prompt of a key lands in the same split (``base.split_of``).

- ``code``: complete a function from its signature and docstring (Python, JavaScript, SQL, shell);
- ``edit``: change a small function and give it back whole (the answer mostly copies the prompt);
- ``extract``: pull facts out of an email, notes or a report, quoting the text;
- ``chat``: open questions and requests over everyday topics (new text: little to copy);
- ``json``: JSON log lines: convert raw logs, continue a stream, filter one (rigid, repetitive structure);
- ``copy``: repeat, quote or reformat a paragraph of the Python standard library's docstrings;
- ``logs``: one JSON log line to rewrite, parse or summarise (the domain the real model's target v2 changes).
"""

from __future__ import annotations

from typing import Callable

from agent.workload.sources import chat, code, copy, edit, extract, json_logs, logs
from agent.workload.sources.base import Item


def registry() -> dict[str, Callable[[], list[Item]]]:
    """Domain -> its module's ``items``, in the order the sets are written."""
    return {"code": code.items, "edit": edit.items, "extract": extract.items, "chat": chat.items,
            "json": json_logs.items, "copy": copy.items,
            "logs": logs.items}
