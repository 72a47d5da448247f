"""The demos' data directory: which directories ``tierlog demo`` may delete, and when.

Every demo run starts from an empty directory, so it deletes the one it is given. It deletes
only what it made itself: a directory holding its marker file, :data:`MARKER`, written when
the directory is created (or one laid out as demos before the marker left it: nothing but
``logs/`` and ``delta/``). Any other non-empty directory needs ``--force``. A directory a
running broker holds (its log dir's ``.lock`` is flocked, see ``LogManager``) is never
deleted, ``--force`` or not: the broker would go on writing into files that no longer exist.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from tierlog.local.log_manager import LOCK_FILE
from tierlog.util.cli_errors import EXIT_USAGE, CliError

MARKER = ".tierlog-demo"
# What a demo's directory held before the marker existed.
_LEGACY_ENTRIES = {"logs", "delta"}


def _locked(lock_file: Path) -> bool:
    """Whether another process holds ``lock_file`` (a broker's log dir lock)."""
    try:
        fd = os.open(lock_file, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing also drops the lock if this took it
    return False


def in_use(data_dir: Path) -> Path | None:
    """The log dir under ``data_dir`` (itself or a child) a running broker holds, if any."""
    candidates = [data_dir / LOCK_FILE, *data_dir.glob(f"*/{LOCK_FILE}")]
    return next((lock.parent for lock in candidates if _locked(lock)), None)


def made_by_demo(data_dir: Path) -> bool:
    entries = {entry.name for entry in data_dir.iterdir()}
    return MARKER in entries or entries <= _LEGACY_ENTRIES


def prepare(data_dir: Path, *, force: bool = False) -> None:
    """Make ``data_dir`` an empty demo directory, deleting a previous demo's data.

    Raises:
        CliError: a running broker uses it (exit 1), or it is not empty, was not made by
            a demo and ``force`` is not set (exit 2); nothing is deleted.
    """
    if data_dir.exists() and not data_dir.is_dir():
        raise CliError(f"--data-dir {data_dir} is not a directory", EXIT_USAGE)
    if data_dir.is_dir() and any(data_dir.iterdir()):
        busy = in_use(data_dir)
        if busy is not None:
            raise CliError(
                f"{data_dir} is in use by a running broker (it holds {busy / LOCK_FILE}); "
                "stop that broker first, or give the demo another --data-dir"
            )
        if not force and not made_by_demo(data_dir):
            raise CliError(
                f"{data_dir} is not empty and was not created by `tierlog demo`, which "
                "deletes its data dir before it starts; pass --force to delete it, or "
                "choose another --data-dir",
                EXIT_USAGE,
            )
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / MARKER).write_text(
        "Created by `tierlog demo`, which deletes this directory when it runs again.\n"
    )
