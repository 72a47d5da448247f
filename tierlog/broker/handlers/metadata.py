"""ApiVersions and Metadata."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from tierlog.broker.replica_manager import INTERNAL_TOPICS, TopicError
from tierlog.protocol import Request, api_versions_response
from tierlog.protocol.codec import response_type_for
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

ZERO_UUID = uuid.UUID(int=0)


async def handle_api_versions(services: BrokerServices, request: Request) -> Any:
    # An unknown version was already turned into a v0 request by the codec; the answer must
    # still carry error 35 (KIP-511), which ``api_versions_response`` adds only when given
    # the version that was asked for: passing ``response_version`` (0) answered "no error".
    return api_versions_response(request.api_version)


def broker_entries(services: BrokerServices) -> list[dict[str, Any]]:
    return [
        {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
        for b in services.cluster.brokers()
    ]


def topic_entry(services: BrokerServices, name: str) -> dict[str, Any]:
    topic = services.cluster.topic(name)
    if topic is None:
        return {
            "error_code": ErrorCode.unknown_topic_or_partition,
            "name": name,
            "topic_id": ZERO_UUID,
            "partitions": [],
        }
    live = {b.broker_id for b in services.cluster.brokers()}
    partitions = []
    for p in sorted(topic.replicas):
        replicas = topic.replicas[p]
        state = topic.partition_states.get(p)
        if state is None:
            # Cluster mode: the controller has not elected a first leader yet.
            partitions.append(
                {
                    "error_code": ErrorCode.leader_not_available,
                    "partition_index": p,
                    "leader_id": -1,
                    "leader_epoch": -1,
                    "replica_nodes": replicas,
                    "isr_nodes": [],
                    "offline_replicas": [r for r in replicas if r not in live],
                }
            )
            continue
        leader_alive = state.leader in live
        partitions.append(
            {
                "error_code": 0 if leader_alive else ErrorCode.leader_not_available,
                "partition_index": p,
                "leader_id": state.leader if leader_alive else -1,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": replicas,
                "isr_nodes": state.isr,
                "offline_replicas": [r for r in replicas if r not in live],
            }
        )
    return {
        "error_code": 0,
        "name": name,
        "topic_id": topic.topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": partitions,
    }


async def handle_metadata(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    requested = body.topics
    if request.api_version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    topics: list[dict[str, Any]] = []
    if requested is None:
        names = sorted(services.cluster.topics())
        topics = [topic_entry(services, name) for name in names]
    else:
        allow_create = field(body, "allow_auto_topic_creation", True)
        for wanted in requested:
            name = wanted.name
            if name is None:
                topic_id = field(wanted, "topic_id")
                name = services.replicas.topic_name(topic_id) if topic_id else None
                if name is None:
                    topics.append(
                        {
                            "error_code": ErrorCode.unknown_topic_id,
                            "name": None,
                            "topic_id": topic_id or ZERO_UUID,
                            "partitions": [],
                        }
                    )
                    continue
            if services.cluster.topic(name) is None and allow_create:
                try:
                    if name in INTERNAL_TOPICS and services.config["auto.create.topics.enable"]:
                        # Kafka auto-creates __consumer_offsets with its own settings
                        # (AutoTopicCreationManager.creatableTopic). With the defaults of
                        # an ordinary topic (1 partition, not compacted, never loaded into
                        # the group coordinator) every consumer group stopped working.
                        await services.offsets_topic.ensure_created()
                    else:
                        await _auto_create(services, name)
                except TopicError as exc:
                    topics.append(
                        {
                            "error_code": exc.code,
                            "name": name,
                            "topic_id": ZERO_UUID,
                            "partitions": [],
                        }
                    )
                    continue
            topics.append(topic_entry(services, name))
    response_type = request_response_type(request)
    return build(
        response_type,
        {
            "throttle_time": 0,
            "brokers": broker_entries(services),
            "cluster_id": services.cluster.cluster_id,
            "controller_id": services.cluster.controller_id(),
            "topics": topics,
            "error_code": 0,
        },
    )


async def _auto_create(services: BrokerServices, name: str) -> None:
    """Create ``name`` with the broker defaults, if auto.create.topics.enable."""
    config = services.config
    if not config["auto.create.topics.enable"]:
        raise TopicError(ErrorCode.unknown_topic_or_partition, f"unknown topic {name!r}")
    await services.replicas.create_topic(
        name, config["num.partitions"], config["default.replication.factor"], {}
    )


def request_response_type(request: Request) -> type:
    return response_type_for(request.api_key, request.response_version)
