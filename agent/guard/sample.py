"""The prompt sample ``specwatch guard`` scores: prompts per domain, read from a file.

Two shapes: a JSON object ``{domain: [prompt, ...]}`` (the kit's prompts.json is one), or JSON lines
``{"domain": ..., "text": ...}`` / ``{"domain": ..., "ids": [...]}``. A prompt is text (encoded with the
target checkpoint's tokenizer, no special tokens) or a list of token ids, such as the items of the sidecar's
opt-in live sample (agent/runtime/prompt_sampler.py: a request's prompt then the target's output; the guard lets the
new target continue after it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

Encode = Callable[[str], list[int]]


class SampleError(ValueError):
    """The prompt file cannot be read; the message names the file and the offending entry."""


def target_encoder(folder: Path) -> Encode:
    """Text prompts are encoded with the target's tokenizer, loaded only when a prompt is text."""
    loaded = []

    def encode(text: str) -> list[int]:
        if not loaded:
            from transformers import AutoTokenizer

            loaded.append(AutoTokenizer.from_pretrained(folder))
        return loaded[0](text, add_special_tokens=False)["input_ids"]

    return encode


def load_sample(path: str | Path, encode: Encode) -> dict[str, list[list[int]]]:
    """Token ids per domain, in file order; domains without a prompt are left out."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SampleError(f"{path}: {exc.strerror or exc}") from None
    entries = list(_entries(path, text))
    out: dict[str, list[list[int]]] = {}
    for where, domain, prompt in entries:
        if not isinstance(domain, str) or not domain:
            raise SampleError(f"{path}: {where}: the domain must be a non-empty string")
        ids = _ids(prompt, encode)
        if ids is None:
            raise SampleError(f"{path}: {where}: a prompt is text or a list of token ids (integers >= 0)")
        if ids:
            out.setdefault(domain, []).append(ids)
    if not out:
        raise SampleError(f"{path}: no prompts")
    return out


def _entries(path: Path, text: str):
    """(where, domain, prompt) for each prompt of either shape."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and not {"domain"} & set(whole):
        for domain, prompts in whole.items():
            if not isinstance(prompts, list):
                raise SampleError(f"{path}: {domain!r}: expected a list of prompts")
            for i, prompt in enumerate(prompts):
                yield f"{domain!r} item {i}", domain, prompt
        return
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SampleError(f"{path}: line {n}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise SampleError(f"{path}: line {n}: expected an object with domain and text or ids")
        yield f"line {n}", row.get("domain"), row.get("ids", row.get("text"))


def _ids(prompt, encode: Encode) -> list[int] | None:
    if isinstance(prompt, str):
        return list(encode(prompt))
    if isinstance(prompt, list) and all(type(t) is int and t >= 0 for t in prompt):
        return list(prompt)
    return None
