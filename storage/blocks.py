"""The compact encoding of a block: one series' buckets of one hour of a fine tier, in one value.

A tier row costs ~180 bytes on PostgreSQL (tuple header, key, 8-byte sums, index entry) for what is mostly
a handful of small numbers that barely change from one 10-second bucket to the next. A block holds the
buckets present (idle buckets are absent: sparse) column by column, each column as differences from the
previous bucket, zigzagged, in the narrowest integer width that holds them, its bytes shuffled (all the
values' low bytes, then the next ones: the noisy low bytes no longer interleave with the near-constant high
bytes, 10-20% smaller), then deflated (format 2; format 1, unshuffled in a zlib stream, is still read).
Counts are exact.
Sums of seconds and of expected acceptance are kept in units of 1e-7 (``SCALE``): a bucket's sum is off by
at most 50 ns, below the jitter of any timer that measured it (a step's time per step read from a single
2 ms step is off by 2.5e-5 of itself at worst, from a busy minute by far less). NULL per-position counts (above the
series' K) are stored as -1.

Pure: no SQL. ``encode`` and ``decode`` are inverse up to that rounding.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence

import numpy as np

from storage import schema

FORMAT = 2  # the first byte of a block; a format 1 block is a zlib stream, whose first byte is 0x78
SCALE = 10_000_000  # tenths of a microsecond (and ten-millionths of an expected-acceptance sum)
VALUE_COLUMNS = schema.VALUE_COLUMNS
LIMIT = 2**61  # differences of values below it fit the zigzagged 64 bits
_N_FIXED = len(schema.COUNT_COLUMNS) + len(schema.SUM_COLUMNS)
_HEADER = struct.Struct("<BHBH")  # format, buckets present, per-position columns, seconds per bucket
_WIDTHS = ((0, None), (1, np.uint8), (2, np.uint16), (4, np.uint32), (8, np.uint64))
BucketValues = Sequence[int | float | None]  # in VALUE_COLUMNS order


def encode(buckets: Mapping[int, BucketValues], seconds: int) -> bytes:
    """``{bucket index in the block: values}`` of ``seconds``-long buckets -> bytes. Indexes are 0..65535."""
    order = sorted(buckets)
    if not order:
        raise ValueError("a block holds at least one bucket")
    if order[0] < 0 or order[-1] > 0xFFFF:
        raise ValueError(f"bucket index out of 0..65535: {order[0]}..{order[-1]}")
    rows = [buckets[i] for i in order]
    positions = max((_last_present(r) for r in rows), default=0)
    matrix = np.empty((len(rows), 1 + _N_FIXED + positions), dtype=np.int64)
    matrix[:, 0] = order
    for j, row in enumerate(rows):
        matrix[j, 1:1 + _N_FIXED] = _fixed(row)
        matrix[j, 1 + _N_FIXED:] = [-1 if v is None else v for v in row[_N_FIXED:_N_FIXED + positions]]
    if np.abs(matrix).max() >= LIMIT:
        raise ValueError("a value of the block is beyond +-2^61, which the encoding does not hold")
    _to_residuals(matrix)
    deltas = np.diff(matrix, axis=0, prepend=0)
    zigzag = ((deltas << 1) ^ (deltas >> 63)).astype(np.uint64)
    parts = [_HEADER.pack(FORMAT, len(rows), positions, seconds)]
    for column in zigzag.T:
        parts.append(_packed(column))
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw: the format byte is the header
    return bytes([FORMAT]) + deflate.compress(b"".join(parts)) + deflate.flush()


def decode(data: bytes) -> tuple[int, dict[int, tuple[int | float | None, ...]]]:
    """bytes from ``encode`` -> (seconds per bucket, ``{bucket index: values}``): VALUE_COLUMNS order,
    per-position NULLs as None, sums as floats."""
    raw = zlib.decompress(data[1:], -15) if data[:1] == bytes([FORMAT]) else zlib.decompress(data)
    fmt, n, positions, seconds = _HEADER.unpack_from(raw)
    if fmt not in (1, FORMAT):
        raise ValueError(f"unknown block format {fmt}")
    at, columns = _HEADER.size, []
    for _ in range(1 + _N_FIXED + positions):
        width = raw[at]
        at += 1
        if width == 0:
            columns.append(np.zeros(n, dtype=np.uint64))
            continue
        dtype = dict(_WIDTHS)[width]
        if fmt == 1:
            column = np.frombuffer(raw, dtype=dtype, count=n, offset=at)
        else:
            column = np.frombuffer(raw, dtype=np.uint8, count=n * width, offset=at).reshape(width, n).T.copy().view(dtype)
        columns.append(column.reshape(n).astype(np.uint64))
        at += width * n
    zigzag = np.stack(columns, axis=1)
    deltas = (zigzag >> np.uint64(1)).astype(np.int64) ^ -(zigzag & np.uint64(1)).astype(np.int64)
    matrix = np.cumsum(deltas, axis=0)
    _from_residuals(matrix)
    out = {}
    n_counts = len(schema.COUNT_COLUMNS)
    for row in matrix.tolist():
        counts = row[1:1 + n_counts]
        sums = [v / SCALE for v in row[1 + n_counts:1 + _N_FIXED]]
        at_least = [None if v < 0 else v for v in row[1 + _N_FIXED:]]
        out[row[0]] = (*counts, *sums, *at_least, *([None] * (len(schema.AT_LEAST) - positions)))
    return seconds, out


def _last_present(row: BucketValues) -> int:
    """How many per-position columns the row needs (up to its last non-NULL one)."""
    values = row[_N_FIXED:]
    for i in range(len(values) - 1, -1, -1):
        if values[i] is not None:
            return i + 1
    return 0


def _fixed(row: BucketValues) -> list[int]:
    n_counts = len(schema.COUNT_COLUMNS)
    return [int(v) for v in row[:n_counts]] + [round(float(v) * SCALE) for v in row[n_counts:_N_FIXED]]


# Columns (after the bucket index): steps, drafted, accepted, emitted, expected_n, ...
_STEPS, _DRAFTED, _ACCEPTED, _EMITTED, _EXPECTED_N = 1, 2, 3, 4, 5


def _to_residuals(m: np.ndarray) -> None:
    """Replace columns by what the others do not predict: a step emits its accepted tokens plus one, and
    usually reports expected acceptance for every drafted token (zeros compress to nothing)."""
    m[:, _EMITTED] -= m[:, _ACCEPTED] + m[:, _STEPS]
    m[:, _EXPECTED_N] -= m[:, _DRAFTED]


def _from_residuals(m: np.ndarray) -> None:
    m[:, _EMITTED] += m[:, _ACCEPTED] + m[:, _STEPS]
    m[:, _EXPECTED_N] += m[:, _DRAFTED]


def _packed(column: np.ndarray) -> bytes:
    """One column: a width byte, then the values in that many bytes each (none when all are zero), the
    values' first bytes first."""
    top = int(column.max()) if len(column) else 0
    for width, dtype in _WIDTHS:
        if width == 0 and top == 0:
            return b"\x00"
        if dtype is not None and top < 1 << (8 * width):
            return bytes([width]) + column.astype(dtype).view(np.uint8).reshape(-1, width).T.tobytes()
    raise AssertionError("unreachable: uint64 holds every zigzagged int64")
