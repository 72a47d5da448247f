"""``tierlog users``: SCRAM credentials written where brokers read them, before any broker
runs (Kafka's ``kafka-configs --zookeeper ... --entity-type users --alter --add-config
'SCRAM-SHA-256=[password=...]'`` bootstrap case, which Kafka 3 kept for exactly this).

Against ZooKeeper (``--zookeeper host:port[/chroot]``) the credential goes into
``/config/users/<url-encoded user>`` with a change notification, as Kafka writes it;
against a single node's data dir (``--data-dir``) into its metadata store. Only Kafka's
stored form is written (salt, StoredKey, ServerKey, iterations: RFC 5802); the password is
read from a file or stdin, never from the command line (it would be in the shell history
and the process list), never printed or logged. Once brokers run, AlterUserScramCredentials
(``kafka-configs --bootstrap-server``) does the same over the wire.

A single node's data dir has one writer at a time: stop its broker first.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tierlog.security.password import Password
from tierlog.security.scram_credentials import (
    ScramCredentialError,
    ScramMechanism,
    make_credential,
    parse_credential,
)
from tierlog.util.cli_errors import CliError

if TYPE_CHECKING:
    from tierlog.broker.coordination.zk_session import ZkSession

__all__ = ["add_user", "delete_user", "list_users", "read_password"]

Change = Callable[[dict[str, str]], dict[str, str]]


def read_password(source: str, stdin: TextIO | None = None) -> Password:
    """The first line of the file ``source`` (``-``: stdin), without its line end.

    Raises:
        CliError: no such file, or an empty password.
    """
    try:
        if source == "-":
            text = (stdin or sys.stdin).readline()
        else:
            with open(source, encoding="utf-8") as file:
                text = file.readline()
    except OSError as exc:
        raise CliError(f"cannot read the password file: {exc.strerror}: {source}") from None
    password = text.rstrip("\r\n")
    if not password:
        raise CliError(f"the password file is empty: {source}")
    return Password(password)


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.by_name(name.upper())
    if mechanism is None:
        known = ", ".join(m.mechanism_name for m in ScramMechanism)
        raise CliError(f"unknown SCRAM mechanism {name!r}; known: {known}")
    return mechanism


# zookeeper.set.acl keeps /config/users to the brokers' identity.
_NOT_AUTHORIZED = (
    "ZooKeeper refused: not authorized for /config/users (the brokers run with "
    "zookeeper.set.acl=true); pass --zk-config-file with their zookeeper.jaas.config"
)


def _zk_session(zookeeper: str, zk_config: Path | None) -> ZkSession:
    """A session to ``zookeeper``, authenticated as ``zk_config`` says (its
    ``zookeeper.jaas.config``, ``zookeeper.set.acl`` and ``zookeeper.ssl.*``: a broker's
    server.properties)."""
    from tierlog.broker.coordination.zk_auth import session_security
    from tierlog.broker.coordination.zk_session import ZkSession
    from tierlog.broker.coordination.zk_tls import zk_tls
    from tierlog.util.properties import load_properties

    identity, secure, tls = None, False, None
    if zk_config is not None:
        try:
            props = load_properties(zk_config)
        except OSError as exc:
            raise CliError(f"cannot read {zk_config}: {exc.strerror}") from None
        identity, secure = session_security(props)
        tls = zk_tls(props)
    return ZkSession(zookeeper, identity=identity, secure_acls=secure, tls=tls)


def _alter(
    user: str,
    change: Change,
    zookeeper: str | None,
    data_dir: Path | None,
    zk_config: Path | None = None,
) -> None:
    if not user:
        raise CliError("the user name must not be empty")
    if (zookeeper is None) == (data_dir is None):
        raise CliError("name where the credentials go: --zookeeper or --data-dir")
    if zookeeper is not None:
        from kazoo.exceptions import NoAuthError

        from tierlog.broker.coordination.zk_configs import EntityConfigs

        try:
            with _zk_session(zookeeper, zk_config) as session:
                EntityConfigs(session).alter_user(user, change)
        except NoAuthError:
            raise CliError(_NOT_AUTHORIZED) from None
        return
    assert data_dir is not None
    if not data_dir.is_dir():
        raise CliError(f"not a directory: {data_dir}")
    asyncio.run(_alter_local(user, change, data_dir))


async def _alter_local(user: str, change: Change, data_dir: Path) -> None:
    from tierlog.broker.coordination.local import LocalCoordinator
    from tierlog.broker.coordination.local_security import LocalUserConfigs

    coordinator = LocalCoordinator(data_dir)
    try:
        await LocalUserConfigs(coordinator).alter(user, change)
    finally:
        await coordinator.stop()


def add_user(
    user: str,
    mechanism_name: str,
    password: Password,
    out: TextIO,
    *,
    iterations: int = 4096,
    zookeeper: str | None = None,
    data_dir: Path | None = None,
    zk_config: Path | None = None,
) -> int:
    """Create or replace ``user``'s credential for one mechanism."""
    mechanism = _mechanism(mechanism_name)
    try:
        credential = make_credential(mechanism, password, iterations)
    except ScramCredentialError as exc:
        raise CliError(str(exc)) from None
    text = credential.to_kafka()
    _alter(
        user,
        lambda config: {**config, mechanism.mechanism_name: text},
        zookeeper,
        data_dir,
        zk_config,
    )
    out.write(f"Set {mechanism.mechanism_name} credential of user {user!r}\n")
    return 0


