"""One classic consumer group: its state machine, members, generation and committed offsets.

This module owns the bookkeeping of a single group, mirroring Kafka's ``GroupMetadata``
/ ``ClassicGroup`` and ``MemberMetadata``: who the members are and what protocols they
support, the leader, the generation, static members (KIP-345), members that still have
to rejoin with their assigned id (KIP-394), the pending JoinGroup/SyncGroup answers
(asyncio futures, resolved by ``GroupCoordinator``), the group's committed offsets, and
the offsets transactional producers committed that wait for their transaction's marker
(KIP-98 TxnOffsetCommit, held per producer id until COMMIT applies or ABORT drops them).
It never waits, schedules timers or writes anything: the coordinator's components
(``tierlog.broker.group.classic`` and its rebalance) drive it, their ``GroupRuntime`` owns
the timers, ``tierlog.broker.group.manager`` persists it. Not
thread-safe: everything runs on the broker's event loop.

States (``GroupState``; the allowed transitions are the ``_VALID_PREVIOUS`` table)::

      +-------+  a member joins (the join phase first waits the KIP-134 initial delay)
      | Empty | ----------------------------------------------+
      +-------+                                               v
          ^        join phase ends with no member left   +--------------------+
          +--------------------------------------------- | PreparingRebalance |
                                                         +--------------------+
                              all members rejoined, or      |      ^       ^
                              the rebalance timeout ends    v      |       |
                                             +---------------------+ |       |
                                             | CompletingRebalance |-+       |
                                             +---------------------+  (1)    |
                              the leader's SyncGroup    |                    |
                              assignment is stored      v                    |
                                                   +--------+                |
                                                   | Stable |----------------+
                                                   +--------+       (1)

      (1) a member joins, rejoins with new metadata (or is the leader), leaves, misses
          its session timeout or its SyncGroup deadline, a static member is replaced
          mid-assignment, or the assignment cannot be stored.

      Any state -> Dead: the group is deleted, or expired with its last offsets, or its
      ``__consumer_offsets`` partition is unloaded. A Dead group is never reused.

A group loaded from ``__consumer_offsets`` starts Empty (no members in its last record)
or Stable (members restored with their assignments, as Kafka's ``loadGroup`` does).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from tierlog.broker.group.offsets_codec import OffsetCommitValue, subscription_topics
from tierlog.broker.group.results import (
    DescribedGroup,
    DescribedMember,
    JoinGroupMember,
    JoinGroupResult,
    SyncGroupResult,
    TopicPartition,
)
from tierlog.broker.group.txn_offsets import PendingTxnOffsets
from tierlog.protocol.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"
Protocols = Sequence[tuple[str, bytes]]


class GroupState(Enum):
    """Group states; the values are the names Kafka prints (DescribeGroups, ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
# Kafka's GroupState.validPreviousStates. Stable is also entered directly when a group
# with members is loaded (not a transition: the group is created in that state).
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(GroupState),
}


class InvalidTransitionError(RuntimeError):
    """A state change the state machine does not allow (a coordinator bug)."""


@dataclass(eq=False, slots=True)
class MemberMetadata:
    """One member: identity, timeouts, supported protocols and its pending answers.

    ``is_new`` marks a member that joined but has not yet received its first JoinGroup
    answer; until then only ``new_member_join_timeout_ms`` can expire it, since it cannot
    heartbeat (Kafka's ``MemberMetadata.isNew``).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    is_new: bool = False
    join_future: asyncio.Future[JoinGroupResult] | None = None
    sync_future: asyncio.Future[SyncGroupResult] | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for ``protocol``.

        Raises:
            KeyError: the member does not support it.
        """
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, in the same order, with the same metadata (Kafka's ``matches``)."""
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1])
            for a, b in zip(protocols, self.protocols, strict=True)
        )

    def vote(self, candidates: Iterable[str]) -> str:
        """The first of this member's protocols (in its preference order) among ``candidates``."""
        allowed = set(candidates)
        for name, _ in self.protocols:
            if name in allowed:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(allowed)}")


def _set_future(
    future: asyncio.Future[JoinGroupResult] | asyncio.Future[SyncGroupResult], result: object
) -> None:
    # A future is cancelled when the request's task is (client gone): nobody to answer.
    if not future.done():
        future.set_result(result)  # type: ignore[arg-type]


