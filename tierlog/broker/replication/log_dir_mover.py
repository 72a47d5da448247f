"""Moves replicas between this broker's ``log.dirs`` while they keep serving: Kafka's
AlterReplicaLogDirs (KIP-113), which ``kafka-reassign-partitions`` uses for the ``log_dirs``
of its plan and ``kafka-log-dirs`` shows.

A move copies the partition's directory into the destination (``tierlog.local.log_dir_move``
owns the files and what a crash leaves) in rounds on a worker thread, one move at a time,
at most ``replica.alter.log.dirs.io.max.bytes.per.second``. Each round copies what changed
since the last, except the active segment; when the active segment grows past
``SWITCH_BYTES`` it is rolled, so it can be copied in the background too. Once a round
finds little left, the switch runs on the event loop (no append can interleave):
``LogManager.complete_move`` closes the log, copies the rest, switches directories and
opens the log again, and the partition serves from it (``ReplicaManager.replace_local_log``).

Kafka copies by fetching from the current log into a "future" log with a fetcher thread;
copying the files gives the same bytes (segments are immutable once closed) with one
``sendfile`` per file. While a copy exists, DescribeLogDirs lists it as the future replica
in its destination, with its offset lag (what the last finished round had not copied).

A move stops when its partition is no longer hosted here (deleted, reassigned away: the
copy is removed), when another AlterReplicaLogDirs names another dir (likewise), on a copy
error such as a full disk (likewise, logged), and when the broker stops (the copy is kept
and the move resumes at the next start, ``LogManager.pending_moves``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tierlog.local import log_dir_move
from tierlog.local.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from tierlog.protocol.errors import ErrorCode
from tierlog.records.txn_index_codec import TXN_INDEX_SUFFIX

if TYPE_CHECKING:
    from tierlog.broker.replication.partition import Partition
    from tierlog.broker.replication.replica_manager import ReplicaManager
    from tierlog.local.log import Log

__all__ = ["LogDirMover", "Move"]

log = logging.getLogger(__name__)

# A round copying no more than this (and an active segment no larger) ends in the switch;
# it bounds how long the switch holds the event loop (a few ms of copying and fsyncs).
SWITCH_BYTES: Final = 4 << 20
_NO_LIMIT: Final = 2**63 - 1


class _Stopped(Exception):
    """Raised on the copying thread when its move is stopped."""


@dataclass
class Move:
    """One partition's move: where to, its copy, and how far the copy is."""

    topic: str
    partition: int
    dest: Path
    future: Path
    # Offsets below this were copied by the last finished round (the future's log end).
    copied_end: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    keep_copy: bool = False
    task: asyncio.Task[None] | None = None

    @property
    def topic_partition(self) -> tuple[str, int]:
        return self.topic, self.partition


def _segment_files(log: Log) -> set[str]:
    """The active segment's file names: copied only at the switch."""
    stem = f"{log.active_segment.base_offset:020d}"
    return {
        stem + suffix for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
    }


def _dir_bytes(path: Path) -> int:
    try:
        return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
    except FileNotFoundError:
        return 0


