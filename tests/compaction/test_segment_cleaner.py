"""segment_cleaner's throttle (log.cleaner.io.max.bytes.per.second) on a fake clock, and a
whole pass paced by it."""

from __future__ import annotations

import dataclasses

import pytest

from tierlog.compaction import segment_cleaner
from tierlog.compaction.cleaner import LogCleaner
from tierlog.local.log_manager import LogManager
from tierlog.util.clock import ManualClock

from .conftest import append, compacted


class _FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_throttle_keeps_io_at_its_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeTime()
    monkeypatch.setattr(segment_cleaner, "time", fake)
    throttle = segment_cleaner.Throttle(1_000_000)
    for _ in range(10):
        throttle(250_000)
    assert sum(fake.slept) == pytest.approx(2.5)
    unlimited = segment_cleaner.Throttle(0)
    unlimited(10**9)
    assert sum(fake.slept) == pytest.approx(2.5)


def test_a_pass_is_paced_by_the_rate(
    monkeypatch: pytest.MonkeyPatch, manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    for i in range(300):
        append(log, [(b"k%d" % (i % 7), b"v" * 40)], clock)
    chosen = cleaner.choose()
    assert chosen is not None
    job = dataclasses.replace(cleaner.job_for(*chosen), io_bytes_per_second=100_000.0)
    fake = _FakeTime()
    monkeypatch.setattr(segment_cleaner, "time", fake)
    result = segment_cleaner.clean(job)
    # Both phases read: the map's segments, then every cleaned one.
    assert sum(fake.slept) == pytest.approx(result.stats.bytes_read / 100_000, rel=0.05)
