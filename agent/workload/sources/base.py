"""What every domain's template module shares: the item it returns, the one-turn conversation, and how a
group key picks its split and its short name."""

from __future__ import annotations

import hashlib

Messages = list[dict[str, str]]
Item = tuple[str, Messages]  # (group key, messages)


def split_of(key: str) -> str:
    """``heldout`` for half of the keys, ``train`` for the others, by a hash (stable across runs and machines)."""
    return "heldout" if hashlib.sha256(key.encode()).digest()[0] % 2 == 0 else "train"


def group_of(key: str) -> str:
    """A short stable name for a group key (the key itself may be a whole paragraph)."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def user(text: str, system: str | None = None) -> Messages:
    """One user turn, after a system message when one is given."""
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
