"""The value of Kafka's topic configs ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas`` (KIP-73): which replicas of a topic the
replication throttles apply to. Sans-I/O: parsed and checked here, used by the topic
config table (``local.config``) and the broker's replication quotas.

The format (Kafka's ``ThrottledReplicaListValidator``): the literal ``*`` (every replica of
the topic), or a comma-separated list of ``[partitionId]:[brokerId]`` pairs, possibly
empty. Each broker reads only the pairs naming itself (Kafka's
``TopicConfigHandler.parseThrottledPartitions``): a partition is throttled on broker B when
``p:B`` is listed. ``kafka-reassign-partitions --throttle`` lists a moving partition's
current replicas in the leader list (whichever leads it serves the new replicas) and its new
replicas in the follower list.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ALL", "ThrottledReplicasCheck", "throttled_partitions"]

ALL = "*"
_PAIR = re.compile(r"[0-9]+:[0-9]+")
# Kafka's message, word for word (tools and users match on it).
_FORMAT = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


@dataclass(frozen=True)
class ThrottledReplicasCheck:
    """The config table's check of a parsed list value (``ConfigKey.check``)."""

    def __call__(self, value: Any) -> str | None:
        items = [str(v).strip() for v in value]
        if items == [ALL] or all(_PAIR.fullmatch(v) for v in items):
            return None
        return f"must be the literal '*' or a list of replicas in the following format: {_FORMAT}"

    def describe(self) -> str:
        return f"*, or {_FORMAT}"


@functools.lru_cache(maxsize=1024)
def _parsed(value: tuple[str, ...], broker_id: int) -> frozenset[int] | None:
    if value == (ALL,):
        return None
    out = set()
    for item in value:
        partition, _, broker = item.partition(":")
        if int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def throttled_partitions(value: Sequence[str], broker_id: int) -> frozenset[int] | None:
    """The partitions ``value`` (a checked list) throttles on broker ``broker_id``; None
    means every partition (``*``). Cached: it is asked on every replica fetch."""
    return _parsed(tuple(value), broker_id)


def is_throttled(value: Sequence[str], partition: int, broker_id: int) -> bool:
    """Whether ``value`` throttles ``partition``'s replica on ``broker_id``."""
    if not value:
        return False
    partitions = throttled_partitions(value, broker_id)
    return partitions is None or partition in partitions
