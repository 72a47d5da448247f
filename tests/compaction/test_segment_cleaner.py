"""A whole cleaning pass paced by its throttle (log.cleaner.io.max.bytes.per.second) on a
fake clock; the throttle itself is tests/util/test_throttle.py."""

from __future__ import annotations

import dataclasses

import pytest

from tierlog.compaction import segment_cleaner
from tierlog.compaction.cleaner import LogCleaner
from tierlog.local.log_manager import LogManager
from tierlog.util.clock import ManualClock

from .conftest import append, compacted


class _FakeTime:
    """Monotonic time that moves only when slept."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def milliseconds(self) -> int:
        return round(self.now * 1000)

    def monotonic_ms(self) -> int:
        return round(self.now * 1000)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_pass_is_paced_by_the_rate(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    for i in range(300):
        append(log, [(b"k%d" % (i % 7), b"v" * 40)], clock)
    chosen = cleaner.choose()
    assert chosen is not None
    job = dataclasses.replace(cleaner.job_for(*chosen), io_bytes_per_second=100_000.0)
    fake = _FakeTime()
    result = segment_cleaner.clean(job, fake, fake.sleep)
    # Both phases read: the map's segments, then every cleaned one.
    assert sum(fake.slept) == pytest.approx(result.stats.bytes_read / 100_000, rel=0.05)
