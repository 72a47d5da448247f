"""The partitions this broker hosts, kept in line with the coordination metadata; the
record operations handlers ask of them (append, delete records); the topic-level operations
that change them (create, delete, add partitions, alter configs); and the high-watermark
checkpoint (Kafka's ``replication-offset-checkpoint`` in every log dir).

Topic configuration: a topic's effective ``LogConfig`` is the broker's ``log.*`` defaults
overlaid with the topic's overrides (Kafka names), validated before anything is stored.
Not thread-safe: used from the broker's event loop.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Mapping
from pathlib import Path

from tierlog.broker.coordination.api import (
    BrokerRegistration,
    Coordinator,
    TopicMetadata,
)
from tierlog.broker.partition import Partition
from tierlog.local.checkpoint import CorruptCheckpointError, read_offsets, write_offsets
from tierlog.local.config import LogConfig
from tierlog.local.log import AppendInfo
from tierlog.local.log_manager import LogManager, TopicPartition, validate_topic_name
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.remote.unified_log import UnifiedLog

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets"})
# Kafka's name and format (version 0, a count, then "topic partition offset" lines).
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"


class TopicError(Exception):
    """A topic operation refused; ``code`` is the Kafka error code to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# Kafka error codes used here.
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40


def assign_replicas(
    brokers: list[BrokerRegistration],
    partitions: int,
    replication_factor: int,
    first_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Round-robin from a random start, followers on the next brokers (Kafka's
    ``AdminUtils.assignReplicasToBrokers`` without racks)."""
    ids = sorted(b.broker_id for b in brokers)
    if replication_factor > len(ids):
        raise TopicError(
            INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the "
            f"{len(ids)} available broker(s)",
        )
    rng = rng or random.Random()
    start = rng.randrange(len(ids))
    shift = rng.randrange(len(ids))
    out = {}
    for n in range(partitions):
        p = first_partition + n
        if n > 0 and n % len(ids) == 0:
            shift += 1
        first = (start + n) % len(ids)
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (len(ids) - 1)) % len(ids)])
        out[p] = replicas
    return out


def check_assignment(
    replicas: Mapping[int, list[int]], live: set[int], first_partition: int = 0
) -> None:
    """Kafka's checks of an explicit replica assignment (CreateTopics, CreatePartitions):
    partitions ``first_partition``.. consecutive, each with at least one replica, no broker
    twice, the same count everywhere, only known brokers. Without them, CreateTopics with
    partitions {0, 5} or {1} stored a topic whose partitions were not 0..n-1 (and then
    failed with a KeyError), and [0, 0] made a replication factor of 2 on one broker.

    Raises:
        TopicError: INVALID_REPLICA_ASSIGNMENT naming the problem.
    """
    if sorted(replicas) != list(range(first_partition, first_partition + len(replicas))):
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT,
            f"partitions {sorted(replicas)} are not consecutive from {first_partition}",
        )
    for p, ids in replicas.items():
        if not ids:
            raise TopicError(INVALID_REPLICA_ASSIGNMENT, f"partition {p} has no replicas")
        if len(set(ids)) != len(ids):
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT, f"partition {p}: duplicate brokers in {ids}"
            )
    if len({len(ids) for ids in replicas.values()}) > 1:
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT, "all partitions must have the same number of replicas"
        )
    unknown = {b for ids in replicas.values() for b in ids} - live
    if unknown:
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT, f"unknown broker(s) {sorted(unknown)} in assignment"
        )


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        coordinator: Coordinator,
        default_log_config: LogConfig,
        remote: RemoteLogManager | None = None,
        *,
        remote_storage_system_enabled: bool = True,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.coordinator = coordinator
        self.default_log_config = default_log_config
        self.remote = remote
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.remote_storage_system_enabled = remote_storage_system_enabled
        self._by_id: dict[uuid.UUID, str] = {}
        self._checkpointed_high_watermarks = self._read_high_watermarks()
        log_manager.committed_offset = self._committed_offset

    # -- high watermarks -----------------------------------------------------------------

    def _read_high_watermarks(self) -> dict[TopicPartition, int]:
        found: dict[TopicPartition, int] = {}
        for log_dir in self.log_manager.log_dirs:
            try:
                found.update(read_offsets(log_dir / HIGH_WATERMARK_FILE))
            except CorruptCheckpointError as exc:
                # A leader recomputes its high watermark from the ISR; a follower learns
                # it from its leader's next fetch response. Nothing is lost.
                log.warning("%s; high watermarks start from the log start", exc)
        return found

    def checkpoint_high_watermarks(self) -> None:
        """Write each log dir's ``replication-offset-checkpoint`` (Kafka does it every
        replica.high.watermark.checkpoint.interval.ms and at shutdown)."""
        by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_manager.log_dirs}
        for tp, partition in self.partitions.items():
            if self.log_manager.get_log(*tp) is partition.local:
                by_dir[self.log_manager.log_dir_of(*tp)][tp] = partition.high_watermark
        for log_dir, offsets in by_dir.items():
            write_offsets(log_dir / HIGH_WATERMARK_FILE, offsets)

    def _committed_offset(self, tp: TopicPartition) -> int | None:
        partition = self.partitions.get(tp)
        # A log with no partition (being deleted) keeps nothing anyone may read.
        return partition.high_watermark if partition is not None else None

    # -- configuration -------------------------------------------------------------------

    def topic_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """Effective config; raises TopicError(INVALID_CONFIG) naming the bad key."""
        try:
            config = self.default_log_config.with_overrides(overrides)
        except ValueError as exc:
            raise TopicError(INVALID_CONFIG, str(exc)) from None
        if config.remote_storage_enable and not self.remote_storage_system_enabled:
            # Kafka refuses it too: nothing would ever offload, so nothing local could go.
            raise TopicError(
                INVALID_CONFIG,
                "config 'remote.storage.enable': the broker's "
                "remote tier is off (remote.log.storage.system.enable=false)",
            )
        return config

    # -- metadata -> partitions ----------------------------------------------------------

    def sync(self) -> None:
        """Host every partition the metadata assigns here; drop (and delete the logs of)
        topics that no longer exist. Called at start-up and after metadata changes."""
        topics = self.coordinator.topics()
        self._by_id = {t.topic_id: name for name, t in topics.items()}
        for name, topic in topics.items():
            config = self.topic_config(topic.configs)
            for p, replicas in topic.replicas.items():
                if self.broker_id not in replicas or (name, p) in self.partitions:
                    continue
                topic_log = self.log_manager.get_or_create_log(name, p, config)
                topic_log.config = config
                state = topic.partition_states[p]
                if state.leader == self.broker_id:
                    # Kafka's Partition.makeLeader: the leader's epoch starts at its log end
                    # now, not at its first append. Without it an empty partition answered
                    # OffsetForLeaderEpoch(current epoch) with (-1, -1), which a consumer
                    # validating its position (KIP-320) takes for log truncation.
                    topic_log.leader_epoch_cache.assign(
                        state.leader_epoch, topic_log.log_end_offset
                    )
                self.partitions[(name, p)] = Partition(
                    name,
                    topic.topic_id,
                    p,
                    UnifiedLog(topic_log, self.remote, name, p),
                    state,
                    self.broker_id,
                    high_watermark=self._checkpointed_high_watermarks.get((name, p), 0),
                )
        for name, p in list(self.partitions):
            if name not in topics:
                del self.partitions[(name, p)]
                self.log_manager.delete_log(name, p)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._by_id.get(topic_id)

    # -- record operations ---------------------------------------------------------------

    def _hosted(self, topic: str, index: int, *, internal_allowed: bool) -> Partition:
        if topic in INTERNAL_TOPICS and not internal_allowed:
            # Kafka's ReplicaManager.appendToLocalLog: only the broker itself writes to
            # internal topics; a client's batch in __consumer_offsets would corrupt every
            # group's committed offsets.
            raise TopicError(INVALID_TOPIC_EXCEPTION, f"cannot write to internal topic {topic}")
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {topic}-{index}")
        return partition

    def append_records(
        self,
        topic: str,
        index: int,
        records: bytes | memoryview,
        acks: int,
        *,
        internal_allowed: bool = False,
    ) -> tuple[Partition, AppendInfo]:
        """Append a producer's batches to a partition this broker leads."""
        partition = self._hosted(topic, index, internal_allowed=internal_allowed)
        info = partition.append(records, acks, partition.local.config.min_insync_replicas)
        return partition, info

    async def delete_records(self, topic: str, index: int, offset: int) -> int:
        """DeleteRecords: returns the new low watermark, checkpointed at once so a crash
        cannot bring the deleted records back."""
        partition = self._hosted(topic, index, internal_allowed=False)
        low_watermark = await partition.delete_records(offset)
        self.log_manager.checkpoint()
        return low_watermark

    # -- topic operations ----------------------------------------------------------------

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
        try:
            validate_topic_name(name)
        except ValueError as exc:
            raise TopicError(INVALID_TOPIC_EXCEPTION, str(exc)) from None
        if self.coordinator.topic(name) is not None:
            raise TopicError(TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if replicas is None:
            if partitions < 1:
                raise TopicError(INVALID_PARTITIONS, f"partitions must be >= 1, got {partitions}")
            if replication_factor < 1:
                raise TopicError(
                    INVALID_REPLICATION_FACTOR,
                    f"replication factor must be >= 1, got {replication_factor}",
                )
            replicas = assign_replicas(self.coordinator.brokers(), partitions, replication_factor)
        else:
            check_assignment(replicas, {b.broker_id for b in self.coordinator.brokers()})
        self.topic_config(configs)
        if validate_only:
            return None
        topic = await self.coordinator.create_topic(name, replicas, dict(configs))
        self.sync()
        log.info("created topic %s (%d partitions)", name, topic.partitions)
        return topic

    async def delete_topic(self, name: str) -> None:
        if self.coordinator.topic(name) is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        await self.coordinator.delete_topic(name)
        self.sync()
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
        topic = self.coordinator.topic(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if total <= topic.partitions:
            raise TopicError(
                INVALID_PARTITIONS,
                f"topic {name!r} has {topic.partitions} partitions; the count can "
                f"only grow, asked for {total}",
            )
        rf = len(topic.replicas[0])
        if assignments is not None:
            if len(assignments) != total - topic.partitions:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"adding {total - topic.partitions} partitions but "
                    f"{len(assignments)} assignments were given",
                )
            new = {topic.partitions + n: list(ids) for n, ids in enumerate(assignments)}
            live = {b.broker_id for b in self.coordinator.brokers()}
            check_assignment(new, live, first_partition=topic.partitions)
            if len(new[topic.partitions]) != rf:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"topic {name!r} has replication factor {rf}; the assignment has "
                    f"{len(new[topic.partitions])}",
                )
        else:
            new = assign_replicas(
                self.coordinator.brokers(),
                total - topic.partitions,
                rf,
                first_partition=topic.partitions,
            )
        if validate_only:
            return
        await self.coordinator.add_partitions(name, new)
        self.sync()

    async def set_topic_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        if self.coordinator.topic(name) is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        config = self.topic_config(configs)
        if validate_only:
            return
        await self.coordinator.set_topic_configs(name, dict(configs))
        self.log_manager.update_config(name, config)
