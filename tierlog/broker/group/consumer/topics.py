"""What the consumer group protocol needs to know about the cluster's topics.

KIP-848 speaks topic ids on the wire (a member reports its owned partitions by topic id and
is assigned partitions by topic id) and topic names in subscriptions. ``TopicsView`` is the
minimal read-only view the protocol's logic takes: each topic's id, name and partition
count, and a ``version`` that changes whenever any of them changes (Kafka uses its metadata
image offset), so that resolved regular expressions know when they are out of date. Only
equality of versions is meaningful: the broker's view
(``tierlog.broker.group.cluster_topics``) derives its version from the topics themselves,
so that every coordinator of a group agrees on it after a failover.

``TopicsImage`` is the plain immutable implementation used by tests and benchmarks.
"""

from __future__ import annotations

import hashlib
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
    """Read-only topic metadata; ``version`` changes with every change to it."""

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


def content_version(topics: Iterable[TopicInfo]) -> int:
    """A version number derived from the topics themselves (names, ids, partition counts):
    equal for equal metadata on every broker, different after any change (to 63 bits), so
    that a regex resolved by one coordinator is not resolved again by the next for the
    same topics. Kafka uses its metadata log's offset, which ZooKeeper mode lacks."""
    digest = hashlib.blake2b(digest_size=8)
    for info in sorted(topics, key=lambda t: t.name):
        digest.update(f"{info.name}\0{info.topic_id}\0{info.num_partitions}\n".encode())
    return int.from_bytes(digest.digest(), "big") >> 1


def image_of(topics: Iterable[TopicInfo]) -> TopicsImage:
    """An image of ``topics`` whose version is their ``content_version``."""
    ordered = tuple(sorted(topics, key=lambda t: t.name))
    return TopicsImage(ordered, content_version(ordered))
