"""The first SCRAM users of a cluster, written where its brokers read them before any broker
runs (a development cluster's ``admin`` and ``broker``, ``security.dev_security``).

Only a missing credential is written: on a restart the users found are kept as they are,
so a password changed since (``kafka-configs --alter --entity-type users``) is not reset,
and no change notification is sent for nothing. In ZooKeeper the session authenticates as
the brokers do (``zk_auth``), so ``/config/users`` gets their ACL under
``zookeeper.set.acl``; a single node's go into its metadata store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tierlog.broker.coordination.zk_auth import ZkIdentity
from tierlog.security.password import Password
from tierlog.security.scram_credentials import ScramMechanism, make_credential

__all__ = ["seed_users_local", "seed_users_zookeeper"]

Credentials = Sequence[tuple[str, str, Password]]
Change = Callable[[dict[str, str]], dict[str, str]]


def _missing_only(user: str, mechanism_name: str, password: Password, added: list[str]) -> Change:
    """A config change adding ``user``'s credential unless the config has one."""
    mechanism = ScramMechanism.by_name(mechanism_name)
    if mechanism is None:
        raise ValueError(f"unknown SCRAM mechanism {mechanism_name!r}")

    def change(config: dict[str, str]) -> dict[str, str]:
        if mechanism_name in config:
            return config
        added.append(user)
        return {**config, mechanism_name: make_credential(mechanism, password).to_kafka()}

    return change


def seed_users_zookeeper(
    zookeeper: str, identity: ZkIdentity | None, secure_acls: bool, credentials: Credentials
) -> list[str]:
    """Write the missing ``credentials`` (user, mechanism, password) into ZooKeeper's
    ``/config/users``. Returns the users written."""
    from tierlog.broker.coordination.zk_configs import EntityConfigs
    from tierlog.broker.coordination.zk_session import ZkSession

    added: list[str] = []
    with ZkSession(zookeeper, identity=identity, secure_acls=secure_acls) as session:
        configs = EntityConfigs(session)
        existing = configs.users([user for user, _, _ in credentials])
        for user, mechanism, password in credentials:
            if mechanism not in existing.get(user, {}):
                configs.alter_user(user, _missing_only(user, mechanism, password, added))
    return added


async def seed_users_local(data_dir: Path, credentials: Credentials) -> list[str]:
    """Write the missing ``credentials`` into a single node's metadata store (its broker
    stopped). Returns the users written."""
    from tierlog.broker.coordination.local import LocalCoordinator
    from tierlog.broker.coordination.local_security import LocalUserConfigs

    added: list[str] = []
    coordinator = LocalCoordinator(data_dir)
    try:
        users = LocalUserConfigs(coordinator)
        for user, mechanism, password in credentials:
            await users.alter(user, _missing_only(user, mechanism, password, added))
    finally:
        await coordinator.stop()
    return added
