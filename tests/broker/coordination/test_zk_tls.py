"""tierlog.broker.coordination.zk_tls: Kafka's zookeeper.ssl.* keys to kazoo's TLS
arguments, and a clear refusal, naming the key, of what kazoo cannot honour (the wire:
tests/integration/test_zookeeper_tls.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierlog.broker.coordination.zk_tls import zk_tls
from tierlog.security.errors import SecurityConfigError
from tierlog.security.local_ca import LocalCa


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("zk-tls-keys")
    ca = LocalCa.create()
    keystore = ca.issue("broker", hosts=()).write_pem_keystore(tmp / "broker.pem", "pw")
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.ssl.keystore.location": str(keystore),
        "zookeeper.ssl.keystore.password": "pw",
        "zookeeper.ssl.truststore.location": str(ca.write_ca(tmp / "ca.pem")),
    }


def test_off_unless_enabled() -> None:
    assert zk_tls({}) is None
    assert zk_tls({"zookeeper.ssl.client.enable": "false"}) is None
    assert zk_tls({"zookeeper.ssl.client.enable": False}) is None  # a typed config value


def test_pem_stores_become_kazoos_arguments(stores: dict[str, str]) -> None:
    tls = zk_tls(stores)
    assert tls is not None
    assert tls.kazoo_arguments() == {
        "use_ssl": True,
        "certfile": stores["zookeeper.ssl.keystore.location"],
        "keyfile": stores["zookeeper.ssl.keystore.location"],
        "keyfile_password": "pw",
        "ca": stores["zookeeper.ssl.truststore.location"],
        "verify_certs": True,
        "check_hostname": True,  # Kafka's default: HTTPS
    }
    unchecked = zk_tls({**stores, "zookeeper.ssl.endpoint.identification.algorithm": ""})
    assert unchecked is not None and unchecked.kazoo_arguments()["check_hostname"] is False


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("zookeeper.ssl.client.enable", "yes", "expected true or false"),
        ("zookeeper.ssl.keystore.type", "JKS", "use PEM files"),
        ("zookeeper.ssl.truststore.type", "PKCS12", "use PEM files"),
        ("zookeeper.ssl.keystore.location", "/nonexistent/broker.pem", "cannot read"),
        ("zookeeper.ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", "cannot be honoured"),
        ("zookeeper.ssl.enabled.protocols", "TLSv1.3", "cannot be honoured"),
        ("zookeeper.ssl.protocol", "TLSv1.3", "cannot be honoured"),
        ("zookeeper.ssl.ocsp.enable", "true", "cannot be honoured"),
        ("zookeeper.clientCnxnSocket", "org.apache.zookeeper.ClientCnxnSocketNIO", "Netty"),
        ("zookeeper.ssl.endpoint.identification.algorithm", "LDAPS", "HTTPS or empty"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(
    stores: dict[str, str], key: str, value: str, reason: str
) -> None:
    with pytest.raises(SecurityConfigError, match=reason) as raised:
        zk_tls({**stores, key: value})
    assert raised.value.key == key


def test_a_store_that_is_not_pem_is_refused(stores: dict[str, str], tmp_path: Path) -> None:
    der = tmp_path / "ca.der"
    der.write_bytes(b"\x30\x82\x01\x0a not PEM")
    with pytest.raises(SecurityConfigError, match="not a PEM file"):
        zk_tls({**stores, "zookeeper.ssl.truststore.location": str(der)})
