"""What ``tierlog topics describe`` says of a compacted partition's cleaning: its dirty ratio
and last clean, asked of each broker as the read-only config ``tierlog.log.cleaner.state``
(``tierlog.broker.cleaner_state`` says why a config).

confluent-kafka's DescribeConfigs always asks for every key, and the broker returns this
one only when it is named, so the request goes through tierlog's own client
(``tierlog.client.BrokerConnection``, with the caller's TLS and SASL settings, a
``ClientSecurity``). Whatever does not answer the key — a Kafka broker, an older tierlog, a
broker out of reach, a principal without DescribeConfigs on the cluster — adds nothing to
the output: the state is a courtesy, never a reason for describe to fail.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tierlog.broker import cleaner_state

if TYPE_CHECKING:
    from tierlog.security.client_config import ClientSecurity

log = logging.getLogger(__name__)

# DescribeConfigs v4 (flexible): Kafka 2.8 and later, and every Kafka 4.x (which dropped v0).
_RESOURCE_BROKER = 4
_UNKNOWN = object()

BrokerStates = dict[int, dict[tuple[str, int], dict[str, object]] | None]


def broker_states(
    brokers: Mapping[int, tuple[str, int]],
    timeout: float,
    security: ClientSecurity | None = None,
) -> BrokerStates:
    """``broker id -> its states`` (None: its cleaner is off) of the brokers that answer
    the key; ``brokers`` maps ids to their ``(host, port)``, reached with ``security``
    (None: PLAINTEXT)."""
    from kio.schema.describe_configs.v4.request import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )
    from kio.static.primitive import i8

    from tierlog.client import BrokerConnection

    out: BrokerStates = {}
    for broker_id, (host, port) in sorted(brokers.items()):
        request = DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=i8(_RESOURCE_BROKER),
                    resource_name=str(broker_id),
                    configuration_keys=(cleaner_state.KEY,),
                ),
            )
        )
        connection = BrokerConnection(
            host, port, timeout=timeout, client_id="tierlog-topics", security=security
        )
        try:
            response = connection.call(request)
            value = _value(response)
            if value is not _UNKNOWN:
                out[broker_id] = cleaner_state.decode(value)  # type: ignore[arg-type]
        except (OSError, ValueError) as exc:
            log.debug("broker %d: no %s (%s)", broker_id, cleaner_state.KEY, exc)
        finally:
            connection.close()
    return out


def _value(response: object) -> object:
    for result in getattr(response, "results", ()):
        if result.error_code != 0:
            return _UNKNOWN
        for config in result.configs:
            if config.name == cleaner_state.KEY:
                return config.value
    return _UNKNOWN


def _ago(ms: int) -> str:
    seconds = max(0, ms) // 1000
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 120 * 60:
        return f"{seconds // 60} min"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def summary(state: Mapping[str, object] | None, now_ms: int, broker_id: int) -> str:
    """One partition's cleaning in words, e.g. ``dirty ratio 0.42, last clean 12 s ago
    (5,000 of 20,000 records kept)``; ``state`` None means the leader's cleaner is off."""
    if state is None:
        return f"not cleaned: log.cleaner.enable=false on broker {broker_id}"
    ratio = f"dirty ratio {float(state.get('dirty_ratio') or 0):.2f}"  # type: ignore[arg-type]
    last = state.get("last_clean")
    if state.get("uncleanable"):
        return f"{ratio}, not cleaned: {state['uncleanable']}"
    if state.get("cleaning"):
        return f"{ratio}, cleaning"
    if not isinstance(last, Mapping):
        if state.get("remote_storage"):
            return f"{ratio}, remote storage: not cleaned locally yet"
        return f"{ratio}, never cleaned"
    kept, read = int(last.get("records_kept", 0)), int(last.get("records_read", 0))
    age = _ago(now_ms - int(last.get("time_ms", now_ms)))
    return f"{ratio}, last clean {age} ago ({kept:,} of {read:,} records kept)"
