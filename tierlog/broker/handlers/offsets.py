"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.errors import error_code
from tierlog.broker.handlers.fetch import remote_tier_unknown
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.broker.partition import Partition
from tierlog.broker.replica_manager import INTERNAL_TOPICS
from tierlog.local.errors import OffsetOutOfRangeError
from tierlog.local.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field
from tierlog.remote.api import RemoteStorageUnavailableError

if TYPE_CHECKING:
    from tierlog.broker.broker import Broker

# KIP-405/KIP-1005 special timestamps: earliest local offset, latest tiered offset.
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


def epoch_at(partition: Partition, offset: int) -> int:
    """The leader epoch in force at ``offset`` (the cache's last entry starting at or
    before it), for ListOffsets v4+."""
    epoch = -1
    for entry in partition.log.leader_epoch_cache.entries:
        if entry.start_offset > offset:
            break
        epoch = entry.epoch
    return epoch


async def list_offset(broker: Broker, partition: Partition, timestamp: int) -> tuple[int, int]:
    """``(offset, timestamp)`` answering one ListOffsets query; (-1, -1) when none.

    With the remote tier, earliest is the whole log's start (remote), -4 the local log
    start, -5 the last offset in the remote tier, -6 the first not uploaded yet (KIP-405,
    KIP-1005), and timestamp lookups search remote-only segments first.
    """
    log = partition.log
    hw = log.high_watermark
    tiered = broker.remote.get(partition.topic, partition.index) if broker.remote else None
    if timestamp == LATEST_TIMESTAMP:
        return hw, -1
    if (
        (timestamp == EARLIEST_TIMESTAMP or timestamp >= 0)
        and log.log_start_offset > 0
        and remote_tier_unknown(broker, partition)
    ):
        # The manifest is not read yet (start-up, store down, manifest corrupt): the local
        # log start is not the earliest offset, and a timestamp may fall in the remote
        # range. A retriable error rather than a local answer that skips remote data.
        raise RemoteStorageUnavailableError(
            f"{partition.topic}-{partition.index}: remote tier not loaded yet"
        )
    if timestamp == EARLIEST_TIMESTAMP:
        return (tiered.earliest_offset() if tiered else log.log_start_offset), -1
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        return log.log_start_offset, -1
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return (tiered.remote_end() - 1 if tiered and tiered.committed() else -1), -1
    if timestamp == EARLIEST_PENDING_UPLOAD_TIMESTAMP:
        return (max(tiered.remote_end(), log.log_start_offset) if tiered else -1), -1
    if timestamp >= 0 and tiered is not None and broker.remote is not None:
        found_remote = await broker.remote.offset_for_timestamp(tiered, timestamp)
        if found_remote is not None:
            return found_remote
    if timestamp == MAX_TIMESTAMP or timestamp >= 0:
        found = log.offset_for_timestamp(timestamp)
        if found is None or found[0] >= hw:
            return -1, -1  # only committed (below the high watermark) records are visible
        return found[0], found[1]
    raise OffsetOutOfRangeError(timestamp, log.log_start_offset, log.log_end_offset)


async def handle_list_offsets(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    topics = []
    for topic in body.topics:
        answers = []
        for p in topic.partitions:
            answer: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": 0,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            partition = broker.replicas.partition(topic.name, p.partition_index)
            if partition is None:
                answer["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                try:
                    partition.check_leader_epoch(field(p, "current_leader_epoch", -1))
                    offset, ts = await list_offset(broker, partition, p.timestamp)
                    if p.timestamp == LATEST_TIMESTAMP:
                        # Kafka answers the latest offset with the current leader epoch
                        # (Partition.fetchOffsetForTimestamp), not the epoch of the last
                        # batch, which an empty log does not have.
                        epoch = partition.leader_epoch
                    else:
                        epoch = epoch_at(partition, offset) if offset >= 0 else -1
                    answer.update(offset=offset, timestamp=ts, leader_epoch=epoch)
                except Exception as exc:  # remote-tier failures map to 56 (retriable)
                    answer["error_code"] = error_code(exc)
            answers.append(answer)
        topics.append({"name": topic.name, "partitions": answers})
    return build(request_response_type(request), {"throttle_time": 0, "topics": topics})


async def handle_offset_for_leader_epoch(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    topics = []
    for topic in body.topics:
        answers = []
        for p in topic.partitions:
            answer: dict[str, Any] = {
                "partition": p.partition,
                "error_code": 0,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            partition = broker.replicas.partition(topic.topic, p.partition)
            if partition is None:
                answer["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                try:
                    partition.check_leader_epoch(field(p, "current_leader_epoch", -1))
                    epoch, end = partition.log.leader_epoch_cache.end_offset_for(
                        p.leader_epoch, partition.log.log_end_offset
                    )
                    answer.update(leader_epoch=epoch, end_offset=end)
                except Exception as exc:
                    answer["error_code"] = error_code(exc)
            answers.append(answer)
        topics.append({"topic": topic.topic, "partitions": answers})
    return build(request_response_type(request), {"throttle_time": 0, "topics": topics})


async def handle_delete_records(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    topics = []
    for topic in body.topics:
        answers = []
        for p in topic.partitions:
            answer: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": 0,
                "low_watermark": -1,
            }
            partition = broker.replicas.partition(topic.name, p.partition_index)
            if topic.name in INTERNAL_TOPICS:
                # Kafka refuses clients DeleteRecords on internal topics
                # (ReplicaManager.deleteRecords): it used to let any client erase
                # __consumer_offsets, i.e. every group's committed offsets.
                answer["error_code"] = ErrorCode.invalid_topic_exception
            elif partition is None:
                answer["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                log = partition.log
                target = log.high_watermark if p.offset == -1 else p.offset
                if target < 0 or target > log.high_watermark:
                    # Kafka: only committed records can be deleted.
                    answer["error_code"] = ErrorCode.offset_out_of_range
                else:
                    try:
                        answer["low_watermark"] = log.advance_log_start_offset(target)
                        broker.log_manager.checkpoint()
                        remote = broker.remote
                        tiered = remote.get(topic.name, p.partition_index) if remote else None
                        if remote is not None and tiered is not None and tiered.committed():
                            answer["low_watermark"] = await remote.advance_log_start_offset(
                                tiered, target
                            )
                    except Exception as exc:
                        answer["error_code"] = error_code(exc)
            answers.append(answer)
        topics.append({"name": topic.name, "partitions": answers})
    return build(request_response_type(request), {"throttle_time": 0, "topics": topics})


async def handle_init_producer_id(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    answer: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": 0,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    if body.transactional_id is not None:
        # Transactions are not implemented; idempotence (no transactional id) is.
        answer["error_code"] = ErrorCode.transactional_id_authorization_failed
    else:
        # Kafka hands a non-transactional producer a fresh id every time (epoch 0).
        answer.update(producer_id=broker.next_producer_id(), producer_epoch=0)
    return build(request_response_type(request), answer)
