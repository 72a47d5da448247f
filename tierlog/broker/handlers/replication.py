"""AlterPartition (API 56, KIP-497): a partition leader asks the controller to change its
ISR. Only the controller broker answers with a decision; any other broker answers
NOT_CONTROLLER and the leader asks again once it knows where the controller is.

Protocol only: the decision is the controller's (``BrokerServices.alter_partition``: the
controller in cluster mode, the local metadata on a single node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker.coordination.api import AlterPartitionError
from tierlog.broker.errors import error_code
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices


async def handle_alter_partition(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    response_type = request_response_type(request)
    refused = services.authz.request_error(request)  # ClusterAction: brokers only
    if refused:
        return build(response_type, {"throttle_time": 0, "error_code": refused, "topics": []})
    if services.alter_partition is None:
        return build(response_type, {"error_code": ErrorCode.not_controller, "topics": []})
    topics = []
    for topic in body.topics:
        name = services.replicas.topic_name(topic.topic_id)
        answers = []
        for p in topic.partitions:
            answer: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": 0,
                "leader_id": -1,
                "leader_epoch": -1,
                "isr": [],
                "leader_recovery_state": 0,
                "partition_epoch": -1,
            }
            isr = (
                [b.broker_id for b in p.new_isr_with_epochs]
                if hasattr(p, "new_isr_with_epochs")
                else list(p.new_isr)
            )
            try:
                if name is None:
                    raise AlterPartitionError(
                        ErrorCode.unknown_topic_id, f"unknown topic id {topic.topic_id}"
                    )
                state = await services.alter_partition(
                    name, p.partition_index, body.broker_id, p.leader_epoch, isr, p.partition_epoch
                )
                answer.update(
                    leader_id=state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=state.isr,
                    partition_epoch=state.partition_epoch,
                )
            except AlterPartitionError as exc:
                answer["error_code"] = exc.code
            except Exception as exc:
                answer["error_code"] = error_code(exc)
            answers.append(answer)
        topics.append({"topic_id": topic.topic_id, "partitions": answers})
    return build(response_type, {"throttle_time": 0, "error_code": 0, "topics": topics})
