"""Files replaced or created so that a crash or a concurrent reader never sees them torn.

``atomic_write`` replaces a file (checkpoints, producer snapshots, job schedules, the
``file://`` remote tier's manifest pointer); ``create_new`` creates one only if nothing of
that name exists (the ``file://`` remote tier's manifest versions: the creation is the
commit's compare-and-set). Both write a temp file, fsync it, then make it visible with
one atomic step (``rename`` / ``link``) and fsync the directory, since the step itself
must reach the disk before the write counts. Not for NFS: ``link`` and ``rename`` are
atomic there only in the ways NFS allows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path


def _write_fsynced(path: Path, data: bytes, flags: int, *, fsync: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: a crash leaves the old file or the new one, never a
    torn one. The temp file is ``<name>.tmp`` (one writer at a time per path: callers
    serialise; ``Log``'s start-up clean-up removes a leftover ``*.tmp``)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    _write_fsynced(tmp, data, os.O_TRUNC)
    os.replace(tmp, path)
    _fsync_directory(path.parent)


def replace_unsynced(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (temp file, rename) without waiting for the disk:
    readers see the old file or the whole new one, but a crash before the caller's later
    ``fsync_paths([path, path.parent])`` may leave it empty or torn. For files whose
    readers detect that and fall back (a producer snapshot: an older one, or the log)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    _write_fsynced(tmp, data, os.O_TRUNC, fsync=False)
    os.replace(tmp, path)


def fsync_paths(paths: Iterable[Path]) -> None:
    """fsync each file or directory by name (a descriptor of its own: what is durable is
    the inode's data, whoever wrote it). One that is gone, deleted or renamed meanwhile, is
    skipped."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def create_new(path: Path, data: bytes) -> None:
    """Create ``path`` holding ``data`` if it does not exist, atomically: readers see no
    file or the whole file, and of two processes creating it at once exactly one wins.

    Raises:
        FileExistsError: ``path`` exists (nothing was changed).
    """
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex}")
    _write_fsynced(tmp, data, os.O_EXCL)
    try:
        os.link(tmp, path)  # fails if path exists: the exclusive step
    finally:
        os.unlink(tmp)
    _fsync_directory(path.parent)
