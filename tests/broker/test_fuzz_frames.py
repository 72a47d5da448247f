"""Thousands of random and mutated frames against a live broker: it must keep answering,
and the log must stay unchanged and valid."""

from __future__ import annotations

import random
import socket
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.harness import BrokerProcess
from tierlog.local.log import Log
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import iter_batches

SEED = 20261121
FRAMES = 6000


def produce_request_v7(topic: str, records: bytes, correlation_id: int) -> bytes:
    """A hand-built ProduceRequest v7 (non-flexible), the seed for mutations."""
    name = topic.encode()
    body = (
        struct.pack(">hhih", 0, 7, correlation_id, 4)
        + b"fuzz"
        + struct.pack(">h", -1)  # transactional_id null
        + struct.pack(">hi", 1, 5000)  # acks, timeout
        + struct.pack(">i", 1)
        + struct.pack(">h", len(name))
        + name
        + struct.pack(">i", 1)
        + struct.pack(">i", 0)
        + struct.pack(">i", len(records))
        + records
    )
    return struct.pack(">i", len(body)) + body


def seeds() -> list[bytes]:
    batch = build_batch([Record(b"k", b"v" * 50)])
    return [
        produce_request_v7("fuzz", batch, 1),
        # ApiVersions v3, Metadata v1 (all topics), Fetch v4 header only
        struct.pack(">i", 20) + struct.pack(">hhih", 18, 3, 2, 4) + b"fuzz" + b"\x02a\x021\x00",
        struct.pack(">i", 14) + struct.pack(">hhih", 3, 1, 3, 4) + b"fuzz" + b"\xff\xff\xff\xff",
    ]


def mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    choice = rng.random()
    if choice < 0.4:
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(4, len(buf))  # keep the size prefix: reach the decoders
            buf[pos] = rng.randrange(256)
    elif choice < 0.6:
        cut = rng.randrange(4, len(buf))
        buf = buf[:cut]
        buf[0:4] = struct.pack(">i", len(buf) - 4)
    elif choice < 0.8:
        pos = rng.randrange(4, len(buf) - 4)
        buf[pos : pos + 4] = struct.pack(
            ">i", rng.choice([-1, 0, 2**31 - 1, rng.randrange(1 << 20)])
        )
    else:
        body = rng.randbytes(rng.randrange(0, 200))
        buf = bytearray(struct.pack(">i", len(body)) + body)
    return bytes(buf)


def test_broker_survives_random_and_mutated_frames(broker: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(50):
        producer.produce("fuzz", value=b"before-%d" % i)
    assert producer.flush(10) == 0

    rng = random.Random(SEED)
    seed_frames = seeds()
    sent = 0
    sock: socket.socket | None = None
    deadline = time.monotonic() + 120
    while sent < FRAMES and time.monotonic() < deadline:
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=2)
            # Non-blocking: with a timeout set, Python would wait it out on every empty
            # recv even with MSG_DONTWAIT. Frames are small, so sends do not block.
            sock.setblocking(False)
        try:
            sock.sendall(mutate(rng, rng.choice(seed_frames)))
            try:  # drain answers without waiting for them
                while sock.recv(65536):
                    pass
            except BlockingIOError:
                pass
        except OSError:
            sock.close()
            sock = None
        sent += 1
        if sent % 10 == 0 and sock is not None:  # reconnect often: fresh frame boundaries
            sock.close()
            sock = None
    if sock is not None:
        sock.close()
    assert sent == FRAMES

    # Frames already sent may still be in the broker's queue: wait until the log stops
    # growing, so the sentinel below really is the last message.
    watcher = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    last, stable_since = -1, time.monotonic()
    settle_deadline = time.monotonic() + 30
    while time.monotonic() - stable_since < 1.0 and time.monotonic() < settle_deadline:
        high = watcher.get_watermark_offsets(TopicPartition("fuzz", 0), timeout=5)[1]
        if high != last:
            last, stable_since = high, time.monotonic()
        time.sleep(0.1)
    watcher.close()

    # The broker still answers a real client, and the log holds exactly what it held
    # plus any mutated produce that still carried a whole, valid batch.
    producer.produce("fuzz", value=b"after")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    consumer.assign([TopicPartition("fuzz", 0, 0)])
    values = []
    end = time.monotonic() + 15
    while time.monotonic() < end:
        msg = consumer.poll(0.5)
        if msg is None:
            if values and values[-1] == b"after":
                break
            continue
        assert msg.error() is None
        values.append(msg.value())
    consumer.close()
    assert values[:50] == [b"before-%d" % i for i in range(50)]
    assert values[-1] == b"after"
    assert broker.stop() == 0

    # Every batch on disk is whole and passes its CRC after the storm.
    log = Log(broker.data_dir / "fuzz-0", had_clean_shutdown=False)
    try:
        count = 0
        for segment in log.segments:
            with open(segment.path, "rb") as f:
                data = f.read()
            count += sum(h.record_count for _, h in iter_batches(data))
        assert count == log.log_end_offset == len(values)
    finally:
        log.close()
