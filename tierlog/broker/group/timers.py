"""Named one-shot timers on the running event loop, grouped by group id.

The coordinator's stand-in for Kafka's purgatories (heartbeat, join and sync expiry):
arming a timer under a name cancels the one armed before under that name, which is how
a heartbeat "satisfies" the pending expiration. Timers must be armed from the event
loop thread (they use ``asyncio.get_running_loop``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class TimerTable:
    """Timers keyed by ``(group_id, name)``; ``cancel_group`` drops all of a group's."""

    def __init__(self) -> None:
        self._timers: dict[str, dict[str, asyncio.TimerHandle]] = {}

    def arm(self, group_id: str, name: str, delay_ms: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` after ``delay_ms`` unless re-armed or cancelled before."""
        self.cancel(group_id, name)
        loop = asyncio.get_running_loop()
        timers = self._timers.setdefault(group_id, {})

        def fire() -> None:
            if timers.get(name) is handle:
                del timers[name]
                if not timers and self._timers.get(group_id) is timers:
                    del self._timers[group_id]
            callback()

        handle = loop.call_later(max(delay_ms, 0) / 1000.0, fire)
        timers[name] = handle

    def cancel(self, group_id: str, name: str) -> None:
        timers = self._timers.get(group_id)
        if timers is None:
            return
        handle = timers.pop(name, None)
        if handle is not None:
            handle.cancel()
        if not timers:
            del self._timers[group_id]

    def is_armed(self, group_id: str, name: str) -> bool:
        return name in self._timers.get(group_id, {})

    def cancel_group(self, group_id: str) -> None:
        for handle in self._timers.pop(group_id, {}).values():
            handle.cancel()

    def cancel_all(self) -> None:
        for group_id in list(self._timers):
            self.cancel_group(group_id)

    def __len__(self) -> int:
        return sum(len(t) for t in self._timers.values())
