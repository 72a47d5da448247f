"""ApiVersions and Metadata."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from dataclasses import field as field_
from typing import TYPE_CHECKING, Any

from tierlog.broker.coordination.api import TopicCollisionError, TopicExistsError, TopicMetadata
from tierlog.broker.handlers.authorized_ops import authorized_operations
from tierlog.broker.handlers.listener_endpoints import address_for_client
from tierlog.broker.network.connection_context import CLIENT_SOFTWARE
from tierlog.broker.replication.partition_limits import PartitionLimitError
from tierlog.broker.replication.replica_assignment import assign_replicas
from tierlog.broker.replication.replica_manager import INTERNAL_TOPICS
from tierlog.broker.replication.topic_error import TopicError
from tierlog.protocol import Request, api_versions_response
from tierlog.protocol.codec import response_type_for
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field
from tierlog.protocol.versions import TELEMETRY_APIS
from tierlog.security.acl import CLUSTER_NAME, ResourceType
from tierlog.security.authz_table import When

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
    name = field(request.body, "client_software_name", None)
    if name:
        CLIENT_SOFTWARE.set((name, field(request.body, "client_software_version", "") or ""))
    # Client metrics are announced only when the broker can export them (KIP-714).
    hidden = TELEMETRY_APIS if services.client_metrics is None else frozenset()
    return api_versions_response(request.api_version, hidden=hidden)


def broker_entries(services: BrokerServices) -> list[dict[str, Any]]:
    """The brokers on the request's listener (KIP-103); those without it are left out."""
    entries = []
    for b in services.cluster.brokers():
        address = address_for_client(b)
        if address is not None:
            entries.append(
                {"node_id": b.broker_id, "host": address[0], "port": address[1], "rack": b.rack}
            )
    return entries


def topic_entry(
    services: BrokerServices, name: str, *, listener_not_found: bool = True
) -> dict[str, Any]:
    """One topic's Metadata entry. A partition whose leader is alive but has no endpoint on
    the request's listener (KIP-103) has no leader to name: Kafka answers it with
    LISTENER_NOT_FOUND (72) from Metadata v6 on (``listener_not_found``), so the
    misconfiguration shows, and LEADER_NOT_AVAILABLE before, never another listener's
    address (MetadataCache.getPartitionMetadata)."""
    topic = services.cluster.topic(name)
    if topic is None:
        return {
            "error_code": ErrorCode.unknown_topic_or_partition,
            "name": name,
            "topic_id": ZERO_UUID,
            "partitions": [],
        }
    live = {b.broker_id: b for b in services.cluster.brokers()}
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
        leader = live.get(state.leader)
        if leader is None:
            error = ErrorCode.leader_not_available
        elif address_for_client(leader) is None:
            error = (
                ErrorCode.listener_not_found
                if listener_not_found
                else ErrorCode.leader_not_available
            )
        else:
            error = ErrorCode.none
        partitions.append(
            {
                "error_code": error,
                "partition_index": p,
                "leader_id": -1 if error else state.leader,
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


def _refused_entry(name: str, code: int) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "partitions": []}


async def handle_metadata(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    authz = services.authz
    requested = body.topics
    if request.api_version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    topics: list[dict[str, Any]] = []
    # Kafka names the missing listener from v6 on (KafkaApis: errorUnavailableListeners).
    listener_not_found = request.api_version >= 6
    if requested is None:
        # Topics the principal may not Describe are left out, without an error.
        names = sorted(services.cluster.topics())
        hidden = authz.denied(request, ResourceType.TOPIC, names, log=False)
        topics = [
            topic_entry(services, name, listener_not_found=listener_not_found)
            for name in names
            if name not in hidden
        ]
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
        named = [n for n, _ in wanted_topics if n is not None]
        # Describe on each topic named; a missing one to be auto-created also needs Create
        # (on the cluster, else on the topic). Either refusal is TOPIC_AUTHORIZATION_FAILED,
        # so a name the principal may not see does not leak whether it exists.
        refused = authz.denied(request, ResourceType.TOPIC, named)
        if allow_create:
            missing = [n for n in named if n not in refused and services.cluster.topic(n) is None]
            if services.config["auto.create.topics.enable"]:
                refused.update(authz.denied(request, ResourceType.TOPIC, missing, When.AUTO_CREATE))
                missing = [n for n in missing if n not in refused]
            refused.update(await auto_create(services, list(dict.fromkeys(missing))))
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
                topics.append(_refused_entry(name, refused[name]))
            else:
                topics.append(topic_entry(services, name, listener_not_found=listener_not_found))
    # KIP-430 (v8+): the operations the principal may perform, when asked.
    with_topic_ops = field(body, "include_topic_authorized_operations", False)
    for entry in topics:
        if not entry["error_code"] and entry["name"] is not None:
            entry["topic_authorized_operations"] = authorized_operations(
                services, ResourceType.TOPIC, entry["name"], requested=with_topic_ops
            )
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
            "cluster_authorized_operations": authorized_operations(
                services,
                ResourceType.CLUSTER,
                CLUSTER_NAME,
                requested=field(body, "include_cluster_authorized_operations", False),
            ),
        },
    )


