"""The groups of one ``__consumer_offsets`` partition, as built by replaying its records.

``GroupLookup`` is all the protocol's logic reads: the consumer group of an id, or the
classic group of that id (a group id names one group of one type). ``ConsumerGroupStore``
is an in-memory implementation that replays ``Record`` values in log order: the one the
tests and benchmarks use, and the shape the group coordinator's store takes on when the
protocol is wired in (it then holds the classic groups itself; here a classic group is
only the ``ClassicGroupView`` its GroupMetadata record gives).

Replay rules (Kafka's ``GroupMetadataManager.replay``): a record with a value creates its
group if needed; a tombstone for something already gone is ignored (compaction may have
removed what it deletes); the ConsumerGroupMetadata tombstone deletes the group, which must
have no members left. A classic group and a consumer group never share an id: a record of
one type for an id held by a non-empty group of the other type is a ``ReplayError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from tierlog.broker.group.consumer.errors import ReplayError
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.migration import ClassicGroupView, classic_view_from_record
from tierlog.broker.group.consumer.records import GroupEpochKey, Record
from tierlog.broker.group.offsets_codec import GroupMetadataKey, GroupMetadataValue


class GroupLookup(Protocol):
    """Read access to the groups of the coordinator's partitions."""

    def consumer_group(self, group_id: str) -> ConsumerGroup | None: ...

    def classic_group(self, group_id: str) -> ClassicGroupView | None: ...


class ConsumerGroupStore:
    """Consumer groups (and views of classic groups) rebuilt from their records."""

    def __init__(self) -> None:
        self._groups: dict[str, ConsumerGroup] = {}
        self._classic: dict[str, ClassicGroupView] = {}

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def classic_group(self, group_id: str) -> ClassicGroupView | None:
        return self._classic.get(group_id)

    def group_ids(self) -> Iterator[str]:
        return iter(self._groups)

    def groups(self) -> list[ConsumerGroup]:
        return list(self._groups.values())

    def put(self, group: ConsumerGroup) -> None:
        """Hold ``group`` (rebuilt elsewhere: a coordinator loading its partition)."""
        self._groups[group.group_id] = group
        self._classic.pop(group.group_id, None)

    def pop(self, group_id: str) -> ConsumerGroup | None:
        """Forget ``group_id``'s consumer group (its partition was unloaded)."""
        return self._groups.pop(group_id, None)

    def replay_all(self, records: Iterable[Record]) -> None:
        for record in records:
            self.replay(record)

    def replay(self, record: Record) -> None:
        """Apply one record, in log order.

        Raises:
            ReplayError: the record contradicts the state (see the module docstring).
        """
        key, value = record.key, record.value
        if isinstance(key, GroupMetadataKey):
            self._replay_classic(key.group, value)
            return
        if isinstance(value, GroupMetadataValue):
            raise ReplayError(f"a classic group value under a consumer group key {key}")
        group = self._groups.get(key.group_id)
        if value is None:
            if group is None:
                return
            if isinstance(key, GroupEpochKey):
                if group.members:
                    raise ReplayError(
                        f"group {key.group_id} deleted while it has members {sorted(group.members)}"
                    )
                del self._groups[key.group_id]
                return
            group.apply(key, None)
            return
        if group is None:
            classic = self._classic.get(key.group_id)
            if classic is not None and not classic.is_empty:
                raise ReplayError(f"group {key.group_id} is a classic group with members")
            self._classic.pop(key.group_id, None)
            group = self._groups[key.group_id] = ConsumerGroup(key.group_id)
        group.apply(key, value)

    def _replay_classic(self, group_id: str, value: object) -> None:
        if value is None:
            self._classic.pop(group_id, None)
            return
        assert isinstance(value, GroupMetadataValue)
        consumer = self._groups.get(group_id)
        if consumer is not None:
            raise ReplayError(f"group {group_id} is a consumer group")
        self._classic[group_id] = classic_view_from_record(group_id, value)
