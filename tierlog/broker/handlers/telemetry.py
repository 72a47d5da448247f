"""GetTelemetrySubscriptions (API 71) and PushTelemetry (API 72): client metrics, KIP-714.

The rules live in ``tierlog.broker.client_metrics.manager``; this module turns requests
into its calls and its refusals into Kafka's error codes. The subscriptions come from the
``client-metrics`` config resources in the coordination metadata, read at each request
(the manager re-parses them only when they changed). Both APIs are announced only when
the broker has a client-metrics manager, i.e. when its metrics endpoint is on.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from tierlog.broker.client_metrics.manager import (
    ACCEPTED_COMPRESSION,
    ClientMetricsManager,
    TelemetryError,
)
from tierlog.broker.client_metrics.subscriptions import ClientInfo
from tierlog.broker.coordination.api import CLIENT_METRICS_ENTITY
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.broker.network.connection_context import CLIENT_ADDRESS, CLIENT_PORT, CLIENT_SOFTWARE
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

ZERO_UUID = uuid.UUID(int=0)


def _manager(services: BrokerServices) -> ClientMetricsManager:
    manager = services.client_metrics
    if manager is None:
        # Not announced in ApiVersions; a client sending it anyway gets Kafka's answer for
        # a broker without a metrics receiver.
        raise TelemetryError(
            ErrorCode.unsupported_version, "client metrics are off (metrics.http.port < 0)"
        )
    manager.set_subscriptions(services.cluster.entity_configs(CLIENT_METRICS_ENTITY))
    return manager


def client_info(request: Request) -> ClientInfo:
    """What a subscription may match the client on, from its connection."""
    software = CLIENT_SOFTWARE.get()
    address = CLIENT_ADDRESS.get().lstrip("/")
    return ClientInfo(
        client_id=request.client_id,
        software_name=software[0] if software else None,
        software_version=software[1] if software else None,
        source_address=address or None,
        source_port=CLIENT_PORT.get(),
    )


async def handle_get_telemetry_subscriptions(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    answer: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": 0,
        "client_instance_id": ZERO_UUID,
        "subscription_id": 0,
        "accepted_compression_types": [],
        "push_interval": 0,
        "telemetry_max_bytes": 0,
        "delta_temporality": False,
        "requested_metrics": [],
    }
    try:
        manager = _manager(services)
        instance_id, target = manager.get_subscriptions(
            body.client_instance_id or ZERO_UUID, client_info(request)
        )
    except TelemetryError as exc:
        answer["error_code"] = exc.code
    else:
        answer.update(
            client_instance_id=instance_id,
            subscription_id=target.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION),
            push_interval=target.interval_ms,
            telemetry_max_bytes=manager.telemetry_max_bytes,
            # Running totals, not deltas: a Prometheus scrape shows the last one (see the
            # manager's docstring).
            delta_temporality=False,
            requested_metrics=sorted(target.metrics),
        )
    return build(request_response_type(request), answer)


async def handle_push_telemetry(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    code: int = 0
    try:
        _manager(services).push(
            body.client_instance_id or ZERO_UUID,
            body.subscription_id,
            body.terminating,
            body.compression_type,
            body.metrics or b"",
            client_info(request),
        )
    except TelemetryError as exc:
        code = exc.code
    return build(request_response_type(request), {"throttle_time": 0, "error_code": code})
