"""Listeners: the one address a broker binds, and the one it registers for clients.

Kafka's rules, as far as a broker with one PLAINTEXT listener has them:

* ``listeners`` and ``advertised.listeners`` are ``NAME://host:port`` lists. Kafka refuses
  two listeners with one name ("Each listener must have a different name"), and PLAINTEXT
  is the only listener name here (no TLS/SASL, no ``listener.security.protocol.map``): a
  second entry is a configuration Kafka would not start with either, so it is refused
  rather than served or dropped.
* A listener with no host (``PLAINTEXT://:9092``, Kafka's default) binds every interface
  and is advertised under the machine's canonical host name, in either key.
* ``0.0.0.0`` (or ``::``) may be bound but never advertised: clients elsewhere cannot
  connect to it. Without ``advertised.listeners``, a ``listeners`` entry naming it is an
  error, as in Kafka.

Parsing checks the syntax when the configuration is read (``parse_listener``); the host
name lookup waits for ``endpoints``, at broker start.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from tierlog.util.configdef import ConfigError

# What a listener with no host binds: every interface.
ANY_HOST = "0.0.0.0"
_UNROUTABLE = ("0.0.0.0", "::")


@dataclass(frozen=True)
class Listener:
    """``host`` is "" where the listener named none."""

    name: str
    host: str
    port: int


def parse_listener(text: str, key: str = "listeners") -> Listener:
    """``PLAINTEXT://host:port`` -> Listener; only PLAINTEXT listeners exist here.

    Raises:
        ConfigError: naming ``key``.
    """
    name, sep, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise ConfigError(key, f"expected NAME://host:port, got {text!r}")
    if name.upper() != "PLAINTEXT":
        raise ConfigError(key, f"only PLAINTEXT listeners are supported, got {name}")
    return Listener(name.upper(), host.strip("[]"), int(port))


def endpoints(listeners: list[Listener], advertised: list[Listener]) -> tuple[Listener, Listener]:
    """The listener to bind (a missing host: every interface) and the endpoint to register
    for clients (a missing host: this machine's canonical name, as Kafka's
    ``InetAddress.getLocalHost.getCanonicalHostName``).

    Args:
        listeners: ``listeners``, parsed.
        advertised: ``advertised.listeners``, parsed; empty: the same as ``listeners``.

    Raises:
        ConfigError: naming ``listeners`` or ``advertised.listeners``.
    """
    if not listeners:
        raise ConfigError("listeners", "at least one listener is required")
    for key, entries in (("listeners", listeners), ("advertised.listeners", advertised)):
        if len(entries) > 1:
            raise ConfigError(
                key,
                f"{len(entries)} listeners given; every listener needs its own name (as in "
                "Kafka) and PLAINTEXT is the only one here: give one PLAINTEXT://host:port",
            )
    bound = listeners[0]
    told = advertised[0] if advertised else bound
    if told.host in _UNROUTABLE:
        raise ConfigError(
            "advertised.listeners" if advertised else "listeners",
            f"cannot advertise the non-routable address {told.host} to clients (as in "
            "Kafka): set advertised.listeners to PLAINTEXT://<address clients use>:<port>",
        )
    if not told.host:
        told = Listener(told.name, socket.getfqdn(), told.port)
    if not bound.host:
        bound = Listener(bound.name, ANY_HOST, bound.port)
    return bound, told
