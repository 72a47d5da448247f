"""The coordinator's group cache and its persistence in ``__consumer_offsets``.

This module owns (like Kafka's ``GroupMetadataManager``): which ``__consumer_offsets``
partitions this broker coordinates and whether they are still loading; the cache of
``GroupMetadata`` for the groups on those partitions; turning group metadata, offset
commits and deletions into record batches (``tierlog.broker.group.offsets_codec``
formats) handed to the injected ``append``; and rebuilding the cache from a partition's
records when the broker becomes its leader. The membership protocol itself lives in
``tierlog.broker.group.classic``. Runs on the event loop; not thread-safe.

Transactional offset commits (KIP-98 TxnOffsetCommit) are written as one transactional
batch of the producer and held in ``GroupMetadata.pending_txn_offsets`` until the
transaction's marker reaches the partition: ``complete_txn`` applies (COMMIT) or drops
(ABORT) them; loading does the same with the control batches it meets in the log.

``append(partition, batch)`` is the broker's: append one complete record batch to
``__consumer_offsets-<partition>`` and return once it is durable (acks=all), preserving
call order per partition. To fail with a specific Kafka error it raises ``AppendError``;
any other exception counts as COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from tierlog.broker.group.config import GroupConfig
from tierlog.broker.group.group import GroupMetadata, GroupState, MemberMetadata
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsCodecError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from tierlog.broker.group.placement import partition_for
from tierlog.broker.group.results import TopicPartition
from tierlog.broker.group.txn_offsets import CommitRecord, PendingTxnOffsets
from tierlog.protocol.errors import ErrorCode
from tierlog.records.builder import ControlType, Record, build_batch
from tierlog.records.header import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader
from tierlog.records.reader import DecodedRecord
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)

Append = Callable[[int, bytes], Awaitable[None]]

E = ErrorCode
# Kafka's GroupMetadataManager.storeGroup: what an append error becomes in a
# JoinGroup/SyncGroup answer ...
_STORE_GROUP_ERRORS: dict[int, int] = {
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.message_too_large: E.unknown_server_error,
    E.record_list_too_large: E.unknown_server_error,
    E.invalid_fetch_size: E.unknown_server_error,
}
# ... and storeOffsets: what it becomes in an OffsetCommit answer.
_STORE_OFFSETS_ERRORS: dict[int, int] = {
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.message_too_large: E.invalid_commit_offset_size,
    E.record_list_too_large: E.invalid_commit_offset_size,
    E.invalid_fetch_size: E.invalid_commit_offset_size,
}


def group_store_error(error: int) -> int:
    """What an append error becomes in a group-metadata answer (Kafka's storeGroup)."""
    return _STORE_GROUP_ERRORS.get(error, error) if error else E.none


class AppendError(Exception):
    """Raised by the ``append`` callable to fail an append with a Kafka error code."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or f"append failed with error {error_code}")
        self.error_code = error_code


class PartitionState(Enum):
    LOADING = "loading"
    LOADED = "loaded"


# One batch of a ``__consumer_offsets`` partition as the loader reads it: its header
# (transactional? control? which producer?) and its records with their log offsets.
LogBatch = tuple[BatchHeader, Sequence[DecodedRecord]]
_CONTROL_KEY = struct.Struct(">hh")  # version, type (tierlog.records.builder)


@dataclass(slots=True)
class _Replayed:
    """One partition's records folded in log order: the last value per key (tombstones
    delete), the offsets of transactions still open at the end per producer id, and the
    offset after the last batch."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, CommitRecord]] = field(default_factory=dict)
    pending: dict[int, dict[str, dict[TopicPartition, CommitRecord]]] = field(default_factory=dict)
    end_offset: int = 0


def replay(batches: Iterable[LogBatch]) -> _Replayed:
    """Fold batches in log order, as Kafka's ``loadGroupsAndOffsets`` does.

    Offset commits in a transactional batch are held per producer id until that
    producer's control batch: COMMIT applies each one unless the partition's current
    offset was written later, ABORT drops them. Undecodable or foreign records are
    skipped (logged).
    """
    out = _Replayed()
    for header, records in batches:
        out.end_offset = max(out.end_offset, header.next_offset)
        if header.is_control:
            if header.is_transactional:
                _replay_marker(out, header, records)
            continue  # other control records (e.g. KRaft's) carry no group state
        for rec in records:
            _replay_record(out, header, rec)
    return out


