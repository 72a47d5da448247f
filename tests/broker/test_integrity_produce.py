"""Issue 10, items 5 and 6 against a real broker: a batch that claims more records than it
holds, and a compressed block that states an impossible or unreadable size, are refused
and move no offsets; honest batches from a real client still go through."""

from __future__ import annotations

import gzip
import random
import struct
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.produce.v9.request import ProduceRequest

from tests.broker.harness import BrokerProcess
from tierlog.client.connection import BrokerConnection
from tierlog.client.log_client import LogClient
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import HEADER_SIZE, Compression, compute_crc


def reseal(batch: bytearray) -> bytes:
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    return bytes(batch)


def produce_raw(broker: BrokerProcess, topic: str, batch: bytes) -> tuple[int, int]:
    """(error code, base offset) of a Produce of ``batch`` to partition 0, acks=1."""
    request: Any = build(
        ProduceRequest,
        {
            "transactional_id": None,
            "acks": 1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    connection = BrokerConnection("127.0.0.1", broker.port, timeout=30)
    try:
        answer = connection.call(request)
    finally:
        connection.close()
    p = answer.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def test_lying_batches_are_refused_and_move_no_offsets(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("checked", 1, 1)])["checked"].result(timeout=10)
    three = bytearray(build_batch([Record(b"k", b"v" * 20)] * 3))
    struct.pack_into(">i", three, 23, 999_999)  # lastOffsetDelta
    struct.pack_into(">i", three, 57, 1_000_000)  # recordCount
    assert produce_raw(broker, "checked", reseal(three))[0] == ErrorCode.invalid_record

    noise = random.Random(3).randbytes(950_000)
    bomb = bytearray(build_batch([Record(b"k", b"v")] * 3, compression=Compression.GZIP))
    del bomb[HEADER_SIZE:]
    bomb += gzip.compress(noise, mtime=0)[:-4] + struct.pack("<I", 900 << 20)
    assert produce_raw(broker, "checked", reseal(bomb))[0] == ErrorCode.message_too_large

    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
    for i in range(10):
        producer.produce("checked", value=b"%d" % i)
    assert producer.flush(30) == 0
    with LogClient(broker.bootstrap) as client:
        high_watermark = client.fetch("checked", 0, 0).high_watermark
    assert high_watermark == 10


def zstd_bomb(size: int) -> bytes:
    """A zstd block of ``size`` zero bytes that does not state its size (so only
    decompressing it can tell): a few KB."""
    import zstandard

    chunker = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    chunk = bytes(1 << 20)
    parts = [chunker.compress(chunk) for _ in range(size >> 20)]
    return b"".join(parts) + chunker.flush()


def test_a_bomb_on_a_compacted_topic_is_refused_without_blocking_the_broker(
    broker: BrokerProcess,
) -> None:
    import threading
    import time

    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic("changelog", 1, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([topic])["changelog"].result(timeout=10)
    batch = bytearray(build_batch([Record(b"k", b"v")] * 3, compression=Compression.ZSTD))
    del batch[HEADER_SIZE:]
    batch += zstd_bomb(300 << 20)  # 300 MiB of zeros in ~10 KB, above the 256 MiB budget

    answers: list[tuple[int, int]] = []
    thread = threading.Thread(
        target=lambda: answers.append(produce_raw(broker, "changelog", reseal(batch)))
    )
    thread.start()
    # While the broker decompresses, other clients are answered: the event loop is free.
    worst = 0.0
    ping = BrokerConnection("127.0.0.1", broker.port, timeout=10)
    request = build(
        ApiVersionsRequest, {"client_software_name": "t", "client_software_version": "1"}
    )
    try:
        while thread.is_alive():
            started = time.monotonic()
            ping.call(request)
            worst = max(worst, time.monotonic() - started)
            time.sleep(0.01)
    finally:
        ping.close()
    thread.join()
    assert answers[0][0] == ErrorCode.message_too_large
    assert worst < 0.2, f"the event loop stalled {worst:.3f} s"
    # Honest keyed batches still go in; keyless ones are refused as before.
    ok = build_batch([Record(b"k", b"v" * 50)] * 5, compression=Compression.ZSTD)
    assert produce_raw(broker, "changelog", ok) == (0, 0)
    keyless = build_batch([Record(None, b"v")], compression=Compression.ZSTD)
    assert produce_raw(broker, "changelog", keyless)[0] == ErrorCode.invalid_record
