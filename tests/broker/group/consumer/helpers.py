"""A coordinator-shaped harness around the consumer group protocol's pure logic.

``Harness`` plays the coordinator's part: it sends a heartbeat, writes the outcome's records
through the byte codec (encode, then decode: what a coordinator reading its partition back
gets) into a ``ConsumerGroupStore``, applies the timer operations to a ``Deadlines`` table on
a ``ManualClock``, and fires due timers when the clock moves. Every record ever written is
kept, so a test can replay them into a fresh store (a coordinator failover).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from tierlog.broker.group.consumer import (
    ConsumerGroupConfig,
    ConsumerGroupProtocol,
    ConsumerGroupStore,
    HeartbeatRequest,
    Outcome,
    Record,
    TopicsImage,
)
from tierlog.broker.group.consumer.member import Assignment
from tierlog.broker.group.consumer.record_codec import decode_record, encode_record
from tierlog.broker.group.consumer.timers import Deadlines
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    decode_group_metadata_value,
)
from tierlog.util.clock import ManualClock

GROUP = "g"
REBALANCE_TIMEOUT_MS = 30_000


def owned_of(assignment: Assignment | None) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    """An assignment as a heartbeat's TopicPartitions field."""
    return tuple((t, tuple(sorted(p))) for t, p in sorted((assignment or {}).items()))


def through_codec(record: Record) -> Record:
    """The record as a coordinator reads it back from the log."""
    key, value = encode_record(record)
    if isinstance(record.key, GroupMetadataKey):
        return Record(record.key, None if value is None else decode_group_metadata_value(value))
    decoded = decode_record(key, value)
    assert decoded is not None
    return decoded


class Harness:
    """One coordinator's consumer-group side, driven by hand (see the module docstring)."""

    def __init__(
        self,
        topics: Mapping[str, int] | TopicsImage | None = None,
        config: ConsumerGroupConfig | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.clock = ManualClock()
        self.topics = (
            topics if isinstance(topics, TopicsImage) else TopicsImage.of(topics or {"foo": 6})
        )
        self.log: list[Record] = []
        self.deadlines = Deadlines()
        self._ids = iter(f"generated-{i}" for i in range(10**6))
        self._overrides = overrides
        self.store = ConsumerGroupStore()
        self.protocol = self._protocol(config or ConsumerGroupConfig(), self.store)

    def _protocol(
        self, config: ConsumerGroupConfig, store: ConsumerGroupStore
    ) -> ConsumerGroupProtocol:
        return ConsumerGroupProtocol(
            config,
            store,
            lambda: self.topics,
            self.clock,
            new_member_id=lambda: next(self._ids),
            group_overrides=lambda gid: self._overrides,
        )

    @property
    def group(self) -> Any:
        return self.store.consumer_group(GROUP)

    def write(self, outcome: Outcome) -> Outcome:
        """Append (through the codec) and replay the records, then apply the timers."""
        records = [through_codec(r) for r in outcome.records]
        self.log += records
        self.store.replay_all(records)
        self.deadlines.apply(outcome.timers, self.clock.milliseconds())
        return outcome

    def heartbeat(self, **fields: Any) -> Outcome:
        fields.setdefault("group_id", GROUP)
        return self.write(self.protocol.heartbeat(HeartbeatRequest(**fields)))

    def join(
        self,
        member_id: str,
        topics: Iterable[str] = ("foo",),
        regex: str | None = None,
        **fields: Any,
    ) -> Outcome:
        return self.heartbeat(
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", REBALANCE_TIMEOUT_MS),
            subscribed_topic_names=None if regex is not None else tuple(topics),
            subscribed_topic_regex=regex,
            topic_partitions=(),
            **fields,
        )

    def beat(self, member_id: str, **fields: Any) -> Outcome:
        """A heartbeat reporting exactly what the coordinator thinks the member owns now."""
        member = self.group.members[member_id]
        fields.setdefault("member_epoch", member.member_epoch)
        fields.setdefault("topic_partitions", owned_of(member.assigned))
        return self.heartbeat(member_id=member_id, **fields)

    def settle(self, member_ids: Iterable[str], rounds: int = 10) -> None:
        """Heartbeat every member (acknowledging what it was told) until the group is
        Stable; fails if it is not after ``rounds`` rounds."""
        ids = list(member_ids)
        for _ in range(rounds):
            for member_id in ids:
                self.beat(member_id)
            if self.group.state.value == "Stable":
                return
        raise AssertionError(f"group not Stable after {rounds} rounds: {self.group.state}")

    def advance(self, ms: int) -> list[Outcome]:
        """Move the clock and fire the timers that came due, in deadline order."""
        self.clock.advance(ms)
        fired = []
        for timer in self.deadlines.due(self.clock.milliseconds()):
            fired.append(self.write(self.protocol.timer_fired(timer)))
        return fired

    def failover(self) -> ConsumerGroupStore:
        """A new coordinator's store, rebuilt from every record written so far."""
        store = ConsumerGroupStore()
        store.replay_all(self.log)
        return store

    def take_over(self, config: ConsumerGroupConfig | None = None) -> None:
        """Continue on a new coordinator built from the log, with ``config`` if given (a
        broker restarted with other settings). Timers carry over: in a broker the new
        coordinator re-arms them from the members' next heartbeats."""
        self.store = self.failover()
        self.protocol = self._protocol(config or self.protocol.config, self.store)

    def topic_id(self, name: str) -> uuid.UUID:
        info = self.topics.by_name(name)
        assert info is not None
        return info.topic_id
