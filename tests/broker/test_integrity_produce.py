"""Issue 10, items 5 and 6 against a real broker: a batch that claims more records than it
holds, and a compressed block that states an impossible or unreadable size, are refused
and move no offsets; honest batches from a real client still go through."""

from __future__ import annotations

import gzip
import random
import struct
import threading
import time
import zlib
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
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


def records_block(values: list[bytes]) -> bytes:
    return build_batch([Record(b"k", v) for v in values])[HEADER_SIZE:]


def with_block(block: bytes, count: int, compression: Compression) -> bytes:
    """A batch of ``count`` records whose records block is ``block`` (length and CRC
    right: nothing in its header gives it away)."""
    batch = bytearray(build_batch([Record(b"k", b"v")] * count, compression=compression))
    del batch[HEADER_SIZE:]
    batch += block
    return reseal(batch)


def read_values(bootstrap: str, topic: str, expected: int, timeout: float = 20.0) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
    finally:
        consumer.close()
    return values


def test_a_zstd_bomb_without_its_size_is_refused_and_consumers_read_past_it(
    broker: BrokerProcess,
) -> None:
    """Issue 20, item 10: a zstd frame that does not state its content size was stored on
    a normal topic, and every consumer stalled at its offset (librdkafka gives up past
    receive.message.max.bytes). Now both kinds are refused: one whose RLE blocks state
    300 MiB (from its block headers), one of well-formed records that only decoding can
    measure (decoded off the event loop, stopped at 256 MiB)."""
    import zstandard

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("events", 1, 1)])["events"].result(timeout=10)
    plain = zstandard.ZstdCompressor(write_content_size=False)
    assert produce_raw(broker, "events", build_batch([Record(b"k", b"first")]))[0] == 0
    zeros = with_block(plain.compress(bytes(300 << 20)), 3, Compression.ZSTD)
    assert produce_raw(broker, "events", zeros)[0] == ErrorCode.message_too_large
    pattern = bytes(range(256)) * 4096  # compressed blocks, not RLE: only decoding tells
    records = with_block(plain.compress(records_block([pattern * 100] * 3)), 3, Compression.ZSTD)
    assert produce_raw(broker, "events", records)[0] == ErrorCode.message_too_large
    assert produce_raw(broker, "events", build_batch([Record(b"k", b"second")]))[0] == 0
    assert read_values(broker.bootstrap, "events", 2) == [b"first", b"second"]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_four_concurrent_gzip_bombs_cost_no_memory(broker: BrokerProcess) -> None:
    """Issue 20, item 10: four gzip bombs at once (well-formed records, the member's ISIZE
    saying 1,000 bytes) to a compacted topic, which must decode them for its keys, took
    the broker's RSS to 1.4 GB: each was decompressed whole, on a thread of its own. Now
    they are decoded one at a time in 1 MiB pieces, and refused at 256 MiB each."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [NewTopic("keyed", 1, 1, config={"cleanup.policy": "compact"}), NewTopic("plain")]
    for future in admin.create_topics(topics).values():
        future.result(timeout=10)
    member = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = records_block([bytes(1 << 20)] * 300)
    packed = bytearray(member.compress(block) + member.flush())
    del block
    packed[-4:] = struct.pack("<I", 1000)
    bomb = with_block(bytes(packed), 300, Compression.GZIP)
    assert produce_raw(broker, "plain", build_batch([Record(b"k", b"v")]))[0] == 0
    assert broker.proc is not None
    before = rss_bytes(broker.proc.pid)
    answers: list[int] = []
    senders = [
        threading.Thread(target=lambda t=t: answers.append(produce_raw(broker, t, bomb)[0]))
        for t in ("keyed", "keyed", "plain", "plain")
    ]
    peak = before
    for sender in senders:
        sender.start()
    while any(s.is_alive() for s in senders):
        peak = max(peak, rss_bytes(broker.proc.pid))
        time.sleep(0.01)
    assert answers == [ErrorCode.message_too_large] * 4
    grown = (peak - before) >> 20
    assert grown < 64, f"the broker RSS grew by {grown} MiB"  # 771 before, 1-3 now
