"""The security of a local development cluster (``tierlog cluster start --secure``,
``EmbeddedCluster(secure=True)``, ``EmbeddedBroker(secure=True)``): the files it is made of,
made once and reused on every later start, and the broker and client settings that use them.

Files, in one directory (``<data dir>/security``, 0700)::

    ca.pem                      the local CA's certificate: every client's truststore
    ca-key.pem                  its private key (0600): issues a keystore for a new broker
    broker-<id>.pem             broker <id>'s PEM keystore (0600), SAN localhost/127.0.0.1
    admin-secret.properties     password=<the admin user's password> (0600)
    brokers-secret.properties   broker.password=, zookeeper.password= (0600)

and beside the directory ``admin.properties``: Kafka's client keys for the admin user
(``--command-config`` of Kafka's and tierlog's tools, ``TIERLOG_CLIENT_CONFIG`` of the
pipelines). Neither it nor any broker setting holds a password: they reference the 0600
files through Kafka's ``FileConfigProvider`` (KIP-297, ``${file:<path>:<key>}``), so a
password is never on a command line, in a process list or in a log.

What the brokers run with: one SASL_SSL listener (clients and brokers alike) with
SCRAM-SHA-512; the brokers log in to each other as ``broker``
(``security.inter.broker.protocol=SASL_SSL``); the ACL authorizer with ``admin`` and
``broker`` as super users (Kafka requires ClusterAction for the brokers); and, in a
cluster, ZooKeeper's own ACLs (``zookeeper.set.acl=true`` with a digest identity,
``zk_auth``). The SCRAM users themselves are written by whoever has the credential store
(``credentials()``; ZooKeeper's ``/config/users`` or a single node's metadata store),
before the brokers start and only when missing, so a password changed later (by
``kafka-configs``) is not reset.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tierlog.security.local_ca import LocalCa
from tierlog.security.password import Password
from tierlog.util.properties import load_properties

__all__ = ["ADMIN_USER", "BROKER_USER", "MECHANISM", "DevSecurity"]

MECHANISM: Final = "SCRAM-SHA-512"
ADMIN_USER: Final = "admin"
BROKER_USER: Final = "broker"
# The brokers' ZooKeeper identity (digest scheme).
ZOOKEEPER_USER: Final = "tierlog-brokers"
LISTENER: Final = "SASL_SSL"
FILE_PROVIDER: Final = {
    "config.providers": "file",
    "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
}
SCRAM_LOGIN_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
ZK_LOGIN_MODULE: Final = "org.apache.zookeeper.server.auth.DigestLoginModule"
ADMIN_SECRET: Final = "admin-secret.properties"
BROKERS_SECRET: Final = "brokers-secret.properties"
CLIENT_PROPERTIES: Final = "admin.properties"
# A password of 32 URL-safe characters (192 random bits): nothing in it needs quoting in a
# JAAS entry or a properties file.
_PASSWORD_BYTES: Final = 24


def _reference(path: Path, key: str) -> str:
    return f"${{file:{path}:{key}}}"


def _write_secret(path: Path, values: dict[str, str]) -> None:
    """A properties file readable by this user only: created 0600 before anything is in it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)
        file.writelines(f"{key}={value}\n" for key, value in values.items())


def _read_or_make_secret(path: Path, keys: Iterable[str]) -> dict[str, Password]:
    """The secrets of ``path``, made (random) and written first when the file is missing;
    a key missing from an existing file is added, the others kept."""
    keys = list(keys)
    current = load_properties(path) if path.exists() else {}
    if any(not current.get(k) for k in keys):
        made = {k: current.get(k) or secrets.token_urlsafe(_PASSWORD_BYTES) for k in keys}
        _write_secret(path, {**current, **made})
        current = {**current, **made}
    return {k: Password(current[k]) for k in keys}


