"""What the group coordinator's components share: the groups and their store, the timers,
the writes in flight, and whether the coordinator is still active.

``GroupRuntime`` is built once per ``GroupCoordinator`` and passed to each component
(the classic protocol, offsets, administration; KIP-848's consumer protocol beside the
classic one): the store (``GroupMetadataManager``: the cache of groups on the partitions
this broker coordinates, and their records in ``__consumer_offsets``), the ``TimerTable``
that stands in for Kafka's purgatories (``timers`` for the classic protocol,
``consumer_timers`` for the consumer protocol: a classic group's timers are cancelled
together, by group id, and must never take a consumer group's with them), and the checks
every request makes first (Kafka's ``validateGroupStatus``). Runs on the event loop; not
thread-safe (state only changes between awaits; the consumer protocol's writes hold the
group's lock, ``GroupMetadataManager.group_lock``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from tierlog.broker.group.config import GroupConfig
from tierlog.broker.group.group import GroupMetadata, GroupState
from tierlog.broker.group.manager import Append, GroupMetadataManager
from tierlog.broker.group.offsets_codec import OffsetCommitValue
from tierlog.broker.group.results import TopicPartition
from tierlog.broker.group.timers import TimerTable
from tierlog.protocol.errors import ErrorCode
from tierlog.util.clock import Clock

log = logging.getLogger("tierlog.broker.group.coordinator")
E = ErrorCode
T = TypeVar("T")


class GroupRuntime:
    """The shared state of the group coordinator's components (module docstring).

    Args:
        append: the broker's ``async append(partition, batch)`` to ``__consumer_offsets``
            (see ``tierlog.broker.group.manager``).
        config: settings.
        clock: time for timestamps (commit times, state times); timers use the loop.
    """

    def __init__(self, append: Append, config: GroupConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.store = GroupMetadataManager(append, config, clock)
        self.timers = TimerTable()
        self.consumer_timers = TimerTable()
        self.active = True
        self._tasks: set[asyncio.Task[Any]] = set()

    def now(self) -> int:
        return self.clock.milliseconds()

    def deactivate(self) -> None:
        """The coordinator is closing: every later request answers
        COORDINATOR_NOT_AVAILABLE."""
        self.active = False

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that holds ``group_id``."""
        return self.store.partition_for(group_id)

    def validate(self, group_id: str, *, require_id: bool) -> int:
        """Kafka's validateGroupStatus. Join/Sync/Heartbeat/Leave need a non-empty group
        id; commit, fetch, describe and delete accept "" (old clients use it)."""
        if require_id and not group_id:
            return E.invalid_group_id
        if not self.active:
            return E.coordinator_not_available
        return self.store.coordinator_error(group_id)

    def is_current(self, group: GroupMetadata) -> bool:
        """Whether ``group`` is still the cached one for its id (not unloaded, deleted or
        replaced since a timer or a write captured it)."""
        return self.store.get_group(group.group_id) is group and not group.is_(GroupState.DEAD)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run a write-and-apply step as its own task: it must finish even if the request
        that started it is cancelled (client gone)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task failed", exc_info=task.exception())

    async def wait_for_writes(self) -> None:
        """Wait for every spawned step still running (at close)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def detach(self, group: GroupMetadata) -> None:
        """Take an Empty group out of the cache (deletion in progress)."""
        self.store.remove_group(group)
        self.timers.cancel_group(group.group_id)
        group.pending_members.clear()  # their ids die with the group

    def reattach(
        self, group: GroupMetadata, removed: Mapping[TopicPartition, OffsetCommitValue]
    ) -> None:
        """Undo ``detach`` after a failed write; if a new group took the id meanwhile,
        the old offsets (still in the log) go to it where it has none."""
        restore_offsets(self.store.add_group(group), removed)


def restore_offsets(
    group: GroupMetadata, removed: Mapping[TopicPartition, OffsetCommitValue]
) -> None:
    """Put back offsets whose tombstones could not be written."""
    for tp, value in removed.items():
        group.offsets.setdefault(tp, value)
