"""A group's committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete
and offset expiration.

This module owns ``GroupOffsets``, the group coordinator's component for stored offsets
rather than membership (Kafka's ``handleCommitOffsets``/``handleFetchOffsets``,
``handleDeleteOffsets`` and the offsets retention task; Kafka 4's
``OffsetMetadataManager``). Commits are answered only after their records are durable; a commit
with generation -1 and no member id is a "simple" commit (``assign()``-based consumers,
admin tools) and is accepted only while the group has no members, as in Kafka.

Transactional commits (KIP-98 TxnOffsetCommit, member checks from v3 by KIP-447) are
written as the producer's transactional batch and stay pending, invisible to OffsetFetch,
until the transaction's marker is written to the group's partition and ``complete_txn``
is called: COMMIT makes them the committed offsets, ABORT drops them. OffsetFetch with
``require_stable`` (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition with a pending
one. A group with pending transactional offsets is neither expired nor deleted.

A consumer group's (KIP-848) offsets are held the same way, in a ``GroupMetadata`` of its
id without members; the consumer protocol's rules (``ConsumerGroupRules``, the
``ConsumerGroups`` component) decide who may commit and fetch with which member epoch
(OffsetCommit v9+, OffsetFetch v9+), and which topics' offsets stay (those its members
subscribe to neither expire nor can be deleted).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from tierlog.broker.group.group import CONSUMER_PROTOCOL_TYPE, GroupMetadata, GroupState
from tierlog.broker.group.manager import group_store_error
from tierlog.broker.group.offsets_codec import OffsetCommitValue
from tierlog.broker.group.results import (
    FetchedOffset,
    OffsetCommitResult,
    OffsetFetchResult,
    TopicPartition,
)
from tierlog.broker.group.runtime import GroupRuntime, restore_offsets
from tierlog.protocol.errors import ErrorCode

log = logging.getLogger("tierlog.broker.group.coordinator")
E = ErrorCode
S = GroupState

# What a commit carries per partition: (offset, leader_epoch, metadata); epoch -1 when
# unknown (OffsetCommit < v6), metadata None stored as "".
CommitEntry = tuple[int, int, str | None]
UNKNOWN_MEMBER_ID = ""
# A request from a group member that counts as its heartbeat: (group, member id).
KeepAlive = Callable[[GroupMetadata, str], None]
# OffsetCommit v9 is the first that carries a KIP-848 member epoch.
LATEST_COMMIT_VERSION = 9


class ConsumerGroupRules(Protocol):
    """The consumer protocol's offset rules (``ConsumerGroups``)."""

    def commit_error(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        transactional: bool,
        api_version: int,
    ) -> int | None: ...

    def fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> int: ...

    def subscribed_topics(self, group_id: str) -> set[str] | None: ...


