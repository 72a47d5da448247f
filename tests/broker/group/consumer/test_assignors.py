"""Tests for the server assignors (tierlog.broker.group.consumer.assignors): Kafka's examples
for ``range``, and the properties both must keep (every subscribed partition assigned once,
to a subscriber), ``uniform``'s balance and stickiness (hypothesis)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.broker.group.consumer.assignors import (
    GroupSpec,
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
    assignors_by_name,
)
from tierlog.broker.group.consumer.errors import AssignorError
from tierlog.broker.group.consumer.member import Assignment, assignment_size
from tierlog.broker.group.consumer.topics import topic_id_for

T1, T2, T3 = (topic_id_for(n) for n in ("t1", "t2", "t3"))


def spec(members: Mapping[str, MemberSpec]) -> GroupSpec:
    return GroupSpec(dict(members))


def member(
    member_id: str,
    topics: set[uuid.UUID],
    current: Assignment | None = None,
    instance_id: str | None = None,
) -> MemberSpec:
    return MemberSpec(member_id, frozenset(topics), current or {}, instance_id)


def sizes(result: Mapping[str, Assignment]) -> dict[str, int]:
    return {m: assignment_size(a) for m, a in result.items()}


def check_complete(
    group: GroupSpec, partitions: Mapping[uuid.UUID, int], result: Mapping[str, Assignment]
) -> None:
    """Every subscribed partition goes to exactly one member, which subscribes to it."""
    assert set(result) == set(group.members)
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, assignment in result.items():
        for topic_id, parts in assignment.items():
            assert topic_id in group.members[member_id].subscribed_topic_ids
            for p in parts:
                assert 0 <= p < partitions[topic_id]
                assert (topic_id, p) not in seen, f"{topic_id}-{p} given twice"
                seen[(topic_id, p)] = member_id
    subscribed = {t for m in group.members.values() for t in m.subscribed_topic_ids}
    expected = {(t, p) for t in subscribed for p in range(partitions[t])}
    assert set(seen) == expected


# ----------------------------------------------------------------- range


def test_range_is_co_partitioned_as_in_kafkas_example() -> None:
    # Kafka's RangeAssignor javadoc: M0 and M1 on T1 and T2 with 3 partitions each.
    group = spec({"M0": member("M0", {T1, T2}), "M1": member("M1", {T1, T2})})
    result = RangeAssignor().assign(group, {T1: 3, T2: 3})
    assert result == {
        "M0": {T1: frozenset({0, 1}), T2: frozenset({0, 1})},
        "M1": {T1: frozenset({2}), T2: frozenset({2})},
    }


def test_range_orders_static_members_by_instance_id_first() -> None:
    group = spec(
        {
            "a": member("a", {T1}),
            "z": member("z", {T1}, instance_id="i1"),
            "y": member("y", {T1}, instance_id="i0"),
        }
    )
    result = RangeAssignor().assign(group, {T1: 6})
    assert result["y"] == {T1: frozenset({0, 1})}
    assert result["z"] == {T1: frozenset({2, 3})}
    assert result["a"] == {T1: frozenset({4, 5})}
    # A restarted static member (new member id, same instance id) keeps its range.
    restarted = spec(
        {
            "a": member("a", {T1}),
            "z2": member("z2", {T1}, instance_id="i1"),
            "y": member("y", {T1}, instance_id="i0"),
        }
    )
    assert RangeAssignor().assign(restarted, {T1: 6})["z2"] == result["z"]


def test_range_per_topic_with_different_subscriptions() -> None:
    group = spec({"a": member("a", {T1}), "b": member("b", {T1, T2}), "c": member("c", {T2})})
    result = RangeAssignor().assign(group, {T1: 3, T2: 2})
    assert result == {
        "a": {T1: frozenset({0, 1})},
        "b": {T1: frozenset({2}), T2: frozenset({0})},
        "c": {T2: frozenset({1})},
    }


def test_range_with_more_members_than_partitions() -> None:
    group = spec({m: member(m, {T1}) for m in "abc"})
    result = RangeAssignor().assign(group, {T1: 2})
    assert result == {"a": {T1: frozenset({0})}, "b": {T1: frozenset({1})}, "c": {}}


# ----------------------------------------------------------------- uniform, examples


def test_uniform_spreads_a_new_group_evenly() -> None:
    group = spec({m: member(m, {T1, T2}) for m in "abc"})
    result = UniformAssignor().assign(group, {T1: 4, T2: 3})
    check_complete(group, {T1: 4, T2: 3}, result)
    assert sorted(sizes(result).values()) == [2, 2, 3]


def test_uniform_moves_only_what_a_newcomer_needs() -> None:
    before = {"a": {T1: frozenset(range(0, 3))}, "b": {T1: frozenset(range(3, 6))}}
    group = spec(
        {
            "a": member("a", {T1}, before["a"]),
            "b": member("b", {T1}, before["b"]),
            "c": member("c", {T1}),
        }
    )
    result = UniformAssignor().assign(group, {T1: 6})
    assert sizes(result) == {"a": 2, "b": 2, "c": 2}
    assert result["a"][T1] <= before["a"][T1] and result["b"][T1] <= before["b"][T1]


def test_uniform_drops_partitions_of_topics_no_longer_subscribed() -> None:
    group = spec({"a": member("a", {T2}, {T1: frozenset({0}), T2: frozenset({0})})})
    assert UniformAssignor().assign(group, {T2: 2}) == {"a": {T2: frozenset({0, 1})}}


def test_uniform_heterogeneous_gives_constrained_topics_to_their_only_subscriber() -> None:
    group = spec({"a": member("a", {T1, T2}), "b": member("b", {T2})})
    result = UniformAssignor().assign(group, {T1: 4, T2: 4})
    check_complete(group, {T1: 4, T2: 4}, result)
    assert result["a"] == {T1: frozenset(range(4))}
    assert result["b"] == {T2: frozenset(range(4))}


@pytest.mark.parametrize("assignor", [UniformAssignor(), RangeAssignor()])
def test_a_topic_without_metadata_is_an_assignor_error(assignor: object) -> None:
    group = spec({"a": member("a", {T1, T3})})
    with pytest.raises(AssignorError, match="no metadata"):
        assignor.assign(group, {T1: 1})  # type: ignore[attr-defined]


@pytest.mark.parametrize("assignor", [UniformAssignor(), RangeAssignor()])
def test_no_members_no_assignment(assignor: object) -> None:
    assert assignor.assign(spec({}), {T1: 3}) == {}  # type: ignore[attr-defined]


def test_registry_keeps_the_configured_order() -> None:
    registry = assignors_by_name(["range", "uniform"])
    assert list(registry) == ["range", "uniform"]
    assert isinstance(registry["uniform"], UniformAssignor)


# ----------------------------------------------------------------- properties

TOPICS = [topic_id_for(f"p{i}") for i in range(4)]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool) -> tuple[GroupSpec, dict[uuid.UUID, int]]:
    partitions = {t: draw(st.integers(0, 12)) for t in TOPICS}
    ids = draw(
        st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=8, unique=True)
    )
    shared = draw(st.sets(st.sampled_from(TOPICS), min_size=1))
    members = {}
    for member_id in ids:
        topics = shared if homogeneous else draw(st.sets(st.sampled_from(TOPICS)))
        # A current assignment, possibly stale: other topics, partitions past the end,
        # partitions another member also claims.
        current = draw(
            st.dictionaries(
                st.sampled_from(TOPICS), st.frozensets(st.integers(0, 14), min_size=1), max_size=3
            )
        )
        members[member_id] = member(member_id, topics, current)
    return spec(members), partitions


@given(groups(homogeneous=True))
@settings(max_examples=100, deadline=None)
def test_uniform_homogeneous_is_complete_and_balanced_within_one(
    case: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    group, partitions = case
    result = UniformAssignor().assign(group, partitions)
    check_complete(group, partitions, result)
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1


@given(groups(homogeneous=False))
@settings(max_examples=100, deadline=None)
def test_uniform_heterogeneous_is_complete_and_no_single_move_narrows_the_gap(
    case: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    group, partitions = case
    result = UniformAssignor().assign(group, partitions)
    check_complete(group, partitions, result)
    counts = sizes(result)
    for member_id, assignment in result.items():
        for topic_id in assignment:
            for other, spec_ in group.members.items():
                if topic_id in spec_.subscribed_topic_ids:
                    assert counts[other] >= counts[member_id] - 1


@given(st.booleans(), st.data())
@settings(max_examples=80, deadline=None)
def test_uniform_is_stable_when_nothing_changes(homogeneous: bool, data: st.DataObject) -> None:
    group, partitions = data.draw(groups(homogeneous=homogeneous))
    first = UniformAssignor().assign(group, partitions)
    again = spec(
        {m: member(m, set(s.subscribed_topic_ids), first[m]) for m, s in group.members.items()}
    )
    assert UniformAssignor().assign(again, partitions) == first


@given(groups(homogeneous=True))
@settings(max_examples=80, deadline=None)
def test_uniform_keeps_each_members_share_when_one_joins(
    case: tuple[GroupSpec, dict[uuid.UUID, int]],
) -> None:
    group, partitions = case
    first = UniformAssignor().assign(group, partitions)
    topics = set(next(iter(group.members.values())).subscribed_topic_ids)
    joined = {m: member(m, topics, first[m]) for m in group.members}
    joined["newcomer"] = member("newcomer", topics)
    second = UniformAssignor().assign(spec(joined), partitions)
    total = sum(partitions[t] for t in topics)
    floor_share = total // len(joined)
    for member_id, before in first.items():
        kept = sum(
            len(before.get(t, frozenset()) & second[member_id].get(t, frozenset())) for t in before
        )
        # Each old member keeps as much as balance allows, and gains nothing new.
        assert kept >= min(assignment_size(before), floor_share)
        assert assignment_size(second[member_id]) == kept


@given(st.booleans(), st.data())
@settings(max_examples=80, deadline=None)
def test_range_is_complete_and_deterministic(homogeneous: bool, data: st.DataObject) -> None:
    group, partitions = data.draw(groups(homogeneous=homogeneous))
    result = RangeAssignor().assign(group, partitions)
    check_complete(group, partitions, result)
    assert RangeAssignor().assign(group, partitions) == result
    if (
        homogeneous
        and len(set(partitions[t] for t in next(iter(group.members.values())).subscribed_topic_ids))
        == 1
    ):
        # Co-partitioned: each member has the same partition numbers of every topic.
        for assignment in result.values():
            assert len({parts for parts in assignment.values()}) <= 1
