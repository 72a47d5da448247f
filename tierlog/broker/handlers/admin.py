"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs.

Topic configs are stored as overrides (Kafka names) in the coordination metadata and applied
to the topic's logs at once; DescribeConfigs reports every topic key with its source, and on
the broker's own resource, only when asked by name, the read-only ``tierlog.log.cleaner.state``
(``tierlog.broker.cleaner_state``). Broker and broker-logger resources are
``broker_configs``'; client-metrics ones ``config_resources``'.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tierlog.broker import cleaner_state
from tierlog.broker.errors import error_code
from tierlog.broker.handlers.broker_configs import (
    alter_broker,
    alter_loggers_refused,
    describe_broker,
    describe_loggers,
    incremental_alter_broker,
    incremental_alter_loggers,
    topic_default_source,
)
from tierlog.broker.handlers.config_resources import (
    RESOURCE_CLIENT_METRICS,
    alter_client_metrics,
    describe_client_metrics,
    incremental_alter_client_metrics,
)
from tierlog.broker.handlers.metadata import (
    ZERO_UUID,
    TopicSpec,
    create_in_groups,
    request_response_type,
)
from tierlog.broker.handlers.quotas import MutationQuota
from tierlog.broker.replication.partition_limits import PartitionLimitError, check_request
from tierlog.broker.replication.replica_manager import INTERNAL_TOPICS
from tierlog.broker.replication.topic_error import TopicError
from tierlog.local.config import TOPIC_CONFIG
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field, millis
from tierlog.security.acl import CLUSTER_NAME, ResourceType
from tierlog.security.authz_table import When
from tierlog.util.configdef import ConfigKey

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
# ConfigSource values (DescribeConfigs v1+).
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DEFAULT = 5
# ConfigType values (DescribeConfigs v3+).
_CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


