"""ConsumerGroupHeartbeat handling (KIP-848), as pure functions over a group's state.

Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` and its helpers. Each function takes
the group as it is (never changed here), the request and a ``Context`` (configuration,
assignors, topic metadata, the time), and returns an ``Outcome``: the response, the records
to append to ``__consumer_offsets`` (replayed into the group once appended), and the timers
to arm or cancel. Work happens on a ``copy()`` of the group: every record is applied to the
copy as soon as it is made, so each step sees the effect of the previous ones, and replaying
the same records into the real group afterwards yields exactly the copy's state.

A regular heartbeat, in Kafka's three steps:

1. Create or update the member (a ConsumerGroupMemberMetadata record if anything changed).
   The group epoch is bumped when the member's subscription changed, when a resolved regex
   or the subscribed topics' metadata changed, or when the group is new.
2. If the group epoch is past the target assignment's epoch, compute a new target.
3. Reconcile the member toward its target (``reconcile.py``): a ConsumerGroupCurrentMember
   Assignment record if its state moved, and the rebalance timer while it must revoke.

The response carries the member's epoch, the heartbeat interval, and its assigned
partitions when it joined, sent a full request, or its partitions changed.

Epoch -1 leaves the group (the member is removed and the group epoch bumped); -2 is a
static member leaving for a while: it keeps its partitions at epoch -2 until its session
times out or a new member with its instance id takes its place (and its partitions, with
no rebalance).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from tierlog.broker.group.consumer import record_helpers
from tierlog.broker.group.consumer.assignors import Assignor
from tierlog.broker.group.consumer.config import ConsumerGroupConfig, GroupTimeouts
from tierlog.broker.group.consumer.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupMember,
    MemberState,
    TopicPartition,
    is_subset,
    normalise_names,
)
from tierlog.broker.group.consumer.migration import (
    ClassicGroupView,
    ConversionResult,
    downgrade_on_leave,
    upgrade_for_heartbeat,
)
from tierlog.broker.group.consumer.reconcile import reconcile
from tierlog.broker.group.consumer.records import Record
from tierlog.broker.group.consumer.requests import HeartbeatRequest, HeartbeatResponse, validate
from tierlog.broker.group.consumer.subscriptions import (
    TopicFilter,
    compile_regex,
    metadata_for,
    needs_resolving,
    resolve,
)
from tierlog.broker.group.consumer.target import compute_target
from tierlog.broker.group.consumer.timers import (
    CancelTimer,
    TimerKey,
    TimerKind,
    TimerOp,
    cancel_all,
    rebalance_timer,
    session_timer,
)
from tierlog.broker.group.consumer.topics import TopicsView
from tierlog.broker.group.offsets_codec import GroupMetadataKey


@dataclass(frozen=True, slots=True)
class Context:
    """Everything a request's handling depends on besides the group."""

    config: ConsumerGroupConfig
    assignors: Mapping[str, Assignor]
    topics: TopicsView
    now_ms: int
    timeouts: GroupTimeouts
    new_member_id: Callable[[], str]
    topic_filter: TopicFilter = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What handling a request or a timer decided. ``response`` is None for timers;
    ``conversion`` is set when the group changed protocol type (the records then also
    delete the old group and write the new one)."""

    response: HeartbeatResponse | None
    records: tuple[Record, ...] = ()
    timers: tuple[TimerOp, ...] = ()
    conversion: ConversionResult | None = None


@dataclass
class Changes:
    """Records made so far, each applied to the working copy as it is made."""

    group: ConsumerGroup
    records: list[Record] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)

    def add(self, record: Record) -> None:
        self.records.append(record)
        if not isinstance(record.key, GroupMetadataKey):
            self.group.apply(record.key, record.value)  # type: ignore[arg-type]


def heartbeat(
    ctx: Context,
    group: ConsumerGroup | None,
    classic: ClassicGroupView | None,
    request: HeartbeatRequest,
) -> Outcome:
    """Handle one ConsumerGroupHeartbeat for ``group`` (None if no consumer group has that
    id; ``classic`` is the classic group of that id, if any).

    Raises:
        ConsumerGroupError: the error to answer with (its ``code`` and message).
    """
    validate(request, ctx.assignors)
    if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return _leave(ctx, group, request)
    return _join_or_update(ctx, group, classic, request)


def session_expired(ctx: Context, group: ConsumerGroup | None, member_id: str) -> Outcome:
    """The member's session timer fired: fence it (nothing if it is gone already)."""
    if group is None or member_id not in group.members:
        return Outcome(None)
    return fence(ctx, group.copy(), {member_id}, None)


