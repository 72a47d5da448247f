"""The records a consumer group (KIP-848) writes to ``__consumer_offsets``, as typed values.

One key type and one value type per record Kafka 4 writes for a consumer group (its
``group-coordinator`` JSON schemas ``ConsumerGroup*Key``/``ConsumerGroup*Value``; names here
say what each holds), and ``Record``, a key with its value or ``None`` for a tombstone.
``record_codec`` turns them into bytes and back; ``record_helpers`` builds them from
members and groups; ``ConsumerGroup.apply`` replays them.

=====================================  ======================  ====  ==============
Kafka's record                         here                    type  key fields
=====================================  ======================  ====  ==============
ConsumerGroupMetadata                  GroupEpoch              3     group
ConsumerGroupPartitionMetadata         SubscriptionMetadata    4     group
ConsumerGroupMemberMetadata            MemberSubscription      5     group, member
ConsumerGroupTargetAssignmentMetadata  TargetAssignmentEpoch   6     group
ConsumerGroupTargetAssignmentMember    TargetAssignmentMember  7     group, member
ConsumerGroupCurrentMemberAssignment   CurrentAssignment       8     group, member
ConsumerGroupRegularExpression         Regex                   16    group, regex
=====================================  ======================  ====  ==============
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tierlog.broker.group.consumer.member import Assignment, ClassicMemberMetadata
from tierlog.broker.group.offsets_codec import GroupMetadataKey, GroupMetadataValue

# --------------------------------------------------------------------------- keys


@dataclass(frozen=True, slots=True)
class GroupEpochKey:
    """Type 3, ConsumerGroupMetadataKey: the group's epoch (and existence)."""

    group_id: str


@dataclass(frozen=True, slots=True)
class SubscriptionMetadataKey:
    """Type 4, ConsumerGroupPartitionMetadataKey: the subscribed topics' metadata."""

    group_id: str


@dataclass(frozen=True, slots=True)
class MemberSubscriptionKey:
    """Type 5, ConsumerGroupMemberMetadataKey: a member's subscription and client facts."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochKey:
    """Type 6, ConsumerGroupTargetAssignmentMetadataKey: the target assignment's epoch."""

    group_id: str


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberKey:
    """Type 7, ConsumerGroupTargetAssignmentMemberKey: one member's target partitions."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class CurrentAssignmentKey:
    """Type 8, ConsumerGroupCurrentMemberAssignmentKey: a member's epochs and partitions."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class RegexKey:
    """Type 16, ConsumerGroupRegularExpressionKey: a resolved subscription regex."""

    group_id: str
    regex: str


ConsumerGroupKey = (
    GroupEpochKey
    | SubscriptionMetadataKey
    | MemberSubscriptionKey
    | TargetAssignmentEpochKey
    | TargetAssignmentMemberKey
    | CurrentAssignmentKey
    | RegexKey
)


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class TopicMetadataEntry:
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    # Kafka 4.0 stores racks per partition when known; its assignors do not use them, and
    # tierlog writes none (an empty list, as Kafka does without rack information).
    partition_racks: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class SubscriptionMetadataValue:
    topics: tuple[TopicMetadataEntry, ...]


@dataclass(frozen=True, slots=True)
class MemberSubscriptionValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:
    partitions: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegexValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerGroupValue = (
    GroupEpochValue
    | SubscriptionMetadataValue
    | MemberSubscriptionValue
    | TargetAssignmentEpochValue
    | TargetAssignmentMemberValue
    | CurrentAssignmentValue
    | RegexValue
)


@dataclass(frozen=True, slots=True)
class Record:
    """One record to append to ``__consumer_offsets``; ``value`` None is a tombstone.

    A classic group's ``GroupMetadataKey``/``GroupMetadataValue`` (offsets_codec) may appear
    too: converting a group between protocols deletes one kind and writes the other.
    """

    key: ConsumerGroupKey | GroupMetadataKey
    value: ConsumerGroupValue | GroupMetadataValue | None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None
