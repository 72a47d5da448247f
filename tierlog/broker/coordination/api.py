"""The coordination interface a broker needs, and its data types and errors.

It holds what Kafka keeps in ZooKeeper (pre-KRaft layout, DESIGN.md "Cluster"): live brokers,
the controller, each topic's id, replica assignment and config overrides, and each
partition's state (leader, leader epoch, ISR). Implementations: ``local.LocalCoordinator``
(one node, a JSON file in the data dir) and ``zookeeper.ZkCoordinator`` (cluster mode).
Reads come from a cache and never block; writes are coroutines (ZooKeeper writes run off
the event loop) and return once they are durable.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

# The config entity type of client-metrics subscriptions (KIP-714), Kafka's ConfigType name.
CLIENT_METRICS_ENTITY = "client-metrics"
# Dynamic broker configs (KIP-226), Kafka's ConfigType.BROKER: one entity per broker id, and
# the cluster-wide defaults under Kafka's ConfigEntityName.DEFAULT, "<default>".
BROKERS_ENTITY = "brokers"
DEFAULT_BROKER_ENTITY = "<default>"


class CoordinationError(Exception):
    """Base class."""


class TopicExistsError(CoordinationError):
    pass


class UnknownTopicError(CoordinationError):
    pass


class TopicCollisionError(CoordinationError):
    """The name equals existing topics' once '.' is read as '_' (Kafka's
    ``Topic.hasCollision``; ``tierlog.local.log_manager.colliding_topics``). The message
    is Kafka's (``AdminZkClient.validateTopicCreate``)."""

    def __init__(self, topic: str, colliding: list[str]) -> None:
        super().__init__(f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}")
        self.topic = topic
        self.colliding = colliding


class PropagationTimeoutError(CoordinationError):
    """A write was made, but the metadata cache did not show it within the wait the caller
    gave. The change stands (it is in the store, and every broker applies it when its watch
    fires); only the wait ended. Kafka answers REQUEST_TIMED_OUT for it (its
    ``DelayedCreatePartitions`` expiring)."""

    code = 7  # REQUEST_TIMED_OUT (a number here: see tierlog/broker/errors.py)


class AlterPartitionError(CoordinationError):
    """An ISR change refused by the controller; ``code`` is Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class RegisteredEndpoint:
    """One advertised listener of a broker (an entry of ``/brokers/ids/<id>``'s
    ``endpoints``, with its ``listener_security_protocol_map`` protocol)."""

    listener: str
    security_protocol: str
    host: str
    port: int


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker. ``host``/``port``: where other brokers reach it (its inter-broker
    listener; in ZooKeeper, the top-level host/port of its first PLAINTEXT endpoint, as
    Kafka writes). ``endpoints``: every advertised listener (KIP-103); empty for a
    registration that names only host/port, which then serves every listener name."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[RegisteredEndpoint, ...] = ()

    def address_on(self, listener: str) -> tuple[str, int] | None:
        """Where clients of ``listener`` reach this broker; None if it has no such
        listener (Kafka leaves such a broker out of Metadata). ``""``: host/port."""
        if not listener or not self.endpoints:
            return (self.host, self.port)
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return (endpoint.host, endpoint.port)
        return None


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


@dataclass(frozen=True)
class MetadataChange:
    """What one update of the cache changed, for listeners that apply only that
    (``Coordinator.on_change``; a listener given None applies everything).

    ``topics``: created, deleted, or with a new assignment, topic id or configs: apply the
    whole topic. ``partitions``: only the partition's state (leader, ISR, epochs) is new.
    Brokers, the controller and client quotas are read from the cache when needed and are
    not listed."""

    topics: frozenset[str] = frozenset()
    partitions: frozenset[tuple[str, int]] = frozenset()


class UserConfigs(Protocol):
    """Users' entity configs (Kafka's ``/config/users/<user>``): SCRAM credentials, by
    mechanism name (``SCRAM-SHA-256`` -> ``salt=..,stored_key=..,server_key=..,iterations=..``).
    ZooKeeper: the znode Kafka's tools write, beside the user's quotas, announced with a
    config change; single node: the metadata store (``local_security``)."""

    async def describe(self, users: list[str] | None = None) -> dict[str, dict[str, str]]:
        """The configs of ``users`` (every user with a config when None); users without
        one are left out."""
        ...

    async def alter(
        self, user: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Replace ``user``'s config by ``change(current)`` atomically against other
        writers, durably; returns it."""
        ...


class Coordinator(Protocol):
    cluster_id: str

    async def start(self, me: BrokerRegistration) -> None:
        """Register this broker (it is live from now on)."""
        ...

    async def stop(self) -> None: ...

    def brokers(self) -> list[BrokerRegistration]: ...

    def controller_id(self) -> int: ...

    def topics(self) -> dict[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None: ...

    async def create_topic(
        self,
        name: str,
        replicas: dict[int, list[int]],
        configs: dict[str, str],
        wait_s: float | None = None,
    ) -> TopicMetadata:
        """Raises TopicExistsError. Partition states start with the first replica leading,
        epoch 0, the full replica list in sync. Returns once this broker's cache shows the
        topic's leaders, waiting at most ``wait_s`` (None: the coordinator's own bound);
        PropagationTimeoutError when that passes (the topic is created all the same)."""
        ...

    async def delete_topic(self, name: str) -> None:
        """Raises UnknownTopicError."""
        ...

    async def add_partitions(self, name: str, replicas: dict[int, list[int]]) -> TopicMetadata: ...

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None: ...

    def client_quotas(self) -> dict[str, dict[str, float]]:
        """Client quotas in force: entity path (``clients/app``, Kafka's ZooKeeper layout
        under ``/config``) -> quota key -> value."""
        ...

    async def set_client_quotas(self, entity: str, values: dict[str, float]) -> None:
        """Replace the quotas of ``entity`` (an empty dict removes the entity)."""
        ...

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Configs of every entity of ``entity_type`` other than topics and quotas
        (``client-metrics``, Kafka's ``/config/<type>/<name>`` layout): name -> key ->
        value; entities without configs are left out."""
        ...

    async def set_entity_configs(
        self, entity_type: str, name: str, configs: dict[str, str]
    ) -> None:
        """Replace the configs of one entity (an empty dict removes it); returns once this
        broker sees the change."""
        ...

    async def alter_partition(
        self,
        name: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        isr: list[int],
        partition_epoch: int,
    ) -> PartitionState:
        """A leader's ISR change (AlterPartition, KIP-497), checked against the stored state:
        the leader, its epoch and the partition epoch must be current.

        Raises:
            AlterPartitionError: refused, with the Kafka error code to act on.
        """
        ...

    async def allocate_producer_ids(self, count: int) -> int:
        """Reserve ``count`` producer ids never handed out before; returns the first
        (Kafka's ``/latest_producer_id_block``)."""
        ...

    async def wait_for_topics(
        self, predicate: Callable[[dict[str, TopicMetadata]], bool], timeout_s: float
    ) -> bool:
        """Wait until ``predicate(topics())`` holds as this broker sees the metadata (its
        cache, in a cluster); False if it does not within ``timeout_s``."""
        ...

    def on_change(self, callback: Callable[[MetadataChange | None], None]) -> None:
        """Call ``callback`` after any metadata change (topics, states, brokers), with what
        changed, or None when anything may have (start-up, a full re-read)."""
        ...
