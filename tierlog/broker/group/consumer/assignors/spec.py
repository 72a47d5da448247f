"""What a server-side assignor is given and must return (Kafka's ``GroupSpec`` and
``ConsumerGroupPartitionAssignor``), and the checks every assignor's result must pass.

An assignor sees each member's subscribed topic ids (already resolved from names and
regular expressions, existing topics only), instance id, rack, and the partitions the
current *target* assignment gives it, plus every subscribed topic's partition count. It
returns a new target: member id -> partitions. It is a pure function: same input, same
output, no clock, no randomness.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tierlog.broker.group.consumer.errors import AssignorError
from tierlog.broker.group.consumer.member import Assignment


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the assignor sees it."""

    member_id: str
    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Assignment = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The members, and whether they all subscribe to the same topics (Kafka's
    HOMOGENEOUS subscription type) which lets the assignors take a faster path."""

    members: Mapping[str, MemberSpec]

    @property
    def homogeneous(self) -> bool:
        subscriptions = {m.subscribed_topic_ids for m in self.members.values()}
        return len(subscriptions) <= 1


class Assignor(Protocol):
    """A server-side assignor, chosen by name (``group.consumer.assignors`` or a member's
    ``ServerAssignor``)."""

    @property
    def name(self) -> str: ...

    def assign(self, spec: GroupSpec, partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        """The new target assignment.

        Args:
            spec: the members.
            partitions: partition count of every topic some member subscribes to.

        Raises:
            AssignorError: a member subscribes to a topic missing from ``partitions``.
        """
        ...


def partition_count(partitions: Mapping[uuid.UUID, int], topic_id: uuid.UUID) -> int:
    """The topic's partition count, or AssignorError when the metadata lacks it."""
    count = partitions.get(topic_id)
    if count is None:
        raise AssignorError(f"members subscribe to topic {topic_id} which has no metadata")
    return count
