"""Fetch from the closest replica (KIP-392): which replica a consumer is sent to.

A consumer names its rack (``client.rack``, the Fetch request's ``rack_id`` from v11).
With ``replica.selector.class`` set to Kafka's ``RackAwareReplicaSelector``, a leader
answers a consumer's fetch of a partition with ``preferred_read_replica`` instead of
records when a replica in the consumer's rack should serve it; the client then fetches
from that replica, which serves its committed data (up to its own high watermark), as
every replica here does. Cross-rack (cross-zone) traffic is what this saves.

The rules are Kafka's (``RackAwareReplicaSelector`` and
``ReplicaManager.findPreferredReadReplica``): only the leader chooses, only for
consumers; the candidates are the leader and the followers known to hold the fetch
offset (their log end as of their last fetch is at or past it) and registered; among
the candidates in the client's rack the leader wins, else the one with the highest log
end, then the one caught up most recently. No rack, or none of the candidates in it:
the leader, i.e. no redirection. Pure functions: the fetch handler gathers the inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Kafka's selector class names; tierlog knows the one that exists in Kafka besides none.
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = ("", RACK_AWARE)


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate as the leader sees it."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    last_caught_up_ms: int


def select_rack_aware(
    client_rack: str, leader: ReplicaView, candidates: Iterable[ReplicaView]
) -> ReplicaView:
    """The replica a client in ``client_rack`` should read from (the leader when there is
    no better one). ``candidates`` may include the leader."""
    if not client_rack:
        return leader
    if leader.rack == client_rack:
        return leader
    same_rack = [c for c in candidates if c.rack == client_rack]
    if not same_rack or any(c.broker_id == leader.broker_id for c in same_rack):
        return leader
    return max(same_rack, key=lambda c: (c.log_end_offset, c.last_caught_up_ms))


def preferred_read_replica(
    selector: str,
    client_rack: str,
    leader: ReplicaView,
    followers: Iterable[ReplicaView],
    fetch_offset: int,
) -> int:
    """``preferred_read_replica`` for one partition of a consumer's fetch: a follower's
    broker id, or -1 when the leader itself should answer."""
    if selector != RACK_AWARE:
        return -1
    holding = [f for f in followers if f.log_end_offset >= fetch_offset]
    chosen = select_rack_aware(client_rack, leader, holding)
    return -1 if chosen.broker_id == leader.broker_id else chosen.broker_id
