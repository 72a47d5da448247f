"""Dynamic broker configuration (KIP-226): which keys may change at runtime, the layers a
broker's effective config is built from, the checks an alteration must pass, and telling
the broker's parts when their keys change (Kafka's ``DynamicBrokerConfig``).

Layers, highest first (Kafka's precedence, also the order of DescribeConfigs' synonyms)::

    DYNAMIC_BROKER_CONFIG          /config/brokers/<id>         this broker only
    DYNAMIC_DEFAULT_BROKER_CONFIG  /config/brokers/<default>    every broker
    STATIC_BROKER_CONFIG           server.properties            this broker
    DEFAULT_CONFIG                 BROKER_CONFIG's defaults

The effective config is a ``BrokerConfig`` of the three upper layers merged, so a dynamic
value passes every check a static one does, cross-checks included. ``DYNAMIC_KEYS`` is the
one table of what may change at runtime, with Kafka's update mode for each; every other
key is refused (never stored and ignored). The keys Kafka updates dynamically but tierlog
reads only at start-up are ``STATIC_HERE``, each with its reason, and so refused. A
listener's keystore and truststore keys are dynamic too, per broker and with the listener
prefix only, as in Kafka (``listener.name.<l>.ssl.keystore.location``:
``LISTENER_SSL_KEYS``); a part may check a new config before it is stored
(``Reconfigurable.validate``, Kafka's ``validateReconfiguration``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tierlog.broker.config import BROKER_CONFIG, BrokerConfig
from tierlog.broker.coordination.api import (
    BROKERS_ENTITY,
    DEFAULT_BROKER_ENTITY,
    Coordinator,
    MetadataChange,
)
from tierlog.broker.security_config import LISTENER_PREFIX, SENSITIVE
from tierlog.security.config_providers import is_reference
from tierlog.security.tls_rotation import RECONFIGURABLE_SSL_KEYS
from tierlog.util.configdef import PER_BROKER, READ_ONLY, ConfigError

log = logging.getLogger(__name__)


# The broker keys that set topics' defaults (``log.*``, Kafka's DynamicLogConfig): a topic
# without its own override follows a new value at once. Kafka makes only the first synonym
# of each dynamic (log.retention.ms, not .minutes or .hours; log.roll.ms, not .hours).
LOG_DEFAULT_KEYS = (
    "log.segment.bytes",
    "log.roll.ms",
    "log.retention.ms",
    "log.retention.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.message.timestamp.type",
    "log.cleanup.policy",
    "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.local.retention.ms",
    "log.local.retention.bytes",
    "message.max.bytes",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "min.insync.replicas",
)
# The log cleaner's settings (Kafka's LogCleaner.ReconfigurableConfigs).
CLEANER_KEYS = (
    "log.cleaner.threads",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.backoff.ms",
)
# Connection limits shared by every listener (Kafka's DynamicListenerConfig / quotas).
CONNECTION_KEYS = ("max.connections", "max.connections.per.ip", "max.connection.creation.rate")
# The remote tier's upload and fetch rates (KIP-956) and the bound on one remote read
# (Kafka's DynamicRemoteLogConfig).
REMOTE_KEYS = (
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.fetch.max.wait.ms",
)
# When idle idempotent producers are forgotten (Kafka's DynamicProducerStateManagerConfig).
PRODUCER_STATE_KEYS = ("producer.id.expiration.ms",)
# KIP-890 part 1's check that a transactional write's partition was added first.
TRANSACTION_KEYS = ("transaction.partition.verification.enable",)
# The replication throttles' rates (KIP-73; Kafka's BrokerConfigHandler reads this broker's
# value, else the cluster default), and the log-dir move rate that kafka-reassign-partitions
# sets beside them (--replica-alter-log-dirs-throttle) and clears with them (--verify).
REPLICATION_THROTTLE_KEYS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)

# The controller's: turning it on elects leaders for offline partitions at once.
CONTROLLER_KEYS = ("unclean.leader.election.enable",)

# Each with Kafka's update mode (config_notes): PER_BROKER keys may be set per broker only,
# CLUSTER_WIDE ones as the cluster default too (and per broker, "for testing", Kafka says).
DYNAMIC_KEYS: Mapping[str, str] = {
    key: BROKER_CONFIG.keys[key].update_mode or READ_ONLY
    for key in (
        *LOG_DEFAULT_KEYS,
        *CLEANER_KEYS,
        *CONNECTION_KEYS,
        *REMOTE_KEYS,
        *REPLICATION_THROTTLE_KEYS,
        *CONTROLLER_KEYS,
        *PRODUCER_STATE_KEYS,
        *TRANSACTION_KEYS,
    )
}

# Keys Kafka updates at run time that tierlog reads only at start, and why: refused
# dynamically with Kafka's "Cannot update these configs dynamically". (Kafka's
# num.*.threads are not keys here at all: a broker is one event loop, docs/configuration.md.)
STATIC_HERE: Mapping[str, str] = {
    "listeners": "a listener is added or removed by a rolling restart",
    "advertised.listeners": "a listener is added or removed by a rolling restart",
}

# A listener's keystore and truststore (``listener.name.<l>.<key>``, Kafka's
# SslConfigs.RECONFIGURABLE_CONFIGS): per broker only, and never without the prefix.
LISTENER_SSL_KEYS = frozenset(RECONFIGURABLE_SSL_KEYS)


def listener_ssl_key(name: str) -> str | None:
    """``listener.name.<l>.<key>`` -> ``<key>`` when it is a dynamic TLS key, else None."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    _, dot, key = name[len(LISTENER_PREFIX) :].partition(".")
    return key if dot and key in LISTENER_SSL_KEYS else None


