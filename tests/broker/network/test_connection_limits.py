"""Connection limits against hostile or careless clients (issue 10, items 11 and 12): Kafka's
``max.connections``, ``max.connections.per.ip``, ``max.connection.creation.rate`` (KIP-612)
and ``connections.max.idle.ms``, and tierlog's ``socket.request.receive.timeout.ms`` against
slowloris, on a real broker process with raw sockets. Limits are small so every test is
bounded to a few seconds."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kio.index import load_request_schema

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient
from tests.raw_client import request as raw_request
from tierlog.broker.config import BrokerConfig
from tierlog.protocol import ApiKey, decode_response, encode_request
from tierlog.protocol.kio_build import build

API_VERSIONS = build(load_request_schema(18, 0), {})
StartBroker = Callable[..., BrokerProcess]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[StartBroker]:
    started: list[BrokerProcess] = []

    def run(**overrides: str) -> BrokerProcess:
        process = BrokerProcess(tmp_path / f"data{len(started)}", overrides)
        started.append(process)
        return process.start()

    yield run
    for process in started:
        process.stop()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def api_versions(sock: socket.socket) -> bool:
    """One ApiVersions round trip; False when the broker closed the connection."""
    try:
        sock.sendall(encode_request(API_VERSIONS, 7, client_id="limits"))
        size_bytes = read_exactly(sock, 4)
        frame = read_exactly(sock, struct.unpack(">i", size_bytes)[0])
    except (ConnectionError, OSError):
        return False
    correlation_id, _ = decode_response(frame, 18, 0)
    return correlation_id == 7


def read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the broker closes ``sock`` (EOF or reset), or None if it did not."""
    begin = time.monotonic()
    sock.settimeout(seconds)
    try:
        while True:
            if not sock.recv(4096):
                return time.monotonic() - begin
    except ConnectionResetError:
        return time.monotonic() - begin
    except TimeoutError:
        return None


def test_idle_connections_are_closed(start: StartBroker) -> None:
    broker = start(**{"connections.max.idle.ms": "1000"})
    idle = [connect(broker.port) for _ in range(50)]
    busy = connect(broker.port)
    assert api_versions(idle[0])
    # The busy connection sends a request every 100 ms for 2.5 s: never idle for 1 s (a
    # wide margin, for a loaded test box).
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert api_versions(busy)
        time.sleep(0.1)
    for sock in idle:
        assert closed_within(sock, 3.0) is not None
        sock.close()
    assert api_versions(busy)
    busy.close()


def test_max_connections(start: StartBroker) -> None:
    broker = start(**{"max.connections": "4"})
    kept = [connect(broker.port) for _ in range(4)]
    assert all(api_versions(sock) for sock in kept)
    extra = connect(broker.port)
    assert not api_versions(extra)
    extra.close()
    kept.pop().close()
    # The broker notices the close asynchronously; a client retrying gets in.
    assert any(api_versions(connect(broker.port)) or time.sleep(0.1) for _ in range(30))
    for sock in kept:
        assert api_versions(sock)
        sock.close()


def test_max_connections_per_ip(start: StartBroker) -> None:
    broker = start(**{"max.connections.per.ip": "3"})
    kept = [connect(broker.port) for _ in range(3)]
    assert all(api_versions(sock) for sock in kept)
    extra = connect(broker.port)
    assert not api_versions(extra)
    extra.close()
    # Another address is counted on its own (Linux routes all of 127/8 to loopback).
    other = connect(broker.port, source="127.0.0.2")
    assert api_versions(other)
    other.close()
    for sock in kept:
        assert api_versions(sock)
        sock.close()


def test_max_connections_per_ip_changes_at_runtime(start: StartBroker) -> None:
    """A dynamic broker config (KIP-226): the new limit holds for the next connections,
    and those open stay open."""
    broker = start()
    admin = RawClient(broker.port)
    body = raw_request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [
                        {"name": "max.connections.per.ip", "config_operation": 0, "value": "3"}
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    assert admin.call(body).responses[0].error_code == 0
    kept = [connect(broker.port) for _ in range(2)]  # three with the admin's
    assert all(api_versions(sock) for sock in kept)
    extra = connect(broker.port)
    assert not api_versions(extra)
    extra.close()
    other = connect(broker.port, source="127.0.0.2")
    assert api_versions(other)
    other.close()
    for sock in kept:
        sock.close()
    admin.close()


def test_max_connection_creation_rate_delays_new_connections(start: StartBroker) -> None:
    # KIP-612 with 1 per second: over Kafka's 11 one-second windows the first ten come
    # within it at once, the next ones wait before their first request is read: the
    # 13th about (13 / 10 s - 1) / 1 x 10 s = 3 s.
    broker = start(**{"max.connection.creation.rate": "1"})
    waited = connection_waits(broker.port, 13)
    assert max(waited[:5]) < 1.5, waited
    assert waited[-1] > 2.0, waited


def connection_waits(port: int, count: int) -> list[float]:
    """Seconds each of ``count`` new connections, one after another, waits for its first
    answer."""
    waited = []
    for _ in range(count):
        sock = connect(port)
        began = time.monotonic()
        assert api_versions(sock)
        waited.append(time.monotonic() - began)
        sock.close()
    return waited


def set_creation_rate(broker: BrokerProcess, rate: str | None) -> None:
    """``kafka-configs --entity-type brokers --entity-name 0 --alter`` (``--delete-config``
    when ``rate`` is None), through librdkafka's admin."""
    op = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry("max.connection.creation.rate", rate, incremental_operation=op)
    resource = ConfigResource("broker", "0", incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(10)


def test_max_connection_creation_rate_changes_at_run_time(start: StartBroker) -> None:
    # KIP-226: the rate is bounded and unbounded again without a restart; the bound counts
    # from the change on, as Kafka's sensor does.
    broker = start()
    assert max(connection_waits(broker.port, 13)) < 1.5
    set_creation_rate(broker, "1")
    waited = connection_waits(broker.port, 13)
    assert waited[-1] > 2.0, waited
    set_creation_rate(broker, None)
    assert max(connection_waits(broker.port, 13)) < 1.5
    assert "reconfigured connection quotas: max.connection.creation.rate" in broker.log_text()


def test_slowloris_request_is_bounded(start: StartBroker) -> None:
    broker = start(
        **{"socket.request.receive.timeout.ms": "1000", "connections.max.idle.ms": "60000"}
    )
    slow = connect(broker.port)
    request = encode_request(API_VERSIONS, 1, client_id="x" * 400)
    slow.settimeout(0.05)
    begin = time.monotonic()
    closed_after = None
    # One byte every 50 ms: the whole request would take over 20 s.
    for byte in request[:-1]:
        try:
            slow.sendall(bytes([byte]))
            if slow.recv(1) == b"":
                closed_after = time.monotonic() - begin
                break
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            closed_after = time.monotonic() - begin
            break
    slow.close()
    assert closed_after is not None, "the broker waited for the whole slow request"
    assert 0.9 <= closed_after < 8.0
    # Everyone else is served meanwhile and after.
    fast = connect(broker.port)
    assert api_versions(fast)
    fast.close()
    assert "socket.request.receive.timeout.ms" in broker.log_text()


def test_kafkas_defaults() -> None:
    config = BrokerConfig({})
    assert config["connections.max.idle.ms"] == 600_000
    assert config["max.connections"] == config["max.connections.per.ip"] == 2**31 - 1