def _replay_marker(out: _Replayed, header: BatchHeader, records: Sequence[DecodedRecord]) -> None:
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        log.warning("__consumer_offsets control batch at %d has no marker", header.base_offset)
        return
    _, kind = _CONTROL_KEY.unpack_from(records[0].key)
    pending = out.pending.pop(header.producer_id, {})
    if kind != ControlType.COMMIT:
        return
    for group_id, offsets in pending.items():
        loaded = out.offsets.setdefault(group_id, {})
        for tp, record in offsets.items():
            current = loaded.get(tp)
            if current is None or current.order < record.order:
                loaded[tp] = record


def _replay_record(out: _Replayed, header: BatchHeader, rec: DecodedRecord) -> None:
    if rec.key is None:
        log.warning("__consumer_offsets record at offset %d has no key", rec.offset)
        return
    try:
        key = decode_key(rec.key)
        if isinstance(key, OffsetCommitKey):
            tp = (key.topic, key.partition)
            if header.is_transactional:
                target = out.pending.setdefault(header.producer_id, {})
            else:
                target = out.offsets
            if rec.value is None:
                group_offsets = target.get(key.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
            else:
                value = decode_offset_commit_value(rec.value)
                # Kafka orders commits by their batch's base offset.
                record = CommitRecord(value, header.base_offset)
                target.setdefault(key.group, {})[tp] = record
        elif isinstance(key, GroupMetadataKey):
            if rec.value is None:
                out.groups.pop(key.group, None)
            else:
                out.groups[key.group] = decode_group_metadata_value(rec.value)
    except OffsetsCodecError as exc:
        log.warning("skipping __consumer_offsets record at offset %d: %s", rec.offset, exc)


def group_from_value(group_id: str, value: GroupMetadataValue, now_ms: int) -> GroupMetadata:
    """Rebuild a group from its last record, as Kafka's ``GroupMetadata.loadGroup`` does:
    Empty with its generation when it had no members, else Stable with them."""
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = GroupMetadata(group_id, now_ms, state)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.current_state_timestamp = (
        value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    )
    for m in value.members:
        group.add(
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout,
                m.session_timeout,
                value.protocol_type,
                [(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
        )
    group.protocol_type = value.protocol_type or None
    group.leader_id = value.leader if value.leader in group.members else group.leader_id
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def group_metadata_value(
    group: GroupMetadata, assignment: Mapping[str, bytes]
) -> GroupMetadataValue:
    """The GroupMetadataValue Kafka writes for ``group`` with these assignments."""
    protocol = group.protocol_name
    members = tuple(
        MemberMetadataValue(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata(protocol) if protocol is not None else b"",
            assignment.get(m.member_id, b""),
        )
        for m in group.members.values()
    )
    ts = group.current_state_timestamp
    return GroupMetadataValue(
        group.protocol_type or "",
        group.generation_id,
        protocol,
        group.leader_id,
        -1 if ts is None else ts,
        members,
    )


class GroupMetadataManager:
    """Group cache, partition ownership and ``__consumer_offsets`` I/O (module docstring)."""

    def __init__(self, append: Append, config: GroupConfig, clock: Clock) -> None:
        self._append = append
        self.config = config
        self.clock = clock
        self.groups: dict[str, GroupMetadata] = {}
        self.partitions: dict[int, PartitionState] = {}
        self._commit_seq = 0
        # Producer id -> groups holding offsets of its open transaction (Kafka's
        # openGroupsForProducer), so a marker finds them without scanning every group.
        self._txn_groups: dict[int, set[str]] = {}

    # ---------------------------------------------------------------- ownership

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def coordinator_error(self, group_id: str) -> int:
        """0 if this broker coordinates the group now, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS."""
        state = self.partitions.get(self.partition_for(group_id))
        if state is None:
            return E.not_coordinator
        if state is PartitionState.LOADING:
            return E.coordinator_load_in_progress
        return E.none

    def any_loading(self) -> bool:
        return any(s is PartitionState.LOADING for s in self.partitions.values())

    def begin_loading(self, partition: int) -> None:
        self.partitions[partition] = PartitionState.LOADING

    def load_partition(self, partition: int, batches: Iterable[LogBatch]) -> list[GroupMetadata]:
        """Rebuild the groups of ``partition`` from its batches; returns them.

        Groups that have offsets but no metadata record come back as simple groups
        (Empty, no protocol type). Offsets of transactions without a marker yet stay
        pending (``complete_txn`` settles them). Groups already cached for the partition
        are replaced.
        """
        self.begin_loading(partition)
        state = replay(batches)
        # Commits written from now on must order after everything loaded.
        self._commit_seq = max(self._commit_seq, state.end_offset)
        pending_by_group: dict[str, dict[int, dict[TopicPartition, CommitRecord]]] = {}
        for producer_id, by_group in state.pending.items():
            for group_id, offsets in by_group.items():
                if offsets:
                    pending_by_group.setdefault(group_id, {})[producer_id] = offsets
        now = self.clock.milliseconds()
        loaded: list[GroupMetadata] = []
        for group_id in state.groups.keys() | state.offsets.keys() | pending_by_group.keys():
            if self.partition_for(group_id) != partition:
                log.warning(
                    "group %r found in partition %d, expected %d",
                    group_id,
                    partition,
                    self.partition_for(group_id),
                )
            value = state.groups.get(group_id)
            group = (
                group_from_value(group_id, value, now)
                if value is not None
                else GroupMetadata(group_id, now)
            )
            records = state.offsets.get(group_id, {})
            group.offsets = {tp: r.value for tp, r in records.items()}
            group.offset_commit_seq = {tp: r.order for tp, r in records.items()}
            group.pending_txn_offsets = PendingTxnOffsets(pending_by_group.get(group_id))
            if value is None and not group.has_offsets():
                continue
            for producer_id in group.pending_txn_offsets.producers():
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
            self.groups[group_id] = group
            loaded.append(group)
        self.partitions[partition] = PartitionState.LOADED
        return loaded

    def unload_partition(self, partition: int) -> list[GroupMetadata]:
        """Forget ``partition`` and its groups (marked Dead); returns them."""
        self.partitions.pop(partition, None)
        now = self.clock.milliseconds()
        removed = [g for gid, g in self.groups.items() if self.partition_for(gid) == partition]
        for group in removed:
            del self.groups[group.group_id]
            group.transition_to(GroupState.DEAD, now)
            for producer_id in group.pending_txn_offsets.producers():
                self._forget_txn_group(producer_id, group.group_id)
        return removed

    def _forget_txn_group(self, producer_id: int, group_id: str) -> None:
        group_ids = self._txn_groups.get(producer_id)
        if group_ids is not None:
            group_ids.discard(group_id)
            if not group_ids:
                del self._txn_groups[producer_id]

    # ---------------------------------------------------------------- cache

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        """Cache ``group`` unless one with its id exists; returns the cached one."""
        return self.groups.setdefault(group.group_id, group)

    def remove_group(self, group: GroupMetadata) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # ---------------------------------------------------------------- writes

    async def _write(
        self,
        partition: int,
        records: list[Record],
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> int:
        """Append ``records`` as one batch; returns 0 or the raw Kafka error code.

        With a producer id the batch is that producer's transactional batch, with no
        sequence number (the coordinator's own write, Kafka's AppendOrigin.COORDINATOR).
        """
        batch = build_batch(
            records,
            base_timestamp=self.clock.milliseconds(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=NO_SEQUENCE,
            transactional=producer_id != NO_PRODUCER_ID,
        )
        try:
            await self._append(partition, batch)
        except AppendError as exc:
            log.warning("append to __consumer_offsets-%d failed: %s", partition, exc)
            return exc.error_code
        except Exception:
            log.exception("append to __consumer_offsets-%d failed", partition)
            return E.coordinator_not_available
        return E.none

    async def store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> int:
        """Persist the group's metadata with ``assignment``; returns a JoinGroup/SyncGroup
        error code (0 on success)."""
        value = group_metadata_value(group, assignment)
        record = Record(
            encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(value)
        )
        error = await self._write(self.partition_for(group.group_id), [record])
        return group_store_error(error)

    async def store_offsets(
        self, group: GroupMetadata, offsets: Mapping[TopicPartition, OffsetCommitValue]
    ) -> int:
        """Persist offset commits, then apply them to the group; returns an OffsetCommit
        error code (0 on success).

        While the append is in flight the partitions count as pending (never expired);
        a commit that completes after a later one for the same partition does not
        overwrite it in memory (Kafka compares log offsets; ``CommitRecord.order`` here).
        """
        if not offsets:
            return E.none
        self._commit_seq += 1
        seq = self._commit_seq
        records = [
            Record(encode_key(OffsetCommitKey(group.group_id, t, p)), encode_offset_commit_value(v))
            for (t, p), v in offsets.items()
        ]
        group.pending_offset_commits.update(offsets.keys())
        try:
            error = await self._write(self.partition_for(group.group_id), records)
        finally:
            group.pending_offset_commits.subtract(offsets.keys())
            group.pending_offset_commits += Counter()  # drop zero counts
        if error:
            return _STORE_OFFSETS_ERRORS.get(error, error)
        if not group.is_(GroupState.DEAD):
            for tp, value in offsets.items():
                group.apply_offset(tp, value, seq)
        return E.none

    async def store_txn_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetCommitValue],
        *,
        guard: Callable[[], bool] | None = None,
    ) -> int:
        """Persist a transaction's offset commits as one transactional batch of the
        producer and hold them pending until its marker (``complete_txn``); returns a
        TxnOffsetCommit error code (0 on success). A failed append drops them again.
        ``guard`` False just before the append: INVALID_TXN_STATE, nothing written.

        They are pending from before the append, so OffsetFetch with require_stable
        answers UNSTABLE_OFFSET_COMMIT for them from the start (Kafka's
        ``prepareTxnOffsetCommit``).
        """
        if not offsets:
            return E.none
        # No await from here to the append: the guard's answer holds for it.
        if guard is not None and not guard():
            return E.invalid_txn_state
        self._commit_seq += 1
        seq = self._commit_seq
        records = [
            Record(encode_key(OffsetCommitKey(group.group_id, t, p)), encode_offset_commit_value(v))
            for (t, p), v in offsets.items()
        ]
        prepared = {tp: CommitRecord(v, seq) for tp, v in offsets.items()}
        replaced = group.pending_txn_offsets.prepare(producer_id, prepared)
        self._txn_groups.setdefault(producer_id, set()).add(group.group_id)
        error = await self._write(
            self.partition_for(group.group_id), records, producer_id, producer_epoch
        )
        if error:
            group.pending_txn_offsets.fail(producer_id, prepared, replaced)
            if not group.pending_txn_offsets.get(producer_id):
                self._forget_txn_group(producer_id, group.group_id)
            return _STORE_OFFSETS_ERRORS.get(error, error)
        return E.none

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> int:
        """Settle ``producer_id``'s pending offsets in the groups of ``partition`` (its
        marker is in that partition's log); returns how many offsets were applied."""
        group_ids = self._txn_groups.get(producer_id)
        if not group_ids:
            return 0
        applied = 0
        for group_id in [g for g in group_ids if self.partition_for(g) == partition]:
            self._forget_txn_group(producer_id, group_id)
            group = self.groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                applied += group.complete_txn(producer_id, commit)
        return applied

    async def write_tombstones(
        self,
        partition: int,
        offsets: Iterable[tuple[str, TopicPartition]],
        groups: Iterable[str] = (),
    ) -> int:
        """Append tombstones for ``(group_id, tp)`` offsets and whole groups; returns the
        raw error code (0 on success). Offsets go first, as in Kafka's cleanup."""
        records = [Record(encode_key(OffsetCommitKey(g, t, p)), None) for g, (t, p) in offsets]
        records += [Record(encode_key(GroupMetadataKey(g)), None) for g in groups]
        if not records:
            return E.none
        return await self._write(partition, records)
