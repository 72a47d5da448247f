"""The first SCRAM users of a development cluster (``broker.coordination.seed_users``)
against a real ZooKeeper with ``zookeeper.set.acl``, and a single node's metadata store:
written only when missing, so a password changed since is never reset."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kazoo.exceptions import NoAuthError

from tests.integration.zk_clients import raw_client
from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.broker.coordination.local_security import LocalUserConfigs
from tierlog.broker.coordination.seed_users import seed_users_local, seed_users_zookeeper
from tierlog.broker.coordination.zk_auth import ZkIdentity
from tierlog.broker.coordination.zk_configs import EntityConfigs
from tierlog.broker.coordination.zk_session import ZkSession
from tierlog.security.password import Password

IDENTITY = ZkIdentity("tierlog-brokers", Password("zk-secret"))
FIRST = [("admin", "SCRAM-SHA-512", Password("a1")), ("broker", "SCRAM-SHA-512", Password("b1"))]
SECOND = [("admin", "SCRAM-SHA-512", Password("a2")), ("broker", "SCRAM-SHA-512", Password("b2"))]


def test_zookeeper_users_are_written_once_and_closed_to_others(zk_connect: str) -> None:
    assert seed_users_zookeeper(zk_connect, IDENTITY, True, FIRST) == ["admin", "broker"]
    with ZkSession(zk_connect, identity=IDENTITY, secure_acls=True) as session:
        stored = EntityConfigs(session).users()
    assert set(stored) == {"admin", "broker"}
    assert seed_users_zookeeper(zk_connect, IDENTITY, True, SECOND) == []
    with ZkSession(zk_connect, identity=IDENTITY, secure_acls=True) as session:
        assert EntityConfigs(session).users() == stored  # not reset to the second password
    anonymous = raw_client(zk_connect)
    try:
        with pytest.raises(NoAuthError):
            anonymous.get("/config/users/admin")
    finally:
        anonymous.stop()
        anonymous.close()


def test_single_node_users_are_written_once(tmp_path: Path) -> None:
    assert asyncio.run(seed_users_local(tmp_path, FIRST)) == ["admin", "broker"]

    async def stored() -> dict[str, dict[str, str]]:
        coordinator = LocalCoordinator(tmp_path)
        try:
            return await LocalUserConfigs(coordinator).describe()
        finally:
            await coordinator.stop()

    first = asyncio.run(stored())
    assert set(first) == {"admin", "broker"}
    assert asyncio.run(seed_users_local(tmp_path, SECOND)) == []
    assert asyncio.run(stored()) == first
