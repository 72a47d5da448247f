"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: protocol only; the
partition (replication state) and its ``UnifiedLog`` (both tiers) answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker.errors import error_code
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field
from tierlog.security.acl import ResourceType

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices


READ_COMMITTED = 1


async def handle_list_offsets(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    # A read_committed consumer is bounded by the last stable offset (Kafka's
    # fetchOffsetForTimestamp): its "latest" is the LSO, and a timestamp lookup never
    # answers an offset it cannot read yet.
    read_committed = field(body, "isolation_level", 0) == READ_COMMITTED
    denied = services.authz.denied(request, ResourceType.TOPIC, (t.name for t in body.topics))
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
            partition = services.replicas.partition(topic.name, p.partition_index)
            if topic.name in denied:
                answer["error_code"] = denied[topic.name]
            elif partition is None:
                answer["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                try:
                    offset, ts, epoch = await partition.list_offset(
                        p.timestamp,
                        field(p, "current_leader_epoch", -1),
                        read_committed=read_committed,
                    )
                    answer.update(offset=offset, timestamp=ts, leader_epoch=epoch)
                except Exception as exc:  # remote-tier failures map to 56 (retriable)
                    answer["error_code"] = error_code(exc)
            answers.append(answer)
        topics.append({"name": topic.name, "partitions": answers})
    return build(request_response_type(request), {"throttle_time": 0, "topics": topics})


async def handle_offset_for_leader_epoch(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    # ClusterAction (followers), else Describe on each topic (consumers).
    denied = services.authz.denied(request, ResourceType.TOPIC, (t.topic for t in body.topics))
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
            partition = services.replicas.partition(topic.topic, p.partition)
            if topic.topic in denied:
                answer["error_code"] = denied[topic.topic]
            elif partition is None:
                answer["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                try:
                    epoch, end = partition.end_offset_for_epoch(
                        p.leader_epoch, field(p, "current_leader_epoch", -1)
                    )
                    answer.update(leader_epoch=epoch, end_offset=end)
                except Exception as exc:
                    answer["error_code"] = error_code(exc)
            answers.append(answer)
        topics.append({"topic": topic.topic, "partitions": answers})
    return build(request_response_type(request), {"throttle_time": 0, "topics": topics})


async def handle_delete_records(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    denied = services.authz.denied(request, ResourceType.TOPIC, (t.name for t in body.topics))
    topics = []
    for topic in body.topics:
        answers = []
        for p in topic.partitions:
            answer: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": 0,
                "low_watermark": -1,
            }
            if topic.name in denied:
                answer["error_code"] = denied[topic.name]
                answers.append(answer)
                continue
            try:
                answer["low_watermark"] = await services.replicas.delete_records(
                    topic.name, p.partition_index, p.offset
                )
            except Exception as exc:
                answer["error_code"] = error_code(exc)
            answers.append(answer)
        topics.append({"name": topic.name, "partitions": answers})
    return build(request_response_type(request), {"throttle_time": 0, "topics": topics})
