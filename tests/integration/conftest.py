"""Integration tests reuse the remote tier's moto fixtures (one S3 server per session),
share one real ZooKeeper per session (``zookeeper_server``), each test in its own chroot
(``zk_connect``) with started ZkClients on it (``new_client``), and kill the brokers a test
started (``brokers``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.broker.harness import BrokerProcess
from tests.integration import kafka_tools
from tests.integration.zk_clients import SESSION_TIMEOUT_MS, ClientFactory
from tests.remote.conftest import s3_bucket, s3_server  # noqa: F401
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_server import INSTALL_HINT, ZK_SERVER_SH, ZooKeeperServer


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """Debian's ZooKeeper on 127.0.0.1 for the whole session. Missing is a failure, never a
    skip: these tests are part of `make test`, which installs it."""
    if not ZK_SERVER_SH.exists():
        pytest.fail(f"ZooKeeper is not installed ({ZK_SERVER_SH}): {INSTALL_HINT}", pytrace=False)
    server = ZooKeeperServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperServer) -> str:
    """A connect string with a chroot of its own, so tests sharing the server never see
    each other's znodes."""
    return f"{zookeeper_server.connect}/tierlog-test-{uuid.uuid4().hex}"


@pytest.fixture
def new_client(zk_connect: str) -> Iterator[ClientFactory]:
    """Started ZkClients on the test's chroot, all stopped at the end."""
    clients: list[ZkClient] = []

    def make() -> ZkClient:
        client = ZkClient(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        client.start()
        clients.append(client)
        return client

    try:
        yield make
    finally:
        for client in clients:
            client.stop()


@pytest.fixture
def brokers() -> Iterator[list[BrokerProcess]]:
    """Brokers a test starts (appended here) are killed at its end, whatever happened."""
    started: list[BrokerProcess] = []
    yield started
    for broker in started:
        broker.kill()


@pytest.fixture(scope="session")
def tools() -> kafka_tools.KafkaDist:
    """Kafka's Java tools (jars from Maven Central), fetched once per process."""
    return kafka_tools.tools_or_fail()
