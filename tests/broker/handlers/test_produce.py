"""The Produce handler's KIP-890 part 1 answers, called directly with kio requests on a
real partition, a real transaction coordinator and the real ``Transactions.verify_produce``
(only the request to another broker's coordinator is replaced)."""

from __future__ import annotations

import asyncio
import functools
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kio.schema.produce.v9.request as produce_v9
import pytest

from tests.local.conftest import T0
from tierlog.broker.authorization import RequestAuthorizer
from tierlog.broker.coordination.api import PartitionState
from tierlog.broker.handlers.produce import handle_produce
from tierlog.broker.replication.partition import Partition
from tierlog.broker.txn.coordinator import TransactionCoordinator, TxnConfig
from tierlog.broker.txn.service import Transactions
from tierlog.broker.txn.verification import VerificationGuards
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.protocol import Request, decode_response
from tierlog.protocol.errors import ErrorCode as E
from tierlog.protocol.kio_build import build
from tierlog.protocol.versions import ApiKey
from tierlog.records.builder import Record, build_batch
from tierlog.remote.unified_log import UnifiedLog
from tierlog.util.clock import ManualClock

pytestmark = pytest.mark.timeout(30)

ME = 1
TXN_ID = "tx"
PID = 4000


class Replicas:
    """``services.replicas`` as the handler uses it, over one real partition ``t-0``."""

    def __init__(self, partition: Partition) -> None:
        self.hosted = partition

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.hosted if (topic, index) == ("t", 0) else None

    def append_records(self, topic: str, index: int, records: Any, acks: int) -> Any:
        return self.hosted, self.hosted.append(records, acks, 1)


def make_services(tmp_path: Path, *, owned: bool, remote_code: int = 0, enabled: bool = True):
    log = Log(tmp_path / "t-0", LogConfig(), clock=ManualClock(T0))
    partition = Partition(
        "t", uuid.uuid4(), 0, UnifiedLog(log, None, "t", 0), PartitionState(ME, 0, [ME]), ME
    )

    async def never(*args: Any) -> Any:
        raise AssertionError("the coordinator writes nothing here")

    coordinator = TransactionCoordinator(
        never, never, never, TxnConfig(num_partitions=1), clock=ManualClock(T0)
    )
    if owned:
        coordinator.begin_loading(0)  # this broker is loading the id's partition

    async def verify_remotely(*args: Any) -> dict[tuple[str, int], int]:
        return {("t", 0): remote_code}

    transactions: Any = SimpleNamespace(
        verification_enabled=enabled,
        guards=VerificationGuards(),
        coordinator=coordinator,
        _verify_remotely=verify_remotely,
    )
    transactions.verify_produce = functools.partial(Transactions.verify_produce, transactions)
    services = SimpleNamespace(
        replicas=Replicas(partition),
        transactions=transactions,
        quotas=None,
        authz=RequestAuthorizer(),
    )
    return services, partition


def produce_request() -> Request:
    batch = build_batch(
        [Record(b"k", b"v", timestamp=T0)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    body = build(
        produce_v9.ProduceRequest,
        {
            "transactional_id": TXN_ID,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    return Request(ApiKey.PRODUCE, 9, 7, "client", None, body, 9, 0)  # type: ignore[arg-type]


def answer(services: Any) -> int:
    frame = asyncio.run(handle_produce(services, produce_request()))
    assert frame is not None
    _, response = decode_response(frame[4:], ApiKey.PRODUCE, 9)
    (topic,) = response.responses
    (p,) = topic.partition_responses
    return int(p.error_code)


def test_a_coordinator_still_loading_is_not_enough_replicas(tmp_path: Path) -> None:
    # COORDINATOR_LOAD_IN_PROGRESS is no Produce error: librdkafka and the Java client
    # would not retry it; NOT_ENOUGH_REPLICAS they do (Kafka's ReplicaManager, KAFKA-15459).
    services, partition = make_services(tmp_path, owned=True)
    assert answer(services) == E.not_enough_replicas
    assert partition.local.log_end_offset == 0


@pytest.mark.parametrize(
    "remote_code",
    [
        E.coordinator_load_in_progress,
        E.not_coordinator,
        E.coordinator_not_available,
        E.concurrent_transactions,
        E.network_exception,
    ],
)
def test_retriable_answers_of_another_coordinator_are_not_enough_replicas(
    tmp_path: Path, remote_code: int
) -> None:
    services, partition = make_services(tmp_path, owned=False, remote_code=remote_code)
    assert answer(services) == E.not_enough_replicas
    assert partition.local.log_end_offset == 0


@pytest.mark.parametrize("remote_code", [E.invalid_txn_state, E.invalid_producer_epoch])
def test_a_refusal_is_passed_on(tmp_path: Path, remote_code: int) -> None:
    services, partition = make_services(tmp_path, owned=False, remote_code=remote_code)
    assert answer(services) == remote_code
    assert partition.local.log_end_offset == 0


def test_verified_then_appended(tmp_path: Path) -> None:
    services, partition = make_services(tmp_path, owned=False, remote_code=0)
    assert answer(services) == 0
    assert partition.local.log_end_offset == 1


def test_without_verification_nothing_is_asked(tmp_path: Path) -> None:
    # transaction.partition.verification.enable=false: Kafka's behaviour before KIP-890.
    services, partition = make_services(
        tmp_path, owned=False, remote_code=E.invalid_txn_state, enabled=False
    )
    assert answer(services) == 0
    assert partition.local.first_unstable_offset == 0
