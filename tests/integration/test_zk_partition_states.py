"""zk_partition_states against a real ZooKeeper: writes conditional on the state znode's
zkVersion. (Many at once, in pipelined multis: test_controller_batch.py.)"""

from __future__ import annotations

import pytest

from tests.integration.zk_clients import ClientFactory, started_topic
from tierlog.broker.coordination.api import UnknownTopicError
from tierlog.broker.coordination.zk_data import LeaderAndIsr
from tierlog.broker.coordination.zk_errors import StalePartitionStateError

pytestmark = pytest.mark.timeout(20)


def test_a_stale_partition_state_write_is_refused(new_client: ClientFactory) -> None:
    a = new_client()
    lease = a.controller.try_elect(1)
    assert lease is not None
    started_topic(a, lease)
    state, version = a.partition_states.get("orders", 0) or pytest.fail("no state")
    shrunk = LeaderAndIsr(1, state.leader_epoch, (1,), lease.epoch)
    assert a.partition_states.update(lease, "orders", 0, shrunk, version) == version + 1

    grown = LeaderAndIsr(1, state.leader_epoch, (1, 2), lease.epoch)
    with pytest.raises(StalePartitionStateError):
        a.partition_states.update(lease, "orders", 0, grown, version)
    assert a.partition_states.get("orders", 0) == (shrunk, version + 1)
    with pytest.raises(StalePartitionStateError):
        a.partition_states.create(lease, "orders", {0: grown})
    with pytest.raises(UnknownTopicError):
        a.partition_states.update(lease, "orders", 9, grown, 0)
