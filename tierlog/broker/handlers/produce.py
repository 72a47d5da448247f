"""Produce: append each partition's batches as leader and answer with the offsets.

acks=0 gets no answer at all (kafka-wire.md); acks=1 and acks=all are answered after the
local append (with this broker as the only ISR member, acks=all is met by it). Internal
topics (``__consumer_offsets``) refuse clients' batches with INVALID_TOPIC_EXCEPTION, as
Kafka's ReplicaManager does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker.handlers.errors import error_code
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.produce_encoder import PartitionAnswer, encode_produce_response

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
                partition, info = replicas.append_records(topic.name, index, data.records, acks)
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
        responses.append((topic.name, answers))
    if acks == 0:
        return None
    # Laid out by hand: the generic kio writer cost more than the append (profiled).
    return encode_produce_response(request.api_version, request.correlation_id, responses)
