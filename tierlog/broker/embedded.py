"""A broker inside the current process, on its own event-loop thread: for the demo, for
notebooks and for tests that want a broker without a child process.

    with EmbeddedBroker({"log.dirs": "./data/demo"}) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})

The broker's single-threaded contract holds: everything it does runs on that one thread;
callers only start and stop it. ``EmbeddedCluster`` runs several such brokers as one
replicated cluster.

``secure=True`` gives either what ``tierlog cluster start --secure`` gives (``security.
dev_security``): a SASL_SSL listener with SCRAM-SHA-512, the ACL authorizer with ``admin``
and ``broker`` as super users, ZooKeeper's ACLs in a cluster, and an ``admin.properties``
beside the data; ``client_config()`` is the admin's confluent-kafka settings:

    with EmbeddedCluster(3, data_dir=Path("./data/cluster"), secure=True) as cluster:
        admin = AdminClient(cluster.client_config())
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from tierlog.broker.broker import Broker
from tierlog.broker.config import BrokerConfig
from tierlog.security.dev_security import DevSecurity


def _security(secure: bool | DevSecurity, directory: Path) -> DevSecurity | None:
    if isinstance(secure, DevSecurity):
        return secure
    return DevSecurity.ensure(directory) if secure else None


class EmbeddedBroker:
    """Start with ``start()`` or ``with``; ``listeners`` defaults to an ephemeral port.

    Args:
        overrides: broker settings (they win over ``secure``'s).
        secure: ``True``: secured as the module docstring says, its files in
            ``<log dir>/security`` (``log.dirs`` is then required); or the ``DevSecurity``
            of a cluster. The SCRAM users are written (when missing) before it starts.
    """

    def __init__(
        self, overrides: Mapping[str, str] | None = None, *, secure: bool | DevSecurity = False
    ) -> None:
        overrides = dict(overrides or {})
        log_dirs = overrides.get("log.dirs") or overrides.get("log.dir") or ""
        if secure is True and not log_dirs:
            raise ValueError("EmbeddedBroker(secure=True) needs log.dirs (its files go there)")
        first_log_dir = Path(log_dirs.split(",")[0].strip())
        self.security = _security(secure, first_log_dir / "security")
        self._zookeeper = overrides.get("zookeeper.connect") or None
        secured = (
            self.security.broker_settings(
                int(overrides.get("broker.id", "0")), 0, zookeeper=self._zookeeper is not None
            )
            if self.security is not None
            else {}
        )
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", **secured, **overrides}
        self.config = BrokerConfig(props)
        self.broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def port(self) -> int:
        assert self.broker is not None, "not started"
        return self.broker.port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client_config(self) -> dict[str, str]:
        """confluent-kafka settings that reach this broker: the admin user's when secured."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap}
        return self.security.librdkafka_config(self.bootstrap)

    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        self._thread = threading.Thread(target=self._run, name="tierlog-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"embedded broker did not start within {timeout}s")
        if self._error is not None:
            raise RuntimeError("embedded broker failed to start") from self._error
        if self.security is not None and self._zookeeper is None:
            self.security.write_client_properties(self.bootstrap)
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        try:
            if self.security is not None:
                await self._seed_users(self.security)
            self.broker = Broker(self.config)
            await self.broker.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        await self.broker.wait_stopped()

    async def _seed_users(self, security: DevSecurity) -> None:
        """The admin and broker users, where this broker reads them, before it starts
        (kazoo blocks, but nothing else runs on this loop yet)."""
        from tierlog.broker.coordination.seed_users import (
            seed_users_local,
            seed_users_zookeeper,
        )
        from tierlog.broker.coordination.zk_auth import ZkIdentity

        if self._zookeeper is None:
            await seed_users_local(self.config.log_dirs[0], security.credentials())
            return
        username, password = security.zookeeper_identity()
        seed_users_zookeeper(
            self._zookeeper, ZkIdentity(username, password), True, security.credentials()
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Clean shutdown (flush, checkpoints), waiting for the broker thread to end."""
        if self._loop is None or self.broker is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self._loop).result(timeout)
        self._thread.join(timeout)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class EmbeddedCluster:
    """Brokers 0..n-1 of one cluster inside this process (each an ``EmbeddedBroker``: its
    own thread and event loop) on a ZooKeeper from Debian's package, or on ``zookeeper``:
    for notebooks and tests that want replication without child processes.

        with EmbeddedCluster(3, data_dir=Path("./data/cluster")) as cluster:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    All brokers share one interpreter (one GIL): this is for trying replication out, not
    for throughput (``tierlog cluster start`` runs one process per broker).
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        data_dir: Path,
        zookeeper: str | None = None,
        overrides: Mapping[str, str] | None = None,
        secure: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.size = brokers
        self.zookeeper = zookeeper
        self.overrides = dict(overrides or {})
        # Made (or reused) in <data_dir>/security, as `tierlog cluster start --secure` does.
        self.security = _security(secure, self.data_dir / "security")
        self.brokers: list[EmbeddedBroker | None] = [None] * brokers
        self._server: Any = None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b is not None)

    def start(self) -> EmbeddedCluster:
        if self.zookeeper is None:
            from tierlog.broker.coordination.zk_server import ZooKeeperServer

            self._server = ZooKeeperServer(self.data_dir / "zookeeper").start()
            self.zookeeper = self._server.connect
        for n in range(self.size):
            self.start_broker(n)
        if self.security is not None:
            self.security.write_client_properties(self.bootstrap)
        return self

    def client_config(self) -> dict[str, str]:
        """confluent-kafka settings that reach the cluster: the admin user's when secured."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap}
        return self.security.librdkafka_config(self.bootstrap)

    def start_broker(self, n: int) -> EmbeddedBroker:
        assert self.zookeeper is not None, "start() first"
        broker = EmbeddedBroker(
            {
                "broker.id": str(n),
                "log.dirs": str(self.data_dir / f"broker-{n}"),
                "zookeeper.connect": self.zookeeper,
                "zookeeper.session.timeout.ms": "2000",
                "offsets.topic.replication.factor": str(min(3, self.size)),
                "default.replication.factor": str(min(3, self.size)),
                **self.overrides,
            },
            secure=self.security or False,
        ).start(timeout=60)
        self.brokers[n] = broker
        return broker

    def stop_broker(self, n: int) -> None:
        """Clean shutdown of broker ``n`` (its leaderships move away first)."""
        broker = self.brokers[n]
        if broker is not None:
            broker.stop(timeout=60)
            self.brokers[n] = None

    def stop(self) -> None:
        for n in range(self.size):
            self.stop_broker(n)
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
