"""Byte-level tokenizer: one token per UTF-8 byte, with ByT5's ids so any HF loader can read it.

Ids 0, 1, 2 are pad, eos and unk; byte b is id b + 3 (vocabulary 259). Saving a kit model writes a
``ByT5Tokenizer`` config beside the weights, so ``AutoTokenizer.from_pretrained(dir)`` decodes the
same way as :func:`decode`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

PAD_ID, EOS_ID, UNK_ID = 0, 1, 2
OFFSET = 3
VOCAB_SIZE = 256 + OFFSET


def encode(text: str | bytes) -> list[int]:
    """Token ids of ``text`` (str is UTF-8 encoded); no special tokens are added."""
    return encode_array(text).tolist()


def encode_array(text: str | bytes) -> np.ndarray:
    """Like :func:`encode`, as a uint16 numpy array (fast for whole corpora)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return np.frombuffer(data, dtype=np.uint8).astype(np.uint16) + OFFSET


def decode_bytes(ids: Iterable[int]) -> bytes:
    """The bytes behind ``ids``; special tokens are dropped."""
    return bytes(i - OFFSET for i in ids if OFFSET <= i < VOCAB_SIZE)


def decode(ids: Iterable[int]) -> str:
    """Text of ``ids``; a byte sequence that is not valid UTF-8 (a cut character) becomes U+FFFD."""
    return decode_bytes(ids).decode("utf-8", errors="replace")


def save_tokenizer(directory: str | Path) -> None:
    """Write the equivalent HF tokenizer (ByT5, no sentinel ids) into ``directory``."""
    from transformers import ByT5Tokenizer

    ByT5Tokenizer(extra_ids=0).save_pretrained(str(directory))
