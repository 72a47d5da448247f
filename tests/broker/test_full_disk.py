"""A broker whose data disk fills up (issue 10, "Full disk"): a real tmpfs filled by a
ballast file, a real broker process and real clients. Deleting the ballast "frees space"."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess

DISK_MB = 40
# Every test is bounded: the broker, the clients and the polls all stop in this many seconds.
pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh 40 MiB tmpfs. Not skipped when it cannot be mounted: these tests are the
    only proof of the full-disk behaviour, so a box that cannot run them must say so."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(
            f"cannot mount a tmpfs at {mount} (needs root): {result.stderr.strip()}",
            pytrace=False,
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte with a ballast file and return it."""
    ballast = disk / "ballast"
    chunk = b"\0" * (1 << 20)
    with open(ballast, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        # Take the last partial MiB too, so not even a small write fits.
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
    return ballast


def start_broker(disk: Path, overrides: dict[str, str] | None = None) -> BrokerProcess:
    broker = BrokerProcess(disk / "data", {"log.segment.bytes": str(4 << 20), **(overrides or {})})
    # Its log goes beside the tmpfs, not on it: a full disk must not swallow the evidence.
    broker.log_path = disk.parent / "broker.log"
    return broker


def free_bytes(disk: Path) -> int:
    st = os.statvfs(disk)
    return st.f_bavail * st.f_frsize


def wait_free(disk: Path, at_least: int, timeout: float = 15.0) -> int:
    """Free bytes once at least ``at_least`` are free, or when ``timeout`` ends: a deleted
    segment a reader (the scrubber, a fetch) still holds is freed when it lets go."""
    deadline = time.monotonic() + timeout
    while free_bytes(disk) < at_least and time.monotonic() < deadline:
        time.sleep(0.1)
    return free_bytes(disk)


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=10)


