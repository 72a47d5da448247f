"""The coordination interface a broker needs, and its data types and errors.

It holds what Kafka keeps in ZooKeeper (pre-KRaft layout, DESIGN.md "Cluster"): live brokers,
the controller, each topic's id, replica assignment and config overrides, and each
partition's state (leader, leader epoch, ISR). Implementations: ``local.LocalCoordinator``
(one node, a JSON file in the data dir). Everything here is strongly consistent from the
caller's point of view: a write returns after it is durable.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class CoordinationError(Exception):
    """Base class."""


class TopicExistsError(CoordinationError):
    pass


class UnknownTopicError(CoordinationError):
    pass


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionState:
    """Leader and ISR of one partition; ``leader_epoch`` never goes down (clients rely on
    it, kafka-wire.md), so it is persisted and only ever bumped.

    ``controller_epoch`` is the epoch of the controller that wrote the state;
    ``partition_epoch`` is the version of the stored state (ZooKeeper: the state znode's
    zkVersion), which every ISR change names so that a stale one is refused (KIP-497)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int = 0
    partition_epoch: int = 0


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    replicas: dict[int, list[int]]  # partition -> replica broker ids, preferred leader first
    configs: dict[str, str] = field(default_factory=dict)  # topic overrides, Kafka names
    partition_states: dict[int, PartitionState] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return len(self.replicas)


class Coordinator(Protocol):
    cluster_id: str

    def start(self, me: BrokerRegistration) -> None: ...

    def stop(self) -> None: ...

    def brokers(self) -> list[BrokerRegistration]: ...

    def controller_id(self) -> int: ...

    def topics(self) -> dict[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None: ...

    def create_topic(
        self, name: str, replicas: dict[int, list[int]], configs: dict[str, str]
    ) -> TopicMetadata:
        """Raises TopicExistsError. Partition states start with the first replica leading,
        epoch 0, the full replica list in sync."""
        ...

    def delete_topic(self, name: str) -> None:
        """Raises UnknownTopicError."""
        ...

    def add_partitions(self, name: str, replicas: dict[int, list[int]]) -> TopicMetadata: ...

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None: ...

    def set_partition_state(self, name: str, partition: int, state: PartitionState) -> None: ...

    def allocate_producer_ids(self, count: int) -> int:
        """Reserve ``count`` producer ids never handed out before; returns the first
        (Kafka's ``/latest_producer_id_block``)."""
        ...

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after any metadata change (topics, states, brokers)."""
        ...