class LogDirMover:
    """Args:
    replicas: the partitions hosted here and their log manager.
    bytes_per_second: ``replica.alter.log.dirs.io.max.bytes.per.second``.
    """

    def __init__(self, replicas: ReplicaManager, *, bytes_per_second: int = _NO_LIMIT) -> None:
        self.replicas = replicas
        self.log_manager = replicas.log_manager
        self.bytes_per_second = bytes_per_second
        self.moves: dict[tuple[str, int], Move] = {}
        self._copying = asyncio.Lock()  # one copy at a time: the rate bounds them all
        self.completed = 0

    def set_rate(self, bytes_per_second: int) -> None:
        """A new rate (a dynamic broker config, as ``kafka-reassign-partitions
        --replica-alter-log-dirs-throttle`` sets it), in force from the next copy round."""
        self.bytes_per_second = bytes_per_second

    # -- requests ----------------------------------------------------------------------------

    def alter(self, topic: str, index: int, destination: str) -> ErrorCode:
        """AlterReplicaLogDirs for one partition: Kafka's answers (LOG_DIR_NOT_FOUND for a
        path that is not one of the log dirs, REPLICA_NOT_AVAILABLE for a replica not
        created yet, which is then created in ``destination``)."""
        dest = self._log_dir(destination)
        if dest is None:
            return ErrorCode.log_dir_not_found
        tp = (topic, index)
        partition = self.replicas.partition(topic, index)
        if partition is None or not partition.hosted:
            self.log_manager.preferred_dirs[tp] = dest
            return ErrorCode.replica_not_available
        current = self.moves.get(tp)
        if current is not None:
            if current.dest == dest:
                return ErrorCode.none
            self._stop(current, keep_copy=False)
        if self.log_manager.log_dir_of(topic, index) == dest:
            return ErrorCode.none
        future = dest / log_dir_move.future_dir_name(topic, index)
        self._start(Move(topic, index, dest, future))
        return ErrorCode.none

    def resume(self, pending: list[log_dir_move.PendingMove]) -> None:
        """Go on with the moves a stop interrupted, from the copies they left."""
        for found in pending:
            topic, index = found.topic_partition
            partition = self.replicas.partition(topic, index)
            if partition is None or not partition.hosted:
                shutil.rmtree(found.future_dir, ignore_errors=True)
                continue
            log.info("%s-%d: resuming its move to %s", topic, index, found.future_dir.parent)
            self._start(Move(topic, index, found.future_dir.parent, found.future_dir))

    def future_replicas(self, log_dir: Path) -> list[tuple[str, int, int, int]]:
        """(topic, partition, bytes, offset lag) of the copies being made in ``log_dir``."""
        found = []
        for move in list(self.moves.values()):
            if move.dest != log_dir:
                continue
            partition = self.replicas.partition(move.topic, move.partition)
            if partition is None:
                continue
            lag = max(0, partition.local.log_end_offset - move.copied_end)
            found.append((move.topic, move.partition, _dir_bytes(move.future), lag))
        return found

    async def close(self) -> None:
        """Stop every move, keeping the copies so they resume at the next start."""
        moves = list(self.moves.values())
        for move in moves:
            self._stop(move, keep_copy=True)
        tasks = [m.task for m in moves if m.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- moves -------------------------------------------------------------------------------

    def _log_dir(self, destination: str) -> Path | None:
        try:
            wanted = Path(destination).resolve()
        except (OSError, ValueError):
            return None
        return wanted if wanted in self.log_manager.log_dirs else None

    def _start(self, move: Move) -> None:
        self.moves[move.topic_partition] = move
        move.task = asyncio.get_running_loop().create_task(
            self._run(move), name=f"move {move.topic}-{move.partition}"
        )

    def _stop(self, move: Move, *, keep_copy: bool) -> None:
        move.keep_copy = keep_copy
        move.stop.set()
        if self.moves.get(move.topic_partition) is move:
            del self.moves[move.topic_partition]

    def _current(self, move: Move) -> Partition | None:
        """The partition, while the move should go on."""
        partition = self.replicas.partition(move.topic, move.partition)
        if move.stop.is_set() or partition is None or not partition.hosted:
            return None
        if partition.local.closed:
            return None
        return partition

    async def _run(self, move: Move) -> None:
        name = f"{move.topic}-{move.partition}"
        try:
            while True:
                partition = self._current(move)
                if partition is None:
                    return
                source = partition.local
                if source.active_segment.size > SWITCH_BYTES:
                    source.roll()  # the full segment can then be copied in the background
                copied_up_to = source.active_segment.base_offset
                copied = await self._copy_round(move, source)
                partition = self._current(move)
                if partition is None:
                    return
                move.copied_end = copied_up_to
                if copied <= SWITCH_BYTES and partition.local.active_segment.size <= SWITCH_BYTES:
                    self._switch(move, partition)
                    log.info("%s: moved to %s", name, move.dest)
                    return
        except _Stopped:
            return
        except OSError as exc:
            log.error("%s: the move to %s failed and was abandoned: %s", name, move.dest, exc)
            move.keep_copy = False
        except Exception:
            log.exception("%s: the move to %s failed and was abandoned", name, move.dest)
            move.keep_copy = False
        finally:
            if self.moves.get(move.topic_partition) is move:
                del self.moves[move.topic_partition]
            if not move.keep_copy and move.future.exists():
                await asyncio.to_thread(shutil.rmtree, move.future, True)

    async def _copy_round(self, move: Move, source: Log) -> int:
        skip = _segment_files(source)
        rate = self.bytes_per_second
        throttle = log_dir_move.Throttle(rate) if 0 < rate < _NO_LIMIT else None

        def step(nbytes: int) -> None:
            if move.stop.is_set():
                raise _Stopped
            if throttle is not None:
                throttle(nbytes)

        async with self._copying:
            if move.stop.is_set():
                raise _Stopped
            return await asyncio.to_thread(
                log_dir_move.mirror, source.directory, move.future, skip=skip, throttle=step
            )

    def _switch(self, move: Move, partition: Partition) -> None:
        """On the event loop: nothing appends to the partition until it returns."""
        try:
            moved = self.log_manager.complete_move(move.topic, move.partition, move.future)
        except OSError:
            # The log was opened again where it was: serve from that one.
            reopened = self.log_manager.get_log(move.topic, move.partition)
            if reopened is not None:
                self.replicas.replace_local_log(partition, reopened)
            raise
        self.replicas.replace_local_log(partition, moved)
        move.keep_copy = True  # it is the log now
        self.completed += 1
