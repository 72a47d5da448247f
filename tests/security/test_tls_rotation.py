"""A running listener's certificate replaced: Kafka's checks (SslFactory's
validateReconfiguration: DN and SANs kept unless KIP-978's keys allow, no truststore added,
the inter-broker test handshake) and the context swapped whole, or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from tests.security.certs import LocalCa, broker_files
from tests.security.tls_pump import handshake
from tierlog.security.errors import SecurityConfigError
from tierlog.security.tls import TlsSettings, client_context
from tierlog.security.tls_rotation import ListenerTls


def _settings(files: dict[str, str], **extra: str) -> TlsSettings:
    return TlsSettings.from_config({**files, **extra})


def _served_serial(tls: ListenerTls, ca: LocalCa) -> int:
    """The serial of the certificate a new connection is shown."""
    client = client_context(
        TlsSettings.from_config({"ssl.truststore.certificates": ca.ca_pem().decode()})
    )
    _, end = handshake(tls.context, client)
    der = end.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_a_new_certificate_with_the_same_dn_and_names_replaces_the_old(
    ca: LocalCa, tmp_path: Path
) -> None:
    files = broker_files(ca, tmp_path)
    tls = ListenerTls(_settings(files))
    before = _served_serial(tls, ca)
    new = ca.issue("localhost", organizational_unit="brokers")
    new_path = new.write_pem_keystore(tmp_path / "new.pem")
    candidate = tls.prepare(_settings(files, **{"ssl.keystore.location": str(new_path)}))
    assert candidate is not None
    assert _served_serial(tls, ca) == before  # checked, not yet installed
    tls.install(candidate)
    assert _served_serial(tls, ca) == new.certificate.serial_number != before


def test_nothing_to_do_when_settings_and_files_are_unchanged(ca: LocalCa, tmp_path: Path) -> None:
    files = broker_files(ca, tmp_path)
    tls = ListenerTls(_settings(files))
    assert tls.prepare(_settings(files)) is None
    assert not tls.files_changed()
    ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        Path(files["ssl.keystore.location"])
    )
    assert tls.files_changed()
    assert tls.prepare(_settings(files)) is not None  # same settings, the file changed


def test_a_changed_dn_is_refused_unless_allowed(ca: LocalCa, tmp_path: Path) -> None:
    files = broker_files(ca, tmp_path)
    tls = ListenerTls(_settings(files))
    before = _served_serial(tls, ca)
    other = ca.issue("localhost", organizational_unit="other").write_pem_keystore(
        tmp_path / "other.pem"
    )
    with pytest.raises(SecurityConfigError) as caught:
        tls.prepare(_settings(files, **{"ssl.keystore.location": str(other)}))
    assert caught.value.key == "ssl.keystore.location"
    assert "DistinguishedName does not match" in caught.value.reason
    assert "OU=other" in caught.value.reason and "ssl.allow.dn.changes" in caught.value.reason
    assert _served_serial(tls, ca) == before
    allowed = _settings(
        files, **{"ssl.keystore.location": str(other), "ssl.allow.dn.changes": "true"}
    )
    assert tls.prepare(allowed) is not None


def test_dropping_a_subject_alternative_name_is_refused_adding_one_is_not(
    ca: LocalCa, tmp_path: Path
) -> None:
    files = broker_files(ca, tmp_path)  # localhost, 127.0.0.1
    tls = ListenerTls(_settings(files))
    fewer = ca.issue("localhost", hosts=("localhost",), organizational_unit="brokers")
    fewer_path = fewer.write_pem_keystore(tmp_path / "fewer.pem")
    with pytest.raises(SecurityConfigError, match=r"SubjectAltNames do not match.*127\.0\.0\.1"):
        tls.prepare(_settings(files, **{"ssl.keystore.location": str(fewer_path)}))
    more = ca.issue(
        "localhost", hosts=("localhost", "127.0.0.1", "kafka-1"), organizational_unit="brokers"
    ).write_pem_keystore(tmp_path / "more.pem")
    assert tls.prepare(_settings(files, **{"ssl.keystore.location": str(more)})) is not None
    allowed = _settings(
        files, **{"ssl.keystore.location": str(fewer_path), "ssl.allow.san.changes": "true"}
    )
    assert tls.prepare(allowed) is not None


@pytest.mark.parametrize(
    "content",
    [b"", b"-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0w", b"junk"],
    ids=["empty", "half-written", "not-pem"],
)
def test_a_keystore_that_does_not_load_is_refused_and_the_old_one_stays(
    ca: LocalCa, tmp_path: Path, content: bytes
) -> None:
    files = broker_files(ca, tmp_path)
    tls = ListenerTls(_settings(files))
    before = _served_serial(tls, ca)
    Path(files["ssl.keystore.location"]).write_bytes(content)
    assert tls.files_changed()
    with pytest.raises(SecurityConfigError) as caught:
        tls.prepare(_settings(files))
    assert caught.value.key == "ssl.keystore.location"
    assert _served_serial(tls, ca) == before


def test_a_missing_file_names_the_key(ca: LocalCa, tmp_path: Path) -> None:
    files = broker_files(ca, tmp_path)
    tls = ListenerTls(_settings(files))
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(SecurityConfigError, match="cannot read") as caught:
        tls.prepare(_settings(files, **{"ssl.keystore.location": missing}))
    assert caught.value.key == "ssl.keystore.location"


def test_a_truststore_cannot_be_added_to_a_listener_started_without_one(
    ca: LocalCa, tmp_path: Path
) -> None:
    files = broker_files(ca, tmp_path)
    keystore_only = {k: v for k, v in files.items() if "truststore" not in k}
    tls = ListenerTls(_settings(keystore_only))
    with pytest.raises(SecurityConfigError, match="Cannot add SSL truststore") as caught:
        tls.prepare(_settings(files))
    assert caught.value.key == "ssl.truststore.location"


def test_the_inter_broker_listener_refuses_a_certificate_its_peers_would_not_trust(
    ca: LocalCa, tmp_path: Path
) -> None:
    files = broker_files(ca, tmp_path)
    tls = ListenerTls(_settings(files), inter_broker=True)
    new_ca = LocalCa.create("new CA")
    foreign = new_ca.issue("localhost", organizational_unit="brokers").write_pem_keystore(
        tmp_path / "foreign.pem"
    )
    with pytest.raises(SecurityConfigError, match="inter-broker listener") as caught:
        tls.prepare(_settings(files, **{"ssl.keystore.location": str(foreign)}))
    assert caught.value.key == "ssl.keystore.location"
    # Both CAs trusted first (Kafka's two-step CA rotation): then the new certificate is
    # taken.
    both = tmp_path / "both.pem"
    both.write_bytes(ca.ca_pem() + new_ca.ca_pem())
    trusting = {**files, "ssl.truststore.location": str(both)}
    step = tls.prepare(_settings(trusting))
    assert step is not None
    tls.install(step)
    assert tls.prepare(_settings(trusting, **{"ssl.keystore.location": str(foreign)})) is not None
    # Not the inter-broker listener: no handshake to pass.
    plain = ListenerTls(_settings(files))
    assert plain.prepare(_settings(files, **{"ssl.keystore.location": str(foreign)})) is not None
