"""Cluster mode's ZooKeeper client: every read and write of Kafka's znodes, over kazoo.

Kafka's ``KafkaZkClient`` (brokers, controller, partition states, producer ids) and
``AdminZkClient`` (topic creation, configs, deletion requests) in one class, one concern per
method. Paths and JSON come from ``zk_data``; this module never builds a path string.

Threading: every method blocks on ZooKeeper round trips. Call them from worker threads
(an executor, ``asyncio.to_thread``), never on the asyncio loop. kazoo's client is
thread-safe and ``ZkClient`` keeps no mutable state of its own, so one instance serves all
threads. Session listeners and watch callbacks run on kazoo's event thread: they must return
quickly and must not block on this client (hand the event to a queue or to
``loop.call_soon_threadsafe``).

Fencing (DESIGN.md "Cluster"):

- broker epoch = the czxid of ``/brokers/ids/<id>`` (KIP-380); a new session's registration
  gets a larger one, so an older incarnation's requests can be refused;
- every controller write is one ZooKeeper ``multi`` that starts with
  ``check(/controller_epoch, lease.epoch_zk_version)`` (KAFKA-6082): once another controller
  was elected, a deposed one's writes change nothing and raise ``ControllerMovedError``;
- partition-state writes are conditional on the state znode's zkVersion
  (``StalePartitionStateError``). Only the controller writes them: since Kafka 2.7 a leader
  asks the controller with AlterPartition (KIP-497) instead of writing ZooKeeper itself.
  Many at once (``update_partition_states``) go in pipelined multis of a few hundred, each
  with the epoch check first and each write still conditional on its own zkVersion.

Scale: a cluster of thousands of partitions is read and written in pipelined rounds
(``read_many``, ``update_partition_states``): every request of a round is sent before the
first answer is awaited, so a round costs about one round trip, not one per znode.

Errors: kazoo's ``ConnectionLoss`` and ``SessionExpiredError`` propagate from writes
(whether a write whose answer was lost took effect is for the caller to re-read); reads are
retried until the connection timeout.

Past ~600 lines on purpose: like Kafka's KafkaZkClient this is the single module that talks
to ZooKeeper, so that fencing rules live in one place; it is a flat list of short methods,
grouped by concern (lifecycle, pipelined reads, brokers, controller, controller writes,
reads, admin writes, producer ids, watches).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import (
    CoordinationError,
    TopicCollisionError,
    TopicExistsError,
    UnknownTopicError,
)
from tierlog.broker.coordination.zk_data import (
    BrokerInfo,
    ControllerInfo,
    LeaderAndIsr,
    TopicAssignment,
)
from tierlog.local.log_manager import colliding_topics
from tierlog.util.clock import Clock, SystemClock

try:
    from kazoo.client import KazooClient, KazooState
    from kazoo.exceptions import (
        BadVersionError,
        NodeExistsError,
        NoNodeError,
        NotEmptyError,
        RolledBackError,
        RuntimeInconsistency,
    )
    from kazoo.protocol.states import EventType
    from kazoo.recipe.watchers import ChildrenWatch, DataWatch
    from kazoo.retry import KazooRetry
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError(
        f"cluster mode talks to ZooKeeper through kazoo ({e}): pip install 'tierlog[cluster]'"
    ) from e

log = logging.getLogger(__name__)

# Kafka's zookeeper.session.timeout.ms default since 2.5 (KIP-537); the connection timeout
# defaults to it, as zookeeper.connection.timeout.ms does.
DEFAULT_SESSION_TIMEOUT_MS = 18_000

# Kafka's KafkaController.InitialControllerEpoch: the first controller bumps it to 1.
INITIAL_CONTROLLER_EPOCH = 0

# Optimistic loops (a conditional write lost to a concurrent one) retry this often; each
# lost race means another writer made progress, so this is a bound, not a wait.
_MAX_ATTEMPTS = 100

# Partition-state writes per multi in ``update_partition_states``. One set_data of a state
# is ~150-250 bytes on the wire (path + JSON), so 500 make ~100 KB, a tenth of ZooKeeper's
# default jute.maxbuffer (1 MB, which bounds a request); several such multis are pipelined.
# Kafka's controller sends its updateLeaderAndIsr writes pipelined too (one multi each).
STATE_WRITES_PER_MULTI = 500

# -- errors and data types --------------------------------------------------------------------


class BrokerIdInUseError(CoordinationError):
    """Another live session holds ``/brokers/ids/<id>`` (Kafka: NodeExistsException at
    registration, "a broker is already registered on the path")."""


class ControllerMovedError(CoordinationError):
    """The ``/controller_epoch`` check of a controller write failed: another controller has
    been elected since this lease was taken (Kafka's ControllerMovedException)."""


class StaleZnodeError(CoordinationError):
    """A write conditional on a znode's zkVersion lost to another write."""


class StalePartitionStateError(StaleZnodeError):
    """The partition state changed since it was read (or exists when it should not)."""


class StaleTopicAssignmentError(StaleZnodeError):
    """The topic's assignment znode changed since it was read."""


@dataclass(frozen=True)
class ControllerLease:
    """Proof of election: the epoch this controller runs under and the zkVersion of
    ``/controller_epoch`` that every one of its writes checks."""

    broker_id: int
    epoch: int
    epoch_zk_version: int


class SessionEvent(enum.Enum):
    """kazoo's connection states, as cluster code cares about them."""

    CONNECTED = "CONNECTED"  # after EXPIRED this is a NEW session: register again
    SUSPENDED = "SUSPENDED"  # connection lost; the session (and its ephemerals) may live on
    EXPIRED = "EXPIRED"  # the session is gone: its broker and controller znodes are deleted


_SESSION_EVENTS = {
    KazooState.CONNECTED: SessionEvent.CONNECTED,
    KazooState.SUSPENDED: SessionEvent.SUSPENDED,
    KazooState.LOST: SessionEvent.EXPIRED,
}


@dataclass(frozen=True)
class ZnodeData:
    """A znode's content and the parts of its stat that cluster code orders by: ``version``
    (zkVersion, what conditional writes check) and ``mzxid`` (the zxid of its last write:
    it grows across a delete and re-create too, so it orders any two reads of one path)."""

    data: bytes
    version: int
    mzxid: int
    czxid: int


class PathWatch:
    """One callback for many one-shot ZooKeeper watches, to pass as ``watch`` to the reads of
    ``read_many``. kazoo keeps a set of callbacks per path, so passing the same object on
    every read re-arms a fired watch without stacking duplicates.

    ``callback(path)`` runs (on kazoo's thread: do not block) when a watched znode (or its
    children, for a children read) changed or was created or deleted; ``callback(None)``
    when kazoo dropped every watch: the connection was lost (kazoo does not re-send watches
    on reconnection, ZooKeeper's SetWatches) or the session ended. After None, read
    everything again with this watch."""

    def __init__(self, callback: Callable[[str | None], None]) -> None:
        self._callback = callback

    def __call__(self, event: Any) -> None:
        if event.type == EventType.NONE or event.path is None:
            self._callback(None)
        else:
            self._callback(event.path)


class _MultiFailed(Exception):
    """One operation of a multi failed; ``index`` counts the caller's operations."""

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(f"operation {index} failed: {error!r}")
        self.index = index
        self.error = error


def parse_connect(connect: str) -> tuple[str, str | None]:
    """``host:port[,host:port...][/chroot]`` -> (hosts, chroot or None), as Kafka's
    ``zookeeper.connect``. Raises ValueError."""
    hosts, _, chroot = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"no ZooKeeper host in {connect!r}")
    chroot = chroot.strip("/")
    return hosts, (f"/{chroot}" if chroot else None)


