"""The offset map against a dict: latest offset per key, fixed memory, refusal when full."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from tierlog.compaction.key_hash import Digests, digests_of
from tierlog.compaction.offset_map import OffsetMap, OffsetMapFullError


def key_digests(keys: Sequence[bytes]) -> Digests:
    return digests_of(keys, (7, 11))


def test_latest_offset_per_key_matches_a_dict_across_many_puts() -> None:
    rnd = random.Random(7)
    offset_map = OffsetMap(20 * 5000)
    offset_map.reset(1000)
    model: dict[bytes, int] = {}
    offset = 1000
    for _ in range(40):
        keys = [b"key-%d" % rnd.randrange(3000) for _ in range(100)]
        offsets = np.arange(offset, offset + len(keys), dtype=np.int64)
        offset_map.put(key_digests(keys), offsets)
        model.update(zip(keys, offsets.tolist(), strict=True))
        offset += len(keys)
    probe = [*model, b"never-written", b""]
    found = offset_map.get(key_digests(probe)).tolist()
    assert found == [model.get(k, -1) for k in probe]
    assert offset_map.size == len(model)
    assert offset_map.latest_offset == offset - 1


def test_repeated_keys_within_one_put_keep_the_last_offset() -> None:
    offset_map = OffsetMap(20 * 100)
    offset_map.reset(0)
    offset_map.put(key_digests([b"a", b"b", b"a", b"a"]), np.array([0, 1, 2, 3]))
    assert offset_map.get(key_digests([b"a", b"b"])).tolist() == [3, 1]
    assert offset_map.size == 2


def test_a_key_costs_at_most_24_bytes_at_full_load() -> None:
    offset_map = OffsetMap(128 << 20)
    assert offset_map.bytes_per_key <= 24
    assert offset_map.memory_bytes <= 128 << 20


def test_keys_beyond_capacity_are_refused_and_the_map_is_unchanged() -> None:
    offset_map = OffsetMap(20 * 50)
    offset_map.reset(0)
    first = [b"k%d" % i for i in range(offset_map.capacity)]
    offset_map.put(key_digests(first), np.arange(len(first)))
    with pytest.raises(OffsetMapFullError):
        offset_map.put(key_digests([b"one-more"]), np.array([len(first)]))
    assert offset_map.size == offset_map.capacity
    # Known keys still update: they take no new slot.
    offset_map.put(key_digests([b"k0"]), np.array([len(first) + 1]))
    assert offset_map.get(key_digests([b"k0", b"one-more"])).tolist() == [len(first) + 1, -1]


def test_offsets_outside_the_pass_are_refused() -> None:
    offset_map = OffsetMap(20 * 50)
    offset_map.reset(100)
    with pytest.raises(ValueError):
        offset_map.put(key_digests([b"a"]), np.array([99]))
    with pytest.raises(ValueError):
        offset_map.put(key_digests([b"a"]), np.array([offset_map.max_offset + 1]))


def test_reset_empties_the_map() -> None:
    offset_map = OffsetMap(20 * 50)
    offset_map.reset(0)
    offset_map.put(key_digests([b"a"]), np.array([5]))
    offset_map.reset(10)
    assert offset_map.size == 0
    assert offset_map.get(key_digests([b"a"])).tolist() == [-1]
