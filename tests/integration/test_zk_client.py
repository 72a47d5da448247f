"""ZkClient against a real ZooKeeper: registration and broker epochs (KIP-380), controller
election and fencing (KAFKA-6082), zkVersion-guarded partition states, producer id blocks,
topic admin and deletion, session expiry. Each test runs in its own chroot."""

from __future__ import annotations

import logging
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import TopicExistsError, UnknownTopicError
from tierlog.broker.coordination.zk_brokers import stale_registration_bound_s
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_controller import ControllerLease
from tierlog.broker.coordination.zk_data import BrokerInfo, LeaderAndIsr
from tierlog.broker.coordination.zk_errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    StalePartitionStateError,
)
from tierlog.broker.coordination.zk_session import SessionEvent, ZkSession, parse_connect

pytestmark = pytest.mark.timeout(20)

TOPIC_ID = uuid.UUID("6f1c9f5e-0d1b-4c35-9a3f-1d2e3f405162")
SESSION_TIMEOUT_MS = 6_000

ClientFactory = Callable[[], ZkClient]


@pytest.fixture
def new_client(zk_connect: str) -> Iterator[ClientFactory]:
    """Started ZkClients on the test's chroot, all stopped at the end."""
    clients: list[ZkClient] = []

    def make() -> ZkClient:
        client = ZkClient(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        client.start()
        clients.append(client)
        return client

    try:
        yield make
    finally:
        for client in clients:
            client.stop()


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


# -- connect string and start-up ----------------------------------------------------------------


def test_parse_connect() -> None:
    assert parse_connect("a:1,b:2/kafka/prod/") == ("a:1,b:2", "/kafka/prod")
    assert parse_connect("a:1") == ("a:1", None)
    assert parse_connect("a:1/") == ("a:1", None)
    with pytest.raises(ValueError):
        parse_connect("/chroot")


def test_start_creates_chroot_and_kafkas_persistent_paths(
    zk_connect: str, new_client: ClientFactory
) -> None:
    hosts, chroot = parse_connect(zk_connect)
    assert chroot is not None
    new_client()
    raw = raw_client(hosts)
    try:
        for path in zk_data.PERSISTENT_PATHS:
            assert raw.exists(chroot + path) is not None, path
        assert raw.exists("/brokers") is None  # nothing outside the chroot
    finally:
        raw.stop()
        raw.close()
    new_client()  # a second start on an existing layout changes nothing


def test_cluster_id_first_candidate_wins(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    assert a.brokers.get_or_create_cluster_id("first") == "first"
    assert b.brokers.get_or_create_cluster_id("second") == "first"


# -- broker registration -----------------------------------------------------------------------


def test_registration_is_ephemeral_and_its_epoch_is_the_czxid(
    zk_connect: str, new_client: ClientFactory
) -> None:
    a, observer = new_client(), new_client()
    epoch = a.brokers.register(BrokerInfo.plaintext(1, "127.0.0.1", 9092, rack="r1"))
    _, stat = observer.kazoo.get(zk_data.broker_path(1))
    assert stat.czxid == epoch and stat.ephemeralOwner == a.session.session_id
    brokers = observer.brokers.live()
    assert list(brokers) == [1]
    info, seen_epoch = brokers[1]
    assert (info.host, info.port, info.rack, seen_epoch) == ("127.0.0.1", 9092, "r1", epoch)

    a.stop()  # closing the session deletes its ephemeral znode at once
    assert observer.brokers.live() == {}

    again = new_client().brokers.register(BrokerInfo.plaintext(1, "127.0.0.1", 9092))
    assert again > epoch  # a new incarnation: a larger broker epoch (KIP-380)


def test_a_second_live_registration_of_an_id_is_refused(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    epoch = a.brokers.register(BrokerInfo.plaintext(1, "h1", 9092))
    with pytest.raises(BrokerIdInUseError):
        b.brokers.register(BrokerInfo.plaintext(1, "h2", 9092), stale_timeout_s=0)
    # The owner registering again (a create retried after a connection loss) is fine.
    assert a.brokers.register(BrokerInfo.plaintext(1, "h1", 9092)) == epoch
    assert b.brokers.register(BrokerInfo.plaintext(2, "h2", 9092)) > epoch
    assert sorted(a.brokers.live()) == [1, 2]


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


def test_a_killed_brokers_registration_is_waited_out(
    zk_connect: str, new_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 20 item 11: a broker restarted within its old session's timeout registers once
    ZooKeeper expires that session, instead of failing at once as Kafka does."""
    a = new_client()  # creates the chroot and /brokers/ids
    stale_session = dead_registration(zk_connect, 1, session_timeout_s=2.0)
    stat = a.kazoo.exists(zk_data.broker_path(1))
    assert stat is not None and stat.ephemeralOwner == stale_session  # it is still there
    began = time.monotonic()
    with caplog.at_level(logging.INFO, "tierlog.broker.coordination.zk_brokers"):
        epoch = a.brokers.register(BrokerInfo.plaintext(1, "h1", 9092), stale_timeout_s=10)
    waited = time.monotonic() - began
    _, stat = a.kazoo.get(zk_data.broker_path(1))
    assert (stat.czxid, stat.ephemeralOwner) == (epoch, a.session.session_id)
    assert waited < 10  # it ended when the registration went, not at the bound
    waiting = [r.getMessage() for r in caplog.records if "still registered" in r.getMessage()]
    assert len(waiting) == 1 and f"0x{stale_session:x}" in waiting[0], waiting


def test_a_live_registration_is_refused_after_the_bound(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    epoch = a.brokers.register(BrokerInfo.plaintext(1, "h1", 9092))
    began = time.monotonic()
    with pytest.raises(BrokerIdInUseError, match=r"after waiting 2 s .* broker\.id=1;"):
        b.brokers.register(BrokerInfo.plaintext(1, "h2", 9092), stale_timeout_s=2)
    assert time.monotonic() - began >= 2
    _, stat = a.kazoo.get(zk_data.broker_path(1))
    assert (stat.czxid, stat.ephemeralOwner) == (epoch, a.session.session_id)


def test_the_wait_for_a_stale_registration_is_the_session_timeout_and_a_margin() -> None:
    assert stale_registration_bound_s(18.0) == 24.0  # Kafka's default session: 18 + 18/3
    assert stale_registration_bound_s(2.0) == 5.0  # at least 3 s: ZooKeeper's tick
    assert stale_registration_bound_s(6.0) == 9.0


def test_session_expiry_removes_registration_and_controller(
    zk_connect: str, new_client: ClientFactory
) -> None:
    a, observer = new_client(), new_client()
    epoch = a.brokers.register(BrokerInfo.plaintext(1, "h1", 9092))
    assert a.controller.try_elect(1) is not None

    expire_session(zk_connect, a)

    assert observer.brokers.live() == {}
    assert observer.controller.holder() is None
    # Re-registering on the new session works and yields a larger epoch.
    assert a.brokers.register(BrokerInfo.plaintext(1, "h1", 9092)) > epoch
    assert list(observer.brokers.live()) == [1]


# -- controller election and fencing -------------------------------------------------------------


def test_only_one_of_two_clients_becomes_controller(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    barrier = threading.Barrier(2)
    leases: dict[int, ControllerLease | None] = {}

    def elect(client: ZkClient, broker_id: int) -> None:
        barrier.wait(5)
        leases[broker_id] = client.controller.try_elect(broker_id)

    threads = [threading.Thread(target=elect, args=(c, i)) for i, c in ((1, a), (2, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    winners = [lease for lease in leases.values() if lease is not None]
    assert len(leases) == 2 and len(winners) == 1
    (lease,) = winners
    assert lease.epoch == 1  # /controller_epoch created at 0, bumped by the first controller
    assert a.controller.holder() == lease.broker_id
    assert a.controller.epoch() == (1, lease.epoch_zk_version)

    # The other client fails while a controller lives, and wins after it resigns.
    loser = b if lease.broker_id == 1 else a
    assert loser.controller.try_elect(3) is None
    (a if lease.broker_id == 1 else b).controller.resign(lease)
    second = loser.controller.try_elect(3)
    assert second is not None
    assert second.epoch == 2 and second.epoch_zk_version > lease.epoch_zk_version


def test_a_deposed_controllers_writes_raise_and_change_nothing(
    zk_connect: str, new_client: ClientFactory
) -> None:
    a, b = new_client(), new_client()
    old = a.controller.try_elect(1)
    assert old is not None
    started_topic(a, old)
    state, version = a.partition_states.get("orders", 0) or pytest.fail("no state")

    expire_session(zk_connect, a)  # /controller goes with a's session
    new = b.controller.try_elect(2)
    assert new is not None and new.epoch == old.epoch + 1

    moved = LeaderAndIsr(2, state.leader_epoch + 1, (2,), old.epoch)
    with pytest.raises(ControllerMovedError):
        a.partition_states.update(old, "orders", 0, moved, version)
    with pytest.raises(ControllerMovedError):
        a.topics.delete(old, "orders")
    with pytest.raises(ControllerMovedError):
        a.partition_states.create(old, "orders", {2: moved})
    with pytest.raises(ControllerMovedError):
        a.controller.resign(old)
    assert b.partition_states.get("orders", 0) == (state, version)
    assert sorted(b.partition_states.of_topic("orders")) == [0, 1]
    assert b.topics.names() == ["orders"]
    assert b.controller.holder() == 2

    # The new controller's writes go through.
    update = LeaderAndIsr(2, state.leader_epoch + 1, (2,), new.epoch)
    assert b.partition_states.update(new, "orders", 0, update, version) == version + 1


def test_a_stale_partition_state_write_is_refused(new_client: ClientFactory) -> None:
    a = new_client()
    lease = a.controller.try_elect(1)
    assert lease is not None
    started_topic(a, lease)
    state, version = a.partition_states.get("orders", 0) or pytest.fail("no state")
    shrunk = LeaderAndIsr(1, state.leader_epoch, (1,), lease.epoch)
    assert a.partition_states.update(lease, "orders", 0, shrunk, version) == version + 1

    grown = LeaderAndIsr(1, state.leader_epoch, (1, 2), lease.epoch)
    with pytest.raises(StalePartitionStateError):
        a.partition_states.update(lease, "orders", 0, grown, version)
    assert a.partition_states.get("orders", 0) == (shrunk, version + 1)
    with pytest.raises(StalePartitionStateError):
        a.partition_states.create(lease, "orders", {0: grown})
    with pytest.raises(UnknownTopicError):
        a.partition_states.update(lease, "orders", 9, grown, 0)


# -- producer ids -------------------------------------------------------------------------------


def test_producer_id_blocks_from_concurrent_clients_never_overlap(
    new_client: ClientFactory,
) -> None:
    clients = [new_client(), new_client()]
    starts: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def allocate(client: ZkClient, broker_id: int) -> None:
        barrier.wait(5)
        for _ in range(15):
            first = client.producer_ids.allocate(broker_id, block_size=10)
            with lock:
                starts.append(first)

    threads = [
        threading.Thread(target=allocate, args=(clients[i % 2], i % 2 + 1)) for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    # 60 blocks of 10: exactly 0, 10, ..., 590, each handed out once.
    assert sorted(starts) == list(range(0, 600, 10))
    latest = zk_data.decode_producer_id_block(clients[0].kazoo.get(zk_data.PRODUCER_ID_BLOCK)[0])
    assert latest is not None and latest.block_end == 599


# -- topics -------------------------------------------------------------------------------------


def test_create_topic_twice_raises_and_configs_are_kept(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    a.topics.create("orders", {0: [1, 2]}, TOPIC_ID, {"retention.ms": "1000"})
    with pytest.raises(TopicExistsError):
        b.topics.create("orders", {0: [2]}, uuid.uuid4(), {"retention.ms": "5"})
    topic = b.topics.get("orders")
    assert topic is not None
    assert (topic.partitions, topic.topic_id) == ({0: [1, 2]}, TOPIC_ID)
    assert b.configs.topic("orders") == {"retention.ms": "1000"}
    assert b.topics.names() == ["orders"]
    assert b.topics.get("nope") is None and b.partition_states.get("nope", 0) is None


def test_topic_configs_and_partitions_change(new_client: ClientFactory) -> None:
    a = new_client()
    a.topics.create("orders", {0: [1]}, TOPIC_ID, {})
    a.configs.set_topic("orders", {"cleanup.policy": "compact"})
    assert a.configs.topic("orders") == {"cleanup.policy": "compact"}
    changes = a.kazoo.get_children(zk_data.CONFIG_CHANGES)
    assert len(changes) == 1 and changes[0].startswith(zk_data.CONFIG_CHANGE_PREFIX)
    path = zk_data.child_path(zk_data.CONFIG_CHANGES, changes[0])
    assert zk_data.decode_config_change(path, a.kazoo.get(path)[0]) == "topics/orders"
    with pytest.raises(UnknownTopicError):
        a.configs.set_topic("nope", {})

    grown = a.topics.add_partitions("orders", {0: [1], 1: [2], 2: [1]})
    assert grown.topic_id == TOPIC_ID
    assert a.topics.get("orders") == grown
    with pytest.raises(ValueError):
        a.topics.add_partitions("orders", {0: [2], 1: [2], 2: [1], 3: [1]})


def test_topic_deletion_request_then_controller_deletes(new_client: ClientFactory) -> None:
    admin, controller = new_client(), new_client()
    lease = controller.controller.try_elect(1)
    assert lease is not None
    started_topic(admin, lease)
    admin.topics.create("kept", {0: [1]}, uuid.uuid4(), {})
    with pytest.raises(UnknownTopicError):
        admin.topics.request_deletion("nope")

    admin.topics.request_deletion("orders")
    admin.topics.request_deletion("orders")  # asking twice is harmless
    assert controller.topics.pending_deletions() == ["orders"]
    controller.topics.delete(lease, "orders")

    assert controller.topics.names() == ["kept"]
    assert controller.topics.pending_deletions() == []
    assert controller.configs.topic("orders") == {}
    assert controller.partition_states.of_topic("orders") == {}
    assert not controller.kazoo.exists(zk_data.topic_config_path("orders"))
    controller.topics.delete(lease, "orders")  # already gone: nothing to do
    admin.topics.create("orders", {0: [1]}, uuid.uuid4(), {})  # the name is free again


def test_create_topic_refused_while_deletion_pending(new_client: ClientFactory) -> None:
    a = new_client()
    a.topics.create("orders", {0: [1]}, TOPIC_ID, {})
    a.topics.request_deletion("orders")
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        a.topics.create("orders", {0: [1]}, TOPIC_ID, {})


def test_admin_request_znodes_are_deleted_by_the_controller(new_client: ClientFactory) -> None:
    a = new_client()
    lease = a.controller.try_elect(1)
    assert lease is not None
    a.kazoo.create(zk_data.REASSIGN_PARTITIONS, zk_data.encode_reassignment({("t", 0): [1]}))
    a.topics.delete_reassign_partitions(lease)
    a.topics.delete_reassign_partitions(lease)  # absent: nothing to do
    assert a.kazoo.exists(zk_data.REASSIGN_PARTITIONS) is None


# -- watches ------------------------------------------------------------------------------------


def test_watches_see_brokers_and_the_controller(new_client: ClientFactory) -> None:
    watcher, broker = new_client(), new_client()
    children: queue.Queue[list[str]] = queue.Queue()
    data: queue.Queue[tuple[bytes | None, int | None]] = queue.Queue()
    watcher.session.watch_children(zk_data.BROKER_IDS, lambda c: children.put(sorted(c)))
    watcher.session.watch_data(zk_data.CONTROLLER, lambda d, v: data.put((d, v)))
    assert children.get(timeout=5) == []
    assert data.get(timeout=5) == (None, None)

    broker.brokers.register(BrokerInfo.plaintext(4, "h", 9092))
    assert children.get(timeout=5) == ["4"]
    broker.controller.try_elect(4)
    raw, version = data.get(timeout=5)
    assert zk_data.decode_controller(raw).broker_id == 4 and version == 0
