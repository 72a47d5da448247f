"""The internal topic ``__consumer_offsets``: created on first use (FindCoordinator, as in
Kafka), replayed into the group coordinator when this broker leads its partitions, and the
append path the coordinator writes offset commits and group metadata through.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tierlog.broker.coordination.api import BrokerRegistration
from tierlog.broker.group import AppendError, GroupConfig, GroupCoordinator, partition_for
from tierlog.broker.handlers.errors import error_code
from tierlog.local.log import Log
from tierlog.records.reader import DecodedRecord, iter_records

if TYPE_CHECKING:
    from tierlog.broker.broker import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


def read_records(topic_log: Log) -> Iterator[DecodedRecord]:
    """Every data record of a log below its high watermark (control batches skipped)."""
    for segment, position, header in topic_log.batches(topic_log.log_start_offset):
        if header.base_offset >= topic_log.high_watermark:
            return
        if header.is_control:
            continue
        yield from iter_records(os.pread(segment.fd, header.size, position))


class OffsetsTopic:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.partitions = config["offsets.topic.num.partitions"]
        self.groups = GroupCoordinator(
            self.append, config=GroupConfig.from_properties(config.values), clock=broker.clock
        )

    @property
    def exists(self) -> bool:
        return self.broker.coordinator.topic(OFFSETS_TOPIC) is not None

    def ensure_created(self) -> None:
        if self.exists:
            return
        config = self.broker.config
        self.broker.replicas.create_topic(
            OFFSETS_TOPIC,
            self.partitions,
            config["offsets.topic.replication.factor"],
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(config["offsets.topic.segment.bytes"]),
            },
        )
        self.load_led_partitions()

    def load_led_partitions(self) -> None:
        """Replay every partition this broker leads into the coordinator."""
        loaded = 0
        for p in range(self.partitions):
            partition = self.broker.replicas.partition(OFFSETS_TOPIC, p)
            if partition is None or not partition.is_leader:
                continue
            self.groups.begin_loading(p)
            loaded += self.groups.load_partition(p, read_records(partition.log))
        log.info("loaded %d consumer groups from %s", loaded, OFFSETS_TOPIC)

    def coordinator_node(self, group_id: str) -> BrokerRegistration | None:
        """The broker leading the group's offsets partition (creating the topic first)."""
        self.ensure_created()
        topic = self.broker.coordinator.topic(OFFSETS_TOPIC)
        assert topic is not None
        state = topic.partition_states[partition_for(group_id, topic.partitions)]
        return next(
            (b for b in self.broker.coordinator.brokers() if b.broker_id == state.leader), None
        )

    async def append(self, partition: int, records: bytes) -> None:
        target = self.broker.replicas.partition(OFFSETS_TOPIC, partition)
        if target is None:
            raise AppendError(int(error_code_not_leader()))
        try:
            target.append(records, -1, 1)
        except Exception as exc:
            raise AppendError(error_code(exc), str(exc)) from exc

    async def expire_offsets(self) -> None:
        removed = await self.groups.cleanup_expired_offsets()
        if removed:
            log.info("expired %d committed offsets", removed)


def error_code_not_leader() -> int:
    from tierlog.protocol.errors import ErrorCode

    return int(ErrorCode.not_leader_or_follower)
