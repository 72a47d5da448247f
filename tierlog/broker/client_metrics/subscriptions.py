"""Client-metrics subscriptions (KIP-714): the ``client-metrics`` config resources an
operator creates (``kafka-client-metrics.sh --alter --name all --metrics '*' --interval 60000``
or ``kafka-configs --entity-type client-metrics``), and which of them a client matches.

A subscription is three keys, Kafka's names and bounds (``ClientMetricsConfigs``):

- ``metrics``: metric name prefixes the client should push; ``*`` means every metric, an
  empty list none.
- ``interval.ms``: how often the client pushes, 100 ms to 1 h (default 5 min).
- ``match``: ``selector=regex`` items, all of which must match the client for the
  subscription to apply (none: every client). Selectors: ``client_instance_id``,
  ``client_id``, ``client_software_name``, ``client_software_version``,
  ``client_source_address``, ``client_source_port``. A regex must match the whole value
  (Java's ``Matcher.matches``).

A client matching several subscriptions gets the union of their metrics and the shortest
interval. Its subscription id is Kafka's: CRC-32C of the metrics set's text and the
interval, XORed with the hash of the client instance id, so a client sees the id change
exactly when what it must send changes.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from crc32c import crc32c

from tierlog.util.configdef import ConfigDef, ConfigError, ConfigKey

__all__ = [
    "ALL_METRICS",
    "CLIENT_METRICS_CONFIG",
    "ClientInfo",
    "Subscription",
    "Target",
    "parse_subscription",
    "subscription_id",
    "target_for",
]

ALL_METRICS: Final = "*"
DEFAULT_INTERVAL_MS: Final = 300_000
_MIN_INTERVAL_MS, _MAX_INTERVAL_MS = 100, 3_600_000
SELECTORS: Final = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


def _interval_check(value: Any) -> str | None:
    if _MIN_INTERVAL_MS <= value <= _MAX_INTERVAL_MS:
        return None
    return f"must be between {_MIN_INTERVAL_MS} and {_MAX_INTERVAL_MS}, got {value}"


def _match_check(value: Any) -> str | None:
    for item in value:
        selector, sep, pattern = item.partition("=")
        if not sep or not pattern:
            return f"{item!r} is not selector=regex"
        if selector not in SELECTORS:
            return f"unknown selector {selector!r}; one of {', '.join(SELECTORS)}"
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"{item!r}: not a regular expression ({exc})"
    return None


CLIENT_METRICS_CONFIG: Final = ConfigDef(
    [
        ConfigKey(
            "metrics",
            "list",
            [],
            "metric name prefixes matching clients push; * is every metric",
        ),
        ConfigKey(
            "interval.ms",
            "int",
            DEFAULT_INTERVAL_MS,
            "how often matching clients push their metrics",
            _interval_check,
        ),
        ConfigKey(
            "match",
            "list",
            [],
            "selector=regex items a client must all match (none: every client)",
            _match_check,
        ),
    ]
)


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """A stored ``client-metrics`` resource as a subscription.

    Raises:
        ConfigError: an unknown key or a bad value, naming the key.
    """
    if not name:
        raise ConfigError("name", "a client-metrics resource needs a name")
    values = CLIENT_METRICS_CONFIG.parse(configs)
    match = []
    for item in values["match"]:
        selector, _, pattern = item.partition("=")
        match.append((selector, re.compile(pattern)))
    return Subscription(name, frozenset(values["metrics"]), values["interval.ms"], tuple(match))


@dataclass(frozen=True)
class ClientInfo:
    """What the broker knows of the client asking (Kafka's ClientMetricsInstanceMetadata)."""

    client_id: str | None
    software_name: str | None
    software_version: str | None
    source_address: str | None
    source_port: int | None

    def attributes(self, instance_id: uuid.UUID) -> dict[str, str | None]:
        return {
            "client_instance_id": str(instance_id),
            "client_id": self.client_id,
            "client_software_name": self.software_name,
            "client_software_version": self.software_version,
            "client_source_address": self.source_address,
            "client_source_port": None if self.source_port is None else str(self.source_port),
        }


def _matches(subscription: Subscription, attributes: Mapping[str, str | None]) -> bool:
    for selector, pattern in subscription.match:
        value = attributes.get(selector)
        if value is None or pattern.fullmatch(value) is None:
            return False
    return True


@dataclass(frozen=True)
class Target:
    """What one client instance must push: metric prefixes (``{"*"}`` for all), how often,
    and the id that names this set."""

    metrics: frozenset[str]
    interval_ms: int
    subscription_id: int


def _java_uuid_hash(instance_id: uuid.UUID) -> int:
    # Kafka's Uuid.hashCode: the XOR of the two 64-bit halves, folded to 32 bits.
    bits = instance_id.int
    folded = (bits >> 64) ^ (bits & ((1 << 64) - 1))
    return ((folded >> 32) ^ folded) & 0xFFFFFFFF


def subscription_id(metrics: frozenset[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's ``computeSubscriptionId``, as a signed int32. (Java prints a set as
    ``[a, b]`` in hash order; any stable text serves, as only equality is ever compared.)"""
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)
    value = int(crc32c(text.encode())) ^ _java_uuid_hash(instance_id)
    return value - (1 << 32) if value >= 1 << 31 else value


def target_for(
    subscriptions: Mapping[str, Subscription], instance_id: uuid.UUID, client: ClientInfo
) -> Target:
    """The union of the matching subscriptions' metrics at the shortest interval."""
    attributes = client.attributes(instance_id)
    metrics: set[str] = set()
    interval = DEFAULT_INTERVAL_MS
    for subscription in subscriptions.values():
        if _matches(subscription, attributes):
            metrics |= subscription.metrics
            interval = min(interval, subscription.interval_ms)
    chosen = frozenset({ALL_METRICS}) if ALL_METRICS in metrics else frozenset(metrics)
    return Target(chosen, interval, subscription_id(chosen, interval, instance_id))
