"""Tests for tierlog.broker.group.group: transitions, members, protocols, offset expiry."""

from __future__ import annotations

import pytest

from tierlog.broker.group.group import (
    GroupMetadata,
    GroupState,
    InvalidTransitionError,
    MemberMetadata,
)
from tierlog.broker.group.offsets_codec import OffsetCommitValue

S = GroupState
T0 = 1_000_000


def member(
    member_id: str, protocols: list[tuple[str, bytes]], iid: str | None = None
) -> MemberMetadata:
    return MemberMetadata(member_id, iid, "client", "/h", 1000, 500, "consumer", protocols)


ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
} | {(s, S.DEAD) for s in S}


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transitions(source: GroupState, target: GroupState) -> None:
    group = GroupMetadata("g", T0, source)
    if (source, target) in ALLOWED:
        group.transition_to(target, T0 + 5)
        assert group.state is target
        assert group.current_state_timestamp == T0 + 5
    else:
        with pytest.raises(InvalidTransitionError):
            group.transition_to(target, T0 + 5)


def test_state_names_are_kafkas() -> None:
    assert [s.value for s in S] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]


def test_first_member_sets_type_and_leader_and_leader_moves_on_remove() -> None:
    group = GroupMetadata("g", T0)
    group.add(member("a", [("range", b"")]))
    group.add(member("b", [("range", b"")]))
    assert group.protocol_type == "consumer"
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def test_select_protocol_among_common_protocols_by_vote() -> None:
    group = GroupMetadata("g", T0)
    group.add(member("a", [("range", b"1"), ("roundrobin", b"2"), ("sticky", b"3")]))
    group.add(member("b", [("roundrobin", b""), ("range", b"")]))
    group.add(member("c", [("roundrobin", b""), ("range", b"")]))
    assert sorted(group.candidate_protocols()) == ["range", "roundrobin"]
    assert group.select_protocol() == "roundrobin"  # two votes to one
    group.remove("c")
    assert group.select_protocol() == "range"  # a tie: the earliest member's vote


def test_supports_protocols() -> None:
    group = GroupMetadata("g", T0)
    assert group.supports_protocols("consumer", ["range"])
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])
    group.add(member("a", [("range", b"")]))
    group.transition_to(S.PREPARING_REBALANCE, T0)
    assert group.supports_protocols("consumer", ["x", "range"])
    assert not group.supports_protocols("consumer", ["x"])
    assert not group.supports_protocols("connect", ["range"])


def test_static_members_fencing_and_replacement() -> None:
    group = GroupMetadata("g", T0)
    group.add(member("old", [("range", b"")], iid="i1"))
    assert group.current_static_member_id("i1") == "old"
    assert not group.is_static_member_fenced("old", "i1")
    assert group.is_static_member_fenced("other", "i1")
    assert not group.is_static_member_fenced("x", None)
    replaced = group.replace_static_member("i1", "old", "new")
    assert replaced.member_id == "new" and group.leader_id == "new"
    assert group.is_static_member_fenced("old", "i1")
    assert list(group.members) == ["new"]


def test_init_next_generation() -> None:
    group = GroupMetadata("g", T0)
    group.add(member("a", [("range", b"")]))
    group.transition_to(S.PREPARING_REBALANCE, T0)
    group.init_next_generation(T0 + 1)
    assert (group.state, group.generation_id, group.protocol_name) == (
        S.COMPLETING_REBALANCE,
        1,
        "range",
    )
    assert group.pending_sync_members == {"a"}
    group.remove("a")
    group.transition_to(S.PREPARING_REBALANCE, T0 + 2)
    group.init_next_generation(T0 + 3)
    assert (group.state, group.generation_id, group.protocol_name) == (S.EMPTY, 2, None)


def test_describe_shows_metadata_only_when_stable() -> None:
    group = GroupMetadata("g", T0)
    m = member("a", [("range", b"meta")])
    m.assignment = b"assigned"
    group.add(m)
    group.transition_to(S.PREPARING_REBALANCE, T0)
    group.init_next_generation(T0)
    described = group.describe()
    assert (described.state, described.protocol) == ("CompletingRebalance", "")
    assert described.members[0].metadata == b""
    group.transition_to(S.STABLE, T0)
    described = group.describe()
    assert (described.state, described.protocol) == ("Stable", "range")
    assert (described.members[0].metadata, described.members[0].assignment) == (
        b"meta",
        b"assigned",
    )


# ------------------------------------------------------------------ offset expiration

DAY = 24 * 3600 * 1000


def with_offsets(group: GroupMetadata, **commit_times: int) -> GroupMetadata:
    for topic, ts in commit_times.items():
        group.offsets[(topic, 0)] = OffsetCommitValue(1, -1, "", ts)
    return group


def test_simple_group_expires_each_offset_from_its_commit() -> None:
    group = with_offsets(GroupMetadata("g", T0), old=T0, new=T0 + DAY)
    assert group.protocol_type is None
    assert group.expired_offsets(T0 + DAY, DAY) == [("old", 0)]


def test_empty_consumer_group_counts_from_when_it_became_empty() -> None:
    group = with_offsets(GroupMetadata("g", T0), old=T0 - 10 * DAY)
    group.protocol_type = "consumer"
    group.current_state_timestamp = T0
    assert group.expired_offsets(T0 + DAY - 1, DAY) == []
    assert group.expired_offsets(T0 + DAY, DAY) == [("old", 0)]
    group.current_state_timestamp = None  # unknown (old record): from the commit
    assert group.expired_offsets(T0, DAY) == [("old", 0)]


def test_stable_consumer_group_keeps_subscribed_topics() -> None:
    group = with_offsets(GroupMetadata("g", T0, S.STABLE), sub=T0, unsub=T0)
    group.protocol_type = "consumer"
    group.subscribed_topics = {"sub"}
    assert group.expired_offsets(T0 + DAY, DAY) == [("unsub", 0)]
    group.subscribed_topics = None  # unknown subscriptions: keep everything
    assert group.expired_offsets(T0 + DAY, DAY) == []


def test_explicit_expire_timestamp_and_pending_commits() -> None:
    group = GroupMetadata("g", T0)
    group.offsets[("t", 0)] = OffsetCommitValue(1, -1, "", T0, T0 + 5)
    group.offsets[("t", 1)] = OffsetCommitValue(1, -1, "", T0)
    assert group.expired_offsets(T0 + 5, DAY) == [("t", 0)]
    group.pending_offset_commits[("t", 0)] += 1
    assert group.expired_offsets(T0 + 5, DAY) == []
