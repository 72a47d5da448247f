"""Schedulers for periodic background work (flush, retention, checkpoints).

The work they run (``LogManager`` tasks) is single-threaded by contract, so schedulers run
tasks on the caller's thread: ``ManualScheduler`` when a test advances its clock,
``AsyncioScheduler`` on the broker's event loop. No scheduler here starts a thread.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from tierlog.util.clock import ManualClock

log = logging.getLogger(__name__)

# A task's return value is ignored, so any callable taking no arguments will do.
Task = Callable[[], object]


class Scheduler(Protocol):
    def schedule(self, name: str, task: Task, delay_ms: int, period_ms: int) -> None:
        """Run ``task`` after ``delay_ms``, then every ``period_ms`` (<= 0: only once).

        The task's return value is ignored (``LogManager.retention_pass`` returns a count).
        """
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

    def schedule(self, name: str, task: Task, delay_ms: int, period_ms: int) -> None:
        due = self.clock.monotonic_ms() + max(0, delay_ms)
        heapq.heappush(self._queue, _Due(due, next(self._seq), name, task, period_ms))

    def advance(self, ms: int) -> None:
        """Move the clock forward, running every task that falls due, in due order."""
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

    def cancel_all(self) -> None:
        self._queue.clear()

    def scheduled(self) -> list[str]:
        """The names of the tasks still scheduled, soonest due first."""
        return [item.name for item in sorted(self._queue)]


class AsyncioScheduler:
    """Runs tasks on an asyncio event loop with ``call_later``; a failing task is logged
    and keeps its schedule, as Kafka's KafkaScheduler does."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._handles: dict[int, asyncio.TimerHandle] = {}
        self._ids = itertools.count()

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

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
