"""What the consumer group protocol needs to know about the cluster's topics.

KIP-848 speaks topic ids on the wire (a member reports its owned partitions by topic id and
is assigned partitions by topic id) and topic names in subscriptions. ``TopicsView`` is the
minimal read-only view the protocol's logic takes: each topic's id, name and partition
count, and a ``version`` that grows whenever any of them changes (Kafka's metadata image
offset), so that resolved regular expressions know when they are out of date.

The broker passes its own view (the next stage wires the replica manager's metadata);
``TopicsImage`` is the plain immutable implementation used by tests and benchmarks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic as the group protocol sees it."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


class TopicsView(Protocol):
    """Read-only topic metadata; ``version`` grows with every change to it."""

    @property
    def version(self) -> int: ...

    def by_name(self, name: str) -> TopicInfo | None: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def names(self) -> Iterable[str]: ...


@dataclass(frozen=True)
class TopicsImage:
    """An immutable ``TopicsView`` built from a list of topics.

    ``with_topic`` and ``without_topic`` return a new image with ``version`` + 1, as a
    metadata change would.
    """

    topics: tuple[TopicInfo, ...] = ()
    version: int = 0
    _by_name: Mapping[str, TopicInfo] = field(init=False, repr=False, compare=False)
    _by_id: Mapping[uuid.UUID, TopicInfo] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {t.name: t for t in self.topics}
        by_id = {t.topic_id: t for t in self.topics}
        if len(by_name) != len(self.topics) or len(by_id) != len(self.topics):
            raise ValueError("topic names and ids must be unique")
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_id", by_id)

    @classmethod
    def of(cls, topics: Mapping[str, int], version: int = 1) -> TopicsImage:
        """Topics by name with their partition counts; ids derived from the names (stable
        across calls, so tests and benchmarks are reproducible)."""
        return cls(
            tuple(TopicInfo(topic_id_for(n), n, p) for n, p in sorted(topics.items())), version
        )

    def by_name(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def names(self) -> Iterator[str]:
        return iter(self._by_name)

    def with_topic(
        self, name: str, num_partitions: int, topic_id: uuid.UUID | None = None
    ) -> TopicsImage:
        """A new image where ``name`` has ``num_partitions`` (added, or its count changed)."""
        old = self._by_name.get(name)
        tid = topic_id or (old.topic_id if old else topic_id_for(name))
        kept = tuple(t for t in self.topics if t.name != name)
        return TopicsImage((*kept, TopicInfo(tid, name, num_partitions)), self.version + 1)

    def without_topic(self, name: str) -> TopicsImage:
        """A new image without ``name`` (deleted)."""
        return TopicsImage(tuple(t for t in self.topics if t.name != name), self.version + 1)


def topic_id_for(name: str) -> uuid.UUID:
    """A stable id for a topic name (tests and benchmarks; brokers use the real ids)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"tierlog-topic:{name}")
