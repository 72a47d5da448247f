"""LogClient against a real broker: metadata, offsets, raw fetch, errors, reconnects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tierlog.client import EARLIEST, LATEST, ClientError, LogClient, parse_bootstrap
from tierlog.client.connection import BrokerConnection
from tierlog.protocol.errors import ErrorCode
from tierlog.records.arrow import to_record_batches
from tierlog.records.reader import iter_records

BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("client") / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic("events", 2, 1)])["events"].result(timeout=10)
        producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 5})
        for i in range(500):
            producer.produce("events", value=b"v%d" % i, partition=i % 2, timestamp=BASE_TS + i)
        assert producer.flush(10) == 0
        yield process
    finally:
        process.stop()


def test_parse_bootstrap() -> None:
    assert [str(a) for a in parse_bootstrap("a:1, b:2,")] == ["a:1", "b:2"]
    for bad in ("", "a", "a:x", "a:0", ":9"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_topics_partitions_and_leaders(broker: BrokerProcess) -> None:
    with LogClient(broker.bootstrap) as client:
        assert "events" in client.topics()
        assert not [t for t in client.topics() if t.startswith("__")]
        assert client.partitions("events") == [0, 1]
        info = client.leader("events", 1)
        assert info.leader is not None and info.leader.port == broker.port
        with pytest.raises(ClientError) as caught:
            client.partitions("missing")
        assert caught.value.error == ErrorCode.unknown_topic_or_partition


def test_list_offsets_earliest_latest_and_by_time(broker: BrokerProcess) -> None:
    with LogClient(broker.bootstrap) as client:
        earliest = client.list_offsets({("events", 0): EARLIEST, ("events", 1): EARLIEST})
        latest = client.list_offsets({("events", 0): LATEST, ("events", 1): LATEST})
        assert earliest == {("events", 0): 0, ("events", 1): 0}
        assert latest == {("events", 0): 250, ("events", 1): 250}
        # partition 0 holds the even i: BASE_TS + 100 is record 50 there.
        assert client.list_offsets({("events", 0): BASE_TS + 100}) == {("events", 0): 50}
        assert client.list_offsets({("events", 0): BASE_TS + 10_000}) == {("events", 0): -1}


def test_fetch_returns_raw_batches_from_an_offset(broker: BrokerProcess) -> None:
    with LogClient(broker.bootstrap) as client:
        result = client.fetch("events", 1, 100)
        assert result.high_watermark == 250 and result.log_start_offset == 0
        records = list(iter_records(result.records))
        assert records[0].offset <= 100  # the batch holding 100 starts at or before it
        table = to_record_batches(result.records, "events", 1, start_offset=100)
        offsets = [o for b in table for o in b.column("offset").to_pylist()]
        assert offsets == list(range(100, 250))
        assert client.fetch("events", 1, 250).records == b""
        with pytest.raises(ClientError) as caught:
            client.fetch("events", 1, 10_000)
        assert caught.value.error == ErrorCode.offset_out_of_range


def test_read_committed_fetch_sends_the_isolation_level_and_reads_the_lso(
    broker: BrokerProcess,
) -> None:
    from tierlog.client.log_client import READ_COMMITTED, _fetch_request

    assert _fetch_request("events", 1, 0, 100, 0).isolation_level == 0
    assert _fetch_request("events", 1, 0, 100, 0, READ_COMMITTED).isolation_level == 1
    with LogClient(broker.bootstrap) as client:
        # No transaction in the log: everything is stable, nothing aborted.
        result = client.fetch("events", 1, 100, isolation_level=READ_COMMITTED)
        assert result.last_stable_offset == result.high_watermark == 250
        assert result.aborted_transactions == ()
        latest = client.list_offsets({("events", 1): LATEST}, isolation_level=READ_COMMITTED)
        assert latest == {("events", 1): 250}


def test_reconnects_after_the_connection_drops(broker: BrokerProcess) -> None:
    with LogClient(broker.bootstrap) as client:
        assert client.partitions("events") == [0, 1]
        for connection in client._connections.values():
            assert connection._sock is not None
            connection._sock.close()  # as if the broker had closed it
        assert client.partitions("events") == [0, 1]


def test_no_broker_answering_is_a_connection_error(tmp_path: Path) -> None:
    with LogClient("127.0.0.1:1", timeout=2, retries=0) as client, pytest.raises(ConnectionError):
        client.topics()
    assert "127.0.0.1:9" in repr(BrokerConnection("127.0.0.1", 9))
