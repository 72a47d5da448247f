"""DescribeClientQuotas and AlterClientQuotas (KIP-546): what ``kafka-configs
--entity-type clients|users`` sends. The quotas live in the coordination metadata
(ZooKeeper's ``/config/clients|users`` in a cluster) and are enforced by
``tierlog/broker/network/quotas.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker.authorization import current_context
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.broker.network.quotas import (
    QuotaError,
    check_value,
    entity_components,
    entity_path,
)
from tierlog.protocol import ApiKey, Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
# The first versions that know THROTTLING_QUOTA_EXCEEDED (KIP-599): strict from there on.
STRICT_MUTATION_VERSIONS: dict[int, int] = {
    ApiKey.CREATE_TOPICS: 6,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DELETE_TOPICS: 5,
}


class MutationQuota:
    """One CreateTopics/CreatePartitions/DeleteTopics request's ``controller_mutation_rate``
    (KIP-599): ``admit`` each topic's partitions; ``throttle_ms`` for the answer."""

    def __init__(self, services: BrokerServices, request: Request) -> None:
        self._quotas = services.quotas
        self._client_id = request.client_id
        self._user = current_context().principal.name
        self._strict = request.api_version >= STRICT_MUTATION_VERSIONS[request.api_key]
        self.throttle_ms = 0

    def admit(self, partitions: int) -> int:
        """0, or THROTTLING_QUOTA_EXCEEDED for a topic refused."""
        if self._quotas is None:
            return 0
        accepted, throttle = self._quotas.admit_mutation(
            partitions, self._client_id, self._user, strict=self._strict
        )
        if throttle > self.throttle_ms:
            self.throttle_ms = throttle
        return 0 if accepted else int(ErrorCode.throttling_quota_exceeded)

    def done(self) -> int:
        """The throttle time of the answer; the connection is muted for it (KIP-219)."""
        if self._quotas is not None and self.throttle_ms:
            self._quotas.throttle("ControllerMutation", self.throttle_ms)
        return self.throttle_ms


def _answer(request: Request, data: dict[str, Any]) -> Any:
    return build(request_response_type(request), {"throttle_time": 0, **data})


def _matches(entity: dict[str, str | None], components: list[Any], strict: bool) -> bool:
    for c in components:
        kind = str(c.entity_type)
        if kind not in entity:
            return False
        name = entity[kind]
        if c.match_type == MATCH_EXACT and name != c.match:
            return False
        if c.match_type == MATCH_DEFAULT and name is not None:
            return False
    return not strict or len(entity) == len(components)


async def handle_describe_client_quotas(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    components = list(body.components)
    kinds = [str(c.entity_type) for c in components]
    refused = services.authz.request_error(request)  # DescribeConfigs on the cluster
    if refused:
        return _answer(request, {"error_code": refused, "error_message": None, "entries": None})
    problem = None
    if len(set(kinds)) != len(kinds):
        problem = "an entity type is named twice"
    elif any(k not in ("user", "client-id", "ip") for k in kinds):
        problem = f"unknown entity types in {kinds}"
    elif any(c.match_type not in (0, 1, 2) for c in components):
        problem = "unknown match type"
    if problem is not None:
        return _answer(
            request,
            {"error_code": ErrorCode.invalid_request, "error_message": problem, "entries": None},
        )
    entries = []
    for path, values in sorted(services.cluster.client_quotas().items()):
        entity = entity_components(path)
        if not _matches(entity, components, bool(body.strict)):
            continue
        entries.append(
            {
                "entity": [
                    {"entity_type": kind, "entity_name": name} for kind, name in entity.items()
                ],
                "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())],
            }
        )
    return _answer(request, {"error_code": 0, "error_message": None, "entries": entries})


async def handle_alter_client_quotas(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    cluster = services.cluster
    refused = services.authz.request_error(request)  # AlterConfigs on the cluster
    results: list[dict[str, Any]] = []
    for entry in body.entries:
        entity = [
            {"entity_type": str(e.entity_type), "entity_name": e.entity_name} for e in entry.entity
        ]
        if refused:
            results.append({"error_code": refused, "error_message": None, "entity": entity})
            continue
        try:
            kinds = [e["entity_type"] for e in entity]
            if len(set(kinds)) != len(kinds):
                raise QuotaError("an entity type is named twice")
            path = entity_path({e["entity_type"]: e["entity_name"] for e in entity})
            values = dict(cluster.client_quotas().get(path, {}))
            for op in entry.ops:
                key = str(op.key)
                if op.remove:
                    check_value(key, 1.0)  # an unknown key is refused, also to remove
                    values.pop(key, None)
                else:
                    check_value(key, float(op.value))
                    values[key] = float(op.value)
            if not body.validate_only:
                await cluster.set_client_quotas(path, values)
            code, message = 0, None
        except QuotaError as exc:
            code, message = ErrorCode.invalid_request, str(exc)
        results.append({"error_code": code, "error_message": message, "entity": entity})
    return _answer(request, {"entries": results})
