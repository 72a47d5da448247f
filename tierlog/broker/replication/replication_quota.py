"""Replication throttles (KIP-73, Kafka's ``ReplicationQuotaManager``): this broker's two
byte-rate quotas on replication traffic, and the rules of when they apply.

- The **leader** quota (``leader.replication.throttled.rate``) bounds what this broker, as
  leader, sends to followers of the partitions its topic lists in
  ``leader.replication.throttled.replicas`` as ``p:<this broker>`` (or ``*``).
- The **follower** quota (``follower.replication.throttled.rate``) bounds what this broker,
  as follower, fetches for the partitions listed in ``follower.replication.throttled.replicas``
  as ``p:<this broker>``.

As in Kafka, a quota applies only to a replica that is **not in sync**: a leader throttles
only followers outside the ISR (``ReplicaManager.shouldLeaderThrottle``), a follower only
partitions it lags on (``ReplicaFetcherThread.shouldFollowerThrottle``). So an ISR member is
never slowed by a throttle, and never falls out of the ISR because of one; a throttled
replica joins the ISR, by the usual rule, once it has caught up (and is unthrottled from
then on). Bytes of every throttled partition count against the quota, in sync or not, as
Kafka records them.

Kafka leaves a throttled partition out of a fetch (follower) or answers it empty (leader)
while a windowed rate is over the quota, so one fetch may still carry
``replica.fetch.max.bytes`` at once. Here each quota is a ``Throttle`` (token bucket, at most
one second of credit), and a throttled partition's share of a fetch is also cut to the
credit there is: the rate holds from the first fetch on, not only on average. A partition
whose credit is positive gets at least one batch (the debt is paid before its next bytes),
so a batch larger than one second's worth still moves.

Not thread-safe: the broker's event loop.
"""

from __future__ import annotations

import math

from tierlog.local.config import LogConfig
from tierlog.local.throttled_replicas import is_throttled
from tierlog.util.clock import Clock
from tierlog.util.throttle import Throttle

# Kafka's default rate, Long.MAX_VALUE: no limit.
UNLIMITED = 2**63 - 1
# How long a follower whose every partition waits on a paused quota (rate 0) sleeps
# before looking again (a new rate or config wakes it sooner).
PAUSED_WAIT_S = 1.0


class ReplicationQuota:
    """One side's quota: the rate, the credit, and what went through it.

    Args:
        bytes_per_second: the rate; ``UNLIMITED`` (or more) for none; 0 stops throttled
            replicas altogether (Kafka: every fetch over the quota).
        clock: monotonic time for the credit.
    """

    def __init__(self, bytes_per_second: int, clock: Clock) -> None:
        self._throttle = Throttle(0, clock)
        self.rate = UNLIMITED
        # Bytes of throttled partitions sent or fetched (Kafka's byte-rate sensor, as a
        # counter: the metrics endpoint serves it, a scraper derives the rate).
        self.bytes_total = 0
        self.set_rate(bytes_per_second)

    def set_rate(self, bytes_per_second: int) -> None:
        """A new rate (a dynamic broker config); credit earned so far is kept, bounded by
        one second at the new rate."""
        self.rate = bytes_per_second
        if self.limited and bytes_per_second > 0:
            self._throttle.set_rate(bytes_per_second, burst_bytes=bytes_per_second)
        else:
            self._throttle.set_rate(0)

    @property
    def limited(self) -> bool:
        return self.rate < UNLIMITED

    def allowance(self, wanted: int) -> int:
        """The bytes a throttled, out-of-sync replica may move now, at most ``wanted``;
        0 while the quota is used up (the replica is left out or answered empty)."""
        if not self.limited:
            return wanted
        if self.rate == 0:
            return 0
        credit = self._throttle.credit()
        return 0 if credit <= 0 else min(wanted, max(1, math.floor(credit)))

    def delay_s(self) -> float:
        """Seconds until there is credit again (0.0 when there is some now)."""
        if not self.limited:
            return 0.0
        if self.rate == 0:
            return PAUSED_WAIT_S
        credit = self._throttle.credit()
        return 0.0 if credit > 0 else (1 - credit) / self.rate

    def record(self, nbytes: int) -> None:
        """Count ``nbytes`` of a throttled partition moved (in sync or not, as Kafka)."""
        if nbytes <= 0:
            return
        self.bytes_total += nbytes
        if self.limited and self.rate > 0:
            self._throttle.wait_for(nbytes)


def leader_throttles(config: LogConfig, partition: int, leader_id: int) -> bool:
    """Whether ``leader.replication.throttled.replicas`` lists ``partition`` on its leader
    (Kafka lists the leader side by the broker that leads)."""
    return is_throttled(config.leader_replication_throttled_replicas, partition, leader_id)


def follower_throttles(config: LogConfig, partition: int, follower_id: int) -> bool:
    """Whether ``follower.replication.throttled.replicas`` lists ``partition`` on
    follower ``follower_id``."""
    return is_throttled(config.follower_replication_throttled_replicas, partition, follower_id)


class ReplicationQuotas:
    """This broker's two quotas: ``leader`` (what it serves throttled followers) and
    ``follower`` (what it fetches for throttled partitions)."""

    def __init__(self, leader_rate: int, follower_rate: int, clock: Clock) -> None:
        self.leader = ReplicationQuota(leader_rate, clock)
        self.follower = ReplicationQuota(follower_rate, clock)


def leader_share(
    quota: ReplicationQuota, *, throttled: bool, in_sync: bool, limit: int, first: bool
) -> tuple[int, bool]:
    """How much a leader reads for a follower's partition: ``(max_bytes, min_one_batch)``.

    Unthrottled (not listed, the follower in the ISR, or no rate set): the fetch's own
    ``limit`` and ``first`` (Kafka: the first partition may exceed the limits by a batch).
    Throttled: at most the quota's credit, nothing while it is used up; when the credit is
    what cuts the share, one batch may go past it (paid for by the next fetches), so that a
    batch larger than the credit can ever build up still moves.
    """
    if not throttled or in_sync or not quota.limited:
        return limit, first
    allowed = quota.allowance(limit)
    if allowed == 0:
        return 0, False
    return allowed, first or allowed < limit
