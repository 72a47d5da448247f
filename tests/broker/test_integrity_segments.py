"""Issue 10, items 1 and 3 against a real broker and real clients: a torn active segment
after a clean stop, and a damaged length field in a closed segment."""

from __future__ import annotations

import contextlib
import os
import re
import struct
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tierlog.client.log_client import ClientError, LogClient
from tierlog.protocol.errors import ErrorCode
from tierlog.records.errors import RecordsError
from tierlog.records.header import iter_batches


def produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50})
    failed: list[object] = []
    for i in values:
        producer.produce(
            topic,
            value=b"%06d" % i,
            on_delivery=lambda err, _msg: failed.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert not failed


def consume(bootstrap: str, topic: str, timeout: float = 15.0) -> list[int]:
    """Every value of partition 0 up to the end; fails if the end is not reached."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "integrity",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(msg.error())
            values.append(int(msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"consumer stuck after {len(values)} values")


def create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=10)


def segments(data_dir: Path, topic: str) -> list[Path]:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))


def consume_range(
    bootstrap: str, topic: str, start: int, end: int, timeout: float = 30.0
) -> list[int]:
    """The values of partition 0 at offsets ``start`` to ``end`` - 1, read with a real
    consumer (check.crcs=false, librdkafka's default); fails if they do not all come."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "integrity", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, start)])
    values: list[int] = []
    offsets: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and (not offsets or offsets[-1] < end - 1):
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            offsets.append(msg.offset())
            values.append(int(msg.value()))
    finally:
        consumer.close()
    assert offsets == list(range(start, end)), (offsets[:3], offsets[-3:])
    return values


def storage_error_at(bootstrap: str, topic: str, offset: int) -> None:
    with LogClient(bootstrap, retries=0) as client:
        try:
            result = client.fetch(topic, 0, offset)
        except ClientError as exc:
            assert exc.error == ErrorCode.kafka_storage_error, exc
        else:
            raise AssertionError(f"fetch at {offset} answered {len(result.records)} bytes")


def test_torn_active_segment_after_a_clean_stop_is_marked_and_appends_go_on_after_it(
    broker: BrokerProcess,
) -> None:
    """After a clean stop the recovery point is the log end: a torn last batch is damage to
    flushed data, not a torn write. It used to be truncated and its offsets given to new
    records (issue 20, item 1: only the tail past the recovery point may be truncated)."""
    create(broker.bootstrap, "torn")
    produce(broker.bootstrap, "torn", range(500))
    broker.stop()
    active = segments(broker.data_dir, "torn")[-1]
    data = active.read_bytes()
    batches = list(iter_batches(data))
    last_position, last = batches[-1]
    os.truncate(active, last_position + last.size - 10)  # header intact, records cut
    broker.start()
    text = broker.log_text()
    assert re.search(
        rf"WARNING .*{re.escape(str(active))}: .* at position {last_position}\b.*; "
        "recovering the segment",
        text,
    ), text[-3000:]
    assert f"offsets {last.base_offset}-499 are missing" in text, text[-3000:]
    assert os.path.getsize(active) == last_position + last.size - 10  # nothing cut
    produce(broker.bootstrap, "torn", range(1000, 1100))
    assert consume_range(broker.bootstrap, "torn", 0, last.base_offset) == [
        *range(last.base_offset)
    ]
    storage_error_at(broker.bootstrap, "torn", last.base_offset)
    # New records take offsets after the damaged ones, never theirs.
    assert consume_range(broker.bootstrap, "torn", 500, 600) == [*range(1000, 1100)]


def segment_ranges(data_dir: Path, topic: str) -> list[tuple[Path, int, int]]:
    """Each segment file with the first and next offset its batches hold."""
    found = []
    for path in segments(data_dir, topic):
        batches = list(iter_batches(path.read_bytes()))
        found.append((path, batches[0][1].base_offset, batches[-1][1].next_offset))
    return found


def test_a_closed_segment_cut_while_stopped_keeps_every_later_segment(
    broker: BrokerProcess,
) -> None:
    """The issue's case: 20,000 records in 24 segments; one closed segment cut to half its
    size after a clean shutdown. The next start truncated it there and deleted every
    later segment (24 became 2, 18,750 acknowledged messages gone)."""
    create(broker.bootstrap, "cut", **{"segment.bytes": "12288", "index.interval.bytes": "512"})
    produce(broker.bootstrap, "cut", range(20_000))
    broker.stop()
    ranges = segment_ranges(broker.data_dir, "cut")
    assert len(ranges) >= 20
    path, first, next_offset = ranges[2]
    os.truncate(path, path.stat().st_size // 2)
    kept = [p for p, _, _ in ranges]
    broker.start()
    assert segments(broker.data_dir, "cut") == kept
    text = broker.log_text()
    assert re.search(rf"ERROR .*{re.escape(str(path))}: .*damaged", text), text[-3000:]
    # Served up to the cut; an error (retriable) in the cut part, never the next segment;
    # everything after it, to the last of the 20,000.
    readable_end = first
    with contextlib.suppress(RecordsError):
        for _, header in iter_batches(path.read_bytes()):
            readable_end = header.next_offset
    assert first < readable_end < next_offset
    assert consume_range(broker.bootstrap, "cut", 0, readable_end) == [*range(readable_end)]
    for offset in (readable_end, next_offset - 1):
        storage_error_at(broker.bootstrap, "cut", offset)
    assert consume_range(broker.bootstrap, "cut", next_offset, 20_000) == [
        *range(next_offset, 20_000)
    ]


def test_a_closed_segment_cut_while_the_broker_runs_keeps_every_later_segment(
    broker: BrokerProcess,
) -> None:
    create(broker.bootstrap, "cutlive", **{"segment.bytes": "16384", "index.interval.bytes": "512"})
    produce(broker.bootstrap, "cutlive", range(5000))
    ranges = segment_ranges(broker.data_dir, "cutlive")
    path, first, next_offset = ranges[1]
    kept = [p for p, _, _ in ranges]
    os.truncate(path, path.stat().st_size // 2)
    storage_error_at(broker.bootstrap, "cutlive", next_offset - 1)  # found by the read
    broker.kill()  # and an unclean stop on top
    broker.start()
    assert segments(broker.data_dir, "cutlive") == kept
    storage_error_at(broker.bootstrap, "cutlive", next_offset - 1)
    assert consume_range(broker.bootstrap, "cutlive", next_offset, 5000) == [
        *range(next_offset, 5000)
    ]
    assert consume_range(broker.bootstrap, "cutlive", 0, first) == [*range(first)]


def test_a_segment_deleted_under_a_running_broker_is_reported_and_never_skipped(
    broker: BrokerProcess,
) -> None:
    """Issue 20, item 2: after the restart the 850 offsets of the deleted segment were a
    silent gap: no log line, log start unchanged, and a consumer jumped over it."""
    create(broker.bootstrap, "hole", **{"segment.bytes": "16384"})
    produce(broker.bootstrap, "hole", range(5000))
    ranges = segment_ranges(broker.data_dir, "hole")
    path, first, next_offset = ranges[2]
    for sibling in path.parent.glob(path.stem + ".*"):
        sibling.unlink()
    broker.stop()
    broker.start()
    text = broker.log_text()
    assert f"offsets {first}-{next_offset - 1} are missing" in text, text[-3000:]
    # The consumer reads up to the hole, then waits at it (retriable error) instead of
    # jumping over; after it, everything is served.
    assert consume_range(broker.bootstrap, "hole", 0, first) == [*range(first)]
    storage_error_at(broker.bootstrap, "hole", first)
    storage_error_at(broker.bootstrap, "hole", next_offset - 1)
    assert consume_range(broker.bootstrap, "hole", next_offset, 5000) == [*range(next_offset, 5000)]
    with LogClient(broker.bootstrap) as client:
        assert client.list_offsets({("hole", 0): -2}) == {("hole", 0): 0}


def test_fetch_at_a_damaged_length_field_answers_storage_error_not_later_data(
    broker: BrokerProcess,
) -> None:
    create(broker.bootstrap, "damaged", **{"segment.bytes": "8000"})
    produce(broker.bootstrap, "damaged", range(2000))
    broker.stop()
    first = segments(broker.data_dir, "damaged")[0]
    batches = list(iter_batches(first.read_bytes()))
    assert len(batches) >= 4
    position, header = batches[2]
    with open(first, "r+b") as f:
        f.seek(position + 8)
        f.write(struct.pack(">i", 0x7FFF0000))
    broker.start()
    with LogClient(broker.bootstrap, retries=0) as client:
        for offset in (header.base_offset, header.next_offset):
            try:
                result = client.fetch("damaged", 0, offset)
            except ClientError as exc:
                assert exc.error == ErrorCode.kafka_storage_error
            else:
                raise AssertionError(
                    f"fetch at {offset} answered {len(result.records)} bytes, no error"
                )
        # Intact data before the damage is still served.
        ok = client.fetch("damaged", 0, 0)
        assert ok.records


def test_a_garbled_leader_epoch_checkpoint_is_reported_and_rebuilt(
    broker: BrokerProcess,
) -> None:
    """Issue 20, item 12: it was accepted silently."""
    create(broker.bootstrap, "epochs")
    produce(broker.bootstrap, "epochs", range(100))
    broker.stop()
    checkpoint = broker.data_dir / "epochs-0" / "leader-epoch-checkpoint"
    good = checkpoint.read_text()
    checkpoint.write_bytes(b"0\n2\n0 0\n")  # the count says 2, one entry follows
    broker.start()
    assert re.search(
        rf"WARNING .*{re.escape(str(checkpoint))}: expected 2 entries, found 1; "
        "rebuilding it from the log's batch headers",
        broker.log_text(),
    ), broker.log_text()[-3000:]
    assert checkpoint.read_text() == good
    assert consume_range(broker.bootstrap, "epochs", 0, 100) == [*range(100)]


def test_a_garbled_offset_index_in_a_running_broker_skips_nothing(broker: BrokerProcess) -> None:
    """Issue 20, item 3: a consumer assigned at 1601 received 1700 first, 99 records
    skipped without a word, after an index entry was overwritten under the broker."""
    create(broker.bootstrap, "garbled", **{"index.interval.bytes": "256"})
    produce(broker.bootstrap, "garbled", range(2000))
    index = segments(broker.data_dir, "garbled")[0].with_suffix(".index")
    data = index.read_bytes()
    entries = [
        struct.unpack_from(">iI", data, n)
        for n in range(0, len(data), 8)
        if data[n : n + 8] != bytes(8)
    ]
    n = max(k for k, (relative, _) in enumerate(entries) if relative <= 1601)
    later = next(position for relative, position in entries if relative >= 1700)
    with open(index, "r+b") as f:
        f.seek(n * 8 + 4)
        f.write(struct.pack(">I", later))
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "garbled", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("garbled", 0, 1601)])
    try:
        deadline = time.monotonic() + 30
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                msg = None
        assert msg is not None, "no record came"
        assert (msg.offset(), int(msg.value())) == (1601, 1601)
    finally:
        consumer.close()
    assert re.search(
        rf"WARNING .*{re.escape(str(index.with_suffix('.log')))}: offset index entry .* does not "
        "match the log",
        broker.log_text(),
    ), broker.log_text()[-3000:]


def test_a_bit_flip_in_the_active_segment_never_reaches_a_consumer(broker: BrokerProcess) -> None:
    """Issue 20, item 6: with check.crcs=false (librdkafka's default) a consumer received
    the changed value, and the broker logged nothing."""
    create(broker.bootstrap, "flipped")
    produce(broker.bootstrap, "flipped", range(300))
    active = segments(broker.data_dir, "flipped")[-1]
    batches = list(iter_batches(active.read_bytes()))
    position, header = batches[len(batches) // 2]
    with open(active, "r+b") as f:  # the last digit of the batch's last value
        f.seek(position + header.size - 2)
        digit = f.read(1)
        f.seek(position + header.size - 2)
        f.write(b"9" if digit != b"9" else b"8")
    # Everything before the damaged batch, every value as produced; then the batch itself
    # answers KAFKA_STORAGE_ERROR (the consumer waits there), and the rest is served.
    assert consume_range(broker.bootstrap, "flipped", 0, header.base_offset) == [
        *range(header.base_offset)
    ]
    storage_error_at(broker.bootstrap, "flipped", header.base_offset)
    assert consume_range(broker.bootstrap, "flipped", header.next_offset, 300) == [
        *range(header.next_offset, 300)
    ]
    assert re.search(
        rf"ERROR .*{re.escape(str(active))}: bytes {position}-{position + header.size} are "
        "damaged, found before serving them \\(.*CRC-32C",
        broker.log_text(),
    ), broker.log_text()[-3000:]