async def handle_create_topics(services: BrokerServices, request: Request) -> Any:
    """Every topic is checked first, one by one (``validate_only``), then the valid ones
    are created together, in groups (``create_in_groups``): one by one, the n-th creation
    cost O(n) and 1,000 topics in one request took minutes. Answers stay per topic, in the
    request's order."""
    body: Any = request.body
    validate_only = field(body, "validate_only", False)
    # Kafka refuses every entry of a topic named more than once in one request.
    names = [t.name for t in body.topics]
    repeated = {name for name in names if names.count(name) > 1}
    # Create on the cluster, else on each topic; configs answered only where DescribeConfigs.
    denied = services.authz.denied(request, ResourceType.TOPIC, names)
    configs_visible = set(services.authz.visible(request, ResourceType.TOPIC, names))
    mutations = MutationQuota(services, request)
    try:
        # All topics together, before anything is placed (Kafka 4, KAFKA-17870): a
        # million partitions are refused at once instead of built and counted.
        check_request(sum(_requested_partitions(services, t) for t in body.topics))
    except PartitionLimitError as exc:
        return build(
            request_response_type(request),
            {"throttle_time": 0, "topics": [_refused(t.name, exc) for t in body.topics]},
        )
    # One running count for the request: its topics add up against the limits together.
    count = services.replicas.admin.limits.count(services.cluster.topics())
    answers = []
    # Checked and to be created: (its answer, the spec, its config overrides).
    pending: list[tuple[dict[str, Any], TopicSpec]] = []
    for t in body.topics:
        answer: dict[str, Any] = {
            "name": t.name,
            "topic_id": ZERO_UUID,
            "error_code": 0,
            "error_message": None,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": [],
        }
        answers.append(answer)
        if t.name in repeated:
            answer["error_code"] = ErrorCode.invalid_request
            answer["error_message"] = f"topic {t.name!r} appears more than once in the request"
            continue
        if t.name in denied:
            answer["error_code"] = denied[t.name]
            answer["error_message"] = "Authorization failed."
            continue
        try:
            configs = {c.name: c.value for c in t.configs}
            replicas = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            if replicas is not None and (t.num_partitions != -1 or t.replication_factor != -1):
                # Kafka refuses the mix rather than guess which one is meant.
                raise TopicError(
                    ErrorCode.invalid_request,
                    "num_partitions and replication_factor must be -1 with an explicit "
                    "replica assignment",
                )
            partitions = (
                t.num_partitions if t.num_partitions != -1 else (services.config["num.partitions"])
            )
            rf = (
                t.replication_factor
                if t.replication_factor != -1
                else (services.config["default.replication.factor"])
            )
            if t.name in INTERNAL_TOPICS and services.cluster.topic(t.name) is None:
                # The broker creates __consumer_offsets itself on first use, with the
                # offsets.topic.* settings; one made by a client (say 1 partition, not
                # compacted) was never loaded into the group coordinator: groups broke.
                raise TopicError(
                    ErrorCode.invalid_request,
                    f"{t.name} is an internal topic; the broker creates it on first use",
                )
            placed = services.replicas.admin.plan_topic(
                t.name, partitions, rf, configs, replicas=replicas, count=count
            )
            answer["num_partitions"] = len(placed)
            answer["replication_factor"] = len(next(iter(placed.values())))
            if t.name in configs_visible:
                answer["configs"] = _created_configs(services, configs)
            else:
                answer["topic_config_error_code"] = ErrorCode.topic_authorization_failed
            if not validate_only:
                refused = mutations.admit(len(placed))
                if refused:
                    raise TopicError(refused, "The throttling quota has been exceeded.")
                # Created as placed (and counted) here.
                pending.append((answer, TopicSpec(t.name, len(placed), rf, configs, placed)))
        except Exception as exc:
            answer["error_code"] = error_code(exc)
            answer["error_message"] = str(exc)
    if pending:
        # The request's timeout_ms bounds the wait for the new leaders (Kafka's
        # DelayedCreatePartitions): past it, REQUEST_TIMED_OUT, the topic created all the
        # same. Kafka answers at once for 0 (librdkafka's default); tierlog then waits
        # up to its own bound, so that a client using the topic right after finds it.
        timeout_ms = millis(field(body, "timeout", None))
        deadline = None
        if timeout_ms > 0:
            deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        with count.held():  # other requests count these until they are in the metadata
            outcome = await create_in_groups(services, [spec for _, spec in pending], deadline)
        for answer, spec in pending:
            result = outcome[spec.name]
            if isinstance(result, BaseException):
                answer.update(
                    error_code=error_code(result),
                    error_message=str(result),
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=[],
                )
            else:
                answer["topic_id"] = result.topic_id
                answer["num_partitions"] = result.partitions
                answer["replication_factor"] = len(result.replicas[0])
    throttle_ms = mutations.done()
    return build(request_response_type(request), {"throttle_time": throttle_ms, "topics": answers})


def _requested_partitions(services: BrokerServices, t: Any) -> int:
    """The partitions one CreateTopics entry asks for (as Kafka counts them for its cap)."""
    if t.assignments:
        return len(t.assignments)
    if t.num_partitions == -1:
        return int(services.config["num.partitions"])
    return max(0, int(t.num_partitions))


def _refused(name: str, exc: Exception) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": ZERO_UUID,
        "error_code": error_code(exc),
        "error_message": str(exc),
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


def _created_configs(services: BrokerServices, configs: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "name": c["name"],
            "value": c["value"],
            "read_only": False,
            "config_source": c["config_source"],
            "is_sensitive": False,
        }
        for c in topic_configs(services, configs)
    ]


