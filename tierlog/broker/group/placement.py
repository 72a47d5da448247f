"""Which ``__consumer_offsets`` partition holds a group: Kafka's ``partitionFor``, sans-I/O.

Kafka places a group with ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``.
Clients never compute this themselves (they ask FindCoordinator), but a tierlog broker
must agree with Kafka so that a ``__consumer_offsets`` log moved between the two, or
inspected by Kafka's tools, keeps every group on the partition that owns it.
"""

from __future__ import annotations

# The topic's name, as in Kafka (Topic.GROUP_METADATA_TOPIC_NAME).
OFFSETS_TOPIC = "__consumer_offsets"
_INT32_MIN = -(1 << 31)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, int32 overflow.

    Characters outside the Basic Multilingual Plane count as their two surrogates, as
    they do in a Java string.
    """
    h = 0
    for unit_hi, unit_lo in _utf16_units(s):
        h = (31 * h + ((unit_hi << 8) | unit_lo)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(s: str) -> zip[tuple[int, int]]:
    raw = s.encode("utf-16-be", "surrogatepass")
    return zip(raw[0::2], raw[1::2], strict=True)


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``Math.abs`` but maps Integer.MIN_VALUE to 0, not itself."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (``offsets.topic.num.partitions``).

    Raises:
        ValueError: ``num_partitions`` < 1.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions
