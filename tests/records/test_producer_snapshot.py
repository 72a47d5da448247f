"""The producer snapshot codec (tierlog/records/producer_snapshot.py): Kafka's version 1
layout, a round trip for any entries, and each kind of damage refused by name."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from tierlog.records.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
)

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
ENTRIES = st.lists(st.builds(SnapshotEntry, INT64, INT16, INT32, INT64, INT32, INT64, INT32, INT64))


def test_the_bytes_are_kafkas_version_1_layout() -> None:
    entry = SnapshotEntry(9, 2, 4, 44, 1, 1_700_000_000_002, 7, 40)
    data = encode_snapshot([entry])
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == tuple(entry)
    assert len(data) == 10 + 46


@given(ENTRIES)
def test_any_entries_come_back_in_order(entries: list[SnapshotEntry]) -> None:
    assert decode_snapshot(encode_snapshot(entries)) == entries


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda d: d[:9], "shorter than the header"),
        (lambda d: struct.pack(">h", 2) + d[2:], "unknown snapshot version 2"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "CRC-32C"),
        (lambda d: _with_crc(d + b"\0"), "do not hold 1 entries"),
    ],
)
def test_damage_is_refused_naming_the_file(damage: Callable[[bytes], bytes], words: str) -> None:
    data = encode_snapshot([SnapshotEntry(1, 0, 0, 0, 0, 0, -1, -1)])
    with pytest.raises(CorruptSnapshotError, match=f"^p-0/00.snapshot: .*{words}"):
        decode_snapshot(damage(data), "p-0/00.snapshot")


def _with_crc(data: bytes) -> bytes:
    return data[:2] + struct.pack(">I", crc32c(data[6:])) + data[6:]
