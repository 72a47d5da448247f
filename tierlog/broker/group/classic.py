"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

This module owns ``ClassicGroupProtocol``, the membership requests of Kafka's classic
``GroupCoordinator``: member ids, KIP-394 member id requirement, KIP-345 static
membership and fencing, generation checks, KIP-389 group size; and what a classic group's
members need when their partition of ``__consumer_offsets`` is loaded (sessions restart)
or unloaded (waiters answer NOT_COORDINATOR). The rebalance steps and timers it shares
with them are ``tierlog.broker.group.classic_rebalance``'s. KIP-848's consumer protocol
is a sibling of this one over the same ``GroupRuntime``, not a layer on it.

Everything takes plain values and returns ``tierlog.broker.group.results`` dataclasses
whose ``error`` is a Kafka error code; nothing here knows kio or sockets. Must be called
on the broker's event loop (timers use ``loop.call_later``). ``join_group`` and
``sync_group`` are coroutines that resolve when the rebalance lets them (Kafka's delayed
operations become futures); ``heartbeat`` and ``leave_group`` answer at once. When a group
moves to the consumer protocol or back, ``tierlog.broker.group.conversions`` hands the id
over.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tierlog.broker.group.classic_rebalance import ClassicRebalance
from tierlog.broker.group.group import GroupMetadata, GroupState, MemberMetadata
from tierlog.broker.group.results import (
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    MemberLeaveResult,
    SyncGroupResult,
)
from tierlog.broker.group.runtime import GroupRuntime
from tierlog.protocol.errors import ErrorCode

log = logging.getLogger("tierlog.broker.group.coordinator")
E = ErrorCode
S = GroupState
UNKNOWN_MEMBER_ID = ""


