"""KIP-430 authorized operations: the 32-bit field of ACL operation codes a principal may
perform on a resource, as Metadata, DescribeGroups, DescribeCluster and
DescribeTopicPartitions report when asked (``include_*_authorized_operations``).

Kafka's ``AuthHelper.authorizedOperations``: the operations the resource type supports
(``AclEntry.supportedOperations``, below), each asked of the authorizer without an audit
line; without an authorizer (no ``authorizer.class.name``), all of them. A request that did
not ask gets ``OMITTED`` (Integer.MIN_VALUE), which clients read as "not requested".

This is the one place handlers ask: when security (issue 22) gives ``BrokerServices`` an
authorizer and connections their principals, ``request_context`` is where a request's
principal comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tierlog.broker.server import CLIENT_ADDRESS
from tierlog.security.acl import AclOperation as Op
from tierlog.security.acl import ResourcePattern, ResourceType
from tierlog.security.api import Action, AuthorizationResult, RequestContext
from tierlog.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices
    from tierlog.protocol import Request

__all__ = ["OMITTED", "SUPPORTED_OPERATIONS", "authorized_operations", "request_context"]

OMITTED: Final = -(2**31)

# Kafka's AclEntry.supportedOperations.
SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[Op, ...]]] = {
    ResourceType.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def request_context(request: Request) -> RequestContext:
    """Who asks: ``User:ANONYMOUS`` until connections carry principals (issue 22)."""
    return RequestContext(
        principal=ANONYMOUS,
        client_host=CLIENT_ADDRESS.get().lstrip("/"),
        api_key=request.api_key,
        client_id=request.client_id,
    )


def authorized_operations(
    services: BrokerServices,
    request: Request,
    resource_type: ResourceType,
    name: str,
    *,
    requested: bool = True,
) -> int:
    """The KIP-430 bit field of ``resource_type``/``name`` for the requesting principal,
    or ``OMITTED`` when the request did not ask."""
    if not requested:
        return OMITTED
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer = services.authorizer
    if authorizer is None:
        allowed = supported
    else:
        resource = ResourcePattern(resource_type, name)
        actions = [
            Action(op, resource, log_if_allowed=False, log_if_denied=False) for op in supported
        ]
        results = authorizer.authorize(request_context(request), actions)
        allowed = tuple(
            op
            for op, result in zip(supported, results, strict=True)
            if result is AuthorizationResult.ALLOWED
        )
    if resource_type is ResourceType.CLUSTER and Op.DESCRIBE not in allowed:
        return 0  # Kafka reports the cluster's operations only to who may describe it
    bits = 0
    for op in allowed:
        bits |= 1 << int(op)
    return bits - (1 << 32) if bits >= 1 << 31 else bits
