"""One ZooKeeper session over kazoo, and the primitives every znode concern builds on.

Owns the connection (chroot, Kafka's persistent top-level paths, session state events), the
reads (retried until the connection timeout; pipelined rounds with ``read_many``), the
multi's error handling (``commit``: which operation failed) and watches. What the znodes
mean is for the concern modules on top (``zk_brokers``, ``zk_controller``,
``zk_partition_states``, ``zk_topics``, ``zk_configs``, ``zk_producer_ids``), each taking
the session first as kazoo's recipes take the client; ``zk_client.ZkClient`` builds them.

Threading: every method blocks on ZooKeeper round trips. Call them from worker threads (an
executor, ``asyncio.to_thread``), never on the asyncio loop. kazoo's client is thread-safe
and the session keeps no mutable state of its own, so one instance serves all threads.
Session listeners and watch callbacks run on kazoo's event thread: they must return quickly
and must not block on this session (hand the event to a queue or to
``loop.call_soon_threadsafe``).

Errors: kazoo's ``ConnectionLoss`` and ``SessionExpiredError`` propagate from writes
(whether a write whose answer was lost took effect is for the caller to re-read); reads are
retried until the connection timeout.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable
from typing import Any

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_data import ZnodeData

try:
    from kazoo.client import KazooClient, KazooState
    from kazoo.exceptions import NoNodeError, RolledBackError, RuntimeInconsistency
    from kazoo.protocol.states import EventType
    from kazoo.recipe.watchers import ChildrenWatch, DataWatch
    from kazoo.retry import KazooRetry
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError(
        f"cluster mode talks to ZooKeeper through kazoo ({e}): pip install 'tierlog[cluster]'"
    ) from e

from tierlog.broker.coordination.zk_auth import ZkIdentity, ZnodeAcls
from tierlog.broker.coordination.zk_tls import ZkTls

# Kafka's zookeeper.session.timeout.ms default since 2.5 (KIP-537); the connection timeout
# defaults to it, as zookeeper.connection.timeout.ms does.
DEFAULT_SESSION_TIMEOUT_MS = 18_000

# Optimistic loops (a conditional write lost to a concurrent one) retry this often; each
# lost race means another writer made progress, so this is a bound, not a wait.
MAX_ATTEMPTS = 100


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


class MultiFailed(Exception):
    """One operation of a multi failed; ``index`` counts the caller's operations."""

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(f"operation {index} failed: {error!r}")
        self.index = index
        self.error = error


def check_multi(results: list[Any]) -> list[Any]:
    """A multi's results, or MultiFailed naming the operation that failed (ZooKeeper
    reports the others as rolled back or not run)."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            raise MultiFailed(index, result)
    return results


def parse_connect(connect: str) -> tuple[str, str | None]:
    """``host:port[,host:port...][/chroot]`` -> (hosts, chroot or None), as Kafka's
    ``zookeeper.connect``. Raises ValueError."""
    hosts, _, chroot = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"no ZooKeeper host in {connect!r}")
    chroot = chroot.strip("/")
    return hosts, (f"/{chroot}" if chroot else None)


class ZkSession:
    """One session; see the module docstring for threading.

    Args:
        connect: ``zookeeper.connect``, with an optional chroot.
        session_timeout_ms: ``zookeeper.session.timeout.ms``.
        connection_timeout_ms: ``zookeeper.connection.timeout.ms`` (the session timeout
            when None, as in Kafka).
        identity: who this session is to ZooKeeper (``zookeeper.jaas.config``); None:
            unauthenticated.
        secure_acls: ``zookeeper.set.acl``: new znodes get Kafka's ACLs (``zk_auth``).
        tls: ``zookeeper.ssl.*`` (``zk_tls``); None: plain TCP.
    """

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        *,
        identity: ZkIdentity | None = None,
        secure_acls: bool = False,
        tls: ZkTls | None = None,
    ) -> None:
        self._hosts, self._chroot = parse_connect(connect)
        self._tls_arguments = tls.kazoo_arguments() if tls is not None else {}
        self._session_timeout_s = session_timeout_ms / 1000
        self._connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self._auth_data = identity.auth_data() if identity is not None else None
        self.acls = ZnodeAcls(secure_acls)
        # kazoo takes the chroot from the connect string and prefixes every path with it.
        # Its default_acl covers create and ensure_path, not a multi's creates: those
        # name theirs (``acls.for_path``).
        self._zk = KazooClient(
            hosts=connect.strip(),
            timeout=self._session_timeout_s,
            auth_data=self._auth_data,
            default_acl=self.acls.default(),
            **self._tls_arguments,
        )
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
                self._zk.ensure_path(path, acl=self.acls.for_path(path))
        except Exception:
            self.stop()
            raise

    def _create_chroot(self) -> None:
        # A chrooted client cannot create its own root; Kafka connects without the chroot
        # once to create it (KafkaServer.initZkClient), and so does this.
        bootstrap = KazooClient(
            hosts=self._hosts,
            timeout=self._session_timeout_s,
            auth_data=self._auth_data,
            default_acl=self.acls.default(),
            **self._tls_arguments,
        )
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

    def __enter__(self) -> ZkSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def session_id(self) -> int | None:
        client_id = self._zk.client_id
        return int(client_id[0]) if client_id else None

    @property
    def session_timeout_s(self) -> float:
        """The session timeout asked for (``zookeeper.session.timeout.ms``)."""
        return self._session_timeout_s

    @property
    def kazoo(self) -> Any:
        """The underlying KazooClient, for the concern modules' writes, kazoo's recipes and
        tests."""
        return self._zk

    def on_session_event(self, callback: Callable[[SessionEvent], None]) -> None:
        """Call ``callback`` on every connection state change. It runs on kazoo's thread and
        must not block (kazoo's listener rule)."""

        def listener(state: Any) -> None:
            callback(_SESSION_EVENTS[state])

        self._zk.add_listener(listener)

    # -- reads, retried until the connection timeout ------------------------------------------

    def retrying(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``func(*args)`` retried on connection loss until the connection timeout."""
        # A copy per call: KazooRetry counts attempts on the instance.
        return self._read_retry.copy()(func, *args, **kwargs)

    def get(self, path: str) -> ZnodeData | None:
        """The znode's data and stat, or None when it does not exist."""
        try:
            data, stat = self.retrying(self._zk.get, path)
        except NoNodeError:
            return None
        return ZnodeData(data, int(stat.version), int(stat.mzxid), int(stat.czxid))

    def children(self, path: str) -> list[str]:
        """Sorted children; [] when the znode does not exist."""
        try:
            return sorted(self.retrying(self._zk.get_children, path))
        except NoNodeError:
            return []

    def exists(self, path: str) -> bool:
        return self.retrying(self._zk.exists, path) is not None

    def subtree(self, path: str) -> list[str]:
        """``path`` and everything under it, children before parents; [] if missing."""
        if not self.exists(path):
            return []
        nodes: list[str] = []
        for child in self.children(path):
            nodes += self.subtree(zk_data.child_path(path, child))
        return [*nodes, path]

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
        result: tuple[dict[str, ZnodeData | None], dict[str, list[str] | None]] = self.retrying(
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

    # -- writes -------------------------------------------------------------------------------

    def commit(self, txn: Any) -> list[Any]:
        """Commit a multi (``kazoo.transaction()``); raise MultiFailed naming the operation
        that failed (ZooKeeper reports the others as rolled back or not run)."""
        return check_multi(list(txn.commit()))

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
