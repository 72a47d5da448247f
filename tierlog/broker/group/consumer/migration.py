"""Converting a group between the classic and the consumer protocol (KIP-848), as Kafka 4.

A group id names one group, of one type at a time. The rules, per
``group.consumer.migration.policy`` (``MigrationPolicy``):

* An *empty* group converts under every policy: a ConsumerGroupHeartbeat joining an empty
  classic group deletes it and starts a consumer group; a classic JoinGroup for an empty
  consumer group deletes it (``empty_group_conversion``) and the classic protocol starts a
  classic group.
* Upgrade (``upgrade`` or ``bidirectional``): a ConsumerGroupHeartbeat joining a non-empty
  classic group converts it online when the group uses the consumer embedded protocol
  (protocol type ``consumer``) and fits ``group.consumer.max.size``. Every classic member
  becomes a consumer-group member at the classic generation, Stable, keeping the partitions
  it was given, and keeps talking JoinGroup/SyncGroup/Heartbeat (its classic metadata is
  kept with it); the joining member then bumps the epoch and the group rebalances
  incrementally. Otherwise the heartbeat is refused with GROUP_ID_NOT_FOUND and a message
  saying why.
* Downgrade (``downgrade`` or ``bidirectional``): when the last member using the consumer
  protocol leaves (or is fenced) and every remaining member uses the classic protocol, the
  group becomes a classic group at the group epoch, each member with its target assignment
  encoded for its protocol version, and a classic rebalance starts. Not when the group
  would be empty, nor when the remaining members exceed ``group.max.size``.

Decisions are pure functions over ``ClassicGroupView`` (what the classic coordinator knows of
a classic group) and a ``ConsumerGroup``; they return the records that perform the
conversion (tombstones of the old type, then the new group), which the caller appends and
replays like any other.

Not in this stage: classic JoinGroup/SyncGroup/Heartbeat requests served by a consumer
group (members of a converted group that still speak the classic protocol); the next stage
adds them beside the classic protocol's handlers.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass

from tierlog.broker.group.consumer import record_helpers
from tierlog.broker.group.consumer.config import ConsumerGroupConfig
from tierlog.broker.group.consumer.embedded import (
    ConsumerAssignment,
    EmbeddedProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from tierlog.broker.group.consumer.errors import GroupIdNotFoundError
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.member import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
    normalise_names,
)
from tierlog.broker.group.consumer.records import Record
from tierlog.broker.group.consumer.topics import TopicsView
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
)

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class ClassicMemberView:
    """A classic group's member: what a conversion needs of it."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[ClassicProtocol, ...]
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class ClassicGroupView:
    """A classic group as the classic protocol knows it (``protocol_name`` is the selected
    protocol, ``generation`` the generation id)."""

    group_id: str
    protocol_type: str | None
    protocol_name: str | None
    generation: int
    members: tuple[ClassicMemberView, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.members


class Conversion(enum.Enum):
    EMPTY = "empty"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"


@dataclass(frozen=True, slots=True)
class ConversionResult:
    """What converting a group does: its kind and the records, in order."""

    kind: Conversion
    records: tuple[Record, ...]
    classic_group: ClassicGroupView | None = None


def classic_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group_id), None)


# --------------------------------------------------------------------------- upgrade


def upgrade_for_heartbeat(
    classic: ClassicGroupView, config: ConsumerGroupConfig, topics: TopicsView
) -> ConversionResult:
    """A ConsumerGroupHeartbeat joins (epoch 0) a group that is classic.

    Raises:
        GroupIdNotFoundError: the group may not be converted (policy, protocol type, size,
            malformed embedded protocol, overlapping assignments), with the reason.
    """
    gid = classic.group_id
    if classic.is_empty:
        return ConversionResult(Conversion.EMPTY, (classic_tombstone(gid),))
    why = f"Cannot upgrade classic group {gid} to consumer group because"
    if not config.migration_policy.upgrade_enabled:
        raise GroupIdNotFoundError(f"{why} online upgrade is disabled.")
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise GroupIdNotFoundError(f"{why} the group does not use the consumer embedded protocol.")
    if len(classic.members) > config.max_size:
        raise GroupIdNotFoundError(f"{why} the group size exceeds the consumer group maximum size.")
    try:
        group = consumer_group_from_classic(classic, topics)
    except EmbeddedProtocolError:
        raise GroupIdNotFoundError(f"{why} the embedded consumer protocol is malformed.") from None
    records = (classic_tombstone(gid), *record_helpers.group_records(group))
    return ConversionResult(Conversion.UPGRADE, records)


