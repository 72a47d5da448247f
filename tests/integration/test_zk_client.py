"""ZkClient against a real ZooKeeper: registration and broker epochs (KIP-380), controller
election and fencing (KAFKA-6082), zkVersion-guarded partition states, producer id blocks,
topic admin and deletion, session expiry. Each test runs in its own chroot."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import TopicExistsError, UnknownTopicError
from tierlog.broker.coordination.zk_client import (
    BrokerIdInUseError,
    ControllerLease,
    ControllerMovedError,
    SessionEvent,
    StalePartitionStateError,
    ZkClient,
    parse_connect,
)
from tierlog.broker.coordination.zk_data import BrokerInfo, LeaderAndIsr

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


def expire_session(zk_connect: str, client: ZkClient) -> None:
    """Expire ``client``'s session for real, the way ZooKeeper's FAQ suggests: open a second
    connection with the same session id and password, then close it. ``client`` sees its
    session EXPIRED, and kazoo connects it again with a NEW session."""
    events: queue.Queue[SessionEvent] = queue.Queue()
    client.on_session_event(events.put)
    session_id, password = client.kazoo.client_id
    twin = KazooClient(hosts=zk_connect, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()
    seen: list[SessionEvent] = []
    deadline = time.monotonic() + 15
    while seen[-2:] != [SessionEvent.EXPIRED, SessionEvent.CONNECTED]:
        seen.append(events.get(timeout=max(0.1, deadline - time.monotonic())))
    assert client.session_id != session_id


def started_topic(client: ZkClient, lease: ControllerLease, topic: str = "orders") -> None:
    """A topic with two partitions on brokers 1 and 2 and their initial states."""
    client.create_topic(topic, {0: [1, 2], 1: [2, 1]}, TOPIC_ID, {"retention.ms": "1000"})
    client.create_partition_states(
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
    assert a.get_or_create_cluster_id("first") == "first"
    assert b.get_or_create_cluster_id("second") == "first"


# -- broker registration -----------------------------------------------------------------------


def test_registration_is_ephemeral_and_its_epoch_is_the_czxid(
    zk_connect: str, new_client: ClientFactory
) -> None:
    a, observer = new_client(), new_client()
    epoch = a.register_broker(BrokerInfo.plaintext(1, "127.0.0.1", 9092, rack="r1"))
    _, stat = observer.kazoo.get(zk_data.broker_path(1))
    assert stat.czxid == epoch and stat.ephemeralOwner == a.session_id
    brokers = observer.get_brokers()
    assert list(brokers) == [1]
    info, seen_epoch = brokers[1]
    assert (info.host, info.port, info.rack, seen_epoch) == ("127.0.0.1", 9092, "r1", epoch)

    a.stop()  # closing the session deletes its ephemeral znode at once
    assert observer.get_brokers() == {}

    again = new_client().register_broker(BrokerInfo.plaintext(1, "127.0.0.1", 9092))
    assert again > epoch  # a new incarnation: a larger broker epoch (KIP-380)


def test_a_second_live_registration_of_an_id_is_refused(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    epoch = a.register_broker(BrokerInfo.plaintext(1, "h1", 9092))
    with pytest.raises(BrokerIdInUseError):
        b.register_broker(BrokerInfo.plaintext(1, "h2", 9092))
    # The owner registering again (a create retried after a connection loss) is fine.
    assert a.register_broker(BrokerInfo.plaintext(1, "h1", 9092)) == epoch
    assert b.register_broker(BrokerInfo.plaintext(2, "h2", 9092)) > epoch
    assert sorted(a.get_brokers()) == [1, 2]


def test_session_expiry_removes_registration_and_controller(
    zk_connect: str, new_client: ClientFactory
) -> None:
    a, observer = new_client(), new_client()
    epoch = a.register_broker(BrokerInfo.plaintext(1, "h1", 9092))
    assert a.try_elect_controller(1) is not None

    expire_session(zk_connect, a)

    assert observer.get_brokers() == {}
    assert observer.get_controller_id() is None
    # Re-registering on the new session works and yields a larger epoch.
    assert a.register_broker(BrokerInfo.plaintext(1, "h1", 9092)) > epoch
    assert list(observer.get_brokers()) == [1]


# -- controller election and fencing -------------------------------------------------------------


def test_only_one_of_two_clients_becomes_controller(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    barrier = threading.Barrier(2)
    leases: dict[int, ControllerLease | None] = {}

    def elect(client: ZkClient, broker_id: int) -> None:
        barrier.wait(5)
        leases[broker_id] = client.try_elect_controller(broker_id)

    threads = [threading.Thread(target=elect, args=(c, i)) for i, c in ((1, a), (2, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    winners = [lease for lease in leases.values() if lease is not None]
    assert len(leases) == 2 and len(winners) == 1
    (lease,) = winners
    assert lease.epoch == 1  # /controller_epoch created at 0, bumped by the first controller
    assert a.get_controller_id() == lease.broker_id
    assert a.get_controller_epoch() == (1, lease.epoch_zk_version)

    # The other client fails while a controller lives, and wins after it resigns.
    loser = b if lease.broker_id == 1 else a
    assert loser.try_elect_controller(3) is None
    (a if lease.broker_id == 1 else b).resign_controller(lease)
    second = loser.try_elect_controller(3)
    assert second is not None
    assert second.epoch == 2 and second.epoch_zk_version > lease.epoch_zk_version


def test_a_deposed_controllers_writes_raise_and_change_nothing(
    zk_connect: str, new_client: ClientFactory
) -> None:
    a, b = new_client(), new_client()
    old = a.try_elect_controller(1)
    assert old is not None
    started_topic(a, old)
    state, version = a.get_partition_state("orders", 0) or pytest.fail("no state")

    expire_session(zk_connect, a)  # /controller goes with a's session
    new = b.try_elect_controller(2)
    assert new is not None and new.epoch == old.epoch + 1

    moved = LeaderAndIsr(2, state.leader_epoch + 1, (2,), old.epoch)
    with pytest.raises(ControllerMovedError):
        a.update_partition_state(old, "orders", 0, moved, version)
    with pytest.raises(ControllerMovedError):
        a.delete_topic(old, "orders")
    with pytest.raises(ControllerMovedError):
        a.create_partition_states(old, "orders", {2: moved})
    with pytest.raises(ControllerMovedError):
        a.resign_controller(old)
    assert b.get_partition_state("orders", 0) == (state, version)
    assert sorted(b.get_partition_states("orders")) == [0, 1]
    assert b.get_topics() == ["orders"]
    assert b.get_controller_id() == 2

    # The new controller's writes go through.
    update = LeaderAndIsr(2, state.leader_epoch + 1, (2,), new.epoch)
    assert b.update_partition_state(new, "orders", 0, update, version) == version + 1


def test_a_stale_partition_state_write_is_refused(new_client: ClientFactory) -> None:
    a = new_client()
    lease = a.try_elect_controller(1)
    assert lease is not None
    started_topic(a, lease)
    state, version = a.get_partition_state("orders", 0) or pytest.fail("no state")
    shrunk = LeaderAndIsr(1, state.leader_epoch, (1,), lease.epoch)
    assert a.update_partition_state(lease, "orders", 0, shrunk, version) == version + 1

    grown = LeaderAndIsr(1, state.leader_epoch, (1, 2), lease.epoch)
    with pytest.raises(StalePartitionStateError):
        a.update_partition_state(lease, "orders", 0, grown, version)
    assert a.get_partition_state("orders", 0) == (shrunk, version + 1)
    with pytest.raises(StalePartitionStateError):
        a.create_partition_states(lease, "orders", {0: grown})
    with pytest.raises(UnknownTopicError):
        a.update_partition_state(lease, "orders", 9, grown, 0)


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
            first = client.allocate_producer_id_block(broker_id, block_size=10)
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
    a.create_topic("orders", {0: [1, 2]}, TOPIC_ID, {"retention.ms": "1000"})
    with pytest.raises(TopicExistsError):
        b.create_topic("orders", {0: [2]}, uuid.uuid4(), {"retention.ms": "5"})
    topic = b.get_topic("orders")
    assert topic is not None
    assert (topic.partitions, topic.topic_id) == ({0: [1, 2]}, TOPIC_ID)
    assert b.get_topic_configs("orders") == {"retention.ms": "1000"}
    assert b.get_topics() == ["orders"]
    assert b.get_topic("nope") is None and b.get_partition_state("nope", 0) is None


def test_topic_configs_and_partitions_change(new_client: ClientFactory) -> None:
    a = new_client()
    a.create_topic("orders", {0: [1]}, TOPIC_ID, {})
    a.set_topic_configs("orders", {"cleanup.policy": "compact"})
    assert a.get_topic_configs("orders") == {"cleanup.policy": "compact"}
    changes = a.kazoo.get_children(zk_data.CONFIG_CHANGES)
    assert len(changes) == 1 and changes[0].startswith(zk_data.CONFIG_CHANGE_PREFIX)
    path = zk_data.child_path(zk_data.CONFIG_CHANGES, changes[0])
    assert zk_data.decode_config_change(path, a.kazoo.get(path)[0]) == "topics/orders"
    with pytest.raises(UnknownTopicError):
        a.set_topic_configs("nope", {})

    grown = a.add_partitions("orders", {0: [1], 1: [2], 2: [1]})
    assert grown.topic_id == TOPIC_ID
    assert a.get_topic("orders") == grown
    with pytest.raises(ValueError):
        a.add_partitions("orders", {0: [2], 1: [2], 2: [1], 3: [1]})


def test_topic_deletion_request_then_controller_deletes(new_client: ClientFactory) -> None:
    admin, controller = new_client(), new_client()
    lease = controller.try_elect_controller(1)
    assert lease is not None
    started_topic(admin, lease)
    admin.create_topic("kept", {0: [1]}, uuid.uuid4(), {})
    with pytest.raises(UnknownTopicError):
        admin.request_topic_deletion("nope")

    admin.request_topic_deletion("orders")
    admin.request_topic_deletion("orders")  # asking twice is harmless
    assert controller.get_pending_deletions() == ["orders"]
    controller.delete_topic(lease, "orders")

    assert controller.get_topics() == ["kept"]
    assert controller.get_pending_deletions() == []
    assert controller.get_topic_configs("orders") == {}
    assert controller.get_partition_states("orders") == {}
    assert not controller.kazoo.exists(zk_data.topic_config_path("orders"))
    controller.delete_topic(lease, "orders")  # already gone: nothing to do
    admin.create_topic("orders", {0: [1]}, uuid.uuid4(), {})  # the name is free again


def test_create_topic_refused_while_deletion_pending(new_client: ClientFactory) -> None:
    a = new_client()
    a.create_topic("orders", {0: [1]}, TOPIC_ID, {})
    a.request_topic_deletion("orders")
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        a.create_topic("orders", {0: [1]}, TOPIC_ID, {})


def test_admin_request_znodes_are_deleted_by_the_controller(new_client: ClientFactory) -> None:
    a = new_client()
    lease = a.try_elect_controller(1)
    assert lease is not None
    a.kazoo.create(zk_data.REASSIGN_PARTITIONS, zk_data.encode_reassignment({("t", 0): [1]}))
    a.delete_reassign_partitions(lease)
    a.delete_reassign_partitions(lease)  # absent: nothing to do
    assert a.kazoo.exists(zk_data.REASSIGN_PARTITIONS) is None


# -- watches ------------------------------------------------------------------------------------


def test_watches_see_brokers_and_the_controller(new_client: ClientFactory) -> None:
    watcher, broker = new_client(), new_client()
    children: queue.Queue[list[str]] = queue.Queue()
    data: queue.Queue[tuple[bytes | None, int | None]] = queue.Queue()
    watcher.watch_children(zk_data.BROKER_IDS, lambda c: children.put(sorted(c)))
    watcher.watch_data(zk_data.CONTROLLER, lambda d, v: data.put((d, v)))
    assert children.get(timeout=5) == []
    assert data.get(timeout=5) == (None, None)

    broker.register_broker(BrokerInfo.plaintext(4, "h", 9092))
    assert children.get(timeout=5) == ["4"]
    broker.try_elect_controller(4)
    raw, version = data.get(timeout=5)
    assert zk_data.decode_controller(raw).broker_id == 4 and version == 0