def rebalance_expired(
    ctx: Context, group: ConsumerGroup | None, member_id: str, member_epoch: int
) -> Outcome:
    """The member's rebalance timer (armed at ``member_epoch``) fired: fence it if it is
    still at that epoch, i.e. it has not revoked what it was asked to in time."""
    member = None if group is None else group.members.get(member_id)
    if group is None or member is None or member.member_epoch != member_epoch:
        return Outcome(None)
    return fence(ctx, group.copy(), {member_id}, None)


# --------------------------------------------------------------------------- joining


def _check_epoch(
    member: ConsumerGroupMember, received: int, owned: list[TopicPartition] | None
) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
    if received > member.member_epoch:
        raise FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not is_subset(owned, member.assigned)
    ):
        # The previous epoch with a subset of the partitions is accepted: the response
        # that bumped the epoch may have been lost.
        raise FencedMemberEpochError(
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )


def _group_for(
    ctx: Context,
    group: ConsumerGroup | None,
    classic: ClassicGroupView | None,
    request: HeartbeatRequest,
    changes: Changes,
) -> ConversionResult | None:
    gid = request.group_id
    if group is not None:
        return None
    if request.member_epoch != JOIN_EPOCH:
        if classic is not None:
            raise GroupIdNotFoundError(f"Group {gid} is not a consumer group.")
        raise GroupIdNotFoundError(f"Consumer group {gid} not found.")
    if classic is None:
        return None
    conversion = upgrade_for_heartbeat(classic, ctx.config, ctx.topics)
    for record in conversion.records:
        changes.add(record)
    # The converted members keep their classic session timeouts (they heartbeat with the
    # classic Heartbeat API); Kafka arms them at the conversion.
    for member in changes.group.members.values():
        if member.classic_metadata is not None:
            changes.timers.append(
                session_timer(gid, member.member_id, member.classic_metadata.session_timeout_ms)
            )
    return conversion


def _static_member(
    work: ConsumerGroup,
    changes: Changes,
    member_id: str,
    request: HeartbeatRequest,
    owned: list[TopicPartition] | None,
) -> ConsumerGroupMember:
    instance_id = request.instance_id
    existing = work.static_member(instance_id)
    if request.member_epoch != JOIN_EPOCH:
        if existing is None:
            raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} was fenced by "
                f"member {existing.member_id}."
            )
        _check_epoch(existing, request.member_epoch, owned)
        return existing
    if existing is None:
        return work.members.get(member_id) or ConsumerGroupMember(member_id)
    if not existing.uses_classic_protocol and existing.member_epoch != STATIC_LEAVE_EPOCH:
        raise UnreleasedInstanceIdError(
            f"Static member {member_id} with instance id {instance_id} cannot join the group "
            f"because the instance id is owned by {existing.member_id} member."
        )
    return replace_static_member(changes, existing, member_id)


def replace_static_member(
    changes: Changes, existing: ConsumerGroupMember, member_id: str
) -> ConsumerGroupMember:
    """A new member with ``existing``'s instance id takes its place: its subscription, its
    target and its partitions, at epoch 0 (Kafka's replaceMember)."""
    gid = changes.group.group_id
    new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
    old_target = changes.group.target.get(existing.member_id, {})
    for record in record_helpers.member_tombstones(gid, existing.member_id):
        changes.add(record)
    changes.add(record_helpers.member_subscription(gid, new))
    changes.add(record_helpers.target_member(gid, member_id, old_target))
    changes.add(record_helpers.current_assignment(gid, new))
    if existing.member_id != member_id:
        changes.timers += cancel_all(gid, existing.member_id)
    return new


