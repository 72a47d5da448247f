"""The controller against a real ZooKeeper: election and fail-over, new topics' states,
leader and follower failures, offline partitions and unclean election, AlterPartition,
fencing of a deposed controller, topic deletion and growth, and a restart that rebuilds
the context. "Brokers" are ZkClient sessions that register and are stopped to die."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.controllers import Cluster, active, running, wait_for
from tests.integration.zk_clients import expire_session
from tierlog.broker.controller import Controller
from tierlog.broker.controller import alter_partition as ap
from tierlog.broker.controller.context import ControllerContext, TopicPartition
from tierlog.broker.controller.state_machine import PartitionStateMachine
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_controller import ControllerLease
from tierlog.broker.coordination.zk_data import NO_LEADER, LeaderAndIsr
from tierlog.broker.coordination.zk_errors import ControllerMovedError

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[Cluster]:
    with running(zk_connect) as c:
        yield c


# -- election -------------------------------------------------------------------------------------


def test_one_controller_is_active_and_another_takes_over_with_a_bumped_epoch(
    cluster: Cluster,
) -> None:
    controllers = [cluster.controller(1), cluster.controller(2)]
    first = active(controllers)
    epoch = first.controller_epoch
    assert epoch >= 1
    other = controllers[1] if first is controllers[0] else controllers[0]
    assert not other.is_active and other.controller_epoch == -1
    wait_for("the other to see the controller", lambda: other.active_controller_id > 0)
    assert cluster.admin.controller.holder() == other.active_controller_id

    first.stop()
    assert not first.is_active
    assert active([other]) is other
    assert other.controller_epoch == epoch + 1
    assert cluster.admin.controller.epoch() == (epoch + 1, epoch + 1)


def test_a_controller_whose_session_expires_resigns(cluster: Cluster, zk_connect: str) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    controllers = [cluster.controller(1), cluster.controller(2)]
    first = active(controllers)
    other = controllers[1] if first is controllers[0] else controllers[0]
    epoch = first.controller_epoch
    cluster.create_topic("orders", {0: [1, 2]})
    cluster.wait_state("orders", 0, 1, 0, (1, 2))

    expire_session(zk_connect, first._zk)  # its /controller goes with the session

    assert active(controllers) is other
    assert other.controller_epoch == epoch + 1
    wait_for("the old one to see the new", lambda: first.active_controller_id == other._broker_id)
    assert not first.is_active
    # The new controller has the cluster: a leader's death is handled.
    cluster.kill_broker(1)
    cluster.wait_state("orders", 0, 2, 1, (2,))


# -- new topics and broker failures ----------------------------------------------------------------


def test_a_new_topic_gets_states_led_by_the_first_live_replica(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    controller = cluster.controller(1)
    active([controller])
    cluster.create_topic("orders", {0: [3, 1, 2], 1: [2, 1, 3]})
    state0, version0 = cluster.wait_state("orders", 0, 1, 0, (1, 2))
    cluster.wait_state("orders", 1, 2, 0, (2, 1))
    assert version0 == 0
    assert state0.controller_epoch == controller.controller_epoch

    # A topic none of whose replicas is live waits for one to register.
    cluster.create_topic("later", {0: [4]})
    cluster.sync(controller, 1)
    assert cluster.state("later", 0) is None
    cluster.start_broker(4)
    cluster.wait_state("later", 0, 4, 0, (4,))


def test_a_dead_leaders_partitions_move_and_its_follower_places_shrink(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start_broker(b)
    active([cluster.controller(1)])
    cluster.create_topic("orders", {0: [1, 2, 3], 1: [3, 1, 2], 2: [2, 3, 1]})
    cluster.wait_state("orders", 0, 1, 0, (1, 2, 3))
    cluster.wait_state("orders", 1, 3, 0, (3, 1, 2))
    cluster.wait_state("orders", 2, 2, 0, (2, 3, 1))

    cluster.kill_broker(1)
    # It led partition 0: the first live ISR member in assignment order takes over.
    cluster.wait_state("orders", 0, 2, 1, (2, 3))
    # It followed partitions 1 and 2: out of their ISR, leader kept, epoch bumped.
    cluster.wait_state("orders", 1, 3, 1, (3, 2))
    cluster.wait_state("orders", 2, 2, 1, (2, 3))


def test_offline_partition_waits_for_its_last_isr_member(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    controller = cluster.controller(1)
    active([controller])
    cluster.create_topic("orders", {0: [1, 2]})
    cluster.wait_state("orders", 0, 1, 0, (1, 2))
    cluster.kill_broker(2)
    cluster.wait_state("orders", 0, 1, 1, (1,))
    cluster.kill_broker(1)
    # Nobody can lead; Kafka keeps the last ISR member in the ISR.
    cluster.wait_state("orders", 0, NO_LEADER, 2, (1,))

    cluster.start_broker(2)  # out of sync: must not lead with unclean election off
    cluster.sync(controller, 2)
    assert cluster.leader("orders", 0) == NO_LEADER

    cluster.start_broker(1)  # the last in-sync replica returns and leads
    cluster.wait_state("orders", 0, 1, 3, (1,))


def _offline_with_out_of_sync_replica_back(
    cluster: Cluster, controller: Controller, topic: str, configs: dict[str, str]
) -> None:
    cluster.create_topic(topic, {0: [1, 2]}, configs)
    cluster.wait_state(topic, 0, 1, 0, (1, 2))
    cluster.kill_broker(2)
    cluster.wait_state(topic, 0, 1, 1, (1,))
    cluster.kill_broker(1)
    cluster.wait_state(topic, 0, NO_LEADER, 2, (1,))
    cluster.start_broker(2)


def test_unclean_election_by_topic_override(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    controller = cluster.controller(1)
    active([controller])
    _offline_with_out_of_sync_replica_back(cluster, controller, "orders", {})
    cluster.sync(controller, 2)
    assert cluster.leader("orders", 0) == NO_LEADER

    # Turning the topic's override on elects the out-of-sync replica, ISR = itself.
    cluster.admin.configs.set_topic("orders", {"unclean.leader.election.enable": "true"})
    cluster.wait_state("orders", 0, 2, 3, (2,))


def test_unclean_election_by_broker_default_unless_the_topic_says_no(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    controller = cluster.controller(1, unclean_leader_election=True)
    active([controller])
    cluster.create_topic("strict", {0: [1, 2]}, {"unclean.leader.election.enable": "false"})
    cluster.wait_state("strict", 0, 1, 0, (1, 2))
    _offline_with_out_of_sync_replica_back(cluster, controller, "orders", {})
    cluster.wait_state("orders", 0, 2, 3, (2,))
    cluster.sync(controller, 2)
    strict = cluster.state("strict", 0)
    assert strict is not None and (strict[0].leader, strict[0].isr) == (NO_LEADER, (1,))


def test_turning_unclean_election_on_at_run_time_elects_offline_partitions(
    cluster: Cluster,
) -> None:
    """A dynamic ``unclean.leader.election.enable`` (KIP-226), as Kafka's
    UncleanLeaderElectionEnable event: offline partitions get leaders at once, except a
    topic whose override says no."""
    cluster.start_broker(1)
    cluster.start_broker(2)
    controller = cluster.controller(1)
    active([controller])
    cluster.create_topic("strict", {0: [1, 2]}, {"unclean.leader.election.enable": "false"})
    cluster.wait_state("strict", 0, 1, 0, (1, 2))
    _offline_with_out_of_sync_replica_back(cluster, controller, "orders", {})
    cluster.sync(controller, 2)
    assert cluster.leader("orders", 0) == NO_LEADER

    controller.set_unclean_leader_election(True)
    cluster.wait_state("orders", 0, 2, 3, (2,))
    cluster.sync(controller, 2)
    strict = cluster.state("strict", 0)
    assert strict is not None and (strict[0].leader, strict[0].isr) == (NO_LEADER, (1,))


# -- AlterPartition -----------------------------------------------------------------------------


def test_alter_partition(cluster: Cluster) -> None:
    epochs = {b: cluster.start_broker(b) for b in (1, 2, 3)}
    controller = cluster.controller(1)
    standby = cluster.controller(2)
    active([controller, standby])
    if standby.is_active:
        controller, standby = standby, controller
    cluster.create_topic("orders", {0: [1, 2, 3]})
    cluster.wait_state("orders", 0, 1, 0, (1, 2, 3))

    # Shrink: the ISR and the partition epoch (zkVersion) change, the leader epoch does not.
    result = controller.alter_partition("orders", 0, 1, 0, [1, 2], 0, broker_epoch=epochs[1])
    assert result.ok, result
    assert (result.leader, result.leader_epoch, result.isr, result.partition_epoch) == (
        1,
        0,
        (1, 2),
        1,
    )
    assert result.controller_epoch == controller.controller_epoch
    stored, version = cluster.state("orders", 0) or pytest.fail("no state")
    assert (stored.leader, stored.leader_epoch, stored.isr, version) == (1, 0, (1, 2), 1)
    # A retry whose answer was lost succeeds without a second write.
    retry = controller.alter_partition("orders", 0, 1, 0, [1, 2], 0)
    assert retry.ok and retry.partition_epoch == 1

    def code(*args: Any, **kwargs: Any) -> int:
        return controller.alter_partition(*args, **kwargs).error

    assert standby.alter_partition("orders", 0, 1, 0, [1], 1).error == ap.NOT_CONTROLLER
    assert code("nope", 0, 1, 0, [1], 1) == ap.UNKNOWN_TOPIC_OR_PARTITION
    assert code("orders", 7, 1, 0, [1], 1) == ap.UNKNOWN_TOPIC_OR_PARTITION
    assert code("orders", 0, 1, 0, [1], 0) == ap.INVALID_UPDATE_VERSION
    assert code("orders", 0, 1, 0, [1], 5) == ap.NOT_CONTROLLER
    assert code("orders", 0, 2, 0, [2], 1) == ap.INVALID_REQUEST
    assert code("orders", 0, 1, 0, [2, 3], 1) == ap.INVALID_REQUEST
    assert code("orders", 0, 1, 0, [1, 4], 1) == ap.INVALID_REQUEST
    assert code("orders", 0, 1, 0, [1], 1, broker_epoch=epochs[1] + 1) == ap.STALE_BROKER_EPOCH

    cluster.kill_broker(2)  # in the ISR: out of it with a new leader epoch
    _, version = cluster.wait_state("orders", 0, 1, 1, (1,))
    assert code("orders", 0, 1, 0, [1, 3], version) == ap.FENCED_LEADER_EPOCH
    assert code("orders", 0, 1, 1, [1, 2], version) == ap.INELIGIBLE_REPLICA
    grown = controller.alter_partition("orders", 0, 1, 1, [1, 3], version)
    assert grown.ok and (grown.leader_epoch, grown.isr) == (1, (1, 3))
    assert grown.partition_epoch == version + 1
    # Nothing refused was written.
    assert cluster.state("orders", 0) == (
        LeaderAndIsr(1, 1, (1, 3), stored.controller_epoch),
        version + 1,
    )


# -- fencing ------------------------------------------------------------------------------------


def test_a_deposed_controller_writes_nothing(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    controller = cluster.controller(1)
    active([controller])
    cluster.create_topic("orders", {0: [1, 2]})
    before = cluster.wait_state("orders", 0, 1, 0, (1, 2))
    epoch = controller.controller_epoch
    lease = ControllerLease(1, *(cluster.admin.controller.epoch() or pytest.fail("no epoch")))

    # Another "controller" takes over in one multi: /controller replaced and the epoch
    # bumped, so this controller never sees /controller vacant and cannot re-elect itself.
    usurper = cluster.client()
    epoch_now, epoch_version = usurper.controller.epoch() or pytest.fail("no epoch")
    txn = usurper.kazoo.transaction()
    txn.delete(zk_data.CONTROLLER)
    txn.create(
        zk_data.CONTROLLER,
        zk_data.encode_controller(zk_data.ControllerInfo(99, 0)),
        ephemeral=True,
    )
    txn.set_data(
        zk_data.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(epoch_now + 1), epoch_version
    )
    assert not any(isinstance(r, Exception) for r in txn.commit())
    cluster.kill_broker(1)  # the deposed controller would move this leadership

    wait_for("the controller to resign", lambda: not controller.is_active)
    assert controller.alter_partition("orders", 0, 1, 0, [1], 0).error == ap.NOT_CONTROLLER
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # a bounded look: nothing changes meanwhile
        assert cluster.state("orders", 0) == before
        time.sleep(0.05)
    assert controller.active_controller_id == 99

    # A write made with the stale lease, as a slow controller thread would, is refused.
    ctx = ControllerContext(lease)
    stale = PartitionStateMachine(cluster.admin.partition_states, ctx, False)
    ctx.set_live_brokers({2: 1})
    ctx.add_topic("orders", cluster.admin.topics.get("orders") or pytest.fail("no topic"))
    ctx.set_state(TopicPartition("orders", 0), *before)
    with pytest.raises(ControllerMovedError):
        stale.reconcile([TopicPartition("orders", 0)], "test")
    assert cluster.state("orders", 0) == before

    # The usurper leaves: the old controller is elected again, a new term, and acts.
    usurper.stop()
    wait_for("re-election", lambda: controller.is_active)
    assert controller.controller_epoch == epoch + 2
    cluster.wait_state("orders", 0, 2, 1, (2,))


# -- topics -------------------------------------------------------------------------------------


def test_topic_deletion_and_added_partitions(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    active([cluster.controller(1)])
    cluster.create_topic("orders", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    cluster.wait_state("orders", 1, 2, 0, (2, 1))

    cluster.admin.topics.add_partitions("orders", {0: [1, 2], 1: [2, 1], 2: [2, 1], 3: [1, 2]})
    cluster.wait_state("orders", 2, 2, 0, (2, 1))
    cluster.wait_state("orders", 3, 1, 0, (1, 2))

    cluster.create_topic("kept", {0: [1]})
    cluster.admin.topics.request_deletion("orders")
    wait_for("deletion", lambda: cluster.admin.topics.get("orders") is None)
    wait_for("the request to go", lambda: cluster.admin.topics.pending_deletions() == [])
    assert cluster.admin.partition_states.of_topic("orders") == {}
    assert cluster.admin.configs.topic("orders") == {}
    assert cluster.admin.topics.names() == ["kept"]

    # The name is free again, and the new topic gets fresh states.
    cluster.create_topic("orders", {0: [2]})
    cluster.wait_state("orders", 0, 2, 0, (2,))


# -- restart ------------------------------------------------------------------------------------


def test_a_restarted_controller_rebuilds_its_view_from_zookeeper(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start_broker(b)
    first = cluster.controller(1)
    active([first])
    epoch = first.controller_epoch
    cluster.create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    cluster.wait_state("orders", 0, 1, 0, (1, 2, 3))
    cluster.wait_state("orders", 1, 2, 0, (2, 3, 1))
    first.stop()
    assert cluster.admin.controller.holder() is None

    # While there is no controller: a leader dies, a topic is created, another grows.
    cluster.kill_broker(1)
    cluster.create_topic("events", {0: [3, 2]})
    cluster.admin.topics.add_partitions("orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})

    second = cluster.controller(2)
    active([second])
    assert second.controller_epoch == epoch + 1
    cluster.wait_state("orders", 0, 2, 1, (2, 3))
    cluster.wait_state("orders", 1, 2, 1, (2, 3))
    cluster.wait_state("orders", 2, 3, 0, (3, 2))
    cluster.wait_state("events", 0, 3, 0, (3, 2))

    # And it keeps deciding from there.
    cluster.kill_broker(2)
    cluster.wait_state("orders", 0, 3, 2, (3,))
    cluster.wait_state("events", 0, 3, 1, (3,))
    _, version = cluster.wait_state("orders", 0, 3, 2, (3,))
    cluster.start_broker(1)

    # The leader asks to add the returning replica; until the controller has seen it
    # register, the answer is INELIGIBLE_REPLICA and the leader asks again.
    def expand() -> ap.AlterPartitionResult | None:
        result = second.alter_partition("orders", 0, 3, 2, [3, 1], version)
        assert result.ok or result.error == ap.INELIGIBLE_REPLICA, result
        return result if result.ok else None

    result = wait_for("the ISR expansion", expand)
    assert result.isr == (3, 1) and result.leader_epoch == 2


def test_preferred_leader_election(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    controller = cluster.controller(1)
    active([controller])
    cluster.create_topic("orders", {0: [1, 2]})
    cluster.wait_state("orders", 0, 1, 0, (1, 2))
    cluster.kill_broker(1)
    _, version = cluster.wait_state("orders", 0, 2, 1, (2,))
    cluster.start_broker(1)
    tp = ("orders", 0)
    # Back but not in the ISR: it cannot lead yet.
    assert controller.elect_preferred_leaders([tp]) == {tp: 80}  # PREFERRED_LEADER_NOT_AVAILABLE

    def expand() -> ap.AlterPartitionResult | None:
        result = controller.alter_partition("orders", 0, 2, 1, [2, 1], version)
        return result if result.ok else None

    wait_for("the ISR expansion", expand)
    assert controller.elect_preferred_leaders([tp, ("nope", 0)]) == {tp: 0, ("nope", 0): 3}
    cluster.wait_state("orders", 0, 1, 2, (2, 1))
    assert controller.elect_preferred_leaders([tp]) == {tp: 84}  # ELECTION_NOT_NEEDED
    assert controller.elect_preferred_leaders() == {}
