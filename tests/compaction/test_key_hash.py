"""Key digests: one key, one digest, wherever it sits; different keys, different digests;
another pass's seed, other digests."""

from __future__ import annotations

import random

import numpy as np

from tierlog.compaction.key_hash import digests_at, digests_of

SEED = (0x1234, 0x5678)


def _distinct(digests: np.ndarray) -> int:
    return len(np.unique(np.ascontiguousarray(digests).view(np.dtype((np.void, 16)))))


def test_different_keys_get_different_digests() -> None:
    rnd = random.Random(3)
    keys = {rnd.randbytes(rnd.randrange(0, 300)) for _ in range(20_000)}
    keys |= {b"", b"\x00", b"\x00" * 8, b"\x00" * 9, b"a", b"a\x00", b"k" * 64, b"k" * 65}
    assert _distinct(digests_of(sorted(keys), SEED)) == len(keys)


def test_a_key_gets_the_same_digest_wherever_it_is() -> None:
    keys = [b"user-%d" % (i % 37) for i in range(500)]
    digests = digests_of(keys, SEED)
    for i in range(37, 500):
        assert (digests[i] == digests[i % 37]).all()
    # Inside a larger buffer, at any alignment, next to other bytes.
    data = b"\xff" * 3 + b"user-5" + b"\x00" * 11
    assert (digests_at(data, np.array([3]), np.array([9]), SEED)[0] == digests[5]).all()


def test_the_seed_changes_every_digest() -> None:
    keys = [b"k%d" % i for i in range(1000)]
    a, b = digests_of(keys, SEED), digests_of(keys, (1, 2))
    assert not (a == b).all(axis=1).any()
