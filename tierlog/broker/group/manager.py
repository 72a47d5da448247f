"""The coordinator's group cache and its persistence in ``__consumer_offsets``.

This module owns (like Kafka's ``GroupMetadataManager``): which ``__consumer_offsets``
partitions this broker coordinates and whether they are still loading; the cache of
``GroupMetadata`` for the groups on those partitions (classic groups, and the committed
offsets of every group id) and of the consumer groups (KIP-848, ``ConsumerGroup``, in a
``ConsumerGroupStore``); turning group metadata, offset commits, deletions and consumer
group records into record batches (``tierlog.broker.group.offsets_codec`` and
``...consumer.record_codec`` formats) handed to the injected ``append``; and rebuilding
the caches from a partition's records when the broker becomes its leader
(``tierlog.broker.group.loader``). The membership protocols live in
``tierlog.broker.group.classic`` and ``tierlog.broker.group.consumer_groups``. Runs on
the event loop; not thread-safe.

A group id names one group of one type. A consumer group's committed offsets are kept,
like a classic group's, in a ``GroupMetadata`` of its id, which then holds no members
(Empty, no protocol type): offsets belong to the id, whichever protocol its members speak.

Writes that change a group's type or records (the consumer protocol's, and a classic
group's metadata) hold that group's lock (``group_lock``) from the decision to the
append: a classic write that would land after an upgrade's tombstone is refused instead,
so the log never holds a group of both types.

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

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from enum import Enum

from tierlog.broker.group.config import GroupConfig
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.member import ClassicProtocol
from tierlog.broker.group.consumer.migration import ClassicGroupView, ClassicMemberView
from tierlog.broker.group.consumer.record_codec import encode_record
from tierlog.broker.group.consumer.records import Record as GroupRecord
from tierlog.broker.group.consumer.store import ConsumerGroupStore
from tierlog.broker.group.group import GroupMetadata, GroupState
from tierlog.broker.group.loader import LogBatch, group_from_value, replay
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from tierlog.broker.group.placement import partition_for
from tierlog.broker.group.results import TopicPartition
from tierlog.broker.group.txn_offsets import CommitRecord, PendingTxnOffsets
from tierlog.protocol.errors import ErrorCode
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
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


__all__ = ["Append", "AppendError", "GroupMetadataManager", "LoadedGroups", "LogBatch"]


@dataclass(frozen=True, slots=True)
class LoadedGroups:
    """The groups of one partition, loaded or unloaded: classic groups (and the offsets
    holders of consumer groups) and consumer groups."""

    classic: list[GroupMetadata] = field(default_factory=list)
    consumer: list[ConsumerGroup] = field(default_factory=list)


class GroupLocks:
    """One asyncio lock per group id, kept only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @asynccontextmanager
    async def hold(self, group_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(group_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[group_id]


def classic_view(group: GroupMetadata) -> ClassicGroupView:
    """What a conversion to the consumer protocol needs of a classic group (its members'
    protocols and last assignments)."""
    return ClassicGroupView(
        group.group_id,
        group.protocol_type,
        group.protocol_name,
        group.generation_id,
        tuple(
            ClassicMemberView(
                member_id=m.member_id,
                instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocols=tuple(ClassicProtocol(n, bytes(d)) for n, d in m.protocols),
                assignment=m.assignment,
            )
            for m in group.members.values()
        ),
    )


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
        self.consumer = ConsumerGroupStore()
        self.partitions: dict[int, PartitionState] = {}
        self._commit_seq = 0
        self._locks = GroupLocks()
        # Bumped whenever a partition is loaded or unloaded: a write that started before
        # applies nothing after it (its records are in the log the next load reads).
        self._load_epochs: dict[int, int] = {}
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
        self._load_epochs[partition] = self._load_epochs.get(partition, 0) + 1

    def load_epoch(self, partition: int) -> int:
        """Changes whenever ``partition`` is loaded or unloaded (see ``__init__``)."""
        return self._load_epochs.get(partition, 0)

    def group_lock(self, group_id: str) -> AbstractAsyncContextManager[None]:
        """``async with store.group_lock(id)``: see the module docstring."""
        return self._locks.hold(group_id)

    def load_partition(self, partition: int, batches: Iterable[LogBatch]) -> LoadedGroups:
        """Rebuild the groups of ``partition`` from its batches; returns them.

        Groups that have offsets but no metadata record come back as simple groups
        (Empty, no protocol type); so do consumer groups' offsets holders. Offsets of
        transactions without a marker yet stay pending (``complete_txn`` settles them).
        Groups already cached for the partition are replaced.
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
        consumer_groups = state.consumer_groups()
        for consumer_group in consumer_groups:
            self.consumer.put(consumer_group)
        self.partitions[partition] = PartitionState.LOADED
        return LoadedGroups(loaded, consumer_groups)

    def unload_partition(self, partition: int) -> LoadedGroups:
        """Forget ``partition`` and its groups (classic ones marked Dead); returns them."""
        self.partitions.pop(partition, None)
        self._load_epochs[partition] = self._load_epochs.get(partition, 0) + 1
        now = self.clock.milliseconds()
        removed = [g for gid, g in self.groups.items() if self.partition_for(gid) == partition]
        for group in removed:
            del self.groups[group.group_id]
            group.transition_to(GroupState.DEAD, now)
            for producer_id in group.pending_txn_offsets.producers():
                self._forget_txn_group(producer_id, group.group_id)
        consumer_groups = [
            g for g in self.consumer.groups() if self.partition_for(g.group_id) == partition
        ]
        for consumer_group in consumer_groups:
            self.consumer.pop(consumer_group.group_id)
        return LoadedGroups(removed, consumer_groups)

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

    # ---------------------------------------------------------------- GroupLookup

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group of ``group_id`` on a partition coordinated here, or None."""
        return self.consumer.consumer_group(group_id)

    def classic_group(self, group_id: str) -> ClassicGroupView | None:
        """The classic group of ``group_id`` (possibly Empty, or only holding offsets) as
        a conversion sees it; None if there is none, or the id is a consumer group's."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD) or self.consumer_group(group_id):
            return None
        return classic_view(group)

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
        error code (0 on success). REBALANCE_IN_PROGRESS, and nothing written, when the
        id became a consumer group's meanwhile (its members rejoin that group)."""
        async with self.group_lock(group.group_id):
            if self.consumer_group(group.group_id) is not None:
                return E.rebalance_in_progress
            value = group_metadata_value(group, assignment)
            record = Record(
                encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(value)
            )
            error = await self._write(self.partition_for(group.group_id), [record])
        return group_store_error(error)

    async def write_group_records(
        self,
        group_id: str,
        records: Sequence[GroupRecord],
        *,
        offset_tombstones: Iterable[TopicPartition] = (),
    ) -> int:
        """Append a consumer group's records (consumer group types and, for a conversion,
        the classic GroupMetadata record) as one batch, in order, after tombstones of its
        ``offset_tombstones`` (a deletion); returns 0 or the raw Kafka error code. The
        caller holds the group's lock and applies them once written."""
        encoded = [
            Record(encode_key(OffsetCommitKey(group_id, t, p)), None) for t, p in offset_tombstones
        ]
        if not records and not encoded:
            return E.none
        for record in records:
            key, value = encode_record(record)
            encoded.append(Record(key, value))
        return await self._write(self.partition_for(group_id), encoded)

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
