"""The broker's ZooKeeper cache (coordination/zk_cache.py) against a real ZooKeeper: a watch
on one state re-reads that state only and keeps every other object, watches are re-armed,
topics created and deleted and configs changed are read by topic, a lost connection or
session means one full re-read, and a state never goes back to an older write."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.zk_clients import expire_session
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import MetadataChange
from tierlog.broker.coordination.zk_cache import ClusterCache, ClusterSnapshot
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_configs import EntityConfigs
from tierlog.broker.coordination.zk_controller import ControllerLease
from tierlog.broker.coordination.zk_data import BrokerInfo, LeaderAndIsr, ZnodeData
from tierlog.broker.coordination.zk_session import ZkSession

pytestmark = pytest.mark.timeout(30)

SESSION_TIMEOUT_MS = 6_000
WAIT_S = 10.0


class Recorder(ZkSession):
    """A session that remembers which znodes each pipelined read asked for."""

    def __init__(self, connect: str) -> None:
        super().__init__(connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        self.read: list[str] = []

    def read_many(
        self, data_paths: Any = (), children_paths: Any = (), watch: Any = None, **kw: Any
    ) -> Any:
        data_paths, children_paths = list(data_paths), list(children_paths)
        self.read += data_paths + children_paths
        return super().read_many(data_paths, children_paths, watch, **kw)


class Cache:
    """A cache on its own session, updated by the test (the coordinator's worker's part)."""

    def __init__(self, connect: str) -> None:
        self.zk = Recorder(connect)
        self.zk.start()
        self.dirty = threading.Event()
        self.cache = ClusterCache(self.zk, EntityConfigs(self.zk), self.dirty.set)

    def next(self) -> tuple[ClusterSnapshot, MetadataChange | None]:
        """Wait for a watch, then update; the first update after it that changes something."""
        for _ in range(20):
            assert self.dirty.wait(WAIT_S), "no watch fired"
            self.dirty.clear()
            self.zk.read.clear()
            update = self.cache.update()
            if update is not None:
                return update
        pytest.fail("the watches fired but nothing changed")

    def quiet(self) -> None:
        """Nothing pending: an update now reads nothing and changes nothing."""
        self.zk.read.clear()
        assert self.cache.update() is None
        assert self.zk.read == []


@pytest.fixture
def env(zk_connect: str) -> Iterator[tuple[ZkClient, ControllerLease, Cache]]:
    admin = ZkClient(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS)
    admin.start()
    lease = admin.controller.try_elect(1)
    assert lease is not None
    admin.brokers.register(BrokerInfo.plaintext(1, "127.0.0.1", 9001))
    for topic in ("orders", "events"):
        create(admin, lease, topic, 3)
    cache = Cache(zk_connect)
    try:
        yield admin, lease, cache
    finally:
        cache.zk.stop()
        admin.stop()


def create(admin: ZkClient, lease: ControllerLease, topic: str, partitions: int) -> None:
    admin.topics.create(topic, {p: [1, 2] for p in range(partitions)}, uuid.uuid4(), {})
    states = {p: LeaderAndIsr(1, 0, (1, 2), lease.epoch) for p in range(partitions)}
    admin.partition_states.create(lease, topic, states)


def move(admin: ZkClient, lease: ControllerLease, topic: str, partition: int) -> int:
    """Give the partition a new leader (epoch + 1); returns the new zkVersion."""
    found = admin.partition_states.get(topic, partition)
    assert found is not None
    state, version = found
    moved = LeaderAndIsr(2, state.leader_epoch + 1, (2,), lease.epoch)
    return admin.partition_states.update(lease, topic, partition, moved, version)


def test_a_state_change_reads_that_state_only_and_reuses_everything_else(env: Any) -> None:
    admin, lease, c = env
    first = c.cache.update()
    assert first is not None and first[1] is None  # start: everything, whatever changed
    before = first[0]
    assert sorted(before.topics) == ["events", "orders"]
    assert before.brokers.keys() == {1} and before.controller_id == 1
    c.quiet()

    version = move(admin, lease, "orders", 1)
    snapshot, change = c.next()
    assert change == MetadataChange(frozenset(), frozenset({("orders", 1)}))
    assert c.zk.read == [zk_data.partition_state_path("orders", 1)]
    orders = snapshot.topics["orders"]
    assert (orders.partition_states[1].leader, orders.partition_states[1].partition_epoch) == (
        2,
        version,
    )
    # Nothing else was rebuilt: the other topic and the other states are the same objects.
    assert snapshot.topics["events"] is before.topics["events"]
    for p in (0, 2):
        assert orders.partition_states[p] is before.topics["orders"].partition_states[p]
    assert before.topics["orders"].partition_states[1].leader == 1  # the old one unchanged

    # The read re-armed the one-shot watch: the next change is seen too.
    version = move(admin, lease, "orders", 1)
    snapshot, change = c.next()
    assert change is not None and change.partitions == {("orders", 1)}
    assert snapshot.topics["orders"].partition_states[1].partition_epoch == version
    c.quiet()


def test_topics_created_deleted_and_reconfigured_are_read_by_topic(env: Any) -> None:
    admin, lease, c = env
    c.cache.update()

    create(admin, lease, "fresh", 2)
    snapshot, change = c.next()
    while "fresh" not in snapshot.topics or len(snapshot.topics["fresh"].partition_states) < 2:
        snapshot, change = c.next()  # the topic, then its states (two writes)
    assert change is not None and "fresh" in change.topics
    assert zk_data.topic_path("orders") not in c.zk.read

    admin.configs.set_topic("events", {"retention.ms": "5"})
    snapshot, change = c.next()
    assert change == MetadataChange(frozenset({"events"}), frozenset())
    assert snapshot.topics["events"].configs == {"retention.ms": "5"}
    assert zk_data.topic_config_path("orders") not in c.zk.read

    admin.topics.add_partitions("events", {p: [1, 2] for p in range(4)})
    snapshot, change = c.next()
    assert change is not None and change.topics == {"events"}
    assert sorted(snapshot.topics["events"].replicas) == [0, 1, 2, 3]
    admin.partition_states.create(lease, "events", {3: LeaderAndIsr(1, 0, (1, 2), lease.epoch)})
    snapshot, change = c.next()
    assert change is not None and change.partitions == {("events", 3)}
    assert snapshot.topics["events"].partition_states[3].leader == 1

    admin.topics.delete(lease, "orders")
    snapshot, change = c.next()
    while "orders" in snapshot.topics:
        snapshot, change = c.next()
    assert change is not None and "orders" in change.topics
    assert sorted(snapshot.topics) == ["events", "fresh"]
    # No watch is left on the deleted znodes (kazoo's registry of this session's watches).
    watched = [*c.zk.kazoo._data_watchers, *c.zk.kazoo._child_watchers]
    assert not [p for p in watched if "/brokers/topics/orders" in p], watched


def test_client_metrics_resources_are_read_when_announced(env: Any) -> None:
    admin, _lease, c = env
    first = c.cache.update()
    assert first is not None and first[0].entity_configs == {"client-metrics": {}, "brokers": {}}
    admin.configs.set_entity("client-metrics", "all", {"metrics": "*", "interval.ms": "1000"})
    snapshot, _change = c.next()
    assert snapshot.entity_configs["client-metrics"] == {
        "all": {"metrics": "*", "interval.ms": "1000"}
    }
    assert zk_data.topic_config_path("orders") not in c.zk.read  # only what was named
    admin.configs.set_entity("client-metrics", "all", {})
    snapshot, _change = c.next()
    assert snapshot.entity_configs["client-metrics"] == {}
    c.quiet()


def test_a_lost_connection_or_session_means_one_full_read(env: Any, zk_connect: str) -> None:
    admin, lease, c = env
    c.cache.update()

    # The connection drops (same session): kazoo drops every watch, so everything is read
    # again, with watches, and a change made meanwhile is in it.
    c.zk.kazoo._connection._socket.shutdown(socket.SHUT_RDWR)
    move(admin, lease, "events", 0)
    snapshot, change = c.next()
    assert change is None
    assert zk_data.TOPICS in c.zk.read and zk_data.topic_path("orders") in c.zk.read
    assert snapshot.topics["events"].partition_states[0].leader == 2
    move(admin, lease, "orders", 2)  # watched again
    snapshot, change = c.next()
    assert change is not None and change.partitions == {("orders", 2)}

    # The session ends: the same on the new session.
    expire_session(zk_connect, c.zk)
    snapshot, change = c.next()
    assert change is None
    move(admin, lease, "orders", 0)
    snapshot, change = c.next()
    assert change is not None and change.partitions == {("orders", 0)}


def test_a_state_never_goes_back_to_an_older_write(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin, lease, c = env
    c.cache.update()
    path = zk_data.partition_state_path("orders", 0)
    old = c.zk.read_many([path])[0][path]
    assert old is not None
    newest = move(admin, lease, "orders", 0)
    snapshot, _ = c.next()
    assert snapshot.topics["orders"].partition_states[0].partition_epoch == newest

    # A read answered by a server behind the last one (a new session may land on one):
    # both an incremental and a full read keep the newer state.
    real = ZkSession.read_many

    def behind(
        self: ZkSession, data_paths: Any = (), children: Any = (), watch: Any = None, **kw: Any
    ) -> Any:
        data, kids = real(self, data_paths, children, watch, **kw)
        if path in data:
            data[path] = ZnodeData(old.data, old.version, old.mzxid, old.czxid)
        return data, kids

    monkeypatch.setattr(ZkSession, "read_many", behind)
    c.cache._on_watch(path)
    assert c.cache.update() is None
    c.cache.request_full()
    update = c.cache.update()
    assert update is not None
    state = update[0].topics["orders"].partition_states[0]
    assert (state.leader, state.partition_epoch) == (2, newest)
