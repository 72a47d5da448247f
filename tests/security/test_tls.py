from __future__ import annotations

import ssl
import stat
import tempfile
from pathlib import Path

import pytest

from tests.security.certs import LocalCa, broker_files
from tests.security.tls_pump import handshake
from tierlog.security.dn import subject_dn
from tierlog.security.errors import SecurityConfigError
from tierlog.security.ssl_principal_mapper import SslPrincipalMapper
from tierlog.security.tls import TlsSettings, client_context, server_context


def _client(ca: LocalCa, tmp_path: Path, **extra: str) -> ssl.SSLContext:
    return client_context(
        TlsSettings.from_config({"ssl.truststore.certificates": ca.ca_pem().decode(), **extra})
    )


def test_pem_keystore_file_with_an_encrypted_key(ca: LocalCa, tmp_path: Path) -> None:
    settings = TlsSettings.from_config(broker_files(ca, tmp_path, password="k3y-pw"))
    assert "k3y-pw" not in repr(settings)
    server, client = handshake(server_context(settings), _client(ca, tmp_path))
    assert server.version() in ("TLSv1.2", "TLSv1.3")
    assert client.getpeercert()["subject"][-1] == (("commonName", "localhost"),)


def test_inline_pem_key_and_chain(ca: LocalCa, tmp_path: Path) -> None:
    broker = ca.issue("localhost")
    settings = TlsSettings.from_config(
        {
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.key": broker.key_pem("pw").decode(),
            "listener.name.sasl_ssl.ssl.keystore.certificate.chain": broker.chain_pem().decode(),
            "ssl.key.password": "pw",
        },
        prefix="listener.name.sasl_ssl.",
    )
    handshake(server_context(settings), _client(ca, tmp_path))


def test_pkcs12_keystore_and_truststore(ca: LocalCa, tmp_path: Path) -> None:
    keystore = ca.issue("localhost").write_pkcs12(tmp_path / "broker.p12", "store-pw")
    assert stat.S_IMODE(keystore.stat().st_mode) == 0o600
    settings = TlsSettings.from_config(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": "store-pw",
        }
    )
    handshake(server_context(settings), _client(ca, tmp_path))
    wrong = TlsSettings.from_config(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": "nope",
        }
    )
    with pytest.raises(SecurityConfigError) as caught:
        server_context(wrong)
    assert caught.value.key == "ssl.keystore.password"


def test_mutual_tls_maps_the_client_dn_to_a_principal(ca: LocalCa, tmp_path: Path) -> None:
    settings = TlsSettings.from_config(
        {**broker_files(ca, tmp_path), "ssl.client.auth": "required"}
    )
    alice = ca.issue("alice", hosts=(), organizational_unit="analytics", organization="tierlog")
    client_settings = TlsSettings.from_config(
        {
            "ssl.keystore.key": alice.key_pem().decode(),
            "ssl.keystore.certificate.chain": alice.chain_pem().decode(),
            "ssl.truststore.certificates": ca.ca_pem().decode(),
        }
    )
    server, _ = handshake(server_context(settings), client_context(client_settings))
    der = server.getpeercert(binary_form=True)
    assert der is not None
    dn = subject_dn(der)
    assert dn == "CN=alice,OU=analytics,O=tierlog"
    assert (
        SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT").name(dn)
        == "alice@analytics"
    )


def test_required_client_auth_refuses_a_client_without_certificate(
    ca: LocalCa, tmp_path: Path
) -> None:
    settings = TlsSettings.from_config(
        {**broker_files(ca, tmp_path), "ssl.client.auth": "required"}
    )
    with pytest.raises(ssl.SSLError):
        handshake(server_context(settings), _client(ca, tmp_path))


def test_host_name_checking(ca: LocalCa, tmp_path: Path) -> None:
    server = server_context(TlsSettings.from_config(broker_files(ca, tmp_path)))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, _client(ca, tmp_path), server_hostname="broker.elsewhere")
    handshake(
        server,
        _client(ca, tmp_path, **{"ssl.endpoint.identification.algorithm": ""}),
        "broker.elsewhere",
    )


def test_an_untrusted_server_is_refused(ca: LocalCa, tmp_path: Path) -> None:
    other = LocalCa.create("another CA")
    server = server_context(TlsSettings.from_config(broker_files(other, tmp_path)))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, _client(ca, tmp_path))


def test_protocols_and_cipher_suites(ca: LocalCa, tmp_path: Path) -> None:
    settings = TlsSettings.from_config(
        {
            **broker_files(ca, tmp_path),
            "ssl.enabled.protocols": "TLSv1.2",
            "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        }
    )
    server, _ = handshake(server_context(settings), _client(ca, tmp_path))
    assert server.version() == "TLSv1.2"
    assert server.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({"ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"),
        ({"ssl.keystore.key": "x"}, "ssl.keystore.certificate.chain"),
        (
            {"ssl.endpoint.identification.algorithm": "ldap"},
            "ssl.endpoint.identification.algorithm",
        ),
        ({"ssl.cipher.suites": "TLS_NOT_A_SUITE"}, "ssl.cipher.suites"),
    ],
)
def test_bad_settings_name_the_key(config: dict[str, str], key: str) -> None:
    with pytest.raises(SecurityConfigError) as caught:
        client_context(TlsSettings.from_config(config))
    assert caught.value.key == key


def test_client_auth_needs_a_truststore(ca: LocalCa, tmp_path: Path) -> None:
    files = broker_files(ca, tmp_path)
    del files["ssl.truststore.location"]
    with pytest.raises(SecurityConfigError) as caught:
        server_context(TlsSettings.from_config({**files, "ssl.client.auth": "requested"}))
    assert caught.value.key == "ssl.truststore.location"
    server_context(TlsSettings.from_config(files))  # without client auth it needs none


def test_wrong_key_password_names_ssl_key_password(ca: LocalCa, tmp_path: Path) -> None:
    files = broker_files(ca, tmp_path, password="right")
    with pytest.raises(SecurityConfigError) as caught:
        server_context(TlsSettings.from_config({**files, "ssl.key.password": "wrong"}))
    assert caught.value.key == "ssl.keystore.location" and "ssl.key.password" in caught.value.reason
    del files["ssl.key.password"]
    with pytest.raises(SecurityConfigError, match=r"set ssl\.key\.password"):
        server_context(TlsSettings.from_config(files))


def test_key_files_are_private_and_no_key_is_left_behind(
    ca: LocalCa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    files = broker_files(ca, tmp_path / "keys")
    assert stat.S_IMODE(Path(files["ssl.keystore.location"]).stat().st_mode) == 0o600
    broker = ca.issue("localhost")
    server_context(
        TlsSettings.from_config(
            {
                "ssl.keystore.key": broker.key_pem().decode(),
                "ssl.keystore.certificate.chain": broker.chain_pem().decode(),
            }
        )
    )
    assert list(scratch.iterdir()) == []
