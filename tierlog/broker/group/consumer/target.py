"""The target assignment: what the assignor wants each member to own at a group epoch.

Kafka's ``TargetAssignmentBuilder``. When the group epoch moves past the target
assignment's epoch (a member joined, left, or changed its subscription; a subscribed topic
changed), the next heartbeat computes a new target for every member with the group's
assignor, from the members' subscriptions and their current targets (so the ``uniform``
assignor can stay sticky). Only what changed is written: one
ConsumerGroupTargetAssignmentMember record per member whose target differs (a new member
always gets one, even when empty), then the ConsumerGroupTargetAssignmentMetadata record
with the new epoch. Members then reconcile toward it at their own pace.
"""

from __future__ import annotations

from collections.abc import Mapping

from tierlog.broker.group.consumer import record_helpers
from tierlog.broker.group.consumer.assignors import Assignor, GroupSpec, MemberSpec
from tierlog.broker.group.consumer.errors import AssignorError
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.member import Assignment, normalise
from tierlog.broker.group.consumer.records import Record
from tierlog.broker.group.consumer.subscriptions import member_topic_ids


def compute_target(
    group: ConsumerGroup, epoch: int, assignors: Mapping[str, Assignor], configured: tuple[str, ...]
) -> tuple[dict[str, Assignment], list[Record]]:
    """The new target of every member at ``epoch`` and the records that persist it.

    Raises:
        AssignorError: the assignor failed (UNKNOWN_SERVER_ERROR for the heartbeat).
    """
    assignor = assignors[group.preferred_assignor(configured)]
    spec = GroupSpec(
        {
            member_id: MemberSpec(
                member_id=member_id,
                subscribed_topic_ids=member_topic_ids(group, member),
                current=group.target.get(member_id, {}),
                instance_id=member.instance_id,
                rack_id=member.rack_id,
            )
            for member_id, member in group.members.items()
        }
    )
    partitions = {t.topic_id: t.num_partitions for t in group.subscription_metadata.values()}
    try:
        raw = assignor.assign(spec, partitions)
    except AssignorError:
        raise
    except Exception as exc:  # an assignor bug must not take the coordinator down
        raise AssignorError(
            f"Failed to compute a new target assignment for epoch {epoch}: {exc}"
        ) from exc
    new = {member_id: normalise(raw.get(member_id, {})) for member_id in group.members}
    records = [
        record_helpers.target_member(group.group_id, member_id, assignment)
        for member_id, assignment in new.items()
        if group.target.get(member_id) != assignment
    ]
    records.append(record_helpers.target_epoch(group.group_id, epoch))
    return new, records