def produce(bootstrap: str, topic: str, megabytes: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    value = os.urandom(64 * 1024)
    for _ in range(megabytes * 16):
        producer.produce(topic, value=value)
        producer.poll(0)
    assert producer.flush(20) == 0


def live_partition_dirs(disk: Path, topic: str) -> list[str]:
    """``<topic>-<n>`` dirs, not those renamed aside for deletion (``...-delete``), which
    the broker's remover takes away in the background (``wait_free`` checks that it did)."""
    pattern = re.compile(rf"{re.escape(topic)}-\d+")
    return [p.name for p in (disk / "data").iterdir() if pattern.fullmatch(p.name)]


def topics(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


def test_delete_topic_on_a_full_disk_frees_its_space(disk: Path) -> None:
    """Item 8: a DeleteTopics on a full disk either deletes the topic and frees its bytes,
    or fails and keeps it listed; never gone from metadata with its data left on disk."""
    broker = start_broker(disk).start()
    try:
        create_topic(broker.bootstrap, "big")
        produce(broker.bootstrap, "big", 12)
        ballast = fill(disk)
        assert free_bytes(disk) < 1 << 20
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        error: KafkaException | None = None
        try:
            admin.delete_topics(["big"])["big"].result(timeout=15)
        except KafkaException as exc:
            error = exc
        listed = "big" in topics(broker.bootstrap)
        on_disk = live_partition_dirs(disk, "big") != []
        assert listed == on_disk, broker.log_text()[-3000:]
        assert listed == on_disk, (
            f"DeleteTopics answered {error}; listed={listed}, data on disk={on_disk}"
        )
        # The deletion must work while the disk is full: that is how space is freed.
        assert error is None, f"DeleteTopics failed on a full disk: {error}"
        assert not listed
        assert wait_free(disk, 10 << 20) >= 10 << 20, "the topic's bytes were not freed"
        ballast.unlink()
    finally:
        broker.stop()


def test_delete_topic_frees_space_when_even_the_metadata_journal_cannot_grow(disk: Path) -> None:
    """Item 8, the metadata side: after a clean restart the journal is folded away, so the
    deletion's journal line needs a fresh block on a disk with none left. The line is
    written first (a deletion not on record must not lose its data), so the broker keeps
    space aside for it; without that the deletion failed and the disk stayed full."""
    broker = start_broker(disk).start()
    try:
        create_topic(broker.bootstrap, "big")
        produce(broker.bootstrap, "big", 12)
        assert broker.stop() == 0
        assert not (disk / "data" / "tierlog-metadata.journal").exists()
        broker.start(timeout=20)
        ballast = fill(disk)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        error: KafkaException | None = None
        try:
            admin.delete_topics(["big"])["big"].result(timeout=15)
        except KafkaException as exc:
            error = exc
        listed = "big" in topics(broker.bootstrap)
        on_disk = live_partition_dirs(disk, "big") != []
        assert listed == on_disk, broker.log_text()[-3000:]
        assert error is None, f"DeleteTopics failed on a full disk: {error}"
        assert wait_free(disk, 10 << 20) >= 10 << 20, "the topic's bytes were not freed"
        ballast.unlink()
        # The space kept aside is taken again once there is room, for the next time.
        create_topic(broker.bootstrap, "after")
        assert "after" in topics(broker.bootstrap)
    finally:
        broker.stop()


def test_delete_topic_frees_space_first_once_a_group_was_touched_on_a_full_disk(
    disk: Path,
) -> None:
    """Issue 20, item 9: a consumer group asked for while the disk is full leaves
    ``__consumer_offsets`` created but not hosted. A DeleteTopics then tried to host it
    first, failed with ENOSPC and answered KAFKA_STORAGE_ERROR, freeing nothing: the one
    way out of a full disk was closed. Deleting must free the space first."""
    broker = start_broker(disk, {"offsets.topic.num.partitions": "4"}).start()
    consumer: Consumer | None = None
    try:
        create_topic(broker.bootstrap, "big")
        produce(broker.bootstrap, "big", 12)
        ballast = fill(disk)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "g",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        consumer.subscribe(["big"])
        deadline = time.monotonic() + 3  # the group's coordinator asked for on a full disk
        while time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.close()
        consumer = None
        assert "__consumer_offsets" in topics(broker.bootstrap), broker.log_text()[-3000:]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["big"])["big"].result(timeout=15)
        assert "big" not in topics(broker.bootstrap)
        assert not any(p.name.startswith("big-") for p in (disk / "data").iterdir())
        assert wait_free(disk, 10 << 20) >= 10 << 20, "the topic's bytes were not freed"
        ballast.unlink()
    finally:
        if consumer is not None:
            consumer.close()
        broker.stop()


def test_restart_on_a_full_disk_stops_with_one_line_then_starts_once_freed(disk: Path) -> None:
    """Item 10: a start on a full disk used to die with a traceback while writing a
    checkpoint. It stops with one line naming the cause; once space is freed it starts and
    still has its topic."""
    broker = start_broker(disk).start()
    create_topic(broker.bootstrap, "kept", 3)
    produce(broker.bootstrap, "kept", 2)
    assert broker.stop() == 0
    ballast = fill(disk)
    before = len(broker.log_text())
    with pytest.raises(RuntimeError, match="exited early"):
        broker.start(timeout=20)
    output = broker.log_text()[before:]
    assert "Traceback" not in output, output[-3000:]
    lines = [line for line in output.splitlines() if line.strip()]
    assert "no space left on device" in lines[-1], output[-3000:]
    assert "free space" in lines[-1]
    ballast.unlink()
    broker.start(timeout=20)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert "kept" in admin.list_topics(timeout=10).topics
    finally:
        broker.stop()


def test_groups_recover_by_themselves_once_space_is_freed(disk: Path) -> None:
    """Item 9: a consumer group first used while the disk is full (the broker creates
    ``__consumer_offsets`` on that FindCoordinator) used to get a closed connection with an
    ENOSPC traceback, then NOT_COORDINATOR until a restart. Once space is freed the group
    must work without one."""
    broker = start_broker(disk, {"offsets.topic.num.partitions": "4"}).start()
    consumer: Consumer | None = None
    try:
        create_topic(broker.bootstrap, "events")
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(100):
            producer.produce("events", value=b"%d" % i)
        assert producer.flush(10) == 0
        ballast = fill(disk)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "g",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
        consumer.subscribe(["events"])
        # A few seconds of asking for the coordinator while the disk is full.
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            consumer.poll(0.2)
        assert broker.proc is not None and broker.proc.poll() is None, broker.log_text()[-3000:]
        ballast.unlink()
        got = 0
        deadline = time.monotonic() + 20
        while got < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        log_text = broker.log_text()
        assert got == 100, f"consumed {got}/100 in 20 s after space was freed:\n{log_text[-3000:]}"
        assert "closing connection" not in log_text, log_text[-3000:]
        assert "Traceback" not in log_text, log_text[-3000:]
    finally:
        if consumer is not None:
            consumer.close()
        broker.stop()


PAGE = 4096


def alive(broker: BrokerProcess) -> bool:
    return broker.proc is not None and broker.proc.poll() is None


def exit_status(broker: BrokerProcess) -> int | None:
    """The broker's exit status if it ends within 2 s (a process killed by a signal takes
    a moment to be reaped): -7 is SIGBUS. None if it is still running."""
    if broker.proc is None:
        return None
    with contextlib.suppress(subprocess.TimeoutExpired):
        return broker.proc.wait(2)
    return None


class Sender:
    """A producer that sends one batch at a time and keeps what was acknowledged.

    ``retries=0`` so the broker's own error code reaches the test (librdkafka would retry
    KAFKA_STORAGE_ERROR until its timeout, as a real client does)."""

    def __init__(self, broker: BrokerProcess, retries: int = 0) -> None:
        self.broker = broker
        self.producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "enable.idempotence": False,
                "retries": retries,
                "message.timeout.ms": 5000,
                "request.timeout.ms": 5000,
            }
        )
        self.acked: dict[str, list[bytes]] = {}
        self.errors: list[KafkaError] = []

    def send(self, topic: str, value: bytes) -> KafkaError | None:
        outcome: list[KafkaError | None] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            outcome.append(err)
            if err is None:
                self.acked.setdefault(topic, []).append(value)
            else:
                self.errors.append(err)

        self.producer.produce(topic, value=value, on_delivery=delivered)
        deadline = time.monotonic() + 10
        while self.producer.flush(0.2) and time.monotonic() < deadline:
            # Fail at once, not after the client's timeouts, when the broker is gone.
            assert alive(self.broker), f"the broker died:\n{self.broker.log_text()[-3000:]}"
        assert outcome, "no answer in 10 s"
        return outcome[0]


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 20.0) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
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