class ZkClient:
    """Blocking access to a cluster's znodes; see the module docstring for threading."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._hosts, self._chroot = parse_connect(connect)
        self._session_timeout_s = session_timeout_ms / 1000
        self._connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self._clock = clock or SystemClock()
        # kazoo takes the chroot from the connect string and prefixes every path with it.
        self._zk = KazooClient(hosts=connect.strip(), timeout=self._session_timeout_s)
        self._read_retry = KazooRetry(
            max_tries=-1, delay=0.05, max_delay=1.0, deadline=self._connection_timeout_s
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (bounded by the connection timeout), creating the chroot and Kafka's
        persistent top-level paths when missing (``KafkaZkClient.createTopLevelPaths``).

        Raises:
            kazoo's KazooTimeoutError when no server answers in time.
        """
        if self._chroot:
            self._create_chroot()
        try:
            self._zk.start(timeout=self._connection_timeout_s)
            for path in zk_data.PERSISTENT_PATHS:
                self._zk.ensure_path(path)
        except Exception:
            self.stop()
            raise

    def _create_chroot(self) -> None:
        # A chrooted client cannot create its own root; Kafka connects without the chroot
        # once to create it (KafkaServer.initZkClient), and so does this.
        bootstrap = KazooClient(hosts=self._hosts, timeout=self._session_timeout_s)
        try:
            bootstrap.start(timeout=self._connection_timeout_s)
            bootstrap.ensure_path(self._chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()

    def stop(self) -> None:
        """Close the session: its ephemeral znodes (broker registration, controller) go at
        once rather than after the session timeout. Idempotent."""
        self._zk.stop()
        self._zk.close()

    def __enter__(self) -> ZkClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def session_id(self) -> int | None:
        client_id = self._zk.client_id
        return int(client_id[0]) if client_id else None

    @property
    def kazoo(self) -> Any:
        """The underlying KazooClient, for kazoo's recipes and for tests."""
        return self._zk

    def on_session_event(self, callback: Callable[[SessionEvent], None]) -> None:
        """Call ``callback`` on every connection state change. It runs on kazoo's thread and
        must not block (kazoo's listener rule)."""

        def listener(state: Any) -> None:
            callback(_SESSION_EVENTS[state])

        self._zk.add_listener(listener)

    # -- plumbing -------------------------------------------------------------------------------

    def _read(self, func: Callable[..., Any], *args: Any) -> Any:
        # A copy per call: KazooRetry counts attempts on the instance.
        return self._read_retry.copy()(func, *args)

    def _get(self, path: str) -> tuple[bytes, Any] | None:
        try:
            data, stat = self._read(self._zk.get, path)
        except NoNodeError:
            return None
        return data, stat

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._read(self._zk.get_children, path))
        except NoNodeError:
            return []

    def _exists(self, path: str) -> bool:
        return self._read(self._zk.exists, path) is not None

    # -- pipelined reads ------------------------------------------------------------------------

    def read_many(
        self,
        data_paths: Iterable[str] = (),
        children_paths: Iterable[str] = (),
        watch: PathWatch | None = None,
        *,
        watch_missing: bool = True,
    ) -> tuple[dict[str, ZnodeData | None], dict[str, list[str] | None]]:
        """Read many znodes in one pipelined round: every request is sent before the first
        answer is awaited, so N reads cost about one round trip plus N decodes instead of N
        round trips (one synchronous read per znode took ~0.5 ms each on a loaded box, 1 s
        for 2,000 partitions). Returns (path -> data or None when missing, path -> sorted
        children or None when missing).

        With ``watch``, every path read is watched: a data read sets a data watch, a
        children read a children watch, and a missing znode an exists watch, so its creation
        is seen too (one created between the two reads is read again); with
        ``watch_missing`` False a missing znode is not watched (one known to be deleted for
        good would keep its watch until the session ends).

        Raises:
            kazoo's ConnectionLoss/SessionExpiredError once the connection timeout is spent
            (retried until then); its timeout error when answers stop coming.
        """
        data_paths, children_paths = list(data_paths), list(children_paths)
        if not data_paths and not children_paths:
            return {}, {}
        result: tuple[dict[str, ZnodeData | None], dict[str, list[str] | None]] = self._read(
            self._read_many_once, data_paths, children_paths, watch, watch_missing
        )
        return result

    def _read_many_once(
        self,
        data_paths: list[str],
        children_paths: list[str],
        watch: PathWatch | None,
        watch_missing: bool,
    ) -> tuple[dict[str, ZnodeData | None], dict[str, list[str] | None]]:
        deadline = time.monotonic() + self._connection_timeout_s
        zk = self._zk
        data_calls = [(p, zk.get_async(p, watch=watch)) for p in data_paths]
        children_calls = [(p, zk.get_children_async(p, watch=watch)) for p in children_paths]
        data: dict[str, ZnodeData | None] = {}
        missing: list[str] = []
        for path, call in data_calls:
            try:
                value, stat = call.get(timeout=_left(deadline))
            except NoNodeError:
                missing.append(path)
                continue
            data[path] = ZnodeData(value, int(stat.version), int(stat.mzxid), int(stat.czxid))
        children: dict[str, list[str] | None] = {}
        for path, call in children_calls:
            try:
                children[path] = sorted(call.get(timeout=_left(deadline)))
            except NoNodeError:
                children[path] = None
        while missing:
            if watch is None or not watch_missing:
                data.update(dict.fromkeys(missing))
                break
            # ZooKeeper sets no data watch on a missing znode; an exists watch fires on its
            # creation. If it was created since the read, read it (and watch it) again.
            exists_calls = [(p, zk.exists_async(p, watch=watch)) for p in missing]
            again = []
            for path, call in exists_calls:
                if call.get(timeout=_left(deadline)) is None:
                    data[path] = None
                else:
                    again.append(path)
            missing = []
            for path, call in [(p, zk.get_async(p, watch=watch)) for p in again]:
                try:
                    value, stat = call.get(timeout=_left(deadline))
                except NoNodeError:
                    missing.append(path)  # deleted again already
                    continue
                data[path] = ZnodeData(value, int(stat.version), int(stat.mzxid), int(stat.czxid))
        return data, children

    def _commit(self, txn: Any) -> list[Any]:
        """Commit a multi; raise _MultiFailed naming the operation that failed (ZooKeeper
        reports the others as rolled back or not run)."""
        return _check_multi(list(txn.commit()))

    def _controller_txn(self, lease: ControllerLease) -> Any:
        """A multi whose first operation fences it to ``lease`` (KAFKA-6082)."""
        txn = self._zk.transaction()
        txn.check(zk_data.CONTROLLER_EPOCH, lease.epoch_zk_version)
        return txn

    def _commit_as_controller(self, lease: ControllerLease, txn: Any) -> list[Any]:
        """Results of the caller's operations (the check's dropped); _MultiFailed indexes
        them from 0 too."""
        return _controller_results(lease, list(txn.commit()))

    # -- cluster id ---------------------------------------------------------------------------

    def get_or_create_cluster_id(self, candidate: str) -> str:
        """The cluster's id; ``candidate`` becomes it if there is none yet (Kafka's
        ``KafkaZkClient.createOrGetClusterId``): all brokers agree whoever came first."""
        existing = self._get(zk_data.CLUSTER_ID)
        if existing is not None:
            return zk_data.decode_cluster_id(existing[0])
        try:
            self._zk.create(zk_data.CLUSTER_ID, zk_data.encode_cluster_id(candidate), makepath=True)
            return candidate
        except NodeExistsError:
            data, _ = self._zk.get(zk_data.CLUSTER_ID)
            return zk_data.decode_cluster_id(data)

    # -- brokers ------------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns the broker epoch, its czxid
        (KIP-380). Call again after ``SessionEvent.EXPIRED`` + ``CONNECTED``: the new
        registration has a larger epoch.

        Raises:
            BrokerIdInUseError: another live session has registered this id.
        """
        info = replace(info, timestamp_ms=self._clock.milliseconds())
        path = zk_data.broker_path(info.broker_id)
        data = zk_data.encode_broker(info)
        for _ in range(_MAX_ATTEMPTS):
            try:
                _, stat = self._zk.create(path, data, ephemeral=True, include_data=True)
                log.info("registered broker %d, epoch %d", info.broker_id, stat.czxid)
                return int(stat.czxid)
            except NodeExistsError:
                pass
            stat = self._zk.exists(path)
            if stat is None:
                continue  # the other registration's session just ended: try again
            # KafkaZkClient.checkedEphemeralCreate: a create retried after a connection loss
            # finds the node its own session made; that is a success, not a conflict.
            if stat.ephemeralOwner == self.session_id:
                return int(stat.czxid)
            raise BrokerIdInUseError(
                f"broker id {info.broker_id} is registered by another live session"
                f" (0x{stat.ephemeralOwner:x}) at {path}"
            )
        raise CoordinationError(f"could not register broker {info.broker_id}")

    def get_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        """Live brokers: id -> (registration, broker epoch)."""
        brokers: dict[int, tuple[BrokerInfo, int]] = {}
        for child in self._children(zk_data.BROKER_IDS):
            if not (child.isascii() and child.isdigit()):
                continue
            broker_id = int(child)
            found = self._get(zk_data.broker_path(broker_id))
            if found is not None:  # else it expired between the listing and the read
                data, stat = found
                brokers[broker_id] = (zk_data.decode_broker(broker_id, data), int(stat.czxid))
        return brokers

    # -- controller election ------------------------------------------------------------------

    def try_elect_controller(self, broker_id: int) -> ControllerLease | None:
        """Become controller if there is none: one multi creates the ephemeral
        ``/controller`` and bumps ``/controller_epoch`` conditionally on its zkVersion, so
        election and epoch bump happen together or not at all (Kafka's
        ``registerControllerAndIncrementControllerEpoch``). ``/controller_epoch`` is created
        at 0 when missing, so the first controller's epoch is 1.

        Returns:
            the lease, or None when a controller exists (this session's included).
        """
        controller = zk_data.encode_controller(
            ControllerInfo(broker_id, self._clock.milliseconds())
        )
        for _ in range(_MAX_ATTEMPTS):
            epoch, zk_version = self._read_or_create_controller_epoch()
            txn = self._zk.transaction()
            txn.create(zk_data.CONTROLLER, controller, ephemeral=True)
            txn.set_data(
                zk_data.CONTROLLER_EPOCH,
                zk_data.encode_controller_epoch(epoch + 1),
                version=zk_version,
            )
            try:
                results = self._commit(txn)
            except _MultiFailed as e:
                if e.index == 0 and isinstance(e.error, NodeExistsError):
                    return None
                continue  # the epoch moved under us (another election): read it again
            lease = ControllerLease(broker_id, epoch + 1, int(results[1].version))
            log.info("broker %d elected controller, epoch %d", broker_id, lease.epoch)
            return lease
        raise CoordinationError(f"broker {broker_id}: controller election kept conflicting")

    def _read_or_create_controller_epoch(self) -> tuple[int, int]:
        found = self._get(zk_data.CONTROLLER_EPOCH)
        if found is None:
            with contextlib.suppress(NodeExistsError):
                self._zk.create(
                    zk_data.CONTROLLER_EPOCH,
                    zk_data.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH),
                )
            data, stat = self._zk.get(zk_data.CONTROLLER_EPOCH)
        else:
            data, stat = found
        return zk_data.decode_controller_epoch(data), int(stat.version)

    def resign_controller(self, lease: ControllerLease) -> None:
        """Delete ``/controller`` if this lease still holds it (controlled shutdown).

        Raises:
            ControllerMovedError: another controller was elected meanwhile.
        """
        txn = self._controller_txn(lease)
        txn.delete(zk_data.CONTROLLER)
        try:
            self._commit_as_controller(lease, txn)
        except _MultiFailed as e:
            if not isinstance(e.error, NoNodeError):
                raise e.error from None

    def get_controller_id(self) -> int | None:
        found = self._get(zk_data.CONTROLLER)
        return None if found is None else zk_data.decode_controller(found[0]).broker_id

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion of /controller_epoch), or None before any election."""
        found = self._get(zk_data.CONTROLLER_EPOCH)
        if found is None:
            return None
        return zk_data.decode_controller_epoch(found[0]), int(found[1].version)

    # -- controller writes (each one multi, fenced by the lease) -----------------------------

    def create_partition_states(
        self, lease: ControllerLease, topic: str, states: Mapping[int, LeaderAndIsr]
    ) -> dict[int, int]:
        """Create the state znodes of new partitions (and their parents) in one multi;
        returns partition -> zkVersion (0).

        Raises:
            ControllerMovedError; UnknownTopicError: the topic's znode is gone;
            StalePartitionStateError: a state already exists.
        """
        if not self._exists(zk_data.topic_path(topic)):
            raise UnknownTopicError(topic)
        txn = self._controller_txn(lease)
        if not self._exists(zk_data.topic_partitions_path(topic)):
            txn.create(zk_data.topic_partitions_path(topic))
        for partition, state in sorted(states.items()):
            if not self._exists(zk_data.topic_partition_path(topic, partition)):
                txn.create(zk_data.topic_partition_path(topic, partition))
            txn.create(
                zk_data.partition_state_path(topic, partition),
                zk_data.encode_partition_state(state),
            )
        try:
            self._commit_as_controller(lease, txn)
        except _MultiFailed as e:
            if isinstance(e.error, NodeExistsError):
                raise StalePartitionStateError(f"{topic}: a partition state exists") from None
            if isinstance(e.error, NoNodeError):
                raise UnknownTopicError(topic) from None
            raise e.error from None
        return dict.fromkeys(states, 0)

    def update_partition_state(
        self,
        lease: ControllerLease,
        topic: str,
        partition: int,
        state: LeaderAndIsr,
        zk_version: int,
    ) -> int:
        """Replace a partition's leader/ISR if its znode is still at ``zk_version``
        (Kafka's ``updateLeaderAndIsr``); returns the new zkVersion.

        Raises:
            ControllerMovedError; StalePartitionStateError: the state changed since read;
            UnknownTopicError: the state znode does not exist.
        """
        path = zk_data.partition_state_path(topic, partition)
        txn = self._controller_txn(lease)
        txn.set_data(path, zk_data.encode_partition_state(state), version=zk_version)
        try:
            (stat,) = self._commit_as_controller(lease, txn)
        except _MultiFailed as e:
            if isinstance(e.error, BadVersionError):
                raise StalePartitionStateError(
                    f"{path} is no longer at zkVersion {zk_version}"
                ) from None
            if isinstance(e.error, NoNodeError):
                raise UnknownTopicError(f"{topic}-{partition}") from None
            raise e.error from None
        return int(stat.version)

    def update_partition_states(
        self,
        lease: ControllerLease,
        updates: Mapping[tuple[str, int], tuple[LeaderAndIsr, int]],
        per_multi: int = STATE_WRITES_PER_MULTI,
    ) -> dict[tuple[str, int], int | StaleZnodeError | UnknownTopicError]:
        """``update_partition_state`` for many partitions at once: (topic, partition) ->
        (new state, the zkVersion it replaces). The writes go in multis of up to
        ``per_multi``, each fenced by the controller epoch check and each write conditional
        on its znode's zkVersion, all multis sent before the first answer is awaited (Kafka's
        ``KafkaZkClient.updateLeaderAndIsr`` pipelines its conditional writes the same way).

        A multi is all or nothing: when one write in it fails, ZooKeeper names it and rolls
        the others back; that partition gets its error and the others are sent again in a
        multi of their own, so one stale partition never costs the rest their election.

        Returns:
            per partition, the new zkVersion, or ``StalePartitionStateError`` (the state
            changed since it was read) or ``UnknownTopicError`` (the znode is gone).

        Raises:
            ControllerMovedError: nothing more is written (a multi that was already
            committed stays so; the caller resigns and the next controller re-reads).
        """
        if per_multi < 1:
            raise ValueError(f"per_multi must be positive: {per_multi}")
        results: dict[tuple[str, int], int | StaleZnodeError | UnknownTopicError] = {}
        items = list(updates.items())
        chunks = [items[i : i + per_multi] for i in range(0, len(items), per_multi)]
        while chunks:
            sent = []
            for chunk in chunks:
                txn = self._controller_txn(lease)
                for (topic, partition), (state, version) in chunk:
                    txn.set_data(
                        zk_data.partition_state_path(topic, partition),
                        zk_data.encode_partition_state(state),
                        version=version,
                    )
                sent.append((chunk, txn.commit_async()))
            chunks = []
            for chunk, call in sent:
                try:
                    stats = _controller_results(lease, list(call.get()))
                except _MultiFailed as e:
                    (topic, partition), (_, version) = chunk[e.index]
                    path = zk_data.partition_state_path(topic, partition)
                    if isinstance(e.error, BadVersionError):
                        results[(topic, partition)] = StalePartitionStateError(
                            f"{path} is no longer at zkVersion {version}"
                        )
                    elif isinstance(e.error, NoNodeError):
                        results[(topic, partition)] = UnknownTopicError(f"{topic}-{partition}")
                    else:
                        raise e.error from None
                    rest = chunk[: e.index] + chunk[e.index + 1 :]
                    if rest:
                        chunks.append(rest)  # rolled back, still valid: send them again
                    continue
                for (key, _), stat in zip(chunk, stats, strict=True):
                    results[key] = int(stat.version)
        return results

    def set_topic_assignment(
        self,
        lease: ControllerLease,
        topic: str,
        assignment: TopicAssignment,
        zk_version: int = -1,
    ) -> int:
        """Rewrite a topic's replica assignment (reassignment, KIP-455), conditional on the
        znode's zkVersion unless it is -1; returns the new zkVersion.

        Raises:
            ControllerMovedError; StaleTopicAssignmentError; UnknownTopicError.
        """
        path = zk_data.topic_path(topic)
        txn = self._controller_txn(lease)
        txn.set_data(path, zk_data.encode_topic(assignment), version=zk_version)
        try:
            (stat,) = self._commit_as_controller(lease, txn)
        except _MultiFailed as e:
            if isinstance(e.error, BadVersionError):
                raise StaleTopicAssignmentError(f"{path} is not at {zk_version}") from None
            if isinstance(e.error, NoNodeError):
                raise UnknownTopicError(topic) from None
            raise e.error from None
        return int(stat.version)

    def delete_topic(self, lease: ControllerLease, topic: str) -> None:
        """Delete everything of a topic in one multi: ``/brokers/topics/<t>`` with its
        partitions and states, ``/config/topics/<t>`` and the request
        ``/admin/delete_topics/<t>`` (Kafka's TopicDeletionManager.completeDeleteTopic).
        Deleting a topic that is already gone does nothing.

        Raises:
            ControllerMovedError.
        """
        for _ in range(_MAX_ATTEMPTS):
            paths = self._subtree(zk_data.topic_path(topic))
            paths += [
                p
                for p in (zk_data.topic_config_path(topic), zk_data.delete_topic_path(topic))
                if self._exists(p)
            ]
            if not paths:
                return
            txn = self._controller_txn(lease)
            for path in paths:
                txn.delete(path)
            try:
                self._commit_as_controller(lease, txn)
                log.info("deleted topic %s (controller epoch %d)", topic, lease.epoch)
                return
            except _MultiFailed as e:
                if not isinstance(e.error, NoNodeError | NotEmptyError):
                    raise e.error from None
                # the tree changed between the listing and the multi: list it again
        raise CoordinationError(f"could not delete topic {topic}: its znodes kept changing")

    def _subtree(self, path: str) -> list[str]:
        """``path`` and everything under it, children before parents; [] if missing."""
        if not self._exists(path):
            return []
        nodes: list[str] = []
        for child in self._children(path):
            nodes += self._subtree(zk_data.child_path(path, child))
        return [*nodes, path]

    def delete_reassign_partitions(self, lease: ControllerLease) -> None:
        """Remove the (pre-KIP-455) reassignment request once it is done."""
        self._controller_delete(lease, [zk_data.REASSIGN_PARTITIONS])

    def delete_preferred_replica_election(self, lease: ControllerLease) -> None:
        self._controller_delete(lease, [zk_data.PREFERRED_REPLICA_ELECTION])

    def delete_isr_change_notifications(self, lease: ControllerLease, names: list[str]) -> None:
        """Remove processed ``isr_change_<seq>`` children (names as listed)."""
        self._controller_delete(
            lease, [zk_data.child_path(zk_data.ISR_CHANGE_NOTIFICATION, n) for n in names]
        )

    def _controller_delete(self, lease: ControllerLease, paths: list[str]) -> None:
        present = [p for p in paths if self._exists(p)]
        if not present:
            return
        txn = self._controller_txn(lease)
        for path in present:
            txn.delete(path)
        try:
            self._commit_as_controller(lease, txn)
        except _MultiFailed as e:
            if not isinstance(e.error, NoNodeError):  # deleted meanwhile: fine
                raise e.error from None

    # -- reads --------------------------------------------------------------------------------

    def get_topics(self) -> list[str]:
        return self._children(zk_data.TOPICS)

    def get_topic(self, topic: str) -> TopicAssignment | None:
        """The replica assignment and topic id, or None if there is no such topic."""
        found = self.get_topic_with_version(topic)
        return None if found is None else found[0]

    def get_topic_with_version(self, topic: str) -> tuple[TopicAssignment, int] | None:
        """As ``get_topic``, with the zkVersion ``set_topic_assignment`` may check."""
        found = self._get(zk_data.topic_path(topic))
        if found is None:
            return None
        return zk_data.decode_topic(topic, found[0]), int(found[1].version)

    def get_partition_state(self, topic: str, partition: int) -> tuple[LeaderAndIsr, int] | None:
        """(state, zkVersion), or None when the partition has no state yet."""
        found = self._get(zk_data.partition_state_path(topic, partition))
        if found is None:
            return None
        return zk_data.decode_partition_state(topic, partition, found[0]), int(found[1].version)

    def get_partition_states(self, topic: str) -> dict[int, tuple[LeaderAndIsr, int]]:
        """Every state of ``topic``: partition -> (state, zkVersion); reads pipelined."""
        partitions = [
            int(child)
            for child in self._children(zk_data.topic_partitions_path(topic))
            if child.isascii() and child.isdigit()
        ]
        found = self.get_many_partition_states([(topic, p) for p in partitions])
        return {p: state for (_, p), state in found.items()}

    def get_many_partition_states(
        self, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[LeaderAndIsr, int]]:
        """(state, zkVersion) of each partition that has a state, in one pipelined round
        (``read_many``); partitions without one are left out."""
        paths = {zk_data.partition_state_path(t, p): (t, p) for t, p in partitions}
        data, _ = self.read_many(paths)
        states: dict[tuple[str, int], tuple[LeaderAndIsr, int]] = {}
        for path, node in data.items():
            if node is not None:
                topic, partition = paths[path]
                state = zk_data.decode_partition_state(topic, partition, node.data)
                states[(topic, partition)] = (state, node.version)
        return states

    def get_topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's config overrides ({} when it has none)."""
        found = self._get(zk_data.topic_config_path(topic))
        if found is None:
            return {}
        return zk_data.decode_config(zk_data.TOPIC_CONFIG_TYPE, topic, found[0])

    def get_pending_deletions(self) -> list[str]:
        """Topics whose deletion was requested and is not complete."""
        return self._children(zk_data.DELETE_TOPICS)

    # -- admin writes (any broker; Kafka's AdminZkClient) -------------------------------------

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, list[int]],
        topic_id: uuid.UUID,
        configs: Mapping[str, str],
    ) -> None:
        """Write the topic's config and then its assignment, in one multi so that a topic is
        never visible without its config and a lost race clobbers nothing (Kafka writes the
        config znode first for the same reason, ``createTopicWithAssignment``). The
        controller then creates the partition states.

        Raises:
            TopicExistsError: the topic exists or its deletion is still pending.
            TopicCollisionError: a topic's name equals this one once '.' is read as '_'.
        """
        topic_data = zk_data.encode_topic(TopicAssignment(dict(assignment), topic_id))
        config_path = zk_data.topic_config_path(topic)
        for _ in range(_MAX_ATTEMPTS):
            if self._exists(zk_data.delete_topic_path(topic)):
                raise TopicExistsError(f"topic {topic!r} is marked for deletion")
            if self._exists(zk_data.topic_path(topic)):
                raise TopicExistsError(f"topic {topic!r} already exists")
            # Against the topics in ZooKeeper now, not a broker's cache, as Kafka's
            # AdminZkClient does (another broker may have just created the other name);
            # a listing only for names with '.' or '_'.
            if "." in topic or "_" in topic:
                colliding = colliding_topics(topic, self.get_topics())
                if colliding:
                    raise TopicCollisionError(topic, colliding)
            txn = self._zk.transaction()
            # A config znode may outlive a topic whose creation failed half-way in old
            # Kafka versions; overwrite it rather than refuse.
            config_stat = self._zk.exists(config_path)
            if config_stat is None:
                txn.create(config_path, zk_data.encode_config(configs))
            else:
                txn.set_data(
                    config_path, zk_data.encode_config(configs), version=config_stat.version
                )
            txn.create(zk_data.topic_path(topic), topic_data)
            try:
                self._commit(txn)
                return
            except _MultiFailed as e:
                if e.index == 1 and isinstance(e.error, NodeExistsError):
                    raise TopicExistsError(f"topic {topic!r} already exists") from None
                if not isinstance(e.error, NodeExistsError | BadVersionError | NoNodeError):
                    raise e.error from None
                # the config znode changed under us: look again
        raise CoordinationError(f"could not create topic {topic}: kept conflicting")

    def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides and announce the change with a sequential
        ``config_change_`` znode, which brokers watch (Kafka's ``changeTopicConfig``).

        Raises:
            UnknownTopicError.
        """
        if not self._exists(zk_data.topic_path(topic)):
            raise UnknownTopicError(topic)
        path = zk_data.topic_config_path(topic)
        data = zk_data.encode_config(configs)
        try:
            self._zk.set(path, data)
        except NoNodeError:
            self._zk.create(path, data, makepath=True)
        entity = zk_data.config_change_entity_path(zk_data.TOPIC_CONFIG_TYPE, topic)
        self._zk.create(
            zk_data.config_change_prefix_path(),
            zk_data.encode_config_change(entity),
            sequence=True,
        )

    def get_client_quotas(self) -> dict[str, dict[str, float]]:
        """Client quotas by entity path (``clients/<c>``, ``users/<u>``,
        ``users/<u>/clients/<c>``, Kafka's ``/config`` layout); entities without quota
        keys are left out."""
        found: dict[str, dict[str, float]] = {}
        paths = [f"clients/{c}" for c in self._children(f"{zk_data.CONFIG}/clients")]
        for user in self._children(f"{zk_data.CONFIG}/users"):
            paths.append(f"users/{user}")
            clients = self._children(f"{zk_data.CONFIG}/users/{user}/clients")
            paths += [f"users/{user}/clients/{c}" for c in clients]
        for path in paths:
            got = self._get(f"{zk_data.CONFIG}/{path}")
            if got is None or not got[0]:
                continue
            try:
                config = zk_data.decode_config_at(f"{zk_data.CONFIG}/{path}", got[0])
            except zk_data.ZkDataError:
                continue  # not ours to judge: what Kafka's own tools wrote may differ
            values = {}
            for key, value in config.items():
                try:
                    values[key] = float(value)
                except ValueError:
                    continue  # not a quota (Kafka's SCRAM credentials live here too)
            if values:
                found[path] = values
        return found

    def set_client_quotas(self, entity: str, values: Mapping[str, float]) -> None:
        """Replace ``entity``'s quotas and announce the change (Kafka's
        ``changeClientIdConfig`` / ``changeUserOrUserClientIdConfig``)."""
        path = f"{zk_data.CONFIG}/{entity}"
        data = zk_data.encode_config({k: _quota_text(v) for k, v in values.items()})
        try:
            self._zk.set(path, data)
        except NoNodeError:
            self._zk.create(path, data, makepath=True)
        self._zk.create(
            zk_data.config_change_prefix_path(),
            zk_data.encode_config_change(entity),
            sequence=True,
        )

    def request_topic_deletion(self, topic: str) -> None:
        """Create ``/admin/delete_topics/<t>`` for the controller to act on; asking twice is
        harmless (Kafka would say TopicAlreadyMarkedForDeletion).

        Raises:
            UnknownTopicError.
        """
        if not self._exists(zk_data.topic_path(topic)):
            raise UnknownTopicError(topic)
        with contextlib.suppress(NodeExistsError):
            self._zk.create(zk_data.delete_topic_path(topic), makepath=True)

    def add_partitions(self, topic: str, assignment: Mapping[int, list[int]]) -> TopicAssignment:
        """Grow a topic to ``assignment`` (all partitions, the existing ones unchanged),
        keeping its topic id; conditional on the znode's zkVersion, re-read on conflict.
        The controller then creates the new partitions' states.

        Raises:
            UnknownTopicError; ValueError: existing partitions differ, or none is added.
        """
        for _ in range(_MAX_ATTEMPTS):
            found = self.get_topic_with_version(topic)
            if found is None:
                raise UnknownTopicError(topic)
            current, zk_version = found
            _check_growth(topic, current, assignment)
            grown = replace(current, partitions={p: list(r) for p, r in assignment.items()})
            try:
                self._zk.set(
                    zk_data.topic_path(topic), zk_data.encode_topic(grown), version=zk_version
                )
                return grown
            except BadVersionError:
                continue
        raise CoordinationError(f"could not add partitions to {topic}: kept conflicting")

    # -- producer ids ---------------------------------------------------------------------------

    def allocate_producer_id_block(
        self, broker_id: int, block_size: int = zk_data.PRODUCER_ID_BLOCK_SIZE
    ) -> int:
        """Claim the next ``block_size`` producer ids; returns the first. A read-modify-write
        of ``/latest_producer_id_block`` conditional on its zkVersion, retried when another
        broker won the race, so no two brokers ever get overlapping blocks (Kafka's
        ``ZkProducerIdManager.getNewProducerIdBlock``).
        """
        for _ in range(_MAX_ATTEMPTS):
            found = self._get(zk_data.PRODUCER_ID_BLOCK)
            if found is None:
                with contextlib.suppress(NodeExistsError):
                    self._zk.create(zk_data.PRODUCER_ID_BLOCK)
                continue
            data, stat = found
            previous = zk_data.decode_producer_id_block(data)
            block = zk_data.next_producer_id_block(previous, broker_id, block_size)
            try:
                self._zk.set(
                    zk_data.PRODUCER_ID_BLOCK,
                    zk_data.encode_producer_id_block(block),
                    version=stat.version,
                )
            except BadVersionError:
                continue
            return block.block_start
        raise CoordinationError("could not allocate a producer id block: kept conflicting")

    # -- watches --------------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], bool | None]) -> Any:
        """Call ``callback(children)`` now and on every change of ``path``'s children
        (``path`` from zk_data, e.g. ``zk_data.BROKER_IDS``); returning False ends the watch.
        kazoo's ChildrenWatch re-arms the one-shot ZooKeeper watch itself. Runs on kazoo's
        thread: do not block."""
        return ChildrenWatch(self._zk, path, callback)

    def watch_data(
        self, path: str, callback: Callable[[bytes | None, int | None], bool | None]
    ) -> Any:
        """Call ``callback(data, zk_version)`` now and on every change of ``path`` (both
        None while it does not exist); returning False ends the watch. kazoo's DataWatch;
        runs on kazoo's thread: do not block."""

        def on_change(data: bytes | None, stat: Any) -> bool | None:
            return callback(data, None if stat is None else int(stat.version))

        return DataWatch(self._zk, path, on_change)


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _check_multi(results: list[Any]) -> list[Any]:
    """A multi's results, or _MultiFailed naming the operation that failed (ZooKeeper
    reports the others as rolled back or not run)."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            raise _MultiFailed(index, result)
    return results


def _controller_results(lease: ControllerLease, results: list[Any]) -> list[Any]:
    """Results of a fenced multi without its epoch check: ControllerMovedError when the
    check failed; _MultiFailed indexes the caller's operations from 0."""
    try:
        return _check_multi(results)[1:]
    except _MultiFailed as e:
        if e.index == 0:
            raise ControllerMovedError(
                f"controller {lease.broker_id} (epoch {lease.epoch}) was deposed:"
                f" {zk_data.CONTROLLER_EPOCH} is no longer at zkVersion"
                f" {lease.epoch_zk_version}"
            ) from None
        raise _MultiFailed(e.index - 1, e.error) from None


def _check_growth(
    topic: str, current: TopicAssignment, assignment: Mapping[int, list[int]]
) -> None:
    changed = [p for p, r in current.partitions.items() if list(assignment.get(p, [])) != r]
    if changed:
        raise ValueError(f"{topic}: add_partitions cannot change partitions {sorted(changed)}")
    if len(assignment) <= len(current.partitions):
        raise ValueError(f"{topic}: has {len(current.partitions)} partitions, none added")
    if sorted(assignment) != list(range(len(assignment))):
        raise ValueError(f"{topic}: partitions must be numbered 0..{len(assignment) - 1}")


def _quota_text(value: float) -> str:
    # Byte rates are whole numbers: stored as Kafka writes them ("1048576").
    return str(int(value)) if value == int(value) else repr(value)
