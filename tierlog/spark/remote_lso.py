"""The remote tier's own last stable offset: where a read_committed read of the remote tier
alone (``tierlog.tiers=remote``, no broker to ask for the LSO) must stop (KIP-98, KIP-405).

Why a bound: a segment is offloaded once it is wholly below the LSO, so each transaction
with records in it had ended by then, but its COMMIT or ABORT marker may still be in a
local segment not offloaded yet. Until that marker is remote, the remote tier alone cannot
tell a committed transaction from an aborted one (an abort's ``.txnindex`` entry is in the
marker's segment). Kafka's read_committed consumer stops at the LSO, the first offset of the
earliest transaction still open; this is the same rule at the remote tier's end: the first
offset of the earliest transaction open at the end of the last remote segment, or the
remote end when none is. Below it every transaction's marker is remote, so every aborted
one has its entry in a remote ``.txnindex`` and a reader of those drops exactly its records.
The bound only moves forward as segments are offloaded: a transaction open at a later end
with its first offset below the bound would have been open at the earlier end too.

Where it comes from: the producer snapshot uploaded beside each segment (KIP-405's
auxiliary state, ``IndexKind.PRODUCER_SNAPSHOT``), whose entries carry each producer's
``current_txn_first_offset``. It is the log's ``<segment next offset>.snapshot``
(``remote_copy.SegmentFiles.of``), written by ``Log.roll`` when it opens the
next segment, before that segment's first batch is applied to the producer state (``_write``
rolls, the append updates the state after): the state after the segment's last batch and
no later one. ``ProducerStateManager.take_snapshot`` refuses an offset below what it has
applied, so the file is never rewritten with a later state, and open transactions are never
expired out of it. The remote cleaner uploads a cleaned group with the snapshot of the last
segment it replaces, which ends where the group does.

Chosen over recording the open transactions in the manifest at upload: the snapshot is
already there for every segment uploaded with auxiliary state, so remote tiers written
before this reader need no new field, and there is no second copy of the same fact to keep
in step (the cleaner carries the snapshot, not manifest fields). It costs one small GET per
partition when a read is planned.

Conservative when it cannot know: a last segment without a snapshot (uploaded without
auxiliary state: by an older tierlog, or after its local snapshot was lost to a restart) is
passed over and the bound is taken at the latest segment that has one, which stops earlier
than needed, never later; with none at all nothing is read. A warning says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tierlog.records.producer_snapshot import SnapshotEntry, decode_snapshot
from tierlog.remote.api import IndexKind, RemoteStorage
from tierlog.remote.manifest import AUX_SUFFIXES, Manifest, committed_segments, object_name

log = logging.getLogger(__name__)


def first_open_offset(entries: Iterable[SnapshotEntry]) -> int | None:
    """The first offset of the earliest transaction open in a producer snapshot, or None
    when none is (Kafka's ``firstUnstableOffset`` of the state it holds)."""
    return min(
        (e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0),
        default=None,
    )


def remote_last_stable_offset(store: RemoteStorage, manifest: Manifest, floor: int) -> int:
    """The offset a read_committed read of the remote tier alone ends at (module docstring).

    Args:
        store: where the segments' producer snapshots are.
        manifest: the partition's manifest the read is planned with.
        floor: the answer when no committed segment has a snapshot (the remote log start).

    Raises:
        CorruptSnapshotError: the snapshot is not a valid one (nothing stale is guessed).
        RemoteStorageError: the store cannot answer.
    """
    committed = committed_segments(manifest)
    without = 0
    bound = floor
    for segment in reversed(committed):
        if not segment.has_aux_state:
            without += 1
            continue
        data = store.fetch_index(segment, IndexKind.PRODUCER_SNAPSHOT)
        name = object_name(segment.base_offset, segment.segment_id, "producer_snapshot")
        first = first_open_offset(decode_snapshot(data, name))
        end = segment.end_offset + 1
        bound = end if first is None else min(first, end)
        break
    if without:
        log.warning(
            "%s-%d: the last %d remote segment(s) have no producer snapshot (%s), so which "
            "transactions they leave open is unknown; a read_committed read of the remote "
            "tier alone stops at %d, before them",
            manifest.topic,
            manifest.partition,
            without,
            AUX_SUFFIXES["producer_snapshot"],
            bound,
        )
    return bound
