"""Property tests of the whole protocol: random runs of members joining, heartbeating, losing
responses, changing subscriptions, leaving, crashing and timing out, while topics grow
(hypothesis' stateful testing).

Each simulated member behaves like Kafka's consumer: it takes the new partitions of an
assignment at once, but gives up the ones the assignment no longer lists only when its
revocation callbacks are done (a separate step, so other members heartbeat meanwhile);
every heartbeat reports what it still owns; on FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID it
gives everything up and rejoins with epoch 0. Checked after every step:

* no partition is owned by two members at once, on the coordinator (replaying the records
  raises otherwise) and on the members' side;
* a member owns only what the coordinator has assigned to it or is revoking from it;
* a coordinator rebuilt from the records written so far (through the byte codec) has
  exactly the live coordinator's state (failover).

At the end, with no more disturbance, every member heartbeats until the group is Stable,
which must happen within a bounded number of rounds: then every subscribed partition is
assigned to exactly one member, each member owns exactly its target, and one more round of
heartbeats writes nothing.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tierlog.broker.group.consumer import ConsumerGroupConfig, ConsumerGroupStore, GroupState
from tierlog.broker.group.consumer.errors import FencedMemberEpochError, UnknownMemberIdError
from tierlog.broker.group.consumer.requests import HeartbeatRequest

from .helpers import GROUP, Harness, owned_of

MEMBER_IDS = [f"m{i}" for i in range(6)]
TOPIC_NAMES = ["t0", "t1", "t2"]


@dataclass
class Client:
    member_id: str
    topics: tuple[str, ...]
    assignor: str | None = None
    epoch: int = 0
    owned: set[tuple[uuid.UUID, int]] = field(default_factory=set)
    releasing: set[tuple[uuid.UUID, int]] = field(default_factory=set)
    send_subscription: bool = True
    # After an error (a lost response), a client sends a full heartbeat, which is always
    # answered with its whole assignment (Kafka's clients do: HeartbeatState.reset()).
    send_full: bool = False

    def hear(self, assignment: dict[uuid.UUID, frozenset[int]]) -> None:
        given = {(t, p) for t, ps in assignment.items() for p in ps}
        self.releasing |= self.owned - given
        self.owned |= given

    def finish_revoking(self) -> None:
        self.owned -= self.releasing
        self.releasing = set()

    def owned_field(self) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
        by_topic: dict[uuid.UUID, set[int]] = {}
        for t, p in self.owned:
            by_topic.setdefault(t, set()).add(p)
        return owned_of({t: frozenset(ps) for t, ps in by_topic.items()})

    def request(self) -> HeartbeatRequest:
        if self.epoch == 0:
            return HeartbeatRequest(
                GROUP,
                self.member_id,
                0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=self.topics,
                server_assignor=self.assignor,
                topic_partitions=(),
            )
        if self.send_full:
            return HeartbeatRequest(
                GROUP,
                self.member_id,
                self.epoch,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=self.topics,
                server_assignor=self.assignor,
                topic_partitions=self.owned_field(),
            )
        return HeartbeatRequest(
            GROUP,
            self.member_id,
            self.epoch,
            subscribed_topic_names=self.topics if self.send_subscription else None,
            topic_partitions=self.owned_field(),
        )


def snapshot(store: ConsumerGroupStore) -> Any:
    """Everything a group's state holds, comparable across stores."""
    group = store.consumer_group(GROUP)
    if group is None:
        return None
    owners = {
        tp: group.partition_owner(*tp)
        for m in group.members.values()
        for tp in m.owned_partitions()
    }
    return (
        group.group_epoch,
        group.assignment_epoch,
        group.members,
        group.target,
        group.static_members,
        group.subscription_metadata,
        group.resolved_regexes,
        owners,
    )


