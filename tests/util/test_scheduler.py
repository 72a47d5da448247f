from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest

from tierlog.util.clock import ManualClock, SystemClock
from tierlog.util.scheduler import AsyncioScheduler, ManualScheduler


def test_manual_clock_moves_only_forward() -> None:
    clock = ManualClock(1000)
    assert clock.milliseconds() == clock.monotonic_ms() == 1000
    clock.advance(5)
    assert clock.milliseconds() == clock.monotonic_ms() == 1005
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.milliseconds() == 1005


def test_system_clock_is_in_milliseconds() -> None:
    clock = SystemClock()
    assert abs(clock.milliseconds() - time.time() * 1000) < 5_000
    first = clock.monotonic_ms()
    assert clock.monotonic_ms() >= first


def test_one_shot_task_runs_once_when_due() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    runs: list[int] = []
    sched.schedule("once", lambda: runs.append(clock.milliseconds()), 100, 0)
    sched.advance(99)
    assert runs == []
    sched.advance(1)
    assert runs == [100]
    sched.advance(1000)
    assert runs == [100]
    assert clock.milliseconds() == 1100


def test_periodic_task_runs_at_each_period_with_the_clock_at_its_due_time() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    runs: list[int] = []
    sched.schedule("tick", lambda: runs.append(clock.milliseconds()), 10, 25)
    sched.advance(100)
    assert runs == [10, 35, 60, 85]
    assert clock.milliseconds() == 100


def test_tasks_run_in_due_order_and_ties_in_schedule_order() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    order: list[str] = []
    sched.schedule("late", lambda: order.append("late"), 50, 0)
    sched.schedule("first", lambda: order.append("first"), 10, 0)
    sched.schedule("tie-a", lambda: order.append("tie-a"), 20, 0)
    sched.schedule("tie-b", lambda: order.append("tie-b"), 20, 0)
    sched.advance(60)
    assert order == ["first", "tie-a", "tie-b", "late"]


def test_negative_delay_runs_at_next_advance() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    runs: list[int] = []
    sched.schedule("now", lambda: runs.append(1), -5, 0)
    sched.advance(0)
    assert runs == [1]


def test_task_scheduled_by_a_task_runs_in_the_same_advance_when_due() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    runs: list[tuple[str, int]] = []

    def parent() -> None:
        runs.append(("parent", clock.milliseconds()))
        sched.schedule("child", lambda: runs.append(("child", clock.milliseconds())), 5, 0)

    sched.schedule("parent", parent, 10, 0)
    sched.advance(14)
    assert runs == [("parent", 10)]
    sched.advance(1)
    assert runs == [("parent", 10), ("child", 15)]


def test_cancel_all() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    runs: list[int] = []
    sched.schedule("tick", lambda: runs.append(1), 1, 1)
    sched.advance(3)
    assert runs == [1, 1, 1]
    sched.cancel_all()
    sched.advance(100)
    assert runs == [1, 1, 1]


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.005)


def test_asyncio_scheduler_runs_periodic_and_one_shot_tasks() -> None:
    async def main() -> tuple[list[str], list[str]]:
        sched = AsyncioScheduler(asyncio.get_running_loop())
        ticks: list[str] = []
        once: list[str] = []
        sched.schedule("tick", lambda: ticks.append("t"), 0, 5)
        sched.schedule("once", lambda: once.append("o"), 1, 0)
        await _until(lambda: len(ticks) >= 3 and bool(once))
        sched.cancel_all()
        count = len(ticks)
        await asyncio.sleep(0.03)
        assert len(ticks) == count, "cancel_all left a task scheduled"
        return ticks, once

    ticks, once = asyncio.run(main())
    assert len(ticks) >= 3
    assert once == ["o"]


