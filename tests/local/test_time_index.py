from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tierlog.local.index import CorruptIndexError
from tierlog.local.time_index import NO_TIMESTAMP, TimeIndex

BASE = 500


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000500.timeindex"


def open_index(path: Path, max_size: int = 12 * 16) -> TimeIndex:
    return TimeIndex(path, BASE, max_size)


def test_empty(path: Path) -> None:
    index = open_index(path)
    assert index.last_entry == (NO_TIMESTAMP, BASE)
    assert index.lookup(10**12) == (NO_TIMESTAMP, BASE)
    index.close()


def test_maybe_append_only_when_timestamp_grows(path: Path) -> None:
    index = open_index(path)
    index.maybe_append(100, BASE + 1)
    index.maybe_append(100, BASE + 5)  # same timestamp: skipped
    index.maybe_append(90, BASE + 6)  # smaller timestamp: skipped
    index.maybe_append(150, BASE)  # offset going backwards: skipped
    index.maybe_append(150, BASE + 7)
    assert list(index) == [(100, 1), (150, 7)]
    assert index.last_entry == (150, BASE + 7)
    index.close()


def test_lookup_edges(path: Path) -> None:
    index = open_index(path)
    for i in range(1, 6):
        index.maybe_append(1000 * i, BASE + 10 * i)
    assert index.lookup(999) == (NO_TIMESTAMP, BASE)
    assert index.lookup(1000) == (1000, BASE + 10)
    assert index.lookup(1999) == (1000, BASE + 10)
    assert index.lookup(3000) == (3000, BASE + 30)
    assert index.lookup(5000) == (5000, BASE + 50)
    assert index.lookup(10**15) == (5000, BASE + 50)
    index.close()


@pytest.mark.parametrize("count", [1, 2, 5, 9])
def test_binary_search_against_linear(path: Path, count: int) -> None:
    index = open_index(path)
    stamps = [100 + 7 * i for i in range(count)]
    for n, ts in enumerate(stamps):
        index.maybe_append(ts, BASE + n)
    for target in range(90, stamps[-1] + 10):
        expected = (NO_TIMESTAMP, BASE)
        for n, ts in enumerate(stamps):
            if ts <= target:
                expected = (ts, BASE + n)
        assert index.lookup(target) == expected
    index.close()


def test_truncate_to(path: Path) -> None:
    index = open_index(path)
    for i in range(1, 6):
        index.maybe_append(1000 * i, BASE + 10 * i)
    index.truncate_to(BASE + 30)
    assert list(index) == [(1000, 10), (2000, 20)]
    index.truncate_to(BASE + 21)
    assert list(index) == [(1000, 10), (2000, 20)]
    index.truncate_to(BASE)
    assert list(index) == []
    index.maybe_append(7, BASE + 1)
    assert index.last_entry == (7, BASE + 1)
    index.close()


def test_byte_format_is_kafkas(path: Path) -> None:
    index = open_index(path)
    index.maybe_append(1_700_000_000_123, BASE + 3)
    index.maybe_append(2**62, BASE + 2**31 - 1)
    index.close()
    raw = path.read_bytes()
    assert len(raw) == 24
    assert raw[:12] == struct.pack(">q", 1_700_000_000_123) + bytes.fromhex("00000003")
    assert list(struct.iter_unpack(">qi", raw)) == [
        (1_700_000_000_123, 3),
        (2**62, 2**31 - 1),
    ]


def test_preallocation_and_trim(path: Path) -> None:
    index = open_index(path, max_size=12 * 4 + 11)
    index.make_appendable()
    assert path.stat().st_size == 48
    index.maybe_append(5, BASE)
    index.close()
    assert path.stat().st_size == 12


def test_full(path: Path) -> None:
    index = open_index(path, max_size=24)
    index.maybe_append(1, BASE)
    index.maybe_append(2, BASE + 1)
    assert index.is_full
    with pytest.raises(OverflowError):
        index.maybe_append(3, BASE + 2)
    index.close()


def test_reopen_from_file(path: Path) -> None:
    index = open_index(path)
    index.maybe_append(10, BASE + 1)
    index.maybe_append(20, BASE + 4)
    index.close()
    reopened = open_index(path)
    assert reopened.entries == 2
    assert reopened.last_entry == (20, BASE + 4)
    assert reopened.lookup(15) == (10, BASE + 1)
    reopened.sanity_check(next_offset=BASE + 5)
    reopened.close()


def test_sanity_check_failures(path: Path) -> None:
    # last timestamp below the first
    path.write_bytes(struct.pack(">qiqi", 100, 1, 50, 2))
    index = open_index(path)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(next_offset=BASE + 10)
    index.close()
    # last offset at or past the segment's next offset
    path.write_bytes(struct.pack(">qiqi", 100, 1, 200, 9))
    index = open_index(path)
    index.sanity_check(next_offset=BASE + 10)
    with pytest.raises(CorruptIndexError, match="next offset"):
        index.sanity_check(next_offset=BASE + 9)
    index.close()
    # negative relative offset
    path.write_bytes(struct.pack(">qi", 100, -1))
    index = open_index(path)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(next_offset=BASE + 10)
    index.close()


def test_zero_filled_preallocated_file_fails_sanity_check(path: Path) -> None:
    # What an unclean stop leaves behind: real entries followed by preallocated zeros.
    path.write_bytes(struct.pack(">qi", 1_700_000_000_000, 1) + b"\x00" * 120)
    index = open_index(path)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(next_offset=BASE + 10)
    index.close()


def test_bad_size_is_corrupt(path: Path) -> None:
    path.write_bytes(b"\x01" * 8)
    with pytest.raises(CorruptIndexError):
        open_index(path)
