"""Drop the records of aborted transactions from a read, given the aborted-txn list (KIP-98).

Sans-I/O: bytes and ``AbortedTxn`` lists in, kept byte ranges out. Two halves, each
Kafka's own rule, so a read of ours shows what a Kafka ``read_committed`` consumer shows:

* ``search_index``: which entries of one segment's ``.txnindex`` a read of
  ``[fetch_offset, upper_bound_offset)`` must be told about, and whether later segments'
  indexes can add any (Kafka's ``TransactionIndex.collectAbortedTxns``: an entry whose
  ``last_stable_offset`` reaches the upper bound ends the search, since every transaction
  aborted after it began at or above the bound). Callers walk segments in offset order
  from the one holding ``fetch_offset`` and stop when it says ``complete``
  (``RemoteLogManager.collectAbortedTransactions``).
* ``AbortedFilter``: walks batches in offset order as Kafka's consumer does
  (``Fetcher.CompletedFetch.nextFetchedRecord``): before each batch of a producer, the
  aborted transactions starting at or below its last offset make their producer
  "aborted"; a transactional data batch of an aborted producer is dropped; that producer's
  ABORT marker (a control batch) ends it. Control batches are never kept.

The filter only reads headers (and the one record of a control batch), so what it keeps is
a list of ``(start, end)`` byte ranges of the input: runs of whole kept batches, which the
caller decodes in place (``tierlog.records.arrow.to_record_batches``) without a copy.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Protocol

from tierlog.records.builder import ControlType
from tierlog.records.header import NO_PRODUCER_ID, BatchHeader
from tierlog.records.reader import decode_batch, iter_whole_batches
from tierlog.records.txn_index_codec import AbortedTxn, overlapping
from tierlog.records.varint import BytesLike

__all__ = ["AbortedFilter", "AbortedStart", "filter_aborted", "search_index"]


class AbortedStart(Protocol):
    """What the filter needs of an aborted transaction: a ``.txnindex`` entry
    (``AbortedTxn``) or a Fetch answer's ``AbortedTransaction`` both have it."""

    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...


def search_index(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> tuple[list[AbortedTxn], bool]:
    """``(overlapping entries, complete)`` of one segment's txn index, in index order.

    ``complete`` is True once an entry's ``last_stable_offset`` is at or above
    ``upper_bound_offset``: entries after it (here or in later segments) are of
    transactions that began at or above the bound, so the walk stops, and that entry's
    successors in this index are not looked at either (as in Kafka).
    """
    out: list[AbortedTxn] = []
    for txn in entries:
        out += overlapping((txn,), fetch_offset, upper_bound_offset)
        if txn.last_stable_offset >= upper_bound_offset:
            return out, True
    return out, False


def _is_abort_marker(buf: BytesLike, pos: int) -> bool:
    """Whether the control batch at ``pos`` is an ABORT marker: its record's key is
    int16 version + int16 type (0 abort, 1 commit). Unknown keys are not aborts (Kafka's
    ControlRecordType.UNKNOWN)."""
    _, records = decode_batch(buf, pos, verify_crc=False)
    if not records:
        return False
    key = records[0].key
    if key is None or len(key) < 4:
        return False
    return int.from_bytes(key[2:4], "big", signed=True) == ControlType.ABORT


class AbortedFilter:
    """Kafka's consumer-side aborted-transaction filter over one partition's batches,
    walked in offset order across calls (one per fetched buffer).

    Args:
        aborted: the aborted transactions the read was told about, in any order
            (duplicates are harmless).
    """

    def __init__(self, aborted: Iterable[AbortedStart] = ()) -> None:
        # Ordered by first offset: consumed as batches pass them (Kafka's PriorityQueue).
        self._pending: list[tuple[int, int]] = []
        self._aborted_producers: set[int] = set()
        self.add(aborted)

    def add(self, aborted: Iterable[AbortedStart]) -> None:
        """More aborted transactions (a later Fetch's answer)."""
        for txn in aborted:
            heapq.heappush(self._pending, (txn.first_offset, txn.producer_id))

    def keep(self, header: BatchHeader, buf: BytesLike, pos: int) -> bool:
        """Whether the batch ``header`` at ``pos`` of ``buf`` is kept; call it for every
        batch, in offset order."""
        if header.producer_id != NO_PRODUCER_ID:
            while self._pending and self._pending[0][0] <= header.last_offset:
                self._aborted_producers.add(heapq.heappop(self._pending)[1])
        if header.is_control:
            if header.producer_id in self._aborted_producers and _is_abort_marker(buf, pos):
                self._aborted_producers.discard(header.producer_id)
            return False
        return not (header.is_transactional and header.producer_id in self._aborted_producers)

    def kept_ranges(self, buf: BytesLike, *, verify_crc: bool = True) -> list[tuple[int, int]]:
        """Byte ranges of ``buf`` made of whole kept batches, merged where adjacent; a
        trailing partial batch is left out (and not walked: pass it again with the rest).

        Raises:
            CorruptBatchError, UnsupportedMagicError: a malformed whole batch.
        """
        ranges: list[tuple[int, int]] = []
        for pos, header in iter_whole_batches(buf, verify_crc=verify_crc):
            if not self.keep(header, buf, pos):
                continue
            end = pos + header.size
            if ranges and ranges[-1][1] == pos:
                ranges[-1] = (ranges[-1][0], end)
            else:
                ranges.append((pos, end))
        return ranges


def filter_aborted(
    buf: BytesLike, aborted: Iterable[AbortedStart], *, verify_crc: bool = True
) -> list[tuple[int, int]]:
    """``AbortedFilter(aborted).kept_ranges(buf)``: one buffer read on its own."""
    return AbortedFilter(aborted).kept_ranges(buf, verify_crc=verify_crc)