class GroupOffsets:
    """The offset requests of the group coordinator (see the module docstring).

    Args:
        runtime: the coordinator's groups, store and timers.
        keep_alive: called for a commit by a member: a commit counts as a heartbeat in the
            classic protocol.
        consumer_groups: the consumer protocol's rules for the ids of consumer groups.
    """

    def __init__(
        self, runtime: GroupRuntime, keep_alive: KeepAlive, consumer_groups: ConsumerGroupRules
    ) -> None:
        self._runtime = runtime
        self._keep_alive = keep_alive
        self._consumer = consumer_groups

    def _holder(self, group_id: str) -> GroupMetadata:
        """The ``GroupMetadata`` that holds a consumer group's offsets (made on first use)."""
        group = self._runtime.store.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            group = self._runtime.store.add_group(GroupMetadata(group_id, self._runtime.now()))
        return group

    # ================================================================ OffsetCommit

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartition, CommitEntry],
        *,
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
        api_version: int = LATEST_COMMIT_VERSION,
    ) -> OffsetCommitResult:
        """OffsetCommit: store ``offsets`` and answer once they are durable.

        Args:
            generation_id: the member's generation (a consumer group's member: its member
                epoch), or -1 with member id "" for a simple commit.
            retention_time_ms: OffsetCommit v2-v4 retention_time; -1 (the default, and
                always from v5) means broker retention (``offsets.retention.minutes``).
            api_version: the request's; a consumer-protocol member needs v9+.
        """

        def fail(error: int) -> OffsetCommitResult:
            return OffsetCommitResult(error, {tp: error for tp in offsets})

        error = self._runtime.validate(group_id, require_id=False)
        if error:
            return fail(error)
        consumer_error = self._consumer.commit_error(
            group_id, member_id, generation_id, transactional=False, api_version=api_version
        )
        if consumer_error:
            return fail(consumer_error)
        if consumer_error is not None:
            return await self._write_commit(self._holder(group_id), offsets, retention_time_ms)
        group = self._runtime.store.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A group we do not know cannot have a generation: a stale member.
                return fail(E.illegal_generation)
            # Not relying on group management: offsets-only group (Kafka's addGroup).
            group = self._runtime.store.add_group(GroupMetadata(group_id, self._runtime.now()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error:
            return fail(error)
        if group.is_(S.COMPLETING_REBALANCE):
            # The member has its JoinGroup answer but not yet its assignment.
            return fail(E.rebalance_in_progress)
        # A commit counts as a heartbeat; during PreparingRebalance the commit is
        # accepted, and the next heartbeat tells the member to rejoin.
        self._keep_alive(group, member_id)
        return await self._write_commit(group, offsets, retention_time_ms)

    async def _write_commit(
        self,
        group: GroupMetadata,
        offsets: Mapping[TopicPartition, CommitEntry],
        retention_time_ms: int,
    ) -> OffsetCommitResult:
        now = self._runtime.now()
        expire = now + retention_time_ms if retention_time_ms >= 0 else -1
        partitions: dict[TopicPartition, int] = {}
        to_store: dict[TopicPartition, OffsetCommitValue] = {}
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            text = metadata or ""
            if not self._metadata_fits(text):
                partitions[tp] = E.offset_metadata_too_large
            else:
                to_store[tp] = OffsetCommitValue(offset, leader_epoch, text, now, expire)
        if not to_store:
            return OffsetCommitResult(E.none, partitions)
        # Shielded: once appended, the commit must be applied even if the client is gone.
        error = await asyncio.shield(
            self._runtime.spawn(self._runtime.store.store_offsets(group, to_store))
        )
        for tp in to_store:
            partitions[tp] = error
        return OffsetCommitResult(error, partitions)

    def _metadata_fits(self, metadata: str) -> bool:
        # Kafka compares String.length(): UTF-16 code units.
        return (
            len(metadata.encode("utf-16-le")) // 2 <= self._runtime.config.offset_metadata_max_bytes
        )

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        iid: str | None,
        *,
        transactional: bool = False,
    ) -> int:
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or iid is not None:
            if group.is_static_member_fenced(member_id, iid):
                return E.fenced_instance_id
            if not group.has(member_id):
                return E.unknown_member_id
            if generation_id != group.generation_id:
                return E.illegal_generation
            return E.none
        if not transactional and not group.is_(S.EMPTY):
            # Only members may commit for a group that has them. Not for transactional
            # commits: TxnOffsetCommit before v3 carries no member id or generation.
            return E.unknown_member_id
        return E.none

    # ================================================================ TxnOffsetCommit

    async def txn_offset_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: Mapping[TopicPartition, CommitEntry],
        *,
        guard: Callable[[], bool] | None = None,
    ) -> OffsetCommitResult:
        """TxnOffsetCommit (v0-v4): write ``offsets`` as the producer's transactional
        batch and answer once it is durable; they stay pending until ``complete_txn``.

        Args:
            producer_id, producer_epoch: the transactional producer's; the log fences an
                old epoch (the append error is the partitions' answer).
            member_id, generation_id, group_instance_id: the consumer's group metadata
                (v3+, KIP-447); v0-v2 send "", -1 and None, which skip the member checks.
                With them, a stale member gets ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or
                FENCED_INSTANCE_ID, as for OffsetCommit.
            offsets: per partition (offset, leader_epoch, metadata); leader_epoch -1
                before v2.
            guard: KIP-890 part 1: called just before the append, in the same step as
                it; False (the transaction ended since the handler verified it with the
                transaction coordinator) answers INVALID_TXN_STATE and writes nothing,
                so no late commit opens a transaction no marker will close.

        Returns:
            An error code per partition: NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
            as OffsetCommit, OFFSET_METADATA_TOO_LARGE for single partitions, or the
            append's error (e.g. INVALID_PRODUCER_EPOCH, PRODUCER_FENCED).
        """

        def fail(error: int) -> OffsetCommitResult:
            return OffsetCommitResult(error, {tp: error for tp in offsets})

        error = self._runtime.validate(group_id, require_id=True)
        if error:
            return fail(error)
        consumer_error = self._consumer.commit_error(
            group_id,
            member_id,
            generation_id,
            transactional=True,
            api_version=LATEST_COMMIT_VERSION,
        )
        has_member = generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID
        group = self._runtime.store.get_group(group_id)
        if consumer_error:
            return fail(consumer_error)
        if consumer_error is not None:
            group = self._holder(group_id)
        elif group is None:
            if has_member or group_instance_id is not None:
                # Kafka creates the group, then finds no such member in it.
                return fail(E.unknown_member_id)
            # A transaction may commit for a group nobody has joined (Kafka's addGroup).
            group = self._runtime.store.add_group(GroupMetadata(group_id, self._runtime.now()))
        else:
            error = self._validate_offset_commit(
                group, generation_id, member_id, group_instance_id, transactional=True
            )
            if error:
                return fail(error)
        now = self._runtime.now()
        partitions: dict[TopicPartition, int] = {}
        to_store: dict[TopicPartition, OffsetCommitValue] = {}
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            text = metadata or ""
            if not self._metadata_fits(text):
                partitions[tp] = E.offset_metadata_too_large
            else:
                to_store[tp] = OffsetCommitValue(offset, leader_epoch, text, now)
        if not to_store:
            return OffsetCommitResult(E.none, partitions)
        # Shielded: once appended, the pending offsets must be recorded even if the
        # client is gone, or a later COMMIT marker would find nothing to apply.
        error = await asyncio.shield(
            self._runtime.spawn(
                self._runtime.store.store_txn_offsets(
                    group, producer_id, producer_epoch, to_store, guard=guard
                )
            )
        )
        for tp in to_store:
            partitions[tp] = error
        return OffsetCommitResult(error, partitions)

    def complete_txn(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of ``producer_id`` was appended to
        ``__consumer_offsets-<offsets_partition>``: settle the producer's pending offsets
        in that partition's groups (Kafka's ``scheduleHandleTxnCompletion``).

        On commit each pending offset becomes the committed one unless the partition's
        current offset was written after it (an OffsetCommit appended later wins); on
        abort they are dropped. No I/O: the marker in the log is the durable record. A
        partition this broker does not coordinate is ignored (its next leader reads the
        marker when it loads).
        """
        applied = self._runtime.store.complete_txn(offsets_partition, producer_id, commit)
        log.debug(
            "transaction of producer %d %s in __consumer_offsets-%d: %d offsets applied",
            producer_id,
            "committed" if commit else "aborted",
            offsets_partition,
            applied,
        )

    # ================================================================ OffsetFetch

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResult:
        """OffsetFetch for one group: ``partitions`` None means every committed partition.

        Unknown partitions (and unknown groups) get offset -1, leader epoch -1,
        metadata "". With ``require_stable`` (v7+, KIP-447) a partition that has an
        offset pending in an open transaction gets UNSTABLE_OFFSET_COMMIT instead (the
        client retries until the transaction ends); without it, the last committed
        offset is returned as if no transaction were open. ``member_id`` and
        ``member_epoch`` (v9+) are checked against a consumer group's member
        (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); a classic group ignores them.
        """
        error = self._runtime.validate(group_id, require_id=False)
        if not error:
            error = self._consumer.fetch_error(group_id, member_id, member_epoch)
        if error:
            return OffsetFetchResult(error)
        group = self._runtime.store.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            return OffsetFetchResult(E.none, {tp: FetchedOffset() for tp in partitions or ()})
        tps = list(group.offsets) if partitions is None else partitions
        out: dict[TopicPartition, FetchedOffset] = {}
        for tp in tps:
            value = group.offsets.get(tp)
            if require_stable and group.pending_txn_offsets.has_partition(tp):
                out[tp] = FetchedOffset(error=E.unstable_offset_commit)
            elif value is None:
                out[tp] = FetchedOffset()
            else:
                out[tp] = FetchedOffset(value.offset, value.leader_epoch, value.metadata)
        return OffsetFetchResult(E.none, out)

    # ================================================================ OffsetDelete

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete (KIP-496, ``kafka-consumer-groups --delete-offsets``): remove the
        group's committed offsets of ``partitions``. Returns (group error, per-partition
        errors). As in Kafka: an Empty group's offsets all go; a consumer group with
        members keeps those of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC) and
        loses the others; any other group with members is NON_EMPTY_GROUP. A partition
        without an offset is answered 0. An Empty group left without offsets is removed,
        as expiration does."""
        wanted = list(dict.fromkeys(partitions))
        error = self._runtime.validate(group_id, require_id=False)
        if error:
            return error, {}
        group = self._runtime.store.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found, {}
        errors: dict[TopicPartition, int] = {}
        consumer_topics = self._consumer.subscribed_topics(group_id)
        if consumer_topics is not None:
            eligible = [tp for tp in wanted if tp[0] not in consumer_topics]
            errors = {tp: E.group_subscribed_to_topic for tp in wanted if tp[0] in consumer_topics}
        elif group.is_(S.EMPTY):
            eligible = wanted
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = group.subscribed_topics or set()
            eligible = [tp for tp in wanted if tp[0] not in subscribed]
            errors = {tp: E.group_subscribed_to_topic for tp in wanted if tp[0] in subscribed}
        else:
            return E.non_empty_group, {}
        removed = {tp: group.offsets.pop(tp) for tp in eligible if tp in group.offsets}
        dead = group.is_(S.EMPTY) and not group.has_offsets()
        if dead:
            self._runtime.detach(group)
        if removed or dead:
            dead_ids = [group.group_id] if dead and group.generation_id > 0 else []
            error = await self._runtime.store.write_tombstones(
                self._runtime.partition_for(group_id), [(group_id, tp) for tp in removed], dead_ids
            )
            if error:
                self._runtime.reattach(group, removed) if dead else restore_offsets(group, removed)
                return group_store_error(error), {}
            if dead:
                group.transition_to(S.DEAD, self._runtime.now())
        errors.update({tp: E.none for tp in eligible})
        return E.none, errors

    # ================================================================ expiration

    async def cleanup_expired_offsets(self) -> int:
        """Expire offsets past ``offsets.retention.minutes`` (see
        ``GroupMetadata.expired_offsets``) and drop Empty groups left without offsets.
        The broker calls this every ``offsets.retention.check.interval.ms``.

        Returns:
            The number of offsets removed.
        """
        now = self._runtime.now()
        plan: dict[
            int, list[tuple[GroupMetadata, dict[TopicPartition, OffsetCommitValue], bool]]
        ] = defaultdict(list)
        for group in list(self._runtime.store.groups.values()):
            expired = group.expired_offsets(
                now,
                self._runtime.config.offsets_retention_ms,
                self._consumer.subscribed_topics(group.group_id),
            )
            removed = {tp: group.offsets.pop(tp) for tp in expired}
            dead = group.is_(S.EMPTY) and not group.has_offsets()
            if dead:
                self._runtime.detach(group)
            if removed or dead:
                plan[self._runtime.partition_for(group.group_id)].append((group, removed, dead))
        total = 0
        for partition, items in plan.items():
            offsets = [(g.group_id, tp) for g, removed, _ in items for tp in removed]
            # A group that never had a generation only stored offsets: it has no
            # metadata record to delete (as in Kafka).
            dead_ids = [g.group_id for g, _, dead in items if dead and g.generation_id > 0]
            error = await self._runtime.store.write_tombstones(partition, offsets, dead_ids)
            if error:
                log.warning(
                    "expiring offsets in __consumer_offsets-%d failed: error %d", partition, error
                )
                for group, removed, dead in items:
                    self._runtime.reattach(group, removed) if dead else restore_offsets(
                        group, removed
                    )
                continue
            total += len(offsets)
            for group, _, dead in items:
                if dead:
                    group.transition_to(S.DEAD, now)
        if total:
            log.info("removed %d expired offsets", total)
        return total
