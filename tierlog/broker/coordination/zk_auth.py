"""ZooKeeper's own access control (Kafka's ``zookeeper.set.acl``): who a broker is to
ZooKeeper, and the ACL each znode it creates gets.

Kafka authenticates its brokers to ZooKeeper through the JAAS ``Client`` section (SASL
DIGEST-MD5 or Kerberos) and, with ``zookeeper.set.acl=true``, creates every znode with
Kafka's ``ZkData.defaultAcls``: all rights to the creating identity, read to the world,
and no world read under the sensitive roots (``/config/users`` with SCRAM credentials,
``/config/brokers`` with dynamic broker configs, ``/delegation_token``).

tierlog takes the same ``Client`` login entry, as the value of its own key
``zookeeper.jaas.config`` (``org.apache.zookeeper.server.auth.DigestLoginModule required
username="..." password="...";``), and authenticates with ZooKeeper's ``digest`` scheme,
which every ZooKeeper server accepts without server-side set-up. The ACLs are Kafka's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE

from tierlog.security.errors import SecurityConfigError
from tierlog.security.jaas import parse_jaas_config
from tierlog.security.password import Password

JAAS_KEY: Final = "zookeeper.jaas.config"
SET_ACL_KEY: Final = "zookeeper.set.acl"
# The login module of Kafka's JAAS ``Client`` section for DIGEST-MD5.
DIGEST_LOGIN_MODULE: Final = "org.apache.zookeeper.server.auth.DigestLoginModule"

# Kafka's ZkData.SensitiveRootPaths: readable by the brokers' identity only.
SENSITIVE_ROOTS: Final = ("/config/users", "/config/brokers", "/delegation_token")


@dataclass(frozen=True)
class ZkIdentity:
    """A broker's (or tool's) ZooKeeper identity: a ``digest`` user and password."""

    username: str
    password: Password

    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's ``auth_data``: sent on every (re)connect of the session."""
        return [("digest", f"{self.username}:{self.password.value}")]


def parse_identity(text: str) -> ZkIdentity:
    """The identity of a ``zookeeper.jaas.config`` value.

    Raises:
        SecurityConfigError: naming ``zookeeper.jaas.config``: a syntax error, another
            login module, or a missing user name or password.
    """
    entry = parse_jaas_config(text, JAAS_KEY)
    if entry.login_module != DIGEST_LOGIN_MODULE:
        raise SecurityConfigError(
            JAAS_KEY,
            f"login module {entry.login_module} is not supported; use {DIGEST_LOGIN_MODULE}",
        )
    username = entry.option("username") or ""
    password = entry.option("password") or ""
    if not username or not password:
        raise SecurityConfigError(JAAS_KEY, "the login entry needs a username and a password")
    if ":" in username:
        raise SecurityConfigError(JAAS_KEY, "a digest user name cannot contain ':'")
    return ZkIdentity(username, Password(password))


def session_security(props: Mapping[str, str]) -> tuple[ZkIdentity | None, bool]:
    """The identity and ``zookeeper.set.acl`` of a properties file's keys (a broker's
    server.properties serves): what a tool writing to ZooKeeper authenticates with.

    Raises:
        SecurityConfigError: naming the key at fault.
    """
    text = props.get(SET_ACL_KEY, "false").strip().lower()
    if text not in ("true", "false"):
        raise SecurityConfigError(SET_ACL_KEY, f"expected true or false, got {text!r}")
    jaas = props.get(JAAS_KEY, "").strip()
    if text == "true" and not jaas:
        raise SecurityConfigError(SET_ACL_KEY, f"true needs the brokers' identity: {JAAS_KEY}")
    return (parse_identity(jaas) if jaas else None), text == "true"


def is_sensitive(path: str) -> bool:
    """Whether ``path`` (relative to the chroot) is under a sensitive root."""
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)


class ZnodeAcls:
    """The ACL of each new znode: None (kazoo's default, open to all) unless ``secure``."""

    def __init__(self, secure: bool) -> None:
        self.secure = secure

    def default(self) -> list[ACL] | None:
        """For znodes outside the sensitive roots: the creator's, and read for all."""
        return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE] if self.secure else None

    def for_path(self, path: str) -> list[Any] | None:
        if not self.secure:
            return None
        return list(CREATOR_ALL_ACL) if is_sensitive(path) else self.default()