def consumer_group_from_classic(classic: ClassicGroupView, topics: TopicsView) -> ConsumerGroup:
    """Kafka's ``ConsumerGroup.fromClassicGroup``: every member Stable at the generation,
    owning and targeted at the partitions of its last classic assignment.

    Raises:
        EmbeddedProtocolError: a member's subscription or assignment cannot be read, or two
            members' assignments overlap.
    """
    group = ConsumerGroup(classic.group_id)
    generation = classic.generation
    taken: set[tuple[object, int]] = set()
    for view in classic.members:
        metadata = next(
            (p.metadata for p in view.protocols if p.name == classic.protocol_name),
            view.protocols[0].metadata if view.protocols else b"",
        )
        subscription = decode_subscription(metadata)
        given = decode_assignment(view.assignment) if view.assignment else ConsumerAssignment(())
        pairs = []
        for topic, partitions in given.partitions:
            info = topics.by_name(topic)
            if info is None:
                continue  # deleted since: nothing to keep
            pairs += [(info.topic_id, p) for p in partitions if 0 <= p < info.num_partitions]
        if taken & set(pairs):
            raise EmbeddedProtocolError("two members' assignments overlap")
        taken |= set(pairs)
        assigned = assignment_of(pairs)
        member = ConsumerGroupMember(
            member_id=view.member_id,
            instance_id=view.instance_id,
            rack_id=subscription.rack_id,
            client_id=view.client_id,
            client_host=view.client_host,
            subscribed_topic_names=normalise_names(subscription.topics),
            rebalance_timeout_ms=view.rebalance_timeout_ms,
            classic_metadata=ClassicMemberMetadata(view.session_timeout_ms, view.protocols),
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            assigned=assigned,
        )
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        group.target[member.member_id] = assigned
    group.group_epoch = generation
    group.assignment_epoch = generation
    return group


# --------------------------------------------------------------------------- downgrade


def downgrade_on_leave(
    group: ConsumerGroup,
    leaving: set[str],
    config: ConsumerGroupConfig,
    topics: TopicsView,
    now_ms: int,
) -> ConversionResult | None:
    """Members ``leaving`` are about to be removed: the records that turn the group into
    a classic group instead, or None when it stays a consumer group."""
    remaining = [m for m_id, m in group.members.items() if m_id not in leaving]
    if not remaining or not all(m.uses_classic_protocol for m in remaining):
        return None
    if any(group.members[m].uses_classic_protocol for m in leaving if m in group.members):
        return None  # Kafka converts only when consumer-protocol members are the ones leaving
    if not config.migration_policy.downgrade_enabled:
        return None
    if len(remaining) > config.classic_max_size:
        return None
    protocol = _select_protocol(remaining)
    if protocol is None:
        return None
    classic = classic_group_from_consumer(group, remaining, protocol, topics)
    value = GroupMetadataValue(
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        generation=classic.generation,
        protocol=protocol,
        leader=None,
        current_state_timestamp=now_ms,
        members=tuple(
            MemberMetadataValue(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=next(p.metadata for p in m.protocols if p.name == protocol),
                assignment=m.assignment,
            )
            for m in classic.members
        ),
    )
    records = (
        *record_helpers.group_tombstones(group),
        Record(GroupMetadataKey(group.group_id), value),
    )
    return ConversionResult(Conversion.DOWNGRADE, records, classic)


def _select_protocol(members: list[ConsumerGroupMember]) -> str | None:
    """The classic protocol every member supports that most members prefer (each votes for
    its first supported candidate; ties by name), as Kafka's selectProtocol."""
    supported = [
        [p.name for p in m.classic_metadata.supported_protocols]
        for m in members
        if m.classic_metadata is not None
    ]
    if not supported:
        return None
    candidates = set(supported[0]).intersection(*supported[1:])
    if not candidates:
        return None
    votes = Counter(next(n for n in names if n in candidates) for names in supported)
    return max(sorted(votes), key=lambda n: votes[n])


def classic_group_from_consumer(
    group: ConsumerGroup,
    remaining: list[ConsumerGroupMember],
    protocol: str,
    topics: TopicsView,
) -> ClassicGroupView:
    """Kafka's ``ClassicGroup.fromConsumerGroup``: the remaining (classic) members with
    their target assignments, encoded at the version of their subscription."""
    members = []
    for member in remaining:
        meta = member.classic_metadata
        assert meta is not None
        metadata = next(p.metadata for p in meta.supported_protocols if p.name == protocol)
        try:
            version = decode_subscription(metadata).version
        except EmbeddedProtocolError:
            version = 0
        partitions = []
        for topic_id, parts in sorted(group.target.get(member.member_id, {}).items()):
            info = topics.by_id(topic_id)
            if info is not None:
                partitions.append((info.name, tuple(sorted(parts))))
        members.append(
            ClassicMemberView(
                member_id=member.member_id,
                instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                session_timeout_ms=meta.session_timeout_ms,
                protocols=meta.supported_protocols,
                assignment=encode_assignment(ConsumerAssignment(tuple(partitions)), version),
            )
        )
    return ClassicGroupView(
        group.group_id, CONSUMER_PROTOCOL_TYPE, protocol, group.group_epoch, tuple(members)
    )


# --------------------------------------------------------------------------- empty groups


def empty_group_conversion(group: ConsumerGroup) -> ConversionResult | None:
    """A classic JoinGroup for a consumer group: an empty one is deleted (the classic
    protocol then creates its group); None when it has members (they keep it)."""
    if not group.is_empty:
        return None
    return ConversionResult(Conversion.EMPTY, tuple(record_helpers.group_tombstones(group)))


def classic_view_from_record(group_id: str, value: GroupMetadataValue) -> ClassicGroupView:
    """The view of a classic group from its GroupMetadataValue (the selected protocol's
    metadata is the only one a record keeps)."""
    return ClassicGroupView(
        group_id,
        value.protocol_type,
        value.protocol,
        value.generation,
        tuple(
            ClassicMemberView(
                member_id=m.member_id,
                instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocols=(ClassicProtocol(value.protocol or "", m.subscription),),
                assignment=m.assignment,
            )
            for m in value.members
        ),
    )
