"""The log cleaner of a broker: picks the dirtiest compacted log, cleans it off the event
loop, swaps the result in, and remembers where each log's dirty part starts.

Kafka's ``LogCleaner`` + ``LogCleanerManager`` (seeds 003/004), in two halves:

* On the event loop (the logs' thread): choosing a log (``cleanable.py``: the highest
  dirty ratio above ``min.cleanable.dirty.ratio``, or one a time rule forces), describing
  the pass as a ``CleanJob`` (plain data: paths, offsets, the rules), and applying the
  result: each cleaned group is swapped in (``tierlog.local.segment_swap``) after
  checking that its segments are still the ones read, then the first dirty offset moves
  to where the pass's offset map ended and is checkpointed.
* In worker processes (``log.cleaner.threads`` of them): the pass itself
  (``segment_cleaner.clean``), which reads and writes files only. A process, not a thread:
  walking records is Python work that holds the GIL, and the broker must keep serving
  while it runs. ``log.cleaner.dedupe.buffer.size`` is split over the workers, each
  allocating its offset map once per pass; ``log.cleaner.io.max.bytes.per.second`` is split
  likewise.

``cleaner-offset-checkpoint`` in each log dir (Kafka's file and format: "topic partition
offset") keeps every log's first dirty offset across restarts; a log without an entry is
dirty from its start.

Logs of topics with ``remote.storage.enable=true`` are not cleaned locally: their closed
segments are the remote log manager's to upload, and a swap under an upload would race it.
Their remote segments are cleaned instead (``remote_cleaner.py``), with passes this
cleaner's workers run (``run_blocking``). A log whose first dirty segment does not fit the
offset map is reported once and skipped (``uncleanable``) until the broker restarts, while
the others go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierlog.compaction.cleanable import Cleanable, cleanable_part
from tierlog.compaction.offset_map import DEFAULT_LOAD_FACTOR, OffsetMapFullError
from tierlog.compaction.segment_cleaner import (
    CleanJob,
    CleanResult,
    SegmentFile,
    clean,
    remove_cleaned,
)
from tierlog.local.checkpoint import CorruptCheckpointError, read_offsets, write_offsets
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.log import Log
from tierlog.local.log_manager import LogManager
from tierlog.local.segment_swap import StaleSwapError
from tierlog.records.errors import RecordsError
from tierlog.util.clock import Clock, SystemClock

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
TopicPartition = tuple[str, int]


class CleanerStoppedError(Exception):
    """A pass waited for was cut short by the cleaner's stop."""


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings (Kafka's names and defaults)."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 << 20
    io_max_bytes_per_second: float = 0.0  # 0 = unthrottled (Kafka: Double.MAX_VALUE)
    backoff_ms: int = 15_000
    load_factor: float = DEFAULT_LOAD_FACTOR


@dataclass(slots=True)
class LastClean:
    """What the latest pass over one log did, for ``topics describe`` and metrics."""

    time_ms: int
    dirty_ratio: float
    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    seconds: float


@dataclass(slots=True)
class CleanerStats:
    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    stale_swaps: int = 0
    failures: int = 0
    last_pass_seconds: float = 0.0
    last_pass_end_ms: int = 0
    last_bytes_read: int = 0
    last_bytes_written: int = 0


@dataclass(slots=True)
class _State:
    """The cleaner's memory of one log."""

    first_dirty: int = 0
    next_delete_horizon_ms: int = -1
    last: LastClean | None = None
    # The Log the state is about: a topic deleted and created again is a new log whose
    # offsets start over, and none of the old state applies to it.
    log: Log | None = None


@dataclass(slots=True)
class CleanerState:
    """Per-log state, shared by the loop-side code and the service."""

    logs: dict[TopicPartition, _State] = field(default_factory=dict)
    in_progress: set[TopicPartition] = field(default_factory=set)
    uncleanable: dict[TopicPartition, str] = field(default_factory=dict)


class LogCleaner:
    """The cleaner for the logs of one ``LogManager``.

    Args:
        log_manager: whose logs are cleaned; its ``committed_offset`` (the high watermark)
            bounds the cleanable part.
        config: ``log.cleaner.*``.
        clock: wall time for the lag rules and delete horizons.
        workers: processes for the passes; 0 runs them in this process (tests, tools).
    """

    def __init__(
        self,
        log_manager: LogManager,
        config: CleanerConfig | None = None,
        *,
        clock: Clock | None = None,
        workers: int | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.config = config or CleanerConfig()
        self.clock = clock or SystemClock()
        self.workers = self.config.threads if workers is None else workers
        self.state = CleanerState()
        self.stats = CleanerStats()
        self._pool: Any = None
        self._pool_lock = threading.Lock()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        # Pools replaced by a new thread count: they take no new pass; stop() ends them.
        self._retired_pools: list[Any] = []
        self._load_checkpoints()

    # -- checkpoints ---------------------------------------------------------------------

    def _load_checkpoints(self) -> None:
        for log_dir in self.log_manager.log_dirs:
            path = Path(log_dir) / CHECKPOINT_FILE
            try:
                offsets = read_offsets(path)
            except CorruptCheckpointError as exc:
                log.warning("%s; every compacted log there is dirty from its start", exc)
                offsets = {}
            for tp, offset in offsets.items():
                self._state(tp).first_dirty = offset

    def _state(self, tp: TopicPartition) -> _State:
        found = self.state.logs.get(tp)
        if found is None:
            found = self.state.logs[tp] = _State()
        return found

    def checkpoint(self) -> None:
        """Write each log dir's ``cleaner-offset-checkpoint`` (logs that still exist)."""
        manager = self.log_manager
        for log_dir in manager.log_dirs:
            entries = {
                tp: state.first_dirty
                for tp, state in self.state.logs.items()
                if tp in manager.logs and manager.log_dir_of(*tp) == log_dir
            }
            write_offsets(Path(log_dir) / CHECKPOINT_FILE, entries)

    # -- choosing ------------------------------------------------------------------------

    def cleanable(self, tp: TopicPartition, topic_log: Log) -> Cleanable:
        manager = self.log_manager
        committed = manager.committed_offset(tp) if manager.committed_offset else None
        state = self._state(tp)
        if state.log is not topic_log:
            if state.log is not None:  # recreated: start over (checkpointed state is kept)
                self.state.logs[tp] = state = _State()
            state.log = topic_log
        return cleanable_part(
            topic_log,
            state.first_dirty,
            committed=committed,
            now_ms=self.clock.milliseconds(),
            next_delete_horizon_ms=state.next_delete_horizon_ms,
        )

    def candidates(self) -> list[tuple[TopicPartition, Cleanable]]:
        """Every compacted log the cleaner may take now, with its cleanable part."""
        out = []
        for tp, topic_log in list(self.log_manager.logs.items()):
            config = topic_log.config
            if (
                not config.compact
                or config.remote_storage_enable
                or topic_log.closed
                or tp in self.state.in_progress
                or tp in self.state.uncleanable
            ):
                continue
            out.append((tp, self.cleanable(tp, topic_log)))
        return out

    def choose(self) -> tuple[TopicPartition, Cleanable] | None:
        """The dirtiest log that is due (Kafka's grabFilthiestCompactedLog), marked in
        progress; None when no log is due."""
        candidates = self.candidates()
        due = [(tp, c) for tp, c in candidates if c.due]
        if not due:
            return None
        tp, part = max(due, key=lambda item: (item[1].must_clean, item[1].dirty_ratio))
        self.state.in_progress.add(tp)
        return tp, part

    def job_for(self, tp: TopicPartition, part: Cleanable) -> CleanJob:
        topic_log = part.log
        config = topic_log.config
        share = max(1, self.workers)
        producers = topic_log.producer_state.producers
        return CleanJob(
            name=f"{tp[0]}-{tp[1]}",
            segments=tuple(
                SegmentFile(s.base_offset, str(s.path), s.size, end)
                for s, end in zip(part.segments, part.ends, strict=True)
            ),
            log_start_offset=topic_log.log_start_offset,
            first_dirty_offset=part.first_dirty_offset,
            now_ms=self.clock.milliseconds(),
            delete_retention_ms=config.delete_retention_ms,
            segment_bytes=config.segment_bytes,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            map_memory_bytes=self.config.dedupe_buffer_size // share,
            map_load_factor=self.config.load_factor,
            io_bytes_per_second=self.config.io_max_bytes_per_second / share,
            producer_last_offsets={
                pid: entry.last_offset for pid, entry in producers.items() if entry.batches
            },
            producer_epochs={
                pid: entry.producer_epoch for pid, entry in producers.items() if not entry.batches
            },
            hash_seed=(secrets.randbits(64), secrets.randbits(64)),
            aborted_transactions=tuple(
                topic_log.collect_aborted_transactions(
                    part.segments[0].base_offset, part.first_uncleanable_offset
                )
                if part.segments
                else ()
            ),
        )

    def describe(self) -> dict[TopicPartition, dict[str, object]]:
        """Every compacted log's cleaning state, for tools and metrics: its dirty ratio
        now, the first dirty offset, the latest pass (or None) and why it is not cleaned
        (or None)."""
        out: dict[TopicPartition, dict[str, object]] = {}
        for tp, topic_log in list(self.log_manager.logs.items()):
            if not topic_log.config.compact or topic_log.closed:
                continue
            part = self.cleanable(tp, topic_log)
            last = self._state(tp).last
            out[tp] = {
                "dirty_ratio": round(part.dirty_ratio, 4),
                "first_dirty_offset": part.first_dirty_offset,
                "cleaning": tp in self.state.in_progress,
                "uncleanable": self.state.uncleanable.get(tp),
                "remote_storage": topic_log.config.remote_storage_enable,
                "last_clean": None
                if last is None
                else {
                    "time_ms": last.time_ms,
                    "dirty_ratio": round(last.dirty_ratio, 4),
                    "bytes_read": last.bytes_read,
                    "bytes_written": last.bytes_written,
                    "records_read": last.records_read,
                    "records_kept": last.records_kept,
                    "seconds": round(last.seconds, 3),
                },
            }
        return out

    # -- applying ------------------------------------------------------------------------

    def apply(self, tp: TopicPartition, part: Cleanable, result: CleanResult) -> int:
        """Swap the cleaned groups in and move the first dirty offset. Returns the
        number of groups swapped. Runs on the logs' thread."""
        topic_log = part.log
        by_base = {s.base_offset: s for s in part.segments}
        swapped = 0
        pending = list(result.groups)
        try:
            while pending:
                group = pending.pop(0)
                if topic_log.closed or self.log_manager.logs.get(tp) is not topic_log:
                    raise StaleSwapError(f"{tp[0]}-{tp[1]}: the log closed while it was cleaned")
                replaced = [by_base[s.base_offset] for s in group.replaced]
                topic_log.replace_segments(replaced, [s.size for s in group.replaced])
                swapped += 1
        except StaleSwapError as exc:
            self.stats.stale_swaps += 1
            log.info("%s; the pass's other results are discarded", exc)
            for group in pending:
                remove_cleaned(group.log_path)
            return swapped
        state = self._state(tp)
        state.first_dirty = result.map_end_offset
        state.next_delete_horizon_ms = result.next_delete_horizon_ms
        s = result.stats
        state.last = LastClean(
            self.clock.milliseconds(),
            part.dirty_ratio,
            s.bytes_read,
            s.bytes_written,
            s.records_read,
            s.records_kept,
            s.map_seconds + s.clean_seconds,
        )
        self.stats.passes += 1
        self.stats.bytes_read += s.bytes_read
        self.stats.bytes_written += s.bytes_written
        self.stats.records_removed += s.records_read - s.records_kept
        self.stats.last_pass_seconds = s.map_seconds + s.clean_seconds
        self.stats.last_pass_end_ms = self.clock.milliseconds()
        self.stats.last_bytes_read = s.bytes_read
        self.stats.last_bytes_written = s.bytes_written
        seconds = s.map_seconds + s.clean_seconds
        log.info(
            "%s-%d cleaned: offsets %d-%d, %.1f MB dirty of %.1f MB in %.2f s "
            "(%.1f MB/s of dirty log; map %.2f s, clean %.2f s), %d groups, %.1f MB written, "
            "%d of %d records kept, %d tombstones removed, offset map %d keys (%.1f B/key), "
            "%d aborted records and %d markers removed",
            *tp,
            topic_log.log_start_offset,
            result.map_end_offset - 1,
            part.dirty_bytes / 1e6,
            (part.dirty_bytes + part.clean_bytes) / 1e6,
            seconds,
            part.dirty_bytes / 1e6 / seconds if seconds > 0 else 0.0,
            s.map_seconds,
            s.clean_seconds,
            swapped,
            s.bytes_written / 1e6,
            s.records_kept,
            s.records_read,
            s.tombstones_removed,
            s.map_keys,
            s.map_bytes_per_key,
            s.aborted_removed,
            s.markers_removed,
        )
        self.checkpoint()
        return swapped

    def _failed(self, tp: TopicPartition, exc: BaseException) -> None:
        self.stats.failures += 1
        if isinstance(exc, OffsetMapFullError):
            self.state.uncleanable[tp] = str(exc)
            log.error("%s; this log is not cleaned until the broker restarts", exc)
        elif isinstance(exc, RecordsError | CorruptSegmentError):
            self.state.uncleanable[tp] = str(exc)
            log.error("%s-%d not cleaned: %s (the scrubber reports the damage)", *tp, exc)
        else:
            log.exception("%s-%d: cleaning failed; it is tried again later", *tp)

    # -- running -------------------------------------------------------------------------

    def clean_once(self) -> bool:
        """Choose a log and clean it here, synchronously (tests, tools). Returns whether
        a log was cleaned."""
        chosen = self.choose()
        if chosen is None:
            return False
        tp, part = chosen
        try:
            result = clean(self.job_for(tp, part))
            self.apply(tp, part, result)
            return True
        except Exception as exc:
            self._failed(tp, exc)
            return False
        finally:
            self.state.in_progress.discard(tp)

    def start(self) -> None:
        """Start ``log.cleaner.threads`` cleaning tasks on the running loop (the worker
        processes start with the first pass: most brokers never have one to do)."""
        self._start_tasks()

    def _start_tasks(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [t for t in self._tasks if not t.done()]
        running = {t.get_name() for t in self._tasks}
        for n in range(max(1, self.config.threads)):
            name = f"log-cleaner-{n}"
            if name not in running:
                self._tasks.append(loop.create_task(self._run(n), name=name))

    def reconfigure(self, config: CleanerConfig) -> None:
        """New ``log.cleaner.*`` settings at runtime (a dynamic broker config, KIP-226).
        The I/O rate, dedupe buffer, load factor and backoff apply from the next pass. A new
        thread count starts tasks, or lets the extra ones end after their pass (never
        cut short: a pass is not to be run twice at once on a log), and sizes the worker
        processes anew: the old pool takes no new pass, and its workers exit when done."""
        old, self.config = self.config, config
        if config.threads == old.threads:
            return
        if self.workers != 0:  # 0: passes run in this process (tests, tools)
            self.workers = config.threads
            with self._pool_lock:
                if self._pool is not None:
                    self._pool.close()
                    self._retired_pools.append(self._pool)
                    self._pool = None
        if self._tasks and not self._stopping:
            self._start_tasks()

    async def _run(self, number: int = 0) -> None:
        while number < max(1, self.config.threads):
            backoff = self.config.backoff_ms / 1000
            try:
                worked = await self._clean_next()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let one log stop the cleaner
                log.exception("log cleaner pass failed")
                worked = False
            if not worked:
                await asyncio.sleep(backoff)

    async def _clean_next(self) -> bool:
        chosen = self.choose()
        if chosen is None:
            return False
        tp, part = chosen
        try:
            job = self.job_for(tp, part)
            result = await self._run_job(job)
            self.apply(tp, part, result)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed(tp, exc)
            return False
        finally:
            self.state.in_progress.discard(tp)

    def _ensure_pool(self) -> Any:
        with self._pool_lock:
            if self._pool is None:
                # spawn: the broker has threads, and a forked copy of their locks could hang.
                self._pool = multiprocessing.get_context("spawn").Pool(self.workers)
            return self._pool

    def run_blocking(self, job: CleanJob) -> CleanResult:
        """Run a pass in a worker process and wait for it (from a thread that may block:
        the remote log manager's worker, for remote passes).

        Raises:
            CleanerStoppedError: the cleaner stopped meanwhile (its workers are gone, and
                the pass with them).
        """
        if self.workers == 0:
            return clean(job)
        pending = self._ensure_pool().apply_async(clean, (job,))
        while True:
            try:
                result: CleanResult = pending.get(timeout=0.2)
                return result
            except multiprocessing.TimeoutError:
                # A terminated pool never answers: without this, stopping the broker
                # waited for the remote log manager's worker thread for ever.
                if self._stopping:
                    raise CleanerStoppedError("the log cleaner stopped during the pass") from None

    async def _run_job(self, job: CleanJob) -> CleanResult:
        if self.workers == 0:
            return await asyncio.to_thread(clean, job)
        pool = self._ensure_pool()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[CleanResult] = loop.create_future()

        def done(result: CleanResult) -> None:
            loop.call_soon_threadsafe(_settle, future, result, None)

        def failed(exc: BaseException) -> None:
            loop.call_soon_threadsafe(_settle, future, None, exc)

        pool.apply_async(clean, (job,), callback=done, error_callback=failed)
        return await future

    async def stop(self) -> None:
        """Stop the tasks and the worker processes at once: a pass cut short leaves only
        ``*.cleaned`` files, which the next start removes."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for pool in [*self._retired_pools, self._pool]:
            if pool is not None:
                pool.terminate()
                await asyncio.to_thread(pool.join)
        self._pool = None
        self._retired_pools.clear()
        with contextlib.suppress(OSError):
            self.checkpoint()


def _settle(
    future: asyncio.Future[CleanResult], result: CleanResult | None, exc: BaseException | None
) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        assert result is not None
        future.set_result(result)