def is_dynamic(name: str) -> bool:
    return name in DYNAMIC_KEYS or listener_ssl_key(name) is not None


def value_of(config: BrokerConfig, name: str) -> Any:
    """``name``'s value in ``config``; a ``listener.name.*`` key's as written, else None."""
    if name.startswith(LISTENER_PREFIX):
        return config.security.get(name)
    return config[name]


# Names under which a key's value may be set, the key first (Kafka's brokerSynonyms): a
# DescribeConfigs synonym list walks them, layer by layer.
SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.hours": ("log.roll.hours",),
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.minutes": ("log.retention.minutes", "log.retention.hours"),
}

# DescribeConfigs' ConfigSource values (KIP-226).
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


class AlterRefused(ValueError):
    """An alteration refused as a whole; ``invalid_request`` tells Kafka's
    INVALID_REQUEST (a key that is not dynamic, a bad resource name) from INVALID_CONFIG
    (an unknown key, a bad value)."""

    def __init__(self, message: str, *, invalid_request: bool) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


@dataclass(frozen=True)
class Layers:
    """The dynamic layers as stored: this broker's overrides and the cluster defaults."""

    broker: Mapping[str, str]
    default: Mapping[str, str]


def stored_layers(coordinator: Coordinator, broker_id: int) -> Layers:
    entities = coordinator.entity_configs(BROKERS_ENTITY)
    return Layers(
        dict(entities.get(str(broker_id), {})), dict(entities.get(DEFAULT_BROKER_ENTITY, {}))
    )


def merged(static: BrokerConfig, layers: Layers) -> BrokerConfig:
    """The effective config: ``static`` under the cluster defaults under this broker's.

    Raises:
        ConfigError: naming the key whose value (or combination) is refused.
    """
    return BrokerConfig({**static.raw, **layers.default, **layers.broker})


def entity_of(resource_name: str, broker_id: int) -> str:
    """The entity a BROKER resource names: this broker's id, or "" for the cluster default
    (Kafka's ZkAdminManager.getBrokerId, with its messages).

    Raises:
        AlterRefused: not an integer, or another broker's id.
    """
    if not resource_name:
        return DEFAULT_BROKER_ENTITY
    try:
        number = int(resource_name)
    except ValueError:
        raise AlterRefused(
            f"Broker id must be an integer, but it is: {resource_name}", invalid_request=True
        ) from None
    if number != broker_id:
        raise AlterRefused(
            f"Unexpected broker id, expected {broker_id}, but received {resource_name}",
            invalid_request=True,
        )
    return str(number)