class GroupMetadata:
    """The state of one classic group (see the module docstring for the state machine).

    Attributes are public for the coordinator and manager of this package; other code
    should use the coordinator's API.
    """

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.generation_id = 0
        # None for a group used only to store offsets (a "simple" consumer, assign()).
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # KIP-394: given an id, must rejoin with it
        self.pending_sync_members: set[str] = set()  # joined this generation, not yet synced
        self.supported_protocols: Counter[str] = Counter()
        # KIP-134: set when a member joins during the initial delay of generation 0, which
        # extends the delay (Kafka's newMemberAdded); the delay window (delay, remaining)
        # while it runs.
        self.new_member_added = False
        self.initial_join_delay: tuple[int, int] | None = None
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, OffsetCommitValue] = {}
        self.pending_offset_commits: Counter[TopicPartition] = Counter()
        # Log order of the commit each offset came from (``CommitRecord.order``).
        self.offset_commit_seq: dict[TopicPartition, int] = {}
        # KIP-98: producer id -> offsets of its open transaction, not visible until the
        # COMMIT marker (Kafka's pendingTransactionalOffsetCommits).
        self.pending_txn_offsets = PendingTxnOffsets()

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, "
            f"generation={self.generation_id}, members={list(self.members)})"
        )

    # ---------------------------------------------------------------- state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        """Move to ``state``, stamping the time (persisted as current_state_timestamp).

        Raises:
            InvalidTransitionError: not allowed from the current state.
        """
        if self.state not in _VALID_PREVIOUS[state]:
            raise InvalidTransitionError(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not allowed"
            )
        self.state = state
        self.current_state_timestamp = now_ms

    def enter_loaded_state(self) -> None:
        """Stable if the group has members, else Empty, outside the transition table: the
        group was rebuilt from its record (loaded, or a consumer group downgraded to it,
        KIP-848), not moved there by the protocol."""
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY

    def clear_membership(self, now_ms: int) -> None:
        """The group id moved to the consumer protocol (KIP-848's upgrade, or an empty group
        converted): this object stays only to hold the id's committed offsets, as an Empty
        group with no protocol and generation 0 (its GroupMetadata record is tombstoned).
        Waiting JoinGroup/SyncGroup answers must have been given before."""
        self.members.clear()
        self.static_members.clear()
        self.pending_members.clear()
        self.pending_sync_members.clear()
        self.supported_protocols.clear()
        self.generation_id = 0
        self.protocol_type = None
        self.protocol_name = None
        self.leader_id = None
        self.subscribed_topics = None
        self.new_member_added = False
        self.initial_join_delay = None
        self.state = GroupState.EMPTY
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ---------------------------------------------------------------- members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        """The largest rebalance timeout of the members: how long a rebalance may take."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(
        self, member: MemberMetadata, future: asyncio.Future[JoinGroupResult] | None = None
    ) -> None:
        """Add a member (the first one fixes the protocol type and becomes leader)."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_future = future
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        """Remove a member or pending member; a new leader is the next remaining member."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            self.supported_protocols += Counter()  # drop zero counts
            iid = member.group_instance_id
            if iid is not None and self.static_members.get(iid) == member_id:
                del self.static_members[iid]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        future: asyncio.Future[JoinGroupResult] | None,
    ) -> None:
        """Replace a member's protocols and timeouts and set its pending JoinGroup answer.

        A JoinGroup still pending for the same member (a client retry after a request
        timeout) is answered REBALANCE_IN_PROGRESS so that its request does not hang;
        ``future`` None just forgets the pending answer (the caller gives it).
        """
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names())
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        old = member.join_future
        if future is not None and old is not None and old is not future:
            _set_future(old, JoinGroupResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.join_future = future

    def maybe_invoke_join(self, member: MemberMetadata, result: JoinGroupResult) -> bool:
        """Answer the member's pending JoinGroup, if any; True if there was one."""
        future = member.join_future
        if future is None:
            return False
        member.join_future = None
        _set_future(future, result)
        return True

    def maybe_invoke_sync(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        """Answer the member's pending SyncGroup, if any; True if there was one."""
        future = member.sync_future
        if future is None:
            return False
        member.sync_future = None
        _set_future(future, result)
        return True

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote any member that did.

        Returns False when no member rejoined (or the group has no leader).
        """
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.is_awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        """The leader's JoinGroup members list: every member's metadata for the protocol."""
        if self.protocol_name is None:
            raise RuntimeError(f"group {self.group_id} has no selected protocol")
        protocol = self.protocol_name
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    # ---------------------------------------------------------------- pending (KIP-394)

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    # ---------------------------------------------------------------- static (KIP-345)

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A known instance id registered under another member id: a stale or duplicate
        instance, answered FENCED_INSTANCE_ID."""
        current = self.current_static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Move a static member to a new member id (KIP-345 rejoin with unknown id).

        Anything the old id still waits for is answered FENCED_INSTANCE_ID.
        """
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join(member, JoinGroupResult(ErrorCode.fenced_instance_id, old_member_id))
        self.maybe_invoke_sync(member, SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    # ---------------------------------------------------------------- protocols

    def supports_protocols(self, protocol_type: str, protocol_names: Sequence[str]) -> bool:
        """Can a member with these protocols join? (INCONSISTENT_GROUP_PROTOCOL if not.)

        An Empty group takes any non-empty type with at least one protocol; otherwise the
        type must match and one protocol must be supported by every current member.
        """
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in protocol_names
        )

    def candidate_protocols(self) -> list[str]:
        n = len(self.members)
        return [name for name, count in self.supported_protocols.items() if count == n]

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        if not self.members:
            raise RuntimeError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        # most_common keeps first-seen order among ties: the earliest member's vote wins.
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        """End the join phase: bump the generation, pick the protocol, and move to
        CompletingRebalance (or Empty when nobody is left)."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()
        self.pending_sync_members = set(self.members)

    def compute_subscribed_topics(self) -> set[str] | None:
        # Only the consumer protocol's subscriptions can be read (KIP-496); None means
        # "unknown", which disables subscription-aware offset expiration.
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    # ---------------------------------------------------------------- offsets

    def has_offsets(self) -> bool:
        """Committed offsets, commits in flight or an open transaction's offsets: while
        any exist an Empty group is kept (Kafka's ``hasOffsets``)."""
        return (
            bool(self.offsets)
            or any(n > 0 for n in self.pending_offset_commits.values())
            or bool(self.pending_txn_offsets)
        )

    def apply_offset(self, tp: TopicPartition, value: OffsetCommitValue, order: int) -> bool:
        """Make ``value`` the committed offset of ``tp`` unless the current one was
        written later (Kafka's ``CommitRecordMetadataAndOffset.olderThan``); returns
        whether it was applied."""
        if tp in self.offsets and self.offset_commit_seq.get(tp, -1) >= order:
            return False
        self.offsets[tp] = value
        self.offset_commit_seq[tp] = order
        return True

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """The producer's marker is in the log: on commit its pending offsets become the
        committed ones (each only if written after the current one), on abort they are
        dropped. Returns how many were applied."""
        pending = self.pending_txn_offsets.pop(producer_id)
        if not commit:
            return 0
        return sum(self.apply_offset(tp, r.value, r.order) for tp, r in pending.items())

    def expired_offsets(
        self, now_ms: int, retention_ms: int, consumer_group_topics: set[str] | None = None
    ) -> list[TopicPartition]:
        """Offsets past ``offsets.retention.minutes`` under Kafka's rules (KIP-211, KIP-496).

        - the offsets of a consumer group (KIP-848; this object then only holds them, and
          ``consumer_group_topics`` are its members' topics): those of topics no member
          subscribes to, counted from their commit (Kafka's ConsumerGroup condition);
        - a group with a protocol type that is Empty: counted from when it became Empty
          (or from each commit when that time is unknown, e.g. an old record version);
        - a Stable consumer group with known subscriptions: offsets of topics no member
          subscribes to, counted from their commit;
        - a simple group (no protocol type): counted from each commit;
        - anything else keeps its offsets. An explicit expire timestamp (OffsetCommit
          v2-v4 retention_time_ms) overrides all of this. Partitions with a commit in
          flight never expire.
        """
        subscribed: set[str] = set()
        empty_since = self.current_state_timestamp
        if consumer_group_topics is not None:
            use_state_time = False
            subscribed = consumer_group_topics
        elif self.protocol_type is not None and self.is_(GroupState.EMPTY):
            use_state_time = empty_since is not None
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_(GroupState.STABLE)
        ):
            use_state_time = False
            subscribed = self.subscribed_topics
        elif self.protocol_type is None:
            use_state_time = False
        else:
            return []
        expired = []
        for tp, value in self.offsets.items():
            if tp[0] in subscribed or self.pending_offset_commits[tp] > 0:
                continue
            if value.expire_timestamp >= 0:
                if now_ms >= value.expire_timestamp:
                    expired.append(tp)
                continue
            base = (
                empty_since
                if use_state_time and empty_since is not None
                else (value.commit_timestamp)
            )
            if now_ms - base >= retention_ms:
                expired.append(tp)
        return expired

    # ---------------------------------------------------------------- describe

    def describe(self) -> DescribedGroup:
        """DescribeGroups entry; metadata and assignments only when Stable (as Kafka)."""
        stable = self.is_(GroupState.STABLE) and self.protocol_name is not None
        protocol = self.protocol_name if stable and self.protocol_name else ""
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        return DescribedGroup(
            0, self.group_id, self.state.value, self.protocol_type or "", protocol, members
        )
