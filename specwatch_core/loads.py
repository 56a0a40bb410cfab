"""Load bands: the load a request meets (requests in flight on its pool when it was sent, itself included; or
the batch it decoded in), grouped where speculation's cost changes.

A step of a batch of b sequences verifies b x (1 + drafted) tokens in one pass: cheap while the pass is
memory-bound, dear once it is compute-bound, so a pool's cost per step grows with the load at a rate of its
own (vLLM keys its K on the batch size, TensorRT-LLM its draft length schedule). The bands double: 1, 2,
3-4, 5-8, 9-16, 17-32, 33+; band b holds loads in (2^(b-1), 2^b]. A record without a load (an engine or
caller that does not say) counts as band 0, a request alone.
"""

from __future__ import annotations

BANDS = 7  # 0..6: 1, 2, 3-4, 5-8, 9-16, 17-32, 33+


def band(load: int | None) -> int:
    """The band of ``load`` (None or < 1: unknown, counted as a request alone)."""
    if load is None or load <= 1:
        return 0
    return min((load - 1).bit_length(), BANDS - 1)


def label(b: int) -> str:
    """``"1"``, ``"2"``, ``"3-4"``, ... ``"33+"``."""
    if b <= 0:
        return "1"
    if b >= BANDS - 1:
        return f"{2 ** (BANDS - 2) + 1}+"
    low, high = 2 ** (b - 1) + 1, 2 ** b
    return str(high) if low == high else f"{low}-{high}"


def bounds(b: int) -> tuple[int, int | None]:
    """The loads of band ``b``: (lowest, highest; None: no upper bound)."""
    if b <= 0:
        return 1, 1
    return 2 ** (b - 1) + 1, None if b >= BANDS - 1 else 2 ** b
