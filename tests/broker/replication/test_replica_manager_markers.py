"""ReplicaManager.append_marker and the coordinator path of append_records, in process."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.local.conftest import T0
from tierlog.broker.coordination.api import PartitionState
from tierlog.broker.errors import error_code
from tierlog.broker.replication.partition import PartitionError
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.broker.replication.topic_error import TopicError
from tierlog.local.config import LogConfig
from tierlog.local.log_manager import LogManager
from tierlog.protocol import ErrorCode
from tierlog.records.builder import Record, build_batch
from tierlog.util.clock import ManualClock

ME = 1


class _Metadata:
    """The coordination metadata _hosted asks about partitions it does not host."""

    def topic(self, name: str) -> Any:
        return None


def _manager(tmp_path: Path) -> ReplicaManager:
    clock = ManualClock(T0)
    logs = LogManager([tmp_path / "logs"], clock=clock)
    manager = ReplicaManager(ME, logs, _Metadata(), LogConfig(), clock=clock)  # type: ignore[arg-type]
    config = LogConfig()
    manager._host("t", uuid.uuid4(), 0, config, PartitionState(ME, 0, [ME]), [ME])
    manager._host("__consumer_offsets", uuid.uuid4(), 0, config, PartitionState(ME, 0, [ME]), [ME])
    manager._host("f", uuid.uuid4(), 0, config, PartitionState(2, 0, [2, ME]), [2, ME])
    return manager


def _txn(pid: int, seq: int) -> bytes:
    return build_batch(
        [Record(b"k", b"v", timestamp=T0)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=True,
    )


def test_markers_on_user_and_internal_topics(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    partition, _ = manager.append_records("t", 0, _txn(5, 0), acks=1)
    assert partition.last_stable_offset == 0
    info = manager.append_marker("t", 0, 5, 0, 0, commit=False)
    assert info.first_offset == 1
    assert partition.last_stable_offset == partition.high_watermark == 2
    # The group coordinator's transactional offset commit: no sequence, internal topic.
    offsets, _ = manager.append_records(
        "__consumer_offsets", 0, _txn(5, -1), acks=1, internal_allowed=True
    )
    assert offsets.last_stable_offset == 0
    manager.append_marker("__consumer_offsets", 0, 5, 0, 0, commit=True)
    assert offsets.last_stable_offset == 2


def test_marker_errors_map_to_kafka_codes(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    with pytest.raises(PartitionError) as follower:
        manager.append_marker("f", 0, 5, 0, 0, commit=True)
    assert error_code(follower.value) == ErrorCode.not_leader_or_follower
    with pytest.raises(TopicError) as unknown:
        manager.append_marker("nope", 0, 5, 0, 0, commit=True)
    assert error_code(unknown.value) == ErrorCode.unknown_topic_or_partition
    manager.append_records("t", 0, _txn(5, 0), acks=1)
    manager.append_marker("t", 0, 5, 0, 3, commit=True)
    with pytest.raises(Exception) as fenced:
        manager.append_marker("t", 0, 5, 0, 2, commit=True)
    assert error_code(fenced.value) == ErrorCode.transaction_coordinator_fenced
    with pytest.raises(Exception) as epoch:
        manager.append_marker("t", 0, 5, -1, 3, commit=True)
    assert error_code(epoch.value) == ErrorCode.invalid_producer_epoch
    manager.append_records("t", 0, _txn(5, 1), acks=1)
    with pytest.raises(Exception) as txn_state:
        manager.append_records(
            "t",
            0,
            build_batch(
                [Record(b"k", b"v", timestamp=T0)], producer_id=5, producer_epoch=0, base_sequence=2
            ),
            acks=1,
        )
    assert error_code(txn_state.value) == ErrorCode.invalid_txn_state
