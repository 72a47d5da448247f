"""The byte-rate throttle (tierlog/util/throttle.py) on a manual clock: the pace as an
average (the cleaner's and the scrubber's), a bounded burst (the remote copy's), no wait
when unthrottled, and waits too short to sleep carried over."""

from __future__ import annotations

import pytest

from tierlog.util.throttle import Throttle


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


def test_the_throttle_keeps_io_at_its_rate() -> None:
    fake = _FakeTime()
    throttle = Throttle(1_000_000, fake, sleep=fake.sleep)
    for _ in range(10):
        throttle(250_000)
    assert sum(fake.slept) == pytest.approx(2.5)
    unlimited = Throttle(0, fake, sleep=fake.sleep)
    unlimited(10**9)
    assert sum(fake.slept) == pytest.approx(2.5)


def test_unbounded_credit_lets_a_pass_catch_up_after_a_slow_stretch() -> None:
    fake = _FakeTime()
    throttle = Throttle(1000, fake, sleep=fake.sleep)
    fake.now += 5  # five seconds of slow work: 5,000 bytes of credit
    throttle(5000)
    assert fake.slept == []
    throttle(1000)
    assert fake.slept == [pytest.approx(1.0)]


def test_a_bounded_burst_keeps_an_idle_uploader_to_its_rate() -> None:
    fake = _FakeTime()
    throttle = Throttle(1000, fake, burst_bytes=1000, initial_bytes=1000, sleep=fake.sleep)
    throttle(1000)  # the first second's worth goes at once
    assert fake.slept == []
    fake.now += 60  # an hour's idling would earn no more than one second's worth
    throttle(3000)
    assert fake.slept == [pytest.approx(2.0)]


def test_short_waits_are_carried_over_not_slept() -> None:
    fake = _FakeTime()
    throttle = Throttle(1_000_000, fake, sleep=fake.sleep, min_wait_s=0.01)
    for _ in range(9):
        throttle(1000)  # 1 ms each: under the 10 ms floor
    assert fake.slept == []
    throttle(2000)  # 11 ms of debt in all
    assert fake.slept == [pytest.approx(0.011)]


def test_wait_for_only_says_how_long() -> None:
    fake = _FakeTime()
    throttle = Throttle(1000, fake)
    assert throttle.wait_for(500) == pytest.approx(0.5)
    assert fake.now == 100.0


def test_a_new_rate_applies_from_now_on() -> None:
    fake = _FakeTime()
    throttle = Throttle(1_000_000, fake, sleep=fake.sleep, burst_bytes=1_000_000)
    throttle(1_000_000)
    assert sum(fake.slept) == pytest.approx(1.0)
    throttle.set_rate(250_000, burst_bytes=250_000)
    throttle(500_000)
    assert sum(fake.slept) == pytest.approx(3.0)
    throttle.set_rate(0)
    throttle(10**9)
    assert sum(fake.slept) == pytest.approx(3.0)
