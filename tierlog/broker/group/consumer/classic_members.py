"""Classic-protocol members of a consumer group (KIP-848's online migration), as pure functions.

After a classic group is upgraded to a consumer group (``migration.py``) its members still
speak JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and so does a classic consumer that
joins a non-empty consumer group. Each is a consumer group member like the others: the
server assignor gives it partitions and it reconciles one step at a time, revoking first.
It keeps its classic metadata (session timeout, supported protocols) and learns about a new
target the classic way (Kafka's ``classicGroupJoinToConsumerGroup``, ``...SyncTo...``,
``...HeartbeatTo...`` and ``...LeaveTo...``):

* JoinGroup is its heartbeat with a subscription: the topics and owned partitions of the
  embedded ConsumerProtocolSubscription update the member, the group epoch moves when the
  subscription changed, a new target is computed if needed and the member reconciles one
  step. The answer carries its member epoch as the generation id, no leader (nobody runs a
  client-side assignor) and its first protocol's name. A dynamic member without an id gets
  MEMBER_ID_REQUIRED first (JoinGroup v4+, KIP-394), as in a classic group.
* SyncGroup answers its current assignment in the embedded ConsumerProtocolAssignment (of
  its subscription's version), or REBALANCE_IN_PROGRESS when the group epoch moved past
  its member epoch (it must send JoinGroup to catch up) unless it is still revoking.
* Heartbeat keeps its session; REBALANCE_IN_PROGRESS when the group moved on, when it must
  revoke, or when partitions it waited for are free now.
* LeaveGroup removes it like a consumer member's leave (tombstones, a new group epoch).

Each returns records to append then replay and timer operations (the session, join and sync
timers of ``timers.py``), as ``heartbeat.py``'s functions do, or raises a
``ConsumerGroupError``. Nothing here does I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tierlog.broker.group.consumer import record_helpers
from tierlog.broker.group.consumer.embedded import (
    ConsumerAssignment,
    ConsumerSubscription,
    EmbeddedProtocolError,
    decode_subscription,
    encode_assignment,
)
from tierlog.broker.group.consumer.errors import (
    ConsumerGroupError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    UnknownMemberIdError,
)
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.heartbeat import (
    Changes,
    Context,
    advance_group,
    fence,
    replace_static_member,
)
from tierlog.broker.group.consumer.member import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupMember,
    MemberState,
    TopicPartition,
    normalise_names,
)
from tierlog.broker.group.consumer.migration import CONSUMER_PROTOCOL_TYPE
from tierlog.broker.group.consumer.reconcile import reconcile
from tierlog.broker.group.consumer.records import Record
from tierlog.broker.group.consumer.timers import (
    TimerKind,
    TimerOp,
    cancel,
    join_timer,
    rebalance_timer,
    session_timer,
    sync_timer,
)
from tierlog.broker.group.consumer.topics import TopicsView
from tierlog.protocol.errors import ErrorCode

E = ErrorCode


@dataclass(frozen=True, slots=True)
class ClassicJoinRequest:
    """A JoinGroup's fields, version-independently (``rebalance_timeout_ms`` is the session
    timeout for version 0, which has none; ``requires_known_member_id`` is version 4+)."""

    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[ClassicProtocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    requires_known_member_id: bool = False


@dataclass(frozen=True, slots=True)
class JoinOutcome:
    """``error`` is 0 or MEMBER_ID_REQUIRED (then ``member_id`` is the one to rejoin with)."""

    member_id: str
    generation_id: int
    protocol_name: str | None
    error: int = E.none
    records: tuple[Record, ...] = ()
    timers: tuple[TimerOp, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    """``error`` 0 with the encoded assignment, or REBALANCE_IN_PROGRESS."""

    error: int
    assignment: bytes = b""
    protocol_name: str | None = None
    timers: tuple[TimerOp, ...] = ()


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    error: int
    timers: tuple[TimerOp, ...] = ()


@dataclass(frozen=True, slots=True)
class LeaveOutcome:
    """One ``(member id, instance id, error)`` per member asked to leave, in order."""

    members: tuple[tuple[str, str | None, int], ...]
    records: tuple[Record, ...] = ()
    timers: tuple[TimerOp, ...] = ()


def supports_classic_protocols(
    group: ConsumerGroup, protocol_type: str, protocol_names: Iterable[str]
) -> bool:
    """Kafka's ``ConsumerGroup.supportsClassicProtocols``: the consumer embedded protocol,
    and (unless the group is empty) one protocol every classic member supports."""
    names = list(protocol_names)
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    if group.is_empty:
        return bool(names)
    classic = [m.classic_metadata for m in group.members.values() if m.classic_metadata]
    counts = Counter(n for meta in classic for n in {p.name for p in meta.supported_protocols})
    return any(counts[name] == len(classic) for name in names)


def _subscription(protocols: Sequence[ClassicProtocol]) -> ConsumerSubscription:
    # Every protocol of a consumer carries the same subscription (Kafka reads the first).
    try:
        return decode_subscription(protocols[0].metadata)
    except (EmbeddedProtocolError, IndexError):
        raise InconsistentGroupProtocolError(
            "The embedded consumer protocol subscription is malformed."
        ) from None


def _owned(subscription: ConsumerSubscription, topics: TopicsView) -> list[TopicPartition]:
    """The partitions the subscription says the member owns, by topic id (topics deleted
    since are left out)."""
    owned: list[TopicPartition] = []
    for name, partitions in subscription.owned_partitions:
        info = topics.by_name(name)
        if info is not None:
            owned += [(info.topic_id, p) for p in partitions]
    return owned


def _static_member(
    changes: Changes, member_id: str, instance_id: str, unknown: bool
) -> ConsumerGroupMember:
    existing = changes.group.static_member(instance_id)
    if not unknown:
        if existing is None:
            raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} was fenced by "
                f"member {existing.member_id}."
            )
        return existing
    if existing is None:
        return ConsumerGroupMember(member_id)
    # A restarted static member takes the old one's place, whichever protocol the old one
    # used: Kafka checks UNRELEASED_INSTANCE_ID only between two consumer-protocol members.
    return replace_static_member(changes, existing, member_id)


def join(ctx: Context, group: ConsumerGroup, request: ClassicJoinRequest) -> JoinOutcome:
    """A classic member's JoinGroup to a non-empty consumer group (module docstring).

    Raises:
        ConsumerGroupError: GROUP_MAX_SIZE_REACHED, INCONSISTENT_GROUP_PROTOCOL,
            UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, or UNKNOWN_SERVER_ERROR (assignor).
    """
    gid = group.group_id
    unknown = request.member_id == ""
    member_id = request.member_id or ctx.new_member_id()
    if len(group.members) >= ctx.config.max_size and member_id not in group.members:
        raise GroupMaxSizeReachedError(
            f"The consumer group has reached its maximum capacity of {ctx.config.max_size} members."
        )
    if not supports_classic_protocols(
        group, request.protocol_type, (p.name for p in request.protocols)
    ):
        raise InconsistentGroupProtocolError(f"Member {member_id}'s protocols are not supported.")
    if unknown and request.instance_id is None and request.requires_known_member_id:
        return JoinOutcome(member_id, -1, None, E.member_id_required)
    subscription = _subscription(request.protocols)

    changes = Changes(group.copy())
    work = changes.group
    if request.instance_id is None:
        member = work.members.get(member_id) or ConsumerGroupMember(member_id)
    else:
        member = _static_member(changes, member_id, request.instance_id, unknown)

    # 1. The member, its subscription, and the group epoch.
    updated = replace(
        member,
        instance_id=request.instance_id or member.instance_id,
        rack_id=subscription.rack_id or member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        subscribed_topic_names=normalise_names(subscription.topics),
        client_id=request.client_id,
        client_host=request.client_host,
        classic_metadata=ClassicMemberMetadata(request.session_timeout_ms, request.protocols),
    )
    if updated != member or member_id not in work.members:
        changes.add(record_helpers.member_subscription(gid, updated))
    advance_group(ctx, changes, updated.subscribed_topic_names != member.subscribed_topic_names)

    # 3. One reconciliation step, with what the subscription says the member owns.
    current = work.members[member_id]
    if not current.is_reconciled_to(work.assignment_epoch):
        target = work.target.get(member_id, {})
        owned = _owned(subscription, ctx.topics)
        stepped = reconcile(current, work.assignment_epoch, target, work.is_owned, owned)
        if stepped != current:
            changes.add(record_helpers.current_assignment(gid, stepped))
            if stepped.state is MemberState.UNREVOKED_PARTITIONS:
                changes.timers.append(
                    rebalance_timer(
                        gid, member_id, stepped.member_epoch, updated.rebalance_timeout_ms
                    )
                )
            else:
                changes.timers.append(cancel(TimerKind.REBALANCE, gid, member_id))
    changes.timers += [
        cancel(TimerKind.JOIN, gid, member_id),
        session_timer(gid, member_id, request.session_timeout_ms),
        sync_timer(gid, member_id, updated.rebalance_timeout_ms),
    ]
    final = work.members[member_id]
    return JoinOutcome(
        member_id,
        final.member_epoch,
        request.protocols[0].name,
        records=tuple(changes.records),
        timers=tuple(changes.timers),
    )


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember, then the member must speak the classic protocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(
                f"Member {member_id} is not a member of group {group.group_id}."
            )
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise UnknownMemberIdError(
                f"Member with instance id {instance_id} is not a member of group {group.group_id}."
            )
        if member.member_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} was fenced by "
                f"member {member.member_id}."
            )
    if member.classic_metadata is None:
        raise UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")
    return member


def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
    if generation_id != member.member_epoch:
        raise IllegalGenerationError(
            f"The request generation id {generation_id} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}."
        )


def _protocol_name(member: ConsumerGroupMember) -> str:
    assert member.classic_metadata is not None
    return member.classic_metadata.supported_protocols[0].name


def sync(
    ctx: Context,
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
    protocol_type: str | None,
    protocol_name: str | None,
) -> SyncOutcome:
    """A classic member's SyncGroup to a consumer group (module docstring).

    Raises:
        ConsumerGroupError: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION or
            INCONSISTENT_GROUP_PROTOCOL.
    """
    member = _member(group, member_id, instance_id)
    _check_generation(member, generation_id)
    name = _protocol_name(member)
    if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise InconsistentGroupProtocolError(
            f"The protocol type {protocol_type} from member {member_id} request is not equal "
            f"to the group protocol type {CONSUMER_PROTOCOL_TYPE}."
        )
    if protocol_name is not None and protocol_name != name:
        raise InconsistentGroupProtocolError(
            f"The protocol name {protocol_name} from member {member_id} request is not equal "
            f"to the protocol name {name} returned in the join response."
        )
    gid = group.group_id
    if (
        group.group_epoch > member.member_epoch
        and member.state is not MemberState.UNREVOKED_PARTITIONS
    ):
        # Revoking members finish first; the rejoin after that catches up.
        return SyncOutcome(
            E.rebalance_in_progress,
            timers=(join_timer(gid, member.member_id, member.rebalance_timeout_ms),),
        )
    assert member.classic_metadata is not None
    return SyncOutcome(
        E.none,
        encode_member_assignment(member, ctx.topics),
        name,
        (
            cancel(TimerKind.SYNC, gid, member.member_id),
            session_timer(gid, member.member_id, member.classic_metadata.session_timeout_ms),
        ),
    )


def encode_member_assignment(member: ConsumerGroupMember, topics: TopicsView) -> bytes:
    """The member's assigned partitions as a ConsumerProtocolAssignment, in the version of
    its first protocol's subscription (Kafka's prepareAssignment); topics deleted since are
    left out."""
    by_name: list[tuple[str, tuple[int, ...]]] = []
    for topic_id, partitions in member.assigned.items():
        info = topics.by_id(topic_id)
        if info is not None:
            by_name.append((info.name, tuple(sorted(partitions))))
    version = 0
    if member.classic_metadata is not None:
        try:
            version = decode_subscription(
                member.classic_metadata.supported_protocols[0].metadata
            ).version
        except (EmbeddedProtocolError, IndexError):
            version = 0
    return encode_assignment(ConsumerAssignment(tuple(sorted(by_name))), min(version, 3))


def waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's waitingOnUnreleasedPartition: a partition of the member's target that it
    does not have yet is still owned by another member."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    for topic_id, partitions in group.target.get(member.member_id, {}).items():
        have = member.assigned.get(topic_id, frozenset())
        if any(p not in have and group.is_owned(topic_id, p) for p in partitions):
            return True
    return False


def heartbeat(
    group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
) -> HeartbeatOutcome:
    """A classic member's Heartbeat to a consumer group (module docstring).

    Raises:
        ConsumerGroupError: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or ILLEGAL_GENERATION.
    """
    member = _member(group, member_id, instance_id)
    _check_generation(member, generation_id)
    assert member.classic_metadata is not None
    gid = group.group_id
    timers: list[TimerOp] = [
        session_timer(gid, member.member_id, member.classic_metadata.session_timeout_ms)
    ]
    if (
        member.member_epoch < group.group_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (
            member.state is MemberState.UNRELEASED_PARTITIONS
            and not waiting_on_unreleased(group, member)
        )
    ):
        timers.append(join_timer(gid, member.member_id, member.rebalance_timeout_ms))
        return HeartbeatOutcome(E.rebalance_in_progress, tuple(timers))
    return HeartbeatOutcome(E.none, tuple(timers))


def leave(
    ctx: Context, group: ConsumerGroup, members: Sequence[tuple[str, str | None]]
) -> LeaveOutcome:
    """A LeaveGroup for ``(member id, instance id)`` pairs (a member id "" with an instance
    id removes that static member: the admin's removal, KIP-345). Members that are not in
    the group, or that speak the consumer protocol, get their error; the others are removed
    together and the group epoch moves once."""
    results: list[tuple[str, str | None, int]] = []
    leaving: set[str] = set()
    for member_id, instance_id in members:
        try:
            if instance_id is None:
                member = _member(group, member_id, None)
            else:
                static = group.static_member(instance_id)
                if static is None:
                    raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
                if member_id and static.member_id != member_id:
                    raise FencedInstanceIdError(
                        f"Static member {member_id} with instance id {instance_id} was fenced "
                        f"by member {static.member_id}."
                    )
                member = _member(group, static.member_id, instance_id)
        except ConsumerGroupError as exc:
            results.append((member_id, instance_id, exc.code))
            continue
        leaving.add(member.member_id)
        results.append((member.member_id, instance_id, E.none))
    if not leaving:
        return LeaveOutcome(tuple(results))
    outcome = fence(ctx, group.copy(), leaving, None)
    return LeaveOutcome(tuple(results), outcome.records, outcome.timers)
