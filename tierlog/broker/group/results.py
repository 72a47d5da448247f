"""What the group coordinator answers: one small frozen dataclass per response.

Each carries ``error`` (a Kafka error code, ``tierlog.protocol.errors.ErrorCode``) and
the response fields a request handler copies into the kio response of any version.
Fields a version does not have are simply not copied. Topic partitions are
``(topic, partition)`` tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TopicPartition = tuple[str, int]

NO_GENERATION = -1  # JoinGroupRequest.UNKNOWN_GENERATION_ID
NO_OFFSET = -1  # OffsetFetchResponse.INVALID_OFFSET
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """One entry of the members list the leader receives (its input to the assignor)."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """JoinGroup response. ``members`` is non-empty only for the leader.

    On error ``member_id`` echoes the request's (or carries the new id with
    MEMBER_ID_REQUIRED), ``generation_id`` is -1 and ``leader`` is "".
    """

    error: int
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    """SyncGroup response (``protocol_type``/``protocol_name`` are v5+ fields)."""

    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: int


@dataclass(frozen=True, slots=True)
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """LeaveGroup response: a top-level error and one entry per member (v3+ batch).

    For v0-v2 (one member, no per-member list) answer ``error`` if it is set, else
    ``members[0].error``.
    """

    error: int
    members: tuple[MemberLeaveResult, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetCommitResult:
    """OffsetCommit response: an error code per partition (what the response carries).

    ``error`` repeats the group-level or write failure, if any (NOT_COORDINATOR,
    ILLEGAL_GENERATION, COORDINATOR_NOT_AVAILABLE, ...), for logging; ``partitions`` is
    authoritative (e.g. OFFSET_METADATA_TOO_LARGE hits single partitions only).
    """

    error: int
    partitions: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    offset: int = NO_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    error: int = 0


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    """OffsetFetch response for one group (v8+ handlers call once per group)."""

    error: int
    partitions: dict[TopicPartition, FetchedOffset] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: int
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """One group of a DescribeGroups response.

    ``protocol`` and the members' ``metadata``/``assignment`` are filled only when the
    group is Stable, as in Kafka; an unknown group is reported as state "Dead" with
    error 0 (or GROUP_ID_NOT_FOUND when asked, for DescribeGroups v6+).
    """

    error: int
    group_id: str
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupResult:
    group_id: str
    error: int
