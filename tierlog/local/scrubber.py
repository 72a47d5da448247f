"""The background scrubber: re-checks the CRC-32C of closed segments, slowly, forever.

Recovery checks only what an unclean stop may have torn (the active segment, or from the
recovery point), so bit rot in a closed segment was served as it was (issue 10, item 2).
This is the HDFS block scanner's idea, which Kafka lacks: walk every closed segment's
batches at a bounded rate (``log.scrubber.bytes.per.second``, HDFS's 1 MiB/s default;
0 disables) and check each batch's length, magic and CRC-32C.

What a finding does: one ERROR log line naming the partition, the offset range, the file
and the byte range; the damaged byte range is marked on the segment
(``LogSegment.mark_damaged``), so reads of it (consumers and followers alike) answer
KAFKA_STORAGE_ERROR instead of bad bytes, while the intact data before it is still
served; and the findings are counted for the metrics (``ScrubberStats``). In a cluster the
broker's repairer (``tierlog/broker/replication/segment_repair.py``, woken through ``on_damage``)
rewrites the range from an in-sync replica. The marks are saved in the partition directory
(``damage_marks.py``) and applied again when the log loads.

Threads: the checking (reading and CRC) runs on a worker thread and touches no ``Log``
state. It reads through a lease on the segment's file (``LogSegment.lease_all``, a
reader's lease beside those fetches take for ``sendfile``), so the bytes stay as they were
for the whole walk, which at the default rate takes ~17 minutes for a 1 GiB segment: a
follower's truncation meanwhile moves the segment to a copy instead of cutting the file in
place (after the walk it cuts in place again). What the walk finds is
applied on the event loop, after checking the segment still is the file that was read
(retention, compaction and truncation may have replaced or removed it meanwhile).
``verify_segment_crc`` is the I/O-light core, usable on its own (e.g. before uploading a
segment to the remote tier); it reads with ``pread``, never a memory map, so a file cut
under it ends the check with ``SegmentTruncatedError`` instead of SIGBUS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tierlog.local import damage_marks
from tierlog.local.crc_check import READ_BYTES, FileWindow, SegmentTruncatedError
from tierlog.local.log import Log
from tierlog.local.segment import FileSlice, LogSegment, SegmentState
from tierlog.records.errors import RecordsError
from tierlog.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE, parse_header
from tierlog.util.clock import Clock, SystemClock
from tierlog.util.throttle import Throttle

log = logging.getLogger(__name__)

# Pause between passes when a pass had nothing to check or finished quickly: scrubbing is
# background work, and a few small segments need no continuous re-reading.
MIN_PASS_INTERVAL_S = 60.0
# The throttle sleeps once this many bytes are ahead of the rate: fewer, longer sleeps.
_PACE_QUANTUM = 64 * 1024


@dataclass(frozen=True, slots=True)
class SegmentProblem:
    """One damaged range of a segment file.

    ``first_offset``/``last_offset`` are the offsets the damaged batch claims (taken from
    its header, which may itself be damaged; the next intact batch bounds ``last_offset``
    when there is one); ``last_offset`` is -1 when the damage runs to the end of the file.
    ``position``/``end_position`` are the byte range no reader may be given.
    """

    path: str
    position: int
    end_position: int
    first_offset: int
    last_offset: int
    problem: str


class Stopped(Exception):
    """The throttle was told to stop mid-segment (broker shutdown)."""


def verify_segment_crc(
    path: str | os.PathLike[str],
    throttle: Callable[[int], None] | None = None,
    *,
    fd: int | None = None,
) -> list[SegmentProblem]:
    """Check every batch of a segment file: length within the file, magic 2, CRC-32C,
    offsets rising. Returns the damaged ranges found, oldest first; empty when whole.

    A CRC failure leaves the batch's length usable, so the walk goes on to the next batch;
    a length or header that cannot be trusted ends the walk with one problem running to
    the end of the file (nothing after it can be found without guessing). The file is
    read with ``pread``, so it may be cut meanwhile without harm (see ``FileWindow``).

    Args:
        path: a ``.log`` segment file (its name gives the base offset when it has one).
        throttle: called with each batch's size after it is checked (rate limiting); it
            may raise to abandon the walk.
        fd: read through this open descriptor of ``path`` (left open) instead of opening
            the path: the scrubber's lease on the segment's file.

    Raises:
        SegmentTruncatedError: the file got shorter during the walk.
        OSError: the file cannot be opened or read.
    """
    path = os.fspath(path)
    stem = os.path.basename(path).split(".", 1)[0]
    expected = int(stem) if stem.isdigit() else 0
    problems: list[SegmentProblem] = []
    own = fd is None
    if fd is None:
        fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return problems
        window = FileWindow(fd, size, min(size, READ_BYTES))
        _walk(path, window, expected, problems, throttle)
        # A CRC failure right before a structural one was not bounded in the walk.
        for n, problem in enumerate(problems):
            if problem.last_offset == -2:
                # Its own lastOffsetDelta (inside the bad CRC), capped by where the next
                # damaged batch claims to start.
                last = _claimed_last_offset(window, problem)
                if n + 1 < len(problems):
                    later = problems[n + 1].first_offset - 1
                    if last < 0 or last > later:
                        last = later
                problems[n] = _bounded(problem, last)
    finally:
        if own:
            os.close(fd)
    return problems


def _walk(
    path: str,
    window: FileWindow,
    expected: int,
    problems: list[SegmentProblem],
    throttle: Callable[[int], None] | None,
) -> None:
    size = window.size

    def to_the_end(position: int, first_offset: int, problem: str) -> None:
        # Nothing after an untrustworthy length or header can be found without guessing.
        problems.append(SegmentProblem(path, position, size, first_offset, -1, problem))

    position = 0
    while position < size:
        if size - position < HEADER_SIZE:
            to_the_end(position, expected, "truncated batch header")
            return
        try:
            header = parse_header(window.view(position, HEADER_SIZE))
        except RecordsError as exc:
            to_the_end(position, expected, str(exc))
            return
        end = position + header.size
        if end > size:
            to_the_end(
                position,
                header.base_offset,
                f"batch length {header.size} runs past the end of the file ({size} bytes)",
            )
            return
        if problems and problems[-1].last_offset == -2:
            # The previous batch failed its CRC: this intact one bounds its offsets.
            last = problems.pop()
            problems.append(_bounded(last, header.base_offset - 1))
        if header.base_offset < expected:
            to_the_end(
                position,
                header.base_offset,
                f"offset {header.base_offset} goes back below {expected}",
            )
            return
        actual = window.crc(position + ATTRIBUTES_OFFSET, end)
        if actual != header.crc:
            problems.append(
                SegmentProblem(
                    path,
                    position,
                    end,
                    header.base_offset,
                    -2,  # to be bounded by the next intact batch, or its own header
                    f"CRC-32C {actual:#010x} does not match stored {header.crc:#010x}",
                )
            )
        expected = header.next_offset
        position = end
        if throttle is not None:
            throttle(header.size)
    if problems and problems[-1].last_offset == -2:
        last = problems.pop()
        # The last batch: its own lastOffsetDelta (inside the bad CRC) is all there is.
        claimed = _claimed_last_offset(window, last)
        problems.append(_bounded(last, claimed))


def _claimed_last_offset(window: FileWindow, problem: SegmentProblem) -> int:
    try:
        return parse_header(window.view(problem.position, HEADER_SIZE)).last_offset
    except RecordsError:
        return -1


def _bounded(problem: SegmentProblem, last_offset: int) -> SegmentProblem:
    return SegmentProblem(
        problem.path,
        problem.position,
        problem.end_position,
        problem.first_offset,
        max(last_offset, problem.first_offset),
        problem.problem,
    )


class RateLimiter:
    """Paces a worker to ``bytes_per_second``: ``__call__(n)`` after n bytes waits (on the
    ``stop`` event) as long as the worker is ahead of the rate. Raises ``Stopped`` once
    ``stop`` is set. The pace is the pass's average (``tierlog.util.throttle``)."""

    def __init__(self, bytes_per_second: int, stop: threading.Event, clock: Clock) -> None:
        self.bytes_per_second = bytes_per_second
        self.stop = stop
        self._throttle = Throttle(bytes_per_second, clock)
        self._unpaced = 0

    def __call__(self, n: int) -> None:
        if self.stop.is_set():
            raise Stopped
        self._unpaced += n
        if self._unpaced < _PACE_QUANTUM:
            return
        ahead = self._throttle.wait_for(self._unpaced)
        self._unpaced = 0
        if ahead > 0 and self.stop.wait(ahead):
            raise Stopped


