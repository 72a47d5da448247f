"""The replication quotas (tierlog/broker/replication/replication_quota.py) on a manual
clock: credit earned at the rate and bounded by one second, nothing while used up, a new
rate taken at once, and which reads a leader cuts (only throttled, out-of-sync ones)."""

from __future__ import annotations

from tierlog.broker.replication.replication_quota import (
    UNLIMITED,
    ReplicationQuota,
    leader_share,
)
from tierlog.util.clock import ManualClock


def test_credit_is_earned_at_the_rate_and_bounded_by_one_second() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(1000, clock)
    assert quota.allowance(10_000) == 0  # no credit yet
    assert quota.delay_s() > 0
    clock.advance(500)
    assert quota.allowance(10_000) == 500
    assert quota.allowance(200) == 200  # never more than wanted
    clock.advance(60_000)  # idle: at most one second's worth
    assert quota.allowance(10_000) == 1000
    quota.record(1500)  # one batch past the credit: a debt
    assert quota.allowance(10_000) == 0
    assert quota.delay_s() == (1 + 500) / 1000
    clock.advance(500)
    assert quota.allowance(10_000) == 0
    clock.advance(1)
    assert quota.allowance(10_000) == 1
    assert quota.bytes_total == 1500


def test_unlimited_and_paused_rates() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(UNLIMITED, clock)
    assert not quota.limited and quota.allowance(1 << 30) == 1 << 30
    quota.record(5000)
    assert quota.allowance(7) == 7 and quota.bytes_total == 5000
    quota.set_rate(0)  # Kafka's 0: throttled replicas get nothing
    clock.advance(10_000)
    assert quota.limited and quota.allowance(100) == 0
    quota.set_rate(2000)
    clock.advance(250)
    assert quota.allowance(10_000) == 500
    quota.set_rate(UNLIMITED)
    assert quota.allowance(10_000) == 10_000


def test_a_leader_cuts_only_throttled_out_of_sync_reads() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(1000, clock)
    clock.advance(300)
    # Not listed, or the follower in the ISR: the fetch's own limits.
    assert leader_share(quota, throttled=False, in_sync=False, limit=5000, first=True) == (
        5000,
        True,
    )
    assert leader_share(quota, throttled=True, in_sync=True, limit=5000, first=False) == (
        5000,
        False,
    )
    # Throttled: the credit, one batch past it allowed when the credit is what cuts.
    assert leader_share(quota, throttled=True, in_sync=False, limit=5000, first=False) == (
        300,
        True,
    )
    assert leader_share(quota, throttled=True, in_sync=False, limit=100, first=False) == (
        100,
        False,
    )
    quota.record(400)
    assert leader_share(quota, throttled=True, in_sync=False, limit=5000, first=True) == (
        0,
        False,
    )
