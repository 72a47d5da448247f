"""The group coordinator: the one object the request handlers call for consumer groups.

``GroupCoordinator`` is a thin facade built from the components that do the work, each
owning one responsibility, all over one ``GroupRuntime`` (the groups and their store in
``__consumer_offsets``, timers, writes in flight):

- ``ClassicGroupProtocol`` (``classic``, with ``classic_rebalance``): JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup;
- ``GroupOffsets`` (``offsets``): OffsetCommit, TxnOffsetCommit and transaction
  completion, OffsetFetch, OffsetDelete, expiration;
- ``GroupAdmin`` (``admin``): ListGroups, DescribeGroups, DeleteGroups.

KIP-848's consumer protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe) is another
component beside ``ClassicGroupProtocol`` over the same runtime; the facade gains its
methods and tells it about loaded and unloaded partitions as it tells the classic one.

The facade itself owns the coordinator's lifecycle: which ``__consumer_offsets``
partitions it coordinates (loading and unloading them as leadership moves) and closing.
Everything takes plain values and returns ``tierlog.broker.group.results`` dataclasses
whose ``error`` is a Kafka error code; nothing here knows kio or sockets. All methods must
be called on the broker's event loop (timers use ``loop.call_later``). ``join_group`` and
``sync_group`` resolve when the rebalance lets them; ``heartbeat``, ``leave_group``,
``fetch_offsets``, ``list_groups``, ``describe_groups`` and ``complete_txn`` answer at
once; ``commit_offsets``, ``txn_offset_commit``, ``delete_groups``, ``delete_offsets`` and
``cleanup_expired_offsets`` return once their records are durable.
"""

from __future__ import annotations

from collections.abc import Iterable

from tierlog.broker.group.admin import GroupAdmin
from tierlog.broker.group.classic import ClassicGroupProtocol
from tierlog.broker.group.classic_rebalance import ClassicRebalance
from tierlog.broker.group.config import GroupConfig
from tierlog.broker.group.group import GroupMetadata
from tierlog.broker.group.manager import Append, LogBatch
from tierlog.broker.group.offsets import GroupOffsets
from tierlog.broker.group.runtime import GroupRuntime
from tierlog.util.clock import Clock, SystemClock


class GroupCoordinator:
    """Broker-side coordinator of consumer groups (see the module docstring).

    Args:
        append: the broker's ``async append(partition, batch)`` to ``__consumer_offsets``
            (see ``tierlog.broker.group.manager``); responses that depend on a write are
            sent only after it returns.
        config: settings (Kafka's defaults when None).
        clock: time for timestamps (commit times, state times); timers use the loop.
    """

    def __init__(
        self, append: Append, *, config: GroupConfig | None = None, clock: Clock | None = None
    ) -> None:
        self.config = config or GroupConfig()
        self.clock: Clock = clock or SystemClock()
        self._runtime = GroupRuntime(append, self.config, self.clock)
        self.classic = ClassicGroupProtocol(self._runtime, ClassicRebalance(self._runtime))
        self.offsets = GroupOffsets(self._runtime, keep_alive=self.classic.keep_alive)
        self.admin = GroupAdmin(self._runtime)
        # The requests, each answered by the component that owns it.
        self.join_group = self.classic.join_group
        self.sync_group = self.classic.sync_group
        self.heartbeat = self.classic.heartbeat
        self.leave_group = self.classic.leave_group
        self.commit_offsets = self.offsets.commit_offsets
        self.txn_offset_commit = self.offsets.txn_offset_commit
        self.complete_txn = self.offsets.complete_txn
        self.fetch_offsets = self.offsets.fetch_offsets
        self.delete_offsets = self.offsets.delete_offsets
        self.cleanup_expired_offsets = self.offsets.cleanup_expired_offsets
        self.list_groups = self.admin.list_groups
        self.describe_groups = self.admin.describe_groups
        self.delete_groups = self.admin.delete_groups

    # ================================================================ partitions

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that holds ``group_id`` (FindCoordinator)."""
        return self._runtime.partition_for(group_id)

    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._runtime.store.partitions)

    def group(self, group_id: str) -> GroupMetadata | None:
        """The cached state of ``group_id`` on a partition coordinated here, or None."""
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

        Restores committed offsets and group metadata (last value per key wins,
        tombstones delete). Transactional offset commits count once their producer's
        COMMIT marker follows them, and are dropped at its ABORT marker; those of
        transactions still open at the log end stay pending until ``complete_txn``.
        A group whose last record has members comes back Stable with them, and each
        must heartbeat within its session timeout (Kafka's ``onGroupLoaded``); a group
        without members comes back Empty with its generation. Groups this coordinator
        already had on the partition are dropped first (their waiters answer
        NOT_COORDINATOR).

        Returns:
            The number of groups loaded.
        """
        store = self._runtime.store
        if partition in store.partitions:
            self.classic.on_groups_unloaded(store.unload_partition(partition))
        groups = store.load_partition(partition, batches)
        self.classic.on_groups_loaded(groups)
        return len(groups)

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating ``partition`` (leadership moved): its groups are dropped and
        waiting JoinGroup/SyncGroup calls answer NOT_COORDINATOR."""
        self.classic.on_groups_unloaded(self._runtime.store.unload_partition(partition))

    async def close(self) -> None:
        """Unload everything, then wait for writes in flight. Later calls answer
        COORDINATOR_NOT_AVAILABLE."""
        self._runtime.deactivate()
        for partition in list(self._runtime.store.partitions):
            self.unload_partition(partition)
        self._runtime.timers.cancel_all()
        await self._runtime.wait_for_writes()