def test_produce_on_a_full_disk_answers_storage_errors_and_recovers(disk: Path) -> None:
    """Not a SIGBUS: an index entry written through the map into a page with no block
    behind it ended the broker on a full disk. Here the batch that fills the disk's last
    page is followed by an offset-index entry starting a new index page, the case that did
    (index.interval.bytes=0: every batch after the first has an entry, 512 to a page). The
    broker must stay up, answer KAFKA_STORAGE_ERROR while the disk is full, including for
    produces that roll a segment, work again once space is freed, and lose nothing it
    acknowledged."""
    broker = start_broker(disk).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        new = [
            NewTopic("dense", 1, 1, config={"index.interval.bytes": "0"}),
            # One-page indexes: a rolled segment keeps its index pages (they hold
            # entries), so on a full disk the new segment cannot have its first blocks.
            NewTopic(
                "rolls", 1, 1, config={"segment.bytes": "65536", "segment.index.bytes": "4096"}
            ),
        ]
        for future in admin.create_topics(new).values():
            future.result(timeout=10)
        sender = Sender(broker)
        log_file = disk / "data" / "dense-0" / f"{0:020d}.log"
        index_file = log_file.with_suffix(".index")
        sizes = []
        for i in range(PAGE // 8 + 1):  # 513 batches: 512 entries, the first page full
            assert sender.send("dense", b"dense-%06d" % i + b"." * 90) is None
            sizes.append(log_file.stat().st_size)
        batch = sizes[-1] - sizes[-2]
        assert all(b - a == batch for a, b in itertools.pairwise(sizes))
        entries = index_file.read_bytes()[: PAGE + 8]
        assert entries[PAGE - 8 : PAGE] != bytes(8) and entries[PAGE:] == bytes(8), (
            "the setup expects the offset index's first page full and the next entry to "
            "start the second"
        )
        # "rolls" one batch short of a roll: its next produce rolls, on the full disk.
        for i in range(7):
            assert sender.send("rolls", b"rolls-first-%06d" % i + b"r" * 8192) is None
        assert len(list((disk / "data" / "rolls-0").glob("*.log"))) == 1
        # Fill the disk, then give back exactly the pages the next batch's .log write needs:
        # the write succeeds and the index entry after it finds no page left.
        ballast = fill(disk)
        end = log_file.stat().st_size
        log_pages = -(-(end + batch) // PAGE) - -(-end // PAGE)
        os.truncate(ballast, ballast.stat().st_size - log_pages * PAGE)
        # It fits: the .log has its page and the index entry its reserved block. (Before
        # the blocks were reserved, the broker died here with SIGBUS: a transport error.)
        error = sender.send("dense", b"dense-%06d" % len(sizes) + b"." * 90)
        assert error is None, f"{error}; broker exit status {exit_status(broker)} (-7: SIGBUS)"
        # Then produce until the disk refuses: to "dense" (a .log write) and to "rolls"
        # (64 KiB segments, 8 KiB batches: a roll every few produces).
        for i in range(40):
            error = sender.send("dense", b"dense-more-%06d" % i + b"." * 90) or error
            sender.send("rolls", b"rolls-%06d" % i + b"r" * 8192)
        assert alive(broker), f"the broker died:\n{broker.log_text()[-3000:]}"
        codes = {err.code() for err in sender.errors}
        assert codes == {KafkaError.KAFKA_STORAGE_ERROR}, [str(e) for e in sender.errors]
        assert error is not None, "a produce to a full disk succeeded every time"
        # Segments of "rolls" made while the disk was full are whole, or not there at all.
        for index in (disk / "data" / "rolls-0").glob("*.index"):
            assert index.with_suffix(".log").exists(), index
        ballast.unlink()
        # Space freed: produce works again without a restart, rolls included.
        for topic in ("dense", "rolls"):
            for i in range(20):
                assert sender.send(topic, b"%s-after-%06d" % (topic.encode(), i)) is None
        for topic in ("dense", "rolls"):
            acked = sender.acked[topic]
            got = consume_all(broker.bootstrap, topic, len(acked))
            assert got == acked, f"{topic}: {len(got)} consumed, {len(acked)} acknowledged"
        assert broker.stop() == 0
        # And after a clean restart: the segments left are all loadable.
        broker.start(timeout=20)
        for topic in ("dense", "rolls"):
            acked = sender.acked[topic]
            assert consume_all(broker.bootstrap, topic, len(acked)) == acked, topic
    finally:
        broker.stop()
