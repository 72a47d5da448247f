"""What the two coordinators' internal topics (``__consumer_offsets``, ``__transaction_state``)
share: creation on first use with the broker's settings, and finding the broker that leads
one of their partitions, which is the coordinator of the keys placed on it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from tierlog.broker.coordination.api import BrokerRegistration, Coordinator
from tierlog.broker.replication.replica_manager import ReplicaManager
from tierlog.broker.replication.topic_error import TOPIC_ALREADY_EXISTS, TopicError

log = logging.getLogger(__name__)


async def ensure_created(
    replicas: ReplicaManager,
    cluster: Coordinator,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
) -> None:
    """Create the topic unless it exists; another broker creating it first is fine."""
    if cluster.topic(name) is not None:
        return
    try:
        await replicas.admin.create_topic(name, partitions, replication_factor, dict(configs))
    except TopicError as exc:
        if exc.code != TOPIC_ALREADY_EXISTS:
            raise


def leader_node(
    replicas: ReplicaManager, cluster: Coordinator, name: str, index: int
) -> BrokerRegistration | None:
    """The broker leading partition ``index`` of the internal topic, or None when a client
    should ask again (no leader yet, or not hosted here yet).

    A full disk (issue 10, item 9) makes creating the topic or hosting its partitions
    fail half-way: the metadata may list a partition this broker leads whose log or
    leader-epoch checkpoint could not be written, so it is not hosted and every key on it
    answered NOT_COORDINATOR until a restart. Hosting is retried here, on the
    FindCoordinator a client sends after each NOT_COORDINATOR, so coordinators come back by
    themselves once space is freed.
    """
    topic = cluster.topic(name)
    if topic is None:
        return None  # created by another broker a moment ago: ask again
    state = topic.partition_states.get(index)
    if state is None or state.leader < 0:
        return None  # no leader elected yet
    if state.leader == replicas.broker_id and replicas.partition(name, index) is None:
        try:
            replicas.sync()
        except Exception as exc:
            log.warning("cannot host %s-%d (will retry): %s", name, index, exc)
        if replicas.partition(name, index) is None:
            return None
    return next((b for b in cluster.brokers() if b.broker_id == state.leader), None)
