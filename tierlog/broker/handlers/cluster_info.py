"""DescribeCluster (API 60) and DescribeTopicPartitions (API 75): the cluster and its topics
as Kafka 4's admin client asks for them.

DescribeCluster (KIP-700) answers the live brokers, the cluster id and the controller (the
``/controller`` znode's broker; a single node is its own), and, when asked, the cluster's
authorized operations (KIP-430, ``authorized_ops``). Its v1 ``endpoint_type`` 2 asks for
KRaft controllers, which tierlog does not have: UNSUPPORTED_ENDPOINT_TYPE, as a Kafka
broker answers a request meant for its controllers. A ZooKeeper-mode broker is live or
absent, never fenced (v2's ``is_fenced``).

DescribeTopicPartitions (KIP-966) is Metadata for topics alone, paged: topics in name order
from the request's cursor, at most ``response_partition_limit`` partitions (and at most
``max.request.partition.size.limit``) per answer, and a
``next_cursor`` naming where the next page starts. tierlog has no eligible leader replicas
(KIP-966's ELR is KRaft's), so those lists are empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from tierlog.broker.handlers.authorized_ops import OMITTED, authorized_operations
from tierlog.broker.handlers.listener_endpoints import address_for_client
from tierlog.broker.handlers.metadata import ZERO_UUID, request_response_type, topic_entry
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field
from tierlog.security.acl import CLUSTER_NAME, ResourceType

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

ENDPOINT_BROKERS: Final = 1


async def handle_describe_cluster(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    answer: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": ENDPOINT_BROKERS,
        "cluster_id": services.cluster.cluster_id,
        "controller_id": services.cluster.controller_id(),
        "brokers": [],
        "cluster_authorized_operations": authorized_operations(
            services,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            requested=body.include_cluster_authorized_operations,
        ),
    }
    wanted = field(body, "endpoint_type", ENDPOINT_BROKERS)
    if wanted != ENDPOINT_BROKERS:
        answer["error_code"] = ErrorCode.unsupported_endpoint_type
        answer["error_message"] = (
            f"endpoint type {wanted} (KRaft controllers) does not exist here: tierlog keeps "
            "its metadata in ZooKeeper; describe the brokers (endpoint type 1)"
        )
        return build(request_response_type(request), answer)
    # The brokers on the request's listener (KIP-103), as Metadata lists them.
    answer["brokers"] = [
        {
            "broker_id": b.broker_id,
            "host": address[0],
            "port": address[1],
            "rack": b.rack,
            "is_fenced": False,
        }
        for b in services.cluster.brokers()
        if (address := address_for_client(b)) is not None
    ]
    return build(request_response_type(request), answer)


async def handle_describe_topic_partitions(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    cursor = body.cursor
    bound = services.config["max.request.partition.size.limit"]
    limit = max(1, min(int(body.response_partition_limit), bound))
    asked = sorted({t.name for t in body.topics})
    names = asked or sorted(services.cluster.topics())
    # Describe on each topic: a topic asked by name and refused answers
    # TOPIC_AUTHORIZATION_FAILED; a listing of all leaves the refused out, unaudited.
    refused_names = services.authz.denied(request, ResourceType.TOPIC, names, log=bool(asked))
    if not asked:
        names = [n for n in names if n not in refused_names]
    if cursor is not None:
        if asked and cursor.topic_name not in asked:
            # Kafka's InvalidRequestException, answered as its getErrorResponse does: every
            # topic asked carries the error.
            refused = [_refused(name, ErrorCode.invalid_request) for name in asked]
            return build(
                request_response_type(request),
                {"throttle_time": 0, "topics": refused, "next_cursor": None},
            )
        names = [n for n in names if n >= cursor.topic_name]
    topics: list[dict[str, Any]] = []
    next_cursor: dict[str, Any] | None = None
    budget = limit
    for name in names:
        if name in refused_names:
            topics.append(_refused(name, refused_names[name]))
            continue
        entry = topic_entry(services, name)
        if entry["error_code"]:
            topics.append(_refused(name, entry["error_code"]))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions = [p for p in entry["partitions"] if p["partition_index"] >= start]
        if budget == 0:
            next_cursor = {"topic_name": name, "partition_index": start}
            break
        if len(partitions) > budget:
            cut = partitions[budget]["partition_index"]
            partitions = partitions[:budget]
            next_cursor = {"topic_name": name, "partition_index": cut}
        budget -= len(partitions)
        entry["partitions"] = [
            p | {"eligible_leader_replicas": [], "last_known_elr": []} for p in partitions
        ]
        entry["topic_authorized_operations"] = authorized_operations(
            services, ResourceType.TOPIC, name
        )
        topics.append(entry)
        if next_cursor is not None:
            break
    return build(
        request_response_type(request),
        {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor},
    )


def _refused(name: str, code: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": ZERO_UUID,
        "partitions": [],
        "topic_authorized_operations": OMITTED,
    }
