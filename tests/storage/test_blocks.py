"""The block encoding (storage/blocks.py): exact counts, sums to 1e-7, NULLs and gaps kept."""

import random
import zlib

import numpy as np
import pytest

from storage import blocks, schema

N_AT_LEAST = len(schema.AT_LEAST)


def bucket(rng: random.Random, k: int) -> tuple:
    steps = rng.randrange(0, 50)
    accepted = rng.randrange(0, k * steps + 1)
    at_least = [rng.randrange(0, 10**6) for _ in range(k + 1)] if k else []
    return (steps, k * steps, accepted, accepted + steps + rng.randrange(-3, 4), k * steps - rng.randrange(0, 3),
            rng.random() * 100, rng.random() * 5, rng.random() * 9,
            *at_least, *([None] * (N_AT_LEAST - len(at_least))))


@pytest.mark.parametrize("k", [0, 1, 4, 32])
def test_a_block_decodes_to_what_was_encoded(k):
    rng = random.Random(k)
    given = {i: bucket(rng, k) for i in sorted(rng.sample(range(360), 200))}  # sparse: idle buckets absent
    seconds, got = blocks.decode(blocks.encode(given, 10))
    assert seconds == 10 and got.keys() == given.keys()
    for i, values in given.items():
        n = len(schema.COUNT_COLUMNS)
        assert got[i][:n] == values[:n]
        assert got[i][n:n + 3] == pytest.approx(values[n:n + 3], abs=0.5e-7)
        assert got[i][n + 3:] == values[n + 3:]


def test_large_counts_and_sums_survive():
    big = (2**53, 2**60, 2**59, 2**60, 0, 1e9, 3.25e7, 0.0, 2**40, *([None] * (N_AT_LEAST - 1)))
    small = (0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0, *([None] * (N_AT_LEAST - 1)))
    _, got = blocks.decode(blocks.encode({0: big, 65535: small, 7: big}, 1))
    assert got == {0: big, 7: big, 65535: small}


def test_steady_buckets_cost_a_few_bytes_each():
    # 360 ten-second buckets of one K = 4 series, 20 steps each: what a busy series is, hour after hour.
    rng = random.Random(3)
    at = {i: (20, 80, a, a + 20, 80, 0.6 * 80, 0.096 + rng.random() / 100, 0.22 + rng.random() / 50,
              20, 16, 11, 7, 4, *([None] * (N_AT_LEAST - 5)))
          for i in range(360) for a in [50 + rng.randrange(-8, 9)]}
    assert len(blocks.encode(at, 10)) < 12 * 360  # a row each was ~180 bytes on PostgreSQL


@pytest.mark.parametrize("buckets, message", [({}, "at least one"), ({-1: (0,) * 8}, "out of"),
                                               ({70000: (0,) * 8}, "out of")])
def test_bad_blocks_are_refused(buckets, message):
    with pytest.raises(ValueError, match=message):
        blocks.encode(buckets, 10)


def _payload(block: bytes) -> bytes:
    return zlib.decompress(block[1:], -15)


def test_an_unknown_format_is_refused():
    data = bytearray(_payload(blocks.encode({0: (1,) * 8}, 10)))
    data[0] = 99
    with pytest.raises(ValueError, match="format 99"):
        blocks.decode(zlib.compress(bytes(data)))


def test_format_1_blocks_are_still_read():
    # Format 1 (schema 0006): the same columns unshuffled, in a zlib stream. Blocks of 0006 stay as written.
    rng = random.Random(5)
    buckets = {i: bucket(rng, 4) for i in range(0, 360, 3)}
    payload = _payload(blocks.encode(buckets, 10))
    header = blocks._HEADER.size
    n, positions = blocks._HEADER.unpack_from(payload)[1:3]
    old, at = bytearray(payload[:header]), header
    old[0] = 1
    for _ in range(1 + blocks._N_FIXED + positions):
        width = payload[at]
        old.append(width)
        plane = np.frombuffer(payload, dtype=np.uint8, count=n * width, offset=at + 1)
        old += plane.reshape(width, n).T.tobytes()  # back to each value's bytes together
        at += 1 + n * width
    assert blocks.decode(zlib.compress(bytes(old))) == blocks.decode(blocks.encode(buckets, 10))


def test_values_the_encoding_cannot_hold_are_refused():
    with pytest.raises(ValueError, match="2\\^61"):
        blocks.encode({0: (2**62, 0, 0, 0, 0, 0.0, 0.0, 0.0)}, 10)
