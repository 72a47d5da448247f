"""ZooKeeper sessions for the tests of the ``zk_*`` modules: a raw kazoo client, a real
session expiry, a registration left by a killed process, a topic with its states. The
``new_client`` fixture (conftest.py) gives started ZkClients on the test's chroot."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

from kazoo.client import KazooClient

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_controller import ControllerLease
from tierlog.broker.coordination.zk_data import LeaderAndIsr
from tierlog.broker.coordination.zk_session import SessionEvent, ZkSession

TOPIC_ID = uuid.UUID("6f1c9f5e-0d1b-4c35-9a3f-1d2e3f405162")
SESSION_TIMEOUT_MS = 6_000

ClientFactory = Callable[[], ZkClient]


def raw_client(connect: str) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=SESSION_TIMEOUT_MS / 1000)
    client.start(timeout=10)
    return client


def expire_session(zk_connect: str, client: ZkClient | ZkSession) -> None:
    """Expire ``client``'s session for real, the way ZooKeeper's FAQ suggests: open a second
    connection with the same session id and password, then close it. ``client`` sees its
    session EXPIRED, and kazoo connects it again with a NEW session."""
    session = client.session if isinstance(client, ZkClient) else client
    events: queue.Queue[SessionEvent] = queue.Queue()
    session.on_session_event(events.put)
    session_id, password = session.kazoo.client_id
    twin = KazooClient(hosts=zk_connect, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()
    seen: list[SessionEvent] = []
    deadline = time.monotonic() + 15
    while seen[-2:] != [SessionEvent.EXPIRED, SessionEvent.CONNECTED]:
        seen.append(events.get(timeout=max(0.1, deadline - time.monotonic())))
    assert session.session_id != session_id


def started_topic(client: ZkClient, lease: ControllerLease, topic: str = "orders") -> None:
    """A topic with two partitions on brokers 1 and 2 and their initial states."""
    client.topics.create(topic, {0: [1, 2], 1: [2, 1]}, TOPIC_ID, {"retention.ms": "1000"})
    client.partition_states.create(
        lease,
        topic,
        {0: LeaderAndIsr(1, 0, (1, 2), lease.epoch), 1: LeaderAndIsr(2, 0, (2, 1), lease.epoch)},
    )


def dead_registration(zk_connect: str, broker_id: int, session_timeout_s: float) -> int:
    """Register ``broker_id`` from a child process that is then SIGKILLed, as a crashed
    broker leaves it: the ephemeral znode stays until ZooKeeper expires the session.
    Returns that session's id."""
    code = (
        "import os, signal, sys\n"
        "from kazoo.client import KazooClient\n"
        "c = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[3]))\n"
        "c.start(timeout=10)\n"
        "c.create(sys.argv[2], b'{}', ephemeral=True)\n"
        "print(c.client_id[0], flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    path = zk_data.broker_path(broker_id)
    done = subprocess.run(
        [sys.executable, "-c", code, zk_connect, path, str(session_timeout_s)],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    return int(done.stdout)
