"""The internal topic ``__consumer_offsets``: created on first use (FindCoordinator, as in
Kafka), replayed into the group coordinator when this broker leads its partitions, and the
append path the coordinator writes offset commits and group metadata through (classic
groups' and KIP-848 consumer groups' records alike).

It also gives the consumer protocol its view of the cluster's topics (``ClusterTopics``):
ids, partition counts and a version, rebuilt after each metadata change, so that regex
subscriptions are resolved again when topics are created or deleted.

The coordinator's transactional offset commits go through ``append`` too (the batch
carries the producer id and epoch; the log takes it as the coordinator's own write), and
the transaction markers the WriteTxnMarkers handler appends to these partitions are read
back when a partition is loaded (``read_batches``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

from tierlog.broker import internal_topics
from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import BrokerRegistration, Coordinator, MetadataChange
from tierlog.broker.errors import error_code
from tierlog.broker.group import AppendError, GroupConfig, GroupCoordinator, partition_for
from tierlog.broker.group.consumer.config import ConsumerGroupConfig
from tierlog.broker.group.consumer.topics import TopicInfo, TopicsImage, image_of
from tierlog.broker.group.manager import LogBatch
from tierlog.broker.group.placement import OFFSETS_TOPIC
from tierlog.broker.replication.partition import Partition
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.local.log import Log
from tierlog.protocol.errors import ErrorCode
from tierlog.records.reader import decode_batch
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)

__all__ = ["OFFSETS_TOPIC", "OffsetsTopic", "read_batches"]


def read_batches(topic_log: Log, end_offset: int) -> Iterator[LogBatch]:
    """Every batch of a log below ``end_offset`` as ``(header, records)``, control batches
    included: the loader needs the transaction markers to settle transactional offset
    commits (KIP-98), and the headers to know which producer wrote what."""
    for segment, position, header in topic_log.batches(topic_log.log_start_offset):
        if header.base_offset >= end_offset:
            return
        yield decode_batch(os.pread(segment.fd, header.size, position))


class ClusterTopics:
    """The cluster's topics as the consumer group protocol sees them (a ``TopicsImage``
    whose version is derived from the topics, ``content_version``), built on first use
    after each topic change."""

    def __init__(self, cluster: Coordinator) -> None:
        self._cluster = cluster
        self._image: TopicsImage | None = None

    def changed(self, change: MetadataChange | None) -> None:
        """A ``Coordinator.on_change`` listener: partition state changes keep the image."""
        if change is None or change.topics:
            self._image = None

    def __call__(self) -> TopicsImage:
        image = self._image
        if image is None:
            image = self._image = image_of(
                TopicInfo(t.topic_id, t.name, t.partitions) for t in self._cluster.topics().values()
            )
        return image


class OffsetsTopic:
    """Args:
    config: the broker's configuration (offsets.topic.*, group.* keys).
    cluster: the coordination metadata (where the topic's partition leaders are).
    replicas: the partitions hosted here (the topic's logs, appends, creation).
    """

    def __init__(
        self,
        config: BrokerConfig,
        cluster: Coordinator,
        replicas: ReplicaManager,
        *,
        clock: Clock,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.replicas = replicas
        self.partitions = config["offsets.topic.num.partitions"]
        self.topics = ClusterTopics(cluster)
        cluster.on_change(self.topics.changed)
        self.groups = GroupCoordinator(
            self.append,
            config=GroupConfig.from_properties(config.values),
            clock=clock,
            consumer_config=ConsumerGroupConfig.from_properties(config.values),
            topics=self.topics,
        )

    @property
    def exists(self) -> bool:
        return self.cluster.topic(OFFSETS_TOPIC) is not None

    async def ensure_created(self) -> None:
        config = self.config
        await internal_topics.ensure_created(
            self.replicas,
            self.cluster,
            OFFSETS_TOPIC,
            self.partitions,
            config["offsets.topic.replication.factor"],
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(config["offsets.topic.segment.bytes"]),
                # Kafka's offsetsTopicConfigs: kept as written, whatever the broker's
                # default compression.type (no recompression of the coordinator's writes).
                "compression.type": "producer",
            },
        )

    def on_leadership_change(self, partition: Partition) -> None:
        """A group's coordinator is the leader of its offsets partition: load the groups
        of a partition this broker now leads, drop those of one it stopped leading (Kafka's
        GroupCoordinator.onElection / onResignation)."""
        if partition.topic != OFFSETS_TOPIC:
            return
        if partition.is_leader:
            self.groups.begin_loading(partition.index)
            # To the log end, not the high watermark, as Kafka's GroupMetadataManager loads:
            # a new leader learns the high watermark from its followers only later, and
            # what it has is now the partition's history.
            loaded = self.groups.load_partition(
                partition.index, read_batches(partition.local, partition.local.log_end_offset)
            )
            log.info("loaded %d consumer groups from %s", loaded, partition)
        else:
            self.groups.unload_partition(partition.index)

    async def coordinator_node(self, group_id: str) -> BrokerRegistration | None:
        """The broker leading the group's offsets partition (creating the topic first), or
        None for COORDINATOR_NOT_AVAILABLE: the client asks again (a failure to create or
        host the topic answers so too, rather than closing the connection)."""
        try:
            await self.ensure_created()
        except Exception as exc:
            log.warning("cannot create %s (will retry on the next request): %s", OFFSETS_TOPIC, exc)
            return None
        topic = self.cluster.topic(OFFSETS_TOPIC)
        if topic is None:
            return None
        index = partition_for(group_id, topic.partitions)
        return internal_topics.leader_node(self.replicas, self.cluster, OFFSETS_TOPIC, index)

    async def append(self, partition: int, records: bytes) -> None:
        """The group coordinator's write: acknowledged once the whole ISR has it (Kafka's
        ``offsets.commit.required.acks=-1``), so committed offsets and group metadata
        survive a coordinator failover. Answering after the local append alone lost a
        commit whenever the coordinator died before its followers fetched it, and the
        new leader was a replica that had not."""
        if self.replicas.partition(OFFSETS_TOPIC, partition) is None:
            raise AppendError(int(ErrorCode.not_leader_or_follower))
        try:
            hosted, info = self.replicas.append_records(
                OFFSETS_TOPIC, partition, records, -1, internal_allowed=True
            )
        except Exception as exc:
            raise AppendError(error_code(exc), str(exc)) from exc
        timeout_s = self.config["offsets.commit.timeout.ms"] / 1000
        code = await hosted.wait_for_replication(info.last_offset + 1, timeout_s)
        if code:
            raise AppendError(code, f"{OFFSETS_TOPIC}-{partition}: not replicated (error {code})")

    async def expire_offsets(self) -> None:
        removed = await self.groups.cleanup_expired_offsets()
        if removed:
            log.info("expired %d committed offsets", removed)