def delete_user(
    user: str,
    mechanism_name: str,
    out: TextIO,
    *,
    zookeeper: str | None = None,
    data_dir: Path | None = None,
    zk_config: Path | None = None,
) -> int:
    """Remove ``user``'s credential for one mechanism (the user's other keys stay)."""
    mechanism = _mechanism(mechanism_name)
    found: list[bool] = []

    def change(config: dict[str, str]) -> dict[str, str]:
        found.append(mechanism.mechanism_name in config)
        return {k: v for k, v in config.items() if k != mechanism.mechanism_name}

    _alter(user, change, zookeeper, data_dir, zk_config)
    if not found or not found[-1]:
        raise CliError(f"user {user!r} has no {mechanism.mechanism_name} credential")
    out.write(f"Deleted {mechanism.mechanism_name} credential of user {user!r}\n")
    return 0


def list_users(
    out: TextIO,
    *,
    zookeeper: str | None = None,
    data_dir: Path | None = None,
    zk_config: Path | None = None,
) -> int:
    """Users with SCRAM credentials, their mechanisms and iterations (never the keys)."""
    if (zookeeper is None) == (data_dir is None):
        raise CliError("name where the credentials are: --zookeeper or --data-dir")
    configs: dict[str, dict[str, str]]
    if zookeeper is not None:
        from kazoo.exceptions import NoAuthError

        from tierlog.broker.coordination.zk_configs import EntityConfigs

        try:
            with _zk_session(zookeeper, zk_config) as session:
                configs = EntityConfigs(session).users()
        except NoAuthError:
            raise CliError(_NOT_AUTHORIZED) from None
    else:
        assert data_dir is not None
        configs = asyncio.run(_list_local(data_dir))
    for user, config in sorted(configs.items()):
        for mechanism in ScramMechanism:
            text = config.get(mechanism.mechanism_name)
            if text is None:
                continue
            try:
                iterations = parse_credential(text).iterations
            except ScramCredentialError:
                continue
            out.write(f"{user}\t{mechanism.mechanism_name}\titerations={iterations}\n")
    return 0


async def _list_local(data_dir: Path) -> dict[str, dict[str, str]]:
    from tierlog.broker.coordination.local import LocalCoordinator
    from tierlog.broker.coordination.local_security import LocalUserConfigs

    coordinator = LocalCoordinator(data_dir)
    try:
        return await LocalUserConfigs(coordinator).describe()
    finally:
        await coordinator.stop()
