"""Cluster mode's ZooKeeper client: one session and the znode concerns built on it.

Kafka's ``KafkaZkClient`` and ``AdminZkClient`` were one class each with a method per znode;
here each ZooKeeper concern is its own small module over a shared session
(``zk_session.ZkSession``), as kazoo's recipes are built over a client:

- ``brokers`` (``zk_brokers``): the cluster id and broker registrations (broker epoch =
  the registration's czxid, KIP-380; a dead broker's registration is waited out);
- ``controller`` (``zk_controller``): the controller election and its lease, and the fence
  on every controller write (one multi that starts with
  ``check(/controller_epoch, lease.epoch_zk_version)``, KAFKA-6082);
- ``partition_states`` (``zk_partition_states``): leader/ISR states, written by the
  controller conditionally on each state znode's zkVersion;
- ``topics`` (``zk_topics``): assignments, topic creation and growth, deletion requests;
- ``configs`` (``zk_configs``): entity configs and their change notifications (topic
  overrides, client quotas);
- ``producer_ids`` (``zk_producer_ids``): producer id blocks;
- ``acls`` (``zk_acls``): ACLs in Kafka's layout (``/kafka-acl``, ``/kafka-acl-extended``
  and their change notifications; paths and JSON from ``tierlog.security.acl_zk``).

Paths and JSON come from ``zk_data``; errors from ``zk_errors``. The security and Kafka 4
work add their concerns the same way, one module each over the session, built here: SCRAM
credentials (``/config/users/<user>``, an entity config beside the user's quotas: through
``zk_configs``, with ``tierlog.security.scram_credentials`` for the value) and dynamic
broker configs (``/config/brokers/<id>`` and ``/config/brokers/<default>``, the same).

Threading: every method blocks on ZooKeeper round trips; see ``zk_session``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tierlog.broker.coordination.zk_acls import ZkAcls
from tierlog.broker.coordination.zk_auth import ZkIdentity
from tierlog.broker.coordination.zk_brokers import BrokerRegistry
from tierlog.broker.coordination.zk_configs import EntityConfigs
from tierlog.broker.coordination.zk_controller import ControllerElection
from tierlog.broker.coordination.zk_partition_states import PartitionStates
from tierlog.broker.coordination.zk_producer_ids import ProducerIdBlocks
from tierlog.broker.coordination.zk_session import (
    DEFAULT_SESSION_TIMEOUT_MS,
    SessionEvent,
    ZkSession,
)
from tierlog.broker.coordination.zk_tls import ZkTls
from tierlog.broker.coordination.zk_topics import TopicAdmin
from tierlog.util.clock import Clock, SystemClock


class ZkClient:
    """One session and its concerns.

    Args:
        connect: ``zookeeper.connect`` (``host:port[,host:port...][/chroot]``).
        session_timeout_ms: ``zookeeper.session.timeout.ms``.
        connection_timeout_ms: ``zookeeper.connection.timeout.ms`` (default: the session
            timeout).
        clock: stamps registrations and the controller znode; bounds waits.
        identity, secure_acls, tls: ZooKeeper authentication, Kafka's znode ACLs and TLS
            (``ZkSession``).
    """

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        clock: Clock | None = None,
        *,
        identity: ZkIdentity | None = None,
        secure_acls: bool = False,
        tls: ZkTls | None = None,
    ) -> None:
        clock = clock or SystemClock()
        self.session = session = ZkSession(
            connect,
            session_timeout_ms,
            connection_timeout_ms,
            identity=identity,
            secure_acls=secure_acls,
            tls=tls,
        )
        self.brokers = BrokerRegistry(session, clock)
        self.controller = ControllerElection(session, clock)
        self.partition_states = PartitionStates(session)
        self.topics = TopicAdmin(session)
        self.configs = EntityConfigs(session)
        self.producer_ids = ProducerIdBlocks(session)
        self.acls = ZkAcls(session, clock)

    def start(self) -> None:
        """Connect; see ``ZkSession.start``."""
        self.session.start()

    def stop(self) -> None:
        """Close the session (its ephemeral znodes go at once). Idempotent."""
        self.session.stop()

    def __enter__(self) -> ZkClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def kazoo(self) -> Any:
        """The underlying KazooClient, for kazoo's recipes and for tests."""
        return self.session.kazoo

    def on_session_event(self, callback: Callable[[SessionEvent], None]) -> None:
        """See ``ZkSession.on_session_event``."""
        self.session.on_session_event(callback)
