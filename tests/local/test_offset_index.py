from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tierlog.local.index import CorruptIndexError
from tierlog.local.offset_index import OffsetIndex

BASE = 1000


def open_index(path: Path, max_size: int = 8 * 16) -> OffsetIndex:
    return OffsetIndex(path, BASE, max_size)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000001000.index"


def test_empty_index_lookup_gives_base(path: Path) -> None:
    index = open_index(path)
    assert index.entries == 0
    assert index.lookup(BASE) == (BASE, 0)
    assert index.lookup(BASE + 50) == (BASE, 0)
    assert index.last_offset == BASE
    index.close()


def test_append_and_lookup_edges(path: Path) -> None:
    index = open_index(path)
    for i in range(1, 6):
        index.append(BASE + 10 * i, 100 * i)
    assert index.entries == 5
    assert index.last_offset == BASE + 50
    # before the first entry
    assert index.lookup(BASE) == (BASE, 0)
    assert index.lookup(BASE + 9) == (BASE, 0)
    assert index.lookup(BASE - 5) == (BASE, 0)
    # exact hits and between entries
    assert index.lookup(BASE + 10) == (BASE + 10, 100)
    assert index.lookup(BASE + 11) == (BASE + 10, 100)
    assert index.lookup(BASE + 29) == (BASE + 20, 200)
    assert index.lookup(BASE + 30) == (BASE + 30, 300)
    # at and after the last entry
    assert index.lookup(BASE + 50) == (BASE + 50, 500)
    assert index.lookup(BASE + 10**9) == (BASE + 50, 500)
    assert list(index) == [(10 * i, 100 * i) for i in range(1, 6)]
    index.close()


@pytest.mark.parametrize("count", [1, 2, 3, 7, 8, 15])
def test_binary_search_against_linear(path: Path, count: int) -> None:
    index = open_index(path)
    offsets = [BASE + 3 * i + 1 for i in range(count)]
    for n, offset in enumerate(offsets):
        index.append(offset, n * 7)
    for target in range(BASE - 2, offsets[-1] + 4):
        expected = (BASE, 0)
        for n, offset in enumerate(offsets):
            if offset <= target:
                expected = (offset, n * 7)
        assert index.lookup(target) == expected, target
    index.close()


def test_offsets_must_increase(path: Path) -> None:
    index = open_index(path)
    index.append(BASE + 5, 0)
    with pytest.raises(ValueError, match="not after the last"):
        index.append(BASE + 5, 10)
    with pytest.raises(ValueError):
        index.append(BASE + 4, 10)
    assert index.entries == 1
    index.append(BASE + 6, 10)
    assert index.entries == 2
    index.close()


def test_truncate_to(path: Path) -> None:
    index = open_index(path)
    for i in range(1, 6):
        index.append(BASE + 10 * i, 100 * i)
    index.truncate_to(BASE + 31)  # keeps entries < 1031
    assert list(index) == [(10, 100), (20, 200), (30, 300)]
    index.truncate_to(BASE + 30)
    assert list(index) == [(10, 100), (20, 200)]
    index.truncate_to(BASE + 1000)  # nothing at or after: no change
    assert index.entries == 2
    # the slots freed are reused
    index.append(BASE + 25, 250)
    assert index.lookup(BASE + 29) == (BASE + 25, 250)
    index.truncate_to(BASE)
    assert index.entries == 0
    assert index.lookup(BASE + 100) == (BASE, 0)
    index.close()


def test_preallocated_while_open_and_trimmed_on_close(path: Path) -> None:
    index = open_index(path, max_size=8 * 10 + 5)  # rounded down to whole entries
    index.make_appendable()
    assert path.stat().st_size == 80
    assert index.max_entries == 10
    index.append(BASE + 1, 0)
    index.append(BASE + 2, 64)
    assert path.stat().st_size == 80
    index.close()
    assert path.stat().st_size == 16
    index.close()  # idempotent


def test_append_makes_an_unmapped_index_appendable(path: Path) -> None:
    index = open_index(path, max_size=64)
    assert index.max_entries == 0
    index.append(BASE + 1, 0)
    assert index.max_entries == 8
    index.close()


def test_full_index(path: Path) -> None:
    index = open_index(path, max_size=8 * 3)
    index.make_appendable()
    for i in range(3):
        assert not index.is_full
        index.append(BASE + i, i)
    assert index.is_full
    with pytest.raises(OverflowError):
        index.append(BASE + 10, 10)
    assert index.entries == 3
    index.close()


def test_byte_format_is_kafkas(path: Path) -> None:
    index = open_index(path)
    index.append(BASE + 7, 4096)
    index.append(BASE + 2**31 - 1, 2**31 + 5)  # largest relative offset; position > int32
    index.close()
    raw = path.read_bytes()
    assert len(raw) == 16
    assert raw[:8] == bytes.fromhex("00000007 00001000")
    assert struct.unpack(">iI", raw[8:]) == (2**31 - 1, 2**31 + 5)
    assert list(struct.iter_unpack(">iI", raw)) == [(7, 4096), (2**31 - 1, 2**31 + 5)]


def test_reopen_from_file(path: Path) -> None:
    index = open_index(path)
    for i in range(4):
        index.append(BASE + 2 * i + 1, 50 * i)
    index.close()
    reopened = open_index(path)
    assert reopened.entries == 4
    assert reopened.last_offset == BASE + 7
    assert reopened.lookup(BASE + 4) == (BASE + 3, 50)
    reopened.sanity_check(log_size=1000)
    # appending after reopening grows the file again, keeping the old entries
    reopened.append(BASE + 20, 900)
    assert reopened.lookup(BASE + 21) == (BASE + 20, 900)
    reopened.close()
    assert path.stat().st_size == 40


def test_reopen_a_file_written_by_hand(path: Path) -> None:
    path.write_bytes(struct.pack(">iIiI", 3, 0, 9, 640))
    index = open_index(path)
    assert index.lookup(BASE + 8) == (BASE + 3, 0)
    assert index.lookup(BASE + 9) == (BASE + 9, 640)
    index.close()


def test_size_not_a_multiple_of_entry_is_corrupt(path: Path) -> None:
    path.write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndexError, match="not a multiple"):
        open_index(path)


def test_sanity_check_position_past_log(path: Path) -> None:
    path.write_bytes(struct.pack(">iI", 3, 500))
    index = open_index(path)
    index.sanity_check(log_size=501)
    with pytest.raises(CorruptIndexError, match="past the log end"):
        index.sanity_check(log_size=500)
    index.close()


def test_sanity_check_negative_relative_offset(path: Path) -> None:
    path.write_bytes(struct.pack(">iI", -1, 0))
    index = open_index(path)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=100)
    index.close()


def test_sanity_check_of_empty_index_passes(path: Path) -> None:
    index = open_index(path)
    index.sanity_check(log_size=0)
    index.close()


def test_reset_and_delete(path: Path) -> None:
    index = open_index(path)
    index.append(BASE + 1, 0)
    index.reset()
    assert index.entries == 0
    assert index.lookup(BASE + 1) == (BASE, 0)
    index.delete()
    assert not path.exists()


def test_rename_keeps_working(path: Path) -> None:
    index = open_index(path)
    index.append(BASE + 1, 10)
    target = path.with_name(path.name + ".deleted")
    index.rename(target)
    assert index.path == target and target.exists() and not path.exists()
    assert index.lookup(BASE + 1) == (BASE + 1, 10)
    index.close()
    assert target.stat().st_size == 8
