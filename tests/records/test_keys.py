"""tierlog.records.keys: walking a records block fed in pieces, keys checked on demand."""

from __future__ import annotations

import pytest

from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import CorruptBatchError, InvalidRecordError
from tierlog.records.header import HEADER_SIZE
from tierlog.records.keys import RecordScan


def block(records: list[Record]) -> bytes:
    return build_batch(records)[HEADER_SIZE:]


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 26, 100, 1 << 20])
def test_records_are_counted_whatever_the_pieces(piece: int) -> None:
    records = [Record(b"k%d" % i, b"v" * (i * 37 % 300), [("h", b"x")]) for i in range(50)]
    data = block(records)
    scan = RecordScan(keys_required=True)
    for start in range(0, len(data), piece):
        scan.feed(data[start : start + piece])
    assert scan.finish() == 50


@pytest.mark.parametrize("piece", [1, 5, 1 << 20])
def test_a_keyless_record_is_refused_wherever_the_piece_ends(piece: int) -> None:
    data = block([Record(b"k", b"v"), Record(None, b"v" * 40), Record(b"k", b"v")])
    scan = RecordScan(keys_required=True)
    with pytest.raises(InvalidRecordError, match="without a key"):
        for start in range(0, len(data), piece):
            scan.feed(data[start : start + piece])
    # Without the rule the same records are only counted.
    scan = RecordScan(keys_required=False)
    scan.feed(data)
    assert scan.finish() == 3


def test_a_block_cut_inside_a_record_is_corrupt() -> None:
    data = block([Record(b"k", b"v" * 100)] * 3)
    scan = RecordScan(keys_required=False)
    scan.feed(data[:-10])
    with pytest.raises(CorruptBatchError, match="ends inside a record"):
        scan.finish()


def test_zeros_are_not_records() -> None:
    """A block of zeros (what a bomb decompresses to) fails at its first record."""
    scan = RecordScan(keys_required=False)
    with pytest.raises(CorruptBatchError, match="length 0"):
        scan.feed(bytes(1 << 20))
