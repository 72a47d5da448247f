"""What a connection task knows of its client, as context variables set per connection
(each connection is one asyncio task, so each sees its own values): the address, the
listener it came in on, its principal, and what its ApiVersions said. Handlers read them;
the network server (``server``) and the connection's authentication
(``connection_security``) set them."""

from __future__ import annotations

from contextvars import ContextVar

from tierlog.security.api import SecurityProtocol
from tierlog.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = [
    "CLIENT_ADDRESS",
    "CLIENT_PORT",
    "CLIENT_SOFTWARE",
    "CONNECTION_LISTENER",
    "CONNECTION_PRINCIPAL",
    "CONNECTION_PROTOCOL",
]

# The address of the client whose request is being handled ("/127.0.0.1", Kafka's form);
# consumer groups report it as the member's client host.
CLIENT_ADDRESS: ContextVar[str] = ContextVar("client_address", default="")
# Who the connection is (``tierlog.broker.authorization`` makes each request's context from
# it): User:ANONYMOUS on PLAINTEXT, the mapped certificate DN on SSL, the SASL user.
CONNECTION_PRINCIPAL: ContextVar[KafkaPrincipal] = ContextVar(
    "connection_principal", default=ANONYMOUS
)
# The listener the connection came in on: Metadata, FindCoordinator and DescribeCluster
# answer with the brokers' endpoints on it (KIP-103). "" outside a connection.
CONNECTION_LISTENER: ContextVar[str] = ContextVar("connection_listener", default="")
CONNECTION_PROTOCOL: ContextVar[SecurityProtocol] = ContextVar(
    "connection_protocol", default=SecurityProtocol.PLAINTEXT
)
# The client's source port, and the software name and version its ApiVersions request gave
# (v3+, KIP-511); client-metrics subscriptions match on them (KIP-714).
CLIENT_PORT: ContextVar[int | None] = ContextVar("client_port", default=None)
CLIENT_SOFTWARE: ContextVar[tuple[str, str] | None] = ContextVar("client_software", default=None)
