"""A byte-rate throttle: paces a worker thread or process to a number of bytes per second.

One mechanism for every byte-rate limit of the broker: the log cleaner's I/O
(``log.cleaner.io.max.bytes.per.second``), uploads to the remote tier
(``remote.log.manager.copy.max.bytes.per.second``), the scrubber's re-reads
(``log.scrubber.bytes.per.second``) and replication to throttled replicas
(``leader/follower.replication.throttled.rate``, which size each fetch by ``credit``). It
is a token bucket: time earns ``bytes_per_second`` of credit, each call spends what it did,
and a caller in debt waits until the debt is paid. ``burst_bytes`` bounds the credit idle
time can build up:

- unbounded (the default), the pace is the average since the throttle was made: a pass
  (cleaning, scrubbing) that is ahead of its rate waits, one that fell behind may catch up;
- one second's worth (the remote copy), a long-lived uploader that idled may not burst
  past its rate afterwards.

Time comes from the ``Clock`` passed in and waiting from ``sleep``, so tests run it on a
manual clock; ``wait_for`` alone says how long to wait, for callers whose wait must be
interruptible (the scrubber waits on its stop event). Not thread-safe: one per worker.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from tierlog.util.clock import Clock


class Throttle:
    """Paces ``__call__(nbytes)`` callers to ``bytes_per_second``.

    Args:
        bytes_per_second: the rate; <= 0 means unthrottled (calls return at once).
        clock: monotonic time.
        burst_bytes: the most credit time can build up (None: no bound).
        initial_bytes: the credit at the start.
        sleep: how ``__call__`` waits, in seconds.
        min_wait_s: shorter waits are not slept (the debt is kept, so a later call pays
            it): sleeping for a few milliseconds at a time costs more than it paces.
    """

    def __init__(
        self,
        bytes_per_second: float,
        clock: Clock,
        *,
        burst_bytes: float | None = None,
        initial_bytes: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
        min_wait_s: float = 0.0,
    ) -> None:
        self.rate = bytes_per_second
        self._clock = clock
        self._burst = math.inf if burst_bytes is None else burst_bytes
        self._credit = float(initial_bytes)
        self._last_ms = clock.monotonic_ms()
        self._sleep = sleep
        self._min_wait_s = min_wait_s

    def set_rate(self, bytes_per_second: float, *, burst_bytes: float | None = None) -> None:
        """A new rate from now on (a dynamic broker config, KIP-226); the credit earned so
        far (at the old rate) is kept, bounded by the new burst. Not thread-safe, like the
        rest: a caller on another thread than the one paced may at worst have one wait
        computed from a half-set state."""
        # What the old rate earned until now is settled first, at the old rate.
        now_ms = self._clock.monotonic_ms()
        if self.rate > 0:
            self._credit += (now_ms - self._last_ms) / 1000 * self.rate
        self._last_ms = now_ms
        self._burst = math.inf if burst_bytes is None else burst_bytes
        self._credit = min(self._burst, self._credit)
        self.rate = bytes_per_second

    def _earn(self) -> None:
        now_ms = self._clock.monotonic_ms()
        earned = (now_ms - self._last_ms) / 1000 * self.rate
        self._last_ms = now_ms
        self._credit = min(self._burst, self._credit + earned)

    def credit(self) -> float:
        """The bytes that may be done now without waiting (negative: the debt still to
        pay), spending none: for callers that size their next step to the rate (the
        replication throttles) rather than wait after it. Infinite when unthrottled."""
        if self.rate <= 0:
            return math.inf
        self._earn()
        return self._credit

    def wait_for(self, nbytes: int) -> float:
        """Count ``nbytes`` done; returns the seconds to wait before going on (0.0 when
        the caller keeps to the rate)."""
        if self.rate <= 0:
            return 0.0
        self._earn()
        self._credit -= nbytes
        wait = -self._credit / self.rate
        return wait if wait > self._min_wait_s and wait > 0 else 0.0

    def __call__(self, nbytes: int) -> None:
        """Count ``nbytes`` done and wait as long as the caller is ahead of the rate."""
        wait = self.wait_for(nbytes)
        if wait > 0:
            self._sleep(wait)
