from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.local import log_loader, partition_metadata
from tierlog.local.checkpoint import read_offsets
from tierlog.local.config import LogConfig
from tierlog.local.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_SUFFIX,
    LOG_START_FILE,
    MAX_FILE_NAME,
    RECOVERY_POINT_FILE,
    STRAY_SUFFIX,
    LogDirInUseError,
    LogManager,
    LogManagerTimings,
    aside_dir_name,
    parse_log_dir_name,
    validate_topic_name,
)
from tierlog.util.clock import ManualClock
from tierlog.util.scheduler import ManualScheduler

from .conftest import T0, assert_dense, crash, make_batch

HOUR = 3_600_000


class Managers:
    """Creates LogManagers on the test's dirs and shuts down (or abandons) them."""

    def __init__(self, tmp_path: Path, clock: ManualClock) -> None:
        self.dirs = [tmp_path / f"data{i}" for i in range(3)]
        self.clock = clock
        self.opened: list[LogManager] = []

    def start(
        self,
        n_dirs: int = 1,
        config: LogConfig | None = None,
        scheduler: ManualScheduler | None = None,
        **kwargs: object,
    ) -> LogManager:
        manager = LogManager(
            self.dirs[:n_dirs],
            config or LogConfig(),
            clock=self.clock,
            scheduler=scheduler,
            **kwargs,  # type: ignore[arg-type]
        )
        manager.startup()
        self.opened.append(manager)
        return manager

    def kill(self, manager: LogManager) -> None:
        """An unclean stop: no flush, no checkpoint, no marker; the dir locks released."""
        for lg in manager.logs.values():
            crash(lg)
        for fd in manager._locks:
            os.close(fd)
        manager._locks.clear()
        manager.started = False
        self.opened.remove(manager)

    def close_all(self) -> None:
        for manager in self.opened:
            if manager.started:
                manager.shutdown()


@pytest.fixture
def managers(tmp_path: Path, clock: ManualClock) -> Iterator[Managers]:
    m = Managers(tmp_path, clock)
    yield m
    m.close_all()


def test_placement_fewest_partitions(managers: Managers) -> None:
    manager = managers.start(n_dirs=3)
    d0, d1, d2 = (d.resolve() for d in managers.dirs)
    for p in range(3):
        manager.get_or_create_log("t", p)
    assert [manager.log_dir_of("t", p) for p in range(3)] == [d0, d1, d2]
    manager.get_or_create_log("u", 0)
    assert manager.log_dir_of("u", 0) == d0
    manager.delete_log("t", 1)
    manager.get_or_create_log("v", 0)
    assert manager.log_dir_of("v", 0) == d1  # d1 now holds the fewest
    assert (d1 / "v-0").is_dir()
    # get_or_create returns the same log the second time
    assert manager.get_or_create_log("v", 0) is manager.get_log("v", 0)
    assert manager.get_log("nope", 0) is None


def test_placement_counts_existing_logs_after_restart(managers: Managers) -> None:
    manager = managers.start(n_dirs=2)
    for p in range(3):
        manager.get_or_create_log("t", p)
    manager.shutdown()
    again = managers.start(n_dirs=2)
    assert len(again.logs) == 3
    again.get_or_create_log("u", 0)
    assert again.log_dir_of("u", 0) == managers.dirs[1].resolve()


def test_checkpoint_files_in_kafka_format(managers: Managers) -> None:
    manager = managers.start(n_dirs=2, config=LogConfig(segment_bytes=700))
    a = manager.get_or_create_log("orders", 0)
    b = manager.get_or_create_log("orders", 1)
    for _ in range(5):
        a.append(make_batch(2, value_size=100))
    b.append(make_batch(3))
    a.advance_log_start_offset(4)
    manager.checkpoint()
    d0, d1 = (d.resolve() for d in managers.dirs[:2])
    assert (d0 / RECOVERY_POINT_FILE).read_text() == f"0\n1\norders 0 {a.recovery_point}\n"
    assert a.recovery_point == 8  # flushed up to the last roll
    assert (d0 / LOG_START_FILE).read_text() == "0\n1\norders 0 4\n"
    assert read_offsets(d1 / RECOVERY_POINT_FILE) == {("orders", 1): 0}
    assert read_offsets(d1 / LOG_START_FILE) == {("orders", 1): 0}