def test_asyncio_scheduler_logs_a_failing_task_and_keeps_its_schedule(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        raise RuntimeError("boom")

    async def main() -> None:
        sched = AsyncioScheduler(asyncio.get_running_loop())
        sched.schedule("failing", failing, 0, 5)
        await _until(lambda: len(calls) >= 2)
        sched.cancel_all()

    with caplog.at_level(logging.ERROR, logger="tierlog.util.scheduler"):
        asyncio.run(main())
    assert len(calls) >= 2
    assert "scheduled task failing failed" in caplog.text


def test_overdue_tasks_run_when_the_clock_was_moved_directly() -> None:
    # The clock is shared (logs read it too); a test may advance it without the scheduler.
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    runs: list[tuple[str, int]] = []
    sched.schedule("once", lambda: runs.append(("once", clock.milliseconds())), 10, 0)
    sched.schedule("tick", lambda: runs.append(("tick", clock.milliseconds())), 30, 30)
    clock.advance(100)
    sched.advance(0)
    # overdue tasks run at once, in due order, without moving the clock backwards
    assert runs == [("once", 100), ("tick", 100), ("tick", 100), ("tick", 100)]
    assert clock.milliseconds() == 100
    sched.advance(20)
    assert runs[-1] == ("tick", 120)


def test_asyncio_blocking_jobs_run_off_the_loop_in_order_and_complete_on_it() -> None:
    import threading

    done: list[tuple[str, str, BaseException | None]] = []
    ran_on: list[str] = []

    def job(name: str, fail: bool = False) -> Callable[[], None]:
        def run() -> None:
            ran_on.append(threading.current_thread().name)
            time.sleep(0.02 if name == "a" else 0)  # a slower first job still ends first
            if fail:
                raise OSError(name)

        return run

    def then(name: str) -> Callable[[BaseException | None], None]:
        return lambda error: done.append((name, threading.current_thread().name, error))

    async def run() -> None:
        scheduler = AsyncioScheduler(asyncio.get_running_loop())
        scheduler.run_blocking("a", job("a"), then("a"))
        scheduler.run_blocking("b", job("b", fail=True), then("b"))
        scheduler.run_blocking("c", job("c"), then("c"))
        for _ in range(300):
            if len(done) == 3:
                break
            await asyncio.sleep(0.01)
        scheduler.cancel_all()

    asyncio.run(run())
    loop_thread = threading.main_thread().name
    assert [d[0] for d in done] == ["a", "b", "c"]
    assert all(d[1] == loop_thread for d in done)
    assert isinstance(done[1][2], OSError) and done[0][2] is None and done[2][2] is None
    assert len(set(ran_on)) == 1 and ran_on[0] != loop_thread


def test_asyncio_cancel_all_waits_for_the_running_job_and_drops_the_rest() -> None:
    import threading

    started, release = threading.Event(), threading.Event()
    ran: list[str] = []
    completed: list[str] = []

    def slow() -> None:
        started.set()
        release.wait(5)
        ran.append("slow")

    async def run() -> None:
        scheduler = AsyncioScheduler(asyncio.get_running_loop())
        scheduler.run_blocking("slow", slow, lambda e: completed.append("slow"))
        scheduler.run_blocking("later", lambda: ran.append("later"), lambda e: None)
        assert await asyncio.to_thread(started.wait, 5)
        threading.Timer(0.1, release.set).start()
        scheduler.cancel_all()  # waits for "slow"; "later" never starts
        await asyncio.sleep(0.05)

    asyncio.run(run())
    assert ran == ["slow"]


def test_manual_blocking_jobs_run_at_the_next_advance_in_order() -> None:
    scheduler = ManualScheduler(ManualClock())
    events: list[str] = []
    scheduler.run_blocking("a", lambda: events.append("job a"), lambda e: events.append("a"))
    scheduler.run_blocking("b", lambda: 1 / 0, lambda e: events.append(type(e).__name__))
    assert events == [] and scheduler.scheduled() == ["a", "b"]
    scheduler.advance(0)
    assert events == ["job a", "a", "ZeroDivisionError"]
    assert scheduler.scheduled() == []
