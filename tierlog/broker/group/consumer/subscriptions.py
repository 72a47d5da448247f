"""What a consumer group subscribes to: topic names, RE2 regular expressions, and the
metadata of the subscribed topics that drives rebalances.

Regular expressions (KIP-848): a member may subscribe with ``SubscribedTopicRegex``
instead of names. The coordinator resolves it against every topic of the cluster (internal
topics included, as Kafka does; only an authorizer may hide topics, a hook the next stage
fills) with Google RE2 matching the whole name, as Kafka's RE2/J ``matches()``:
``orders`` matches only ``orders``, ``orders.*`` matches ``orders-v2``. RE2 never
backtracks, so no pattern can hold the coordinator.

Kafka resolves in the background and batches refreshes; here resolution is synchronous and
cheap to skip: a regex is resolved when a member first brings it, and again when the topic
metadata's version differs from the version it was resolved at, or when
``group.consumer.regex.refresh.interval.ms`` has passed (permissions can change without a
metadata version). Each resolution is stored as a ConsumerGroupRegularExpression record, so
a coordinator that takes over knows the resolutions without rescanning.

Subscription metadata: the id and partition count of every subscribed topic that exists.
When it changes (a subscribed topic created, deleted, or given partitions), the group epoch
moves and the target assignment is recomputed; the group's copy is persisted as the
ConsumerGroupPartitionMetadata record (Kafka 4.0's form; racks are not recorded because
neither Kafka's assignors nor these use them).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import re2

from tierlog.broker.group.consumer.errors import InvalidRegularExpressionError
from tierlog.broker.group.consumer.group import ConsumerGroup, ResolvedRegex
from tierlog.broker.group.consumer.member import ConsumerGroupMember
from tierlog.broker.group.consumer.records import TopicMetadataEntry
from tierlog.broker.group.consumer.topics import TopicsView

# Which topic names a member's principal may see (Kafka filters regex matches by DESCRIBE
# permission). None: all.
TopicFilter = Callable[[str], bool] | None

_NAMED_GROUP = re.compile(r"\(\?P?<(\w+)>", re.ASCII)


def compile_regex(pattern: str) -> Any:
    """The pattern compiled by RE2 for whole-name matching.

    Raises:
        InvalidRegularExpressionError: it does not compile, or uses what RE2/J refuses
            (``\\C``, one group name twice) although RE2 accepts it.
    """
    if "\\C" in pattern.replace("\\\\", ""):
        raise InvalidRegularExpressionError(f"Invalid regular expression {pattern}: \\C")
    names = _NAMED_GROUP.findall(pattern)
    if len(names) != len(set(names)):
        raise InvalidRegularExpressionError(
            f"Invalid regular expression {pattern}: a group name is used twice"
        )
    options = re2.Options()
    options.log_errors = False  # a client's bad pattern is its error, not the broker's
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise InvalidRegularExpressionError(
            f"Invalid regular expression {pattern}: {exc}"
        ) from None
    finally:
        # re2.compile keeps its last 128 programs (up to 8 MiB each); clients choose the
        # patterns, so none is kept past its use (resolutions are rare: see above).
        re2.purge()


def resolve(
    pattern: str, topics: TopicsView, now_ms: int, allowed: TopicFilter = None
) -> ResolvedRegex:
    """The topics ``pattern`` matches whole, at ``topics.version``.

    Raises:
        InvalidRegularExpressionError: the pattern does not compile.
    """
    compiled = compile_regex(pattern)
    matched = frozenset(
        name
        for name in topics.names()
        if compiled.fullmatch(name) is not None and (allowed is None or allowed(name))
    )
    return ResolvedRegex(matched, topics.version, now_ms)


def needs_resolving(
    resolved: ResolvedRegex | None, topics: TopicsView, now_ms: int, refresh_interval_ms: int
) -> bool:
    """Whether a subscribed regex must be (re)resolved now."""
    # Any other version means the metadata changed since (a broker's view numbers its
    # versions by content, so a coordinator that took over compares equal for the same
    # topics; never "older", which only one process's counter could promise).
    return (
        resolved is None
        or resolved.version != topics.version
        or now_ms - resolved.timestamp >= refresh_interval_ms
    )


def metadata_for(names: Iterable[str], topics: TopicsView) -> dict[str, TopicMetadataEntry]:
    """Subscription metadata: each named topic that exists, with its id and partitions."""
    out: dict[str, TopicMetadataEntry] = {}
    for name in names:
        info = topics.by_name(name)
        if info is not None:
            out[name] = TopicMetadataEntry(info.topic_id, name, info.num_partitions)
    return out


def member_topic_ids(group: ConsumerGroup, member: ConsumerGroupMember) -> frozenset[uuid.UUID]:
    """The ids of the existing topics a member subscribes to (by name or regex), as the
    group's subscription metadata knows them."""
    metadata = group.subscription_metadata
    return frozenset(
        metadata[name].topic_id for name in group.member_topic_names(member) if name in metadata
    )
