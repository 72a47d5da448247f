"""zk_controller against a real ZooKeeper: one election winner, epochs, resignation, and the
fence (KAFKA-6082): a deposed controller's writes of every kind raise and change nothing.
Each test runs in its own chroot."""

from __future__ import annotations

import threading

import pytest

from tests.integration.zk_clients import ClientFactory, expire_session, started_topic
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_controller import ControllerLease
from tierlog.broker.coordination.zk_data import LeaderAndIsr
from tierlog.broker.coordination.zk_errors import ControllerMovedError

pytestmark = pytest.mark.timeout(20)


def test_only_one_of_two_clients_becomes_controller(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    barrier = threading.Barrier(2)
    leases: dict[int, ControllerLease | None] = {}

    def elect(client: ZkClient, broker_id: int) -> None:
        barrier.wait(5)
        leases[broker_id] = client.controller.try_elect(broker_id)

    threads = [threading.Thread(target=elect, args=(c, i)) for i, c in ((1, a), (2, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    winners = [lease for lease in leases.values() if lease is not None]
    assert len(leases) == 2 and len(winners) == 1
    (lease,) = winners
    assert lease.epoch == 1  # /controller_epoch created at 0, bumped by the first controller
    assert a.controller.holder() == lease.broker_id
    assert a.controller.epoch() == (1, lease.epoch_zk_version)

    # The other client fails while a controller lives, and wins after it resigns.
    loser = b if lease.broker_id == 1 else a
    assert loser.controller.try_elect(3) is None
    (a if lease.broker_id == 1 else b).controller.resign(lease)
    second = loser.controller.try_elect(3)
    assert second is not None
    assert second.epoch == 2 and second.epoch_zk_version > lease.epoch_zk_version


def test_a_deposed_controllers_writes_raise_and_change_nothing(
    zk_connect: str, new_client: ClientFactory
) -> None:
    a, b = new_client(), new_client()
    old = a.controller.try_elect(1)
    assert old is not None
    started_topic(a, old)
    state, version = a.partition_states.get("orders", 0) or pytest.fail("no state")

    expire_session(zk_connect, a)  # /controller goes with a's session
    new = b.controller.try_elect(2)
    assert new is not None and new.epoch == old.epoch + 1

    moved = LeaderAndIsr(2, state.leader_epoch + 1, (2,), old.epoch)
    with pytest.raises(ControllerMovedError):
        a.partition_states.update(old, "orders", 0, moved, version)
    with pytest.raises(ControllerMovedError):
        a.topics.delete(old, "orders")
    with pytest.raises(ControllerMovedError):
        a.partition_states.create(old, "orders", {2: moved})
    with pytest.raises(ControllerMovedError):
        a.controller.resign(old)
    assert b.partition_states.get("orders", 0) == (state, version)
    assert sorted(b.partition_states.of_topic("orders")) == [0, 1]
    assert b.topics.names() == ["orders"]
    assert b.controller.holder() == 2

    # The new controller's writes go through.
    update = LeaderAndIsr(2, state.leader_epoch + 1, (2,), new.epoch)
    assert b.partition_states.update(new, "orders", 0, update, version) == version + 1
