"""ConsumerGroupDescribe's data (API 69): what ``kafka-consumer-groups --describe`` shows of a
consumer group.

Per group: its state, group epoch, target assignment epoch and assignor (the one most
members ask for, else ``group.consumer.assignors``' first), and per member its ids, client
facts, subscription, current and target assignments (topic ids with their names; a topic
deleted since is left out, as Kafka does) and its type (1: consumer protocol, 0: classic).
An id with no group, or with a classic group, is answered GROUP_ID_NOT_FOUND with Kafka's
message. The handler adds the authorized operations and fits it to the request version.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.member import Assignment, ConsumerGroupMember
from tierlog.broker.group.consumer.topics import TopicsView
from tierlog.protocol.errors import ErrorCode

CONSUMER_MEMBER = 1
CLASSIC_MEMBER = 0


@dataclass(frozen=True, slots=True)
class DescribedPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedPartitions, ...]
    target_assignment: tuple[DescribedPartitions, ...]
    member_type: int


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = ()


def _partitions(assignment: Assignment, topics: TopicsView) -> tuple[DescribedPartitions, ...]:
    out = []
    for topic_id, partitions in assignment.items():
        info = topics.by_id(topic_id)
        if info is not None:
            out.append(DescribedPartitions(topic_id, info.name, tuple(sorted(partitions))))
    return tuple(sorted(out, key=lambda d: d.topic_name))


def _member(member: ConsumerGroupMember, target: Assignment, topics: TopicsView) -> DescribedMember:
    return DescribedMember(
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=member.subscribed_topic_names,
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=_partitions(member.assigned, topics),
        target_assignment=_partitions(target, topics),
        member_type=CLASSIC_MEMBER if member.uses_classic_protocol else CONSUMER_MEMBER,
    )


def describe_group(
    group_id: str,
    group: ConsumerGroup | None,
    classic_exists: bool,
    assignors: tuple[str, ...],
    topics: TopicsView,
) -> DescribedGroup:
    """One group's description, or its GROUP_ID_NOT_FOUND answer."""
    if group is None:
        message = (
            f"Group {group_id} is not a consumer group."
            if classic_exists
            else f"Group {group_id} not found."
        )
        return DescribedGroup(group_id, ErrorCode.group_id_not_found, message)
    return DescribedGroup(
        group_id=group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_assignor(assignors),
        members=tuple(
            _member(m, group.target.get(m.member_id, {}), topics)
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        ),
    )
