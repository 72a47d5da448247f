"""The ``range`` server assignor: contiguous partition ranges per topic, co-partitioned.

As Kafka 4's ``RangeAssignor``: for each topic, the members subscribed to it are put in
order (static members first, by instance id, then the others by member id) and take
consecutive ranges of the topic's partitions; with P partitions and N subscribers, the
first P % N members get P // N + 1 partitions and the rest P // N.

Co-partitioning follows: when every member subscribes to the same topics and those have
the same partition count, member i gets the same partition numbers of every topic, so a
join on the partition key reads matching partitions in one member. Ordering static members
by instance id keeps their ranges across restarts (a restarted static member has a new
member id but the same instance id). The assignor is not sticky otherwise: a member that
joins shifts the ranges after its place in the order, as Kafka's does.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from tierlog.broker.group.consumer.assignors.spec import GroupSpec, MemberSpec, partition_count
from tierlog.broker.group.consumer.member import Assignment


def member_order(member: MemberSpec) -> tuple[int, str]:
    """Static members first by instance id, then dynamic members by member id."""
    if member.instance_id is not None:
        return 0, member.instance_id
    return 1, member.member_id


class RangeAssignor:
    """Kafka's ``range`` assignor."""

    name = "range"

    def assign(self, spec: GroupSpec, partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        ordered = sorted(spec.members.values(), key=member_order)
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member in ordered:
            for topic_id in member.subscribed_topic_ids:
                subscribers.setdefault(topic_id, []).append(member.member_id)
        result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m.member_id: {} for m in ordered}
        for topic_id, members in subscribers.items():
            count = partition_count(partitions, topic_id)
            quota, extra = divmod(count, len(members))
            start = 0
            for index, member_id in enumerate(members):
                end = start + quota + (1 if index < extra else 0)
                if end > start:
                    result[member_id][topic_id] = frozenset(range(start, end))
                start = end
        return dict(result)