class ClassicGroupProtocol:
    """The classic protocol's requests (see the module docstring).

    Args:
        runtime: the coordinator's groups, store and timers.
        rebalance: the rebalance steps, over the same runtime.
    """

    def __init__(self, runtime: GroupRuntime, rebalance: ClassicRebalance) -> None:
        self._runtime = runtime
        self._rebalance = rebalance

    # ================================================================ partitions

    def on_groups_loaded(self, groups: Iterable[GroupMetadata]) -> None:
        """Groups came back from their partition's records with their members: each must
        heartbeat within its session timeout (Kafka's ``onGroupLoaded``)."""
        for group in groups:
            for member in group.members.values():
                self._rebalance.arm_heartbeat(group, member)

    def on_groups_unloaded(self, groups: Iterable[GroupMetadata]) -> None:
        """Groups left this coordinator: their timers stop and waiting JoinGroup and
        SyncGroup calls answer NOT_COORDINATOR."""
        for group in groups:
            self._runtime.timers.cancel_group(group.group_id)
            for member in group.members.values():
                group.maybe_invoke_join(
                    member, JoinGroupResult(E.not_coordinator, member.member_id)
                )
                group.maybe_invoke_sync(member, SyncGroupResult(E.not_coordinator))

    def join_error(self, group_id: str, session_timeout_ms: int) -> int:
        """What a JoinGroup gets before any group looks at it (Kafka checks these before
        it knows the group's type): the coordinator checks, then the session timeout's
        bounds (``group.min/max.session.timeout.ms``)."""
        error = self._runtime.validate(group_id, require_id=True)
        if error:
            return error
        config = self._runtime.config
        if not config.min_session_timeout_ms <= session_timeout_ms <= config.max_session_timeout_ms:
            return E.invalid_session_timeout
        return E.none

    def keep_alive(self, group: GroupMetadata, member_id: str) -> None:
        """A request from ``member_id`` that counts as a heartbeat (an OffsetCommit)."""
        if group.has(member_id):
            self._rebalance.arm_heartbeat(group, group.get(member_id))

    # ================================================================ JoinGroup

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
        """JoinGroup: resolves when the group's join phase completes (or at once on error).

        Args:
            member_id: "" for a member that has no id yet.
            client_host: as Kafka shows it, e.g. "/127.0.0.1".
            rebalance_timeout_ms: JoinGroup v0 has none: pass the session timeout.
            require_known_member_id: JoinGroup v4+ (KIP-394): a new dynamic member gets
                MEMBER_ID_REQUIRED with its id and must rejoin with it.
            supports_skip_assignment: JoinGroup v9+ (KIP-814), for static leaders.
            reason: JoinGroup v8+, logged.
        """
        error = self.join_error(group_id, session_timeout_ms)
        if error:
            return JoinGroupResult(error, member_id)
        protos = [(name, bytes(meta)) for name, meta in protocols]
        future: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        group = self._runtime.store.get_group(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return JoinGroupResult(E.unknown_member_id, member_id)
            group = self._runtime.store.add_group(GroupMetadata(group_id, self._runtime.now()))
        req = _JoinRequest(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protos,
            require_known_member_id,
            supports_skip_assignment,
            reason or "",
        )
        if not self._accept_joining_member(group, member_id):
            # KIP-389: the member is dropped (if it was in) and told the group is full.
            removed = group.remove(member_id)
            if removed is not None:
                self._rebalance.cancel_heartbeat(group, member_id)
            future.set_result(JoinGroupResult(E.group_max_size_reached, UNKNOWN_MEMBER_ID))
        elif member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, req, future)
        else:
            self._join_known_member(group, req, future)
        if group.is_(S.PREPARING_REBALANCE):
            self._rebalance.try_complete_join(group)
        return await future

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        # Kafka's acceptJoiningMember (KIP-389 group.max.size). While preparing, the
        # members already awaiting count, so the last ones to rejoin are the ones cut.
        max_size = self._runtime.config.max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            known = group.has(member_id) and group.get(member_id).is_awaiting_join
            return known or group.num_awaiting_join < max_size
        return group.has(member_id) or len(group.members) < max_size

    def _join_new_member(
        self, group: GroupMetadata, req: _JoinRequest, future: asyncio.Future[JoinGroupResult]
    ) -> None:
        if group.is_(S.DEAD):
            future.set_result(JoinGroupResult(E.coordinator_not_available, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            future.set_result(JoinGroupResult(E.inconsistent_group_protocol, UNKNOWN_MEMBER_ID))
            return
        # Kafka's generateMemberId: "<group.instance.id or client.id>-<uuid>".
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.current_static_member_id(req.group_instance_id)
            if old_id is not None:
                self._replace_static_member(group, old_id, new_id, req, future)
            else:
                self._add_member_and_rebalance(group, new_id, req, future)
        elif req.require_known_member_id:
            # KIP-394: remember the id and make the client come back with it, so a
            # client that keeps timing out does not pile up unknown members.
            group.add_pending_member(new_id)
            self._rebalance.arm_pending_member(group, new_id, req.session_timeout_ms)
            future.set_result(JoinGroupResult(E.member_id_required, new_id))
        else:
            self._add_member_and_rebalance(group, new_id, req, future)

    def _join_known_member(
        self, group: GroupMetadata, req: _JoinRequest, future: asyncio.Future[JoinGroupResult]
    ) -> None:
        member_id = req.member_id
        if group.is_(S.DEAD):
            future.set_result(JoinGroupResult(E.coordinator_not_available, member_id))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            future.set_result(JoinGroupResult(E.inconsistent_group_protocol, member_id))
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:  # pending ids are only given to dynamic members
                future.set_result(JoinGroupResult(E.unknown_member_id, member_id))
            else:
                self._add_member_and_rebalance(group, member_id, req, future)
            return
        iid = req.group_instance_id
        if group.is_static_member_fenced(member_id, iid):
            # KIP-345: another instance with this group.instance.id took over.
            future.set_result(JoinGroupResult(E.fenced_instance_id, member_id))
            return
        if not group.has(member_id) or (
            iid is not None and group.current_static_member_id(iid) is None
        ):
            future.set_result(JoinGroupResult(E.unknown_member_id, member_id))
            return
        member = group.get(member_id)
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, future)
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # A retry after a lost JoinGroup answer: repeat this generation's answer.
                future.set_result(self._rebalance.join_result(group, member, with_members=True))
            else:
                self._update_member_and_rebalance(group, member, req, future)
        elif group.is_(S.STABLE):
            # The leader rejoining forces a rebalance (it saw a metadata change that the
            # member metadata does not show); a follower with unchanged metadata just
            # gets this generation back.
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, future)
            else:
                future.set_result(self._rebalance.join_result(group, member, with_members=False))
        else:
            future.set_result(JoinGroupResult(E.unknown_member_id, member_id))

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        req: _JoinRequest,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        member = MemberMetadata(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
            is_new=True,
        )
        # KIP-134: a member joining during the first rebalance extends the initial delay.
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, future)
        # A new member cannot heartbeat until it has its id; bound its wait instead.
        self._rebalance.arm_heartbeat(
            group, member, self._runtime.config.new_member_join_timeout_ms
        )
        self._rebalance.maybe_prepare_rebalance(
            group, f"adding new member {member_id}; {req.reason}"
        )

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        req: _JoinRequest,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future
        )
        self._rebalance.maybe_prepare_rebalance(
            group, f"member {member.member_id} rejoins; {req.reason}"
        )

    def _replace_static_member(
        self,
        group: GroupMetadata,
        old_id: str,
        new_id: str,
        req: _JoinRequest,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        # KIP-345: a restarted static member (unknown member id, known instance id) takes
        # over its old member id; the old id is fenced from now on.
        assert req.group_instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._rebalance.cancel_heartbeat(group, old_id)
        self._rebalance.arm_heartbeat(group, member)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future
        )
        if group.is_(S.STABLE):
            if group.protocol_name == group.select_protocol():
                # No rebalance: persist the new member id, then answer.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self._runtime.spawn(
                    self._store_replaced_static_member(
                        group, member, old_id, old, current_leader, assignment, req, future
                    )
                )
            else:
                self._rebalance.maybe_prepare_rebalance(
                    group, f"static member {new_id} changed protocols"
                )
        elif group.is_(S.COMPLETING_REBALANCE):
            # The leader may already be assigning for the old id: start over.
            self._rebalance.prepare_rebalance(group, f"static member {new_id} replaced {old_id}")
        # PreparingRebalance: the member now simply awaits the join like the others.

    async def _store_replaced_static_member(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        old_id: str,
        old: tuple[list[tuple[str, bytes]], int, int],
        current_leader: str | None,
        assignment: dict[str, bytes],
        req: _JoinRequest,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        new_id = member.member_id
        error = await self._runtime.store.store_group(group, assignment)
        if error:
            # Revert to the old member id, as Kafka does, and report the failure.
            if group.members.get(new_id) is member and req.group_instance_id is not None:
                group.update_member(member, old[0], old[1], old[2], None)
                group.replace_static_member(req.group_instance_id, new_id, old_id)
                self._rebalance.cancel_heartbeat(group, new_id)
                self._rebalance.arm_heartbeat(group, member)
            if not future.done():
                future.set_result(
                    JoinGroupResult(
                        error,
                        UNKNOWN_MEMBER_ID,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        current_leader or "",
                    )
                )
            return
        if req.supports_skip_assignment:
            # KIP-814: tell a static leader it leads, but that it must not reassign.
            leader = group.is_leader(new_id)
            result = JoinGroupResult(
                E.none,
                new_id,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                group.leader_id or "",
                skip_assignment=leader,
                members=group.current_member_metadata() if leader else (),
            )
        else:
            # Older clients: answer with the old leader id, so that a returning leader
            # does not run an assignment the Stable group would ignore.
            result = JoinGroupResult(
                E.none,
                new_id,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                current_leader or "",
            )
        group.maybe_invoke_join(member, result)

    # ================================================================ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: Mapping[str, bytes],
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncGroupResult:
        """SyncGroup: resolves once the leader's assignment is stored (or at once).

        Args:
            assignments: the leader's member id -> assignment (ignored for followers);
                members it leaves out get an empty assignment.
            protocol_type, protocol_name: SyncGroup v5+, checked against the group's.
        """
        error = self._runtime.validate(group_id, require_id=True)
        if error == E.coordinator_load_in_progress:
            # The rebalance state is lost with the load; Kafka makes the member rejoin
            # with an error old clients understand.
            return SyncGroupResult(E.rebalance_in_progress)
        if error:
            return SyncGroupResult(error)
        group, error = self._member_of(group_id, member_id, group_instance_id, generation_id)
        if group is None:
            return SyncGroupResult(error)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncGroupResult(E.inconsistent_group_protocol)
        member = group.get(member_id)
        if group.is_(S.EMPTY):
            return SyncGroupResult(E.unknown_member_id)
        if group.is_(S.PREPARING_REBALANCE):
            return SyncGroupResult(E.rebalance_in_progress)
        if group.is_(S.STABLE):
            group.pending_sync_members.discard(member_id)
            self._rebalance.arm_heartbeat(group, member)
            return SyncGroupResult(
                E.none, member.assignment, group.protocol_type, group.protocol_name
            )
        # CompletingRebalance: wait for the leader's assignment to be stored.
        future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        group.maybe_invoke_sync(member, SyncGroupResult(E.rebalance_in_progress))  # a retry
        member.sync_future = future
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._runtime.timers.cancel(group_id, "sync")
        if group.is_leader(member_id):
            assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
            self._runtime.spawn(self._store_assignment(group, group.generation_id, assignment))
        return await future

    async def _store_assignment(
        self, group: GroupMetadata, generation: int, assignment: dict[str, bytes]
    ) -> None:
        error = await self._runtime.store.store_group(group, assignment)
        # Members may have joined or left while the write was in flight.
        if not (group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation):
            return
        if error:
            self._rebalance.fail_assignment(group, error)
            self._rebalance.maybe_prepare_rebalance(
                group, f"storing the assignment failed ({error})"
            )
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._rebalance.propagate_assignment(group, E.none)
        group.transition_to(S.STABLE, self._runtime.now())

    # ================================================================ Heartbeat

    def _member_of(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> tuple[GroupMetadata | None, int]:
        """The group, when ``member_id`` is a current member of this generation; otherwise
        None and the error SyncGroup and Heartbeat answer (Kafka's checks, in its order)."""
        group = self._runtime.store.get_group(group_id)
        if group is None:
            return None, E.unknown_member_id
        if group.is_(S.DEAD):
            return None, E.coordinator_not_available
        if group.is_static_member_fenced(member_id, group_instance_id):
            return None, E.fenced_instance_id
        if not group.has(member_id):
            return None, E.unknown_member_id
        if generation_id != group.generation_id:
            return None, E.illegal_generation
        return group, E.none

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> HeartbeatResult:
        """Heartbeat: keeps the session alive; REBALANCE_IN_PROGRESS tells the member to
        rejoin."""
        error = self._runtime.validate(group_id, require_id=True)
        if error == E.coordinator_load_in_progress:
            return HeartbeatResult(E.none)  # Kafka answers blindly while loading
        if error:
            return HeartbeatResult(error)
        group, error = self._member_of(group_id, member_id, group_instance_id, generation_id)
        if group is None:
            return HeartbeatResult(error)
        if group.is_(S.EMPTY):
            return HeartbeatResult(E.unknown_member_id)
        self._rebalance.arm_heartbeat(group, group.get(member_id))
        if group.is_(S.PREPARING_REBALANCE):
            return HeartbeatResult(E.rebalance_in_progress)
        return HeartbeatResult(E.none)

    # ================================================================ LeaveGroup

    def leave_group(
        self,
        group_id: str,
        members: Sequence[tuple[str, str | None]],
        reason: str | None = None,
    ) -> LeaveGroupResult:
        """LeaveGroup for ``(member_id, group_instance_id)`` pairs (v3+ batches; v0-v2
        send one with instance id None). A member id "" with an instance id removes
        that static member (admin removal, KIP-345)."""
        error = self._runtime.validate(group_id, require_id=True)
        if error:
            return LeaveGroupResult(error)
        group = self._runtime.store.get_group(group_id)
        if group is None:
            return LeaveGroupResult(
                E.none,
                tuple(MemberLeaveResult(mid, iid, E.unknown_member_id) for mid, iid in members),
            )
        if group.is_(S.DEAD):
            return LeaveGroupResult(E.coordinator_not_available)
        results = []
        for member_id, iid in members:
            results.append(
                MemberLeaveResult(member_id, iid, self._leave_one(group, member_id, iid))
            )
        if reason:
            log.info("members left group %s: %s", group_id, reason)
        return LeaveGroupResult(E.none, tuple(results))

    def _leave_one(self, group: GroupMetadata, member_id: str, iid: str | None) -> int:
        if member_id == UNKNOWN_MEMBER_ID:
            current = group.current_static_member_id(iid)
            if current is None:
                return E.unknown_member_id
            self._rebalance.remove_member(group, group.get(current))
            return E.none
        if group.is_pending_member(member_id):
            self._rebalance.remove_pending_member(group, member_id)
            return E.none
        if group.is_static_member_fenced(member_id, iid):
            return E.fenced_instance_id
        if not group.has(member_id):
            return E.unknown_member_id
        self._rebalance.remove_member(group, group.get(member_id))
        return E.none


@dataclass(frozen=True, slots=True)
class _JoinRequest:
    """The fields of one JoinGroup call, passed between the join steps."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    supports_skip_assignment: bool
    reason: str
