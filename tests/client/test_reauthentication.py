"""KIP-368 on tierlog's own client: a broker whose listener sets
``connections.max.reauth.ms`` tells each login how long its session lasts; the blocking
and the asyncio connection log in again on the same socket before it ends, so requests go
on through one connection. Without that the broker closes the connection at the first
request after the session ended (the last test shows it does)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from tests.broker.harness import BrokerProcess
from tests.broker.network.test_listener_security import metric, reauthenticating_broker
from tests.client.test_secure_connection import metadata
from tierlog.client.async_connection import AsyncConnection
from tierlog.client.connection import BrokerConnection, ConnectionClosedError
from tierlog.security.client_config import ClientSecurity

pytestmark = pytest.mark.timeout(180)

SESSION_MS = 1500
AUTHENTICATED = "kafka_server_socket_server_metrics_successful_authentication_total"
REAUTHENTICATED = "kafka_server_socket_server_metrics_successful_reauthentication_total"
FAILED = "kafka_server_socket_server_metrics_failed_authentication_total"
KILLED = "kafka_server_socket_server_metrics_expired_connections_killed_total"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = reauthenticating_broker(tmp_path_factory.mktemp("reauth") / "data", SESSION_MS)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def alice() -> ClientSecurity:
    return ClientSecurity.from_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
    )


def counts(broker: BrokerProcess) -> list[float]:
    """Logins, renewals, failed logins, connections cut for an ended session."""
    return [metric(broker, name) for name in (AUTHENTICATED, REAUTHENTICATED, FAILED, KILLED)]


def test_a_blocking_connection_renews_its_session_on_the_same_socket(
    broker: BrokerProcess,
) -> None:
    logins, renewals, failures, killed = counts(broker)
    connection = BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], security=alice())
    try:
        deadline = time.monotonic() + 3.5 * SESSION_MS / 1000
        calls = 0
        while time.monotonic() < deadline:
            connection.call(metadata())  # raises if the broker closed the connection
            calls += 1
            time.sleep(0.2)
    finally:
        connection.close()
    after = counts(broker)
    assert after[0] == logins + 1  # one connection, logged in once
    assert after[1] >= renewals + 2  # its session renewed before each end (3.5 sessions)
    assert after[2] == failures
    assert after[3] == killed
    assert calls >= 10


def test_an_asyncio_connection_renews_its_session_on_the_same_socket(
    broker: BrokerProcess,
) -> None:
    logins, renewals, failures, killed = counts(broker)

    async def scenario() -> int:
        connection = await AsyncConnection.open(
            "127.0.0.1", broker.ports["SASL_PLAINTEXT"], security=alice()
        )
        calls = 0
        try:
            deadline = time.monotonic() + 3.5 * SESSION_MS / 1000
            while time.monotonic() < deadline:
                await connection.request(metadata())
                calls += 1
                await asyncio.sleep(0.2)
        finally:
            await connection.close()
        return calls

    calls = asyncio.run(scenario())
    after = counts(broker)
    assert after[0] == logins + 1
    assert after[1] >= renewals + 2
    assert after[2] == failures
    assert after[3] == killed
    assert calls >= 10


def test_the_broker_closes_a_connection_whose_session_ended(broker: BrokerProcess) -> None:
    """What the renewal avoids: a client that does not renew (as tierlog's did not) loses
    its connection at the first request after the session's end."""
    killed = metric(broker, KILLED)
    connection = BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], security=alice())
    try:
        connection.call(metadata())
        connection._reauthenticate_at = None  # a client without KIP-368
        time.sleep(SESSION_MS / 1000 + 0.5)
        with pytest.raises((ConnectionClosedError, OSError)):
            connection.call(metadata())
    finally:
        connection.close()
    assert metric(broker, KILLED) == killed + 1  # Kafka's expired-connections-killed