def check_keys(keys: Collection[str], *, per_broker: bool) -> None:
    """Every key must be known and dynamic, at the level it is set (Kafka's
    DynamicBrokerConfig.validateConfigs); all at fault are named at once.

    Raises:
        AlterRefused: INVALID_CONFIG for unknown keys, INVALID_REQUEST otherwise.
    """
    unknown = sorted(
        k for k in keys if k not in BROKER_CONFIG.keys and not k.startswith(LISTENER_PREFIX)
    )
    if unknown:
        reasons = "; ".join(f"{k!r}: {BROKER_CONFIG.refusal(k)}" for k in unknown)
        raise AlterRefused(f"Unknown broker config {reasons}", invalid_request=False)
    unprefixed = sorted(k for k in keys if k in LISTENER_SSL_KEYS)
    if unprefixed:
        raise AlterRefused(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {_scala_set(unprefixed)}",
            invalid_request=True,
        )
    static = sorted(k for k in keys if not is_dynamic(k))
    if static:
        raise AlterRefused(
            f"Cannot update these configs dynamically: {_scala_set(static)}",
            invalid_request=True,
        )
    per_broker_only = sorted(
        k for k in keys if listener_ssl_key(k) is not None or DYNAMIC_KEYS[k] == PER_BROKER
    )
    if per_broker_only and not per_broker:
        raise AlterRefused(
            "Cannot update these configs at default cluster level, broker id must be "
            f"specified: {_scala_set(per_broker_only)}",
            invalid_request=True,
        )


def check_alteration(
    static: BrokerConfig, layers: Layers, entity: str, new: Mapping[str, str]
) -> Layers:
    """The layers once ``entity``'s overrides are replaced by ``new``, checked whole: the
    keys (``check_keys``), then every value in the config it makes for this broker.

    Raises:
        AlterRefused: naming each key at fault and why.
    """
    per_broker = entity != DEFAULT_BROKER_ENTITY
    check_keys(list(new), per_broker=per_broker)
    check_no_stored_secrets(new)
    after = Layers(
        dict(new) if per_broker else layers.broker, layers.default if per_broker else dict(new)
    )
    try:
        merged(static, after)
    except ConfigError as exc:
        raise AlterRefused(str(exc), invalid_request=False) from None
    return after


def check_no_stored_secrets(new: Mapping[str, str]) -> None:
    """A listener's key password, keystore password or inline key is stored only as a
    config provider reference (``${file:path:key}``, KIP-421 resolves it), never as the
    secret: the stored layers are plain metadata (a ZooKeeper znode, the single node's
    file), and tierlog has no ``password.encoder.secret`` (Kafka's ZooKeeper brokers refuse
    such keys without one, with this message's first words).

    Raises:
        AlterRefused: INVALID_REQUEST naming the keys.
    """
    literal = sorted(
        k
        for k, v in new.items()
        if listener_ssl_key(k) in SENSITIVE and v and not is_reference(str(v))
    )
    if literal:
        raise AlterRefused(
            "Password encoder secret not configured: tierlog stores no secret in its "
            f"metadata; set {', '.join(literal)} to a config provider reference, e.g. "
            "${file:/etc/tierlog/secrets.properties:ssl.key.password} or "
            "${directory:/run/secrets:tls.key}",
            invalid_request=True,
        )


def _scala_set(keys: Sequence[str]) -> str:
    # Kafka's message prints a Scala Set: "Set(log.dirs, broker.id)".
    return f"Set({', '.join(keys)})"


# -- describing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: int


