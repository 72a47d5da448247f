"""Rebalance machinery shared by the coordinator's APIs: timers, join/sync phases, removal.

This module owns ``GroupCoordinatorBase``: the coordinator's state (config, clock, the
``GroupMetadataManager`` cache, timers, write tasks) and the steps of Kafka's
``GroupCoordinator`` that several requests and timers share: preparing a rebalance,
completing the join phase (new generation, protocol, leader, JoinGroup answers),
propagating the assignment to SyncGroup waiters, expiring sessions and removing members.
The public API is ``tierlog.broker.group.coordinator.GroupCoordinator``. Runs on the
event loop; not thread-safe (state only changes between awaits, so no locks).

Timers stand in for Kafka's purgatories, one ``TimerTable`` name each:

- ``hb:<member>``: session timeout (or, for a member that has not received its first
  JoinGroup answer, ``new_member_join_timeout_ms``); a heartbeat re-arms it. A member
  awaiting a JoinGroup/SyncGroup answer is not expired (Kafka's hasSatisfiedHeartbeat);
  its timer restarts when it gets the answer. KIP-394 pending members expire on the same
  name after their session timeout.
- ``join``: the end of PreparingRebalance: the rebalance timeout (the largest of the
  members'), or for a group leaving Empty the KIP-134 initial delay, extended by another
  delay each time a new member joined, up to the rebalance timeout.
- ``sync``: members that do not send SyncGroup within the rebalance timeout after the
  join phase are removed and the group rebalances again (Kafka 3.x pending sync).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from tierlog.broker.group.config import GroupConfig
from tierlog.broker.group.group import GroupMetadata, GroupState, MemberMetadata
from tierlog.broker.group.manager import Append, GroupMetadataManager
from tierlog.broker.group.results import JoinGroupResult, SyncGroupResult
from tierlog.broker.group.timers import TimerTable
from tierlog.protocol.errors import ErrorCode
from tierlog.util.clock import Clock, SystemClock

log = logging.getLogger("tierlog.broker.group.coordinator")
E = ErrorCode
S = GroupState
UNKNOWN_MEMBER_ID = ""
T = TypeVar("T")


class GroupCoordinatorBase:
    """State and shared rebalance steps of the group coordinator (module docstring).

    Args:
        append: the broker's ``async append(partition, batch)`` to ``__consumer_offsets``
            (see ``tierlog.broker.group.manager``); answers that depend on a write are
            given only after it returns.
        config: settings (Kafka's defaults when None).
        clock: time for timestamps (commit times, state times); timers use the loop.
    """

    def __init__(
        self, append: Append, *, config: GroupConfig | None = None, clock: Clock | None = None
    ) -> None:
        self.config = config or GroupConfig()
        self.clock: Clock = clock or SystemClock()
        self._manager = GroupMetadataManager(append, self.config, self.clock)
        self._timers = TimerTable()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._active = True

    # ================================================================ helpers

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that holds ``group_id`` (FindCoordinator)."""
        return self._manager.partition_for(group_id)

    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._manager.partitions)

    def _validate(self, group_id: str, *, require_id: bool) -> int:
        """Kafka's validateGroupStatus. Join/Sync/Heartbeat/Leave need a non-empty group
        id; commit, fetch, describe and delete accept "" (old clients use it)."""
        if require_id and not group_id:
            return E.invalid_group_id
        if not self._active:
            return E.coordinator_not_available
        return self._manager.coordinator_error(group_id)

    def _is_current(self, group: GroupMetadata) -> bool:
        return self._manager.get_group(group.group_id) is group and not group.is_(S.DEAD)

    def _now(self) -> int:
        return self.clock.milliseconds()

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
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

    # ================================================================ rebalance

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        self._timers.cancel(group.group_id, "sync")
        group.pending_sync_members.clear()
        was_empty = group.is_(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, self._now())
        log.info(
            "group %s preparing to rebalance (generation %d): %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        if was_empty:
            # KIP-134: wait group.initial.rebalance.delay.ms for more members first.
            delay = self.config.initial_rebalance_delay_ms
            group.new_member_added = False
            group.initial_join_delay = (delay, max(group.rebalance_timeout_ms - delay, 0))
            self._timers.arm(
                group.group_id, "join", delay, lambda: self._on_initial_delay_expired(group)
            )
        else:
            group.initial_join_delay = None
            self._timers.arm(
                group.group_id,
                "join",
                group.rebalance_timeout_ms,
                lambda: self._on_join_deadline(group),
            )
            self._try_complete_join(group)

    def _on_initial_delay_expired(self, group: GroupMetadata) -> None:
        if not self._is_current(group) or group.initial_join_delay is None:
            return
        delay, remaining = group.initial_join_delay
        if group.new_member_added and remaining != 0:
            # Kafka's InitialDelayedJoin: another full delay (at most what remains of
            # the rebalance timeout) because someone joined during this one.
            group.new_member_added = False
            next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.initial_join_delay = (next_delay, max(remaining - delay, 0))
            self._timers.arm(
                group.group_id, "join", next_delay, lambda: self._on_initial_delay_expired(group)
            )
        else:
            self._complete_join(group)

    def _on_join_deadline(self, group: GroupMetadata) -> None:
        if self._is_current(group) and group.is_(S.PREPARING_REBALANCE):
            self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        # Only a regular join phase ends early; the initial delay always runs out.
        if (
            group.is_(S.PREPARING_REBALANCE)
            and group.initial_join_delay is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """End the join phase (Kafka's onCompleteJoin)."""
        self._timers.cancel(group.group_id, "join")
        group.initial_join_delay = None
        for member in group.not_yet_rejoined_members():
            if not member.is_static:  # static members keep their place (KIP-345)
                group.remove(member.member_id)
                self._timers.cancel(group.group_id, "hb:" + member.member_id)
        if group.is_(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait another round;
            # their session timeouts will remove them if they are gone.
            self._timers.arm(
                group.group_id,
                "join",
                group.rebalance_timeout_ms,
                lambda: self._on_join_deadline(group),
            )
            return
        group.init_next_generation(self._now())
        if group.is_(S.EMPTY):
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            self._spawn(self._store_empty_group(group))
            return
        log.info(
            "group %s stabilised at generation %d with %d members (protocol %s)",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        for member in group.members.values():
            group.maybe_invoke_join(member, self._join_result(group, member, with_members=True))
            member.is_new = False
            self._arm_heartbeat(group, member)
        generation = group.generation_id
        self._timers.arm(
            group.group_id,
            "sync",
            group.rebalance_timeout_ms,
            lambda: self._on_sync_deadline(group, generation),
        )

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self._manager.store_group(group, {})
        if error:
            log.warning("could not store empty group %s: error %d", group.group_id, error)

    def _on_sync_deadline(self, group: GroupMetadata, generation: int) -> None:
        if not self._is_current(group) or group.generation_id != generation:
            return
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            group.remove(member_id)
            self._timers.cancel(group.group_id, "hb:" + member_id)
        self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        ok = error == E.none
        for member in group.members.values():
            result = SyncGroupResult(
                error,
                member.assignment,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
            )
            if group.maybe_invoke_sync(member, result):
                # Its session may have run out while it waited: start a fresh one.
                self._arm_heartbeat(group, member)

    # ================================================================ members

    def _join_result(
        self, group: GroupMetadata, member: MemberMetadata, *, with_members: bool
    ) -> JoinGroupResult:
        leader = group.is_leader(member.member_id)
        return JoinGroupResult(
            E.none,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members=group.current_member_metadata() if with_members and leader else (),
        )

    def _arm_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        member_id = member.member_id
        self._timers.arm(
            group.group_id,
            "hb:" + member_id,
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._on_heartbeat_expired(group, member_id),
        )

    def _on_heartbeat_expired(self, group: GroupMetadata, member_id: str) -> None:
        if not self._is_current(group):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s expired", member_id, group.group_id)
            self._remove_pending_member(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # Members waiting for a JoinGroup/SyncGroup answer count as alive; their timer
        # restarts when they get it. A new member's timer is its join deadline.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        log.info("member %s of group %s has failed, removing it", member_id, group.group_id)
        self._remove_member_and_update_group(group, member)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        self._timers.cancel(group.group_id, "hb:" + member_id)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        # A member leaving mid-rebalance gets UNKNOWN_MEMBER_ID for what it waits on, so
        # a still-running client rejoins from scratch.
        group.maybe_invoke_join(member, JoinGroupResult(E.unknown_member_id, UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync(member, SyncGroupResult(E.unknown_member_id))
        group.remove(member.member_id)
        self._timers.cancel(group.group_id, "hb:" + member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)
