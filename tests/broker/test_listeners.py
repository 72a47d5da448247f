"""``listeners``, ``advertised.listeners``, ``listener.security.protocol.map`` and the
inter-broker listener at a real broker start: every listener is served and advertised;
what Kafka would not start with (two listeners of one name, a listener missing from the
map, advertising 0.0.0.0 or a listener that does not exist, an inter-broker listener that
does not exist) is refused in one line naming the key, before anything is written."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.broker.harness import BrokerProcess
from tests.broker.test_config_checks import assert_one_line, start_broker
from tierlog.broker.config import BrokerConfig
from tierlog.broker.listeners import ListenerEndpoint
from tierlog.util.configdef import ConfigError


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listeners", "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"),
        ("advertised.listeners", "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://localhost:9093"),
        ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
        ("advertised.listeners", "PLAINTEXT://127.0.0.1:0,EXTERNAL://localhost:9093"),
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL"),
    ],
)
def test_listeners_kafka_would_refuse_are_refused(tmp_path: Path, key: str, value: str) -> None:
    props = {key: value}
    if key == "listener.security.protocol.map":  # a listener the map leaves out
        props["listeners"] = "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0"
    result = start_broker(tmp_path, **props)
    assert_one_line(result, key)
    assert not (tmp_path / "data" / "meta.properties").exists()


def endpoints_of(props: dict[str, str]) -> tuple[ListenerEndpoint, ListenerEndpoint]:
    """The first listener as bound and as advertised (host, port)."""
    first = BrokerConfig(props).listener_plan().listeners[0]
    return first, first


def test_listening_on_every_address_needs_an_advertised_address() -> None:
    # Checked without starting: a test binds 127.0.0.1 only.
    with pytest.raises(ConfigError) as exc:
        endpoints_of({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    assert exc.value.key == "listeners" and "advertised.listeners" in exc.value.reason
    listener, advertised = endpoints_of(
        {
            "listeners": "PLAINTEXT://0.0.0.0:9092",
            "advertised.listeners": "PLAINTEXT://broker-1.example:9092",
        }
    )
    assert (listener.bind_host, advertised.advertised_host) == ("0.0.0.0", "broker-1.example")


@pytest.mark.parametrize(
    "props",
    [
        {"listeners": "PLAINTEXT://:9092"},  # Kafka's default listener
        {"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "PLAINTEXT://:9092"},
    ],
)
def test_a_listener_without_a_host_is_advertised_under_the_host_name(
    props: dict[str, str],
) -> None:
    # As Kafka: no host binds every interface (when it is the bound one) and is advertised
    # under the canonical host name, never as 0.0.0.0, in either key.
    listener, advertised = endpoints_of(props)
    assert (advertised.advertised_host, advertised.advertised_port) == (socket.getfqdn(), 9092)
    assert listener.bind_host == ("127.0.0.1" if "advertised.listeners" in props else "0.0.0.0")


def test_a_named_host_is_advertised_as_it_is() -> None:
    listener, advertised = endpoints_of({"listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert (listener.bind_host, advertised.advertised_host, advertised.advertised_port) == (
        "127.0.0.1",
        "127.0.0.1",
        9092,
    )
    listener, advertised = endpoints_of(
        {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://db1:19092"}
    )
    assert (listener.bind_host, listener.bind_port) == ("0.0.0.0", 9092)
    assert (advertised.advertised_host, advertised.advertised_port) == ("db1", 19092)


def test_the_advertised_listener_is_what_clients_are_told(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data", {"advertised.listeners": "PLAINTEXT://localhost:0"}
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        brokers = list(admin.list_topics(timeout=10).brokers.values())
        # Port 0 in advertised.listeners: the port the listener was given.
        assert [(b.host, b.port) for b in brokers] == [("localhost", broker.port)]
    finally:
        broker.stop()


def plan_of(props: dict[str, str]) -> dict[str, tuple[str, str, int]]:
    listeners = BrokerConfig(props).listener_plan().listeners
    return {e.name: (e.protocol.value, e.advertised_host, e.advertised_port) for e in listeners}


def test_named_listeners_take_their_protocol_from_the_map() -> None:
    plan = plan_of(
        {
            "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093,SSL://127.0.0.1:9094",
            "advertised.listeners": "EXTERNAL://public.example:19093",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,SSL:SSL",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    assert plan == {
        "INTERNAL": ("PLAINTEXT", "127.0.0.1", 9092),
        # advertised.listeners names one listener; the others are advertised as bound.
        "EXTERNAL": ("SASL_SSL", "public.example", 19093),
        "SSL": ("SSL", "127.0.0.1", 9094),
    }


@pytest.mark.parametrize(
    ("props", "inter_broker"),
    [
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094",
                "inter.broker.listener.name": "SASL_SSL",
            },
            "SASL_SSL",
        ),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094",
                "security.inter.broker.protocol": "SSL",
            },
            "SSL",
        ),
    ],
)
def test_a_secured_inter_broker_listener_is_planned(
    props: dict[str, str], inter_broker: str
) -> None:
    # Brokers connect to it with its security (listener_setup.inter_broker_security).
    assert BrokerConfig(props).listener_plan().inter_broker == inter_broker


@pytest.mark.parametrize(
    ("props", "key", "words"),
    [
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"},
            "listeners",
            "different port",
        ),
        (
            {"listener.security.protocol.map": "PLAINTEXT:TLS"},
            "listener.security.protocol.map",
            "not a security protocol",
        ),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "inter.broker.listener.name",
            "only one of",
        ),
        (
            {"inter.broker.listener.name": "INTERNAL"},
            "inter.broker.listener.name",
            "must be one of the listeners",
        ),
        (
            {"listeners": "SASL_SSL://127.0.0.1:9094"},
            "security.inter.broker.protocol",
            "must be one of the listeners",
        ),
        (
            {"listener.name.plaintext.log.retention.ms": "5"},
            "listener.name.plaintext.log.retention.ms",
            "cannot be set per listener",
        ),
    ],
)
def test_kafkas_listener_checks_name_the_key(props: dict[str, str], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig(props).listener_plan()
    assert refused.value.key == key and words in refused.value.reason
