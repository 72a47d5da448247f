"""A remote segment's data types: its lifecycle, its parts and its description.

``tierlog.remote.api`` re-exports every name here with the interfaces that use them; this
module sits below both the interfaces and ``tierlog.remote.manifest`` (which builds the
manifest from these types), so neither imports the other's module to name a segment.

Segment lifecycle (``SegmentState``, Kafka's ``RemoteLogSegmentState``) is drawn in
``tierlog.remote.api``'s docstring; ``TRANSITIONS`` holds it as data.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import Enum


class SegmentState(Enum):
    """Where a remote segment is in its lifecycle (drawn in the module docstring)."""

    COPY_STARTED = "COPY_STARTED"
    COPY_FINISHED = "COPY_FINISHED"
    DELETE_STARTED = "DELETE_STARTED"


# The allowed moves between states, as data (h11 style); a move to the same state is a
# no-op, so retried transitions are harmless. Leaving DELETE_STARTED means removal from
# the manifest (``manifest.without``), not a state.
TRANSITIONS: dict[SegmentState, frozenset[SegmentState]] = {
    SegmentState.COPY_STARTED: frozenset({SegmentState.COPY_FINISHED, SegmentState.DELETE_STARTED}),
    SegmentState.COPY_FINISHED: frozenset({SegmentState.DELETE_STARTED}),
    SegmentState.DELETE_STARTED: frozenset(),
}


class IndexKind(Enum):
    """Which index of a segment to fetch; the value is the object's kind in the manifest.

    ``PRODUCER_SNAPSHOT`` and ``LEADER_EPOCH`` are KIP-405's auxiliary state: the producer
    state and the leader-epoch history as they stood at the segment's end, from which a
    replica that starts at the leader's local log start rebuilds both without reading the
    remote log. Only segments with ``has_aux_state`` have them.

    ``TRANSACTION`` is the segment's aborted-transaction index (KIP-98's ``.txnindex``,
    byte format in ``tierlog.records.txn_index_codec``): only segments with
    ``has_txn_index`` have one (a segment no aborted transaction ended in has none).
    """

    OFFSET = "index"
    TIME = "timeindex"
    PRODUCER_SNAPSHOT = "producer_snapshot"
    LEADER_EPOCH = "leader_epoch_checkpoint"
    TRANSACTION = "txn_index"


@dataclass(frozen=True, slots=True)
class SegmentPart:
    """Where one part of a remote segment is stored, and its checksum.

    Attributes:
        kind: ``log`` or an ``IndexKind`` value (``index``, ``timeindex``, ...).
        object: the object's name, relative to the partition's directory.
        offset: where the part starts inside the object (0 when it is the whole object;
            several parts share one object in a single-object layout).
        size: the part's length in bytes.
        crc32c: CRC-32C of the part's bytes (Castagnoli, as Kafka's batches), None when
            unknown (segments uploaded before tierlog recorded it).
    """

    kind: str
    object: str
    offset: int
    size: int
    crc32c: int | None


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    """One remote copy of one closed local segment (Kafka's ``RemoteLogSegmentMetadata``).

    Attributes:
        topic, partition, topic_id: the partition; ``topic_id`` tells a recreated topic of
            the same name apart (all zeros when unknown).
        base_offset: first offset the segment may hold (its local file name).
        end_offset: last offset in the segment, inclusive.
        segment_id: a fresh UUID string per upload attempt, part of every object name, so
            a retried or concurrent upload never overwrites a committed copy.
        size_bytes: size of the ``.log`` object.
        max_timestamp: largest batch max timestamp, -1 when none (retention.ms, ListOffsets).
        first_batch_timestamp: the first batch's max timestamp, -1 when none.
        leader_epochs: ``(epoch, start_offset)`` pairs covering the segment, epochs and
            offsets increasing, offsets within ``[base_offset, end_offset]`` (KIP-405 uses
            them to follow leader-epoch lineage on fetch and truncation).
        state: lifecycle state.
        created_ms: wall-clock time the upload attempt started (orphan age).
        has_aux_state: the producer snapshot and leader-epoch checkpoint were uploaded
            beside the segment (``IndexKind.PRODUCER_SNAPSHOT``/``LEADER_EPOCH``); False
            for segments uploaded before tierlog did so.
        has_txn_index: the segment's aborted-transaction index was uploaded beside it
            (``IndexKind.TRANSACTION``); False when the local segment had none (no aborted
            transaction's marker in it) and for segments uploaded before tierlog did so.
        parts: where each part is stored and its CRC-32C, as the store reported it from
            ``copy_segment``; empty for segments described before tierlog recorded them
            (their objects follow the naming rule of ``tierlog.remote.manifest``).
    """

    topic: str
    partition: int
    topic_id: uuid.UUID
    base_offset: int
    end_offset: int
    segment_id: str
    size_bytes: int
    max_timestamp: int
    first_batch_timestamp: int
    leader_epochs: tuple[tuple[int, int], ...]
    state: SegmentState
    created_ms: int
    has_aux_state: bool = False
    has_txn_index: bool = False
    parts: tuple[SegmentPart, ...] = ()

    @property
    def next_offset(self) -> int:
        """The offset after the segment's last one."""
        return self.end_offset + 1

    def part(self, kind: str) -> SegmentPart | None:
        """The recorded part of ``kind``, None when the segment records none."""
        for part in self.parts:
            if part.kind == kind:
                return part
        return None
