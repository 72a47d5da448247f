"""Kafka's own ``kafka-configs`` swaps a TLS listener's certificate on a tierlog broker in
ZooKeeper mode, as an operator of Kafka does it (issue 22): ``--entity-type brokers
--entity-name 0 --alter --add-config listener.name.ssl.ssl.keystore.location=...``. The
override lands in ``/config/brokers/0``; new TLS connections are shown the new certificate;
a keystore that does not load makes the tool fail with the key named, and the old
certificate stays. The tools are ``make kafka-tools``'s."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from tests.integration import kafka_tools
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.kafka_tools import KafkaDist, ToolRun
from tests.integration.zk_clients import raw_client
from tests.raw_client import RawClient
from tierlog.security.local_ca import LocalCa

pytestmark = pytest.mark.timeout(
    180 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 180
)

KEY = "listener.name.ssl.ssl.keystore.location"


@pytest.fixture
def ca() -> LocalCa:
    return LocalCa.create()


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str, ca: LocalCa) -> Iterator[ProcessCluster]:
    keystore = ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        tmp_path / "broker.pem"
    )
    c = ProcessCluster(
        tmp_path,
        zk_connect,
        1,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(keystore),
        },
    )
    try:
        yield c.start()
    finally:
        c.stop()


def configs(tools: KafkaDist, bootstrap: str, *args: str) -> ToolRun:
    return kafka_tools.run_tool(
        tools,
        kafka_tools.CONFIGS,
        ["--bootstrap-server", bootstrap, "--entity-type", "brokers", "--entity-name", "0", *args],
    )


def served_serial(port: int, ca: LocalCa) -> int:
    client = RawClient(port, tls=ssl.create_default_context(cadata=ca.ca_pem().decode()))
    try:
        der = client.peer_certificate()
    finally:
        client.close()
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_kafka_configs_swaps_the_certificate_and_refuses_a_bad_keystore(
    tools: KafkaDist, cluster: ProcessCluster, ca: LocalCa, zk_connect: str, tmp_path: Path
) -> None:
    broker = cluster.brokers[0]
    port = broker.ports["SSL"]
    before = served_serial(port, ca)
    issued = ca.issue("localhost", organizational_unit="brokers")
    new = issued.write_pem_keystore(tmp_path / "new.pem")

    done = configs(tools, broker.bootstrap, "--alter", "--add-config", f"{KEY}={new}")
    assert done.returncode == 0, done.output
    assert served_serial(port, ca) == issued.certificate.serial_number != before
    zk = raw_client(zk_connect)
    try:
        stored = json.loads(zk.get("/config/brokers/0")[0])
    finally:
        zk.stop()
    assert stored["config"][KEY] == str(new)
    described = configs(tools, broker.bootstrap, "--describe")
    assert f"{KEY}={new}" in described.stdout, described.output

    half = tmp_path / "half.pem"
    half.write_bytes(new.read_bytes()[:100])
    refused = configs(tools, broker.bootstrap, "--alter", "--add-config", f"{KEY}={half}")
    assert refused.returncode != 0
    assert "InvalidRequestException" in refused.output and KEY in refused.output, refused.output
    assert served_serial(port, ca) == issued.certificate.serial_number
