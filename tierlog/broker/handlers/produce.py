"""Produce: append each partition's batches as leader and answer with the offsets.

acks=0 gets no answer at all (kafka-wire.md); acks=1 and acks=all are answered after the
local append (with this broker as the only ISR member, acks=all is met by it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.errors import error_code
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.broker.kio_build import build
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tierlog.broker.broker import Broker


def _partition_answer(
    index: int, code: int, base_offset: int = -1, append_time: int = -1, log_start: int = -1
) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": base_offset,
        "log_append_time": append_time,
        "log_start_offset": log_start,
        "record_errors": [],
    }


async def handle_produce(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    acks = body.acks
    refuse: int | None = None
    if acks not in (0, 1, -1):
        refuse = ErrorCode.invalid_required_acks
    elif body.transactional_id is not None:
        refuse = ErrorCode.transactional_id_authorization_failed  # no transactions yet
    responses = []
    for topic in body.topic_data:
        answers = []
        for data in topic.partition_data:
            if refuse is not None:
                answers.append(_partition_answer(data.index, refuse))
                continue
            partition = broker.replicas.partition(topic.name, data.index)
            if partition is None:
                answers.append(_partition_answer(data.index, ErrorCode.unknown_topic_or_partition))
                continue
            if data.records is None:
                answers.append(_partition_answer(data.index, ErrorCode.invalid_record))
                continue
            try:
                info = partition.append(
                    data.records, acks, partition.log.config.min_insync_replicas
                )
            except Exception as exc:
                answers.append(_partition_answer(data.index, error_code(exc)))
                continue
            answers.append(
                _partition_answer(
                    data.index,
                    0,
                    info.first_offset,
                    info.log_append_time,
                    partition.log.log_start_offset,
                )
            )
        responses.append({"name": topic.name, "partition_responses": answers})
    if acks == 0:
        return None
    return build(request_response_type(request), {"responses": responses, "throttle_time": 0})