async def auto_create(services: BrokerServices, names: list[str]) -> dict[str, int]:
    """Create each of ``names`` with the broker defaults, if auto.create.topics.enable;
    returns the error code of each name refused (Kafka answers per topic). The checks
    are CreateTopics' own, run with ``validate_only``; the creation is
    ``create_in_groups`` (1,000 names in one request took 49 s one by one).
    """
    config = services.config
    refused: dict[str, int] = {}
    creatable: list[TopicSpec] = []
    count = services.replicas.admin.limits.count(services.cluster.topics())
    for name in names:
        if not config["auto.create.topics.enable"]:
            refused[name] = ErrorCode.unknown_topic_or_partition
        elif name in INTERNAL_TOPICS:
            # Kafka auto-creates __consumer_offsets and __transaction_state with their own
            # settings (AutoTopicCreationManager.creatableTopic). With the defaults of an
            # ordinary topic (1 partition, not compacted, never loaded into the group or
            # transaction coordinator) every consumer group, or transaction, stopped working.
            transactions = services.transactions
            try:
                if name == "__transaction_state" and transactions is not None:
                    await transactions.state_topic.ensure_created()
                else:
                    await services.offsets_topic.ensure_created()
            except TopicError as exc:
                refused[name] = exc.code
        else:
            partitions, rf = config["num.partitions"], config["default.replication.factor"]
            try:
                # Every check CreateTopics makes (name rules, replication factor against
                # the live brokers, the default config, the partition limits), without
                # creating; created as placed here.
                placed = services.replicas.admin.plan_topic(name, partitions, rf, {}, count=count)
            except (TopicError, PartitionLimitError) as exc:
                if exc.code != ErrorCode.topic_already_exists:
                    refused[name] = exc.code
                continue
            creatable.append(TopicSpec(name, partitions, rf, replicas=placed))
    with count.held():
        outcome = await create_in_groups(services, creatable)
    for name, result in outcome.items():
        if isinstance(result, TopicError):
            if result.code != ErrorCode.topic_already_exists:  # else: answered as it is
                refused[name] = result.code
        elif isinstance(result, BaseException):
            raise result
    return refused


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create, already checked (``ReplicaManager.create_topic`` with
    ``validate_only``); ``replicas`` None: placed by ``assign_replicas``."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field_(default_factory=dict)
    replicas: dict[int, list[int]] | None = None


async def create_in_groups(
    services: BrokerServices, specs: list[TopicSpec], deadline: float | None = None
) -> dict[str, TopicMetadata | BaseException]:
    """Create ``specs`` (checked already) in groups of ``AUTO_CREATE_GROUP``: each group
    concurrently, so the coordinator writes its records together, then its partitions
    hosted in one ``sync``; other connections' requests run between groups. Returns each
    name's metadata or the exception that refused it (TopicError TOPIC_ALREADY_EXISTS when
    it was created meanwhile; PropagationTimeoutError, REQUEST_TIMED_OUT, when its leaders
    were not seen by ``deadline``, the event loop's time: a CreateTopics ``timeout_ms``).

    Why not ``ReplicaManager.create_topic`` once per name: it re-reads every topic's
    metadata after each creation (``sync``), so the n-th creation cost O(n).
    """
    outcome: dict[str, TopicMetadata | BaseException] = {}
    for first in range(0, len(specs), AUTO_CREATE_GROUP):
        group = specs[first : first + AUTO_CREATE_GROUP]
        wait_s = None
        if deadline is not None:
            # Past the deadline the topics are still created (Kafka writes them all
            # first); their answers are then REQUEST_TIMED_OUT unless already seen.
            wait_s = max(deadline - asyncio.get_running_loop().time(), 0.001)
        results = await asyncio.gather(
            *(_create(services, spec, wait_s) for spec in group), return_exceptions=True
        )
        created = []
        for spec, result in zip(group, results, strict=True):
            outcome[spec.name] = result
            if isinstance(result, TopicMetadata):
                created.append(spec.name)
        if created:
            # Every time, as ReplicaManager.create_topic does, also when a change listener
            # already hosted the partitions: skipping it then broke a tiered topic made by
            # CreateTopics in cluster mode (tests/integration/test_tiered_cluster.py), the
            # watch that hosted it having likely not seen its configs yet. In slices, with
            # other requests answered between (a 10,000-partition topic: issue 20, item 8).
            await services.replicas.apply_topics(created)
            log.info("created %d topic(s): %s", len(created), ", ".join(created))
        await asyncio.sleep(0)  # let other connections' requests run between groups
    return outcome


async def _create(
    services: BrokerServices, spec: TopicSpec, wait_s: float | None = None
) -> TopicMetadata:
    replicas = spec.replicas or assign_replicas(
        services.cluster.brokers(), spec.partitions, spec.replication_factor
    )
    try:
        return await services.cluster.create_topic(spec.name, replicas, dict(spec.configs), wait_s)
    except TopicExistsError:
        # Another client or broker created it meanwhile (their cache and ours differ).
        raise TopicError(
            ErrorCode.topic_already_exists, f"topic {spec.name!r} already exists"
        ) from None
    except TopicCollisionError as exc:
        # A name created in the same request or by another broker meanwhile: Kafka's
        # INVALID_TOPIC_EXCEPTION, in CreateTopics and in auto-creation alike.
        raise TopicError(ErrorCode.invalid_topic_exception, str(exc)) from None


def request_response_type(request: Request) -> type:
    return response_type_for(request.api_key, request.response_version)
