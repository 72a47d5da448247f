"""The pure steps of the broker's cache update (``zk_cache``): what the fired watches ask to
read, and how what was read changes the cached cluster. No I/O: reads come in as
``ZnodeData`` by path, so each step is tested on its own (tests/broker/coordination).

One incremental update (``ClusterCache._read_changes``) runs them in this order, reading
ZooKeeper between them:

1. ``Changes.of``: the fired paths, by kind of znode;
2. ``first_reads``: children lists, ``/controller``, the topics named, and, when no topic
   changed, the cached states named (the common case, a fail-over's writes: one round);
3. ``TopicsDelta.apply_listing`` / ``apply_assignments``: topics created, deleted, or whose
   assignment changed, and the partitions they gained;
4. ``late_state_reads`` then ``apply_states``: the remaining states, each replacing the
   cached one only when its ``mzxid`` is larger (never back to an older write);
5. ``newer_notifications`` / ``config_changes`` then ``apply_configs``: topic configs and
   quotas named by config change notifications;
6. ``drop_gone`` and ``take_fresh``: deleted topics out, new ones (read whole) in;
7. ``next_snapshot``: the new snapshot and what it changed, or None when nothing did.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import (
    BrokerRegistration,
    MetadataChange,
    PartitionState,
    TopicMetadata,
)
from tierlog.broker.coordination.zk_data import ZnodeData

log = logging.getLogger(__name__)

Partition = tuple[str, int]


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything the cache knows, replaced on every update (never mutated)."""

    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    controller_id: int = -1
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    client_quotas: dict[str, dict[str, float]] = field(default_factory=dict)
    # zk_data.CACHED_ENTITY_TYPES: entity type -> name -> configs.
    entity_configs: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)


# -- 1. what fired ------------------------------------------------------------------------------


@dataclass
class Changes:
    """What one incremental update found, by kind of znode."""

    brokers: bool = False
    controller: bool = False
    topic_list: bool = False
    configs: bool = False
    topics: set[str] = field(default_factory=set)
    states: set[Partition] = field(default_factory=set)

    @classmethod
    def of(cls, paths: Iterable[str]) -> Changes:
        changes = cls()
        for path in paths:
            if path == zk_data.BROKER_IDS:
                changes.brokers = True
            elif path == zk_data.CONTROLLER:
                changes.controller = True
            elif path == zk_data.TOPICS:
                changes.topic_list = True
            elif path == zk_data.CONFIG_CHANGES:
                changes.configs = True
            elif (topic := zk_data.parse_topic_path(path)) is not None:
                changes.topics.add(topic)
            elif (tp := zk_data.parse_partition_state_path(path)) is not None:
                changes.states.add(tp)
            else:
                log.debug("watch on %s: not a path the cache reads", path)
        return changes


# -- 2. the first round of reads ----------------------------------------------------------------


@dataclass(frozen=True)
class FirstReads:
    """The first pipelined reads of an update. ``watched`` (data) and ``children`` are
    watched even while missing: a missing ``/controller``'s creation is the next controller.
    ``existing`` (data) are watched only while they exist: a topic or a cached state that is
    gone was deleted, and a new topic of that name shows in ``/brokers/topics``."""

    watched: list[str]
    children: list[str]
    existing: list[str]


def first_reads(changes: Changes, topics: Mapping[str, TopicMetadata]) -> FirstReads:
    children = [
        path
        for path, flag in (
            (zk_data.BROKER_IDS, changes.brokers),
            (zk_data.TOPICS, changes.topic_list),
            (zk_data.CONFIG_CHANGES, changes.configs),
        )
        if flag
    ]
    watched = [zk_data.CONTROLLER] if changes.controller else []
    existing = [zk_data.topic_path(t) for t in sorted(changes.topics)]
    if not changes.topics and not changes.topic_list:
        # The common case (a failover's writes): only states, read at once. With topic
        # changes they wait until it is known which topics are gone (late_state_reads).
        existing += [
            zk_data.partition_state_path(t, p)
            for t, p in sorted(changes.states)
            if t in topics and p in topics[t].partition_states
        ]
    return FirstReads(watched, children, existing)


# -- 3, 4, 5, 6. the topics -----------------------------------------------------------------------


