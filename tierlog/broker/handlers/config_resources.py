"""ListConfigResources (API 74), and the ``client-metrics`` config resources (type 16) that
DescribeConfigs and (Incremental)AlterConfigs reach through ``admin``.

ListConfigResources v0 (once ListClientMetricsResources) names the client-metrics
subscriptions; v1 (KIP-1142) names the resources of the types asked for, all supported
types when none is: topics (2), brokers (4), client-metrics (16) and groups (32, the groups
with config overrides: none, as tierlog's groups take no per-group configs yet). Broker
loggers (8) are not listed (DescribeConfigs answers them, ``broker_configs``), so asking for
them is UNSUPPORTED_VERSION, as Kafka answers for a type it does not list.

A client-metrics resource is a subscription (``tierlog.broker.client_metrics
.subscriptions``): its keys are checked when altered (an unknown key is INVALID_REQUEST, a
bad value INVALID_CONFIG, as Kafka's ``ClientMetricsConfigs.validate``), stored in the
coordination metadata (``/config/client-metrics/<name>`` in ZooKeeper) and described with
source CLIENT_METRICS_CONFIG (7), only the keys set. Altering every key away removes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker.client_metrics.subscriptions import CLIENT_METRICS_CONFIG, parse_subscription
from tierlog.broker.coordination.api import CLIENT_METRICS_ENTITY
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.broker.replication.topic_error import TopicError
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field
from tierlog.util.configdef import ConfigError

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

RESOURCE_TOPIC = 2
RESOURCE_BROKER_LOGGER = 8
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
LISTED_TYPES = (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP)
SOURCE_CLIENT_METRICS = 7
_CONFIG_TYPES = {"int": 3, "list": 7}


async def handle_list_config_resources(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    wanted = list(field(body, "resource_types", ()) or ())
    if request.api_version == 0:
        wanted = [RESOURCE_CLIENT_METRICS]
    elif not wanted:
        wanted = list(LISTED_TYPES)
    answer: dict[str, Any] = {"throttle_time": 0, "error_code": 0, "config_resources": []}
    refused = services.authz.request_error(request)  # DescribeConfigs on the cluster
    if refused:
        answer["error_code"] = refused
        return build(request_response_type(request), answer)
    if any(kind not in LISTED_TYPES for kind in wanted):
        answer["error_code"] = ErrorCode.unsupported_version
        return build(request_response_type(request), answer)
    found: list[tuple[int, str]] = []
    if RESOURCE_CLIENT_METRICS in wanted:
        names = services.cluster.entity_configs(CLIENT_METRICS_ENTITY)
        found += [(RESOURCE_CLIENT_METRICS, name) for name in sorted(names)]
    if RESOURCE_BROKER in wanted:
        found += [(RESOURCE_BROKER, str(b.broker_id)) for b in services.cluster.brokers()]
    if RESOURCE_TOPIC in wanted:
        found += [(RESOURCE_TOPIC, name) for name in sorted(services.cluster.topics())]
    answer["config_resources"] = [
        {"resource_name": name, "resource_type": kind} for kind, name in found
    ]
    return build(request_response_type(request), answer)


def describe_client_metrics(services: BrokerServices, name: str) -> list[dict[str, Any]]:
    """The keys set on subscription ``name`` (none for an unknown name, as in Kafka)."""
    _require_name(name)
    stored = services.cluster.entity_configs(CLIENT_METRICS_ENTITY).get(name, {})
    entries = []
    for key_name, value in sorted(stored.items()):
        key = CLIENT_METRICS_CONFIG.keys.get(key_name)
        entries.append(
            {
                "name": key_name,
                "value": value,
                "read_only": False,
                "config_source": SOURCE_CLIENT_METRICS,
                "is_sensitive": False,
                "synonyms": [],
                "config_type": _CONFIG_TYPES.get(key.type, 0) if key else 0,
                "documentation": key.doc if key else None,
            }
        )
    return entries


def current_client_metrics(services: BrokerServices, name: str) -> dict[str, str]:
    _require_name(name)
    return dict(services.cluster.entity_configs(CLIENT_METRICS_ENTITY).get(name, {}))


async def alter_client_metrics(
    services: BrokerServices, name: str, configs: dict[str, str], validate_only: bool
) -> None:
    """Check ``configs`` as a whole subscription, then store it ({} removes it).

    Raises:
        TopicError: INVALID_REQUEST (unknown key, empty name) or INVALID_CONFIG (bad value).
    """
    _require_name(name)
    unknown = sorted(set(configs) - set(CLIENT_METRICS_CONFIG.keys))
    if unknown:
        raise TopicError(
            ErrorCode.invalid_request,
            f"unknown client metrics configuration: {', '.join(unknown)}; the keys are "
            f"{', '.join(CLIENT_METRICS_CONFIG.keys)}",
        )
    if configs:
        try:
            parse_subscription(name, configs)
        except ConfigError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None
    if not validate_only:
        await services.cluster.set_entity_configs(CLIENT_METRICS_ENTITY, name, configs)


async def incremental_alter_client_metrics(
    services: BrokerServices,
    name: str,
    ops: list[tuple[str, int, str | None]],
    validate_only: bool,
) -> None:
    """IncrementalAlterConfigs on a subscription: (key, operation, value) applied in order
    (SET 0, DELETE 1, APPEND 2 and SUBTRACT 3 on the list keys), then ``alter_client_metrics``.

    Raises:
        TopicError: as ``alter_client_metrics``; APPEND/SUBTRACT on ``interval.ms``.
    """
    configs = current_client_metrics(services, name)
    for key_name, op, value in ops:
        if op == 0:
            configs[key_name] = value or ""
        elif op == 1:
            configs.pop(key_name, None)
        elif op in (2, 3):
            key = CLIENT_METRICS_CONFIG.keys.get(key_name)
            if key is None or key.type != "list":
                raise TopicError(
                    ErrorCode.invalid_config,
                    f"config {key_name!r}: APPEND/SUBTRACT apply to list configs only",
                )
            items = [v for v in configs.get(key_name, "").split(",") if v]
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == 2:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            configs[key_name] = ",".join(items)
        else:
            raise TopicError(ErrorCode.invalid_request, f"unknown config operation {op}")
    await alter_client_metrics(services, name, configs, validate_only)


def _require_name(name: str) -> None:
    if not name:
        raise TopicError(
            ErrorCode.invalid_request, "a client-metrics subscription name must not be empty"
        )