def _updated(member: ConsumerGroupMember, request: HeartbeatRequest) -> ConsumerGroupMember:
    """The member with what the request changes (None / -1 fields keep their value)."""
    return replace(
        member,
        instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        server_assignor=(
            request.server_assignor
            if request.server_assignor is not None
            else member.server_assignor
        ),
        subscribed_topic_names=(
            normalise_names(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            request.subscribed_topic_regex
            if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        client_id=request.client_id,
        client_host=request.client_host,
        classic_metadata=None,
    )


def refresh_subscriptions(ctx: Context, changes: Changes) -> bool:
    """Resolve the regexes that need it, drop the unused ones, and update the subscribed
    topics' metadata. Returns whether the group epoch must move."""
    work, gid = changes.group, changes.group.group_id
    bump = False
    subscribers = work.regex_subscribers()
    for pattern in sorted(work.resolved_regexes):
        if not subscribers[pattern]:
            changes.add(record_helpers.regex_tombstone(gid, pattern))
    for pattern in sorted(subscribers):
        old = work.resolved_regexes.get(pattern)
        if needs_resolving(old, ctx.topics, ctx.now_ms, ctx.config.regex_refresh_interval_ms):
            new = resolve(pattern, ctx.topics, ctx.now_ms, ctx.topic_filter)
            changes.add(record_helpers.regex(gid, pattern, new))
            bump = bump or old is None or old.topics != new.topics
    metadata = metadata_for(work.subscribed_topic_names(), ctx.topics)
    if metadata != work.subscription_metadata:
        changes.add(record_helpers.subscription_metadata(gid, metadata.values()))
        bump = True
    return bump


def advance_group(ctx: Context, changes: Changes, subscription_changed: bool) -> None:
    """The end of step 1 and step 2 of every member's request (consumer or classic): the
    group epoch moves when its subscriptions changed, and a new target assignment is
    computed when the group epoch moved past the assignment's."""
    work = changes.group
    if refresh_subscriptions(ctx, changes) or subscription_changed:
        changes.add(record_helpers.group_epoch(work.group_id, work.group_epoch + 1))
    if work.group_epoch > work.assignment_epoch:
        _, records = compute_target(work, work.group_epoch, ctx.assignors, ctx.config.assignors)
        for record in records:
            changes.add(record)


def _join_or_update(
    ctx: Context,
    group: ConsumerGroup | None,
    classic: ClassicGroupView | None,
    request: HeartbeatRequest,
) -> Outcome:
    gid = request.group_id
    changes = Changes(group.copy() if group is not None else ConsumerGroup(gid))
    conversion = _group_for(ctx, group, classic, request, changes)
    work = changes.group

    if len(work.members) >= ctx.config.max_size and (
        not request.member_id or request.member_id not in work.members
    ):
        raise GroupMaxSizeReachedError(
            f"The consumer group has reached its maximum capacity of {ctx.config.max_size} members."
        )
    member_id = request.member_id or ctx.new_member_id()  # empty only before version 1
    owned = request.owned()
    joining = request.member_epoch == JOIN_EPOCH
    if request.instance_id is None:
        member = work.members.get(member_id)
        if member is None:
            if not joining:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {gid}.")
            member = ConsumerGroupMember(member_id)
        _check_epoch(member, request.member_epoch, owned)
    else:
        member = _static_member(work, changes, member_id, request, owned)

    # 1. The member, its subscription, and the group epoch.
    updated = _updated(member, request)
    names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    regex_changed = updated.subscribed_topic_regex != member.subscribed_topic_regex
    if regex_changed and updated.subscribed_topic_regex:
        compile_regex(updated.subscribed_topic_regex)
    if updated != member or member_id not in work.members:
        changes.add(record_helpers.member_subscription(gid, updated))
    advance_group(ctx, changes, work.group_epoch == 0 or names_changed or regex_changed)

    # 3. One reconciliation step toward the member's target.
    current = work.members[member_id]
    if not current.is_reconciled_to(work.assignment_epoch):
        target = work.target.get(member_id, {})
        stepped = reconcile(current, work.assignment_epoch, target, work.is_owned, owned)
        if stepped != current:
            changes.add(record_helpers.current_assignment(gid, stepped))
            if stepped.state is MemberState.UNREVOKED_PARTITIONS:
                changes.timers.append(
                    rebalance_timer(
                        gid, member_id, stepped.member_epoch, stepped.rebalance_timeout_ms
                    )
                )
            else:
                changes.timers.append(CancelTimer(TimerKey(TimerKind.REBALANCE, gid, member_id)))
    changes.timers.append(session_timer(gid, member_id, ctx.timeouts.session_timeout_ms))

    final = work.members[member_id]
    send_assignment = joining or request.is_full or final.assigned != member.assigned
    response = HeartbeatResponse(
        member_id=member_id,
        member_epoch=final.member_epoch,
        heartbeat_interval_ms=ctx.timeouts.heartbeat_interval_ms,
        assignment=final.assigned if send_assignment else None,
    )
    return Outcome(response, tuple(changes.records), tuple(changes.timers), conversion)


# --------------------------------------------------------------------------- leaving


def _leave(ctx: Context, group: ConsumerGroup | None, request: HeartbeatRequest) -> Outcome:
    gid = request.group_id
    if group is None:
        raise GroupIdNotFoundError(f"Consumer group {gid} not found.")
    response = HeartbeatResponse(request.member_id, request.member_epoch, 0)
    if request.instance_id is None:
        if request.member_id not in group.members:
            raise UnknownMemberIdError(
                f"Member {request.member_id} is not a member of group {gid}."
            )
        return fence(ctx, group.copy(), {request.member_id}, response)
    member = group.static_member(request.instance_id)
    if member is None:
        raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
    if member.member_id != request.member_id:
        raise FencedInstanceIdError(
            f"Static member {request.member_id} with instance id {request.instance_id} was "
            f"fenced by member {member.member_id}."
        )
    if request.member_epoch == STATIC_LEAVE_EPOCH:
        # Kept at epoch -2 with its partitions: a new member with this instance id takes
        # them over without a rebalance (KIP-345's promise, kept by KIP-848).
        left = replace(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
        return Outcome(
            HeartbeatResponse(member.member_id, STATIC_LEAVE_EPOCH, 0),
            (record_helpers.current_assignment(gid, left),),
        )
    return fence(ctx, group.copy(), {member.member_id}, response)


def fence(
    ctx: Context, work: ConsumerGroup, member_ids: set[str], response: HeartbeatResponse | None
) -> Outcome:
    """Remove members (left, or timed out): tombstones, then a new group epoch so that the
    others rebalance. Becomes a downgrade to a classic group when the policy allows and only
    classic-protocol members would remain."""
    gid = work.group_id
    timers: list[TimerOp] = [op for m in sorted(member_ids) for op in cancel_all(gid, m)]
    conversion = downgrade_on_leave(work, member_ids, ctx.config, ctx.topics, ctx.now_ms)
    if conversion is not None:
        return Outcome(response, conversion.records, tuple(timers), conversion)
    changes = Changes(work, timers=timers)
    for member_id in sorted(member_ids):
        for record in record_helpers.member_tombstones(gid, member_id):
            changes.add(record)
    subscribers = work.regex_subscribers()
    for pattern in sorted(work.resolved_regexes):
        if not subscribers[pattern]:
            changes.add(record_helpers.regex_tombstone(gid, pattern))
    metadata = metadata_for(work.subscribed_topic_names(), ctx.topics)
    if metadata != work.subscription_metadata:
        changes.add(record_helpers.subscription_metadata(gid, metadata.values()))
    changes.add(record_helpers.group_epoch(gid, work.group_epoch + 1))
    return Outcome(response, tuple(changes.records), tuple(changes.timers))