@dataclass
class TopicsDelta:
    """One update's working copy of the cached topics and state zxids, and what it changed
    so far. ``fresh`` topics are read whole (new, or deleted and created again under a new
    topic id); ``gone`` ones are dropped."""

    topics: dict[str, TopicMetadata]
    zxids: dict[Partition, int]
    changed_topics: set[str] = field(default_factory=set)
    changed_partitions: set[Partition] = field(default_factory=set)
    fresh: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, topics: Mapping[str, TopicMetadata], zxids: Mapping[Partition, int]) -> TopicsDelta:
        return cls(dict(topics), dict(zxids))

    def apply_listing(self, listed: Iterable[str]) -> None:
        """``/brokers/topics``' children: names not cached are new, cached ones missing are
        gone."""
        names = set(listed)
        self.fresh |= names - self.topics.keys()
        self.gone |= self.topics.keys() - names

    def apply_assignments(
        self, names: Iterable[str], data: Mapping[str, ZnodeData | None]
    ) -> set[Partition]:
        """The assignment znodes of ``names`` as read (None: deleted); returns the
        partitions the topics gained, whose states are to be read (and watched)."""
        gained: set[Partition] = set()
        for name in names:
            node = data[zk_data.topic_path(name)]
            if node is None:
                self.gone.add(name)
                continue
            assignment = zk_data.decode_topic(name, node.data)
            known = self.topics.get(name)
            if known is None or known.topic_id != (assignment.topic_id or uuid.UUID(int=0)):
                self.fresh.add(name)
                continue
            replicas = {p: list(r) for p, r in assignment.partitions.items()}
            if replicas == known.replicas:
                continue
            states = {p: s for p, s in known.partition_states.items() if p in replicas}
            for p in known.partition_states.keys() - replicas.keys():
                self.zxids.pop((name, p), None)
            self.topics[name] = replace(known, replicas=replicas, partition_states=states)
            self.changed_topics.add(name)
            gained |= {(name, p) for p in replicas.keys() - known.replicas.keys()}
        return gained

    def late_state_reads(
        self, states: Iterable[Partition], data: Mapping[str, ZnodeData | None]
    ) -> tuple[list[str], list[str]]:
        """State paths of ``states`` not read yet, of topics neither fresh nor gone:
        (cached ones, not watched while missing: their znode is being deleted with its
        topic; new ones, watched while missing: their creation is news)."""
        late = sorted(
            (t, p)
            for t, p in states
            if t in self.topics
            and t not in self.fresh
            and t not in self.gone
            and p in self.topics[t].replicas
            and zk_data.partition_state_path(t, p) not in data
        )
        cached = [
            zk_data.partition_state_path(t, p)
            for t, p in late
            if p in self.topics[t].partition_states
        ]
        new = [
            zk_data.partition_state_path(t, p)
            for t, p in late
            if p not in self.topics[t].partition_states
        ]
        return cached, new

    def apply_states(
        self, states: Iterable[Partition], data: Mapping[str, ZnodeData | None]
    ) -> None:
        """Each state read replaces the cached one if its ``mzxid`` is larger; a cached
        state whose znode is gone is dropped. States not read, or of topics fresh, gone or
        not assigning that partition, are left alone."""
        by_topic: dict[str, dict[int, PartitionState | None]] = {}
        for name, p in states:
            if name in self.fresh or name in self.gone or name not in self.topics:
                continue
            path = zk_data.partition_state_path(name, p)
            if path not in data or p not in self.topics[name].replicas:
                continue
            node = data[path]
            if node is None:
                if p in self.topics[name].partition_states:
                    by_topic.setdefault(name, {})[p] = None
                    self.zxids.pop((name, p), None)
                    self.changed_partitions.add((name, p))
                continue
            if node.mzxid <= self.zxids.get((name, p), -1):
                continue  # the same write, or an older one (never go back)
            by_topic.setdefault(name, {})[p] = partition_state(name, p, node)
            self.zxids[(name, p)] = node.mzxid
            self.changed_partitions.add((name, p))
        for name, updates in by_topic.items():
            current = dict(self.topics[name].partition_states)
            for p, state in updates.items():
                if state is None:
                    current.pop(p, None)
                else:
                    current[p] = state
            self.topics[name] = replace(self.topics[name], partition_states=current)

    def apply_configs(self, configs: Mapping[str, dict[str, str]]) -> None:
        """Topic overrides as read again; a topic whose overrides differ changed."""
        for name, config in configs.items():
            if name in self.topics and self.topics[name].configs != config:
                self.topics[name] = replace(self.topics[name], configs=config)
                self.changed_topics.add(name)

    def drop_gone(self, old: Mapping[str, TopicMetadata]) -> None:
        """Drop the gone topics (``old``: the topics before this update), except those
        created again (fresh)."""
        self.gone -= self.fresh
        for name in self.gone:
            if self.topics.pop(name, None) is not None:
                self.changed_topics.add(name)
            for p in old[name].replicas if name in old else ():
                self.zxids.pop((name, p), None)

    def take_fresh(
        self, read: Mapping[str, TopicMetadata], read_zxids: Mapping[Partition, int]
    ) -> None:
        """The fresh topics as read whole (one deleted meanwhile is missing from ``read``)
        and their states' zxids."""
        for name in self.fresh:
            for key in [k for k in self.zxids if k[0] == name]:
                del self.zxids[key]
            if name in read:
                self.topics[name] = read[name]
            elif self.topics.pop(name, None) is None:
                continue
            self.changed_topics.add(name)
        self.zxids.update(read_zxids)


