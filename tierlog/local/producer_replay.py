"""Replaying a log's batches into its producer state, and indexing the aborts met on the way.

The loader (after a restart) and the log (after a truncation) both rebuild the idempotent
and transactional producers' state (``ProducerStateManager``) the same way: from a
snapshot's offset, every batch in order, as the original appends saw them. A transaction
an ABORT marker ends gets an entry in the ``.txnindex`` of the segment holding the marker
(Kafka's ``LogSegment.updateTxnIndex``), with the last stable offset the replay gives,
which is the one the original append gave, so replicas' index files are identical.

No I/O beyond reading markers' bytes from segment files; owned by nobody (functions).
"""

from __future__ import annotations

import os

from tierlog.local.log_segments import LogSegments
from tierlog.local.producer_state import CompletedTxn, ProducerStateManager, end_txn_marker
from tierlog.local.segment import LogSegment
from tierlog.records.txn_index_codec import AbortedTxn


def index_if_aborted(
    state: ProducerStateManager, completed: CompletedTxn | None, segment: LogSegment
) -> None:
    """An aborted transaction goes into the marker's segment's ``.txnindex`` with the LSO
    once it ended (Kafka's ``LogSegment.updateTxnIndex``)."""
    if completed is not None and completed.is_aborted:
        segment.txn_index.append(
            AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.last_offset,
                state.last_stable_offset(completed),
            )
        )


def replay_producers(
    segments: LogSegments,
    state: ProducerStateManager,
    from_offset: int,
    log_end_offset: int,
    index_from: int | None = None,
) -> None:
    """Replay producer batches from ``from_offset`` to the log end into ``state``.

    ``index_from``: the segments from there on had their ``.txnindex`` emptied
    (recovery); transactions aborted by markers at or above it are indexed again.
    """
    for segment, position, header in segments.batches(from_offset):
        marker = None
        if (
            header.is_control
            and header.producer_id >= 0
            and header.last_offset >= state.map_end_offset
        ):
            marker = end_txn_marker(os.pread(segment.fd, header.size, position))
        completed = state.replay(header, marker)
        if index_from is not None and completed is not None and completed.last_offset >= index_from:
            index_if_aborted(state, completed, segment)
    state.update_map_end_offset(log_end_offset)