async def handle_delete_topics(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    if request.api_version >= 6:
        wanted = [(t.name, field(t, "topic_id")) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    mutations = MutationQuota(services, request)
    answers = []
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            name = services.replicas.topic_name(topic_id)
        # Describe and Delete on the topic.
        refused = services.authz.denied(request, ResourceType.TOPIC, [name] if name else [])
        answer: dict[str, Any] = {
            "name": name,
            "topic_id": topic_id or ZERO_UUID,
            "error_code": 0,
            "error_message": None,
        }
        try:
            if name in refused:
                raise TopicError(refused[name], "Authorization failed.")
            if name is None:
                raise TopicError(ErrorCode.unknown_topic_id, f"unknown topic id {topic_id}")
            if not services.config["delete.topic.enable"]:
                raise TopicError(
                    ErrorCode.topic_deletion_disabled,
                    "topic deletion is disabled (delete.topic.enable=false)",
                )
            if name in INTERNAL_TOPICS:
                raise TopicError(ErrorCode.invalid_topic_exception, f"{name} is an internal topic")
            topic = services.cluster.topic(name)
            if topic is not None:
                answer["topic_id"] = topic.topic_id
                throttled = mutations.admit(topic.partitions)
                if throttled:
                    raise TopicError(throttled, "The throttling quota has been exceeded.")
            await services.replicas.admin.delete_topic(name)
        except Exception as exc:
            answer["error_code"] = error_code(exc)
            answer["error_message"] = str(exc)
        answers.append(answer)
    throttle_ms = mutations.done()
    return build(
        request_response_type(request), {"throttle_time": throttle_ms, "responses": answers}
    )


async def handle_create_partitions(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    denied = services.authz.denied(request, ResourceType.TOPIC, (t.name for t in body.topics))
    mutations = MutationQuota(services, request)
    results = []
    adding = 0
    for t in body.topics:
        known = services.cluster.topic(t.name)
        adding += max(0, t.count - known.partitions) if known is not None else 0
    try:
        # All topics together, before a replica is placed: as CreateTopics (tierlog's
        # extension of Kafka 4's cap to this request, which can grow a topic as much).
        check_request(adding)
    except PartitionLimitError as exc:
        refused = [
            {"name": t.name, "error_code": error_code(exc), "error_message": str(exc)}
            for t in body.topics
        ]
        return build(request_response_type(request), {"throttle_time": 0, "results": refused})
    for t in body.topics:
        result: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            if t.name in denied:
                raise TopicError(denied[t.name], "Authorization failed.")
            if t.name in INTERNAL_TOPICS:
                raise TopicError(
                    ErrorCode.invalid_topic_exception, f"{t.name} is an internal topic"
                )
            # Null (or empty) assignments: the broker places the new partitions.
            assignments = [list(a.broker_ids) for a in t.assignments or ()] or None
            current = services.cluster.topic(t.name)
            if not body.validate_only and current is not None and t.count > current.partitions:
                throttled = mutations.admit(t.count - current.partitions)
                if throttled:
                    raise TopicError(throttled, "The throttling quota has been exceeded.")
            await services.replicas.admin.add_partitions(
                t.name, t.count, validate_only=body.validate_only, assignments=assignments
            )
        except Exception as exc:
            result["error_code"] = error_code(exc)
            result["error_message"] = str(exc)
        results.append(result)
    throttle_ms = mutations.done()
    return build(request_response_type(request), {"throttle_time": throttle_ms, "results": results})


def topic_configs(services: BrokerServices, overrides: dict[str, str]) -> list[dict[str, Any]]:
    """Every topic key with its effective value and source."""
    effective = services.replicas.topic_config(overrides).to_props()
    out = []
    for name, key in TOPIC_CONFIG.keys.items():
        own = name in overrides
        source = SOURCE_DYNAMIC_TOPIC if own else topic_default_source(services, name)
        out.append(_config_entry(name, effective[name], key, source, read_only=False))
    return out


def _config_entry(
    name: str, value: str | None, key: ConfigKey, source: int, read_only: bool
) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": _CONFIG_TYPES.get(key.type, 0),
        "documentation": key.doc,
    }


def _cleaner_state_entry(services: BrokerServices) -> dict[str, Any]:
    """``tierlog.log.cleaner.state`` of the compacted partitions this broker leads (a
    follower cleans its own copy too, but the leader's is the one clients read)."""

    def leads(topic: str, index: int) -> bool:
        partition = services.replicas.partition(topic, index)
        return partition is not None and partition.is_leader

    return {
        "name": cleaner_state.KEY,
        "value": cleaner_state.encode(services.cleaner_state(), leads),
        "read_only": True,
        "config_source": SOURCE_DEFAULT,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": _CONFIG_TYPES["string"],
        "documentation": "The log cleaner's state of the compacted partitions this broker "
        "leads, as JSON (tierlog; only returned when asked for by name).",
    }


async def handle_describe_configs(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    results = []
    for resource in body.resources:
        result: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [],
        }
        refused = _config_refused(services, request, resource)
        if refused:
            result["error_code"] = refused
            results.append(result)
            continue
        if resource.resource_type == RESOURCE_TOPIC:
            topic = services.cluster.topic(resource.resource_name)
            if topic is None:
                result["error_code"] = ErrorCode.unknown_topic_or_partition
                result["error_message"] = f"unknown topic {resource.resource_name!r}"
                entries = []
            else:
                entries = topic_configs(services, topic.configs)
        elif resource.resource_type in (
            RESOURCE_BROKER,
            RESOURCE_BROKER_LOGGER,
            RESOURCE_CLIENT_METRICS,
        ):
            try:
                entries = _describe_other(services, resource, field(body, "include_synonyms"))
            except TopicError as exc:
                result["error_code"], result["error_message"] = exc.code, str(exc)
                entries = []
        else:
            result["error_code"] = ErrorCode.invalid_request
            result["error_message"] = f"resource type {resource.resource_type} not supported"
            entries = []
        keys = resource.configuration_keys
        if keys:
            entries = [e for e in entries if e["name"] in keys]
        result["configs"] = entries
        results.append(result)
    return build(request_response_type(request), {"throttle_time": 0, "results": results})


def _describe_other(
    services: BrokerServices, resource: Any, include_synonyms: bool
) -> list[dict[str, Any]]:
    """A BROKER, BROKER_LOGGER or client-metrics resource's entries.

    Raises:
        TopicError: the resource's name is refused.
    """
    name = resource.resource_name
    if resource.resource_type == RESOURCE_CLIENT_METRICS:
        return describe_client_metrics(services, name)
    if resource.resource_type == RESOURCE_BROKER_LOGGER:
        return describe_loggers(services, name)
    entries = describe_broker(services, name, bool(include_synonyms))
    if cleaner_state.KEY in (resource.configuration_keys or ()) and (
        name == str(services.config.broker_id)
    ):
        entries.append(_cleaner_state_entry(services))
    return entries


def _config_refused(services: BrokerServices, request: Request, resource: Any) -> int:
    """The table's check of one config resource: (Describe|Alter)Configs on the topic, or
    on the cluster for a broker (or broker logger) resource."""
    if resource.resource_type == RESOURCE_TOPIC:
        name, kind, condition = resource.resource_name, ResourceType.TOPIC, When.TOPIC_RESOURCE
    else:
        name, kind, condition = CLUSTER_NAME, ResourceType.CLUSTER, When.BROKER_RESOURCE
    return services.authz.denied(request, kind, [name], condition).get(name, 0)


def _check_alterable(resource: Any) -> None:
    if resource.resource_type != RESOURCE_TOPIC:
        raise TopicError(
            ErrorCode.invalid_request,
            f"resource type {resource.resource_type} has no configs to alter",
        )


async def _alter(
    services: BrokerServices, resource: Any, new: dict[str, str], validate_only: bool
) -> None:
    if resource.resource_type == RESOURCE_CLIENT_METRICS:
        await alter_client_metrics(services, resource.resource_name, new, validate_only)
        return
    if resource.resource_type == RESOURCE_BROKER:
        await alter_broker(services, resource.resource_name, new, validate_only)
        return
    if resource.resource_type == RESOURCE_BROKER_LOGGER:
        raise alter_loggers_refused()
    _check_alterable(resource)
    await services.replicas.admin.set_topic_configs(
        resource.resource_name, new, validate_only=validate_only
    )


async def handle_alter_configs(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    answers = []
    for resource in body.resources:
        answer: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        try:
            refused = _config_refused(services, request, resource)
            if refused:
                raise TopicError(refused, "Authorization failed.")
            # AlterConfigs replaces the whole set of overrides (not incremental).
            new = {c.name: c.value for c in resource.configs if c.value is not None}
            await _alter(services, resource, new, body.validate_only)
        except Exception as exc:
            answer["error_code"] = error_code(exc)
            answer["error_message"] = str(exc)
        answers.append(answer)
    return build(request_response_type(request), {"throttle_time": 0, "responses": answers})


async def handle_incremental_alter_configs(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    answers = []
    for resource in body.resources:
        answer: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        try:
            refused = _config_refused(services, request, resource)
            if refused:
                raise TopicError(refused, "Authorization failed.")
            ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
            if resource.resource_type in (
                RESOURCE_BROKER,
                RESOURCE_BROKER_LOGGER,
                RESOURCE_CLIENT_METRICS,
            ):
                await _incremental_other(services, resource, ops, body.validate_only)
                answers.append(answer)
                continue
            # Resource type first: a broker resource used to have its keys checked against
            # the topic keys, and was refused INVALID_CONFIG or INVALID_REQUEST by key.
            _check_alterable(resource)
            topic = services.cluster.topic(resource.resource_name)
            if topic is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition,
                    f"unknown topic {resource.resource_name!r}",
                )
            new = dict(topic.configs)
            for c in resource.configs:
                _apply_op(services, new, c.name, c.config_operation, c.value)
            await _alter(services, resource, new, body.validate_only)
        except Exception as exc:
            answer["error_code"] = error_code(exc)
            answer["error_message"] = str(exc)
        answers.append(answer)
    return build(request_response_type(request), {"throttle_time": 0, "responses": answers})


async def _incremental_other(
    services: BrokerServices,
    resource: Any,
    ops: list[tuple[str, int, str | None]],
    validate_only: bool,
) -> None:
    name = resource.resource_name
    if resource.resource_type == RESOURCE_BROKER:
        await incremental_alter_broker(services, name, ops, validate_only)
    elif resource.resource_type == RESOURCE_BROKER_LOGGER:
        incremental_alter_loggers(services, name, ops, validate_only)
    else:
        await incremental_alter_client_metrics(services, name, ops, validate_only)


def _apply_op(
    services: BrokerServices, configs: dict[str, str], name: str, op: int, value: str | None
) -> None:
    if op == OP_DELETE and name not in configs:
        # Nothing to delete is success, whatever the key (Kafka validates what remains):
        # Kafka's reassignment tool clears throttle keys tierlog never sets this way.
        return
    key = TOPIC_CONFIG.keys.get(name)
    if key is None:
        raise TopicError(ErrorCode.invalid_config, f"config {name!r}: {TOPIC_CONFIG.refusal(name)}")
    if op == OP_SET:
        configs[name] = value or ""
    elif op == OP_DELETE:
        configs.pop(name, None)
    elif op in (OP_APPEND, OP_SUBTRACT):
        if key.type != "list":
            raise TopicError(
                ErrorCode.invalid_config,
                f"config {name!r}: APPEND/SUBTRACT apply to list configs only",
            )
        current = configs.get(name)
        items = [
            v
            for v in (
                current.split(",")
                if current is not None
                else services.replicas.topic_config({}).to_props()[name].split(",")
            )
            if v
        ]
        given = [v.strip() for v in (value or "").split(",") if v.strip()]
        if op == OP_APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        configs[name] = ",".join(items)
    else:
        raise TopicError(ErrorCode.invalid_request, f"unknown config operation {op}")
