"""The group coordinator: the one object the request handlers call for consumer groups.

``GroupCoordinator`` is a thin facade built from the components that do the work, each
owning one responsibility, all over one ``GroupRuntime`` (the groups and their store in
``__consumer_offsets``, timers, writes in flight):

- ``ClassicGroupProtocol`` (``classic``, with ``classic_rebalance``): JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup; ``ClassicConversionSteps`` (``conversions``), the classic side of
  a group moving between the protocols;
- ``ConsumerGroups`` (``consumer_groups``): KIP-848's consumer protocol,
  ConsumerGroupHeartbeat and ConsumerGroupDescribe, over the pure
  ``ConsumerGroupProtocol``; with ``ClassicMembersOfConsumerGroups``
  (``consumer_classic``), the classic requests of a consumer group's classic members;
- ``GroupOffsets`` (``offsets``): OffsetCommit, TxnOffsetCommit and transaction
  completion, OffsetFetch, OffsetDelete, expiration;
- ``GroupAdmin`` (``admin``): ListGroups, DescribeGroups, DeleteGroups.

A group id names one group of one type. The classic requests go to the consumer group of
their id when there is one (which answers, or deletes itself when empty so that the
classic protocol starts a classic group), else to the classic protocol.

The facade itself owns the coordinator's lifecycle: which ``__consumer_offsets``
partitions it coordinates (loading and unloading them as leadership moves) and closing.
Everything takes plain values and returns ``tierlog.broker.group.results`` dataclasses
whose ``error`` is a Kafka error code; nothing here knows kio or sockets. All methods must
be called on the broker's event loop (timers use ``loop.call_later``). ``join_group`` and
``sync_group`` resolve when the rebalance lets them; ``heartbeat``, ``fetch_offsets``,
``list_groups``, ``describe_groups`` and ``complete_txn`` answer at once;
``consumer_group_heartbeat``, ``leave_group``, ``commit_offsets``, ``txn_offset_commit``,
``delete_groups``, ``delete_offsets`` and ``cleanup_expired_offsets`` return once their
records are durable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from tierlog.broker.group.admin import GroupAdmin
from tierlog.broker.group.classic import ClassicGroupProtocol
from tierlog.broker.group.classic_rebalance import ClassicRebalance
from tierlog.broker.group.config import GroupConfig
from tierlog.broker.group.consumer.config import ConsumerGroupConfig
from tierlog.broker.group.consumer.protocol import ConsumerGroupProtocol
from tierlog.broker.group.consumer.topics import TopicsImage, TopicsView
from tierlog.broker.group.consumer_classic import ClassicMembersOfConsumerGroups
from tierlog.broker.group.consumer_groups import ConsumerGroups
from tierlog.broker.group.conversions import ClassicConversionSteps
from tierlog.broker.group.group import GroupMetadata
from tierlog.broker.group.manager import Append, LoadedGroups, LogBatch
from tierlog.broker.group.offsets import GroupOffsets
from tierlog.broker.group.results import (
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    SyncGroupResult,
)
from tierlog.broker.group.runtime import GroupRuntime
from tierlog.util.clock import Clock, SystemClock

_NO_TOPICS = TopicsImage()


class GroupCoordinator:
    """Broker-side coordinator of consumer groups (see the module docstring).

    Args:
        append: the broker's ``async append(partition, batch)`` to ``__consumer_offsets``
            (see ``tierlog.broker.group.manager``); responses that depend on a write are
            sent only after it returns.
        config: settings (Kafka's defaults when None).
        clock: time for timestamps (commit times, state times); timers use the loop.
        consumer_config: the ``group.consumer.*`` settings (Kafka's defaults when None).
        topics: the cluster's topics as the consumer protocol sees them (ids, partition
            counts, a version), asked once per request; none when not given.
    """

    def __init__(
        self,
        append: Append,
        *,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        consumer_config: ConsumerGroupConfig | None = None,
        topics: Callable[[], TopicsView] | None = None,
    ) -> None:
        self.config = config or GroupConfig()
        self.clock: Clock = clock or SystemClock()
        self._runtime = GroupRuntime(append, self.config, self.clock)
        rebalance = ClassicRebalance(self._runtime)
        self.classic = ClassicGroupProtocol(self._runtime, rebalance)
        self.consumer = ConsumerGroups(
            self._runtime,
            ConsumerGroupProtocol(
                consumer_config or ConsumerGroupConfig(),
                self._runtime.store,
                topics or (lambda: _NO_TOPICS),
                self.clock,
            ),
            ClassicConversionSteps(self._runtime, rebalance),
            enabled="consumer" in self.config.rebalance_protocols,
        )
        self._classic_members = ClassicMembersOfConsumerGroups(self.consumer, self._runtime.store)
        self.offsets = GroupOffsets(
            self._runtime, keep_alive=self.classic.keep_alive, consumer_groups=self.consumer
        )
        self.admin = GroupAdmin(self._runtime, self.consumer)
        # The requests, each answered by the component that owns it.
        self.consumer_group_heartbeat = self.consumer.heartbeat
        self.consumer_group_describe = self.consumer.describe
        self.commit_offsets = self.offsets.commit_offsets
        self.txn_offset_commit = self.offsets.txn_offset_commit
        self.complete_txn = self.offsets.complete_txn
        self.fetch_offsets = self.offsets.fetch_offsets
        self.delete_offsets = self.offsets.delete_offsets
        self.list_groups = self.admin.list_groups
        self.describe_groups = self.admin.describe_groups
        self.delete_groups = self.admin.delete_groups

    # ================================================================ classic requests

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        *,
        group_instance_id: str | None = None,
        require_known_member_id: bool = False,
        supports_skip_assignment: bool = False,
        reason: str | None = None,
    ) -> JoinGroupResult:
        """JoinGroup (see ``ClassicGroupProtocol.join_group``); a consumer group's answer
        when the id is one."""
        error = self.classic.join_error(group_id, session_timeout_ms)
        if error:
            return JoinGroupResult(error, member_id)
        answer = await self._classic_members.join_group(
            group_id,
            member_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            group_instance_id=group_instance_id,
            require_known_member_id=require_known_member_id,
        )
        if answer is not None:
            return answer
        # No await between the consumer side's "not mine" and the classic protocol taking
        # the member: nothing can make the id a consumer group in between.
        return await self.classic.join_group(
            group_id,
            member_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            group_instance_id=group_instance_id,
            require_known_member_id=require_known_member_id,
            supports_skip_assignment=supports_skip_assignment,
            reason=reason,
        )

    async def sync_group(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: dict[str, bytes],
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncGroupResult:
        """SyncGroup (see ``ClassicGroupProtocol.sync_group``)."""
        if not self._runtime.validate(group_id, require_id=True):
            answer = await self._classic_members.sync_group(
                group_id,
                member_id,
                generation_id,
                group_instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
            )
            if answer is not None:
                return answer
        return await self.classic.sync_group(
            group_id,
            member_id,
            generation_id,
            assignments,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> HeartbeatResult:
        """Heartbeat (see ``ClassicGroupProtocol.heartbeat``)."""
        if not self._runtime.validate(group_id, require_id=True):
            answer = self._classic_members.heartbeat(
                group_id, member_id, generation_id, group_instance_id
            )
            if answer is not None:
                return answer
        return self.classic.heartbeat(group_id, member_id, generation_id, group_instance_id)

    async def leave_group(
        self,
        group_id: str,
        members: Sequence[tuple[str, str | None]],
        reason: str | None = None,
    ) -> LeaveGroupResult:
        """LeaveGroup (see ``ClassicGroupProtocol.leave_group``); a consumer group's
        classic members leave once their removal is durable."""
        if not self._runtime.validate(group_id, require_id=True):
            answer = await self._classic_members.leave_group(group_id, members)
            if answer is not None:
                return answer
        return self.classic.leave_group(group_id, members, reason)

    async def cleanup_expired_offsets(self) -> int:
        """Expire offsets (``GroupOffsets.cleanup_expired_offsets``), then delete the
        consumer groups left empty without offsets, as Kafka's retention task does."""
        removed = await self.offsets.cleanup_expired_offsets()
        await self.consumer.delete_abandoned()
        return removed

    # ================================================================ partitions

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that holds ``group_id`` (FindCoordinator)."""
        return self._runtime.partition_for(group_id)

    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._runtime.store.partitions)

    def group(self, group_id: str) -> GroupMetadata | None:
        """The cached classic state of ``group_id`` (or the holder of a consumer group's
        offsets) on a partition coordinated here, or None."""
        return self._runtime.store.get_group(group_id)

    def begin_loading(self, partition: int) -> None:
        """Claim ``partition`` before reading it: its groups answer
        COORDINATOR_LOAD_IN_PROGRESS until ``load_partition`` finishes."""
        self._runtime.store.begin_loading(partition)

    def load_partition(self, partition: int, batches: Iterable[LogBatch]) -> int:
        """Become coordinator of ``partition``, replaying its batches in log order.

        Args:
            batches: every batch of the partition's log, control batches included, as
                ``(header, records)`` (``tierlog.broker.offsets_topic.read_batches``).

        Restores committed offsets, classic group metadata and consumer groups (last
        value per key wins, tombstones delete). Transactional offset commits count once
        their producer's COMMIT marker follows them, and are dropped at its ABORT marker;
        those of transactions still open at the log end stay pending until
        ``complete_txn``. A classic group whose last record has members comes back Stable
        with them, and each must heartbeat within its session timeout (Kafka's
        ``onGroupLoaded``); a group without members comes back Empty with its
        generation. Consumer groups come back as their records say, each member's session
        timer started. Groups this coordinator already had on the partition are dropped
        first (their waiters answer NOT_COORDINATOR).

        Returns:
            The number of groups loaded (classic groups and consumer groups).
        """
        store = self._runtime.store
        if partition in store.partitions:
            self._unloaded(store.unload_partition(partition))
        loaded = store.load_partition(partition, batches)
        self.classic.on_groups_loaded(loaded.classic)
        self.consumer.on_groups_loaded(loaded.consumer)
        consumer_ids = {g.group_id for g in loaded.consumer}
        return len(loaded.consumer) + sum(
            1 for g in loaded.classic if g.group_id not in consumer_ids
        )

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating ``partition`` (leadership moved): its groups are dropped and
        waiting JoinGroup/SyncGroup calls answer NOT_COORDINATOR."""
        self._unloaded(self._runtime.store.unload_partition(partition))

    def _unloaded(self, groups: LoadedGroups) -> None:
        self.classic.on_groups_unloaded(groups.classic)
        self.consumer.on_groups_unloaded(groups.consumer)

    async def close(self) -> None:
        """Unload everything, then wait for writes in flight. Later calls answer
        COORDINATOR_NOT_AVAILABLE."""
        self._runtime.deactivate()
        for partition in list(self._runtime.store.partitions):
            self.unload_partition(partition)
        self._runtime.timers.cancel_all()
        self._runtime.consumer_timers.cancel_all()
        await self._runtime.wait_for_writes()
