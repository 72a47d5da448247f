"""``tierlog groups``: list, describe, reset the offsets of, and delete consumer groups,
like Kafka's ``kafka-consumer-groups.sh``, through confluent-kafka's AdminClient.

``describe`` joins three answers: the members (DescribeGroups), the committed offsets
(OffsetFetch) and each partition's log end offset (ListOffsets); LAG is end minus committed.
``reset-offsets`` commits as an admin (OffsetCommit with no member), which a broker accepts
only while the group has no members, so, like Kafka's tool, it refuses while the group is
active; without ``--execute`` it only prints the plan.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TextIO

from tierlog.tools.client_config import ClientSettings, ToolError
from tierlog.tools.topics import describe_topics

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient, ConsumerGroupDescription

ResetMode = Literal["to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime"]
TP = tuple[str, int]

# Kafka's names for the group states (what kafka-consumer-groups.sh prints).
_STATES = {
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
}
# A group may have its offsets reset only in these states (Kafka's ConsumerGroupCommand).
_INACTIVE = ("Empty", "Dead", "Unknown")


def _state(description: ConsumerGroupDescription | None) -> str:
    state = getattr(description, "state", None)
    return "Dead" if description is None else _STATES.get(getattr(state, "name", ""), "Unknown")


def _print_table(headers: list[str], rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip(), file=out)


def _describe_group(
    settings: ClientSettings, admin: AdminClient, group: str
) -> ConsumerGroupDescription | None:
    """The group's description, or None when the broker says it does not exist."""
    from confluent_kafka import KafkaError

    futures = admin.describe_consumer_groups([group], request_timeout=settings.timeout)
    result = settings.outcome(futures[group], f"describe group {group!r}")
    if isinstance(result, KafkaError):
        if result.code() == KafkaError.GROUP_ID_NOT_FOUND:
            return None
        raise settings.error(result, f"describe group {group!r}", admin)
    return result