class ConsumerGroupRun(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.harness = Harness({"t0": 3, "t1": 2})
        self.clients: dict[str, Client] = {}

    @initialize(assignor=st.sampled_from(["uniform", "range"]))
    def configure(self, assignor: str) -> None:
        self.harness = Harness(
            {"t0": 3, "t1": 2},
            config=ConsumerGroupConfig(
                assignors=(assignor, "uniform") if assignor == "range" else ("uniform", "range")
            ),
        )

    # ------------------------------------------------------------- a member's heartbeat

    def send(self, client: Client, lose_response: bool = False) -> None:
        try:
            outcome = self.harness.protocol.heartbeat(client.request())
        except (FencedMemberEpochError, UnknownMemberIdError):
            client.epoch, client.owned, client.releasing = 0, set(), set()
            return
        self.harness.write(outcome)
        client.send_subscription = False
        if lose_response:
            client.send_full = True
            return
        client.send_full = False
        response = outcome.response
        assert response is not None
        client.epoch = response.member_epoch
        if response.assignment is not None:
            client.hear(dict(response.assignment))

    # ------------------------------------------------------------- rules

    @rule(
        member_id=st.sampled_from(MEMBER_IDS),
        topics=st.sets(st.sampled_from(TOPIC_NAMES), min_size=1).map(lambda s: tuple(sorted(s))),
        assignor=st.sampled_from([None, None, "uniform", "range"]),
    )
    def join(self, member_id: str, topics: tuple[str, ...], assignor: str | None) -> None:
        if member_id not in self.clients:
            self.clients[member_id] = Client(member_id, topics, assignor)
            self.send(self.clients[member_id])

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data(), lose=st.booleans())
    def heartbeat(self, data: st.DataObject, lose: bool) -> None:
        client = self.clients[data.draw(st.sampled_from(sorted(self.clients)))]
        self.send(client, lose_response=lose and data.draw(st.integers(0, 3)) == 0)

    @precondition(lambda self: any(c.releasing for c in self.clients.values()))
    @rule(data=st.data())
    def revocation_done(self, data: st.DataObject) -> None:
        releasing = sorted(m for m, c in self.clients.items() if c.releasing)
        self.clients[data.draw(st.sampled_from(releasing))].finish_revoking()

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data(), topics=st.sets(st.sampled_from(TOPIC_NAMES), min_size=1))
    def change_subscription(self, data: st.DataObject, topics: set[str]) -> None:
        client = self.clients[data.draw(st.sampled_from(sorted(self.clients)))]
        client.topics = tuple(sorted(topics))
        client.send_subscription = True
        self.send(client)

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        client = self.clients.pop(data.draw(st.sampled_from(sorted(self.clients))))
        if client.epoch > 0:
            # UNKNOWN_MEMBER_ID: a timeout removed it already.
            with contextlib.suppress(UnknownMemberIdError):
                leave = HeartbeatRequest(GROUP, client.member_id, -1)
                self.harness.write(self.harness.protocol.heartbeat(leave))

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        # Gone without a word: only its session timeout removes it.
        del self.clients[data.draw(st.sampled_from(sorted(self.clients)))]

    @rule(ms=st.integers(1_000, 50_000))
    def time_passes(self, ms: int) -> None:
        self.harness.advance(ms)

    @rule(topic=st.sampled_from(TOPIC_NAMES), partitions=st.integers(1, 4))
    def topic_grows(self, topic: str, partitions: int) -> None:
        info = self.harness.topics.by_name(topic)
        count = (info.num_partitions if info else 0) + partitions
        self.harness.topics = self.harness.topics.with_topic(topic, count)

    # ------------------------------------------------------------- invariants

    def live_clients(self) -> list[Client]:
        group = self.harness.group
        members = group.members if group is not None else {}
        return [c for c in self.clients.values() if c.member_id in members]

    @invariant()
    def nobody_shares_a_partition(self) -> None:
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for client in self.live_clients():
            for tp in client.owned:
                other = seen.setdefault(tp, client.member_id)
                assert other == client.member_id, f"{tp}: {other} and {client}"

    @invariant()
    def members_own_only_what_they_were_given(self) -> None:
        group = self.harness.group
        for client in self.live_clients():
            member = group.members[client.member_id]
            assert client.owned <= set(member.owned_partitions()), (client, member)

    @invariant()
    def a_failover_rebuilds_the_same_state(self) -> None:
        assert snapshot(self.harness.failover()) == snapshot(self.harness.store)

    # ------------------------------------------------------------- the end

    def teardown(self) -> None:
        clients = list(self.clients.values())
        if not clients:
            return
        group = self.harness.group
        for _ in range(40):
            for client in clients:
                client.finish_revoking()
                self.send(client)
            group = self.harness.group
            settled = (
                group is not None
                and group.state is GroupState.STABLE
                and all(
                    c.member_id in group.members
                    and c.epoch == group.members[c.member_id].member_epoch
                    and c.owned == set(group.members[c.member_id].owned_partitions())
                    for c in clients
                )
            )
            if settled and set(group.members) == {c.member_id for c in clients}:
                break
            # Members fenced while still known wait out their session; crashed ones too.
            self.harness.advance(5_000)
        else:
            raise AssertionError(f"no stable group after 40 rounds: {group and group.state}")
        assert group is not None
        wanted = {
            (info.topic_id, p)
            for c in clients
            for name in c.topics
            if (info := self.harness.topics.by_name(name)) is not None
            for p in range(info.num_partitions)
        }
        given = [tp for m in group.members.values() for tp in m.owned_partitions()]
        assert sorted(given) == sorted(wanted)
        for member in group.members.values():
            assert member.assigned == group.target[member.member_id]
        before = len(self.harness.log)
        for client in clients:
            self.send(client)
        assert len(self.harness.log) == before, "a stable group wrote records"


ConsumerGroupRun.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None
)
test_consumer_group_runs = ConsumerGroupRun.TestCase
