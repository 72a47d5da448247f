"""The two security plugin interfaces, their data types and errors.

Only interfaces live here (like ``tierlog.remote.api``); implementations sit beside them
and are opened by name through ``tierlog.security.registry``.

* ``Authenticator`` turns a new connection on a listener into a principal: at once
  (PLAINTEXT: ``User:ANONYMOUS``; SSL: the client certificate's DN through
  ``ssl.principal.mapping.rules``), or through a ``SaslSession`` the network layer drives
  (SASL_PLAINTEXT, SASL_SSL). A connection has its principal before any request reaches
  a handler (DESIGN.md, Security).
* ``Authorizer`` (Kafka's ``org.apache.kafka.server.authorizer.Authorizer``) decides
  ``Action`` lists for a ``RequestContext`` and keeps the ACLs that CreateAcls,
  DescribeAcls and DeleteAcls change. Neither interface knows the other's mechanism.
* ``AclStore``: where an authorizer keeps its ACLs (ZooKeeper in Kafka's layout, the
  single node's metadata store, or memory), one resource pattern's entries at a time,
  with changes made elsewhere (another broker, ``kafka-acls``) announced to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tierlog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourcePattern,
    ResourceType,
)
from tierlog.security.principal import KafkaPrincipal

if TYPE_CHECKING:  # the ACL side needs no SASL (nor the protocol codecs it imports)
    from tierlog.security.sasl_session import SaslSession

__all__ = [
    "AclCreateResult",
    "AclDeleteResult",
    "AclStore",
    "AclStoreError",
    "Action",
    "Authenticator",
    "AuthorizationResult",
    "Authorizer",
    "ConnectionInfo",
    "MemoizableAuthorizer",
    "RequestContext",
    "SecurityProtocol",
]


class SecurityProtocol(Enum):
    """``listener.security.protocol.map``'s values."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True)
class ConnectionInfo:
    """What the network layer knows of a new connection.

    ``peer_certificate`` is the client's certificate (DER) after a TLS handshake that got
    one (``ssl.client.auth=required|requested``), else ``None``.
    """

    listener_name: str
    security_protocol: SecurityProtocol
    client_host: str
    peer_certificate: bytes | None = None


class Authenticator(Protocol):
    """Authenticates the connections of one listener."""

    def start(self, connection: ConnectionInfo) -> KafkaPrincipal | SaslSession:
        """The principal at once, or the SASL exchange to drive until it yields one.

        Raises:
            AuthenticationError: e.g. no ``ssl.principal.mapping.rules`` rule matches the
                client certificate's DN (the connection is closed).
        """
        ...


@dataclass(frozen=True)
class RequestContext:
    """Who asks, from where, through which API (Kafka's AuthorizableRequestContext)."""

    principal: KafkaPrincipal
    client_host: str
    listener_name: str = ""
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    api_key: int = -1
    client_id: str | None = None


@dataclass(frozen=True)
class Action:
    """One check: ``operation`` on ``resource`` (a LITERAL pattern naming the resource).

    ``log_if_allowed``/``log_if_denied`` say whether the audit log gets a line (Kafka:
    denials of checks the client sees are logged, filtering checks are not).
    """

    operation: AclOperation
    resource: ResourcePattern
    log_if_allowed: bool = False
    log_if_denied: bool = True


class AuthorizationResult(Enum):
    ALLOWED = "ALLOWED"
    DENIED = "DENIED"


@dataclass(frozen=True)
class AclCreateResult:
    """``error`` is ``None`` on success, else the reason: an invalid binding
    (INVALID_REQUEST), or with ``store_failed`` one the store could not keep."""

    binding: AclBinding
    error: str | None = None
    store_failed: bool = False


@dataclass(frozen=True)
class AclDeleteResult:
    """The bindings one DeleteAcls filter removed, or its ``error`` (``store_failed``: as
    in ``AclCreateResult``)."""

    filter: AclBindingFilter
    deleted: tuple[AclBinding, ...] = ()
    error: str | None = None
    store_failed: bool = False


class AclStoreError(Exception):
    """An ACL change the store could not make durable (ZooKeeper unreachable, disk full);
    the message says why, for the CreateAcls/DeleteAcls answer."""


Entries = frozenset[AccessControlEntry]


class AclStore(Protocol):
    """Where ACLs are kept, one resource pattern's entries at a time (Kafka's ZooKeeper
    layout: one znode per pattern)."""

    async def load(self) -> Mapping[ResourcePattern, Entries]:
        """Every stored pattern with its entries (at start-up)."""
        ...

    async def update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> Entries:
        """Replace ``pattern``'s entries by ``change(current)``, atomically against other
        writers (ZooKeeper: conditional on the znode's version, retried), and announce it;
        returns the entries now stored.

        Raises:
            AclStoreError: the change could not be made durable.
        """
        ...

    def follow(self, on_change: Callable[[ResourcePattern, Entries], None]) -> None:
        """Call ``on_change`` on the event loop with a pattern's entries whenever another
        writer changed them (an empty set: the pattern is gone)."""
        ...

    async def close(self) -> None: ...


class Authorizer(Protocol):
    """Kafka's Authorizer: decisions and the ACLs behind them. ACL changes are
    coroutines (Kafka's return futures): they are durable when they return."""

    async def start(self) -> None:
        """Load the ACLs and follow changes made elsewhere; before any decision."""
        ...

    async def close(self) -> None: ...

    def authorize(
        self, context: RequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]: ...

    def authorize_by_resource_type(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> AuthorizationResult:
        """ALLOWED if ``operation`` is allowed on some resource of the type (KIP-679:
        an idempotent producer with Write on any topic needs no IdempotentWrite)."""
        ...

    def acls(self, filter: AclBindingFilter) -> list[AclBinding]: ...

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreateResult]: ...

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]: ...


@runtime_checkable
class MemoizableAuthorizer(Protocol):
    """An ``Authorizer`` whose answers may be remembered by the caller: the same question
    gets the same answer while ``decisions_version`` stays the same."""

    @property
    def decisions_version(self) -> int | None:
        """Changes whenever any decision may change (an ACL added or removed). None while
        every decision must reach ``authorize`` (grants audited)."""
        ...