def text_of(value: Any) -> str | None:
    """A parsed value as Kafka prints it (lists comma-joined, booleans lower case)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def synonyms(
    name: str, static: BrokerConfig, layers: Layers, *, per_broker: bool = True
) -> list[Synonym]:
    """Where ``name``'s value may come from, highest first: each layer in turn, each of the
    key's synonyms within it (Kafka's ConfigHelper.configSynonyms). The first is the one in
    force. ``per_broker`` False (describing the cluster default) leaves this broker's own
    layer out."""
    names = SYNONYMS.get(name, (name,))
    defaults = {n: BROKER_CONFIG.keys[n].default for n in names if n in BROKER_CONFIG.keys}
    found: list[Synonym] = []
    sources: list[tuple[Mapping[str, Any], int]] = [
        (layers.default, SOURCE_DYNAMIC_DEFAULT_BROKER),
        (static.raw, SOURCE_STATIC_BROKER),
        (defaults, SOURCE_DEFAULT),
    ]
    if per_broker:
        sources.insert(0, (layers.broker, SOURCE_DYNAMIC_BROKER))
    for values, source in sources:
        for synonym in names:
            value = values.get(synonym)
            if value is not None:
                found.append(Synonym(synonym, text_of(value), source))
    return found


# -- applying -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reconfigurable:
    """A part of the broker that takes new values of ``keys`` at runtime (Kafka's
    ``Reconfigurable``): ``apply`` gets the whole new effective config; ``validate``, if
    any, checks it first, before an alteration is stored, raising ``ConfigError`` naming
    the key (Kafka's ``validateReconfiguration``)."""

    name: str
    keys: frozenset[str]
    apply: Callable[[BrokerConfig], None]
    validate: Callable[[BrokerConfig], None] | None = None


class DynamicBrokerConfig:
    """This broker's effective config, kept current with the stored dynamic layers.

    Every metadata change (``Coordinator.on_change``: a ZooKeeper config change
    notification naming ``brokers/<id>`` or ``brokers/<default>``, or the single node's own
    write) reads the layers again; when they differ, the config is merged again and each
    ``Reconfigurable`` whose keys changed value is told. A stored layer that no longer
    makes a valid config (written by another tool) is logged and the last good config kept.
    Event loop only.

    Args:
        static: the config the broker started with (server.properties).
        coordinator: where the layers are stored.
        reconfigurables: the parts to tell, in order.
    """

    def __init__(
        self,
        static: BrokerConfig,
        coordinator: Coordinator,
        reconfigurables: Sequence[Reconfigurable],
    ) -> None:
        self.static = static
        self._coordinator = coordinator
        self._reconfigurables = tuple(reconfigurables)
        self._layers = Layers({}, {})
        self._current = static
        for part in self._reconfigurables:
            not_dynamic = {k for k in part.keys if not is_dynamic(k)}
            if not_dynamic:
                raise ValueError(f"{part.name}: {sorted(not_dynamic)} are not in DYNAMIC_KEYS")

    @property
    def current(self) -> BrokerConfig:
        return self._current

    @property
    def layers(self) -> Layers:
        return self._layers

    def start(self) -> None:
        """Apply what is stored now, then follow every change."""
        self.refresh()
        self._coordinator.on_change(self._on_change)

    def _on_change(self, _change: MetadataChange | None) -> None:
        self.refresh()

    def check_reconfiguration(self, after: Layers, touched: Collection[str] = ()) -> None:
        """Each part whose keys change (or are named in ``touched``) checks the config that
        ``after`` makes, before it is stored.

        Raises:
            AlterRefused: INVALID_REQUEST, as Kafka answers a failed validation, naming
                the part, the key and why.
        """
        try:
            new = merged(self.static, after)
        except ConfigError as exc:
            raise AlterRefused(str(exc), invalid_request=False) from None
        for part in self._reconfigurables:
            if part.validate is None or not self._changed(part, self._current, new, touched):
                continue
            try:
                part.validate(new)
            except ConfigError as exc:
                raise AlterRefused(
                    f"Validation of dynamic config update of {part.name} failed: {exc}",
                    invalid_request=True,
                ) from None

    @staticmethod
    def _changed(
        part: Reconfigurable, old: BrokerConfig, new: BrokerConfig, touched: Collection[str]
    ) -> list[str]:
        return sorted(k for k in part.keys if value_of(old, k) != value_of(new, k) or k in touched)

    def refresh(self, touched: Collection[str] = ()) -> None:
        """Read the stored layers; apply them if they changed. ``touched``: keys just set
        (to the value they had, perhaps): their parts are told anyway, as Kafka reloads a
        keystore set again to the same path whose file changed."""
        layers = stored_layers(self._coordinator, self.static.broker_id)
        if layers == self._layers and not touched:
            return
        try:
            new = merged(self.static, layers) if layers != self._layers else self._current
        except ConfigError as exc:
            log.error("dynamic broker config not applied, the last good one is kept: %s", exc)
            return
        old, self._current, self._layers = self._current, new, layers
        for part in self._reconfigurables:
            changed = self._changed(part, old, new, touched)
            if not changed:
                continue
            try:
                part.apply(new)
            except Exception:
                log.exception("reconfiguring %s (%s) failed", part.name, ", ".join(changed))
                continue
            log.info("reconfigured %s: %s", part.name, ", ".join(changed))
