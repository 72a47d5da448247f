"""Tests for regular expression subscriptions and subscription metadata
(tierlog.broker.group.consumer.subscriptions, through the heartbeat)."""

from __future__ import annotations

import pytest

from tierlog.broker.group.consumer.errors import InvalidRegularExpressionError
from tierlog.broker.group.consumer.group import ResolvedRegex
from tierlog.broker.group.consumer.records import RegexKey
from tierlog.broker.group.consumer.subscriptions import compile_regex, needs_resolving, resolve
from tierlog.broker.group.consumer.topics import TopicsImage
from tierlog.protocol.errors import ErrorCode

from .helpers import Harness

TOPICS = {"orders": 2, "orders-v2": 1, "reorders": 1, "payments": 3, "__consumer_offsets": 2}


def test_a_regex_matches_whole_topic_names_internal_topics_included() -> None:
    image = TopicsImage.of(TOPICS, version=7)
    assert resolve("orders", image, 5).topics == {"orders"}
    assert resolve("orders.*", image, 5).topics == {"orders", "orders-v2"}
    assert resolve(".*", image, 5) == ResolvedRegex(frozenset(TOPICS), 7, 5)
    assert resolve(".*", image, 5, allowed=lambda n: n != "payments").topics == (
        set(TOPICS) - {"payments"}
    )


@pytest.mark.parametrize("pattern", ["(", "a{1001}", "\\C", "(?P<x>a)(?P<x>b)", "(?=a)"])
def test_patterns_re2j_refuses_are_invalid_regular_expressions(pattern: str) -> None:
    with pytest.raises(InvalidRegularExpressionError) as raised:
        compile_regex(pattern)
    assert raised.value.code == ErrorCode.invalid_regular_expression


def test_when_a_resolution_is_out_of_date() -> None:
    image = TopicsImage.of(TOPICS, version=3)
    fresh = ResolvedRegex(frozenset(), 3, 1_000)
    assert not needs_resolving(fresh, image, 1_000 + 599_999, 600_000)
    assert needs_resolving(fresh, image, 1_000 + 600_000, 600_000)
    assert needs_resolving(ResolvedRegex(frozenset(), 2, 1_000), image, 1_000, 600_000)
    assert needs_resolving(None, image, 0, 600_000)


def test_a_regex_member_is_assigned_the_matching_topics() -> None:
    harness = Harness(TOPICS)
    outcome = harness.join("a", regex="orders.*")
    assert outcome.response is not None
    assert outcome.response.assignment == {
        harness.topic_id("orders"): frozenset({0, 1}),
        harness.topic_id("orders-v2"): frozenset({0}),
    }
    resolved = [r for r in outcome.records if isinstance(r.key, RegexKey)]
    assert [r.key for r in resolved] == [RegexKey("g", "orders.*")]


def test_an_invalid_regex_is_refused_and_nothing_is_written() -> None:
    harness = Harness(TOPICS)
    with pytest.raises(InvalidRegularExpressionError) as raised:
        harness.join("a", regex="orders(")
    assert raised.value.code == ErrorCode.invalid_regular_expression
    assert harness.log == [] and harness.group is None


def test_a_new_matching_topic_is_picked_up_by_the_next_heartbeat() -> None:
    harness = Harness(TOPICS)
    harness.join("a", regex="orders.*")
    epoch = harness.group.group_epoch
    harness.topics = harness.topics.with_topic("orders-eu", 2)
    outcome = harness.beat("a")
    assert harness.group.group_epoch == epoch + 1
    assert outcome.response is not None and outcome.response.assignment is not None
    assert outcome.response.assignment[harness.topic_id("orders-eu")] == frozenset({0, 1})


def test_a_metadata_change_elsewhere_re_resolves_but_does_not_rebalance() -> None:
    harness = Harness(TOPICS)
    harness.join("a", regex="orders.*")
    epoch = harness.group.group_epoch
    harness.topics = harness.topics.with_topic("audit", 1)
    outcome = harness.beat("a")
    assert [type(r.key) for r in outcome.records] == [RegexKey]  # new version stamp only
    assert harness.group.group_epoch == epoch
    assert harness.beat("a").records == ()  # resolved at this version now


def test_the_last_subscriber_leaving_deletes_the_resolution() -> None:
    harness = Harness(TOPICS)
    harness.join("a", regex="orders.*")
    harness.join("b", regex="orders.*")
    harness.heartbeat(member_id="a", member_epoch=-1)
    assert "orders.*" in harness.group.resolved_regexes
    outcome = harness.heartbeat(member_id="b", member_epoch=-1)
    assert any(isinstance(r.key, RegexKey) and r.value is None for r in outcome.records)
    assert harness.group.resolved_regexes == {}


def test_switching_from_names_to_a_regex_rebalances() -> None:
    harness = Harness(TOPICS)
    harness.join("a", ("payments",))
    epoch = harness.group.group_epoch
    harness.beat("a", subscribed_topic_names=(), subscribed_topic_regex="orders")
    harness.settle(["a"])
    assert harness.group.group_epoch == epoch + 1
    assert harness.group.members["a"].assigned == {harness.topic_id("orders"): frozenset({0, 1})}
    assert set(harness.group.subscription_metadata) == {"orders"}
