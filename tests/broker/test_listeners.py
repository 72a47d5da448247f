"""``listeners`` and ``advertised.listeners`` at a real broker start: one PLAINTEXT listener
is served and advertised; what Kafka would not start with (two listeners of one name,
advertising 0.0.0.0) is refused in one line naming the key, before anything is written."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.broker.harness import BrokerProcess
from tests.broker.test_config_checks import assert_one_line, start_broker
from tierlog.broker.config import BrokerConfig
from tierlog.broker.listeners import Listener, endpoints
from tierlog.util.configdef import ConfigError


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listeners", "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"),
        ("advertised.listeners", "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://localhost:9093"),
        ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
    ],
)
def test_listeners_kafka_would_refuse_are_refused(tmp_path: Path, key: str, value: str) -> None:
    result = start_broker(tmp_path, **{key: value})
    assert_one_line(result, key)
    assert not (tmp_path / "data" / "meta.properties").exists()


def endpoints_of(props: dict[str, str]) -> tuple[Listener, Listener]:
    config = BrokerConfig(props)
    return endpoints(config.listeners, config.advertised)


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
    assert (listener.host, advertised.host) == ("0.0.0.0", "broker-1.example")


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
    assert (advertised.host, advertised.port) == (socket.getfqdn(), 9092)
    assert listener.host == ("127.0.0.1" if "advertised.listeners" in props else "0.0.0.0")


def test_a_named_host_is_advertised_as_it_is() -> None:
    listener, advertised = endpoints_of({"listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert (listener.host, advertised.host, advertised.port) == ("127.0.0.1", "127.0.0.1", 9092)
    listener, advertised = endpoints_of(
        {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://db1:19092"}
    )
    assert (listener.host, listener.port) == ("0.0.0.0", 9092)
    assert (advertised.host, advertised.port) == ("db1", 19092)


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
