"""Replica assignment of new topics (Kafka's AdminUtils rules, seed 004)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.broker.coordination.api import BrokerRegistration
from tierlog.broker.replication.replica_assignment import assign_replicas
from tierlog.broker.replication.topic_error import TopicError


def brokers(n: int, racks: list[str] | None = None) -> list[BrokerRegistration]:
    return [BrokerRegistration(i, "h", 9092, racks[i] if racks else None) for i in range(n)]


@given(
    n=st.integers(1, 9),
    partitions=st.integers(1, 40),
    rf=st.integers(1, 9),
    seed=st.integers(0, 1000),
)
def test_every_partition_gets_rf_distinct_brokers_and_leaders_spread(
    n: int, partitions: int, rf: int, seed: int
) -> None:
    if rf > n:
        with pytest.raises(TopicError):
            assign_replicas(brokers(n), partitions, rf, rng=random.Random(seed))
        return
    out = assign_replicas(brokers(n), partitions, rf, rng=random.Random(seed))
    assert sorted(out) == list(range(partitions))
    assert all(len(set(r)) == rf for r in out.values())
    leaders = Counter(r[0] for r in out.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in range(n)) <= 1


@given(racks=st.integers(2, 4), per_rack=st.integers(1, 3), seed=st.integers(0, 1000))
def test_with_racks_each_partition_spans_as_many_racks_as_it_can(
    racks: int, per_rack: int, seed: int
) -> None:
    names = [f"rack-{b % racks}" for b in range(racks * per_rack)]
    registered = brokers(len(names), names)
    rf = min(3, len(names))
    out = assign_replicas(registered, 24, rf, rng=random.Random(seed))
    for replicas in out.values():
        assert len(set(replicas)) == rf
        assert len({names[b] for b in replicas}) == min(rf, racks)
