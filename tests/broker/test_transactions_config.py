"""Kafka's transaction keys in a broker process's configuration: a ``server.properties``
with ``transaction.partition.verification.enable`` and
``transaction.state.log.load.buffer.size`` starts, and both are honoured; the first also
changes at run time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.broker.harness import BrokerProcess
from tests.broker.test_hanging_transactions import TXN_ID, init_producer, produce
from tests.broker.test_transactions import TXN_OVERRIDES, create_topic, last_stable_offset
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey

pytestmark = pytest.mark.timeout(120)

LOAD_BUFFER_SIZE = 200
# state_topic.py's line for each partition it loads.
LOADED = re.compile(
    r"loaded (\d+) transactional ids from \S+ in (\d+) reads of at most (\d+) bytes"
)


def test_verification_off_and_a_small_load_buffer(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data",
        {
            **TXN_OVERRIDES,
            "transaction.partition.verification.enable": "false",
            "transaction.state.log.load.buffer.size": str(LOAD_BUFFER_SIZE),
        },
    ).start()
    raw = RawClient(broker.port)
    try:
        create_topic(broker.bootstrap, "hang")
        for _ in range(3):  # three states of the id, ~130 bytes each, in its partition
            pid, epoch = init_producer(raw)
        # Never added to the transaction, and accepted: Kafka's behaviour without KIP-890
        # part 1 (with it, INVALID_TXN_STATE: tests/broker/test_hanging_transactions.py).
        accepted = produce(raw, TXN_ID, pid, epoch, 0)
        assert (int(accepted.error_code), int(accepted.base_offset)) == (0, 0)
        assert last_stable_offset(broker.bootstrap, "hang") == 0  # the hanging transaction
        raw.close()
        broker.stop()
        restarted_at = len(broker.log_text())
        broker.start()
        raw = RawClient(broker.port)
        # The coordinator loaded the id from __transaction_state, 200 bytes at a time (the
        # default, 5 MiB, reads the partition at once).
        assert init_producer(raw) == (pid, epoch + 1)
        loads = [
            tuple(map(int, found))
            for found in LOADED.findall(broker.log_text()[restarted_at:])
            if int(found[0]) > 0
        ]
        assert len(loads) == 1, loads  # the id's partition
        _, reads, largest = loads[0]
        assert reads >= 2 and largest <= LOAD_BUFFER_SIZE, loads
    finally:
        raw.close()
        broker.stop()


def test_verification_is_turned_off_and_on_at_run_time(tmp_path: Path) -> None:
    # KIP-226: ``kafka-configs --entity-default --alter --add-config
    # transaction.partition.verification.enable=false`` takes effect without a restart.
    broker = BrokerProcess(tmp_path / "data", TXN_OVERRIDES).start()
    raw = RawClient(broker.port)
    try:
        create_topic(broker.bootstrap, "hang")
        pid, epoch = init_producer(raw)
        assert int(produce(raw, TXN_ID, pid, epoch, 0).error_code) == 48  # INVALID_TXN_STATE
        assert set_verification(broker, "false") == 0
        assert int(produce(raw, TXN_ID, pid, epoch, 0).error_code) == 0
        assert set_verification(broker, "true") == 0
        # A partition with a transaction under way is not verified again (Kafka's rule);
        # a new epoch, which ends it, starts one that is.
        pid, epoch = init_producer(raw)
        assert int(produce(raw, TXN_ID, pid, epoch, 0).error_code) == 48
        assert "reconfigured transactions: transaction.partition.verification.enable" in (
            broker.log_text()
        )
    finally:
        raw.close()
        broker.stop()


def set_verification(broker: BrokerProcess, value: str) -> int:
    """IncrementalAlterConfigs of the cluster default, as kafka-configs --entity-default
    sends it: its error code."""
    raw = RawClient(broker.port)
    try:
        config = {
            "name": "transaction.partition.verification.enable",
            "config_operation": 0,
            "value": value,
        }
        body = {
            "resources": [{"resource_type": 4, "resource_name": "", "configs": [config]}],
            "validate_only": False,
        }
        answer = raw.call(request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body))
    finally:
        raw.close()
    return int(answer.responses[0].error_code)
