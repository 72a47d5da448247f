"""The classic requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) addressed to a
consumer group: KIP-848's online migration, on the coordinator's side.

This module owns ``ClassicMembersOfConsumerGroups``. Each method answers for a group id
that is a consumer group, and returns None when it is not (then the classic protocol
answers), deciding under the group's lock so that a group converting between the
protocols is never served by both:

- JoinGroup to an empty consumer group deletes it (every migration policy) and returns
  None: the classic protocol then starts a classic group of that id;
- to a non-empty one, the classic member joins the consumer group
  (``consumer.classic_members``), its records written before the answer;
- SyncGroup, Heartbeat and LeaveGroup from its classic members likewise.

Answers are the classic protocol's result types, so the request handlers cannot tell
which kind of group served them. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierlog.broker.group.consumer.classic_members import ClassicJoinRequest
from tierlog.broker.group.consumer.errors import ConsumerGroupError
from tierlog.broker.group.consumer.member import ClassicProtocol
from tierlog.broker.group.consumer_groups import CONSUMER, ConsumerGroups
from tierlog.broker.group.manager import GroupMetadataManager
from tierlog.broker.group.results import (
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    MemberLeaveResult,
    SyncGroupResult,
)
from tierlog.protocol.errors import ErrorCode

E = ErrorCode


class ClassicMembersOfConsumerGroups:
    """Classic requests to consumer groups (see the module docstring).

    Args:
        groups: the consumer protocol's component (its protocol and write engine).
        store: the coordinator's store (the group locks).
    """

    def __init__(self, groups: ConsumerGroups, store: GroupMetadataManager) -> None:
        self._groups = groups
        self._store = store

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
    ) -> JoinGroupResult | None:
        """JoinGroup (validated by the caller: coordinator, session timeout bounds)."""
        if self._groups.group(group_id) is None:
            return None
        async with self._store.group_lock(group_id):
            group = self._groups.group(group_id)
            if group is None:
                return None
            error = self._groups.coordinator_error(group_id)
            if error:
                return JoinGroupResult(error, member_id)
            if group.is_empty:
                records = self._groups.protocol.classic_join_to_empty(group_id)
                error = await self._groups.execute(group_id, records)
                return JoinGroupResult(error, member_id) if error else None
            request = ClassicJoinRequest(
                group_id=group_id,
                member_id=member_id,
                protocol_type=protocol_type,
                protocols=tuple(ClassicProtocol(n, bytes(m)) for n, m in protocols),
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                requires_known_member_id=require_known_member_id,
            )
            try:
                outcome = self._groups.protocol.classic_join(request)
            except ConsumerGroupError as exc:
                return JoinGroupResult(exc.code, member_id)
            if outcome.error:
                return JoinGroupResult(outcome.error, outcome.member_id)
            error = await self._groups.execute(group_id, outcome.records, outcome.timers)
        if error:
            return JoinGroupResult(error, member_id)
        # No leader: the coordinator assigns, so no member runs a client-side assignor.
        return JoinGroupResult(
            E.none, outcome.member_id, outcome.generation_id, CONSUMER, outcome.protocol_name
        )

    async def sync_group(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncGroupResult | None:
        """SyncGroup: the member's current assignment (a leader's assignments are ignored:
        the coordinator's assignor decides)."""
        if self._groups.group(group_id) is None:
            return None
        async with self._store.group_lock(group_id):
            if self._groups.group(group_id) is None:
                return None
            try:
                outcome = self._groups.protocol.classic_sync(
                    group_id,
                    member_id,
                    group_instance_id,
                    generation_id,
                    protocol_type,
                    protocol_name,
                )
            except ConsumerGroupError as exc:
                return SyncGroupResult(exc.code)
            self._groups.apply_timers(outcome.timers)
        if outcome.error:
            return SyncGroupResult(outcome.error)
        return SyncGroupResult(E.none, outcome.assignment, CONSUMER, outcome.protocol_name)

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> HeartbeatResult | None:
        """Heartbeat: REBALANCE_IN_PROGRESS tells the member to send JoinGroup. It writes
        nothing, so it answers at once from the group as it is (a write in flight for the
        group is seen at the next heartbeat), like a classic group's Heartbeat."""
        if self._groups.group(group_id) is None:
            return None
        try:
            outcome = self._groups.protocol.classic_heartbeat(
                group_id, member_id, group_instance_id, generation_id
            )
        except ConsumerGroupError as exc:
            return HeartbeatResult(exc.code)
        self._groups.apply_timers(outcome.timers)
        return HeartbeatResult(outcome.error)

    async def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> LeaveGroupResult | None:
        """LeaveGroup for ``(member id, instance id)`` pairs of classic members."""
        if self._groups.group(group_id) is None:
            return None
        async with self._store.group_lock(group_id):
            if self._groups.group(group_id) is None:
                return None
            outcome = self._groups.protocol.classic_leave(group_id, members)
            error = await self._groups.execute(group_id, outcome.records, outcome.timers)
        if error:
            return LeaveGroupResult(error)
        return LeaveGroupResult(
            E.none, tuple(MemberLeaveResult(m, i, code) for m, i, code in outcome.members)
        )
