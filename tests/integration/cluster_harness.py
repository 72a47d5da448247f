"""A cluster of real tierlog broker processes on 127.0.0.1 and a real ZooKeeper, for tests."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from tests.broker.harness import BrokerProcess

# Short enough that a killed broker's session ends within seconds (ZooKeeper's minimum is
# two of the test server's 200 ms ticks).
SESSION_TIMEOUT_MS = 2000


class ProcessCluster:
    """Brokers 0..n-1 with their own data dirs under ``base``; ``zk_connect`` names the
    ZooKeeper chroot. ``overrides`` go to every broker."""

    def __init__(
        self, base: Path, zk_connect: str, brokers: int, overrides: dict[str, str] | None = None
    ) -> None:
        self.zk_connect = zk_connect
        self.brokers = [
            BrokerProcess(
                base / f"broker-{n}",
                {
                    "broker.id": str(n),
                    "zookeeper.connect": zk_connect,
                    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                    "replica.lag.time.max.ms": "3000",
                    "replica.fetch.wait.max.ms": "100",
                    "replica.fetch.backoff.ms": "100",
                    "offsets.topic.num.partitions": "3",
                    # One remote root for the cluster, as every real deployment needs.
                    "remote.log.storage.url": (base / "remote").resolve().as_uri(),
                    "offsets.topic.replication.factor": str(min(3, brokers)),
                    **(overrides or {}),
                },
            )
            for n in range(brokers)
        ]

    def start(self) -> ProcessCluster:
        for broker in self.brokers:
            broker.start(timeout=60)
        # A broker learns of the others through ZooKeeper watches, a moment after they
        # register: wait until every broker sees every other (a CreateTopics with RF 3
        # sent earlier is refused INVALID_REPLICATION_FACTOR, as in Kafka).
        self.wait_until(self._all_see_all, "every broker to see every broker")
        return self

    def _all_see_all(self) -> bool:
        live = [b for b in self.brokers if b.proc is not None]
        for broker in live:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            if len(admin.list_topics(timeout=5).brokers) < len(live):
                return False
        return True

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.proc is not None)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def partitions(self, topic: str) -> dict[int, Any]:
        """Metadata of each partition (leader, replicas, isrs) as a live broker sees it."""
        metadata = self.admin().list_topics(topic, timeout=10)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return {}
        return dict(found.partitions)

    def wait_until(self, check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except Exception:  # a broker mid-restart: ask again
                pass
            time.sleep(0.2)
        logs = "\n".join(
            f"--- broker {n}\n{b.log_text()[-3000:]}" for n, b in enumerate(self.brokers)
        )
        raise AssertionError(f"timed out waiting for {what}\n{logs}")

    def wait_for_full_isr(
        self, topic: str, partitions: int, rf: int, timeout: float = 30.0
    ) -> None:
        # Every live broker is asked: each learns partition states from its own ZooKeeper
        # watches, so one may still answer leader -1 a moment after another has the
        # elected leader (Kafka's metadata caches converge the same way). A check that
        # ends here lets the next question go to any broker.
        def full() -> bool:
            for broker in self.brokers:
                if broker.proc is None:
                    continue
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                found = admin.list_topics(topic, timeout=10).topics.get(topic)
                if found is None or found.error is not None:
                    return False
                states = found.partitions
                if len(states) != partitions or not all(
                    p.leader >= 0 and len(p.isrs) == rf for p in states.values()
                ):
                    return False
            return True

        self.wait_until(full, f"{topic}: every partition with {rf} in sync", timeout)

    def leader_of(self, topic: str, partition: int) -> int:
        return int(self.partitions(topic)[partition].leader)

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()

    def kill(self) -> None:
        for broker in self.brokers:
            broker.kill()


def signal_broker(cluster: ProcessCluster, broker: int, sig: signal.Signals) -> None:
    """Send ``sig`` to a running broker (SIGSTOP and SIGCONT pause and resume it)."""
    proc = cluster.brokers[broker].proc
    assert proc is not None
    os.kill(proc.pid, sig)
