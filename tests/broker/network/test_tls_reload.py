"""ListenerCertificates on its own: the file poll on a ManualScheduler with a fake clock
(a file rewritten in place is taken at the next poll, a half-written one is not and is
logged once, a refused DN change keeps the old certificate), and the dynamic-config path
naming the listener's key. The real broker: test_tls_reload_broker.py."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from tests.security.certs import LocalCa, broker_files
from tests.security.tls_pump import handshake
from tierlog.broker.config import BrokerConfig
from tierlog.broker.network.tls_reload import ListenerCertificates
from tierlog.security.api import SecurityProtocol
from tierlog.security.client_config import ClientSecurity
from tierlog.security.tls import TlsSettings
from tierlog.security.tls_rotation import ListenerTls
from tierlog.util.clock import ManualClock
from tierlog.util.configdef import ConfigError
from tierlog.util.scheduler import ManualScheduler

INTERVAL_MS = 60_000
KEY = "listener.name.ssl.ssl.keystore.location"


@pytest.fixture(scope="module")
def ca() -> LocalCa:
    return LocalCa.create("reload test CA")


class Watched:
    def __init__(self, ca: LocalCa, tmp_path: Path) -> None:
        self.ca = ca
        self.files = broker_files(ca, tmp_path)
        self.keystore = Path(self.files["ssl.keystore.location"])
        self.tls = ListenerTls(TlsSettings.from_config(self.files))
        self.certificates = ListenerCertificates({"SSL": self.tls})
        self.scheduler = ManualScheduler(ManualClock())
        self.certificates.schedule_file_checks(self.scheduler, INTERVAL_MS)

    def serial(self) -> int:
        assert self.tls.leaf is not None
        return self.tls.leaf.serial_number

    def rewrite(self, organizational_unit: str = "brokers") -> int:
        issued = self.ca.issue("localhost", organizational_unit=organizational_unit)
        issued.write_pem_keystore(self.keystore)
        return issued.certificate.serial_number


@pytest.fixture
def watched(ca: LocalCa, tmp_path: Path) -> Watched:
    return Watched(ca, tmp_path)


def test_a_file_rewritten_in_place_is_taken_at_the_next_poll(watched: Watched) -> None:
    before = watched.serial()
    new = watched.rewrite()
    watched.scheduler.advance(INTERVAL_MS - 1)
    assert watched.serial() == before
    watched.scheduler.advance(1)
    assert watched.serial() == new != before
    assert watched.certificates.reload_changed_files() == []  # nothing new since


def test_a_half_written_file_is_not_taken_and_is_logged_once(
    watched: Watched, caplog: pytest.LogCaptureFixture
) -> None:
    before = watched.serial()
    complete = watched.ca.issue("localhost", organizational_unit="brokers")
    whole = complete.key_pem() + complete.chain_pem()
    watched.keystore.write_bytes(whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING, "tierlog.broker.network.tls_reload"):
        watched.scheduler.advance(INTERVAL_MS)
        watched.scheduler.advance(INTERVAL_MS)
    assert watched.serial() == before
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "listener SSL keeps its certificate" in warnings[0] and KEY in warnings[0]
    watched.keystore.write_bytes(whole)  # the writer finishes
    watched.scheduler.advance(INTERVAL_MS)
    assert watched.serial() == complete.certificate.serial_number


def test_a_new_file_with_another_dn_is_refused_on_disk_too(
    watched: Watched, caplog: pytest.LogCaptureFixture
) -> None:
    before = watched.serial()
    watched.rewrite(organizational_unit="elsewhere")
    with caplog.at_level(logging.WARNING, "tierlog.broker.network.tls_reload"):
        watched.scheduler.advance(INTERVAL_MS)
    assert watched.serial() == before
    assert "DistinguishedName does not match" in caplog.text


def test_no_poll_when_the_interval_is_zero(ca: LocalCa, tmp_path: Path) -> None:
    tls = ListenerTls(TlsSettings.from_config(broker_files(ca, tmp_path)))
    scheduler = ManualScheduler(ManualClock())
    ListenerCertificates({"SSL": tls}).schedule_file_checks(scheduler, 0)
    assert scheduler.scheduled() == []
    ListenerCertificates({}).schedule_file_checks(scheduler, INTERVAL_MS)  # no TLS listener
    assert scheduler.scheduled() == []


def test_a_dynamic_config_is_checked_and_applied_per_listener(
    watched: Watched, tmp_path: Path
) -> None:
    certificates = watched.certificates
    assert KEY in certificates.dynamic_keys()
    bad = BrokerConfig({**watched.files, "listeners": "SSL://:0", KEY: str(tmp_path / "none")})
    with pytest.raises(ConfigError) as caught:
        certificates.validate(bad)
    assert caught.value.key == KEY and "cannot read" in caught.value.reason
    issued = watched.ca.issue("localhost", organizational_unit="brokers")
    path = issued.write_pem_keystore(tmp_path / "next.pem")
    good = BrokerConfig({**watched.files, "listeners": "SSL://:0", KEY: str(path)})
    certificates.validate(good)
    assert watched.serial() != issued.certificate.serial_number  # validated, not applied
    certificates.apply(good)
    assert watched.serial() == issued.certificate.serial_number


def test_the_inter_broker_listener_gives_its_new_certificate_to_outgoing_connections(
    ca: LocalCa, tmp_path: Path
) -> None:
    files = broker_files(ca, tmp_path)
    settings = TlsSettings.from_config({**files, "ssl.client.auth": "required"})
    tls = ListenerTls(settings, inter_broker=True)
    peer = ClientSecurity(SecurityProtocol.SSL, settings)
    certificates = ListenerCertificates({"INTERNAL": tls}, "INTERNAL", peer)
    peer_context = peer.ssl_context()

    def presented(client: ssl.SSLContext | None) -> int:
        """The serial of the client certificate a broker connecting with ``client`` shows."""
        assert client is not None
        server, _ = handshake(tls.context, client)
        der = server.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number

    before = presented(peer_context)
    issued = ca.issue("localhost", organizational_unit="brokers")
    issued.write_pem_keystore(Path(files["ssl.keystore.location"]))
    assert certificates.reload_changed_files() == ["INTERNAL"]
    assert presented(peer.ssl_context()) == issued.certificate.serial_number != before
    # A connection set up before with the old context still shows the old certificate.
    assert presented(peer_context) == before
