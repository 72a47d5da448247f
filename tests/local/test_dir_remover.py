"""tierlog.local.dir_remover: deleted partitions' directories removed off the caller's
thread, in order, and the LogManager handing them over."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tierlog.local.dir_remover import DirRemover
from tierlog.local.log_manager import DELETE_SUFFIX, LogManager


def a_dir_with_files(root: Path, name: str) -> Path:
    path = root / name
    (path / "sub").mkdir(parents=True)
    for n in range(3):
        (path / f"{n:020d}.log").write_bytes(b"x" * 4096)
    (path / "sub" / "f").write_bytes(b"y")
    return path


def test_submitted_directories_are_removed_on_another_thread(tmp_path: Path) -> None:
    removed_on: list[str] = []
    remover = DirRemover()
    real_run = remover._run

    def watched_run() -> None:
        removed_on.append(threading.current_thread().name)
        real_run()

    remover._run = watched_run  # type: ignore[method-assign]
    paths = [a_dir_with_files(tmp_path, f"t-{n}.x{DELETE_SUFFIX}") for n in range(3)]
    for path in paths:
        remover.submit(path)
    remover.close(timeout=10)
    assert not any(p.exists() for p in paths)
    assert removed_on == ["tierlog-delete-logs"]  # one thread, not the caller's


def test_a_failed_removal_is_logged_and_the_rest_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    remover = DirRemover()
    missing = tmp_path / "gone-already"
    present = a_dir_with_files(tmp_path, "t-0.y-delete")
    remover.submit(missing)
    remover.submit(present)
    remover.close(timeout=10)
    assert not present.exists()
    assert any("cannot remove" in r.message and "gone-already" in r.message for r in caplog.records)


def test_close_without_work_starts_no_thread_and_returns_at_once() -> None:
    before = {t.name for t in threading.enumerate()}
    remover = DirRemover()
    started = time.monotonic()
    remover.close(timeout=5)
    assert time.monotonic() - started < 1.0
    assert "tierlog-delete-logs" not in {t.name for t in threading.enumerate()} - before


def test_delete_log_hands_the_renamed_directory_to_remove_dir(tmp_path: Path) -> None:
    handed: list[Path] = []
    manager = LogManager([tmp_path / "logs"], remove_dir=handed.append)
    manager.startup()
    manager.get_or_create_log("t", 0)
    manager.delete_log("t", 0)
    assert len(handed) == 1 and handed[0].name.endswith(DELETE_SUFFIX)
    assert handed[0].is_dir()  # still there: removing it is remove_dir's job
    assert not (tmp_path / "logs" / "t-0").exists()
    manager.shutdown()
    # What the remover never got to is removed at the next start, as after a crash.
    again = LogManager([tmp_path / "logs"])
    again.startup()
    assert not handed[0].exists()
    again.shutdown()
