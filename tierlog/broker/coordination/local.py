"""Single-node coordination: the ``Coordinator`` interface kept in one JSON file.

File ``<first log dir>/tierlog-metadata.json``, replaced atomically on every change::

    {"version": 1, "cluster_id": "...", "next_producer_id": 2000,
     "topics": {"orders": {"topic_id": "<uuid>", "configs": {"retention.ms": "1000"},
                           "replicas": {"0": [0]},
                           "states": {"0": {"leader": 0, "leader_epoch": 3, "isr": [0],
                                            "partition_epoch": 0}}}}}

There is one broker, which is also the controller.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tierlog.broker.coordination.api import (
    AlterPartitionError,
    BrokerRegistration,
    CoordinationError,
    PartitionState,
    TopicExistsError,
    TopicMetadata,
    UnknownTopicError,
)

# Kafka error codes of AlterPartition refusals.
NOT_LEADER_OR_FOLLOWER = 6
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
INVALID_UPDATE_VERSION = 95
UNKNOWN_TOPIC_OR_PARTITION = 3

FILE_NAME = "tierlog-metadata.json"
VERSION = 1


class MetadataFileError(CoordinationError, ValueError):
    """``tierlog-metadata.json`` cannot be read; the message names the file, the problem
    and the way out (a ValueError, so the command line prints it as one line)."""


def new_cluster_id() -> str:
    """Kafka's form: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class LocalCoordinator:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self._topics: dict[str, TopicMetadata] = {}
        self._me: BrokerRegistration | None = None
        self._listeners: list[Callable[[], None]] = []
        self.cluster_id = new_cluster_id()
        self._next_producer_id = 0
        self._load()

    # -- persistence ---------------------------------------------------------------------

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("version") != VERSION:
                raise ValueError(f"unsupported version {doc.get('version')!r}")
            self.cluster_id = doc["cluster_id"]
            self._next_producer_id = int(doc.get("next_producer_id", 0))
            for name, t in doc["topics"].items():
                self._topics[name] = TopicMetadata(
                    name=name,
                    topic_id=uuid.UUID(t["topic_id"]),
                    replicas={int(p): list(r) for p, r in t["replicas"].items()},
                    configs=dict(t["configs"]),
                    partition_states={
                        int(p): PartitionState(
                            s["leader"],
                            s["leader_epoch"],
                            list(s["isr"]),
                            partition_epoch=int(s.get("partition_epoch", 0)),
                        )
                        for p, s in t["states"].items()
                    },
                )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Refuse to start rather than forget topics: the logs on disk would be orphaned.
            problem = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            if isinstance(exc, UnicodeDecodeError):
                problem = "not text"
            raise MetadataFileError(
                f"{self.path}: unreadable single-node metadata ({problem}); it holds the "
                "topics, their ids and configs: restore it from a backup, or move it away "
                "to start with no topics (the topic directories under log.dirs are then "
                "orphaned)"
            ) from None

    def _save(self) -> None:
        doc: dict[str, Any] = {
            "version": VERSION,
            "cluster_id": self.cluster_id,
            "next_producer_id": self._next_producer_id,
            "topics": {
                name: {
                    "topic_id": str(t.topic_id),
                    "configs": t.configs,
                    "replicas": {str(p): r for p, r in t.replicas.items()},
                    "states": {
                        str(p): {
                            "leader": s.leader,
                            "leader_epoch": s.leader_epoch,
                            "isr": s.isr,
                            "partition_epoch": s.partition_epoch,
                        }
                        for p, s in t.partition_states.items()
                    },
                }
                for name, t in self._topics.items()
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        for listener in list(self._listeners):
            listener()

    # -- Coordinator ---------------------------------------------------------------------

    async def start(self, me: BrokerRegistration) -> None:
        self._me = me
        if not self.path.exists():
            self._save()

    async def stop(self) -> None:
        self._me = None

    def brokers(self) -> list[BrokerRegistration]:
        return [self._me] if self._me else []

    def controller_id(self) -> int:
        return self._me.broker_id if self._me else -1

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    async def create_topic(
        self, name: str, replicas: dict[int, list[int]], configs: dict[str, str]
    ) -> TopicMetadata:
        if name in self._topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        topic = TopicMetadata(name, uuid.uuid4(), dict(replicas), dict(configs))
        for p, r in replicas.items():
            topic.partition_states[p] = PartitionState(r[0], 0, list(r))
        self._topics[name] = topic
        self._save()
        return topic

    async def delete_topic(self, name: str) -> None:
        if self._topics.pop(name, None) is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        self._save()

    async def add_partitions(self, name: str, replicas: dict[int, list[int]]) -> TopicMetadata:
        topic = self._require(name)
        for p, r in replicas.items():
            topic.replicas[p] = list(r)
            topic.partition_states[p] = PartitionState(r[0], 0, list(r))
        self._save()
        return topic

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._require(name).configs = dict(configs)
        self._save()

    async def alter_partition(
        self,
        name: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        isr: list[int],
        partition_epoch: int,
    ) -> PartitionState:
        # One broker: it is the only replica and the only possible ISR, so the checks are
        # Kafka's controller's, and a change can only ever restate what is stored.
        topic = self._require(name)
        state = topic.partition_states.get(partition)
        if state is None:
            raise AlterPartitionError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown {name}-{partition}")
        if leader_id != state.leader:
            raise AlterPartitionError(NOT_LEADER_OR_FOLLOWER, f"{leader_id} does not lead")
        if leader_epoch != state.leader_epoch:
            raise AlterPartitionError(FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} is stale")
        if partition_epoch != state.partition_epoch:
            raise AlterPartitionError(
                INVALID_UPDATE_VERSION, f"partition epoch {partition_epoch} is stale"
            )
        if leader_id not in isr or not set(isr) <= set(topic.replicas[partition]):
            raise AlterPartitionError(INVALID_REQUEST, f"ISR {isr} is not valid")
        state.isr = list(isr)
        state.partition_epoch += 1
        self._save()
        return state

    async def allocate_producer_ids(self, count: int) -> int:
        first = self._next_producer_id
        self._next_producer_id += count
        self._save()
        return first

    def on_change(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def _require(self, name: str) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return topic
