import struct

import pytest

from tierlog.records.txn_index_codec import (
    ENTRY_SIZE,
    AbortedTxn,
    CorruptTxnIndexError,
    decode_entries,
    encode_entries,
    encode_entry,
    overlapping,
)


def test_an_entry_is_kafkas_34_bytes_version_first():
    data = encode_entry(AbortedTxn(7, 100, 150, 120))
    assert ENTRY_SIZE == 34 and len(data) == 34
    assert struct.unpack(">hqqqq", data) == (0, 7, 100, 150, 120)


def test_entries_round_trip_in_order():
    txns = [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21)]
    assert decode_entries(encode_entries(txns)) == txns
    assert decode_entries(b"") == []


@pytest.mark.parametrize(
    "data", [encode_entry(AbortedTxn(1, 0, 1, 2))[:-1], struct.pack(">hqqqq", 1, 1, 0, 1, 2)]
)
def test_a_partial_entry_or_unknown_version_is_corrupt(data):
    with pytest.raises(CorruptTxnIndexError, match="txnindex"):
        decode_entries(data)


def test_overlapping_keeps_ranges_that_meet_the_fetch():
    before = AbortedTxn(1, 0, 9, 10)
    spanning = AbortedTxn(2, 5, 30, 31)
    inside = AbortedTxn(3, 12, 14, 15)
    after = AbortedTxn(4, 20, 25, 26)
    assert overlapping([before, spanning, inside, after], 10, 20) == [spanning, inside]
