"""One consumer group's state (KIP-848), changed only by replaying its records.

Kafka's ``ConsumerGroup``. The state is exactly what the records of ``records.py`` say: the
group epoch, the target assignment and its epoch, each member's subscription and current
assignment, the subscribed topics' metadata and the resolved regular expressions. The
coordinator never edits it directly: a request computes records (on a ``copy()``), the
records are appended to ``__consumer_offsets``, then ``apply`` replays them here. The same
``apply`` rebuilds the group when a broker becomes the coordinator of its partition, so a
coordinator that fails over knows exactly what the old one knew.

Derived from the members, and kept up to date by ``apply``:

* who owns each partition right now (assigned, or pending revocation) and at which member
  epoch. ``apply`` refuses a record that would give a partition to a second member
  (``ReplayError``, as Kafka's ``IllegalStateException``): that is the protocol's safety
  invariant, checked on every step.
* the static members (instance id -> member id).

Group states (Kafka's, shown by ConsumerGroupDescribe and ListGroups)::

    Empty        no members
    Assigning    the group epoch moved past the target assignment's epoch
    Reconciling  some member has not reached the target epoch, or is not Stable
    Stable       every member is Stable at the target epoch
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from dataclasses import dataclass, replace

from tierlog.broker.group.consumer.errors import ReplayError
from tierlog.broker.group.consumer.member import (
    LEAVE_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    TopicPartition,
    normalise_names,
)
from tierlog.broker.group.consumer.records import (
    ConsumerGroupKey,
    ConsumerGroupValue,
    CurrentAssignmentKey,
    CurrentAssignmentValue,
    GroupEpochKey,
    GroupEpochValue,
    MemberSubscriptionKey,
    MemberSubscriptionValue,
    RegexKey,
    RegexValue,
    SubscriptionMetadataKey,
    SubscriptionMetadataValue,
    TargetAssignmentEpochKey,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TopicMetadataEntry,
)


class GroupState(enum.Enum):
    """A consumer group's state, by the names Kafka reports."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """The topics a subscription regex matched, at which topic metadata version and when."""

    topics: frozenset[str]
    version: int
    timestamp: int


