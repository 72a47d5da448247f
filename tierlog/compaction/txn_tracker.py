"""Which transactional batches a pass drops and which markers it may drop (KIP-98):
Kafka's ``CleanedTransactionMetadata``, sans-I/O, fed batch headers in offset order.

The aborted transactions come from the ``.txnindex`` entries of the range walked
(``Log.collect_aborted_transactions``, or a remote segment's ``IndexKind.TRANSACTION``
object). An entry makes its producer "ongoing aborted" from the transaction's first offset
until its ABORT marker: every transactional data batch of that producer in between
belongs to the aborted transaction (a producer has one transaction open at a time) and is
dropped. The rules for markers, Kafka's:

* an ABORT marker is kept while a batch of its transaction was seen in this pass (the
  batch may go in this very pass: the marker goes in a later one), and then so is its
  ``.txnindex`` entry (``kept_entries``: what the cleaned segment's index holds);
* a COMMIT marker is kept while a data batch of its transaction was seen in this pass;
* otherwise the marker is "empty" (``on_marker`` returns True): the pass that finds it so
  stamps it with a delete horizon, like a tombstone (KIP-534), and the first pass after
  the horizon removes it. A control batch of any other type is always kept; an empty
  control batch (what is left of a producer's last marker) is empty already.

Nothing here reads records: the caller gives each control batch's bytes, whose one
record says COMMIT or ABORT (``end_txn_marker``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tierlog.local.producer_state import end_txn_marker
from tierlog.records.header import Attr, BatchHeader
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.records.varint import BytesLike

# Batches the tracker must see: the rest (plain data batches) never change its state.
TXN_ATTRS = Attr.TRANSACTIONAL | Attr.CONTROL


@dataclass(slots=True)
class _Aborted:
    txn: AbortedTxn
    observed: bool = False  # a batch of it was seen in this pass


class CleanedTransactions:
    """The transaction state of one walk over a log's batches, in offset order.

    Args:
        aborted: the aborted transactions whose markers are at or after the walk's first
            offset (entries ending before it would mark their producer aborted for
            ever); duplicates are harmless.
    """

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending = sorted(set(aborted), key=lambda t: (t.first_offset, t.last_offset))
        self._next = 0
        self._aborted: dict[int, _Aborted] = {}
        self._committed: set[int] = set()
        # ABORT markers kept with data seen: the entries the cleaned index keeps, in
        # marker order. The caller empties it for each cleaned segment.
        self.kept_entries: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._next += 1
            if txn.producer_id not in self._aborted:
                self._aborted[txn.producer_id] = _Aborted(txn)

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch (empty ones too); True when it belongs to an aborted transaction."""
        if not header.attributes & Attr.TRANSACTIONAL:
            return False
        self._consume_up_to(header.last_offset)
        aborted = self._aborted.get(header.producer_id)
        if aborted is not None:
            aborted.observed = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, batch: BytesLike) -> bool:
        """A control batch; True when no batch of its transaction was seen in this pass,
        so the marker may go once past its delete horizon (Kafka's
        ``onControlBatchRead``)."""
        self._consume_up_to(header.last_offset)
        if header.record_count == 0:
            return True  # emptied by an earlier pass: only its header was kept
        marker = end_txn_marker(batch)
        if marker is None:
            return False  # not COMMIT or ABORT: kept as it is
        pid = header.producer_id
        if marker.commit:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        aborted = self._aborted.pop(pid, None)
        if aborted is not None and aborted.observed:
            self.kept_entries.append(aborted.txn)
            return False
        return True

    def take_kept_entries(self) -> list[AbortedTxn]:
        """The entries kept since the last call (one cleaned segment's index)."""
        entries, self.kept_entries = self.kept_entries, []
        return entries


def undecided_from(headers: Iterable[BatchHeader]) -> int | None:
    """The first offset of the earliest transaction the batches open and do not end (a
    marker beyond them, or none yet), or None: the range's own first unstable offset,
    for a walk that has no ``Log`` to ask (the remote cleaner's downloaded segments)."""
    open_at: dict[int, int] = {}
    for header in headers:
        attrs = header.attributes
        if not attrs & TXN_ATTRS:
            continue
        if attrs & Attr.CONTROL:
            open_at.pop(header.producer_id, None)
        elif header.producer_id not in open_at:
            open_at[header.producer_id] = header.base_offset
    return min(open_at.values(), default=None)
