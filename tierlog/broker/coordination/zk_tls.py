"""TLS between a broker (or a tool) and ZooKeeper, with Kafka's keys (KIP-515):
``zookeeper.ssl.client.enable=true`` and ``zookeeper.ssl.*``.

ZooKeeper serves TLS on its ``secureClientPort`` (with its Netty connection factory);
``zookeeper.connect`` then names that port. The broker's certificate is its identity to a
server that wants one (``ssl.clientAuth=need``), and the truststore holds the CA that
signed the servers'. Keystores and truststores are PEM files, as ZooKeeper's own
``ssl.keyStore.type=PEM`` takes them (the key may be encrypted:
``zookeeper.ssl.keystore.password``).

What kazoo, the ZooKeeper client, cannot do is refused by name rather than ignored:
JKS and PKCS12 stores, and choosing protocols, cipher suites, CRL or OCSP checks (kazoo
uses Python's defaults, TLS 1.2 and up). Host names are checked unless
``zookeeper.ssl.endpoint.identification.algorithm`` is empty, as in Kafka; the system's
CAs are trusted besides the truststore's (kazoo loads both).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tierlog.security.errors import SecurityConfigError
from tierlog.security.password import Password

ENABLE_KEY: Final = "zookeeper.ssl.client.enable"
SOCKET_KEY: Final = "zookeeper.clientCnxnSocket"
NETTY_SOCKET: Final = "org.apache.zookeeper.ClientCnxnSocketNetty"
KEYSTORE_LOCATION: Final = "zookeeper.ssl.keystore.location"
KEYSTORE_PASSWORD: Final = "zookeeper.ssl.keystore.password"
KEYSTORE_TYPE: Final = "zookeeper.ssl.keystore.type"
TRUSTSTORE_LOCATION: Final = "zookeeper.ssl.truststore.location"
TRUSTSTORE_PASSWORD: Final = "zookeeper.ssl.truststore.password"
TRUSTSTORE_TYPE: Final = "zookeeper.ssl.truststore.type"
ENDPOINT_IDENTIFICATION: Final = "zookeeper.ssl.endpoint.identification.algorithm"
# Kafka's keys kazoo has no way to honour: only their defaults are accepted.
FIXED: Final[Mapping[str, str]] = {
    "zookeeper.ssl.protocol": "TLSv1.2",
    "zookeeper.ssl.enabled.protocols": "",
    "zookeeper.ssl.cipher.suites": "",
    "zookeeper.ssl.crl.enable": "false",
    "zookeeper.ssl.ocsp.enable": "false",
}
KEYS: Final = (
    ENABLE_KEY,
    SOCKET_KEY,
    KEYSTORE_LOCATION,
    KEYSTORE_PASSWORD,
    KEYSTORE_TYPE,
    TRUSTSTORE_LOCATION,
    TRUSTSTORE_PASSWORD,
    TRUSTSTORE_TYPE,
    ENDPOINT_IDENTIFICATION,
    *FIXED,
)
SENSITIVE: Final = frozenset({KEYSTORE_PASSWORD, TRUSTSTORE_PASSWORD})


@dataclass(frozen=True)
class ZkTls:
    """The TLS of a ZooKeeper session: kazoo's arguments (``kazoo_arguments``)."""

    keystore: Path | None  # PEM: the key and the certificate chain
    keystore_password: Password | None
    truststore: Path | None
    check_hostname: bool

    def kazoo_arguments(self) -> dict[str, Any]:
        return {
            "use_ssl": True,
            "certfile": str(self.keystore) if self.keystore else None,
            "keyfile": str(self.keystore) if self.keystore else None,
            "keyfile_password": self.keystore_password.value if self.keystore_password else None,
            "ca": str(self.truststore) if self.truststore else None,
            "verify_certs": True,
            "check_hostname": self.check_hostname,
        }


def zk_tls(props: Mapping[str, Any]) -> ZkTls | None:
    """The TLS a broker's (or a tool's) properties ask for; None without
    ``zookeeper.ssl.client.enable=true``.

    Raises:
        SecurityConfigError: naming the key at fault: a store that is not a readable PEM
            file, a store type or a setting kazoo cannot honour, another client socket.
    """

    def text(key: str, default: str = "") -> str:
        value = props.get(key)
        return default if value is None else str(value).strip()

    enabled = text(ENABLE_KEY, "false").lower()
    if enabled not in ("true", "false"):
        raise SecurityConfigError(ENABLE_KEY, f"expected true or false, got {enabled!r}")
    if enabled == "false":
        return None
    socket = text(SOCKET_KEY)
    if socket and socket != NETTY_SOCKET:
        raise SecurityConfigError(
            SOCKET_KEY, f"TLS needs ZooKeeper's Netty client socket ({NETTY_SOCKET}) or none"
        )
    for key, default in FIXED.items():
        given = text(key, default)
        if given.lower() != default.lower():
            raise SecurityConfigError(
                key,
                f"{given!r} cannot be honoured by tierlog's ZooKeeper client (kazoo uses "
                f"Python's TLS defaults); leave it unset",
            )
    keystore = _pem_store(props, KEYSTORE_LOCATION, KEYSTORE_TYPE)
    truststore = _pem_store(props, TRUSTSTORE_LOCATION, TRUSTSTORE_TYPE)
    password = text(KEYSTORE_PASSWORD)
    algorithm = text(ENDPOINT_IDENTIFICATION, "HTTPS")
    if algorithm.upper() not in ("HTTPS", ""):
        raise SecurityConfigError(
            ENDPOINT_IDENTIFICATION,
            f"expected HTTPS or empty (no host name check), got {algorithm!r}",
        )
    return ZkTls(
        keystore=keystore,
        keystore_password=Password(password) if password else None,
        truststore=truststore,
        check_hostname=algorithm.upper() == "HTTPS",
    )


def _pem_store(props: Mapping[str, Any], location_key: str, type_key: str) -> Path | None:
    location = str(props.get(location_key) or "").strip()
    kind = str(props.get(type_key) or "PEM").strip().upper()
    if kind != "PEM":
        raise SecurityConfigError(
            type_key, f"{kind} stores are not supported for ZooKeeper; use PEM files"
        )
    if not location:
        return None
    path = Path(location)
    try:
        head = path.read_bytes()[:65536]
    except OSError as exc:
        raise SecurityConfigError(location_key, f"cannot read {path}: {exc.strerror}") from None
    if b"-----BEGIN " not in head:
        raise SecurityConfigError(location_key, f"{path} is not a PEM file")
    return path