# -- 5. config change notifications -------------------------------------------------------------


@dataclass(frozen=True)
class ConfigChanges:
    """What newer config change notifications name: topics whose configs to read again,
    whether client quotas changed, the cached entity types changed
    (``zk_data.CACHED_ENTITY_TYPES``), and the last sequence number applied."""

    topics: set[str]
    quotas: bool
    last_seq: int
    entity_types: frozenset[str] = frozenset()


def newer_notifications(children: Iterable[str], last_seq: int) -> list[tuple[int, str]]:
    """(sequence, child) of the ``config_change_<seq>`` children newer than ``last_seq``,
    oldest first."""
    return sorted(
        (seq, c)
        for c in children
        if (seq := zk_data.config_change_sequence(c)) is not None and seq > last_seq
    )


def config_changes(
    newer: list[tuple[int, str]],
    data: Mapping[str, ZnodeData | None],
    known: Iterable[str],
    last_seq: int,
) -> ConfigChanges:
    """What the notifications ``newer`` (read into ``data``) name, as Kafka's
    ZkNodeChangeNotificationListener reads them; only topics in ``known`` are named. One
    purged already is skipped (its change is in the config znode anyway); one that cannot
    be decoded names everything."""
    if not newer:
        return ConfigChanges(set(), False, last_seq)
    topics: set[str] = set()
    quotas = False
    entity_types: set[str] = set()
    for _, child in newer:
        path = zk_data.child_path(zk_data.CONFIG_CHANGES, child)
        node = data[path]
        if node is None:
            continue
        try:
            entity = zk_data.decode_config_change(path, node.data)
        except zk_data.ZkDataError as exc:
            log.warning("%s; reading every topic's config and the quotas again", exc)
            everything = frozenset(zk_data.CACHED_ENTITY_TYPES)
            return ConfigChanges(set(known), True, newer[-1][0], everything)
        kind, _, name = entity.partition("/")
        if kind == zk_data.TOPIC_CONFIG_TYPE:
            topics.add(name)
        elif kind in (zk_data.CLIENTS_CONFIG_TYPE, zk_data.USERS_CONFIG_TYPE):
            quotas = True
        elif kind in zk_data.CACHED_ENTITY_TYPES:
            entity_types.add(kind)
    return ConfigChanges(topics & set(known), quotas, newer[-1][0], frozenset(entity_types))


# -- 7. the result --------------------------------------------------------------------------------


def next_snapshot(
    old: ClusterSnapshot, new: ClusterSnapshot, delta: TopicsDelta
) -> tuple[ClusterSnapshot, MetadataChange] | None:
    """``new`` (built from ``delta``'s topics) and what it changed, or None when nothing
    did. A partition of a changed topic is named by its topic only."""
    partitions = frozenset(
        tp for tp in delta.changed_partitions if tp[0] not in delta.changed_topics
    )
    if (
        not delta.changed_topics
        and not partitions
        and new.brokers == old.brokers
        and new.broker_epochs == old.broker_epochs
        and new.controller_id == old.controller_id
        and new.client_quotas == old.client_quotas
        and new.entity_configs == old.entity_configs
    ):
        return None
    return new, MetadataChange(frozenset(delta.changed_topics), partitions)


# -- full reads -----------------------------------------------------------------------------------


def keep_newer_states(
    old: Mapping[str, TopicMetadata],
    old_zxids: Mapping[Partition, int],
    topics: dict[str, TopicMetadata],
    zxids: dict[Partition, int],
) -> None:
    """After a full read (``topics``, ``zxids``; changed in place): keep each cached state
    that is newer than the one read, of a topic with the same id. A full read may come from
    a server behind the one read before (a new session; kazoo forgets the last zxid it saw on
    expiry)."""
    for name, topic in topics.items():
        cached = old.get(name)
        if cached is None or cached.topic_id != topic.topic_id:
            continue
        kept = {
            p: cached.partition_states[p]
            for p in topic.partition_states
            if p in cached.partition_states and old_zxids.get((name, p), -1) > zxids[(name, p)]
        }
        if kept:
            topics[name] = replace(topic, partition_states={**topic.partition_states, **kept})
            zxids.update({(name, p): old_zxids[(name, p)] for p in kept})


# -- decoding -------------------------------------------------------------------------------------


def partition_state(topic: str, partition: int, node: ZnodeData) -> PartitionState:
    """A state znode as the broker's metadata holds it (partition epoch = zkVersion)."""
    state = zk_data.decode_partition_state(topic, partition, node.data)
    return PartitionState(
        state.leader,
        state.leader_epoch,
        list(state.isr),
        controller_epoch=state.controller_epoch,
        partition_epoch=node.version,
    )


def controller_id(node: ZnodeData | None) -> int:
    """The broker in ``/controller``; -1 when there is none."""
    return -1 if node is None else zk_data.decode_controller(node.data).broker_id