def test_clean_shutdown_marker(managers: Managers) -> None:
    d0 = managers.dirs[0]
    manager = managers.start()
    assert not (d0 / CLEAN_SHUTDOWN_FILE).exists()
    assert manager.had_clean_shutdown == {d0.resolve(): False}
    lg = manager.get_or_create_log("t", 0)
    lg.append(make_batch(5))
    manager.shutdown()
    assert (d0 / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offsets(d0 / RECOVERY_POINT_FILE) == {("t", 0): 5}
    assert lg.closed
    again = managers.start()
    assert again.had_clean_shutdown == {d0.resolve(): True}
    assert not (d0 / CLEAN_SHUTDOWN_FILE).exists()  # removed at start-up
    assert again.get_log("t", 0).log_end_offset == 5  # type: ignore[union-attr]


def test_crash_while_loading_after_a_clean_stop_recovers_next_time(
    managers: Managers, monkeypatch: pytest.MonkeyPatch, counted_recover: list[int]
) -> None:
    manager = managers.start()
    lg = manager.get_or_create_log("t", 0)
    for _ in range(30):
        lg.append(make_batch(2, value_size=100, base_timestamp=None))
    manager.shutdown()
    d0 = managers.dirs[0]

    class Killed(BaseException):
        pass

    def die_after_loading(*_: object) -> None:
        raise Killed  # the broker dies once this log's files were opened and prepared

    with monkeypatch.context() as patch:
        patch.setattr(log_loader, "_rebuild_epoch_cache_if_empty", die_after_loading)
        doomed = LogManager(managers.dirs[:1], clock=managers.clock)
        with pytest.raises(Killed):
            doomed.startup()
    for fd in doomed._locks:
        os.close(fd)
    # loading preallocated the active segment's index: its tail is zeros now
    assert (lg.directory / "00000000000000000000.index").stat().st_size == 10 << 20
    assert not (d0 / CLEAN_SHUTDOWN_FILE).exists()
    counted_recover.clear()
    again = managers.start()
    assert again.had_clean_shutdown == {d0.resolve(): False}
    assert counted_recover == [0]
    index = again.get_log("t", 0).active_segment.offset_index  # type: ignore[union-attr]
    assert 0 < index.entries < 100


def test_clean_restart_does_not_rescan(managers: Managers, counted_recover: list[int]) -> None:
    manager = managers.start(config=LogConfig(segment_bytes=700))
    lg = manager.get_or_create_log("t", 0)
    for _ in range(6):
        lg.append(make_batch(2, value_size=100))
    manager.shutdown()
    counted_recover.clear()
    managers.start(config=LogConfig(segment_bytes=700))
    assert counted_recover == []


def test_unclean_stop_recovers_from_the_checkpointed_recovery_point(
    managers: Managers, counted_recover: list[int]
) -> None:
    config = LogConfig(segment_bytes=700)
    manager = managers.start(config=config)
    lg = manager.get_or_create_log("t", 0)
    for _ in range(9):
        lg.append(make_batch(2, value_size=100))
    manager.checkpoint()
    checkpointed = lg.recovery_point
    assert checkpointed == 16 and lg.log_end_offset == 18
    bases = [s.base_offset for s in lg.segments]
    torn_path = lg.active_segment.path
    managers.kill(manager)
    with open(torn_path, "ab") as f:
        f.write(make_batch(2, value_size=100)[:50])
    counted_recover.clear()
    again = managers.start(config=config)
    assert again.had_clean_shutdown == {managers.dirs[0].resolve(): False}
    assert counted_recover == [16]  # only the segment holding the recovery point
    recovered = again.get_log("t", 0)
    assert recovered is not None
    assert [s.base_offset for s in recovered.segments] == bases
    assert recovered.log_end_offset == 18
    assert recovered.recovered_bytes_truncated == 50
    assert_dense(recovered)
    # the new recovery point is checkpointed at once
    assert read_offsets(managers.dirs[0] / RECOVERY_POINT_FILE) == {("t", 0): 18}


def test_unclean_stop_without_checkpoint_recovers_everything(
    managers: Managers, counted_recover: list[int]
) -> None:
    config = LogConfig(segment_bytes=700)
    manager = managers.start(config=config)
    lg = manager.get_or_create_log("t", 0)
    for _ in range(5):
        lg.append(make_batch(2, value_size=100))
    managers.kill(manager)
    (managers.dirs[0] / RECOVERY_POINT_FILE).write_text("garbage")
    counted_recover.clear()
    again = managers.start(config=config)
    assert counted_recover == [0, 4, 8]
    assert again.get_log("t", 0).log_end_offset == 10  # type: ignore[union-attr]


def test_log_start_offset_survives_restart(managers: Managers) -> None:
    manager = managers.start(config=LogConfig(segment_bytes=700))
    lg = manager.get_or_create_log("t", 0)
    for _ in range(5):
        lg.append(make_batch(2, value_size=100))
    lg.advance_log_start_offset(3)
    manager.shutdown()
    again = managers.start(config=LogConfig(segment_bytes=700))
    assert again.get_log("t", 0).log_start_offset == 3  # type: ignore[union-attr]


def test_second_manager_on_the_same_dir_is_refused(managers: Managers) -> None:
    first = managers.start(n_dirs=2)
    second = LogManager(managers.dirs[1:2], clock=managers.clock)
    with pytest.raises(LogDirInUseError, match="in use"):
        second.startup()
    first.shutdown()
    managers.start(n_dirs=2)  # free again after shutdown


def test_topic_configs_at_startup(managers: Managers) -> None:
    manager = managers.start()
    manager.get_or_create_log("special", 0, LogConfig(segment_bytes=5000))
    manager.get_or_create_log("plain", 0)
    manager.shutdown()
    again = LogManager(managers.dirs[:1], LogConfig(segment_bytes=9000), clock=managers.clock)
    again.startup({"special": LogConfig(segment_bytes=5000)})
    managers.opened.append(again)
    assert again.get_log("special", 0).config.segment_bytes == 5000  # type: ignore[union-attr]
    assert again.get_log("plain", 0).config.segment_bytes == 9000  # type: ignore[union-attr]
    again.update_config("plain", LogConfig(segment_bytes=7000))
    assert again.get_log("plain", 0).config.segment_bytes == 7000  # type: ignore[union-attr]


def test_delete_log(managers: Managers) -> None:
    manager = managers.start()
    lg = manager.get_or_create_log("t", 0)
    lg.append(make_batch(3))
    manager.get_or_create_log("t", 1)
    d0 = managers.dirs[0]
    manager.delete_log("t", 0)
    assert manager.get_log("t", 0) is None
    assert lg.closed
    assert sorted(p.name for p in d0.iterdir() if p.is_dir()) == ["t-1"]
    assert read_offsets(d0 / RECOVERY_POINT_FILE) == {("t", 1): 0}
    manager.delete_log("t", 0)  # unknown: nothing happens
    manager.shutdown()
    assert set(managers.start().logs) == {("t", 1)}


def test_a_topic_of_the_longest_name_is_renamed_aside_whole(managers: Managers) -> None:
    """Issue 20, item 4: ``<topic>-0.<32 hex>-delete`` of a 214-character topic is over
    255 bytes; the name is cut as Kafka cuts it, so the rename (and the deletion) works."""
    manager = managers.start()
    name = "t" * 249
    manager.get_or_create_log(name, 0).append(make_batch(3))
    manager.delete_log(name, 0)
    left = [p.name for p in managers.dirs[0].iterdir() if p.is_dir()]
    assert left == []  # removed at once (no DirRemover here)
    assert len(aside_dir_name(name, 12345, DELETE_SUFFIX)) == MAX_FILE_NAME
    assert aside_dir_name("short", 3, STRAY_SUFFIX).startswith("short-3.")


def test_a_log_of_another_topic_id_is_set_aside(managers: Managers) -> None:
    """A log whose ``partition.metadata`` names another topic id is a stray: never
    returned for the topic of its name, removed, and a new log made in its place."""
    old_id, new_id = uuid.UUID(int=1), uuid.UUID(int=2)
    manager = managers.start()
    manager.get_or_create_log("t", 0, topic_id=old_id).append(make_batch(3))
    assert manager.topic_id_of("t", 0) == old_id
    assert partition_metadata.read(managers.dirs[0] / "t-0") == old_id
    fresh = manager.get_or_create_log("t", 0, topic_id=new_id)
    assert fresh.log_end_offset == 0
    assert partition_metadata.read(fresh.directory) == new_id
    # A log with no id yet (made before the file existed) is adopted.
    legacy = manager.get_or_create_log("u", 0)
    assert manager.topic_id_of("u", 0) is None
    assert manager.get_or_create_log("u", 0, topic_id=new_id) is legacy
    assert partition_metadata.read(legacy.directory) == new_id


def test_a_directory_left_by_a_failed_deletion_is_never_loaded(managers: Managers) -> None:
    """Not loaded, yet on disk under the topic's name (a deletion whose rename failed):
    creating the log sets it aside instead of loading its records."""
    manager = managers.start()
    lg = manager.get_or_create_log("t", 0)
    lg.append(make_batch(5))
    lg.flush()
    del manager.logs[("t", 0)]  # what a failed ``delete_log`` leaves: dropped, not moved
    again = manager.get_or_create_log("t", 0, topic_id=uuid.UUID(int=7))
    assert again.log_end_offset == 0


def test_a_kept_stray_stays_on_disk_and_is_not_loaded(managers: Managers) -> None:
    manager = managers.start()
    manager.get_or_create_log("t", 0).append(make_batch(3))
    manager.set_aside("t", 0, "a test", keep=True)
    kept = [p for p in managers.dirs[0].iterdir() if p.name.endswith(STRAY_SUFFIX)]
    assert len(kept) == 1 and any(kept[0].glob("*.log"))
    manager.shutdown()
    assert managers.start().logs == {}
    assert kept[0].exists()


def test_leftover_delete_dirs_are_removed_at_startup(managers: Managers) -> None:
    d0 = managers.dirs[0]
    (d0 / "t-0.0123abcd-delete").mkdir(parents=True)
    (d0 / "t-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    (d0 / "not-a-log").mkdir()
    (d0 / "stray-file-3").write_text("x")
    manager = managers.start()
    assert not (d0 / "t-0.0123abcd-delete").exists()
    assert manager.logs == {}
    assert (d0 / "not-a-log").exists()


def test_background_flush(managers: Managers, clock: ManualClock) -> None:
    scheduler = ManualScheduler(clock)
    manager = managers.start(
        config=LogConfig(flush_ms=5_000),
        scheduler=scheduler,
        timings=LogManagerTimings(flush_check_interval_ms=1_000),
    )
    lg = manager.get_or_create_log("t", 0)
    lg.append(make_batch(3))
    scheduler.advance(4_000)
    assert lg.recovery_point == 0
    scheduler.advance(1_000)
    assert lg.recovery_point == 3


def test_background_retention_and_checkpoint(managers: Managers, clock: ManualClock) -> None:
    scheduler = ManualScheduler(clock)
    timings = LogManagerTimings(
        flush_check_interval_ms=1_000,
        retention_check_interval_ms=10_000,
        checkpoint_interval_ms=60_000,
    )
    manager = managers.start(
        config=LogConfig(segment_bytes=700, retention_ms=HOUR, file_delete_delay_ms=30_000),
        scheduler=scheduler,
        timings=timings,
    )
    d0 = managers.dirs[0]
    lg = manager.get_or_create_log("t", 0)
    for _ in range(5):
        lg.append(make_batch(2, value_size=100, base_timestamp=T0 - 2 * HOUR))
    scheduler.advance(9_999)
    assert lg.log_start_offset == 0
    assert manager.retention_passes == 0
    scheduler.advance(1)  # the retention pass runs, and checkpoints what it deleted
    assert manager.retention_passes == 1
    assert lg.log_start_offset == 8
    assert read_offsets(d0 / LOG_START_FILE) == {("t", 0): 8}
    assert (lg.directory / "00000000000000000000.log.deleted").exists()
    scheduler.advance(30_000)
    assert not (lg.directory / "00000000000000000000.log.deleted").exists()
    # the periodic checkpoint records the recovery point reached by flushes
    lg.append(make_batch(1, base_timestamp=clock.milliseconds()))
    lg.flush()
    scheduler.advance(20_000)
    assert read_offsets(d0 / RECOVERY_POINT_FILE) == {("t", 0): 11}


def test_shutdown_cancels_background_tasks(managers: Managers, clock: ManualClock) -> None:
    scheduler = ManualScheduler(clock)
    manager = managers.start(scheduler=scheduler)
    # Started, the manager runs its periodic work on the scheduler...
    assert sorted(scheduler.scheduled()) == [
        "log-checkpoint",
        "log-flush",
        "log-retention",
        "producer-expiration",
    ]
    manager.get_or_create_log("t", 0).append(make_batch(1))
    manager.shutdown()
    # ...and shutting down takes all of it off.
    assert scheduler.scheduled() == []
    scheduler.advance(10 * HOUR)  # would raise LogClosedError if a task still ran


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a" * 250, "with space", "slash/", "ümlaut", "a:b", "t*"]
)
def test_invalid_topic_names(managers: Managers, name: str) -> None:
    with pytest.raises(ValueError):
        validate_topic_name(name)
    manager = managers.start()
    with pytest.raises(ValueError):
        manager.get_or_create_log(name, 0)
    assert manager.logs == {}


@pytest.mark.parametrize("name", ["a", "A.b_c-D", "a" * 249, "...", "__consumer_offsets"])
def test_valid_topic_names(name: str) -> None:
    validate_topic_name(name)


def test_negative_partition_is_refused(managers: Managers) -> None:
    manager = managers.start()
    with pytest.raises(ValueError):
        manager.get_or_create_log("t", -1)
    assert manager.logs == {}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-3", ("orders", 3)),
        ("my-topic-12", ("my-topic", 12)),
        ("orders", None),
        ("-3", None),
        ("orders-x", None),
        ("orders-", None),
        ("orders--1", ("orders-", 1)),  # topic "orders-" is legal
    ],
)
def test_parse_log_dir_name(name: str, expected: tuple[str, int] | None) -> None:
    assert parse_log_dir_name(name) == expected


def test_needs_a_log_dir() -> None:
    with pytest.raises(ValueError):
        LogManager([])
