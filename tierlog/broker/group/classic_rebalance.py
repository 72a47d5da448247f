"""The classic group protocol's rebalance: timers, the join and sync phases, removals.

This module owns ``ClassicRebalance``, the steps of Kafka's classic ``GroupCoordinator``
that several requests and timers share: preparing a rebalance, completing the join phase
(new generation, protocol, leader, JoinGroup answers), propagating the assignment to
SyncGroup waiters, expiring sessions and removing members. The requests themselves
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup) are ``tierlog.broker.group.classic``'s; the
state it works on is the ``GroupRuntime``'s. Runs on the event loop; not thread-safe
(state only changes between awaits, so no locks).

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

import logging

from tierlog.broker.group.group import GroupMetadata, GroupState, MemberMetadata
from tierlog.broker.group.results import JoinGroupResult, SyncGroupResult
from tierlog.broker.group.runtime import GroupRuntime
from tierlog.protocol.errors import ErrorCode

log = logging.getLogger("tierlog.broker.group.coordinator")
E = ErrorCode
S = GroupState
UNKNOWN_MEMBER_ID = ""


class ClassicRebalance:
    """The classic protocol's shared rebalance steps and timers (module docstring).

    Args:
        runtime: the coordinator's groups, store and timers.
    """

    def __init__(self, runtime: GroupRuntime) -> None:
        self._runtime = runtime

    # ================================================================ rebalance

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Start a rebalance unless the group is in a state that cannot (Dead, or already
        preparing one)."""
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Move ``group`` to PreparingRebalance and arm the end of its join phase."""
        if group.is_(S.COMPLETING_REBALANCE):
            self.fail_assignment(group, E.rebalance_in_progress)
        self._runtime.timers.cancel(group.group_id, "sync")
        group.pending_sync_members.clear()
        was_empty = group.is_(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, self._runtime.now())
        log.info(
            "group %s preparing to rebalance (generation %d): %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        if was_empty:
            # KIP-134: wait group.initial.rebalance.delay.ms for more members first.
            delay = self._runtime.config.initial_rebalance_delay_ms
            group.new_member_added = False
            group.initial_join_delay = (delay, max(group.rebalance_timeout_ms - delay, 0))
            self._runtime.timers.arm(
                group.group_id, "join", delay, lambda: self._on_initial_delay_expired(group)
            )
        else:
            group.initial_join_delay = None
            self._runtime.timers.arm(
                group.group_id,
                "join",
                group.rebalance_timeout_ms,
                lambda: self._on_join_deadline(group),
            )
            self.try_complete_join(group)

    def _on_initial_delay_expired(self, group: GroupMetadata) -> None:
        if not self._runtime.is_current(group) or group.initial_join_delay is None:
            return
        delay, remaining = group.initial_join_delay
        if group.new_member_added and remaining != 0:
            # Kafka's InitialDelayedJoin: another full delay (at most what remains of
            # the rebalance timeout) because someone joined during this one.
            group.new_member_added = False
            next_delay = min(self._runtime.config.initial_rebalance_delay_ms, remaining)
            group.initial_join_delay = (next_delay, max(remaining - delay, 0))
            self._runtime.timers.arm(
                group.group_id, "join", next_delay, lambda: self._on_initial_delay_expired(group)
            )
        else:
            self._complete_join(group)

    def _on_join_deadline(self, group: GroupMetadata) -> None:
        if self._runtime.is_current(group) and group.is_(S.PREPARING_REBALANCE):
            self._complete_join(group)

    def try_complete_join(self, group: GroupMetadata) -> None:
        """End the join phase now if every member has rejoined."""
        # Only a regular join phase ends early; the initial delay always runs out.
        if (
            group.is_(S.PREPARING_REBALANCE)
            and group.initial_join_delay is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """End the join phase (Kafka's onCompleteJoin)."""
        self._runtime.timers.cancel(group.group_id, "join")
        group.initial_join_delay = None
        for member in group.not_yet_rejoined_members():
            if not member.is_static:  # static members keep their place (KIP-345)
                group.remove(member.member_id)
                self.cancel_heartbeat(group, member.member_id)
        if group.is_(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait another round;
            # their session timeouts will remove them if they are gone.
            self._runtime.timers.arm(
                group.group_id,
                "join",
                group.rebalance_timeout_ms,
                lambda: self._on_join_deadline(group),
            )
            return
        group.init_next_generation(self._runtime.now())
        if group.is_(S.EMPTY):
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            self._runtime.spawn(self._store_empty_group(group))
            return
        log.info(
            "group %s stabilised at generation %d with %d members (protocol %s)",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        for member in group.members.values():
            group.maybe_invoke_join(member, self.join_result(group, member, with_members=True))
            member.is_new = False
            self.arm_heartbeat(group, member)
        generation = group.generation_id
        self._runtime.timers.arm(
            group.group_id,
            "sync",
            group.rebalance_timeout_ms,
            lambda: self._on_sync_deadline(group, generation),
        )

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self._runtime.store.store_group(group, {})
        if error:
            log.warning("could not store empty group %s: error %d", group.group_id, error)

    def _on_sync_deadline(self, group: GroupMetadata, generation: int) -> None:
        if not self._runtime.is_current(group) or group.generation_id != generation:
            return
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            group.remove(member_id)
            self.cancel_heartbeat(group, member_id)
        self.prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def fail_assignment(self, group: GroupMetadata, error: int) -> None:
        """Clear every assignment and answer the SyncGroup waiters ``error``."""
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        """Answer every SyncGroup waiter with its assignment (or ``error``)."""
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
                self.arm_heartbeat(group, member)

    # ================================================================ members

    def join_result(
        self, group: GroupMetadata, member: MemberMetadata, *, with_members: bool
    ) -> JoinGroupResult:
        """This generation's JoinGroup answer for ``member`` (the members' metadata only
        for the leader, and only ``with_members``)."""
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

    def arm_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        """(Re)start ``member``'s session: it is removed if nothing re-arms this within
        its session timeout (or ``timeout_ms``)."""
        member_id = member.member_id
        self._runtime.timers.arm(
            group.group_id,
            "hb:" + member_id,
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._on_heartbeat_expired(group, member_id),
        )

    def arm_pending_member(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        """Bound how long a KIP-394 pending member id stays reserved."""
        self._runtime.timers.arm(
            group.group_id,
            "hb:" + member_id,
            timeout_ms,
            lambda: self._on_heartbeat_expired(group, member_id),
        )

    def cancel_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        """Stop ``member_id``'s session timer (it left or was replaced)."""
        self._runtime.timers.cancel(group.group_id, "hb:" + member_id)

    def _on_heartbeat_expired(self, group: GroupMetadata, member_id: str) -> None:
        if not self._runtime.is_current(group):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s expired", member_id, group.group_id)
            self.remove_pending_member(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # Members waiting for a JoinGroup/SyncGroup answer count as alive; their timer
        # restarts when they get it. A new member's timer is its join deadline.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        log.info("member %s of group %s has failed, removing it", member_id, group.group_id)
        self.remove_member(group, member)

    def remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        """Forget a pending member id (it left, or its reservation expired)."""
        group.remove(member_id)
        self.cancel_heartbeat(group, member_id)
        if group.is_(S.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Remove ``member`` (it left, or its session expired) and rebalance the rest."""
        # A member leaving mid-rebalance gets UNKNOWN_MEMBER_ID for what it waits on, so
        # a still-running client rejoins from scratch.
        group.maybe_invoke_join(member, JoinGroupResult(E.unknown_member_id, UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync(member, SyncGroupResult(E.unknown_member_id))
        group.remove(member.member_id)
        self.cancel_heartbeat(group, member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_(S.PREPARING_REBALANCE):
            self.try_complete_join(group)