@dataclass(frozen=True)
class DevSecurity:
    """The security files of one local cluster (module docstring) and the settings that
    use them. Make it with ``ensure``."""

    directory: Path
    ca: LocalCa
    admin_password: Password
    broker_password: Password
    zookeeper_password: Password

    @classmethod
    def ensure(cls, directory: Path, broker_ids: Iterable[int] = ()) -> DevSecurity:
        """Load the files of ``directory``, making what is missing: the CA and the secrets
        on a first start, a keystore for a broker id not seen before.

        Raises:
            ValueError: the CA's files are unreadable or do not belong together.
            OSError: the directory cannot be written.
        """
        directory = Path(directory).resolve()
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        cert, key = directory / "ca.pem", directory / "ca-key.pem"
        if cert.exists() and key.exists():
            ca = LocalCa.load(cert, key)
        else:
            ca = LocalCa.create("tierlog dev cluster CA")
            ca.write_key(key)
            ca.write_ca(cert)
            # Keystores of a CA whose key is gone cannot be trusted by the new one.
            for stale in directory.glob("broker-*.pem"):
                stale.unlink()
        admin = _read_or_make_secret(directory / ADMIN_SECRET, ["password"])["password"]
        brokers = _read_or_make_secret(
            directory / BROKERS_SECRET, ["broker.password", "zookeeper.password"]
        )
        security = cls(
            directory, ca, admin, brokers["broker.password"], brokers["zookeeper.password"]
        )
        for broker_id in broker_ids:
            security.keystore(broker_id)
        return security

    # -- files -----------------------------------------------------------------------------

    @property
    def truststore(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def admin_secret_file(self) -> Path:
        return self.directory / ADMIN_SECRET

    @property
    def client_properties_path(self) -> Path:
        """``admin.properties``, beside the security directory (in the data dir)."""
        return self.directory.parent / CLIENT_PROPERTIES

    def keystore(self, broker_id: int) -> Path:
        """Broker ``broker_id``'s PEM keystore, issued by the CA when missing."""
        path = self.directory / f"broker-{broker_id}.pem"
        if not path.exists():
            issued = self.ca.issue(f"broker-{broker_id}", organizational_unit="brokers")
            issued.write_pem_keystore(path)
        return path

    # -- broker settings -------------------------------------------------------------------

    def credentials(self) -> list[tuple[str, str, Password]]:
        """The SCRAM users the brokers need: (user, mechanism, password)."""
        return [
            (ADMIN_USER, MECHANISM, self.admin_password),
            (BROKER_USER, MECHANISM, self.broker_password),
        ]

    def zookeeper_identity(self) -> tuple[str, Password]:
        """The brokers' ZooKeeper digest user and password (``zk_auth.ZkIdentity``)."""
        return ZOOKEEPER_USER, self.zookeeper_password

    def broker_settings(self, broker_id: int, port: int, zookeeper: bool = True) -> dict[str, str]:
        """Broker ``broker_id``'s security keys: its SASL_SSL listener on 127.0.0.1:``port``
        (0: any free port), inter-broker SASL_SSL, the authorizer, and with ``zookeeper``
        ZooKeeper's ACLs. Secrets are ``${file:...}`` references."""
        brokers_secret = self.directory / BROKERS_SECRET
        login = (
            f"{SCRAM_LOGIN_MODULE} required username={_quoted(BROKER_USER)} "
            f'password="{_reference(brokers_secret, "broker.password")}";'
        )
        settings = {
            **FILE_PROVIDER,
            "listeners": f"{LISTENER}://127.0.0.1:{port}",
            "security.inter.broker.protocol": LISTENER,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": MECHANISM,
            # The listener's SCRAM login entry: serving needs none of its options; the
            # broker's own login to the others takes username/password from it.
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": login,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore(broker_id)),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
        }
        if zookeeper:
            settings["zookeeper.set.acl"] = "true"
            settings["zookeeper.jaas.config"] = (
                f"{ZK_LOGIN_MODULE} required username={_quoted(ZOOKEEPER_USER)} "
                f'password="{_reference(brokers_secret, "zookeeper.password")}";'
            )
        return settings

    # -- client settings -------------------------------------------------------------------

    def client_properties(self, bootstrap: str) -> dict[str, str]:
        """The admin user's client settings in Kafka's (Java) client keys; the password is
        a ``${file:...}`` reference to ``admin-secret.properties``."""
        login = (
            f"{SCRAM_LOGIN_MODULE} required username={_quoted(ADMIN_USER)} "
            f'password="{_reference(self.admin_secret_file, "password")}";'
        )
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": LISTENER,
            "sasl.mechanism": MECHANISM,
            **FILE_PROVIDER,
            "sasl.jaas.config": login,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
        }

    def write_client_properties(self, bootstrap: str) -> Path:
        """Write ``admin.properties`` (it holds no secret, only a reference to one)."""
        path = self.client_properties_path
        lines = [
            "# The admin user of this tierlog development cluster (tierlog cluster start"
            " --secure).",
            "# Kafka's tools and tierlog's: --command-config this file; pipelines and notebooks:",
            "# TIERLOG_CLIENT_CONFIG=this file. The password stays in"
            f" {self.admin_secret_file.name} (0600).",
            *(f"{k}={v}" for k, v in self.client_properties(bootstrap).items()),
        ]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path

    def librdkafka_config(self, bootstrap: str) -> dict[str, str]:
        """confluent-kafka settings for the admin user (the password resolved, for a
        client in this process: a notebook's or a test's)."""
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": LISTENER,
            "sasl.mechanism": MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": self.admin_password.value,
            "ssl.ca.location": str(self.truststore),
        }


def _quoted(text: str) -> str:
    return f'"{text}"'