def _committed(
    settings: ClientSettings, admin: AdminClient, group: str, wanted: list[TP] | None = None
) -> dict[TP, int]:
    """Committed offsets of the group (of ``wanted`` partitions, or all it has)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(
        group, None if wanted is None else [TopicPartition(t, p) for t, p in wanted]
    )
    futures = admin.list_consumer_group_offsets([request], request_timeout=settings.timeout)
    result = settings.wait(futures[group], f"fetch offsets of group {group!r}", admin)
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.topic_partitions or []
        if tp.error is None and tp.offset >= 0
    }


def _offsets(
    settings: ClientSettings, admin: AdminClient, partitions: Iterable[TP], spec: Any
) -> dict[TP, int | None]:
    """ListOffsets for each partition with one OffsetSpec; None where it failed."""
    from confluent_kafka import KafkaError, TopicPartition

    wanted = {TopicPartition(t, p): spec for t, p in partitions}
    if not wanted:
        return {}
    futures = admin.list_offsets(wanted, request_timeout=settings.timeout)
    found: dict[TP, int | None] = {}
    for tp, future in futures.items():
        result = settings.outcome(future, f"list offsets of {tp.topic}-{tp.partition}")
        found[(tp.topic, tp.partition)] = None if isinstance(result, KafkaError) else result.offset
    return found


def list_groups(settings: ClientSettings, out: TextIO) -> int:
    admin = settings.admin()
    future = admin.list_consumer_groups(request_timeout=settings.timeout)
    result = settings.wait(future, "list groups", admin)
    if not result.valid and result.errors:
        raise settings.error(result.errors[0], "list groups", admin)
    for group in sorted(g.group_id for g in result.valid or []):
        print(group, file=out)
    return 0


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def describe(settings: ClientSettings, group: str, out: TextIO) -> int:
    """Print the group's state, per-partition offsets and lag, and its members."""
    from confluent_kafka.admin import OffsetSpec

    admin = settings.admin()
    description = _describe_group(settings, admin, group)
    committed = _committed(settings, admin, group)
    members = description.members if description is not None else []
    state = _state(description)
    if state == "Dead" and not committed and not members:
        raise ToolError(f"Consumer group '{group}' does not exist.")
    owner = {(tp.topic, tp.partition): m for m in members for tp in m.assignment.topic_partitions}
    partitions = sorted(set(committed) | set(owner))
    ends = _offsets(settings, admin, partitions, OffsetSpec.latest())
    assignor = (description.partition_assignor if description else "") or "-"
    summary = f"Group: {group}  State: {state}  Members: {len(members)}  Assignor: {assignor}"
    print(summary, file=out)
    if not members:
        print(f"Consumer group '{group}' has no active members.", file=out)
    print(file=out)
    rows = []
    for tp in partitions:
        current, end, member = committed.get(tp), ends.get(tp), owner.get(tp)
        lag = None if current is None or end is None else max(end - current, 0)
        rows.append(
            [group, tp[0], str(tp[1]), _text(current), _text(end), _text(lag)]
            + ([member.member_id, member.host, member.client_id] if member else ["-", "-", "-"])
        )
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    _print_table([*headers, "CONSUMER-ID", "HOST", "CLIENT-ID"], rows, out)
    if members:
        print(file=out)
        member_rows = []
        for m in members:
            by_topic: dict[str, list[int]] = {}
            for assigned in m.assignment.topic_partitions:
                by_topic.setdefault(assigned.topic, []).append(assigned.partition)
            assignment = " ".join(
                f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())
            )
            count = str(len(m.assignment.topic_partitions))
            member_rows.append([m.member_id, m.host, m.client_id, count, assignment or "-"])
        member_headers = ["CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        _print_table(member_headers, member_rows, out)
    return 0


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 date-time; without a zone it is local
    time, as in Kafka's ``--to-datetime``."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"--to-datetime: not an ISO-8601 date-time: {text!r}") from None
    return int(moment.astimezone().timestamp() * 1000)


def _partitions_to_reset(
    settings: ClientSettings, admin: AdminClient, group: str, topics: list[str], all_topics: bool
) -> list[TP]:
    """``topic`` or ``topic:0,1`` specs (or every topic the group committed) as partitions."""
    if all_topics:
        return sorted(_committed(settings, admin, group))
    wanted: dict[str, list[int] | None] = {}
    for spec in topics:
        name, sep, numbers = spec.partition(":")
        try:
            wanted[name] = [int(n) for n in numbers.split(",")] if sep else None
        except ValueError:
            raise ToolError(f"--topic expects TOPIC or TOPIC:P,P,...: {spec!r}") from None
    found, missing = describe_topics(settings, admin, list(wanted))
    if missing:
        raise ToolError("; ".join(f"Topic '{name}' does not exist" for name in missing))
    result: list[TP] = []
    for name, chosen in wanted.items():
        present = sorted(p.id for p in found[name].partitions)
        unknown = sorted(set(chosen or []) - set(present))
        if unknown:
            raise ToolError(f"topic '{name}' has no partition(s) {unknown}")
        result += [(name, p) for p in (chosen if chosen is not None else present)]
    return result


def _plan(
    settings: ClientSettings,
    admin: AdminClient,
    group: str,
    partitions: list[TP],
    mode: ResetMode,
    value: int | str | None,
    err: TextIO,
) -> dict[TP, int]:
    from confluent_kafka.admin import OffsetSpec

    earliest = _offsets(settings, admin, partitions, OffsetSpec.earliest())
    latest = _offsets(settings, admin, partitions, OffsetSpec.latest())
    failed = [tp for tp in partitions if earliest[tp] is None or latest[tp] is None]
    if failed:
        raise ToolError(f"could not list offsets of {', '.join(f'{t}-{p}' for t, p in failed)}")
    low = {tp: earliest[tp] or 0 for tp in partitions}
    high = {tp: latest[tp] or 0 for tp in partitions}
    if mode == "to-earliest":
        return low
    if mode == "to-latest":
        return high
    if mode == "to-datetime":
        spec = OffsetSpec.for_timestamp(parse_datetime(str(value)))
        at = _offsets(settings, admin, partitions, spec)
        plan: dict[TP, int] = {}
        for tp in partitions:
            found = at[tp]
            # No record at or after that time: the end of the log, as Kafka does.
            plan[tp] = high[tp] if found is None or found < 0 else found
        return plan
    if mode == "shift-by":
        committed = _committed(settings, admin, group, partitions)
        absent = [tp for tp in partitions if tp not in committed]
        if absent:
            names = ", ".join(f"{t}-{p}" for t, p in absent)
            raise ToolError(f"cannot shift {names}: the group has no committed offset there")
        wanted = {tp: committed[tp] + int(value or 0) for tp in partitions}
    else:
        wanted = {tp: int(value or 0) for tp in partitions}
    plan = {}
    for tp, offset in wanted.items():
        plan[tp] = min(max(offset, low[tp]), high[tp])
        if plan[tp] != offset:
            print(
                f"tierlog: offset {offset} of {tp[0]}-{tp[1]} is outside [{low[tp]}, "
                f"{high[tp]}]; using {plan[tp]}",
                file=err,
            )
    return plan


def reset_offsets(
    settings: ClientSettings,
    group: str,
    out: TextIO,
    err: TextIO,
    *,
    topics: list[str],
    mode: ResetMode,
    value: int | str | None = None,
    all_topics: bool = False,
    execute: bool = False,
) -> int:
    """Print (and with ``execute`` commit) new offsets for the group on the given topics.

    Offsets beyond the log are clamped to its start or end, with a warning, as Kafka does.
    """
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if not topics and not all_topics:
        raise ToolError("reset-offsets needs --topic or --all-topics")
    admin = settings.admin()
    state = _state(_describe_group(settings, admin, group))
    if state not in _INACTIVE:
        raise ToolError(
            f"Assignments can only be reset if the group '{group}' is inactive, "
            f"but the current state is {state}."
        )
    partitions = _partitions_to_reset(settings, admin, group, topics, all_topics)
    if not partitions:
        raise ToolError(f"group '{group}' has no committed offsets to reset")
    plan = _plan(settings, admin, group, partitions, mode, value, err)
    if execute:
        offsets = [TopicPartition(t, p, offset) for (t, p), offset in sorted(plan.items())]
        request = ConsumerGroupTopicPartitions(group, offsets)
        futures = admin.alter_consumer_group_offsets([request], request_timeout=settings.timeout)
        result = settings.wait(futures[group], f"commit offsets of group {group!r}", admin)
        failures = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failures:
            raise ToolError(
                f"commit offsets of group {group!r}: "
                + "; ".join(f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in failures)
            )
    rows = [[group, t, str(p), str(offset)] for (t, p), offset in sorted(plan.items())]
    _print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, out)
    if not execute:
        print("Dry run: nothing committed; add --execute to commit these offsets.", file=err)
    return 0


def delete(settings: ClientSettings, groups: list[str], out: TextIO) -> int:
    """Delete groups (their committed offsets); a group with members cannot be deleted."""
    from confluent_kafka import KafkaError

    admin = settings.admin()
    futures = admin.delete_consumer_groups(groups, request_timeout=settings.timeout)
    failures: list[str] = []
    for group, future in futures.items():
        result = settings.outcome(future, f"delete group {group!r}")
        if not isinstance(result, KafkaError):
            print(f"Deleted consumer group '{group}'.", file=out)
        elif result.code() == KafkaError.GROUP_ID_NOT_FOUND:
            failures.append(f"Consumer group '{group}' does not exist.")
        elif result.code() == KafkaError.NON_EMPTY_GROUP:
            failures.append(f"Consumer group '{group}' has active members; it was not deleted.")
        else:
            failures.append(str(settings.error(result, f"delete group {group!r}", admin)))
    if failures:
        out.flush()
        raise ToolError(" ".join(failures))
    return 0
