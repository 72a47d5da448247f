"""Moving a log between log dirs (local/log_dir_move.py, LogManager.complete_move): the copy
rounds, the switch, and what a start-up makes of every state a crash can leave."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.local import log_dir_move
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.local.log_manager import LogManager
from tierlog.util.clock import ManualClock

from .conftest import assert_dense, make_batch

CONFIG = LogConfig(segment_bytes=2000)
# An idempotent producer's batches, so the move must carry its state too.
PRODUCER_ID = 4242


def fill(log: Log, batches: int, first_sequence: int = 0) -> None:
    for i in range(batches):
        log.append(
            make_batch(
                5,
                value_size=40,
                producer_id=PRODUCER_ID,
                producer_epoch=0,
                base_sequence=first_sequence + 5 * i,
            )
        )


class Dirs:
    def __init__(self, tmp_path: Path, clock: ManualClock) -> None:
        self.a, self.b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
        self.clock = clock
        self.managers: list[LogManager] = []

    def manager(self) -> LogManager:
        manager = LogManager([self.a, self.b], CONFIG, clock=self.clock)
        manager.startup()
        self.managers.append(manager)
        return manager


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[Dirs]:
    d = Dirs(tmp_path, ManualClock())
    yield d
    for manager in d.managers:
        if manager.started:
            manager.shutdown()


def started_log(dirs: Dirs) -> tuple[LogManager, Log]:
    manager = dirs.manager()
    log = manager.get_or_create_log("orders", 0)
    assert manager.log_dir_of("orders", 0) == dirs.a
    fill(log, 40)  # 200 records over several segments
    assert len(log.segments) > 3
    return manager, log


def active_files(log: Log) -> set[str]:
    stem = f"{log.active_segment.base_offset:020d}"
    return {stem + s for s in (".log", ".index", ".timeindex", ".txnindex")}


def test_a_round_copies_what_changed_and_nothing_twice(dirs: Dirs) -> None:
    _, log = started_log(dirs)
    future = dirs.b / log_dir_move.future_dir_name("orders", 0)
    seen: list[int] = []
    skip = active_files(log)
    copied = log_dir_move.mirror(log.directory, future, skip=skip, throttle=seen.append)
    assert copied > 0 and sum(seen) == copied
    names = {e.name for e in os.scandir(future)}
    assert names and not names & active_files(log)
    assert log_dir_move.mirror(log.directory, future, skip=active_files(log)) == 0
    log.roll()  # the old active segment is closed now: the next round takes it
    assert log_dir_move.mirror(log.directory, future, skip=active_files(log)) > 0


def test_complete_move_switches_dirs_with_every_record_and_producer(dirs: Dirs) -> None:
    manager, log = started_log(dirs)
    end, start = log.log_end_offset, log.log_start_offset
    future = dirs.b / log_dir_move.future_dir_name("orders", 0)
    log_dir_move.mirror(log.directory, future, skip=active_files(log))
    moved = manager.complete_move("orders", 0, future)
    assert log.closed and moved is manager.get_log("orders", 0)
    assert manager.log_dir_of("orders", 0) == dirs.b
    assert moved.directory == dirs.b / "orders-0"
    assert not (dirs.a / "orders-0").exists()
    assert not [e for e in os.scandir(dirs.b) if e.name.endswith("-future")]
    assert not (moved.directory / log_dir_move.COMPLETE_MARKER).exists()
    assert (moved.log_end_offset, moved.log_start_offset) == (end, start)
    assert_dense(moved)
    # The producer state came along: its next sequence is accepted, a duplicate is not
    # written again.
    fill(moved, 1, first_sequence=200)
    assert moved.log_end_offset == end + 5
    manager.shutdown()
    again = dirs.manager()
    assert again.log_dir_of("orders", 0) == dirs.b
    assert again.get_log("orders", 0).log_end_offset == end + 5  # type: ignore[union-attr]


def _copied(dirs: Dirs) -> tuple[LogManager, Path, int]:
    """A log in ``a`` with a whole copy in ``b`` (the state just before the switch's
    renames), then the manager dropped as by a crash; (manager, copy, log end)."""
    manager, log = started_log(dirs)
    end = log.log_end_offset
    log.close()
    future = dirs.b / log_dir_move.future_dir_name("orders", 0)
    log_dir_move.mirror(log.directory, future, remove_extra=True)
    manager.started = False  # its files are closed; nothing more to do for it
    for fd in manager._locks:
        os.close(fd)
    manager._locks.clear()
    return manager, future, end


def test_crash_before_the_marker_resumes_the_move(dirs: Dirs) -> None:
    _, future, end = _copied(dirs)
    manager = dirs.manager()
    assert [m.future_dir for m in manager.pending_moves] == [future]
    assert future.is_dir()  # kept: the move goes on from it
    assert manager.log_dir_of("orders", 0) == dirs.a
    assert manager.get_log("orders", 0).log_end_offset == end  # type: ignore[union-attr]


def test_a_copy_whose_source_is_gone_is_removed(dirs: Dirs) -> None:
    _, future, _ = _copied(dirs)
    os.rename(dirs.a / "orders-0", dirs.a / "orders-0.x-delete")  # the topic was deleted
    manager = dirs.manager()
    assert manager.pending_moves == [] and not future.exists()
    assert manager.get_log("orders", 0) is None


@pytest.mark.parametrize("renamed", ["nothing", "source", "both"])
def test_crash_after_the_marker_finishes_the_move(dirs: Dirs, renamed: str) -> None:
    _, future, end = _copied(dirs)
    (future / log_dir_move.COMPLETE_MARKER).touch()
    if renamed in ("source", "both"):
        os.rename(dirs.a / "orders-0", dirs.a / "orders-0.1-delete")
    if renamed == "both":
        os.rename(future, dirs.b / "orders-0")  # the marker is still in it
    manager = dirs.manager()
    assert manager.pending_moves == []
    assert manager.log_dir_of("orders", 0) == dirs.b
    log = manager.get_log("orders", 0)
    assert log is not None and log.log_end_offset == end
    assert_dense(log)
    assert not (dirs.a / "orders-0").exists()
    leftovers = [e.name for e in os.scandir(dirs.a) if e.is_dir()]
    assert leftovers == [], leftovers  # the old copy went with the other -delete dirs
    if renamed != "both":
        assert not (log.directory / log_dir_move.COMPLETE_MARKER).exists()


def test_a_failed_last_copy_leaves_the_log_where_it_was(
    dirs: Dirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager, log = started_log(dirs)
    end = log.log_end_offset
    future = dirs.b / log_dir_move.future_dir_name("orders", 0)

    def full(*_args: object, **_kw: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log_dir_move, "mirror", full)
    with pytest.raises(OSError):
        manager.complete_move("orders", 0, future)
    reopened = manager.get_log("orders", 0)
    assert reopened is not None and reopened is not log and not reopened.closed
    assert manager.log_dir_of("orders", 0) == dirs.a
    assert reopened.log_end_offset == end
    fill(reopened, 1, first_sequence=200)  # it takes appends again


def test_future_dir_names_parse_back() -> None:
    name = log_dir_move.future_dir_name("my-topic.v2", 12)
    assert log_dir_move.parse_future_dir_name(name) == ("my-topic.v2", 12)
    assert log_dir_move.parse_future_dir_name("orders-0") is None
    assert log_dir_move.parse_future_dir_name("orders-0.abc-delete") is None
    assert log_dir_move.parse_future_dir_name("orders-x.abc-future") is None
