"""KIP-430 authorized operations as the handlers report them: the 32-bit field of ACL
operation codes a principal may perform on a resource, which Metadata, DescribeGroups,
DescribeCluster and DescribeTopicPartitions carry when the request asks
(``include_*_authorized_operations``), and ``OMITTED`` (Integer.MIN_VALUE, "not
requested") when it does not.

The decisions are ``BrokerServices.authz``'s (``tierlog.broker.authorization``): every
supported operation without an authorizer, else those the authorizer allows the request's
principal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tierlog.broker.authorization import OPERATIONS_NOT_REQUESTED as OMITTED
from tierlog.security.acl import ResourceType

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

__all__ = ["OMITTED", "authorized_operations"]


def authorized_operations(
    services: BrokerServices, resource_type: ResourceType, name: str, *, requested: bool = True
) -> int:
    """The KIP-430 bit field of ``resource_type``/``name`` for the requesting principal,
    or ``OMITTED`` when the request did not ask."""
    if not requested:
        return OMITTED
    return services.authz.authorized_operations(resource_type, name)
