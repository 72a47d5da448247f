"""The topic operations of CreateTopics, DeleteTopics, CreatePartitions and AlterConfigs:
each checked first (the name, the counts, an assignment, the configs, the partition limits),
written to the coordination metadata, then applied here before the answer (the replica
manager hosts what the metadata now says), as Kafka's ``ZkAdminManager`` does."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Protocol

from tierlog.broker.coordination.api import (
    Coordinator,
    TopicCollisionError,
    TopicExistsError,
    TopicMetadata,
)
from tierlog.broker.replication.partition_limits import (
    PartitionCount,
    PartitionLimits,
    check_request,
)
from tierlog.broker.replication.replica_assignment import assign_replicas, check_assignment
from tierlog.broker.replication.topic_error import (
    INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    INVALID_TOPIC_EXCEPTION,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION,
    TopicError,
)
from tierlog.local.config import LogConfig
from tierlog.local.log_manager import LogManager, colliding_topics, validate_topic_name

log = logging.getLogger(__name__)


class AppliedTopics(Protocol):
    """What topic operations ask of the replica manager."""

    log_manager: LogManager

    def topic_config(self, overrides: Mapping[str, str]) -> LogConfig: ...

    async def apply_topics(self, names: Collection[str]) -> None: ...


class TopicAdmin:
    """Topic operations on the coordination metadata, applied through ``replicas``.

    Args:
        replicas: the replica manager (effective configs, applying what changed).
        coordinator: the coordination metadata (single node or ZooKeeper).
        limits: how many partitions a request, this broker and the cluster may hold.
    """

    def __init__(
        self, replicas: AppliedTopics, coordinator: Coordinator, limits: PartitionLimits
    ) -> None:
        self._replicas = replicas
        self._coordinator = coordinator
        self.limits = limits

    def plan_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        *,
        replicas: dict[int, list[int]] | None = None,
        count: PartitionCount | None = None,
    ) -> dict[int, list[int]]:
        """CreateTopics' checks, nothing created: the name, the counts, an explicit
        assignment, the configs, and the partition limits (``partition_limits``; the
        topic is added to ``count``, one request's running count, when given). Returns
        the replica assignment to create.

        Raises:
            TopicError, PartitionLimitError: with the Kafka error code to answer.
        """
        try:
            validate_topic_name(name)
        except ValueError as exc:
            raise TopicError(INVALID_TOPIC_EXCEPTION, str(exc)) from None
        if self._coordinator.topic(name) is not None:
            raise TopicError(TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        colliding = colliding_topics(name, self._coordinator.topics())
        if colliding:
            raise TopicError(INVALID_TOPIC_EXCEPTION, str(TopicCollisionError(name, colliding)))
        if replicas is None:
            if partitions < 1:
                raise TopicError(INVALID_PARTITIONS, f"partitions must be >= 1, got {partitions}")
            if replication_factor < 1:
                raise TopicError(
                    INVALID_REPLICATION_FACTOR,
                    f"replication factor must be >= 1, got {replication_factor}",
                )
            # Refused before a replica is placed: a million-partition topic is not built
            # to be counted (Kafka 4 checks before its ReplicaPlacer too, KAFKA-17870).
            check_request(partitions)
            replicas = assign_replicas(self._coordinator.brokers(), partitions, replication_factor)
        else:
            check_request(len(replicas))
            check_assignment(replicas, {b.broker_id for b in self._coordinator.brokers()})
        self._replicas.topic_config(configs)
        (count or self.limits.count(self._coordinator.topics())).add(name, replicas)
        return replicas

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
        replicas: dict[int, list[int]] | None = None,
    ) -> TopicMetadata | None:
        count = self.limits.count(self._coordinator.topics())
        replicas = self.plan_topic(
            name, partitions, replication_factor, configs, replicas=replicas, count=count
        )
        if validate_only:
            return None
        with count.held():
            try:
                topic = await self._coordinator.create_topic(name, replicas, dict(configs))
            except TopicExistsError:
                # Another broker created it first (its cache and ours differ for a moment).
                raise TopicError(TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists") from None
            except TopicCollisionError as exc:
                raise TopicError(INVALID_TOPIC_EXCEPTION, str(exc)) from None
        await self._replicas.apply_topics([name])
        log.info("created topic %s (%d partitions)", name, topic.partitions)
        return topic

    async def delete_topic(self, name: str) -> None:
        if self._coordinator.topic(name) is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        await self._coordinator.delete_topic(name)
        # Only this topic: its partitions are dropped first thing, and nothing else is
        # hosted on the way (a full disk, where hosting fails: issue 20, item 9).
        try:
            await self._replicas.apply_topics([name])
        except OSError as exc:
            # Deleted; what failed is hosting another topic the drain took on meanwhile.
            log.warning("deleted topic %s; hosting other partitions failed: %s", name, exc)
        log.info("deleted topic %s", name)

    async def add_partitions(
        self,
        name: str,
        total: int,
        *,
        validate_only: bool = False,
        assignments: list[list[int]] | None = None,
    ) -> None:
        """Grow ``name`` to ``total`` partitions; ``assignments`` (one replica list per new
        partition) used to be ignored, so a CreatePartitions naming unknown brokers
        succeeded. Now it is checked as Kafka checks it and honoured."""
        topic = self._coordinator.topic(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if total <= topic.partitions:
            raise TopicError(
                INVALID_PARTITIONS,
                f"topic {name!r} has {topic.partitions} partitions; the count can "
                f"only grow, asked for {total}",
            )
        check_request(total - topic.partitions)  # before a replica is placed
        rf = len(topic.replicas[0])
        if assignments is not None:
            if len(assignments) != total - topic.partitions:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"adding {total - topic.partitions} partitions but "
                    f"{len(assignments)} assignments were given",
                )
            new = {topic.partitions + n: list(ids) for n, ids in enumerate(assignments)}
            live = {b.broker_id for b in self._coordinator.brokers()}
            check_assignment(new, live, first_partition=topic.partitions)
            if len(new[topic.partitions]) != rf:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"topic {name!r} has replication factor {rf}; the assignment has "
                    f"{len(new[topic.partitions])}",
                )
        else:
            new = assign_replicas(
                self._coordinator.brokers(),
                total - topic.partitions,
                rf,
                first_partition=topic.partitions,
            )
        count = self.limits.count(self._coordinator.topics())
        count.add(name, new)
        if validate_only:
            return
        with count.held():
            await self._coordinator.add_partitions(name, new)
        await self._replicas.apply_topics([name])

    async def set_topic_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        if self._coordinator.topic(name) is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        config = self._replicas.topic_config(configs)
        if validate_only:
            return
        await self._coordinator.set_topic_configs(name, dict(configs))
        self._replicas.log_manager.update_config(name, config)
