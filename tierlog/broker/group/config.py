"""Settings of the group coordinator, by their Kafka broker config names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Group coordinator settings; defaults are Kafka's.

    Attributes:
        num_partitions: ``offsets.topic.num.partitions`` (50).
        min_session_timeout_ms: ``group.min.session.timeout.ms`` (6 s).
        max_session_timeout_ms: ``group.max.session.timeout.ms`` (30 min).
        initial_rebalance_delay_ms: ``group.initial.rebalance.delay.ms`` (3 s, KIP-134).
        max_size: ``group.max.size`` (unbounded, KIP-389).
        offsets_retention_ms: ``offsets.retention.minutes`` (7 days, KIP-186) in ms.
        offset_metadata_max_bytes: ``offset.metadata.max.bytes`` (4096).
        new_member_join_timeout_ms: Kafka's ``GroupCoordinator.NewMemberJoinTimeoutMs``
            (5 min, not configurable in Kafka): how long a brand-new member may wait in a
            rebalance before it is dropped (it cannot heartbeat yet).
        rebalance_protocols: ``group.coordinator.rebalance.protocols`` (``classic`` and
            ``consumer``, Kafka 4's default): without ``consumer``, ConsumerGroupHeartbeat
            is refused.
    """

    num_partitions: int = 50
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = 300_000
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")

    def __post_init__(self) -> None:
        if self.num_partitions < 1:
            raise ValueError("num_partitions must be >= 1")
        if self.max_size < 1:
            raise ValueError("max_size must be >= 1")

    @classmethod
    def from_properties(cls, values: Mapping[str, Any]) -> GroupConfig:
        """Build from broker settings keyed by Kafka name (e.g. ``BrokerConfig.values``).

        Missing keys keep Kafka's defaults.
        """
        d = cls()

        def get(key: str, default: int) -> int:
            v = values.get(key)
            return default if v is None else int(v)

        retention_min = values.get("offsets.retention.minutes")
        protocols = values.get("group.coordinator.rebalance.protocols")
        return cls(
            num_partitions=get("offsets.topic.num.partitions", d.num_partitions),
            min_session_timeout_ms=get("group.min.session.timeout.ms", d.min_session_timeout_ms),
            max_session_timeout_ms=get("group.max.session.timeout.ms", d.max_session_timeout_ms),
            initial_rebalance_delay_ms=get(
                "group.initial.rebalance.delay.ms", d.initial_rebalance_delay_ms
            ),
            max_size=get("group.max.size", d.max_size),
            offsets_retention_ms=(
                d.offsets_retention_ms if retention_min is None else int(retention_min) * 60_000
            ),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
            rebalance_protocols=(
                d.rebalance_protocols
                if protocols is None
                else tuple(str(p).lower() for p in protocols)
            ),
        )
