"""Kafka 4.x topic keys tierlog refuses, each with its reason (issue 23 item 5), as data
beside ``TOPIC_CONFIG`` (``tierlog.local.config``), which refuses them with the reason.

``KAFKA_TOPIC_KEYS`` is every key of Kafka 4.4's ``LogConfig`` (``configDefCopy()``);
``tests/local/test_config_refused.py`` holds that each is honoured or refused here, and
``tierlog.tools.config_reference`` lists them in docs/configuration.md. A topic a tool or
MirrorMaker 2 creates with one of these keys is refused with INVALID_CONFIG naming the key
and the reason, never created without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["KAFKA_TOPIC_KEYS", "TOPIC_REFUSED", "refusal"]

_APPEND_VALIDATION = "timestamp bounds on append: the append validation being rewritten (issue 21)"

TOPIC_REFUSED: Final[Mapping[str, str]] = MappingProxyType(
    {
        "message.timestamp.after.max.ms": _APPEND_VALIDATION,
        "message.timestamp.before.max.ms": _APPEND_VALIDATION,
        "max.decompressed.message.bytes": (
            "decompression bounds come with the append validation being rewritten (issue 21)"
        ),
        "errors.deadletterqueue.group.enable": (
            "dead-letter queues of the Streams group protocol (KIP-1034) are not implemented"
        ),
        "internal.segment.bytes": "Kafka's internal testing key (below segment.bytes' minimum)",
        "preallocate": "segment files are not preallocated (Kafka's default, false)",
        "segment.jitter.ms": "segments roll without jitter",
        "remote.copy.lag.bytes": "not implemented in tierlog's remote tier",
        "remote.copy.lag.ms": "not implemented in tierlog's remote tier",
        "remote.log.copy.disable": (
            "turning tiered storage off for a topic (KIP-950) is not implemented"
        ),
        "remote.log.delete.on.disable": (
            "turning tiered storage off for a topic (KIP-950) is not implemented"
        ),
    }
)


def refusal(key: str) -> str | None:
    """Why tierlog refuses Kafka's topic key ``key``; None if it does not."""
    return TOPIC_REFUSED.get(key)


# Kafka 4.4's topic keys (LogConfig.configDefCopy()).
KAFKA_TOPIC_KEYS: Final = frozenset(
    """
cleanup.policy compression.gzip.level compression.lz4.level compression.type
compression.zstd.level delete.retention.ms errors.deadletterqueue.group.enable
file.delete.delay.ms flush.messages flush.ms follower.replication.throttled.replicas
index.interval.bytes internal.segment.bytes leader.replication.throttled.replicas
local.retention.bytes local.retention.ms max.compaction.lag.ms max.decompressed.message.bytes
max.message.bytes message.timestamp.after.max.ms message.timestamp.before.max.ms
message.timestamp.type min.cleanable.dirty.ratio min.compaction.lag.ms min.insync.replicas
preallocate remote.copy.lag.bytes remote.copy.lag.ms remote.log.copy.disable
remote.log.delete.on.disable remote.storage.enable retention.bytes retention.ms segment.bytes
segment.index.bytes segment.jitter.ms segment.ms unclean.leader.election.enable
""".split()  # noqa: SIM905 - a list of names, easier to read as text
)
