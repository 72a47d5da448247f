"""Moving a partition's directory to another of the broker's ``log.dirs`` (Kafka's
AlterReplicaLogDirs, KIP-113), in steps that survive a crash at any point.

The files, in the destination log dir::

    <topic>-<partition>.<id>-future/          the copy being made ("future replica")
    <topic>-<partition>.<id>-future/.move-complete   written when the copy is whole

The move, driven by ``tierlog.broker.replication.log_dir_mover`` and ``LogManager.complete_move``:

1. Copy (a worker thread, the log still serving): ``mirror`` copies every file of the source
   directory that the copy lacks or has at another size or modification time, except the
   active segment's; each copy is fsynced and given its source's mtime, so a later round (or
   a round after a restart) copies only what changed. Rounds repeat until little is left.
2. Switch (the event loop, so no append runs meanwhile): the source log is closed (flushed,
   producer snapshot written, indexes trimmed), a last ``mirror`` copies what remains
   (the active segment, small by then) and removes files the source no longer has, then
   ``commit``: write ``.move-complete`` and fsync: from here on the copy wins; rename the
   source aside (``-delete``, removed later); rename the copy to ``<topic>-<partition>``;
   fsync both parents; remove the marker.
3. The log is opened again from its new place (``LogManager``).

After a crash, ``recover`` (at start-up, before any log is loaded) finishes or undoes what
was in progress, per ``-future`` directory:

- with ``.move-complete``: the copy is whole and the source was closed when it was written,
  so the copy wins: a source still in place is renamed aside, the copy takes its name;
- without it, and the source still exists: the copy is partial; it is kept and the move
  resumes (``PendingMove``) from what it already has;
- without it and no source (the topic was deleted meanwhile): the copy is removed.

No step ever has a log with neither a whole source nor a whole copy, and a start-up never
loads two directories of one partition.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

FUTURE_SUFFIX: Final = "-future"
COMPLETE_MARKER: Final = ".move-complete"
DELETE_SUFFIX: Final = "-delete"
# Never copied: a retention's or a compaction's leftovers, temporary files, and the marker.
_TRANSIENT: Final = (".deleted", ".cleaned", ".tmp")
_CHUNK: Final = 1 << 20

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PendingMove:
    """A partial copy found at start-up whose source still exists: the move resumes."""

    topic_partition: TopicPartition
    future_dir: Path


def future_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def parse_future_dir_name(name: str) -> TopicPartition | None:
    """``orders-3.<hex>-future`` -> ``("orders", 3)``; None for anything else."""
    if not name.endswith(FUTURE_SUFFIX):
        return None
    stem, dot, _ = name[: -len(FUTURE_SUFFIX)].rpartition(".")
    topic, dash, partition = stem.rpartition("-")
    if not dot or not dash or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class Throttle:
    """At most ``bytes_per_second`` copied, measured since the throttle was made (Kafka's
    ``replica.alter.log.dirs.io.max.bytes.per.second``). Used on the copying thread."""

    def __init__(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self._start = time.monotonic()
        self._done = 0

    def __call__(self, nbytes: int) -> None:
        self._done += nbytes
        ahead = self._done / self.rate - (time.monotonic() - self._start)
        if ahead > 0:
            time.sleep(ahead)


def _copyable(name: str) -> bool:
    return name != COMPLETE_MARKER and not name.endswith(_TRANSIENT)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def stale_files(source: Path, copy: Path, skip: Iterable[str] = ()) -> list[tuple[str, int]]:
    """(name, size) of the source's files the copy lacks or holds at another size or
    mtime, leaving out ``skip`` (the active segment's files)."""
    skipped = set(skip)
    stale = []
    for entry in os.scandir(source):
        if not entry.is_file(follow_symlinks=False) or not _copyable(entry.name):
            continue
        if entry.name in skipped:
            continue
        try:
            have = os.stat(source / entry.name)
        except FileNotFoundError:
            continue  # deleted since the listing (retention)
        try:
            made = os.stat(copy / entry.name)
        except FileNotFoundError:
            stale.append((entry.name, have.st_size))
            continue
        if made.st_size != have.st_size or made.st_mtime_ns != have.st_mtime_ns:
            stale.append((entry.name, have.st_size))
    return stale


def copy_file(source: Path, target: Path, throttle: Callable[[int], None] | None = None) -> int:
    """Copy one file (``sendfile``, in chunks when throttled), fsync it, and give it the
    source's mtime; returns the bytes copied. A source deleted meanwhile copies nothing."""
    try:
        src = os.open(source, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        before = os.fstat(src)
        tmp = target.with_name(target.name + ".tmp")
        dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        copied = 0
        try:
            while copied < before.st_size:
                step = min(_CHUNK, before.st_size - copied)
                sent = os.sendfile(dst, src, copied, step)
                if sent == 0:
                    break  # the file shrank (a truncation): the next round copies it again
                copied += sent
                if throttle is not None:
                    throttle(sent)
            os.fsync(dst)
        finally:
            os.close(dst)
        os.utime(tmp, ns=(before.st_atime_ns, before.st_mtime_ns))
        os.replace(tmp, target)
        return copied
    finally:
        os.close(src)


def mirror(
    source: Path,
    copy: Path,
    *,
    skip: Iterable[str] = (),
    remove_extra: bool = False,
    throttle: Callable[[int], None] | None = None,
) -> int:
    """Bring ``copy`` up to ``source`` (see ``stale_files``); with ``remove_extra``, also
    remove the files the source no longer has. fsyncs the directory; returns bytes copied.

    Raises:
        OSError: ENOSPC and the like, from the copy (the caller abandons the move).
    """
    copy.mkdir(parents=True, exist_ok=True)
    total = 0
    for name, _size in stale_files(source, copy, skip):
        total += copy_file(source / name, copy / name, throttle)
    if remove_extra:
        present = {e.name for e in os.scandir(source)}
        for entry in os.scandir(copy):
            if entry.name != COMPLETE_MARKER and entry.name not in present:
                os.unlink(entry.path)
    _fsync_dir(copy)
    return total


def commit(source: Path, copy: Path) -> tuple[Path, Path]:
    """Make the whole copy the partition's directory (step 2 above); returns (its new path,
    the source's path aside, for removal)."""
    marker = copy / COMPLETE_MARKER
    with open(marker, "wb") as f:
        os.fsync(f.fileno())
    _fsync_dir(copy)
    aside = source.with_name(f"{source.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
    os.rename(source, aside)
    _fsync_dir(source.parent)
    final = copy.with_name(source.name)
    os.rename(copy, final)
    _fsync_dir(final.parent)
    (final / COMPLETE_MARKER).unlink()
    _fsync_dir(final)
    return final, aside


def recover(log_dirs: Iterable[Path]) -> list[PendingMove]:
    """Finish or undo the moves a crash interrupted (see the module docstring); the moves to
    resume. Runs before any log is loaded."""
    dirs = [Path(d) for d in log_dirs]
    pending: list[PendingMove] = []
    seen: set[TopicPartition] = set()
    for log_dir in dirs:
        if not log_dir.is_dir():
            continue
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            tp = parse_future_dir_name(entry.name)
            if tp is None or not entry.is_dir():
                continue
            future = Path(entry.path)
            name = f"{tp[0]}-{tp[1]}"
            sources = [d / name for d in dirs if (d / name).is_dir()]
            if (future / COMPLETE_MARKER).exists():
                for source in sources:
                    aside = source.with_name(f"{name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
                    os.rename(source, aside)
                    _fsync_dir(source.parent)
                final = future.with_name(name)
                os.rename(future, final)
                _fsync_dir(log_dir)
                (final / COMPLETE_MARKER).unlink()
                log.info("%s: finished its move to %s, which a stop interrupted", name, log_dir)
            elif sources and tp not in seen:
                seen.add(tp)
                pending.append(PendingMove(tp, future))
            else:
                shutil.rmtree(future, ignore_errors=True)
                log.info("%s: removed an unfinished copy in %s", name, log_dir)
    return pending


def is_disk_full(exc: OSError) -> bool:
    return exc.errno == errno.ENOSPC
