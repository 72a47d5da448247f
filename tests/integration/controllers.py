"""Controllers against a real ZooKeeper, for the controller tests: ``Cluster`` holds one
test's sessions (an admin, "brokers" that are ZkClient sessions registered and stopped to
die, controllers), ``running`` closes them all after the test."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from tierlog.broker.controller import Controller
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_data import BrokerInfo, LeaderAndIsr

SESSION_TIMEOUT_MS = 6_000
WAIT_S = 8.0
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = WAIT_S) -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})")


class Cluster:
    """ZooKeeper sessions for one test: an admin, brokers that can die, controllers."""

    def __init__(self, connect: str) -> None:
        self.connect = connect
        self._clients: list[ZkClient] = []
        self._controllers: list[Controller] = []
        self.brokers: dict[int, ZkClient] = {}
        self.admin = self.client()

    def client(self) -> ZkClient:
        client = ZkClient(self.connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        client.start()
        self._clients.append(client)
        return client

    def start_broker(self, broker_id: int) -> int:
        """Register ``broker_id`` on a session of its own; returns its broker epoch."""
        client = self.client()
        self.brokers[broker_id] = client
        return client.brokers.register(
            BrokerInfo.plaintext(broker_id, "127.0.0.1", 9000 + broker_id)
        )

    def kill_broker(self, broker_id: int) -> None:
        """End the broker's session: its registration vanishes at once."""
        self.brokers.pop(broker_id).stop()

    def controller(self, broker_id: int, **kwargs: Any) -> Controller:
        controller = Controller(self.client(), broker_id, **kwargs)
        self._controllers.append(controller)
        controller.start()
        return controller

    def state(self, topic: str, partition: int) -> tuple[LeaderAndIsr, int] | None:
        return self.admin.partition_states.get(topic, partition)

    def leader(self, topic: str, partition: int) -> int | None:
        found = self.state(topic, partition)
        return None if found is None else found[0].leader

    def wait_state(
        self, topic: str, partition: int, leader: int, leader_epoch: int, isr: tuple[int, ...]
    ) -> tuple[LeaderAndIsr, int]:
        def probe() -> tuple[LeaderAndIsr, int] | None:
            found = self.state(topic, partition)
            if found is None:
                return None
            s = found[0]
            return (
                found if (s.leader, s.leader_epoch, s.isr) == (leader, leader_epoch, isr) else None
            )

        return wait_for(f"{topic}-{partition} at {leader}/{leader_epoch}/{isr}", probe)

    def create_topic(
        self, topic: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None
    ) -> None:
        self.admin.topics.create(topic, assignment, uuid.uuid4(), configs or {})

    def sync(self, controller: Controller, replica: int) -> None:
        """Wait until ``controller`` has processed every ZooKeeper change made before this
        call: ZooKeeper notifies a session in zxid order and the controller handles events
        in order, so once a topic created now has its state, earlier events are done."""
        probe = f"probe-{uuid.uuid4().hex[:8]}"
        self.create_topic(probe, {0: [replica]})
        wait_for(f"{probe} state", lambda: self.state(probe, 0))
        assert controller.is_active

    def close(self) -> None:
        for controller in self._controllers:
            controller.stop()
        for client in self._clients:
            client.stop()


def active(controllers: list[Controller]) -> Controller:
    winner = wait_for("an active controller", lambda: [c for c in controllers if c.is_active])
    assert len(winner) == 1, "two active controllers"
    return winner[0]


@contextmanager
def running(zk_connect: str) -> Iterator[Cluster]:
    """A ``Cluster`` on ``zk_connect``, closed on the way out."""
    cluster = Cluster(zk_connect)
    try:
        yield cluster
    finally:
        cluster.close()
