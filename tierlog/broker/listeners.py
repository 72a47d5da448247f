"""Listeners: the named addresses a broker binds, their security protocols, and the
endpoints it registers for clients and for other brokers.

Kafka's rules (``KafkaConfig``'s listener checks, KIP-103), each refused with the key:

* ``listeners`` and ``advertised.listeners`` are ``NAME://host:port`` lists. Every listener
  needs its own name ("Each listener must have a different name") and, but for port 0, its
  own port.
* ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``) gives each name its protocol:
  PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. Its default maps those four names to
  themselves; a listener whose name the map does not have is refused.
* ``advertised.listeners`` (default: ``listeners``) may name only listeners that exist; a
  listener it leaves out is advertised as it is bound.
* ``inter.broker.listener.name`` or ``security.inter.broker.protocol`` (never both; the
  latter names the listener called after the protocol, default PLAINTEXT) is what other
  brokers connect to; it must be an advertised listener. Brokers connect to it with its
  security (``listener_setup.inter_broker_security``): TLS with the listener's keystore
  and truststore, SASL with ``sasl.mechanism.inter.broker.protocol`` and the login in the
  listener's JAAS entry, as Kafka's brokers do.
* A listener with no host (``PLAINTEXT://:9092``, Kafka's default) binds every interface
  and is advertised under the machine's canonical host name, in either key.
* ``0.0.0.0`` (or ``::``) may be bound but never advertised: clients elsewhere cannot
  connect to it.

Parsing checks the syntax when the configuration is read (``parse_listener``); the rest,
and the host name lookup, waits for ``plan``, at broker start.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tierlog.security.api import SecurityProtocol
from tierlog.util.configdef import ConfigError

# What a listener with no host binds: every interface.
ANY_HOST = "0.0.0.0"
_UNROUTABLE = ("0.0.0.0", "::")
# Kafka's ListenerName: letters, digits and underscores (its EndPoint regex).
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
# Kafka's default listener.security.protocol.map: each protocol's name maps to itself.
DEFAULT_PROTOCOL_MAP = {p.value: p for p in SecurityProtocol}


@dataclass(frozen=True)
class Listener:
    """``host`` is "" where the listener named none."""

    name: str
    host: str
    port: int


@dataclass(frozen=True)
class ListenerEndpoint:
    """One listener as the broker serves it: where it binds, its protocol, and what it
    advertises (``advertised_port`` 0: the port it was given when bound)."""

    name: str
    protocol: SecurityProtocol
    bind_host: str
    bind_port: int
    advertised_host: str
    advertised_port: int


@dataclass(frozen=True)
class ListenerPlan:
    """Every listener, in ``listeners`` order, and which one other brokers use."""

    listeners: tuple[ListenerEndpoint, ...]
    inter_broker: str

    def named(self, name: str) -> ListenerEndpoint:
        return next(entry for entry in self.listeners if entry.name == name)


def parse_listener(text: str, key: str = "listeners") -> Listener:
    """``NAME://host:port`` -> Listener (the name upper-cased, as Kafka's ListenerName).

    Raises:
        ConfigError: naming ``key``.
    """
    name, sep, address = text.strip().partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit() or not _NAME.match(name):
        raise ConfigError(key, f"expected NAME://host:port, got {text!r}")
    if int(port) > 65535:
        raise ConfigError(key, f"port {port} of {name} is not a TCP port")
    return Listener(name.upper(), host.strip("[]"), int(port))


def parse_protocol_map(entries: Sequence[str]) -> dict[str, SecurityProtocol]:
    """``listener.security.protocol.map``'s ``NAME:PROTOCOL`` entries; empty: Kafka's default.

    Raises:
        ConfigError: naming ``listener.security.protocol.map``.
    """
    key = "listener.security.protocol.map"
    if not entries:
        return dict(DEFAULT_PROTOCOL_MAP)
    mapping: dict[str, SecurityProtocol] = {}
    for entry in entries:
        name, sep, protocol = entry.strip().partition(":")
        name = name.strip().upper()
        if not sep or not _NAME.match(name):
            raise ConfigError(key, f"expected NAME:PROTOCOL, got {entry!r}")
        if name in mapping:
            raise ConfigError(key, f"{name} is mapped twice")
        try:
            mapping[name] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            raise ConfigError(
                key,
                f"{protocol.strip()!r} for {name} is not a security protocol (PLAINTEXT, SSL, "
                "SASL_PLAINTEXT, SASL_SSL)",
            ) from None
    return mapping


def _unique(key: str, entries: Sequence[Listener]) -> None:
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(
            key, f"each listener must have a different name (as in Kafka); {twice[0]} is twice"
        )
    ports = [e.port for e in entries if e.port != 0]
    twice_ports = sorted({p for p in ports if ports.count(p) > 1})
    if key == "listeners" and twice_ports:
        raise ConfigError(
            key,
            f"each listener must have a different port (as in Kafka); {twice_ports[0]} is twice",
        )


def plan(
    listeners: Sequence[Listener],
    advertised: Sequence[Listener],
    protocol_map: Mapping[str, SecurityProtocol],
    inter_broker_listener_name: str | None = None,
    security_inter_broker_protocol: str | None = None,
) -> ListenerPlan:
    """The listeners to bind and what each advertises (module docstring: Kafka's checks).

    Args:
        listeners: ``listeners``, parsed.
        advertised: ``advertised.listeners``, parsed; a listener it leaves out is
            advertised as bound.
        protocol_map: ``listener.security.protocol.map``, parsed.
        inter_broker_listener_name, security_inter_broker_protocol: the keys as given
            (None or "" when not set).

    Raises:
        ConfigError: naming the key at fault.
    """
    if not listeners:
        raise ConfigError("listeners", "at least one listener is required")
    _unique("listeners", listeners)
    _unique("advertised.listeners", advertised)
    for entry in listeners:
        if entry.name not in protocol_map:
            raise ConfigError(
                "listener.security.protocol.map",
                f"no security protocol defined for listener {entry.name} (as in Kafka): add "
                f"{entry.name}:<PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL>",
            )
    names = [e.name for e in listeners]
    told_by_name = {e.name: e for e in advertised}
    for name in told_by_name:
        if name not in names:
            raise ConfigError(
                "advertised.listeners",
                f"{name} is not a listener: advertised listener names must be among those in "
                f"listeners ({', '.join(names)}), as in Kafka",
            )
    inter_broker = _inter_broker(
        names, protocol_map, inter_broker_listener_name, security_inter_broker_protocol
    )
    planned = []
    for bound in listeners:
        told = told_by_name.get(bound.name, bound)
        if told.host in _UNROUTABLE:
            raise ConfigError(
                "advertised.listeners" if bound.name in told_by_name else "listeners",
                f"cannot advertise the non-routable address {told.host} to clients (as in "
                f"Kafka): set advertised.listeners to {bound.name}://<address clients use>:"
                "<port>",
            )
        planned.append(
            ListenerEndpoint(
                bound.name,
                protocol_map[bound.name],
                bound.host or ANY_HOST,
                bound.port,
                told.host or socket.getfqdn(),
                told.port,
            )
        )
    return ListenerPlan(tuple(planned), inter_broker)


def _inter_broker(
    names: Sequence[str],
    protocol_map: Mapping[str, SecurityProtocol],
    by_name: str | None,
    by_protocol: str | None,
) -> str:
    if by_name and by_protocol:
        raise ConfigError(
            "inter.broker.listener.name",
            "only one of inter.broker.listener.name and security.inter.broker.protocol may "
            "be set (as in Kafka)",
        )
    key = "inter.broker.listener.name" if by_name else "security.inter.broker.protocol"
    if by_protocol:
        try:
            name = SecurityProtocol(by_protocol.strip().upper()).value
        except ValueError:
            raise ConfigError(
                key, f"{by_protocol!r} is not a security protocol (PLAINTEXT, SSL, ...)"
            ) from None
    else:
        name = (by_name or "PLAINTEXT").strip().upper()
    if name not in names:
        raise ConfigError(
            key,
            f"the inter-broker listener {name} must be one of the listeners "
            f"({', '.join(names)}), as in Kafka",
        )
    return name
