"""The counters the broker adds to as it works (requests, bytes and messages in and out,
ISR changes): a few integer additions on the request path. ``metrics`` reads them when
scraped; this module imports nothing of the broker, so the replica manager and the network
side can hold them without importing the collector that reads them back.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class RequestStats:
    count: int = 0
    errors: int = 0
    total_seconds: float = 0.0


@dataclass
class BrokerMetrics:
    """Counters the broker adds to as it works (event loop only)."""

    requests: defaultdict[int, RequestStats] = field(
        default_factory=lambda: defaultdict(RequestStats)
    )
    bytes_in: int = 0
    bytes_out: int = 0
    messages_in: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0

    def record_request(self, api_key: int, seconds: float, failed: bool) -> None:
        stats = self.requests[api_key]
        stats.count += 1
        stats.total_seconds += seconds
        if failed:
            stats.errors += 1

    def record_isr_change(self, before: int, after: int) -> None:
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1
