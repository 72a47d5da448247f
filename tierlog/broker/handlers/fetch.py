"""Fetch: long-polling reads sent with sendfile.

A fetch reads every partition once; if fewer than ``min_bytes`` came back and ``max_wait``
has not passed, it waits until one of its partitions is appended to, then reads again
(Kafka's DelayedFetch). Records go out as file slices (``encode_fetch_response``), never
copied into Python. Fetch sessions (KIP-227) are refused politely: the answer's session id
is 0, so clients keep sending full fetches.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.errors import error_code
from tierlog.broker.partition import Partition, ReadResult
from tierlog.protocol import (
    EncodedFetchResponse,
    FetchPartitionData,
    FetchTopicData,
    Request,
    encode_fetch_response,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import field, millis
from tierlog.remote.api import RemoteStorageUnavailableError

if TYPE_CHECKING:
    from tierlog.broker.broker import Broker

READ_COMMITTED = 1


class _Wanted:
    __slots__ = ("answer", "current_leader_epoch", "offset", "partition", "partition_max_bytes")

    def __init__(
        self,
        answer: FetchPartitionData,
        partition: Partition | None,
        offset: int,
        partition_max_bytes: int,
        current_leader_epoch: int,
    ) -> None:
        self.answer = answer
        self.partition = partition
        self.offset = offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch


def _plan(broker: Broker, request: Request) -> tuple[list[FetchTopicData], list[_Wanted]]:
    body: Any = request.body
    by_id = request.api_version >= 13
    topics: list[FetchTopicData] = []
    wanted: list[_Wanted] = []
    for topic in body.topics:
        if by_id:
            name = broker.replicas.topic_name(topic.topic_id)
            answer_topic = FetchTopicData(topic_id=topic.topic_id)
        else:
            name = topic.topic
            answer_topic = FetchTopicData(topic=topic.topic)
        answers = []
        for p in topic.partitions:
            answer = FetchPartitionData(partition_index=p.partition)
            partition = broker.replicas.partition(name, p.partition) if name else None
            if partition is None:
                answer.error_code = (
                    ErrorCode.unknown_topic_id
                    if by_id and name is None
                    else ErrorCode.unknown_topic_or_partition
                )
            answers.append(answer)
            wanted.append(
                _Wanted(
                    answer,
                    partition,
                    p.fetch_offset,
                    p.partition_max_bytes,
                    field(p, "current_leader_epoch", -1),
                )
            )
        answer_topic.partitions = answers
        topics.append(answer_topic)
    return topics, wanted


def remote_tier_unknown(broker: Broker, partition: Partition) -> bool:
    """True for a tiered partition whose manifest this broker has not read: not tracked
    yet (start-up) or unreadable since start-up (store down, manifest corrupt). Its remote
    range, and so its earliest offset, is unknown until then."""
    if broker.remote is None or not partition.log.config.remote_storage_enable:
        return False
    tiered = broker.remote.get(partition.topic, partition.index)
    return tiered is None or tiered.manifest is None


async def _read_all(
    broker: Broker, wanted: list[_Wanted], max_bytes: int, read_committed: bool
) -> tuple[int, bool]:
    """Fill each answer; returns (bytes read, whether any partition has an error).

    Offsets below a tiered partition's local log start are read from the remote tier (off
    the event loop, bounded by remote.fetch.max.wait.ms); everything else from the local
    segment files as sendfile slices.
    """
    total = 0
    errors = False
    for w in wanted:
        answer = w.answer
        partition = w.partition
        if partition is None:
            errors = True
            continue
        answer.error_code = 0
        answer.records = b""
        log_ = partition.log
        tiered = broker.remote.get(partition.topic, partition.index) if broker.remote else None
        earliest = tiered.earliest_offset() if tiered is not None else log_.log_start_offset
        try:
            partition.check_leader_epoch(w.current_leader_epoch)
            room = max(0, max_bytes - total)
            # Kafka: the first partition with data may exceed the limits by one batch, so a
            # consumer always makes progress; later ones stop at the response limit.
            limit = min(w.partition_max_bytes, room)
            if w.offset < earliest and remote_tier_unknown(broker, partition):
                # What lies below the local log start is unknown, not gone: answering
                # OFFSET_OUT_OF_RANGE would make consumers with auto.offset.reset jump
                # past the remote data; a retriable error makes them wait for it.
                raise RemoteStorageUnavailableError(
                    f"{partition.topic}-{partition.index}: remote tier not loaded yet"
                )
            if tiered is not None and earliest <= w.offset < log_.log_start_offset:
                assert broker.remote is not None
                remote = await broker.remote.read(tiered, w.offset, limit, total == 0)
                result = ReadResult(None, log_.high_watermark, log_.high_watermark, earliest)
                _fill(answer, result)
                answer.records = remote or b""
                total += len(answer.records)
                continue
            result = partition.read(
                w.offset, limit, read_committed=read_committed, min_one_batch=total == 0
            )
        except Exception as exc:
            answer.error_code = error_code(exc)
            answer.high_watermark = log_.high_watermark
            answer.last_stable_offset = log_.high_watermark
            answer.log_start_offset = earliest
            errors = True
            continue
        _fill(answer, result)
        answer.log_start_offset = earliest
        total += result.size
    return total, errors


def _fill(answer: FetchPartitionData, result: ReadResult) -> None:
    answer.high_watermark = result.high_watermark
    answer.last_stable_offset = result.last_stable_offset
    answer.log_start_offset = result.log_start_offset
    answer.records = result.records if result.records is not None else b""


async def handle_fetch(broker: Broker, request: Request) -> EncodedFetchResponse:
    body: Any = request.body
    if field(body, "session_id", 0) != 0:
        # We never hand out a session id, so a client naming one is mistaken (KIP-227).
        return encode_fetch_response(
            request.api_version,
            request.correlation_id,
            [],
            error_code=ErrorCode.fetch_session_id_not_found,
        )
    topics, wanted = _plan(broker, request)
    read_committed = field(body, "isolation_level", 0) == READ_COMMITTED
    max_bytes = field(body, "max_bytes", 2**31 - 1)
    max_bytes = min(max_bytes, broker.config["fetch.max.bytes"])
    min_bytes = body.min_bytes
    max_wait_s = max(0, millis(body.max_wait)) / 1000
    deadline = time.monotonic() + max_wait_s
    while True:
        total, errors = await _read_all(broker, wanted, max_bytes, read_committed)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or errors or remaining <= 0 or broker.stopping:
            break
        waiters = [w.partition.waiter() for w in wanted if w.partition is not None]
        if not waiters:
            break
        _, pending = await asyncio.wait(
            [*waiters, broker.stop_waiter()], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
        )
        for future in pending:
            future.cancel()
    return encode_fetch_response(request.api_version, request.correlation_id, topics)
