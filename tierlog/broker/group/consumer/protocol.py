"""``ConsumerGroupProtocol``: the consumer group protocol (KIP-848) as one component.

It sits beside the classic rebalance protocol under the group coordinator's facade, and is
built from its parts: the configuration, a ``GroupLookup`` over the coordinator's groups,
the topic metadata, a clock, and (for tests) the member id generator and per-group
overrides. It holds no group state of its own and does no I/O:

* ``heartbeat`` answers a ConsumerGroupHeartbeat with an ``Outcome`` (response, records,
  timer operations) computed from the group as it is, changing nothing.
* The caller appends ``outcome.records`` to the group's ``__consumer_offsets`` partition and,
  once they are written, replays them into its store (``ConsumerGroupStore.replay``); only
  then is the response sent and are the timers applied. If the append fails, nothing
  changed and the client gets the append's error (Kafka's coordinator runtime does the
  same: write, then apply, then answer).
* ``timer_fired`` is called when a timer an outcome armed fires, and returns an outcome the
  same way (the records fence the member; no response).
* ``describe`` and the offset checks only read.
* ``classic_join``, ``classic_sync``, ``classic_heartbeat`` and ``classic_leave`` serve the
  members of a consumer group that speak the classic protocol (``classic_members.py``);
  ``classic_join_to_empty`` and ``delete_group`` give the records that delete a group (a
  classic JoinGroup converting an empty consumer group, DeleteGroups, expiration).

Not thread-safe by itself: the coordinator calls it from its event loop, one request at a
time per group, as it does for the classic protocol.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tierlog.broker.group.consumer import classic_members, offset_rules, record_helpers
from tierlog.broker.group.consumer.assignors import Assignor, assignors_by_name
from tierlog.broker.group.consumer.classic_members import (
    ClassicJoinRequest,
    HeartbeatOutcome,
    JoinOutcome,
    LeaveOutcome,
    SyncOutcome,
)
from tierlog.broker.group.consumer.config import ConsumerGroupConfig
from tierlog.broker.group.consumer.describe import DescribedGroup, describe_group
from tierlog.broker.group.consumer.errors import GroupIdNotFoundError
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.heartbeat import (
    Context,
    Outcome,
    heartbeat,
    rebalance_expired,
    session_expired,
)
from tierlog.broker.group.consumer.migration import empty_group_conversion
from tierlog.broker.group.consumer.records import Record
from tierlog.broker.group.consumer.requests import HeartbeatRequest
from tierlog.broker.group.consumer.store import GroupLookup
from tierlog.broker.group.consumer.subscriptions import TopicFilter
from tierlog.broker.group.consumer.timers import ScheduleTimer, TimerKind
from tierlog.broker.group.consumer.topics import TopicsView
from tierlog.util.clock import Clock


def random_member_id() -> str:
    """A member id as Kafka makes one (``Uuid.randomUuid().toString()``: 16 random bytes in
    URL-safe base64 without padding); only version 0 clients need the coordinator's."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class ConsumerGroupProtocol:
    """The KIP-848 protocol's logic over the coordinator's groups (see the module docstring).

    Args:
        config: the ``group.consumer.*`` settings.
        groups: the consumer and classic groups of the coordinator's partitions.
        topics: the current topic metadata (called once per request).
        clock: wall time for regex resolution stamps and classic conversions.
        new_member_id: makes member ids for version 0 clients that send none.
        group_overrides: a group's dynamic configs (``consumer.session.timeout.ms``,
            ``consumer.heartbeat.interval.ms``), or None.
        topic_filter: which topic names a regex may resolve to (an authorizer's DESCRIBE
            check); None allows all.
    """

    def __init__(
        self,
        config: ConsumerGroupConfig,
        groups: GroupLookup,
        topics: Callable[[], TopicsView],
        clock: Clock,
        *,
        new_member_id: Callable[[], str] = random_member_id,
        group_overrides: Callable[[str], Mapping[str, Any] | None] = lambda _: None,
        topic_filter: TopicFilter = None,
    ) -> None:
        self.config = config
        self.assignors: dict[str, Assignor] = assignors_by_name(config.assignors)
        self._groups = groups
        self._topics = topics
        self._clock = clock
        self._new_member_id = new_member_id
        self._group_overrides = group_overrides
        self._topic_filter = topic_filter

    def topics_view(self) -> TopicsView:
        """The topic metadata as it is now."""
        return self._topics()

    def _context(self, group_id: str) -> Context:
        return Context(
            config=self.config,
            assignors=self.assignors,
            topics=self._topics(),
            now_ms=self._clock.milliseconds(),
            timeouts=self.config.timeouts(self._group_overrides(group_id)),
            new_member_id=self._new_member_id,
            topic_filter=self._topic_filter,
        )

    def heartbeat(self, request: HeartbeatRequest) -> Outcome:
        """Answer a ConsumerGroupHeartbeat (see ``heartbeat.py``).

        Raises:
            ConsumerGroupError: the error code and message to answer with.
        """
        gid = request.group_id
        return heartbeat(
            self._context(gid),
            self._groups.consumer_group(gid),
            self._groups.classic_group(gid),
            request,
        )

    def timer_fired(self, timer: ScheduleTimer) -> Outcome:
        """A timer armed by an earlier outcome fired: fence the member if still due."""
        key = timer.key
        group = self._groups.consumer_group(key.group_id)
        ctx = self._context(key.group_id)
        if key.kind is TimerKind.REBALANCE:
            assert timer.member_epoch is not None
            return rebalance_expired(ctx, group, key.member_id, timer.member_epoch)
        # Session, and a classic member's join or sync deadline: fenced if still there.
        return session_expired(ctx, group, key.member_id)

    def describe(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """ConsumerGroupDescribe's groups, in the order asked."""
        topics = self._topics()
        return [
            describe_group(
                gid,
                self._groups.consumer_group(gid),
                self._groups.classic_group(gid) is not None,
                self.config.assignors,
                topics,
            )
            for gid in group_ids
        ]

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        transactional: bool,
        api_version: int,
    ) -> None:
        """Raises the error an OffsetCommit to a consumer group gets, if any.

        Raises:
            GroupIdNotFoundError: no consumer group has this id.
            ConsumerGroupError: see ``offset_rules``.
        """
        offset_rules.validate_offset_commit(
            self._require(group_id),
            member_id,
            member_epoch,
            transactional=transactional,
            api_version=api_version,
        )

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> None:
        """Raises the error an OffsetFetch with a member epoch gets, if any."""
        offset_rules.validate_offset_fetch(self._require(group_id), member_id, member_epoch)

    # ------------------------------------------------------------ classic members

    def classic_join(self, request: ClassicJoinRequest) -> JoinOutcome:
        """JoinGroup from a classic member to the non-empty consumer group
        ``request.group_id`` (``classic_members.join``).

        Raises:
            ConsumerGroupError: the error code and message to answer with.
        """
        group = self._require(request.group_id)
        return classic_members.join(self._context(request.group_id), group, request)

    def classic_sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncOutcome:
        """SyncGroup from a classic member of a consumer group (``classic_members.sync``)."""
        return classic_members.sync(
            self._context(group_id),
            self._require(group_id),
            member_id,
            instance_id,
            generation_id,
            protocol_type,
            protocol_name,
        )

    def classic_heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> HeartbeatOutcome:
        """Heartbeat from a classic member of a consumer group."""
        return classic_members.heartbeat(
            self._require(group_id), member_id, instance_id, generation_id
        )

    def classic_leave(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> LeaveOutcome:
        """LeaveGroup for classic members of a consumer group."""
        return classic_members.leave(
            self._context(group_id), self._require(group_id), list(members)
        )

    def classic_join_to_empty(self, group_id: str) -> tuple[Record, ...]:
        """A classic JoinGroup for an empty consumer group: the records that delete it, so
        that the classic protocol starts a classic group (every migration policy)."""
        conversion = empty_group_conversion(self._require(group_id))
        return () if conversion is None else conversion.records

    # ------------------------------------------------------------ whole groups

    def delete_group(self, group_id: str) -> tuple[Record, ...]:
        """The records that delete an empty consumer group (DeleteGroups, or expiration
        of an empty group without offsets).

        Raises:
            GroupIdNotFoundError: no consumer group has this id.
            NonEmptyGroupError: it has members.
        """
        group = self._require(group_id)
        offset_rules.validate_delete(group)
        return tuple(record_helpers.group_tombstones(group))

    def _require(self, group_id: str) -> ConsumerGroup:
        group = self._groups.consumer_group(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        return group
