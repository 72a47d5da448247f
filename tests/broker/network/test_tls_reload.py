"""A TLS listener's certificate replaced while the broker runs (issue 22), on a real broker
process with real TLS: through a dynamic broker config set by confluent-kafka's
AdminClient (as ``kafka-configs --entity-type brokers --alter`` sets it: the Java tool
itself is in tests/integration/test_kafka_tools_security.py). A new connection is shown the
new certificate (its serial compared), a connection made before keeps working, and a bad
keystore is refused in the answer with the key named while the old certificate stays."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from cryptography import x509

from tests.broker.harness import BrokerProcess
from tests.broker.test_admin import outcome
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey
from tierlog.security.local_ca import LocalCa

pytestmark = pytest.mark.timeout(120)

KEY = "listener.name.ssl.ssl.keystore.location"


@dataclass
class TlsBroker:
    broker: BrokerProcess
    ca: LocalCa
    tmp: Path
    keystore: Path

    @property
    def ssl_port(self) -> int:
        return self.broker.ports["SSL"]

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca.ca_pem().decode())

    def connect(self) -> RawClient:
        return RawClient(self.ssl_port, tls=self.client_context())

    def served_serial(self) -> int:
        """The serial of the certificate a new TLS connection is shown."""
        client = self.connect()
        try:
            return serial_of(client)
        finally:
            client.close()

    def new_keystore(self, name: str, organizational_unit: str = "brokers") -> tuple[Path, int]:
        issued = self.ca.issue("localhost", organizational_unit=organizational_unit)
        return issued.write_pem_keystore(self.tmp / name), issued.certificate.serial_number

    def alter(self, *ops: tuple[str, str | None, AlterConfigOpType]) -> tuple[int, str]:
        resource = ConfigResource(
            "broker",
            "0",
            incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops],
        )
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})
        return outcome(admin.incremental_alter_configs([resource])[resource])

    def describe(self) -> dict[str, ConfigEntry]:
        resource = ConfigResource("broker", "0")
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})
        found: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(10)
        return found


def serial_of(client: RawClient) -> int:
    der = client.peer_certificate()
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def api_versions_ok(client: RawClient) -> bool:
    return client.call(request(ApiKey.API_VERSIONS, 0, {})).error_code == 0


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[TlsBroker]:
    ca = LocalCa.create()
    keystore = ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        tmp_path / "broker.pem"
    )
    broker = BrokerProcess(
        tmp_path / "data",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(keystore),
        },
    ).start()
    try:
        yield TlsBroker(broker, ca, tmp_path, keystore)
    finally:
        broker.stop()


def test_a_keystore_set_through_alter_configs_serves_new_connections_old_ones_keep_theirs(
    tls_broker: TlsBroker,
) -> None:
    old = tls_broker.connect()
    try:
        old_serial = serial_of(old)
        assert api_versions_ok(old)
        path, new_serial = tls_broker.new_keystore("new.pem")
        assert tls_broker.alter((KEY, str(path), AlterConfigOpType.SET)) == (0, "")
        assert tls_broker.served_serial() == new_serial != old_serial
        described = tls_broker.describe()[KEY]  # as kafka-configs --describe shows it
        assert described.value == str(path) and not described.is_read_only
        assert described.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        # The connection made before keeps working, on the certificate it was made with.
        assert api_versions_ok(old)
        assert serial_of(old) == old_serial
    finally:
        old.close()
    assert "listener SSL now serves certificate" in tls_broker.broker.log_text()
    # Deleting the override goes back to the static keystore.
    assert tls_broker.alter((KEY, None, AlterConfigOpType.DELETE)) == (0, "")
    assert tls_broker.served_serial() == old_serial


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "cannot read"),
        (b"-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49", "no readable PEM private key"),
    ],
    ids=["missing", "half-written"],
)
def test_a_bad_keystore_is_refused_with_the_key_named_and_the_old_one_stays(
    tls_broker: TlsBroker, content: bytes | None, reason: str
) -> None:
    before = tls_broker.served_serial()
    bad = tls_broker.tmp / "bad.pem"
    if content is not None:
        bad.write_bytes(content)
    code, message = tls_broker.alter((KEY, str(bad), AlterConfigOpType.SET))
    assert code == KafkaError.INVALID_REQUEST, message
    assert KEY in message and reason in message
    assert tls_broker.served_serial() == before
    # Nothing was stored: a good keystore set next is the only override.
    path, new_serial = tls_broker.new_keystore("good.pem")
    assert tls_broker.alter((KEY, str(path), AlterConfigOpType.SET)) == (0, "")
    assert tls_broker.served_serial() == new_serial


def test_a_certificate_with_another_dn_is_refused_unless_kip_978_allows_it(
    tls_broker: TlsBroker,
) -> None:
    before = tls_broker.served_serial()
    path, _ = tls_broker.new_keystore("other.pem", organizational_unit="elsewhere")
    code, message = tls_broker.alter((KEY, str(path), AlterConfigOpType.SET))
    assert code == KafkaError.INVALID_REQUEST
    assert "DistinguishedName does not match" in message and KEY in message
    assert tls_broker.served_serial() == before


def test_the_same_path_set_again_reads_the_rewritten_file(tls_broker: TlsBroker) -> None:
    path, first = tls_broker.new_keystore("rotating.pem")
    assert tls_broker.alter((KEY, str(path), AlterConfigOpType.SET)) == (0, "")
    assert tls_broker.served_serial() == first
    _, second = tls_broker.new_keystore("rotating.pem")  # rewritten in place
    assert tls_broker.served_serial() == first  # nothing reads it by itself
    assert tls_broker.alter((KEY, str(path), AlterConfigOpType.SET)) == (0, "")
    assert tls_broker.served_serial() == second


def test_ssl_keys_are_dynamic_only_per_listener_and_per_broker(tls_broker: TlsBroker) -> None:
    code, message = tls_broker.alter(
        ("ssl.keystore.location", str(tls_broker.keystore), AlterConfigOpType.SET)
    )
    assert code == KafkaError.INVALID_REQUEST
    assert "only per-listener using the listener prefix" in message
    code, message = tls_broker.alter(
        ("listener.name.ssl.ssl.client.auth", "required", AlterConfigOpType.SET)
    )
    assert code == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically" in message
