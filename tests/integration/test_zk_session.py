"""zk_session against a real ZooKeeper: the connect string and its chroot, Kafka's persistent
paths at start, and watches on children and data. Each test runs in its own chroot."""

from __future__ import annotations

import queue

import pytest

from tests.integration.zk_clients import ClientFactory, raw_client
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_data import BrokerInfo
from tierlog.broker.coordination.zk_session import parse_connect

pytestmark = pytest.mark.timeout(20)


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
