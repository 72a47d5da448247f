"""ApiVersions and Metadata."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING, Any

from tierlog.broker.coordination.api import TopicExistsError
from tierlog.broker.replica_manager import INTERNAL_TOPICS, TopicError, assign_replicas
from tierlog.protocol import Request, api_versions_response
from tierlog.protocol.codec import response_type_for
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

ZERO_UUID = uuid.UUID(int=0)
# Topics auto-created together: their metadata goes to disk in one group write and their
# partitions are hosted in one pass; other clients are served between groups.
AUTO_CREATE_GROUP = 100

log = logging.getLogger(__name__)


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
        # (name, topic id asked for); name None: an unknown topic id.
        wanted_topics: list[tuple[str | None, Any]] = []
        for wanted in requested:
            topic_id = None if wanted.name is not None else field(wanted, "topic_id")
            name = wanted.name
            if name is None and topic_id:
                name = services.replicas.topic_name(topic_id)
            wanted_topics.append((name, topic_id))
        refused: dict[str, int] = {}
        if allow_create:
            missing = [
                n for n, _ in wanted_topics if n is not None and services.cluster.topic(n) is None
            ]
            refused = await auto_create(services, list(dict.fromkeys(missing)))
        for name, topic_id in wanted_topics:
            if name is None:
                topics.append(
                    {
                        "error_code": ErrorCode.unknown_topic_id,
                        "name": None,
                        "topic_id": topic_id or ZERO_UUID,
                        "partitions": [],
                    }
                )
            elif name in refused:
                topics.append(
                    {
                        "error_code": refused[name],
                        "name": name,
                        "topic_id": ZERO_UUID,
                        "partitions": [],
                    }
                )
            else:
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


async def auto_create(services: BrokerServices, names: list[str]) -> dict[str, int]:
    """Create each of ``names`` with the broker defaults, if auto.create.topics.enable;
    returns the error code of each name refused (Kafka answers per topic).

    Why not ``ReplicaManager.create_topic`` once per name: it re-reads every topic's
    metadata after each creation (``sync``), so the n-th creation cost O(n) and 1,000 names
    in one request held the event loop for most of a minute. Here a group of names is
    created concurrently (the coordinator writes their records together), then the
    partitions of the whole group are hosted in one ``sync``, and other clients' requests
    run between groups. The checks are CreateTopics' own, run with ``validate_only``.
    """
    config = services.config
    refused: dict[str, int] = {}
    creatable: list[str] = []
    for name in names:
        if not config["auto.create.topics.enable"]:
            refused[name] = ErrorCode.unknown_topic_or_partition
        elif name in INTERNAL_TOPICS:
            # Kafka auto-creates __consumer_offsets with its own settings
            # (AutoTopicCreationManager.creatableTopic). With the defaults of an ordinary
            # topic (1 partition, not compacted, never loaded into the group coordinator)
            # every consumer group stopped working.
            try:
                await services.offsets_topic.ensure_created()
            except TopicError as exc:
                refused[name] = exc.code
        else:
            try:
                # Every check CreateTopics makes (name rules, replication factor against
                # the live brokers, the default config), without creating.
                await services.replicas.create_topic(
                    name,
                    config["num.partitions"],
                    config["default.replication.factor"],
                    {},
                    validate_only=True,
                )
            except TopicError as exc:
                if exc.code != ErrorCode.topic_already_exists:
                    refused[name] = exc.code
                continue
            creatable.append(name)
    for first in range(0, len(creatable), AUTO_CREATE_GROUP):
        group = creatable[first : first + AUTO_CREATE_GROUP]
        results = await asyncio.gather(
            *(_create(services, name) for name in group), return_exceptions=True
        )
        created = [name for name, result in zip(group, results, strict=True) if result is None]
        for name, result in zip(group, results, strict=True):
            if isinstance(result, TopicError):
                refused[name] = result.code
            elif isinstance(result, BaseException):
                raise result
        if created:
            if _unhosted(services, created):
                # Hosted before answering, so a produce right after the answer finds its
                # partition. Single node: the coordinator's change listener already did.
                services.replicas.sync()
            log.info(
                "auto-created %d topic(s) (%d partition(s) each): %s",
                len(created),
                config["num.partitions"],
                ", ".join(created),
            )
        await asyncio.sleep(0)  # let other connections' requests run between groups
    return refused


def _unhosted(services: BrokerServices, names: list[str]) -> bool:
    """Whether a partition of ``names`` assigned to this broker is not hosted yet."""
    me = services.config.broker_id
    hosted = services.replicas.partitions
    for name in names:
        topic = services.cluster.topic(name)
        if topic is not None:
            for p, replicas in topic.replicas.items():
                if me in replicas and (name, p) not in hosted:
                    return True
    return False


async def _create(services: BrokerServices, name: str) -> None:
    config = services.config
    replicas = assign_replicas(
        services.cluster.brokers(), config["num.partitions"], config["default.replication.factor"]
    )
    # Created meanwhile (another client, another broker): answered as it is.
    with contextlib.suppress(TopicExistsError):
        await services.cluster.create_topic(name, replicas, {})


def request_response_type(request: Request) -> type:
    return response_type_for(request.api_key, request.response_version)
