"""Schedulers for periodic background work (flush, retention, checkpoints).

The work they run (``LogManager`` tasks) is single-threaded by contract, so schedulers run
tasks on the caller's thread: ``ManualScheduler`` when a test advances its clock,
``AsyncioScheduler`` on the broker's event loop.

The one exception is blocking I/O that touches no shared state: ``run_blocking`` runs such
a job (a rolled segment's fsyncs) off the caller's thread, one job at a time in the order
given, and then its completion back on the caller's thread. ``AsyncioScheduler`` has one
worker thread for it, started on first use; ``ManualScheduler`` runs both, in order, at its
next ``advance``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from tierlog.util.clock import ManualClock

log = logging.getLogger(__name__)

# A task's return value is ignored, so any callable taking no arguments will do.
Task = Callable[[], object]
# What follows a blocking job, on the scheduler's thread: the job's exception, or None.
Completion = Callable[[BaseException | None], None]


class Scheduler(Protocol):
    def schedule(self, name: str, task: Task, delay_ms: int, period_ms: int) -> None:
        """Run ``task`` after ``delay_ms``, then every ``period_ms`` (<= 0: only once).

        The task's return value is ignored (``LogManager.retention_pass`` returns a count).
        """
        ...

    def run_blocking(self, name: str, job: Task, then: Completion) -> None:
        """Run ``job`` off the caller's thread (jobs one at a time, in order), then
        ``then(error)`` on the caller's thread, ``error`` None when the job succeeded."""
        ...

    def cancel_all(self) -> None: ...


@dataclass(order=True)
class _Due:
    due_ms: int
    seq: int
    name: str = field(compare=False)
    task: Task = field(compare=False)
    period_ms: int = field(compare=False)


class ManualScheduler:
    """Runs due tasks when ``advance`` moves its ``ManualClock``; deterministic for tests."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._queue: list[_Due] = []
        self._seq = itertools.count()
        self._blocking: list[tuple[str, Task, Completion]] = []

    def schedule(self, name: str, task: Task, delay_ms: int, period_ms: int) -> None:
        due = self.clock.monotonic_ms() + max(0, delay_ms)
        heapq.heappush(self._queue, _Due(due, next(self._seq), name, task, period_ms))

    def advance(self, ms: int) -> None:
        """Run the blocking jobs given so far (each then its completion), then move the
        clock forward, running every task that falls due, in due order."""
        while self._blocking:
            _, job, then = self._blocking.pop(0)
            try:
                job()
            except Exception as exc:
                then(exc)
            else:
                then(None)
        target = self.clock.monotonic_ms() + ms
        while self._queue and self._queue[0].due_ms <= target:
            item = heapq.heappop(self._queue)
            # A task is overdue when the shared clock was advanced directly: run it now
            # rather than move the clock back (which ManualClock refuses).
            self.clock.advance(max(0, item.due_ms - self.clock.monotonic_ms()))
            item.task()
            if item.period_ms > 0:
                item.due_ms += item.period_ms
                item.seq = next(self._seq)
                heapq.heappush(self._queue, item)
        self.clock.advance(target - self.clock.monotonic_ms())

    def run_blocking(self, name: str, job: Task, then: Completion) -> None:
        """Queued: the next ``advance`` runs it (on this thread), as a worker would later."""
        self._blocking.append((name, job, then))

    def cancel_all(self) -> None:
        self._queue.clear()
        self._blocking.clear()

    def scheduled(self) -> list[str]:
        """The names of the tasks still scheduled, soonest due first."""
        return [item.name for item in sorted(self._queue)] + [b[0] for b in self._blocking]


class AsyncioScheduler:
    """Runs tasks on an asyncio event loop with ``call_later``; a failing task is logged
    and keeps its schedule, as Kafka's KafkaScheduler does."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._handles: dict[int, asyncio.TimerHandle] = {}
        self._ids = itertools.count()
        self._worker: ThreadPoolExecutor | None = None

    def schedule(self, name: str, task: Task, delay_ms: int, period_ms: int) -> None:
        key = next(self._ids)

        def run() -> None:
            self._handles.pop(key, None)
            try:
                task()
            except Exception:
                log.exception("scheduled task %s failed", name)
            if period_ms > 0:
                self._handles[key] = self._loop.call_later(period_ms / 1000, run)

        self._handles[key] = self._loop.call_later(max(0, delay_ms) / 1000, run)

    def run_blocking(self, name: str, job: Task, then: Completion) -> None:
        if self._worker is None:
            # One thread: jobs complete in the order given (a later roll's flush never
            # finishes before an earlier one's), and their completions are called so.
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="log-background")
        future = self._loop.run_in_executor(self._worker, job)

        def done(finished: asyncio.Future[object]) -> None:
            if finished.cancelled():
                return  # dropped by cancel_all: its owner is stopping
            error = finished.exception()
            try:
                then(error)
            except Exception:
                log.exception("completing background job %s failed", name)

        future.add_done_callback(done)

    def cancel_all(self) -> None:
        """Cancel the scheduled tasks, and wait for a blocking job under way (jobs not
        started are dropped; their completions are not called)."""
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=True)
            self._worker = None
