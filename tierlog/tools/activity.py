"""A sample activity stream like the Kafka paper's: page views and clicks of users on a site.

Deterministic for a seed, so demos, tests and benchmarks can recount what they wrote.
Values are compact JSON (what a web tier would log); keys are user ids, so one user's events
land in one partition in order.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

PAGES = ("/", "/search", "/product", "/cart", "/checkout", "/help", "/blog", "/account")
# Clicks are rarer than views; weights make the summary look like a real site.
EVENT_WEIGHTS = (("page_view", 8), ("click", 2))


@dataclass(frozen=True, slots=True)
class ActivityEvent:
    user: str
    kind: str
    page: str
    timestamp_ms: int

    def key(self) -> bytes:
        return self.user.encode()

    def value(self) -> bytes:
        return json.dumps(
            {"user": self.user, "event": self.kind, "page": self.page, "ts": self.timestamp_ms},
            separators=(",", ":"),
        ).encode()


def activity_stream(
    count: int,
    *,
    seed: int = 7,
    start_ms: int = 1_700_000_000_000,
    users: int = 1000,
    events_per_second: int = 500,
) -> Iterator[ActivityEvent]:
    """``count`` events at about ``events_per_second``, starting at ``start_ms``."""
    rng = random.Random(seed)
    kinds = [k for k, w in EVENT_WEIGHTS for _ in range(w)]
    step = 1000 / events_per_second
    for n in range(count):
        user = f"user-{int(rng.paretovariate(1.2)) % users:04d}"
        yield ActivityEvent(user, rng.choice(kinds), rng.choice(PAGES), start_ms + int(n * step))
