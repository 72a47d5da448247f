"""A TLS listener's certificate replaced while the broker runs (issue 22), on a real broker
process with real TLS: through a dynamic broker config set by confluent-kafka's
AdminClient (as ``kafka-configs --entity-type brokers --alter`` sets it: the Java tool
itself is in tests/integration/test_tls_reload_kafka_configs.py), and by rewriting the
keystore file in place (``ssl.keystore.reload.interval.ms``). A new connection is shown the
new certificate (its serial compared), a connection made before keeps working, and a bad
keystore is refused with the key named while the old certificate stays."""

from __future__ import annotations

import ssl
import time
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


def start_tls_broker(
    tmp_path: Path, reload_interval_ms: int, extra: dict[str, str] | None = None
) -> TlsBroker:
    ca = LocalCa.create()
    keystore = ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        tmp_path / "broker.pem"
    )
    broker = BrokerProcess(
        tmp_path / "data",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.reload.interval.ms": str(reload_interval_ms),
            **(extra or {}),
        },
    ).start()
    return TlsBroker(broker, ca, tmp_path, keystore)


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[TlsBroker]:
    # The file poll off: only the dynamic config reloads here.
    started = start_tls_broker(tmp_path, 0)
    try:
        yield started
    finally:
        started.broker.stop()


@pytest.fixture
def polling_broker(tmp_path: Path) -> Iterator[TlsBroker]:
    started = start_tls_broker(tmp_path, 200)
    try:
        yield started
    finally:
        started.broker.stop()


def wait_for_serial(tls_broker: TlsBroker, serial: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while tls_broker.served_serial() != serial:
        assert time.monotonic() < deadline, "the new certificate was not served in time"
        time.sleep(0.1)


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


def test_a_keystore_rewritten_in_place_is_served_without_any_command(
    polling_broker: TlsBroker,
) -> None:
    old = polling_broker.connect()
    try:
        before = serial_of(old)
        issued = polling_broker.ca.issue("localhost", organizational_unit="brokers")
        whole = issued.key_pem() + issued.chain_pem()
        # A writer part-way through: the broker logs it and keeps its certificate...
        polling_broker.keystore.write_bytes(whole[: len(whole) // 2])
        wait_until_logged(polling_broker, "listener SSL keeps its certificate")
        assert polling_broker.served_serial() == before
        # ...and takes the file once it is whole.
        polling_broker.keystore.write_bytes(whole)
        wait_for_serial(polling_broker, issued.certificate.serial_number)
        assert api_versions_ok(old) and serial_of(old) == before
    finally:
        old.close()
    assert "listener SSL now serves certificate" in polling_broker.broker.log_text()


def wait_until_logged(tls_broker: TlsBroker, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in tls_broker.broker.log_text():
        assert time.monotonic() < deadline, f"not logged in time: {text}"
        time.sleep(0.1)


def test_a_key_password_is_set_as_a_config_provider_reference_never_stored_in_clear(
    tmp_path: Path,
) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("next.key.password=n3xt-pw\n")
    secrets.chmod(0o600)
    started = start_tls_broker(
        tmp_path,
        0,
        {
            "config.providers": "file",
            "config.providers.file.class": (
                "org.apache.kafka.common.config.provider.FileConfigProvider"
            ),
        },
    )
    try:
        issued = started.ca.issue("localhost", organizational_unit="brokers")
        encrypted = issued.write_pem_keystore(tmp_path / "next.pem", "n3xt-pw")
        password_key = "listener.name.ssl.ssl.key.password"
        # The secret itself is refused: stored configs are plain metadata.
        code, message = started.alter(
            (KEY, str(encrypted), AlterConfigOpType.SET),
            (password_key, "n3xt-pw", AlterConfigOpType.SET),
        )
        assert code == KafkaError.INVALID_REQUEST
        assert "Password encoder secret not configured" in message and password_key in message
        assert "n3xt-pw" not in message
        reference = f"${{file:{secrets}:next.key.password}}"
        assert started.alter(
            (KEY, str(encrypted), AlterConfigOpType.SET),
            (password_key, reference, AlterConfigOpType.SET),
        ) == (0, "")
        assert started.served_serial() == issued.certificate.serial_number
        described = started.describe()[password_key]
        assert described.value is None and described.is_sensitive
        # The single node's metadata store (snapshot and journal) holds the reference, not
        # the password.
        stored = "".join(f.read_text() for f in started.broker.data_dir.glob("tierlog-metadata.j*"))
        assert "n3xt-pw" not in stored
        assert reference in stored
    finally:
        started.broker.stop()
