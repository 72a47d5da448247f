"""The bytes of a segment's aborted-transaction index (``<base offset>.txnindex``), sans I/O.

Kafka's ``TransactionIndex`` format, so its tools read our files and ours read theirs: a
file is a plain sequence of 34-byte entries, big-endian, with no header::

     0  version              int16   0
     2  producer_id          int64
    10  first_offset         int64   the transaction's first offset in this partition
    18  last_offset          int64   the offset of its ABORT marker
    26  last_stable_offset   int64   the partition's LSO once the marker was written

One entry per aborted transaction, appended to the index of the segment that holds the
marker, in marker order. A ``read_committed`` fetch lists the entries whose range meets the
fetched range, and the consumer drops those producers' records in it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class CorruptTxnIndexError(ValueError):
    """The bytes are not a whole number of version-0 entries."""


class AbortedTxn(NamedTuple):
    """One aborted transaction of a partition (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(ENTRY_VERSION, *txn)


def encode_entries(txns: Iterable[AbortedTxn]) -> bytes:
    return b"".join(encode_entry(txn) for txn in txns)


def decode_entries(
    data: bytes | bytearray | memoryview, name: str = "txnindex"
) -> list[AbortedTxn]:
    """Every entry of an index file's bytes.

    Raises:
        CorruptTxnIndexError: a partial entry at the end or an unknown version.
    """
    if len(data) % ENTRY_SIZE:
        raise CorruptTxnIndexError(
            f"{name}: {len(data)} bytes is not a multiple of the {ENTRY_SIZE}-byte entry"
        )
    entries = []
    for position in range(0, len(data), ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, position)
        if version != ENTRY_VERSION:
            raise CorruptTxnIndexError(f"{name}: entry at byte {position} has version {version}")
        entries.append(AbortedTxn(*fields))
    return entries


def overlapping(
    txns: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """The transactions a fetch of [fetch_offset, upper_bound_offset) must be told about:
    those that end at or after its start and begin before its end (Kafka's
    ``TransactionIndex.collectAbortedTxns``)."""
    return [
        txn
        for txn in txns
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset
    ]
