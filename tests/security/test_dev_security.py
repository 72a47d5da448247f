"""The files and settings of a secured development cluster (``security.dev_security``): made
once and reused, secrets only in 0600 files and referenced elsewhere, and settings a broker
and a client accept as they are."""

from __future__ import annotations

import stat
from pathlib import Path

from cryptography import x509

from tierlog.broker.config import BrokerConfig
from tierlog.security.config_providers import resolve
from tierlog.security.dev_security import DevSecurity
from tierlog.util.properties import load_properties


def secrets(directory: Path) -> list[str]:
    return [
        value
        for name in ("admin-secret.properties", "brokers-secret.properties")
        for value in load_properties(directory / name).values()
    ]


def test_made_once_then_reused_and_a_new_broker_gets_a_keystore(tmp_path: Path) -> None:
    first = DevSecurity.ensure(tmp_path / "security", range(2))
    files = {p.name: p.read_bytes() for p in first.directory.iterdir()}
    assert set(files) == {
        "ca.pem",
        "ca-key.pem",
        "broker-0.pem",
        "broker-1.pem",
        "admin-secret.properties",
        "brokers-secret.properties",
    }
    assert stat.S_IMODE(first.directory.stat().st_mode) == 0o700
    for name in set(files) - {"ca.pem"}:
        assert stat.S_IMODE((first.directory / name).stat().st_mode) == 0o600, name
    again = DevSecurity.ensure(tmp_path / "security", range(3))
    assert again.admin_password == first.admin_password
    assert again.broker_password == first.broker_password
    assert {p.name: p.read_bytes() for p in again.directory.iterdir() if p.name in files} == files
    # Broker 2's keystore is issued by the same CA, for 127.0.0.1 and localhost.
    chain = x509.load_pem_x509_certificates((again.directory / "broker-2.pem").read_bytes())
    chain[0].verify_directly_issued_by(again.ca.certificate)  # signed by this CA key
    names = chain[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1"}
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]


def test_a_lost_ca_key_reissues_the_keystores(tmp_path: Path) -> None:
    first = DevSecurity.ensure(tmp_path / "security", [0])
    (first.directory / "ca-key.pem").unlink()
    again = DevSecurity.ensure(tmp_path / "security", [0])
    chain = x509.load_pem_x509_certificates((again.directory / "broker-0.pem").read_bytes())
    chain[0].verify_directly_issued_by(again.ca.certificate)  # signed by this CA key
    assert again.ca.certificate != first.ca.certificate


def test_no_setting_holds_a_secret_and_a_broker_resolves_them(tmp_path: Path) -> None:
    security = DevSecurity.ensure(tmp_path / "security", [0])
    settings = security.broker_settings(0, 0)
    client = security.client_properties("127.0.0.1:9092")
    for secret in secrets(security.directory):
        assert not any(secret in value for value in [*settings.values(), *client.values()])
    config = BrokerConfig({**settings, "log.dirs": str(tmp_path / "logs")})
    assert (
        security.broker_password.value
        in config.raw["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    )
    assert security.zookeeper_password.value in config.raw["zookeeper.jaas.config"]
    assert config.listener_plan() is not None  # the listener and inter-broker keys agree
    resolved = resolve(client)
    assert f'password="{security.admin_password.value}"' in resolved["sasl.jaas.config"]
    # A single node has no ZooKeeper to guard.
    assert "zookeeper.set.acl" not in security.broker_settings(0, 0, zookeeper=False)
