"""Where a new topic's or partition's replicas go (Kafka's ``AdminUtils``: round robin from
a random start, rack-aware when every broker has a ``broker.rack``), and the checks of an
assignment a client gives (CreateTopics, CreatePartitions, Kafka's error messages). Pure:
the live brokers come in, the assignment goes out."""

from __future__ import annotations

import random
from collections.abc import Mapping

from tierlog.broker.coordination.api import BrokerRegistration
from tierlog.broker.replication.topic_error import (
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    TopicError,
)


def assign_replicas(
    brokers: list[BrokerRegistration],
    partitions: int,
    replication_factor: int,
    first_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's ``AdminUtils.assignReplicasToBrokers``: round-robin from a random start,
    followers on the next brokers (shifted once per round so followers spread too); when
    every broker has a ``broker.rack``, the brokers are first ordered alternating between
    racks and each partition's replicas go to as many different racks as there are
    (``assignReplicasToBrokersRackAware``)."""
    if replication_factor > len(brokers):
        raise TopicError(
            INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the "
            f"{len(brokers)} available broker(s)",
        )
    rng = rng or random.Random()
    racks = {b.broker_id: b.rack for b in brokers}
    ids = _rack_alternated(racks) if brokers and all(racks.values()) else sorted(racks)
    n = len(ids)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    rack_count = len(set(racks.values())) if all(racks.values()) else 0
    out = {}
    for k in range(partitions):
        p = first_partition + k
        if k > 0 and k % n == 0:
            shift += 1
        first = (start + k) % n
        replicas = [ids[first]]
        if rack_count:
            replicas += _rack_aware_followers(ids, racks, first, shift, replication_factor)
        else:
            for j in range(replication_factor - 1):
                replicas.append(ids[_replica_index(first, shift, j, n)])
        out[p] = replicas
    return out


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_alternated(racks: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered rack by rack in turn: a0, b0, c0, a1, b1, ... (Kafka's
    getRackAlternatedBrokerList), so consecutive brokers sit in different racks."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(racks):
        by_rack.setdefault(str(racks[broker_id]), []).append(broker_id)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max(len(q) for q in queues)):
        out += [q[i] for q in queues if i < len(q)]
    return out


def _rack_aware_followers(
    ids: list[int], racks: Mapping[int, str | None], first: int, shift: int, rf: int
) -> list[int]:
    """Followers of a partition led by ``ids[first]``: walk the rack-alternated list, taking
    a broker only if its rack has no replica yet (until every rack has one) and it has none
    itself (until every broker has one)."""
    n = len(ids)
    rack_count = len(set(racks.values()))
    leader = ids[first]
    taken, taken_racks = {leader}, {racks[leader]}
    followers: list[int] = []
    k = 0
    while len(followers) < rf - 1:
        broker = ids[_replica_index(first, shift * rack_count, k, n)]
        k += 1
        rack = racks[broker]
        if (rack in taken_racks and len(taken_racks) < rack_count) or (
            broker in taken and len(taken) < n
        ):
            continue
        followers.append(broker)
        taken.add(broker)
        taken_racks.add(rack)
    return followers


def check_assignment(
    replicas: Mapping[int, list[int]], live: set[int], first_partition: int = 0
) -> None:
    """Kafka's checks of an explicit replica assignment (CreateTopics, CreatePartitions):
    partitions ``first_partition``.. consecutive, each with at least one replica, no broker
    twice, the same count everywhere, only known brokers. Without them, CreateTopics with
    partitions {0, 5} or {1} stored a topic whose partitions were not 0..n-1 (and then
    failed with a KeyError), and [0, 0] made a replication factor of 2 on one broker.

    Raises:
        TopicError: INVALID_REPLICA_ASSIGNMENT naming the problem.
    """
    if sorted(replicas) != list(range(first_partition, first_partition + len(replicas))):
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT,
            f"partitions {sorted(replicas)} are not consecutive from {first_partition}",
        )
    for p, ids in replicas.items():
        if not ids:
            raise TopicError(INVALID_REPLICA_ASSIGNMENT, f"partition {p} has no replicas")
        if len(set(ids)) != len(ids):
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT, f"partition {p}: duplicate brokers in {ids}"
            )
    if len({len(ids) for ids in replicas.values()}) > 1:
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT, "all partitions must have the same number of replicas"
        )
    unknown = {b for ids in replicas.values() for b in ids} - live
    if unknown:
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT, f"unknown broker(s) {sorted(unknown)} in assignment"
        )
