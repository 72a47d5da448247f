"""Clocks passed into anything whose logic depends on time, so tests can control it."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def milliseconds(self) -> int:
        """Wall-clock time in ms since the epoch (record timestamps, retention)."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic ms for intervals (flush.ms, roll checks); never goes backwards."""
        ...


class SystemClock:
    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; wall and monotonic time advance together."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def milliseconds(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += ms
