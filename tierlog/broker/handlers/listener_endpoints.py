"""Which address of a broker a client is told: its endpoint on the listener the request
came in on (KIP-103), so a client of the SASL_SSL listener is sent to every broker's
SASL_SSL port and never to a PLAINTEXT one. A broker without that listener has no address
for this client (Kafka leaves it out of Metadata)."""

from __future__ import annotations

from tierlog.broker.coordination.api import BrokerRegistration
from tierlog.broker.network.connection_context import CONNECTION_LISTENER


def address_for_client(broker: BrokerRegistration) -> tuple[str, int] | None:
    return broker.address_on(CONNECTION_LISTENER.get())
