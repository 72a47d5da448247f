"""All partition logs of a broker across its ``log.dirs``: placement, start-up recovery,
checkpoints and the background flush and retention tasks.

Files it owns in each log dir (Kafka's names and formats):

    .lock                               flock held while the broker runs
    .kafka_cleanshutdown                written last at clean shutdown, removed at start-up
    recovery-point-offset-checkpoint    offsets up to which each log is known flushed
    log-start-offset-checkpoint         each log's start offset (DeleteRecords, retention)
    <topic>-<partition>/                one ``Log`` each, with its ``partition.metadata``
    <topic>-<partition>.<id>-delete/    a deleted log waiting to be removed
    <topic>-<partition>.<id>-future/    a log being moved here from another log dir
                                        (``log_dir_move``: AlterReplicaLogDirs)
    <topic>-<partition>.<id>-stray/     a stray kept aside for the operator (``set_aside``)

The names set aside are Kafka's (``LocalLog.logDirNameWithSuffixCappedLength``): the topic
name is cut so the whole name fits the file system's 255 bytes. A 214-character topic made
``<topic>-0.<32 hex>-delete`` too long, the rename failed and the deleted log stayed to be
served again by the next topic of that name (issue 20, item 4).

Deletion is total (issue 20, item 5): a log directory is renamed aside before anything else
(atomic), and one that is not the current topic's data (``partition.metadata`` names another
topic id, or its topic is gone from the metadata after a crash in the middle of a deletion)
is a stray, set aside by ``set_aside`` as soon as it is found and never served.

Single-threaded by contract (see ``tierlog.local.log``): the scheduler it is given must run
tasks on the caller's thread.

Size: ~620 lines, just past the ~600 guideline, because start-up (locks, checkpoints, loading
every log under the open-file budget) and removal (deletion and setting strays aside, with
the capped names above) both work on the same map of logs and its checkpoints. Already
elsewhere: moving a log between dirs (``log_dir_move``), the descriptor budget
(``open_files``), the checkpoint format (``checkpoint``); start-up would move out next.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from tierlog.local import log_dir_move, partition_metadata
from tierlog.local.checkpoint import CorruptCheckpointError, read_offsets, write_offsets
from tierlog.local.config import LogConfig
from tierlog.local.dir_remover import remove_now
from tierlog.local.errors import DiskFullError
from tierlog.local.log import Log
from tierlog.local.open_files import FDS_PER_PARTITION, PROCESS_FILES, OpenFiles, fd_limit
from tierlog.local.segment import LogSegment
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.scheduler import Scheduler

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
# Written by the log cleaner (tierlog.compaction.cleaner, Kafka's name); read here only to
# tell a loading log how far compaction has been (its gaps are normal below that).
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
# The longest file name ext4, xfs, btrfs and tmpfs take (NAME_MAX), in bytes; topic names
# are ASCII, so characters.
MAX_FILE_NAME = 255

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class LogManagerTimings:
    """Intervals of the background tasks. Kafka's defaults, except flush checks: Kafka's
    ``log.flush.scheduler.interval.ms`` defaults to never, which leaves a topic's flush.ms
    without effect; here it is checked every second so flush.ms does what it says."""

    flush_check_interval_ms: int = 1_000
    retention_check_interval_ms: int = 300_000
    checkpoint_interval_ms: int = 60_000
    # Kafka's producer.id.expiration.check.interval.ms.
    producer_expiration_check_interval_ms: int = 600_000
    # Kafka's producer.id.expiration.ms (KIP-854): idle idempotent producers are forgotten.
    producer_id_expiration_ms: int = 86_400_000


def aside_dir_name(topic: str, partition: int, suffix: str) -> str:
    """``<topic>-<partition>.<32 hex>-delete`` (or ``-stray``), the topic cut short enough
    for the whole name to fit ``MAX_FILE_NAME`` (Kafka's
    ``logDirNameWithSuffixCappedLength``; a 249-character topic keeps 201 of them)."""
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: MAX_FILE_NAME - len(tail)] + tail


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``orders-3`` -> ``("orders", 3)``; None for anything else."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogDirInUseError(Exception):
    """Another process holds this log dir's lock."""


