"""A fetch answer being sent from a segment that retention deletes meanwhile, with
file.delete.delay.ms=0, against a real broker: the client still gets the exact bytes.

The answer is one large slice of the first segment. The client reads it slowly (a small
receive buffer), so the broker is still inside ``sendfile`` when DeleteRecords and the
retention pass remove that segment; more appends then roll new segments, whose files take
the lowest free fd numbers. Without a lease on the slice's file the rest of the answer would
come from whatever file now holds the fd number (another segment: well-formed batches with
the wrong offsets) or fail with EBADF; with it, every byte is the deleted segment's.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey, decode_response, encode_request
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import iter_batches

TOPIC = "inflight"
SEGMENT_BYTES = 8 << 20
# Records of distinct bytes per batch, so bytes from the wrong place can never pass.
RECORDS_PER_BATCH = 4
VALUE_BYTES = 32 * 1024
FETCH_VERSION = 12
DEADLINE_S = 20.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path / "data",
        {
            "log.segment.delete.delay.ms": "0",
            "log.retention.check.interval.ms": "100",
            "num.partitions": "1",
        },
    ).start()
    try:
        yield process
    finally:
        process.stop()


def batch(n: int) -> bytes:
    records = [
        Record(b"%d-%d" % (n, i), (b"%08d.%d|" % (n, i)) * (VALUE_BYTES // 11))
        for i in range(RECORDS_PER_BATCH)
    ]
    return build_batch(records)


def produce(raw: RawClient, first: int, count: int) -> None:
    for n in range(first, first + count):
        answer = raw.call(
            request(
                ApiKey.PRODUCE,
                7,
                {
                    "transactional_id": None,
                    "acks": 1,
                    "timeout": 5000,
                    "topic_data": [
                        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch(n)}]}
                    ],
                },
            )
        )
        assert answer.responses[0].partition_responses[0].error_code == 0


def create_topic(raw: RawClient) -> None:
    answer = raw.call(
        request(
            ApiKey.CREATE_TOPICS,
            5,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [
                            {"name": "segment.bytes", "value": str(SEGMENT_BYTES)},
                            {"name": "file.delete.delay.ms", "value": "0"},
                        ],
                    }
                ],
                "timeout": 5000,
                "validate_only": False,
            },
        )
    )
    assert answer.topics[0].error_code == 0


def delete_records(raw: RawClient, offset: int) -> None:
    answer = raw.call(
        request(
            ApiKey.DELETE_RECORDS,
            2,
            {
                "topics": [
                    {"name": TOPIC, "partitions": [{"partition_index": 0, "offset": offset}]}
                ],
                "timeout": 5000,
            },
        )
    )
    assert answer.topics[0].partitions[0].error_code == 0


def fetch_request(max_bytes: int) -> Any:
    return request(
        ApiKey.FETCH,
        FETCH_VERSION,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )


class SlowReader:
    """A raw connection with a tiny receive buffer: the broker can only send as fast as
    ``read`` takes bytes, so its ``sendfile`` stays in flight between reads."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Before connect, so the window the broker sees is small from the start.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(DEADLINE_S)
        self.sock.connect(("127.0.0.1", port))
        self.received = bytearray()

    def read(self, n: int) -> None:
        """Take ``n`` more bytes (fewer if the broker closes the connection)."""
        want = len(self.received) + n
        while len(self.received) < want:
            chunk = self.sock.recv(min(want - len(self.received), 1 << 20))
            if not chunk:
                return
            self.received += chunk

    def close(self) -> None:
        self.sock.close()


def wait_for(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def deleted_files_open(pid: int) -> list[str]:
    """Deleted segment files the broker process still holds open."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if ".log" in target and target.endswith("(deleted)"):
            out.append(target)
    return out


def test_segment_deleted_under_an_inflight_sendfile(broker: BrokerProcess) -> None:
    started = time.monotonic()
    partition_dir = broker.data_dir / f"{TOPIC}-0"
    first_segment = partition_dir / f"{0:020d}.log"
    raw = RawClient(broker.port, timeout=DEADLINE_S)
    reader = None
    try:
        create_topic(raw)
        per_segment = SEGMENT_BYTES // len(batch(0))
        produce(raw, 0, 3 * per_segment)  # three segments and a bit
        segments = sorted(partition_dir.glob("*.log"))
        assert len(segments) >= 3
        expected = first_segment.read_bytes()  # closed: what the fetch must send, exactly
        assert len(expected) > SEGMENT_BYTES // 2
        third_base = int(segments[2].name.removesuffix(".log"))

        reader = SlowReader(broker.port)
        reader.sock.sendall(encode_request(fetch_request(64 << 20), 1, client_id="slow"))
        reader.read(64 * 1024)  # the answer is being sent now
        assert len(reader.received) == 64 * 1024

        # Segments 0 and 1 fall below the log start and go at the next retention pass.
        delete_records(raw, third_base)
        wait_for(lambda: not first_segment.exists(), "retention to delete the first segment")
        # New segments take the freed fd numbers; their bytes differ at every position.
        produce(raw, 3 * per_segment, 2 * per_segment)
        assert len(sorted(partition_dir.glob("*.log"))) >= 3

        size = struct.unpack_from(">i", reader.received)[0] + 4
        while len(reader.received) < size:
            before = len(reader.received)
            reader.read(size - before)
            if len(reader.received) == before:
                break
        assert len(reader.received) == size, (
            f"the broker closed the connection after {len(reader.received)} of {size} bytes:\n"
            + broker.log_text()[-3000:]
        )
        correlation_id, answer = decode_response(
            bytes(reader.received[4:]), ApiKey.FETCH, FETCH_VERSION
        )
        assert correlation_id == 1
        data = answer.responses[0].partitions[0]
        assert data.error_code == 0
        records = bytes(data.records)
        # Exact bytes of the deleted segment; every batch CRC-valid, offsets from 0 on.
        assert records == expected
        offsets = [header.base_offset for _, header in iter_batches(records)]
        assert offsets == [n * RECORDS_PER_BATCH for n in range(len(offsets))]

        # Sent in full, the leases are back: the broker holds no deleted segment open.
        assert broker.proc is not None
        pid = broker.proc.pid
        wait_for(lambda: not deleted_files_open(pid), "the broker to close the deleted segment")
        # And the connection still serves the next request.
        reader.sock.sendall(encode_request(fetch_request(1 << 20), 2, client_id="slow"))
        reader.received.clear()
        reader.read(4)
        reader.read(struct.unpack(">i", reader.received)[0])
        correlation_id, answer = decode_response(
            bytes(reader.received[4:]), ApiKey.FETCH, FETCH_VERSION
        )
        # Offset 0 is below the log start now.
        assert answer.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
    finally:
        if reader is not None:
            reader.close()
        raw.close()
    assert time.monotonic() - started < 30
