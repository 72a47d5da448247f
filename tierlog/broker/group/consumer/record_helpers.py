"""Records built from members and groups (Kafka's ``GroupCoordinatorRecordHelpers``).

Each function returns one ``Record``; the order in which the coordinator emits them is the
order in which they are replayed, and it matters: a member is deleted by tombstoning its
current assignment, then its target assignment, then its subscription (so a replay never
sees a member without a subscription that still owns partitions), and a group is deleted
by tombstoning every member that way and the group's own records last.
"""

from __future__ import annotations

from collections.abc import Iterable

from tierlog.broker.group.consumer.group import ConsumerGroup, ResolvedRegex
from tierlog.broker.group.consumer.member import Assignment, ConsumerGroupMember
from tierlog.broker.group.consumer.records import (
    CurrentAssignmentKey,
    CurrentAssignmentValue,
    GroupEpochKey,
    GroupEpochValue,
    MemberSubscriptionKey,
    MemberSubscriptionValue,
    Record,
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


def group_epoch(group_id: str, epoch: int) -> Record:
    return Record(GroupEpochKey(group_id), GroupEpochValue(epoch))


def subscription_metadata(group_id: str, topics: Iterable[TopicMetadataEntry]) -> Record:
    ordered = tuple(sorted(topics, key=lambda t: t.name))
    return Record(SubscriptionMetadataKey(group_id), SubscriptionMetadataValue(ordered))


def member_subscription(group_id: str, member: ConsumerGroupMember) -> Record:
    return Record(
        MemberSubscriptionKey(group_id, member.member_id),
        MemberSubscriptionValue(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_topic_names,
            subscribed_topic_regex=member.subscribed_topic_regex,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            server_assignor=member.server_assignor,
            classic_metadata=member.classic_metadata,
        ),
    )


def target_epoch(group_id: str, epoch: int) -> Record:
    return Record(TargetAssignmentEpochKey(group_id), TargetAssignmentEpochValue(epoch))


def target_member(group_id: str, member_id: str, partitions: Assignment) -> Record:
    return Record(
        TargetAssignmentMemberKey(group_id, member_id), TargetAssignmentMemberValue(partitions)
    )


def current_assignment(group_id: str, member: ConsumerGroupMember) -> Record:
    return Record(
        CurrentAssignmentKey(group_id, member.member_id),
        CurrentAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned=member.assigned,
            pending_revocation=member.pending_revocation,
        ),
    )


def regex(group_id: str, pattern: str, resolved: ResolvedRegex) -> Record:
    return Record(
        RegexKey(group_id, pattern),
        RegexValue(tuple(sorted(resolved.topics)), resolved.version, resolved.timestamp),
    )


def regex_tombstone(group_id: str, pattern: str) -> Record:
    return Record(RegexKey(group_id, pattern), None)


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Delete a member: current assignment, then target, then subscription."""
    return [
        Record(CurrentAssignmentKey(group_id, member_id), None),
        Record(TargetAssignmentMemberKey(group_id, member_id), None),
        Record(MemberSubscriptionKey(group_id, member_id), None),
    ]


def group_tombstones(group: ConsumerGroup) -> list[Record]:
    """Delete a whole group (Kafka's createGroupTombstoneRecords): every member's current
    and target assignment, the target epoch, every subscription, the subscription metadata,
    the resolved regexes, and the group epoch last (which deletes the group on replay)."""
    gid = group.group_id
    records = [Record(CurrentAssignmentKey(gid, m), None) for m in group.members]
    records += [Record(TargetAssignmentMemberKey(gid, m), None) for m in group.target]
    records.append(Record(TargetAssignmentEpochKey(gid), None))
    records += [Record(MemberSubscriptionKey(gid, m), None) for m in group.members]
    records.append(Record(SubscriptionMetadataKey(gid), None))
    records += [regex_tombstone(gid, r) for r in group.resolved_regexes]
    records.append(Record(GroupEpochKey(gid), None))
    return records


def group_records(group: ConsumerGroup) -> list[Record]:
    """Every record that recreates ``group`` from nothing (Kafka's
    createConsumerGroupRecords): subscriptions, epoch, targets, target epoch, then each
    member's current assignment."""
    gid = group.group_id
    records = [member_subscription(gid, m) for m in group.members.values()]
    if group.subscription_metadata:
        records.append(subscription_metadata(gid, group.subscription_metadata.values()))
    records += [regex(gid, r, resolved) for r, resolved in group.resolved_regexes.items()]
    records.append(group_epoch(gid, group.group_epoch))
    records += [target_member(gid, m, a) for m, a in group.target.items()]
    records.append(target_epoch(gid, group.assignment_epoch))
    records += [current_assignment(gid, m) for m in group.members.values()]
    return records