class LogManager:
    """Creates, loads, checkpoints and deletes the logs under ``log_dirs``.

    Args:
        log_dirs: one or more directories (Kafka's ``log.dirs``).
        default_config: configuration for logs without topic overrides.
        clock, scheduler: injected so tests control time.
        timings: background task intervals.
        remove_dir: removes a deleted partition's renamed-aside directory; the broker
            passes a ``DirRemover``'s ``submit`` so the event loop does not wait for the
            unlinks (default: at once, ``dir_remover.remove_now``).
        verify_reads: every log CRC-checks bytes before it first serves them
            (``log.read.verify.enable``, ``Log``).
        open_files: the budget of segments kept open at once (``open_files``; the
            process's by default).
    """

    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig | None = None,
        *,
        clock: Clock | None = None,
        scheduler: Scheduler | None = None,
        timings: LogManagerTimings | None = None,
        remove_dir: Callable[[Path], None] = remove_now,
        verify_reads: bool = True,
        open_files: OpenFiles = PROCESS_FILES,
        committed_offset: Callable[[TopicPartition], int | None] | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.clock = clock or SystemClock()
        self.scheduler = scheduler
        self.timings = timings or LogManagerTimings()
        self.remove_dir = remove_dir
        self.verify_reads = verify_reads
        self.open_files = open_files
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        # Each log's topic id from its partition.metadata, read once when first asked.
        self._topic_ids: dict[TopicPartition, uuid.UUID | None] = {}
        self._locks: list[int] = []
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.started = False
        # Retention passes begun (the metrics' tierlog_log_retention_passes).
        self.retention_passes = 0
        # The offset below which a log's records are committed (its partition's high
        # watermark, owned by the replication state: the broker's partition map).
        # Retention deletes only segments wholly below it (Kafka's
        # UnifiedLog.deletableSegments), so a record no follower has yet is never deleted.
        # None = no limit (tools, tests).
        self.committed_offset = committed_offset
        # Moves between log dirs that a stop interrupted, found at start-up (to resume),
        # and the dirs AlterReplicaLogDirs named for partitions not created yet.
        self.pending_moves: list[log_dir_move.PendingMove] = []
        self.preferred_dirs: dict[TopicPartition, Path] = {}

    # -- start-up ------------------------------------------------------------------------

    def startup(self, topic_configs: dict[str, LogConfig] | None = None) -> None:
        """Lock the dirs, load every log (recovering those of an unclean stop from their
        recovery point), and schedule the background tasks."""
        topic_configs = topic_configs or {}
        try:
            self._load_all(topic_configs)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            where = exc.filename or ", ".join(str(d) for d in self.log_dirs)
            raise DiskFullError(
                f"cannot start: no space left on device ({where}); free space on "
                "that disk (the logs themselves are intact) and start the broker again"
            ) from exc
        if self.scheduler is not None:
            t = self.timings
            self.scheduler.schedule(
                "log-flush", self.flush_due, t.flush_check_interval_ms, t.flush_check_interval_ms
            )
            self.scheduler.schedule(
                "log-retention",
                self.retention_pass,
                t.retention_check_interval_ms,
                t.retention_check_interval_ms,
            )
            self.scheduler.schedule(
                "log-checkpoint",
                self.checkpoint,
                t.checkpoint_interval_ms,
                t.checkpoint_interval_ms,
            )
            self.scheduler.schedule(
                "producer-expiration",
                self.expire_producers,
                t.producer_expiration_check_interval_ms,
                t.producer_expiration_check_interval_ms,
            )
        self.started = True

    def _load_all(self, topic_configs: dict[str, LogConfig]) -> None:
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._lock(log_dir)
        # Before any log loads: a move between log dirs that a crash interrupted is
        # finished or undone, so no partition is found in two dirs.
        self.pending_moves = log_dir_move.recover(self.log_dirs)
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            self.had_clean_shutdown[log_dir] = clean
            # Removed before loading, as Kafka does since KAFKA-10471: loading changes files
            # (the active segment's indexes are preallocated again), so a crash while
            # loading must make the next start recover instead of trusting them.
            marker.unlink(missing_ok=True)
            recovery_points = self._read_offsets(log_dir / RECOVERY_POINT_FILE)
            start_offsets = self._read_offsets(log_dir / LOG_START_FILE)
            cleaned = self._read_offsets(log_dir / CLEANER_OFFSET_FILE)
            for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
                if not entry.is_dir():
                    continue
                if entry.name.endswith(DELETE_SUFFIX):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                tp = parse_log_dir_name(entry.name)
                if tp is None:
                    continue
                if tp in self.logs:
                    raise RuntimeError(f"{tp} is in two log dirs: {self._dir_of[tp]}, {log_dir}")
                self.logs[tp] = Log(
                    Path(entry.path),
                    topic_configs.get(tp[0], self.default_config),
                    clock=self.clock,
                    scheduler=self.scheduler,
                    # Without a checkpoint entry, recover the whole log: safe, not fast.
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                    had_clean_shutdown=clean,
                    producer_id_expiration_ms=self.timings.producer_id_expiration_ms,
                    verify_reads=self.verify_reads,
                    open_files=self.open_files,
                    cleaned_up_to=cleaned.get(tp),
                )
                self._dir_of[tp] = log_dir
        self.checkpoint()
        self._report_open_files()

    def _report_open_files(self) -> None:
        """Say what the partitions on disk need in file descriptors, and what happens
        when that is more than the process has (issue 20, item 8)."""
        budget = self.open_files
        segments = sum(len(lg.segments) for lg in self.logs.values())
        # DEBUG: a start prints nothing before its listener is up unless something is
        # wrong (a start that then fails, e.g. on a port in use, stays one line).
        log.debug(
            "%d partitions, %d segments on disk; %d segment files open, at most %d at once "
            "(from the file descriptor limit, ulimit -n %d)",
            len(self.logs),
            segments,
            len(budget),
            budget.limit,
            fd_limit(),
        )
        if len(self.logs) * FDS_PER_PARTITION > budget.limit:
            log.warning(
                "%d partitions on disk need %d file descriptors to keep their active "
                "segments open, more than the %d this broker keeps for segments (ulimit -n "
                "%d, less what connections need): segments are opened on first use and the "
                "least recently used idle ones closed again, so every partition is served, "
                "an idle one at the cost of an open() when it is used again; raise the limit "
                "(ulimit -n, LimitNOFILE= in systemd) to keep them open",
                len(self.logs),
                len(self.logs) * FDS_PER_PARTITION,
                budget.limit,
                fd_limit(),
            )

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirInUseError(f"{log_dir} is in use by another process") from None
        self._locks.append(fd)

    @staticmethod
    def _read_offsets(path: Path) -> dict[TopicPartition, int]:
        try:
            return read_offsets(path)
        except CorruptCheckpointError as exc:
            # Losing a checkpoint costs a longer recovery, never data.
            log.warning("%s; recovering affected logs in full", exc)
            return {}

    # -- logs ----------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> Log:
        """The log of ``topic``-``partition``, created in the log dir holding the fewest
        partitions (Kafka's placement rule) when it does not exist.

        ``topic_id``: the topic's id in the metadata. A log holding another topic id is
        set aside as a stray (``set_aside``) and a new one created; a log with no id yet
        (made before ``partition.metadata`` existed) is adopted; a new log gets the id
        written before it takes any record."""
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is not None:
            if topic_id is None:
                return existing
            found = self.topic_id_of(topic, partition)
            if found is None:
                partition_metadata.write(existing.directory, topic_id)
                self._topic_ids[tp] = topic_id
                return existing
            if found == topic_id:
                return existing
            self.set_aside(
                topic,
                partition,
                f"it holds topic id {partition_metadata.encode_topic_id(found)}, the topic "
                f"{topic!r} now has id {partition_metadata.encode_topic_id(topic_id)} (an "
                "earlier topic of that name was deleted)",
            )
        validate_topic_name(topic)
        if partition < 0:
            # "t--1" would load back as topic "t-", partition 1.
            raise ValueError(f"partition must be >= 0, got {partition}")
        for log_dir in self.log_dirs:
            # Not loaded, yet on disk: what a deletion whose rename failed left behind.
            # Loading it as the new log would serve the deleted records.
            leftover = log_dir / f"{topic}-{partition}"
            if leftover.exists():
                self._set_aside_dir(
                    leftover, topic, partition, "it was left behind by a deletion", keep=False
                )
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        log_dir = min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))
        preferred = self.preferred_dirs.pop(tp, None)
        if preferred in counts:  # AlterReplicaLogDirs named it before the replica existed
            log_dir = preferred
        try:
            created = Log(
                log_dir / f"{topic}-{partition}",
                config or self.default_config,
                clock=self.clock,
                scheduler=self.scheduler,
                had_clean_shutdown=True,
                producer_id_expiration_ms=self.timings.producer_id_expiration_ms,
                verify_reads=self.verify_reads,
                open_files=self.open_files,
            )
        except OSError:
            # Half made (a full disk): nothing is in it yet, and a retry starts clean.
            remove_now(log_dir / f"{topic}-{partition}")
            raise
        if topic_id is not None:
            try:
                partition_metadata.write(created.directory, topic_id)
            except OSError:
                # Not served without its id: a later topic of this name could adopt it.
                self._release(created)
                remove_now(created.directory)
                raise
        self.logs[tp] = created
        self._dir_of[tp] = log_dir
        self._topic_ids[tp] = topic_id
        return created

    def topic_id_of(self, topic: str, partition: int) -> uuid.UUID | None:
        """The topic id in the log's ``partition.metadata`` (None: none written yet)."""
        tp = (topic, partition)
        if tp not in self._topic_ids:
            found = self.logs.get(tp)
            self._topic_ids[tp] = (
                None if found is None else partition_metadata.read(found.directory)
            )
        return self._topic_ids[tp]

    def log_dir_of(self, topic: str, partition: int) -> Path:
        return self._dir_of[(topic, partition)]

    def complete_move(self, topic: str, partition: int, future: Path) -> Log:
        """Finish moving a log to the log dir holding ``future``, its copy made so far
        (``log_dir_move``): close the log, copy the rest, switch directories, open the log
        from its new place. Runs on the log's thread, so nothing appends meanwhile; what is
        left to copy must be small (the mover sees to it).

        Raises:
            OSError: the last copy failed (ENOSPC...): the log is opened again where it was,
                and the copy is left for the caller to remove.
        """
        tp = (topic, partition)
        source = self.logs[tp]
        source.close()
        try:
            log_dir_move.mirror(source.directory, future, remove_extra=True)
            final, aside = log_dir_move.commit(source.directory, future)
        except OSError:
            self.logs[tp] = self._reopen(source.directory, source)
            raise
        moved = self._reopen(final, source)
        self.logs[tp] = moved
        self._dir_of[tp] = future.parent
        self.remove_dir(aside)
        self.checkpoint()
        return moved

    def _reopen(self, directory: Path, closed: Log) -> Log:
        """``closed`` (flushed and closed cleanly) opened again at ``directory``."""
        return Log(
            directory,
            closed.config,
            clock=self.clock,
            scheduler=self.scheduler,
            recovery_point=closed.recovery_point,
            log_start_offset=closed.log_start_offset,
            had_clean_shutdown=True,
            producer_id_expiration_ms=self.timings.producer_id_expiration_ms,
        )

    def update_config(self, topic: str, config: LogConfig) -> None:
        """New topic configuration (AlterConfigs) for every partition of ``topic``."""
        for (t, _), topic_log in self.logs.items():
            if t == topic:
                topic_log.config = config

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename the partition dir aside, then remove it (Kafka's async delete: a rename
        is atomic, so a crash never leaves a half-deleted log that loads).

        Raises:
            OSError: the rename failed (a read-only or failing disk). The log is not
                served any more either way; its directory is set aside as a stray when
                the topic's name is used again, or at the next start.
        """
        tp = (topic, partition)
        doomed = self.logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None)
        self._topic_ids.pop(tp, None)
        if doomed is None or log_dir is None:
            return
        aside = log_dir / aside_dir_name(topic, partition, DELETE_SUFFIX)
        try:
            os.rename(doomed.directory, aside)
        finally:
            self._release(doomed)
        self.remove_dir(aside)
        try:
            self.checkpoint()
        except OSError as exc:
            # The log is gone either way; the stale entry names a log that no longer exists
            # and the next periodic checkpoint drops it.
            log.warning("%s-%d deleted, but the checkpoints were not updated: %s", *tp, exc)

    def set_aside(self, topic: str, partition: int, reason: str, *, keep: bool = False) -> None:
        """Stop serving a stray log and move its directory aside, with a WARNING naming it
        and ``reason``: removed like a deleted log, or, with ``keep``, renamed
        ``<topic>-<partition>.<id>-stray`` and left for the operator (the broker's
        metadata may be the thing that was lost)."""
        tp = (topic, partition)
        stray = self.logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        self._topic_ids.pop(tp, None)
        if stray is None:
            return
        try:
            self._set_aside_dir(stray.directory, topic, partition, reason, keep=keep)
        except OSError:
            if not keep:  # removing it was the point: its files go where they are
                self._release(stray)
            raise
        # After the rename: the files' old paths are gone, so nothing is unlinked.
        self._release(stray)
        try:
            self.checkpoint()
        except OSError as exc:
            log.warning("%s-%d set aside, but the checkpoints were not updated: %s", *tp, exc)

    def _set_aside_dir(
        self, directory: Path, topic: str, partition: int, reason: str, *, keep: bool
    ) -> None:
        aside = directory.parent / aside_dir_name(
            topic, partition, STRAY_SUFFIX if keep else DELETE_SUFFIX
        )
        os.rename(directory, aside)
        if keep:
            log.warning(
                "stray log %s: %s; never served, kept as %s: remove it once you know it is "
                "not needed",
                directory,
                reason,
                aside.name,
            )
        else:
            log.warning("stray log %s: %s; never served, removing it", directory, reason)
            self.remove_dir(aside)

    @staticmethod
    def _release(doomed: Log) -> None:
        """Release a log's files without a clean close: ``close`` writes (a last
        time-index entry into the mapped, sparse index, an index trim, a producer
        snapshot), and on a full disk that write is an ENOSPC or, through the map, a SIGBUS
        that kills the broker (issue 10, item 8). Nothing of a deleted log needs saving.
        ``delete`` unlinks paths that are gone already (renamed); it only drops maps and
        fds."""
        for segment in doomed.segments:
            segment.delete()
        doomed.closed = True

    # -- background tasks ----------------------------------------------------------------

    def flush_due(self) -> None:
        for topic_log in list(self.logs.values()):
            topic_log.flush_if_due()

    def set_producer_id_expiration_ms(self, expiration_ms: int) -> None:
        """A new ``producer.id.expiration.ms`` at runtime (KIP-226, Kafka's
        ``DynamicProducerStateManagerConfig``): every partition's next expiry check, and
        every log opened from now on, uses it."""
        self.timings = replace(self.timings, producer_id_expiration_ms=expiration_ms)
        for topic_log in self.logs.values():
            topic_log.producer_state.producer_id_expiration_ms = expiration_ms

    def expire_producers(self) -> int:
        """Forget idempotent producers idle longer than producer.id.expiration.ms."""
        return sum(lg.producer_state.remove_expired_producers() for lg in self.logs.values())

    def retention_pass(self) -> int:
        self.retention_passes += 1
        deleted = 0
        for tp, topic_log in list(self.logs.items()):
            limit = self.committed_offset(tp) if self.committed_offset is not None else None
            deleted += topic_log.delete_old_segments(None if limit is None else _below(limit))
        if deleted:
            self.checkpoint()
        return deleted

    def checkpoint(self) -> None:
        """Write each dir's recovery-point and log-start-offset checkpoints."""
        for log_dir in self.log_dirs:
            mine = {tp: lg for tp, lg in self.logs.items() if self._dir_of[tp] == log_dir}
            write_offsets(
                log_dir / RECOVERY_POINT_FILE, {tp: lg.recovery_point for tp, lg in mine.items()}
            )
            write_offsets(
                log_dir / LOG_START_FILE, {tp: lg.log_start_offset for tp, lg in mine.items()}
            )

    # -- shutdown ------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Clean stop: flush and close every log, checkpoint, then mark each dir clean."""
        if self.scheduler is not None:
            self.scheduler.cancel_all()
        for topic_log in self.logs.values():
            topic_log.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            (log_dir / CLEAN_SHUTDOWN_FILE).touch()
            fd = os.open(log_dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()
        self.started = False


def _below(limit: int) -> Callable[[LogSegment], bool]:
    return lambda segment: segment.next_offset <= limit


_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_NAME_LENGTH = 249


def validate_topic_name(topic: str) -> None:
    """Kafka's topic name rules (``Topic.validate``): ASCII letters, digits, '.', '_', '-',
    at most 249 characters, not '.' or '..'.

    Raises:
        ValueError: naming the rule broken.
    """
    if not topic or topic in (".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError(f"topic name longer than {MAX_TOPIC_NAME_LENGTH} characters")
    bad = set(topic) - _LEGAL_TOPIC_CHARS
    if bad:
        raise ValueError(f"topic {topic!r} has illegal characters {''.join(sorted(bad))!r}")


def colliding_topics(topic: str, existing: Iterable[str]) -> list[str]:
    """The names in ``existing``, other than ``topic``, that equal it once every '.' is
    read as '_' (Kafka's ``Topic.hasCollision``), sorted.

    Metric names replace '.' with '_', so ``orders.eu`` and ``orders_eu`` would report
    under one name; Kafka refuses to create the second (INVALID_TOPIC_EXCEPTION, in
    CreateTopics and in Metadata auto-creation alike). A name with neither character
    collides with nothing, and costs no look at ``existing``.
    """
    if "." not in topic and "_" not in topic:
        return []
    key = topic.replace(".", "_")
    return sorted(name for name in existing if name != topic and name.replace(".", "_") == key)
