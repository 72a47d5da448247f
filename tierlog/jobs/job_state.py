"""Each scheduled job's state and lock in the scheduler's state dir: ``<job>.json`` (when it
was last checked, its last run), replaced atomically, and ``<job>.lock``, held with flock
from the due check to the end of the run. Why each is so: ``tierlog.jobs.schedule``."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from tierlog.jobs.schedule_config import SchedulerConfig
from tierlog.util.atomic_files import atomic_write

STATE_VERSION = 1


@dataclass(frozen=True)
class RunRecord:
    fire_time: dt.datetime
    started: dt.datetime
    finished: dt.datetime | None = None
    ok: bool | None = None
    output: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class JobState:
    job: str
    last_checked: dt.datetime | None = None
    last_run: RunRecord | None = None


def state_path(config: SchedulerConfig, job: str) -> Path:
    return config.state_dir / f"{job}.json"


def read_state(path: Path, job: str) -> JobState:
    """The job's state; an empty one when the file does not exist.

    Raises:
        ValueError: the file is not a state file (the message names it).
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return JobState(job)
    try:
        data = json.loads(text)
        if data["version"] != STATE_VERSION:
            raise ValueError(f"version {data['version']!r}")
        run = data["last_run"]
        return JobState(
            job=job,
            last_checked=_time(data["last_checked"]),
            last_run=None
            if run is None
            else RunRecord(
                fire_time=_required_time(run["fire_time"]),
                started=_required_time(run["started"]),
                finished=_time(run["finished"]),
                ok=run["ok"],
                output=run["output"],
                error=run["error"],
            ),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a scheduler state file ({exc!r})") from None


def write_state(path: Path, state: JobState) -> None:
    run = state.last_run
    data = {
        "version": STATE_VERSION,
        "job": state.job,
        "last_checked": _iso(state.last_checked),
        "last_run": None
        if run is None
        else {
            "fire_time": _iso(run.fire_time),
            "started": _iso(run.started),
            "finished": _iso(run.finished),
            "ok": run.ok,
            "output": run.output,
            "error": run.error,
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(data, indent=2) + "\n").encode())


def _iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(dt.UTC).isoformat()


def _time(text: str | None) -> dt.datetime | None:
    return None if text is None else _required_time(text)


def _required_time(text: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"time without a zone: {text!r}")
    return moment


# --- lock -------------------------------------------------------------------------------


class JobLock:
    """An exclusive, non-blocking ``flock`` on ``path``, held until ``release()``.

    The file is never deleted: unlinking a lock file lets a newcomer lock a fresh inode
    while an old holder still has the old one, and both would run. It holds the holder's
    pid, for the message of whoever finds it taken.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def holder(self) -> str:
        """The pid the holder wrote, or "?" (it may not have written it yet)."""
        try:
            return self.path.read_text().strip() or "?"
        except OSError:
            return "?"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
