"""The controller's batched writes against a real ZooKeeper: a dead broker's partitions are
elected in a few fenced multis (new leaders before ISR shrinks) within well under a second
of ZooKeeper time, and a partition whose state moved under the controller is re-read and
re-decided without costing the others of its batch their write."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tests.integration.controllers import Cluster, active, running, wait_for
from tierlog.broker.controller.context import ControllerContext, TopicPartition
from tierlog.broker.controller.state_machine import PartitionStateMachine
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import UnknownTopicError
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_data import LeaderAndIsr
from tierlog.broker.coordination.zk_errors import StalePartitionStateError

pytestmark = pytest.mark.timeout(60)

PARTITIONS = 1500  # broker 1 leads 500 and follows 1,000 (RF 3)


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[Cluster]:
    with running(zk_connect) as c:
        yield c


def stats(zk: ZkClient, topic: str, count: int) -> dict[int, tuple[LeaderAndIsr, int, int]]:
    """partition -> (state, mzxid, mtime in ms) of every state, in one pipelined read."""
    paths = {zk_data.partition_state_path(topic, p): p for p in range(count)}
    data, _ = zk.session.read_many(paths)
    found = {}
    for path, p in paths.items():
        node = data[path]
        if node is not None:
            state = zk_data.decode_partition_state(topic, p, node.data)
            stat = zk.kazoo.exists(path)  # mtime is not in ZnodeData: look it up
            found[p] = (state, node.mzxid, int(stat.mtime))
    return found


def test_a_dead_brokers_partitions_go_in_a_few_multis_new_leaders_first(
    cluster: Cluster,
) -> None:
    for b in (1, 2, 3):
        cluster.start_broker(b)
    active([cluster.controller(3)])
    rotations = ([1, 2, 3], [2, 3, 1], [3, 1, 2])
    cluster.create_topic("big", {p: rotations[p % 3] for p in range(PARTITIONS)})
    admin = cluster.admin
    wait_for(
        "every state",
        lambda: len(admin.partition_states.of_topic("big")) == PARTITIONS or None,
        timeout=30,
    )

    killed = time.monotonic()
    cluster.kill_broker(1)

    def done() -> bool:
        states = admin.partition_states.of_topic("big").values()
        return all(s.leader != 1 and 1 not in s.isr for s, _ in states)

    wait_for("broker 1 out of every state", lambda: done() or None, timeout=30)
    took = time.monotonic() - killed
    after = {p: v for p, v in stats(admin, "big", PARTITIONS).items()}
    elected = [after[p] for p in range(0, PARTITIONS, 3)]  # broker 1 led these
    shrunk = [after[p] for p in range(PARTITIONS) if p % 3]
    assert all(s.leader == 2 and s.isr == (2, 3) and s.leader_epoch == 1 for s, _, _ in elected)
    assert all(s.leader in (2, 3) and 1 not in s.isr for s, _, _ in shrunk)
    # One multi per 500 writes (ZkClient.STATE_WRITES_PER_MULTI): each multi is one
    # ZooKeeper transaction, so its writes share one zxid. One write per partition took
    # 1,500 transactions before, one round trip each.
    assert len({z for _, z, _ in elected}) == 1
    assert len({z for _, z, _ in shrunk}) == 2
    assert max(z for _, z, _ in elected) < min(z for _, z, _ in shrunk)
    # In ZooKeeper's own time, from the first write to the last.
    times = [t for _, _, t in elected + shrunk]
    assert max(times) - min(times) < 1000
    assert took < 15, f"{took:.1f} s from the session's end to the last state"


def test_update_partition_states_reports_a_stale_or_missing_one_and_writes_the_rest(
    cluster: Cluster,
) -> None:
    admin = cluster.admin
    lease = admin.controller.try_elect(1)
    assert lease is not None
    admin.topics.create("t", {p: [1, 2] for p in range(10)}, uuid.uuid4(), {})
    admin.partition_states.create(lease, "t", {p: LeaderAndIsr(1, 0, (1, 2), 1) for p in range(10)})
    moved = {("t", p): (LeaderAndIsr(2, 1, (2,), lease.epoch), 0) for p in range(10)}
    moved[("t", 5)] = (moved[("t", 5)][0], 7)  # not its zkVersion
    moved[("t", 11)] = (moved[("t", 0)][0], 0)  # no such state

    results = admin.partition_states.update_many(lease, moved, per_multi=4)
    assert isinstance(results[("t", 5)], StalePartitionStateError)
    assert isinstance(results[("t", 11)], UnknownTopicError)
    assert {p: results[("t", p)] for p in range(10) if p != 5} == {
        p: 1 for p in range(10) if p != 5
    }
    states = admin.partition_states.of_topic("t")
    assert [p for p, (s, _) in sorted(states.items()) if s.leader == 2] == [
        p for p in range(10) if p != 5
    ]
    assert states[5] == (LeaderAndIsr(1, 0, (1, 2), 1), 0)


def test_a_state_that_moved_under_the_controller_is_decided_again(cluster: Cluster) -> None:
    admin = cluster.admin
    lease = admin.controller.try_elect(1)
    assert lease is not None
    assignment = {p: [1, 2, 3] for p in range(20)}
    admin.topics.create("t", assignment, uuid.uuid4(), {})
    initial = LeaderAndIsr(1, 0, (1, 2, 3), lease.epoch)
    admin.partition_states.create(lease, "t", dict.fromkeys(range(20), initial))
    ctx = ControllerContext(lease)
    psm = PartitionStateMachine(admin.partition_states, ctx, False)
    ctx.set_live_brokers({1: 1, 2: 2, 3: 3})
    ctx.add_topic("t", admin.topics.get("t") or pytest.fail("no topic"))
    psm.refresh_many(ctx.partitions())
    # Behind the context's back, partition 7's leader moved to 3 (and 2 left its ISR).
    admin.partition_states.update(lease, "t", 7, LeaderAndIsr(3, 1, (3, 1), lease.epoch), 0)

    ctx.set_live_brokers({2: 2, 3: 3})  # broker 1 died
    psm.reconcile(list(ctx.partitions()), "test")

    states = admin.partition_states.of_topic("t")
    for p, (state, _) in states.items():
        if p == 7:  # decided again on what is stored: leader 3 kept, 1 out, epoch 2
            assert (state.leader, state.leader_epoch, state.isr, _) == (3, 2, (3,), 2)
        else:
            assert (state.leader, state.leader_epoch, state.isr) == (2, 1, (2, 3))
    assert {tp: ctx.states[tp] for tp in ctx.partitions()} == {
        TopicPartition("t", p): s for p, s in states.items()
    }
