"""Who is told when a hosted partition becomes leader or stops being it: the coordinators
of the internal topics, which load and unload their state (``__consumer_offsets``,
``__transaction_state``). The broker's builder subscribes them; the replica manager,
built before them, publishes. A hub, because each of them also writes through the
replica manager: neither can be built first with the other in its constructor."""

from __future__ import annotations

from collections.abc import Callable

from tierlog.broker.replication.partition import Partition

LeadershipListener = Callable[[Partition], None]


class LeadershipChanges:
    def __init__(self) -> None:
        self._listeners: list[LeadershipListener] = []

    def subscribe(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)

    def publish(self, partition: Partition) -> None:
        for listener in list(self._listeners):
            listener(partition)
