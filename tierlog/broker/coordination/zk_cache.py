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

The update's steps are pure functions in ``zk_cache_delta``; this module does the reads
between them.

Threads: the watch callback runs on kazoo's thread and only records the path and calls
``on_dirty``; everything else runs on one thread (the coordinator's worker). Snapshots are
never mutated once built: an update builds a new one, reusing every unchanged topic object.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import (
    BrokerRegistration,
    MetadataChange,
    PartitionState,
    RegisteredEndpoint,
    TopicMetadata,
)
from tierlog.broker.coordination.zk_cache_delta import (
    Changes,
    ClusterSnapshot,
    ConfigChanges,
    Partition,
    TopicsDelta,
    config_changes,
    controller_id,
    first_reads,
    keep_newer_states,
    newer_notifications,
    next_snapshot,
    partition_state,
)
from tierlog.broker.coordination.zk_configs import EntityConfigs
from tierlog.broker.coordination.zk_data import ZnodeData
from tierlog.broker.coordination.zk_session import PathWatch, ZkSession

log = logging.getLogger(__name__)

__all__ = ["ClusterCache", "ClusterSnapshot"]


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
            return self._read_changes(Changes.of(paths))
        except BaseException:
            with self._lock:
                self._full = self._full or full
                self._pending |= paths
            raise

    def read_full(self) -> ClusterSnapshot:
        """Read (and watch) everything; the cache becomes the result."""
        data, children = self._session.read_many(
            [zk_data.CONTROLLER],
            [zk_data.BROKER_IDS, zk_data.TOPICS, zk_data.CONFIG_CHANGES],
            self._watch,
        )
        brokers, epochs = self._read_brokers(children[zk_data.BROKER_IDS])
        topics, zxids = self._read_topics(children[zk_data.TOPICS] or [])
        keep_newer_states(self.snapshot.topics, self._state_zxids, topics, zxids)
        newest = newer_notifications(children[zk_data.CONFIG_CHANGES] or [], -1)
        snapshot = ClusterSnapshot(
            brokers,
            epochs,
            controller_id(data[zk_data.CONTROLLER]),
            topics,
            self._configs.client_quotas(),
            {kind: self._configs.entities(kind) for kind in zk_data.CACHED_ENTITY_TYPES},
        )
        self.snapshot = snapshot
        self._state_zxids = zxids
        self._config_seq = newest[-1][0] if newest else -1
        return snapshot

    def _read_changes(
        self, changes: Changes
    ) -> tuple[ClusterSnapshot, MetadataChange | None] | None:
        """One incremental update: the steps of ``zk_cache_delta``, with the reads they
        ask for between them."""
        read_many, watch, old = self._session.read_many, self._watch, self.snapshot
        plan = first_reads(changes, old.topics)
        data, children = read_many(plan.watched, plan.children, watch)
        data.update(read_many(plan.existing, (), watch, watch_missing=False)[0])

        delta = TopicsDelta.of(old.topics, self._state_zxids)
        if changes.topic_list:
            delta.apply_listing(children[zk_data.TOPICS] or [])
        changes.states |= delta.apply_assignments(changes.topics, data)
        self._read_late_states(delta, changes.states, data)
        delta.apply_states(changes.states, data)

        quotas, config_seq = old.client_quotas, self._config_seq
        entities = old.entity_configs
        if changes.configs:
            notifications = children[zk_data.CONFIG_CHANGES] or []
            quotas, entities, config_seq = self._read_config_changes(notifications, delta)

        delta.drop_gone(old.topics)
        if delta.fresh:
            delta.take_fresh(*self._read_topics(sorted(delta.fresh)))

        brokers, epochs = old.brokers, old.broker_epochs
        if changes.brokers:
            brokers, epochs = self._read_brokers(children[zk_data.BROKER_IDS])
        controller = old.controller_id
        if changes.controller:
            controller = controller_id(data[zk_data.CONTROLLER])

        self._state_zxids = delta.zxids
        self._config_seq = config_seq
        new_snapshot = ClusterSnapshot(brokers, epochs, controller, delta.topics, quotas, entities)
        result = next_snapshot(old, new_snapshot, delta)
        if result is not None:
            self.snapshot = new_snapshot
        return result

    def _read_late_states(
        self, delta: TopicsDelta, states: set[Partition], data: dict[str, ZnodeData | None]
    ) -> None:
        """Read (into ``data``) the states the first round did not."""
        cached, new = delta.late_state_reads(states, data)
        # A partition with a state watches it even while it is missing (its creation is
        # news); one with a state whose znode is gone is being deleted with its topic.
        for paths, watch_missing in ((cached, False), (new, True)):
            if paths:
                read, _ = self._session.read_many(
                    paths, (), self._watch, watch_missing=watch_missing
                )
                data.update(read)

    def _read_config_changes(
        self, notifications: list[str], delta: TopicsDelta
    ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict[str, str]]], int]:
        """Apply what the new config change notifications name to ``delta`` (topic configs)
        and return the client quotas and the cached entities (each read again if named),
        and the last sequence applied."""
        found = self._read_notifications(notifications, delta)
        quotas = self._configs.client_quotas() if found.quotas else self.snapshot.client_quotas
        entities = dict(self.snapshot.entity_configs)
        for kind in found.entity_types:
            entities[kind] = self._configs.entities(kind)
        reconfigure = found.topics - delta.fresh
        if reconfigure:
            delta.apply_configs(self._read_configs(reconfigure))
        return quotas, entities, found.last_seq

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
                broker_id,
                info.host or "",
                info.port,
                info.rack,
                tuple(
                    RegisteredEndpoint(e.listener, e.security_protocol, e.host, e.port)
                    for e in info.endpoints
                ),
            )
            epochs[broker_id] = node.czxid  # the broker epoch (KIP-380)
        return brokers, epochs

    def _read_topics(
        self, names: Iterable[str]
    ) -> tuple[dict[str, TopicMetadata], dict[Partition, int]]:
        """Whole topics (assignment and its watch, configs, every state and its watch), in
        three pipelined rounds whatever their number; a topic deleted meanwhile is left out."""
        names = list(names)
        read_many = self._session.read_many
        data, _ = read_many([zk_data.topic_path(n) for n in names], (), self._watch)
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
        states, _ = read_many(paths, (), self._watch)
        topics: dict[str, TopicMetadata] = {}
        zxids: dict[Partition, int] = {}
        for name, assignment in assignments.items():
            found: dict[int, PartitionState] = {}
            for p in assignment.partitions:
                node = states[zk_data.partition_state_path(name, p)]
                if node is not None:
                    found[p] = partition_state(name, p, node)
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

    def _read_notifications(self, children: list[str], delta: TopicsDelta) -> ConfigChanges:
        """The notifications newer than the last one applied, read, and what they name."""
        newer = newer_notifications(children, self._config_seq)
        paths = [zk_data.child_path(zk_data.CONFIG_CHANGES, c) for _, c in newer]
        data, _ = self._session.read_many(paths)
        return config_changes(newer, data, delta.topics.keys(), self._config_seq)
