"""Offsets and group administration: OffsetCommit, TxnOffsetCommit, OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups and offset expiration.

This module owns ``OffsetsApi``, the part of ``GroupCoordinator`` that is about stored
state rather than membership (Kafka's ``handleCommitOffsets``/``handleFetchOffsets``,
``handleListGroups``/``handleDescribeGroup``/``handleDeleteGroups`` and the offsets
retention task). Commits are answered only after their records are durable; a commit
with generation -1 and no member id is a "simple" commit (``assign()``-based consumers,
admin tools) and is accepted only while the group has no members, as in Kafka.

Transactional commits (KIP-98 TxnOffsetCommit, member checks from v3 by KIP-447) are
written as the producer's transactional batch and stay pending, invisible to OffsetFetch,
until the transaction's marker is written to the group's partition and ``complete_txn``
is called: COMMIT makes them the committed offsets, ABORT drops them. OffsetFetch with
``require_stable`` (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition with a pending
one. A group with pending transactional offsets is neither expired nor deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping

from tierlog.broker.group.group import CONSUMER_PROTOCOL_TYPE, GroupMetadata, GroupState
from tierlog.broker.group.manager import group_store_error
from tierlog.broker.group.offsets_codec import OffsetCommitValue
from tierlog.broker.group.rebalance import UNKNOWN_MEMBER_ID, GroupCoordinatorBase
from tierlog.broker.group.results import (
    DeleteGroupResult,
    DescribedGroup,
    FetchedOffset,
    ListedGroup,
    ListGroupsResult,
    OffsetCommitResult,
    OffsetFetchResult,
    TopicPartition,
)
from tierlog.protocol.errors import ErrorCode

log = logging.getLogger("tierlog.broker.group.coordinator")
E = ErrorCode
S = GroupState

# What a commit carries per partition: (offset, leader_epoch, metadata); epoch -1 when
# unknown (OffsetCommit < v6), metadata None stored as "".
CommitEntry = tuple[int, int, str | None]


class OffsetsApi(GroupCoordinatorBase):
    """Offset and admin requests of the group coordinator (see the module docstring)."""

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
    ) -> OffsetCommitResult:
        """OffsetCommit: store ``offsets`` and answer once they are durable.

        Args:
            generation_id: the member's generation, or -1 with member id "" for a simple
                commit.
            retention_time_ms: OffsetCommit v2-v4 retention_time; -1 (the default, and
                always from v5) means broker retention (``offsets.retention.minutes``).
        """

        def fail(error: int) -> OffsetCommitResult:
            return OffsetCommitResult(error, {tp: error for tp in offsets})

        error = self._validate(group_id, require_id=False)
        if error:
            return fail(error)
        group = self._manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A group we do not know cannot have a generation: a stale member.
                return fail(E.illegal_generation)
            # Not relying on group management: offsets-only group (Kafka's addGroup).
            group = self._manager.add_group(GroupMetadata(group_id, self._now()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error:
            return fail(error)
        if group.is_(S.COMPLETING_REBALANCE):
            # The member has its JoinGroup answer but not yet its assignment.
            return fail(E.rebalance_in_progress)
        if group.has(member_id):
            # A commit counts as a heartbeat; during PreparingRebalance the commit is
            # accepted, and the next heartbeat tells the member to rejoin.
            self._arm_heartbeat(group, group.get(member_id))
        now = self._now()
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
        error = await asyncio.shield(self._spawn(self._manager.store_offsets(group, to_store)))
        for tp in to_store:
            partitions[tp] = error
        return OffsetCommitResult(error, partitions)

    def _metadata_fits(self, metadata: str) -> bool:
        # Kafka compares String.length(): UTF-16 code units.
        return len(metadata.encode("utf-16-le")) // 2 <= self.config.offset_metadata_max_bytes

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

        error = self._validate(group_id, require_id=True)
        if error:
            return fail(error)
        has_member = generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID
        group = self._manager.get_group(group_id)
        if group is None:
            if has_member or group_instance_id is not None:
                # Kafka creates the group, then finds no such member in it.
                return fail(E.unknown_member_id)
            # A transaction may commit for a group nobody has joined (Kafka's addGroup).
            group = self._manager.add_group(GroupMetadata(group_id, self._now()))
        error = self._validate_offset_commit(
            group, generation_id, member_id, group_instance_id, transactional=True
        )
        if error:
            return fail(error)
        now = self._now()
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
            self._spawn(
                self._manager.store_txn_offsets(
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
        applied = self._manager.complete_txn(offsets_partition, producer_id, commit)
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
    ) -> OffsetFetchResult:
        """OffsetFetch for one group: ``partitions`` None means every committed partition.

        Unknown partitions (and unknown groups) get offset -1, leader epoch -1,
        metadata "". With ``require_stable`` (v7+, KIP-447) a partition that has an
        offset pending in an open transaction gets UNSTABLE_OFFSET_COMMIT instead (the
        client retries until the transaction ends); without it, the last committed
        offset is returned as if no transaction were open.
        """
        error = self._validate(group_id, require_id=False)
        if error:
            return OffsetFetchResult(error)
        group = self._manager.get_group(group_id)
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

    # ================================================================ List / Describe

    def list_groups(
        self,
        states_filter: Collection[str] | None = None,
        types_filter: Collection[str] | None = None,
    ) -> ListGroupsResult:
        """ListGroups: the groups of every loaded partition.

        Args:
            states_filter: v4+ (KIP-518), case-insensitive state names; empty = all.
            types_filter: v5+ (KIP-848), group types; these groups are all "classic".
        """
        if not self._active:
            return ListGroupsResult(E.coordinator_not_available)
        error = E.coordinator_load_in_progress if self._manager.any_loading() else E.none
        if types_filter and "classic" not in {t.lower() for t in types_filter}:
            return ListGroupsResult(error)
        states = {s.lower() for s in states_filter} if states_filter else None
        groups = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._manager.groups.values()
            if states is None or g.state.value.lower() in states
        )
        return ListGroupsResult(error, groups)

    def describe_groups(
        self, group_ids: Iterable[str], *, not_found_error: bool = False
    ) -> list[DescribedGroup]:
        """DescribeGroups, one entry per id in order.

        An unknown group is state "Dead" with error 0, as in Kafka up to DescribeGroups
        v5; pass ``not_found_error`` for v6+ to get GROUP_ID_NOT_FOUND instead.
        """
        out = []
        for group_id in group_ids:
            error = self._validate(group_id, require_id=False)
            group = None if error else self._manager.get_group(group_id)
            if error:
                out.append(DescribedGroup(error, group_id))
            elif group is None:
                code = E.group_id_not_found if not_found_error else E.none
                out.append(DescribedGroup(code, group_id, S.DEAD.value))
            else:
                out.append(group.describe())
        return out

    # ================================================================ DeleteGroups

    async def delete_groups(self, group_ids: Iterable[str]) -> list[DeleteGroupResult]:
        """DeleteGroups: only groups without members (Empty) can go (NON_EMPTY_GROUP
        otherwise, also while an open transaction has offsets pending for the group: its
        marker would bring them back); their offsets and metadata get tombstones. One
        result per distinct id, in order."""
        results: dict[str, int] = {}
        deleting: dict[int, list[GroupMetadata]] = defaultdict(list)
        for group_id in group_ids:
            if group_id in results:
                continue
            error = self._validate(group_id, require_id=False)
            group = None if error else self._manager.get_group(group_id)
            if error:
                results[group_id] = error
            elif group is None:
                results[group_id] = E.group_id_not_found
            elif not group.is_(S.EMPTY) or group.pending_txn_offsets:
                results[group_id] = E.non_empty_group
            else:
                # Out of the cache at once, so nothing new attaches to it while the
                # tombstones are written.
                self._detach(group)
                results[group_id] = E.none
                deleting[self.partition_for(group_id)].append(group)
        for partition, groups in deleting.items():
            error = await self._manager.write_tombstones(
                partition,
                [(g.group_id, tp) for g in groups for tp in g.offsets],
                [g.group_id for g in groups if g.generation_id > 0],
            )
            for group in groups:
                if error:
                    self._reattach(group, {})
                    results[group.group_id] = group_store_error(error)
                else:
                    group.transition_to(S.DEAD, self._now())
        return [DeleteGroupResult(gid, code) for gid, code in results.items()]

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
        error = self._validate(group_id, require_id=False)
        if error:
            return error, {}
        group = self._manager.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found, {}
        errors: dict[TopicPartition, int] = {}
        if group.is_(S.EMPTY):
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
            self._detach(group)
        if removed or dead:
            dead_ids = [group.group_id] if dead and group.generation_id > 0 else []
            error = await self._manager.write_tombstones(
                self.partition_for(group_id), [(group_id, tp) for tp in removed], dead_ids
            )
            if error:
                self._reattach(group, removed) if dead else _restore(group, removed)
                return group_store_error(error), {}
            if dead:
                group.transition_to(S.DEAD, self._now())
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
        now = self._now()
        plan: dict[
            int, list[tuple[GroupMetadata, dict[TopicPartition, OffsetCommitValue], bool]]
        ] = defaultdict(list)
        for group in list(self._manager.groups.values()):
            expired = group.expired_offsets(now, self.config.offsets_retention_ms)
            removed = {tp: group.offsets.pop(tp) for tp in expired}
            dead = group.is_(S.EMPTY) and not group.has_offsets()
            if dead:
                self._detach(group)
            if removed or dead:
                plan[self.partition_for(group.group_id)].append((group, removed, dead))
        total = 0
        for partition, items in plan.items():
            offsets = [(g.group_id, tp) for g, removed, _ in items for tp in removed]
            # A group that never had a generation only stored offsets: it has no
            # metadata record to delete (as in Kafka).
            dead_ids = [g.group_id for g, _, dead in items if dead and g.generation_id > 0]
            error = await self._manager.write_tombstones(partition, offsets, dead_ids)
            if error:
                log.warning(
                    "expiring offsets in __consumer_offsets-%d failed: error %d", partition, error
                )
                for group, removed, dead in items:
                    self._reattach(group, removed) if dead else _restore(group, removed)
                continue
            total += len(offsets)
            for group, _, dead in items:
                if dead:
                    group.transition_to(S.DEAD, now)
        if total:
            log.info("removed %d expired offsets", total)
        return total

    def _detach(self, group: GroupMetadata) -> None:
        """Take an Empty group out of the cache (deletion in progress)."""
        self._manager.remove_group(group)
        self._timers.cancel_group(group.group_id)
        group.pending_members.clear()  # their ids die with the group

    def _reattach(
        self, group: GroupMetadata, removed: Mapping[TopicPartition, OffsetCommitValue]
    ) -> None:
        """Undo ``_detach`` after a failed write; if a new group took the id meanwhile,
        the old offsets (still in the log) go to it where it has none."""
        _restore(self._manager.add_group(group), removed)


def _restore(group: GroupMetadata, removed: Mapping[TopicPartition, OffsetCommitValue]) -> None:
    for tp, value in removed.items():
        group.offsets.setdefault(tp, value)