class ConsumerGroup:
    """A consumer group; see the module docstring. Not thread-safe: the coordinator's event
    loop owns it."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.metadata_hash = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadataEntry] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self._owners: dict[TopicPartition, tuple[str, int]] = {}

    def copy(self) -> ConsumerGroup:
        """A working copy a request may change freely (members and assignments are
        immutable values, so the containers are all that is copied)."""
        other = ConsumerGroup(self.group_id)
        other.group_epoch = self.group_epoch
        other.assignment_epoch = self.assignment_epoch
        other.metadata_hash = self.metadata_hash
        other.members = dict(self.members)
        other.static_members = dict(self.static_members)
        other.target = dict(self.target)
        other.subscription_metadata = dict(self.subscription_metadata)
        other.resolved_regexes = dict(self.resolved_regexes)
        other._owners = dict(self._owners)
        return other

    # ------------------------------------------------------------------ reading

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return GroupState.STABLE
        return GroupState.RECONCILING

    @property
    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return None if member_id is None else self.members.get(member_id)

    def target_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """The member's target assignment; a new member replacing a static member (same
        instance id, other member id) inherits the old one's (Kafka's targetAssignment)."""
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            if previous is not None and previous != member_id:
                return self.target.get(previous, {})
        return self.target.get(member_id, {})

    def partition_owner(self, topic_id: uuid.UUID, partition: int) -> tuple[str, int] | None:
        """(member id, member epoch) of the member owning the partition, or None if free."""
        return self._owners.get((topic_id, partition))

    def is_owned(self, topic_id: uuid.UUID, partition: int) -> bool:
        return (topic_id, partition) in self._owners

    def regex_subscribers(self) -> Counter[str]:
        """How many members subscribe with each (non-empty) regular expression."""
        return Counter(
            m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex
        )

    def member_topic_names(self, member: ConsumerGroupMember) -> set[str]:
        """The topic names a member subscribes to: its names and what its regex matched."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                names |= resolved.topics
        return names

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            names |= self.member_topic_names(member)
        return names

    def preferred_assignor(self, configured: tuple[str, ...]) -> str:
        """The server assignor most members ask for (ties: the first configured); the
        default (first configured) when none asks."""
        wanted = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not wanted:
            return configured[0]
        rank = {name: i for i, name in enumerate(configured)}
        return max(wanted, key=lambda n: (wanted[n], -rank.get(n, len(rank))))

    def num_classic_members(self) -> int:
        return sum(1 for m in self.members.values() if m.uses_classic_protocol)

    # ------------------------------------------------------------------ replay

    def apply(self, key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> None:
        """Replay one record of this group (``value`` None: a tombstone). Group-level
        creation and deletion (the ConsumerGroupMetadata record) are the store's.

        Raises:
            ReplayError: the record contradicts the state (a partition owned twice, a member
                deleted before its assignments).
        """
        if isinstance(key, GroupEpochKey):
            if isinstance(value, GroupEpochValue):
                self.group_epoch = value.epoch
                self.metadata_hash = value.metadata_hash
        elif isinstance(key, SubscriptionMetadataKey):
            self.subscription_metadata = (
                {t.name: t for t in value.topics}
                if isinstance(value, SubscriptionMetadataValue)
                else {}
            )
        elif isinstance(key, MemberSubscriptionKey):
            self._apply_subscription(key.member_id, value)
        elif isinstance(key, TargetAssignmentEpochKey):
            self.assignment_epoch = (
                value.assignment_epoch if isinstance(value, TargetAssignmentEpochValue) else 0
            )
        elif isinstance(key, TargetAssignmentMemberKey):
            self._set_target(
                key.member_id,
                value.partitions if isinstance(value, TargetAssignmentMemberValue) else None,
            )
        elif isinstance(key, CurrentAssignmentKey):
            self._apply_current(key.member_id, value)
        elif isinstance(key, RegexKey):
            if isinstance(value, RegexValue):
                self.resolved_regexes[key.regex] = ResolvedRegex(
                    frozenset(value.topics), value.version, value.timestamp
                )
            else:
                self.resolved_regexes.pop(key.regex, None)

    def _apply_subscription(self, member_id: str, value: ConsumerGroupValue | None) -> None:
        old = self.members.get(member_id)
        if not isinstance(value, MemberSubscriptionValue):
            if old is None:
                return  # deleted already (its other records were compacted away)
            if old.member_epoch != LEAVE_EPOCH:
                raise ReplayError(
                    f"member {member_id} of group {self.group_id} deleted before its "
                    "current assignment"
                )
            if member_id in self.target:
                raise ReplayError(
                    f"member {member_id} of group {self.group_id} deleted before its "
                    "target assignment"
                )
            self._forget_static(old)
            del self.members[member_id]
            return
        base = old if old is not None else ConsumerGroupMember(member_id)
        new = replace(
            base,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=normalise_names(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic_metadata=value.classic_metadata,
        )
        if old is not None:
            self._forget_static(old)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = member_id
        self.members[member_id] = new

    def _forget_static(self, member: ConsumerGroupMember) -> None:
        if member.instance_id is not None and (
            self.static_members.get(member.instance_id) == member.member_id
        ):
            del self.static_members[member.instance_id]

    def _set_target(self, member_id: str, partitions: Assignment | None) -> None:
        if partitions is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = partitions

    def _apply_current(self, member_id: str, value: ConsumerGroupValue | None) -> None:
        old = self.members.get(member_id)
        if not isinstance(value, CurrentAssignmentValue):
            if old is None:
                return  # deleted already
            self._release(old)
            self.members[member_id] = replace(
                old,
                member_epoch=LEAVE_EPOCH,
                previous_member_epoch=LEAVE_EPOCH,
                state=MemberState.STABLE,
                assigned={},
                pending_revocation={},
            )
            return
        base = old if old is not None else ConsumerGroupMember(member_id)
        new = replace(
            base,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.from_value(value.state),
            assigned=value.assigned,
            pending_revocation=value.pending_revocation,
        )
        if old is not None:
            self._release(old)
        for tp in new.owned_partitions():
            holder = self._owners.get(tp)
            if holder is not None:
                raise ReplayError(
                    f"group {self.group_id}: partition {tp[0]}-{tp[1]} given to member "
                    f"{member_id} at epoch {new.member_epoch} is still owned by member "
                    f"{holder[0]} at epoch {holder[1]}"
                )
            self._owners[tp] = (member_id, new.member_epoch)
        self.members[member_id] = new

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned_partitions():
            if self._owners.get(tp, ("",))[0] == member.member_id:
                del self._owners[tp]
