"""Helpers for the tests of the consumer protocol wired into the group coordinator: a
coordinator with a consumer config sized for tests, a topics view the test can change, and
ConsumerGroupHeartbeat calls as a client makes them."""

from __future__ import annotations

import uuid
from typing import Any

from tests.broker.group.helpers import FakeLog, make_coordinator
from tierlog.broker.group import GroupCoordinator
from tierlog.broker.group.consumer.config import ConsumerGroupConfig
from tierlog.broker.group.consumer.embedded import (
    ConsumerAssignment,
    ConsumerSubscription,
    encode_assignment,
    encode_subscription,
)
from tierlog.broker.group.consumer.member import Assignment
from tierlog.broker.group.consumer.requests import HeartbeatRequest
from tierlog.broker.group.consumer.topics import TopicsImage
from tierlog.broker.group.consumer_groups import HeartbeatAnswer

GROUP = "g"
REBALANCE_TIMEOUT_MS = 30_000


class Topics:
    """A topics view the test changes (``add``, ``remove``), as metadata changes would."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.image = TopicsImage.of(topics)

    def __call__(self) -> TopicsImage:
        return self.image

    def add(self, name: str, partitions: int) -> None:
        self.image = self.image.with_topic(name, partitions)

    def remove(self, name: str) -> None:
        self.image = self.image.without_topic(name)

    def id(self, name: str) -> uuid.UUID:
        info = self.image.by_name(name)
        assert info is not None
        return info.topic_id


def consumer_coordinator(
    log: FakeLog, topics: Topics, *, partitions: list[int] | None = None, **config: Any
) -> GroupCoordinator:
    """A coordinator whose consumer groups time out in ``session_timeout_ms`` (default 45 s,
    Kafka's; tests of timers pass less)."""
    session = config.pop("session_timeout_ms", 45_000)
    heartbeat = config.pop("heartbeat_interval_ms", min(5_000, session // 2))
    consumer_config = ConsumerGroupConfig(
        session_timeout_ms=session,
        min_session_timeout_ms=min(session, 45_000),
        heartbeat_interval_ms=heartbeat,
        min_heartbeat_interval_ms=min(heartbeat, 5_000),
        **{k: config.pop(k) for k in list(config) if k in ConsumerGroupConfig.__slots__},
    )
    return make_coordinator(
        log, partitions=partitions, consumer_config=consumer_config, topics=topics, **config
    )


def owned_of(assignment: Assignment | None) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(p))) for t, p in sorted((assignment or {}).items()))


async def join(
    c: GroupCoordinator,
    member_id: str,
    topics: tuple[str, ...] = ("foo",),
    *,
    regex: str | None = None,
    group_id: str = GROUP,
    **fields: Any,
) -> HeartbeatAnswer:
    return await c.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=group_id,
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", REBALANCE_TIMEOUT_MS),
            subscribed_topic_names=None if regex is not None else topics,
            subscribed_topic_regex=regex,
            topic_partitions=(),
            client_id="client-" + member_id,
            client_host="/127.0.0.1",
            **fields,
        )
    )


async def beat(
    c: GroupCoordinator, member_id: str, *, group_id: str = GROUP, **fields: Any
) -> HeartbeatAnswer:
    """A heartbeat reporting what the coordinator thinks the member owns, at its epoch
    (a member the group no longer has must be given both)."""
    group = c.consumer.group(group_id)
    member = None if group is None else group.members.get(member_id)
    if member is not None:
        fields.setdefault("member_epoch", member.member_epoch)
        fields.setdefault("topic_partitions", owned_of(member.assigned))
    return await c.consumer_group_heartbeat(
        HeartbeatRequest(group_id=group_id, member_id=member_id, **fields)
    )


async def settle(c: GroupCoordinator, member_ids: list[str], rounds: int = 10) -> None:
    """Heartbeat every member until the group is Stable."""
    for _ in range(rounds):
        for member_id in member_ids:
            answer = await beat(c, member_id)
            assert answer.error == 0, answer
        group = c.consumer.group(GROUP)
        assert group is not None
        if group.state.value == "Stable":
            return
    raise AssertionError("the group did not become Stable")


def subscription(
    topics: tuple[str, ...], owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
) -> bytes:
    """A classic consumer's JoinGroup metadata (ConsumerProtocolSubscription v3)."""
    return encode_subscription(ConsumerSubscription(topics, owned_partitions=owned))


def classic_assignment(partitions: tuple[tuple[str, tuple[int, ...]], ...]) -> bytes:
    return encode_assignment(ConsumerAssignment(partitions))
