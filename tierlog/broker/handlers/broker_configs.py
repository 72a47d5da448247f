"""The BROKER (4) and BROKER_LOGGER (8) config resources of DescribeConfigs, AlterConfigs
and IncrementalAlterConfigs, reached through ``admin``.

A BROKER resource is named by this broker's id (its own overrides) or "" (the cluster
default); its keys are checked by ``dynamic_config`` before anything is stored, stored in
the coordination metadata (``/config/brokers/<id>`` or ``/config/brokers/<default>``) and
applied by every broker when it sees them. DescribeConfigs answers each key's value in
force, its source and, when asked, its synonyms in Kafka's precedence order; ``read_only``
is true of every key ``dynamic_config.is_dynamic`` refuses. A BROKER_LOGGER resource is
this broker's Python loggers (``broker_loggers``), changed at runtime and not stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker import broker_loggers, dynamic_config
from tierlog.broker.config import BROKER_CONFIG, broker_keys_of
from tierlog.broker.coordination.api import BROKERS_ENTITY, DEFAULT_BROKER_ENTITY
from tierlog.broker.dynamic_config import (
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_STATIC_BROKER,
    AlterRefused,
    DynamicBrokerConfig,
    Layers,
)
from tierlog.broker.replication.topic_error import TopicError
from tierlog.broker.security_config import SENSITIVE, is_listener_key, listener_base_key
from tierlog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

SOURCE_DYNAMIC_BROKER_LOGGER = 6
# ConfigType values (DescribeConfigs v3+).
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _dynamic(services: BrokerServices) -> DynamicBrokerConfig:
    if services.dynamic_config is None:  # services built by hand without one (tests)
        return DynamicBrokerConfig(services.config, services.cluster, ())
    return services.dynamic_config


def _refused(exc: AlterRefused | broker_loggers.LoggerError, kind: str, name: str) -> TopicError:
    if exc.invalid_request:
        # Kafka wraps a ConfigException so (ZkAdminManager.alterConfigs).
        return TopicError(
            ErrorCode.invalid_request,
            f"Invalid config value for resource ConfigResource(type={kind}, name='{name}'): {exc}",
        )
    return TopicError(ErrorCode.invalid_config, str(exc))


# -- BROKER ---------------------------------------------------------------------------------


def describe_broker(
    services: BrokerServices, name: str, include_synonyms: bool
) -> list[dict[str, Any]]:
    """This broker's keys (``name`` its id), or the cluster defaults set (``name`` ""), as
    Kafka's ConfigHelper describes them.

    Raises:
        TopicError: INVALID_REQUEST, another broker's id or not a number.
    """
    dynamic = _dynamic(services)
    broker_id = services.config.broker_id
    if name and name != str(broker_id):
        try:
            int(name)
            problem = f"Unexpected broker id, expected {broker_id} or empty string, but received"
        except ValueError:
            problem = "Broker id must be an integer, but it is:"
        raise TopicError(ErrorCode.invalid_request, f"{problem} {name}")
    per_broker = bool(name)
    layers = dynamic.layers
    # The per-listener keys set (listener.name.<l>.*), after the broker's own, as Kafka
    # lists them: a keystore set by kafka-configs shows in its --describe.
    listener_keys = sorted(k for k in dynamic.current.security if is_listener_key(k))
    names = [*BROKER_CONFIG.keys, *listener_keys] if per_broker else sorted(layers.default)
    entries = []
    for key_name in names:
        key = BROKER_CONFIG.keys.get(key_name)
        found = dynamic_config.synonyms(key_name, dynamic.static, layers, per_broker=per_broker)
        sensitive = key_name in SENSITIVE or listener_base_key(key_name) in SENSITIVE
        if per_broker:
            value = dynamic_config.text_of(dynamic_config.value_of(dynamic.current, key_name))
        else:
            value = layers.default.get(key_name)
        entries.append(
            {
                "name": key_name,
                "value": None if sensitive else value,
                "read_only": not dynamic_config.is_dynamic(key_name),
                "config_source": found[0].source if found else SOURCE_DEFAULT,
                "is_sensitive": sensitive,
                "synonyms": [
                    {"name": s.name, "value": None if sensitive else s.value, "source": s.source}
                    for s in found
                ]
                if include_synonyms
                else [],
                "config_type": CONFIG_TYPES.get(key.type, 0) if key else 0,
                "documentation": key.doc if key else None,
            }
        )
    return entries


def topic_default_source(services: BrokerServices, topic_key: str) -> int:
    """Where the broker default of ``topic_key`` comes from: this broker's dynamic
    override, the cluster's, server.properties, or the built-in default."""
    dynamic = _dynamic(services)
    keys = broker_keys_of(topic_key)
    layers = dynamic.layers
    for values, source in (
        (layers.broker, SOURCE_DYNAMIC_BROKER),
        (layers.default, SOURCE_DYNAMIC_DEFAULT_BROKER),
        (dynamic.static.raw, SOURCE_STATIC_BROKER),
    ):
        if any(k in values for k in keys):
            return source
    return SOURCE_DEFAULT


