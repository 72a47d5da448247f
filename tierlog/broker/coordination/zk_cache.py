"""A broker's cache of the cluster state in ZooKeeper, updated by what its watches name.

Owns the read side of ``ZkCoordinator``: the snapshot (live brokers, the controller, every
topic's assignment, id and configs, every partition's state, client quotas), the watches
that keep it current and the reads that follow them. ``update()`` re-reads only what
changed, as Kafka's brokers get only the partitions an UpdateMetadata names:

- a partition state znode fired: that state alone (the topic keeps its other objects);
- a topic znode fired: that topic's assignment (and the states of partitions it gained);
- ``/brokers/topics`` children: topics created (read whole) or deleted (dropped);
- ``/brokers/ids`` children: the broker registrations; ``/controller``: the controller;
- ``/config/changes`` children: the new notifications, then the configs they name.

Everything is read again (``read_full``) at start, and whenever kazoo dropped the watches:
on a lost connection (kazoo does not re-send watches when it reconnects) and on a new
session. Every read is pipelined (``ZkSession.read_many``) and passes the watch, so a fired
(one-shot) watch is re-armed by the read that follows it, and any change after that read
fires it again: nothing is missed. A read that fails leaves its paths pending for the next
``update()``.

Order: a partition state is replaced only by one with a larger ``mzxid`` (the zxid of the
znode's last write, which grows across a delete and re-create too), so the cache never goes
back to an older state, whatever order reads come back in (a new session may even land on a
ZooKeeper server that is behind the last one; kazoo forgets the last zxid it saw on expiry).

Threads: the watch callback runs on kazoo's thread and only records the path and calls
``on_dirty``; everything else runs on one thread (the coordinator's worker). Snapshots are
never mutated once built: an update builds a new one, reusing every unchanged topic object.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import (
    BrokerRegistration,
    MetadataChange,
    PartitionState,
    TopicMetadata,
)
from tierlog.broker.coordination.zk_configs import EntityConfigs
from tierlog.broker.coordination.zk_data import ZnodeData
from tierlog.broker.coordination.zk_session import PathWatch, ZkSession

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


@dataclass
class _Changes:
    """What one incremental update found, by kind of znode."""

    brokers: bool = False
    controller: bool = False
    topic_list: bool = False
    configs: bool = False
    topics: set[str] = field(default_factory=set)
    states: set[Partition] = field(default_factory=set)

    @classmethod
    def of(cls, paths: Iterable[str]) -> _Changes:
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


class ClusterCache:
    """Args:
    session: a started session (the coordinator's).
    configs: the entity configs on that session (client quotas).
    on_dirty: called (on kazoo's thread; must not block) when a watch fired, so that the
        owner's thread calls ``update()``.
    """

    def __init__(
        self, session: ZkSession, configs: EntityConfigs, on_dirty: Callable[[], None]
    ) -> None:
        self._session = session
        self._configs = configs
        self._on_dirty = on_dirty
        self._lock = threading.Lock()  # guards _full and _pending (kazoo's thread writes them)
        self._full = True
        self._pending: set[str] = set()
        self._watch = PathWatch(self._on_watch)
        self.snapshot = ClusterSnapshot()
        # Worker thread only: the mzxid of each cached state, and the last config change
        # notification applied (its sequence number).
        self._state_zxids: dict[Partition, int] = {}
        self._config_seq = -1

    # -- watches (kazoo's thread) ----------------------------------------------------------

    def _on_watch(self, path: str | None) -> None:
        with self._lock:
            if path is None:
                self._full = True  # kazoo dropped every watch
            else:
                self._pending.add(path)
        self._on_dirty()

    def request_full(self) -> None:
        """Read everything at the next ``update()`` (a reconnection, a new session)."""
        with self._lock:
            self._full = True
        self._on_dirty()

    # -- updates (the owner's thread) ------------------------------------------------------

    def update(self) -> tuple[ClusterSnapshot, MetadataChange | None] | None:
        """Read what changed since the last update: the new snapshot and what it changed
        (None after a full read: anything may have), or None when nothing did.

        Raises:
            whatever ZooKeeper raised; the work stays pending for the next call.
        """
        with self._lock:
            full, paths = self._full, self._pending
            self._full, self._pending = False, set()
        if not full and not paths:
            return None
        try:
            if full:
                return self.read_full(), None
            return self._read_changes(_Changes.of(paths))
        except BaseException:
            with self._lock:
                self._full = self._full or full
                self._pending |= paths
            raise

    def read_full(self) -> ClusterSnapshot:
        """Read (and watch) everything; the cache becomes the result."""
        session, watch = self._session, self._watch
        data, children = session.read_many(
            [zk_data.CONTROLLER],
            [zk_data.BROKER_IDS, zk_data.TOPICS, zk_data.CONFIG_CHANGES],
            watch,
        )
        brokers, epochs = self._read_brokers(children[zk_data.BROKER_IDS])
        names = children[zk_data.TOPICS] or []
        topics, zxids = self._read_topics(names)
        # A full read may come from a server behind the one read before: keep what is newer.
        old = self.snapshot.topics
        for name, topic in topics.items():
            kept = {
                p: old[name].partition_states[p]
                for p in topic.partition_states
                if name in old
                and old[name].topic_id == topic.topic_id
                and p in old[name].partition_states
                and self._state_zxids.get((name, p), -1) > zxids[(name, p)]
            }
            if kept:
                topics[name] = replace(topic, partition_states={**topic.partition_states, **kept})
                zxids.update({(name, p): self._state_zxids[(name, p)] for p in kept})
        sequences = [_sequence(c) for c in children[zk_data.CONFIG_CHANGES] or []]
        snapshot = ClusterSnapshot(
            brokers,
            epochs,
            _controller(data[zk_data.CONTROLLER]),
            topics,
            self._configs.client_quotas(),
        )
        self.snapshot = snapshot
        self._state_zxids = zxids
        self._config_seq = max([s for s in sequences if s is not None], default=-1)
        return snapshot

    def _read_changes(
        self, changes: _Changes
    ) -> tuple[ClusterSnapshot, MetadataChange | None] | None:
        session, watch, old = self._session, self._watch, self.snapshot
        children_paths = [
            path
            for path, flag in (
                (zk_data.BROKER_IDS, changes.brokers),
                (zk_data.TOPICS, changes.topic_list),
                (zk_data.CONFIG_CHANGES, changes.configs),
            )
            if flag
        ]
        # A missing /controller is watched (its creation is the next controller); a missing
        # topic or cached state is not: it was deleted, and a new topic of that name shows
        # in /brokers/topics.
        watched = [zk_data.CONTROLLER] if changes.controller else []
        data, children = session.read_many(watched, children_paths, watch)
        existing = [zk_data.topic_path(t) for t in sorted(changes.topics)]
        if not changes.topics and not changes.topic_list:
            # The common case (a failover's writes): only states, read at once. With topic
            # changes they wait until it is known which topics are gone (below).
            existing += [
                zk_data.partition_state_path(t, p)
                for t, p in sorted(changes.states)
                if t in old.topics and p in old.topics[t].partition_states
            ]
        data.update(session.read_many(existing, (), watch, watch_missing=False)[0])

        topics = dict(old.topics)
        zxids = dict(self._state_zxids)
        changed_topics: set[str] = set()
        fresh: set[str] = set()  # to read whole: new, or deleted and created again
        gone: set[str] = set()
        if changes.topic_list:
            listed = set(children[zk_data.TOPICS] or [])
            fresh |= listed - topics.keys()
            gone |= topics.keys() - listed
        for name in changes.topics:
            node = data[zk_data.topic_path(name)]
            if node is None:
                gone.add(name)
                continue
            assignment = zk_data.decode_topic(name, node.data)
            known = topics.get(name)
            if known is None or known.topic_id != (assignment.topic_id or uuid.UUID(int=0)):
                fresh.add(name)
                continue
            replicas = {p: list(r) for p, r in assignment.partitions.items()}
            if replicas != known.replicas:
                states = {p: s for p, s in known.partition_states.items() if p in replicas}
                for p in known.partition_states.keys() - replicas.keys():
                    zxids.pop((name, p), None)
                topics[name] = replace(known, replicas=replicas, partition_states=states)
                changed_topics.add(name)
                # States of partitions the topic gained: read (and watched) below.
                changes.states |= {(name, p) for p in replicas.keys() - known.replicas.keys()}

        # Partition states: replace only what is newer than the cached one.
        by_topic: dict[str, dict[int, PartitionState | None]] = {}
        late = sorted(
            (t, p)
            for t, p in changes.states
            if t in topics
            and t not in fresh
            and t not in gone
            and p in topics[t].replicas
            and zk_data.partition_state_path(t, p) not in data
        )
        # A partition with a state watches it even while it is missing (its creation is
        # news); one with a state whose znode is gone is being deleted with its topic.
        for cached_state in (True, False):
            paths = [
                zk_data.partition_state_path(t, p)
                for t, p in late
                if (p in topics[t].partition_states) == cached_state
            ]
            if paths:
                more, _ = session.read_many(paths, (), watch, watch_missing=not cached_state)
                data.update(more)
        changed_partitions: set[Partition] = set()
        for name, p in changes.states:
            if name in fresh or name in gone or name not in topics:
                continue
            path = zk_data.partition_state_path(name, p)
            if path not in data or p not in topics[name].replicas:
                continue
            node = data[path]
            if node is None:
                if p in topics[name].partition_states:
                    by_topic.setdefault(name, {})[p] = None
                    zxids.pop((name, p), None)
                    changed_partitions.add((name, p))
                continue
            if node.mzxid <= zxids.get((name, p), -1):
                continue  # the same write, or an older one (never go back)
            by_topic.setdefault(name, {})[p] = _state(name, p, node)
            zxids[(name, p)] = node.mzxid
            changed_partitions.add((name, p))
        for name, updates in by_topic.items():
            states = dict(topics[name].partition_states)
            for p, state in updates.items():
                if state is None:
                    states.pop(p, None)
                else:
                    states[p] = state
            topics[name] = replace(topics[name], partition_states=states)

        # Configs: the notifications since the last one applied name what to read.
        reconfigure: set[str] = set()
        quotas = old.client_quotas
        config_seq = self._config_seq
        if changes.configs:
            names, quotas_changed, config_seq = self._read_notifications(
                children[zk_data.CONFIG_CHANGES] or [], topics.keys()
            )
            reconfigure = names - fresh
            if quotas_changed:
                quotas = self._configs.client_quotas()
        if reconfigure:
            configs = self._read_configs(reconfigure)
            for name in reconfigure:
                if name in topics and topics[name].configs != configs[name]:
                    topics[name] = replace(topics[name], configs=configs[name])
                    changed_topics.add(name)

        gone -= fresh
        for name in gone:
            if topics.pop(name, None) is not None:
                changed_topics.add(name)
            for p in old.topics[name].replicas if name in old.topics else ():
                zxids.pop((name, p), None)
        if fresh:
            read, read_zxids = self._read_topics(sorted(fresh))
            for name in fresh:
                for key in [k for k in zxids if k[0] == name]:
                    del zxids[key]
                if name in read:
                    topics[name] = read[name]
                elif topics.pop(name, None) is None:
                    continue
                changed_topics.add(name)
            zxids.update(read_zxids)

        brokers, epochs = old.brokers, old.broker_epochs
        if changes.brokers:
            brokers, epochs = self._read_brokers(children[zk_data.BROKER_IDS])
        controller = old.controller_id
        if changes.controller:
            controller = _controller(data[zk_data.CONTROLLER])

        self._state_zxids = zxids
        self._config_seq = config_seq
        changed_partitions = {tp for tp in changed_partitions if tp[0] not in changed_topics}
        if (
            not changed_topics
            and not changed_partitions
            and brokers == old.brokers
            and epochs == old.broker_epochs
            and controller == old.controller_id
            and quotas == old.client_quotas
        ):
            return None
        self.snapshot = ClusterSnapshot(brokers, epochs, controller, topics, quotas)
        return self.snapshot, MetadataChange(
            frozenset(changed_topics), frozenset(changed_partitions)
        )

    # -- reads -------------------------------------------------------------------------------

    def _read_brokers(
        self, ids: list[str] | None
    ) -> tuple[dict[int, BrokerRegistration], dict[int, int]]:
        """Registrations are never rewritten (a broker registers again with a new znode, which
        changes the children), so they are read without a watch."""
        numbers = [int(c) for c in ids or [] if c.isascii() and c.isdigit()]
        data, _ = self._session.read_many([zk_data.broker_path(b) for b in numbers])
        brokers: dict[int, BrokerRegistration] = {}
        epochs: dict[int, int] = {}
        for broker_id in numbers:
            node = data[zk_data.broker_path(broker_id)]
            if node is None:
                continue  # its session ended between the listing and the read
            info = zk_data.decode_broker(broker_id, node.data)
            brokers[broker_id] = BrokerRegistration(
                broker_id, info.host or "", info.port, info.rack
            )
            epochs[broker_id] = node.czxid  # the broker epoch (KIP-380)
        return brokers, epochs

    def _read_topics(
        self, names: Iterable[str]
    ) -> tuple[dict[str, TopicMetadata], dict[Partition, int]]:
        """Whole topics (assignment and its watch, configs, every state and its watch), in
        three pipelined rounds whatever their number; a topic deleted meanwhile is left out."""
        names = list(names)
        data, _ = self._session.read_many([zk_data.topic_path(n) for n in names], (), self._watch)
        assignments = {
            n: zk_data.decode_topic(n, node.data)
            for n in names
            if (node := data[zk_data.topic_path(n)]) is not None
        }
        configs = self._read_configs(assignments)
        paths = {
            zk_data.partition_state_path(n, p): (n, p)
            for n, a in assignments.items()
            for p in a.partitions
        }
        states, _ = self._session.read_many(paths, (), self._watch)
        topics: dict[str, TopicMetadata] = {}
        zxids: dict[Partition, int] = {}
        for name, assignment in assignments.items():
            found: dict[int, PartitionState] = {}
            for p in assignment.partitions:
                node = states[zk_data.partition_state_path(name, p)]
                if node is not None:
                    found[p] = _state(name, p, node)
                    zxids[(name, p)] = node.mzxid
            topics[name] = TopicMetadata(
                name,
                assignment.topic_id or uuid.UUID(int=0),
                {p: list(r) for p, r in assignment.partitions.items()},
                configs[name],
                found,
            )
        return topics, zxids

    def _read_configs(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """Topic overrides; not watched: changes are announced in ``/config/changes``."""
        paths = {zk_data.topic_config_path(n): n for n in names}
        data, _ = self._session.read_many(paths)
        return {
            name: {}
            if (node := data[path]) is None
            else zk_data.decode_config(zk_data.TOPIC_CONFIG_TYPE, name, node.data)
            for path, name in paths.items()
        }

    def _read_notifications(
        self, children: list[str], known: Iterable[str]
    ) -> tuple[set[str], bool, int]:
        """The topics whose configs to read again, whether client quotas changed, and the
        new last sequence number, from the notifications newer than the last one applied
        (Kafka's ZkNodeChangeNotificationListener). One that cannot be read names
        everything."""
        newer = sorted(
            (seq, c)
            for c in children
            if (seq := _sequence(c)) is not None and seq > self._config_seq
        )
        if not newer:
            return set(), False, self._config_seq
        paths = [zk_data.child_path(zk_data.CONFIG_CHANGES, c) for _, c in newer]
        data, _ = self._session.read_many(paths)
        topics: set[str] = set()
        quotas = False
        for path in paths:
            node = data[path]
            if node is None:
                continue  # purged already; its change is in the config znode anyway
            try:
                entity = zk_data.decode_config_change(path, node.data)
            except zk_data.ZkDataError as exc:
                log.warning("%s; reading every topic's config and the quotas again", exc)
                return set(known), True, newer[-1][0]
            kind, _, name = entity.partition("/")
            if kind == zk_data.TOPIC_CONFIG_TYPE:
                topics.add(name)
            elif kind in ("clients", "users"):
                quotas = True
        return topics & set(known), quotas, newer[-1][0]


def _state(topic: str, partition: int, node: ZnodeData) -> PartitionState:
    state = zk_data.decode_partition_state(topic, partition, node.data)
    return PartitionState(
        state.leader,
        state.leader_epoch,
        list(state.isr),
        controller_epoch=state.controller_epoch,
        partition_epoch=node.version,
    )


def _controller(node: ZnodeData | None) -> int:
    return -1 if node is None else zk_data.decode_controller(node.data).broker_id


def _sequence(child: str) -> int | None:
    return zk_data.config_change_sequence(child)
