"""The pretrained model's distillation and benchmark prompts: the workload's ``copy`` and ``chat`` sets
(agent/workload/), the two domains where speculation pays most differently.

- ``copy``: the answer largely copies text from the prompt (repeat, quote, reformat a paragraph of the Python
  standard library's docstrings), so n-gram self-speculation finds long matches in the prompt.
- ``chat``: open questions and requests; the answer is new text, so drafts come from the model's habits (a
  distilled draft) more than from the prompt.

Benchmarks send ``heldout``, so 200 requests per domain send no prompt twice. The draft is distilled on the
``train`` split of every workload domain, these two and code, edit, extract, json and logs
(agent/pretrained/rebuild.py), which replayed traffic (`specwatch replay`) sends too.
"""

from __future__ import annotations

from agent.workload import prompts as workload
from agent.workload.prompts import Prompt

DOMAINS = ("copy", "chat")
SPLITS = workload.SPLITS

__all__ = ["DOMAINS", "SPLITS", "Prompt", "prompts"]


def prompts(domain: str | None = None, split: str | None = None) -> list[Prompt]:
    """The prompts of ``domain`` (default both) in ``split`` (default both), in a fixed order: copy, then chat."""
    if domain is not None and domain not in DOMAINS:
        raise ValueError(f"domain: expected one of {', '.join(DOMAINS)}, got {domain!r}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"split: expected one of {', '.join(SPLITS)}, got {split!r}")
    return [p for d in DOMAINS if domain in (None, d) for p in workload.load(d, split)]
