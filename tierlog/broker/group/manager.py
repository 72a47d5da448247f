"""The coordinator's group cache and its persistence in ``__consumer_offsets``.

This module owns (like Kafka's ``GroupMetadataManager``): which ``__consumer_offsets``
partitions this broker coordinates and whether they are still loading; the cache of
``GroupMetadata`` for the groups on those partitions; turning group metadata, offset
commits and deletions into record batches (``tierlog.broker.group.offsets_codec``
formats) handed to the injected ``append``; and rebuilding the cache from a partition's
records when the broker becomes its leader. The membership protocol itself lives in
``tierlog.broker.group.coordinator``. Runs on the event loop; not thread-safe.

``append(partition, batch)`` is the broker's: append one complete record batch to
``__consumer_offsets-<partition>`` and return once it is durable (acks=all), preserving
call order per partition. To fail with a specific Kafka error it raises ``AppendError``;
any other exception counts as COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
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
from tierlog.protocol.errors import ErrorCode
from tierlog.records.builder import Record, build_batch
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


@dataclass(slots=True)
class _Replayed:
    """Last value per key of one partition's records (tombstones delete)."""

    groups: dict[str, GroupMetadataValue]
    offsets: dict[str, dict[TopicPartition, OffsetCommitValue]]


def replay(records: Iterable[DecodedRecord]) -> _Replayed:
    """Fold records in log order; undecodable or foreign records are skipped (logged)."""
    out = _Replayed({}, {})
    for rec in records:
        if rec.key is None:
            log.warning("__consumer_offsets record at offset %d has no key", rec.offset)
            continue
        try:
            key = decode_key(rec.key)
            if isinstance(key, OffsetCommitKey):
                tp = (key.topic, key.partition)
                if rec.value is None:
                    group_offsets = out.offsets.get(key.group)
                    if group_offsets is not None:
                        group_offsets.pop(tp, None)
                else:
                    value = decode_offset_commit_value(rec.value)
                    out.offsets.setdefault(key.group, {})[tp] = value
            elif isinstance(key, GroupMetadataKey):
                if rec.value is None:
                    out.groups.pop(key.group, None)
                else:
                    out.groups[key.group] = decode_group_metadata_value(rec.value)
        except OffsetsCodecError as exc:
            log.warning("skipping __consumer_offsets record at offset %d: %s", rec.offset, exc)
    return out


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

    def load_partition(
        self, partition: int, records: Iterable[DecodedRecord]
    ) -> list[GroupMetadata]:
        """Rebuild the groups of ``partition`` from its records; returns them.

        Groups that have offsets but no metadata record come back as simple groups
        (Empty, no protocol type). Groups already cached for the partition are replaced.
        """
        self.begin_loading(partition)
        state = replay(records)
        now = self.clock.milliseconds()
        loaded: list[GroupMetadata] = []
        for group_id in state.groups.keys() | state.offsets.keys():
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
            group.offsets = state.offsets.get(group_id, {})
            if value is None and not group.offsets:
                continue
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
        return removed

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

    async def _write(self, partition: int, records: list[Record]) -> int:
        """Append ``records`` as one batch; returns 0 or the raw Kafka error code."""
        batch = build_batch(records, base_timestamp=self.clock.milliseconds())
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
        overwrite it in memory (Kafka compares log offsets; a sequence number does here).
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
                if group.offset_commit_seq.get(tp, 0) < seq:
                    group.offsets[tp] = value
                    group.offset_commit_seq[tp] = seq
        return E.none

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
