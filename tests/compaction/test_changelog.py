"""Changelog rebuilds end to end: a real broker (child process, 127.0.0.1), a compacted topic
with the remote tier on and small segments so its older part is only in object storage
(file://), produced by confluent-kafka with updates and tombstones, then cleaned by the
broker's log cleaner on both tiers (offsets with gaps). Every rebuild is checked against a
model computed from the produce acknowledgements."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tests.tiered_data import LOCAL_RETENTION_BYTES, TieredTopic, start_broker, wait_offloaded
from tierlog.compaction.changelog import (
    ChangelogReader,
    DictSink,
    SqliteSink,
    main,
    rebuild_dict,
    rebuild_sqlite,
)

PARTITIONS = 2
USERS = 300
CHANGES = 4000
Produced = tuple[int, int, bytes, bytes | None]  # partition, offset, key, value


@dataclass
class Changelog:
    broker: BrokerProcess
    topic: str
    produced: list[Produced]

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def remote_url(self) -> str:
        return f"file://{self.broker.data_dir / 'remote'}"


def create_compacted_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.1",
        "remote.storage.enable": "true",
        "local.retention.bytes": str(LOCAL_RETENTION_BYTES),
    }
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(timeout=10)


def produce_changes(
    bootstrap: str, topic: str, count: int, *, seed: int, first: int = 0
) -> list[Produced]:
    """``count`` e-mail changes of ``USERS`` users, about one in eight a deletion, with
    their partitions and offsets from the acknowledgements."""
    rng = random.Random(seed)
    acked: list[Produced] = []

    def on_delivery(error: object, message: Message) -> None:
        assert error is None, error
        acked.append((message.partition(), message.offset(), message.key(), message.value()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 40,
            "compression.type": "lz4",
        }
    )
    for n in range(first, first + count):
        key = b"user-%04d" % rng.randrange(USERS)
        value = None if rng.random() < 0.125 else b"%s-%06d@example.com" % (key, n)
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acked) == count
    return acked


def model(produced: list[Produced], below: dict[int, int] | None = None) -> dict[bytes, bytes]:
    """The state after every acknowledged change (below ``below[partition]`` if given)."""
    state: dict[bytes, bytes] = {}
    for partition, offset, key, value in sorted(produced):
        if below is not None and offset >= below[partition]:
            continue
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def start_cleaning_broker(data_dir: Path) -> BrokerProcess:
    """A broker whose cleaner looks for dirty logs every 200 ms (Kafka's default: 15 s)."""
    return start_broker(data_dir, **{"log.cleaner.backoff.ms": "200"})


def wait_cleaned(bootstrap: str, topic: str, produced: int, timeout: float = 60.0) -> int:
    """Until a read of the whole topic gets fewer records than were produced (the cleaner
    removed some, on both tiers): returns how many it got."""
    deadline = time.monotonic() + timeout
    while True:
        with ChangelogReader(topic, bootstrap=bootstrap) as reader:
            changes = reader.catch_up(DictSink()).changes
        if changes < produced:
            return changes
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} not cleaned in {timeout}s")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def changelog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Changelog]:
    broker = start_cleaning_broker(tmp_path_factory.mktemp("changelog") / "data")
    try:
        create_compacted_topic(broker.bootstrap, "users")
        produced = produce_changes(broker.bootstrap, "users", CHANGES, seed=12)
        wait_offloaded(TieredTopic(broker, "users", PARTITIONS, CHANGES))
        wait_cleaned(broker.bootstrap, "users", CHANGES)
        yield Changelog(broker, "users", produced)
    finally:
        broker.stop()


def remote_ends(changelog: Changelog) -> dict[int, int]:
    return TieredTopic(changelog.broker, changelog.topic, PARTITIONS, 0).remote_ends()


def test_the_cold_tier_is_only_in_object_storage(changelog: Changelog) -> None:
    data = changelog.broker.data_dir
    for partition, end in remote_ends(changelog).items():
        assert end > 0
        local = sorted((data / f"users-{partition}").glob("*.log"))
        assert int(local[0].stem) > 0, "offset 0 should be remote only"


def test_the_remote_tier_was_cleaned(changelog: Changelog) -> None:
    store = TieredTopic(changelog.broker, "users", PARTITIONS, 0).store()
    below_remote_end = sum(1 for p, o, _, _ in changelog.produced if o < remote_ends(changelog)[p])
    with ChangelogReader("users", remote_url=changelog.remote_url) as reader:
        remote_only = reader.catch_up(DictSink()).changes
    assert remote_only < below_remote_end, "nothing was cleaned in the remote tier"
    assert store.read_manifest("users", 0).version > 1


def test_dict_through_the_broker_equals_the_model(changelog: Changelog) -> None:
    state = rebuild_dict("users", bootstrap=changelog.bootstrap)
    expected = model(changelog.produced)
    assert len(expected) > USERS // 2
    assert state == expected


def test_dict_reading_the_cold_tier_from_object_storage(changelog: Changelog) -> None:
    sink = DictSink(key_decoder=bytes.decode, value_decoder=bytes.decode)
    with ChangelogReader(
        "users", bootstrap=changelog.bootstrap, remote_url=changelog.remote_url
    ) as reader:
        stats = reader.catch_up(sink)
    expected = {k.decode(): v.decode() for k, v in model(changelog.produced).items()}
    assert sink.data == expected
    # Offsets have gaps (cleaned away) on both tiers; that is not data loss.
    assert stats.from_store > 0 and stats.from_broker > 0
    assert stats.changes == stats.from_store + stats.from_broker < CHANGES
    assert stats.tombstones > 0  # kept for delete.retention.ms (a day)
    assert stats.positions == {
        p: 1 + max(o for q, o, _, _ in changelog.produced if q == p) for p in range(PARTITIONS)
    }


