"""Cluster membership: the cluster id (``/cluster/id``) and the brokers' ephemeral
registrations (``/brokers/ids/<id>``), whose czxid is the broker epoch (KIP-380).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import CoordinationError
from tierlog.broker.coordination.zk_data import BrokerInfo
from tierlog.broker.coordination.zk_errors import BrokerIdInUseError
from tierlog.broker.coordination.zk_session import MAX_ATTEMPTS, ZkSession
from tierlog.util.clock import Clock, SystemClock

try:
    from kazoo.exceptions import NodeExistsError
except ImportError as e:  # pragma: no cover - zk_session says how to install it
    raise ImportError(f"cluster mode needs kazoo ({e}): pip install 'tierlog[cluster]'") from e

log = logging.getLogger(__name__)


class BrokerRegistry:
    """Args:
    session: a started session; registrations are its ephemeral znodes.
    clock: stamps registrations (Kafka's timestamp field).
    """

    def __init__(self, session: ZkSession, clock: Clock | None = None) -> None:
        self._session = session
        self._clock = clock or SystemClock()

    def get_or_create_cluster_id(self, candidate: str) -> str:
        """The cluster's id; ``candidate`` becomes it if there is none yet (Kafka's
        ``KafkaZkClient.createOrGetClusterId``): all brokers agree whoever came first."""
        existing = self._session.get(zk_data.CLUSTER_ID)
        if existing is not None:
            return zk_data.decode_cluster_id(existing.data)
        kazoo = self._session.kazoo
        try:
            kazoo.create(zk_data.CLUSTER_ID, zk_data.encode_cluster_id(candidate), makepath=True)
            return candidate
        except NodeExistsError:
            data, _ = kazoo.get(zk_data.CLUSTER_ID)
            return zk_data.decode_cluster_id(data)

    def register(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns the broker epoch, its czxid
        (KIP-380). Call again after ``SessionEvent.EXPIRED`` + ``CONNECTED``: the new
        registration has a larger epoch.

        Raises:
            BrokerIdInUseError: another live session has registered this id.
        """
        info = replace(info, timestamp_ms=self._clock.milliseconds())
        path = zk_data.broker_path(info.broker_id)
        data = zk_data.encode_broker(info)
        for _ in range(MAX_ATTEMPTS):
            epoch = self._create(path, data)
            if epoch is not None:
                log.info("registered broker %d, epoch %d", info.broker_id, epoch)
                return epoch
            stat = self._session.kazoo.exists(path)
            if stat is None:
                continue  # the other registration's session just ended: try again
            # KafkaZkClient.checkedEphemeralCreate: a create retried after a connection loss
            # finds the node its own session made; that is a success, not a conflict.
            if stat.ephemeralOwner == self._session.session_id:
                return int(stat.czxid)
            raise BrokerIdInUseError(
                f"broker id {info.broker_id} is registered by another live session"
                f" (0x{stat.ephemeralOwner:x}) at {path}"
            )
        raise CoordinationError(f"could not register broker {info.broker_id}")

    def _create(self, path: str, data: bytes) -> int | None:
        """The new registration's czxid, or None when the znode exists."""
        try:
            _, stat = self._session.kazoo.create(path, data, ephemeral=True, include_data=True)
        except NodeExistsError:
            return None
        return int(stat.czxid)

    def deregister(self, broker_id: int) -> None:
        """Delete this session's registration while keeping the session (controlled
        shutdown: the controller moves the broker's leaderships away).

        Raises:
            kazoo's NoNodeError: there is no registration (the session expired).
        """
        self._session.kazoo.delete(zk_data.broker_path(broker_id))

    def live(self) -> dict[int, tuple[BrokerInfo, int]]:
        """Live brokers: id -> (registration, broker epoch)."""
        brokers: dict[int, tuple[BrokerInfo, int]] = {}
        for child in self._session.children(zk_data.BROKER_IDS):
            if not (child.isascii() and child.isdigit()):
                continue
            broker_id = int(child)
            found = self._session.get(zk_data.broker_path(broker_id))
            if found is not None:  # else it expired between the listing and the read
                brokers[broker_id] = (zk_data.decode_broker(broker_id, found.data), found.czxid)
        return brokers