def _stored(services: BrokerServices, entity: str) -> dict[str, str]:
    return dict(services.cluster.entity_configs(BROKERS_ENTITY).get(entity, {}))


async def alter_broker(
    services: BrokerServices, name: str, new: dict[str, str], validate_only: bool
) -> None:
    """Replace the overrides of broker ``name`` ("" the cluster default) by ``new``, once
    every key and value is checked; nothing is stored if one is refused.

    Raises:
        TopicError: INVALID_REQUEST (a key not dynamic, a bad name) or INVALID_CONFIG (an
            unknown key, a bad value), naming each key at fault.
    """
    dynamic = _dynamic(services)
    try:
        entity = dynamic_config.entity_of(name, services.config.broker_id)
        layers = Layers(
            _stored(services, str(services.config.broker_id)),
            _stored(services, DEFAULT_BROKER_ENTITY),
        )
        after = dynamic_config.check_alteration(dynamic.static, layers, entity, new)
        # A keystore set again to the path it had is read again, as Kafka does: its file
        # may have changed.
        touched = [k for k in new if dynamic_config.listener_ssl_key(k) is not None]
        dynamic.check_reconfiguration(after, touched)
    except AlterRefused as exc:
        raise _refused(exc, "BROKER", name) from None
    if not validate_only:
        await services.cluster.set_entity_configs(BROKERS_ENTITY, entity, new)
        dynamic.refresh(touched)  # applied here before the answer, whichever coordinator


async def incremental_alter_broker(
    services: BrokerServices,
    name: str,
    ops: list[tuple[str, int, str | None]],
    validate_only: bool,
) -> None:
    """(key, operation, value) on the stored overrides of broker ``name``, in order, then
    ``alter_broker`` with the result. Deleting a key that is not set succeeds whatever the
    key (Kafka's reassignment tool clears throttle rates so).

    Raises:
        TopicError: as ``alter_broker``; APPEND/SUBTRACT on a key that is not a list.
    """
    try:
        entity = dynamic_config.entity_of(name, services.config.broker_id)
    except AlterRefused as exc:
        raise _refused(exc, "BROKER", name) from None
    configs = _stored(services, entity)
    before = dict(configs)
    for key_name, op, value in ops:
        if op == OP_SET:
            configs[key_name] = value or ""
        elif op == OP_DELETE:
            configs.pop(key_name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            key = BROKER_CONFIG.keys.get(key_name)
            if key is None or key.type != "list":
                raise TopicError(
                    ErrorCode.invalid_config,
                    f"config {key_name!r}: APPEND/SUBTRACT apply to list configs only",
                )
            current = configs.get(key_name)
            if current is None:
                current = dynamic_config.text_of(_dynamic(services).current[key_name]) or ""
            items = [v for v in current.split(",") if v]
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == OP_APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            configs[key_name] = ",".join(items)
        else:
            raise TopicError(ErrorCode.invalid_request, f"unknown config operation {op}")
    rereads = any(dynamic_config.listener_ssl_key(k) is not None for k, _, _ in ops)
    if configs == before and not rereads:
        return  # nothing changes (only absent keys deleted): nothing to check or store
    await alter_broker(services, name, configs, validate_only)


# -- BROKER_LOGGER --------------------------------------------------------------------------


def _check_logger_resource(services: BrokerServices, name: str) -> None:
    broker_id = services.config.broker_id
    if name != str(broker_id):
        raise TopicError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {broker_id} but received {name}",
        )


def describe_loggers(services: BrokerServices, name: str) -> list[dict[str, Any]]:
    """Every logger of this broker with its level (source DYNAMIC_BROKER_LOGGER_CONFIG, as
    Kafka answers for each)."""
    _check_logger_resource(services, name)
    return [
        {
            "name": logger,
            "value": level,
            "read_only": False,
            "config_source": SOURCE_DYNAMIC_BROKER_LOGGER,
            "is_sensitive": False,
            "synonyms": [],
            "config_type": CONFIG_TYPES["string"],
            "documentation": None,
        }
        for logger, level in broker_loggers.loggers().items()
    ]


def incremental_alter_loggers(
    services: BrokerServices,
    name: str,
    ops: list[tuple[str, int, str | None]],
    validate_only: bool,
) -> None:
    """SET or DELETE logger levels, all checked before any is applied.

    Raises:
        TopicError: INVALID_REQUEST or INVALID_CONFIG with Kafka's messages.
    """
    _check_logger_resource(services, name)
    try:
        broker_loggers.check(ops)
    except broker_loggers.LoggerError as exc:
        raise _refused(exc, "BROKER_LOGGER", name) from None
    if not validate_only:
        broker_loggers.apply(ops)


def alter_loggers_refused() -> TopicError:
    """AlterConfigs (the deprecated, whole-set one) on a logger resource: Kafka's answer."""
    return TopicError(
        ErrorCode.invalid_request,
        "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER",
    )
