"""Produce: append each partition's batches as leader and answer with the offsets.

acks=0 gets no answer at all (kafka-wire.md); acks=1 is answered after the local append;
acks=all waits until each partition's high watermark passes its batch, for all partitions
at once and at most the request's ``timeout`` (Kafka's DelayedProduce). With this broker
the only ISR member the high watermark has passed the batch when the append returns, so
the answer goes out at once. Internal topics (``__consumer_offsets``) refuse clients'
batches with INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.errors import error_code
from tierlog.broker.replica_manager import INTERNAL_TOPICS
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import millis
from tierlog.protocol.produce_encoder import PartitionAnswer, encode_produce_response
from tierlog.records.keys import KEY_CHECK_MAX_BYTES, KeysChecked, check_keys

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices


async def handle_produce(services: BrokerServices, request: Request) -> bytes | None:
    body: Any = request.body
    replicas = services.replicas
    acks = body.acks
    refuse: int | None = None
    if acks not in (0, 1, -1):
        refuse = ErrorCode.invalid_required_acks
    elif body.transactional_id is not None:
        refuse = ErrorCode.transactional_id_authorization_failed  # no transactions yet
    responses: list[tuple[str, list[PartitionAnswer]]] = []
    # acks=all partitions whose high watermark has not passed their batch yet:
    # (their topic's answers, the answer's position, the wait).
    waits: list[tuple[list[PartitionAnswer], int, Coroutine[Any, Any, int]]] = []
    timeout_s = max(0, millis(body.timeout)) / 1000
    key_budget = KEY_CHECK_MAX_BYTES
    for topic in body.topic_data:
        answers: list[PartitionAnswer] = []
        for data in topic.partition_data:
            index = data.index
            if refuse is not None:
                answers.append((index, refuse, -1, -1, -1))
                continue
            if data.records is None:
                answers.append((index, ErrorCode.invalid_record, -1, -1, -1))
                continue
            try:
                records = data.records
                hosted = replicas.partition(topic.name, index)
                if (
                    hosted is not None
                    and hosted.is_leader
                    and topic.name not in INTERNAL_TOPICS  # refused by append_records
                    and hosted.local.config.compact
                ):
                    # Keys are checked by decoding every record: on a worker thread, with a
                    # budget of decompressed bytes for the whole request (issue 10, item 6).
                    records, spent = await asyncio.to_thread(_check_keys, records, key_budget)
                    key_budget -= spent
                partition, info = replicas.append_records(topic.name, index, records, acks)
            except Exception as exc:
                answers.append((index, error_code(exc), -1, -1, -1))
                continue
            answers.append(
                (
                    index,
                    0,
                    info.first_offset,
                    info.log_append_time,
                    partition.local.log_start_offset,
                )
            )
            required = info.last_offset + 1
            if acks == -1 and partition.high_watermark < required:
                wait = partition.wait_for_replication(required, timeout_s)
                waits.append((answers, len(answers) - 1, wait))
        responses.append((topic.name, answers))
    if waits:
        codes = await asyncio.gather(*(wait for _, _, wait in waits))
        for (answers, position, _), code in zip(waits, codes, strict=True):
            if code:
                # Kafka keeps the append's offsets and sets the error (DelayedProduce).
                index, _, base_offset, append_time, log_start = answers[position]
                answers[position] = (index, code, base_offset, append_time, log_start)
    if acks == 0:
        return None
    # Laid out by hand: the generic kio writer cost more than the append (profiled).
    return encode_produce_response(request.api_version, request.correlation_id, responses)


def _check_keys(records: bytes | memoryview, budget: int) -> tuple[KeysChecked, int]:
    """A compacted topic's batches, keys checked (worker thread: decodes every record)."""
    spent = check_keys(records, budget)
    return KeysChecked(records), spent
