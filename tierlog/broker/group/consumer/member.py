"""One member of a consumer group (KIP-848) and the assignment type, as immutable values.

A member is what the ``ConsumerGroupMemberMetadata`` record (its subscription and client
facts) and the ``ConsumerGroupCurrentMemberAssignment`` record (its epochs, state and
partitions) hold about it; every change makes a new value (``dataclasses.replace``).

Epochs (KIP-848):

* ``member_epoch`` is the epoch of the target assignment the member has reached; the
  member must echo it in every heartbeat. 0 means joining, -1 left, -2 a static member
  that left for now and will be back with the same instance id.
* ``previous_member_epoch`` is the epoch before the last bump. A heartbeat carrying it is
  still accepted when the member owns only partitions it is assigned: the response with
  the bumped epoch may have been lost on the way.

Member states (``MemberState``, the int8 Kafka stores)::

    STABLE ──target epoch moves──▶ (reconcile) ──▶ UNREVOKED_PARTITIONS  (must give some up)
      ▲                                  │         UNRELEASED_PARTITIONS (waits for others)
      └────────── reconciled ◀───────────┘         STABLE                (nothing to wait on)

``UNKNOWN`` stands for a state value written by a newer version; such a member is fenced
and must rejoin. (An instance id still held by another member is not a state: a static
member joining with it is refused with UNRELEASED_INSTANCE_ID.)

``Assignment`` maps a topic id to the partitions of it; it is never mutated after it is
built, so members and groups share assignments freely.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

Assignment = Mapping[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]

EMPTY_ASSIGNMENT: Assignment = {}

# The epochs a heartbeat may carry besides a member's epoch (ConsumerGroupHeartbeatRequest).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState`` values, as stored in CurrentMemberAssignment records."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        """The state for a stored value; a value this version does not know is UNKNOWN."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    """One protocol a classic-protocol member supports (JoinGroup's name and metadata)."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol (JoinGroup/SyncGroup) inside a
    consumer group needs kept: set for such members only (KIP-848's online migration)."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """A member of a consumer group; see the module docstring for epochs and states."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_metadata: ClassicMemberMetadata | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_metadata is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """Stable at the target epoch: nothing left to revoke, wait for or receive."""
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def owned_partitions(self) -> Iterator[TopicPartition]:
        """Every partition this member may still be consuming: assigned or being revoked."""
        yield from partitions_of(self.assigned)
        yield from partitions_of(self.pending_revocation)


def normalise_names(names: Iterable[str]) -> tuple[str, ...]:
    """Subscribed topic names as the member keeps them: sorted, without duplicates."""
    return tuple(sorted(set(names)))


def assignment_of(pairs: Iterable[TopicPartition]) -> Assignment:
    """An assignment from (topic id, partition) pairs."""
    grouped: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in pairs:
        grouped.setdefault(topic_id, set()).add(partition)
    return {t: frozenset(p) for t, p in grouped.items()}


def partitions_of(assignment: Assignment) -> Iterator[TopicPartition]:
    for topic_id, partitions in assignment.items():
        for partition in partitions:
            yield topic_id, partition


def assignment_size(assignment: Assignment) -> int:
    return sum(len(p) for p in assignment.values())


def normalise(assignment: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    """Frozen partition sets, and no topic with none (so equal assignments compare equal)."""
    return {t: frozenset(p) for t, p in assignment.items() if p}


def is_subset(owned: Iterable[TopicPartition] | None, assignment: Assignment) -> bool:
    """Whether every owned partition is in ``assignment``; unknown (None) is not a subset."""
    if owned is None:
        return False
    return all(p in assignment.get(t, ()) for t, p in owned)
