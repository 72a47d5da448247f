"""The broker's listeners as it serves them: each listener's security from the broker's
keys (its TLS context from ``tls.py``, with ``listener.name.<l>.ssl.*`` over ``ssl.*``, and
its authenticator from ``authenticator.py``, SCRAM against the stored credentials), one
``KafkaServer`` per listener under the broker's one ``ConnectionQuotas`` (Kafka shares
them across listeners), the registration naming every endpoint (KIP-103), and how this
broker connects to the others (``inter_broker_security``).

Security is built once at start-up, before anything is written: a mistake is a
ConfigError naming the key."""

from __future__ import annotations

from collections.abc import Mapping

from tierlog.broker.config import BrokerConfig
from tierlog.broker.coordination.api import BrokerRegistration, RegisteredEndpoint
from tierlog.broker.listeners import ListenerEndpoint, ListenerPlan
from tierlog.broker.network.connection_security import ListenerSecurity
from tierlog.broker.network.server import ConnectionLimits, ConnectionQuotas, Handler, KafkaServer
from tierlog.broker.scram_store import ScramCredentialCache
from tierlog.security.api import SecurityProtocol
from tierlog.security.authenticator import ListenerAuthenticator, listener_setting
from tierlog.security.client_config import MECHANISMS, ClientSecurity, sasl_login_from_jaas
from tierlog.security.errors import SecurityConfigError
from tierlog.security.jaas import parse_jaas_config
from tierlog.security.tls import TlsSettings
from tierlog.security.tls_rotation import ListenerTls
from tierlog.util.clock import Clock

__all__ = [
    "bind_listeners",
    "connection_limits",
    "inter_broker_security",
    "listener_security",
    "registration",
]


def listener_security(
    settings: Mapping[str, str],
    endpoint: ListenerEndpoint,
    clock: Clock,
    scram: ScramCredentialCache,
    *,
    inter_broker: bool = False,
) -> ListenerSecurity:
    """``endpoint``'s TLS context and authenticator.

    Args:
        settings: the TLS and SASL keys as written (``BrokerConfig.security``).
        inter_broker: ``endpoint`` is the inter-broker listener (a certificate reloaded
            later must pass a test handshake with the old one, ``tls_rotation``).

    Raises:
        SecurityConfigError (a ConfigError): naming the key that is missing or wrong.
    """
    protocol = endpoint.protocol
    if protocol is SecurityProtocol.PLAINTEXT:
        return ListenerSecurity(endpoint.name, protocol)
    tls = None
    if protocol.uses_tls:
        prefix = f"listener.name.{endpoint.name.lower()}."
        tls = ListenerTls(TlsSettings.from_config(settings, prefix), inter_broker=inter_broker)
    authenticator = ListenerAuthenticator.from_config(
        settings, endpoint.name, protocol, clock, scram_credentials=scram
    )
    uses_scram = any(m.startswith("SCRAM-") for m in authenticator.mechanisms)
    return ListenerSecurity(
        endpoint.name,
        protocol,
        tls,
        authenticator,
        scram.refresh if uses_scram else None,
    )


def connection_limits(config: BrokerConfig) -> ConnectionLimits:
    return ConnectionLimits(
        max_connections=config["max.connections"],
        max_connections_per_ip=config["max.connections.per.ip"],
        idle_ms=config["connections.max.idle.ms"],
        request_receive_timeout_ms=config["socket.request.receive.timeout.ms"],
        queued_max_request_bytes=config["queued.max.request.bytes"],
        max_connection_creation_rate=config["max.connection.creation.rate"],
    )


async def bind_listeners(
    plan: ListenerPlan,
    security: Mapping[str, ListenerSecurity],
    dispatch: Handler,
    max_frame_bytes: int,
    quotas: ConnectionQuotas,
) -> dict[str, KafkaServer]:
    """One KafkaServer per listener, in ``listeners`` order, each bound (port 0: a free
    port of its own) but not yet accepting."""
    servers: dict[str, KafkaServer] = {}
    for endpoint in plan.listeners:
        server = KafkaServer(
            dispatch,
            endpoint.bind_host,
            endpoint.bind_port,
            max_frame_bytes,
            quotas=quotas,
            listener=security[endpoint.name],
        )
        servers[endpoint.name] = server
        await server.start()
    return servers


def registration(
    plan: ListenerPlan, bound_ports: Mapping[str, int], broker_id: int, rack: str | None
) -> BrokerRegistration:
    """Every listener's advertised endpoint (an advertised port 0: the port it was bound
    to); host and port are the inter-broker listener's, what other brokers connect to."""
    endpoints = tuple(
        RegisteredEndpoint(
            e.name,
            e.protocol.value,
            e.advertised_host,
            e.advertised_port or bound_ports[e.name],
        )
        for e in plan.listeners
    )
    inter = next(e for e in endpoints if e.listener == plan.inter_broker)
    return BrokerRegistration(broker_id, inter.host, inter.port, rack, endpoints)


def inter_broker_security(
    settings: Mapping[str, str], plan: ListenerPlan, mechanism: str, clock: Clock
) -> ClientSecurity:
    """How this broker connects to the others: the inter-broker listener's protocol, as
    Kafka's brokers do. TLS: that listener's truststore (``listener.name.<l>.ssl.*`` over
    ``ssl.*``), its keystore as the client certificate (mutual TLS) and
    ``ssl.endpoint.identification.algorithm``. SASL: ``mechanism``
    (``sasl.mechanism.inter.broker.protocol``), logging in with the ``username=`` and
    ``password=`` of the listener's JAAS entry for it
    (``listener.name.<l>.<mechanism>.sasl.jaas.config``), as Kafka's brokers do; the
    TLS context is built here, so a bad file is a start-up error.

    Raises:
        SecurityConfigError (a ConfigError): naming the key that is missing or wrong.
    """
    listener = plan.named(plan.inter_broker)
    protocol = listener.protocol
    prefix = f"listener.name.{listener.name.lower()}."
    tls = TlsSettings.from_config(settings, prefix) if protocol.uses_tls else None
    login = None
    if protocol.uses_sasl:
        key = "sasl.mechanism.inter.broker.protocol"
        name = mechanism.strip().upper()
        if name not in MECHANISMS:
            raise SecurityConfigError(
                key,
                f"{name or 'empty'} is not supported: the inter-broker listener {listener.name} "
                f"is {protocol.value}; set one of {', '.join(MECHANISMS)}",
            )
        enabled = listener_setting(settings, listener.name, "sasl.enabled.mechanisms")
        if name not in [m.strip().upper() for m in (enabled[1] if enabled else "").split(",")]:
            raise SecurityConfigError(
                key,
                f"{name} is not in {listener.name}'s sasl.enabled.mechanisms: brokers could "
                "not log in to each other",
            )
        found = listener_setting(settings, listener.name, "sasl.jaas.config", name)
        jaas_key = f"{prefix}{name.lower()}.sasl.jaas.config"
        entry = parse_jaas_config(found[1], found[0]) if found else None
        login = sasl_login_from_jaas(name, entry, found[0] if found else jaas_key)
    security = ClientSecurity(protocol, tls, login, clock)
    security.ssl_context()
    return security
