"""tierlog.broker.replication.replica_selector: Kafka's RackAwareReplicaSelector rules (KIP-392)."""

from __future__ import annotations

from tierlog.broker.replication.replica_selector import (
    RACK_AWARE,
    ReplicaView,
    preferred_read_replica,
    select_rack_aware,
)

LEADER = ReplicaView(0, "a", 100, 0)


def followers(*views: tuple[int, str | None, int, int]) -> list[ReplicaView]:
    return [ReplicaView(*v) for v in views]


def test_a_follower_in_the_clients_rack_is_preferred() -> None:
    fs = followers((1, "b", 100, 5), (2, "c", 100, 5))
    assert preferred_read_replica(RACK_AWARE, "c", LEADER, fs, 50) == 2


def test_the_leader_in_the_clients_rack_wins() -> None:
    fs = followers((1, "a", 100, 5))
    assert select_rack_aware("a", LEADER, fs) is LEADER
    assert preferred_read_replica(RACK_AWARE, "a", LEADER, fs, 50) == -1


def test_no_rack_no_match_or_no_selector_means_the_leader() -> None:
    fs = followers((1, "b", 100, 5))
    assert preferred_read_replica(RACK_AWARE, "", LEADER, fs, 50) == -1
    assert preferred_read_replica(RACK_AWARE, "z", LEADER, fs, 50) == -1
    assert preferred_read_replica("", "b", LEADER, fs, 50) == -1


def test_a_follower_that_lacks_the_offset_is_not_a_candidate() -> None:
    fs = followers((1, "b", 40, 5))
    assert preferred_read_replica(RACK_AWARE, "b", LEADER, fs, 50) == -1
    assert preferred_read_replica(RACK_AWARE, "b", LEADER, fs, 40) == 1


def test_among_several_the_highest_log_end_then_the_latest_caught_up() -> None:
    fs = followers((1, "b", 90, 9), (2, "b", 95, 1), (3, "b", 95, 7))
    assert preferred_read_replica(RACK_AWARE, "b", LEADER, fs, 50) == 3
