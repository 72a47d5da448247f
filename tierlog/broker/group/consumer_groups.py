"""KIP-848's consumer group protocol, as a component of the group coordinator.

This module owns ``ConsumerGroups``: the consumer protocol's side of the coordinator,
beside ``ClassicGroupProtocol`` over the same ``GroupRuntime``. The decisions are the pure
``ConsumerGroupProtocol``'s (``tierlog.broker.group.consumer``); this component does what
Kafka's coordinator runtime does around them:

1. take the group's lock (``GroupMetadataManager.group_lock``), so that one decision at a
   time is made from the group as the log has it;
2. ask the protocol, which answers with records, timer operations and a response, or an
   error (``ConsumerGroupError``, with its Kafka code and message);
3. append the records to the group's ``__consumer_offsets`` partition as one batch and,
   once durable, replay them into the store (a coordinator loading the partition later
   replays the same records: failover restores exactly this state);
4. arm and cancel the timers on the runtime's ``consumer_timers`` and answer.

If the append fails nothing changed, and the request gets the append's error as Kafka maps
it (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...). If the partition was unloaded while
the append was in flight, nothing is applied: the next coordinator reads the records.

A timer that fires (a member's session, rebalance, join or sync deadline) takes the lock
and asks the protocol whether to fence the member, unless a heartbeat armed it again
meanwhile (Kafka compares the timer task). A failed write re-arms it half a second later,
as Kafka's timers retry.

Conversions between the protocols (``consumer.migration``) touch the classic side through
``ClassicConversions``: when an upgrade's records are applied the classic group hands its
id over (waiters answered REBALANCE_IN_PROGRESS, timers stopped, membership cleared; the
object keeps the id's offsets), and a downgrade's GroupMetadata record restores a classic
group that starts a rebalance. The classic requests of a consumer group's classic members
are ``tierlog.broker.group.consumer_classic``'s, on this component's ``execute``.

Everything here runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tierlog.broker.group.consumer.classic_members import encode_member_assignment
from tierlog.broker.group.consumer.describe import DescribedGroup as ConsumerDescribedGroup
from tierlog.broker.group.consumer.embedded import ConsumerSubscription, encode_subscription
from tierlog.broker.group.consumer.errors import ConsumerGroupError, ReplayError
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.member import MemberState
from tierlog.broker.group.consumer.protocol import ConsumerGroupProtocol
from tierlog.broker.group.consumer.records import Record as GroupRecord
from tierlog.broker.group.consumer.requests import HeartbeatRequest, HeartbeatResponse, validate
from tierlog.broker.group.consumer.timers import (
    ScheduleTimer,
    TimerKey,
    TimerOp,
    rebalance_timer,
    session_timer,
)
from tierlog.broker.group.group import GroupState
from tierlog.broker.group.manager import group_store_error
from tierlog.broker.group.offsets_codec import GroupMetadataKey, GroupMetadataValue
from tierlog.broker.group.results import (
    DescribedGroup,
    DescribedMember,
    ListedGroup,
    TopicPartition,
)
from tierlog.broker.group.runtime import GroupRuntime
from tierlog.protocol.errors import ErrorCode

log = logging.getLogger("tierlog.broker.group.coordinator")
E = ErrorCode
CONSUMER = "consumer"
# Kafka's coordinator timers retry a failed operation after this long.
TIMER_RETRY_MS = 500


class ClassicConversions(Protocol):
    """What a conversion needs from the classic protocol (``ClassicGroupProtocol``)."""

    def converted_to_consumer(self, group_id: str) -> None: ...

    def converted_to_classic(self, group_id: str, value: GroupMetadataValue) -> None: ...


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    """A ConsumerGroupHeartbeat answer: ``response`` when ``error`` is 0."""

    error: int
    message: str | None = None
    response: HeartbeatResponse | None = None


class ConsumerGroups:
    """The consumer protocol's component of the group coordinator (module docstring).

    Args:
        runtime: the coordinator's groups, store and timers.
        protocol: the pure protocol, reading the runtime's store as its ``GroupLookup``.
        classic: the classic protocol's side of conversions.
        enabled: ``group.coordinator.rebalance.protocols`` lists ``consumer``; when not,
            ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION as Kafka does.
    """

    def __init__(
        self,
        runtime: GroupRuntime,
        protocol: ConsumerGroupProtocol,
        classic: ClassicConversions,
        *,
        enabled: bool = True,
    ) -> None:
        self._runtime = runtime
        self._store = runtime.store
        self.protocol = protocol
        self._classic = classic
        self.enabled = enabled

    # ================================================================ the engine

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._store.consumer_group(group_id)

    def coordinator_error(self, group_id: str) -> int:
        if not self._runtime.active:
            return E.coordinator_not_available
        return self._store.coordinator_error(group_id)

    async def execute(
        self,
        group_id: str,
        records: Sequence[GroupRecord],
        timers: Sequence[TimerOp] = (),
        *,
        offset_tombstones: Iterable[TopicPartition] = (),
    ) -> int:
        """Write ``records`` (after ``offset_tombstones``), replay them, apply ``timers``;
        returns 0 or the error to answer. The caller holds the group's lock and decided
        from the group as it is now."""
        partition = self._runtime.partition_for(group_id)
        epoch = self._store.load_epoch(partition)
        error = await self._store.write_group_records(
            group_id, records, offset_tombstones=offset_tombstones
        )
        if error:
            return group_store_error(error)
        if self._store.load_epoch(partition) != epoch or not self._runtime.active:
            return E.not_coordinator  # unloaded meanwhile: the next coordinator replays them
        self._apply(group_id, records)
        self.apply_timers(timers)
        return E.none

    def _apply(self, group_id: str, records: Sequence[GroupRecord]) -> None:
        classic: list[GroupRecord] = []
        for record in records:
            if isinstance(record.key, GroupMetadataKey):
                classic.append(record)
                continue
            try:
                self._store.consumer.replay(record)
            except ReplayError:  # a decision contradicting the state: a bug, not the client's
                log.exception("group %s: a record written could not be applied", group_id)
        for record in classic:
            if record.value is None:
                self._classic.converted_to_consumer(group_id)
                log.info("group %s now uses the consumer protocol", group_id)
            else:
                assert isinstance(record.value, GroupMetadataValue)
                self._classic.converted_to_classic(group_id, record.value)
                log.info("group %s converted back to the classic protocol", group_id)

    def apply_timers(self, ops: Iterable[TimerOp]) -> None:
        timers = self._runtime.consumer_timers
        for op in ops:
            key = op.key
            if not isinstance(op, ScheduleTimer):
                timers.cancel(key.group_id, key.name)
            elif not (op.if_absent and timers.is_armed(key.group_id, key.name)):
                timers.arm(key.group_id, key.name, op.delay_ms, self._firing(op))

    def has_timer(self, key: TimerKey) -> bool:
        """Whether ``key`` is armed now."""
        return self._runtime.consumer_timers.is_armed(key.group_id, key.name)

    def _firing(self, timer: ScheduleTimer) -> Callable[[], None]:
        # The callback runs on the loop; the fencing (a write) is a task of its own.
        return lambda: self._spawn_fire(timer)

    def _spawn_fire(self, timer: ScheduleTimer) -> None:
        self._runtime.spawn(self.fire(timer))

    async def fire(self, timer: ScheduleTimer) -> None:
        """A timer went off: fence the member if the protocol still says so."""
        key = timer.key
        async with self._store.group_lock(key.group_id):
            if self.coordinator_error(key.group_id):
                return
            if self._runtime.consumer_timers.is_armed(key.group_id, key.name):
                return  # re-armed since it went off (a heartbeat came first)
            try:
                outcome = self.protocol.timer_fired(timer)
            except ConsumerGroupError:
                log.exception("group %s: timer %s failed", key.group_id, key.name)
                return
            if not outcome.records and not outcome.timers:
                return
            log.info(
                "member %s of group %s fenced: its %s expired",
                key.member_id,
                key.group_id,
                key.kind.value,
            )
            error = await self.execute(key.group_id, outcome.records, outcome.timers)
        if error and error != E.not_coordinator:
            log.warning(
                "group %s: fencing member %s failed (error %d), retrying in %d ms",
                key.group_id,
                key.member_id,
                error,
                TIMER_RETRY_MS,
            )
            self._runtime.consumer_timers.arm(
                key.group_id, key.name, TIMER_RETRY_MS, self._firing(timer)
            )

    # ================================================================ partitions

    def on_groups_loaded(self, groups: Iterable[ConsumerGroup]) -> None:
        """Groups came back from their partition's records: every member must heartbeat
        within its session timeout, and one still revoking within its rebalance timeout
        (Kafka's onLoaded)."""
        session = self.protocol.config.session_timeout_ms
        ops: list[TimerOp] = []
        for group in groups:
            gid = group.group_id
            for member in group.members.values():
                classic = member.classic_metadata
                timeout = classic.session_timeout_ms if classic is not None else session
                ops.append(session_timer(gid, member.member_id, timeout))
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    ops.append(
                        rebalance_timer(
                            gid, member.member_id, member.member_epoch, member.rebalance_timeout_ms
                        )
                    )
            log.info("loaded consumer group %s with %d members", gid, len(group.members))
        self.apply_timers(ops)

    def on_groups_unloaded(self, groups: Iterable[ConsumerGroup]) -> None:
        for group in groups:
            self._runtime.consumer_timers.cancel_group(group.group_id)

    # ================================================================ requests

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatAnswer:
        """ConsumerGroupHeartbeat (API 68): answered once its records are durable."""
        if not self.enabled:
            return HeartbeatAnswer(
                E.unsupported_version,
                "The consumer group protocol is disabled (group.coordinator.rebalance.protocols).",
            )
        gid = request.group_id
        if not self._runtime.active:
            return HeartbeatAnswer(E.coordinator_not_available)
        try:
            validate(request, self.protocol.assignors)
        except ConsumerGroupError as exc:
            return HeartbeatAnswer(exc.code, str(exc))
        error = self.coordinator_error(gid)
        if error:
            return HeartbeatAnswer(error)
        async with self._store.group_lock(gid):
            error = self.coordinator_error(gid)  # unloaded while it waited
            if error:
                return HeartbeatAnswer(error)
            try:
                outcome = self.protocol.heartbeat(request)
            except ConsumerGroupError as exc:
                return HeartbeatAnswer(exc.code, str(exc))
            error = await self.execute(gid, outcome.records, outcome.timers)
        if error:
            return HeartbeatAnswer(error)
        return HeartbeatAnswer(E.none, None, outcome.response)

    def describe(self, group_ids: Iterable[str]) -> list[ConsumerDescribedGroup]:
        """ConsumerGroupDescribe (API 69), one entry per id in order."""
        out = []
        for gid in group_ids:
            error = E.invalid_group_id if not gid else self.coordinator_error(gid)
            if error:
                out.append(ConsumerDescribedGroup(gid, E(error)))
            else:
                out.extend(self.protocol.describe([gid]))
        return out

    # ================================================================ offsets

    def commit_error(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        transactional: bool,
        api_version: int,
    ) -> int | None:
        """The error an offset commit to a consumer group gets (0 to go ahead), or None
        when ``group_id`` is not a consumer group (the classic rules apply)."""
        if self.group(group_id) is None:
            return None
        try:
            self.protocol.validate_offset_commit(
                group_id,
                member_id,
                member_epoch,
                transactional=transactional,
                api_version=api_version,
            )
        except ConsumerGroupError as exc:
            return int(exc.code)
        return E.none

    def fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """The error an OffsetFetch (v9+) with a member id or epoch gets: 0 for a classic
        group or an unknown one (which has no offsets), as Kafka answers."""
        if self.group(group_id) is None:
            return E.none
        try:
            self.protocol.validate_offset_fetch(group_id, member_id, member_epoch)
        except ConsumerGroupError as exc:
            return int(exc.code)
        return E.none

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """The topics a consumer group's members subscribe to (their offsets neither expire
        nor are deleted by OffsetDelete), or None if ``group_id`` is not a consumer group."""
        group = self.group(group_id)
        return None if group is None else group.subscribed_topic_names()

    # ================================================================ administration

    def listed(self) -> list[ListedGroup]:
        """ListGroups' entries of the consumer groups coordinated here."""
        return [
            ListedGroup(g.group_id, CONSUMER, g.state.value, CONSUMER)
            for g in self._store.consumer.groups()
            if not self._store.coordinator_error(g.group_id)
        ]

    def describe_classic(self, group_id: str) -> DescribedGroup | None:
        """DescribeGroups' entry for a consumer group (None if ``group_id`` is not one):
        protocol type ``consumer``, the assignor as the protocol, and each member with its
        subscription and assignment in the embedded consumer protocol, as a classic
        group's members are shown."""
        group = self.group(group_id)
        if group is None:
            return None
        topics = self.protocol.topics_view()
        members = []
        for member in sorted(group.members.values(), key=lambda m: m.member_id):
            subscription = ConsumerSubscription(
                topics=tuple(sorted(group.member_topic_names(member))), rack_id=member.rack_id
            )
            members.append(
                DescribedMember(
                    member.member_id,
                    member.instance_id,
                    member.client_id,
                    member.client_host,
                    encode_subscription(subscription),
                    encode_member_assignment(member, topics),
                )
            )
        return DescribedGroup(
            E.none,
            group_id,
            group.state.value,
            CONSUMER,
            group.preferred_assignor(self.protocol.config.assignors),
            tuple(members),
        )

    async def delete(self, group_id: str) -> int | None:
        """DeleteGroups for a consumer group: only an empty one, with no offsets pending in
        an open transaction; its offsets and records get tombstones in one batch. None when
        ``group_id`` is not a consumer group."""
        async with self._store.group_lock(group_id):
            if self.group(group_id) is None:
                return None
            holder = self._store.get_group(group_id)
            if holder is not None and holder.pending_txn_offsets:
                return E.non_empty_group
            try:
                records = self.protocol.delete_group(group_id)
            except ConsumerGroupError as exc:
                return int(exc.code)
            offsets = list(holder.offsets) if holder is not None else []
            error = await self.execute(group_id, records, offset_tombstones=offsets)
            if error:
                return error
            if holder is not None and self._runtime.is_current(holder):
                for tp in offsets:
                    holder.offsets.pop(tp, None)
                if not holder.has_offsets():
                    self._runtime.detach(holder)
                    holder.transition_to(GroupState.DEAD, self._runtime.now())
        log.info("consumer group %s deleted", group_id)
        return E.none

    async def delete_abandoned(self) -> int:
        """Delete the empty consumer groups that hold no offsets (Kafka deletes them when
        their offsets expire, at the offsets retention check); returns how many went."""
        deleted = 0
        for group in self._store.consumer.groups():
            gid = group.group_id
            holder = self._store.get_group(gid)
            if not group.is_empty or (holder is not None and holder.has_offsets()):
                continue
            if self.coordinator_error(gid):
                continue
            if await self.delete(gid) == E.none:
                deleted += 1
        return deleted