@dataclass
class ScrubberStats:
    """Progress and findings, read by the metrics endpoint (event loop writes only)."""

    verified_bytes: int = 0
    verified_segments: int = 0
    completed_passes: int = 0
    corrupt_batches: int = 0
    pass_bytes_done: int = 0
    pass_bytes_total: int = 0
    last_pass_seconds: float = 0.0
    # (topic-partition directory name) -> damaged ranges found and still marked.
    damaged: dict[str, list[SegmentProblem]] = field(default_factory=dict)


async def _on_worker_thread(
    lease: FileSlice, fn: Callable[..., list[SegmentProblem]], *args: Any, **kwargs: Any
) -> list[SegmentProblem]:
    """``fn(*args, **kwargs)`` on a worker thread that reads through ``lease``'s fd; the
    lease is released on the event loop (leases are not thread-safe) once the thread is
    done, even when the caller is cancelled first (shutdown): releasing it earlier could
    close the fd under the thread, and the number could then name another file."""
    job = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))

    def release(done: asyncio.Future[list[SegmentProblem]]) -> None:
        if not done.cancelled():
            done.exception()  # retrieved: a stopped walk's Stopped is expected
        lease.release()

    job.add_done_callback(release)
    return await asyncio.shield(job)


class Scrubber:
    """Re-checks every closed segment of every log, one at a time, at a bounded rate.

    Args:
        logs: the logs to check (the log manager's ``logs``, read at each pass).
        bytes_per_second: the rate; must be > 0 (0 means: do not build a scrubber).
        min_pass_interval_s: the least time from one pass's start to the next one's.
        clock: monotonic time for the pace.
    """

    def __init__(
        self,
        logs: Callable[[], Mapping[Any, Log]],
        bytes_per_second: int,
        *,
        min_pass_interval_s: float = MIN_PASS_INTERVAL_S,
        clock: Clock | None = None,
        on_damage: Callable[[], None] | None = None,
    ) -> None:
        if bytes_per_second <= 0:
            raise ValueError("the scrubber needs a positive rate")
        self._logs = logs
        self.bytes_per_second = bytes_per_second
        self.min_pass_interval_s = min_pass_interval_s
        self.clock: Clock = clock or SystemClock()
        self.stats = ScrubberStats()
        # Called after new damage is marked (the broker's repairer, in a cluster).
        self.on_damage = on_damage
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="log-scrubber")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Stopped):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._stop.is_set():
            started = self.clock.monotonic_ms() / 1000
            try:
                await self.run_pass()
            except Stopped:
                return
            except Exception:  # never let one bad pass end scrubbing for good
                log.exception("scrubber pass failed; retrying at the next pass")
            rest = self.min_pass_interval_s - (self.clock.monotonic_ms() / 1000 - started)
            if rest > 0:
                await asyncio.sleep(rest)

    async def run_pass(self) -> int:
        """Check every closed segment once; returns the number of problems found."""
        started = self.clock.monotonic_ms() / 1000
        pending = [
            (topic_log, segment)
            for topic_log in list(self._logs().values())
            for segment in list(topic_log.segments[:-1])
            if segment.state is SegmentState.CLOSED
        ]
        stats = self.stats
        # Forget findings in segments that are gone (retention, truncation, compaction).
        live = {str(segment.path) for _, segment in pending}
        stats.damaged = {
            name: kept
            for name, problems in stats.damaged.items()
            if (kept := [p for p in problems if p.path in live])
        }
        stats.pass_bytes_total = sum(segment.size for _, segment in pending)
        stats.pass_bytes_done = 0
        limiter = RateLimiter(self.bytes_per_second, self._stop, self.clock)
        found = 0
        for topic_log, segment in pending:
            if (
                topic_log.closed
                or segment.state is not SegmentState.CLOSED
                or segment not in topic_log.segments  # retention, truncation, a swap
            ):
                continue
            path = segment.path
            # A segment idle until now goes back to holding no descriptor afterwards: a
            # pass must not leave every closed segment open (issue 20, item 8).
            was_open = segment.is_open
            # The walk reads through a lease on the segment's file: while it is held, a
            # follower's truncation copies the kept bytes to a new file instead of cutting
            # this one (segment.py, "Leases"), so the walk reads the bytes it started with,
            # and what it finds is then dropped as no longer the segment's.
            lease = segment.lease_all()
            try:
                inode = os.fstat(lease.fd).st_ino
            except OSError as exc:
                lease.release()  # no worker thread took it: give it back here
                log.warning("scrubber: cannot examine %s: %s", path, exc)
                continue
            try:
                problems = await _on_worker_thread(
                    lease, verify_segment_crc, path, limiter, fd=lease.fd
                )
            except SegmentTruncatedError as exc:
                log.debug("scrubber: %s: %s; checked again next pass", path, exc)
                continue
            except OSError as exc:
                log.warning("scrubber: cannot read %s: %s", path, exc)
                continue
            stats.verified_bytes += lease.size
            stats.pass_bytes_done += lease.size
            stats.verified_segments += 1
            if self._still_the_file_read(topic_log, segment, inode):
                # What passed needs no check before it is served (LogSegment.verify).
                segment.mark_verified(0, problems[0].position if problems else lease.size)
                if problems:
                    found += len(problems)
                    self._report(topic_log, segment, problems)
            if not was_open and segment.can_release():
                segment.release_files()
        stats.completed_passes += 1
        stats.last_pass_seconds = self.clock.monotonic_ms() / 1000 - started
        return found

    @staticmethod
    def _still_the_file_read(topic_log: Log, segment: LogSegment, inode: int) -> bool:
        """True when the segment is still live and still the inode the walk opened (a
        compaction swap or truncation replaces files; their damage is not ours to mark)."""
        if topic_log.closed or segment not in topic_log.segments or segment.fd < 0:
            return False
        try:
            return os.fstat(segment.fd).st_ino == inode == os.stat(segment.path).st_ino
        except OSError:
            return False

    def _report(self, topic_log: Log, segment: LogSegment, problems: list[SegmentProblem]) -> None:
        marked = self.stats.damaged.setdefault(topic_log.name, [])
        for problem in problems:
            if problem in marked:
                continue  # found again on a later pass: already marked and reported
            last = problem.last_offset if problem.last_offset >= 0 else segment.next_offset - 1
            log.error(
                "scrubber: %s offsets %d-%d are damaged in %s (bytes %d-%d: %s); reads of "
                "them answer KAFKA_STORAGE_ERROR until they are repaired from a replica or the "
                "segment is replaced",
                topic_log.name,
                problem.first_offset,
                last,
                problem.path,
                problem.position,
                problem.end_position,
                problem.problem,
            )
            segment.mark_damaged(problem.position, problem.end_position, problem.problem)
            marked.append(problem)
            self.stats.corrupt_batches += 1
        try:
            damage_marks.save(topic_log.segments)  # the marks outlive a restart
        except OSError as exc:
            log.warning("%s: damage marks not saved (%s); kept in memory", topic_log.name, exc)
        if self.on_damage is not None:
            self.on_damage()

    def forget_repaired(self, topic_log: Log) -> None:
        """Drop the findings of ``topic_log`` whose bytes are no longer marked (repaired
        from a replica): the damaged-ranges gauge counts what is still unreadable."""
        marked = {
            (str(segment.path), start)
            for segment in topic_log.segments
            for start, _, _ in segment.damaged
        }
        name = topic_log.name
        kept = [
            p
            for p in self.stats.damaged.get(name, [])
            if any(
                path == p.path and p.position <= start < p.end_position for path, start in marked
            )
        ]
        if kept:
            self.stats.damaged[name] = kept
        else:
            self.stats.damaged.pop(name, None)
