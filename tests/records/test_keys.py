"""tierlog.records.keys: the compacted-topic key check and its decompression budget."""

from __future__ import annotations

import pytest

from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import DecompressedTooLargeError, InvalidRecordError
from tierlog.records.header import Compression
from tierlog.records.keys import check_keys


def test_keys_present_cost_their_decompressed_size() -> None:
    plain = build_batch([Record(b"k", b"v" * 100)] * 10)
    assert check_keys(plain) == 0
    packed = build_batch([Record(b"k", b"v" * 100)] * 10, compression=Compression.ZSTD)
    assert 1000 < check_keys(packed) < 1300


def test_a_keyless_record_is_refused() -> None:
    batch = build_batch([Record(b"k", b"v"), Record(None, b"v")], compression=Compression.LZ4)
    with pytest.raises(InvalidRecordError, match="without a key"):
        check_keys(batch)


def test_the_budget_covers_the_whole_request() -> None:
    one = build_batch([Record(b"k", bytes(100_000))] * 4, compression=Compression.GZIP)
    assert check_keys(one, budget=1 << 20) > 400_000
    with pytest.raises(DecompressedTooLargeError, match="more than 1048576 bytes"):
        check_keys(one + one + one, budget=1 << 20)
