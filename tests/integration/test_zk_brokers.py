"""zk_brokers against a real ZooKeeper: the cluster id, registrations and broker epochs
(KIP-380), a killed broker's registration waited out and a live one refused (issue 20 item
11), and session expiry. Each test runs in its own chroot."""

from __future__ import annotations

import logging
import time

import pytest

from tests.integration.zk_clients import ClientFactory, dead_registration, expire_session
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_brokers import stale_registration_bound_s
from tierlog.broker.coordination.zk_data import BrokerInfo
from tierlog.broker.coordination.zk_errors import BrokerIdInUseError

pytestmark = pytest.mark.timeout(20)


def test_cluster_id_first_candidate_wins(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    assert a.brokers.get_or_create_cluster_id("first") == "first"
    assert b.brokers.get_or_create_cluster_id("second") == "first"


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
