"""What a partition's leader knows of one follower (Kafka's ``cluster/Replica`` and
``ReplicaState``): its log end offset as of its last fetch, when it fetched, and when it
was last caught up with the leader. The leader's ISR decisions and its high watermark are
made from these; ``Partition`` owns one per follower and updates it on every fetch.

Times are milliseconds of one clock (the partition's, ``Clock.milliseconds``). Not
thread-safe: used from the broker's event loop, like ``Partition``.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class ReplicaProgress:
    """One follower as its leader sees it.

    Attributes:
        broker_id: the follower.
        log_end_offset: the offset of its last fetch, which is its log end; unknown (-1)
            until it fetches from this leader.
        last_fetch_leader_log_end_offset: the leader's log end when that fetch came.
        last_fetch_time_ms: when that fetch came.
        last_caught_up_time_ms: the latest time t at which the follower had everything
            the leader had at t; the ISR lag rule measures from it.
    """

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def update_fetch_state(self, fetch_offset: int, now_ms: int, leader_end_offset: int) -> None:
        """Record a fetch at ``fetch_offset`` received at ``now_ms``, the leader's log end
        being ``leader_end_offset`` (Kafka's ``Replica.updateFetchState``).

        Caught up now if the fetch reaches the leader's log end; caught up as of the
        previous fetch if it reaches the leader's log end at that time. The second rule
        keeps a follower of a busy partition in sync although each of its fetches is
        always a little behind the log end.
        """
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(
            leader_end_offset, self.last_fetch_leader_log_end_offset
        )
        self.last_fetch_time_ms = now_ms

    def reset(
        self, now_ms: int, leader_end_offset: int, *, new_leader: bool, in_sync: bool
    ) -> None:
        """Leadership (re)applied (Kafka's ``Replica.resetReplicaState``): an ISR member
        counts as caught up now, others as never, so a follower outside the ISR does not
        hold the high watermark back. A new leader forgets what the follower had: it
        learns it again from the next fetch, and until then the follower holds the high
        watermark where it is."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if new_leader:
            self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_time_max_ms: int) -> bool:
        """In sync by Kafka's ``ReplicaState.isCaughtUp``: at the leader's log end, or
        caught up within the last ``replica.lag.time.max.ms``."""
        return (
            self.log_end_offset == leader_end_offset
            or now_ms - self.last_caught_up_time_ms <= lag_time_max_ms
        )
