"""Cluster-mode coordination: the ``Coordinator`` interface over ZooKeeper (one broker's view).

A broker sees the cluster through a cache (``zk_cache.ClusterCache``): live brokers, the
controller, every topic's assignment, id and config overrides, and every partition's state
(leader, leader epoch, ISR, partition epoch = the state znode's zkVersion). ZooKeeper
watches name what changed; one worker thread re-reads just that and hands the new snapshot,
with what it changed (``MetadataChange``), to the event loop, which swaps it in and tells
the listeners (the replica manager applies the partitions named). Decisions are the
controller's (``tierlog.broker.controller``); this class only watches them and makes the
writes any Kafka broker may make (AdminZkClient: create and delete topics, configs,
producer id blocks). Reads never block; writes run on the worker thread and wait until the
cache shows their effect, so a CreateTopics answer names a leader.

Threads: kazoo's event thread (watch callbacks: record the path, never block), the
``zk-coordinator`` worker (every ZooKeeper call), the event loop (the cache, listeners).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tierlog.broker.coordination.api import (
    AlterPartitionError,
    BrokerRegistration,
    CoordinationError,
    MetadataChange,
    PartitionState,
    PropagationTimeoutError,
    TopicMetadata,
    UnknownTopicError,
)
from tierlog.broker.coordination.zk_auth import ZkIdentity
from tierlog.broker.coordination.zk_cache import ClusterCache, ClusterSnapshot
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_data import BrokerInfo, EndPoint
from tierlog.broker.coordination.zk_session import SessionEvent
from tierlog.broker.coordination.zk_tls import ZkTls

log = logging.getLogger(__name__)

__all__ = ["AlterPartitionSender", "ClusterSnapshot", "ZkCoordinator"]

T = TypeVar("T")
# How long an admin write waits for the controller's answer to show in the cache (Kafka's
# CreateTopics waits for the new partitions' leaders the same way, up to its timeout).
DEFAULT_PROPAGATION_TIMEOUT_S = 30.0

# Sends AlterPartition to the controller broker: (controller id, topic, partition, leader,
# leader epoch, new ISR, partition epoch) -> the stored state. The broker supplies it (it
# owns the network client); it raises AlterPartitionError with the controller's code.
AlterPartitionSender = Callable[
    [int, str, int, int, int, list[int], int], Awaitable[PartitionState]
]


class ZkCoordinator:
    """Args:
    connect: ``host:port[,host:port...][/chroot]`` (``zookeeper.connect``).
    broker_id: this broker.
    session_timeout_ms: ``zookeeper.session.timeout.ms``.
    identity, secure_acls: ``zookeeper.jaas.config`` and ``zookeeper.set.acl`` (``zk_auth``).
    tls: ``zookeeper.ssl.*`` (``zk_tls``).
    """

    def __init__(
        self,
        connect: str,
        broker_id: int,
        *,
        session_timeout_ms: int = 18_000,
        propagation_timeout_s: float = DEFAULT_PROPAGATION_TIMEOUT_S,
        identity: ZkIdentity | None = None,
        secure_acls: bool = False,
        tls: ZkTls | None = None,
    ) -> None:
        self.zk = ZkClient(
            connect, session_timeout_ms, identity=identity, secure_acls=secure_acls, tls=tls
        )
        self.broker_id = broker_id
        self.cluster_id = ""
        self.broker_epoch = -1
        self.propagation_timeout_s = propagation_timeout_s
        self.alter_partition_sender: AlterPartitionSender | None = None
        self._snapshot = ClusterSnapshot()
        self._listeners: list[Callable[[MetadataChange | None], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._me: BrokerInfo | None = None
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self._cache = ClusterCache(self.zk.session, self.zk.configs, self._dirty.set)
        self._watching = False  # worker thread: set once registered
        self._worker: threading.Thread | None = None
        self._changed: asyncio.Event | None = None
        self._calls: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self._calls_lock = threading.Lock()
        self._expired = False

    # -- lifecycle -----------------------------------------------------------------------

    async def connect(self, candidate_cluster_id: str) -> str:
        """Open the session and agree on the cluster id (the first broker's candidate wins,
        Kafka's ``/cluster/id``); returns it. Nothing is registered yet."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._worker = threading.Thread(target=self._work, name="zk-coordinator", daemon=True)
        self._worker.start()
        await self._call(self.zk.start)
        self.cluster_id = await self._call(
            lambda: self.zk.brokers.get_or_create_cluster_id(candidate_cluster_id)
        )
        self.zk.on_session_event(self._on_session_event)
        return self.cluster_id

    async def start(self, me: BrokerRegistration) -> None:
        """Register this broker (ephemeral ``/brokers/ids/<id>``; its czxid is the broker
        epoch, KIP-380), set the watches and wait for the first full view. A registration
        of this id left by a killed run is waited out first (``zk_brokers``), at most the
        session timeout and a margin.

        Raises:
            BrokerIdInUseError: another broker with this id is still registered after that.
        """
        # Every listener, as Kafka's /brokers/ids/<id> lists them (KIP-103).
        self._me = (
            BrokerInfo(
                me.broker_id,
                tuple(
                    EndPoint(e.host, e.port, e.listener, e.security_protocol) for e in me.endpoints
                ),
                me.rack,
            )
            if me.endpoints
            else BrokerInfo.plaintext(me.broker_id, me.host, me.port, me.rack)
        )
        info = self._me
        self.broker_epoch = await self._call(lambda: self.zk.brokers.register(info))
        await self._call(self._start_watching)
        await self.wait_for(lambda s: me.broker_id in s.brokers, "this broker's registration")
        log.info("registered broker %d (epoch %d) in ZooKeeper", me.broker_id, self.broker_epoch)

    async def deregister(self) -> None:
        """Remove this broker's registration while keeping the session: the controller
        then moves its leaderships away (controlled shutdown, docs/cluster.md)."""
        broker_id = self.broker_id
        await self._call(lambda: self.zk.brokers.deregister(broker_id))

    async def stop(self) -> None:
        """Close the session (its ephemeral znodes go at once) and the worker."""
        self._closed.set()
        self._dirty.set()
        if self._worker is not None and self._worker.is_alive():
            await asyncio.get_running_loop().run_in_executor(None, self._stop_blocking)

    def _stop_blocking(self) -> None:
        self.zk.stop()
        if self._worker is not None:
            self._worker.join(10)

    # -- reads (the cache) ---------------------------------------------------------------

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self._snapshot

    def brokers(self) -> list[BrokerRegistration]:
        return [self._snapshot.brokers[b] for b in sorted(self._snapshot.brokers)]

    def controller_id(self) -> int:
        return self._snapshot.controller_id

    def topics(self) -> dict[str, TopicMetadata]:
        return self._snapshot.topics

    def topic(self, name: str) -> TopicMetadata | None:
        return self._snapshot.topics.get(name)

    def on_change(self, callback: Callable[[MetadataChange | None], None]) -> None:
        self._listeners.append(callback)

    async def wait_for(
        self, predicate: Callable[[ClusterSnapshot], bool], what: str, timeout: float | None = None
    ) -> ClusterSnapshot:
        """Wait until the cache satisfies ``predicate``.

        Raises:
            CoordinationError: not within the timeout (names ``what``).
        """
        assert self._changed is not None, "connect() first"
        deadline = asyncio.get_running_loop().time() + (timeout or self.propagation_timeout_s)
        while not predicate(self._snapshot):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise PropagationTimeoutError(f"timed out waiting for {what}")
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                continue
        return self._snapshot

    # -- writes --------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        replicas: dict[int, list[int]],
        configs: dict[str, str],
        wait_s: float | None = None,
    ) -> TopicMetadata:
        topic_id = uuid.uuid4()
        await self._call(lambda: self.zk.topics.create(name, replicas, topic_id, configs))
        try:
            snapshot = await self.wait_for(
                lambda s: _has_states(s, name, set(replicas)), f"the leaders of {name}", wait_s
            )
        except PropagationTimeoutError:
            bound = wait_s or self.propagation_timeout_s
            raise PropagationTimeoutError(
                f"topic {name!r} is created, but its leaders were not in this broker's "
                f"metadata within {bound:g} s"
            ) from None
        return snapshot.topics[name]

    async def delete_topic(self, name: str) -> None:
        await self._call(lambda: self.zk.topics.request_deletion(name))
        await self.wait_for(lambda s: name not in s.topics, f"the deletion of topic {name}")

    async def add_partitions(self, name: str, replicas: dict[int, list[int]]) -> TopicMetadata:
        current = self.topic(name)
        if current is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        everything = {**current.replicas, **replicas}
        await self._call(lambda: self.zk.topics.add_partitions(name, everything))
        snapshot = await self.wait_for(
            lambda s: _has_states(s, name, set(everything)), f"the new partitions of {name}"
        )
        return snapshot.topics[name]

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self._call(lambda: self.zk.configs.set_topic(name, configs))
        await self.wait_for(
            lambda s: name in s.topics and s.topics[name].configs == configs,
            f"the new configs of {name}",
        )

    def client_quotas(self) -> dict[str, dict[str, float]]:
        return self._snapshot.client_quotas

    async def set_client_quotas(self, entity: str, values: dict[str, float]) -> None:
        await self._call(lambda: self.zk.configs.set_client_quotas(entity, values))
        await self.wait_for(
            lambda s: s.client_quotas.get(entity, {}) == values,
            f"the new quotas of {entity}",
        )

    async def wait_for_topics(
        self, predicate: Callable[[dict[str, TopicMetadata]], bool], timeout_s: float
    ) -> bool:
        try:
            await self.wait_for(lambda s: predicate(s.topics), "topic metadata", timeout_s)
        except CoordinationError:
            return False
        return True

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        return self._snapshot.entity_configs.get(entity_type, {})

    async def set_entity_configs(
        self, entity_type: str, name: str, configs: dict[str, str]
    ) -> None:
        kept = dict(configs)
        await self._call(lambda: self.zk.configs.set_entity(entity_type, name, kept))
        await self.wait_for(
            lambda s: s.entity_configs.get(entity_type, {}).get(name, {}) == kept,
            f"the new configs of {entity_type}/{name}",
        )

    async def alter_partition(
        self,
        name: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        isr: list[int],
        partition_epoch: int,
    ) -> PartitionState:
        if self.alter_partition_sender is None:
            raise AlterPartitionError(41, "no channel to the controller yet")  # NOT_CONTROLLER
        return await self.alter_partition_sender(
            self.controller_id(), name, partition, leader_id, leader_epoch, isr, partition_epoch
        )

    async def allocate_producer_ids(self, count: int) -> int:
        broker_id = self.broker_id
        return int(await self._call(lambda: self.zk.producer_ids.allocate(broker_id, count)))

    # -- the worker thread ---------------------------------------------------------------

    async def _call(self, call: Callable[[], T]) -> T:
        """Run ``call`` on the worker thread (every ZooKeeper call goes there, in order)."""
        assert self._loop is not None
        future: asyncio.Future[T] = self._loop.create_future()
        with self._calls_lock:
            self._calls.append((call, future))
        self._dirty.set()
        return await future

    def _work(self) -> None:
        while True:
            self._dirty.wait()
            self._dirty.clear()
            with self._calls_lock:
                calls, self._calls = self._calls, []
            for call, future in calls:
                self._run_call(call, future)
            if self._closed.is_set():
                return
            if self._watching:
                self._refresh()

    def _run_call(self, call: Callable[[], Any], future: asyncio.Future[Any]) -> None:
        assert self._loop is not None
        try:
            result = call()
        except BaseException as exc:
            self._loop.call_soon_threadsafe(_fail, future, exc)
        else:
            self._loop.call_soon_threadsafe(_resolve, future, result)

    def _start_watching(self) -> None:
        self._watching = True
        self._cache.request_full()

    def _refresh(self) -> None:
        """Bring the cache up to date (only what the watches named, or everything after
        start or a reconnection) and publish it to the loop if anything changed."""
        begin = time.monotonic()
        try:
            update = self._cache.update()
        except Exception as exc:
            if not self._closed.is_set():
                log.warning("reading the cluster state from ZooKeeper failed: %r (retrying)", exc)
                threading.Timer(0.2, self._dirty.set).start()
            return
        if update is None:
            return
        snapshot, change = update
        log.debug(
            "cluster state read in %.0f ms: %s",
            (time.monotonic() - begin) * 1000,
            "everything"
            if change is None
            else f"{len(change.topics)} topics, {len(change.partitions)} partition states",
        )
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._publish, snapshot, change)

    def _read_snapshot(self) -> ClusterSnapshot:
        """Read (and watch) everything now, on the calling thread (the benchmark's full
        refresh, ``bench/failover_scale.py``)."""
        return self._cache.read_full()

    def _publish(self, snapshot: ClusterSnapshot, change: MetadataChange | None) -> None:
        """On the loop: swap the cache in and tell the listeners what changed. Snapshots
        arrive in the order they were read, each with its own change."""
        if self._closed.is_set():
            return
        self._snapshot = snapshot
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("applying the cluster state failed")

    def _on_session_event(self, event: SessionEvent) -> None:
        # kazoo's thread. Connected again: kazoo dropped every watch when the connection
        # went, so everything is read (and watched) again. A new session after an expiry
        # also lost the ephemeral registration: register again (a new broker epoch).
        if event is SessionEvent.CONNECTED:
            self._cache.request_full()
        if event is SessionEvent.EXPIRED:
            log.warning("ZooKeeper session expired; registering again when reconnected")
            self._expired = True
        elif event is SessionEvent.CONNECTED and self._expired:
            self._expired = False
            me = self._me
            if me is not None and self._loop is not None and not self._closed.is_set():
                self._loop.call_soon_threadsafe(
                    lambda: asyncio.ensure_future(self._register_again(me))
                )

    async def _register_again(self, me: BrokerInfo) -> None:
        try:
            # This session's old registration went with the old session; another one now
            # is a live broker's: refuse at once rather than block the worker.
            self.broker_epoch = await self._call(
                lambda: self.zk.brokers.register(me, stale_timeout_s=0)
            )
            log.info("registered again in ZooKeeper (broker epoch %d)", self.broker_epoch)
        except Exception:
            log.exception("registering again in ZooKeeper failed")


def _has_states(snapshot: ClusterSnapshot, name: str, partitions: set[int]) -> bool:
    topic = snapshot.topics.get(name)
    return topic is not None and partitions <= set(topic.partition_states)


def _resolve(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
