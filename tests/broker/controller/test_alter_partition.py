"""AlterPartition checks (controller/alter_partition.py): each refusal and its Kafka error
code, idempotent retries, and that an accepted change never moves the leader epoch."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.broker.controller import alter_partition as ap
from tierlog.broker.controller.alter_partition import AlterPartitionResult, check_alter_partition
from tierlog.broker.coordination.zk_data import LeaderAndIsr

CURRENT = LeaderAndIsr(1, 5, (1, 2), controller_epoch=3)
VERSION = 9
REPLICAS = [1, 2, 3]
LIVE = {1: 100, 2: 200, 3: 300}


def check(**overrides: Any) -> AlterPartitionResult | LeaderAndIsr:
    args: dict[str, Any] = {
        "current": CURRENT,
        "zk_version": VERSION,
        "replicas": REPLICAS,
        "live_brokers": LIVE,
        "leader_id": 1,
        "leader_epoch": 5,
        "new_isr": [1, 2, 3],
        "partition_epoch": VERSION,
        "controller_epoch": 4,
    }
    args.update(overrides)
    current, zk_version, replicas, live = (
        args.pop(k) for k in ("current", "zk_version", "replicas", "live_brokers")
    )
    return check_alter_partition(current, zk_version, replicas, live, **args)


def error(result: AlterPartitionResult | LeaderAndIsr) -> int:
    assert isinstance(result, AlterPartitionResult), result
    return result.error


def test_a_valid_expansion_keeps_leader_and_leader_epoch() -> None:
    assert check() == LeaderAndIsr(1, 5, (1, 2, 3), controller_epoch=4)
    assert check(new_isr=[1]) == LeaderAndIsr(1, 5, (1,), controller_epoch=4)


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"current": None}, ap.UNKNOWN_TOPIC_OR_PARTITION),
        ({"broker_epoch": 99}, ap.STALE_BROKER_EPOCH),
        ({"leader_epoch": 6}, ap.NOT_CONTROLLER),
        ({"partition_epoch": VERSION + 1}, ap.NOT_CONTROLLER),
        ({"leader_epoch": 4}, ap.FENCED_LEADER_EPOCH),
        ({"leader_id": 2}, ap.INVALID_REQUEST),
        ({"partition_epoch": VERSION - 1}, ap.INVALID_UPDATE_VERSION),
        ({"new_isr": [1, 4]}, ap.INVALID_REQUEST),
        ({"new_isr": [1, 2, 2]}, ap.INVALID_REQUEST),
        ({"new_isr": [2, 3]}, ap.INVALID_REQUEST),
        ({"new_isr": []}, ap.INVALID_REQUEST),
        ({"live_brokers": {1: 100, 2: 200}}, ap.INELIGIBLE_REPLICA),
    ],
)
def test_refusals(overrides: dict[str, Any], code: int) -> None:
    result = check(**overrides)
    assert error(result) == code
    assert isinstance(result, AlterPartitionResult) and result.message


def test_error_codes_are_kafkas() -> None:
    assert (ap.NOT_CONTROLLER, ap.FENCED_LEADER_EPOCH, ap.INVALID_UPDATE_VERSION) == (41, 74, 95)
    assert (ap.INVALID_REQUEST, ap.INELIGIBLE_REPLICA, ap.STALE_BROKER_EPOCH) == (42, 107, 77)
    assert ap.UNKNOWN_TOPIC_OR_PARTITION == 3


def test_a_retry_of_an_applied_change_succeeds_with_a_stale_partition_epoch() -> None:
    # ZooKeeper mode's equalsAllowStalePartitionEpoch: the answer to the first try was lost.
    result = check(new_isr=[1, 2], partition_epoch=VERSION - 1)
    assert isinstance(result, AlterPartitionResult) and result.ok
    assert (result.leader, result.leader_epoch, result.isr, result.partition_epoch) == (
        1,
        5,
        (1, 2),
        VERSION,
    )


def test_the_broker_epoch_is_checked_only_when_given() -> None:
    assert isinstance(check(broker_epoch=100), LeaderAndIsr)
    assert error(check(leader_id=4, broker_epoch=100)) == ap.STALE_BROKER_EPOCH


@given(
    st.lists(st.integers(0, 5), max_size=5),
    st.integers(3, 7),
    st.integers(7, 11),
    st.sets(st.integers(0, 5)),
)
def test_whatever_is_accepted_is_a_valid_isr(
    isr: list[int], leader_epoch: int, partition_epoch: int, live: set[int]
) -> None:
    result = check(
        new_isr=isr,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        live_brokers={b: b * 100 for b in live},
    )
    if isinstance(result, LeaderAndIsr):
        assert (result.leader, result.leader_epoch) == (CURRENT.leader, CURRENT.leader_epoch)
        assert CURRENT.leader in result.isr and set(result.isr) <= set(REPLICAS)
        assert set(result.isr) <= live and len(set(result.isr)) == len(result.isr)
        assert leader_epoch == CURRENT.leader_epoch and partition_epoch == VERSION
    else:
        retry = tuple(isr) == CURRENT.isr and leader_epoch == 5 and partition_epoch <= VERSION
        assert result.ok == retry