def test_remote_only_rebuild_needs_no_broker(changelog: Changelog) -> None:
    ends = remote_ends(changelog)
    sink = DictSink()
    with ChangelogReader("users", remote_url=changelog.remote_url) as reader:
        stats = reader.catch_up(sink)
    assert stats.from_broker == 0
    assert stats.positions == ends
    # The state at the remote end, except keys whose records there the cleaner removed
    # because a later change (in the hot tier) supersedes them.
    at_remote_end = model(changelog.produced, below=ends)
    changed_later = {k for p, o, k, _ in changelog.produced if o >= ends[p]}
    assert {k: v for k, v in sink.data.items()} == {
        k: v for k, v in at_remote_end.items() if k in sink.data
    }
    assert set(at_remote_end) - set(sink.data) <= changed_later
    assert len(sink.data) > len(at_remote_end) // 2


def test_sqlite_twice_gives_the_same_table_and_applies_nothing_new(
    changelog: Changelog, tmp_path: Path
) -> None:
    path = tmp_path / "users.db"
    options = {"bootstrap": changelog.bootstrap, "remote_url": changelog.remote_url}
    first = rebuild_sqlite(path, "users", **options)
    with SqliteSink(path) as sink:
        after_first = sink.to_dict()
    second = rebuild_sqlite(path, "users", **options)
    with SqliteSink(path) as sink:
        assert sink.to_dict() == after_first == model(changelog.produced)
    assert 0 < first.changes < CHANGES
    assert second.changes == 0
    assert second.positions == first.positions


def test_the_command_line_rebuilds_into_sqlite_and_prints_its_stats(
    changelog: Changelog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "users.db"
    argv = ["users", "--sqlite", str(path), "--bootstrap-server", changelog.bootstrap]
    assert main([*argv, "--remote-url", changelog.remote_url]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["changes"] == stats["from_store"] + stats["from_broker"] > 0
    with SqliteSink(path) as sink:
        assert sink.to_dict() == model(changelog.produced)


RESUMABLE_CHILD = """
import sys, time
from tierlog.compaction.changelog import ChangelogReader, SqliteSink

class SlowSink(SqliteSink):
    def apply(self, changes):
        super().apply(changes)
        time.sleep(0.05)  # many small commits, so the kill lands between two of them

bootstrap, remote_url, path = sys.argv[1:]
with SlowSink(path) as sink, ChangelogReader(
    "users", bootstrap=bootstrap, remote_url=remote_url, fetch_bytes=2048,
    store_chunk_bytes=2048,
) as reader:
    reader.catch_up(sink)
"""


def committed(path: Path) -> dict[int, int]:
    """Next offset per partition committed so far ({} before the table exists)."""
    try:
        db = sqlite3.connect(path, timeout=5)
        try:
            rows = db.execute("SELECT partition, next_offset FROM changelog_offsets").fetchall()
        finally:
            db.close()
    except sqlite3.OperationalError:
        return {}
    return dict(rows)


def test_sqlite_killed_in_the_middle_resumes_where_it_committed(
    changelog: Changelog, tmp_path: Path
) -> None:
    path = tmp_path / "users.db"
    argv = [sys.executable, "-c", RESUMABLE_CHILD, changelog.bootstrap, changelog.remote_url]
    child = subprocess.Popen([*argv, str(path)])
    try:
        deadline = time.monotonic() + 60
        while sum(committed(path).values()) < CHANGES // 4 and time.monotonic() < deadline:
            assert child.poll() is None, "the rebuild ended before it could be killed"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    killed_at = committed(path)
    assert CHANGES // 4 <= sum(killed_at.values()) < CHANGES
    options = {"bootstrap": changelog.bootstrap, "remote_url": changelog.remote_url}
    # What is left above the killed run's positions: the resumed run applies exactly that.
    with ChangelogReader("users", **options) as reader:
        left = reader.catch_up(DictSink(positions=killed_at)).changes
    resumed = rebuild_sqlite(path, "users", **options)
    assert resumed.changes == left > 0
    with SqliteSink(path) as sink:
        assert sink.to_dict() == model(changelog.produced)


def test_follow_applies_new_changes_until_stopped(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        create_compacted_topic(broker.bootstrap, "follow")
        produced = produce_changes(broker.bootstrap, "follow", 500, seed=1)
        sink = DictSink()
        done = threading.Event()
        result: list[object] = []

        def run() -> None:
            with ChangelogReader("follow", bootstrap=broker.bootstrap) as reader:
                result.append(reader.follow(sink, timeout_s=60, stop=done.is_set))

        follower = threading.Thread(target=run)
        follower.start()
        try:
            deadline = time.monotonic() + 30
            while sum(sink.positions.values()) < 500 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sink.data == model(produced)
            more = produce_changes(broker.bootstrap, "follow", 300, seed=2, first=500)
            produced += more
            while sum(sink.positions.values()) < 800 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            done.set()
            follower.join(30)
        assert not follower.is_alive()
        assert sink.data == model(produced)
        (stats,) = result
        # Every change, or fewer when the cleaner got to some before the follower did.
        assert 0 < stats.changes <= 800  # type: ignore[attr-defined]
    finally:
        broker.stop()
