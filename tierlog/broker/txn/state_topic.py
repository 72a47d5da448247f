"""The internal topic ``__transaction_state``: created on first use (FindCoordinator or
InitProducerId for a transactional id, as in Kafka), loaded into the transaction coordinator
when this broker leads a partition of it, and the durable store the coordinator writes
through (acks=all: a state counts once the partition's in-sync replicas have it, so a
coordinator failover never forgets a PrepareCommit).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from tierlog.broker import internal_topics
from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import BrokerRegistration, Coordinator
from tierlog.broker.errors import error_code
from tierlog.broker.replication.partition import Partition
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.broker.txn.coordinator import TransactionCoordinator
from tierlog.broker.txn.log_codec import (
    TxnLogCodecError,
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tierlog.local.log import Log
from tierlog.local.segment import LogSegment
from tierlog.protocol.errors import ErrorCode
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import BatchHeader
from tierlog.records.reader import iter_records

log = logging.getLogger(__name__)
E = ErrorCode

TXN_STATE_TOPIC = "__transaction_state"
WRITE_TIMEOUT_S = 10.0
DEFAULT_LOAD_BUFFER_SIZE = 5 << 20  # Kafka's transaction.state.log.load.buffer.size

# Kafka's TransactionStateManager maps append errors to what a client can act on.
_WRITE_ERRORS = {
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
}


_pread = os.pread  # tests count the reads


@dataclass
class LoadReads:
    """The reads one load made, for its log line: how many, and the largest in bytes."""

    count: int = 0
    largest: int = 0


def read_entries(
    topic_log: Log,
    end_offset: int,
    buffer_size: int = DEFAULT_LOAD_BUFFER_SIZE,
    reads: LoadReads | None = None,
) -> Iterator[tuple[str, TxnLogValue | None]]:
    """Every (transactional id, state or None) of a ``__transaction_state`` log, in order;
    records this coordinator cannot read are logged and skipped.

    The log is read ``buffer_size`` bytes at a time (``transaction.state.log.load.buffer.size``,
    Kafka's loading read), or one whole batch when a batch is larger: consecutive batches
    of a segment are read together. Each read is counted in ``reads`` when given.
    """
    run: list[tuple[int, BatchHeader]] = []  # consecutive batches of ``run_segment``
    run_segment: LogSegment | None = None
    for segment, position, header in topic_log.batches(topic_log.log_start_offset):
        if header.base_offset >= end_offset:
            break
        if run and (
            segment is not run_segment
            or position != run[-1][0] + run[-1][1].size
            or position + header.size - run[0][0] > buffer_size
        ):
            yield from _read_run(topic_log, run_segment, run, reads)
            run = []
        run_segment = segment
        run.append((position, header))
    if run:
        yield from _read_run(topic_log, run_segment, run, reads)


def _read_run(
    topic_log: Log,
    segment: LogSegment | None,
    run: list[tuple[int, BatchHeader]],
    reads: LoadReads | None,
) -> Iterator[tuple[str, TxnLogValue | None]]:
    assert segment is not None
    start = run[0][0]
    size = run[-1][0] + run[-1][1].size - start
    if reads is not None:
        reads.count += 1
        reads.largest = max(reads.largest, size)
    data = memoryview(_pread(segment.fd, size, start))
    for position, header in run:
        if header.is_control:
            continue
        batch = data[position - start : position - start + header.size]
        for record in iter_records(batch):
            if record.key is not None:
                yield from _entry(topic_log, record.offset, record.key, record.value)


def _entry(
    topic_log: Log, offset: int, key: bytes, value: bytes | None
) -> Iterator[tuple[str, TxnLogValue | None]]:
    try:
        transactional_id = decode_key(key)
        decoded = None if value is None else decode_value(value)
    except TxnLogCodecError as exc:
        log.warning("%s: skipping a record at %d: %s", topic_log.name, offset, exc)
        return
    yield transactional_id, decoded


class TransactionStateTopic:
    """Args:
    config: the broker's configuration (transaction.state.log.* keys).
    cluster: the coordination metadata (partition leaders).
    replicas: the partitions hosted here.
    coordinator: the transaction coordinator it loads and serves.
    """

    def __init__(
        self,
        config: BrokerConfig,
        cluster: Coordinator,
        replicas: ReplicaManager,
        coordinator: TransactionCoordinator,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.replicas = replicas
        self.coordinator = coordinator

    @property
    def exists(self) -> bool:
        return self.cluster.topic(TXN_STATE_TOPIC) is not None

    async def ensure_created(self) -> None:
        config = self.config
        await internal_topics.ensure_created(
            self.replicas,
            self.cluster,
            TXN_STATE_TOPIC,
            config["transaction.state.log.num.partitions"],
            config["transaction.state.log.replication.factor"],
            {
                "cleanup.policy": "compact",
                "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
                "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
                # Kafka's transactionTopicConfigs: "no compression types".
                "compression.type": "uncompressed",
            },
        )

    def on_leadership_change(self, partition: Partition) -> None:
        """A transactional id's coordinator is the leader of its partition: load the ids
        of a partition this broker now leads (coordinator epoch = its leader epoch), drop
        those of one it stopped leading."""
        if partition.topic != TXN_STATE_TOPIC:
            return
        if partition.is_leader:
            self.coordinator.begin_loading(partition.index)
            buffer_size = self.config["transaction.state.log.load.buffer.size"]
            reads = LoadReads()
            loaded = self.coordinator.load_partition(
                partition.index,
                partition.leader_epoch,
                read_entries(partition.local, partition.local.log_end_offset, buffer_size, reads),
            )
            log.info(
                "loaded %d transactional ids from %s in %d reads of at most %d bytes"
                " (transaction.state.log.load.buffer.size %d)",
                loaded,
                partition,
                reads.count,
                reads.largest,
                buffer_size,
            )
        else:
            self.coordinator.unload_partition(partition.index)

    async def coordinator_node(self, transactional_id: str) -> BrokerRegistration | None:
        """The broker leading the id's partition (creating the topic first), or None for
        COORDINATOR_NOT_AVAILABLE: the client asks again."""
        try:
            await self.ensure_created()
        except Exception as exc:
            log.warning("cannot create %s (will retry): %s", TXN_STATE_TOPIC, exc)
            return None
        index = self.coordinator.partition_for(transactional_id)
        return internal_topics.leader_node(self.replicas, self.cluster, TXN_STATE_TOPIC, index)

    async def write(
        self, index: int, coordinator_epoch: int, transactional_id: str, value: TxnLogValue | None
    ) -> int:
        """Store one id's state (None: a tombstone); 0 once the in-sync replicas have it."""
        partition = self.replicas.partition(TXN_STATE_TOPIC, index)
        # Leadership lost and regained reloads the partition with the new epoch; an epoch
        # bumped while this broker stayed leader (a reassignment) changes nothing for it.
        if (
            partition is None
            or not partition.is_leader
            or partition.leader_epoch < coordinator_epoch
        ):
            return E.not_coordinator
        batch = build_batch(
            [
                Record(
                    key=encode_key(transactional_id),
                    value=None if value is None else encode_value(value),
                    timestamp=partition.now_ms(),
                )
            ]
        )
        try:
            _, info = self.replicas.append_records(
                TXN_STATE_TOPIC, index, batch, -1, internal_allowed=True
            )
        except Exception as exc:
            code = error_code(exc)
            return _WRITE_ERRORS.get(code, code)  # type: ignore[call-overload]
        code = await partition.wait_for_replication(info.last_offset + 1, WRITE_TIMEOUT_S)
        return _WRITE_ERRORS.get(code, code)  # type: ignore[call-overload]
